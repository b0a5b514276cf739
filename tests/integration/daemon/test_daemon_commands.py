"""Commands: run with wait, detached + wait + logs, stdin, kill, timeouts, users,
environment, cwd, state within and across sandboxes, volume and concurrency."""

import threading
import time

import pytest

from .conftest import HOST_SECRET

PY = "/usr/bin/python3"


def test_run_wait_stdout_stderr_exit(api, sandbox):
    out = api.sh(sandbox, "echo one; echo two >&2; echo three; exit 0")
    assert out.types[0] == "start"
    start = out.start
    assert start["status"] == "running" or start["status"] == "finished"
    assert start["cmd"] == "/bin/sh" and start["args"] == ["-c", "echo one; echo two >&2; "
                                                                  "echo three; exit 0"]
    assert out.stdout == b"one\nthree\n"
    assert out.stderr == b"two\n"
    ex = out.exit
    assert ex["id"] == start["id"] and ex["sandbox_id"] == sandbox
    assert ex["status"] == "finished" and ex["reason"] == "exited"
    assert ex["exit_code"] == 0 and ex["signal"] is None
    assert ex["finished_at"] >= ex["started_at"]


def test_run_nonzero_exit(api, sandbox):
    ex = api.sh(sandbox, "echo partial; exit 42").exit
    assert ex["exit_code"] == 42 and ex["reason"] == "exited", ex


def test_run_signaled(api, sandbox):
    out = api.sh(sandbox, "echo before; kill -TERM $$; echo after")
    assert out.stdout == b"before\n"
    ex = out.exit
    assert ex["reason"] == "signaled", ex
    assert ex["signal"] == 15 and ex["exit_code"] is None, ex


def test_run_command_not_found(api, sandbox):
    out = api.run(sandbox, "/no/such/binary-here", "x")
    ex = out.exit
    assert ex["reason"] == "exec_failed", ex
    assert ex["exit_code"] == 127, ex
    out = api.run(sandbox, "no-such-command-in-path")
    assert out.exit["reason"] == "exec_failed" and out.exit["exit_code"] == 127, out.exit


def test_script_without_shebang_runs_under_sh(api, sandbox):
    """As POSIX execvp does (and the agent's musl execvp does not): jail_execvp."""
    out = api.sh(sandbox, "printf 'echo \"ran:$1\"\\n' > s && chmod +x s")
    assert out.exit["exit_code"] == 0, out
    out = api.run(sandbox, "./s", "arg1")
    assert out.exit["exit_code"] == 0 and out.out.strip() == "ran:arg1", out


def test_binary_output_is_exact(api, sandbox):
    payload = bytes(range(256)) * 4
    out = api.run(sandbox, PY, "-c",
                  "import sys; sys.stdout.buffer.write(bytes(range(256)) * 4)")
    assert out.stdout == payload
    assert any("data_b64" in ln for ln in out.lines if ln["type"] == "stdout")


def test_detached_wait_and_logs(api, sandbox):
    script = ("import sys, time\n"
              "for i in range(300):\n"
              "    sys.stdout.write('out %d\\n' % i); sys.stdout.flush()\n"
              "    if i % 10 == 0:\n"
              "        sys.stderr.write('err %d\\n' % i); sys.stderr.flush()\n"
              "    if i % 50 == 0: time.sleep(0.05)\n"
              "sys.exit(3)\n")
    c = api.start_ok(sandbox, PY, "-c", script)
    assert c["status"] in ("running", "finished")
    assert c["sandbox_id"] == sandbox
    # Its record is visible while (or after) it runs.
    r = api.cmd_get(sandbox, c["id"])
    assert r.status == 200 and r.json["command"]["id"] == c["id"], r
    assert c["id"] in [x["id"] for x in api.cmd_list(sandbox).json["commands"]]
    done = api.wait_ok(sandbox, c["id"], timeout_ms=20000)
    assert done["exit_code"] == 3 and done["reason"] == "exited", done
    # Logs replay everything, in order, each stream complete, exit last.
    logs = api.logs(sandbox, c["id"])
    assert "start" not in logs.types
    assert logs.stdout == "".join("out %d\n" % i for i in range(300)).encode()
    assert logs.stderr == "".join("err %d\n" % i for i in range(0, 300, 10)).encode()
    assert logs.exit["exit_code"] == 3
    # A second replay is identical.
    again = api.logs(sandbox, c["id"])
    assert again.stdout == logs.stdout and again.stderr == logs.stderr
    # The command's final record agrees.
    r = api.cmd_get(sandbox, c["id"])
    assert r.json["command"]["status"] == "finished" and r.json["command"]["exit_code"] == 3


def test_logs_follow_a_running_command(api, sandbox):
    c = api.start_ok(sandbox, "/bin/sh", "-c",
                     "for i in 1 2 3 4 5; do echo tick $i; sleep 0.2; done")
    t0 = time.monotonic()
    logs = api.logs(sandbox, c["id"])  # opened while it runs: follows to the end
    assert time.monotonic() - t0 >= 0.5
    assert logs.stdout == b"".join(b"tick %d\n" % i for i in range(1, 6))
    assert logs.exit["exit_code"] == 0


def test_wait_times_out_with_504(api, sandbox):
    c = api.start_ok(sandbox, "/bin/sleep", "30")
    t0 = time.monotonic()
    r = api.cmd_wait(sandbox, c["id"], timeout_ms=300)
    assert r.status == 504 and r.error_code == "timeout", r
    assert time.monotonic() - t0 < 5
    r = api.cmd_get(sandbox, c["id"])
    assert r.json["command"]["status"] == "running"
    assert api.kill(sandbox, c["id"], 9).status == 200


def test_unknown_command_404(api, sandbox):
    for path in ("commands/cmd_nope000000000000000000000", "commands/cmd_nope/wait",
                 "commands/cmd_nope/logs"):
        r = api.request("GET", f"/v1/sandboxes/{sandbox}/{path}")
        assert r.status == 404, (path, r)
    r = api.kill(sandbox, "cmd_nope")
    assert r.status == 404, r


def test_stdin_in_request(api, sandbox):
    out = api.run(sandbox, "/bin/cat", stdin="hello\nworld\n")
    assert out.stdout == b"hello\nworld\n"
    assert out.exit["exit_code"] == 0
    # Without stdin, a reader sees EOF at once (it does not hang).
    out = api.run(sandbox, "/bin/sh", "-c", "wc -c", http_timeout=20)
    assert out.stdout.strip() == b"0"


def test_keep_stdin_then_write_and_close(api, sandbox):
    c = api.start_ok(sandbox, "/bin/sh", "-c", "cat; echo END", stdin="first,",
                     keep_stdin=True)
    r = api.stdin(sandbox, c["id"], "second,")
    assert r.status == 200, r
    r = api.stdin(sandbox, c["id"], "third", close=True)
    assert r.status == 200, r
    done = api.wait_ok(sandbox, c["id"], timeout_ms=10000)
    assert done["exit_code"] == 0
    assert api.logs(sandbox, c["id"]).stdout == b"first,second,thirdEND\n"
    # Stdin of a finished command is gone.
    r = api.stdin(sandbox, c["id"], "late")
    assert r.status == 410, r


def test_stdin_stays_open_until_closed(api, sandbox):
    c = api.start_ok(sandbox, "/bin/cat", keep_stdin=True)
    r = api.cmd_wait(sandbox, c["id"], timeout_ms=500)
    assert r.status == 504, f"cat ended without its stdin being closed: {r}"
    assert api.stdin(sandbox, c["id"], b"", close=True).status == 200
    assert api.wait_ok(sandbox, c["id"], timeout_ms=5000)["exit_code"] == 0


def test_stdin_to_a_closed_stdin_is_a_conflict(api, sandbox):
    """A command started without keep_stdin has its stdin closed at start; so does one
    whose stdin a request closed. Writing to it is the caller's mistake (409), not the
    daemon's (it answered 500 before), and the command is not disturbed."""
    c = api.start_ok(sandbox, "/bin/sleep", "300")
    r = api.stdin(sandbox, c["id"], b"late\n")
    assert r.status == 409 and r.error_code == "conflict", r
    assert "stdin is closed" in r.json["error"]["message"], r
    c2 = api.start_ok(sandbox, "/bin/cat", keep_stdin=True)
    assert api.stdin(sandbox, c2["id"], b"one\n", close=True).status == 200
    r = api.stdin(sandbox, c2["id"], b"two\n")
    assert r.status in (409, 410), r  # 410 once cat has ended
    assert api.wait_ok(sandbox, c2["id"], timeout_ms=5000)["exit_code"] == 0
    assert api.cmd_get(sandbox, c["id"]).json["command"]["status"] == "running"
    assert api.kill(sandbox, c["id"], 9).status == 200


def test_kill_running_sleep(api, sandbox):
    c = api.start_ok(sandbox, "/bin/sleep", "300")
    time.sleep(0.2)
    r = api.kill(sandbox, c["id"], 9)
    assert r.status == 200, r
    done = api.wait_ok(sandbox, c["id"], timeout_ms=5000)
    assert done["reason"] == "signaled" and done["signal"] == 9, done
    assert done["exit_code"] is None
    # Default signal: SIGTERM.
    c = api.start_ok(sandbox, "/bin/sleep", "300")
    time.sleep(0.2)
    assert api.kill(sandbox, c["id"]).status == 200
    done = api.wait_ok(sandbox, c["id"], timeout_ms=5000)
    assert done["signal"] == 15, done
    # Killing a finished command is a no-op; a bad signal is refused.
    assert api.kill(sandbox, c["id"], 9).status == 200
    assert api.kill(sandbox, c["id"], 0).status == 400
    assert api.kill(sandbox, c["id"], 65).status == 400


def test_command_timeout(api, sandbox):
    t0 = time.monotonic()
    out = api.run(sandbox, "/bin/sleep", "30", timeout=500)
    took = time.monotonic() - t0
    assert out.exit["reason"] == "timeout", out.exit
    assert out.exit["exit_code"] is None
    assert took < 5, f"a 500 ms timeout took {took:.1f}s"
    # The sandbox is fine afterwards.
    assert api.run(sandbox, "/bin/echo", "ok").stdout == b"ok\n"


def test_sudo_is_uid0_default_is_1000(api, sandbox):
    assert api.run(sandbox, "/usr/bin/id", "-u").stdout == b"1000\n"
    assert api.run(sandbox, "/usr/bin/id", "-u", sudo=True).stdout == b"0\n"
    out = api.run(sandbox, "/usr/bin/id", "-u", sudo=False)
    assert out.stdout == b"1000\n"
    assert out.exit["sudo"] is False
    # root inside is still not root of the host: the host's /root is not there.
    out = api.sh(sandbox, "ls /root 2>&1; cat /etc/shadow 2>&1 | head -c 100", sudo=True)
    assert b"root:" not in out.stdout


def test_env_from_sandbox_and_command(api, make_sandbox):
    sid = make_sandbox(env={"SBX_VAR": "from-sandbox", "SHARED": "sandbox"})
    out = api.run(sid, "/usr/bin/env", env={"CMD_VAR": "from-command"})
    env = dict(ln.split("=", 1) for ln in out.out.splitlines() if "=" in ln)
    assert env.get("SBX_VAR") == "from-sandbox"
    assert env.get("CMD_VAR") == "from-command"
    assert env.get("HOME") and env.get("PATH")
    # The daemon's own environment never leaks in.
    assert HOST_SECRET not in out.out
    assert "AIRLOCK_TEST_HOST_SECRET" not in env
    # Per-command env is not remembered by the next command.
    out = api.sh(sid, 'echo "[$CMD_VAR]"')
    assert out.stdout == b"[]\n"


def test_command_env_overrides_sandbox_env(api, make_sandbox):
    sid = make_sandbox(env={"SHARED": "sandbox"})
    out = api.run(sid, PY, "-c", "import os; print(os.environ['SHARED'])",
                  env={"SHARED": "command"})
    assert out.stdout == b"command\n", out.stdout


def test_cwd(api, sandbox):
    assert api.run(sandbox, "/bin/pwd").stdout == b"/workspace\n"
    assert api.run(sandbox, "/bin/pwd", cwd="/tmp").stdout == b"/tmp\n"
    api.sh(sandbox, "mkdir -p /workspace/sub/dir")
    out = api.run(sandbox, "/bin/pwd", cwd="/workspace/sub/dir")
    assert out.stdout == b"/workspace/sub/dir\n"
    assert out.exit["cwd"] == "/workspace/sub/dir"
    # A missing cwd fails the command rather than running it elsewhere.
    r = api.start(sandbox, "/bin/pwd", cwd="/does/not/exist", wait=True)
    if r.status == 200:
        lines = [ln for ln in r.data.decode().splitlines() if ln]
        import json
        last = json.loads(lines[-1])
        assert last["type"] in ("exit", "error")
        if last["type"] == "exit":
            assert last["command"]["exit_code"] != 0 or last["command"]["reason"] != "exited"
            assert b"/does/not/exist\\n" not in r.data
    else:
        assert 400 <= r.status < 500, r


def test_state_persists_within_a_sandbox_not_across(api, make_sandbox):
    a = make_sandbox()
    b = make_sandbox()
    assert api.sh(a, "echo secret-a > /workspace/note; echo tmp-a > /tmp/t").exit["exit_code"] == 0
    out = api.sh(a, "cat /workspace/note /tmp/t")
    assert out.stdout == b"secret-a\ntmp-a\n"
    # The other sandbox starts clean.
    out = api.sh(b, "ls -A /workspace; test -e /tmp/t && echo LEAK; cat /workspace/note")
    assert b"note" not in out.stdout and b"LEAK" not in out.stdout
    assert out.exit["exit_code"] != 0  # cat of a missing file
    assert api.sh(b, "ls -A /workspace | wc -l").stdout.strip() == b"0"
    # Nor can it see the first sandbox's processes.
    c = api.start_ok(a, "/bin/sleep", "123.456")
    out = api.sh(b, "ps -eo args 2>/dev/null || cat /proc/*/cmdline")
    assert b"123.456" not in out.stdout
    api.kill(a, c["id"], 9)


def test_many_sequential_commands(api, sandbox):
    t0 = time.monotonic()
    for i in range(50):
        out = api.run(sandbox, "/bin/sh", "-c", f"echo n{i}; exit {i % 7}")
        assert out.stdout == f"n{i}\n".encode(), (i, out)
        assert out.exit["exit_code"] == i % 7, (i, out.exit)
    took = time.monotonic() - t0
    assert took < 30, f"50 commands took {took:.1f}s"
    cmds = api.cmd_list(sandbox).json["commands"]
    assert len(cmds) == 50
    assert len({c["id"] for c in cmds}) == 50
    assert all(c["status"] == "finished" for c in cmds)


def test_concurrent_commands(api, sandbox):
    n = 8
    results = [None] * n
    errors = []

    def worker(i):
        try:
            results[i] = api.sh(sandbox, f"sleep 1; echo worker{i}; echo e{i} >&2")
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    took = time.monotonic() - t0
    assert not errors, errors
    for i, out in enumerate(results):
        assert out.stdout == f"worker{i}\n".encode(), (i, out)
        assert out.stderr == f"e{i}\n".encode(), (i, out)
        assert out.exit["exit_code"] == 0
    assert len({out.exit["id"] for out in results}) == n
    assert took < n * 1.0 * 0.6, f"{n} concurrent 1 s commands took {took:.1f}s (serialized?)"


def test_logs_keep_order_across_streams(api, sandbox):
    script = ("import sys, time\n"
              "for i in range(12):\n"
              "    s = sys.stdout if i % 3 else sys.stderr\n"
              "    s.write('m%d\\n' % i); s.flush()\n"
              "    time.sleep(0.05)\n")
    c = api.start_ok(sandbox, PY, "-c", script)
    api.wait_ok(sandbox, c["id"])
    logs = api.logs(sandbox, c["id"])
    expected = [("stdout" if i % 3 else "stderr", b"m%d\n" % i) for i in range(12)]
    assert logs.chunks == expected


def test_large_output_is_complete(api, sandbox):
    n = 5 << 20
    out = api.run(sandbox, PY, "-c",
                  "import sys\n"
                  "for i in range(%d // 65536): sys.stdout.write(chr(97 + i %% 26) * 65536)\n"
                  "sys.stderr.write('\\u00e9\\u4e2d' * 50000)\n" % n, http_timeout=120)
    assert len(out.stdout) == n
    assert out.stdout[:65536] == b"a" * 65536 and out.stdout[-1:] == b"z"[:0] + \
        bytes([97 + (n // 65536 - 1) % 26])
    # Multi-byte characters cut by chunk boundaries come out whole.
    assert out.stderr == ("\u00e9\u4e2d" * 50000).encode()
    assert all("data_b64" not in ln for ln in out.lines if ln["type"] == "stderr")
    assert out.exit["exit_code"] == 0


def test_large_stdin_in_the_request(api, sandbox):
    import hashlib
    text = "".join("line %06d of the input\n" % i for i in range(12000))  # ~290 KB
    r = api.start(sandbox, "/usr/bin/sha256sum", stdin=text)
    assert r.status == 201, f"{len(text)} bytes of stdin refused: {r}"
    c = api.wait_ok(sandbox, r.json["command"]["id"])
    out = api.logs(sandbox, c["id"])
    assert out.stdout.split()[0].decode() == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("size", [65536, 65537])
def test_stdin_at_the_exec_frame_boundary(api, sandbox, size):
    """Up to 64 KiB of stdin rides in the agent's EXEC frame, more goes in STDIN
    frames after it: on both sides of that line the command reads every byte, once."""
    import hashlib
    text = ("0123456789abcdef" * (size // 16 + 1))[:size]
    out = api.run(sandbox, "/usr/bin/sha256sum", stdin=text)
    assert out.exit["exit_code"] == 0, out.exit
    assert out.stdout.split()[0].decode() == hashlib.sha256(text.encode()).hexdigest()


def test_large_stdin_through_the_stdin_route(api, sandbox):
    import hashlib
    import os as _os
    blob = _os.urandom(300 << 10)
    c = api.start_ok(sandbox, "/usr/bin/sha256sum", keep_stdin=True)
    step = 100 << 10
    for off in range(0, len(blob), step):
        r = api.stdin(sandbox, c["id"], blob[off:off + step])
        assert r.status == 200, f"stdin write of {step} bytes at offset {off}: {r}"
    assert api.stdin(sandbox, c["id"], b"", close=True).status == 200
    api.wait_ok(sandbox, c["id"])
    out = api.logs(sandbox, c["id"])
    assert out.stdout.split()[0].decode() == hashlib.sha256(blob).hexdigest()


def test_oom_is_reported(api, make_sandbox):
    sid = make_sandbox(resources={"memory": "64M"})
    out = api.run(sid, PY, "-c", "a = []\nwhile True: a.append(bytearray(8 << 20))")
    assert out.exit["reason"] == "oom", out.exit
    assert out.exit["signal"] == 9 and out.exit["exit_code"] is None
    assert api.run(sid, "/bin/echo", "survived").stdout == b"survived\n"


def test_oversized_argument_is_refused_and_sandbox_survives(api, make_sandbox):
    # One argument (or cwd) over the agent protocol's 64 KiB string limit.
    sid = make_sandbox()
    r = api.start(sid, "/bin/echo", "a" * 70000)
    st = api.sandbox(sid)["status"]
    assert st == "running", f"one oversized argument killed the sandbox ({st}); reply {r}"
    assert r.status in (400, 413), r
    r = api.start(sid, "/bin/pwd", cwd="/" + "d" * 70000)
    assert api.sandbox(sid)["status"] == "running", r
    assert r.status in (400, 413), r
    assert api.run(sid, "/bin/echo", "fine").stdout == b"fine\n"


def test_oversized_sandbox_env_does_not_kill_the_sandbox(api):
    r = api.create(env={"BIG": "y" * 70000})
    if r.status != 201:
        assert r.status in (400, 413), r
        return
    sid = r.json["sandbox"]["id"]
    try:
        r = api.start(sid, "/bin/true")
        st = api.sandbox(sid)["status"]
        assert st == "running", f"the sandbox's own env killed it at its first command: {r}"
    finally:
        api.stop(sid)
