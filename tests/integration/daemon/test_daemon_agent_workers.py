"""airlockd reads every sandbox's agent with a few worker threads on one epoll set
(src/daemon/agent_io.c), not a thread per sandbox: an idle sandbox costs the daemon no
thread, and the frames of many busy sandboxes, split wherever the socket splits them,
still arrive whole and in order."""
import os
import threading

import pytest

from .conftest import TOKENS, Api, own_api, wait_for


@pytest.fixture(scope="module")
def wapi(tmp_path_factory):
    yield from own_api(tmp_path_factory, "airlockd-workers")


def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def test_idle_sandboxes_cost_the_daemon_no_thread(wapi):
    pid = wapi.daemon.proc.pid
    first = wapi.create_ok()["id"]
    assert wapi.sh(first, "true").exit["exit_code"] == 0
    before = threads(pid)
    ids = [wapi.create_ok()["id"] for _ in range(16)]
    for sid in ids:  # each agent connected and answering
        assert wapi.sh(sid, "echo up").out == "up\n"
    # API connection threads end with their connections: what is left does not grow
    # with the 16 sandboxes (a reader thread each would be +16).
    assert wait_for(lambda: threads(pid) <= before + 1, timeout=5), \
        f"airlockd threads {before} -> {threads(pid)} with 16 more idle sandboxes"
    for sid in ids + [first]:
        assert wapi.stop(sid).status == 200


def test_outputs_of_busy_sandboxes_arrive_whole_and_in_order(wapi):
    """Eight sandboxes each write 3 MB of their own pattern at once: four workers read
    them all, and each command's stored output is its bytes, complete and in order."""
    n, size = 8, 3_000_000
    ids = [wapi.create_ok()["id"] for _ in range(n)]
    results, errors = {}, []

    def one(i, sid):
        try:
            cli = Api(wapi.daemon.port, TOKENS["A"])
            out = cli.sh(sid, f"yes line-{i:02d}-of-its-own | head -c {size}; echo end >&2",
                         http_timeout=120)
            results[i] = (out.exit["exit_code"], out.stdout, out.stderr)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"sandbox {i}: {e!r}")

    ts = [threading.Thread(target=one, args=(i, sid)) for i, sid in enumerate(ids)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=180)
    assert not errors, errors
    for i in range(n):
        code, out, err = results[i]
        line = f"line-{i:02d}-of-its-own\n".encode()
        want = (line * (size // len(line) + 1))[:size]
        assert code == 0 and err == b"end\n", (i, code, err)
        assert len(out) == size, (i, len(out))
        assert out == want, f"sandbox {i}: output differs at byte " \
            f"{next(k for k in range(size) if out[k] != want[k])}"
    for sid in ids:
        assert wapi.stop(sid).status == 200


def test_a_sandbox_whose_agent_dies_ends_failed_and_the_others_go_on(wapi):
    """The workers see a connection's end like a reader did: that sandbox ends as failed,
    and every other keeps being served by the same workers."""
    from .conftest import agent_pid_of

    victim = wapi.create_ok()["id"]
    other = wapi.create_ok()["id"]
    os.kill(agent_pid_of(victim), 9)
    assert wait_for(lambda: wapi.sandbox(victim)["status"] == "failed", timeout=10), \
        wapi.sandbox(victim)
    assert wapi.sh(other, "echo still").out == "still\n"
    assert wapi.stop(other).status == 200
