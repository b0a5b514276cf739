"""Attack/probe client run INSIDE the sandbox (copied to /workspace/probe.py).

    python3 /workspace/probe.py CMD ARGS...          prints one JSON object
    python3 /workspace/probe.py batch 'JSON-LIST'    runs [[CMD, ARGS...], ...]
                                                     in parallel, prints a list

Commands (all stdlib, plus dnslib for DNS packets):
  dns NAME [QTYPE] [udp|tcp] [SERVER[:PORT]]  -> {rcode, answers:[{type,data}]}
  tcp HOST PORT [DATA]         connect, send DATA, read until EOF/timeout
  udp HOST PORT DATA           send one datagram, wait for any reply
  http HOST PORT RAWREQUEST    send raw bytes (\\r\\n escapes allowed), parse
                               the status line of the reply
  tls HOST PORT SNI|- [PATH]   direct TLS (transparent path); GET PATH after
  ctls PHOST PPORT AUTH SNI|- [PATH]  CONNECT AUTH through the proxy, then TLS
                               with SNI (or none), then GET PATH
  icmp HOST                    echo via a ping socket and via a raw socket
  sockets                      try AF_PACKET / SOCK_RAW sockets
  resolve NAME                 getaddrinfo through /etc/resolv.conf
Timeouts are short (PROBE_TIMEOUT, default 2 s): a drop shows as "timeout".
"""

import json
import os
import socket
import ssl
import struct
import sys
import threading

T = float(os.environ.get("PROBE_TIMEOUT", "2"))
CA = "/workspace/ca.pem"
GW = "100.96.0.1"


def unesc(s):
    return s.encode().decode("unicode_escape").encode("latin-1")


def err(e):
    if isinstance(e, socket.timeout):
        return "timeout"
    return f"{type(e).__name__}: {e}"


def cmd_dns(name, qtype="A", transport="udp", server=GW):
    from dnslib import DNSLabel, DNSQuestion, DNSRecord, QTYPE, RCODE
    host, _, port = server.partition(":")
    port = int(port or 53)
    if "\\" in name:
        label = DNSLabel([unesc(x) for x in name.split(".")])
    else:
        label = name
    q = DNSRecord(q=DNSQuestion(label, getattr(QTYPE, qtype)))
    pkt = q.pack()
    out = {"name": name, "qtype": qtype, "transport": transport}
    try:
        if transport == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(T)
            s.sendto(pkt, (host, port))
            data, _ = s.recvfrom(65535)
        else:
            s = socket.create_connection((host, port), timeout=T)
            s.sendall(struct.pack("!H", len(pkt)) + pkt)
            n = b""
            while len(n) < 2:
                c = s.recv(2 - len(n))
                if not c:
                    raise EOFError("closed")
                n += c
            want = struct.unpack("!H", n)[0]
            data = b""
            while len(data) < want:
                c = s.recv(want - len(data))
                if not c:
                    raise EOFError("closed")
                data += c
        r = DNSRecord.parse(data)
        out["rcode"] = RCODE.get(r.header.rcode)
        out["answers"] = [{"type": QTYPE.get(rr.rtype), "data": str(rr.rdata)}
                          for rr in r.rr]
    except Exception as e:  # noqa: BLE001
        out["error"] = err(e)
    return out


def _recv_all(s, limit=1 << 20):
    data = b""
    try:
        while len(data) < limit:
            c = s.recv(65536)
            if not c:
                break
            data += c
    except Exception as e:  # noqa: BLE001
        return data, err(e)
    return data, None


def cmd_tcp(host, port, data=""):
    out = {"host": host, "port": int(port)}
    try:
        s = socket.create_connection((host, int(port)), timeout=T)
        out["connected"] = True
        if data:
            s.sendall(unesc(data))
        s.shutdown(socket.SHUT_WR)
        got, e = _recv_all(s)
        out["recv"] = got.decode("utf-8", "replace")
        if e:
            out["recv_error"] = e
    except Exception as e:  # noqa: BLE001
        out["connected"] = out.get("connected", False)
        out["error"] = err(e)
    return out


def cmd_udp(host, port, data):
    out = {"host": host, "port": int(port)}
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.settimeout(T)
        s.sendto(unesc(data), (host, int(port)))
        out["sent"] = True
        got, _ = s.recvfrom(65535)
        out["recv"] = got.decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001
        out.setdefault("sent", False)
        out["error"] = err(e)
    return out


def parse_http(raw):
    out = {"raw": raw[:4000].decode("utf-8", "replace")}
    try:
        head, _, body = raw.partition(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0].decode()
        out["status"] = int(line.split()[1])
        out["body"] = body.decode("utf-8", "replace")
    except Exception:  # noqa: BLE001
        out["status"] = None
    return out


def cmd_http(host, port, request):
    out = {"host": host, "port": int(port)}
    try:
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(T)
        s.connect((host, int(port)))
        s.sendall(unesc(request))
        got, e = _recv_all(s)
        out.update(parse_http(got))
        if e:
            out["recv_error"] = e
    except Exception as e:  # noqa: BLE001
        out["error"] = err(e)
        out.setdefault("status", None)
    return out


def _ctx():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(CA)
    return ctx


def _tls_get(sock, sni, path, host_header):
    out = {}
    try:
        t = _ctx().wrap_socket(sock, server_hostname=None if sni == "-" else sni)
        out["tls_ok"] = True
        out["peer_cert_cn"] = dict(x[0] for x in
                                   t.getpeercert()["subject"]).get("commonName")
        t.sendall(f"GET {path} HTTP/1.1\r\nHost: {host_header}\r\n"
                  "Connection: close\r\n\r\n".encode())
        got, e = _recv_all(t)
        out.update(parse_http(got))
    except Exception as e:  # noqa: BLE001
        out.setdefault("tls_ok", False)
        out["error"] = err(e)
        out.setdefault("status", None)
    return out


def cmd_tls(host, port, sni, path="/"):
    out = {"host": host, "port": int(port), "sni": sni}
    try:
        s = socket.create_connection((host, int(port)), timeout=T)
    except Exception as e:  # noqa: BLE001
        out.update(error=err(e), tls_ok=False, status=None)
        return out
    out.update(_tls_get(s, sni, path, sni if sni != "-" else host))
    return out


def cmd_ctls(phost, pport, authority, sni, path="/"):
    out = {"authority": authority, "sni": sni}
    try:
        s = socket.create_connection((phost, int(pport)), timeout=T)
        s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n"
                  .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            c = s.recv(1)
            if not c:
                break
            head += c
        line = head.split(b"\r\n", 1)[0].decode("utf-8", "replace")
        out["connect_line"] = line
        out["connect_status"] = int(line.split()[1]) if line else None
    except Exception as e:  # noqa: BLE001
        out.update(error=err(e), tls_ok=False, status=None)
        return out
    if out["connect_status"] != 200:
        out.update(tls_ok=False, status=None)
        return out
    out.update(_tls_get(s, sni, path, authority.rsplit(":", 1)[0]))
    return out


def cmd_icmp(host):
    out = {"host": host}
    pkt = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1) + b"airlock-icmp-probe"

    def csum(b):
        if len(b) % 2:
            b += b"\0"
        s = sum(struct.unpack(f"!{len(b)//2}H", b))
        s = (s >> 16) + (s & 0xffff)
        s += s >> 16
        return ~s & 0xffff
    pkt = pkt[:2] + struct.pack("!H", csum(pkt)) + pkt[4:]
    for kind, typ in (("dgram", socket.SOCK_DGRAM), ("raw", socket.SOCK_RAW)):
        try:
            s = socket.socket(socket.AF_INET, typ, socket.IPPROTO_ICMP)
            s.settimeout(T)
            s.sendto(pkt, (host, 0))
            got, _ = s.recvfrom(65535)
            out[kind] = {"reply": got.hex()}
        except Exception as e:  # noqa: BLE001
            out[kind] = {"error": err(e)}
    return out


def cmd_sockets():
    out = {}
    for name, args in (("packet", (17, socket.SOCK_RAW, 0x0300)),
                       ("raw_tcp", (socket.AF_INET, socket.SOCK_RAW,
                                    socket.IPPROTO_TCP)),
                       ("raw_ip", (socket.AF_INET, socket.SOCK_RAW, 255)),
                       ("raw6", (socket.AF_INET6, socket.SOCK_RAW,
                                 socket.IPPROTO_UDP))):
        try:
            socket.socket(*args).close()
            out[name] = "ok"
        except Exception as e:  # noqa: BLE001
            out[name] = err(e)
    return out


def cmd_resolve(name):
    try:
        infos = socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)
        return {"name": name, "addrs": sorted({i[4][0] for i in infos})}
    except Exception as e:  # noqa: BLE001
        return {"name": name, "error": err(e)}


def cmd_tcp6(host, port):
    out = {"host": host, "port": int(port)}
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.settimeout(T)
        s.connect((host, int(port)))
        out["connected"] = True
    except Exception as e:  # noqa: BLE001
        out["connected"] = False
        out["error"] = err(e)
    return out


def cmd_netinfo():
    import subprocess
    out = {"ifaces": sorted(n for _, n in socket.if_nameindex())}
    for key, argv in (("addrs", ["ip", "-j", "addr"]),
                      ("routes", ["ip", "-j", "route"]),
                      ("routes6", ["ip", "-j", "-6", "route"])):
        try:
            r = subprocess.run(argv, capture_output=True, text=True,
                               timeout=5)
            out[key] = json.loads(r.stdout or "[]")
        except Exception as e:  # noqa: BLE001
            out[key] = err(e)
    try:
        with open("/proc/net/if_inet6") as f:
            out["inet6"] = f.read().split("\n")
    except OSError as e:
        out["inet6"] = err(e)
    try:
        with open("/etc/resolv.conf") as f:
            out["resolv"] = f.read()
    except OSError as e:
        out["resolv"] = err(e)
    out["env"] = {k: v for k, v in os.environ.items() if "proxy" in k.lower()}
    return out


CMDS = {"netinfo": cmd_netinfo, "dns": cmd_dns, "tcp": cmd_tcp, "udp": cmd_udp, "http": cmd_http,
        "tls": cmd_tls, "ctls": cmd_ctls, "icmp": cmd_icmp,
        "sockets": cmd_sockets, "resolve": cmd_resolve, "tcp6": cmd_tcp6}


def run(argv):
    return CMDS[argv[0]](*argv[1:])


def main():
    if sys.argv[1] == "batch":
        jobs = json.loads(sys.argv[2])
        res = [None] * len(jobs)

        def go(i, j):
            try:
                res[i] = run(j)
            except Exception as e:  # noqa: BLE001
                res[i] = {"probe_error": err(e)}
        ths = [threading.Thread(target=go, args=(i, j))
               for i, j in enumerate(jobs)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        print(json.dumps(res))
    else:
        print(json.dumps(run(sys.argv[1:])))


if __name__ == "__main__":
    main()
