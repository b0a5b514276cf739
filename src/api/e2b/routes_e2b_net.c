/* SPDX-License-Identifier: MIT */
/*
 * E2B's network options mapped onto airlock's policy (docs/e2b.md, "Network"), their route
 * (PUT /sandboxes/{id}/network), and the metrics route and view. E2B filters names only on ports
 * 80/443 and lets allow beat deny; airlock keeps its own, stricter semantics: a policy is an allow
 * list judged on every port.
 *
 *   nothing restricts (allow_internet_access unset or true, no denyOut)  -> "allow-all"
 *     (allowOut alone restricts nothing in E2B either)
 *   allow_internet_access: false, or denyOut holding 0.0.0.0/0 (or ::/0) ->
 *     {allow: allowOut's names, subnets: {allow: allowOut's addresses and CIDRs,
 *      deny: denyOut's other CIDRs}}, "deny-all" when that allows nothing
 *   denyOut of some ranges only, the internet otherwise open              -> 400: an allow
 *     list cannot say "everything but these"
 *   rules (transforms), egressProxy, maskRequestHost, httpsPorts          -> 400
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define E2B_METRICS_SAMPLE_MS 100 /* the CPU share is measured over this */

static bool e2b_is_addr(const char *s)
{
	return s[0] && s[strspn(s, "0123456789abcdefABCDEF:./")] == '\0' &&
	       (strchr(s, '.') || strchr(s, ':'));
}

static bool e2b_is_everything(const char *s)
{
	return strcmp(s, "0.0.0.0/0") == 0 || strcmp(s, "::/0") == 0;
}

static int e2b_net_list(json_t *net, const char *key, json_t **out, struct al_error **err)
{
	json_t *v = json_object_get(net, key), *it;
	size_t i;

	*out = v;
	if (!v || json_is_null(v)) {
		*out = NULL;
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) > 1024)
		return api_bad(err, "network.%s must be an array of at most 1024 strings", key);
	json_array_foreach(v, i, it)
	{
		if (!json_is_string(it) || json_string_length(it) == 0 ||
		    json_string_length(it) > 255)
			return api_bad(err, "network.%s[%zu] must be a non-empty string", key, i);
	}
	return 0;
}

static int e2b_net_refused(json_t *net, struct al_error **err)
{
	static const char *const fields[] = {
	    "allowOut",		  "denyOut",	     "rules",	   "egressProxy",
	    "allowPublicTraffic", "maskRequestHost", "httpsPorts", NULL};
	json_t *rules = json_object_get(net, "rules");

	if (api_json_fields(net, "network", fields, err) < 0)
		return -EINVAL;
	if (rules && !json_is_null(rules) && json_object_size(rules) > 0)
		return api_bad(err, "network.rules (request transforms) are not supported by the "
				    "E2B front end; use the native or Vercel API's policy rules");
	if (json_object_get(net, "egressProxy") &&
	    !json_is_null(json_object_get(net, "egressProxy")))
		return api_bad(err, "network.egressProxy is not supported by airlock");
	if (json_is_string(json_object_get(net, "maskRequestHost")))
		return api_bad(err, "network.maskRequestHost is not supported by airlock");
	if (json_array_size(json_object_get(net, "httpsPorts")) > 0)
		return api_bad(err, "network.httpsPorts is not supported by airlock: names are "
				    "judged on every port");
	return 0;
}

int e2b_policy_of(json_t *net, bool internet, json_t **out, struct al_error **err)
{
	json_t *allow_out = NULL, *deny_out = NULL, *it;
	json_t *names, *sub_allow, *sub_deny;
	bool everything = !internet, partial = false;
	size_t i;

	*out = NULL;
	if (net && !json_is_null(net)) {
		if (!json_is_object(net))
			return api_bad(err, "network must be an object");
		if (e2b_net_refused(net, err) < 0 ||
		    e2b_net_list(net, "allowOut", &allow_out, err) < 0 ||
		    e2b_net_list(net, "denyOut", &deny_out, err) < 0)
			return -EINVAL;
	}
	json_array_foreach(deny_out, i, it)
	{
		const char *s = json_string_value(it);

		if (!e2b_is_addr(s))
			return api_bad(err,
				       "network.denyOut[%zu] '%.100s': deny entries are "
				       "addresses or CIDR ranges",
				       i, s);
		if (e2b_is_everything(s))
			everything = true;
		else
			partial = true;
	}
	if (!everything && partial)
		return api_bad(err,
			       "network.denyOut without 0.0.0.0/0: airlock's policy is an "
			       "allow list; deny 0.0.0.0/0 and list what to reach in allowOut");
	if (!everything) {
		*out = json_string("allow-all");
		return 0;
	}
	names = json_array(), sub_allow = json_array(), sub_deny = json_array();
	json_array_foreach(allow_out, i, it)
	{
		const char *s = json_string_value(it);

		if (!e2b_is_addr(s))
			json_array_append(names, it);
		else if (strchr(s, '/'))
			json_array_append(sub_allow, it);
		else
			json_array_append_new(sub_allow,
					      json_sprintf("%s/%d", s, strchr(s, ':') ? 128 : 32));
	}
	json_array_foreach(deny_out, i, it)
	{
		if (!e2b_is_everything(json_string_value(it)))
			json_array_append(sub_deny, it);
	}
	if (!json_array_size(names) && !json_array_size(sub_allow)) {
		json_decref(names), json_decref(sub_allow), json_decref(sub_deny);
		*out = json_string("deny-all");
		return 0;
	}
	*out = json_pack("{s:o,s:{s:o,s:o}}", "allow", names, "subnets", "allow", sub_allow, "deny",
			 sub_deny);
	return 0;
}

/* [SandboxMetric] from two usage samples dt_ms apart. */
static json_t *e2b_metrics_of(json_t *a, json_t *b, uint64_t dt_ms, unsigned cpus)
{
	json_int_t cpu0 = json_integer_value(json_object_get(a, "cpu_usec"));
	json_int_t cpu1 = json_integer_value(json_object_get(b, "cpu_usec"));
	json_int_t max = json_integer_value(json_object_get(b, "memory_max"));
	double pct = dt_ms && cpus ? (double)(cpu1 - cpu0) / 10.0 / (double)dt_ms / cpus : 0;
	time_t now = time(NULL);
	struct tm tm;
	char ts[32];
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	json_t *out;

	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (max <= 0)
		max = pages > 0 && psz > 0 ? (json_int_t)pages * psz : 0;
	out =
	    json_pack("[{s:s,s:I,s:i,s:f,s:I,s:I,s:I,s:I}]", "timestamp", ts, "timestampUnix",
		      (json_int_t)now, "cpuCount", (int)cpus, "cpuUsedPct", pct < 0 ? 0.0 : pct,
		      "memUsed", json_integer_value(json_object_get(b, "memory_bytes")), "memTotal",
		      max, "diskUsed", json_integer_value(json_object_get(b, "disk_used")),
		      "diskTotal", json_integer_value(json_object_get(b, "disk_total")));
	if (!out)
		al_oom();
	return out;
}

/* --- the handlers ------------------------------------------------------------------------ */

void e2b_network(struct api_req *r)
{
	static const char *const fields[] = {
	    "allowOut", "denyOut", "rules", "allow_internet_access", "egressProxy", NULL};
	const char *id = api_param(r, "id");
	_cleanup_json_ json_t *body = NULL, *policy = NULL;
	_cleanup_free_ char *dm = NULL;
	struct e2b *e = r->api->e2b;
	struct al_error *err = NULL;
	json_t *ai;
	struct e2b_sbx *s;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0)
		goto fail;
	ai = json_object_get(body, "allow_internet_access");
	if (ai && !json_is_boolean(ai)) {
		api_bad(&err, "allow_internet_access must be a boolean");
		goto fail;
	}
	json_object_del(body, "allow_internet_access");
	if (e2b_policy_of(body, !json_is_false(ai), &policy, &err) < 0)
		goto fail;
	if (!(dm = e2b_dm_id(r, id)))
		return;
	if (dm_sandbox_set_policy(r->api->d, r->team, dm, policy, &err) < 0)
		goto fail;
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, id);
	if (s) {
		json_decref(s->network);
		s->network = json_incref(body);
		s->internet = ai ? json_is_true(ai) : s->internet;
	}
	pthread_mutex_unlock(&e->mu);
	api_reply_raw(r, 204, "application/json", NULL, 0);
	return;
fail:
	e2b_reply_err(r, err);
	al_error_free(err);
}

void e2b_metrics(struct api_req *r)
{
	_cleanup_json_ json_t *a = NULL, *b = NULL;
	struct al_error *err = NULL;
	_cleanup_free_ char *id = e2b_dm_id(r, api_param(r, "id"));
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (!id)
		return;
	if (dm_sandbox_usage(r->api->d, r->team, id, &a, &err) < 0 ||
	    (usleep(E2B_METRICS_SAMPLE_MS * 1000),
	     dm_sandbox_usage(r->api->d, r->team, id, &b, &err) < 0)) {
		e2b_reply_err(r, err);
		al_error_free(err);
		return;
	}
	api_reply_json(r, 200,
		       e2b_metrics_of(a, b, E2B_METRICS_SAMPLE_MS, n > 0 ? (unsigned)n : 1));
}
