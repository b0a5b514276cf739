"""Shared fixtures for the `airlock run` integration tests.

Fixtures
--------
airlock      path of the binary (env AIRLOCK_BIN, default <repo>/build/airlock)
run          run(args, input=None, timeout=30, ...) -> CompletedProcess
             runs `airlock run *args`; stdout/stderr are bytes, and the result
             also carries `.out` / `.err` (decoded, utf-8 with replacement) and
             `.duration` (seconds, wall clock).
invoke       like run, but without the implicit `run` subcommand.
run_json     run_json(args, ...) -> CompletedProcess with `.json` (the parsed
             object printed by `airlock run --json *args`).
marker       a per-test unique string to put in argv of long-lived workload
             processes, so the test (and the leftover check) can find them on
             the host.  `marker.sleep` is a unique `sleep` command line.
py_cmd(src)  argv running `src` with /usr/bin/python3 -c inside the sandbox.
sh_cmd(src)  argv running `src` with /bin/sh -c inside the sandbox.

After every test module an autouse fixture asserts that no cgroup directory
left by one of this module's airlock runs remains under
/sys/fs/cgroup/{memory,pids,cpu}/airlock/ (v1) or /sys/fs/cgroup/airlock/ (v2), and that no process whose cmdline
carries a marker of this session is still alive.  (A cgroup counts as ours
if it appeared while our airlock process ran, outlived it, and is empty or
holds our marked processes: other users of the host may run airlock at the
same time.)
"""

import itertools
import json
import os
import pathlib
import random
import signal
import subprocess
import time

import pytest

import hostprobe

REPO = pathlib.Path(__file__).resolve().parents[2]
AIRLOCK_BIN = os.environ.get("AIRLOCK_BIN", str(REPO / "build" / "airlock"))
PY = "/usr/bin/python3"
CGROUP_DIRS = hostprobe.cgroup_dirs()

# Digits only, so that it can also serve as a unique `sleep` duration.
SESSION = "%08d" % random.randrange(10_000_000, 99_999_999)
_counter = itertools.count(1)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: containment test taking seconds (still runs by default)")


def pytest_report_header(config):
    return hostprobe.report()


# --------------------------------------------------------------------------
# process / cgroup inspection on the host


def host_pids_matching(*needles):
    """Host pids whose cmdline contains any of `needles` (like pgrep -f)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if any(n.encode() in cmd for n in needles):
            found.append(int(entry))
    return found


def cmdline_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "<gone>"


def cgroup_children():
    """All directories below airlock's cgroup trees (any depth)."""
    out = set()
    for base in CGROUP_DIRS:
        if not os.path.isdir(base):
            continue
        for root, dirs, _ in os.walk(base):
            for d in dirs:
                out.add(os.path.join(root, d))
    return out


def _kill_cgroup_procs(path):
    for fname in ("cgroup.procs", "tasks"):
        try:
            with open(os.path.join(path, fname)) as f:
                for line in f:
                    try:
                        os.kill(int(line), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
        except OSError:
            pass


def _remove_cgroups(paths):
    for p in sorted(paths, key=len, reverse=True):
        _kill_cgroup_procs(p)
    time.sleep(0.2)
    for p in sorted(paths, key=len, reverse=True):
        try:
            os.rmdir(p)
        except OSError:
            pass


def _kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Marker(str):
    """A unique tag; put it in argv of workload processes."""

    def __new__(cls):
        n = next(_counter)
        self = super().__new__(cls, f"airlockmk{SESSION}t{n}")
        # GNU sleep accepts fractional seconds: a unique, ~3-year sleep.
        self.sleep_arg = f"{SESSION}.{n:04d}"
        self.sleep = f"sleep {self.sleep_arg}"
        return self

    def pids(self):
        return host_pids_matching(str(self), self.sleep_arg)

    def wait_present(self, timeout=10.0, prefixes=None):
        """Wait until a marked process exists; with `prefixes`, only count
        processes whose cmdline starts with one of them (e.g. the workload
        rather than airlock itself, whose argv also carries the marker)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = self.pids()
            if prefixes:
                p = [x for x in p if cmdline_of(x).startswith(tuple(prefixes))]
            if p:
                return p
            time.sleep(0.05)
        return []

    def wait_gone(self, timeout=3.0):
        deadline = time.monotonic() + timeout
        while True:
            p = self.pids()
            if not p or time.monotonic() >= deadline:
                return p
            time.sleep(0.05)


# --------------------------------------------------------------------------
# running the binary


# Cgroup dirs that appeared while one of *our* airlock processes ran and
# still existed when it had exited: leak candidates.  (Other airlock users on
# the same host create and remove cgroups concurrently; a plain before/after
# diff of the whole module would blame us for theirs.)
_CG_CANDIDATES = set()


def _note_cgroups(before):
    _CG_CANDIDATES.update(cgroup_children() - before)


def _descends_from_us(pid):
    """Whether process `pid` is this pytest process or one of its descendants."""
    me = os.getpid()
    for _ in range(64):
        if pid == me:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid <= 1:
            return False
    return False


def _made_ahead_by_another(path):
    """A cgroup a daemon's spawner made ahead ("ahead-PID-N") while that spawner lives and
    is not ours: another run's daemon on this host (its next sandbox's cgroups)."""
    name = os.path.basename(path)
    if not name.startswith("ahead-"):
        return False
    try:
        pid = int(name.split("-")[1])
    except (IndexError, ValueError):
        return False
    return os.path.exists(f"/proc/{pid}") and not _descends_from_us(pid)


def _cgroup_is_ours(path):
    """A leaked cgroup of ours is empty or holds marked processes; one that
    holds only unmarked processes belongs to someone else's live sandbox, and one
    made ahead by another run's live daemon is that daemon's."""
    if _made_ahead_by_another(path):
        return False
    pids = []
    for fname in ("cgroup.procs",):
        try:
            with open(os.path.join(path, fname)) as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            return False      # gone
    if not pids:
        return True
    return any(f"{SESSION}" in cmdline_of(p) for p in pids)


def _finish(proc, input, timeout, argv):
    out = err = b""
    start = time.monotonic()
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        # Give airlock a chance to clean up, then kill it.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        pytest.fail(f"airlock did not finish within {timeout}s: {argv!r}")
    dur = time.monotonic() - start
    out = out or b""
    err = err or b""
    res = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    res.out = out.decode("utf-8", "replace")
    res.err = err.decode("utf-8", "replace")
    res.duration = dur
    return res


def _spawn(argv, input=None, env=None, cwd=None, stdin=None, pass_fds=(),
           stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    if stdin is None:
        stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.Popen(argv, stdin=stdin, stdout=stdout,
                            stderr=stderr, env=full_env, cwd=cwd,
                            pass_fds=pass_fds)


@pytest.fixture(scope="session")
def airlock():
    if not (os.path.isfile(AIRLOCK_BIN) and os.access(AIRLOCK_BIN, os.X_OK)):
        pytest.fail(f"airlock binary not found at {AIRLOCK_BIN} "
                    "(set AIRLOCK_BIN or run `make build`)", pytrace=False)
    return AIRLOCK_BIN


@pytest.fixture(scope="session")
def invoke(airlock):
    def invoke(args, input=None, timeout=30, env=None, cwd=None, stdin=None,
               pass_fds=(), stdout=subprocess.PIPE):
        if isinstance(input, str):
            input = input.encode()
        argv = [airlock, *args]
        before = cgroup_children()
        proc = _spawn(argv, input, env, cwd, stdin, pass_fds, stdout)
        try:
            return _finish(proc, input, timeout, argv)
        finally:
            _note_cgroups(before)
    return invoke


@pytest.fixture(scope="session")
def run(invoke):
    def run(args, input=None, timeout=30, **kw):
        return invoke(["run", *args], input=input, timeout=timeout, **kw)
    return run


@pytest.fixture(scope="session")
def run_json(invoke):
    def run_json(args, input=None, timeout=30, **kw):
        res = invoke(["run", "--json", *args], input=input, timeout=timeout, **kw)
        try:
            obj = json.loads(res.out)
        except ValueError as e:
            pytest.fail(f"--json output is not one JSON object ({e}); "
                        f"rc={res.returncode} stdout={res.out[:500]!r} "
                        f"stderr={res.err[:500]!r}")
        assert isinstance(obj, dict), f"--json printed {type(obj).__name__}, not an object"
        res.json = obj
        return res
    return run_json


@pytest.fixture
def spawn(airlock):
    """Start `airlock run *args` in the background; returns the Popen.
    Keyword arguments go to Popen (stdout/stderr default to pipes: drain
    them, or pass subprocess.DEVNULL, or airlock may block writing)."""
    procs = []

    def spawn(args, **kw):
        before = cgroup_children()
        p = _spawn([airlock, "run", *args], **kw)
        procs.append((p, before))
        return p
    yield spawn
    for p, before in procs:
        if p.poll() is None:
            p.kill()
            p.communicate()
        _note_cgroups(before)


@pytest.fixture
def marker():
    m = Marker()
    yield m
    left = m.wait_gone(timeout=3.0)
    if left:
        desc = [(p, cmdline_of(p)) for p in left]
        _kill_pids(left)
        pytest.fail(f"processes with marker {m} survived the test: {desc}")


def py_cmd(src, *args):
    return ["--", PY, "-c", src, *args]


def sh_cmd(src, *args):
    return ["--", "/bin/sh", "-c", src, *args]


@pytest.fixture(scope="session")
def py():
    return py_cmd


@pytest.fixture(scope="session")
def sh():
    return sh_cmd


# --------------------------------------------------------------------------
# leftover check after each module


@pytest.fixture(scope="module", autouse=True)
def no_leftovers_after_module():
    _CG_CANDIDATES.clear()
    yield
    deadline = time.monotonic() + 3.0
    while True:
        new_cg = {c for c in _CG_CANDIDATES if _cgroup_is_ours(c)}
        procs = host_pids_matching(f"airlockmk{SESSION}", f"{SESSION}.")
        if (not new_cg and not procs) or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    _CG_CANDIDATES.clear()
    desc = [(p, cmdline_of(p)) for p in procs]
    _kill_pids(procs)
    if new_cg:
        _remove_cgroups(new_cg)
    assert not new_cg, f"leftover cgroup dirs after module: {sorted(new_cg)}"
    assert not procs, f"leftover marked processes after module: {desc}"
