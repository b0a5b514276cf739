"""A request whose store write fails says so (docs/design/errors.md).

extend moved a sandbox's expiry in memory and answered 200 even when SQLite never
stored it: a restart went back to the old expiry. The store is made to refuse the
write with a trigger (another connection to the daemon's WAL database)."""
import sqlite3

import pytest

from .conftest import own_api


@pytest.fixture(scope="module")
def sapi(tmp_path_factory):
    yield from own_api(tmp_path_factory, "airlockd-store-errors")


def test_an_extend_the_store_refuses_fails_and_changes_nothing(sapi):
    sid = sapi.create_ok()["id"]
    before = sapi.sandbox(sid)["expires_at"]
    db = sqlite3.connect(sapi.daemon.state_dir / "airlock.db")
    db.execute("CREATE TRIGGER no_extend BEFORE UPDATE OF expires_ms ON sandboxes "
               "BEGIN SELECT RAISE(ABORT, 'no extend here'); END")
    db.commit()
    try:
        r = sapi.extend(sid, 60_000)
        assert r.status == 500 and r.json["error"]["code"] == "internal", r
        msg = r.json["error"]["message"]
        assert msg.startswith(f"extending sandbox '{sid}': ") and "no extend here" in msg, msg
        assert sapi.sandbox(sid)["expires_at"] == before
    finally:
        db.execute("DROP TRIGGER no_extend")
        db.commit()
        db.close()
    # The store takes it again: so does the sandbox.
    r = sapi.extend(sid, 60_000)
    assert r.status == 200, r
    assert sapi.sandbox(sid)["expires_at"] == before + 60_000
    sapi.stop(sid)
