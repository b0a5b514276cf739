"""Fixtures for airlock-oci, the OCI runtime (docs/oci.md).

oci_bin      airlock-oci next to AIRLOCK_BIN (so the ASan build tests its own)
rootfs       a small image root: busybox-static and a few /etc files (session-wide)
bundle(args, **kw)  a bundle directory whose config.json runs args (spec() below)
lifecycle(bundle, runtime=oci_bin) -> Result: create/start/wait/delete as a shim does
             (reaper.py), with .status, .out, .err, .create_err
oci(args)    runs airlock-oci --root ROOT args, returns CompletedProcess (text)
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import types
import uuid

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
AIRLOCK_BIN = os.environ.get("AIRLOCK_BIN", str(REPO / "build" / "airlock"))
OCI_BIN = str(pathlib.Path(AIRLOCK_BIN).resolve().parent / "airlock-oci")
BUSYBOX = "/bin/busybox"
APPLETS = ["sh", "ls", "cat", "echo", "id", "hostname", "sleep", "true", "false", "ps",
           "mount", "grep", "wc", "env", "pwd", "mkdir", "head", "tail", "readlink", "mknod",
           "unshare", "nc", "touch", "dd", "seq", "kill", "stat", "umount", "chroot", "test",
           "cut", "tty"]


def spec(args, rootfs, cwd="/", env=None, uid=0, gid=0, terminal=False, mounts=None,
         namespaces=None, annotations=None, resources=None, seccomp=None, caps=None,
         hostname="oci-test"):
    """A config.json like `runc spec` writes, for args."""
    caps = caps if caps is not None else [
        "CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_CHOWN", "CAP_SETUID",
        "CAP_SETGID", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_SYS_ADMIN"]
    doc = {
        "ociVersion": "1.0.2-dev",
        "process": {
            "terminal": terminal, "user": {"uid": uid, "gid": gid}, "args": args,
            "env": env or ["PATH=/bin", "TERM=xterm"], "cwd": cwd,
            "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": True},
        "root": {"path": str(rootfs), "readonly": True},
        "hostname": hostname,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
        ] + (mounts or []),
        "annotations": annotations or {},
        "linux": {
            "resources": resources or {"devices": [{"allow": False, "access": "rwm"}]},
            "namespaces": namespaces or [{"type": t} for t in
                                         ("pid", "network", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/kcore", "/proc/keys"],
            "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger"]},
    }
    if seccomp:
        doc["linux"]["seccomp"] = seccomp
    return doc


@pytest.fixture(scope="session")
def oci_bin():
    if not os.path.exists(OCI_BIN):
        pytest.skip("airlock-oci is not built next to %s" % AIRLOCK_BIN)
    return OCI_BIN


@pytest.fixture(scope="session")
def rootfs(tmp_path_factory):
    if not os.path.exists(BUSYBOX):
        pytest.skip("busybox-static is not installed (scripts/setup installs it)")
    root = tmp_path_factory.mktemp("oci-image") / "rootfs"
    for d in ("bin", "etc", "tmp", "proc", "dev", "sys", "root", "mnt"):
        (root / d).mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for a in APPLETS:
        os.symlink("busybox", root / "bin" / a)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    for f in ("hosts", "hostname", "resolv.conf"):
        (root / "etc" / f).write_text("")
    return root


@pytest.fixture
def state_root(tmp_path):
    root = tmp_path / "state"
    yield str(root)
    # Nothing may outlive a test: every container left is deleted by force.
    if root.exists():
        for d in root.iterdir():
            if not d.name.startswith("."):
                subprocess.run([OCI_BIN, "--root", str(root), "delete", "--force", d.name],
                               capture_output=True, timeout=30)


@pytest.fixture
def oci(oci_bin, state_root):
    def run(args, **kw):
        kw.setdefault("timeout", 30)
        if args[0] != "create":
            return subprocess.run([oci_bin, "--root", state_root] + list(args), text=True,
                                  capture_output=True, **kw)
        # A container's stdio is create's: files, not pipes that it would hold open.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.run([oci_bin, "--root", state_root] + list(args),
                               stdin=subprocess.DEVNULL, stdout=out, stderr=err, **kw)
            err.seek(0)
            p.stderr = err.read().decode(errors="replace")
            return p
    run.root = state_root
    return run


@pytest.fixture
def bundle(tmp_path, rootfs):
    def make(args, **kw):
        b = tmp_path / ("bundle-" + uuid.uuid4().hex[:8])
        b.mkdir()
        (b / "config.json").write_text(json.dumps(spec(args, rootfs, **kw)))
        return b
    return make


@pytest.fixture
def lifecycle(tmp_path, oci_bin, state_root):
    def run(b, runtime=None, root=None, cid=None, timeout=60):
        cid = cid or "t-" + uuid.uuid4().hex[:12]
        res = tmp_path / (cid + ".json")
        p = subprocess.run([sys.executable, str(HERE / "reaper.py"), str(res),
                            runtime or oci_bin, root or state_root, str(b), cid],
                           capture_output=True, timeout=timeout)
        r = json.loads(res.read_text())
        return types.SimpleNamespace(status=r.get("status"), out=p.stdout.decode(),
                                     err=p.stderr.decode(), create_rc=r["create_rc"],
                                     create_err=r["create_err"], raw=r)
    return run
