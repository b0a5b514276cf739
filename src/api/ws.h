/* SPDX-License-Identifier: MIT */
/*
 * WebSocket framing (RFC 6455), the server's side, as pure code: no I/O, no allocation.
 * The server loop (src/api/ws_session.c) reads bytes, asks ws_parse for a frame, checks it
 * against the message in progress (ws_seq), and writes frames built by ws_header.
 *
 * Strict, as the rest of airlockd's parsers (docs/design/parsers.md): a client frame must
 * be masked (5.1), have no RSV bit (no extension is negotiated), a known opcode, a
 * minimal length encoding (5.2), a 64-bit length with its top bit clear; a control frame
 * is unfragmented and at most 125 bytes (5.5); a close frame's payload is empty or a valid
 * code and a UTF-8 reason (5.5.1, 7.4); a text message is UTF-8 (8.1). A frame's payload
 * is capped (the caller's max): larger is -E2BIG (close 1009); a broken frame is -EPROTO
 * (close 1002), invalid text -EILSEQ (close 1007). Tests: tests/unit/test-ws.c; fuzzer:
 * tests/fuzz/fuzz_ws.c.
 */
#ifndef AL_API_WS_H
#define AL_API_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ws_op {
	WS_CONT = 0x0,
	WS_TEXT = 0x1,
	WS_BINARY = 0x2,
	WS_CLOSE = 0x8,
	WS_PING = 0x9,
	WS_PONG = 0xa,
};

/* Close codes (7.4.1). */
enum {
	WS_CLOSE_NORMAL = 1000,
	WS_CLOSE_GOING_AWAY = 1001,
	WS_CLOSE_PROTOCOL = 1002,
	WS_CLOSE_UNSUPPORTED = 1003,
	WS_CLOSE_BAD_DATA = 1007,
	WS_CLOSE_POLICY = 1008,
	WS_CLOSE_TOO_BIG = 1009,
	WS_CLOSE_INTERNAL = 1011,
};

#define WS_MAX_HEADER 14   /* 2 + 8 (length) + 4 (mask) */
#define WS_MAX_CONTROL 125 /* a control frame's payload */
#define WS_ACCEPT_LEN 28   /* base64 of a SHA-1 */

struct ws_frame {
	bool fin;
	uint8_t op;
	uint8_t *payload; /* unmasked in place, inside the caller's buffer */
	size_t len;
};

/*
 * One client frame at buf[0..avail): its total size (header and payload) with *f filled and
 * the payload unmasked in place; 0 if more bytes are needed; -EPROTO (a broken or
 * unmasked frame), -E2BIG (a payload over max). Whether it fits the message in progress is
 * ws_seq's question.
 */
long ws_parse(uint8_t *buf, size_t avail, size_t max, struct ws_frame *f);

/* The message in progress across fragments: op of its first frame (0: none) and its size. */
struct ws_seq {
	uint8_t op;
	size_t len;
};

/*
 * Does frame f fit the sequence (a continuation only inside a message, a new data frame
 * only outside one, a message at most max bytes)? Updates s; 0, -EPROTO or -E2BIG. A
 * control frame leaves s as it is and is checked on its own (a close's payload: empty, or
 * a valid code and a UTF-8 reason: -EPROTO otherwise, -EILSEQ for the reason's text).
 */
int ws_seq_check(struct ws_seq *s, const struct ws_frame *f, size_t max);

/* Strict UTF-8 (no overlong forms, no surrogates, nothing over U+10FFFF; NUL allowed). */
bool ws_utf8_valid(const uint8_t *p, size_t len);

/* The header of a server frame (never masked) of len payload bytes: its size (2..10). */
size_t ws_header(uint8_t out[WS_MAX_HEADER], uint8_t op, bool fin, uint64_t len);

/* A close frame's payload: the code, big-endian, then the reason (cut to fit 125 bytes at
 * a character boundary). Its size. */
size_t ws_close_payload(uint8_t out[WS_MAX_CONTROL], uint16_t code, const char *reason);

/* Sec-WebSocket-Accept of a Sec-WebSocket-Key (4.2.2): base64(SHA-1(key + GUID)) into out
 * (NUL-terminated). -EINVAL if the key is not 24 characters of base64 (16 bytes). */
int ws_accept(const char *key, char out[WS_ACCEPT_LEN + 1]);

#endif
