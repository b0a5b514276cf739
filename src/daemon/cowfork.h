/* SPDX-License-Identifier: MIT */
/* A fork by copy-on-write (cowfork.c): the source's writable areas become a shared, never
 * written lower layer of an overlayfs in both sandboxes. docs/snapshots.md, "Fork". */
#ifndef AL_DAEMON_COWFORK_H
#define AL_DAEMON_COWFORK_H

#include "daemon/internal.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DM_COW_DEPTH 16 /* lower layers an area may stack; a deeper fork copies */

/* The source of a fork, as the caller copied it under d->mu (the sandbox held). */
struct dm_cow_src {
	const char *team, *id;
	pid_t pid;
	uid_t host_base; /* its uid range on the host */
	uint64_t disk_bytes;
	const char *const *areas; /* absolute paths: /workspace, /tmp, ... */
	size_t n_areas;
};

struct dm_cows *dm_cows_new(void);
void dm_cows_free(struct dm_cows *c);
/* A sandbox ended: its layers are let go (a fork's overlays keep what they use). */
void dm_cow_forget(struct daemon *d, const char *id);
/* Around a host-side file operation in a sandbox (fs.c): a copy-on-write fork waits for
 * those in flight, none starts while it switches layers. */
struct dm_cows *dm_cow_fs_begin(struct daemon *d);
void dm_cow_fs_endp(struct dm_cows **c);
#define _cleanup_dm_cow_fs_ __attribute__((cleanup(dm_cow_fs_endp), unused))

/* The id of the fork, once made (the caller makes it meanwhile), or NULL. */
typedef const char *(*dm_cow_wait_fn)(void *ctx);

/* Gives the new sandbox (team src->team) that wait(ctx) names src's files by copy-on-write:
 * first the source's side (frozen), then, once the fork is made, the fork's. 0 when done;
 * -1 with err saying why not (overlayfs missing, a process of the source running or
 * holding a file of an area, a mount below an area, too deep, the fork not made): the
 * caller copies instead. The source may then already be on its overlays, and some of the
 * fork's areas too: a copy into them is still right (the same files). */
int dm_cow_fork(struct daemon *d, const struct dm_cow_src *src, dm_cow_wait_fn wait, void *ctx,
		struct al_error **err);

#endif
