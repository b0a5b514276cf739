/* SPDX-License-Identifier: MIT */
/*
 * The one name canonicalizer of the egress boundary (docs/network.md, docs/design/parsers.md).
 *
 * Every name the sandbox can state -- DNS QNAME, CONNECT authority host,
 * absolute-URI host, Host header, TLS SNI -- goes through net_name_canon()
 * before any decision, and every decision is taken on its output only. The
 * function is pure: no locale, no I/O, no resolver.
 *
 * A canonical name is:
 *   - ASCII only: any byte >= 0x80, NUL or control byte is refused (Unicode
 *     names reach the wire as A-labels, "xn--..."; policy.c converts Unicode
 *     policy entries at configuration time);
 *   - lowercase (ASCII 'A'..'Z' only; never the locale's tolower);
 *   - without its trailing dot: exactly one trailing dot is stripped,
 *     "a.test." is "a.test", "a.test.." is refused;
 *   - made of labels of 1..63 bytes from [a-z0-9_-] that neither start nor end
 *     with '-', no empty label, at most 253 bytes in total;
 *   - never numeric: a name whose last label is all digits or "0x" + hex, or
 *     that inet_aton() would accept, is refused. IP literals are parsed by
 *     net_addr_parse() (addr.h) and judged by CIDR rules, never as names.
 */
#ifndef AL_NET_NAME_H
#define AL_NET_NAME_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stddef.h>

/* Longest canonical name (RFC 1035 presentation form without the root dot). */
#define NET_NAME_MAX 253
/* Longest label. */
#define NET_LABEL_MAX 63

/*
 * Canonicalize the len bytes at in (not NUL-terminated; may contain NUL,
 * which is refused) into out, NUL-terminated. Returns 0, or -EINVAL with err
 * naming the problem (the offending byte and its offset, the label, ...).
 * out is always NUL-terminated, and is "" on failure. Idempotent:
 * canon(canon(x)) == canon(x).
 */
int net_name_canon(const char *in, size_t len, char out[NET_NAME_MAX + 1], struct al_error **err);

/*
 * Does the canonical name match the canonical pattern? A pattern is either
 * an exact name (matches only itself) or "*." + name, which matches any name
 * with one or more extra leading labels (any depth) and never the apex:
 * "*.npmjs.org" matches "a.npmjs.org" and "a.b.npmjs.org", not "npmjs.org"
 * and not "evilnpmjs.org". Comparison is label by label. A bare "*" or a
 * pattern with '*' anywhere else matches nothing.
 */
bool net_name_match(const char *canon_name, const char *canon_pattern);

/* Is canon_name a proper subdomain (any depth) of canon_base, label by label? The
 * matching rule of "*." + canon_base. */
bool net_name_under(const char *canon_name, const char *canon_base);

/* Number of labels of a canonical name ("a.b.c" -> 3, "" -> 0). */
size_t net_name_labels(const char *canon_name);

#endif
