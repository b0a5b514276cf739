"""What happens around a run: the cgroup v2 code path, and airlock itself being
SIGKILLed (the sandbox must not outlive it, and its cgroup is swept later)."""

import os
import signal
import subprocess
import time

import pytest

from conftest import AIRLOCK_BIN, host_pids_matching

UNIFIED = "/sys/fs/cgroup/unified"


def _is_cgroup2(path):
    try:
        return os.statvfs(path) and open("/proc/mounts").read().count(f" {path} cgroup2 ") > 0
    except OSError:
        return False


@pytest.mark.skipif(not _is_cgroup2(UNIFIED), reason="no cgroup2 mount at " + UNIFIED)
def test_cgroup_v2_path_joins_and_cleans_up():
    """On a v2 tree airlock uses CLONE_INTO_CGROUP and cgroup.kill; the host's
    unified mount has no controllers, so run without memory/pids limits."""
    env = dict(os.environ, AIRLOCK_CGROUP_ROOT=UNIFIED)
    r = subprocess.run([AIRLOCK_BIN, "run", "--memory", "0", "--pids", "0", "--",
                        "/bin/sh", "-c", "cat /proc/self/cgroup"],
                       env=env, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # the cgroup namespace is rooted at the sandbox's own cgroup
    assert b"0::/\n" in r.stdout, r.stdout
    # and the timeout path (PID 1 killed, cgroup.kill) works there too
    r = subprocess.run([AIRLOCK_BIN, "run", "--memory", "0", "--pids", "0", "--timeout", "1s",
                        "--", "sleep", "30"], env=env, capture_output=True, timeout=30)
    assert r.returncode == 124, r.stderr
    left = [d for d in os.listdir(f"{UNIFIED}/airlock") if d.startswith("run-")]
    assert left == [], left


@pytest.mark.skipif(not _is_cgroup2(UNIFIED), reason="no cgroup2 mount at " + UNIFIED)
def test_cgroup_v2_missing_controller_is_a_clear_setup_error():
    env = dict(os.environ, AIRLOCK_CGROUP_ROOT=UNIFIED)
    r = subprocess.run([AIRLOCK_BIN, "run", "--memory", "64M", "--", "true"],
                       env=env, capture_output=True, timeout=30)
    assert r.returncode == 125
    assert b"airlock: setup failed: cgroup (v2)" in r.stderr, r.stderr
    assert b"memory.max" in r.stderr


def test_sigkill_of_airlock_ends_the_sandbox_and_cgroup_is_swept():
    marker = "%d" % (77_000_000 + os.getpid() % 1_000_000)
    p = subprocess.Popen([AIRLOCK_BIN, "run", "--", "/bin/sh", "-c", f"sleep {marker}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if [x for x in host_pids_matching(f"sleep {marker}") if x != p.pid
                and open(f"/proc/{x}/cmdline", "rb").read().startswith(b"sleep")]:
            break
        time.sleep(0.05)
    else:
        p.kill()
        pytest.fail("workload never started")
    stale = f"run-{p.pid}-"
    assert any(d.startswith(stale) for d in os.listdir("/sys/fs/cgroup/pids/airlock"))
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=5)
    # PID 1 sees its control socket close and ends the sandbox
    deadline = time.monotonic() + 5
    while host_pids_matching(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_matching(f"sleep {marker}") == [], "the sandbox outlived airlock"
    # the orphaned cgroup is removed by the next run
    subprocess.run([AIRLOCK_BIN, "run", "--", "true"], check=True, timeout=30)
    for ctrl in ("memory", "pids", "cpu"):
        left = [d for d in os.listdir(f"/sys/fs/cgroup/{ctrl}/airlock") if d.startswith(stale)]
        assert left == [], (ctrl, left)
