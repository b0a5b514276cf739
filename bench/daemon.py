"""airlockd latency benchmark (see bench/daemon and docs/performance.md).

Figures, all in one run against one fresh daemon:
  create_run_stop  POST /v1/sandboxes, POST .../commands {"cmd":"true","wait":true},
                   POST .../stop, over one kept-alive connection, N times
  oneshot_run      `airlock run -- /bin/true` spawned from here, alternated with
                   the cycles above (so it includes Python's fork/exec cost)
  round_trip       one command (`true`, waiting) in a live sandbox, M times
  concurrent       C clients at once, each with its own connection and its own
                   live sandbox, each running `true` round trips back to back
                   (closed loop) for S seconds; latency of every round trip
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
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--runs", type=int, default=200, help="create+run+stop cycles")
ap.add_argument("--round-trips", type=int, default=1000)
ap.add_argument("--concurrent", type=int, default=100,
                help="clients in the concurrent case (0: skip it)")
ap.add_argument("--concurrent-seconds", type=float, default=10.0)
ap.add_argument("--client-procs", type=int, default=4,
                help="client processes the concurrent clients are spread over")
ap.add_argument("--out", help="JSON file (default bench/results/daemon-<date>.json)")
ap.add_argument("--pool", type=int, default=0,
                help="airlock serve --pool N: creates take pre-started sandboxes when one "
                     "is ready; warm and cold cycles are reported apart")
args = ap.parse_args()

TOKEN = "bench-token"
H = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
state = tempfile.mkdtemp(prefix="airlock-bench-")
with open(os.path.join(state, "tokens"), "w") as f:
    f.write(f"{TOKEN} bench\n")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
serve_cmd = [args.airlock, "serve", "--state-dir", state, "--listen", f"127.0.0.1:{port}",
             "--tokens", os.path.join(state, "tokens")]
if args.pool:
    serve_cmd += ["--pool", str(args.pool)]
print("  $ " + " ".join(serve_cmd), flush=True)
daemon_log = open(os.path.join(state, "daemon.log"), "wb")
daemon = subprocess.Popen(serve_cmd, stderr=daemon_log, stdin=subprocess.DEVNULL)


def connect():
    return http.client.HTTPConnection("127.0.0.1", port, timeout=60)


class Client:
    """One kept-alive HTTP/1.1 connection, as an SDK holds one."""

    def __init__(self):
        self.conn = connect()

    def call(self, method, path, body=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers=H)
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:200]!r}")
        return data

    def create(self):
        s = json.loads(self.call("POST", "/v1/sandboxes", {}))["sandbox"]
        self.last_warm = bool(s.get("warm"))
        return s["id"]

    def run_true(self, sbx):
        out = self.call("POST", f"/v1/sandboxes/{sbx}/commands", {"cmd": "true", "wait": True})
        last = json.loads(out.strip().split(b"\n")[-1])
        if not (last.get("type") == "exit" and last["command"]["exit_code"] == 0):
            raise RuntimeError(f"unexpected command result: {last}")

    def stop(self, sbx):
        self.call("POST", f"/v1/sandboxes/{sbx}/stop")


def stats(xs):
    xs = sorted(xs)
    if not xs:
        return {"n": 0}

    def q(p):  # linear interpolation between order statistics (numpy's default)
        pos = p * (len(xs) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
    return {"median_ms": statistics.median(xs), "min_ms": xs[0], "max_ms": xs[-1],
            "p90_ms": q(0.9), "p99_ms": q(0.99), "mean_ms": statistics.fmean(xs), "n": len(xs)}


def cpu_seconds(pid):
    """utime+stime of pid, plus cutime+cstime (its reaped children), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return 0.0
    v = st[st.rindex(")") + 2:].split()
    return sum(int(x) for x in v[11:15]) / os.sysconf("SC_CLK_TCK")


def server_cpu():
    """CPU seconds used so far: (daemon, its sandboxes' PID 1s with their reaped commands)."""
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            if int(st[st.rindex(")") + 2:].split()[1]) == daemon.pid:
                kids.append(int(d))
    return cpu_seconds(daemon.pid), sum(cpu_seconds(k) for k in kids)


def concurrent_case(main, n_clients, seconds, n_procs):
    """C clients, each with its own connection and sandbox, closed loop."""
    sbxs = [main.create() for _ in range(n_clients)]
    n_procs = max(1, min(n_procs, n_clients))
    start_at = time.time() + 1.5 + n_clients * 0.01   # all connect and warm up first
    end_at = start_at + seconds
    readers = []
    for p in range(n_procs):
        mine = sbxs[p::n_procs]
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:                       # client process: one thread per client
            os.close(rfd)
            lat, errs = [], []
            lock = threading.Lock()

            def client(sbx):
                try:
                    c = Client()
                    c.run_true(sbx)        # warm the connection
                    mine_lat = []
                    time.sleep(max(0.0, start_at - time.time()))
                    while time.time() < end_at:
                        t = time.perf_counter()
                        c.run_true(sbx)
                        mine_lat.append((time.perf_counter() - t) * 1000)
                    with lock:
                        lat.extend(mine_lat)
                except Exception as e:     # reported, never hidden
                    with lock:
                        errs.append(f"{type(e).__name__}: {e}")
            ts = [threading.Thread(target=client, args=(x,)) for x in mine]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            cpu = os.times()
            with os.fdopen(wfd, "w") as w:
                json.dump({"lat": lat, "errors": errs,
                           "cpu_s": cpu.user + cpu.system}, w)
            os._exit(0)
        os.close(wfd)
        readers.append((pid, rfd))
    time.sleep(max(0.0, start_at - time.time()))
    srv0 = server_cpu()
    time.sleep(max(0.0, end_at - time.time()))
    srv1 = server_cpu()
    lat, errs, cpu = [], [], 0.0
    for pid, rfd in readers:
        with os.fdopen(rfd) as r:
            data = r.read()
        os.waitpid(pid, 0)
        try:
            d = json.loads(data)
        except ValueError:
            errs.append(f"client process {pid} reported nothing")
            continue
        lat += d["lat"]
        errs += d["errors"]
        cpu += d["cpu_s"]
    for x in sbxs:
        main.stop(x)
    res = stats(lat)
    res.update({"clients": n_clients, "client_processes": n_procs, "seconds": seconds,
                "round_trips_per_s": len(lat) / seconds, "errors": len(errs),
                "first_errors": errs[:5], "client_cpu_s": round(cpu, 3),
                "daemon_cpu_s": round(srv1[0] - srv0[0], 3),
                "sandbox_cpu_s": round(srv1[1] - srv0[1], 3)})
    sv = res["daemon_cpu_s"] + res["sandbox_cpu_s"]
    res["server_cpu_s"] = round(sv, 3)
    res["server_cpu_ms_per_round_trip"] = sv * 1000 / len(lat) if lat else None
    res["daemon_cpu_ms_per_round_trip"] = res["daemon_cpu_s"] * 1000 / len(lat) if lat else None
    return res


def stop_leftovers():
    """Stop every sandbox this daemon still runs (SIGTERM would leave them)."""
    try:
        c = Client()
        for sb in json.loads(c.call("GET", "/v1/sandboxes")).get("sandboxes", []):
            if sb.get("status") == "running":
                c.stop(sb["id"])
    except Exception as e:
        print(f"bench/daemon: warning: could not stop leftover sandboxes: {e}", file=sys.stderr)


res = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": args.runs,
       "round_trips": args.round_trips, "loadavg_before": os.getloadavg(),
       "serve_command": " ".join(serve_cmd)}
ok = False
try:
    for _ in range(200):
        try:
            c0 = connect()
            c0.request("GET", "/v1/health")
            c0.getresponse().read()
            break
        except OSError:
            time.sleep(0.05)
    else:
        raise RuntimeError("airlockd did not answer /v1/health")
    main = Client()

    cycle, oneshot, warm, cold = [], [], [], []
    if args.pool:
        time.sleep(1.0)  # let the pool fill before the first cycle
    for i in range(args.runs):
        t = time.perf_counter()
        sbx = main.create()
        main.run_true(sbx)
        main.stop(sbx)
        cycle.append((time.perf_counter() - t) * 1000)
        (warm if main.last_warm else cold).append(cycle[-1])
        t = time.perf_counter()
        subprocess.run([args.airlock, "run", "--", "/bin/true"], check=True,
                       stdin=subprocess.DEVNULL)
        oneshot.append((time.perf_counter() - t) * 1000)
    res["create_run_stop"] = stats(cycle)
    res["oneshot_run"] = stats(oneshot)
    if args.pool:
        res["pool"] = args.pool
        res["create_run_stop_warm"] = stats(warm)
        res["create_run_stop_cold"] = stats(cold)

    sbx = main.create()
    rt = []
    c0 = server_cpu()
    for i in range(args.round_trips):
        t = time.perf_counter()
        main.run_true(sbx)
        rt.append((time.perf_counter() - t) * 1000)
    c1 = server_cpu()
    main.stop(sbx)
    res["round_trip"] = stats(rt)
    res["round_trip"]["daemon_cpu_ms_per_round_trip"] = (c1[0] - c0[0]) * 1000 / len(rt)
    res["round_trip"]["sandbox_cpu_ms_per_round_trip"] = (c1[1] - c0[1]) * 1000 / len(rt)

    if args.concurrent > 0:
        res["concurrent"] = concurrent_case(main, args.concurrent, args.concurrent_seconds,
                                            args.client_procs)
    res["loadavg_after"] = os.getloadavg()

    print(f"{'figure':<44}{'median':>9}{'p90':>9}{'p99':>9}{'min':>9}{'max':>9}{'n':>7}   (ms)")
    rows = [("create_run_stop", "create + run true + stop (HTTP)"),
            ("round_trip", "command round trip (live sandbox)"),
            *([("create_run_stop_warm", f"  of which warm (pool {args.pool})"),
               ("create_run_stop_cold", "  of which cold (pool empty)")] if args.pool else []),
            ("oneshot_run", "airlock run -- /bin/true (spawned)")]
    if "concurrent" in res:
        rows.append(("concurrent", f"round trip, {args.concurrent} concurrent clients"))
    for k, label in rows:
        v = res[k]
        if not v.get("n"):
            print(f"{label:<44}{'no samples':>9}")
            continue
        print(f"{label:<44}{v['median_ms']:>9.2f}{v['p90_ms']:>9.2f}{v['p99_ms']:>9.2f}"
              f"{v['min_ms']:>9.2f}{v['max_ms']:>9.2f}{v['n']:>7}")
    print(f"ratio create+run+stop / one-shot run: "
          f"{res['create_run_stop']['median_ms'] / res['oneshot_run']['median_ms']:.2f}x")
    r = res["round_trip"]
    print(f"one client: the daemon used {r['daemon_cpu_ms_per_round_trip']:.2f} ms CPU per "
          f"round trip, the sandbox {r['sandbox_cpu_ms_per_round_trip']:.2f} ms")
    if "concurrent" in res:
        cc = res["concurrent"]
        print(f"concurrent: {cc['round_trips_per_s']:.0f} round trips/s over {cc['seconds']:.0f} s, "
              f"{cc['errors']} error(s), client CPU {cc['client_cpu_s']:.1f} s "
              f"in {cc['client_processes']} process(es); daemon + sandboxes used "
              f"{cc['server_cpu_s']:.1f} CPU s = "
              f"{cc['server_cpu_ms_per_round_trip'] or 0:.2f} ms per round trip, of which the "
              f"daemon {cc['daemon_cpu_ms_per_round_trip'] or 0:.2f} ms "
              f"(on {os.cpu_count()} CPUs)")
        for e in cc["first_errors"]:
            print(f"  error: {e}")
    ok = not res.get("concurrent", {}).get("errors")
    out = args.out
    if not out:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, time.strftime("daemon-%Y%m%d-%H%M%S.json", time.gmtime()))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print("results:", out)
except Exception as e:
    print(f"bench/daemon: error: {e}", file=sys.stderr)
    daemon_log.flush()
    with open(os.path.join(state, "daemon.log"), "rb") as f:
        tail = f.read()[-2000:].decode(errors="replace")
    if tail.strip():
        print("airlockd stderr (tail):\n" + tail, file=sys.stderr)
finally:
    if daemon.poll() is None:
        stop_leftovers()
        daemon.terminate()
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    subprocess.run(["rm", "-rf", state])
sys.exit(0 if ok else 1)
