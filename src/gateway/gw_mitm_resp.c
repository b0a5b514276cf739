/* SPDX-License-Identifier: MIT */
/*
 * The response of a terminated request (gw_mitm.h): relayed as it comes when no secret
 * was injected; otherwise decoded as the client will see it (1xx heads skipped, the final
 * head parsed and rebuilt, chunked bodies de-chunked) and every token of every injected
 * secret redacted before a byte reaches the sandbox (docs/network.md).
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

/* Find a header in a response head (lines after the status line). */
static const char *resp_header(const char *head, size_t len, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	const char *p = memchr(head, '\n', len), *end = head + len;

	while (p && ++p < end) {
		const char *e = memchr(p, '\n', (size_t)(end - p));
		if (!e)
			break;
		if ((size_t)(e - p) > nl && p[nl] == ':' && !strncasecmp(p, name, nl)) {
			const char *v = p + nl + 1;
			while (v < e && (*v == ' ' || *v == '\t'))
				v++;
			*vlen = (size_t)(e - v);
			while (*vlen && (v[*vlen - 1] == '\r' || v[*vlen - 1] == ' '))
				(*vlen)--;
			return v;
		}
		p = e;
	}
	return NULL;
}

/*
 * Read from the upstream with immediate ACKs: a server that writes its head and body
 * separately (Nagle on its side) would otherwise wait for our delayed ACK, ~40 ms a
 * response. TCP_QUICKACK is not sticky, so it is armed before every read.
 */
static int up_read(struct mitm *m, void *buf, int len)
{
	setsockopt(SSL_get_fd(m->us), IPPROTO_TCP, TCP_QUICKACK, &(int){1}, sizeof(int));
	return SSL_read(m->us, buf, len);
}

/*
 * Read the upstream's response head into head (RESP_HEAD_MAX + 1 bytes), perhaps with
 * the start of its body after it: *hl bytes in all, the head ending at *end. -1: 502
 * answered (too large, no response, not HTTP/1.x).
 */
static int read_raw_head(struct mitm *m, char *head, size_t *hl, const char **end)
{
	int n;

	*end = NULL;
	while (!*end) {
		if (*hl >= RESP_HEAD_MAX) {
			mitm_answer(m, 502, "upstream_head_too_large", "Bad Gateway");
			return -1;
		}
		n = up_read(m, head + *hl, (int)(RESP_HEAD_MAX - *hl));
		if (n <= 0) {
			mitm_answer(m, 502, "upstream_no_response", "Bad Gateway");
			return -1;
		}
		*hl += (size_t)n;
		*end = memmem(head, *hl, "\r\n\r\n", 4);
	}
	if (*hl < 12 || strncmp(head, "HTTP/1.", 7)) {
		mitm_answer(m, 502, "upstream_bad_response", "Bad Gateway");
		return -1;
	}
	return 0;
}

/* Send the response head to the sandbox, minus its connection fields, plus ours. */
static int send_raw_head(struct mitm *m, const char *head, size_t head_len)
{
	_cleanup_free_ char *out = xzalloc(head_len + 64);
	size_t o = 0;
	const char *p = head, *hend = head + head_len - 2;

	while (p < hend) {
		const char *e = memchr(p, '\n', (size_t)(hend - p));
		size_t l = e ? (size_t)(e - p) + 1 : (size_t)(hend - p);
		bool drop = p != head && ((l > 11 && !strncasecmp(p, "connection:", 11)) ||
					  (l > 11 && !strncasecmp(p, "keep-alive:", 11)));
		if (!drop) {
			memcpy(out + o, p, l);
			o += l;
		}
		p += l;
	}
	o += (size_t)sprintf(out + o, "Connection: close\r\n\r\n");
	if (mitm_write_all(m->cs, out, o) < 0)
		return -1;
	m->k->in += o;
	return 0;
}

/*
 * The body, streamed (max_secret is 0 here: nothing is kept back). buf (RESP_HEAD_MAX + 1
 * bytes) starts with the carry bytes read with the head; with a Content-Length (bounded),
 * left is what is still to come after them.
 */
static int stream_raw_body(struct mitm *m, char *buf, size_t carry, bool bounded, uint64_t left)
{
	size_t keep = m->max_secret ? m->max_secret - 1 : 0;
	int n;

	for (;;) {
		bool more = !bounded || left > 0;
		size_t emit;

		if (more && carry < RESP_HEAD_MAX / 2) {
			size_t room = RESP_HEAD_MAX - carry;
			if (bounded && room > left)
				room = (size_t)left;
			n = up_read(m, buf + carry, (int)room);
			if (n <= 0) {
				more = false;
				bounded = false;
				left = 0;
			} else {
				carry += (size_t)n;
				if (bounded)
					left -= (uint64_t)n;
				more = !bounded || left > 0;
			}
		}
		emit = more ? (carry > keep ? carry - keep : 0) : carry;
		if (emit && mitm_write_all(m->cs, buf, emit) < 0)
			return -1;
		m->k->in += emit;
		memmove(buf, buf + emit, carry - emit);
		carry -= emit;
		if (!more && carry == 0)
			break;
	}
	return 0;
}

/* Relay the upstream's response as it comes (no secret aboard: nothing to scan for). */
static int relay_raw(struct mitm *m)
{
	_cleanup_free_ char *head = xzalloc(RESP_HEAD_MAX + 1);
	size_t hl = 0, head_len, carry, vlen = 0;
	const char *end, *v;
	bool bounded = false;
	uint64_t left = 0;

	if (read_raw_head(m, head, &hl, &end) < 0)
		return -1;
	head_len = (size_t)(end - head) + 4;
	carry = hl - head_len;
	if (!resp_header(head, head_len, "transfer-encoding", &vlen) &&
	    (v = resp_header(head, head_len, "content-length", &vlen))) {
		bounded = true;
		left = strtoull(v, NULL, 10);
	}
	if (send_raw_head(m, head, head_len) < 0)
		return -1;
	memmove(head, head + head_len, carry);
	/* What came with the head counts against the Content-Length too. */
	if (bounded && carry > left)
		carry = (size_t)left;
	if (bounded)
		left -= carry;
	return stream_raw_body(m, head, carry, bounded, left); /* head reused as the buffer */
}

/*
 * With a secret aboard, the response is scanned as the sandbox's client will see it:
 * 1xx interim heads skipped (never relayed), the final head parsed strictly and rebuilt,
 * the body de-chunked, redacted through a sliding window, and sent again with our own
 * framing. What cannot be scanned (an encoding, a broken head or framing, an upgrade) is
 * refused. Every redaction and every refusal is logged as a secret reflected.
 */
struct scan {
	struct mitm *m;
	bool chunked_out;
	char *win; /* SCAN_WIN + max_secret bytes */
	size_t len;
};
#define SCAN_WIN 65536

static void log_reflected(struct mitm *m, const char *reason)
{
	if (strcmp(reason, "secret_reflected_redacted") != 0) /* a cut, not a redaction */
		m->k->refused = true;
	gw_log(m->k->g, &(struct gw_event){.layer = "tls",
					   .reason = reason,
					   .name = m->k->name,
					   .addr = &m->k->addr,
					   .port = m->k->port,
					   .bytes_out = m->k->out,
					   .bytes_in = m->k->in});
}

/* Send win[0..n) to the sandbox, as one chunk when we frame it. */
static int scan_emit(struct scan *sc, size_t n)
{
	char size[24];
	int sl;

	if (n == 0)
		return 0; /* a zero-size chunk would end the body */
	if (sc->chunked_out) {
		sl = snprintf(size, sizeof(size), "%zx\r\n", n);
		if (mitm_write_all(sc->m->cs, size, (size_t)sl) < 0)
			return -1;
		sc->m->k->in += (uint64_t)sl;
	}
	if (mitm_write_all(sc->m->cs, sc->win, n) < 0 ||
	    (sc->chunked_out && mitm_write_all(sc->m->cs, "\r\n", 2) < 0))
		return -1;
	sc->m->k->in += n + (sc->chunked_out ? 2 : 0);
	return 0;
}

/* Decoded body bytes in; redacted bytes out, all but the last max_secret-1 (a secret may
 * continue in the next bytes). */
static int scan_feed(struct scan *sc, const char *p, size_t n)
{
	size_t keep = sc->m->max_secret - 1;

	while (n > 0) {
		size_t take = SCAN_WIN + sc->m->max_secret - sc->len;

		if (take > n)
			take = n;
		memcpy(sc->win + sc->len, p, take);
		sc->len += take;
		p += take;
		n -= take;
		mitm_redact(sc->m, sc->win, sc->len);
		if (sc->len > keep) {
			size_t emit = sc->len - keep;
			if (scan_emit(sc, emit) < 0)
				return -1;
			memmove(sc->win, sc->win + emit, keep);
			sc->len = keep;
		}
	}
	return 0;
}

/* The end of the body: what was kept back, then the last chunk. */
static int scan_end(struct scan *sc)
{
	mitm_redact(sc->m, sc->win, sc->len);
	if (scan_emit(sc, sc->len) < 0)
		return -1;
	sc->len = 0;
	if (sc->chunked_out && mitm_write_all(sc->m->cs, "0\r\n\r\n", 5) < 0)
		return -1;
	sc->m->k->in += sc->chunked_out ? 5 : 0;
	return 0;
}

/*
 * Read until the final (non-1xx) head is in buf[0..*hl) and parsed into resp; interim
 * heads are dropped. 0, or -1 after answering (and logging).
 */
static int read_final_head(struct mitm *m, char *buf, size_t *hl, struct net_http_resp *resp)
{
	int interim = 0;

	for (;;) {
		long r = net_http_parse_response(buf, *hl, resp);
		int n;

		if (r > 0 && resp->status == 101) {
			mitm_answer(m, 502, "secret_reflected_unscannable_upgrade", "Bad Gateway");
			return -1;
		}
		if (r > 0 && resp->status >= 200)
			return 0;
		if (r > 0 && ++interim <= MAX_INTERIM) { /* 1xx: skip it, parse what follows */
			/* never relayed, but a secret in it is counted */
			mitm_redact(m, buf, (size_t)r);
			memmove(buf, buf + r, *hl - (size_t)r);
			*hl -= (size_t)r;
			continue;
		}
		if (r != -2) {
			mitm_answer(m, 502, "secret_reflected_unscannable_head", "Bad Gateway");
			return -1;
		}
		n = up_read(m, buf + *hl, (int)(RESP_HEAD_MAX - *hl));
		if (n <= 0) {
			mitm_answer(m, 502,
				    *hl ? "secret_reflected_unscannable_head"
					: "upstream_no_response",
				    "Bad Gateway");
			return -1;
		}
		*hl += (size_t)n;
	}
}

/* The final head, rebuilt from what was parsed (so the client reads what we checked),
 * without its connection fields, with ours; redacted. */
static int send_scanned_head(struct mitm *m, const char *buf, const struct net_http_resp *resp)
{
	_cleanup_free_ char *out = xzalloc(resp->head_len + 3 * resp->n_headers + 128);
	size_t o = (size_t)sprintf(out, "HTTP/1.%d %03d ", resp->minor, resp->status);

	memcpy(out + o, resp->reason.p ? resp->reason.p : "", resp->reason.len);
	o += resp->reason.len;
	o += (size_t)sprintf(out + o, "\r\n");
	for (size_t i = 0; i < resp->n_headers; i++) {
		const struct net_http_header *h = &resp->headers[i];

		if ((h->name.len == 10 && !strncasecmp(h->name.p, "connection", 10)) ||
		    (h->name.len == 10 && !strncasecmp(h->name.p, "keep-alive", 10)))
			continue;
		memcpy(out + o, h->name.p, h->name.len);
		o += h->name.len;
		memcpy(out + o, ": ", 2);
		memcpy(out + o + 2, h->value.p, h->value.len);
		o += 2 + h->value.len;
		memcpy(out + o, "\r\n", 2);
		o += 2;
	}
	o += (size_t)sprintf(out + o, "Connection: close\r\n\r\n");
	mitm_redact(m, out, o);
	if (mitm_write_all(m->cs, out, o) < 0)
		return -1;
	m->k->in += o;
	return 0;
}

/* The body as framed by resp: de-chunked, exactly Content-Length bytes, or to the close.
 * buf[0..have) came with the head. 0, -1 (I/O), -2 (bad chunked framing). */
static int scan_body(struct mitm *m, struct scan *sc, const struct net_http_resp *resp, char *buf,
		     size_t have)
{
	struct net_http_chunked ch = {.max_total = 0};
	uint64_t left = resp->content_length;
	bool bounded = resp->has_content_length;
	char *in = buf;

	for (;;) {
		int n;

		while (resp->chunked && have > 0) {
			size_t used = 0, dl = 0;
			const char *data = NULL;
			int r = net_http_chunked_step(&ch, in, have, &used, &data, &dl);

			if (r == -1)
				return -2;
			if (r == 1 && scan_feed(sc, data, dl) < 0)
				return -1;
			in += used;
			have -= used;
			if (r == 0)
				return 0;
		}
		if (!resp->chunked && have > 0) {
			size_t take = bounded && have > left ? (size_t)left : have;
			if (scan_feed(sc, in, take) < 0)
				return -1;
			left -= bounded ? take : 0;
			have = 0;
		}
		if (bounded && left == 0)
			return 0;
		n = up_read(m, buf, RESP_HEAD_MAX);
		if (n <= 0) /* the end of a close-delimited body; a short one is cut short */
			return resp->chunked || bounded ? -1 : 0;
		in = buf;
		have = (size_t)n;
	}
}

static int relay_scanned(struct mitm *m)
{
	_cleanup_free_ char *buf = xzalloc(RESP_HEAD_MAX + 1);
	_cleanup_free_ char *win = xzalloc(SCAN_WIN + m->max_secret);
	struct net_http_resp *resp = xzalloc(sizeof(*resp));
	struct scan sc = {.m = m, .win = win};
	size_t hl = 0, rest;
	bool nobody;
	int r = -1;

	if (read_final_head(m, buf, &hl, resp) < 0)
		goto out;
	if (resp->encoded) { /* we asked for identity: an encoding cannot be scanned */
		mitm_answer(m, 502, "secret_reflected_unscannable_encoding", "Bad Gateway");
		goto out;
	}
	nobody = m->head_req || resp->status == 204 || resp->status == 304;
	sc.chunked_out = resp->chunked && !nobody;
	if (send_scanned_head(m, buf, resp) < 0)
		goto out;
	rest = hl - resp->head_len;
	memmove(buf, buf + resp->head_len, rest);
	r = nobody ? 0 : scan_body(m, &sc, resp, buf, rest);
	if (r == -2) /* the head went out: the sandbox sees a cut body */
		log_reflected(m, "secret_reflected_unscannable_chunked");
	else if (r < 0)
		log_reflected(m, "upstream_response_cut");
	if (r == 0)
		r = scan_end(&sc);
	if (m->redacted)
		log_reflected(m, "secret_reflected_redacted");
out:
	free(resp);
	return r < 0 ? -1 : 0;
}

/* Relay the upstream's response to the sandbox; with a secret aboard, scanned. */
int mitm_relay_response(struct mitm *m)
{
	return m->n_secrets ? relay_scanned(m) : relay_raw(m);
}
