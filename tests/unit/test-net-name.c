/* SPDX-License-Identifier: MIT */
/* Unit tests for the name canonicalizer and matcher (src/net/name.c). */
#include "common/error.h"
#include "net/name.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void canon_ok(const char *in, size_t len, const char *want)
{
	struct al_error *err = NULL;
	char out[NET_NAME_MAX + 1];
	int r = net_name_canon(in, len, out, &err);

	CHECK(r == 0 && strcmp(out, want) == 0, "canon '%.*s' -> '%s' (%s)",
	      (int)(len > 60 ? 60 : len), in, want, err ? err->msg : "ok");
	al_error_free(err);
}

static void canon_bad(const char *label, const char *in, size_t len, const char *msg_part)
{
	struct al_error *err = NULL;
	char out[NET_NAME_MAX + 1];
	int r;

	memset(out, 'Z', sizeof(out));
	r = net_name_canon(in, len, out, &err);
	CHECK(r == -EINVAL && err && strstr(err->msg, msg_part) && out[0] == '\0',
	      "canon refuses %s (message '%s' names '%s')", label, err ? err->msg : "(none)",
	      msg_part);
	al_error_free(err);
}

#define OK(s, want) canon_ok(s, strlen(s), want)
#define BAD(s, part) canon_bad("'" s "'", s, strlen(s), part)

static void good_names(void)
{
	char in[300], want[300];

	OK("allowed.test", "allowed.test");
	OK("Allowed.TEST.", "allowed.test"); /* NAME-4, E3 */
	OK("X.NPMJS.TEST", "x.npmjs.test");  /* NAME-5 */
	OK("x.npmjs.test.", "x.npmjs.test"); /* NAME-4 */
	OK("_dmarc.Example.COM", "_dmarc.example.com");
	OK("a-b.c_d.test", "a-b.c_d.test");
	OK("xn--bcher-kva.de", "xn--bcher-kva.de");
	OK("localhost", "localhost");
	OK("1.2.3.4.nip.io", "1.2.3.4.nip.io");	    /* a name; its address is vetted later */
	OK("0x7f.example.com", "0x7f.example.com"); /* only the last label is numeric-checked */
	OK("foo.0xbeeg", "foo.0xbeeg");
	OK("123abc", "123abc");
	OK("IIII.test", "iiii.test"); /* ASCII fold only: no Turkish dotless i */

	/* Lengths: 63-byte label and 253-byte name are fine, with or without the dot. */
	memset(in, 'a', 63);
	strcpy(in + 63, ".test");
	canon_ok(in, strlen(in), in);
	memset(in, 0, sizeof(in));
	for (int i = 0; i < 3; i++) {
		memset(in + i * 64, 'b', 63);
		in[i * 64 + 63] = '.';
	}
	memset(in + 192, 'c', 61); /* 192 + 61 = 253 */
	canon_ok(in, 253, in);
	strcpy(want, in);
	in[253] = '.';
	canon_ok(in, 254, want);
}

static void bad_names(void)
{
	char in[300];

	BAD("", "empty name");
	BAD(".", "no labels");
	BAD("x.npmjs.test..", "empty label"); /* NAME-4: exactly one dot is stripped */
	BAD(".a.test", "empty label");
	BAD("a..b", "empty label");
	BAD("-", "'-'");
	BAD("-a.test", "'-'");
	BAD("a-.test", "'-'");
	BAD("a.-.test", "'-'");
	BAD("a test", "invalid character ' '");
	BAD("a.test ", "invalid character ' '");
	BAD("a.test:443", "invalid character ':'");
	BAD("[::1]", "invalid character '['");
	BAD("a/b.test", "invalid character '/'");
	BAD("*.a.test", "invalid character '*'");
	BAD("a@b.test", "invalid character '@'");
	canon_bad("a TAB", "a\tb.test", 8, "control byte 0x09");
	canon_bad("a DEL", "a\x7f.test", 7, "control byte 0x7f");
	canon_bad("CR LF", "a\r\nHost: x", 11, "control byte 0x0d");
	/* NAME-6: raw UTF-8 and the full-width dot U+FF0E are refused, not mapped */
	BAD("b\xc3\xbc"
	    "cher.de",
	    "non-ASCII byte 0xc3 at offset 1");
	BAD("a\xef\xbc\x8etest", "non-ASCII byte 0xef");
	BAD("a\xe3\x80\x82test", "non-ASCII byte 0xe3"); /* U+3002 */
	canon_bad("0xff", "\xff", 1, "non-ASCII byte 0xff");
	/* NAME-7: embedded NUL (length-counted input) */
	canon_bad("NUL in 'evil.test\\0.npmjs.test'", "evil.test\0.npmjs.test", 22,
		  "NUL byte at offset 9");
	canon_bad("a lone NUL", "\0", 1, "NUL byte");
	/* NAME-8: 64-byte label, 254-byte name */
	memset(in, 'a', 64);
	strcpy(in + 64, ".test");
	canon_bad("a 64-byte label", in, strlen(in), "64 bytes (at most 63)");
	memset(in, 0, sizeof(in));
	for (int i = 0; i < 3; i++) {
		memset(in + i * 64, 'b', 63);
		in[i * 64 + 63] = '.';
	}
	memset(in + 192, 'c', 62);
	canon_bad("a 254-byte name", in, 254, "254 bytes long (at most 253)");
	in[254] = '.';
	canon_bad("a 254-byte name plus dot", in, 255, "254 bytes long");
	memset(in, 'a', sizeof(in));
	canon_bad("300 bytes", in, sizeof(in), "at most 253");
}

/* NAME-9 / E7: every numeric spelling is refused as a name. */
static void numeric_names(void)
{
	static const char *const cases[] = {
	    "2130706433",      "0x7f.1",     "127.1",	     "0177.0.0.1", "127.000.0.1",
	    "127.0.0.1",       "127.0.0.1.", "2852039166",   "0x7f000001", "0X7F.1",
	    "0xA9FEA9FE",      "1.2.3.4",    "a.123",	     "foo.0xbeef", "0x",
	    "169.254.169.254", "0",	     "017700000001", "1.2.3",	   "255.255.255.255",
	    "0x7f.0.0.1",      "4294967296",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		canon_bad(cases[i], cases[i], strlen(cases[i]), "numeric spelling");
}

static void idempotent(void)
{
	static const char *const cases[] = {
	    "A.B.C", "x.npmjs.test.", "WWW.Example.ORG", "_srv._tcp.Host.test", "a-1.b-2.c",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char a[NET_NAME_MAX + 1], b[NET_NAME_MAX + 1];

		CHECK(net_name_canon(cases[i], strlen(cases[i]), a, NULL) == 0 &&
			  net_name_canon(a, strlen(a), b, NULL) == 0 && strcmp(a, b) == 0,
		      "canon is idempotent on '%s'", cases[i]);
	}
}

static void matching(void)
{
	static const struct {
		const char *name, *pattern;
		bool want;
	} cases[] = {
	    {"x.npmjs.test", "*.npmjs.test", true},
	    {"a.b.c.npmjs.test", "*.npmjs.test", true}, /* NAME-3: any depth */
	    {"npmjs.test", "*.npmjs.test", false},	/* NAME-2: never the apex */
	    {"evilnpmjs.test", "*.npmjs.test", false},	/* NAME-1: label boundary */
	    {"x.evilnpmjs.test", "*.npmjs.test", false},
	    {"xnpmjs.test", "*.npmjs.test", false},
	    {"npmjs.test.evil.test", "*.npmjs.test", false},
	    {"npmjs.test.x", "*.npmjs.test", false},
	    {"a.npmjs.tes", "*.npmjs.test", false},
	    {"test", "*.npmjs.test", false},
	    {"allowed.test", "allowed.test", true},
	    {"www.allowed.test", "allowed.test", false}, /* exact is exact */
	    {"allowed.test", "www.allowed.test", false},
	    {"xallowed.test", "allowed.test", false},
	    {"a.b", "*", false},	       /* a bare star matches nothing */
	    {"www.x.com", "www.*.com", false}, /* mid-name star: nothing */
	    {"api1.x", "api*.x", false},       /* partial label: nothing */
	    {"a.b.test", "*.*.test", false},
	    {"a.test", "*.test", true}, /* the matcher itself is plain */
	    {"", "*.test", false},
	    {"a.test", "", false},
	    {"a.test", "*.", false},
	    {"a.b.c", "*.b.c", true},
	    {"b.c", "*.b.c", false},
	    {"ab.c", "*.b.c", false},
	    {"a.ab.c", "*.b.c", false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK(net_name_match(cases[i].name, cases[i].pattern) == cases[i].want,
		      "match('%s', '%s') == %d", cases[i].name, cases[i].pattern, cases[i].want);
	CHECK(net_name_labels("a.b.c") == 3 && net_name_labels("a") == 1 &&
		  net_name_labels("") == 0,
	      "label counts");
}

/* A random name: labels of random length from a mixed-case alphabet. */
static size_t random_name(char *buf, unsigned *seed)
{
	static const char alpha[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
	int labels = 1 + rand_r(seed) % 5;
	size_t n = 0;

	for (int l = 0; l < labels; l++) {
		int len = 1 + rand_r(seed) % 12;

		if (l)
			buf[n++] = '.';
		for (int i = 0; i < len; i++)
			buf[n++] = alpha[rand_r(seed) % (sizeof(alpha) - 1)];
	}
	buf[n] = '\0';
	return n;
}

/* Property: case and one trailing dot never change the canonical form or a match. */
static void property(void)
{
	unsigned seed = 4242;
	int bad = 0, valid = 0;

	for (int iter = 0; iter < 100000; iter++) {
		char name[128], var[130], a[NET_NAME_MAX + 1], b[NET_NAME_MAX + 1],
		    pat[NET_NAME_MAX + 3];
		size_t n = random_name(name, &seed), i;
		int ra, rb;

		memcpy(var, name, n + 1);
		for (i = 0; i < n; i++)
			if (rand_r(&seed) % 2 && var[i] >= 'a' && var[i] <= 'z')
				var[i] = (char)(var[i] - 'a' + 'A');
		if (rand_r(&seed) % 2) {
			var[n] = '.';
			var[n + 1] = '\0';
		}
		ra = net_name_canon(name, n, a, NULL);
		rb = net_name_canon(var, strlen(var), b, NULL);
		if (ra != rb || (ra == 0 && strcmp(a, b) != 0)) {
			bad++;
			continue;
		}
		if (ra < 0)
			continue;
		valid++;
		/* Pattern: "*." + a suffix of the name at a label boundary, or the name. */
		const char *dot = strchr(a, '.');
		snprintf(pat, sizeof(pat), "*.%s", dot ? dot + 1 : a);
		if (net_name_match(a, pat) != net_name_match(b, pat) ||
		    net_name_match(a, pat) != (dot != NULL) || !net_name_match(b, a))
			bad++;
	}
	CHECK(bad == 0 && valid > 50000,
	      "property: 100000 random names, %d canonical, %d violations", valid, bad);
}

int main(void)
{
	good_names();
	bad_names();
	numeric_names();
	idempotent();
	matching();
	property();
	return tap_done();
}
