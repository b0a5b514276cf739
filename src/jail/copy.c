/* SPDX-License-Identifier: MIT */
/*
 * Copying host files into a sandbox root (--file SRC:DST), during set-up.
 *
 * Paths inside the root are walked one component at a time with O_NOFOLLOW:
 * an --image may contain symlinks, and following one (say var -> /etc) while
 * we still run as host root would write to the host.
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 64

static int bad_component(const char *c)
{
	return c[0] == '\0' || strcmp(c, ".") == 0 || strcmp(c, "..") == 0;
}

int jail_mkdir_p(int root_fd, const char *path, uid_t owner, struct al_error **err)
{
	char buf[PATH_MAX], *comp, *save = NULL;
	int dir = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);

	if (dir < 0)
		return al_error_set(err, errno, "dup root fd");
	if (path[0] != '/' || strlen(path) >= sizeof(buf)) {
		close(dir);
		return al_error_msg(err, EINVAL, "'%s' is not an absolute path", path);
	}
	strcpy(buf, path);
	for (comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		int next;

		if (bad_component(comp)) {
			close(dir);
			return al_error_msg(err, EINVAL, "path '%s' has a '.' or '..' component",
					    path);
		}
		if (mkdirat(dir, comp, 0755) == 0) {
			if (fchownat(dir, comp, owner, owner, AT_SYMLINK_NOFOLLOW) < 0) {
				close(dir);
				return al_error_set(err, errno, "chown '%s'", path);
			}
		} else if (errno != EEXIST) {
			close(dir);
			return al_error_set(err, errno, "mkdir '%s'", path);
		}
		next = openat(dir, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dir);
		if (next < 0)
			return al_error_set(
			    err, errno == ELOOP ? ENOTDIR : errno,
			    "open '%s' (a component is a symlink or not a directory)", path);
		dir = next;
	}
	return dir;
}

/* All of src_fd into out: sendfile, or read and write for a file it refuses (a /proc or
 * /sys file reports size 0 and sendfile says EINVAL). 0, or -1 with errno. */
static ssize_t copy_bytes(int src_fd, int out)
{
	char buf[65536];
	ssize_t n;
	bool any = false;

	while ((n = sendfile(out, src_fd, NULL, 1 << 20)) > 0)
		any = true;
	if (n == 0 || any || (errno != EINVAL && errno != ENOSYS))
		return n;
	while ((n = read(src_fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
		for (ssize_t off = 0, w; n > 0 && off < n; off += w) {
			w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				w = 0;
			else if (w < 0)
				return -1;
		}
	}
	return n;
}

static int copy_reg(int src_fd, int dst_dir, const char *name, mode_t mode, uid_t uid, gid_t gid,
		    const char *what, struct al_error **err)
{
	_cleanup_close_ int out = -1;
	struct stat st;
	ssize_t n;

	if (fstat(src_fd, &st) < 0)
		return al_error_set(err, errno, "stat '%s'", what);
	out = openat(dst_dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		     mode & 0777);
	if (out < 0)
		return al_error_set(err, errno, "create '%s' in the sandbox", what);
	n = copy_bytes(src_fd, out);
	if (n < 0 && (errno == ENOSPC || errno == EDQUOT))
		return al_error_set(err, errno, "copy '%s' (the sandbox disk is full)", what);
	if (n < 0)
		return al_error_set(err, errno, "copy '%s'", what);
	if (fchown(out, uid, gid) < 0 || fchmod(out, mode & 0777) < 0)
		return al_error_set(err, errno, "chown '%s'", what);
	return 0;
}

static int copy_tree(int src_dir, int dst_dir, const char *what, uid_t uid, gid_t gid, int depth,
		     struct al_error **err);

/* Copy the entry `name` of src_dir into dst_dir. */
static int copy_entry(int src_dir, const char *name, int dst_dir, const char *what, uid_t uid,
		      gid_t gid, int depth, struct al_error **err)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstatat(src_dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return al_error_set(err, errno, "stat '%s/%s'", what, name);
	if (S_ISLNK(st.st_mode)) {
		/* Kept as a link: it is resolved inside the sandbox, never on the host. */
		n = readlinkat(src_dir, name, target, sizeof(target) - 1);
		if (n < 0)
			return al_error_set(err, errno, "readlink '%s/%s'", what, name);
		target[n] = '\0';
		if (symlinkat(target, dst_dir, name) < 0 ||
		    fchownat(dst_dir, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
			return al_error_set(err, errno, "symlink '%s/%s'", what, name);
		return 0;
	}
	if (S_ISREG(st.st_mode)) {
		_cleanup_close_ int fd = openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0)
			return al_error_set(err, errno, "open '%s/%s'", what, name);
		return copy_reg(fd, dst_dir, name, st.st_mode, uid, gid, what, err);
	}
	if (S_ISDIR(st.st_mode)) {
		_cleanup_close_ int s = -1, d = -1;

		s = openat(src_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (s < 0)
			return al_error_set(err, errno, "open '%s/%s'", what, name);
		if (mkdirat(dst_dir, name, st.st_mode & 0777) < 0 && errno != EEXIST)
			return al_error_set(err, errno, "mkdir '%s/%s'", what, name);
		d = openat(dst_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (d < 0 || fchown(d, uid, gid) < 0)
			return al_error_set(err, errno, "open '%s/%s' in the sandbox", what, name);
		return copy_tree(s, d, what, uid, gid, depth + 1, err);
	}
	return al_error_msg(err, EINVAL, "'%s/%s' is not a regular file, directory or symlink",
			    what, name);
}

static int copy_tree(int src_dir, int dst_dir, const char *what, uid_t uid, gid_t gid, int depth,
		     struct al_error **err)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd;

	if (depth > MAX_DEPTH)
		return al_error_msg(err, ELOOP, "'%s' is nested more than %d levels deep", what,
				    MAX_DEPTH);
	fd = fcntl(src_dir, F_DUPFD_CLOEXEC, 3);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return al_error_set(err, errno, "opendir '%s'", what);
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (copy_entry(src_dir, de->d_name, dst_dir, what, uid, gid, depth, err) < 0)
			return -1;
	}
	return 0;
}

int jail_copy_in(int src_fd, const char *src_name, int root_fd, const char *dst, uid_t uid,
		 gid_t gid, struct al_error **err)
{
	char parent[PATH_MAX], *slash, *base;
	_cleanup_close_ int dir = -1, src = -1;
	struct stat st;

	if (strlen(dst) >= sizeof(parent) || dst[0] != '/')
		return al_error_msg(err, EINVAL, "--file destination '%s' is invalid", dst);
	strcpy(parent, dst);
	while ((slash = strrchr(parent, '/')) && slash[1] == '\0' && slash != parent)
		*slash = '\0'; /* drop trailing slashes */
	slash = strrchr(parent, '/');
	base = slash + 1;
	if (bad_component(base))
		return al_error_msg(err, EINVAL, "--file destination '%s' names no file", dst);
	*slash = '\0';
	dir = jail_mkdir_p(root_fd, parent[0] ? parent : "/", uid, err);
	if (dir < 0)
		return al_error_wrap(err, "--file destination '%s'", dst);
	if (fstat(src_fd, &st) < 0)
		return al_error_set(err, errno, "stat '%s'", src_name);
	/* Before it is opened: a FIFO would block the open until a writer came, a device
	 * (/dev/zero) would never end. */
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return al_error_msg(err, EINVAL, "--file source '%s' is not a file or directory",
				    src_name);
	/* The source was opened O_PATH; reopen it for reading through /proc/self/fd. */
	{
		char p[64];

		snprintf(p, sizeof(p), "/proc/self/fd/%d", src_fd);
		src = open(p, (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
		if (src < 0)
			return al_error_set(err, errno, "open '%s'", src_name);
	}
	/* O_PATH dirfd of `dir` cannot be written through: reopen it as a real directory. */
	{
		_cleanup_close_ int wdir = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (wdir < 0)
			return al_error_set(err, errno, "open '%s'", parent);
		if (S_ISREG(st.st_mode))
			return copy_reg(src, wdir, base, st.st_mode, uid, gid, src_name, err);
		if (!S_ISDIR(st.st_mode))
			return al_error_set(
			    err, EINVAL, "--file source '%s' is not a file or directory", src_name);
		if (mkdirat(wdir, base, 0755) < 0 && errno != EEXIST)
			return al_error_set(err, errno, "mkdir '%s'", dst);
		{
			_cleanup_close_ int d =
			    openat(wdir, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (d < 0 || fchown(d, uid, gid) < 0)
				return al_error_set(err, errno, "open '%s'", dst);
			return copy_tree(src, d, src_name, uid, gid, 0, err);
		}
	}
}
