/* SPDX-License-Identifier: MIT */
/*
 * An OCI container's own mounts (struct jail_mount, from its config.json: binds and tmpfs),
 * made in the child as host root while the new root is still being built (rootfs.c calls
 * this before /proc). Every target is made or opened under the new root without following
 * a symlink (jail_mkdir_p, O_NOFOLLOW), and every mount goes on through that fd, so a
 * symlink in an image cannot point a mount elsewhere. Binds come from an fd the caller
 * opened and vetted (src/oci/config.c); a device node is refused here too, whatever the
 * caller did. Every mount is nosuid and nodev.
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The new mount API (linux/mount.h clashes with glibc's sys/mount.h, musl has neither). */
#define AL_OPEN_TREE_CLONE 1u
#define AL_MOVE_MOUNT_F_EMPTY_PATH 0x04u
#define AL_MOVE_MOUNT_T_EMPTY_PATH 0x40u
#define AL_MOUNT_ATTR_RDONLY 0x1ull
#define AL_MOUNT_ATTR_NOSUID 0x2ull
#define AL_MOUNT_ATTR_NODEV 0x4ull
struct al_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* The target file of a bind under root_fd: made empty if missing (only where the root is
 * writable: a read-only image must already have it), never through a symlink. */
static int file_target(int root_fd, const char *dst, struct al_error **err)
{
	char parent[PATH_MAX];
	const char *base = strrchr(dst, '/');
	_cleanup_close_ int dir = -1;
	struct stat st;
	int fd;

	if (!base || !base[1] || (size_t)(base - dst) >= sizeof(parent))
		return al_error_msg(err, EINVAL, "mount destination '%s' is not a file path", dst);
	memcpy(parent, dst, (size_t)(base - dst));
	parent[base - dst] = '\0';
	dir = jail_mkdir_p(root_fd, parent[0] ? parent : "/", 0, err);
	if (dir < 0)
		return -1;
	base++;
	fd = openat(dir, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		int made =
		    openat(dir, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

		if (made < 0)
			return al_error_set(err, errno, "create the mount target '%s'", dst);
		close(made);
		fd = openat(dir, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return al_error_set(err, errno, "open the mount target '%s'", dst);
	if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)) {
		close(fd);
		return al_error_msg(
		    err, ENOTDIR,
		    "mount target '%s' is a symlink or a directory, the source a file", dst);
	}
	return fd;
}

static int bind_one(const struct jail_mount *m, int target, struct al_error **err)
{
	struct al_mount_attr attr = {.attr_set = AL_MOUNT_ATTR_NOSUID | AL_MOUNT_ATTR_NODEV |
						 (m->rdonly ? AL_MOUNT_ATTR_RDONLY : 0)};
	_cleanup_close_ int tree = -1;
	struct stat st;

	if (fstat(m->src_fd, &st) < 0)
		return al_error_set(err, errno, "bind source of '%s'", m->dst);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return al_error_msg(err, EPERM,
				    "bind mount on '%s': the source is not a file or a directory "
				    "(no host device, socket or FIFO enters a sandbox)",
				    m->dst);
	tree = (int)syscall(SYS_open_tree, m->src_fd, "",
			    AL_OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return al_error_set(err, errno, "open_tree (bind on '%s')", m->dst);
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return al_error_set(err, errno, "mount_setattr (bind on '%s')", m->dst);
	if (syscall(SYS_move_mount, tree, "", target, "",
		    AL_MOVE_MOUNT_F_EMPTY_PATH | AL_MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return al_error_set(err, errno, "move_mount (bind on '%s')", m->dst);
	return 0;
}

static int tmpfs_one(const struct jail_mount *m, int target, struct al_error **err)
{
	char at[64], opts[96];

	snprintf(at, sizeof(at), "/proc/self/fd/%d", target);
	snprintf(opts, sizeof(opts), "size=%llu,mode=1777", (unsigned long long)m->tmpfs_size);
	if (mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV | (m->rdonly ? MS_RDONLY : 0), opts) <
	    0)
		return al_error_set(err, errno, "mount tmpfs on '%s'", m->dst);
	return 0;
}

int jail_oci_mounts(int root_fd, const struct jail_ctx *ctx, struct al_error **err)
{
	for (size_t i = 0; ctx->oci && i < ctx->oci->n_mounts; i++) {
		const struct jail_mount *m = &ctx->oci->mounts[i];
		_cleanup_close_ int target = -1;

		target = m->dir ? jail_mkdir_p(root_fd, m->dst, 0, err)
				: file_target(root_fd, m->dst, err);
		if (target < 0)
			return al_error_wrap(err, "the container's mount on '%s'", m->dst);
		if ((m->src_fd < 0 ? tmpfs_one(m, target, err) : bind_one(m, target, err)) < 0)
			return -1;
	}
	return 0;
}
