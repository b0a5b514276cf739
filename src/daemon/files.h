/* SPDX-License-Identifier: MIT */
/*
 * File operations on a live sandbox's filesystem, done by the daemon (host
 * root) through a directory fd of the sandbox's root (/proc/<pid>/root).
 * Every path is resolved inside that root, never on the host: openat2 with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS for reads, and for writes a walk of
 * one component at a time with O_NOFOLLOW, so no symlink -- planted by the
 * sandbox, or earlier in the same archive -- can redirect a write.
 *
 * Paths are sandbox paths; a relative one is relative to `workdir`.
 * Writes are allowed only under the writable areas: /workspace, /tmp,
 * /home/user, /dev/shm and workdir (EACCES elsewhere). Created files belong
 * to `owner` (the sandbox user's host uid/gid).
 */
#ifndef AL_DAEMON_FILES_H
#define AL_DAEMON_FILES_H

#include <airlock/airlock.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct files_limits {
	uint64_t max_bytes;   /* total uncompressed bytes an archive may write */
	uint64_t max_entries; /* entries in one archive */
};

/*
 * Extracts a tar, tar.gz (or any format/filter libarchive detects) into dir
 * (created with parents if missing). Refused with EINVAL before anything is
 * written: absolute names, "..", empty or over-long names, NUL or newline-free
 * checks as documented, device nodes, FIFOs, sockets, hard links whose target
 * is not an earlier regular file of the same archive. Limits give E2BIG.
 * Symlinks are created as they are (their targets are resolved inside the
 * sandbox later). Directories and files get the archive's permission bits
 * (& 0777), no setuid/setgid.
 */
int files_write_tar(int root_fd, const char *workdir, const char *dir, uid_t owner,
		    const void *data, size_t len, const struct files_limits *lim,
		    struct al_error **err);
/* Reads a regular file: ENOENT missing, EISDIR directory, E2BIG over max. */
int files_read(int root_fd, const char *workdir, const char *path, size_t max, char **out,
	       size_t *out_len, struct al_error **err);
int files_mkdir(int root_fd, const char *workdir, const char *path, uid_t owner, bool parents,
		struct al_error **err);
/* The rules a write to path meets before anything is touched (a well-formed path inside a
 * writable area): 0, or the error the write would get. The file system is not looked at. */
int files_writable(const char *workdir, const char *path, struct al_error **err);
/* [{name, type: file|dir|symlink|other, size, mode, mtime (epoch ms)}], sorted by name. */
int files_list(int root_fd, const char *workdir, const char *path, json_t **out,
	       struct al_error **err);

#endif
