"""containerd 1.6 (Debian) with its stock runc shim (io.containerd.runc.v2) running
airlock-oci: a private containerd per module (its own root, state, socket and config in a
temporary directory; stopped and removed even when a test fails), driven by ctr. The
config also carries the CRI runtime handler of docs/kubernetes.md, which containerd must
accept."""
import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from .escape import assert_all_ok, script

CONFIG = """version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/c.sock"
[ttrpc]
  address = "{d}/c.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "airlock"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.airlock]
  runtime_type = "io.containerd.runc.v2"
  pod_annotations = ["airlock.dev/*"]
  container_annotations = ["airlock.dev/*"]
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.airlock.options]
  BinaryName = "{oci}"
"""


@pytest.fixture(scope="module")
def ctr(tmp_path_factory, oci_bin, rootfs):
    if not shutil.which("containerd") or not shutil.which("ctr") or \
            not shutil.which("containerd-shim-runc-v2"):
        pytest.skip("containerd is not installed (scripts/setup installs it)")
    d = tmp_path_factory.mktemp("containerd")
    (d / "config.toml").write_text(CONFIG.format(d=d, oci=oci_bin))
    log = open(d / "log", "w")
    proc = subprocess.Popen(["containerd", "--config", str(d / "config.toml")],
                            stdout=log, stderr=log, start_new_session=True)
    sock = d / "c.sock"
    deadline = time.monotonic() + 20
    while not sock.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)

    def run(args, timeout=60, **kw):
        return subprocess.run(["ctr", "-a", str(sock)] + args, capture_output=True,
                              text=True, timeout=timeout, **kw)
    run.dir = d
    run.oci = oci_bin
    run.rootfs = str(rootfs)
    try:
        if not sock.exists():
            pytest.skip("containerd did not start here: %s" % (d / "log").read_text()[-400:])
        yield run
    finally:
        for t in run(["tasks", "ls", "-q"]).stdout.split():
            run(["tasks", "kill", "-s", "KILL", t])
        for c in run(["containers", "ls", "-q"]).stdout.split():
            run(["tasks", "delete", "--force", c])
            run(["containers", "delete", c])
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        subprocess.run(["umount", "-R", str(d / "state")], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def ctr_run(ctr, args, extra=()):
    cid = "t-" + uuid.uuid4().hex[:10]
    return ctr(["run", "--rm", "--rootfs", "--runtime", "io.containerd.runc.v2",
                "--runc-binary", ctr.oci] + list(extra) + [ctr.rootfs, cid] + args)


def test_ctr_run_with_the_runc_shim_and_runc_binary(ctr):
    r = ctr_run(ctr, ["sh", "-c", "echo out; echo err >&2; exit 5"])
    assert (r.returncode, r.stdout, r.stderr) == (5, "out\n", "err\n")


def test_containerd_accepts_the_cri_runtime_handler(ctr):
    r = ctr(["plugins", "ls"])
    cri = [line for line in r.stdout.splitlines() if "io.containerd.grpc.v1" in line and
           " cri " in line + " "]
    assert cri and cri[0].split()[-1] == "ok", r.stdout


def test_an_error_reaches_ctr_from_the_log(ctr):
    r = ctr_run(ctr, ["sh"], extra=["--with-ns", "network:/proc/%d/ns/net" % os.getpid()])
    assert r.returncode != 0 and "it is the host's" in r.stderr, r.stderr


def test_a_pod_pair_under_containerd(ctr):
    pause = "p-" + uuid.uuid4().hex[:10]
    r = ctr(["run", "-d", "--rootfs", "--runc-binary", ctr.oci, ctr.rootfs, pause,
             "sleep", "1000"])
    assert r.returncode == 0, r.stderr
    pid = int(ctr(["tasks", "ls"]).stdout.split(pause)[1].split()[0])
    r = ctr_run(ctr, ["sh", "-c", "readlink /proc/self/ns/net; readlink /proc/self/ns/uts"],
                extra=["--with-ns", "network:/proc/%d/ns/net" % pid,
                       "--with-ns", "uts:/proc/%d/ns/uts" % pid])
    assert r.stdout.split() == [os.readlink("/proc/%d/ns/net" % pid),
                                os.readlink("/proc/%d/ns/uts" % pid)], r.stderr
    ctr(["tasks", "kill", "-s", "KILL", pause])
    time.sleep(0.2)
    ctr(["tasks", "delete", "--force", pause])
    ctr(["containers", "delete", pause])


def test_escape_checks_hold_under_containerd(ctr, tmp_path):
    marker = tmp_path / ("marker-" + uuid.uuid4().hex)
    marker.write_text("x")
    r = ctr_run(ctr, ["sh", "-c", script(str(marker), writable_root=True)])
    assert_all_ok(r.stdout)
    r = ctr_run(ctr, ["sh", "-c", script(str(marker))], extra=["--read-only"])
    assert_all_ok(r.stdout)


def test_ctr_run_writes_its_root_and_the_image_never_changes(ctr):
    from .test_oci_rootfs import tree_hash
    before = tree_hash(ctr.rootfs)
    r = ctr_run(ctr, ["sh", "-c", "echo x > /etc/foo && cat /etc/foo && rm /etc/group"])
    assert (r.returncode, r.stdout) == (0, "x\n"), r.stderr
    r = ctr_run(ctr, ["sh", "-c", "cat /etc/foo || echo absent; test -e /etc/group"])
    assert (r.returncode, r.stdout) == (0, "absent\n"), r.stderr
    assert tree_hash(ctr.rootfs) == before


def test_ctr_task_exec(ctr):
    cid = "x-" + uuid.uuid4().hex[:10]
    r = ctr(["run", "-d", "--rootfs", "--runc-binary", ctr.oci, ctr.rootfs, cid,
             "sleep", "1000"])
    assert r.returncode == 0, r.stderr
    try:
        r = ctr(["task", "exec", "--exec-id", "e1", cid, "sh", "-c", "echo ctr-exec; exit 3"])
        assert (r.returncode, r.stdout) == (3, "ctr-exec\n"), r.stderr
        r = ctr(["task", "exec", "--exec-id", "e2", cid, "no-such-command"])
        assert r.returncode == 127, (r.returncode, r.stderr)
        assert 'airlock-oci: exec "no-such-command": No such file or directory' in r.stderr
        r = ctr(["task", "exec", "--exec-id", "e3", cid, "/etc/passwd"])
        assert r.returncode == 126, (r.returncode, r.stderr)
        assert 'airlock-oci: exec "/etc/passwd": Permission denied' in r.stderr
    finally:
        ctr(["tasks", "kill", "-s", "KILL", cid])
        time.sleep(0.2)
        ctr(["tasks", "delete", "--force", cid])
        ctr(["containers", "delete", cid])
