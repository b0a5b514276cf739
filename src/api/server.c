/* SPDX-License-Identifier: MIT */
/*
 * The HTTP server: libmicrohttpd, one thread per connection (handlers and
 * streaming callbacks may block), bounded in connection memory (so headers
 * are bounded: oversized ones get a 4xx from libmicrohttpd), body size,
 * idle time and number of connections.
 *
 * A request goes: route lookup -> bearer token -> 404/405 -> body collected up
 * to its limit (413 beyond) -> handler -> the response it built is queued.
 */
#include "api/api_internal.h"
#include "api/vercel/routes_vercel.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define API_DEFAULT_MAX_BODY (1024 * 1024)
#define API_DEFAULT_MAX_UPLOAD (256ul * 1024 * 1024)
#define API_CONN_MEMORY (64 * 1024)
/* Past its limit, a body is read and dropped (for a clean 413) up to this much more. */
#define API_DISCARD_SLACK (16ul * 1024 * 1024)

static enum MHD_Result api_queue(struct api_req *r)
{
	enum MHD_Result ret;

	if (!r->resp)
		api_reply_error_code(r, 500, "internal", "the handler produced no response");
	ret = MHD_queue_response(r->conn, r->status, r->resp);
	MHD_destroy_response(r->resp);
	r->resp = NULL;
	r->answered = true;
	return ret;
}

static void api_reply_unauthorized(struct api_req *r)
{
	api_reply_error_code(r, 401, "unauthorized", "missing or invalid bearer token");
	MHD_add_response_header(r->resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
}

/* Size checks before any body byte is read. */
static void api_req_check_length(struct api_req *r)
{
	const char *cl =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *expect =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
	unsigned long long len;
	char *end = NULL;

	if (!cl)
		return;
	errno = 0;
	len = strtoull(cl, &end, 10);
	if (errno || *end || len <= r->body_max)
		return;
	/*
	 * Too large. Answer now when the client waits for "100 Continue" or when
	 * reading the body to the end would be too much; else read and drop it
	 * so the client sees the 413 rather than a reset connection.
	 */
	if (expect || len > r->body_max + API_DISCARD_SLACK)
		api_reply_error_code(r, 413, "payload_too_large", "request body too large");
	r->body_too_large = true;
}

static int hexval(char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* What a connection carries from one request to the next (MHD's socket context). */
struct api_conn {
	bool saw_nul; /* the request being parsed had a %00 in its path or query */
};

static void api_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
			    enum MHD_ConnectionNotificationCode toe)
{
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		*socket_context = xzalloc(sizeof(struct api_conn));
	} else {
		free(*socket_context);
		*socket_context = NULL;
	}
}

static struct api_conn *api_conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *i =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return i ? i->socket_context : NULL;
}

/*
 * Percent-decoding of the path and the query arguments, as libmicrohttpd's own (%HH),
 * except "%00": a NUL byte cut the string where the router or a handler read it, so that
 * ".../sbx_x%00junk" reached sbx_x and "?path=/a%00.b" read /a. It is left as it is and
 * noted, and the request is refused (api_req_begin).
 */
static size_t api_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	struct api_conn *ac = api_conn_of(c);
	char *w = s;
	const char *p = s;

	while (*p) {
		if (p[0] == '%' && p[1] == '0' && p[2] == '0') {
			if (ac)
				ac->saw_nul = true;
			*w++ = *p++;
		} else if (p[0] == '%' && isxdigit((unsigned char)p[1]) &&
			   isxdigit((unsigned char)p[2])) {
			*w++ = (char)(hexval(p[1]) << 4 | hexval(p[2]));
			p += 3;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

struct framing {
	unsigned n_length, n_encoding, n_host, n_auth;
	bool bad_name;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	struct framing *f = cls;

	f->n_length += strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0;
	f->n_encoding += strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0;
	f->n_host += strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0;
	f->n_auth += strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0;
	f->bad_name |= !key[0] || key[strcspn(key, " \t")] != '\0';
	return MHD_YES;
}

/*
 * Requests whose framing two parsers could read differently (RFC 9112 6.1, 6.3, 3.2,
 * 5.1): Content-Length twice or with Transfer-Encoding, an HTTP/1.1 request without
 * exactly one Host, blanks in a field name. 400, and the connection closed after it, so
 * that nothing left in it is read as a request of its own.
 */
static bool api_req_bad_framing(struct api_req *r, const char *version)
{
	struct framing f = {0, 0, 0, 0, false};
	const char *why = NULL;

	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_framing, &f);
	if (f.n_length > 1)
		why = "more than one Content-Length";
	else if (f.n_length && f.n_encoding)
		why = "both Content-Length and Transfer-Encoding";
	else if (f.n_encoding > 1)
		why = "more than one Transfer-Encoding";
	else if (f.bad_name)
		why = "a blank in a header field name";
	else if (f.n_auth > 1) /* which one would a proxy in front have checked? */
		why = "more than one Authorization";
	else if (version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && f.n_host != 1)
		why = f.n_host ? "more than one Host" : "no Host header";
	if (!why)
		return false;
	api_reply_error_code(r, 400, "bad_request", why);
	MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONNECTION, "close");
	return true;
}

/* First call: route, authenticate, check the declared length. May build a response. */
static void api_req_begin(struct api_req *r, const char *version)
{
	struct api *a = r->api;
	_cleanup_free_ char *allow = NULL;
	enum api_match m;

	struct api_conn *ac = api_conn_of(r->conn);

	if (api_req_bad_framing(r, version))
		return;
	if (api_proxy_claim(r)) { /* a preview URL (proxy.c): public, as Vercel's */
		r->body_max = a->max_upload;
		api_req_check_length(r);
		return;
	}
	if (ac && ac->saw_nul) {
		ac->saw_nul = false;
		return api_reply_error_code(r, 400, "bad_request",
					    "a NUL byte (%00) in the URL's path or query");
	}

	if (r->listener == &a->main_l && e2b_envd_begin(r)) { /* a sandbox's envd (E2B) */
		if (!r->resp) {
			r->body_max =
			    (r->route->flags & API_ROUTE_UPLOAD) ? a->max_upload : a->max_body;
			api_req_check_length(r);
		}
		return;
	}
	/* E2B's control plane shares paths with Vercel's (/v2/sandboxes): its SDK is the one
	 * that authenticates with X-API-KEY. */
	const char *key = r->listener == &a->main_l
			      ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-API-KEY")
			      : NULL;

	m = key ? api_router_match(&a->e2b_router, r->method, r->url, &r->route, &r->params, &allow)
		: API_MATCH_NO_PATH;
	if (key && m == API_MATCH_NO_PATH)
		key = NULL; /* not an E2B route: X-API-KEY is no credential of the other APIs */
	if (!key)
		m = api_router_match(r->listener->router, r->method, r->url, &r->route, &r->params,
				     &allow);
	if (key) {
		r->team = key[0] ? api_auth_team(a->auth, key, strlen(key)) : NULL;
		if (!r->team) /* E2B's error shape: {code, message} */
			return api_reply_json(r, 401,
					      json_pack("{s:i,s:s}", "code", 401, "message",
							"missing or invalid X-API-KEY"));
	} else if (m == API_MATCH_OK && (r->route->flags & API_ROUTE_METRICS)) {
		if (api_metrics_refused(r))
			return;
	} else if (!r->listener->open &&
		   !(m == API_MATCH_OK && (r->route->flags & API_ROUTE_NO_AUTH))) {
		const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
							    MHD_HTTP_HEADER_AUTHORIZATION);

		r->team = api_auth_header(a->auth, h);
		if (!r->team)
			return api_reply_unauthorized(r);
	}
	if (m == API_MATCH_NO_PATH)
		return api_reply_error_code(r, 404, "not_found", "no such route");
	if (m == API_MATCH_NO_METHOD) {
		api_reply_error_code(r, 405, "bad_request", "method not allowed on this path");
		MHD_add_response_header(r->resp, MHD_HTTP_HEADER_ALLOW, allow);
		return;
	}
	r->body_max = (r->route->flags & API_ROUTE_UPLOAD) ? a->max_upload : a->max_body;
	api_req_check_length(r);
}

/* Appends a piece of body; false to drop the connection (far too much data). */
static bool api_req_append(struct api_req *r, const char *data, size_t n)
{
	if (r->body_too_large || r->body_len + n > r->body_max) {
		r->body_too_large = true;
		r->body_len += n; /* counts dropped bytes from here on */
		return r->body_len <= r->body_max + API_DISCARD_SLACK;
	}
	if (r->body_len + n + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;

		while (cap < r->body_len + n + 1)
			cap *= 2;
		r->body = xrealloc(r->body, cap);
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, n);
	r->body_len += n;
	r->body[r->body_len] = '\0';
	return true;
}

static enum MHD_Result api_access(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **con_cls)
{
	struct api_req *r = *con_cls;

	if (!r || !r->conn) { /* r: made by api_uri_log with the raw URI, or not at all */
		const struct api_listener *l = cls;

		if (!r)
			r = xzalloc(sizeof(*r));
		r->api = l->api;
		r->listener = l;
		r->conn = conn;
		r->method = method;
		r->url = url;
		*con_cls = r;
		api_req_begin(r, version);
		return r->resp ? api_queue(r) : MHD_YES;
	}
	if (*upload_size) {
		bool keep = r->answered || api_req_append(r, upload_data, *upload_size);

		*upload_size = 0;
		return keep ? MHD_YES : MHD_NO;
	}
	if (r->answered)
		return MHD_YES;
	if (r->body_too_large)
		api_reply_error_code(r, 413, "payload_too_large", "request body too large");
	else
		r->route->fn(r);
	return api_queue(r);
}

static void api_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			  enum MHD_RequestTerminationCode toe)
{
	struct api_req *r = *con_cls;

	if (!r)
		return;
	if (r->resp)
		MHD_destroy_response(r->resp);
	api_params_clear(&r->params);
	e2b_req_free(r->e2b);
	free(r->body);
	free(r->raw_uri);
	free(r->proxy);
	free(r);
	*con_cls = NULL;
}

/* The request-target as the client sent it (the preview proxy forwards it as it is). */
static void *api_uri_log(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct api_req *r = xzalloc(sizeof(*r));

	r->raw_uri = xstrdup(uri);
	return r;
}

static void api_mhd_log(void *cls, const char *fmt, va_list ap)
{
	/* Library code does not print; libmicrohttpd's messages are dropped. */
}

struct MHD_Daemon *api_mhd_start(struct api_listener *l, int fd, unsigned max_conn, bool tls)
{
	struct api *a = l->api;
	/* HTTPS: the PEM strings stay in a until the daemon stops (tls.c). */
	struct MHD_OptionItem tls_opts[] = {
	    {MHD_OPTION_HTTPS_MEM_CERT, 0, a->tls_cert},
	    {MHD_OPTION_HTTPS_MEM_KEY, 0, a->tls_key},
	    {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)api_tls_priorities},
	    {MHD_OPTION_END, 0, NULL}};

	return MHD_start_daemon(
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
		MHD_ALLOW_UPGRADE | /* the PTY's WebSocket (ws_session.c) */
		(tls ? MHD_USE_TLS : 0),
	    0, NULL, NULL, api_access, l, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_CONN_MEMORY,
	    MHD_OPTION_CONNECTION_LIMIT, max_conn, MHD_OPTION_CONNECTION_TIMEOUT, a->timeout_s,
	    /* One thread per connection: small stacks keep thousands of idle
	     * clients from costing memory or locking others out. */
	    MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024), MHD_OPTION_NOTIFY_COMPLETED,
	    api_completed, a, MHD_OPTION_EXTERNAL_LOGGER, api_mhd_log, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, api_conn_notify, NULL, MHD_OPTION_UNESCAPE_CALLBACK,
	    api_unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, api_uri_log, NULL,
	    MHD_OPTION_STRICT_FOR_CLIENT, 1, MHD_OPTION_ARRAY, tls ? tls_opts : &tls_opts[3],
	    MHD_OPTION_END);
}

/* A TCP listener on spec (TLS with tls): its daemon and bound port. */
static int api_start_tcp(struct api *a, const char *spec, bool tls, unsigned max_conn,
			 struct MHD_Daemon **mhd, int *port, struct al_error **err)
{
	int fd = -1;

	if (api_listen_tcp(spec, &fd, port, err) < 0)
		return -EINVAL;
	*mhd = api_mhd_start(&a->main_l, fd, max_conn, tls);
	if (!*mhd) {
		close(fd);
		return al_error_msg(err, EIO, "start the %s server on '%s'", tls ? "HTTPS" : "HTTP",
				    spec);
	}
	return 0;
}

static int api_start_listeners(struct api *a, const struct api_opts *o, struct al_error **err)
{
	unsigned max_conn = o->max_connections ? o->max_connections : 8192;
	/* With a certificate, the TCP listener is HTTPS unless --tls-listen has its own. */
	bool tls_main = a->tls_cert && !o->tls_listen;
	int fd = -1;

	if (o->listen &&
	    api_start_tcp(a, o->listen, tls_main, max_conn, &a->mhd_tcp, &a->tcp_port, err) < 0)
		return -EINVAL;
	if (tls_main && a->mhd_tcp)
		a->tls_port = a->tcp_port;
	if (o->tls_listen &&
	    api_start_tcp(a, o->tls_listen, true, max_conn, &a->mhd_tls, &a->tls_port, err) < 0)
		return -EINVAL;
	if (o->socket_path) {
		if (api_listen_unix(o->socket_path, &fd, err) < 0)
			return -EINVAL;
		a->socket_path = xstrdup(o->socket_path);
		a->mhd_unix = api_mhd_start(&a->main_l, fd, max_conn, false);
		if (!a->mhd_unix) {
			close(fd);
			return al_error_msg(err, EIO, "start the HTTP server on '%s'",
					    o->socket_path);
		}
	}
	return 0;
}

int api_start(struct daemon *d, const struct api_opts *o, struct api **out, struct al_error **err)
{
	struct api *a;

	if (!o->listen && !o->tls_listen && !o->socket_path)
		return al_error_from(err, EINVAL, "api: no listen address and no socket path");
	a = xzalloc(sizeof(*a));
	a->d = d;
	a->max_body = o->max_body ? o->max_body : API_DEFAULT_MAX_BODY;
	a->max_upload = o->max_upload ? o->max_upload : API_DEFAULT_MAX_UPLOAD;
	a->timeout_s = o->timeout_s ? o->timeout_s : 60;
	api_router_add(&a->router, api_native_routes, api_native_routes_n);
	api_router_add(&a->router, api_vercel_routes, api_vercel_routes_n);
	api_router_add(&a->router, api_metrics_routes, api_metrics_routes_n);
	api_router_add(&a->e2b_router, api_e2b_routes, api_e2b_routes_n);
	a->e2b = e2b_open(o->e2b_domain);
	a->main_l = (struct api_listener){a, &a->router, false};
	a->pty = api_pty_new(o->pty_ticket_ms);
	a->preview_domain = o->preview_domain ? xstrdup(o->preview_domain) : NULL;
	if (api_auth_load(o->tokens_path, &a->auth, err) < 0 || api_tls_load(a, o, err) < 0 ||
	    api_metrics_start(a, o, err) < 0 || api_start_listeners(a, o, err) < 0) {
		api_stop(a);
		return al_error_wrap(err, "api");
	}
	*out = a;
	return 0;
}

int api_tcp_port(const struct api *a)
{
	return a->mhd_tcp ? a->tcp_port : 0;
}

int api_tls_port(const struct api *a)
{
	return a->tls_port;
}

void api_stop(struct api *a)
{
	if (!a)
		return;
	__atomic_store_n(&a->stopping, true, __ATOMIC_SEQ_CST); /* api_upgrade_run reads it */
	/* Before the daemons stop: they free an upgraded TLS connection whose handler, in
	 * its own thread, has not closed it yet (the handlers end on stopping). */
	api_upgrade_wait(a);
	if (a->mhd_tcp)
		MHD_stop_daemon(a->mhd_tcp);
	if (a->mhd_unix)
		MHD_stop_daemon(a->mhd_unix);
	if (a->mhd_tls)
		MHD_stop_daemon(a->mhd_tls);
	if (a->mhd_metrics)
		MHD_stop_daemon(a->mhd_metrics);
	api_auth_free(a->metrics_auth);
	if (a->socket_path)
		unlink(a->socket_path);
	free(a->socket_path);
	api_auth_free(a->auth);
	api_pty_free(a->pty);
	free(a->preview_domain);
	e2b_close(a->e2b);
	api_tls_free(a); /* after the daemons: they read the PEM strings */
	free(a);
}
