/* SPDX-License-Identifier: MIT */
/* The gateway namespace's nftables ruleset (built with libnftnl; one atomic transaction). */
#ifndef AL_NET_NFT_H
#define AL_NET_NFT_H

#include <airlock/airlock.h>

/*
 * In the calling thread's network namespace (the gateway's): a `table inet
 * airlock` with policy drop everywhere. From the sandbox link only DNS and
 * the explicit proxy port on the gateway address are accepted, with the
 * sandbox's own source address (no spoofing); every other TCP connection is
 * redirected to the transparent proxy port; nothing is forwarded, no UDP but
 * DNS, no ICMP, no IPv6.
 */
int net_nft_apply(const char *link, const char *gw_addr, const char *sbx_addr,
		  unsigned dns_port, unsigned proxy_port, unsigned transparent_port,
		  struct al_error **err);

#endif
