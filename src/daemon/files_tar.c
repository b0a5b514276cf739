/* SPDX-License-Identifier: MIT */
/*
 * Writing a tar (or tar.gz) archive into a live sandbox (files.c has the rules): every
 * entry validated before the first byte is written, then extracted walking from the
 * root with O_NOFOLLOW (docs/design/files.md).
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
