"""The fake internet itself works (no airlock involved): a failure here is a
harness problem, not a gateway bug."""

import json
import subprocess

NS_EXEC = ["ip", "netns", "exec"]


def _in_world(world, *cmd):
    return subprocess.run([*NS_EXEC, world.ns, *cmd], capture_output=True,
                          text=True, timeout=20)


def test_world_selfcheck(world):
    r = _in_world(world, "curl", "-sS", "-m", "3", "--cacert", world.ca,
                  "--resolve", "allowed.test:443:203.0.113.10",
                  "https://allowed.test/hello")
    assert r.returncode == 0 and "allowed-web proto=https" in r.stdout, r
    r = _in_world(world, "curl", "-sS", "-m", "3", "http://198.51.100.20/x")
    assert "denied-web" in r.stdout, r
    q = ("import sys; sys.path.insert(0, %r); import probe; import json;"
         "print(json.dumps([probe.cmd_dns(n, t, tr, '203.0.113.53') for n, t, tr in"
         " [('allowed.test','A','udp'),('a.b.wild.test','A','tcp'),"
         "('rebind.test','A','udp'),('allowed.test','AAAA','udp'),"
         "('nope.test','A','udp')]]))" % str(world.state.parent))
    # probe.py lives next to this file; run it from there
    import pathlib
    here = pathlib.Path(__file__).resolve().parent
    q = q.replace(repr(str(world.state.parent)), repr(str(here)))
    r = _in_world(world, "/usr/bin/python3", "-c", q)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res[0]["answers"] == [{"type": "A", "data": "203.0.113.10"}], res
    assert res[1]["answers"] == [{"type": "A", "data": "203.0.113.10"}], res
    assert res[2]["answers"] == [{"type": "A", "data": "127.0.0.1"}], res
    assert res[3]["answers"][0]["type"] == "AAAA", res
    assert res[4]["rcode"] == "NXDOMAIN", res
    assert {"allowed.test", "a.b.wild.test", "nope.test"} <= set(world.dns_queries())
    assert world.hits("allowed") and world.hits("denied")
    c = world.counters()
    assert c["denied"] > 0 and c["allowed"] > 0 and c["dns"] > 0, c
    assert c["from_host"] == 0, c
    world.reset()
    assert world.events() == [] and world.counters()["denied"] == 0


def test_world_is_sealed(world):
    """The world has no route out, and the host has no route in beyond the
    link subnet."""
    r = _in_world(world, "ip", "route", "show", "default")
    assert r.stdout.strip() == ""
    r = subprocess.run(["ip", "route", "get", "203.0.113.10"],
                       capture_output=True, text=True)
    assert world.ns not in r.stdout
    r = subprocess.run(["ip", "-o", "route", "show", "192.0.2.0/24"],
                       capture_output=True, text=True)
    assert "192.0.2.0/24" in r.stdout
