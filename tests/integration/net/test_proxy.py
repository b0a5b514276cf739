"""The explicit proxy (HTTPS_PROXY / HTTP_PROXY = 100.96.0.1:3128)."""

import pytest

ALLOW = ["--allow", "allowed.test"]
PX = ("100.96.0.1", 3128)
LEAKS = ("203.0.113.53", "192.0.2.", "alnet-", "DENIED-HOST-DATA")


def raw(req):
    return ["http", *PX, req]


def test_https_via_proxy_allowed(run_net, net, world, canary):
    r = run_net(ALLOW + net.curl(f"https://allowed.test/{canary}"))
    assert r.returncode == 0, (r.out, r.err)
    assert net.codes(r) == [(200, 200)], r.out
    assert "allowed-web proto=https host=allowed.test" in r.out
    hits = world.events("allowed", "http")
    assert [h["path"] for h in hits] == [f"/{canary}"], hits
    assert [e["sni"] for e in world.events("allowed", "tls")] == ["allowed.test"]
    assert canary not in world.sinks_text(exclude=("allowed",))
    lines = net.find(r.egress, layer=net.CONNECT, verdict="allow",
                     name="allowed.test", port=443)
    assert lines, r.egress
    assert max(e["bytes_in"] for e in lines) > 0, lines
    assert max(e["bytes_out"] for e in lines) > 0, lines
    assert any(e.get("address") == "203.0.113.10" for e in lines), lines


def test_http_via_proxy_allowed(run_net, net, world):
    r = run_net(ALLOW + net.curl("http://allowed.test/plain"))
    assert r.returncode == 0, (r.out, r.err)
    assert net.http_code(r) == 200, r.out
    hits = world.events("allowed", "http")
    assert len(hits) == 1 and hits[0]["host"] == ["allowed.test"], hits
    assert hits[0]["proto"] == "http"
    assert net.find(r.egress, layer="proxy", verdict="allow",
                    name="allowed.test", port=80)


def test_denied_name_403_never_reached(run_net, net, world):
    r = run_net(ALLOW + net.sh(
        f"{net.CURL} https://denied.test/; {net.CURL} http://denied.test/x"))
    codes = net.codes(r)
    assert codes[0][1] == 403, r.out
    assert codes[1][0] == 403, r.out
    body = r.out.split("HTTPCODE=")[1]
    assert len(body) < 1024, body
    for leak in LEAKS:
        assert leak not in r.out, f"403 body leaks {leak!r}: {r.out}"
    assert world.events("denied") == [] and world.packets("denied") == 0
    assert "denied.test" not in world.dns_queries()
    d = net.find(r.egress, layer="proxy", verdict="deny", name="denied.test")
    assert len(d) >= 2, r.egress
    assert all(isinstance(e["reason"], str) and e["reason"] for e in d)


def test_connect_denied_authority_with_allowed_sni(run_net, net, world):
    r = run_net(ALLOW + net.probe("ctls", *PX, "denied.test:443",
                                  "allowed.test"))
    assert r.probe["connect_status"] == 403, r.probe
    assert world.events("denied") == [] and world.events("allowed") == []
    assert net.find(r.egress, layer="proxy", verdict="deny", name="denied.test")


@pytest.mark.parametrize("target", ["198.51.100.20", "203.0.113.10"])
def test_ip_literal_via_proxy_403(run_net, net, world, target):
    """An IP literal is refused unless a CIDR covers it, even the allowed
    host's own address."""
    r = run_net(ALLOW + net.batch(
        raw(f"GET http://{target}/ HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n"),
        ["ctls", *PX, f"{target}:443", "allowed.test"]))
    plain, tunnel = r.probe
    assert plain.get("status") == 403, plain
    assert tunnel.get("connect_status") == 403, tunnel
    assert world.events("denied") == [] and world.events("allowed") == []
    assert world.packets("denied") == 0
    d = [e for e in net.find(r.egress, layer="proxy", verdict="deny")
         if target in (e.get("address"), e.get("name"))]
    assert len(d) >= 2, r.egress


def test_ip_literal_allowed_by_cidr(run_net, net, world):
    r = run_net(ALLOW + ["--allow-cidr", "198.51.100.0/24"] + net.sh(
        f"{net.CURL} http://198.51.100.20/p; "
        f"{net.CURL} http://198.51.100.130/q"))
    assert [c[0] for c in net.codes(r)] == [200, 200], r.out
    assert "denied-web" in r.out and "cidr-web" in r.out
    assert net.find(r.egress, layer="proxy", verdict="allow",
                    address="198.51.100.20")
    assert net.find(r.egress, layer="proxy", verdict="allow",
                    address="198.51.100.130")


def test_deny_cidr_wins_over_allow_cidr(run_net, net, world):
    r = run_net(["--allow-cidr", "198.51.100.0/24", "--deny-cidr",
                 "198.51.100.0/26"] + net.sh(
        f"{net.CURL} http://198.51.100.20/; "
        f"{net.CURL} --noproxy '*' http://198.51.100.20/; "
        f"{net.CURL} http://198.51.100.130/"))
    codes = [c[0] for c in net.codes(r)]
    assert codes[0] == 403 and codes[1] != 200 and codes[2] == 200, r.out
    assert world.events("denied") == [] and world.packets("denied") == 0
    assert net.find(r.egress, verdict="deny", address="198.51.100.20") or \
        net.find(r.egress, verdict="deny", name="198.51.100.20")


def test_host_rebuilt_from_checked_authority(run_net, net, world, canary):
    r = run_net(ALLOW + net.probe(*raw(
        f"GET http://allowed.test/{canary} HTTP/1.1\\r\\nHost: denied.test"
        "\\r\\nConnection: close\\r\\n\\r\\n")))
    p = r.probe
    assert p.get("status") in (200, 400), p
    if p["status"] == 200:
        hits = world.events("allowed", "http")
        assert hits and hits[0]["host"] == ["allowed.test"], hits
    assert world.events("denied") == []
    assert canary not in world.sinks_text(exclude=("allowed",))


def test_absolute_uri_denied_host_header_allowed(run_net, net, world, canary):
    r = run_net(ALLOW + net.probe(*raw(
        f"GET http://denied.test/{canary} HTTP/1.1\\r\\nHost: allowed.test"
        "\\r\\n\\r\\n")))
    # 403 (denied name) or 400 (Host differs from the authority): refused.
    assert r.probe.get("status") in (400, 403), r.probe
    assert canary not in world.sinks_text()
    assert world.packets("denied") == 0
    assert net.find(r.egress, layer="proxy", verdict="deny"), r.egress


@pytest.mark.parametrize("url", ["http://allowed.test@denied.test/",
                                 "http://denied.test%2eallowed.test/",
                                 "http://allowed.test:80.denied.test/"],
                         ids=["userinfo", "pct-dot", "port-trick"])
def test_authority_tricks(run_net, net, world, url):
    r = run_net(ALLOW + net.probe(*raw(
        f"GET {url} HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n")))
    assert r.probe.get("status") in (400, 403), r.probe
    assert world.events("denied") == [] and world.events("allowed") == []
    assert world.packets("denied") == 0
    assert net.find(r.egress, layer="proxy", verdict="deny"), r.egress
