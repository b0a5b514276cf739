"""A fake upstream in a network namespace this process makes (documentation addresses,
`.test` names): HTTP on 203.0.113.10:80 and a resolver on 203.0.113.53:53 that answers
every *.test name with 203.0.113.10. Run as: ip netns exec NS python3 upstream.py HITS
(HITS: a file that gets one line per HTTP request: its Host header)."""
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from dnslib import A, QTYPE, RR, DNSRecord

HITS = sys.argv[1]


class Web(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(HITS, "a") as f:
            f.write("%s\n" % self.headers.get("Host"))
        body = b"hello from upstream\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Dns(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        q = DNSRecord.parse(data)
        r = q.reply()
        name = str(q.q.qname).rstrip(".")
        if name.endswith(".test") and q.q.qtype == QTYPE.A:
            r.add_answer(RR(q.q.qname, QTYPE.A, rdata=A("203.0.113.10"), ttl=30))
        sock.sendto(r.pack(), self.client_address)


dns = socketserver.UDPServer(("203.0.113.53", 53), Dns)
threading.Thread(target=dns.serve_forever, daemon=True).start()
web = HTTPServer(("203.0.113.10", 80), Web)
print("ready", flush=True)
web.serve_forever()
