"""GET /v1/sandboxes/{id}/egress?follow=true streams the log from an offset: every
line exactly once, in order, and the work is linear in the log's size (it used to
re-read the whole log, up to 64 MiB, for every 64 KiB it sent and every 50 ms)."""

import json
import threading
import time

# A line the shape of the gateway's (docs/network.md); the test writes the log itself.
PAD = "x" * 180


def rchar(pid):
    """Bytes the process has read (read, pread...) so far."""
    with open(f"/proc/{pid}/io") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("rchar:"))


def line(i):
    return json.dumps({"ts": i, "decision": "deny", "host": f"h{i}.test", "pad": PAD}) + "\n"


def test_follow_streams_a_large_log_once_in_order_and_fast(api, daemon, make_sandbox):
    sid = make_sandbox()
    log = daemon.state_dir / "egress" / f"{sid}.jsonl"
    log.parent.mkdir(exist_ok=True)
    first = 20 << 20  # 20 MiB before the follow starts
    n = 0
    with open(log, "w") as f:
        size = 0
        while size < first:
            s = line(n)
            f.write(s)
            size += len(s)
            n += 1
    more = 2000

    def append():  # lines that come while it follows, some split across writes
        with open(log, "a") as f:
            for i in range(n, n + more):
                s = line(i)
                f.write(s[:50])
                f.flush()
                f.write(s[50:])
                f.flush()
                if i % 500 == 0:
                    time.sleep(0.05)
        api.stop(sid)  # the stream ends with the sandbox

    read0 = rchar(daemon.pid)
    t0 = time.monotonic()
    conn, resp = api.stream("GET", f"/v1/sandboxes/{sid}/egress", query={"follow": "true"},
                            timeout=120)
    try:
        assert resp.status == 200, resp.status
        writer = threading.Thread(target=append)
        writer.start()
        seen = []
        for raw in resp:
            if raw.strip():
                seen.append(json.loads(raw)["ts"])
        writer.join()
    finally:
        conn.close()
    took = time.monotonic() - t0
    total = log.stat().st_size
    read = rchar(daemon.pid) - read0
    assert len(seen) == n + more, (len(seen), n + more)
    assert seen == list(range(n + more)), "lines lost, repeated or out of order"
    assert took < 30, f"following a {first >> 20} MiB log took {took:.1f} s"
    # Linear: the daemon read the log about once (other requests read little).
    assert read < 2 * total + (8 << 20), f"read {read >> 20} MiB to stream {total >> 20} MiB"


def test_log_without_follow_is_whole(api, daemon, make_sandbox):
    sid = make_sandbox()
    log = daemon.state_dir / "egress" / f"{sid}.jsonl"
    log.parent.mkdir(exist_ok=True)
    log.write_text("".join(line(i) for i in range(1000)))
    r = api.request("GET", f"/v1/sandboxes/{sid}/egress")
    assert r.status == 200, r
    assert [json.loads(x)["ts"] for x in r.data.splitlines()] == list(range(1000))
