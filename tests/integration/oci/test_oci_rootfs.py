"""root.readonly false: a writable root (src/jail/oci_root.c), an overlay of the bundle's
rootfs and a tmpfs private to the container. The image itself is never written: each test
that writes hashes the bundle's rootfs on the host before and after."""
import hashlib
import json
import os
import subprocess
import uuid

from .escape import assert_all_ok, script


def tree_hash(root, skip=()):
    """Every path, its type, mode, owner, size, link target and content under root (but the
    relative paths in skip)."""
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(d, name)
            if os.path.relpath(p, root) in skip:
                continue
            st = os.lstat(p)
            h.update(("%s %o %d %d %d\n" % (os.path.relpath(p, root), st.st_mode, st.st_uid,
                                            st.st_gid, st.st_size)).encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def writable(bundle, args, annotations=None, **kw):
    b = bundle(args, annotations=annotations, **kw)
    cfg = json.loads((b / "config.json").read_text())
    cfg["root"]["readonly"] = False
    (b / "config.json").write_text(json.dumps(cfg))
    return b


def test_a_writable_root_takes_writes_and_the_image_never_changes(bundle, lifecycle, rootfs):
    before = tree_hash(rootfs)
    r = lifecycle(writable(bundle, ["sh", "-c",
                                    "echo hello > /etc/foo && cat /etc/foo && "
                                    "echo more >> /etc/passwd && rm /etc/group && "
                                    "mkdir /mnt/d && touch /bin/new && "
                                    "test ! -e /etc/group && stat -c '%u %g' /etc/passwd && "
                                    "tail -1 /etc/passwd"]))
    assert r.create_rc == 0, r.create_err
    assert (r.status, r.out.split()) == (0, ["hello", "0", "0", "more"]), (r.out, r.err)
    assert tree_hash(rootfs) == before
    assert not (rootfs / "etc" / "foo").exists() and (rootfs / "etc" / "group").exists()


def test_two_containers_of_one_image_do_not_see_each_others_writes(bundle, lifecycle, rootfs):
    before = tree_hash(rootfs)
    first = lifecycle(writable(bundle, ["sh", "-c", "echo one > /etc/mark; cat /etc/mark"]))
    second = lifecycle(writable(bundle, ["sh", "-c", "cat /etc/mark || echo absent"]))
    assert (first.status, first.out) == (0, "one\n"), first.err
    assert second.out == "absent\n", second.err
    assert tree_hash(rootfs) == before


def test_the_writable_roots_size_is_capped(bundle, lifecycle, rootfs):
    before = tree_hash(rootfs)
    r = lifecycle(writable(bundle, ["sh", "-c",
                                    "dd if=/dev/zero of=/etc/big bs=1M count=16; echo dd=$?"],
                           annotations={"airlock.dev/root-size": "4M"}))
    assert "dd=1" in r.out and "No space left on device" in r.err, (r.out, r.err)
    assert tree_hash(rootfs) == before


def test_a_bad_root_size_fails_create_naming_the_annotation(bundle, lifecycle):
    r = lifecycle(writable(bundle, ["true"], annotations={"airlock.dev/root-size": "lots"}))
    assert r.create_rc != 0 and "airlock.dev/root-size" in r.create_err


def test_a_read_only_root_stays_read_only(bundle, lifecycle, rootfs):
    r = lifecycle(bundle(["sh", "-c", "echo x > /etc/foo; echo rc=$?"]))
    assert "rc=1" in r.out and "Read-only file system" in r.err, (r.out, r.err)
    assert not (rootfs / "etc" / "foo").exists()


def test_escape_checks_hold_with_a_writable_root(bundle, lifecycle, rootfs, tmp_path):
    before = tree_hash(rootfs)
    marker = tmp_path / "host-only-marker"
    marker.write_text("x")
    r = lifecycle(writable(bundle, ["sh", "-c", script(str(marker), writable_root=True)]))
    assert_all_ok(r.out)
    assert tree_hash(rootfs) == before


def test_the_writable_root_is_nosuid_and_owns_nothing_of_the_host(bundle, lifecycle, rootfs,
                                                                 tmp_path):
    # A symlink in the image to a host path resolves inside the container's root: a write
    # through it never reaches the host. The overlay and its binds are nosuid and nodev.
    host = tmp_path / ("host-" + uuid.uuid4().hex)
    host.mkdir()
    img = rootfs.parent / ("img-" + uuid.uuid4().hex[:8])
    os.system("cp -a %s %s" % (rootfs, img))
    os.symlink(str(host), img / "escape")
    os.mkdir(img / ".airlock-root")
    b = writable(bundle, ["sh", "-c",
                          "echo x > /escape/f; echo rc=$?; ls -a /.airlock-root | wc -l; "
                          "grep -E ' /(etc|bin) ' /proc/self/mounts"])
    cfg = json.loads((b / "config.json").read_text())
    cfg["root"]["path"] = str(img)
    (b / "config.json").write_text(json.dumps(cfg))
    r = lifecycle(b)
    assert "rc=1" in r.out and os.listdir(host) == [], (r.out, r.err)
    assert "\n2\n" in r.out or "ls: /.airlock-root" in r.err, r.out  # the image's, empty
    mounts = [line for line in r.out.splitlines() if line.startswith("overlay ")]
    assert len(mounts) == 2 and all("nosuid" in m and "nodev" in m and " rw," in m
                                    for m in mounts), r.out


def test_an_engines_overlay_image_is_layered_by_its_layers(bundle, lifecycle, rootfs, tmp_path):
    # podman's overlay driver and containerd's snapshotter give an overlay as the rootfs,
    # which cannot be idmapped itself: its upper and lower layers are, whiteouts and all.
    # Two lowers, and a space in the layers' paths (escaped in mountinfo).
    d = tmp_path / "engine dir"
    for sub in ("upper", "work", "merged", "l2/etc"):
        (d / sub).mkdir(parents=True)
    (d / "l2" / "etc" / "l2").write_text("second layer\n")
    assert subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                           "lowerdir=%s:%s,upperdir=%s,workdir=%s" % (
                               d / "l2", rootfs, d / "upper", d / "work"),
                           str(d / "merged")]).returncode == 0
    try:
        (d / "merged" / "etc" / "engine").write_text("from the engine\n")
        os.unlink(d / "merged" / "etc" / "group")  # a whiteout in the engine's upper
        before = (tree_hash(rootfs), tree_hash(d / "upper"), tree_hash(d / "l2"))
        b = writable(bundle, ["sh", "-c", "cat /etc/engine /etc/l2; test -e /etc/group || echo gone; "
                              "echo x > /etc/foo && cat /etc/foo"])
        cfg = json.loads((b / "config.json").read_text())
        cfg["root"]["path"] = str(d / "merged")
        (b / "config.json").write_text(json.dumps(cfg))
        r = lifecycle(b)
        assert r.out.split("\n") == ["from the engine", "second layer", "gone", "x", ""], (r.out, r.err,
                                                                           r.create_err)
        assert (tree_hash(rootfs), tree_hash(d / "upper"), tree_hash(d / "l2")) == before
    finally:
        subprocess.run(["umount", str(d / "merged")])
