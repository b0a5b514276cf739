/* SPDX-License-Identifier: MIT */
/*
 * The Connect protocol's framing, as the E2B SDK speaks it to envd (JSON codec): pure
 * code over bytes, no I/O, no allocation but the JSON value it returns.
 *
 * A server-streaming request body, and every message of its answer, is an envelope: one
 * flag byte, a 4-byte big-endian length, that many bytes of JSON. Flag 0x01 means a
 * compressed payload (never accepted: we announce no compression), 0x02 the end of the
 * stream (the last message of an answer; never in a request). A unary request is the
 * JSON message itself. Either way the message is one JSON object, strict: UTF-8, no
 * duplicate keys, no NUL, nothing after it, at most E2B_CONNECT_MAX_MSG bytes.
 *
 * Return codes follow docs/design/parsers.md: -1 refused (with a static reason in *why
 * and the Connect error code to answer with in *code), >= 0 success.
 */
#ifndef AL_API_E2B_CONNECT_H
#define AL_API_E2B_CONNECT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define E2B_CONNECT_HDR 5	       /* flag byte + 4-byte length */
#define E2B_CONNECT_MAX_MSG (1u << 20) /* one request message, bytes */
#define E2B_CONNECT_FLAG_COMPRESSED 0x01
#define E2B_CONNECT_FLAG_END 0x02

/* The body of a server-streaming request: exactly one uncompressed, non-end envelope that
 * fills it. *msg and *msg_len point into buf. */
int e2b_connect_unwrap(const uint8_t *buf, size_t len, const char **msg, size_t *msg_len,
		       const char **code, const char **why);
/* One strict JSON object of at most E2B_CONNECT_MAX_MSG bytes (an empty message is {}):
 * a new reference, or NULL with *code and *why. */
json_t *e2b_connect_json(const char *msg, size_t len, const char **code, const char **why);
/* Writes the 5-byte header of an envelope of len bytes into hdr. */
void e2b_connect_header(uint8_t flags, uint32_t len, uint8_t hdr[E2B_CONNECT_HDR]);
/* The HTTP status a unary call's error answers with (Connect's table); 500 if unknown. */
unsigned e2b_connect_status(const char *code);

#endif
