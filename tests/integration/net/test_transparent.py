"""Transparent path: any TCP from the sandbox reaches the gateway, which
judges SNI / Host, resolves the name itself and never trusts the original
destination address."""

ALLOW = ["--allow", "allowed.test"]
TRANS = {"transparent", "tls"}


def test_transparent_https_by_name(run_net, net, world):
    r = run_net(ALLOW + net.curl("--noproxy", "*", "https://allowed.test/t"))
    assert r.returncode == 0, (r.out, r.err)
    assert net.http_code(r) == 200, r.out
    assert [e["path"] for e in world.events("allowed", "http")] == ["/t"]
    assert net.find(r.egress, layer="dns", verdict="allow", name="allowed.test")
    assert net.find(r.egress, layer=TRANS, verdict="allow",
                    name="allowed.test", port=443), r.egress


def test_transparent_http_by_name(run_net, net, world):
    r = run_net(ALLOW + net.curl("--noproxy", "*", "http://allowed.test/h"))
    assert net.http_code(r) == 200, (r.out, r.err)
    hits = world.events("allowed", "http")
    assert [h["host"] for h in hits] == [["allowed.test"]], hits
    assert net.find(r.egress, layer=TRANS, verdict="allow",
                    name="allowed.test", port=80), r.egress


def test_direct_ip_connect_to_denied_host_blocked(run_net, net, world, canary):
    r = run_net(ALLOW + net.batch(
        ["tcp", "198.51.100.20", 4444, f"{canary}\\n"],
        ["tcp", "198.51.100.20", 22, f"SSH-2.0-{canary}\\r\\n"],
        ["http", "198.51.100.20", 80,
         f"GET /{canary} HTTP/1.1\\r\\nHost: 198.51.100.20\\r\\n\\r\\n"]))
    assert r.returncode == 0, r.err
    for p in r.probe:
        assert not p.get("recv") and p.get("status") in (None, 403, 400), p
    assert world.events("denied") == [], world.events("denied")
    assert world.packets("denied") == 0
    assert canary not in world.sinks_text()
    assert net.find(r.egress, layer=TRANS, verdict="deny"), r.egress


def test_transparent_denied_name_with_forged_resolution(run_net, net, world):
    r = run_net(ALLOW + net.sh(
        f"{net.CURL} --noproxy '*' --resolve denied.test:443:198.51.100.20 "
        "https://denied.test/; "
        f"{net.CURL} --noproxy '*' --resolve denied.test:80:198.51.100.20 "
        "http://denied.test/"))
    codes = net.codes(r)
    assert codes[0][0] == 0, r.out          # TLS refused
    assert codes[1][0] in (0, 403), r.out   # plain HTTP refused
    assert "denied-web" not in r.out
    assert world.events("denied") == [] and world.packets("denied") == 0
    assert "denied.test" not in world.dns_queries()
    assert len(net.find(r.egress, layer=TRANS, verdict="deny",
                        name="denied.test")) >= 2, r.egress


def test_transparent_tls_original_destination_not_trusted(run_net, net, world):
    """TLS to the denied host's IP with SNI allowed.test: the gateway dials
    allowed.test's own resolution, so the denied host sees nothing."""
    r = run_net(ALLOW + net.curl(
        "--noproxy", "*", "--resolve", "allowed.test:443:198.51.100.20",
        "https://allowed.test/redirected"))
    code = net.http_code(r)
    assert code in (200, 0), r.out
    if code == 200:
        assert "allowed-web" in r.out
        assert [e["path"] for e in world.events("allowed", "http")] == \
            ["/redirected"]
    assert world.events("denied") == [] and world.packets("denied") == 0
    lines = net.find(r.egress, layer=TRANS, name="allowed.test")
    assert lines, r.egress
    assert not any(e.get("verdict") == "allow" and
                   e.get("address") == "198.51.100.20" for e in lines), lines


def test_transparent_http_original_destination_not_trusted(run_net, net,
                                                           world):
    r = run_net(ALLOW + net.probe(
        "http", "198.51.100.20", 80,
        "GET /h HTTP/1.1\\r\\nHost: allowed.test\\r\\nConnection: close"
        "\\r\\n\\r\\n"))
    p = r.probe
    assert p.get("status") in (200, 403, None), p
    if p.get("status") == 200:
        assert "allowed-web" in p["body"], p
    assert world.events("denied") == [] and world.packets("denied") == 0


def test_transparent_allowed_ip_with_denied_sni(run_net, net, world):
    r = run_net(ALLOW + net.probe("tls", "203.0.113.10", 443, "denied.test"))
    p = r.probe
    assert not p.get("tls_ok") and p.get("status") != 200, p
    assert not [e for e in world.events("allowed", "tls")
                if e.get("sni") == "denied.test"]
    assert world.events("denied") == [] and world.packets("denied") == 0
    assert net.find(r.egress, layer=TRANS, verdict="deny", name="denied.test")


def test_transparent_no_sni_refused(run_net, net, world):
    r = run_net(ALLOW + net.probe("tls", "203.0.113.10", 443, "-"))
    p = r.probe
    assert not p.get("tls_ok") and p.get("status") != 200, p
    assert world.events("allowed", "http") == []
    assert net.find(r.egress, layer=TRANS, verdict="deny"), r.egress


def test_transparent_non_tls_non_http_refused(run_net, net, world, canary):
    r = run_net(ALLOW + net.probe("tcp", "203.0.113.10", 443,
                                  f"SSH-2.0-x\\r\\n{canary}\\n"))
    assert not r.probe.get("recv"), r.probe
    assert canary not in world.sinks_text()
    assert net.find(r.egress, layer=TRANS, verdict="deny"), r.egress
