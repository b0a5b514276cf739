/* SPDX-License-Identifier: MIT */
/*
 * File operations on a live sandbox, done by the daemon as host root through
 * an fd of the sandbox's root. docs/design/files.md gives the threat and the
 * rules; in short:
 *
 * - API paths are normalized lexically ("." and ".." refused, never resolved)
 *   and writes must fall under a writable area.
 * - Reads and listings open with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS).
 * - Writes walk from the root one component at a time with O_NOFOLLOW and
 *   create the final name with O_NOFOLLOW: no symlink is ever followed.
 * - Nothing is read from or written to a pseudo file system (procfs, sysfs,
 *   cgroupfs...): as host root, a write there could reconfigure the host.
 * - An archive is validated entirely (names, types, links, limits) before the
 *   first byte is written, then extracted in a second pass.
 */
#include "daemon/files.h"
#include "daemon/files_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

/* s as a name fit for an error message (sh holds it). */
const char *files_show(struct files_show *sh, const char *s)
{
	size_t len = strnlen(s, 120), ulen, i;
	_cleanup_free_ char *u = al_utf8_sanitize(s, len, &ulen);

	for (i = 0; i < ulen; i++)
		if ((unsigned char)u[i] < 0x20 || u[i] == 0x7f)
			u[i] = '?';
	snprintf(sh->s, sizeof(sh->s), "%s%s", u, s[len] ? "..." : "");
	return sh->s;
}

/*
 * Appends the components of s to p. Empty components are dropped; "." is
 * refused in API paths (api) and dropped in archive names; ".." is refused.
 */
int files_path_add(struct files_path *p, const char *s, bool api, const char *show,
		   struct al_error **err)
{
	const char *c = s, *end;
	size_t clen;

	while (*c) {
		if (*c == '/') {
			c++;
			continue;
		}
		end = strchrnul(c, '/');
		clen = (size_t)(end - c);
		if (clen == 1 && c[0] == '.' && !api) {
			c = end;
			continue;
		}
		if ((clen == 1 && c[0] == '.') || (clen == 2 && c[0] == '.' && c[1] == '.'))
			return al_error_msg(err, EINVAL, "'%s' has a '.' or '..' component", show);
		if (clen > FILES_NAME_MAX)
			return al_error_msg(err, EINVAL, "'%s' has a component over %d bytes", show,
					    FILES_NAME_MAX);
		if (p->len + clen + 1 >= FILES_PATH_MAX)
			return al_error_msg(err, EINVAL, "'%s' is longer than %d bytes", show,
					    FILES_PATH_MAX - 1);
		memcpy(p->buf + p->len, c, clen);
		p->buf[p->len + clen] = '\0';
		p->len += clen + 1;
		p->n++;
		c = end;
	}
	return 0;
}

/* The last component of p (n >= 1); *off is its offset, i.e. the parent's length. */
const char *files_path_last(const struct files_path *p, size_t *off)
{
	const char *c = p->buf, *last = p->buf;

	for (size_t i = 0; i < p->n; i++) {
		last = c;
		c += strlen(c) + 1;
	}
	if (off)
		*off = (size_t)(last - p->buf);
	return last;
}

/* The "/a/b" form of p, in out (FILES_PATH_MAX bytes). */
static const char *files_path_str(const struct files_path *p, char *out)
{
	size_t i;

	out[0] = '/';
	for (i = 0; i < p->len; i++)
		out[i + 1] = p->buf[i] ? p->buf[i] : '/';
	out[p->len ? p->len : 1] = '\0';
	return out;
}

/* An API path: absolute, or relative to workdir; normalized lexically. */
int files_api_path(const char *workdir, const char *path, struct files_path *p,
		   struct files_show *sh, struct al_error **err)
{
	const char *wd = workdir ? workdir : FILES_DEFAULT_WORKDIR;

	_cleanup_free_ char *joined = NULL, *norm = NULL;

	p->len = p->n = 0;
	if (!path || !*path)
		return al_error_msg(err, EINVAL, "empty path");
	files_show(sh, path);
	if (path[0] != '/') {
		if (wd[0] != '/')
			return al_error_msg(err, EINVAL, "workdir '%s' is not absolute", wd);
		joined = xasprintf("%s/%s", wd, path);
	}
	/* The one normal form (common/path.h); its components are what the rules look at. */
	if (al_path_normalize(joined ? joined : path, "path", &norm, err) < 0)
		return -EINVAL;
	return files_path_add(p, norm, true, sh->s, err);
}

/* The writable-area rule: p must be an area or lie under one. Workdir "/" is no area. */
int files_check_writable(const char *workdir, const struct files_path *p, const char *show,
			 struct al_error **err)
{
	static const char *const areas[] = {"/workspace", "/tmp", "/home/user", "/dev/shm", NULL};
	struct files_path a;

	for (size_t i = 0; i < ARRAY_SIZE(areas); i++) {
		const char *s = areas[i] ? areas[i] : workdir ? workdir : FILES_DEFAULT_WORKDIR;

		a.len = a.n = 0;
		if (s[0] != '/' || files_path_add(&a, s, true, s, NULL) < 0 || a.n == 0)
			continue;
		if (p->n >= a.n && memcmp(p->buf, a.buf, a.len) == 0)
			return 0;
	}
	return al_error_msg(err, EACCES,
			    "'%s' is outside the writable areas (/workspace, /tmp, /home/user, "
			    "/dev/shm, the workdir)",
			    show);
}

int files_writable(const char *workdir, const char *path, struct al_error **err)
{
	struct files_path p;
	struct files_show sh;

	if (files_api_path(workdir, path, &p, &sh, err) < 0)
		return -1;
	return files_check_writable(workdir, &p, sh.s, err);
}

/* Refuses pseudo file systems: read or written by host root, they would reach the host. */
int files_check_fs(int fd, const char *show, struct al_error **err)
{
	static const unsigned long bad[] = {
	    PROC_SUPER_MAGIC,	      SYSFS_MAGIC,	  DEBUGFS_MAGIC,  TRACEFS_MAGIC,
	    SECURITYFS_MAGIC,	      SELINUX_MAGIC,	  SMACK_MAGIC,	  CGROUP_SUPER_MAGIC,
	    CGROUP2_SUPER_MAGIC,      BPF_FS_MAGIC,	  EFIVARFS_MAGIC, PSTOREFS_MAGIC,
	    BINFMTFS_MAGIC,	      DEVPTS_SUPER_MAGIC, NSFS_MAGIC,	  0x62656570 /* configfs */,
	    0x65735543 /* fusectl */,
	};
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return al_error_set(err, errno, "statfs '%s'", show);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if ((unsigned long)sf.f_type == bad[i])
			return al_error_msg(err, EACCES, "'%s' is on a pseudo file system (0x%lx)",
					    show, (unsigned long)sf.f_type);
	return 0;
}

int files_open_error(int dir, int e, const char *name, const char *show, struct al_error **err)
{
	struct stat st;

	/* O_NOFOLLOW|O_DIRECTORY on a symlink says ENOTDIR: tell the symlink apart. */
	if (e == ENOTDIR && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		e = ELOOP;
	if (e == ELOOP)
		return al_error_set(err, e, "'%s' in '%s' is a symlink (not followed)", name, show);
	if (e == ENOTDIR)
		return al_error_set(err, e, "'%s' in '%s' is not a directory", name, show);
	return al_error_set(err, e, "open '%s' in '%s'", name, show);
}

/* Chown to owner and set mode on a directory or file fd we hold. */
int files_own(int fd, uid_t owner, mode_t mode, const char *show, struct al_error **err)
{
	if (fchown(fd, owner, owner) < 0)
		return al_error_set(err, errno, "chown '%s'", show);
	if (fchmod(fd, mode) < 0)
		return al_error_set(err, errno, "chmod '%s'", show);
	return 0;
}

/*
 * Opens the subdirectory `name` of dir, never following a symlink, and vets its
 * file system (so nothing is ever created inside a pseudo file system); creates
 * it if asked.
 */
static int files_step(int dir, const char *name, bool create, uid_t owner, const char *show,
		      struct al_error **err)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	_cleanup_close_ int fd = openat(dir, name, flags);
	bool created = false;

	if (fd < 0 && errno == ENOENT && create) {
		created = mkdirat(dir, name, 0700) == 0;
		if (!created && errno != EEXIST)
			return al_error_set(err, errno, "mkdir '%s' in '%s'", name, show);
		fd = openat(dir, name, flags);
	}
	if (fd < 0)
		return files_open_error(dir, errno, name, show, err);
	if (files_check_fs(fd, show, err) < 0)
		return -EACCES;
	if (created && files_own(fd, owner, FILES_DIR_MODE, show, err) < 0)
		return -1;
	return TAKE_FD(fd);
}

/* Opens the directory made of the first n components of p below start, with files_step. */
int files_walk(int start, const struct files_path *p, size_t n, bool create, uid_t owner,
	       const char *show, struct al_error **err)
{
	_cleanup_close_ int dir = fcntl(start, F_DUPFD_CLOEXEC, 3);
	const char *c = p->buf;

	if (dir < 0)
		return al_error_set(err, errno, "dup directory fd");
	for (size_t i = 0; i < n; i++, c += strlen(c) + 1) {
		int next = files_step(dir, c, create, owner, show, err);

		if (next < 0)
			return next;
		close(dir);
		dir = next;
	}
	return TAKE_FD(dir);
}

/* openat2 inside the root: symlinks resolve against the sandbox root, magic links refused. */
static int files_resolve(int root_fd, const struct files_path *p, uint64_t flags, const char *show,
			 struct al_error **err)
{
	struct open_how how = {.flags = flags, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	char path[FILES_PATH_MAX];
	int fd = -1;

	files_path_str(p, path);
	for (int i = 0; i < 16; i++) {
		fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
		if (fd >= 0 || (errno != EAGAIN && errno != EINTR))
			break;
	}
	if (fd < 0)
		return al_error_set(err, errno, "open '%s' in the sandbox", show);
	return fd;
}

/* --- reading and listing ---------------------------------------------------- */

static int files_read_fd(int fd, size_t max, size_t hint, char **out, size_t *out_len,
			 const char *show, struct al_error **err)
{
	size_t cap = (hint < max ? hint : max) + 1, len = 0;
	_cleanup_free_ char *buf = xzalloc(cap + 1);
	ssize_t n;

	for (;;) {
		if (len == cap) {
			if (cap > max)
				return al_error_msg(err, E2BIG, "'%s' is larger than %zu bytes",
						    show, max);
			cap = cap > max / 2 ? max + 1 : cap * 2;
			buf = xrealloc(buf, cap + 1);
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return al_error_set(err, errno, "read '%s'", show);
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max)
		return al_error_msg(err, E2BIG, "'%s' is larger than %zu bytes", show, max);
	buf[len] = '\0';
	*out = TAKE_PTR(buf);
	*out_len = len;
	return 0;
}

int files_read(int root_fd, const char *workdir, const char *path, size_t max, char **out,
	       size_t *out_len, struct al_error **err)
{
	_cleanup_free_ struct files_path *p = xzalloc(sizeof(*p));
	_cleanup_close_ int pfd = -1, fd = -1;
	struct files_show sh;
	char proc[64];
	struct stat st;

	*out = NULL;
	*out_len = 0;
	if (files_api_path(workdir, path, p, &sh, err) < 0)
		return -EINVAL;
	/* O_PATH first: nothing (a FIFO, a device) is opened before we know it is a file. */
	pfd = files_resolve(root_fd, p, O_PATH | O_CLOEXEC, sh.s, err);
	if (pfd < 0)
		return pfd;
	if (fstat(pfd, &st) < 0)
		return al_error_set(err, errno, "stat '%s'", sh.s);
	if (S_ISDIR(st.st_mode))
		return al_error_msg(err, EISDIR, "'%s' is a directory", sh.s);
	if (!S_ISREG(st.st_mode))
		return al_error_msg(err, EINVAL, "'%s' is not a regular file", sh.s);
	if (files_check_fs(pfd, sh.s, err) < 0)
		return -EACCES;
	if ((uint64_t)st.st_size > max)
		return al_error_msg(err, E2BIG, "'%s' has %lld bytes, more than %zu", sh.s,
				    (long long)st.st_size, max);
	/* Reopen that very inode for reading. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return al_error_set(err, errno, "reopen '%s'", sh.s);
	return files_read_fd(fd, max, (size_t)st.st_size, out, out_len, sh.s, err);
}

struct files_item {
	char *name;
	struct stat st;
};

struct files_items {
	struct files_item *v;
	size_t n, cap;
};

static void files_items_free(struct files_items *it)
{
	for (size_t i = 0; i < it->n; i++)
		free(it->v[i].name);
	free(it->v);
}

static int files_item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct files_item *)a)->name, ((const struct files_item *)b)->name);
}

static const char *files_type(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

static json_t *files_items_json(const struct files_items *it)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < it->n; i++) {
		const struct stat *st = &it->v[i].st;
		size_t ulen;
		_cleanup_free_ char *u =
		    al_utf8_sanitize(it->v[i].name, strlen(it->v[i].name), &ulen);
		json_t *o = json_pack(
		    "{s:s, s:s, s:I, s:I, s:I}", "name", u, "type", files_type(st->st_mode), "size",
		    (json_int_t)st->st_size, "mode", (json_int_t)(st->st_mode & 07777), "mtime",
		    (json_int_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000);

		if (!o || json_array_append_new(arr, o) < 0)
			al_oom();
	}
	if (!arr)
		al_oom();
	return arr;
}

int files_list(int root_fd, const char *workdir, const char *path, json_t **out,
	       struct al_error **err)
{
	_cleanup_free_ struct files_path *p = xzalloc(sizeof(*p));
	_files_cleanup_(files_items_free) struct files_items it = {0};
	_cleanup_closedir_ DIR *d = NULL;
	struct files_show sh;
	struct dirent *de;
	int fd;

	*out = NULL;
	if (files_api_path(workdir, path, p, &sh, err) < 0)
		return -EINVAL;
	fd = files_resolve(root_fd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC, sh.s, err);
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return al_error_set(err, errno, "opendir '%s'", sh.s);
	}
	while ((errno = 0, de = readdir(d))) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue; /* removed meanwhile */
			return al_error_set(err, errno, "stat an entry of '%s'", sh.s);
		}
		if (it.n == FILES_LIST_MAX)
			return al_error_msg(err, E2BIG, "'%s' has more than %d entries", sh.s,
					    FILES_LIST_MAX);
		if (it.n == it.cap) {
			it.cap = it.cap ? it.cap * 2 : 64;
			it.v = xrealloc(it.v, it.cap * sizeof(*it.v));
		}
		it.v[it.n].name = xstrdup(de->d_name);
		it.v[it.n++].st = st;
	}
	if (errno)
		return al_error_set(err, errno, "readdir '%s'", sh.s);
	if (it.n) /* an empty listing has no array to sort */
		qsort(it.v, it.n, sizeof(*it.v), files_item_cmp);
	*out = files_items_json(&it);
	return 0;
}

/* --- mkdir ---------------------------------------------------------------------- */

int files_mkdir(int root_fd, const char *workdir, const char *path, uid_t owner, bool parents,
		struct al_error **err)
{
	_cleanup_free_ struct files_path *p = xzalloc(sizeof(*p));
	_cleanup_close_ int parent = -1, fd = -1;
	struct files_show sh;
	const char *name;

	if (files_api_path(workdir, path, p, &sh, err) < 0)
		return -EINVAL;
	if (files_check_writable(workdir, p, sh.s, err) < 0)
		return -EACCES;
	if (parents) {
		fd = files_walk(root_fd, p, p->n, true, owner, sh.s, err);
		return fd < 0 ? fd : 0;
	}
	parent = files_walk(root_fd, p, p->n - 1, false, owner, sh.s, err);
	if (parent < 0)
		return parent;
	name = files_path_last(p, NULL);
	if (mkdirat(parent, name, 0700) < 0)
		return al_error_set(err, errno, "mkdir '%s'", sh.s);
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return files_open_error(parent, errno, name, sh.s, err);
	if (files_check_fs(fd, sh.s, err) < 0)
		return -EACCES;
	return files_own(fd, owner, FILES_DIR_MODE, sh.s, err);
}
