"""Relay pipes past the pool (docs/network.md, "Limits per sandbox"). A relay pipe grows
from 64 KiB to 1 MiB once a splice fills it (a bulk flow), but grown pipes come from a pool
of one per 16 connections of the sandbox's budget (at least 4), so that a sandbox cannot make
its gateway (host root, outside its cgroups) hold 1 MiB per connection. A 16-pid, 64 MiB
sandbox (budget 64, pool 4) starts more large downloads than the pool and reads none of
them for a while: every relay stalls with a full pipe, most of them never grown. Each still
delivers every byte once read, and each is logged with its bytes.

The pool's bound itself is not observed from outside: F_GETPIPE_SZ and an open through
/proc take the pipe's mutex, which a relay blocked in splice(2) holds."""
import json
import os
import subprocess
import textwrap
import time

import pytest

from .conftest import UPSTREAM_DNS

PY = "/usr/bin/python3"
POOL = 4             # max(64 / 16, 4): net_gateway_conn_budget(64 MiB, 16 pids) = 64
FLOWS = 2 * POOL
SIZE = 8 << 20       # past what the gateway's send buffer (<= 4 MiB) and a pipe hold

HOLD = textwrap.dedent(f"""
    import json, socket, sys, time
    mode, path = sys.argv[1], sys.argv[2]
    socks = []
    for i in range({FLOWS}):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        if mode == "proxy":
            s.connect(("100.96.0.1", 3128))
            s.sendall(b"GET http://allowed.test%s HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n"
                      % path.encode())
        else:
            s.connect(("allowed.test", 80))
            s.sendall(b"GET %s HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n" % path.encode())
        socks.append(s)
    time.sleep(2.0)      # unread: every relay fills its pipe and waits
    print("HELD", flush=True)
    sys.stdin.readline()
    got = []
    for s in socks:
        s.settimeout(30)
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            d = s.recv(4096)
            if not d:
                break
            head += d
        n = len(head.split(b"\\r\\n\\r\\n", 1)[1]) if b"\\r\\n\\r\\n" in head else -1
        while n >= 0:
            d = s.recv(1 << 16)
            if not d:
                break
            n += len(d)
        got.append([head.split(b"\\r\\n", 1)[0].decode(errors="replace"), n])
        s.close()
    print(json.dumps(got), flush=True)
""")


@pytest.mark.parametrize("mode", ["proxy", "transparent"])
def test_relays_past_the_pipe_pool_deliver_every_byte(airlock, world, tmp_path, canary,
                                                      mode):
    src = os.path.join(world.state, "source")
    os.makedirs(src, exist_ok=True)
    name = f"{canary}.bin"
    with open(os.path.join(src, name), "wb") as f:
        f.truncate(SIZE)
    log = tmp_path / "egress.jsonl"
    argv = [airlock, "run", "--upstream-netns", world.ns, "--upstream-dns", UPSTREAM_DNS,
            "--egress-log", str(log), "--pids", "16", "--memory", "64M",
            "--allow", "allowed.test", "--", PY, "-c", HOLD, mode, f"/source/{name}"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        time.sleep(1.0)      # the relays stay stalled a while, their pipes full
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.unlink(os.path.join(src, name))
    assert line.strip() == "HELD", (line, proc.stderr.read() if not proc.stderr.closed
                                    else "")
    # a relay whose pipe stayed small still delivers every byte
    got = json.loads(out.strip().splitlines()[-1])
    assert got == [["HTTP/1.1 200 OK", SIZE]] * FLOWS, (got, err)
    lines = []
    with open(log) as f:
        for raw in f:
            if raw.strip():
                lines.append(json.loads(raw))
    flows = [e for e in lines if e.get("verdict") == "allow" and e.get("event") == "close"
             and e.get("name") == "allowed.test" and e.get("port") == 80]
    assert len(flows) == FLOWS, lines
    assert all(e["bytes_in"] > SIZE for e in flows), flows
