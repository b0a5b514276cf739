"""A/B of two airlock builds' daemons: create, first command and stop, alternated.

    /usr/bin/python3 bench/ab_daemon.py DIR_A DIR_B [--cycles N] [--again K] [--json FILE]

DIR_A and DIR_B each hold an `airlock` (and the airlockd, airlock-agent and gateways
next to it), e.g. a build directory and a copy of an older one. One daemon of each
is started (`airlock serve` on a port of its own, a fresh state directory); then,
N times, each daemon in turn (the order swapped every cycle, so that drift and
"who goes first" hit both alike) gets one cycle over one kept-alive connection:
POST /v1/sandboxes {}, POST .../commands {"cmd":"true","wait":true}, POST .../stop.
Each part is timed on its own. --again K: K more commands in the live sandbox before the
stop, each timed as "again" (the round trip of a sandbox that has run one already).
Prints the medians per build and B's change against A; --json writes them with every
sample. Both daemons are stopped at the end, even on failure. Judging a change this way
is what docs/performance.md, "Comparing two builds", describes: the host's speed drifts
by more than most changes within minutes, so only the same minute's alternated runs
compare.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from apiclient import ApiClient

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("a", help="directory with build A's airlock")
ap.add_argument("b", help="directory with build B's airlock")
ap.add_argument("--cycles", type=int, default=300)
ap.add_argument("--again", type=int, default=0,
                help="commands run again in each live sandbox, timed apart")
ap.add_argument("--json", help="write medians and samples here")
args = ap.parse_args()
if args.cycles < 1:
    ap.error("--cycles must be at least 1")
for d in (args.a, args.b):
    if not os.access(os.path.join(d, "airlock"), os.X_OK):
        ap.error(f"no executable airlock in {d}")

TOKEN = "ab-token"
PARTS = ("create", "run", "stop", "cycle") + (("again",) if args.again > 0 else ())


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    def __init__(self, bindir):
        self.state = tempfile.mkdtemp(prefix="airlock-ab-")
        with open(os.path.join(self.state, "tokens"), "w") as f:
            f.write(f"{TOKEN} ab\n")
        self.port = free_port()
        self.log = open(os.path.join(self.state, "daemon.log"), "wb")
        self.proc = subprocess.Popen(
            [os.path.join(bindir, "airlock"), "serve", "--state-dir", self.state + "/s",
             "--listen", f"127.0.0.1:{self.port}", "--tokens", self.state + "/tokens"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        self.api = None
        for _ in range(200):
            try:
                api = ApiClient(self.port, TOKEN)
                api.call("GET", "/v1/health")
                self.api = api
                break
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        if not self.api:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"airlock serve from {bindir} did not answer; log in {self.state}")

    def cycle(self):
        t0 = time.perf_counter()
        sid = self.api.create()
        t1 = time.perf_counter()
        self.api.run_true(sid)
        t2 = time.perf_counter()
        again = []
        for _ in range(args.again):
            a0 = time.perf_counter()
            self.api.run_true(sid)
            again.append(time.perf_counter() - a0)
        t3 = time.perf_counter()
        self.api.stop(sid)
        t4 = time.perf_counter()
        return {"create": t1 - t0, "run": t2 - t1, "stop": t4 - t3,
                "cycle": t4 - t3 + t2 - t0, "again": again}

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        shutil.rmtree(self.state, ignore_errors=True)


daemons = []
try:
    for d in (args.a, args.b):
        daemons.append(Daemon(d))
    samples = [{p: [] for p in PARTS} for _ in daemons]
    for i in range(args.cycles):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            for p, v in daemons[k].cycle().items():
                if p == "again":
                    samples[k].setdefault(p, []).extend(x * 1000 for x in v)
                else:
                    samples[k][p].append(v * 1000)
    med = [{p: statistics.median(s[p]) for p in PARTS} for s in samples]
    print(f"{'':<8}" + "".join(f"{p:>10}" for p in PARTS) + "   (ms, medians of "
          f"{args.cycles} alternated cycles)")
    for name, m in (("A", med[0]), ("B", med[1])):
        print(f"{name:<8}" + "".join(f"{m[p]:>10.2f}" for p in PARTS))
    print(f"{'B - A':<8}" + "".join(f"{med[1][p] - med[0][p]:>+10.2f}" for p in PARTS))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"a": args.a, "b": args.b, "cycles": args.cycles, "median_ms": med,
                       "samples_ms": samples}, f)
except (RuntimeError, OSError) as e:
    print(f"bench/ab_daemon: {e}", file=sys.stderr)
    sys.exit(1)
finally:
    for d in daemons:
        d.close()
