/* SPDX-License-Identifier: MIT */
/* The native API's files: write a tar[.gz], read one file, mkdir, list a directory. */
#include "api/native/routes_native.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "daemon/daemon.h"

#include <errno.h>

void api_fs_write(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *dir = NULL;

	if (api_query_path(r, "dir", ".", &dir, &err) < 0)
		return api_reply_error(r, err);
	if (r->body_len == 0)
		return api_reply_error_code(r, 400, "bad_request",
					    "the body must be a tar or tar.gz archive");
	if (dm_fs_write_tar(r->api->d, r->team, api_param(r, "id"), dir, r->body, r->body_len,
			    &err) < 0)
		return api_reply_error(r, err);
	api_reply_ok(r);
}

void api_fs_read(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *path = NULL;
	char *data = NULL;
	size_t len = 0;

	if (api_query_path(r, "path", NULL, &path, &err) < 0 ||
	    dm_fs_read(r->api->d, r->team, api_param(r, "id"), path, r->api->max_upload, &data,
		       &len, &err) < 0)
		return api_reply_error(r, err);
	api_reply_raw(r, 200, "application/octet-stream", data, len);
}

void api_fs_mkdir(struct api_req *r)
{
	static const char *const fields[] = {"path", "parents", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *path = NULL;
	bool parents = false;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_string(body, "path", true, &path, &err) < 0 ||
	    api_json_bool(body, "parents", &parents, &err) < 0 ||
	    dm_fs_mkdir(r->api->d, r->team, api_param(r, "id"), path, parents, &err) < 0)
		return api_reply_error(r, err);
	api_reply_ok(r);
}

void api_fs_list(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *path = NULL;
	json_t *list = NULL;

	if (api_query_path(r, "path", ".", &path, &err) < 0 ||
	    dm_fs_list(r->api->d, r->team, api_param(r, "id"), path, &list, &err) < 0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, 200, "entries", list);
}
