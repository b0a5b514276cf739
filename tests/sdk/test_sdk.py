"""The Vercel-compatible API of airlockd.

test_sdk_flow drives the daemon with the real, unmodified @vercel/sandbox SDK
(pinned in package.json; flow.mjs). The other tests check details of the HTTP
contract with http.client.

Run: /usr/bin/python3 -m pytest tests/sdk -v   (needs build/airlock; node and npm
for the SDK flow, which installs node_modules with `npm ci` when missing).
"""

import gzip
import http.client
import io
import json
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
AIRLOCK_BIN = os.environ.get("AIRLOCK_BIN", str(REPO / "build" / "airlock"))
TOKENS = {"A": "tokA_" + secrets.token_hex(16), "B": "tokB_" + secrets.token_hex(16)}
TEAMS = {"A": "team_sdk_a", "B": "team_sdk_b"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Resp:
    def __init__(self, status, headers, data, elapsed_headers=0.0):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.data = data
        self.elapsed_headers = elapsed_headers

    @property
    def json(self):
        return json.loads(self.data or b"{}")

    @property
    def error_code(self):
        try:
            return json.loads(self.data)["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return None

    def __repr__(self):
        return f"<Resp {self.status} {self.data[:300]!r}>"


class Client:
    """Talks like the SDK: bearer token, ?teamId=, content-type JSON on every request."""

    def __init__(self, port, team):
        self.port, self.team = port, team

    def req(self, method, path, body=None, raw=None, headers=None, timeout=60):
        hdrs = {"Authorization": f"Bearer {TOKENS[self.team]}",
                "Content-Type": "application/json"}
        hdrs.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else b"")
        sep = "&" if "?" in path else "?"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            t0 = time.monotonic()
            conn.request(method, f"{path}{sep}teamId={TEAMS[self.team]}", body=data,
                         headers=hdrs)
            resp = conn.getresponse()
            elapsed = time.monotonic() - t0
            return Resp(resp.status, resp.getheaders(), resp.read(), elapsed)
        finally:
            conn.close()

    def create(self, **body):
        body.setdefault("projectId", "prj_test")
        body.setdefault("ports", [])
        r = self.req("POST", "/v3/sandboxes", body)
        assert r.status == 200, r
        return r.json

    def ses(self, sid, rest=""):
        return f"/v2/sandboxes/sessions/{sid}{rest}"

    def run(self, sid, cmd, args, **extra):
        body = {"command": cmd, "args": args, "env": {}, "sudo": False, "wait": True,
                "logs": True, **extra}
        r = self.req("POST", self.ses(sid, "/cmd"), body)
        assert r.status == 200, r
        lines = [json.loads(ln) for ln in r.data.split(b"\n") if ln.strip()]
        return r, lines


def ndjson_output(lines, stream):
    return "".join(ln["data"] for ln in lines if ln.get("stream") == stream)


def daemon_proc(*extra):
    """A daemon on a free port for a module (extra: more `airlock serve` flags)."""
    if not os.access(AIRLOCK_BIN, os.X_OK):
        pytest.fail(f"{AIRLOCK_BIN} is missing: build it first (ninja -C build)")
    tmp = tempfile.mkdtemp(prefix="airlock-sdk-")
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        for k in TOKENS:
            f.write(f"{TOKENS[k]} {TEAMS[k]}\n")
    port = free_port()
    log = open(os.path.join(tmp, "daemon.log"), "wb")
    proc = subprocess.Popen([AIRLOCK_BIN, "serve", "--state-dir", os.path.join(tmp, "state"),
                             "--listen", f"127.0.0.1:{port}", "--tokens", tokens, *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v1/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("airlock serve did not start: "
                        + open(os.path.join(tmp, "daemon.log")).read()[-2000:])
        time.sleep(0.1)
    yield port
    for team in TOKENS:
        cl = Client(port, team)
        r = cl.req("GET", "/v2/sandboxes")
        for s in (r.json.get("sandboxes", []) if r.status == 200 else []):
            if s["status"] == "running":
                cl.req("POST", cl.ses(s["name"], "/stop"))
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon():
    yield from daemon_proc()


@pytest.fixture
def api(daemon):
    return Client(daemon, "A")


@pytest.fixture
def api_b(daemon):
    return Client(daemon, "B")


@pytest.fixture
def sid(api):
    """A fresh running sandbox of team A (= its session id), stopped at teardown."""
    s = api.create(timeout=300000)["session"]["id"]
    yield s
    api.req("POST", api.ses(s, "/stop"))


@pytest.fixture(scope="module")
def node_modules():
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node and npm are needed to run the @vercel/sandbox SDK flow")
    deps = json.load(open(HERE / "package.json"))["dependencies"]  # every pinned package
    if not all((HERE / "node_modules" / d).is_dir() for d in deps):
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"npm ci failed:\n{r.stdout}\n{r.stderr}"
    return node


# --------------------------------------------------------------------------
# the real SDK

FLOW_STEPS = ["create", "writeFiles", "runCommand", "detached-logs", "kill", "readFile",
              "mkDir", "networkPolicy", "extendTimeout", "get", "stop"]


def test_sdk_flow(daemon, node_modules):
    env = dict(os.environ, AIRLOCK_URL=f"http://127.0.0.1:{daemon}",
               AIRLOCK_TOKEN=TOKENS["A"], AIRLOCK_TEAM_ID=TEAMS["A"],
               AIRLOCK_PROJECT_ID="prj_sdk", AIRLOCK_STEP_TIMEOUT_MS="60000")
    env.pop("AIRLOCK_DEBUG", None)
    r = subprocess.run([node_modules, "flow.mjs"], cwd=HERE, env=env, capture_output=True,
                       text=True, timeout=600)
    out = r.stdout.strip().splitlines()
    report = f"stdout:\n{r.stdout}\nstderr:\n{r.stderr[-3000:]}"
    assert r.returncode == 0, report
    assert out and out[-1] == f"{len(FLOW_STEPS)} passed, 0 failed", report
    assert out[:-1] == [f"ok {s}" for s in FLOW_STEPS], report


# --------------------------------------------------------------------------
# contract details


def test_create_shape(api):
    j = api.create(timeout=120000, resources={"vcpus": 2})
    sb, ses = j["sandbox"], j["session"]
    try:
        assert j["routes"] == []
        assert sb["name"] == ses["id"] == sb["currentSessionId"]
        assert sb["persistent"] is False and sb["status"] == "running"
        assert ses["cwd"] == "/vercel/sandbox" and ses["region"] == "iad1"
        assert ses["memory"] == 4096 and ses["vcpus"] == 2
        assert ses["timeout"] == 120000
        now = time.time() * 1000
        for k in ("requestedAt", "createdAt", "updatedAt"):
            assert abs(ses[k] - now) < 60000, (k, ses[k])  # epoch ms
        assert ses["networkPolicy"] == {"mode": "deny-all"}
    finally:
        api.req("POST", api.ses(ses["id"], "/stop"))


def test_ndjson_content_type_exact(api, sid):
    r, lines = api.run(sid, "sh", ["-c", "echo hi"])
    assert r.headers["content-type"] == "application/x-ndjson"
    assert lines[0]["command"]["exitCode"] is None
    assert lines[-1]["command"]["exitCode"] == 0
    assert all("command" not in ln for ln in lines[1:-1])
    cid = lines[0]["command"]["id"]
    logs = api.req("GET", api.ses(sid, f"/cmd/{cid}/logs"))
    assert logs.status == 200
    assert logs.headers["content-type"] == "application/x-ndjson"
    log_lines = [json.loads(ln) for ln in logs.data.split(b"\n") if ln.strip()]
    assert log_lines == [{"stream": "stdout", "data": "hi\n"}]


def test_stream_is_ascii_json(api, sid):
    r, lines = api.run(sid, "sh", ["-c", "printf 'caf\\303\\251 \\342\\230\\225\\n'; "
                                         "printf '\\360\\237\\230\\200' >&2"])
    assert all(b < 0x80 for b in r.data), "non-ASCII bytes in the NDJSON stream"
    assert b"\\u00e9" in r.data.lower() and b"\\u2615" in r.data.lower()
    assert b"\\ud83d\\ude00" in r.data.lower()  # a surrogate pair above U+FFFF
    assert ndjson_output(lines, "stdout") == "café ☕\n"
    assert ndjson_output(lines, "stderr") == "😀"
    cid = lines[0]["command"]["id"]
    logs = api.req("GET", api.ses(sid, f"/cmd/{cid}/logs"))
    assert all(b < 0x80 for b in logs.data)


def _walk_nulls(obj, path=""):
    if obj is None:
        yield path
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk_nulls(v, f"{path}.{k}" if path else k)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk_nulls(v, f"{path}[{i}]")


def test_optional_fields_never_null(api, sid):
    allowed = {"command.exitCode", "pagination.next"}
    docs = [api.req("GET", api.ses(sid)).json,
            api.req("GET", f"/v2/sandboxes/{sid}").json,
            api.req("GET", "/v2/sandboxes").json,
            api.req("GET", "/v2/sandboxes/sessions", ).json]
    det = api.req("POST", api.ses(sid, "/cmd"),
                  {"command": "sleep", "args": ["5"], "env": {}, "sudo": False})
    assert det.status == 200, det
    docs.append(det.json)
    cid = det.json["command"]["id"]
    docs.append(api.req("POST", api.ses(sid, f"/cmd/{cid}/kill"), {"signal": 9}).json)
    docs.append(api.req("GET", api.ses(sid, f"/cmd/{cid}") + "?wait=true").json)
    docs.append(api.req("POST", api.ses(sid, "/network-policy"),
                        {"allow": ["example.test"], "subnets": {"deny": ["10.0.0.0/8"]}}).json)
    docs.append(api.req("POST", api.ses(sid, "/stop")).json)
    for d in docs:
        bad = [p for p in _walk_nulls(d) if p not in allowed]
        assert not bad, (bad, d)
    listed = docs[2]
    assert listed["pagination"]["next"] is None
    assert listed["pagination"]["count"] == len(listed["sandboxes"])


def test_wait_headers_at_once_and_kill_exit_code(api, sid):
    det = api.req("POST", api.ses(sid, "/cmd"),
                  {"command": "sleep", "args": ["3"], "env": {}, "sudo": False})
    cid = det.json["command"]["id"]
    assert det.json["command"]["exitCode"] is None
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=30)
    t0 = time.monotonic()
    conn.request("GET", api.ses(sid, f"/cmd/{cid}?wait=true&teamId=x"),
                 headers={"Authorization": f"Bearer {TOKENS['A']}",
                          "Content-Type": "application/json"})
    resp = conn.getresponse()
    assert time.monotonic() - t0 < 2.0, "headers of the long poll were not sent at once"
    body = json.loads(resp.read())
    conn.close()
    assert time.monotonic() - t0 >= 2.0
    assert body["command"]["exitCode"] == 0
    # A killed command ends with 128 + signo.
    det = api.req("POST", api.ses(sid, "/cmd"),
                  {"command": "sleep", "args": ["30"], "env": {}, "sudo": False})
    cid = det.json["command"]["id"]
    k = api.req("POST", api.ses(sid, f"/cmd/{cid}/kill"), {"signal": 15})
    assert k.status == 200 and k.json["command"]["id"] == cid
    w = api.req("GET", api.ses(sid, f"/cmd/{cid}") + "?wait=true")
    assert w.json["command"]["exitCode"] == 143


def test_fs_read_and_write(api, sid):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in [("vercel/sandbox/x/deep/f.txt", b"deep"),
                           ("vercel/sandbox/" + "long" * 30 + ".txt", b"long"),
                           ("vercel/sandbox/caf\u00e9.txt", b"pax")]:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    w = api.req("POST", api.ses(sid, "/fs/write"), raw=gzip.compress(buf.getvalue()),
                headers={"Content-Type": "application/gzip", "x-cwd": "/"})
    assert w.status == 200 and isinstance(w.json, dict), w
    for path, data in [("x/deep/f.txt", b"deep"), ("long" * 30 + ".txt", b"long"),
                       ("/vercel/sandbox/caf\u00e9.txt", b"pax")]:
        r = api.req("POST", api.ses(sid, "/fs/read"), {"path": path})
        assert r.status == 200, (path, r)
        assert "application/octet-stream" in r.headers["content-type"]
        assert r.data == data
    # ustar: a name over 100 bytes is split into the prefix field (what tar-stream does).
    buf = io.BytesIO()
    long_dir = "vercel/sandbox/" + "d" * 90
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        ti = tarfile.TarInfo(long_dir + "/ustar.txt")
        ti.size = 5
        t.addfile(ti, io.BytesIO(b"ustar"))
    assert buf.getvalue()[345:345 + 14] == b"vercel/sandbox"  # the prefix field is used
    w = api.req("POST", api.ses(sid, "/fs/write"), raw=gzip.compress(buf.getvalue()),
                headers={"Content-Type": "application/gzip", "x-cwd": "/"})
    assert w.status == 200, w
    r = api.req("POST", api.ses(sid, "/fs/read"), {"path": "/" + long_dir + "/ustar.txt"})
    assert r.status == 200 and r.data == b"ustar", r
    r = api.req("POST", api.ses(sid, "/fs/read"), {"path": "f.txt", "cwd": "x/deep"})
    assert r.status == 200 and r.data == b"deep"
    r = api.req("POST", api.ses(sid, "/fs/read"), {"path": "no-such-file"})
    assert r.status == 404, r
    r = api.req("POST", api.ses(sid, "/fs/read"), {"path": "/vercel/sandbox/no/such"})
    assert r.status == 404, r
    # mkdir is not recursive.
    r = api.req("POST", api.ses(sid, "/fs/mkdir"), {"path": "p/q"})
    assert 400 <= r.status < 500, r
    r = api.req("POST", api.ses(sid, "/fs/mkdir"), {"path": "p"})
    assert r.status == 200 and r.json == {}, r
    r = api.req("POST", api.ses(sid, "/fs/mkdir"), {"path": "p"})
    assert r.status == 409, r


def test_fs_write_refuses_escapes(api, sid):
    for name in ["../etc/x", "vercel/sandbox/../../etc/passwd"]:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            ti = tarfile.TarInfo(name)
            ti.size = 1
            t.addfile(ti, io.BytesIO(b"x"))
        r = api.req("POST", api.ses(sid, "/fs/write"), raw=buf.getvalue(),
                    headers={"Content-Type": "application/gzip", "x-cwd": "/"})
        assert r.status == 400, (name, r)
    r = api.req("POST", api.ses(sid, "/fs/write"), raw=b"not a tar at all",
                headers={"Content-Type": "application/gzip", "x-cwd": "/"})
    assert r.status == 400, r


def test_session_calls_after_stop_are_410(api):
    s = api.create()["session"]["id"]
    det = api.req("POST", api.ses(s, "/cmd"),
                  {"command": "sleep", "args": ["30"], "env": {}, "sudo": False})
    cid = det.json["command"]["id"]
    st = api.req("POST", api.ses(s, "/stop"))
    assert st.status == 200, st
    assert st.json["session"]["status"] in ("stopped", "stopping")
    assert st.json["sandbox"]["status"] in ("stopped", "stopping")
    calls = [("POST", "/cmd", {"command": "true", "args": [], "env": {}, "sudo": False}),
             ("POST", "/fs/read", {"path": "a.txt"}),
             ("POST", "/fs/mkdir", {"path": "d"}),
             ("POST", "/network-policy", {"mode": "allow-all"}),
             ("POST", "/extend-timeout", {"duration": 1000})]
    for method, rest, body in calls:
        r = api.req(method, api.ses(s, rest), body)
        assert r.status == 410 and r.error_code == "sandbox_stopped", (rest, r)
    r = api.req("GET", f"/v2/sandboxes/{s}?resume=true")
    assert r.status == 410 and r.error_code == "sandbox_stopped", r
    # Reads still work: the session, and the command cut short by the stop.
    assert api.req("GET", api.ses(s)).json["session"]["status"] == "stopped"
    w = api.req("GET", api.ses(s, f"/cmd/{cid}") + "?wait=true")
    assert w.status == 200 and isinstance(w.json["command"]["exitCode"], int)


def test_bad_bodies_are_400(api, sid):
    cmd = api.ses(sid, "/cmd")
    cases = [
        ("POST", cmd, b"{not json"),
        ("POST", cmd, b"[]"),
        ("POST", cmd, {"args": []}),
        ("POST", cmd, {"command": "true", "args": "x"}),
        ("POST", cmd, {"command": "true", "env": {"A": 1}}),
        ("POST", cmd, {"command": "true", "timeout": "soon"}),
        ("POST", api.ses(sid, "/fs/read"), {}),
        ("POST", api.ses(sid, "/fs/read"), {"path": 3}),
        ("POST", api.ses(sid, "/fs/mkdir"), {"path": ""}),
        ("POST", api.ses(sid, "/network-policy"), {"mode": "some"}),
        ("POST", api.ses(sid, "/network-policy"), {"allow": "example.test"}),
        ("POST", api.ses(sid, "/network-policy"),
         {"allow": {"api.example.test": [{"transform": [{"headers": {"Host": "y"}}]}]}}),
        ("POST", api.ses(sid, "/network-policy"),
         {"allow": {"api.example.test": [{"response": {"statusCode": 700}}]}}),
        ("POST", api.ses(sid, "/extend-timeout"), {"duration": -5}),
        ("POST", api.ses(sid, "/extend-timeout"), {}),
        ("POST", "/v3/sandboxes", {"timeout": "long"}),
        ("POST", "/v3/sandboxes", {"resources": {"vcpus": "many"}}),
        ("POST", "/v3/sandboxes", {"ports": [0]}),
        ("POST", "/v3/sandboxes", {"ports": list(range(3000, 3016))}),  # 16: over 15
        ("POST", "/v3/sandboxes", {"ports": [3000, 3000]}),
        ("POST", "/v3/sandboxes", {"networkPolicy": {"mode": "nope"}}),
        ("POST", "/v3/sandboxes", {"source": {"type": "snapshot", "snapshotId": 5}}),
        ("POST", "/v3/sandboxes", {"source": {"type": "git", "url": "ssh://x/r.git"}}),
        ("POST", "/v3/sandboxes", {"runtime": "../x"}),
        ("POST", "/v3/sandboxes", {"persistent": "yes"}),
    ]
    for method, path, body in cases:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        r = api.req(method, path, raw=raw)
        assert r.status == 400, (path, body, r)
        assert r.error_code and r.json["error"]["message"], r
    r = api.req("POST", api.ses(sid, "/network-policy"),
                {"allow": {"api.example.test": [{"transform": [{"headers": {"Host": "y"}}]}]}})
    assert "'Host' is managed by the proxy" in r.json["error"]["message"], r


def test_policy_round_trip(api, sid):
    r = api.req("POST", api.ses(sid, "/network-policy"),
                {"allow": ["example.test", "*.example.org"],
                 "subnets": {"allow": ["10.1.0.0/16"], "deny": ["10.1.2.0/24"]}})
    assert r.status == 200, r
    assert r.json["session"]["networkPolicy"] == {
        "mode": "custom", "allowedDomains": ["example.test", "*.example.org"],
        "allowedCIDRs": ["10.1.0.0/16"], "deniedCIDRs": ["10.1.2.0/24"]}
    r = api.req("POST", api.ses(sid, "/network-policy"), {"allow": {"example.test": []}})
    assert r.json["session"]["networkPolicy"] == {"mode": "custom",
                                                  "allowedDomains": ["example.test"]}
    r = api.req("POST", api.ses(sid, "/network-policy"), {"mode": "allow-all"})
    assert r.json["session"]["networkPolicy"] == {"mode": "allow-all"}


def test_no_5xx_on_post_cmd(api, sid):
    bodies = [{"command": "/no/such/binary", "args": []},
              {"command": "true", "args": [], "cwd": "/no/such/dir"},
              {"command": "true", "args": [], "cwd": "rel/missing"},
              {"command": "sh", "args": ["-c", "exit 7"], "timeout": 100000},
              {"command": "sleep", "args": ["5"], "timeout": 300}]
    for extra in ({}, {"wait": True, "logs": True}):
        for b in bodies:
            r = api.req("POST", api.ses(sid, "/cmd"), {"env": {}, "sudo": False, **b, **extra})
            assert r.status < 500, (b, extra, r)
            if r.status == 200 and extra:
                lines = [json.loads(ln) for ln in r.data.split(b"\n") if ln.strip()]
                last = lines[-1]
                assert isinstance(last.get("command", {}).get("exitCode"), int) or \
                    last.get("stream") == "error", (b, lines)
    r, lines = api.run(sid, "sleep", ["5"], timeout=300)
    assert lines[-1]["command"]["exitCode"] == 124


def test_empty_bodies_and_json_content_type_on_get(api, sid):
    # A POST with no body at all (Content-Length: 0) and a GET with a JSON content type.
    r = api.req("GET", api.ses(sid))
    assert r.status == 200 and r.json["session"]["id"] == sid
    assert r.json["routes"] == []
    r = api.req("GET", f"/v2/sandboxes/{sid}?projectId=prj&resume=false")
    assert r.status == 200 and r.json["sandbox"]["name"] == sid
    assert r.json["session"]["id"] == sid
    det = api.req("POST", api.ses(sid, "/cmd"),
                  {"command": "sleep", "args": ["30"], "env": {}, "sudo": False})
    cid = det.json["command"]["id"]
    r = api.req("POST", api.ses(sid, f"/cmd/{cid}/kill"))  # empty body: SIGTERM
    assert r.status == 200, r
    r = api.req("POST", api.ses(sid, "/stop"))
    assert r.status == 200 and r.json["session"]["status"] == "stopped"


def test_team_isolation(api, api_b, sid):
    det = api.req("POST", api.ses(sid, "/cmd"),
                  {"command": "sleep", "args": ["30"], "env": {}, "sudo": False})
    cid = det.json["command"]["id"]
    calls = [("GET", f"/v2/sandboxes/{sid}", None),
             ("GET", api.ses(sid), None),
             ("POST", api.ses(sid, "/cmd"), {"command": "true", "args": []}),
             ("GET", api.ses(sid, f"/cmd/{cid}"), None),
             ("GET", api.ses(sid, f"/cmd/{cid}/logs"), None),
             ("POST", api.ses(sid, f"/cmd/{cid}/kill"), {"signal": 9}),
             ("POST", api.ses(sid, "/fs/read"), {"path": "/etc/hostname"}),
             ("POST", api.ses(sid, "/fs/mkdir"), {"path": "x"}),
             ("POST", api.ses(sid, "/network-policy"), {"mode": "allow-all"}),
             ("POST", api.ses(sid, "/extend-timeout"), {"duration": 1000}),
             ("POST", api.ses(sid, "/stop"), None)]
    for method, path, body in calls:
        r = api_b.req(method, path, body)
        assert r.status == 404, (method, path, r)
    names = [s["name"] for s in api_b.req("GET", "/v2/sandboxes").json["sandboxes"]]
    assert sid not in names
    # Still alive and untouched for its own team.
    r = api.req("GET", api.ses(sid, f"/cmd/{cid}"))
    assert r.json["command"]["exitCode"] is None
    assert api.req("GET", api.ses(sid)).json["session"]["status"] == "running"
    # No token, a wrong token.
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    conn.request("GET", api.ses(sid))
    assert conn.getresponse().status == 401
    conn.close()


def test_stop_during_waiting_run_streams_error(api):
    import threading

    s = api.create()["session"]["id"]
    result = {}

    def run():
        result["r"] = api.run(s, "sh", ["-c", "echo started; sleep 30"])

    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.0)
    assert api.req("POST", api.ses(s, "/stop")).status == 200
    t.join(20)
    assert not t.is_alive(), "the waiting stream did not end when the sandbox stopped"
    r, lines = result["r"]
    assert lines[0]["command"]["exitCode"] is None
    assert ndjson_output(lines, "stdout") == "started\n"
    assert lines[-1] == {"stream": "error", "data": {
        "code": "sandbox_stopped", "message": lines[-1]["data"]["message"]}}
