/* SPDX-License-Identifier: MIT */
/*
 * TLS termination for domains with per-request rules (docs/network.md,
 * "TLS termination and per-request rules").
 *
 * The sandbox's ClientHello was already judged (SNI = the checked name) and
 * the upstream connected to a vetted address. Here: finish the handshake
 * with a leaf minted by the sandbox's CA for that name (HTTP/1.1 only), read
 * ONE request with the strict parser, pick the first rule whose match holds,
 * and then
 *   response    answer from the gateway;
 *   forwardURL  send the request to that HTTPS URL instead (vetted, verified);
 *   transform   set the rule's headers (client copies of them are dropped);
 *   no match    pass the request on unchanged.
 * The upstream is verified (system CAs or --upstream-ca) with SNI and Host
 * pinned to the checked name before a byte of the request is sent, so a
 * failed verification gets 502 and never sees a secret. The response comes
 * back with every injected secret value overwritten ('*' of the same length,
 * so framing stays valid); a compressed response to a request that carried a
 * secret cannot be scanned and is refused (we ask for identity). One request
 * per connection: the answer says Connection: close.
 */
#include "gateway/gw.h"
#include "gateway/gw_mitm.h"
#include "gateway/ca.h"
#include "net/rules.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the CA and the two SSL_CTXs ---- */

static int alpn_select(SSL *s, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "http/1.1";

	for (unsigned int i = 0; i < inlen;) {
		unsigned int l = in[i];
		if (i + 1 + l > inlen)
			break;
		if (l == 8 && !memcmp(in + i + 1, h11, 8)) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + l;
	}
	return SSL_TLSEXT_ERR_NOACK; /* HTTP/1.1 without ALPN; never h2 */
}

static int make_ctxs(struct net_gateway *g, struct al_error **err)
{
	SSL_CTX *srv = SSL_CTX_new(TLS_server_method()), *cli = SSL_CTX_new(TLS_client_method());
	static const unsigned char alpn[] = "\x08http/1.1";

	if (!srv || !cli)
		goto fail;
	SSL_CTX_set_min_proto_version(srv, TLS1_2_VERSION);
	SSL_CTX_set_min_proto_version(cli, TLS1_2_VERSION);
	/* No session survives a policy change: no server cache, no tickets, no client reuse. */
	SSL_CTX_set_session_cache_mode(srv, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(srv, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_num_tickets(srv, 0);
	SSL_CTX_set_alpn_select_cb(srv, alpn_select, NULL);
	SSL_CTX_set_session_cache_mode(cli, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(cli, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_verify(cli, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_set_alpn_protos(cli, alpn, sizeof(alpn) - 1) != 0)
		goto fail;
	if (g->upstream_ca ? SSL_CTX_load_verify_locations(cli, g->upstream_ca, NULL) != 1
			   : SSL_CTX_set_default_verify_paths(cli) != 1) {
		SSL_CTX_free(srv);
		SSL_CTX_free(cli);
		return al_error_msg(err, EINVAL, "cannot load the upstream CA '%s'",
				    g->upstream_ca ? g->upstream_ca : "(system)");
	}
	g->ssl_srv = srv;
	g->ssl_cli = cli;
	return 0;
fail:
	SSL_CTX_free(srv);
	SSL_CTX_free(cli);
	return al_error_msg(err, ENOMEM, "TLS contexts");
}

int gw_tls_ensure(struct net_gateway *g, const struct net_policy *p, struct al_error **err)
{
	int r = 0;

	if (!net_policy_has_rules(p))
		return 0;
	pthread_mutex_lock(&g->tls_mu);
	if (!g->ca_dir) {
		r = al_error_msg(err, ENOTSUP,
				 "per-request rules need TLS termination, and this "
				 "gateway has no CA directory (--ca-dir)");
	} else if (!g->ca) {
		const char **names = xzalloc((p->n_domains + 1) * sizeof(char *));
		size_t n = 0;

		for (size_t i = 0; g->ca_constrain && i < p->n_domains; i++)
			names[n++] = p->domains[i].name; /* a subtree covers the apex and below */
		r = net_ca_open(g->ca_dir, g->sandbox_id, names, n, !g->ca_ephemeral, &g->ca, err);
		free(names);
		if (r == 0 && !g->ssl_srv)
			r = make_ctxs(g, err);
	}
	pthread_mutex_unlock(&g->tls_mu);
	return r;
}

void gw_tls_policy_changed(struct net_gateway *g)
{
	pthread_mutex_lock(&g->tls_mu);
	if (g->ca)
		net_ca_drop_leaves(g->ca);
	pthread_mutex_unlock(&g->tls_mu);
}

void gw_tls_free(struct net_gateway *g)
{
	net_ca_free(g->ca);
	SSL_CTX_free(g->ssl_srv);
	SSL_CTX_free(g->ssl_cli);
	g->ca = NULL;
	g->ssl_srv = g->ssl_cli = NULL;
}

/* ---- a BIO that first replays the ClientHello we already read, then the socket ---- */

static int replay_read(BIO *b, char *out, int len)
{
	struct replay *r = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (r->pre_off < r->pre_len) {
		size_t take = r->pre_len - r->pre_off;
		if (take > (size_t)len)
			take = (size_t)len;
		memcpy(out, r->pre + r->pre_off, take);
		r->pre_off += take;
		return (int)take;
	}
	if (gw_wait(r->g, r->fd, POLLIN, GW_IO_TIMEOUT_MS) < 0)
		return -1;
	/* ACK at once: a client whose TLS Finished is not answered (we send no session
	 * tickets) holds its request back under Nagle until our delayed ACK, ~40 ms. */
	setsockopt(r->fd, IPPROTO_TCP, TCP_QUICKACK, &(int){1}, sizeof(int));
	n = recv(r->fd, out, (size_t)len, 0);
	return n < 0 ? -1 : (int)n;
}

static int replay_write(BIO *b, const char *in, int len)
{
	struct replay *r = BIO_get_data(b);

	BIO_clear_retry_flags(b);
	return gw_send_all(r->fd, in, (size_t)len) < 0 ? -1 : len;
}

static long replay_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static BIO_METHOD *replay_method;
static pthread_once_t replay_once = PTHREAD_ONCE_INIT;

static void replay_init(void)
{
	replay_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "airlock-replay");
	BIO_meth_set_read(replay_method, replay_read);
	BIO_meth_set_write(replay_method, replay_write);
	BIO_meth_set_ctrl(replay_method, replay_ctrl);
}

/* ---- one terminated request ---- */

int mitm_write_all(SSL *s, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		int w = SSL_write(s, c, n > INT32_MAX ? INT32_MAX : (int)n);
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Answer the sandbox inside its TLS session, and log. */
void mitm_answer(struct mitm *m, int status, const char *reason, const char *text)
{
	char resp[1024];
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\nairlock: %s\n",
			 status, text, strlen(reason) + 10, reason);

	(void)mitm_write_all(m->cs, resp, (size_t)n);
	m->k->in += (uint64_t)n;
	m->k->refused = true;
	gw_log(m->k->g, &(struct gw_event){.layer = "tls",
					   .reason = reason,
					   .name = m->k->name,
					   .addr = &m->k->addr,
					   .port = m->k->port,
					   .bytes_out = m->k->out,
					   .bytes_in = m->k->in});
}

static bool hop_by_hop(const char *name, size_t len)
{
	static const char *const drop[] = {
	    "host", "connection", "proxy-connection", "proxy-authorization", "keep-alive",
	    "te",   "upgrade",	  "trailer",	      "http2-settings",	     "expect"};

	for (size_t i = 0; i < ARRAY_SIZE(drop); i++)
		if (len == strlen(drop[i]) && !strncasecmp(name, drop[i], len))
			return true;
	return false;
}

/* Overwrite every secret in buf[0..n) with '*'. */
void mitm_redact(struct mitm *m, char *buf, size_t n)
{
	for (size_t s = 0; s < m->n_secrets; s++) {
		size_t sl = strlen(m->secrets[s]);
		char *p = buf, *end = buf + n;

		while ((size_t)(end - p) >= sl &&
		       (p = memmem(p, (size_t)(end - p), m->secrets[s], sl))) {
			memset(p, '*', sl);
			p += sl;
			m->redacted++;
		}
	}
}

/* Read the request head from the sandbox's TLS stream into k->buf. 0 or -1 (answered). */
static int read_request(struct mitm *m, struct net_http_req *req)
{
	struct gw_conn *k = m->k;
	size_t last = 0;

	k->len = 0;
	for (;;) {
		long r;
		int n;

		memset(req, 0, sizeof(*req));
		if (k->len) {
			r = net_http_parse_request(k->buf, k->len, last, req);
			if (r >= 0)
				return 0;
			if (r == -1) {
				mitm_answer(m, req->status ? req->status : 400,
					    req->why ? req->why : "bad_request", "Bad Request");
				return -1;
			}
		}
		last = k->len;
		if (k->len >= NET_HTTP_MAX_HEAD) {
			mitm_answer(m, 431, "request_head_too_large",
				    "Request Header Fields Too Large");
			return -1;
		}
		n = SSL_read(m->cs, k->buf + k->len, (int)(NET_HTTP_MAX_HEAD - k->len));
		if (n <= 0) {
			if (k->len)
				mitm_answer(m, 400, "incomplete_request", "Bad Request");
			else /* e.g. a pinning client that refused our leaf after the handshake */
				gw_log(k->g,
				       &(struct gw_event){
					   .layer = "tls",
					   .reason = __atomic_load_n(&k->cut, __ATOMIC_SEQ_CST)
							 ? "policy_changed"
							 : "client_closed_before_request",
					   .name = k->name,
					   .addr = &k->addr,
					   .port = k->port});
			return -1;
		}
		k->len += (size_t)n;
	}
}

/* Connect TLS to the upstream on fd, verified for name. NULL on failure (*why set). */
static SSL *upstream_tls(struct mitm *m, int fd, const char *name, const char **why)
{
	SSL *s = SSL_new(m->k->g->ssl_cli);

	if (!s) {
		*why = "upstream_tls_error";
		return NULL;
	}
	SSL_set_fd(s, fd);
	SSL_set_tlsext_host_name(s, name);
	SSL_set_hostflags(s, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set1_host(s, name) != 1 || SSL_connect(s) != 1) {
		long v = SSL_get_verify_result(s);
		*why = v != X509_V_OK ? "upstream_tls_verify_failed" : "upstream_tls_failed";
		ERR_clear_error();
		SSL_free(s);
		return NULL;
	}
	{
		const unsigned char *proto = NULL;
		unsigned int plen = 0;

		SSL_get0_alpn_selected(s, &proto, &plen);
		if (plen && !(plen == 8 && !memcmp(proto, "http/1.1", 8))) {
			*why = "upstream_alpn_not_http1";
			SSL_free(s);
			return NULL;
		}
	}
	return s;
}

/* Build the request head for upstream; a new string. */
static char *build_head(struct mitm *m, const struct net_http_req *req, const struct net_rule *rule,
			const char *host, int port, const char *path_prefix, size_t *out_len)
{
	struct gw_conn *k = m->k;
	size_t cap = NET_HTTP_MAX_HEAD + 16384, n = 0;
	char *h = xzalloc(cap);
	bool inject = rule && rule->action == NET_RULE_TRANSFORM;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		int w_ = snprintf(h + n, cap - n, __VA_ARGS__);                                    \
		if (w_ < 0 || (size_t)w_ >= cap - n)                                               \
			goto full;                                                                 \
		n += (size_t)w_;                                                                   \
	} while (0)
	PUT("%.*s %s%.*s HTTP/1.1\r\nHost: %s", (int)req->method.len, req->method.p, path_prefix,
	    (int)req->path.len, req->path.p, host);
	if (port != 443)
		PUT(":%d", port);
	PUT("\r\n");
	for (size_t i = 0; i < req->n_headers; i++) {
		const struct net_http_header *f = &req->headers[i];
		bool skip = hop_by_hop(f->name.p, f->name.len);

		for (size_t j = 0; inject && !skip && j < rule->n_set; j++)
			skip = strlen(rule->set[j].name) == f->name.len &&
			       !strncasecmp(rule->set[j].name, f->name.p, f->name.len);
		/* with a secret aboard, the answer must come back readable for the scan */
		if (!skip && m->n_secrets && f->name.len == 15 &&
		    !strncasecmp(f->name.p, "accept-encoding", 15))
			skip = true;
		if (!skip)
			PUT("%.*s: %.*s\r\n", (int)f->name.len, f->name.p, (int)f->value.len,
			    f->value.p);
	}
	for (size_t j = 0; inject && j < rule->n_set; j++)
		PUT("%s: %s\r\n", rule->set[j].name, rule->set[j].value);
	if (m->n_secrets)
		PUT("Accept-Encoding: identity\r\n");
	if (rule && rule->action == NET_RULE_FORWARD)
		PUT("X-Airlock-Original-Host: %s\r\nX-Airlock-Sandbox: %s\r\n"
		    "X-Forwarded-Host: %s\r\n",
		    k->name, k->g->sandbox_id, k->name);
	PUT("Connection: close\r\n\r\n");
#undef PUT
	*out_len = n;
	return h;
full:
	free(h);
	return NULL;
}

static long tls_read(void *ctx, void *buf, size_t n)
{
	return SSL_read(ctx, buf, n > INT32_MAX ? INT32_MAX : (int)n);
}

static int tls_write(void *ctx, const void *buf, size_t n)
{
	return mitm_write_all(ctx, buf, n);
}

/* A chunked request body: passed on byte for byte while the strict decoder checks it. */
static int copy_chunked(struct mitm *m, const struct net_http_req *req)
{
	struct gw_conn *k = m->k;

	return gw_relay_chunked(k, k->buf + req->head_len, k->len - req->head_len,
				&(struct gw_io){.ctx = m->cs, .read = tls_read},
				&(struct gw_io){.ctx = m->us, .write = tls_write});
}

/* The request body: exactly Content-Length bytes from the sandbox to upstream. */
static int copy_body(struct mitm *m, const struct net_http_req *req)
{
	struct gw_conn *k = m->k;
	uint64_t left = req->has_content_length ? req->content_length : 0;
	size_t have = k->len - req->head_len, take = have < left ? have : (size_t)left;
	_cleanup_free_ char *buf = xzalloc(65536);

	if (take && mitm_write_all(m->us, k->buf + req->head_len, take) < 0)
		return -1;
	left -= take;
	k->out += take;
	while (left > 0) {
		int n = SSL_read(m->cs, buf, left < 65536 ? (int)left : 65536);
		if (n <= 0 || mitm_write_all(m->us, buf, (size_t)n) < 0)
			return -1;
		left -= (uint64_t)n;
		k->out += (uint64_t)n;
	}
	return 0;
}

/* A synthetic response from the rule. */
static void synthesize(struct mitm *m, const struct net_rule *r)
{
	_cleanup_free_ char *h = xzalloc(16384 + r->body_len);
	size_t n = 0;

	n += (size_t)sprintf(h, "HTTP/1.1 %d %s\r\n", r->status, r->status < 400 ? "OK" : "Error");
	if (r->content_type)
		n += (size_t)sprintf(h + n, "Content-Type: %s\r\n", r->content_type);
	for (size_t i = 0; i < r->n_resp_headers; i++)
		n += (size_t)snprintf(h + n, 16384 - n - 64, "%s: %s\r\n", r->resp_headers[i].name,
				      r->resp_headers[i].value);
	if (r->status != 204 && r->status != 304)
		n += (size_t)sprintf(h + n, "Content-Length: %zu\r\n", r->body_len);
	n += (size_t)sprintf(h + n, "Connection: close\r\n\r\n");
	if (r->body) {
		memcpy(h + n, r->body, r->body_len);
		n += r->body_len;
	}
	(void)mitm_write_all(m->cs, h, n);
	m->k->in += n;
}

/*
 * The sandbox's side of the tunnel: a leaf certificate for the checked name, signed by
 * the gateway's CA, and the TLS handshake over what the sandbox has sent so far (the
 * ClientHello the SNI was read from is replayed first). leaf and lkey are the caller's
 * to free, whatever happened. -1: refused and logged.
 */
static int accept_client_tls(struct mitm *m, void **leaf, void **lkey)
{
	struct gw_conn *k = m->k;
	struct net_gateway *g = k->g;
	struct al_error *err = NULL;
	BIO *bio;

	pthread_mutex_lock(&g->tls_mu);
	if (g->ca && net_ca_leaf(g->ca, k->name, leaf, lkey, &err) < 0)
		*leaf = NULL;
	pthread_mutex_unlock(&g->tls_mu);
	al_error_free(err);
	if (!*leaf) {
		gw_conn_deny(k, "tls_no_ca", k->name, 0);
		return -1;
	}
	pthread_once(&replay_once, replay_init);
	m->cs = SSL_new(g->ssl_srv);
	bio = m->cs ? BIO_new(replay_method) : NULL;
	if (!bio) {
		gw_conn_deny(k, "tls_error", k->name, 0);
		return -1;
	}
	m->rp = (struct replay){.g = g, .fd = k->c, .pre = k->buf, .pre_len = k->len};
	BIO_set_data(bio, &m->rp);
	BIO_set_init(bio, 1);
	SSL_set_bio(m->cs, bio, bio);
	SSL_use_certificate(m->cs, *leaf);
	SSL_use_PrivateKey(m->cs, *lkey);
	if (SSL_accept(m->cs) != 1) {
		ERR_clear_error();
		gw_conn_deny(k, "tls_client_handshake_failed", k->name, 0);
		return -1;
	}
	return 0;
}

/*
 * What no rule may allow inside the tunnel. Host must be the checked name (origin-form;
 * absolute-form only with https, which the parser does not take, so origin-form it is),
 * and TRACE is refused. -1: answered and logged.
 */
static int check_request(struct mitm *m, const struct net_http_req *req)
{
	char canon[NET_NAME_MAX + 1];

	if (req->form != NET_HTTP_ORIGIN && req->form != NET_HTTP_ASTERISK) {
		mitm_answer(m, 400, "not_origin_form", "Bad Request");
		return -1;
	}
	if (net_name_canon(req->host.p, req->host.len, canon, NULL) < 0 ||
	    strcmp(canon, m->k->name)) {
		mitm_answer(m, 421, "host_mismatch", "Misdirected Request");
		return -1;
	}
	if (req->method.len == 5 && !memcmp(req->method.p, "TRACE", 5)) {
		mitm_answer(m, 405, "trace_refused", "Method Not Allowed");
		return -1;
	}
	return 0;
}

/*
 * Send the request upstream (the checked name, or a forward rule's target, dialled here
 * into *fwd_fd, which the caller closes), over TLS, with the head rebuilt and the body
 * copied, then relay the response. -1: answered or logged, or the response cut.
 */
static int forward_request(struct mitm *m, const struct net_http_req *req,
			   const struct net_rule *rule, int *fwd_fd)
{
	struct gw_conn *k = m->k;
	const char *host = k->name, *prefix = "", *why = NULL;
	int port = k->port, ufd = k->u, br;
	size_t hl;
	_cleanup_free_ char *head = NULL;

	if (rule && rule->action == NET_RULE_FORWARD) {
		struct net_addr fa;

		*fwd_fd = gw_dial(k, rule->fwd_host, rule->fwd_port, &fa, &why);
		if (*fwd_fd < 0) {
			mitm_answer(m, 502, why ? why : "forward_failed", "Bad Gateway");
			return -1;
		}
		host = rule->fwd_host;
		port = rule->fwd_port;
		prefix = rule->fwd_prefix;
		ufd = *fwd_fd;
	}
	setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	m->us = upstream_tls(m, ufd, host, &why);
	if (!m->us) {
		mitm_answer(m, 502, why, "Bad Gateway");
		return -1;
	}
	head = build_head(m, req, rule, host, port, prefix, &hl);
	if (!head) {
		mitm_answer(m, 431, "request_head_too_large", "Request Header Fields Too Large");
		return -1;
	}
	if (mitm_write_all(m->us, head, hl) < 0) {
		mitm_answer(m, 502, "upstream_write_failed", "Bad Gateway");
		return -1;
	}
	br = req->chunked ? copy_chunked(m, req) : copy_body(m, req);
	if (br == -2) { /* the upstream saw a cut body: it gets no more */
		mitm_answer(m, 400, "bad_chunked_body", "Bad Request");
		return -1;
	}
	if (br < 0) {
		mitm_answer(m, 502, "upstream_write_failed", "Bad Gateway");
		return -1;
	}
	k->out += hl;
	return mitm_relay_response(m);
}

void gw_mitm_serve(struct gw_conn *k, const struct net_rules *rules)
{
	struct mitm m = {.k = k};
	struct net_http_req *req = xzalloc(sizeof(*req));
	const struct net_rule *rule;
	void *leaf = NULL, *lkey = NULL;
	const char *verdict;
	int fwd_fd = -1;

	k->layer = "tls";
	/* Records go out as they are made: without this, Nagle and delayed ACKs add ~40 ms. */
	setsockopt(k->c, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	setsockopt(k->u, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	if (accept_client_tls(&m, &leaf, &lkey) < 0)
		goto out;
	if (read_request(&m, req) < 0)
		goto out;
	if (check_request(&m, req) < 0)
		goto out;
	rule = net_rules_match(rules, &(struct net_rule_req){.method = req->method.p,
							     .method_len = req->method.len,
							     .path = req->path.p,
							     .path_len = req->path.len,
							     .headers = req->headers,
							     .n_headers = req->n_headers});
	if (rule && rule->action == NET_RULE_RESPONSE) {
		synthesize(&m, rule);
		gw_conn_log_allow(k, "rule_response");
		goto out;
	}
	m.n_secrets = net_rule_secret_tokens(rule, m.secrets, NET_SECRET_MAX_TOKENS);
	m.max_secret = m.n_secrets ? strlen(m.secrets[0]) : 0;
	m.head_req = req->method.len == 4 && !memcmp(req->method.p, "HEAD", 4);
	if (forward_request(&m, req, rule, &fwd_fd) < 0)
		goto out;
	verdict = !rule				     ? "passthrough"
		  : rule->action == NET_RULE_FORWARD ? "rule_forward"
						     : "rule_transform";
	gw_conn_log_allow(k, verdict);
out:
	if (m.us) {
		SSL_shutdown(m.us);
		SSL_free(m.us);
	}
	if (m.cs) {
		SSL_shutdown(m.cs);
		SSL_free(m.cs);
	}
	if (fwd_fd >= 0)
		close(fwd_fd);
	X509_free(leaf);
	EVP_PKEY_free(lkey);
	free(req);
	for (size_t i = 0; i < m.n_secrets; i++)
		free(m.secrets[i]);
}
