/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for src/net/dns_msg.c.
 *
 * Every input is tried as (1) a TCP frame, (2) a sandbox query and (3) an
 * upstream response to the question it starts with. Round trips: a parsed
 * query's REFUSED / NXDOMAIN / NODATA replies and an A/AAAA answer built from
 * input bytes must parse back as upstream responses to that very question,
 * with the rcode and addresses that were put in; a refused query that can be
 * answered gets a reply that parses as a response too (or is a bare header).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *	src/net/dns_msg.c tests/fuzz/fuzz_dns.c -o fuzz_dns
 *   ./fuzz_dns tests/fuzz/corpus/dns
 */
#include "net/dns_msg.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

static unsigned touch(const void *p, size_t len)
{
	const volatile uint8_t *q = p;
	unsigned sum = 0;

	for (size_t i = 0; i < len; i++)
		sum += q[i];
	return sum;
}

static void check_response(const uint8_t *msg, size_t len, const struct net_dns_query *q, int rcode,
			   size_t n_addr)
{
	struct net_dns_asked asked = {q->id, q->qname_wire, q->qname_wire_len, q->qtype};
	struct net_dns_response res;
	struct net_dns_rr rr[64];

	must(net_dns_parse_response(msg, len, &asked, rr, 64, &res) == 0);
	must(res.rcode == rcode && strlen(res.final_name) == q->qname_len);
	must(q->qtype == NET_DNS_A || q->qtype == NET_DNS_AAAA || res.n_addr == 0);
	if (!res.tc && (q->qtype == NET_DNS_A || q->qtype == NET_DNS_AAAA))
		must(res.n_addr == n_addr);
}

static void round_trips(const uint8_t *data, size_t size, const struct net_dns_query *q)
{
	static const int rcodes[] = {NET_DNS_REFUSED, NET_DNS_NXDOMAIN, NET_DNS_NOERROR};
	struct net_dns_addr a[40];
	uint8_t out[4096];
	size_t n = size % 41, limit = net_dns_reply_limit(q, size & 1);
	ssize_t len;

	for (size_t i = 0; i < sizeof(rcodes) / sizeof(rcodes[0]); i++) {
		len = net_dns_build_reply(q, rcodes[i], out, sizeof(out));
		must(len > 0 && (size_t)len <= 12 + q->question_len + 11);
		check_response(out, (size_t)len, q, rcodes[i], 0);
	}
	for (size_t i = 0; i < n && i < 40; i++) {
		a[i].type = q->qtype == NET_DNS_AAAA ? NET_DNS_AAAA : NET_DNS_A;
		a[i].ttl = (uint32_t)(i * 2654435761u);
		memset(a[i].addr, data[i % size], 16);
	}
	n = n > 40 ? 40 : n;
	len = net_dns_build_answer(q, a, n, limit, out, sizeof(out));
	must(len > 0 && (size_t)len <= limit);
	size_t an = (size_t)(out[6] << 8 | out[7]);
	must(an <= n && (an == n || (out[2] & 0x02)));
	check_response(out, (size_t)len, q, NET_DNS_NOERROR, an);
}

static void as_upstream(const uint8_t *data, size_t size)
{
	struct net_dns_response res;
	struct net_dns_rr rr[16];
	struct net_dns_asked asked;
	char text[NET_DNS_MAX_TEXT_NAME + 1];
	const uint8_t *z;
	size_t next;

	if (size < 13 || !(z = memchr(data + 12, 0, size - 12 < 256 ? size - 12 : 256)))
		return;
	asked = (struct net_dns_asked){(uint16_t)(data[0] << 8 | data[1]), data + 12,
				       (size_t)(z - data - 12) + 1, NET_DNS_A};
	if (size > (size_t)(z - data) + 2)
		asked.qtype = (uint16_t)(z[1] << 8 | z[2]);
	if (net_dns_parse_response(data, size, &asked, rr, 16, &res) != 0) {
		must(res.why != NULL);
		return;
	}
	must(res.n_rr <= 16 && res.n_addr <= res.n_rr);
	for (size_t i = 0; i < res.n_rr; i++) {
		must(rr[i].type == NET_DNS_CNAME || rr[i].type == asked.qtype);
		must(rr[i].ttl <= INT32_MAX);
		must(net_dns_read_name(data, size, rr[i].owner_off, text, &next) >= 0);
		if (rr[i].type == NET_DNS_CNAME)
			must(net_dns_read_name(data, size, rr[i].target_off, text, &next) >= 0);
		touch(text, strlen(text));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct net_dns_query q;
	const uint8_t *msg;
	size_t mlen, flen;
	uint8_t out[600];
	int r;

	r = net_dns_tcp_frame(data, size, &msg, &mlen, &flen);
	must(r == 0 || r == -1 || r == -2);
	if (r == 0)
		must(mlen + 2 == flen && flen <= size && msg == data + 2);
	if (r == -2)
		must(flen > size);
	as_upstream(data, size);
	r = net_dns_parse_query(data, size, &q);
	if (r < 0) {
		must(r == -1 && q.why != NULL && q.rcode != NET_DNS_NOERROR);
		if (q.answerable) {
			ssize_t len = net_dns_build_reply(&q, q.rcode, out, sizeof(out));
			must(len >= 12 && (out[2] & 0x80));
			if (q.qname_wire && q.qclass == NET_DNS_CLASS_IN)
				check_response(out, (size_t)len, &q, q.rcode, 0);
			else if (q.qname_wire) /* echoed verbatim, class and all */
				must(memcmp(out + 12, data + 12, q.question_len) == 0);
		}
		return 0;
	}
	must(q.qclass == NET_DNS_CLASS_IN && q.qname_wire == data + 12);
	must(q.qname_wire_len <= NET_DNS_MAX_WIRE_NAME && strlen(q.qname) == q.qname_len);
	must(q.qname_len <= NET_DNS_MAX_TEXT_NAME && !memchr(q.qname, 0, q.qname_len));
	must(net_dns_parse_query(data, size, &q) == 0); /* deterministic */
	round_trips(data, size, &q);
	return 0;
}
