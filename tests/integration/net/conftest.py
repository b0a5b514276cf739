"""The fake internet for the egress (network boundary) suite.

See README.md next to this file for the topology.  In short: one network
namespace "alnet-<pid>" holds every "internet" address (on its loopback) and
the servers of world_server.py; a veth links it to the host namespace
(host 192.0.2.1/24 <-> world 192.0.2.2/24) but no route leads anywhere else,
in either direction.  airlock is pointed at it with
`--upstream-netns alnet-<pid> --upstream-dns 203.0.113.53`.

Fixtures
--------
world      session: the namespace, the PKI and the servers.
             world.events(server=None, kind=None)   events since the last reset
             world.dns_queries(server="dns")        query names seen upstream
             world.hits(host)      events (accept/tls/http/udp/tcp/dns) of host
             world.packets(host)   nft counter: packets addressed to host
             world.sinks_text()    every event as text (canary searches)
             world.reset()         truncate the event log, zero the counters
             world.ca              path of the test CA certificate (PEM)
           An autouse fixture resets the world before every test and checks
           after it that the servers are still alive.
run_net    run_net(args, input=None, timeout=30, upstream=True) ->
           CompletedProcess like conftest.run, plus .egress (the parsed
           --egress-log lines) and .probe (stdout parsed as JSON, or None).
           Adds --upstream-netns, --upstream-dns, --egress-log, and copies
           ca.pem and probe.py into /workspace.
run_net_json  the same with --json; .json is the result object.
canary     a fresh random token per test.
net        helpers: net.probe(cmd, *args) -> argv running probe.py in the
           sandbox; net.batch(*jobs); net.curl(*args); net.CURL (a curl
           command line for sh scripts); net.codes(res); net.find(entries,
           **match) for egress log lines.
"""

import json
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import time

import pytest

import hostprobe

HERE = pathlib.Path(__file__).resolve().parent
PY = "/usr/bin/python3"
PREFIX = "alnet-"
NS = f"{PREFIX}{os.getpid()}"
HOST_VETH = f"alh{os.getpid()}"[:15]
HOST_ADDR, WORLD_ADDR = "192.0.2.1", "192.0.2.2"
UPSTREAM_DNS = "203.0.113.53"

ADDRS = {
    "allowed": "203.0.113.10",
    "dns": "203.0.113.53",
    "denied": "198.51.100.20",
    "pubdns": "198.51.100.53",
    "cidr": "198.51.100.130",
    "meta": "169.254.169.254",
    "lan": "10.0.0.5",
}
GW = "100.96.0.1"
PROXY = f"http://{GW}:3128"
LAYERS = {"dns", "proxy", "transparent", "tls"}
# A CONNECT tunnel is judged twice (authority, then the ClientHello's SNI);
# its allow line may carry either layer.
CONNECT_LAYERS = {"proxy", "tls"}

SANS = ["allowed.test", "*.wild.test", "a.b.wild.test", "*.b.wild.test",
        "wild.test", "denied.test", "rebind.test", "meta.test",
        "private.test", "mixed.test"]


def sh(cmd, check=True, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: rc={r.returncode} "
                           f"{r.stderr.strip()}")
    return r


def nsx(*cmd, check=True):
    return sh(["ip", "netns", "exec", NS, *cmd], check=check)


# --------------------------------------------------------------------------
# teardown of stale worlds left by a killed run

def children_of(ppid):
    """{pid: comm} of the live processes whose parent is ppid."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rindex(")") + 2:].split()
        if int(rest[1]) == ppid and rest[0] not in ("Z", "X"):
            found[int(d)] = st[st.index("(") + 1:st.rindex(")")]
    return found


def _socket_inodes(pid):
    return {int(t[8:-1]) for t in hostprobe.fd_links(pid, "socket:[")}


def _unix_peers(inodes):
    """The peers' inodes of the unix sockets among `inodes` (ss: local and peer inode)."""
    out = subprocess.run(["ss", "-xanH"], capture_output=True, text=True, check=False).stdout
    peers = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[5].isdigit() and int(f[5]) in inodes and f[7].isdigit():
            peers.add(int(f[7]))
    return peers - {0}


def gateways_of(ppid):
    """{pid: comm} of the gateway serving `airlock run` ppid: its child, or the gateway
    that waited in the recycled pair the run took (started by an earlier run: not its
    child, but the other end of its control socket)."""
    found = {p: c for p, c in children_of(ppid).items() if c.startswith("airlock-gatewa")}
    peers = set() if found else _unix_peers(_socket_inodes(ppid))
    for d in os.listdir("/proc") if peers else ():
        try:
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm.startswith("airlock-gatewa") and _socket_inodes(d) & peers:
            found[int(d)] = comm
    return found


def _pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill_ns_procs(ns):
    r = sh(["ip", "netns", "pids", ns], check=False)
    for p in r.stdout.split():
        try:
            os.kill(int(p), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def cleanup_stale():
    r = sh(["ip", "netns", "list"], check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX):
            continue
        try:
            pid = int(name[len(PREFIX):])
        except ValueError:
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            _kill_ns_procs(name)
            sh(["ip", "netns", "del", name], check=False)
            sh(["ip", "link", "del", f"alh{pid}"[:15]], check=False)


# --------------------------------------------------------------------------
# PKI

def make_pki(d):
    d = pathlib.Path(d)
    o = ["openssl"]
    sh(o + ["req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=airlock egress test CA", "-keyout", d / "ca.key",
            "-out", d / "ca.pem",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    sh(o + ["req", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=allowed.test", "-keyout", d / "server.key",
            "-out", d / "server.csr"])
    (d / "ext.cnf").write_text(
        "subjectAltName=" + ",".join(f"DNS:{n}" for n in SANS) + "\n"
        "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    sh(o + ["x509", "-req", "-in", d / "server.csr", "-CA", d / "ca.pem",
            "-CAkey", d / "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", d / "ext.cnf", "-out", d / "server.pem"])


# --------------------------------------------------------------------------
# the world

class World:
    def __init__(self, state):
        self.state = pathlib.Path(state)
        self.ns = NS
        self.ca = str(self.state / "ca.pem")
        self.events_file = self.state / "events.jsonl"
        self.proc = None

    # -- build / destroy
    @staticmethod
    def host_state():
        ns = {ln.split()[0] for ln in
              sh(["ip", "netns", "list"]).stdout.splitlines() if ln.strip()}
        links = {ln.split(":")[1].strip().split("@")[0] for ln in
                 sh(["ip", "-o", "link"]).stdout.splitlines() if ln.strip()}
        return ns, links

    def build(self):
        cleanup_stale()
        self.ns_before, self.links_before = self.host_state()
        self.links_before.add(HOST_VETH)
        make_pki(self.state)
        sh(["ip", "netns", "add", NS])
        try:
            self._links()
            self._oracle()
            self._servers()
        except BaseException:
            self.destroy()
            raise

    def _links(self):
        sh(["ip", "link", "add", HOST_VETH, "type", "veth", "peer", "name",
            "eth0", "netns", NS])
        sh(["ip", "addr", "add", f"{HOST_ADDR}/24", "dev", HOST_VETH])
        sh(["ip", "link", "set", HOST_VETH, "up"])
        nsx("ip", "link", "set", "lo", "up")
        nsx("ip", "addr", "add", f"{WORLD_ADDR}/24", "dev", "eth0")
        nsx("ip", "link", "set", "eth0", "up")
        # Every "internet" host is an address on the world's loopback (this
        # kernel has no dummy links); each server binds its own address.
        for a in ADDRS.values():
            nsx("ip", "addr", "add", f"{a}/32", "dev", "lo")
        if hostprobe.ipv6():  # a host booted with IPv6 off has no v6 world host
            nsx("ip", "-6", "addr", "add", "2001:db8:a::10/128", "dev", "lo")
        # No default route: nothing in the world can reach anything real.

    def _oracle(self):
        rules = ["table inet oracle {"]
        for name in ADDRS:
            rules.append(f"  counter h_{name} {{ }}")
        rules.append("  counter h_loop { }")
        rules.append("  counter h_from_host { }")
        rules.append("  chain input { type filter hook input priority -300;"
                     " policy accept;")
        for name, a in ADDRS.items():
            rules.append(f'    ip daddr {a} counter name "h_{name}"')
        rules.append('    ip daddr 127.0.0.0/8 counter name "h_loop"')
        rules.append('    iifname "eth0" counter name "h_from_host"')
        rules.append("  }")
        rules.append("}")
        path = self.state / "oracle.nft"
        path.write_text("\n".join(rules) + "\n")
        nsx("nft", "-f", str(path))

    def _servers(self):
        self.events_file.touch()
        log = open(self.state / "world_server.log", "wb")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", NS, PY, str(HERE / "world_server.py"),
             str(self.state)], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 15
        while not (self.state / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("world server did not start: " + (
                    self.state / "world_server.log").read_text()[-2000:])
            time.sleep(0.05)

    def destroy(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        _kill_ns_procs(NS)
        sh(["ip", "netns", "del", NS], check=False)
        sh(["ip", "link", "del", HOST_VETH], check=False)

    # -- state
    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def reset(self):
        with open(self.events_file, "w"):
            pass
        nsx("nft", "reset", "counters", "table", "inet", "oracle")

    def events(self, server=None, kind=None):
        out = []
        with open(self.events_file) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if server and e.get("server") != server:
                    continue
                if kind and e.get("kind") != kind:
                    continue
                out.append(e)
        return out

    def dns_queries(self, server="dns"):
        return [e.get("qname") or "" for e in self.events(server, "dns")]

    def hits(self, host):
        return self.events(server=host)

    def counters(self):
        r = nsx("nft", "-j", "list", "counters", "table", "inet", "oracle")
        out = {}
        for item in json.loads(r.stdout)["nftables"]:
            c = item.get("counter")
            if c:
                out[c["name"][2:]] = c["packets"]
        return out

    def packets(self, host):
        return self.counters()[host]

    def sinks_text(self, exclude=()):
        return "\n".join(json.dumps(e) for e in self.events()
                         if e.get("server") not in exclude)

    def settle(self, seconds=0.3):
        """Let in-flight upstream traffic land in the logs."""
        time.sleep(seconds)


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the egress world needs root (ip netns)")
    for tool in ("ip", "nft", "openssl", "curl"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is needed for the egress suite",
                        pytrace=False)
    if hostprobe.nftables():
        pytest.skip(f"the egress world needs nftables: {hostprobe.nftables()}")
    try:
        import dnslib  # noqa: F401
    except ImportError:
        pytest.fail("python3-dnslib is needed (apt-get install python3-dnslib)",
                    pytrace=False)
    w = World(tmp_path_factory.mktemp("world"))
    w.build()
    try:
        yield w
    finally:
        w.destroy()


@pytest.fixture(autouse=True)
def _fresh_world(request, world):
    world.reset()
    yield
    if not world.alive():
        pytest.fail("the world server died during the test: " + (
            world.state / "world_server.log").read_text()[-2000:])


@pytest.fixture
def canary():
    return "cnry" + secrets.token_hex(6)


# --------------------------------------------------------------------------
# running airlock against the world

class Net:
    PY = PY
    GW = GW
    PROXY = PROXY
    ADDRS = ADDRS
    LAYERS = LAYERS
    CONNECT = CONNECT_LAYERS

    @staticmethod
    def probe(*argv):
        return ["--", PY, "/workspace/probe.py", *[str(a) for a in argv]]

    @staticmethod
    def batch(*jobs):
        return ["--", PY, "/workspace/probe.py", "batch",
                json.dumps([[str(x) for x in j] for j in jobs])]

    CURL = ("curl -sS -m 3 --cacert /workspace/ca.pem -o - -w "
            "'\\nHTTPCODE=%{http_code} CONNECTCODE=%{http_connect}\\n'")

    @staticmethod
    def curl(*args, timeout=3):
        return ["--", "curl", "-sS", "-m", str(timeout), "--cacert",
                "/workspace/ca.pem", "-o", "-", "-w",
                "\nHTTPCODE=%{http_code} CONNECTCODE=%{http_connect}\n", *args]

    @staticmethod
    def sh(src):
        return ["--", "/bin/sh", "-c", src]

    @staticmethod
    def find(entries, **match):
        """Egress log entries matching every key; `layer` may be a set."""
        out = []
        for e in entries:
            ok = True
            for k, v in match.items():
                if isinstance(v, (set, frozenset, tuple, list)):
                    ok = e.get(k) in v
                elif k == "name" and isinstance(v, str) and \
                        isinstance(e.get(k), str):
                    ok = e[k].lower().rstrip(".") == v.lower().rstrip(".")
                else:
                    ok = e.get(k) == v
                if not ok:
                    break
            if ok:
                out.append(e)
        return out

    @staticmethod
    def codes(res):
        """[(http_code, connect_code)] of every curl in the run, in order."""
        out = []
        for line in res.out.splitlines():
            if line.startswith("HTTPCODE="):
                a, b = line.split()
                out.append((int(a.split("=")[1]), int(b.split("=")[1])))
        return out

    @staticmethod
    def http_code(res):
        c = Net.codes(res)
        return c[-1][0] if c else None


@pytest.fixture(scope="session")
def net():
    return Net


def _load_log(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        out.append({"unparseable": line})
    except FileNotFoundError:
        pass
    return out


@pytest.fixture
def run_net(invoke, world, tmp_path):
    counter = [0]

    def run_net(args, input=None, timeout=30, upstream=True, files=True,
                json_out=False, **kw):
        counter[0] += 1
        log = tmp_path / f"egress{counter[0]}.jsonl"
        pre = []
        if upstream:
            pre += ["--upstream-netns", world.ns, "--upstream-dns",
                    UPSTREAM_DNS, "--egress-log", str(log)]
        if files:
            pre += ["--file", f"{world.ca}:/workspace/ca.pem",
                    "--file", f"{HERE / 'probe.py'}:/workspace/probe.py"]
        if json_out:
            pre.insert(0, "--json")
        res = invoke(["run", *pre, *args], input=input, timeout=timeout, **kw)
        res.egress = _load_log(log)
        res.probe = None
        text = res.out
        if json_out:
            try:
                res.json = json.loads(res.out)
            except ValueError:
                pytest.fail(f"--json output is not JSON: rc={res.returncode} "
                            f"out={res.out[:500]!r} err={res.err[:500]!r}")
            text = res.json.get("stdout") or ""
        try:
            res.probe = json.loads(text.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pass
        world.settle(0.05)
        return res
    return run_net


@pytest.fixture
def run_net_json(run_net):
    def run_net_json(args, **kw):
        return run_net(args, json_out=True, **kw)
    return run_net_json
