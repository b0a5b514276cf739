"""Forgetting under load: a daemon with a 1 s retention, 2 ended sandboxes kept and 5
commands per sandbox, while clients create, run, stream, wait on and stop sandboxes
and ask for old ones all at once. What is forgotten must never be freed under a caller
(the holds of registry.c): the daemon stays up, answers every request with a
well-formed status (never 5xx), and a command's logs, when it still has them, are
whole. Under scripts/test's AddressSanitizer pass a use-after-free here aborts the
daemon, which this test sees."""
import http.client
import json
import threading
import time

import pytest

from .conftest import TOKENS, Api, own_daemon

SECONDS = 6
OK = {200, 201, 404, 409}


@pytest.fixture(scope="module")
def race(tmp_path_factory):
    yield from own_daemon(tmp_path_factory, "airlockd-race", "--retention", "1s",
                          "--keep-ended", "2", "--keep-commands", "5")


def test_forgetting_never_frees_what_a_caller_uses(race):
    api = Api(race.port, TOKENS["A"])
    deadline = time.monotonic() + SECONDS
    seen, bad, lock = [], [], threading.Lock()

    def note(what, status, body=b""):
        with lock:
            seen.append(status)
            if status not in OK:
                bad.append((what, status, body[:200]))

    def created():  # a new sandbox's id, or None
        r = api.create()
        note("create", r.status, r.data)
        return r.json["sandbox"]["id"] if r.status == 201 else None

    def cycle():  # create, run, stop, then look at what may be forgotten any moment
        while time.monotonic() < deadline:
            sid = created()
            if not sid:
                continue
            out = api.sh(sid, "echo hi")
            cid = out.exit["id"]
            note("stop", api.stop(sid).status)
            for _ in range(3):
                note("get", api.get(sid).status)
                r = api.logs_resp(sid, cid)
                note("logs", r.status, r.data)
                if r.status == 200:
                    assert b'"hi\\n"' in r.data or b"hi" in r.data, r.data[:300]
                time.sleep(0.3)

    def stream():  # stop a sandbox while its command's logs are being streamed
        while time.monotonic() < deadline:
            sid = created()
            if not sid:
                continue
            # More output than the sockets between us hold: the daemon is still in the
            # middle of the stream when the sandbox is past its retention.
            c = api.start(sid, "/bin/sh", "-c", f"head -c {24 << 20} /dev/zero | tr '\\0' s")
            note("start", c.status, c.data)
            if c.status not in (200, 201):
                continue
            cid = c.json["command"]["id"]
            conn = http.client.HTTPConnection("127.0.0.1", race.port, timeout=30)
            conn.request("GET", f"/v1/sandboxes/{sid}/commands/{cid}/logs",
                         headers={"Authorization": f"Bearer {TOKENS['A']}"})
            resp = conn.getresponse()
            note("stream", resp.status)
            first = resp.read(10)
            api.wait_ok(sid, cid)
            note("stop", api.stop(sid).status)
            time.sleep(2.2)  # past the retention and a round of the timer, stream open
            rest = resp.read()
            conn.close()
            got = sum(len(json.loads(x).get("data", ""))
                      for x in (first + rest).split(b"\n") if x.strip())
            assert got == 24 << 20, got

    def churn():  # many commands in one sandbox; ask for and wait on old ones
        sid = api.create_ok()["id"]
        ids = []
        while time.monotonic() < deadline:
            out = api.sh(sid, "echo n")
            ids.append(out.exit["id"])
            old = ids[max(0, len(ids) - 12)]
            note("cmd", api.cmd_get(sid, old).status)
            note("wait", api.cmd_wait(sid, old, timeout_ms=50).status)
        api.stop(sid)

    threads = [threading.Thread(target=f) for f in (cycle, cycle, stream, churn)]
    errors = []

    def run(t):
        try:
            t.run()
        except Exception as e:  # an assertion in a worker fails the test below
            errors.append(repr(e))

    ws = [threading.Thread(target=run, args=(t,)) for t in threads]
    for w in ws:
        w.start()
    for w in ws:
        w.join(timeout=SECONDS + 60)
    assert not errors, errors
    assert race.alive(), "airlockd died:\n" + race.log_tail()
    assert api.health().status == 200
    assert not bad, bad[:5]
    assert len(seen) > 50, len(seen)
    assert 404 in seen, "nothing was forgotten while in use: the test proved nothing"
