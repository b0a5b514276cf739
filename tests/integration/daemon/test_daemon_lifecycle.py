"""Sandbox lifecycle: create, get, list, stop, timeout, extend, bad requests."""

import json
import os
import sqlite3
import time

from .conftest import (agent_pid_of, cgroup_exists, free_port, held_mount_namespaces,
                       sandbox_procs, wait_for)


def test_create_get_list_stop(api, daemon):
    t0 = int(time.time() * 1000)
    s = api.create_ok()
    sid = s["id"]
    try:
        assert sid.startswith("sbx_") and len(sid) > 8
        assert s["status"] == "running"
        assert s["workdir"] == "/workspace"
        assert s["network_policy"] == "deny-all"
        assert s["stopped_at"] is None
        assert t0 - 5000 <= s["created_at"] <= t0 + 60000
        assert s["expires_at"] - s["created_at"] == s["timeout_ms"] > 0
        # The sandbox exists on the host: its cgroup and its agent (PID 1).
        assert cgroup_exists(sid)
        agent = agent_pid_of(sid)
        assert agent, "no airlock-agent process in the sandbox's cgroup"

        g = api.sandbox(sid)
        assert g["id"] == sid and g["status"] == "running"
        assert g["created_at"] == s["created_at"]
        assert sid in [x["id"] for x in api.list()]

        # It works.
        out = api.run(sid, "/bin/echo", "alive")
        assert out.stdout == b"alive\n"
    finally:
        r = api.stop(sid)
    assert r.status == 200, r
    st = r.json["sandbox"]
    assert st["id"] == sid and st["status"] == "stopped"
    assert st["stopped_at"] is not None and st["stopped_at"] >= st["created_at"]
    assert api.sandbox(sid)["status"] == "stopped"
    # Still listed (with its final status) but gone from the host.
    listed = {x["id"]: x for x in api.list()}
    assert listed[sid]["status"] == "stopped"
    assert wait_for(lambda: not cgroup_exists(sid), timeout=5), "cgroup left after stop"
    assert wait_for(lambda: agent_pid_of(sid) is None, timeout=5), "agent left after stop"
    # A stopped sandbox refuses work with 410 Gone.
    r = api.start(sid, "/bin/true")
    assert r.status == 410 and r.error_code == "gone", r
    r = api.read_file(sid, "/etc/hostname")
    assert r.status == 410, r
    # Stopping again is harmless.
    r = api.stop(sid)
    assert r.status == 200 and r.json["sandbox"]["status"] == "stopped", r


def test_unknown_sandbox_is_404(api):
    for method, path in [("GET", "/v1/sandboxes/sbx_doesnotexist000000000000"),
                         ("POST", "/v1/sandboxes/sbx_doesnotexist000000000000/stop"),
                         ("GET", "/v1/sandboxes/sbx_doesnotexist000000000000/commands")]:
        r = api.request(method, path)
        assert r.status == 404, (method, path, r)
        assert r.error_code == "not_found", r
        assert r.json["error"]["message"], r


def test_create_options_are_reported(api, make_sandbox):
    sid = make_sandbox(timeout=120000, resources={"vcpus": 1, "memory": "256M"},
                       env={"GREETING": "hi"})
    s = api.sandbox(sid)
    assert s["timeout_ms"] == 120000
    assert s["expires_at"] - s["created_at"] == 120000
    assert s["resources"]["memory_bytes"] == 256 << 20
    assert s["resources"]["vcpus"] == 1
    assert api.sh(sid, 'echo "$GREETING"').stdout == b"hi\n"


def test_create_sets_the_hostname(api, make_sandbox):
    """A create's hostname (the spec's, jail/spec.h) is the sandbox's uname and the name
    its /etc/hostname and /etc/hosts carry; one that /etc/hosts cannot carry is 400 and
    makes nothing."""
    sid = make_sandbox(hostname="build-7.example")
    out = api.sh(sid, "hostname; cat /etc/hostname; grep -c build-7.example /etc/hosts")
    assert out.exit["exit_code"] == 0, out
    assert out.stdout.decode().split() == ["build-7.example", "build-7.example", "1"], out
    # the default is unchanged
    other = make_sandbox()
    assert api.sh(other, "hostname").stdout == b"sandbox\n"
    before = {x["id"] for x in api.request("GET", "/v1/sandboxes").json["sandboxes"]}
    for bad in ("-lead", "trail.", "has space", "a" * 64, "x/y", ""):
        r = api.create(hostname=bad)
        assert r.status == 400, (bad, r)
        assert "hostname" in r.json["error"]["message"], (bad, r.json)
    after = {x["id"] for x in api.request("GET", "/v1/sandboxes").json["sandboxes"]}
    assert after == before


def test_sandbox_timeout_stops_it(api, make_sandbox):
    sid = make_sandbox(timeout=2000)
    c = api.start_ok(sid, "/bin/sleep", "60")
    t0 = time.monotonic()
    assert wait_for(lambda: api.sandbox(sid)["status"] == "stopped", timeout=8), \
        api.sandbox(sid)
    took = time.monotonic() - t0
    assert took < 6, f"sandbox with a 2 s timeout stopped only after {took:.1f}s"
    s = api.sandbox(sid)
    assert s["stopped_at"] is not None
    # The command that was running ended, and says why.
    cmd = api.wait_ok(sid, c["id"], timeout_ms=5000)
    assert cmd["reason"] == "timeout", cmd
    assert cmd["exit_code"] is None
    # Work is refused with 410.
    r = api.start(sid, "/bin/true")
    assert r.status == 410, r
    r = api.put_files(sid, b"x" * 1024)
    assert r.status == 410, r
    r = api.extend(sid, 10000)
    assert r.status == 410, r
    assert wait_for(lambda: not cgroup_exists(sid), timeout=5)


def test_extend_pushes_expiry(api, make_sandbox):
    sid = make_sandbox(timeout=2000)
    before = api.sandbox(sid)
    r = api.extend(sid, 4000)
    assert r.status == 200, r
    after = r.json["sandbox"]
    assert after["expires_at"] == before["expires_at"] + 4000
    assert after["timeout_ms"] == before["timeout_ms"] + 4000
    # Past the original expiry it is still alive and usable.
    time.sleep(max(0, (before["expires_at"] - time.time() * 1000) / 1000) + 1.0)
    assert api.sandbox(sid)["status"] == "running"
    assert api.run(sid, "/bin/echo", "still").stdout == b"still\n"
    # ...and it does stop at the new expiry.
    assert wait_for(lambda: api.sandbox(sid)["status"] == "stopped", timeout=8)


def test_extend_bad_values(api, sandbox):
    for body in ({"duration_ms": 0}, {"duration_ms": -5}, {"duration_ms": "10"}, {},
                 {"duration_ms": 1000, "extra": 1}):
        r = api.request("POST", f"/v1/sandboxes/{sandbox}/extend", body=body)
        assert r.status == 400, (body, r)
    # Beyond the 24 h maximum lifetime.
    r = api.extend(sandbox, 25 * 3600 * 1000)
    assert r.status == 400, r
    assert api.sandbox(sandbox)["status"] == "running"


def _count(api):
    return len(api.list())


def test_bad_create_bodies_create_nothing(api, daemon):
    n = _count(api)
    cases = [
        (b"{not json", None),
        (b'{"timeout": 1000', None),
        (b"[]", None),
        (b'"str"', None),
        (json.dumps({"unknown_field": 1}).encode(), None),
        (json.dumps({"timeout": "soon"}).encode(), None),
        (json.dumps({"timeout": -1}).encode(), None),
        (json.dumps({"resources": {"vcpus": -1}}).encode(), None),
        (json.dumps({"resources": {"gpus": 1}}).encode(), None),
        (json.dumps({"env": {"A=B": "x"}}).encode(), None),
        (json.dumps({"env": {"A": 1}}).encode(), None),
        (json.dumps({"workdir": "relative"}).encode(), None),
        (json.dumps({"network_policy": "allow-some"}).encode(), None),
        (b'{"timeout": 1000, "timeout": 2000}', None),
        (b'{"image": "\xff\xfe"}', None),
    ]
    for raw, _ in cases:
        r = api.request("POST", "/v1/sandboxes", raw=raw,
                        headers={"Content-Type": "application/json"})
        assert r.status == 400, (raw, r)
        assert r.error_code == "bad_request", (raw, r)
    # An oversized body (over the 1 MiB JSON limit).
    big = json.dumps({"env": {"K%d" % i: "v" * 100 for i in range(20000)}}).encode()
    assert len(big) > 2 << 20
    r = api.request("POST", "/v1/sandboxes", raw=big,
                    headers={"Content-Type": "application/json"})
    assert r.status == 413, r
    assert _count(api) == n
    assert daemon.alive()
    # A command body that is bad creates no command either.
    sid = api.create_ok()["id"]
    try:
        for raw in (b"{", b'{"cmd": ""}', b'{"args": ["x"]}', b'{"cmd": "ls", "bogus": 1}',
                    b'{"cmd": "ls", "args": "notalist"}', b'{"cmd": "ls", "cwd": "rel"}',
                    b'{"cmd": "ls", "timeout": -3}'):
            r = api.request("POST", f"/v1/sandboxes/{sid}/commands", raw=raw,
                            headers={"Content-Type": "application/json"})
            assert r.status == 400, (raw, r)
        r = api.cmd_list(sid)
        assert r.status == 200 and r.json["commands"] == [], r
    finally:
        api.stop(sid)


def test_unknown_route_and_method(api, sandbox):
    r = api.request("GET", "/v1/nothing-here")
    assert r.status == 404, r
    r = api.request("DELETE", f"/v1/sandboxes/{sandbox}")
    assert r.status == 405, r
    assert "GET" in r.headers.get("allow", ""), r.headers
    assert api.sandbox(sandbox)["status"] == "running"


def test_stop_kills_every_process(api, sandbox):
    api.start_ok(sandbox, "/bin/sh", "-c", "sleep 300 & sleep 300 & wait")
    assert wait_for(lambda: len(sandbox_procs(sandbox)) >= 4, timeout=5), \
        sandbox_procs(sandbox)
    pids = sandbox_procs(sandbox)
    r = api.stop(sandbox)
    assert r.status == 200

    def all_gone():
        return not [p for p in pids if os.path.exists(f"/proc/{p}")
                    and open(f"/proc/{p}/stat").read().split(")")[1].split()[0] != "Z"]
    assert wait_for(all_gone, timeout=5), "sandbox processes survived stop"


def test_network_policy_update(api, sandbox):
    r = api.set_policy(sandbox, {"allow": ["example.com", "*.example.org"]})
    assert r.status == 200, r
    s = r.json["sandbox"]
    assert s["policy_generation"] == 2
    assert s["network_policy"] == {"allow": ["example.com", "*.example.org"]}
    r = api.set_policy(sandbox, "deny-all")
    assert r.status == 200 and r.json["sandbox"]["policy_generation"] == 3, r
    for bad in ("allow-some", {"allow": "example.com"}, {"nonsense": []}, 42):
        r = api.set_policy(sandbox, bad)
        assert r.status == 400, (bad, r)
    s = api.sandbox(sandbox)
    assert s["policy_generation"] == 3 and s["network_policy"] == "deny-all"


def test_concurrent_creates_get_distinct_sandboxes(api):
    import threading
    n = 6
    got, errors = [], []

    def worker():
        try:
            r = api.create()
            assert r.status == 201, r
            got.append(r.json["sandbox"]["id"])
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert not errors, errors
        assert len(set(got)) == n
        # Each sandbox has its own host uid range: compare the agents' host uids.
        uids = {}
        for sid in got:
            pid = agent_pid_of(sid)
            assert pid, sid
            with open(f"/proc/{pid}/status") as f:
                uid = [ln.split()[1] for ln in f if ln.startswith("Uid:")][0]
            uids[sid] = int(uid)
        assert len(set(uids.values())) == n, f"sandboxes share a host uid range: {uids}"
        assert all(u != 0 for u in uids.values())
        for sid in got:
            assert api.sh(sid, f"echo {sid} > /workspace/me; cat /workspace/me").stdout == \
                f"{sid}\n".encode()
    finally:
        for sid in got:
            api.stop(sid)


def test_state_dir_too_long_for_agent_sockets_is_refused_at_start(daemon, tmp_path):
    """The agents' sockets live under the state dir (sun_path: 108 bytes). A dir too long
    for them is refused when the daemon starts, with a message naming the option; before,
    the daemon started and every create failed with a 400 the client could not fix."""
    import subprocess
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    r = subprocess.run([daemon.binary, "serve", "--state-dir", str(deep / "state"),
                        "--listen", "127.0.0.1:0", "--tokens", str(daemon.tokens)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0, r
    assert "--state-dir" in r.stderr and "too long" in r.stderr, r.stderr
    assert not (deep / "state" / "sockets").exists()
    assert not (deep / "state" / "airlock.db").exists()


def test_a_second_daemon_on_the_same_state_dir_is_refused(daemon, api, sandbox):
    """Two daemons on one state dir would both manage the same sandboxes (each agent keeps
    only the newest connection, both watchdogs act on the same expiries). The second one
    is refused at start, naming the first one's pid; the first keeps its sandboxes."""
    import subprocess
    assert api.sh(sandbox, "echo before").out == "before\n"
    r = subprocess.run([daemon.binary, "serve", "--state-dir", str(daemon.state_dir),
                        "--listen", f"127.0.0.1:{free_port()}", "--tokens",
                        str(daemon.tokens)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0, r
    assert "in use by another airlockd" in r.stderr, r.stderr
    assert f"(pid {daemon.pid})" in r.stderr, r.stderr
    # the first daemon still owns its sandbox: the agent's connection was not taken
    assert daemon.alive()
    assert api.sh(sandbox, "echo after").out == "after\n"
    with open(daemon.state_dir / "airlockd.lock") as f:
        assert f.read().strip() == str(daemon.pid)


def test_a_stopped_sandboxs_mounts_are_let_go(api, daemon, make_sandbox):
    """A stop answers once every process of the sandbox is gone; its mounts (the root
    tmpfs, with what the workload wrote) are torn down just after, by the daemon's timer
    thread, which holds the mount namespace until then: it must let every one go."""
    sid = make_sandbox()
    out = api.sh(sid, "head -c 8000000 /dev/zero > /workspace/big && echo ok")
    assert out.out == "ok\n", out
    agent = agent_pid_of(sid)
    ns = os.readlink(f"/proc/{agent}/ns/mnt")
    assert api.stop(sid).status == 200
    # at the answer, the sandbox's processes are gone (a zombie PID 1 at most)
    assert not os.path.exists(f"/proc/{agent}") or \
        open(f"/proc/{agent}/stat").read().split(")")[1].split()[0] == "Z"
    assert wait_for(lambda: ns not in held_mount_namespaces(daemon.pid), timeout=5), ns
    # and none accumulates over many stops
    for _ in range(10):
        api.stop(make_sandbox())
    assert wait_for(lambda: not held_mount_namespaces(daemon.pid), timeout=5), \
        held_mount_namespaces(daemon.pid)


def _store_rows(daemon, sql, *args):
    with sqlite3.connect(f"file:{daemon.state_dir / 'airlock.db'}?mode=ro", uri=True) as db:
        return db.execute(sql, args).fetchall()


def test_a_stop_leaves_its_end_in_the_store_as_answered(api, daemon):
    """A stop writes the sandbox's end to the store while the kernel tears the sandbox down
    (once the SIGKILL is sent), or, when a command is still running, after that command's
    own end: either way the store holds what the answer said, the command ended by the
    kill before the sandbox, and the agent's socket is gone."""
    idle = api.create_ok()["id"]
    assert api.run(idle, "/bin/true").exit["exit_code"] == 0
    busy = api.create_ok()["id"]
    cid = api.start_ok(busy, "/bin/sleep", "60")["id"]
    socks = daemon.state_dir / "sockets"
    assert (socks / f"{idle}.sock").exists() and (socks / f"{busy}.sock").exists()
    for sid in (idle, busy):
        r = api.stop(sid)
        assert r.status == 200, r
        answered = r.json["sandbox"]
        assert answered["status"] == "stopped" and answered["stopped_at"], answered
        assert _store_rows(daemon, "SELECT status, stopped_ms FROM sandboxes WHERE id = ?",
                           sid) == [("stopped", answered["stopped_at"])]
        assert not (socks / f"{sid}.sock").exists()
        assert not sandbox_procs(sid)
    (ended,) = _store_rows(daemon, "SELECT signal, reason, finished_ms FROM commands "
                           "WHERE id = ?", cid)
    assert ended[:2] == (9, "signaled"), ended
    assert 0 < ended[2] <= api.sandbox(busy)["stopped_at"], ended
    c = api.cmd_get(busy, cid).json["command"]
    assert c["status"] == "finished" and c["signal"] == 9, c
