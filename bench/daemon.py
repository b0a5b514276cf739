"""airlockd latency benchmark (see bench/daemon and docs/performance.md).

Figures, all in one run against one fresh daemon:
  create_run_stop  POST /v1/sandboxes, POST .../commands {"cmd":"true","wait":true},
                   POST .../stop, over one kept-alive connection, N times, from
                   bench/cycle (C), with the three parts apart
  oneshot_run      `airlock run -- /bin/true`, posix_spawn'd by the same bench/cycle
                   process and alternated with the cycles above (each of the two
                   followed by a 40 ms pause, so that neither runs while the other's
                   background work does): the one-shot the cycle is judged against
  create_run_stop_python  the same cycle from Python's http.client (an SDK-like client),
                   N/4 times after the C cycles, for comparison
  round_trip       one command (`true`, waiting) in a live sandbox, M times, from
                   bench/httpload (a C client: its own cost is ~0.02 ms)
  round_trip_python  the same from Python's http.client (as an SDK-like client)
  concurrent       C clients at once (bench/httpload), each with its own connection
                   and its own live sandbox, each running `true` round trips back to
                   back (closed loop) for S seconds: the daemon's capacity; by
                   Little's law its latency is C / (round trips per second)
  paced            the same C clients, each sending a command at Poisson arrivals of
                   R per second (open loop; latency counted from each request's
                   scheduled time, so a late send is not hidden), for each R of
                   --paced-rates: latency under concurrent load short of saturation
"""
import argparse
import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from apiclient import ApiClient

ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--runs", type=int, default=200, help="create+run+stop cycles")
ap.add_argument("--round-trips", type=int, default=1000)
ap.add_argument("--concurrent", type=int, default=100,
                help="clients in the concurrent case (0: skip it)")
ap.add_argument("--concurrent-seconds", type=float, default=10.0)
ap.add_argument("--paced-rates", default="2,5,8",
                help="commands per second per client in the paced cases ('' skips them)")
ap.add_argument("--paced-seconds", type=float, default=6.0)
ap.add_argument("--out", help="JSON file (default bench/results/daemon-<date>.json)")
ap.add_argument("--pool", type=int, default=0,
                help="airlock serve --pool N: creates take pre-started sandboxes when one "
                     "is ready; warm and cold cycles are reported apart")
args = ap.parse_args()
try:
    PACED = [float(x) for x in args.paced_rates.split(",") if x.strip()]
except ValueError:
    ap.error(f"--paced-rates: not a comma-separated list of numbers: {args.paced_rates!r}")
if any(r <= 0 for r in PACED):
    ap.error("--paced-rates: rates must be > 0")

TOKEN = "bench-token"
state = tempfile.mkdtemp(prefix="airlock-bench-")
with open(os.path.join(state, "tokens"), "w") as f:
    f.write(f"{TOKEN} bench\n")
HTTPLOAD = os.path.join(state, "httpload")
RTFLOOR = os.path.join(state, "rtfloor")
CYCLE = os.path.join(state, "cycle")
# After each cycle and each one-shot (bench/cycle --pause-ms): long enough for what one leaves
# to do in the background to end before the other starts. With 10 ms, a pool's refill still
# ran into the next one-shot (4.79 against 4.06 ms with 40 ms, docs/performance.md).
PAUSE_MS = 40
for _bin, _src in ((HTTPLOAD, "httpload.c"), (RTFLOOR, "rtfloor.c"), (CYCLE, "cycle.c")):
    _cc = subprocess.run([os.environ.get("CC", "cc"), "-O2", "-Wall", "-Werror", "-o", _bin,
                          os.path.join(os.path.dirname(os.path.abspath(__file__)), _src)],
                         capture_output=True, text=True)
    if _cc.returncode != 0:
        sys.exit(f"bench/daemon: building bench/{_src} failed:\n" + _cc.stderr[-2000:])
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


def Client():
    """One kept-alive connection to the daemon under test (bench/apiclient.py)."""
    return ApiClient(port, TOKEN)


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
    """CPU seconds used so far: (daemon, its sandboxes: every live process below it, each
    with its reaped children; an agent's shims stay alive between commands)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            children.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(d))
    below, todo = [], [daemon.pid]
    while todo:
        kids = children.get(todo.pop(), [])
        below += kids
        todo += kids
    return cpu_seconds(daemon.pid), sum(cpu_seconds(k) for k in below)


def httpload(sbxs, *extra):
    """Run bench/httpload over sbxs (one connection each); its JSON, the latencies (ms),
    and the client's CPU seconds."""
    raw = os.path.join(state, "httpload.raw")
    argv = [HTTPLOAD, "--port", str(port), "--token", TOKEN, "--raw", raw]
    for x in sbxs:
        argv += ["--sandbox", x]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv + [str(x) for x in extra], capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        out = json.loads(p.stdout)
    except ValueError:
        raise RuntimeError(f"bench/httpload failed (exit {p.returncode}): {p.stderr[-1000:]}")
    with open(raw) as f:
        lat = [float(x) for x in f.read().split()]
    out["first_errors"] = [ln for ln in p.stderr.splitlines() if ln.strip()][:5]
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return out, lat, cpu


def rtfloor(n, warmup):
    """bench/rtfloor: n GET /v1/health + fork/exec/wait of /bin/true on the host, back to
    back; per-iteration (http, exec, both) times in ms."""
    raw = os.path.join(state, "rtfloor.raw")
    p = subprocess.run([RTFLOOR, "--port", str(port), "--count", str(n), "--warmup",
                        str(warmup), "--raw", raw], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"bench/rtfloor failed (exit {p.returncode}): {p.stderr[-1000:]}")
    with open(raw) as f:
        return [tuple(float(x) for x in ln.split()) for ln in f if ln.strip()]


def cycle_runs(n):
    """bench/cycle: n create+run+stop cycles, each alternated with one `airlock run --
    /bin/true`; per iteration (cycle, create, run, stop, warm, one-shot) in ms."""
    raw = os.path.join(state, "cycle.raw")
    p = subprocess.run([CYCLE, "--port", str(port), "--token", TOKEN, "--count", str(n),
                        "--airlock", args.airlock, "--pause-ms", str(PAUSE_MS),
                        "--raw", raw],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"bench/cycle failed (exit {p.returncode}): {p.stderr[-1000:]}")
    with open(raw) as f:
        return [tuple(float(x) for x in ln.split()) for ln in f if ln.strip()]


def server_case(sbxs, seconds, *extra):
    """httpload over sbxs with the daemon's and the sandboxes' CPU measured around it."""
    s0 = server_cpu()
    out, lat, cpu = httpload(sbxs, "--seconds", seconds, *extra)
    s1 = server_cpu()
    res = stats(lat)
    n = len(lat)
    res.update({"clients": len(sbxs), "seconds": out["seconds"],
                "round_trips_per_s": n / out["seconds"] if out["seconds"] else 0.0,
                "errors": out["errors"], "first_errors": out["first_errors"],
                "client_cpu_s": round(cpu, 3),
                "daemon_cpu_s": round(s1[0] - s0[0], 3),
                "sandbox_cpu_s": round(s1[1] - s0[1], 3)})
    sv = res["daemon_cpu_s"] + res["sandbox_cpu_s"]
    res["server_cpu_s"] = round(sv, 3)
    res["server_cpu_ms_per_round_trip"] = sv * 1000 / n if n else None
    res["daemon_cpu_ms_per_round_trip"] = res["daemon_cpu_s"] * 1000 / n if n else None
    return res


def concurrent_cases(main, n_clients, seconds):
    """C clients, each with its own connection and sandbox: closed loop, then paced."""
    sbxs = [main.create() for _ in range(n_clients)]
    try:
        closed = server_case(sbxs, seconds, "--warmup", 2)
        paced = []
        for rate in PACED:
            r = server_case(sbxs, args.paced_seconds, "--warmup", 1, "--rate", rate)
            r.update({"rate_per_client": rate, "offered_per_s": rate * n_clients})
            paced.append(r)
    finally:
        for x in sbxs:
            main.stop(x)
    return closed, paced


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

    if args.pool:
        time.sleep(1.0)  # let the pool fill before the first cycle
    cyc = cycle_runs(args.runs)
    res["create_run_stop"] = stats([c[0] for c in cyc])
    res["create_run_stop"]["client"] = "bench/cycle (C)"
    for i, part in enumerate(("create", "run", "stop")):
        res["create_run_stop"][f"{part}_median_ms"] = statistics.median(c[i + 1] for c in cyc)
    res["oneshot_run"] = stats([c[5] for c in cyc])
    res["oneshot_run"]["what"] = (f"airlock run -- /bin/true, posix_spawn + wait4 from "
                                  f"bench/cycle, alternated with its cycles, {PAUSE_MS} ms "
                                  f"pause after each of both")
    if args.pool:
        res["pool"] = args.pool
        res["create_run_stop_warm"] = stats([c[0] for c in cyc if c[4]])
        res["create_run_stop_cold"] = stats([c[0] for c in cyc if not c[4]])
    py = []
    for _ in range(max(1, args.runs // 4)):
        t = time.perf_counter()
        sbx = main.create()
        main.run_true(sbx)
        main.stop(sbx)
        py.append((time.perf_counter() - t) * 1000)
        time.sleep(PAUSE_MS / 1000)
    res["create_run_stop_python"] = stats(py)
    res["create_run_stop_python"]["client"] = "Python http.client"

    sbx = main.create()
    # The C client first (the figure), then Python's http.client, same sandbox, alternated
    # in blocks so that drift hits both.
    rt, rt_py, floor = [], [], []
    blocks = 4
    c0 = server_cpu()  # over both clients: the server's CPU per round trip is the same
    for b in range(blocks):
        n = args.round_trips // blocks + (1 if b < args.round_trips % blocks else 0)
        if n == 0:
            continue
        out, lat, _ = httpload([sbx], "--count", n, "--warmup", 5 if b == 0 else 0)
        if out["errors"]:
            raise RuntimeError(f"round trips failed: {out['first_errors']}")
        rt += lat
        for i in range(n):
            t = time.perf_counter()
            main.run_true(sbx)
            rt_py.append((time.perf_counter() - t) * 1000)
        c_pause = server_cpu()  # the floor's health requests are not a round trip's CPU
        floor += rtfloor(n, 5 if b == 0 else 0)
        c0 = tuple(c0[k] + server_cpu()[k] - c_pause[k] for k in range(2))
    c1 = server_cpu()
    main.stop(sbx)
    n_all = len(rt) + len(rt_py) + 5
    res["round_trip"] = stats(rt)
    res["round_trip"]["client"] = "bench/httpload (C)"
    # whole clock ticks (10 ms) summed as floats: an unchanged count can come out -1e-16
    res["round_trip"]["daemon_cpu_ms_per_round_trip"] = round((c1[0] - c0[0]) * 1000 / n_all, 6) + 0.0
    res["round_trip"]["sandbox_cpu_ms_per_round_trip"] = round((c1[1] - c0[1]) * 1000 / n_all, 6) + 0.0
    res["round_trip_python"] = stats(rt_py)
    res["round_trip_python"]["client"] = "Python http.client"
    # The floor: what any round trip must do, on the host with no sandbox (bench/rtfloor).
    res["round_trip_floor"] = stats([x[2] for x in floor])
    res["round_trip_floor"]["http_median_ms"] = statistics.median(x[0] for x in floor)
    res["round_trip_floor"]["exec_median_ms"] = statistics.median(x[1] for x in floor)
    res["round_trip_floor"]["what"] = ("bench/rtfloor: GET /v1/health on a kept-alive "
                                       "connection, then vfork+exec+wait of /bin/true, on "
                                       "the host, alternated with the round-trip blocks")

    if args.concurrent > 0:
        res["concurrent"], res["paced"] = concurrent_cases(main, args.concurrent,
                                                           args.concurrent_seconds)
    res["loadavg_after"] = os.getloadavg()

    print(f"{'figure':<44}{'median':>9}{'p90':>9}{'p99':>9}{'min':>9}{'max':>9}{'n':>7}   (ms)")
    keys = [("create_run_stop", "create + run true + stop (HTTP, C client)"),
            ("create_run_stop_python", "  the same from Python's http.client"),
            ("round_trip", "command round trip (live sandbox)"),
            ("round_trip_python", "  the same from Python's http.client"),
            ("round_trip_floor", "  its floor: GET /health + exec true (host)"),
            *([("create_run_stop_warm", f"  of which warm (pool {args.pool})"),
               ("create_run_stop_cold", "  of which cold (pool empty)")] if args.pool else []),
            ("oneshot_run", "airlock run -- /bin/true (alternated)")]
    if "concurrent" in res:
        keys.append(("concurrent", f"round trip, {args.concurrent} clients, back to back"))
    rows = [(label, res[k]) for k, label in keys]
    rows += [(f"  {args.concurrent} clients x {p['rate_per_client']:g}/s "
              f"({p['offered_per_s']:.0f}/s)", p) for p in res.get("paced", [])]
    for label, v in rows:
        if not v.get("n"):
            print(f"{label:<44}{'no samples':>9}")
            continue
        print(f"{label:<44}{v['median_ms']:>9.2f}{v['p90_ms']:>9.2f}{v['p99_ms']:>9.2f}"
              f"{v['min_ms']:>9.2f}{v['max_ms']:>9.2f}{v['n']:>7}")
    c = res["create_run_stop"]
    print(f"ratio create+run+stop / one-shot run: "
          f"{c['median_ms'] / res['oneshot_run']['median_ms']:.2f}x (create "
          f"{c['create_median_ms']:.2f}, run {c['run_median_ms']:.2f}, stop "
          f"{c['stop_median_ms']:.2f} ms)")
    r, fl = res["round_trip"], res["round_trip_floor"]
    print(f"round trip / its floor: {r['median_ms'] / fl['median_ms']:.2f}x "
          f"(+{r['median_ms'] - fl['median_ms']:.2f} ms; the floor's HTTP request "
          f"{fl['http_median_ms']:.2f} ms, exec and wait of /bin/true "
          f"{fl['exec_median_ms']:.2f} ms)")
    print(f"one client: the daemon used {r['daemon_cpu_ms_per_round_trip']:.2f} ms CPU per "
          f"round trip, the sandbox {r['sandbox_cpu_ms_per_round_trip']:.2f} ms")
    if "concurrent" in res:
        cc = res["concurrent"]
        print(f"concurrent: {cc['round_trips_per_s']:.0f} round trips/s over "
              f"{cc['seconds']:.0f} s, {cc['errors']} error(s), client CPU "
              f"{cc['client_cpu_s']:.1f} s (one bench/httpload process); daemon + sandboxes "
              f"used {cc['server_cpu_s']:.1f} CPU s = "
              f"{cc['server_cpu_ms_per_round_trip'] or 0:.2f} ms per round trip, of which the "
              f"daemon {cc['daemon_cpu_ms_per_round_trip'] or 0:.2f} ms "
              f"(on {os.cpu_count()} CPUs)")
        for e in cc["first_errors"]:
            print(f"  error: {e}")
        for p in res["paced"]:
            print(f"paced {p['rate_per_client']:g}/s per client: {p['round_trips_per_s']:.0f} "
                  f"round trips/s, {p['errors']} error(s); p99 {p['p99_ms']:.2f} ms")
            for e in p["first_errors"]:
                print(f"  error: {e}")
    ok = not res.get("concurrent", {}).get("errors") and \
        not any(p["errors"] for p in res.get("paced", []))
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
