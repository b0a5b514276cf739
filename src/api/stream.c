/* SPDX-License-Identifier: MIT */
/*
 * NDJSON streams of a command's output (application/x-ndjson, one JSON object
 * per line, ASCII only so no chunk boundary can split a character):
 *
 *   {"type":"start","command":{...}}                       (run with wait=true only)
 *   {"type":"stdout"|"stderr","data":"...","data_b64":"..."}  per chunk
 *   {"type":"exit","command":{...}}                        last line
 *   {"type":"error","error":{"code","message"}}            instead of exit, on failure
 *
 * "data" is the chunk as text: bytes that are not valid UTF-8 (and NUL) become
 * U+FFFD. "data_b64" (standard base64 of the exact bytes) is present only when
 * "data" is not an exact copy, so binary output is never lost. A UTF-8
 * sequence cut by a chunk boundary is held back and joined to the next chunk
 * of the same stream.
 *
 * The callback blocks in dm_logs_next for at most 500 ms at a time and checks
 * in between whether the client went away or the server is stopping. A stream
 * that ends within API_HOLD_MS is sent in one piece instead (api_hold).
 */
#include "api/api_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define API_STREAM_POLL_MS 500
#define API_STREAM_BLOCK (16 * 1024)

struct api_stream {
	struct api *api;
	struct MHD_Connection *conn;
	struct dm_logs *logs;
	enum api_stream_style style;
	char *team, *sbx, *cmd;
	json_t *start;
	char *out; /* pending NDJSON bytes */
	size_t out_len, out_off;
	unsigned char carry[3][4]; /* per stream (1, 2): an incomplete UTF-8 tail */
	size_t carry_len[3];
	bool done;
	char buf[4096 + 4];
};

bool api_conn_gone(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;
	struct pollfd p;
	char c;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return false;
	p.fd = ci->connect_fd;
	p.events = POLLIN | POLLRDHUP;
	p.revents = 0;
	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL))
		return true;
	return (p.revents & POLLIN) && recv(p.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static char *api_base64(const unsigned char *s, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = xzalloc((n + 2) / 3 * 4 + 1), *o = out;
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		*o++ = tab[s[i] >> 2];
		*o++ = tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
		*o++ = tab[((s[i + 1] & 15) << 2) | (s[i + 2] >> 6)];
		*o++ = tab[s[i + 2] & 63];
	}
	if (i < n) {
		*o++ = tab[s[i] >> 2];
		if (i + 1 < n) {
			*o++ = tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
			*o++ = tab[(s[i + 1] & 15) << 2];
		} else {
			*o++ = tab[(s[i] & 3) << 4];
			*o++ = '=';
		}
		*o++ = '=';
	}
	return out;
}

/* Appends one JSON line to the pending output; takes the reference. */
static void api_stream_emit(struct api_stream *s, json_t *line)
{
	size_t len;
	_cleanup_free_ char *text = api_json_dump(line, true, &len);

	json_decref(line);
	if (s->out_off == s->out_len)
		s->out_len = s->out_off = 0;
	s->out = xrealloc(s->out, s->out_len + len);
	memcpy(s->out + s->out_len, text, len);
	s->out_len += len;
}

static void api_stream_error(struct api_stream *s, const struct al_error *err)
{
	const char *name, *text = err && err->msg ? err->msg : "stream failed";
	size_t clen;
	_cleanup_free_ char *msg = al_utf8_sanitize(text, strlen(text), &clen);

	api_status_of_errno(err ? err->code : EIO, &name);
	api_stream_emit(s, json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "code", name,
				     "message", msg));
	s->done = true;
}

/* How many bytes at the end of p[0..n) start a UTF-8 sequence that is not complete yet. */
static size_t api_utf8_tail(const unsigned char *p, size_t n)
{
	size_t back, need;

	for (back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = p[n - back];

		if ((c & 0xc0) == 0x80)
			continue; /* a continuation byte: look further back */
		need = c >= 0xf0 && c <= 0xf4	? 4
		       : c >= 0xe0 && c <= 0xef ? 3
		       : c >= 0xc2 && c <= 0xdf ? 2
						: 1;
		return need > back ? back : 0;
	}
	return 0;
}

/* Emits one output line for bytes p[0..n) of stream (1 stdout, 2 stderr). */
static void api_stream_output(struct api_stream *s, int stream, const unsigned char *p, size_t n)
{
	const char *type = stream == 2 ? "stderr" : "stdout";
	json_t *line;

	if (n == 0)
		return;
	if (api_utf8_valid((const char *)p, n)) {
		line = json_pack("{s:s,s:s%}", "type", type, "data", (const char *)p, n);
	} else {
		size_t clen;
		_cleanup_free_ char *clean = al_utf8_sanitize((const char *)p, n, &clen);
		_cleanup_free_ char *b64 = api_base64(p, n);

		line =
		    json_pack("{s:s,s:s%,s:s}", "type", type, "data", clean, clen, "data_b64", b64);
	}
	api_stream_emit(s, line);
}

/* A chunk from dm_logs_next: joined to the held-back tail, its own tail held back. */
static void api_stream_chunk(struct api_stream *s, int stream, size_t len)
{
	int k = stream == 2 ? 2 : 1;
	size_t total = s->carry_len[k] + len, tail;
	_cleanup_free_ unsigned char *data = xzalloc(total + 1);

	memcpy(data, s->carry[k], s->carry_len[k]);
	memcpy(data + s->carry_len[k], s->buf, len);
	tail = api_utf8_tail(data, total);
	api_stream_output(s, k, data, total - tail);
	memcpy(s->carry[k], data + total - tail, tail);
	s->carry_len[k] = tail;
}

static void api_stream_finish(struct api_stream *s)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *cmd = NULL;
	int k;

	for (k = 1; k <= 2; k++) {
		api_stream_output(s, k, s->carry[k], s->carry_len[k]);
		s->carry_len[k] = 0;
	}
	if (dm_cmd_get(s->api->d, s->team, s->sbx, s->cmd, &cmd, &err) < 0)
		return api_stream_error(s, err);
	api_stream_emit(s, json_pack("{s:s,s:o}", "type", "exit", "command", cmd));
	s->done = true;
}

/* One step: the start line, an output chunk or the end; -ETIMEDOUT if nothing came. */
static int api_stream_step(void *ctx, uint64_t timeout_ms)
{
	struct api_stream *s = ctx;
	int stream = 0, r;
	size_t len = 0;

	if (s->start) {
		api_stream_emit(s, json_pack("{s:s,s:o}", "type", "start", "command", s->start));
		s->start = NULL;
		return 0;
	}
	r = dm_logs_next(s->logs, s->buf, sizeof(s->buf) - 4, &stream, &len, timeout_ms);
	if (r == -ETIMEDOUT)
		return r;
	if (r == 1) {
		api_stream_chunk(s, stream, len);
		return 0;
	}
	if (r == 0) {
		api_stream_finish(s);
	} else {
		struct al_error e = {.code = -r, .msg = (char *)"reading the command's output"};

		api_stream_error(s, &e);
	}
	/* The end is written: let the command go now, not once the response is freed (after
	 * its last bytes reached the client), so that a client that saw it end and starts the
	 * next finds it no longer held (its record can make room in the sandbox's budget). */
	dm_logs_close(s->logs);
	s->logs = NULL;
	return 0;
}

/* Produces more pending output; false when the response must be cut off. */
static bool api_stream_fill(struct api_stream *s)
{
	for (;;) {
		if (api_stopping(s->api))
			return false;
		if (api_stream_step(s, API_STREAM_POLL_MS) == 0)
			return true;
		if (api_conn_gone(s->conn))
			return false;
	}
}

static bool api_stream_ended(void *ctx, size_t *pending)
{
	struct api_stream *s = ctx;

	*pending = s->out_len - s->out_off;
	return s->done;
}

bool api_hold(struct api *a, void *ctx, int (*step)(void *, uint64_t),
	      bool (*ended)(void *, size_t *))
{
	struct timespec t0, t;
	size_t pending;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!ended(ctx, &pending)) {
		uint64_t spent;

		clock_gettime(CLOCK_MONOTONIC, &t);
		spent =
		    (uint64_t)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (pending > API_HOLD_MAX || spent >= API_HOLD_MS || api_stopping(a))
			return false;
		step(ctx, API_HOLD_MS - spent);
	}
	return true;
}

void api_reply_ndjson_out(struct api_req *r, char **out, size_t len)
{
	char *body = *out ? *out : xzalloc(1);

	*out = NULL;
	api_reply_raw(r, 200, "application/x-ndjson", body, len);
}

static ssize_t api_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct api_stream *s = cls;

	while (s->out_off == s->out_len) {
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (!api_stream_fill(s))
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	size_t n = s->out_len - s->out_off;

	if (n > max)
		n = max;
	memcpy(buf, s->out + s->out_off, n);
	s->out_off += n;
	return (ssize_t)n;
}

static void api_stream_free(void *cls)
{
	struct api_stream *s = cls;

	dm_logs_close(s->logs);
	json_decref(s->start);
	free(s->team);
	free(s->sbx);
	free(s->cmd);
	free(s->out);
	free(s);
}

void api_stream_logs(struct api_req *r, enum api_stream_style style, const char *sbx,
		     const char *cmd, struct dm_logs *logs, json_t *start)
{
	struct api_stream *s = xzalloc(sizeof(*s));
	struct MHD_Response *resp;

	s->api = r->api;
	s->conn = r->conn;
	s->logs = logs;
	s->style = style;
	s->team = xstrdup(r->team);
	s->sbx = xstrdup(sbx);
	s->cmd = xstrdup(cmd);
	s->start = style == API_STREAM_NATIVE_RUN ? start : (json_decref(start), NULL);
	if (api_hold(r->api, s, api_stream_step, api_stream_ended)) {
		api_reply_ndjson_out(r, &s->out, s->out_len); /* nothing was read: out_off is 0 */
		api_stream_free(s);
		return;
	}
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, API_STREAM_BLOCK,
						 api_stream_read, s, api_stream_free);
	if (!resp)
		al_oom();
	api_reply_stream(r, resp);
}
