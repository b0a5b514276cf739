"""Hostile input to the `airlock` command line (`airlock run`, `airlock pool`).

The rule under test (README "Exit codes", `airlock run --help`): bad input of any
kind gets a clear message on stderr naming the bad value and the documented exit
code (64 for a bad flag or value, 125 for a sandbox that could not be set up,
127 for a command that was not found), changes nothing on the host, leaves
nothing behind and never hangs or crashes.

Only cases that tests/integration/test_cli.py and tests/integration/net/test_policy.py
do not already cover are here. No test sends traffic anywhere but loopback:
policies are valid or invalid documents, and the workloads never use the network.
Every run points $AIRLOCK_POOL at an empty directory of its own, so that no run
takes (or refills) an entry of a pool someone else filled.
"""

import hashlib
import json
import os
import pathlib
import secrets
import subprocess
import time

import pytest

from conftest import cgroup_children, host_pids_matching

PY = "/usr/bin/python3"


# --------------------------------------------------------------------------
# helpers


@pytest.fixture(scope="module")
def pool_env(tmp_path_factory):
    """An $AIRLOCK_POOL nobody filled: runs neither take nor refill shared entries."""
    d = tmp_path_factory.mktemp("empty-pool")
    yield {"AIRLOCK_POOL": str(d)}
    # Should a test have filled it after all (a bug), release what it made.
    if any(d.iterdir()):
        subprocess.run([os.environ.get("AIRLOCK_BIN", "airlock"), "pool", "drain"],
                       env={**os.environ, "AIRLOCK_POOL": str(d)},
                       capture_output=True, timeout=60)


@pytest.fixture
def arun(run, pool_env):
    def arun(args, **kw):
        env = dict(pool_env)
        env.update(kw.pop("env", None) or {})
        return run(args, env=env, **kw)
    return arun


def _usage_error(r, *needles):
    """Problems with `r` as a usage error (64, 'airlock: ...' naming needles, nothing run)."""
    bad = []
    if r.returncode != 64:
        bad.append(f"exit {r.returncode}, want 64")
    if not r.err.startswith("airlock"):
        bad.append("stderr does not start with 'airlock'")
    for n in needles:
        if n not in r.err:
            bad.append(f"stderr does not name {n!r}")
    if r.out:
        bad.append(f"stdout not empty: {r.out[:100]!r}")
    return bad


def _check_all(cases):
    """cases: [(label, [problems])]; fail listing every bad case."""
    failed = [f"{label}: {'; '.join(p)}" for label, p in cases if p]
    assert not failed, "\n".join(failed)


def _short(r):
    return (r.returncode, r.out[:300], r.err[:600])


# --------------------------------------------------------------------------
# resource flags: bad values (test_cli covers abc, empty timeout, 12Q, 5x)


BAD_VALUES = {
    "--memory": ["-1M", "0x10M", "1.5.5M", "99999999999999999999G", "1 G", "3M", "1GG", "M"],
    "--pids": ["-1", "1.5", "99999999999999999999", "", "+5", "0x10"],
    "--cpus": ["0", "-1", "1025", "0.001", "1e3", "", "nan", "inf"],
    "--disk": ["0", "-1", "4095", "99999999999999999999G", "", "1Q"],
    "--timeout": ["-5s", "721h", "99999999999999999999h", "1d", "inf", "nan", "1e3"],
    "--output-limit": ["-1", "99999999999999999999G", "1 M", ""],
}


@pytest.mark.parametrize("flag", sorted(BAD_VALUES))
def test_bad_resource_values_exit_64(arun, flag):
    cases = []
    for v in BAD_VALUES[flag]:
        r = arun([flag, v, "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((f"{flag} {v!r}", _usage_error(r, flag, f"'{v}'")))
    _check_all(cases)


def test_tiny_timeout_is_not_unlimited(arun):
    """--timeout 0.0004s is not 0 (= none): 0.4 ms rounds to 0 ms and the run gets
    no timeout at all. It must be refused (64) or kill the sandbox (124)."""
    r = arun(["--timeout", "0.0004s", "--", "/bin/sh", "-c", "sleep 3; echo SLEPT"],
             timeout=30)
    assert r.returncode in (64, 124), _short(r)
    assert "SLEPT" not in r.out, "a 0.4 ms timeout let a 3 s command finish: " + repr(_short(r))


def test_tiny_memory_is_not_unlimited(arun):
    """--memory 0.5 (half a byte) truncates to 0 = no limit; anything non-zero below
    the 4M minimum is refused ('must be at least 4M'), and so must this be."""
    r = arun(["--memory", "0.5", "--", "/bin/echo", "SANDBOX-RAN"])
    _check_all([("--memory 0.5", _usage_error(r, "--memory", "'0.5'"))])


def test_pids_above_kernel_limit_is_usage_error(arun):
    """A --pids value the parser accepts but the cgroup refuses (above PID_MAX_LIMIT,
    4194304) is a bad flag value (64), not a set-up failure (125) with a cgroup path
    in the message."""
    cases = []
    for value in ["4294967295", "4194305"]:
        r = arun(["--pids", value, "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((f"--pids {value}", _usage_error(r, "--pids", value) +
                      ([f"stderr: {r.err.strip()[:200]!r}"] if r.returncode != 64 else [])))
    _check_all(cases)


# --------------------------------------------------------------------------
# set-up failures must say why (the child's reason, not the parent's EPIPE)


def _setup_cases(tmp):
    src = tmp / "src.txt"
    src.write_text("x")
    missing = f"/nonexistent/airlock-hostile-{secrets.token_hex(4)}"
    longname = "n" * 300
    return {
        "file-missing-source": (["--file", f"{missing}:x"], [missing]),
        "workdir-proc": (["--workdir", "/proc"], ["/proc"]),
        # The root a run builds itself does not fit in 8K (a template's copy needs
        # none of the disk: that run would succeed).
        "disk-8K": (["--no-template", "--disk", "8K"], ["space"]),
        "file-dst-name-too-long": (["--file", f"{src}:{longname}"], ["too long"]),
    }


@pytest.mark.parametrize("case", ["file-missing-source", "workdir-proc", "disk-8K",
                                  "file-dst-name-too-long"])
def test_setup_failure_names_its_reason(arun, tmp_path, case):
    """Five runs in a row: each must give the real reason. Today the parent sends GO,
    gets EPIPE from the child that already failed, and reports
    'setup failed: sync with the sandbox: Broken pipe' (most of the time)."""
    flags, needles = _setup_cases(tmp_path)[case]
    cases = []
    for i in range(5):
        r = arun([*flags, "--", "/bin/echo", "SANDBOX-RAN"])
        p = []
        if r.returncode not in (64, 125):
            p.append(f"exit {r.returncode}, want 125 (or 64)")
        if "Broken pipe" in r.err:
            p.append("the reason is lost: " + r.err.strip()[:200])
        for n in needles:
            if n not in r.err:
                p.append(f"stderr does not name {n!r}: {r.err.strip()[:200]!r}")
        if "SANDBOX-RAN" in r.out:
            p.append("the command ran")
        cases.append((f"run {i}", p))
    _check_all(cases)


# --------------------------------------------------------------------------
# --file with hostile sources and destinations


def test_file_fifo_source_does_not_hang(arun, tmp_path):
    """A FIFO is neither a file nor a directory: refused at once, not opened (which
    blocks until a writer comes, i.e. until --timeout, reported as a timeout)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    r = arun(["--timeout", "8s", "--file", f"{fifo}:f", "--", "/bin/echo", "SANDBOX-RAN"],
             timeout=30)
    took = time.monotonic() - t0
    assert took < 4, f"took {took:.1f}s on a FIFO source: {_short(r)}"
    assert r.returncode in (64, 125), _short(r)
    assert str(fifo) in r.err, _short(r)


def test_file_dev_zero_source_refused_clearly(arun):
    r = arun(["--disk", "4M", "--file", "/dev/zero:z", "--", "/bin/echo", "SANDBOX-RAN"],
             timeout=30)
    assert r.returncode in (64, 125), _short(r)
    assert "/dev/zero" in r.err, _short(r)
    assert r.out == ""


def test_file_proc_source(arun):
    """/proc/self/status is a regular file that sendfile(2) refuses (EINVAL): copy it
    (with read/write), or refuse it naming it -- never blame a full disk or lose the
    reason."""
    r = arun(["--file", "/proc/self/status:status.txt", "--", "/bin/cat", "status.txt"])
    if r.returncode == 0:
        assert "Name:" in r.out, _short(r)
    else:
        assert r.returncode == 125, _short(r)
        assert "/proc/self/status" in r.err and "disk may be full" not in r.err, _short(r)


def test_file_dst_longer_than_path_max_is_not_truncated(arun, tmp_path):
    """A destination longer than PATH_MAX must be refused, not cut at 4095 bytes
    (which silently writes the file at another path)."""
    src = tmp_path / "src.txt"
    src.write_text("payload")
    dst = "/tmp/" + "d/" * 2045 + "file.txt"
    assert len(dst) > 4096
    r = arun(["--file", f"{src}:{dst}", "--", "/bin/sh", "-c",
              "find /tmp -type f | awk '{print length($0)}'"])
    if r.returncode == 0:
        assert r.out.split() == [str(len(dst))], \
            f"copied to a path of length {r.out.split()} instead of {len(dst)}"
    else:
        assert r.returncode in (64, 125), _short(r)
        assert "long" in r.err.lower() or "invalid" in r.err.lower(), _short(r)


def test_file_syntax_errors_exit_64(arun, tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("x")
    cases = []
    for v in ["nocolon", ":dst", f"{src}:", ""]:
        r = arun(["--file", v, "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((f"--file {v!r}", _usage_error(r, "--file", f"'{v}'")))
    _check_all(cases)


def test_too_many_files_is_usage_error(arun, tmp_path):
    """More --file flags than the limit (64, src/jail/rootfs.c) is known before
    anything is built: a usage error that says so."""
    src = tmp_path / "src.txt"
    src.write_text("x")
    flags = []
    for i in range(65):
        flags += ["--file", f"{src}:f{i}"]
    r = arun([*flags, "--", "/bin/echo", "SANDBOX-RAN"])
    _check_all([("65 x --file", _usage_error(r, "--file"))])
    assert "too many" in r.err, _short(r)


def test_file_dst_in_system_dirs_changes_nothing_on_host(arun, tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("payload")
    for where in ["/usr", "/etc", "/workspace/../../usr", "/usr/bin"]:
        name = f"airlock-hostile-{os.getpid()}-{secrets.token_hex(3)}"
        host = pathlib.Path(where.replace("/workspace/../..", "")) / name
        try:
            r = arun(["--file", f"{src}:{where}/{name}", "--", "/bin/true"])
            assert not host.exists(), f"--file wrote {host} on the host"
            # A '..' does not normalize: a usage error (64) before anything is made.
            assert r.returncode in ((64,) if ".." in where else (0, 125)), (where, _short(r))
        finally:
            if host.exists():
                host.unlink()


# --------------------------------------------------------------------------
# --workdir and --file destinations: one normal form (src/common/path.c)


def test_workdir_pseudo_fs_however_spelled_is_a_usage_error(arun):
    """The rule (no workdir in /proc, /sys or /dev, nor "/", which holds them) is judged
    on the normal form: "//proc" is "/proc". What does not normalize ('.', '..',
    relative) is refused too, before anything is made."""
    cases = []
    for wd, needle in (("//proc", "/proc"), ("//sys/x", "/sys/x"), ("//dev", "/dev"),
                       ("/proc//", "/proc"), ("/", "/"), ("//", "/"),
                       ("/./dev", "'.'"), ("/proc/.", "'.'"),
                       ("/workspace//../proc", "'..'"), ("rel", "absolute")):
        r = arun(["--workdir", wd, "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((wd, _usage_error(r, "--workdir", needle)))
    _check_all(cases)


def test_workdir_with_repeated_slashes_is_normalized(arun, tmp_path):
    src = tmp_path / "f.txt"
    src.write_text("copied\n")
    r = arun(["--workdir", "//tmp//wd///", "--file", f"{src}:sub//f.txt", "--",
              "/bin/sh", "-c", "pwd; cat sub/f.txt"])
    assert r.returncode == 0, _short(r)
    assert r.out == "/tmp/wd\ncopied\n", _short(r)
    r = arun(["--file", f"{src}:sub/./f.txt", "--", "/bin/echo", "SANDBOX-RAN"])
    _check_all([("dst with '.'", _usage_error(r, "--file", "'.'"))])


# --------------------------------------------------------------------------
# --env


def test_env_malformed_exit_64(arun):
    cases = []
    for v in ["NOEQ", "=value", ""]:
        r = arun(["--env", v, "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((f"--env {v!r}", _usage_error(r, "--env", f"'{v}'")))
    _check_all(cases)


def test_env_huge_value_and_many_entries(arun):
    big = "v" * 100_000
    flags = ["--env", f"BIG={big}"]
    for i in range(1500):
        flags += ["--env", f"V{i}=x{i}"]
    r = arun([*flags, "--", PY, "-c",
              "import os; print(len(os.environ['BIG']), sum(k.startswith('V') for k in os.environ))"])
    assert r.returncode == 0, _short(r)
    assert r.out.split() == ["100000", "1500"], _short(r)


# --------------------------------------------------------------------------
# --policy files


def _pol(tmp_path, data, name="policy.json"):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(p)


def test_policy_deny_all_prefix_with_garbage_refused(arun, tmp_path):
    """is_deny_all() (src/jail/run.c) only compares a prefix, so a document that is
    not valid JSON but starts with "deny-all" skips the parser and runs."""
    cases = []
    for doc in [b'"deny-all" trailing-garbage', b'"deny-all", {"allow": ["x.test"]}']:
        r = arun(["--policy", _pol(tmp_path, doc), "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((repr(doc), _usage_error(r)))
    _check_all(cases)


def test_policy_with_nul_byte_refused(arun, tmp_path):
    """The file is read into a C string: everything after a NUL byte is ignored, so
    '{...}\\0garbage' (not JSON) is accepted."""
    r = arun(["--policy", _pol(tmp_path, b'{"allow": ["x.test"]}\0garbage'),
              "--", "/bin/echo", "SANDBOX-RAN"])
    _check_all([("NUL in policy", _usage_error(r))])


def test_policy_directory_named_in_error(arun, tmp_path):
    d = tmp_path / "policy-dir"
    d.mkdir()
    r = arun(["--policy", str(d), "--", "/bin/echo", "SANDBOX-RAN"])
    _check_all([("--policy DIR", _usage_error(r))])
    assert str(d) in r.err or "directory" in r.err.lower(), \
        f"the message should name the directory: {r.err!r}"


def test_policy_wrong_shapes_exit_64(arun, tmp_path):
    cases = []
    for doc, needle in [
        ("", "JSON"), ("   \n", "JSON"), ("null", "null"), ("[]", "array"),
        ('{"allow": [1]}', "allow[0]"), ('{"subnets": []}', "subnets"),
        ('{"subnets": {"allow": ["300.1.1.1/8"]}}', "300.1.1.1/8"),
        ('{"subnets": {"deny": ["10.0.0.0/33"]}}', "10.0.0.0/33"),
        ('{"mode": 1}', "mode"),
    ]:
        r = arun(["--policy", _pol(tmp_path, doc), "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((repr(doc), _usage_error(r, needle)))
    _check_all(cases)


def test_policy_large_but_valid_runs(arun, tmp_path):
    """1000 names (the documented maximum) of ~190 bytes: a valid ~195 KB document.
    The policy goes to the gateway in one argv string, so execve fails with E2BIG
    (MAX_ARG_STRLEN = 128 KiB) and the run 'fails to set up'."""
    lab = "a" * 60
    doc = {"allow": [f"{lab}.{lab}.{lab}.h{i}.test" for i in range(1000)]}
    r = arun(["--policy", _pol(tmp_path, json.dumps(doc)), "--", "/bin/echo", "ok"],
             timeout=60)
    assert r.returncode == 0, _short(r)
    assert r.out == "ok\n"


def test_policy_over_the_entry_limit_exit_64(arun, tmp_path):
    """200,000 domains (2.9 MB): refused as a usage error with the documented limit
    (`allow has N entries (at most 1000)`) or as too large -- not a set-up failure."""
    doc = {"allow": [f"h{i}.test" for i in range(200_000)]}
    r = arun(["--policy", _pol(tmp_path, json.dumps(doc)), "--", "/bin/echo", "SANDBOX-RAN"],
             timeout=60)
    _check_all([("200k domains", _usage_error(r))])
    assert "1000" in r.err or "large" in r.err or "big" in r.err, _short(r)


def test_policy_over_1mib_is_not_truncated(arun, tmp_path):
    """A valid document, 1 MiB of blanks, then garbage: the whole file is not JSON.
    Today only the first 1 MiB is read (then the gateway's argv is too long: 125)."""
    data = b'{"allow": ["x.test"]}' + b" " * (1 << 20) + b"garbage"
    r = arun(["--policy", _pol(tmp_path, data), "--", "/bin/echo", "SANDBOX-RAN"],
             timeout=60)
    _check_all([("1 MiB + garbage", _usage_error(r))])


# --------------------------------------------------------------------------
# --allow / --allow-cidr / --deny-cidr and conflicting network flags


def test_bad_network_flag_values_exit_64(arun):
    long_name = "a" * 300 + ".test"
    cases = []
    for flag, v, needle in [
        ("--allow", "", "empty"), ("--allow-cidr", "", "CIDR"),
        ("--deny-cidr", "10.0.0.0/08", "10.0.0.0/08"), ("--allow-cidr", "::1/129", "::1/129"),
        ("--allow-cidr", "10.0.0.0/-1", "10.0.0.0/-1"),
        ("--allow", "localhost", "localhost"), ("--allow", "127.0.0.1", "127.0.0.1"),
        ("--allow", long_name, "a" * 40), ("--allow", "x.test\nevil.test", "x.test"),
    ]:
        r = arun([flag, v, "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((f"{flag} {v[:40]!r}", _usage_error(r, needle)))
    _check_all(cases)


def test_net_deny_with_allow_is_a_conflict(arun):
    """`--net deny` (no network) and `--allow x` contradict each other; today the
    allowlist silently wins and the sandbox gets a gateway."""
    r = arun(["--net", "deny", "--allow", "x.test", "--", "/bin/echo", "SANDBOX-RAN"])
    _check_all([("--net deny --allow", _usage_error(r, "--net", "--allow"))])


def test_conflicting_policy_flags_exit_64(arun, tmp_path):
    pol = _pol(tmp_path, '"deny-all"')
    cases = []
    for flags in (["--policy", pol, "--allow", "x.test"],
                  ["--policy", pol, "--net", "deny"],
                  ["--policy", pol, "--deny-cidr", "198.51.100.0/24"],
                  ["--net", "allow-all", "--allow-cidr", "198.51.100.0/24"]):
        r = arun([*flags, "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((" ".join(flags), _usage_error(r, "cannot be combined")))
    _check_all(cases)


@pytest.mark.parametrize("flags", [["--allow-cidr", "10.0.0.0/33"], ["--memory", "12Q"]],
                         ids=["bad-cidr", "bad-memory"])
def test_egress_log_not_created_on_usage_error(arun, tmp_path, flags):
    """A usage error changes nothing on the host: the --egress-log file must not be
    created (today it is opened before the policy is checked by the gateway)."""
    log = tmp_path / "egress.jsonl"
    r = arun(["--egress-log", str(log), *flags, "--", "/bin/echo", "SANDBOX-RAN"])
    assert r.returncode == 64, _short(r)
    assert not log.exists(), "the --egress-log file was created by a run that was refused"


def test_upstream_dns_bad_port_exit_64(arun):
    """A bad port is a bad flag value, like a bad address already is; today the
    gateway fails later and the message is just 'setup failed: failed'."""
    cases = []
    for value in ["127.0.0.1:99999", "127.0.0.1:", "127.0.0.1:0"]:
        r = arun(["--upstream-dns", value, "--allow", "x.test", "--", "/bin/echo",
                  "SANDBOX-RAN"])
        cases.append((value, _usage_error(r, "--upstream-dns", value) +
                      ([f"stderr: {r.err.strip()[:200]!r}"] if r.returncode != 64 else [])))
    _check_all(cases)


def test_refused_policy_leaves_no_gateway(arun):
    """The gateway judges the policy; when it refuses it, no gateway stays behind."""
    name = f"gone-{os.getpid()}-{secrets.token_hex(3)}.test"
    r = arun(["--allow", name, "--allow-cidr", "10.0.0.0/33", "--", "/bin/true"])
    assert r.returncode == 64, _short(r)
    deadline = time.monotonic() + 3
    while host_pids_matching(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_matching(name) == []


# --------------------------------------------------------------------------
# command, argv, unknown flags, --hostname


def test_empty_command_exit_64(arun):
    r = arun(["--", ""])
    _check_all([("-- ''", _usage_error(r, "command"))])


def test_unknown_flags_exit_64(arun):
    cases = []
    for flag in ["-x", "-Z", "--root=yes", "--json=1", "--bogus=1", "---"]:
        r = arun([flag, "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((flag, _usage_error(r, flag)))
    _check_all(cases)


def test_very_long_argv_passes_through(arun):
    args = [f"arg{i:06d}-" + "z" * 40 for i in range(20_000)]   # ~1 MB
    r = arun(["--", PY, "-c",
              "import sys, hashlib; print(len(sys.argv) - 1, "
              "hashlib.sha256('\\0'.join(sys.argv[1:]).encode()).hexdigest())", *args],
             timeout=60)
    want = hashlib.sha256("\0".join(args).encode()).hexdigest()
    assert r.returncode == 0, _short(r)
    assert r.out.split() == [str(len(args)), want]


def test_very_long_command_name_not_found(arun):
    name = "no-such-command-" + "x" * 5000
    r = arun(["--", name])
    assert r.returncode == 127, _short(r)
    assert "not found" in r.err, _short(r)


def test_hostname_with_bad_characters_exit_64(arun):
    """--hostname goes into the generated /etc/hosts: a newline adds host entries of
    the caller's choosing. Only hostname characters (RFC 1123) should be accepted."""
    cases = []
    for name in ["evil\n10.0.0.1 github.com", "a/b", "has space"]:
        r = arun(["--hostname", name, "--", "/bin/cat", "/etc/hosts"])
        cases.append((repr(name), _usage_error(r, "--hostname") +
                      ([f"/etc/hosts inside: {r.out!r}"] if r.returncode == 0 else [])))
    _check_all(cases)


# --------------------------------------------------------------------------
# airlock pool


def test_pool_bad_arguments_exit_64(invoke, tmp_path):
    pool = tmp_path / "pool"
    env = {"AIRLOCK_POOL": str(pool)}
    cases = []
    for args in (["fill", "0"], ["fill", "65"], ["fill", "-1"], ["fill", "abc"],
                 ["fill", ""], ["fill", "99999999999999999999"], ["fill", "3x"],
                 ["fill", "1", "2"], ["status", "extra"], ["bogus"], [],
                 # strtoul takes these; a count is digits only
                 ["fill", " 3"], ["fill", "+3"]):
        r = invoke(["pool", *args], env=env)
        p = []
        if r.returncode != 64:
            p.append(f"exit {r.returncode}, want 64")
        if "usage: airlock pool" not in r.err and not r.err.startswith("airlock pool"):
            p.append(f"no message: {r.err[:200]!r}")
        if len(args) == 2 and args[0] == "fill" and f"'{args[1]}'" not in r.err:
            p.append(f"stderr does not name {args[1]!r}")
        if r.out:
            p.append(f"stdout not empty: {r.out[:100]!r}")
        cases.append((" ".join(args) or "(none)", p))
    made = list(pool.rglob("*")) if pool.exists() else []
    if made:
        invoke(["pool", "drain"], env=env, timeout=60)
    _check_all(cases)
    assert not made, f"a refused `pool` command made {made[:5]}"


def test_pool_relative_env_exit_64(invoke):
    for value in ["relative/pool", ""]:
        r = invoke(["pool", "status"], env={"AIRLOCK_POOL": value})
        assert r.returncode == 64, (value, _short(r))
        assert "AIRLOCK_POOL" in r.err, (value, _short(r))


# --------------------------------------------------------------------------
# nothing left behind


BIN_DIR = os.path.dirname(os.path.abspath(
    os.environ.get("AIRLOCK_BIN", str(pathlib.Path(__file__).resolve().parents[2]
                                      / "build" / "airlock"))))


def _host_state():
    """What a leak of ours could add. Other suites may run at the same time: their
    fake-internet namespace and veth (alnet-*, alh*) and their processes (another
    binary directory) are not counted."""
    def ls(p, pred=lambda n: True):
        try:
            return {f"{p}/{n}" for n in os.listdir(p) if pred(n)}
        except OSError:
            return set()
    links = {n for n in os.listdir("/sys/class/net") if not n.startswith("alh")}
    # The root templates are kept on purpose (src/jail/ahead/template.h), and made by the
    # first run that needs one: not a leak.
    with open("/proc/self/mountinfo") as f:
        mounts = {line.split()[4] for line in f
                  if not line.split()[4].startswith("/run/airlock/template/")}
    files = (ls("/tmp", lambda n: "airlock" in n) | ls("/dev/shm") |
             ls("/run", lambda n: "airlock" in n or n == "netns") |
             ls("/run/netns", lambda n: not n.startswith("alnet-")) |
             ls("/run/airlock", lambda n: n != "template"))
    procs = set(host_pids_matching(BIN_DIR + "/"))
    return {"links": links, "mounts": mounts, "files": files,
            # `airlock run` names its cgroups run-<pid>-...; ahead-* and sbx_* are airlockd's
            # (another suite's daemon may be running)
            "cgroups": {c for c in cgroup_children() if os.path.basename(c).startswith("run-")},
            "procs": procs}


def test_bad_input_leaves_nothing_behind(arun, tmp_path):
    """A batch of refused runs (usage errors, policies the gateway refuses, set-up
    failures) adds no network interface, mount, file in /tmp /dev/shm /run, cgroup
    or process on the host."""
    src = tmp_path / "src.txt"
    src.write_text("x")
    rules = _pol(tmp_path, json.dumps({"allow": {"x.test": [{"response": {
        "statusCode": 200, "body": "x", "contentType": "text/plain"}}]}}), "rules.json")
    bad_rules = _pol(tmp_path, json.dumps({"allow": {"x.test": [{"match": {"path": {
        "regex": "(("}}, "response": {"statusCode": 200}}]}}), "bad-rules.json")
    batch = [
        ["--memory", "12Q"], ["--allow-cidr", "10.0.0.0/33"], ["--allow", "*.com"],
        ["--policy", str(tmp_path)], ["--file", "/nonexistent/x:x"], ["--disk", "8K"],
        ["--workdir", "/proc"], ["--pids", "4294967295"], ["--file", f"{src}:/usr/x"],
        ["--upstream-dns", "127.0.0.1:99999", "--allow", "x.test"],
        ["--upstream-netns", "airlock-no-such-ns", "--allow", "x.test"],
        ["--image", "/nonexistent/image"],
        # per-request rules: the gateway makes a CA in /tmp/airlock-ca-* first
        ["--policy", rules, "--file", "/nonexistent/x:x"],
        ["--policy", rules, "--pids", "4294967295"],
        ["--policy", bad_rules],
    ]
    before = _host_state()
    for flags in batch:
        arun([*flags, "--", "/bin/true"])
    deadline = time.monotonic() + 3
    while True:
        after = _host_state()
        # live pids of others may come and go; a leak of ours is one that stays
        new = {k: sorted(after[k] - before[k]) for k in after}
        new["procs"] = [p for p in new["procs"] if os.path.exists(f"/proc/{p}/cmdline")
                        and open(f"/proc/{p}/cmdline", "rb").read()]
        new = {k: v for k, v in new.items() if v}
        if not new or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    assert not new, f"left behind on the host: {new}"


def test_upstream_flags_that_name_nothing_usable_exit_64(arun, tmp_path):
    """--upstream-netns empty, missing, or not a network namespace, and --upstream-ca a
    directory: the caller's mistakes, refused with 64 naming the value (they were
    accepted, or a set-up failure, 125)."""
    cases = []
    for flags, needle in ((["--upstream-netns", ""], "--upstream-netns"),
                          (["--upstream-netns", "airlock-no-such-ns"], "airlock-no-such-ns"),
                          (["--upstream-netns", "/proc/self/ns/mnt"], "not a network namespace"),
                          (["--upstream-ca", str(tmp_path)], str(tmp_path))):
        r = arun([*flags, "--allow", "x.test", "--", "/bin/echo", "SANDBOX-RAN"])
        cases.append((" ".join(flags), _usage_error(r, needle)))
    _check_all(cases)


def test_abbreviated_long_options_are_refused(arun, invoke, tmp_path):
    # getopt_long takes any unique prefix: `--time 5` meant --timeout, and the day an
    # option with the same prefix came, a script would break or change meaning. The
    # full name is the only spelling (`--timeout 5` and `--timeout=5` still work).
    marker = tmp_path / "ran"
    cases = []
    for args, needle in ((["--time", "5"], "--time"), (["--mem=64M"], "--mem="),
                         (["--egress", str(tmp_path / "e.jsonl")], "--egress"), (["--allo", "a.test"], "--allo")):
        r = arun([*args, "--", "/bin/sh", "-c", f"touch {marker}"])
        cases.append((" ".join(args), _usage_error(r, needle)))
    for args in (["--timeout", "5"], ["--timeout=5"]):
        r = arun([*args, "--", "/bin/true"])
        cases.append((" ".join(args), [] if r.returncode == 0 else [f"exit {r.returncode}"]))
    for args in (["--ret", "1h"], ["--keep", "5"], ["--state", "/nonexistent"]):
        r = invoke(["serve", *args, "--listen", "none"], timeout=10)
        cases.append(("serve " + " ".join(args), _usage_error(r, args[0])))
    _check_all(cases)
    assert not marker.exists()
