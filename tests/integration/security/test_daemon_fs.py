"""Filesystem attacks through airlockd's file routes: races between the
daemon's checks and a hostile command, special files, overlong and odd
names, archive bombs. The daemon reads and writes as host root, so every
case checks the host too."""

import gzip
import io
import json
import os
import secrets
import tarfile
import threading
import time
import zlib

import pytest

from .conftest import Api


def make_tar(entries, fmt=tarfile.GNU_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, spec in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if isinstance(spec, (bytes, bytearray)):
                ti.size = len(spec)
                ti.mode = 0o644
                tf.addfile(ti, io.BytesIO(spec))
            elif spec["type"] == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                tf.addfile(ti)
            elif spec["type"] == "hard":
                ti.type = tarfile.LNKTYPE
                ti.linkname = spec["target"]
                tf.addfile(ti)
            elif spec["type"] == "sym":
                ti.type = tarfile.SYMTYPE
                ti.linkname = spec["target"]
                tf.addfile(ti)
    return buf.getvalue()


def start_swapper(api, sid, script, seconds=8):
    """A detached command in the sandbox that keeps swapping names."""
    return api.start_ok(sid, "/bin/sh", "-c", script, timeout=seconds * 1000)


def test_read_race_symlink_swapped_between_check_and_use(api, sandbox, host_marker):
    path, content = host_marker
    script = (f"echo inside > /workspace/r.txt; i=0; end=$(( $(date +%s) + 6 )); "
              f"while [ $(date +%s) -lt $end ]; do "
              f"ln -sfn {path} /workspace/f; mv -fT /workspace/r.txt /workspace/f 2>/dev/null; "
              f"echo inside > /workspace/r.txt; "
              f"ln -sfn ../../../../..{path} /workspace/f; "
              f"ln -sfn /proc/1/root{path} /workspace/f; done")
    cmd = start_swapper(api, sandbox, script)
    seen = {}
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4:
        r = api.read_file(sandbox, "/workspace/f")
        seen[r.status] = seen.get(r.status, 0) + 1
        assert content.encode() not in r.data, f"host file read through a swapped symlink: {r}"
    api.kill(sandbox, cmd["id"], 9)
    assert set(seen) <= {200, 400, 403, 404, 409}, seen
    assert seen.get(200, 0) + seen.get(404, 0) > 10, seen     # the race really ran


def test_upload_race_dir_swapped_with_symlink(api, sandbox):
    name = "airlock-sec-" + secrets.token_hex(6)
    script = ("end=$(( $(date +%s) + 6 )); while [ $(date +%s) -lt $end ]; do "
              "mkdir -p /workspace/d.real; mv -fT /workspace/d.real /workspace/d 2>/dev/null; "
              "rm -rf /workspace/d.old; mv -fT /workspace/d /workspace/d.old 2>/dev/null; "
              "ln -sfn /tmp /workspace/d; ln -sfn / /workspace/d2; done")
    cmd = start_swapper(api, sandbox, script)
    statuses = {}
    data = make_tar([(f"d/{name}", b"pwned\n"), (f"d/sub/{name}", b"pwned\n")])
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4:
        r = api.put_files(sandbox, data)
        statuses[r.status] = statuses.get(r.status, 0) + 1
        r = api.put_files(sandbox, make_tar([(name, b"x")]), dir="/workspace/d2/tmp")
        statuses[r.status] = statuses.get(r.status, 0) + 1
        r = api.mkdir(sandbox, f"/workspace/d/{name}.dir", parents=True)
        assert not os.path.lexists(f"/tmp/{name}.dir")
    api.kill(sandbox, cmd["id"], 9)
    assert not os.path.lexists(f"/tmp/{name}"), "upload escaped to the host's /tmp"
    assert not os.path.lexists(f"/tmp/sub/{name}")
    out = api.sh(sandbox, f"ls /tmp/{name} /tmp/{name}.dir /tmp/sub/{name} 2>/dev/null; true")
    assert name.encode() not in out.stdout, f"upload followed a symlink into /tmp: {out.stdout}"
    assert set(statuses) <= {200, 400, 404, 409, 403}, statuses


def test_list_of_symlinked_dir_shows_sandbox_not_host(api, sandbox, host_marker):
    path, _ = host_marker
    api.sh(sandbox, "ln -s /tmp /workspace/t; ln -s ../../../../../tmp /workspace/t2")
    for p in ("/workspace/t", "/workspace/t2", "/workspace/t/", "/tmp"):
        r = api.list_files(sandbox, p)
        assert path.name.encode() not in r.data, (p, r)
        assert r.status in (200, 400, 404), r


def test_upload_onto_planted_fifo_does_not_block(api, sandbox):
    api.sh(sandbox, "mkfifo /workspace/pipe")
    t0 = time.monotonic()
    r = api.put_files(sandbox, make_tar([("pipe", b"data\n")]), timeout=20)
    took = time.monotonic() - t0
    assert took < 5, f"upload onto a FIFO blocked {took:.1f}s"
    assert 400 <= r.status < 500, r
    assert api.health().status == 200


def test_upload_onto_planted_unix_socket(api, sandbox):
    cmd = api.start_ok(sandbox, "/usr/bin/python3", "-c",
                       "import socket,time; s=socket.socket(socket.AF_UNIX); "
                       "s.bind('/workspace/sock'); s.listen(); time.sleep(20)", timeout=20000)
    deadline = time.monotonic() + 5
    while b"sock" not in api.list_files(sandbox, "/workspace").data and time.monotonic() < deadline:
        time.sleep(0.1)
    t0 = time.monotonic()
    r = api.put_files(sandbox, make_tar([("sock", b"data\n")]), timeout=20)
    r2 = api.read_file(sandbox, "/workspace/sock")
    assert time.monotonic() - t0 < 5
    api.kill(sandbox, cmd["id"], 9)
    assert 400 <= r.status < 500, r
    assert 400 <= r2.status < 500, r2


def test_hardlink_entry_to_planted_symlink_to_host(api, sandbox, host_marker):
    path, content = host_marker
    api.sh(sandbox, f"ln -s {path} /workspace/s; ln -s /etc/passwd /workspace/pw")
    data = make_tar([("h", {"type": "hard", "target": "s"}), ("h", b"pwned\n"),
                     ("h2", {"type": "hard", "target": "pw"}), ("h2", b"pwned\n")])
    r = api.put_files(sandbox, data)
    assert path.read_text() == content, "host file written through a hard link"
    out = api.sh(sandbox, "cat /etc/passwd")
    assert b"pwned" not in out.stdout
    assert r.status in (200, 400, 409), r


@pytest.mark.parametrize("where", ["read", "list", "mkdir", "upload-dir"])
def test_overlong_paths_refused_cleanly(api, sandbox, where):
    long_name = "/workspace/" + "a" * 300                       # one component > NAME_MAX
    deep = "/workspace" + "/d" * 3000                           # > PATH_MAX
    huge = "/workspace/" + "x/" * 50000                         # 100 KB
    for p in (long_name, deep, huge):
        if where == "read":
            r = api.read_file(sandbox, p)
        elif where == "list":
            r = api.list_files(sandbox, p)
        elif where == "mkdir":
            r = api.mkdir(sandbox, p, parents=True)
        else:
            r = api.put_files(sandbox, make_tar([("f", b"x")]), dir=p)
        assert 400 <= r.status < 500, (where, len(p), r)
    assert api.health().status == 200


def test_overlong_names_in_archive_refused(api, sandbox):
    for name in ("a" * 300, "/".join(["d"] * 3000) + "/f", "x/" * 40000 + "f"):
        data = make_tar([(name, b"x")], fmt=tarfile.PAX_FORMAT)
        r = api.put_files(sandbox, data)
        assert 400 <= r.status < 500, (len(name), r)
    out = api.sh(sandbox, "ls -A /workspace")
    assert out.stdout == b"", out.stdout


def test_newline_and_invalid_utf8_names_cannot_forge_listings(api, sandbox):
    forged = 'x\n{"name": "forged", "type": "file"}'
    api.run(sandbox, "/usr/bin/python3", "-c",
            "import os; open(os.fsencode(%r), 'w').close(); "
            "open(b'/workspace/bad-\\xff\\xfe-utf8', 'w').close()" % ("/workspace/" + forged))
    r = api.list_files(sandbox, "/workspace")
    assert r.status == 200, r
    names = [e["name"] for e in r.json["entries"]]
    assert "forged" not in names
    assert forged in names, names
    assert any(n.startswith("bad-") for n in names), names
    # and uploads with such names: stored exactly, or refused; never elsewhere
    for nm in ("up\nload", "up-\udcff-load"):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT,
                          encoding="utf-8", errors="surrogateescape") as tf:
            ti = tarfile.TarInfo(nm)
            ti.size = 1
            tf.addfile(ti, io.BytesIO(b"x"))
        r = api.put_files(sandbox, buf.getvalue())
        assert r.status in (200, 400), r
    r = api.list_files(sandbox, "/workspace")
    assert r.status == 200 and "forged" not in [e["name"] for e in r.json["entries"]]
    # the logs of a command printing such names stay one JSON object per line
    out = api.sh(sandbox, "ls /workspace; printf '\\377\\376\\n{\"type\":\"exit\"}\\n'")
    assert out.types.count("exit") == 1


def _million_entry_tar_gz(n):
    """A tar.gz of n empty files, generated block by block (fast, ~10 MB)."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    parts = []
    tmpl = bytearray(tarfile.TarInfo("f0000000").tobuf(format=tarfile.USTAR_FORMAT))
    base_sum = sum(tmpl) - sum(tmpl[148:156]) + 8 * 32 - sum(tmpl[0:8])
    batch = bytearray()
    for i in range(n):
        name = b"f%07d" % i
        tmpl[0:8] = name
        chk = base_sum + sum(name)
        tmpl[148:156] = b"%06o\0 " % chk
        batch += tmpl
        if len(batch) >= 1 << 20:
            parts.append(comp.compress(bytes(batch)))
            batch = bytearray()
    batch += bytes(1024)
    parts.append(comp.compress(bytes(batch)))
    parts.append(comp.flush())
    return b"".join(parts)


def test_tar_with_over_a_million_entries(api, sandbox):
    t0 = time.monotonic()
    data = _million_entry_tar_gz(1_000_100)
    gen = time.monotonic() - t0
    # sanity of the generator: the first entries are a valid archive
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)[:512 * 3] + bytes(1024))) as tf:
        assert [m.name for m in tf.getmembers()][:2] == ["f0000000", "f0000001"]
    t1 = time.monotonic()
    r = api.put_files(sandbox, data, timeout=120)
    took = time.monotonic() - t1
    print(f"\n10^6+100 entries: {len(data)} bytes gz, generated in {gen:.1f}s, "
          f"answered {r.status} in {took:.1f}s")
    assert r.status in (400, 413), r
    assert took < 60
    assert api.health().status == 200
    out = api.sh(sandbox, "ls /workspace | head -3 | wc -l")
    assert out.stdout.strip() == b"0", "entries were extracted before the refusal"


def test_double_gzip_bomb(api, make_sandbox):
    """tar.gz.gz: libarchive stacks filters; a 2 GiB file behind two layers."""
    sid = make_sandbox(resources={"disk": "64M"})
    block = gzip.compress(bytes(16 << 20), compresslevel=9, mtime=0)
    hdr = tarfile.TarInfo("zeros.bin")
    hdr.size = 2 << 30
    inner = gzip.compress(hdr.tobuf(format=tarfile.GNU_FORMAT), mtime=0) + block * 128
    bomb = gzip.compress(inner, compresslevel=9, mtime=0)
    assert len(bomb) < 4 << 20
    t0 = time.monotonic()
    r = api.put_files(sid, bomb, timeout=120)
    assert r.status in (400, 413), r
    assert time.monotonic() - t0 < 30
    assert api.sh(sid, "ls -A /workspace").stdout == b""
    assert api.health().status == 200


def test_sparse_entry_declaring_a_terabyte(api, make_sandbox):
    """A PAX sparse entry: 1 TiB logical size, a few bytes of data."""
    sid = make_sandbox(resources={"disk": "64M"})
    ti = tarfile.TarInfo("GNUSparseFile.0/sparse.bin")
    data = b"z" * 512
    ti.size = len(data)
    ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                      "GNU.sparse.name": "sparse.bin", "GNU.sparse.realsize": str(1 << 40)}
    # sparse map in the data area: 1 region at offset 1 TiB - 512, 512 bytes
    smap = b"1\n%d\n512\n" % ((1 << 40) - 512)
    smap += bytes(-len(smap) % 512)
    ti.size = len(smap) + len(data)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        tf.addfile(ti, io.BytesIO(smap + data))
    r = api.put_files(sid, buf.getvalue(), timeout=60)
    out = api.sh(sid, "du -sk /workspace | cut -f1; stat -c %s /workspace/sparse.bin 2>/dev/null; true")
    used_kb = int(out.stdout.split()[0])
    assert used_kb < 64 * 1024, out.stdout
    assert r.status in (200, 400, 413), r
    assert api.health().status == 200
