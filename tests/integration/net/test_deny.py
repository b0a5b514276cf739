"""Default deny: no policy (or deny-all) means loopback only."""

import json

import pytest

PROBES = [["tcp", "203.0.113.10", 80], ["tcp", "198.51.100.20", 443],
          ["tcp", "100.96.0.1", 3128],
          ["dns", "allowed.test", "A", "udp", "100.96.0.1"],
          ["dns", "allowed.test", "A", "udp", "203.0.113.53"],
          ["udp", "198.51.100.20", 4444, "x"], ["resolve", "allowed.test"],
          ["tcp6", "2001:db8:a::10", 80], ["netinfo"]]


def _assert_sealed(r, world, net):
    assert r.returncode == 0, r.err
    res = r.probe
    assert res is not None, r.out
    *conns, info = res
    assert info["ifaces"] == ["lo"], info["ifaces"]
    for p in conns:
        assert not p.get("connected"), p
        assert "answers" not in p and "recv" not in p and "addrs" not in p, p
    assert world.events() == [], world.events()
    c = world.counters()
    assert all(v == 0 for v in c.values()), c
    assert net.find(r.egress, verdict="allow") == [], r.egress


@pytest.mark.parametrize("flags", [[], ["--net", "deny"]],
                         ids=["default", "net-deny"])
def test_default_deny_loopback_only(run_net, world, net, flags):
    r = run_net(flags + net.batch(*PROBES))
    _assert_sealed(r, world, net)
    info = r.probe[-1]
    assert "HTTP_PROXY" not in info["env"] and "https_proxy" not in info["env"]


def test_deny_all_policy_file(run_net, world, net, tmp_path):
    pol = tmp_path / "deny.json"
    pol.write_text(json.dumps("deny-all"))
    r = run_net(["--policy", str(pol)] + net.batch(*PROBES))
    _assert_sealed(r, world, net)


def test_default_deny_root_cannot_add_a_route(run_net, world, net):
    """Even root in the sandbox has no CAP_NET_ADMIN over its netns."""
    r = run_net(["--root"] + net.sh(
        "ip link add x0 type veth peer name x1 2>&1; echo rc=$?;"
        "ip addr add 192.0.2.77/24 dev lo 2>&1; echo rc=$?;"
        "ip route add default dev lo 2>&1; echo rc=$?"))
    assert r.returncode == 0, r.err
    assert r.out.count("rc=0") == 0, r.out
    assert world.events() == []
