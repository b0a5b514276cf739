/* SPDX-License-Identifier: MIT */
/*
 * The Vercel API's drives (docs/snapshots.md, "Drives"):
 *   GET    /v2/sandboxes/drives?namePrefix&limit&cursor      -> {drives, pagination}
 *   POST   /v2/sandboxes/drives/{dname} {projectId, region?, maxSizeBytes?} -> {drive}
 *   DELETE /v2/sandboxes/drives/{dname}                       -> {drive} (409 in use)
 * and a create's `mounts`: {"/path": {drive, mode: "read-write" | "snapshot"}}, mounted
 * once the sandbox runs ("snapshot": read-only).
 */
#include "api/vercel/routes_vercel.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define VC_DRIVE_LIST_MAX 1000

static json_t *vc_drive_of(json_t *v)
{
	json_t *o = json_pack(
	    "{s:s?,s:s?,s:s?,s:s,s:I,s:I,s:I}", "id", json_string_value(json_object_get(v, "id")),
	    "name", json_string_value(json_object_get(v, "name")), "projectId",
	    json_string_value(json_object_get(v, "project")), "region", VC_REGION, "maxSizeBytes",
	    json_integer_value(json_object_get(v, "max_size_bytes")), "createdAt",
	    json_integer_value(json_object_get(v, "created_at")), "updatedAt",
	    json_integer_value(json_object_get(v, "updated_at")));

	if (!o)
		al_oom();
	if (json_is_string(json_object_get(v, "sandbox_id"))) {
		json_object_set(o, "currentSessionId", json_object_get(v, "sandbox_id"));
		json_object_set(o, "currentSandboxName", json_object_get(v, "sandbox_id"));
	}
	return o;
}

void vc_drive_list(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *list = NULL;
	const char *prefix = api_query(r, "namePrefix"), *cursor = api_query(r, "cursor");
	uint64_t limit = VC_DRIVE_LIST_MAX;
	json_t *out = json_array(), *v, *next = json_null();
	bool started = !cursor;
	size_t i;

	if (api_query_u64(r, "limit", VC_DRIVE_LIST_MAX, &limit, &err) < 0 ||
	    dm_drive_list(r->api->d, r->team, &list, &err) < 0) {
		json_decref(out);
		return vc_reply_error(r, err);
	}
	json_array_foreach(list, i, v)
	{
		const char *name = json_string_value(json_object_get(v, "name"));

		if (!started) {
			started = strcmp(name, cursor) == 0;
			continue;
		}
		if (prefix && strncmp(name, prefix, strlen(prefix)) != 0)
			continue;
		if (json_array_size(out) == (limit ? limit : VC_DRIVE_LIST_MAX)) {
			json_decref(next);
			next = json_string(json_string_value(json_object_get(
			    json_array_get(out, json_array_size(out) - 1), "name")));
			break;
		}
		json_array_append_new(out, vc_drive_of(v));
	}
	api_reply_json(r, 200,
		       json_pack("{s:o,s:{s:I,s:o}}", "drives", out, "pagination", "count",
				 (json_int_t)json_array_size(out), "next", next));
}

void vc_drive_put(struct api_req *r)
{
	static const char *const fields[] = {"projectId", "region", "maxSizeBytes", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL, *view = NULL;
	const char *project = NULL;
	uint64_t max = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_string(body, "projectId", false, &project, &err) < 0 ||
	    api_json_u64(body, "maxSizeBytes", false, INT64_MAX, &max, &err) < 0 ||
	    dm_drive_get_or_create(r->api->d, r->team, api_param(r, "dname"), project, max, &view,
				   &err) < 0)
		return vc_reply_error(r, err);
	api_reply_json(r, 200, json_pack("{s:o}", "drive", vc_drive_of(view)));
}

void vc_drive_delete(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *view = NULL;

	if (dm_drive_delete(r->api->d, r->team, api_param(r, "dname"), &view, &err) < 0)
		return vc_reply_error(r, err);
	api_reply_json(r, 200, json_pack("{s:o}", "drive", vc_drive_of(view)));
}

int vc_mounts_check(json_t *mounts, struct al_error **err)
{
	const char *path, *mode;
	json_t *m;

	if (!mounts || json_is_null(mounts))
		return 0;
	if (!json_is_object(mounts))
		return api_bad(err, "field 'mounts' must be an object of mount paths");
	json_object_foreach(mounts, path, m)
	{
		const char *other;
		json_t *o;

		if (path[0] != '/')
			return api_bad(err, "mount path '%.200s' must be absolute", path);
		if (!json_is_object(m) || !json_is_string(json_object_get(m, "drive")))
			return api_bad(err, "mount '%.200s': {drive, mode} expected", path);
		mode = json_string_value(json_object_get(m, "mode"));
		if (mode && strcmp(mode, "read-write") != 0 && strcmp(mode, "snapshot") != 0 &&
		    strcmp(mode, "read-only") != 0)
			return api_bad(err, "mount '%.200s': mode is read-write or snapshot", path);
		json_object_foreach(mounts, other, o)
		{
			size_t n = strlen(other);

			if (other != path && strncmp(path, other, n) == 0 &&
			    (path[n] == '/' || path[n] == '\0'))
				return api_bad(err, "mount paths '%.200s' and '%.200s' overlap",
					       path, other);
		}
	}
	return 0;
}

int vc_mounts_apply(struct api_req *r, const char *id, json_t *mounts, struct al_error **err)
{
	const char *path;
	json_t *m;

	json_object_foreach(mounts, path, m)
	{
		const char *mode = json_string_value(json_object_get(m, "mode"));
		bool ro = mode && strcmp(mode, "read-write") != 0;

		if (dm_drive_attach(r->api->d, r->team, id,
				    json_string_value(json_object_get(m, "drive")), path, ro,
				    err) < 0)
			return -1;
	}
	return 0;
}
