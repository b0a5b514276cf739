"""SOURCE: a Vercel create's `source` (docs/sources.md) against the fake internet.

A tarball and a git repository (smart HTTP: `git http-backend` behind the world's web
server, tests/integration/net/world_server.py) are served by allowed.test. The fetch runs
inside the new sandbox, through its gateway, under its own network policy: an allowlisted
sandbox gets the files (and its egress log has the fetch), a deny-all one gets a clear error
and is stopped. A tarball is extracted by the daemon's strict tar code, so an entry that
climbs out of the workdir is refused as an upload's would be.
"""

import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import urllib.parse

import pytest

from .test_daemon_life import AIRLOCK_BIN, TOKENS, Api, NetDaemon

BASE = "http://allowed.test/source"
ALLOW = {"allow": ["allowed.test"]}


@pytest.fixture(scope="module")
def sdaemon(world, tmp_path_factory):
    if not os.access(AIRLOCK_BIN, os.X_OK):
        pytest.fail(f"{AIRLOCK_BIN} not built", pytrace=False)
    d = NetDaemon(tmp_path_factory.mktemp("srcd"), world)
    d.start()
    yield d
    api = Api(d.port, TOKENS["A"])
    for s in api.request("GET", "/v1/sandboxes").json.get("sandboxes", []):
        if s["status"] == "running":
            api.stop(s["id"])
    os.kill(d.proc.pid, signal.SIGTERM)
    d.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def sources(world):
    root = os.path.join(world.state, "source")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "git"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in (("hello.txt", b"hi from the tarball\n"), ("sub/x.py", b"print(7)\n")):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))
    open(os.path.join(root, "app.tar.gz"), "wb").write(buf.getvalue())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        ti = tarfile.TarInfo("../escape.txt")
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"x"))
    open(os.path.join(root, "evil.tar"), "wb").write(buf.getvalue())
    work = os.path.join(root, "work")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.test", "-c",
           "init.defaultBranch=main", "-c", "safe.directory=*"]
    subprocess.run([*git, "init", "-q", work], check=True)
    for i, text in enumerate(("one\n", "two\n")):
        open(os.path.join(work, "README"), "w").write(text)
        subprocess.run([*git, "-C", work, "add", "README"], check=True)
        subprocess.run([*git, "-C", work, "commit", "-qm", f"c{i}"], check=True)
        subprocess.run([*git, "-C", work, "tag", f"v{i + 1}"], check=True)
    subprocess.run([*git, "clone", "-q", "--bare", work, os.path.join(root, "git", "repo.git")],
                   check=True)
    return root


def create(api, source, policy):
    body = {"projectId": "prj", "source": source, "timeout": 120000}
    if policy is not None:
        body["networkPolicy"] = policy
    return api.request("POST", "/v3/sandboxes", body=body, timeout=120)


def read(api, sid, path):
    q = urllib.parse.quote(path)
    return api.request("GET", f"/v1/sandboxes/{sid}/files/content?path={q}")


def run(api, sid, *argv):
    r = api.request("POST", f"/v1/sandboxes/{sid}/commands",
                    body={"cmd": argv[0], "args": list(argv[1:]), "wait": True})
    lines = [json.loads(x) for x in r.data.splitlines() if x.strip()]
    return "".join(x.get("data", "") for x in lines if x.get("type") == "stdout")


def egress(api, sid):
    r = api.request("GET", f"/v1/sandboxes/{sid}/egress")
    return [json.loads(x) for x in r.data.splitlines() if x.strip()]


def test_tarball_allowlisted(sdaemon, sources):
    api = Api(sdaemon.port, TOKENS["A"])
    r = create(api, {"type": "tarball", "url": f"{BASE}/app.tar.gz"}, {"allow": ["allowed.test"]})
    assert r.status == 200, r
    sid = r.json["sandbox"]["name"]
    try:
        assert read(api, sid, "/vercel/sandbox/hello.txt").data == b"hi from the tarball\n"
        assert read(api, sid, "/vercel/sandbox/sub/x.py").data == b"print(7)\n"
        lines = egress(api, sid)
        assert any(x.get("name") == "allowed.test" and x.get("verdict") == "allow"
                   for x in lines), lines
        assert [x["verdict"] for x in lines if x.get("layer") == "source"] == ["allow"], lines
    finally:
        api.stop(sid)


def test_tarball_deny_all_is_a_clear_error(sdaemon, sources):
    api = Api(sdaemon.port, TOKENS["A"])
    before = {s["id"] for s in api.request("GET", "/v1/sandboxes").json["sandboxes"]}
    r = create(api, {"type": "tarball", "url": f"{BASE}/app.tar.gz"}, None)
    assert r.status == 422, r
    msg = r.json["error"]["message"]
    assert "network policy" in msg and "curl" in msg, msg
    new = [s for s in api.request("GET", "/v1/sandboxes").json["sandboxes"]
           if s["id"] not in before]
    assert new and all(s["status"] != "running" for s in new), new
    # no gateway logged anything (deny-all has none); airlockd's own line says what failed
    lines = egress(api, new[0]["id"])
    src = [x for x in lines if x.get("layer") == "source"]
    assert src and src[-1]["verdict"] == "deny" and src[-1]["url"].endswith("/app.tar.gz")
    assert "network policy" in src[-1]["error"], src


def test_tarball_with_a_climbing_entry_is_refused(sdaemon, sources):
    api = Api(sdaemon.port, TOKENS["A"])
    r = create(api, {"type": "tarball", "url": f"{BASE}/evil.tar"}, ALLOW)
    assert r.status in (400, 422), r
    assert "extracting the tarball" in r.json["error"]["message"], r


def test_git_shallow_and_revision(sdaemon, sources):
    api = Api(sdaemon.port, TOKENS["A"])
    r = create(api, {"type": "git", "url": f"{BASE}/git/repo.git", "depth": 1}, ALLOW)
    assert r.status == 200, r
    sid = r.json["sandbox"]["name"]
    try:
        assert read(api, sid, "/vercel/sandbox/README").data == b"two\n"
        assert run(api, sid, "git", "-C", "/vercel/sandbox", "rev-list", "--count",
                   "HEAD").strip() == "1"
    finally:
        api.stop(sid)
    r = create(api, {"type": "git", "url": f"{BASE}/git/repo.git", "revision": "v1"}, ALLOW)
    assert r.status == 200, r
    sid = r.json["sandbox"]["name"]
    try:
        assert read(api, sid, "/vercel/sandbox/README").data == b"one\n"
    finally:
        api.stop(sid)


def test_git_deny_all_is_a_clear_error(sdaemon, sources):
    api = Api(sdaemon.port, TOKENS["A"])
    r = create(api, {"type": "git", "url": f"{BASE}/git/repo.git"}, None)
    assert r.status == 422, r
    assert "git" in r.json["error"]["message"], r


def test_bad_sources_are_refused_before_anything(sdaemon):
    api = Api(sdaemon.port, TOKENS["A"])
    for src in ({"type": "snapshot"}, {"type": "tarball"},
                {"type": "tarball", "url": "file:///etc/passwd"},
                {"type": "tarball", "url": f"{BASE}/a", "depth": 1}):
        r = create(api, src, ALLOW)
        assert r.status in (400, 422), (src, r)
