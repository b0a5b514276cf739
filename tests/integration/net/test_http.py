"""Smuggling-prone requests get 400, through the proxy and transparently."""

import pytest

ALLOW = ["--allow", "allowed.test"]
PX = ("100.96.0.1", 3128)
ALLOWED_IP = ("203.0.113.10", 80)


def reqs(target, canary):
    return {
        "cl-te": (f"POST {target} HTTP/1.1\\r\\nHost: allowed.test\\r\\n"
                  "Content-Length: 4\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"
                  f"0\\r\\n\\r\\nGET /{canary} HTTP/1.1\\r\\nHost: denied.test"
                  "\\r\\n\\r\\n"),
        "dup-host": (f"GET {target}{canary} HTTP/1.1\\r\\nHost: allowed.test"
                     "\\r\\nHost: denied.test\\r\\n\\r\\n"),
        "bad-cl": (f"POST {target}{canary} HTTP/1.1\\r\\nHost: allowed.test"
                   "\\r\\nContent-Length: abc\\r\\n\\r\\nxxxx"),
        "two-cl": (f"POST {target}{canary} HTTP/1.1\\r\\nHost: allowed.test"
                   "\\r\\nContent-Length: 4\\r\\nContent-Length: 5\\r\\n\\r\\n"
                   "xxxxx"),
    }


@pytest.mark.parametrize("kind", ["cl-te", "dup-host", "bad-cl", "two-cl"])
def test_smuggling_via_proxy_400(run_net, net, world, canary, kind):
    req = reqs("http://allowed.test/", canary)[kind]
    r = run_net(ALLOW + net.probe("http", *PX, req))
    assert r.probe.get("status") == 400, r.probe
    assert canary not in world.sinks_text(), world.events()
    assert world.events("allowed", "http") == []
    assert net.find(r.egress, layer="proxy", verdict="deny"), r.egress


@pytest.mark.parametrize("kind", ["cl-te", "dup-host"])
def test_smuggling_transparent_400(run_net, net, world, canary, kind):
    req = reqs("/", canary)[kind]
    r = run_net(ALLOW + net.probe("http", *ALLOWED_IP, req))
    assert r.probe.get("status") in (400, None), r.probe
    assert canary not in world.sinks_text()
    assert world.events("allowed", "http") == []
    assert net.find(r.egress, layer={"transparent", "tls"}, verdict="deny"), \
        r.egress
