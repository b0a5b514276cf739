/* SPDX-License-Identifier: MIT */
/*
 * The native API's snapshots and fork (docs/api.yaml, docs/snapshots.md):
 *   POST /v1/sandboxes/{id}/snapshot {expiration_ms?}   -> 201 {snapshot}
 *   POST /v1/sandboxes/{id}/fork     (a create's body)  -> 201 {sandbox}
 *   GET  /v1/snapshots[?sandbox=ID]                     -> {snapshots: [...]}, newest first
 *   GET / DELETE /v1/snapshots/{sid}                    -> {snapshot}
 * A create names a snapshot with "snapshot": ID (routes_native.c).
 */
#include "api/native/routes_native.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdint.h>

void api_snap_create(struct api_req *r)
{
	static const char *const fields[] = {"expiration_ms", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	json_t *view = NULL;
	uint64_t exp = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "expiration_ms", false, INT64_MAX / 2, &exp, &err) < 0 ||
	    dm_snapshot_create(r->api->d, r->team, api_param(r, "id"), exp, &view, &err) < 0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, 201, "snapshot", view);
}

void api_snap_list(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *list = NULL;

	if (dm_snapshot_list(r->api->d, r->team, api_query(r, "sandbox"), &list, &err) < 0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, 200, "snapshots", list);
}

void api_snap_get(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *view = NULL;

	if (dm_snapshot_get(r->api->d, r->team, api_param(r, "sid"), &view, &err) < 0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, 200, "snapshot", view);
}

void api_snap_delete(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *view = NULL;

	if (dm_snapshot_delete(r->api->d, r->team, api_param(r, "sid"), &view, &err) < 0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, 200, "snapshot", view);
}

void api_sbx_fork(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *id = NULL;
	uint16_t ports[DM_PORTS_MAX];
	struct dm_create c = {.ports = ports};
	char **env = NULL;
	int ret;

	if (api_body_object(r, &body, &err) < 0)
		return api_reply_error(r, err);
	ret = api_parse_create(body, &c, &env, &err);
	if (ret == 0 && json_object_get(body, "snapshot"))
		ret = api_bad(&err, "a fork copies its source: it takes no 'snapshot'");
	if (ret == 0)
		ret = dm_sandbox_fork(r->api->d, r->team, api_param(r, "id"), &c, &id, &err);
	api_strv_free(env, c.n_env);
	if (ret < 0)
		return api_reply_error(r, err);
	api_reply_sandbox(r, 201, id);
}
