/* SPDX-License-Identifier: MIT */
/*
 * The native REST API under /v1: the route table, health and sandboxes.
 * Commands are in routes_native_cmd.c, files in routes_native_files.c.
 * docs/api.yaml describes every route.
 */
#include "api/native/routes_native.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.0.0"
#endif

#define API_MAX_VCPUS 1024

int api_query_path(struct api_req *r, const char *name, const char *def, const char **out,
		   struct al_error **err)
{
	const char *v = api_query(r, name);

	if (!v) {
		if (!def)
			return api_bad(err, "missing query parameter '%s'", name);
		*out = def;
		return 0;
	}
	if (!v[0] || !api_utf8_valid(v, strlen(v)))
		return api_bad(err, "query parameter '%s' must be a non-empty UTF-8 path", name);
	*out = v;
	return 0;
}

static void api_health(struct api_req *r)
{
	api_reply_json(r, 200, json_pack("{s:b,s:s}", "ok", 1, "version", AIRLOCK_VERSION));
}

/* Replies {sandbox: view} with status, or the error. */
void api_reply_sandbox(struct api_req *r, unsigned status, const char *id)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *view = NULL;

	if (dm_sandbox_get(r->api->d, r->team, id, &view, &err) < 0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, status, "sandbox", view);
}

static int api_parse_resources(json_t *body, struct dm_create *c, struct al_error **err)
{
	static const char *const fields[] = {"vcpus", "memory", "disk", NULL};
	json_t *res = json_object_get(body, "resources"), *v;

	if (!res || json_is_null(res))
		return 0;
	if (api_json_fields(res, "resources", fields, err) < 0)
		return -EINVAL;
	v = json_object_get(res, "vcpus");
	if (v && !json_is_null(v)) {
		if (!json_is_number(v))
			return api_bad(err, "field 'vcpus' must be a number");
		c->spec.vcpus = json_number_value(v);
		if (!isfinite(c->spec.vcpus) || c->spec.vcpus <= 0 || c->spec.vcpus > API_MAX_VCPUS)
			return api_bad(err, "field 'vcpus' must be > 0 and <= %d", API_MAX_VCPUS);
	}
	if (api_json_size(res, "memory", &c->spec.memory_bytes, err) < 0 ||
	    api_json_size(res, "disk", &c->spec.disk_bytes, err) < 0)
		return -EINVAL;
	return 0;
}

int api_parse_create(json_t *body, struct dm_create *c, char ***env, struct al_error **err)
{
	static const char *const fields[] = {
	    "image",	      "resources", "timeout", "env",	  "workdir",
	    "network_policy", "hostname",  "ports",   "snapshot", NULL};
	const char *image = NULL, *workdir = NULL, *hostname = NULL;
	json_t *policy;

	if (api_json_fields(body, "the body", fields, err) < 0 ||
	    api_json_string(body, "image", false, &image, err) < 0 ||
	    api_parse_resources(body, c, err) < 0 ||
	    api_json_u64(body, "timeout", false, INT64_MAX, &c->timeout_ms, err) < 0 ||
	    api_json_string(body, "workdir", false, &workdir, err) < 0 ||
	    api_json_string(body, "hostname", false, &hostname, err) < 0 ||
	    api_json_env(body, "env", env, &c->n_env, err) < 0 ||
	    api_json_ports(body, "ports", (uint16_t *)c->ports, DM_PORTS_MAX, &c->n_ports, err) < 0)
		return -EINVAL;
	c->env = (const char *const *)*env;
	if (image && !image[0])
		return api_bad(err, "field 'image' must not be empty");
	if (hostname && !hostname[0])
		return api_bad(err, "field 'hostname' must not be empty");
	if (workdir && workdir[0] != '/')
		return api_bad(err, "field 'workdir' must be an absolute path");
	if (JAIL_SPEC_SET(c->spec.image, image, "field 'image'", err) < 0 ||
	    JAIL_SPEC_SET(c->spec.workdir, workdir, "field 'workdir'", err) < 0 ||
	    JAIL_SPEC_SET(c->spec.hostname, hostname, "field 'hostname'", err) < 0)
		return -EINVAL;
	policy = json_object_get(body, "network_policy");
	if (policy && !json_is_null(policy)) {
		if (api_policy_check(policy, "network_policy", err) < 0)
			return -EINVAL;
		c->network_policy = policy;
	}
	return 0;
}

/* PUT {ports: [...]}: replaces the declared ports (docs/ports.md). */
static void api_sbx_ports(struct api_req *r)
{
	static const char *const fields[] = {"ports", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	uint16_t ports[DM_PORTS_MAX];
	size_t n = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0)
		return api_reply_error(r, err);
	if (!json_is_array(json_object_get(body, "ports")))
		return api_reply_error_code(r, 400, "bad_request", "field 'ports' is required");
	if (api_json_ports(body, "ports", ports, DM_PORTS_MAX, &n, &err) < 0 ||
	    dm_sandbox_set_ports(r->api->d, r->team, api_param(r, "id"), ports, n, &err) < 0)
		return api_reply_error(r, err);
	api_reply_sandbox(r, 200, api_param(r, "id"));
}

static void api_sbx_create(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *id = NULL;
	uint16_t ports[DM_PORTS_MAX];
	struct dm_create c = {.ports = ports};
	char **env = NULL;
	json_t *snap;
	int ret;

	if (api_body_object(r, &body, &err) < 0)
		return api_reply_error(r, err);
	ret = api_parse_create(body, &c, &env, &err);
	if (ret == 0 && (snap = json_object_get(body, "snapshot")) && !json_is_null(snap))
		ret = json_is_string(snap)
			  ? dm_sandbox_create_from(r->api->d, r->team, &c, json_string_value(snap),
						   &id, &err)
			  : api_bad(&err, "field 'snapshot' must be a snapshot id");
	else if (ret == 0)
		ret = dm_sandbox_create(r->api->d, r->team, &c, &id, &err);
	api_strv_free(env, c.n_env);
	if (ret < 0)
		return api_reply_error(r, err);
	api_reply_sandbox(r, 201, id);
}

static void api_sbx_list(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *list = NULL;

	if (dm_sandbox_list(r->api->d, r->team, &list, &err) < 0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, 200, "sandboxes", list);
}

static void api_sbx_get(struct api_req *r)
{
	api_reply_sandbox(r, 200, api_param(r, "id"));
}

static void api_sbx_stop(struct api_req *r)
{
	static const char *const fields[] = {NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *id = api_param(r, "id");

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    dm_sandbox_stop(r->api->d, r->team, id, &err) < 0)
		return api_reply_error(r, err);
	api_reply_sandbox(r, 200, id);
}

static void api_sbx_extend(struct api_req *r)
{
	static const char *const fields[] = {"duration_ms", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *id = api_param(r, "id");
	uint64_t add = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "duration_ms", true, INT64_MAX, &add, &err) < 0)
		return api_reply_error(r, err);
	if (add == 0)
		return api_reply_error_code(r, 400, "bad_request",
					    "field 'duration_ms' must be > 0");
	if (dm_sandbox_extend(r->api->d, r->team, id, add, &err) < 0)
		return api_reply_error(r, err);
	api_reply_sandbox(r, 200, id);
}

static void api_sbx_policy(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *id = api_param(r, "id");

	if (api_body_value(r, &body, &err) < 0 || api_policy_check(body, "the policy", &err) < 0 ||
	    dm_sandbox_set_policy(r->api->d, r->team, id, body, &err) < 0)
		return api_reply_error(r, err);
	api_reply_sandbox(r, 200, id);
}

/* The log from f->off: without follow, up to its end; with ?follow=true, then new lines
 * as they come, until the sandbox ends. Read from an offset, never the whole log again. */
struct egress_follow {
	struct daemon *d;
	char *team, *id;
	uint64_t off;
	bool follow;
};

static bool sbx_running(struct egress_follow *f)
{
	json_t *v = NULL;
	bool running = false;

	if (dm_sandbox_get(f->d, f->team, f->id, &v, NULL) == 0)
		running =
		    strcmp(json_string_value(json_object_get(v, "status")) ?: "", "running") == 0;
	json_decref(v);
	return running;
}

/* The bytes of buf[0..got) to send: following, whole lines only (or a full buffer of a
 * line longer than it); otherwise all of them. */
static size_t egress_take(const struct egress_follow *f, const char *buf, size_t got, size_t max)
{
	const char *end;

	if (!f->follow || !got)
		return got;
	end = memrchr(buf, '\n', got);
	return end ? (size_t)(end + 1 - buf) : got == max ? got : 0;
}

static ssize_t egress_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct egress_follow *f = cls;

	for (int waited = 0; waited < 600; waited++) { /* a slice of ~30 s, then a keep-alive */
		bool running = f->follow && sbx_running(f); /* before the read: none lost */
		size_t got = 0, n;

		if (dm_sandbox_egress_read(f->d, f->team, f->id, f->off, buf, max, &got, NULL) < 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		n = egress_take(f, buf, got, max);
		if (n) {
			f->off += n;
			return (ssize_t)n;
		}
		if (!running)
			return MHD_CONTENT_READER_END_OF_STREAM;
		usleep(50000);
	}
	buf[0] = '\n'; /* an empty line keeps proxies and clients from timing out */
	return 1;
}

static void egress_free(void *cls)
{
	struct egress_follow *f = cls;

	free(f->team);
	free(f->id);
	free(f);
}

/* The sandbox's egress decisions, one JSON object a line (docs/network.md). */
static void api_sbx_egress(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct egress_follow *f;
	struct MHD_Response *resp;
	bool follow = false;
	size_t got;
	char probe;

	if (api_query_bool(r, "follow", &follow, &err) < 0 ||
	    dm_sandbox_egress_read(r->api->d, r->team, api_param(r, "id"), 0, &probe, 0, &got,
				   &err) < 0)
		return api_reply_error(r, err);
	f = xzalloc(sizeof(*f));
	f->d = r->api->d;
	f->team = xstrdup(r->team);
	f->id = xstrdup(api_param(r, "id"));
	f->follow = follow;
	resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, egress_read, f, egress_free);
	if (!resp)
		al_oom();
	api_reply_stream(r, resp);
}

#define SBX "/v1/sandboxes/{id}"

const struct api_route api_native_routes[] = {
    {"GET", "/v1/health", api_health, API_ROUTE_NO_AUTH},
    {"POST", "/v1/sandboxes", api_sbx_create, 0},
    {"GET", "/v1/sandboxes", api_sbx_list, 0},
    {"GET", SBX, api_sbx_get, 0},
    {"POST", SBX "/stop", api_sbx_stop, 0},
    {"POST", SBX "/extend", api_sbx_extend, 0},
    {"PUT", SBX "/network-policy", api_sbx_policy, 0},
    {"PUT", SBX "/ports", api_sbx_ports, 0},
    {"GET", SBX "/egress", api_sbx_egress, 0},
    {"POST", SBX "/commands", api_cmd_run, 0},
    {"GET", SBX "/commands", api_cmd_list, 0},
    {"GET", SBX "/commands/{cid}", api_cmd_get, 0},
    {"GET", SBX "/commands/{cid}/wait", api_cmd_wait, 0},
    {"GET", SBX "/commands/{cid}/logs", api_cmd_logs, 0},
    {"POST", SBX "/commands/{cid}/stdin", api_cmd_stdin, API_ROUTE_RAW},
    {"POST", SBX "/commands/{cid}/kill", api_cmd_kill, 0},
    {"POST", SBX "/commands/{cid}/resize", api_cmd_resize, 0},
    {"POST", SBX "/pty", api_sbx_pty, 0},
    {"GET", SBX "/pty/ws", api_pty_ws, API_ROUTE_NO_AUTH},
    {"PUT", SBX "/files", api_fs_write, API_ROUTE_RAW | API_ROUTE_UPLOAD},
    {"GET", SBX "/files", api_fs_list, 0},
    {"GET", SBX "/files/content", api_fs_read, 0},
    {"POST", SBX "/files/mkdir", api_fs_mkdir, 0},
    {"POST", SBX "/snapshot", api_snap_create, 0},
    {"POST", SBX "/fork", api_sbx_fork, 0},
    {"GET", "/v1/snapshots", api_snap_list, 0},
    {"GET", "/v1/snapshots/{sid}", api_snap_get, 0},
    {"DELETE", "/v1/snapshots/{sid}", api_snap_delete, 0},
};
const size_t api_native_routes_n = ARRAY_SIZE(api_native_routes);
