/* SPDX-License-Identifier: MIT */
#include "common/utf8.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static void expect(const char *in, size_t len, const char *want, const char *what)
{
	size_t n;
	char *out = al_utf8_sanitize(in, len, &n);

	CHECK(n == strlen(want) && memcmp(out, want, n) == 0, "%s", what);
	free(out);
}

int main(void)
{
	expect("hello", 5, "hello", "ascii unchanged");
	expect("h\xc3\xa9", 3, "h\xc3\xa9", "2-byte sequence kept");
	expect("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80", "4-byte sequence kept");
	expect("a\xff"
	       "b",
	       3,
	       "a\xef\xbf\xbd"
	       "b",
	       "invalid byte replaced");
	expect("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd", "overlong refused");
	expect("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", "surrogate refused");
	expect("\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd", "truncated sequence replaced");
	expect("a\0b", 3,
	       "a\xef\xbf\xbd"
	       "b",
	       "NUL replaced");
	expect("\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	       "above U+10FFFF refused");
	return tap_done();
}
