/* SPDX-License-Identifier: MIT */
/* IP literals, CIDRs and address vetting: see addr.h. */
#include "net/addr.h"
#include "net/policy.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* Longest text we hand to inet_pton (INET6_ADDRSTRLEN includes the NUL). */
#define ADDR_TEXT_MAX (INET6_ADDRSTRLEN - 1)

static int addr_pton(int family, const char *s, size_t len, struct net_addr *out)
{
	char buf[INET6_ADDRSTRLEN];

	if (len == 0 || len > ADDR_TEXT_MAX || memchr(s, '\0', len))
		return 0;
	memcpy(buf, s, len);
	buf[len] = '\0';
	memset(out, 0, sizeof(*out));
	out->family = family;
	return inet_pton(family, buf, out->bytes) == 1;
}

/* Print at most 64 bytes of an untrusted string safely into messages. */
#define SHOWN(len) ((int)((len) > 64 ? 64 : (len)))

static bool addr_printable(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

static int addr_bad(struct al_error **err, const char *what, const char *s, size_t len)
{
	if (!addr_printable(s, len))
		return al_error_msg(err, EINVAL, "%s contains a control or non-ASCII byte", what);
	return al_error_msg(err, EINVAL, "%s '%.*s'%s", what, SHOWN(len), s, len > 64 ? "..." : "");
}

int net_addr_parse(const char *s, size_t len, struct net_addr *out, struct al_error **err)
{
	if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
		if (addr_pton(AF_INET6, s + 1, len - 2, out))
			return 0;
		return addr_bad(err, "not an IPv6 address in brackets:", s, len);
	}
	if (addr_pton(AF_INET, s, len, out) || addr_pton(AF_INET6, s, len, out))
		return 0;
	memset(out, 0, sizeof(*out));
	return addr_bad(err, "not an IP address (only dotted-quad IPv4 and IPv6 are accepted):", s,
			len);
}

bool net_addr_looks_literal(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
		      c == '.' || c == ':' || c == 'x' || c == 'X' || c == '[' || c == ']'))
			return false;
	}
	return true;
}

void net_addr_format(const struct net_addr *a, char buf[NET_ADDR_STRLEN])
{
	if (!inet_ntop(a->family == AF_INET ? AF_INET : AF_INET6, a->bytes, buf, NET_ADDR_STRLEN))
		strcpy(buf, "?");
}

static unsigned addr_bits(const struct net_addr *a)
{
	return a->family == AF_INET ? 32 : 128;
}

static bool addr_host_bits_zero(const struct net_addr *a, unsigned prefix)
{
	unsigned nbytes = addr_bits(a) / 8;

	for (unsigned i = prefix / 8; i < nbytes; i++) {
		uint8_t mask = i == prefix / 8 ? (uint8_t)(0xff >> (prefix % 8)) : 0xff;

		if (a->bytes[i] & mask)
			return false;
	}
	return true;
}

static void addr_clear_host_bits(struct net_addr *a, unsigned prefix)
{
	unsigned nbytes = addr_bits(a) / 8;

	for (unsigned i = prefix / 8; i < nbytes; i++)
		a->bytes[i] &= i == prefix / 8 ? (uint8_t)(0xff00 >> (prefix % 8)) : 0;
}

static int cidr_prefix(const char *s, size_t len, unsigned max, unsigned *out)
{
	unsigned v = 0;

	if (len == 0 || len > 3 || (len > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

int net_cidr_parse(const char *s, size_t len, struct net_cidr *out, struct al_error **err)
{
	const char *slash = memchr(s, '/', len);
	size_t alen = slash ? (size_t)(slash - s) : len;
	char shown[NET_ADDR_STRLEN];
	struct net_cidr c;

	memset(out, 0, sizeof(*out));
	memset(&c, 0, sizeof(c));
	if (!addr_pton(AF_INET, s, alen, &c.addr) && !addr_pton(AF_INET6, s, alen, &c.addr))
		return addr_bad(err, "not a CIDR range (ADDRESS/PREFIX):", s, len);
	c.prefix = addr_bits(&c.addr);
	if (slash && cidr_prefix(slash + 1, len - alen - 1, addr_bits(&c.addr), &c.prefix) < 0) {
		if (!addr_printable(s, len))
			return addr_bad(err, "CIDR", s, len);
		return al_error_msg(err, EINVAL, "CIDR '%.*s' has a bad prefix length (0..%u)",
				    SHOWN(len), s, addr_bits(&c.addr));
	}
	if (!addr_host_bits_zero(&c.addr, c.prefix)) {
		addr_clear_host_bits(&c.addr, c.prefix);
		net_cidr_format(&c, shown);
		return al_error_msg(err, EINVAL,
				    "CIDR '%.*s' has host bits set (did you mean '%s'?)",
				    SHOWN(len), s, shown);
	}
	*out = c;
	return 0;
}

void net_cidr_format(const struct net_cidr *c, char buf[NET_ADDR_STRLEN])
{
	size_t n;

	net_addr_format(&c->addr, buf);
	n = strlen(buf);
	snprintf(buf + n, NET_ADDR_STRLEN - n, "/%u", c->prefix);
}

bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a)
{
	unsigned full = c->prefix / 8, rest = c->prefix % 8;

	if (c->addr.family != a->family || c->prefix > addr_bits(a))
		return false;
	if (memcmp(c->addr.bytes, a->bytes, full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((c->addr.bytes[full] ^ a->bytes[full]) & (uint8_t)(0xff00 >> rest)) == 0;
}

bool net_cidr_equal(const struct net_cidr *a, const struct net_cidr *b)
{
	return a->addr.family == b->addr.family && a->prefix == b->prefix &&
	       memcmp(a->addr.bytes, b->addr.bytes, sizeof(a->addr.bytes)) == 0;
}

static bool addr_prefix_is(const struct net_addr *a, const uint8_t *prefix, size_t n)
{
	return a->family == AF_INET6 && memcmp(a->bytes, prefix, n) == 0;
}

bool net_addr_embedded_v4(const struct net_addr *a, struct net_addr *v4)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t siit[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
	static const uint8_t compat[12] = {0};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
	static const uint8_t sixtofour[2] = {0x20, 0x02};
	const uint8_t *src = NULL;

	if (a->family != AF_INET6)
		return false;
	if (addr_prefix_is(a, mapped, 12) || addr_prefix_is(a, siit, 12) ||
	    addr_prefix_is(a, compat, 12) || addr_prefix_is(a, nat64, 12))
		src = a->bytes + 12;
	else if (addr_prefix_is(a, sixtofour, 2))
		src = a->bytes + 2;
	if (!src)
		return false;
	memset(v4, 0, sizeof(*v4));
	v4->family = AF_INET;
	memcpy(v4->bytes, src, 4);
	return true;
}

/* A built-in forbidden range: IPv4 as four bytes, IPv6 as eight 16-bit groups. */
struct addr_range {
	int family;
	uint16_t g[8];
	unsigned prefix;
	const char *reason;
};

#define V4(a, b, c, d, p, r)                                                                       \
	{                                                                                          \
		AF_INET, {a, b, c, d}, p, r                                                        \
	}
#define V6(a, b, c, d, e, f, g, h, p, r)                                                           \
	{                                                                                          \
		AF_INET6, {a, b, c, d, e, f, g, h}, p, r                                           \
	}

/* Most specific first: the first match names the reason. */
static const struct addr_range addr_forbidden_v4[] = {
    V4(169, 254, 169, 254, 32, "metadata"), /* AWS, GCP, Azure IMDS, ... */
    V4(168, 63, 129, 16, 32, "metadata"),   /* Azure WireServer */
    V4(100, 100, 100, 200, 32, "metadata"), /* Alibaba */
    V4(192, 0, 0, 192, 32, "metadata"),	    /* Oracle Classic */
    V4(255, 255, 255, 255, 32, "broadcast"), V4(0, 0, 0, 0, 8, "this_network"),
    V4(10, 0, 0, 0, 8, "private"),	     V4(100, 64, 0, 0, 10, "cgnat"),
    V4(127, 0, 0, 0, 8, "loopback"),	     V4(169, 254, 0, 0, 16, "link_local"),
    V4(172, 16, 0, 0, 12, "private"),	     V4(192, 0, 0, 0, 24, "ietf"),
    V4(192, 88, 99, 0, 24, "reserved"), /* deprecated 6to4 relay anycast */
    V4(192, 168, 0, 0, 16, "private"),	     V4(198, 18, 0, 0, 15, "benchmark"),
    V4(224, 0, 0, 0, 4, "multicast"),	     V4(240, 0, 0, 0, 4, "reserved"),
};

/* Checked only for addresses that embed no IPv4 address (except :: and ::1). */
static const struct addr_range addr_forbidden_v6[] = {
    V6(0, 0, 0, 0, 0, 0, 0, 0, 128, "unspecified"),
    V6(0, 0, 0, 0, 0, 0, 0, 1, 128, "loopback"),
    V6(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0, 32, "metadata"), /* AWS */
    V6(0xfd20, 0x00ce, 0, 0, 0, 0, 0, 0x0254, 128, "metadata"),
    V6(0xfd00, 0x00c1, 0, 0, 0, 0, 0xa9fe, 0xa9fe, 128, "metadata"),
    V6(0xfd00, 0x0042, 0, 0, 0, 0, 0, 0x0042, 128, "metadata"),
    V6(0xfd00, 0xa9fe, 0xa9fe, 0, 0, 0, 0, 1, 128, "metadata"),
    V6(0xfd00, 0x0100, 0, 0, 0, 0, 0x0100, 0x0200, 128, "metadata"),
    V6(0xfc00, 0, 0, 0, 0, 0, 0, 0, 7, "ula"),
    V6(0xfe80, 0, 0, 0, 0, 0, 0, 0, 10, "link_local"),
    V6(0xfec0, 0, 0, 0, 0, 0, 0, 0, 10, "site_local"),
    V6(0xff00, 0, 0, 0, 0, 0, 0, 0, 8, "multicast"),
    V6(0x0100, 0, 0, 0, 0, 0, 0, 0, 64, "discard"),
    V6(0x0064, 0xff9b, 0x0001, 0, 0, 0, 0, 0, 48, "nat64_local"),
    V6(0x2001, 0, 0, 0, 0, 0, 0, 0, 32, "teredo"),
    V6(0x2001, 0x0002, 0, 0, 0, 0, 0, 0, 48, "benchmark"),
    V6(0x2001, 0x0010, 0, 0, 0, 0, 0, 0, 28, "reserved"), /* ORCHID */
    V6(0x2001, 0x0020, 0, 0, 0, 0, 0, 0, 28, "reserved"), /* ORCHIDv2 */
};

static void addr_range_cidr(const struct addr_range *r, struct net_cidr *c)
{
	memset(c, 0, sizeof(*c));
	c->addr.family = r->family;
	c->prefix = r->prefix;
	if (r->family == AF_INET) {
		for (int i = 0; i < 4; i++)
			c->addr.bytes[i] = (uint8_t)r->g[i];
		return;
	}
	for (int i = 0; i < 8; i++) {
		c->addr.bytes[2 * i] = (uint8_t)(r->g[i] >> 8);
		c->addr.bytes[2 * i + 1] = (uint8_t)r->g[i];
	}
}

static const char *addr_range_find(const struct addr_range *t, size_t n, const struct net_addr *a)
{
	struct net_cidr c;

	for (size_t i = 0; i < n; i++) {
		addr_range_cidr(&t[i], &c);
		if (net_cidr_contains(&c, a))
			return t[i].reason;
	}
	return NULL;
}

/* The built-in reason a is forbidden (NULL: public). Embedded IPv4 is decoded. */
static const char *addr_builtin(const struct net_addr *a)
{
	struct net_addr v4;
	const char *r;

	if (a->family == AF_INET)
		return addr_range_find(addr_forbidden_v4, ARRAY_SIZE(addr_forbidden_v4), a);
	r = addr_range_find(addr_forbidden_v6, 2, a); /* :: and ::1 */
	if (r)
		return r;
	if (net_addr_embedded_v4(a, &v4))
		return addr_range_find(addr_forbidden_v4, ARRAY_SIZE(addr_forbidden_v4), &v4);
	r = addr_range_find(addr_forbidden_v6 + 2, ARRAY_SIZE(addr_forbidden_v6) - 2, a);
	if (r)
		return r;
	if ((a->bytes[0] & 0xe0) != 0x20) /* outside 2000::/3, the global unicast space */
		return "unallocated";
	return NULL;
}

static bool addr_in_list(const struct net_cidr *list, size_t n, const struct net_addr *a)
{
	for (size_t i = 0; i < n; i++)
		if (net_cidr_contains(&list[i], a))
			return true;
	return false;
}

/* In the list, directly or through the embedded IPv4 address? */
static bool addr_in_list_any(const struct net_cidr *list, size_t n, const struct net_addr *a)
{
	struct net_addr v4;

	if (addr_in_list(list, n, a))
		return true;
	return net_addr_embedded_v4(a, &v4) && addr_in_list(list, n, &v4);
}

/* The subnets.allow check: the embedded IPv4 address only, when there is one. */
static bool addr_subnet_allowed(const struct net_policy *p, const struct net_addr *a)
{
	struct net_addr v4;

	if (net_addr_embedded_v4(a, &v4))
		return addr_in_list(p->allow_cidrs, p->n_allow_cidrs, &v4);
	return addr_in_list(p->allow_cidrs, p->n_allow_cidrs, a);
}

/* Loopback, "this network" and the unspecified address all mean the dialling host itself,
 * which is the gateway: like the gateway, no subnets.allow entry opens them. */
static bool addr_reason_is_self(const char *r)
{
	return !strcmp(r, "loopback") || !strcmp(r, "this_network") || !strcmp(r, "unspecified");
}

static enum net_verdict addr_verdict(enum net_verdict v, const char *why, const char **reason)
{
	if (reason)
		*reason = why;
	return v;
}

enum net_verdict net_addr_vet(const struct net_addr *a, const struct net_policy *p,
			      const struct net_vet_ctx *ctx, const char **reason)
{
	const char *r;

	if (a->family != AF_INET && a->family != AF_INET6)
		return addr_verdict(NET_DENY, "unspecified", reason);
	if (p && p->mode == NET_POLICY_DENY_ALL)
		return addr_verdict(NET_DENY, "deny_all", reason);
	if (ctx && addr_in_list_any(ctx->forbidden, ctx->n_forbidden, a))
		return addr_verdict(NET_DENY, "gateway", reason);
	if (p && addr_in_list_any(p->deny_cidrs, p->n_deny_cidrs, a))
		return addr_verdict(NET_DENY, "subnet_deny", reason);
	r = addr_builtin(a);
	if (r && addr_reason_is_self(r))
		return addr_verdict(NET_DENY, r, reason);
	if (p && addr_subnet_allowed(p, a))
		return addr_verdict(NET_ALLOW, "subnet_allow", reason);
	if (r)
		return addr_verdict(NET_DENY, r, reason);
	return addr_verdict(NET_ALLOW, "public", reason);
}

enum net_verdict net_addr_decide_literal(const struct net_addr *a, const struct net_policy *p,
					 const struct net_vet_ctx *ctx, const char **reason)
{
	const char *r = NULL;
	enum net_verdict v = net_addr_vet(a, p, ctx, &r);

	if (v == NET_ALLOW && p && p->mode == NET_POLICY_LIST && strcmp(r, "subnet_allow") != 0)
		return addr_verdict(NET_DENY, "ip_literal", reason);
	if (v == NET_ALLOW && !p)
		return addr_verdict(NET_DENY, "ip_literal", reason);
	return addr_verdict(v, r, reason);
}
