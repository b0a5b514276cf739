/* SPDX-License-Identifier: MIT */
/*
 * The Vercel-compatible API: the route table, errors, the Session / Sandbox /
 * Command views, and the sandbox and session routes. Commands are in
 * routes_vercel_cmd.c, files in routes_vercel_files.c, network policies in
 * routes_vercel_policy.c. tests/sdk/ pins the contract with the real SDK.
 *
 * Optional fields are left out, never null: only Command.exitCode and
 * pagination.next may be null. Query parameters the SDK adds to every request
 * (teamId, projectId, project) are ignored: the team comes from the token.
 */
#include "api/vercel/routes_vercel.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VC_DEFAULT_TIMEOUT_MS 300000 /* Vercel's default session lifetime: 5 min */
#define VC_MB_PER_VCPU 2048
#define VC_MAX_VCPUS 1024
#define VC_LIST_MAX 1000

/* --- errors ---------------------------------------------------------------- */

static unsigned vc_status_of_errno(int code, const char **name)
{
	switch (code) {
	case ESRCH:
		*name = "sandbox_stopped";
		return 410;
	case EACCES:
	case EPERM:
		*name = "forbidden";
		return 403;
	case ENOSPC:
	case EDQUOT:
		*name = "insufficient_storage";
		return 507;
	default:
		return api_status_of_errno(code, name);
	}
}

void vc_reply_error_code(struct api_req *r, unsigned status, const char *code, const char *msg)
{
	/* The SDK retries any 5xx, POSTs included: a POST must never get one. */
	if (status >= 500 && strcmp(r->method, "POST") == 0)
		status = 422;
	api_reply_error_code(r, status, code, msg);
}

void vc_reply_error(struct api_req *r, const struct al_error *err)
{
	const char *name;
	unsigned status = vc_status_of_errno(err ? err->code : EIO, &name);

	vc_reply_error_code(r, status, name, err && err->msg ? err->msg : "internal error");
}

/* --- views ----------------------------------------------------------------- */

char *vc_join(const char *base, const char *path)
{
	size_t n;

	if (path[0] == '/' || !base || !base[0])
		return xstrdup(path);
	while (path[0] == '.' && path[1] == '/') /* "./x" is x; "." is base itself */
		path += 2 + strspn(path + 2, "/");
	if (!path[0] || strcmp(path, ".") == 0)
		return xstrdup(base);
	n = strlen(base);
	return xasprintf("%s%s%s", base, n && base[n - 1] == '/' ? "" : "/", path);
}

static json_int_t vc_int(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? (json_int_t)json_number_value(v) : 0;
}

/* A CPU count: the configured limit, or the host's CPUs when there is none. */
static double vc_vcpus(json_t *res)
{
	double v = json_number_value(json_object_get(res, "vcpus"));
	long n;

	if (v > 0)
		return v;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (double)n : 1;
}

static json_int_t vc_memory_mb(json_t *res)
{
	json_int_t b = vc_int(res, "memory_bytes");

	return (b > 0 ? b : (json_int_t)1 << 30) >> 20;
}

static const char *vc_status(json_t *view)
{
	const char *s = json_string_value(json_object_get(view, "status"));
	static const char *const known[] = {"running", "stopping", "stopped", "failed"};

	for (size_t i = 0; s && i < ARRAY_SIZE(known); i++)
		if (strcmp(s, known[i]) == 0)
			return known[i];
	return "failed";
}

static json_t *vc_number(double v)
{
	return v == floor(v) ? json_integer((json_int_t)v) : json_real(v);
}

json_t *vc_session_of(json_t *view)
{
	json_t *res = json_object_get(view, "resources"), *o;
	json_int_t created = vc_int(view, "created_at"), stopped = vc_int(view, "stopped_at");
	const char *wd = json_string_value(json_object_get(view, "workdir"));

	o = json_pack("{s:s?,s:I,s:o,s:s,s:I,s:s,s:I,s:I,s:I,s:I,s:s}", "id",
		      json_string_value(json_object_get(view, "id")), "memory", vc_memory_mb(res),
		      "vcpus", vc_number(vc_vcpus(res)), "region", VC_REGION, "timeout",
		      vc_int(view, "timeout_ms"), "status", vc_status(view), "requestedAt", created,
		      "startedAt", created, "createdAt", created, "updatedAt",
		      stopped ? stopped : created, "cwd", wd ? wd : VC_WORKDIR);
	if (!o)
		al_oom();
	if (stopped) {
		json_object_set_new(o, "requestedStopAt", json_integer(stopped));
		json_object_set_new(o, "stoppedAt", json_integer(stopped));
		json_object_set_new(o, "duration", json_integer(stopped - created));
	}
	json_object_set_new(o, "networkPolicy",
			    vc_policy_out(json_object_get(view, "network_policy")));
	return o;
}

json_t *vc_sandbox_of(json_t *view)
{
	json_t *res = json_object_get(view, "resources"), *o;
	json_int_t created = vc_int(view, "created_at"), stopped = vc_int(view, "stopped_at");
	const char *id = json_string_value(json_object_get(view, "id"));
	const char *wd = json_string_value(json_object_get(view, "workdir"));
	const char *status = vc_status(view);

	o = json_pack("{s:s?,s:b,s:s,s:o,s:I,s:I,s:I,s:I,s:s?,s:s,s:I,s:s}", "name", id,
		      "persistent", 0, "region", VC_REGION, "vcpus", vc_number(vc_vcpus(res)),
		      "memory", vc_memory_mb(res), "timeout", vc_int(view, "timeout_ms"),
		      "createdAt", created, "updatedAt", stopped ? stopped : created,
		      "currentSessionId", id, "status", status, "statusUpdatedAt",
		      stopped ? stopped : created, "cwd", wd ? wd : VC_WORKDIR);
	if (!o)
		al_oom();
	if (strcmp(status, "running") == 0)
		json_object_set_new(o, "expiresAt", json_integer(vc_int(view, "expires_at")));
	else
		json_object_set_new(o, "totalDurationMs", json_integer(stopped - created));
	json_object_set_new(o, "networkPolicy",
			    vc_policy_out(json_object_get(view, "network_policy")));
	return o;
}

/* A numeric exit code for every way a command can end (CommandFinished needs one). */
static json_int_t vc_exit_code(json_t *view)
{
	const char *reason = json_string_value(json_object_get(view, "reason"));
	json_t *code = json_object_get(view, "exit_code"), *sig = json_object_get(view, "signal");

	if (reason && strcmp(reason, "timeout") == 0)
		return 124;
	if (reason && strcmp(reason, "oom") == 0)
		return 137;
	if (json_is_integer(code) && json_integer_value(code) >= 0)
		return json_integer_value(code);
	if (json_is_integer(sig) && json_integer_value(sig) > 0)
		return 128 + json_integer_value(sig);
	if (reason && strcmp(reason, "setup_failed") == 0)
		return 125;
	return 1;
}

json_t *vc_command_of(json_t *view)
{
	json_t *args = json_object_get(view, "args"), *o;
	json_int_t started = vc_int(view, "started_at");
	bool done = json_is_integer(json_object_get(view, "finished_at"));

	o = json_pack("{s:s?,s:s?,s:o,s:s?,s:s?,s:I}", "id",
		      json_string_value(json_object_get(view, "id")), "name",
		      json_string_value(json_object_get(view, "cmd")), "args",
		      json_is_array(args) ? json_incref(args) : json_array(), "cwd",
		      json_string_value(json_object_get(view, "cwd")), "sessionId",
		      json_string_value(json_object_get(view, "sandbox_id")), "startedAt", started);
	if (!o)
		al_oom();
	if (!json_object_get(o, "cwd"))
		json_object_set_new(o, "cwd", json_string(VC_WORKDIR));
	if (done) {
		json_object_set_new(o, "exitCode", json_integer(vc_exit_code(view)));
		json_object_set_new(o, "durationMs",
				    json_integer(vc_int(view, "finished_at") - started));
	} else {
		json_object_set_new(o, "exitCode", json_null());
	}
	return o;
}

char *vc_workdir(struct api_req *r, const char *id, struct al_error **err)
{
	json_t *view = NULL;
	char *wd;

	if (dm_sandbox_get(r->api->d, r->team, id, &view, err) < 0)
		return NULL;
	wd = xstrdup(json_string_value(json_object_get(view, "workdir")) ?: VC_WORKDIR);
	json_decref(view);
	return wd;
}

/* --- replies --------------------------------------------------------------- */

/* keys: "sandbox", "session", "routes" in any combination; extra is merged in (taken). */
void vc_reply_view(struct api_req *r, const char *id, bool sandbox, bool session, bool routes,
		   json_t *extra)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *view = NULL, *o;

	if (dm_sandbox_get(r->api->d, r->team, id, &view, &err) < 0) {
		json_decref(extra);
		return vc_reply_error(r, err);
	}
	o = extra ? extra : json_object();
	if (sandbox) {
		json_t *sb = vc_sandbox_of(view);

		vc_named_view(r, id, sb);
		json_object_set_new(o, "sandbox", sb);
	}
	if (session)
		json_object_set_new(o, "session", vc_session_of(view));
	if (routes) /* the declared ports' preview URLs (docs/ports.md) */
		json_object_set_new(o, "routes",
				    api_preview_routes(r, id, json_object_get(view, "ports")));
	json_decref(view);
	api_reply_json(r, 200, o);
}

/* --- create ---------------------------------------------------------------- */

/* Fields the SDK may send that have no meaning here and are accepted as they are. */
static bool vc_create_ignored(const char *key)
{
	static const char *const ignored[] = {
	    "projectId",	 "tags",      "region",
	    "failoverRegions",	 "networkId", "snapshotExpiration",
	    "keepLastSnapshots", NULL};

	if (strncmp(key, "__", 2) == 0)
		return true;
	for (size_t i = 0; ignored[i]; i++)
		if (strcmp(key, ignored[i]) == 0)
			return true;
	return false;
}

static int vc_parse_resources(json_t *body, struct dm_create *c, struct al_error **err)
{
	static const char *const fields[] = {"vcpus", "memory", NULL};
	json_t *res = json_object_get(body, "resources"), *v;
	uint64_t mb = 0;

	if (!res)
		return 0;
	if (api_json_fields(res, "resources", fields, err) < 0)
		return -EINVAL;
	v = json_object_get(res, "vcpus");
	if (v) {
		if (!json_is_number(v))
			return api_bad(err, "field 'resources.vcpus' must be a number");
		c->spec.vcpus = json_number_value(v);
		if (!isfinite(c->spec.vcpus) || c->spec.vcpus <= 0 || c->spec.vcpus > VC_MAX_VCPUS)
			return api_bad(err, "field 'resources.vcpus' must be > 0 and <= %d",
				       VC_MAX_VCPUS);
		c->spec.memory_bytes = (uint64_t)(c->spec.vcpus * VC_MB_PER_VCPU) << 20;
	}
	if (api_json_u64(res, "memory", false, 1u << 30, &mb, err) < 0)
		return -EINVAL;
	if (mb)
		c->spec.memory_bytes = mb << 20;
	return 0;
}

static int vc_check_unsupported(json_t *body, struct al_error **err)
{
	if (json_object_get(body, "image"))
		return api_bad(err, "'image' is not supported: sandboxes use the host runtime");
	if (vc_named_check(body, err) < 0)
		return -EINVAL;
	return vc_mounts_check(json_object_get(body, "mounts"), err);
}

const char *vc_source_snapshot(json_t *body)
{
	json_t *src = json_object_get(body, "source");
	const char *type = json_string_value(json_object_get(src, "type"));

	if (!json_is_object(src) || !type || strcmp(type, "snapshot") != 0)
		return NULL;
	return json_string_value(json_object_get(src, "snapshotId"));
}

/* "runtime" ("node22", "python3.13", ...): the image of that name under airlock serve
 * --images (docs/sources.md, "Runtimes"); absent: the host runtime. */
static int vc_runtime(json_t *body, struct dm_create *c, struct al_error **err)
{
	const char *rt = NULL;

	if (api_json_string(body, "runtime", false, &rt, err) < 0)
		return -EINVAL;
	if (!rt)
		return 0;
	if (!rt[0] || strlen(rt) > 64 || rt[0] == '.' ||
	    rt[strspn(rt, "abcdefghijklmnopqrstuvwxyz0123456789.-_")] != '\0')
		return api_bad(err,
			       "field 'runtime' must be a runtime name like node22 or python3.13");
	return JAIL_SPEC_SET(c->spec.image, rt, "field 'runtime'", err);
}

int vc_parse_create(json_t *body, struct dm_create *c, char ***env, json_t **policy,
		    uint16_t ports[DM_PORTS_MAX], struct al_error **err)
{
	static const char *const known[] = {"ports",	     "timeout", "resources", "source",
					    "runtime",	     "image",	"name",	     "persistent",
					    "networkPolicy", "env",	"mounts",    NULL};
	const char *key;
	json_t *v;

	json_object_foreach(body, key, v)
	{
		size_t i;

		for (i = 0; known[i] && strcmp(key, known[i]) != 0; i++)
			;
		if (!known[i] && !vc_create_ignored(key))
			return api_bad(err, "unknown field '%.64s' in the body", key);
	}
	c->timeout_ms = VC_DEFAULT_TIMEOUT_MS;
	snprintf(c->spec.workdir, sizeof(c->spec.workdir), "%s", VC_WORKDIR);
	if (vc_check_unsupported(body, err) < 0 ||
	    api_json_u64(body, "timeout", false, INT64_MAX, &c->timeout_ms, err) < 0 ||
	    vc_parse_resources(body, c, err) < 0 ||
	    api_json_env(body, "env", env, &c->n_env, err) < 0 ||
	    api_json_ports(body, "ports", ports, DM_PORTS_MAX, &c->n_ports, err) < 0)
		return -EINVAL;
	c->env = (const char *const *)*env;
	c->ports = ports;
	if (vc_runtime(body, c, err) < 0)
		return -EINVAL;
	if (c->timeout_ms == 0)
		return api_bad(err, "field 'timeout' must be > 0");
	v = json_object_get(body, "networkPolicy");
	if (v && !json_is_null(v)) {
		if (vc_policy_in(v, policy, err) < 0)
			return -EINVAL;
		c->network_policy = *policy;
	}
	return 0;
}

/* "source": {type: "tarball", url} or {type: "git", url, depth?, revision?}; absent: none. */
static int vc_source(json_t *body, struct dm_source *src, bool *has, struct al_error **err)
{
	static const char *const fields[] = {"type", "url", "depth", "revision", NULL};
	json_t *v = json_object_get(body, "source");
	uint64_t depth = 0;

	*has = v && !json_is_null(v) && !vc_source_snapshot(body);
	if (!*has) /* none, or a snapshot (the create restores it: dm_sandbox_create_from) */
		return 0;
	if (json_is_object(v) && json_is_string(json_object_get(v, "type")) &&
	    strcmp(json_string_value(json_object_get(v, "type")), "snapshot") == 0)
		return api_bad(err, "a snapshot source needs its snapshotId (a string)");
	if (!json_is_object(v) || api_json_fields(v, "source", fields, err) < 0 ||
	    api_json_string(v, "type", true, &src->type, err) < 0 ||
	    api_json_string(v, "url", true, &src->url, err) < 0 ||
	    api_json_u64(v, "depth", false, 1000000, &depth, err) < 0 ||
	    api_json_string(v, "revision", false, &src->revision, err) < 0)
		return *err ? -EINVAL : api_bad(err, "field 'source' must be an object");
	if (strcmp(src->type, "git") != 0 && strcmp(src->type, "tarball") != 0)
		return api_bad(
		    err, "a 'source' of type '%.32s' is not supported (git, tarball, snapshot)",
		    src->type);
	if (strncmp(src->url, "https://", 8) != 0 && strncmp(src->url, "http://", 7) != 0)
		return api_bad(err, "a source's url is an http:// or https:// URL");
	if (strcmp(src->type, "git") != 0 && (depth || src->revision))
		return api_bad(err, "'depth' and 'revision' are for a git source");
	src->depth = (unsigned)depth;
	return 0;
}

static void vc_create(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL, *policy = NULL;
	_cleanup_free_ char *id = NULL;
	struct dm_create c = {0};
	uint16_t ports[DM_PORTS_MAX];
	struct dm_source src = {0};
	bool has_source = false;
	char **env = NULL;
	bool named;
	int ret;

	if (api_body_object(r, &body, &err) < 0)
		return vc_reply_error(r, err);
	ret = vc_parse_create(body, &c, &env, &policy, ports, &err);
	if (ret == 0)
		ret = vc_source(body, &src, &has_source, &err);
	if (ret == 0)
		ret = vc_named_reserve(r, body, &err);
	named = ret == 0 && json_is_string(json_object_get(body, "name"));
	if (ret == 0 && vc_source_snapshot(body))
		ret = dm_sandbox_create_from(r->api->d, r->team, &c, vc_source_snapshot(body), &id,
					     &err);
	else if (ret == 0)
		ret = dm_sandbox_create(r->api->d, r->team, &c, &id, &err);
	if (ret < 0 && c.spec.image[0] && err && err->code == EINVAL && strstr(err->msg, "image"))
		al_error_wrap(&err,
			      "runtime '%s' is an image of that name under the daemon's --images",
			      c.spec.image);
	api_strv_free(env, c.n_env);
	if (ret == 0 && (vc_mounts_apply(r, id, json_object_get(body, "mounts"), &err) < 0 ||
			 vc_named_bind(r, body, id, true, &err) < 0)) {
		ret = -1;
		dm_sandbox_stop(r->api->d, r->team, id, NULL); /* no half-made sandbox */
	}
	if (ret < 0 && named)
		vc_named_bind(r, body, NULL, false, NULL);
	if (ret < 0)
		return vc_reply_error(r, err);
	/* Fetched inside the new sandbox (its policy applies); a failed fetch ends it. */
	if (has_source && dm_sandbox_fetch_source(r->api->d, r->team, id, &src, &err) < 0) {
		_cleanup_error_ struct al_error *ignored = NULL;

		dm_sandbox_stop(r->api->d, r->team, id, &ignored);
		return vc_reply_error(r, err);
	}
	vc_reply_view(r, id, true, true, true, NULL);
}

/* --- sandboxes by name ----------------------------------------------------- */

static void vc_get(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *rec = NULL;
	_cleanup_free_ char *id = vc_session_for(r, api_param(r, "name"), &rec);
	json_t *view = NULL;
	bool resume = false, running;

	if (api_query_bool(r, "resume", &resume, &err) < 0)
		return vc_reply_error(r, err);
	if (resume) {
		/* a named sandbox whose session ended before its record was bound has none */
		if (dm_sandbox_get(r->api->d, r->team, id, &view, rec ? NULL : &err) < 0 && !rec)
			return vc_reply_error(r, err);
		running = view && strcmp(vc_status(view), "running") == 0;
		json_decref(view);
		if (!running && !rec)
			return vc_reply_error_code(r, 410, "sandbox_stopped",
						   "the sandbox is stopped and cannot be resumed "
						   "(only a named sandbox gets a new session)");
		if (!running) {
			free(id);
			id = NULL;
			if (vc_named_resume(r, api_param(r, "name"), rec, &id, &err) < 0)
				return vc_reply_error(r, err);
			return vc_reply_view(r, id, true, true, true,
					     json_pack("{s:b}", "resumed", 1));
		}
	}
	vc_reply_view(r, id, true, true, true, json_pack("{s:b}", "resumed", 0));
}

static void vc_delete(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_free_ char *id = vc_session_for(r, api_param(r, "name"), NULL);
	bool del = false;

	if (api_query_bool(r, "deleteOrphanSnapshots", &del, &err) < 0 ||
	    dm_sandbox_stop(r->api->d, r->team, id, &err) < 0)
		return vc_reply_error(r, err);
	vc_reply_view(r, id, true, false, true, NULL);
	vc_named_forget(r, api_param(r, "name"), del);
}

/* PATCH: the network policy, the ports and the snapshot settings (persistent,
 * snapshotExpiration, keepLastSnapshots, currentSnapshotId) change; timeout is applied by
 * the SDK's own extend-timeout call that follows. */
static void vc_update(struct api_req *r)
{
	static const char *const fields[] = {
	    "timeout", "networkPolicy",	     "persistent",	  "ports",
	    "tags",    "snapshotExpiration", "keepLastSnapshots", "currentSnapshotId",
	    NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL, *policy = NULL;
	_cleanup_free_ char *id = vc_session_for(r, api_param(r, "name"), NULL);
	uint16_t ports[DM_PORTS_MAX];
	size_t n_ports = 0;
	json_t *v;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    vc_check_unsupported(body, &err) < 0 ||
	    api_json_ports(body, "ports", ports, DM_PORTS_MAX, &n_ports, &err) < 0 ||
	    dm_sandbox_get(r->api->d, r->team, id, &v, &err) < 0)
		return vc_reply_error(r, err);
	json_decref(v);
	v = json_object_get(body, "ports");
	if (v && !json_is_null(v) &&
	    dm_sandbox_set_ports(r->api->d, r->team, id, ports, n_ports, &err) < 0)
		return vc_reply_error(r, err);
	v = json_object_get(body, "networkPolicy");
	if ((v && (vc_policy_in(v, &policy, &err) < 0 ||
		   dm_sandbox_set_policy(r->api->d, r->team, id, policy, &err) < 0)) ||
	    vc_named_update(r, api_param(r, "name"), id, body, &err) < 0)
		return vc_reply_error(r, err);
	vc_reply_view(r, id, true, false, true, NULL);
}

/* --- lists ----------------------------------------------------------------- */

static int vc_by_created_desc(const void *a, const void *b)
{
	json_int_t x = vc_int(*(json_t *const *)a, "created_at");
	json_int_t y = vc_int(*(json_t *const *)b, "created_at");

	if (x != y)
		return x < y ? 1 : -1;
	return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "id")),
		      json_string_value(json_object_get(*(json_t *const *)b, "id")));
}

/*
 * The team's sandboxes, newest first, filtered by name (exact) or prefix, one page
 * after the cursor (the name of the last item of the previous page).
 */
static void vc_list_common(struct api_req *r, const char *key, json_t *(*conv)(json_t *),
			   const char *name, const char *prefix)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *list = NULL;
	_cleanup_free_ json_t **v = NULL;
	const char *cursor = api_query(r, "cursor");
	uint64_t limit = VC_LIST_MAX;
	json_t *out, *item, *next = json_null();
	size_t i, n = 0, start = 0;
	bool sandboxes = strcmp(key, "sandboxes") == 0;

	if (api_query_u64(r, "limit", VC_LIST_MAX, &limit, &err) < 0 ||
	    dm_sandbox_list(r->api->d, r->team, &list, &err) < 0)
		return vc_reply_error(r, err);
	v = xzalloc((json_array_size(list) + 1) * sizeof(*v));
	json_array_foreach(list, i, item)
	{
		const char *id = json_string_value(json_object_get(item, "id"));
		_cleanup_free_ char *shown = NULL;

		/* sandboxes: a named one under its name, its earlier sessions not at all;
		 * sessions: name= those of that sandbox, current and earlier */
		if (!id || (sandboxes && vc_named_hidden(r, id, &shown)) ||
		    (name && !vc_named_has_session(r, name, id)) ||
		    (prefix && strncmp(shown ? shown : id, prefix, strlen(prefix)) != 0))
			continue;
		v[n++] = item;
	}
	qsort(v, n, sizeof(*v), vc_by_created_desc);
	for (i = 0; cursor && i < n; i++)
		if (strcmp(json_string_value(json_object_get(v[i], "id")), cursor) == 0) {
			start = i + 1;
			break;
		}
	out = json_array();
	for (i = start; i < n && json_array_size(out) < limit; i++) {
		json_t *o = conv(v[i]);

		if (sandboxes)
			vc_named_view(r, json_string_value(json_object_get(v[i], "id")), o);
		json_array_append_new(out, o);
	}
	if (i < n && json_array_size(out) > 0)
		next = json_string(json_string_value(json_object_get(v[i - 1], "id")));
	api_reply_json(r, 200,
		       json_pack("{s:o,s:{s:I,s:o}}", key, out, "pagination", "count",
				 (json_int_t)json_array_size(out), "next", next));
}

static void vc_list(struct api_req *r)
{
	vc_list_common(r, "sandboxes", vc_sandbox_of, NULL, api_query(r, "namePrefix"));
}

static void vc_sessions_list(struct api_req *r)
{
	vc_list_common(r, "sessions", vc_session_of, api_query(r, "name"), NULL);
}

/* --- sessions -------------------------------------------------------------- */

static void vc_session_get(struct api_req *r)
{
	vc_reply_view(r, api_param(r, "id"), false, true, true, NULL);
}

/* The interactive PTY (docs/pty.md): a ticket for the WebSocket below. */
static void vc_interactive(struct api_req *r)
{
	api_pty_offer(r, "/v2/sandboxes/sessions/", "/interactive/ws");
}

/* What the sandbox CLI asks before it opens the PTY's WebSocket. */
static void vc_health(struct api_req *r)
{
	api_reply_json(r, 200, json_pack("{s:b}", "ok", 1));
}

static void vc_stop(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *id = api_param(r, "id");
	json_t *snap = NULL;

	/* A persistent sandbox's files are kept first (its stop's snapshot); stopping a
	 * stopped sandbox is a no-op: the SDK may repeat a stop. */
	if (vc_named_before_stop(r, id, &snap, &err) < 0 ||
	    dm_sandbox_stop(r->api->d, r->team, id, &err) < 0) {
		json_decref(snap);
		return vc_reply_error(r, err);
	}
	vc_reply_view(r, id, true, true, false,
		      snap ? json_pack("{s:o}", "snapshot", vc_snap_of(snap)) : NULL);
	json_decref(snap);
}

static void vc_extend(struct api_req *r)
{
	static const char *const fields[] = {"duration", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *id = api_param(r, "id");
	uint64_t add = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "duration", true, INT64_MAX, &add, &err) < 0)
		return vc_reply_error(r, err);
	if (add == 0)
		return vc_reply_error_code(r, 400, "bad_request", "field 'duration' must be > 0");
	if (dm_sandbox_extend(r->api->d, r->team, id, add, &err) < 0)
		return vc_reply_error(r, err);
	vc_reply_view(r, id, false, true, false, NULL);
}

static void vc_policy(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL, *policy = NULL;
	const char *id = api_param(r, "id");

	if (api_body_value(r, &body, &err) < 0 || vc_policy_in(body, &policy, &err) < 0 ||
	    dm_sandbox_set_policy(r->api->d, r->team, id, policy, &err) < 0)
		return vc_reply_error(r, err);
	vc_reply_view(r, id, false, true, false, NULL);
}

#define SES "/v2/sandboxes/sessions/{id}"

/* Literal paths before /v2/sandboxes/{name}: the first match wins. */
const struct api_route api_vercel_routes[] = {
    {"POST", "/v3/sandboxes", vc_create, 0},
    {"POST", "/v2/sandboxes", vc_create, 0},
    {"GET", "/v2/sandboxes", vc_list, 0},
    {"GET", "/v2/sandboxes/sessions", vc_sessions_list, 0},
    {"GET", SES, vc_session_get, 0},
    {"POST", SES "/cmd", vc_cmd_run, 0},
    {"GET", SES "/cmd/{cid}", vc_cmd_get, 0},
    {"GET", SES "/cmd/{cid}/logs", vc_cmd_logs, 0},
    {"POST", SES "/cmd/{cid}/kill", vc_cmd_kill, 0},
    {"POST", SES "/fs/write", vc_fs_write, API_ROUTE_RAW | API_ROUTE_UPLOAD},
    {"POST", SES "/fs/read", vc_fs_read, 0},
    {"POST", SES "/fs/mkdir", vc_fs_mkdir, 0},
    {"POST", SES "/network-policy", vc_policy, 0},
    {"POST", SES "/extend-timeout", vc_extend, 0},
    {"POST", SES "/stop", vc_stop, 0},
    {"POST", SES "/interactive", vc_interactive, 0},
    {"GET", SES "/interactive/ws", api_pty_ws, API_ROUTE_NO_AUTH},
    {"GET", "/health", vc_health, API_ROUTE_NO_AUTH},
    {"POST", SES "/snapshot", vc_snap_create, 0},
    {"GET", "/v2/sandboxes/drives", vc_drive_list, 0},
    {"POST", "/v2/sandboxes/drives/{dname}", vc_drive_put, 0},
    {"DELETE", "/v2/sandboxes/drives/{dname}", vc_drive_delete, 0},
    {"GET", "/v2/sandboxes/snapshots", vc_snap_list, 0},
    {"GET", "/v2/sandboxes/snapshots/tree", vc_snap_tree, 0},
    {"GET", "/v2/sandboxes/snapshots/{sid}", vc_snap_get, 0},
    {"DELETE", "/v2/sandboxes/snapshots/{sid}", vc_snap_delete, 0},
    {"POST", "/v2/sandboxes/{name}/fork", vc_fork, 0},
    {"GET", "/v2/sandboxes/{name}", vc_get, 0},
    {"PATCH", "/v2/sandboxes/{name}", vc_update, 0},
    {"DELETE", "/v2/sandboxes/{name}", vc_delete, 0},
};
const size_t api_vercel_routes_n = ARRAY_SIZE(api_vercel_routes);
