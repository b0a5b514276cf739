/* SPDX-License-Identifier: MIT */
/* The Connect envelope and JSON codec of the E2B front end (src/api/e2b/connect.c). */
#include "api/e2b/connect.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* An envelope of flags and the text msg (its length as given, or claimed). */
static size_t env(uint8_t *out, uint8_t flags, const char *msg, uint32_t claimed)
{
	size_t n = strlen(msg);

	e2b_connect_header(flags, claimed, out);
	memcpy(out + E2B_CONNECT_HDR, msg, n);
	return E2B_CONNECT_HDR + n;
}

static void expect_refused(const uint8_t *buf, size_t len, const char *want_code,
			   const char *want_why, const char *what)
{
	const char *msg = NULL, *code = NULL, *why = NULL;
	size_t n = 0;
	int rc = e2b_connect_unwrap(buf, len, &msg, &n, &code, &why);

	CHECK(rc == -1 && code && strcmp(code, want_code) == 0 && why && strstr(why, want_why),
	      "%s: refused with %s (%s)", what, code ? code : "-", why ? why : "-");
}

static void test_unwrap(void)
{
	uint8_t buf[64];
	const char *msg = NULL, *code = NULL, *why = NULL;
	size_t n = env(buf, 0, "{\"a\":1}", 7), got = 0;

	CHECK(e2b_connect_unwrap(buf, n, &msg, &got, &code, &why) == 0 && got == 7 &&
		  memcmp(msg, "{\"a\":1}", 7) == 0,
	      "one envelope fills the body: its message");
	CHECK(buf[0] == 0 && buf[1] == 0 && buf[4] == 7, "header: flag, big-endian length");
	expect_refused(buf, 0, "invalid_argument", "required", "empty body");
	expect_refused(buf, 4, "invalid_argument", "truncated envelope header", "4 bytes");
	expect_refused(buf, n - 1, "invalid_argument", "truncated envelope", "one byte short");
	n = env(buf, 0, "{}", 3);
	expect_refused(buf, n, "invalid_argument", "truncated envelope", "claims more");
	n = env(buf, 0, "{}", 1);
	expect_refused(buf, n, "invalid_argument", "more than one envelope", "trailing bytes");
	n = env(buf, 0, "{}", 0xffffffffu);
	expect_refused(buf, n, "resource_exhausted", "larger", "4 GiB claimed");
	n = env(buf, 0, "{}", E2B_CONNECT_MAX_MSG + 1);
	expect_refused(buf, n, "resource_exhausted", "larger", "one over the limit");
	n = env(buf, E2B_CONNECT_FLAG_COMPRESSED, "{}", 2);
	expect_refused(buf, n, "invalid_argument", "compressed", "compressed flag");
	n = env(buf, E2B_CONNECT_FLAG_END, "{}", 2);
	expect_refused(buf, n, "invalid_argument", "end-of-stream", "end flag in a request");
	n = env(buf, 0x40, "{}", 2);
	expect_refused(buf, n, "invalid_argument", "unknown envelope flags", "reserved flag");
	n = env(buf, 0, "", 0);
	CHECK(e2b_connect_unwrap(buf, n, &msg, &got, &code, &why) == 0 && got == 0,
	      "an empty message is an envelope of 0 bytes");
}

static void expect_json(const char *text, size_t len, int ok, const char *what)
{
	const char *code = NULL, *why = NULL;
	json_t *j = e2b_connect_json(text, len, &code, &why);

	CHECK(ok ? j != NULL : (j == NULL && code && why), "%s: %s", what,
	      j	    ? "accepted"
	      : why ? why
		    : "-");
	json_decref(j);
}

static void test_json(void)
{
	const char *code = NULL, *why = NULL;
	json_t *j = e2b_connect_json("", 0, &code, &why);

	CHECK(json_is_object(j) && json_object_size(j) == 0, "empty message is {}");
	json_decref(j);
	expect_json("{\"path\":\"/tmp\"}", 15, 1, "an object");
	expect_json("[]", 2, 0, "an array");
	expect_json("\"s\"", 3, 0, "a string");
	expect_json("{\"a\":1,\"a\":2}", 13, 0, "duplicate keys");
	expect_json("{\"a\":1} x", 9, 0, "trailing bytes");
	expect_json("{\"a\":1}\0", 8, 0, "a NUL after the object");
	expect_json("{\"a\":\"\\u0000\"}", 14, 0, "an escaped NUL");
	expect_json("{\"a\":\"\xff\"}", 8, 0, "invalid UTF-8");
	expect_json("{\"a\":", 5, 0, "truncated");
	j = e2b_connect_json("{}", E2B_CONNECT_MAX_MSG + 1, &code, &why);
	CHECK(!j && strcmp(code, "resource_exhausted") == 0, "over the size limit: %s", code);
	{
		size_t depth = 100000, n = 2 * depth + 2;
		char *deep = malloc(n);

		deep[0] = '{';
		memset(deep + 1, '[', depth);
		memset(deep + 1 + depth, ']', depth);
		deep[n - 1] = '}';
		expect_json(deep, n, 0, "nesting 100000 deep");
		free(deep);
	}
}

static void test_status(void)
{
	CHECK(e2b_connect_status("invalid_argument") == 400, "invalid_argument 400");
	CHECK(e2b_connect_status("unauthenticated") == 401, "unauthenticated 401");
	CHECK(e2b_connect_status("not_found") == 404, "not_found 404");
	CHECK(e2b_connect_status("resource_exhausted") == 429, "resource_exhausted 429");
	CHECK(e2b_connect_status("unimplemented") == 501, "unimplemented 501");
	CHECK(e2b_connect_status("no_such_code") == 500, "unknown codes 500");
	CHECK(e2b_connect_status(NULL) == 500, "NULL 500");
}

int main(void)
{
	test_unwrap();
	test_json();
	test_status();
	return tap_done();
}
