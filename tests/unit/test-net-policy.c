/* SPDX-License-Identifier: MIT */
/* Unit tests for the network policy: parsing, validation, serialization, decisions. */
#include "common/error.h"
#include "common/xalloc.h"
#include "net/contract.h"
#include "net/policy.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct net_policy *P(const char *json)
{
	struct net_policy *p = NULL;
	struct al_error *err = NULL;

	if (net_policy_parse_string(json, strlen(json), &p, &err) < 0) {
		printf("# unexpected error: %s\n", err->msg);
		al_error_free(err);
	}
	return p;
}

static char *dump(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);

	json_decref(j);
	return s;
}

/* Parse json; its canonical and Vercel forms must be as given, and both must read back. */
static void round_trip(const char *json, const char *canon, const char *vercel)
{
	_cleanup_net_policy_ struct net_policy *p = P(json), *q = NULL, *r = NULL;
	char *c = NULL, *v = NULL;
	json_t *j;

	if (!p) {
		CHECK(0, "policy %s parses", json);
		return;
	}
	c = dump(net_policy_to_json(p));
	v = dump(net_policy_to_vercel(p));
	CHECK(!strcmp(c, canon), "policy %s -> %s", json, c);
	CHECK(!strcmp(v, vercel), "policy %s -> vercel %s", json, v);
	q = P(c);
	CHECK(q && net_policy_equal(p, q), "parse(to_json(p)) == p for %s", json);
	j = json_loads(v, 0, NULL);
	CHECK(j && net_policy_parse_response(j, &r, NULL) == 0 && net_policy_equal(p, r),
	      "parse_response(to_vercel(p)) == p for %s", json);
	json_decref(j);
	free(c);
	free(v);
}

static void round_trips(void)
{
	round_trip("\"allow-all\"", "{\"mode\":\"allow-all\"}", "{\"mode\":\"allow-all\"}");
	round_trip("\"deny-all\"", "{\"mode\":\"deny-all\"}", "{\"mode\":\"deny-all\"}");
	round_trip("{\"mode\":\"allow-all\"}", "{\"mode\":\"allow-all\"}",
		   "{\"mode\":\"allow-all\"}");
	round_trip("{\"mode\":\"deny-all\"}", "{\"mode\":\"deny-all\"}", "{\"mode\":\"deny-all\"}");
	round_trip(
	    "{}", "{\"allow\":[],\"subnets\":{\"allow\":[],\"deny\":[]}}",
	    "{\"allowedCIDRs\":[],\"allowedDomains\":[],\"deniedCIDRs\":[],\"mode\":\"custom\"}");
	/* P1: names, wildcards and an allowed subnet together */
	round_trip(
	    "{\"allow\":[\"allowed.test\",\"api.allowed.test\",\"relay.allowed.test\","
	    "\"doh.allowed.test\",\"*.npmjs.test\"],\"subnets\":{\"allow\":[\"198.51.100.128/"
	    "28\"]}}",
	    "{\"allow\":[\"allowed.test\",\"api.allowed.test\",\"relay.allowed.test\","
	    "\"doh.allowed.test\",\"*.npmjs.test\"],\"subnets\":{\"allow\":[\"198.51.100.128/28\"],"
	    "\"deny\":[]}}",
	    "{\"allowedCIDRs\":[\"198.51.100.128/28\"],\"allowedDomains\":[\"allowed.test\","
	    "\"api.allowed.test\",\"relay.allowed.test\",\"doh.allowed.test\",\"*.npmjs.test\"],"
	    "\"deniedCIDRs\":[],\"mode\":\"custom\"}");
	/* P4: CIDR only */
	round_trip(
	    "{\"subnets\":{\"allow\":[\"198.51.100.0/24\"]}}",
	    "{\"allow\":[],\"subnets\":{\"allow\":[\"198.51.100.0/24\"],\"deny\":[]}}",
	    "{\"allowedCIDRs\":[\"198.51.100.0/24\"],\"allowedDomains\":[],\"deniedCIDRs\":[],"
	    "\"mode\":\"custom\"}");
	/* canonicalization, dedup, record form, IDNA, CIDR normalization */
	round_trip("{\"allow\":{\"Allowed.TEST.\":[],\"*.NPMJS.test\":[],\"allowed.test\":[]}}",
		   "{\"allow\":[\"allowed.test\",\"*.npmjs.test\"],\"subnets\":{\"allow\":[],"
		   "\"deny\":[]}}",
		   "{\"allowedCIDRs\":[],\"allowedDomains\":[\"allowed.test\",\"*.npmjs.test\"],"
		   "\"deniedCIDRs\":[],\"mode\":\"custom\"}");
	round_trip(
	    "{\"allow\":[\"b\xc3\xbc"
	    "cher.de\",\"*.B\xc3\x9c"
	    "CHER.de\",\"a\xef\xbc\x8e"
	    "b\xc3\xbc"
	    "cher.de\"],\"subnets\":{\"deny\":[\"2001:DB8:D::/48\",\"1.2.3.4\","
	    "\"2001:db8:d:0::/48\"]}}",
	    "{\"allow\":[\"xn--bcher-kva.de\",\"*.xn--bcher-kva.de\",\"a.xn--bcher-kva.de\"],"
	    "\"subnets\":{\"allow\":[],\"deny\":[\"2001:db8:d::/48\",\"1.2.3.4/32\"]}}",
	    "{\"allowedCIDRs\":[],\"allowedDomains\":[\"xn--bcher-kva.de\",\"*.xn--bcher-kva.de\","
	    "\"a.xn--bcher-kva.de\"],\"deniedCIDRs\":[\"2001:db8:d::/48\",\"1.2.3.4/32\"],"
	    "\"mode\":\"custom\"}");
}

static void expect_error(const char *json, const char *part)
{
	struct net_policy *p = NULL;
	struct al_error *err = NULL;
	int r = net_policy_parse_string(json, strlen(json), &p, &err);

	CHECK(r == -EINVAL && !p && err && err->code == EINVAL && strstr(err->msg, part),
	      "refused %s: %s", json, err ? err->msg : "(accepted!)");
	al_error_free(err);
	net_policy_free(p);
}

/* NAME-11 and the rest of the validation: every message names the problem and the value. */
static void validation(void)
{
	expect_error("{\"allow\":[\"*\"]}", "'*' alone is not a domain pattern");
	expect_error("{\"allow\":[\"*.com\"]}",
		     "allow[0]: '*.com' is a wildcard over the top-level "
		     "domain 'com'");
	expect_error("{\"allow\":[\"*.test\"]}",
		     "'*.test' is a wildcard over the top-level domain");
	expect_error("{\"allow\":[\"ok.test\",\"*.co.uk\"]}",
		     "allow[1]: '*.co.uk' is a wildcard over the public suffix 'co.uk'");
	expect_error("{\"allow\":[\"*.github.io\"]}", "public suffix 'github.io'");
	expect_error("{\"allow\":[\"*.s3.amazonaws.com\"]}", "public suffix 's3.amazonaws.com'");
	expect_error("{\"allow\":[\"*.vercel.app\"]}", "public suffix 'vercel.app'");
	expect_error("{\"allow\":[\"*.workers.dev\"]}", "public suffix 'workers.dev'");
	expect_error("{\"allow\":[\"*.ngrok.io\"]}", "public suffix 'ngrok.io'");
	expect_error("{\"allow\":[\"*.ngrok-free.app\"]}", "public suffix 'ngrok-free.app'");
	expect_error("{\"allow\":[\"*.eu-west-1.compute.amazonaws.com\"]}", "public suffix");
	expect_error("{\"allow\":[\"*.GitHub.IO.\"]}", "public suffix 'github.io'");
	expect_error("{\"allow\":[\"www.*.test\"]}",
		     "'www.*.test': a wildcard must be the whole first");
	expect_error("{\"allow\":[\"api*.x.test\"]}",
		     "'api*.x.test': a wildcard must be the whole");
	expect_error("{\"allow\":[\"*.*.x.test\"]}", "whole first label");
	expect_error("{\"allow\":[\"**.x.test\"]}", "whole first label");
	expect_error("{\"allow\":[\"x.test.*\"]}", "whole first label");
	expect_error("{\"allow\":[\"*.\"]}", "not a valid domain");
	expect_error("{\"allow\":[\"a..test\"]}", "allow[0]: 'a..test' is not a valid domain: name "
						  "has an empty label");
	expect_error("{\"allow\":[\"bad name.test\"]}", "invalid character ' '");
	expect_error("{\"allow\":[\"-x.test\"]}", "starts or ends with '-'");
	expect_error("{\"allow\":[\"127.0.0.1\"]}", "'127.0.0.1' is an IP address, not a domain");
	expect_error("{\"allow\":[\"[::1]\"]}", "'[::1]' is an IP address");
	expect_error("{\"allow\":[\"2130706433\"]}", "'2130706433' is not a valid domain: name "
						     "'2130706433' is a numeric spelling");
	expect_error("{\"allow\":[\"0x7f.1\"]}", "numeric spelling");
	expect_error("{\"allow\":[\"\"]}", "allow[0]: empty domain");
	expect_error("{\"allow\":[\"localhost\"]}", "'localhost' is always forbidden");
	expect_error("{\"allow\":[\"x.localhost\"]}", "'x.localhost' is always forbidden");
	expect_error("{\"allow\":[\"*.localhost\"]}", "always forbidden");
	expect_error("{\"allow\":[\"metadata.google.internal\"]}", "always forbidden");
	expect_error("{\"allow\":[\"\xe2\x98\x83.test\"]}", "not a valid internationalized name");
	expect_error("{\"allow\":[\"a\\u0000b.test\"]}", "not valid JSON");
	expect_error("{\"allow\":\"x.test\"}", "allow must be an array of domains or an object");
	expect_error("{\"allow\":[1]}", "allow[0] must be a string, not a number");
	expect_error("{\"allow\":[null]}", "allow[0] must be a string, not null");
	expect_error("{\"allow\":{\"x.test\":[{\"transform\":[]}]}}",
		     "allow['x.test'][0].transform must be a non-empty array");
	expect_error("{\"allow\":{\"x.test\":{}}}", "allow['x.test'] must be an array of rules");
	expect_error("{\"allow\":{\"*.co.uk\":[]}}",
		     "allow: '*.co.uk' is a wildcard over the public");
	expect_error("{\"subnets\":{\"allow\":[\"10.0.0.0/33\"]}}",
		     "subnets.allow[0]: CIDR '10.0.0.0/33' has a bad prefix length");
	expect_error(
	    "{\"subnets\":{\"deny\":[\"8.8.8.8/8\"]}}",
	    "subnets.deny[0]: CIDR '8.8.8.8/8' has host bits set (did you mean '8.0.0.0/8'?)");
	expect_error("{\"subnets\":{\"allow\":[\"banana\"]}}",
		     "subnets.allow[0]: not a CIDR range");
	expect_error("{\"subnets\":{\"allow\":\"10.0.0.0/8\"}}", "subnets.allow must be an array");
	expect_error("{\"subnets\":[]}", "subnets must be an object, not an array");
	expect_error("{\"subnets\":{\"permit\":[]}}", "subnets: unknown key 'permit'");
	expect_error("{\"allowed\":[]}", "policy: unknown key 'allowed'");
	expect_error("{\"mode\":\"allow-all\",\"allow\":[]}", "\"mode\" cannot be combined");
	expect_error("{\"mode\":\"custom\"}", "mode 'custom' is not \"allow-all\" or \"deny-all\"");
	expect_error("{\"mode\":1}", "mode must be a string, not a number");
	expect_error("\"allow-some\"", "policy 'allow-some' is not");
	expect_error("42", "policy must be \"allow-all\", \"deny-all\" or an object, not a number");
	expect_error("[]", "not an array");
	expect_error("null", "not null");
	expect_error("{\"allow\":[] ", "not valid JSON");
	expect_error("{\"allow\":[],\"allow\":[]}", "duplicate");
	expect_error("", "not valid JSON");
}

static void limits(void)
{
	size_t cap = 64 + 20 * (NET_POLICY_MAX_DOMAINS + 1);
	char *s = xzalloc(cap);
	size_t n;

	/* exactly the cap is fine; one more is refused */
	n = (size_t)sprintf(s, "{\"allow\":[");
	for (int i = 0; i < NET_POLICY_MAX_DOMAINS; i++)
		n += (size_t)sprintf(s + n, "%s\"h%d.test\"", i ? "," : "", i);
	strcpy(s + n, "]}");
	struct net_policy *p = P(s);
	CHECK(p && p->n_domains == NET_POLICY_MAX_DOMAINS, "1000 domains are accepted");
	net_policy_free(p);
	sprintf(s + n, ",\"extra.test\"]}");
	expect_error(s, "allow has 1001 entries (at most 1000)");
	n = (size_t)sprintf(s, "{\"subnets\":{\"deny\":[");
	for (int i = 0; i <= NET_POLICY_MAX_CIDRS; i++)
		n += (size_t)sprintf(s + n, "%s\"10.%d.%d.0/24\"", i ? "," : "", i / 256, i % 256);
	strcpy(s + n, "]}}");
	expect_error(s, "subnets.deny has 1001 entries (at most 1000)");
	free(s);

	struct net_policy *q = net_policy_new(NET_POLICY_LIST);
	struct al_error *err = NULL;
	int bad = 0;

	for (int i = 0; i < NET_POLICY_MAX_DOMAINS; i++) {
		char d[32];

		snprintf(d, sizeof(d), "h%d.test", i);
		bad += net_policy_add_domain(q, d, strlen(d), NULL) < 0;
	}
	bad += net_policy_add_domain(q, "h5.test", 7, NULL) < 0; /* duplicate: fine */
	CHECK(bad == 0 && net_policy_add_domain(q, "one.more", 8, &err) == -EINVAL && err &&
		  strstr(err->msg, "too many domains"),
	      "add_domain stops at the cap: %s", err ? err->msg : "?");
	al_error_free(err);
	err = NULL;
	net_policy_free(q);
	q = net_policy_new(NET_POLICY_ALLOW_ALL);
	CHECK(net_policy_add_cidr(q, false, "10.0.0.0/8", 10, &err) == -EINVAL && err,
	      "add_cidr needs a list policy");
	al_error_free(err);
	net_policy_free(q);
}

static void response_form(void)
{
	static const struct {
		const char *json, *part;
	} bad[] = {
	    {"{\"mode\":\"custom\",\"injectionRules\":[{\"domain\":\"x.test\"}]}",
	     "injectionRules are not supported yet"},
	    {"{\"mode\":\"custom\",\"forwardRules\":[{}]}", "forwardRules are not supported"},
	    {"{\"mode\":\"custom\",\"allow\":[]}", "unknown key 'allow'"},
	    {"{\"mode\":\"custom\",\"allowedDomains\":[\"*.co.uk\"]}",
	     "allowedDomains[0]: '*.co.uk'"},
	    {"{\"mode\":\"custom\",\"deniedCIDRs\":[\"x\"]}", "deniedCIDRs[0]: not a CIDR"},
	    {"{\"mode\":\"allow-all\",\"allowedDomains\":[]}", "takes no other keys"},
	    {"{\"allowedDomains\":[]}", "mode must be a string, not null"},
	    {"\"allow-all\"", "must be an object"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = json_loads(bad[i].json, JSON_DECODE_ANY, NULL);
		struct net_policy *p = NULL;
		struct al_error *err = NULL;

		CHECK(j && net_policy_parse_response(j, &p, &err) == -EINVAL && !p && err &&
			  strstr(err->msg, bad[i].part),
		      "response form %s refused: %s", bad[i].json, err ? err->msg : "(accepted!)");
		al_error_free(err);
		json_decref(j);
	}
}

static void decide(const struct net_policy *p, const char *pname, const char *name,
		   enum net_verdict want, const char *why)
{
	const char *reason = NULL;
	enum net_verdict v = net_policy_decide_name(p, name, &reason);

	CHECK(v == want && reason && !strcmp(reason, why), "%s: %s -> %s (%s)", pname, name,
	      want == NET_ALLOW ? "allow" : "deny", reason ? reason : "?");
}

static void decisions(void)
{
	_cleanup_net_policy_ struct net_policy *p1 =
	    P("{\"allow\":[\"allowed.test\",\"api.allowed.test\",\"*.npmjs.test\","
	      "\"*.cloudflare-dns.com\",\"dns.google\",\"*.dns.google\"],"
	      "\"subnets\":{\"allow\":[\"198.51.100.128/28\"]}}");
	_cleanup_net_policy_ struct net_policy *p4 =
	    P("{\"subnets\":{\"allow\":[\"198.51.100.0/24\"]}}");
	_cleanup_net_policy_ struct net_policy *all = P("\"allow-all\"");
	_cleanup_net_policy_ struct net_policy *none = P("{\"mode\":\"deny-all\"}");

	if (!p1 || !p4 || !all || !none) {
		CHECK(0, "decision policies parse");
		return;
	}
	decide(p1, "P1", "allowed.test", NET_ALLOW, "listed");
	decide(p1, "P1", "api.allowed.test", NET_ALLOW, "listed");
	decide(p1, "P1", "www.allowed.test", NET_DENY, "not_listed");
	decide(p1, "P1", "x.npmjs.test", NET_ALLOW, "listed");
	decide(p1, "P1", "a.b.c.npmjs.test", NET_ALLOW, "listed");  /* NAME-3 */
	decide(p1, "P1", "npmjs.test", NET_DENY, "not_listed");	    /* NAME-2 */
	decide(p1, "P1", "evilnpmjs.test", NET_DENY, "not_listed"); /* NAME-1 */
	decide(p1, "P1", "xn--bcher-kva.npmjs.test", NET_ALLOW, "listed");
	decide(p1, "P1", "xn--bcher-kva.test", NET_DENY, "not_listed"); /* NAME-6 */
	decide(p1, "P1", "denied.test", NET_DENY, "not_listed");
	decide(p1, "P1", "X.NPMJS.TEST", NET_DENY, "bad_name"); /* canonicalize first */
	decide(p1, "P1", "x.npmjs.test.", NET_DENY, "bad_name");
	decide(p1, "P1", "127.0.0.1", NET_DENY, "bad_name");
	decide(p1, "P1", "", NET_DENY, "bad_name");
	decide(p1, "P1", NULL, NET_DENY, "bad_name");
	decide(p1, "P1", "mozilla.cloudflare-dns.com", NET_DENY, "doh_resolver");
	decide(p1, "P1", "dns.google", NET_ALLOW, "listed"); /* listed exactly */
	decide(p1, "P1", "x.dns.google", NET_ALLOW, "listed");
	decide(p1, "P1", "localhost", NET_DENY, "forbidden_name");
	decide(p4, "P4", "allowed.test", NET_DENY, "not_listed"); /* CIDR-only resolves nothing */
	decide(all, "allow-all", "denied.test", NET_ALLOW, "allow_all");
	decide(all, "allow-all", "mozilla.cloudflare-dns.com", NET_ALLOW, "allow_all");
	decide(all, "allow-all", "localhost", NET_DENY, "forbidden_name");
	decide(all, "allow-all", "a.b.localhost", NET_DENY, "forbidden_name");
	decide(all, "allow-all", "metadata.google.internal", NET_DENY, "forbidden_name");
	decide(all, "allow-all", "metadata", NET_DENY, "forbidden_name");
	decide(all, "allow-all", "localhost.test", NET_ALLOW, "allow_all");
	decide(none, "deny-all", "allowed.test", NET_DENY, "deny_all");
	decide(NULL, "no policy", "allowed.test", NET_DENY, "deny_all");
	CHECK(net_policy_decide_name(p1, "allowed.test", NULL) == NET_ALLOW, "reason may be NULL");
	p1->generation = 7;
	CHECK(net_policy_equal(p1, p1) && !net_policy_equal(p1, p4) && !net_policy_equal(all, none),
	      "equality ignores nothing but the generation");
}

/* The single path of every name: canon, then decide. */
static enum net_verdict judge(const struct net_policy *p, const char *raw, size_t len)
{
	char canon[NET_NAME_MAX + 1];

	if (net_name_canon(raw, len, canon, NULL) < 0)
		return NET_DENY;
	return net_policy_decide_name(p, canon, NULL);
}

/* NAME-12 (unit part): for random names and patterns, case and a trailing dot never change
 * the verdict, and the verdict agrees with a label-by-label reference. */
static void property(void)
{
	static const char *const words[] = {"a", "b", "npmjs", "test", "evil", "x", "api", "cdn"};
	unsigned seed = 99;
	int bad = 0, allowed = 0;

	for (int iter = 0; iter < 2000; iter++) {
		struct net_policy *p = net_policy_new(NET_POLICY_LIST);
		char pat[64], name[80], var[82];

		for (int k = 0; k < 3; k++) {
			int nl = 2 + rand_r(&seed) % 2;

			strcpy(pat, rand_r(&seed) % 2 ? "*." : "");
			for (int l = 0; l < nl; l++) {
				strcat(pat, words[rand_r(&seed) % 8]);
				strcat(pat, l + 1 < nl ? "." : "");
			}
			net_policy_add_domain(p, pat, strlen(pat), NULL); /* some are refused */
		}
		for (int t = 0; t < 50; t++) {
			int nl = 1 + rand_r(&seed) % 4;
			size_t n;

			name[0] = '\0';
			for (int l = 0; l < nl; l++) {
				strcat(name, words[rand_r(&seed) % 8]);
				strcat(name, l + 1 < nl ? "." : "");
			}
			n = strlen(name);
			memcpy(var, name, n + 1);
			for (size_t i = 0; i < n; i++)
				if (rand_r(&seed) % 2 && var[i] >= 'a' && var[i] <= 'z')
					var[i] = (char)(var[i] - 32);
			if (rand_r(&seed) % 2)
				strcat(var, ".");
			enum net_verdict v = judge(p, name, n);
			bool ref = false;

			for (size_t d = 0; d < p->n_domains; d++) {
				size_t bl = strlen(p->domains[d].name);

				if (!p->domains[d].wildcard)
					ref |= !strcmp(name, p->domains[d].name);
				else
					ref |= n > bl + 1 &&
					       !strcmp(name + n - bl, p->domains[d].name) &&
					       name[n - bl - 1] == '.';
			}
			bad += v != judge(p, var, strlen(var)) || (v == NET_ALLOW) != ref;
			allowed += v == NET_ALLOW;
		}
		net_policy_free(p);
	}
	CHECK(bad == 0 && allowed > 500, "property: 100000 decisions, %d allowed, %d disagreements",
	      allowed, bad);
}

/* The gateway's connection budget follows the sandbox's limits (gateway/gateway.h). */
static void conn_budget(void)
{
	CHECK(net_gateway_conn_budget(64ull << 20, 16) == 64, "64 MiB, 16 pids: 64");
	CHECK(net_gateway_conn_budget(1ull << 30, 512) == 1024, "1 GiB, 512 pids: 1024 (memory)");
	CHECK(net_gateway_conn_budget(8ull << 30, 100) == 400, "8 GiB, 100 pids: 400 (pids)");
	CHECK(net_gateway_conn_budget(1ull << 20, 1) == NET_GW_CONNS_MIN, "tiny limits: the floor");
	CHECK(net_gateway_conn_budget(0, 0) == NET_GW_CONNS_MAX, "no limits: the ceiling");
	CHECK(net_gateway_conn_budget(0, 4194304) == NET_GW_CONNS_MAX, "huge pids: the ceiling");
	CHECK(net_gateway_conn_budget(UINT64_MAX, 0) == NET_GW_CONNS_MAX,
	      "huge memory: the ceiling");
}

int main(void)
{
	conn_budget();
	round_trips();
	validation();
	limits();
	response_form();
	decisions();
	property();
	return tap_done();
}
