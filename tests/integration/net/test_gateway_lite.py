"""airlock-gateway-lite: the gateway built without TLS termination (no OpenSSL), which
`airlock run` starts when its policy has no per-request rules (src/gateway/gw_notls.c).

What must hold: a rules-free one-shot runs the lite gateway and a policy with rules the
full one; the lite gateway refuses a policy with rules with a clear error rather than
serving it without its rules; and without the lite binary next to airlock, the full one
is used.
"""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import time

from .conftest import gateways_of

BIN = pathlib.Path(os.environ.get("AIRLOCK_BIN", pathlib.Path(__file__).resolve()
                                  .parents[3] / "build" / "airlock")).parent
RULES_POLICY = {"allow": {"rules.test": [{"transform": [{"headers": {"X-Test": "1"}}]}]}}


def probe_gateway_of_run(args, probe, seconds=2, command=None):
    """Starts `airlock run ARGS -- COMMAND` (default: sleep SECONDS), and while it runs
    calls probe(pid, exe) on its gateway until that returns something other than None,
    which is returned (None if it never does within 5 s)."""
    command = command or ["sleep", str(seconds)]
    p = subprocess.Popen([str(BIN / "airlock"), "run", *args, "--", *command],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for pid in gateways_of(p.pid):
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    continue
                found = probe(pid, exe) if "airlock-gateway" in exe else None
                if found is not None:
                    return found
            time.sleep(0.02)
        return None
    finally:
        p.wait(timeout=30)


def gateway_exe_of_run(args):
    """The path the gateway of `airlock run ARGS` runs."""
    return probe_gateway_of_run(args, lambda pid, exe: exe)


def test_a_rules_free_one_shot_runs_the_lite_gateway():
    exe = gateway_exe_of_run(["--allow", "allowed.test"])
    assert exe and exe.endswith("/airlock-gateway-lite"), exe


def test_a_policy_with_rules_runs_the_full_gateway(tmp_path):
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(RULES_POLICY))
    exe = gateway_exe_of_run(["--policy", str(pol)])
    assert exe and exe.endswith("/airlock-gateway"), exe


def test_the_lite_gateway_refuses_rules_and_says_why():
    """Started as airlock run starts it (control channel on fd 3), with a policy that has
    rules: it answers an "E" line naming what is missing, and exits."""
    ours, theirs = socket.socketpair()
    fd = theirs.fileno()
    r = subprocess.Popen(["/bin/bash", "-c", f'exec "$0" "$@" 3<&{fd}',
                          str(BIN / "airlock-gateway-lite"), "--policy", json.dumps(RULES_POLICY),
                          "--sandbox", "t", "--log-fd", "-1",
                          "--ca-dir", "/nonexistent-airlock-test"],
                         pass_fds=(fd,), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    theirs.close()
    ours.settimeout(10)
    said = b""
    while chunk := ours.recv(4096):
        said += chunk
    ours.close()
    assert r.wait(timeout=10) != 0
    line = said.decode()
    assert line.startswith("E") and "TLS termination" in line and "lite" in line, \
        (line, r.stderr.read())


def test_without_the_lite_binary_the_full_gateway_serves(tmp_path):
    for name in ("airlock", "airlock-gateway"):
        shutil.copy2(BIN / name, tmp_path / name)
    r = subprocess.run([str(tmp_path / "airlock"), "run", "--allow", "allowed.test", "--",
                        "sh", "-c", "grep -c nameserver /etc/resolv.conf"],
                       capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == b"1", r


def test_the_lite_gateway_matches_international_names_in_ascii(run_net, net, world):
    """airlock-gateway-lite is a static musl binary with Debian's glibc-built libidn2 and
    libunistring linked in: an allowlisted Unicode name must be matched in its ASCII form
    (what a resolver asks for), that name alone goes upstream, and a look-alike does not."""
    gw = "100.96.0.1"
    r = run_net(["--allow", "b\u00fccher.test"] +
                net.batch(["dns", "xn--bcher-kva.test", "A", "udp", gw],
                          ["dns", "xn--bcher-kvb.test", "A", "udp", gw]))
    assert r.returncode == 0, r.err
    listed, other = r.probe
    # Upstream has no such name: NXDOMAIN from upstream, not the gateway's REFUSED.
    assert listed.get("rcode") == "NXDOMAIN", listed
    assert other.get("rcode") == "REFUSED", other
    assert "xn--bcher-kva.test" in world.dns_queries()
    assert "xn--bcher-kvb.test" not in world.dns_queries()
    # Listed (so asked upstream, which has no such name) versus not listed.
    assert net.find(r.egress, layer="dns", reason="nxdomain", name="xn--bcher-kva.test")
    assert net.find(r.egress, layer="dns", verdict="deny", reason="not_listed",
                    name="xn--bcher-kvb.test")


def test_the_lite_gateway_refuses_a_disallowed_international_name(run_net):
    """IDNA2008 disallows symbols such as U+2603: libidn2's refusal reaches the caller as
    an invalid policy (exit 64) naming the entry, from the musl-built lite gateway too."""
    r = run_net(["--allow", "\u2603.test", "--", "true"])
    assert r.returncode == 64, (r.returncode, r.out, r.err)
    assert ".test" in r.err and "policy" in r.err.lower(), r.err


def _cpus_of_threads(pid):
    """The Cpus_allowed_list of each of pid's threads, once it has its service threads
    (None before)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    if len(tids) < 2:
        return None
    cpus = set()
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                cpus |= {ln.split()[1] for ln in f if ln.startswith("Cpus_allowed_list:")}
        except OSError:
            return None
    return cpus


def test_the_gateway_serves_on_all_of_airlocks_cpus():
    """airlock puts a one-shot's gateway on a CPU of its own for its start-up (its chain is
    the allowlisted run's longest); the gateway takes back airlock's CPUs before its service
    threads start, so that none of them stays pinned."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2 or mine != list(range(mine[0], mine[-1] + 1)):
        import pytest
        pytest.skip(f"needs two or more contiguous CPUs, has {mine}")
    want = {f"{mine[0]}-{mine[-1]}"}
    # A refused name is answered by the gateway itself (never sent upstream); the query
    # starts its DNS thread.
    lookup = ["sh", "-c", "getent hosts denied.test; sleep 2"]
    for _ in range(3):
        got = probe_gateway_of_run(["--allow", "allowed.test"], lambda pid, exe:
                                   _cpus_of_threads(pid), command=lookup)
        assert got == want, (got, want)


def _threads(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


def _gateway_pid(ppid):
    for pid in gateways_of(ppid):
        try:
            if "airlock-gateway" in os.readlink(f"/proc/{pid}/exe"):
                return pid
        except OSError:
            pass
    return None


def test_a_one_shot_gateway_starts_a_service_thread_only_for_traffic(tmp_path):
    """A one-shot whose workload sends nothing costs its gateway no service thread (its
    main thread holds the listeners); the first DNS query starts the DNS thread, and the
    query is answered and logged. Fails if the service threads start up front, or if a
    thread started on demand misses the packet that started it."""
    log = tmp_path / "egress.jsonl"
    script = "echo quiet; sleep 0.6; echo asking; getent hosts denied.test; " \
             "echo asked $?; sleep 0.6"
    p = subprocess.Popen([str(BIN / "airlock"), "run", "--allow", "allowed.test",
                          "--egress-log", str(log), "--", "sh", "-c", script],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "quiet"  # the workload runs: the link is up
        gw = None
        deadline = time.monotonic() + 5
        while gw is None and time.monotonic() < deadline:
            gw = _gateway_pid(p.pid)
        assert gw is not None
        quiet = [_threads(gw) for _ in range(20) if not time.sleep(0.02)]
        assert p.stdout.readline().strip() == "asking"
        assert p.stdout.readline().split()[:2] == ["asked", "2"]  # getent: not found
        busy = _threads(gw)
    finally:
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert set(quiet) == {1}, quiet
    assert busy is not None and busy >= 2, busy
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert any(e["layer"] == "dns" and e["verdict"] == "deny" and e["name"] == "denied.test"
               for e in lines), lines
