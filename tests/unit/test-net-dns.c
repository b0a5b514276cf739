/* SPDX-License-Identifier: MIT */
/*
 * src/net/dns_msg.c: sandbox queries (real dig captures and every malformed
 * shape the parser refuses), reply builders (checked by parsing them back as
 * upstream responses), and upstream answers (dnslib-built and hand-made:
 * compression pointers, CNAME chains, loops).
 */
#include "net/dns_msg.h"
#include "tap.h"

#include <string.h>

/* Captured with `dig -p PORT @127.0.0.1 ...` (bind9 9.18) and built with python3-dnslib. */
static const uint8_t dig_a[] = {0xf0, 0x2e, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
				0x01, 0x07, 0x45, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x43,
				0x4f, 0x4d, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x29, 0x04,
				0xd0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x0a, 0x00, 0x08,
				0x14, 0x1f, 0xfa, 0x88, 0x43, 0x83, 0xe8, 0x03};
static const uint8_t dig_aaaa_noedns[] = {0xbb, 0x60, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00,
					  0x00, 0x00, 0x00, 0x03, 0x77, 0x77, 0x77, 0x07, 0x61,
					  0x6c, 0x6c, 0x6f, 0x77, 0x65, 0x64, 0x04, 0x74, 0x65,
					  0x73, 0x74, 0x00, 0x00, 0x1c, 0x00, 0x01};
static const uint8_t dig_tcp[] = {0x00, 0x35, 0x83, 0x0c, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00,
				  0x00, 0x00, 0x01, 0x07, 0x61, 0x6c, 0x6c, 0x6f, 0x77, 0x65, 0x64,
				  0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
				  0x00, 0x29, 0x04, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x00,
				  0x0a, 0x00, 0x08, 0x0c, 0xfd, 0xa8, 0x2e, 0x0d, 0x6e, 0x7e, 0xb4};
static const uint8_t dig_txt[] = {
    0x96, 0x18, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x78,
    0x08, 0x61, 0x74, 0x74, 0x61, 0x63, 0x6b, 0x65, 0x72, 0x04, 0x74, 0x65, 0x73, 0x74,
    0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x00, 0x29, 0x04, 0xd0, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x0c, 0x00, 0x0a, 0x00, 0x08, 0x8c, 0xa9, 0xba, 0x63, 0x09, 0x5d, 0xe8, 0x37};
static const uint8_t up_a[] = {
    0x12, 0x34, 0x85, 0x80, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x07, 0x61, 0x6c, 0x6c,
    0x6f, 0x77, 0x65, 0x64, 0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x01, 0x00, 0x01, 0xc0, 0x0c,
    0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x01, 0x2c, 0x00, 0x04, 0xc6, 0x33, 0x64, 0x0a};
static const uint8_t up_aaaa[] = {
    0x33, 0x33, 0x85, 0x80, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x02, 0x76, 0x36, 0x07,
    0x61, 0x6c, 0x6c, 0x6f, 0x77, 0x65, 0x64, 0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x1c, 0x00,
    0x01, 0xc0, 0x0c, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x00, 0x1e, 0x00, 0x10, 0x20, 0x01, 0x0d,
    0xb8, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10};
static const uint8_t up_cname[] = {
    0x22, 0x22, 0x85, 0x80, 0x00, 0x01, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00, 0x05, 0x63, 0x6e, 0x61,
    0x6d, 0x65, 0x07, 0x61, 0x6c, 0x6c, 0x6f, 0x77, 0x65, 0x64, 0x04, 0x74, 0x65, 0x73, 0x74, 0x00,
    0x00, 0x01, 0x00, 0x01, 0xc0, 0x0c, 0x00, 0x05, 0x00, 0x01, 0x00, 0x00, 0x00, 0x78, 0x00, 0x0f,
    0x06, 0x74, 0x61, 0x72, 0x67, 0x65, 0x74, 0x05, 0x6f, 0x74, 0x68, 0x65, 0x72, 0xc0, 0x1a, 0xc0,
    0x30, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x04, 0xcb, 0x00, 0x71, 0x05, 0xc0,
    0x30, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x5a, 0x00, 0x04, 0xcb, 0x00, 0x71, 0x06, 0x09,
    0x75, 0x6e, 0x72, 0x65, 0x6c, 0x61, 0x74, 0x65, 0x64, 0xc0, 0x1a, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x5a, 0x00, 0x04, 0x0a, 0x00, 0x00, 0x01, 0xc0, 0x37, 0x00, 0x02, 0x00, 0x01, 0x00,
    0x00, 0x03, 0x84, 0x00, 0x05, 0x02, 0x6e, 0x73, 0xc0, 0x37};
static const uint8_t up_nx[] = {
    0x44, 0x44, 0x85, 0x83, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x04, 0x6e,
    0x6f, 0x70, 0x65, 0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x01, 0x00, 0x01, 0xc0,
    0x11, 0x00, 0x06, 0x00, 0x01, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x1d, 0x02, 0x6e, 0x73,
    0xc0, 0x11, 0x01, 0x68, 0xc0, 0x11, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
    0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x05};

struct mb {
	uint8_t b[1024];
	size_t n;
};

static void put(struct mb *m, const void *p, size_t n)
{
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void put16(struct mb *m, unsigned v)
{
	uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
	put(m, x, 2);
}

static void put32(struct mb *m, uint32_t v)
{
	put16(m, v >> 16);
	put16(m, v & 0xffff);
}

static void hdr(struct mb *m, unsigned id, unsigned flags, unsigned qd, unsigned an, unsigned ns,
		unsigned ar)
{
	m->n = 0;
	put16(m, id);
	put16(m, flags);
	put16(m, qd);
	put16(m, an);
	put16(m, ns);
	put16(m, ar);
}

/* Append a dotted name as uncompressed wire labels. */
static void name(struct mb *m, const char *s)
{
	while (*s) {
		const char *dot = strchr(s, '.');
		size_t n = dot ? (size_t)(dot - s) : strlen(s);
		m->b[m->n++] = (uint8_t)n;
		put(m, s, n);
		s += n + (dot ? 1 : 0);
	}
	m->b[m->n++] = 0;
}

/* A plain query for name/type, optionally with an OPT record. */
static void query(struct mb *m, const char *n, unsigned type, bool edns)
{
	hdr(m, 0xbeef, 0x0100, 1, 0, 0, edns);
	name(m, n);
	put16(m, type);
	put16(m, 1);
	if (edns) {
		m->b[m->n++] = 0;
		put16(m, NET_DNS_OPT);
		put16(m, 1232);
		put32(m, 0);
		put16(m, 0);
	}
}

static int parse(const struct mb *m, struct net_dns_query *q)
{
	return net_dns_parse_query(m->b, m->n, q);
}

static void real_queries(void)
{
	struct net_dns_query q;
	const uint8_t *msg;
	size_t mlen, flen;

	CHECK(net_dns_parse_query(dig_a, sizeof(dig_a), &q) == 0 &&
		  strcmp(q.qname, "Example.COM") == 0 && q.qtype == NET_DNS_A && q.rd && q.edns &&
		  q.edns_udp == 1232 && q.qname_wire_len == 13,
	      "dig A with EDNS and a cookie: %s", q.why ? q.why : q.qname);
	CHECK(net_dns_parse_query(dig_aaaa_noedns, sizeof(dig_aaaa_noedns), &q) == 0 &&
		  strcmp(q.qname, "www.allowed.test") == 0 && q.qtype == NET_DNS_AAAA && !q.edns,
	      "dig +noedns AAAA");
	CHECK(net_dns_parse_query(dig_txt, sizeof(dig_txt), &q) == 0 && q.qtype == NET_DNS_TXT,
	      "dig TXT parses (refusing the type is the caller's job)");
	CHECK(net_dns_tcp_frame(dig_tcp, sizeof(dig_tcp), &msg, &mlen, &flen) == 0 &&
		  flen == sizeof(dig_tcp) && net_dns_parse_query(msg, mlen, &q) == 0 &&
		  strcmp(q.qname, "allowed.test") == 0,
	      "dig +tcp frame and query");
}

static void header_rules(void)
{
	struct net_dns_query q;
	struct mb m;

	query(&m, "allowed.test", NET_DNS_A, false);
	CHECK(parse(&m, &q) == 0 && q.id == 0xbeef && q.qclass == 1, "plain query");
	CHECK(net_dns_parse_query(m.b, 11, &q) == -1 && !q.answerable, "11 bytes: no header");
	m.b[2] |= 0x80;
	CHECK(parse(&m, &q) == -1 && !q.answerable, "QR set: never answered");
	m.b[2] = 0x01 | 1 << 3;
	CHECK(parse(&m, &q) == -1 && q.rcode == NET_DNS_NOTIMP && q.answerable, "IQUERY: NOTIMP");
	m.b[2] = 0x01 | 2 << 3;
	CHECK(parse(&m, &q) == -1 && q.rcode == NET_DNS_NOTIMP, "STATUS opcode: NOTIMP");
	static const uint16_t bad[] = {NET_DNS_F_AA, NET_DNS_F_TC, NET_DNS_F_Z, 0x0001, 0x0005};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		query(&m, "allowed.test", NET_DNS_A, false);
		m.b[2] |= bad[i] >> 8;
		m.b[3] |= bad[i] & 0xff;
		CHECK(parse(&m, &q) == -1 && q.rcode == NET_DNS_FORMERR, "flag 0x%04x refused",
		      bad[i]);
	}
	query(&m, "allowed.test", NET_DNS_A, false);
	m.b[3] |= NET_DNS_F_AD | NET_DNS_F_CD;
	CHECK(parse(&m, &q) == 0, "AD and CD are fine (dig sets AD)");
	static const struct {
		size_t off;
		uint8_t v;
		const char *what;
	} counts[] = {{5, 0, "QDCOUNT 0"}, {5, 2, "QDCOUNT 2"},	 {7, 1, "ANCOUNT 1"},
		      {9, 1, "NSCOUNT 1"}, {11, 2, "ARCOUNT 2"}, {4, 1, "QDCOUNT 257"}};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		query(&m, "allowed.test", NET_DNS_A, true);
		m.b[counts[i].off] = counts[i].v;
		CHECK(parse(&m, &q) == -1 && q.rcode == NET_DNS_FORMERR, "%s refused",
		      counts[i].what);
	}
}

static void name_rules(void)
{
	char big[300];
	struct net_dns_query q;
	struct mb m;

	memset(big, 'a', 63);
	strcpy(big + 63, ".test");
	query(&m, big, NET_DNS_A, false);
	CHECK(parse(&m, &q) == 0 && q.qname_len == 68, "63-byte label");
	memset(big, 'a', 64);
	strcpy(big + 64, ".test");
	query(&m, big, NET_DNS_A, false);
	CHECK(parse(&m, &q) == -1, "64-byte label refused");
	/* 4 x (1+62) + 1 + 2 = 255 wire bytes: the limit */
	memset(big, 'b', sizeof(big));
	for (int i = 0; i < 4; i++)
		big[i * 63 + 62] = '.';
	big[4 * 63] = 'c';
	big[4 * 63 + 1] = 0;
	query(&m, big, NET_DNS_A, false);
	CHECK(parse(&m, &q) == 0 && q.qname_wire_len == 255 && q.qname_len == 253,
	      "255-byte wire name (253 text) accepted: %s", q.why ? q.why : "");
	big[4 * 63 + 1] = 'c';
	big[4 * 63 + 2] = 0;
	query(&m, big, NET_DNS_A, false);
	CHECK(parse(&m, &q) == -1, "256-byte wire name refused");
	query(&m, "evil.allowed.test", NET_DNS_A, false);
	m.b[12 + 1 + 2] = 0;
	CHECK(parse(&m, &q) == -1, "NUL in a label refused (DNS-14)");
	m.b[12 + 1 + 2] = '.';
	CHECK(parse(&m, &q) == -1, "'.' inside a label refused");
	m.b[12 + 1 + 2] = ' ';
	CHECK(parse(&m, &q) == -1, "space in a label refused");
	m.b[12 + 1 + 2] = 0xc3;
	CHECK(parse(&m, &q) == -1, "high byte in a label refused");
	m.b[12 + 1 + 2] = 0x7f;
	CHECK(parse(&m, &q) == -1, "DEL in a label refused");
	query(&m, "a.allowed.test", NET_DNS_A, false);
	m.b[12 + 2] = 0xc0; /* pointer in place of "allowed" */
	m.b[12 + 3] = 0x0c;
	CHECK(parse(&m, &q) == -1, "compression pointer in a query refused");
	query(&m, "a.allowed.test", NET_DNS_A, false);
	m.b[12 + 2] = 0x80;
	CHECK(parse(&m, &q) == -1, "reserved label type 0x80 refused");
	m.b[12 + 2] = 0x40;
	CHECK(parse(&m, &q) == -1, "extended label type 0x40 refused");
	query(&m, "a.allowed.test", NET_DNS_A, false);
	m.b[12 + 2] = 0; /* "a" then root, then garbage where the rest was */
	CHECK(parse(&m, &q) == -1, "empty label mid-name (a..allowed) refused");
	query(&m, "allowed.test", NET_DNS_A, false);
	m.b[12] = 40;
	CHECK(parse(&m, &q) == -1, "label running past the message refused");
	query(&m, "", NET_DNS_NS, false);
	CHECK(parse(&m, &q) == 0 && q.qname_len == 0 && q.qname[0] == 0 && q.qname_wire_len == 1,
	      "root name query parses with empty text");
	query(&m, "_sip._tcp.allowed.test", NET_DNS_A, false);
	CHECK(parse(&m, &q) == 0, "underscore labels parse (canon judges them)");
}

static void body_rules(void)
{
	struct net_dns_query q;
	struct mb m;

	query(&m, "allowed.test", NET_DNS_A, false);
	CHECK(net_dns_parse_query(m.b, m.n - 1, &q) == -1, "truncated qclass refused");
	CHECK(net_dns_parse_query(m.b, 12 + 5, &q) == -1, "truncated name refused");
	m.b[m.n++] = 0;
	CHECK(parse(&m, &q) == -1, "trailing byte refused");
	query(&m, "version.bind", NET_DNS_TXT, false);
	m.b[m.n - 1] = 3;
	CHECK(parse(&m, &q) == -1 && q.rcode == NET_DNS_REFUSED && q.qname_wire,
	      "class CH refused, question kept for the echo");
	m.b[m.n - 1] = 255;
	CHECK(parse(&m, &q) == -1 && q.rcode == NET_DNS_REFUSED, "class ANY refused");
	query(&m, "allowed.test", NET_DNS_A, true);
	m.b[m.n - 9] = NET_DNS_A; /* OPT type -> A */
	CHECK(parse(&m, &q) == -1, "additional record that is not OPT refused");
	query(&m, "allowed.test", NET_DNS_A, false);
	m.b[11] = 1;
	name(&m, "x");
	put16(&m, NET_DNS_OPT);
	put16(&m, 512);
	put32(&m, 0);
	put16(&m, 0);
	CHECK(parse(&m, &q) == -1, "OPT with a non-root owner refused");
	query(&m, "allowed.test", NET_DNS_A, true);
	m.b[m.n - 5] = 1;
	CHECK(parse(&m, &q) == -1, "EDNS version 1 refused");
	query(&m, "allowed.test", NET_DNS_A, true);
	m.b[m.n - 6] = 1;
	CHECK(parse(&m, &q) == -1, "EDNS extended rcode in a query refused");
	query(&m, "allowed.test", NET_DNS_A, true);
	m.b[m.n - 1] = 4;
	put16(&m, 10);
	put16(&m, 9); /* option says 9 bytes, rdata holds 0 */
	CHECK(parse(&m, &q) == -1, "EDNS option overrunning its record refused");
	query(&m, "allowed.test", NET_DNS_A, true);
	m.b[m.n - 1] = 8;
	CHECK(parse(&m, &q) == -1, "OPT rdata past the message refused");
	query(&m, "allowed.test", NET_DNS_A, true);
	m.b[m.n - 1] = 6;
	put16(&m, 12);
	put16(&m, 2);
	put16(&m, 0);
	m.b[m.n - 10] = 0x80; /* DO bit: the OPT record starts at m.n - 17 */
	CHECK(parse(&m, &q) == 0 && q.edns_do, "EDNS padding option and DO bit");
}

/* Parse a built reply as an upstream answer to the same question. */
static int reparse(const struct net_dns_query *q, const uint8_t *r, size_t n, struct net_dns_rr *rr,
		   size_t max, struct net_dns_response *res)
{
	struct net_dns_asked asked = {q->id, q->qname_wire, q->qname_wire_len, q->qtype};

	return net_dns_parse_response(r, n, &asked, rr, max, res);
}

static void builders(void)
{
	static const int rcodes[] = {NET_DNS_REFUSED, NET_DNS_NXDOMAIN, NET_DNS_NOERROR,
				     NET_DNS_SERVFAIL, NET_DNS_FORMERR};
	struct net_dns_response res;
	struct net_dns_query q;
	struct net_dns_rr rr[64];
	uint8_t out[70000];
	ssize_t n;
	struct mb m;

	CHECK(net_dns_parse_query(dig_a, sizeof(dig_a), &q) == 0, "dig query for the builders");
	for (size_t i = 0; i < sizeof(rcodes) / sizeof(rcodes[0]); i++) {
		n = net_dns_build_reply(&q, rcodes[i], out, sizeof(out));
		CHECK(n == 12 + 17 + 11 && reparse(&q, out, (size_t)n, rr, 64, &res) == 0 &&
			  res.rcode == rcodes[i] && res.n_rr == 0 && out[11] == 1 &&
			  memcmp(out + 12, dig_a + 12, 17) == 0 && (out[3] & 0x80),
		      "reply rcode %d echoes the question, adds OPT, sets RA", rcodes[i]);
	}
	CHECK(net_dns_build_reply(&q, NET_DNS_REFUSED, out, 39) == -1, "reply into a short buffer");
	CHECK(net_dns_parse_query(out, 40, &q) == -1 && !q.answerable,
	      "our own reply is not accepted as a query");
	query(&m, "x", NET_DNS_A, false);
	m.b[5] = 2;
	net_dns_parse_query(m.b, m.n, &q);
	n = net_dns_build_reply(&q, q.rcode, out, sizeof(out));
	CHECK(n == 12 && out[3] == (0x80 | NET_DNS_FORMERR) && out[5] == 0 && out[0] == 0xbe,
	      "FORMERR without a question: bare header with the id");

	struct net_dns_addr a[100];
	for (size_t i = 0; i < 100; i++) {
		a[i] = (struct net_dns_addr){NET_DNS_A, 300, {198, 51, 100, (uint8_t)i}};
	}
	query(&m, "allowed.test", NET_DNS_A, false);
	net_dns_parse_query(m.b, m.n, &q);
	n = net_dns_build_answer(&q, a, 2, net_dns_reply_limit(&q, false), out, sizeof(out));
	CHECK(n > 0 && reparse(&q, out, (size_t)n, rr, 64, &res) == 0 && res.n_addr == 2 &&
		  rr[1].addr[3] == 1 && rr[0].ttl == 300 && !res.tc,
	      "A answer round-trips through the upstream parser");
	n = net_dns_build_answer(&q, a, 100, net_dns_reply_limit(&q, false), out, sizeof(out));
	CHECK(n > 0 && n <= 512 && (out[2] & 0x02) && out[7] == (512 - 30) / 16,
	      "100 A records over UDP/512: TC and %u fit", out[7]);
	n = net_dns_build_answer(&q, a, 100, net_dns_reply_limit(&q, true), out, sizeof(out));
	CHECK(n == 30 + 1600 && !(out[2] & 0x02) && out[7] == 100, "the same over TCP: all fit");
	a[0].type = NET_DNS_AAAA;
	memset(a[0].addr, 0x20, 16);
	a[0].ttl = 0xffffffff;
	n = net_dns_build_answer(&q, a, 1, 512, out, sizeof(out));
	CHECK(n > 0 && reparse(&q, out, (size_t)n, rr, 64, &res) == 0 && res.n_addr == 0,
	      "AAAA records under an A question are not collected");
	CHECK(out[30 + 6] == 0x7f && out[30 + 7] == 0xff, "TTL above 2^31-1 sent as 2^31-1");
	a[0].type = NET_DNS_CNAME;
	CHECK(net_dns_build_answer(&q, a, 1, 512, out, sizeof(out)) == -1, "CNAME record refused");
	CHECK(net_dns_build_answer(&q, a, 0, 512, out, 20) == -1, "answer into a short buffer");

	net_dns_parse_query(dig_a, sizeof(dig_a), &q);
	CHECK(net_dns_reply_limit(&q, false) == 1232 && net_dns_reply_limit(&q, true) == 65535,
	      "limits with EDNS 1232");
	q.edns_udp = 100;
	CHECK(net_dns_reply_limit(&q, false) == 512, "EDNS size below 512 means 512");
	q.edns_udp = 4096;
	CHECK(net_dns_reply_limit(&q, false) == 1232, "EDNS size above 1232 clamped");
	q.edns = false;
	CHECK(net_dns_reply_limit(&q, false) == 512, "no EDNS: 512");
}

static void tcp_frames(void)
{
	const uint8_t *msg;
	size_t mlen, flen;
	uint8_t two[60];

	CHECK(net_dns_tcp_frame(dig_tcp, 1, &msg, &mlen, &flen) == -2 && flen == 2,
	      "1 byte: need 2");
	CHECK(net_dns_tcp_frame(dig_tcp, 20, &msg, &mlen, &flen) == -2 && flen == sizeof(dig_tcp),
	      "partial frame: need the whole");
	CHECK(net_dns_tcp_frame((const uint8_t *)"\0\x0b", 2, &msg, &mlen, &flen) == -1,
	      "frame shorter than a header refused");
	memcpy(two, dig_tcp, sizeof(dig_tcp));
	memset(two + sizeof(dig_tcp), 0, sizeof(two) - sizeof(dig_tcp));
	CHECK(net_dns_tcp_frame(two, sizeof(two), &msg, &mlen, &flen) == 0 &&
		  mlen == sizeof(dig_tcp) - 2,
	      "frame followed by more bytes: just the first");
}

static void resp(struct mb *m, unsigned id, const char *q, unsigned qtype, unsigned an)
{
	hdr(m, id, 0x8180, 1, an, 0, 0);
	name(m, q);
	put16(m, qtype);
	put16(m, 1);
}

static void rr_a(struct mb *m, const char *owner, uint8_t last)
{
	name(m, owner);
	put16(m, NET_DNS_A);
	put16(m, 1);
	put32(m, 60);
	put16(m, 4);
	put(m, (uint8_t[]){192, 0, 2, last}, 4);
}

static void rr_cname(struct mb *m, const char *owner, const char *target)
{
	size_t at;

	name(m, owner);
	put16(m, NET_DNS_CNAME);
	put16(m, 1);
	put32(m, 30);
	at = m->n;
	put16(m, 0);
	name(m, target);
	m->b[at + 1] = (uint8_t)(m->n - at - 2);
}

static int up(const struct mb *m, const char *asked_name, unsigned id, unsigned qtype,
	      struct net_dns_rr *rr, size_t max, struct net_dns_response *res)
{
	struct mb w = {.n = 0};
	struct net_dns_asked asked;

	name(&w, asked_name);
	asked = (struct net_dns_asked){(uint16_t)id, w.b, w.n, (uint16_t)qtype};
	return net_dns_parse_response(m->b, m->n, &asked, rr, max, res);
}

static void upstream_real(void)
{
	struct net_dns_response res;
	struct net_dns_rr rr[8];
	char text[NET_DNS_MAX_TEXT_NAME + 1];
	size_t next;
	struct mb m;
	int bad = 0;

#define UP(arr, nm, id, t, max)                                                                    \
	(memcpy(m.b, arr, sizeof(arr)), m.n = sizeof(arr), up(&m, nm, id, t, rr, max, &res))
	CHECK(UP(up_a, "allowed.test", 0x1234, NET_DNS_A, 8) == 0 && res.n_addr == 1 &&
		  rr[0].addr[0] == 198 && rr[0].addr[3] == 10 && rr[0].ttl == 300,
	      "dnslib A answer");
	CHECK(UP(up_cname, "cname.allowed.test", 0x2222, NET_DNS_A, 8) == 0 && res.n_rr == 3 &&
		  res.n_addr == 2 && rr[0].type == NET_DNS_CNAME && rr[2].addr[3] == 6 &&
		  res.min_ttl == 60 && strcmp(res.final_name, "target.other.test") == 0,
	      "dnslib CNAME chain: unrelated owner skipped, NS authority checked: %s",
	      res.why ? res.why : "");
	CHECK(net_dns_read_name(up_cname, sizeof(up_cname), rr[0].target_off, text, &next) == 17 &&
		  strcmp(text, "target.other.test") == 0,
	      "read_name on a compressed CNAME target");
	CHECK(UP(up_cname, "cname.allowed.test", 0x2222, NET_DNS_A, 2) == -1,
	      "more chain records than the caller takes refused");
	CHECK(UP(up_aaaa, "v6.allowed.test", 0x3333, NET_DNS_AAAA, 8) == 0 && res.n_addr == 1 &&
		  rr[0].addr[0] == 0x20 && rr[0].addr[15] == 0x10,
	      "dnslib AAAA answer");
	CHECK(UP(up_nx, "nope.test", 0x4444, NET_DNS_A, 8) == 0 && res.rcode == 3 && !res.n_rr,
	      "dnslib NXDOMAIN with SOA");
	CHECK(UP(up_a, "allowed.test", 0x1235, NET_DNS_A, 8) == -1, "id mismatch refused");
	CHECK(UP(up_a, "allowed.tesu", 0x1234, NET_DNS_A, 8) == -1, "question mismatch refused");
	CHECK(UP(up_a, "allowed.test", 0x1234, NET_DNS_AAAA, 8) == -1, "qtype mismatch refused");
	CHECK(UP(up_a, "ALLOWED.test", 0x1234, NET_DNS_A, 8) == 0, "echo compared ASCII-caseless");
	for (size_t n = 0; n < sizeof(up_cname); n++) {
		memcpy(m.b, up_cname, n);
		m.n = n;
		bad += up(&m, "cname.allowed.test", 0x2222, NET_DNS_A, rr, 8, &res) != -1;
	}
	CHECK(bad == 0, "every truncation of the CNAME answer refused");
	memcpy(m.b, up_a, sizeof(up_a));
	m.b[2] &= 0x7f;
	m.n = sizeof(up_a);
	CHECK(up(&m, "allowed.test", 0x1234, NET_DNS_A, rr, 8, &res) == -1, "QR clear refused");
	m.b[2] |= 0x82;
	CHECK(up(&m, "allowed.test", 0x1234, NET_DNS_A, rr, 8, &res) == 0 && res.tc && !res.n_rr,
	      "TC set: flagged, nothing read");
	m.b[2] = 0x81;
	m.b[m.n++] = 0;
	CHECK(up(&m, "allowed.test", 0x1234, NET_DNS_A, rr, 8, &res) == -1,
	      "trailing byte refused");
#undef UP
}

static void upstream_crafted(void)
{
	struct net_dns_response res;
	struct net_dns_rr rr[16];
	struct mb m;
	size_t at;

	resp(&m, 7, "a.test", NET_DNS_A, 1);
	at = m.n;
	put16(&m, 0xc000 | (unsigned)(at + 2));
	name(&m, "a.test");
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == -1, "forward pointer refused");
	resp(&m, 7, "a.test", NET_DNS_A, 1);
	put16(&m, 0xc000 | (unsigned)m.n);
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == -1, "self pointer refused");
	resp(&m, 7, "a.test", NET_DNS_A, 1);
	put16(&m, 0xc002);
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == -1,
	      "pointer into the header refused");
	resp(&m, 7, "a.test", NET_DNS_A, 1);
	m.b[m.n++] = 1;
	m.b[m.n++] = 'x';
	put16(&m, 0xc00c);
	put16(&m, NET_DNS_A);
	put16(&m, 1);
	put32(&m, 5);
	put16(&m, 4);
	put32(&m, 0xc0000201);
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == 0 && res.n_rr == 0,
	      "x.<ptr a.test> is another owner: skipped");
	resp(&m, 7, "a.test", NET_DNS_A, 1);
	put16(&m, 0xc00c);
	put16(&m, NET_DNS_A);
	put16(&m, 1);
	put32(&m, 5);
	put16(&m, 4);
	put32(&m, 0xc0000201);
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == 0 && res.n_addr == 1 &&
		  rr[0].ttl == 5,
	      "owner as a pointer to the question");
	m.b[m.n - 5] = 5;
	m.b[m.n++] = 0;
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == -1, "A rdlength 5 refused");
	resp(&m, 7, "a.test", NET_DNS_A, 2);
	rr_cname(&m, "a.test", "b.test");
	rr_cname(&m, "b.test", "a.test");
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == -1, "CNAME loop refused");
	resp(&m, 7, "c0.test", NET_DNS_A, 10);
	for (int i = 0; i < 9; i++) {
		char o[16], t[16];
		snprintf(o, sizeof(o), "c%d.test", i);
		snprintf(t, sizeof(t), "c%d.test", i + 1);
		rr_cname(&m, o, t);
	}
	rr_a(&m, "c9.test", 9);
	CHECK(up(&m, "c0.test", 7, NET_DNS_A, rr, 16, &res) == -1, "9-hop CNAME chain refused");
	resp(&m, 7, "c0.test", NET_DNS_A, 3);
	rr_a(&m, "c1.test", 1);
	rr_cname(&m, "c0.test", "C1.test");
	rr_a(&m, "c0.test", 2);
	CHECK(up(&m, "c0.test", 7, NET_DNS_A, rr, 16, &res) == 0 && res.n_addr == 1 &&
		  rr[1].addr[3] == 1,
	      "chain in any order; the CNAME owner's own A skipped");
	resp(&m, 7, "a.test", NET_DNS_A, 2);
	rr_cname(&m, "a.test", "b.test");
	rr_cname(&m, "a.test", "c.test");
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == -1,
	      "two CNAMEs for one owner refused");
	resp(&m, 7, "a.test", NET_DNS_A, 1);
	rr_cname(&m, "a.test", "b.test");
	m.b[m.n - 9] += 1; /* rdlength one more than the name */
	m.b[m.n++] = 0;
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == -1,
	      "CNAME rdata longer than its name");
	resp(&m, 7, "a.test", NET_DNS_CNAME, 1);
	rr_cname(&m, "a.test", "b.test");
	CHECK(up(&m, "a.test", 7, NET_DNS_CNAME, rr, 16, &res) == 0 && res.n_rr == 1 &&
		  rr[0].type == NET_DNS_CNAME,
	      "CNAME question: the one record");
	resp(&m, 7, "a.test", NET_DNS_A, 1);
	rr_a(&m, "a.test", 1);
	m.b[m.n - 11] = 3; /* class CH */
	CHECK(up(&m, "a.test", 7, NET_DNS_A, rr, 16, &res) == -1, "answer class CH refused");
}

int main(void)
{
	real_queries();
	header_rules();
	name_rules();
	body_rules();
	builders();
	tcp_frames();
	upstream_real();
	upstream_crafted();
	return tap_done();
}
