"""The nftables ruleset in a gateway's namespace is exactly the documented one.

Gateways no longer build it: tools/gen_nft_batch.c builds the transaction once at build
time (tools/nft_build.c, with libnftnl) and every gateway sends those bytes
(src/host/nft.c). These read back what the kernel holds, with `nft list ruleset` inside
a live gateway's namespace, for both gateways (lite for a one-shot without rules, full
for a policy with rules), so a wrong or stale generated header cannot go unnoticed.
"""
import json
import os
import subprocess

import pytest

from .test_gateway_lite import RULES_POLICY, probe_gateway_of_run

EXPECTED = """
table inet airlock {
 chain input {
  type filter hook input priority filter; policy drop;
  iif "lo" accept
  ct state established,related accept
  iifname "gw0" ip saddr 100.96.0.2 ip daddr 100.96.0.1 udp dport 53 accept
  iifname "gw0" ip saddr 100.96.0.2 ip daddr 100.96.0.1 tcp dport 53 ct state new accept
  iifname "gw0" ip saddr 100.96.0.2 ip daddr 100.96.0.1 tcp dport 3128 ct state new accept
  iifname "gw0" ip saddr 100.96.0.2 ip daddr 100.96.0.1 tcp dport 3129 ct state new accept
  iifname "gw0" limit rate 50/second log prefix "input_dropped" group 1
 }
 chain forward {
  type filter hook forward priority filter; policy drop;
  limit rate 50/second log prefix "forward_dropped" group 1
 }
 chain prerouting {
  type nat hook prerouting priority dstnat; policy accept;
  iifname "gw0" meta nfproto ipv6 limit rate 50/second log prefix "ipv6_dropped" group 1
  iifname "gw0" meta nfproto ipv6 drop
  iifname "gw0" ip saddr != 100.96.0.2 log prefix "spoofed_source" group 1 drop
  iifname "gw0" tcp dport 853 log prefix "dot_dropped" group 1 drop
  iifname "gw0" ip daddr != 100.96.0.1 tcp dport >= 1 redirect to :3129
  iifname "gw0" ip daddr != 100.96.0.1 meta l4proto udp limit rate 50/second log prefix "udp_dropped" group 1
  iifname "gw0" ip daddr != 100.96.0.1 meta l4proto icmp limit rate 50/second log prefix "icmp_dropped" group 1
 }
 chain output {
  type filter hook output priority filter; policy drop;
  oif "lo" accept
  ct state established,related accept
 }
}
"""


def lines(text):
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def ruleset_of_a_live_gateway(args):
    """(exe, ruleset) of the gateway of `airlock run ARGS`: the ruleset of the network
    namespace the gateway holds open (its own: not the host's)."""
    host_ns = os.readlink("/proc/self/ns/net")

    def ruleset(pid, exe):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return None
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                target = os.readlink(path)
            except OSError:
                continue
            # its own namespace: made there ("net:[...]"), or opened from the one-shot pool
            if (target.startswith("net:") and target != host_ns) or target.endswith("/gw"):
                r = subprocess.run(["nsenter", f"--net={path}", "nft", "list", "ruleset"],
                                   capture_output=True, text=True)
                if r.returncode == 0 and "table inet airlock" in r.stdout:
                    return exe, r.stdout
        return None

    return probe_gateway_of_run(args, ruleset, seconds=3) or (None, None)


@pytest.mark.parametrize("kind", ["lite", "full"])
def test_a_gateway_holds_exactly_the_documented_ruleset(tmp_path, kind):
    if kind == "lite":
        args = ["--allow", "allowed.test"]
    else:
        pol = tmp_path / "policy.json"
        pol.write_text(json.dumps(RULES_POLICY))
        args = ["--policy", str(pol)]
    exe, listed = ruleset_of_a_live_gateway(args)
    assert listed, "no gateway namespace with the airlock table was found"
    assert exe.endswith("/airlock-gateway-lite" if kind == "lite" else "/airlock-gateway"), exe
    assert lines(listed) == lines(EXPECTED), listed
    # Nothing else: no second table, no other family.
    assert listed.count("table ") == 1, listed
