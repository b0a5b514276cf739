/* SPDX-License-Identifier: MIT */
/* Unit tests for per-request rules: parsing, validation, read-back, matching. */
#include "common/error.h"
#include "net/policy.h"
#include "net/rules.h"
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

static void refused(const char *json, const char *part)
{
	struct net_policy *p = NULL;
	struct al_error *err = NULL;
	int r = net_policy_parse_string(json, strlen(json), &p, &err);

	CHECK(r == -EINVAL && !p && err && strstr(err->msg, part), "refused %s: %s", json,
	      err ? err->msg : "(accepted!)");
	al_error_free(err);
	net_policy_free(p);
}

#define R(rules) "{\"allow\":{\"api.x.test\":" rules "}}"

static void validation(void)
{
	refused(R("[{}]"), "needs exactly one of transform, response, forwardURL");
	refused(
	    R("[{\"transform\":[{\"headers\":{\"a\":\"b\"}}],\"forwardURL\":\"https://f.test\"}]"),
	    "exactly one of");
	refused(R("[{\"match\":{\"path\":{\"regex\":\"(unclosed\"}},\"response\":{\"statusCode\":"
		  "200}}]"),
		"match.path.regex does not compile");
	refused(R("[{\"match\":{\"path\":{\"exact\":\"/"
		  "a\",\"regex\":\"b\"}},\"response\":{\"statusCode\":200}}]"),
		"needs exactly one of exact, startsWith, regex");
	refused(R("[{\"match\":{\"path\":{\"glob\":\"/a\"}},\"response\":{\"statusCode\":200}}]"),
		"unknown key 'glob'");
	refused(R("[{\"match\":{\"verb\":[\"GET\"]},\"response\":{\"statusCode\":200}}]"),
		"unknown key 'verb'");
	refused(R("[{\"match\":{\"method\":[\"G E T\"]},\"response\":{\"statusCode\":200}}]"),
		"is not an HTTP method");
	refused(R("[{\"transform\":[{\"headers\":{\"Host\":\"evil.test\"}}]}]"),
		"'Host' is managed by the proxy");
	refused(R("[{\"transform\":[{\"headers\":{\"Content-Length\":\"0\"}}]}]"),
		"managed by the proxy");
	refused(R("[{\"transform\":[{\"headers\":{\"Transfer-Encoding\":\"chunked\"}}]}]"),
		"managed by the proxy");
	refused(R("[{\"transform\":[{\"headers\":{\"X-Airlock-Sandbox\":\"x\"}}]}]"),
		"managed by the proxy");
	refused(R("[{\"transform\":[{\"headers\":{\"bad name\":\"v\"}}]}]"),
		"not a valid header name");
	refused(R("[{\"transform\":[{\"headers\":{\"A\":\"v\\r\\nX-Evil: 1\"}}]}]"),
		"control characters");
	refused(R("[{\"transform\":[{\"headers\":{\"A\":1}}]}]"), "must be a string");
	refused(R("[{\"transform\":[{}]}]"), "sets no header");
	refused(R("[{\"response\":{\"statusCode\":199}}]"),
		"statusCode must be an integer 200-599");
	refused(R("[{\"response\":{\"statusCode\":600}}]"), "200-599");
	refused(R("[{\"response\":{\"statusCode\":200,\"body\":\"x\"}}]"),
		"contentType must be provided when body is set");
	refused(R("[{\"response\":{\"statusCode\":204,\"body\":\"x\",\"contentType\":\"text/"
		  "plain\"}}]"),
		"body is not allowed on status codes 204, 205 and 304");
	refused(
	    R("[{\"response\":{\"statusCode\":200,\"headers\":{\"Connection\":\"keep-alive\"}}}]"),
	    "managed by the proxy");
	refused(
	    R("[{\"response\":{\"statusCode\":200,\"headers\":{\"X-A\":\"1\",\"x-a\":\"2\"}}}]"),
	    "duplicate header");
	refused(R("[{\"forwardURL\":\"http://plain.test/\"}]"), "must be an https:// URL");
	refused(R("[{\"forwardURL\":\"https://user@f.test/\"}]"), "no userinfo");
	refused(R("[{\"forwardURL\":\"https://f.test:0/\"}]"), "bad port");
	refused(R("[{\"forwardURL\":\"https://f.test/x?q=1\"}]"), "no userinfo, query");
	refused(
	    "{\"allow\":{\"api.x.test\":[],\"API.X.TEST\":[{\"response\":{\"statusCode\":200}}]}}",
	    "the same domain as an earlier entry");
}

static void read_back(void)
{
	struct net_policy *p =
	    P(R("[{\"match\":{\"method\":[\"post\"]},\"transform\":[{\"headers\":"
		"{\"Authorization\":\"Bearer s3cret-value\"}}]},"
		"{\"forwardURL\":\"https://fwd.test:8443/base/\"}]"));
	char *full, *red;
	json_t *j;
	struct net_policy *q = NULL;
	struct al_error *err = NULL;

	CHECK(p && net_policy_has_rules(p), "a record policy with rules parses");
	if (!p)
		return;
	full = json_dumps(j = net_policy_to_json(p), JSON_COMPACT);
	json_decref(j);
	red = json_dumps(j = net_policy_to_json_redacted(p), JSON_COMPACT);
	json_decref(j);
	CHECK(strstr(full, "s3cret-value") != NULL,
	      "the canonical form keeps the secret (for the gateway)");
	CHECK(strstr(red, "s3cret-value") == NULL && strstr(red, "<redacted>"),
	      "the redacted form hides it: %s", red);
	CHECK(strstr(red, "\"forwardURL\":\"https://fwd.test:8443/base/\""),
	      "forwardURL read back");
	CHECK(net_policy_parse_string(full, strlen(full), &q, &err) == 0 && q &&
		  net_policy_equal(p, q),
	      "parse(to_json(p)) == p with rules");
	net_policy_free(q);
	q = P("{\"allow\":{\"api.x.test\":[{\"forwardURL\":\"https://other.test\"}]}}");
	CHECK(q && !net_policy_equal(p, q), "different rules are not equal");
	net_policy_free(q);
	free(full);
	free(red);
	net_policy_free(p);
}

static const struct net_rule *M(const struct net_rules *r, const char *method, const char *path,
				const char *hname, const char *hval)
{
	struct net_http_header h = {{hname, hname ? strlen(hname) : 0},
				    {hval, hval ? strlen(hval) : 0}};

	return net_rules_match(r, &(struct net_rule_req){.method = method,
							 .method_len = strlen(method),
							 .path = path,
							 .path_len = strlen(path),
							 .headers = &h,
							 .n_headers = hname ? 1 : 0});
}

static void matching(void)
{
	struct net_policy *p = P(
	    "{\"allow\":{\"*.x.test\":[],\"api.x.test\":["
	    "{\"match\":{\"method\":[\"DELETE\"]},\"response\":{\"statusCode\":403}},"
	    "{\"match\":{\"path\":{\"exact\":\"/v1/exact\"}},\"response\":{\"statusCode\":201}},"
	    "{\"match\":{\"path\":{\"startsWith\":\"/v1/pre\"}},\"response\":{\"statusCode\":202}},"
	    "{\"match\":{\"path\":{\"regex\":\"^/v1/re/"
	    "[0-9]+$\"}},\"response\":{\"statusCode\":203}},"
	    "{\"match\":{\"queryString\":[{\"key\":{\"exact\":\"a "
	    "b\"},\"value\":{\"startsWith\":\"x/\"}}]},"
	    "\"response\":{\"statusCode\":206}},"
	    "{\"match\":{\"headers\":[{\"key\":{\"exact\":\"X-Mode\"},\"value\":{\"regex\":\"^fast$"
	    "\"}}]},"
	    "\"response\":{\"statusCode\":207}},"
	    "{\"match\":{\"path\":{\"startsWith\":\"/v1/\"}},\"response\":{\"statusCode\":208}},"
	    "{\"match\":{\"path\":{\"startsWith\":\"/v1/"
	    "exact\"}},\"response\":{\"statusCode\":209}}"
	    "],\"*.w.test\":[{\"response\":{\"statusCode\":299}}]}}");
	const struct net_rules *r;
	const struct net_rule *m;

	CHECK(p != NULL, "the matcher policy parses");
	if (!p)
		return;
	r = net_policy_rules_for(p, "api.x.test");
	CHECK(r && r->n == 8, "an exact entry's rules are found before the wildcard");
	CHECK(net_policy_rules_for(p, "other.x.test") == NULL, "a wildcard without rules: splice");
	CHECK(net_policy_rules_for(p, "a.b.w.test") &&
		  net_policy_rules_for(p, "a.b.w.test")->n == 1,
	      "a wildcard's rules cover any depth");
	CHECK(net_policy_rules_for(p, "w.test") == NULL, "not the apex");
	m = M(r, "DELETE", "/v1/exact", NULL, NULL);
	CHECK(m && m->status == 403, "method list; first match wins over a later path rule");
	m = M(r, "GET", "/v1/exact", NULL, NULL);
	CHECK(m && m->status == 201, "exact path");
	m = M(r, "GET", "/v1/exact?q=1", NULL, NULL);
	CHECK(m && m->status == 201, "exact path ignores the query string");
	m = M(r, "GET", "/v1/exactly", NULL, NULL);
	CHECK(m && m->status == 208, "exact is exact (falls to the next rule)");
	m = M(r, "GET", "/v1/prefix/more", NULL, NULL);
	CHECK(m && m->status == 202, "startsWith");
	m = M(r, "GET", "/v1/re/123", NULL, NULL);
	CHECK(m && m->status == 203, "regex");
	m = M(r, "GET", "/v1/re/12a", NULL, NULL);
	CHECK(m && m->status == 208, "regex anchored");
	m = M(r, "GET", "/q?z=1&a+b=x%2Fy", NULL, NULL);
	CHECK(m && m->status == 206, "query key/value, percent-decoded");
	m = M(r, "GET", "/q?a+b=y", NULL, NULL);
	CHECK(!m, "query value mismatch: no rule");
	m = M(r, "GET", "/h", "x-MODE", "fast");
	CHECK(m && m->status == 207, "header names match in any case");
	m = M(r, "GET", "/h", "x-mode", "faster");
	CHECK(!m, "header value regex");
	m = M(r, "get", "/nothing", NULL, NULL);
	CHECK(!m, "no rule matches: passed unchanged");
	net_policy_free(p);
}

static void redos(void)
{
	struct net_policy *p = P(R("[{\"match\":{\"path\":{\"regex\":\"^(a+)+$\"}},"
				   "\"response\":{\"statusCode\":200}}]"));
	char path[4096];

	CHECK(p != NULL, "a catastrophic regex compiles");
	if (!p)
		return;
	path[0] = '/';
	memset(path + 1, 'a', 3000);
	strcpy(path + 3001, "b");
	CHECK(M(net_policy_rules_for(p, "api.x.test"), "GET", path, NULL, NULL) == NULL,
	      "its backtracking hits the match limit and is a non-match, not a hang");
	net_policy_free(p);
}

/* The strings a response may not carry back: the value, its parts, Basic decoded. */
static bool has_token(char **t, size_t n, const char *want)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i], want))
			return true;
	return false;
}

static void secret_tokens(void)
{
	/* "robot:pw-0123456789" */
	struct net_policy *p = P(R("[{\"transform\":[{\"headers\":{"
				   "\"Authorization\":\"Bearer sk-0123456789\","
				   "\"X-Basic\":\"Basic cm9ib3Q6cHctMDEyMzQ1Njc4OQ==\","
				   "\"X-Short\":\"Bearer abc\",\"X-Tiny\":\"ab\","
				   "\"X-Key\":\"plainkey1\"}}]}]"));
	const struct net_rules *r = p ? net_policy_rules_for(p, "api.x.test") : NULL;
	char *t[NET_SECRET_MAX_TOKENS];
	size_t n = r ? net_rule_secret_tokens(&r->v[0], t, NET_SECRET_MAX_TOKENS) : 0;

	CHECK(has_token(t, n, "Bearer sk-0123456789") && has_token(t, n, "sk-0123456789"),
	      "the value with and without its scheme");
	CHECK(has_token(t, n, "robot:pw-0123456789") && has_token(t, n, "pw-0123456789") &&
		  has_token(t, n, "Basic cm9ib3Q6cHctMDEyMzQ1Njc4OQ==") &&
		  has_token(t, n, "cm9ib3Q6cHctMDEyMzQ1Njc4OQ=="),
	      "Basic: encoded, decoded user:pass and the password");
	CHECK(has_token(t, n, "Bearer abc") && !has_token(t, n, "abc"),
	      "a part under NET_SECRET_PART_MIN is not scanned, the whole value is");
	CHECK(!has_token(t, n, "ab") && has_token(t, n, "plainkey1"),
	      "a value under NET_SECRET_MIN is not scanned; one without a scheme is itself");
	CHECK(n == 8, "no duplicates, nothing else (%zu)", n);
	for (size_t i = 1; i < n; i++)
		CHECK(strlen(t[i - 1]) >= strlen(t[i]), "longest first");
	for (size_t i = 0; i < n; i++)
		free(t[i]);
	CHECK(net_rule_secret_tokens(NULL, t, NET_SECRET_MAX_TOKENS) == 0, "no rule, no secret");
	net_policy_free(p);
}

int main(void)
{
	validation();
	read_back();
	matching();
	redos();
	secret_tokens();
	return tap_done();
}
