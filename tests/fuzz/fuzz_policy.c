/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the network policy parser and serializers
 * (src/net/policy.c, with name.c and addr.c under it).
 *
 * For every input that parses as a policy: to_json(p) must parse back to an
 * equal policy and serialize to the very same text (a fixed point), and the
 * Vercel response form must read back (net_policy_parse_response) to an
 * equal policy. Every allowed pattern must be judged "listed" by
 * net_policy_decide_name (on the base name or one label under a wildcard).
 * Per-request rules (rules.c) must survive the round trip too, and the
 * redacted form must parse. On failure, an error message must be set. Any violation aborts.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *	src/net/name.c src/net/addr.c src/net/policy.c src/common/error.c src/common/xalloc.c \
 *	tests/fuzz/fuzz_policy.c -ljansson -lidn2 -lpsl -o fuzz_policy
 *   ./fuzz_policy tests/fuzz/corpus/policy
 */
#include "common/error.h"
#include "net/policy.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

static char *dump(json_t *j)
{
	char *s;

	must(j != NULL);
	s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(j);
	must(s != NULL);
	return s;
}

static void check_decisions(const struct net_policy *p)
{
	for (size_t i = 0; i < p->n_domains; i++) {
		const struct net_pattern *d = &p->domains[i];
		char sub[NET_NAME_MAX + 3];
		const char *why = NULL;

		if (!d->wildcard) {
			must(net_policy_decide_name(p, d->name, &why) == NET_ALLOW);
			continue;
		}
		if (strlen(d->name) + 2 > NET_NAME_MAX)
			continue;
		snprintf(sub, sizeof(sub), "x.%s", d->name);
		/* a wildcard allows one label under it unless it is a DoH resolver name */
		if (net_policy_decide_name(p, sub, &why) != NET_ALLOW)
			must(!strcmp(why, "doh_resolver") || !strcmp(why, "forbidden_name"));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct net_policy *p = NULL, *q = NULL, *r = NULL;
	struct al_error *err = NULL;
	char *s1, *s2, *v;
	json_t *j;

	if (net_policy_parse_string((const char *)data, size, &p, &err) < 0) {
		must(p == NULL && err && err->msg && err->msg[0]);
		al_error_free(err);
		return 0;
	}
	must(p && !err);
	s1 = dump(net_policy_to_json(p));
	must(net_policy_parse_string(s1, strlen(s1), &q, NULL) == 0);
	must(net_policy_equal(p, q));
	s2 = dump(net_policy_to_json(q));
	must(!strcmp(s1, s2));
	v = dump(net_policy_to_vercel(p));
	j = json_loads(v, 0, NULL);
	/* The response form carries no rules (the API adds redacted summaries). */
	must(j && net_policy_parse_response(j, &r, NULL) == 0);
	must(net_policy_has_rules(p) || net_policy_equal(p, r));
	json_decref(j);
	if (net_policy_has_rules(p)) { /* the redacted form is still a valid policy */
		char *red = dump(net_policy_to_json_redacted(p));
		struct net_policy *x = NULL;
		must(net_policy_parse_string(red, strlen(red), &x, NULL) == 0);
		net_policy_free(x);
		free(red);
	}
	check_decisions(p);
	free(s1);
	free(s2);
	free(v);
	net_policy_free(p);
	net_policy_free(q);
	net_policy_free(r);
	return 0;
}
