"""Fixtures for the airlockd (``airlock serve``) integration suite.

Fixtures
--------
daemon       session-scoped: ``airlock serve`` in a temporary state dir on a
             free loopback port, with a tokens file holding two teams (A, B).
             ``daemon.kill9()``, ``daemon.term()``, ``daemon.start()`` let the
             restart tests kill and bring it back on the same port and state.
api / api_b  clients for team A / team B (stdlib only: http.client + json).
anon         a client that sends no Authorization header.
sandbox      a fresh team-A sandbox id, stopped at teardown.
make_sandbox make_sandbox(**create_body) -> id, each stopped at teardown.

At session end every sandbox of both teams is stopped, the daemon gets
SIGTERM, and the suite asserts that no airlock-agent process and no cgroup
directory (/sys/fs/cgroup/<ctrl>/airlock/sbx_* on v1, /sys/fs/cgroup/airlock/sbx_* on v2) of a sandbox this daemon made
is left. Only our own sandboxes are checked: other people may be running
airlock on this machine at the same time.
"""

import base64
import http.client
import io
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import urllib.parse

import pytest

import hostprobe

REPO = pathlib.Path(__file__).resolve().parents[3]
AIRLOCK_BIN = os.environ.get("AIRLOCK_BIN", str(REPO / "build" / "airlock"))
CGROUP_CTRLS = ("pids", "memory", "cpu")
TOKENS = {"A": "tokA_" + secrets.token_hex(16), "B": "tokB_" + secrets.token_hex(16)}
# Set in the daemon's environment: it must never show up inside a sandbox.
HOST_SECRET = "airlock_host_secret_" + secrets.token_hex(8)

# Every sandbox id the daemon ever handed out in this session.
SEEN_SANDBOXES = set()


# --------------------------------------------------------------------------
# host inspection


def cgroup_dir(sid, ctrl="pids"):
    return hostprobe.cgroup_dir(ctrl, sid)


def cgroup_exists(sid):
    return any(os.path.isdir(cgroup_dir(sid, c)) for c in CGROUP_CTRLS)


def _proc_field(pid, name):
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_state(pid):
    st = _proc_field(pid, "stat")
    if not st:
        return None
    return st[st.rindex(b")") + 2:st.rindex(b")") + 3].decode()


def agent_pids(sids=None):
    """Live (non-zombie) airlock-agent pids; with sids, only those in one of
    these sandboxes' cgroups. Returns {pid: sandbox id or None}."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        comm = _proc_field(entry, "comm")
        if comm is None or comm.strip() != b"airlock-agent":
            continue
        if proc_state(entry) in (None, "Z", "X"):
            continue
        cg = (_proc_field(entry, "cgroup") or b"").decode(errors="replace")
        sid = None
        for line in cg.splitlines():
            if "/airlock/sbx_" in line:
                sid = line.split("/airlock/", 1)[1].split("/")[0]
                break
        if sids is None or sid in sids:
            found[int(entry)] = sid
    return found


def agent_pid_of(sid):
    """The pid of a sandbox's agent (PID 1 inside), or None."""
    for pid, s in agent_pids({sid}).items():
        return pid
    return None


def held_mount_namespaces(pid):
    """The mount namespaces a process holds open as fds ("mnt:[inode]")."""
    return hostprobe.fd_links(pid, "mnt:[")


def sandbox_procs(sid):
    """Live host pids in the sandbox's pids cgroup."""
    try:
        with open(os.path.join(cgroup_dir(sid), "cgroup.procs")) as f:
            pids = [int(x) for x in f.read().split()]
    except OSError:
        return []
    return [p for p in pids if proc_state(p) not in (None, "Z", "X")]


def children_of(pid):
    """Host pids of pid's children, every thread's ([] once pid is gone)."""
    kids = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        return []
    return kids


def tar_of(name, data):
    """A tar archive (bytes) of one regular file, for PUT /files."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def wait_for(pred, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------
# HTTP client


class Resp:
    def __init__(self, status, headers, data):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.data = data

    @property
    def json(self):
        try:
            return json.loads(self.data)
        except ValueError:
            raise AssertionError(f"HTTP {self.status}: body is not JSON: {self.data[:300]!r}")

    @property
    def error_code(self):
        try:
            return json.loads(self.data)["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return None

    def __repr__(self):
        return f"<Resp {self.status} {self.data[:400]!r}>"


class Output:
    """A parsed NDJSON stream of a command (run with wait, or logs)."""

    def __init__(self, lines):
        self.lines = lines
        self.chunks = []  # (stream, bytes) in stream order
        for ln in lines:
            if ln.get("type") in ("stdout", "stderr"):
                if "data_b64" in ln:
                    data = base64.b64decode(ln["data_b64"])
                else:
                    data = ln["data"].encode("utf-8")
                self.chunks.append((ln["type"], data))

    @property
    def stdout(self):
        return b"".join(d for s, d in self.chunks if s == "stdout")

    @property
    def stderr(self):
        return b"".join(d for s, d in self.chunks if s == "stderr")

    @property
    def out(self):
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self):
        return self.stderr.decode("utf-8", "replace")

    @property
    def types(self):
        return [ln.get("type") for ln in self.lines]

    @property
    def start(self):
        assert self.lines and self.lines[0].get("type") == "start", self.types
        return self.lines[0]["command"]

    @property
    def exit(self):
        """The exit record's command; asserts it is the one and last record."""
        assert self.lines, "empty stream"
        assert self.lines[-1].get("type") == "exit", f"last record is not exit: {self.lines[-1]}"
        assert self.types.count("exit") == 1, f"exit records: {self.types}"
        return self.lines[-1]["command"]

    def __repr__(self):
        return f"<Output {self.lines[:20]!r}>"


def read_ndjson(resp):
    """All records of a streamed response; every line must be one JSON object."""
    lines = []
    while True:
        ln = resp.readline()
        if not ln:
            break
        assert ln.endswith(b"\n"), f"NDJSON line without newline: {ln[:200]!r}"
        lines.append(json.loads(ln))
    return lines


class Api:
    def __init__(self, port, token, host="127.0.0.1", timeout=60):
        self.host, self.port, self.token, self.timeout = host, port, token, timeout

    # -- plumbing --

    def _send(self, method, path, body=None, raw=None, headers=None, timeout=None,
              query=None):
        if query:
            path += "?" + urllib.parse.urlencode(query)
        conn = http.client.HTTPConnection(self.host, self.port,
                                          timeout=timeout or self.timeout)
        hdrs = dict(headers or {})
        if self.token is not None and "Authorization" not in hdrs:
            hdrs["Authorization"] = f"Bearer {self.token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=data, headers=hdrs)
        except (BrokenPipeError, ConnectionResetError):
            # The server may answer (414, 413, ...) and close before it has read
            # all of a request too big for it; the answer is still ours to read.
            pass
        return conn, conn.getresponse()

    def request(self, method, path, body=None, raw=None, headers=None, timeout=None,
                query=None):
        conn, resp = self._send(method, path, body, raw, headers, timeout, query)
        try:
            data = resp.read()
            return Resp(resp.status, resp.getheaders(), data)
        finally:
            conn.close()

    def stream(self, method, path, body=None, timeout=None, query=None):
        """(conn, resp) of a streamed response; the caller closes conn."""
        return self._send(method, path, body, timeout=timeout, query=query)

    def ndjson(self, method, path, body=None, timeout=None, query=None):
        conn, resp = self._send(method, path, body, timeout=timeout, query=query)
        try:
            if resp.status != 200:
                raise AssertionError(f"HTTP {resp.status}: {resp.read()[:400]!r}")
            ctype = resp.getheader("Content-Type", "")
            assert ctype.startswith("application/x-ndjson"), ctype
            return Output(read_ndjson(resp))
        finally:
            conn.close()

    # -- sandboxes --

    def create(self, **body):
        r = self.request("POST", "/v1/sandboxes", body=body)
        if r.status == 201:
            SEEN_SANDBOXES.add(r.json["sandbox"]["id"])
        return r

    def create_ok(self, **body):
        r = self.create(**body)
        assert r.status == 201, r
        return r.json["sandbox"]

    def get(self, sid):
        return self.request("GET", f"/v1/sandboxes/{sid}")

    def sandbox(self, sid):
        r = self.get(sid)
        assert r.status == 200, r
        return r.json["sandbox"]

    def list(self):
        r = self.request("GET", "/v1/sandboxes")
        assert r.status == 200, r
        return r.json["sandboxes"]

    def stop(self, sid):
        return self.request("POST", f"/v1/sandboxes/{sid}/stop")

    def extend(self, sid, duration_ms):
        return self.request("POST", f"/v1/sandboxes/{sid}/extend",
                            body={"duration_ms": duration_ms})

    def set_policy(self, sid, policy):
        return self.request("PUT", f"/v1/sandboxes/{sid}/network-policy", body=policy)

    # -- commands --

    def start(self, sid, cmd, *args, **kw):
        body = {"cmd": cmd, **kw}
        if args:
            body["args"] = list(args)
        return self.request("POST", f"/v1/sandboxes/{sid}/commands", body=body)

    def start_ok(self, sid, cmd, *args, **kw):
        r = self.start(sid, cmd, *args, **kw)
        assert r.status == 201, r
        c = r.json["command"]
        assert c["id"].startswith("cmd_"), c
        return c

    def run(self, sid, cmd, *args, http_timeout=60, **kw):
        """Runs with wait=true; keyword arguments are body fields (timeout is the
        command's timeout in ms); returns the parsed Output."""
        body = {"cmd": cmd, "wait": True, **kw}
        if args:
            body["args"] = list(args)
        return self.ndjson("POST", f"/v1/sandboxes/{sid}/commands", body=body,
                           timeout=http_timeout)

    def sh(self, sid, script, **kw):
        return self.run(sid, "/bin/sh", "-c", script, **kw)

    def cmd_get(self, sid, cid):
        return self.request("GET", f"/v1/sandboxes/{sid}/commands/{cid}")

    def cmd_list(self, sid):
        return self.request("GET", f"/v1/sandboxes/{sid}/commands")

    def cmd_wait(self, sid, cid, timeout_ms=30000):
        return self.request("GET", f"/v1/sandboxes/{sid}/commands/{cid}/wait",
                            query={"timeout_ms": timeout_ms},
                            timeout=timeout_ms / 1000 + 30)

    def wait_ok(self, sid, cid, timeout_ms=30000):
        r = self.cmd_wait(sid, cid, timeout_ms)
        assert r.status == 200, r
        c = r.json["command"]
        assert c["status"] == "finished", c
        return c

    def logs(self, sid, cid, timeout=60):
        return self.ndjson("GET", f"/v1/sandboxes/{sid}/commands/{cid}/logs", timeout=timeout)

    def logs_resp(self, sid, cid):
        return self.request("GET", f"/v1/sandboxes/{sid}/commands/{cid}/logs")

    def stdin(self, sid, cid, data, close=None):
        q = {"close": "true" if close else "false"} if close is not None else None
        if isinstance(data, str):
            data = data.encode()
        return self.request("POST", f"/v1/sandboxes/{sid}/commands/{cid}/stdin", raw=data,
                            query=q, headers={"Content-Type": "application/octet-stream"})

    def kill(self, sid, cid, sig=None):
        body = {} if sig is None else {"signal": sig}
        return self.request("POST", f"/v1/sandboxes/{sid}/commands/{cid}/kill", body=body)

    # -- files --

    def put_files(self, sid, data, dir=None, timeout=None):
        return self.request("PUT", f"/v1/sandboxes/{sid}/files", raw=data,
                            query={"dir": dir} if dir is not None else None,
                            headers={"Content-Type": "application/x-tar"}, timeout=timeout)

    def read_file(self, sid, path):
        return self.request("GET", f"/v1/sandboxes/{sid}/files/content", query={"path": path})

    def mkdir(self, sid, path, parents=None):
        body = {"path": path}
        if parents is not None:
            body["parents"] = parents
        return self.request("POST", f"/v1/sandboxes/{sid}/files/mkdir", body=body)

    def list_files(self, sid, path=None):
        return self.request("GET", f"/v1/sandboxes/{sid}/files",
                            query={"path": path} if path is not None else None)

    def health(self, timeout=2):
        return self.request("GET", "/v1/health", timeout=timeout)


# --------------------------------------------------------------------------
# the daemon


class Daemon:
    def __init__(self, workdir, port, binary):
        self.binary = binary
        self.workdir = pathlib.Path(workdir)
        self.state_dir = self.workdir / "state"
        self.tokens = self.workdir / "tokens"
        self.log_path = self.workdir / "daemon.log"
        self.port = port
        self.proc = None
        self.starts = 0
        self.extra_args = []
        self.tokens.write_text("# test tokens\n" + "".join(
            f"{tok} team{team}\n" for team, tok in TOKENS.items()))
        os.chmod(self.tokens, 0o600)

    def start(self, timeout=15):
        assert self.proc is None or self.proc.poll() is not None, "daemon already running"
        env = dict(os.environ, AIRLOCK_TEST_HOST_SECRET=HOST_SECRET)
        log = open(self.log_path, "ab")
        log.write(f"--- start #{self.starts} ---\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--state-dir", str(self.state_dir),
             "--listen", f"127.0.0.1:{self.port}", "--tokens", str(self.tokens),
             *self.extra_args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
            start_new_session=True)
        log.close()
        self.starts += 1
        probe = Api(self.port, None)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"airlockd exited with {self.proc.returncode} at start:\n"
                            f"{self.log_tail()}", pytrace=False)
            try:
                if probe.health(timeout=1).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        pytest.fail(f"airlockd did not answer /v1/health within {timeout}s:\n"
                    f"{self.log_tail()}", pytrace=False)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def term(self, timeout=10):
        """SIGTERM; returns the exit status (fails the test if it hangs)."""
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"airlockd did not exit within {timeout}s of SIGTERM")

    def ensure_running(self):
        if not self.alive():
            self.start()

    def log_tail(self, n=4000):
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return "<no log>"


def _stop_everything(port):
    for team in TOKENS:
        cli = Api(port, TOKENS[team])
        try:
            for s in cli.list():
                SEEN_SANDBOXES.add(s["id"])
                if s["status"] == "running":
                    cli.stop(s["id"])
        except OSError:
            pass


def make_image_root(root):
    """An image root at `root` (a pathlib.Path): the usual directories, the merged-usr
    links and an /etc/passwd; the caller bind-mounts the host's /usr on root/usr."""
    for d in ("usr", "etc", "tmp", "proc", "dev", "workspace"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for name in ("bin", "lib", "lib64", "sbin"):
        if not (root / name).is_symlink():
            (root / name).symlink_to(f"usr/{name}")
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n"
                                         "user:x:1000:1000::/workspace:/bin/sh\n")


def private_bindir(work):
    """A private copy of the binaries in work/bin; returns the `airlock` path. A concurrent
    `make build` rewriting build/ must not break a daemon half-way, and `airlock serve`
    execs airlockd next to it, which finds airlock-agent and airlock-gateway next to itself."""
    bindir = pathlib.Path(work) / "bin"
    bindir.mkdir()
    for name in ("airlock", "airlockd", "airlock-remote", "airlock-agent", "airlock-gateway"):
        shutil.copy2(os.path.join(os.path.dirname(AIRLOCK_BIN), name), bindir / name)
    return str(bindir / "airlock")


def own_daemon(tmp_path_factory, name, *args):
    """A daemon of a module's own, started with args: a generator for a module-scoped
    fixture (yield from); yields the Daemon; at the end its running sandboxes are
    stopped and it gets SIGTERM."""
    work = tmp_path_factory.mktemp(name)
    d = Daemon(work, free_port(), private_bindir(work))
    d.extra_args = list(args)
    d.start()
    yield d
    if d.alive():
        api = Api(d.port, TOKENS["A"])
        for s in api.list():
            if s["status"] == "running":
                api.stop(s["id"])
        d.term()


def own_api(tmp_path_factory, name, *args):
    """own_daemon's daemon, as a team-A client with .daemon: for a module-scoped fixture
    (yield from)."""
    for d in own_daemon(tmp_path_factory, name, *args):
        api = Api(d.port, TOKENS["A"])
        api.daemon = d
        yield api


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    if not (os.path.isfile(AIRLOCK_BIN) and os.access(AIRLOCK_BIN, os.X_OK)):
        pytest.fail(f"airlock binary not found at {AIRLOCK_BIN} (run `make build`)",
                    pytrace=False)
    work = tmp_path_factory.mktemp("airlockd")
    d = Daemon(work, free_port(), private_bindir(work))
    d.images = work / "images"  # a create's "image" must be a directory under it
    d.images.mkdir()
    d.extra_args = ["--images", str(d.images)]
    d.start()
    yield d

    # Session teardown: stop every sandbox (restarting a daemon a test left dead),
    # terminate the daemon, then check nothing of ours is left on the host.
    problems = []
    if not d.alive():
        d.start()
    _stop_everything(d.port)
    rc = d.term()
    if rc != 0:
        problems.append(f"airlockd exited with {rc} on SIGTERM")
    sids = set(SEEN_SANDBOXES)
    wait_for(lambda: not agent_pids(sids) and not any(cgroup_exists(s) for s in sids),
             timeout=5)
    left_agents = agent_pids(sids)
    left_cg = sorted(cgroup_dir(s, c) for s in sids for c in CGROUP_CTRLS
                     if os.path.isdir(cgroup_dir(s, c)))
    if left_agents:
        problems.append(f"airlock-agent processes left: {left_agents}")
        for pid in left_agents:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    if left_cg:
        problems.append(f"sandbox cgroup dirs left: {left_cg}")
    assert not problems, "; ".join(problems) + "\n" + d.log_tail()


@pytest.fixture(autouse=True)
def _daemon_up(daemon):
    """Every test starts with the daemon up (a failed restart test may leave it down)."""
    daemon.ensure_running()
    yield


# The parent conftest's per-module check counts every new cgroup directory on the
# host, which other people's concurrent runs also create; ours checks our own.
@pytest.fixture(scope="module", autouse=True)
def no_leftovers_after_module():
    yield


@pytest.fixture(scope="session")
def api(daemon):
    return Api(daemon.port, TOKENS["A"])


@pytest.fixture(scope="session")
def api_b(daemon):
    return Api(daemon.port, TOKENS["B"])


@pytest.fixture(scope="session")
def anon(daemon):
    return Api(daemon.port, None)


@pytest.fixture
def make_sandbox(api, daemon):
    made = []

    def make(client=None, **body):
        cli = client or api
        s = cli.create_ok(**body)
        made.append((cli, s["id"]))
        return s["id"]

    yield make
    for cli, sid in made:
        if not daemon.alive():
            daemon.start()
        r = cli.stop(sid)
        assert r.status == 200, f"teardown stop {sid}: {r}"
        assert r.json["sandbox"]["status"] in ("stopped", "failed"), r
        assert wait_for(lambda: not cgroup_exists(sid), timeout=5), \
            f"cgroup of {sid} still there after stop"


@pytest.fixture
def sandbox(make_sandbox):
    return make_sandbox()
