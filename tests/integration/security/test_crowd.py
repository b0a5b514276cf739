"""Resources across sandboxes: 50 sandboxes at once in one airlockd, one running a
fork bomb, one a memory bomb, one flooding output, one spinning on CPU, one writing
into its tmpfs as fast as it can. The 45 others' command latency stays within 2x of
the idle machine's (measured in the same test, before the bombs and after them); the
I/O of a file written to and read back from their /tmp stays within 2x beside the two
floods (tmpfs and output) and within 3x beside all five; the daemon answers health and
list requests promptly, the host can still fork and exec, and stopping everything
leaves no cgroup and no agent behind.

What holds it: every sandbox is its own cpu cgroup under airlock/ with the same
weight, and airlockd is in airlockd/ beside airlock/, weighing four times all
sandboxes together (docs/security.md, "CPU between sandboxes"), so the bombs get
their share of the CPU and no more, and the daemon's part of every round trip is not
queued behind them; airlockd, the agents and their shims take the kernel's shortest
scheduler slice, so that each of a round trip's hand-offs waits 0.1 ms at most for a
bomb's turn to end instead of a whole default slice (1.4 ms on 2 CPUs)."""

import statistics
import subprocess
import time


from hostprobe import sanitized_build, skip_latency_bound_if_sanitized

from .conftest import agent_pids, cgroup_exists, wait_for

PY = "/usr/bin/python3"
N_SANDBOXES = 50
RES = {"memory": "256M", "vcpus": 1}
BOMBS = {
    "fork": ("/bin/bash", "-c", "f(){ f|f & }; f; sleep 60"),
    "mem": (PY, "-c", "b=[]\nwhile True: b.append(bytearray(64 << 20))"),
    "out": (PY, "-c", "import os\nb=b'x'*65536\nwhile True: os.write(1, b)"),
    "cpu": (PY, "-c", "import os\nfor _ in range(3):\n  os.fork()\nwhile True: pass"),
    "tmpfs": (PY, "-c", "b = b'x' * (1 << 20)\nwhile True:\n  with open('/tmp/f', 'wb') as f:\n"
                        "    for _ in range(64):\n      f.write(b)"),
}
IO = ("/bin/sh", "-c", "head -c 1048576 /dev/zero >/tmp/q && wc -c </tmp/q")
N_IO = 20  # quiet sandboxes whose tmpfs I/O is measured too
ROUNDS = 4  # round trips per quiet sandbox and phase
FLOODS = ("tmpfs", "out")


def _round_trip(api, sid, argv=("/bin/true",)):
    t0 = time.monotonic()
    out = api.run(sid, *argv, http_timeout=30)
    dt = time.monotonic() - t0
    assert out.exit["exit_code"] == 0, out.lines[-1]
    return dt


def _crowd_latency(api, quiet, argv=("/bin/true",)):
    """Median over the quiet sandboxes of each one's median round trip of argv, and
    the p90 and slowest of those medians. Rounds sweep all sandboxes in turn, so
    every sandbox is measured across the whole phase."""
    per = {sid: [] for sid in quiet}
    for _ in range(ROUNDS):
        for sid in quiet:
            per[sid].append(_round_trip(api, sid, argv))
    medians = sorted(statistics.median(v) for v in per.values())
    return statistics.median(medians), medians[int(len(medians) * 0.9)], medians[-1]


def _host_fork_exec(n=15):
    lat = []
    for _ in range(n):
        t0 = time.monotonic()
        subprocess.run(["/bin/true"], check=True)
        lat.append(time.monotonic() - t0)
    return statistics.median(lat)


def _timed(fn):
    t0 = time.monotonic()
    v = fn()
    return v, time.monotonic() - t0


def _ms(x):
    return f"{x * 1000:.1f} ms"


_RESULT = {}


def _idle(api, quiet):
    return _crowd_latency(api, quiet)[0], _crowd_latency(api, quiet[:N_IO], IO)[0]


def _scenario(api, make_sandbox):
    t_start = time.monotonic()
    sids = [make_sandbox(resources=RES) for _ in range(N_SANDBOXES)]
    noisy = dict(zip(BOMBS, sids[:len(BOMBS)]))
    quiet = sids[len(BOMBS):]
    for sid in quiet:  # warm every agent's exec path once
        _round_trip(api, sid)

    idle_before, io_before = _idle(api, quiet)
    host_idle = _host_fork_exec()

    cmds = {k: api.start_ok(noisy[k], *argv, timeout=40000)["id"] for k, argv in BOMBS.items()}
    time.sleep(2)  # the fork bomb reaches its pids limit, the memory bomb its OOM
    busy, busy_p90, busy_max = _crowd_latency(api, quiet)
    io_busy = _crowd_latency(api, quiet[:N_IO], IO)[0]
    host_busy = _host_fork_exec()
    health = [_timed(lambda: api.health(timeout=5))[1] for _ in range(5)]
    listed, list_s = _timed(api.list)

    # the daemon and the host stay responsive
    assert max(health) < 1.0, health
    assert list_s < 2.0, list_s
    assert {s["id"] for s in listed} >= set(sids)
    assert host_busy < max(2 * host_idle, host_idle + 0.010), (host_idle, host_busy)

    # the bombs were contained and their commands report it
    mem = api.wait_ok(noisy["mem"], cmds["mem"], timeout_ms=20000)
    assert mem.get("reason") == "oom", mem
    for k in ("fork", "out", "cpu", "tmpfs"):
        assert api.cmd_get(noisy[k], cmds[k]).json["command"]["status"] == "running"
    for sid in sids:
        assert api.sandbox(sid)["status"] == "running"

    # the floods alone (the fork and CPU bombs' trees gone first: the exits of their ~500
    # processes are not the floods'), then nothing
    def end(kinds):
        for k in kinds:
            assert api.kill(noisy[k], cmds[k], 9).status == 200
        for k in kinds:
            ended = api.cmd_wait(noisy[k], cmds[k], 20000)
            assert ended.status == 200 and ended.json["command"]["signal"] == 9, ended
        time.sleep(0.5)  # the last of the trees' exits and frees
    end(("fork", "cpu"))
    io_floods = _crowd_latency(api, quiet[:N_IO], IO)[0]
    for k in FLOODS:
        assert api.cmd_get(noisy[k], cmds[k]).json["command"]["status"] == "running"
    end(FLOODS)  # every bomb's tree is gone before idle is measured
    idle_after, io_after = _idle(api, quiet)
    idle, io_idle = (idle_before + idle_after) / 2, (io_before + io_after) / 2
    print(f"\n{len(quiet)} quiet sandboxes, `true` round trip (median / p90 / max of per-sandbox "
          f"medians): idle {_ms(idle_before)} before, {_ms(idle_after)} after; next to the "
          f"bombs {_ms(busy)} / {_ms(busy_p90)} / {_ms(busy_max)} ({busy / idle:.2f}x); "
          f"1 MiB through /tmp: idle {_ms(io_before)} before, {_ms(io_after)} after; "
          f"{_ms(io_busy)} next to the bombs ({io_busy / io_idle:.2f}x), {_ms(io_floods)} "
          f"next to the floods ({io_floods / io_idle:.2f}x); host fork+exec {_ms(host_idle)} "
          f"-> {_ms(host_busy)}; health max {_ms(max(health))}, list {_ms(list_s)}")
    _RESULT.update(idle=idle, busy=busy, io_idle=io_idle, io_busy=io_busy, io_floods=io_floods)

    # stopping everything leaves no agent and no cgroup
    for sid in sids:
        assert api.stop(sid).status in (200, 202, 204)
    wait_for(lambda: not agent_pids(set(sids)) and not any(cgroup_exists(s) for s in sids),
             timeout=15)
    assert not agent_pids(set(sids))
    assert [s for s in sids if cgroup_exists(s)] == []
    assert time.monotonic() - t_start < 60


def test_fifty_sandboxes_contained_daemon_and_host_responsive(api, make_sandbox, sec_daemon):
    _scenario(api, make_sandbox)


def _within(name, idle, busy, bound):
    skip_latency_bound_if_sanitized(name, busy / idle)
    assert busy <= bound * idle, (
        f"quiet sandboxes' median {name} {_ms(busy)} next to the bombs vs {_ms(idle)} idle "
        f"({busy / idle:.2f}x, bound {bound}x)")


def _bounds_hold(r):
    return (r["busy"] <= 2 * r["idle"] and r["io_floods"] <= 2 * r["io_idle"]
            and r["io_busy"] <= 3 * r["io_idle"])


def _result(api, make_sandbox):
    """The scenario's figures. A bound missed is measured once more, the whole scenario
    afresh, and the bounds are judged on that one: a few slow seconds of the host (other
    guests on it; the same builds measured 1.0-1.6x in one hour and 6-10x in two runs of
    the next) do not fail the suite, a regression fails both."""
    if not _RESULT:
        _scenario(api, make_sandbox)
    if not _bounds_hold(_RESULT) and "first" not in _RESULT and not sanitized_build():
        first = dict(_RESULT)
        _RESULT.clear()
        _scenario(api, make_sandbox)
        _RESULT["first"] = first
    return _RESULT


def test_fifty_sandboxes_quiet_latency_within_2x_of_idle(api, make_sandbox, sec_daemon):
    """The command a quiet sandbox runs waits for the bombs' turns to end at each of its
    hand-offs (daemon, agent, shim, command, and back): 2 vCPUs measured 0.96-1.84x
    (median 1.21x) over 8 runs, 1.85-2.68x (median 2.3x) before the short slices."""
    r = _result(api, make_sandbox)
    _within("`true` round trip", r["idle"], r["busy"], 2)


def test_fifty_sandboxes_quiet_io_within_2x_beside_the_floods(api, make_sandbox, sec_daemon):
    """A tmpfs written as fast as a sandbox can and an output flood do not slow the others'
    /tmp I/O more than the round trip's bound."""
    r = _result(api, make_sandbox)
    _within("1 MiB through /tmp (beside the floods)", r["io_idle"], r["io_floods"], 2)


def test_fifty_sandboxes_quiet_io_within_3x_beside_every_bomb(api, make_sandbox, sec_daemon):
    """Beside all five bombs a quiet sandbox's I/O is mostly CPU (three execs and 1 MiB of
    pages to zero, ~4 ms) shared fairly: with 3-4 bombs runnable on 2 CPUs its share is
    about 0.4 CPU once its lag credit is spent, which the bound allows for; measured
    1.34-1.85x (median 1.45x) over 8 runs."""
    r = _result(api, make_sandbox)
    _within("1 MiB through /tmp", r["io_idle"], r["io_busy"], 3)
