/* SPDX-License-Identifier: MIT */
/*
 * The Vercel-compatible commands: run (waiting NDJSON stream, or detached),
 * get (with ?wait=true a long poll), logs (NDJSON), kill.
 *
 * The waiting stream (application/x-ndjson, exactly):
 *   {"command":{... "exitCode":null}}               the start line
 *   {"stream":"stdout"|"stderr","data":"..."}       per chunk of output
 *   {"command":{... "exitCode":N}}                  the finished line, then the end
 *   {"stream":"error","data":{"code","message"}}    instead of it, on failure
 * The logs stream has only the output lines (and error lines): all the output
 * from the start, then live, closed when the command ends. Either is sent in one
 * piece when it ends soon (api_hold, API_HOLD_MS), else as it comes.
 *
 * Every line is ASCII-only JSON (non-ASCII as \uXXXX): the SDK decodes each
 * network chunk on its own, so a raw multi-byte character split across two
 * chunks would be corrupted. A UTF-8 sequence cut by an output chunk boundary
 * is held back and joined to the next chunk of the same stream; bytes that are
 * not UTF-8 become U+FFFD (the data is a JSON string).
 */
#include "api/vercel/routes_vercel.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define VC_POLL_MS 500
#define VC_STREAM_BLOCK (16 * 1024)
/*
 * After this many silent polls (10 s) a bare newline goes out: libmicrohttpd
 * drops a connection idle for its timeout (60 s by default) even while our
 * callback blocks, and NDJSON readers (and JSON.parse) skip the blank line.
 */
#define VC_KEEPALIVE_POLLS 20

/* --- the NDJSON stream ----------------------------------------------------- */

struct vc_stream {
	struct api *api;
	struct MHD_Connection *conn;
	struct dm_logs *logs;
	bool run;    /* the waiting run: start and finished lines */
	bool output; /* log lines wanted */
	char *team, *sbx, *cmd;
	json_t *start; /* the start line's command, until sent */
	char *out;     /* pending NDJSON bytes */
	size_t out_len, out_off;
	unsigned polls; /* silent polls in a row */
	unsigned char carry[3][4];
	size_t carry_len[3];
	bool done;
	char buf[4096 + 4];
};

static void vc_emit_raw(struct vc_stream *s, const char *text, size_t len)
{
	if (s->out_off == s->out_len)
		s->out_len = s->out_off = 0;
	s->out = xrealloc(s->out, s->out_len + len);
	memcpy(s->out + s->out_len, text, len);
	s->out_len += len;
}

static void vc_emit(struct vc_stream *s, json_t *line)
{
	size_t len;
	_cleanup_free_ char *text = NULL;

	if (!line)
		al_oom();
	text = api_json_dump(line, true, &len);
	json_decref(line);
	vc_emit_raw(s, text, len);
}

static void vc_emit_error(struct vc_stream *s, const char *code, const char *text)
{
	size_t clen;
	_cleanup_free_ char *msg = al_utf8_sanitize(text, strlen(text), &clen);

	vc_emit(s, json_pack("{s:s,s:{s:s,s:s}}", "stream", "error", "data", "code", code,
			     "message", msg));
	s->done = true;
}

/* How many bytes at the end of p[0..n) begin a UTF-8 sequence not complete yet. */
static size_t vc_utf8_tail(const unsigned char *p, size_t n)
{
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = p[n - back];
		size_t need;

		if ((c & 0xc0) == 0x80)
			continue;
		need = c >= 0xf0 && c <= 0xf4	? 4
		       : c >= 0xe0 && c <= 0xef ? 3
		       : c >= 0xc2 && c <= 0xdf ? 2
						: 1;
		return need > back ? back : 0;
	}
	return 0;
}

static void vc_emit_output(struct vc_stream *s, int k, const unsigned char *p, size_t n)
{
	size_t clen;
	_cleanup_free_ char *clean = NULL;

	if (n == 0 || !s->output)
		return;
	clean = al_utf8_sanitize((const char *)p, n, &clen);
	vc_emit(s, json_pack("{s:s,s:s%}", "stream", k == 2 ? "stderr" : "stdout", "data", clean,
			     clen));
}

static void vc_chunk(struct vc_stream *s, int stream, size_t len)
{
	int k = stream == 2 ? 2 : 1;
	size_t total = s->carry_len[k] + len, tail;
	_cleanup_free_ unsigned char *data = xzalloc(total + 1);

	memcpy(data, s->carry[k], s->carry_len[k]);
	memcpy(data + s->carry_len[k], s->buf, len);
	tail = vc_utf8_tail(data, total);
	vc_emit_output(s, k, data, total - tail);
	memcpy(s->carry[k], data + total - tail, tail);
	s->carry_len[k] = tail;
}

/* True if the command was cut short by its sandbox stopping (not by itself). */
static bool vc_cut_by_stop(struct vc_stream *s, json_t *cmd)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *view = NULL;
	bool cut = false;

	if (dm_sandbox_get(s->api->d, s->team, s->sbx, &view, &err) < 0)
		return false;
	if (strcmp(json_string_value(json_object_get(view, "status")) ?: "", "running") != 0) {
		json_t *stopped = json_object_get(view, "stopped_at");
		const char *reason = json_string_value(json_object_get(cmd, "reason"));

		cut = json_is_integer(stopped) && reason && strcmp(reason, "exited") != 0 &&
		      strcmp(reason, "exec_failed") != 0 &&
		      json_integer_value(json_object_get(cmd, "finished_at")) >=
			  json_integer_value(stopped);
	}
	json_decref(view);
	return cut;
}

static void vc_finish(struct vc_stream *s)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *view = NULL;

	for (int k = 1; k <= 2; k++) {
		vc_emit_output(s, k, s->carry[k], s->carry_len[k]);
		s->carry_len[k] = 0;
	}
	s->done = true;
	if (!s->run)
		return;
	if (dm_cmd_get(s->api->d, s->team, s->sbx, s->cmd, &view, &err) < 0)
		return vc_emit_error(s, "internal", err && err->msg ? err->msg : "command lost");
	if (vc_cut_by_stop(s, view)) {
		json_decref(view);
		return vc_emit_error(s, "sandbox_stopped",
				     "the sandbox was stopped while the command ran");
	}
	vc_emit(s, json_pack("{s:o}", "command", vc_command_of(view)));
	json_decref(view);
}

/* One step: the start line, an output chunk or the end; -ETIMEDOUT if nothing came. */
static int vc_step(void *ctx, uint64_t timeout_ms)
{
	struct vc_stream *s = ctx;
	int stream = 0, r;
	size_t len = 0;

	if (s->start) {
		vc_emit(s, json_pack("{s:o}", "command", s->start));
		s->start = NULL;
		return 0;
	}
	r = dm_logs_next(s->logs, s->buf, sizeof(s->buf) - 4, &stream, &len, timeout_ms);
	if (r == -ETIMEDOUT)
		return r;
	if (r == 1)
		vc_chunk(s, stream, len);
	else if (r == 0)
		vc_finish(s);
	else
		vc_emit_error(s, "internal", "reading the command's output failed");
	return 0;
}

/* Produces more output; false to cut the response off (client gone, server stopping). */
static bool vc_fill(struct vc_stream *s)
{
	for (;;) {
		if (api_stopping(s->api))
			return false;
		if (vc_step(s, VC_POLL_MS) == 0)
			break;
		if (api_conn_gone(s->conn))
			return false;
		if (++s->polls >= VC_KEEPALIVE_POLLS) {
			s->polls = 0;
			vc_emit_raw(s, "\n", 1);
			return true;
		}
	}
	s->polls = 0;
	return true;
}

static bool vc_ended(void *ctx, size_t *pending)
{
	struct vc_stream *s = ctx;

	*pending = s->out_len - s->out_off;
	return s->done;
}

static ssize_t vc_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct vc_stream *s = cls;
	size_t n;

	while (s->out_off == s->out_len) {
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (!vc_fill(s))
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	n = s->out_len - s->out_off;
	if (n > max)
		n = max;
	memcpy(buf, s->out + s->out_off, n);
	s->out_off += n;
	return (ssize_t)n;
}

static void vc_stream_free(void *cls)
{
	struct vc_stream *s = cls;

	dm_logs_close(s->logs);
	json_decref(s->start);
	free(s->team);
	free(s->sbx);
	free(s->cmd);
	free(s->out);
	free(s);
}

/* Replies with the stream; takes logs and start (NULL for the logs endpoint). */
static void vc_stream(struct api_req *r, const char *sbx, const char *cmd, struct dm_logs *logs,
		      json_t *start, bool output)
{
	struct vc_stream *s = xzalloc(sizeof(*s));
	struct MHD_Response *resp;

	s->api = r->api;
	s->conn = r->conn;
	s->logs = logs;
	s->run = start != NULL;
	s->output = output;
	s->start = start;
	s->team = xstrdup(r->team);
	s->sbx = xstrdup(sbx);
	s->cmd = xstrdup(cmd);
	if (api_hold(r->api, s, vc_step, vc_ended)) {
		api_reply_ndjson_out(r, &s->out, s->out_len); /* nothing was read: out_off is 0 */
		vc_stream_free(s);
		return;
	}
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, VC_STREAM_BLOCK, vc_stream_read,
						 s, vc_stream_free);
	if (!resp)
		al_oom();
	api_reply_stream(r, resp); /* content-type exactly application/x-ndjson */
}

/* --- run ------------------------------------------------------------------- */

struct vc_run {
	struct dm_exec e;
	char **env;
	const char **args;
	char *cwd;
	bool wait, logs;
};

static int vc_parse_run(struct api_req *r, json_t *body, struct vc_run *run, struct al_error **err)
{
	static const char *const fields[] = {"command", "args", "env",	"sudo", "cwd",
					     "timeout", "wait", "logs", NULL};
	struct dm_exec *e = &run->e;
	_cleanup_free_ char *wd = NULL;
	const char *cwd = NULL;

	if (api_json_fields(body, "the body", fields, err) < 0 ||
	    api_json_string(body, "command", true, &e->cmd, err) < 0 ||
	    api_json_strings(body, "args", &run->args, &e->n_args, err) < 0 ||
	    api_json_env(body, "env", &run->env, &e->n_env, err) < 0 ||
	    api_json_bool(body, "sudo", &e->sudo, err) < 0 ||
	    api_json_string(body, "cwd", false, &cwd, err) < 0 ||
	    api_json_u64(body, "timeout", false, INT64_MAX, &e->timeout_ms, err) < 0 ||
	    api_json_bool(body, "wait", &run->wait, err) < 0 ||
	    api_json_bool(body, "logs", &run->logs, err) < 0)
		return -EINVAL;
	e->args = run->args;
	e->env = (const char *const *)run->env;
	if (cwd && !cwd[0])
		return api_bad(err, "field 'cwd' must not be empty");
	if (cwd && cwd[0] != '/') { /* relative to the session's cwd */
		wd = vc_workdir(r, api_param(r, "id"), err);
		if (!wd)
			return -1;
		run->cwd = vc_join(wd, cwd);
		cwd = run->cwd;
	}
	e->cwd = cwd;
	return 0;
}

/* The command started: from here on nothing may answer 5xx (a retry would run it again). */
static void vc_run_reply(struct api_req *r, const char *sbx, const char *cid,
			 const struct vc_run *run)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct dm_logs *logs = NULL;
	json_t *view = NULL, *cmd;

	if (dm_cmd_get(r->api->d, r->team, sbx, cid, &view, &err) < 0)
		return vc_reply_error(r, err);
	cmd = vc_command_of(view);
	json_decref(view);
	if (!run->wait)
		return api_reply_wrapped(r, 200, "command", cmd);
	/* The start line says "running" even when the command has already ended. */
	json_object_set_new(cmd, "exitCode", json_null());
	json_object_del(cmd, "durationMs");
	if (dm_logs_open(r->api->d, r->team, sbx, cid, &logs, &err) < 0) {
		json_decref(cmd);
		return vc_reply_error(r, err);
	}
	vc_stream(r, sbx, cid, logs, cmd, run->logs);
}

void vc_cmd_run(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *cid = NULL;
	const char *sbx = api_param(r, "id");
	struct vc_run run = {0};
	int ret;

	if (api_body_object(r, &body, &err) < 0)
		return vc_reply_error(r, err);
	ret = vc_parse_run(r, body, &run, &err);
	if (ret == 0)
		ret = dm_cmd_start(r->api->d, r->team, sbx, &run.e, &cid, &err);
	api_strv_free(run.env, run.e.n_env);
	free(run.args);
	free(run.cwd);
	if (ret < 0)
		return vc_reply_error(r, err); /* never 5xx: vc_reply_error maps POSTs to 4xx */
	vc_run_reply(r, sbx, cid, &run);
}

/* --- get (and the long poll) ----------------------------------------------- */

/*
 * GET cmd?wait=true: the status line and headers go out at once (the SDK's
 * undici gives up on headers after 300 s), then a newline (JSON.parse skips
 * white space) every few seconds while the command runs, then {command}.
 */
struct vc_waiter {
	struct api *api;
	struct MHD_Connection *conn;
	char *team, *sbx, *cmd;
	char *out;
	size_t out_len, out_off;
	unsigned polls;
	bool done;
};

static ssize_t vc_waiter_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct vc_waiter *w = cls;
	size_t n;

	if (pos == 0 && !w->out) {
		buf[0] = '\n'; /* pushes the headers out now */
		w->out = xstrdup("");
		return 1;
	}
	while (w->out_off == w->out_len) {
		_cleanup_error_ struct al_error *err = NULL;
		json_t *view = NULL, *o;
		int ret;

		if (w->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (api_stopping(w->api) || api_conn_gone(w->conn))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		ret = dm_cmd_wait(w->api->d, w->team, w->sbx, w->cmd, VC_POLL_MS, &view, &err);
		if (ret == -ETIMEDOUT) {
			if (++w->polls % VC_KEEPALIVE_POLLS == 0) {
				buf[0] = '\n';
				return 1;
			}
			continue;
		}
		if (ret < 0)
			o = json_pack("{s:{s:s,s:s}}", "error", "code", "internal", "message",
				      "the command could not be read");
		else
			o = json_pack("{s:o}", "command", vc_command_of(view));
		json_decref(view);
		free(w->out);
		w->out = api_json_dump(o, true, &w->out_len);
		w->out_off = 0;
		json_decref(o);
		w->done = true;
	}
	n = w->out_len - w->out_off;
	if (n > max)
		n = max;
	memcpy(buf, w->out + w->out_off, n);
	w->out_off += n;
	return (ssize_t)n;
}

static void vc_waiter_free(void *cls)
{
	struct vc_waiter *w = cls;

	free(w->team);
	free(w->sbx);
	free(w->cmd);
	free(w->out);
	free(w);
}

void vc_cmd_get(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *sbx = api_param(r, "id"), *cid = api_param(r, "cid");
	struct MHD_Response *resp;
	struct vc_waiter *w;
	json_t *view = NULL;
	bool wait = false;

	if (api_query_bool(r, "wait", &wait, &err) < 0 ||
	    dm_cmd_get(r->api->d, r->team, sbx, cid, &view, &err) < 0)
		return vc_reply_error(r, err);
	if (!wait || json_is_integer(json_object_get(view, "finished_at"))) {
		api_reply_wrapped(r, 200, "command", vc_command_of(view));
		json_decref(view);
		return;
	}
	json_decref(view);
	w = xzalloc(sizeof(*w));
	w->api = r->api;
	w->conn = r->conn;
	w->team = xstrdup(r->team);
	w->sbx = xstrdup(sbx);
	w->cmd = xstrdup(cid);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, vc_waiter_read, w,
						 vc_waiter_free);
	if (!resp)
		al_oom();
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	r->resp = resp;
	r->status = 200;
}

/* --- logs, kill ------------------------------------------------------------ */

void vc_cmd_logs(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *sbx = api_param(r, "id"), *cid = api_param(r, "cid");
	struct dm_logs *logs = NULL;

	if (dm_logs_open(r->api->d, r->team, sbx, cid, &logs, &err) < 0)
		return vc_reply_error(r, err);
	vc_stream(r, sbx, cid, logs, NULL, true);
}

void vc_cmd_kill(struct api_req *r)
{
	static const char *const fields[] = {"signal", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	const char *sbx = api_param(r, "id"), *cid = api_param(r, "cid");
	json_t *view = NULL;
	uint64_t sig = 15;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_u64(body, "signal", false, 64, &sig, &err) < 0)
		return vc_reply_error(r, err);
	if (sig == 0)
		return vc_reply_error_code(r, 400, "bad_request", "field 'signal' must be 1..64");
	if (dm_cmd_kill(r->api->d, r->team, sbx, cid, (int)sig, &err) < 0 ||
	    dm_cmd_get(r->api->d, r->team, sbx, cid, &view, &err) < 0)
		return vc_reply_error(r, err);
	api_reply_wrapped(r, 200, "command", vc_command_of(view));
	json_decref(view);
}
