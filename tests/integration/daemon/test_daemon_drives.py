"""Drives (docs/snapshots.md, "Drives"): what a sandbox plants in a drive -- symlinks to
host paths, hard links, FIFOs, device nodes, set-id files -- reaches neither the host nor
another sandbox's outside; mount paths stay in the writable areas; a snapshot does not
walk into a mounted drive."""

import os
import secrets

import pytest

from .conftest import HOST_SECRET, wait_for


def vc_create(api, **body):
    body.setdefault("projectId", "prj")
    r = api.request("POST", "/v3/sandboxes", body)
    return r


def drive(api, name, size=32 << 20):
    r = api.request("POST", f"/v2/sandboxes/drives/{name}", {"projectId": "prj",
                                                             "maxSizeBytes": size})
    assert r.status == 200, r
    return r.json["drive"]


@pytest.fixture
def drive_name(api):
    name = "it-" + secrets.token_hex(4)
    drive(api, name)
    yield name
    for s in api.list():
        if s["status"] == "running":
            api.stop(s["id"])
    api.request("DELETE", f"/v2/sandboxes/drives/{name}")


def test_planted_links_and_nodes_in_a_drive_stay_inside(api, daemon, drive_name, tmp_path):
    host = tmp_path / "host-file"
    host.write_text(HOST_SECRET)
    os.chmod(tmp_path, 0o755)
    before = host.stat()
    r = vc_create(api, mounts={"/workspace/d": {"drive": drive_name, "mode": "read-write"}})
    assert r.status == 200, r
    a = r.json["session"]["id"]
    out = api.sh(a, f"""
        cd /workspace/d
        ln -s {host} host-link; ln -s / root-link
        ln /etc/passwd hard 2>&1 | head -c 120; echo
        mkfifo fifo; echo fifo=$?
        mknod dev c 1 3 2>/dev/null; echo mknod=$?
        cp /bin/true suid && chmod 4755 suid; ls -l suid | cut -c1-10
        echo mine > own
    """).stdout.decode()
    assert "Invalid cross-device link" in out or "Operation not permitted" in out, out
    assert "mknod=0" not in out, out
    # a snapshot of the writer does not walk into the drive (another file system)
    mark = daemon.log_path.stat().st_size
    r = api.request("POST", f"/v1/sandboxes/{a}/snapshot", {})
    assert r.status == 201, r
    tar = (daemon.state_dir / "snapshots" / f"{r.json['snapshot']['id']}.tar").read_bytes()
    assert b"mine\n" not in tar
    assert wait_for(lambda: "another file system" in
                    daemon.log_path.read_bytes()[mark:].decode(errors="replace"))
    # a reader sees the plants only as what they are, inside its own sandbox
    r = vc_create(api, mounts={"/tmp/r": {"drive": drive_name, "mode": "snapshot"}})
    assert r.status == 200, r
    b = r.json["session"]["id"]
    out = api.sh(b, "cd /tmp/r; cat own; readlink host-link; cat host-link 2>&1 | head -c 100; "
                    "echo; ls root-link/ | head -3; test -p fifo && echo is-fifo; "
                    "./suid; echo suid-ran=$?; sudo -n true 2>/dev/null; "
                    "echo x > new 2>&1; echo write=$?").stdout.decode()
    assert "mine" in out and str(host) in out and HOST_SECRET not in out, out
    assert "write=0" not in out, out
    api.stop(a)
    api.stop(b)
    assert host.read_text() == HOST_SECRET and host.stat().st_mtime_ns == before.st_mtime_ns


def test_suid_bits_do_nothing_on_a_drive(api, drive_name):
    r = vc_create(api, mounts={"/workspace/d": {"drive": drive_name}})
    assert r.status == 200, r
    sid = r.json["session"]["id"]
    out = api.sh(sid, "grep ' /workspace/d ' /proc/self/mounts").stdout.decode()
    assert "nosuid" in out and "nodev" in out, out
    api.stop(sid)


@pytest.mark.parametrize("path", ["/etc/x", "/workspace/../etc", "/usr/lib/x", "/proc/x",
                                  "relative/x"])
def test_mount_paths_outside_the_writable_areas_are_refused(api, drive_name, path):
    before = {s["id"] for s in api.list() if s["status"] == "running"}
    r = vc_create(api, mounts={path: {"drive": drive_name}})
    assert r.status in (400, 403), r
    assert {s["id"] for s in api.list() if s["status"] == "running"} <= before


def test_drive_in_use_is_409_and_other_team_404(api, api_b, drive_name):
    r = vc_create(api, mounts={"/workspace/d": {"drive": drive_name}})
    assert r.status == 200, r
    sid = r.json["session"]["id"]
    r = api.request("DELETE", f"/v2/sandboxes/drives/{drive_name}")
    assert r.status == 409 and sid in r.json["error"]["message"], r
    assert api_b.request("DELETE", f"/v2/sandboxes/drives/{drive_name}").status == 404
    assert vc_create(api_b, mounts={"/workspace/d": {"drive": drive_name}}).status == 404
    api.stop(sid)
    assert api.request("DELETE", f"/v2/sandboxes/drives/{drive_name}").status == 200


def test_drive_survives_a_daemon_restart(api, daemon, drive_name):
    r = vc_create(api, mounts={"/workspace/d": {"drive": drive_name}})
    sid = r.json["session"]["id"]
    api.sh(sid, "echo persisted > /workspace/d/p")
    api.stop(sid)
    daemon.term()
    daemon.start()
    r = vc_create(api, mounts={"/workspace/d": {"drive": drive_name}})
    assert r.status == 200, r
    sid = r.json["session"]["id"]
    assert api.sh(sid, "cat /workspace/d/p").stdout == b"persisted\n"
    api.stop(sid)
