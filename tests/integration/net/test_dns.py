"""The gateway's resolver: allowed names are asked upstream by the gateway;
every other name is REFUSED and never leaves (no DNS tunnelling)."""

import pytest

ALLOW = ["--allow", "allowed.test"]
GW = "100.96.0.1"


def dns(name, qtype="A", transport="udp", server=GW):
    return ["dns", name, qtype, transport, server]


def test_allowed_a_and_aaaa_nodata(run_net, net, world):
    r = run_net(ALLOW + net.batch(dns("allowed.test"),
                                  dns("allowed.test", "AAAA")))
    assert r.returncode == 0, r.err
    a, aaaa = r.probe
    assert a["rcode"] == "NOERROR" and a["answers"] == [
        {"type": "A", "data": "203.0.113.10"}], a
    # No IPv6: AAAA is NODATA although upstream has 2001:db8:a::10.
    assert aaaa.get("rcode") == "NOERROR" and aaaa["answers"] == [], aaaa
    assert "allowed.test" in world.dns_queries(), "gateway did not ask upstream"
    assert net.find(r.egress, layer="dns", verdict="allow", name="allowed.test")


def test_dns_over_tcp(run_net, net, world):
    r = run_net(ALLOW + net.batch(dns("allowed.test", "A", "tcp"),
                                  dns("denied.test", "A", "tcp")))
    assert r.returncode == 0, r.err
    ok, bad = r.probe
    assert ok.get("answers") == [{"type": "A", "data": "203.0.113.10"}], ok
    assert bad.get("rcode") == "REFUSED" and not bad.get("answers"), bad
    assert "denied.test" not in world.dns_queries()


def test_denied_name_refused_never_upstream(run_net, net, world):
    r = run_net(ALLOW + net.probe(*dns("denied.test")))
    assert r.returncode == 0, r.err
    assert r.probe.get("rcode") == "REFUSED", r.probe
    assert world.dns_queries() == [], world.dns_queries()
    assert net.find(r.egress, layer="dns", verdict="deny", name="denied.test")


def test_no_dns_tunnelling(run_net, net, world, canary):
    name = f"{canary}.secret-data.exfil.test"
    r = run_net(ALLOW + net.batch(dns(name), dns(name, "TXT"),
                                  dns(name, "A", "tcp"),
                                  dns(f"{canary}.allowed.test")))
    assert r.returncode == 0, r.err
    for p in r.probe:
        assert p.get("rcode") == "REFUSED" and not p.get("answers"), p
    assert canary not in world.sinks_text(), world.dns_queries()
    assert net.find(r.egress, layer="dns", verdict="deny", name=name)


@pytest.mark.parametrize("qtype", ["TXT", "ANY", "HTTPS", "SVCB", "MX"])
def test_other_qtypes_on_allowed_name(run_net, net, world, qtype):
    r = run_net(ALLOW + net.probe(*dns("allowed.test", qtype)))
    assert r.returncode == 0, r.err
    p = r.probe
    assert p.get("rcode") in ("REFUSED", "NOERROR"), p
    assert p.get("answers") == [], p
    assert not any(e.get("qtype") == qtype for e in world.events("dns")), \
        f"{qtype} was forwarded upstream"


def test_case_insensitive_name(run_net, net, world):
    r = run_net(ALLOW + net.probe(*dns("AlLoWeD.TeSt")))
    assert r.returncode == 0, r.err
    assert r.probe.get("answers") == [{"type": "A", "data": "203.0.113.10"}], \
        r.probe


def test_malformed_name_under_allowed_wildcard(run_net, net, world):
    """A NUL byte in a label under an allowed wildcard: refused, not sent."""
    r = run_net(["--allow", "*.wild.test"] + net.batch(
        dns("evil\\x00.wild.test"), dns("evil\\x00x.allowed.test.wild.test"),
        dns("ok.wild.test")))
    assert r.returncode == 0, r.err
    nul1, nul2, ok = r.probe
    assert ok.get("answers") == [{"type": "A", "data": "203.0.113.10"}], ok
    for p in (nul1, nul2):
        assert not p.get("answers"), p
        assert p.get("rcode") in ("REFUSED", "FORMERR", "NXDOMAIN"), p
    assert not any("evil" in q for q in world.dns_queries()), \
        world.dns_queries()


@pytest.mark.parametrize("name", ["rebind.test", "meta.test", "private.test"])
def test_forbidden_answers_stripped(run_net, net, world, name):
    r = run_net(["--allow", name] + net.probe(*dns(name)))
    assert r.returncode == 0, r.err
    p = r.probe
    assert not p.get("answers"), f"forbidden address passed through: {p}"
    assert p.get("rcode") in ("NOERROR", "NXDOMAIN", "REFUSED", "SERVFAIL"), p
    assert net.find(r.egress, verdict="deny", name=name), r.egress
