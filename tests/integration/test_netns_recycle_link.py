"""Recycled linked pairs of allowlisted one-shots (src/jail/ahead/recycle.h,
docs/security.md "Recycled network namespaces"): the sandbox's network namespace and its
gateway's, with the link and the ruleset, reused by the next allowlisted run once both are
proven clean.

A sandbox namespace is identified by its cookie (SO_NETNS_COOKIE, never reused); every
test keeps its pool in a directory of its own and drains it at the end. A pair rests
JAIL_RECYCLE_REST_MS (120 ms) after its run before it can be taken again: the tests wait
REST between runs that should share one.
"""

import concurrent.futures
import json
import os
import pathlib
import re
import signal
import subprocess
import time


from conftest import PY
from net.conftest import gateways_of
from recyclepool import pool  # noqa: F401 (the fixture)
from test_netns_recycle import OBSERVE

ALLOW = ("--allow", "example.test")
REST = 0.15

COOKIE = ("import socket; print(socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8)"
          ".hex())")

# Everything a sandbox with a link can leave: connections to the gateway's DNS and proxy
# ports (closed, and left open at the end), a transparent connection the gateway refuses,
# UDP and ICMP the ruleset drops (conntrack entries, log-limit tokens), DNS questions, the
# neighbour entry of the gateway.
LEAVE_EVERYTHING = r"""
import os, socket, time
keep = []
for port in (53, 3128):
    for i in range(3):
        c = socket.create_connection(("100.96.0.1", port), timeout=5)
        c.send(b"GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n")
        c.close()
    keep.append(socket.create_connection(("100.96.0.1", port), timeout=5))
try:
    t = socket.create_connection(("192.0.2.7", 80), timeout=5)
    t.send(b"x"); t.recv(10)
except OSError:
    pass
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(40):
    u.sendto(b"x", ("192.0.2.9", 4000 + i))
keep.append(u)
try:
    socket.gethostbyname("nowhere.test")
except OSError:
    pass
try:
    socket.getaddrinfo("example.test", 443)
except OSError:
    pass
if os.fork() == 0:
    os.setsid()
    keep.append(socket.create_connection(("100.96.0.1", 3128), timeout=5))
    time.sleep(3600)
time.sleep(0.2)
print(socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8).hex())
"""

# What the ruleset must drop and the gateway log, in the sandbox's words.
PROBE = r"""
import socket
try:
    s = socket.create_connection(("192.0.2.1", 80), timeout=3)
    s.send(b"GET / HTTP/1.0\r\nHost: 192.0.2.1\r\n\r\n")
    print("tcp", s.recv(100))
except OSError as e:
    print("tcp refused", e)
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("192.0.2.1", 123))
try:
    print("dns", socket.gethostbyname("nothere.test"))
except OSError as e:
    print("dns refused", e)
print(socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8).hex())
"""



def cookie_of(pool, *flags):
    r = pool.py(COOKIE, *ALLOW, *flags)
    assert r.returncode == 0, r.err
    return r.out.strip()


def gw_of(pool, entry, sub="ready"):
    """The pinned gateway namespace of a pair."""
    [d] = pool.dir.glob("link-*")
    return d / sub / entry / "gw"


WAITING_TCP = ["LISTEN 100.96.0.1:3128", "LISTEN 100.96.0.1:3129", "LISTEN 100.96.0.1:53"]


def tcp_states(ns):
    """Sorted "STATE LOCAL" of every TCP socket of namespace ns."""
    rows = in_ns(ns, "ss", "-Htan").stdout.splitlines()
    return sorted(f"{r.split()[0]} {r.split()[3]}" for r in rows if r.strip())


def waiting_gateways(pool):
    """{pid: cmdline} of the gateways waiting in the pool's pairs (--pool-serve under
    the pool's directory), once the checks under way are done."""
    pool.settle()
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = pathlib.Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--pool-serve" in argv and str(pool.dir).encode() in b" ".join(argv):
            found[int(d)] = argv
    return found


def running(pid):
    """pid exists and is not a zombie (a reaped or unreaped dead process is not running)."""
    try:
        st = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


def start_time(pid):
    st = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return int(st[st.rindex(")") + 2:].split()[19])


def in_ns(ns, *argv):
    return subprocess.run(["nsenter", f"--net={ns}", *argv], capture_output=True,
                          text=True, timeout=30)


def test_a_clean_pair_serves_the_next_allowlisted_run(pool):
    first = cookie_of(pool)
    assert len(pool.pairs()) == 1, pool.log()
    assert pool.ready() == [], "a deny-all namespace was made for an allowlist"
    time.sleep(REST)
    assert cookie_of(pool) == first
    time.sleep(REST)
    assert cookie_of(pool) == first
    assert len(pool.pairs()) == 1 and pool.pairs("claimed") == []


def test_a_pair_rests_before_it_serves_again(pool):
    """Taken at once after its run, a pair could carry the ruleset's spent log limit: the
    next run makes a pair of its own instead, and either serves once rested."""
    first = cookie_of(pool)
    second = cookie_of(pool)
    assert second != first
    assert len(pool.pairs()) == 2, pool.log()
    time.sleep(REST)
    assert cookie_of(pool) in (first, second)


def test_fresh_netns_flag_neither_takes_nor_gives_a_pair(pool):
    cookie_of(pool)
    kept = pool.pairs()
    time.sleep(REST)
    a, b = cookie_of(pool, "--fresh-netns"), cookie_of(pool, "--fresh-netns")
    assert a != b
    assert pool.pairs() == kept


def test_recycled_pair_is_indistinguishable_from_a_new_one(pool):
    """A sandbox leaves everything it can in its pair; the next sandbox in that very pair
    sees what a sandbox in a new pair sees, and the gateway's side is as it was made."""
    cookie_of(pool)
    time.sleep(REST)
    r = pool.py(LEAVE_EVERYTHING, *ALLOW, timeout=60)
    assert r.returncode == 0, r.err
    dirty = r.out.strip()
    [entry] = pool.pairs()
    assert pool.log() == ""
    gw = gw_of(pool, entry)
    assert in_ns(gw, "cat", "/proc/sys/net/netfilter/nf_conntrack_count").stdout.strip() \
        in ("", "0")
    assert in_ns(gw, "ip", "neigh", "show").stdout.strip() == ""
    # the next run's gateway waits there: its listeners, nothing else (no connection of
    # the first sandbox's, no TIME_WAIT)
    assert tcp_states(gw) == WAITING_TCP
    assert in_ns(gw, "ss", "-Hanu").stdout.split()[3:4] == ["100.96.0.1:53"]
    time.sleep(REST)
    after = json.loads(pool.py(OBSERVE, *ALLOW, timeout=60).out)
    fresh = json.loads(pool.py(OBSERVE, *ALLOW, "--fresh-netns", timeout=60).out)
    assert after["cookie"] == dirty, "not the pair the first sandbox left"
    assert fresh["cookie"] != dirty
    for name, rows in after["lists"].items():
        assert rows == [], (name, rows)
    assert after["metrics"] == "" == fresh["metrics"]
    mac = re.compile(r"([0-9a-f]{2}:){5}[0-9a-f]{2}")    # each veth's is random
    for key in ("links", "addrs", "routes", "rules"):
        strip = lambda s: [" ".join(mac.sub("MAC", w) for w in l.split()
                                    if not w.startswith(("valid_lft", "link-netnsid")))
                           for l in s.splitlines()]
        assert strip(after[key]) == strip(fresh[key]), key
    differ = {k for k in set(after["sysctl"]) | set(fresh["sysctl"])
              if after["sysctl"].get(k) != fresh["sysctl"].get(k)}
    assert differ == set(), differ


def test_egress_is_enforced_and_logged_in_a_recycled_pair(pool, tmp_path):
    """The same refusals, each logged, in a run's own pair and in the recycled one."""
    cookies = []
    for i in range(2):
        log = tmp_path / f"egress{i}.log"
        r = pool.py(PROBE, *ALLOW, "--egress-log", str(log), timeout=60)
        assert r.returncode == 0, r.err
        assert "tcp refused" in r.out or "tcp b''" in r.out, r.out
        assert "dns refused" in r.out, r.out
        cookies.append(r.out.split()[-1])
        lines = [json.loads(l) for l in log.read_text().splitlines()]
        reasons = {(l["layer"], l["verdict"], l["reason"]) for l in lines}
        assert ("transparent", "deny", "ip_literal") in reasons, reasons
        assert ("nft", "deny", "udp_dropped") in reasons, reasons
        assert ("dns", "deny", "not_listed") in reasons, reasons
        time.sleep(REST)
    assert cookies[0] == cookies[1], pool.log()


def test_a_spent_log_limit_does_not_hide_the_next_sandboxs_drops(pool, tmp_path):
    """One sandbox drops packets far past the ruleset's log limit (50/s, burst 5) until its
    end; the next sandbox in the same pair still gets its first drop logged."""
    flood = (COOKIE.replace("print(", "s = socket.socket(socket.AF_INET, "
                            "socket.SOCK_DGRAM)\nfor i in range(500): s.sendto(b'x', "
                            "('192.0.2.3', 9))\nprint(", 1))
    r = pool.py(flood, *ALLOW, timeout=60)
    assert r.returncode == 0, r.err
    time.sleep(REST)
    log = tmp_path / "next.log"
    one = ("import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', "
           "('192.0.2.4', 9)); " + COOKIE)
    r2 = pool.py(one, *ALLOW, "--egress-log", str(log), timeout=60)
    assert r2.returncode == 0, r2.err
    assert r2.out.strip() == r.out.strip(), "not the pair the flood left"
    drops = [json.loads(l) for l in log.read_text().splitlines()
             if '"udp_dropped"' in l]
    assert drops and drops[0]["address"].startswith("192.0.2.4"), log.read_text()


def test_a_pair_whose_gateway_ruleset_changed_is_destroyed(pool, airlock):
    """Anything that changes the gateway's ruleset while the pair is in use (here the host,
    standing in for a gateway gone wrong) moves its nf_tables generation: the pair is
    destroyed, logged, and never serves again."""
    first = cookie_of(pool)
    time.sleep(REST)
    pool.settle()
    p = subprocess.Popen([airlock, "run", *ALLOW, "--", "/bin/sh", "-c", "sleep 1"],
                         env={**os.environ, **pool.env},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    claimed = []
    while not claimed and time.monotonic() < deadline:
        claimed = [n for d in pool.dir.glob("link-*") for n in os.listdir(d / "claimed")]
        time.sleep(0.01)
    assert claimed, "the run did not claim the pair"
    t = in_ns(gw_of(pool, claimed[0], "claimed"), "nft", "add", "table", "inet", "extra")
    assert t.returncode == 0, t.stderr
    assert p.wait(timeout=30) == 0
    assert pool.pairs() == [], "a pair with a changed ruleset went back"
    assert "its ruleset changed" in pool.log(), pool.log()
    time.sleep(REST)
    assert cookie_of(pool) != first


def test_a_killed_runs_pair_is_destroyed_not_returned(pool, airlock, marker):
    first = cookie_of(pool)
    time.sleep(REST)
    pool.settle()
    p = subprocess.Popen([airlock, "run", *ALLOW, "--", "/bin/sh", "-c", marker.sleep],
                         env={**os.environ, **pool.env},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not pool.pairs("claimed") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.pairs("claimed"), "the run did not claim the pair"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    marker.wait_gone(timeout=5.0)
    assert pool.pairs() == []
    second = cookie_of(pool)                  # none ready: a pair of its own, and a sweep
    assert second != first
    assert pool.pairs("claimed") == []
    assert "destroyed: its run ended without giving it back" in pool.log(), pool.log()


def test_concurrent_allowlisted_runs_never_share_a_pair(pool):
    for _ in range(2):
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
            list(ex.map(lambda _: cookie_of(pool), range(4)))
        time.sleep(REST)
    assert len(pool.pairs()) >= 2
    src = ("import socket, time; s = socket.socket(); s.bind(('100.96.0.2', 7100)); "
           "s.listen(); print(s.getsockopt(socket.SOL_SOCKET, 71, 8).hex()); "
           "time.sleep(0.5)")
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as ex:
        results = list(ex.map(lambda _: pool.py(src, *ALLOW), range(6)))
    for r in results:
        assert r.returncode == 0, r.err
    cookies = [r.out.strip() for r in results]
    assert len(set(cookies)) == 6, cookies
    assert pool.pairs("claimed") == []


def test_status_counts_pairs(pool, invoke):
    cookie_of(pool)
    out = invoke(["pool", "netns", "status"], env=pool.env).out
    assert "0 ready, 1 linked pairs ready" in out, out
    assert pathlib.Path(pool.dir / "lock").exists()


def test_idle_pairs_are_destroyed_down_to_four(pool):
    """After a burst, pairs unused for 60 s are destroyed at the next put-back, down to 4
    ready (each holds ~320 KiB of kernel memory)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=7) as ex:
        list(ex.map(lambda _: cookie_of(pool), range(7)))
    made = pool.pairs()
    assert len(made) >= 5, made
    [d] = pool.dir.glob("link-*")
    old = time.time() - 120
    for name in made:
        os.utime(d / "ready" / name, (old, old))
    cookie_of(pool)
    assert len(pool.pairs()) == 4, pool.pairs()
    assert pool.pairs("claimed") == []


def test_the_next_run_is_served_by_a_gateway_that_waited_in_its_pair(pool, airlock, tmp_path):
    """After a run, its pair is put back with a new gateway waiting in it (never the one
    that served: that one is gone); the next allowlisted run takes that gateway over its
    socket instead of starting one, and it serves that run alone, logging under its id."""
    first = cookie_of(pool)
    [entry] = pool.pairs()
    [d] = pool.dir.glob("link-*")
    [sock] = [f for f in (d / "ready" / entry).iterdir() if f.name.startswith("gw-")]
    assert sock.is_socket() and sock.name.endswith(".sock"), sock
    waiting = waiting_gateways(pool)
    assert len(waiting) == 1, waiting
    [w] = waiting
    time.sleep(REST)
    log = tmp_path / "egress.log"
    p = subprocess.Popen([airlock, "run", *ALLOW, "--egress-log", str(log), "--", PY, "-c",
                          "import socket, time\ntry:\n socket.gethostbyname('no.test')\n"
                          "except OSError:\n pass\n" + COOKIE.replace("print(", "c = (") +
                          "\nprint(c, flush=True)\ntime.sleep(1)"],
                         env={**os.environ, **pool.env}, stdout=subprocess.PIPE, text=True)
    cookie = p.stdout.readline().strip()
    serving = gateways_of(p.pid)
    assert p.wait(timeout=30) == 0
    assert cookie == first, "not the pair the first run left"
    assert list(serving) == [w], (serving, w)   # the waiting one, not a child of the run
    lines = [json.loads(l) for l in log.read_text().splitlines()]
    assert lines and {l["sandbox"] for l in lines} == {lines[0]["sandbox"]}, lines
    assert lines[0]["sandbox"].startswith(f"run-{p.pid}-"), lines[0]
    assert any(l["name"] == "no.test" and l["reason"] == "not_listed" for l in lines), lines
    now = waiting_gateways(pool)
    assert len(now) == 1 and w not in now, (now, w)  # it left with its run; a new one waits
    [w2] = now
    assert start_time(w2) > start_time(w) if os.path.exists(f"/proc/{w}") else True
    assert pool.log() == ""


def test_without_an_egress_log_the_pairs_check_ends_its_gateway(pool, airlock):
    """With no egress log wanted, `airlock run` neither signals nor closes its gateway on
    its way out (the gateway's exit would run on its CPU first): it hands both to the
    pair's detached check, which kills the gateway before the check. Once the check is
    done, the gateway that served is gone (nothing of it left running), the pair is back
    and one new gateway waits in it."""
    cookie_of(pool)                       # a pair with a gateway waiting
    [w] = waiting_gateways(pool)
    time.sleep(REST)
    p = subprocess.Popen([airlock, "run", *ALLOW, "--", PY, "-c",
                          COOKIE.replace("print(", "c = (") +
                          "\nprint(c, flush=True)\nimport time; time.sleep(0.5)"],
                         env={**os.environ, **pool.env}, stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    serving = gateways_of(p.pid)
    assert list(serving) == [w], (serving, w)
    assert p.wait(timeout=30) == 0
    now = waiting_gateways(pool)          # settles: the detached check is done
    assert not running(w), f"the gateway that served ({w}) still runs"
    assert len(now) == 1 and w not in now, (now, w)
    assert len(pool.pairs()) == 1 and pool.log() == "", pool.log()


def test_a_policy_with_rules_takes_no_pair_with_a_waiting_gateway(pool, tmp_path):
    """The waiting gateway is the lite one (no TLS termination): a policy with rules makes a
    pair of its own and leaves the waiting one as it is."""
    first = cookie_of(pool)
    waiting = waiting_gateways(pool)
    time.sleep(REST)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps({"allow": {"rules.test": [
        {"transform": [{"headers": {"X-Test": "1"}}]}]}}))
    r = pool.py(COOKIE, "--policy", str(pol))
    assert r.returncode == 0, r.err
    assert r.out.strip() != first
    assert set(waiting) <= set(waiting_gateways(pool))
    time.sleep(REST)
    assert cookie_of(pool) in (first, r.out.strip())


def test_a_pair_whose_waiting_gateway_is_gone_is_destroyed(pool):
    """A waiting gateway that died (here killed) cannot take the next run's policy: the run
    destroys that pair, says why in the log, and runs in a pair of its own."""
    first = cookie_of(pool)
    [w] = waiting_gateways(pool)
    os.kill(w, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{w}/exe") and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(REST)
    second = cookie_of(pool)
    assert second != first
    assert "its waiting gateway could not be claimed" in pool.log(), pool.log()
    assert len(pool.pairs()) == 1 and pool.pairs("claimed") == []


def test_drain_sends_the_waiting_gateways_away(pool, invoke):
    for _ in range(2):
        cookie_of(pool)
    assert waiting_gateways(pool)
    invoke(["pool", "netns", "drain"], env=pool.env)
    deadline = time.monotonic() + 5
    while waiting_gateways(pool) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert waiting_gateways(pool) == {}


def _waiting_gateway_in(tmp, sub, airlock):
    """A lite gateway waiting with --idle-exit 1 in a pair entry TMP/SUB/n1 whose gateway
    namespace is a new one pinned there (no link: it only has to listen)."""
    entry = tmp / sub / "n1"
    entry.mkdir(parents=True)
    (tmp / "claimed").mkdir(exist_ok=True)
    (entry / "gw").touch()
    subprocess.run(["unshare", f"--net={entry / 'gw'}", "true"], check=True)
    lite = pathlib.Path(airlock).parent / "airlock-gateway-lite"
    sock = entry / "gw-test.sock"
    p = subprocess.Popen([str(lite), "--pool-serve", str(sock), "--pooled-netns",
                          str(entry / "gw"), "--sandbox", "pool", "--idle-exit", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sock.is_socket(), "the gateway never listened"
    return p, sock


def _unpin_all(tmp):
    for gw in tmp.glob("*/*/gw"):
        subprocess.run(["umount", str(gw)], check=False)


def test_an_unclaimed_waiting_gateway_takes_its_pair_and_leaves(airlock, tmp_path):
    """A gateway nobody claims leaves after its idle time (60 s for airlock's; 1 s here),
    taking its ready pair first as a run would (rename into claimed/idle-NAME, destroyed by
    the pool's next sweep), so that no run can be claiming it as it goes."""
    root = tmp_path / "pool"
    p, sock = _waiting_gateway_in(root, "ready", airlock)
    try:
        assert p.wait(timeout=15) == 0
        assert not (root / "ready" / "n1").exists()
        assert (root / "claimed" / "idle-n1" / "gw").exists()
        assert not (root / "claimed" / "idle-n1" / sock.name).exists()
    finally:
        if p.poll() is None:
            p.kill()
        _unpin_all(root)


def test_a_waiting_gateway_whose_pair_was_claimed_keeps_waiting_for_its_run(airlock,
                                                                           tmp_path):
    """The pair was taken by a run (renamed into claimed/) when the idle time ran out: the
    gateway must not leave, the run's claim is on its way."""
    root = tmp_path / "pool"
    p, sock = _waiting_gateway_in(root, "claimed", airlock)
    try:
        time.sleep(2.5)  # idle 1 s, looked at every second
        assert p.poll() is None, "it left a pair a run had claimed"
        assert sock.is_socket()
    finally:
        p.kill()
        p.wait()
        _unpin_all(root)


def test_a_pair_its_idle_gateway_took_is_destroyed_at_the_next_put_back(pool):
    """What an idle waiting gateway leaves (its pair in claimed/idle-NAME) is destroyed by
    the next run's put-back, logged, and never served again."""
    first = cookie_of(pool)
    second = cookie_of(pool)            # no rest between them: two pairs
    assert len(pool.pairs()) == 2, pool.log()
    [d] = pool.dir.glob("link-*")
    name = pool.pairs()[0]
    os.rename(d / "ready" / name, d / "claimed" / f"idle-{name}")  # as the gateway does
    time.sleep(REST)
    third = cookie_of(pool)
    assert third in (first, second)
    assert pool.pairs("claimed") == [], pool.pairs("claimed")
    assert "idle: nobody claimed its waiting gateway" in pool.log(), pool.log()
    assert len(pool.pairs()) == 1
