"""Escape attempts: seccomp, capabilities, Landlock, no_new_privs, uid.

Every test here tries the escape from inside a sandbox and asserts that it
failed.  Syscall arguments are chosen so that an *unfiltered* call would be
harmless and would usually fail with something other than EPERM (EFAULT,
EBADF, ESRCH, ENOENT...) or succeed, so that EPERM really shows the filter.
"""

import errno
import json
import os
import signal
import subprocess
import textwrap

import pytest

import hostprobe


PY = "/usr/bin/python3"
EPERM = errno.EPERM


def py_json(run, src, *flags, **kw):
    r = run([*flags, "--", PY, "-c", textwrap.dedent(src)], **kw)
    assert r.returncode == 0, (r.returncode, r.out, r.err)
    return json.loads(r.out.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# seccomp probe: each syscall runs in a forked child, so that a killed child
# or an unexpected success cannot disturb the other probes.

PROBE = r'''
import ctypes, errno, json, os, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def arg(a):
    if isinstance(a, int):
        return ctypes.c_long(a)
    if isinstance(a, bytes):
        return ctypes.c_char_p(a)
    return a

def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[arg(a) for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x20000, 0x10000000, 0x40000000
CLONE_NEWPID, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000000, 0x04000000, 0x08000000
CLONE_NEWCGROUP, CLONE_NEWTIME = 0x02000000, 0x80
SIGCHLD = 17

def raw_clone(flags):
    r, e = sc(56, flags | SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)          # the child of a successful clone
    if r > 0:
        os.waitpid(r, 0)
    return r, e

buf = ctypes.create_string_buffer(512)
mnt_id = ctypes.c_int(0)
fh = ctypes.create_string_buffer(256)
struct.pack_into("I", fh, 0, 128)       # handle_bytes
tiocsti_char = ctypes.c_char(b"x")

P = {
    "getpid":            lambda: sc(39),
    "personality_query": lambda: sc(135, 0xffffffff),
    "ptrace":            lambda: sc(101, 12, 1, 0, 0),   # PTRACE_GETREGS on pid 1
    "ptrace_seize_pid1": lambda: sc(101, 0x4206, 1, 0, 0),  # PTRACE_SEIZE: does not stop pid 1
    "bpf":               lambda: sc(321, 0, 0, 0),
    "perf_event_open":   lambda: sc(298, 0, 0, -1, -1, 0),
    "keyctl":            lambda: sc(250, 0, -3, 0),       # GET_KEYRING_ID session
    "add_key":           lambda: sc(248, 0, 0, 0, 0, 0),
    "request_key":       lambda: sc(249, 0, 0, 0, 0),
    "userfaultfd":       lambda: sc(323, 1),              # UFFD_USER_MODE_ONLY
    "io_uring_setup":    lambda: sc(425, 1, 0),
    "mount":             lambda: sc(165, b"none", b"/tmp", b"tmpfs", 0, 0),
    "umount2":           lambda: sc(166, b"/nonexistent-airlock", 0),
    "pivot_root":        lambda: sc(155, b"/nonexistent-a", b"/nonexistent-b"),
    "move_mount":        lambda: sc(429, -1, b"", -1, b"", 0),
    "fsopen":            lambda: sc(430, b"tmpfs", 0),
    "open_tree":         lambda: sc(428, -100, b"/", 0),
    "unshare_user":      lambda: sc(272, CLONE_NEWUSER),
    "unshare_mount":     lambda: sc(272, CLONE_NEWNS),
    "unshare_net":       lambda: sc(272, CLONE_NEWNET),
    "unshare_pid":       lambda: sc(272, CLONE_NEWPID),
    "unshare_uts":       lambda: sc(272, CLONE_NEWUTS),
    "unshare_ipc":       lambda: sc(272, CLONE_NEWIPC),
    "unshare_cgroup":    lambda: sc(272, CLONE_NEWCGROUP),
    "unshare_time":      lambda: sc(272, CLONE_NEWTIME),
    "setns":             lambda: sc(308, -1, 0),
    "clone_newuser":     lambda: raw_clone(CLONE_NEWUSER),
    "clone_newns":       lambda: raw_clone(CLONE_NEWNS),
    "clone_newnet":      lambda: raw_clone(CLONE_NEWNET),
    "clone_newpid":      lambda: raw_clone(CLONE_NEWPID),
    "kexec_load":        lambda: sc(246, 0, 0, 0, 0),
    "init_module":       lambda: sc(175, 0, 0, b""),
    "finit_module":      lambda: sc(313, -1, b"", 0),
    "delete_module":     lambda: sc(176, b"airlock_no_such_module", 0x800),
    "swapon":            lambda: sc(167, b"/nonexistent-airlock", 0),
    "swapoff":           lambda: sc(168, b"/nonexistent-airlock"),
    "reboot":            lambda: sc(169, 0, 0, 0, 0),     # invalid magic: harmless
    "acct":              lambda: sc(163, b"/nonexistent-airlock"),
    "quotactl":          lambda: sc(179, 0, 0, 0, 0),
    "personality_rie":   lambda: sc(135, 0x0400000),      # READ_IMPLIES_EXEC
    "open_by_handle_at": lambda: sc(304, -100, 0, 0),
    "name_to_handle_at": lambda: sc(303, -100, b"/workspace", fh, ctypes.byref(mnt_id), 0),
    "clock_settime":     lambda: sc(227, 0, 0),
    "settimeofday":      lambda: sc(164, 0, 0),
    "adjtimex":          lambda: sc(159, buf),            # modes=0: read-only query
    "sysfs":             lambda: sc(139, 1, b"proc"),
    "uselib":            lambda: sc(134, b"/nonexistent-airlock"),
    "vhangup":           lambda: sc(153),
    "process_vm_readv":  lambda: sc(310, os.getpid(), 0, 0, 0, 0, 0),
    "process_vm_writev": lambda: sc(311, os.getpid(), 0, 0, 0, 0, 0),
    "ioctl_tiocsti":     lambda: sc(16, 1, 0x5412, ctypes.byref(tiocsti_char)),
    "clone3":            lambda: sc(435, 0, 0),
}

out = {}
for name, fn in P.items():
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            r, e = fn()
            os.write(wfd, json.dumps([r, e]).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    data = b""
    while True:
        chunk = os.read(rfd, 4096)
        if not chunk:
            break
        data += chunk
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        out[name] = {"signal": os.WTERMSIG(status)}
    else:
        r, e = json.loads(data)
        out[name] = {"ret": r, "errno": e}
with open("/proc/self/status") as f:
    out["_seccomp"] = [l.split()[1] for l in f if l.startswith("Seccomp:")][0]
out["_pid"] = os.getpid()
print(json.dumps(out))
'''

EPERM_SYSCALLS = [
    "ptrace", "ptrace_seize_pid1", "bpf", "perf_event_open", "keyctl",
    "add_key", "request_key", "userfaultfd", "io_uring_setup", "mount",
    "umount2", "pivot_root", "move_mount", "fsopen", "open_tree",
    "unshare_user", "unshare_mount", "unshare_net", "unshare_pid",
    "unshare_uts", "unshare_ipc", "unshare_cgroup", "unshare_time", "setns",
    "clone_newuser", "clone_newns", "clone_newnet", "clone_newpid",
    "kexec_load", "init_module", "finit_module", "delete_module", "swapon",
    "swapoff", "reboot", "acct", "quotactl", "personality_rie",
    "open_by_handle_at", "clock_settime", "settimeofday", "adjtimex", "sysfs",
    "uselib", "vhangup", "process_vm_readv", "process_vm_writev",
    "ioctl_tiocsti",
]

MODES = {"user": [], "root": ["--root"]}
_probe_cache = {}


@pytest.fixture(params=sorted(MODES))
def probe(request, run):
    mode = request.param
    if mode not in _probe_cache:
        # run once per mode; remember a failure too, so that one hang does
        # not cost a timeout per parametrized test
        try:
            r = run([*MODES[mode], "--", PY, "-c", PROBE], timeout=30)
            _probe_cache[mode] = (r.returncode, r.out, r.err)
        except pytest.fail.Exception as e:
            _probe_cache[mode] = (None, "", str(e))
    rc, out, err = _probe_cache[mode]
    assert rc == 0, f"probe failed (mode={mode}): rc={rc} stderr={err[-2000:]}"
    return json.loads(out.strip().splitlines()[-1])


def test_probe_controls(probe):
    """The probe works: allowed calls succeed."""
    assert probe["getpid"]["errno"] == 0 and probe["getpid"]["ret"] > 0
    assert probe["personality_query"]["errno"] == 0
    assert probe["_seccomp"] == "2"


@pytest.mark.parametrize("name", EPERM_SYSCALLS)
def test_seccomp_eperm(probe, name):
    res = probe[name]
    assert "signal" not in res, f"{name}: probe child killed by signal {res.get('signal')}"
    assert res["ret"] == -1 and res["errno"] == EPERM, \
        f"{name}: ret={res['ret']} errno={res['errno']} ({os.strerror(res['errno']) if res['errno'] else 'success'}), expected EPERM"


def test_seccomp_name_to_handle_at(probe):
    res = probe["name_to_handle_at"]
    assert "signal" not in res
    assert res["ret"] == -1 and res["errno"] in (errno.EPERM, errno.EOPNOTSUPP), res
    assert probe["_seccomp"] == "2"


def test_seccomp_clone3_enosys(probe):
    res = probe["clone3"]
    assert res == {"ret": -1, "errno": errno.ENOSYS}, res


def test_plain_fork_and_threads_still_work(run, sh):
    r = run(sh("(echo child) ; echo parent; " + PY + " -c 'import threading; t=threading.Thread(target=print, args=(\"thread\",)); t.start(); t.join()'"))
    assert r.returncode == 0, r.err
    assert r.out.split() == ["child", "parent", "thread"]


def test_tiocsti_on_pty_blocked(run):
    src = textwrap.dedent("""
        import ctypes, fcntl, os, sys
        libc = ctypes.CDLL(None, use_errno=True)
        c = ctypes.c_char(b"x")
        r = libc.ioctl(0, 0x5412, ctypes.byref(c))
        print("tiocsti", r, ctypes.get_errno(), os.isatty(0))
    """)
    r = run(["-t", "--", PY, "-c", src])
    assert r.returncode == 0, r.out
    parts = r.out.replace("\r", "").split("tiocsti", 1)[1].split()
    assert parts[0] == "-1" and int(parts[1]) == EPERM, r.out
    assert parts[2] == "True"


INT80 = textwrap.dedent(r"""
    import ctypes, mmap, os
    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    # mov eax, 20 (i386 getpid); int 0x80; ret
    buf.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))
    f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
    print("int80", f(), os.getpid(), flush=True)
""")


def test_32bit_syscall_abi_blocked(run_json):
    r = run_json(["--", PY, "-c", INT80])
    j = r.json
    if hostprobe.i386_abi() == "no":
        # The host kernel has no i386 entry (a plain host process dies of SIGSEGV):
        # the call must not succeed in the sandbox either, whatever ends it.
        if j["reason"] == "exited":
            words = j["stdout"].split()
            assert words[0] == "int80", j
            assert int(words[1]) in (-EPERM, -errno.ENOSYS), j
        else:
            assert j["reason"] in ("seccomp", "signaled"), j
            assert j["signal"] in (signal.SIGSEGV, signal.SIGSYS), j
            assert (j["signal"] == signal.SIGSYS) == (j["reason"] == "seccomp"), j
        return
    if j["reason"] in ("seccomp", "signaled"):
        # killed: it must be SIGSYS, reported as seccomp
        assert j["signal"] == signal.SIGSYS, j
        assert j["reason"] == "seccomp", j
        assert r.returncode == 128 + signal.SIGSYS
    else:
        assert j["reason"] == "exited", j
        words = j["stdout"].split()
        assert words[0] == "int80", j
        assert int(words[1]) == -EPERM, f"int 0x80 getpid returned {words[1]} (pid {words[2]})"


# --------------------------------------------------------------------------
# capabilities, no_new_privs, seccomp mode


STATUS_SRC = """
    import json
    out = {}
    with open("/proc/self/status") as f:
        for l in f:
            k, _, v = l.partition(":")
            out[k] = v.strip()
    print(json.dumps(out))
"""


def test_status_caps_nnp_seccomp_user(run):
    st = py_json(run, STATUS_SRC)
    for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
        assert int(st[k], 16) == 0, f"{k}={st[k]}"
    assert st["NoNewPrivs"] == "1"
    assert st["Seccomp"] == "2"
    assert st["Uid"].split() == ["1000"] * 4
    assert st["Gid"].split() == ["1000"] * 4


def test_status_root_mode(run):
    st = py_json(run, STATUS_SRC, "--root")
    assert st["NoNewPrivs"] == "1"
    assert st["Seccomp"] == "2"
    assert st["Uid"].split() == ["0"] * 4


def test_cannot_become_root(run):
    res = py_json(run, """
        import os, json
        out = {}
        for name, fn in (("setuid", lambda: os.setuid(0)), ("setgid", lambda: os.setgid(0)),
                         ("setresuid", lambda: os.setresuid(0, 0, 0)),
                         ("setgroups", lambda: os.setgroups([0]))):
            try:
                fn(); out[name] = 0
            except OSError as e:
                out[name] = e.errno
        out["uid"] = os.getuid()
        out["euid"] = os.geteuid()
        print(json.dumps(out))
    """)
    assert res["uid"] == 1000 and res["euid"] == 1000
    for k in ("setuid", "setgid", "setresuid", "setgroups"):
        # EINVAL when uid 0 is not mapped in the user namespace
        assert res[k] in (errno.EPERM, errno.EINVAL), (k, res[k])


@pytest.mark.parametrize("mode", ["user", "root"])
def test_cannot_change_hostname(run, mode):
    res = py_json(run, """
        import ctypes, json, socket
        libc = ctypes.CDLL(None, use_errno=True)
        r = libc.sethostname(b"evil", 4)
        e = ctypes.get_errno()
        r2 = libc.setdomainname(b"evil", 4)
        e2 = ctypes.get_errno()
        print(json.dumps({"r": r, "e": e, "r2": r2, "e2": e2, "now": socket.gethostname()}))
    """, *MODES[mode])
    assert res["r"] == -1 and res["e"] == EPERM, res
    assert res["r2"] == -1 and res["e2"] == EPERM, res
    assert res["now"] == "sandbox"


def test_root_cannot_mount_or_unshare_with_tools(run, sh):
    r = run(["--root", *sh(
        "mkdir -p /tmp/m; mount -t tmpfs none /tmp/m && echo MOUNTED; "
        "unshare -U true && echo UNSHARED_U; unshare -m true && echo UNSHARED_M; "
        "unshare -n true && echo UNSHARED_N; mount -o remount,rw /usr && echo REMOUNTED; "
        "grep -q ' /tmp/m ' /proc/self/mounts && echo IN_MOUNTS; echo end")])
    assert r.returncode == 0, r.err
    for bad in ("MOUNTED", "UNSHARED_U", "UNSHARED_M", "UNSHARED_N", "REMOUNTED", "IN_MOUNTS"):
        assert bad not in r.out.split(), f"{bad}: {r.out}"
    assert r.out.split()[-1] == "end"


@pytest.mark.parametrize("mode", ["user", "root"])
def test_uid_map_not_host_root(run, mode):
    res = py_json(run, """
        import json
        with open("/proc/self/uid_map") as f:
            print(json.dumps([l.split() for l in f if l.strip()]))
    """, *MODES[mode])
    assert res, "empty uid_map"
    for inside, outside, count in res:
        o, c = int(outside), int(count)
        assert not (o <= 0 < o + c), f"uid_map maps host uid 0: {res}"


@pytest.mark.parametrize("mode", ["user", "root"])
def test_host_view_of_workload_not_root(spawn, marker, mode):
    """Seen from the host, the workload process has a non-zero uid and no
    capabilities."""
    p = spawn([*MODES[mode], "--timeout", "20s", "--", "/bin/sh", "-c", f"{marker.sleep}; : {marker}"])
    try:
        # only the workload (sh and sleep), not airlock's own processes
        pids = marker.wait_present(prefixes=("/bin/sh", "sleep"))
        assert pids, "workload never appeared on the host"
        for pid in pids:
            with open(f"/proc/{pid}/status") as f:
                st = dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
            uids = [int(x) for x in st["Uid"].split()]
            assert 0 not in uids, f"workload runs as host uid {uids}"
            assert int(st["CapEff"], 16) == 0 or mode == "root", st["CapEff"]
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()


# --------------------------------------------------------------------------
# Landlock / read-only runtime


WRITE_PROBE = """
    import os, json, errno
    bad = {}
    def attempt(name, fn, cleanup=None):
        try:
            fn()
            bad[name] = 0
            if cleanup:
                try: cleanup()
                except OSError: pass
        except OSError as e:
            bad[name] = e.errno
    for p in ["/etc/x", "/usr/x", "/x", "/usr/bin/x", "/bin/x", "/lib/x", "/sbin/x",
              "/dev/x", "/proc/x", "/etc/ssl/x", "/usr/lib/x"]:
        attempt("create " + p, lambda p=p: open(p, "w").close(), lambda p=p: os.unlink(p))
    attempt("append /etc/passwd", lambda: open("/etc/passwd", "a").write("evil::0:0::/:/bin/sh\\n"))
    attempt("append /etc/hosts", lambda: open("/etc/hosts", "a").write("1.2.3.4 evil\\n"))
    attempt("open /usr/bin/env rw", lambda: open("/usr/bin/env", "r+b").close())
    attempt("mkdir /newdir", lambda: os.mkdir("/newdir"), lambda: os.rmdir("/newdir"))
    attempt("mkdir /usr/newdir", lambda: os.mkdir("/usr/newdir"), lambda: os.rmdir("/usr/newdir"))
    attempt("symlink /etc/l", lambda: os.symlink("/tmp", "/etc/l"), lambda: os.unlink("/etc/l"))
    # same mode again: a no-op even if it (wrongly) succeeded
    attempt("chmod python", lambda: os.chmod("/usr/bin/python3", os.stat("/usr/bin/python3").st_mode & 0o7777))
    attempt("unlink /etc/hosts", lambda: os.unlink("/etc/hosts"))
    attempt("rename /etc/passwd", lambda: os.rename("/etc/passwd", "/etc/p2"))
    attempt("write /proc/sys hostname", lambda: open("/proc/sys/kernel/hostname", "w").write("evil"))
    attempt("write /proc/sysrq-trigger", lambda: open("/proc/sysrq-trigger", "w").write("h"))
    ok = {}
    for p in ["/workspace/f", "/tmp/f", "/home/user/f", "/dev/shm/f", "/dev/null"]:
        try:
            with open(p, "w") as f:
                f.write("x")
            ok[p] = 0
        except OSError as e:
            ok[p] = e.errno
    print(json.dumps({"bad": bad, "ok": ok}))
"""


@pytest.mark.parametrize("mode", ["user", "root"])
def test_writes_outside_writable_dirs_fail(run, mode):
    res = py_json(run, WRITE_PROBE, *MODES[mode])
    # EBUSY: e.g. unlinking a file that is a bind-mount point; still refused
    allowed = {errno.EROFS, errno.EACCES, errno.EPERM, errno.EBUSY}
    failures = {k: (os.strerror(v) if v else "SUCCEEDED") for k, v in res["bad"].items()
                if v not in allowed}
    # creating in /proc may legitimately say ENOENT; that is still a failure to write
    failures = {k: v for k, v in failures.items()
                if not ("/proc/" in k and res["bad"][k] == errno.ENOENT)}
    assert not failures, f"writes that did not fail with EROFS/EACCES/EPERM/EBUSY: {failures}"
    assert all(v == 0 for v in res["ok"].values()), res["ok"]


DOC_FILE = "/usr/share/doc/bash/copyright"


@pytest.mark.parametrize("mode", ["user", "root"])
def test_runtime_unchanged_after_write_attempts(run, mode):
    """Even with --root, the host runtime is not changed (harmless targets:
    a doc file gets touched/appended, a new file is created in /usr)."""
    if not os.path.exists(DOC_FILE):
        pytest.skip(f"{DOC_FILE} missing")
    st = os.stat(DOC_FILE)
    evil = f"/usr/airlock-evil-{os.getpid()}"
    try:
        run([*MODES[mode], "--", "/bin/sh", "-c",
             f"touch {DOC_FILE}; echo >> {DOC_FILE}; chmod 0600 {DOC_FILE}; touch {evil}; true"])
        st2 = os.stat(DOC_FILE)
        created = os.path.exists(evil)
    finally:
        if os.path.exists(evil):
            os.unlink(evil)
        if os.stat(DOC_FILE).st_mode != st.st_mode:
            os.chmod(DOC_FILE, st.st_mode & 0o7777)
    assert (st.st_mode, st.st_size, st.st_mtime_ns) == (st2.st_mode, st2.st_size, st2.st_mtime_ns)
    assert not created


# --------------------------------------------------------------------------
# PID 1


@pytest.mark.parametrize("mode", ["user", "root"])
def test_cannot_kill_or_trace_pid1(run_json, mode):
    src = textwrap.dedent("""
        import ctypes, json, os, signal, time
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        out = {}
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                  signal.SIGUSR1, signal.SIGSTOP, signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(1, s); out[s.name] = 0
            except OSError as e:
                out[s.name] = e.errno
        try:
            os.kill(-1, signal.SIGKILL)   # all we may signal; never ourselves, never init
        except OSError:
            pass
        ctypes.set_errno(0)
        out["ptrace_seize"] = [libc.syscall(101, 0x4206, 1, 0, 0), ctypes.get_errno()]
        try:
            open("/proc/1/mem", "rb").read(1); out["mem"] = 0
        except OSError as e:
            out["mem"] = e.errno
        time.sleep(0.3)
        print(json.dumps(out), flush=True)
    """)
    r = run_json([*MODES[mode], "--", PY, "-c", src])
    j = r.json
    assert j["reason"] == "exited", j
    assert j["exit_code"] == 0 and r.returncode == 0, j
    out = json.loads(j["stdout"].strip())
    assert out["ptrace_seize"] == [-1, EPERM], out
    assert out["mem"] != 0, out


@pytest.mark.parametrize("mode", ["user", "root"])
def test_pid1_root_cwd_fds_inaccessible(run, mode):
    """airlock's init (PID 1) is more privileged than the workload; its root,
    cwd, fds and memory must not be reachable through /proc."""
    res = py_json(run, """
        import os, json
        out = {}
        for name, fn in (("root", lambda: os.listdir("/proc/1/root/")),
                         ("cwd", lambda: os.listdir("/proc/1/cwd/")),
                         ("fd", lambda: os.listdir("/proc/1/fd")),
                         ("map_files", lambda: os.listdir("/proc/1/map_files")),
                         ("environ", lambda: open("/proc/1/environ", "rb").read()),
                         ("mem", lambda: open("/proc/1/mem", "rb").read(1))):
            try:
                fn(); out[name] = 0
            except OSError as e:
                out[name] = e.errno
        print(json.dumps(out))
    """, *MODES[mode])
    opened = [k for k, v in res.items() if v == 0]
    assert not opened, f"PID 1's {opened} readable from the workload: {res}"


def _ignore_signals_raw():
    """In the child before exec: ignore SIGINT, SIGPIPE and glibc's own 32 and 33 with the
    raw syscall (glibc's wrappers refuse 32 and 33), as some supervisors leave them."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)

    class KernelSigaction(ctypes.Structure):
        _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                    ("restorer", ctypes.c_void_p), ("mask", ctypes.c_uint64)]
    ign = KernelSigaction(1, 0, None, 0)  # SIG_IGN
    for sig in (2, 13, 32, 33):
        libc.syscall(13, sig, ctypes.byref(ign), None, 8)  # rt_sigaction


def test_ignored_signals_are_not_handed_to_the_workload(airlock):
    """exec keeps ignored signals ignored: a caller that ignores some (SIGINT under nohup,
    glibc's 32/33 under some supervisors) must not pass that into the sandbox."""
    r = subprocess.run([airlock, "run", "--", "grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"],
                       capture_output=True, timeout=30, preexec_fn=_ignore_signals_raw)
    assert r.returncode == 0, r.stderr
    sig = dict(line.split(":\t") for line in r.stdout.decode().splitlines())
    assert int(sig["SigIgn"], 16) == 0 and int(sig["SigBlk"], 16) == 0, sig
