/* SPDX-License-Identifier: MIT */
/*
 * The Vercel-compatible files: write (a gzip'd tar extracted at x-cwd), read
 * (raw bytes; 404 = no such file, which the SDK turns into null), mkdir (not
 * recursive). Relative paths are relative to the session's cwd.
 *
 * fs/write: the SDK always extracts at "/" with entry names such as
 * "vercel/sandbox/a.txt" and no directory entries. The daemon extracts only
 * into a writable area (the workdir, /tmp, ...), and "/" is none, so the
 * archive is regrouped here: the entries are read (libarchive: gzip, ustar
 * prefix, PAX names), each one's full path is x-cwd/name, and every parent
 * directory gets one small tar of its files, extracted by the daemon into
 * that directory (which it creates, and judges: writable area, no escape
 * through symlinks, limits). Directory entries become mkdir -p.
 */
#include "api/vercel/routes_vercel.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define VC_MAX_ENTRIES 100000

struct vc_group {
	char *dir;
	struct archive *w;
	char *buf;
	size_t len, cap;
};

struct vc_regroup {
	struct vc_group **g; /* each on its own: the archive keeps its address */
	size_t n;
	char **dirs; /* from directory entries */
	size_t n_dirs;
	uint64_t total, max;
	char data[64 * 1024];
};

static la_ssize_t vc_mem_write(struct archive *a, void *cls, const void *p, size_t n)
{
	struct vc_group *g = cls;

	if (g->len + n > g->cap) {
		g->cap = g->cap ? g->cap : 16 * 1024;
		while (g->cap < g->len + n)
			g->cap *= 2;
		g->buf = xrealloc(g->buf, g->cap);
	}
	memcpy(g->buf + g->len, p, n);
	g->len += n;
	return (la_ssize_t)n;
}

static void vc_regroup_free(struct vc_regroup *x)
{
	for (size_t i = 0; i < x->n; i++) {
		if (x->g[i]->w)
			archive_write_free(x->g[i]->w);
		free(x->g[i]->dir);
		free(x->g[i]->buf);
		free(x->g[i]);
	}
	free(x->g);
	api_strv_free(x->dirs, x->n_dirs);
	free(x);
}

static inline void vc_regroup_freep(struct vc_regroup **x)
{
	if (*x)
		vc_regroup_free(*x);
}

static inline void vc_archive_freep(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

/*
 * The normalized relative form of an entry name ("./a//b" -> "a/b"), or NULL for
 * a name that is empty, absolute or has a ".." component.
 */
static char *vc_entry_name(const char *name)
{
	char *out = xzalloc(strlen(name) + 1), *o = out;
	const char *p = name;

	if (!name[0] || name[0] == '/')
		goto bad;
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			goto bad;
		if (n && !(n == 1 && p[0] == '.')) {
			if (o != out)
				*o++ = '/';
			memcpy(o, p, n);
			o += n;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	if (o == out)
		goto bad;
	return out;
bad:
	free(out);
	return NULL;
}

static struct vc_group *vc_group_for(struct vc_regroup *x, const char *dir, struct al_error **err)
{
	struct vc_group *g;

	for (size_t i = 0; i < x->n; i++)
		if (strcmp(x->g[i]->dir, dir) == 0)
			return x->g[i];
	x->g = xrealloc(x->g, (x->n + 1) * sizeof(*x->g));
	g = x->g[x->n++] = xzalloc(sizeof(*g));
	g->dir = xstrdup(dir);
	g->w = archive_write_new();
	if (!g->w)
		al_oom();
	if (archive_write_set_format_pax_restricted(g->w) != ARCHIVE_OK ||
	    /* Names are passed on as the bytes they are (UTF-8), whatever the locale. */
	    archive_write_set_format_option(g->w, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
	    archive_write_add_filter_none(g->w) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(g->w, 1) != ARCHIVE_OK ||
	    archive_write_open2(g->w, g, NULL, vc_mem_write, NULL, NULL) != ARCHIVE_OK) {
		al_error_msg(err, EIO, "tar: %s", archive_error_string(g->w) ?: "cannot write");
		return NULL;
	}
	return g;
}

/* Copies one regular file entry into the tar of its directory. */
static int vc_copy_file(struct vc_regroup *x, struct archive *in, struct archive_entry *ae,
			const char *full, struct al_error **err)
{
	_cleanup_free_ char *dir = xstrdup(full);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	struct archive_entry *oe;
	struct vc_group *g;
	la_ssize_t n;

	if (slash == dir)
		return api_bad(err, "'%.200s': a file cannot be written at the root", full);
	if (slash)
		*slash = '\0';
	g = vc_group_for(x, slash ? dir : ".", err);
	if (!g)
		return -1;
	oe = archive_entry_new();
	archive_entry_set_pathname(oe, base);
	archive_entry_set_filetype(oe, AE_IFREG);
	archive_entry_set_perm(oe, archive_entry_perm(ae) & 07777);
	archive_entry_set_size(oe, archive_entry_size(ae));
	archive_entry_set_mtime(oe, archive_entry_mtime(ae), 0);
	if (archive_write_header(g->w, oe) != ARCHIVE_OK) {
		archive_entry_free(oe);
		return al_error_msg(err, EIO, "tar: %s", archive_error_string(g->w) ?: "header");
	}
	archive_entry_free(oe);
	while ((n = archive_read_data(in, x->data, sizeof(x->data))) > 0) {
		x->total += (uint64_t)n;
		if (x->total > x->max)
			return al_error_msg(err, E2BIG, "the archive holds more than %llu bytes",
					    (unsigned long long)x->max);
		if (archive_write_data(g->w, x->data, (size_t)n) != n)
			return al_error_msg(err, EIO, "tar: %s",
					    archive_error_string(g->w) ?: "write");
	}
	if (n < 0)
		return api_bad(err, "bad archive: %s", archive_error_string(in) ?: "read error");
	return 0;
}

static int vc_regroup_entry(struct vc_regroup *x, struct archive *in, struct archive_entry *ae,
			    const char *cwd, struct al_error **err)
{
	const char *raw = archive_entry_pathname(ae) ?: archive_entry_pathname_utf8(ae);
	_cleanup_free_ char *name = raw ? vc_entry_name(raw) : NULL;
	_cleanup_free_ char *full = NULL;
	mode_t type = archive_entry_filetype(ae);

	if (!name)
		return api_bad(err, "bad entry name '%.200s': empty, absolute or with '..'",
			       raw ? raw : "");
	if (!api_utf8_valid(name, strlen(name)))
		return api_bad(err, "entry name is not valid UTF-8");
	full = vc_join(cwd, name);
	if (type == AE_IFDIR) {
		x->dirs = xrealloc(x->dirs, (x->n_dirs + 1) * sizeof(*x->dirs));
		x->dirs[x->n_dirs++] = TAKE_PTR(full);
		return 0;
	}
	if (type != AE_IFREG)
		return api_bad(err, "'%.200s': only regular files and directories are supported",
			       name);
	return vc_copy_file(x, in, ae, full, err);
}

/* Reads the whole upload into per-directory tars; EINVAL for a bad archive. */
static int vc_regroup(struct api_req *r, const char *cwd, struct vc_regroup *x,
		      struct al_error **err)
{
	__attribute__((cleanup(vc_archive_freep))) struct archive *in = archive_read_new();
	struct archive_entry *ae;
	size_t count = 0;
	int ret;

	if (!in)
		al_oom();
	archive_read_support_filter_gzip(in);
	archive_read_support_format_tar(in);
	if (archive_read_open_memory(in, r->body, r->body_len) != ARCHIVE_OK)
		return api_bad(err, "the body is not a tar or tar.gz archive: %s",
			       archive_error_string(in) ?: "unknown format");
	while ((ret = archive_read_next_header(in, &ae)) == ARCHIVE_OK || ret == ARCHIVE_WARN) {
		if (++count > VC_MAX_ENTRIES)
			return al_error_msg(err, E2BIG, "more than %d entries", VC_MAX_ENTRIES);
		if (vc_regroup_entry(x, in, ae, cwd, err) < 0)
			return -1;
	}
	if (ret != ARCHIVE_EOF)
		return api_bad(err, "bad archive: %s", archive_error_string(in) ?: "read error");
	for (size_t i = 0; i < x->n; i++)
		if (archive_write_close(x->g[i]->w) != ARCHIVE_OK)
			return al_error_msg(err, EIO, "tar: %s",
					    archive_error_string(x->g[i]->w) ?: "close");
	return 0;
}

void vc_fs_write(struct api_req *r)
{
	__attribute__((cleanup(vc_regroup_freep))) struct vc_regroup *x = NULL;
	_cleanup_error_ struct al_error *err = NULL;
	const char *sbx = api_param(r, "id");
	const char *cwd = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "x-cwd");
	_cleanup_free_ char *wd = NULL;

	if (cwd && (!cwd[0] || !api_utf8_valid(cwd, strlen(cwd))))
		return vc_reply_error_code(r, 400, "bad_request",
					   "header x-cwd must be a non-empty UTF-8 path");
	wd = vc_workdir(r, sbx, &err);
	if (!wd)
		return vc_reply_error(r, err);
	if (r->body_len == 0)
		return vc_reply_error_code(r, 400, "bad_request",
					   "the body must be a tar or tar.gz archive");
	x = xzalloc(sizeof(*x));
	x->max = r->api->max_upload;
	_cleanup_free_ char *base = cwd ? vc_join(wd, cwd) : xstrdup(wd);

	if (vc_regroup(r, base, x, &err) < 0)
		return vc_reply_error(r, err);
	/* Every place it writes is judged first: a refused upload writes nothing. */
	{
		_cleanup_free_ const char **places =
		    xzalloc((x->n_dirs + x->n + 1) * sizeof(*places));

		for (size_t i = 0; i < x->n_dirs + x->n; i++)
			places[i] = i < x->n_dirs ? x->dirs[i] : x->g[i - x->n_dirs]->dir;
		if (dm_fs_writable(r->api->d, r->team, sbx, places, x->n_dirs + x->n, &err) < 0)
			return vc_reply_error(r, err);
	}
	for (size_t i = 0; i < x->n_dirs; i++) {
		if (dm_fs_mkdir(r->api->d, r->team, sbx, x->dirs[i], true, &err) < 0 &&
		    err->code != EEXIST)
			return vc_reply_error(r, err);
		al_error_free(err);
		err = NULL;
	}
	for (size_t i = 0; i < x->n; i++)
		if (dm_fs_write_tar(r->api->d, r->team, sbx, x->g[i]->dir, x->g[i]->buf,
				    x->g[i]->len, &err) < 0)
			return vc_reply_error(r, err);
	api_reply_json(r, 200, json_object());
}

/* {path, cwd?} -> the path to hand to the daemon (relative ones are its workdir's). */
static int vc_fs_path(json_t *body, char **out, struct al_error **err)
{
	static const char *const fields[] = {"path", "cwd", NULL};
	const char *path = NULL, *cwd = NULL;

	if (api_json_fields(body, "the body", fields, err) < 0 ||
	    api_json_string(body, "path", true, &path, err) < 0 ||
	    api_json_string(body, "cwd", false, &cwd, err) < 0)
		return -EINVAL;
	if (cwd && !cwd[0])
		return api_bad(err, "field 'cwd' must not be empty");
	*out = cwd ? vc_join(cwd, path) : xstrdup(path);
	return 0;
}

void vc_fs_read(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;
	char *data = NULL;
	size_t len = 0;

	if (api_body_object(r, &body, &err) < 0 || vc_fs_path(body, &path, &err) < 0 ||
	    dm_fs_read(r->api->d, r->team, api_param(r, "id"), path, r->api->max_upload, &data,
		       &len, &err) < 0)
		return vc_reply_error(r, err);
	api_reply_raw(r, 200, "application/octet-stream", data, len);
}

void vc_fs_mkdir(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;

	if (api_body_object(r, &body, &err) < 0 || vc_fs_path(body, &path, &err) < 0 ||
	    dm_fs_mkdir(r->api->d, r->team, api_param(r, "id"), path, false, &err) < 0)
		return vc_reply_error(r, err);
	api_reply_json(r, 200, json_object());
}
