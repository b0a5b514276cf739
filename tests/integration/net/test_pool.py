"""The one-shot pool: network namespaces made ahead (`airlock pool`, src/jail/ahead/pool.h).

What must hold: a run joins a pooled namespace only when the pool has one, and each
namespace serves one sandbox, once -- never reused, never shared by two runs at once,
never one of another build's; a pooled allowlist run enforces and logs exactly as a
cold one (the gateway's pooled namespace holds the same ruleset); nothing of the pool is
visible inside a sandbox; bad input changes nothing; drain leaves no mount behind.
Each test uses a pool of its own ($AIRLOCK_POOL), drained and checked at teardown.
"""
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import time

import pytest

from . import test_link
from .test_gateway_lite import BIN
from .test_ruleset import EXPECTED, lines

AIRLOCK = str(BIN / "airlock")


def mounts_under(root):
    with open("/proc/self/mountinfo") as f:
        return [ln for ln in f if f" {root}/" in ln]


def netns_inode_of(out):
    m = re.search(r"net:\[(\d+)\]", out)
    assert m, out
    return int(m.group(1))


# A network namespace's identity: its cookie (SO_NETNS_COOKIE), which the kernel never
# hands out twice. Inode numbers are recycled once a namespace is gone.
COOKIE = ["/usr/bin/python3", "-c",
          "import socket; s = socket.socket(); "
          "print('cookie', int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), 'little'))"]


def cookie_in(out):
    m = re.search(r"cookie (\d+)", out)
    assert m, out
    return int(m.group(1))


def cookie_of(nsfile):
    r = subprocess.run(["nsenter", f"--net={nsfile}", *COOKIE], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return cookie_in(r.stdout)


class Pool:
    def __init__(self, root):
        self.root = root
        self.env = dict(os.environ, AIRLOCK_POOL=root)

    def cmd(self, *args):
        return subprocess.run([AIRLOCK, "pool", *args], capture_output=True, text=True,
                              env=self.env, timeout=60)

    def fill(self, n):
        r = self.cmd("fill", str(n))
        assert r.returncode == 0, r.stderr
        return r

    @property
    def dir(self):
        dirs = glob.glob(f"{self.root}/v1-*")
        assert len(dirs) == 1, dirs
        return dirs[0]

    def ready(self, kind):
        """{netns inode: entry directory} of the ready entries of a kind."""
        out = {}
        for entry in glob.glob(f"{self.dir}/{kind}/*"):
            try:
                out[os.stat(f"{entry}/sbx").st_ino] = entry
            except OSError:
                pass  # claimed meanwhile
        return out

    def cookies(self, kind):
        """{netns cookie: entry directory} of the ready entries of a kind."""
        return {cookie_of(f"{e}/sbx"): e for e in self.ready(kind).values()}

    def wait_full(self, n, timeout=15):
        """Until the detached refills have made n of each kind again."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.ready("loopback")) == n and len(self.ready("link")) == n:
                return
            time.sleep(0.02)
        pytest.fail(f"the pool was not refilled to {n}: {self.cmd('status').stdout}")

    def run(self, *args, pooled=True, **kw):
        argv = [AIRLOCK, "run", *([] if pooled else ["--no-pool"]), *args]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env,
                              timeout=60, **kw)


@pytest.fixture
def pool(monkeypatch):
    root = f"/run/airlock/test-pool-{os.getpid()}"
    monkeypatch.setenv("AIRLOCK_POOL", root)  # for the suite's own run helpers too
    p = Pool(root)
    yield p
    r = p.cmd("drain")
    deadline = time.monotonic() + 10
    while mounts_under(root) and time.monotonic() < deadline:
        time.sleep(0.05)  # a refill finishing its entry, then drained by the next sweep
        p.cmd("drain")
    left = mounts_under(root)
    shutil.rmtree(root, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    assert left == [], f"pool mounts left after drain: {left}"


def test_fill_status_and_drain(pool):
    r = pool.fill(2)
    assert "ready: 2 deny-all, 2 linked" in r.stdout, r.stdout
    # Each entry pins its namespaces with bind mounts: 2 x (sbx, mnt) + 2 x (sbx, gw, mnt).
    assert len(mounts_under(pool.root)) == 10, mounts_under(pool.root)
    r = pool.cmd("status")
    assert r.returncode == 0 and "size 2; ready: 2 deny-all, 2 linked" in r.stdout, r.stdout
    r = pool.cmd("drain")
    assert r.returncode == 0 and "4 entries released" in r.stdout, r.stdout
    assert mounts_under(pool.root) == []
    r = pool.cmd("status")
    assert "size 0; ready: 0 deny-all, 0 linked" in r.stdout, r.stdout
    # Off means off: a run after the drain makes its own namespace and refills nothing.
    assert pool.run("--", "true").returncode == 0
    time.sleep(0.3)
    assert pool.ready("loopback") == {} and mounts_under(pool.root) == []


@pytest.mark.parametrize("bad", ["0", "-1", "65", "abc", "", "3x", "99999999999999999999"])
def test_a_bad_size_is_a_usage_error_and_changes_nothing(pool, bad):
    r = pool.cmd("fill", bad)
    assert r.returncode == 64, (r.returncode, r.stdout, r.stderr)
    assert "expected a number from 1 to 64" in r.stderr, r.stderr
    assert not os.path.exists(pool.root)


def test_unknown_pool_commands_are_usage_errors(pool):
    for args in (["bogus"], [], ["status", "extra"], ["drain", "now"]):
        r = pool.cmd(*args)
        assert r.returncode == 64, (args, r.returncode, r.stderr)
        assert "usage: airlock pool" in r.stderr, r.stderr
    assert not os.path.exists(pool.root)


def test_each_pooled_namespace_serves_one_run_and_is_never_used_again(pool):
    pool.fill(3)
    used = set()
    for i in range(6):
        pool.wait_full(3)
        before = pool.cookies("loopback")
        r = pool.run("--", *COOKIE)
        assert r.returncode == 0, r.stderr
        cookie = cookie_in(r.stdout)
        assert cookie in before, (i, cookie, before)      # it came from the pool ...
        assert cookie not in used, (i, cookie, used)      # ... was never used before
        used.add(cookie)
        pool.wait_full(3)
        assert cookie not in pool.cookies("loopback"), i  # ... nor is it offered again
    # The claimed entries were unpinned: only the ready ones are mounted.
    assert len(mounts_under(pool.root)) == 3 * 2 + 3 * 3
    assert os.listdir(f"{pool.dir}/claimed") == []


def test_concurrent_runs_never_share_a_namespace(pool):
    pool.fill(4)
    pooled = set(pool.cookies("loopback"))
    script = ("import socket, sys, time; s = socket.socket(); "
              "print('cookie', int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), 'little')); "
              "open('/tmp/mine', 'w').write(sys.argv[1]); time.sleep(0.3); "
              "print('mine', open('/tmp/mine').read())")

    def one(i):
        return pool.run("--", "/usr/bin/python3", "-c", script, f"run{i}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as ex:
        results = list(ex.map(one, range(8)))
    cookies = []
    for i, r in enumerate(results):
        assert r.returncode == 0, r.stderr
        assert f"mine run{i}\n" in r.stdout, r.stdout  # its /tmp is its own
        cookies.append(cookie_in(r.stdout))
    assert len(set(cookies)) == 8, cookies  # all alive at once: all different
    assert pooled & set(cookies), (pooled, cookies)  # the pool was drawn from


def test_no_pool_ignores_the_pool(pool):
    pool.fill(1)
    before = pool.cookies("loopback")
    r = pool.run("--", *COOKIE, pooled=False)
    assert r.returncode == 0, r.stderr
    assert cookie_in(r.stdout) not in before
    assert pool.cookies("loopback") == before


def test_nothing_of_the_pool_is_visible_in_a_pooled_sandbox(pool):
    pool.fill(2)
    r = pool.run("--", "sh", "-c", "cat /proc/self/mountinfo; ls -a /run; "
                 "ls /run/airlock 2>&1; echo END")
    assert r.returncode == 0 and r.stdout.rstrip().endswith("END"), r.stderr
    assert "nsfs" not in r.stdout, r.stdout
    assert "/run/airlock/" not in r.stdout, r.stdout
    assert "No such file" in r.stdout, r.stdout


def test_an_unsound_entry_is_discarded_and_never_joined(pool):
    pool.fill(1)
    # A forged entry whose "namespace" is a plain file: joining it must never happen
    # (setns would fail); the run is sound either way and the forgery goes.
    forged = f"{pool.dir}/loopback/0-forged"
    os.makedirs(forged)
    with open(f"{forged}/sbx", "w") as f:
        f.write("not a namespace")
    for _ in range(6):
        r = pool.run("--", "readlink", "/proc/self/ns/net")
        assert r.returncode == 0, r.stderr
        if not os.path.exists(forged):
            break
        pool.wait_full(1)
    assert not os.path.exists(forged)
    assert not glob.glob(f"{pool.dir}/claimed/*-0-forged")


def test_another_builds_entries_are_never_joined(pool):
    pool.fill(1)
    other = f"{pool.root}/v1-00000000/loopback/1-old"
    os.makedirs(other)
    open(f"{other}/sbx", "w").close()
    subprocess.run(["unshare", f"--net={other}/sbx", "true"], check=True)
    try:
        old = cookie_of(f"{other}/sbx")
        for _ in range(3):
            r = pool.run("--", *COOKIE)
            assert r.returncode == 0, r.stderr
            assert cookie_in(r.stdout) != old
        assert cookie_of(f"{other}/sbx") == old  # untouched
        pool.cmd("drain")  # drain releases every version's entries
        assert not os.path.exists(f"{other}/sbx")
    finally:
        subprocess.run(["umount", f"{other}/sbx"], capture_output=True)


def test_a_pooled_allowlist_run_enforces_and_logs(pool, run_net, net, world):
    pool.fill(2)
    before = pool.cookies("link")
    r = run_net(["--allow", "allowed.test", "--", "/bin/sh", "-c",
                 f"{' '.join(COOKIE[:2])} \"{COOKIE[2]}\"; "
                 f"{net.CURL} https://allowed.test/pooled; {net.CURL} https://denied.test/; "
                 "exit 0"])
    assert r.returncode == 0, (r.out, r.err)
    assert cookie_in(r.out) in before, (r.out, before)
    assert "HTTPCODE=200" in r.out, r.out
    assert net.find(r.egress, verdict="allow", name="allowed.test"), r.egress
    assert net.find(r.egress, verdict="deny", name="denied.test"), r.egress
    assert world.hits("denied") == [], world.hits("denied")


def test_a_pooled_link_has_the_cold_links_shape(pool, run_net, net):
    pool.fill(1)
    before = set(pool.cookies("link"))
    test_link.test_link_address_route_resolver_env(run_net, net)
    pool.wait_full(1)
    assert not before & set(pool.cookies("link"))  # the run took the pooled link


def gateway_waiting_in(entry):
    """The pid of the gateway made ahead for a pool entry (airlock-gateway --pool-serve)."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    # made in new/ID, published as KIND/ID: the id names it
                    if f"/{os.path.basename(entry)}/gw.sock".encode() in f.read():
                        return int(d)
            except OSError:
                pass
    return None


def test_the_pooled_gateway_serves_one_run_in_the_entrys_namespace(pool, run_net, net):
    pool.fill(1)
    (entry,) = pool.ready("link").values()
    gw_ino = os.stat(f"{entry}/gw").st_ino  # pinned meanwhile: unambiguous
    listed = subprocess.run(["nsenter", f"--net={entry}/gw", "nft", "list", "ruleset"],
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert lines(listed.stdout) == lines(EXPECTED), listed.stdout
    # The entry's own gateway, made ahead: waiting, unclaimed, in the entry's namespace.
    pid = gateway_waiting_in(entry)
    assert pid, "no gateway waits for the entry"
    assert os.readlink(f"/proc/{pid}/exe").endswith("/airlock-gateway-lite")
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held.add(os.stat(f"/proc/{pid}/fd/{fd}").st_ino)
        except OSError:
            pass
    assert gw_ino in held
    # Idle, it already runs under the gateway's own seccomp filter (mode 2: filter).
    with open(f"/proc/{pid}/status") as f:
        status = dict(ln.split(":", 1) for ln in f if ":" in ln)
    assert status["Seccomp"].strip() == "2", status["Seccomp"]
    # The run claims it: its decisions are logged under the run's sandbox id ...
    r = run_net(["--allow", "allowed.test", "--", "/bin/sh", "-c",
                 f"{net.CURL} https://allowed.test/x; {net.CURL} https://denied.test/; exit 0"])
    assert r.returncode == 0 and "HTTPCODE=200" in r.out, (r.out, r.err)
    assert net.find(r.egress, verdict="allow", name="allowed.test"), r.egress
    assert net.find(r.egress, verdict="deny", name="denied.test"), r.egress
    assert all(e["sandbox"] != "pool" for e in r.egress), r.egress
    # ... and it served that one run only: it exited before the run ended (the run waits
    # for its log lines); what may be left is its zombie, until init reaps it.
    assert exited(pid), f"pooled gateway {pid} outlived its run"


def exited(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_drain_stops_the_gateways_made_ahead(pool):
    pool.fill(2)
    pids = [gateway_waiting_in(e) for e in pool.ready("link").values()]
    assert all(pids), pids
    assert pool.cmd("drain").returncode == 0
    deadline = time.monotonic() + 5
    while not all(exited(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(exited(p) for p in pids), pids


@pytest.mark.parametrize("pooled", [True, False])
def test_the_links_two_ends_have_different_indexes(pool, pooled):
    """Made in two fresh namespaces, both ends would get index 2; a veth whose peer has
    its own index is not urgent to the kernel's link watcher, and gw0 then counted as
    running only at the watcher's next round, up to a second later: a pooled link claimed
    right after it was made stalled a run that long. Different indexes (src/host/link.c)."""
    if pooled:
        pool.fill(1)
        (entry,) = pool.ready("link").values()
    r = pool.run("--allow", "example.test", "--", "ip", "-o", "link", "show", "eth0",
                 pooled=pooled)
    assert r.returncode == 0, r.stderr
    m = re.match(r"(\d+): eth0@if(\d+):", r.stdout)
    assert m, r.stdout
    assert m.group(1) != m.group(2), r.stdout
    if pooled:
        assert not os.path.exists(entry)  # it was this run's


def mnt_inodes(pool, kind):
    """{inode of the pinned root's mount namespace: entry} (pinned: unambiguous now)."""
    out = {}
    for entry in pool.ready(kind).values():
        try:
            out[os.stat(f"{entry}/mnt").st_ino] = entry
        except OSError:
            pass
    return out


@pytest.mark.parametrize("kind,args", [("loopback", []),
                                       ("link", ["--allow", "example.test"])])
def test_a_default_sandbox_joins_a_pooled_root_once(pool, kind, args):
    pool.fill(2)
    for i in range(4):
        pool.wait_full(2)
        before = mnt_inodes(pool, kind)
        r = pool.run(*args, "--", "sh", "-c",
                     "readlink /proc/self/ns/mnt; ls -A /workspace /tmp; "
                     "echo secret > /workspace/left; echo secret > /tmp/left; "
                     "cat /etc/resolv.conf")
        assert r.returncode == 0, r.stderr
        ino = int(re.search(r"mnt:\[(\d+)\]", r.stdout).group(1))
        # Pinned when listed, so the inode names one live namespace: the pooled root ...
        assert ino in before, (i, ino, before)
        # ... whose entry is gone, so no later run can join it (inode numbers of freed
        # namespaces are recycled: "the same number later" proves nothing either way) ...
        assert not os.path.exists(before[ino])
        assert "left" not in r.stdout, r.stdout      # ... and nothing of an earlier run
        want = "100.96.0.1" if kind == "link" else "deny-all"
        assert want in r.stdout, r.stdout            # the resolver of its kind


@pytest.mark.parametrize("args,check", [
    (["--hostname", "elsewhere"], "hostname"),
    (["--disk", "64M"], "df -k /workspace | tail -1"),
    (["--workdir", "/w"], "pwd"),
    (["--file", "/etc/hostname:copied"], "ls /workspace"),
])
def test_a_sandbox_with_its_own_settings_builds_its_own_root(pool, args, check):
    pool.fill(1)
    roots = mnt_inodes(pool, "loopback")
    nets = set(pool.cookies("loopback"))
    r = pool.run(*args, "--", "sh", "-c",
                 f"readlink /proc/self/ns/mnt; {check}; {' '.join(COOKIE[:2])} \"{COOKIE[2]}\"")
    assert r.returncode == 0, r.stderr
    ino = int(re.search(r"mnt:\[(\d+)\]", r.stdout).group(1))
    assert ino not in roots, (ino, roots)            # not the pooled root ...
    assert cookie_in(r.stdout) in nets, r.stdout      # ... but the pooled network namespace
    if args[0] == "--hostname":
        assert "elsewhere" in r.stdout
    elif args[0] == "--disk":
        assert re.search(r"\s6553[0-9]\s", r.stdout), r.stdout
    elif args[0] == "--workdir":
        assert "/w\n" in r.stdout
    else:
        assert "copied" in r.stdout


def test_a_pool_others_may_write_to_is_never_joined(pool):
    pool.fill(1)
    before = set(pool.cookies("loopback"))
    os.chmod(pool.dir, 0o777)  # anyone could have planted entries here
    try:
        r = pool.run("--", *COOKIE)
        assert r.returncode == 0, r.stderr
        assert cookie_in(r.stdout) not in before
        assert set(pool.cookies("loopback")) == before  # not taken
        r = pool.cmd("fill", "1")
        assert r.returncode == 125 and "only it may write to" in r.stderr, r.stderr
    finally:
        os.chmod(pool.dir, 0o700)


def test_a_relative_pool_path_is_a_usage_error(pool):
    r = subprocess.run([AIRLOCK, "pool", "status"], capture_output=True, text=True,
                       env=dict(os.environ, AIRLOCK_POOL="relative/pool"))
    assert r.returncode == 64 and "absolute path" in r.stderr, r.stderr


@pytest.mark.parametrize("log", [False, True])
def test_the_gateway_is_gone_when_airlock_returns(tmp_path, log):
    """The one-shot's gateway has exited, and been reaped, by the time airlock returns,
    with or without an egress log; with one, every line is out by then."""
    args = ["--allow", "example.test"]
    if log:
        args += ["--egress-log", str(tmp_path / "log.jsonl")]
    # A name off the allowlist: the gateway refuses it itself, nothing goes upstream.
    p = subprocess.Popen([AIRLOCK, "run", "--no-pool", *args, "--", "getent", "hosts",
                          "other.test"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.communicate(timeout=30)
    assert p.returncode == 2  # refused: the gateway answered
    left = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if f"run-{p.pid}-".encode() in f.read():
                        left.append(d)
            except OSError:
                pass
    assert left == [], left
    if log:
        lines_ = (tmp_path / "log.jsonl").read_text().splitlines()
        assert any('"name":"other.test"' in ln and '"deny"' in ln for ln in lines_), lines_


def test_a_smaller_size_releases_the_extra_entries(pool):
    pool.fill(4)
    pids = {e: gateway_waiting_in(e) for e in pool.ready("link").values()}
    r = pool.fill(1)
    assert "size 1, made 0; ready: 1 deny-all, 1 linked" in r.stdout, r.stdout
    assert len(mounts_under(pool.root)) == 2 + 3, mounts_under(pool.root)
    assert os.listdir(f"{pool.dir}/claimed") == []
    kept = set(pool.ready("link").values())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(
            exited(p) for e, p in pids.items() if e not in kept):
        time.sleep(0.02)
    assert all(exited(p) for e, p in pids.items() if e not in kept), pids  # theirs stopped
    assert all(not exited(p) for e, p in pids.items() if e in kept), pids  # the kept one waits


def _launch_slots():
    """pids holding a slot of /run/airlock/launches (src/jail/ahead/crowd.c)."""
    try:
        st = os.stat("/run/airlock/launches")
    except FileNotFoundError:
        return []
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return [int(f[4]) for f in (ln.split() for ln in open("/proc/locks"))
            if len(f) >= 6 and f[1] == "POSIX" and f[3] == "WRITE" and f[5] == dev]


def test_no_refill_while_launches_fill_every_cpu(pool):
    """Under launches on every CPU the pool steps aside: a pooled run's entry is discarded
    but not replaced (the refill would compete with the launches, and the cold path serves
    them best); once the host is less busy, the next run tops the pool up again, even
    though it found the pool empty and took nothing from it."""
    pool.fill(1)
    pool.wait_full(1)
    others = []
    try:
        for _ in range(max(1, len(os.sched_getaffinity(0)) - 1)):
            others.append(subprocess.Popen([AIRLOCK, "run", "--no-pool", "--", "sleep", "30"],
                                           env=pool.env, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while not all(p.pid in _launch_slots() for p in others):
            assert time.monotonic() < deadline, "the other launches never took their slots"
            time.sleep(0.02)
        before = pool.cookies("loopback")
        r = pool.run("--", *COOKIE)
        assert r.returncode == 0, r.stderr
        assert cookie_in(r.stdout) in before, "the run did not come from the pool"
        time.sleep(1.0)  # a refill, had one started, would have made its entry by now
        assert len(pool.ready("loopback")) == 0, pool.cmd("status").stdout
        assert len(pool.ready("link")) == 1, pool.cmd("status").stdout
    finally:
        for p in others:
            p.kill()
            p.wait()
    r = pool.run("--", *COOKIE)
    assert r.returncode == 0, r.stderr
    assert cookie_in(r.stdout) not in before, "a used namespace was offered again"
    pool.wait_full(1)  # alone again: this run (made cold) refills after itself
    assert os.listdir(f"{pool.dir}/claimed") == []
