/* SPDX-License-Identifier: MIT */
/*
 * Connect server streams (application/connect+json): envelopes produced by a step
 * function, a keepalive message after E2B_KEEPALIVE_MS of silence, and one end-of-stream
 * envelope ({} or {"error":{code,message}}). The keepalive interval is the request's
 * Keepalive-Ping-Interval (seconds; the SDK sends 50) bounded to 1..15 s. The HTTP status is 200
 * whatever happens: a failure travels in the end envelope, so a stream never ends without saying
 * why. The reader blocks in step for at most E2B_STREAM_POLL_MS at a time and checks in between
 * whether the client went away or the server is stopping.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define E2B_STREAM_POLL_MS 500
#define E2B_KEEPALIVE_MS 15000
#define E2B_STREAM_BLOCK (16 * 1024)

struct e2b_stream {
	struct api *api;
	struct MHD_Connection *conn;
	void *ctx;
	e2b_step_fn step;
	void (*ctx_free)(void *);
	json_t *keepalive; /* the message sent after a silence, or NULL */
	char *out;
	size_t out_len, out_off;
	bool done;
	bool ndjson; /* JSON lines instead of envelopes (the code interpreter's /execute) */
	uint64_t last_ms;
	uint64_t keepalive_ms;
};

static uint64_t e2b_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

struct e2b_stream *e2b_stream_new(struct api_req *r, void *ctx, e2b_step_fn step,
				  void (*ctx_free)(void *))
{
	struct e2b_stream *s = xzalloc(sizeof(*s));

	s->api = r->api;
	s->conn = r->conn;
	s->ctx = ctx;
	s->step = step;
	s->ctx_free = ctx_free;
	s->last_ms = e2b_now_ms();
	s->keepalive_ms = E2B_KEEPALIVE_MS;
	if (r->conn) {
		const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
							    "Keepalive-Ping-Interval");
		unsigned long v = h ? strtoul(h, NULL, 10) : 0;

		if (v >= 1 && v * 1000 < E2B_KEEPALIVE_MS)
			s->keepalive_ms = v * 1000;
	}
	return s;
}

void e2b_stream_ndjson(struct e2b_stream *s)
{
	s->ndjson = true;
}

void e2b_stream_keepalive(struct e2b_stream *s, json_t *msg)
{
	json_decref(s->keepalive);
	s->keepalive = msg;
}

static void e2b_stream_put(struct e2b_stream *s, uint8_t flags, json_t *msg)
{
	size_t len;
	_cleanup_free_ char *text = api_json_dump(msg, false, &len);
	uint8_t hdr[E2B_CONNECT_HDR];

	json_decref(msg);
	if (s->done)
		return;
	if (s->out_off == s->out_len)
		s->out_len = s->out_off = 0;
	if (s->ndjson) {
		s->out = xrealloc(s->out, s->out_len + len + 1);
		memcpy(s->out + s->out_len, text, len);
		s->out[s->out_len + len] = '\n';
		s->out_len += len + 1;
		s->last_ms = e2b_now_ms();
		return;
	}
	e2b_connect_header(flags, (uint32_t)len, hdr);
	s->out = xrealloc(s->out, s->out_len + sizeof(hdr) + len);
	memcpy(s->out + s->out_len, hdr, sizeof(hdr));
	memcpy(s->out + s->out_len + sizeof(hdr), text, len);
	s->out_len += sizeof(hdr) + len;
	s->last_ms = e2b_now_ms();
}

void e2b_stream_msg(struct e2b_stream *s, json_t *msg)
{
	if (!msg)
		al_oom();
	e2b_stream_put(s, 0, msg);
}

void e2b_stream_end(struct e2b_stream *s, const char *code, const char *msg)
{
	json_t *end;

	if (s->ndjson) { /* an error line of the code interpreter's shape, if any */
		if (code)
			e2b_stream_put(s, 0,
				       json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", code,
						 "value", msg ? msg : code, "traceback", ""));
		s->done = true;
		return;
	}
	end = code ? json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg ? msg : code)
		   : json_object();

	e2b_stream_put(s, E2B_CONNECT_FLAG_END, end);
	s->done = true;
}

bool e2b_stream_ended(const struct e2b_stream *s)
{
	return s->done;
}

/* Produces more output; false when the response must be cut off. */
static bool e2b_stream_fill(struct e2b_stream *s)
{
	for (;;) {
		if (api_stopping(s->api)) {
			e2b_stream_end(s, "unavailable", "the server is stopping");
			return true;
		}
		if (s->step(s, s->ctx, E2B_STREAM_POLL_MS) == 0)
			return true;
		if (api_conn_gone(s->conn))
			return false;
		if (s->keepalive && e2b_now_ms() - s->last_ms >= s->keepalive_ms) {
			e2b_stream_msg(s, json_deep_copy(s->keepalive));
			return true;
		}
	}
}

static ssize_t e2b_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct e2b_stream *s = cls;
	size_t n;

	while (s->out_off == s->out_len) {
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (!e2b_stream_fill(s))
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	n = s->out_len - s->out_off;
	if (n > max)
		n = max;
	memcpy(buf, s->out + s->out_off, n);
	s->out_off += n;
	return (ssize_t)n;
}

static void e2b_stream_free(void *cls)
{
	struct e2b_stream *s = cls;

	if (s->ctx_free)
		s->ctx_free(s->ctx);
	json_decref(s->keepalive);
	free(s->out);
	free(s);
}

static int e2b_stream_hold_step(void *cls, uint64_t timeout_ms)
{
	struct e2b_stream *s = cls;

	return s->step(s, s->ctx, timeout_ms);
}

static bool e2b_stream_hold_ended(void *cls, size_t *pending)
{
	struct e2b_stream *s = cls;

	*pending = s->out_len - s->out_off;
	return s->done;
}

void e2b_stream_reply(struct api_req *r, struct e2b_stream *s)
{
	struct MHD_Response *resp;

	/* A stream that ends within API_HOLD_MS goes out in one piece (api_hold). */
	if (!s->done && s->step)
		api_hold(s->api, s, e2b_stream_hold_step, e2b_stream_hold_ended);

	if (s->done) { /* everything is known: one response with its length */
		char *body = s->out ? s->out : xzalloc(1);

		api_reply_raw(r, 200,
			      s->ndjson ? "application/x-ndjson" : "application/connect+json", body,
			      s->out_len);
		s->out = NULL;
		e2b_stream_free(s);
		return;
	}
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, E2B_STREAM_BLOCK,
						 e2b_stream_read, s, e2b_stream_free);
	if (!resp)
		al_oom();
	api_reply_stream(r, resp);
	if (!s->ndjson) {
		MHD_del_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					"application/connect+json");
	}
}
