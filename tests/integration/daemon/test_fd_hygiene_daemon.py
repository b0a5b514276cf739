"""airlockd, its spawner, agents and commands never close a descriptor twice.

The same check as tests/integration/test_fd_hygiene.py, for the daemon: a
daemon of its own runs under `strace -f` (every process it makes is traced:
the spawner, each sandbox's PID 1 and agent, each command's shim), a sandbox
goes through create, commands (output, stdin, a failed exec, a kill, a
timeout), files in and out, and stop; then no close(2) anywhere may have
failed with EBADF. A second close of a number is a bug whether or not
something reused the number in between; strace sees both alike.
"""

import os
import pathlib
import shutil
import signal
import subprocess
import tempfile

import pytest

from .conftest import Api, Daemon, TOKENS, children_of, free_port, private_bindir, tar_of


@pytest.fixture
def traced():
    # A short directory: the agents' sockets live under it (sun_path is 108 bytes).
    tmp_path = pathlib.Path(tempfile.mkdtemp(prefix="alfd", dir="/tmp"))
    strace = shutil.which("strace")
    assert strace, "strace is installed by scripts/setup"
    log = tmp_path / "strace.txt"
    real = private_bindir(tmp_path)
    wrapper = tmp_path / "airlock-traced"
    wrapper.write_text(f"#!/bin/sh\nexec {strace} -f -qq -o {log} "
                       f"-e trace=close,close_range {real} \"$@\"\n")
    wrapper.chmod(0o755)
    work = tmp_path / "d"
    work.mkdir()
    d = Daemon(work, free_port(), str(wrapper))
    d.start(timeout=60)
    try:
        yield d, log
    finally:
        # A failed test leaves the daemon up: stop its sandboxes, then end airlockd
        # itself (killing strace would only detach it, and it would run on).
        if d.alive():
            try:
                cli = Api(d.port, TOKENS["A"], timeout=10)
                for s in cli.list():
                    if s["status"] == "running":
                        cli.stop(s["id"])
            except (OSError, AssertionError):
                pass
            for pid in children_of(d.pid):  # airlockd, strace's child
                os.kill(pid, signal.SIGTERM)
            try:
                d.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for pid in children_of(d.pid):  # airlockd, strace's child
                    os.kill(pid, signal.SIGKILL)
                d.proc.kill()
                d.proc.wait()
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_daemon_closes_no_descriptor_twice(traced):
    d, log = traced
    api = Api(d.port, TOKENS["A"])
    sid = api.create_ok()["id"]
    out = api.sh(sid, "echo out; echo err >&2; exit 3")
    assert out.exit["exit_code"] == 3 and out.out == "out\n" and out.err == "err\n", out
    c = api.start_ok(sid, "/bin/cat", keep_stdin=True)
    assert api.stdin(sid, c["id"], "hello\n", close=True).status == 200
    assert api.wait_ok(sid, c["id"])["exit_code"] == 0
    assert api.run(sid, "/no/such/command").exit["exit_code"] != 0
    c = api.start_ok(sid, "/bin/sleep", "30")
    assert api.kill(sid, c["id"]).status in (200, 202, 204)
    api.wait_ok(sid, c["id"])
    assert api.run(sid, "/bin/sleep", "30", timeout=300).exit["exit_code"] != 0
    assert api.put_files(sid, tar_of("f.txt", b"data\n"), dir="/workspace").status in (200, 201, 204)
    r = api.read_file(sid, "/workspace/f.txt")
    assert r.status == 200 and r.data == b"data\n", r
    assert api.stop(sid).status == 200
    # SIGTERM to airlockd itself (strace's child), then strace ends with it.
    (airlockd,) = children_of(d.pid)  # airlockd, strace's child
    os.kill(airlockd, signal.SIGTERM)
    assert d.proc.wait(timeout=60) == 0
    text = log.read_text()
    assert text.count("close(") > 100, "strace saw too few close(2) calls: not tracing"
    bad = [line for line in text.splitlines() if "EBADF" in line]
    assert bad == [], "closed twice:\n" + "\n".join(bad[:20])
