"""CONNECT + TLS: the ClientHello's SNI must equal the CONNECT host."""

ALLOW = ["--allow", "allowed.test"]
PX = ("100.96.0.1", 3128)
PT = {"proxy", "tls"}


def test_connect_allowed_sni_matches(run_net, net, world):
    r = run_net(ALLOW + net.probe("ctls", *PX, "allowed.test:443",
                                  "allowed.test", "/ok"))
    p = r.probe
    assert p.get("connect_status") == 200 and p.get("tls_ok"), p
    assert p.get("status") == 200, p
    assert [e["sni"] for e in world.events("allowed", "tls")] == ["allowed.test"]


def test_connect_allowed_sni_denied_refused(run_net, net, world, canary):
    r = run_net(ALLOW + net.probe("ctls", *PX, "allowed.test:443",
                                  "denied.test", f"/{canary}"))
    p = r.probe
    assert not p.get("tls_ok") and p.get("status") != 200, p
    assert world.events("denied") == [] and world.packets("denied") == 0
    assert not [e for e in world.events("allowed", "tls")
                if e.get("sni") == "denied.test"], world.events("allowed")
    assert canary not in world.sinks_text()
    assert net.find(r.egress, layer=PT, verdict="deny"), r.egress


def test_connect_no_sni_refused(run_net, net, world):
    r = run_net(ALLOW + net.probe("ctls", *PX, "allowed.test:443", "-"))
    p = r.probe
    assert not p.get("tls_ok") and p.get("status") != 200, p
    assert world.events("allowed", "http") == []
    assert net.find(r.egress, layer=PT, verdict="deny"), r.egress


def test_connect_non_tls_payload_on_443_refused(run_net, net, world, canary):
    """A CONNECT tunnel to :443 carrying something that is not TLS."""
    r = run_net(ALLOW + net.probe(
        "http", *PX,
        "CONNECT allowed.test:443 HTTP/1.1\\r\\nHost: allowed.test:443\\r\\n"
        f"\\r\\nSSH-2.0-x\\r\\n{canary}\\n"))
    assert canary not in world.sinks_text()
    # The gateway may have dialled allowed.test at CONNECT time, but no byte
    # of the non-TLS payload may reach it.
    assert not [e for e in world.events("allowed", "tls") if e["ok"]]
    assert world.events("allowed", "http") == []
    assert net.find(r.egress, layer=PT, verdict="deny"), r.egress
