"""airlock never closes a descriptor it no longer owns.

A second close of a number already closed fails with EBADF when nothing
reused it, and silently closes someone else's file when something did (a
library caller's thread, or airlock's own later open). strace sees both the
same way: every close of a number that was already closed is a bug, so the
test asserts that no close(2) in airlock's whole process tree fails with
EBADF, over the paths that hand descriptors around (stdin relayed, files
copied in, an allowlist with its gateway, a timeout, a failed exec).
"""

import fcntl
import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest

CASES = {
    "deny-all": ["--", "/bin/true"],
    "stdin and output": ["-i", "--", "/bin/sh", "-c", "cat; echo err >&2"],
    "file copied in": ["--file", "{file}:/workspace/f", "--", "/bin/cat", "/workspace/f"],
    "allowlist": ["--allow", "example.test", "--", "/bin/true"],
    "timeout": ["--timeout", "300ms", "--", "/bin/sleep", "5"],
    "exec fails": ["--", "/no/such/command"],
}


def _drain_when_checked(airlock, pool, env, timeout=30):
    """Once the check of the run's pair is done (it holds POOL/lock shared), drain the
    pool: its waiting gateway leaves."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(pool / "lock") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if list(pool.glob("link-*/ready/*")):
                subprocess.run([airlock, "pool", "netns", "drain"], env=env,
                               capture_output=True, timeout=30)
                return
        except (OSError, BlockingIOError):
            pass
        time.sleep(0.02)


def _traced(pid):
    """The processes below pid (strace's tree): "pid comm args" each."""
    out = subprocess.run(["ps", "-o", "pid=,ppid=,comm=,args=", "-e"], capture_output=True,
                         text=True).stdout.splitlines()
    kids, seen = {}, []
    for line in out:
        f = line.split(None, 3)
        if len(f) >= 3:
            kids.setdefault(int(f[1]), []).append((int(f[0]), " ".join(f[2:])))
    todo = [pid]
    while todo:
        for child, desc in kids.get(todo.pop(), []):
            seen.append(f"{child} {desc[:160]}")
            todo.append(child)
    return seen


def _drain_until_done(airlock, pool, env, p, log, budget=60):
    """The run has not ended on its own: whatever waits in its pool (the pair's gateway,
    started by the check after the run) is sent away once the check is done, and again
    while the trace goes on (a gateway that came up after a drain). Fails with what is
    still traced if it never ends."""
    _drain_when_checked(airlock, pool, env)
    deadline = time.monotonic() + budget
    while True:
        try:
            return p.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                alive = _traced(p.pid)
                tail = log.read_text()[-1500:] if log.exists() else ""
                pytest.fail(f"the traced run did not end within {budget} s; still traced: "
                            f"{alive}; pool: {sorted(str(x) for x in pool.rglob('*'))[:20]}; "
                            f"trace's end: {tail}")
            subprocess.run([airlock, "pool", "netns", "drain"], env=env, capture_output=True,
                           timeout=30)


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_descriptor_is_closed_twice(airlock, tmp_path, case):
    strace = shutil.which("strace")
    assert strace, "strace is installed by scripts/setup"
    f = tmp_path / "in.txt"
    f.write_text("hello\n")
    args = [a.replace("{file}", str(f)) for a in CASES[case]]
    log = tmp_path / "strace.txt"
    # Recycled namespaces of its own: after an allowlisted run, the child that checks its
    # pair starts a gateway waiting there for the next run, which strace -f follows too;
    # the pool's drain, once the check is done, sends it away (and ends the trace).
    pool = pathlib.Path(f"/run/airlock/test-fd-{os.getpid()}-{tmp_path.name}")
    env = {**os.environ, "AIRLOCK_NETNS_POOL": str(pool)}
    p = subprocess.Popen([strace, "-f", "-qq", "-o", str(log), "-e", "trace=close,close_range",
                          airlock, "run", "--no-pool"] + args, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(b"in\n", timeout=3)
    except subprocess.TimeoutExpired:
        out, err = _drain_until_done(airlock, pool, env, p, log)
    finally:
        if p.poll() is None:
            p.kill()
        subprocess.run([airlock, "pool", "netns", "drain"], env=env, capture_output=True)
        shutil.rmtree(pool, ignore_errors=True)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    assert r.returncode in (0, 124, 127), (r.returncode, r.stderr)
    text = log.read_text()
    closes = re.findall(r"\bclose\(\d+\)", text)
    assert closes, "strace saw no close(2) at all: the trace is not working"
    bad = [line for line in text.splitlines() if "EBADF" in line]
    assert bad == [], "closed twice:\n" + "\n".join(bad[:10])
