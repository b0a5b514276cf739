"""Snapshots and fork on the native API (docs/snapshots.md): what is captured comes back,
the source keeps running, and what a sandbox plants (symlinks to host paths, hard links,
FIFOs, device-like names) never makes the daemon read or write outside the sandbox."""

import hashlib
import os
import secrets
import time

import pytest

from .conftest import HOST_SECRET, wait_for


def snap(api, sid, **body):
    return api.request("POST", f"/v1/sandboxes/{sid}/snapshot", body)


def snap_ok(api, sid, **body):
    r = snap(api, sid, **body)
    assert r.status == 201, r
    return r.json["snapshot"]


def log_since(daemon, mark):
    return daemon.log_path.read_bytes()[mark:].decode(errors="replace")


def test_snapshot_restore_round_trip_keeps_source_running(api, sandbox):
    api.sh(sandbox, "mkdir -p /workspace/d/e && echo one > /workspace/d/e/f.txt && "
                    "head -c 300000 /dev/urandom > /workspace/blob && echo t > /tmp/t && "
                    "echo h > /home/user/.h && ln -s d/e/f.txt /workspace/ln && "
                    "chmod 751 /workspace/d && sha256sum /workspace/blob > /tmp/sum")
    want = api.sh(sandbox, "cat /tmp/sum").stdout
    s = snap_ok(api, sandbox)
    assert s["id"].startswith("snp_") and s["sandbox_id"] == sandbox
    assert s["size_bytes"] > 300000 and len(s["sha256"]) == 64 and s["expires_at"] is None
    # the source was frozen for the capture only: it runs, and runs commands
    assert api.sandbox(sandbox)["status"] == "running"
    assert api.sh(sandbox, "echo alive").stdout == b"alive\n"
    r = api.create(snapshot=s["id"])
    assert r.status == 201, r
    new = r.json["sandbox"]["id"]
    try:
        out = api.sh(new, "cat /workspace/d/e/f.txt /tmp/t /home/user/.h; readlink /workspace/ln; "
                          "stat -c %a /workspace/d; sha256sum /workspace/blob")
        lines = out.stdout.decode().splitlines()
        assert lines[:4] == ["one", "t", "h", "d/e/f.txt"]
        assert lines[4] == "751"
        assert lines[5].encode() + b"\n" == want
    finally:
        api.stop(new)


def test_fork_sees_files_written_after_the_last_snapshot(api, sandbox):
    api.sh(sandbox, "echo before > /workspace/a")
    snap_ok(api, sandbox)
    api.sh(sandbox, "echo after > /workspace/b")
    r = api.request("POST", f"/v1/sandboxes/{sandbox}/fork", {})
    assert r.status == 201, r
    fork = r.json["sandbox"]["id"]
    try:
        assert api.sh(fork, "cat /workspace/a /workspace/b").stdout == b"before\nafter\n"
        # independent: the fork's writes do not reach the source
        api.sh(fork, "echo forked > /workspace/c")
        assert api.sh(sandbox, "test -e /workspace/c && echo y || echo n").stdout == b"n\n"
        assert api.sandbox(sandbox)["status"] == "running"
    finally:
        api.stop(fork)


def test_errors_stopped_missing_other_team(api, api_b, make_sandbox):
    sid = make_sandbox()
    s = snap_ok(api, sid)
    # another team: the snapshot does not exist for it
    assert api_b.request("GET", f"/v1/snapshots/{s['id']}").status == 404
    assert api_b.request("DELETE", f"/v1/snapshots/{s['id']}").status == 404
    assert api_b.create(snapshot=s["id"]).status == 404
    assert s["id"] not in [x["id"] for x in api_b.request("GET", "/v1/snapshots").json["snapshots"]]
    assert s["id"] in [x["id"] for x in api.request("GET", "/v1/snapshots").json["snapshots"]]
    assert api.request("POST", "/v1/sandboxes/sbx_nosuchsandbox000000000000/fork", {}).status == 404
    api.stop(sid)
    assert snap(api, sid).status == 410
    assert api.request("POST", f"/v1/sandboxes/{sid}/fork", {}).status == 410
    assert api.request("DELETE", f"/v1/snapshots/{s['id']}").status == 200
    assert api.request("GET", f"/v1/snapshots/{s['id']}").status == 404


def test_corrupted_snapshot_is_refused_on_restore(api, daemon, sandbox):
    api.sh(sandbox, "echo precious > /workspace/p")
    s = snap_ok(api, sandbox)
    tar = daemon.state_dir / "snapshots" / f"{s['id']}.tar"
    data = bytearray(tar.read_bytes())
    i = data.find(b"precious")
    assert i > 0
    data[i] ^= 0x20
    tar.write_bytes(bytes(data))
    mark = daemon.log_path.stat().st_size
    before = {x["id"] for x in api.list()}
    r = api.create(snapshot=s["id"])
    assert r.status == 500 and "corrupt" in r.json["error"]["message"], r
    assert {x["id"] for x in api.list() if x["status"] == "running"} <= before
    assert wait_for(lambda: "does not match the digest" in log_since(daemon, mark))


def test_snapshot_survives_a_daemon_restart_and_delete_keeps_forks(api, daemon, sandbox):
    api.sh(sandbox, "echo kept > /workspace/k")
    s = snap_ok(api, sandbox)
    r = api.create(snapshot=s["id"])
    assert r.status == 201
    made = r.json["sandbox"]["id"]
    daemon.term()
    daemon.start()
    assert api.request("GET", f"/v1/snapshots/{s['id']}").json["snapshot"]["sha256"] == s["sha256"]
    assert api.request("DELETE", f"/v1/snapshots/{s['id']}").status == 200
    assert api.sh(made, "cat /workspace/k").stdout == b"kept\n"
    api.stop(made)


def test_expiration_deletes_the_snapshot(api, sandbox):
    s = snap_ok(api, sandbox, expiration_ms=500)
    assert s["expires_at"] == s["created_at"] + 500
    assert wait_for(lambda: api.request("GET", f"/v1/snapshots/{s['id']}").status == 404,
                    timeout=5)


# --------------------------------------------------------------------------
# attacks: what the sandbox plants before a snapshot, a restore, a fork


def test_planted_links_fifos_and_devices_never_reach_the_host(api, daemon, sandbox, tmp_path):
    host = tmp_path / "host-secret.txt"
    host.write_text(HOST_SECRET)
    os.chmod(tmp_path, 0o755)
    digest = hashlib.sha256(host.read_bytes()).hexdigest()
    mtime = host.stat().st_mtime_ns
    api.sh(sandbox, f"""
        cd /workspace
        ln -s {host} abs-link
        ln -s /proc/1/root{host} proc-link
        ln -s ../../../../../../..{host} rel-link
        ln -s / rootlink
        mkfifo fifo
        echo regular > file && ln file hard
        python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.bind("sock")' || true
        mknod null-copy c 1 3 2>/dev/null || touch dev-like-name
        mkdir -p /tmp/deep && ln -s /etc/shadow /tmp/deep/shadow
    """)
    mark = daemon.log_path.stat().st_size
    t0 = time.monotonic()
    s = snap_ok(api, sandbox)
    assert time.monotonic() - t0 < 20  # a FIFO never blocks the capture
    tar = (daemon.state_dir / "snapshots" / f"{s['id']}.tar").read_bytes()
    assert HOST_SECRET.encode() not in tar
    assert b"root:" not in tar
    log = log_since(daemon, mark)
    assert "a FIFO: not captured" in log and "fifo" in log
    r = api.create(snapshot=s["id"])
    assert r.status == 201, r
    new = r.json["sandbox"]["id"]
    try:
        out = api.sh(new, "cd /workspace; readlink abs-link rel-link rootlink; cat file hard; "
                          "test -e fifo && echo fifo-there || echo no-fifo; "
                          "cat abs-link 2>&1 | head -c 200").stdout.decode()
        assert str(host) in out and "regular\nregular\n" in out and "no-fifo" in out
        assert HOST_SECRET not in out  # the link resolves inside the new sandbox
        # a fork with the same plants
        r = api.request("POST", f"/v1/sandboxes/{sandbox}/fork", {})
        assert r.status == 201, r
        api.stop(r.json["sandbox"]["id"])
    finally:
        api.stop(new)
    assert host.read_text() == HOST_SECRET
    assert hashlib.sha256(host.read_bytes()).hexdigest() == digest
    assert host.stat().st_mtime_ns == mtime


def test_symlinked_workdir_area_is_left_out(api, daemon, make_sandbox, tmp_path):
    host = tmp_path / "outside"
    host.mkdir()
    (host / "victim").write_text("host data")
    sid = make_sandbox(workdir="/workspace/wd")
    api.sh(sid, f"cd /workspace && rm -rf wd && ln -s {host} wd")
    s = snap_ok(api, sid)
    tar = (daemon.state_dir / "snapshots" / f"{s['id']}.tar").read_bytes()
    assert b"host data" not in tar
    # the new sandbox's workdir is a directory: the captured symlink cannot replace it,
    # and the restore says so (409) rather than write through it
    r = api.create(snapshot=s["id"])
    assert r.status == 409 and "wd" in r.json["error"]["message"], r
    assert sorted(os.listdir(host)) == ["victim"] and (host / "victim").read_text() == "host data"


def test_snapshot_store_cap_refuses_with_507(tmp_path_factory):
    from .conftest import Api, TOKENS, own_daemon
    gen = own_daemon(tmp_path_factory, "snapcap", "--snapshot-max", "64K")
    d = next(gen)
    try:
        api = Api(d.port, TOKENS["A"])
        sid = api.create_ok()["id"]
        api.sh(sid, "head -c 200000 /dev/urandom > /workspace/big")
        r = snap(api, sid)
        assert r.status == 507, r
        assert not [p for p in (d.state_dir / "snapshots").iterdir() if p.suffix == ".tar"]
        api.stop(sid)
    finally:
        for _ in gen:
            pass


def test_persistent_name_survives_a_daemon_restart(api, daemon):
    """Vercel routes: a named persistent sandbox's stop snapshots it; after a restart of
    the daemon, GET ?resume=true makes a new session with its files."""
    name = "persist-" + secrets.token_hex(4)
    r = api.request("POST", "/v3/sandboxes", {"projectId": "p", "name": name,
                                              "persistent": True})
    assert r.status == 200, r
    sid = r.json["session"]["id"]
    api.sh(sid, "echo across > /vercel/sandbox/a")
    r = api.request("POST", f"/v2/sandboxes/sessions/{sid}/stop")
    assert r.status == 200 and r.json["snapshot"]["id"], r
    daemon.term()
    daemon.start()
    r = api.request("GET", f"/v2/sandboxes/{name}?resume=true")
    assert r.status == 200 and r.json["resumed"] is True, r
    new = r.json["session"]["id"]
    assert new != sid and r.json["sandbox"]["name"] == name
    assert api.sh(new, "cat /vercel/sandbox/a").stdout == b"across\n"
    assert api.request("DELETE", f"/v2/sandboxes/{name}?deleteOrphanSnapshots=true").status == 200
    assert api.request("GET", f"/v2/sandboxes/{name}").status == 404


def test_capture_freezes_then_thaws_the_whole_sandbox(api, sandbox):
    """The capture's freeze covers every process of the sandbox (v1: all moved into its
    freezer cgroup; v2: its own cgroup.freeze), and it is thawed afterwards: a writer
    that ran through the capture keeps running, and what was captured of its file is
    whole lines (no write was cut by the copy)."""
    import hostprobe
    api.start_ok(sandbox, "/bin/sh", "-c",
                 "i=0; while :; do i=$((i+1)); echo line-$i-end >> /workspace/log; done")
    time.sleep(0.2)
    s = snap_ok(api, sandbox)
    pids = set(open(os.path.join(hostprobe.cgroup_dir("pids", sandbox),
                                 "cgroup.procs")).read().split())
    if hostprobe.cgroup_layout() == "v2":
        d = hostprobe.cgroup_dir("pids", sandbox)
        assert open(os.path.join(d, "cgroup.freeze")).read().strip() == "0"
    else:
        d = os.path.join(hostprobe.CGROUP_FS, "freezer", "airlock", sandbox)
        assert open(os.path.join(d, "freezer.state")).read().strip() == "THAWED"
        assert pids <= set(open(os.path.join(d, "cgroup.procs")).read().split())
    n1 = api.sh(sandbox, "wc -l < /workspace/log").stdout
    time.sleep(0.2)
    assert int(api.sh(sandbox, "wc -l < /workspace/log").stdout) > int(n1)  # still writing
    r = api.create(snapshot=s["id"])
    assert r.status == 201, r
    new = r.json["sandbox"]["id"]
    try:
        bad = api.sh(new, "grep -cv '^line-[0-9]*-end$' /workspace/log || true").stdout
        assert bad.strip() == b"0", bad
    finally:
        api.stop(new)
