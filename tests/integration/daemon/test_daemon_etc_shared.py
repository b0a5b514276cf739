"""Shared /etc files: a daemon sandbox's passwd, group, nsswitch.conf and (for the default
hostname) hosts and hostname are one read-only copy on the host (/run/airlock/etc, named
by a hash of the content), bound read-only into every root instead of a tmpfs page each
(src/jail/rootfs.c, put_etc_file; docs/performance.md, "Density").

What must hold: the files say what they said before; not even the sandbox's root (sudo)
can change, replace, unmount or cover them, so nothing one sandbox does reaches another's
through them; a hostname of the create's own gets files of its own, never shared; and
resolv.conf stays the sandbox's own (a gateway attached later rewrites it).
"""
import os

SHARED = ("passwd", "group", "nsswitch.conf", "hosts", "hostname")
ETC_DIR = "/run/airlock/etc"

ATTACK = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name in %r:
    p = "/etc/" + name
    for what, fn in (("append", lambda: open(p, "a").write("evil\n")),
                     ("truncate", lambda: os.truncate(p, 0)),
                     ("unlink", lambda: os.unlink(p)),
                     ("rename", lambda: os.rename(p, p + ".x")),
                     ("chmod", lambda: os.chmod(p, 0o666))):
        try:
            fn()
            print("DID", what, name)
        except OSError as e:
            print("REFUSED", what, name, e.errno)
    for what, rc in (("umount", lambda: libc.umount2(p.encode(), 2)),
                     ("mount", lambda: libc.mount(b"none", p.encode(), b"tmpfs", 0, None))):
        r = rc()
        print("DID" if r == 0 else "REFUSED", what, name, ctypes.get_errno())
"""


def etc_mounts(api, sid):
    out = api.run(sid, "/bin/cat", "/proc/self/mountinfo")
    assert out.exit["exit_code"] == 0, out
    rows = [ln.split() for ln in out.stdout.decode().splitlines()]
    return {r[4]: r for r in rows if r[4].startswith("/etc/")}


def test_shared_etc_files_are_read_only_binds_with_the_same_content(api, make_sandbox):
    a, b = make_sandbox(), make_sandbox()
    for sid in (a, b):
        m = etc_mounts(api, sid)
        for name in SHARED:
            row = m.get("/etc/" + name)
            assert row, f"/etc/{name} is not bound from the shared copy: {sorted(m)}"
            assert "/airlock/etc/" in row[3], row  # /run may be a mount of its own
            assert "ro" in row[5].split(","), row
        assert "/etc/resolv.conf" not in m, "resolv.conf must stay the sandbox's own"
    # what the files say, as before
    out = api.sh(a, "cat /etc/passwd; cat /etc/hostname; grep -c sandbox /etc/hosts")
    text = out.stdout.decode()
    assert "user:x:1000:1000:" in text and "\nsandbox\n" in text, text
    # the host's copies: root's, not writable by anyone else
    for ent in os.scandir(ETC_DIR):
        if ent.name.startswith("."):
            continue
        st = ent.stat(follow_symlinks=False)
        assert st.st_uid == 0 and not st.st_mode & 0o022, (ent.name, oct(st.st_mode))


def test_sandbox_root_cannot_change_the_shared_etc_files(api, make_sandbox):
    a, b = make_sandbox(), make_sandbox()
    before = api.sh(b, "cat /etc/passwd /etc/group /etc/hosts /etc/hostname").stdout
    out = api.run(a, "/usr/bin/python3", "-c", ATTACK % (SHARED,), sudo=True)
    assert out.exit["exit_code"] == 0, out
    lines = out.stdout.decode().splitlines()
    assert len(lines) == 7 * len(SHARED), lines
    assert not [ln for ln in lines if ln.startswith("DID")], lines
    # nothing of it reached the other sandbox, nor the first one's own view
    assert api.sh(b, "cat /etc/passwd /etc/group /etc/hosts /etc/hostname").stdout == before
    assert api.sh(a, "cat /etc/passwd /etc/group /etc/hosts /etc/hostname").stdout == before


def test_a_hostname_of_its_own_gets_files_of_its_own(api, make_sandbox):
    sid = make_sandbox(hostname="own-name.example")
    m = etc_mounts(api, sid)
    assert "/etc/hosts" not in m and "/etc/hostname" not in m, sorted(m)
    assert "/etc/passwd" in m, sorted(m)
    out = api.sh(sid, "cat /etc/hostname; grep -c own-name.example /etc/hosts")
    assert out.stdout.decode().split() == ["own-name.example", "1"], out
