/* SPDX-License-Identifier: MIT */
/*
 * The gateway's proxy: explicit (CONNECT and absolute-URI HTTP on :3128) and
 * transparent (every other TCP connection, redirected to :3129). One thread
 * per connection, capped. For every connection: read what the sandbox states
 * (request head or TLS ClientHello), canonicalize the name, ONE decision
 * (net_policy_decide_name), resolve the name ourselves, vet every address,
 * dial the vetted one, and only then let bytes through. The destination the
 * sandbox dialled (transparent mode) is logged, never trusted.
 */
#include "gateway/gw.h"
#include "net/http_req.h"
#include "net/tls_hello.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX NET_HTTP_MAX_HEAD
#define SPLICE_IDLE_MS (10 * 60 * 1000)
#define PIPE_IDLE_MS 250	/* a tunnel quiet this long gives its pipes back */
#define RELAY_CHUNK (1 << 20)	/* what one splice asks for, and a grown relay pipe's size */
#define PIPE_DEFAULT (64 << 10) /* a new pipe's size */

/* Answer an explicit-proxy client with an error status (transparent ones are just closed). */
static void respond(struct gw_conn *k, const char *reason, int status)
{
	static const char *const text[] = {
	    [400] = "Bad Request", [403] = "Forbidden", [502] = "Bad Gateway"};
	char resp[512];
	int n;

	if (status && !k->transparent) {
		n = snprintf(resp, sizeof(resp),
			     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			     "Content-Length: %zu\r\n\r\nairlock: %s\n",
			     status, text[status], strlen(reason) + 10, reason);
		(void)!send(k->c, resp, (size_t)n, MSG_NOSIGNAL);
	}
}

/* Log a refusal and answer it. */
static void deny(struct gw_conn *k, const char *reason, const char *name, int status)
{
	k->refused = true;
	gw_log(k->g, &(struct gw_event){
			 .layer = k->layer, .reason = reason, .name = name, .port = k->port});
	respond(k, reason, status);
}

/* Read more from the client into k->buf; 0, or -1 on EOF/timeout/full. */
static int read_more(struct gw_conn *k)
{
	ssize_t n;

	if (k->len >= HEAD_MAX || gw_wait(k->g, k->c, POLLIN, GW_IO_TIMEOUT_MS) < 0)
		return -1;
	n = recv(k->c, k->buf + k->len, HEAD_MAX - k->len, 0);
	if (n <= 0)
		return -1;
	k->len += (size_t)n;
	return 0;
}

/* Live connections, so that a tightened policy can cut them: the lowest free slot below
 * the high-water mark, else the next one. */
static void register_conn(struct gw_conn *k)
{
	struct net_gateway *g = k->g;

	pthread_mutex_lock(&g->mu);
	for (int i = 0; i < GW_MAX_CONNS && k->slot < 0; i++)
		if (!g->conns[i]) {
			g->conns[i] = k;
			k->slot = i;
			if (i >= g->conns_hi)
				g->conns_hi = i + 1;
		}
	pthread_mutex_unlock(&g->mu);
}

static void unregister_conn(struct gw_conn *k)
{
	pthread_mutex_lock(&k->g->mu);
	if (k->slot >= 0 && k->g->conns[k->slot] == k)
		k->g->conns[k->slot] = NULL;
	k->slot = -1;
	pthread_mutex_unlock(&k->g->mu);
}

void gw_proxy_rejudge(struct net_gateway *g)
{
	pthread_mutex_lock(&g->mu);
	for (int i = 0; i < g->conns_hi; i++) {
		struct gw_conn *k = g->conns[i];
		const char *reason = NULL;
		bool ok;

		/* Not dialled yet: its gates judge it under the policy then in force. */
		if (!k || __atomic_load_n(&k->u, __ATOMIC_SEQ_CST) < 0)
			continue;
		/* A terminated flow ran under the old rules: always cut it. */
		ok = !__atomic_load_n(&k->terminated, __ATOMIC_SEQ_CST) &&
		     (k->literal ? gw_decide_literal(g, &k->addr, &reason) == NET_ALLOW
				 : gw_decide_name(g, k->name, &reason) == NET_ALLOW &&
				       gw_vet(g, &k->addr, &reason) == NET_ALLOW);
		if (ok)
			continue;
		/* Mark it first, then cut both directions: the connection's thread wakes on the
		 * shutdown and must already see why (it logs and cleans up). */
		__atomic_store_n(&k->cut, true, __ATOMIC_SEQ_CST);
		shutdown(k->c, SHUT_RDWR);
		if (k->u >= 0)
			shutdown(k->u, SHUT_RDWR);
	}
	pthread_mutex_unlock(&g->mu);
}

/* k's stated name (or, for an IP literal, the address alone) and address a, judged by the
 * policy in force; policy_lock is held by the caller. */
static bool allowed_locked(struct gw_conn *k, const struct net_addr *a, const char **reason)
{
	struct net_gateway *g = k->g;

	if (k->literal)
		return net_addr_decide_literal(a, g->policy, &g->vet, reason) == NET_ALLOW;
	return net_policy_decide_name(g->policy, k->name, reason) == NET_ALLOW &&
	       net_addr_vet(a, g->policy, &g->vet, reason) == NET_ALLOW;
}

/*
 * Connect to the first of addrs[0..n) that answers (IPv4 only); the blocking socket, or
 * -1, or -2 when gate (the sandbox's connection) is no longer allowed. With a gate, each
 * attempt's SYN leaves under the policy lock, judged by the policy in force then: a policy
 * change waits for it, and one acknowledged before it refuses it. The socket is published
 * in gate->u (with gate->addr) before the SYN, so that gw_proxy_rejudge can cut it.
 */
static int connect_addrs(struct net_gateway *g, struct gw_conn *gate, const struct net_addr *addrs,
			 int n, int port, struct net_addr *used)
{
	for (int i = 0; i < n; i++) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		const char *reason = NULL;
		int fd, r;

		if (addrs[i].family != AF_INET)
			continue;
		memcpy(&sa.sin_addr, addrs[i].bytes, 4);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			break;
		if (gate) {
			pthread_rwlock_rdlock(&g->policy_lock);
			if (!allowed_locked(gate, &addrs[i], &reason)) {
				pthread_rwlock_unlock(&g->policy_lock);
				close(fd);
				return -2;
			}
			gate->addr = addrs[i];
			__atomic_store_n(&gate->u, fd, __ATOMIC_SEQ_CST);
		}
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		if (gate)
			pthread_rwlock_unlock(&g->policy_lock);
		if (r == 0 || (errno == EINPROGRESS && gw_wait(g, fd, POLLOUT, 5000) == 0)) {
			int e = 0;
			socklen_t el = sizeof(e);

			getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
			if (e == 0) {
				fcntl(fd, F_SETFL, 0);
				*used = addrs[i];
				return fd;
			}
		}
		if (gate)
			__atomic_store_n(&gate->u, -1, __ATOMIC_SEQ_CST);
		close(fd);
		if (gate && __atomic_load_n(&gate->cut, __ATOMIC_SEQ_CST))
			return -2;
	}
	return -1;
}

/*
 * The first bytes the sandbox sends upstream, judged again under the policy lock by the
 * policy in force at that moment (a request parsed, or a connection set up, under an
 * older one must not go out once a tightening was acknowledged). What fits is sent
 * without blocking while the lock is held; the rest after it. 0, -1 on error, -2 when
 * the policy no longer allows the connection.
 */
static int first_send(struct gw_conn *k, const void *p, size_t n)
{
	const char *reason = NULL;
	ssize_t sent = 0;

	pthread_rwlock_rdlock(&k->g->policy_lock);
	if (__atomic_load_n(&k->cut, __ATOMIC_SEQ_CST) || !allowed_locked(k, &k->addr, &reason)) {
		pthread_rwlock_unlock(&k->g->policy_lock);
		return -2;
	}
	k->gen = k->g->policy->generation;
	gw_flow_open(k); /* its "open" line, before the first byte (under this generation) */
	if (n)
		sent = send(k->u, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	pthread_rwlock_unlock(&k->g->policy_lock);
	if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return -1;
	if (sent < 0)
		sent = 0;
	return gw_send_all(k->u, (const char *)p + sent, n - (size_t)sent) < 0 ? -1 : 0;
}

/* Judge a stated host (name or IP literal) and dial it. 0, or -1 after logging/answering. */
static int judge_and_dial(struct gw_conn *k, const char *host, size_t host_len, int port)
{
	struct net_addr addrs[GW_MAX_ADDRS];
	const char *reason = NULL;
	uint32_t ttl;
	int n = 0, r;

	k->port = port;
	k->name[0] = '\0';
	register_conn(k);  /* from now on a policy change sees it (gw_proxy_rejudge) */
	if (port == 853) { /* DNS over TLS would bypass the resolver's decisions */
		deny(k, "dns_over_tls", NULL, 403);
		return -1;
	}
	if (net_addr_looks_literal(host, host_len) || memchr(host, ':', host_len)) {
		if (net_addr_parse(host, host_len, &addrs[0], NULL) < 0) {
			deny(k, "bad_address", NULL, 400);
			return -1;
		}
		if (gw_decide_literal(k->g, &addrs[0], &reason) != NET_ALLOW) {
			gw_log(k->g, &(struct gw_event){.layer = k->layer,
							.reason = reason,
							.addr = &addrs[0],
							.port = port});
			respond(k, reason, 403);
			return -1;
		}
		n = 1;
	} else {
		if (net_name_canon(host, host_len, k->name, NULL) < 0) {
			deny(k, "bad_name", NULL, 400);
			return -1;
		}
		if (gw_decide_name(k->g, k->name, &reason) != NET_ALLOW) {
			deny(k, reason, k->name, 403);
			return -1;
		}
		n = gw_resolve(k->g, k->name, addrs, GW_MAX_ADDRS, &ttl, &reason);
		if (n <= 0) {
			deny(k, n < 0 ? "upstream_dns_error" : reason, k->name, 502);
			return -1;
		}
	}
	k->literal = k->name[0] == '\0';
	r = connect_addrs(k->g, k, addrs, n, port, &k->addr);
	if (r >= 0)
		return 0;
	if (r == -2)
		deny(k, "policy_changed", k->name[0] ? k->name : NULL, 403);
	else
		deny(k, "connect_failed", k->name[0] ? k->name : NULL, 502);
	return -1;
}

int gw_dial(struct gw_conn *k, const char *host, int port, struct net_addr *addr,
	    const char **reason)
{
	struct net_addr addrs[GW_MAX_ADDRS];
	char canon[NET_NAME_MAX + 1];
	uint32_t ttl;
	int n = 1, fd;

	if (net_addr_looks_literal(host, strlen(host))) {
		if (net_addr_parse(host, strlen(host), &addrs[0], NULL) < 0) {
			*reason = "bad_address";
			return -1;
		}
		if (gw_vet(k->g, &addrs[0], reason) != NET_ALLOW)
			return -1;
	} else {
		if (net_name_canon(host, strlen(host), canon, NULL) < 0) {
			*reason = "bad_name";
			return -1;
		}
		n = gw_resolve(k->g, canon, addrs, GW_MAX_ADDRS, &ttl, reason);
		if (n <= 0) {
			if (n < 0)
				*reason = "upstream_dns_error";
			return -1;
		}
	}
	fd = connect_addrs(k->g, NULL, addrs, n, port, addr);
	if (fd < 0)
		*reason = "connect_failed";
	return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
	const char *s = p;

	while (n > 0) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * A relay pipe starts at the default 64 KiB; one that a splice fills (a bulk flow: every
 * 64 KiB cost a poll, two splices and a wake-up) grows to RELAY_CHUNK, what one splice asks
 * for. Grown pipes are drawn from a pool of one per 16 connections of the sandbox's budget
 * (at least 4), so that all relay pipes together hold at most ~60 KiB more per budgeted
 * connection than the two 64 KiB pipes the budget counts (docs/network.md, "Limits per
 * sandbox"); past the pool a pipe stays small and works as before. big: whether this pipe
 * holds one of the pool's places.
 */
static void grow_pipe(struct gw_conn *k, int wfd, bool *big)
{
	int max = k->g->max_conns / 16 > 4 ? k->g->max_conns / 16 : 4;

	if (*big)
		return;
	if (__atomic_add_fetch(&k->g->big_pipes, 1, __ATOMIC_RELAXED) > max ||
	    fcntl(wfd, F_SETPIPE_SZ, RELAY_CHUNK) < 0) {
		__atomic_sub_fetch(&k->g->big_pipes, 1, __ATOMIC_RELAXED);
		return;
	}
	*big = true;
}

static void close_pipe(struct gw_conn *k, int p[2], bool *big)
{
	al_closep(&p[0]);
	al_closep(&p[1]);
	if (*big)
		__atomic_sub_fetch(&k->g->big_pipes, 1, __ATOMIC_RELAXED);
	*big = false;
}

static void close_pipes(struct gw_conn *k, int pipes[2][2], bool big[2])
{
	for (int i = 0; i < 2; i++)
		close_pipe(k, pipes[i], &big[i]);
}

/*
 * Copy both ways until both sides are done (or the gateway stops), in the
 * kernel: socket -> pipe -> socket with splice(2), no userspace copy. The two
 * pipes exist only while data moves: a tunnel idle for PIPE_IDLE_MS gives them
 * back, so an idle tunnel holds 2 descriptors instead of 6 (10,000 idle tunnels
 * fit under a 20,000 descriptor limit, and no pipe pages sit unused).
 */
static void splice_both(struct gw_conn *k)
{
	int pipes[2][2] = {{-1, -1}, {-1, -1}};
	size_t pending[2] = {0, 0}; /* bytes sitting in each direction's pipe */
	bool open_[2] = {true, true}, big[2] = {false, false};

	while (open_[0] || open_[1] || pending[0] || pending[1]) {
		struct pollfd p[3] = {{.fd = open_[0] ? k->c : -1, .events = POLLIN},
				      {.fd = open_[1] ? k->u : -1, .events = POLLIN},
				      {.fd = k->g->stop_pipe[0], .events = POLLIN}};
		bool piped = pipes[0][0] >= 0;
		int r = poll(p, 3, piped ? PIPE_IDLE_MS : SPLICE_IDLE_MS);

		if (r == 0 && piped) { /* quiet: give the pipes back until data comes */
			close_pipes(k, pipes, big);
			continue;
		}
		if (r <= 0 || p[2].revents)
			break;
		if (!piped && (pipe2(pipes[0], O_CLOEXEC) < 0 || pipe2(pipes[1], O_CLOEXEC) < 0))
			break;
		for (int i = 0; i < 2; i++) {
			int from = i == 0 ? k->c : k->u, to = i == 0 ? k->u : k->c;
			ssize_t n = 0;

			if (p[i].revents) {
				n = splice(from, NULL, pipes[i][1], NULL, RELAY_CHUNK,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
				if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
					open_[i] = false;
					n = 0;
				} else if (n > 0) {
					pending[i] += (size_t)n;
					if (n >= PIPE_DEFAULT)
						grow_pipe(k, pipes[i][1], &big[i]);
				}
			}
			while (pending[i] > 0) {
				ssize_t w =
				    splice(pipes[i][0], NULL, to, NULL, pending[i], SPLICE_F_MOVE);
				if (w <= 0)
					goto out; /* the other side is gone */
				pending[i] -= (size_t)w;
				if (i == 0)
					k->out += (uint64_t)w;
				else
					k->in += (uint64_t)w;
			}
			if (!open_[i] && p[i].revents)
				shutdown(to, SHUT_WR);
		}
	}
out:
	close_pipes(k, pipes, big);
}

/* TLS: the ClientHello's SNI; must_match = the CONNECT name ("" = judge the SNI itself). */
static int check_hello(struct gw_conn *k, const char *must_match)
{
	struct net_tls_hello h;
	char sni[NET_NAME_MAX + 1];
	size_t need = 0;
	int r;

	for (;;) {
		memset(&h, 0, sizeof(h));
		r = net_tls_parse_hello((const uint8_t *)k->buf, k->len, k->scratch,
					sizeof(k->scratch), &h, &need);
		if (r != -2)
			break;
		if (read_more(k) < 0) {
			deny(k, "tls_incomplete_hello", must_match, 0);
			return -1;
		}
	}
	k->layer = "tls";
	if (r < 0) {
		deny(k, h.why ? h.why : "tls_malformed_hello", must_match, 0);
		return -1;
	}
	if (r == NET_TLS_NO_SNI || h.ech || h.esni) {
		deny(k, r == NET_TLS_NO_SNI ? "tls_no_sni" : "tls_ech", must_match, 0);
		return -1;
	}
	if (net_name_canon((const char *)h.sni, h.sni_len, sni, NULL) < 0) {
		deny(k, "tls_bad_sni", must_match, 0);
		return -1;
	}
	if (must_match && strcmp(sni, must_match) != 0) {
		deny(k, "sni_mismatch", sni, 0);
		return -1;
	}
	snprintf(k->name, sizeof(k->name), "%s", sni);
	return 0;
}

int gw_relay_chunked(struct gw_conn *k, const char *pre, size_t pre_len, const struct gw_io *from,
		     const struct gw_io *to)
{
	struct net_http_chunked ch = {.max_total = 0};
	_cleanup_free_ char *buf = xzalloc(65536); /* off the (small) thread stack */
	const char *in = pre;
	size_t have = pre_len;

	for (;;) {
		long n;

		while (have > 0) {
			size_t used = 0, dl = 0;
			const char *data;
			int r = net_http_chunked_step(&ch, in, have, &used, &data, &dl);

			if (r == -1)
				return -2;
			if (used && to->write(to->ctx, in, used) < 0)
				return -1;
			k->out += used;
			in += used;
			have -= used;
			if (r == 0)
				return 0;
		}
		n = from->read(from->ctx, buf, 65536);
		if (n <= 0)
			return -1;
		in = buf;
		have = (size_t)n;
	}
}

static long sock_read(void *ctx, void *buf, size_t n)
{
	struct gw_conn *k = ctx;

	if (gw_wait(k->g, k->c, POLLIN, GW_IO_TIMEOUT_MS) < 0)
		return -1;
	return recv(k->c, buf, n, 0);
}

static int sock_write(void *ctx, const void *buf, size_t n)
{
	return send_all(*(int *)ctx, buf, n);
}

/* The request body: exactly Content-Length bytes, or a chunked body to its end. Anything
 * after it is not forwarded. 0, -1 (I/O), -2 (bad chunked framing). */
static int forward_body(struct gw_conn *k, const struct net_http_req *req)
{
	uint64_t left = req->has_content_length ? req->content_length : 0;
	size_t have = k->len - req->head_len;
	size_t take = have < left ? have : (size_t)left;
	_cleanup_free_ char *buf = NULL;

	if (req->chunked)
		return gw_relay_chunked(k, k->buf + req->head_len, have,
					&(struct gw_io){.ctx = k, .read = sock_read},
					&(struct gw_io){.ctx = &k->u, .write = sock_write});
	if (take && send_all(k->u, k->buf + req->head_len, take) < 0)
		return -1;
	left -= take;
	k->out += take;
	buf = xzalloc(65536); /* off the (small) thread stack */
	while (left > 0) {
		ssize_t m;
		if (gw_wait(k->g, k->c, POLLIN, GW_IO_TIMEOUT_MS) < 0 ||
		    (m = recv(k->c, buf, left < 65536 ? left : 65536, 0)) <= 0 ||
		    send_all(k->u, buf, (size_t)m) < 0)
			return -1;
		left -= (uint64_t)m;
		k->out += (uint64_t)m;
	}
	return 0;
}

/* The response, until the upstream closes (we asked for Connection: close): in the
 * kernel, upstream -> pipe -> client. */
static int relay_plain_response(struct gw_conn *k)
{
	int pp[2];
	bool big = false;

	if (pipe2(pp, O_CLOEXEC) < 0)
		return -1;
	while (gw_wait(k->g, k->u, POLLIN, SPLICE_IDLE_MS) == 0) {
		ssize_t m =
		    splice(k->u, NULL, pp[1], NULL, RELAY_CHUNK, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (m < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (m <= 0)
			break;
		if (m >= PIPE_DEFAULT)
			grow_pipe(k, pp[1], &big);
		while (m > 0) {
			ssize_t w = splice(pp[0], NULL, k->c, NULL, (size_t)m, SPLICE_F_MOVE);
			if (w <= 0)
				goto done;
			m -= w;
			k->in += (uint64_t)w;
		}
	}
done:
	close_pipe(k, pp, &big);
	return 0;
}

/* Plain HTTP: forward the head rebuilt around the checked authority, then the body, then
 * the response. 0, or -1 (logged when the sandbox's body was at fault). */
static int forward_http(struct gw_conn *k, const struct net_http_req *req)
{
	char *head = xzalloc(HEAD_MAX + 512);
	size_t n = 0;
	int r;

	n += (size_t)snprintf(head + n, 512, "%.*s %.*s HTTP/1.1\r\nHost: %s", (int)req->method.len,
			      req->method.p, (int)(req->path.len ? req->path.len : 1),
			      req->path.len ? req->path.p : "/", k->name[0] ? k->name : "");
	if (req->port_explicit && req->port != 80)
		n += (size_t)snprintf(head + n, 16, ":%u", req->port);
	n += (size_t)snprintf(head + n, 8, "\r\n");
	for (size_t i = 0; i < req->n_headers; i++) {
		const struct net_http_header *h = &req->headers[i];
		static const char *const drop[] = {
		    "host",	  "connection", "proxy-connection", "proxy-authorization",
		    "keep-alive", "te",		"upgrade"};
		bool skip = false;

		for (size_t j = 0; j < ARRAY_SIZE(drop); j++)
			skip |= h->name.len == strlen(drop[j]) &&
				strncasecmp(h->name.p, drop[j], h->name.len) == 0;
		if (skip || n + h->name.len + h->value.len + 8 > HEAD_MAX)
			continue;
		n += (size_t)sprintf(head + n, "%.*s: %.*s\r\n", (int)h->name.len, h->name.p,
				     (int)h->value.len, h->value.p);
	}
	n += (size_t)sprintf(head + n, "Connection: close\r\n\r\n");
	r = first_send(k, head, n);
	k->out += r == 0 ? n : 0;
	free(head);
	if (r == -2)
		deny(k, "policy_changed", k->name[0] ? k->name : NULL, 403);
	if (r < 0)
		return -1;
	r = forward_body(k, req);
	if (r == -2) { /* the upstream saw a cut body: it gets no more */
		deny(k, "bad_chunked_body", k->name[0] ? k->name : NULL, 400);
		return -1;
	}
	if (r < 0) { /* the sandbox stopped mid-body (or the upstream went away) */
		deny(k, "body_incomplete", k->name[0] ? k->name : NULL, 0);
		return -1;
	}
	return relay_plain_response(k);
}

/* Read and parse a request head; -1 after answering 400. */
static int read_head(struct gw_conn *k, struct net_http_req *req)
{
	size_t last = 0;
	long r;

	for (;;) {
		memset(req, 0, sizeof(*req));
		r = net_http_parse_request(k->buf, k->len, last, req);
		if (r >= 0)
			return 0;
		if (r == -1) {
			deny(k, req->why ? req->why : "bad_request", NULL, 400);
			return -1;
		}
		last = k->len;
		if (read_more(k) < 0) {
			deny(k, "incomplete_request", NULL, k->len ? 400 : 0);
			return -1;
		}
	}
}

static void log_allow(struct gw_conn *k, const char *reason);

void gw_conn_deny(struct gw_conn *k, const char *reason, const char *name, int status)
{
	deny(k, reason, name, status);
}

void gw_conn_log_allow(struct gw_conn *k, const char *reason)
{
	log_allow(k, reason);
}

int gw_send_all(int fd, const void *p, size_t n)
{
	return send_all(fd, p, n);
}

static void log_allow(struct gw_conn *k, const char *reason)
{
	if (__atomic_load_n(&k->cut, __ATOMIC_SEQ_CST)) {
		gw_log(k->g, &(struct gw_event){.layer = k->layer,
						.reason = "policy_changed",
						.name = k->name[0] ? k->name : NULL,
						.addr = &k->addr,
						.port = k->port,
						.bytes_out = k->out,
						.bytes_in = k->in,
						.flow = gw_flow_take(k),
						.event = "close"});
		return;
	}
	/* Under the generation it was let through by (a policy change after that, which did
	 * not cut it, may be in force by now). */
	gw_log(k->g, &(struct gw_event){.layer = k->layer,
					.allow = true,
					.reason = reason,
					.name = k->name[0] ? k->name : NULL,
					.addr = &k->addr,
					.port = k->port,
					.bytes_out = k->out,
					.bytes_in = k->in,
					.generation = k->gen,
					.flow = gw_flow_take(k),
					.event = "close"});
}

/* A tunnel's first bytes (the ClientHello read from the sandbox), through first_send. */
static int first_send_or_deny(struct gw_conn *k)
{
	int r = first_send(k, k->buf, k->len);

	if (r == -2)
		deny(k, "policy_changed", k->name[0] ? k->name : NULL, 0);
	if (r == 0)
		k->out += k->len;
	return r;
}

/* A name with per-request rules is terminated here instead of spliced; true if it was. */
static bool maybe_terminate(struct gw_conn *k)
{
	struct net_policy *held = NULL;
	const struct net_rules *r;

	/* Marked before the rules are read: a policy change from here on cuts the flow
	 * (gw_proxy_rejudge cuts every terminated one), so no flow runs under rules that were
	 * replaced before it started. */
	__atomic_store_n(&k->terminated, true, __ATOMIC_SEQ_CST);
	pthread_rwlock_rdlock(&k->g->policy_lock);
	r = net_policy_rules_for(k->g->policy, k->name);
	if (r) /* the policy may be replaced under the connection: keep this one alive */
		held = net_policy_ref(k->g->policy);
	pthread_rwlock_unlock(&k->g->policy_lock);
	if (!r) {
		__atomic_store_n(&k->terminated, false, __ATOMIC_SEQ_CST);
		return false;
	}
	gw_flow_open(k); /* its first byte goes upstream next, terminated */
	gw_mitm_serve(k, r);
	net_policy_free(held);
	return true;
}

/* Plain HTTP to a domain with rules would bypass them (and must never carry a secret). */
static bool refuse_plaintext(struct gw_conn *k)
{
	bool rules;

	pthread_rwlock_rdlock(&k->g->policy_lock);
	rules = k->name[0] && net_policy_rules_for(k->g->policy, k->name) != NULL;
	pthread_rwlock_unlock(&k->g->policy_lock);
	if (rules)
		deny(k, "plaintext_to_rule_domain", k->name, 403);
	return rules;
}

/* :3128 -- CONNECT host:port (then TLS whose SNI must be that host), or absolute-URI HTTP. */
static void serve_explicit(struct gw_conn *k)
{
	struct net_http_req req;
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

	k->layer = "proxy";
	if (read_head(k, &req) < 0)
		return;
	if (req.form == NET_HTTP_AUTHORITY) { /* CONNECT */
		char connect_name[NET_NAME_MAX + 1];
		size_t rest = k->len - req.head_len;

		if (judge_and_dial(k, req.host.p, req.host.len, req.port) < 0)
			return;
		snprintf(connect_name, sizeof(connect_name), "%s", k->name);
		if (send_all(k->c, ok, sizeof(ok) - 1) < 0)
			return;
		memmove(k->buf, k->buf + req.head_len, rest);
		k->len = rest;
		if (k->len == 0 && read_more(k) < 0)
			return;
		/* For an IP-literal CONNECT (allowed by a CIDR) the SNI is judged on its own. */
		if (check_hello(k, connect_name[0] ? connect_name : NULL) < 0)
			return;
		if (!connect_name[0] &&
		    gw_decide_name(k->g, k->name, &(const char *){NULL}) != NET_ALLOW) {
			deny(k, "sni_not_allowed", k->name, 0);
			return;
		}
		if (maybe_terminate(k) || first_send_or_deny(k) < 0)
			return;
		splice_both(k);
		log_allow(k, "connect");
		return;
	}
	if (req.form != NET_HTTP_ABSOLUTE) {
		deny(k, "not_a_proxy_request", NULL, 400);
		return;
	}
	if (judge_and_dial(k, req.host.p, req.host.len, req.port) < 0 || refuse_plaintext(k))
		return;
	if (forward_http(k, &req) == 0)
		log_allow(k, "http");
}

/* :3129 -- any other TCP connection: TLS judged by SNI, HTTP by Host; the original
 * destination is only logged. */
static void serve_transparent(struct gw_conn *k)
{
	struct sockaddr_in orig = {0};
	socklen_t ol = sizeof(orig);
	struct net_http_req req;
	int port = 443;

	k->layer = "transparent";
	if (getsockopt(k->c, SOL_IP, SO_ORIGINAL_DST, &orig, &ol) == 0)
		port = ntohs(orig.sin_port);
	k->port = port;
	if (read_more(k) < 0) {
		deny(k, "no_data", NULL, 0);
		return;
	}
	if ((uint8_t)k->buf[0] == 0x16) { /* a TLS handshake record */
		char sni[NET_NAME_MAX + 1];

		if (check_hello(k, NULL) < 0)
			return;
		k->layer = "transparent";
		snprintf(sni, sizeof(sni), "%s", k->name); /* judge_and_dial rewrites k->name */
		if (judge_and_dial(k, sni, strlen(sni), port) < 0)
			return;
		if (maybe_terminate(k) || first_send_or_deny(k) < 0)
			return;
		splice_both(k);
		log_allow(k, "tls");
		return;
	}
	if (read_head(k, &req) < 0)
		return;
	if (!req.host.p) {
		deny(k, "no_host", NULL, 0);
		return;
	}
	if (judge_and_dial(k, req.host.p, req.host.len, port) < 0 || refuse_plaintext(k))
		return;
	if (forward_http(k, &req) == 0)
		log_allow(k, "http");
}

struct conn_arg {
	struct net_gateway *g;
	int fd;
	bool transparent;
};

static void *conn_main(void *arg)
{
	struct conn_arg a = *(struct conn_arg *)arg;
	struct gw_conn *k = xzalloc(sizeof(*k));
	struct timeval tv = {.tv_sec = 60};

	free(arg);
	k->g = a.g;
	k->c = a.fd;
	k->u = -1;
	k->slot = -1;
	k->transparent = a.transparent;
	setsockopt(k->c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (gw_enter_upstream(k->g) == 0) {
		if (k->transparent)
			serve_transparent(k);
		else
			serve_explicit(k);
	}
	gw_flow_end(k);
	unregister_conn(k);
	close(k->c);
	if (k->u >= 0)
		close(k->u);
	free(k);
	pthread_mutex_lock(&a.g->mu);
	a.g->n_conns--;
	pthread_cond_broadcast(&a.g->conns_cv);
	pthread_mutex_unlock(&a.g->mu);
	return NULL;
}

static void accept_loop(struct net_gateway *g, int lfd, bool transparent)
{
	/* A descriptor kept in reserve: out of descriptors, it is given up to accept the
	 * waiting connection and close it (refused, logged), instead of spinning on EMFILE. */
	int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);

	while (gw_wait(g, lfd, POLLIN, -1) == 0) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		struct conn_arg *a;
		pthread_t t;
		bool full;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			if (spare >= 0) {
				close(spare);
				fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
				if (fd >= 0)
					close(fd);
				spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
			}
			gw_log(g, &(struct gw_event){.layer = transparent ? "transparent" : "proxy",
						     .reason = "too_many_connections"});
			if (spare < 0)
				poll(NULL, 0, 10); /* nothing to give up: do not spin */
			continue;
		}
		if (fd < 0)
			continue;
		pthread_mutex_lock(&g->mu);
		full = g->n_conns >= g->max_conns;
		if (!full)
			g->n_conns++;
		pthread_mutex_unlock(&g->mu);
		if (full) {
			gw_log(g, &(struct gw_event){.layer = transparent ? "transparent" : "proxy",
						     .reason = "too_many_connections"});
			close(fd);
			continue;
		}
		a = xzalloc(sizeof(*a));
		*a = (struct conn_arg){.g = g, .fd = fd, .transparent = transparent};
		if (pthread_create(&t, &g->conn_attr, conn_main, a) != 0) {
			close(fd);
			free(a);
			pthread_mutex_lock(&g->mu);
			g->n_conns--;
			pthread_mutex_unlock(&g->mu);
			continue;
		}
	}
	if (spare >= 0)
		close(spare);
}

void *gw_proxy_main(void *arg)
{
	struct net_gateway *g = arg;

	accept_loop(g, g->fd_proxy, false);
	return NULL;
}

void *gw_tproxy_main(void *arg)
{
	struct net_gateway *g = arg;

	accept_loop(g, g->fd_tproxy, true);
	return NULL;
}
