"""Fixtures for the escape and abuse suite (tests/integration/security).

`airlock run` attacks use the parent conftest's fixtures (run, run_json,
spawn, marker, ...). Daemon attacks use this package's own airlockd:

sec_daemon   session-scoped `airlock serve` on a free loopback port, in a
             temporary state dir, with two teams whose tokens are fresh random
             strings for this session (so a token found anywhere is a leak of
             *these* tokens). Its environment carries HOST_SECRET.
api / api_b  Api clients (from tests/integration/daemon/conftest.py) for team A / B.
anon         a client without a token.
make_sandbox make_sandbox(client=None, **create_body) -> id; stopped at teardown.
sandbox      one fresh team-A sandbox.
host_marker  a host file (/tmp/airlock-sec-<hex>) with unique content: attacks
             try to reach it; its content must never come back.

At session end every sandbox of both teams is stopped, the daemon gets SIGTERM
and no agent process or cgroup of one of our sandboxes may be left.
"""

import importlib.util
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import time

import pytest

_HERE = pathlib.Path(__file__).resolve().parent
REPO = _HERE.parents[2]
AIRLOCK_BIN = os.environ.get("AIRLOCK_BIN", str(REPO / "build" / "airlock"))


def _load_daemon_helpers():
    """The Api client and host-inspection helpers of the daemon suite, loaded
    by file path under a private name (no fixtures are registered by this)."""
    path = _HERE.parent / "daemon" / "conftest.py"
    spec = importlib.util.spec_from_file_location("airlock_sec_daemon_helpers", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_dh = _load_daemon_helpers()
Api, Resp, Output, read_ndjson = _dh.Api, _dh.Resp, _dh.Output, _dh.read_ndjson
agent_pids, agent_pid_of, sandbox_procs = _dh.agent_pids, _dh.agent_pid_of, _dh.sandbox_procs
cgroup_exists, cgroup_dir, wait_for, free_port = (_dh.cgroup_exists, _dh.cgroup_dir,
                                                  _dh.wait_for, _dh.free_port)
tar_of = _dh.tar_of
proc_state = _dh.proc_state

SESSION_HEX = secrets.token_hex(6)
TOKENS = {"A": f"secA{SESSION_HEX}" + secrets.token_hex(12),
          "B": f"secB{SESSION_HEX}" + secrets.token_hex(12)}
HOST_SECRET = "airlock_sec_host_secret_" + secrets.token_hex(10)
SEEN = set()


class SecApi(Api):
    def create(self, **body):
        r = super().create(**body)
        if r.status == 201:
            SEEN.add(r.json["sandbox"]["id"])
        return r


class SecDaemon:
    def __init__(self, work, binary):
        self.work = pathlib.Path(work)
        self.binary = binary
        self.state_dir = self.work / "state"
        self.tokens = self.work / "tokens"
        self.log_path = self.work / "daemon.log"
        self.port = free_port()
        self.proc = None
        self.tokens.write_text("".join(f"{t} team{k}\n" for k, t in TOKENS.items()))
        os.chmod(self.tokens, 0o600)

    def start(self, timeout=15):
        env = dict(os.environ, AIRLOCK_TEST_HOST_SECRET=HOST_SECRET)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "serve", "--state-dir", str(self.state_dir),
                 "--listen", f"127.0.0.1:{self.port}", "--tokens", str(self.tokens)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True)
        probe = Api(self.port, None)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"airlockd exited at start:\n{self.log_tail()}", pytrace=False)
            try:
                if probe.health(timeout=1).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        pytest.fail(f"airlockd did not start:\n{self.log_tail()}", pytrace=False)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ensure_running(self):
        if not self.alive():
            self.start()

    def log_tail(self, n=3000):
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return "<no log>"


@pytest.fixture(scope="session")
def sec_daemon(tmp_path_factory):
    if not (os.path.isfile(AIRLOCK_BIN) and os.access(AIRLOCK_BIN, os.X_OK)):
        pytest.fail(f"airlock binary not found at {AIRLOCK_BIN}", pytrace=False)
    work = tmp_path_factory.mktemp("airlockd-sec")
    bindir = work / "bin"
    bindir.mkdir()
    for name in ("airlock", "airlockd", "airlock-remote", "airlock-agent", "airlock-gateway"):
        shutil.copy2(os.path.join(os.path.dirname(AIRLOCK_BIN), name), bindir / name)
    d = SecDaemon(work, str(bindir / "airlock"))
    d.start()
    try:
        yield d
    finally:
        problems = []
        if not d.alive():
            try:
                d.start()
            except BaseException as e:  # noqa: BLE001 - still clean up below
                problems.append(f"restart for teardown failed: {e}")
        for team, tok in TOKENS.items():
            cli = Api(d.port, tok)
            try:
                for s in cli.list():
                    SEEN.add(s["id"])
                    if s["status"] == "running":
                        cli.stop(s["id"])
            except (OSError, AssertionError):
                pass
        if d.alive():
            os.kill(d.pid, signal.SIGTERM)
            try:
                d.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                d.proc.kill()
                d.proc.wait()
                problems.append("airlockd ignored SIGTERM")
        sids = set(SEEN)
        wait_for(lambda: not agent_pids(sids) and not any(cgroup_exists(s) for s in sids),
                 timeout=8)
        left = agent_pids(sids)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        left_cg = [s for s in sids if cgroup_exists(s)]
        if left:
            problems.append(f"agents left: {left}")
        if left_cg:
            problems.append(f"cgroups left: {left_cg}")
        assert not problems, "; ".join(problems) + "\n" + d.log_tail()


@pytest.fixture
def daemon_up(sec_daemon):
    sec_daemon.ensure_running()
    return sec_daemon


@pytest.fixture(scope="session")
def api(sec_daemon):
    return SecApi(sec_daemon.port, TOKENS["A"])


@pytest.fixture(scope="session")
def api_b(sec_daemon):
    return SecApi(sec_daemon.port, TOKENS["B"])


@pytest.fixture(scope="session")
def anon(sec_daemon):
    return SecApi(sec_daemon.port, None)


@pytest.fixture
def make_sandbox(api, daemon_up):
    made = []

    def make(client=None, **body):
        cli = client or api
        s = cli.create_ok(**body)
        made.append((cli, s["id"]))
        return s["id"]

    try:
        yield make
    finally:
        for cli, sid in made:
            daemon_up.ensure_running()
            try:
                cli.stop(sid)
            except OSError:
                pass
        for cli, sid in made:
            if not wait_for(lambda: not cgroup_exists(sid), timeout=8):
                for p in sandbox_procs(sid):
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass


@pytest.fixture
def sandbox(make_sandbox):
    return make_sandbox()


@pytest.fixture
def host_marker():
    """A host file no sandbox may ever read or write."""
    name = f"airlock-sec-{secrets.token_hex(6)}"
    path = pathlib.Path("/tmp") / name
    content = f"HOST-ONLY-{secrets.token_hex(12)}\n"
    path.write_text(content)
    os.chmod(path, 0o644)
    try:
        yield path, content
    finally:
        try:
            path.unlink()
        except OSError:
            pass


def raw_http(port, data, read_timeout=5.0, recv_max=1 << 20):
    """Send raw bytes to the daemon; return what came back (b'' if closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass
        out = b""
        try:
            while len(out) < recv_max:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except OSError:
            pass
        return out


def http_status(raw):
    """The status code of a raw HTTP response, or None."""
    try:
        line = raw.split(b"\r\n", 1)[0]
        return int(line.split()[1])
    except (IndexError, ValueError):
        return None
