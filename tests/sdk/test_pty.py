"""The interactive PTY of airlockd (docs/pty.md), for the Vercel API and the native one.

test_pty_sdk_and_ws drives it with the real @vercel/sandbox SDK (openInteractive) and the
`ws` package (the sandbox CLI's WebSocket client), both pinned in package.json: an
interactive python3 REPL and bash (echo, result, resize seen by `stty size` and a SIGWINCH
trap, ^C, the exit code in the exit frame). The other tests speak RFC 6455 by hand, to send
what no well-behaved client sends: a spent, expired or misdirected token, an unmasked frame,
a malformed one.

Run: /usr/bin/python3 -m pytest tests/sdk/test_pty.py -v   (needs build/airlock; node+npm)
"""

import base64
import http.client
import json
import os
import secrets
import socket
import struct
import subprocess
import time

import pytest

from test_sdk import HERE, TEAMS, TOKENS, Client, daemon_proc, node_modules  # noqa: F401

TICKET_TTL_S = 2


@pytest.fixture(scope="module")
def daemon():
    yield from daemon_proc("--pty-ticket-ttl", f"{TICKET_TTL_S}s")


@pytest.fixture
def api(daemon):
    return Client(daemon, "A")


@pytest.fixture(scope="module")
def sbx(daemon):
    cl = Client(daemon, "A")
    s = cl.create(timeout=300000)["session"]["id"]
    yield s
    cl.req("POST", cl.ses(s, "/stop"))


def ticket(api, sid, native=False):
    path = f"/v1/sandboxes/{sid}/pty" if native else api.ses(sid, "/interactive")
    r = api.req("POST", path, {} if not native else None)
    assert r.status == 200, r
    return r.json


class WS:
    """A minimal RFC 6455 client: handshake, frames with or without a mask, close."""

    def __init__(self, port, path, token):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        self.sock.sendall((f"GET {path}?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                           f"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            d = self.sock.recv(4096)
            if not d:
                break
            self.buf += d
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1]) if head else 0
        self.head = head.decode("latin-1")

    def send(self, op, payload=b"", mask=True, fin=True, raw=None):
        if raw is not None:
            return self.sock.sendall(raw)
        b0 = (0x80 if fin else 0) | op
        n = len(payload)
        hdr = bytes([b0]) + (bytes([n | (0x80 if mask else 0)]) if n < 126 else
                             bytes([126 | (0x80 if mask else 0)]) + struct.pack(">H", n))
        if mask:
            k = secrets.token_bytes(4)
            payload = k + bytes(c ^ k[i & 3] for i, c in enumerate(payload))
        self.sock.sendall(hdr + payload)

    def frames(self, until_close=True):
        """Every frame until the server's close: [(op, payload)]."""
        out = []
        while True:
            while len(self.buf) < 2 or len(self.buf) < self._need():
                d = self.sock.recv(65536)
                if not d:
                    return out
                self.buf += d
            op, payload = self._take()
            out.append((op, payload))
            if op == 8 and until_close:
                return out

    def _need(self):
        n = self.buf[1] & 0x7f
        if n == 126:
            return 4 + (struct.unpack(">H", self.buf[2:4])[0] if len(self.buf) >= 4 else 1 << 30)
        if n == 127:
            return 10 + (struct.unpack(">Q", self.buf[2:10])[0] if len(self.buf) >= 10 else 1 << 30)
        return 2 + n

    def _take(self):
        assert not self.buf[1] & 0x80, "a server frame is never masked"
        n, h = self.buf[1] & 0x7f, 2
        if n == 126:
            n, h = struct.unpack(">H", self.buf[2:4])[0], 4
        elif n == 127:
            n, h = struct.unpack(">Q", self.buf[2:10])[0], 10
        op, payload = self.buf[0] & 0x0f, self.buf[h:h + n]
        self.buf = self.buf[h + n:]
        return op, payload


def close_code(frames):
    assert frames and frames[-1][0] == 8, frames
    return struct.unpack(">H", frames[-1][1][:2])[0]


def start_msg(cmd, *args):
    return json.dumps({"type": "start", "command": cmd, "args": list(args),
                       "env": ["TERM=dumb"], "cwd": "/vercel/sandbox", "cols": 80,
                       "rows": 24}).encode()


def test_pty_sdk_and_ws(daemon, node_modules):
    env = dict(os.environ, AIRLOCK_URL=f"http://127.0.0.1:{daemon}", AIRLOCK_TOKEN=TOKENS["A"],
               AIRLOCK_TEAM_ID=TEAMS["A"], AIRLOCK_PROJECT_ID="prj_pty")
    r = subprocess.run([node_modules, "pty.mjs"], cwd=HERE, env=env, capture_output=True,
                       text=True, timeout=120)
    report = f"stdout:\n{r.stdout}\nstderr:\n{r.stderr[-3000:]}"
    assert r.returncode == 0, report
    assert r.stdout.strip().splitlines() == ["ok python-repl", "ok bash-resize",
                                             "ok ctrl-c-and-sigwinch", "ok sdk-ports",
                                             "4 passed, 0 failed"], report


def test_health_is_2xx_without_a_token(daemon):
    c = http.client.HTTPConnection("127.0.0.1", daemon, timeout=5)
    c.request("GET", "/health")
    assert c.getresponse().status == 200


def test_native_pty_raw_protocol(daemon, api, sbx):
    """The native route: a fragmented start with a ping between, stdin in two frames, the
    pong, output as binary frames, then exit and close 1000."""
    t = ticket(api, sbx, native=True)
    assert t["url"] == f"ws://127.0.0.1:{daemon}/v1/sandboxes/{sbx}/pty/ws"
    assert t["expiresInMs"] == TICKET_TTL_S * 1000
    ws = WS(daemon, f"/v1/sandboxes/{sbx}/pty/ws", t["token"])
    assert ws.status == 101, ws.head
    msg = start_msg("sh", "-c", "read a; read b; echo got:$a$b; exit 5")
    ws.send(1, msg[:10], fin=False)
    ws.send(9, b"hi")
    ws.send(0, msg[10:])
    ws.send(2, b"one\r")
    ws.send(2, b"two\r")
    frames = ws.frames()
    assert (10, b"hi") in frames
    out = b"".join(p for op, p in frames if op == 2)
    assert b"got:onetwo\r\n" in out, frames
    texts = [json.loads(p) for op, p in frames if op == 1]
    assert texts == [{"type": "exit", "code": 5}]
    assert close_code(frames) == 1000


def test_token_single_use(daemon, api, sbx):
    t = ticket(api, sbx)
    path = f"/v2/sandboxes/sessions/{sbx}/interactive/ws"
    first = WS(daemon, path, t["token"])
    assert first.status == 101
    first.send(8, struct.pack(">H", 1000))
    assert close_code(first.frames()) == 1000
    again = WS(daemon, path, t["token"])
    assert again.status == 401 and "already used" in again.buf.decode() + again.head


def test_token_expired(daemon, api, sbx):
    t = ticket(api, sbx)
    time.sleep(TICKET_TTL_S + 0.3)
    ws = WS(daemon, f"/v2/sandboxes/sessions/{sbx}/interactive/ws", t["token"])
    assert ws.status == 401 and b"expired" in ws.buf


def test_token_of_another_sandbox_or_team(daemon, api, sbx):
    other = api.create(timeout=60000)["session"]["id"]
    try:
        t = ticket(api, sbx)
        ws = WS(daemon, f"/v2/sandboxes/sessions/{other}/interactive/ws", t["token"])
        assert ws.status == 403 and b"another sandbox" in ws.buf
        # spent by that attempt: not usable for its own sandbox either
        ws = WS(daemon, f"/v2/sandboxes/sessions/{sbx}/interactive/ws", t["token"])
        assert ws.status == 401
    finally:
        api.req("POST", api.ses(other, "/stop"))
    # team B cannot get a ticket for team A's sandbox
    r = Client(daemon, "B").req("POST", api.ses(sbx, "/interactive"), {})
    assert r.status == 404, r
    ws = WS(daemon, f"/v2/sandboxes/sessions/{sbx}/interactive/ws", "0" * 48)
    assert ws.status == 401


@pytest.mark.parametrize("what,send,code", [
    ("unmasked", lambda ws: ws.send(2, b"x", mask=False), 1002),
    ("reserved opcode", lambda ws: ws.send(3, b"x"), 1002),
    ("rsv bit", lambda ws: ws.send(0x40 | 2, b"x"), 1002),
    ("fragmented ping", lambda ws: ws.send(9, b"x", fin=False), 1002),
    ("continuation first", lambda ws: ws.send(0, b"x"), 1002),
    ("non-minimal length", lambda ws: ws.send(0, raw=b"\x82\xfe\x00\x05" + b"k" * 4 + b"x" * 5), 1002),
    ("text not utf-8", lambda ws: ws.send(1, b"\xc0\xaf"), 1007),
    ("frame over 1 MiB", lambda ws: ws.send(0, raw=b"\x82\xff" + struct.pack(">Q", 2 << 20)), 1009),
    ("binary before start", lambda ws: ws.send(2, b"ls\r"), 1008),
    ("start without command", lambda ws: ws.send(1, b'{"type":"start"}'), 1008),
])
def test_bad_frames_close_the_session(daemon, api, sbx, what, send, code):
    t = ticket(api, sbx)
    ws = WS(daemon, f"/v2/sandboxes/sessions/{sbx}/interactive/ws", t["token"])
    assert ws.status == 101
    send(ws)
    assert close_code(ws.frames()) == code, what


def test_bad_frame_mid_session_kills_the_command(daemon, api, sbx):
    t = ticket(api, sbx)
    ws = WS(daemon, f"/v2/sandboxes/sessions/{sbx}/interactive/ws", t["token"])
    ws.send(1, start_msg("sleep", "1000"))
    time.sleep(0.3)
    ws.send(2, b"x", mask=False)
    assert close_code(ws.frames()) == 1002
    deadline = time.monotonic() + 10
    while True:
        cmds = api.req("GET", f"/v1/sandboxes/{sbx}/commands").json["commands"]
        mine = [c for c in cmds if c["cmd"] == "sleep" and c["args"] == ["1000"]]
        assert mine, cmds
        if mine[-1]["status"] == "finished" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert mine[-1]["status"] == "finished" and mine[-1]["signal"] == 9, mine[-1]


def test_not_a_websocket_handshake(daemon, api, sbx):
    t = ticket(api, sbx)
    c = http.client.HTTPConnection("127.0.0.1", daemon, timeout=5)
    c.request("GET", f"/v2/sandboxes/sessions/{sbx}/interactive/ws?token={t['token']}")
    assert c.getresponse().status == 400


def test_resize_route_and_tty_command(daemon, api, sbx):
    r = api.req("POST", f"/v1/sandboxes/{sbx}/commands",
                {"cmd": "sh", "args": ["-c", "sleep 0.5; stty size"], "tty": True, "rows": 10,
                 "cols": 20, "keep_stdin": True})
    assert r.status == 201, r
    cid = r.json["command"]["id"]
    r = api.req("POST", f"/v1/sandboxes/{sbx}/commands/{cid}/resize", {"rows": 33, "cols": 44})
    assert r.status == 200, r
    r = api.req("GET", f"/v1/sandboxes/{sbx}/commands/{cid}/logs")
    assert b"33 44" in r.data, r
    r = api.req("POST", f"/v1/sandboxes/{sbx}/commands", {"cmd": "sleep", "args": ["5"]})
    cid = r.json["command"]["id"]
    r = api.req("POST", f"/v1/sandboxes/{sbx}/commands/{cid}/resize", {"rows": 3, "cols": 4})
    assert r.status == 409, r  # no terminal
    r = api.req("POST", f"/v1/sandboxes/{sbx}/commands/{cid}/resize", {"rows": 0, "cols": 4})
    assert r.status == 400, r
    api.req("POST", f"/v1/sandboxes/{sbx}/commands/{cid}/kill", {"signal": 9})


def _agent_cpu_ticks(sid):
    """utime + stime of the sandbox's agent (PID 1), found by its cgroup (v1 or v2 path)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "airlock-agent":
                    continue
            with open(f"/proc/{pid}/cgroup") as f:
                if not any(line.rstrip().endswith(f"/airlock/{sid}") for line in f):
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        except OSError:
            continue
    raise AssertionError(f"no agent of sandbox {sid} found")


def test_an_ended_tty_command_leaves_the_agent_idle(daemon, api):
    """A TTY command's output streams are dups of its PTY master: when it ends, the agent
    takes them out of its epoll set before closing them. A plain close left the master's
    EPOLLHUP registered (another dup stays open for resizes), and the agent spun at 100% of
    a CPU until the command was forgotten."""
    sid = api.create(timeout=120000)["session"]["id"]
    try:
        for _ in range(2):
            r = api.req("POST", f"/v1/sandboxes/{sid}/commands",
                        {"cmd": "echo", "args": ["done"], "tty": True, "wait": True})
            assert r.status == 200 and b"done" in r.data, r
        time.sleep(0.3)
        before = _agent_cpu_ticks(sid)
        time.sleep(1.5)
        spent = _agent_cpu_ticks(sid) - before
        hz = os.sysconf("SC_CLK_TCK")
        assert spent < 0.2 * hz, f"the idle agent used {spent / hz:.2f} s of CPU in 1.5 s"
    finally:
        api.req("POST", api.ses(sid, "/stop"))
