"""Ports and preview URLs of airlockd (docs/ports.md).

A sandbox declares ports (on create and PATCH, Vercel API); airlockd reverse-proxies HTTP and
WebSocket traffic to them through a connection made inside the sandbox's network namespace,
in two forms: host-based (<port>-<sandbox>.<--preview-domain>) and path-based
(/preview/<sandbox>/<port>/). Only a declared port; a declared port where nothing listens is
502 with a clear body; every proxied request is an inbound line of the egress log.

Run: /usr/bin/python3 -m pytest tests/sdk/test_ports.py -v   (needs build/airlock; node)
"""

import http.client
import json
import subprocess
import textwrap
import time

import pytest

from test_sdk import HERE, Client, daemon_proc, node_modules  # noqa: F401
from test_pty import WS, close_code

DOMAIN = "preview.localhost"

# A WebSocket echo server (RFC 6455 by hand: the sandbox has only what the host has).
ECHO = textwrap.dedent("""
    import base64, hashlib, socket, struct, sys
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
    while True:
        c, _ = s.accept(); h = b""
        while b"\\r\\n\\r\\n" not in h:
            h += c.recv(4096)
        key = [l.split(b":", 1)[1].strip() for l in h.split(b"\\r\\n")
               if l.lower().startswith(b"sec-websocket-key")][0]
        acc = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n"
                  b"Connection: Upgrade\\r\\nSec-WebSocket-Accept: " + acc + b"\\r\\n\\r\\n")
        buf = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            buf += d
            if len(buf) < 6 or len(buf) < 6 + (buf[1] & 0x7f):
                continue
            n = buf[1] & 0x7f; m = buf[2:6]; op = buf[0] & 15
            p = bytes(b ^ m[i % 4] for i, b in enumerate(buf[6:6 + n])); buf = buf[6 + n:]
            if op == 8:
                c.sendall(b"\\x88\\x02\\x03\\xe8"); break
            out = b"echo:" + p
            c.sendall(bytes([0x80 | op, len(out)]) + out)
        c.close()
""")


@pytest.fixture(scope="module")
def daemon():
    yield from daemon_proc("--preview-domain", DOMAIN)


@pytest.fixture(scope="module")
def api(daemon):
    return Client(daemon, "A")


@pytest.fixture(scope="module")
def sbx(api):
    j = api.create(timeout=300000, ports=[3000, 3001, 3002])
    sid = j["session"]["id"]
    for port, args in ((3000, ["-m", "http.server", "3000", "--bind", "127.0.0.1"]),
                       (3002, ["-c", ECHO, "3002"])):
        r = api.req("POST", api.ses(sid, "/cmd"), {"command": "python3", "args": args,
                                                   "env": {}, "sudo": False})
        assert r.status == 200, r
    yield sid, j
    api.req("POST", api.ses(sid, "/stop"))


def get(port, path, host=None, method="GET", body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    c.request(method, path, body=body, headers={"Host": host} if host else {})
    r = c.getresponse()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()


def until_up(daemon, sid, port):
    deadline = time.monotonic() + 15
    while True:
        st, _, body = get(daemon, f"/preview/{sid}/{port}/")
        if st != 502 or time.monotonic() > deadline:
            return st, body
        time.sleep(0.1)


def test_routes_name_the_preview_urls(daemon, sbx):
    sid, j = sbx
    assert [r["port"] for r in j["routes"]] == [3000, 3001, 3002]
    r0 = j["routes"][0]
    assert r0["subdomain"] == f"3000-{sid}"
    assert r0["url"] == f"http://3000-{sid}.{DOMAIN}:{daemon}/"


def test_http_path_and_host_forms(daemon, sbx):
    sid, _ = sbx
    st, body = until_up(daemon, sid, 3000)
    assert st == 200 and b"Directory listing" in body, body[:200]
    st, hdrs, body = get(daemon, f"/preview/{sid}/3000/?q=1")
    assert st == 200 and hdrs["server"].startswith("SimpleHTTP"), hdrs
    st, _, body = get(daemon, "/", host=f"3000-{sid}.{DOMAIN}:{daemon}")
    assert st == 200 and b"Directory listing" in body
    st, _, body = get(daemon, "/nope", host=f"3000-{sid}.{DOMAIN}")
    assert st == 404 and b"File not found" in body  # the sandbox's own 404, passed through
    # no API token was needed (preview URLs are public, as Vercel's), and none is asked
    st, _, body = get(daemon, "/v2/sandboxes", host=f"3000-{sid}.{DOMAIN}")
    assert st == 404 and b"File not found" in body, "the host form must not reach the API"


def test_not_listening_is_502_and_undeclared_is_refused(daemon, sbx):
    sid, _ = sbx
    st, _, body = get(daemon, f"/preview/{sid}/3001/")
    assert st == 502 and json.loads(body)["error"]["code"] == "port_not_listening", body
    assert b"nothing listens on port 3001" in body
    st, _, body = get(daemon, f"/preview/{sid}/4000/")
    assert st == 403 and json.loads(body)["error"]["code"] == "port_not_declared", body
    st, _, body = get(daemon, "/", host=f"22-{sid}.{DOMAIN}")
    assert st == 403, body
    st, _, body = get(daemon, "/preview/sbx_doesnotexist0000000000000/3000/")
    assert st == 404, body


def test_websocket_through_the_proxy(daemon, sbx, node_modules):
    sid, _ = sbx
    until_up(daemon, sid, 3000)
    # the ws package (a real client) through the path form
    script = ("import WebSocket from 'ws';"
              f"const ws = new WebSocket('ws://127.0.0.1:{daemon}/preview/{sid}/3002/');"
              "ws.on('open', () => ws.send('hello'));"
              "ws.on('message', (d) => { console.log(d.toString()); ws.close(1000); });"
              "ws.on('error', (e) => { console.log('error ' + e.message); process.exit(1); });")
    deadline = time.monotonic() + 15
    while True:
        r = subprocess.run([node_modules, "--input-type=module", "-e", script], cwd=HERE,
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.stdout.strip() == "echo:hello", r.stdout + r.stderr
    # by hand through the host form
    ws = HostWS(daemon, f"3002-{sid}.{DOMAIN}")
    assert ws.status == 101, ws.head
    ws.send(1, b"via-host")
    ws.send(8, b"\x03\xe8")
    frames = ws.frames()
    assert (1, b"echo:via-host") in frames and close_code(frames) == 1000


class HostWS(WS):
    def __init__(self, port, host):
        import base64
        import secrets
        import socket
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        self.sock.sendall((f"GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            d = self.sock.recv(4096)
            if not d:
                break
            self.buf += d
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1]) if head else 0
        self.head = head.decode("latin-1")


def test_patch_changes_the_ports(daemon, api, sbx):
    sid, _ = sbx
    r = api.req("PATCH", f"/v2/sandboxes/{sid}", {"ports": [3000, 3002, 3003]})
    assert r.status == 200, r
    assert [x["port"] for x in r.json["routes"]] == [3000, 3002, 3003]
    st, _, _ = get(daemon, f"/preview/{sid}/3001/")
    assert st == 403
    r = api.req("PATCH", f"/v2/sandboxes/{sid}", {"ports": list(range(1, 17))})
    assert r.status == 400, r  # at most 15, as Vercel
    r = api.req("PATCH", f"/v2/sandboxes/{sid}", {"ports": [0]})
    assert r.status == 400, r
    r = api.req("PATCH", f"/v2/sandboxes/{sid}", {"ports": [3000, 3001, 3002]})
    assert r.status == 200, r


def test_inbound_traffic_is_in_the_egress_log(daemon, api, sbx):
    sid, _ = sbx
    until_up(daemon, sid, 3000)
    get(daemon, f"/preview/{sid}/3000/")
    get(daemon, f"/preview/{sid}/4000/")
    r = api.req("GET", f"/v1/sandboxes/{sid}/egress")
    lines = [json.loads(x) for x in r.data.splitlines() if x.strip()]
    inbound = [x for x in lines if x.get("direction") == "in"]
    ok = [x for x in inbound if x["port"] == 3000 and x["status"] == 200]
    assert ok and ok[-1]["bytes_out"] > 100 and ok[-1]["bytes_in"] > 20, inbound
    denied = [x for x in inbound if x["port"] == 4000]
    assert denied and denied[-1]["verdict"] == "deny" and denied[-1]["status"] == 403


def test_sandbox_cannot_reach_the_daemon(daemon, api, sbx):
    """The proxy dials in; nothing in the sandbox can dial airlockd's listener back."""
    sid, _ = sbx
    code = (f"import socket\ns = socket.socket(); s.settimeout(3)\n"
            f"try:\n    s.connect(('127.0.0.1', {daemon})); print('reached')\n"
            f"except OSError as e:\n    print('refused', e.errno)")
    r, lines = api.run(sid, "python3", ["-c", code])
    out = "".join(x.get("data", "") for x in lines if x.get("stream") == "stdout")
    assert out.startswith("refused"), out


def test_native_ports_route(daemon, api):
    """The native API: ports on create, PUT /v1/sandboxes/{id}/ports, the view's ports."""
    r = api.req("POST", "/v1/sandboxes", {"ports": [5000]})
    assert r.status == 201, r
    sid = r.json["sandbox"]["id"]
    try:
        assert r.json["sandbox"]["ports"] == [5000]
        r = api.req("PUT", f"/v1/sandboxes/{sid}/ports", {"ports": [5001, 5002]})
        assert r.status == 200 and r.json["sandbox"]["ports"] == [5001, 5002], r
        st, _, _ = get(daemon, f"/preview/{sid}/5000/")
        assert st == 403
        st, _, body = get(daemon, f"/preview/{sid}/5001/")
        assert st == 502 and b"nothing listens on port 5001" in body
        r = api.req("PUT", f"/v1/sandboxes/{sid}/ports", {"ports": [5001, 5001]})
        assert r.status == 400, r
        r = api.req("PUT", f"/v1/sandboxes/{sid}/ports", {})
        assert r.status == 400, r
    finally:
        api.req("POST", f"/v1/sandboxes/{sid}/stop")
