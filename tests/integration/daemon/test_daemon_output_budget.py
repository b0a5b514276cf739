"""A sandbox's output budget in the store (`airlock serve --sandbox-output-max SIZE`).

Each command's stored output was capped (64 MiB a stream), but a sandbox could run
command after command for up to 24 h and fill the host's disk through the daemon's
store. Now all of a sandbox's commands together may store SIZE (default 1 GiB);
beyond it their output is dropped and they say "output_truncated": true. The
commands still run and report their exit; other sandboxes are not affected."""
import subprocess

import pytest

from .conftest import TOKENS, Api, Daemon, free_port, private_bindir, wait_for

BUDGET = 64 * 1024


@pytest.fixture(scope="module")
def bapi(tmp_path_factory):
    work = tmp_path_factory.mktemp("airlockd-budget")
    d = Daemon(work, free_port(), private_bindir(work))
    d.extra_args = ["--sandbox-output-max", "64K"]
    d.start()
    api = Api(d.port, TOKENS["A"])
    api.daemon = d
    yield api
    for s in api.list():
        if s["status"] == "running":
            api.stop(s["id"])
    d.term()


def chatty(api, sid, n, ch):
    out = api.sh(sid, f"head -c {n} /dev/zero | tr '\\0' {ch}; echo done >&2")
    assert out.exit["exit_code"] == 0, out.exit
    return out


def test_a_sandbox_stops_storing_output_past_its_budget(bapi):
    sid = bapi.create_ok()["id"]
    first = chatty(bapi, sid, 40_000, "a")
    assert first.out == "a" * 40_000 and first.err == "done\n"
    assert first.exit["output_truncated"] is False
    second = chatty(bapi, sid, 40_000, "b")
    # The budget runs out during this one: what was stored is a prefix, then nothing.
    assert second.exit["output_truncated"] is True
    assert second.out == "b" * len(second.out)
    assert 0 < len(second.out) < 40_000
    third = chatty(bapi, sid, 10_000, "c")
    assert third.exit["output_truncated"] is True
    assert third.out == "" and third.err == ""
    assert bapi.cmd_get(sid, third.exit["id"]).json["command"]["exit_code"] == 0
    # The sandbox still runs commands; their exit codes still come back.
    out = bapi.sh(sid, "exit 7")
    assert out.exit["exit_code"] == 7
    # The budget is the sandbox's own: another one stores its output in full.
    other = bapi.create_ok()["id"]
    assert chatty(bapi, other, 40_000, "d").out == "d" * 40_000
    bapi.stop(sid)
    bapi.stop(other)


def test_a_bad_budget_is_refused(bapi):
    for bad in ("0", "1", "lots", "-1M", "4095"):
        r = subprocess.run([bapi.daemon.binary, "serve", "--state-dir", "/nonexistent/x",
                            "--listen", "127.0.0.1:1", "--sandbox-output-max", bad],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 64, (bad, r.returncode, r.stderr)
        assert f"--sandbox-output-max '{bad}'" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def kapi(tmp_path_factory):
    work = tmp_path_factory.mktemp("airlockd-budget-keep")
    d = Daemon(work, free_port(), private_bindir(work))
    d.extra_args = ["--sandbox-output-max", "64K", "--keep-commands", "2"]
    d.start()
    api = Api(d.port, TOKENS["A"])
    yield api
    for s in api.list():
        if s["status"] == "running":
            api.stop(s["id"])
    d.term()


def test_forgotten_commands_give_their_budget_back(kapi):
    # The budget bounds what the store holds for the sandbox: when its old commands are
    # forgotten (--keep-commands), their output leaves the store and the room returns.
    sid = kapi.create_ok()["id"]
    assert chatty(kapi, sid, 60_000, "a").exit["output_truncated"] is False
    assert chatty(kapi, sid, 20_000, "b").exit["output_truncated"] is True  # over 64K
    for _ in range(2):
        kapi.sh(sid, "true")  # the two chatty ones are now past the newest 2

    def room_again():
        out = chatty(kapi, sid, 100, "c")
        return not out.exit["output_truncated"] and out.out == "c" * 100

    assert wait_for(room_again, timeout=5), "the forgotten output still counts"
    kapi.stop(sid)
