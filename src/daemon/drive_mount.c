/* SPDX-License-Identifier: MIT */
/*
 * A drive's file system and its mounts into sandboxes (docs/snapshots.md, "Drives").
 *
 * A drive is an ext4 image file (STATE/drives/<id>.img, sparse, its size the drive's cap:
 * the file system itself is full at maxSizeBytes). While in use it is attached to a loop
 * device (autoclear: detached when its last mount goes) and mounted once, detached from
 * every namespace (fsopen/fsmount), nosuid and nodev; the daemon holds that mount's fd.
 * Each sandbox gets a clone of it (open_tree), idmapped through the sandbox's own user
 * namespace (on-disk uid 1000 is the sandbox's uid 1000, whatever its host uid range),
 * read-only for a "snapshot" mount, moved onto the mount point from a child that joined
 * the sandbox's mount namespace. The mount point is made there one component at a time
 * with O_NOFOLLOW (the sandbox has run nothing yet: it is a fresh create).
 *
 * A drive cannot reach outside itself: it is its own file system (no hard link or
 * rename crosses it; a symlink in it resolves inside the sandbox that follows it), device
 * nodes do not work on it (nodev) and set-id bits do nothing (nosuid).
 */
#include "daemon/drive_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MKE2FS_CANDIDATES                                                                          \
	{                                                                                          \
		"/usr/sbin/mke2fs", "/sbin/mke2fs"                                                 \
	}

/*
 * fn(arg) in a forked child, its result told over a pipe: airlockd's reaper thread reaps
 * every child (waitpid(-1)), so an exit status could be gone before we look. The child
 * runs only system calls (the parent has threads). -1 if it died without a word.
 */
static int run_in_child(int (*fn)(const void *), const void *arg, struct al_error **err)
{
	int p[2], r = -1;
	pid_t child;

	if (pipe2(p, O_CLOEXEC) < 0)
		return al_error_set(err, errno, "pipe");
	child = fork();
	if (child < 0) {
		close(p[0]);
		close(p[1]);
		return al_error_set(err, errno, "fork");
	}
	if (child == 0) {
		int v;

		close(p[0]);
		v = fn(arg);
		(void)!write(p[1], &v, sizeof(v));
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &r, sizeof(r)) != (ssize_t)sizeof(r))
		r = -1;
	close(p[0]);
	(void)waitpid(child, NULL, __WALL); /* unless the reaper was first */
	return r;
}

struct mkfs_job {
	const char *bin, *img;
};

/* In the child: mke2fs, waited for here (its parent is this child, not airlockd). */
static int mkfs_child(const void *arg)
{
	const struct mkfs_job *j = arg;
	char *const argv[] = {(char *)j->bin,
			      "-q",
			      "-F",
			      "-t",
			      "ext4",
			      "-m",
			      "0",
			      "-E",
			      "root_owner=1000:1000,lazy_itable_init=1,lazy_journal_init=1",
			      (char *)j->img,
			      NULL};
	pid_t pid;
	int st = 0;

	if (posix_spawn(&pid, j->bin, NULL, NULL, argv, environ) != 0)
		return 126;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 127;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int dm_drive_format(const char *img, uint64_t size, struct al_error **err)
{
	static const char *const cands[] = MKE2FS_CANDIDATES;
	struct mkfs_job j = {NULL, img};
	_cleanup_close_ int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int r;

	if (fd < 0)
		return al_error_set(err, errno, "create '%s'", img);
	if (ftruncate(fd, (off_t)size) < 0)
		return al_error_set(err, errno, "size '%s'", img);
	for (size_t i = 0; i < ARRAY_SIZE(cands) && !j.bin; i++)
		if (access(cands[i], X_OK) == 0)
			j.bin = cands[i];
	if (!j.bin)
		return al_error_msg(err, ENOSYS, "drives need mke2fs (e2fsprogs), not found");
	r = run_in_child(mkfs_child, &j, err);
	if (r != 0)
		return al_error_msg(err, EIO, "%s '%s' failed (%d)", j.bin, img, r);
	return 0;
}

/* Whether some loop device already serves img (a mount left by an earlier daemon). */
static bool loop_serves(const char *img)
{
	char path[96], buf[4200];

	for (int n = 0; n < 1024; n++) {
		_cleanup_close_ int fd = -1;
		ssize_t got;

		snprintf(path, sizeof(path), "/sys/block/loop%d/loop/backing_file", n);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		got = read(fd, buf, sizeof(buf) - 1);
		if (got <= 0)
			continue;
		buf[got] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (strcmp(buf, img) == 0 || (strncmp(buf, img, strlen(img)) == 0 &&
					      strcmp(buf + strlen(img), " (deleted)") == 0))
			return true;
	}
	return false;
}

/* img on a free loop device (autoclear); its fd, its name in dev. */
static int loop_attach(int img_fd, char dev[32], struct al_error **err)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	struct loop_config cfg = {.fd = (unsigned)img_fd, .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};

	if (ctl < 0)
		return al_error_set(err, errno, "open /dev/loop-control");
	for (int tries = 0; tries < 16; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		int fd;

		if (n < 0)
			return al_error_set(err, errno, "LOOP_CTL_GET_FREE");
		snprintf(dev, 32, "/dev/loop%d", n);
		if (access(dev, F_OK) < 0 && mknod(dev, S_IFBLK | 0600, makedev(7, n)) < 0)
			return al_error_set(err, errno, "mknod '%s'", dev);
		fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return al_error_set(err, errno, "open '%s'", dev);
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
			return fd;
		close(fd);
		if (errno != EBUSY)
			return al_error_set(err, errno, "LOOP_CONFIGURE '%s'", dev);
	}
	return al_error_msg(err, EBUSY, "no free loop device");
}

int dm_drive_base_mount(const char *img, struct al_error **err)
{
	_cleanup_close_ int img_fd = -1, loop = -1, fs = -1;
	char dev[32];
	int mnt;

	if (loop_serves(img))
		return al_error_msg(err, EBUSY,
				    "the drive is still mounted by a sandbox of an earlier daemon "
				    "run: it can be attached again once that sandbox stopped");
	img_fd = open(img, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (img_fd < 0)
		return al_error_set(err, errno, "open '%s'", img);
	if ((loop = loop_attach(img_fd, dev, err)) < 0)
		return -1;
	fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return al_error_set(err, errno, "fsopen ext4");
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return al_error_set(err, errno, "mount the drive '%s'", img);
	mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return al_error_set(err, errno, "fsmount the drive '%s'", img);
	return mnt;
}

/* In the child, in the sandbox's mount namespace: the mount point, no symlink followed. */
static int child_mountpoint(const char *path, uid_t owner)
{
	char buf[4096], *save = NULL;
	int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *c = strtok_r(buf, "/", &save); c && dir >= 0; c = strtok_r(NULL, "/", &save)) {
		int next = openat(dir, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (next < 0 && errno == ENOENT && mkdirat(dir, c, 0755) == 0) {
			if (fchownat(dir, c, owner, owner, AT_SYMLINK_NOFOLLOW) < 0) {
				close(dir);
				return -1;
			}
			next = openat(dir, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		close(dir);
		dir = next;
	}
	return dir;
}

struct mount_job {
	int mntns, clone_fd;
	const char *path;
	uid_t owner;
};

/* In the child: into the sandbox's mount namespace, the mount point, the move. */
static int mount_child(const void *arg)
{
	const struct mount_job *j = arg;
	int dir;

	if (setns(j->mntns, CLONE_NEWNS) < 0)
		return 2;
	dir = child_mountpoint(j->path, j->owner);
	if (dir < 0)
		return 4;
	if (syscall(SYS_move_mount, j->clone_fd, "", dir, "",
		    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return 5;
	return 0;
}

int dm_drive_mount_into(int base, pid_t pid, uid_t owner, const char *path, bool ro,
			struct al_error **err)
{
	char p[64];
	_cleanup_close_ int userns = -1, mntns = -1, clone_fd = -1;
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID |
					      MOUNT_ATTR_NODEV | (ro ? MOUNT_ATTR_RDONLY : 0)};
	int r;

	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)pid);
	userns = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
	mntns = open(p, O_RDONLY | O_CLOEXEC);
	if (userns < 0 || mntns < 0)
		return al_error_set(err, errno, "the sandbox's namespaces");
	clone_fd = (int)syscall(SYS_open_tree, base, "",
				OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (clone_fd < 0)
		return al_error_set(err, errno, "clone the drive's mount");
	attr.userns_fd = (uint64_t)userns;
	if (syscall(SYS_mount_setattr, clone_fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return al_error_set(err, errno, "idmap the drive's mount");
	{
		struct mount_job j = {mntns, clone_fd, path, owner};

		r = run_in_child(mount_child, &j, err);
	}
	if (r != 0)
		return al_error_msg(err, EIO, "mounting the drive on '%s' failed (%s)", path,
				    r == 4   ? "the mount point is not a directory, or a symlink"
				    : r == 2 ? "setns"
					     : "move_mount, or the child died");
	return 0;
}
