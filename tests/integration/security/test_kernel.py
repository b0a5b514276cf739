"""Kernel surface, attacked from inside `airlock run`.

Every probe here is chosen so that an unfiltered call would succeed or fail
with something other than EPERM: EPERM (or the documented kill) proves the
filter, anything else means the call reached the kernel's own checks.
"""

import errno
import os
import signal

import pytest

import hostprobe

from ._util import probe

EPERM, ENOSYS = errno.EPERM, errno.ENOSYS

# --------------------------------------------------------------------------
# the 32-bit ABI: every syscall of the deny set, by its i386 number, through
# int 0x80 from a tiny trampoline (no gcc -m32 runtime on this host).

INT80_SRC = r'''
import mmap
# push rbx; eax=edi(nr) ebx=esi ecx=edx edx=ecx esi=r8d edi=r9d; int 0x80; pop rbx; ret
code = bytes([0x53, 0x89, 0xf8, 0x89, 0xf3, 0x41, 0x89, 0xcb, 0x89, 0xd1, 0x44, 0x89, 0xda,
              0x44, 0x89, 0xc6, 0x44, 0x89, 0xcf, 0xcd, 0x80, 0x5b, 0xc3])
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
I = ctypes.c_int
f = ctypes.CFUNCTYPE(I, I, I, I, I, I, I)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
# i386 numbers of the deny set; arguments are zeros (EFAULT/EINVAL if unfiltered)
NR = {"ptrace": 26, "process_vm_readv": 347, "process_vm_writev": 348, "kcmp": 349,
      "pidfd_getfd": 438, "process_madvise": 440, "bpf": 357, "perf_event_open": 336,
      "userfaultfd": 374, "io_uring_setup": 425, "io_uring_enter": 426,
      "io_uring_register": 427, "add_key": 286, "keyctl": 288, "request_key": 287,
      "lookup_dcookie": 253, "mount": 21, "umount2": 52, "pivot_root": 217, "chroot": 61,
      "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
      "fspick": 433, "mount_setattr": 442, "setns": 346, "kexec_load": 283,
      "init_module": 128, "finit_module": 350, "delete_module": 129, "swapon": 87,
      "swapoff": 115, "reboot": 88, "quotactl": 131, "quotactl_fd": 443,
      "syslog": 103, "iopl": 110, "ioperm": 101, "sysfs": 135, "uselib": 86,
      "ustat": 62, "_sysctl": 149, "open_by_handle_at": 342, "name_to_handle_at": 341,
      "clock_settime": 264, "clock_settime64": 404, "clock_adjtime": 343,
      "clock_adjtime64": 405, "settimeofday": 79, "adjtimex": 124, "stime": 25,
      "fanotify_init": 338, "vm86": 166, "vm86old": 113,
      "unshare_newuser": (310, 0x10000000), "clone_newuser": (120, 0x10000000 | 17),
      "personality_rie": (136, 0x0400000), "ioctl_tiocsti": (54, 0, 0x5412),
      "getpid": 20}
out = {}
for name, spec in NR.items():
    nr, *args = spec if isinstance(spec, tuple) else (spec,)
    args = (args + [0] * 5)[:5]
    out[name] = forked(lambda: f(nr, *args))
out["_native_getpid"] = os.getpid() > 0
print(json.dumps(out))
'''


@pytest.mark.parametrize("mode", ["user", "root"])
def test_i386_abi_every_denied_syscall_eperm(run, mode):
    res = probe(run, INT80_SRC, *(["--root"] if mode == "root" else []))
    assert res.pop("_native_getpid") is True
    if hostprobe.i386_abi() == "no":
        # No i386 entry in this kernel (int 0x80 kills a plain host process with
        # SIGSEGV): in the sandbox every call must end the same way, none succeeds.
        bad = {k: v for k, v in res.items()
               if v != {"signal": signal.SIGSEGV} and v != -ENOSYS}
        assert not bad, f"i386 syscalls that did not fail as on the host: {bad}"
        return
    bad = {k: v for k, v in res.items() if v != -EPERM}
    assert not bad, f"i386 syscalls not refused with -EPERM: {bad}"


X32_SRC = r'''
X = 0x40000000
# x86_64 numbers (x32 shares them) plus the x32-only compat numbers (512+)
NR = {"ptrace": 101, "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248,
      "userfaultfd": 323, "io_uring_setup": 425, "mount": 165, "umount2": 166,
      "pivot_root": 155, "setns": 308, "unshare_newuser": (272, 0x10000000),
      "open_by_handle_at": 304, "kexec_load": 246, "init_module": 175,
      "fsopen": 430, "open_tree": 428, "process_vm_readv": 310,
      "x32_ptrace": 521, "x32_process_vm_readv": 539, "x32_process_vm_writev": 540,
      "x32_kexec_load": 528, "x32_ioctl": (514, 0, 0x5412), "getpid": 39}
out = {}
for name, spec in NR.items():
    nr, *args = spec if isinstance(spec, tuple) else (spec,)
    out[name] = forked(lambda: sc(X | nr, *args))
out["_native"] = sc(39)
print(json.dumps(out))
'''


def test_x32_abi_never_reaches_denied_syscalls(run):
    res = probe(run, X32_SRC)
    assert res.pop("_native")[0] > 0
    # EPERM from the filter's x32 rule; where the host kernel has no x32 entry
    # (probed on the host), ENOSYS is as good: the call reached nothing.
    ok = (EPERM,) if hostprobe.x32_abi() == "yes" else (EPERM, ENOSYS)
    bad = {k: v for k, v in res.items()
           if not (isinstance(v, list) and v[0] == -1 and v[1] in ok)}
    assert not bad, f"x32 syscalls that were not refused: {bad}"


# --------------------------------------------------------------------------
# odd argument bit patterns: the kernel ignores bits the filter must not rely on


def test_clone_and_unshare_ns_flags_with_high_bits(run):
    res = probe(run, r'''
        out = {}
        SIGCHLD = 17
        for name, fl in (("NEWUSER", 0x10000000), ("NEWNS", 0x20000), ("NEWNET", 0x40000000),
                         ("NEWPID", 0x20000000), ("NEWTIME", 0x80)):
            for hi in (0xdead, 0xffffffff, 0x1):
                flags = (hi << 32) | fl | SIGCHLD
                def c(flags=flags):
                    r, e = sc(56, flags, 0, 0, 0, 0)
                    if r == 0:
                        os._exit(42)
                    if r > 0:
                        os.waitpid(r, 0)
                    return [r, e]
                out[f"clone {name} hi={hi:#x}"] = forked(c)
                out[f"unshare {name} hi={hi:#x}"] = forked(lambda: sc(272, (hi << 32) | fl))
        print(json.dumps(out))
    ''')
    bad = {k: v for k, v in res.items() if v != [-1, EPERM]}
    assert not bad, f"namespace creation not refused with EPERM: {bad}"


def test_tiocsti_and_tioclinux_with_high_bits_in_command_word(run):
    src = r'''
        c = ctypes.c_char(b"x")
        out = {"tty": os.isatty(0)}
        for hi in (0x1, 0xdead, 0xffffffff):
            for nm, cmd in (("TIOCSTI", 0x5412), ("TIOCLINUX", 0x541C)):
                out[f"{nm} hi={hi:#x}"] = list(sc(16, 0, (hi << 32) | cmd, ctypes.byref(c)))
        print(json.dumps(out))
    '''
    res = probe(run, src, "-t")
    assert res.pop("tty") is True
    bad = {k: v for k, v in res.items() if v != [-1, EPERM]}
    assert not bad, f"terminal injection ioctls not refused: {bad}"


PERSONA_SRC = r'''
    import subprocess
    out = {}
    for name, flag in (("READ_IMPLIES_EXEC", 0x0400000), ("ADDR_NO_RANDOMIZE", 0x0040000)):
        def attempt(flag=flag):
            r = sc(135, 0x80000000 | flag)
            q = sc(135, 0xffffffff)[0]
            # what a freshly exec'd child inherits
            child = subprocess.run(["/bin/cat", "/proc/self/personality"], capture_output=True,
                                   text=True).stdout.strip()
            return {"set": list(r), "now": q, "child": int(child, 16)}
        out[name] = forked(attempt)
        out[name]["flag"] = flag
    print(json.dumps(out))
'''


def test_personality_weakening_flags_with_bit31(run):
    res = probe(run, PERSONA_SRC)
    for name, r in res.items():
        assert r["now"] & r["flag"] == 0, f"{name} set via bit 31: {r}"
        assert r["child"] & r["flag"] == 0, f"{name} inherited by exec'd child: {r}"
        assert r["set"] == [-1, EPERM], f"{name}: personality(0x80000000|flag) = {r['set']}"


# --------------------------------------------------------------------------
# prctl abuse


@pytest.mark.parametrize("mode", ["user", "root"])
def test_prctl_abuse_refused(run, mode):
    res = probe(run, r'''
        P = lambda *a: list(sc(157, *a))
        out = {}
        # PR_SET_MM(PR_SET_MM_START_CODE...): rewrite /proc/self/exe-visible layout
        out["PR_SET_MM_START_BRK"] = P(35, 6, 0x10000, 0, 0)
        out["PR_SET_MM_EXE_FILE"] = P(35, 13, os.open("/usr/bin/env", os.O_RDONLY), 0, 0)
        out["PR_SET_MM_MAP"] = P(35, 14, 0, 0, 0)
        # PR_CAP_AMBIENT_RAISE of CAP_SYS_ADMIN (21) and CAP_SYS_PTRACE (19)
        out["AMBIENT_RAISE_SYS_ADMIN"] = P(47, 2, 21, 0, 0)
        out["AMBIENT_RAISE_SYS_PTRACE"] = P(47, 2, 19, 0, 0)
        # PR_SET_SECUREBITS: clear NOROOT etc.
        out["PR_SET_SECUREBITS"] = P(28, 0x2f, 0, 0, 0)
        # no_new_privs cannot be cleared
        out["PR_SET_NO_NEW_PRIVS_0"] = P(38, 0, 0, 0, 0)
        # PR_SET_SECCOMP strict -> a second, stricter filter is fine; an allow-all
        # filter on top must not weaken the first: keyctl is still refused.
        import struct as _s
        def weaken():
            prog = _s.pack("HBBI", 0x06, 0, 0, 0x7fff0000)      # ret SECCOMP_RET_ALLOW
            arr = ctypes.create_string_buffer(prog)
            fprog = _s.pack("HxxxxxxQ", 1, ctypes.addressof(arr))
            fp = ctypes.create_string_buffer(fprog)
            r = P(22, 2, ctypes.addressof(fp), 0, 0)           # PR_SET_SECCOMP, FILTER
            return {"install": r, "keyctl": list(sc(250, 0, -3, 0)),
                    "unshare": list(sc(272, 0x10000000))}
        out["weaken"] = forked(weaken)
        with open("/proc/self/status") as f:
            st = {l.split(":")[0]: l.split(":")[1].strip() for l in f if ":" in l}
        out["caps"] = [st["CapEff"], st["CapAmb"], st["NoNewPrivs"]]
        print(json.dumps(out))
    ''', *(["--root"] if mode == "root" else []))
    for k in ("PR_SET_MM_START_BRK", "PR_SET_MM_EXE_FILE", "PR_SET_MM_MAP",
              "AMBIENT_RAISE_SYS_ADMIN", "AMBIENT_RAISE_SYS_PTRACE", "PR_SET_SECUREBITS"):
        assert res[k][0] == -1 and res[k][1] in (EPERM, errno.EINVAL), (k, res[k])
    assert res["PR_SET_NO_NEW_PRIVS_0"] == [-1, errno.EINVAL]
    w = res["weaken"]
    assert w["install"][0] == 0, w          # stacking is allowed...
    assert w["keyctl"] == [-1, EPERM], w    # ...but never weakens
    assert w["unshare"] == [-1, EPERM], w
    assert int(res["caps"][1], 16) == 0 and res["caps"][2] == "1", res


# --------------------------------------------------------------------------
# other processes, keyrings, /sys, /proc/sys, perf, userfaultfd, io_uring, namespaces


def test_ptrace_of_a_sibling_and_traceme(run):
    res = probe(run, r'''
        import signal, time
        pid = os.fork()
        if pid == 0:
            time.sleep(30); os._exit(0)
        out = {"attach": list(sc(101, 16, pid, 0, 0)),       # PTRACE_ATTACH
               "seize": list(sc(101, 0x4206, pid, 0, 0)),    # PTRACE_SEIZE
               "traceme": forked(lambda: list(sc(101, 0, 0, 0, 0)))}
        iov = (ctypes.c_char * 16)()
        out["vm_readv"] = list(sc(310, pid, 0, 1, 0, 1, 0))
        out["pidfd_getfd"] = forked(lambda: list(sc(438, sc(434, pid, 0)[0], 0, 0)))
        out["kcmp"] = list(sc(312, os.getpid(), pid, 0, 0, 0))
        with open(f"/proc/{pid}/status") as f:
            out["tracer"] = [l.split()[1] for l in f if l.startswith("TracerPid")][0]
        os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)
        print(json.dumps(out))
    ''')
    for k in ("attach", "seize", "traceme", "vm_readv", "pidfd_getfd", "kcmp"):
        assert res[k] == [-1, EPERM], (k, res)
    assert res["tracer"] == "0"


def test_keyrings_invisible_and_refused(run):
    res = probe(run, r'''
        out = {}
        for p in ("/proc/keys", "/proc/key-users"):
            try:
                out[p] = open(p).read()
            except OSError as e:
                out[p] = e.errno
        # KEYCTL_JOIN_SESSION_KEYRING "evil"; KEYCTL_SEARCH in the user keyring
        out["join"] = list(sc(250, 1, b"evil"))
        out["search"] = list(sc(250, 10, -4, b"user", b"x", 0))
        print(json.dumps(out))
    ''')
    for p in ("/proc/keys", "/proc/key-users"):
        assert res[p] in ("", errno.ENOENT, errno.EACCES), (p, res[p])
    assert res["join"] == [-1, EPERM] and res["search"] == [-1, EPERM], res


def _read(p):
    with open(p) as f:
        return f.read()


def test_sys_absent_and_proc_sys_writes_refused_as_root(run):
    keys = ["kernel/core_pattern", "kernel/modprobe", "vm/drop_caches",
            "kernel/randomize_va_space", "net/ipv4/ip_forward", "kernel/hostname"]
    before = {k: _read(f"/proc/sys/{k}") for k in keys
              if k != "vm/drop_caches" and os.path.exists(f"/proc/sys/{k}")}
    res = probe(run, r'''
        out = {"sys": os.path.exists("/sys") and os.listdir("/sys")}
        for k, v in (("kernel/core_pattern", "|/workspace/pwn"), ("kernel/modprobe", "/workspace/pwn"),
                     ("vm/drop_caches", "3"), ("kernel/randomize_va_space", "0"),
                     ("net/ipv4/ip_forward", "1"), ("kernel/hostname", "evil")):
            try:
                with open("/proc/sys/" + k, "w") as f:
                    f.write(v)
                out[k] = 0
            except OSError as e:
                out[k] = e.errno
        # the same through a re-open of an O_PATH fd
        fd = os.open("/proc/sys/kernel/core_pattern", os.O_PATH)
        try:
            os.open(f"/proc/self/fd/{fd}", os.O_WRONLY); out["reopen"] = 0
        except OSError as e:
            out["reopen"] = e.errno
        print(json.dumps(out))
    ''', "--root")
    assert res.pop("sys") in (False, []), f"/sys visible: {res}"
    assert res.pop("reopen") in (errno.EROFS, errno.EACCES, errno.EPERM), res
    missing = {k for k in keys if not os.path.exists(f"/proc/sys/{k}")}
    assert all(v in (errno.EROFS, errno.EACCES, errno.EPERM)
               or (k in missing and v == errno.ENOENT) for k, v in res.items()), res
    after = {k: _read(f"/proc/sys/{k}") for k in before}
    assert after == before, "host sysctls changed"


def test_perf_event_open_real_attr_refused(run):
    res = probe(run, r'''
        attr = ctypes.create_string_buffer(128)
        struct.pack_into("IIQ", attr, 0, 1, 128, 0)      # PERF_TYPE_SOFTWARE, size, CPU_CLOCK
        out = {"self": list(sc(298, attr, 0, -1, -1, 0)),
               "pid1_cpu0": list(sc(298, attr, 1, 0, -1, 0)),
               "all_cpu0": list(sc(298, attr, -1, 0, -1, 0))}
        print(json.dumps(out))
    ''')
    assert all(v == [-1, EPERM] for v in res.values()), res


def test_userfaultfd_device_and_syscall_refused(run):
    res = probe(run, r'''
        out = {}
        try:
            os.open("/dev/userfaultfd", os.O_RDWR); out["dev"] = 0
        except OSError as e:
            out["dev"] = e.errno
        out["sys_cloexec"] = list(sc(323, 0o2000000))
        out["sys_nonblock_umo"] = list(sc(323, 0o4000 | 1))
        print(json.dumps(out))
    ''')
    assert res["dev"] in (errno.ENOENT, errno.EACCES, errno.EPERM), res
    assert res["sys_cloexec"] == [-1, EPERM] and res["sys_nonblock_umo"] == [-1, EPERM], res


def test_io_uring_every_entry_point_refused(run):
    res = probe(run, r'''
        params = ctypes.create_string_buffer(120)
        out = {"setup": list(sc(425, 8, params)),
               "setup_sqpoll": list(sc(425, 8, params)),
               "enter": list(sc(426, 0, 1, 1, 1, 0, 0)),
               "register": list(sc(427, 0, 0, 0, 0))}
        print(json.dumps(out))
    ''')
    assert all(v == [-1, EPERM] for v in res.values()), res


@pytest.mark.parametrize("mode", ["user", "root"])
def test_setns_to_every_proc_ns_file(run, mode):
    res = probe(run, r'''
        import glob, subprocess
        helper = subprocess.Popen(["/bin/sleep", "30"])
        out = {"opened": 0, "setns": {}, "open_err": {}}
        for p in sorted(glob.glob("/proc/[0-9]*/ns/*")):
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError as e:
                out["open_err"][p] = e.errno
                continue
            out["opened"] += 1
            for nstype in (0, 0x10000000, 0x20000, 0x40000000):
                r = sc(308, fd, nstype)
                if r != (-1, EPERM) and not (nstype and r[1] == errno.EINVAL):
                    out["setns"][f"{p} {nstype:#x}"] = list(r)
            os.close(fd)
        # pidfd-based setns (5.8+)
        pfd = sc(434, 1, 0)[0]
        if pfd >= 0:
            r = sc(308, pfd, 0x10000000 | 0x20000)
            if r != (-1, EPERM):
                out["setns"]["pidfd1"] = list(r)
        helper.kill(); helper.wait()
        print(json.dumps(out))
    ''', *(["--root"] if mode == "root" else []))
    assert res["opened"] >= 8, res          # at least our own ns files
    assert res["setns"] == {}, f"setns not refused with EPERM: {res['setns']}"


@pytest.mark.parametrize("mode", ["user", "root"])
def test_shocker_open_by_handle_at_root_inode(run, mode):
    """The 'shocker' escape: open_by_handle_at on a guessed handle of the
    host filesystem's root inode, relative to a runtime fd."""
    res = probe(run, r'''
        out = {}
        mfd = os.open("/usr", os.O_RDONLY)
        for htype, ino in ((1, 2), (1, 128), (0x81, 2)):    # FILEID_INO32_GEN / ext4 root
            h = ctypes.create_string_buffer(8 + 8)
            struct.pack_into("IiII", h, 0, 8, htype, ino, 0)
            r = sc(304, mfd, h, os.O_RDONLY)
            out[f"{htype}:{ino}"] = list(r)
        print(json.dumps(out))
    ''', *(["--root"] if mode == "root" else []))
    assert all(v == [-1, EPERM] for v in res.values()), res


@pytest.mark.parametrize("mode", ["user", "root"])
def test_mknod_device_nodes_refused(run, mode):
    res = probe(run, r'''
        import stat
        out = {}
        for name, kind, dev in (("mem", stat.S_IFCHR, os.makedev(1, 1)),
                                ("kmsg", stat.S_IFCHR, os.makedev(1, 11)),
                                ("sda", stat.S_IFBLK, os.makedev(8, 0)),
                                ("nvme", stat.S_IFBLK, os.makedev(259, 0)),
                                ("tty0", stat.S_IFCHR, os.makedev(4, 0))):
            for d in ("/workspace", "/dev/shm", "/tmp"):
                p = f"{d}/{name}"
                try:
                    os.mknod(p, kind | 0o666, dev); out[p] = 0
                    try:
                        os.open(p, os.O_RDONLY); out[p + " open"] = 0
                    except OSError as e:
                        out[p + " open"] = e.errno
                except OSError as e:
                    out[p] = e.errno
        os.mkfifo("/workspace/fifo-control")
        out["fifo"] = os.path.exists("/workspace/fifo-control")
        print(json.dumps(out))
    ''', *(["--root"] if mode == "root" else []))
    assert res.pop("fifo") is True
    bad = {k: v for k, v in res.items() if v not in (EPERM, errno.EACCES)}
    assert not bad, f"device nodes created or opened: {bad}"
