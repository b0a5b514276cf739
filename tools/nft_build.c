/* SPDX-License-Identifier: MIT */
/*
 * The gateway namespace's ruleset as one nf_tables transaction, built with libnftnl AT BUILD
 * TIME: tools/gen_nft_batch.c runs this and writes the netlink bytes into gw_nft_batch.h,
 * which src/host/nft.c sends as they are. The ruleset depends on nothing but the constants
 * of gateway/gateway.h, so every gateway's is the same; building it in each gateway cost
 * libnftnl and libmnl at run time (libmnl has no static archive on Debian, which kept the
 * gateways from being static musl binaries), and libnftables before them ~1.3 ms per start.
 * The rules, in nft syntax (what `nft list ruleset` shows in the gateway's namespace):
 *
 * table inet airlock {
 *  chain input {
 *   type filter hook input priority 0; policy drop;
 *   iif lo accept
 *   ct state established,related accept
 *   iifname LINK ip saddr SBX ip daddr GW udp dport DNS accept
 *   iifname LINK ip saddr SBX ip daddr GW tcp dport { DNS, PROXY, TPROXY } ct state new accept
 *   iifname LINK limit rate 50/second log group 1 prefix "input_dropped"
 *  }
 *  chain forward {
 *   type filter hook forward priority 0; policy drop;
 *   limit rate 50/second log group 1 prefix "forward_dropped"
 *  }
 *  chain prerouting {
 *   type nat hook prerouting priority -100; policy accept;
 *   iifname LINK meta nfproto ipv6 limit rate 50/second log group 1 prefix "ipv6_dropped"
 *   iifname LINK meta nfproto ipv6 drop
 *   iifname LINK ip saddr != SBX log group 1 prefix "spoofed_source" drop
 *   iifname LINK tcp dport 853 log group 1 prefix "dot_dropped" drop      (DNS over TLS)
 *   iifname LINK ip daddr != GW tcp dport 1-65535 redirect to :TPROXY
 *   iifname LINK ip daddr != GW meta l4proto udp limit rate 50/second log ... "udp_dropped"
 *   iifname LINK ip daddr != GW meta l4proto icmp limit rate 50/second log ... "icmp_dropped"
 *  }
 *  chain output {
 *   type filter hook output priority 0; policy drop;
 *   oif lo accept
 *   ct state established,related accept
 *  }
 * }
 *
 * The set { DNS, PROXY, TPROXY } is three rules here, "tcp dport 1-65535" is
 * "tcp dport >= 1", and what nft adds implicitly is explicit: "ip ..." matches IPv4 only
 * (meta nfproto), "tcp/udp dport" checks the protocol first. `nft list ruleset` in the
 * gateway's namespace shows the result in nft's syntax.
 */
#include "host/nft.h"
#include "net/contract.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE "airlock"
#define LOG_GROUP 1
#define LOG_RATE 50 /* per second: drops are logged, floods are not */
#define IP_SADDR 12 /* offsets in the IPv4 header */
#define IP_DADDR 16
#define TH_DPORT 2 /* in the TCP/UDP header */
#define CT_EST_REL (NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED))
#define CT_NEW NF_CT_STATE_BIT(IP_CT_NEW)

/* One rule being built; any allocation failure is remembered and reported at the end. */
struct rb {
	struct nftnl_rule *r;
	bool oom;
};

static void add(struct rb *b, struct nftnl_expr *e)
{
	if (!e) {
		b->oom = true;
		return;
	}
	nftnl_rule_add_expr(b->r, e);
}

static void meta(struct rb *b, uint32_t key)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");

	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	}
	add(b, e);
}

static void cmp(struct rb *b, enum nft_cmp_ops op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");

	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
		nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	}
	add(b, e);
}

static void payload(struct rb *b, enum nft_payload_bases base, uint32_t off, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");

	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	}
	add(b, e);
}

static void verdict(struct rb *b, int v)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");

	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)v);
	}
	add(b, e);
}

/* iifname/oif/iif and friends: meta KEY == data */
static void meta_eq(struct rb *b, uint32_t key, const void *data, uint32_t len)
{
	meta(b, key);
	cmp(b, NFT_CMP_EQ, data, len);
}

static void iifname(struct rb *b, const char *link)
{
	char name[IFNAMSIZ] = {0};

	snprintf(name, sizeof(name), "%s", link);
	meta_eq(b, NFT_META_IIFNAME, name, IFNAMSIZ);
}

static void ipv4(struct rb *b)
{
	uint8_t v4 = NFPROTO_IPV4;

	meta_eq(b, NFT_META_NFPROTO, &v4, 1);
}

/* ip saddr/daddr (==, or != with op NFT_CMP_NEQ); IPv4 only, as nft's "ip" implies. */
static void ip_addr(struct rb *b, uint32_t off, enum nft_cmp_ops op, struct in_addr a)
{
	payload(b, NFT_PAYLOAD_NETWORK_HEADER, off, 4);
	cmp(b, op, &a.s_addr, 4);
}

static void l4proto(struct rb *b, uint8_t proto)
{
	meta_eq(b, NFT_META_L4PROTO, &proto, 1);
}

/* PROTO dport OP port (network order, so >= compares as numbers) */
static void dport(struct rb *b, uint8_t proto, enum nft_cmp_ops op, unsigned port)
{
	uint16_t p = htons((uint16_t)port);

	l4proto(b, proto);
	payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, TH_DPORT, 2);
	cmp(b, op, &p, 2);
}

/* ct state has any of mask */
static void ct_state(struct rb *b, uint32_t mask)
{
	struct nftnl_expr *ct = nftnl_expr_alloc("ct"), *bw = nftnl_expr_alloc("bitwise");
	uint32_t zero = 0;

	if (ct) {
		nftnl_expr_set_u32(ct, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
		nftnl_expr_set_u32(ct, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	}
	add(b, ct);
	if (bw) {
		nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
		nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
		nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_LEN, 4);
		nftnl_expr_set(bw, NFTNL_EXPR_BITWISE_MASK, &mask, 4);
		nftnl_expr_set(bw, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
	}
	add(b, bw);
	cmp(b, NFT_CMP_NEQ, &zero, 4);
}

/* limit rate LOG_RATE/second (burst 5, nft's default) */
static void limit(struct rb *b)
{
	struct nftnl_expr *e = nftnl_expr_alloc("limit");

	if (e) {
		nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_RATE, LOG_RATE);
		nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_UNIT, 1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_BURST, 5);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_FLAGS, 0);
	}
	add(b, e);
}

/* log group LOG_GROUP prefix "prefix" (read by the gateway's NFLOG listener) */
static void nflog(struct rb *b, const char *prefix)
{
	struct nftnl_expr *e = nftnl_expr_alloc("log");

	if (e) {
		nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, LOG_GROUP);
		nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
	}
	add(b, e);
}

/* redirect to :port (the transparent listener) */
static void redirect(struct rb *b, unsigned port)
{
	struct nftnl_expr *imm = nftnl_expr_alloc("immediate"), *r = nftnl_expr_alloc("redir");
	uint16_t p = htons((uint16_t)port);

	if (imm) {
		nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
		nftnl_expr_set(imm, NFTNL_EXPR_IMM_DATA, &p, 2);
	}
	add(b, imm);
	if (r)
		nftnl_expr_set_u32(r, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
	add(b, r);
}

/* The transaction being built. */
struct tx {
	struct mnl_nlmsg_batch *batch;
	uint32_t seq;
	bool oom;
};

static struct rb rule(const char *chain)
{
	struct rb b = {.r = nftnl_rule_alloc()};

	if (!b.r) {
		b.oom = true;
		return b;
	}
	nftnl_rule_set_str(b.r, NFTNL_RULE_TABLE, TABLE);
	nftnl_rule_set_str(b.r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_set_u32(b.r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	return b;
}

/* The header of the batch's next message (its payload follows, then mnl_nlmsg_batch_next). */
static struct nlmsghdr *msg_hdr(struct tx *t, uint16_t type, uint16_t flags)
{
	return nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(t->batch), type, NFPROTO_INET,
				     flags | NLM_F_CREATE | NLM_F_ACK, t->seq++);
}

static void put_rule(struct tx *t, struct rb *b)
{
	if (!b->oom) {
		nftnl_rule_nlmsg_build_payload(msg_hdr(t, NFT_MSG_NEWRULE, NLM_F_APPEND), b->r);
		mnl_nlmsg_batch_next(t->batch);
	}
	t->oom |= b->oom;
	if (b->r)
		nftnl_rule_free(b->r);
}

static void put_chain(struct tx *t, const char *name, const char *type, uint32_t hook, int prio,
		      uint32_t policy)
{
	struct nftnl_chain *c = nftnl_chain_alloc();

	if (!c) {
		t->oom = true;
		return;
	}
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, policy);
	nftnl_chain_nlmsg_build_payload(msg_hdr(t, NFT_MSG_NEWCHAIN, 0), c);
	mnl_nlmsg_batch_next(t->batch);
	nftnl_chain_free(c);
}

static void put_table(struct tx *t)
{
	struct nftnl_table *tb = nftnl_table_alloc();

	if (!tb) {
		t->oom = true;
		return;
	}
	nftnl_table_set_str(tb, NFTNL_TABLE_NAME, TABLE);
	nftnl_table_nlmsg_build_payload(msg_hdr(t, NFT_MSG_NEWTABLE, 0), tb);
	mnl_nlmsg_batch_next(t->batch);
	nftnl_table_free(tb);
}

/* "iif lo accept" (or oif, by key) and "ct state established,related accept" */
static void loopback_and_replies(struct tx *t, const char *chain, uint32_t key)
{
	const uint32_t lo = 1; /* the loopback device is always ifindex 1 in a namespace */
	struct rb b = rule(chain);

	meta_eq(&b, key, &lo, 4);
	verdict(&b, NF_ACCEPT);
	put_rule(t, &b);
	b = rule(chain);
	ct_state(&b, CT_EST_REL);
	verdict(&b, NF_ACCEPT);
	put_rule(t, &b);
}

static void build(struct tx *t, const char *link, struct in_addr gw, struct in_addr sbx,
		  unsigned dns, unsigned proxy, unsigned tproxy)
{
	const unsigned accepted[] = {dns, proxy, tproxy};
	static const struct {
		uint8_t proto;
		const char *prefix;
	} refused[] = {{IPPROTO_UDP, "udp_dropped"}, {IPPROTO_ICMP, "icmp_dropped"}};
	const uint8_t v6 = NFPROTO_IPV6;
	struct rb b;

	put_table(t);

	put_chain(t, "input", "filter", NF_INET_LOCAL_IN, 0, NF_DROP);
	loopback_and_replies(t, "input", NFT_META_IIF);
	b = rule("input"); /* the sandbox's DNS queries to the gateway's resolver */
	iifname(&b, link);
	ipv4(&b);
	ip_addr(&b, IP_SADDR, NFT_CMP_EQ, sbx);
	ip_addr(&b, IP_DADDR, NFT_CMP_EQ, gw);
	dport(&b, IPPROTO_UDP, NFT_CMP_EQ, dns);
	verdict(&b, NF_ACCEPT);
	put_rule(t, &b);
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		b = rule(
		    "input"); /* new TCP to the resolver, the proxy, the transparent listener */
		iifname(&b, link);
		ipv4(&b);
		ip_addr(&b, IP_SADDR, NFT_CMP_EQ, sbx);
		ip_addr(&b, IP_DADDR, NFT_CMP_EQ, gw);
		dport(&b, IPPROTO_TCP, NFT_CMP_EQ, accepted[i]);
		ct_state(&b, CT_NEW);
		verdict(&b, NF_ACCEPT);
		put_rule(t, &b);
	}
	b = rule("input"); /* the rest from the sandbox: logged (rate-limited), then dropped */
	iifname(&b, link);
	limit(&b);
	nflog(&b, "input_dropped");
	put_rule(t, &b);

	put_chain(t, "forward", "filter", NF_INET_FORWARD, 0, NF_DROP);
	b = rule("forward");
	limit(&b);
	nflog(&b, "forward_dropped");
	put_rule(t, &b);

	put_chain(t, "prerouting", "nat", NF_INET_PRE_ROUTING, -100, NF_ACCEPT);
	b = rule("prerouting"); /* IPv6 from the sandbox: logged, then dropped */
	iifname(&b, link);
	meta_eq(&b, NFT_META_NFPROTO, &v6, 1);
	limit(&b);
	nflog(&b, "ipv6_dropped");
	put_rule(t, &b);
	b = rule("prerouting");
	iifname(&b, link);
	meta_eq(&b, NFT_META_NFPROTO, &v6, 1);
	verdict(&b, NF_DROP);
	put_rule(t, &b);
	b = rule("prerouting"); /* spoofed sources */
	iifname(&b, link);
	ipv4(&b);
	ip_addr(&b, IP_SADDR, NFT_CMP_NEQ, sbx);
	nflog(&b, "spoofed_source");
	verdict(&b, NF_DROP);
	put_rule(t, &b);
	b = rule("prerouting"); /* DNS over TLS: never, to anyone */
	iifname(&b, link);
	dport(&b, IPPROTO_TCP, NFT_CMP_EQ, 853);
	nflog(&b, "dot_dropped");
	verdict(&b, NF_DROP);
	put_rule(t, &b);
	b = rule("prerouting"); /* any other TCP: to the transparent listener, which judges it */
	iifname(&b, link);
	ipv4(&b);
	ip_addr(&b, IP_DADDR, NFT_CMP_NEQ, gw);
	dport(&b, IPPROTO_TCP, NFT_CMP_GTE, 1);
	redirect(&b, tproxy);
	put_rule(t, &b);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		b = rule("prerouting"); /* nothing else is routed: say what was refused */
		iifname(&b, link);
		ipv4(&b);
		ip_addr(&b, IP_DADDR, NFT_CMP_NEQ, gw);
		l4proto(&b, refused[i].proto);
		limit(&b);
		nflog(&b, refused[i].prefix);
		put_rule(t, &b);
	}

	put_chain(t, "output", "filter", NF_INET_LOCAL_OUT, 0, NF_DROP);
	loopback_and_replies(t, "output", NFT_META_OIF);
}

int net_nft_build(void *buf, size_t size, uint32_t first_seq, size_t *len, uint32_t *n_acks)
{
	struct in_addr gw, sbx;
	struct tx t = {.seq = first_seq};
	uint32_t first;

	if (inet_pton(AF_INET, NET_GW_ADDR, &gw) != 1 ||
	    inet_pton(AF_INET, NET_SBX_ADDR, &sbx) != 1)
		return -EINVAL;
	t.batch = mnl_nlmsg_batch_start(buf, size);
	if (!t.batch)
		return -ENOMEM;
	nftnl_batch_begin(mnl_nlmsg_batch_current(t.batch), t.seq++);
	mnl_nlmsg_batch_next(t.batch);
	first = t.seq;
	build(&t, NET_GW_LINK, gw, sbx, NET_DNS_PORT, NET_PROXY_PORT, NET_TPROXY_PORT);
	nftnl_batch_end(mnl_nlmsg_batch_current(t.batch), t.seq++);
	if (!mnl_nlmsg_batch_next(t.batch) || t.oom) { /* false: the buffer is full */
		mnl_nlmsg_batch_stop(t.batch);
		return -ENOMEM;
	}
	*len = mnl_nlmsg_batch_size(t.batch);
	*n_acks = t.seq - 1 - first;
	mnl_nlmsg_batch_stop(t.batch);
	return 0;
}
