/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the API's request bodies: the strict JSON gate
 * (api_body_object / api_body_value: UTF-8, duplicate keys, one object), the
 * field readers of src/api/json_in.c, the policy shape check
 * (src/api/policy_shape.c) and the Vercel policy translation
 * (src/api/vercel/routes_vercel_policy.c), and the query-argument readers.
 *
 * The first input byte picks a route's body; the rest is the body. Each body is
 * read the way its route reads it (the same fields, kinds, limits, in order).
 * Checked on every input:
 *   - a failure sets an error with a message; a success sets none (the error rule);
 *   - a string handed on has no hidden NUL (strlen == the JSON length);
 *   - an integer respects its maximum; an env entry is exactly "key=value" with a
 *     non-empty key without '='; a string vector is complete and NULL-terminated;
 *   - a Vercel policy that is accepted becomes a native policy that passes the
 *     native shape check, and, when it has no per-request rules (the response
 *     form only summarizes those), its response form (vc_policy_out) is accepted
 *     again as the same policy.
 * Any violation aborts.
 *
 *   scripts/fuzz 60 api      (sources and libraries: the "api" entry in scripts/fuzz)
 */
#include "api/api_internal.h"
#include "api/vercel/routes_vercel.h"
#include "common/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* respond.c's query lookup needs libmicrohttpd; here the query value is the input. */
static const char *fuzz_query_value;

const char *api_query(const struct api_req *r, const char *name)
{
	(void)r;
	(void)name;
	return fuzz_query_value;
}

static void must(int cond)
{
	if (!cond)
		abort();
}

/* rc and err agree: < 0 with a message, or 0 with no error. Returns rc. */
static int verdict(int rc, struct al_error **err)
{
	if (rc < 0) {
		must(*err && (*err)->msg && (*err)->msg[0]);
		al_error_free(*err);
		*err = NULL;
	} else {
		must(rc == 0 && !*err);
	}
	return rc;
}

enum kind { STR, STR_REQ, BOOL, U64, U64_REQ, SIZE, ENV, STRV, NUM, OBJ, POL_NATIVE, POL_VERCEL };

struct field {
	const char *key;
	enum kind kind;
	uint64_t max;		 /* U64, U64_REQ */
	const struct field *sub; /* OBJ: its fields, NULL-key terminated */
};

struct body {
	const char *name;
	const struct field *fields; /* NULL: the whole body is a policy (kind below) */
	enum kind whole;
};

static const struct field native_resources[] = {
    {"vcpus", NUM, 0, NULL}, {"memory", SIZE, 0, NULL}, {"disk", SIZE, 0, NULL}, {0}};
static const struct field native_create[] = {{"image", STR, 0, NULL},
					     {"resources", OBJ, 0, native_resources},
					     {"timeout", U64, INT64_MAX, NULL},
					     {"env", ENV, 0, NULL},
					     {"workdir", STR, 0, NULL},
					     {"network_policy", POL_NATIVE, 0, NULL},
					     {0}};
static const struct field native_run[] = {
    {"cmd", STR_REQ, 0, NULL}, {"args", STRV, 0, NULL},
    {"env", ENV, 0, NULL},     {"cwd", STR, 0, NULL},
    {"sudo", BOOL, 0, NULL},   {"timeout", U64, INT64_MAX, NULL},
    {"stdin", STR, 0, NULL},   {"keep_stdin", BOOL, 0, NULL},
    {"wait", BOOL, 0, NULL},   {0}};
static const struct field native_mkdir[] = {
    {"path", STR_REQ, 0, NULL}, {"parents", BOOL, 0, NULL}, {0}};
static const struct field native_extend[] = {{"duration_ms", U64_REQ, INT64_MAX, NULL}, {0}};
static const struct field kill_body[] = {{"signal", U64, 64, NULL}, {0}};
static const struct field empty_body[] = {{0}};
static const struct field vercel_resources[] = {
    {"vcpus", NUM, 0, NULL}, {"memory", U64, 1u << 30, NULL}, {0}};
static const struct field vercel_create[] = {{"timeout", U64, INT64_MAX, NULL},
					     {"resources", OBJ, 0, vercel_resources},
					     {"env", ENV, 0, NULL},
					     {"networkPolicy", POL_VERCEL, 0, NULL},
					     {0}};
static const struct field vercel_run[] = {
    {"command", STR_REQ, 0, NULL}, {"args", STRV, 0, NULL}, {"env", ENV, 0, NULL},
    {"sudo", BOOL, 0, NULL},	   {"cwd", STR, 0, NULL},   {"timeout", U64, INT64_MAX, NULL},
    {"wait", BOOL, 0, NULL},	   {"logs", BOOL, 0, NULL}, {0}};
static const struct field vercel_fs_path[] = {
    {"path", STR_REQ, 0, NULL}, {"cwd", STR, 0, NULL}, {0}};
static const struct field vercel_update[] = {
    {"timeout", U64, INT64_MAX, NULL}, {"networkPolicy", POL_VERCEL, 0, NULL}, {0}};
static const struct field vercel_extend[] = {{"duration", U64_REQ, INT64_MAX, NULL}, {0}};

static const struct body bodies[] = {
    {"native create", native_create, 0}, {"native run", native_run, 0},
    {"native mkdir", native_mkdir, 0},	 {"native extend", native_extend, 0},
    {"native kill", kill_body, 0},	 {"native stop", empty_body, 0},
    {"native policy", NULL, POL_NATIVE}, {"vercel create", vercel_create, 0},
    {"vercel run", vercel_run, 0},	 {"vercel fs read/mkdir", vercel_fs_path, 0},
    {"vercel update", vercel_update, 0}, {"vercel extend", vercel_extend, 0},
    {"vercel policy", NULL, POL_VERCEL},
};
#define N_BODIES (sizeof(bodies) / sizeof(bodies[0]))

/* Whether a native policy has per-request rules (a record-form allow with a rule). */
static bool has_rules(json_t *native)
{
	json_t *allow = json_object_get(native, "allow"), *rules;
	const char *domain;

	if (!json_is_object(allow))
		return false;
	json_object_foreach(allow, domain, rules)
	{
		if (json_array_size(rules) > 0)
			return true;
	}
	return false;
}

/* The same policy in one spelling: no empty "subnets", a rule-less record as a list. */
static json_t *policy_norm(json_t *p)
{
	json_t *c = json_deep_copy(p), *s, *allow, *rules;
	const char *domain;

	must(c != NULL);
	s = json_object_get(c, "subnets");
	if (s && json_object_size(s) == 0)
		json_object_del(c, "subnets");
	allow = json_object_get(c, "allow");
	if (json_is_object(allow)) {
		json_t *list = json_array();

		json_object_foreach(allow, domain, rules)
		    json_array_append_new(list, json_string(domain));
		json_object_set_new(c, "allow", list);
	}
	return c;
}

static void check_vercel_policy(json_t *v)
{
	struct al_error *err = NULL;
	json_t *native = NULL, *back = NULL, *again = NULL, *a, *b;

	if (verdict(vc_policy_in(v, &native, &err), &err) < 0) {
		must(native == NULL);
		return;
	}
	must(native != NULL);
	must(verdict(api_policy_check(native, "native", &err), &err) == 0);
	if (has_rules(native)) { /* the response form has rule summaries only */
		json_decref(native);
		return;
	}
	back = vc_policy_out(native);
	must(back != NULL);
	must(verdict(vc_policy_in(back, &again, &err), &err) == 0);
	a = policy_norm(native);
	b = policy_norm(again);
	must(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	json_decref(again);
	json_decref(back);
	json_decref(native);
}

static void check_string(json_t *obj, const char *key, const char *s, bool required)
{
	json_t *v = json_object_get(obj, key);

	if (!s) {
		must(!required && (!v || json_is_null(v)));
		return;
	}
	must(json_is_string(v) && strlen(s) == json_string_length(v));
	must(!required || s[0]);
}

static void check_env(json_t *obj, const char *key, char **env, size_t n)
{
	json_t *o = json_object_get(obj, key);

	if (!env) {
		must(n == 0);
		return;
	}
	must(json_is_object(o) && n == json_object_size(o) && env[n] == NULL);
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(env[i], '=');
		json_t *val;

		char *k;

		must(eq && eq > env[i]);
		k = strndup(env[i], (size_t)(eq - env[i]));
		must(k != NULL);
		val = json_object_get(o, k);
		free(k);
		must(json_is_string(val) && strlen(eq + 1) == json_string_length(val));
	}
	api_strv_free(env, n);
}

static void check_strv(json_t *obj, const char *key, const char **vec, size_t n)
{
	json_t *a = json_object_get(obj, key);

	if (!vec)
		return;
	must(json_is_array(a) && n == json_array_size(a) && vec[n] == NULL);
	for (size_t i = 0; i < n; i++)
		must(vec[i] && strlen(vec[i]) == json_string_length(json_array_get(a, i)));
	free(vec);
}

/* Reads one field the way the routes do; < 0 when the body is refused. */
static int read_field(json_t *obj, const struct field *f)
{
	struct al_error *err = NULL;
	const char *s = NULL, **vec = NULL;
	char **env = NULL;
	uint64_t u = 0;
	size_t n = 0;
	bool b = false;
	json_t *v;
	int rc;

	switch (f->kind) {
	case STR:
	case STR_REQ:
		rc = verdict(api_json_string(obj, f->key, f->kind == STR_REQ, &s, &err), &err);
		if (rc == 0)
			check_string(obj, f->key, s, f->kind == STR_REQ);
		return rc;
	case BOOL:
		return verdict(api_json_bool(obj, f->key, &b, &err), &err);
	case U64:
	case U64_REQ:
		rc = verdict(api_json_u64(obj, f->key, f->kind == U64_REQ, f->max, &u, &err), &err);
		must(rc < 0 || u <= f->max);
		return rc;
	case SIZE:
		return verdict(api_json_size(obj, f->key, &u, &err), &err);
	case ENV:
		rc = verdict(api_json_env(obj, f->key, &env, &n, &err), &err);
		if (rc == 0)
			check_env(obj, f->key, env, n);
		else
			must(env == NULL);
		return rc;
	case STRV:
		rc = verdict(api_json_strings(obj, f->key, &vec, &n, &err), &err);
		if (rc == 0)
			check_strv(obj, f->key, vec, n);
		else
			must(vec == NULL);
		return rc;
	case NUM:
		v = json_object_get(obj, f->key);
		return v && !json_is_null(v) && !json_is_number(v) ? -1 : 0;
	case OBJ: {
		const char *names[16];
		size_t i;

		v = json_object_get(obj, f->key);
		if (!v || json_is_null(v))
			return 0;
		for (i = 0; f->sub[i].key; i++)
			names[i] = f->sub[i].key;
		names[i] = NULL;
		if (verdict(api_json_fields(v, f->key, names, &err), &err) < 0)
			return -1;
		for (i = 0; f->sub[i].key; i++)
			if (read_field(v, &f->sub[i]) < 0)
				return -1;
		return 0;
	}
	case POL_NATIVE:
		v = json_object_get(obj, f->key);
		if (!v || json_is_null(v))
			return 0;
		return verdict(api_policy_check(v, f->key, &err), &err);
	case POL_VERCEL:
		v = json_object_get(obj, f->key);
		if (v && !json_is_null(v))
			check_vercel_policy(v);
		return 0;
	}
	abort();
}

static void read_body(const struct body *spec, const uint8_t *data, size_t size)
{
	struct api_req r = {0};
	struct al_error *err = NULL;
	json_t *body = NULL;
	const char *names[16];
	size_t i;

	/* An exact copy: reading past the body is an ASan report, not a lucky NUL. */
	r.body = malloc(size ? size : 1);
	must(r.body != NULL);
	memcpy(r.body, data, size);
	r.body_len = size;
	if (!spec->fields) {
		if (verdict(api_body_value(&r, &body, &err), &err) == 0) {
			must(body != NULL);
			if (spec->whole == POL_NATIVE)
				verdict(api_policy_check(body, "the policy", &err), &err);
			else
				check_vercel_policy(body);
		}
		goto out;
	}
	if (verdict(api_body_object(&r, &body, &err), &err) < 0) {
		must(body == NULL);
		goto out;
	}
	must(json_is_object(body));
	for (i = 0; spec->fields[i].key; i++)
		names[i] = spec->fields[i].key;
	names[i] = NULL;
	if (verdict(api_json_fields(body, "the body", names, &err), &err) < 0)
		goto out;
	for (i = 0; spec->fields[i].key; i++)
		if (read_field(body, &spec->fields[i]) < 0)
			break;
out:
	json_decref(body);
	free(r.body);
}

static void read_query(const uint8_t *data, size_t size)
{
	struct al_error *err = NULL;
	struct api_req r = {0};
	char *q = malloc(size + 1);
	uint64_t u = 7;
	bool b = false;

	must(q != NULL);
	memcpy(q, data, size);
	q[size] = '\0';
	fuzz_query_value = q;
	if (verdict(api_query_u64(&r, "limit", 1000, &u, &err), &err) == 0)
		must(u <= 1000 && q[0] >= '0' && q[0] <= '9');
	verdict(api_query_bool(&r, "follow", &b, &err), &err);
	fuzz_query_value = NULL;
	free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t pick;

	if (size == 0)
		return 0;
	pick = data[0] % (N_BODIES + 1);
	if (pick == N_BODIES)
		read_query(data + 1, size - 1);
	else
		read_body(&bodies[pick], data + 1, size - 1);
	return 0;
}
