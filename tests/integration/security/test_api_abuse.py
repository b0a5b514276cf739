"""API abuse against airlockd: tokens, teams, traversal, oversized and slow
requests, connection floods, hostile JSON. The daemon answers 4xx (or closes
the connection), keeps serving, and loses nothing."""

import json
import os
import resource
import socket
import threading
import time
import urllib.parse

import pytest

from .conftest import TOKENS, Api, http_status, raw_http, tar_of


def healthy(api):
    assert api.health(timeout=5).status == 200
    assert isinstance(api.list(), list)


def test_token_variants_and_vercel_routes_need_auth(api, anon, sec_daemon, sandbox):
    tok = TOKENS["A"]
    variants = [tok.upper(), tok.lower().replace("seca", "SECA"), tok[:-1] + "\x00" + tok[-1],
                tok[:len(tok) // 2] + "\x00" + tok[len(tok) // 2:],
                tok[:8], "", "Bearer " + tok]
    for v in variants:
        r = anon.request("GET", "/v1/sandboxes", headers={"Authorization": "Bearer " + v})
        assert r.status == 401, (v, r)
    # lowercase scheme, token in the query string or a cookie: not accepted as auth
    for hdrs, path in (({"Cookie": f"token={tok}"}, "/v1/sandboxes"),
                       ({}, f"/v1/sandboxes?token={tok}"),
                       ({}, f"/v1/sandboxes?access_token={tok}"),
                       ({"X-Api-Key": tok}, "/v1/sandboxes")):
        r = anon.request("GET", path, headers=hdrs)
        assert r.status == 401, (hdrs, path, r)
    for method, path in (("GET", "/v2/sandboxes"), ("POST", "/v3/sandboxes"),
                         ("GET", f"/v2/sandboxes/sessions/{sandbox}"),
                         ("POST", f"/v2/sandboxes/sessions/{sandbox}/cmd"),
                         ("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/read"),
                         ("POST", f"/v2/sandboxes/sessions/{sandbox}/stop"),
                         ("GET", f"/v1/sandboxes/{sandbox}/egress")):
        r = anon.request(method, path, body={})
        assert r.status == 401, (method, path, r)
    assert api.sandbox(sandbox)["status"] == "running"


def test_team_b_via_vercel_routes_and_egress(api, api_b, make_sandbox):
    sid = make_sandbox()
    api.put_files(sid, tar_of("secret.txt", b"team A secret\n"))
    cid = api.start_ok(sid, "/bin/sleep", "300")["id"]
    ses = f"/v2/sandboxes/sessions/{sid}"
    attempts = [("GET", ses, None), ("POST", ses + "/cmd", {"command": "touch", "args": ["/workspace/b"]}),
                ("GET", f"{ses}/cmd/{cid}", None), ("GET", f"{ses}/cmd/{cid}/logs", None),
                ("POST", f"{ses}/cmd/{cid}/kill", {"signal": 9}),
                ("POST", ses + "/fs/read", {"path": "/workspace/secret.txt"}),
                ("POST", ses + "/fs/mkdir", {"path": "/workspace/bdir"}),
                ("POST", ses + "/network-policy", {"networkPolicy": "allow-all"}),
                ("POST", ses + "/extend-timeout", {"duration": 1000}),
                ("POST", ses + "/stop", None),
                ("GET", f"/v2/sandboxes/{sid}", None), ("DELETE", f"/v2/sandboxes/{sid}", None),
                ("PATCH", f"/v2/sandboxes/{sid}", {"networkPolicy": "allow-all"}),
                ("GET", f"/v1/sandboxes/{sid}/egress", None)]
    for method, path, body in attempts:
        r = api_b.request(method, path, body=body)
        assert r.status in (400, 404), (method, path, r)
        assert b"team A secret" not in r.data
    r = api_b.request("POST", ses + "/fs/write", raw=tar_of("b.txt", b"x"),
                      headers={"Content-Type": "application/gzip"})
    assert r.status in (400, 404), r
    s = api.sandbox(sid)
    assert s["status"] == "running" and s["network_policy"] == "deny-all", s
    assert api.cmd_get(sid, cid).json["command"]["status"] == "running"
    assert api.sh(sid, "ls -A /workspace").stdout == b"secret.txt\n"
    sessions = api_b.request("GET", "/v2/sandboxes/sessions")
    assert sid.encode() not in sessions.data


TRAVERSALS = ["../", "..%2f", "%2e%2e/", "%2e%2e%2f", "%252e%252e%252f", "..%252f",
              "%2e%2e%5c", "..;/", "%c0%ae%c0%ae/", "..%00/", "%00"]


def test_path_traversal_in_every_path_parameter(api, api_b, sandbox, host_marker, sec_daemon):
    path, content = host_marker
    sb = api_b.create_ok()["id"]
    try:
        cid = api.start_ok(sandbox, "/bin/true")["id"]
        tail = "tmp/" + path.name
        responses = []
        for t in TRAVERSALS:
            up = t * 8
            # {id} and {cid} positions
            for p in (f"/v1/sandboxes/{up}{tail}", f"/v1/sandboxes/{sandbox}/{up}{tail}",
                      f"/v1/sandboxes/{up}{sb}", f"/v1/sandboxes/{sandbox}/commands/{up}{cid}",
                      f"/v1/sandboxes/{sandbox}/commands/{cid}/{up}{tail}",
                      f"/v1/sandboxes/{sandbox}/commands/{up}{tail}/logs",
                      f"/v2/sandboxes/sessions/{up}{sb}", f"/v2/sandboxes/{up}{sb}",
                      f"/v2/sandboxes/sessions/{sandbox}/cmd/{up}{cid}"):
                responses.append((p, api.request("GET", p)))
            # query path / dir and body path parameters
            q = "/workspace/" + up + tail
            qe = urllib.parse.unquote(q)
            for p in (f"/v1/sandboxes/{sandbox}/files/content?path={q}",
                      f"/v1/sandboxes/{sandbox}/files?path={q}"):
                responses.append((p, api.request("GET", p)))
            responses.append(("mkdir " + qe, api.mkdir(sandbox, qe + ".d", parents=True)))
            responses.append(("dir " + q, api.request(
                "PUT", f"/v1/sandboxes/{sandbox}/files?dir={q}.up", raw=tar_of("f", b"x"),
                headers={"Content-Type": "application/x-tar"})))
            responses.append(("vc read " + qe, api.request(
                "POST", f"/v2/sandboxes/sessions/{sandbox}/fs/read", body={"path": qe})))
            responses.append(("vc mkdir " + qe, api.request(
                "POST", f"/v2/sandboxes/sessions/{sandbox}/fs/mkdir", body={"path": qe + ".v"})))
        for what, r in responses:
            assert content.encode() not in r.data, (what, r)
            if r.status == 200:      # B's sandbox never described to A
                assert b'"id":"' + sb.encode() not in r.data.replace(b" ", b""), (what, r)
            assert r.status < 500, (what, r)
            if r.status == 200:
                # a 200 may only be a normalised path that stayed inside
                assert b"HOST-ONLY" not in r.data
        for suffix in (".d", ".up", ".v", ""):
            assert not os.path.lexists(f"/tmp/{path.name}{suffix}/f")
            if suffix:
                assert not os.path.lexists(f"/tmp/{path.name}{suffix}"), suffix
        assert api_b.sandbox(sb)["status"] == "running"
        assert path.read_text() == content
        healthy(api)
    finally:
        api_b.stop(sb)


def test_one_mib_headers(api, sec_daemon):
    big = "A" * (1 << 20)
    for req in (f"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n",
                f"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {big}\r\n\r\n",
                "GET /v1/health HTTP/1.1\r\nHost: x\r\n" + "X-H: y\r\n" * 60000 + "\r\n",
                f"GET /v1/health?{big} HTTP/1.1\r\nHost: x\r\n\r\n",
                f"GET /v1/health?{big * 16} HTTP/1.1\r\nHost: x\r\n\r\n"):
        # The daemon answers and closes long before it could read it all; the
        # answer still reaches the client (no reset that would swallow it).
        out = raw_http(sec_daemon.port, req.encode(), read_timeout=10)
        st = http_status(out)
        assert st is not None and 400 <= st < 500, (len(req), out[:200])
    healthy(api)


def test_one_gib_content_length_refused_early(api, sec_daemon, sandbox):
    t0 = time.monotonic()
    req = (f"PUT /v1/sandboxes/{sandbox}/files HTTP/1.1\r\nHost: x\r\n"
           f"Authorization: Bearer {TOKENS['A']}\r\nContent-Type: application/x-tar\r\n"
           f"Content-Length: {1 << 30}\r\n\r\n").encode() + b"\0" * 65536
    out = raw_http(sec_daemon.port, req, read_timeout=10)
    assert time.monotonic() - t0 < 8, "the daemon waited for the 1 GiB body"
    assert http_status(out) == 413, out[:300]
    for route in ("/v1/sandboxes", f"/v1/sandboxes/{sandbox}/commands"):
        req = (f"POST {route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKENS['A']}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {1 << 30}\r\n\r\n{{").encode()
        out = raw_http(sec_daemon.port, req, read_timeout=10)
        assert http_status(out) == 413, (route, out[:300])
    healthy(api)


def test_chunked_never_ending_body_is_cut(api, sec_daemon, sandbox):
    s = socket.create_connection(("127.0.0.1", sec_daemon.port), timeout=20)
    s.sendall((f"PUT /v1/sandboxes/{sandbox}/files HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {TOKENS['A']}\r\nContent-Type: application/x-tar\r\n"
               "Transfer-Encoding: chunked\r\n\r\n").encode())
    chunk = b"100000\r\n" + b"\0" * 0x100000 + b"\r\n"
    sent, t0, resp = 0, time.monotonic(), b""
    s.setblocking(False)
    try:
        while sent < (2 << 30) and time.monotonic() - t0 < 60:
            try:
                s.send(chunk)
                sent += len(chunk)
            except BlockingIOError:
                time.sleep(0.001)
            except OSError:
                break
            try:
                d = s.recv(4096)
                if d:
                    resp += d
                    break
                break
            except BlockingIOError:
                pass
        s.settimeout(5)
        try:
            resp += s.recv(4096)
        except OSError:
            pass
    finally:
        s.close()
    print(f"\nchunked flood: cut after {sent >> 20} MiB with {resp[:40]!r}")
    assert sent < (1 << 30), f"the daemon accepted {sent >> 20} MiB of a never-ending body"
    assert http_status(resp) in (None, 400, 413), resp[:200]
    healthy(api)
    assert api.run(sandbox, "/bin/echo", "ok").stdout == b"ok\n"


def test_slowloris_clients_do_not_starve_others(api, sec_daemon):
    socks = []
    stop = threading.Event()
    for _ in range(64):
        s = socket.create_connection(("127.0.0.1", sec_daemon.port), timeout=5)
        s.sendall(b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)

    def dribble():
        while not stop.is_set():
            for s in socks:
                try:
                    s.send(b"X-a: b\r\n")
                except OSError:
                    pass
            stop.wait(0.5)
    t = threading.Thread(target=dribble, daemon=True)
    t.start()
    try:
        lat = []
        for _ in range(10):
            t0 = time.monotonic()
            assert api.health(timeout=5).status == 200
            assert isinstance(api.list(), list)
            lat.append(time.monotonic() - t0)
            time.sleep(0.2)
        assert max(lat) < 2, lat
    finally:
        stop.set()
        t.join()
        for s in socks:
            s.close()


def test_2000_idle_connections_normal_client_still_served(api, sec_daemon):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    socks = []
    try:
        for _ in range(2000):
            try:
                socks.append(socket.create_connection(("127.0.0.1", sec_daemon.port), timeout=2))
            except OSError:
                break
        time.sleep(0.5)
        ok = 0
        for _ in range(5):
            try:
                if api.health(timeout=3).status == 200:
                    ok += 1
            except OSError:
                pass
        assert ok == 5, f"{ok}/5 health requests served with {len(socks)} idle connections open"
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if api.health(timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.2)


def test_invalid_utf8_and_deeply_nested_json(api, sec_daemon, sandbox):
    n = len(api.list())
    bodies = [b'{"cmd": "/bin/echo", "args": ["\xff\xfe"]}', b'{"resources": {"disk": "\xc0\xaf"}}',
              b"[" * 10000 + b"]" * 10000, b'{"a":' * 10000 + b"1" + b"}" * 10000,
              b"[" * 200000, b'{"cmd": "/bin/true", "cmd": "/bin/false"}', b'{"cmd": "\\ud800"}',
              b"\x00" * 100, b'{"env": {"A\\u0000B": "x"}, "cmd": "/bin/true"}']
    for path in ("/v1/sandboxes", f"/v1/sandboxes/{sandbox}/commands",
                 f"/v1/sandboxes/{sandbox}/files/mkdir", f"/v1/sandboxes/{sandbox}/extend",
                 "/v3/sandboxes"):
        for b in bodies:
            r = api.request("POST", path, raw=b, headers={"Content-Type": "application/json"})
            assert 400 <= r.status < 500, (path, b[:40], r)
    r = api.request("PUT", f"/v1/sandboxes/{sandbox}/network-policy", raw=b"[" * 10000,
                    headers={"Content-Type": "application/json"})
    assert 400 <= r.status < 500, r
    assert len(api.list()) == n, "a hostile body created a sandbox"
    assert api.cmd_list(sandbox).json["commands"] == []
    healthy(api)
