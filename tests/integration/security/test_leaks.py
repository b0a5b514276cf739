"""Information leaks: nothing inside a daemon sandbox reveals the host's
hostname, users, addresses, the daemon's tokens or state paths, or other
sandboxes' ids. The tokens and the host secret are unique to this session."""

import json
import re
import socket
import subprocess

import pytest

from .conftest import HOST_SECRET, TOKENS

PY = "/usr/bin/python3"

# Walk everything visible except the host's read-only /usr (the runtime), and
# read every /proc file of every process that is readable.
GREP = r'''
import os, sys, json
needles = [n.encode() for n in json.loads(sys.stdin.read())]
hits, scanned = [], 0
def check(path, data):
    for n in needles:
        if n in data:
            hits.append([path, n.decode()])
skip_top = {"/usr", "/proc", "/bin", "/lib", "/lib32", "/lib64", "/sbin"}
for top in os.listdir("/"):
    top = "/" + top
    if top in skip_top:
        continue
    for root, dirs, files in os.walk(top, followlinks=False):
        check(root, root.encode())
        for f in files + dirs:
            p = os.path.join(root, f)
            check(p, p.encode())
            try:
                if os.path.islink(p):
                    check(p, os.readlink(p).encode()); continue
                if os.path.isfile(p):
                    with open(p, "rb") as fh:
                        check(p, fh.read(4 << 20)); scanned += 1
            except OSError:
                pass
for root, dirs, files in os.walk("/proc", followlinks=False):
    depth = root.count("/")
    dirs[:] = [d for d in dirs if depth < 3 and d not in ("task", "net", "fd", "fdinfo",
                                                            "map_files", "ns", "attr")]
    for f in files:
        p = os.path.join(root, f)
        if f in ("kcore", "kmsg", "pagemap", "mem", "clear_refs", "kpagecount", "kpageflags",
                 "kpagecgroup", "sysrq-trigger", "auxv"):
            continue
        try:
            with open(p, "rb") as fh:
                check(p, fh.read(1 << 20)); scanned += 1
        except OSError:
            pass
for p in ("/proc/self/net/tcp", "/proc/self/net/fib_trie", "/proc/self/net/if_inet6",
          "/proc/self/net/route", "/proc/self/net/arp", "/proc/self/net/unix",
          "/proc/self/net/dev"):
    try:
        check(p, open(p, "rb").read())
    except OSError:
        pass
print(json.dumps({"hits": hits, "scanned": scanned}))
'''


def host_ips():
    out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    ips = set()
    for line in out.splitlines():
        m = re.search(r"\sinet6?\s+([0-9a-f.:]+)/", line)
        if m and not m.group(1).startswith(("127.", "::1")):
            ips.add(m.group(1))
    return ips


def test_no_tokens_ids_hostname_or_ips_inside(api, api_b, make_sandbox, sec_daemon):
    mine = make_sandbox(env={"VISIBLE": "ok"})
    others = [make_sandbox(), make_sandbox(client=api_b)]
    api.run(others[0], "/bin/sh", "-c", "echo team-a-other > /workspace/o")
    needles = [TOKENS["A"], TOKENS["B"], HOST_SECRET, *others]
    host = socket.gethostname()
    if host not in ("sandbox", "localhost") and len(host) >= 4:
        needles.append(host)
    needles += sorted(host_ips())
    for mode in (False, True):
        out = api.run(mine, PY, "-c", GREP, stdin=json.dumps(needles), sudo=mode,
                      http_timeout=120)
        assert out.exit["exit_code"] == 0, out.err[-2000:]
        res = json.loads(out.stdout)
        assert res["scanned"] > 50, res
        # the sandbox's own control: own env var is findable
        assert not res["hits"], f"leaks visible inside (sudo={mode}): {res['hits'][:20]}"
    own = api.run(mine, "/bin/sh", "-c", "hostname; uname -n; cat /etc/hostname 2>/dev/null")
    assert host.encode() not in own.stdout or host == "sandbox", own.stdout


def test_no_host_users_in_passwd_group_or_lookups(api, sandbox):
    with open("/etc/passwd") as f:
        host_users = {l.split(":")[0] for l in f if l.strip() and not l.startswith("#")}
    with open("/etc/group") as f:
        host_groups = {l.split(":")[0] for l in f if l.strip() and not l.startswith("#")}
    out = api.run(sandbox, PY, "-c",
                  "import pwd, grp, json; print(json.dumps([[p.pw_name for p in pwd.getpwall()],"
                  "[g.gr_name for g in grp.getgrall()], open('/etc/passwd').read()]))")
    users, groups, text = json.loads(out.stdout)
    allowed = {"root", "user", "nobody", "nogroup", "users"}
    leaked_u = (set(users) & host_users) - allowed
    leaked_g = (set(groups) & host_groups) - allowed
    assert not leaked_u and not leaked_g, (leaked_u, leaked_g)
    for u in host_users - allowed:
        assert f"\n{u}:" not in "\n" + text, u


def test_daemon_state_paths_invisible_inside(api, sandbox, sec_daemon):
    needles = [str(sec_daemon.state_dir), str(sec_daemon.work)]
    out = api.run(sandbox, PY, "-c", GREP, stdin=json.dumps(needles), http_timeout=120)
    res = json.loads(out.stdout)
    assert not res["hits"], f"daemon paths visible inside: {res['hits'][:10]}"
