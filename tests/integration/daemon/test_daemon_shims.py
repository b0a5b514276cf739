"""The agent keeps a command's shim for the next command when the first left nothing
running (src/agent/shim.c): a fork and an exit less per command. These tests check that
it does, that it does not when a command leaves a process behind (that process keeps
running, and the next command's tree is not its tree), that each command still gets only
its own stdio, status and output, and that a reused shim does not grow. A sandbox's
first command's shim is kept like any other."""

import os
import signal
import time

import pytest

from .conftest import agent_pid_of, children_of, wait_for


def ppid_of(api, sandbox, **kw):
    out = api.sh(sandbox, "echo $PPID", **kw)
    assert out.exit["exit_code"] == 0, out
    return int(out.out)


def kept_shim(api, sandbox):
    """The pid of the shim the agent keeps after a command that left nothing behind."""
    return ppid_of(api, sandbox)


def test_commands_in_turn_share_one_shim(api, sandbox):
    # The first command's shim is kept for the second, and so on.
    first = ppid_of(api, sandbox)
    assert first != 1
    assert [ppid_of(api, sandbox) for _ in range(6)] == [first] * 6
    # Each still gets its own status, output and stdin.
    out = api.sh(sandbox, "read x; echo got=$x; echo e >&2; exit 7", stdin="hi\n")
    assert (out.exit["exit_code"], out.out, out.err) == (7, "got=hi\n", "e\n"), out
    out = api.run(sandbox, "/no/such/command")
    assert out.exit["exit_code"] == 127, out
    assert ppid_of(api, sandbox) == first


def test_a_command_that_leaves_a_process_gets_no_successor_in_its_shim(api, sandbox):
    shim = kept_shim(api, sandbox)
    assert ppid_of(api, sandbox) == shim
    out = api.sh(sandbox, "sleep 60 & echo $!")
    bg = int(out.out)
    nxt = ppid_of(api, sandbox)
    assert nxt != shim, "the shim of a command whose child still runs served another"
    # The leftover keeps running, now below PID 1; killing the next command (its whole
    # tree) must not touch it.
    c = api.start_ok(sandbox, "/bin/sleep", "60")
    assert api.kill(sandbox, c["id"], 9).status == 200
    api.wait_ok(sandbox, c["id"])
    out = api.sh(sandbox, f"cat /proc/{bg}/stat")
    assert out.exit["exit_code"] == 0, out
    fields = out.out.rsplit(")", 1)[1].split()
    assert fields[0] in "RSD" and fields[1] == "1", out.out


def test_a_killed_command_shim_is_reused_cleanly(api, sandbox):
    """A KILL kills the command's tree; the shim then serves the next command, which is
    not killed by anything meant for the one before."""
    c = api.start_ok(sandbox, "/bin/sh", "-c", "sleep 60 & sleep 60")
    assert api.kill(sandbox, c["id"], 9).status == 200
    done = api.wait_ok(sandbox, c["id"])
    assert done["signal"] == 9, done
    for _ in range(3):
        out = api.sh(sandbox, "sleep 0.2; echo alive")
        assert out.exit["exit_code"] == 0 and out.out == "alive\n", out


def test_a_kill_right_after_the_start_reaches_a_new_shims_command(api, sandbox):
    """Commands started together each get a new shim; a KILL sent the instant after each
    start must end it with signal 9. A shim forked with signals unblocked died of the
    KILL's own carrier signal (SIGRTMIN) when it came before the shim blocked it, and the
    command ended "signaled 35" (seen once in CI). The window is a shim that waits for a
    CPU longer than the KILL's trip: busy CPUs widen it, but this guard catches the race
    only when the scheduler lets it happen."""
    import subprocess
    wrong = []
    # Busy CPUs make a new shim wait for one, which opens the window the KILL fell in.
    hogs = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]) for _ in range(4)]
    try:
        for _ in range(10):
            cs = [api.start_ok(sandbox, "/bin/sleep", "60") for _ in range(5)]
            for c in cs:
                assert api.kill(sandbox, c["id"], 9).status == 200
            for c in cs:
                done = api.wait_ok(sandbox, c["id"])
                if done["signal"] != 9:
                    wrong.append(done)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert not wrong, wrong


def test_a_kill_right_after_the_start_reaches_a_reused_shims_command(api, sandbox):
    """A KILL sent at once after the start must kill the command the shim has just been
    handed, every time (a KILL for an earlier command of the same shim must not, which
    the shim tells apart by the command's number in the signal's value)."""
    shim = kept_shim(api, sandbox)
    for _ in range(20):
        c = api.start_ok(sandbox, "/bin/sleep", "60")
        assert api.kill(sandbox, c["id"], 9).status == 200
        done = api.wait_ok(sandbox, c["id"], timeout_ms=10000)
        assert done["reason"] == "signaled" and done["signal"] == 9, done
    out = api.sh(sandbox, "echo $PPID")
    assert out.exit["exit_code"] == 0, out
    assert int(out.out) == shim, "the killed commands' shim was not reused"


def test_concurrent_commands_each_have_their_own_shim(api, sandbox):
    a = api.start_ok(sandbox, "/bin/sh", "-c", "echo $PPID; sleep 0.5")
    b = api.start_ok(sandbox, "/bin/sh", "-c", "echo $PPID; sleep 0.5")
    pa = int(b"".join(d for s, d in api.logs(sandbox, a["id"]).chunks if s == "stdout"))
    pb = int(b"".join(d for s, d in api.logs(sandbox, b["id"]).chunks if s == "stdout"))
    assert pa != pb


def test_a_reused_shim_does_not_grow(api, sandbox):
    """Each command's argv and environment are built in the shim and freed after the
    clone: 200 commands with 48 KiB of environment each leave its memory as it was."""
    big = {"BIG": "x" * 49152}
    shim = kept_shim(api, sandbox)
    (host_pid,) = children_of(agent_pid_of(sandbox))
    with open(f"/proc/{host_pid}/maps") as f:
        if "libasan" in f.read():
            pytest.skip("ASan's quarantine keeps freed memory resident: RSS says nothing here")

    def rss():
        out = api.sh(sandbox, f"grep VmRSS /proc/{shim}/status")
        assert out.exit["exit_code"] == 0, out
        return int(out.out.split()[1])

    for _ in range(20):
        api.run(sandbox, "/bin/true", env=big)
    before = rss()
    for _ in range(200):
        out = api.run(sandbox, "/bin/true", env=big)
        assert out.exit["exit_code"] == 0, out
    assert ppid_of(api, sandbox) == shim
    assert rss() <= before + 256, (before, rss())


def test_an_idle_shim_that_died_is_not_given_a_command(api, sandbox):
    """An idle shim killed from outside (the OOM killer may pick it) is dropped, and the
    next command gets a new one and runs normally. (Nothing inside can signal a shim:
    test_daemon_command_protections.py.)"""
    kept_shim(api, sandbox)
    agent = agent_pid_of(sandbox)
    idle = children_of(agent)
    assert len(idle) == 1, idle  # the kept shim, nothing else
    os.kill(idle[0], signal.SIGKILL)
    out = api.sh(sandbox, "echo fine; exit 4", http_timeout=20)
    assert (out.exit["exit_code"], out.out) == (4, "fine\n"), out
    out = api.sh(sandbox, "echo again")
    assert out.exit["exit_code"] == 0 and out.out == "again\n", out


def test_a_command_handed_to_an_idle_shim_that_dies_before_taking_it_runs_anyway(
        api, sandbox):
    """The deterministic form of the race above: the idle shim is stopped, so the next
    command waits unread in its socket; then it is killed. It never took the command
    (no ack, AGENT_SHIM_ACK): the agent starts the command on a new shim, with its stdin,
    instead of reporting the dead shim's SIGKILL as the command's end."""
    shim = kept_shim(api, sandbox)  # its pid inside the sandbox
    agent = agent_pid_of(sandbox)
    idle = children_of(agent)
    assert len(idle) == 1, idle  # the kept shim (host pid), nothing else
    host_shim = idle[0]
    os.kill(host_shim, signal.SIGSTOP)
    try:
        c = api.start_ok(sandbox, "/bin/sh", "-c", "read x; echo got=$x ppid=$PPID; exit 3",
                         stdin="hi\n")
    finally:
        os.kill(host_shim, signal.SIGKILL)
    done = api.wait_ok(sandbox, c["id"], timeout_ms=20000)
    assert done["reason"] == "exited" and done["exit_code"] == 3, done
    out = api.logs(sandbox, c["id"])
    got, ppid = out.out.split()
    assert got == "got=hi", out
    assert int(ppid.split("=")[1]) != shim, out  # a new shim ran it
    out = api.sh(sandbox, "echo again")
    assert out.exit["exit_code"] == 0 and out.out == "again\n", out


def test_a_command_an_idle_shim_took_is_not_run_twice(api, sandbox):
    """The other side: a shim killed after it took its command (its ack is there) does
    not get the command run again on a new shim; the shim's death is the command's end."""
    kept_shim(api, sandbox)
    c = api.start_ok(sandbox, "/bin/sh", "-c", "echo once >> /tmp/count; sleep 30")
    assert wait_for(lambda: api.sh(sandbox, "cat /tmp/count 2>/dev/null").out == "once\n",
                    timeout=10)
    agent = agent_pid_of(sandbox)
    shim = [p for p in children_of(agent)
            if any(q for q in children_of(p))][0]  # the shim with the sleep below it
    os.kill(shim, signal.SIGKILL)
    done = api.wait_ok(sandbox, c["id"], timeout_ms=20000)
    assert done["reason"] == "signaled" and done["signal"] == 9, done
    time.sleep(0.5)
    assert api.sh(sandbox, "cat /tmp/count").out == "once\n"


def test_an_idle_shim_is_let_go_after_ten_seconds(api, sandbox):
    """An idle shim costs a process; the agent keeps one for at most 10 s."""
    kept_shim(api, sandbox)
    agent = agent_pid_of(sandbox)
    time.sleep(0.5)
    assert len(children_of(agent)) == 1
    assert wait_for(lambda: not children_of(agent), timeout=15), children_of(agent)
    out = api.sh(sandbox, "echo after")
    assert out.exit["exit_code"] == 0 and out.out == "after\n", out
