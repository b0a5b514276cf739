"""Forbidden destinations: loopback, metadata, private ranges, the gateway,
and every numeric spelling -- through names, literals, and allow-all."""

import pytest

PX = ("100.96.0.1", 3128)
TRANS = {"transparent", "tls"}
DECOYS = ("loop", "meta", "lan")


def _no_decoy_hits(world):
    for d in DECOYS:
        assert world.events(d) == [], (d, world.events(d))
        assert world.packets(d) == 0, (d, world.counters())


@pytest.mark.parametrize("spelling", ["2130706433", "0x7f.1", "127.1",
                                      "0177.0.0.1", "127.000.0.1",
                                      "[::ffff:127.0.0.1]", "2852039166"])
def test_numeric_spellings_refused(run_net, net, world, spelling):
    r = run_net(["--net", "allow-all"] + net.batch(
        ["http", *PX,
         f"GET http://{spelling}/ HTTP/1.1\\r\\nHost: {spelling}\\r\\n\\r\\n"],
        ["ctls", *PX, f"{spelling}:443", "allowed.test"],
        ["http", "203.0.113.10", 80,
         f"GET / HTTP/1.1\\r\\nHost: {spelling}\\r\\n\\r\\n"]))
    absolute, tunnel, transparent = r.probe
    assert absolute.get("status") in (400, 403), absolute
    assert tunnel.get("connect_status") in (400, 403), tunnel
    assert transparent.get("status") in (None, 400, 403), transparent
    _no_decoy_hits(world)
    assert world.events("allowed") == []
    assert len(net.find(r.egress, verdict="deny")) >= 2, r.egress


@pytest.mark.parametrize("name,decoy", [("rebind.test", "loop"),
                                        ("meta.test", "meta"),
                                        ("private.test", "lan"),
                                        ("gw.test", None)])
def test_allowed_name_forbidden_address(run_net, net, world, name, decoy):
    r = run_net(["--allow", name] + net.sh(
        f"{net.CURL} http://{name}/a; {net.CURL} https://{name}/b; "
        f"{net.CURL} --noproxy '*' http://{name}/c"))
    codes = net.codes(r)
    assert codes[0][0] != 200 and codes[1][0] != 200 and \
        codes[2][0] != 200, r.out
    for secret in ("LOOPBACK-CANARY", "META-CREDENTIALS", "LAN-CANARY"):
        assert secret not in r.out
    _no_decoy_hits(world)
    assert net.find(r.egress, verdict="deny", name=name), r.egress
    assert not net.find(r.egress, verdict="allow", layer={"proxy", *TRANS},
                        name=name), r.egress


def test_mixed_answer_dials_only_vetted_address(run_net, net, world):
    r = run_net(["--allow", "mixed.test"] +
                net.curl("http://mixed.test/m"))
    assert net.http_code(r) in (200, 403, 502), r.out
    if net.http_code(r) == 200:
        assert "allowed-web" in r.out
    _no_decoy_hits(world)


def test_private_name_allowed_by_subnet(run_net, net, world):
    r = run_net(["--allow", "private.test", "--allow-cidr", "10.0.0.0/8"] +
                net.curl("http://private.test/lan"))
    assert net.http_code(r) == 200, (r.out, r.err)
    assert "lan-web" in r.out
    assert net.find(r.egress, layer="proxy", verdict="allow",
                    name="private.test", address="10.0.0.5")


def test_metadata_blocked_under_allow_all(run_net, net, world):
    r = run_net(["--net", "allow-all"] + net.sh(
        f"{net.CURL} --noproxy '*' http://169.254.169.254/latest/meta-data/; "
        f"{net.CURL} http://169.254.169.254/latest/meta-data/; "
        f"{net.CURL} http://meta.test/latest/meta-data/"))
    assert all(c[0] != 200 for c in net.codes(r)), r.out
    assert "META-CREDENTIALS" not in r.out
    _no_decoy_hits(world)
    assert len(net.find(r.egress, verdict="deny")) >= 2, r.egress


def test_allow_all_reaches_public_but_not_private(run_net, net, world):
    r = run_net(["--net", "allow-all"] + net.sh(
        f"{net.CURL} https://allowed.test/; {net.CURL} https://denied.test/; "
        f"{net.CURL} --noproxy '*' http://denied.test/; "
        f"{net.CURL} http://10.0.0.5/; {net.CURL} http://127.0.0.1/; "
        f"{net.CURL} --noproxy '*' http://10.0.0.5/"))
    codes = [c[0] for c in net.codes(r)]
    assert codes[:3] == [200, 200, 200], r.out
    assert all(c != 200 for c in codes[3:]), r.out
    _no_decoy_hits(world)
    assert net.find(r.egress, verdict="allow", name="denied.test")


def test_gateway_itself_forbidden(run_net, net, world):
    r = run_net(["--net", "allow-all"] + net.batch(
        ["http", *PX,
         "GET http://100.96.0.1:3128/ HTTP/1.1\\r\\nHost: 100.96.0.1:3128"
         "\\r\\n\\r\\n"],
        ["ctls", *PX, "100.96.0.1:53", "allowed.test"],
        ["http", *PX,
         "GET http://localhost:3128/ HTTP/1.1\\r\\nHost: localhost:3128"
         "\\r\\n\\r\\n"]))
    a, b, c = r.probe
    assert a.get("status") in (400, 403), a
    assert b.get("connect_status") in (400, 403), b
    assert c.get("status") == 403, c
    _no_decoy_hits(world)
    assert len(net.find(r.egress, layer="proxy", verdict="deny")) >= 3
    assert net.find(r.egress, verdict="deny", name="localhost"), r.egress
