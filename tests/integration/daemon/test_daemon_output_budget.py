"""A sandbox's output budget in the store (`airlock serve --sandbox-output-max SIZE`),
and each command's own cap per stream (`--command-output-max SIZE`, default 64 MiB).

Each command's stored output was capped, but a sandbox could run
command after command for up to 24 h and fill the host's disk through the daemon's
store. Now all of a sandbox's commands together may store SIZE (default 1 GiB);
beyond it their output is dropped and they say "output_truncated": true. The
commands still run and report their exit; other sandboxes are not affected. Ended
sandboxes' output together is bounded as well (`--keep-ended-output`)."""
import subprocess
import time

import pytest

from .conftest import own_api, wait_for

BUDGET = 64 * 1024


@pytest.fixture(scope="module")
def bapi(tmp_path_factory):
    yield from own_api(tmp_path_factory, "airlockd-budget", "--sandbox-output-max", "64K")


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


def test_a_restarted_daemon_counts_what_the_store_holds(bapi):
    sid = bapi.create_ok()["id"]
    assert chatty(bapi, sid, 60_000, "a").exit["output_truncated"] is False
    bapi.daemon.term()  # the sandbox keeps running
    bapi.daemon.start()
    out = chatty(bapi, sid, 20_000, "b")
    # Before, a restart gave the sandbox a fresh budget: all 20,000 bytes were stored.
    assert out.exit["output_truncated"] is True
    assert len(out.out) == 64 * 1024 - 60_000 - len("done\n"), len(out.out)
    bapi.stop(sid)


@pytest.mark.parametrize("option", ["--sandbox-output-max", "--command-output-max"])
def test_a_bad_budget_is_refused(bapi, option):
    for bad in ("0", "1", "lots", "-1M", "4095", "1Q", ""):
        r = subprocess.run([bapi.daemon.binary, "serve", "--state-dir", "/nonexistent/x",
                            "--listen", "127.0.0.1:1", option, bad],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 64, (bad, r.returncode, r.stderr)
        assert f"{option} '{bad}'" in r.stderr, r.stderr


CMD_CAP = 8192


@pytest.fixture(scope="module")
def capi(tmp_path_factory):
    yield from own_api(tmp_path_factory, "airlockd-cmd-cap", "--command-output-max", "8K")


def test_stored_output_is_capped_per_stream(capi):
    """A command cannot fill the host's disk through its stored output: each stream
    keeps its first SIZE bytes, the rest is dropped and the command says so; the other
    stream, the exit code and the next command are not affected."""
    sid = capi.create_ok()["id"]
    c = capi.start_ok(sid, "/bin/sh", "-c",
                      f"head -c {CMD_CAP + 5000} /dev/zero | tr '\\0' x; "
                      "echo tail-on-stderr >&2; exit 3")
    done = capi.wait_ok(sid, c["id"], timeout_ms=60000)
    assert done["exit_code"] == 3 and done["output_truncated"] is True, done
    out = capi.logs(sid, c["id"], timeout=60)
    assert out.stdout == b"x" * CMD_CAP, len(out.stdout)
    assert out.stderr == b"tail-on-stderr\n"
    # Exactly the cap is kept whole, and is not truncated.
    exact = capi.sh(sid, f"head -c {CMD_CAP} /dev/zero | tr '\\0' y")
    assert exact.out == "y" * CMD_CAP and exact.exit["output_truncated"] is False, exact.exit
    small = capi.sh(sid, "echo small")
    assert small.out == "small\n" and small.exit["output_truncated"] is False
    capi.stop(sid)


@pytest.fixture(scope="module")
def kapi(tmp_path_factory):
    yield from own_api(tmp_path_factory, "airlockd-budget-keep", "--sandbox-output-max",
                          "64K", "--keep-commands", "2")


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


@pytest.fixture(scope="module")
def eapi(tmp_path_factory):
    yield from own_api(tmp_path_factory, "airlockd-ended-output", "--keep-ended-output",
                          "100K")


def test_ended_sandboxes_go_when_their_output_is_over_its_budget(eapi):
    # 1,000 ended sandboxes (--keep-ended) of up to 1 GiB each (--sandbox-output-max)
    # would be a terabyte of store: ended ones also go, oldest first, once their output
    # together is over --keep-ended-output.
    live = eapi.create_ok()["id"]
    assert len(chatty(eapi, live, 60_000, "l").out) == 60_000  # a live one never counts
    ended = []
    for ch in "xyz":
        sid = eapi.create_ok()["id"]
        assert len(chatty(eapi, sid, 40_000, ch).out) == 40_000
        eapi.stop(sid)
        ended.append(sid)
    # 120 KB of ended output: the oldest goes, the two newest (80 KB) stay.
    assert wait_for(lambda: eapi.get(ended[0]).status == 404, timeout=5)
    time.sleep(1.5)
    assert [eapi.get(s).status for s in ended[1:]] == [200, 200]
    assert eapi.sandbox(live)["status"] == "running"
    eapi.stop(live)
