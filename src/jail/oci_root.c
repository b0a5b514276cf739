/* SPDX-License-Identifier: MIT */
/*
 * An OCI container's writable root (config.json `root.readonly: false`), made in the child
 * as host root while rootfs.c builds the new root, before /tmp is left:
 *
 *   STAGE/.airlock-root         a tmpfs of root_size bytes, private to this container
 *     lower/                    the image (the bundle's rootfs), an idmapped read-only
 *                               clone of its mount: host uid/gid 0..65535 shown as the
 *                               container's own range, so its root owns the image's files
 *     upper/ work/              overlayfs's upper and work directories
 *     merged/                   the overlay (nosuid, nodev)
 *
 * rootfs.c binds merged's top-level entries into the new root (as it binds the image's
 * read-only otherwise), then jail_oci_root_hide detaches all of .airlock-root: the overlay
 * keeps private clones of its layers and lives on through those binds only. Every write
 * lands in upper (copy-up): the image, shared by every container of the engine, is never
 * written, and what one container writes no other sees. The tmpfs's size caps it (ENOSPC).
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define AL_OPEN_TREE_CLONE 1u
#define AL_MOVE_MOUNT_F_EMPTY_PATH 0x04u
#define AL_MOUNT_ATTR_RDONLY 0x1ull
#define AL_MOUNT_ATTR_NOSUID 0x2ull
#define AL_MOUNT_ATTR_NODEV 0x4ull
#define AL_MOUNT_ATTR_IDMAP 0x00100000ull
struct al_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

#define DIR_NAME ".airlock-root"

/* A user namespace whose maps are the container's (0..65535 -> base): the idmapping of the
 * image's mount. A child unshares one and waits; we write its maps (we are host root) and
 * keep an fd on it. Its pid is read from the host's /proc (we are PID 1 of a new pid
 * namespace, but /proc is still the host's). */
static int idmap_userns(uid_t base, struct al_error **err)
{
	int up[2], down[2], fd = -1;
	char path[64], buf[16] = {0};
	pid_t pid, host_pid;

	if (pipe2(up, O_CLOEXEC) < 0)
		return al_error_set(err, errno, "pipe");
	if (pipe2(down, O_CLOEXEC) < 0) {
		close(up[0]);
		close(up[1]);
		return al_error_set(err, errno, "pipe");
	}
	pid = fork();
	if (pid == 0) {
		ssize_t n = -1;

		close(up[0]);
		close(down[1]);
		if (unshare(CLONE_NEWUSER) == 0)
			n = readlink("/proc/self", buf, sizeof(buf) - 1);
		(void)!write(up[1], buf, n > 0 ? (size_t)n : 1);
		(void)!read(down[0], buf, 1); /* until our parent is done */
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	if (pid > 0 && read(up[0], buf, sizeof(buf) - 1) > 0 && (host_pid = atoi(buf)) > 0 &&
	    jail_write_idmaps(host_pid, base, err) == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)host_pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			al_error_set(err, errno, "open '%s'", path);
	} else if (!*err) {
		al_error_set(err, pid < 0 ? errno : EPROTO, "a user namespace for the idmapping");
	}
	close(up[0]);
	close(down[1]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return fd;
}

/* The image, idmapped and read-only, at `at` (a directory under the stage). */
static int lower_layer(const struct jail_ctx *ctx, int image_fd, int at, struct al_error **err)
{
	_cleanup_close_ int userns = idmap_userns(ctx->host_base, err), tree = -1;
	struct al_mount_attr attr = {.attr_set = AL_MOUNT_ATTR_IDMAP | AL_MOUNT_ATTR_RDONLY |
						 AL_MOUNT_ATTR_NOSUID | AL_MOUNT_ATTR_NODEV};

	if (userns < 0)
		return -1;
	attr.userns_fd = (uint64_t)userns;
	tree = (int)syscall(SYS_open_tree, image_fd, "",
			    AL_OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return al_error_set(err, errno, "open_tree of the image");
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return al_error_set(err, errno,
				    "an idmapped mount of the image (its filesystem must "
				    "support idmapped mounts for a writable root)");
	if (syscall(SYS_move_mount, tree, "", at, "",
		    AL_MOVE_MOUNT_F_EMPTY_PATH | 0x40u /* MOVE_MOUNT_T_EMPTY_PATH */) < 0)
		return al_error_set(err, errno, "move_mount of the image");
	return 0;
}

int jail_oci_root_overlay(const struct jail_ctx *ctx, const char *stage, int stage_fd,
			  int image_fd, int *merged, struct al_error **err)
{
	static const char *const dirs[] = {"lower", "upper", "work", "merged"};
	uint64_t size = ctx->oci->root_size ? ctx->oci->root_size : JAIL_DISK_DEFAULT;
	_cleanup_close_ int dir = -1, lower = -1;
	char at[PATH_MAX], opts[PATH_MAX * 3 + 64];

	*merged = -1;
	snprintf(at, sizeof(at), "%s/" DIR_NAME, stage);
	if (mkdirat(stage_fd, DIR_NAME, 0700) < 0)
		return al_error_set(err, errno, "mkdir '%s'", at);
	snprintf(opts, sizeof(opts), "size=%llu,mode=0700", (unsigned long long)size);
	if (mount("airlock-root", at, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return al_error_set(err, errno, "mount tmpfs on '%s'", at);
	dir = openat(stage_fd, DIR_NAME, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return al_error_set(err, errno, "open '%s'", at);
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
		if (mkdirat(dir, dirs[i], 0755) < 0)
			return al_error_set(err, errno, "mkdir '%s/%s'", at, dirs[i]);
	lower = openat(dir, "lower", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (lower < 0)
		return al_error_set(err, errno, "open '%s/lower'", at);
	if (lower_layer(ctx, image_fd, lower, err) < 0)
		return al_error_wrap(err, "the writable root");
	snprintf(opts, sizeof(opts), "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work", at, at,
		 at);
	snprintf(at + strlen(at), sizeof(at) - strlen(at), "/merged");
	if (mount("overlay", at, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		return al_error_set(err, errno, "mount the writable root's overlay on '%s'", at);
	*merged = openat(dir, "merged", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*merged < 0)
		return al_error_set(err, errno, "open '%s'", at);
	return 0;
}

int jail_oci_root_hide(const char *stage, int stage_fd, struct al_error **err)
{
	char at[PATH_MAX];

	/* Detached with what is mounted below it (the image's clone, the overlay): only the
	 * binds made from the overlay keep it, and them, alive. */
	snprintf(at, sizeof(at), "%s/" DIR_NAME, stage);
	if (umount2(at, MNT_DETACH) < 0)
		return al_error_set(err, errno, "detach '%s'", at);
	if (unlinkat(stage_fd, DIR_NAME, AT_REMOVEDIR) < 0)
		return al_error_set(err, errno, "rmdir '%s'", at);
	return 0;
}
