"""Per-request rules benchmark (see bench/rules): TLS termination vs the splice path.

World: netns "albr-<pid>" holds 203.0.113.10 (HTTPS :443, a small body per
request, certificate from a throwaway CA) and 203.0.113.53 (UDP DNS answering
every A query with 203.0.113.10). Sandboxes run with --upstream-netns and
--upstream-dns pointing there, and --upstream-ca the world's CA.

Figures, all in one run:
  1. latency of one HTTPS request on a new connection (median, p90), and
     requests/s with 4 client threads, for: splice (allow ["bench.test"]) and
     terminated (a transform rule on bench.test), through the transparent path;
  2. the cost of minting a leaf certificate and of making a sandbox CA
     (the C functions in src/gateway/ca.c, timed in-process);
  3. host memory per sandbox CA: RSS growth of a process holding 200 CAs,
     each with 0 and with 16 cached leaves.
"""
import argparse
import datetime
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from pki import make_bench_pki  # bench/pki.py, next to this script

ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--requests", type=int, default=300, help="sequential requests per mode")
ap.add_argument("--seconds", type=float, default=3.0, help="duration of the 4-thread run")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--out")
args = ap.parse_args()
if args.quick:
    args.requests, args.seconds = 60, 1.0

PID = os.getpid()
NS = f"albr-{PID}"
WEB, DNS = "203.0.113.10", "203.0.113.53"
AIRLOCK = args.airlock
ROOT = pathlib.Path(__file__).resolve().parent.parent
work = pathlib.Path(tempfile.mkdtemp(prefix="airlock-rules-", dir="/dev/shm"))
results = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "host": {"nproc": os.cpu_count(), "kernel": os.uname().release,
                    "loadavg": os.getloadavg()}, "commands": []}

SERVERS = r'''
import http.server, socket, socketserver, ssl, sys, threading, pathlib
w = pathlib.Path(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        body = b"x" * 512
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(w / "server.pem", w / "server.key")
s = S(("203.0.113.10", 443), H)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
threading.Thread(target=s.serve_forever, daemon=True).start()
def dns():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("203.0.113.53", 53))
    while True:
        q, peer = u.recvfrom(512)
        # header: id, flags=response+RD+RA, 1 question, 1 answer
        qend = 12
        while q[qend]:
            qend += q[qend] + 1
        qend += 5
        ans = (b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04" +
               socket.inet_aton("203.0.113.10"))
        u.sendto(q[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00" + q[12:qend] + ans, peer)
threading.Thread(target=dns, daemon=True).start()
(w / "ready").write_text("ok")
threading.Event().wait()
'''

CLIENT = r'''
import json, socket, ssl, sys, threading, time
n, secs = int(sys.argv[1]), float(sys.argv[2])
ctx = ssl.create_default_context(cafile="/tmp/all.pem")
def one():
    s = socket.create_connection(("bench.test", 443), timeout=10)
    t = ctx.wrap_socket(s, server_hostname="bench.test")
    t.sendall(b"GET /b HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        c = t.recv(65536)
        if not c:
            break
        data += c
    t.close()
    assert b" 200 " in data.split(b"\r\n")[0], data[:100]
for _ in range(5):
    one()
lat = []
for _ in range(n):
    t0 = time.perf_counter()
    one()
    lat.append((time.perf_counter() - t0) * 1e3)
done = [0]
stop = time.monotonic() + secs
def worker():
    while time.monotonic() < stop:
        one()
        done[0] += 1
ts = [threading.Thread(target=worker) for _ in range(4)]
t0 = time.monotonic()
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"lat_ms": lat, "rps": done[0] / (time.monotonic() - t0)}))
'''

CA_BENCH = r'''
#include "gateway/ca.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/x509.h>
#include <openssl/evp.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static long rss_kib(void) { FILE *f = fopen("/proc/self/statm", "r"); long a, b;
  if (fscanf(f, "%ld %ld", &a, &b) != 2) b = 0; fclose(f); return b * (sysconf(_SC_PAGESIZE) / 1024); }
int main(int argc, char **argv) {
  const char *dir = argv[1]; int n = atoi(argv[2]);
  struct net_ca *ca; struct al_error *err = NULL; char name[64], sub[600];
  double t0 = now();
  const char *names[] = {"bench.test"};
  if (net_ca_open(dir, "bench", names, 1, 0, &ca, &err) < 0) { puts("ca failed"); return 1; }
  double make = now() - t0;
  t0 = now();
  for (int i = 0; i < n; i++) { void *x, *k; snprintf(name, sizeof name, "h%d.bench.test", i % 256);
    if (i % 256 == 0) net_ca_drop_leaves(ca);
    net_ca_leaf(ca, name, &x, &k, &err); X509_free(x); EVP_PKEY_free(k); }
  double mint = (now() - t0) / n;
  t0 = now();
  for (int i = 0; i < n; i++) { void *x, *k; net_ca_leaf(ca, "h1.bench.test", &x, &k, &err);
    X509_free(x); EVP_PKEY_free(k); }
  double hit = (now() - t0) / n;
  net_ca_free(ca);
  /* memory: 200 CAs, then 16 leaves each */
  struct net_ca *cas[200]; long r0 = rss_kib();
  for (int i = 0; i < 200; i++) { snprintf(sub, sizeof sub, "%s/m%d", dir, i);
    net_ca_open(sub, "bench", names, 1, 0, &cas[i], &err); }
  long r1 = rss_kib();
  for (int i = 0; i < 200; i++) for (int j = 0; j < 16; j++) { void *x, *k;
    snprintf(name, sizeof name, "h%d.bench.test", j); net_ca_leaf(cas[i], name, &x, &k, &err);
    X509_free(x); EVP_PKEY_free(k); }
  long r2 = rss_kib();
  printf("{\"make_ca_ms\": %.3f, \"mint_leaf_ms\": %.4f, \"cached_leaf_ms\": %.5f, "
         "\"kib_per_ca\": %.1f, \"kib_per_ca_with_16_leaves\": %.1f}\n", make, mint, hit,
         (r1 - r0) / 200.0, (r2 - r0) / 200.0);
  return 0;
}
'''


def show(cmd):
    s = " ".join(str(c) for c in cmd)
    results["commands"].append(s)
    print("  $ " + (s if len(s) < 300 else s[:300] + " ..."), flush=True)


def sh(cmd, check=True, quiet=False, **kw):
    if not quiet:
        show(cmd)
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {cmd}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


def build_world():
    make_bench_pki(work, sh)
    sh(["ip", "netns", "add", NS])
    sh(["ip", "-n", NS, "link", "set", "lo", "up"])
    for a in (WEB, DNS):
        sh(["ip", "-n", NS, "addr", "add", f"{a}/32", "dev", "lo"])
    (work / "servers.py").write_text(SERVERS)
    (work / "client.py").write_text(CLIENT)
    srv = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, str(work / "servers.py"),
                            str(work)], stdout=open(work / "servers.log", "wb"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    for _ in range(200):
        if (work / "ready").exists():
            return srv
        time.sleep(0.05)
    raise SystemExit("servers did not start: " + (work / "servers.log").read_text())


def destroy(srv):
    if srv and srv.poll() is None:
        os.killpg(srv.pid, signal.SIGKILL)
        srv.wait()
    for p in subprocess.run(["ip", "netns", "pids", NS], capture_output=True,
                            text=True).stdout.split():
        try:
            os.kill(int(p), signal.SIGKILL)
        except OSError:
            pass
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["rm", "-rf", str(work)])


def run_mode(name, policy):
    pf = work / f"{name}.json"
    pf.write_text(json.dumps(policy))
    cmd = [AIRLOCK, "run", "--upstream-netns", NS, "--upstream-dns", DNS,
           "--upstream-ca", work / "ca.pem", "--policy", pf,
           "--file", f"{work / 'ca.pem'}:/workspace/ca.pem",
           "--file", f"{work / 'client.py'}:/workspace/client.py", "--",
           "/bin/sh", "-c",
           "cat /etc/ssl/certs/ca-certificates.crt /workspace/ca.pem "
           "$(ls /etc/airlock/ca.pem 2>/dev/null) > /tmp/all.pem && "
           f"/usr/bin/python3 /workspace/client.py {args.requests} {args.seconds}"]
    r = sh(cmd, timeout=600)
    d = json.loads(r.stdout.strip().splitlines()[-1])
    lat = sorted(d["lat_ms"])
    return {"median_ms": statistics.median(lat), "p90_ms": lat[int(len(lat) * .9)],
            "rps_4_threads": d["rps"], "n": len(lat)}


def bench_ca():
    src = work / "ca_bench.c"
    src.write_text(CA_BENCH)
    exe = work / "ca_bench"
    sh(["cc", "-O2", "-D_GNU_SOURCE", "-I", ROOT / "include", "-I", ROOT / "src", src,
        ROOT / "src/gateway/ca.c", ROOT / "src/common/error.c", ROOT / "src/common/xalloc.c",
        "-lcrypto", "-lpthread", "-o", exe])
    (work / "cas").mkdir()
    r = sh([exe, work / "cas", 2000])
    return json.loads(r.stdout)


srv = None
try:
    srv = build_world()
    print("\n# 1. one HTTPS request per connection, transparent path", flush=True)
    modes = {}
    order = [("splice", {"allow": ["bench.test"]}),
             ("terminated", {"allow": {"bench.test": [
                 {"transform": [{"headers": {"Authorization": "Bearer bench-secret-0123"}}]}]}})]
    for rnd in range(2):                      # alternate, two rounds each
        for name, pol in (order if rnd == 0 else order[::-1]):
            m = run_mode(name, pol)
            modes.setdefault(name, []).append(m)
    out = {}
    for name, ms in modes.items():
        out[name] = {"median_ms": statistics.median(m["median_ms"] for m in ms),
                     "p90_ms": statistics.median(m["p90_ms"] for m in ms),
                     "rps_4_threads": statistics.median(m["rps_4_threads"] for m in ms),
                     "rounds": ms}
        print(f"    {name:11s} median {out[name]['median_ms']:.3f} ms  p90 "
              f"{out[name]['p90_ms']:.3f} ms  {out[name]['rps_4_threads']:.0f} req/s (4 threads)",
              flush=True)
    out["added_ms_median"] = out["terminated"]["median_ms"] - out["splice"]["median_ms"]
    out["rps_ratio_terminated_vs_splice"] = (out["terminated"]["rps_4_threads"] /
                                             out["splice"]["rps_4_threads"])
    print(f"    terminated adds {out['added_ms_median']:.3f} ms per request; "
          f"req/s ratio terminated/splice {out['rps_ratio_terminated_vs_splice']:.2f}")
    results["requests"] = out
    print("\n# 2-3. the sandbox CA: making one, minting a leaf, memory", flush=True)
    results["ca"] = bench_ca()
    c = results["ca"]
    print(f"    make CA {c['make_ca_ms']:.3f} ms  mint leaf {c['mint_leaf_ms']:.3f} ms  "
          f"cached leaf {c['cached_leaf_ms'] * 1000:.2f} us  memory {c['kib_per_ca']:.1f} KiB/CA "
          f"({c['kib_per_ca_with_16_leaves']:.1f} KiB with 16 leaves)")
finally:
    destroy(srv)

path = pathlib.Path(args.out) if args.out else (
    ROOT / "bench" / "results" /
    f"rules-{datetime.datetime.utcnow().strftime('%Y%m%d-%H%M%S')}.json")
path.parent.mkdir(exist_ok=True)
path.write_text(json.dumps(results, indent=1) + "\n")
print(f"\nresults: {path}")
