"""A sandbox cannot make its gateway (host root, outside the sandbox's cgroups) hold more
than the sandbox's own limits allow: the connections it serves at once follow the
sandbox's pids and memory limits (net_gateway_conn_budget: 4 per pid, 1 per MiB, at least
64). A 16-pid, 64 MiB sandbox that opens hundreds of proxy connections and never finishes
a request head gets 64 served; the rest are accepted, closed and logged
"too_many_connections", and the gateway's threads stay within the budget."""
import json
import os
import subprocess
import textwrap

import pytest

from .conftest import UPSTREAM_DNS, gateways_of

PY = "/usr/bin/python3"
BUDGET = 64          # net_gateway_conn_budget(64 MiB, 16 pids)
OPENED = 300

HOLD = textwrap.dedent(f"""
    import json, socket, sys, time
    socks = []
    for i in range({OPENED}):
        s = socket.create_connection(("100.96.0.1", 3128), timeout=10)
        # a request head that never ends: the gateway keeps waiting for the rest
        s.sendall(b"GET http://allowed.test/ HTTP/1.1\\r\\nX-Slow: 1\\r\\n")
        socks.append(s)
    time.sleep(1.0)
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    print(json.dumps({{"open": len(socks) - closed, "closed": closed}}), flush=True)
    sys.stdin.readline()
    for s in socks:
        s.close()
    # served again once the others are gone
    time.sleep(0.5)
    c = socket.create_connection(("100.96.0.1", 3128), timeout=10)
    c.sendall(b"GET http://allowed.test/ HTTP/1.1\\r\\nHost: allowed.test\\r\\n"
              b"Connection: close\\r\\n\\r\\n")
    c.settimeout(10)
    print(json.dumps({{"after": c.recv(12).decode(errors="replace")}}), flush=True)
""")


def _gateway_threads(run_pid):
    """Threads of the gateway serving `airlock run` run_pid (its child, or the gateway
    that waited in the recycled pair it took)."""
    total = 0
    for pid in gateways_of(run_pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("Threads:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


@pytest.mark.parametrize("pool", ["no-pool", "pool"])
def test_a_sandbox_cannot_make_its_gateway_hold_more_than_its_budget(airlock, world,
                                                                      tmp_path, pool):
    log = tmp_path / "egress.jsonl"
    argv = [airlock, "run", "--upstream-netns", world.ns, "--upstream-dns", UPSTREAM_DNS,
            "--egress-log", str(log), "--pids", "16", "--memory", "64M",
            "--allow", "allowed.test"]
    if pool == "no-pool":
        argv.append("--no-pool")
    argv += ["--", PY, "-c", HOLD]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        held = json.loads(line) if line.strip() else None
        threads = _gateway_threads(proc.pid)
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert held, (line, proc.stderr.read() if proc.stderr and not proc.stderr.closed else "")
    # served concurrently up to the budget, never beyond it
    assert BUDGET // 2 <= held["open"] <= BUDGET, held
    assert held["closed"] >= OPENED - BUDGET, held
    # the gateway's threads: the budget plus its few service threads
    assert 0 < threads <= BUDGET + 16, threads
    # served again once the sandbox let go of its connections
    after = json.loads(out.strip().splitlines()[-1])
    assert after["after"].startswith("HTTP/1.1"), (after, err)
    # every refused connection is in the log (repeats aggregated into "suppressed")
    lines = []
    with open(log) as f:
        for raw in f:
            if raw.strip():
                lines.append(json.loads(raw))
    refused = [e for e in lines if e.get("reason") == "too_many_connections"]
    assert refused, lines[-20:]
    assert all(e.get("verdict", "deny") == "deny" for e in refused), refused
    counted = sum(1 + e.get("suppressed", 0) if e.get("event") != "repeated"
                  else e.get("suppressed", 0) for e in refused)
    assert counted >= held["closed"], (counted, held, refused)
