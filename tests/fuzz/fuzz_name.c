/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the name canonicalizer and matcher (src/net/name.c)
 * and the IP-literal parser (src/net/addr.c).
 *
 * The input is split at the first 0xff byte (if any) into a name and a
 * pattern. Invariants, any violation aborts:
 *   - canon(x) is idempotent, NUL-terminated, <= 253 bytes, only [a-z0-9._-],
 *     and "" on failure;
 *   - canon(upper(x)) and canon(x + ".") give the same result as canon(x)
 *     (when x has no trailing dot);
 *   - nothing that net_addr_parse() accepts is a valid name;
 *   - a canonical name matches itself; "*." + name never matches name; if
 *     "*." + p matches n, then n ends with "." + p and has more labels than p;
 *     matching is the same for every case/dot variant that canonicalizes
 *     equally.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *	src/net/name.c src/net/addr.c src/net/policy.c src/common/error.c src/common/xalloc.c \
 *	tests/fuzz/fuzz_name.c -ljansson -lidn2 -lpsl -o fuzz_name
 *   ./fuzz_name tests/fuzz/corpus/name
 */
#include "common/error.h"
#include "net/addr.h"
#include "net/name.h"
#include "net/policy.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

static void check_canonical(const char *c)
{
	size_t n = strlen(c);

	must(n > 0 && n <= NET_NAME_MAX && c[n - 1] != '.' && c[0] != '.');
	for (size_t i = 0; i < n; i++)
		must((c[i] >= 'a' && c[i] <= 'z') || (c[i] >= '0' && c[i] <= '9') || c[i] == '-' ||
		     c[i] == '_' || c[i] == '.');
	must(strstr(c, "..") == NULL);
}

/* Canonicalize, check the invariants of one name; returns 0 if canonical. */
static int canon_checked(const char *in, size_t len, char out[NET_NAME_MAX + 1])
{
	struct al_error *err = NULL;
	char again[NET_NAME_MAX + 1], var[NET_NAME_MAX + 2];
	struct net_addr a;
	int r = net_name_canon(in, len, out, &err);

	if (r < 0) {
		must(err && err->msg && out[0] == '\0');
		al_error_free(err);
		return r;
	}
	must(!err);
	check_canonical(out);
	must(net_name_canon(out, strlen(out), again, NULL) == 0 && !strcmp(out, again));
	must(net_addr_parse(in, len, &a, NULL) < 0);
	/* upper-case variant with a trailing dot */
	if (len <= NET_NAME_MAX && in[len - 1] != '.') {
		for (size_t i = 0; i < len; i++)
			var[i] = (in[i] >= 'a' && in[i] <= 'z') ? (char)(in[i] - 32) : in[i];
		var[len] = '.';
		must(net_name_canon(var, len + 1, again, NULL) == 0 && !strcmp(out, again));
	}
	return 0;
}

static void check_match(const char *n, const char *p)
{
	char wp[NET_NAME_MAX + 3];
	size_t nl = strlen(n), pl = strlen(p);
	bool m;

	must(net_name_match(n, n));
	snprintf(wp, sizeof(wp), "*.%s", n);
	must(!net_name_match(n, wp));
	must(net_name_match(n, p) == !strcmp(n, p));
	snprintf(wp, sizeof(wp), "*.%s", p);
	m = net_name_match(n, wp);
	must(m == net_name_under(n, p));
	must(m == (nl > pl + 1 && !strcmp(n + nl - pl, p) && n[nl - pl - 1] == '.'));
	if (m)
		must(net_name_labels(n) > net_name_labels(p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *sep = memchr(data, 0xff, size);
	size_t nlen = sep ? (size_t)(sep - data) : size;
	char n[NET_NAME_MAX + 1], p[NET_NAME_MAX + 1];
	const char *reason = NULL;
	struct net_addr a;
	int rn, rp;

	rn = canon_checked((const char *)data, nlen, n);
	if (net_addr_parse((const char *)data, nlen, &a, NULL) == 0) {
		char buf[NET_ADDR_STRLEN];
		struct net_addr b;

		net_addr_format(&a, buf);
		must(net_addr_parse(buf, strlen(buf), &b, NULL) == 0 && !memcmp(&a, &b, sizeof(a)));
		(void)net_addr_vet(&a, NULL, NULL, &reason);
		must(reason != NULL);
	}
	if (!sep)
		return 0;
	rp = canon_checked((const char *)sep + 1, size - nlen - 1, p);
	if (rn == 0 && rp == 0)
		check_match(n, p);
	return 0;
}
