"""The kernel's per-user budgets: a sandbox spends its own, never host root's or a neighbour's.

The kernel counts inotify instances, pending signals, POSIX message-queue bytes (and
more) per (user namespace, uid), and charges each count to every ancestor pair as
well: in the host's namespace, to the owner of the sandbox's user namespace. Each
attack below holds as much of one budget as the sandbox can get, then checks from
the host, while it is held, that host root and a second sandbox still get theirs.
(src/jail/userns.c makes each sandbox's namespace as its own host uid.)
"""

import fcntl
import json
import os
import resource
import struct
import subprocess
import textwrap

import pytest

from ._util import PY

NS_GET_OWNER_UID = 0xB704

# Attacks: each takes all it can of one budget, prints {"held": n, ...} and sleeps.
INOTIFY = r"""
import ctypes, json, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print(json.dumps({"held": len(fds), "errno": ctypes.get_errno()}), flush=True)
time.sleep(120)
"""

SIGPENDING = r"""
import ctypes, json, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
sigs = set(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
class sigval(ctypes.Union):
    _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]
n, err = 0, 0
while n < 1000000:
    if libc.sigqueue(os.getpid(), signal.SIGRTMIN + n % 8, sigval(i=n)) != 0:
        err = ctypes.get_errno()
        break
    n += 1
print(json.dumps({"held": n, "errno": err}), flush=True)
time.sleep(120)
"""

# A queue is made (and its bytes charged) before it is opened; in a sandbox the open
# itself is then refused by Landlock (EACCES: the queue's file is outside every path the
# ruleset allows), but the queue stays. O_EXCL again tells that it exists.
MQ_PRELUDE = r"""
import ctypes, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
class attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long),
                ("msgsize", ctypes.c_long), ("curmsgs", ctypes.c_long),
                ("pad", ctypes.c_long * 4)]
libc.mq_open.restype = ctypes.c_int
def make_queue(name):
    a = attr(0, 10, 8192, 0)
    flags = os.O_CREAT | os.O_EXCL | os.O_RDWR
    fd = libc.mq_open(name, flags, 0o600, ctypes.byref(a))
    err = ctypes.get_errno()
    if fd >= 0:
        return 0
    if err == 13 and libc.mq_open(name, flags, 0o600, ctypes.byref(a)) < 0 \
            and ctypes.get_errno() == 17:
        return 0  # made, then its open refused
    return err
"""

MQUEUE = MQ_PRELUDE + r"""
held, err = 0, 0
while held < 1000:
    err = make_queue(b"/q%d" % held)
    if err:
        break
    held += 1
print(json.dumps({"held": held, "errno": err}), flush=True)
time.sleep(120)
"""

# What a neighbour (or host root) must still get while the attack holds its budget.
PROBES = {
    "inotify": r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
print(json.dumps({"ok": fd >= 0, "errno": ctypes.get_errno()}))
""",
    "sigpending": r"""
import ctypes, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
class sigval(ctypes.Union):
    _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]
q = libc.sigqueue(os.getpid(), signal.SIGRTMIN, sigval(i=1))
qe = ctypes.get_errno()
tid = ctypes.c_void_p()
t = libc.timer_create(1, None, ctypes.byref(tid))  # CLOCK_MONOTONIC, SIGALRM
te = ctypes.get_errno()
print(json.dumps({"ok": q == 0 and t == 0, "sigqueue": [q, qe], "timer_create": [t, te]}))
""",
    "mqueue": MQ_PRELUDE + r"""
name = b"/airlock-probe-%d" % os.getpid()
err = make_queue(name)
libc.mq_unlink(name)
print(json.dumps({"ok": err == 0, "errno": err}))
""",
}

ATTACKS = {"inotify": INOTIFY, "sigpending": SIGPENDING, "mqueue": MQUEUE}


def owner_of_userns(pid):
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    try:
        buf = bytearray(4)
        fcntl.ioctl(fd, NS_GET_OWNER_UID, buf)
        return struct.unpack("I", buf)[0]
    finally:
        os.close(fd)


def host_probe(kind):
    r = subprocess.run([PY, "-c", PROBES[kind]], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def attacker(spawn, marker):
    """Start an attack sandbox; returns (its first JSON line, a pid inside it)."""
    started = []

    def start(kind):
        p = spawn(["--timeout", "100s", "--", PY, "-c",
                   ATTACKS[kind] + f"\n# {marker}"], stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
        started.append(p)
        line = p.stdout.readline()
        assert line, p.stderr.read()[-2000:] if p.poll() is not None else "no output"
        pids = marker.wait_present(prefixes=(PY,))
        assert pids, "the attack's process is not visible on the host"
        return json.loads(line), pids[0]

    yield start
    for p in started:
        p.kill()
        p.communicate()


@pytest.mark.parametrize("kind", ["inotify", "sigpending", "mqueue"])
def test_a_sandbox_cannot_spend_host_roots_budget(attacker, run, kind):
    held, pid = attacker(kind)
    # the attack really took a budget to its end (it hit a limit, not a loop bound)
    assert held["held"] > 0 and held["errno"] != 0, held
    # its user namespace is owned by its own unprivileged host uid, not by root
    owner = owner_of_userns(pid)
    assert owner >= 0x40000000, f"the sandbox's user namespace is owned by host uid {owner}"
    # host root still gets its own, while the attack holds everything it could take
    got = host_probe(kind)
    assert got["ok"], (f"host root refused {kind} while a sandbox holds {held}", got)
    # and a neighbour sandbox gets its own too
    r = run(["--", PY, "-c", PROBES[kind]])
    assert r.returncode == 0, r.err
    got = json.loads(r.out.strip().splitlines()[-1])
    assert got["ok"], (f"a neighbour sandbox refused {kind} while another holds {held}", got)


def test_a_sandbox_has_its_own_ceilings(run):
    """The rlimits a sandbox's namespace is made with bound every process in it."""
    r = run(["--", PY, "-c", textwrap.dedent("""
        import resource, json
        print(json.dumps({k: resource.getrlimit(getattr(resource, k)) for k in
              ("RLIMIT_SIGPENDING", "RLIMIT_MSGQUEUE", "RLIMIT_NOFILE")}))
    """)])
    assert r.returncode == 0, r.err
    lim = json.loads(r.out)
    # each is the sandbox's ceiling, or the caller's hard limit where that is lower
    for name, want in (("RLIMIT_SIGPENDING", 4096), ("RLIMIT_MSGQUEUE", 819200),
                       ("RLIMIT_NOFILE", 65536)):
        v = min(want, resource.getrlimit(getattr(resource, name))[1])
        assert lim[name] == [v, v], (name, lim)
