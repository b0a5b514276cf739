/* SPDX-License-Identifier: MIT */
/* airlock create | stop | ls | logs | policy: sandboxes of a running airlockd. */
#include "cli/client.h"
#include "common/parse.h"
#include "common/xalloc.h"

#include <airlock/airlock.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_ENSURE_ASCII);

	if (s)
		puts(s);
	free(s);
}

/* Parse a response body; NULL (message printed) if it is not JSON. */
static json_t *body_json(const struct client_resp *r)
{
	json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;

	if (!j)
		fprintf(stderr, "airlock: the daemon answered something that is not JSON\n");
	return j;
}

int cli_create(int argc, char **argv)
{
	struct client c;
	struct client_resp r;
	json_t *body = json_object(), *env = json_object(), *res = json_object(), *j;
	uint64_t v;
	double cpus;
	char *s;
	int code = 0;

	argc = client_init(&c, argc, argv);
	if (argc < 0)
		return AL_EXIT_USAGE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!val && strcmp(a, "-h") && strcmp(a, "--help")) {
			fprintf(stderr, "airlock: create: '%s' needs a value\n", a);
			return AL_EXIT_USAGE;
		}
		if (strcmp(a, "--image") == 0)
			json_object_set_new(body, "image", json_string(val));
		else if (strcmp(a, "--workdir") == 0)
			json_object_set_new(body, "workdir", json_string(val));
		else if (strcmp(a, "--memory") == 0 && al_parse_size(val, &v) == 0)
			json_object_set_new(res, "memory", json_integer((json_int_t)v));
		else if (strcmp(a, "--disk") == 0 && al_parse_size(val, &v) == 0)
			json_object_set_new(res, "disk", json_integer((json_int_t)v));
		else if (strcmp(a, "--cpus") == 0 && al_parse_cpus(val, &cpus) == 0)
			json_object_set_new(res, "vcpus", json_real(cpus));
		else if (strcmp(a, "--timeout") == 0 && al_parse_duration_ms(val, &v) == 0)
			json_object_set_new(body, "timeout", json_integer((json_int_t)v));
		else if ((strcmp(a, "--env") == 0 || strcmp(a, "-e") == 0) && strchr(val, '=') &&
			 val[0] != '=') {
			char *k = strndup(val, (size_t)(strchr(val, '=') - val));
			json_object_set_new(env, k, json_string(strchr(val, '=') + 1));
			free(k);
		} else {
			fprintf(stderr,
				"usage: airlock create [--image DIR] [--memory SIZE] [--disk SIZE] "
				"[--cpus N] [--timeout DURATION] [--env K=V]... [--workdir DIR] "
				"[--json]\n");
			return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 ? 0 : AL_EXIT_USAGE;
		}
		i++;
	}
	json_object_set_new(body, "env", env);
	json_object_set_new(body, "resources", res);
	s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (client_call(&c, "POST", "/v1/sandboxes", s, strlen(s), "application/json", &r) < 0) {
		free(s);
		return AL_EXIT_SETUP;
	}
	free(s);
	if (r.status != 201)
		code = client_fail(&r, "create");
	else if ((j = body_json(&r))) {
		if (c.json)
			print_json(j);
		else
			puts(json_string_value(
			    json_object_get(json_object_get(j, "sandbox"), "id")));
		json_decref(j);
	}
	client_resp_free(&r);
	client_free(&c);
	return code;
}

/* POST/GET a path for one sandbox, print the result. */
static int simple(int argc, char **argv, const char *method, const char *suffix, const char *what,
		  const char *body)
{
	struct client c;
	struct client_resp r;
	char *path;
	int code = 0;
	json_t *j;

	argc = client_init(&c, argc, argv);
	if (argc != 2) {
		fprintf(stderr, "usage: airlock %s SANDBOX [--json]\n", what);
		return AL_EXIT_USAGE;
	}
	path = xasprintf("/v1/sandboxes/%s%s", argv[1], suffix);
	if (client_call(&c, method, path, body, body ? strlen(body) : 0, "application/json", &r) <
	    0)
		code = AL_EXIT_SETUP;
	else if (r.status >= 300)
		code = client_fail(&r, what);
	else if ((j = body_json(&r))) {
		json_t *sb = json_object_get(j, "sandbox");
		if (c.json || !sb)
			print_json(j);
		else
			printf("%s %s\n", json_string_value(json_object_get(sb, "id")),
			       json_string_value(json_object_get(sb, "status")));
		json_decref(j);
	}
	client_resp_free(&r);
	free(path);
	client_free(&c);
	return code;
}

int cli_stop(int argc, char **argv)
{
	return simple(argc, argv, "POST", "/stop", "stop", NULL);
}

int cli_policy(int argc, char **argv)
{
	/* airlock policy SANDBOX [deny-all | allow-all | POLICY-JSON] */
	if (argc == 3 || (argc == 4 && strcmp(argv[3], "--json") == 0)) {
		const char *p = argv[2];
		json_t *j = strcmp(p, "deny-all") == 0 || strcmp(p, "allow-all") == 0
				? json_string(p)
				: json_loads(p, 0, NULL);
		char *body;
		int code;

		if (!j) {
			fprintf(stderr,
				"airlock: policy: '%s' is not deny-all, allow-all or a JSON "
				"policy object\n",
				p);
			return AL_EXIT_USAGE;
		}
		body = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
		json_decref(j);
		argv[2] = argv[1];
		code = simple(argc - 1, argv + 1, "PUT", "/network-policy", "policy", body);
		free(body);
		return code;
	}
	return simple(argc, argv, "GET", "", "policy", NULL);
}

static int list_sandboxes(struct client *c)
{
	struct client_resp r;
	json_t *j, *arr, *s;
	size_t i;
	int code = 0;

	if (client_call(c, "GET", "/v1/sandboxes", NULL, 0, NULL, &r) < 0)
		return AL_EXIT_SETUP;
	if (r.status != 200)
		code = client_fail(&r, "ls");
	else if ((j = body_json(&r))) {
		arr = json_object_get(j, "sandboxes");
		if (c->json)
			print_json(j);
		else {
			printf("%-30s %-9s %s\n", "SANDBOX", "STATUS", "EXPIRES IN");
			json_array_foreach(arr, i, s)
			{
				json_int_t left =
				    json_integer_value(json_object_get(s, "expires_at"));
				printf("%-30s %-9s %llds\n",
				       json_string_value(json_object_get(s, "id")),
				       json_string_value(json_object_get(s, "status")),
				       (long long)(left / 1000 - (json_int_t)time(NULL)));
			}
		}
		json_decref(j);
	}
	client_resp_free(&r);
	return code;
}

int cli_ls(int argc, char **argv)
{
	struct client c;
	struct client_resp r;
	char *colon, *path, *q;
	json_t *j, *e;
	size_t i;
	int code = 0;

	argc = client_init(&c, argc, argv);
	if (argc == 1)
		return list_sandboxes(&c);
	if (argc != 2) {
		fprintf(stderr, "usage: airlock ls [SANDBOX[:PATH]] [--json]\n");
		return AL_EXIT_USAGE;
	}
	colon = strchr(argv[1], ':');
	q = client_escape(colon && colon[1] ? colon + 1 : "/workspace");
	if (colon)
		*colon = '\0';
	path = xasprintf("/v1/sandboxes/%s/files?path=%s", argv[1], q);
	if (client_call(&c, "GET", path, NULL, 0, NULL, &r) < 0)
		code = AL_EXIT_SETUP;
	else if (r.status != 200)
		code = client_fail(&r, "ls");
	else if ((j = body_json(&r))) {
		if (c.json)
			print_json(j);
		else
			json_array_foreach(json_object_get(j, "entries"), i, e)
			{
				const char *t = json_string_value(json_object_get(e, "type"));
				printf("%-8s %10lld  %s%s\n", t ? t : "?",
				       (long long)json_integer_value(json_object_get(e, "size")),
				       json_string_value(json_object_get(e, "name")),
				       t && strcmp(t, "dir") == 0 ? "/" : "");
			}
		json_decref(j);
	}
	client_resp_free(&r);
	free(path);
	free(q);
	client_free(&c);
	return code;
}
