/* SPDX-License-Identifier: MIT */
/* WebSocket framing (RFC 6455), pure: see ws.h. */
#include "api/ws.h"

#include <errno.h>
#include <string.h>

long ws_parse(uint8_t *buf, size_t avail, size_t max, struct ws_frame *f)
{
	size_t hdr = 2;
	uint64_t len;
	uint8_t *mask;

	if (avail < 2)
		return 0;
	if (buf[0] & 0x70) /* RSV1..3: no extension was negotiated */
		return -EPROTO;
	if (!(buf[1] & 0x80)) /* 5.1: a client's frames are masked */
		return -EPROTO;
	f->fin = buf[0] & 0x80;
	f->op = buf[0] & 0x0f;
	switch (f->op) {
	case WS_CONT:
	case WS_TEXT:
	case WS_BINARY:
		break;
	case WS_CLOSE:
	case WS_PING:
	case WS_PONG:
		if (!f->fin || (buf[1] & 0x7f) > WS_MAX_CONTROL) /* 5.5 */
			return -EPROTO;
		break;
	default:
		return -EPROTO;
	}
	len = buf[1] & 0x7f;
	if (len == 126) {
		if (avail < 4)
			return 0;
		len = (uint64_t)buf[2] << 8 | buf[3];
		if (len < 126) /* 5.2: the minimal number of bytes */
			return -EPROTO;
		hdr = 4;
	} else if (len == 127) {
		if (avail < 10)
			return 0;
		len = 0;
		for (int i = 2; i < 10; i++)
			len = len << 8 | buf[i];
		if (len >> 63 || len <= 0xffff)
			return -EPROTO;
		hdr = 10;
	}
	if (len > max)
		return -E2BIG;
	mask = buf + hdr;
	hdr += 4;
	if (avail < hdr || avail - hdr < len)
		return 0;
	f->payload = buf + hdr;
	f->len = (size_t)len;
	for (size_t i = 0; i < f->len; i++)
		f->payload[i] ^= mask[i & 3];
	return (long)(hdr + f->len);
}

bool ws_utf8_valid(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = p[i];
		uint32_t cp;
		size_t n;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 2, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 3, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 4, cp = c & 0x07;
		else
			return false;
		if (len - i < n)
			return false;
		for (size_t k = 1; k < n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n;
	}
	return true;
}

/* 7.4: codes an endpoint may send (1004-1006 and 1015 are reserved, 1012-1014 are for
 * servers' use, 3000-4999 for libraries and applications). */
static bool close_code_ok(unsigned code)
{
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1011) ||
	       (code >= 3000 && code <= 4999);
}

static int check_close(const struct ws_frame *f)
{
	if (f->len == 0)
		return 0;
	if (f->len == 1 || !close_code_ok((unsigned)f->payload[0] << 8 | f->payload[1]))
		return -EPROTO;
	return ws_utf8_valid(f->payload + 2, f->len - 2) ? 0 : -EILSEQ;
}

int ws_seq_check(struct ws_seq *s, const struct ws_frame *f, size_t max)
{
	if (f->op >= WS_CLOSE)
		return f->op == WS_CLOSE ? check_close(f) : 0;
	if ((f->op == WS_CONT) != (s->op != 0)) /* 5.4 */
		return -EPROTO;
	if (f->op != WS_CONT) {
		s->op = f->op;
		s->len = 0;
	}
	if (f->len > max - s->len)
		return -E2BIG;
	s->len += f->len;
	if (f->fin)
		s->op = 0;
	return 0;
}

size_t ws_header(uint8_t out[WS_MAX_HEADER], uint8_t op, bool fin, uint64_t len)
{
	out[0] = (uint8_t)((fin ? 0x80 : 0) | (op & 0x0f));
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	return 10;
}

size_t ws_close_payload(uint8_t out[WS_MAX_CONTROL], uint16_t code, const char *reason)
{
	size_t n = reason ? strlen(reason) : 0;

	if (n > WS_MAX_CONTROL - 2)
		n = WS_MAX_CONTROL - 2;
	while (n && ((uint8_t)reason[n] & 0xc0) == 0x80) /* not inside a character */
		n--;
	out[0] = (uint8_t)(code >> 8);
	out[1] = (uint8_t)code;
	for (size_t i = 0; i < n; i++) /* bytes of a payload, not a C string */
		out[2 + i] = (uint8_t)reason[i];
	return 2 + n;
}

/* --- SHA-1 (FIPS 180-4), for the handshake's accept value only ------------------------ */

struct sha1 {
	uint32_t h[5];
	uint8_t block[64];
	size_t n;
	uint64_t total;
};

static uint32_t rol(uint32_t x, int k)
{
	return x << k | x >> (32 - k);
}

static void sha1_block(struct sha1 *s)
{
	uint32_t w[80], a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)s->block[4 * i] << 24 | (uint32_t)s->block[4 * i + 1] << 16 |
		       (uint32_t)s->block[4 * i + 2] << 8 | s->block[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < 80; i++) {
		uint32_t f, k, t;

		if (i < 20)
			f = (b & c) | (~b & d), k = 0x5a827999;
		else if (i < 40)
			f = b ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = b ^ c ^ d, k = 0xca62c1d6;
		t = rol(a, 5) + f + e + k + w[i];
		e = d, d = c, c = rol(b, 30), b = a, a = t;
	}
	s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e;
}

static void sha1_add(struct sha1 *s, const void *p, size_t len)
{
	const uint8_t *b = p;

	s->total += len;
	while (len--) {
		s->block[s->n++] = *b++;
		if (s->n == 64) {
			sha1_block(s);
			s->n = 0;
		}
	}
}

static void sha1_end(struct sha1 *s, uint8_t out[20])
{
	uint64_t bits = s->total * 8;
	uint8_t len[8];

	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)(bits >> (56 - 8 * i));
	sha1_add(s, "\x80", 1);
	while (s->n != 56)
		sha1_add(s, "", 1);
	sha1_add(s, len, 8);
	for (int i = 0; i < 20; i++)
		out[i] = (uint8_t)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int ws_accept(const char *key, char out[WS_ACCEPT_LEN + 1])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	struct sha1 s = {{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0}, {0}, 0, 0};
	uint8_t d[21] = {0};
	size_t o = 0;

	/* 16 bytes in base64: 22 characters of the alphabet, then "==" (4.1). */
	if (!key || strlen(key) != 24 || strspn(key, b64) != 22 || strcmp(key + 22, "==") != 0)
		return -EINVAL;
	sha1_add(&s, key, 24);
	sha1_add(&s, guid, sizeof(guid) - 1);
	sha1_end(&s, d);
	for (int i = 0; i < 21; i += 3) {
		uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];

		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = i + 1 < 20 ? b64[v >> 6 & 63] : '=';
		out[o++] = i + 2 < 20 ? b64[v & 63] : '=';
	}
	out[o] = '\0';
	return 0;
}
