"""The E2B-compatible API of airlockd (docs/e2b.md).

test_sdk_flow drives the daemon with the real, unmodified e2b SDK (2.51.0, and 2.50.0 for
the old create/connect paths; pinned in package.json; flow.mjs). The other tests speak
raw HTTP: the Connect framing at the trust boundary (truncated and huge envelopes, wrong
content types, unknown methods), authentication, a stream whose sandbox dies, 429s, the
domain form of routing.

Run: /usr/bin/python3 -m pytest tests/e2b -v   (needs build/airlock; node and npm for the
SDK flow, which installs node_modules with `npm ci` when missing).
"""

import base64
import hashlib
import http.client
import json
import os
import pathlib
import secrets
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import zlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
AIRLOCK_BIN = os.environ.get("AIRLOCK_BIN", str(REPO / "build" / "airlock"))
TOKENS = {"A": "tokA_" + secrets.token_hex(16), "B": "tokB_" + secrets.token_hex(16)}
DOMAIN = "e2b.airlock.test"
MAX_SBX = 3  # --team-max-sandboxes: team B meets it in test_429_carries_retry_after


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def req(port, method, path, body=b"", headers=None, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def api(port, method, path, body=None, team="A"):
    st, h, data = req(port, method, path, json.dumps(body).encode() if body is not None else b"",
                      {"X-API-KEY": TOKENS[team], "Content-Type": "application/json"})
    return st, h, (json.loads(data) if data else None)


@pytest.fixture(scope="module")
def daemon():
    if not os.access(AIRLOCK_BIN, os.X_OK):
        pytest.fail(f"{AIRLOCK_BIN} is missing: build it first (ninja -C build)")
    tmp = tempfile.mkdtemp(prefix="airlock-e2b-")
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        for k in TOKENS:
            f.write(f"{TOKENS[k]} team_e2b_{k.lower()}\n")
    port = free_port()
    log = open(os.path.join(tmp, "daemon.log"), "wb")
    proc = subprocess.Popen([AIRLOCK_BIN, "serve", "--state-dir", os.path.join(tmp, "state"),
                             "--listen", f"127.0.0.1:{port}", "--tokens", tokens,
                             "--e2b-domain", DOMAIN, "--team-max-sandboxes", str(MAX_SBX)],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while True:
        try:
            if req(port, "GET", "/v1/health", timeout=2)[0] == 200:
                break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("airlock serve did not start: "
                        + open(os.path.join(tmp, "daemon.log")).read()[-2000:])
        time.sleep(0.05)
    yield port
    for team in TOKENS:
        st, _, lst = api(port, "GET", "/v2/sandboxes", team=team)
        for s in (lst if st == 200 else []):
            api(port, "DELETE", f"/sandboxes/{s['sandboxID']}", team=team)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def sbx(daemon):
    """One sandbox of team A for the raw tests: (id, envdAccessToken)."""
    st, _, j = api(daemon, "POST", "/v2/sandboxes", {"templateID": "base", "timeout": 300})
    assert st == 201, j
    yield j["sandboxID"], j["envdAccessToken"]
    api(daemon, "DELETE", f"/sandboxes/{j['sandboxID']}")


def envd(port, sbx, path, body=b"", ctype="application/json", token=None, extra=None,
         method="POST"):
    sid, tok = sbx
    h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "Content-Type": ctype}
    if token is not False:
        h["X-Access-Token"] = tok if token is None else token
    h.update(extra or {})
    return req(port, method, path, body, h)


def envelope(obj, flags=0):
    data = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    return struct.pack(">BI", flags, len(data)) + data


def envelopes(data):
    """[(flags, json)] of a Connect stream body; every byte must belong to an envelope."""
    out, i = [], 0
    while i < len(data):
        assert len(data) - i >= 5, data[i:]
        flags, n = struct.unpack(">BI", data[i:i + 5])
        assert len(data) - i - 5 >= n, data[i:]
        out.append((flags, json.loads(data[i + 5:i + 5 + n])))
        i += 5 + n
    return out


def stream_error(data):
    msgs = envelopes(data)
    assert msgs and msgs[-1][0] == 2, msgs
    return msgs[-1][1].get("error")


@pytest.fixture(scope="module")
def node_modules():
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node and npm are needed to run the E2B SDK flow")
    if not (HERE / "node_modules" / "e2b").is_dir() or not (HERE / "node_modules" / "e2b-250").is_dir():
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"npm ci failed:\n{r.stdout}\n{r.stderr}"
    return node


# --------------------------------------------------------------------------
# the real SDK

FLOW_STEPS = ["create", "commands.run", "commands.background+wait+list", "commands.kill",
              "commands.sendStdin+closeStdin", "commands.connect", "files", "files.url",
              "files.watchDir", "pty", "setTimeout+connect", "list+getHost+getMetrics",
              "network", "fork+snapshots", "pause+connect", "kill", "sdk-2.50", "runCode"]


def test_sdk_flow(daemon, node_modules):
    env = dict(os.environ, E2B_API_URL=f"http://127.0.0.1:{daemon}",
               E2B_SANDBOX_URL=f"http://127.0.0.1:{daemon}", E2B_API_KEY=TOKENS["A"],
               AIRLOCK_TOKEN=TOKENS["A"])
    for k in ("E2B_DEBUG", "E2B_DOMAIN", "E2B_ACCESS_TOKEN"):
        env.pop(k, None)
    r = subprocess.run([node_modules, "flow.mjs"], cwd=HERE, env=env, capture_output=True,
                       text=True, timeout=300)
    out = r.stdout.strip().splitlines()
    report = f"stdout:\n{r.stdout}\nstderr:\n{r.stderr[-3000:]}"
    assert r.returncode == 0, report
    assert out and out[-1] == f"{len(FLOW_STEPS)} passed, 0 failed", report
    assert out[:-1] == [f"ok {s}" for s in FLOW_STEPS], report


# --------------------------------------------------------------------------
# the Connect framing: bad input answers a Connect error, never a crash or a hang

START = "/process.Process/Start"
STREAM = "application/connect+json"
ECHO = {"process": {"cmd": "/bin/echo", "args": ["hi"]}, "stdin": False}


def test_stream_runs_a_command(daemon, sbx):
    st, h, data = envd(daemon, sbx, START, envelope(ECHO), STREAM)
    assert st == 200 and h["content-type"] == STREAM
    msgs = envelopes(data)
    assert msgs[0] == (0, {"event": {"start": {"pid": msgs[0][1]["event"]["start"]["pid"]}}})
    out = b"".join(base64.b64decode(m["event"]["data"]["stdout"]) for f, m in msgs
                   if f == 0 and "data" in m.get("event", {}))
    assert out == b"hi\n"
    assert msgs[-2][1]["event"]["end"] == {"exitCode": 0, "exited": True, "status": "exit status 0"}
    assert msgs[-1] == (2, {})


def test_pty_runs_the_argv_it_was_given(daemon, sbx):
    args = ["it's", "$HOME", "a;b", "`id`"]
    st, _, data = envd(daemon, sbx, START, envelope(
        {"process": {"cmd": "/bin/echo", "args": args}, "pty": {"size": {"cols": 80, "rows": 5}}}),
        STREAM)
    msgs = envelopes(data)
    out = b"".join(base64.b64decode(m["event"]["data"]["pty"]) for f, m in msgs
                   if f == 0 and "data" in m.get("event", {}))
    assert st == 200 and out == " ".join(args).encode() + b"\r\n", msgs
    assert msgs[-2][1]["event"]["end"]["exitCode"] == 0


@pytest.mark.parametrize("body,code,words", [
    (b"", "invalid_argument", "envelope is required"),
    (b"\x00\x00", "invalid_argument", "truncated envelope header"),
    (b"\x00\x00\x00\x00\x10{}", "invalid_argument", "truncated envelope"),
    (b"\x00\x7f\xff\xff\xff{}", "resource_exhausted", "larger than the message limit"),
    (envelope(ECHO) + envelope(ECHO), "invalid_argument", "more than one envelope"),
    (envelope(ECHO, flags=1), "invalid_argument", "compressed"),
    (envelope(ECHO, flags=2), "invalid_argument", "end-of-stream envelope"),
    (envelope(ECHO, flags=0x80), "invalid_argument", "unknown envelope flags"),
    (envelope(b"{\"process\":"), "invalid_argument", "not valid JSON"),
    (envelope(b"[1,2]"), "invalid_argument", "not a JSON object"),
    (envelope(b"{\"a\":1,\"a\":2}"), "invalid_argument", "not valid JSON"),
    (envelope(b"{\"a\":\"\\u0000\"}"), "invalid_argument", "not valid JSON"),
    (envelope(b"{\"a\":\"\xff\xfe\"}"), "invalid_argument", "not valid JSON"),
    (envelope({"process": {"cmd": ""}}), "invalid_argument", "must not be empty"),
    (envelope({"process": {"cmd": "/bin/true"}, "pty": {"size": {"cols": 0, "rows": 24}}}),
     "invalid_argument", "pty.size"),
    (envelope({"process": {"cmd": "/bin/true"}, "pty": {}}), "invalid_argument", "pty.size"),
])
def test_bad_stream_requests_end_with_a_connect_error(daemon, sbx, body, code, words):
    st, h, data = envd(daemon, sbx, START, body, STREAM)
    assert st == 200 and h["content-type"] == STREAM
    err = stream_error(data)
    assert err["code"] == code and words in err["message"], err


def test_a_huge_body_is_refused_before_it_is_read(daemon, sbx):
    st, _, data = envd(daemon, sbx, START, envelope(b"{\"x\":\"" + b"a" * (2 << 20) + b"\"}"),
                       STREAM)
    assert st == 413, data
    assert envd(daemon, sbx, "/health", method="GET")[0] == 204  # still serving


@pytest.mark.parametrize("path,ctype,status,code", [
    ("/filesystem.Filesystem/Stat", "text/plain", 415, "invalid_argument"),
    ("/filesystem.Filesystem/Stat", STREAM, 415, "invalid_argument"),
    (START, "application/json", 415, "invalid_argument"),
    ("/filesystem.Filesystem/Nope", "application/json", 501, "unimplemented"),
    ("/process.Process/StreamInput", "application/json", 501, "unimplemented"),
    ("/nothing.Here/Call", "application/json", 404, "not_found"),
])
def test_wrong_content_types_and_unknown_methods(daemon, sbx, path, ctype, status, code):
    st, _, data = envd(daemon, sbx, path, b'{"path":"/tmp"}', ctype)
    j = json.loads(data)
    assert (st, j["code"]) == (status, code), data
    assert j["message"]


@pytest.mark.parametrize("body,code", [
    (b"{", "invalid_argument"), (b"[]", "invalid_argument"), (b'{"path":""}', "invalid_argument"),
    (b'{"path":"/nonexistent/x"}', "not_found"),
])
def test_bad_unary_requests(daemon, sbx, body, code):
    st, _, data = envd(daemon, sbx, "/filesystem.Filesystem/Stat", body)
    assert json.loads(data)["code"] == code and st in (400, 404), data


def test_unary_stat(daemon, sbx):
    st, _, data = envd(daemon, sbx, "/filesystem.Filesystem/Stat", b'{"path":"/tmp"}')
    e = json.loads(data)["entry"]
    assert st == 200 and (e["name"], e["type"], e["path"]) == ("tmp", "FILE_TYPE_DIRECTORY", "/tmp")


# --------------------------------------------------------------------------
# authentication


@pytest.mark.parametrize("token", [False, "", "wrong", "x" * 64])
def test_envd_needs_the_access_token(daemon, sbx, token):
    st, _, data = envd(daemon, sbx, "/filesystem.Filesystem/Stat", b'{"path":"/tmp"}',
                       token=token if token is not False else False)
    assert st == 401 and json.loads(data)["code"] == "unauthenticated", data
    st, _, data = envd(daemon, sbx, START, envelope(ECHO), STREAM, token=token)
    assert st == 401 and json.loads(data)["code"] == "unauthenticated"


def test_a_token_opens_only_its_own_sandbox(daemon, sbx):
    st, _, other = api(daemon, "POST", "/v2/sandboxes", {"timeout": 60})
    try:
        st, _, data = envd(daemon, (other["sandboxID"], sbx[1]), "/filesystem.Filesystem/Stat",
                           b'{"path":"/tmp"}')
        assert st == 401, data
    finally:
        api(daemon, "DELETE", f"/sandboxes/{other['sandboxID']}")


def test_control_plane_needs_an_api_key(daemon, sbx):
    for key in (None, "", "nope"):
        h = {"X-API-KEY": key} if key is not None else {}
        st, _, data = req(daemon, "GET", f"/sandboxes/{sbx[0]}", headers=h)
        assert st == 401, data
    st, _, j = api(daemon, "GET", f"/sandboxes/{sbx[0]}", team="B")
    assert st == 404 and j["code"] == 404  # another team's sandbox does not exist


def test_signed_urls(daemon, sbx):
    sid, tok = sbx
    envd(daemon, sbx, "/files?path=/tmp/s.txt", b"signed", "application/octet-stream")

    def sign(path, op, exp=None):
        raw = f"{path}:{op}::{tok}" + (f":{exp}" if exp is not None else "")
        return "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")

    def get(q):
        return req(daemon, "GET", "/files?" + q.replace("+", "%2B").replace("/", "%2F").replace("%2Ftmp", "/tmp"),
                   headers={"E2b-Sandbox-Id": sid})

    ok = int(time.time()) + 60
    assert get(f"path=/tmp/s.txt&signature={sign('/tmp/s.txt', 'read', ok)}"
               f"&signature_expiration={ok}")[2] == b"signed"
    assert get(f"path=/tmp/s.txt&signature={sign('/tmp/s.txt', 'read')}")[2] == b"signed"
    old = int(time.time()) - 1
    assert get(f"path=/tmp/s.txt&signature={sign('/tmp/s.txt', 'read', old)}"
               f"&signature_expiration={old}")[0] == 401
    assert get(f"path=/tmp/s.txt&signature={sign('/tmp/s.txt', 'write')}")[0] == 401
    assert get(f"path=/tmp/other&signature={sign('/tmp/s.txt', 'read')}")[0] == 401
    assert get("path=/tmp/s.txt")[0] == 401


def test_multipart_upload_bad_input(daemon, sbx):
    b = "XbOuNdArY"
    good = (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/mp.txt\"\r\n"
            f"\r\npart body\r\n--{b}--\r\n").encode()
    ct = f"multipart/form-data; boundary={b}"
    st, _, data = envd(daemon, sbx, "/files", good, ct)
    assert st == 200 and json.loads(data) == [{"name": "mp.txt", "type": "file", "path": "/tmp/mp.txt"}]
    assert envd(daemon, sbx, "/files?path=/tmp/mp.txt", method="GET")[2] == b"part body"
    for bad in (good[:40], good.replace(b"\r\n\r\n", b"\r\n"), f"--{b}--\r\n".encode(), b"junk"):
        st, _, data = envd(daemon, sbx, "/files", bad, ct)
        assert st == 400 and json.loads(data)["message"], (bad, data)
    st, _, _ = envd(daemon, sbx, "/files?path=/tmp/x", b"x", "text/plain")
    assert st == 415
    import gzip
    st, _, _ = envd(daemon, sbx, "/files?path=/tmp/z", gzip.compress(b"zz"),
                    "application/octet-stream", extra={"Content-Encoding": "gzip"})
    assert st == 200 and envd(daemon, sbx, "/files?path=/tmp/z", method="GET")[2] == b"zz"
    z, mib = zlib.compressobj(1, zlib.DEFLATED, 31), b"\0" * (1 << 20)
    bomb = b"".join(z.compress(mib) for _ in range(300)) + z.flush()  # 300 MiB > the limit
    st, _, data = envd(daemon, sbx, "/files?path=/tmp/b", bomb, "application/octet-stream",
                       extra={"Content-Encoding": "gzip"})
    assert st == 400 and b"limit" in data, data
    st, _, _ = envd(daemon, sbx, "/files?path=/tmp/z", b"not gzip", "application/octet-stream",
                    extra={"Content-Encoding": "gzip"})
    assert st == 400
    st, _, _ = envd(daemon, sbx, "/files?path=/tmp/z", b"x", "application/octet-stream",
                    extra={"Content-Encoding": "br"})
    assert st == 415
    st, _, _ = envd(daemon, sbx, "/files?path=/etc/x", b"x", "application/octet-stream")
    assert st == 403
    st, _, _ = envd(daemon, sbx, "/files?path=/tmp/x&username=mallory", b"x",
                    "application/octet-stream")
    assert st == 400


# --------------------------------------------------------------------------
# behaviour users complain about elsewhere


def test_a_stream_whose_sandbox_dies_ends_with_an_error(daemon):
    st, _, j = api(daemon, "POST", "/v2/sandboxes", {"timeout": 60})
    assert st == 201, j
    sid, tok = j["sandboxID"], j["envdAccessToken"]
    conn = http.client.HTTPConnection("127.0.0.1", daemon, timeout=20)
    conn.request("POST", START, body=envelope({"process": {"cmd": "sleep", "args": ["100"]},
                                                "stdin": False}),
                 headers={"E2b-Sandbox-Id": sid, "X-Access-Token": tok, "Content-Type": STREAM})
    r = conn.getresponse()
    assert r.status == 200
    head = r.read(5)
    assert head[0] == 0
    r.read(struct.unpack(">I", head[1:])[0])  # the start event
    t0 = time.monotonic()
    assert api(daemon, "DELETE", f"/sandboxes/{sid}")[0] == 204
    rest = r.read()
    assert time.monotonic() - t0 < 10
    err = stream_error(rest)
    assert err["code"] == "unavailable" and "sandbox ended" in err["message"], err


def test_a_silent_stream_carries_keepalives(daemon, sbx):
    sid, tok = sbx
    st, _, data = req(daemon, "POST", START, envelope(
        {"process": {"cmd": "sleep", "args": ["2.5"]}, "stdin": False}),
        {"E2b-Sandbox-Id": sid, "X-Access-Token": tok, "Content-Type": STREAM,
         "Keepalive-Ping-Interval": "1"})
    events = [m.get("event", {}) for f, m in envelopes(data) if f == 0]
    assert st == 200 and sum("keepalive" in e for e in events) >= 2, events
    assert "start" in events[0] and events[-1]["end"]["exitCode"] == 0


def test_a_sandbox_that_timed_out_is_gone(daemon):
    st, _, j = api(daemon, "POST", "/v2/sandboxes", {"timeout": 1})
    assert st == 201
    sid, tok = j["sandboxID"], j["envdAccessToken"]
    for _ in range(100):
        if api(daemon, "GET", f"/sandboxes/{sid}")[0] == 404:
            break
        time.sleep(0.1)
    assert api(daemon, "GET", f"/sandboxes/{sid}")[0] == 404
    assert req(daemon, "GET", "/health", headers={"E2b-Sandbox-Id": sid})[0] == 502
    st, _, j2 = api(daemon, "POST", "/v2/sandboxes", {"timeout": 30})  # prunes the table
    assert st == 201
    assert envd(daemon, (sid, tok), "/filesystem.Filesystem/Stat", b'{"path":"/"}')[0] == 401
    assert api(daemon, "DELETE", f"/sandboxes/{sid}")[0] == 404
    api(daemon, "DELETE", f"/sandboxes/{j2['sandboxID']}")


def test_connect_without_timeout_keeps_the_lifetime(daemon, sbx):
    _, _, before = api(daemon, "GET", f"/sandboxes/{sbx[0]}")
    st, _, j = api(daemon, "POST", f"/v2/sandboxes/{sbx[0]}/connect", {})
    assert st == 200 and j["envdAccessToken"] == sbx[1]
    _, _, after = api(daemon, "GET", f"/sandboxes/{sbx[0]}")
    assert after["endAt"] == before["endAt"]
    st, _, j = api(daemon, "POST", f"/sandboxes/{sbx[0]}/connect", {"timeout": 5})
    assert st == 200
    assert api(daemon, "GET", f"/sandboxes/{sbx[0]}")[2]["endAt"] == before["endAt"]  # never shortens


def test_429_carries_retry_after(daemon):
    made = []
    try:
        for _ in range(MAX_SBX + 1):
            st, h, j = api(daemon, "POST", "/v2/sandboxes", {"timeout": 30}, team="B")
            if st != 201:
                break
            made.append(j["sandboxID"])
        assert st == 429 and h["retry-after"] == "1", (st, j)
        assert j["code"] == 429 and "most this daemon allows" in j["message"]
        st, h, j = api(daemon, "POST", f"/sandboxes/{made[0]}/fork", {}, team="B")
        assert st == 429 and h["retry-after"] == "1" and j["code"] == 429, j
        # room for one of two forks: the second is an error entry, as E2B's
        api(daemon, "DELETE", f"/sandboxes/{made.pop()}", team="B")
        st, _, j = api(daemon, "POST", f"/sandboxes/{made[0]}/fork", {"count": 2}, team="B")
        assert st == 201 and len(j) == 2 and j[1]["error"]["code"] == 429, j
        made.append(j[0]["sandbox"]["sandboxID"])
    finally:
        for s in made:
            api(daemon, "DELETE", f"/sandboxes/{s}", team="B")


def test_pause_and_resume_keep_the_files_under_the_same_id(daemon):
    st, _, j = api(daemon, "POST", "/v2/sandboxes", {"timeout": 60, "envVars": {"PV": "kept"},
                                                      "metadata": {"pz": "1"}})
    assert st == 201, j
    sid, sb = j["sandboxID"], (j["sandboxID"], j["envdAccessToken"])
    try:
        mark = secrets.token_hex(8)
        sh(daemon, sb, f"echo {mark} > /home/user/pause.txt")
        assert api(daemon, "POST", f"/sandboxes/{sid}/pause", {"memory": True})[0] == 400
        assert api(daemon, "POST", f"/sandboxes/{sid}/pause", {}, team="B")[0] == 404
        assert api(daemon, "POST", f"/sandboxes/{sid}/pause", {})[0] == 204
        st, _, info = api(daemon, "GET", f"/sandboxes/{sid}")
        assert st == 200 and info["state"] == "paused" and info["metadata"] == {"pz": "1"}
        assert api(daemon, "POST", f"/sandboxes/{sid}/pause", {})[0] == 409  # the SDK's false
        assert sid in [s["sandboxID"] for s in api(daemon, "GET", "/v2/sandboxes?state=paused")[2]]
        assert sid not in [s["sandboxID"] for s in api(daemon, "GET", "/v2/sandboxes?state=running")[2]]
        # envd of a paused sandbox: not running; the control plane: 409 where it must run
        assert envd(daemon, sb, START, envelope(ECHO), STREAM)[0] == 502
        assert req(daemon, "GET", "/health", headers={"E2b-Sandbox-Id": sid})[0] == 502
        for path, body in (("timeout", {"timeout": 5}), ("fork", {}), ("snapshots", {})):
            assert api(daemon, "POST", f"/sandboxes/{sid}/{path}", body)[0] == 409, path
        assert api(daemon, "GET", f"/snapshots?sandboxID={sid}")[2] == []  # its own is not listed
        assert api(daemon, "POST", f"/v2/sandboxes/{sid}/connect", {}, team="B")[0] == 404
        st, _, c = api(daemon, "POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 30})
        assert st == 201 and c["sandboxID"] == sid and c["envdAccessToken"] == sb[1], c
        assert sh(daemon, sb, "cat /home/user/pause.txt; echo $PV") == f"{mark}\nkept\n"
        host = {"Host": f"49983-{sid}.{DOMAIN}"}  # the domain form follows the mapping too
        assert req(daemon, "GET", "/health", headers=host)[0] == 204
        st, _, data = req(daemon, "GET", "/", headers={"Host": f"8080-{sid}.{DOMAIN}"})
        assert st == 502 and b"port_not_listening" in data, data  # the new daemon sandbox's port
        st, _, info = api(daemon, "GET", f"/sandboxes/{sid}")
        assert info["state"] == "running"
        end = time.mktime(time.strptime(info["endAt"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        assert 20 < end - time.time() <= 31, info  # the connect's timeout, not the create's
        assert api(daemon, "POST", f"/sandboxes/{sid}/connect", {})[0] == 200  # running now
        assert api(daemon, "POST", f"/sandboxes/{sid}/resume", {})[0] == 409
        # the legacy resume, and a second round on the new daemon sandbox
        sh(daemon, sb, "echo two >> /home/user/pause.txt")
        assert api(daemon, "POST", f"/sandboxes/{sid}/pause", {})[0] == 204
        assert api(daemon, "POST", f"/sandboxes/{sid}/resume", {"timeout": 30})[0] == 201
        assert sh(daemon, sb, "cat /home/user/pause.txt") == f"{mark}\ntwo\n"
        # a paused sandbox is killed (its snapshot deleted)
        assert api(daemon, "POST", f"/sandboxes/{sid}/pause", {})[0] == 204
    finally:
        assert api(daemon, "DELETE", f"/sandboxes/{sid}")[0] == 204
    assert api(daemon, "GET", f"/sandboxes/{sid}")[0] == 404
    assert api(daemon, "POST", f"/v2/sandboxes/{sid}/connect", {})[0] == 404
    assert api(daemon, "GET", "/v2/sandboxes?state=paused")[2] == []


def sh(port, sb, script):
    """stdout of /bin/sh -c script in sandbox sb (which must answer 200)."""
    body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", script]}, "stdin": False})
    st, _, data = envd(port, sb, START, body, STREAM)
    assert st == 200, data
    return b"".join(base64.b64decode(m["event"]["data"].get("stdout", "")) for f, m in envelopes(data)
                    if f == 0 and "data" in m.get("event", {})).decode()


def test_fork_copies_the_files_and_the_source_runs_on(daemon, sbx):
    mark = secrets.token_hex(8)
    sh(daemon, sbx, f"echo {mark} > /home/user/fork.txt")
    st, _, j = api(daemon, "POST", f"/sandboxes/{sbx[0]}/fork", {"timeout": 60, "count": 2})
    assert st == 201 and len(j) == 2, j
    kids = [(x["sandbox"]["sandboxID"], x["sandbox"]["envdAccessToken"]) for x in j]
    try:
        assert len({sbx[0], kids[0][0], kids[1][0]}) == 3 and len({sbx[1], kids[0][1], kids[1][1]}) == 3
        for k in kids:
            assert sh(daemon, k, "cat /home/user/fork.txt") == mark + "\n"
            st, _, info = api(daemon, "GET", f"/sandboxes/{k[0]}")
            assert st == 200 and info["state"] == "running" and info["templateID"] == "base"
        # each its own token and files; the source runs on, unchanged
        assert envd(daemon, (sbx[0], kids[0][1]), "/filesystem.Filesystem/Stat", b'{"path":"/"}')[0] == 401
        sh(daemon, kids[0], "echo changed > /home/user/fork.txt")
        assert sh(daemon, sbx, "cat /home/user/fork.txt") == mark + "\n"
        assert api(daemon, "GET", f"/sandboxes/{sbx[0]}")[2]["state"] == "running"
    finally:
        for k in kids:
            api(daemon, "DELETE", f"/sandboxes/{k[0]}")


@pytest.mark.parametrize("team,body,status", [
    ("B", {}, 404), ("A", {"count": 9}, 400), ("A", {"count": 0}, 400), ("A", {"what": 1}, 400),
])
def test_fork_refusals(daemon, sbx, team, body, status):
    st, _, j = api(daemon, "POST", f"/sandboxes/{sbx[0]}/fork", body, team=team)
    assert st == status and j["code"] == status, j
    assert api(daemon, "POST", "/sandboxes/nosuch/fork", {})[0] == 404


def test_snapshots_create_list_restore_delete(daemon, sbx):
    mark = secrets.token_hex(8)
    sh(daemon, sbx, f"echo {mark} > /home/user/snap.txt")
    st, _, j = api(daemon, "POST", f"/sandboxes/{sbx[0]}/snapshots", {"name": "mine"})
    assert st == 201 and j["snapshotID"].startswith("snp_") and j["names"] == [], j
    snap = j["snapshotID"]
    sh(daemon, sbx, "echo later > /home/user/snap.txt")  # the source runs on
    st, _, lst = api(daemon, "GET", f"/snapshots?sandboxID={sbx[0]}")
    assert st == 200 and {"snapshotID": snap, "names": []} in lst
    st, h, page = api(daemon, "GET", "/snapshots?limit=1")
    assert st == 200 and len(page) == 1 and page[0]["snapshotID"] == snap
    # another team sees nothing of it
    assert snap not in [s["snapshotID"] for s in api(daemon, "GET", "/snapshots", team="B")[2]]
    assert api(daemon, "POST", f"/sandboxes/{sbx[0]}/snapshots", {}, team="B")[0] == 404
    assert api(daemon, "DELETE", f"/templates/{snap}", team="B")[0] == 404
    assert api(daemon, "POST", "/v2/sandboxes", {"templateID": snap}, team="B")[0] == 404
    st, _, c = api(daemon, "POST", "/v2/sandboxes", {"templateID": snap, "timeout": 60})
    assert st == 201, c
    try:
        assert sh(daemon, (c["sandboxID"], c["envdAccessToken"]), "cat /home/user/snap.txt") == mark + "\n"
        assert api(daemon, "GET", f"/sandboxes/{c['sandboxID']}")[2]["templateID"] == snap
    finally:
        api(daemon, "DELETE", f"/sandboxes/{c['sandboxID']}")
    assert api(daemon, "DELETE", f"/templates/{snap}")[0] == 204
    assert api(daemon, "DELETE", f"/templates/{snap}")[0] == 404
    assert api(daemon, "DELETE", "/templates/base")[0] == 404
    st, _, j = api(daemon, "POST", "/v2/sandboxes", {"templateID": snap})
    assert st == 404 and j["code"] == 404 and j["message"], j


@pytest.mark.parametrize("body,words", [
    ({"templateID": "no-such-template"}, "image"),
    ({"templateID": "../etc"}, "template"),
    ({"autoPause": True}, "autoPause"),
    ({"network": {"denyOut": ["10.0.0.0/8"]}}, "allow list"),
    ({"network": {"rules": {"x.example": [{"transform": {}}]}}}, "rules"),
    ({"timeout": 0}, "timeout"),
])
def test_create_refuses_what_it_cannot_serve(daemon, body, words):
    st, _, j = api(daemon, "POST", "/v2/sandboxes", body)
    assert st == 400 and words in j["message"], j


def test_list_filters(daemon, sbx):
    st, h, lst = api(daemon, "GET", "/v2/sandboxes?state=running")
    assert st == 200 and sbx[0] in [s["sandboxID"] for s in lst]
    assert all(s["state"] == "running" and s["envdVersion"] == "0.5.7" for s in lst)
    assert api(daemon, "GET", "/v2/sandboxes?state=paused")[2] == []  # none is paused now
    assert api(daemon, "GET", "/v2/sandboxes?template=code-interpreter-v1")[2] == []
    assert sbx[0] in [s["sandboxID"] for s in api(daemon, "GET", "/v2/sandboxes?template=base")[2]]
    assert api(daemon, "GET", "/v2/sandboxes?limit=1000")[0] == 400
    assert api(daemon, "GET", "/v2/sandboxes", team="B")[2] == []  # another team sees none


def test_network_update_maps_onto_the_policy(daemon, sbx):
    st, _, _ = api(daemon, "PUT", f"/sandboxes/{sbx[0]}/network",
                   {"allowOut": ["pypi.org", "1.2.3.4"], "denyOut": ["0.0.0.0/0"]})
    assert st == 204
    st, _, data = req(daemon, "GET", f"/v1/sandboxes/{sbx[0]}",
                      headers={"Authorization": f"Bearer {TOKENS['A']}"})
    pol = json.loads(data)["sandbox"]["network_policy"]
    assert pol["allow"] == ["pypi.org"] and "1.2.3.4/32" in pol["subnets"]["allow"], pol
    st, _, _ = api(daemon, "PUT", f"/sandboxes/{sbx[0]}/network", {"allow_internet_access": True})
    assert st == 204
    st, _, data = req(daemon, "GET", f"/v1/sandboxes/{sbx[0]}",
                      headers={"Authorization": f"Bearer {TOKENS['A']}"})
    assert json.loads(data)["sandbox"]["network_policy"] == "allow-all"


# --------------------------------------------------------------------------
# the code interpreter's port (49999)


def ci(port, sbx, method, path, body=b"", token=None):
    h = {"E2b-Sandbox-Id": sbx[0], "E2b-Sandbox-Port": "49999", "Content-Type": "application/json"}
    if token is not False:
        h["X-Access-Token"] = sbx[1] if token is None else token
    return req(port, method, path, body, h)


def test_code_interpreter_raw(daemon, sbx):
    st, h, data = ci(daemon, sbx, "POST", "/execute", b'{"code":"print(1)\\n2"}')
    lines = [json.loads(x) for x in data.splitlines()]
    assert st == 200 and h["content-type"] == "application/x-ndjson", data
    assert lines == [{"type": "stdout", "text": "1\n"},
                     {"type": "result", "text": "2", "is_main_result": True},
                     {"type": "number_of_executions", "execution_count": 1}]
    for i in range(20):  # the context is free again as soon as an answer has ended
        st, _, data = ci(daemon, sbx, "POST", "/execute", b'{"code":"n = %d\\nn"}' % i)
        assert st == 200 and json.loads(data.splitlines()[0])["text"] == str(i), data
    assert ci(daemon, sbx, "POST", "/execute", b'{"code":"1"}', token=False)[0] == 401
    assert ci(daemon, sbx, "POST", "/execute", b'{"code":"1"}', token="bad")[0] == 401
    assert ci(daemon, sbx, "POST", "/execute", b'{"nope":1}')[0] == 400
    assert ci(daemon, sbx, "POST", "/execute", b'{"code":"1","language":"cobol"}')[0] == 400
    assert ci(daemon, sbx, "POST", "/execute", b'{"code":"1","context_id":"zz"}')[0] == 404
    # context calls carry no token in the SDK: served on the sandbox id, a wrong one refused
    st, _, data = ci(daemon, sbx, "POST", "/contexts", b'{"language":"python"}', token=False)
    assert st == 200 and json.loads(data)["language"] == "python"
    assert ci(daemon, sbx, "GET", "/contexts", token="bad")[0] == 401
    assert ci(daemon, (sbx[0] + "x", sbx[1]), "GET", "/contexts", token=False)[0] == 401


# --------------------------------------------------------------------------
# the domain form: Host <port>-<id>.<domain>


def test_domain_routing(daemon, sbx):
    sid, tok = sbx
    st, _, _ = req(daemon, "GET", "/health", headers={"Host": f"49983-{sid}.{DOMAIN}"})
    assert st == 204
    st, _, data = req(daemon, "POST", "/filesystem.Filesystem/Stat", b'{"path":"/"}',
                      {"Host": f"49983-{sid}.{DOMAIN}:443", "X-Access-Token": tok,
                       "Content-Type": "application/json"})
    assert st == 200 and json.loads(data)["entry"]["type"] == "FILE_TYPE_DIRECTORY"
    st, _, data = req(daemon, "GET", "/", headers={"Host": f"8080-{sid}.{DOMAIN}"})
    assert st == 502 and b"port_not_listening" in data, data
    st, _, data = req(daemon, "GET", "/health", headers={"Host": f"49983-{sid}.other.test"})
    assert st != 204  # not our domain: the normal router, which has no /health


def test_get_host_reaches_a_server_in_the_sandbox(daemon, sbx):
    """sandbox.getHost(port): <port>-<id>.<domain> is reverse-proxied to that port inside
    the sandbox (any port, public as E2B's own URLs are by default), and the request is an
    inbound line of the sandbox's egress log."""
    sid, _ = sbx
    st, _, data = req(daemon, "POST", f"/v1/sandboxes/{sid}/commands",
                      json.dumps({"cmd": "python3", "args": ["-c", (
                          "import http.server as h\n"
                          "class H(h.BaseHTTPRequestHandler):\n"
                          "  def do_GET(s):\n"
                          "    s.send_response(200); s.send_header('Content-Length', '9')\n"
                          "    s.end_headers(); s.wfile.write(b'from-e2b!')\n"
                          "h.HTTPServer(('127.0.0.1', 8181), H).serve_forever()")]}).encode(),
                      {"Authorization": f"Bearer {TOKENS['A']}",
                       "Content-Type": "application/json"})
    assert st == 201, data
    deadline = time.monotonic() + 20
    while True:
        st, _, data = req(daemon, "GET", "/x", headers={"Host": f"8181-{sid}.{DOMAIN}"})
        if st == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert st == 200 and data == b"from-e2b!", (st, data)
    st, _, data = req(daemon, "GET", f"/v1/sandboxes/{sid}/egress",
                      headers={"Authorization": f"Bearer {TOKENS['A']}"})
    assert st == 200 and b"8181" in data and b'"in"' in data, data[-2000:]
    # an id that is not a sandbox of the E2B front end
    st, _, data = req(daemon, "GET", "/", headers={"Host": f"8181-nosuch.{DOMAIN}"})
    assert st == 404, data


def test_private_ports_need_the_traffic_token(daemon):
    """network.allowPublicTraffic: false: the create answers a trafficAccessToken, and a
    port is reached only with it in e2b-traffic-access-token (403 without, or a wrong one)."""
    st, _, j = api(daemon, "POST", "/v2/sandboxes",
                   {"templateID": "base", "timeout": 60,
                    "network": {"allowPublicTraffic": False}})
    assert st == 201, j
    sid, traffic = j["sandboxID"], j["trafficAccessToken"]
    try:
        assert traffic and len(traffic) == 64
        host = {"Host": f"8282-{sid}.{DOMAIN}"}
        st, _, data = req(daemon, "GET", "/", headers=host)
        assert st == 403 and b"trafficAccessToken" in data, data
        st, _, _ = req(daemon, "GET", "/", headers={**host, "e2b-traffic-access-token": "0" * 64})
        assert st == 403
        st, _, data = req(daemon, "GET", "/",
                          headers={**host, "e2b-traffic-access-token": traffic})
        assert st == 502 and b"port_not_listening" in data, data  # past the gate: nothing there
    finally:
        api(daemon, "DELETE", f"/sandboxes/{sid}")
    st, _, j = api(daemon, "POST", "/v2/sandboxes", {"templateID": "base", "timeout": 60})
    assert st == 201 and j["trafficAccessToken"] is None, j
    api(daemon, "DELETE", f"/sandboxes/{j['sandboxID']}")
