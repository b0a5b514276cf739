"""What this host has, probed on the host itself (never assumed).

Hosts of one kind differ: some kernels have no i386 syscall entry, most
users' hosts are pure cgroup v2 while ours are a v1 hybrid, /dev/kvm may be
absent or a software hypervisor, IPv6 may be disabled. A test that depends on
one of these asks here first and asserts the strongest property that holds
either way, or skips with the reason this module gives.

Every probe is computed once per pytest process and is cheap (a fork, a few
stats). `report()` is the one-line summary printed in pytest's header.
"""

import ctypes
import functools
import os
import shutil
import subprocess

CGROUP_FS = "/sys/fs/cgroup"
CGROUP2_MAGIC = 0x63677270

# ---------------------------------------------------------------------------
# the build under test


@functools.lru_cache(maxsize=None)
def sanitized_build(path=None):
    """The airlock under test is the AddressSanitizer build (make test's second pass): its
    timings are ASan's (every allocation and access checked), not the code's, so latency
    bounds are judged in the plain pass alone."""
    path = path or os.environ.get("AIRLOCK_BIN") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "airlock")
    try:
        with open(path, "rb") as f:
            return b"libasan.so" in f.read()
    except OSError:
        return False


def skip_latency_bound_if_sanitized(what, ratio):
    """Under the ASan build a latency bound is not judged: skipped, with the ratio measured.
    The test's other checks have run by then."""
    if sanitized_build():
        import pytest
        pytest.skip(f"{what}: {ratio:.2f}x here, a bound of the ASan build's timings (the "
                    "plain pass judges it; the scenario's other checks ran)")


# ---------------------------------------------------------------------------
# syscall ABIs

# A process of its own (not a fork of pytest's, whose fault handler would print the
# expected SIGSEGV) runs `mov eax, 20 (i386 getpid); int 0x80; ret`.
_INT80_GETPID = r"""
import ctypes, mmap, os
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))
fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
print(fn(), os.getpid())
"""


@functools.lru_cache(maxsize=None)
def i386_abi():
    """'yes' when `int 0x80` getpid works in a plain host process (the kernel has
    its i386 entry), 'no' when it dies of a signal there (SIGSEGV on kernels built
    or booted without IA32 emulation) or returns -ENOSYS."""
    r = subprocess.run(["/usr/bin/python3", "-c", _INT80_GETPID], capture_output=True,
                       timeout=30)
    out = r.stdout.split()
    if r.returncode != 0 or len(out) != 2:
        return "no"
    return "yes" if int(out[0]) == int(out[1]) else "no"


@functools.lru_cache(maxsize=None)
def x32_abi():
    """'yes' when an x32 getpid (nr | 0x40000000) works on the host, else 'no'."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(0x40000000 | 39))
    return "yes" if r == os.getpid() else "no"


# ---------------------------------------------------------------------------
# cgroups


def fs_type(path):
    """statfs f_type of `path`, or None."""
    class Statfs(ctypes.Structure):
        _fields_ = [("f_type", ctypes.c_long), ("_rest", ctypes.c_byte * 112)]
    libc = ctypes.CDLL(None, use_errno=True)
    st = Statfs()
    if libc.statfs(path.encode(), ctypes.byref(st)) != 0:
        return None
    return st.f_type & 0xffffffff


@functools.lru_cache(maxsize=None)
def cgroup_layout():
    """'v2' when /sys/fs/cgroup itself is a cgroup2 mount (a pure v2 host), 'v1'
    when it holds per-controller v1 hierarchies (a hybrid host like ours)."""
    return "v2" if fs_type(CGROUP_FS) == CGROUP2_MAGIC else "v1"


def cgroup_v2_controllers(root):
    """The controllers a cgroup2 mount at `root` can give its children."""
    try:
        with open(os.path.join(root, "cgroup.controllers")) as f:
            return set(f.read().split())
    except OSError:
        return set()


def usable_cgroup2_root():
    """(root, None) for a cgroup2 mount whose memory, pids and cpu controllers
    airlock can use, or (None, why) when this host has none."""
    need = {"memory", "pids", "cpu"}
    for root in (CGROUP_FS, os.path.join(CGROUP_FS, "unified")):
        if fs_type(root) != CGROUP2_MAGIC:
            continue
        have = cgroup_v2_controllers(root)
        if need <= have:
            return root, None
        return None, (f"the cgroup2 mount at {root} offers {sorted(have) or 'no controllers'}; "
                      "memory, pids and cpu are bound to v1 hierarchies on this host "
                      "and no cgroup2 mount can take them while those exist")
    return None, "no cgroup2 mount on this host"


def cgroup_dirs():
    """The directories under which airlock makes its cgroups on this host."""
    if cgroup_layout() == "v2":
        return [os.path.join(CGROUP_FS, "airlock")]
    return [os.path.join(CGROUP_FS, c, "airlock") for c in ("memory", "pids", "cpu")]


def cgroup_dir(ctrl, name):
    """Path of airlock's cgroup `name` for controller `ctrl` (v1: one tree per
    controller; v2: one directory for all)."""
    if cgroup_layout() == "v2":
        return os.path.join(CGROUP_FS, "airlock", name)
    return os.path.join(CGROUP_FS, ctrl, "airlock", name)


def proc_cgroups(pid):
    """{controller: path} of process `pid`, for memory, pids and cpu (on v2 the one
    unified path stands for each)."""
    out = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            if hid == "0" and not ctrls:
                if cgroup_layout() == "v2":
                    out.update({c: path for c in ("memory", "pids", "cpu")})
                continue
            for c in ctrls.split(","):
                out[c] = path
    return out


def _read(path):
    with open(path) as f:
        return f.read().strip()


def limits_at(paths):
    """The limits a cgroup carries, read the way its hierarchy spells them:
    {"memory": bytes or None (no limit), "pids": "N" or "max", "cpu": CPUs or None}.
    `paths`: {controller: path below the hierarchy's root}, as proc_cgroups gives."""
    if cgroup_layout() == "v2":
        d = CGROUP_FS + paths["memory"]
        mem = _read(f"{d}/memory.max")
        quota, period = _read(f"{d}/cpu.max").split()
        return {"memory": None if mem == "max" else int(mem),
                "pids": _read(f"{d}/pids.max"),
                "cpu": None if quota == "max" else int(quota) / int(period)}
    mem = int(_read(f"{CGROUP_FS}/memory{paths['memory']}/memory.limit_in_bytes"))
    cpu = f"{CGROUP_FS}/cpu{paths['cpu']}"
    quota = int(_read(f"{cpu}/cpu.cfs_quota_us"))
    return {"memory": None if mem >= (1 << 62) else mem,
            "pids": _read(f"{CGROUP_FS}/pids{paths['pids']}/pids.max"),
            "cpu": None if quota < 0 else quota / int(_read(f"{cpu}/cpu.cfs_period_us"))}


DEFAULT_CPU_WEIGHT = 100  # v2 cpu.weight of a new cgroup; v1 cpu.shares 1024, scaled


def cpu_weight(path):
    """The CPU weight of the cgroup at `path` below the cpu hierarchy's root, on v2's
    scale (cpu.weight; v1 cpu.shares / 10.24, so that 1024 reads 100)."""
    if cgroup_layout() == "v2":
        return int(_read(f"{CGROUP_FS}{path}/cpu.weight"))
    return int(_read(f"{CGROUP_FS}/cpu{path}/cpu.shares")) * 100 // 1024


def cpu_cgroup_of(pid):
    """The path of process `pid`'s cpu cgroup below its hierarchy's root."""
    return proc_cgroups(pid)["cpu"]


def limits_of(name):
    """limits_at() of airlock's cgroup `name` (a sandbox id, run-..., ahead-...)."""
    return limits_at({c: f"/airlock/{name}" for c in ("memory", "pids", "cpu")})


# ---------------------------------------------------------------------------
# other kernel features


@functools.lru_cache(maxsize=None)
def landlock_abi():
    """The Landlock ABI version the kernel offers (0: none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(r) if r > 0 else 0


@functools.lru_cache(maxsize=None)
def kvm():
    """'absent', 'software' (kvm_pvm: guest ring 0 emulated) or 'hardware'."""
    if not os.path.exists("/dev/kvm"):
        return "absent"
    try:
        with open("/proc/modules") as f:
            mods = f.read()
    except OSError:
        mods = ""
    return "software" if "kvm_pvm" in mods else "hardware"


@functools.lru_cache(maxsize=None)
def ipv6():
    """True when the host's IPv6 stack is there and not disabled."""
    try:
        with open("/proc/sys/net/ipv6/conf/all/disable_ipv6") as f:
            return f.read().strip() == "0"
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def unprivileged_userns():
    """True when an unprivileged process may create a user namespace (the
    Debian knob and the generic max_user_namespaces limit both allow it)."""
    for path, bad in (("/proc/sys/kernel/unprivileged_userns_clone", "0"),
                      ("/proc/sys/user/max_user_namespaces", "0")):
        try:
            with open(path) as f:
                if f.read().strip() == bad:
                    return False
        except OSError:
            pass
    return True


def fd_links(pid, prefix):
    """What pid's open fds point to, those that start with prefix ("socket:[", "mnt:[", ...);
    empty once pid is gone."""
    out = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            out.add(target)
    return out


SLICE_PROBE = r"""
import ctypes, struct, sys
def mine():
    return next((l.split(":")[1].strip() for l in open("/proc/self/sched")
                 if l.startswith("se.slice")), "")
print(mine())
libc = ctypes.CDLL(None, use_errno=True)
attr = struct.pack("IIQiIQQQ", 48, 0, 0, 0, 0, 200000, 0, 0)  # SCHED_OTHER, 0.2 ms
if libc.syscall(314, 0, ctypes.create_string_buffer(attr), 0) != 0:  # sched_setattr
    sys.exit(1)
print(mine())
"""


def sched_slice(pid):
    """The EEVDF slice (ns) /proc/PID/sched shows for pid, or None (no such line, or
    pid gone)."""
    try:
        with open(f"/proc/{pid}/sched") as f:
            for line in f:
                if line.startswith("se.slice"):
                    return int(line.split(":")[1])
    except (OSError, ValueError):
        pass
    return None


@functools.lru_cache(maxsize=None)
def custom_slices():
    """(True, the default slice in ns) when a task gets the EEVDF slice it asks with
    sched_setattr (Linux 6.12 and later; asked in a child of its own), else (False, None)."""
    r = subprocess.run(["/usr/bin/python3", "-c", SLICE_PROBE], capture_output=True,
                       text=True, check=False)
    got = r.stdout.split()
    if r.returncode != 0 or len(got) != 2 or got[1] != "200000" or not got[0].isdigit():
        return False, None
    return True, int(got[0])


@functools.lru_cache(maxsize=None)
def overlayfs():
    """True when the kernel serves overlayfs (built in, or its module loads): a daemon
    fork is then copy-on-write (docs/snapshots.md, "Fork")."""
    def listed():
        try:
            with open("/proc/filesystems") as f:
                return any(ln.split()[-1] == "overlay" for ln in f if ln.strip())
        except OSError:
            return False
    if listed():
        return True
    if shutil.which("modprobe"):
        subprocess.run(["modprobe", "-q", "overlay"], capture_output=True, timeout=30)
    return listed()


@functools.lru_cache(maxsize=None)
def nftables():
    """None when nf_tables works here (a table can be listed), else why not."""
    if not shutil.which("nft"):
        return "the nft command is missing"
    r = subprocess.run(["nft", "list", "tables"], capture_output=True, timeout=30)
    if r.returncode != 0:
        return "nf_tables does not work on this kernel: " + r.stderr.decode(errors="replace").strip()
    return None


def report():
    """One line for pytest's header: what the suite found on this host."""
    v2root, _ = usable_cgroup2_root()
    return ("host: kernel %s; i386 ABI %s; x32 ABI %s; cgroups %s (usable cgroup2: %s); "
            "landlock ABI %d; /dev/kvm %s; IPv6 %s; unprivileged userns %s; nftables %s" % (
                os.uname().release, i386_abi(), x32_abi(), cgroup_layout(), v2root or "none",
                landlock_abi(), kvm(), "on" if ipv6() else "off",
                "yes" if unprivileged_userns() else "no", "yes" if nftables() is None else "no"))


if __name__ == "__main__":
    print(report())
