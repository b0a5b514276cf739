"""Processes and signals: PID 1 (airlock's init and airlockd's agent), the
agent's death, escaping timeouts, zombie and fd floods."""

import errno
import json
import os
import signal
import textwrap
import time

import pytest

from ._util import PRELUDE, probe
from .conftest import HOST_SECRET, TOKENS, agent_pid_of, sandbox_procs, wait_for

PY = "/usr/bin/python3"


def host_pids_matching(needle):
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    out.append(int(e))
        except OSError:
            pass
    return out


def test_pidfd_signals_to_pid1_of_airlock_run(run_json):
    src = PRELUDE + textwrap.dedent(r'''
        out = {}
        pfd, e = sc(434, 1, 0)
        out["pidfd_open"] = e
        if pfd >= 0:
            for s in (15, 9, 19, 11, 6):
                out[str(s)] = list(sc(424, pfd, s, 0, 0))
        out["tgkill"] = list(sc(234, 1, 1, 9))
        out["rt_sigqueue"] = list(sc(129, 1, 15, ctypes.create_string_buffer(128)))
        import time; time.sleep(0.3)
        print(json.dumps(out))
    ''')
    r = run_json(["--root", "--", PY, "-c", src])
    assert r.json["reason"] == "exited" and r.json["exit_code"] == 0, r.json
    out = json.loads(r.json["stdout"].strip().splitlines()[-1])
    # delivered or not, PID 1 survived and reported (reason exited); errors are fine
    assert all(v[0] in (0, -1) for k, v in out.items() if isinstance(v, list)), out


def test_escape_timeout_by_every_trick_in_airlock_run(run_json, marker):
    src = textwrap.dedent(f'''
        import ctypes, os, signal, time
        libc = ctypes.CDLL(None, use_errno=True)
        M = "{marker}"
        def spawn(trick):
            pid = os.fork()
            if pid:
                return
            if trick == "double_fork_setsid":
                if os.fork(): os._exit(0)
                os.setsid()
            elif trick == "pgrp":
                os.setpgid(0, 0)
            elif trick == "pdeathsig_cleared":
                libc.prctl(1, 0)                      # PR_SET_PDEATHSIG 0
            elif trick == "subreaper":
                libc.prctl(36, 1)                     # PR_SET_CHILD_SUBREAPER
                if os.fork(): pass
            elif trick == "stopped":
                os.setsid(); os.kill(os.getpid(), signal.SIGSTOP)
            elif trick == "ignore_all":
                for s in range(1, 32):
                    try: signal.signal(s, signal.SIG_IGN)
                    except (OSError, ValueError): pass
            elif trick == "cgroup_move":
                for p in ("/sys/fs/cgroup/cgroup.procs", "/proc/self/cgroup"):
                    try: open(p, "w").write("0")
                    except OSError: pass
            os.execv("/bin/bash", ["bash", "-c", "exec -a " + M + trick + " sleep 1000"])
        for t in ("double_fork_setsid", "pgrp", "pdeathsig_cleared", "subreaper", "stopped",
                  "ignore_all", "cgroup_move"):
            spawn(t)
        time.sleep(0.5)
        n = sum(1 for p in os.listdir("/proc") if p.isdigit() and
                M.encode() in open(f"/proc/{{p}}/cmdline", "rb").read())
        print("spawned", n, flush=True)
        time.sleep(1000)
    ''')
    r = run_json(["--timeout", "1500ms", "--", PY, "-c", src], timeout=30)
    assert r.json["reason"] == "timeout" and r.returncode == 124, r.json
    words = r.json["stdout"].split()
    assert words[0] == "spawned" and int(words[1]) >= 7, r.json["stdout"]
    left = marker.wait_gone(timeout=3)
    assert not left, f"processes outlived the timeout: {left}"


def test_zombie_flood_is_reaped_and_bounded(run_json):
    src = PRELUDE + textwrap.dedent(r'''
        n = 0
        while n < 5000:
            try:
                pid = os.fork()
            except OSError as e:
                break
            if pid == 0:
                os._exit(0)
            n += 1          # never waited: a zombie each
        print(json.dumps({"zombies": n}), flush=True)
        os._exit(0)
    ''')
    t0 = time.monotonic()
    r = run_json(["--pids", "64", "--", PY, "-c", src], timeout=30)
    assert r.json["reason"] == "exited" and r.json["exit_code"] == 0, r.json
    out = json.loads(r.json["stdout"])
    assert out["zombies"] < 64, out           # the pids limit holds for zombies too
    assert time.monotonic() - t0 < 10


def test_fd_exhaustion_bounded(run_json):
    src = PRELUDE + textwrap.dedent(r'''
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        out = {"hard": hard}
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 4, hard * 4)); out["raise"] = 0
        except (OSError, ValueError) as e:
            out["raise"] = str(e)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        fds = []
        try:
            while True:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            out["err"] = e.errno
        out["n"] = len(fds)
        print(json.dumps(out))
    ''')
    r = run_json(["--", PY, "-c", src], timeout=30)
    assert r.json["reason"] == "exited", r.json
    out = json.loads(r.json["stdout"])
    assert out["raise"] != 0, f"RLIMIT_NOFILE hard limit raised: {out}"
    assert out["err"] == errno.EMFILE, out
    assert out["n"] <= 1 << 20, out
    # the host still opens files
    with open("/dev/null") as f:
        assert f.fileno() > 0


# --------------------------------------------------------------------------
# airlockd: the agent is PID 1


def test_sudo_command_cannot_signal_or_trace_the_agent(api, sandbox):
    agent = agent_pid_of(sandbox)
    assert agent
    src = PRELUDE + textwrap.dedent(r'''
        out = {}
        for s in (15, 1, 2, 10, 12, 19, 11, 6, 9):
            try:
                os.kill(1, s); out[f"kill{s}"] = 0
            except OSError as e:
                out[f"kill{s}"] = e.errno
        pfd, _ = sc(434, 1, 0)
        out["pidfd_term"] = list(sc(424, pfd, 15, 0, 0)) if pfd >= 0 else None
        out["ptrace"] = list(sc(101, 0x4206, 1, 0, 0))
        for f in ("environ", "mem", "cmdline"):
            try:
                out[f] = open(f"/proc/1/{f}", "rb").read(1 << 16).decode("latin1")
            except OSError as e:
                out[f] = e.errno
        print(json.dumps(out))
    ''')
    out = api.run(sandbox, PY, "-c", src, sudo=True)
    res = json.loads(out.stdout)
    assert res["ptrace"] == [-1, errno.EPERM], res
    assert isinstance(res["environ"], int) and isinstance(res["mem"], int), res
    text = json.dumps(res)
    assert HOST_SECRET not in text and TOKENS["A"] not in text
    time.sleep(0.3)
    assert agent_pid_of(sandbox) == agent, "the agent died or was replaced"
    assert api.run(sandbox, "/bin/echo", "alive").stdout == b"alive\n"
    assert api.sandbox(sandbox)["status"] == "running"


def test_command_timeout_kills_setsid_and_pgrp_escapees(api, sandbox):
    tag = f"sec{os.getpid()}{int(time.time() * 1000) % 100000}"
    script = (f"setsid bash -c 'exec -a {tag}a sleep 1000' & "
              f"{PY} -c \"import os; os.setpgid(0,0); os.execv('/bin/bash', ['bash','-c','exec -a {tag}b sleep 1000'])\" & "
              f"(bash -c 'exec -a {tag}c sleep 1000' &) ; sleep 1000")
    cmd = api.start_ok(sandbox, "/bin/sh", "-c", script, timeout=2500)
    assert wait_for(lambda: len(host_pids_matching(tag)) >= 3, timeout=5), \
        "the escapees never started"
    ex = api.wait_ok(sandbox, cmd["id"], timeout_ms=20000)
    assert ex.get("reason") == "timeout", ex
    wait_for(lambda: not host_pids_matching(tag), timeout=3)
    survivors = host_pids_matching(tag)
    names = {p: open(f"/proc/{p}/cmdline", "rb").read() for p in survivors}
    for p in survivors:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    assert not survivors, f"{len(survivors)} processes outlived the command's timeout: {names}"


def test_agent_killed_takes_every_sandbox_process_with_it(api, make_sandbox):
    sid = make_sandbox()
    tag = f"secagent{os.getpid()}{int(time.time() * 1000) % 100000}"
    api.start_ok(sid, "/bin/sh", "-c",
                 f"setsid bash -c 'trap \"\" TERM HUP; exec -a {tag} sleep 1000' & sleep 1000")
    assert wait_for(lambda: host_pids_matching(tag), timeout=5)
    agent = agent_pid_of(sid)
    os.kill(agent, signal.SIGKILL)
    assert wait_for(lambda: not host_pids_matching(tag), timeout=5), \
        "sandbox processes survived their agent"
    assert wait_for(lambda: api.sandbox(sid)["status"] in ("failed", "stopped"), timeout=10)
    r = api.start(sid, "/bin/true")
    assert 400 <= r.status < 500, r
    assert not sandbox_procs(sid)
