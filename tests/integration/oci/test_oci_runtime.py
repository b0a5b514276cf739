"""airlock-oci driven directly, as containerd's shim drives it (reaper.py plays the shim):
the lifecycle, the state document, signals, the error strings engines match, what of
config.json is honoured and what is refused (docs/oci.md)."""
import json
import os
import shutil
import subprocess
import time

import pytest


def wait_status(oci, cid, want, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = json.loads(oci(["state", cid]).stdout)
        if st["status"] == want:
            return st
        time.sleep(0.02)
    raise AssertionError("%s never became %s (last %s)" % (cid, want, st["status"]))


def gone(pid, timeout=5):
    """pid has exited (a zombie left for whoever reaps it counts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = open("/proc/%d/stat" % pid).read()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def test_exit_status_stdout_stderr_are_the_workloads(bundle, lifecycle):
    r = lifecycle(bundle(["sh", "-c", "echo out; echo err >&2; exit 3"]))
    assert r.create_rc == 0, r.create_err
    assert (r.status, r.out, r.err) == (3, "out\n", "err\n")


def test_a_signal_death_is_128_plus_the_signal(bundle, lifecycle):
    r = lifecycle(bundle(["sh", "-c", "kill -9 $$"]))
    assert r.status == 128 + 9


def test_command_not_found_is_127_and_says_why(bundle, lifecycle):
    r = lifecycle(bundle(["no-such-command"]))
    assert r.status == 127
    assert r.err == 'airlock-oci: exec "no-such-command": No such file or directory\n', r.err
    r = lifecycle(bundle(["/etc/passwd"]))
    assert (r.status, r.err) == (126, 'airlock-oci: exec "/etc/passwd": Permission denied\n')


def test_env_cwd_user_groups_and_hostname_come_from_config(bundle, lifecycle):
    b = bundle(["sh", "-c", "echo $FOO; pwd; id -u; id -g; id -G; hostname"],
               env=["PATH=/bin", "FOO=bar"], cwd="/tmp", uid=1234, gid=5678)
    cfg = json.loads((b / "config.json").read_text())
    cfg["process"]["user"]["additionalGids"] = [42]
    (b / "config.json").write_text(json.dumps(cfg))
    r = lifecycle(b)
    assert r.out.split("\n")[:6] == ["bar", "/tmp", "1234", "5678", "5678 42", "oci-test"]


def test_state_goes_created_running_stopped_and_delete_forgets(oci, bundle, tmp_path):
    b = bundle(["sleep", "1000"])
    pidf = tmp_path / "pid"
    p = oci(["create", "--bundle", str(b), "--pid-file", str(pidf), "c1"])
    assert p.returncode == 0, p.stderr
    st = json.loads(oci(["state", "c1"]).stdout)
    assert st["status"] == "created" and st["pid"] == int(pidf.read_text()) > 0
    assert set(st) >= {"ociVersion", "id", "status", "pid", "bundle", "annotations"}
    assert st["bundle"] == str(b)
    assert oci(["start", "c1"]).returncode == 0
    assert json.loads(oci(["state", "c1"]).stdout)["status"] == "running"
    assert oci(["start", "c1"]).returncode != 0  # not twice
    ps = json.loads(oci(["ps", "--format", "json", "c1"]).stdout)
    assert ps[0] == st["pid"] and len(ps) == 2  # PID 1 and sleep
    assert oci(["kill", "c1", "TERM"]).returncode == 0  # forwarded to the workload
    wait_status(oci, "c1", "stopped")
    assert oci(["delete", "c1"]).returncode == 0
    r = oci(["state", "c1"])
    assert r.returncode != 0 and "does not exist" in r.stderr


@pytest.mark.parametrize("sig", ["KILL", "SIGKILL", "9"])
def test_kill_takes_names_and_numbers(oci, bundle, sig):
    assert oci(["create", "--bundle", str(bundle(["sleep", "1000"])), "k"]).returncode == 0
    assert oci(["start", "k"]).returncode == 0
    assert oci(["kill", "k", sig]).returncode == 0
    wait_status(oci, "k", "stopped")
    r = oci(["kill", "k", "KILL"])
    assert r.returncode != 0 and "container not running" in r.stderr
    assert oci(["delete", "k"]).returncode == 0


def test_error_strings_engines_match(oci, bundle, tmp_path):
    log = tmp_path / "log.json"
    r = oci(["--log", str(log), "--log-format", "json", "state", "nope"])
    assert r.returncode == 1 and "does not exist" in r.stderr
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["level"] == "error" and "does not exist" in last["msg"]
    b = str(bundle(["true"]))
    assert oci(["create", "--bundle", b, "dup"]).returncode == 0
    r = oci(["create", "--bundle", b, "dup"])
    assert r.returncode == 1 and "already exists" in r.stderr
    assert "does not exist" in oci(["delete", "nope"]).stderr
    assert oci(["delete", "--force", "dup"]).returncode == 0


def test_a_created_container_can_be_deleted_before_start(oci, bundle):
    assert oci(["create", "--bundle", str(bundle(["sleep", "1000"])), "d"]).returncode == 0
    pid = json.loads(oci(["state", "d"]).stdout)["pid"]
    assert oci(["delete", "d"]).returncode == 0
    assert gone(pid)


def test_update_sets_the_memory_and_pids_limits(oci, bundle):
    res = {"memory": {"limit": 96 << 20}, "pids": {"limit": 77}}
    assert oci(["create", "--bundle", str(bundle(["sleep", "1000"], resources=res)),
                "u"]).returncode == 0
    st = json.loads(oci(["state", "u"]).stdout)
    assert oci(["update", "--resources", "-", "u"],
               input=json.dumps({"pids": {"limit": 55}})).returncode == 0
    # Inside: the cgroup namespace is rooted at the container's own cgroup.
    assert oci(["delete", "--force", "u"]).returncode == 0
    assert st["status"] == "created"


def test_features_lists_what_is_served(oci):
    f = json.loads(oci(["features"]).stdout)
    assert {"ociVersionMin", "ociVersionMax", "linux", "mountOptions"} <= set(f)
    assert "user" in f["linux"]["namespaces"]
    assert oci(["--version"]).stdout.startswith("airlock-oci version")


@pytest.mark.parametrize("mount,words", [
    ({"destination": "/mnt", "type": "bind", "source": "/dev/null", "options": ["bind"]},
     "/mnt"),
    ({"destination": "/mnt", "type": "bind", "source": "/proc/sys", "options": ["rbind"]},
     "kernel filesystem"),
    ({"destination": "/mnt", "type": "bind", "source": "/sys/kernel", "options": ["bind"]},
     "kernel filesystem"),
    ({"destination": "/proc/sys", "type": "proc", "source": "proc"}, "/proc/sys"),
    ({"destination": "/mnt", "type": "overlay", "source": "overlay"}, "overlay"),
])
def test_mounts_that_would_break_isolation_are_refused_by_name(oci, bundle, mount, words):
    r = oci(["create", "--bundle", str(bundle(["true"], mounts=[mount])), "m"])
    assert r.returncode == 1 and "refused" in r.stderr and words in r.stderr, r.stderr
    assert "does not exist" in oci(["state", "m"]).stderr  # nothing left


def test_the_hosts_network_namespace_is_never_joined(oci, bundle):
    ns = [{"type": "pid"}, {"type": "mount"},
          {"type": "network", "path": "/proc/%d/ns/net" % os.getpid()}]
    r = oci(["create", "--bundle", str(bundle(["true"], namespaces=ns)), "h"])
    assert r.returncode == 1 and "it is the host's" in r.stderr


def test_binds_and_tmpfs_are_honoured_and_nosuid_nodev(bundle, lifecycle, tmp_path):
    src = tmp_path / "data"
    src.mkdir()
    (src / "f").write_text("from the host\n")
    b = bundle(["sh", "-c", "cat /data/f; echo x > /data/f2 || echo ro; echo y > /scratch/y "
                "&& cat /scratch/y; grep -E ' /(data|scratch) ' /proc/mounts"],
               mounts=[{"destination": "/data", "type": "bind", "source": str(src),
                        "options": ["rbind", "ro"]},
                       {"destination": "/scratch", "type": "tmpfs", "source": "tmpfs"}])
    r = lifecycle(b)
    lines = r.out.splitlines()
    assert lines[:3] == ["from the host", "ro", "y"], r.out + r.err
    for line in lines[3:5]:
        assert "nosuid" in line and "nodev" in line
    assert not (src / "f2").exists()


def test_rbind_brings_submounts_each_nosuid_nodev_and_read_only(bundle, lifecycle, tmp_path):
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    (src / "top").write_text("top\n")
    assert subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "sub", str(src / "sub")]
                          ).returncode == 0
    try:
        (src / "sub" / "f").write_text("below\n")
        b = bundle(["sh", "-c", "cat /t/top /t/sub/f; touch /t/sub/x || echo ro; "
                    "grep -E ' /t(/sub)? ' /proc/mounts"],
                   mounts=[{"destination": "/t", "type": "bind", "source": str(src),
                            "options": ["rbind", "ro"]}])
        r = lifecycle(b)
        lines = r.out.splitlines()
        assert lines[:3] == ["top", "below", "ro"], r.out + r.err
        assert len(lines[3:]) == 2, r.out
        for line in lines[3:]:
            assert "nosuid" in line and "nodev" in line and " ro," in line, line
        # bind (not rbind): the top mount only, as runc.
        b = bundle(["sh", "-c", "cat /t/sub/f || echo none"],
                   mounts=[{"destination": "/t", "type": "bind", "source": str(src),
                            "options": ["bind", "ro"]}])
        assert lifecycle(b).out == "none\n"
    finally:
        subprocess.run(["umount", str(src / "sub")])


def test_rbind_of_a_tree_with_a_kernel_filesystem_below_is_refused_by_name(oci, bundle,
                                                                            tmp_path):
    src = tmp_path / "tree"
    (src / "p").mkdir(parents=True)
    assert subprocess.run(["mount", "-t", "proc", "proc", str(src / "p")]).returncode == 0
    try:
        b = bundle(["true"], mounts=[{"destination": "/t", "type": "bind",
                                      "source": str(src), "options": ["rbind"]}])
        r = oci(["create", "--bundle", str(b), "rb"])
        assert r.returncode == 1 and "refused" in r.stderr and str(src / "p") in r.stderr, \
            r.stderr
        assert "does not exist" in oci(["state", "rb"]).stderr
    finally:
        subprocess.run(["umount", str(src / "p")])


def test_capabilities_are_cut_to_the_configs_never_widened(bundle, lifecycle):
    # CAP_SYS_ADMIN asked for: not ours to give. CAP_CHOWN not asked for: dropped.
    r = lifecycle(bundle(["grep", "Cap", "/proc/self/status"],
                         caps=["CAP_SYS_ADMIN", "CAP_KILL", "CAP_SETUID"]))
    caps = dict(line.split(":\t") for line in r.out.splitlines())
    eff = int(caps["CapEff"], 16)
    assert eff == (1 << 5) | (1 << 7), hex(eff)  # KILL, SETUID
    assert int(caps["CapBnd"], 16) & ~((1 << 5) | (1 << 7)) == 0


def test_seccomp_of_the_config_applies_after_ours(bundle, lifecycle):
    sc = {"defaultAction": "SCMP_ACT_ALLOW",
          "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                        "errnoRet": 13}]}
    r = lifecycle(bundle(["sh", "-c", "mkdir /tmp/x; echo rc=$?; unshare -U true; "
                          "echo unshare=$?"], seccomp=sc))
    assert "Permission denied" in r.err and "rc=1" in r.out
    # A permissive profile widens nothing: our floor still refuses a user namespace.
    assert "unshare=0" not in r.out


def test_a_pod_pair_shares_the_pause_containers_namespaces(oci, bundle, lifecycle, tmp_path):
    assert oci(["create", "--bundle", str(bundle(["sleep", "1000"], hostname="pod-1")),
                "pause"]).returncode == 0
    assert oci(["start", "pause"]).returncode == 0
    pid = json.loads(oci(["state", "pause"]).stdout)["pid"]
    ns = [{"type": "pid"}, {"type": "mount"}] + [
        {"type": t, "path": "/proc/%d/ns/%s" % (pid, f)}
        for t, f in (("network", "net"), ("ipc", "ipc"), ("uts", "uts"))]
    r = lifecycle(bundle(["sh", "-c", "hostname; readlink /proc/self/ns/net; readlink /proc/self/ns/ipc"],
                         namespaces=ns, hostname="ignored"))
    lines = r.out.split()
    assert lines and lines[0] == "pod-1", (r.out, r.err, r.create_err)
    assert lines[1] == os.readlink("/proc/%d/ns/net" % pid)
    assert lines[2] == os.readlink("/proc/%d/ns/ipc" % pid)
    assert oci(["delete", "--force", "pause"]).returncode == 0


def test_escape_checks_hold_inside(bundle, lifecycle, tmp_path):
    from .escape import script, assert_all_ok
    marker = tmp_path / "host-only-marker"
    marker.write_text("x")
    r = lifecycle(bundle(["sh", "-c", script(str(marker))]))
    assert_all_ok(r.out)


def test_rlimits_lower_ours_and_never_raise_them(bundle, lifecycle):
    b = bundle(["sh", "-c", "ulimit -n; ulimit -Hn; ulimit -s"])
    cfg = json.loads((b / "config.json").read_text())
    cfg["process"]["rlimits"] = [
        {"type": "RLIMIT_NOFILE", "soft": 100, "hard": 200},
        {"type": "RLIMIT_STACK", "soft": 1 << 40, "hard": 1 << 40}]
    (b / "config.json").write_text(json.dumps(cfg))
    r = lifecycle(b)
    soft, hard, stack = r.out.split()
    assert (soft, hard) == ("100", "200")
    assert stack == "unlimited" or int(stack) * 1024 <= (1 << 40)
    cfg["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 1 << 20, "hard": 1 << 20}]
    (b / "config.json").write_text(json.dumps(cfg))
    assert int(lifecycle(b).out.split()[1]) <= 65536  # ours (src/jail/jail.h) stands


def test_exec_joins_the_container_with_the_same_protections(oci, bundle, tmp_path):
    from .escape import script, assert_all_ok
    assert oci(["create", "--bundle", str(bundle(["sleep", "1000"])), "x"]).returncode == 0
    assert oci(["start", "x"]).returncode == 0
    r = oci(["exec", "x", "sh", "-c", "ps -o pid,args; grep -E '^(CapEff|NoNewPrivs)' "
             "/proc/self/status; exit 4"])
    assert r.returncode == 4, r.stderr
    assert "sleep 1000" in r.stdout and "airlock-init" in r.stdout  # its pid namespace
    assert "NoNewPrivs:\t1" in r.stdout
    caps = int(r.stdout.split("CapEff:\t")[1].split()[0], 16)
    assert caps & (1 << 21) == 0  # no CAP_SYS_ADMIN although the config lists it
    marker = tmp_path / "host-marker"
    marker.write_text("x")
    assert_all_ok(oci(["exec", "x", "sh", "-c", script(str(marker))]).stdout)
    proc = tmp_path / "process.json"
    proc.write_text(json.dumps({"args": ["sh", "-c", "id -u; exit 9"], "cwd": "/tmp",
                                "env": ["PATH=/bin"], "user": {"uid": 4321, "gid": 4321}}))
    r = oci(["exec", "--process", str(proc), "x"])
    assert (r.returncode, r.stdout) == (9, "4321\n"), r.stderr
    assert oci(["exec", "x", "no-such-command"]).returncode == 127
    assert oci(["delete", "--force", "x"]).returncode == 0
    r = oci(["exec", "x", "true"])
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_nothing_of_the_workload_runs_before_start(oci, bundle, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    b = bundle(["sh", "-c", "echo ran > /out/f"],
               mounts=[{"destination": "/out", "type": "bind", "source": str(out),
                        "options": ["bind"]}])
    os.chmod(out, 0o777)
    assert oci(["create", "--bundle", str(b), "g"]).returncode == 0
    time.sleep(0.3)
    assert not (out / "f").exists()  # PID 1 waits at the gate
    assert oci(["start", "g"]).returncode == 0
    deadline = time.monotonic() + 5
    while not (out / "f").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (out / "f").read_text() == "ran\n"


def test_a_symlink_in_the_image_cannot_aim_a_mount_elsewhere(bundle, lifecycle, tmp_path,
                                                             rootfs):
    img = tmp_path / "img"
    shutil.copytree(rootfs, img, symlinks=True)
    (img / "etc" / "hosts").unlink()
    os.symlink("/etc/shadow", img / "etc" / "hosts")  # resolved on the host, it would be
    src = tmp_path / "hosts"
    src.write_text("203.0.113.1 x.test\n")
    b = bundle(["cat", "/etc/hosts"],
               mounts=[{"destination": "/etc/hosts", "type": "bind", "source": str(src),
                        "options": ["rbind", "ro"]}])
    cfg = json.loads((b / "config.json").read_text())
    cfg["root"]["path"] = str(img)
    (b / "config.json").write_text(json.dumps(cfg))
    r = lifecycle(b)
    assert r.create_rc == 1 and "symlink" in r.create_err, r.create_err


def test_concurrent_creates_get_one_id_and_distinct_uid_ranges(oci_bin, bundle, state_root):
    b = str(bundle(["sleep", "1000"]))
    null = subprocess.DEVNULL
    ps = [subprocess.Popen([oci_bin, "--root", state_root, "create", "--bundle", b, "same"],
                           stdin=null, stdout=null, stderr=null) for _ in range(4)]
    ps += [subprocess.Popen([oci_bin, "--root", state_root, "create", "--bundle", b,
                             "c%d" % i], stdin=null, stdout=null, stderr=null)
           for i in range(3)]
    rcs = [p.wait(30) for p in ps]
    assert rcs[:4].count(0) == 1 and rcs[4:] == [0, 0, 0], rcs
    maps = set()
    for cid in ("same", "c0", "c1", "c2"):
        st = json.load(open(os.path.join(state_root, cid, "state.json")))
        maps.add(open("/proc/%d/uid_map" % st["pid"]).read().split()[1])
    assert len(maps) == 4


def test_kill_all_reaches_every_process(oci, bundle):
    assert oci(["create", "--bundle", str(bundle(
        ["sh", "-c", "trap '' TERM; sleep 1000 & sleep 1000 & wait"])), "a"]).returncode == 0
    assert oci(["start", "a"]).returncode == 0
    deadline = time.monotonic() + 5
    while len(json.loads(oci(["ps", "--format", "json", "a"]).stdout)) < 4 and \
            time.monotonic() < deadline:
        time.sleep(0.02)
    pids = json.loads(oci(["ps", "--format", "json", "a"]).stdout)
    assert len(pids) == 4, pids  # PID 1, sh, two sleeps
    assert oci(["kill", "--all", "a", "KILL"]).returncode == 0
    assert all(gone(p) for p in pids)


def test_pause_freezes_and_resume_thaws(oci, bundle, tmp_path):
    out = tmp_path / "ticks"
    out.mkdir()
    os.chmod(out, 0o777)
    b = bundle(["sh", "-c", "while true; do echo x >> /out/t; sleep 0.05; done"],
               mounts=[{"destination": "/out", "type": "bind", "source": str(out),
                        "options": ["bind"]}])
    assert oci(["create", "--bundle", str(b), "p"]).returncode == 0
    assert oci(["start", "p"]).returncode == 0
    time.sleep(0.3)
    r = oci(["pause", "p"])
    assert r.returncode == 0, r.stderr
    assert json.loads(oci(["state", "p"]).stdout)["status"] == "paused"
    time.sleep(0.1)
    n = len((out / "t").read_text())
    time.sleep(0.4)
    assert len((out / "t").read_text()) == n  # nothing ran while frozen
    assert oci(["pause", "p"]).returncode == 1  # not twice
    assert oci(["resume", "p"]).returncode == 0
    assert json.loads(oci(["state", "p"]).stdout)["status"] == "running"
    time.sleep(0.3)
    assert len((out / "t").read_text()) > n
    assert oci(["pause", "p"]).returncode == 0
    assert oci(["delete", "--force", "p"]).returncode == 0  # a paused one too


def test_masked_and_readonly_proc_paths_of_the_config(bundle, lifecycle):
    b = bundle(["sh", "-c", "wc -c < /proc/cpuinfo; ls /proc/driver | wc -l; "
                "grep -E ' /proc/(fs|cpuinfo|driver) ' /proc/mounts"])
    cfg = json.loads((b / "config.json").read_text())
    cfg["linux"]["maskedPaths"] += ["/proc/cpuinfo", "/proc/driver", "/sys/firmware",
                                    "/proc/no-such-file"]
    cfg["linux"]["readonlyPaths"] += ["/proc/fs"]
    (b / "config.json").write_text(json.dumps(cfg))
    r = lifecycle(b)
    lines = r.out.splitlines()
    assert lines[:2] == ["0", "0"], (r.out, r.err, r.create_err)
    mounts = {line.split()[1]: line.split()[3] for line in lines[2:]}
    assert mounts["/proc/fs"].startswith("ro,"), mounts
    assert mounts["/proc/driver"].startswith("ro,"), mounts
