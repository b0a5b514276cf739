"""Every daemon command gets the protections of `airlock run`, although the agent does
the command-independent part once, at start (signals reset, bounding set cut, Landlock
ruleset built, the seccomp filter installed on the agent itself, for commands to inherit)
and the shim starts the command with CLONE_VM|CLONE_VFORK: these tests
attack from inside a command and assert that each attempt is refused, for the sandbox
user and for sudo, and that one command's privileges never leak into the next."""

import json

import hostprobe

PY = "/usr/bin/python3"

# Everything a command can learn about itself and try against its supervisors.
PROBE = r"""
import errno, json, os, signal
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    st[k] = v.strip()
out = {k: st[k] for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh", "NoNewPrivs",
                          "Seccomp", "Seccomp_filters", "Uid")}
# The agent (PID 1) runs under the workload's filter itself; commands inherit it.
for line in open("/proc/1/status"):
    if line.startswith("Seccomp"):
        k, _, v = line.partition(":")
        out["agent_" + k] = v.strip()
fds = {}
for f in os.listdir("/proc/self/fd"):
    try:
        fds[int(f)] = os.readlink("/proc/self/fd/" + f)
    except OSError:
        pass  # the directory listdir had open
out["fds"] = fds
def attempt(fn):
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno
# PID 1 is the agent; our parent is the command's shim. Neither may be signalled.
out["kill_agent"] = attempt(lambda: os.kill(1, signal.SIGTERM))
out["kill_shim"] = attempt(lambda: os.kill(os.getppid(), signal.SIGKILL))
# Landlock: the runtime is read-only, the workspace writable.
out["write_root"] = attempt(lambda: open("/airlock-probe", "w"))
out["write_usr"] = attempt(lambda: open("/usr/airlock-probe", "w"))
out["write_workspace"] = attempt(lambda: open("/workspace/probe-%d" % os.getpid(), "w").close())
# The agent's memory (every command's environment) is not readable.
out["agent_mem"] = attempt(lambda: open("/proc/1/mem", "rb").read(1))
out["agent_environ"] = attempt(lambda: open("/proc/1/environ", "rb").read())
# What the filter denies: a new user namespace (unshare), a mount.
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def raw(rc):
    return ctypes.get_errno() if rc < 0 else 0
out["unshare_user"] = raw(libc.unshare(0x10000000))
out["mount_tmpfs"] = raw(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
print(json.dumps(out))
"""

# The capabilities a sudo command keeps (src/jail/security.c root_caps): CHOWN,
# DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, NET_BIND_SERVICE.
SUDO_CAPS = (1 << 0) | (1 << 1) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 10)


def probe(api, sandbox, sudo):
    out = api.run(sandbox, PY, "-c", PROBE, sudo=sudo)
    assert out.exit["exit_code"] == 0, (out.err, out.exit)
    after = api.run(sandbox, "/bin/true")  # the agent outlived the probe's signals
    assert after.exit["exit_code"] == 0, after.exit
    return json.loads(out.stdout)


def check_common(p):
    assert p["NoNewPrivs"] == "1", p
    assert p["Seccomp"] == "2", p
    # Exactly one filter: the one the agent holds, inherited, not a second stacked copy
    # (each would run on every system call).
    assert p["Seccomp_filters"] == "1", p
    assert p["agent_Seccomp"] == "2" and p["agent_Seccomp_filters"] == "1", p
    assert p["unshare_user"] == 1 and p["mount_tmpfs"] == 1, p  # EPERM from the filter
    assert int(p["CapAmb"], 16) == 0 and int(p["CapInh"], 16) == 0, p
    # stdio only: no agent socket, no other command's pipe, no Landlock ruleset fd
    assert sorted(p["fds"]) == ["0", "1", "2"], p["fds"]
    if hostprobe.landlock_abi() >= 6:  # Landlock's signal scope (ABI 6, Linux 6.12)
        assert p["kill_agent"] == 1 and p["kill_shim"] == 1, p  # EPERM
    else:
        # No signal scope on this kernel: the signal may be sent, but PID 1 of a pid
        # namespace takes no signal it has no handler for from inside it, and the
        # shim's death ends only the command. The sandbox must live on (the caller
        # checks its agent answers the next command).
        assert p["kill_agent"] in (0, 1) and p["kill_shim"] in (0, 1), p
    assert p["write_root"] in (1, 13) and p["write_usr"] in (1, 13, 30), p
    assert p["write_workspace"] == 0, p
    assert p["agent_mem"] in (1, 13) and p["agent_environ"] in (1, 13), p


def test_sandbox_user_command_has_no_privilege(api, sandbox):
    p = probe(api, sandbox, sudo=False)
    check_common(p)
    for k in ("CapEff", "CapPrm", "CapBnd"):
        assert int(p[k], 16) == 0, (k, p)
    assert p["Uid"].split() == ["1000"] * 4, p


def test_sudo_command_keeps_only_the_root_caps(api, sandbox):
    p = probe(api, sandbox, sudo=True)
    check_common(p)
    assert p["Uid"].split() == ["0"] * 4, p
    assert int(p["CapBnd"], 16) == SUDO_CAPS, p
    assert int(p["CapEff"], 16) == SUDO_CAPS and int(p["CapPrm"], 16) == SUDO_CAPS, p


def test_privileges_do_not_carry_from_one_command_to_the_next(api, sandbox):
    """The agent's one-time preparation is shared by all commands: a sudo command in
    between must not widen what the next user command gets, in either order."""
    seen = []
    for sudo in (False, True, False, True, False):
        p = probe(api, sandbox, sudo=sudo)
        check_common(p)
        seen.append((sudo, int(p["CapBnd"], 16), int(p["CapEff"], 16)))
    for sudo, bnd, eff in seen:
        assert (bnd, eff) == ((SUDO_CAPS, SUDO_CAPS) if sudo else (0, 0)), seen


def test_a_command_cannot_get_the_caps_back_by_exec(api, sandbox):
    """With the bounding set cut once in the agent, exec'ing a binary as uid 0 (sudo)
    still yields at most the root caps, and the sandbox user cannot become root."""
    out = api.sh(sandbox, "grep -E '^Cap(Bnd|Eff)' /proc/self/status", sudo=True)
    caps = dict(line.split(":\t") for line in out.out.splitlines())
    assert int(caps["CapBnd"], 16) == SUDO_CAPS and int(caps["CapEff"], 16) == SUDO_CAPS, caps
    out = api.run(sandbox, PY, "-c", "import os\ntry:\n os.setuid(0)\nexcept OSError as e:"
                                     "\n print(e.errno)")
    assert out.stdout == b"1\n", out


def test_no_signal_disposition_is_handed_down(api, sandbox):
    """exec passes ignored signals on: the agent resets them once at start, so neither a
    user nor a sudo command starts with one ignored or blocked (grep reads its own status;
    python would ignore SIGPIPE itself)."""
    for sudo in (False, True):
        out = api.sh(sandbox, "exec grep -E '^Sig(Ign|Blk)' /proc/self/status", sudo=sudo)
        sig = dict(line.split(":\t") for line in out.out.splitlines())
        assert int(sig["SigIgn"], 16) == 0 and int(sig["SigBlk"], 16) == 0, (sudo, sig)
