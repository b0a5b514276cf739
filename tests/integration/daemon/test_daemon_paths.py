"""Tenant paths have one normal form (src/common/path.c): a create's workdir, a
command's cwd and the files API's paths, in the native and the Vercel API. The rules
(a workdir outside /proc, /sys and /dev; the writable areas) look at that form only,
and that form is what is stored and reported. A path that does not normalize ('.',
'..', relative, over-long) is a 400 and nothing is made."""

import pytest

from .conftest import tar_of
from .test_daemon_hostile_input import assert_error, healthy, ids

# Spellings of the kernel's file systems that a raw prefix compare let through.
PSEUDO = ["//proc", "//sys", "//dev", "//sys/x", "///proc/1", "/proc//", "//dev//pts",
          "/", "//"]
UNNORMAL = ["/./dev", "/proc/.", "/workspace//../proc", "/workspace/./a", "/.",
            "/workspace/..", "workspace", "/" + "x" * 256, "/x" * 2100]


def test_native_create_refuses_pseudo_fs_workdirs_however_spelled(api, daemon):
    before = ids(api)
    wrong = []
    for wd in PSEUDO + UNNORMAL:
        r = api.create(workdir=wd)
        if r.status == 201:
            api.stop(r.json["sandbox"]["id"])
        try:
            assert_error(r, 400, "bad_request", "workdir")
        except AssertionError:
            wrong.append((wd[:40], r))
    assert not wrong, wrong
    assert ids(api) == before
    healthy(api, daemon)


def test_native_create_names_the_reason(api, daemon):
    r = api.create(workdir="//proc")
    assert_error(r, 400, "bad_request", "/proc")
    assert "'/proc'" in r.json["error"]["message"], r  # judged (and shown) normalized
    r = api.create(workdir="/workspace//../proc")
    assert_error(r, 400, "bad_request", "'..'")


def test_native_workdir_with_repeated_slashes_is_stored_normalized(api, daemon, make_sandbox):
    sid = make_sandbox(workdir="//tmp//wd///")
    assert api.sandbox(sid)["workdir"] == "/tmp/wd"
    out = api.sh(sid, "pwd")
    assert out.stdout == b"/tmp/wd\n", out
    sid2 = make_sandbox(workdir="/dev/shm//w")  # /dev/shm is the sandbox's own
    assert api.sandbox(sid2)["workdir"] == "/dev/shm/w"


def test_native_command_cwd_is_normalized_or_refused(api, daemon, sandbox):
    c = api.start_ok(sandbox, "/bin/pwd", cwd="//tmp//")
    c = api.wait_ok(sandbox, c["id"])
    assert c["cwd"] == "/tmp", c
    before = api.cmd_list(sandbox).json
    for cwd in ("/tmp/..", "/./tmp", "tmp", "/tmp/./x"):
        r = api.start(sandbox, "/bin/true", cwd=cwd)
        assert_error(r, 400, "bad_request", "cwd")
    assert api.cmd_list(sandbox).json == before
    healthy(api, daemon)


def test_native_files_paths_are_normalized(api, daemon, sandbox):
    r = api.put_files(sandbox, tar_of("n.txt", b"normal\n"), dir="//workspace//sub//")
    assert r.status in (200, 201, 204), r
    assert api.read_file(sandbox, "//workspace///sub/n.txt").data == b"normal\n"
    for path in ("/workspace/sub/../sub/n.txt", "/workspace/./sub/n.txt"):
        assert_error(api.read_file(sandbox, path), 400, "bad_request")
    # The writable-area rule sees the normal form: "//proc" is no way around it.
    r = api.mkdir(sandbox, "//proc//x")
    assert 400 <= r.status < 500, r
    assert api.sh(sandbox, "test -e /proc/x && echo MADE").stdout == b""
    healthy(api, daemon)



def test_vercel_command_cwd_is_normalized_or_refused(api, daemon, sandbox):
    r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/cmd",
                    body={"command": "/bin/pwd", "cwd": "//tmp//", "wait": True})
    assert r.status == 200, r
    assert b"/tmp" in r.data, r
    assert b'"cwd":"/tmp"' in r.data.replace(b" ", b""), r
    wrong = []
    for cwd in ("/tmp/..", "/./tmp", "/tmp/./x", "../etc", "sub/.."):
        r = api.request("POST", f"/v2/sandboxes/sessions/{sandbox}/cmd",
                        body={"command": "/bin/true", "cwd": cwd})
        try:
            assert_error(r, 400)
            assert "cwd" in r.json["error"]["message"], r
        except AssertionError:
            wrong.append((cwd, r))
    assert not wrong, wrong
    healthy(api, daemon)


def test_vercel_files_paths_are_normalized(api, daemon, sandbox):
    base = f"/v2/sandboxes/sessions/{sandbox}/fs"
    r = api.request("POST", f"{base}/mkdir", body={"path": "//workspace//vd"})
    assert r.status == 200, r
    r = api.request("POST", f"{base}/mkdir", body={"path": "//proc//vd"})
    assert 400 <= r.status < 500, r
    for path in ("/workspace/vd/..", "/./workspace/vd", "/workspace//../etc/passwd"):
        r = api.request("POST", f"{base}/read", body={"path": path})
        assert_error(r, 400)
    assert api.sh(sandbox, "test -d /workspace/vd && echo ok").stdout == b"ok\n"
    healthy(api, daemon)
