"""airlock-oci vs runc vs crun under podman and containerd (see bench/oci)."""
import argparse
import datetime
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REAPER = HERE.parent / "tests" / "integration" / "oci" / "reaper.py"
ap = argparse.ArgumentParser()
ap.add_argument("airlock_oci")
ap.add_argument("--runs", type=int, default=20)
ap.add_argument("--out")
args = ap.parse_args()

work = pathlib.Path(tempfile.mkdtemp(prefix="airlock-bench-oci-"))
IMAGE = "localhost/airlock-bench-oci:1"
results = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "host": {"nproc": os.cpu_count(), "kernel": os.uname().release,
                    "loadavg": os.getloadavg()}, "runs": args.runs, "figures": {},
           "failures": {}}


def make_rootfs():
    root = work / "rootfs"
    for d in ("bin", "etc", "tmp", "proc", "dev", "sys"):
        (root / d).mkdir(parents=True)
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    for a in ("sh", "true", "echo", "sleep"):
        os.symlink("busybox", root / "bin" / a)
    for f in ("passwd", "group", "hosts", "hostname", "resolv.conf"):
        (root / "etc" / f).write_text("root:x:0:0::/:/bin/sh\n" if f == "passwd" else "")
    return root


def podman_base(runtime):
    return ["podman", "--root", str(work / "store"), "--runroot", str(work / "run"),
            "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend",
            "file", "--runtime", runtime]


def first_output(cmd):
    """Seconds from the engine's start to the first byte on its stdout, and in all."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    first = p.stdout.read(1)
    t1 = time.monotonic()
    p.stdout.read()
    err = p.stderr.read()
    rc = p.wait()
    if rc != 0 or first != b"r":
        raise RuntimeError(err.decode(errors="replace")[-300:] or "exit %d" % rc)
    return t1 - t0, time.monotonic() - t0


def timed(cmd):
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode(errors="replace")[-300:])
    return time.monotonic() - t0


def start_containerd():
    d = work / "ctd"
    d.mkdir()
    (d / "config.toml").write_text(
        'version = 2\nroot = "%s/root"\nstate = "%s/state"\n[grpc]\n  address = "%s/c.sock"\n'
        '[ttrpc]\n  address = "%s/c.sock.ttrpc"\n' % (d, d, d, d))
    log = open(d / "log", "w")
    p = subprocess.Popen(["containerd", "--config", str(d / "config.toml")], stdout=log,
                         stderr=log, start_new_session=True)
    for _ in range(400):
        if (d / "c.sock").exists():
            break
        time.sleep(0.05)
    return p, str(d / "c.sock")


def main():
    runtimes = {"airlock-oci": args.airlock_oci}
    for name in ("runc", "crun"):
        if shutil.which(name):
            runtimes[name] = shutil.which(name)
    rootfs = make_rootfs()
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(podman_base(args.airlock_oci) + ["import", "-", IMAGE], stdin=tar.stdout,
                   check=True, capture_output=True)
    tar.wait()
    ctd, sock = start_containerd()
    n = [0]

    def cid():
        n[0] += 1
        return "b%d" % n[0]

    benches = {
        "podman run --rm true": lambda rt: timed(
            podman_base(rt) + ["run", "--rm", "--network", "none", "--ulimit",
                               "nofile=1024:1024", "--ulimit", "nproc=4096:4096", IMAGE, "true"]),
        "ctr run --rm true": lambda rt: timed(
            ["ctr", "-a", sock, "run", "--rm", "--rootfs", "--runc-binary", rt, str(rootfs),
             cid(), "/bin/true"]),
        "podman: start to first output": lambda rt: first_output(
            podman_base(rt) + ["run", "--rm", "--network", "none", "--ulimit",
                               "nofile=1024:1024", "--ulimit", "nproc=4096:4096", IMAGE, "echo", "ready"])[0],
        "ctr: start to first output": lambda rt: first_output(
            ["ctr", "-a", sock, "run", "--rm", "--rootfs", "--runc-binary", rt, str(rootfs),
             cid(), "/bin/echo", "ready"])[0],
        "runtime alone: create+start+wait+delete": lambda rt: runtime_alone(rt, rootfs),
    }
    samples = {b: {r: [] for r in runtimes} for b in benches}
    try:
        for b, fn in benches.items():
            for name, rt in list(runtimes.items()):
                try:
                    fn(rt)  # warm-up, and the probe whether it runs here at all
                except Exception as e:  # noqa: BLE001
                    results["failures"]["%s / %s" % (b, name)] = str(e)
                    print("  %s cannot run %r here: %s" % (name, b, str(e).strip()[-200:]))
                    samples[b].pop(name)
            for _ in range(args.runs):
                for name in list(samples[b]):  # alternated run by run
                    samples[b][name].append(fn(runtimes[name]) * 1e3)
    finally:
        os.killpg(ctd.pid, signal.SIGTERM)
        ctd.wait()
        subprocess.run(podman_base(args.airlock_oci) + ["rm", "-af"], capture_output=True)
        subprocess.run(["umount", "-R", str(work / "ctd" / "state")], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    report(samples)


def runtime_alone(rt, rootfs):
    b = work / "bundle"
    if not b.exists():
        b.mkdir()
        (b / "config.json").write_text(json.dumps({
            "ociVersion": "1.0.2", "root": {"path": str(rootfs), "readonly": True},
            "process": {"args": ["true"], "cwd": "/", "env": ["PATH=/bin"],
                        "user": {"uid": 0, "gid": 0},
                        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]},
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
            "linux": {"namespaces": [{"type": t} for t in
                                     ("pid", "network", "ipc", "uts", "mount")]}}))
    res = work / "r.json"
    t0 = time.monotonic()
    subprocess.run([sys.executable, str(REAPER), str(res), rt, str(work / ("root-" +
                    os.path.basename(rt))), str(b), "alone"], check=True, capture_output=True)
    r = json.loads(res.read_text())
    if r.get("status") != 0:
        raise RuntimeError(r.get("create_err") or "exit %s" % r.get("status"))
    return time.monotonic() - t0


def report(samples):
    for b, per in samples.items():
        print("\n%s (ms, median (min-max), n=%d)" % (b, args.runs))
        base = statistics.median(per["airlock-oci"]) if per.get("airlock-oci") else None
        for name, xs in per.items():
            if not xs:
                continue
            med = statistics.median(xs)
            ratio = med / base if base else float("nan")
            print("  %-12s %8.2f (%.2f-%.2f)  x%.2f" % (name, med, min(xs), max(xs), ratio))
            results["figures"]["%s / %s" % (b, name)] = {
                "median_ms": med, "min_ms": min(xs), "max_ms": max(xs), "n": len(xs),
                "ratio_to_airlock": ratio, "samples": xs}
    out = args.out or str(HERE / "results" / ("oci-%s.json" % time.strftime("%Y%m%d-%H%M%S")))
    pathlib.Path(out).parent.mkdir(exist_ok=True)
    pathlib.Path(out).write_text(json.dumps(results, indent=1))
    print("\nresults: %s" % out)


if __name__ == "__main__":
    main()
