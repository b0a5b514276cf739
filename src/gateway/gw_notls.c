/* SPDX-License-Identifier: MIT */
/*
 * airlock-gateway-lite: the gateway without TLS termination, for policies that cannot
 * have per-request rules (a one-shot `airlock run` whose policy has none: it never
 * changes). The same sources but gw_mitm.c and ca.c, so no OpenSSL: its exec is cheaper
 * (OpenSSL's ~19,500 load-time relocations and CPU probe are most of a full gateway's
 * start-up; docs/performance.md). A policy with rules is refused here, as a gateway
 * without a CA directory refuses it: the caller chose the wrong binary.
 */
#include "gateway/gw.h"
#include "gateway/ca.h"
#include "common/error.h"

#include <errno.h>

int gw_tls_ensure(struct net_gateway *g, const struct net_policy *p, struct al_error **err)
{
	if (!net_policy_has_rules(p))
		return 0;
	return al_error_msg(err, ENOTSUP,
			    "per-request rules need TLS termination, which "
			    "airlock-gateway-lite does not have (airlock-gateway has)");
}

void gw_tls_policy_changed(struct net_gateway *g)
{
}

void gw_tls_free(struct net_gateway *g)
{
}

/* Unreachable: with no rules no connection is terminated. Refused, never spliced. */
void gw_mitm_serve(struct gw_conn *k, const struct net_rules *rules)
{
	gw_conn_deny(k, "tls_no_ca", k->name, 0);
}

const char *net_ca_cert_pem(const struct net_ca *ca)
{
	return NULL;
}
