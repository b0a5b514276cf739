/* SPDX-License-Identifier: MIT */
/*
 * The network policy: parsing (the Vercel request and response shapes),
 * validation, serialization and the one decision function on names. See
 * policy.h and docs/network-policy.md.
 *
 * Public suffixes are recognized with libpsl's built-in list (compiled into
 * the library, so no file is read) plus a short list of our own below for
 * multi-tenant suffixes that an older list may miss. Unicode names in a
 * policy are converted to A-labels with libidn2 (IDNA2008, UTS#46
 * non-transitional). Nothing here does I/O.
 */
#include "net/policy.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <idn2.h>
#include <libpsl.h>
#include <stdio.h>
#include <string.h>

/* Longest raw domain entry accepted before any processing. */
#define POLICY_ENTRY_MAX 1024

/* Checked in addition to libpsl: multi-tenant suffixes where "*.x" reaches every tenant. */
static const char *const policy_tenant_suffixes[] = {
    "com",
    "net",
    "org",
    "edu",
    "gov",
    "io",
    "co",
    "app",
    "dev",
    "me",
    "ai",
    "co.uk",
    "org.uk",
    "ac.uk",
    "gov.uk",
    "com.au",
    "co.jp",
    "co.nz",
    "com.br",
    "co.in",
    "github.io",
    "githubusercontent.com",
    "gitlab.io",
    "s3.amazonaws.com",
    "cloudfront.net",
    "elasticbeanstalk.com",
    "vercel.app",
    "now.sh",
    "netlify.app",
    "herokuapp.com",
    "workers.dev",
    "pages.dev",
    "r2.dev",
    "ngrok.io",
    "ngrok.app",
    "ngrok.dev",
    "ngrok-free.app",
    "ngrok-free.dev",
    "trycloudflare.com",
    "appspot.com",
    "web.app",
    "firebaseapp.com",
    "azurewebsites.net",
    "azurestaticapps.net",
    "blob.core.windows.net",
    "cloudapp.net",
    "fly.dev",
    "onrender.com",
    "glitch.me",
    "repl.co",
    "replit.dev",
    "replit.app",
    "deno.dev",
    "railway.app",
    "up.railway.app",
    "blogspot.com",
    "surge.sh",
    "loca.lt",
    "serveo.net",
    "pipedream.net",
    "webhook.site",
};

/* Never allowed, whatever the policy says (patterns, see net_name_match). */
static const char *const policy_forbidden_names[] = {
    "localhost", "*.localhost",	  "metadata.google.internal",
    "metadata",	 "instance-data", "instance-data.ec2.internal",
};

/* Public DNS-over-HTTPS resolvers: allowed only when listed exactly (docs/network-policy.md). */
static const char *const policy_doh_names[] = {
    "dns.google",
    "dns.google.com",
    "cloudflare-dns.com",
    "*.cloudflare-dns.com",
    "one.one.one.one",
    "dns.quad9.net",
    "dns9.quad9.net",
    "dns10.quad9.net",
    "dns11.quad9.net",
    "doh.opendns.com",
    "dns.nextdns.io",
    "*.dns.nextdns.io",
    "doh.cleanbrowsing.org",
    "dns.adguard.com",
    "dns.adguard-dns.com",
    "doh.dns.sb",
    "dns.mullvad.net",
    "doh.mullvad.net",
};

static bool policy_name_in(const char *const *list, size_t n, const char *canon_name)
{
	for (size_t i = 0; i < n; i++)
		if (net_name_match(canon_name, list[i]))
			return true;
	return false;
}

bool net_name_always_forbidden(const char *canon_name)
{
	return policy_name_in(policy_forbidden_names, ARRAY_SIZE(policy_forbidden_names),
			      canon_name);
}

static bool policy_is_public_suffix(const char *canon_base)
{
	const psl_ctx_t *psl = psl_builtin();

	for (size_t i = 0; i < ARRAY_SIZE(policy_tenant_suffixes); i++)
		if (!strcmp(canon_base, policy_tenant_suffixes[i]))
			return true;
	return psl && psl_is_public_suffix2(psl, canon_base, PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE);
}

struct net_policy *net_policy_new(enum net_policy_mode mode)
{
	struct net_policy *p = xzalloc(sizeof(*p));

	p->mode = mode;
	p->refs = 1;
	return p;
}

struct net_policy *net_policy_ref(struct net_policy *p)
{
	__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
	return p;
}

void net_policy_free(struct net_policy *p)
{
	if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	for (size_t i = 0; i < p->n_domains; i++)
		net_rules_clear(&p->domains[i].rules);
	free(p->domains);
	free(p->allow_cidrs);
	free(p->deny_cidrs);
	free(p);
}

/* A printable rendering of an untrusted entry for messages (about 80 bytes at most). */
static void policy_show(const char *s, size_t len, char out[100])
{
	size_t o = 0, i;

	for (i = 0; i < len && o < 80; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, 100 - o, "\\x%02x", c);
	}
	strcpy(out + o, i < len ? "..." : "");
}

/* Convert a Unicode name (UTF-8, len bytes, no NUL) to its A-label form in out. */
static int policy_idna(const char *s, size_t len, char out[POLICY_ENTRY_MAX + 1],
		       struct al_error **err)
{
	char in[POLICY_ENTRY_MAX + 1], shown[100];
	_cleanup_free_ char *ascii = NULL;
	int rc;

	memcpy(in, s, len);
	in[len] = '\0';
	rc = idn2_to_ascii_8z(in, &ascii, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
	if (rc != IDN2_OK) {
		policy_show(s, len, shown);
		return al_error_msg(err, EINVAL, "'%s' is not a valid internationalized name (%s)",
				    shown, idn2_strerror(rc));
	}
	if (strlen(ascii) > POLICY_ENTRY_MAX)
		return al_error_msg(err, EINVAL, "name is too long after IDNA conversion");
	strcpy(out, ascii);
	return 0;
}

static bool policy_has_high_byte(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] >= 0x80)
			return true;
	return false;
}

/* Explain why a pattern's name part did not canonicalize. */
static int policy_bad_name(const char *raw, size_t rawlen, const char *name, size_t len,
			   struct al_error **err)
{
	struct net_addr a;
	char shown[100];

	policy_show(raw, rawlen, shown);
	if (net_addr_parse(name, len, &a, NULL) == 0)
		return al_error_msg(err, EINVAL,
				    "'%s' is an IP address, not a domain; put it in subnets.allow "
				    "as a CIDR",
				    shown);
	return al_error_wrap(err, "'%s' is not a valid domain", shown);
}

/* Wildcard checks on the canonical base of "*.base". */
static int policy_check_wildcard(const char *shown, const char *base, struct al_error **err)
{
	if (net_name_labels(base) < 2)
		return al_error_msg(err, EINVAL,
				    "'%s' is a wildcard over the top-level domain '%s'; name a "
				    "registrable domain ('*.example.%s')",
				    shown, base, base);
	if (policy_is_public_suffix(base))
		return al_error_msg(err, EINVAL,
				    "'%s' is a wildcard over the public suffix '%s', which would "
				    "allow every tenant under it; list the names you need",
				    shown, base);
	return 0;
}

/* Parse one domain pattern into pat (see policy.h for the rules). */
static int policy_pattern(const char *raw, size_t rawlen, struct net_pattern *pat,
			  struct al_error **err)
{
	char buf[POLICY_ENTRY_MAX + 1], shown[100];
	const char *s = raw;
	size_t len = rawlen;
	bool wild = false;
	int r;

	memset(pat, 0, sizeof(*pat));
	policy_show(raw, rawlen, shown);
	if (len == 0)
		return al_error_msg(err, EINVAL, "empty domain");
	if (len > POLICY_ENTRY_MAX)
		return al_error_msg(err, EINVAL, "domain '%s' is too long", shown);
	if (memchr(s, '\0', len))
		return al_error_msg(err, EINVAL, "domain '%s' contains a NUL byte", shown);
	if (len == 1 && s[0] == '*')
		return al_error_msg(
		    err, EINVAL,
		    "'*' alone is not a domain pattern; use {\"mode\": \"allow-all\"} "
		    "(or \"allow-all\") to allow every domain");
	if (len >= 2 && s[0] == '*' && s[1] == '.') {
		wild = true;
		s += 2;
		len -= 2;
	}
	if (memchr(s, '*', len))
		return al_error_msg(
		    err, EINVAL,
		    "'%s': a wildcard must be the whole first label ('*.example.com'); "
		    "partial ('api*.x') and mid-name ('www.*.com') wildcards are not "
		    "supported",
		    shown);
	if (policy_has_high_byte(s, len)) {
		r = policy_idna(s, len, buf, err);
		if (r < 0)
			return r;
		s = buf;
		len = strlen(buf);
	}
	if (net_name_canon(s, len, pat->name, err) < 0)
		return policy_bad_name(raw, rawlen, s, len, err);
	pat->wildcard = wild;
	if (wild ? !strcmp(pat->name, "localhost") || net_name_under(pat->name, "localhost")
		 : net_name_always_forbidden(pat->name))
		return al_error_msg(err, EINVAL,
				    "'%s' is always forbidden (loopback and cloud metadata names)",
				    shown);
	if (wild)
		return policy_check_wildcard(shown, pat->name, err);
	return 0;
}

static bool policy_pattern_equal(const struct net_pattern *a, const struct net_pattern *b)
{
	return a->wildcard == b->wildcard && !strcmp(a->name, b->name);
}

int net_policy_add_domain(struct net_policy *p, const char *pattern, size_t len,
			  struct al_error **err)
{
	struct net_pattern pat;
	int r;

	if (p->mode != NET_POLICY_LIST)
		return al_error_msg(err, EINVAL, "domains can only be added to a list policy");
	memset(&pat, 0, sizeof(pat));
	r = policy_pattern(pattern, len, &pat, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->n_domains; i++)
		if (policy_pattern_equal(&p->domains[i], &pat))
			return 0;
	if (p->n_domains >= NET_POLICY_MAX_DOMAINS)
		return al_error_msg(err, EINVAL, "too many domains (at most %d)",
				    NET_POLICY_MAX_DOMAINS);
	p->domains = xrealloc(p->domains, (p->n_domains + 1) * sizeof(*p->domains));
	p->domains[p->n_domains++] = pat;
	return 0;
}

int net_policy_add_cidr(struct net_policy *p, bool deny, const char *cidr, size_t len,
			struct al_error **err)
{
	struct net_cidr **list = deny ? &p->deny_cidrs : &p->allow_cidrs;
	size_t *n = deny ? &p->n_deny_cidrs : &p->n_allow_cidrs;
	struct net_cidr c;
	int r;

	if (p->mode != NET_POLICY_LIST)
		return al_error_msg(err, EINVAL, "CIDRs can only be added to a list policy");
	r = net_cidr_parse(cidr, len, &c, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < *n; i++)
		if (net_cidr_equal(&(*list)[i], &c))
			return 0;
	if (*n >= NET_POLICY_MAX_CIDRS)
		return al_error_msg(err, EINVAL, "too many CIDRs in subnets.%s (at most %d)",
				    deny ? "deny" : "allow", NET_POLICY_MAX_CIDRS);
	*list = xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = c;
	return 0;
}

enum policy_list { POLICY_DOMAINS, POLICY_ALLOW_CIDRS, POLICY_DENY_CIDRS };

static int policy_add(struct net_policy *p, enum policy_list kind, const char *s, size_t len,
		      struct al_error **err)
{
	if (kind == POLICY_DOMAINS)
		return net_policy_add_domain(p, s, len, err);
	return net_policy_add_cidr(p, kind == POLICY_DENY_CIDRS, s, len, err);
}

/* An array of strings into one of p's lists; what names it in messages. */
static int policy_strings(struct net_policy *p, json_t *arr, enum policy_list kind,
			  const char *what, struct al_error **err)
{
	size_t max = kind == POLICY_DOMAINS ? NET_POLICY_MAX_DOMAINS : NET_POLICY_MAX_CIDRS;
	json_t *v;
	size_t i;

	if (!json_is_array(arr))
		return al_error_msg(err, EINVAL, "%s must be an array of strings, not %s", what,
				    net_json_type(arr));
	if (json_array_size(arr) > max)
		return al_error_msg(err, EINVAL, "%s has %zu entries (at most %zu)", what,
				    json_array_size(arr), max);
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v))
			return al_error_msg(err, EINVAL, "%s[%zu] must be a string, not %s", what,
					    i, net_json_type(v));
		if (policy_add(p, kind, json_string_value(v), json_string_length(v), err) < 0)
			return al_error_wrap(err, "%s[%zu]", what, i);
	}
	return 0;
}

/* The record form {"domain": [rules]}. */
static int policy_allow_record(struct net_policy *p, json_t *obj, struct al_error **err)
{
	const char *key;
	char shown[100], what[128];
	json_t *rules;

	if (json_object_size(obj) > NET_POLICY_MAX_DOMAINS)
		return al_error_msg(err, EINVAL, "allow has %zu entries (at most %d)",
				    json_object_size(obj), NET_POLICY_MAX_DOMAINS);
	json_object_foreach(obj, key, rules)
	{
		struct net_rules parsed = {0};
		struct net_pattern *d;
		size_t before = p->n_domains;

		policy_show(key, strlen(key), shown);
		snprintf(what, sizeof(what), "allow['%s']", shown);
		if (net_policy_add_domain(p, key, strlen(key), err) < 0)
			return al_error_wrap(err, "allow");
		if (net_rules_parse(rules, what, &parsed, err) < 0)
			return -EINVAL;
		if (p->n_domains == before) { /* the same pattern spelled twice */
			bool has_rules = parsed.n > 0;

			net_rules_clear(&parsed); /* an empty list still has its array */
			if (!has_rules)
				continue;		 /* no rules: one entry */
			return al_error_msg(err, EINVAL, /* which rules would apply? */
					    "%s: the same domain as an earlier entry (names are "
					    "compared after canonicalization)",
					    what);
		}
		d = &p->domains[p->n_domains - 1];
		d->rules = parsed;
	}
	return 0;
}

/* Refuse any key of obj not in keys (NULL-terminated). */
static int policy_keys(json_t *obj, const char *what, const char *const *keys, const char *hint,
		       struct al_error **err)
{
	const char *key;
	char shown[100];
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		size_t i;

		for (i = 0; keys[i] && strcmp(keys[i], key) != 0; i++)
			;
		if (keys[i])
			continue;
		policy_show(key, strlen(key), shown);
		return al_error_msg(err, EINVAL, "%s: unknown key '%s' (expected %s)", what, shown,
				    hint);
	}
	return 0;
}

static int policy_mode_of(json_t *v, const char *what, bool custom_ok, enum net_policy_mode *mode,
			  struct al_error **err)
{
	const char *s = json_string_value(v);
	char shown[100];

	if (!json_is_string(v))
		return al_error_msg(err, EINVAL, "%s must be a string, not %s", what,
				    net_json_type(v));
	if (!strcmp(s, "allow-all"))
		*mode = NET_POLICY_ALLOW_ALL;
	else if (!strcmp(s, "deny-all"))
		*mode = NET_POLICY_DENY_ALL;
	else if (custom_ok && !strcmp(s, "custom"))
		*mode = NET_POLICY_LIST;
	else {
		policy_show(s, json_string_length(v), shown);
		return al_error_msg(err, EINVAL, "%s '%s' is not \"allow-all\" or \"deny-all\"%s",
				    what, shown, custom_ok ? " or \"custom\"" : "");
	}
	return 0;
}

static int policy_subnets(struct net_policy *p, json_t *subnets, struct al_error **err)
{
	static const char *const keys[] = {"allow", "deny", NULL};
	json_t *v;

	if (!json_is_object(subnets))
		return al_error_msg(err, EINVAL, "subnets must be an object, not %s",
				    net_json_type(subnets));
	if (policy_keys(subnets, "subnets", keys, "allow, deny", err) < 0)
		return -EINVAL;
	v = json_object_get(subnets, "allow");
	if (v && policy_strings(p, v, POLICY_ALLOW_CIDRS, "subnets.allow", err) < 0)
		return -EINVAL;
	v = json_object_get(subnets, "deny");
	if (v && policy_strings(p, v, POLICY_DENY_CIDRS, "subnets.deny", err) < 0)
		return -EINVAL;
	return 0;
}

static int policy_parse_object(json_t *j, struct net_policy **out, struct al_error **err)
{
	static const char *const keys[] = {"allow", "subnets", NULL};
	_cleanup_net_policy_ struct net_policy *p = net_policy_new(NET_POLICY_LIST);
	json_t *allow, *subnets;

	if (policy_keys(j, "policy", keys, "allow, subnets, or mode alone", err) < 0)
		return -EINVAL;
	allow = json_object_get(j, "allow");
	if (allow && json_is_object(allow)) {
		if (policy_allow_record(p, allow, err) < 0)
			return -EINVAL;
	} else if (allow && !json_is_array(allow)) {
		return al_error_msg(err, EINVAL,
				    "allow must be an array of domains or an object of domain: "
				    "rules, not %s",
				    net_json_type(allow));
	} else if (allow && policy_strings(p, allow, POLICY_DOMAINS, "allow", err) < 0) {
		return -EINVAL;
	}
	subnets = json_object_get(j, "subnets");
	if (subnets && policy_subnets(p, subnets, err) < 0)
		return -EINVAL;
	*out = TAKE_PTR(p);
	return 0;
}

int net_policy_parse(json_t *j, struct net_policy **out, struct al_error **err)
{
	enum net_policy_mode mode;
	json_t *m;

	if (!j)
		return al_error_msg(err, EINVAL, "no policy");
	if (json_is_string(j)) {
		if (policy_mode_of(j, "policy", false, &mode, err) < 0)
			return -EINVAL;
		*out = net_policy_new(mode);
		return 0;
	}
	if (!json_is_object(j))
		return al_error_msg(
		    err, EINVAL, "policy must be \"allow-all\", \"deny-all\" or an object, not %s",
		    net_json_type(j));
	m = json_object_get(j, "mode");
	if (!m)
		return policy_parse_object(j, out, err);
	if (json_object_size(j) != 1)
		return al_error_msg(err, EINVAL,
				    "policy: \"mode\" cannot be combined with other keys (use "
				    "allow and subnets without mode for a custom policy)");
	if (policy_mode_of(m, "mode", false, &mode, err) < 0)
		return -EINVAL;
	*out = net_policy_new(mode);
	return 0;
}

int net_policy_parse_string(const char *s, size_t len, struct net_policy **out,
			    struct al_error **err)
{
	json_error_t jerr;
	json_t *j = json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	int r;

	if (!j)
		return al_error_msg(err, EINVAL,
				    "policy is not valid JSON: %s (line %d, column %d)", jerr.text,
				    jerr.line, jerr.column);
	r = net_policy_parse(j, out, err);
	json_decref(j);
	return r;
}

static int policy_response_empty(json_t *j, const char *key, struct al_error **err)
{
	json_t *v = json_object_get(j, key);

	if (v && (!json_is_array(v) || json_array_size(v) > 0))
		return al_error_msg(err, EINVAL, "%s are not supported yet", key);
	return 0;
}

int net_policy_parse_response(json_t *j, struct net_policy **out, struct al_error **err)
{
	static const char *const keys[] = {"mode",	  "allowedDomains", "allowedCIDRs",
					   "deniedCIDRs", "injectionRules", "forwardRules",
					   NULL};
	_cleanup_net_policy_ struct net_policy *p = NULL;
	enum net_policy_mode mode;
	json_t *v;

	if (!json_is_object(j))
		return al_error_msg(err, EINVAL, "response policy must be an object");
	if (policy_mode_of(json_object_get(j, "mode") ?: json_null(), "mode", true, &mode, err) < 0)
		return -EINVAL;
	p = net_policy_new(mode);
	if (mode != NET_POLICY_LIST) {
		if (json_object_size(j) != 1)
			return al_error_msg(err, EINVAL, "policy: mode '%s' takes no other keys",
					    json_string_value(json_object_get(j, "mode")));
		*out = TAKE_PTR(p);
		return 0;
	}
	if (policy_keys(j, "policy", keys, "mode, allowedDomains, allowedCIDRs, deniedCIDRs", err) <
		0 ||
	    policy_response_empty(j, "injectionRules", err) < 0 ||
	    policy_response_empty(j, "forwardRules", err) < 0)
		return -EINVAL;
	v = json_object_get(j, "allowedDomains");
	if (v && policy_strings(p, v, POLICY_DOMAINS, "allowedDomains", err) < 0)
		return -EINVAL;
	v = json_object_get(j, "allowedCIDRs");
	if (v && policy_strings(p, v, POLICY_ALLOW_CIDRS, "allowedCIDRs", err) < 0)
		return -EINVAL;
	v = json_object_get(j, "deniedCIDRs");
	if (v && policy_strings(p, v, POLICY_DENY_CIDRS, "deniedCIDRs", err) < 0)
		return -EINVAL;
	*out = TAKE_PTR(p);
	return 0;
}

static json_t *policy_oom(json_t *j)
{
	if (!j)
		al_oom();
	return j;
}

static void policy_set(json_t *obj, const char *key, json_t *v)
{
	if (json_object_set_new(obj, key, policy_oom(v)) < 0)
		al_oom();
}

static void policy_append(json_t *arr, json_t *v)
{
	if (json_array_append_new(arr, policy_oom(v)) < 0)
		al_oom();
}

static json_t *policy_domains_json(const struct net_policy *p)
{
	json_t *arr = policy_oom(json_array());

	for (size_t i = 0; i < p->n_domains; i++) {
		const struct net_pattern *d = &p->domains[i];

		policy_append(arr, json_sprintf("%s%s", d->wildcard ? "*." : "", d->name));
	}
	return arr;
}

static json_t *policy_cidrs_json(const struct net_cidr *list, size_t n)
{
	json_t *arr = policy_oom(json_array());
	char buf[NET_ADDR_STRLEN];

	for (size_t i = 0; i < n; i++) {
		net_cidr_format(&list[i], buf);
		policy_append(arr, json_string(buf));
	}
	return arr;
}

static json_t *policy_mode_json(const struct net_policy *p)
{
	json_t *j = policy_oom(json_object());

	policy_set(j, "mode",
		   json_string(p->mode == NET_POLICY_ALLOW_ALL ? "allow-all" : "deny-all"));
	return j;
}

bool net_policy_has_rules(const struct net_policy *p)
{
	for (size_t i = 0; p && i < p->n_domains; i++)
		if (p->domains[i].rules.n)
			return true;
	return false;
}

/* {"pattern": [rules]} for a policy with rules. */
static json_t *policy_record_json(const struct net_policy *p, bool redact)
{
	json_t *o = policy_oom(json_object());

	for (size_t i = 0; i < p->n_domains; i++) {
		const struct net_pattern *d = &p->domains[i];
		char key[NET_NAME_MAX + 3];

		snprintf(key, sizeof(key), "%s%s", d->wildcard ? "*." : "", d->name);
		policy_set(o, key, net_rules_to_json(&d->rules, redact));
	}
	return o;
}

static json_t *policy_to_json(const struct net_policy *p, bool redact)
{
	json_t *j, *subnets;

	if (p->mode != NET_POLICY_LIST)
		return policy_mode_json(p);
	j = policy_oom(json_object());
	subnets = policy_oom(json_object());
	policy_set(j, "allow",
		   net_policy_has_rules(p) ? policy_record_json(p, redact)
					   : policy_domains_json(p));
	policy_set(subnets, "allow", policy_cidrs_json(p->allow_cidrs, p->n_allow_cidrs));
	policy_set(subnets, "deny", policy_cidrs_json(p->deny_cidrs, p->n_deny_cidrs));
	policy_set(j, "subnets", subnets);
	return j;
}

json_t *net_policy_to_json(const struct net_policy *p)
{
	return policy_to_json(p, false);
}

json_t *net_policy_to_json_redacted(const struct net_policy *p)
{
	return policy_to_json(p, true);
}

json_t *net_policy_redact_json(json_t *policy)
{
	json_t *c = policy_oom(json_deep_copy(policy)), *allow = json_object_get(c, "allow"),
	       *rules;
	const char *domain;

	if (!json_is_object(allow))
		return c;
	json_object_foreach(allow, domain, rules)
	{
		json_t *rule;
		size_t i;

		json_array_foreach(rules, i, rule)
		{
			json_t *t = json_object_get(rule, "transform"), *e;
			size_t j;

			json_array_foreach(t, j, e)
			{
				json_t *h = json_object_get(e, "headers"), *v;
				const char *name;

				if (!json_is_object(h))
					continue;
				json_object_foreach(h, name, v)
				    json_object_set_new(h, name, json_string("<redacted>"));
			}
		}
	}
	return c;
}

const struct net_rules *net_policy_rules_for(const struct net_policy *p, const char *canon_name)
{
	const struct net_pattern *wild = NULL;

	if (!p || p->mode != NET_POLICY_LIST)
		return NULL;
	for (size_t i = 0; i < p->n_domains; i++) {
		const struct net_pattern *d = &p->domains[i];

		if (!d->wildcard && !strcmp(d->name, canon_name))
			return d->rules.n ? &d->rules : NULL;
		if (d->wildcard && !wild && net_name_under(canon_name, d->name))
			wild = d;
	}
	return wild && wild->rules.n ? &wild->rules : NULL;
}

json_t *net_policy_to_vercel(const struct net_policy *p)
{
	json_t *j;

	if (p->mode != NET_POLICY_LIST)
		return policy_mode_json(p);
	j = policy_oom(json_object());
	policy_set(j, "mode", json_string("custom"));
	policy_set(j, "allowedDomains", policy_domains_json(p));
	policy_set(j, "allowedCIDRs", policy_cidrs_json(p->allow_cidrs, p->n_allow_cidrs));
	policy_set(j, "deniedCIDRs", policy_cidrs_json(p->deny_cidrs, p->n_deny_cidrs));
	return j;
}

static bool policy_cidrs_equal(const struct net_cidr *a, const struct net_cidr *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!net_cidr_equal(&a[i], &b[i]))
			return false;
	return true;
}

bool net_policy_equal(const struct net_policy *a, const struct net_policy *b)
{
	if (a->mode != b->mode || a->n_domains != b->n_domains ||
	    a->n_allow_cidrs != b->n_allow_cidrs || a->n_deny_cidrs != b->n_deny_cidrs)
		return false;
	for (size_t i = 0; i < a->n_domains; i++)
		if (!policy_pattern_equal(&a->domains[i], &b->domains[i]) ||
		    !net_rules_equal(&a->domains[i].rules, &b->domains[i].rules))
			return false;
	return policy_cidrs_equal(a->allow_cidrs, b->allow_cidrs, a->n_allow_cidrs) &&
	       policy_cidrs_equal(a->deny_cidrs, b->deny_cidrs, a->n_deny_cidrs);
}

static enum net_verdict policy_verdict(enum net_verdict v, const char *why, const char **reason)
{
	if (reason)
		*reason = why;
	return v;
}

/* Is s exactly what net_name_canon() makes of it? */
static bool policy_is_canonical(const char *s)
{
	char canon[NET_NAME_MAX + 1];
	size_t len;

	if (!s)
		return false;
	len = strnlen(s, NET_NAME_MAX + 1);
	if (len > NET_NAME_MAX || net_name_canon(s, len, canon, NULL) < 0)
		return false;
	return strcmp(canon, s) == 0;
}

enum net_verdict net_policy_decide_name(const struct net_policy *p, const char *canon_name,
					const char **reason)
{
	bool wild = false;

	if (!policy_is_canonical(canon_name))
		return policy_verdict(NET_DENY, "bad_name", reason);
	if (net_name_always_forbidden(canon_name))
		return policy_verdict(NET_DENY, "forbidden_name", reason);
	if (!p || p->mode == NET_POLICY_DENY_ALL)
		return policy_verdict(NET_DENY, "deny_all", reason);
	if (p->mode == NET_POLICY_ALLOW_ALL)
		return policy_verdict(NET_ALLOW, "allow_all", reason);
	for (size_t i = 0; i < p->n_domains; i++) {
		const struct net_pattern *d = &p->domains[i];

		if (!d->wildcard && !strcmp(d->name, canon_name))
			return policy_verdict(NET_ALLOW, "listed", reason);
		if (d->wildcard && !wild)
			wild = net_name_under(canon_name, d->name);
	}
	if (!wild)
		return policy_verdict(NET_DENY, "not_listed", reason);
	if (policy_name_in(policy_doh_names, ARRAY_SIZE(policy_doh_names), canon_name))
		return policy_verdict(NET_DENY, "doh_resolver", reason);
	return policy_verdict(NET_ALLOW, "listed", reason);
}
