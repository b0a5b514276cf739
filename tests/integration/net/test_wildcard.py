"""Name matching: `*.x.test` = any depth below, never the apex; lookalikes."""

WILD = ["--allow", "*.wild.test"]


def test_wildcard_any_depth(run_net, net, world):
    r = run_net(WILD + net.sh(
        f"{net.CURL} https://a.b.wild.test/deep; "
        f"{net.CURL} --noproxy '*' https://x.wild.test/one"))
    assert r.returncode == 0, (r.out, r.err)
    assert net.codes(r) == [(200, 200), (200, 0)], r.out
    paths = {e["path"] for e in world.events("allowed", "http")}
    assert {"/deep", "/one"} <= paths, paths
    assert net.find(r.egress, verdict="allow", name="a.b.wild.test")
    assert net.find(r.egress, verdict="allow", name="x.wild.test")


def test_wildcard_not_apex(run_net, net, world):
    r = run_net(WILD + net.sh(
        f"{net.CURL} https://wild.test/; {net.CURL} http://wild.test/; "
        "python3 /workspace/probe.py dns wild.test A udp 100.96.0.1"))
    codes = net.codes(r)
    assert codes[0][1] == 403, r.out       # CONNECT refused
    assert codes[1][0] == 403, r.out       # absolute-URI refused
    assert '"REFUSED"' in r.out, r.out
    assert "wild.test" not in world.dns_queries()
    assert world.events("allowed") == []
    assert net.find(r.egress, layer="proxy", verdict="deny", name="wild.test")
    assert net.find(r.egress, layer="dns", verdict="deny", name="wild.test")


def test_lookalike_names_denied(run_net, net, world):
    names = ["evilallowed.test", "allowed.test.evil.test", "evilwild.test",
             "wild.test.evil.test"]
    r = run_net(["--allow", "allowed.test"] + WILD + net.batch(
        *[["dns", n, "A", "udp", "100.96.0.1"] for n in names],
        *[["http", "100.96.0.1", 3128,
           f"GET http://{n}/ HTTP/1.1\\r\\nHost: {n}\\r\\n\\r\\n"]
          for n in names]))
    assert r.returncode == 0, r.err
    for p in r.probe[:4]:
        assert p.get("rcode") == "REFUSED", p
    for p in r.probe[4:]:
        assert p.get("status") == 403, p
    assert world.dns_queries() == []
    assert world.events("allowed") == [] and world.events("denied") == []
    for n in names:
        assert net.find(r.egress, verdict="deny", name=n), n
