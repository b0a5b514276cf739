/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for src/net/tls_hello.c.
 *
 * Every input is parsed with a full and with a small scratch buffer. For a
 * parsed hello: the spans lie in scratch, the SNI is printable ASCII, the
 * ALPN iterator visits n_alpn names; every shorter prefix of the hello's
 * records asks for more bytes (-2 with need > prefix), never for a verdict;
 * and the same handshake re-split into records of a size taken from the
 * input parses to the very same result (reassembly must not matter).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *	src/net/tls_hello.c tests/fuzz/fuzz_tls.c -o fuzz_tls
 *   ./fuzz_tls tests/fuzz/corpus/tls
 */
#include "net/tls_hello.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

static bool inside(const uint8_t *p, size_t n, const uint8_t *base, size_t cap)
{
	return !p || (p >= base && n <= cap && (size_t)(p - base) <= cap - n);
}

static void check_hello(const struct net_tls_hello *h, const uint8_t *scratch, size_t size)
{
	const uint8_t *name;
	size_t cur = 0, len, n = 0;

	must(h->consumed <= size && h->n_records >= 1);
	must(h->hello_len + 4 <= NET_TLS_MAX_HELLO);
	must(inside(h->sni, h->sni_len, scratch, NET_TLS_MAX_HELLO));
	must(inside(h->alpn, h->alpn_len, scratch, NET_TLS_MAX_HELLO));
	must(inside(h->versions, h->versions_len, scratch, NET_TLS_MAX_HELLO));
	for (size_t i = 0; h->sni && i < h->sni_len; i++)
		must(h->sni[i] > 0x20 && h->sni[i] < 0x7f);
	while (net_tls_alpn_next(h, &cur, &name, &len) == 1) {
		must(len >= 1 && inside(name, len, scratch, NET_TLS_MAX_HELLO));
		n++;
	}
	must(n == h->n_alpn);
}

static bool same(const struct net_tls_hello *a, const struct net_tls_hello *b)
{
	return a->sni_len == b->sni_len && (!a->sni_len || !memcmp(a->sni, b->sni, a->sni_len)) &&
	       a->alpn_len == b->alpn_len &&
	       (!a->alpn_len || !memcmp(a->alpn, b->alpn, a->alpn_len)) && a->ech == b->ech &&
	       a->esni == b->esni && a->tls13 == b->tls13 && a->n_extensions == b->n_extensions &&
	       a->hello_len == b->hello_len && a->legacy_version == b->legacy_version &&
	       a->record_version == b->record_version;
}

/* The handshake in scratch, re-framed in records of `chunk` bytes. */
static void resplit(const struct net_tls_hello *h, const uint8_t *scratch, size_t chunk, int r)
{
	static uint8_t buf[2 * NET_TLS_MAX_HELLO + 64], scratch2[NET_TLS_MAX_HELLO];
	struct net_tls_hello h2;
	size_t total = h->hello_len + 4, n = 0, need;

	for (size_t off = 0; off < total; off += chunk) {
		size_t c = total - off < chunk ? total - off : chunk;
		buf[n] = 22;
		buf[n + 1] = (uint8_t)(h->record_version >> 8);
		buf[n + 2] = (uint8_t)h->record_version;
		buf[n + 3] = (uint8_t)(c >> 8);
		buf[n + 4] = (uint8_t)c;
		memcpy(buf + n + 5, scratch + off, c);
		n += 5 + c;
	}
	must(net_tls_parse_hello(buf, n, scratch2, sizeof(scratch2), &h2, &need) == r);
	must(same(h, &h2) && h2.consumed == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t scratch[NET_TLS_MAX_HELLO], small[512], other[NET_TLS_MAX_HELLO];
	struct net_tls_hello h, hs, hp;
	size_t need = 0, need2;
	int r, rs;

	r = net_tls_parse_hello(data, size, scratch, sizeof(scratch), &h, &need);
	must(r == 0 || r == 1 || r == -1 || r == -2);
	must(r != -1 || h.why);
	must(r != -2 || need > size);
	must(r != 0 || h.sni);
	must(r != 1 || !h.sni);
	rs = net_tls_parse_hello(data, size, small, sizeof(small), &hs, &need2);
	/* a smaller cap can only turn a verdict into a refusal */
	must(rs == r || rs == -1);
	if (r < 0)
		return 0;
	check_hello(&h, scratch, size);
	for (size_t k = 0; k < h.consumed; k += 1 + k / 4) {
		must(net_tls_parse_hello(data, k, other, sizeof(other), &hp, &need2) == -2);
		must(need2 > k && need2 <= h.consumed);
	}
	resplit(&h, scratch, 1 + (size ? data[size - 1] : 0) % 64 * 37, r);
	resplit(&h, scratch, NET_TLS_MAX_RECORD, r);
	return 0;
}
