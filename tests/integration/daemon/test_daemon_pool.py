"""The warm pool (`airlock serve --pool N`): sandboxes started ahead of need.

What must hold: a create that fits takes a pooled sandbox ("warm": true) with
the limits it asked for; a pooled sandbox was never used before (nothing ran
in it, nothing in its writable places) and shares no writable state or uid
range with another; pooled ones are invisible to every team; a create that
does not fit is cold; and pooled sandboxes end with the daemon, and are not
reused by a restarted one.
"""
import os
import pathlib
import shutil
import sqlite3
import tempfile
import time

import pytest

import hostprobe

from .conftest import (CGROUP_CTRLS, TOKENS, Api, Daemon, agent_pid_of, agent_pids,
                       cgroup_dir, cgroup_exists, free_port, private_bindir, wait_for)

POOL = 2
KINDS = 2   # one pool for the native workdir and one for the Vercel API's


@pytest.fixture(scope="module")
def pool_daemon(tmp_path_factory):
    work = tmp_path_factory.mktemp("airlockd-pool")
    d = Daemon(work, free_port(), private_bindir(work))
    d.extra_args = ["--pool", str(POOL)]
    d.start()
    yield d
    if not d.alive():
        d.start()
    for tok in TOKENS.values():
        cli = Api(d.port, tok)
        for s in cli.list():
            if s["status"] == "running":
                cli.stop(s["id"])
    pooled = pooled_ids(d)
    d.term()
    assert wait_for(lambda: not agent_pids(pooled) and
                    not any(cgroup_exists(s) for s in pooled), timeout=10), \
        f"pooled sandboxes outlived the daemon: {agent_pids(pooled)}"


@pytest.fixture
def short_tmp():
    d = pathlib.Path(tempfile.mkdtemp(prefix="alpool", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def pooled_ids(d, running_only=True):
    """The pool's sandboxes, from the daemon's own store (team '')."""
    with sqlite3.connect(f"file:{d.state_dir / 'airlock.db'}?mode=ro", uri=True) as db:
        q = "SELECT id FROM sandboxes WHERE team = ''"
        if running_only:
            q += " AND status = 'running'"
        return {r[0] for r in db.execute(q)}


def wait_pool_full(d):
    assert wait_for(lambda: len(pooled_ids(d)) >= POOL * KINDS, timeout=20), pooled_ids(d)


def sh(api, sid, script):
    out = api.sh(sid, script)
    assert out.exit["exit_code"] == 0, (out.stdout, out.stderr)
    return out.stdout.decode()


def test_create_takes_a_pooled_sandbox_with_its_limits(pool_daemon):
    api = Api(pool_daemon.port, TOKENS["A"])
    wait_pool_full(pool_daemon)
    before = pooled_ids(pool_daemon)
    s = api.create_ok(resources={"memory": "300M", "vcpus": 1})
    try:
        assert s["warm"] is True, s
        assert s["id"] in before                      # it was one of the pool
        assert s["id"] not in pooled_ids(pool_daemon)  # and is no longer
        lim = hostprobe.limits_of(s["id"])
        assert lim["memory"] == 300 << 20 and lim["cpu"] == 1.0, lim
        # the pool refills
        assert wait_for(lambda: len(pooled_ids(pool_daemon)) >= POOL * KINDS, timeout=20)
    finally:
        api.stop(s["id"])


def test_pooled_sandboxes_are_fresh_and_separate(pool_daemon):
    api = Api(pool_daemon.port, TOKENS["A"])
    made = []
    try:
        for i in range(3):
            wait_pool_full(pool_daemon)
            s = api.create_ok()
            assert s["warm"] is True, s
            made.append(s["id"])
            out = sh(api, s["id"],
                     "ls -A /workspace /tmp /home/user /dev/shm; echo PROCS; "
                     "ls /proc | grep -c '^[0-9]'; id -u; "
                     f"echo mark-{i} > /workspace/mark; stat -c %u /workspace/mark")
            listing, rest = out.split("PROCS")
            # never used: no file in any writable place, only PID 1, the shim and us
            assert [ln for ln in listing.splitlines() if ln and not ln.endswith(":")] == []
            # the /proc entries: PID 1 (the agent), the command's shim, its sh, and
            # ls with grep of this pipeline -- nothing left over from before
            nprocs = int(rest.split()[0])
            assert nprocs <= 5, out
        # no writable state shared: each sees only its own mark
        for i, sid in enumerate(made):
            out = sh(api, sid, "cat /workspace/mark; ls /workspace")
            assert out.split() == [f"mark-{i}", "mark"], out
        # distinct sandboxes, cgroups and host uid ranges
        assert len(set(made)) == 3
        owners = set()
        for sid in made:
            pid = agent_pid_of(sid)
            assert pid, sid
            owners.add(os.stat(f"/proc/{pid}/root/workspace/mark").st_uid)
        assert len(owners) == 3, owners
        # never shown to anyone: each team lists exactly its own
        listed = {s["id"] for s in api.list()}
        assert set(made) <= listed and not (listed & pooled_ids(pool_daemon))
        assert not ({s["id"] for s in Api(pool_daemon.port, TOKENS["B"]).list()} &
                    (pooled_ids(pool_daemon) | set(made)))
        assert Api(pool_daemon.port, TOKENS["B"]).get(made[0]).status == 404
    finally:
        for sid in made:
            api.stop(sid)


def test_a_create_that_does_not_fit_is_cold(pool_daemon):
    api = Api(pool_daemon.port, TOKENS["A"])
    wait_pool_full(pool_daemon)
    s = api.create_ok(resources={"disk": "256M"})
    try:
        assert s["warm"] is False, s
        assert len(pooled_ids(pool_daemon)) >= POOL * KINDS   # the pool was left alone
    finally:
        api.stop(s["id"])


def test_vercel_create_is_warm_too(pool_daemon):
    api = Api(pool_daemon.port, TOKENS["A"])
    wait_pool_full(pool_daemon)
    r = api.request("POST", "/v3/sandboxes", body={"timeout": 60000})
    assert r.status == 200, r
    sid = r.json["session"]["id"]
    try:
        s = api.sandbox(sid)
        assert s["warm"] is True and s["workdir"] == "/vercel/sandbox", s
        out = sh(api, sid, "pwd; touch /vercel/sandbox/ok && echo written")
        assert "written" in out, out
    finally:
        api.stop(sid)


def test_restart_does_not_reuse_pooled_sandboxes(pool_daemon):
    wait_pool_full(pool_daemon)
    old = pooled_ids(pool_daemon)
    pool_daemon.kill9()
    assert agent_pids(old)               # they outlived the kill...
    pool_daemon.start()
    # ...and the new daemon stops them rather than hand them out
    assert wait_for(lambda: not agent_pids(old), timeout=10), agent_pids(old)
    assert not (old & pooled_ids(pool_daemon))
    wait_pool_full(pool_daemon)
    s = Api(pool_daemon.port, TOKENS["A"]).create_ok()
    try:
        assert s["warm"] is True and s["id"] not in old
    finally:
        Api(pool_daemon.port, TOKENS["A"]).stop(s["id"])
    for sid in old:
        for c in CGROUP_CTRLS:
            assert not os.path.isdir(cgroup_dir(sid, c))


def test_terminating_while_the_pool_refills_leaves_nothing(short_tmp):
    """SIGTERM while the pool thread is between spawning a sandbox and registering it: the
    daemon waits for that create to land and stops it with the rest. (A pooled sandbox
    that missed the stop would outlive the daemon with no token able to see it.)"""
    tmp_path = short_tmp  # agent socket paths must fit sun_path
    airlock = private_bindir(tmp_path)
    def ours():
        """Agents listening under our state dirs (a sandbox not yet in the store has no row;
        this module's own pool daemon keeps refilling meanwhile and is not ours)."""
        paths = {}
        with open("/proc/net/unix") as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if len(parts) >= 8:
                    paths[parts[6]] = parts[7]
        found = set()
        for pid in agent_pids():
            try:
                link = os.readlink(f"/proc/{pid}/fd/3")
            except OSError:
                continue
            if paths.get(link.strip("socket:[]"), "").startswith(str(tmp_path)):
                found.add(pid)
        return found

    started = 0
    try:
        for i, delay in enumerate((0.0, 0.01, 0.025, 0.04, 0.06, 0.09)):
            (tmp_path / f"run{i}").mkdir()
            d = Daemon(tmp_path / f"run{i}", free_port(), airlock)
            d.extra_args = ["--pool", str(POOL)]
            d.start()
            time.sleep(delay)  # refills run from the start: land inside one
            d.term()
            # A sandbox spawned but not yet in the store has no row: look for agents.
            started += len(pooled_ids(d, running_only=False))
            assert wait_for(lambda: not ours(), timeout=10), (delay, ours())
    finally:
        for pid in ours():
            os.kill(pid, 9)
    assert started, "the pool never started a sandbox: the test proved nothing"
