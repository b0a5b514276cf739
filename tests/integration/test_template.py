"""Root templates (src/jail/ahead/template.h): a default one-shot's child copies a read-only
root made once, and adds its own writable tmpfs, devpts and /proc.

Each test keeps its templates in a directory of its own ($AIRLOCK_TEMPLATE) and drops
them at the end; the fixture asserts that no pin is left.
"""
import os
import shutil
import subprocess
import threading

import pytest

from conftest import AIRLOCK_BIN


def mounts_under(root):
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(root + "/")]


def parse_mountinfo(text):
    """{mount point: (device, options, fstype, source)} of a sandbox's mountinfo."""
    out = {}
    for line in text.splitlines():
        if " - " not in line:
            continue
        left, right = line.split(" - ", 1)
        f, r = left.split(), right.split()
        out[f[4]] = (f[2], f[5], r[0], r[1])
    return out


class Templates:
    def __init__(self, root):
        self.root = root
        self.env = dict(os.environ, AIRLOCK_TEMPLATE=root)

    def run(self, *args, timeout=60, **kw):
        return subprocess.run([AIRLOCK_BIN, "run", "--no-pool", *args], capture_output=True,
                              text=True, env=self.env, timeout=timeout, **kw)

    def cmd(self, *args):
        return subprocess.run([AIRLOCK_BIN, "template", *args], capture_output=True,
                              text=True, env=self.env, timeout=30)

    def pins(self):
        return sorted(os.path.basename(m) for m in mounts_under(self.root))


@pytest.fixture
def tmpl():
    root = f"/run/airlock/test-template-{os.getpid()}"
    t = Templates(root)
    t.cmd("drop")
    yield t
    r = t.cmd("drop")
    left = mounts_under(root)
    shutil.rmtree(root, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    assert left == [], f"template pins left after drop: {left}"


def test_a_default_run_copies_the_read_only_template(tmpl):
    r = tmpl.run("--", "cat", "/proc/self/mountinfo")
    assert r.returncode == 0, r.stderr
    m = parse_mountinfo(r.stdout)
    dev, opts, fstype, source = m["/"]
    assert fstype == "tmpfs" and source == "airlock-template", m["/"]
    assert opts.split(",")[0] == "ro", m["/"]
    # One writable tmpfs of the run's own, reached only through the four places.
    devs = {m[p][0] for p in ("/tmp", "/workspace", "/home/user", "/dev/shm")}
    assert len(devs) == 1 and devs != {dev}, m
    for p in ("/tmp", "/workspace", "/home/user", "/dev/shm"):
        assert m[p][1].startswith("rw,") and "nosuid" in m[p][1] and "nodev" in m[p][1], m[p]
    assert m["/proc"][2] == "proc" and m["/dev/pts"][2] == "devpts", m
    assert [p for p in m if m[p][0] == next(iter(devs))] == \
        ["/tmp", "/workspace", "/home/user", "/dev/shm"], m
    pins = tmpl.pins()
    assert len(pins) == 1 and pins[0].startswith("deny-"), pins
    r = tmpl.cmd("status")
    assert r.returncode == 0 and r.stdout == f"templates {tmpl.root}: 1\n", r.stdout
    # The second run joins the same template: no new one, and the same answers inside.
    r2 = tmpl.run("--", "sh", "-c", "id -un; pwd; cat /etc/hostname; echo $HOME")
    assert r2.returncode == 0 and r2.stdout == "user\n/workspace\nsandbox\n/home/user\n", \
        (r2.stdout, r2.stderr)
    assert tmpl.pins() == pins


def test_an_allowlisted_run_has_a_template_of_its_own(tmpl):
    r = tmpl.run("--allow", "example.test", "--", "cat", "/etc/resolv.conf")
    assert r.returncode == 0, r.stderr
    assert "nameserver 100.96.0.1" in r.stdout, r.stdout
    r = tmpl.run("--", "cat", "/etc/resolv.conf")
    assert r.returncode == 0 and "nameserver" not in r.stdout, r.stdout
    assert sorted(p.split("-")[0] for p in tmpl.pins()) == ["deny", "link"], tmpl.pins()


ATTACKS = [
    ("write /etc/passwd", "echo 'x::0:0::/:/bin/sh' >> /etc/passwd"),
    ("create in /etc", "touch /etc/planted"),
    ("create in /", "mkdir /planted"),
    ("create in /dev", "touch /dev/planted"),
    ("create in /home", "touch /home/planted"),
    ("chmod a skeleton file", "chmod 777 /etc/hosts"),
    # The system calls themselves (mount(8) and umount(8) may refuse before trying).
    ("remount the root rw", "/usr/bin/python3 -c \"$SYSCALL\" mount 32 /"),  # MS_REMOUNT
    ("unmount the writable tmpfs", "/usr/bin/python3 -c \"$SYSCALL\" umount2 2 /tmp"),
    ("write under /usr", "touch /usr/planted"),
]


# mount(NULL, path, NULL, flags, NULL) or umount2(path, flags), saying why it failed.
SYSCALL = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
call, flags, path = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
r = (libc.mount(None, path, None, ctypes.c_ulong(flags), None) if call == "mount"
     else libc.umount2(path, flags))
if r != 0:
    sys.exit(call + ": " + os.strerror(ctypes.get_errno()))
"""


@pytest.mark.parametrize("what,cmd", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_the_template_cannot_be_changed_even_as_root(tmpl, what, cmd):
    r = tmpl.run("--root", "--env", f"SYSCALL={SYSCALL}", "--", "sh", "-c", cmd)
    assert r.returncode != 0, f"{what}: succeeded ({r.stdout!r} {r.stderr!r})"
    # Refused, and said so (read-only file system, or no permission for the mount).
    assert any(s in (r.stdout + r.stderr).lower() for s in
               ("read-only", "permission denied", "operation not permitted")), \
        (what, r.stdout, r.stderr)
    # A later sandbox sees the skeleton as it was made.
    r = tmpl.run("--", "sh", "-c", "ls -a / /etc /dev /home; cat /etc/passwd; "
                 "stat -c %a /etc/hosts; grep -c ' /tmp ' /proc/self/mountinfo")
    assert r.returncode == 0, r.stderr
    assert "planted" not in r.stdout and "x::0:0" not in r.stdout, r.stdout
    assert r.stdout.splitlines()[-2:] == ["644", "1"], r.stdout
    # And the template itself, seen from the host through its pin.
    pin = os.path.join(tmpl.root, tmpl.pins()[0])
    seen = subprocess.run(["nsenter", f"--mount={pin}", "sh", "-c",
                           "ls -a / /etc /dev /home; cat /etc/passwd"],
                          capture_output=True, text=True, timeout=10)
    assert seen.returncode == 0, seen.stderr
    assert "planted" not in seen.stdout and "x::0:0" not in seen.stdout, seen.stdout


@pytest.mark.parametrize("mode", ["template", "no-template"])
def test_two_live_sandboxes_share_no_writable_mount(tmpl, mode):
    extra = ["--no-template"] if mode == "no-template" else []
    first = subprocess.Popen(
        [AIRLOCK_BIN, "run", "--no-pool", *extra, "--", "sh", "-c",
         "for d in /tmp /workspace /home/user /dev/shm; do echo A > $d/from-a; done; "
         "cat /proc/self/mountinfo; echo READY; read x"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=tmpl.env)
    lines = []
    try:
        for line in first.stdout:
            if line == "READY\n":
                break
            lines.append(line)
        second = tmpl.run(*extra, "--", "sh", "-c",
                          "ls -a /tmp /workspace /home/user /dev/shm; echo ===; "
                          "cat /proc/self/mountinfo")
    finally:
        first.communicate("go\n", timeout=30)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    seen, info = second.stdout.split("===\n")
    assert "from-a" not in seen, seen
    a, b = parse_mountinfo("".join(lines)), parse_mountinfo(info)

    def writable(m):
        return {dev for dev, opts, _, _ in m.values() if opts.split(",")[0] == "rw"}
    assert writable(a) and writable(b), (a, b)
    assert not writable(a) & writable(b), f"writable mounts shared: {writable(a) & writable(b)}"
    assert (a["/"][2] == "tmpfs" and a["/"][3] == "airlock-template") == (mode == "template"), a


def test_a_changed_host_file_makes_a_new_template(tmpl):
    r = tmpl.run("--", "true")
    assert r.returncode == 0, r.stderr
    old = tmpl.pins()
    before = os.stat("/etc/ld.so.cache").st_ino
    subprocess.run(["ldconfig"], check=True, timeout=60)  # writes a new file, renames it
    after = os.stat("/etc/ld.so.cache").st_ino
    if after == before:
        pytest.skip("ldconfig rewrote /etc/ld.so.cache in place")
    r = tmpl.run("--", "stat", "-c", "%i", "/etc/ld.so.cache")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{after}\n", (r.stdout, before, after)  # not the stale copy
    new = tmpl.pins()
    assert len(new) == 1 and new != old, (old, new)


@pytest.mark.parametrize("kind", ["empty file", "fifo", "directory"])
def test_whatever_is_in_a_pins_place_is_never_joined(tmpl, kind):
    assert tmpl.run("--", "true").returncode == 0
    name = tmpl.pins()[0]
    assert tmpl.cmd("drop").returncode == 0
    # An empty file is what a builder that died between creating its pin and mounting it
    # leaves; a FIFO would block a plain open(2); a directory cannot be replaced.
    os.makedirs(tmpl.root, mode=0o755)
    path = os.path.join(tmpl.root, name)
    {"empty file": lambda: open(path, "w").close(), "fifo": lambda: os.mkfifo(path),
     "directory": lambda: os.mkdir(path)}[kind]()
    r = tmpl.run("--", "sh", "-c", "grep ' / / ' /proc/self/mountinfo", timeout=20)
    assert r.returncode == 0, r.stderr
    if kind == "directory":  # the run built its own root
        assert "airlock-template" not in r.stdout and tmpl.pins() == [], r.stdout
        os.rmdir(path)
    else:  # replaced by a template
        assert "airlock-template" in r.stdout, r.stdout
        assert tmpl.pins() == [name]


@pytest.mark.parametrize("mode", [0o777, 0o775])
def test_a_directory_others_can_write_holds_no_template(tmpl, mode):
    os.makedirs(tmpl.root)
    os.chmod(tmpl.root, mode)
    r = tmpl.run("--", "sh", "-c", "grep ' / / ' /proc/self/mountinfo")
    assert r.returncode == 0, r.stderr
    assert "airlock-template" not in r.stdout, r.stdout  # the run built its own root
    assert tmpl.pins() == [] and os.listdir(tmpl.root) == []


def test_concurrent_first_runs_make_one_template(tmpl):
    results = [None] * 8

    def one(i):
        results[i] = tmpl.run("--", "sh", "-c", "grep -c airlock-template /proc/self/mountinfo")
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert r.returncode == 0, r.stderr
        assert int(r.stdout) >= 1, r.stdout
    assert len(tmpl.pins()) == 1, tmpl.pins()


SETTINGS = [
    (["--hostname", "other"], "cat /etc/hostname", "other\n"),
    (["--workdir", "/srv/x"], "pwd", "/srv/x\n"),
    (["--no-template"], "echo plain", "plain\n"),
]


@pytest.mark.parametrize("args,cmd,want", SETTINGS, ids=["hostname", "workdir", "no-template"])
def test_settings_a_template_cannot_serve_build_their_own_root(tmpl, args, cmd, want):
    r = tmpl.run(*args, "--", "sh", "-c", f"{cmd}; grep ' / / ' /proc/self/mountinfo")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(want), r.stdout
    root = r.stdout[len(want):]
    assert "airlock-template" not in root and " rw," in root, root
    assert tmpl.pins() == []


def test_a_file_copy_builds_its_own_root(tmpl, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("copied\n")
    r = tmpl.run("--file", f"{src}:in.txt", "--", "sh", "-c",
                 "cat in.txt; grep -c airlock-template /proc/self/mountinfo")
    assert r.stdout == "copied\n0\n", (r.stdout, r.stderr)
    assert tmpl.pins() == []


def test_drop_removes_every_template(tmpl):
    assert tmpl.run("--", "true").returncode == 0
    assert tmpl.run("--allow", "example.test", "--", "true").returncode == 0
    assert len(mounts_under(tmpl.root)) == 2
    r = tmpl.cmd("drop")
    assert r.returncode == 0 and r.stdout == "templates dropped: 2\n", (r.stdout, r.stderr)
    assert mounts_under(tmpl.root) == [] and not os.path.exists(tmpl.root)
    r = tmpl.cmd("status")
    assert r.returncode == 0 and r.stdout == f"templates {tmpl.root}: 0\n", r.stdout


def test_template_command_refuses_bad_input(tmpl):
    r = tmpl.cmd("explode")
    assert r.returncode == 64 and "unknown command 'explode'" in r.stderr, r.stderr
    r = subprocess.run([AIRLOCK_BIN, "template", "status"], capture_output=True, text=True,
                       env=dict(tmpl.env, AIRLOCK_TEMPLATE="relative/dir"), timeout=10)
    assert r.returncode == 64 and "absolute path" in r.stderr, r.stderr
    r = tmpl.cmd()
    assert r.returncode == 64 and "usage: airlock template" in r.stderr, r.stderr
