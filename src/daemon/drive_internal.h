/* SPDX-License-Identifier: MIT */
/* What drives.c (the drives' records) shares with drive_mount.c (their file systems). */
#ifndef AL_DAEMON_DRIVE_INTERNAL_H
#define AL_DAEMON_DRIVE_INTERNAL_H

#include "daemon/internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* An ext4 image of size bytes at img (a new file), its root owned by uid/gid 1000. */
int dm_drive_format(const char *img, uint64_t size, struct al_error **err);
/* img mounted once (loop, autoclear), detached, nosuid, nodev: the mount's fd. EBUSY when
 * a loop device already serves it (a sandbox of an earlier daemon run still has it). */
int dm_drive_base_mount(const char *img, struct al_error **err);
/* A clone of base, idmapped through sandbox pid's user namespace (read-only if ro), onto
 * path in its mount namespace; missing directories of path are made (owned by owner). */
int dm_drive_mount_into(int base, pid_t pid, uid_t owner, const char *path, bool ro,
			struct al_error **err);

#endif
