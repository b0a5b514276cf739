"""A Vercel create's `runtime` (docs/sources.md, "Runtimes"): the image of that name under
`airlock serve --images DIR`, with a clear error when the daemon has none of that name.

Run: /usr/bin/python3 -m pytest tests/sdk/test_runtimes.py -v   (root: it bind-mounts /usr)
"""

import os
import subprocess
import tempfile

import pytest

from test_sdk import Client, daemon_proc, ndjson_output

IMAGES = tempfile.mkdtemp(prefix="airlock-images-")


def make_image(name, marker):
    """IMAGES/name: the usual directories, merged-usr links, /etc/passwd, the host's /usr
    bind-mounted read-only, and a marker file."""
    root = os.path.join(IMAGES, name)
    for d in ("usr", "etc", "tmp", "proc", "dev", "workspace"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        if not os.path.islink(os.path.join(root, link)):
            os.symlink(f"usr/{link}", os.path.join(root, link))
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/workspace:/bin/sh\n")
    with open(os.path.join(root, "marker"), "w") as f:
        f.write(marker)
    subprocess.run(["mount", "--bind", "-o", "ro", "/usr", os.path.join(root, "usr")],
                   check=True)
    return os.path.join(root, "usr")


@pytest.fixture(scope="module")
def daemon():
    usr = make_image("python3.13", "the python3.13 image\n")
    try:
        yield from daemon_proc("--images", IMAGES)
    finally:
        subprocess.run(["umount", "-l", usr], check=False)


@pytest.fixture
def api(daemon):
    return Client(daemon, "A")


def test_runtime_names_an_image(api):
    r = api.req("POST", "/v3/sandboxes", {"projectId": "p", "runtime": "python3.13",
                                          "timeout": 60000})
    assert r.status == 200, r
    sid = r.json["session"]["id"]
    try:
        _, lines = api.run(sid, "cat", ["/marker"])
        assert ndjson_output(lines, "stdout") == "the python3.13 image\n"
    finally:
        api.req("POST", api.ses(sid, "/stop"))


def test_absent_runtime_is_a_clear_error(api):
    r = api.req("POST", "/v3/sandboxes", {"projectId": "p", "runtime": "node22"})
    assert r.status == 400, r
    msg = r.json["error"]["message"]
    assert "runtime 'node22'" in msg and "--images" in msg, msg


def test_bad_runtime_names_are_refused(api):
    for rt in ("", "../etc", "/usr", "Node22", "a" * 65):
        r = api.req("POST", "/v3/sandboxes", {"projectId": "p", "runtime": rt})
        assert r.status == 400, (rt, r)
