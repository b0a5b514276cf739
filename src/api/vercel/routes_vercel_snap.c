/* SPDX-License-Identifier: MIT */
/*
 * The Vercel API's snapshots and fork (docs/snapshots.md):
 *   POST   /v2/sandboxes/sessions/{id}/snapshot {expiration?}  -> {snapshot, session}
 *   GET    /v2/sandboxes/snapshots?name&limit&cursor&sortOrder  -> {snapshots, pagination}
 *   GET    /v2/sandboxes/snapshots/tree?snapshotId&limit&sortOrder
 *          -> {snapshots: [{snapshot, siblings, count}], anchor, pagination}
 *   GET / DELETE /v2/sandboxes/snapshots/{sid}                -> {snapshot}
 *   POST   /v2/sandboxes/{name}/fork (a create's body)         -> {sandbox, session, routes}
 * Unlike Vercel's, a snapshot leaves its sandbox running (frozen for the capture only),
 * and a fork copies the source's files as they are now, not as of its last snapshot.
 */
#include "api/vercel/routes_vercel.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define VC_SNAP_LIST_MAX 1000

static json_int_t int_of(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* The daemon's snapshot view -> Vercel's Snapshot (a new reference). */
json_t *vc_snap_of(json_t *v)
{
	json_t *o = json_pack("{s:s?,s:s?,s:s,s:[s],s:s?,s:I,s:I,s:I,s:s}", "id",
			      json_string_value(json_object_get(v, "id")), "sourceSessionId",
			      json_string_value(json_object_get(v, "sandbox_id")), "region",
			      VC_REGION, "regions", VC_REGION, "status",
			      json_string_value(json_object_get(v, "status")), "sizeBytes",
			      int_of(v, "size_bytes"), "createdAt", int_of(v, "created_at"),
			      "updatedAt", int_of(v, "created_at"), "creationMethod", "manual");

	if (!o)
		al_oom();
	if (json_is_integer(json_object_get(v, "expires_at")))
		json_object_set_new(o, "expiresAt", json_integer(int_of(v, "expires_at")));
	if (json_is_string(json_object_get(v, "parent_id")))
		json_object_set(o, "parentId", json_object_get(v, "parent_id"));
	return o;
}

void vc_snap_create(struct api_req *r)
{
	static const char *const fields[] = {"expiration", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL, *view = NULL;
	const char *id = api_param(r, "id");
	uint64_t exp = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "expiration", false, INT64_MAX / 2, &exp, &err) < 0)
		return vc_reply_error(r, err);
	if (!json_object_get(body, "expiration")) /* the sandbox's snapshotExpiration */
		exp = vc_named_expiration(r, id);
	if (dm_snapshot_create(r->api->d, r->team, id, exp, &view, &err) < 0 ||
	    vc_named_snapshotted(r, id, json_string_value(json_object_get(view, "id")), &err) < 0)
		return vc_reply_error(r, err);
	/* The session stays running: its view is the truth, not "snapshotting"/"stopped". */
	vc_reply_view(r, id, false, true, false, json_pack("{s:o}", "snapshot", vc_snap_of(view)));
}

/* One page of views (newest first, or oldest with sortOrder=asc) after the cursor. */
static void vc_snap_page(struct api_req *r, json_t *list)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *cursor = api_query(r, "cursor"), *order = api_query(r, "sortOrder");
	bool asc = order && strcmp(order, "asc") == 0;
	uint64_t limit = VC_SNAP_LIST_MAX;
	size_t n = json_array_size(list), i, start = 0;
	json_t *out, *next = json_null();

	if (api_query_u64(r, "limit", VC_SNAP_LIST_MAX, &limit, &err) < 0)
		return vc_reply_error(r, err);
	if (limit == 0)
		limit = VC_SNAP_LIST_MAX;
#define AT(k) json_array_get(list, asc ? n - 1 - (k) : (k))
	for (i = 0; cursor && i < n; i++)
		if (strcmp(json_string_value(json_object_get(AT(i), "id")), cursor) == 0) {
			start = i + 1;
			break;
		}
	out = json_array();
	for (i = start; i < n && json_array_size(out) < limit; i++)
		json_array_append_new(out, vc_snap_of(AT(i)));
	if (i < n && json_array_size(out) > 0)
		next = json_string(json_string_value(json_object_get(AT(i - 1), "id")));
#undef AT
	api_reply_json(r, 200,
		       json_pack("{s:o,s:{s:I,s:o}}", "snapshots", out, "pagination", "count",
				 (json_int_t)json_array_size(out), "next", next));
}

void vc_snap_list(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *list = NULL;

	const char *name = api_query(r, "name");
	json_t *v, *mine;
	size_t i;

	/* name: a sandbox's, any of its sessions' (an unnamed sandbox's name is its id) */
	if (dm_snapshot_list(r->api->d, r->team, NULL, &list, &err) < 0)
		return vc_reply_error(r, err);
	mine = json_array();
	json_array_foreach(list, i, v)
	{
		const char *sbx = json_string_value(json_object_get(v, "sandbox_id"));

		if (!name || (sbx && vc_named_has_session(r, name, sbx)))
			json_array_append(mine, v);
	}
	vc_snap_page(r, mine);
	json_decref(mine);
}

static json_t *find_id(json_t *all, const char *id)
{
	size_t i;
	json_t *v;

	json_array_foreach(all, i, v) if (id && strcmp(json_string_value(json_object_get(v, "id")),
						       id) == 0) return v;
	return NULL;
}

/* {snapshot, siblings (the others with the same parent), count} */
static json_t *tree_node(json_t *all, json_t *v)
{
	const char *parent = json_string_value(json_object_get(v, "parent_id"));
	json_t *sib = json_array(), *w;
	char count[24];
	size_t i;

	json_array_foreach(all, i, w)
	{
		const char *p = json_string_value(json_object_get(w, "parent_id"));

		if (w != v && ((!p && !parent) || (p && parent && strcmp(p, parent) == 0)))
			json_array_append_new(sib, vc_snap_of(w));
	}
	snprintf(count, sizeof(count), "%zu", json_array_size(sib) + 1);
	return json_pack("{s:o,s:o,s:s}", "snapshot", vc_snap_of(v), "siblings", sib, "count",
			 count);
}

/* The next node from v: its parent (desc, ancestors) or its oldest child (asc). */
static json_t *tree_step(json_t *all, json_t *v, bool asc)
{
	const char *id = json_string_value(json_object_get(v, "id"));
	json_t *w, *best = NULL;
	size_t i;

	if (!asc)
		return find_id(all, json_string_value(json_object_get(v, "parent_id")));
	json_array_foreach(all, i, w)
	{
		const char *p = json_string_value(json_object_get(w, "parent_id"));

		if (p && strcmp(p, id) == 0)
			best = w; /* the list is newest first: the last match is the oldest */
	}
	return best;
}

void vc_snap_tree(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *all = NULL;
	const char *id = api_query(r, "snapshotId"), *order = api_query(r, "sortOrder");
	bool asc = order && strcmp(order, "asc") == 0;
	uint64_t limit = VC_SNAP_LIST_MAX;
	json_t *anchor, *v, *out, *next = json_null();

	if (!id)
		return vc_reply_error_code(r, 400, "bad_request", "query 'snapshotId' is required");
	if (api_query_u64(r, "limit", VC_SNAP_LIST_MAX, &limit, &err) < 0 ||
	    dm_snapshot_list(r->api->d, r->team, NULL, &all, &err) < 0)
		return vc_reply_error(r, err);
	if (!(anchor = find_id(all, id)))
		return vc_reply_error_code(r, 404, "not_found", "no such snapshot");
	out = json_array();
	for (v = tree_step(all, anchor, asc); v && json_array_size(out) < (limit ? limit : 1000);
	     v = tree_step(all, v, asc))
		json_array_append_new(out, tree_node(all, v));
	if (v && json_array_size(out) > 0)
		next = json_incref(json_object_get(
		    json_object_get(json_array_get(out, json_array_size(out) - 1), "snapshot"),
		    "id"));
	api_reply_json(r, 200,
		       json_pack("{s:o,s:o,s:{s:I,s:o}}", "snapshots", out, "anchor",
				 tree_node(all, anchor), "pagination", "count",
				 (json_int_t)json_array_size(out), "next", next));
}

void vc_snap_get(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *view = NULL;

	if (dm_snapshot_get(r->api->d, r->team, api_param(r, "sid"), &view, &err) < 0)
		return vc_reply_error(r, err);
	api_reply_json(r, 200, json_pack("{s:o}", "snapshot", vc_snap_of(view)));
}

void vc_snap_delete(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *view = NULL;

	if (dm_snapshot_delete(r->api->d, r->team, api_param(r, "sid"), &view, &err) < 0)
		return vc_reply_error(r, err);
	api_reply_json(r, 200, json_pack("{s:o}", "snapshot", vc_snap_of(view)));
}

void vc_fork(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL, *policy = NULL;
	_cleanup_free_ char *id = NULL;
	struct dm_create c = {0};
	uint16_t ports[DM_PORTS_MAX];
	char **env = NULL;
	bool named;
	int ret;

	if (api_body_object(r, &body, &err) < 0)
		return vc_reply_error(r, err);
	if (json_object_get(body, "source") || json_object_get(body, "runtime") ||
	    json_object_get(body, "mounts"))
		return vc_reply_error_code(r, 400, "bad_request",
					   "a fork takes no 'source', 'runtime' or 'mounts'");
	ret = vc_parse_create(body, &c, &env, &policy, ports, &err);
	if (ret == 0) /* a fork may be named, and persistent, as a create */
		ret = vc_named_reserve(r, body, &err);
	named = ret == 0 && json_is_string(json_object_get(body, "name"));
	if (ret == 0) {
		_cleanup_free_ char *from = vc_session_for(r, api_param(r, "name"), NULL);

		ret = dm_sandbox_fork(r->api->d, r->team, from, &c, &id, &err);
	}
	api_strv_free(env, c.n_env);
	if (ret == 0 && vc_named_bind(r, body, id, true, &err) < 0) {
		ret = -1;
		dm_sandbox_stop(r->api->d, r->team, id, NULL);
	}
	if (ret < 0 && named)
		vc_named_bind(r, body, NULL, false, NULL);
	if (ret < 0)
		return vc_reply_error(r, err);
	vc_reply_view(r, id, true, true, true, NULL);
}
