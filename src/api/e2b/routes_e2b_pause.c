/* SPDX-License-Identifier: MIT */
/*
 * E2B's pause and resume on the daemon's snapshots (docs/e2b.md, "Pause and resume"):
 *   POST /sandboxes/{id}/pause {memory?}             -> 204 (409 when not running)
 *   POST /v2/sandboxes/{id}/connect, /sandboxes/{id}/connect of a paused sandbox, and
 *   POST /sandboxes/{id}/resume {timeout?, autoPause?} -> 201, a create's answer
 * A pause snapshots the sandbox's files and stops its daemon sandbox; the E2B sandbox,
 * its id, token and settings stay in the table, state paused. A resume makes a new daemon
 * sandbox of the snapshot's files (the create's template, envVars and network) and maps
 * the E2B id onto it (e2b_sbx.dm_id), with a fresh deadline; the snapshot is then deleted.
 * Files only: processes, kernels and memory are not kept.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <string.h>
#include <time.h>

bool e2b_snap_internal(struct e2b *e, const char *snap)
{
	for (size_t i = 0; snap && i < e->n; i++)
		if (e->v[i]->pause_snap && strcmp(e->v[i]->pause_snap, snap) == 0)
			return true;
	return false;
}

/* Moves the team's sandbox id from state `from` to `to`; false if it is not in `from`. */
static bool e2b_move(struct e2b *e, const char *team, const char *id, enum e2b_state from,
		     enum e2b_state to, char **dm)
{
	struct e2b_sbx *s;
	bool ok;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, team, id);
	ok = s && s->state == from;
	if (ok) {
		s->state = to;
		if (dm)
			*dm = xstrdup(e2b_dm(s));
	}
	pthread_mutex_unlock(&e->mu);
	return ok;
}

/* The running daemon sandbox dm's view and a snapshot of it, then it stopped. */
static int e2b_pause_dm(struct api_req *r, const char *dm, json_t **view, char **snap,
			struct al_error **err)
{
	_cleanup_json_ json_t *sv = NULL;
	const char *st;
	int ret;

	if ((ret = dm_sandbox_get(r->api->d, r->team, dm, view, err)) < 0)
		return ret;
	st = json_string_value(json_object_get(*view, "status"));
	if (!st || strcmp(st, "running") != 0)
		return al_error_msg(err, ESRCH, "sandbox is not running");
	if ((ret = dm_snapshot_create(r->api->d, r->team, dm, 0, &sv, err)) < 0)
		return ret;
	*snap = xstrdup(json_string_value(json_object_get(sv, "id")));
	if ((ret = dm_sandbox_stop(r->api->d, r->team, dm, err)) < 0) {
		dm_snapshot_delete(r->api->d, r->team, *snap, NULL, NULL); /* best effort */
		return ret;
	}
	return 0;
}

void e2b_pause(struct api_req *r)
{
	static const char *const fields[] = {"memory", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL, *view = NULL;
	_cleanup_free_ char *dm = NULL, *snap = NULL;
	const char *id = api_param(r, "id");
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0)
		return e2b_reply_err(r, err);
	if (json_is_true(json_object_get(body, "memory")))
		return e2b_reply_code(r, 400,
				      "memory: airlock keeps a paused sandbox's files, not its "
				      "memory (docs/e2b.md)");
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	pthread_mutex_unlock(&e->mu);
	if (!s)
		return e2b_reply_code(r, 404, "sandbox not found");
	if (!e2b_move(e, r->team, id, E2B_RUNNING, E2B_PAUSING, &dm))
		return e2b_reply_code(r, 409, "the sandbox is not running (paused already?)");
	if (e2b_pause_dm(r, dm, &view, &snap, &err) < 0) {
		e2b_move(e, r->team, id, E2B_PAUSING, E2B_RUNNING, NULL);
		return e2b_reply_err(r, err);
	}
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	if (s) {
		s->state = E2B_PAUSED;
		s->pause_snap = TAKE_PTR(snap);
		s->pause_view = TAKE_PTR(view);
		e2b_sbx_clear(s); /* its processes ended */
	}
	pthread_mutex_unlock(&e->mu);
	api_reply_raw(r, 204, "application/json", NULL, 0);
}

/* The create body a resume of s parses (e->mu held). */
static json_t *e2b_resume_body(const struct e2b_sbx *s, uint64_t timeout_s)
{
	json_t *b = json_pack("{s:s}", "templateID", s->template_id);

	if (!b)
		al_oom();
	if (s->env_vars)
		json_object_set(b, "envVars", s->env_vars);
	if (s->network)
		json_object_set(b, "network", s->network);
	if (s->internet >= 0)
		json_object_set_new(b, "allow_internet_access", json_boolean(s->internet));
	if (timeout_s)
		json_object_set_new(b, "timeout", json_integer((json_int_t)timeout_s));
	return b;
}

/* A new daemon sandbox of snap's files with s's settings (body): its id in *out. */
static int e2b_resume_dm(struct api_req *r, json_t *body, const char *snap, char **out,
			 struct al_error **err)
{
	struct e2b_sbx *tmp = xzalloc(sizeof(*tmp));
	struct dm_create c = {0};
	char **env = NULL;
	size_t n_env = 0;
	int ret;

	tmp->internet = -1;
	ret = e2b_create_parse(body, &c, &env, &n_env, tmp, err);
	if (ret == 0)
		ret = dm_sandbox_create_from(r->api->d, r->team, &c, snap, out, err);
	json_decref(c.network_policy);
	api_strv_free(env, n_env);
	e2b_sbx_free(tmp);
	return ret;
}

void e2b_resume(struct api_req *r, const char *id, uint64_t timeout_s)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *snap = NULL, *dm = NULL;
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	if (s && s->state == E2B_PAUSED) {
		s->state = E2B_RESUMING;
		snap = xstrdup(s->pause_snap);
		body = e2b_resume_body(s, timeout_s);
	}
	pthread_mutex_unlock(&e->mu);
	if (!snap)
		return e2b_reply_code(r, 409, "the sandbox is not paused");
	if (e2b_resume_dm(r, body, snap, &dm, &err) < 0) {
		e2b_move(e, r->team, id, E2B_RESUMING, E2B_PAUSED, NULL);
		return e2b_reply_err(r, err);
	}
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	if (s) { /* the E2B id now leads to the new daemon sandbox */
		free(s->dm_id);
		s->dm_id = TAKE_PTR(dm);
		s->state = E2B_RUNNING;
		s->started_ms = (int64_t)time(NULL) * 1000;
		free(s->pause_snap);
		s->pause_snap = NULL;
		json_decref(s->pause_view);
		s->pause_view = NULL;
		api_reply_json(r, 201, e2b_created(r->api, s));
	} else {
		e2b_reply_code(r, 404, "sandbox not found");
	}
	pthread_mutex_unlock(&e->mu);
	dm_snapshot_delete(r->api->d, r->team, snap, NULL, NULL);
}

/* The legacy resume: {timeout?, autoPause?}; a running sandbox is 409, as on E2B. */
void e2b_resume_route(struct api_req *r)
{
	static const char *const fields[] = {"timeout", "autoPause", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *id = api_param(r, "id");
	struct e2b *e = r->api->e2b;
	uint64_t t = 0;
	bool known;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "timeout", false, E2B_MAX_TIMEOUT_S, &t, &err) < 0)
		return e2b_reply_err(r, err);
	if (json_is_true(json_object_get(body, "autoPause")))
		return e2b_reply_code(r, 400,
				      "autoPause: pausing on timeout is not supported by airlock");
	pthread_mutex_lock(&e->mu);
	known = e2b_find(e, r->team, id) != NULL;
	pthread_mutex_unlock(&e->mu);
	if (!known)
		return e2b_reply_code(r, 404, "sandbox not found");
	e2b_resume(r, id, t);
}
