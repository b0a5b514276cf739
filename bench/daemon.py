"""airlockd latency benchmark (see bench/daemon)."""
import argparse, http.client, json, os, socket, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--runs", type=int, default=200)
ap.add_argument("--round-trips", type=int, default=1000)
args = ap.parse_args()

state = tempfile.mkdtemp(prefix="airlock-bench-")
with open(os.path.join(state, "tokens"), "w") as f:
    f.write("bench-token bench\n")
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
daemon = subprocess.Popen([args.airlock, "serve", "--state-dir", state, "--listen",
                           f"127.0.0.1:{port}", "--tokens", os.path.join(state, "tokens")],
                          stderr=subprocess.DEVNULL)
H = {"Authorization": "Bearer bench-token", "Content-Type": "application/json"}
conn = None
for _ in range(100):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30); conn.request("GET", "/v1/health"); conn.getresponse().read(); break
    except OSError:
        time.sleep(0.05)


def call(method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=H)
    r = conn.getresponse(); data = r.read()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {data[:200]!r}")
    return data


def run_true(sbx):
    out = call("POST", f"/v1/sandboxes/{sbx}/commands", {"cmd": "true", "wait": True})
    last = json.loads(out.strip().split(b"\n")[-1])
    assert last["type"] == "exit" and last["command"]["exit_code"] == 0, last


def stats(xs):
    xs = sorted(xs)
    return {"median_ms": statistics.median(xs), "min_ms": xs[0], "max_ms": xs[-1],
            "p90_ms": xs[int(len(xs) * 0.9)], "p99_ms": xs[min(len(xs) - 1, int(len(xs) * 0.99))], "n": len(xs)}


try:
    cycle, oneshot = [], []
    for i in range(args.runs):
        t = time.perf_counter()
        sbx = json.loads(call("POST", "/v1/sandboxes", {}))["sandbox"]["id"]
        run_true(sbx)
        call("POST", f"/v1/sandboxes/{sbx}/stop")
        cycle.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        subprocess.run([args.airlock, "run", "--", "/bin/true"], check=True, stdin=subprocess.DEVNULL)
        oneshot.append((time.perf_counter() - t) * 1000)
    sbx = json.loads(call("POST", "/v1/sandboxes", {}))["sandbox"]["id"]
    rt = []
    for i in range(args.round_trips):
        t = time.perf_counter(); run_true(sbx); rt.append((time.perf_counter() - t) * 1000)
    call("POST", f"/v1/sandboxes/{sbx}/stop")
    res = {"create_run_stop": stats(cycle), "round_trip": stats(rt), "oneshot_run": stats(oneshot)}
    print(f"{'figure':<34}{'median':>9}{'p90':>9}{'p99':>9}{'min':>9}{'max':>9}   (ms)")
    for k, label in [("create_run_stop", "create + run true + stop (HTTP)"),
                     ("round_trip", "command round trip (live sandbox)"),
                     ("oneshot_run", "airlock run -- /bin/true (spawn)")]:
        v = res[k]
        print(f"{label:<34}{v['median_ms']:>9.2f}{v['p90_ms']:>9.2f}{v['p99_ms']:>9.2f}{v['min_ms']:>9.2f}{v['max_ms']:>9.2f}")
    print(f"ratio create+run+stop / one-shot run: {res['create_run_stop']['median_ms'] / res['oneshot_run']['median_ms']:.2f}x")
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    out = os.path.join(os.path.dirname(__file__), "results", time.strftime("daemon-%Y%m%d-%H%M%S.json"))
    json.dump(res, open(out, "w"), indent=2)
    print("results:", out)
finally:
    daemon.terminate(); daemon.wait(timeout=10)
    subprocess.run(["rm", "-rf", state])
