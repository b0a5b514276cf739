/* SPDX-License-Identifier: MIT */
/*
 * DNS query parser, reply builders and upstream-answer parser. Contract in
 * dns_msg.h; rationale in docs/design/parsers.md.
 *
 * Every read goes through get16()/get32() or a memcpy after an explicit
 * bounds check against `len`; offsets are size_t and only ever grow by
 * amounts that were checked to fit.
 */
#include "net/dns_msg.h"

#include <string.h>

#define DNS_PTR 0xc0

/* One resource record header, as read by rr_next(). */
struct rr_hdr {
	size_t owner;
	uint16_t type;
	uint16_t class;
	uint32_t ttl;
	size_t rdata;
	uint16_t rdlen;
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static int fail(const char **why, const char *reason)
{
	*why = reason;
	return -1;
}

/* Label bytes: printable ASCII, no space, no '.' (which would make the dotted text ambiguous). */
static bool label_ok(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] <= 0x20 || p[i] >= 0x7f || p[i] == '.')
			return false;
	return true;
}

static char ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

static bool text_eq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (ascii_lower(*a) != ascii_lower(*b))
			return false;
	return *a == *b;
}

/*
 * The one name walker. With allow_ptr false a pointer is an error (queries);
 * with it, each pointer must land at or after the header and strictly before
 * the start of the label run that contained it, so positions strictly
 * decrease across jumps and the walk ends; NET_DNS_MAX_PTR_HOPS bounds it
 * further. Writes dotted text to out (NET_DNS_MAX_TEXT_NAME + 1 bytes).
 */
static int walk_name(const uint8_t *msg, size_t len, size_t off, bool allow_ptr, char *out,
		     size_t *next, size_t *wire_len, const char **why)
{
	size_t pos = off, run = off, wire = 0, tl = 0, after = 0;
	unsigned hops = 0;

	for (;;) {
		if (pos >= len)
			return fail(why, "name runs past the message");
		uint8_t b = msg[pos];
		if (b == 0) {
			wire++;
			if (!hops)
				after = pos + 1;
			break;
		}
		if ((b & DNS_PTR) == DNS_PTR) {
			if (!allow_ptr)
				return fail(why, "compression pointer in a query name");
			if (pos + 1 >= len)
				return fail(why, "truncated compression pointer");
			size_t to = (size_t)(b & 0x3f) << 8 | msg[pos + 1];
			if (!hops)
				after = pos + 2;
			if (to < NET_DNS_HEADER || to >= run)
				return fail(why, "compression pointer not strictly backwards");
			if (++hops > NET_DNS_MAX_PTR_HOPS)
				return fail(why, "too many compression pointers");
			pos = run = to;
			continue;
		}
		if (b & DNS_PTR)
			return fail(why, "reserved label type");
		/* SAFETY: b <= 63 here; the label is inside msg if pos + 1 + b <= len. */
		if (b > len - pos - 1)
			return fail(why, "label runs past the message");
		wire += 1 + (size_t)b;
		if (wire + 1 > NET_DNS_MAX_WIRE_NAME)
			return fail(why, "name longer than 255 bytes");
		if (!label_ok(msg + pos + 1, b))
			return fail(why, "bad byte in a label");
		if (tl)
			out[tl++] = '.';
		memcpy(out + tl, msg + pos + 1, b); /* tl + b <= wire - 1 <= 253 */
		tl += b;
		pos += 1 + (size_t)b;
	}
	out[tl] = 0;
	*next = after;
	if (wire_len)
		*wire_len = wire;
	return (int)tl;
}

int net_dns_read_name(const uint8_t *msg, size_t len, size_t off, char *out, size_t *next)
{
	const char *why;

	return walk_name(msg, len, off, true, out, next, NULL, &why);
}

/* Read a record header at *pos and check its rdata fits; advances past it. */
static int rr_next(const uint8_t *msg, size_t len, size_t *pos, struct rr_hdr *rr, const char **why)
{
	char name[NET_DNS_MAX_TEXT_NAME + 1];
	size_t p;

	rr->owner = *pos;
	if (walk_name(msg, len, *pos, true, name, &p, NULL, why) < 0)
		return -1;
	if (len - p < 10)
		return fail(why, "truncated record");
	rr->type = get16(msg + p);
	rr->class = get16(msg + p + 2);
	rr->ttl = get32(msg + p + 4);
	rr->rdlen = get16(msg + p + 8);
	rr->rdata = p + 10;
	if (rr->rdlen > len - rr->rdata)
		return fail(why, "record data runs past the message");
	*pos = rr->rdata + rr->rdlen;
	return 0;
}

/* The EDNS0 OPT record (RFC 6891 §6.1.2) at *pos, for a query. */
static int parse_opt(const uint8_t *msg, size_t len, size_t *pos, struct net_dns_query *q)
{
	struct rr_hdr rr;

	if (*pos >= len || msg[*pos] != 0)
		return fail(&q->why, "additional record is not an OPT for the root");
	if (rr_next(msg, len, pos, &rr, &q->why) < 0)
		return -1;
	if (rr.type != NET_DNS_OPT)
		return fail(&q->why, "additional record is not an OPT");
	if ((rr.ttl >> 16 & 0xff) != 0)
		return fail(&q->why, "EDNS version is not 0");
	if (rr.ttl >> 24)
		return fail(&q->why, "EDNS extended rcode in a query");
	q->edns = true;
	q->edns_udp = rr.class;
	q->edns_do = rr.ttl & 0x8000;
	/* options: code, length, data; they must tile rdata exactly */
	for (size_t o = rr.rdata, end = rr.rdata + rr.rdlen; o < end;) {
		if (end - o < 4)
			return fail(&q->why, "truncated EDNS option");
		size_t olen = get16(msg + o + 2);
		if (olen > end - o - 4)
			return fail(&q->why, "EDNS option runs past its record");
		o += 4 + olen;
	}
	return 0;
}

static int parse_header(const uint8_t *msg, size_t len, struct net_dns_query *q)
{
	if (len < NET_DNS_HEADER)
		return fail(&q->why, "shorter than a DNS header");
	q->id = get16(msg);
	q->flags = get16(msg + 2);
	if (q->flags & NET_DNS_F_QR)
		return fail(&q->why, "QR set: a response, not a query");
	q->answerable = true;
	q->rd = q->flags & NET_DNS_F_RD;
	if ((q->flags >> 11 & 0xf) != 0) {
		q->rcode = NET_DNS_NOTIMP;
		return fail(&q->why, "opcode is not QUERY");
	}
	if (q->flags & (NET_DNS_F_AA | NET_DNS_F_TC | NET_DNS_F_Z | 0xf))
		return fail(&q->why, "AA, TC, Z or RCODE set in a query");
	if (get16(msg + 4) != 1)
		return fail(&q->why, "question count is not 1");
	return 0;
}

int net_dns_parse_query(const uint8_t *msg, size_t len, struct net_dns_query *q)
{
	size_t pos, wire;
	int n;

	memset(q, 0, sizeof(*q));
	q->rcode = NET_DNS_FORMERR;
	if (parse_header(msg, len, q) < 0)
		return -1;
	n = walk_name(msg, len, NET_DNS_HEADER, false, q->qname, &pos, &wire, &q->why);
	if (n < 0)
		return -1;
	if (len - pos < 4)
		return fail(&q->why, "truncated question");
	q->qname_len = (size_t)n;
	q->qname_wire = msg + NET_DNS_HEADER;
	q->qname_wire_len = wire;
	q->qtype = get16(msg + pos);
	q->qclass = get16(msg + pos + 2);
	q->question_len = wire + 4;
	pos += 4;
	if (get16(msg + 6) || get16(msg + 8))
		return fail(&q->why, "answer or authority records in a query");
	if (get16(msg + 10) > 1)
		return fail(&q->why, "more than one additional record");
	if (get16(msg + 10) == 1 && parse_opt(msg, len, &pos, q) < 0)
		return -1;
	if (pos != len)
		return fail(&q->why, "trailing bytes after the query");
	if (q->qclass != NET_DNS_CLASS_IN) {
		q->rcode = NET_DNS_REFUSED;
		return fail(&q->why, "class is not IN");
	}
	q->why = NULL;
	q->rcode = NET_DNS_NOERROR;
	return 0;
}

int net_dns_tcp_frame(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *msg_len,
		      size_t *frame_len)
{
	size_t n;

	if (len < 2) {
		*frame_len = 2;
		return -2;
	}
	n = get16(buf);
	*frame_len = 2 + n;
	if (n < NET_DNS_HEADER)
		return -1;
	if (len - 2 < n)
		return -2;
	*msg = buf + 2;
	*msg_len = n;
	return 0;
}

size_t net_dns_reply_limit(const struct net_dns_query *q, bool tcp)
{
	if (tcp)
		return 65535;
	if (!q->edns || q->edns_udp < NET_DNS_UDP_MIN)
		return NET_DNS_UDP_MIN;
	return q->edns_udp > NET_DNS_EDNS_SIZE ? NET_DNS_EDNS_SIZE : q->edns_udp;
}

#define OPT_RR_LEN 11

/* Header, question (if read) and the OPT record go first/last; returns the question end. */
static ssize_t put_head(const struct net_dns_query *q, int rcode, uint8_t *out, size_t cap)
{
	bool question = q->qname_wire != NULL;
	size_t need =
	    NET_DNS_HEADER + (question ? q->question_len : 0) + (q->edns ? OPT_RR_LEN : 0);
	uint16_t flags;

	if (cap < need || rcode < 0 || rcode > 15)
		return -1;
	flags = NET_DNS_F_QR | NET_DNS_F_RA | (q->flags & (NET_DNS_F_RD | NET_DNS_F_CD));
	put16(out, q->id);
	put16(out + 2, flags | (uint16_t)rcode);
	put16(out + 4, question);
	put16(out + 6, 0);
	put16(out + 8, 0);
	put16(out + 10, q->edns);
	if (!question)
		return NET_DNS_HEADER;
	memcpy(out + NET_DNS_HEADER, q->qname_wire, q->qname_wire_len);
	put16(out + NET_DNS_HEADER + q->qname_wire_len, q->qtype);
	put16(out + NET_DNS_HEADER + q->qname_wire_len + 2, q->qclass);
	return (ssize_t)(NET_DNS_HEADER + q->question_len);
}

static size_t put_opt(const struct net_dns_query *q, uint8_t *p)
{
	if (!q->edns)
		return 0;
	p[0] = 0;
	put16(p + 1, NET_DNS_OPT);
	put16(p + 3, NET_DNS_EDNS_SIZE);
	put32(p + 5, q->edns_do ? 0x8000 : 0);
	put16(p + 9, 0);
	return OPT_RR_LEN;
}

ssize_t net_dns_build_reply(const struct net_dns_query *q, int rcode, uint8_t *out, size_t cap)
{
	ssize_t n = put_head(q, rcode, out, cap);

	if (n < 0)
		return -1;
	return n + (ssize_t)put_opt(q, out + n);
}

ssize_t net_dns_build_answer(const struct net_dns_query *q, const struct net_dns_addr *addrs,
			     size_t n, size_t limit, uint8_t *out, size_t cap)
{
	size_t lim = limit < cap ? limit : cap, opt = q->edns ? OPT_RR_LEN : 0, an = 0, pos;
	ssize_t h;

	if (!q->qname_wire)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (addrs[i].type != NET_DNS_A && addrs[i].type != NET_DNS_AAAA)
			return -1;
	h = put_head(q, NET_DNS_NOERROR, out, lim);
	if (h < 0)
		return -1;
	pos = (size_t)h;
	for (size_t i = 0; i < n && an < 0xffff; i++) {
		size_t alen = addrs[i].type == NET_DNS_A ? 4 : 16;
		uint32_t ttl = addrs[i].ttl > INT32_MAX ? INT32_MAX : addrs[i].ttl;

		if (pos + 12 + alen + opt > lim) {
			out[2] |= NET_DNS_F_TC >> 8;
			break;
		}
		put16(out + pos, 0xc000 | NET_DNS_HEADER); /* the question name */
		put16(out + pos + 2, addrs[i].type);
		put16(out + pos + 4, NET_DNS_CLASS_IN);
		put32(out + pos + 6, ttl);
		put16(out + pos + 10, (uint16_t)alen);
		memcpy(out + pos + 12, addrs[i].addr, alen);
		pos += 12 + alen;
		an++;
	}
	put16(out + 6, (uint16_t)an);
	return (ssize_t)(pos + put_opt(q, out + pos));
}

/* Check every record of a section; the answer section's must be class IN and well formed. */
static int check_section(const uint8_t *msg, size_t len, size_t *pos, unsigned count, int sect,
			 bool *opt_seen, const char **why)
{
	char name[NET_DNS_MAX_TEXT_NAME + 1];
	struct rr_hdr rr;
	size_t end;

	if (count > NET_DNS_MAX_RECORDS)
		return fail(why, "too many records in a section");
	for (unsigned i = 0; i < count; i++) {
		if (rr_next(msg, len, pos, &rr, why) < 0)
			return -1;
		if (rr.type == NET_DNS_OPT) {
			if (sect != 2 || *opt_seen || msg[rr.owner] != 0)
				return fail(why, "misplaced OPT record");
			*opt_seen = true;
			continue;
		}
		if (sect == 0 && rr.class != NET_DNS_CLASS_IN)
			return fail(why, "answer record class is not IN");
		if (sect == 0 && rr.type == NET_DNS_A && rr.rdlen != 4)
			return fail(why, "A record length is not 4");
		if (sect == 0 && rr.type == NET_DNS_AAAA && rr.rdlen != 16)
			return fail(why, "AAAA record length is not 16");
		if (sect == 0 && rr.type == NET_DNS_CNAME) {
			if (walk_name(msg, rr.rdata + rr.rdlen, rr.rdata, true, name, &end, NULL,
				      why) < 0)
				return -1;
			if (end != rr.rdata + rr.rdlen)
				return fail(why, "CNAME data longer than its name");
		}
	}
	return 0;
}

static int check_question(const uint8_t *msg, size_t len, const struct net_dns_asked *asked,
			  size_t *pos, char *qname, const char **why)
{
	char want[NET_DNS_MAX_TEXT_NAME + 1];
	size_t p, w;

	if (walk_name(asked->qname_wire, asked->qname_wire_len, 0, false, want, &w, NULL, why) < 0)
		return -1;
	if (walk_name(msg, len, NET_DNS_HEADER, true, qname, &p, NULL, why) < 0)
		return -1;
	if (len - p < 4)
		return fail(why, "truncated question");
	if (!text_eq(qname, want) || get16(msg + p) != asked->qtype ||
	    get16(msg + p + 2) != NET_DNS_CLASS_IN)
		return fail(why, "question does not echo what was asked");
	*pos = p + 4;
	return 0;
}

static int add_rr(const struct rr_hdr *h, const uint8_t *msg, struct net_dns_rr *rr, size_t max_rr,
		  struct net_dns_response *res)
{
	struct net_dns_rr *r;

	if (res->n_rr >= max_rr)
		return fail(&res->why, "more answer records than the caller can take");
	r = &rr[res->n_rr++];
	memset(r, 0, sizeof(*r));
	r->type = h->type;
	r->ttl = h->ttl > INT32_MAX ? INT32_MAX : h->ttl;
	r->owner_off = h->owner;
	if (h->type == NET_DNS_CNAME)
		r->target_off = h->rdata;
	else
		memcpy(r->addr, msg + h->rdata, h->rdlen);
	if (res->n_rr == 1 || r->ttl < res->min_ttl)
		res->min_ttl = r->ttl;
	return 0;
}

/* Find the one CNAME owned by cur in the answer section; 1 found, 0 none, -1 error. */
static int find_cname(const uint8_t *msg, size_t len, size_t start, unsigned count, const char *cur,
		      struct rr_hdr *found, const char **why)
{
	char name[NET_DNS_MAX_TEXT_NAME + 1];
	struct rr_hdr rr;
	size_t pos = start, next;
	int hits = 0;

	for (unsigned i = 0; i < count; i++) {
		if (rr_next(msg, len, &pos, &rr, why) < 0)
			return -1;
		if (rr.type != NET_DNS_CNAME)
			continue;
		if (walk_name(msg, len, rr.owner, true, name, &next, NULL, why) < 0)
			return -1;
		if (!text_eq(name, cur))
			continue;
		if (hits++)
			return fail(why, "two CNAMEs for one name");
		*found = rr;
	}
	return hits;
}

/* Follow the CNAME chain from the question and collect the final name's addresses. */
static int collect(const uint8_t *msg, size_t len, size_t start, unsigned count, uint16_t qtype,
		   struct net_dns_rr *rr, size_t max_rr, struct net_dns_response *res)
{
	char name[NET_DNS_MAX_TEXT_NAME + 1];
	struct rr_hdr h;
	size_t pos, next;
	int r;

	for (unsigned hops = 0;; hops++) {
		r = find_cname(msg, len, start, count, res->final_name, &h, &res->why);
		if (r < 0)
			return -1;
		if (r == 0 || qtype == NET_DNS_CNAME)
			break;
		if (hops >= NET_DNS_MAX_CNAME)
			return fail(&res->why, "CNAME chain too long or looping");
		if (add_rr(&h, msg, rr, max_rr, res) < 0)
			return -1;
		if (walk_name(msg, len, h.rdata, true, res->final_name, &next, NULL, &res->why) < 0)
			return -1;
	}
	if (r == 1 && add_rr(&h, msg, rr, max_rr, res) < 0)
		return -1; /* a CNAME query: its one record */
	pos = start;
	for (unsigned i = 0; i < count; i++) {
		if (rr_next(msg, len, &pos, &h, &res->why) < 0)
			return -1;
		if (h.type != qtype || (qtype != NET_DNS_A && qtype != NET_DNS_AAAA))
			continue;
		if (walk_name(msg, len, h.owner, true, name, &next, NULL, &res->why) < 0)
			return -1;
		if (!text_eq(name, res->final_name))
			continue;
		if (add_rr(&h, msg, rr, max_rr, res) < 0)
			return -1;
		res->n_addr++;
	}
	return 0;
}

int net_dns_parse_response(const uint8_t *msg, size_t len, const struct net_dns_asked *asked,
			   struct net_dns_rr *rr, size_t max_rr, struct net_dns_response *res)
{
	unsigned an, ns, ar;
	size_t pos, start;
	bool opt = false;

	memset(res, 0, sizeof(*res));
	if (len < NET_DNS_HEADER)
		return fail(&res->why, "shorter than a DNS header");
	res->flags = get16(msg + 2);
	res->rcode = res->flags & 0xf;
	res->tc = res->flags & NET_DNS_F_TC;
	if (get16(msg) != asked->id)
		return fail(&res->why, "id does not match");
	if (!(res->flags & NET_DNS_F_QR) || (res->flags >> 11 & 0xf) != 0)
		return fail(&res->why, "not a response to a QUERY");
	if (get16(msg + 4) != 1)
		return fail(&res->why, "question count is not 1");
	if (check_question(msg, len, asked, &pos, res->final_name, &res->why) < 0)
		return -1;
	if (res->tc)
		return 0;
	an = get16(msg + 6);
	ns = get16(msg + 8);
	ar = get16(msg + 10);
	start = pos;
	if (check_section(msg, len, &pos, an, 0, &opt, &res->why) < 0 ||
	    check_section(msg, len, &pos, ns, 1, &opt, &res->why) < 0 ||
	    check_section(msg, len, &pos, ar, 2, &opt, &res->why) < 0)
		return -1;
	if (pos != len)
		return fail(&res->why, "trailing bytes after the response");
	if (res->rcode != NET_DNS_NOERROR)
		return 0;
	return collect(msg, len, start, an, asked->qtype, rr, max_rr, res);
}
