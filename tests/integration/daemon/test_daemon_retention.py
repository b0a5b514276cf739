"""Retention of ended sandboxes (`airlock serve --retention D --keep-ended N`) and of a
live sandbox's finished commands (`--keep-commands N`).

Before, airlockd kept every sandbox it had ever made, with all its commands, in
memory and in its store: a daemon that had made 3,000 sandboxes held 17 MB more,
and each look-up walked the whole list. Now an
ended (stopped or failed) sandbox is forgotten -- memory, store rows (commands,
output), egress log -- once it ended D ago, or when more than N ended ones are
held (the oldest first). A running sandbox is never touched, however old, and an
ended one that a client is still reading (a log stream) stays until it is done.
"""
import http.client
import json
import sqlite3
import time

import pytest

from .conftest import TOKENS, Api, own_daemon, wait_for

KEEP = 3
RETAIN_S = 4
KEEP_CMDS = 20


@pytest.fixture(scope="module")
def rdaemon(tmp_path_factory):
    yield from own_daemon(tmp_path_factory, "airlockd-retention", "--keep-ended", str(KEEP),
                          "--retention", f"{RETAIN_S}s", "--keep-commands", str(KEEP_CMDS))


@pytest.fixture
def rapi(rdaemon):
    return Api(rdaemon.port, TOKENS["A"])


def rows(d, sql, *args):
    with sqlite3.connect(f"file:{d.state_dir / 'airlock.db'}?mode=ro", uri=True) as db:
        return db.execute(sql, args).fetchall()


class SlowLogs:
    """A client that starts reading a command's logs, takes 100 bytes, and reads the
    rest only when asked (stdout()): the daemon holds the stream open meanwhile."""

    def __init__(self, d, sid, cid):
        self.conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
        self.conn.request("GET", f"/v1/sandboxes/{sid}/commands/{cid}/logs",
                          headers={"Authorization": f"Bearer {TOKENS['A']}"})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200
        self.head = self.resp.read(100)

    def stdout(self):
        rest = self.resp.read()
        self.conn.close()
        recs = [json.loads(x) for x in (self.head + rest).split(b"\n") if x.strip()]
        return b"".join(r["data"].encode() for r in recs if r.get("type") == "stdout")


def ran(api, sid, text):
    out = api.sh(sid, f"echo {text}")
    assert out.exit["exit_code"] == 0, out
    return out.exit["id"]


def test_the_oldest_ended_sandboxes_beyond_the_cap_are_forgotten(rdaemon, rapi):
    live = rapi.create_ok()["id"]
    ended = []
    for i in range(KEEP + 3):
        sid = rapi.create_ok()["id"]
        cid = ran(rapi, sid, f"hello-{i}")
        assert rapi.stop(sid).status == 200
        ended.append((sid, cid))
    old, kept = ended[:3], ended[3:]

    def forgotten(sid):
        return rapi.get(sid).status == 404

    assert wait_for(lambda: all(forgotten(s) for s, _ in old), timeout=5), \
        [rapi.get(s).status for s, _ in old]
    r = rapi.get(old[0][0])
    assert r.error_code and b"no sandbox" in r.data, r
    assert rapi.logs_resp(*old[0]).status == 404
    # Their rows and output are gone from the store too.
    ids = [s for s, _ in old]
    q = ",".join("?" * len(ids))
    assert rows(rdaemon, f"SELECT id FROM sandboxes WHERE id IN ({q})", *ids) == []
    assert rows(rdaemon, f"SELECT id FROM commands WHERE sandbox_id IN ({q})", *ids) == []
    assert rows(rdaemon, "SELECT count(*) FROM output WHERE command_id = ?", old[0][1]) == [(0,)]
    # The newest KEEP are still there, with their output.
    for i, (sid, cid) in enumerate(kept):
        assert rapi.sandbox(sid)["status"] == "stopped"
        assert rapi.logs(sid, cid).out == f"hello-{3 + i}\n"
    # A running sandbox is not counted and not touched.
    assert rapi.sandbox(live)["status"] == "running"
    assert ran(rapi, live, "still")
    rapi.stop(live)


def test_ended_sandboxes_go_after_the_retention_running_ones_stay(rdaemon, rapi):
    live = rapi.create_ok()["id"]
    first = ran(rapi, live, "early")
    sid = rapi.create_ok()["id"]
    cid = ran(rapi, sid, "bye")
    rapi.stop(sid)
    assert rapi.logs(sid, cid).out == "bye\n"
    assert wait_for(lambda: rapi.get(sid).status == 404, timeout=RETAIN_S + 5)
    assert rows(rdaemon, "SELECT id FROM commands WHERE id = ?", cid) == []
    # The running one is older than the retention: it and its commands stay.
    assert rapi.sandbox(live)["status"] == "running"
    assert rapi.logs(live, first).out == "early\n"
    rapi.stop(live)


def test_a_log_stream_keeps_its_ended_sandbox_until_it_is_done(rdaemon, rapi):
    sid = rapi.create_ok()["id"]
    size = 24 << 20  # more than the socket buffers between us hold
    out = rapi.sh(sid, f"head -c {size} /dev/zero | tr '\\0' x")
    cid = out.exit["id"]
    assert len(out.stdout) == size
    rapi.stop(sid)
    # A slow reader: a few bytes, then nothing until the sandbox is past its retention.
    reader = SlowLogs(rdaemon, sid, cid)
    time.sleep(RETAIN_S + 2.5)
    # Past its retention, but held by the stream: still there, and so is its output.
    assert rapi.get(sid).status == 200
    assert reader.stdout() == b"x" * size
    # Once the stream is closed it goes.
    assert wait_for(lambda: rapi.get(sid).status == 404, timeout=5)


def test_a_live_sandbox_keeps_its_newest_finished_commands(rdaemon, rapi):
    sid = rapi.create_ok()["id"]
    running = rapi.start_ok(sid, "/bin/sleep", "60")["id"]  # unfinished: never forgotten
    size = 24 << 20  # more than the socket buffers between us hold
    out = rapi.sh(sid, f"head -c {size} /dev/zero | tr '\\0' y")
    big = out.exit["id"]
    # A slow reader of the oldest finished command's logs holds it.
    reader = SlowLogs(rdaemon, sid, big)
    ids = [ran(rapi, sid, f"n{i}") for i in range(KEEP_CMDS + 10)]

    def listed():
        return [c["id"] for c in rapi.cmd_list(sid).json["commands"]]

    assert wait_for(lambda: len(listed()) <= KEEP_CMDS + 2, timeout=5), len(listed())
    time.sleep(1.5)  # another round of the timer: the held one stays all the same
    now = listed()
    assert running in now and big in now, "a running or held command was forgotten"
    assert set(ids[-KEEP_CMDS:]) <= set(now), "one of the newest was forgotten"
    gone = ids[:10]
    assert not set(gone) & set(now)
    assert rapi.cmd_get(sid, gone[0]).status == 404
    assert rapi.logs_resp(sid, gone[0]).status == 404
    q = ",".join("?" * len(gone))
    assert rows(rdaemon, f"SELECT id FROM commands WHERE id IN ({q})", *gone) == []
    assert rows(rdaemon, f"SELECT count(*) FROM output WHERE command_id IN ({q})", *gone) == [(0,)]
    assert rapi.logs(sid, ids[-1]).out == f"n{KEEP_CMDS + 9}\n"
    # The slow reader gets every byte; then its command goes too.
    assert reader.stdout() == b"y" * size
    assert wait_for(lambda: big not in listed(), timeout=5)
    assert running in listed()
    rapi.stop(sid)


def test_a_restart_deletes_what_ended_before_the_retention(rdaemon, rapi):
    # Ended sandboxes of an earlier run are not loaded again: at start their rows go
    # once past the retention, and egress logs of sandboxes the store has not.
    live = rapi.create_ok()["id"]
    sid = rapi.create_ok()["id"]
    cid = ran(rapi, sid, "before")
    rapi.stop(sid)
    rdaemon.term()  # before its timer forgets it
    assert rows(rdaemon, "SELECT id FROM sandboxes WHERE id = ?", sid) == [(sid,)]
    egress = rdaemon.state_dir / "egress"
    egress.mkdir(exist_ok=True)
    stale = egress / (sid + ".jsonl")           # an ended sandbox's
    orphan = egress / ("sbx_" + "0" * 24 + ".jsonl")  # no such sandbox at all
    mine = egress / (live + ".jsonl")           # a live sandbox's: stays
    other = egress / "notes.txt"                # not ours to judge: stays
    for f in (stale, orphan, mine, other):
        f.write_text("{}\n")
    time.sleep(RETAIN_S + 0.5)
    rdaemon.start()
    assert rows(rdaemon, "SELECT id FROM sandboxes WHERE id = ?", sid) == []
    assert rows(rdaemon, "SELECT id FROM commands WHERE id = ?", cid) == []
    assert not stale.exists() and not orphan.exists()
    assert mine.exists() and other.exists()
    assert rapi.sandbox(live)["status"] == "running"
    assert ran(rapi, live, "after")
    rapi.stop(live)


def test_bad_retention_options_are_refused(rdaemon):
    import subprocess
    for args, msg in ((["--retention", "0"], "--retention '0'"),
                      (["--retention", "forever"], "--retention 'forever'"),
                      (["--retention", "1000h"], "--retention '1000h'"),
                      (["--keep-ended", "0"], "--keep-ended '0'"),
                      (["--keep-ended", "-5"], "--keep-ended '-5'"),
                      (["--keep-ended", "many"], "--keep-ended 'many'"),
                      (["--keep-commands", "0"], "--keep-commands '0'"),
                      (["--keep-commands", "1e9"], "--keep-commands '1e9'")):
        r = subprocess.run([rdaemon.binary, "serve", "--state-dir", "/nonexistent/x",
                            "--listen", "127.0.0.1:1", *args],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 64, (args, r.returncode, r.stderr)  # usage
        assert msg in r.stderr, r.stderr
