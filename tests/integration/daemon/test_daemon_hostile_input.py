"""Hostile input against airlockd's HTTP API (native /v1 and the Vercel-compatible
/v2, /v3 routes): malformed and mistyped bodies, bad ids, bad Content-Length,
non-UTF-8, hostile paths (NUL, '..', symlinks planted inside the sandbox that
point out of it), bad network policies (CIDRs, domains), out-of-range timeouts
and signals, stopped and missing sandboxes, a stop racing a running command.

The rule checked everywhere: a clear JSON error `{"error": {"code", "message"}}`
with a proper 4xx status, nothing changed (no sandbox or command created, no
file written, the policy unchanged), and the daemon still answering
`GET /v1/health`. Cases already covered by test_daemon_*.py, tests/api and
tests/integration/security are not repeated here.
"""

import io
import json
import os
import secrets
import shutil
import socket
import tarfile
import threading
import time
import urllib.parse

import pytest

from .conftest import TOKENS, tar_of

TOK = TOKENS["A"]
INT64_MAX = (1 << 63) - 1


# --------------------------------------------------------------------------
# helpers


def whole_response(out):
    """Whether out holds one whole response: its head and the Content-Length it declares."""
    head, sep, body = out.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return len(body) >= int(value.strip())
            except ValueError:
                return False
    return False


def raw_http(port, data, read_timeout=10.0, recv_max=1 << 20, shut_write=False, one=False):
    """Sends raw bytes to the daemon; returns what came back (b'' if closed). With one,
    stops at the end of the first whole response instead of waiting for the daemon to
    close a connection that it keeps alive."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as s:
        try:
            s.sendall(data)
            if shut_write:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        out = b""
        try:
            while len(out) < recv_max:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
                if one and whole_response(out):
                    break
        except OSError:
            pass
        return out


def http_status(raw):
    try:
        return int(raw.split(b"\r\n", 1)[0].split()[1])
    except (IndexError, ValueError):
        return None


def http_body(raw):
    return raw.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in raw else b""


def healthy(api, daemon):
    assert daemon.alive(), "airlockd died:\n" + daemon.log_tail()
    r = api.health(timeout=5)
    assert r.status == 200 and r.json["ok"] is True, r


def assert_error(r, status, code=None, needle=None):
    """A JSON error of the documented shape, with a meaningful message."""
    assert r.status == status, r
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    body = r.json
    assert set(body) == {"error"}, body
    assert isinstance(body["error"].get("code"), str) and body["error"]["code"], body
    msg = body["error"].get("message")
    assert isinstance(msg, str) and len(msg) >= 8, body
    if code is not None:
        assert body["error"]["code"] == code, body
    if needle is not None:
        assert needle.lower() in msg.lower(), body


def ids(api):
    return {s["id"] for s in api.list()}


def running_ids(api):
    return {s["id"] for s in api.list() if s["status"] == "running"}


def post_raw(api, path, raw, ctype="application/json", method="POST", headers=None):
    h = {"Content-Type": ctype}
    h.update(headers or {})
    return api.request(method, path, raw=raw, headers=h)


def tar_entries(entries):
    """entries: [(name, bytes or None for a directory)] -> tar bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in entries:
            ti = tarfile.TarInfo(name)
            if data is None:
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                tf.addfile(ti)
            else:
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def host_dir():
    """A host directory with a marker file; a sandbox must never reach it."""
    d = f"/tmp/airlock_hostile_{secrets.token_hex(6)}"
    os.mkdir(d, 0o755)
    with open(os.path.join(d, "marker"), "w") as f:
        f.write("HOST-ONLY-MARKER\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def host_dir_unchanged(d):
    assert sorted(os.listdir(d)) == ["marker"], os.listdir(d)
    with open(os.path.join(d, "marker")) as f:
        assert f.read() == "HOST-ONLY-MARKER\n"


@pytest.fixture
def stopped(api, daemon):
    """A team-A sandbox that was created, given a file and a finished command, then
    stopped: (sid, cid)."""
    sid = api.create_ok()["id"]
    try:
        assert api.put_files(sid, tar_of("f.txt", b"before stop\n")).status == 200
        cid = api.start_ok(sid, "/bin/true")["id"]
        api.wait_ok(sid, cid)
        r = api.stop(sid)
        assert r.status == 200 and r.json["sandbox"]["status"] == "stopped", r
        yield sid, cid
    finally:
        if daemon.alive():
            api.stop(sid)


# --------------------------------------------------------------------------
# native create: values that must be refused, creating nothing


CREATE_BAD = [
    ({"timeout": 24 * 3600 * 1000 + 1}, "24 h"),
    ({"timeout": INT64_MAX}, "24 h"),
    ({"timeout": 1 << 64}, None),               # beyond int64: jansson's "too big integer"
    ({"timeout": 1e400}, "malformed"),
    ({"timeout": 3000.0}, "timeout"),
    ({"timeout": True}, "timeout"),
    ({"resources": {"vcpus": 1025}}, "vcpus"),
    ({"resources": {"vcpus": 1e308}}, "vcpus"),
    ({"resources": {"vcpus": True}}, "vcpus"),
    ({"resources": {"memory": "1K"}}, "memory"),
    ({"resources": {"memory": "12Q"}}, "memory"),
    ({"resources": {"disk": "-5M"}}, "disk"),
    ({"resources": {"disk": 1.5}}, "disk"),
    ({"resources": "big"}, "resources"),
    ({"env": {"": "x"}}, "env"),
    ({"env": "A=1"}, "env"),
    ({"env": {"A": None}}, "env"),
    ({"workdir": ""}, "workdir"),
    ({"workdir": 5}, "workdir"),
    ({"image": "relative/dir"}, "image"),
    ({"image": "/nonexistent/airlock/image"}, "image"),
    ({"image": "/etc/hostname"}, "image"),
]


def test_create_bad_values_are_400_and_create_nothing(api, daemon):
    before = ids(api)
    wrong = []
    for body, needle in CREATE_BAD:
        r = api.create(**body)
        try:
            assert_error(r, 400, "bad_request", needle)
        except AssertionError:
            wrong.append((body, r))
            if r.status == 201:
                api.stop(r.json["sandbox"]["id"])
    assert not wrong, wrong
    assert ids(api) == before
    healthy(api, daemon)


def test_create_workdir_with_dot_components_is_400(api, daemon):
    """validate_create only looks for "/../" inside the string: a trailing "/.." or a
    "." component reaches the spawner. The rule (and the message) is: no '..'."""
    before = ids(api)
    wrong = []
    for workdir in ("/workspace/..", "/..", "/tmp/x/..", "/workspace/./a", "/./workspace"):
        r = api.create(workdir=workdir)
        if r.status == 201:
            api.stop(r.json["sandbox"]["id"])
        try:
            assert_error(r, 400, "bad_request")
        except AssertionError:
            wrong.append((workdir, r))
    assert not wrong, wrong
    assert ids(api) == before
    healthy(api, daemon)


def test_create_unusable_resources_or_workdir_are_400_with_a_clear_message(api, daemon):
    """Values the API takes but the spawner cannot use: a disk too small for the root
    (answered 507, a 5xx, naming /etc/group), a vcpus too small for a CFS quota
    (answered with the host's cgroup path and "Invalid argument"), a workdir under
    /proc (409 "mkdir '/proc': File exists"). Each is the client's mistake: 400
    naming the field."""
    before = ids(api)
    wrong = []
    for body, needle in (({"resources": {"disk": 1}}, "disk"),
                         ({"resources": {"disk": 4096}}, "disk"),
                         ({"resources": {"vcpus": 0.0001}}, "vcpus"),
                         ({"workdir": "/proc/x"}, "workdir")):
        r = api.create(**body)
        if r.status == 201:
            api.stop(r.json["sandbox"]["id"])
        try:
            assert_error(r, 400, "bad_request", needle)
            assert "/sys/fs/cgroup" not in r.json["error"]["message"], r
        except AssertionError:
            wrong.append((body, r))
    assert not wrong, wrong
    assert ids(api) == before
    healthy(api, daemon)


CREATE_MALFORMED = [
    b"\xef\xbb\xbf{}",                               # a UTF-8 BOM
    b'{"env": {"A\\u0000B": "x"}}',                  # NUL in a key
    b'{"env": {"A": "x\\u0000y"}}',                  # NUL in a value
    b'{"workdir": "/work\\ud800space"}',             # a lone surrogate
    b'{"env": {"A": "\xc3"}}',                       # truncated UTF-8
    b'{"env": {"A": "\xed\xa0\x80"}}',               # an encoded surrogate
    b'{"timeout": 1000} trailing',
    b'{"timeout": 01000}',
    b'{"timeout": NaN}',
    b"\x00",
]


def test_create_malformed_or_non_utf8_bodies(api, daemon):
    before = ids(api)
    wrong = []
    for raw in CREATE_MALFORMED:
        r = post_raw(api, "/v1/sandboxes", raw)
        try:
            assert_error(r, 400, "bad_request")
        except AssertionError:
            wrong.append((raw, r))
    assert not wrong, wrong
    assert ids(api) == before
    healthy(api, daemon)


# --------------------------------------------------------------------------
# the HTTP layer: Content-Length, methods, ids, non-UTF-8 in the request line


def _req(method, path, body=b"", extra=""):
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOK}\r\n"
            f"Content-Type: application/json\r\n{extra}\r\n").encode() + body


def test_bad_content_length_is_4xx_and_creates_nothing(api, daemon):
    """A Content-Length that is not a number, negative, overflowing, hex, or given
    twice with different values (RFC 9112 6.3: unrecoverable, 400)."""
    before = ids(api)
    wrong = []
    for extra in ("Content-Length: abc\r\n", "Content-Length: -1\r\n",
                  "Content-Length: 99999999999999999999999999\r\n", "Content-Length: 0x10\r\n",
                  "Content-Length: 2\r\nContent-Length: 40\r\n",
                  "Content-Length: 2, 40\r\n"):
        out = raw_http(daemon.port, _req("POST", "/v1/sandboxes", b"{}", extra), read_timeout=5)
        st = http_status(out)
        if st is None or not 400 <= st < 500:
            wrong.append((extra, out[:120]))
    now = ids(api)
    for sid in now - before:
        api.stop(sid)
    assert not wrong, wrong
    assert now == before
    healthy(api, daemon)


def test_short_body_then_close_creates_nothing(api, daemon):
    """Content-Length promises more than is sent, then the client half-closes: no
    sandbox, no hang of the daemon."""
    before = ids(api)
    body = b'{"timeout": 60000}'
    t0 = time.monotonic()
    out = raw_http(daemon.port, _req("POST", "/v1/sandboxes", body,
                                     f"Content-Length: {len(body) + 100}\r\n"),
                   read_timeout=10, shut_write=True)
    assert time.monotonic() - t0 < 9.5, "the daemon held a half-closed connection"
    st = http_status(out)
    assert st is None or 400 <= st < 500, out[:300]
    assert ids(api) == before
    healthy(api, daemon)


def test_content_length_and_chunked_together_smuggle_nothing(api, daemon):
    """Both framings at once (request smuggling): RFC 9112 6.1 lets a server refuse the
    request or read it by Transfer-Encoding, but then it MUST close the connection; the
    bytes after the chunked body (here a second request, inside what Content-Length
    called the body) must never run as a request of their own."""
    before = ids(api)
    smuggled = _req("POST", "/v1/sandboxes", b"{}", "Content-Length: 2\r\n")
    chunked = b"0\r\n\r\n" + smuggled
    out = raw_http(daemon.port, _req("POST", "/v1/sandboxes/sbx_nope/extend", chunked,
                                     f"Content-Length: {len(chunked)}\r\n"
                                     "Transfer-Encoding: chunked\r\n"), read_timeout=5)
    st = http_status(out)
    assert st is not None and 400 <= st < 500, out[:300]
    time.sleep(0.5)
    assert ids(api) == before, "a smuggled request created a sandbox"
    healthy(api, daemon)


def test_lax_http_framing_is_refused(api, daemon):
    """Request framing that RFC 9112 says to refuse with 400, because front ends read it
    differently (smuggling): an HTTP/1.1 request without Host (3.2), whitespace between
    a header name and the colon (5.1). Each is now served: a sandbox is created."""
    before = ids(api)
    wrong = []
    auth = f"Authorization: Bearer {TOK}\r\n"
    for req in (f"POST /v1/sandboxes HTTP/1.1\r\n{auth}Content-Length: 2\r\n\r\n{{}}",
                f"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n{auth}Content-Length : 2\r\n\r\n{{}}",
                f"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n{auth}Content-Length\t: 2\r\n\r\n{{}}",
                # two Authorization fields: which one did a proxy in front check?
                f"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n{auth}"
                f"Authorization: Bearer wrong\r\nContent-Length: 2\r\n\r\n{{}}",
                f"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
                f"{auth}Content-Length: 2\r\n\r\n{{}}"):
        out = raw_http(daemon.port, req.encode(), read_timeout=5)
        st = http_status(out)
        if st is None or not 400 <= st < 500:
            wrong.append((req.split("\r\n")[:3], out.split(b"\r\n", 1)[0]))
    now = ids(api)
    for sid in now - before:
        api.stop(sid)
    assert not wrong, wrong
    assert now == before
    healthy(api, daemon)


def test_unknown_and_odd_methods(api, daemon, sandbox):
    for method in ("FOO", "TRACE", "CONNECT", "PROPFIND"):
        out = raw_http(daemon.port, _req(method, f"/v1/sandboxes/{sandbox}",
                                         extra="Content-Length: 0\r\n"))
        st = http_status(out)
        assert st is not None and 400 <= st < 500, (method, out[:300])
        assert b"HTTP/1.1 200" not in out[:20], (method, out[:300])
    # A body on a GET is ignored or refused, never acted on.
    r = api.request("GET", "/v1/sandboxes", body={"timeout": 1000})
    assert r.status in (200, 400), r
    assert api.sandbox(sandbox)["status"] == "running"
    healthy(api, daemon)


BAD_IDS = ["sbx_" + "a" * 5000, "x' OR '1'='1", "sbx_' OR 1=1 --", "sbx_%abc", "\u00e9t\u00e9",
           "..", ".", "sbx_" + "0" * 24 + ";DROP TABLE sandboxes", "*", "sbx_%"]


def test_bad_or_overlong_ids_are_404_everywhere(api, daemon, sandbox):
    """Every route taking an id answers a JSON 4xx for ids that cannot exist (overlong,
    SQL, non-ASCII, dot segments), and never touches a real sandbox."""
    before = api.list()
    wrong = []
    for raw_sid in BAD_IDS:
        sid = urllib.parse.quote(raw_sid, safe="")
        routes = [("GET", f"/v1/sandboxes/{sid}", None),
                  ("POST", f"/v1/sandboxes/{sid}/stop", None),
                  ("POST", f"/v1/sandboxes/{sid}/extend", {"duration_ms": 1000}),
                  ("PUT", f"/v1/sandboxes/{sid}/network-policy", "allow-all"),
                  ("GET", f"/v1/sandboxes/{sid}/egress", None),
                  ("POST", f"/v1/sandboxes/{sid}/commands", {"cmd": "/bin/true"}),
                  ("GET", f"/v1/sandboxes/{sid}/files", None),
                  ("POST", f"/v1/sandboxes/{sid}/files/mkdir", {"path": "/workspace/x"}),
                  ("GET", f"/v1/sandboxes/{sandbox}/commands/{sid}", None),
                  ("GET", f"/v1/sandboxes/{sandbox}/commands/{sid}/wait?timeout_ms=0", None),
                  ("POST", f"/v1/sandboxes/{sandbox}/commands/{sid}/kill", {"signal": 9}),
                  ("GET", f"/v2/sandboxes/sessions/{sid}", None),
                  ("POST", f"/v2/sandboxes/sessions/{sid}/cmd", {"command": "/bin/true"}),
                  ("POST", f"/v2/sandboxes/sessions/{sid}/stop", None),
                  ("GET", f"/v2/sandboxes/{sid}", None),
                  ("DELETE", f"/v2/sandboxes/{sid}", None)]
        for method, path, body in routes:
            r = api.request(method, path, body=body)
            if not (400 <= r.status < 500 and r.status != 405 and
                    r.error_code in ("not_found", "bad_request") and r.json["error"]["message"]):
                wrong.append((method, path[:80], r))
            if sandbox not in path and sandbox.encode() in r.data:
                wrong.append(("leak", method, path[:80], r))
    assert not wrong, wrong
    after = api.list()
    assert [(s["id"], s["status"], s["expires_at"], s["policy_generation"]) for s in after] == \
        [(s["id"], s["status"], s["expires_at"], s["policy_generation"]) for s in before]
    assert api.cmd_list(sandbox).json["commands"] == []
    healthy(api, daemon)


def test_nul_in_the_url_path_does_not_route_to_a_shorter_path(api, daemon):
    """A %00 in the URL path cuts it where the NUL is: /v1/sandboxes/<id>%00junk is
    served as GET /v1/sandboxes/<id>, and POST /v1/sandboxes%00/<id>/commands as
    POST /v1/sandboxes, which creates a sandbox. A path with a NUL names nothing:
    404 (or 400), and nothing happens."""
    sid = api.create_ok()["id"]
    try:
        before = ids(api)
        wrong = []
        for method, path, body in (("GET", f"/v1/sandboxes/{sid}%00junk", None),
                                   ("GET", f"/v2/sandboxes/sessions/{sid}%00junk", None),
                                   ("GET", f"/v1/sandboxes%00/{sid}/commands", None),
                                   ("POST", f"/v1/sandboxes%00/{sid}/commands",
                                    {"timeout": 60000}),
                                   ("POST", f"/v1/sandboxes/{sid}%00junk/commands",
                                    {"cmd": "/bin/true"})):
            r = api.request(method, path, body=body)
            if r.status not in (400, 404):
                wrong.append((method, path, r.status, r.data[:100]))
        now = ids(api)
        for extra in now - before:
            api.stop(extra)
        assert not wrong, wrong
        assert now == before, "a request with a NUL in its path created a sandbox"
        assert api.sandbox(sid)["status"] == "running"
        assert api.cmd_list(sid).json["commands"] == []
        healthy(api, daemon)
    finally:
        api.stop(sid)


def test_non_utf8_and_control_bytes_in_request_line(api, daemon, sandbox):
    for target in (b"/v1/sandboxes/sbx_\xff\xfe", b"/v1/sandboxes/" + sandbox.encode() +
                   b"/files/content?path=/workspace/\xff",
                   b"/v1/sandboxes/" + sandbox.encode() + b"/files?path=\x01\x02"):
        req = (b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
               TOK.encode() + b"\r\n\r\n")
        out = raw_http(daemon.port, req, one=True)
        st = http_status(out)
        assert st is not None and 400 <= st < 500, (target, out[:300])
    r = api.request("GET", f"/v1/sandboxes/{sandbox}/files/content?path=%ff%fe")
    assert_error(r, 400, "bad_request", "UTF-8")
    assert api.sandbox(sandbox)["status"] == "running"
    healthy(api, daemon)


# --------------------------------------------------------------------------
# commands


def test_command_with_a_huge_timeout_is_not_killed_at_once(api, sandbox):
    """timeout is documented as an integer >= 0 (ms) with no maximum; the parser takes
    up to INT64_MAX. started_ms + timeout overflows int64, and the timer compares
    (int64_t)deadline > now: the command is killed as timed out at once. A huge
    timeout must either be refused (400) or mean "effectively none"."""
    for t in (INT64_MAX, INT64_MAX - 1000, 1 << 62):
        r = api.request("POST", f"/v1/sandboxes/{sandbox}/commands",
                        body={"cmd": "/bin/sh", "args": ["-c", "sleep 1; echo done"],
                              "timeout": t})
        if r.status == 400:
            assert_error(r, 400, "bad_request", "timeout")
            continue
        assert r.status == 201, r
        c = api.wait_ok(sandbox, r.json["command"]["id"])
        assert c["reason"] == "exited" and c["exit_code"] == 0, (t, c)


def test_vercel_command_with_a_huge_timeout_is_not_killed_at_once(api, sandbox):
    r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/cmd",
                    body={"command": "/bin/sh", "args": ["-c", "sleep 1; echo done"],
                          "timeout": INT64_MAX})
    if r.status == 400:
        assert_error(r, 400)
        return
    assert r.status == 200, r
    cid = r.json["command"]["id"]
    c = api.wait_ok(sandbox, cid)
    assert c["reason"] == "exited" and c["exit_code"] == 0, c


CMD_BAD = [
    (b'{"cmd": "/bin/true", "timeout": 18446744073709551616}', None),
    (b'{"cmd": "/bin/true", "timeout": 1.5}', "timeout"),
    (b'{"cmd": "/bin/true", "timeout": "5"}', "timeout"),
    (b'{"cmd": "/bin/true", "sudo": "true"}', "sudo"),
    (b'{"cmd": "/bin/true", "wait": 1}', "wait"),
    (b'{"cmd": "/bin/true", "stdin": ["a"]}', "stdin"),
    (b'{"cmd": "/bin/true", "keep_stdin": null, "env": {"": "x"}}', "env"),
    (b'{"cmd": "/bin/true", "args": ["a", 1]}', "args"),
    (b'{"cmd": "/bin/true", "args": [null]}', "args"),
    (b'{"cmd": "/bin/tr\\u0000ue"}', None),
    (b'{"cmd": "/bin/true", "args": ["a\\u0000b"]}', None),
    (b'{"cmd": "/bin/true", "cwd": ""}', "cwd"),
    (b'{"cmd": 5}', "cmd"),
    (b'{"cmd": null}', "cmd"),
    (b'{}', "cmd"),
    (b'', "cmd"),
    (b'{"cmd": "/bin/true", "cmd": "/bin/false"}', None),
    (b'{"cmd": "/bin/\xff"}', "UTF-8"),
]


def test_command_bad_bodies_start_nothing(api, daemon, sandbox):
    wrong = []
    for raw, needle in CMD_BAD:
        r = post_raw(api, f"/v1/sandboxes/{sandbox}/commands", raw)
        try:
            assert_error(r, 400, "bad_request", needle)
        except AssertionError:
            wrong.append((raw, r))
    assert not wrong, wrong
    assert api.cmd_list(sandbox).json["commands"] == []
    healthy(api, daemon)


VC_CMD_BAD = [
    b'{"command": "/bin/true", "timeout": -1}',
    b'{"command": "/bin/true", "bogus": 1}',
    b'{"command": ""}',
    b'{"cmd": "/bin/true"}',
    b'{"command": "/bin/true", "args": "x"}',
    b'{"command": "/bin/true", "cwd": ""}',
    b'{"command": "/bin/true", "logs": "yes"}',
    b'[]',
]


def test_vercel_command_bad_bodies_start_nothing(api, daemon, sandbox):
    wrong = []
    for raw in VC_CMD_BAD:
        r = post_raw(api, f"/v2/sandboxes/sessions/{sandbox}/cmd", raw)
        try:
            assert_error(r, 400)
        except AssertionError:
            wrong.append((raw, r))
    assert not wrong, wrong
    assert api.cmd_list(sandbox).json["commands"] == []
    healthy(api, daemon)


def test_kill_wait_stdin_bad_parameters_change_nothing(api, daemon, sandbox):
    cid = api.start_ok(sandbox, "/bin/cat", keep_stdin=True)["id"]
    base = f"/v1/sandboxes/{sandbox}/commands/{cid}"
    for body in ({"signal": 0}, {"signal": 65}, {"signal": -9}, {"signal": "9"},
                 {"signal": 9.0}, {"signal": 1 << 40}, {"sig": 9}, {"signal": True}):
        r = api.request("POST", base + "/kill", body=body)
        assert_error(r, 400, "bad_request", "signal" if "signal" in body else None)
    for q in ("-1", "abc", "3600001", "1e3", "", " 5", "18446744073709551616", "0x10"):
        r = api.request("GET", base + "/wait?timeout_ms=" + urllib.parse.quote(q))
        assert_error(r, 400, "bad_request", "timeout_ms")
    for q in ("yes", "TRUE", "", "2"):
        r = api.request("POST", base + "/stdin?close=" + q, raw=b"lost\n",
                        headers={"Content-Type": "application/octet-stream"})
        assert_error(r, 400, "bad_request", "close")
    # Nothing of that reached the command: still running, stdin open, no output yet.
    c = api.cmd_get(sandbox, cid).json["command"]
    assert c["status"] == "running", c
    r = api.stdin(sandbox, cid, "kept\n", close=True)
    assert r.status == 200, r
    c = api.wait_ok(sandbox, cid)
    assert c["exit_code"] == 0, c
    assert api.logs(sandbox, cid).stdout == b"kept\n"
    healthy(api, daemon)


def test_stdin_to_a_finished_command_and_too_many_args(api, daemon, sandbox):
    cid = api.start_ok(sandbox, "/bin/cat", keep_stdin=True)["id"]
    assert api.kill(sandbox, cid, 9).status == 200
    c = api.wait_ok(sandbox, cid)
    r = api.stdin(sandbox, cid, "late\n")
    assert_error(r, 410, "gone")
    r = api.stdin(sandbox, "cmd_" + "0" * 24, "x")
    assert_error(r, 404, "not_found")
    assert api.cmd_get(sandbox, cid).json["command"] == c
    # More args than the agent protocol takes: 413 with a message, nothing started.
    r = api.start(sandbox, "/bin/true", *(["a"] * 5000))
    assert_error(r, 413, "payload_too_large", "args")
    assert [x["id"] for x in api.cmd_list(sandbox).json["commands"]] == [cid]
    healthy(api, daemon)


def test_vercel_kill_and_list_bad_parameters(api, daemon, sandbox):
    cid = api.start_ok(sandbox, "/bin/sleep", "300")["id"]
    for body in ({"signal": 0}, {"signal": 65}, {"signal": "KILL"}, {"x": 1}):
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/cmd/{cid}/kill", body=body)
        assert_error(r, 400)
    assert api.cmd_get(sandbox, cid).json["command"]["status"] == "running"
    for q in ("limit=abc", "limit=-1", "limit=1001", "limit="):
        r = api.request("GET", "/v2/sandboxes?" + q)
        assert_error(r, 400, None, "limit")
    r = api.request("GET", f"/v2/sandboxes/{sandbox}?resume=maybe")
    assert_error(r, 400, None, "resume")
    assert api.kill(sandbox, cid, 9).status == 200
    healthy(api, daemon)


def test_command_on_a_nonexistent_sandbox(api, daemon):
    before = ids(api)
    for path, body in ((f"/v1/sandboxes/sbx_{'0' * 24}/commands", {"cmd": "/bin/true"}),
                       (f"/v1/sandboxes/sbx_{'0' * 24}/commands",
                        {"cmd": "/bin/true", "wait": True}),
                       (f"/v2/sandboxes/sessions/sbx_{'0' * 24}/cmd",
                        {"command": "/bin/true", "wait": True})):
        r = api.request("POST", path, body=body)
        assert_error(r, 404, "not_found")
    assert ids(api) == before
    healthy(api, daemon)


# --------------------------------------------------------------------------
# a stopped sandbox; double stop; stop racing a running command


def test_requests_against_a_stopped_sandbox_are_410(api, daemon, stopped):
    sid, cid = stopped
    before = api.sandbox(sid)
    gone = [("POST", f"/v1/sandboxes/{sid}/commands", {"cmd": "/bin/true"}),
            ("POST", f"/v1/sandboxes/{sid}/commands", {"cmd": "/bin/true", "wait": True}),
            ("POST", f"/v1/sandboxes/{sid}/extend", {"duration_ms": 1000}),
            ("PUT", f"/v1/sandboxes/{sid}/network-policy", "allow-all"),
            ("POST", f"/v1/sandboxes/{sid}/files/mkdir", {"path": "/workspace/d"})]
    for method, path, body in gone:
        r = api.request(method, path, body=body)
        assert_error(r, 410, "gone")
    r = api.put_files(sid, tar_of("g.txt", b"x"))
    assert_error(r, 410, "gone")
    r = api.read_file(sid, "/workspace/f.txt")
    assert r.status in (404, 410), r
    assert_error(r, r.status)
    cmd_before = api.cmd_get(sid, cid).json["command"]
    r = api.kill(sid, cid, 9)
    assert r.status in (200, 409, 410), r
    assert api.cmd_get(sid, cid).json["command"] == cmd_before
    # Vercel: a command or a policy on a stopped session is 410 too.
    r = api.request("POST", f"/v2/sandboxes/sessions/{sid}/cmd", body={"command": "/bin/true"})
    assert_error(r, 410)
    r = api.request("POST", f"/v2/sandboxes/sessions/{sid}/network-policy",
                    body={"mode": "allow-all"})
    assert_error(r, 410)
    r = api.request("PATCH", f"/v2/sandboxes/{sid}", body={"networkPolicy": "allow-all"})
    assert_error(r, 410)
    after = api.sandbox(sid)
    assert after == before, (before, after)
    assert len(api.cmd_list(sid).json["commands"]) == 1
    healthy(api, daemon)


def test_a_stopped_sandbox_is_named_without_errno_text(api, stopped):
    """A 410's message says what became of the sandbox and no more: the file routes said
    "sandbox '...' is stopped: No such process" (the strerror of the ESRCH that only
    stands for 410 Gone), unlike the others."""
    sid, _ = stopped
    want = f"sandbox '{sid}' is stopped"
    for method, path, body in (
            ("POST", f"/v1/sandboxes/{sid}/files/mkdir", {"path": "/workspace/d"}),
            ("POST", f"/v1/sandboxes/{sid}/commands", {"cmd": "/bin/true"}),
            ("POST", f"/v1/sandboxes/{sid}/extend", {"duration_ms": 1000})):
        r = api.request(method, path, body=body)
        assert r.status == 410 and r.json["error"]["message"] == want, (path, r.json)
    r = api.put_files(sid, tar_of("g.txt", b"x"))
    assert r.status == 410 and r.json["error"]["message"] == want, r.json


def test_double_stop_is_idempotent(api, daemon, stopped):
    sid, _ = stopped
    first = api.sandbox(sid)
    for _ in range(3):
        r = api.stop(sid)
        assert r.status == 200, r
        s = r.json["sandbox"]
        assert s["status"] == "stopped" and s["stopped_at"] == first["stopped_at"], s
    r = api.request("POST", f"/v2/sandboxes/sessions/{sid}/stop")
    assert r.status == 200, r
    r = api.request("DELETE", f"/v2/sandboxes/{sid}")
    assert r.status == 200, r
    assert api.sandbox(sid)["stopped_at"] == first["stopped_at"]
    # A stop with a body is strict like every other.
    r = api.request("POST", f"/v1/sandboxes/{sid}/stop", body={"force": True})
    assert_error(r, 400, "bad_request", "force")
    healthy(api, daemon)


def test_concurrent_stops_while_commands_run_and_start(api, daemon):
    """Eight stops race a streaming command, a detached one and new starts: every stop
    answers 200, every start after the stop is 410 (never 5xx), the streams end."""
    sid = api.create_ok()["id"]
    try:
        detached = api.start_ok(sid, "/bin/sleep", "300")["id"]
        results, errors = [], []
        conn, resp = api.stream("POST", f"/v1/sandboxes/{sid}/commands",
                                body={"cmd": "/bin/sh", "args": ["-c", "echo up; sleep 300"],
                                      "wait": True}, timeout=30)
        try:
            assert resp.status == 200
            assert json.loads(resp.readline())["type"] == "start"

            def stopper():
                try:
                    results.append(("stop", api.stop(sid).status))
                except Exception as e:  # noqa: BLE001 -- reported below
                    errors.append(repr(e))

            def starter():
                try:
                    for _ in range(5):
                        results.append(("start", api.start(sid, "/bin/true").status))
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))

            threads = [threading.Thread(target=stopper) for _ in range(8)] + \
                      [threading.Thread(target=starter) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert not errors, errors
            assert all(st == 200 for what, st in results if what == "stop"), results
            assert all(st in (201, 410, 429) for what, st in results if what == "start"), results
            # The stream ends (exit or error line), it does not hang.
            rest = []
            while True:
                ln = resp.readline()
                if not ln:
                    break
                if ln.strip():
                    rest.append(json.loads(ln))
            assert rest and rest[-1]["type"] in ("exit", "error"), rest
        finally:
            conn.close()
        c = api.cmd_get(sid, detached).json["command"]
        assert c["status"] == "finished" and c["reason"] in ("signaled", "interrupted"), c
        assert api.sandbox(sid)["status"] == "stopped"
        assert api.start(sid, "/bin/true").status == 410
        healthy(api, daemon)
    finally:
        api.stop(sid)


def test_stop_racing_file_operations(api, daemon):
    """A stop racing an upload, a mkdir, a listing and a read: each answers 200 or a JSON
    410 (never 5xx, never a hang), and the sandbox ends stopped."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for i in range(400):
            ti = tarfile.TarInfo(f"d{i % 20}/f{i}")
            ti.size = 8000
            tf.addfile(ti, io.BytesIO(b"z" * 8000))
    data = buf.getvalue()
    for delay in (0.0, 0.02, 0.08):
        sid = api.create_ok()["id"]
        try:
            assert api.put_files(sid, tar_of("r.txt", b"r")).status == 200
            res, errors = {}, []

            def call(name, fn):
                try:
                    res[name] = fn()
                except Exception as e:  # noqa: BLE001 -- reported below
                    errors.append((name, repr(e)))

            ops = {"put": lambda: api.put_files(sid, data, timeout=30),
                   "mkdir": lambda: api.mkdir(sid, "/workspace/a/b/c", parents=True),
                   "list": lambda: api.list_files(sid, "/workspace"),
                   "read": lambda: api.read_file(sid, "/workspace/r.txt")}
            threads = [threading.Thread(target=call, args=(n, f)) for n, f in ops.items()]
            for t in threads:
                t.start()
            time.sleep(delay)
            stop = api.stop(sid)
            for t in threads:
                t.join(40)
            assert not errors, errors
            assert stop.status == 200, stop
            for name, r in res.items():
                assert r.status in (200, 410), (delay, name, r)
                if r.status == 410:
                    assert_error(r, 410, "gone")
            assert api.sandbox(sid)["status"] == "stopped"
        finally:
            api.stop(sid)
    healthy(api, daemon)


# --------------------------------------------------------------------------
# files: NUL, symlinks out of the sandbox, partial writes, wrong kinds


def test_nul_in_a_path_is_refused_not_truncated(api, daemon, sandbox):
    """A query path with %00: the C string is cut at the NUL, so
    path=/workspace/a%00.secret reads /workspace/a. A path with a NUL must be refused."""
    assert api.put_files(sandbox, tar_of("a", b"content of a\n")).status == 200
    for q in ("/workspace/a%00.secret", "/workspace/a%00", "a%00/../../etc/passwd"):
        r = api.request("GET", f"/v1/sandboxes/{sandbox}/files/content?path={q}")
        assert_error(r, 400, "bad_request")
        assert b"content of a" not in r.data
    r = api.request("GET", f"/v1/sandboxes/{sandbox}/files?path=/workspace%00/../etc")
    assert_error(r, 400, "bad_request")
    r = api.request("PUT", f"/v1/sandboxes/{sandbox}/files?dir=/workspace/sub%00zzz",
                    raw=tar_of("n.txt", b"x"), headers={"Content-Type": "application/x-tar"})
    assert_error(r, 400, "bad_request")
    assert api.sh(sandbox, "ls -A /workspace").stdout == b"a\n"
    healthy(api, daemon)


def test_nul_in_json_paths_is_refused(api, daemon, sandbox):
    for path, raw in ((f"/v1/sandboxes/{sandbox}/files/mkdir", b'{"path": "/workspace/d\\u0000x"}'),
                      (f"/v2/sandboxes/sessions/{sandbox}/fs/mkdir",
                       b'{"path": "/workspace/d\\u0000x"}'),
                      (f"/v2/sandboxes/sessions/{sandbox}/fs/read",
                       b'{"path": "/etc/passwd\\u0000"}')):
        r = post_raw(api, path, raw)
        assert_error(r, 400)
    assert api.sh(sandbox, "ls -A /workspace").stdout == b""
    healthy(api, daemon)


def test_symlinks_out_of_the_sandbox_through_every_file_route(api, daemon, sandbox, host_dir):
    """Symlinks made inside the sandbox to a host directory and to the host root: reads
    stay inside the sandbox; writes, mkdirs and listings through them never reach the
    host; every answer is a JSON 4xx or a view of the sandbox."""
    api.sh(sandbox, f"ln -s {host_dir} /workspace/hd; ln -s / /workspace/root; "
                    f"ln -s {host_dir}/marker /workspace/mk; ln -s ../../../../../{host_dir} "
                    "/workspace/rel; ln -s /proc/1/root /workspace/magic")
    secret = b"HOST-ONLY-MARKER"
    # reads: native and Vercel
    for p in ("/workspace/mk", "/workspace/hd/marker", "/workspace/rel/marker",
              "/workspace/root" + host_dir + "/marker", "/workspace/magic/etc/hostname"):
        r = api.read_file(sandbox, p)
        assert secret not in r.data, (p, r)
        assert r.status in (400, 404, 409), (p, r)
        assert_error(r, r.status)
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/read", body={"path": p})
        assert secret not in r.data, (p, r)
        assert 400 <= r.status < 500, (p, r)
    r = api.list_files(sandbox, "/workspace/hd")
    assert secret not in r.data and b"marker" not in r.data, r
    # writes through the links
    for d in ("/workspace/hd", "/workspace/rel", "/workspace/root" + host_dir,
              "/workspace/magic/tmp"):
        r = api.put_files(sandbox, tar_of("planted.txt", b"pwned"), dir=d)
        assert 400 <= r.status < 500, (d, r)
        assert_error(r, r.status)
        r = api.mkdir(sandbox, d + "/newdir", parents=True)
        assert 400 <= r.status < 500, (d, r)
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/mkdir",
                        body={"path": d + "/vdir"})
        assert 400 <= r.status < 500, (d, r)
    r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/write",
                    raw=tar_entries([("hd/planted.txt", b"pwned"), ("mk", b"pwned")]),
                    headers={"Content-Type": "application/x-tar", "x-cwd": "/workspace"})
    assert 400 <= r.status < 500, r
    r = api.put_files(sandbox, tar_of("mk", b"pwned"), dir="/workspace")
    assert_error(r, 409, "conflict")
    host_dir_unchanged(host_dir)
    healthy(api, daemon)


def test_vercel_write_refused_midway_writes_nothing(api, daemon, sandbox):
    """fs/write regroups the archive per directory and extracts group after group: a
    group refused (outside the writable area) after one that was written leaves that
    one on disk. The rule is that a refused request changes nothing."""
    archive = tar_entries([("workspace/first.txt", b"first"), ("workspace/newdir", None),
                           ("etc/evil.txt", b"evil")])
    r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/write", raw=archive,
                    headers={"Content-Type": "application/x-tar", "x-cwd": "/"})
    assert_error(r, 403)
    ls = api.sh(sandbox, "ls -A /workspace; test -e /etc/evil.txt && echo EVIL").stdout
    assert ls == b"", f"a refused upload left files behind: {ls!r}"
    healthy(api, daemon)


def test_vercel_write_hostile_x_cwd(api, daemon, sandbox):
    wrong = []
    for cwd in ("../..", "/workspace/../etc", "/workspace/./x", "..", "/proc/self",
                "/usr/lib", "/"):
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/write",
                        raw=tar_entries([("f.txt", b"x")]),
                        headers={"Content-Type": "application/x-tar", "x-cwd": cwd})
        try:
            assert 400 <= r.status < 500, r
            assert_error(r, r.status)
        except AssertionError:
            wrong.append((cwd, r))
    assert not wrong, wrong
    out = api.sh(sandbox, "find / -xdev -name f.txt 2>/dev/null; ls -A /workspace").stdout
    assert out == b"", out
    healthy(api, daemon)


def test_vercel_write_without_x_cwd_goes_to_the_workdir(api, daemon, sandbox):
    """x-cwd is optional (default: the session's cwd), but the default joins the workdir
    with "." and the daemon then refuses "/workspace/." for its '.' component: every
    fs/write without x-cwd (or with x-cwd ".") is a 400."""
    wrong = []
    for hdrs in ({}, {"x-cwd": "."}):
        h = {"Content-Type": "application/x-tar", **hdrs}
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/write",
                        raw=tar_entries([("rel.txt", b"relative\n")]), headers=h)
        if r.status != 200:
            wrong.append((hdrs, r))
    assert not wrong, wrong
    assert api.read_file(sandbox, "/workspace/rel.txt").data == b"relative\n"
    healthy(api, daemon)


def test_writes_into_a_read_only_workdir_are_403_not_500(api, daemon, make_sandbox):
    """A workdir in the read-only runtime (/usr/bin) is accepted at create, and the
    files API counts the workdir as writable: the write then fails with EROFS, answered
    500 internal. It is a write outside the writable areas: 403, as documented."""
    before = set(os.listdir("/usr/bin"))
    sid = make_sandbox(workdir="/usr/bin")
    wrong = []
    r = api.put_files(sid, tar_of("airlock_hostile_probe", b"x"))
    if r.status != 403:
        wrong.append(("put", r))
    r = api.mkdir(sid, "/usr/bin/airlock_hostile_dir")
    if r.status != 403:
        wrong.append(("mkdir", r))
    assert set(os.listdir("/usr/bin")) == before
    assert not wrong, wrong
    healthy(api, daemon)


def test_files_wrong_kinds_and_types(api, daemon, sandbox):
    assert api.put_files(sandbox, tar_of("file.txt", b"keep me\n")).status == 200
    r = api.list_files(sandbox, "/workspace/file.txt")
    assert_error(r, 400, "bad_request")
    r = api.list_files(sandbox, "/workspace/missing")
    assert_error(r, 404, "not_found")
    r = api.mkdir(sandbox, "/workspace/file.txt")
    assert_error(r, 409, "conflict")
    r = api.mkdir(sandbox, "/workspace/file.txt/sub", parents=True)
    assert_error(r, 400, "bad_request")
    r = api.put_files(sandbox, tar_of("x", b"x"), dir="/workspace/file.txt")
    assert_error(r, 400, "bad_request")
    for body in ({"path": "/workspace/d", "parents": "yes"}, {"path": 5}, {"path": ""},
                 {"path": "/workspace/d", "mode": 511}, {}, {"path": None}):
        r = api.request("POST", f"/v1/sandboxes/{sandbox}/files/mkdir", body=body)
        assert_error(r, 400, "bad_request")
    for body in ({"path": 5}, {"path": "f", "cwd": ""}, {"path": "f", "bogus": 1}):
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/read", body=body)
        assert_error(r, 400)
    r = api.request("PUT", f"/v1/sandboxes/{sandbox}/files?dir=", raw=tar_of("e", b"x"),
                    headers={"Content-Type": "application/x-tar"})
    assert_error(r, 400, "bad_request")
    r = api.request("GET", f"/v1/sandboxes/{sandbox}/files/content?path=")
    assert_error(r, 400, "bad_request")
    assert api.read_file(sandbox, "/workspace/file.txt").data == b"keep me\n"
    assert api.sh(sandbox, "ls -A /workspace").stdout == b"file.txt\n"
    healthy(api, daemon)


def test_very_long_names_everywhere(api, daemon, sandbox):
    deep = "/workspace/" + "/".join(["d" * 200] * 30)      # > PATH_MAX
    wide = "/workspace/" + "n" * 300                         # > NAME_MAX
    for p in (deep, wide):
        for r in (api.mkdir(sandbox, p, parents=True), api.read_file(sandbox, p),
                  api.list_files(sandbox, p),
                  api.put_files(sandbox, tar_of("f", b"x"), dir=p),
                  api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/fs/mkdir",
                              body={"path": p})):
            assert 400 <= r.status < 500, (p[:40], r)
            assert_error(r, r.status)
    # cwd and cmd over the agent protocol's string limit
    r = api.start(sandbox, "/bin/true", cwd="/" + "c" * 100000)
    assert 400 <= r.status < 500, r
    assert_error(r, r.status)
    assert api.cmd_list(sandbox).json["commands"] == []
    assert api.sh(sandbox, "ls -A /workspace").stdout == b""
    healthy(api, daemon)


# --------------------------------------------------------------------------
# network policies: bad CIDRs and domains on every route, the policy unchanged

BAD_CIDRS = ["10.0.0.0/33", "1.2.3.4/-1", "::/129", "10.0.0.0/8/8", "10.0.0/8", "abc",
             "1.2.3.4/", "/8", "10.0.0.0 /8", "256.0.0.0/8", "0x0a000000/8", "10.0.0.0/8\n",
             "fe80::1%eth0/64"]
BAD_DOMAINS = ["exa mple.com", "foo..com", "*.", "*", "*.*.com", "foo.*.com", "http://x.com",
               "x.com/path", "x.com:443", "a" * 64 + ".com", ".".join(["a" * 60] * 5),
               "x.com\n", "-", "*example.com", "127.0.0.1", "2130706433", "0x7f.1", "[::1]",
               "x.com\u0000", "api*.x.com"]


def _policy_state(api, sid):
    s = api.sandbox(sid)
    return s["network_policy"], s["policy_generation"]


def test_bad_cidrs_refused_policy_unchanged(api, daemon, sandbox):
    good = {"allow": ["example.com"]}
    assert api.set_policy(sandbox, good).status == 200
    before = _policy_state(api, sandbox)
    accepted = []
    for where, cidr in [(w, c) for w in ("allow", "deny") for c in BAD_CIDRS]:
        pol = {"allow": ["example.com"], "subnets": {where: [cidr]}}
        r = api.set_policy(sandbox, pol)
        if r.status != 400:
            accepted.append((cidr, r.status))
            continue
        assert_error(r, 400, "bad_request")
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/network-policy",
                        body={"mode": "custom", "allowedDomains": ["example.com"],
                              "allowedCIDRs" if where == "allow" else "deniedCIDRs": [cidr]})
        if r.status != 400:
            accepted.append(("vercel " + cidr, r.status))
    assert not accepted, f"bad CIDRs accepted: {accepted}"
    assert _policy_state(api, sandbox) == before
    healthy(api, daemon)


def test_bad_domains_refused_policy_unchanged(api, daemon, sandbox):
    before = _policy_state(api, sandbox)
    accepted = []
    for dom in BAD_DOMAINS:
        r = api.set_policy(sandbox, {"allow": [dom]})
        if r.status != 400:
            accepted.append((dom, r.status))
            continue
        assert_error(r, 400, "bad_request")
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/network-policy",
                        body={"allow": [dom]})
        if r.status != 400:
            accepted.append(("vercel " + dom, r.status))
        r = api.request("PATCH", f"/v2/sandboxes/{sandbox}",
                        body={"networkPolicy": {"allow": {dom: []}}})
        if r.status != 400:
            accepted.append(("patch " + dom, r.status))
    assert not accepted, f"bad domains accepted: {accepted}"
    assert _policy_state(api, sandbox) == before
    healthy(api, daemon)


def test_bad_policy_on_create_creates_nothing(api, daemon):
    before = ids(api)
    for pol in ({"allow": ["foo..com"]}, {"subnets": {"allow": ["10.0.0.0/33"]}},
                {"allow": ["ok.com"], "subnets": {"deny": ["nonsense"]}}):
        r = api.create(network_policy=pol)
        assert_error(r, 400, "bad_request")
        r = api.request("POST", "/v2/sandboxes", body={"networkPolicy": pol})
        assert_error(r, 400)
        r = api.request("POST", "/v3/sandboxes",
                        body={"networkPolicy": {"mode": "custom",
                                                "allowedCIDRs": ["300.0.0.0/8"]}})
        assert_error(r, 400)
    assert ids(api) == before
    healthy(api, daemon)


def test_policy_bodies_wrong_type_or_shape(api, daemon, sandbox):
    before = _policy_state(api, sandbox)
    for raw in (b"", b"null", b"true", b'"allow-all" "deny-all"', b'{"allow": null}',
                b'{"allow": [""]}', b'{"subnets": {"allow": "10.0.0.0/8"}}',
                b'{"subnets": {"allow": [10]}}', b'{"allow": ["a.com"], "allow": ["b.com"]}',
                b'{"allow": ["\xff.com"]}'):
        r = post_raw(api, f"/v1/sandboxes/{sandbox}/network-policy", raw, method="PUT")
        assert_error(r, 400, "bad_request")
    for body in ({"mode": "allow-some"}, {"mode": "allow-all", "allow": ["a.com"]},
                 {"mode": 1}, {"mode": "custom", "allowedDomains": "a.com"},
                 {"mode": "custom", "injectionRules": [{"domain": "a.com"}]}, [], 5):
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/network-policy", body=body)
        assert_error(r, 400)
    for body in ({"ports": "80"}, {"persistent": "no"}, {"networkPolicy": 5}, {"color": 1}):
        r = api.request("PATCH", f"/v2/sandboxes/{sandbox}", body=body)
        assert_error(r, 400)
    assert _policy_state(api, sandbox) == before
    healthy(api, daemon)


def test_egress_follow_bad_value_is_400(api, daemon, sandbox):
    """follow is documented as enum ["true", "false"]; another value is silently read
    as false instead of a 400."""
    r = api.request("GET", f"/v1/sandboxes/{sandbox}/egress?follow=yes", timeout=5)
    assert_error(r, 400, "bad_request", "follow")
    healthy(api, daemon)


# --------------------------------------------------------------------------
# Vercel create / extend


VC_CREATE_BAD = [
    {"timeout": 0}, {"timeout": -1}, {"timeout": "300000"}, {"timeout": INT64_MAX},
    {"timeout": 24 * 3600 * 1000 + 1}, {"resources": {"vcpus": 0}},
    {"resources": {"vcpus": 2000}}, {"resources": {"memory": 2}}, {"resources": {"memory": "1G"}},
    {"resources": {"disk": 1}}, {"env": {"A=B": "c"}}, {"ports": [70000]}, {"ports": [0]},
    {"persistent": 1}, {"source": {"type": "git"}}, {"name": "../mine"}, {"image": "/"},
    {"mounts": {"/x": {}}}, {"bogus": 1}, {"networkPolicy": "allow-some"},
]


def test_vercel_create_bad_bodies_create_nothing(api, daemon):
    before = ids(api)
    wrong = []
    for body in VC_CREATE_BAD:
        for route in ("/v2/sandboxes", "/v3/sandboxes"):
            r = api.request("POST", route, body=body)
            if r.status in (200, 201):
                api.stop(r.json["sandbox"]["name"])
            try:
                assert_error(r, 400)
            except AssertionError:
                wrong.append((route, body, r))
    assert not wrong, wrong
    assert ids(api) == before
    healthy(api, daemon)


def test_vercel_extend_bad_durations_change_nothing(api, daemon, sandbox):
    before = api.sandbox(sandbox)
    for body in ({"duration": 0}, {"duration": -1}, {"duration": "1000"}, {"duration": 1.5},
                 {}, {"duration": INT64_MAX}, {"duration": 24 * 3600 * 1000},
                 {"duration": 1000, "x": 1}):
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/extend-timeout", body=body)
        assert_error(r, 400)
    after = api.sandbox(sandbox)
    assert (after["expires_at"], after["timeout_ms"]) == \
        (before["expires_at"], before["timeout_ms"])
    healthy(api, daemon)


def test_native_extend_huge_and_overflowing_durations(api, daemon, sandbox):
    before = api.sandbox(sandbox)
    for raw in (b'{"duration_ms": 9223372036854775807}', b'{"duration_ms": 18446744073709551615}',
                b'{"duration_ms": 1e30}', b'{"duration_ms": 86400000}'):
        r = post_raw(api, f"/v1/sandboxes/{sandbox}/extend", raw)
        assert_error(r, 400, "bad_request")
    after = api.sandbox(sandbox)
    assert (after["expires_at"], after["timeout_ms"]) == \
        (before["expires_at"], before["timeout_ms"])
    healthy(api, daemon)


# --------------------------------------------------------------------------
# a burst of garbage on many connections: the daemon keeps serving


def test_garbage_burst_keeps_daemon_serving(api, daemon, sandbox):
    before = ids(api)
    payloads = [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64),  # TLS hello
                b"GET / HTTP/1.1\r\n\r\n",
                b"GET /v1/health HTTP/9.9\r\nHost: x\r\n\r\n",
                b"\r\n\r\n\r\n",
                b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                TOK.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n{}\r\n0\r\n\r\n",
                b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                TOK.encode() + b"\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                TOK.encode() + b"\r\n X-Folded: continuation\r\n\r\n",
                os.urandom(4096)]
    errs = []

    def hit(p):
        try:
            # a payload still waiting for more of a request is not answered (b"\r\n"s):
            # 2 s shows the others' answers, the rest is the daemon's idle timeout's job
            out = raw_http(daemon.port, p, read_timeout=2, one=True)
            st = http_status(out)
            if st is not None and st >= 500 and st != 505:
                errs.append((p[:40], out[:200]))
        except OSError as e:
            errs.append((p[:40], repr(e)))

    threads = [threading.Thread(target=hit, args=(p,)) for p in payloads * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errs, errs
    assert ids(api) == before
    assert api.run(sandbox, "/bin/echo", "alive").stdout == b"alive\n"
    healthy(api, daemon)


def test_env_names_with_blanks_or_control_characters_are_400(api, daemon, sandbox):
    """A variable name with a newline, a blank or a control character is refused, at
    create and for a command (the Vercel routes share the parser; a newline in a name starts
    another variable for whatever reads the environment as lines)."""
    before = ids(api)
    for name in ("A\nB", "C D", "E\tF", "G\x7fH", "I\x01J"):
        r = api.create(env={name: "x"})
        assert_error(r, 400, "bad_request", "variable name")
        r = api.start(sandbox, "/bin/true", env={name: "x"})
        assert_error(r, 400, "bad_request", "variable name")
    ok = api.run(sandbox, "/bin/sh", "-c", "echo $GOOD_NAME", env={"GOOD_NAME": "yes"})
    assert ok.out == "yes\n", ok
    assert ids(api) == before
    healthy(api, daemon)
