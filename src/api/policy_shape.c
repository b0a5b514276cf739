/* SPDX-License-Identifier: MIT */
/*
 * The shape of a network policy as the API accepts it (the Vercel Sandbox form):
 *   "allow-all" | "deny-all" |
 *   {allow?: [domain...] | {domain: [rule...]}, subnets?: {allow?: [cidr...], deny?: [cidr...]}}
 * Only the shape is checked here; domains, CIDRs and rules are judged by src/net/
 * (through the daemon), which answers EINVAL for a bad value.
 */
#include "api/api_internal.h"
#include "common/error.h"

#include <errno.h>
#include <string.h>

static int api_policy_strings(json_t *v, const char *what, struct al_error **err)
{
	json_t *item;
	size_t i;

	if (!json_is_array(v))
		return api_bad(err, "%s must be an array of strings", what);
	json_array_foreach(v, i, item)
	{
		if (!json_is_string(item) || json_string_length(item) == 0)
			return api_bad(err, "%s[%zu] must be a non-empty string", what, i);
	}
	return 0;
}

static int api_policy_rules(json_t *allow, const char *what, struct al_error **err)
{
	static const char *const rule_fields[] = {"match", "transform", "forwardURL", "response",
						  NULL};
	const char *domain;
	json_t *rules, *rule;
	size_t i;

	json_object_foreach(allow, domain, rules)
	{
		if (!domain[0])
			return api_bad(err, "%s: empty domain", what);
		if (!json_is_array(rules))
			return api_bad(err, "%s.%s must be an array of rules", what, domain);
		json_array_foreach(rules, i, rule)
		{
			if (api_json_fields(rule, "a rule", rule_fields, err) < 0)
				return al_error_wrap(err, "%s.%s[%zu]", what, domain, i);
		}
	}
	return 0;
}

int api_policy_check(json_t *p, const char *what, struct al_error **err)
{
	static const char *const fields[] = {"allow", "subnets", NULL};
	static const char *const subnet_fields[] = {"allow", "deny", NULL};
	json_t *allow, *subnets, *v;

	if (json_is_string(p)) {
		const char *s = json_string_value(p);

		if (strcmp(s, "allow-all") != 0 && strcmp(s, "deny-all") != 0)
			return api_bad(err, "%s: expected \"allow-all\", \"deny-all\" or an object",
				       what);
		return 0;
	}
	if (!json_is_object(p))
		return api_bad(err, "%s: expected \"allow-all\", \"deny-all\" or an object", what);
	if (api_json_fields(p, what, fields, err) < 0)
		return -EINVAL;
	allow = json_object_get(p, "allow");
	if (allow && json_is_object(allow)) {
		if (api_policy_rules(allow, "allow", err) < 0)
			return -EINVAL;
	} else if (allow && api_policy_strings(allow, "allow", err) < 0) {
		return -EINVAL;
	}
	subnets = json_object_get(p, "subnets");
	if (!subnets)
		return 0;
	if (api_json_fields(subnets, "subnets", subnet_fields, err) < 0)
		return -EINVAL;
	v = json_object_get(subnets, "allow");
	if (v && api_policy_strings(v, "subnets.allow", err) < 0)
		return -EINVAL;
	v = json_object_get(subnets, "deny");
	if (v && api_policy_strings(v, "subnets.deny", err) < 0)
		return -EINVAL;
	return 0;
}
