/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the E2B front end's Connect codec (src/api/e2b/connect.c): the
 * envelope of a server-streaming request and the JSON message in it, both read from a
 * client before anything else looks at them.
 *
 * The input is a request body. Invariants, any violation aborts:
 *   - unwrap accepts or refuses it, never reads past it; a refusal has a code and a reason;
 *   - what it accepts is exactly the body less the 5-byte header, the length the header
 *     says, at most E2B_CONNECT_MAX_MSG;
 *   - the JSON reader (run on the message, and on the whole input as a unary body) gives
 *     an object or a refusal with a reason; an accepted object, written and read again,
 *     is the same object.
 */
#include "api/e2b/connect.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

static void check_json(const char *msg, size_t len)
{
	const char *code = NULL, *why = NULL;
	json_t *j = e2b_connect_json(msg, len, &code, &why), *again;
	char *text;

	if (!j) {
		must(code && why);
		return;
	}
	must(json_is_object(j));
	text = json_dumps(j, JSON_COMPACT);
	must(text != NULL);
	again = e2b_connect_json(text, strlen(text), &code, &why);
	must(again && json_equal(j, again));
	json_decref(again);
	free(text);
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes: ASan sees any read past it. */
	uint8_t *buf = malloc(size ? size : 1);
	const char *msg = NULL, *code = NULL, *why = NULL;
	size_t n = 0;

	memcpy(buf, data, size);
	if (e2b_connect_unwrap(buf, size, &msg, &n, &code, &why) == 0) {
		must(size >= E2B_CONNECT_HDR && msg == (const char *)buf + E2B_CONNECT_HDR);
		must(n == size - E2B_CONNECT_HDR && n <= E2B_CONNECT_MAX_MSG);
		must(((size_t)buf[1] << 24 | (size_t)buf[2] << 16 | (size_t)buf[3] << 8 | buf[4]) ==
		     n);
		must(buf[0] == 0);
		check_json(msg, n);
	} else {
		must(code && why);
	}
	check_json((const char *)buf, size);
	free(buf);
	return 0;
}
