"""Containment: memory, pids, cpu, disk, output size, wall time, signals to
airlock itself, and that nothing is left behind."""

import json
import os
import signal
import subprocess
import textwrap
import time

import pytest

import cpushare
import hostprobe

from conftest import _cgroup_is_ours, cgroup_children, cmdline_of

PY = "/usr/bin/python3"


def _stop(p, sig=signal.SIGTERM, timeout=5):
    if p.poll() is None:
        p.send_signal(sig)
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()


# --------------------------------------------------------------------------
# memory


def test_oom_exit_122(run):
    r = run(["--memory", "64M", "--timeout", "30s", "--", PY, "-c", "bytearray(10 << 30)"],
            timeout=60)
    assert r.returncode == 122, (r.returncode, r.err[-500:])


def test_oom_json_reason_and_peak(run_json):
    # bounded (2 GiB) so that a missing limit cannot take the host down
    src = "a = []\nfor i in range(256): a.append(bytearray(8 << 20))"
    r = run_json(["--memory", "64M", "--timeout", "30s", "--", PY, "-c", src], timeout=60)
    j = r.json
    assert r.returncode == 122, j
    assert j["reason"] == "oom", j
    assert 32 << 20 <= j["peak_memory_bytes"] <= 72 << 20, j["peak_memory_bytes"]


def test_memory_below_limit_ok(run):
    r = run(["--memory", "256M", "--", PY, "-c", "b = bytearray(100 << 20); print(len(b))"],
            timeout=60)
    assert r.returncode == 0, r.err
    assert r.out == f"{100 << 20}\n"


def test_cgroup_limits_applied(spawn, marker):
    """While a sandbox runs, its cgroups live under <ctrl>/airlock/ and carry
    the requested limits."""
    p = spawn(["--memory", "96M", "--pids", "77", "--cpus", "0.5", "--timeout", "20s",
               "--", "/bin/sh", "-c", f"{marker.sleep}; : {marker}"])
    try:
        pids = marker.wait_present(prefixes=("/bin/sh", "sleep"))
        assert pids, [cmdline_of(x) for x in marker.pids()]
        cg = hostprobe.proc_cgroups(pids[0])
        for c in ("memory", "pids", "cpu"):
            assert cg.get(c, "").startswith("/airlock/"), f"{c} cgroup is {cg.get(c)!r}"
        lim = hostprobe.limits_at(cg)
        assert lim["memory"] == 96 << 20, lim
        assert lim["pids"] == "77", lim
        assert abs(lim["cpu"] - 0.5) < 0.01, lim
    finally:
        _stop(p)
    assert not marker.wait_gone()


def test_no_cpu_limit_still_has_its_own_cpu_cgroup_with_an_equal_weight(spawn, marker):
    """A one-shot run without --cpus has its own cpu cgroup under airlock/ all the same,
    with no quota and the default weight every sandbox has (v1 cpu.shares 1024, v2
    cpu.weight 100): one-shot sandboxes share the CPU evenly, whatever number of
    processes each runs (test_crowd.py measures it). Before, on v1, the workload stayed
    in its caller's cpu cgroup, where each of its processes weighed as much as any."""
    p = spawn(["--timeout", "20s", "--", "/bin/sh", "-c", f"{marker.sleep}; : {marker}"])
    try:
        pids = marker.wait_present(prefixes=("/bin/sh", "sleep"))
        assert pids, [cmdline_of(x) for x in marker.pids()]
        cg = hostprobe.proc_cgroups(pids[0])
        for c in ("memory", "pids", "cpu"):
            assert cg[c].startswith("/airlock/run-"), (c, cg[c])
        assert hostprobe.limits_at(cg)["cpu"] is None
        assert hostprobe.cpu_weight(cg["cpu"]) == hostprobe.DEFAULT_CPU_WEIGHT
    finally:
        _stop(p)
    assert not marker.wait_gone()


# --------------------------------------------------------------------------
# pids


def test_pids_limit_enforced(run):
    src = textwrap.dedent("""
        import os, time, signal
        kids = []
        err = None
        for i in range(200):
            try:
                pid = os.fork()
            except OSError as e:
                err = e.errno
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            kids.append(pid)
        for k in kids:
            os.kill(k, signal.SIGKILL)
        for k in kids:
            os.waitpid(k, 0)
        print(len(kids), err)
    """)
    r = run(["--pids", "32", "--timeout", "20s", "--", PY, "-c", src])
    assert r.returncode == 0, r.err
    n, err = r.out.split()
    assert 3 <= int(n) < 32, f"forked {n} children with --pids 32"
    assert err == "11", f"fork failed with errno {err}, expected EAGAIN"


@pytest.mark.slow
def test_fork_bomb_contained(spawn, marker):
    bomb = f"b(){{ b|b& }}; b; sleep 3; echo survived; : {marker}"
    t0 = time.monotonic()
    # outputs to /dev/null: the bomb prints a flood of "Cannot fork"
    p = spawn(["--pids", "64", "--timeout", "5s", "--", "/bin/sh", "-c", bomb],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    host_ok = True
    while p.poll() is None and time.monotonic() - t0 < 15:
        peak = max(peak, len(marker.pids()))
        t = time.monotonic()
        if subprocess.run(["/bin/true"]).returncode != 0 or time.monotonic() - t > 1.0:
            host_ok = False
        time.sleep(0.1)
    out, err = _stop(p, signal.SIGKILL, timeout=5) if p.poll() is None else p.communicate()
    elapsed = time.monotonic() - t0
    assert elapsed < 12, f"fork bomb not stopped after {elapsed:.1f}s"
    assert host_ok, "host could not spawn a process promptly during the fork bomb"
    # 64 in the sandbox plus airlock's own few processes outside it
    assert peak <= 64 + 4, f"{peak} marked processes seen on the host"
    assert p.returncode is not None
    left = marker.wait_gone(timeout=3)
    assert not left, f"fork bomb left {len(left)} processes"


# --------------------------------------------------------------------------
# disk


def test_disk_limit_enospc(run, sh):
    r = run(["--disk", "16M", *sh("head -c 100M /dev/zero > /workspace/big; rc=$?; "
                                   "echo rc=$rc; ls -l /workspace/big | awk '{print $5}'")],
            timeout=30)
    assert r.returncode == 0, r.err
    assert "No space left" in r.err, r.err
    lines = r.out.split()
    assert lines[0] != "rc=0"
    assert int(lines[1]) <= 16 << 20


def test_disk_shared_between_writable_dirs(run, sh):
    script = ("head -c 6M /dev/zero > /workspace/a && echo a-ok; "
              "head -c 6M /dev/zero > /tmp/b && echo b-ok; "
              "head -c 6M /dev/zero > /home/user/c && echo c-ok; "
              "head -c 6M /dev/zero > /dev/shm/d && echo d-ok; true")
    r = run(["--disk", "16M", *sh(script)], timeout=30)
    assert r.returncode == 0, r.err
    oks = r.out.split()
    assert oks[:2] == ["a-ok", "b-ok"], r.out
    assert len(oks) < 4, "24 MiB fitted into --disk 16M: the dirs do not share one limit"
    assert "No space left" in r.err


def test_disk_large_enough_write_ok(run, sh):
    r = run(["--disk", "256M", *sh("head -c 100M /dev/zero > /workspace/big && wc -c < /workspace/big")],
            timeout=30)
    assert r.returncode == 0, r.err
    assert r.out.strip() == str(100 << 20)


# --------------------------------------------------------------------------
# output


def test_output_limit_stdout(run):
    r = run(["--output-limit", "1M", "--", "/usr/bin/head", "-c", "1G", "/dev/zero"], timeout=60)
    assert len(r.stdout) == 1048576, len(r.stdout)
    assert r.returncode == 0, r.err
    assert "airlock: stdout truncated at 1048576 bytes (--output-limit)" in r.err, r.err
    assert r.duration < 30


def test_output_limit_json(run_json):
    r = run_json(["--output-limit", "1M", "--", "/usr/bin/head", "-c", "1G", "/dev/zero"], timeout=60)
    j = r.json
    assert j["stdout_truncated"] is True
    assert j["stderr_truncated"] is False
    assert len(j["stdout"]) == 1048576
    assert j["reason"] == "exited"


def test_output_limit_stderr(run, sh):
    r = run(["--output-limit", "1K", *sh("head -c 10000 /dev/zero | tr '\\0' x >&2; echo fine")])
    assert r.returncode == 0
    assert r.out == "fine\n"
    assert r.err.startswith("x" * 1024)
    assert "x" * 1025 not in r.err
    assert "airlock: stderr truncated at 1024 bytes (--output-limit)" in r.err


def test_output_under_limit_not_truncated(run_json, sh):
    r = run_json(["--output-limit", "1M", *sh("head -c 1048576 /dev/zero")])
    assert r.json["stdout_truncated"] is False
    assert len(r.json["stdout"]) == 1048576


# --------------------------------------------------------------------------
# wall time


def test_timeout_kills_sleep(run):
    r = run(["--timeout", "1s", "--", "/bin/sleep", "100"], timeout=20)
    assert r.returncode == 124, r.err
    assert r.duration < 3.0, r.duration


def test_timeout_kills_busy_loop(run_json):
    r = run_json(["--timeout", "1s", "--", PY, "-c", "while True: pass"], timeout=20)
    assert r.returncode == 124
    assert r.json["reason"] == "timeout"
    assert r.duration < 3.0


def test_timeout_kills_setsid_term_ignoring_descendants(run, marker):
    inner = f'trap "" TERM HUP INT; {marker.sleep}; : {marker}'
    script = f"setsid sh -c '{inner}' & (trap '' TERM; {marker.sleep}; : {marker}) & sleep 1000; : {marker}"
    r = run(["--timeout", "1s", "--", "/bin/sh", "-c", script], timeout=20)
    assert r.returncode == 124, r.err
    assert r.duration < 4.0
    left = marker.wait_gone(timeout=1.0)
    assert not left, f"left behind: {[cmdline_of(x) for x in left]}"


def test_timeout_enforced_when_caller_does_not_read_output(spawn, marker):
    """A caller that stops reading stdout must not suspend --timeout: the
    workload is killed on time even while airlock cannot write."""
    script = f"head -c 4M /dev/zero; {marker.sleep}; : {marker}"
    p = spawn(["--timeout", "1s", "--", "/bin/sh", "-c", script])   # stdout never read
    try:
        assert marker.wait_present(prefixes=("/bin/sh", "sleep")), "workload never started"
        time.sleep(3.0)
        alive = [cmdline_of(x) for x in marker.pids()
                 if cmdline_of(x).startswith(("/bin/sh", "sleep"))]
        assert not alive, f"--timeout 1s not enforced after 3s while stdout was blocked: {alive}"
    finally:
        _stop(p)
        marker.wait_gone(timeout=3)


def test_background_processes_killed_when_main_exits(run, marker):
    # The background sleep holds stdout open; airlock must not wait for it.
    script = f"({marker.sleep}; : {marker}) & setsid sh -c '{marker.sleep}' & echo main-done"
    r = run(["--", "/bin/sh", "-c", script], timeout=20)
    assert r.returncode == 0, r.err
    assert r.out == "main-done\n"
    assert r.duration < 5.0
    left = marker.wait_gone(timeout=1.0)
    assert not left, f"left behind: {[cmdline_of(x) for x in left]}"


# --------------------------------------------------------------------------
# cpu


@pytest.mark.slow
def test_cpus_fraction_throttles(run):
    src = textwrap.dedent("""
        import time
        w0, c0 = time.monotonic(), time.process_time()
        while time.process_time() - c0 < 0.4:
            pass
        print(time.monotonic() - w0, time.process_time() - c0)
    """)
    r = run(["--cpus", "0.2", "--", PY, "-c", src], timeout=30)
    assert r.returncode == 0, r.err
    wall, cpu = map(float, r.out.split())
    assert wall >= 2.5 * cpu, f"wall {wall:.2f}s for {cpu:.2f}s of CPU with --cpus 0.2"


# --------------------------------------------------------------------------
# signals to airlock itself


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_to_airlock_cleans_up(spawn, marker, sig, code):
    before = cgroup_children()
    p = spawn(["--", "/bin/sh", "-c", f"echo ready; {marker.sleep}; : {marker}"])
    line = p.stdout.readline()
    assert line == b"ready\n", line
    assert marker.wait_present()
    t0 = time.monotonic()
    p.send_signal(sig)
    try:
        p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"airlock did not exit within 5s of {sig.name}")
    assert p.returncode == code, p.returncode
    assert time.monotonic() - t0 < 3.0
    left = marker.wait_gone(timeout=1.0)
    assert not left, [cmdline_of(x) for x in left]
    # (only cgroups that are empty or hold our processes: other users of the
    # host may be creating sandboxes concurrently)
    leaked = {c for c in cgroup_children() - before if _cgroup_is_ours(c)}
    assert not leaked, sorted(leaked)


def test_sigterm_json_reason_interrupted(spawn, marker):
    p = spawn(["--json", "--", "/bin/sh", "-c", f"{marker.sleep}; : {marker}"])
    assert marker.wait_present()
    time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("airlock did not exit within 5s of SIGTERM")
    assert p.returncode == 143
    j = json.loads(out)
    assert j["reason"] == "interrupted", j
    assert not marker.wait_gone(timeout=1.0)


def test_two_one_shots_share_the_cpu_evenly_whatever_they_run(spawn):
    """Two one-shot runs at once, 2 spinners in one and 8 in the other, for the same
    3 s on the same CPU (the first each may use), each spinner in a session of its own:
    each run gets about the same CPU time, since each is one cpu cgroup of the same
    weight. When one-shots stayed in their caller's cpu cgroup (v1, the root one here),
    the kernel's autogroups made each session weigh as much as a run: 1:4."""
    ps = [spawn(["--timeout", "30s", "--", *cpushare.spin_argv(n)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n in (2, 8)]
    cpu = []
    for p in ps:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        cpu.append(float(out))
    assert 0.7 < cpushare.share(cpu[0], cpu[1]) < 1.4, cpu
