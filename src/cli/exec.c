/* SPDX-License-Identifier: MIT */
/* airlock exec SANDBOX -- CMD [ARGS...]  and  airlock logs SANDBOX COMMAND */
#include "cli/client.h"
#include "common/parse.h"
#include "common/xalloc.h"

#include <airlock/airlock.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct out_state {
	bool json;
	int exit_code; /* from the exit record; -1 until seen */
	char cmd_id[64];
};

static void put(int fd, const char *s)
{
	size_t n = strlen(s);

	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			return;
		}
		s += w;
		n -= (size_t)w;
	}
}

/* The exit code airlock itself returns for a finished command (the run table). */
static int code_of(json_t *cmd)
{
	const char *reason = json_string_value(json_object_get(cmd, "reason"));
	json_t *ec = json_object_get(cmd, "exit_code"), *sig = json_object_get(cmd, "signal");

	if (json_is_integer(ec))
		return (int)json_integer_value(ec);
	if (reason && strcmp(reason, "timeout") == 0)
		return AL_EXIT_TIMEOUT;
	if (reason && strcmp(reason, "oom") == 0)
		return AL_EXIT_OOM;
	if (json_is_integer(sig))
		return AL_EXIT_SIGNAL_BASE + (int)json_integer_value(sig);
	return AL_EXIT_SETUP;
}

static int on_line(void *ctx, json_t *line)
{
	struct out_state *o = ctx;
	const char *type = json_string_value(json_object_get(line, "type"));
	const char *data = json_string_value(json_object_get(line, "data"));

	if (o->json) {
		char *s = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (s)
			puts(s), fflush(stdout);
		free(s);
	}
	if (!type)
		return 0;
	if (strcmp(type, "start") == 0) {
		const char *id =
		    json_string_value(json_object_get(json_object_get(line, "command"), "id"));
		snprintf(o->cmd_id, sizeof(o->cmd_id), "%s", id ? id : "");
	} else if (!o->json && data && strcmp(type, "stdout") == 0) {
		put(STDOUT_FILENO, data);
	} else if (!o->json && data && strcmp(type, "stderr") == 0) {
		put(STDERR_FILENO, data);
	} else if (strcmp(type, "exit") == 0) {
		json_t *cmd = json_object_get(line, "command");
		const char *reason = json_string_value(json_object_get(cmd, "reason"));

		o->exit_code = code_of(cmd);
		if (!o->json && reason && strcmp(reason, "exited") != 0)
			fprintf(stderr, "airlock: command ended: %s\n", reason);
	}
	return 0;
}

static char *read_stdin_all(size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = xzalloc(cap);
	ssize_t r;

	while ((r = read(STDIN_FILENO, buf + n, cap - n)) > 0) {
		n += (size_t)r;
		if (n == cap)
			buf = xrealloc(buf, cap *= 2);
		if (n > (768u << 10)) {
			fprintf(stderr,
				"airlock: exec: stdin over 768 KiB; use `airlock cp` for data\n");
			free(buf);
			return NULL;
		}
	}
	*len = n;
	return buf;
}

int cli_exec(int argc, char **argv)
{
	struct client c;
	struct out_state o = {.exit_code = -1};
	json_t *body = json_object(), *args = json_array(), *env = json_object();
	bool detach = false;
	long status = 0;
	char *path, *s;
	int i;
	uint64_t ms;

	argc = client_init(&c, argc, argv);
	if (argc < 0)
		return AL_EXIT_USAGE;
	o.json = c.json;
	for (i = 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";

		if (strcmp(a, "--sudo") == 0)
			json_object_set_new(body, "sudo", json_true());
		else if (strcmp(a, "-d") == 0 || strcmp(a, "--detach") == 0)
			detach = true;
		else if (strcmp(a, "--cwd") == 0 && ++i)
			json_object_set_new(body, "cwd", json_string(v));
		else if (strcmp(a, "--timeout") == 0 && al_parse_duration_ms(v, &ms) == 0 && ++i)
			json_object_set_new(body, "timeout", json_integer((json_int_t)ms));
		else if ((strcmp(a, "--env") == 0 || strcmp(a, "-e") == 0) && strchr(v, '=') &&
			 ++i) {
			char *k = strndup(v, (size_t)(strchr(v, '=') - v));
			json_object_set_new(env, k, json_string(strchr(v, '=') + 1));
			free(k);
		} else
			goto usage;
	}
	if (i >= argc)
		goto usage;
	path = xasprintf("/v1/sandboxes/%s/commands", argv[i++]);
	if (i < argc && strcmp(argv[i], "--") == 0)
		i++;
	if (i >= argc)
		goto usage;
	json_object_set_new(body, "cmd", json_string(argv[i++]));
	for (; i < argc; i++)
		json_array_append_new(args, json_string(argv[i]));
	json_object_set_new(body, "args", args);
	json_object_set_new(body, "env", env);
	json_object_set_new(body, "wait", json_boolean(!detach));
	if (!isatty(STDIN_FILENO) && !detach) {
		size_t n;
		char *in = read_stdin_all(&n);
		if (!in)
			return AL_EXIT_USAGE;
		json_object_set_new(body, "stdin", json_stringn(in, n));
		free(in);
	}
	s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (detach) {
		struct client_resp r;
		int code = 0;
		json_t *j;

		if (client_call(&c, "POST", path, s, strlen(s), "application/json", &r) < 0)
			code = AL_EXIT_SETUP;
		else if (r.status >= 300)
			code = client_fail(&r, "exec");
		else if ((j = json_loads(r.body, 0, NULL))) {
			puts(c.json ? r.body
				    : json_string_value(
					  json_object_get(json_object_get(j, "command"), "id")));
			json_decref(j);
		}
		client_resp_free(&r);
		return code;
	}
	if (client_stream(&c, "POST", path, s, on_line, &o, &status) < 0)
		return AL_EXIT_SETUP;
	free(s);
	free(path);
	client_free(&c);
	if (status >= 300)
		return status == 400 ? AL_EXIT_USAGE : 1;
	return o.exit_code >= 0 ? o.exit_code : AL_EXIT_SETUP;
usage:
	fputs(
	    "usage: airlock exec [--sudo] [--cwd DIR] [--env K=V]... [--timeout DURATION] [-d] "
	    "[--json] SANDBOX -- CMD [ARGS...]\n"
	    "Runs CMD in a live sandbox, streams its output and exits with its exit code;\n"
	    "stdin (when not a terminal) is passed to CMD. -d: print the command id and return.\n",
	    stderr);
	return AL_EXIT_USAGE;
}

static int print_egress(void *ctx, json_t *line)
{
	struct out_state *o = ctx;
	char *s;

	if (o->json) {
		s = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (s)
			puts(s);
		free(s);
	} else {
		json_t *port = json_object_get(line, "port");
		char p[16] = "";

		if (json_is_integer(port))
			snprintf(p, sizeof(p), ":%lld", (long long)json_integer_value(port));
		printf("%-6s %-11s %-22s %s%s %s\n",
		       json_string_value(json_object_get(line, "verdict")) ?: "?",
		       json_string_value(json_object_get(line, "layer")) ?: "?",
		       json_string_value(json_object_get(line, "reason")) ?: "",
		       json_string_value(json_object_get(line, "name")) ?: "-", p,
		       json_string_value(json_object_get(line, "address")) ?: "");
	}
	fflush(stdout);
	return 0;
}

/* airlock logs --egress SANDBOX [--follow] */
static int egress_logs(struct client *c, int argc, char **argv)
{
	struct out_state o = {.json = c->json};
	bool follow = false;
	const char *sbx = NULL;
	long status = 0;
	char *path;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--egress") == 0)
			continue;
		if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0)
			follow = true;
		else if (!sbx)
			sbx = argv[i];
		else
			sbx = NULL, i = argc;
	}
	if (!sbx) {
		fputs("usage: airlock logs --egress SANDBOX [--follow] [--json]\n", stderr);
		return AL_EXIT_USAGE;
	}
	path = xasprintf("/v1/sandboxes/%s/egress%s", sbx, follow ? "?follow=true" : "");
	if (client_stream(c, "GET", path, NULL, print_egress, &o, &status) < 0)
		return AL_EXIT_SETUP;
	free(path);
	return status >= 300 ? 1 : 0;
}

int cli_logs(int argc, char **argv)
{
	struct client c;
	struct out_state o = {.exit_code = -1};
	long status = 0;
	char *path;

	argc = client_init(&c, argc, argv);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--egress") == 0)
			return egress_logs(&c, argc, argv);
	if (argc != 3) {
		fputs("usage: airlock logs SANDBOX COMMAND [--json]\n"
		      "       airlock logs --egress SANDBOX [--follow] [--json]\n"
		      "Replays a command's output from the start and follows it until it ends;\n"
		      "with --egress, the sandbox's network decisions instead.\n",
		      stderr);
		return AL_EXIT_USAGE;
	}
	o.json = c.json;
	path = xasprintf("/v1/sandboxes/%s/commands/%s/logs", argv[1], argv[2]);
	if (client_stream(&c, "GET", path, NULL, on_line, &o, &status) < 0)
		return AL_EXIT_SETUP;
	free(path);
	client_free(&c);
	if (status >= 300)
		return 1;
	return o.exit_code >= 0 ? o.exit_code : 0;
}
