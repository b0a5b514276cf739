"""Floods: a sandbox hammering the resolver is cut off at its own gateway (never
forwarded upstream beyond its budget), and the log turns the flood into a counter."""
import json
import textwrap

PY = "/usr/bin/python3"

FLOOD = textwrap.dedent("""
    import socket, struct, random, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.0)
    def q(name, i):
        hdr = struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0)
        body = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\\0"
        return hdr + body + struct.pack(">HH", 1, 1)
    # 20,000 queries in bursts of 250 every 5 ms (at most 50,000 a second): far over the
    # gateway's rate, yet paced so that the kernel does not drop most of them at the
    # gateway's socket when a loaded host runs the gateway late (dropped there, a query
    # is neither forwarded nor logged, and the count below could not account for it)
    for i in range(20000):
        s.sendto(q("flood%d.denied.test" % i, i), ("100.96.0.1", 53))
        if i % 250 == 249:
            time.sleep(0.005)
    print("sent")
""")


def test_dns_flood_is_rate_limited_and_logged_as_a_counter(run_net, world):
    before = len(world.dns_queries())
    r = run_net(["--allow", "allowed.test", "--", PY, "-c", FLOOD], timeout=60)
    assert r.returncode == 0 and "sent" in r.out, (r.returncode, r.err)
    # none of those names is allowed: nothing reached the upstream resolver
    assert len(world.dns_queries()) == before
    # the log stayed bounded: at most the burst plus the sustained rate, and the rest
    # was counted in rate_limited lines
    assert len(r.egress) < 20000, len(r.egress)
    counted = [e for e in r.egress if e.get("reason") == "rate_limited"]
    assert counted, "no rate_limited decision or summary in the log"
    suppressed = sum(e.get("suppressed", 0) for e in counted)
    denied = [e for e in r.egress if e.get("layer") == "dns" and e.get("verdict") == "deny"]
    # every query is accounted for: logged individually, or counted as suppressed
    assert len(denied) + suppressed >= 5000, (len(denied), suppressed)


def test_ruleset_drops_are_logged_through_nflog(run_net):
    """UDP, QUIC and DoT never leave; the ruleset's drops reach the egress log
    as layer "nft" lines naming the rule and the destination."""
    probe = textwrap.dedent("""
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"canary", ("198.51.100.20", 4444))
        s.sendto(b"quic", ("198.51.100.20", 443))
        t = socket.socket(); t.settimeout(1.5)
        try:
            t.connect(("198.51.100.20", 853)); print("853 CONNECTED")
        except OSError as e:
            print("853 refused:", e)
    """)
    r = run_net(["--allow", "allowed.test", "--", PY, "-c", probe], timeout=60)
    assert "853 CONNECTED" not in r.out, r.out
    nft = [e for e in r.egress if e.get("layer") == "nft"]
    got = {(e["reason"], e["address"], e["port"]) for e in nft}
    assert ("udp_dropped", "198.51.100.20", 4444) in got, nft
    assert ("udp_dropped", "198.51.100.20", 443) in got, nft
    assert ("dot_dropped", "198.51.100.20", 853) in got, nft
    assert all(e["verdict"] == "deny" for e in nft)


def test_the_egress_log_stops_at_its_cap_with_one_last_line(invoke, world, tmp_path):
    """A sandbox's egress log ends at 64 MiB (what airlockd serves of it is capped
    alike) with one "log_full" line: at the sustained log rate a day-long flood would
    otherwise put ~4 GB of it on the host's disk. The file here is already almost
    full (sparse), as if such a flood had run; the gateway counts what it holds."""
    from .conftest import UPSTREAM_DNS
    cap = 64 << 20
    start = cap - 3000
    log = tmp_path / "nearly-full.jsonl"
    with open(log, "wb") as f:
        f.truncate(start)
    r = invoke(["run", "--upstream-netns", world.ns, "--upstream-dns", UPSTREAM_DNS,
                "--egress-log", str(log), "--allow", "allowed.test", "--", PY, "-c", FLOOD],
               timeout=60)
    assert r.returncode == 0 and "sent" in r.out, (r.returncode, r.err)
    assert log.stat().st_size <= cap
    with open(log, "rb") as f:
        f.seek(start)
        tail = f.read()
    lines = [json.loads(x) for x in tail.splitlines() if x.strip()]
    assert lines, "nothing was logged before the cap"
    assert [e["reason"] for e in lines].count("log_full") == 1
    assert lines[-1]["reason"] == "log_full" and lines[-1]["layer"] == "audit", lines[-1]
    assert any(e.get("layer") == "dns" and e.get("verdict") == "deny" for e in lines[:-1])
