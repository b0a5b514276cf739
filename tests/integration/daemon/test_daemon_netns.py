"""Network and IPC namespaces made ahead: the daemon's spawner makes the next sandboxes'
network and IPC namespaces while it waits for a create (src/jail/ahead/spawner.c,
jail_netns_make, jail_ipcns_make).

What must hold: every sandbox gets a namespace nobody had before (none is shared with a
live sandbox, none is handed on after one ends: a reused one would keep its loopback
counters), with its loopback up and nothing else; and the spawner itself stays in the
host's namespace, so the agents' sockets are made there and no sandbox sees them.
"""
import os

import hostprobe

from .conftest import _proc_field, wait_for

PROBE = r"""
import os, socket
ns = os.readlink("/proc/self/ns/net")
with open("/proc/net/dev") as f:
    rows = [l.split() for l in f.readlines()[2:]]
ifaces = {r[0].rstrip(":"): (int(r[2]), int(r[10])) for r in rows}  # rx, tx packets
print("NS", ns)
print("IFACES", " ".join(sorted(ifaces)))
print("LO", *ifaces.get("lo", (-1, -1)))
"""

TRAFFIC = r"""
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); a, _ = s.accept()
c.sendall(b"x" * 1000); print("GOT", len(a.recv(4096)))
"""


def probe(api, sid):
    out = api.run(sid, "/usr/bin/python3", "-c", PROBE)
    assert out.exit["exit_code"] == 0, out
    got = dict(line.split(" ", 1) for line in out.stdout.decode().splitlines())
    return got["NS"], got["IFACES"].split(), tuple(int(x) for x in got["LO"].split())


def test_every_sandbox_gets_a_namespace_never_used_before(api, make_sandbox):
    host_ns = os.readlink("/proc/self/ns/net")
    first = make_sandbox()
    ns1, ifaces, lo = probe(api, first)
    assert ifaces == ["lo"] and lo == (0, 0), (ifaces, lo)
    # Traffic on its loopback: a namespace handed on would show these counters.
    out = api.run(first, "/usr/bin/python3", "-c", TRAFFIC)
    assert out.exit["exit_code"] == 0 and b"GOT 1000" in out.stdout, out
    assert probe(api, first)[2][0] > 0
    seen = {ns1}
    for _ in range(4):
        sid = make_sandbox()
        ns, ifaces, lo = probe(api, sid)
        assert ns != host_ns and ns not in seen, (ns, seen)
        assert ifaces == ["lo"] and lo == (0, 0), (sid, ifaces, lo)
        seen.add(ns)
    api.stop(first)
    for _ in range(3):  # made after one ended: still never its namespace (counters 0)
        sid = make_sandbox()
        ns, ifaces, lo = probe(api, sid)
        assert ifaces == ["lo"] and lo == (0, 0), (sid, ifaces, lo)


def test_loopback_is_up_in_a_namespace_made_ahead(api, sandbox):
    out = api.run(sandbox, "/usr/bin/python3", "-c", TRAFFIC)
    assert out.exit["exit_code"] == 0 and b"GOT 1000" in out.stdout, out


def spawner_pids(daemon_pid):
    """The daemon's spawner process(es): comm airlockd-spawn, child of the daemon."""
    found = []
    for d in os.listdir("/proc"):
        st = _proc_field(d, "stat") if d.isdigit() else None
        if st and st[st.index(b"(") + 1:st.rindex(b")")] == b"airlockd-spawn" and \
                int(st[st.rindex(b")") + 2:].split()[1]) == daemon_pid:
            found.append(int(d))
    return found


def test_the_spawner_stays_in_the_hosts_namespace(api, daemon, make_sandbox):
    sid = make_sandbox()
    host_ns = os.readlink("/proc/self/ns/net")
    spawners = spawner_pids(daemon.pid)
    assert spawners, "no spawner process found"
    # Between creates it is home (it leaves only for the ~1 ms of making a namespace).
    assert wait_for(lambda: all(os.readlink(f"/proc/{p}/ns/net") == host_ns
                                for p in spawners), timeout=5)
    # The agent's listening socket was made in the host's namespace: the sandbox's own
    # list of unix sockets does not show its host path.
    out = api.sh(sid, "cat /proc/net/unix")
    assert out.exit["exit_code"] == 0, out
    assert str(daemon.state_dir).encode() not in out.stdout, out.stdout
    with open("/proc/net/unix") as f:
        assert any(sid in line for line in f), "the agent socket is not in the host's list"


# --- IPC namespaces made ahead (jail_ipcns_make): the same rules ---------------------

IPC_PROBE = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("NS", os.readlink("/proc/self/ns/ipc"))
with open("/proc/sysvipc/shm") as f:
    print("SHM", len(f.readlines()) - 1)
# Leave a SysV segment behind (IPC_PRIVATE, 4 KiB): a namespace handed on would show it.
print("MADE", libc.shmget(0, 4096, 0o1600))
"""


def ipc_probe(api, sid):
    out = api.run(sid, "/usr/bin/python3", "-c", IPC_PROBE)
    assert out.exit["exit_code"] == 0, out
    got = dict(line.split(" ", 1) for line in out.stdout.decode().splitlines())
    assert int(got["MADE"]) >= 0, got
    return got["NS"], int(got["SHM"])


def test_every_sandbox_gets_an_ipc_namespace_made_ahead_never_used_before(
        api, daemon, make_sandbox):
    host_ns = os.readlink("/proc/self/ns/ipc")
    seen = set()
    for _ in range(4):
        spawners = spawner_pids(daemon.pid)
        assert spawners, "no spawner process found"
        def held():
            return set().union(*(hostprobe.fd_links(p, "ipc:[") for p in spawners))
        assert wait_for(lambda: len(held()) == 2, timeout=5), held()  # the spare too
        ahead = held()
        for p in spawners:  # the spawner itself is back in the host's
            assert os.readlink(f"/proc/{p}/ns/ipc") == host_ns
        sid = make_sandbox()
        ns, shm = ipc_probe(api, sid)
        assert ns in ahead and ns != host_ns and ns not in seen, (ns, ahead, seen)
        assert shm == 0, f"sandbox {sid} sees {shm} SysV segment(s) it did not make"
        seen.add(ns)
