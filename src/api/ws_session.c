/* SPDX-License-Identifier: MIT */
/*
 * Interactive PTY sessions over a WebSocket (docs/pty.md): the offer of a ticket, the
 * upgrade, and the session itself. The protocol is the @vercel/sandbox CLI's: a text
 * "start" frame {type, command, args, env ["K=V"], cwd, cols, rows}; binary frames carry
 * the terminal's input one way and its output the other; a text {type: "resize", cols,
 * rows}; the server ends with a text {type: "exit", code} and a close.
 *
 * One session holds the connection's thread (libmicrohttpd's upgrade handler, which reads
 * the client) and one more thread that pumps the command's output (dm_logs_next) to it.
 * Framing is ws.c's; writes from both threads go under one mutex.
 */
#include "api/api_internal.h"
#include "api/ws.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define WS_FRAME_MAX (1u << 20) /* a frame's and a message's payload */
#define WS_START_MS 30000	/* the start frame comes within this */
#define WS_CLOSE_WAIT_MS 2000	/* after our close, for the client's */
#define WS_TICK_MS 200

struct ws_sess {
	struct api *api;
	int fd;
	pthread_mutex_t wmu;
	bool close_sent; /* under wmu */
	bool done;	 /* __atomic: stop, both threads */
	const char *team;
	char sbx[API_PTY_ID_MAX + 1];
	char *cmd; /* the command's id once started */
	uint8_t *in;
	size_t in_len, in_cap;
	struct ws_seq seq;
	uint8_t *msg; /* the data message being assembled */
	size_t msg_len;
	uint8_t msg_op;
	struct MHD_UpgradeResponseHandle *urh;
	char *extra; /* bytes after the request, read by MHD already */
	size_t extra_len;
};

static bool sess_done(struct ws_sess *s)
{
	return __atomic_load_n(&s->done, __ATOMIC_ACQUIRE) || api_stopping(s->api);
}

/* Header and payload in one sendmsg: two writes would meet Nagle's algorithm and the
 * client's delayed ACK (40 ms a keystroke). */
static int write_frame(int fd, const uint8_t *h, size_t hl, const void *p, size_t n)
{
	struct iovec iov[2] = {{(void *)h, hl}, {(void *)p, n}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = n ? 2 : 1};

	while (iov[0].iov_len || iov[1].iov_len) {
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		for (int i = 0; i < 2 && w > 0; i++) {
			size_t k = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;

			iov[i].iov_base = (uint8_t *)iov[i].iov_base + k;
			iov[i].iov_len -= k;
			w -= (ssize_t)k;
		}
		m.msg_iov = iov[0].iov_len ? iov : iov + 1;
		m.msg_iovlen = iov[0].iov_len ? 2 : 1;
	}
	return 0;
}

/* One server frame; nothing more after a close. */
static int send_frame(struct ws_sess *s, uint8_t op, const void *p, size_t n)
{
	uint8_t h[WS_MAX_HEADER];
	size_t hl = ws_header(h, op, true, n);
	int r = -1;

	pthread_mutex_lock(&s->wmu);
	if (!s->close_sent) {
		s->close_sent = op == WS_CLOSE;
		r = write_frame(s->fd, h, hl, p, n);
	}
	pthread_mutex_unlock(&s->wmu);
	return r;
}

static void send_close(struct ws_sess *s, uint16_t code, const char *reason)
{
	uint8_t p[WS_MAX_CONTROL];

	send_frame(s, WS_CLOSE, p, ws_close_payload(p, code, reason));
}

static void send_json(struct ws_sess *s, json_t *j)
{
	size_t n;
	_cleanup_free_ char *t = api_json_dump(j, false, &n);

	json_decref(j);
	send_frame(s, WS_TEXT, t, n);
}

/* --- output: the pump thread ----------------------------------------------------------- */

/* The exit frame's code: the exit status, or 128 + the signal. */
static int exit_code(struct ws_sess *s)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *v = NULL;
	int code = -1;

	if (dm_cmd_get(s->api->d, s->team, s->sbx, s->cmd, &v, &err) == 0) {
		json_t *ec = json_object_get(v, "exit_code"), *sg = json_object_get(v, "signal");

		code = json_is_integer(ec)   ? (int)json_integer_value(ec)
		       : json_is_integer(sg) ? 128 + (int)json_integer_value(sg)
					     : -1;
		json_decref(v);
	}
	return code;
}

static void *pump(void *arg)
{
	struct ws_sess *s = arg;
	_cleanup_error_ struct al_error *err = NULL;
	struct dm_logs *l = NULL;
	char *buf = xrealloc(NULL, 64 * 1024);
	int r = -1, stream;
	size_t len;

	if (dm_logs_open(s->api->d, s->team, s->sbx, s->cmd, &l, &err) == 0) {
		while (!sess_done(s)) {
			r = dm_logs_next(l, buf, 64 * 1024, &stream, &len, WS_TICK_MS);
			if (r == 1 && send_frame(s, WS_BINARY, buf, len) < 0)
				break;
			if (r == 0 || (r < 0 && r != -ETIMEDOUT))
				break;
		}
		dm_logs_close(l);
	}
	free(buf);
	if (r == 0) {
		send_json(s, json_pack("{s:s,s:i}", "type", "exit", "code", exit_code(s)));
		send_close(s, WS_CLOSE_NORMAL, "exited");
	} else if (!sess_done(s)) {
		send_close(s, WS_CLOSE_INTERNAL, "reading the command's output failed");
	}
	return NULL;
}

/* --- input: the client's messages --------------------------------------------------------- */

/* The start frame: the command, on a PTY, and its pump. 0, or -1 after a close was sent. */
static int start(struct ws_sess *s, json_t *j, pthread_t *th)
{
	static const char *const fields[] = {"type", "command", "args", "env",
					     "cwd",  "cols",	"rows", NULL};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_free_ const char **args = NULL, **env = NULL;
	struct dm_exec e = {0};
	uint64_t cols = 80, rows = 24;

	if (api_json_fields(j, "the start message", fields, &err) < 0 ||
	    api_json_string(j, "command", true, &e.cmd, &err) < 0 ||
	    api_json_strings(j, "args", &args, &e.n_args, &err) < 0 ||
	    api_json_strings(j, "env", &env, &e.n_env, &err) < 0 ||
	    api_json_string(j, "cwd", false, &e.cwd, &err) < 0 ||
	    api_json_u64(j, "cols", false, 65535, &cols, &err) < 0 ||
	    api_json_u64(j, "rows", false, 65535, &rows, &err) < 0) {
		send_close(s, WS_CLOSE_POLICY, err->msg);
		return -1;
	}
	e.args = args, e.env = env;
	e.tty = true, e.keep_stdin = true;
	e.cols = cols ? (unsigned)cols : 80, e.rows = rows ? (unsigned)rows : 24;
	if (e.cwd && !e.cwd[0])
		e.cwd = NULL;
	if (dm_cmd_start(s->api->d, s->team, s->sbx, &e, &s->cmd, &err) < 0) {
		send_close(s, WS_CLOSE_POLICY, err->msg);
		return -1;
	}
	if (pthread_create(th, NULL, pump, s) != 0) {
		send_close(s, WS_CLOSE_INTERNAL, "no thread for the session");
		return -1;
	}
	return 0;
}

static int on_text(struct ws_sess *s, pthread_t *th, bool *started)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_json_ json_t *j = NULL;
	const char *type = NULL;
	uint64_t cols = 0, rows = 0;

	j = json_loadb((const char *)s->msg, s->msg_len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(j) || api_json_string(j, "type", true, &type, &err) < 0) {
		send_close(s, WS_CLOSE_POLICY, "a text message is a JSON object with a type");
		return -1;
	}
	if (!*started && strcmp(type, "start") == 0) {
		*started = true;
		return start(s, j, th);
	}
	if (*started && strcmp(type, "resize") == 0) {
		if (api_json_u64(j, "cols", true, 65535, &cols, &err) < 0 ||
		    api_json_u64(j, "rows", true, 65535, &rows, &err) < 0 ||
		    dm_cmd_resize(s->api->d, s->team, s->sbx, s->cmd, (unsigned)rows,
				  (unsigned)cols, &err) < 0) {
			if (err->code == ESRCH) /* it ended meanwhile: its exit frame follows */
				return 0;
			send_close(s, WS_CLOSE_POLICY, err->msg);
			return -1;
		}
		return 0;
	}
	send_close(s, WS_CLOSE_POLICY,
		   *started ? "expected a resize message" : "expected a start message first");
	return -1;
}

static int on_message(struct ws_sess *s, pthread_t *th, bool *started)
{
	_cleanup_error_ struct al_error *err = NULL;

	if (s->msg_op == WS_TEXT) {
		if (!ws_utf8_valid(s->msg, s->msg_len)) {
			send_close(s, WS_CLOSE_BAD_DATA, "a text message that is not UTF-8");
			return -1;
		}
		return on_text(s, th, started);
	}
	if (!*started) {
		send_close(s, WS_CLOSE_POLICY, "expected a start message first");
		return -1;
	}
	/* Input after the command ended, or past its stdin's room, is dropped. */
	if (s->msg_len &&
	    dm_cmd_write_stdin(s->api->d, s->team, s->sbx, s->cmd, s->msg, s->msg_len, false,
			       &err) < 0 &&
	    err->code != ESRCH && err->code != EPIPE) {
		send_close(s, WS_CLOSE_INTERNAL, err->msg);
		return -1;
	}
	return 0;
}

/* One frame: 1 to go on, 0 when the session is over, -1 after a close for an error. */
static int on_frame(struct ws_sess *s, struct ws_frame *f, pthread_t *th, bool *started)
{
	int r = ws_seq_check(&s->seq, f, WS_FRAME_MAX);

	if (r < 0) {
		send_close(s,
			   r == -E2BIG	  ? WS_CLOSE_TOO_BIG
			   : r == -EILSEQ ? WS_CLOSE_BAD_DATA
					  : WS_CLOSE_PROTOCOL,
			   "malformed frame");
		return -1;
	}
	switch (f->op) {
	case WS_CLOSE:
		send_close(s, WS_CLOSE_NORMAL, ""); /* the echo, unless ours went first */
		return 0;
	case WS_PING:
		send_frame(s, WS_PONG, f->payload, f->len);
		return 1;
	case WS_PONG:
		return 1;
	case WS_TEXT:
	case WS_BINARY:
		s->msg_op = f->op;
		s->msg_len = 0;
		break;
	default:
		break;
	}
	s->msg = xrealloc(s->msg, s->msg_len + f->len + 1);
	memcpy(s->msg + s->msg_len, f->payload, f->len);
	s->msg_len += f->len;
	if (!f->fin)
		return 1;
	return on_message(s, th, started) < 0 ? -1 : 1;
}

/* Parse what is buffered; as on_frame. */
static int drain(struct ws_sess *s, pthread_t *th, bool *started)
{
	size_t off = 0;
	int r = 1;

	while (r > 0 && off < s->in_len) {
		struct ws_frame f;
		long n = ws_parse(s->in + off, s->in_len - off, WS_FRAME_MAX, &f);

		if (n == 0)
			break;
		if (n < 0) {
			send_close(s, n == -E2BIG ? WS_CLOSE_TOO_BIG : WS_CLOSE_PROTOCOL,
				   n == -E2BIG ? "frame too large" : "malformed frame");
			return -1;
		}
		off += (size_t)n;
		r = on_frame(s, &f, th, started);
	}
	memmove(s->in, s->in + off, s->in_len - off);
	s->in_len -= off;
	return r;
}

/* Read what comes until the session ends. */
static void read_loop(struct ws_sess *s, pthread_t *th, bool *started)
{
	uint64_t begun = api_pty_now_ms(), closed_at = 0;

	while (!api_stopping(s->api)) {
		struct pollfd p = {.fd = s->fd, .events = POLLIN};
		bool sent;
		ssize_t n;

		pthread_mutex_lock(&s->wmu);
		sent = s->close_sent;
		pthread_mutex_unlock(&s->wmu);
		if (sent && !closed_at)
			closed_at = api_pty_now_ms();
		if ((closed_at && api_pty_now_ms() - closed_at > WS_CLOSE_WAIT_MS) ||
		    (!*started && api_pty_now_ms() - begun > WS_START_MS))
			return;
		if (poll(&p, 1, WS_TICK_MS) <= 0)
			continue;
		if (s->in_cap - s->in_len < 64 * 1024) {
			s->in_cap = s->in_cap ? s->in_cap * 2 : 128 * 1024;
			if (s->in_cap > 2 * WS_FRAME_MAX + 64 * 1024)
				return; /* cannot happen: a frame is capped before it is whole */
			s->in = xrealloc(s->in, s->in_cap);
		}
		n = recv(s->fd, s->in + s->in_len, s->in_cap - s->in_len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return;
		s->in_len += (size_t)n;
		if (drain(s, th, started) <= 0)
			return;
	}
	send_close(s, WS_CLOSE_GOING_AWAY, "airlockd is stopping");
}

static void session(struct ws_sess *s, const char *extra, size_t extra_len)
{
	pthread_t th;
	bool started = false, have_th;
	struct timeval tv = {10, 0}; /* a client that reads nothing does not hold us forever */

	setsockopt(s->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)); /* keystrokes */
	fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) & ~O_NONBLOCK);
	s->in_cap = extra_len + 128 * 1024;
	s->in = xrealloc(NULL, s->in_cap);
	memcpy(s->in, extra, extra_len);
	s->in_len = extra_len;
	if (!extra_len || drain(s, &th, &started) > 0)
		read_loop(s, &th, &started);
	have_th = started && s->cmd;
	__atomic_store_n(&s->done, true, __ATOMIC_RELEASE);
	if (s->cmd) { /* the terminal hung up: the command goes with it (a no-op if ended) */
		_cleanup_error_ struct al_error *err = NULL;

		dm_cmd_kill(s->api->d, s->team, s->sbx, s->cmd, SIGKILL, &err);
	}
	if (have_th)
		pthread_join(th, NULL);
}

static void run_session(void *cls)
{
	struct ws_sess *s = cls;

	session(s, s->extra, s->extra_len);
	MHD_upgrade_action(s->urh, MHD_UPGRADE_ACTION_CLOSE);
	pthread_mutex_destroy(&s->wmu);
	free(s->cmd);
	free(s->in);
	free(s->msg);
	free(s->extra);
	free(s);
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra,
		       size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct ws_sess *s = cls;

	s->fd = sock;
	s->urh = urh;
	s->extra = xzalloc(extra_len + 1);
	memcpy(s->extra, extra, extra_len);
	s->extra_len = extra_len;
	api_upgrade_run(c, s->api, sock, run_session, s);
}

/* --- the routes ---------------------------------------------------------------------------- */

static bool header_has(struct api_req *r, const char *name, const char *token)
{
	const char *v = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
	size_t n = strlen(token);

	while (v && *v) {
		v += strspn(v, " \t,");
		if (strncasecmp(v, token, n) == 0 && strchr(" \t,", v[n]))
			return true;
		v += strcspn(v, ",");
	}
	return false;
}

void api_pty_ws(struct api_req *r)
{
	const char *key =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
	const char *ver =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Version");
	const char *sbx = api_param(r, "id"), *team = NULL;
	char accept[WS_ACCEPT_LEN + 1];
	struct ws_sess *s;
	int t;

	if (!header_has(r, MHD_HTTP_HEADER_UPGRADE, "websocket") ||
	    !header_has(r, MHD_HTTP_HEADER_CONNECTION, "upgrade") || ws_accept(key, accept) < 0)
		return api_reply_error_code(r, 400, "bad_request",
					    "a WebSocket handshake (RFC 6455 4.1) is expected");
	if (!ver || strcmp(ver, "13") != 0) {
		api_reply_error_code(r, 426, "upgrade_required", "Sec-WebSocket-Version 13 only");
		MHD_add_response_header(r->resp, "Sec-WebSocket-Version", "13");
		return;
	}
	t = api_pty_ticket_take(r->api->pty, api_query(r, "token"), sbx, &team);
	if (t == -ETIMEDOUT)
		return api_reply_error_code(r, 401, "unauthorized", "the PTY token has expired");
	if (t == -EXDEV)
		return api_reply_error_code(r, 403, "forbidden",
					    "the PTY token is for another sandbox");
	if (t < 0)
		return api_reply_error_code(r, 401, "unauthorized",
					    "unknown or already used PTY token");
	s = xzalloc(sizeof(*s));
	s->api = r->api;
	s->team = team;
	snprintf(s->sbx, sizeof(s->sbx), "%s", sbx);
	pthread_mutex_init(&s->wmu, NULL);
	r->resp = MHD_create_response_for_upgrade(on_upgrade, s);
	r->status = MHD_HTTP_SWITCHING_PROTOCOLS;
	MHD_add_response_header(r->resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(r->resp, "Sec-WebSocket-Accept", accept);
}

void api_pty_offer(struct api_req *r, const char *prefix, const char *suffix)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *sbx = api_param(r, "id");
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	char token[API_PTY_TOKEN_LEN + 1];
	json_t *v = NULL;
	int t;

	if (dm_sandbox_get(r->api->d, r->team, sbx, &v, &err) < 0)
		return api_reply_error(r, err);
	t = strcmp(json_string_value(json_object_get(v, "status")), "running");
	json_decref(v);
	if (t != 0)
		return api_reply_error_code(r, 410, "sandbox_stopped",
					    "the sandbox is not running");
	t = api_pty_ticket_new(r->api->pty, r->team, sbx, token);
	if (t < 0)
		return api_reply_error_code(r, t == -EAGAIN ? 429 : 500, "pty_tickets",
					    "no PTY ticket now: too many waiting");
	if (!host || !host[0] || strpbrk(host, "/?#@ \t"))
		host = "localhost";
	api_reply_json(r, 200,
		       json_pack("{s:s++++,s:s,s:I}", "url", api_req_tls(r) ? "wss://" : "ws://",
				 host, prefix, sbx, suffix, "token", token, "expiresInMs",
				 (json_int_t)api_pty_ttl(r->api->pty)));
}
