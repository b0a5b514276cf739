"""bench/daemon and its C clients bench/httpload, bench/rtfloor and bench/cycle.

bench/daemon: a tiny run writes every figure (the C and the Python round trip, the
closed-loop and the paced concurrent cases) with no error. bench/httpload: against a fake
server it takes a good response cut at any byte, and counts (never crashes on, never
hangs on) a wrong status, a failed command, broken chunking and a server that hangs up.
bench/rtfloor (the round trip's floor): takes a good answer cut anywhere, and fails (exit 1,
a message) on a wrong status, no Content-Length, extra bytes, a hang-up and a failing
command; usage errors exit 2. bench/cycle (create + run + stop, alternated with one-shots):
takes answers cut anywhere, with a Content-Length or chunked, tells warm cycles from cold ones,
and fails (exit 1, a message naming the step) on a wrong status, no sandbox id, a command
that did not exit 0, broken chunking, bytes after an answer, a hang-up, a silent server and a
one-shot that fails; usage errors exit 2.
"""
import json
import os
import pathlib
import socket
import subprocess
import threading

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
OK_BODY = (b'{"type":"start","command":{"id":"cmd_1","exit_code":null}}\n',
           b'{"type":"exit","command":{"id":"cmd_1","exit_code":0,"reason":"exited"}}\n')


def chunked(parts):
    out = b""
    for p in parts:
        out += b"%X\r\n" % len(p) + p + b"\r\n"
    return out + b"0\r\n\r\n"


def response(status=b"200 OK", body=chunked(OK_BODY)):
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: application/x-ndjson\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + body)


def build(tmp_path_factory, name):
    exe = tmp_path_factory.mktemp(name) / name
    r = subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                        str(REPO / "bench" / f"{name}.c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return str(exe)


@pytest.fixture(scope="module")
def httpload(tmp_path_factory):
    return build(tmp_path_factory, "httpload")


@pytest.fixture(scope="module")
def rtfloor(tmp_path_factory):
    return build(tmp_path_factory, "rtfloor")


@pytest.fixture(scope="module")
def cycle(tmp_path_factory):
    return build(tmp_path_factory, "cycle")


HEALTH = b'{"ok":true}'


def health(status=b"200 OK", body=HEALTH, length=True):
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n" +
            (b"Content-Length: %d\r\n" % len(body) if length else b"") + b"\r\n" + body)


class FakeServer:
    """Answers every request on a connection with reply(n) (n: the request's number), sent
    in pieces of `step` bytes; None closes the connection."""

    def __init__(self, reply, step=0):
        self.reply, self.step = reply, step
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.n = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.conn, args=(c,), daemon=True).start()

    def conn(self, c):
        try:
            self.exchange(c)
        except OSError:  # the client hung up on a reply it refused: expected
            pass
        finally:
            c.close()

    def exchange(self, c):
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            length = int(([ln.split(b":")[1] for ln in head.split(b"\r\n")
                           if ln.lower().startswith(b"content-length")] or [0])[0])
            while len(buf) < length:
                buf += c.recv(65536)
            buf = buf[length:]
            self.n += 1
            out = self.reply(self.n)
            if out is None:
                return
            step = self.step or len(out)
            for i in range(0, len(out), step):
                c.sendall(out[i:i + step])

    def close(self):
        self.sock.close()


def run(exe, port, *extra, timeout=30):
    r = subprocess.run([exe, "--port", str(port), "--token", "t", "--sandbox", "sbx_a", *extra],
                       capture_output=True, text=True, timeout=timeout)
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


@pytest.mark.parametrize("step", [1, 7, 0])
def test_httpload_takes_a_response_cut_anywhere(httpload, step):
    srv = FakeServer(lambda n: response(), step=step)
    try:
        r, out = run(httpload, srv.port, "--count", "20")
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    assert out["n"] == 20 and out["errors"] == 0 and out["median_ms"] > 0, out


@pytest.mark.parametrize("reply, what", [
    (lambda n: response(status=b"401 Unauthorized"), "status"),
    (lambda n: response(body=chunked([OK_BODY[0], OK_BODY[1].replace(b':0,', b':1,')])),
     "exit code"),
    (lambda n: response(body=b"ZZ\r\nxx\r\n0\r\n\r\n"), "chunk size"),
    (lambda n: response(body=b"5\r\nabcdefgh\r\n0\r\n\r\n"), "chunk end"),
    (lambda n: b"garbage\r\n\r\n", "status line"),
    (lambda n: None, "hang-up"),
    (lambda n: b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", "header size"),
])
def test_httpload_counts_what_is_wrong(httpload, reply, what):
    srv = FakeServer(reply)
    try:
        r, out = run(httpload, srv.port, "--count", "3", "--timeout", "2")
    finally:
        srv.close()
    assert r.returncode == 1, (what, r.returncode, r.stderr[-500:])
    assert out and out["n"] == 0 and out["errors"] >= 3, (what, out)
    assert "error" in r.stderr.lower(), (what, r.stderr[-500:])


@pytest.mark.parametrize("tool, argv", [
    ("httpload", []),
    ("httpload", ["--port", "0", "--token", "t", "--sandbox", "s", "--count", "1"]),
    ("httpload", ["--port", "1", "--token", "t", "--sandbox", "s"]),
    ("httpload", ["--port", "1", "--token", "t", "--sandbox", "s", "--count", "-3"]),
    ("httpload", ["--port", "1", "--token", "t", "--sandbox", "s", "--count", "1",
                  "--rate", "abc"]),
    ("httpload", ["--bogus"]),
    ("rtfloor", []),
    ("rtfloor", ["--port", "1"]),
    ("rtfloor", ["--count", "3"]),
    ("rtfloor", ["--port", "0", "--count", "3"]),
    ("rtfloor", ["--port", "70000", "--count", "3"]),
    ("rtfloor", ["--port", "1", "--count", "x"]),
    ("rtfloor", ["--bogus", "1"]),
    ("cycle", []),
    ("cycle", ["--port", "1", "--token", "t"]),
    ("cycle", ["--port", "1", "--count", "3"]),
    ("cycle", ["--token", "t", "--count", "3"]),
    ("cycle", ["--port", "70000", "--token", "t", "--count", "3"]),
    ("cycle", ["--port", "1", "--token", "t", "--count", "x"]),
    ("cycle", ["--port", "1", "--token", "t", "--count", "3", "--pause-ms", "-1"]),
    ("cycle", ["--port", "1", "--token", "a\r\nX: y", "--count", "3"]),
    ("cycle", ["--port", "1", "--token", "t", "--count", "3", "--bogus", "1"]),
])
def test_usage_errors(request, tool, argv):
    r = subprocess.run([request.getfixturevalue(tool), *argv], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and r.stderr.strip(), (tool, argv, r)


def test_bench_daemon_writes_every_figure(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("airlockd needs root")
    out = tmp_path / "d.json"
    r = subprocess.run([str(REPO / "bench" / "daemon"), "--runs", "3", "--round-trips", "20",
                        "--concurrent", "4", "--concurrent-seconds", "1",
                        "--paced-rates", "5", "--paced-seconds", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, AIRLOCK_BIN=os.environ.get(
                           "AIRLOCK_BIN", str(REPO / "build" / "airlock"))))
    assert r.returncode == 0 and out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["round_trip"]["n"] == 20 and d["round_trip"]["client"] == "bench/httpload (C)"
    assert d["round_trip_python"]["n"] == 20
    c = d["create_run_stop"]
    assert c["n"] == 3 and c["client"] == "bench/cycle (C)", c
    assert c["median_ms"] >= max(c["create_median_ms"], c["run_median_ms"], c["stop_median_ms"])
    assert d["oneshot_run"]["n"] == 3 and d["oneshot_run"]["median_ms"] > 0
    assert d["create_run_stop_python"]["n"] >= 1
    assert "ratio create+run+stop / one-shot run:" in r.stdout
    fl = d["round_trip_floor"]
    assert fl["n"] == 20 and fl["median_ms"] >= fl["exec_median_ms"] > 0, fl
    assert "round trip / its floor:" in r.stdout
    # CPU comes in 10 ms ticks: over ~45 round trips it may read 0, never less or absent
    for k in ("daemon_cpu_ms_per_round_trip", "sandbox_cpu_ms_per_round_trip"):
        assert d["round_trip"][k] >= 0, (k, d["round_trip"])
    assert d["concurrent"]["n"] > 0 and d["concurrent"]["errors"] == 0
    assert d["concurrent"]["clients"] == 4
    [p] = d["paced"]
    assert p["rate_per_client"] == 5 and p["offered_per_s"] == 20 and p["errors"] == 0
    assert p["n"] > 0 and p["p99_ms"] >= p["median_ms"] > 0
    assert "paced 5/s per client" in r.stdout


def rtfloor_against(exe, reply, *extra, step=0):
    """bench/rtfloor against a FakeServer answering reply(n); (the run, requests served)."""
    srv = FakeServer(reply, step=step)
    try:
        r = subprocess.run([exe, "--port", str(srv.port), *extra], capture_output=True,
                           text=True, timeout=60)
    finally:
        srv.close()
    return r, srv.n


@pytest.mark.parametrize("step", [1, 5, 0])
def test_rtfloor_takes_an_answer_cut_anywhere(rtfloor, step, tmp_path):
    r, served = rtfloor_against(rtfloor, lambda n: health(), "--count", "30", "--raw",
                                str(tmp_path / "raw"), step=step)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["n"] == 30 and served == 35, (out, served)  # 5 warm-up requests, then 30
    rows = [[float(x) for x in ln.split()] for ln in (tmp_path / "raw").read_text().splitlines()]
    assert len(rows) == 30
    # each row: http, exec, both (from one clock: both = http + exec)
    assert all(h > 0 and e > 0 and abs(h + e - b) < 0.01 for h, e, b in rows), rows[:3]
    assert out["both_median_ms"] >= out["exec_median_ms"] > 0


@pytest.mark.parametrize("reply, what", [
    (lambda n: health(status=b"503 Service Unavailable"), "not a 200"),
    (lambda n: health(length=False), "Content-Length"),
    (lambda n: health() + b"extra", "more bytes"),
    (lambda n: None, "recv"),
    (lambda n: b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", "header"),
])
def test_rtfloor_fails_on_what_is_wrong(rtfloor, reply, what):
    r, _ = rtfloor_against(rtfloor, reply, "--count", "3")
    assert r.returncode == 1 and what in r.stderr, (what, r.returncode, r.stderr[-500:])
    assert not r.stdout.strip()


def test_rtfloor_fails_when_the_command_fails(rtfloor):
    r, _ = rtfloor_against(rtfloor, lambda n: health(), "--count", "3", "--", "/bin/false")
    assert r.returncode == 1 and "did not exit 0" in r.stderr, r


def test_ab_daemon_compares_two_builds(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("airlockd needs root")
    bindir = os.path.dirname(os.environ.get("AIRLOCK_BIN", str(REPO / "build" / "airlock")))
    out = tmp_path / "ab.json"
    r = subprocess.run(["/usr/bin/python3", str(REPO / "bench" / "ab_daemon.py"), bindir, bindir,
                        "--cycles", "3", "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["cycles"] == 3 and len(d["median_ms"]) == 2
    for build in d["samples_ms"]:
        assert all(len(build[p]) == 3 for p in ("create", "run", "stop", "cycle")), build
        # each cycle is its three parts
        assert all(abs(c - (a + b + s)) < 0.5 for a, b, s, c in
                   zip(build["create"], build["run"], build["stop"], build["cycle"]))
    assert "B - A" in r.stdout
    # the daemons it started (state in /tmp/airlock-ab-*) are gone
    assert "airlock-ab-" not in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                               text=True).stdout


@pytest.mark.parametrize("argv", [[], ["/nonexistent", "/nonexistent"], [".", ".", "--cycles", "0"]])
def test_ab_daemon_usage_errors(argv):
    r = subprocess.run(["/usr/bin/python3", str(REPO / "bench" / "ab_daemon.py"), *argv],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and r.stderr.strip(), (argv, r)


def sandbox_json(warm=False, status="running"):
    return (b'{"sandbox":{"id":"sbx_abc123","status":"%s","warm":%s,"ports":[]}}'
            % (status.encode(), b"true" if warm else b"false"))


def json_answer(status, body):
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def command_answer(chunks=True, body=b"".join(OK_BODY)):
    if chunks:
        return response(body=chunked([body[:40], body[40:]]))
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def lifecycle(warm=lambda n: False, chunks=True, **wrong):
    """reply(n) for cycles of three requests: create (201), command (200), stop (200); a
    step named in wrong ("create", "command", "stop") gets that answer instead."""
    def reply(n):
        step = ("create", "command", "stop")[(n - 1) % 3]
        if step in wrong:
            return wrong[step]
        if step == "create":
            return json_answer(b"201 Created", sandbox_json(warm(n)))
        if step == "command":
            return command_answer(chunks)
        return json_answer(b"200 OK", sandbox_json(status="stopped"))
    return reply


def cycle_against(exe, reply, *extra, step=0):
    """bench/cycle against a FakeServer answering reply(n); (the run, its JSON, requests)."""
    srv = FakeServer(reply, step=step)
    try:
        r = subprocess.run([exe, "--port", str(srv.port), "--token", "t", *extra],
                           capture_output=True, text=True, timeout=60)
    finally:
        srv.close()
    return r, (json.loads(r.stdout) if r.stdout.strip() else None), srv.n


@pytest.mark.parametrize("step, chunks", [(1, True), (7, False), (0, True), (0, False)])
def test_cycle_takes_answers_cut_anywhere(cycle, step, chunks, tmp_path):
    # every other create comes from the pool; /bin/true stands in for airlock (`true run --
    # /bin/true` exits 0)
    r, out, served = cycle_against(
        cycle, lifecycle(warm=lambda n: n % 2 == 0, chunks=chunks), "--count", "8",
        "--warmup", "2", "--airlock", "/bin/true", "--raw", str(tmp_path / "raw"), step=step)
    assert r.returncode == 0, r.stderr
    assert served == 30 and out["n"] == 8, (served, out)  # 2 warm-up cycles, then 8
    assert out["warm_n"] + out["cold_n"] == 8 and out["warm_n"] > 0 and out["cold_n"] > 0, out
    rows = [ln.split() for ln in (tmp_path / "raw").read_text().splitlines()]
    assert len(rows) == 8 and all(len(x) == 6 for x in rows), rows[:3]
    for cyc, create, run, stop, warm, shot in rows:
        assert abs(float(create) + float(run) + float(stop) - float(cyc)) < 0.01
        assert warm in ("0", "1") and float(shot) > 0
    assert out["cycle_median_ms"] > 0 and out["oneshot_median_ms"] > 0
    assert out["ratio"] == pytest.approx(out["cycle_median_ms"] / out["oneshot_median_ms"],
                                         rel=1e-3)


def test_cycle_without_a_one_shot_reports_none(cycle):
    r, out, _ = cycle_against(cycle, lifecycle(), "--count", "3", "--warmup", "0",
                              "--pause-ms", "5")
    assert r.returncode == 0, r.stderr
    assert out["oneshot_median_ms"] is None and out["ratio"] is None and out["cold_n"] == 3


@pytest.mark.parametrize("wrong, what", [
    ({"create": json_answer(b"500 Internal Server Error", b'{"error":"x"}')}, "create: status"),
    ({"create": json_answer(b"201 Created", b'{"ok":true}')}, "no sandbox id"),
    ({"command": command_answer(body=OK_BODY[0] + OK_BODY[1].replace(b':0,', b':1,'))},
     "not an exit with code 0"),
    ({"command": response(body=b"ZZ\r\nxx\r\n0\r\n\r\n")}, "bad chunk size"),
    ({"command": response(body=b"5\r\nabcdefgh\r\n0\r\n\r\n")}, "not followed by CRLF"),
    ({"stop": json_answer(b"200 OK", b"{}") + b"extra"}, "bytes after the answer"),
    ({"stop": None}, "hung up"),
    ({"create": b"HTTP/1.1 201 Created\r\nX: " + b"a" * 70000 + b"\r\n\r\n"}, "too large"),
    ({"create": b"HTTP/1.1 201 Created\r\n\r\n{}"}, "neither a Content-Length"),
    ({"create": b"garbage\r\n\r\n"}, "status line"),
])
def test_cycle_fails_on_what_is_wrong(cycle, wrong, what):
    r, out, _ = cycle_against(cycle, lifecycle(**wrong), "--count", "2", "--warmup", "0",
                              "--timeout", "3")
    assert r.returncode == 1 and what in r.stderr and out is None, \
        (what, r.returncode, r.stderr[-500:])


def test_cycle_gives_up_on_a_silent_server(cycle):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)  # accepts (the kernel does), never answers
    try:
        r = subprocess.run([cycle, "--port", str(srv.getsockname()[1]), "--token", "t",
                            "--count", "1", "--timeout", "1"], capture_output=True, text=True,
                           timeout=30)
    finally:
        srv.close()
    assert r.returncode == 1 and "no answer in time" in r.stderr, r.stderr


def test_cycle_fails_when_the_one_shot_fails(cycle):
    r, out, _ = cycle_against(cycle, lifecycle(), "--count", "2", "--warmup", "0",
                              "--airlock", "/bin/false")
    assert r.returncode == 1 and "did not exit 0" in r.stderr and out is None, r.stderr
