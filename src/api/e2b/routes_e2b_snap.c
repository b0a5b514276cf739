/* SPDX-License-Identifier: MIT */
/*
 * E2B's fork and snapshots on the daemon's (docs/e2b.md, docs/snapshots.md):
 *   POST   /sandboxes/{id}/fork {timeout?, count?}  -> [{sandbox}|{error}]
 *   POST   /sandboxes/{id}/snapshots {name?}        -> {snapshotID, names: []}
 *   GET    /snapshots?sandboxID&limit&nextToken     -> [{snapshotID, names: []}]
 *   DELETE /templates/{id} (a snapshot's id)        -> 204
 * A create with a snapshot's id as its templateID starts from its files (routes_e2b.c).
 * The snapshots of paused sandboxes (routes_e2b_pause.c) are theirs: neither listed nor
 * deleted here.
 * Files only: a fork or a sandbox made from a snapshot starts fresh processes.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define E2B_FORK_MAX 8
#define E2B_SNAP_LIST_MAX 100

/* A copy of the entry of the team's running sandbox id as a fork's, without its id and
 * token, and the daemon's id of it in *dm; NULL when this front end did not make it (or it
 * ended, or is paused: *paused). */
static struct e2b_sbx *e2b_fork_proto(struct e2b *e, const char *team, const char *id, char **dm,
				      bool *paused)
{
	struct e2b_sbx *src, *s = NULL;

	pthread_mutex_lock(&e->mu);
	src = e2b_find(e, team, id);
	*paused = src && src->state != E2B_RUNNING;
	if (src && !*paused) {
		*dm = xstrdup(e2b_dm(src));
		s = xzalloc(sizeof(*s));
		s->team = xstrdup(team);
		s->template_id = xstrdup(src->template_id);
		s->metadata = json_deep_copy(src->metadata);
		s->network = src->network ? json_deep_copy(src->network) : NULL;
		s->env_vars = src->env_vars ? json_deep_copy(src->env_vars) : NULL;
		s->internet = src->internet;
		s->next_pid = 1000;
	}
	pthread_mutex_unlock(&e->mu);
	return s;
}

/* One fork of src (proto's settings): {sandbox: the create's answer} or {error}. */
static json_t *e2b_fork_one(struct api_req *r, const char *src, const struct e2b_sbx *proto,
			    uint64_t timeout_s, int *status)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct e2b *e = r->api->e2b;
	struct dm_create c = {.timeout_ms = timeout_s * 1000};
	struct e2b_sbx *s;
	char *id = NULL;
	json_t *out;

	if (dm_sandbox_fork(r->api->d, r->team, src, &c, &id, &err) < 0) {
		const char *name;
		unsigned st = api_status_of_errno(err->code, &name);

		if (err->code == ESRCH)
			st = 404;
		*status = (int)st;
		return json_pack("{s:{s:i,s:s}}", "error", "code", (int)st, "message",
				 err->msg ? err->msg : "fork failed");
	}
	s = xzalloc(sizeof(*s));
	*s = *proto;
	s->id = id;
	s->team = xstrdup(proto->team);
	s->template_id = xstrdup(proto->template_id);
	s->metadata = json_deep_copy(proto->metadata);
	s->network = proto->network ? json_deep_copy(proto->network) : NULL;
	s->env_vars = proto->env_vars ? json_deep_copy(proto->env_vars) : NULL;
	s->started_ms = (int64_t)time(NULL) * 1000;
	e2b_token(s->token);
	pthread_mutex_lock(&e->mu);
	e2b_add(e, r->api->d, s);
	out = json_pack("{s:o}", "sandbox", e2b_created(r->api, s));
	pthread_mutex_unlock(&e->mu);
	*status = 201;
	return out;
}

/* Fork: count (default 1, at most E2B_FORK_MAX) new sandboxes with the source's current
 * files, each its own token and deadline (timeout, default 300 s); the source runs on. */
void e2b_fork(struct api_req *r)
{
	static const char *const fields[] = {"timeout", "count", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *id = api_param(r, "id");
	uint64_t timeout_s = E2B_DEFAULT_TIMEOUT_S, count = 1;
	_cleanup_free_ char *dm = NULL;
	struct e2b_sbx *proto;
	bool paused;
	json_t *out;
	int st = 201;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "timeout", false, E2B_MAX_TIMEOUT_S, &timeout_s, &err) < 0 ||
	    api_json_u64(body, "count", false, E2B_FORK_MAX, &count, &err) < 0)
		return e2b_reply_err(r, err);
	if (timeout_s == 0 || count == 0)
		return e2b_reply_code(r, 400, "timeout and count must be > 0");
	proto = e2b_fork_proto(r->api->e2b, r->team, id, &dm, &paused);
	if (paused)
		return e2b_reply_code(r, 409, "the sandbox is paused: a connect resumes it");
	if (!proto)
		return e2b_reply_code(r, 404, "sandbox not found");
	out = json_array();
	for (uint64_t i = 0; i < count; i++) {
		json_t *one = e2b_fork_one(r, dm, proto, timeout_s, &st);

		if (i == 0 && st != 201) { /* the source is gone, or no room: the call failed */
			json_t *e = json_object_get(one, "error");

			e2b_reply_code(r, (unsigned)st,
				       json_string_value(json_object_get(e, "message")));
			if (st == 429) /* as a create's: the SDK retries when told when */
				MHD_add_response_header(r->resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
			json_decref(one);
			json_decref(out);
			e2b_sbx_free(proto);
			return;
		}
		json_array_append_new(out, one);
	}
	e2b_sbx_free(proto);
	api_reply_json(r, 201, out);
}

/* createSnapshot: the daemon's snapshot of a running sandbox this front end made (it runs
 * on). A name is accepted and not kept: names is always []. */
void e2b_snap_create(struct api_req *r)
{
	static const char *const fields[] = {"name", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL, *view = NULL;
	const char *id = api_param(r, "id");
	_cleanup_free_ char *dm = NULL;
	struct e2b *e = r->api->e2b;
	bool known;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0)
		return e2b_reply_err(r, err);
	pthread_mutex_lock(&e->mu);
	known = e2b_find(e, r->team, id) != NULL;
	pthread_mutex_unlock(&e->mu);
	if (!known)
		return e2b_reply_code(r, 404, "sandbox not found");
	if (!(dm = e2b_dm_id(r, id)))
		return; /* paused */
	if (dm_snapshot_create(r->api->d, r->team, dm, 0, &view, &err) < 0)
		return e2b_reply_err(r, err);
	api_reply_json(r, 201,
		       json_pack("{s:O,s:[]}", "snapshotID", json_object_get(view, "id"), "names"));
}

/* e->mu held: is snapshot v listed for a sandboxID filter sbx (NULL: all)? A paused
 * sandbox's own is not the user's. */
static bool e2b_snap_listed(struct api_req *r, json_t *v, const char *sbx)
{
	const char *from = json_string_value(json_object_get(v, "sandbox_id"));
	struct e2b_sbx *s = sbx ? e2b_find(r->api->e2b, r->team, sbx) : NULL;

	if (e2b_snap_internal(r->api->e2b, json_string_value(json_object_get(v, "id"))))
		return false;
	return !sbx || (from && (strcmp(from, sbx) == 0 || (s && strcmp(from, e2b_dm(s)) == 0)));
}

/* listSnapshots: the team's snapshots (of sandboxID only, when given), newest first;
 * nextToken is the offset of the next page. */
void e2b_snap_list(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *all = NULL, *list = json_array();
	const char *sbx = api_query(r, "sandboxID");
	uint64_t limit = E2B_SNAP_LIST_MAX, from = 0;
	struct e2b *e = r->api->e2b;
	size_t n, i;
	json_t *page, *v;

	if (api_query_u64(r, "limit", E2B_SNAP_LIST_MAX, &limit, &err) < 0 ||
	    api_query_u64(r, "nextToken", UINT32_MAX, &from, &err) < 0 ||
	    dm_snapshot_list(r->api->d, r->team, NULL, &all, &err) < 0)
		return e2b_reply_err(r, err);
	pthread_mutex_lock(&e->mu);
	json_array_foreach(all, i, v)
	{
		if (e2b_snap_listed(r, v, sbx))
			json_array_append(list, v);
	}
	pthread_mutex_unlock(&e->mu);
	if (limit == 0)
		limit = E2B_SNAP_LIST_MAX;
	n = json_array_size(list);
	page = json_array();
	for (i = from; i < n && i < from + limit; i++)
		json_array_append_new(
		    page, json_pack("{s:O,s:[]}", "snapshotID",
				    json_object_get(json_array_get(list, i), "id"), "names"));
	api_reply_json(r, 200, page);
	if (i < n) {
		char next[24];

		snprintf(next, sizeof(next), "%zu", i);
		MHD_add_response_header(r->resp, "X-Next-Token", next);
	}
}

/* deleteSnapshot (DELETE /templates/{id}): a snapshot's id only; templates are not. */
void e2b_snap_delete(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *id = api_param(r, "id");
	struct e2b *e = r->api->e2b;
	bool internal;

	pthread_mutex_lock(&e->mu);
	internal = e2b_snap_internal(e, id);
	pthread_mutex_unlock(&e->mu);
	if (!e2b_is_snapshot(id) || internal)
		return e2b_reply_code(r, 404, "template not found (only snapshots are deleted)");
	if (dm_snapshot_delete(r->api->d, r->team, id, NULL, &err) < 0)
		return e2b_reply_err(r, err);
	api_reply_raw(r, 204, "application/json", NULL, 0);
}
