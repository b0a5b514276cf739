"""A create's "image": only a directory under the daemon's `--images DIR`.

What must hold: a token cannot make any other host directory a sandbox's root
(image "/" gave a sandbox the host's whole file system to read); names and
absolute paths are resolved, symlinks and ".." included, and what leaves DIR is
refused with 400, nothing created; a daemon started without --images takes no
image at all; a good image becomes the sandbox's root.
"""
import os
import subprocess

import pytest

from .conftest import TOKENS, Api, Daemon, free_port, make_image_root, private_bindir


def _ids(api):
    return sorted(s["id"] for s in api.list())


@pytest.fixture
def image(daemon):
    """DIR/img: a root made of the host's /usr (bind-mounted read-only) and a marker."""
    root = daemon.images / "img"
    usr = root / "usr"
    make_image_root(root)
    (root / "marker").write_text("from-the-image\n")
    subprocess.run(["mount", "--bind", "-o", "ro", "/usr", str(usr)], check=True)
    try:
        yield "img"
    finally:
        subprocess.run(["umount", "-l", str(usr)], check=False)


def test_images_outside_the_images_dir_are_refused(daemon, api, tmp_path):
    escape = daemon.images / "escape"
    if not escape.is_symlink():
        escape.symlink_to("/")
    outside = tmp_path / "outside"
    outside.mkdir()
    before = _ids(api)
    for bad in ["/", "/etc", "/usr", str(outside), "..", "../..", "escape", "escape/etc",
                str(daemon.images), "nonexistent", "img/../../..", str(daemon.images / "..")]:
        r = api.create(image=bad)
        assert r.status == 400, (bad, r)
        assert "image" in r.json["error"]["message"], (bad, r)
    assert _ids(api) == before


def test_a_daemon_without_images_takes_none(tmp_path_factory):
    work = tmp_path_factory.mktemp("airlockd-noimages")
    d = Daemon(work, free_port(), private_bindir(work))
    d.start()
    try:
        cli = Api(d.port, TOKENS["A"])
        r = cli.create(image="/")
        assert r.status == 400 and "--images" in r.json["error"]["message"], r
        assert cli.list() == []
        assert cli.create_ok()["status"] == "running"  # without an image: as before
        for s in cli.list():
            cli.stop(s["id"])
    finally:
        d.term()


def test_an_image_under_the_images_dir_is_the_sandboxs_root(daemon, api, image):
    r = api.create(image=image)
    assert r.status == 201, r
    sid = r.json["sandbox"]["id"]
    try:
        out = api.sh(sid, "cat /marker; test -e /var/lib/airlock && echo HOST-VISIBLE; "
                     "test -e /root && echo HOST-ROOT; echo done")
        assert out.stdout == b"from-the-image\ndone\n", out
        assert api.sandbox(sid)["image"] == os.path.realpath(daemon.images / image)
    finally:
        api.stop(sid)
