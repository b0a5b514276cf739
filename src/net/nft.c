/* SPDX-License-Identifier: MIT */
#include "net/nft.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int net_nft_apply(const char *link, const char *gw, const char *sbx, unsigned dns_port,
		  unsigned proxy_port, unsigned transparent_port, struct al_error **err)
{
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	char *rules;
	int r;

	if (!nft)
		return al_error_msg(err, ENOMEM, "nft_ctx_new");
	rules = xasprintf(
		"table inet airlock {\n"
		" chain input {\n"
		"  type filter hook input priority 0; policy drop;\n"
		"  iif lo accept\n"
		"  ct state established,related accept\n"
		"  iifname \"%1$s\" ip saddr %3$s ip daddr %2$s udp dport %4$u accept\n"
		"  iifname \"%1$s\" ip saddr %3$s ip daddr %2$s tcp dport { %4$u, %5$u, %6$u } "
		"ct state new accept\n"
		"  iifname \"%1$s\" limit rate 50/second log group 1 prefix \"input_dropped\"\n"
		" }\n"
		" chain forward {\n"
		"  type filter hook forward priority 0; policy drop;\n"
		"  limit rate 50/second log group 1 prefix \"forward_dropped\"\n"
		" }\n"
		" chain prerouting {\n"
		"  type nat hook prerouting priority -100; policy accept;\n"
		"  iifname \"%1$s\" meta nfproto ipv6 limit rate 50/second "
		"log group 1 prefix \"ipv6_dropped\"\n"
		"  iifname \"%1$s\" meta nfproto ipv6 drop\n"
		"  iifname \"%1$s\" ip saddr != %3$s log group 1 prefix \"spoofed_source\" drop\n"
		/* DNS over TLS: never, to anyone */
		"  iifname \"%1$s\" tcp dport 853 log group 1 prefix \"dot_dropped\" drop\n"
		"  iifname \"%1$s\" ip daddr != %2$s tcp dport 1-65535 redirect to :%6$u\n"
		/* Nothing else is routed (no forwarding here): say what was refused. */
		"  iifname \"%1$s\" ip daddr != %2$s meta l4proto udp limit rate 50/second "
		"log group 1 prefix \"udp_dropped\"\n"
		"  iifname \"%1$s\" ip daddr != %2$s meta l4proto icmp limit rate 50/second "
		"log group 1 prefix \"icmp_dropped\"\n"
		" }\n"
		" chain output {\n"
		"  type filter hook output priority 0; policy drop;\n"
		"  oif lo accept\n"
		"  ct state established,related accept\n"
		" }\n"
		"}\n",
		link, gw, sbx, dns_port, proxy_port, transparent_port);
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	r = nft_run_cmd_from_buffer(nft, rules);
	if (r != 0) {
		const char *e = nft_ctx_get_error_buffer(nft);
		al_error_msg(err, EINVAL, "nft ruleset for the gateway: %s", e && *e ? e : "failed");
	}
	free(rules);
	nft_ctx_free(nft);
	return r ? -EINVAL : 0;
}
