"""Egress gateway benchmark (see bench/egress).

World: netns "albw-<pid>" holds 203.0.113.10 (HTTP :80 serving N zero bytes
with sendfile, TLS :443 accepting and holding connections) and 203.0.113.53
(a minimal UDP DNS answering every A query with 203.0.113.10) on its
loopback. Netns "albc-<pid>" is the plain client for the direct figures,
linked to the world by a veth (192.0.2.1 <-> 192.0.2.2). Sandboxes run with
`--upstream-netns albw-<pid> --upstream-dns 203.0.113.53`, so their gateway
dials from the world namespace; the direct client reaches the same servers
across one veth.
"""
import argparse
import datetime
import json
import os
import pathlib
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from pki import make_bench_pki  # bench/pki.py, next to this script

ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--quick", action="store_true", help="256 MiB transfers, fewer runs")
ap.add_argument("--runs", type=int, default=None, help="bulk transfers per mode")
ap.add_argument("--handshakes", type=int, default=200)
ap.add_argument("--dns-seconds", type=float, default=3.0)
ap.add_argument("--tunnels", default="1000,10000")
ap.add_argument("--out", help="JSON file (default bench/results/egress-<date>.json)")
ap.add_argument("--perf", action="store_true",
                help="bulk: count each transfer's CPU time, context switches and syscalls "
                     "with perf stat (the client side: curl, and airlock with its gateway)")
ap.add_argument("--only", default="bulk,handshake,dns,tunnels",
                help="sections to run, comma-separated (default: all four)")
args = ap.parse_args()

SIZE = (256 if args.quick else 1024) << 20
RUNS = args.runs or (3 if args.quick else 5)
PID = os.getpid()
NSW, NSC = f"albw-{PID}", f"albc-{PID}"
VC, VW = f"albc{PID}"[:15], f"albw{PID}"[:15]
WEB, DNS = "203.0.113.10", "203.0.113.53"
AIRLOCK = args.airlock
GATEWAY = str(pathlib.Path(AIRLOCK).parent / "airlock-gateway")
work = pathlib.Path(tempfile.mkdtemp(prefix="airlock-egress-", dir="/dev/shm"))
results = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "host": {"nproc": os.cpu_count(), "kernel": os.uname().release,
                    "loadavg": os.getloadavg()},
           "size_bytes": SIZE, "runs": RUNS, "commands": []}


def show(cmd):
    line = shlex.join(str(c) for c in cmd)
    print("  $ " + line, flush=True)
    results["commands"].append(line)


def sh(cmd, check=True, quiet=False, **kw):
    cmd = [str(c) for c in cmd]
    if not quiet:
        show(cmd)
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {shlex.join(cmd)}\n{r.stdout[-2000:]}"
                         f"\n{r.stderr[-2000:]}")
    return r


# ---------------------------------------------------------------------------
# the world

SERVERS = r'''
import asyncio, os, resource, socket, ssl, struct, sys, threading
work = sys.argv[1]
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (65536, 65536))
except (ValueError, OSError):
    h = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (h, h))
big = os.open(os.path.join(work, "big"), os.O_RDONLY)

def http_conn(c):
    try:
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(4096)
            if not d:
                return
            buf += d
        path = buf.split(b" ", 2)[1].decode()
        n = int(path.split("n=")[1]) if "n=" in path else 16
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n" % n)
        off = 0
        while off < n:
            off += os.sendfile(c.fileno(), big, off, min(n - off, 1 << 30))
    except OSError:
        pass
    finally:
        c.close()

def http():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("203.0.113.10", 80)); s.listen(512)
    while True:
        c, _ = s.accept()
        threading.Thread(target=http_conn, args=(c,), daemon=True).start()

def dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind(("203.0.113.53", 53))
    ans = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04" + socket.inet_aton("203.0.113.10")
    while True:
        q, peer = s.recvfrom(2048)
        if len(q) < 17:
            continue
        end = q.index(b"\x00", 12) + 5
        qtype = q[end - 4:end - 2]
        flags = struct.pack("!H", 0x8180)
        if qtype == b"\x00\x01":
            r = q[:2] + flags + b"\x00\x01\x00\x01\x00\x00\x00\x00" + q[12:end] + ans
        else:
            r = q[:2] + flags + b"\x00\x01\x00\x00\x00\x00\x00\x00" + q[12:end]
        s.sendto(r, peer)

async def tls_conn(reader, writer):
    try:
        await reader.read(1)
    except Exception:
        pass
    writer.close()

async def tls_main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(work, "server.pem"), os.path.join(work, "server.key"))
    srv = await asyncio.start_server(tls_conn, "203.0.113.10", 443, ssl=ctx, backlog=4096)
    open(os.path.join(work, "ready"), "w").write("ok")
    await srv.serve_forever()

threading.Thread(target=http, daemon=True).start()
threading.Thread(target=dns, daemon=True).start()
asyncio.run(tls_main())
'''

LATENCY = r'''
import json, socket, ssl, sys, time
mode, n, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
out = []
for i in range(n + 5):
    t = time.perf_counter()
    if mode == "proxy":
        s = socket.create_connection(("100.96.0.1", 3128))
        s.sendall(b"CONNECT bench.test:443 HTTP/1.1\r\nHost: bench.test:443\r\n\r\n")
        h = b""
        while b"\r\n\r\n" not in h:
            d = s.recv(4096)
            if not d:
                raise SystemExit("proxy closed: %r" % h)
            h += d
        assert b" 200 " in h.split(b"\r\n")[0], h
    else:
        s = socket.create_connection(("203.0.113.10", 443))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t2 = ctx.wrap_socket(s, server_hostname="bench.test")
    el = (time.perf_counter() - t) * 1000
    t2.close()
    if i >= 5:
        out.append(el)
print(json.dumps(out))
'''

DNSLOAD = r'''
import json, os, random, select, socket, struct, sys, time
server, name, secs, window = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
q = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.connect((server, 53))
ids = 0
def send():
    global ids
    ids = (ids + 1) & 0xffff
    s.send(struct.pack("!HHHHHH", ids, 0x0100, 1, 0, 0, 0) + q)
got, rcodes, sent = 0, {}, 0
end = time.perf_counter() + secs
for _ in range(window):
    send(); sent += 1
start = time.perf_counter()
while time.perf_counter() < end:
    r, _, _ = select.select([s], [], [], 0.05)
    if not r:
        for _ in range(window):     # refill after losses
            send(); sent += 1
        continue
    try:
        while True:
            d = s.recv(2048, socket.MSG_DONTWAIT)
            got += 1
            rc = d[3] & 15
            rcodes[rc] = rcodes.get(rc, 0) + 1
            send(); sent += 1
    except BlockingIOError:
        pass
el = time.perf_counter() - start
print(json.dumps({"answers": got, "sent": sent, "seconds": el, "qps": got / el,
                  "rcodes": rcodes}))
'''

TUNNELS = r'''
import json, resource, socket, ssl, sys, time
n, ca, hold = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
except ValueError:
    pass
print("BASE %d" % resource.getrlimit(resource.RLIMIT_NOFILE)[0], flush=True)
time.sleep(1.5)
ctx = ssl.create_default_context(cafile=ca)
ok, refused, errors, live = 0, 0, {}, []
t0 = time.perf_counter()
streak = 0          # failures in a row: the gateway stopped taking tunnels
stopped = None
for i in range(n):
    if streak >= 20 or time.perf_counter() - t0 > 150:
        stopped = "20 failures in a row" if streak >= 20 else "150 s set-up limit"
        break
    try:
        s = socket.create_connection(("100.96.0.1", 3128), timeout=5)
        s.sendall(b"CONNECT bench.test:443 HTTP/1.1\r\nHost: bench.test:443\r\n\r\n")
        h = b""
        while b"\r\n\r\n" not in h:
            d = s.recv(4096)
            if not d:
                raise ConnectionRefusedError("closed before the CONNECT reply")
            h += d
        t = ctx.wrap_socket(s, server_hostname="bench.test")
        live.append(t)
        ok += 1
        streak = 0
    except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
        refused += 1
        s.close()
    except OSError as e:
        k = type(e).__name__ + ":" + str(e)[:60]
        errors[k] = errors.get(k, 0) + 1
        streak += 1
        if "Too many open files" in str(e):
            stopped = "too many open files"
            break
setup = time.perf_counter() - t0
print("READY " + json.dumps({"attempted": i if stopped else n, "established": ok,
                             "refused": refused, "errors": errors, "setup_s": setup,
                             "stopped_early": stopped}), flush=True)
time.sleep(hold)
alive = 0
for t in live:
    t.setblocking(False)
    try:
        alive += t.recv(1) != b""
    except ssl.SSLWantReadError:
        alive += 1
    except OSError:
        pass
print("ALIVE %d" % alive, flush=True)
'''


def build_world():
    print("# the world", flush=True)
    sh(["truncate", "-s", str(SIZE), work / "big"])
    make_bench_pki(work, sh)
    for ns in (NSW, NSC):
        sh(["ip", "netns", "add", ns])
    sh(["ip", "link", "add", VC, "netns", NSC, "type", "veth", "peer", "name", VW,
        "netns", NSW])
    for ns, dev, addr in ((NSC, VC, "192.0.2.1/24"), (NSW, VW, "192.0.2.2/24")):
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        sh(["ip", "-n", ns, "addr", "add", addr, "dev", dev])
        sh(["ip", "-n", ns, "link", "set", dev, "up"])
    for a in (WEB, DNS):
        sh(["ip", "-n", NSW, "addr", "add", f"{a}/32", "dev", "lo"])
    sh(["ip", "-n", NSC, "route", "add", "203.0.113.0/24", "via", "192.0.2.2"])
    (work / "servers.py").write_text(SERVERS)
    for name, src in (("latency.py", LATENCY), ("dnsload.py", DNSLOAD),
                      ("tunnels.py", TUNNELS)):
        (work / name).write_text(src)
    show(["ip", "netns", "exec", NSW, sys.executable, work / "servers.py", work])
    srv = subprocess.Popen(["ip", "netns", "exec", NSW, sys.executable,
                            str(work / "servers.py"), str(work)],
                           stdout=open(work / "servers.log", "wb"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    for _ in range(200):
        if (work / "ready").exists():
            return srv
        if srv.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit("servers did not start: " + (work / "servers.log").read_text())


def destroy(srv):
    if srv and srv.poll() is None:
        os.killpg(srv.pid, signal.SIGKILL)
        srv.wait()
    for ns in (NSW, NSC):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                              text=True).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["rm", "-rf", str(work)])


def airlock(inner, allow=("bench.test",), files=(), log=None, extra=(), **kw):
    cmd = [AIRLOCK, "run", "--upstream-netns", NSW, "--upstream-dns", DNS,
           "--file", f"{work / 'ca.pem'}:/workspace/ca.pem"]
    for f in files:
        cmd += ["--file", f"{work / f}:/workspace/{f}"]
    for a in allow:
        cmd += ["--allow", a]
    if log:
        cmd += ["--egress-log", log]
    return [*cmd, *extra, "--", *inner]


def direct(inner):
    return ["ip", "netns", "exec", NSC, *inner]


def med(xs):
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------------------
# 1. bulk

PERF_EVENTS = ("task-clock,context-switches,syscalls:sys_enter_splice,syscalls:sys_enter_poll,"
               "raw_syscalls:sys_enter")


def perf_per_gib(path):
    """perf stat -x, output -> {event: count per GiB} (task-clock in ms)."""
    per = {}
    for ln in open(path):
        f = ln.strip().split(",")
        if len(f) > 2 and f[0] and f[0][0].isdigit():
            per[f[2].split(":")[-1]] = float(f[0]) * (1 << 30) / SIZE
    return per


CURL_BULK = ["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{speed_download}\\n"]


def bulk():
    print(f"\n# 1. bulk transfer of {SIZE >> 20} MiB, {RUNS} rounds, one transfer per mode "
          "each, the modes' order rotated round by round", flush=True)
    url = f"http://bench.test/big?n={SIZE}"
    modes = {
        "direct": direct([*CURL_BULK, "--resolve", f"bench.test:80:{WEB}", url]),
        "transparent": airlock([*CURL_BULK, "--noproxy", "*", url]),
        "http_proxy": airlock([*CURL_BULK, "-x", "http://100.96.0.1:3128", url]),
    }
    names = list(modes)
    speeds = {n: [] for n in names}
    counts = {n: [] for n in names}
    loads = []
    for rnd in range(RUNS):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        loads.append(os.getloadavg()[0])
        for name in order:
            cmd = modes[name]
            if args.perf:
                cmd = ["perf", "stat", "-x,", "-o", work / "perf.csv", "-e", PERF_EVENTS, "--",
                       *cmd]
            r = sh(cmd, timeout=600, quiet=rnd > 0)
            size, speed = r.stdout.split()
            if int(size) != SIZE:
                raise SystemExit(f"{name}: short transfer {size} of {SIZE}")
            speeds[name].append(float(speed) * 8 / 1e9)
            if args.perf:
                counts[name].append(perf_per_gib(work / "perf.csv"))
    out = {"loadavg_1min_per_round": loads}
    for name in names:
        xs = speeds[name]
        out[name] = {"gbit_s": xs, "median_gbit_s": med(xs)}
        print(f"    {name:12s} median {med(xs):6.2f} Gbit/s  runs {[round(x, 2) for x in xs]}",
              flush=True)
        if counts[name]:
            per = {k: med([c[k] for c in counts[name]]) for k in counts[name][0]}
            out[name]["per_gib_median"] = per
            out[name]["per_gib"] = counts[name]
            print("    " + " " * 12 + " per GiB: " +
                  "  ".join(f"{k} {v:.0f}" for k, v in per.items()), flush=True)
    for name in ("transparent", "http_proxy"):
        out[name]["ratio_vs_direct"] = out[name]["median_gbit_s"] / out["direct"]["median_gbit_s"]
        print(f"    {name} / direct = {out[name]['ratio_vs_direct']:.2f}", flush=True)
    print(f"    load average (1 min) at each round's start: {[round(x, 2) for x in loads]}",
          flush=True)
    results["bulk"] = out


# ---------------------------------------------------------------------------
# 2. handshake latency

def latency():
    n = args.handshakes
    print(f"\n# 2. CONNECT + TLS handshake vs direct TLS handshake, {n} each", flush=True)
    r1 = sh(direct([sys.executable, work / "latency.py", "direct", n, work / "ca.pem"]))
    d = json.loads(r1.stdout)
    r2 = sh(airlock([sys.executable, "/workspace/latency.py", "proxy", n, "/workspace/ca.pem"],
                    files=["latency.py"]), timeout=300)
    p = json.loads(r2.stdout.strip().splitlines()[-1])
    # The gateway's own cost without a handshake: plain TCP connect + CONNECT reply.
    out = {"direct_ms": {"median": med(d), "p90": sorted(d)[int(len(d) * .9)]},
           "proxy_ms": {"median": med(p), "p90": sorted(p)[int(len(p) * .9)]},
           "added_ms_median": med(p) - med(d), "n": n}
    print(f"    direct {med(d):.3f} ms  via proxy {med(p):.3f} ms  added {out['added_ms_median']:.3f} ms",
          flush=True)
    results["handshake"] = out


# ---------------------------------------------------------------------------
# 3. DNS

def dnsqps():
    secs = args.dns_seconds
    print(f"\n# 3. DNS queries/s ({secs:.0f} s each, 64 in flight, one client process)", flush=True)
    out = {}
    cases = [("gateway_denied", "nope.test", True), ("gateway_allowed", "bench.test", True),
             ("upstream_direct", "bench.test", False)]
    for name, qname, through in cases:
        log = work / f"dns-{name}.jsonl"
        if through:
            cmd = airlock([sys.executable, "/workspace/dnsload.py", "100.96.0.1", qname,
                           secs, 64], files=["dnsload.py"], log=log)
        else:
            cmd = direct([sys.executable, work / "dnsload.py", DNS, qname, secs, 64])
        r = sh(cmd, timeout=120)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        if through:
            reasons = {}
            for ln in open(log):
                e = json.loads(ln)
                k = e.get("reason") or ("suppressed" if "suppressed" in e else "?")
                reasons[k] = reasons.get(k, 0) + (e.get("suppressed") or 1)
            res["log_reasons"] = reasons
        out[name] = res
        print(f"    {name:16s} {res['qps']:9.0f} q/s  rcodes {res['rcodes']}  "
              f"log {res.get('log_reasons', '-')}", flush=True)
    results["dns"] = out


# ---------------------------------------------------------------------------
# 4. idle tunnels

def mem_of(pid):
    m = {}
    try:
        for ln in open(f"/proc/{pid}/status"):
            if ln.startswith(("VmRSS", "Threads")):
                k, v = ln.split(":")
                m[k] = int(v.split()[0])
        for ln in open(f"/proc/{pid}/smaps_rollup"):
            if ln.startswith("Pss:"):
                m["Pss"] = int(ln.split()[1])
    except OSError:
        return None
    return {"rss_kib": m.get("VmRSS"), "pss_kib": m.get("Pss"), "threads": m.get("Threads")}


def find_gateway():
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"airlock-gateway") and NSW.encode() in argv:
            return int(d)
    return None


def tunnels():
    out = {}
    for n in [int(x) for x in args.tunnels.split(",") if x]:
        print(f"\n# 4. {n} idle CONNECT+TLS tunnels", flush=True)
        log = work / f"tunnels-{n}.jsonl"
        # The gateway's capacity, not a sandbox's budget: the connections a gateway serves
        # follow the sandbox's limits (1 per MiB of memory, 4 per pid: 1,024 at the
        # defaults), so the sandbox gets room for n. A gateway of its own (--fresh-netns),
        # whose command line names the upstream namespace: a recycled pair's gateway was
        # started before the run and is not told it until claimed (find_gateway).
        cmd = airlock([sys.executable, "/workspace/tunnels.py", n, "/workspace/ca.pem", 3],
                      files=["tunnels.py"], log=log,
                      extra=("--no-pool", "--fresh-netns", "--memory", f"{n + 1024}M",
                             "--pids", str(n // 4 + 512)))
        show(cmd)
        p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        rec = {"attempted": n}
        for ln in p.stdout:
            if ln.startswith("BASE"):
                time.sleep(0.5)
                gw = find_gateway()
                rec["gateway_pid"] = gw
                rec["idle_gateway"] = mem_of(gw) if gw else None
                rec["sandbox_nofile"] = int(ln.split()[1])
            elif ln.startswith("READY"):
                rec.update(json.loads(ln[6:]))
                time.sleep(0.5)
                gw = find_gateway()
                rec["loaded_gateway"] = mem_of(gw) if gw else None
            elif ln.startswith("ALIVE"):
                rec["alive_after_hold"] = int(ln.split()[1])
        p.wait(timeout=120)
        rec["stderr"] = p.stderr.read()[-500:]
        entries = []
        try:
            entries = [json.loads(x) for x in open(log) if x.strip()]
        except OSError:
            pass
        rec["log_too_many_connections"] = sum(e.get("reason") == "too_many_connections"
                                              for e in entries)
        rec["log_lines"] = len(entries)
        rec["log_suppressed"] = sum(e.get("suppressed") or 0 for e in entries)
        lg, ig = rec.get("loaded_gateway") or {}, rec.get("idle_gateway") or {}
        if lg and ig and rec.get("established"):
            rec["pss_kib_per_tunnel"] = (lg["pss_kib"] - ig["pss_kib"]) / rec["established"]
        out[str(n)] = rec
        print(f"    established {rec.get('established')}  refused {rec.get('refused')}  "
              f"errors {rec.get('errors')}  too_many_connections lines "
              f"{rec['log_too_many_connections']} (+{rec['log_suppressed']} suppressed)  alive after 3 s {rec.get('alive_after_hold')}"
              + (f"  (stopped early: {rec['stopped_early']} after {rec['attempted']} attempts)"
                 if rec.get("stopped_early") else ""), flush=True)
        print(f"    gateway idle {ig}  with tunnels {lg}", flush=True)
    results["tunnels"] = out


srv = None
try:
    srv = build_world()
    only = set(args.only.split(","))
    for name, fn in (("bulk", bulk), ("handshake", latency), ("dns", dnsqps),
                     ("tunnels", tunnels)):
        if name in only:
            fn()
finally:
    destroy(srv)

if args.out:
    path = pathlib.Path(args.out)
else:
    stamp = datetime.datetime.utcnow().strftime("%Y%m%d-%H%M%S")
    res_dir = pathlib.Path(__file__).resolve().parent / "results"
    res_dir.mkdir(exist_ok=True)
    path = res_dir / f"egress-{stamp}.json"
results["host"]["loadavg_end"] = os.getloadavg()
path.write_text(json.dumps(results, indent=1) + "\n")
print(f"\nresults: {path}")
