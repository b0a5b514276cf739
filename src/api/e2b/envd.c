/* SPDX-License-Identifier: MIT */
/*
 * envd on the API's port: which requests are envd's (the E2b-Sandbox-Id / -Port headers
 * the SDK sends on every envd call, or a Host <port>-<id>.<domain> under the configured
 * base domain), their authentication (X-Access-Token, the envdAccessToken issued at
 * create, compared in constant time; /health needs none; GET /files may carry a signature
 * instead), and the Connect answers: unary JSON, or a stream of envelopes
 * (application/connect+json) ended by an end-of-stream envelope, with keepalives.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define E2B_ID_MAX 64

/* --- base64 --------------------------------------------------------------------------- */

static const char b64tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *e2b_b64(const unsigned char *s, size_t n)
{
	char *out = xzalloc((n + 2) / 3 * 4 + 1), *o = out;
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		*o++ = b64tab[s[i] >> 2];
		*o++ = b64tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
		*o++ = b64tab[((s[i + 1] & 15) << 2) | (s[i + 2] >> 6)];
		*o++ = b64tab[s[i + 2] & 63];
	}
	if (i < n) {
		*o++ = b64tab[s[i] >> 2];
		*o++ = b64tab[((s[i] & 3) << 4) | (i + 1 < n ? s[i + 1] >> 4 : 0)];
		*o++ = i + 1 < n ? b64tab[(s[i + 1] & 15) << 2] : '=';
		*o++ = '=';
	}
	return out;
}

/* Standard or URL-safe alphabet, padding optional (protobuf's JSON accepts both). */
int e2b_unb64(const char *s, unsigned char **out, size_t *n)
{
	size_t len = strlen(s), o = 0;
	unsigned acc = 0, bits = 0;
	unsigned char *buf = xzalloc(len / 4 * 3 + 3);

	while (len && s[len - 1] == '=')
		len--;
	for (size_t i = 0; i < len; i++) {
		int v;
		char c = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
		const char *p = c ? strchr(b64tab, c) : NULL;

		if (!p) {
			free(buf);
			return -1;
		}
		v = (int)(p - b64tab);
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (unsigned char)(acc >> bits);
		}
	}
	*out = buf;
	*n = o;
	return 0;
}

/* --- answers -------------------------------------------------------------------------- */

const char *e2b_code_of_errno(int e)
{
	switch (e) {
	case ENOENT:
		return "not_found";
	case EINVAL:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
		return "invalid_argument";
	case EEXIST:
		return "already_exists";
	case EACCES:
	case EPERM:
		return "permission_denied";
	case E2BIG:
	case ENOSPC:
	case EDQUOT:
	case EAGAIN:
		return "resource_exhausted";
	case ESRCH:
		return "unavailable";
	case ETIMEDOUT:
		return "deadline_exceeded";
	default:
		return "internal";
	}
}

void e2b_unary_ok(struct api_req *r, json_t *msg)
{
	api_reply_json(r, 200, msg);
}

void e2b_unary_error(struct api_req *r, const char *code, const char *msg)
{
	unsigned st = e2b_connect_status(code);

	api_reply_json(r, st, json_pack("{s:s,s:s}", "code", code, "message", msg));
	if (st == 429)
		MHD_add_response_header(r->resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

void e2b_unary_al_error(struct api_req *r, const struct al_error *err)
{
	e2b_unary_error(r, e2b_code_of_errno(err ? err->code : EIO),
			err && err->msg ? err->msg : "internal error");
}

static bool e2b_ctype_is(struct api_req *r, const char *want)
{
	const char *ct =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	size_t n = strlen(want);

	return ct && strncasecmp(ct, want, n) == 0 && (ct[n] == '\0' || ct[n] == ';');
}

json_t *e2b_request_msg(struct api_req *r, bool stream)
{
	const char *code = NULL, *why = NULL, *msg = r->body ? r->body : "";
	size_t len = r->body_len;
	json_t *j;

	if (!e2b_ctype_is(r, stream ? "application/connect+json" : "application/json")) {
		api_reply_json(r, 415,
			       json_pack("{s:s,s:s}", "code", "invalid_argument", "message",
					 stream ? "a streaming call takes application/connect+json"
						: "a unary call takes application/json"));
		return NULL;
	}
	if (stream && e2b_connect_unwrap((const uint8_t *)msg, len, &msg, &len, &code, &why) < 0)
		goto bad;
	j = e2b_connect_json(msg, len, &code, &why);
	if (j)
		return j;
bad:
	if (stream) {
		struct e2b_stream *s = e2b_stream_new(r, NULL, NULL, NULL);

		e2b_stream_end(s, code, why);
		e2b_stream_reply(r, s);
	} else {
		e2b_unary_error(r, code, why);
	}
	return NULL;
}

/* --- routing and authentication ------------------------------------------------------- */

struct e2b_req {
	char *sbx, *team;
	unsigned port;
};

void e2b_req_free(void *p)
{
	struct e2b_req *q = p;

	if (!q)
		return;
	free(q->sbx);
	free(q->team);
	free(q);
}

const char *e2b_envd_sbx(struct api_req *r)
{
	return ((struct e2b_req *)r->e2b)->sbx;
}

static bool e2b_id_ok(const char *s, size_t n)
{
	if (n == 0 || n > E2B_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* Host "<port>-<id>.<domain>[:p]" under the configured domain: the id and the port. */
static bool e2b_host_target(struct api_req *r, char *id, size_t cap, unsigned *port)
{
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	const char *dom = r->api->e2b->domain, *dash, *dot;
	size_t hl, dl;
	char *end;
	unsigned long p;

	if (!host || !dom)
		return false;
	hl = strcspn(host, ":");
	dl = strlen(dom);
	dash = strchr(host, '-');
	if (hl <= dl + 1 || strncasecmp(host + hl - dl, dom, dl) != 0 || host[hl - dl - 1] != '.' ||
	    !dash)
		return false;
	dot = host + hl - dl - 1;
	p = strtoul(host, &end, 10);
	if (end != dash || p == 0 || p > 65535 || dot <= dash + 1 ||
	    (size_t)(dot - dash - 1) >= cap || !e2b_id_ok(dash + 1, (size_t)(dot - dash - 1)))
		return false;
	memcpy(id, dash + 1, (size_t)(dot - dash - 1));
	id[dot - dash - 1] = '\0';
	*port = (unsigned)p;
	return true;
}

/* The envd target of the request, from its headers or its Host; false if it has none. */
static bool e2b_target(struct api_req *r, char *id, size_t cap, unsigned *port)
{
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	const char *p = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Port");
	char *end;
	unsigned long v = E2B_ENVD_PORT;

	if (!h)
		return e2b_host_target(r, id, cap, port);
	if (p) {
		v = strtoul(p, &end, 10);
		if (*end || v == 0 || v > 65535)
			v = 0;
	}
	*port = (unsigned)v;
	if (!e2b_id_ok(h, strlen(h)) || strlen(h) >= cap) {
		id[0] = '\0';
		return true;
	}
	strcpy(id, h);
	return true;
}

static bool e2b_token_eq(const char *have, const char *want)
{
	size_t n = strlen(want), hl = have ? strlen(have) : 0;
	unsigned diff = (unsigned)(hl != n);

	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)want[i] ^ (unsigned char)(hl ? have[i % hl] : 0);
	return diff == 0;
}

/* The sandbox's team when the request may act on it (its token, or a route that checks a
 * signature itself); NULL otherwise. */
static char *e2b_authorize(struct api_req *r, const char *id, bool signed_ok)
{
	const char *tok = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Access-Token");
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	char *team = NULL;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, NULL, id);
	if (s && ((!tok && signed_ok) || e2b_token_eq(tok, s->token)))
		team = xstrdup(s->team);
	pthread_mutex_unlock(&e->mu);
	return team;
}

/*
 * May r reach a port of sandbox id other than envd's and the interpreter's (getHost)? As on
 * E2B: yes, unless its create said network.allowPublicTraffic: false; then the header
 * e2b-traffic-access-token must carry the create's trafficAccessToken. Only sandboxes of
 * the E2B front end are reached this way (others: their preview URLs, docs/ports.md).
 */
static int e2b_traffic_status(struct api_req *r, const char *id)
{
	const char *tok =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "e2b-traffic-access-token");
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	int st = 0;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, NULL, id);
	if (!s)
		st = 404;
	else if (e2b_traffic_private(s) && !e2b_token_eq(tok, s->token))
		st = 403;
	pthread_mutex_unlock(&e->mu);
	return st;
}

/* Envd's calls follow the E2B id to its daemon sandbox now (q->sbx); a paused sandbox
 * answers 502 (as a stopped one does: isRunning false, calls fail) and true. */
static bool e2b_route_current(struct api_req *r, const char *id)
{
	struct e2b_req *q = r->e2b;
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	bool paused;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, NULL, id);
	paused = s && s->state != E2B_RUNNING;
	if (s && !paused) {
		free(q->sbx);
		q->sbx = xstrdup(e2b_dm(s));
	}
	pthread_mutex_unlock(&e->mu);
	if (paused)
		api_reply_json(r, 502,
			       json_pack("{s:i,s:s}", "code", 502, "message",
					 "the sandbox is paused: a connect resumes it"));
	return paused;
}

static bool e2b_is_rpc(const char *url)
{
	return strncmp(url, "/process.Process/", 17) == 0 ||
	       strncmp(url, "/filesystem.Filesystem/", 23) == 0;
}

int e2b_envd_begin(struct api_req *r)
{
	struct api_router rt = {{api_e2b_envd_routes}, {api_e2b_envd_routes_n}, 1};
	struct api_router ci = {{api_e2b_jupyter_routes}, {api_e2b_jupyter_routes_n}, 1};
	_cleanup_free_ char *allow = NULL;
	struct e2b_req *q;
	char id[E2B_ID_MAX + 1];
	unsigned port = 0;
	enum api_match m;

	if (!e2b_target(r, id, sizeof(id), &port))
		return 0;
	q = xzalloc(sizeof(*q));
	r->e2b = q;
	q->sbx = xstrdup(id);
	q->port = port;
	if (!id[0] || !port) {
		e2b_unary_error(r, "invalid_argument", "bad E2b-Sandbox-Id or E2b-Sandbox-Port");
		return 1;
	}
	if (e2b_route_current(r, id))
		return 1; /* paused */
	if (port != E2B_ENVD_PORT && port != E2B_JUPYTER_PORT) {
		/* another port: the sandbox's own server, reverse-proxied (docs/ports.md) */
		int st = e2b_traffic_status(r, id);

		if (st == 404)
			api_reply_error_code(r, 404, "not_found", "no such sandbox");
		else if (st == 403)
			api_reply_error_code(r, 403, "forbidden",
					     "this sandbox's ports are private "
					     "(allowPublicTraffic: false): send its "
					     "trafficAccessToken as e2b-traffic-access-token");
		else
			api_proxy_take(r, q->sbx, port);
		return 1;
	}
	m = api_router_match(port == E2B_JUPYTER_PORT ? &ci : &rt, r->method, r->url, &r->route,
			     &r->params, &allow);
	if (m == API_MATCH_OK && (r->route->flags & API_ROUTE_NO_AUTH))
		return 1;
	q->team = e2b_authorize(r, id, m == API_MATCH_OK && (r->route->flags & API_ROUTE_SIGNED));
	if (!q->team) {
		e2b_unary_error(r, "unauthenticated",
				"missing or wrong X-Access-Token for this sandbox");
		return 1;
	}
	r->team = q->team;
	if (m == API_MATCH_NO_PATH && e2b_is_rpc(r->url))
		e2b_unary_error(r, "unimplemented", "no such envd method");
	else if (m == API_MATCH_NO_PATH)
		e2b_unary_error(r, "not_found", "no such envd route");
	else if (m == API_MATCH_NO_METHOD)
		e2b_unary_error(r, "unimplemented", "method not allowed on this envd route");
	return 1;
}

/* 204 while the sandbox runs; 502 (what the SDK reads as "not running") otherwise. */
static void e2b_health(struct api_req *r)
{
	_cleanup_json_ json_t *view = NULL;
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	char *team = NULL;
	const char *st;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, NULL, e2b_envd_sbx(r));
	if (s)
		team = xstrdup(s->team);
	pthread_mutex_unlock(&e->mu);
	if (team && dm_sandbox_get(r->api->d, team, e2b_envd_sbx(r), &view, NULL) == 0 &&
	    (st = json_string_value(json_object_get(view, "status"))) && strcmp(st, "running") == 0)
		api_reply_raw(r, 204, "text/plain", NULL, 0);
	else
		api_reply_json(
		    r, 502,
		    json_pack("{s:i,s:s}", "code", 502, "message", "the sandbox is not running"));
	free(team);
}

int e2b_user(struct api_req *r, const char *param, bool *root)
{
	const char *h =
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	_cleanup_free_ unsigned char *dec = NULL;
	const char *name = param;
	size_t n = 0;

	if (!name && h && strncasecmp(h, "Basic ", 6) == 0) {
		if (e2b_unb64(h + 6, &dec, &n) < 0)
			return -1;
		dec = xrealloc(dec, n + 1);
		dec[n] = '\0';
		dec[strcspn((char *)dec, ":")] = '\0';
		name = (const char *)dec;
	}
	if (!name || !name[0] || strcmp(name, "user") == 0) {
		*root = false;
		return 0;
	}
	if (strcmp(name, "root") == 0) {
		*root = true;
		return 0;
	}
	return -1;
}

#define PROC "/process.Process/"
#define FS "/filesystem.Filesystem/"
const struct api_route api_e2b_envd_routes[] = {
    {"GET", "/health", e2b_health, API_ROUTE_NO_AUTH},
    {"GET", "/files", e2b_files_get, API_ROUTE_SIGNED},
    {"POST", "/files", e2b_files_post, API_ROUTE_SIGNED | API_ROUTE_UPLOAD | API_ROUTE_RAW},
    {"POST", PROC "Start", e2b_proc_start, 0},
    {"POST", PROC "Connect", e2b_proc_connect, 0},
    {"POST", PROC "List", e2b_proc_list, 0},
    {"POST", PROC "SendInput", e2b_proc_input, 0},
    {"POST", PROC "SendSignal", e2b_proc_signal, 0},
    {"POST", PROC "CloseStdin", e2b_proc_close_stdin, 0},
    {"POST", PROC "Update", e2b_proc_update, 0},
    {"POST", FS "Stat", e2b_fs_stat, 0},
    {"POST", FS "MakeDir", e2b_fs_mkdir, 0},
    {"POST", FS "Move", e2b_fs_move, 0},
    {"POST", FS "ListDir", e2b_fs_list, 0},
    {"POST", FS "Remove", e2b_fs_remove, 0},
    {"POST", FS "WatchDir", e2b_fs_watch, 0},
    {"POST", FS "CreateWatcher", e2b_fs_watcher_create, 0},
    {"POST", FS "GetWatcherEvents", e2b_fs_watcher_events, 0},
    {"POST", FS "RemoveWatcher", e2b_fs_watcher_remove, 0},
};
const size_t api_e2b_envd_routes_n = sizeof(api_e2b_envd_routes) / sizeof(api_e2b_envd_routes[0]);
