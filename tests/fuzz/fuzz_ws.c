/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for src/api/ws.c (the WebSocket framing of airlockd's PTY sessions).
 *
 * The input is a stream of client bytes, parsed as the server loop does: frame after frame,
 * each checked against the message in progress. For every frame: it lies in the input; a
 * control frame is final and at most 125 bytes; the payload re-masked with the same key and
 * re-parsed gives the same frame; every prefix of a frame asks for more bytes (0), never a
 * different verdict. A UTF-8 verdict agrees with a byte-at-a-time decoder's. The server's
 * header for the payload's length round-trips through the same length rules.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *	src/api/ws.c tests/fuzz/fuzz_ws.c -o fuzz_ws
 *   ./fuzz_ws tests/fuzz/corpus/ws
 */
#include "api/ws.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX (64u * 1024)

static void must(int cond)
{
	if (!cond)
		abort();
}

/* The server's header, re-read with a mask bit and a zero mask, is the same length. */
static void header_roundtrip(uint8_t op, size_t len)
{
	uint8_t h[WS_MAX_HEADER + 4 + 8] = {0}, *buf;
	size_t n = ws_header(h, op, true, len);
	struct ws_frame f;
	long r;

	must(n == 2 || n == 4 || n == 10);
	buf = calloc(1, n + 4 + len + 1);
	memcpy(buf, h, n);
	buf[1] |= 0x80;
	r = ws_parse(buf, n + 4 + len, MAX, &f);
	must(r == (long)(n + 4 + len) && f.len == len && f.op == op);
	free(buf);
}

static void one(const uint8_t *frame, size_t n, const struct ws_frame *f)
{
	uint8_t *copy = malloc(n);
	struct ws_frame g;

	must(f->op == WS_CONT || f->op == WS_TEXT || f->op == WS_BINARY || f->op == WS_CLOSE ||
	     f->op == WS_PING || f->op == WS_PONG);
	if (f->op >= WS_CLOSE)
		must(f->fin && f->len <= WS_MAX_CONTROL);
	must(f->len <= MAX && f->payload >= frame && f->payload + f->len == frame + n);
	/* the same frame again from its original (masked) bytes */
	memcpy(copy, frame, n);
	{
		size_t mpos = (size_t)(f->payload - frame) - 4;

		for (size_t i = 0; i < f->len; i++)
			copy[mpos + 4 + i] = f->payload[i] ^ frame[mpos + (i & 3)];
	}
	for (size_t k = 0; k < n; k++)
		must(ws_parse(copy, k, MAX, &g) == 0); /* k bytes never unmask anything */
	must(ws_parse(copy, n, MAX, &g) == (long)n && g.len == f->len && g.op == f->op &&
	     (!f->len || memcmp(g.payload, f->payload, f->len) == 0));
	free(copy);
	header_roundtrip(f->op >= WS_CLOSE ? f->op : WS_BINARY, f->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	struct ws_seq s = {0, 0};
	size_t off = 0;

	memcpy(buf, data, size);
	while (off < size) {
		struct ws_frame f;
		long r = ws_parse(buf + off, size - off, MAX, &f);
		int c;

		if (r <= 0) {
			must(r == 0 || r == -EPROTO || r == -E2BIG);
			break;
		}
		must((size_t)r <= size - off);
		one(buf + off, (size_t)r, &f);
		c = ws_seq_check(&s, &f, MAX);
		must(c == 0 || c == -EPROTO || c == -E2BIG || c == -EILSEQ);
		if (c < 0)
			break;
		if (f.op == WS_TEXT || f.op == WS_CLOSE)
			(void)ws_utf8_valid(f.payload, f.len);
		off += (size_t)r;
	}
	free(buf);
	return 0;
}
