/* SPDX-License-Identifier: MIT */
/*
 * The E2B control plane (docs/e2b.md): create, connect, get, list, kill, timeout,
 * network, metrics; fork and snapshots (routes_e2b_snap.c); pause and resume
 * (routes_e2b_pause.c).
 * Authenticated with X-API-KEY, an airlock token (the tokens file and teams of the other front
 * ends). Errors are {code, message} with code the HTTP status, as the SDK reads them.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define E2B_LIST_MAX 100

/* --- the table ------------------------------------------------------------------------ */

struct e2b_sbx *e2b_find(struct e2b *e, const char *team, const char *id)
{
	for (size_t i = 0; i < e->n; i++)
		if ((strcmp(e->v[i]->id, id) == 0 ||
		     (e->v[i]->dm_id && strcmp(e->v[i]->dm_id, id) == 0)) &&
		    (!team || strcmp(e->v[i]->team, team) == 0))
			return e->v[i];
	return NULL;
}

void e2b_sbx_clear(struct e2b_sbx *s)
{
	for (size_t i = 0; i < s->n_procs; i++) {
		free(s->procs[i].cmd_id);
		free(s->procs[i].tag);
		free(s->procs[i].pty_file);
		json_decref(s->procs[i].config);
	}
	free(s->procs);
	s->procs = NULL;
	s->n_procs = 0;
	for (size_t i = 0; i < s->n_ctxs; i++)
		e2b_ctx_clear(&s->ctxs[i]);
	free(s->ctxs);
	s->ctxs = NULL;
	s->n_ctxs = 0;
}

void e2b_sbx_free(struct e2b_sbx *s)
{
	e2b_sbx_clear(s);
	free(s->dm_id);
	free(s->pause_snap);
	json_decref(s->pause_view);
	json_decref(s->env_vars);
	json_decref(s->metadata);
	json_decref(s->network);
	free(s->id);
	free(s->team);
	free(s->template_id);
	explicit_bzero(s->token, sizeof(s->token));
	free(s);
}

static void e2b_forget(struct e2b *e, const char *id)
{
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->n; i++) {
		if (strcmp(e->v[i]->id, id) == 0) {
			e2b_sbx_free(e->v[i]);
			e->v[i] = e->v[--e->n];
			break;
		}
	}
	pthread_mutex_unlock(&e->mu);
}

/* e->mu held: entries of sandboxes that ended without a kill through this API (their
 * timeout, another front end's stop) are dropped, so the table holds live (or paused)
 * ones only. */
static void e2b_prune(struct e2b *e, struct daemon *d)
{
	for (size_t i = 0; i < e->n;) {
		json_t *view = NULL;
		const char *st = NULL;

		if (e->v[i]->state != E2B_RUNNING) {
			i++;
			continue;
		}
		if (dm_sandbox_get(d, e->v[i]->team, e2b_dm(e->v[i]), &view, NULL) == 0)
			st = json_string_value(json_object_get(view, "status"));
		if (st && (strcmp(st, "running") == 0 || strcmp(st, "stopping") == 0)) {
			json_decref(view);
			i++;
			continue;
		}
		json_decref(view);
		e2b_sbx_free(e->v[i]);
		e->v[i] = e->v[--e->n];
	}
}

void e2b_add(struct e2b *e, struct daemon *d, struct e2b_sbx *s)
{
	e2b_prune(e, d);
	e->v = xrealloc(e->v, (e->n + 1) * sizeof(*e->v));
	e->v[e->n++] = s;
}

char *e2b_dm_id(struct api_req *r, const char *id)
{
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	char *dm = NULL;
	bool paused;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	paused = s && s->state != E2B_RUNNING;
	if (!paused)
		dm = xstrdup(s ? e2b_dm(s) : id);
	pthread_mutex_unlock(&e->mu);
	if (paused)
		e2b_reply_code(r, 409, "the sandbox is paused: a connect resumes it");
	return dm;
}

struct e2b *e2b_open(const char *domain)
{
	struct e2b *e = xzalloc(sizeof(*e));

	pthread_mutex_init(&e->mu, NULL);
	e->domain = domain && domain[0] ? xstrdup(domain) : NULL;
	return e;
}

void e2b_close(struct e2b *e)
{
	if (!e)
		return;
	e2b_watchers_close(e);
	for (size_t i = 0; i < e->n; i++)
		e2b_sbx_free(e->v[i]);
	free(e->v);
	free(e->domain);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

/* --- errors and views ----------------------------------------------------------------- */

void e2b_reply_code(struct api_req *r, unsigned status, const char *msg)
{
	api_reply_json(r, status, json_pack("{s:i,s:s}", "code", (int)status, "message", msg));
}

void e2b_reply_err(struct api_req *r, const struct al_error *err)
{
	const char *name;
	unsigned status = api_status_of_errno(err ? err->code : EIO, &name);

	if (err && err->code == ESRCH)
		status = 404; /* an ended sandbox is gone, for E2B */
	e2b_reply_code(r, status, err && err->msg ? err->msg : "internal error");
	if (status == 429) /* the SDK retries a 429 only when it says when */
		MHD_add_response_header(r->resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

static char *e2b_time(int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return xasprintf("%s.%03dZ", buf, (int)(ms % 1000));
}

static json_int_t e2b_int(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? (json_int_t)json_number_value(v) : 0;
}

/* ListedSandbox / SandboxDetail from the daemon's view and our entry (e->mu held). */
static json_t *e2b_view(struct api *a, json_t *view, const struct e2b_sbx *s, bool detail)
{
	json_t *res = json_object_get(view, "resources");
	double vcpus = json_number_value(json_object_get(res, "vcpus"));
	json_int_t mem = e2b_int(res, "memory_bytes"), disk = e2b_int(res, "disk_bytes");
	_cleanup_free_ char *start = e2b_time(s->started_ms);
	_cleanup_free_ char *end = e2b_time(e2b_int(view, "expires_at"));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	json_t *o;

	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:O,s:s,s:s,s:[]}", "templateID",
		      s->template_id, "sandboxID", s->id, "clientID", "airlock", "startedAt", start,
		      "endAt", end, "cpuCount",
		      (json_int_t)(vcpus > 0 ? vcpus + 0.999 : (ncpu > 0 ? ncpu : 1)), "memoryMB",
		      (mem > 0 ? mem : (json_int_t)1 << 30) >> 20, "diskSizeMB",
		      (disk > 0 ? disk : (json_int_t)1 << 30) >> 20, "metadata", s->metadata,
		      "state", s->state == E2B_RUNNING ? "running" : "paused", "envdVersion",
		      E2B_ENVD_VERSION, "volumeMounts");
	if (!o)
		al_oom();
	if (a->e2b->domain)
		json_object_set_new(o, "domain", json_string(a->e2b->domain));
	if (detail) {
		if (s->network)
			json_object_set(o, "network", s->network);
		if (s->internet >= 0)
			json_object_set_new(o, "allowInternetAccess", json_boolean(s->internet));
	}
	return o;
}

json_t *e2b_created(struct api *a, const struct e2b_sbx *s)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "sandboxID", s->id, "templateID",
			      s->template_id, "clientID", "airlock", "envdVersion",
			      E2B_ENVD_VERSION, "envdAccessToken", s->token, "trafficAccessToken",
			      e2b_traffic_private(s) ? json_string(s->token) : json_null());

	if (!o)
		al_oom();
	json_object_set_new(o, "domain",
			    a->e2b->domain ? json_string(a->e2b->domain) : json_null());
	return o;
}

/* --- create --------------------------------------------------------------------------- */

/* The template: "base" and "code-interpreter-v1" (and none) are the host runtime; a
 * snapshot's id (createSnapshot's) is that snapshot's files; any other name is an image under the
 * daemon's --images (the daemon refuses an unknown one). */
static int e2b_template(json_t *body, struct dm_create *c, const char **name, struct al_error **err)
{
	*name = "base";
	if (api_json_string(body, "templateID", false, name, err) < 0)
		return -EINVAL;
	if (!(*name)[0] || strchr(*name, '/') || strcmp(*name, "..") == 0 ||
	    strcmp(*name, ".") == 0)
		return api_bad(err, "templateID '%.100s' is not a template name", *name);
	if (strcmp(*name, "base") == 0 || strcmp(*name, "code-interpreter-v1") == 0 ||
	    e2b_is_snapshot(*name))
		return 0; /* a snapshot's id: dm_sandbox_create_from (e2b_create) */
	return JAIL_SPEC_SET(c->spec.image, *name, "templateID", err);
}

/* Options of E2B's we do not serve: a clear 400 rather than a silent difference. */
static int e2b_refuse_unserved(json_t *body, struct al_error **err)
{
	json_t *v;

	if (json_is_true(json_object_get(body, "autoPause")))
		return api_bad(err, "autoPause: pausing on timeout is not supported by airlock");
	if (json_is_object(json_object_get(body, "autoResume")) &&
	    json_is_true(json_object_get(json_object_get(body, "autoResume"), "enabled")))
		return api_bad(err, "autoResume: resuming on traffic is not supported by airlock");
	v = json_object_get(body, "mcp");
	if (v && !json_is_null(v))
		return api_bad(err, "mcp: the MCP gateway is not supported by airlock");
	v = json_object_get(body, "volumeMounts");
	if (v && json_array_size(v) > 0)
		return api_bad(err, "volumeMounts: volumes are not supported by airlock");
	v = json_object_get(body, "iam");
	if (v && !json_is_null(v))
		return api_bad(err, "iam: workload tokens are not supported by airlock");
	return 0;
}

static int e2b_metadata(json_t *body, json_t **out, struct al_error **err)
{
	json_t *m = json_object_get(body, "metadata"), *v;
	const char *k;

	if (!m || json_is_null(m)) {
		*out = json_object();
		return 0;
	}
	if (!json_is_object(m) || json_object_size(m) > 64)
		return api_bad(err, "metadata must be an object of at most 64 strings");
	json_object_foreach(m, k, v)
	{
		if (!json_is_string(v) || strlen(k) > 256 || json_string_length(v) > 4096)
			return api_bad(err,
				       "metadata.%.64s must be a string (keys <= 256 bytes, "
				       "values <= 4096)",
				       k);
	}
	*out = json_deep_copy(m);
	return 0;
}

void e2b_token(char out[E2B_TOKEN_HEX + 1])
{
	unsigned char raw[E2B_TOKEN_HEX / 2];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		abort(); /* the kernel's generator does not fail for 32 bytes */
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	explicit_bzero(raw, sizeof(raw));
}

int e2b_create_parse(json_t *body, struct dm_create *c, char ***env, size_t *n_env,
		     struct e2b_sbx *s, struct al_error **err)
{
	uint64_t timeout_s = E2B_DEFAULT_TIMEOUT_S;
	const char *tmpl;
	bool internet = true;

	if (e2b_refuse_unserved(body, err) < 0 || e2b_template(body, c, &tmpl, err) < 0 ||
	    api_json_u64(body, "timeout", false, E2B_MAX_TIMEOUT_S, &timeout_s, err) < 0 ||
	    api_json_env(body, "envVars", env, n_env, err) < 0 ||
	    e2b_metadata(body, &s->metadata, err) < 0)
		return -EINVAL;
	if (json_is_boolean(json_object_get(body, "allow_internet_access"))) {
		internet = json_is_true(json_object_get(body, "allow_internet_access"));
		s->internet = internet;
	}
	if (e2b_policy_of(json_object_get(body, "network"), internet, &c->network_policy, err) < 0)
		return -EINVAL;
	if (timeout_s == 0)
		return api_bad(err, "timeout must be > 0 seconds");
	c->timeout_ms = timeout_s * 1000;
	c->env = (const char *const *)*env;
	c->n_env = *n_env;
	s->template_id = xstrdup(tmpl);
	if (json_is_object(json_object_get(body, "envVars")))
		s->env_vars = json_incref(json_object_get(body, "envVars"));
	s->network = json_incref(json_object_get(body, "network"));
	if (s->network && json_is_null(s->network)) {
		json_decref(s->network);
		s->network = NULL;
	}
	return 0;
}

static void e2b_create(struct api_req *r)
{
	_cleanup_json_ json_t *body = NULL;
	struct e2b *e = r->api->e2b;
	struct dm_create c = {0};
	struct e2b_sbx *s = xzalloc(sizeof(*s));
	char **env = NULL, *id = NULL;
	size_t n_env = 0;
	struct al_error *err = NULL;

	s->internet = -1;
	s->next_pid = 1000;
	if (api_body_object(r, &body, &err) < 0 ||
	    e2b_create_parse(body, &c, &env, &n_env, s, &err) < 0 ||
	    (e2b_is_snapshot(s->template_id)
		 ? dm_sandbox_create_from(r->api->d, r->team, &c, s->template_id, &id, &err)
		 : dm_sandbox_create(r->api->d, r->team, &c, &id, &err)) < 0) {
		e2b_reply_err(r, err);
		e2b_sbx_free(s);
		goto out;
	}
	s->id = id;
	s->team = xstrdup(r->team);
	s->started_ms = (int64_t)time(NULL) * 1000;
	e2b_token(s->token);
	pthread_mutex_lock(&e->mu);
	e2b_add(e, r->api->d, s);
	api_reply_json(r, 201, e2b_created(r->api, s));
	pthread_mutex_unlock(&e->mu);
out:
	json_decref(c.network_policy);
	api_strv_free(env, n_env);
	al_error_free(err);
}

/* --- one sandbox ---------------------------------------------------------------------- */

/* The daemon's view of a running sandbox of the caller's team that this front end made,
 * or an answer (404 when it is not, or no longer, running). */
static json_t *e2b_running(struct api_req *r, const char *id)
{
	struct al_error *err = NULL;
	json_t *view = NULL;
	const char *st;

	if (dm_sandbox_get(r->api->d, r->team, id, &view, &err) < 0) {
		e2b_reply_err(r, err);
		al_error_free(err);
		return NULL;
	}
	st = json_string_value(json_object_get(view, "status"));
	if (!st || strcmp(st, "running") != 0) {
		json_decref(view);
		e2b_reply_code(r, 404, "sandbox is not running");
		return NULL;
	}
	return view;
}

static void e2b_get(struct api_req *r)
{
	const char *id = api_param(r, "id");
	_cleanup_json_ json_t *view = NULL;
	_cleanup_free_ char *dm = NULL;
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	if (s && s->state != E2B_RUNNING && s->pause_view) /* paused: its last view */
		api_reply_json(r, 200, e2b_view(r->api, s->pause_view, s, true));
	else if (s && s->state != E2B_RUNNING)
		e2b_reply_code(r, 409, "the sandbox is being paused");
	else
		dm = xstrdup(s ? e2b_dm(s) : id);
	pthread_mutex_unlock(&e->mu);
	if (!dm || !(view = e2b_running(r, dm)))
		return;
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	if (s)
		api_reply_json(r, 200, e2b_view(r->api, view, s, true));
	else
		e2b_reply_code(r, 404, "sandbox was not made through the E2B API");
	pthread_mutex_unlock(&e->mu);
}

/* Kill: a running sandbox is stopped, a paused one's snapshot deleted. */
static void e2b_kill(struct api_req *r)
{
	const char *id = api_param(r, "id");
	_cleanup_free_ char *dm = NULL, *snap = NULL;
	struct e2b *e = r->api->e2b;
	struct al_error *err = NULL;
	struct e2b_sbx *s;
	bool busy = false;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	if (s && s->state == E2B_PAUSED)
		snap = xstrdup(s->pause_snap);
	else if (s && s->state != E2B_RUNNING)
		busy = true;
	else if (s)
		dm = xstrdup(e2b_dm(s));
	pthread_mutex_unlock(&e->mu);
	if (busy)
		return e2b_reply_code(r, 409, "the sandbox is being paused or resumed");
	if (!dm && !snap) /* killed already, or never made through this API */
		return e2b_reply_code(r, 404, "sandbox not found");
	if (snap) {
		dm_snapshot_delete(r->api->d, r->team, snap, NULL, NULL);
		e2b_forget(e, id);
		return api_reply_raw(r, 204, "application/json", NULL, 0);
	}
	if (dm_sandbox_stop(r->api->d, r->team, dm, &err) < 0) {
		if (err->code == ESRCH) /* already ended: gone, for E2B (kill answers false) */
			e2b_forget(r->api->e2b, id);
		e2b_reply_err(r, err);
		al_error_free(err);
		return;
	}
	e2b_forget(r->api->e2b, id);
	api_reply_raw(r, 204, "application/json", NULL, 0);
}

/* Sets the sandbox to end timeout_s from now (E2B's setTimeout: it may shorten it). */
static int e2b_set_timeout(struct api_req *r, const char *id, uint64_t timeout_s,
			   struct al_error **err)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return dm_sandbox_set_deadline(
	    r->api->d, r->team, id,
	    (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + (int64_t)timeout_s * 1000, err);
}

static void e2b_timeout(struct api_req *r)
{
	static const char *const fields[] = {"timeout", NULL};
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *dm = NULL;
	struct al_error *err = NULL;
	uint64_t t = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "timeout", true, E2B_MAX_TIMEOUT_S, &t, &err) < 0) {
		e2b_reply_err(r, err);
		al_error_free(err);
		return;
	}
	if (!(dm = e2b_dm_id(r, api_param(r, "id"))))
		return;
	if (e2b_set_timeout(r, dm, t, &err) < 0) {
		e2b_reply_err(r, err);
		al_error_free(err);
		return;
	}
	api_reply_raw(r, 204, "application/json", NULL, 0);
}

/*
 * Connect: a running sandbox answers as a create does. Without a timeout its remaining
 * lifetime is kept (never reset to 300 s); with one, it ends timeout s from now unless it
 * was to live longer (connect only extends). A paused one is resumed (routes_e2b_pause.c).
 */
static void e2b_connect(struct api_req *r)
{
	static const char *const fields[] = {"timeout", "memory", NULL};
	const char *id = api_param(r, "id");
	_cleanup_json_ json_t *body = NULL, *view = NULL;
	_cleanup_free_ char *dm = NULL;
	struct e2b *e = r->api->e2b;
	struct al_error *err = NULL;
	struct e2b_sbx *s;
	bool paused;
	uint64_t t = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "timeout", false, E2B_MAX_TIMEOUT_S, &t, &err) < 0) {
		e2b_reply_err(r, err);
		al_error_free(err);
		return;
	}
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	paused = s && s->state == E2B_PAUSED;
	pthread_mutex_unlock(&e->mu);
	if (paused)
		return e2b_resume(r, id, t);
	if (!(dm = e2b_dm_id(r, id)) || !(view = e2b_running(r, dm)))
		return;
	if (t &&
	    e2b_int(view, "expires_at") < (json_int_t)time(NULL) * 1000 + (json_int_t)t * 1000 &&
	    e2b_set_timeout(r, dm, t, &err) < 0) {
		e2b_reply_err(r, err);
		al_error_free(err);
		return;
	}
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	if (s)
		api_reply_json(r, 200, e2b_created(r->api, s));
	else
		e2b_reply_code(r, 404, "sandbox was not made through the E2B API");
	pthread_mutex_unlock(&e->mu);
}

/* --- list ----------------------------------------------------------------------------- */

static char *e2b_pct_decode(const char *s, size_t n)
{
	char *out = xzalloc(n + 1), *w = out;

	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (s[i] == '%' && i + 2 < n + 0 && sscanf(s + i + 1, "%2x", &v) == 1) {
			*w++ = (char)v;
			i += 2;
		} else {
			*w++ = s[i] == '+' ? ' ' : s[i];
		}
	}
	return out;
}

/* metadata=k=v&k2=v2 (each pair percent-encoded): every pair must be in m. */
static bool e2b_meta_match(json_t *m, const char *q)
{
	while (q && *q) {
		size_t n = strcspn(q, "&"), k = strcspn(q, "=");

		if (k < n) {
			_cleanup_free_ char *key = e2b_pct_decode(q, k);
			_cleanup_free_ char *val = e2b_pct_decode(q + k + 1, n - k - 1);
			const char *have = json_string_value(json_object_get(m, key));

			if (!have || strcmp(have, val) != 0)
				return false;
		}
		q += n + (q[n] == '&');
	}
	return true;
}

static bool e2b_list_match(struct api_req *r, const struct e2b_sbx *s)
{
	const char *meta = api_query(r, "metadata"), *tmpl = api_query(r, "template");

	return e2b_meta_match(s->metadata, meta) && (!tmpl || strcmp(tmpl, s->template_id) == 0);
}

/* The running (and paused) sandboxes of the team this front end made that match the
 * query's filters; state: running, paused or both (comma-separated). */
static json_t *e2b_list_all(struct api_req *r, json_t *views)
{
	const char *state = api_query(r, "state");
	bool running = !state || strstr(state, "running"),
	     paused = !state || strstr(state, "paused");
	struct e2b *e = r->api->e2b;
	json_t *out = json_array(), *v;
	size_t i;

	pthread_mutex_lock(&e->mu);
	json_array_foreach(views, i, v)
	{
		const char *id = json_string_value(json_object_get(v, "id"));
		const char *st = json_string_value(json_object_get(v, "status"));
		struct e2b_sbx *s = id ? e2b_find(e, r->team, id) : NULL;

		if (!running || !s || s->state != E2B_RUNNING || strcmp(e2b_dm(s), id) != 0 ||
		    !st || strcmp(st, "running") != 0 || !e2b_list_match(r, s))
			continue;
		json_array_append_new(out, e2b_view(r->api, v, s, false));
	}
	for (i = 0; paused && i < e->n; i++) {
		struct e2b_sbx *s = e->v[i];

		if (strcmp(s->team, r->team) == 0 && s->state != E2B_RUNNING && s->pause_view &&
		    e2b_list_match(r, s))
			json_array_append_new(out, e2b_view(r->api, s->pause_view, s, false));
	}
	pthread_mutex_unlock(&e->mu);
	return out;
}

static void e2b_list(struct api_req *r)
{
	_cleanup_json_ json_t *views = NULL, *all = NULL;
	struct al_error *err = NULL;
	uint64_t limit = E2B_LIST_MAX, from = 0;
	json_t *page;

	if (api_query_u64(r, "limit", E2B_LIST_MAX, &limit, &err) < 0 ||
	    api_query_u64(r, "nextToken", UINT32_MAX, &from, &err) < 0 ||
	    dm_sandbox_list(r->api->d, r->team, &views, &err) < 0) {
		e2b_reply_err(r, err);
		al_error_free(err);
		return;
	}
	if (limit == 0)
		limit = E2B_LIST_MAX;
	all = e2b_list_all(r, views);
	page = json_array();
	for (size_t i = from; i < json_array_size(all) && i < from + limit; i++)
		json_array_append(page, json_array_get(all, i));
	api_reply_json(r, 200, page);
	if (from + limit < json_array_size(all)) {
		char next[24];

		snprintf(next, sizeof(next), "%llu", (unsigned long long)(from + limit));
		MHD_add_response_header(r->resp, "X-Next-Token", next);
	}
}

#define SBX "/sandboxes/{id}"
const struct api_route api_e2b_routes[] = {
    {"POST", "/v2/sandboxes", e2b_create, 0},
    {"POST", "/sandboxes", e2b_create, 0},
    {"GET", "/v2/sandboxes", e2b_list, 0},
    {"GET", "/sandboxes", e2b_list, 0},
    {"GET", SBX, e2b_get, 0},
    {"DELETE", SBX, e2b_kill, 0},
    {"POST", SBX "/timeout", e2b_timeout, 0},
    {"POST", "/v2" SBX "/connect", e2b_connect, 0},
    {"POST", SBX "/connect", e2b_connect, 0},
    {"PUT", SBX "/network", e2b_network, 0},
    {"GET", SBX "/metrics", e2b_metrics, 0},
    {"POST", SBX "/pause", e2b_pause, 0},
    {"POST", SBX "/resume", e2b_resume_route, 0},
    {"POST", SBX "/fork", e2b_fork, 0},
    {"POST", SBX "/snapshots", e2b_snap_create, 0},
    {"GET", "/snapshots", e2b_snap_list, 0},
    {"DELETE", "/templates/{id}", e2b_snap_delete, 0},
};
const size_t api_e2b_routes_n = sizeof(api_e2b_routes) / sizeof(api_e2b_routes[0]);
