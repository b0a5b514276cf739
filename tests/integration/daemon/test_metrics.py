"""GET /metrics (docs/metrics.md): airlockd's Prometheus metrics move with what happens.

A daemon of this module's own serves them both ways: on its API listener to the token of
--metrics-token-file, and on a --metrics-listen listener without a token. Every scrape is
parsed whole by prometheus_client's parser (python3-prometheus-client) and checked line by
line against the text format. The values are compared before and after each step: creates,
commands by end reason and their durations, a stop, an egress denial, a sandbox's memory.
"""
import re
import secrets
import shutil
import subprocess
import tempfile
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import TOKENS, Api, free_port, own_daemon, wait_for

METRICS_TOKEN = "metrics_" + secrets.token_hex(16)
CTYPE = "text/plain; version=0.0.4; charset=utf-8"
LINE = re.compile(r'^(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*'
                  r'|# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped)'
                  r'|[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\})?'
                  r' (-?[0-9.e+-]+|[+-]Inf|NaN))$')


@pytest.fixture(scope="module")
def md(tmp_path_factory):
    tok = tmp_path_factory.mktemp("metrics-token") / "metrics.token"
    tok.write_text(f"# the scraper's token\n{METRICS_TOKEN}\n")
    port = free_port()
    gen = own_daemon(tmp_path_factory, "airlockd-metrics", "--metrics-token-file", str(tok),
                     "--metrics-listen", f"127.0.0.1:{port}")
    d = next(gen)
    d.metrics_port = port
    yield d
    next(gen, None)


def parse(body):
    """{(name, frozenset(labels)): value} of every sample; the body must parse whole."""
    text = body.decode("utf-8")
    assert text.endswith("\n"), text[-200:]
    for ln in text.splitlines():
        assert LINE.match(ln), f"not a line of the text format: {ln!r}"
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate sample {key}"
            out[key] = s.value
    return out


def scrape(md):
    """The metrics from the open listener (no token)."""
    r = Api(md.metrics_port, None).request("GET", "/metrics")
    assert r.status == 200, r
    assert r.headers["content-type"] == CTYPE, r.headers
    return parse(r.data)


def val(m, name, **labels):
    return m.get((name, frozenset(labels.items())), 0)


def test_sandboxes_and_creates_follow_reality(md):
    api = Api(md.port, TOKENS["A"])
    m0 = scrape(md)
    assert val(m0, "airlock_sandboxes", state="running") == 0
    for st in ("running", "stopping", "stopped", "failed"):  # every state, zeros included
        assert ("airlock_sandboxes", frozenset({"state": st}.items())) in m0, st
    ids = [api.create_ok()["id"] for _ in range(2)]
    m1 = scrape(md)
    assert val(m1, "airlock_sandboxes", state="running") == 2
    assert val(m1, "airlock_sandbox_creates_total", outcome="ok") - \
        val(m0, "airlock_sandbox_creates_total", outcome="ok") == 2
    assert val(m1, "airlock_sandbox_create_duration_seconds_count", outcome="ok") - \
        val(m0, "airlock_sandbox_create_duration_seconds_count", outcome="ok") == 2
    inf = val(m1, "airlock_sandbox_create_duration_seconds_bucket", outcome="ok", le="+Inf")
    assert inf == val(m1, "airlock_sandbox_create_duration_seconds_count", outcome="ok")
    assert api.create(image="nope").status == 400  # refused by the daemon: no --images
    m2 = scrape(md)
    assert val(m2, "airlock_sandbox_creates_total", outcome="rejected") - \
        val(m1, "airlock_sandbox_creates_total", outcome="rejected") == 1

    # Commands: one exits 3, one runs past its own timeout.
    out = api.sh(ids[0], "exit 3")
    assert out.exit["exit_code"] == 3 and out.exit["reason"] == "exited", out
    out = api.run(ids[1], "/bin/sleep", "20", timeout=300)
    assert out.exit["reason"] == "timeout", out
    m3 = scrape(md)
    for reason in ("exited", "signaled", "timeout", "oom", "seccomp", "setup_failed",
                   "exec_failed", "interrupted"):
        want = 1 if reason in ("exited", "timeout") else 0
        got = val(m3, "airlock_commands_total", reason=reason) - \
            val(m2, "airlock_commands_total", reason=reason)
        assert got == want, (reason, got)
    assert val(m3, "airlock_command_duration_seconds_count") - \
        val(m2, "airlock_command_duration_seconds_count") == 2
    # The timed-out one took ~0.3 s: above the 0.25 s bucket, within 2.5 s.
    assert val(m3, "airlock_command_duration_seconds_bucket", le="2.5") - \
        val(m2, "airlock_command_duration_seconds_bucket", le="2.5") == 2
    assert val(m3, "airlock_command_duration_seconds_bucket", le="0.25") - \
        val(m2, "airlock_command_duration_seconds_bucket", le="0.25") == 1
    assert val(m3, "airlock_command_duration_seconds_sum") - \
        val(m2, "airlock_command_duration_seconds_sum") >= 0.3

    # A stop.
    assert api.stop(ids[0]).status == 200
    m4 = scrape(md)
    assert val(m4, "airlock_sandbox_stops_total", outcome="ok") - \
        val(m3, "airlock_sandbox_stops_total", outcome="ok") == 1
    assert val(m4, "airlock_sandbox_stop_duration_seconds_count", outcome="ok") - \
        val(m3, "airlock_sandbox_stop_duration_seconds_count", outcome="ok") == 1
    assert val(m4, "airlock_sandboxes", state="running") == 1
    assert val(m4, "airlock_sandboxes", state="stopped") == 1
    # Its cgroup is gone: it has no per-sandbox series any more; the live one has.
    assert ("airlock_sandbox_memory_bytes",
            frozenset({"sandbox": ids[0], "team": "teamA"}.items())) not in m4
    assert ("airlock_sandbox_memory_bytes",
            frozenset({"sandbox": ids[1], "team": "teamA"}.items())) in m4
    assert api.stop(ids[1]).status == 200


def test_an_egress_denial_is_counted(md):
    api = Api(md.port, TOKENS["A"])
    sid = api.create_ok(network_policy={"allow": ["allowed.test"]})["id"]
    try:
        m0 = scrape(md)
        out = api.sh(sid, "getent hosts denied.test; echo rc=$?")
        assert "rc=0" not in out.out, out
        # The gateway's line is in the sandbox's egress log once the lookup has failed.
        assert wait_for(lambda: b"denied.test" in api.request(
            "GET", f"/v1/sandboxes/{sid}/egress").data, timeout=5)
        m1 = scrape(md)
        key = dict(verdict="deny", reason="not_listed")
        assert val(m1, "airlock_egress_decisions_total", **key) - \
            val(m0, "airlock_egress_decisions_total", **key) == 1
        # Read once: a second scrape counts nothing again.
        m2 = scrape(md)
        assert val(m2, "airlock_egress_decisions_total", **key) == \
            val(m1, "airlock_egress_decisions_total", **key)
    finally:
        api.stop(sid)


def test_a_sandboxs_memory_and_cpu_come_from_its_cgroup(md):
    api = Api(md.port, TOKENS["A"])
    sid = api.create_ok()["id"]
    key = frozenset({"sandbox": sid, "team": "teamA"}.items())
    try:
        # 50 MiB written (not only reserved), kept while the command waits.
        api.start_ok(sid, "/usr/bin/python3", "-c",
                     "import time\nb = b'x' * (50 << 20)\nprint('ready', flush=True)\n"
                     "time.sleep(20)")
        m = wait_for(lambda: (lambda s: s if s.get(("airlock_sandbox_memory_bytes", key), 0)
                              >= 50 << 20 else None)(scrape(md)), timeout=15)
        assert m, f"memory of {sid} never reached 50 MiB"
        assert m[("airlock_sandbox_cpu_seconds_total", key)] > 0
    finally:
        api.stop(sid)


def test_who_may_read_the_metrics(md):
    anon = Api(md.port, None)
    r = anon.request("GET", "/metrics")
    assert r.status == 401 and r.error_code == "unauthorized", r
    for team in TOKENS:  # an API token never grants them, whatever its team
        r = Api(md.port, TOKENS[team]).request("GET", "/metrics")
        assert r.status == 403 and r.error_code == "forbidden", r
    r = Api(md.port, METRICS_TOKEN).request("GET", "/metrics")
    assert r.status == 200 and r.headers["content-type"] == CTYPE, r
    parse(r.data)
    # ... and the metrics token is no API token.
    assert Api(md.port, METRICS_TOKEN).request("GET", "/v1/sandboxes").status == 401
    # The metrics listener: /metrics alone, without a token.
    open_ = Api(md.metrics_port, None)
    assert open_.request("GET", "/metrics").status == 200
    assert open_.request("GET", "/v1/sandboxes").status == 404
    assert Api(md.metrics_port, TOKENS["A"]).request("GET", "/v1/sandboxes").status == 404
    r = open_.request("POST", "/metrics", body={})
    assert r.status == 405, r


def test_without_the_flags_metrics_are_off(daemon):
    for token in (None, TOKENS["A"]):
        r = Api(daemon.port, token).request("GET", "/metrics")
        assert r.status == 404 and r.error_code == "not_found", r
        assert b"--metrics-listen" in r.data, r


@pytest.mark.parametrize("args,needle", [
    (["--metrics-listen", "nonsense"], "--metrics-listen"),
    (["--metrics-listen", "127.0.0.1:99999"], "--metrics-listen"),
    (["--metrics-listen", "localhost:9470"], "--metrics-listen"),
    (["--metrics-token-file", "/nonexistent/metrics.token"], "--metrics-token-file"),
    (["--metrics-token-file", "SAME"], "also an API token"),
])
def test_bad_metrics_settings_stop_the_start(md, args, needle):
    r = serve_once(md, args)
    assert r.returncode != 0, r
    assert needle in r.stderr, r.stderr


def test_a_metrics_address_in_use_stops_the_start(md):
    r = serve_once(md, ["--metrics-listen", f"127.0.0.1:{md.metrics_port}"])
    assert r.returncode != 0 and "--metrics-listen" in r.stderr, r


def serve_once(md, args):
    """`airlock serve` with args in a state directory of its own (short: its sockets'
    paths have a limit), to its exit; "SAME" in args stands for a metrics token file that
    holds one of its API tokens."""
    work = tempfile.mkdtemp(prefix="alm-", dir="/tmp")
    try:
        tokens = f"{work}/tokens"
        with open(tokens, "w") as f:
            f.write(f"{TOKENS['A']} teamA\n")
        with open(f"{work}/same", "w") as f:
            f.write(f"{TOKENS['A']}\n")
        args = [f"{work}/same" if a == "SAME" else a for a in args]
        return subprocess.run([md.binary, "serve", "--state-dir", f"{work}/state", "--listen",
                               f"127.0.0.1:{free_port()}", "--tokens", tokens, *args],
                              capture_output=True, text=True, timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_warm_pool_its_size_hits_and_misses(tmp_path_factory):
    port = free_port()
    gen = own_daemon(tmp_path_factory, "airlockd-metrics-pool", "--pool", "1",
                     "--metrics-listen", f"127.0.0.1:{port}")
    d = next(gen)
    d.metrics_port = port
    try:
        api = Api(d.port, TOKENS["A"])
        m0 = wait_for(lambda: (lambda m: m if val(m, "airlock_warm_pool_sandboxes") == 2
                               else None)(scrape(d)), timeout=20)
        assert m0, "the pool (1 per workdir) never filled"
        assert val(m0, "airlock_warm_pool_target") == 2
        # The pool's own refills are neither creates nor sandboxes of a state.
        assert val(m0, "airlock_sandbox_creates_total", outcome="ok") == 0
        assert val(m0, "airlock_sandboxes", state="running") == 0
        warm = [api.create_ok()["warm"] for _ in range(2)]
        m1 = scrape(d)
        hits = val(m1, "airlock_warm_pool_hits_total") - val(m0, "airlock_warm_pool_hits_total")
        misses = val(m1, "airlock_warm_pool_misses_total") - \
            val(m0, "airlock_warm_pool_misses_total")
        assert warm[0] and hits == warm.count(True) and misses == warm.count(False), \
            (warm, hits, misses)
        assert val(m1, "airlock_sandbox_creates_total", outcome="ok") == 2
        assert val(m1, "airlock_sandboxes", state="running") == 2
    finally:
        next(gen, None)
