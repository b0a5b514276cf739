"""Roots made ahead: the daemon's spawner builds the next sandboxes' root filesystems, each
in a mount namespace of its own, while it waits for a create (src/jail/ahead/spawner.c,
jail_rootfs_ahead), for the settings of the last create; a create with those settings
joins one and only finishes it (owner of /workspace and /home/user, /proc). It keeps
AHEAD of them: the first made as soon as a create took one, the spare once creates pause.

What must hold: the root a sandbox joins was never any other sandbox's (each is used
once, and one made after a sandbox ended is still a fresh one); it is the same root an
inline build gives (same mounts, owners, sizes); a create with other settings builds its
own root with those settings; and the spawner itself stays in the host's mount namespace.
"""
import os
import subprocess

from .conftest import AIRLOCK_BIN, held_mount_namespaces, wait_for
from .test_daemon_netns import spawner_pids

AHEAD = 2  # AHEAD_SETS in src/jail/ahead/spawner.c

MOUNTS = r"""
import os
ns = os.readlink("/proc/self/ns/mnt")
with open("/proc/self/mountinfo") as f:
    rows = [l.split() for l in f]
points = sorted(r[4] for r in rows)
st = os.statvfs("/workspace")
print("NS", ns)
print("POINTS", " ".join(points))
print("DISK", st.f_blocks * st.f_frsize)
print("DEV", os.stat("/").st_dev)
print("OWN", os.stat("/workspace").st_uid, os.stat("/home/user").st_uid, os.stat("/").st_uid)
print("SEEN", " ".join(sorted(n for d in ("/workspace", "/tmp", "/home/user", "/dev/shm")
                              for n in os.listdir(d) if n.startswith("mark-"))))
"""


def probe(api, sid):
    out = api.run(sid, "/usr/bin/python3", "-c", MOUNTS)
    assert out.exit["exit_code"] == 0, out
    got = dict((line.split(" ", 1) + [""])[:2] for line in out.stdout.decode().splitlines())
    return {"ns": got["NS"], "points": got["POINTS"].split(), "disk": int(got["DISK"]),
            "dev": got["DEV"], "own": got["OWN"].split(), "seen": got["SEEN"].split()}


def held_roots(daemon):
    """mnt:[...] namespaces the spawner holds open (the roots made ahead). The host's own
    is not one: the spawner holds it for a moment while it makes a root ahead, to come
    back to it (jail_rootfs_ahead)."""
    held = set()
    for p in spawner_pids(daemon.pid):
        held |= held_mount_namespaces(p)
    return held - {os.readlink("/proc/self/ns/mnt")}


def all_held(daemon):
    """The roots made ahead, once the spawner holds AHEAD of them (never more)."""
    got = {}

    def ready():
        got["h"] = held_roots(daemon)
        assert len(got["h"]) <= AHEAD, got["h"]
        return len(got["h"]) == AHEAD
    assert wait_for(ready, timeout=5), f"spawner holds {got.get('h')} (want {AHEAD} roots)"
    return got["h"]


def mark(api, sid, tag):
    out = api.sh(sid, " && ".join(f"echo x > {d}/mark-{tag}"
                                  for d in ("/workspace", "/tmp", "/home/user", "/dev/shm")))
    assert out.exit["exit_code"] == 0, out


def test_each_sandbox_joins_a_root_never_used_before(api, daemon, make_sandbox):
    first = make_sandbox()
    info = probe(api, first)
    assert info["seen"] == [], info
    mark(api, first, "first")
    seen_ns, seen_dev = {info["ns"]}, {info["dev"]}
    for i in range(3):
        ahead = all_held(daemon)
        assert not ahead & seen_ns, "the spawner holds a root a sandbox already had"
        sid = make_sandbox()
        got = probe(api, sid)
        assert got["ns"] in ahead, "the create did not join a root made ahead"
        assert got["ns"] not in held_roots(daemon), "the spawner still holds a taken root"
        assert got["seen"] == [], f"sandbox {i} sees another's files: {got['seen']}"
        assert got["dev"] not in seen_dev, "two sandboxes share one root filesystem"
        assert got["points"] == info["points"], (got["points"], info["points"])
        seen_ns.add(got["ns"])
        seen_dev.add(got["dev"])
        mark(api, sid, f"s{i}")
    api.stop(first)
    ahead = all_held(daemon)
    sid = make_sandbox()  # made while another ended: still a fresh root
    got = probe(api, sid)
    assert got["ns"] in ahead and got["ns"] not in seen_ns and got["seen"] == [], got


def test_two_creates_in_a_row_both_join_roots_made_ahead(api, daemon, make_sandbox):
    # The spare is made while creates pause; two back to back take both, the second
    # without waiting for a root to be built.
    ahead = all_held(daemon)
    first, second = make_sandbox(), make_sandbox()
    got = [probe(api, first)["ns"], probe(api, second)["ns"]]
    assert set(got) == ahead, (got, ahead)


def test_a_root_made_ahead_is_the_root_an_inline_build_gives(api, daemon, make_sandbox):
    all_held(daemon)
    got = probe(api, make_sandbox())
    # The same mounts as a one-shot run's root built inline (not a template's copy)...
    r = subprocess.run([AIRLOCK_BIN, "run", "--no-template", "--", "/usr/bin/python3", "-c",
                        MOUNTS],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    inline = dict((ln.split(" ", 1) + [""])[:2] for ln in r.stdout.decode().splitlines())
    # ...but for the generated /etc files a daemon sandbox shares, bound read-only
    # (test_daemon_etc_shared.py); a one-shot has its own copies.
    shared = ["/etc/" + n for n in ("passwd", "group", "nsswitch.conf", "hosts", "hostname")]
    assert set(shared) <= set(got["points"]), got["points"]
    assert [p for p in got["points"] if p not in shared] == inline["POINTS"].split()
    assert got["disk"] == int(inline["DISK"]) == 1 << 30
    # /workspace and /home/user belong to the sandbox user, / to nobody it can be.
    assert got["own"][:2] == ["1000", "1000"] and got["own"][2] == "65534", got["own"]
    sid = make_sandbox()
    out = api.sh(sid, "touch /workspace/a /home/user/b /tmp/c && ! touch /x 2>/dev/null "
                      "&& ! touch /etc/x 2>/dev/null && cat /proc/1/comm && ls /proc | "
                      "grep -c '^[0-9]' ")
    assert out.exit["exit_code"] == 0, out
    assert out.stdout.split()[0] == b"airlock-agent", out.stdout


def test_other_settings_build_their_own_root(api, daemon, make_sandbox):
    all_held(daemon)
    small = make_sandbox(resources={"disk": "64M"})
    got = probe(api, small)
    assert got["disk"] == 64 << 20, got
    # The roots made for 1 GiB are let go (a namespace's number can then be another's:
    # only sizes tell them apart); the next ones are made for 64M: the next such create
    # joins one.
    ahead = all_held(daemon)
    got2 = probe(api, make_sandbox(resources={"disk": "64M"}))
    assert got2["ns"] in ahead and got2["disk"] == 64 << 20, got2
    # A default create after them builds its own 1 GiB root, never a 64M one.
    got3 = probe(api, make_sandbox())
    assert got3["disk"] == 1 << 30, got3
    ahead = all_held(daemon)
    got4 = probe(api, make_sandbox())
    assert got4["ns"] in ahead and got4["disk"] == 1 << 30, got4
    # Another workdir is never made ahead: built inline, with that directory.
    sid = make_sandbox(workdir="/srv/app")
    out = api.sh(sid, "pwd; stat -c %u /srv/app")
    assert out.exit["exit_code"] == 0 and out.stdout.split() == [b"/srv/app", b"1000"], out


def test_the_spawner_stays_in_the_hosts_mount_namespace(api, daemon, make_sandbox):
    make_sandbox()
    host = os.readlink("/proc/self/ns/mnt")
    spawners = spawner_pids(daemon.pid)
    assert spawners
    assert wait_for(lambda: all(os.readlink(f"/proc/{p}/ns/mnt") == host for p in spawners),
                    timeout=5)
    assert wait_for(lambda: all(os.readlink(f"/proc/{p}/root") == "/" and
                                os.readlink(f"/proc/{p}/cwd") != "" for p in spawners),
                    timeout=5)
