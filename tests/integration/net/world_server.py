"""The fake internet's servers, run inside the "internet" network namespace.

    /usr/bin/python3 world_server.py STATE_DIR

STATE_DIR holds server.pem/server.key (made by the conftest).  Every event
(a DNS query, a TCP accept, a TLS handshake, an HTTP request, a UDP datagram)
is appended as one JSON line to STATE_DIR/events.jsonl; the tests read that
file.  When every socket is bound the server writes STATE_DIR/ready.

Servers (all bound to one address each; see README.md for the topology):
  dns      203.0.113.53:53 udp+tcp   fake authoritative resolver (dnslib)
  allowed  203.0.113.10:80 http, :443 https      body "allowed-web ..."
  denied   198.51.100.20:80 http, :443 https, tcp 22/853/4444 raw sinks,
           udp 53/443/853/4444 sinks             body "denied-web ..."
  pubdns   198.51.100.53:53 udp+tcp  a decoy "public resolver": logs, answers
  meta     169.254.169.254:80 http   fake cloud metadata (returns a canary)
  cidr     198.51.100.130:80 http    a host reached only by --allow-cidr
  lan      10.0.0.5:80 http          a "LAN" host
  loop     127.0.0.1:80 http         the world's own loopback (rebinding decoy)
  quic     203.0.113.10 udp 443/853  sinks (QUIC / DoT to the allowed host)
"""

import base64
import gzip
import http.server
import json
import os
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import threading
import time

from dnslib import AAAA, A, CNAME, QTYPE, RCODE, RR, TXT, DNSRecord

STATE = sys.argv[1]
EVENTS = os.path.join(STATE, "events.jsonl")
_lock = threading.Lock()

DNS_TTL = 5
ZONE = {
    "allowed.test": {"A": ["203.0.113.10"], "AAAA": ["2001:db8:a::10"],
                     "TXT": ["v=allowed"]},
    "wild.test": {"A": ["203.0.113.10"]},
    "denied.test": {"A": ["198.51.100.20"]},
    "rebind.test": {"A": ["127.0.0.1"]},
    "meta.test": {"A": ["169.254.169.254"]},
    "private.test": {"A": ["10.0.0.5"]},
    "mixed.test": {"A": ["127.0.0.1", "203.0.113.10"]},
    "gw.test": {"A": ["100.96.0.1"]},
    "v6only.test": {"AAAA": ["2001:db8:a::10"]},
}


def last_rx(sock):
    """When the last segment of a TCP connection arrived (time.time() scale): its
    handshake's last ACK for an accepted connection that has sent nothing yet. TCP_INFO's
    tcpi_last_ack_recv (ms ago, at 4 ms jiffies) is read at once; None where it is
    unreadable. An accept (or the thread that serves it) can run well after the
    connection was made on a loaded host: this is when it reached us."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        now = time.time()
        ago_ms = struct.unpack_from("=I", info, 8 + 12 * 4)[0]
        return now - ago_ms / 1000.0
    except (OSError, struct.error):
        return None


def event(**kw):
    kw["t"] = time.time()
    line = json.dumps(kw, sort_keys=True) + "\n"
    with _lock:
        # O_APPEND on every write: the tests truncate the file to reset it.
        fd = os.open(EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def zone_lookup(name):
    name = name.lower().rstrip(".")
    if name in ZONE:
        return ZONE[name]
    if name.endswith(".wild.test"):
        return {"A": ["203.0.113.10"]}
    return None


def dns_answer(data, server, transport, peer):
    try:
        req = DNSRecord.parse(data)
    except Exception as e:  # noqa: BLE001
        event(server=server, kind="dns", transport=transport, peer=peer,
              qname=None, qtype=None, error=str(e), raw=data.hex())
        return None
    q = req.q
    qname = str(q.qname)
    qtype = QTYPE.get(q.qtype, str(q.qtype))
    event(server=server, kind="dns", transport=transport, peer=peer,
          qname=qname.rstrip("."), qtype=qtype)
    reply = req.reply()
    if server == "pubdns":
        # The decoy resolver answers everything with the denied host.
        if qtype == "A":
            reply.add_answer(RR(q.qname, QTYPE.A, rdata=A("198.51.100.20"),
                                ttl=DNS_TTL))
        return reply.pack()
    recs = zone_lookup(qname)
    if recs is None:
        reply.header.rcode = RCODE.NXDOMAIN
        return reply.pack()
    for rtype, cls in (("A", A), ("AAAA", AAAA), ("TXT", TXT)):
        if qtype in (rtype, "ANY"):
            for v in recs.get(rtype, []):
                reply.add_answer(RR(q.qname, getattr(QTYPE, rtype),
                                    rdata=cls(v), ttl=DNS_TTL))
    return reply.pack()


def serve_dns_udp(addr, server):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 53))

    def loop():
        while True:
            data, peer = s.recvfrom(65535)
            out = dns_answer(data, server, "udp", peer[0])
            if out:
                s.sendto(out, peer)
    threading.Thread(target=loop, daemon=True).start()


def _recv_exact(c, n):
    buf = b""
    while len(buf) < n:
        chunk = c.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def serve_dns_tcp(addr, server):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 53))
    s.listen(64)

    def conn(c, peer):
        c.settimeout(10)
        try:
            while True:
                n = int.from_bytes(_recv_exact(c, 2), "big")
                data = _recv_exact(c, n)
                out = dns_answer(data, server, "tcp", peer[0])
                if out is None:
                    break
                c.sendall(len(out).to_bytes(2, "big") + out)
        except (OSError, EOFError):
            pass
        finally:
            c.close()

    def loop():
        while True:
            c, peer = s.accept()
            threading.Thread(target=conn, args=(c, peer), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "world"

    def log_message(self, fmt, *args):
        pass

    def _serve(self):
        srv = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body_in = self.rfile.read(length) if 0 < length < 1 << 20 else b""
        complete = True
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            body_in = b""
            while True:                       # a plain chunked reader (tests only)
                line = self.rfile.readline()
                if not line.endswith(b"\r\n"):   # cut before the last chunk
                    complete = False
                    break
                size = int(line.strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body_in += self.rfile.read(size)
                self.rfile.readline()
        hosts = self.headers.get_all("Host") or []
        event(server=srv.name, kind="http", proto=srv.proto,
              peer=self.client_address[0], method=self.command,
              path=self.path, host=hosts, sni=getattr(self.connection,
                                                      "_sni", None),
              headers=[f"{k}: {v}" for k, v in self.headers.items()],
              body=body_in.decode("utf-8", "replace"), body_complete=complete)
        if not complete:
            return
        if self.path.startswith("/source/"):
            self._source(body_in)
            return
        body = (f"{srv.name}-web proto={srv.proto} host={','.join(hosts)} "
                f"path={self.path} secret={srv.secret}\n").encode()
        if self.path.split("?")[0].endswith("/echo-headers"):
            # a reflecting endpoint: the request's headers come back in the body and in
            # a response header (ABUSE-3)
            body = "".join(f"{k}: {v}\n" for k, v in self.headers.items()).encode()
            self.send_response(200)
            self.send_header("X-Echo-Auth", self.headers.get("Authorization") or "-")
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.startswith("/reflect-"):
            self._reflect(self.path.split("?")[0][len("/reflect-"):])
            return
        if "/slow" in self.path:
            # a slow download (the gateway is killed under it): 30 KiB now, the rest
            # after 8 s
            half = 30 * 1024
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(2 * half))
            self.end_headers()
            try:
                self.wfile.write(b"s" * half)
                self.wfile.flush()
                time.sleep(8)
                self.wfile.write(b"s" * half)
            except OSError:
                pass
            return
        if self.path.startswith("/goto?"):
            # a redirect to another host (ABUSE-6): ?to=URL
            to = self.path.split("to=", 1)[1] if "to=" in self.path else "/"
            self.send_response(302)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _source(self, body_in):
        """A create's sources (tests/integration/net/test_sources.py): files of STATE/source/
        as they are, and git repositories under /source/git/ through `git http-backend` (the
        smart HTTP protocol, so shallow clones work)."""
        root = os.path.join(STATE, "source")
        path, _, query = self.path.partition("?")
        if path.startswith("/source/git/"):
            env = dict(os.environ, GIT_PROJECT_ROOT=os.path.join(root, "git"),
                       GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path[len("/source/git"):],
                       QUERY_STRING=query, REQUEST_METHOD=self.command,
                       CONTENT_TYPE=self.headers.get("Content-Type") or "",
                       CONTENT_LENGTH=str(len(body_in)), REMOTE_ADDR=self.client_address[0])
            out = subprocess.run(["git", "http-backend"], input=body_in, env=env,
                                 capture_output=True).stdout
            head, _, body = out.partition(b"\r\n\r\n")
            status = 200
            hdrs = []
            for ln in head.split(b"\r\n"):
                k, _, v = ln.decode("latin-1").partition(":")
                if k.lower() == "status":
                    status = int(v.split()[0])
                elif k:
                    hdrs.append((k, v.strip()))
            self.send_response(status)
            for k, v in hdrs:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        f = os.path.realpath(os.path.join(root, path[len("/source/"):]))
        if not f.startswith(os.path.realpath(root) + "/") or not os.path.isfile(f):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = open(f, "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reflect(self, how):
        """Upstreams that hand an injected Authorization back in the ways a naive scan
        of the raw wire bytes misses (issue 33): the token without its scheme, a chunk
        boundary inside it, a second Content-Encoding, a 1xx before the real head."""
        auth = self.headers.get("Authorization") or ""
        token = auth.split(" ", 1)[-1]
        w = self.connection.sendall
        if how == "bare":
            body = f"invalid api key: {token}\n".encode()
            w(b"HTTP/1.1 401 Unauthorized\r\nX-Error: bad key " + token.encode() +
              b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif how == "basic":
            dec = base64.b64decode(token).decode("utf-8", "replace")
            body = f"user:pass={dec} pass={dec.split(':', 1)[-1]}\n".encode()
            w(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif how == "chunked":
            text = f"key={token};".encode()
            cut = 4 + len(token) // 2          # the boundary falls inside the token
            w(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for part in (text[:cut], text[cut:]):
                w(b"%x\r\n" % len(part) + part + b"\r\n")
                time.sleep(0.05)
            w(b"0\r\n\r\n")
        elif how == "two-ce":
            body = gzip.compress(f"key={auth}".encode())
            w(b"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n"
              b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif how in ("continue-gzip", "continue-plain"):
            w(b"HTTP/1.1 100 Continue\r\n\r\n")
            time.sleep(0.05)
            gz = how == "continue-gzip"
            body = f"key={auth}".encode()
            body = gzip.compress(body) if gz else body
            w(b"HTTP/1.1 200 OK\r\n" + (b"Content-Encoding: gzip\r\n" if gz else
                                          b"X-Key: " + auth.encode() + b"\r\n") +
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
        elif how == "trailer":                 # the secret in a trailer field
            w(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Key\r\n\r\n"
              b"2\r\nok\r\n0\r\nX-Key: " + auth.encode() + b"\r\n\r\n")
        elif how == "early-hints":             # the secret in a 103 before the real head
            w(b"HTTP/1.1 103 Early Hints\r\nLink: </" + token.encode() + b">\r\n\r\n"
              b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        elif how == "upgrade":                 # a 101 nobody asked for, then raw bytes
            w(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n" + auth.encode())
        self.close_connection = True

    do_GET = do_POST = do_HEAD = do_PUT = _serve


class WebServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, name, proto, ctx=None, secret=""):
        self.name, self.proto, self.ctx, self.secret = name, proto, ctx, secret
        super().__init__(addr, Handler)

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request, client_address):
        event(server=self.name, kind="accept", proto=self.proto,
              peer=client_address[0], port=self.server_address[1], t_rx=last_rx(request))
        if self.ctx is not None:
            holder = {}

            def cb(sslsock, name, _ctx):
                holder["sni"] = name
            ctx = self._make_ctx(cb)
            request.settimeout(10)
            try:
                request = ctx.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as e:
                event(server=self.name, kind="tls", peer=client_address[0],
                      sni=holder.get("sni"), ok=False, error=str(e)[:200])
                return
            request._sni = holder.get("sni")
            event(server=self.name, kind="tls", peer=client_address[0],
                  sni=holder.get("sni"), ok=True)
        self.RequestHandlerClass(request, client_address, self)

    def _make_ctx(self, cb):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(STATE, "server.pem"),
                            os.path.join(STATE, "server.key"))
        ctx.sni_callback = cb
        return ctx

    def handle_error(self, request, client_address):
        pass


def serve_web(addr, port, name, tls, secret=""):
    ctx = True if tls else None
    srv = WebServer((addr, port), name, "https" if tls else "http",
                    ctx=ctx, secret=secret)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def serve_tcp_sink(addr, port, name):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)

    def conn(c, peer):
        c.settimeout(3)
        data = b""
        try:
            while len(data) < 65536:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        finally:
            c.close()
        event(server=name, kind="tcp", peer=peer[0], port=port,
              data=data.decode("utf-8", "replace"))

    def loop():
        while True:
            c, peer = s.accept()
            event(server=name, kind="accept", proto="tcp", peer=peer[0],
                  port=port, t_rx=last_rx(c))
            threading.Thread(target=conn, args=(c, peer), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def serve_udp_sink(addr, port, name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))

    def loop():
        while True:
            data, peer = s.recvfrom(65535)
            event(server=name, kind="udp", peer=peer[0], port=port,
                  data=data.decode("utf-8", "replace"))
            s.sendto(b"udp-echo:" + data[:64], peer)   # a reply, if it can
    threading.Thread(target=loop, daemon=True).start()


def main():
    serve_dns_udp("203.0.113.53", "dns")
    serve_dns_tcp("203.0.113.53", "dns")
    serve_dns_udp("198.51.100.53", "pubdns")
    serve_dns_tcp("198.51.100.53", "pubdns")
    serve_web("203.0.113.10", 80, "allowed", False)
    serve_web("203.0.113.10", 443, "allowed", True)
    serve_web("198.51.100.20", 80, "denied", False, secret="DENIED-HOST-DATA")
    serve_web("198.51.100.20", 443, "denied", True, secret="DENIED-HOST-DATA")
    for port in (22, 853, 4444):
        serve_tcp_sink("198.51.100.20", port, "denied")
    for port in (53, 443, 853, 4444):
        serve_udp_sink("198.51.100.20", port, "denied")
    for port in (443, 853):
        serve_udp_sink("203.0.113.10", port, "allowed")
    serve_tcp_sink("203.0.113.10", 853, "allowed")
    serve_web("198.51.100.130", 80, "cidr", False, secret="CIDR-HOST")
    serve_web("169.254.169.254", 80, "meta", False,
              secret="META-CREDENTIALS-CANARY")
    serve_web("10.0.0.5", 80, "lan", False, secret="LAN-CANARY")
    serve_web("127.0.0.1", 80, "loop", False, secret="LOOPBACK-CANARY")
    with open(os.path.join(STATE, "ready"), "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
