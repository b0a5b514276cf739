"""What happens around a run: the cgroup v2 code path, and airlock itself being
SIGKILLed (the sandbox must not outlive it, and its cgroup is swept later)."""

import os
import signal
import subprocess
import time

import pytest

import hostprobe
from conftest import AIRLOCK_BIN, cmdline_of, host_pids_matching


def _below(pid, ancestor):
    """Whether process `pid` descends from `ancestor` (another run's `sleep 30` on this
    host is not ours)."""
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False

def _cgroup2_mount():
    """A cgroup2 mount of this host: /sys/fs/cgroup itself on a pure v2 host, the
    unified mount beside the v1 hierarchies on a hybrid one."""
    for path in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if hostprobe.fs_type(path) == hostprobe.CGROUP2_MAGIC:
            return path
    return None


UNIFIED = _cgroup2_mount()


@pytest.mark.skipif(UNIFIED is None, reason="this host has no cgroup2 mount")
def test_cgroup_v2_path_joins_and_cleans_up():
    """On a v2 tree airlock uses CLONE_INTO_CGROUP and cgroup.kill. Run without
    memory/pids limits, so that it holds whatever controllers the mount has (a hybrid
    host's unified mount has none)."""
    env = dict(os.environ, AIRLOCK_CGROUP_ROOT=UNIFIED)
    r = subprocess.run([AIRLOCK_BIN, "run", "--memory", "0", "--pids", "0", "--",
                        "/bin/sh", "-c", "cat /proc/self/cgroup"],
                       env=env, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # the cgroup namespace is rooted at the sandbox's own cgroup
    assert b"0::/\n" in r.stdout, r.stdout
    # and the timeout path (PID 1 killed, cgroup.kill) works there too
    r = subprocess.run([AIRLOCK_BIN, "run", "--memory", "0", "--pids", "0", "--timeout", "1s",
                        "--", "sleep", "30"], env=env, capture_output=True, timeout=30)
    assert r.returncode == 124, r.stderr
    # removed by the run's detached clean-up (jail/ahead/recycle.h), which may still be
    # under way when the run has returned
    deadline = time.monotonic() + 5
    while True:
        left = [d for d in os.listdir(f"{UNIFIED}/airlock") if d.startswith("run-")]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert left == [], left


@pytest.mark.skipif(UNIFIED is None or "memory" in hostprobe.cgroup_v2_controllers(UNIFIED),
                    reason="needs a cgroup2 mount without the memory controller "
                           "(a hybrid host's unified mount)")
def test_cgroup_v2_missing_controller_is_a_clear_setup_error():
    env = dict(os.environ, AIRLOCK_CGROUP_ROOT=UNIFIED)
    r = subprocess.run([AIRLOCK_BIN, "run", "--memory", "64M", "--", "true"],
                       env=env, capture_output=True, timeout=30)
    assert r.returncode == 125
    assert b"airlock: setup failed: cgroup (v2)" in r.stderr, r.stderr
    assert b"memory.max" in r.stderr


def test_sigkill_of_airlock_ends_the_sandbox_and_cgroup_is_swept():
    marker = "%d" % (77_000_000 + os.getpid() % 1_000_000)
    p = subprocess.Popen([AIRLOCK_BIN, "run", "--", "/bin/sh", "-c", f"sleep {marker}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if [x for x in host_pids_matching(f"sleep {marker}") if x != p.pid
                and open(f"/proc/{x}/cmdline", "rb").read().startswith(b"sleep")]:
            break
        time.sleep(0.05)
    else:
        p.kill()
        pytest.fail("workload never started")
    stale = f"run-{p.pid}-"
    pids_tree = os.path.dirname(hostprobe.cgroup_dir("pids", "x"))
    assert any(d.startswith(stale) for d in os.listdir(pids_tree))
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=5)
    # PID 1 sees its control socket close and ends the sandbox
    deadline = time.monotonic() + 5
    while host_pids_matching(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_matching(f"sleep {marker}") == [], "the sandbox outlived airlock"

    def stale_procs():
        procs = []
        for tree in hostprobe.cgroup_dirs():
            for d in os.listdir(tree) if os.path.isdir(tree) else ():
                if d.startswith(stale):
                    try:
                        with open(f"{tree}/{d}/cgroup.procs") as f:
                            procs += f.read().split()
                    except OSError:
                        pass
        return procs

    # Its PID 1 may still be on its way out (a loaded host): a cgroup with a process in
    # it cannot be removed by anyone, so the sweep is judged once it is empty.
    deadline = time.monotonic() + 10
    while stale_procs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stale_procs() == [], "processes of the killed run are still in its cgroups"
    # the orphaned cgroup is removed by the next run
    subprocess.run([AIRLOCK_BIN, "run", "--", "true"], check=True, timeout=30)
    for tree in hostprobe.cgroup_dirs():
        left = [d for d in os.listdir(tree) if d.startswith(stale)] if os.path.isdir(tree) else []
        assert left == [], (tree, left)


def test_v1_cgroups_made_after_the_clone_are_joined_before_the_workload():
    """On cgroup v1 the parent makes the run's cgroups after the clone, while the child
    builds its root (on another CPU). The child waits for them before its cgroup namespace
    and anything of the sandbox's: its namespace is rooted at its own memory and pids
    cgroups (a namespace made before the attach would show a path above them)."""
    if hostprobe.cgroup_layout() != "v1":
        pytest.skip("cgroup v1 only: a hierarchy per controller (this host is pure v2)")
    for _ in range(5):
        r = subprocess.run([AIRLOCK_BIN, "run", "--", "/bin/sh", "-c", "cat /proc/self/cgroup"],
                           capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr
        view = {c: line.split(":", 2)[2] for line in r.stdout.decode().splitlines()
                for c in line.split(":", 2)[1].split(",")}
        assert view["memory"] == "/" and view["pids"] == "/", r.stdout


def _cpus_of_workload(prefix=()):
    r = subprocess.run([*prefix, AIRLOCK_BIN, "run", "--", "/bin/sh", "-c",
                        "grep Cpus_allowed_list /proc/self/status"],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode().split()[-1]


def test_the_workload_runs_on_the_callers_cpus():
    """The child is moved off the caller's CPU for its set-up (so that it overlaps the
    parent's cgroup work instead of waiting behind it); it takes the caller's CPUs back
    before the workload runs -- all of them, or only those the caller was limited to."""
    mine = sorted(os.sched_getaffinity(0))
    want = f"{mine[0]}-{mine[-1]}" if len(mine) > 1 else str(mine[0])
    if mine != list(range(mine[0], mine[-1] + 1)):
        pytest.skip(f"non-contiguous CPU set {mine}")
    for _ in range(3):
        assert _cpus_of_workload() == want
    for cpu in mine[:2]:
        assert _cpus_of_workload(("taskset", "-c", str(cpu))) == str(cpu)


def test_a_stale_cgroup_left_in_some_hierarchies_is_swept():
    """A killed run's cgroup that was still busy in one v1 hierarchy when a sweep removed
    it from another must be swept again later. Its pids cgroup is made first and removed
    last, so it marks whatever is left: the next run's sweep (which reads pids/ alone)
    removes the rest."""
    if hostprobe.cgroup_layout() != "v1":
        pytest.skip("cgroup v1 only: a hierarchy per controller (this host is pure v2)")
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    name = f"run-{dead.pid}-1"
    paths = [f"/sys/fs/cgroup/{c}/airlock/{name}" for c in ("memory", "pids")]
    for path in paths:
        os.mkdir(path)  # as if its cpu twin were gone already
    try:
        subprocess.run([AIRLOCK_BIN, "run", "--", "true"], check=True, timeout=30)
        left = [p for p in paths if os.path.exists(p)]
        assert left == [], f"cgroups of a dead run were left: {left}"
    finally:
        for path in paths:
            if os.path.isdir(path):
                os.rmdir(path)


LAUNCHES = "/run/airlock/launches"


def _slot_holders():
    """pids holding a POSIX write lock on the launches file (src/jail/ahead/crowd.c)."""
    st = os.stat(LAUNCHES)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    held = []
    for line in open("/proc/locks"):
        f = line.split()
        if len(f) >= 6 and f[1] == "POSIX" and f[3] == "WRITE" and f[5] == dev:
            held.append(int(f[4]))
    return held


def test_a_run_holds_a_launch_slot_only_while_it_lives():
    """Every one-shot counts itself among the launches under way (the hint that keeps
    concurrent launches from moving their children onto each other's CPUs) by a lock the
    kernel drops when airlock ends, so that even a SIGKILLed run leaves no count behind;
    the sandbox's own processes hold none."""
    p = subprocess.Popen([AIRLOCK_BIN, "run", "--no-pool", "--", "sleep", "30"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:  # the slot is taken first; the workload starts a little later
            held = _slot_holders() if os.path.exists(LAUNCHES) else []
            # the workload itself: its argv starts with sleep (airlock's, and PID 1's until
            # it wipes its copy, start with airlock's path)
            sleepers = [q for q in host_pids_matching("sleep 30")
                        if cmdline_of(q).startswith("sleep 30") and _below(q, p.pid)]
            if p.pid in held and sleepers:
                break
            assert p.poll() is None, p.stderr.read()
            assert time.monotonic() < deadline, f"slot {p.pid in held}, workload {sleepers}"
            time.sleep(0.02)
        assert not set(sleepers) & set(_slot_holders()), "a sandbox process holds a slot"
        # nor an fd of the file: not the workload, not the sandbox's PID 1 (its parent)
        inits = {int(ln.split()[1]) for q in sleepers for ln in open(f"/proc/{q}/status")
                 if ln.startswith("PPid:")}
        assert p.pid not in inits, "the workload is airlock's own child, not PID 1's"

        for q in set(sleepers) | inits:
            fds = [os.readlink(f"/proc/{q}/fd/{fd}") for fd in os.listdir(f"/proc/{q}/fd")]
            assert LAUNCHES not in fds, (q, fds)
        p.kill()
        p.wait(timeout=10)
        assert p.pid not in _slot_holders(), "a SIGKILLed run's slot is still held"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # a run that ends normally lets its slot go as well (other runs on this host may hold
    # theirs meanwhile: only ours are looked for)
    q = subprocess.Popen([AIRLOCK_BIN, "run", "--no-pool", "--", "true"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = q.communicate(timeout=30)
    assert q.returncode == 0, err
    assert not {p.pid, q.pid} & set(_slot_holders()), _slot_holders()


def test_a_set_up_failure_after_the_child_made_its_memory_cgroup_leaves_none(tmp_path):
    """On v1 a one-shot's child makes and joins its memory cgroup itself, first thing,
    while airlock makes the pids one; a set-up that fails after that (here the root: an
    --image that is a file) must still leave no cgroup of the run in any hierarchy."""
    if hostprobe.cgroup_layout() != "v1":
        pytest.skip("cgroup v1 only: a hierarchy per controller (this host is pure v2)")
    f = tmp_path / "file"
    f.write_text("")
    p = subprocess.Popen([AIRLOCK_BIN, "run", "--no-pool", "--image", str(f), "--", "true"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 125, err
    assert "Not a directory" in err, err
    left = [f"{c}/{d}" for c in ("memory", "pids", "cpu")
            for d in os.listdir(f"/sys/fs/cgroup/{c}/airlock") if d.startswith(f"run-{p.pid}-")]
    assert left == [], left


def test_the_sandboxs_pid1_holds_nothing_of_the_callers(tmp_path):
    """The workload closes what it inherited (test_cli), but the sandbox's PID 1 -- airlock's
    clone, which never execs -- lives as long as the sandbox: it must not keep the caller's
    open files either (here a file without FD_CLOEXEC, and stdin/stdout/stderr files).
    Seen from the host: PID 1's fds are its own (pipes, sockets, the host's /dev/null)."""
    secret = tmp_path / "secret-fd"
    secret.write_text("fd-secret-content")
    fd = os.open(secret, os.O_RDONLY)
    os.set_inheritable(fd, True)
    (tmp_path / "in").write_text("")
    inf = open(tmp_path / "in", "rb")
    out, errf = open(tmp_path / "out", "wb"), open(tmp_path / "err", "wb")
    try:
        p = subprocess.Popen([AIRLOCK_BIN, "run", "--no-pool", "--", "sleep", "30"],
                             stdin=inf, stdout=out, stderr=errf, pass_fds=(fd,))
    finally:
        os.close(fd)
        inf.close()
        out.close()
        errf.close()
    try:
        deadline = time.monotonic() + 10
        while True:  # PID 1 is the workload's parent once the workload runs
            sleepers = [q for q in host_pids_matching("sleep 30")
                        if cmdline_of(q).startswith("sleep 30") and _below(q, p.pid)]
            if sleepers:
                break
            assert p.poll() is None, (tmp_path / "err").read_text()
            assert time.monotonic() < deadline, "no workload"
            time.sleep(0.02)
        init = [int(ln.split()[1]) for ln in open(f"/proc/{sleepers[0]}/status")
                if ln.startswith("PPid:")][0]
        assert init != p.pid, "the workload is airlock's own child, not PID 1's"
        # what airlock itself holds shows that the caller's fds did reach it
        mine = [os.readlink(f"/proc/{p.pid}/fd/{f}") for f in os.listdir(f"/proc/{p.pid}/fd")]
        assert str(secret) in mine, mine
        held = {int(f): os.readlink(f"/proc/{init}/fd/{f}") for f in os.listdir(f"/proc/{init}/fd")}
        for f, target in held.items():
            assert str(tmp_path) not in target, (f, held)
            assert target.startswith(("pipe:", "socket:", "anon_inode:")) or \
                target.endswith("null"), (f, held)
        assert len(held) <= 8, held
    finally:
        p.kill()
        p.wait(timeout=10)
