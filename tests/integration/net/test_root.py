"""Guest-root tier: root inside the sandbox has no CAP_NET_ADMIN/NET_RAW
over its netns; after trying to help itself the BLOCK cases still hold."""

ALLOW = ["--root", "--allow", "allowed.test"]

SELF_HELP = (
    "ip addr add 100.96.0.3/30 dev eth0 2>&1; echo rc=$?; "
    "ip addr add 198.51.100.99/32 dev eth0 2>&1; echo rc=$?; "
    "ip route replace default via 100.96.0.1 dev eth0 2>&1; echo rc=$?; "
    "ip route add 198.51.100.0/24 dev eth0 2>&1; echo rc=$?; "
    "ip link add x0 type dummy 2>&1; echo rc=$?; "
    "ip link set eth0 mtu 1400 2>&1; echo rc=$?; "
    "nft flush ruleset 2>&1; echo rc=$?; "
    "nft add table inet x 2>&1; echo rc=$?; "
    "echo 1 > /proc/sys/net/ipv4/ip_forward 2>&1; echo rc=$?; "
)


def test_root_cannot_change_network(run_net, net, world):
    r = run_net(ALLOW + net.sh(SELF_HELP +
                               "python3 /workspace/probe.py netinfo"))
    assert r.returncode == 0, r.err
    rcs = [ln for ln in r.out.splitlines() if ln.startswith("rc=")]
    assert len(rcs) == 9 and "rc=0" not in rcs, r.out
    info = r.probe
    eth0 = [a for a in info["addrs"] if a["ifname"] == "eth0"][0]
    assert [x["local"] for x in eth0["addr_info"]] == ["100.96.0.2"], eth0
    assert info["ifaces"] == ["eth0", "lo"]


def test_root_cannot_open_raw_sockets(run_net, net):
    r = run_net(ALLOW + net.probe("sockets"))
    for kind, res in r.probe.items():
        assert res != "ok", (kind, r.probe)
        assert "Operation not permitted" in res or "Permission" in res or \
            "not supported" in res.lower(), (kind, res)


def test_unprivileged_cannot_open_raw_sockets(run_net, net):
    r = run_net(["--allow", "allowed.test"] + net.probe("sockets"))
    assert all(v != "ok" for v in r.probe.values()), r.probe


def test_root_block_cases_still_hold(run_net, net, world, canary):
    jobs = json_jobs = [
        ["tcp", "198.51.100.20", 4444, canary],
        ["udp", "198.51.100.20", 4444, canary],
        ["dns", f"{canary}.exfil.test", "A", "udp", "203.0.113.53"],
        ["dns", f"{canary}.exfil.test", "A", "udp", "100.96.0.1"],
        ["icmp", "198.51.100.20"],
        ["ctls", "100.96.0.1", 3128, "allowed.test:443", "denied.test"],
        ["ctls", "100.96.0.1", 3128, "allowed.test:443", "allowed.test"],
    ]
    import json
    r = run_net(ALLOW + net.sh(
        SELF_HELP + "python3 /workspace/probe.py batch '" +
        json.dumps([[str(x) for x in j] for j in json_jobs]) + "'"))
    assert r.returncode == 0, r.err
    tcp, udp, dns_direct, dns_gw, icmp, sni, ok = r.probe
    assert not tcp.get("recv"), tcp
    assert "recv" not in udp, udp
    assert not dns_direct.get("answers"), dns_direct
    assert dns_gw.get("rcode") == "REFUSED", dns_gw
    assert "reply" not in icmp["raw"] and "reply" not in icmp["dgram"], icmp
    assert not sni.get("tls_ok"), sni
    assert ok.get("status") == 200, ok      # the allowed path still works
    assert canary not in world.sinks_text()
    assert world.events("denied") == [] and world.packets("denied") == 0
    assert len(jobs) == 7
