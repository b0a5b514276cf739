"""What a sandbox can see: filesystem, environment, processes, network,
IPC and UTS namespaces, and that nothing carries over between sandboxes."""

import ctypes
import json
import os
import re
import select
import signal
import socket
import subprocess
import textwrap
import time

import pytest

PY = "/usr/bin/python3"


def py_json(run, src, *flags, **kw):
    """Run python `src` inside (it must print one JSON line last); parse it."""
    r = run([*flags, "--", PY, "-c", textwrap.dedent(src)], **kw)
    assert r.returncode == 0, (r.returncode, r.out, r.err)
    return json.loads(r.out.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# identity and uts


def test_uid_gid_and_user_name(run, sh):
    r = run(sh("id -u; id -g; id -un; echo $HOME"))
    assert r.returncode == 0, r.err
    assert r.out.split() == ["1000", "1000", "user", "/home/user"]


def test_passwd_has_user(run):
    r = run(["--", "/bin/cat", "/etc/passwd"])
    entries = [l.split(":") for l in r.out.splitlines() if l]
    user = [e for e in entries if e[0] == "user"]
    assert user and user[0][2] == "1000" and user[0][3] == "1000", r.out
    with open("/etc/passwd") as f:
        assert r.out != f.read(), "/etc/passwd must be generated, not the host's"


def test_root_flag_uid0(run, sh):
    r = run(["--root", *sh("id -u; id -g")])
    assert r.returncode == 0, r.err
    assert r.out.split() == ["0", "0"]


def test_hostname(run, sh):
    r = run(sh("hostname; cat /etc/hostname; uname -n"))
    assert r.returncode == 0, r.err
    assert r.out.split() == ["sandbox", "sandbox", "sandbox"]


# --------------------------------------------------------------------------
# environment


def _env_of(out):
    return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)


def test_environment_is_exactly_path_home_lang(run):
    r = run(["--", "/usr/bin/env"],
            env={"AIRLOCK_TEST_SECRET": "s3cr3t-host-value", "HOSTVAR": "x"})
    assert r.returncode == 0, r.err
    env = _env_of(r.out)
    assert set(env) == {"PATH", "HOME", "LANG"}, env
    assert env["HOME"] == "/home/user"
    assert env["LANG"] == "C.UTF-8"
    assert "/usr/bin" in env["PATH"].split(":")


def test_environment_with_env_flag_and_tty(run):
    r = run(["-t", "--env", "A=1", "--", "/usr/bin/env"])
    assert r.returncode == 0, r.err
    env = _env_of(r.out.replace("\r", ""))
    assert set(env) == {"PATH", "HOME", "LANG", "TERM", "A"}, env


@pytest.mark.parametrize("flags", [[], ["--root"]], ids=["user", "root"])
def test_host_secret_invisible_everywhere(run, flags):
    secret = "s3cr3t-%d-%d" % (os.getpid(), time.monotonic_ns())
    src = textwrap.dedent("""
        import os, json, glob, sys
        S = sys.argv[1][::-1]          # the secret itself never sits in argv
        hits = [k for k, v in os.environ.items() if S in v or S in k]
        paths = ["/proc/self/environ", "/proc/1/environ"]
        paths += glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")
        for p in paths:
            try:
                with open(p, "rb") as f:
                    if S.encode() in f.read():
                        hits.append(p)
            except OSError:
                pass
        print(json.dumps(hits))
    """)
    r = run([*flags, "--", PY, "-c", src, secret[::-1]],
            env={"AIRLOCK_TEST_SECRET": secret, "SECRET_TOKEN": secret})
    assert r.returncode == 0, r.err
    assert json.loads(r.out.strip()) == [], r.out


# --------------------------------------------------------------------------
# filesystem


def test_workspace_is_cwd_empty_writable(run, sh):
    r = run(sh("pwd; ls -A | wc -l; echo hi > f && cat f"))
    assert r.returncode == 0, r.err
    assert r.out.split() == ["/workspace", "0", "hi"]


@pytest.mark.parametrize("d", ["/workspace", "/tmp", "/home/user", "/dev/shm"])
def test_writable_dirs(run, sh, d):
    r = run(sh(f"echo data > {d}/airlock-w && cat {d}/airlock-w && mkdir {d}/sub && rm -r {d}/sub {d}/airlock-w && echo ok"))
    assert r.returncode == 0, r.err
    assert r.out == "data\nok\n"


def test_runtime_is_host_usr(run):
    r = run(["--", PY, "-c", "import sys; print(sys.version.split()[0])"])
    assert r.returncode == 0, r.err
    import sys
    assert r.out.strip() == sys.version.split()[0]


def test_etc_contents(run):
    res = py_json(run, """
        import os, json
        names = ["passwd", "group", "hosts", "hostname", "resolv.conf",
                 "nsswitch.conf", "ld.so.cache", "ssl/certs"]
        print(json.dumps({n: os.path.exists("/etc/" + n) for n in names}))
    """)
    missing = [k for k, v in res.items() if not v and os.path.exists("/etc/" + k)]
    assert not missing, f"/etc lacks {missing}"


def test_host_only_etc_files_absent(run):
    candidates = ["/etc/shadow", "/etc/gshadow", "/etc/fstab", "/etc/machine-id",
                  "/etc/sudoers", "/etc/crontab", "/etc/ssh", "/etc/apt",
                  "/etc/shadow-", "/etc/passwd-"]
    present_on_host = [p for p in candidates if os.path.exists(p)]
    assert "/etc/shadow" in present_on_host
    res = py_json(run, """
        import os, json
        print(json.dumps([p for p in %r if os.path.lexists(p)]))
    """ % present_on_host)
    assert res == [], f"host /etc files visible inside: {res}"


def test_shadow_content_not_readable(run):
    with open("/etc/shadow") as f:
        root_line = next(l for l in f if l.startswith("root:"))
    r = run(["--", "/bin/cat", "/etc/shadow"])
    assert r.returncode != 0
    assert root_line.strip() not in r.out


@pytest.mark.parametrize("path", ["/root", "/var", "/run", "/srv", "/opt", "/mnt",
                                  "/sys", "/work", "/media", "/boot", "/lost+found"])
def test_host_dirs_absent_or_empty(run, path):
    res = py_json(run, """
        import os, json
        p = %r
        if not os.path.lexists(p):
            print(json.dumps({"state": "absent"}))
        else:
            try:
                print(json.dumps({"state": "present", "entries": sorted(os.listdir(p))}))
            except OSError as e:
                print(json.dumps({"state": "unlistable", "errno": e.errno}))
    """ % path)
    if res["state"] == "present":
        assert res["entries"] == [], f"{path} inside shows {res['entries'][:20]}"


def test_home_shows_only_user(run):
    res = py_json(run, """
        import os, json
        print(json.dumps(sorted(os.listdir("/home"))))
    """)
    assert res == ["user"], res


def test_home_user_starts_empty(run):
    res = py_json(run, """
        import os, json
        print(json.dumps(sorted(os.listdir("/home/user"))))
    """)
    assert res == [], res


def test_caller_cwd_and_parents_invisible(run, tmp_path):
    d = tmp_path / "caller-cwd"
    d.mkdir()
    (d / "caller-sentinel.txt").write_text("CALLER-SENTINEL")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [str(d), str(tmp_path), repo, os.path.dirname(repo),
             os.path.dirname(os.path.abspath(__file__))]
    res = py_json(run, """
        import os, json
        print(json.dumps([p for p in %r if os.path.exists(p) and os.listdir(p)]))
    """ % paths, cwd=str(d))
    assert res == [], f"visible inside: {res}"
    res = py_json(run, """
        import os, json
        print(json.dumps(os.listdir(".")))
    """, cwd=str(d))
    assert "caller-sentinel.txt" not in res


def test_host_tmp_and_devshm_not_shared(run, tmp_path):
    name = "airlock-host-sentinel-%d" % os.getpid()
    host_files = [f"/tmp/{name}", f"/dev/shm/{name}"]
    for p in host_files:
        with open(p, "w") as f:
            f.write("x")
    try:
        res = py_json(run, """
            import os, json
            print(json.dumps([p for p in %r if os.path.exists(p)]))
        """ % host_files)
    finally:
        for p in host_files:
            os.unlink(p)
    assert res == []


def test_no_host_block_devices(run):
    res = py_json(run, """
        import os, json, stat
        out = []
        for n in os.listdir("/dev"):
            try:
                st = os.lstat("/dev/" + n)
            except OSError:
                continue
            if stat.S_ISBLK(st.st_mode):
                out.append(n)
        print(json.dumps(sorted(out)))
    """)
    assert res == []


def test_dev_only_safe_char_devices(run):
    res = py_json(run, """
        import os, json, stat
        out = []
        for root, dirs, files in os.walk("/dev"):
            for n in dirs + files:
                p = os.path.join(root, n)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                if stat.S_ISCHR(st.st_mode):
                    out.append([p, os.major(st.st_rdev), os.minor(st.st_rdev)])
        print(json.dumps(out))
    """)
    safe = {(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2)}
    bad = [d for d in res if (d[1], d[2]) not in safe
           and not (d[0].startswith("/dev/pts/") and d[1] in (136, 5))]
    assert not bad, f"unexpected devices in /dev: {bad}"


def test_dev_basics_work(run, sh):
    r = run(sh("echo x > /dev/null && head -c 4 /dev/zero | wc -c && head -c 4 /dev/urandom | wc -c"))
    assert r.returncode == 0, r.err
    assert r.out.split() == ["4", "4"]


# --------------------------------------------------------------------------
# processes


def test_proc_shows_only_sandbox_pids(run, marker, spawn):
    # A host process carrying the marker must not be visible.
    host = subprocess.Popen(["/bin/sh", "-c", f"{marker.sleep}; :"])
    try:
        assert marker.wait_present(), "host sentinel process did not start"
        res = py_json(run, """
            import os, json
            pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
            cmds = {}
            for p in pids:
                try:
                    with open("/proc/%d/cmdline" % p, "rb") as f:
                        cmds[p] = f.read().replace(b"\\0", b" ").decode(errors="replace")
                except OSError:
                    cmds[p] = None
            print(json.dumps({"pids": pids, "cmds": cmds}))
        """)
    finally:
        host.kill()
        host.wait()
        for p in marker.pids():
            os.kill(p, signal.SIGKILL)
    assert len(res["pids"]) <= 5, f"too many pids visible: {res['cmds']}"
    assert 1 in res["pids"]
    assert not any(c and marker.sleep_arg in c for c in res["cmds"].values())
    assert not any(c and "pytest" in c for c in res["cmds"].values())


def test_pid1_is_airlock_init_not_workload(run):
    res = py_json(run, """
        import os, json
        with open("/proc/1/comm") as f:
            comm = f.read().strip()
        print(json.dumps({"me": os.getpid(), "ppid": os.getppid(), "comm1": comm}))
    """)
    assert res["me"] != 1
    assert "airlock" in res["comm1"], res


def test_ps_shows_few_processes(run):
    r = run(["--", "/bin/ps", "-e", "-o", "pid=,comm="])
    assert r.returncode == 0, r.err
    lines = r.out.strip().splitlines()
    assert 2 <= len(lines) <= 5, r.out


# --------------------------------------------------------------------------
# network


def test_only_loopback_interface_up(run):
    res = py_json(run, """
        import socket, json, fcntl, struct
        names = [n for _, n in socket.if_nameindex()]
        s = socket.socket()
        ifr = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s.fileno(), 0x8913, ifr))[1]
        print(json.dumps({"names": names, "lo_up": bool(flags & 1)}))
    """)
    assert res["names"] == ["lo"], res
    assert res["lo_up"]


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-netns", "recycled"])
def test_each_run_has_a_fresh_network_namespace_of_its_own(airlock, fresh):
    """A deny-all run's network namespace is made by airlock while the child builds its
    root, and handed to it with GO (src/jail/run.c, JAIL_NETNS_LATER), or is a recycled one
    proven clean (docs/security.md, "Recycled network namespaces"). Each run gets one of its
    own -- not the host's, not another live run's -- with lo up; three runs held at once
    show three different namespaces. With --fresh-netns it is new: nothing went through its
    loopback before the workload. A recycled one carries lo's counters over (the documented
    count-only channel, residual risk R14), so they are not asserted there."""
    import subprocess
    host = os.stat("/proc/self/ns/net").st_ino
    script = ("readlink /proc/self/ns/net; grep ' lo:' /proc/net/dev; "
              "cat /sys/class/net/lo/operstate 2>/dev/null; sleep 1")
    argv = [airlock, "run"] + (["--fresh-netns"] if fresh else []) + ["--", "/bin/sh", "-c",
                                                                      script]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(3)]
    inos = []
    for p in procs:
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
        lines = out.decode().splitlines()
        ino = int(lines[0].split("[")[1].rstrip("]"))
        counters = lines[1].split(":")[1].split()
        if fresh:
            assert counters[0] == "0" and counters[1] == "0", lines  # rx bytes, packets
            assert counters[8] == "0" and counters[9] == "0", lines  # tx bytes, packets
        inos.append(ino)
    assert host not in inos, (host, inos)
    assert len(set(inos)) == len(inos), inos


def test_no_routes_to_outside(run):
    # UDP connect() only does a route lookup: no packet leaves the box even if
    # the sandbox were (wrongly) on the host network.
    res = py_json(run, """
        import socket, json
        out = {}
        for fam, addr in ((socket.AF_INET, ("192.0.2.1", 9)),
                          (socket.AF_INET, ("10.255.255.1", 9)),
                          (socket.AF_INET6, ("2001:db8::1", 9))):
            s = socket.socket(fam, socket.SOCK_DGRAM)
            try:
                s.connect(addr)
                out[addr[0]] = 0
            except OSError as e:
                out[addr[0]] = e.errno
        print(json.dumps(out))
    """)
    for addr, err in res.items():
        assert err != 0, f"route to {addr} exists inside the sandbox"


def test_loopback_listener_inside_reachable(run):
    res = py_json(run, """
        import socket, json, threading
        srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
        port = srv.getsockname()[1]
        def serve():
            c, _ = srv.accept(); c.sendall(b"pong"); c.close()
        threading.Thread(target=serve, daemon=True).start()
        c = socket.create_connection(("127.0.0.1", port), timeout=3)
        print(json.dumps(c.recv(10).decode()))
    """)
    assert res == "pong"


def _host_tcp_listener():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.setblocking(False)
    # sanity: reachable from the host itself
    c = socket.create_connection(srv.getsockname(), timeout=2)
    c.close()
    time.sleep(0.05)
    try:
        srv.accept()[0].close()
    except BlockingIOError:
        pass
    return srv


def test_host_tcp_listener_unreachable(run):
    srv = _host_tcp_listener()
    port = srv.getsockname()[1]
    try:
        res = py_json(run, """
            import socket, json
            try:
                socket.create_connection(("127.0.0.1", %d), timeout=2).close()
                print(json.dumps("connected"))
            except OSError as e:
                print(json.dumps(e.errno))
        """ % port)
        accepted = select.select([srv], [], [], 0.2)[0]
    finally:
        srv.close()
    assert res != "connected"
    assert not accepted, "the host listener got a connection from the sandbox"


def test_host_udp_listener_unreachable(run):
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    try:
        r = run(["--", PY, "-c", textwrap.dedent("""
            import socket
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for _ in range(5):
                try:
                    s.sendto(b"escape", ("127.0.0.1", %d))
                except OSError:
                    pass
            print("sent")
        """ % port)])
        got = select.select([srv], [], [], 0.5)[0]
    finally:
        srv.close()
    assert r.returncode == 0, r.err
    assert not got, "a UDP datagram from the sandbox reached the host"


def test_host_pathname_unix_socket_unreachable(run, tmp_path):
    path = str(tmp_path / "host.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.setblocking(False)
    try:
        res = py_json(run, """
            import socket, json
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(%r); print(json.dumps("connected"))
            except OSError as e:
                print(json.dumps(e.errno))
        """ % path)
        accepted = select.select([srv], [], [], 0.2)[0]
    finally:
        srv.close()
    assert res != "connected"
    assert not accepted


def test_host_abstract_unix_socket_unreachable(run):
    name = "\0airlock-test-%d-%d" % (os.getpid(), time.monotonic_ns())
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(name)
    srv.listen(1)
    srv.setblocking(False)
    # sanity: reachable on the host
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(name)
    c.close()
    srv.accept()[0].close()
    try:
        res = py_json(run, """
            import socket, json
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(%r); print(json.dumps("connected"))
            except OSError as e:
                print(json.dumps(e.errno))
        """ % name)
        accepted = select.select([srv], [], [], 0.2)[0]
    finally:
        srv.close()
    assert res != "connected"
    assert not accepted


def test_host_systemd_and_docker_sockets_absent(run):
    res = py_json(run, """
        import os, json
        ps = ["/run/systemd/private", "/run/systemd/journal/socket",
              "/var/run/docker.sock", "/run/dbus/system_bus_socket"]
        print(json.dumps([p for p in ps if os.path.exists(p)]))
    """)
    assert res == []


# --------------------------------------------------------------------------
# ipc


def test_sysv_ipc_isolated(run):
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x41AB0000 + (os.getpid() & 0xFFFF)
    shmid = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    try:
        res = py_json(run, """
            import ctypes, json
            libc = ctypes.CDLL(None, use_errno=True)
            r = libc.shmget(%d, 0, 0)
            with open("/proc/sysvipc/shm") as f:
                lines = f.read().splitlines()[1:]
            print(json.dumps({"shmget": r, "errno": ctypes.get_errno(), "segs": len(lines)}))
        """ % key)
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID
    assert res["shmget"] == -1, "host SysV shm segment visible in the sandbox"
    assert res["errno"] == 2  # ENOENT
    assert res["segs"] == 0


# --------------------------------------------------------------------------
# clean slate and sandbox-to-sandbox isolation


def test_clean_slate_between_runs(run, sh):
    w = run(sh("for d in /workspace /tmp /home/user /dev/shm; do echo x > $d/carry-over; done; echo done"))
    assert w.returncode == 0 and w.out == "done\n", w.err
    r = run(sh("for d in /workspace /tmp /home/user /dev/shm; do [ -e $d/carry-over ] && echo $d; done; true"))
    assert r.returncode == 0, r.err
    assert r.out == "", f"files carried over: {r.out}"


TEMPLATES = "/run/airlock/template"  # kept on purpose (src/jail/ahead/template.h): not a trace


def _host_traces():
    """airlock-looking mounts in the host's mount table and entries in the
    host's scratch dirs."""
    with open("/proc/self/mountinfo") as f:
        mounts = {l.split(" - ")[0].split()[4] for l in f}
    entries = set()
    for d in ("/tmp", "/run", "/dev/shm", "/var/tmp", "/run/airlock"):
        try:
            entries |= {os.path.join(d, n) for n in os.listdir(d)}
        except OSError:
            pass
    # The recycled network namespaces a run may leave ready for the next one (their pins:
    # ready/NAME/ns, and a pair's ready/NAME/gw; docs/security.md); a claim or a half-made
    # entry would still show.
    ready = re.compile(r"^/run/airlock/netns/(link-[0-9a-f]{8}/)?ready/n\d+/(ns|gw)$")
    return ({m for m in mounts if not m.startswith(TEMPLATES + "/") and not ready.match(m)},
            entries - {TEMPLATES})


def test_no_host_traces_after_run(run, sh):
    m0, e0 = _host_traces()
    r = run(sh("echo x > /workspace/f; echo x > /tmp/f; echo x > /dev/shm/f; "
               "echo x > /home/user/f; echo ok"))
    assert r.returncode == 0 and r.out == "ok\n", r.err
    time.sleep(0.2)
    m1, e1 = _host_traces()
    new_mounts = sorted(m1 - m0)
    # ignore what other users of the host create meanwhile: only flag
    # entries that look like a sandbox's
    new_entries = sorted(e for e in e1 - e0
                         if any(k in os.path.basename(e) for k in ("airlock", "sbx", "sandbox")))
    assert not new_mounts, f"mounts left on the host: {new_mounts}"
    assert not new_entries, f"files left on the host: {new_entries}"
    assert not os.path.exists("/workspace/f") and not os.path.exists("/home/user/f")


def test_sandboxes_isolated_from_each_other(run, spawn, marker):
    """Sandbox A listens (TCP and abstract unix) and sleeps; sandbox B must
    see neither A's processes nor its listeners."""
    abstract = "\0airlock-a-%d-%d" % (os.getpid(), time.monotonic_ns())
    a_src = textwrap.dedent("""
        import socket, sys, time
        t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(5)
        u = socket.socket(socket.AF_UNIX); u.bind(%r); u.listen(5)
        print(t.getsockname()[1], flush=True)
        time.sleep(60)
    """ % abstract)
    a = spawn(["--timeout", "30s", "--", PY, "-c", a_src, str(marker)],
              stdout=subprocess.PIPE)
    try:
        line = a.stdout.readline()
        assert line.strip().isdigit(), (line, a.stderr.read() if a.poll() is not None else "")
        port = int(line)
        res = py_json(run, """
            import os, socket, json
            M = %r[::-1]      # not literally in our own cmdline
            out = {}
            try:
                socket.create_connection(("127.0.0.1", %d), timeout=2).close(); out["tcp"] = "connected"
            except OSError as e:
                out["tcp"] = e.errno
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(%r); out["unix"] = "connected"
            except OSError as e:
                out["unix"] = e.errno
            seen = []
            for p in os.listdir("/proc"):
                if p.isdigit():
                    try:
                        with open("/proc/%%s/cmdline" %% p, "rb") as f:
                            if M.encode() in f.read():
                                seen.append(p)
                    except OSError:
                        pass
            out["seen"] = seen
            print(json.dumps(out))
        """ % (str(marker)[::-1], port, abstract))
    finally:
        a.send_signal(signal.SIGTERM)
        try:
            a.communicate(timeout=5)
        except Exception:
            a.kill()
            a.communicate()
    assert res["tcp"] != "connected"
    assert res["unix"] != "connected"
    assert res["seen"] == []


def test_each_sandbox_has_a_user_namespace_of_its_own(spawn, marker, run, sh):
    """A sandbox's user namespace is new, not the host's nor another live sandbox's, and
    maps inside 0.. to an unprivileged host range of 65536 ids (uid and gid alike)."""
    p = spawn(["--timeout", "20s", "--", "/bin/sh", "-c", f"{marker.sleep}; : {marker}"],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pids = marker.wait_present(prefixes=("/bin/sh", "sleep"))
        assert pids, "the first sandbox's workload never appeared"
        first = os.readlink(f"/proc/{pids[0]}/ns/user")
        with open(f"/proc/{pids[0]}/uid_map") as f:
            first_map = f.read().split()
        r = run(sh("readlink /proc/self/ns/user; cat /proc/self/uid_map /proc/self/gid_map"))
        assert r.returncode == 0, r.err
        lines = r.out.split("\n")
        second, maps = lines[0], [ln.split() for ln in lines[1:] if ln.strip()]
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=10)
    host = os.readlink("/proc/self/ns/user")
    assert len({first, second, host}) == 3, (first, second, host)
    for m in [first_map, *maps]:
        inside, outside, count = (int(x) for x in m)
        assert inside == 0 and count == 65536, m
        assert outside >= 65536, f"maps to a host id below the unprivileged ranges: {m}"
    assert maps[0] == maps[1], "uid and gid maps differ"
