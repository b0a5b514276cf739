/* SPDX-License-Identifier: MIT */
/* Unit tests for IP literals, CIDRs and address vetting (src/net/addr.c). */
#include "common/error.h"
#include "net/addr.h"
#include "net/policy.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

static struct net_addr A(const char *s) {
	struct net_addr a;

	if (net_addr_parse(s, strlen(s), &a, NULL) < 0)
		memset(&a, 0, sizeof(a));
	return a;
}

static void
parse_ok(void)
{
	static const struct {
		const char *in, *fmt;
		int family;
	} cases[] = {
	    {"127.0.0.1", "127.0.0.1", AF_INET},
	    {"203.0.113.20", "203.0.113.20", AF_INET},
	    {"0.0.0.0", "0.0.0.0", AF_INET},
	    {"::1", "::1", AF_INET6},
	    {"[::1]", "::1", AF_INET6},
	    {"[2001:DB8::1]", "2001:db8::1", AF_INET6},
	    {"[::ffff:7f00:1]", "::ffff:127.0.0.1", AF_INET6},
	    {"::127.0.0.1", "::127.0.0.1", AF_INET6},
	    {"64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe", AF_INET6},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct net_addr a;
		char buf[NET_ADDR_STRLEN];
		int r = net_addr_parse(cases[i].in, strlen(cases[i].in), &a, NULL);

		if (r == 0)
			net_addr_format(&a, buf);
		CHECK(r == 0 && a.family == cases[i].family && !strcmp(buf, cases[i].fmt),
		      "addr '%s' parses as %s", cases[i].in, cases[i].fmt);
	}
}

/* B1 / E7: every spelling inet_pton refuses is refused. */
static void parse_bad(void)
{
	static const char *const cases[] = {
	    "2130706433",   "0x7f.1",	 "127.1",      "0177.0.0.1",   "127.000.0.1",
	    "1.2.3.4 ",	    " 1.2.3.4",	 "0x7f.0.0.1", "2852039166",   "1.2.3",
	    "1.2.3.4.",	    "256.1.1.1", "1.2.3.4.5",  "[1.2.3.4]",    "[::1",
	    "::1]",	    "[]",	 "",	       "fe80::1%eth0", "[fe80::1%25eth0]",
	    "::1:",	    "1::2::3",	 "localhost",  "0x7f000001",   "01.2.3.4",
	    "127.0.0.1:80", "[::1]:443", "1.2.3.4/32",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct al_error *err = NULL;
		struct net_addr a;
		int r = net_addr_parse(cases[i], strlen(cases[i]), &a, &err);

		CHECK(r == -EINVAL && err && strstr(err->msg, "not an") &&
			  (cases[i][0] == '\0' || strstr(err->msg, cases[i])),
		      "addr '%s' refused: %s", cases[i], err ? err->msg : "(accepted!)");
		al_error_free(err);
	}
	{
		struct al_error *err = NULL;
		struct net_addr a;

		CHECK(net_addr_parse("1.2.3.4\0", 8, &a, &err) == -EINVAL && err &&
			  strstr(err->msg, "control"),
		      "addr with a NUL refused: %s", err ? err->msg : "(accepted!)");
		al_error_free(err);
	}
	CHECK(net_addr_looks_literal("0x7f.1", 6) && net_addr_looks_literal("[::1]", 5) &&
		  !net_addr_looks_literal("a.test", 6),
	      "looks_literal");
}

static void cidrs(void)
{
	static const struct {
		const char *in, *fmt;
		const char *err;
	} cases[] = {
	    {"10.0.0.0/8", "10.0.0.0/8", NULL},
	    {"198.51.100.128/28", "198.51.100.128/28", NULL},
	    {"0.0.0.0/0", "0.0.0.0/0", NULL},
	    {"1.2.3.4", "1.2.3.4/32", NULL},
	    {"2001:DB8::/32", "2001:db8::/32", NULL},
	    {"::/0", "::/0", NULL},
	    {"fd00:ec2::254/128", "fd00:ec2::254/128", NULL},
	    {"::1", "::1/128", NULL},
	    {"10.1.2.3/8", NULL, "host bits set (did you mean '10.0.0.0/8'?)"},
	    {"2001:db8::1/32", NULL, "did you mean '2001:db8::/32'?"},
	    {"10.0.0.0/33", NULL, "bad prefix length (0..32)"},
	    {"::/129", NULL, "bad prefix length (0..128)"},
	    {"10.0.0.0/08", NULL, "bad prefix length"},
	    {"10.0.0.0/", NULL, "bad prefix length"},
	    {"10.0.0.0/-1", NULL, "bad prefix length"},
	    {"10.0.0.0/8 ", NULL, "bad prefix length"},
	    {"10.0.0.0/1000", NULL, "bad prefix length"},
	    {"10/8", NULL, "not a CIDR range (ADDRESS/PREFIX): '10/8'"},
	    {"10.0.0/24", NULL, "not a CIDR range"},
	    {"banana", NULL, "'banana'"},
	    {"", NULL, "not a CIDR"},
	    {"/8", NULL, "not a CIDR"},
	    {"[::1]/128", NULL, "not a CIDR"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct al_error *err = NULL;
		char buf[NET_ADDR_STRLEN] = "";
		struct net_cidr c;
		int r = net_cidr_parse(cases[i].in, strlen(cases[i].in), &c, &err);

		if (r == 0)
			net_cidr_format(&c, buf);
		if (cases[i].fmt)
			CHECK(r == 0 && !strcmp(buf, cases[i].fmt), "cidr '%s' -> %s", cases[i].in,
			      cases[i].fmt);
		else
			CHECK(r == -EINVAL && err && strstr(err->msg, cases[i].err),
			      "cidr '%s' refused: %s", cases[i].in, err ? err->msg : "(accepted!)");
		al_error_free(err);
	}
	struct net_cidr c;
	struct net_addr a = A("198.51.100.140"), b = A("198.51.100.144"),
			v6 = A("::ffff:198.51.100.140");

	net_cidr_parse("198.51.100.128/28", 17, &c, NULL);
	CHECK(net_cidr_contains(&c, &a) && !net_cidr_contains(&c, &b) &&
		  !net_cidr_contains(&c, &v6),
	      "contains: in, out, and no implicit mapping");
	net_cidr_parse("0.0.0.0/0", 9, &c, NULL);
	CHECK(net_cidr_contains(&c, &a) && !net_cidr_contains(&c, &v6),
	      "/0 covers its family only");
}

static void vet_expect(const char *addr, const struct net_policy *p, const struct net_vet_ctx *ctx,
		       enum net_verdict want, const char *why)
{
	struct net_addr a;
	const char *reason = NULL;
	enum net_verdict v = NET_DENY;
	int r = net_addr_parse(addr, strlen(addr), &a, NULL);

	if (r == 0)
		v = net_addr_vet(&a, p, ctx, &reason);
	CHECK(r == 0 && v == want && reason && !strcmp(reason, why), "vet %s -> %s (%s)", addr,
	      want == NET_ALLOW ? "allow" : "deny", reason ? reason : "?");
}

/* DST-1, DST-4, A4, B3, F1..F5: every forbidden range in v4, v6 and embedded forms. */
static void forbidden(void)
{
	static const struct {
		const char *addr, *why;
	} cases[] = {
	    {"127.0.0.1", "loopback"},
	    {"127.255.255.254", "loopback"},
	    {"0.0.0.0", "this_network"},
	    {"0.1.2.3", "this_network"},
	    {"169.254.169.254", "metadata"},
	    {"169.254.1.1", "link_local"},
	    {"100.100.100.200", "metadata"},
	    {"168.63.129.16", "metadata"},
	    {"192.0.0.192", "metadata"},
	    {"10.1.2.3", "private"},
	    {"172.16.0.1", "private"},
	    {"172.31.255.255", "private"},
	    {"192.168.1.1", "private"},
	    {"100.64.0.1", "cgnat"},
	    {"100.127.255.255", "cgnat"},
	    {"192.0.0.8", "ietf"},
	    {"198.18.0.1", "benchmark"},
	    {"224.0.0.1", "multicast"},
	    {"239.255.255.250", "multicast"},
	    {"240.0.0.1", "reserved"},
	    {"255.255.255.255", "broadcast"},
	    {"::", "unspecified"},
	    {"::1", "loopback"},
	    {"fe80::1", "link_local"},
	    {"febf::1", "link_local"},
	    {"fec0::1", "site_local"},
	    {"fc00::1", "ula"},
	    {"fd66:1::2", "ula"},
	    {"fd00:ec2::254", "metadata"},
	    {"fd00:ec2::1", "metadata"},
	    {"fd20:ce::254", "metadata"},
	    {"fd00:c1::a9fe:a9fe", "metadata"},
	    {"fd00:42::42", "metadata"},
	    {"fd00:a9fe:a9fe::1", "metadata"},
	    {"fd00:100::100:200", "metadata"},
	    {"ff02::1", "multicast"},
	    {"100::1", "discard"},
	    {"2001::1", "teredo"},
	    {"2001:2::1", "benchmark"},
	    {"2001:10::1", "reserved"},
	    {"64:ff9b:1::1", "nat64_local"},
	    {"4000::1", "unallocated"},
	    {"::1:0:0:1", "unallocated"},
	    /* embedded IPv4 */
	    {"::ffff:127.0.0.1", "loopback"},
	    {"[::ffff:7f00:1]", "loopback"},
	    {"[::127.0.0.1]", "loopback"},
	    {"::ffff:169.254.169.254", "metadata"},
	    {"[64:ff9b::a9fe:a9fe]", "metadata"},
	    {"64:ff9b::10.0.0.1", "private"},
	    {"::ffff:0:10.1.2.3", "private"},  /* SIIT */
	    {"2002:a9fe:a9fe::1", "metadata"}, /* 6to4 */
	    {"2002:7f00:1::", "loopback"},
	    {"2002:c0a8:101::1", "private"},
	    {"::ffff:100.64.0.1", "cgnat"},
	    {"::ffff:224.0.0.1", "multicast"},
	    {"::ffff:255.255.255.255", "broadcast"},
	    {"::ffff:0.0.0.0", "this_network"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		vet_expect(cases[i].addr, NULL, NULL, NET_DENY, cases[i].why);
}

static void public(void)
{
	static const char *const cases[] = {
	    "192.0.2.53",	    "198.51.100.10",	  "203.0.113.20",
	    "2001:db8::1",	    "2001:db8:a::10",	  "8.8.8.8",
	    "100.63.255.255",	    "100.128.0.0",	  "172.15.255.255",
	    "172.32.0.0",	    "198.17.255.255",	  "198.20.0.0",
	    "::ffff:198.51.100.10", "64:ff9b::c633:640a", "2002:c633:640a::1",
	    "2606:4700::1111",	    "169.253.255.255",	  "223.255.255.255",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		vet_expect(cases[i], NULL, NULL, NET_ALLOW, "public");
}

static struct net_policy *P(const char *json)
{
	struct net_policy *p = NULL;

	net_policy_parse_string(json, strlen(json), &p, NULL);
	return p;
}

static void with_policy(void)
{
	_cleanup_net_policy_ struct net_policy *p1 =
	    P("{\"allow\":[\"allowed.test\"],\"subnets\":{\"allow\":[\"198.51.100.128/28\","
	      "\"10.0.0.0/8\",\"169.254.169.254/32\",\"127.0.0.0/8\",\"fd00::/8\",\"::/0\"],"
	      "\"deny\":[\"10.9.0.0/16\",\"198.51.100.10/32\",\"2001:db8:d::/48\"]}}");
	_cleanup_net_policy_ struct net_policy *deny = P("\"deny-all\"");
	_cleanup_net_policy_ struct net_policy *all = P("\"allow-all\"");
	struct net_cidr pool[2];
	struct net_vet_ctx ctx = {pool, 2};

	net_cidr_parse("10.66.0.0/16", 12, &pool[0], NULL);
	net_cidr_parse("198.18.0.1", 10, &pool[1], NULL);
	CHECK(p1 && deny && all, "test policies parse");
	if (!p1 || !deny || !all)
		return;
	vet_expect("10.1.2.3", p1, &ctx, NET_ALLOW, "subnet_allow"); /* DST-4 opened */
	vet_expect("::ffff:10.1.2.3", p1, &ctx, NET_ALLOW, "subnet_allow");
	vet_expect("64:ff9b::a01:203", p1, &ctx, NET_ALLOW, "subnet_allow");
	vet_expect("10.9.1.1", p1, &ctx, NET_DENY, "subnet_deny"); /* deny beats allow */
	vet_expect("::ffff:10.9.1.1", p1, &ctx, NET_DENY, "subnet_deny");
	vet_expect("198.51.100.10", p1, &ctx, NET_DENY, "subnet_deny"); /* deny beats names */
	vet_expect("2001:db8:d::20", p1, &ctx, NET_DENY, "subnet_deny");
	vet_expect("198.51.100.130", p1, &ctx, NET_ALLOW, "subnet_allow");
	vet_expect("169.254.169.254", p1, &ctx, NET_ALLOW, "subnet_allow"); /* explicit */
	vet_expect("fd00:ec2::254", p1, &ctx, NET_ALLOW, "subnet_allow");
	vet_expect("10.66.1.1", p1, &ctx, NET_DENY, "gateway"); /* 10/8 cannot open the pool */
	vet_expect("::ffff:10.66.2.2", p1, &ctx, NET_DENY, "gateway");
	vet_expect("198.18.0.1", p1, &ctx, NET_DENY, "gateway");
	vet_expect("127.0.0.1", p1, &ctx, NET_DENY, "loopback"); /* never opened */
	vet_expect("::1", p1, &ctx, NET_DENY, "loopback");
	vet_expect("::ffff:127.0.0.1", p1, &ctx, NET_DENY, "loopback");
	vet_expect("0.0.0.0", p1, &ctx, NET_DENY, "this_network");
	/* ::/0 in subnets.allow opens IPv6 but not the IPv4 space behind mappings */
	vet_expect("::ffff:192.168.1.1", p1, &ctx, NET_DENY, "private");
	vet_expect("fe80::1", p1, &ctx, NET_ALLOW, "subnet_allow");
	vet_expect("192.168.1.1", p1, &ctx, NET_DENY, "private");
	vet_expect("203.0.113.20", p1, &ctx, NET_ALLOW, "public");
	vet_expect("203.0.113.20", deny, &ctx, NET_DENY, "deny_all");
	vet_expect("203.0.113.20", all, &ctx, NET_ALLOW, "public");
	vet_expect("10.66.1.1", all, &ctx, NET_DENY, "gateway");
	vet_expect("169.254.169.254", all, &ctx, NET_DENY, "metadata"); /* F: even allow-all */

	/* IP literals (B1): allowed only through subnets.allow, or under allow-all */
	static const struct {
		const char *addr;
		int pol;
		enum net_verdict want;
		const char *why;
	} lit[] = {
	    {"203.0.113.20", 0, NET_DENY, "ip_literal"},
	    {"198.51.100.130", 0, NET_ALLOW, "subnet_allow"},
	    {"198.51.100.10", 0, NET_DENY, "subnet_deny"},
	    {"169.254.169.254", 2, NET_DENY, "metadata"},
	    {"203.0.113.20", 2, NET_ALLOW, "public"},
	    {"203.0.113.20", 1, NET_DENY, "deny_all"},
	    {"::ffff:7f00:1", 2, NET_DENY, "loopback"},
	};
	const struct net_policy *pols[] = {p1, deny, all};

	for (size_t i = 0; i < sizeof(lit) / sizeof(lit[0]); i++) {
		struct net_addr a = A(lit[i].addr);
		const char *why = NULL;
		enum net_verdict v = net_addr_decide_literal(&a, pols[lit[i].pol], &ctx, &why);

		CHECK(v == lit[i].want && why && !strcmp(why, lit[i].why), "literal %s -> %s",
		      lit[i].addr, why ? why : "?");
	}
	struct net_addr a = A("203.0.113.20");
	const char *why = NULL;

	CHECK(net_addr_decide_literal(&a, NULL, NULL, &why) == NET_DENY &&
		  !strcmp(why, "ip_literal"),
	      "literal without a policy is refused");
	memset(&a, 0, sizeof(a));
	CHECK(net_addr_vet(&a, all, NULL, &why) == NET_DENY, "an unset address is refused");
}

int main(void)
{
	parse_ok();
	parse_bad();
	cidrs();
	forbidden();
	public();
	with_policy();
	return tap_done();
}
