/* SPDX-License-Identifier: MIT */
/*
 * Network policies between the Vercel wire forms and the native one.
 *
 * Request (what the SDK sends):  {mode: allow-all|deny-all} |
 *                                {allow?: [domain] | {domain: [rule]}, subnets?: {allow?, deny?}}
 * Native (what the daemon stores): "allow-all" | "deny-all" | {allow?: [domain], subnets?}
 * Response (what the SDK accepts): {mode: allow-all|deny-all} |
 *                                {mode: "custom", allowedDomains?, allowedCIDRs?, deniedCIDRs?,
 *                                 injectionRules?, forwardRules?}
 *
 * Per-request rules (match, transform, forwardURL, response) pass through to
 * the daemon, which validates them (src/net/rules.c); read back, transform
 * values are never shown (injectionRules list header names only).
 */
#include "api/vercel/routes_vercel.h"
#include "common/error.h"

#include <errno.h>
#include <string.h>

/* The legacy response form sent back as a request: {mode: "custom", allowedDomains, ...}. */
static int vc_policy_from_custom(json_t *p, json_t **out, struct al_error **err)
{
	static const char *const fields[] = {"mode",	    "allowedDomains", "allowedCIDRs",
					     "deniedCIDRs", "injectionRules", "forwardRules",
					     NULL};
	json_t *o, *subnets, *v;

	if (api_json_fields(p, "networkPolicy", fields, err) < 0)
		return -EINVAL;
	v = json_object_get(p, "allowedDomains");
	if (v && !json_is_array(v))
		return api_bad(err, "networkPolicy.allowedDomains must be an array of domains "
				    "(per-request rules use the allow record form)");
	v = json_object_get(p, "injectionRules");
	if (v && json_array_size(v) > 0)
		return api_bad(err,
			       "networkPolicy: injectionRules carry no header values (they are "
			       "read-back summaries); send {allow: {domain: [{transform: ...}]}}");
	v = json_object_get(p, "forwardRules");
	if (v && json_array_size(v) > 0)
		return api_bad(err, "networkPolicy: forwardRules are a read-back summary; send "
				    "{allow: {domain: [{forwardURL: ...}]}}");
	o = json_object();
	subnets = json_object();
	if ((v = json_object_get(p, "allowedDomains")))
		json_object_set(o, "allow", v);
	if ((v = json_object_get(p, "allowedCIDRs")))
		json_object_set(subnets, "allow", v);
	if ((v = json_object_get(p, "deniedCIDRs")))
		json_object_set(subnets, "deny", v);
	if (json_object_size(subnets))
		json_object_set(o, "subnets", subnets);
	json_decref(subnets);
	if (api_policy_check(o, "networkPolicy", err) < 0) {
		json_decref(o);
		return -EINVAL;
	}
	*out = o;
	return 0;
}

int vc_policy_in(json_t *p, json_t **out, struct al_error **err)
{
	json_t *mode, *allow, *o, *rules, *list;
	const char *domain;

	if (json_is_string(p)) { /* not what the SDK sends, but unambiguous */
		if (api_policy_check(p, "networkPolicy", err) < 0)
			return -EINVAL;
		*out = json_incref(p);
		return 0;
	}
	if (!json_is_object(p))
		return api_bad(err, "networkPolicy must be an object");
	mode = json_object_get(p, "mode");
	if (mode) {
		const char *m = json_string_value(mode);

		if (m && strcmp(m, "custom") == 0)
			return vc_policy_from_custom(p, out, err);
		if (json_object_size(p) != 1 || !m ||
		    (strcmp(m, "allow-all") != 0 && strcmp(m, "deny-all") != 0))
			return api_bad(err, "networkPolicy: 'mode' must be \"allow-all\" or "
					    "\"deny-all\", alone");
		*out = json_string(m);
		return 0;
	}
	if (api_policy_check(p, "networkPolicy", err) < 0)
		return -EINVAL;
	allow = json_object_get(p, "allow");
	if (!json_is_object(allow)) {
		*out = json_deep_copy(p);
		return 0;
	}
	/* The record form: with rules it is kept as it is (the daemon judges the rules);
	 * without any, it becomes the plain list. */
	list = json_array();
	json_object_foreach(allow, domain, rules)
	{
		if (json_array_size(rules) > 0) {
			json_decref(list);
			*out = json_deep_copy(p);
			return 0;
		}
		json_array_append_new(list, json_string(domain));
	}
	o = json_deep_copy(p);
	json_object_set_new(o, "allow", list);
	*out = o;
	return 0;
}

/* A record-form native allow (set through another API): domains plus rule summaries. */
static void vc_policy_out_rules(json_t *allow, json_t *o)
{
	json_t *domains = json_array(), *inject = json_array(), *forward = json_array();
	json_t *rules, *rule, *t, *h;
	const char *domain, *name;
	size_t i, j;

	json_object_foreach(allow, domain, rules)
	{
		json_array_append_new(domains, json_string(domain));
		json_array_foreach(rules, i, rule)
		{
			json_t *fwd = json_object_get(rule, "forwardURL");
			json_t *tr = json_object_get(rule, "transform");

			json_t *match = json_object_get(rule, "match");

			if (json_is_string(fwd)) {
				json_t *f =
				    json_pack("{s:s,s:O}", "domain", domain, "forwardURL", fwd);
				if (json_is_object(match))
					json_object_set(f, "match", match);
				json_array_append_new(forward, f);
			}
			if (!json_is_array(tr))
				continue;
			json_t *names = json_array();

			/* Header names only: the values are secrets and never leave. */
			json_array_foreach(tr, j, t)
			{
				json_object_foreach(json_object_get(t, "headers"), name, h)
				    json_array_append_new(names, json_string(name));
			}
			{
				json_t *in =
				    json_pack("{s:s,s:o}", "domain", domain, "headerNames", names);
				if (json_is_object(match))
					json_object_set(in, "match", match);
				json_array_append_new(inject, in);
			}
		}
	}
	json_object_set_new(o, "allowedDomains", domains);
	if (json_array_size(inject))
		json_object_set(o, "injectionRules", inject);
	if (json_array_size(forward))
		json_object_set(o, "forwardRules", forward);
	json_decref(inject);
	json_decref(forward);
}

json_t *vc_policy_out(json_t *native)
{
	json_t *o, *allow, *subnets, *v;

	if (json_is_string(native))
		return json_pack("{s:s}", "mode", json_string_value(native));
	if (!json_is_object(native)) /* cannot happen: the daemon stores validated policies */
		return json_pack("{s:s}", "mode", "deny-all");
	o = json_pack("{s:s}", "mode", "custom");
	allow = json_object_get(native, "allow");
	if (json_is_array(allow))
		json_object_set(o, "allowedDomains", allow);
	else if (json_is_object(allow))
		vc_policy_out_rules(allow, o);
	subnets = json_object_get(native, "subnets");
	if ((v = json_object_get(subnets, "allow")) && json_is_array(v))
		json_object_set(o, "allowedCIDRs", v);
	if ((v = json_object_get(subnets, "deny")) && json_is_array(v))
		json_object_set(o, "deniedCIDRs", v);
	return o;
}
