/* SPDX-License-Identifier: MIT */
/* What files.c (paths, walks, reads, listings) shares with files_tar.c (archives). */
#ifndef AL_DAEMON_FILES_INTERNAL_H
#define AL_DAEMON_FILES_INTERNAL_H

#include "common/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FILES_PATH_MAX 4096 /* a path, "/a/b" form, NUL included */
#define FILES_NAME_MAX 255
#define FILES_LIST_MAX 10000
#define FILES_INDEX_MAX_NODES (1u << 20)  /* distinct paths in one archive */
#define FILES_INDEX_MAX_NAMES (32u << 20) /* bytes of their names */
#define FILES_CHUNK (64u << 10)
#define FILES_DIR_MODE 0755
#define FILES_DEFAULT_WORKDIR "/workspace"
#define _files_cleanup_(f) __attribute__((cleanup(f)))

/* A normalized path: its components, NUL-separated and in order, in buf. */
struct files_path {
	char buf[FILES_PATH_MAX];
	size_t len; /* bytes used in buf (== strlen of the "/a/b" form) */
	size_t n;   /* components */
};

/* A name fit for an error message: valid UTF-8, no control characters, short. */
struct files_show {
	char s[400];
};

/* An API path: absolute, or relative to workdir; normalized lexically. */
int files_api_path(const char *workdir, const char *path, struct files_path *p,
		   struct files_show *sh, struct al_error **err);
/* Refuses pseudo file systems: read or written by host root, they would reach the host. */
int files_check_fs(int fd, const char *show, struct al_error **err);
/* The writable-area rule: p must be an area or lie under one. Workdir "/" is no area. */
int files_check_writable(const char *workdir, const struct files_path *p, const char *show,
			 struct al_error **err);
int files_open_error(int dir, int e, const char *name, const char *show, struct al_error **err);
/* Chown to owner and set mode on a directory or file fd we hold. */
int files_own(int fd, uid_t owner, mode_t mode, const char *show, struct al_error **err);
/*
 * Appends the components of s to p. Empty components are dropped; "." is
 * refused in API paths (api) and dropped in archive names; ".." is refused.
 */
int files_path_add(struct files_path *p, const char *s, bool api, const char *show,
		   struct al_error **err);
/* The last component of p (n >= 1); *off is its offset, i.e. the parent's length. */
const char *files_path_last(const struct files_path *p, size_t *off);
/* s as a name fit for an error message (sh holds it). */
const char *files_show(struct files_show *sh, const char *s);
/* Opens the directory made of the first n components of p below start, with files_step. */
int files_walk(int start, const struct files_path *p, size_t n, bool create, uid_t owner,
	       const char *show, struct al_error **err);

#endif
