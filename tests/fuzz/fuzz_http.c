/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for src/net/http_req.c.
 *
 * For every input: the head parser at once and incrementally (a prefix first,
 * then the whole with last_len), which must agree; every span of a parsed
 * head lies in the input and obeys its grammar; the head rebuilt from the
 * parsed pieces (one SP, "name: value" CRLF) parses to the same request.
 * The bytes after the head (or the whole input) go through the chunked
 * decoder in one call sequence and again fed in slices of a size taken
 * from the input: both must give the same verdict, data and consumed count.
 * The response head parser reads the same input (check_resp).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *	src/net/http_req.c tests/fuzz/fuzz_http.c -o fuzz_http
 *   ./fuzz_http tests/fuzz/corpus/http
 */
#include "net/http_req.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

static bool in(const struct net_http_span *s, const char *b, size_t n)
{
	return !s->p || (s->p >= b && s->len <= n && (size_t)(s->p - b) <= n - s->len);
}

static bool span_eq(const struct net_http_span *a, const struct net_http_span *b)
{
	return a->len == b->len && (!a->len || memcmp(a->p, b->p, a->len) == 0);
}

static void check_req(const struct net_http_req *r, const char *b, size_t n)
{
	must(r->head_len <= n && r->head_len <= NET_HTTP_MAX_HEAD);
	must(in(&r->method, b, n) && in(&r->target, b, n) && in(&r->host, b, n));
	must(in(&r->path, b, n) && in(&r->host_header, b, n) && in(&r->scheme, b, n));
	must(r->n_headers <= NET_HTTP_MAX_HEADERS && r->port != 0 && r->host.len > 0);
	must(!(r->chunked && r->has_content_length) && (r->minor == 0 || r->minor == 1));
	must(r->form != NET_HTTP_AUTHORITY || r->port_explicit);
	for (size_t i = 0; i < r->n_headers; i++) {
		const struct net_http_header *h = &r->headers[i];
		must(in(&h->name, b, n) && in(&h->value, b, n) && h->name.len > 0);
		must(!memchr(h->name.p, ':', h->name.len) &&
		     !memchr(h->value.p, '\n', h->value.len));
		must(!memchr(h->value.p, '\r', h->value.len) &&
		     !memchr(h->value.p, 0, h->value.len));
	}
	for (size_t i = 0; i < r->host.len; i++)
		must(r->host.p[i] != '@' && r->host.p[i] != '%' && r->host.p[i] != '\\');
}

static void rebuild(const struct net_http_req *r)
{
	static char buf[2 * NET_HTTP_MAX_HEAD];
	static struct net_http_req r2;
	size_t n = 0;

#define ADD(p, l) (memcpy(buf + n, (p), (l)), n += (l))
	ADD(r->method.p, r->method.len);
	ADD(" ", 1);
	ADD(r->target.p, r->target.len);
	ADD(r->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
	for (size_t i = 0; i < r->n_headers; i++) {
		ADD(r->headers[i].name.p, r->headers[i].name.len);
		ADD(": ", 2);
		ADD(r->headers[i].value.p, r->headers[i].value.len);
		ADD("\r\n", 2);
	}
	ADD("\r\n", 2);
#undef ADD
	if (n > NET_HTTP_MAX_HEAD)
		return;
	must(net_http_parse_request(buf, n, 0, &r2) == (long)n);
	must(r2.form == r->form && r2.port == r->port && r2.chunked == r->chunked);
	must(span_eq(&r2.host, &r->host) && span_eq(&r2.path, &r->path));
	must(r2.content_length == r->content_length && r2.n_headers == r->n_headers);
}

/* Decode in[0..len) fed `slice` bytes at a time; returns the verdict, sums data. */
static int chunked(const char *b, size_t len, size_t slice, uint64_t *sum, size_t *used)
{
	struct net_http_chunked c = {.max_total = 1 << 20};
	size_t pos = 0, consumed, dl;
	const char *d;
	int r = -2;

	*sum = 0;
	while (pos < len) {
		size_t n = len - pos < slice ? len - pos : slice;
		r = net_http_chunked_step(&c, b + pos, n, &consumed, &d, &dl);
		must(consumed <= n);
		pos += consumed;
		if (r == 1) {
			must(d >= b && dl <= len && d + dl <= b + pos);
			for (size_t i = 0; i < dl; i++)
				*sum = *sum * 31 + (unsigned char)d[i];
			continue;
		}
		if (r != -2)
			break;
		must(consumed == n);
	}
	*used = pos;
	return r;
}

/* The response head parser on the same bytes: spans inside, framing consistent, and a
 * head one byte short is incomplete. */
static void check_resp(const char *b, size_t n)
{
	static struct net_http_resp s, s2;
	long r = net_http_parse_response(b, n, &s);

	must(r > 0 || (r == -1 && s.why) || r == -2);
	if (r <= 0)
		return;
	must((size_t)r == s.head_len && s.status >= 100 && s.status <= 599);
	must(!(s.chunked && s.has_content_length) && s.n_headers <= NET_HTTP_MAX_HEADERS);
	must(in(&s.reason, b, n));
	for (size_t i = 0; i < s.n_headers; i++)
		must(in(&s.headers[i].name, b, n) && in(&s.headers[i].value, b, n) &&
		     !memchr(s.headers[i].value.p, '\n', s.headers[i].value.len));
	must(net_http_parse_response(b, (size_t)r - 1, &s2) == -2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct net_http_req r, r2;
	const char *b = (const char *)data;
	size_t split = size ? data[0] * size / 256 : 0, body, u1, u2;
	uint64_t s1, s2;
	long n, n2;
	int c1, c2;

	n = net_http_parse_request(b, size, 0, &r);
	must(n > 0 || n == -1 || n == -2);
	must(n != -1 ||
	     (r.why && (r.status == 400 || r.status == 431 || r.status == 501 || r.status == 505)));
	if (net_http_parse_request(b, split, 0, &r2) == -2) {
		n2 = net_http_parse_request(b, size, split, &r2);
		must(n2 == n);
	}
	if (n > 0) {
		must((size_t)n == r.head_len);
		check_req(&r, b, size);
		must(net_http_parse_request(b, (size_t)n - 1, 0, &r2) == -2);
		rebuild(&r);
	}
	body = n > 0 ? (size_t)n : 0;
	c1 = chunked(b + body, size - body, size, &s1, &u1);
	c2 = chunked(b + body, size - body, 1 + (size ? data[size - 1] % 7 : 0), &s2, &u2);
	must(c1 == c2 && s1 == s2 && u1 == u2);
	check_resp(b, size);
	return 0;
}
