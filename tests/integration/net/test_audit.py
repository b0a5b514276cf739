"""The egress log cannot be blinded: attacks from inside the sandbox that used to make
flows or refusals vanish from it (issue 33, section 6), each asserting its line is there.

* a flood of refused DNS queries does not push allowed flows out: flow lines (with
  their byte counts) are never rate-limited; repeated refusals are aggregated per
  (reason, name) into "suppressed" counts;
* malformed DNS queries are logged ("malformed", with what of the name could be read);
* a flow has its "open" line before its first byte goes upstream, so a gateway killed
  mid-flow still leaves it in the log."""
import json
import os
import signal
import textwrap
import threading
import time

PY = "/usr/bin/python3"
CURL = ("curl -sS -m 10 --cacert /workspace/ca.pem -o /dev/null "
        "-w 'HTTPCODE=%{http_code} UP=%{size_upload} DOWN=%{size_download}\\n'")


# Refused queries for distinct names, without a pause, until /workspace/stop appears.
FLOOD_ON = textwrap.dedent("""
    import os, socket, struct, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    i, end = 0, time.time() + 30
    while not os.path.exists("/workspace/stop") and time.time() < end:
        for _ in range(200):
            i += 1
            hdr = struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0)
            name = b"".join(bytes([len(l)]) + l.encode()
                            for l in ("flood%d" % i, "denied", "test")) + b"\\0"
            try:
                s.sendto(hdr + name + struct.pack(">HH", 1, 1), ("100.96.0.1", 53))
            except BlockingIOError:
                pass
    print("sent", i)
""")


def test_dns_flood_does_not_hide_allowed_flows(run_net, net, world, canary):
    """The attack: flood refused DNS queries until the log's budget is spent, and send
    5 x 200 KiB to an allowed host meanwhile. Every one of the 5 flows has its open and close
    lines, the close lines with their byte counts."""
    script = (f"head -c 204800 /dev/urandom > /workspace/b; {PY} -c '{FLOOD_ON}' & "
              "sleep 1; "
              f"for i in 1 2 3 4 5; do {CURL} --data-binary @/workspace/b "
              f"https://allowed.test/{canary}-$i; done; touch /workspace/stop; wait")
    r = run_net(["--allow", "allowed.test"] + net.sh(script), timeout=90)
    assert r.returncode == 0 and "sent" in r.out, (r.returncode, r.out, r.err)
    assert r.out.count("HTTPCODE=200") == 5, r.out
    assert len(world.events("allowed", "http")) == 5
    # the flood did spend the budget: the rate limit or the aggregation counted lines
    assert any(e.get("suppressed") for e in r.egress), r.egress[-5:]
    allowed = net.find(r.egress, verdict="allow", name="allowed.test", layer=net.CONNECT)
    sent = [e for e in allowed if e["bytes_out"] >= 204800 and e["bytes_in"] > 0]
    assert len(sent) == 5, allowed  # where the data went, and how much: every flow
    closes = net.find(allowed, event="close")
    opens = net.find(allowed, event="open")
    assert closes == sent and len(opens) == 5, allowed
    assert {e["flow"] for e in closes} == {e["flow"] for e in opens}, (opens, closes)
    # the flood itself is still accounted for, and the log stayed bounded
    denied = [e for e in r.egress if e.get("layer") == "dns" and e["verdict"] == "deny"]
    counted = sum(e.get("suppressed", 0) for e in r.egress)
    assert len(denied) + counted >= 5000, (len(denied), counted)
    assert len(r.egress) < 20000, len(r.egress)


SAME = textwrap.dedent("""
    import socket, struct, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.0)
    body = b"".join(bytes([len(l)]) + l.encode() for l in NAME.split(".")) + b"\\0"
    for i in range(3000):
        hdr = struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0)
        try:
            s.sendto(hdr + body + struct.pack(">HH", 1, 1), ("100.96.0.1", 53))
        except BlockingIOError:
            pass
        if i % 100 == 99:
            time.sleep(0.01)  # paced: the gateway's socket buffer takes ~300 at once
    print("sent", time.time())
    time.sleep(4)
""")


def test_repeated_denials_are_aggregated_per_reason_and_name(run_net, canary):
    """3000 queries for one refused name: a handful of lines, the first one in full and
    the repeats as "suppressed" counts of that (reason, name), written when the window
    closes while the sandbox still runs."""
    name = f"same-{canary}.denied.test"
    r = run_net(["--allow", "allowed.test", "--", PY, "-c",
                 f"NAME = {name!r}\n" + SAME], timeout=60)
    assert r.returncode == 0 and "sent" in r.out, (r.returncode, r.err)
    mine = [e for e in r.egress if e.get("layer") == "dns" and e.get("name") == name]
    assert mine and mine[0].get("suppressed") is None, mine[:3]
    assert all(e["verdict"] == "deny" and e["reason"] == mine[0]["reason"] for e in mine)
    repeated = [e for e in mine if e.get("event") == "repeated"]
    assert repeated, mine
    total = len(mine) - len(repeated) + sum(e["suppressed"] for e in repeated)
    assert total >= 1000, (total, mine)
    # the count is written when its window (2 s) closes, not only at the end of the run
    sent = float(r.out.split("sent", 1)[1].split()[0])
    assert repeated[0]["time"] / 1000 < sent + 3.5, (sent, repeated)
    assert len(r.egress) < 50, len(r.egress)


MALFORMED = textwrap.dedent("""
    import socket, struct, sys
    T = sys.argv[1].encode()
    def name(*labels):
        return b"".join(bytes([len(l)]) + l for l in labels)
    def hdr(qd=1, flags=0x0100):
        return struct.pack(">HHHHHH", 7, flags, qd, 0, 0, 0)
    tail = struct.pack(">HH", 1, 1)
    allowed = name(b"allowed", b"test") + b"\\0"
    cases = {
        "two": hdr(2) + name(b"two-" + T) + allowed + tail + allowed + tail,
        "long": hdr() + name(b"long-" + T, b"x" * 64) + b"\\0" + tail,
        "over": hdr() + name(b"over-" + T, *[b"a" * 63] * 5) + b"\\0" + tail,
        "empty": hdr() + name(b"empty-" + T) + b"\\0" + name(b"x") + allowed + tail,
        "bytes": hdr() + name(b"bytes-" + T + b'\\x00"\\\\\\xff\\n{}') + allowed + tail,
        "ptr": hdr() + name(b"ptr-" + T) + b"\\xc0\\x0c" + tail,
        "qr": hdr(flags=0x8100) + name(b"qr-" + T) + allowed + tail,
        "rev": hdr() + name(b"rev-" + T, b"in-addr", b"arpa") + b"\\0" + struct.pack(">HH", 12, 1),
        "case": hdr() + name(b"CaSe-" + T, b"DeNiEd", b"TeSt") + b"\\0" + tail,
        "short": b"\\x00\\x07\\x01",
    }
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    for k, q in cases.items():
        s.sendto(q, ("100.96.0.1", 53))
        try:
            r = s.recv(4096)
            print(k, "rcode", r[3] & 15)
        except OSError:
            print(k, "no reply")
    # over TCP: a frame shorter than a header, and one cut before its end
    for data in (b"\\x00\\x05abcde",
                 struct.pack(">H", 200) + hdr() + name(b"tcpcut-" + T) + allowed):
        c = socket.create_connection(("100.96.0.1", 53), timeout=3)
        c.sendall(data)
        c.shutdown(socket.SHUT_WR)
        try:
            c.recv(100)
        except OSError:
            pass
        c.close()
""")


def test_malformed_dns_queries_are_logged(run_net, canary):
    """Every refusal is logged: queries the parser rejects (two questions, long labels or
    names, an empty label, odd bytes, a compression pointer, a response, a short header)
    leave a "malformed" line naming what could be read, safely escaped; so do TCP
    connections whose bytes never make a whole frame."""
    r = run_net(["--allow", "allowed.test", "--", PY, "-c", MALFORMED, canary],
                timeout=30)
    assert r.returncode == 0, (r.returncode, r.out, r.err)
    assert not [e for e in r.egress if "unparseable" in e], r.egress
    dns = [e for e in r.egress if e.get("layer") == "dns"]

    def lines_for(tag):
        return [e for e in dns if isinstance(e.get("name"), str) and
                e["name"].lower().startswith(f"{tag}-{canary}".lower())]

    for tag in ("two", "long", "over", "empty", "bytes", "ptr", "qr", "tcpcut"):
        got = lines_for(tag)
        assert got, (tag, dns)
        assert all(e["verdict"] == "deny" and e["reason"] == "malformed" for e in got), got
        assert all(isinstance(e.get("detail"), str) and e["detail"] for e in got), got
    assert len(lines_for("over")[0]["name"]) <= 256
    raw = lines_for("bytes")[0]["name"]
    assert raw.isascii() and "\\000" in raw and "\\255" in raw and "\n" not in raw, raw
    # well-formed but refused: logged under their own reasons
    for tag in ("rev", "case"):
        got = lines_for(tag)
        assert got and all(e["verdict"] == "deny" for e in got), (tag, dns)
    nameless = [e for e in dns if e["reason"] == "malformed" and e["name"] is None]
    assert {e["detail"] for e in nameless} >= {"shorter than a DNS header",
                                               "no whole TCP frame"}, dns


def _holders(path):
    """Pids of the processes holding path open."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{d}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{d}/fd/{fd}") == os.path.realpath(path):
                    out.append(int(d))
                    break
            except OSError:
                pass
    return out


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def test_gateway_killed_mid_flow_leaves_the_flows_open_lines(run_net, net, world, canary,
                                                            tmp_path):
    """A download has ~30 KiB through the gateway when the gateway is SIGKILLed: the
    flows it carried (plain HTTP through the proxy, and HTTPS through CONNECT) are in the
    log by their "open" lines, written before their first byte went upstream."""
    script = (f"{CURL} http://allowed.test/slow-{canary}-h & "
              f"{CURL} https://allowed.test/slow-{canary}-s & wait")
    res = {}
    t = threading.Thread(target=lambda: res.update(
        r=run_net(["--allow", "allowed.test"] + net.sh(script), timeout=60)))
    t.start()
    try:
        deadline = time.time() + 20
        while time.time() < deadline and len(
                [h for h in world.events("allowed", "http") if canary in h["path"]]) < 2:
            time.sleep(0.1)
        assert len([h for h in world.events("allowed", "http")
                    if canary in h["path"]]) == 2, world.events("allowed")
        time.sleep(0.5)  # the first 30 KiB cross
        logs = sorted(tmp_path.glob("egress*.jsonl"))
        assert logs, list(tmp_path.iterdir())
        gws = [p for p in _holders(logs[-1]) if _comm(p).startswith("airlock-gatewa")]
        assert gws, [(p, _comm(p)) for p in _holders(logs[-1])]
        for p in gws:
            os.kill(p, signal.SIGKILL)
    finally:
        t.join(70)
    assert not t.is_alive()
    r = res["r"]
    opens = net.find(r.egress, verdict="allow", name="allowed.test", event="open")
    assert {e["port"] for e in opens} == {80, 443}, r.egress
    assert all(isinstance(e["flow"], int) and e["address"] == "203.0.113.10" for e in opens)
    # they never closed: the gateway died under them
    assert not net.find(r.egress, name="allowed.test", event="close"), r.egress


def test_every_open_flow_has_its_closing_line(run_net, net, world, tmp_path):
    """A flow whose request is refused inside terminated TLS (TRACE to a rule domain)
    still ends with a closing line of its own flow id, after the refusal's line; an
    allowed one closes with its reason. Only a dead gateway leaves an open flow."""
    pol = tmp_path / "rules.json"
    pol.write_text(json.dumps({"allow": {"allowed.test": [
        {"transform": [{"headers": {"X-Audit": "1"}}]}]}}))
    r = run_net(["--policy", str(pol), "--upstream-ca", world.ca] + net.sh(
        "curl -sS -o /dev/null -w 'get=%{http_code}\\n' https://allowed.test/; "
        "curl -sS -o /dev/null -w 'trace=%{http_code}\\n' -X TRACE https://allowed.test/"))
    assert "get=200" in r.out and "trace=405" in r.out, (r.out, r.err)
    opens = net.find(r.egress, event="open", name="allowed.test")
    closes = net.find(r.egress, event="close", name="allowed.test")
    assert len(opens) == 2 and sorted(e["flow"] for e in closes) == sorted(
        e["flow"] for e in opens), r.egress
    refused = net.find(r.egress, reason="trace_refused")
    assert refused, r.egress
    ended = [e for e in closes if e["reason"] == "refused" and e["verdict"] == "deny"]
    assert len(ended) == 1 and ended[0]["bytes_in"] > 0, closes
    assert r.egress.index(refused[0]) < r.egress.index(ended[0])
    assert [e["reason"] for e in closes if e is not ended[0]] == ["rule_transform"], closes
