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

static const char *files_show(struct files_show *sh, const char *s)
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
static int files_path_add(struct files_path *p, const char *s, bool api, const char *show,
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
static const char *files_path_last(const struct files_path *p, size_t *off)
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
static int files_api_path(const char *workdir, const char *path, struct files_path *p,
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
static int files_check_writable(const char *workdir, const struct files_path *p, const char *show,
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
static int files_check_fs(int fd, const char *show, struct al_error **err)
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

static int files_open_error(int dir, int e, const char *name, const char *show,
			    struct al_error **err)
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
static int files_own(int fd, uid_t owner, mode_t mode, const char *show, struct al_error **err)
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
static int files_walk(int start, const struct files_path *p, size_t n, bool create, uid_t owner,
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

/* --- archives: entries ---------------------------------------------------------- */

enum files_kind { FILES_SKIP, FILES_DIR, FILES_REG, FILES_LNK, FILES_HARD };

struct files_entry {
	enum files_kind kind;
	struct files_path path;
	struct files_path link; /* FILES_HARD: its target */
	const char *symlink;	/* FILES_LNK: its target (owned by libarchive) */
	mode_t mode;
	int64_t size;
	struct files_show sh;
};

/* A name from the archive: relative, no "..", no newline, not over-long. */
static int files_entry_name(const char *name, struct files_path *p, const char *show,
			    struct al_error **err)
{
	p->len = p->n = 0;
	if (!name || !*name)
		return al_error_msg(err, EINVAL,
				    "an archive entry has an empty or unreadable name");
	if (name[0] == '/')
		return al_error_msg(err, EINVAL, "archive entry '%s' is absolute", show);
	if (strchr(name, '\n'))
		return al_error_msg(err, EINVAL, "archive entry '%s' has a newline", show);
	if (strlen(name) >= FILES_PATH_MAX)
		return al_error_msg(err, EINVAL, "archive entry '%s' is longer than %d bytes", show,
				    FILES_PATH_MAX - 1);
	return files_path_add(p, name, false, show, err);
}

static int files_entry_type(struct archive_entry *ae, struct files_entry *e, struct al_error **err)
{
	switch (archive_entry_filetype(ae)) {
	case AE_IFREG:
		e->kind = FILES_REG;
		return 0;
	case AE_IFDIR:
		e->kind = e->path.n ? FILES_DIR : FILES_SKIP; /* "./" is the target itself */
		return 0;
	case AE_IFLNK:
		e->kind = FILES_LNK;
		e->symlink = archive_entry_symlink(ae);
		if (!e->symlink)
			e->symlink = archive_entry_symlink_utf8(ae);
		if (!e->symlink || !*e->symlink || strlen(e->symlink) >= FILES_PATH_MAX)
			return al_error_msg(err, EINVAL, "symlink '%s' has a bad target", e->sh.s);
		return 0;
	case AE_IFCHR:
	case AE_IFBLK:
		return al_error_msg(err, EINVAL, "archive entry '%s' is a device node", e->sh.s);
	default:
		return al_error_msg(err, EINVAL, "archive entry '%s' is a %s", e->sh.s,
				    archive_entry_filetype(ae) == AE_IFIFO ? "FIFO"
				    : archive_entry_filetype(ae) == AE_IFSOCK
					? "socket"
					: "file of unknown type");
	}
}

/* Reads an entry's header into e; refuses anything that may not be extracted. */
static int files_entry_parse(struct archive_entry *ae, struct files_entry *e, struct al_error **err)
{
	const char *name = archive_entry_pathname(ae), *hard = archive_entry_hardlink(ae);
	struct files_show lsh;

	if (!name)
		name = archive_entry_pathname_utf8(ae);
	files_show(&e->sh, name ? name : "");
	if (files_entry_name(name, &e->path, e->sh.s, err) < 0)
		return -EINVAL;
	e->mode = archive_entry_perm(ae) & 0777;
	e->size = archive_entry_size_is_set(ae) ? archive_entry_size(ae) : 0;
	e->symlink = NULL;
	if (!hard && archive_entry_hardlink_utf8(ae))
		hard = archive_entry_hardlink_utf8(ae);
	if (hard) {
		mode_t t = archive_entry_filetype(ae);

		e->kind = FILES_HARD;
		if (t != 0 && t != AE_IFREG)
			return al_error_msg(err, EINVAL, "hard link '%s' is not to a regular file",
					    e->sh.s);
		if (files_entry_name(hard, &e->link, files_show(&lsh, hard), err) < 0)
			return al_error_wrap(err, "hard link '%s'", e->sh.s);
		if (e->link.n == 0)
			return al_error_msg(err, EINVAL, "hard link '%s' has no target", e->sh.s);
	} else if (files_entry_type(ae, e, err) < 0) {
		return -EINVAL;
	}
	if (e->path.n == 0 && e->kind != FILES_SKIP)
		return al_error_msg(err, EINVAL, "archive entry '%s' names no file", e->sh.s);
	return 0;
}

/* --- archives: the index of pass 1 (a trie of the paths seen so far) ------------- */

enum files_ntype { FILES_N_DIR = 1, FILES_N_REG, FILES_N_LNK };

struct files_node {
	uint32_t parent, name_off, next;
	uint16_t name_len;
	uint8_t type;
};

struct files_index {
	struct files_node *nodes; /* [0] is the extraction directory */
	uint32_t n, cap;
	char *names;
	size_t names_len, names_cap;
	uint32_t *heads;
	uint32_t mask;
	uint32_t seed; /* random: the caller cannot aim names at one bucket */
};

static void files_index_free(struct files_index *ix)
{
	free(ix->nodes);
	free(ix->names);
	free(ix->heads);
}

static uint32_t files_hash(uint32_t seed, uint32_t parent, const char *s, size_t len)
{
	uint32_t h = (2166136261u ^ seed) + parent * 0x9e3779b9u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h ^ (h >> 15);
}

static uint32_t files_index_find(const struct files_index *ix, uint32_t parent, const char *s,
				 size_t len)
{
	for (uint32_t i = ix->heads[files_hash(ix->seed, parent, s, len) & ix->mask]; i;
	     i = ix->nodes[i].next) {
		const struct files_node *nd = &ix->nodes[i];

		if (nd->parent == parent && nd->name_len == len &&
		    memcmp(ix->names + nd->name_off, s, len) == 0)
			return i;
	}
	return 0;
}

static void files_index_link(struct files_index *ix, uint32_t i)
{
	struct files_node *nd = &ix->nodes[i];
	uint32_t b =
	    files_hash(ix->seed, nd->parent, ix->names + nd->name_off, nd->name_len) & ix->mask;

	nd->next = ix->heads[b];
	ix->heads[b] = i;
}

static int files_index_insert(struct files_index *ix, uint32_t parent, const char *s, size_t len,
			      uint8_t type, struct al_error **err)
{
	if (ix->n >= FILES_INDEX_MAX_NODES || ix->names_len + len > FILES_INDEX_MAX_NAMES)
		return al_error_msg(err, E2BIG, "the archive names more than %u paths or %u bytes",
				    FILES_INDEX_MAX_NODES, FILES_INDEX_MAX_NAMES);
	if (ix->n == ix->cap) {
		ix->cap = ix->cap ? ix->cap * 2 : 1024;
		ix->nodes = xrealloc(ix->nodes, ix->cap * sizeof(*ix->nodes));
	}
	if (ix->names_len + len > ix->names_cap) {
		ix->names_cap = (ix->names_cap + len) * 2;
		ix->names = xrealloc(ix->names, ix->names_cap);
	}
	if (ix->n > ix->mask) { /* keep chains short: rehash into twice the buckets */
		ix->mask = ix->mask * 2 + 1;
		free(ix->heads);
		ix->heads = xzalloc(((size_t)ix->mask + 1) * sizeof(*ix->heads));
		for (uint32_t i = 1; i < ix->n; i++)
			files_index_link(ix, i);
	}
	memcpy(ix->names + ix->names_len, s, len);
	ix->nodes[ix->n] = (struct files_node){.parent = parent,
					       .name_off = (uint32_t)ix->names_len,
					       .name_len = (uint16_t)len,
					       .type = type};
	ix->names_len += len;
	files_index_link(ix, ix->n);
	return (int)ix->n++;
}

static void files_index_init(struct files_index *ix)
{
	ix->mask = 1023;
	if (getrandom(&ix->seed, sizeof(ix->seed), GRND_NONBLOCK) != sizeof(ix->seed))
		ix->seed = (uint32_t)(uintptr_t)ix ^ (uint32_t)getpid();
	ix->heads = xzalloc(((size_t)ix->mask + 1) * sizeof(*ix->heads));
	ix->cap = 1024;
	ix->nodes = xzalloc(ix->cap * sizeof(*ix->nodes));
	ix->nodes[0].type = FILES_N_DIR;
	ix->n = 1;
}

/* The node of the whole path p, or 0. */
static uint32_t files_index_lookup(const struct files_index *ix, const struct files_path *p)
{
	const char *c = p->buf;
	uint32_t cur = 0;

	for (size_t i = 0; i < p->n; i++, c += strlen(c) + 1) {
		cur = files_index_find(ix, cur, c, strlen(c));
		if (!cur)
			return 0;
	}
	return cur;
}

/* The parent node of e's path, creating implicit directories; only through directories. */
static int files_index_parent(struct files_index *ix, const struct files_entry *e,
			      struct al_error **err)
{
	const char *c = e->path.buf;
	uint32_t cur = 0, i;

	for (size_t k = 0; k + 1 < e->path.n; k++, c += strlen(c) + 1) {
		i = files_index_find(ix, cur, c, strlen(c));
		if (!i) {
			int r = files_index_insert(ix, cur, c, strlen(c), FILES_N_DIR, err);

			if (r < 0)
				return r;
			i = (uint32_t)r;
		} else if (ix->nodes[i].type != FILES_N_DIR) {
			return al_error_msg(
			    err, EINVAL, "archive entry '%s' goes through the %s '%s'", e->sh.s,
			    ix->nodes[i].type == FILES_N_LNK ? "symlink" : "file", c);
		}
		cur = i;
	}
	return (int)cur;
}

/* Records e in the index; refuses what could not be extracted without following a link. */
static int files_index_add(struct files_index *ix, const struct files_entry *e,
			   struct al_error **err)
{
	uint8_t type = e->kind == FILES_DIR   ? FILES_N_DIR
		       : e->kind == FILES_LNK ? FILES_N_LNK
					      : FILES_N_REG;
	const char *name;
	uint32_t i, t;
	int parent;

	if (e->kind == FILES_SKIP)
		return 0;
	parent = files_index_parent(ix, e, err);
	if (parent < 0)
		return parent;
	name = files_path_last(&e->path, NULL);
	i = files_index_find(ix, (uint32_t)parent, name, strlen(name));
	if (e->kind == FILES_HARD) {
		t = files_index_lookup(ix, &e->link);
		if (!t || ix->nodes[t].type != FILES_N_REG || t == i)
			return al_error_msg(err, EINVAL,
					    "hard link '%s' is not to an earlier regular file of "
					    "the archive",
					    e->sh.s);
	}
	if (!i) {
		int r = files_index_insert(ix, (uint32_t)parent, name, strlen(name), type, err);

		return r < 0 ? r : 0;
	}
	if (ix->nodes[i].type == FILES_N_DIR && type == FILES_N_DIR)
		return 0;
	if (ix->nodes[i].type == FILES_N_DIR || type == FILES_N_DIR)
		return al_error_msg(
		    err, EINVAL, "archive entry '%s' is a directory and a non-directory", e->sh.s);
	if (ix->nodes[i].type == FILES_N_LNK && e->kind == FILES_REG)
		return al_error_msg(
		    err, EINVAL, "archive entry '%s' would be written through a symlink", e->sh.s);
	ix->nodes[i].type = type;
	return 0;
}

/* --- archives: reading ---------------------------------------------------------- */

static void files_archive_freep(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

/*
 * Formats: all that libarchive reads (mtree does not read the host's files
 * unless its "checkfs" option is set). Filters: the in-process ones only --
 * filter_all would also accept lzop, lrzip and grzip through external programs,
 * run as host root on the caller's bytes.
 */
static struct archive *files_archive_open(const void *data, size_t len, struct al_error **err)
{
	struct archive *a = archive_read_new();

	if (!a)
		al_oom();
	archive_read_support_format_all(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_lzma(a);
	archive_read_support_filter_lzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_lz4(a);
	archive_read_support_filter_compress(a);
	if (archive_read_open_memory(a, data, len) != ARCHIVE_OK) {
		al_error_msg(err, EINVAL, "not an archive: %s",
			     archive_error_string(a) ? archive_error_string(a) : "unknown format");
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* 1 with the next header in *ae, 0 at the end, <0 on a damaged archive. */
static int files_next(struct archive *a, struct archive_entry **ae, struct al_error **err)
{
	int r = archive_read_next_header(a, ae);

	if (r == ARCHIVE_EOF)
		return 0;
	if (r == ARCHIVE_OK || r == ARCHIVE_WARN)
		return 1;
	return al_error_msg(err, EINVAL, "read archive: %s",
			    archive_error_string(a) ? archive_error_string(a) : "damaged");
}

/* Pass 1: reads every header and every data byte; writes nothing. */
static int files_validate(const void *data, size_t len, const struct files_limits *lim,
			  struct al_error **err)
{
	_files_cleanup_(files_archive_freep) struct archive *a = files_archive_open(data, len, err);
	_files_cleanup_(files_index_free) struct files_index ix = {0};
	_cleanup_free_ struct files_entry *e = xzalloc(sizeof(*e));
	_cleanup_free_ char *buf = xzalloc(FILES_CHUNK);
	uint64_t entries = 0, bytes = 0;
	struct archive_entry *ae;
	ssize_t n;
	int r;

	if (!a)
		return -EINVAL;
	files_index_init(&ix);
	while ((r = files_next(a, &ae, err)) > 0) {
		if (++entries > lim->max_entries)
			return al_error_msg(err, E2BIG, "the archive has more than %llu entries",
					    (unsigned long long)lim->max_entries);
		if (files_entry_parse(ae, e, err) < 0)
			return -EINVAL;
		if (e->size > 0 && (uint64_t)e->size > lim->max_bytes - bytes)
			return al_error_msg(err, E2BIG,
					    "'%s' (%lld bytes) exceeds the %llu bytes "
					    "an archive may write",
					    e->sh.s, (long long)e->size,
					    (unsigned long long)lim->max_bytes);
		if ((r = files_index_add(&ix, e, err)) < 0)
			return r;
		/* Count what the data really inflates to: declared sizes may lie. */
		while ((n = archive_read_data(a, buf, FILES_CHUNK)) > 0) {
			bytes += (uint64_t)n;
			if (bytes > lim->max_bytes)
				return al_error_msg(err, E2BIG,
						    "the archive holds more than %llu "
						    "bytes (at '%s')",
						    (unsigned long long)lim->max_bytes, e->sh.s);
		}
		if (n < 0)
			return al_error_msg(err, EINVAL, "read '%s' from the archive: %s", e->sh.s,
					    archive_error_string(a) ? archive_error_string(a) : "");
	}
	return r;
}

/* --- archives: extraction (pass 2) ---------------------------------------------- */

struct files_x {
	int dir_fd; /* the extraction directory */
	uid_t owner;
	const struct files_limits *lim;
	uint64_t bytes;
	int parent_fd; /* the parent directory of the previous entry, and its path */
	struct files_path parent;
	char buf[FILES_CHUNK];
};

static void files_x_free(struct files_x **x)
{
	if (*x) {
		al_closep(&(*x)->parent_fd);
		free(*x);
	}
}

/* The parent directory of e, made by files_walk (created as needed); cached. */
static int files_x_parent(struct files_x *x, const struct files_entry *e, struct al_error **err)
{
	size_t off;

	files_path_last(&e->path, &off);
	if (x->parent_fd >= 0 && x->parent.n + 1 == e->path.n && x->parent.len == off &&
	    memcmp(x->parent.buf, e->path.buf, off) == 0)
		return x->parent_fd;
	al_closep(&x->parent_fd);
	x->parent_fd = files_walk(x->dir_fd, &e->path, e->path.n - 1, true, x->owner, e->sh.s, err);
	if (x->parent_fd < 0)
		return -1;
	memcpy(x->parent.buf, e->path.buf, off);
	x->parent.len = off;
	x->parent.n = e->path.n - 1;
	return x->parent_fd;
}

static int files_write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Opens name in parent for writing: created, or an existing regular file truncated. */
static int files_open_reg(int parent, const char *name, const char *show, struct al_error **err)
{
	_cleanup_close_ int fd =
	    openat(parent, name,
		   O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
	struct stat st;

	if (fd < 0 && errno == ELOOP)
		return al_error_msg(err, ELOOP, "'%s' is a symlink (not followed)", show);
	if (fd < 0)
		return al_error_set(err, errno, "create '%s'", show);
	if (fstat(fd, &st) < 0)
		return al_error_set(err, errno, "stat '%s'", show);
	if (!S_ISREG(st.st_mode))
		return al_error_msg(err, EEXIST, "'%s' exists and is not a regular file", show);
	if (files_check_fs(fd, show, err) < 0)
		return -EACCES;
	if (st.st_size > 0 && ftruncate(fd, 0) < 0)
		return al_error_set(err, errno, "truncate '%s'", show);
	return TAKE_FD(fd);
}

/* Writes the entry's data (pending bytes already in x->buf) into name, then owner and mode. */
static int files_x_data(struct files_x *x, struct archive *a, int parent, const char *name,
			const struct files_entry *e, ssize_t pending, struct al_error **err)
{
	_cleanup_close_ int fd = files_open_reg(parent, name, e->sh.s, err);
	ssize_t n = pending;

	if (fd < 0)
		return fd;
	if (fchown(fd, x->owner, x->owner) < 0)
		return al_error_set(err, errno, "chown '%s'", e->sh.s);
	for (;;) {
		if (n == 0)
			n = archive_read_data(a, x->buf, sizeof(x->buf));
		if (n == 0)
			break;
		if (n < 0)
			return al_error_msg(err, EINVAL, "read '%s' from the archive: %s", e->sh.s,
					    archive_error_string(a) ? archive_error_string(a) : "");
		x->bytes += (uint64_t)n;
		if (x->bytes > x->lim->max_bytes)
			return al_error_msg(err, E2BIG, "the archive holds more than %llu bytes",
					    (unsigned long long)x->lim->max_bytes);
		if (files_write_all(fd, x->buf, (size_t)n) < 0)
			return al_error_set(err, errno,
					    "write '%s' (the sandbox's disk may be full)", e->sh.s);
		n = 0;
	}
	return files_own(fd, x->owner, e->mode, e->sh.s, err);
}

static int files_x_dir(struct files_x *x, int parent, const char *name, const struct files_entry *e,
		       struct al_error **err)
{
	_cleanup_close_ int fd = -1;

	if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
		return al_error_set(err, errno, "mkdir '%s'", e->sh.s);
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return files_open_error(parent, errno, name, e->sh.s, err);
	if (files_check_fs(fd, e->sh.s, err) < 0)
		return -EACCES;
	return files_own(fd, x->owner, e->mode, e->sh.s, err);
}

/* Makes a symlink or hard link at name, replacing an existing non-directory. */
static int files_x_link(struct files_x *x, int tdir, const char *tname, int parent,
			const char *name, const struct files_entry *e, struct al_error **err)
{
	for (int tries = 0;; tries++) {
		int r = e->kind == FILES_LNK ? symlinkat(e->symlink, parent, name)
					     : linkat(tdir, tname, parent, name, 0);

		if (r == 0)
			break;
		if (errno != EEXIST || tries > 0)
			return al_error_set(err, errno, "link '%s'", e->sh.s);
		if (unlinkat(parent, name, 0) < 0)
			return al_error_set(err, errno == EISDIR ? EEXIST : errno, "replace '%s'",
					    e->sh.s);
	}
	if (e->kind == FILES_LNK &&
	    fchownat(parent, name, x->owner, x->owner, AT_SYMLINK_NOFOLLOW) < 0)
		return al_error_set(err, errno, "chown '%s'", e->sh.s);
	return 0;
}

static int files_x_hard(struct files_x *x, struct archive *a, int parent, const char *name,
			const struct files_entry *e, struct al_error **err)
{
	_cleanup_close_ int tdir = -1;
	const char *tname = files_path_last(&e->link, NULL);
	struct stat st;
	ssize_t n;

	/* The target is found by the same no-follow walk, never created. */
	tdir = files_walk(x->dir_fd, &e->link, e->link.n - 1, false, x->owner, e->sh.s, err);
	if (tdir < 0)
		return tdir;
	if (fstatat(tdir, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return al_error_msg(err, EINVAL, "hard link '%s': the target is not a regular file",
				    e->sh.s);
	if (files_x_link(x, tdir, tname, parent, name, e, err) < 0)
		return -1;
	/* A hard link may carry the data of its file (cpio, pax). */
	n = archive_read_data(a, x->buf, sizeof(x->buf));
	return n == 0 ? 0 : files_x_data(x, a, parent, name, e, n, err);
}

/* Pass 2: extracts into dir_fd what pass 1 accepted. */
static int files_extract(int dir_fd, const void *data, size_t len, uid_t owner,
			 const struct files_limits *lim, struct al_error **err)
{
	_files_cleanup_(files_archive_freep) struct archive *a = files_archive_open(data, len, err);
	_files_cleanup_(files_x_free) struct files_x *x = xzalloc(sizeof(*x));
	_cleanup_free_ struct files_entry *e = xzalloc(sizeof(*e));
	struct archive_entry *ae;
	const char *name;
	int r, parent;

	if (!a)
		return -EINVAL;
	*x = (struct files_x){.dir_fd = dir_fd, .owner = owner, .lim = lim, .parent_fd = -1};
	while ((r = files_next(a, &ae, err)) > 0) {
		if (files_entry_parse(ae, e, err) < 0)
			return -EINVAL;
		if (e->kind == FILES_SKIP)
			continue;
		parent = files_x_parent(x, e, err);
		if (parent < 0)
			return -1;
		name = files_path_last(&e->path, NULL);
		if (e->kind == FILES_DIR)
			r = files_x_dir(x, parent, name, e, err);
		else if (e->kind == FILES_REG)
			r = files_x_data(x, a, parent, name, e, 0, err);
		else if (e->kind == FILES_LNK)
			r = files_x_link(x, -1, NULL, parent, name, e, err);
		else
			r = files_x_hard(x, a, parent, name, e, err);
		if (r < 0)
			return r;
	}
	return r;
}

int files_write_tar(int root_fd, const char *workdir, const char *dir, uid_t owner,
		    const void *data, size_t len, const struct files_limits *lim,
		    struct al_error **err)
{
	_cleanup_free_ struct files_path *p = xzalloc(sizeof(*p));
	_cleanup_close_ int dfd = -1;
	struct files_show sh;
	int r;

	if (files_api_path(workdir, dir, p, &sh, err) < 0)
		return -EINVAL;
	if (files_check_writable(workdir, p, sh.s, err) < 0)
		return -EACCES;
	if (!lim || !data || len == 0)
		return al_error_msg(err, EINVAL, "no archive or no limits");
	r = files_validate(data, len, lim, err);
	if (r < 0)
		return al_error_wrap(err, "archive refused, nothing written");
	dfd = files_walk(root_fd, p, p->n, true, owner, sh.s, err);
	if (dfd < 0)
		return dfd;
	r = files_extract(dfd, data, len, owner, lim, err);
	return r < 0 ? al_error_wrap(err, "extract into '%s'", sh.s) : 0;
}
