"""bench/run smoke: a tiny run writes a well-formed results file, and --compare reads it.

Only the one-shot section runs (3 alternated runs, firejail and runsc once),
so this stays around 10 s; the other sections are covered by `bench/run --quick`.
"""
import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
RUN = REPO / "bench" / "run"
TARGET_IDS = {"oneshot_vs_bwrap", "oneshot_vs_floor", "oneshot_vs_floor_warm", "allow_vs_deny",
              "allow_vs_deny_warm", "allow_cpu_vs_deny", "throughput_vs_bwrap",
              "throughput_vs_bwrap_warm",
              "throughput_vs_netns",
              "daemon_cycle", "daemon_cycle_warm", "daemon_rt", "daemon_p99", "density",
              "egress_vs_direct"}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("bench/run needs root")
    out = tmp_path_factory.mktemp("bench") / "r.json"
    before = os.stat("/dev/null")
    r = subprocess.run([str(RUN), "--quick", "--only", "oneshot", "--runs", "3",
                        "--slow-runs", "1", "--warmup", "0", "--out", str(out)],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, AIRLOCK_BIN=os.environ.get(
                           "AIRLOCK_BIN", str(REPO / "build" / "airlock"))))
    assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    after = os.stat("/dev/null")
    return out, json.loads(out.read_text()), r, (before, after)


def test_the_peers_leave_the_hosts_dev_null_alone(results):
    """runsc chowns the files it is given as stdio to its sandbox's user (nobody): handed
    the host's /dev/null, as every contender is, it made the host's /dev/null nobody's.
    The benchmark gives it files of its own."""
    before, after = results[3]
    assert (after.st_uid, after.st_gid, after.st_mode) == \
        (before.st_uid, before.st_gid, before.st_mode)
    assert after.st_ctime_ns == before.st_ctime_ns


def test_results_file_is_well_formed(results):
    _, doc, r, _ = results
    assert doc["benchmark"] == "airlock bench/run" and doc["format"] == 1
    assert doc["quick"] is True and doc["settings"]["sections"] == ["oneshot"]
    for w in ("true", "python"):
        for name in ("airlock", "airlock-allow", "bwrap", "bare"):
            f = doc["figures"][f"oneshot.{w}.{name}"]
            assert f["unit"] == "ms" and f["value"] > 0 and f["min"] <= f["value"] <= f["max"]
            assert f["n"] == 3 and f["command"] and f["ratio_to_airlock"] > 0
    assert doc["figures"]["oneshot.true.airlock"]["ratio_to_airlock"] == 1.0
    # 1b: the one-shot pool warm, every contender paused alike, cold airlock beside it
    for name in ("airlock", "airlock-warm", "airlock-allow", "airlock-allow-warm", "floor",
                 "bwrap"):
        f = doc["figures"][f"oneshot_warm.true.{name}"]
        assert f["value"] > 0 and f["n"] == 3, (name, f)
    assert doc["sections"]["oneshot_warm"]["pause_ms"] == 20
    assert {t["id"] for t in doc["targets"]} == TARGET_IDS
    for t in doc["targets"]:
        # measured here: a verdict; not measured (other sections): none
        measured = t["id"] in ("oneshot_vs_bwrap", "oneshot_vs_floor", "oneshot_vs_floor_warm",
                               "allow_vs_deny", "allow_vs_deny_warm")
        assert (t["met"] is not None) == measured, t
    # a peer that fails is reported in failures, never silently dropped
    names = {k.split(".")[2] for k in doc["figures"]}
    for peer in ("firejail", "runsc"):
        assert peer in names or any(peer in f["message"] for f in doc["failures"])
    assert "targets (issue 31" in r.stdout
    # the warm contenders' pool is drained at the end: no pin, no gateway waiting
    with open("/proc/self/mountinfo") as f:
        assert "/run/airlock/bench-pool-" not in f.read()
    assert not [d for d in os.listdir("/run/airlock") if d.startswith("bench-pool-")]
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    assert b"/run/airlock/bench-pool-" not in f.read(), d
            except OSError:
                pass


def test_compare_reads_a_results_file(results):
    out, _, _, _ = results
    r = subprocess.run([str(RUN), "--compare", str(out), "--results", str(out)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "one-shot /bin/true: airlock" in r.stdout and "+0.0%" in r.stdout
