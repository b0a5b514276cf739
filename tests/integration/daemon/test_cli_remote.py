"""The client subcommands (airlock create/exec/cp/ls/logs/stop/policy) against a live
daemon: human output, --json, exit codes, and errors that say what to do."""
import json
import os
import subprocess

from .conftest import TOKENS


def cli(daemon, *args, token="A", input=None, timeout=60, env=None):
    e = dict(os.environ, AIRLOCK_URL=f"http://127.0.0.1:{daemon.port}",
             AIRLOCK_TOKEN=TOKENS[token] if token else "", AIRLOCK_STATE_DIR="/nonexistent")
    e.pop("AIRLOCK_SOCKET", None)
    if env:
        e.update(env)
    return subprocess.run([daemon.binary, *args], input=input, capture_output=True,
                          timeout=timeout, env=e)


def test_create_exec_stop_cycle(daemon):
    r = cli(daemon, "create", "--memory", "256M", "--timeout", "2m", "--env", "GREETING=hi")
    assert r.returncode == 0, r.stderr
    sbx = r.stdout.decode().strip()
    assert sbx.startswith("sbx_")
    try:
        r = cli(daemon, "exec", sbx, "--", "sh", "-c", 'echo "$GREETING"; echo err >&2; exit 5')
        assert (r.returncode, r.stdout, r.stderr) == (5, b"hi\n", b"err\n")
        r = cli(daemon, "exec", "--sudo", sbx, "--", "id", "-u")
        assert r.stdout == b"0\n"
        r = cli(daemon, "exec", sbx, "--", "python3", "-c", "import sys; print(sys.stdin.read()[::-1])",
                input=b"stressed")
        assert r.stdout == b"desserts\n", r.stderr
        r = cli(daemon, "exec", sbx, "--", "no-such-program")
        assert r.returncode == 127, r
    finally:
        r = cli(daemon, "stop", sbx)
    assert r.returncode == 0 and r.stdout.decode().split() == [sbx, "stopped"], r
    r = cli(daemon, "exec", sbx, "--", "true")
    assert r.returncode != 0 and b"stopped" in r.stderr, r


def test_cp_in_and_out_ls_and_logs(daemon, sandbox, tmp_path):
    src = tmp_path / "proj"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "data.txt").write_text("payload\n")
    (src / "run.py").write_text("print(open('proj/sub/data.txt').read().upper(), end='')\n")
    r = cli(daemon, "cp", str(src), f"{sandbox}:/workspace")
    assert r.returncode == 0, r.stderr
    r = cli(daemon, "exec", sandbox, "--", "python3", "proj/run.py")
    assert r.stdout == b"PAYLOAD\n", r
    r = cli(daemon, "ls", f"{sandbox}:/workspace/proj")
    assert r.returncode == 0 and b"run.py" in r.stdout and b"sub/" in r.stdout, r
    out = tmp_path / "back.txt"
    r = cli(daemon, "cp", f"{sandbox}:/workspace/proj/sub/data.txt", str(out))
    assert r.returncode == 0 and out.read_text() == "payload\n", r
    r = cli(daemon, "cp", f"{sandbox}:/workspace/missing", str(tmp_path / "x"))
    assert r.returncode != 0 and b"HTTP 404" in r.stderr and not (tmp_path / "x").exists()
    r = cli(daemon, "exec", "-d", sandbox, "--", "sh", "-c", "echo one; sleep 0.2; echo two")
    cmd = r.stdout.decode().strip()
    assert cmd.startswith("cmd_"), r
    r = cli(daemon, "logs", sandbox, cmd)
    assert r.returncode == 0 and r.stdout == b"one\ntwo\n", r
    r = cli(daemon, "ls", "--json")
    ids = [s["id"] for s in json.loads(r.stdout)["sandboxes"]]
    assert sandbox in ids


def test_policy_and_json_output(daemon, sandbox):
    r = cli(daemon, "policy", sandbox, "allow-all", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["sandbox"]["network_policy"] == "allow-all"
    r = cli(daemon, "policy", sandbox, "{not json")
    assert r.returncode == 64 and b"not deny-all, allow-all or a JSON" in r.stderr
    r = cli(daemon, "exec", "--json", sandbox, "--", "echo", "x")
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines[0]["type"] == "start" and lines[-1]["type"] == "exit", lines


def test_errors_say_what_to_do(daemon, sandbox):
    r = cli(daemon, "exec", sandbox, "--", "true", token="B")
    assert r.returncode != 0 and b"no sandbox" in r.stderr, r        # other team: not found
    r = cli(daemon, "ls", token=None)
    assert r.returncode == 64 and b"no API token" in r.stderr, r
    r = cli(daemon, "ls", env={"AIRLOCK_URL": "http://127.0.0.1:1"})
    assert r.returncode == 125 and b"is `airlock serve` running?" in r.stderr, r
    r = cli(daemon, "exec", sandbox)
    assert r.returncode == 64 and b"usage: airlock exec" in r.stderr, r
    r = cli(daemon, "cp", "a", "b")
    assert r.returncode == 64 and b"SANDBOX:PATH" in r.stderr, r
