"""Files: tar / tar.gz upload, read, mkdir, list; hostile archives; bombs; volume."""

import gzip
import hashlib
import io
import os
import secrets
import tarfile
import time

import pytest


def make_tar(entries, gz=False):
    """entries: list of (name, bytes | dict). A dict gives type=dir|sym|hard,
    target=..., mode=...; bytes make a regular file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w",
                      format=tarfile.GNU_FORMAT) as tf:
        for name, spec in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if isinstance(spec, (bytes, bytearray)):
                ti.size = len(spec)
                ti.mode = 0o644
                tf.addfile(ti, io.BytesIO(spec))
                continue
            kind = spec["type"]
            ti.mode = spec.get("mode", 0o755 if kind == "dir" else 0o777)
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "sym":
                ti.type = tarfile.SYMTYPE
                ti.linkname = spec["target"]
            elif kind == "hard":
                ti.type = tarfile.LNKTYPE
                ti.linkname = spec["target"]
            tf.addfile(ti)
    return buf.getvalue()


def pwn_name():
    return "airlock-pwn-" + secrets.token_hex(6)


def in_sandbox_exists(api, sid, path):
    out = api.run(sid, "/bin/sh", "-c", f'test -e "{path}" -o -L "{path}" && echo YES || echo NO')
    return out.stdout.strip() == b"YES"


# --------------------------------------------------------------------------
# normal use


def test_upload_tar_and_read_back(api, sandbox):
    files = [("hello.txt", b"hello world\n"),
             ("dir/nested/data.bin", bytes(range(256)) * 10),
             ("run.sh", b"#!/bin/sh\necho script-ran\n")]
    data = make_tar(files + [("link", {"type": "sym", "target": "hello.txt"})])
    r = api.put_files(sandbox, data)
    assert r.status == 200, r
    # Through a command: contents, owner (the sandbox user), symlink.
    out = api.sh(sandbox, "cat /workspace/hello.txt; stat -c '%u %a' /workspace/hello.txt; "
                          "readlink /workspace/link; sha256sum dir/nested/data.bin")
    lines = out.stdout.decode().splitlines()
    assert lines[0] == "hello world"
    assert lines[1] == "1000 644"
    assert lines[2] == "hello.txt"
    assert lines[3].split()[0] == hashlib.sha256(bytes(range(256)) * 10).hexdigest()
    # Through files/content, absolute and relative to the workdir.
    r = api.read_file(sandbox, "/workspace/dir/nested/data.bin")
    assert r.status == 200 and r.data == bytes(range(256)) * 10, r
    r = api.read_file(sandbox, "hello.txt")
    assert r.status == 200 and r.data == b"hello world\n", r
    # The uploaded script can be run after chmod by the sandbox user.
    assert api.sh(sandbox, "chmod +x run.sh && ./run.sh").stdout == b"script-ran\n"


def test_upload_tar_gz_into_dir(api, sandbox):
    payload = os.urandom(100_000)
    data = make_tar([("a.bin", payload), ("b/c.txt", b"see\n")], gz=True)
    assert data[:2] == b"\x1f\x8b"
    r = api.put_files(sandbox, data, dir="/workspace/up/load")
    assert r.status == 200, r
    r = api.read_file(sandbox, "/workspace/up/load/a.bin")
    assert r.status == 200 and r.data == payload
    out = api.sh(sandbox, "cat /workspace/up/load/b/c.txt; stat -c %u /workspace/up/load")
    assert out.stdout == b"see\n1000\n"
    # Into /tmp (another writable area) too.
    assert api.put_files(sandbox, make_tar([("t.txt", b"tmp\n")]), dir="/tmp").status == 200
    assert api.read_file(sandbox, "/tmp/t.txt").data == b"tmp\n"


def test_upload_overwrites_a_file_written_by_a_command(api, sandbox):
    api.sh(sandbox, "echo old-content-that-is-longer > /workspace/f.txt")
    assert api.put_files(sandbox, make_tar([("f.txt", b"new\n")])).status == 200
    assert api.sh(sandbox, "cat /workspace/f.txt").stdout == b"new\n"


def test_read_errors(api, sandbox):
    r = api.read_file(sandbox, "/workspace/missing.txt")
    assert r.status == 404 and r.error_code == "not_found", r
    r = api.read_file(sandbox, "/workspace")
    assert r.status == 400, r
    r = api.read_file(sandbox, "/workspace/../etc/passwd")
    assert r.status == 400, r
    r = api.request("GET", f"/v1/sandboxes/{sandbox}/files/content")
    assert r.status == 400, r
    # The host's /root is not in the sandbox; /etc/shadow neither.
    assert api.read_file(sandbox, "/etc/shadow").status == 404
    r = api.read_file(sandbox, "/root/.bashrc")
    assert r.status == 404, r


def test_read_does_not_follow_symlinks_out_of_the_sandbox(api, sandbox):
    # A symlink to an absolute path resolves inside the sandbox root, never the host's.
    marker = f"/tmp/{pwn_name()}"
    with open(marker, "w") as f:
        f.write("host only\n")
    try:
        api.sh(sandbox, f"ln -s {marker} /workspace/tohost; ln -s /proc/1/root/etc/hostname "
                        "/workspace/magic")
        r = api.read_file(sandbox, "/workspace/tohost")
        assert r.status == 404, r
        assert b"host only" not in r.data
        r = api.read_file(sandbox, "/workspace/magic")
        assert r.status != 200, r
        assert 400 <= r.status < 500, r
    finally:
        os.unlink(marker)


def test_read_refuses_pseudo_files_and_special_files(api, sandbox):
    # Read by host root, /proc of the sandbox would be a window on the host.
    r = api.read_file(sandbox, "/proc/1/environ")
    r2 = api.read_file(sandbox, "/proc/1/root/etc/passwd")
    assert r.status != 200 and b"PATH=" not in r.data, r
    assert r2.status != 200 and b"root:" not in r2.data, r2
    assert 400 <= r.status < 500, r
    assert 400 <= r2.status < 500, r2
    # A FIFO is refused at once rather than blocking the daemon.
    api.sh(sandbox, "mkfifo /workspace/pipe")
    t0 = time.monotonic()
    r = api.read_file(sandbox, "/workspace/pipe")
    assert r.status == 400, r
    assert time.monotonic() - t0 < 3
    assert api.read_file(sandbox, "/dev/null").status == 400


def test_custom_workdir(api, make_sandbox):
    sid = make_sandbox(workdir="/home/user/proj")
    assert api.run(sid, "/bin/pwd").stdout == b"/home/user/proj\n"
    assert api.put_files(sid, make_tar([("rel.txt", b"relative\n")])).status == 200
    assert api.read_file(sid, "/home/user/proj/rel.txt").data == b"relative\n"
    assert api.read_file(sid, "rel.txt").data == b"relative\n"
    assert api.sh(sid, "stat -c %u /home/user/proj/rel.txt").stdout == b"1000\n"


def test_mkdir_and_list(api, sandbox):
    r = api.mkdir(sandbox, "/workspace/a/b/c", parents=True)
    assert r.status == 200, r
    r = api.mkdir(sandbox, "/workspace/a/b/c", parents=True)  # again: fine with parents
    assert r.status == 200, r
    r = api.mkdir(sandbox, "/workspace/x/y")  # no parents: x is missing
    assert r.status == 404, r
    r = api.mkdir(sandbox, "/workspace/a/solo")
    assert r.status == 200, r
    r = api.mkdir(sandbox, "/workspace/a/solo")  # exists, without parents
    assert r.status == 409, r
    out = api.sh(sandbox, "test -d /workspace/a/b/c && stat -c %u /workspace/a/b/c")
    assert out.stdout == b"1000\n"
    assert api.sh(sandbox, "touch /workspace/a/b/c/ok").exit["exit_code"] == 0

    api.put_files(sandbox, make_tar([("a/file.txt", b"12345"),
                                     ("a/sl", {"type": "sym", "target": "file.txt"})]))
    r = api.list_files(sandbox, "/workspace/a")
    assert r.status == 200, r
    entries = {e["name"]: e for e in r.json["entries"]}
    assert set(entries) == {"b", "solo", "file.txt", "sl"}
    assert entries["b"]["type"] == "dir"
    assert entries["file.txt"]["type"] == "file" and entries["file.txt"]["size"] == 5
    assert entries["sl"]["type"] == "symlink"
    assert [e["name"] for e in r.json["entries"]] == sorted(entries)
    # The default path is the workdir.
    r = api.list_files(sandbox)
    assert r.status == 200 and "a" in [e["name"] for e in r.json["entries"]], r
    r = api.list_files(sandbox, "/workspace/nothing")
    assert r.status == 404, r


def test_mkdir_outside_writable_area_refused(api, sandbox):
    results = {}
    for path in ("/usr/airlock-evil", "/etc/airlock-evil", "/proc/airlock-evil"):
        results[path] = api.mkdir(sandbox, path, parents=True)
        assert results[path].status != 200, (path, results[path])
        assert not os.path.exists(path)
    assert not in_sandbox_exists(api, sandbox, "/usr/airlock-evil")
    for path, r in results.items():
        assert 400 <= r.status < 500, (path, r)


def test_upload_outside_writable_area_refused(api, sandbox):
    name = pwn_name()
    r = api.put_files(sandbox, make_tar([(name, b"x")]), dir="/etc")
    assert not os.path.exists(f"/etc/{name}")
    assert not in_sandbox_exists(api, sandbox, f"/etc/{name}")
    assert r.status != 200, r
    assert 400 <= r.status < 500, r


def test_upload_garbage_refused(api, sandbox):
    r = api.put_files(sandbox, b"")
    assert r.status == 400, r
    r = api.put_files(sandbox, b"this is not an archive at all" * 100)
    assert r.status == 400, r
    # A truncated archive: refused, and nothing half-written.
    data = make_tar([("first.txt", b"a" * 5000), ("second.txt", b"b" * 5000)])
    r = api.put_files(sandbox, data[:7000])
    assert 400 <= r.status < 500, r
    assert not in_sandbox_exists(api, sandbox, "/workspace/first.txt")


# --------------------------------------------------------------------------
# hostile archives: refused (4xx), nothing on the host, nothing in the sandbox


def _hostile(api, sid, data, host_paths, sandbox_paths, dir=None):
    r = api.put_files(sid, data, dir=dir)
    # First the containment (nothing written), then the status code.
    for p in host_paths:
        assert not os.path.lexists(p), f"host path {p} was created ({r})"
    for p in sandbox_paths:
        assert not in_sandbox_exists(api, sid, p), f"sandbox path {p} was created ({r})"
    assert r.status != 200, f"hostile archive accepted: {r}"
    assert 400 <= r.status < 500, f"hostile archive not refused with 4xx: {r}"
    return r


def test_hostile_absolute_path(api, sandbox):
    name = pwn_name()
    _hostile(api, sandbox, make_tar([("ok.txt", b"ok"), (f"/tmp/{name}", b"pwned")]),
             [f"/tmp/{name}"], [f"/tmp/{name}", "/workspace/ok.txt", f"/workspace/tmp/{name}"])


def test_hostile_dotdot_traversal(api, sandbox):
    name = pwn_name()
    _hostile(api, sandbox, make_tar([("ok.txt", b"ok"),
                                     (f"../../../../../../tmp/{name}", b"pwned")]),
             [f"/tmp/{name}"], [f"/tmp/{name}", "/workspace/ok.txt"])
    _hostile(api, sandbox, make_tar([(f"sub/../../{name}", b"pwned")]),
             [f"/{name}"], [f"/{name}", "/workspace/sub"])


def test_hostile_symlink_then_file_through_it(api, sandbox):
    name = pwn_name()
    data = make_tar([("evil", {"type": "sym", "target": "/"}),
                     (f"evil/tmp/{name}", b"pwned")])
    _hostile(api, sandbox, data, [f"/tmp/{name}"],
             [f"/tmp/{name}", "/workspace/evil"])
    data = make_tar([("up", {"type": "sym", "target": "../../../../../../tmp"}),
                     (f"up/{name}", b"pwned")])
    _hostile(api, sandbox, data, [f"/tmp/{name}"], [f"/tmp/{name}", "/workspace/up"])


def test_hostile_hardlink_to_etc_passwd(api, sandbox):
    before = hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest()
    _hostile(api, sandbox, make_tar([("pw", {"type": "hard", "target": "/etc/passwd"})]),
             [], ["/workspace/pw"])
    _hostile(api, sandbox, make_tar([("pw2", {"type": "hard",
                                              "target": "../../../../etc/passwd"})]),
             [], ["/workspace/pw2"])
    # A hard link whose data would then be written into the target.
    data = make_tar([("pw3", {"type": "hard", "target": "/etc/passwd"}),
                     ("pw3", b"root::0:0::/:/bin/sh\n")])
    _hostile(api, sandbox, data, [], ["/workspace/pw3"])
    assert hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest() == before


def test_hostile_preplanted_symlink_as_target_dir(api, sandbox):
    name = pwn_name()
    assert api.sh(sandbox, "ln -s / /workspace/evil").exit["exit_code"] == 0
    _hostile(api, sandbox, make_tar([(f"tmp/{name}", b"pwned"), (name, b"pwned")]),
             [f"/tmp/{name}", f"/{name}"], [f"/tmp/{name}", f"/{name}"],
             dir="/workspace/evil")


def test_hostile_preplanted_symlink_inside_archive_path(api, sandbox):
    name = pwn_name()
    assert api.sh(sandbox, "ln -s /tmp /workspace/lnk").exit["exit_code"] == 0
    _hostile(api, sandbox, make_tar([(f"lnk/{name}", b"pwned")]),
             [f"/tmp/{name}"], [f"/tmp/{name}"])


def test_hostile_preplanted_symlink_as_file(api, sandbox):
    # The sandbox points a name at a file; an upload of that name must not write through.
    host_file = f"/tmp/{pwn_name()}"
    with open(host_file, "w") as f:
        f.write("original\n")
    try:
        assert api.sh(sandbox, f"ln -s {host_file} /workspace/target; "
                               "ln -s /etc/hostname /workspace/t2").exit["exit_code"] == 0
        r = api.put_files(sandbox, make_tar([("target", b"pwned\n"), ("t2", b"pwned\n")]))
        assert open(host_file).read() == "original\n"
        out = api.sh(sandbox, "cat /etc/hostname")
        assert b"pwned" not in out.stdout
        assert 400 <= r.status < 500, f"write through a planted symlink not refused: {r}"
    finally:
        os.unlink(host_file)


def test_hostile_device_and_fifo_entries(api, sandbox):
    for kind in (tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            ti = tarfile.TarInfo("node")
            ti.type = kind
            ti.devmajor, ti.devminor = 1, 3
            tf.addfile(ti)
        _hostile(api, sandbox, buf.getvalue(), [], ["/workspace/node"])


# --------------------------------------------------------------------------
# volume


def _gzip_bomb(total, files=1):
    """A tar.gz of `files` files of zeros, `total` bytes in all, ~2 KiB per 16 MiB
    compressed: one deflated block of zeros repeated as concatenated gzip members
    (a valid gzip stream, made in a fraction of a second)."""
    block = 16 << 20
    member = gzip.compress(bytes(block), compresslevel=9, mtime=0)
    each = total // files
    assert each % block == 0
    out = []
    for i in range(files):
        hdr = tarfile.TarInfo(f"zeros{i}.bin")
        hdr.size = each
        hdr.mode = 0o644
        out.append(gzip.compress(hdr.tobuf(format=tarfile.GNU_FORMAT), mtime=0))
        out.append(member * (each // block))
    out.append(gzip.compress(bytes(1024), mtime=0))  # end-of-archive blocks
    return b"".join(out)


@pytest.mark.parametrize("files", [1, 2], ids=["one-2GiB-file", "two-1GiB-files"])
def test_gzip_bomb_refused_daemon_keeps_serving(api, sandbox, daemon, files):
    # 2 GiB of zeros. With one file the declared size is refused at its header;
    # with two 1 GiB files the first fits the 1 GiB default disk and is really
    # inflated before the second one goes over.
    bomb = _gzip_bomb(2 << 30, files)
    assert len(bomb) < 8 << 20
    t0 = time.monotonic()
    r = api.put_files(sandbox, bomb, timeout=120)
    took = time.monotonic() - t0
    assert r.status in (400, 413), r
    assert daemon.alive()
    assert api.health().status == 200
    for i in range(files):
        assert not in_sandbox_exists(api, sandbox, f"/workspace/zeros{i}.bin")
    assert api.run(sandbox, "/bin/echo", "alive").stdout == b"alive\n"
    assert took < 60, f"the bomb took {took:.1f}s to refuse"
    print(f"\nbomb ({files} files, {len(bomb)} bytes): refused with {r.status} in {took:.1f}s")


def test_upload_over_disk_limit(api, sandbox, daemon):
    # Ten 8 MiB files: more than the sandbox's 64 MiB disk allows in one archive.
    sid = sandbox
    # A 64 MiB disk makes the limit quick to reach.
    s2 = api.create_ok(resources={"disk": "64M"})["id"]
    try:
        block = bytes(8 << 20)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
            for i in range(10):
                ti = tarfile.TarInfo(f"f{i}.bin")
                ti.size = len(block)
                tf.addfile(ti, io.BytesIO(block))
        data = gzip.compress(buf.getvalue(), compresslevel=1, mtime=0)
        r = api.put_files(s2, data, timeout=120)
        assert r.status == 413, r
        assert api.run(s2, "/bin/sh", "-c", "ls /workspace | wc -l").stdout.strip() == b"0"
    finally:
        api.stop(s2)
    assert api.run(sid, "/bin/true").exit["exit_code"] == 0


@pytest.mark.parametrize("count", [100_000])
def test_many_tiny_files(api, sandbox, count):
    t_build = time.monotonic()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for i in range(count):
            data = b"%d\n" % i
            ti = tarfile.TarInfo(f"d{i // 1000:03d}/f{i:06d}")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    data = gzip.compress(buf.getvalue(), compresslevel=1, mtime=0)
    t_build = time.monotonic() - t_build
    t0 = time.monotonic()
    r = api.put_files(sandbox, data, dir="/workspace/many", timeout=180)
    took = time.monotonic() - t0
    print(f"\n{count} files: archive {len(data)} bytes built in {t_build:.1f}s, "
          f"upload+extract {took:.1f}s")
    assert r.status == 200, r
    out = api.sh(sandbox, "find /workspace/many -type f | wc -l; cat /workspace/many/d099/f099999",
                 http_timeout=120)
    assert out.stdout.split() == [str(count).encode(), str(count - 1).encode()]
    r = api.list_files(sandbox, "/workspace/many/d042")
    assert r.status == 200 and len(r.json["entries"]) == 1000, r
    assert took < 60, f"{count} tiny files took {took:.1f}s"
