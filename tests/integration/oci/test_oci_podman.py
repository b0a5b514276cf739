"""podman --runtime airlock-oci (podman 4.3 and conmon from Debian): a private store in a
temporary directory, an image imported from a tar of the busybox root, no registry."""
import os
import shutil
import subprocess
import time
import uuid

import pytest

from .escape import assert_all_ok, script

IMAGE = "localhost/airlock-oci-test:1"


@pytest.fixture(scope="module")
def podman(tmp_path_factory, oci_bin, rootfs):
    if not shutil.which("podman") or not shutil.which("conmon"):
        pytest.skip("podman or conmon is not installed (scripts/setup installs them)")
    d = tmp_path_factory.mktemp("podman")
    base = ["podman", "--root", str(d / "store"), "--runroot", str(d / "run"),
            "--tmpdir", str(d / "tmp"), "--storage-driver", "vfs",
            "--cgroup-manager", "cgroupfs", "--events-backend", "file",
            "--runtime", oci_bin]
    # The runtime's state root through the environment, not --runtime-flag root=: podman
    # 4.3 leaves its runtime flags off the delete of `run --rm`'s clean-up (docs/oci.md).
    env = dict(os.environ, AIRLOCK_OCI_ROOT=str(d / "oci"))
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    imp = subprocess.run(base + ["import", "-", IMAGE], stdin=tar.stdout, capture_output=True,
                         timeout=60, env=env)
    tar.wait()
    if imp.returncode != 0:
        pytest.skip("podman cannot import an image here: %s" % imp.stderr.decode()[-300:])

    def run(args, timeout=60, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("env", env)
        return subprocess.run(base + args, capture_output=True, text=True, timeout=timeout,
                              **kw)
    yield run
    run(["rm", "--all", "--force"])
    subprocess.run(["umount", "-R", str(d / "run")], capture_output=True)
    shutil.rmtree(d, ignore_errors=True)


def prun(podman, opts, cmd):
    return podman(["run", "--rm", "--network", "none"] + opts + [IMAGE, "sh", "-c", cmd])


def test_exit_code_stdout_and_stderr(podman):
    r = prun(podman, [], "echo out; echo err >&2; exit 7")
    assert (r.returncode, r.stdout, r.stderr) == (7, "out\n", "err\n")


def test_env_workdir_and_user(podman):
    r = prun(podman, ["-e", "FOO=bar", "-w", "/tmp", "--user", "1234:5678"],
             "echo $FOO; pwd; id -u; id -g")
    assert r.stdout.split() == ["bar", "/tmp", "1234", "5678"], r.stderr


def test_a_terminal_through_the_console_socket(podman):
    r = prun(podman, ["-t"], "tty; echo done")
    assert r.returncode == 0, r.stderr
    assert "/dev/pts/" in r.stdout and "done" in r.stdout


def test_memory_limit_kills_with_137(podman):
    # /dev/shm's pages are charged to the container's memory cgroup: 100 MB > 32 MB.
    r = prun(podman, ["--memory", "32m"],
             "dd if=/dev/zero of=/dev/shm/x bs=1M count=100 2>/dev/null; echo dd=$?")
    # The kernel's OOM killer ends dd (or the whole container, PID 1 included).
    assert "dd=137" in r.stdout or r.returncode == 137, (r.returncode, r.stdout, r.stderr)


def test_pids_limit(podman):
    # The shell numbers each sleep it started; it dies at the first fork refused.
    r = prun(podman, ["--pids-limit", "8"], "for i in $(seq 20); do sleep 5 & echo $i; done")
    started = [int(x) for x in r.stdout.split()]
    assert 3 <= len(started) < 8, (r.stdout, r.stderr)


def test_escape_checks_hold_under_podman(podman, tmp_path):
    marker = tmp_path / ("marker-" + uuid.uuid4().hex)
    marker.write_text("x")
    r = prun(podman, [], script(str(marker), writable_root=True))
    assert_all_ok(r.stdout)
    r = prun(podman, ["--read-only"], script(str(marker)))
    assert_all_ok(r.stdout)


def test_podman_run_writes_its_root_and_the_image_never_changes(podman):
    from .test_oci_rootfs import tree_hash
    r = podman(["create", "--network", "none", IMAGE, "sh", "-c",
                "echo x > /etc/foo && cat /etc/foo && echo y >> /etc/passwd && rm /etc/group"])
    assert r.returncode == 0, r.stderr
    cid = r.stdout.strip()
    try:
        # podman itself makes the /etc/mtab link in the container's rootfs when it starts it.
        root = podman(["mount", cid]).stdout.strip()
        before = tree_hash(root, skip={"etc/mtab"})
        r = podman(["start", "-a", cid])
        assert (r.returncode, r.stdout) == (0, "x\n"), r.stderr
        root = podman(["mount", cid]).stdout.strip()
        assert tree_hash(root, skip={"etc/mtab"}) == before and not os.path.exists(root + "/etc/foo")
    finally:
        podman(["rm", "-f", cid])
    # Another container of the same image sees none of it.
    r = prun(podman, [], "cat /etc/foo || echo absent; grep -c . /etc/group")
    assert r.stdout.split() == ["absent", "1"], r.stderr


def test_podman_read_only_and_the_root_size_cap(podman):
    r = prun(podman, ["--read-only"], "echo x > /etc/foo")
    assert r.returncode == 1 and "Read-only file system" in r.stderr, r.stderr
    r = prun(podman, ["--annotation", "airlock.dev/root-size=4M"],
             "dd if=/dev/zero of=/etc/big bs=1M count=16 2>&1; echo dd=$?")
    assert "No space left on device" in r.stdout and "dd=1" in r.stdout, r.stdout


def test_podman_exec_of_what_cannot_run_says_why(podman):
    r = podman(["run", "-d", "--network", "none", IMAGE, "sleep", "1000"])
    assert r.returncode == 0, r.stderr
    cid = r.stdout.strip()
    try:
        r = podman(["exec", cid, "no-such-command"])
        assert r.returncode == 127, (r.returncode, r.stderr)
        assert 'airlock-oci: exec "no-such-command": No such file or directory' in r.stderr
        r = podman(["exec", cid, "/etc/passwd"])
        assert r.returncode == 126, (r.returncode, r.stderr)
        assert 'airlock-oci: exec "/etc/passwd": Permission denied' in r.stderr
    finally:
        podman(["rm", "-f", cid])


def test_podman_exec_with_and_without_a_terminal(podman):
    r = podman(["run", "-d", "--network", "none", IMAGE, "sleep", "1000"])
    assert r.returncode == 0, r.stderr
    cid = r.stdout.strip()
    try:
        r = podman(["exec", cid, "sh", "-c", "echo podman-exec; exit 6"])
        assert (r.returncode, r.stdout) == (6, "podman-exec\n"), r.stderr
        r = podman(["exec", "-t", cid, "tty"])
        assert r.returncode == 0 and "/dev/pts/" in r.stdout, r.stderr
    finally:
        podman(["rm", "-f", cid])


def test_the_policy_annotation_through_podman_gives_a_gateway_link(podman):
    # podman reads --annotation as CSV: the JSON's quotes are doubled inside a quoted field.
    r = podman(["run", "--rm", "--network", "none", "--annotation",
                '"airlock.dev/network-policy={""allow"": [""x.test""]}"', IMAGE, "sh", "-c",
                "cut -d: -f1 /proc/net/dev | tail -n +3"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["lo", "eth0"], r.stdout  # eth0: the link to its gateway


def test_podmans_own_network_is_joined_not_filtered(podman):
    # The engine made the namespace (netavark/CNI): airlock joins it, as docs/oci.md says.
    r = podman(["run", "--rm", IMAGE, "sh", "-c", "cut -d: -f1 /proc/net/dev | tail -n +3"])
    if r.returncode != 0 and "network" in r.stderr.lower():
        pytest.skip("podman's default network does not work here: %s" % r.stderr[-200:])
    assert r.returncode == 0, r.stderr
    assert "eth0" in r.stdout.split()
    r = podman(["run", "--rm", "--annotation",
                '"airlock.dev/network-policy={""allow"": [""x.test""]}"', IMAGE, "true"])
    assert r.returncode != 0 and "airlock gateway" in r.stderr, r.stderr


def oci_cgroups():
    return {e for e in os.listdir("/sys/fs/cgroup/pids/airlock") if e.startswith("oci-")} \
        if os.path.isdir("/sys/fs/cgroup/pids/airlock") else set()


def wait_for(cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_run_rm_leaves_no_cgroup(podman):
    """`podman run --rm` ends with podman's clean-up calling `delete --force ID` without the
    --runtime-flag options it gave create: with the root in AIRLOCK_OCI_ROOT that delete
    finds the container and removes its cgroups; with --runtime-flag root= alone it looked
    in the default root and every run left its cgroups behind (12 per pass of this file)."""
    before = oci_cgroups()
    r = prun(podman, [], "echo ran")
    assert r.returncode == 0 and r.stdout == "ran\n", (r.returncode, r.stderr[-500:])
    assert wait_for(lambda: oci_cgroups() <= before, timeout=10), oci_cgroups() - before
    assert podman(["ps", "--all", "--quiet"]).stdout.strip() == ""
