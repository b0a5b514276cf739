"""The cost of a scrape of airlockd's GET /metrics (see bench/metrics_scrape).

One fresh daemon with --metrics-token-file. In each phase (0 sandboxes, then N idle
ones, each with one finished command), R rounds alternate:
  scrape  GET /metrics with the metrics token (kept-alive connection): every series,
          N sandboxes' cgroups read, their egress logs looked at
  peer    GET /v1/sandboxes/{id} with an API token (kept-alive connection): a cheap
          native route, the floor of any request over this server
timed from Python (both pay the same client overhead). Then the daemon's CPU (utime +
stime, from the daemon's own process_cpu_seconds_total, read by a scrape before and after)
over K scrapes back to back, and over K peer requests.
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from apiclient import ApiClient

ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--n", type=int, default=1000, help="sandboxes alive in the second phase")
ap.add_argument("--runs", type=int, default=200, help="scrape/peer pairs per phase")
ap.add_argument("--cpu-runs", type=int, default=200, help="requests per CPU measure")
ap.add_argument("--out", help="JSON file (default bench/results/metrics-<date>.json)")
args = ap.parse_args()

TOKEN, MTOKEN = "bench-token", "bench-metrics-token"


def quant(xs, p):
    xs = sorted(xs)
    pos = p * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def daemon_cpu_s(port):
    """The daemon's own CPU time so far, from its process_cpu_seconds_total (getrusage,
    microseconds: /proc/PID/stat counts clock ticks of 10 ms)."""
    g = Getter(port, MTOKEN)
    g.conn.request("GET", "/metrics", headers=g.headers)
    body = g.conn.getresponse().read().decode()
    g.conn.close()
    for ln in body.splitlines():
        if ln.startswith("process_cpu_seconds_total "):
            return float(ln.split()[1])
    raise RuntimeError("no process_cpu_seconds_total in the scrape")


class Getter:
    """GET over one kept-alive connection; returns (ms, bytes)."""

    def __init__(self, port, token):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path):
        t = time.perf_counter()
        self.conn.request("GET", path, headers=self.headers)
        r = self.conn.getresponse()
        data = r.read()
        ms = (time.perf_counter() - t) * 1000
        if r.status != 200:
            raise RuntimeError(f"GET {path}: {r.status} {data[:300]!r}")
        return ms, len(data)


def phase(port, peer_path, label):
    scr, peer = Getter(port, MTOKEN), Getter(port, TOKEN)
    scr.get("/metrics"), peer.get(peer_path)  # warm both connections
    s_ms, p_ms, size = [], [], 0
    for _ in range(args.runs):
        ms, size = scr.get("/metrics")
        s_ms.append(ms)
        p_ms.append(peer.get(peer_path)[0])
    res = {"scrape_ms": {"median": statistics.median(s_ms), "p95": quant(s_ms, 0.95)},
           "peer_ms": {"median": statistics.median(p_ms), "p95": quant(p_ms, 0.95)},
           "scrape_bytes": size, "runs": args.runs, "samples_scrape_ms": s_ms,
           "samples_peer_ms": p_ms}
    res["ratio_median"] = res["scrape_ms"]["median"] / res["peer_ms"]["median"]
    print(f"  {label}: scrape median {res['scrape_ms']['median']:.3f} ms, p95 "
          f"{res['scrape_ms']['p95']:.3f} ms ({size} bytes); peer GET {peer_path.split('/')[2]}"
          f"/{{id}} median {res['peer_ms']['median']:.3f} ms, p95 {res['peer_ms']['p95']:.3f} ms;"
          f" ratio {res['ratio_median']:.1f}x", flush=True)
    return res


def cpu_per(port, path, token, scrape_ms=0.0):
    """The daemon's CPU in ms per GET path over --cpu-runs of them, between two scrapes
    (whose own cost, scrape_ms, is taken out once)."""
    g = Getter(port, token)
    g.get(path)
    c0 = daemon_cpu_s(port)
    for _ in range(args.cpu_runs):
        g.get(path)
    return ((daemon_cpu_s(port) - c0) * 1000 - scrape_ms) / args.cpu_runs


def main():
    state = tempfile.mkdtemp(prefix="airlock-bench-")
    for name, line in (("tokens", f"{TOKEN} bench\n"), ("metrics.token", f"{MTOKEN}\n")):
        with open(os.path.join(state, name), "w") as f:
            f.write(line)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cmd = [args.airlock, "serve", "--state-dir", state, "--listen", f"127.0.0.1:{port}",
           "--tokens", os.path.join(state, "tokens"), "--metrics-token-file",
           os.path.join(state, "metrics.token")]
    print("  $ " + " ".join(cmd), flush=True)
    log = open(os.path.join(state, "daemon.log"), "wb")
    daemon = subprocess.Popen(cmd, stderr=log, stdin=subprocess.DEVNULL)
    res = {"n": args.n, "host": os.uname().nodename, "cpus": os.cpu_count()}
    ids = []
    try:
        for _ in range(200):
            try:
                c = ApiClient(port, TOKEN, timeout=120)
                c.call("GET", "/v1/health")
                break
            except OSError:
                time.sleep(0.05)
        keep = c.create()  # the peer's sandbox, there in both phases
        ids.append(keep)
        peer_path = f"/v1/sandboxes/{keep}"
        res["empty"] = phase(port, peer_path, "1 sandbox")
        res["empty"]["cpu_ms_per_scrape"] = cpu_per(port, "/metrics", MTOKEN)
        t = time.perf_counter()
        while len(ids) < args.n:
            sid = c.create()
            c.run_true(sid)  # one finished command each, as a used sandbox has
            ids.append(sid)
        res["create_seconds"] = time.perf_counter() - t
        print(f"  made {len(ids)} sandboxes in {res['create_seconds']:.1f} s", flush=True)
        res["full"] = phase(port, peer_path, f"{len(ids)} sandboxes")
        one = res["full"]["cpu_ms_per_scrape"] = cpu_per(port, "/metrics", MTOKEN)
        res["full"]["cpu_ms_per_peer"] = cpu_per(port, peer_path, TOKEN, one)
        f = res["full"]
        print(f"  daemon CPU: {f['cpu_ms_per_scrape']:.3f} ms per scrape with {len(ids)} "
              f"sandboxes ({res['empty']['cpu_ms_per_scrape']:.3f} ms with 1), "
              f"{f['cpu_ms_per_peer']:.3f} ms per peer GET", flush=True)
    finally:
        t = time.perf_counter()
        stopped = 0
        for sid in ids:
            try:
                c.stop(sid)
                stopped += 1
            except Exception as e:  # noqa: BLE001 -- reported, the rest still stopped
                print(f"  stop {sid}: {e}", file=sys.stderr)
                c = ApiClient(port, TOKEN, timeout=120)
        print(f"  stopped {stopped}/{len(ids)} in {time.perf_counter() - t:.1f} s")
        daemon.terminate()
        daemon.wait(timeout=30)
        subprocess.run(["rm", "-rf", state])
    out = args.out
    if not out:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, time.strftime("metrics-%Y%m%d-%H%M%S.json", time.gmtime()))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"  results: {out}")
    return 0


sys.exit(main())
