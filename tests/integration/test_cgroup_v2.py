"""Limits on a cgroup2 tree with its controllers delegated: a pure v2 host's conditions.

Most users' hosts are pure cgroup v2 (systemd's default since 2021); the build machines
are a v1 hybrid. Where this host has a cgroup2 mount whose memory, pids and cpu
controllers airlock can use (hostprobe.usable_cgroup2_root: /sys/fs/cgroup on a pure v2
host, or a hybrid's unified mount when those controllers are not bound to v1), the
one-shot and daemon limits are checked on it through AIRLOCK_CGROUP_ROOT. Where none
exists every test here is skipped with the reason the probe found; the hybrid's
controller-less unified mount is covered by test_lifecycle.py's v2 tests.
"""

import json
import os
import subprocess
import time

import pytest

import hostprobe
from conftest import AIRLOCK_BIN, PY

ROOT, WHY = hostprobe.usable_cgroup2_root()
pytestmark = pytest.mark.skipif(ROOT is None, reason=f"no usable cgroup2 tree: {WHY}")


def v2_env():
    return dict(os.environ, AIRLOCK_CGROUP_ROOT=ROOT)


def airlock(*args, timeout=60):
    return subprocess.run([AIRLOCK_BIN, *args], env=v2_env(), capture_output=True,
                          timeout=timeout)


def runs_left():
    base = os.path.join(ROOT, "airlock")
    return sorted(d for d in os.listdir(base) if d.startswith("run-")) \
        if os.path.isdir(base) else []


def read(path):
    with open(path) as f:
        return f.read().strip()


def test_v2_oom_is_reported_with_its_peak():
    before = set(runs_left())
    r = airlock("run", "--json", "--memory", "64M", "--", PY, "-c",
                "b = bytearray(256 << 20); b[::4096] = b'x' * len(b[::4096])")
    j = json.loads(r.stdout)
    assert r.returncode == 122, (r.returncode, r.stderr[-500:])
    assert j["reason"] == "oom", j
    assert set(runs_left()) - before == set()


def test_v2_pids_limit_stops_a_fork_loop():
    src = ("import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
           "            os.pause()\n        n += 1\nexcept OSError as e:\n"
           "    print('stopped', n, e.errno)\n")
    r = airlock("run", "--pids", "16", "--timeout", "20s", "--", PY, "-c", src)
    assert r.returncode == 0, r.stderr
    word, n, err = r.stdout.split()
    assert word == b"stopped" and int(n) < 16 and int(err) == 11, r.stdout


def test_v2_limits_are_written_and_removed():
    """While a run lives its one directory carries memory.max, pids.max and cpu.max
    as asked; when it ends the directory is gone."""
    before = set(runs_left())
    p = subprocess.Popen([AIRLOCK_BIN, "run", "--memory", "96M", "--pids", "77", "--cpus",
                          "0.5", "--timeout", "20s", "--", "sleep", "10"], env=v2_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        mine = []
        while not mine and time.monotonic() < deadline:
            mine = sorted(set(runs_left()) - before)
            time.sleep(0.05)
        assert mine, "the run made no cgroup under " + ROOT
        d = os.path.join(ROOT, "airlock", mine[0])
        deadline = time.monotonic() + 10
        while not read(f"{d}/cgroup.procs") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert read(f"{d}/memory.max") == str(96 << 20)
        assert read(f"{d}/pids.max") == "77"
        quota, period = read(f"{d}/cpu.max").split()
        assert abs(int(quota) / int(period) - 0.5) < 0.01, (quota, period)
        assert read(f"{d}/cpu.weight") == "100"  # the same for every sandbox
    finally:
        p.kill()
        p.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while set(runs_left()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(runs_left()) - before == set()


@pytest.fixture(scope="module")
def v2_daemon(tmp_path_factory):
    from daemon.conftest import Daemon, free_port, private_bindir
    work = tmp_path_factory.mktemp("airlockd-v2")
    d = Daemon(work, free_port(), private_bindir(work))
    old = os.environ.get("AIRLOCK_CGROUP_ROOT")
    os.environ["AIRLOCK_CGROUP_ROOT"] = ROOT  # the daemon inherits the environment
    try:
        d.start()
    finally:
        if old is None:
            del os.environ["AIRLOCK_CGROUP_ROOT"]
        else:
            os.environ["AIRLOCK_CGROUP_ROOT"] = old
    yield d
    d.term()


def test_v2_daemon_sandbox_limits_and_cleanup(v2_daemon):
    from daemon.conftest import TOKENS, Api, wait_for
    api = Api(v2_daemon.port, TOKENS["A"])
    s = api.create_ok(resources={"memory": "300M", "vcpus": 1})
    d = os.path.join(ROOT, "airlock", s["id"])
    try:
        assert read(f"{d}/memory.max") == str(300 << 20)
        assert read(f"{d}/cpu.max").split() == ["100000", "100000"]
        # every sandbox the same weight; the daemon in airlockd/ beside airlock/, at 4x
        assert read(f"{d}/cpu.weight") == "100"
        assert read(os.path.join(ROOT, "airlock", "cpu.weight")) == "100"
        assert read(os.path.join(ROOT, "airlockd", "cpu.weight")) == "400"
        assert str(v2_daemon.pid) in read(os.path.join(ROOT, "airlockd", "cgroup.procs"))
        assert read(f"{d}/cgroup.procs"), "the sandbox's agent is not in its cgroup"
        out = api.run(s["id"], "/bin/sh", "-c", "cat /proc/self/cgroup")
        assert out.stdout.strip() == b"0::/", out.stdout
    finally:
        api.stop(s["id"])
    assert wait_for(lambda: not os.path.isdir(d), timeout=10), d
