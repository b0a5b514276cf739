"""On cgroup v1 the spawner makes the next sandboxes' cgroups ahead of need
(ahead-<spawner pid>-<time> in each of memory, pids and cpu, with the last create's
limits; AHEAD sets, the older going first) and a create renames them. These tests prove that each sandbox gets exactly the limits it
asked for whatever the previous create asked, that a cgroup made ahead is taken by
exactly one sandbox and never held a process before, and that none outlives its spawner."""

import os
import subprocess

import pytest

import hostprobe

from .conftest import CGROUP_CTRLS, agent_pid_of, cgroup_dir, wait_for
from .test_daemon_netns import spawner_pids

V1_ROOT = "/sys/fs/cgroup"
AHEAD = 2  # AHEAD_SETS in src/jail/ahead/spawner.c
pytestmark = pytest.mark.skipif(
    hostprobe.cgroup_layout() != "v1",
    reason="cgroups made ahead are a cgroup v1 feature (v2 joins at clone time)")


def ahead_dirs(ctrl="pids"):
    base = f"{V1_ROOT}/{ctrl}/airlock"
    return sorted(n for n in os.listdir(base) if n.startswith("ahead-"))


def read(path):
    with open(path) as f:
        return f.read().strip()


def limits(sid):
    return {
        "memory": int(read(cgroup_dir(sid, "memory") + "/memory.limit_in_bytes")),
        "pids": read(cgroup_dir(sid, "pids") + "/pids.max"),
        "quota": int(read(cgroup_dir(sid, "cpu") + "/cpu.cfs_quota_us")),
    }


def expected(sandbox_json):
    res = sandbox_json["resources"]
    vcpus = res.get("vcpus") or 0
    return {"memory": res["memory_bytes"], "pids": "1024",
            "quota": int(round(vcpus * 100000)) if vcpus else -1}


def test_each_create_gets_exactly_its_limits(api, make_sandbox):
    """The cgroup made ahead carries the previous create's limits: every change in
    either direction (up, down, back to the default) must reach the new sandbox, and an
    earlier sandbox's limits must not move."""
    asks = [{"memory": "300M", "vcpus": 1}, {}, {"memory": "200M"}, {"memory": "200M"},
            {"vcpus": 2}, {"memory": "1.5G", "vcpus": 0.5}, {}]
    made = []
    for body in asks:
        kw = {"resources": body} if body else {}
        sid = make_sandbox(**kw)
        s = api.sandbox(sid)
        assert limits(sid) == expected(s), (body, limits(sid), s["resources"])
        made.append((sid, s))
    for sid, s in made:  # nothing written to one sandbox's cgroup reached another
        assert limits(sid) == expected(s), (sid, limits(sid), s["resources"])


def test_a_cgroup_made_ahead_is_taken_once_and_was_never_used(api, daemon, make_sandbox):
    make_sandbox()  # the spawner has made the next ones by now
    spawners = spawner_pids(daemon.pid)
    assert len(spawners) == 1, spawners
    mine = f"ahead-{spawners[0]}-"
    assert wait_for(lambda: all(any(n.startswith(mine) for n in ahead_dirs(c))
                                for c in CGROUP_CTRLS), timeout=5), \
        {c: ahead_dirs(c) for c in CGROUP_CTRLS}
    seen_inodes = set()
    for _ in range(4):
        assert wait_for(lambda: all(len([n for n in ahead_dirs(c) if n.startswith(mine)])
                                    == AHEAD for c in CGROUP_CTRLS), timeout=5), \
            {c: ahead_dirs(c) for c in CGROUP_CTRLS}
        # The older (the names end in the time they were made at) goes first.
        names = {c: [n for n in ahead_dirs(c) if n.startswith(mine)][0] for c in CGROUP_CTRLS}
        inodes = {c: os.stat(f"{V1_ROOT}/{c}/airlock/{names[c]}").st_ino for c in CGROUP_CTRLS}
        for c in CGROUP_CTRLS:  # made ahead, never entered by any process
            assert read(f"{V1_ROOT}/{c}/airlock/{names[c]}/cgroup.procs") == "", c
        sid = make_sandbox()
        # The sandbox's cgroup is that very directory, renamed (same inode), and it is
        # gone from the ahead names; the sandbox's PID 1 is in it.
        for c in CGROUP_CTRLS:
            assert os.stat(cgroup_dir(sid, c)).st_ino == inodes[c], c
            assert not os.path.exists(f"{V1_ROOT}/{c}/airlock/{names[c]}"), c
            assert len([n for n in ahead_dirs(c) if n.startswith(mine)]) <= AHEAD, c
        agent = agent_pid_of(sid)
        assert str(agent) in read(cgroup_dir(sid, "pids") + "/cgroup.procs").split()
        key = tuple(sorted(inodes.items()))
        assert key not in seen_inodes
        seen_inodes.add(key)


def test_none_outlives_its_spawner_and_stale_ones_are_swept(api, daemon):
    """A spawner removes its cgroups made ahead when it ends; one killed before it could
    leaves them to the next spawner's sweep (names with a dead pid)."""
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    stale = f"ahead-{dead.pid}-1"
    for c in CGROUP_CTRLS:
        os.mkdir(f"{V1_ROOT}/{c}/airlock/{stale}")
    try:
        daemon.term()
        daemon.start()
        assert wait_for(lambda: not any(os.path.isdir(f"{V1_ROOT}/{c}/airlock/{stale}")
                                        for c in CGROUP_CTRLS), timeout=5), \
            "a stale cgroup made ahead was not swept"
        spawners = spawner_pids(daemon.pid)
        assert len(spawners) == 1, spawners
        mine = f"ahead-{spawners[0]}-"
        assert wait_for(lambda: any(n.startswith(mine) for n in ahead_dirs()), timeout=5)
        # SIGKILL the spawner: its cgroups stay until another spawner sweeps them.
        os.kill(spawners[0], 9)
        assert wait_for(lambda: spawners[0] not in spawner_pids(daemon.pid), timeout=5)
        left = [n for n in ahead_dirs() if n.startswith(mine)]
        assert left, "expected the killed spawner's cgroups to be left for the sweep"
        daemon.term()
        daemon.start()
        # the next daemon's spawner sweeps at start
        assert wait_for(lambda: not any(n.startswith(mine) for c in CGROUP_CTRLS
                                        for n in ahead_dirs(c)), timeout=5), ahead_dirs()
        # and a daemon that ends cleanly leaves none of its own
        spawners = spawner_pids(daemon.pid)
        assert len(spawners) == 1, spawners
        mine = f"ahead-{spawners[0]}-"
        assert wait_for(lambda: any(n.startswith(mine) for n in ahead_dirs()), timeout=5)
        daemon.term()
        assert wait_for(lambda: not any(n.startswith(mine) for c in CGROUP_CTRLS
                                        for n in ahead_dirs(c)), timeout=5), ahead_dirs()
    finally:
        for c in CGROUP_CTRLS:
            try:
                os.rmdir(f"{V1_ROOT}/{c}/airlock/{stale}")
            except OSError:
                pass
        daemon.ensure_running()
