"""Chunked request bodies reach the upstream byte for byte on every path
(issue 33, item 7): explicit proxy, transparent, CONNECT (spliced) and
terminated. The world's HTTP server decodes what it received and logs it as
the event's body; a broken framing is cut and answered 400 (logged)."""
import json

import pytest

ALLOW = ["--allow", "allowed.test"]

# The body goes out in pieces, one chunk split across two writes, so the gateway
# sees the framing arrive over several reads, not in the head's buffer.
CLIENT_PY = r'''
import socket, ssl, sys, time, json
mode, path = sys.argv[1], sys.argv[2]
how = sys.argv[3] if len(sys.argv) > 3 else ""
def conn():
    if mode == "proxy":
        return socket.create_connection(("100.96.0.1", 3128)), "http://allowed.test" + path
    if mode == "transparent":
        return socket.create_connection(("203.0.113.10", 80)), path
    if mode == "connect":
        s = socket.create_connection(("100.96.0.1", 3128))
        s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(1)
        ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
        return ctx.wrap_socket(s, server_hostname="allowed.test"), path
    ctx = ssl.create_default_context(cafile="/etc/airlock/ca-bundle.pem")
    s = socket.create_connection(("allowed.test", 443))
    return ctx.wrap_socket(s, server_hostname="allowed.test"), path
s, target = conn()
s.sendall(("POST %s HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n"
           "Content-Type: text/plain\r\nConnection: close\r\n\r\n" % target).encode())
parts = [b"5\r\nhello\r\n", b"d\r\n upl", b"oad-body!\r\n"]
parts += {"bad": [b"ZZ\r\nxx\r\n"], "cut": []}.get(how, [b"0\r\n\r\n"])
for p in parts:
    time.sleep(0.1)
    s.sendall(p)
if how == "cut":        # the body stops before its last chunk
    s.shutdown(socket.SHUT_WR)
s.settimeout(10)
data = b""
try:
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
except (OSError, socket.timeout) as e:
    data += b" ERR " + str(e).encode()
print(json.dumps({"status": data.split(b"\r\n")[0].decode("utf-8", "replace")}))
'''


def _run(run_net, tmp_path, mode, args, how="", path="/upload"):
    script = tmp_path / "client.py"
    script.write_text(CLIENT_PY)
    cmd = ["python3", "/workspace/client.py", mode, path] + ([how] if how else [])
    return run_net(args + ["--file", f"{script}:/workspace/client.py", "--", *cmd])


def _bodies(world, path="/upload"):
    return [e.get("body") for e in world.events("allowed", "http")
            if e["path"] == path and e.get("body_complete")]


@pytest.mark.parametrize("mode,layer", [("proxy", "proxy"), ("transparent", "transparent"),
                                        ("connect", "tls")])
def test_chunked_upload_reaches_upstream(run_net, net, world, tmp_path, mode, layer):
    r = _run(run_net, tmp_path, mode, ALLOW)
    assert r.probe and " 200 " in r.probe["status"], (r.out, r.err)
    assert _bodies(world) == ["hello upload-body!"], world.events("allowed", "http")
    assert net.find(r.egress, layer=layer, verdict="allow"), r.egress


def test_chunked_upload_terminated(run_net, net, world, tmp_path):
    policy = tmp_path / "policy.json"
    rule = {"transform": [{"headers": {"X-Api-Key": "k-0123456789abcdef"}}]}
    policy.write_text(json.dumps({"allow": {"allowed.test": [rule]}}))
    r = _run(run_net, tmp_path, "terminated",
             ["--policy", str(policy), "--upstream-ca", world.ca])
    assert r.probe and " 200 " in r.probe["status"], (r.out, r.err)
    assert _bodies(world) == ["hello upload-body!"], world.events("allowed", "http")
    assert net.find(r.egress, layer="tls", verdict="allow", reason="rule_transform")


@pytest.mark.parametrize("mode,layer", [("proxy", "proxy"), ("transparent", "transparent")])
def test_chunked_upload_bad_framing_is_cut_and_logged(run_net, net, world, tmp_path, mode,
                                                      layer):
    r = _run(run_net, tmp_path, mode, ALLOW, how="bad")
    if mode == "proxy":
        assert r.probe and " 400 " in r.probe["status"], (r.out, r.err)
    assert net.find(r.egress, layer=layer, verdict="deny", reason="bad_chunked_body"), r.egress
    assert not [e for e in net.find(r.egress, layer=layer, verdict="allow")
                if e.get("event") != "open"], r.egress  # its "open" line went out first
    # The upstream saw the head and the good chunks, never a complete body.
    assert not [e for e in world.events("allowed", "http") if e.get("body_complete")], \
        world.events("allowed", "http")


@pytest.mark.parametrize("mode,layer", [("proxy", "proxy"), ("transparent", "transparent")])
def test_chunked_upload_cut_by_the_sandbox_is_logged(run_net, net, world, tmp_path, mode,
                                                     layer):
    r = _run(run_net, tmp_path, mode, ALLOW, how="cut")
    assert net.find(r.egress, layer=layer, verdict="deny", reason="body_incomplete"), r.egress
    assert not [e for e in net.find(r.egress, layer=layer, verdict="allow")
                if e.get("event") != "open"], r.egress  # its "open" line went out first
    assert not [e for e in world.events("allowed", "http") if e.get("body_complete")], \
        world.events("allowed", "http")
