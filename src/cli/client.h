/* SPDX-License-Identifier: MIT */
/* The CLI's HTTP client for airlockd (libcurl), and the subcommands that use it. */
#ifndef AL_CLI_CLIENT_H
#define AL_CLI_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct client {
	char *url;    /* base, e.g. http://127.0.0.1:7070 */
	char *socket; /* or a Unix socket path */
	char *token;
	bool json; /* --json: print the daemon's JSON */
};

struct client_resp {
	long status;
	char *body;
	size_t len;
};

/* Parses the common flags (--url, --socket, --token, --json) out of argv in place;
 * falls back to AIRLOCK_URL, AIRLOCK_SOCKET, AIRLOCK_TOKEN and the first token of
 * /var/lib/airlock/tokens (AIRLOCK_STATE_DIR). Returns the new argc, or -1 (message printed). */
int client_init(struct client *c, int argc, char **argv);
void client_free(struct client *c);

/* One request; the whole response body is kept. Returns 0 (any HTTP status) or -1 when the
 * daemon could not be reached (message printed). */
int client_call(struct client *c, const char *method, const char *path, const void *body,
		size_t body_len, const char *content_type, struct client_resp *out);
/* A streaming request: each NDJSON line is parsed and passed to fn (stop with fn < 0). */
int client_stream(struct client *c, const char *method, const char *path, const char *json_body,
		  int (*fn)(void *ctx, json_t *line), void *ctx, long *status);
void client_resp_free(struct client_resp *r);
/* Prints the daemon's error ({error: {code, message}}) as `airlock: ...`; returns the exit code. */
int client_fail(const struct client_resp *r, const char *what);
/* Percent-encodes s for a query string (caller frees). */
char *client_escape(const char *s);

int cli_create(int argc, char **argv);
int cli_exec(int argc, char **argv);
int cli_cp(int argc, char **argv);
int cli_ls(int argc, char **argv);
int cli_logs(int argc, char **argv);
int cli_stop(int argc, char **argv);
int cli_policy(int argc, char **argv);

#endif
