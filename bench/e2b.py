"""E2B front end benchmark (see bench/e2b and docs/performance.md).

One fresh daemon; bench/e2b.mjs drives it through the E2B SDK, the Vercel SDK and the
native API, interleaved (so the three share the machine's noise), and prints every
sample. Figures: median and p90 of
  cycle       Sandbox.create -> first command (`true`) -> kill/stop
  round_trip  one command (`true`) in a live sandbox
and each SDK's ratio to the native API in the same run. native_bash is the native API
running what the E2B SDK runs for a command (`/bin/bash -l -c CMD`, a login shell): the
E2B figures minus it are the front end's own cost.
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
import http.client

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--cycles", type=int, default=30)
ap.add_argument("--round-trips", type=int, default=200)
ap.add_argument("--out", help="JSON file (default bench/results/e2b-<date>.json)")
args = ap.parse_args()

node, npm = shutil.which("node"), shutil.which("npm")
if not node or not npm:
    sys.exit("bench/e2b: node and npm are needed")
for d, mod in (("e2b", "e2b"), ("sdk", "@vercel/sandbox")):
    pkg = os.path.join(repo, "tests", d)
    if not os.path.isdir(os.path.join(pkg, "node_modules", mod)):
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=pkg, check=True)

TOKEN = "bench-token"
state = tempfile.mkdtemp(prefix="airlock-bench-e2b-")
with open(os.path.join(state, "tokens"), "w") as f:
    f.write(f"{TOKEN} bench\n")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
log = open(os.path.join(state, "daemon.log"), "wb")
daemon = subprocess.Popen([args.airlock, "serve", "--state-dir", state, "--listen",
                           f"127.0.0.1:{port}", "--tokens", os.path.join(state, "tokens")],
                          stderr=log, stdout=log, stdin=subprocess.DEVNULL)
try:
    for _ in range(150):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/v1/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.1)
    env = dict(os.environ, AIRLOCK_URL=f"http://127.0.0.1:{port}", AIRLOCK_TOKEN=TOKEN,
               E2B_API_URL=f"http://127.0.0.1:{port}", E2B_SANDBOX_URL=f"http://127.0.0.1:{port}",
               E2B_API_KEY=TOKEN, CYCLES=str(args.cycles), TRIPS=str(args.round_trips))
    r = subprocess.run([node, os.path.join(here, "e2b.mjs")], env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"bench/e2b: the client failed:\n{r.stderr[-3000:]}")
    raw = json.loads(r.stdout.strip().splitlines()[-1])
finally:
    daemon.terminate()
    daemon.wait()
    shutil.rmtree(state, ignore_errors=True)


def stats(v):
    v = sorted(v)
    return {"n": len(v), "median_ms": round(statistics.median(v), 2),
            "p90_ms": round(v[int(0.9 * (len(v) - 1))], 2)}


res = {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "nproc": os.cpu_count(), "figures": {}}
for what in ("cycle", "round_trip"):
    fig = {n: stats(v) for n, v in raw[what].items()}
    for n in ("e2b", "vercel", "native_bash"):
        fig[n]["ratio_to_native"] = round(fig[n]["median_ms"] / fig["native"]["median_ms"], 2)
    res["figures"][what] = fig
    for n, f in fig.items():
        extra = f"  x{f['ratio_to_native']} native" if "ratio_to_native" in f else ""
        print(f"{what:10s} {n:11s} median {f['median_ms']:8.2f} ms  p90 {f['p90_ms']:8.2f} ms"
              f"  (n={f['n']}){extra}")
out = args.out or os.path.join(here, "results", time.strftime("e2b-%Y%m%d-%H%M%S.json"))
with open(out, "w") as f:
    json.dump(res, f, indent=1)
print(f"results: {out}")
