"""A command that ends soon gets its whole NDJSON answer in one piece (src/api/stream.c,
api_hold): when the stream ends within API_HOLD_MS (10 ms) of the request with at most
API_HOLD_MAX (64 KiB) of lines, the answer carries a Content-Length -- one write, one
wake-up of the client -- instead of a chunk per line and the chunked terminator. The
lines are the same either way. A longer command, or a larger output, is streamed as
before: its first lines arrive while it still runs. The agent's pipes for a command are
made ahead, after the command before it has ended (src/agent/cmd.c, make_spare): each
command still gets its own stdin, stdout and stderr, and nothing else."""

import json
import time

from .conftest import read_ndjson

HOLD_MAX = 64 * 1024


def run_raw(api, sid, body, timeout=60):
    """(status, headers, lines, seconds to the first line) of a run with wait."""
    conn, resp = api.stream("POST", f"/v1/sandboxes/{sid}/commands",
                            body={"wait": True, **body}, timeout=timeout)
    try:
        t0 = time.monotonic()
        first = resp.readline()
        t_first = time.monotonic() - t0
        lines = [json.loads(first)] if first else []
        lines += read_ndjson(resp)
        headers = {k.lower(): v for k, v in resp.getheaders()}
        return resp.status, headers, lines, t_first
    finally:
        conn.close()


def test_a_short_command_is_answered_in_one_piece(api, sandbox):
    status, headers, lines, _ = run_raw(api, sandbox, {"cmd": "true"})
    assert status == 200
    assert headers["content-type"].startswith("application/x-ndjson"), headers
    assert "transfer-encoding" not in headers, headers
    assert int(headers["content-length"]) > 0, headers
    assert [ln["type"] for ln in lines] == ["start", "exit"], lines
    assert lines[0]["command"]["id"] == lines[1]["command"]["id"]
    assert lines[0]["command"]["status"] == "running"
    assert lines[1]["command"]["exit_code"] == 0 and lines[1]["command"]["reason"] == "exited"


def test_output_status_and_stdin_are_the_same_in_one_piece(api, sandbox):
    # `sh` must end within the 10 ms window for the answer to be held: on a loaded host
    # (the AddressSanitizer pass of a slow run) one try may miss it. Every answer must
    # be right, held or streamed; one of five tries must be held.
    held = []
    for _ in range(5):
        status, headers, lines, _ = run_raw(api, sandbox, {
            "cmd": "/bin/sh", "args": ["-c", "read x; echo out=$x; echo err >&2; exit 3"],
            "stdin": "in\n"})
        assert status == 200, headers
        types = [ln["type"] for ln in lines]
        assert types[0] == "start" and types[-1] == "exit", types
        out = "".join(ln["data"] for ln in lines if ln["type"] == "stdout")
        err = "".join(ln["data"] for ln in lines if ln["type"] == "stderr")
        assert (out, err, lines[-1]["command"]["exit_code"]) == ("out=in\n", "err\n", 3), lines
        held.append("content-length" in headers)
        if held[-1]:
            break
    assert any(held), "five answers, none in one piece"


def test_a_longer_command_is_streamed_while_it_runs(api, sandbox):
    status, headers, lines, t_first = run_raw(
        api, sandbox, {"cmd": "/bin/sh", "args": ["-c", "echo early; sleep 1; echo late"]})
    assert status == 200
    assert headers.get("transfer-encoding") == "chunked", headers
    assert "content-length" not in headers, headers
    # The start line came long before the end: the stream was not held for the command.
    assert t_first < 0.5, t_first
    out = "".join(ln["data"] for ln in lines if ln["type"] == "stdout")
    assert out == "early\nlate\n", lines
    assert lines[-1]["type"] == "exit" and lines[-1]["command"]["exit_code"] == 0


def test_a_large_output_is_streamed_not_held(api, sandbox):
    n = 4 * HOLD_MAX
    status, headers, lines, _ = run_raw(api, sandbox, {
        "cmd": "/bin/sh", "args": ["-c", f"head -c {n} /dev/zero | tr '\\0' x"]})
    assert status == 200
    assert headers.get("transfer-encoding") == "chunked", headers
    out = "".join(ln["data"] for ln in lines if ln["type"] == "stdout")
    assert out == "x" * n
    assert lines[-1]["command"]["exit_code"] == 0


def test_vercel_api_short_command_in_one_piece(api, sandbox):
    conn, resp = api.stream("POST", f"/v2/sandboxes/sessions/{sandbox}/cmd",
                            body={"command": "true", "wait": True})
    try:
        headers = {k.lower(): v for k, v in resp.getheaders()}
        lines = read_ndjson(resp)
    finally:
        conn.close()
    assert resp.status == 200, lines
    assert "content-length" in headers and "transfer-encoding" not in headers, headers
    assert len(lines) == 2, lines
    assert lines[0]["command"]["id"] == lines[1]["command"]["id"], lines
    assert lines[1]["command"]["exitCode"] == 0, lines


def test_each_command_gets_its_own_pipes_and_no_other_fds(api, sandbox):
    """The agent hands later commands pipes it made after the command before ended:
    they must carry only that command's stdio, and the command must hold no other fd."""
    for i in range(6):
        out = api.sh(sandbox, f"ls /proc/self/fd; cat; echo err{i} >&2",
                     stdin=f"in{i}\n")
        lines = out.out.split()
        fds = sorted(int(x) for x in lines[:-1])
        # ls's own directory fd is the one above stderr
        assert fds[:3] == [0, 1, 2] and len(fds) <= 4, (i, out.out)
        assert lines[-1] == f"in{i}", (i, out.out)
        assert out.err == f"err{i}\n", (i, out)
        assert out.exit["exit_code"] == 0


def test_a_background_process_holding_old_pipes_does_not_leak_into_the_next(api, sandbox):
    """A command's leftover child keeps that command's stdout open: the next command (on
    pipes made ahead) must end on its own, with only its own output."""
    api.sh(sandbox, "true")  # the first command: from now on the pipes come made ahead
    out = api.sh(sandbox, "(sleep 30; echo stale) & echo started")
    assert out.out == "started\n", out
    t0 = time.monotonic()
    out = api.sh(sandbox, "echo next")
    assert out.out == "next\n" and out.exit["exit_code"] == 0, out
    assert time.monotonic() - t0 < 10
