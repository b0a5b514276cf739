/* SPDX-License-Identifier: MIT */
/*
 * The gateway's resolver. A name the policy refuses gets REFUSED and is never
 * sent upstream (no DNS tunnelling). An allowed name is resolved by the
 * gateway itself (A records), every address is vetted, and only the vetted
 * ones are answered (rebinding to loopback, metadata or private ranges is
 * stripped). AAAA gets NODATA (no IPv6 on the link), HTTPS/SVCB NODATA (ECH
 * hints), everything else REFUSED.
 */
#include "gateway/gw.h"
#include "net/dns_msg.h"
#include "common/cleanup.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * The sandbox's own resolution cache: upstream answers (before vetting; every use
 * vets again, under the policy in force then), kept for min(TTL, 60 s). One per
 * gateway, so per sandbox: nothing one sandbox resolves helps or poisons another.
 */
static bool cache_get(struct net_gateway *g, const char *canon, struct net_addr *out, int *n,
		      uint32_t *ttl)
{
	double now = (double)time(NULL);
	bool hit = false;

	pthread_mutex_lock(&g->cache_mu);
	for (int i = 0; i < GW_CACHE_SIZE && !hit; i++) {
		struct gw_cache_entry *e = &g->cache[i];

		if (e->name[0] && strcmp(e->name, canon) == 0 && e->expires > now) {
			memcpy(out, e->addrs, sizeof(e->addrs[0]) * (size_t)e->n);
			*n = e->n;
			*ttl = (uint32_t)(e->expires - now);
			hit = true;
		}
	}
	pthread_mutex_unlock(&g->cache_mu);
	return hit;
}

static void cache_put(struct net_gateway *g, const char *canon, const struct net_addr *addrs, int n,
		      uint32_t ttl)
{
	double now = (double)time(NULL);
	int slot = 0;

	if (ttl == 0 || n <= 0)
		return;
	pthread_mutex_lock(&g->cache_mu);
	for (int i = 0; i < GW_CACHE_SIZE; i++) {
		if (strcmp(g->cache[i].name, canon) == 0 || g->cache[i].expires <= now) {
			slot = i;
			break;
		}
		if (g->cache[i].expires < g->cache[slot].expires)
			slot = i; /* else evict the soonest to expire */
	}
	snprintf(g->cache[slot].name, sizeof(g->cache[slot].name), "%s", canon);
	memcpy(g->cache[slot].addrs, addrs, sizeof(addrs[0]) * (size_t)n);
	g->cache[slot].n = n;
	g->cache[slot].expires = now + (ttl > 60 ? 60 : ttl);
	pthread_mutex_unlock(&g->cache_mu);
}

/* Vet cached or fresh addresses under the current policy. */
static int vet_all(struct net_gateway *g, const struct net_addr *raw, int n, struct net_addr *out,
		   int max, const char **reason)
{
	int got = 0;

	for (int i = 0; i < n && got < max; i++) {
		const char *why = NULL;

		if (gw_vet(g, &raw[i], &why) == NET_ALLOW)
			out[got++] = raw[i];
		else
			*reason = why; /* rebinding: stripped */
	}
	return got;
}

static int resolve_upstream(struct net_gateway *g, const char *canon, struct net_addr *out, int max,
			    uint32_t *ttl, const char **reason);

int gw_resolve(struct net_gateway *g, const char *canon, struct net_addr *out, int max,
	       uint32_t *ttl, const char **reason)
{
	struct net_addr raw[GW_MAX_ADDRS];
	int n = 0;

	*reason = "no_address";
	if (!cache_get(g, canon, raw, &n, ttl)) {
		n = resolve_upstream(g, canon, raw, GW_MAX_ADDRS, ttl, reason);
		if (n < 0)
			return n;
		cache_put(g, canon, raw, n, *ttl);
	}
	return vet_all(g, raw, n, out, max, reason);
}

/* One A query upstream over UDP from the upstream namespace; unvetted addresses. */
static int resolve_upstream(struct net_gateway *g, const char *canon, struct net_addr *out, int max,
			    uint32_t *ttl, const char **reason)
{
	uint8_t q[512], resp[4096], wire[NET_DNS_MAX_WIRE_NAME];
	struct net_dns_rr rr[32];
	struct net_dns_response res;
	struct net_dns_asked asked = {.qtype = NET_DNS_A};
	size_t wl = 0, n = 0;
	const char *p = canon;
	_cleanup_close_ int fd = -1;
	int got = 0;
	ssize_t len;

	/* The canonical name as an uncompressed wire name. */
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		wire[wl++] = (uint8_t)l;
		memcpy(wire + wl, p, l);
		wl += l;
		p += l + (dot ? 1 : 0);
	}
	wire[wl++] = 0;
	/* An unpredictable query id or no query: a guessable one invites forged answers. */
	*reason = "upstream_error";
	if (getrandom(&asked.id, sizeof(asked.id), 0) != sizeof(asked.id))
		return -1;
	asked.qname_wire = wire;
	asked.qname_wire_len = wl;
	memset(q, 0, NET_DNS_HEADER);
	q[0] = (uint8_t)(asked.id >> 8), q[1] = (uint8_t)asked.id;
	q[2] = 0x01; /* RD */
	q[5] = 1;    /* one question */
	memcpy(q + NET_DNS_HEADER, wire, wl);
	n = NET_DNS_HEADER + wl;
	q[n++] = 0, q[n++] = NET_DNS_A, q[n++] = 0, q[n++] = NET_DNS_CLASS_IN;

	*reason = "upstream_error";
	fd = socket(g->dns_up.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&g->dns_up, g->dns_up_len) < 0 ||
	    send(fd, q, n, 0) != (ssize_t)n)
		return -1;
	for (int tries = 0; tries < 4; tries++) {
		if (gw_wait(g, fd, POLLIN, 2000) < 0)
			return -1;
		len = recv(fd, resp, sizeof(resp), 0);
		if (len <= 0)
			return -1;
		memset(&res, 0, sizeof(res));
		if (net_dns_parse_response(resp, (size_t)len, &asked, rr, 32, &res) == 0)
			break; /* anything else (a stray or forged packet) is ignored */
		if (tries == 3)
			return -1;
	}
	*reason = res.rcode == NET_DNS_NXDOMAIN ? "nxdomain" : "no_address";
	*ttl = res.min_ttl;
	for (size_t i = 0; i < res.n_rr && got < max; i++) {
		struct net_addr a = {.family = AF_INET};

		if (rr[i].type != NET_DNS_A)
			continue;
		memcpy(a.bytes, rr[i].addr, 4);
		out[got++] = a;
	}
	return got;
}

/*
 * The question's name of a query that did not parse, as far as it can be read, in DNS
 * presentation form: label bytes other than printable ASCII, '.' and '\\' as \DDD, so
 * the text is plain ASCII whatever the sandbox sent (and JSON-safe once escaped by the
 * log). Reading stops at the root label, a compression pointer, the message's end or
 * NET_NAME_MAX bytes of text ("..." then ends it). "" when there is no question at all.
 */
static void malformed_name(const uint8_t *msg, size_t len, char *out, size_t cap)
{
	size_t pos = NET_DNS_HEADER, o = 0;

	out[0] = '\0';
	while (pos < len && msg[pos] != 0 && (msg[pos] & 0xc0) == 0) {
		size_t l = msg[pos++];

		if (o) {
			if (o + 5 >= cap) {
				snprintf(out + o, cap - o, "...");
				return;
			}
			out[o++] = '.';
			out[o] = '\0';
		}
		for (size_t i = 0; i < l && pos < len; i++, pos++) {
			uint8_t c = msg[pos];
			int w = c > 0x20 && c < 0x7f && c != '.' && c != '\\'
				    ? snprintf(out + o, cap - o, "%c", c)
				    : snprintf(out + o, cap - o, "\\%03u", c);

			if (w < 0 || o + (size_t)w + 4 >= cap) {
				snprintf(out + o, cap - o, "...");
				return;
			}
			o += (size_t)w;
		}
	}
}

/* A query that did not parse: logged (aggregated when repeated), answered if it can be. */
static ssize_t refuse_malformed(struct net_gateway *g, const uint8_t *msg, size_t len,
				const struct net_dns_query *q, uint8_t *out, size_t cap)
{
	char name[NET_NAME_MAX + 1];

	malformed_name(msg, len, name, sizeof(name));
	gw_log(g, &(struct gw_event){.layer = "dns",
				     .reason = "malformed",
				     .name = name[0] ? name : NULL,
				     .detail = q->why ? q->why : "unreadable"});
	return q->answerable ? net_dns_build_reply(q, q->rcode, out, cap) : 0;
}

/* Judge and answer one query; returns the reply length (0: no reply). */
static ssize_t answer(struct net_gateway *g, const uint8_t *msg, size_t len, bool tcp, uint8_t *out,
		      size_t cap)
{
	struct net_dns_query q;
	char canon[NET_NAME_MAX + 1];
	const char *reason = NULL;
	struct net_addr addrs[GW_MAX_ADDRS];
	struct net_dns_addr rec[GW_MAX_ADDRS];
	uint32_t ttl = 0;
	int n;

	memset(&q, 0, sizeof(q));
	if (net_dns_parse_query(msg, len, &q) < 0)
		return refuse_malformed(g, msg, len, &q, out, cap);
	if (!gw_dns_admit(g)) {
		/* A flood: answered locally, never forwarded, counted by the log's limit. */
		gw_log(g, &(struct gw_event){.layer = "dns", .reason = "rate_limited"});
		return net_dns_build_reply(&q, NET_DNS_REFUSED, out, cap);
	}
	if (net_name_canon(q.qname, q.qname_len, canon, NULL) < 0) {
		char name[NET_NAME_MAX + 1];

		malformed_name(msg, len, name, sizeof(name));
		gw_log(g, &(struct gw_event){
			      .layer = "dns", .reason = "bad_name", .name = name[0] ? name : NULL});
		return net_dns_build_reply(&q, NET_DNS_REFUSED, out, cap);
	}
	if (gw_decide_name(g, canon, &reason) != NET_ALLOW) {
		gw_log(g, &(struct gw_event){.layer = "dns", .reason = reason, .name = canon});
		return net_dns_build_reply(&q, NET_DNS_REFUSED, out, cap);
	}
	if (q.qtype == NET_DNS_AAAA || q.qtype == NET_DNS_HTTPS || q.qtype == NET_DNS_SVCB) {
		gw_log(g,
		       &(struct gw_event){
			   .layer = "dns", .allow = true, .reason = "nodata_type", .name = canon});
		return net_dns_build_reply(&q, NET_DNS_NOERROR, out, cap);
	}
	if (q.qtype != NET_DNS_A) {
		gw_log(g, &(struct gw_event){.layer = "dns", .reason = "qtype", .name = canon});
		return net_dns_build_reply(&q, NET_DNS_REFUSED, out, cap);
	}
	n = gw_resolve(g, canon, addrs, GW_MAX_ADDRS, &ttl, &reason);
	if (n <= 0) {
		gw_log(g, &(struct gw_event){.layer = "dns", .reason = reason, .name = canon});
		return net_dns_build_reply(&q, n < 0 ? NET_DNS_SERVFAIL : NET_DNS_NXDOMAIN, out,
					   cap);
	}
	for (int i = 0; i < n; i++) {
		rec[i] = (struct net_dns_addr){.type = NET_DNS_A, .ttl = ttl > 60 ? 60 : ttl};
		memcpy(rec[i].addr, addrs[i].bytes, 4);
	}
	gw_log(g, &(struct gw_event){.layer = "dns",
				     .allow = true,
				     .reason = "listed",
				     .name = canon,
				     .addr = &addrs[0]});
	return net_dns_build_answer(&q, rec, (size_t)n, net_dns_reply_limit(&q, tcp), out, cap);
}

/* 1: a query is waiting, 0: wake_ms passed (the log has counts due), -1: stop. */
static int wait_query(struct net_gateway *g, int wake_ms)
{
	struct pollfd p[2] = {{.fd = g->fd_udp, .events = POLLIN},
			      {.fd = g->stop_pipe[0], .events = POLLIN}};
	int r;

	do
		r = poll(p, 2, wake_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0 || p[1].revents)
		return -1;
	return r > 0;
}

void *gw_dns_udp_main(void *arg)
{
	struct net_gateway *g = arg;
	uint8_t in[4096], out[4096];
	int w;

	gw_enter_upstream(g);
	/* This thread also closes the log's aggregation windows on time (a flood's counts
	 * are written when its window ends, not only with the next line). */
	while ((w = wait_query(g, gw_log_wake_ms(g))) >= 0) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n, r;

		if (w == 0) {
			gw_log_tick(g);
			continue;
		}
		n = recvfrom(g->fd_udp, in, sizeof(in), MSG_DONTWAIT, (struct sockaddr *)&from,
			     &fl);
		if (n <= 0)
			continue;
		r = answer(g, in, (size_t)n, false, out, sizeof(out));
		if (r > 0)
			sendto(g->fd_udp, out, (size_t)r, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

/* A TCP connection whose bytes never made one whole frame (short, cut, oversized): one
 * "malformed" line, with what of the name could be read (nothing for a silent one). */
static void refuse_tcp_frame(struct net_gateway *g, const uint8_t *in, size_t got)
{
	char name[NET_NAME_MAX + 1] = "";

	if (!got)
		return;
	if (got > 2)
		malformed_name(in + 2, got - 2, name, sizeof(name));
	gw_log(g, &(struct gw_event){.layer = "dns",
				     .reason = "malformed",
				     .name = name[0] ? name : NULL,
				     .detail = "no whole TCP frame"});
}

/* DNS over TCP: one query per connection, answered in line (bounded by the timeout). */
void *gw_dns_tcp_main(void *arg)
{
	struct net_gateway *g = arg;
	uint8_t in[2 + 4096], out[2 + 4096];

	gw_enter_upstream(g);
	while (gw_wait(g, g->fd_tcp_dns, POLLIN, -1) == 0) {
		_cleanup_close_ int c = accept4(g->fd_tcp_dns, NULL, NULL, SOCK_CLOEXEC);
		size_t have = 0, frame = 0, mlen = 0, got = 0;
		const uint8_t *m = NULL;
		ssize_t r;

		if (c < 0)
			continue;
		for (;;) {
			int fr = net_dns_tcp_frame(in, have, &m, &mlen, &frame);

			if (fr == 0 || fr == -1 || have == sizeof(in))
				break;
			if (gw_wait(g, c, POLLIN, 2000) < 0 ||
			    (r = recv(c, in + have, sizeof(in) - have, 0)) <= 0) {
				have = 0;
				break;
			}
			have += (size_t)r;
			got = have;
		}
		if (!m || net_dns_tcp_frame(in, have, &m, &mlen, &frame) != 0) {
			refuse_tcp_frame(g, in, got);
			continue;
		}
		r = answer(g, m, mlen, true, out + 2, sizeof(out) - 2);
		if (r > 0) {
			out[0] = (uint8_t)(r >> 8), out[1] = (uint8_t)r;
			(void)!send(c, out, (size_t)r + 2, MSG_NOSIGNAL);
		}
	}
	return NULL;
}
