"""The interactive PTY and the preview proxy (see bench/pty_ports).

echo   one byte typed into `cat` on a PTY, timed until its echo comes back:
         airlock  a WebSocket session (POST /v1/sandboxes/{id}/pty, then the socket):
                  frame -> airlockd -> agent -> the sandbox's PTY (line discipline echo)
                  -> agent -> airlockd -> frame
         host     `script -qfc cat /dev/null` on the host: pipe -> script -> PTY -> back
proxy  GET / of a directory listing by Python's http.server, a fresh connection each:
         airlock  through the preview URL /preview/<sandbox>/8000/ (airlockd connects inside
                  the sandbox's network namespace, HTTP/1.0 upstream, streams the answer)
         host     the same server program on the host's loopback, directly
Pairs alternate (airlock, host) so drift hits both; medians over all runs.
"""
import argparse
import base64
import datetime
import http.client
import json
import os
import secrets
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from apiclient import ApiClient

ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--runs", type=int, default=300)
ap.add_argument("--out")
args = ap.parse_args()
TOKEN = "bench-token"


def quant(xs, p):
    xs = sorted(xs)
    pos = p * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WS:
    """A minimal client of the PTY's WebSocket (masked frames out, frames in)."""

    def __init__(self, url, token):
        hostport, path = url[len("ws://"):].split("/", 1)
        host, port = hostport.split(":")
        self.s = socket.create_connection((host, int(port)))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        self.s.sendall(f"GET /{path}?token={token} HTTP/1.1\r\nHost: {hostport}\r\n"
                       f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}"
                       f"\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.s.recv(4096)
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        assert b" 101 " in head.split(b"\r\n")[0], head

    def send(self, op, payload):
        k = secrets.token_bytes(4)
        self.s.sendall(bytes([0x80 | op, 0x80 | len(payload)]) + k +
                       bytes(c ^ k[i & 3] for i, c in enumerate(payload)))

    def recv_data(self):
        while True:
            while len(self.buf) < 2 or len(self.buf) < 2 + (self.buf[1] & 0x7f):
                self.buf += self.s.recv(65536)
            n = self.buf[1] & 0x7f
            op, p = self.buf[0] & 0x0f, self.buf[2:2 + n]
            self.buf = self.buf[2 + n:]
            if op == 2:
                return p


def echo_airlock(ws, ch):
    t = time.perf_counter()
    ws.send(2, ch)
    got = b""
    while ch not in got:
        got += ws.recv_data()
    return (time.perf_counter() - t) * 1000


def echo_host(proc, ch):
    t = time.perf_counter()
    os.write(proc.stdin.fileno(), ch)
    got = b""
    while ch not in got:
        got += os.read(proc.stdout.fileno(), 4096)
    return (time.perf_counter() - t) * 1000


def get_ms(port, path):
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    assert r.status == 200 and b"Directory listing" in body, (r.status, body[:200])
    return (time.perf_counter() - t) * 1000


def summary(xs):
    return {"median_ms": round(statistics.median(xs), 4), "p95_ms": round(quant(xs, 0.95), 4),
            "n": len(xs)}


def main():
    state = tempfile.mkdtemp(prefix="airlock-bench-pty-")
    with open(os.path.join(state, "tokens"), "w") as f:
        f.write(f"{TOKEN} bench\n")
    port = free_port()
    log = open(os.path.join(state, "daemon.log"), "wb")
    daemon = subprocess.Popen([args.airlock, "serve", "--state-dir", os.path.join(state, "st"),
                               "--listen", f"127.0.0.1:{port}", "--tokens",
                               os.path.join(state, "tokens")], stderr=log,
                              stdin=subprocess.DEVNULL)
    host_srv = script = None
    try:
        for _ in range(100):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/v1/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.05)
        api = ApiClient(port, TOKEN)
        sbx = json.loads(api.call("POST", "/v1/sandboxes", {"ports": [8000]}))["sandbox"]["id"]
        api.call("POST", f"/v1/sandboxes/{sbx}/commands",
                 {"cmd": "python3", "args": ["-m", "http.server", "8000", "--bind", "127.0.0.1"]})
        hport = free_port()
        host_srv = subprocess.Popen(["python3", "-m", "http.server", str(hport), "--bind",
                                     "127.0.0.1"], cwd=state, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        t = json.loads(api.call("POST", f"/v1/sandboxes/{sbx}/pty"))
        ws = WS(t["url"], t["token"])
        ws.send(1, json.dumps({"type": "start", "command": "cat", "args": [],
                               "env": ["TERM=dumb"], "cols": 80, "rows": 24}).encode())
        script = subprocess.Popen(["script", "-qfc", "cat", "/dev/null"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, bufsize=0)
        deadline = time.monotonic() + 15
        while True:  # both servers up
            try:
                get_ms(port, f"/preview/{sbx}/8000/")
                get_ms(hport, "/")
                break
            except (AssertionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        for i in range(20):  # warm-up
            echo_airlock(ws, b"w")
            echo_host(script, b"w")
        ea, eh, pa, ph = [], [], [], []
        for i in range(args.runs):
            ch = bytes([ord("a") + i % 26])
            ea.append(echo_airlock(ws, ch))
            eh.append(echo_host(script, ch))
            pa.append(get_ms(port, f"/preview/{sbx}/8000/"))
            ph.append(get_ms(hport, "/"))
        res = {"echo_airlock": summary(ea), "echo_host_script": summary(eh),
               "echo_ratio": round(statistics.median(ea) / statistics.median(eh), 2),
               "proxy_airlock": summary(pa), "proxy_host_direct": summary(ph),
               "proxy_ratio": round(statistics.median(pa) / statistics.median(ph), 2),
               "proxy_overhead_ms": round(statistics.median(pa) - statistics.median(ph), 4),
               "runs": args.runs, "host": os.uname().nodename,
               "raw": {"echo_airlock": ea, "echo_host": eh, "proxy_airlock": pa,
                       "proxy_host": ph}}
        for k in ("echo_airlock", "echo_host_script", "proxy_airlock", "proxy_host_direct"):
            print(f"{k:20} median {res[k]['median_ms']:.3f} ms  p95 {res[k]['p95_ms']:.3f} ms")
        print(f"echo ratio {res['echo_ratio']}x  proxy ratio {res['proxy_ratio']}x  "
              f"(+{res['proxy_overhead_ms']:.3f} ms)")
        out = args.out or os.path.join(os.path.dirname(__file__), "results",
                                       "pty_ports-" + datetime.datetime.utcnow()
                                       .strftime("%Y%m%d-%H%M%S") + ".json")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)
        api.call("POST", f"/v1/sandboxes/{sbx}/stop")
    finally:
        for p in (script, host_srv):
            if p:
                p.kill()
        daemon.terminate()
        daemon.wait(10)


main()
