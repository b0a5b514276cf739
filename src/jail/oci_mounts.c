/* SPDX-License-Identifier: MIT */
/*
 * An OCI container's own mounts (struct jail_mount, from its config.json: binds and tmpfs),
 * made in the child as host root while the new root is still being built (rootfs.c calls
 * this before /proc). Every target is made or opened under the new root without following
 * a symlink (jail_mkdir_p, O_NOFOLLOW), and every mount goes on through that fd, so a
 * symlink in an image cannot point a mount elsewhere. Binds come from an fd the caller
 * opened and vetted (src/oci/config.c); a device node is refused here too, whatever the
 * caller did. Every mount is nosuid and nodev. An rbind brings the source's submounts
 * too, each checked as the source is (no kernel filesystem, nothing but files and
 * directories), all nosuid and nodev.
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
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

#define JAIL_MOUNT_SKIPPED (-2)

/* Name-service files engines bind in (podman, the CRI): an image without them cannot take
 * them (its /etc is read-only), and the container goes without, as in the image. */
static bool optional_target(const char *dst)
{
	return strcmp(dst, "/etc/hosts") == 0 || strcmp(dst, "/etc/hostname") == 0 ||
	       strcmp(dst, "/etc/resolv.conf") == 0;
}

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

		if (made < 0 && errno == EROFS && optional_target(dst))
			return JAIL_MOUNT_SKIPPED;
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

/* A filesystem no bind may bring in: the kernel's own, whose files are handles on the
 * host (proc, sysfs, devpts, cgroups, debug, security and BPF interfaces, namespaces). */
bool jail_kernel_fs(int fd)
{
	static const long bad[] = {
	    0x9fa0 /* proc */,		 0x62656572 /* sysfs */,    0x1cd1 /* devpts */,
	    0x27e0eb /* cgroup */,	 0x63677270 /* cgroup2 */,  0x64626720 /* debugfs */,
	    0x73636673 /* securityfs */, 0xcafe4a11 /* bpf */,	    0x74726163 /* tracefs */,
	    0x6e736673 /* nsfs */,	 0xde5e81e4 /* efivarfs */, 0x42494e4d /* binfmt_misc */};
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if ((long)sf.f_type == bad[i])
			return true;
	return false;
}

/* mountinfo's octal escapes (\040 for a space, ...), in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++, o++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o = *s;
		}
	}
	*o = '\0';
}

/* One submount of an rbind, checked as the bind's own source is. */
static int check_submount(const struct jail_mount *m, const char *at, struct al_error **err)
{
	_cleanup_close_ int fd = open(at, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return al_error_set(err, errno, "rbind of '%s' on '%s': submount '%s'", m->src,
				    m->dst, at);
	if (fstat(fd, &st) < 0 || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) ||
	    jail_kernel_fs(fd))
		return al_error_msg(err, EPERM,
				    "rbind of '%s' on '%s' refused: its submount '%s' is a kernel "
				    "filesystem or not a file or directory",
				    m->src, m->dst, at);
	return 0;
}

/* rbind: every mount below the source (this mount namespace's, still the host's copy). */
static int check_submounts(const struct jail_mount *m, int src_fd, struct al_error **err)
{
	char self[64], top[PATH_MAX], *line = NULL;
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	size_t cap = 0, len;
	ssize_t n;
	int r = 0;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", src_fd);
	n = readlink(self, top, sizeof(top) - 1);
	if (n <= 0 || !f)
		return al_error_set(err, errno, "rbind of '%s': its submounts", m->src);
	top[n] = '\0';
	len = strcmp(top, "/") == 0 ? 0 : (size_t)n;
	while (r == 0 && getline(&line, &cap, f) > 0) {
		char at[PATH_MAX];

		/* id parent major:minor root mount-point ... */
		if (sscanf(line, "%*s %*s %*s %*s %4095s", at) != 1)
			continue;
		unescape(at);
		if (strncmp(at, top, len) == 0 && at[len] == '/' && at[len + 1])
			r = check_submount(m, at, err);
	}
	free(line);
	return r;
}

int jail_oci_mounts_open(const struct jail_ctx *ctx, int *fds, struct al_error **err)
{
	for (size_t i = 0; ctx->oci && i < ctx->oci->n_mounts; i++) {
		const struct jail_mount *m = &ctx->oci->mounts[i];

		if (!m->src)
			continue;
		fds[i] = open(m->src, O_PATH | O_CLOEXEC);
		if (fds[i] < 0)
			return al_error_set(err, errno, "bind source '%s' of '%s'", m->src, m->dst);
		if (jail_kernel_fs(fds[i]))
			return al_error_msg(
			    err, EPERM,
			    "bind of '%s' on '%s' refused: a kernel filesystem would "
			    "show the host's",
			    m->src, m->dst);
		if (m->recursive && check_submounts(m, fds[i], err) < 0)
			return -1;
	}
	return 0;
}

static int bind_one(const struct jail_mount *m, int src_fd, int target, struct al_error **err)
{
	struct al_mount_attr attr = {.attr_set = AL_MOUNT_ATTR_NOSUID | AL_MOUNT_ATTR_NODEV |
						 (m->rdonly ? AL_MOUNT_ATTR_RDONLY : 0)};
	_cleanup_close_ int tree = -1;
	struct stat st;

	if (fstat(src_fd, &st) < 0)
		return al_error_set(err, errno, "bind source of '%s'", m->dst);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return al_error_msg(err, EPERM,
				    "bind mount on '%s': the source is not a file or a directory "
				    "(no host device, socket or FIFO enters a sandbox)",
				    m->dst);
	/* rbind: the whole tree (its submounts vetted by jail_oci_mounts_open), every mount of
	 * it nosuid, nodev (read-only with ro). */
	tree = (int)syscall(SYS_open_tree, src_fd, "",
			    AL_OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH |
				(m->recursive ? AT_RECURSIVE : 0));
	if (tree < 0)
		return al_error_set(err, errno, "open_tree (bind on '%s')", m->dst);
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | (m->recursive ? AT_RECURSIVE : 0),
		    &attr, sizeof(attr)) < 0)
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

int jail_oci_mounts(int root_fd, const struct jail_ctx *ctx, const int *fds, struct al_error **err)
{
	for (size_t i = 0; ctx->oci && i < ctx->oci->n_mounts; i++) {
		const struct jail_mount *m = &ctx->oci->mounts[i];
		_cleanup_close_ int target = -1;

		target = m->dir ? jail_mkdir_p(root_fd, m->dst, 0, err)
				: file_target(root_fd, m->dst, err);
		if (target == JAIL_MOUNT_SKIPPED) {
			target = -1;
			continue;
		}
		if (target < 0)
			return al_error_wrap(err, "the container's mount on '%s'", m->dst);
		if ((!m->src ? tmpfs_one(m, target, err) : bind_one(m, fds[i], target, err)) < 0)
			return -1;
	}
	return 0;
}

/* An fd on top + path, not following a last symlink; -1 with errno ENOENT if it is not there
 * (this kernel has no such file: nothing to hide). */
static int open_proc_path(const char *top, const char *path)
{
	char p[PATH_MAX];

	if (strncmp(path, "/proc/", 6) != 0 || strstr(path, "/.") || strstr(path, "//") ||
	    snprintf(p, sizeof(p), "%s%s", top, path) >= (int)sizeof(p)) {
		errno = ENOENT;
		return -1;
	}
	return open(p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

/* Hide one /proc path: an empty read-only tmpfs on a directory, /dev/null on a file. */
static int mask_one(const char *top, const char *path, struct al_error **err)
{
	_cleanup_close_ int fd = open_proc_path(top, path);
	char at[64], null[PATH_MAX];
	struct stat st;

	if (fd < 0)
		return errno == ENOENT ? 0 : al_error_set(err, errno, "maskedPaths '%s'", path);
	snprintf(at, sizeof(at), "/proc/self/fd/%d", fd);
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (mount("tmpfs", at, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "size=0,mode=0555") < 0)
			return al_error_set(err, errno, "maskedPaths '%s'", path);
		return 0;
	}
	/* Our own /dev/null node (rootfs.c made it, as it masks /proc's own entries). */
	snprintf(null, sizeof(null), "%s/dev/null", top);
	if (mount(null, at, NULL, MS_BIND, NULL) < 0)
		return al_error_set(err, errno, "maskedPaths '%s'", path);
	return 0;
}

/* Make one /proc path read-only (with what is mounted below it). */
static int readonly_one(const char *top, const char *path, struct al_error **err)
{
	struct al_mount_attr attr = {.attr_set = AL_MOUNT_ATTR_RDONLY | AL_MOUNT_ATTR_NOSUID |
						 AL_MOUNT_ATTR_NODEV};
	_cleanup_close_ int fd = open_proc_path(top, path), tree = -1;

	if (fd < 0)
		return errno == ENOENT ? 0 : al_error_set(err, errno, "readonlyPaths '%s'", path);
	tree = (int)syscall(SYS_open_tree, fd, "",
			    AL_OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0 ||
	    syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
		    sizeof(attr)) < 0 ||
	    syscall(SYS_move_mount, tree, "", fd, "",
		    AL_MOVE_MOUNT_F_EMPTY_PATH | AL_MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return al_error_set(err, errno, "readonlyPaths '%s'", path);
	return 0;
}

int jail_oci_proc_paths(const char *top, const struct jail_ctx *ctx, struct al_error **err)
{
	for (size_t i = 0; ctx->oci && i < ctx->oci->n_masked; i++)
		if (mask_one(top, ctx->oci->masked[i], err) < 0)
			return -1;
	for (size_t i = 0; ctx->oci && i < ctx->oci->n_readonly; i++)
		if (readonly_one(top, ctx->oci->readonly[i], err) < 0)
			return -1;
	return 0;
}
