/* SPDX-License-Identifier: MIT */
/* A snapshot's capture of one writable area as a tar (snap_tar.c). */
#ifndef AL_DAEMON_SNAP_TAR_H
#define AL_DAEMON_SNAP_TAR_H

#include "common/error.h"

#include <openssl/evp.h>
#include <stdint.h>

/* Where a capture writes: fd, hashed into sha (unless NULL), at most cap bytes in all (then
 * ENOSPC). */
struct snap_sink {
	int fd;
	EVP_MD_CTX *sha;
	uint64_t bytes, cap;
	int err; /* the errno of a failed write, 0 if none */
};

/* Told of each entry left out (a FIFO, a socket, a device node, a mount, ...): path is the
 * sandbox path, fit for a log line. */
typedef void (*snap_skip_fn)(void *ctx, const char *path, const char *why);

/* Appends one tar of what area_fd (the area's directory, opened without following) holds
 * to sink; names are relative to the area. At most max_entries entries (E2BIG). */
int snap_capture_area(int area_fd, const char *area, struct snap_sink *sink, uint64_t max_entries,
		      snap_skip_fn skip, void *skip_ctx, struct al_error **err);

#endif
