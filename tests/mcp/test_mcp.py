"""`airlock mcp`: the MCP server over stdio (docs/mcp.md).

test_sdk_flow_* drive the server with the official MCP TypeScript SDK (pinned in
package.json, flow.mjs) in both modes: embedded (one-shot `airlock run`s) and against a
private airlockd. The other tests speak the raw protocol: framing, errors, the session's
life (EOF, SIGTERM, cancellation) and the command line.

Run: /usr/bin/python3 -m pytest tests/mcp -v   (needs build/airlock; node and npm for the
SDK flows, which install node_modules with `npm ci` when missing).
"""

import http.client
import json
import os
import pathlib
import queue
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
AIRLOCK_BIN = os.environ.get("AIRLOCK_BIN", str(REPO / "build" / "airlock"))
TOKEN = "tokM_" + secrets.token_hex(16)
TEAM = "team_mcp"
LATEST = "2025-11-25"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_pids(needle):
    r = subprocess.run(["pgrep", "-f", needle], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def wait_gone(needle, secs=5.0):
    deadline = time.monotonic() + secs
    while host_pids(needle) and time.monotonic() < deadline:
        time.sleep(0.05)
    return host_pids(needle)


def marker():
    """A unique `sleep` duration, so its processes can be found on the host."""
    return f"{71 + secrets.randbelow(20)}.{secrets.randbelow(10**6):06d}"


class Raw:
    """The server on pipes; every stdout line must be one JSON-RPC message."""

    def __init__(self, args, env=None):
        self.p = subprocess.Popen([AIRLOCK_BIN, "mcp", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._out, daemon=True).start()
        self._err_reader = threading.Thread(target=self._err, daemon=True)
        self._err_reader.start()

    def _out(self):
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _err(self):
        self.stderr = self.p.stderr.read()

    def send(self, msg):
        data = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        self.p.stdin.write(data + b"\n")
        self.p.stdin.flush()

    def recv(self, timeout=20):
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"the server ended: {self.stderr[-2000:]!r}"
        assert line.endswith(b"\n")
        msg = json.loads(line)
        assert msg["jsonrpc"] == "2.0", msg
        return msg

    def no_message(self, wait=0.5):
        with pytest.raises(queue.Empty):
            self.lines.get(timeout=wait)

    def request(self, id, method, params=None, timeout=20):
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.recv(timeout)

    def initialize(self, version=LATEST):
        r = self.request(0, "initialize", {"protocolVersion": version, "capabilities": {},
                                           "clientInfo": {"name": "raw", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def call(self, id, name, args, timeout=30, **params):
        return self.request(id, "tools/call", {"name": name, "arguments": args, **params},
                            timeout)

    def close(self, timeout=20):
        self.p.stdin.close()
        rc = self.p.wait(timeout)
        # stderr is whole only once its reader has seen the end (the exit does not wait
        # for it: a check of stderr right after close() read b"" once)
        self._err_reader.join(5)
        rest = []
        while (line := self.lines.get(timeout=5)) is not None:
            rest.append(line)
        for line in rest:  # whatever came last is protocol too
            assert json.loads(line)["jsonrpc"] == "2.0", line
        return rc

    def kill(self):
        """At teardown: end the session as a client would (its staging goes), else kill."""
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
                self.p.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()


@pytest.fixture
def raw():
    made = []

    def start(*args, env=None):
        r = Raw(list(args), env)
        made.append(r)
        return r
    yield start
    for r in made:
        r.kill()


@pytest.fixture(scope="module")
def node_modules():
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node and npm are needed to run the MCP SDK flow")
    if not (HERE / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"npm ci failed:\n{r.stdout}\n{r.stderr}"
    return node


def api(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Authorization": f"Bearer {TOKEN}",
                           "Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        c.close()


def running_sandboxes(port):
    status, body = api(port, "GET", "/v1/sandboxes")
    assert status == 200, body
    return [s for s in body["sandboxes"] if s["status"] == "running"]


@pytest.fixture(scope="module")
def daemon():
    if not os.access(AIRLOCK_BIN, os.X_OK):
        pytest.fail(f"{AIRLOCK_BIN} is missing: build it first (ninja -C build)")
    tmp = tempfile.mkdtemp(prefix="airlock-mcp-daemon-")
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write(f"{TOKEN} {TEAM}\n")
    port = free_port()
    log = open(os.path.join(tmp, "daemon.log"), "wb")
    proc = subprocess.Popen([AIRLOCK_BIN, "serve", "--state-dir", os.path.join(tmp, "state"),
                             "--listen", f"127.0.0.1:{port}", "--tokens", tokens],
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
    for s in running_sandboxes(port):
        api(port, "POST", f"/v1/sandboxes/{s['id']}/stop")
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    shutil.rmtree(tmp, ignore_errors=True)


def daemon_args(port):
    return ["--url", f"http://127.0.0.1:{port}", "--token", TOKEN]


# --------------------------------------------------------------------------
# the official SDK, both modes

FLOW_STEPS = ["tools/list", "write_file", "run_code", "exec", "read_file, list_files", "state",
              "timeout", "progress", "cancel", "errors", "network", "close"]


def run_flow(node, mode, server_args):
    cmd = [AIRLOCK_BIN, "mcp", *server_args, "--allow", "allowed.test", "--timeout", "20s"]
    env = dict(os.environ, MCP_MODE=mode, MCP_COMMAND=json.dumps(cmd))
    r = subprocess.run([node, "flow.mjs"], cwd=HERE, env=env, capture_output=True, text=True,
                       timeout=300)
    report = f"stdout:\n{r.stdout}\nstderr:\n{r.stderr[-3000:]}"
    assert r.returncode == 0, report
    done = [ln[3:] for ln in r.stdout.splitlines() if ln.startswith("ok ")]
    return done, report


def test_sdk_flow_embedded(node_modules):
    done, report = run_flow(node_modules, "embedded", [])
    assert done == FLOW_STEPS, report


def test_sdk_flow_daemon(node_modules, daemon):
    done, report = run_flow(node_modules, "daemon", daemon_args(daemon))
    want = FLOW_STEPS[:-1] + ["reset", "close"]
    assert done == want, report
    # the client went away: the session's sandbox was stopped
    assert running_sandboxes(daemon) == []


# --------------------------------------------------------------------------
# the protocol, raw

@pytest.mark.parametrize("asked,answered", [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2024-11-05"), ("1999-01-01", LATEST), (None, LATEST)])
def test_initialize_answers_the_asked_version_or_the_latest(raw, asked, answered):
    s = raw()
    r = s.initialize(asked)
    res = r["result"]
    assert r["id"] == 0
    assert res["protocolVersion"] == answered
    assert res["capabilities"]["tools"] == {"listChanged": False}
    assert "resources" in res["capabilities"]
    assert res["serverInfo"]["name"] == "airlock"
    again = s.request(1, "initialize", {"protocolVersion": LATEST})
    assert again["error"]["code"] == -32600 and again["id"] == 1
    assert s.close() == 0


def test_only_ping_before_initialize(raw):
    s = raw()
    assert s.request("p", "ping") == {"jsonrpc": "2.0", "id": "p", "result": {}}
    r = s.request(1, "tools/list")
    assert r["error"]["code"] == -32600 and "initialize" in r["error"]["message"]
    s.initialize()
    assert len(s.request(2, "tools/list")["result"]["tools"]) == 5
    assert s.close() == 0


@pytest.mark.parametrize("line,code,id", [
    (b"not json", -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping"', -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"pi\\u0000ng"}', -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', -32700, None),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, None),
    (b'[]', -32600, None),
    (b'"ping"', -32600, None),
    (b'42', -32600, None),
    (b'{"jsonrpc":"1.0","id":5,"method":"ping"}', -32600, 5),
    (b'{"id":6,"method":"ping"}', -32600, 6),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":"m","method":7}', -32600, "m"),
    (b'{"jsonrpc":"2.0","id":8,"method":"ping","params":[1]}', -32600, 8),
    (b'{"jsonrpc":"2.0","id":9,"method":"ping","result":{}}', -32600, 9),
    (b'{"jsonrpc":"2.0"}', -32600, None),
])
def test_malformed_messages_get_a_json_rpc_error(raw, line, code, id):
    s = raw()
    s.initialize()
    s.send(line)
    r = s.recv()
    assert r["error"]["code"] == code, r
    assert r["id"] == id, r
    assert s.request(99, "ping")["result"] == {}  # and the server goes on
    assert s.close() == 0


def test_notifications_and_responses_get_no_answer(raw):
    s = raw()
    s.initialize()
    s.send({"jsonrpc": "2.0", "method": "notifications/unknown", "params": {}})
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 42}})
    s.send({"jsonrpc": "2.0", "id": 77, "result": {}})  # a response to nothing we asked
    s.send(b"")
    s.send(b"   \r")
    s.no_message()
    assert s.request(7, "ping")["id"] == 7  # the next line is the ping's answer
    assert s.close() == 0


def test_unknown_method_and_unknown_tool(raw):
    s = raw()
    s.initialize()
    r = s.request("x", "tools/explode")
    assert r["error"]["code"] == -32601 and r["id"] == "x"
    r = s.call(2, "no_such_tool", {})
    assert r["error"]["code"] == -32602 and "no_such_tool" in r["error"]["message"]
    r = s.call(3, "reset", {})
    assert r["error"]["code"] == -32602, "reset exists only against a daemon"
    r = s.request(4, "tools/call", {"name": "exec", "arguments": ["ls"]})
    assert r["error"]["code"] == -32602
    r = s.request(5, "resources/read", {"uri": "file:///etc/passwd"})
    assert r["error"]["code"] == -32002
    assert s.close() == 0


def test_oversized_message_is_refused_and_the_server_goes_on(raw):
    s = raw()
    s.initialize()
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (9 << 20) + b'"}}'
    s.send(big)
    r = s.recv()
    assert r["error"]["code"] == -32600 and r["id"] is None
    assert "8 MiB" in r["error"]["message"]
    # a message just under the cap is read
    ok = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"' + b"a" * (7 << 20) + b'"}}'
    s.send(ok)
    assert s.recv()["id"] == 2
    assert s.close() == 0


def test_bad_arguments_are_tool_errors(raw):
    s = raw()
    s.initialize()
    cases = [("write_file", {"path": "", "content": "x"}, "path"),
             ("write_file", {"path": "/workspace", "content": "x"}, "names /workspace"),
             ("write_file", {"path": "/workspace/../x", "content": "x"}, "path"),
             ("write_file", {"path": "x"}, "content"),
             ("list_files", {"path": "/"}, "outside /workspace"),
             ("exec", {"argv": ["ls"], "cwd": "/proc"}, "cwd"),
             ("exec", {"argv": "ls"}, "argv"),
             ("exec", {"argv": ["ls"], "timeout": -1}, "timeout"),
             ("run_code", {"language": "python"}, "code"),
             ("run_code", {"language": "bash", "code": "x" * (128 << 10)}, "code"),
             ("run_code", {"language": "bash", "code": "true", "net": "allow-all"},
              "unknown argument")]
    for i, (tool, args, needle) in enumerate(cases):
        r = s.call(i + 1, tool, args)["result"]
        assert r["isError"] is True, (tool, args, r)
        assert needle in r["content"][0]["text"], (tool, args, r)
        assert "structuredContent" not in r
    # a NUL anywhere (here in a path) never reaches a tool: the message is refused whole
    r = s.call(99, "write_file", {"path": "a\u0000b", "content": "x"})
    assert r["error"]["code"] == -32700 and r["id"] is None
    assert s.close() == 0


def test_stdout_carries_protocol_only(raw):
    """The command's own stdout and stderr, and the server's logs, never reach stdout."""
    s = raw()
    s.initialize()
    r = s.call(1, "run_code", {"language": "bash", "code": "echo to-out; echo to-err >&2"})
    assert r["result"]["structuredContent"]["stdout"] == "to-out\n"
    s.call(2, "exec", {"argv": ["no-such-command"]})
    assert s.close() == 0  # close() checks every remaining line
    assert b"ready" in s.stderr


def test_a_tool_timeout_only_shortens_the_servers(raw):
    s = raw("--timeout", "1s")
    s.initialize()
    t0 = time.monotonic()
    r = s.call(1, "run_code", {"language": "bash", "code": "sleep 4; echo late",
                               "timeout": 3600})
    assert r["result"]["structuredContent"]["reason"] == "timeout"
    assert r["result"]["isError"] is True
    assert time.monotonic() - t0 < 3.5
    assert s.close() == 0


def test_command_line_limits_env_and_hostname_apply(raw):
    s = raw("--env", "GREETING=hi", "--hostname", "mcp-box", "--memory", "64M")
    s.initialize()
    r = s.call(1, "run_code", {"language": "bash", "code": "echo $GREETING $(hostname)"})
    assert r["result"]["structuredContent"]["stdout"] == "hi mcp-box\n"
    r = s.call(2, "run_code", {"language": "python",
                               "code": "b = bytearray(256 << 20)\nprint(len(b))"})
    assert r["result"]["structuredContent"]["reason"] == "oom", r
    assert s.close() == 0


def test_cancel_kills_the_command_and_gets_no_answer(raw):
    s = raw()
    s.initialize()
    m = marker()
    s.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "run_code", "arguments": {"language": "bash",
                                                         "code": f"sleep {m}"}}})
    deadline = time.monotonic() + 10
    while not host_pids(f"sleep {m}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids(f"sleep {m}"), "the command started"
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 5, "reason": "test"}})
    assert wait_gone(f"sleep {m}") == []
    assert s.request(6, "ping")["id"] == 6  # no answer to 5 came before this one
    s.no_message()
    assert s.close() == 0


def test_progress_only_when_asked(raw):
    s = raw()
    s.initialize()
    r = s.call(1, "run_code", {"language": "bash", "code": "sleep 2.5"},
               _meta={"progressToken": "tok-1"})
    # progress notifications came first, in order, then the answer
    assert r["method"] == "notifications/progress", r
    seen = [r["params"]]
    while "id" not in (r := s.recv()):
        seen.append(r["params"])
    assert r["id"] == 1
    assert all(p["progressToken"] == "tok-1" for p in seen)
    assert [p["progress"] for p in seen] == sorted({p["progress"] for p in seen})
    assert len(seen) >= 2
    r = s.call(2, "run_code", {"language": "bash", "code": "sleep 1.5"})
    assert r["id"] == 2, "no progress without a token"
    assert s.close() == 0


def test_eof_ends_the_session_and_removes_its_staging(raw, tmp_path):
    s = raw(env=dict(os.environ, TMPDIR=str(tmp_path)))
    s.initialize()
    assert s.call(1, "write_file", {"path": "k.txt", "content": "x"})["result"]["isError"] is False
    made = list(tmp_path.glob("airlock-mcp-*"))
    assert len(made) == 1
    assert stat.S_IMODE(made[0].stat().st_mode) == 0o700
    assert (made[0] / "workspace" / "k.txt").read_text() == "x"
    assert s.close() == 0
    assert list(tmp_path.glob("airlock-mcp-*")) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_session_and_its_command(raw, sig):
    s = raw()
    s.initialize()
    m = marker()
    s.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_code", "arguments": {"language": "bash",
                                                         "code": f"sleep {m}"}}})
    deadline = time.monotonic() + 10
    while not host_pids(f"sleep {m}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids(f"sleep {m}")
    s.p.send_signal(sig)
    assert s.p.wait(15) == 0
    assert wait_gone(f"sleep {m}") == []


# --------------------------------------------------------------------------
# the command line

@pytest.mark.parametrize("flags,needle", [
    (["--memory", "12Q"], "--memory"),
    (["--bogus"], "unknown option"),
    (["--timeout"], "needs a value"),
    (["--allow", "bad domain!"], "not a valid domain"),
    (["--net", "deny", "--allow", "x.test"], "cannot be combined"),
    (["--policy", "/nonexistent/policy.json"], "--policy"),
    (["stray"], "unexpected argument"),
    (["--url", "http://127.0.0.1:9", "--token", "t", "--pids", "5"], "embedded runs only"),
])
def test_bad_flags_are_a_usage_error_before_any_protocol(flags, needle):
    r = subprocess.run([AIRLOCK_BIN, "mcp", *flags], input=b"", capture_output=True, timeout=30)
    assert r.returncode == 64, r
    assert r.stdout == b""
    assert needle.encode() in r.stderr, r.stderr


def test_unreachable_daemon_fails_before_any_protocol():
    port = free_port()
    r = subprocess.run([AIRLOCK_BIN, "mcp", "--url", f"http://127.0.0.1:{port}", "--token", "t"],
                       input=b"", capture_output=True, timeout=30)
    assert r.returncode == 125 and r.stdout == b""
    assert b"does not answer" in r.stderr


def test_help():
    r = subprocess.run([AIRLOCK_BIN, "mcp", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout.startswith("usage: airlock mcp")
    assert "--allow" in r.stdout and "reset" in r.stdout
    r = subprocess.run([AIRLOCK_BIN, "help"], capture_output=True, text=True)
    assert "  mcp " in r.stdout


# --------------------------------------------------------------------------
# against airlockd

def test_daemon_session_sandbox_has_the_command_lines_settings_and_ends_with_eof(raw, daemon):
    s = raw(*daemon_args(daemon), "--memory", "256M", "--hostname", "mcp-d", "--env", "K=v",
            "--allow", "allowed.test")
    s.initialize()
    tools = [t["name"] for t in s.request(1, "tools/list")["result"]["tools"]]
    assert "reset" in tools
    r = s.call(2, "run_code", {"language": "bash", "code": "echo $K $(hostname) > f; cat f"})
    assert r["result"]["structuredContent"]["stdout"] == "v mcp-d\n", r
    mine = running_sandboxes(daemon)
    assert len(mine) == 1
    sb = mine[0]
    assert sb["resources"]["memory_bytes"] == 256 << 20
    assert sb["network_policy"]["allow"] == ["allowed.test"]
    r = s.call(3, "exec", {"argv": ["cat", "f"]})
    assert r["result"]["structuredContent"]["stdout"] == "v mcp-d\n", "kept between calls"
    assert [x["id"] for x in running_sandboxes(daemon)] == [sb["id"]]
    assert s.close() == 0
    assert running_sandboxes(daemon) == []
    status, body = api(daemon, "GET", f"/v1/sandboxes/{sb['id']}")
    assert body["sandbox"]["status"] in ("stopped", "stopping")


def test_daemon_sigterm_stops_the_sandbox(raw, daemon):
    s = raw(*daemon_args(daemon))
    s.initialize()
    m = marker()
    s.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_code", "arguments": {"language": "bash",
                                                         "code": f"sleep {m}"}}})
    deadline = time.monotonic() + 15
    while not host_pids(f"sleep {m}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids(f"sleep {m}")
    s.p.send_signal(signal.SIGTERM)
    assert s.p.wait(20) == 0
    assert wait_gone(f"sleep {m}", 10) == []
    assert running_sandboxes(daemon) == []


def test_daemon_sandbox_stopped_elsewhere_is_replaced(raw, daemon):
    s = raw(*daemon_args(daemon))
    s.initialize()
    assert s.call(1, "write_file", {"path": "x", "content": "1"})["result"]["isError"] is False
    [sb] = running_sandboxes(daemon)
    api(daemon, "POST", f"/v1/sandboxes/{sb['id']}/stop")
    r = s.call(2, "exec", {"argv": ["echo", "again"]})
    assert r["result"]["structuredContent"]["stdout"] == "again\n"
    [sb2] = running_sandboxes(daemon)
    assert sb2["id"] != sb["id"]
    r = s.call(3, "read_file", {"path": "nope.txt"})
    assert r["result"]["isError"] is True, "a missing file is not a missing sandbox"
    assert [x["id"] for x in running_sandboxes(daemon)] == [sb2["id"]]
    assert s.close() == 0


@pytest.mark.parametrize("mode", ["embedded", "daemon"])
def test_output_limit_cuts_and_says_so(raw, request, mode):
    args = daemon_args(request.getfixturevalue("daemon")) if mode == "daemon" else []
    s = raw(*args, "--output-limit", "1K")
    s.initialize()
    r = s.call(1, "run_code", {"language": "python",
                               "code": "import sys\nprint('é' * 3000)\nprint('x', file=sys.stderr)"})
    out = r["result"]["structuredContent"]
    assert out["stdout_truncated"] is True and out["stderr_truncated"] is False, out
    assert 1000 <= len(out["stdout"].encode()) <= 1024 and set(out["stdout"]) == {"é"}
    assert out["stderr"] == "x\n"
    assert r["result"]["isError"] is False
    assert s.close() == 0
