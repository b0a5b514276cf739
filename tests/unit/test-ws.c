/* SPDX-License-Identifier: MIT */
/* The WebSocket codec (src/api/ws.c): RFC 6455's examples and every refusal. */
#include "api/ws.h"
#include "tap.h"

#include <errno.h>
#include <string.h>

/* A client frame: header bits b0, payload p (len), masked with key unless unmasked. */
static size_t client_frame(uint8_t *out, uint8_t b0, const void *p, size_t len, bool masked)
{
	static const uint8_t key[4] = {0x37, 0xfa, 0x21, 0x3d};
	size_t h = 2;

	out[0] = b0;
	if (len < 126) {
		out[1] = (uint8_t)len;
	} else if (len <= 0xffff) {
		out[1] = 126, out[2] = (uint8_t)(len >> 8), out[3] = (uint8_t)len, h = 4;
	} else {
		out[1] = 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
		h = 10;
	}
	if (masked) {
		out[1] |= 0x80;
		memcpy(out + h, key, 4);
		h += 4;
	}
	for (size_t i = 0; i < len; i++)
		out[h + i] = ((const uint8_t *)p)[i] ^ (masked ? key[i & 3] : 0);
	return h + len;
}

static void rfc_examples(void)
{
	/* 5.7: a single-frame masked text message "Hello" */
	uint8_t hello[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58};
	uint8_t unmasked[] = {0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f};
	struct ws_frame f;
	char acc[WS_ACCEPT_LEN + 1];
	uint8_t h[WS_MAX_HEADER];

	CHECK(ws_parse(hello, sizeof(hello), 1024, &f) == (long)sizeof(hello) && f.fin &&
		  f.op == WS_TEXT && f.len == 5 && memcmp(f.payload, "Hello", 5) == 0,
	      "RFC 6455 5.7: a masked text frame unmasks to Hello");
	CHECK(ws_parse(unmasked, sizeof(unmasked), 1024, &f) == -EPROTO,
	      "an unmasked client frame is refused");
	CHECK(ws_accept("dGhlIHNhbXBsZSBub25jZQ==", acc) == 0 &&
		  strcmp(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0,
	      "RFC 6455 1.3: the accept value of the sample key");
	CHECK(ws_accept("dGhlIHNhbXBsZSBub25jZQ=", acc) == -EINVAL &&
		  ws_accept("dGhlIHNhbXBsZSBub25j!Q==", acc) == -EINVAL && ws_accept(NULL, acc) < 0,
	      "a key that is not 16 bytes of base64 is refused");
	CHECK(ws_header(h, WS_BINARY, true, 5) == 2 && h[0] == 0x82 && h[1] == 5,
	      "a short server frame has a 2-byte header, unmasked");
	CHECK(ws_header(h, WS_BINARY, true, 256) == 4 && h[1] == 126 && h[2] == 1 && h[3] == 0,
	      "256 bytes use the 16-bit length");
	CHECK(ws_header(h, WS_TEXT, false, 70000) == 10 && h[0] == 0x01 && h[1] == 127 &&
		  h[7] == 0x01 && h[8] == 0x11 && h[9] == 0x70,
	      "70000 bytes use the 64-bit length");
}

static void partial_and_lengths(void)
{
	uint8_t buf[70100], big[70000];
	struct ws_frame f;
	size_t n, k = 0;

	memset(big, 'x', sizeof(big));
	n = client_frame(buf, 0x82, big, 300, true);
	while (k < n && ws_parse(buf, k, 1 << 20, &f) == 0)
		k++;
	CHECK(k == n && ws_parse(buf, n, 1 << 20, &f) == (long)n && f.len == 300,
	      "a frame cut anywhere asks for more bytes, then parses whole");
	n = client_frame(buf, 0x82, big, sizeof(big), true);
	CHECK(ws_parse(buf, n, 1 << 20, &f) == (long)n && f.len == sizeof(big),
	      "a 64-bit length parses");
	CHECK(ws_parse(buf, n, 65536, &f) == -E2BIG, "a payload over the cap is E2BIG");
	buf[0] = 0x82, buf[1] = 0x80 | 126, buf[2] = 0, buf[3] = 5;
	CHECK(ws_parse(buf, 10, 1024, &f) == -EPROTO, "a non-minimal 16-bit length is refused");
	buf[1] = 0x80 | 127;
	memset(buf + 2, 0, 8);
	buf[9] = 200;
	CHECK(ws_parse(buf, 14, 1024, &f) == -EPROTO, "a non-minimal 64-bit length is refused");
	buf[2] = 0x80;
	CHECK(ws_parse(buf, 14, 1024, &f) == -EPROTO,
	      "a 64-bit length with its top bit is refused");
}

static void bad_headers(void)
{
	uint8_t buf[300], big[200];
	struct ws_frame f;
	size_t n;

	memset(big, 'p', sizeof(big));
	n = client_frame(buf, 0xc2, "a", 1, true);
	CHECK(ws_parse(buf, n, 1024, &f) == -EPROTO, "RSV1 without an extension is refused");
	n = client_frame(buf, 0x83, "a", 1, true);
	CHECK(ws_parse(buf, n, 1024, &f) == -EPROTO, "a reserved data opcode (3) is refused");
	n = client_frame(buf, 0x8b, "a", 1, true);
	CHECK(ws_parse(buf, n, 1024, &f) == -EPROTO, "a reserved control opcode (0xb) is refused");
	n = client_frame(buf, 0x09, "a", 1, true);
	CHECK(ws_parse(buf, n, 1024, &f) == -EPROTO, "a fragmented ping is refused");
	n = client_frame(buf, 0x89, big, 126, true);
	CHECK(ws_parse(buf, n, 1024, &f) == -EPROTO, "a 126-byte ping is refused");
	n = client_frame(buf, 0x89, big, 125, true);
	CHECK(ws_parse(buf, n, 1024, &f) == (long)n && f.op == WS_PING, "a 125-byte ping parses");
}

static int seq(struct ws_seq *s, uint8_t b0, const char *p, size_t max)
{
	uint8_t buf[256];
	struct ws_frame f;
	size_t n = client_frame(buf, b0, p, strlen(p), true);

	if (ws_parse(buf, n, 1024, &f) != (long)n)
		return -1000;
	return ws_seq_check(s, &f, max);
}

static void sequences(void)
{
	struct ws_seq s = {0, 0};

	CHECK(seq(&s, 0x01, "ab", 100) == 0 && s.op == WS_TEXT && seq(&s, 0x89, "", 100) == 0 &&
		  seq(&s, 0x80, "cd", 100) == 0 && s.op == 0,
	      "a fragmented text message with a ping between its fragments");
	CHECK(seq(&s, 0x80, "x", 100) == -EPROTO, "a continuation outside a message is refused");
	CHECK(seq(&s, 0x02, "x", 100) == 0 && seq(&s, 0x82, "y", 100) == -EPROTO,
	      "a new data frame inside a message is refused");
	s = (struct ws_seq){0, 0};
	CHECK(seq(&s, 0x02, "12345", 8) == 0 && seq(&s, 0x80, "6789", 8) == -E2BIG,
	      "a message over the cap across fragments is E2BIG");
	s = (struct ws_seq){0, 0};
	CHECK(seq(&s, 0x88, "", 100) == 0, "an empty close is valid");
	CHECK(seq(&s, 0x88,
		  "\x03\xe8"
		  "bye",
		  100) == 0,
	      "close 1000 with a reason is valid");
	CHECK(seq(&s, 0x88, "\x03", 100) == -EPROTO, "a 1-byte close is refused");
	CHECK(seq(&s, 0x88, "\x03\xed", 100) == -EPROTO, "close 1005 (reserved) is refused");
	CHECK(seq(&s, 0x88, "\x03\xe8\xc0\xaf", 100) == -EILSEQ,
	      "a close reason that is not UTF-8 is EILSEQ");
}

static void utf8_and_close(void)
{
	uint8_t out[WS_MAX_CONTROL];
	char longr[200];

	CHECK(ws_utf8_valid((const uint8_t *)"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15),
	      "UTF-8 with 2, 3 and 4-byte characters is valid");
	CHECK(!ws_utf8_valid((const uint8_t *)"\xc0\xaf", 2), "an overlong form is refused");
	CHECK(!ws_utf8_valid((const uint8_t *)"\xed\xa0\x80", 3), "a surrogate is refused");
	CHECK(!ws_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4), "over U+10FFFF is refused");
	CHECK(!ws_utf8_valid((const uint8_t *)"\xe2\x82", 2), "a cut character is refused");
	CHECK(ws_utf8_valid((const uint8_t *)"a\0b", 3), "NUL is valid text");
	memset(longr, 'r', sizeof(longr) - 1);
	longr[sizeof(longr) - 1] = '\0';
	CHECK(ws_close_payload(out, 1002, "bad") == 5 && out[0] == 0x03 && out[1] == 0xea,
	      "a close payload is the code, big-endian, and the reason");
	CHECK(ws_close_payload(out, 1000, longr) == WS_MAX_CONTROL,
	      "a long close reason is cut to 125 bytes");
	memset(longr, 0, sizeof(longr));
	for (int i = 0; i < 70; i++)
		memcpy(longr + 2 * i, "\xc3\xa9", 2);
	CHECK(ws_close_payload(out, 1000, longr) == 2 + 122 && ws_utf8_valid(out + 2, 122),
	      "a cut reason ends on a character boundary");
}

int main(void)
{
	rfc_examples();
	partial_and_lengths();
	bad_headers();
	sequences();
	utf8_and_close();
	return tap_done();
}
