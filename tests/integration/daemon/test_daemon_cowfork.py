"""Fork by copy-on-write (docs/snapshots.md, "Fork"): the fork sees the source's files as
they are now, afterwards neither sees the other's writes (a change, a delete of a shared
file, a rename), forks of forks and second forks stack, a fork outlives its source,
snapshots of either read the merged files, the fork's disk is its own, a busy source is
copied instead, and from inside a fork the shared layer and the layers' places cannot be
reached. Where the kernel has no overlayfs every fork is a copy: the same assertions hold,
and the log says which it was."""

import hashlib
import os
import time

import hostprobe

from .conftest import wait_for


def log_since(daemon, mark):
    return daemon.log_path.read_bytes()[mark:].decode(errors="replace")


def fork(api, daemon, sid, **body):
    """Forks sid; (the new id, how: "cow" or "copy" as the daemon logged it)."""
    mark = daemon.log_path.stat().st_size
    r = api.request("POST", f"/v1/sandboxes/{sid}/fork", body)
    assert r.status == 201, r
    new = r.json["sandbox"]["id"]
    log = log_since(daemon, mark)
    if f"fork of sandbox {sid} into {new}: copy-on-write" in log:
        return new, "cow"
    assert f"fork of sandbox {sid} into {new}: copied" in log, log
    return new, "copy"


def expect_cow():
    return "cow" if hostprobe.overlayfs() else "copy"


def out(api, sid, script):
    r = api.sh(sid, script)
    return r.stdout.decode()


SEED = ("mkdir -p /workspace/d/e && echo one > /workspace/d/e/f && echo a > /workspace/a && "
        "echo b > /workspace/b && echo c > /workspace/c && echo t > /tmp/t && "
        "echo h > /home/user/h && echo m > /dev/shm/m && ln -s d/e/f /workspace/ln && "
        "head -c 1000000 /dev/urandom > /workspace/blob")

LIST = ("cd /workspace && find . | sort | tr '\\n' ' '; echo; cat a b c d/e/f 2>&1; "
        "cat /tmp/t /home/user/h /dev/shm/m; readlink ln")


def test_fork_sees_now_and_then_neither_sees_the_other(api, daemon, sandbox):
    api.sh(sandbox, SEED)
    f, how = fork(api, daemon, sandbox)
    try:
        assert how == expect_cow()
        assert out(api, f, LIST) == out(api, sandbox, LIST)
        # the fork changes a shared file, deletes one (a whiteout), renames a directory
        # that holds shared files, and adds one
        api.sh(f, "echo fa > /workspace/a && rm /workspace/b && mv /workspace/d /workspace/r "
                  "&& echo n > /workspace/n && echo ft > /tmp/t")
        # the source changes another, deletes one, adds one
        api.sh(sandbox, "echo sc > /workspace/c && rm /workspace/blob && echo s > /workspace/s")
        assert out(api, sandbox, "cd /workspace && ls; cat a b c d/e/f /tmp/t") == \
            "a\nb\nc\nd\nln\ns\na\nb\nsc\none\nt\n"
        assert out(api, f, "cd /workspace && ls; cat a c r/e/f /tmp/t; test -e b || echo nob") == \
            "a\nblob\nc\nln\nn\nr\nfa\nc\none\nft\nnob\n"
        # a deleted name can be made again, and stays the fork's own
        api.sh(f, "echo again > /workspace/b")
        assert out(api, sandbox, "cat /workspace/b") == "b\n"
    finally:
        api.stop(f)


def test_fork_of_a_fork_and_a_second_fork_of_one_source(api, daemon, sandbox):
    api.sh(sandbox, "echo 0 > /workspace/gen && echo keep > /workspace/keep")
    f1, how1 = fork(api, daemon, sandbox)
    made = [f1]
    try:
        api.sh(sandbox, "echo 1 > /workspace/gen && echo src > /workspace/src1")
        api.sh(f1, "echo f1 > /workspace/gen && rm /workspace/keep")
        f2, how2 = fork(api, daemon, sandbox)
        made.append(f2)
        g, how3 = fork(api, daemon, f1)
        made.append(g)
        assert (how1, how2, how3) == (expect_cow(),) * 3
        assert out(api, f2, "cat /workspace/gen /workspace/keep /workspace/src1") == "1\nkeep\nsrc\n"
        assert out(api, g, "cat /workspace/gen; ls /workspace") == "f1\ngen\n"
        # each of the four still writes only its own
        for i, sid in enumerate([sandbox, f1, f2, g]):
            api.sh(sid, f"echo {i} > /workspace/own")
        for i, sid in enumerate([sandbox, f1, f2, g]):
            assert out(api, sid, "cat /workspace/own") == f"{i}\n"
        assert out(api, sandbox, "cat /workspace/gen /workspace/keep") == "1\nkeep\n"
    finally:
        for sid in made:
            api.stop(sid)


def test_forks_of_an_idle_source_add_no_layer_and_a_busy_one_stops_at_16(api, daemon,
                                                                          sandbox):
    """A source that wrote nothing since its last fork is forked on the same layers (20
    forks: all copy-on-write); one that writes between forks stacks a layer each time,
    and past 16 the fork is copied, with the same files."""
    api.sh(sandbox, "echo 0 > /workspace/n")
    made = []
    try:
        for _ in range(20):
            f, how = fork(api, daemon, sandbox)
            made.append(f)
            assert how == expect_cow()
            api.stop(f)
        hows = []
        for i in range(1, 19):
            api.sh(sandbox, f"echo {i} > /workspace/n")
            f, how = fork(api, daemon, sandbox)
            made.append(f)
            hows.append(how)
            assert out(api, f, "cat /workspace/n") == f"{i}\n"
            api.stop(f)
        if expect_cow() == "cow":
            # the first fork above made one layer; each write and fork adds one
            assert hows[:15] == ["cow"] * 15 and "copy" in hows[15:], hows
        else:
            assert set(hows) == {"copy"}
        assert out(api, sandbox, "cat /workspace/n") == "18\n"
    finally:
        for sid in made:
            api.stop(sid)


def test_fork_reads_everything_after_its_source_is_gone(api, daemon, make_sandbox):
    src = make_sandbox()
    api.sh(src, "head -c 4000000 /dev/urandom > /workspace/big && mkdir /workspace/x && "
                "echo deep > /workspace/x/y && sha256sum /workspace/big > /tmp/sum")
    want = out(api, src, "cat /tmp/sum")
    f, how = fork(api, daemon, src)
    try:
        assert how == expect_cow()
        assert api.stop(src).status == 200
        wait_for(lambda: api.sandbox(src)["status"] == "stopped", timeout=20)
        time.sleep(0.5)  # the timer reclaims the stopped source meanwhile
        assert out(api, f, "sha256sum /workspace/big; cat /workspace/x/y") == want + "deep\n"
        api.sh(f, "echo more >> /workspace/x/y")
        assert out(api, f, "cat /workspace/x/y") == "deep\nmore\n"
    finally:
        api.stop(f)


def test_after_a_daemon_restart_a_forked_sandbox_is_copied(api, daemon, sandbox):
    """A restarted daemon does not know the layers of the overlays an earlier run made:
    a fork of such a sandbox is copied (its files read through the overlay), and right."""
    api.sh(sandbox, SEED)
    f, how = fork(api, daemon, sandbox)
    made = [f]
    try:
        api.sh(f, "rm /workspace/b && echo fa > /workspace/a")
        daemon.term()
        daemon.start()
        g, how2 = fork(api, daemon, f)
        made.append(g)
        assert how2 == "copy"
        assert out(api, g, LIST) == out(api, f, LIST)
        h, how3 = fork(api, daemon, g)  # g itself is new: copy-on-write again
        made.append(h)
        assert how3 == expect_cow()
        assert out(api, h, LIST) == out(api, f, LIST)
    finally:
        for sid in made:
            api.stop(sid)


def test_snapshots_after_a_fork_restore_the_merged_files(api, daemon, sandbox):
    api.sh(sandbox, SEED)
    f, _ = fork(api, daemon, sandbox)
    made = [f]
    try:
        api.sh(f, "rm /workspace/b && mv /workspace/d /workspace/r && echo fa > /workspace/a")
        api.sh(sandbox, "rm /workspace/c && echo sa > /workspace/a")
        for sid in (f, sandbox):
            r = api.request("POST", f"/v1/sandboxes/{sid}/snapshot", {})
            assert r.status == 201, r
            r = api.create(snapshot=r.json["snapshot"]["id"])
            assert r.status == 201, r
            made.append(r.json["sandbox"]["id"])
            script = ("cd /workspace && ls -A; cat a; sha256sum blob | cut -c1-16; "
                      "cat /tmp/t /home/user/h")
            assert out(api, made[-1], script) == out(api, sid, script)
        # the whiteout and the renamed directory's old name are nowhere
        assert "b" not in out(api, made[1], "ls /workspace").split()
        assert out(api, made[1], "cat /workspace/r/e/f; test -e /workspace/d || echo nod") == \
            "one\nnod\n"
    finally:
        for sid in made:
            api.stop(sid)


def test_fork_disk_is_its_own_upper_layer(api, daemon, make_sandbox):
    src = make_sandbox(resources={"disk": "64M"})
    api.sh(src, "head -c 40000000 /dev/zero > /workspace/fill")
    f, how = fork(api, daemon, src)
    try:
        assert how == expect_cow()
        script = ("head -c 100000000 /dev/zero > /workspace/over 2>/dev/null; echo rc=$?; "
                  "rm -f /workspace/over; head -c 30000000 /dev/zero > /workspace/fits; echo rc=$?")
        got = out(api, f, script)
        assert got.startswith("rc=1\n"), got  # more than its disk: refused
        # Copy-on-write: the shared 40 MB do not count, 30 MB more fit. A copy counts
        # them, and 40 + 30 is more than 64 MiB.
        assert got.endswith("rc=0\n" if how == "cow" else "rc=1\n"), got
        # the source's own disk is untouched by the fork's writes
        assert out(api, src, "head -c 20000000 /dev/zero > /workspace/s; echo rc=$?") == "rc=0\n"
    finally:
        api.stop(f)


def test_busy_source_is_copied_and_still_right(api, daemon, sandbox):
    api.sh(sandbox, SEED)
    c = api.start_ok(sandbox, "/bin/sh", "-c", "exec sleep 60", cwd="/workspace")
    f, how = fork(api, daemon, sandbox)
    try:
        assert how == "copy"
        assert out(api, f, LIST) == out(api, sandbox, LIST)
        api.sh(f, "echo fa > /workspace/a")
        assert out(api, sandbox, "cat /workspace/a") == "a\n"
    finally:
        api.request("POST", f"/v1/sandboxes/{sandbox}/commands/{c['id']}/kill", {"signal": 9})
        api.stop(f)


# --- attacks from inside a fork ---------------------------------------------------------


def test_fork_cannot_change_the_source_or_reach_the_layers(api, daemon, sandbox):
    api.sh(sandbox, SEED + " && cp /bin/true /workspace/tru && chmod 755 /workspace/tru")
    before = out(api, sandbox, LIST + "; sha256sum /workspace/tru")
    f, how = fork(api, daemon, sandbox)
    try:
        # every way of writing a shared file from the fork
        api.sh(f, "echo x >> /workspace/a; echo x > /workspace/c; truncate -s0 /workspace/blob; "
                  "chmod 600 /workspace/d/e/f; touch /workspace/d/e/f; ln -f /workspace/a "
                  "/workspace/hl; echo y >> /workspace/hl; rm -rf /workspace/d; "
                  "echo z > /tmp/t; : > /home/user/h; rm /dev/shm/m")
        assert out(api, sandbox, LIST + "; sha256sum /workspace/tru") == before
        mi = out(api, f, "cat /proc/self/mountinfo")
        # no host path names a layer: only the mounting process's own fds (not the
        # sandbox's) and no state directory
        assert str(daemon.state_dir) not in mi and "/var/" not in mi, mi
        for line in mi.splitlines():
            if " overlay " in line:
                assert " - overlay " in line and "nosuid,nodev" in line, line
                for opt in line.split(" - overlay ")[1].split(" ", 2)[-1].split(","):
                    if "=" in opt and opt.split("=")[0] in ("lowerdir", "lowerdir+",
                                                            "upperdir", "workdir"):
                        assert opt.split("=", 1)[1].startswith("/proc/self/fd/"), opt
        # those fd numbers are not the layers in the sandbox: its own fds, or nothing
        names = out(api, f, "for p in $(grep -o '/proc/self/fd/[0-9]*' /proc/self/mountinfo "
                            "| sort -u); do ls $p/ 2>/dev/null; done; echo end")
        assert names.strip().endswith("end") and "u\nw" not in names, names
        # no device node, no set-id program on the overlay
        got = out(api, f, "mknod /workspace/null c 1 3 2>&1; echo rc=$?; "
                          "chmod u+s /workspace/tru; /workspace/tru; echo rc=$?; "
                          "grep ' /workspace ' /proc/self/mountinfo")
        assert "rc=0" not in got.split("\n")[0] and "Operation not permitted" in got, got
        if how == "cow":
            assert "nosuid" in got.splitlines()[-1] and "nodev" in got.splitlines()[-1], got
    finally:
        api.stop(f)


def test_fork_process_cannot_see_the_source_or_the_host(api, daemon, sandbox):
    api.sh(sandbox, "echo secret-of-source > /workspace/s")
    f, _ = fork(api, daemon, sandbox)
    try:
        # the fork is its own sandbox: another pid namespace, another uid range
        got = out(api, f, "ls /proc | grep -c '^[0-9]'; id -u; stat -c %u:%g /workspace/s; "
                          "cat /workspace/s")
        lines = got.splitlines()
        assert lines[1:] == ["1000", "1000:1000", "secret-of-source"], got
        src_pids = set(open(os.path.join(hostprobe.cgroup_dir("pids", sandbox),
                                         "cgroup.procs")).read().split())
        fork_pids = set(open(os.path.join(hostprobe.cgroup_dir("pids", f),
                                          "cgroup.procs")).read().split())
        assert src_pids and fork_pids and not (src_pids & fork_pids)
        # files the fork writes are owned by its own uid range on the host
        api.sh(f, "echo mine > /workspace/mine")
        fpid = sorted(int(p) for p in fork_pids)[0]
        spid = sorted(int(p) for p in src_pids)[0]
        st = os.stat(f"/proc/{fpid}/root/workspace/mine")
        assert st.st_uid != os.stat(f"/proc/{spid}/root/workspace/s").st_uid
        h = hashlib.sha256(b"secret-of-source\n").hexdigest()
        assert out(api, f, "sha256sum /workspace/s | cut -d' ' -f1") == h + "\n"
    finally:
        api.stop(f)


def test_a_source_with_a_drive_below_an_area_is_copied_and_keeps_its_drive(api, daemon):
    """An overlay on /workspace would hide a drive mounted below it: such a source is
    copied (the drive left out of the fork, as a snapshot leaves it out), and the source
    still has its drive afterwards."""
    import secrets
    name = "cow-" + secrets.token_hex(4)
    r = api.request("POST", f"/v2/sandboxes/drives/{name}", {"projectId": "prj",
                                                              "maxSizeBytes": 32 << 20})
    assert r.status == 200, r
    made = []
    try:
        r = api.request("POST", "/v3/sandboxes", {
            "projectId": "prj",
            "mounts": {"/workspace/d": {"drive": name, "mode": "read-write"}}})
        assert r.status == 200, r
        src = r.json["session"]["id"]
        made.append(src)
        api.sh(src, "echo on-drive > /workspace/d/x && echo plain > /workspace/p")
        f, how = fork(api, daemon, src)
        made.append(f)
        assert how == "copy"
        assert out(api, f, "cat /workspace/p; test -e /workspace/d/x || echo nodrive") == \
            "plain\nnodrive\n"
        assert out(api, src, "cat /workspace/d/x /workspace/p") == "on-drive\nplain\n"
    finally:
        for sid in made:
            api.stop(sid)
        wait_for(lambda: all(api.sandbox(s)["status"] != "running" for s in made), timeout=20)
        api.request("DELETE", f"/v2/sandboxes/drives/{name}")
