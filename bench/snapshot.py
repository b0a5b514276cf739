"""Fork, snapshot and restore against a plain create, in one run (see bench/snapshot).

The source sandbox holds --mib MiB of random data in --files files under /workspace.
Each round times, from the client, over one kept-alive connection:
  create    POST /v1/sandboxes {}                       (the peer)
  fork      POST /v1/sandboxes/{src}/fork {}            (create + copy-on-write layers, or
                                                        capture + create + restore)
  snapshot  POST /v1/sandboxes/{src}/snapshot {}        (capture into the store, fsync)
  restore   POST /v1/sandboxes {"snapshot": id}         (digest check + create + restore)
Every sandbox made is stopped (untimed) before the next request; the snapshot is deleted
after its restore. One fork and one restore are checked: the digest of a file matches.
How each fork was made (copy-on-write or copied) is counted from the daemon's log.
"""
import argparse
import datetime
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
ap.add_argument("--mib", type=int, default=100)
ap.add_argument("--files", type=int, default=1000)
ap.add_argument("--runs", type=int, default=10)
ap.add_argument("--out")
args = ap.parse_args()
TOKEN = "bench-token"


def quant(xs, p):
    xs = sorted(xs)
    pos = p * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def timed(fn):
    t = time.perf_counter()
    v = fn()
    return (time.perf_counter() - t) * 1000, v


def sh(api, sbx, script):
    out = api.call("POST", f"/v1/sandboxes/{sbx}/commands",
                   {"cmd": "/bin/sh", "args": ["-c", script], "wait": True})
    lines = [json.loads(ln) for ln in out.strip().split(b"\n")]
    text = "".join(ln.get("data", "") for ln in lines if ln.get("type") == "stdout")
    if lines[-1]["command"]["exit_code"] != 0:
        raise RuntimeError(f"{script!r}: {lines[-1]}")
    return text


def start_daemon():
    state = tempfile.mkdtemp(prefix="airlock-bench-snap-")
    with open(os.path.join(state, "tokens"), "w") as f:
        f.write(f"{TOKEN} bench\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(os.path.join(state, "daemon.log"), "wb")
    d = subprocess.Popen([args.airlock, "serve", "--state-dir", os.path.join(state, "st"),
                          "--listen", f"127.0.0.1:{port}", "--tokens",
                          os.path.join(state, "tokens"), "--snapshot-max", "64G"],
                         stderr=log, stdout=log, stdin=subprocess.DEVNULL)
    for _ in range(150):
        try:
            ApiClient(port, TOKEN).call("GET", "/v1/health")
            return d, port, state
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("airlockd did not start")


def fork_modes(state):
    with open(os.path.join(state, "daemon.log"), errors="replace") as f:
        log = f.read()
    return {"cow": log.count(": copy-on-write"), "copied": log.count(": copied, not")}


def main():
    load = os.getloadavg()
    d, port, state = start_daemon()
    api = ApiClient(port, TOKEN, timeout=600)
    try:
        disk = f"{2 * args.mib + 64}M"
        src = api.create({"resources": {"disk": disk, "memory": "2G"}})
        per = args.mib * 1024 // args.files  # KiB per file
        sh(api, src, f"cd /workspace && for i in $(seq 1 {args.files}); do "
                     f"head -c {per}K /dev/urandom > f$i; done; sha256sum f{args.files}")
        want = sh(api, src, f"sha256sum /workspace/f{args.files}")
        res = {k: [] for k in ("create", "fork", "snapshot", "restore")}
        size = 0
        for i in range(args.runs):
            ms, sid = timed(lambda: api.create({"resources": {"disk": disk}}))
            res["create"].append(ms)
            api.stop(sid)
            ms, body = timed(lambda: api.call("POST", f"/v1/sandboxes/{src}/fork", {}))
            res["fork"].append(ms)
            fid = json.loads(body)["sandbox"]["id"]
            if i == 0 and sh(api, fid, f"sha256sum /workspace/f{args.files}") != want:
                raise RuntimeError("the fork's file differs")
            api.stop(fid)
            ms, body = timed(lambda: api.call("POST", f"/v1/sandboxes/{src}/snapshot", {}))
            res["snapshot"].append(ms)
            snap = json.loads(body)["snapshot"]
            size = snap["size_bytes"]
            ms, rid = timed(lambda: api.create({"snapshot": snap["id"]}))
            res["restore"].append(ms)
            if i == 0 and sh(api, rid, f"sha256sum /workspace/f{args.files}") != want:
                raise RuntimeError("the restored file differs")
            api.stop(rid)
            api.call("DELETE", f"/v1/snapshots/{snap['id']}")
        api.stop(src)
        modes = fork_modes(state)
    finally:
        d.terminate()
        d.wait(30)
        subprocess.run(["rm", "-rf", state])
    med = {k: statistics.median(v) for k, v in res.items()}
    out = {"date": datetime.datetime.utcnow().isoformat() + "Z", "mib": args.mib,
           "files": args.files, "runs": args.runs, "snapshot_bytes": size,
           "cpus": os.cpu_count(), "loadavg_at_start": load, "forks": modes,
           "median_ms": med, "p90_ms": {k: quant(v, 0.9) for k, v in res.items()},
           "ratio_to_create": {k: med[k] / med["create"] for k in med}}
    print(f"{args.mib} MiB in {args.files} files, {args.runs} rounds, "
          f"snapshot {size / 1048576:.1f} MiB; load average at start {load[0]:.2f}; "
          f"forks: {modes['cow']} copy-on-write, {modes['copied']} copied")
    for k in res:
        print(f"  {k:9s} median {med[k]:8.1f} ms  p90 {out['p90_ms'][k]:8.1f} ms  "
              f"x{out['ratio_to_create'][k]:.2f} of a create")
    path = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                    f"snapshot-{datetime.date.today()}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"-> {path}")


if __name__ == "__main__":
    sys.exit(main())
