"""The files API is not a confused deputy: it reads, lists and writes only what the
sandbox's own user could.

The daemon runs as host root; before, it resolved every path in the sandbox's root and
read or listed it as root, so a tenant could get through the API what no process in its
sandbox can: root-only files of the host runtime bound into every sandbox (a 0700
directory under /usr/share, 0711 helpers under /usr/lib) and the 0600 files of an
image. Each test below checks that the sandbox's user is refused a file from inside,
then that the API is refused it too, and that what the user can reach still works.
"""

import json
import os
import secrets
import subprocess

import pytest

from .conftest import make_image_root

PY = "/usr/bin/python3"


def _host_root_only(kind):
    """A path under /usr that others may not read (file) or list (dir), or None."""
    test = ["-type", "f", "!", "-perm", "-o+r"] if kind == "file" else \
        ["-type", "d", "!", "-perm", "-o+r"]
    r = subprocess.run(["find", "/usr", "-xdev", *test, "-print", "-quit"],
                       capture_output=True, text=True, timeout=60)
    return r.stdout.strip() or None


@pytest.fixture
def secret_image(daemon):
    """DIR/secrets: a root of the host's /usr plus root-only files with unique content."""
    root = daemon.images / "secrets"
    word = "image-secret-" + secrets.token_hex(8)
    make_image_root(root)
    f = root / "secret-file"
    f.write_text(word)
    os.chmod(f, 0o600)
    d = root / "secret-dir"
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o700)
    (d / "inner").write_text(word)
    x = root / "exec-only"  # 0711: a known name can be read, the directory not listed
    x.mkdir(exist_ok=True)
    os.chmod(x, 0o711)
    (x / "public").write_text("public\n")
    os.chmod(x / "public", 0o644)
    (x / "unlisted").write_text(word)
    os.chmod(x / "unlisted", 0o600)
    subprocess.run(["mount", "--bind", "-o", "ro", "/usr", str(root / "usr")], check=True)
    try:
        yield "secrets", word
    finally:
        subprocess.run(["umount", "-l", str(root / "usr")], check=False)


PROBE = r"""
import json, os, sys
res = {}
for p in sys.argv[1:]:
    try:
        if os.path.isdir(p):
            os.listdir(p)
        else:
            open(p, "rb").read(1)
        res[p] = 0
    except OSError as e:
        res[p] = e.errno
print(json.dumps(res))
"""


def probe_inside(api, sid, *paths):
    out = api.run(sid, PY, "-c", PROBE, *paths)
    assert out.exit["exit_code"] == 0, (out.stderr, out.exit)
    return json.loads(out.stdout)


def test_api_cannot_read_or_list_what_the_sandbox_user_cannot(api, make_sandbox, secret_image):
    image, word = secret_image
    sid = make_sandbox(image=image)
    denied = ["/secret-file", "/secret-dir", "/secret-dir/inner", "/exec-only",
              "/exec-only/unlisted"]
    seen = probe_inside(api, sid, *denied, "/exec-only/public")
    # the kernel refuses the sandbox's user each of them (EACCES), and allows the public one
    assert all(seen[p] == 13 for p in denied), seen
    assert seen["/exec-only/public"] == 0, seen
    for p in ("/secret-file", "/secret-dir/inner", "/exec-only/unlisted"):
        r = api.read_file(sid, p)
        assert r.status in (403, 404), (p, r)
        assert word.encode() not in r.data, (p, r)
    for p in ("/secret-dir", "/exec-only"):
        r = api.list_files(sid, p)
        assert r.status in (403, 404), (p, r)
        assert b"inner" not in r.data and b"unlisted" not in r.data, (p, r)
    # what the user may reach the API still gives
    r = api.read_file(sid, "/exec-only/public")
    assert r.status == 200 and r.data == b"public\n", r
    r = api.list_files(sid, "/")
    assert r.status == 200, r


def test_api_cannot_read_root_only_files_of_the_host_runtime(api, sandbox):
    found = {k: _host_root_only(k) for k in ("file", "dir")}
    found = {k: v for k, v in found.items() if v}
    if not found:
        pytest.skip("this host's /usr has no file or directory that others may not read")
    seen = probe_inside(api, sandbox, *found.values())
    for kind, p in found.items():
        assert seen[p] == 13, (p, seen)
        r = api.read_file(sandbox, p) if kind == "file" else api.list_files(sandbox, p)
        assert r.status in (403, 404), (kind, p, r)


def test_api_writes_only_where_the_user_may(api, sandbox):
    """The API writes as the sandbox user: into its workdir, yes, owned by it; nothing
    into a place of the runtime even where the daemon's old checks would let root."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        data = b"hello\n"
        info = tarfile.TarInfo("made-by-api.txt")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    r = api.put_files(sandbox, buf.getvalue())
    assert r.status in (200, 201, 204), r
    out = api.run(sandbox, "/bin/sh", "-c", "stat -c '%u %s' made-by-api.txt")
    assert out.stdout.split() == [b"1000", b"6"], out.stdout
