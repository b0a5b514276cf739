"""CPU weights between sandboxes and the daemon (docs/daemon.md, "CPU"): every sandbox
is its own cpu cgroup under airlock/ with the same weight, so two sandboxes share the
CPU evenly however many processes each runs; airlockd and what it forks (the spawner,
the gateways) are in airlockd/ beside airlock/, weighing four times all sandboxes
together, so the daemon answers while sandboxes spin."""

import os
import statistics
import time

import cpushare
import pytest
import hostprobe

from .conftest import agent_pid_of, children_of, wait_for
from .test_daemon_netns import spawner_pids


def test_daemon_and_its_spawner_weigh_more_than_all_sandboxes(api, daemon, make_sandbox):
    sid = make_sandbox()
    assert api.sh(sid, "true").exit["exit_code"] == 0
    mine = hostprobe.cpu_cgroup_of(daemon.pid)
    assert mine == "/airlockd", mine
    for pid in spawner_pids(daemon.pid):
        assert hostprobe.cpu_cgroup_of(pid) == "/airlockd", pid
    agent = hostprobe.cpu_cgroup_of(agent_pid_of(sid))
    assert agent == f"/airlock/{sid}", agent
    assert hostprobe.cpu_weight(agent) == hostprobe.DEFAULT_CPU_WEIGHT
    assert hostprobe.cpu_weight("/airlock") == hostprobe.DEFAULT_CPU_WEIGHT
    assert hostprobe.cpu_weight("/airlockd") == 4 * hostprobe.cpu_weight("/airlock")


def test_two_sandboxes_share_the_cpu_evenly_whatever_they_run(api, make_sandbox):
    """2 spinners in one sandbox, 8 in the other, for the same 3 s on the same CPU: each
    sandbox gets about the same CPU time (by process it would be 1:4)."""
    few, many = make_sandbox(), make_sandbox()
    c1 = api.start_ok(few, *cpushare.spin_argv(2))["id"]
    c2 = api.start_ok(many, *cpushare.spin_argv(8))["id"]
    cpu = {}
    for sid, cid in ((few, c1), (many, c2)):
        api.wait_ok(sid, cid, timeout_ms=30000)
        cpu[sid] = float(api.logs(sid, cid).stdout)
    share = cpushare.share(cpu[few], cpu[many])
    assert 0.7 < share < 1.4, cpu


def _health_median(api, n=40):
    lat = []
    for _ in range(n):
        t0 = time.monotonic()
        assert api.health(timeout=5).status == 200
        lat.append(time.monotonic() - t0)
    return statistics.median(lat)


def test_daemon_answers_while_four_sandboxes_spin(api, make_sandbox):
    """4 sandboxes with 4 spinners each and no CPU quota fill both CPUs; the daemon's
    /v1/health (measured idle just before, in the same test) stays within 3x + 2 ms."""
    sids = [make_sandbox() for _ in range(4)]
    idle = _health_median(api)
    spin = cpushare.spin_argv(4, 30, pin=False)
    cmds = [(sid, api.start_ok(sid, *spin)["id"]) for sid in sids]
    try:
        assert wait_for(lambda: all(api.cmd_get(s, c).json["command"]["status"] == "running"
                                    for s, c in cmds), timeout=10)
        time.sleep(0.5)
        busy = _health_median(api)
        print(f"\nhealth median: idle {idle * 1000:.2f} ms, 4 sandboxes spinning "
              f"{busy * 1000:.2f} ms")
        assert busy < 3 * idle + 0.002, (idle, busy)
    finally:
        for sid, cid in cmds:
            api.kill(sid, cid, 9)


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        out += kids
        todo += kids
    return out


def test_the_daemon_and_agent_take_short_slices_and_commands_the_default(api, daemon,
                                                                        make_sandbox):
    """airlockd (every thread), a sandbox's agent and the shim between it and a command
    run with the kernel's shortest EEVDF slice, so that a sandbox spinning beside them
    delays their wake-ups by 0.1 ms instead of a whole default slice; the command itself
    has the default slice, as any task (a sandbox gains no latency over another by it)."""
    ok, default = hostprobe.custom_slices()
    if not ok:
        pytest.skip("this kernel gives no task the EEVDF slice it asks (before Linux 6.12)")
    sid = make_sandbox()
    cid = api.start_ok(sid, "/bin/sleep", "30")["id"]
    try:
        agent = agent_pid_of(sid)
        assert wait_for(lambda: any(_comm(p) == "sleep" for p in _descendants(agent)))
        sleep = next(p for p in _descendants(agent) if _comm(p) == "sleep")
        shim = int(open(f"/proc/{sleep}/stat").read().rsplit(")", 1)[1].split()[1])
        threads = [int(t) for t in os.listdir(f"/proc/{daemon.pid}/task")]
        assert {hostprobe.sched_slice(f"{daemon.pid}/task/{t}") for t in threads} == {100000}
        assert hostprobe.sched_slice(agent) == 100000
        assert shim != agent and hostprobe.sched_slice(shim) == 100000
        assert hostprobe.sched_slice(sleep) == default != 100000
    finally:
        api.kill(sid, cid, 9)


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None
