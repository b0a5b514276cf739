# SPDX-License-Identifier: MIT
"""HTTP-layer tests of airlockd's API against the in-memory fake daemon.

The binary is built from src/api/{,native/,vercel/,e2b/}*.c + tests/api/fake_daemon.c + api_test_main.c
with gcc in a session fixture, or taken from $API_TEST_BIN.
Only the standard library is used (http.client, socket).
"""
import base64
import gzip
import http.client
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOK_A, TOK_B = "tok-team-a-0123456789", "tok-team-b-9876543210"
CFLAGS = ("-std=gnu17 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes "
          "-Wmissing-declarations -Wformat=2 -D_GNU_SOURCE -Wno-unused-parameter "
          "-Wno-missing-field-initializers -g -O1").split()


def build(tmp):
    if os.environ.get("API_TEST_BIN"):
        return os.environ["API_TEST_BIN"]
    out = os.path.join(tmp, "api_test")
    srcs = sorted(os.path.join(d, f) for d in (os.path.join(ROOT, "src/api", sub)
                                                for sub in ("", "native", "vercel", "e2b"))
                  for f in os.listdir(d) if f.endswith(".c"))
    srcs += [os.path.join(ROOT, p) for p in (
        "tests/api/fake_daemon.c", "tests/api/api_test_main.c", "src/common/error.c",
        "src/common/xalloc.c", "src/common/utf8.c", "src/common/parse.c", "src/common/path.c",
        "src/jail/spec.c", "src/net/http_req.c")]
    pc = subprocess.run(["pkg-config", "--cflags", "--libs", "libmicrohttpd", "jansson", "libarchive",
                         "libcrypto", "zlib", "gnutls"],
                        check=True, capture_output=True, text=True).stdout.split()
    subprocess.run(["gcc", *CFLAGS, "-I" + os.path.join(ROOT, "include"),
                    "-I" + os.path.join(ROOT, "src"), "-o", out, *srcs, *pc,
                    "-lz", "-lm", "-lpthread"], check=True)
    return out


class Server:
    def __init__(self, binary, tmp, *extra):
        self.tokens = os.path.join(tmp, "tokens")
        with open(self.tokens, "w") as f:
            f.write(f"# test tokens\n{TOK_A} team-a\n\n{TOK_B} team-b  # second team\n")
        self.sock = os.path.join(tmp, "api.sock")
        self.errlog = open(os.path.join(tmp, "stderr.log"), "w+")
        self.proc = subprocess.Popen(
            [binary, "--tokens", self.tokens, "--listen", "127.0.0.1:0", "--socket", self.sock,
             *extra], stdout=subprocess.PIPE, stderr=self.errlog, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("port "), line
        self.port = int(line.split()[1])
        assert self.proc.stdout.readline().strip() == "ready"

    def stderr(self):
        self.errlog.flush()
        with open(self.errlog.name) as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(10) == 0


@pytest.fixture(scope="session")
def binary(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("bin")))


@pytest.fixture(scope="session")
def server(binary, tmp_path_factory):
    s = Server(binary, str(tmp_path_factory.mktemp("srv")), "--timeout", "3")
    yield s
    s.stop()


def request(server, method, path, body=None, token=TOK_A, headers=None, raw=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    try:
        conn.request(method, path, body=data, headers=h)
    except (BrokenPipeError, ConnectionResetError):
        pass  # an early answer to a request too big to read; read it below
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp, payload


def jreq(server, method, path, body=None, **kw):
    resp, payload = request(server, method, path, body, **kw)
    ctype = resp.getheader("content-type")
    if ctype == "application/json":
        payload.decode("ascii")  # ASCII-only output
        return resp.status, json.loads(payload)
    return resp.status, payload


def assert_error(status, body, want_status, code):
    assert status == want_status, body
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str)


def ndjson(payload):
    return [json.loads(l) for l in payload.decode("ascii").splitlines() if l]


@pytest.fixture
def sbx(server):
    st, body = jreq(server, "POST", "/v1/sandboxes", {})
    assert st == 201
    return body["sandbox"]["id"]


# --- auth ---------------------------------------------------------------------------

def test_health_without_auth(server):
    st, body = jreq(server, "GET", "/v1/health", token=None)
    assert st == 200 and body["ok"] is True and isinstance(body["version"], str)


def test_metrics_are_off_without_their_flags(server):
    for token in (None, TOK_A):
        st, body = jreq(server, "GET", "/metrics", token=token)
        assert st == 404 and body["error"]["code"] == "not_found", body
        assert "--metrics-token-file" in body["error"]["message"], body


@pytest.mark.parametrize("token", [None, "wrong", TOK_A + "x", TOK_A[:-1], ""])
def test_auth_required(server, token):
    st, body = jreq(server, "GET", "/v1/sandboxes", token=token)
    assert_error(st, body, 401, "unauthorized")


def test_auth_scheme_must_be_bearer(server):
    st, body = jreq(server, "GET", "/v1/sandboxes", token=None,
                    headers={"Authorization": "Basic " + TOK_A})
    assert_error(st, body, 401, "unauthorized")


def test_unknown_path_needs_auth_then_404(server):
    st, body = jreq(server, "GET", "/v1/nope", token=None)
    assert st == 401
    st, body = jreq(server, "GET", "/v1/nope")
    assert_error(st, body, 404, "not_found")


def test_other_team_sees_404(server, sbx):
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}", token=TOK_B)
    assert_error(st, body, 404, "not_found")
    st, body = jreq(server, "GET", "/v1/sandboxes", token=TOK_B)
    assert sbx not in [s["id"] for s in body["sandboxes"]]
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands", {"cmd": "echo"},
                    token=TOK_B)
    assert_error(st, body, 404, "not_found")


# --- sandboxes -----------------------------------------------------------------------

def test_create_full_body(server):
    st, body = jreq(server, "POST", "/v1/sandboxes", {
        "image": "/srv/img", "resources": {"vcpus": 2, "memory": "512M", "disk": 1 << 30},
        "timeout": 60000, "env": {"A": "1"}, "workdir": "/work",
        "network_policy": {"allow": ["*.npmjs.org"], "subnets": {"deny": ["10.0.0.0/8"]}}})
    assert st == 201, body
    s = body["sandbox"]
    assert s["resources"]["memory_bytes"] == 512 << 20 and s["resources"]["vcpus"] == 2
    assert s["workdir"] == "/work" and s["timeout_ms"] == 60000
    assert s["network_policy"]["allow"] == ["*.npmjs.org"]


def test_create_memory_as_integer(server):
    st, body = jreq(server, "POST", "/v1/sandboxes", {"resources": {"memory": 1048576}})
    assert st == 201 and body["sandbox"]["resources"]["memory_bytes"] == 1048576


def test_create_empty_body(server):
    resp, payload = request(server, "POST", "/v1/sandboxes", raw=b"")
    assert resp.status == 201


def test_list_get(server, sbx):
    st, body = jreq(server, "GET", "/v1/sandboxes")
    assert st == 200 and sbx in [s["id"] for s in body["sandboxes"]]
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}")
    assert st == 200 and body["sandbox"]["id"] == sbx and body["sandbox"]["status"] == "running"
    st, body = jreq(server, "GET", "/v1/sandboxes/sbx_nope")
    assert_error(st, body, 404, "not_found")


def test_extend_and_stop(server, sbx):
    st, before = jreq(server, "GET", f"/v1/sandboxes/{sbx}")
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/extend", {"duration_ms": 5000})
    assert st == 200
    assert body["sandbox"]["expires_at"] == before["sandbox"]["expires_at"] + 5000
    for bad in ({}, {"duration_ms": 0}, {"duration_ms": -5}, {"duration_ms": "5"},
                {"duration_ms": 5, "x": 1}):
        st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/extend", bad)
        assert_error(st, body, 400, "bad_request")
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/stop")
    assert st == 200 and body["sandbox"]["status"] == "stopped"
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands", {"cmd": "echo"})
    assert_error(st, body, 410, "gone")
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/extend", {"duration_ms": 5})
    assert_error(st, body, 410, "gone")


@pytest.mark.parametrize("policy", ["allow-all", "deny-all", {"allow": ["a.com"]},
                                    {"allow": {"a.com": [{"transform": [{"headers": {}}]}]}},
                                    {"subnets": {"allow": ["10.0.0.0/8"], "deny": []}}, {}])
def test_network_policy_ok(server, sbx, policy):
    st, body = jreq(server, "PUT", f"/v1/sandboxes/{sbx}/network-policy", policy)
    assert st == 200, body
    assert body["sandbox"]["network_policy"] == policy
    assert body["sandbox"]["policy_generation"] >= 1


@pytest.mark.parametrize("policy", ["allow-some", 5, [], {"deny": []}, {"allow": "a.com"},
                                    {"allow": [1]}, {"subnets": {"maybe": []}},
                                    {"allow": {"a.com": [{"bogus": 1}]}}, None])
def test_network_policy_bad(server, sbx, policy):
    st, body = jreq(server, "PUT", f"/v1/sandboxes/{sbx}/network-policy", policy)
    assert_error(st, body, 400, "bad_request")


def test_network_policy_empty_body(server, sbx):
    resp, payload = request(server, "PUT", f"/v1/sandboxes/{sbx}/network-policy", raw=b"")
    assert resp.status == 400


# --- validation ----------------------------------------------------------------------

@pytest.mark.parametrize("raw,needle", [
    (b"{", "malformed"), (b"[1,2]", "object"), (b'{"a":1}{"b":2}', "malformed"),
    (b'{"timeout": 1, "timeout": 2}', "malformed"), (b"\"str\"", "object"),
    (b'{"image": "\xff\xfe"}', "UTF-8"), (b'{"image": "a\\u0000b"}', "malformed"),
])
def test_malformed_bodies(server, raw, needle):
    st, body = jreq(server, "POST", "/v1/sandboxes", raw=raw)
    assert_error(st, body, 400, "bad_request")
    assert needle in body["error"]["message"]


@pytest.mark.parametrize("payload,field", [
    ({"bogus": 1}, "bogus"), ({"resources": {"cpu": 1}}, "cpu"),
    ({"timeout": -1}, "timeout"), ({"timeout": 1.5}, "timeout"), ({"timeout": "10"}, "timeout"),
    ({"resources": {"memory": "lots"}}, "memory"), ({"resources": {"memory": -1}}, "memory"),
    ({"resources": {"memory": True}}, "memory"), ({"resources": {"vcpus": 0}}, "vcpus"),
    ({"resources": {"vcpus": "2"}}, "vcpus"), ({"resources": []}, "resources"),
    ({"env": {"A": 1}}, "env"), ({"env": ["A=1"]}, "env"), ({"env": {"A=B": "x"}}, "env"),
    ({"image": 5}, "image"), ({"image": ""}, "image"), ({"workdir": "rel"}, "workdir"),
    ({"network_policy": "open"}, "network_policy"),
])
def test_create_validation(server, payload, field):
    st, body = jreq(server, "POST", "/v1/sandboxes", payload)
    assert_error(st, body, 400, "bad_request")
    assert field in body["error"]["message"], body


def test_deeply_nested_json(server):
    raw = b"[" * 10000 + b"]" * 10000
    st, body = jreq(server, "POST", "/v1/sandboxes", raw=raw)
    assert_error(st, body, 400, "bad_request")
    raw = b'{"env":' + b'{"a":' * 10000 + b"1" + b"}" * 10001
    st, body = jreq(server, "POST", "/v1/sandboxes", raw=raw)
    assert_error(st, body, 400, "bad_request")
    assert jreq(server, "GET", "/v1/health")[0] == 200


def test_json_body_too_large(server, sbx):
    raw = b'{"image": "' + b"a" * (2 << 20) + b'"}'
    st, body = jreq(server, "POST", "/v1/sandboxes", raw=raw)
    assert_error(st, body, 413, "payload_too_large")
    assert jreq(server, "GET", "/v1/health")[0] == 200


def test_json_body_too_large_chunked(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    chunks = (b"x" * 65536 for _ in range(40))  # 2.5 MiB, no Content-Length
    conn.request("POST", "/v1/sandboxes", body=chunks, encode_chunked=True,
                 headers={"Authorization": "Bearer " + TOK_A})
    resp = conn.getresponse()
    assert resp.status == 413 and json.loads(resp.read())["error"]["code"] == "payload_too_large"


def test_expect_continue_too_large_answered_early(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                  TOK_A.encode() + b"\r\nContent-Length: 99999999\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 413")


def test_huge_header(server):
    st = None
    try:
        resp, _ = request(server, "GET", "/v1/sandboxes", headers={"X-Big": "a" * (1 << 20)})
        st = resp.status
    except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
        st = "closed"
    assert st == "closed" or 400 <= st < 500
    assert jreq(server, "GET", "/v1/health")[0] == 200


def test_many_headers(server):
    hdrs = {f"X-H{i}": "v" * 50 for i in range(2000)}
    try:
        resp, _ = request(server, "GET", "/v1/sandboxes", headers=hdrs)
        assert 400 <= resp.status < 500
    except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
        pass
    assert jreq(server, "GET", "/v1/health")[0] == 200


def test_wrong_method_405(server, sbx):
    st, body = jreq(server, "DELETE", f"/v1/sandboxes/{sbx}")
    assert st == 405 and body["error"]["code"] == "bad_request"
    resp, _ = request(server, "DELETE", "/v1/sandboxes")
    assert resp.getheader("Allow") in ("POST, GET", "GET, POST")


@pytest.mark.parametrize("path", ["/", "/v1", "/v1/sandboxes/", "/v9/sandboxes",
                                  "/v1/sandboxes/a/b/c/d/e/f", "/v1/sandboxes//stop"])
def test_unknown_paths(server, path):
    st, body = jreq(server, "GET", path)
    assert_error(st, body, 404, "not_found")


# --- commands ------------------------------------------------------------------------

def run_stream(server, sbx, body):
    resp, payload = request(server, "POST", f"/v1/sandboxes/{sbx}/commands",
                            dict(body, wait=True))
    assert resp.status == 200, payload
    assert resp.getheader("content-type") == "application/x-ndjson"
    return ndjson(payload)


def test_run_wait_stream(server, sbx):
    lines = run_stream(server, sbx, {"cmd": "echo", "args": ["hello", "world"]})
    assert lines[0]["type"] == "start" and lines[0]["command"]["status"] == "running"
    assert lines[-1]["type"] == "exit" and lines[-1]["command"]["exit_code"] == 0
    out = "".join(l["data"] for l in lines[1:-1] if l["type"] == "stdout")
    assert out == "hello world\n"
    assert all(set(l) == {"type", "data"} for l in lines[1:-1])


def test_run_exit_code_and_stderr(server, sbx):
    lines = run_stream(server, sbx, {"cmd": "stderr", "args": ["oops"], "env": {"EXIT": "3"}})
    assert "".join(l["data"] for l in lines if l["type"] == "stderr") == "oops\n"
    assert lines[-1]["command"]["exit_code"] == 3


def test_run_utf8_split_and_binary(server, sbx):
    lines = run_stream(server, sbx, {"cmd": "echo", "args": ["caf\u00e9 \u00fc\u00f6 \U0001f600"]})
    assert "".join(l.get("data", "") for l in lines[1:-1]) == "caf\u00e9 \u00fc\u00f6 \U0001f600\n"
    assert all("data_b64" not in l for l in lines)
    lines = run_stream(server, sbx, {"cmd": "binary"})
    out = [l for l in lines if l["type"] == "stdout"]
    raw = b"".join(base64.b64decode(l["data_b64"]) if "data_b64" in l
                   else l["data"].encode() for l in out)
    assert raw == b"caf\xc3\xa9\n\xff\xfe\n"
    assert "".join(l["data"] for l in out) == "caf\u00e9\n\ufffd\ufffd\n"


def test_run_detached_get_wait_logs_list(server, sbx):
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands",
                    {"cmd": "echo", "args": ["a", "b"], "cwd": "/tmp", "sudo": True,
                     "timeout": 5000, "wait": False})
    assert st == 201, body
    cid = body["command"]["id"]
    assert body["command"]["cwd"] == "/tmp" and body["command"]["sudo"] is True
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/commands/{cid}/wait?timeout_ms=5000")
    assert st == 200 and body["command"]["status"] == "finished"
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/commands/{cid}")
    assert st == 200 and body["command"]["exit_code"] == 0
    resp, payload = request(server, "GET", f"/v1/sandboxes/{sbx}/commands/{cid}/logs")
    assert resp.getheader("content-type") == "application/x-ndjson"
    lines = ndjson(payload)
    assert "".join(l["data"] for l in lines[:-1]) == "a b\n"
    assert lines[-1]["type"] == "exit" and lines[-1]["command"]["id"] == cid
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/commands")
    assert cid in [c["id"] for c in body["commands"]]
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/commands/cmd_nope")
    assert_error(st, body, 404, "not_found")


def test_wait_timeout_504_and_kill(server, sbx):
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands",
                    {"cmd": "sleep", "args": ["60000"]})
    cid = body["command"]["id"]
    t = time.monotonic()
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/commands/{cid}/wait?timeout_ms=700")
    assert_error(st, body, 504, "timeout")
    assert 0.6 < time.monotonic() - t < 5
    for bad in ("-1", "abc", "1e3", "99999999999"):
        st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/commands/{cid}/wait?timeout_ms={bad}")
        assert_error(st, body, 400, "bad_request")
    for bad in ({"signal": 0}, {"signal": 65}, {"signal": "TERM"}, {"sig": 9}):
        st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands/{cid}/kill", bad)
        assert_error(st, body, 400, "bad_request")
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands/{cid}/kill", {"signal": 9})
    assert st == 200 and body["command"]["signal"] == 9 and body["command"]["reason"] == "signaled"
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands/{cid}/kill")
    assert st == 200


def test_logs_follow_live(server, sbx):
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands",
                    {"cmd": "cat", "keep_stdin": True, "stdin": "first\n"})
    cid = body["command"]["id"]
    result = {}

    def follow():
        resp, payload = request(server, "GET", f"/v1/sandboxes/{sbx}/commands/{cid}/logs")
        result["lines"] = ndjson(payload)
    th = threading.Thread(target=follow)
    th.start()
    time.sleep(0.3)
    resp, payload = request(server, "POST",
                            f"/v1/sandboxes/{sbx}/commands/{cid}/stdin?close=false",
                            raw=b"second \xc3\xa9\n")
    assert resp.status == 200, payload
    resp, payload = request(server, "POST", f"/v1/sandboxes/{sbx}/commands/{cid}/stdin?close=true",
                            raw=b"third\n")
    assert resp.status == 200
    th.join(10)
    lines = result["lines"]
    assert "".join(l["data"] for l in lines[:-1]) == "first\nsecond \u00e9\nthird\n"
    assert lines[-1]["type"] == "exit"
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands/{cid}/stdin", raw=b"x")
    assert_error(st, body, 409, "conflict")
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands/{cid}/stdin?close=maybe",
                    raw=b"x")
    assert_error(st, body, 400, "bad_request")


@pytest.mark.parametrize("payload,field", [
    ({}, "cmd"), ({"cmd": ""}, "cmd"), ({"cmd": 1}, "cmd"), ({"cmd": "a", "args": "x"}, "args"),
    ({"cmd": "a", "args": [1]}, "args"), ({"cmd": "a", "sudo": "yes"}, "sudo"),
    ({"cmd": "a", "timeout": -5}, "timeout"), ({"cmd": "a", "wait": 1}, "wait"),
    ({"cmd": "a", "stdin": 5}, "stdin"), ({"cmd": "a", "shell": True}, "shell"),
    ({"cmd": "a", "env": {"K": None}}, "env"),
])
def test_command_validation(server, sbx, payload, field):
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands", payload)
    assert_error(st, body, 400, "bad_request")
    assert field in body["error"]["message"]


def test_stream_client_vanishes(server, sbx):
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands",
                    {"cmd": "sleep", "args": ["30000"]})
    cid = body["command"]["id"]
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(f"GET /v1/sandboxes/{sbx}/commands/{cid}/logs HTTP/1.1\r\nHost: x\r\n"
              f"Authorization: Bearer {TOK_A}\r\n\r\n".encode())
    assert b"200 OK" in s.recv(4096)
    s.close()
    deadline = time.monotonic() + 5
    while f"logs_close {cid}" not in server.stderr():
        assert time.monotonic() < deadline, "the stream did not notice the client left"
        time.sleep(0.1)
    jreq(server, "POST", f"/v1/sandboxes/{sbx}/commands/{cid}/kill")


# --- files ---------------------------------------------------------------------------

def make_tar(files, gz=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_files_roundtrip(server, sbx):
    st, body = jreq(server, "PUT", f"/v1/sandboxes/{sbx}/files?dir=/workspace/app",
                    raw=make_tar({"a.txt": b"hello", "sub/b.bin": b"\x00\xff"}))
    assert st == 200 and body == {"ok": True}, body
    st, body = jreq(server, "PUT", f"/v1/sandboxes/{sbx}/files",
                    raw=make_tar({"c.txt": b"gz!"}, gz=True))
    assert st == 200, body
    resp, payload = request(server, "GET",
                            f"/v1/sandboxes/{sbx}/files/content?path=/workspace/app/sub/b.bin")
    assert resp.status == 200 and payload == b"\x00\xff"
    assert resp.getheader("content-type") == "application/octet-stream"
    resp, payload = request(server, "GET", f"/v1/sandboxes/{sbx}/files/content?path=c.txt")
    assert payload == b"gz!"
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/files?path=/workspace/app")
    assert st == 200
    assert sorted((e["name"], e["type"]) for e in body["entries"]) == [("a.txt", "file"),
                                                                       ("sub", "dir")]
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/files")
    assert "app" in [e["name"] for e in body["entries"]]


def test_files_errors(server, sbx):
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/files/content?path=/nope")
    assert_error(st, body, 404, "not_found")
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/files/content")
    assert_error(st, body, 400, "bad_request")
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/files/content?path=/workspace")
    assert_error(st, body, 400, "bad_request")
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/files/content?path=%ff")
    assert_error(st, body, 400, "bad_request")
    st, body = jreq(server, "PUT", f"/v1/sandboxes/{sbx}/files", raw=b"")
    assert_error(st, body, 400, "bad_request")
    st, body = jreq(server, "PUT", f"/v1/sandboxes/{sbx}/files",
                    raw=make_tar({"../evil": b"x"}))
    assert_error(st, body, 400, "bad_request")
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/files?path=/missing")
    assert_error(st, body, 404, "not_found")


def test_mkdir(server, sbx):
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/files/mkdir", {"path": "d1"})
    assert st == 200 and body == {"ok": True}
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/files/mkdir", {"path": "d1"})
    assert_error(st, body, 409, "conflict")
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/files/mkdir", {"path": "x/y/z"})
    assert_error(st, body, 404, "not_found")
    st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/files/mkdir",
                    {"path": "x/y/z", "parents": True})
    assert st == 200
    st, body = jreq(server, "GET", f"/v1/sandboxes/{sbx}/files?path=x/y")
    assert [e["name"] for e in body["entries"]] == ["z"]
    for bad in ({}, {"path": 3}, {"path": "a", "parents": "yes"}, {"path": "a", "mode": 1}):
        st, body = jreq(server, "POST", f"/v1/sandboxes/{sbx}/files/mkdir", bad)
        assert_error(st, body, 400, "bad_request")


def test_upload_limit(binary, tmp_path):
    srv = Server(binary, str(tmp_path), "--max-upload", str(1 << 20))
    try:
        st, body = jreq(srv, "PUT", "/v1/sandboxes/sbx_x/files", raw=b"\0" * (2 << 20))
        assert_error(st, body, 413, "payload_too_large")
    finally:
        srv.stop()


# --- transport -----------------------------------------------------------------------

def test_unix_socket(server):
    assert oct(os.stat(server.sock).st_mode & 0o777) == "0o600"
    s = socket.socket(socket.AF_UNIX)
    s.connect(server.sock)
    s.sendall(f"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOK_A}\r\n"
              "Connection: close\r\n\r\n".encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"sandboxes" in body


def test_slowloris_does_not_block_others(server):
    slow = socket.create_connection(("127.0.0.1", server.port))
    slow.sendall(b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthoriz")
    t = time.monotonic()
    for _ in range(5):
        assert jreq(server, "GET", "/v1/health")[0] == 200
    assert time.monotonic() - t < 2
    # The idle timeout (3 s in this server) closes the slow connection.
    slow.settimeout(10)
    try:
        assert slow.recv(100) == b""
    except ConnectionResetError:
        pass
    slow.close()


def test_concurrent_requests(server, sbx):
    results = []
    lock = threading.Lock()

    def one(i):
        try:
            if i % 2:
                st, _ = jreq(server, "GET", f"/v1/sandboxes/{sbx}")
            else:
                st, _ = jreq(server, "POST", "/v1/sandboxes", {"env": {"I": str(i)}})
        except Exception as e:  # noqa: BLE001
            st = repr(e)
        with lock:
            results.append(st)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(200)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert len(results) == 200 and all(r in (200, 201) for r in results), results


def test_keep_alive_reuse(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    for _ in range(3):
        conn.request("GET", "/v1/sandboxes", headers={"Authorization": "Bearer " + TOK_A})
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
    conn.close()


def test_bad_tokens_file(binary, tmp_path):
    p = tmp_path / "tokens"
    p.write_text("onlytoken\n")
    r = subprocess.run([binary, "--tokens", str(p), "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "tokens file" in r.stderr


def test_socket_in_use_refused(binary, server, tmp_path):
    r = subprocess.run([binary, "--tokens", server.tokens, "--socket", server.sock],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "already" in r.stderr


def test_openapi_matches_the_served_routes():
    import yaml  # python3-yaml, installed by scripts/setup
    import re
    doc = yaml.safe_load(open(os.path.join(ROOT, "docs/api.yaml")))
    assert doc["openapi"].startswith("3.0")
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    src = open(os.path.join(ROOT, "src/api/native/routes_native.c")).read()
    src = src.replace('SBX "', '"/v1/sandboxes/{id}').replace("SBX,", '"/v1/sandboxes/{id}",')
    routes = re.findall(r'\{\s*"([A-Z]+)",\s*"(/v1[^"]*)"', src)
    assert len(routes) == 28
    metrics = open(os.path.join(ROOT, "src/api/metrics.c")).read()
    routes += re.findall(r'\{\s*"([A-Z]+)",\s*"(/metrics)"', metrics)
    assert len(routes) == 29
    # The E2B front end: its control plane and envd's routes (docs/e2b.md).
    e2b = open(os.path.join(ROOT, "src/api/e2b/routes_e2b.c")).read()
    e2b = e2b.replace('"/v2" SBX "', '"/v2/sandboxes/{id}').replace('SBX "', '"/sandboxes/{id}')
    e2b = e2b.replace("SBX,", '"/sandboxes/{id}",')
    e2b_routes = re.findall(r'\{"([A-Z]+)", "(/[^"]*)", e2b_', e2b)
    envd = open(os.path.join(ROOT, "src/api/e2b/envd.c")).read()
    envd = envd.replace('PROC "', '"/process.Process/').replace('FS "', '"/filesystem.Filesystem/')
    e2b_routes += re.findall(r'\{"([A-Z]+)", "(/[^"]*)", e2b_', envd)
    jupyter = open(os.path.join(ROOT, "src/api/e2b/jupyter.c")).read()
    e2b_routes += re.findall(r'\{"([A-Z]+)", "(/[^"]*)", e2b_', jupyter)
    assert len(e2b_routes) == 41, e2b_routes
    routes += e2b_routes
    for method, path in routes:
        assert path in doc["paths"], path
        assert method.lower() in doc["paths"][path], (method, path)
    documented = set()
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            documented.add((method.upper(), path))
            assert "responses" in op and op["responses"], (method, path)
    # Both ways: nothing served is undocumented, nothing documented is missing.
    assert documented == set(routes), documented ^ set(routes)
