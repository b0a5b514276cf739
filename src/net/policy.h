/* SPDX-License-Identifier: MIT */
/*
 * The network policy (docs/network-policy.md): the Vercel Sandbox shape,
 * parsed strictly, and the one decision function for names.
 *
 * Request forms accepted by net_policy_parse():
 *   "allow-all" | "deny-all" | {"mode": "allow-all" | "deny-all"}
 *   {"allow": [PATTERN...] | {PATTERN: []...},
 *    "subnets": {"allow": [CIDR...], "deny": [CIDR...]}}      (every key optional)
 * A PATTERN is a name or "*." + name. In the record form each domain maps to
 * an array of per-request rules (net/rules.h); a domain with at least one rule
 * is TLS-terminated by the gateway. The Vercel response form
 * ({"mode": "custom", allowedDomains, allowedCIDRs, deniedCIDRs}) is read by
 * net_policy_parse_response().
 *
 * A parsed policy is canonical: patterns canonicalized (lowercase, A-labels,
 * no trailing dot), CIDRs normalized, duplicates dropped (the first keeps its
 * place), so parse(to_json(p)) equals p.
 */
#ifndef AL_NET_POLICY_H
#define AL_NET_POLICY_H

#include "net/addr.h"
#include "net/name.h"
#include "net/rules.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Caps on one policy. */
#define NET_POLICY_MAX_DOMAINS 1000
#define NET_POLICY_MAX_CIDRS 1000 /* each of subnets.allow and subnets.deny */

enum net_policy_mode {
	NET_POLICY_DENY_ALL = 0, /* loopback only; the default */
	NET_POLICY_ALLOW_ALL,	 /* the public internet: every name but the always-forbidden */
	NET_POLICY_LIST,	 /* the names in domains[], the subnets rules */
};

/* One allowed domain pattern. */
struct net_pattern {
	char name[NET_NAME_MAX + 1]; /* canonical base name */
	bool wildcard;		     /* "*." + name: any depth below name, never name */
	struct net_rules rules;	     /* per-request rules (record form); n == 0: none */
};

struct net_policy {
	enum net_policy_mode mode;
	/* Set by the owner (daemon/gateway) on every change; never part of the JSON. */
	uint64_t generation;
	unsigned refs; /* net_policy_ref / net_policy_free */
	/* NET_POLICY_LIST only (empty otherwise). */
	struct net_pattern *domains;
	size_t n_domains;
	/* subnets.allow and subnets.deny (NET_POLICY_LIST only). */
	struct net_cidr *allow_cidrs;
	size_t n_allow_cidrs;
	struct net_cidr *deny_cidrs;
	size_t n_deny_cidrs;
};

/* A new policy of the given mode with no entries (generation 0). Never NULL. */
struct net_policy *net_policy_new(enum net_policy_mode mode);
/* One more reference (a terminated connection keeps its rules while the gateway's policy
 * is replaced); net_policy_free drops one, and the last one frees. */
struct net_policy *net_policy_ref(struct net_policy *p);
void net_policy_free(struct net_policy *p);
static inline void net_policy_freep(struct net_policy **p)
{
	net_policy_free(*p);
	*p = NULL;
}
#define _cleanup_net_policy_ __attribute__((cleanup(net_policy_freep)))

/*
 * Parse a request-form policy. On error returns -EINVAL with err naming the
 * problem and the offending value ("allow[2]: '*.co.uk' is a wildcard over
 * the public suffix 'co.uk'"). *out is set only on success; generation 0.
 */
int net_policy_parse(json_t *j, struct net_policy **out, struct al_error **err);
/* The same from len bytes of JSON text (duplicate keys refused). */
int net_policy_parse_string(const char *s, size_t len, struct net_policy **out,
			    struct al_error **err);
/* Parse the Vercel response form ({"mode": "allow-all"|"deny-all"|"custom", ...}). */
int net_policy_parse_response(json_t *j, struct net_policy **out, struct al_error **err);

/*
 * Add one request-form entry to a list policy (the CLI's --allow, --allow-cidr,
 * --deny-cidr). Same checks as the parser; duplicates are dropped.
 */
int net_policy_add_domain(struct net_policy *p, const char *pattern, size_t len,
			  struct al_error **err);
int net_policy_add_cidr(struct net_policy *p, bool deny, const char *cidr, size_t len,
			struct al_error **err);

/*
 * The canonical request form: {"mode": "allow-all"}, {"mode": "deny-all"}, or
 * {"allow": [...], "subnets": {"allow": [...], "deny": [...]}} with all keys.
 * A new reference; never NULL.
 */
json_t *net_policy_to_json(const struct net_policy *p);
/* The Vercel response form: {"mode": "allow-all"|"deny-all"} or {"mode": "custom",
 * "allowedDomains", "allowedCIDRs", "deniedCIDRs"}. A new reference; never NULL. */
json_t *net_policy_to_vercel(const struct net_policy *p);

/* The canonical request form with every transform header value shown as "<redacted>". */
json_t *net_policy_to_json_redacted(const struct net_policy *p);
/*
 * A copy of a request-form policy document (as a client sent it, unparsed) with every
 * transform header value replaced by "<redacted>": what an API may show. A new reference.
 */
json_t *net_policy_redact_json(json_t *policy);
/* Does any domain carry per-request rules (so that the gateway terminates TLS)? */
bool net_policy_has_rules(const struct net_policy *p);
/*
 * The rules of the pattern that admits canon_name: an exact entry first, else
 * the first wildcard entry that covers it. NULL when no pattern with rules
 * does (the name is then spliced, not terminated).
 */
const struct net_rules *net_policy_rules_for(const struct net_policy *p, const char *canon_name);

/* Same rules (mode, entries in order); the generation is not compared. */
bool net_policy_equal(const struct net_policy *a, const struct net_policy *b);

/*
 * THE decision on a name, for every path (DNS, CONNECT, absolute URI, Host,
 * SNI). canon_name must come from net_name_canon(); anything else is refused
 * ("bad_name"). Reasons: "forbidden_name" (localhost, *.localhost,
 * metadata.google.internal, ... in every mode), "deny_all", "allow_all",
 * "listed" (matched an entry), "doh_resolver" (a public DNS-over-HTTPS
 * resolver matched only through a wildcard; list it exactly to allow it),
 * "not_listed".
 */
enum net_verdict net_policy_decide_name(const struct net_policy *p, const char *canon_name,
					const char **reason);

/* Is the canonical name one of the built-in always-forbidden names? */
bool net_name_always_forbidden(const char *canon_name);

#endif
