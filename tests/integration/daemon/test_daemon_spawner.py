"""airlockd's spawner (src/daemon/spawner.c, src/jail/ahead/spawner.c): forked once when the
daemon opens, it execs the static `airlock` binary next to airlockd (`airlock __spawner`),
so that each sandbox's clone3 copies a dozen mappings rather than the daemon's ~165. These
tests check that the spawner is that small process and holds nothing of the daemon's; that
one killed is replaced by another such; that without the binary, or with one of another
build (it must say hello with this build's version and record sizes), the daemon still
creates sandboxes (the forked child serves itself) and says why in its log; and that `airlock __spawner` run by hand,
without the daemon's channel, is refused."""

import os
import shutil
import signal
import struct
import subprocess
import tempfile

import pytest

PY = "/usr/bin/python3"

from .conftest import TOKENS, Api, cgroup_dir, own_daemon, wait_for
from .test_daemon_netns import spawner_pids
from .test_daemon_root_ahead import all_held


@pytest.fixture(scope="module")
def sdaemon(tmp_path_factory):
    yield from own_daemon(tmp_path_factory, "airlockd-spawner")


@pytest.fixture(scope="module")
def sapi(sdaemon):
    return Api(sdaemon.port, TOKENS["A"])


def one_spawner(daemon):
    """The daemon's one spawner (a killed one may take a moment to be reaped)."""
    found = []

    def one():
        found[:] = spawner_pids(daemon.pid)
        return len(found) == 1

    assert wait_for(one, timeout=5), found
    return found[0]


def is_static(path):
    """No PT_INTERP program header: no dynamic loader, no shared library."""
    with open(path, "rb") as f:
        elf = f.read(1 << 20)
    assert elf[:4] == b"\x7fELF" and elf[4] == 2, path  # 64-bit
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    return all(struct.unpack_from("<I", elf, phoff + i * phentsize)[0] != 3  # PT_INTERP
               for i in range(phnum))


def maps_of(pid):
    with open(f"/proc/{pid}/maps") as f:
        return f.read().splitlines()


def works(api):
    sid = api.create_ok()["id"]
    try:
        out = api.sh(sid, "echo ok")
        assert (out.exit["exit_code"], out.out) == (0, "ok\n"), out
    finally:
        api.stop(sid)


def test_the_spawner_is_the_small_airlock_binary(sapi, sdaemon):
    works(sapi)
    pid = one_spawner(sdaemon)
    bindir = os.path.dirname(sdaemon.binary)
    assert os.readlink(f"/proc/{pid}/exe") == os.path.join(bindir, "airlock")
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert argv[:2] == [b"airlock", b"__spawner"], argv
    maps = maps_of(pid)
    daemon_maps = maps_of(sdaemon.pid)
    # none of the libraries only the daemon needs (HTTP, the store, archives, TLS)
    daemon_only = ("libmicrohttpd", "libsqlite3", "libarchive", "libssl", "libgnutls")
    assert any(lib in m for m in daemon_maps for lib in daemon_only), daemon_maps
    assert not [m for m in maps if any(lib in m for lib in daemon_only)], maps
    if is_static(os.path.join(bindir, "airlock")):  # the musl build: no library at all
        assert not [m for m in maps if ".so" in m], maps
        assert len(maps) < 40 < len(daemon_maps), (len(maps), len(daemon_maps))
    # and none of its files but stdio (the daemon's log): no listener, no store, no tokens
    # read once it holds both sets of parts made ahead: until then it opens and closes
    # their descriptors (an fd listed could be gone when read)
    all_held(sdaemon)
    fds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            pass
    assert 3 in fds and fds[3].startswith("socket:"), fds
    assert not [t for fd, t in fds.items() if fd > 2 and str(sdaemon.workdir) in t], fds
    sockets = [fd for fd, t in fds.items() if t.startswith("socket:")]
    assert sockets == [3], fds


def test_a_killed_spawner_is_replaced_by_another_small_one(sapi, sdaemon):
    works(sapi)
    old = one_spawner(sdaemon)
    os.kill(old, signal.SIGKILL)
    works(sapi)
    new = one_spawner(sdaemon)
    assert new != old
    assert os.readlink(f"/proc/{new}/exe").endswith("/airlock")


def test_without_the_airlock_binary_the_daemon_spawns_itself(sapi, sdaemon):
    bindir = os.path.dirname(sdaemon.binary)
    exe = os.path.join(bindir, "airlock")
    aside = exe + ".aside"
    works(sapi)
    os.rename(exe, aside)
    log_before = sdaemon.log_path.read_text(errors="replace")
    try:
        os.kill(one_spawner(sdaemon), signal.SIGKILL)
        works(sapi)  # a new spawner: no binary to exec, the forked child serves
        pid = one_spawner(sdaemon)
        assert os.readlink(f"/proc/{pid}/exe").endswith("/airlockd"), pid
        works(sapi)
        log = sdaemon.log_path.read_text(errors="replace")[len(log_before):]
        assert "no runnable sandbox spawner" in log, log
    finally:
        os.rename(aside, exe)
    # the next spawner is the small one again
    os.kill(one_spawner(sdaemon), signal.SIGKILL)
    works(sapi)
    assert os.readlink(f"/proc/{one_spawner(sdaemon)}/exe") == exe


# Stand-ins for an `airlock` of another build: one that exits at once, one that answers
# with another build's hello (a report-sized record: code, pid, start time, message).
SILENT = "#!/bin/sh\nexit 0\n"
FOREIGN = f"""#!{PY}
import os, socket, struct, time
s = socket.socket(fileno=3)
s.send(struct.pack("<iiQ", 0, os.getpid(), 0) + b"airlock 0.0.1 spawn 1/1".ljust(480, b"\\0"))
time.sleep(30)
"""


@pytest.mark.parametrize("script, said", [(SILENT, "did not say hello"),
                                          (FOREIGN, "is another build")])
def test_an_airlock_of_another_build_is_not_used(sapi, sdaemon, script, said):
    bindir = os.path.dirname(sdaemon.binary)
    exe = os.path.join(bindir, "airlock")
    aside = exe + ".aside"
    works(sapi)
    log_before = sdaemon.log_path.read_text(errors="replace")
    os.rename(exe, aside)
    try:
        with open(exe, "w") as f:
            f.write(script)
        os.chmod(exe, 0o755)
        os.kill(one_spawner(sdaemon), signal.SIGKILL)
        works(sapi)  # its hello is refused, it is killed, airlockd spawns from itself
        pid = one_spawner(sdaemon)
        assert os.readlink(f"/proc/{pid}/exe").endswith("/airlockd"), pid
        log = sdaemon.log_path.read_text(errors="replace")[len(log_before):]
        assert said in log and "spawning sandboxes from airlockd itself" in log, log
        # the stand-in did not stay behind
        assert wait_for(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and
                                     _cmdline(p).startswith(f"{PY}\0{exe}")], timeout=5)
    finally:
        os.replace(aside, exe)
    os.kill(one_spawner(sdaemon), signal.SIGKILL)
    works(sapi)
    assert os.readlink(f"/proc/{one_spawner(sdaemon)}/exe") == exe


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read()
    except OSError:
        return ""


def test_airlock_spawner_by_hand_is_refused(sdaemon):
    for argv in (["__spawner"], ["__spawner", "/x/agent", "/tmp"]):
        r = subprocess.run([sdaemon.binary, *argv], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=10)
        assert r.returncode == 64, r
        assert "airlockd's own" in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["missing", "text", "not-executable", "directory"])
def test_an_agent_that_cannot_run_is_refused_at_start(sdaemon, tmp_path, kind):
    """An --agent that could never be exec'd stops the daemon's start with a message naming
    the option, instead of failing every create later."""
    agent = tmp_path / "agent"
    if kind == "text":
        agent.write_text("#!/bin/sh\nexit 0\n")
        agent.chmod(0o755)
    elif kind == "not-executable":
        agent.write_bytes(open(os.path.join(os.path.dirname(sdaemon.binary),
                                            "airlock-agent"), "rb").read())
        agent.chmod(0o644)
    elif kind == "directory":
        agent.mkdir()
    state = tempfile.mkdtemp(prefix="al-agent-")  # short: the sockets' paths must fit
    try:
        r = subprocess.run([sdaemon.binary, "serve", "--state-dir", state + "/s",
                            "--listen", "127.0.0.1:0", "--tokens", str(sdaemon.tokens),
                            "--agent", str(agent)],
                           capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        assert r.returncode != 0, r
        assert "--agent" in r.stderr and str(agent) in r.stderr, r.stderr
        assert not os.path.exists(state + "/s/airlock.db")
    finally:
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def broken_agent_daemon(tmp_path_factory):
    """A daemon whose agent passes the start's check (an executable file that starts like
    an ELF) but that no kernel can exec: every sandbox's PID 1 fails at its last step, and
    the create says so."""
    d = tmp_path_factory.mktemp("broken-agent")
    agent = d / "fake-agent"
    agent.write_bytes(b"\x7fELF" + b"\0" * 60)
    agent.chmod(0o755)
    yield from own_daemon(tmp_path_factory, "airlockd-broken-agent", "--agent", str(agent))


def test_a_create_whose_agent_fails_to_exec_fails_and_leaves_nothing(broken_agent_daemon):
    api = Api(broken_agent_daemon.port, TOKENS["A"])
    before = set(os.listdir(os.path.dirname(cgroup_dir("x"))))
    for _ in range(3):
        r = api.create()
        assert r.status >= 500, r
        msg = r.json["error"]["message"]
        assert "fexecve agent" in msg and "fake-agent" in msg, msg
    assert api.list() == []
    # no cgroup of a sandbox of this daemon's is left behind (others' may come and go)
    assert wait_for(lambda: not [c for c in set(os.listdir(os.path.dirname(cgroup_dir("x")))) -
                                 before if c.startswith("sbx_")], timeout=10)
