/* SPDX-License-Identifier: MIT */
/* Shared by the files of src/api/ only: the server, the router, helpers for handlers. */
#ifndef AL_API_INTERNAL_H
#define AL_API_INTERNAL_H

#include "api/api.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

struct al_error;

/* --- auth (auth.c) ------------------------------------------------------- */

struct api_auth;
int api_auth_load(const char *path, struct api_auth **out, struct al_error **err);
/* The team of a presented token (constant time in the token's contents), or NULL. */
const char *api_auth_team(const struct api_auth *a, const char *token, size_t len);
/* The team for an "Authorization" header value ("Bearer TOKEN"), or NULL. */
const char *api_auth_header(const struct api_auth *a, const char *value);
/* A file of bare tokens (one a line, '#' comments), each standing for `who`; at least one. */
int api_auth_load_plain(const char *path, const char *who, struct api_auth **out,
			struct al_error **err);
/* True if a token of a is also one of b. */
bool api_auth_shared(const struct api_auth *a, const struct api_auth *b);
void api_auth_free(struct api_auth *a);

/* --- listening sockets (listen.c) -------------------------------------- */

int api_listen_tcp(const char *spec, int *out_fd, int *out_port, struct al_error **err);
int api_listen_unix(const char *path, int *out_fd, struct al_error **err);

/* --- router (router.c) --------------------------------------------------- */

struct api_req;
typedef void (*api_handler_fn)(struct api_req *r);

enum {
	API_ROUTE_NO_AUTH = 1 << 0, /* served without a token (health) */
	API_ROUTE_UPLOAD = 1 << 1,  /* body limited by max_upload instead of max_body */
	API_ROUTE_RAW = 1 << 2,	    /* body is raw bytes, not JSON */
	API_ROUTE_METRICS = 1 << 3, /* the metrics token, not an API token (metrics.c) */
	API_ROUTE_SIGNED = 1 << 4,  /* E2B envd: a signature may stand for the access token */
};

struct api_route {
	const char *method;
	const char *pattern; /* "/v1/sandboxes/{id}/commands/{cid}": a {name} is one segment */
	api_handler_fn fn;
	unsigned flags;
};

#define API_MAX_PARAMS 4
#define API_MAX_TABLES 4

struct api_router {
	const struct api_route *tables[API_MAX_TABLES];
	size_t sizes[API_MAX_TABLES];
	size_t n_tables;
};

enum api_match { API_MATCH_OK, API_MATCH_NO_PATH, API_MATCH_NO_METHOD };

struct api_params {
	const char *names[API_MAX_PARAMS]; /* point into the pattern */
	size_t name_lens[API_MAX_PARAMS];
	char *values[API_MAX_PARAMS]; /* heap copies */
	size_t n;
};

void api_router_add(struct api_router *rt, const struct api_route *table, size_t n);
/* On API_MATCH_NO_METHOD, *allow gets a heap "GET, POST" list. */
enum api_match api_router_match(const struct api_router *rt, const char *method, const char *path,
				const struct api_route **route, struct api_params *params,
				char **allow);
void api_params_clear(struct api_params *p);

/* Route tables. */
extern const struct api_route api_native_routes[];
extern const size_t api_native_routes_n;
extern const struct api_route api_metrics_routes[];
extern const size_t api_metrics_routes_n;

/* --- server state (server.c) --------------------------------------------- */

/* What one libmicrohttpd daemon serves: the API (every route, tokens checked), or the
 * metrics listener (its own routes, open). */
struct api_listener {
	struct api *api;
	const struct api_router *router;
	bool open; /* no token asked */
};

struct api {
	struct daemon *d;
	struct api_auth *auth;
	struct api_router router;
	struct api_router e2b_router; /* requests with X-API-KEY: E2B's control plane */
	struct MHD_Daemon *mhd_tcp;
	struct MHD_Daemon *mhd_unix;
	char *socket_path;
	int tcp_port;
	size_t max_body;
	size_t max_upload;
	unsigned timeout_s;
	bool stopping; /* read and written with __atomic builtins */
	struct api_listener main_l, metrics_l;
	struct api_auth *metrics_auth; /* --metrics-token-file, or NULL */
	struct api_router metrics_router;
	struct MHD_Daemon *mhd_metrics;
	int metrics_port;
	struct api_pty *pty;	    /* PTY tickets (pty_tickets.c) */
	char *preview_domain;	    /* proxy.c: <port>-<sandbox>.preview_domain, or NULL */
	struct e2b *e2b;	    /* the E2B front end's state (src/api/e2b/) */
	char *tls_cert, *tls_key;   /* PEM, NUL-terminated (tls.c), or NULL: no TLS */
	struct MHD_Daemon *mhd_tls; /* --tls-listen's listener, or NULL */
	unsigned upgrades;	    /* handlers of upgraded TLS connections running (__atomic) */
	int tls_port;
};

static inline bool api_stopping(const struct api *a)
{
	return __atomic_load_n(&a->stopping, __ATOMIC_ACQUIRE);
}

/* One request: created at the first call of the access handler, freed when MHD is done. */
struct api_req {
	struct api *api;
	const struct api_listener *listener;
	struct MHD_Connection *conn;
	const char *method;
	const char *url;
	const char *team;
	const struct api_route *route;
	struct api_params params;
	char *body;
	size_t body_len, body_cap, body_max;
	bool body_too_large;
	bool answered;
	char *raw_uri;			/* the request-target as sent (MHD's URI log) */
	struct api_proxy_target *proxy; /* a preview URL's sandbox and port (proxy.c) */
	/* What the handler produced; queued by the server. */
	struct MHD_Response *resp;
	unsigned status;
	void *e2b; /* an E2B envd request's target (src/api/e2b/envd.c), or NULL */
};

/* --- interactive PTY sessions (pty_tickets.c, ws_session.c; docs/pty.md) -------------- */

#define API_PTY_TOKEN_LEN 48	 /* hex of 24 random bytes */
#define API_PTY_TICKET_MS 60000	 /* a ticket opens its WebSocket within this */
#define API_PTY_TICKETS_MAX 1024 /* tickets waiting, all teams together */
#define API_PTY_ID_MAX 63	 /* a sandbox id */
struct api_pty;
struct api_pty *api_pty_new(uint64_t ttl_ms); /* 0: API_PTY_TICKET_MS */
void api_pty_free(struct api_pty *p);
uint64_t api_pty_ttl(const struct api_pty *p);
uint64_t api_pty_now_ms(void);
/* A fresh token for one WebSocket to sbx of team: 0, -EAGAIN (too many waiting). */
int api_pty_ticket_new(struct api_pty *p, const char *team, const char *sbx,
		       char token[API_PTY_TOKEN_LEN + 1]);
/* Spends the ticket of token: 0 with its team, -ENOENT (unknown or spent), -ETIMEDOUT
 * (expired), -EXDEV (for another sandbox). */
int api_pty_ticket_take(struct api_pty *p, const char *token, const char *sbx, const char **team);
/* POST: a ticket for sandbox {id}: {url (ws[s]://Host prefix id suffix), token, expiresInMs}.
 * GET (the WebSocket, token in ?token=): the session. */
void api_pty_offer(struct api_req *r, const char *prefix, const char *suffix);
void api_pty_ws(struct api_req *r);

/* --- preview URLs (proxy.c; docs/ports.md) ----------------------------------------------- */

/* Is r for a preview URL (its Host under the preview domain, or /preview/<sandbox>/<port>/)?
 * Then r->route and r->proxy are set: the request is proxied to that port of the sandbox. */
bool api_proxy_claim(struct api_req *r);
/* E2B's getHost (<port>-<id>.<--e2b-domain>): r is proxied to that port of the sandbox, any
 * port (not only declared ones), public as E2B's own URLs are by default. */
void api_proxy_take(struct api_req *r, const char *sbx, unsigned port);
/* The path form's prefix and the Vercel routes' entries: [{port, subdomain, url}]. */
#define API_PREVIEW_PREFIX "/preview/"
json_t *api_preview_routes(struct api_req *r, const char *sbx, json_t *ports);

/* --- TLS (tls.c) ----------------------------------------------------------------------- */

extern const char api_tls_priorities[]; /* GnuTLS priorities: TLS 1.2 and 1.3 only */
/* Reads and checks o's certificate and key into a (nothing without them). */
int api_tls_load(struct api *a, const struct api_opts *o, struct al_error **err);
void api_tls_free(struct api *a);
/* Did r come over TLS? Then the URLs it is given are https:// and wss://. */
bool api_req_tls(const struct api_req *r);
/*
 * Runs the handler of an upgraded connection (the PTY, a proxied WebSocket), fn(arg), which
 * ends with MHD_upgrade_action(CLOSE). Over plain TCP in the connection's thread, as MHD
 * hands it the client's socket; over TLS in a thread of its own, for libmicrohttpd relays
 * between the TLS session and the handler's socket in the connection's thread only once
 * the upgrade callback has returned. api_stop waits for those threads (api_upgrade_wait)
 * before it stops the daemons, which free the connections.
 */
void api_upgrade_run(struct MHD_Connection *c, struct api *a, int sock, void (*fn)(void *),
		     void *arg);
void api_upgrade_wait(struct api *a);

/* --- metrics (metrics.c) -------------------------------------------------- */

/* The metrics tokens and listener of o (api_start, before the API's listeners). */
int api_metrics_start(struct api *a, const struct api_opts *o, struct al_error **err);
/* Who may read a metrics route here: true if r was refused (401, 403, or 404 where
 * metrics are not served), false to go on. */
bool api_metrics_refused(struct api_req *r);
/* A libmicrohttpd daemon for l on fd; with tls, HTTPS with a's certificate. */
struct MHD_Daemon *api_mhd_start(struct api_listener *l, int fd, unsigned max_conn, bool tls);

/* --- the E2B front end (src/api/e2b/) ----------------------------------------------- */

struct e2b *e2b_open(const char *domain);
void e2b_close(struct e2b *e);
/* Claims a request aimed at a sandbox's envd (E2b-Sandbox-Id header, or a Host under the
 * E2B domain): routes and authenticates it, or builds the answer; 0 if it is not one. */
int e2b_envd_begin(struct api_req *r);
void e2b_req_free(void *q);
extern const struct api_route api_e2b_routes[];
extern const size_t api_e2b_routes_n;

/* --- responses (respond.c) ----------------------------------------------- */

/* A path parameter by name (always present when the pattern has it). */
const char *api_param(const struct api_req *r, const char *name);
/* A query argument, or NULL. */
const char *api_query(const struct api_req *r, const char *name);

/* Takes the reference of body. */
void api_reply_json(struct api_req *r, unsigned status, json_t *body);
/* Wraps obj under key: {key: obj}; takes the reference. */
void api_reply_wrapped(struct api_req *r, unsigned status, const char *key, json_t *obj);
void api_reply_ok(struct api_req *r);
void api_reply_error_code(struct api_req *r, unsigned status, const char *code, const char *msg);
/* Maps err->code (an errno) to a status and code; frees nothing. */
void api_reply_error(struct api_req *r, const struct al_error *err);
void api_reply_raw(struct api_req *r, unsigned status, const char *content_type, char *data,
		   size_t len); /* takes data (malloc'd) */
void api_reply_stream(struct api_req *r, struct MHD_Response *resp);
unsigned api_status_of_errno(int code, const char **name);
/* A complete JSON document as an ASCII-only compact string (heap), newline-terminated if nl. */
char *api_json_dump(json_t *j, bool nl, size_t *len);

/* --- JSON input (json_in.c) ---------------------------------------------- */

/* An EINVAL error with a formatted message (no strerror suffix). */
int api_bad(struct al_error **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses the request body as one JSON object (empty body = {}); strict. */
int api_body_object(struct api_req *r, json_t **out, struct al_error **err);
/* Parses the request body as any one JSON value (required). */
int api_body_value(struct api_req *r, json_t **out, struct al_error **err);

static inline void api_json_decrefp(json_t **j)
{
	json_decref(*j);
}
#define _cleanup_json_ __attribute__((cleanup(api_json_decrefp)))
/* Every key of obj must be listed in allowed (NULL-terminated). */
int api_json_fields(json_t *obj, const char *what, const char *const *allowed,
		    struct al_error **err);
/* Optional getters: absent (or null) leaves *out untouched and returns 0. */
int api_json_string(json_t *obj, const char *key, bool required, const char **out,
		    struct al_error **err);
int api_json_bool(json_t *obj, const char *key, bool *out, struct al_error **err);
int api_json_u64(json_t *obj, const char *key, bool required, uint64_t max, uint64_t *out,
		 struct al_error **err);
/* Bytes as an integer or a size string ("512M", "1G"). */
int api_json_size(json_t *obj, const char *key, uint64_t *out, struct al_error **err);
/* [port, ...]: at most max ports of 1..65535 into out (*n of them); absent or null: none. */
int api_json_ports(json_t *obj, const char *key, uint16_t *out, size_t max, size_t *n,
		   struct al_error **err);
/* {K: V} of strings -> heap array of heap "K=V" strings. */
int api_json_env(json_t *obj, const char *key, char ***out, size_t *n, struct al_error **err);
/* [strings] -> heap array of borrowed strings (valid while obj lives). */
int api_json_strings(json_t *obj, const char *key, const char ***out, size_t *n,
		     struct al_error **err);
void api_strv_free(char **v, size_t n);
/* Validates the shape of a network policy (the string or the object form). */
int api_policy_check(json_t *p, const char *what, struct al_error **err);
/* A query argument as a non-negative integer (absent: *out untouched). */
int api_query_u64(struct api_req *r, const char *name, uint64_t max, uint64_t *out,
		  struct al_error **err);
int api_query_bool(struct api_req *r, const char *name, bool *out, struct al_error **err);
/* True if the text is valid UTF-8 without NUL. */
bool api_utf8_valid(const char *s, size_t len);

/* --- NDJSON streaming (stream.c) ----------------------------------------- */

struct dm_logs;
enum api_stream_style {
	API_STREAM_NATIVE_RUN,	/* start line, output lines, exit line */
	API_STREAM_NATIVE_LOGS, /* output lines, exit line */
};
/*
 * Streams a command's output as NDJSON. Takes logs (closed at the end) and start
 * (the command view for the start line; may be NULL). Replies 200 application/x-ndjson.
 */
void api_stream_logs(struct api_req *r, enum api_stream_style style, const char *sbx,
		     const char *cmd, struct dm_logs *logs, json_t *start);
/*
 * A short command's answer in one piece: when a stream ends within API_HOLD_MS of its
 * request, having produced at most API_HOLD_MAX bytes, its lines go out as one response
 * with a Content-Length -- one write and one wake-up of the client, instead of a chunk per
 * line and the chunked terminator after them. Otherwise the stream starts with what was
 * gathered, at most API_HOLD_MS late. api_hold() runs step(ctx, timeout_ms) (which
 * produces output or returns after timeout_ms) until ended(ctx, &pending_bytes); true if
 * the stream ended. api_reply_ndjson_out() sends (*out)[0..len) and takes *out (malloc'd,
 * or NULL for nothing), leaving it NULL.
 */
#define API_HOLD_MS 10
#define API_HOLD_MAX (64u * 1024)
bool api_hold(struct api *a, void *ctx, int (*step)(void *, uint64_t),
	      bool (*ended)(void *, size_t *));
void api_reply_ndjson_out(struct api_req *r, char **out, size_t len);
/* True if the peer has closed the connection (checked without blocking). */
bool api_conn_gone(struct MHD_Connection *conn);

#endif
