"""An injected credential never comes back to the sandbox (issue 33, item 2).

The world's /reflect-* endpoints hand the injected Authorization back the ways
a scan of the raw wire bytes misses: the token without its scheme, a chunk
boundary inside it, a second Content-Encoding, a 100 Continue before the real
head, Basic credentials decoded. The sandbox reads every byte with a raw TLS
client (and decodes them as a client would: interim heads skipped, chunks
joined, gzip undone) and with curl --compressed; the secret must be in none of
it, and the egress log must say a secret was reflected (redacted or refused).
"""
import base64
import json

import pytest

CLIENT_PY = r'''
import gzip, json, socket, ssl, sys
path = sys.argv[1]
ctx = ssl.create_default_context(cafile="/etc/airlock/ca-bundle.pem")
s = ctx.wrap_socket(socket.create_connection(("allowed.test", 443)),
                    server_hostname="allowed.test")
s.sendall(("GET %s HTTP/1.1\r\nHost: allowed.test\r\nAccept-Encoding: gzip\r\n\r\n"
           % path).encode())
s.settimeout(10)
raw = b""
try:
    while True:
        c = s.recv(65536)
        if not c:
            break
        raw += c
except OSError:
    pass
def decode(data):
    head, _, body = data.partition(b"\r\n\r\n")
    while head[9:10] == b"1":                       # interim heads
        head, _, body = body.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        out = b""
        while body:
            line, _, body = body.partition(b"\r\n")
            n = int(line or b"0", 16)
            if n == 0:
                break
            out, body = out + body[:n], body[n + 2:]
        body = out
    i = body.find(b"\x1f\x8b")
    if i >= 0:
        try:
            body = body[:i] + gzip.decompress(body[i:])
        except Exception:
            pass
    return head + b"\r\n\r\n" + body
print(json.dumps({"status": raw.split(b"\r\n")[0].decode("latin-1"),
                  "raw": raw.decode("latin-1"), "decoded": decode(raw).decode("latin-1")}))
'''


@pytest.fixture
def secret(canary):
    return f"SECRET-{canary}"


def _reflect(run_net, world, tmp_path, path, value):
    policy = tmp_path / "policy.json"
    rule = {"transform": [{"headers": {"Authorization": value}}]}
    policy.write_text(json.dumps({"allow": {"allowed.test": [rule]}}))
    client = tmp_path / "client.py"
    client.write_text(CLIENT_PY)
    script = (f"curl -sS --compressed -D - https://allowed.test{path}; echo; "
              f"python3 /workspace/client.py {path}")
    r = run_net(["--policy", str(policy), "--upstream-ca", world.ca,
                 "--file", f"{client}:/workspace/client.py", "--", "sh", "-c", script])
    seen = [e for e in world.events("allowed", "http") if e["path"] == path]
    assert seen and f"Authorization: {value}" in seen[0]["headers"], seen   # it was injected
    return r


def _absent(r, *tokens):
    for t in tokens:
        assert t not in r.out and t not in r.err, (t, r.out, r.err)
        assert t not in r.probe["decoded"], r.probe


def _logged(net, r, reason):
    lines = net.find(r.egress, layer="tls", reason=reason)
    assert lines and lines[0]["name"] == "allowed.test", r.egress
    assert lines[0]["verdict"] == "deny", lines


@pytest.mark.parametrize("path", ["/reflect-bare", "/reflect-chunked", "/reflect-continue-plain"])
def test_reflected_secret_is_redacted(run_net, world, net, tmp_path, secret, path):
    r = _reflect(run_net, world, tmp_path, path, f"Bearer {secret}")
    assert r.probe, (r.out, r.err)
    _absent(r, secret)
    assert "*" * len(secret) in r.probe["decoded"], r.probe   # overwritten, same length
    assert " 100 " not in r.probe["raw"], r.probe               # interim heads are not relayed
    _logged(net, r, "secret_reflected_redacted")
    assert net.find(r.egress, layer="tls", verdict="allow", reason="rule_transform")


@pytest.mark.parametrize("path", ["/reflect-two-ce", "/reflect-continue-gzip"])
def test_encoded_reflection_is_refused(run_net, world, net, tmp_path, secret, path):
    r = _reflect(run_net, world, tmp_path, path, f"Bearer {secret}")
    assert r.probe and " 502 " in r.probe["status"], r.probe
    _absent(r, secret)
    _logged(net, r, "secret_reflected_unscannable_encoding")
    assert not [e for e in net.find(r.egress, layer="tls", verdict="allow")
                if e.get("event") != "open"], r.egress  # its "open" line went out first


def test_basic_credentials_decoded_are_redacted(run_net, world, net, tmp_path, canary):
    user, password = "robot", f"pw-{canary}"
    value = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    r = _reflect(run_net, world, tmp_path, "/reflect-basic", value)
    assert r.probe and " 200 " in r.probe["status"], r.probe
    _absent(r, password, f"{user}:{password}")
    _logged(net, r, "secret_reflected_redacted")


@pytest.mark.parametrize("path,status,reason", [
    ("/reflect-trailer", " 200 ", "secret_reflected_unscannable_chunked"),
    ("/reflect-upgrade", " 502 ", "secret_reflected_unscannable_upgrade"),
])
def test_unscannable_framing_is_refused(run_net, world, net, tmp_path, secret, path, status,
                                        reason):
    """A trailer (refused by the strict decoder: the body is cut there) and an upgrade."""
    r = _reflect(run_net, world, tmp_path, path, f"Bearer {secret}")
    assert r.probe and status in r.probe["status"], r.probe
    _absent(r, secret)
    _logged(net, r, reason)
    assert not [e for e in net.find(r.egress, layer="tls", verdict="allow")
                if e.get("event") != "open"], r.egress  # its "open" line went out first


def test_interim_head_is_not_relayed(run_net, world, net, tmp_path, secret):
    r = _reflect(run_net, world, tmp_path, "/reflect-early-hints", f"Bearer {secret}")
    assert r.probe and r.probe["status"].startswith("HTTP/1.1 200 "), r.probe
    assert "103" not in r.probe["raw"] and r.probe["raw"].endswith("ok"), r.probe
    _absent(r, secret)
    _logged(net, r, "secret_reflected_redacted")      # withheld, and said so
