/* SPDX-License-Identifier: MIT */
/* The native API's commands: run (streamed or detached), list, get, wait, logs, stdin, kill. */
#include "api/native/routes_native.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <string.h>

#define API_WAIT_DEFAULT_MS 30000
#define API_WAIT_MAX_MS 3600000
#define API_WAIT_SLICE_MS 500

struct api_run {
	struct dm_exec e;
	char **env;
	const char **args;
	bool wait;
};

#define API_CMD_PAGE_DEFAULT 1000 /* commands a listing page has unless limit says */
#define API_CMD_PAGE_MAX 10000

static int api_parse_run(json_t *body, struct api_run *run, struct al_error **err)
{
	static const char *const fields[] = {"cmd",	"args",	 "env",	       "cwd",  "sudo",
					     "timeout", "stdin", "keep_stdin", "wait", "tty",
					     "rows",	"cols",	 NULL};
	uint64_t rows = 0, cols = 0;
	struct dm_exec *e = &run->e;
	const char *in = NULL;

	if (api_json_fields(body, "the body", fields, err) < 0 ||
	    api_json_string(body, "cmd", true, &e->cmd, err) < 0 ||
	    api_json_strings(body, "args", &run->args, &e->n_args, err) < 0 ||
	    api_json_env(body, "env", &run->env, &e->n_env, err) < 0 ||
	    api_json_string(body, "cwd", false, &e->cwd, err) < 0 ||
	    api_json_bool(body, "sudo", &e->sudo, err) < 0 ||
	    api_json_u64(body, "timeout", false, INT64_MAX, &e->timeout_ms, err) < 0 ||
	    api_json_string(body, "stdin", false, &in, err) < 0 ||
	    api_json_bool(body, "keep_stdin", &e->keep_stdin, err) < 0 ||
	    api_json_bool(body, "wait", &run->wait, err) < 0 ||
	    api_json_bool(body, "tty", &e->tty, err) < 0 ||
	    api_json_u64(body, "rows", false, 65535, &rows, err) < 0 ||
	    api_json_u64(body, "cols", false, 65535, &cols, err) < 0)
		return -EINVAL;
	e->rows = (unsigned)rows, e->cols = (unsigned)cols;
	e->args = run->args;
	e->env = (const char *const *)run->env;
	if (e->cwd && !e->cwd[0])
		return api_bad(err, "field 'cwd' must not be empty");
	if (in) {
		e->stdin_data = in;
		e->stdin_len = strlen(in);
	}
	return 0;
}

/* The command started: stream it (wait) or describe it (201). */
static void api_run_reply(struct api_req *r, const char *sbx, const char *cid, bool wait)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct dm_logs *logs = NULL;
	json_t *view = NULL;

	if (dm_cmd_get(r->api->d, r->team, sbx, cid, &view, &err) < 0)
		return api_reply_error(r, err);
	if (!wait)
		return api_reply_wrapped(r, 201, "command", view);
	if (dm_logs_open(r->api->d, r->team, sbx, cid, &logs, &err) < 0) {
		json_decref(view);
		return api_reply_error(r, err);
	}
	api_stream_logs(r, API_STREAM_NATIVE_RUN, sbx, cid, logs, view);
}

void api_cmd_run(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *cid = NULL;
	const char *sbx = api_param(r, "id");
	struct api_run run = {0};
	int ret;

	if (api_body_object(r, &body, &err) < 0)
		return api_reply_error(r, err);
	ret = api_parse_run(body, &run, &err);
	if (ret == 0)
		ret = dm_cmd_start(r->api->d, r->team, sbx, &run.e, &cid, &err);
	api_strv_free(run.env, run.e.n_env);
	free(run.args);
	if (ret < 0)
		return api_reply_error(r, err);
	api_run_reply(r, sbx, cid, run.wait);
}

/* GET .../commands?limit=N&cursor=C: a page, oldest first, and the cursor of the next
 * ("next_cursor", null after the last page). */
void api_cmd_list(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *list = NULL, *o;
	uint64_t limit = API_CMD_PAGE_DEFAULT, cursor = 0, next = 0;
	char buf[24];

	if (api_query_u64(r, "limit", API_CMD_PAGE_MAX, &limit, &err) < 0 ||
	    api_query_u64(r, "cursor", UINT64_MAX, &cursor, &err) < 0)
		return api_reply_error(r, err);
	if (limit == 0) {
		api_bad(&err, "query 'limit' must be at least 1");
		return api_reply_error(r, err);
	}
	if (dm_cmd_list(r->api->d, r->team, api_param(r, "id"), cursor, (size_t)limit, &list, &next,
			&err) < 0)
		return api_reply_error(r, err);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)next);
	o = json_pack("{s:o}", "commands", list);
	json_object_set_new(o, "next_cursor", next ? json_string(buf) : json_null());
	api_reply_json(r, 200, o);
}

static void api_reply_command(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *view = NULL;

	if (dm_cmd_get(r->api->d, r->team, api_param(r, "id"), api_param(r, "cid"), &view, &err) <
	    0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, 200, "command", view);
}

void api_cmd_get(struct api_req *r)
{
	api_reply_command(r);
}

/*
 * Waits in slices so that a client that went away, or a server that stops,
 * does not hold the thread for the whole timeout.
 */
void api_cmd_wait(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	uint64_t timeout = API_WAIT_DEFAULT_MS, left;
	json_t *view = NULL;
	int ret;

	if (api_query_u64(r, "timeout_ms", API_WAIT_MAX_MS, &timeout, &err) < 0)
		return api_reply_error(r, err);
	left = timeout;
	for (;;) {
		uint64_t slice = left < API_WAIT_SLICE_MS ? left : API_WAIT_SLICE_MS;

		al_error_free(err);
		err = NULL;
		ret = dm_cmd_wait(r->api->d, r->team, api_param(r, "id"), api_param(r, "cid"),
				  slice, &view, &err);
		if (ret != -ETIMEDOUT || left <= slice)
			break;
		left -= slice;
		if (api_stopping(r->api) || api_conn_gone(r->conn))
			break;
	}
	if (ret < 0)
		return api_reply_error(r, err);
	api_reply_wrapped(r, 200, "command", view);
}

void api_cmd_logs(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct dm_logs *logs = NULL;
	const char *sbx = api_param(r, "id"), *cid = api_param(r, "cid");

	if (dm_logs_open(r->api->d, r->team, sbx, cid, &logs, &err) < 0)
		return api_reply_error(r, err);
	api_stream_logs(r, API_STREAM_NATIVE_LOGS, sbx, cid, logs, NULL);
}

void api_cmd_stdin(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	bool close_after = false;

	if (api_query_bool(r, "close", &close_after, &err) < 0 ||
	    dm_cmd_write_stdin(r->api->d, r->team, api_param(r, "id"), api_param(r, "cid"), r->body,
			       r->body_len, close_after, &err) < 0)
		return api_reply_error(r, err);
	api_reply_command(r);
}

void api_cmd_kill(struct api_req *r)
{
	static const char *const fields[] = {"signal", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	uint64_t sig = 15;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "signal", false, 64, &sig, &err) < 0)
		return api_reply_error(r, err);
	if (sig == 0)
		return api_reply_error_code(r, 400, "bad_request", "field 'signal' must be 1..64");
	if (dm_cmd_kill(r->api->d, r->team, api_param(r, "id"), api_param(r, "cid"), (int)sig,
			&err) < 0)
		return api_reply_error(r, err);
	api_reply_command(r);
}

/* A TTY command's window size: {rows, cols}. */
void api_cmd_resize(struct api_req *r)
{
	static const char *const fields[] = {"rows", "cols", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	uint64_t rows = 0, cols = 0;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "rows", true, 65535, &rows, &err) < 0 ||
	    api_json_u64(body, "cols", true, 65535, &cols, &err) < 0 ||
	    dm_cmd_resize(r->api->d, r->team, api_param(r, "id"), api_param(r, "cid"),
			  (unsigned)rows, (unsigned)cols, &err) < 0)
		return api_reply_error(r, err);
	api_reply_command(r);
}

/* A ticket for an interactive PTY over a WebSocket (docs/pty.md). */
void api_sbx_pty(struct api_req *r)
{
	api_pty_offer(r, "/v1/sandboxes/", "/pty/ws");
}
