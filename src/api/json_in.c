/* SPDX-License-Identifier: MIT */
/*
 * Strict JSON input: a body is one JSON object in valid UTF-8 (no NUL, no
 * duplicate keys, nesting bounded by jansson's parser depth limit of 2048),
 * unknown fields are refused by name, every field has one type.
 * Every failure is EINVAL with a message naming the field.
 */
#include "api/api_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int api_bad(struct al_error **err, const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		al_oom();
	va_end(ap);
	r = al_error_from(err, EINVAL, msg);
	free(msg);
	return r;
}

bool api_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		unsigned char c = p[i];
		size_t n, k;
		uint32_t cp;

		if (c >= 0x01 && c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 2, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 3, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 4, cp = c & 0x07;
		else
			return false;
		if (len - i < n)
			return false;
		for (k = 1; k < n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		i += n;
	}
	return true;
}

static int api_body_parse(struct api_req *r, size_t flags, json_t **out, struct al_error **err)
{
	json_error_t jerr;

	if (!api_utf8_valid(r->body, r->body_len))
		return api_bad(err, "body is not valid UTF-8 text");
	*out = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES | flags, &jerr);
	if (!*out)
		return api_bad(err, "malformed JSON at line %d, column %d: %s", jerr.line,
			       jerr.column, jerr.text);
	return 0;
}

int api_body_object(struct api_req *r, json_t **out, struct al_error **err)
{
	if (r->body_len == 0) {
		*out = json_object();
		return 0;
	}
	if (api_body_parse(r, JSON_DECODE_ANY, out, err) < 0)
		return -EINVAL;
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return api_bad(err, "body must be a JSON object");
	}
	return 0;
}

int api_body_value(struct api_req *r, json_t **out, struct al_error **err)
{
	if (r->body_len == 0)
		return api_bad(err, "a JSON body is required");
	return api_body_parse(r, JSON_DECODE_ANY, out, err);
}

int api_json_fields(json_t *obj, const char *what, const char *const *allowed,
		    struct al_error **err)
{
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return api_bad(err, "%s must be an object", what);
	json_object_foreach(obj, key, v)
	{
		size_t i;

		for (i = 0; allowed[i]; i++)
			if (strcmp(key, allowed[i]) == 0)
				break;
		if (!allowed[i])
			return api_bad(err, "unknown field '%s' in %s", key, what);
	}
	return 0;
}

/* The value of key, NULL when absent or null; EINVAL when required and missing. */
static int api_json_lookup(json_t *obj, const char *key, bool required, json_t **v,
			   struct al_error **err)
{
	*v = json_object_get(obj, key);
	if (*v && json_is_null(*v))
		*v = NULL;
	if (!*v && required)
		return api_bad(err, "missing field '%s'", key);
	return 0;
}

int api_json_string(json_t *obj, const char *key, bool required, const char **out,
		    struct al_error **err)
{
	json_t *v;

	if (api_json_lookup(obj, key, required, &v, err) < 0)
		return -EINVAL;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return api_bad(err, "field '%s' must be a string", key);
	if (required && json_string_length(v) == 0)
		return api_bad(err, "field '%s' must not be empty", key);
	*out = json_string_value(v);
	return 0;
}

int api_json_bool(json_t *obj, const char *key, bool *out, struct al_error **err)
{
	json_t *v;

	if (api_json_lookup(obj, key, false, &v, err) < 0)
		return -EINVAL;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return api_bad(err, "field '%s' must be a boolean", key);
	*out = json_is_true(v);
	return 0;
}

int api_json_u64(json_t *obj, const char *key, bool required, uint64_t max, uint64_t *out,
		 struct al_error **err)
{
	json_t *v;

	if (api_json_lookup(obj, key, required, &v, err) < 0)
		return -EINVAL;
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return api_bad(err, "field '%s' must be an integer", key);
	if (json_integer_value(v) < 0)
		return api_bad(err, "field '%s' must not be negative", key);
	if ((uint64_t)json_integer_value(v) > max)
		return api_bad(err, "field '%s' must be at most %llu", key,
			       (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int api_json_size(json_t *obj, const char *key, uint64_t *out, struct al_error **err)
{
	json_t *v;

	if (api_json_lookup(obj, key, false, &v, err) < 0)
		return -EINVAL;
	if (!v)
		return 0;
	if (json_is_string(v)) {
		if (al_parse_size(json_string_value(v), out) < 0)
			return api_bad(err,
				       "field '%s': bad size '%s' (e.g. 536870912 or \"512M\")",
				       key, json_string_value(v));
		return 0;
	}
	if (!json_is_integer(v))
		return api_bad(err, "field '%s' must be an integer or a size string", key);
	return api_json_u64(obj, key, false, UINT64_MAX, out, err);
}

void api_strv_free(char **v, size_t n)
{
	size_t i;

	if (!v)
		return;
	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static bool env_name_chars_ok(const char *k)
{
	for (const unsigned char *p = (const unsigned char *)k; *p; p++)
		if (*p <= 0x20 || *p == 0x7f)
			return false;
	return true;
}

int api_json_ports(json_t *obj, const char *key, uint16_t *out, size_t max, size_t *n,
		   struct al_error **err)
{
	json_t *v = json_object_get(obj, key), *p;
	size_t i;

	*n = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) > max)
		return api_bad(err, "field '%s' must be an array of at most %zu port numbers", key,
			       max);
	json_array_foreach(v, i, p)
	{
		if (!json_is_integer(p) || json_integer_value(p) < 1 ||
		    json_integer_value(p) > 65535)
			return api_bad(err, "field '%s' must hold port numbers 1..65535", key);
		out[(*n)++] = (uint16_t)json_integer_value(p);
	}
	return 0;
}

int api_json_env(json_t *obj, const char *key, char ***out, size_t *n, struct al_error **err)
{
	const char *k;
	json_t *v, *val;
	char **env;
	size_t i = 0;

	if (api_json_lookup(obj, key, false, &v, err) < 0)
		return -EINVAL;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return api_bad(err, "field '%s' must be an object of strings", key);
	env = xzalloc((json_object_size(v) + 1) * sizeof(*env));
	json_object_foreach(v, k, val)
	{
		/* A name is no place for '=', blanks or control characters (a newline in one
		 * would start another variable for whatever reads the environment as lines). */
		if (!k[0] || strchr(k, '=') || !env_name_chars_ok(k)) {
			api_strv_free(env, i);
			return api_bad(err, "field '%s': bad variable name '%.64s'", key, k);
		}
		if (!json_is_string(val)) {
			api_strv_free(env, i);
			return api_bad(err, "field '%s': value of '%s' must be a string", key, k);
		}
		env[i++] = xasprintf("%s=%s", k, json_string_value(val));
	}
	*out = env;
	*n = i;
	return 0;
}

int api_json_strings(json_t *obj, const char *key, const char ***out, size_t *n,
		     struct al_error **err)
{
	const char **vec;
	json_t *v, *item;
	size_t i;

	if (api_json_lookup(obj, key, false, &v, err) < 0)
		return -EINVAL;
	if (!v)
		return 0;
	if (!json_is_array(v))
		return api_bad(err, "field '%s' must be an array of strings", key);
	vec = xzalloc((json_array_size(v) + 1) * sizeof(*vec));
	json_array_foreach(v, i, item)
	{
		if (!json_is_string(item)) {
			free(vec);
			return api_bad(err, "field '%s': item %zu must be a string", key, i);
		}
		vec[i] = json_string_value(item);
	}
	*out = vec;
	*n = json_array_size(v);
	return 0;
}

int api_query_u64(struct api_req *r, const char *name, uint64_t max, uint64_t *out,
		  struct al_error **err)
{
	const char *s = api_query(r, name);
	unsigned long long v;
	char *end = NULL;

	if (!s)
		return 0;
	errno = 0;
	if (s[0] < '0' || s[0] > '9' || (v = strtoull(s, &end, 10), errno) || *end)
		return api_bad(err, "query '%s' must be a non-negative integer", name);
	if (v > max)
		return api_bad(err, "query '%s' must be at most %llu", name,
			       (unsigned long long)max);
	*out = v;
	return 0;
}

int api_query_bool(struct api_req *r, const char *name, bool *out, struct al_error **err)
{
	const char *s = api_query(r, name);

	if (!s)
		return 0;
	if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
		*out = true;
	else if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
		*out = false;
	else
		return api_bad(err, "query '%s' must be true or false", name);
	return 0;
}
