/* SPDX-License-Identifier: MIT */
/*
 * envd's filesystem service. Reads, listings and directory creation go through the
 * daemon's tenant-safe file code (src/daemon/fs.c: resolved inside the sandbox's root,
 * with the sandbox user's credentials); Move and Remove run mv / rm as a command inside
 * the sandbox, as the caller's user, so the kernel judges them there. A relative path is
 * relative to /home/user, as in E2B. Watches are in envd_watch.c.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define E2B_HOME "/home/user"
#define E2B_LIST_ENTRIES 10000
#define E2B_FS_MAX_DEPTH 16

char *e2b_path(const char *p)
{
	if (p[0] == '/')
		return xstrdup(p);
	if (!p[0] || strcmp(p, ".") == 0)
		return xstrdup(E2B_HOME);
	return xasprintf(E2B_HOME "/%s", p);
}

static const char *e2b_ftype(const char *t)
{
	if (t && strcmp(t, "file") == 0)
		return "FILE_TYPE_FILE";
	if (t && strcmp(t, "dir") == 0)
		return "FILE_TYPE_DIRECTORY";
	if (t && strcmp(t, "symlink") == 0)
		return "FILE_TYPE_SYMLINK";
	return "FILE_TYPE_UNSPECIFIED";
}

static void e2b_perms(unsigned mode, const char *type, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = type && strcmp(type, "dir") == 0	? 'd'
		 : type && strcmp(type, "symlink") == 0 ? 'l'
							: '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = mode & (0400u >> i) ? rwx[i] : '-';
	out[10] = '\0';
}

/* EntryInfo of a files_list entry found in dir. */
static json_t *e2b_entry(json_t *ent, const char *dir)
{
	const char *name = json_string_value(json_object_get(ent, "name"));
	const char *type = json_string_value(json_object_get(ent, "type"));
	json_int_t ms = json_integer_value(json_object_get(ent, "mtime"));
	unsigned mode = (unsigned)json_integer_value(json_object_get(ent, "mode"));
	size_t dl = strlen(dir);
	_cleanup_free_ char *path =
	    xasprintf("%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name ? name : "");
	time_t t = (time_t)(ms / 1000);
	char perms[11], ts[40], size[24];
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + strlen(ts), sizeof(ts) - strlen(ts), ".%03dZ", (int)(ms % 1000));
	e2b_perms(mode, type, perms);
	snprintf(size, sizeof(size), "%lld",
		 (long long)json_integer_value(json_object_get(ent, "size")));
	/* int64 is a string in protobuf's JSON */
	return json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:s,s:s}", "name", name ? name : "", "type",
			 e2b_ftype(type), "path", path, "size", size, "mode", (int)mode,
			 "permissions", perms, "owner", "", "group", "", "modifiedTime", ts);
}

/* The entry of path (its parent listed), a new reference, or NULL with err (ENOENT). */
static json_t *e2b_stat(struct api_req *r, const char *path, struct al_error **err)
{
	_cleanup_free_ char *dir = xstrdup(path);
	_cleanup_json_ json_t *list = NULL;
	char *slash, *name;
	json_t *ent;
	size_t i;

	while (strlen(dir) > 1 && dir[strlen(dir) - 1] == '/')
		dir[strlen(dir) - 1] = '\0';
	if (strcmp(dir, "/") == 0)
		return json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:s}", "name", "/", "type",
				 "FILE_TYPE_DIRECTORY", "path", "/", "size", "0", "mode", 0755,
				 "permissions", "drwxr-xr-x", "owner", "", "group", "");
	slash = strrchr(dir, '/');
	name = slash + 1;
	*slash = '\0';
	if (dm_fs_list(r->api->d, r->team, e2b_envd_sbx(r), dir[0] ? dir : "/", &list, err) < 0)
		return NULL;
	json_array_foreach(list, i, ent)
	{
		const char *n = json_string_value(json_object_get(ent, "name"));

		if (n && strcmp(n, name) == 0)
			return e2b_entry(ent, dir[0] ? dir : "/");
	}
	al_error_msg(err, ENOENT, "'%s' does not exist", path);
	return NULL;
}

/* The message's "path" as an absolute sandbox path (heap), or NULL with an answer. */
static char *e2b_msg_path(struct api_req *r, json_t *msg, const char *key)
{
	const char *p = json_string_value(json_object_get(msg, key));

	if (!p || !p[0] || strlen(p) >= 4096 || strchr(p, '\n')) {
		e2b_unary_error(r, "invalid_argument", "a non-empty path is required");
		return NULL;
	}
	return e2b_path(p);
}

/* Takes ent and err (the error of a NULL ent): call with both already computed. */
static void e2b_reply_entry(struct api_req *r, json_t *ent, struct al_error *err)
{
	if (!ent) {
		e2b_unary_al_error(r, err);
		al_error_free(err);
		return;
	}
	e2b_unary_ok(r, json_pack("{s:o}", "entry", ent));
}

void e2b_fs_stat(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *path = NULL;
	struct al_error *err = NULL;
	json_t *have;

	if (!msg || !(path = e2b_msg_path(r, msg, "path")))
		return;
	have = e2b_stat(r, path, &err);
	e2b_reply_entry(r, have, err);
}

void e2b_fs_mkdir(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *path = NULL;
	struct al_error *err = NULL;
	json_t *have;

	if (!msg || !(path = e2b_msg_path(r, msg, "path")))
		return;
	have = e2b_stat(r, path, &err);
	al_error_free(err);
	err = NULL;
	if (have) {
		json_decref(have);
		return e2b_unary_error(r, "already_exists", "the path already exists");
	}
	if (dm_fs_mkdir(r->api->d, r->team, e2b_envd_sbx(r), path, true, &err) < 0)
		return e2b_reply_entry(r, NULL, err);
	have = e2b_stat(r, path, &err);
	e2b_reply_entry(r, have, err);
}

/* Lists dir into out, descending depth-1 more levels. */
static int e2b_list_into(struct api_req *r, const char *dir, unsigned depth, json_t *out,
			 struct al_error **err)
{
	_cleanup_json_ json_t *list = NULL;
	json_t *ent;
	size_t i;

	if (dm_fs_list(r->api->d, r->team, e2b_envd_sbx(r), dir, &list, err) < 0)
		return -EIO;
	json_array_foreach(list, i, ent)
	{
		json_t *e = e2b_entry(ent, dir);

		if (json_array_size(out) >= E2B_LIST_ENTRIES) {
			json_decref(e);
			return al_error_msg(err, E2BIG, "more than %d entries", E2B_LIST_ENTRIES);
		}
		json_array_append_new(out, e);
		if (depth > 1 &&
		    strcmp(json_string_value(json_object_get(ent, "type")), "dir") == 0 &&
		    e2b_list_into(r, json_string_value(json_object_get(e, "path")), depth - 1, out,
				  err) < 0)
			return -EIO;
	}
	return 0;
}

void e2b_fs_list(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *path = NULL;
	struct al_error *err = NULL;
	json_int_t depth;
	json_t *out;

	if (!msg || !(path = e2b_msg_path(r, msg, "path")))
		return;
	depth = json_integer_value(json_object_get(msg, "depth"));
	if (depth < 0 || depth > E2B_FS_MAX_DEPTH)
		return e2b_unary_error(r, "invalid_argument", "depth must be 0 to 16");
	out = json_array();
	if (e2b_list_into(r, path, depth ? (unsigned)depth : 1, out, &err) < 0) {
		json_decref(out);
		e2b_unary_al_error(r, err);
		al_error_free(err);
		return;
	}
	e2b_unary_ok(r, json_pack("{s:o}", "entries", out));
}

/* Runs a helper (mv, rm) as the caller's user; its stderr is the error's message. */
static int e2b_fs_helper(struct api_req *r, const char *const *argv, size_t n,
			 struct al_error **err)
{
	_cleanup_free_ char *out = NULL, *errout = NULL;
	bool root = false;
	int status = 0;

	if (e2b_user(r, NULL, &root) < 0)
		return api_bad(err, "unknown user");
	if (e2b_run_wait(r, e2b_envd_sbx(r), root, argv, n, &status, &out, &errout, err) < 0)
		return -EIO;
	if (status != 0)
		return al_error_msg(err, strstr(errout, "ermission denied") ? EACCES : EIO,
				    "%s: %s", argv[0], errout[0] ? errout : "failed");
	return 0;
}

void e2b_fs_move(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *src = NULL, *dst = NULL;
	struct al_error *err = NULL;
	json_t *have;

	if (!msg || !(src = e2b_msg_path(r, msg, "source")) ||
	    !(dst = e2b_msg_path(r, msg, "destination")))
		return;
	have = e2b_stat(r, src, &err);
	if (!have)
		return e2b_reply_entry(r, NULL, err);
	json_decref(have);
	const char *argv[] = {"mv", "-f", "-T", "--", src, dst};

	if (e2b_fs_helper(r, argv, 6, &err) < 0)
		return e2b_reply_entry(r, NULL, err);
	have = e2b_stat(r, dst, &err);
	e2b_reply_entry(r, have, err);
}

void e2b_fs_remove(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *path = NULL;
	struct al_error *err = NULL;
	json_t *have;

	if (!msg || !(path = e2b_msg_path(r, msg, "path")))
		return;
	have = e2b_stat(r, path, &err);
	if (!have)
		return e2b_reply_entry(r, NULL, err);
	json_decref(have);
	const char *argv[] = {"rm", "-rf", "--", path};

	if (e2b_fs_helper(r, argv, 4, &err) < 0)
		return e2b_reply_entry(r, NULL, err);
	e2b_unary_ok(r, json_object());
}
