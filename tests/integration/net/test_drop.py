"""Only TCP (to the gateway) and DNS to the gateway leave: other UDP, QUIC,
DoT, ICMP and IPv6 are dropped.  (No real address is ever used: the "public
resolver" is 198.51.100.53 inside the world, not 8.8.8.8.)"""

ALLOW = ["--allow", "allowed.test"]


def test_udp_to_the_internet_dropped(run_net, net, world, canary):
    r = run_net(ALLOW + net.batch(
        ["udp", "198.51.100.20", 4444, canary],
        ["udp", "198.51.100.20", 53, canary],
        ["udp", "203.0.113.10", 4444, canary],
        ["udp", "100.96.0.1", 4444, canary],
        ["udp", "100.96.0.1", 123, canary]))
    assert r.returncode == 0, r.err
    for p in r.probe:
        assert "recv" not in p, p
    assert canary not in world.sinks_text()
    c = world.counters()
    assert c["denied"] == 0 and c["allowed"] == 0, c
    assert net.find(r.egress, verdict="allow") == [], r.egress


def test_dns_to_other_resolvers_dropped(run_net, net, world, canary):
    name = f"{canary}.exfil.test"
    r = run_net(ALLOW + net.batch(
        ["dns", name, "A", "udp", "203.0.113.53"],
        ["dns", name, "A", "udp", "198.51.100.53"],
        ["dns", name, "A", "tcp", "198.51.100.53"],
        ["dns", "allowed.test", "A", "udp", "198.51.100.53"]))
    assert r.returncode == 0, r.err
    for p in r.probe:
        assert not p.get("answers"), p
    assert world.events("pubdns") == [] and world.packets("pubdns") == 0
    assert canary not in world.sinks_text()


def test_quic_udp_443_dropped(run_net, net, world, canary):
    r = run_net(ALLOW + net.batch(["udp", "203.0.113.10", 443, canary],
                                  ["udp", "198.51.100.20", 443, canary]))
    for p in r.probe:
        assert "recv" not in p, p
    assert world.events("allowed") == [] and world.events("denied") == []
    assert world.packets("allowed") == 0 and world.packets("denied") == 0


def test_dot_853_dropped(run_net, net, world, canary):
    r = run_net(ALLOW + net.batch(
        ["tls", "203.0.113.10", 853, "allowed.test"],
        ["tcp", "198.51.100.20", 853, canary],
        ["udp", "203.0.113.10", 853, canary]))
    tls, tcp, udp = r.probe
    assert not tls.get("tls_ok"), tls
    assert not tcp.get("recv"), tcp
    assert "recv" not in udp, udp
    assert world.events("allowed") == [] and world.events("denied") == [], \
        (world.events(), r.egress)
    assert canary not in world.sinks_text()
    assert net.find(r.egress, verdict="allow", port=853) == [], r.egress


def test_icmp_no_echo(run_net, net, world):
    r = run_net(ALLOW + net.batch(["icmp", "203.0.113.10"],
                                  ["icmp", "198.51.100.20"],
                                  ["icmp", "100.96.0.1"]))
    for p in r.probe:
        for kind in ("dgram", "raw"):
            assert "reply" not in p[kind], p
    assert "Operation not permitted" in r.probe[0]["raw"]["error"] or \
        "Permission" in r.probe[0]["raw"]["error"], r.probe
    c = world.counters()
    assert c["allowed"] == 0 and c["denied"] == 0, c


def test_ipv6_unreachable(run_net, net, world):
    r = run_net(ALLOW + net.batch(["tcp6", "2001:db8:a::10", 80],
                                  ["tcp6", "2001:db8:a::10", 443],
                                  ["udp", "2001:db8:a::10", 443, "x"],
                                  ["dns", "v6only.test", "AAAA", "udp",
                                   "100.96.0.1"]))
    t80, t443, udp, _ = r.probe
    assert not t80["connected"] and not t443["connected"], (t80, t443)
    assert "recv" not in udp, udp
    assert world.events("allowed") == []
