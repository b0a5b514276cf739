/* SPDX-License-Identifier: MIT */
/*
 * Per-request egress rules (docs/network-policy.md, "Per-request rules"):
 * the rule arrays of the Vercel record form {"allow": {"api.x.test": [RULE...]}}.
 *
 *   RULE  = {"match"?: MATCH, and exactly one of
 *            "transform": [{"headers": {NAME: VALUE}}...]   set request headers
 *            "response": {statusCode, headers?, body?, contentType?}   answer here
 *            "forwardURL": "https://host[:port][/prefix]"}  send it there instead
 *   MATCH = {"method"?: [METHOD...], "path"?: M, "queryString"?: [KV...], "headers"?: [KV...]}
 *   M     = exactly one of {"exact": S} {"startsWith": S} {"regex": S}  (PCRE2, match-limited)
 *   KV    = {"key"?: M, "value"?: M}
 *
 * Every criterion given must hold (AND); a KV holds when at least one query
 * parameter (percent-decoded) or header field matches both its key and value
 * matchers. Header names are matched in lower case. Rules are tried in order;
 * the first whose match holds applies (a rule with no match always holds).
 */
#ifndef AL_NET_RULES_H
#define AL_NET_RULES_H

#include "common/error.h"
#include "net/http_req.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define NET_RULES_MAX 64	/* rules per domain */
#define NET_RULE_MAX_ITEMS 32	/* methods, KV matchers, headers per rule */
#define NET_RULE_MAX_BODY 65536 /* a synthetic response body */
#define NET_RULE_MAX_REGEX 1024 /* bytes of one pattern */

enum net_match_kind { NET_MATCH_NONE = 0, NET_MATCH_EXACT, NET_MATCH_PREFIX, NET_MATCH_REGEX };

struct net_matcher {
	enum net_match_kind kind;
	char *text;
	void *re; /* pcre2_code *, for NET_MATCH_REGEX */
};

struct net_kv_matcher {
	struct net_matcher key, value;
};

struct net_header_kv {
	char *name; /* as given (case kept for sending) */
	char *value;
};

enum net_rule_action { NET_RULE_TRANSFORM = 1, NET_RULE_RESPONSE, NET_RULE_FORWARD };

struct net_rule {
	/* match */
	char **methods; /* upper case */
	size_t n_methods;
	struct net_matcher path;
	struct net_kv_matcher *query;
	size_t n_query;
	struct net_kv_matcher *headers;
	size_t n_headers;
	/* action */
	enum net_rule_action action;
	struct net_header_kv *set; /* transform: headers to set, in order (later wins) */
	size_t n_set;
	int status; /* response */
	struct net_header_kv *resp_headers;
	size_t n_resp_headers;
	char *body; /* NULL: no body */
	size_t body_len;
	char *content_type;
	char *forward_url; /* forward: the URL as given */
	char *fwd_host;	   /* its host (a name or an IPv4 literal) */
	int fwd_port;
	char *fwd_prefix;   /* its path without a trailing '/' ("" for none) */
	json_t *match_json; /* the match object as given (for read-back), or NULL */
};

struct net_rules {
	struct net_rule *v;
	size_t n;
};

/* Parse one domain's rule array; what names it in messages ("allow['x']"). */
int net_rules_parse(json_t *arr, const char *what, struct net_rules *out, struct al_error **err);
void net_rules_clear(struct net_rules *r);
/* The array back; secret (transform) values as "<redacted>" when redact. */
json_t *net_rules_to_json(const struct net_rules *r, bool redact);
bool net_rules_equal(const struct net_rules *a, const struct net_rules *b);

/* A request, as the rules see it. */
struct net_rule_req {
	const char *method;
	size_t method_len;
	const char *path; /* the origin-form target: path and query */
	size_t path_len;
	const struct net_http_header *headers;
	size_t n_headers;
};

/* The first rule whose match holds, or NULL. */
const struct net_rule *net_rules_match(const struct net_rules *r, const struct net_rule_req *q);

/* "an object", "a string", "a number", ... for messages (policy.c uses it too). */
const char *net_json_type(const json_t *j);

/*
 * The byte strings a response must not carry back to the sandbox once a transform's
 * headers were injected: every value of NET_SECRET_MIN bytes or more, and its significant
 * parts of NET_SECRET_PART_MIN bytes or more -- the value without its auth scheme
 * ("Bearer X" gives "X"), and for Basic the decoded "user:pass" and the password alone.
 * Shorter strings are not scanned: they would redact ordinary text. Fills out[0..max)
 * with new strings (the caller frees each), longest first; returns the count.
 */
#define NET_SECRET_MIN 4
#define NET_SECRET_PART_MIN 8
#define NET_SECRET_MAX_TOKENS (NET_RULE_MAX_ITEMS * 4)
size_t net_rule_secret_tokens(const struct net_rule *r, char **out, size_t max);

/* Is name a header a transform or a response may not set? (hop-by-hop and framing) */
bool net_rule_header_forbidden(const char *name, bool response);

#endif
