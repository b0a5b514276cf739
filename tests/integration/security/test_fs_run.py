"""Filesystem attacks from inside `airlock run`: /proc magic links, the
read-only runtime, hard links, inode exhaustion. Each leaves a host-side
check where a protection could be missing."""

import errno
import hashlib
import json
import os
import textwrap

import pytest

from ._util import probe

MODES = {"user": [], "root": ["--root"]}
DENY = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ETXTBSY, errno.EXDEV, errno.ENOENT)


def _sha(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_proc_self_exe_overwrite(run, mode):
    """CVE-2019-5736 style: write the runtime binary through /proc/self/exe
    (and /proc/<pid>/exe of a sibling running it)."""
    target = "/usr/bin/python3." + "%d.%d" % os.sys.version_info[:2]
    target = os.path.realpath("/usr/bin/python3")
    before = (_sha(target), os.stat(target).st_mtime_ns)
    res = probe(run, r'''
        import subprocess, time
        out = {}
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_APPEND | os.O_WRONLY):
            try:
                fd = os.open("/proc/self/exe", flags); os.write(fd, b"#"); out[str(flags)] = 0
            except OSError as e:
                out[str(flags)] = e.errno
        child = subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(20)"])
        time.sleep(0.3)
        for p in (f"/proc/{child.pid}/exe", f"/proc/{child.pid}/map_files"):
            try:
                if p.endswith("exe"):
                    os.open(p, os.O_WRONLY); out[p] = 0
                else:
                    names = os.listdir(p)
                    os.open(os.path.join(p, names[0]), os.O_RDWR); out[p] = 0
            except OSError as e:
                out[p] = e.errno
        child.kill(); child.wait()
        # linkat of the exe into the writable area (needs CAP_DAC_READ_SEARCH)
        fd = os.open("/proc/self/exe", os.O_PATH)
        r = libc.linkat(fd, b"", -100, b"/workspace/py", 0x1000)   # AT_EMPTY_PATH
        out["linkat"] = 0 if r == 0 else ctypes.get_errno()
        print(json.dumps(out))
    ''', *MODES[mode])
    after = (_sha(target), os.stat(target).st_mtime_ns)
    assert after == before, "the host's python3 changed"
    bad = {k: v for k, v in res.items() if v not in DENY}
    assert not bad, f"runtime binary opened for write: {bad}"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_proc_pid_root_walks_stay_inside(run, mode, tmp_path):
    """Every /proc/*/root, /proc/*/cwd and ../ beyond them lead to the
    sandbox's own root, never the host's."""
    host_only = tmp_path / "host-only-dir"
    host_only.mkdir()
    res = probe(run, r'''
        import glob
        out = {"roots": {}, "up": None}
        for link in glob.glob("/proc/[0-9]*/root") + glob.glob("/proc/[0-9]*/cwd") + \
                    ["/proc/self/root", "/proc/thread-self/root"]:
            try:
                out["roots"][link] = sorted(os.listdir(link + "/../../../.."))
            except OSError as e:
                out["roots"][link] = e.errno
        out["up"] = sorted(os.listdir("/proc/self/root/proc/self/root/../../.."))
        out["slash"] = sorted(os.listdir("/"))
        print(json.dumps(out))
    ''', *MODES[mode])
    for link, v in res["roots"].items():
        assert v == res["slash"] or v in (errno.EACCES, errno.EPERM, errno.ENOENT), (link, v)
        if isinstance(v, list):
            for host_dir in ("root", "var", "run", "srv", "opt", "boot", "sys"):
                assert host_dir not in v, (link, v)
    assert res["up"] == res["slash"]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_runtime_metadata_writes_refused(run, mode):
    """With --root's CHOWN/FOWNER/DAC_OVERRIDE: chown, xattrs, utimes,
    truncate, O_PATH re-open as writable — all on the read-only runtime."""
    target = "/usr/bin/env"
    st = os.stat(target)
    before = (_sha(target), st.st_mode, st.st_uid, st.st_mtime_ns, os.listxattr(target))
    res = probe(run, r'''
        out = {}
        def t(name, fn):
            try:
                fn(); out[name] = 0
            except OSError as e:
                out[name] = e.errno
        T = "/usr/bin/env"
        t("chown", lambda: os.chown(T, 1000, 1000))
        t("lchown", lambda: os.lchown("/bin", 1000, 1000))
        t("setxattr_user", lambda: os.setxattr(T, "user.evil", b"1"))
        t("setxattr_security", lambda: os.setxattr(T, "security.capability",
            bytes.fromhex("0100000201000000000000000000000000000000")))
        t("utime", lambda: os.utime(T, (0, 0)))
        t("truncate", lambda: os.truncate(T, 0))
        fd = os.open(T, os.O_PATH)
        t("reopen_rw", lambda: os.open(f"/proc/self/fd/{fd}", os.O_RDWR))
        t("rename_into", lambda: os.rename("/workspace", "/usr/ws"))
        open("/workspace/x", "w").close()
        t("link_into", lambda: os.link("/workspace/x", "/usr/bin/x"))
        t("link_out", lambda: os.link("/usr/bin/env", "/workspace/env"))
        t("chmod_suid", lambda: os.chmod(T, 0o4755))
        print(json.dumps(out))
    ''', *MODES[mode])
    st = os.stat(target)
    after = (_sha(target), st.st_mode, st.st_uid, st.st_mtime_ns, os.listxattr(target))
    assert after == before, f"host {target} changed: {before} -> {after}"
    bad = {k: v for k, v in res.items() if v not in DENY}
    assert not bad, bad


def test_inode_exhaustion_with_small_disk(run_json):
    """Empty files cost no blocks: the inode count must be bounded too, and
    the sandbox must end normally, without hurting the host."""
    src = r'''
        import time
        n, err, t0 = 0, None, time.monotonic()
        os.mkdir("/workspace/d")
        while time.monotonic() - t0 < 15:
            try:
                os.close(os.open(f"/workspace/d/{n}", os.O_CREAT | os.O_WRONLY, 0o600)); n += 1
            except OSError as e:
                err = e.errno; break
        st = os.statvfs("/workspace")
        print(json.dumps({"n": n, "err": err, "files": st.f_files}))
    '''
    r = run_json(["--disk", "1M", "--memory", "256M", "--timeout", "40s", "--",
                  "/usr/bin/python3", "-c", "import json, os\n" + textwrap.dedent(src)],
                 timeout=60)
    j = r.json
    assert j["reason"] in ("exited", "oom"), j
    if j["reason"] == "exited":
        out = json.loads(j["stdout"].strip().splitlines()[-1])
        assert out["err"] in (errno.ENOSPC, errno.ENOMEM), out
        # bounded: a 1 MiB disk must not hold more than a few thousand inodes
        print(f"\ninode flood on --disk 1M: {out}")
        assert out["n"] <= 65536, f"{out['n']} inodes on a 1 MiB disk ({out})"
