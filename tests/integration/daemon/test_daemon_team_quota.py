"""A team's share of the daemon (`airlock serve --team-max-sandboxes N`).

Every sandbox takes one of the daemon's 8,192 uid slots and ~0.7 MiB of host memory:
without a limit one team could take them all and every other team's creates would
fail. With one, a team's create beyond N live sandboxes (running, or being created)
is refused with 429 and a message naming the limit; other teams are not affected;
a stop makes room again; creates racing each other never pass the limit."""
import threading

import pytest

from .conftest import TOKENS, Api, own_daemon

LIMIT = 2


@pytest.fixture(scope="module")
def qd(tmp_path_factory):
    yield from own_daemon(tmp_path_factory, "airlockd-quota", "--team-max-sandboxes", str(LIMIT))


def live(api):
    return [s["id"] for s in api.list() if s["status"] == "running"]


def test_a_team_beyond_its_share_is_refused_and_others_are_not(qd):
    a, b = Api(qd.port, TOKENS["A"]), Api(qd.port, TOKENS["B"])
    first = [a.create_ok()["id"] for _ in range(LIMIT)]
    r = a.create()
    assert r.status == 429, r
    assert r.error_code == "busy" and b"--team-max-sandboxes 2" in r.data, r
    assert sorted(live(a)) == sorted(first)
    other = b.create_ok()["id"]  # another team's share is its own
    # The Vercel-compatible API refuses it alike (its SDK retries a 429 later).
    v = a.request("POST", "/v2/sandboxes", body={})
    assert v.status == 429, v
    assert sorted(live(a)) == sorted(first)
    a.stop(first[0])
    again = a.create_ok()["id"]  # a stop makes room
    for sid in (first[1], again):
        a.stop(sid)
    b.stop(other)


def test_racing_creates_never_pass_the_limit(qd):
    a = Api(qd.port, TOKENS["A"])
    assert live(a) == []
    got, lock = [], threading.Lock()

    def one():
        r = a.create()
        with lock:
            got.append(r.status)

    ts = [threading.Thread(target=one) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert set(got) <= {201, 429}, got
    assert 1 <= got.count(201) <= LIMIT, got
    assert len(live(a)) == got.count(201) <= LIMIT
    for sid in live(a):
        a.stop(sid)
