/* SPDX-License-Identifier: MIT */
/*
 * One lexical normal form for every path a tenant hands in (a workdir, a command's cwd,
 * a files-API path, a --file destination): every rule about a path looks at this form
 * only, and the form is what is stored and used. Never resolved against a file system.
 */
#ifndef AL_COMMON_PATH_H
#define AL_COMMON_PATH_H

#include "common/error.h"

#include <stdbool.h>
#include <stddef.h>

#define AL_PATH_MAX 4096     /* a normalized path, NUL included */
#define AL_PATH_NAME_MAX 255 /* one component */

/*
 * in[0..len) -> *out (a heap string): absolute, repeated '/' collapsed into one, no
 * trailing '/' ("/" stays "/"). Refused (EINVAL): an empty or relative path, a NUL byte,
 * a "." or ".." component, a component over AL_PATH_NAME_MAX bytes, a result of
 * AL_PATH_MAX bytes or more. Nothing is resolved: "/a/../b" is refused, not made "/b".
 * `what` names the path in the message ("workdir", "cwd", ...).
 */
int al_path_normalize_len(const char *in, size_t len, const char *what, char **out,
			  struct al_error **err);
/* The same for a C string. */
int al_path_normalize(const char *in, const char *what, char **out, struct al_error **err);

/* A normalized path p is `root` (normalized) or lies under it. */
bool al_path_is_under(const char *p, const char *root);

/*
 * The kernel's file systems of every sandbox: a normalized path that is /proc, /sys or
 * /dev or lies under one (/dev/shm, the sandbox's own tmpfs, is not), or "/", which
 * holds them all.
 */
bool al_path_in_pseudo_fs(const char *p);

#endif
