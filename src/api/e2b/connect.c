/* SPDX-License-Identifier: MIT */
/* The Connect envelope and its JSON message (connect.h): strict, size-capped, pure. */
#include "api/e2b/connect.h"

#include <string.h>

int e2b_connect_unwrap(const uint8_t *buf, size_t len, const char **msg, size_t *msg_len,
		       const char **code, const char **why)
{
	uint32_t n;

	*code = "invalid_argument";
	if (len < E2B_CONNECT_HDR) {
		*why = len ? "truncated envelope header" : "empty request: an envelope is required";
		return -1;
	}
	if (buf[0] & E2B_CONNECT_FLAG_COMPRESSED) {
		*why = "compressed envelope, but no compression was negotiated";
		return -1;
	}
	if (buf[0] != 0) {
		*why = buf[0] == E2B_CONNECT_FLAG_END ? "end-of-stream envelope in a request"
						      : "unknown envelope flags";
		return -1;
	}
	n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
	if (n > E2B_CONNECT_MAX_MSG) {
		*code = "resource_exhausted";
		*why = "envelope larger than the message limit";
		return -1;
	}
	if (n > len - E2B_CONNECT_HDR) {
		*why = "truncated envelope";
		return -1;
	}
	if (n < len - E2B_CONNECT_HDR) {
		*why = "more than one envelope in a server-streaming request";
		return -1;
	}
	*msg = (const char *)buf + E2B_CONNECT_HDR;
	*msg_len = n;
	return 0;
}

json_t *e2b_connect_json(const char *msg, size_t len, const char **code, const char **why)
{
	json_error_t jerr;
	json_t *j;

	*code = "invalid_argument";
	if (len > E2B_CONNECT_MAX_MSG) {
		*code = "resource_exhausted";
		*why = "message larger than the limit";
		return NULL;
	}
	if (len == 0)
		return json_object();
	if (memchr(msg, '\0', len)) {
		*why = "NUL byte in the message";
		return NULL;
	}
	/* jansson checks UTF-8, refuses \u0000 in strings without JSON_ALLOW_NUL, bounds
	 * nesting (JSON_PARSER_MAX_DEPTH) and, without JSON_DISABLE_EOF_CHECK, trailing bytes. */
	j = json_loadb(msg, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		*why = "message is not valid JSON";
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		*why = "message is not a JSON object";
		return NULL;
	}
	return j;
}

void e2b_connect_header(uint8_t flags, uint32_t len, uint8_t hdr[E2B_CONNECT_HDR])
{
	hdr[0] = flags;
	hdr[1] = (uint8_t)(len >> 24);
	hdr[2] = (uint8_t)(len >> 16);
	hdr[3] = (uint8_t)(len >> 8);
	hdr[4] = (uint8_t)len;
}

unsigned e2b_connect_status(const char *code)
{
	static const struct {
		const char *code;
		unsigned status;
	} map[] = {
	    {"canceled", 499},
	    {"unknown", 500},
	    {"invalid_argument", 400},
	    {"deadline_exceeded", 504},
	    {"not_found", 404},
	    {"already_exists", 409},
	    {"permission_denied", 403},
	    {"resource_exhausted", 429},
	    {"failed_precondition", 400},
	    {"aborted", 409},
	    {"out_of_range", 400},
	    {"unimplemented", 501},
	    {"internal", 500},
	    {"unavailable", 503},
	    {"data_loss", 500},
	    {"unauthenticated", 401},
	};

	for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].code, code) == 0)
			return map[i].status;
	return 500;
}
