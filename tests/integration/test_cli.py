"""`airlock run`: flags, usage errors, exit codes, streaming, --json."""

import hashlib
import os
import shutil
import subprocess
import textwrap
import time

import pytest

from conftest import host_pids_matching

PY = "/usr/bin/python3"

REASONS = {"exited", "signaled", "timeout", "oom", "seccomp", "setup_failed",
           "exec_failed", "interrupted"}


# --------------------------------------------------------------------------
# help


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_prints_usage_and_exit_codes(run, flag):
    r = run([flag])
    assert r.returncode == 0, r.err
    text = (r.out + r.err)
    assert "usage" in text.lower()
    for code in ("64", "122", "124", "125", "126", "127"):
        assert code in text, f"exit code {code} missing from --help"
    for word in ("timeout", "memory", "pids", "json"):
        assert word in text, f"--{word} missing from --help"


# --------------------------------------------------------------------------
# exit codes


@pytest.mark.parametrize("code", [0, 1, 42, 255])
def test_exit_code_passthrough(run, sh, code):
    r = run(sh(f"exit {code}"))
    assert r.returncode == code, r.err


def test_true_is_quiet(run):
    r = run(["--", "/bin/true"])
    assert r.returncode == 0
    assert r.out == ""
    assert r.err == "", "airlock must not add noise to stderr on success"


def test_killed_by_signal_is_128_plus_n(run, sh):
    r = run(sh("kill -SEGV $$"))
    assert r.returncode == 139, r.err


def test_signal_json(run_json, sh):
    r = run_json(sh("kill -SEGV $$"))
    assert r.returncode == 139
    j = r.json
    assert j["reason"] == "signaled"
    assert j["signal"] == 11
    assert j["exit_code"] in (None, 139)


@pytest.mark.parametrize("cmd", ["/nonexistent/airlock-no-such-cmd",
                                 "airlock-no-such-cmd-xyz"])
def test_command_not_found_is_127(run, cmd):
    r = run(["--", cmd])
    assert r.returncode == 127, (r.returncode, r.err)
    assert r.err.strip(), "a reason should be printed on stderr"


def test_command_not_found_json(run_json):
    r = run_json(["--", "/nonexistent/airlock-no-such-cmd"])
    assert r.returncode == 127
    assert r.json["reason"] == "exec_failed"


@pytest.mark.parametrize("cmd", ["/etc/passwd", "/usr"])
def test_command_not_executable_is_126(run, cmd):
    r = run(["--", cmd])
    assert r.returncode == 126, (r.returncode, r.err)


def test_script_without_shebang_runs_under_sh(run, tmp_path):
    """POSIX execvp runs a file without a #! line with /bin/sh (glibc's does; airlock
    links musl, whose execvp does not, so airlock does it itself: jail_execvp)."""
    script = tmp_path / "noshebang"
    script.write_text('echo "ran:$0:$1:$2"\n')
    script.chmod(0o755)
    r = run(["--file", f"{script}:bin/noshebang", "--", "./bin/noshebang", "a", "b c"])
    assert r.returncode == 0, (r.returncode, r.err)
    assert r.out.strip() == "ran:./bin/noshebang:a:b c", r.out
    # found through PATH too
    r = run(["--file", f"{script}:bin/noshebang", "--", "sh", "-c",
             'PATH=/workspace/bin:$PATH exec env noshebang x'])
    assert r.returncode == 0 and r.out.strip() == "ran:/workspace/bin/noshebang:x:", r


def test_command_not_executable_json(run_json):
    r = run_json(["--", "/etc/passwd"])
    assert r.returncode == 126
    assert r.json["reason"] == "exec_failed"


# --------------------------------------------------------------------------
# usage errors


@pytest.mark.parametrize("args", [
    ["--bogus-flag", "--", "/bin/true"],
    ["--timeout", "abc", "--", "/bin/true"],
    ["--timeout", "", "--", "/bin/true"],
    ["--timeout", "5x", "--", "/bin/true"],
    ["--memory", "12Q", "--", "/bin/true"],
    ["--memory", "lots", "--", "/bin/true"],
    ["--disk", "12Q", "--", "/bin/true"],
    ["--output-limit", "12Q", "--", "/bin/true"],
    ["--pids", "abc", "--", "/bin/true"],
    ["--cpus", "abc", "--", "/bin/true"],
    ["--net", "allow-weird", "--", "/bin/true"],
    ["--net", "allow", "--", "/bin/true"],
    ["--timeout"],            # missing value
    [],                       # missing command
    ["--"],                   # missing command after --
    ["--timeout", "5s"],      # flags but no command
], ids=["unknown-flag", "timeout-abc", "timeout-empty", "timeout-unit",
        "memory-12Q", "memory-word", "disk-12Q", "output-12Q", "pids-abc",
        "cpus-abc", "net-weird", "net-allow", "flag-without-value",
        "no-command", "no-command-after-dashdash", "flags-no-command"])
def test_usage_errors_exit_64(run, args):
    r = run(args)
    assert r.returncode == 64, (r.returncode, r.out, r.err)
    assert r.err.startswith("airlock: "), r.err
    assert r.out == "", "nothing may run on a usage error"


def test_usage_error_does_not_run_command(run, tmp_path):
    # The workload would print; on a usage error nothing is printed to stdout.
    r = run(["--memory", "12Q", "--", "/bin/echo", "RAN"])
    assert r.returncode == 64
    assert "RAN" not in r.out


def test_net_deny_explicit(run):
    r = run(["--net", "deny", "--", "/bin/echo", "ok"])
    assert r.returncode == 0, r.err
    assert r.out == "ok\n"


def test_allowlisted_run_leaves_no_gateway(run):
    """Without an egress log the CLI does not wait for its gateway's exit: it
    kills it instead. The gateway must still be gone, promptly (a zombie has no
    command line, so it does not count: init reaps it)."""
    name = f"gone-{os.getpid()}.test"
    r = run(["--no-pool", "--allow", name, "--", "/bin/true"])
    assert r.returncode == 0, r.err
    deadline = time.monotonic() + 3
    while host_pids_matching(name) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert host_pids_matching(name) == []


def test_allowlisted_run_with_a_log_waits_for_its_lines(run, tmp_path):
    """With --egress-log the gateway is waited for: its lines are in the file
    when airlock returns (here the denied lookup's)."""
    log = tmp_path / "egress.jsonl"
    r = run(["--no-pool", "--allow", "allowed.test", "--egress-log", str(log), "--",
             "/usr/bin/getent", "hosts", "denied.test"])
    assert r.returncode != 0
    text = log.read_text()
    assert "denied.test" in text, text


@pytest.mark.parametrize("dur", ["30", "30s", "1.5s", "500ms", "2m", "1h"])
def test_duration_formats_accepted(run, dur):
    r = run(["--timeout", dur, "--", "/bin/echo", "ok"])
    assert r.returncode == 0, (dur, r.err)
    assert r.out == "ok\n"


@pytest.mark.parametrize("flag,size", [
    ("--memory", "64M"), ("--memory", "1G"), ("--memory", "67108864"),
    ("--output-limit", "512K"), ("--output-limit", "1048576"),
    ("--disk", "64M"), ("--disk", "512K"),
])
def test_size_formats_accepted(run, flag, size):
    r = run([flag, size, "--", "/bin/echo", "ok"])
    assert r.returncode == 0, (flag, size, r.err)
    assert r.out == "ok\n"


def test_fractional_cpus_accepted(run):
    r = run(["--cpus", "0.5", "--", "/bin/echo", "ok"])
    assert r.returncode == 0, r.err
    assert r.out == "ok\n"


def test_timeout_500ms(run):
    r = run(["--timeout", "500ms", "--", "/bin/sleep", "30"], timeout=15)
    assert r.returncode == 124, r.err
    assert r.duration < 3.0


# --------------------------------------------------------------------------
# streams


def test_stdout_and_stderr_separated(run, sh):
    r = run(sh("echo out; echo err >&2; echo out2"))
    assert r.returncode == 0
    assert r.out == "out\nout2\n"
    assert r.err == "err\n"


def test_stdin_passthrough_python(run):
    r = run(["--", PY, "-"], input=b"print(1)\n")
    assert r.returncode == 0, r.err
    assert r.out == "1\n"


def test_stdin_large_binary_roundtrip(run):
    data = os.urandom(3 << 20)
    r = run(["--", "/bin/cat"], input=data, timeout=60)
    assert r.returncode == 0, r.err
    assert len(r.stdout) == len(data)
    assert hashlib.sha256(r.stdout).digest() == hashlib.sha256(data).digest()


def test_stdin_eof_delivered(run):
    # wc must see EOF and terminate
    r = run(["--", "/usr/bin/wc", "-c"], input=b"12345")
    assert r.returncode == 0
    assert r.out.strip() == "5"


def test_stdin_devnull_gives_eof(run):
    r = run(["--", "/bin/cat"], timeout=10)
    assert r.returncode == 0
    assert r.out == ""


def test_dash_i_passes_stdin(run):
    r = run(["-i", "--", "/bin/cat"], input=b"hello-i\n")
    assert r.returncode == 0, r.err
    assert r.out == "hello-i\n"


def _run_with_tty_stdin(run, flags):
    import pty
    m, s = pty.openpty()
    try:
        os.write(m, b"typed-on-tty\n\x04")      # a line, then EOF (^D)
        return run([*flags, "--timeout", "5s", "--", "/bin/cat"], stdin=s, timeout=20)
    finally:
        os.close(m)
        os.close(s)


def test_terminal_stdin_not_passed_without_i(run):
    r = _run_with_tty_stdin(run, [])
    assert r.returncode == 0, r.err
    assert "typed-on-tty" not in r.out


def test_terminal_stdin_passed_with_i(run):
    r = _run_with_tty_stdin(run, ["-i"])
    assert r.returncode == 0, (r.returncode, r.err)
    assert r.out == "typed-on-tty\n"


def test_unread_stdin_does_not_block_exit(run):
    r = run(["--", "/bin/true"], input=os.urandom(16 << 20), timeout=20)
    assert r.returncode == 0, r.err
    assert r.duration < 5


def test_unread_stdin_does_not_block_timeout(run):
    r = run(["--timeout", "1s", "--", "/bin/sleep", "30"], input=os.urandom(16 << 20), timeout=20)
    assert r.returncode == 124, r.err
    assert r.duration < 3


def test_binary_stdout_exact(run, sh):
    r = run(sh("printf '\\000\\377\\001abc'"))
    assert r.stdout == b"\x00\xff\x01abc"


def test_callers_fds_not_passed(run, tmp_path):
    """The workload's stdout is a pipe even when the caller's is a file, and
    no other descriptor of the caller leaks into the sandbox."""
    secret = tmp_path / "secret-fd"
    secret.write_text("fd-secret-content")
    fd = os.open(secret, os.O_RDONLY)
    os.set_inheritable(fd, True)
    outf = tmp_path / "out.txt"
    src = textwrap.dedent("""
        import os, sys
        print("fd1", os.readlink("/proc/self/fd/1"))
        extra = []
        for fd in range(3, 256):
            try:
                os.fstat(fd)
                extra.append((fd, os.readlink("/proc/self/fd/%d" % fd)))
            except OSError:
                pass
        print("extra", extra)
    """)
    try:
        with open(outf, "wb") as out:
            res = run(["--", PY, "-c", src], stdout=out, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert res.returncode == 0, res.err
    text = outf.read_text()
    lines = dict(l.split(" ", 1) for l in text.splitlines() if " " in l)
    assert lines["fd1"].startswith("pipe:"), f"stdout inside is {lines['fd1']}, not a pipe"
    assert "fd-secret-content" not in text
    assert "secret-fd" not in text, f"caller fd leaked: {lines['extra']}"
    assert lines["extra"] == "[]", f"extra fds inside: {lines['extra']}"


# --------------------------------------------------------------------------
# --env, --workdir, --file


def test_env_flag(run):
    r = run(["--env", "FOO=bar", "--env", "EQ=a=b=c", "--env", "EMPTY=",
             "--", "/usr/bin/env"])
    assert r.returncode == 0, r.err
    lines = r.out.splitlines()
    assert "FOO=bar" in lines
    assert "EQ=a=b=c" in lines
    assert "EMPTY=" in lines


def test_env_flag_overrides_default(run):
    r = run(["--env", "LANG=en_US.UTF-8", "--", "/usr/bin/env"])
    assert r.returncode == 0, r.err
    langs = [l for l in r.out.splitlines() if l.startswith("LANG=")]
    assert langs == ["LANG=en_US.UTF-8"]


def test_default_workdir(run):
    r = run(["--", "/bin/pwd"])
    assert r.out == "/workspace\n"


def test_workdir_created(run, sh):
    r = run(["--workdir", "/tmp/a/b/c", *sh("pwd; touch f && echo wrote")])
    assert r.returncode == 0, r.err
    assert r.out == "/tmp/a/b/c\nwrote\n"


def test_file_copy_relative_dst(run, tmp_path):
    src = tmp_path / "data.txt"
    src.write_text("hello from host\n")
    r = run(["--file", f"{src}:data.txt", "--", "/bin/cat", "/workspace/data.txt"])
    assert r.returncode == 0, r.err
    assert r.out == "hello from host\n"


def test_file_copy_relative_to_workdir(run, tmp_path):
    src = tmp_path / "w.txt"
    src.write_text("in workdir\n")
    r = run(["--workdir", "/tmp/wd", "--file", f"{src}:sub/w.txt",
             "--", "/bin/cat", "/tmp/wd/sub/w.txt"])
    assert r.returncode == 0, r.err
    assert r.out == "in workdir\n"


def test_file_copy_absolute_dst_and_repeat(run, tmp_path, sh):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.write_text("AAA")
    b.write_text("BBB")
    r = run(["--file", f"{a}:/tmp/a.txt", "--file", f"{b}:/home/user/b.txt",
             *sh("cat /tmp/a.txt /home/user/b.txt")])
    assert r.returncode == 0, r.err
    assert r.out == "AAABBB"


def test_file_copy_directory(run, tmp_path, sh):
    d = tmp_path / "proj"
    (d / "sub").mkdir(parents=True)
    (d / "top.txt").write_text("top\n")
    (d / "sub" / "deep.txt").write_text("deep\n")
    r = run(["--file", f"{d}:proj",
             *sh("cat proj/top.txt proj/sub/deep.txt && echo new > proj/new.txt && cat proj/new.txt")])
    assert r.returncode == 0, r.err
    assert r.out == "top\ndeep\nnew\n"
    assert not (d / "new.txt").exists(), "writes inside must not reach the host copy"


def test_file_copy_binary_exact(run, tmp_path):
    data = os.urandom(1 << 20)
    src = tmp_path / "blob"
    src.write_bytes(data)
    r = run(["--file", f"{src}:blob", "--", "/bin/cat", "blob"], timeout=30)
    assert r.returncode == 0, r.err
    assert r.stdout == data


def test_file_copied_is_readable_and_writable_by_user(run, tmp_path, sh):
    src = tmp_path / "ro.txt"
    src.write_text("x")
    os.chmod(src, 0o600)   # owned by host root, mode 600
    r = run(["--file", f"{src}:ro.txt", *sh("cat ro.txt && echo y >> ro.txt && echo ok")])
    assert r.returncode == 0, r.err
    assert r.out.endswith("ok\n")


def test_file_nonexistent_setup_failed(run):
    r = run(["--file", "/nonexistent/airlock-src:x", "--", "/bin/true"])
    assert r.returncode == 125, (r.returncode, r.err)
    assert r.err.startswith("airlock: setup failed:"), r.err


def test_file_nonexistent_json(run_json):
    r = run_json(["--file", "/nonexistent/airlock-src:x", "--", "/bin/true"])
    assert r.returncode == 125
    assert r.json["reason"] == "setup_failed"
    assert isinstance(r.json.get("error"), str) and r.json["error"]


def test_file_symlink_in_dir_does_not_leak_host_file(run, tmp_path, sh):
    """A copied directory containing a symlink to a host file outside it must
    not bring that host file's content into the sandbox."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("HOST-SECRET-7731")
    d = tmp_path / "proj"
    d.mkdir()
    (d / "ok.txt").write_text("fine")
    os.symlink(outside / "secret.txt", d / "abs_link")
    os.symlink("../outside/secret.txt", d / "rel_link")
    r = run(["--file", f"{d}:proj",
             *sh("cat proj/ok.txt; cat proj/abs_link proj/rel_link 2>/dev/null; true")])
    assert r.returncode in (0, 125), r.err
    assert "HOST-SECRET-7731" not in r.out


@pytest.mark.parametrize("dst", ["../../../../../tmp/{n}", "/workspace/../../tmp/{n}",
                                 "/../../../tmp/{n}"])
def test_file_dst_cannot_escape_to_host(run, tmp_path, dst):
    """`..` in a --file destination resolves inside the sandbox or is
    refused; it never writes on the host."""
    n = "airlock-escape-%d-%d" % (os.getpid(), len(dst))
    src = tmp_path / "payload"
    src.write_text("payload")
    host_path = f"/tmp/{n}"
    try:
        r = run(["--file", f"{src}:{dst.format(n=n)}", "--", "/bin/true"])
        assert not os.path.exists(host_path), "--file wrote outside the sandbox"
        # '..' does not normalize (src/common/path.c): refused before anything is made
        assert r.returncode == 64, (r.returncode, r.err)
    finally:
        if os.path.exists(host_path):
            os.unlink(host_path)


def test_workdir_dotdot_cannot_escape_to_host(run):
    n = "/tmp/airlock-wd-escape-%d" % os.getpid()
    try:
        r = run(["--workdir", "/workspace/../../.." + n, "--", "/bin/true"])
        assert not os.path.exists(n), "--workdir created a directory on the host"
        # '..' does not normalize (src/common/path.c): refused before anything is made
        assert r.returncode == 64, (r.returncode, r.err)
    finally:
        if os.path.isdir(n):
            os.rmdir(n)


# --------------------------------------------------------------------------
# --image


STATIC_SRC = r"""
#include <stdio.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <string.h>
int main(int argc, char **argv) {
    printf("static-ok uid=%d\n", (int)getuid());
    printf("python=%s\n", access("/usr/bin/python3", F_OK) == 0 ? "present" : "absent");
    int fd = open("/bin/airlock-written", O_WRONLY | O_CREAT, 0644);
    printf("write-bin=%s\n", fd >= 0 ? "ok" : strerror(errno));
    fd = open("/marker-from-image", O_RDONLY);
    printf("image-file=%s\n", fd >= 0 ? "present" : "absent");
    return 7;
}
"""


@pytest.fixture(scope="module")
def static_image(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("gcc not available to build a static test binary")
    base = tmp_path_factory.mktemp("image")
    src = base / "hello.c"
    src.write_text(STATIC_SRC)
    root = base / "rootfs"
    for d in ("bin", "proc", "dev", "tmp", "etc", "home", "sys", "var"):
        (root / d).mkdir(parents=True)
    (root / "marker-from-image").write_text("x")
    subprocess.run(["gcc", "-static", "-O1", "-o", str(root / "bin" / "hello"), str(src)],
                   check=True)
    return root


def _tree(root):
    out = []
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(out)


def test_image_runs_static_binary(run, static_image):
    before = _tree(static_image)
    r = run(["--image", str(static_image), "--", "/bin/hello"])
    assert r.returncode == 7, (r.returncode, r.err)
    lines = r.out.splitlines()
    assert "static-ok uid=1000" in lines
    assert "python=absent" in lines, "host /usr must not be visible with --image"
    assert "image-file=present" in lines
    assert "write-bin=ok" not in lines, "the image must be read-only"
    assert _tree(static_image) == before, "the image directory was modified"


def test_image_nonexistent_setup_failed(run):
    r = run(["--image", "/nonexistent/airlock-image", "--", "/bin/true"])
    assert r.returncode == 125, (r.returncode, r.err)
    assert r.err.startswith("airlock: setup failed:"), r.err


def test_image_nonexistent_json(run_json):
    r = run_json(["--image", "/nonexistent/airlock-image", "--", "/bin/true"])
    assert r.returncode == 125
    assert r.json["reason"] == "setup_failed"
    assert r.json.get("error")


# --------------------------------------------------------------------------
# -t


def test_tty_flag(run):
    r = run(["-t", "--", PY, "-c", "import os;print(os.isatty(0), os.isatty(1))"])
    assert r.returncode == 0, r.err
    assert r.out.strip() == "True True"


def test_tty_merges_stderr_and_sets_term(run, sh):
    r = run(["-t", *sh("echo to-err >&2; echo TERM=${TERM:-unset}")])
    assert r.returncode == 0, r.err
    assert "to-err" in r.out
    assert "TERM=unset" not in r.out and "TERM=" in r.out


def test_tty_exit_code(run, sh):
    r = run(["-t", *sh("exit 5")])
    assert r.returncode == 5


def test_no_tty_by_default(run):
    r = run(["--", PY, "-c", "import os;print(os.isatty(0), os.isatty(1), os.isatty(2))"])
    assert r.out.strip() == "False False False"


# --------------------------------------------------------------------------
# --json


def _check_schema(j):
    for k, t in (("stdout", str), ("stderr", str), ("reason", str),
                 ("stdout_truncated", bool), ("stderr_truncated", bool)):
        assert k in j, f"missing key {k}"
        assert isinstance(j[k], t), f"{k} is {type(j[k]).__name__}"
    for k in ("exit_code", "signal"):
        assert k in j, f"missing key {k}"
        assert j[k] is None or (isinstance(j[k], int) and not isinstance(j[k], bool))
    assert isinstance(j.get("duration_ms"), (int, float)) and not isinstance(j["duration_ms"], bool)
    assert isinstance(j.get("peak_memory_bytes"), int) and not isinstance(j["peak_memory_bytes"], bool)
    assert j["reason"] in REASONS


def test_json_success(run_json, sh):
    r = run_json(sh("echo hello; echo oops >&2; exit 3"))
    j = r.json
    _check_schema(j)
    assert r.returncode == 3
    assert r.err == "", "with --json nothing is streamed"
    assert j["stdout"] == "hello\n"
    assert j["stderr"] == "oops\n"
    assert j["exit_code"] == 3
    assert j["signal"] is None
    assert j["reason"] == "exited"
    assert j["stdout_truncated"] is False and j["stderr_truncated"] is False
    assert 0 <= j["duration_ms"] < 10000
    assert j["peak_memory_bytes"] > 0
    assert "error" not in j or j["error"] in (None, "")


def test_json_zero(run_json):
    r = run_json(["--", "/bin/true"])
    _check_schema(r.json)
    assert r.returncode == 0
    assert r.json["exit_code"] == 0 and r.json["reason"] == "exited"


def test_json_timeout(run_json):
    r = run_json(["--timeout", "1s", "--", "/bin/sleep", "100"], timeout=20)
    j = r.json
    _check_schema(j)
    assert r.returncode == 124
    assert j["reason"] == "timeout"
    assert 900 <= j["duration_ms"] <= 5000
    assert j["exit_code"] in (None, 124)


def test_json_invalid_utf8_replaced(run_json, sh):
    r = run_json(sh("printf 'a\\377b'"))
    assert r.json["stdout"] == "a\ufffdb"


def test_json_with_stdin(run_json):
    r = run_json(["--", PY, "-"], input=b"import sys;print(sys.stdin.read()=='' and 'x' or 'y')\n")
    assert r.json["stdout"] == "x\n"


def test_json_peak_memory_reflects_usage(run_json, py):
    r = run_json(py("b = bytearray(200 << 20); print(len(b))"), timeout=30)
    assert r.json["exit_code"] == 0, r.json
    peak = r.json["peak_memory_bytes"]
    assert 200 << 20 <= peak <= 1 << 30, peak
