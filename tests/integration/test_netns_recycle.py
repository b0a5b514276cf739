"""Recycled network namespaces of deny-all one-shots (src/jail/ahead/recycle.h,
docs/security.md "Recycled network namespaces").

Every test keeps its pool in a directory of its own ($AIRLOCK_NETNS_POOL under
/run/airlock), destroyed at the end (`airlock pool netns drain`, then the directory).

A namespace is identified by its cookie (SO_NETNS_COOKIE, a 64-bit number the kernel
never reuses), not by its nsfs inode: inode numbers of destroyed namespaces are reused.
"""

import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

import hostprobe
from conftest import PY
from recyclepool import pool  # noqa: F401 (the fixture)

SO_NETNS_COOKIE = 71

# What a sandbox can leave in its network namespace, all of it, then exits (the
# background child, holding sockets of its own, is killed when PID 1 exits).
LEAVE_EVERYTHING = r"""
import os, socket, struct, time
def cookie():
    return socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8).hex()
keep = []
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, 7001)); ls.listen(8)
    # connections to other loopback addresses, closed: TIME_WAIT, and TCP metrics
    for i in range(3):
        c = socket.create_connection((addr, 7001)); a, _ = ls.accept()
        c.send(b"x" * 5000); a.recv(5000); c.close(); a.close()
    c = socket.create_connection((addr, 7001)); a, _ = ls.accept()   # established, left
    keep += [ls, c, a]
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    u = socket.socket(fam, socket.SOCK_DGRAM); u.bind((addr, 7002)); keep.append(u)
for dst in ("127.0.0.9", "127.1.2.3"):          # metrics for chosen addresses
    s = socket.socket(); s.bind((dst, 0)); s.listen()
    c = socket.create_connection((dst, s.getsockname()[1])); a, _ = s.accept()
    c.close(); a.close(); s.close()
ab = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); ab.bind(b"\0airlock-left-behind")
ab.listen(); keep.append(ab)
ad = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); ad.bind(b"\0airlock-left-dgram")
keep.append(ad)
if os.fork() == 0:                               # a long-lived child of its own
    os.setsid()
    s = socket.socket(); s.bind(("127.0.0.1", 7003)); s.listen()
    u = socket.socket(socket.AF_UNIX); u.bind(b"\0airlock-child"); u.listen()
    time.sleep(3600)
time.sleep(0.2)
print(cookie())
"""

# What a sandbox sees of its network namespace.
OBSERVE = r"""
import json, os, socket, subprocess
def lines(name):
    with open("/proc/net/" + name) as f:
        return f.read().splitlines()
out = {"cookie": socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8).hex()}
out["lists"] = {n: lines(n)[1:] for n in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6",
                                          "unix", "packet", "ip6_flowlabel")}
out["abstract"] = []
for name in (b"\0airlock-left-behind", b"\0airlock-left-dgram", b"\0airlock-child"):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        try:
            socket.socket(socket.AF_UNIX, kind).connect(name)
            out["abstract"].append(name[1:].decode())
        except OSError:
            pass
free = []
for fam, addr, kind, port in ((socket.AF_INET, "127.0.0.1", socket.SOCK_STREAM, 7001),
                              (socket.AF_INET6, "::1", socket.SOCK_STREAM, 7001),
                              (socket.AF_INET, "127.0.0.1", socket.SOCK_DGRAM, 7002),
                              (socket.AF_INET6, "::1", socket.SOCK_DGRAM, 7002),
                              (socket.AF_INET, "127.0.0.1", socket.SOCK_STREAM, 7003)):
    s = socket.socket(fam, kind)
    s.bind((addr, port))      # no SO_REUSEADDR: free only if nothing holds it
    free.append(port)
out["free"] = free
ip = lambda *a: subprocess.run(["ip", *a], capture_output=True, text=True).stdout
out["links"] = ip("-o", "link")
out["addrs"] = ip("-o", "addr")
out["routes"] = ip("route", "show", "table", "all")
out["rules"] = ip("rule") + ip("-6", "rule")
out["metrics"] = ip("tcp_metrics", "show")
sysctl = {}
for d, _, fs in os.walk("/proc/sys/net"):
    for f in fs:
        try:
            sysctl[os.path.join(d, f)] = open(os.path.join(d, f)).read()
        except OSError as e:
            sysctl[os.path.join(d, f)] = "error %d" % e.errno
out["sysctl"] = sysctl
print(json.dumps(out))
"""



def cookie_of(pool, *flags):
    r = pool.py("import socket; print(socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8)"
                ".hex())", *flags)
    assert r.returncode == 0, r.err
    return r.out.strip()


def observe(pool, *flags):
    r = pool.py(OBSERVE, *flags, timeout=60)
    assert r.returncode == 0, r.err
    return json.loads(r.out)


def test_a_clean_namespace_serves_the_next_run(pool):
    first = cookie_of(pool)
    assert len(pool.ready()) == 1, "the run's own namespace was kept: it was clean"
    assert cookie_of(pool) == first
    assert cookie_of(pool) == first
    assert len(pool.ready()) == 1 and pool.claimed() == []


def test_fresh_netns_flag_neither_takes_nor_gives(pool):
    cookie_of(pool)
    kept = pool.ready()
    a, b = cookie_of(pool, "--fresh-netns"), cookie_of(pool, "--fresh-netns")
    assert a != b
    assert pool.ready() == kept


def test_recycled_namespace_is_indistinguishable_from_a_new_one(pool):
    """A sandbox leaves everything it can in its namespace; the next sandbox in that very
    namespace sees what a sandbox in a new one sees, but for the one documented value."""
    cookie_of(pool)                           # a namespace in the pool, prepared
    r = pool.py(LEAVE_EVERYTHING, timeout=60)
    assert r.returncode == 0, r.err
    dirty = r.out.strip()
    assert len(pool.ready()) == 1, pool.log()
    after = observe(pool)
    fresh = observe(pool, "--fresh-netns")
    assert after["cookie"] == dirty, "not the namespace the first sandbox left"
    assert fresh["cookie"] != dirty
    for name, rows in after["lists"].items():
        assert rows == [], (name, rows)
    assert after["abstract"] == []
    assert after["free"] == [7001, 7001, 7002, 7002, 7003]
    assert after["metrics"] == "" == fresh["metrics"]
    for key in ("links", "addrs", "routes", "rules"):
        strip = lambda s: [" ".join(w for w in l.split() if not w.startswith("valid_lft"))
                           for l in s.splitlines()]
        assert strip(after[key]) == strip(fresh[key]), key
    differ = {k: (after["sysctl"].get(k), fresh["sysctl"].get(k))
              for k in set(after["sysctl"]) | set(fresh["sysctl"])
              if after["sysctl"].get(k) != fresh["sysctl"].get(k)}
    assert differ == {"/proc/sys/net/ipv4/tcp_max_tw_buckets": ("0\n", differ.get(
        "/proc/sys/net/ipv4/tcp_max_tw_buckets", (None, None))[1])}
    assert int(differ["/proc/sys/net/ipv4/tcp_max_tw_buckets"][1]) > 0


@pytest.mark.skipif(not hostprobe.ipv6(), reason="no IPv6: no flow labels to leave")
def test_a_namespace_left_unclean_is_destroyed_and_logged(pool):
    """An IPv6 flow label lingers after its socket (60 s here): the namespace carries it,
    so it is destroyed, logged, and the next run gets another."""
    first = cookie_of(pool)
    leave = r"""
import socket, struct
req = socket.inet_pton(socket.AF_INET6, "::1") + struct.pack("!I", 0x4242) + \
      struct.pack("=BBHHHI", 0, 3, 1, 60, 60, 0)      # GET, exclusive, CREATE, 60 s
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_IPV6, 32, req)            # IPV6_FLOWLABEL_MGR
print(socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8).hex())
"""
    r = pool.py(leave)
    assert r.returncode == 0, r.err
    assert r.out.strip() == first
    assert pool.ready() == [] and pool.claimed() == []
    log = pool.log()
    assert "destroyed: ip6_flowlabel has 1 entries" in log, log
    assert cookie_of(pool) != first


def test_first_use_time_wait_is_not_kept(pool):
    """A namespace of the run's own (default TIME_WAIT) with a TIME_WAIT socket left: not
    put in the pool, logged."""
    src = r"""
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); a, _ = s.accept()
c.close(); a.close(); s.close()
"""
    r = pool.py(src)
    assert r.returncode == 0, r.err
    assert pool.ready() == []
    assert "not kept: sockstat: TCP: inuse 0 orphan" in pool.log() or \
        "not kept: tcp has" in pool.log(), pool.log()


NET_ADMIN_ATTEMPTS = r"""
import errno, json, os, socket, subprocess
res = {}
def sh(name, *argv):
    p = subprocess.run(list(argv), capture_output=True, text=True)
    res[name] = p.returncode != 0
for name, argv in {
        "ip link add": ["ip", "link", "add", "d0", "type", "dummy"],
        "ip addr add": ["ip", "addr", "add", "10.9.9.9/24", "dev", "lo"],
        "ip route add": ["ip", "route", "add", "10.8.0.0/16", "dev", "lo"],
        "ip link set lo down": ["ip", "link", "set", "lo", "down"],
        "ip link set mtu": ["ip", "link", "set", "lo", "mtu", "1400"],
        "ip rule add": ["ip", "rule", "add", "from", "all", "lookup", "7"],
        "tcp_metrics flush": ["ip", "tcp_metrics", "flush", "all"],
        "nft add table": ["nft", "add", "table", "inet", "evil"],
        }.items():
    sh(name, *argv)
for path in ("/proc/sys/net/ipv4/tcp_max_tw_buckets", "/proc/sys/net/ipv4/ip_forward",
             "/proc/sys/net/ipv4/ping_group_range", "/proc/sys/net/core/somaxconn",
             "/proc/sys/net/ipv6/conf/lo/disable_ipv6"):
    try:
        with open(path, "w") as f:
            f.write("1\n")
        res["write " + path] = False
    except OSError:
        res["write " + path] = True
def opt(name, level, o, val):
    s = socket.socket()
    try:
        s.setsockopt(level, o, val)
        res[name] = False
    except OSError as e:
        res[name] = e.errno in (errno.EPERM, errno.EACCES)
opt("SO_MARK", socket.SOL_SOCKET, 36, 1)
opt("IP_TRANSPARENT", socket.IPPROTO_IP, 19, 1)
opt("SO_DEBUG", socket.SOL_SOCKET, socket.SO_DEBUG, 1)
for name, fam, kind, proto in (("raw socket", socket.AF_INET, socket.SOCK_RAW, 1),
                               ("packet socket", socket.AF_PACKET, socket.SOCK_RAW, 0)):
    try:
        socket.socket(fam, kind, proto)
        res[name] = False
    except OSError:
        res[name] = True
print(json.dumps(res))
"""


def test_sandbox_holds_no_net_admin_over_a_recycled_namespace(pool):
    """The namespace was made in the initial user namespace: from inside, every change
    that needs CAP_NET_ADMIN or CAP_NET_RAW over it is refused, and the namespace, still
    clean, goes on serving."""
    first = cookie_of(pool)
    r = pool.py(NET_ADMIN_ATTEMPTS, "--root", timeout=60)
    assert r.returncode == 0, r.err
    refused = json.loads(r.out)
    assert all(refused.values()), {k: v for k, v in refused.items() if not v}
    assert cookie_of(pool) == first, pool.log()
    after = observe(pool)
    assert after["sysctl"]["/proc/sys/net/ipv4/tcp_max_tw_buckets"] == "0\n"
    assert "d0" not in after["links"] and "10.9.9.9" not in after["addrs"]


def test_a_killed_runs_claim_is_destroyed_not_returned(pool, airlock, marker):
    """airlock killed with SIGKILL mid-run: its claim stays in claimed/, and the next
    sweep destroys it (logged); it never goes back to ready/."""
    first = cookie_of(pool)
    pool.settle()
    p = subprocess.Popen([airlock, "run", "--", "/bin/sh", "-c", marker.sleep],
                         env={**os.environ, **pool.env},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not pool.claimed() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.claimed(), "the run did not claim the namespace"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    marker.wait_gone(timeout=5.0)
    assert pool.ready() == []
    second = cookie_of(pool)                  # none ready: a fresh one, and a sweep
    assert second != first
    assert pool.claimed() == []
    assert "destroyed: its run ended without giving it back" in pool.log(), pool.log()


def test_concurrent_runs_never_share_a_namespace(pool):
    """Runs alive at the same time each hold a namespace of their own: a claim is a
    rename(2) only one run can win, and a run that finds none ready makes its own."""
    import concurrent.futures
    for _ in range(3):                        # fill the pool with a few clean ones
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as ex:
            list(ex.map(lambda _: cookie_of(pool), range(3)))
    ready = len(pool.ready())
    assert ready >= 1
    src = ("import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 7100)); "
           "s.listen(); print(s.getsockopt(socket.SOL_SOCKET, 71, 8).hex()); "
           "time.sleep(0.5)")

    def one(_):
        return pool.py(src)

    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as ex:
        results = list(ex.map(one, range(6)))
    for r in results:       # each bound port 7100 of its own namespace: no clash
        assert r.returncode == 0, r.err
    cookies = [r.out.strip() for r in results]
    assert len(set(cookies)) == 6, cookies
    assert pool.claimed() == []


def test_the_host_setting_turns_recycling_off(pool, invoke):
    """/etc/airlock/fresh-netns present: no run takes or keeps a recycled namespace."""
    first = cookie_of(pool)
    assert len(pool.ready()) == 1
    d = pathlib.Path("/etc/airlock")
    made_dir = not d.exists()
    f = d / "fresh-netns"
    if f.exists():
        pytest.skip("the host has recycling turned off already")
    d.mkdir(exist_ok=True)
    try:
        f.touch()
        a, b = cookie_of(pool), cookie_of(pool)
        status = invoke(["pool", "netns", "status"], env=pool.env).out
    finally:
        f.unlink()
        if made_dir:
            d.rmdir()
    assert first not in (a, b) and a != b
    assert len(pool.ready()) == 1              # neither taken nor added to
    assert "off: /etc/airlock/fresh-netns" in status, status
    assert cookie_of(pool) == first            # on again


# Root on the host makes a socket in a ready namespace (as only a process outside the
# sandbox could once the sandbox is gone) and holds it while a run takes the namespace.
HOLD = r"""
import socket, sys, time
fam, kind = {"unix-stream": (socket.AF_UNIX, socket.SOCK_STREAM),
             "unix-dgram": (socket.AF_UNIX, socket.SOCK_DGRAM),
             "netlink": (socket.AF_NETLINK, socket.SOCK_RAW),
             "packet": (socket.AF_PACKET, socket.SOCK_RAW)}[sys.argv[1]]
s = socket.socket(fam, kind, 0)
print(socket.socket().getsockopt(socket.SOL_SOCKET, 71, 8).hex(), flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("kind,proto", [("unix-stream", "UNIX-STREAM"), ("unix-dgram", "UNIX"),
                                        ("netlink", "NETLINK"), ("packet", "PACKET")])
def test_a_socket_held_in_the_namespace_is_found(pool, kind, proto):
    """Any socket of the namespace, of any family, is counted in its /proc/net/protocols:
    the check after the run finds the one held from outside, and the namespace is
    destroyed and logged, never served again."""
    first = cookie_of(pool)
    [name] = pool.ready()
    holder = subprocess.Popen(["nsenter", "--net=%s" % (pool.dir / "ready" / name / "ns"), PY, "-c",
                               HOLD, kind], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == first, "the socket is not in the namespace"
        assert cookie_of(pool) == first, "the run did not take the namespace"
        assert pool.ready() == [] and pool.claimed() == []
        assert "destroyed: protocols: 1 %s socket\n" % proto in pool.log(), pool.log()
    finally:
        holder.kill()
        holder.wait()
    assert cookie_of(pool) != first


def test_the_detached_check_removes_the_runs_cgroups(pool, airlock):
    """A run that recycled its namespace leaves its cgroups to the detached child that
    checks the namespace (its caller's exit does not wait for three rmdirs): once that
    child is done, none of the run's cgroups is left in any hierarchy."""
    first = cookie_of(pool)
    pool.settle()  # that run's namespace back in the pool before this run looks for one
    p = subprocess.Popen([airlock, "run", "--", "true"], env={**os.environ, **pool.env})
    assert p.wait(timeout=30) == 0
    pool.settle()
    assert pool.ready() and cookie_of(pool) == first, "the namespace was not recycled"
    left = [os.path.join(root, d) for root in hostprobe.cgroup_dirs() if os.path.isdir(root)
            for d in os.listdir(root) if d.startswith("run-%d-" % p.pid)]
    assert left == [], left
