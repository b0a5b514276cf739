/* SPDX-License-Identifier: MIT */
/*
 * Preview URLs (docs/ports.md): HTTP and WebSocket requests to a sandbox's declared port,
 * reverse-proxied through a connection made inside the sandbox's network namespace
 * (dm_sandbox_port_connect). Two forms:
 *
 *   host  http://<port>-<sandbox>.<--preview-domain>[:api-port]/path
 *   path  http://<api address>/preview/<sandbox>/<port>/path   (prefix stripped upstream)
 * (https:// both, on a listener with TLS: docs/daemon.md)
 *
 * A plain request goes upstream as HTTP/1.0 with "Connection: close" (so the answer is
 * never chunked and ends with the connection), its body collected first (up to
 * --max-upload); the answer's head is parsed strictly (net/http_req.c) and its body
 * streamed back. A WebSocket handshake goes upstream as HTTP/1.1; an upstream 101 upgrades
 * the client's connection too and bytes are then relayed both ways. Each request, or
 * each upgraded connection, is one inbound line of the sandbox's egress log.
 */
#include "api/api_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"
#include "net/http_req.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROXY_IO_S 60 /* a stalled upstream or client ends the exchange */

struct api_proxy_target {
	char sbx[API_PTY_ID_MAX + 1];
	unsigned port;
	const char *target; /* what goes upstream as the request-target (into raw_uri) */
	char prefix[API_PTY_ID_MAX + 32]; /* the path form's prefix ("" for the host form) */
	bool any_port;			  /* E2B's getHost: every port, not only declared ones */
};

static void api_proxy_serve(struct api_req *r);
static const struct api_route proxy_route = {"*", "(preview)", api_proxy_serve,
					     API_ROUTE_NO_AUTH | API_ROUTE_RAW | API_ROUTE_UPLOAD};

/* "<port>-<sandbox>" with port 1..65535 and an id of [a-z0-9_]. A '-' in the id stands for
 * its '_' (ids have none): "3000-sbx-abc" is sbx_abc, a DNS name's form, the one a TLS
 * listener hands out, for GnuTLS refuses a server name with '_' in the handshake. */
static bool parse_label(const char *p, size_t n, struct api_proxy_target *t)
{
	size_t i = 0;
	unsigned long port = 0;

	while (i < n && i < 5 && isdigit((unsigned char)p[i]))
		port = port * 10 + (unsigned long)(p[i++] - '0');
	if (i == 0 || p[0] == '0' || port > 65535 || i >= n || p[i] != '-' || n - i - 1 == 0 ||
	    n - i - 1 > API_PTY_ID_MAX)
		return false;
	for (size_t k = i + 1; k < n; k++)
		if (!islower((unsigned char)p[k]) && !isdigit((unsigned char)p[k]) && p[k] != '_' &&
		    p[k] != '-')
			return false;
	t->port = (unsigned)port;
	for (size_t k = i + 1; k < n; k++)
		t->sbx[k - i - 1] = p[k] == '-' ? '_' : p[k];
	t->sbx[n - i - 1] = '\0';
	return true;
}

static bool claim_host(struct api_req *r, struct api_proxy_target *t)
{
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	const char *dom = r->api->preview_domain, *dot;
	size_t hl, dl;

	if (!dom || !host)
		return false;
	hl = strcspn(host, ":"); /* the port the client used is not ours to judge */
	dl = strlen(dom);
	dot = memchr(host, '.', hl);
	if (!dot || (size_t)(host + hl - dot - 1) != dl || strncasecmp(dot + 1, dom, dl) != 0)
		return false;
	if (!parse_label(host, (size_t)(dot - host), t))
		return false;
	t->target = r->raw_uri;
	return true;
}

static bool claim_path(struct api_req *r, struct api_proxy_target *t)
{
	const char *u = r->raw_uri, *id, *slash, *end;
	char label[API_PTY_ID_MAX + 8];
	size_t idn;

	if (strncmp(u, API_PREVIEW_PREFIX, strlen(API_PREVIEW_PREFIX)) != 0)
		return false;
	id = u + strlen(API_PREVIEW_PREFIX);
	slash = strchr(id, '/');
	if (!slash || (size_t)(slash - id) > API_PTY_ID_MAX)
		return false;
	idn = (size_t)(slash - id);
	end = slash + 1 + strcspn(slash + 1, "/?");
	if ((size_t)(end - slash - 1) > 5)
		return false;
	snprintf(label, sizeof(label), "%.*s-%.*s", (int)(end - slash - 1), slash + 1, (int)idn,
		 id);
	if (!parse_label(label, strlen(label), t))
		return false;
	snprintf(t->prefix, sizeof(t->prefix), "%.*s", (int)(end - u), u);
	/* "/preview/sbx/8000" alone or with "?q": the root (request_head adds its "/") */
	t->target = *end == '/' ? end : NULL;
	return true;
}

bool api_proxy_claim(struct api_req *r)
{
	struct api_proxy_target t = {0};

	if (!r->raw_uri || (!claim_host(r, &t) && !claim_path(r, &t)))
		return false;
	r->proxy = xzalloc(sizeof(t));
	*r->proxy = t;
	r->route = &proxy_route;
	return true;
}

void api_proxy_take(struct api_req *r, const char *sbx, unsigned port)
{
	struct api_proxy_target t = {.port = port, .any_port = true, .target = r->raw_uri};

	snprintf(t.sbx, sizeof(t.sbx), "%s", sbx);
	r->proxy = xzalloc(sizeof(t));
	*r->proxy = t;
	r->route = &proxy_route;
}

/* --- the request upstream ----------------------------------------------------------------- */

static bool hop_by_hop(const char *k)
{
	static const char *const hop[] = {
	    "Connection", "Keep-Alive",	       "Proxy-Connection", "Proxy-Authorization", "TE",
	    "Trailer",	  "Transfer-Encoding", "Upgrade",	   "Content-Length",	  NULL};

	for (size_t i = 0; hop[i]; i++)
		if (strcasecmp(k, hop[i]) == 0)
			return true;
	return false;
}

struct head {
	char *p;
	size_t len, cap;
};

static void put(struct head *h, const char *s, size_t n)
{
	if (h->len + n + 1 > h->cap) {
		h->cap = (h->len + n + 1) * 2;
		h->p = xrealloc(h->p, h->cap);
	}
	memcpy(h->p + h->len, s, n);
	h->len += n;
	h->p[h->len] = '\0';
}

static void puts_(struct head *h, const char *s)
{
	put(h, s, strlen(s));
}

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
	if (!hop_by_hop(k)) {
		puts_(cls, k);
		puts_(cls, ": ");
		puts_(cls, v);
		puts_(cls, "\r\n");
	}
	return MHD_YES;
}

static bool is_websocket(struct api_req *r)
{
	const char *u = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Upgrade");

	return u && strcasecmp(u, "websocket") == 0 && strcmp(r->method, "GET") == 0;
}

static char *request_head(struct api_req *r, bool ws, size_t *len)
{
	const struct api_proxy_target *t = r->proxy;
	struct head h = {0};
	char num[32];

	puts_(&h, r->method);
	puts_(&h, " ");
	if (t->target) {
		puts_(&h, t->target);
	} else { /* the path form's root with a query */
		puts_(&h, "/");
		puts_(&h, r->raw_uri + strlen(t->prefix));
	}
	puts_(&h, ws ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, copy_header, &h);
	if (ws) {
		puts_(&h, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	} else {
		puts_(&h, "Connection: close\r\n");
		snprintf(num, sizeof(num), "%zu", r->body_len);
		if (r->body_len || strcmp(r->method, "POST") == 0 ||
		    strcmp(r->method, "PUT") == 0 || strcmp(r->method, "PATCH") == 0) {
			puts_(&h, "Content-Length: ");
			puts_(&h, num);
			puts_(&h, "\r\n");
		}
	}
	puts_(&h, "X-Forwarded-Proto: http\r\n");
	if (t->prefix[0]) {
		puts_(&h, "X-Forwarded-Prefix: ");
		puts_(&h, t->prefix);
		puts_(&h, "\r\n");
	}
	puts_(&h, "\r\n");
	*len = h.len;
	return h.p;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w, n -= (size_t)w;
	}
	return 0;
}

/* The upstream's response head into buf (and what came after it); its length, or -1. */
static long read_head(int fd, char *buf, size_t cap, size_t *got, struct net_http_resp *resp)
{
	long h = -2;

	*got = 0;
	while (h == -2 && *got < cap) {
		ssize_t n = recv(fd, buf + *got, cap - *got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		*got += (size_t)n;
		h = net_http_parse_response(buf, *got, resp);
	}
	return h;
}

/* --- the answer back ---------------------------------------------------------------------- */

struct relay {
	struct api *api;
	int fd;
	char sbx[API_PTY_ID_MAX + 1];
	unsigned port;
	int status;
	char what[96];
	char *rest; /* bytes after the head */
	size_t rest_len, rest_off;
	uint64_t in, out; /* into the sandbox, out of it */
	int sock;	  /* an upgraded connection's: the client's side */
	struct MHD_UpgradeResponseHandle *urh;
	char *extra; /* bytes after the request, read by MHD already */
	size_t extra_len;
};

static void relay_free(void *cls)
{
	struct relay *rl = cls;

	dm_sandbox_inbound_log(rl->api->d, rl->sbx, rl->port, rl->what, rl->status, rl->in,
			       rl->out);
	close(rl->fd);
	free(rl->rest);
	free(rl->extra);
	free(rl);
}

static ssize_t relay_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct relay *rl = cls;
	ssize_t n;

	if (rl->rest_off < rl->rest_len) {
		size_t k = rl->rest_len - rl->rest_off < max ? rl->rest_len - rl->rest_off : max;

		memcpy(buf, rl->rest + rl->rest_off, k);
		rl->rest_off += k;
		rl->out += k;
		return (ssize_t)k;
	}
	do
		n = recv(rl->fd, buf, max, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	rl->out += (uint64_t)n;
	return n;
}

/* Copy both ways until either side ends (an upgraded connection), PROXY_IO_S pass with no
 * byte either way, or airlockd stops. */
static void pump_both(struct relay *rl, int client)
{
	char buf[65536];
	int idle_ms = 0;

	while (idle_ms < PROXY_IO_S * 1000 && !api_stopping(rl->api)) {
		struct pollfd p[2] = {{.fd = client, .events = POLLIN},
				      {.fd = rl->fd, .events = POLLIN}};
		int k = poll(p, 2, 500);

		if (k < 0 && errno != EINTR)
			return;
		if (k <= 0) {
			idle_ms += k == 0 ? 500 : 0;
			continue;
		}
		idle_ms = 0;
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (!p[i].revents)
				continue;
			n = recv(p[i].fd, buf, sizeof(buf), 0);
			if (n <= 0 || send_all(p[1 - i].fd, buf, (size_t)n) < 0)
				return;
			*(i == 0 ? &rl->in : &rl->out) += (uint64_t)n;
		}
	}
}

static void run_relay(void *cls)
{
	struct relay *rl = cls;
	int sock = rl->sock;

	fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) & ~O_NONBLOCK);
	if ((!rl->extra_len || send_all(rl->fd, rl->extra, rl->extra_len) == 0) &&
	    (rl->rest_len == 0 || send_all(sock, rl->rest, rl->rest_len) == 0)) {
		rl->in += rl->extra_len;
		rl->out += rl->rest_len;
		pump_both(rl, sock);
	}
	MHD_upgrade_action(rl->urh, MHD_UPGRADE_ACTION_CLOSE);
	relay_free(rl);
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra,
		       size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct relay *rl = cls;

	rl->sock = sock;
	rl->urh = urh;
	rl->extra = xzalloc(extra_len + 1);
	memcpy(rl->extra, extra, extra_len);
	rl->extra_len = extra_len;
	api_upgrade_run(c, rl->api, sock, run_relay, rl);
}

static bool skip_response_header(const struct net_http_span *name)
{
	static const char *const skip[] = {"Connection",     "Keep-Alive", "Transfer-Encoding",
					   "Content-Length", "Upgrade",	   NULL};

	for (size_t i = 0; skip[i]; i++)
		if (name->len == strlen(skip[i]) && strncasecmp(name->p, skip[i], name->len) == 0)
			return true;
	return false;
}

static void answer(struct api_req *r, struct relay *rl, const struct net_http_resp *resp, bool ws)
{
	if (ws && resp->status == 101) {
		r->resp = MHD_create_response_for_upgrade(on_upgrade, rl);
		MHD_add_response_header(r->resp, "Upgrade", "websocket");
	} else {
		r->resp = MHD_create_response_from_callback(
		    resp->has_content_length ? resp->content_length : MHD_SIZE_UNKNOWN, 64 * 1024,
		    relay_read, rl, relay_free);
	}
	r->status = (unsigned)resp->status;
	for (size_t i = 0; i < resp->n_headers; i++) {
		const struct net_http_header *h = &resp->headers[i];
		_cleanup_free_ char *k = NULL, *v = NULL;

		if (skip_response_header(&h->name))
			continue;
		k = xasprintf("%.*s", (int)h->name.len, h->name.p);
		v = xasprintf("%.*s", (int)h->value.len, h->value.p);
		MHD_add_response_header(r->resp, k, v);
	}
}

/* The answer to a failed connect: its status (logged too). */
static unsigned proxy_error(struct api_req *r, const struct al_error *err)
{
	int c = err ? err->code : EIO;
	unsigned st = c == ENOENT ? 404 : c == EACCES ? 403 : c == ESRCH ? 410 : 502;
	const char *code = st == 404	       ? "not_found"
			   : st == 403	       ? "port_not_declared"
			   : st == 410	       ? "sandbox_stopped"
			   : c == ECONNREFUSED ? "port_not_listening"
					       : "bad_gateway";

	api_reply_error_code(r, st, code,
			     err && err->msg ? err->msg : "the sandbox did not answer");
	return st;
}

static void api_proxy_serve(struct api_req *r)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct api_proxy_target *t = r->proxy;
	bool ws = is_websocket(r);
	struct timeval tv = {PROXY_IO_S, 0};
	struct net_http_resp resp;
	_cleanup_free_ char *head = NULL, *buf = NULL;
	size_t head_len, got;
	struct relay *rl;
	long h;
	int fd;

	if (dm_sandbox_port_connect(r->api->d, NULL, t->sbx, t->port, t->any_port, &fd, &err) < 0) {
		unsigned st = proxy_error(r, err);

		if (st != 404) /* a sandbox that is not there has no log */
			dm_sandbox_inbound_log(r->api->d, t->sbx, t->port, r->method, (int)st, 0,
					       0);
		return;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	head = request_head(r, ws, &head_len);
	buf = xrealloc(NULL, NET_HTTP_MAX_HEAD);
	if (send_all(fd, head, head_len) < 0 ||
	    (r->body_len && send_all(fd, r->body, r->body_len) < 0) ||
	    (h = read_head(fd, buf, NET_HTTP_MAX_HEAD, &got, &resp)) < 0 || (resp.chunked && !ws)) {
		close(fd);
		dm_sandbox_inbound_log(r->api->d, t->sbx, t->port, r->method, 502, r->body_len, 0);
		return api_reply_error_code(r, 502, "bad_gateway",
					    "the sandbox's server gave no valid HTTP answer");
	}
	rl = xzalloc(sizeof(*rl));
	rl->api = r->api;
	rl->fd = fd;
	snprintf(rl->sbx, sizeof(rl->sbx), "%s", t->sbx);
	rl->port = t->port;
	rl->status = resp.status;
	snprintf(rl->what, sizeof(rl->what), "%s%s", ws ? "websocket " : "", r->method);
	rl->in = head_len + r->body_len;
	rl->out = (uint64_t)h;
	rl->rest_len = got - (size_t)h;
	rl->rest = xrealloc(NULL, rl->rest_len + 1);
	memcpy(rl->rest, buf + h, rl->rest_len);
	answer(r, rl, &resp, ws);
}

json_t *api_preview_routes(struct api_req *r, const char *sbx, json_t *ports)
{
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	const char *colon = host ? strchr(host, ':') : NULL;
	bool tls = api_req_tls(r);
	const char *scheme = tls ? "https" : "http";
	json_t *out = json_array(), *p;
	size_t i;

	if (!host || strpbrk(host, "/?#@ \t"))
		host = "localhost", colon = NULL;
	json_array_foreach(ports, i, p)
	{
		json_int_t port = json_integer_value(p);
		char *sub = xasprintf("%d-%s", (int)port, sbx), *url, *label = xstrdup(sub);

		if (tls) /* the DNS form (parse_label): no '_' in a TLS server name */
			for (char *c = label; *c; c++)
				*c = *c == '_' ? '-' : *c;
		url = r->api->preview_domain ? xasprintf("%s://%s.%s%s/", scheme, label,
							 r->api->preview_domain, colon ? colon : "")
					     : xasprintf("%s://%s" API_PREVIEW_PREFIX "%s/%d/",
							 scheme, host, sbx, (int)port);
		json_array_append_new(
		    out, json_pack("{s:I,s:s,s:s}", "port", port, "subdomain", sub, "url", url));
		free(sub);
		free(label);
		free(url);
	}
	return out;
}
