/* SPDX-License-Identifier: MIT */
/*
 * envd's HTTP file routes: GET /files (a file's bytes) and POST /files (multipart/form-data
 * with one part per file, or one application/octet-stream body), through the daemon's
 * tenant-safe file code (dm_fs_read; writes as a one-entry tar for dm_fs_write_tar, which
 * creates the parents and refuses anything outside the sandbox's writable areas). A
 * request without X-Access-Token must carry a signature: "v1_" + unpadded base64 of
 * sha256("path:operation:user:envdAccessToken[:expiration]"), operation read or write,
 * not expired.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zlib.h>

#define E2B_MAX_PARTS 64

static void e2b_http_error(struct api_req *r, unsigned status, const char *msg)
{
	api_reply_json(r, status, json_pack("{s:i,s:s}", "code", (int)status, "message", msg));
}

static void e2b_http_al_error(struct api_req *r, const struct al_error *err)
{
	const char *name;
	unsigned st = api_status_of_errno(err ? err->code : EIO, &name);

	if (err && (err->code == EACCES || err->code == EPERM))
		st = 403;
	else if (err && (err->code == ENOSPC || err->code == EDQUOT))
		st = 507;
	e2b_http_error(r, st, err && err->msg ? err->msg : "internal error");
}

/* Whether a request without the access token carries a valid signature. */
static bool e2b_signature_ok(struct api_req *r, const char *op)
{
	const char *sig = api_query(r, "signature"), *exp = api_query(r, "signature_expiration");
	const char *path = api_query(r, "path"), *user = api_query(r, "username");
	unsigned char md[SHA256_DIGEST_LENGTH];
	_cleanup_free_ char *raw = NULL, *b64 = NULL, *want = NULL;
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	unsigned diff;
	size_t n;

	if (!sig || !path)
		return false;
	if (exp && (strtoll(exp, NULL, 10) <= 0 || strtoll(exp, NULL, 10) < (long long)time(NULL)))
		return false;
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	if (s)
		raw = exp ? xasprintf("%s:%s:%s:%s:%s", path, op, user ? user : "", s->token, exp)
			  : xasprintf("%s:%s:%s:%s", path, op, user ? user : "", s->token);
	pthread_mutex_unlock(&e->mu);
	if (!raw)
		return false;
	SHA256((const unsigned char *)raw, strlen(raw), md);
	explicit_bzero(raw, strlen(raw));
	b64 = e2b_b64(md, sizeof(md));
	b64[strcspn(b64, "=")] = '\0';
	want = xasprintf("v1_%s", b64);
	n = strlen(want);
	diff = (unsigned)(strlen(sig) != n);
	for (size_t i = 0; i < n && sig[0]; i++)
		diff |= (unsigned char)want[i] ^ (unsigned char)sig[i % strlen(sig)];
	return diff == 0;
}

/* Access: the token (checked when the request was routed) or a signature. */
static bool e2b_files_access(struct api_req *r, const char *op)
{
	if (MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Access-Token"))
		return true;
	if (e2b_signature_ok(r, op))
		return true;
	e2b_http_error(r, 401, "a signed URL's signature is missing, wrong or expired");
	return false;
}

void e2b_files_get(struct api_req *r)
{
	const char *p = api_query(r, "path");
	_cleanup_free_ char *path = NULL;
	struct al_error *err = NULL;
	char *data = NULL;
	size_t len = 0;
	bool root;

	if (!e2b_files_access(r, "read"))
		return;
	if (!p || !p[0])
		return e2b_http_error(r, 400, "the path parameter is required");
	if (e2b_user(r, api_query(r, "username"), &root) < 0)
		return e2b_http_error(r, 400,
				      "unknown user: 'user' and 'root' are the sandbox's users");
	path = e2b_path(p);
	if (dm_fs_read(r->api->d, r->team, e2b_envd_sbx(r), path, r->api->max_upload, &data, &len,
		       &err) < 0) {
		e2b_http_al_error(r, err);
		al_error_free(err);
		return;
	}
	api_reply_raw(r, 200, "application/octet-stream", data, len);
}

/* One file written: a one-entry tar of its basename extracted into its directory. */
static int e2b_write_one(struct api_req *r, const char *path, const void *data, size_t len,
			 struct al_error **err)
{
	_cleanup_free_ char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	const char *name = slash + 1;
	size_t cap = len + 4096, used = 0;
	_cleanup_free_ char *tar = xzalloc(cap);
	struct archive *a = archive_write_new();
	struct archive_entry *ent = archive_entry_new();
	int rc = 0;

	*slash = '\0';
	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		rc = api_bad(err, "'%s' does not name a file", path);
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if (!rc && archive_write_open_memory(a, tar, cap, &used) != ARCHIVE_OK)
		rc = al_error_msg(err, EIO, "building the upload: %s", archive_error_string(a));
	archive_entry_set_pathname(ent, name);
	archive_entry_set_filetype(ent, AE_IFREG);
	archive_entry_set_perm(ent, 0644);
	archive_entry_set_size(ent, (la_int64_t)len);
	if (!rc && (archive_write_header(a, ent) != ARCHIVE_OK ||
		    (len && archive_write_data(a, data, len) != (la_ssize_t)len) ||
		    archive_write_close(a) != ARCHIVE_OK))
		rc = al_error_msg(err, EIO, "building the upload: %s", archive_error_string(a));
	archive_entry_free(ent);
	archive_write_free(a);
	if (rc < 0)
		return rc;
	return dm_fs_write_tar(r->api->d, r->team, e2b_envd_sbx(r), dir[0] ? dir : "/", tar, used,
			       err);
}

static json_t *e2b_written(const char *path)
{
	const char *slash = strrchr(path, '/');

	return json_pack("{s:s,s:s,s:s}", "name", slash ? slash + 1 : path, "type", "file", "path",
			 path);
}

/* A gzip body (Content-Encoding: gzip) inflated, at most max bytes (heap); NULL with a
 * reason. */
static char *e2b_gunzip(const char *in, size_t len, size_t max, size_t *out_len, const char **why)
{
	z_stream z = {0};
	size_t cap = len * 4 + 4096 < max ? len * 4 + 4096 : max + 1;
	char *out = xzalloc(cap + 1);
	int rc;

	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return *why = "gzip: cannot start", NULL;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	do {
		if (z.total_out == cap) {
			if (cap > max) {
				rc = Z_MEM_ERROR;
				break;
			}
			cap = cap * 2 < max + 1 ? cap * 2 : max + 1;
			out = xrealloc(out, cap + 1);
		}
		z.next_out = (Bytef *)out + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		rc = inflate(&z, Z_NO_FLUSH);
	} while (rc == Z_OK);
	*out_len = z.total_out;
	inflateEnd(&z);
	if (rc != Z_STREAM_END || z.avail_in != 0 || *out_len > max) {
		free(out);
		*why = rc == Z_MEM_ERROR || *out_len > max
			   ? "gzip: the upload inflates past the limit"
			   : "gzip: not one complete gzip stream";
		return NULL;
	}
	return out;
}

struct e2b_part {
	char *name; /* the part's filename (heap), or NULL */
	const char *data;
	size_t len;
};

/* The boundary of a multipart/form-data content type (heap), or NULL. */
static char *e2b_boundary(const char *ct)
{
	const char *b = ct ? strcasestr(ct, "boundary=") : NULL;
	size_t n;

	if (!b)
		return NULL;
	b += 9;
	if (*b == '"') {
		b++;
		n = strcspn(b, "\"");
	} else {
		n = strcspn(b, "; \t");
	}
	return n && n <= 70 ? xasprintf("--%.*s", (int)n, b) : NULL;
}

static char *e2b_part_filename(const char *h, size_t n)
{
	_cleanup_free_ char *head = xzalloc(n + 1);
	const char *f;
	size_t k;

	memcpy(head, h, n);
	f = strcasestr(head, "filename=\"");
	if (!f)
		return NULL;
	f += 10;
	k = strcspn(f, "\"\r\n");
	if (f[k] != '"' || k == 0 || k >= 4096)
		return NULL;
	return xasprintf("%.*s", (int)k, f);
}

/* Splits a multipart body; -1 with *why on anything malformed. */
static int e2b_multipart(const char *body, size_t len, const char *delim, struct e2b_part *parts,
			 size_t *n, const char **why)
{
	size_t dl = strlen(delim);
	const char *p = memmem(body, len, delim, dl), *end = body + len;

	*n = 0;
	while (p) {
		const char *h, *hend, *next;

		p += dl;
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return *n ? 0 : (*why = "no file in the form", -1);
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
			return *why = "malformed multipart delimiter", -1;
		h = p + 2;
		hend = memmem(h, (size_t)(end - h), "\r\n\r\n", 4);
		if (!hend)
			return *why = "truncated multipart headers", -1;
		next = memmem(hend + 4, (size_t)(end - hend - 4), delim, dl);
		if (!next || next - (hend + 4) < 2 || next[-2] != '\r' || next[-1] != '\n')
			return *why = "truncated multipart part", -1;
		if (*n >= E2B_MAX_PARTS)
			return *why = "too many files in one upload", -1;
		parts[*n] = (struct e2b_part){e2b_part_filename(h, (size_t)(hend - h)), hend + 4,
					      (size_t)(next - 2 - (hend + 4))};
		(*n)++;
		p = next;
	}
	return *why = "no multipart delimiter", -1;
}

static void e2b_parts_free(struct e2b_part *parts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(parts[i].name);
}

void e2b_files_post(struct api_req *r)
{
	const char *ct =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *enc =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
	const char *qpath = api_query(r, "path"), *why = NULL;
	_cleanup_free_ char *delim = NULL, *plain = NULL;
	struct e2b_part parts[E2B_MAX_PARTS];
	struct al_error *err = NULL;
	size_t n = 0;
	json_t *out;
	bool root;

	if (!e2b_files_access(r, "write"))
		return;
	if (e2b_user(r, api_query(r, "username"), &root) < 0)
		return e2b_http_error(r, 400,
				      "unknown user: 'user' and 'root' are the sandbox's users");
	if (enc && strcasecmp(enc, "identity") != 0 && strcasecmp(enc, "gzip") != 0)
		return e2b_http_error(r, 415, "Content-Encoding: gzip and identity are served");
	if (ct && strncasecmp(ct, "application/octet-stream", 24) == 0) {
		size_t len = r->body_len;

		if (!qpath || !qpath[0])
			return e2b_http_error(r, 400,
					      "an octet-stream upload needs the path parameter");
		if (enc && strcasecmp(enc, "gzip") == 0 &&
		    !(plain = e2b_gunzip(r->body ? r->body : "", r->body_len, r->api->max_upload,
					 &len, &why)))
			return e2b_http_error(r, 400, why);
		parts[0] = (struct e2b_part){xstrdup(qpath),
					     plain     ? plain
					     : r->body ? r->body
						       : "",
					     len};
		n = 1;
	} else if (enc && strcasecmp(enc, "gzip") == 0) {
		return e2b_http_error(r, 415, "gzip is served for octet-stream uploads");
	} else if (!(delim = e2b_boundary(ct)) || strncasecmp(ct, "multipart/form-data", 19) != 0) {
		return e2b_http_error(r, 415,
				      "POST /files takes multipart/form-data or "
				      "application/octet-stream");
	} else if (e2b_multipart(r->body ? r->body : "", r->body_len, delim, parts, &n, &why) < 0) {
		e2b_parts_free(parts, n);
		return e2b_http_error(r, 400, why);
	}
	out = json_array();
	for (size_t i = 0; i < n; i++) {
		const char *want = n == 1 && qpath && qpath[0] ? qpath : parts[i].name;
		_cleanup_free_ char *path = want ? e2b_path(want) : NULL;

		if (!path) {
			api_bad(&err, "part %zu has no file name and no path was given", i);
			break;
		}
		if (e2b_write_one(r, path, parts[i].data, parts[i].len, &err) < 0)
			break;
		json_array_append_new(out, e2b_written(path));
	}
	e2b_parts_free(parts, n);
	if (err) {
		json_decref(out);
		e2b_http_al_error(r, err);
		al_error_free(err);
		return;
	}
	api_reply_json(r, 200, out);
}
