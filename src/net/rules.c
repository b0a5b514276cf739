/* SPDX-License-Identifier: MIT */
/* Per-request egress rules: strict parsing, read-back, matching (rules.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "net/rules.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Paths in messages ("allow['x'][2].match.headers[0].key") may be cut short; that is fine. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define RE_MATCH_LIMIT 100000 /* backtracking steps for one match */
#define RE_DEPTH_LIMIT 1000

const char *net_json_type(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

/* Refuse keys of obj outside keys[]. */
static int only_keys(json_t *obj, const char *what, const char *const *keys, struct al_error **err)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v)
	{
		size_t i;
		for (i = 0; keys[i] && strcmp(keys[i], k); i++)
			;
		if (!keys[i])
			return al_error_msg(err, EINVAL, "%s: unknown key '%.64s'", what, k);
	}
	return 0;
}

static bool is_tchar(unsigned char c)
{
	return isalnum(c) || strchr("!#$%&'*+-.^_`|~", c);
}

static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!is_tchar((unsigned char)*s))
			return false;
	return true;
}

/* A header value we are willing to send: visible ASCII, SP, HTAB; no leading/trailing space. */
static bool is_field_value(const char *s, size_t n)
{
	if (n && (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c != '\t' && (c < 0x20 || c == 0x7f))
			return false;
	}
	return true;
}

bool net_rule_header_forbidden(const char *name, bool response)
{
	static const char *const req[] = {"host",
					  "content-length",
					  "transfer-encoding",
					  "connection",
					  "keep-alive",
					  "te",
					  "trailer",
					  "upgrade",
					  "proxy-connection",
					  "proxy-authorization",
					  "expect",
					  "http2-settings"};
	static const char *const resp[] = {"connection", "content-length", "transfer-encoding",
					   "keep-alive", "trailer",	   "upgrade"};
	const char *const *l = response ? resp : req;
	size_t n = response ? ARRAY_SIZE(resp) : ARRAY_SIZE(req);

	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(name, l[i]))
			return true;
	return !response && !strncasecmp(name, "x-airlock-", 10); /* ours, for forwardURL */
}

static void matcher_clear(struct net_matcher *m)
{
	free(m->text);
	if (m->re)
		pcre2_code_free(m->re);
	memset(m, 0, sizeof(*m));
}

static int matcher_compile(struct net_matcher *m, const char *what, struct al_error **err)
{
	int ec;
	PCRE2_SIZE off;
	char msg[160];

	if (m->kind != NET_MATCH_REGEX)
		return 0;
	m->re = pcre2_compile((PCRE2_SPTR)m->text, strlen(m->text), PCRE2_UTF, &ec, &off, NULL);
	if (!m->re) {
		pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof(msg));
		return al_error_msg(err, EINVAL, "%s.regex does not compile: %s (at offset %zu)",
				    what, msg, (size_t)off);
	}
	return 0;
}

static int matcher_parse(json_t *j, const char *what, struct net_matcher *m, struct al_error **err)
{
	static const char *const keys[] = {"exact", "startsWith", "regex", NULL};
	static const enum net_match_kind kinds[] = {NET_MATCH_EXACT, NET_MATCH_PREFIX,
						    NET_MATCH_REGEX};
	int found = 0;

	if (!json_is_object(j))
		return al_error_msg(err, EINVAL, "%s must be an object, not %s", what,
				    net_json_type(j));
	if (only_keys(j, what, keys, err) < 0)
		return -EINVAL;
	for (size_t i = 0; i < 3; i++) {
		json_t *v = json_object_get(j, keys[i]);
		if (!v)
			continue;
		if (!json_is_string(v))
			return al_error_msg(err, EINVAL, "%s.%s must be a string, not %s", what,
					    keys[i], net_json_type(v));
		if (strlen(json_string_value(v)) != json_string_length(v))
			return al_error_msg(err, EINVAL, "%s.%s contains a NUL byte", what,
					    keys[i]);
		if (kinds[i] == NET_MATCH_REGEX && json_string_length(v) > NET_RULE_MAX_REGEX)
			return al_error_msg(err, EINVAL, "%s.regex is longer than %d bytes", what,
					    NET_RULE_MAX_REGEX);
		m->kind = kinds[i];
		free(m->text); /* two kinds given: refused below, and the first not leaked */
		m->text = xstrdup(json_string_value(v));
		found++;
	}
	if (found != 1)
		return al_error_msg(err, EINVAL, "%s needs exactly one of exact, startsWith, regex",
				    what);
	return matcher_compile(m, what, err);
}

static int kvs_parse(json_t *arr, const char *what, bool lower_key, struct net_kv_matcher **out,
		     size_t *n, struct al_error **err)
{
	static const char *const keys[] = {"key", "value", NULL};
	char sub[96];
	json_t *e;
	size_t i;

	if (!json_is_array(arr))
		return al_error_msg(err, EINVAL, "%s must be an array, not %s", what,
				    net_json_type(arr));
	if (json_array_size(arr) > NET_RULE_MAX_ITEMS)
		return al_error_msg(err, EINVAL, "%s has more than %d entries", what,
				    NET_RULE_MAX_ITEMS);
	*out = xzalloc((json_array_size(arr) + 1) * sizeof(**out));
	json_array_foreach(arr, i, e)
	{
		struct net_kv_matcher *kv = &(*out)[i];
		json_t *k, *v;

		*n = i + 1;
		snprintf(sub, sizeof(sub), "%s[%zu]", what, i);
		if (!json_is_object(e))
			return al_error_msg(err, EINVAL, "%s must be an object, not %s", sub,
					    net_json_type(e));
		if (only_keys(e, sub, keys, err) < 0)
			return -EINVAL;
		k = json_object_get(e, "key");
		v = json_object_get(e, "value");
		if (!k && !v)
			return al_error_msg(err, EINVAL, "%s needs key or value", sub);
		snprintf(sub, sizeof(sub), "%s[%zu].key", what, i);
		if (k && matcher_parse(k, sub, &kv->key, err) < 0)
			return -EINVAL;
		if (k && lower_key && kv->key.kind != NET_MATCH_REGEX)
			for (char *c = kv->key.text; *c; c++)
				*c = (char)tolower((unsigned char)*c);
		snprintf(sub, sizeof(sub), "%s[%zu].value", what, i);
		if (v && matcher_parse(v, sub, &kv->value, err) < 0)
			return -EINVAL;
	}
	return 0;
}

static int match_parse(json_t *m, const char *what, struct net_rule *r, struct al_error **err)
{
	static const char *const keys[] = {"method", "path", "queryString", "headers", NULL};
	char sub[96];
	json_t *v;

	if (!json_is_object(m))
		return al_error_msg(err, EINVAL, "%s.match must be an object, not %s", what,
				    net_json_type(m));
	snprintf(sub, sizeof(sub), "%s.match", what);
	if (only_keys(m, sub, keys, err) < 0)
		return -EINVAL;
	if ((v = json_object_get(m, "method"))) {
		json_t *e;
		size_t i;

		if (!json_is_array(v) || json_array_size(v) > NET_RULE_MAX_ITEMS)
			return al_error_msg(err, EINVAL,
					    "%s.method must be an array of at most %d "
					    "method names",
					    sub, NET_RULE_MAX_ITEMS);
		r->methods = xzalloc((json_array_size(v) + 1) * sizeof(char *));
		json_array_foreach(v, i, e)
		{
			const char *s = json_string_value(e);

			if (!s || !is_token(s) || strlen(s) > NET_HTTP_MAX_METHOD)
				return al_error_msg(err, EINVAL,
						    "%s.method[%zu] is not an HTTP method", sub, i);
			r->methods[i] = xstrdup(s);
			for (char *c = r->methods[i]; *c; c++)
				*c = (char)toupper((unsigned char)*c);
			r->n_methods = i + 1;
		}
	}
	if ((v = json_object_get(m, "path"))) {
		char p[104];
		snprintf(p, sizeof(p), "%s.path", sub);
		if (matcher_parse(v, p, &r->path, err) < 0)
			return -EINVAL;
	}
	if ((v = json_object_get(m, "queryString"))) {
		char p[104];
		snprintf(p, sizeof(p), "%s.queryString", sub);
		if (kvs_parse(v, p, false, &r->query, &r->n_query, err) < 0)
			return -EINVAL;
	}
	if ((v = json_object_get(m, "headers"))) {
		char p[104];
		snprintf(p, sizeof(p), "%s.headers", sub);
		if (kvs_parse(v, p, true, &r->headers, &r->n_headers, err) < 0)
			return -EINVAL;
	}
	r->match_json = json_deep_copy(m);
	return 0;
}

/* {name: value} into kvs, with the header checks; response selects the forbidden list. */
static int headers_parse(json_t *obj, const char *what, bool response, struct net_header_kv **kvs,
			 size_t *n, struct al_error **err)
{
	const char *k;
	json_t *v;

	if (!json_is_object(obj))
		return al_error_msg(err, EINVAL, "%s must be an object of name: value, not %s",
				    what, net_json_type(obj));
	if (*n + json_object_size(obj) > NET_RULE_MAX_ITEMS)
		return al_error_msg(err, EINVAL, "%s: more than %d headers", what,
				    NET_RULE_MAX_ITEMS);
	*kvs = xrealloc(*kvs, (*n + json_object_size(obj) + 1) * sizeof(**kvs));
	json_object_foreach(obj, k, v)
	{
		if (!is_token(k) || strlen(k) > 128)
			return al_error_msg(err, EINVAL, "%s: '%.64s' is not a valid header name",
					    what, k);
		if (net_rule_header_forbidden(k, response))
			return al_error_msg(err, EINVAL,
					    "%s: '%s' is managed by the proxy and cannot "
					    "be set",
					    what, k);
		for (size_t i = 0; i < *n; i++)
			if (!strcasecmp((*kvs)[i].name, k))
				return al_error_msg(err, EINVAL, "%s: duplicate header '%s'", what,
						    k);
		if (!json_is_string(v))
			return al_error_msg(err, EINVAL, "%s['%s'] must be a string, not %s", what,
					    k, net_json_type(v));
		if (!is_field_value(json_string_value(v), json_string_length(v)) ||
		    json_string_length(v) > 8192)
			return al_error_msg(err, EINVAL,
					    "%s['%s']: the value has control characters, "
					    "surrounding spaces, or is over 8192 bytes",
					    what, k);
		(*kvs)[*n].name = xstrdup(k);
		(*kvs)[*n].value = xstrdup(json_string_value(v));
		(*n)++;
	}
	return 0;
}

static int transform_parse(json_t *t, const char *what, struct net_rule *r, struct al_error **err)
{
	json_t *e;
	size_t i;
	char sub[96];

	if (!json_is_array(t) || json_array_size(t) == 0)
		return al_error_msg(err, EINVAL, "%s.transform must be a non-empty array", what);
	json_array_foreach(t, i, e)
	{
		static const char *const keys[] = {"headers", NULL};
		json_t *h;

		snprintf(sub, sizeof(sub), "%s.transform[%zu]", what, i);
		if (!json_is_object(e))
			return al_error_msg(err, EINVAL, "%s must be an object, not %s", sub,
					    net_json_type(e));
		if (only_keys(e, sub, keys, err) < 0)
			return -EINVAL;
		if (!(h = json_object_get(e, "headers")))
			continue;
		snprintf(sub, sizeof(sub), "%s.transform[%zu].headers", what, i);
		/* a later transform entry may overwrite an earlier one's header */
		{
			struct net_header_kv *mine = NULL;
			size_t nm = 0;

			if (headers_parse(h, sub, false, &mine, &nm, err) < 0) {
				for (size_t j = 0; j < nm; j++) {
					free(mine[j].name);
					free(mine[j].value);
				}
				free(mine);
				return -EINVAL;
			}
			for (size_t j = 0; j < nm; j++) {
				size_t x;
				for (x = 0;
				     x < r->n_set && strcasecmp(r->set[x].name, mine[j].name); x++)
					;
				if (x < r->n_set) {
					free(r->set[x].value);
					r->set[x].value = mine[j].value;
					free(mine[j].name);
					continue;
				}
				r->set = xrealloc(r->set, (r->n_set + 1) * sizeof(*r->set));
				r->set[r->n_set++] = mine[j];
			}
			free(mine);
		}
	}
	if (r->n_set == 0)
		return al_error_msg(err, EINVAL, "%s.transform sets no header", what);
	return 0;
}

static int response_parse(json_t *o, const char *what, struct net_rule *r, struct al_error **err)
{
	static const char *const keys[] = {"statusCode", "headers", "body", "contentType", NULL};
	char sub[96];
	json_t *v;

	snprintf(sub, sizeof(sub), "%s.response", what);
	if (!json_is_object(o))
		return al_error_msg(err, EINVAL, "%s must be an object, not %s", sub,
				    net_json_type(o));
	if (only_keys(o, sub, keys, err) < 0)
		return -EINVAL;
	v = json_object_get(o, "statusCode");
	if (!json_is_integer(v) || json_integer_value(v) < 200 || json_integer_value(v) > 599)
		return al_error_msg(err, EINVAL, "%s.statusCode must be an integer 200-599", sub);
	r->status = (int)json_integer_value(v);
	if ((v = json_object_get(o, "body"))) {
		if (!json_is_string(v))
			return al_error_msg(err, EINVAL, "%s.body must be a string", sub);
		if (json_string_length(v) > NET_RULE_MAX_BODY)
			return al_error_msg(err, EINVAL, "%s.body is over %d bytes", sub,
					    NET_RULE_MAX_BODY);
		if (r->status == 204 || r->status == 205 || r->status == 304)
			return al_error_msg(
			    err, EINVAL, "%s: body is not allowed on status codes 204, 205 and 304",
			    sub);
		r->body_len = json_string_length(v);
		r->body = xzalloc(r->body_len + 1);
		memcpy(r->body, json_string_value(v), r->body_len + 1);
	}
	if ((v = json_object_get(o, "contentType"))) {
		if (!json_is_string(v) ||
		    !is_field_value(json_string_value(v), json_string_length(v)) ||
		    json_string_length(v) == 0 || json_string_length(v) > 256)
			return al_error_msg(err, EINVAL,
					    "%s.contentType must be a media type string", sub);
		r->content_type = xstrdup(json_string_value(v));
	}
	if (r->body && !r->content_type)
		return al_error_msg(err, EINVAL,
				    "%s: contentType must be provided when body is set", sub);
	if ((v = json_object_get(o, "headers"))) {
		char h[104];
		snprintf(h, sizeof(h), "%s.headers", sub);
		if (headers_parse(v, h, true, &r->resp_headers, &r->n_resp_headers, err) < 0)
			return -EINVAL;
		for (size_t i = 0; i < r->n_resp_headers; i++)
			if (r->content_type && !strcasecmp(r->resp_headers[i].name, "content-type"))
				return al_error_msg(err, EINVAL,
						    "%s: content-type given twice (contentType and "
						    "headers)",
						    sub);
	}
	return 0;
}

/* https://host[:port][/path]; no userinfo, query or fragment. */
static int forward_parse(json_t *v, const char *what, struct net_rule *r, struct al_error **err)
{
	const char *s = json_string_value(v), *h, *end, *colon;
	size_t hl;

	if (!s || strlen(s) != json_string_length(v) || json_string_length(v) > 2048)
		return al_error_msg(err, EINVAL, "%s.forwardURL must be a URL string", what);
	if (strncasecmp(s, "https://", 8))
		return al_error_msg(err, EINVAL, "%s.forwardURL must be an https:// URL", what);
	h = s + 8;
	end = h + strcspn(h, "/?#");
	if (*end == '?' || *end == '#' || strpbrk(h, "?#@\\ \t\r\n"))
		return al_error_msg(err, EINVAL,
				    "%s.forwardURL: no userinfo, query, fragment or spaces allowed",
				    what);
	colon = memchr(h, ':', (size_t)(end - h));
	hl = (size_t)((colon ? colon : end) - h);
	if (hl == 0 || hl > 253)
		return al_error_msg(err, EINVAL, "%s.forwardURL has no host", what);
	for (size_t i = 0; i < hl; i++)
		if (!isalnum((unsigned char)h[i]) && h[i] != '.' && h[i] != '-')
			return al_error_msg(err, EINVAL, "%s.forwardURL: bad host", what);
	r->fwd_port = 443;
	if (colon) {
		char *e;
		long p = strtol(colon + 1, &e, 10);
		if (e != end || p < 1 || p > 65535 || colon[1] == '0')
			return al_error_msg(err, EINVAL, "%s.forwardURL: bad port", what);
		r->fwd_port = (int)p;
	}
	r->forward_url = xstrdup(s);
	r->fwd_host = xasprintf("%.*s", (int)hl, h);
	for (char *c = r->fwd_host; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	r->fwd_prefix = xstrdup(end);
	if (*r->fwd_prefix && r->fwd_prefix[strlen(r->fwd_prefix) - 1] == '/')
		r->fwd_prefix[strlen(r->fwd_prefix) - 1] = '\0';
	return 0;
}

static void rule_clear(struct net_rule *r)
{
	for (size_t i = 0; i < r->n_methods; i++)
		free(r->methods[i]);
	free(r->methods);
	matcher_clear(&r->path);
	for (size_t i = 0; i < r->n_query; i++) {
		matcher_clear(&r->query[i].key);
		matcher_clear(&r->query[i].value);
	}
	free(r->query);
	for (size_t i = 0; i < r->n_headers; i++) {
		matcher_clear(&r->headers[i].key);
		matcher_clear(&r->headers[i].value);
	}
	free(r->headers);
	for (size_t i = 0; i < r->n_set; i++) {
		free(r->set[i].name);
		free(r->set[i].value);
	}
	free(r->set);
	for (size_t i = 0; i < r->n_resp_headers; i++) {
		free(r->resp_headers[i].name);
		free(r->resp_headers[i].value);
	}
	free(r->resp_headers);
	free(r->body);
	free(r->content_type);
	free(r->forward_url);
	free(r->fwd_host);
	free(r->fwd_prefix);
	if (r->match_json)
		json_decref(r->match_json);
	memset(r, 0, sizeof(*r));
}

void net_rules_clear(struct net_rules *r)
{
	for (size_t i = 0; i < r->n; i++)
		rule_clear(&r->v[i]);
	free(r->v);
	r->v = NULL;
	r->n = 0;
}

static int rule_parse(json_t *j, const char *what, struct net_rule *r, struct al_error **err)
{
	static const char *const keys[] = {"match", "transform", "response", "forwardURL", NULL};
	json_t *m, *t, *resp, *fwd;

	if (!json_is_object(j))
		return al_error_msg(err, EINVAL, "%s must be an object, not %s", what,
				    net_json_type(j));
	if (only_keys(j, what, keys, err) < 0)
		return -EINVAL;
	t = json_object_get(j, "transform");
	resp = json_object_get(j, "response");
	fwd = json_object_get(j, "forwardURL");
	if (!!t + !!resp + !!fwd != 1)
		return al_error_msg(
		    err, EINVAL, "%s needs exactly one of transform, response, forwardURL", what);
	if ((m = json_object_get(j, "match")) && match_parse(m, what, r, err) < 0)
		return -EINVAL;
	if (t) {
		r->action = NET_RULE_TRANSFORM;
		return transform_parse(t, what, r, err);
	}
	if (resp) {
		r->action = NET_RULE_RESPONSE;
		return response_parse(resp, what, r, err);
	}
	r->action = NET_RULE_FORWARD;
	return forward_parse(fwd, what, r, err);
}

int net_rules_parse(json_t *arr, const char *what, struct net_rules *out, struct al_error **err)
{
	struct net_rules r = {0};
	char sub[160];
	json_t *e;
	size_t i;

	if (!json_is_array(arr))
		return al_error_msg(err, EINVAL, "%s must be an array of rules, not %s", what,
				    net_json_type(arr));
	if (json_array_size(arr) > NET_RULES_MAX)
		return al_error_msg(err, EINVAL, "%s has %zu rules (at most %d)", what,
				    json_array_size(arr), NET_RULES_MAX);
	r.v = xzalloc((json_array_size(arr) + 1) * sizeof(*r.v));
	json_array_foreach(arr, i, e)
	{
		r.n = i + 1;
		snprintf(sub, sizeof(sub), "%s[%zu]", what, i);
		if (rule_parse(e, sub, &r.v[i], err) < 0) {
			net_rules_clear(&r);
			return -EINVAL;
		}
	}
	*out = r;
	return 0;
}

static json_t *rule_to_json(const struct net_rule *r, bool redact)
{
	json_t *o = json_object();

	if (r->match_json)
		json_object_set_new(o, "match", json_deep_copy(r->match_json));
	switch (r->action) {
	case NET_RULE_TRANSFORM: {
		json_t *h = json_object();
		for (size_t i = 0; i < r->n_set; i++)
			json_object_set_new(h, r->set[i].name,
					    json_string(redact ? "<redacted>" : r->set[i].value));
		json_object_set_new(o, "transform", json_pack("[{s:o}]", "headers", h));
		break;
	}
	case NET_RULE_RESPONSE: {
		json_t *resp = json_pack("{s:i}", "statusCode", r->status);
		if (r->n_resp_headers) {
			json_t *h = json_object();
			for (size_t i = 0; i < r->n_resp_headers; i++)
				json_object_set_new(h, r->resp_headers[i].name,
						    json_string(r->resp_headers[i].value));
			json_object_set_new(resp, "headers", h);
		}
		if (r->body)
			json_object_set_new(resp, "body", json_stringn(r->body, r->body_len));
		if (r->content_type)
			json_object_set_new(resp, "contentType", json_string(r->content_type));
		json_object_set_new(o, "response", resp);
		break;
	}
	case NET_RULE_FORWARD:
		json_object_set_new(o, "forwardURL", json_string(r->forward_url));
		break;
	}
	return o;
}

json_t *net_rules_to_json(const struct net_rules *r, bool redact)
{
	json_t *a = json_array();

	for (size_t i = 0; i < r->n; i++)
		json_array_append_new(a, rule_to_json(&r->v[i], redact));
	return a;
}

bool net_rules_equal(const struct net_rules *a, const struct net_rules *b)
{
	json_t *x = net_rules_to_json(a, false), *y = net_rules_to_json(b, false);
	bool eq = json_equal(x, y);

	json_decref(x);
	json_decref(y);
	return eq;
}

/* ---- matching ---- */

static bool matcher_test(const struct net_matcher *m, const char *s, size_t n)
{
	size_t tl;

	switch (m->kind) {
	case NET_MATCH_NONE:
		return true;
	case NET_MATCH_EXACT:
		return strlen(m->text) == n && !memcmp(m->text, s, n);
	case NET_MATCH_PREFIX:
		tl = strlen(m->text);
		return tl <= n && !memcmp(m->text, s, tl);
	case NET_MATCH_REGEX: {
		pcre2_match_data *md = pcre2_match_data_create_from_pattern(m->re, NULL);
		pcre2_match_context *mc = pcre2_match_context_create(NULL);
		int rc;

		if (!md || !mc) {
			pcre2_match_data_free(md);
			pcre2_match_context_free(mc);
			return false;
		}
		pcre2_set_match_limit(mc, RE_MATCH_LIMIT);
		pcre2_set_depth_limit(mc, RE_DEPTH_LIMIT);
		/* Invalid UTF-8 in the subject is a non-match, not an error path. */
		rc = pcre2_match(m->re, (PCRE2_SPTR)s, n, 0, 0, md, mc);
		pcre2_match_data_free(md);
		pcre2_match_context_free(mc);
		return rc >= 0; /* a hit limit (PCRE2_ERROR_MATCHLIMIT) is a non-match */
	}
	}
	return false;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decode s[0..n) into out (at least n bytes; '+' is a space); its length. */
static size_t pct_decode(const char *s, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			out[o++] = s[i] == '+' ? ' ' : s[i];
		}
	}
	return o;
}

static bool query_holds(const struct net_kv_matcher *kv, const char *q, size_t qn)
{
	_cleanup_free_ char *k = xzalloc(qn + 1), *v = xzalloc(qn + 1);
	size_t i = 0;

	while (i <= qn && qn) {
		size_t end = i, eq;
		size_t kl, vl;

		while (end < qn && q[end] != '&')
			end++;
		for (eq = i; eq < end && q[eq] != '='; eq++)
			;
		kl = pct_decode(q + i, eq - i, k);
		vl = eq < end ? pct_decode(q + eq + 1, end - eq - 1, v) : 0;
		if (end > i && matcher_test(&kv->key, k, kl) && matcher_test(&kv->value, v, vl))
			return true;
		i = end + 1;
	}
	return false;
}

static bool header_holds(const struct net_kv_matcher *kv, const struct net_rule_req *q)
{
	char name[256];

	for (size_t i = 0; i < q->n_headers; i++) {
		const struct net_http_header *h = &q->headers[i];
		size_t n = h->name.len < sizeof(name) ? h->name.len : sizeof(name) - 1;

		for (size_t j = 0; j < n; j++)
			name[j] = (char)tolower((unsigned char)h->name.p[j]);
		if (matcher_test(&kv->key, name, n) &&
		    matcher_test(&kv->value, h->value.p, h->value.len))
			return true;
	}
	return false;
}

static bool rule_holds(const struct net_rule *r, const struct net_rule_req *q)
{
	const char *qm = memchr(q->path, '?', q->path_len);
	size_t pl = qm ? (size_t)(qm - q->path) : q->path_len;

	if (r->n_methods) {
		size_t i;
		for (i = 0; i < r->n_methods; i++)
			if (strlen(r->methods[i]) == q->method_len &&
			    !memcmp(r->methods[i], q->method, q->method_len))
				break;
		if (i == r->n_methods)
			return false;
	}
	if (!matcher_test(&r->path, q->path, pl))
		return false;
	for (size_t i = 0; i < r->n_query; i++)
		if (!qm || !query_holds(&r->query[i], qm + 1, q->path_len - pl - 1))
			return false;
	for (size_t i = 0; i < r->n_headers; i++)
		if (!header_holds(&r->headers[i], q))
			return false;
	return true;
}

const struct net_rule *net_rules_match(const struct net_rules *r, const struct net_rule_req *q)
{
	for (size_t i = 0; r && i < r->n; i++)
		if (rule_holds(&r->v[i], q))
			return &r->v[i];
	return NULL;
}

/* ---- the secrets a transform injects ---- */

static int b64val(char c)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(tab, c) : NULL;

	return p ? (int)(p - tab) : -1;
}

/* Standard base64 (padding optional) into a new string; NULL when it is not base64. */
static char *b64_decode(const char *s, size_t n)
{
	char *out = xzalloc(n + 1);
	size_t o = 0;
	unsigned acc = 0;
	int bits = 0;

	while (n && s[n - 1] == '=')
		n--;
	for (size_t i = 0; i < n; i++) {
		int v = b64val(s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	return out;
}

static size_t add_token(char **out, size_t n, size_t max, const char *p, size_t len, size_t min)
{
	if (len < min || n >= max || memchr(p, '\0', len))
		return n;
	for (size_t i = 0; i < n; i++)
		if (strlen(out[i]) == len && !memcmp(out[i], p, len))
			return n;
	out[n] = xzalloc(len + 1);
	memcpy(out[n], p, len);
	return n + 1;
}

static int longer_first(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);

	return la < lb ? 1 : la > lb ? -1 : 0;
}

/* One value's tokens: itself, without its scheme, and Basic's credentials. */
static size_t value_tokens(const char *v, char **out, size_t n, size_t max)
{
	const char *sp = strchr(v, ' '), *rest;
	_cleanup_free_ char *dec = NULL;

	n = add_token(out, n, max, v, strlen(v), NET_SECRET_MIN);
	if (!sp || sp == v)
		return n;
	for (const char *c = v; c < sp; c++)
		if (!isalnum((unsigned char)*c) && !strchr("!#$%&'*+-.^_`|~", *c))
			return n; /* not "scheme SP credentials" */
	for (rest = sp; *rest == ' '; rest++)
		;
	n = add_token(out, n, max, rest, strlen(rest), NET_SECRET_PART_MIN);
	if ((size_t)(sp - v) == 5 && !strncasecmp(v, "basic", 5) &&
	    (dec = b64_decode(rest, strlen(rest)))) {
		const char *colon = strchr(dec, ':');

		n = add_token(out, n, max, dec, strlen(dec), NET_SECRET_PART_MIN);
		if (colon)
			n = add_token(out, n, max, colon + 1, strlen(colon + 1),
				      NET_SECRET_PART_MIN);
	}
	return n;
}

size_t net_rule_secret_tokens(const struct net_rule *r, char **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; r && r->action == NET_RULE_TRANSFORM && i < r->n_set; i++)
		n = value_tokens(r->set[i].value, out, n, max);
	qsort(out, n, sizeof(*out), longer_first);
	return n;
}
