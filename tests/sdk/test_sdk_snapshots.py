"""Snapshots, fork and drives of the Vercel-compatible API: snapshots.mjs drives them with the real
@vercel/sandbox SDK; the tests below check what the SDK cannot reach (the store's files).

Run: /usr/bin/python3 -m pytest tests/sdk/test_sdk_snapshots.py -v
"""

import json
import http.client
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from test_sdk import AIRLOCK_BIN, TEAMS, TOKENS, Client, free_port

HERE = pathlib.Path(__file__).resolve().parent
SNAP_STEPS = ["snapshot", "Snapshot.get-list", "create-from-snapshot", "fork-sees-live-state",
              "Snapshot.tree", "errors", "Snapshot.delete", "persistent-round-trip",
              "persistent-expiry",
              "Drive.getOrCreate-list",
              "mounts-rw-ro-share", "drive-limits", "Drive.delete"]


@pytest.fixture(scope="module")
def snapd():
    """A daemon of this module's own: (port, its state directory)."""
    if not os.access(AIRLOCK_BIN, os.X_OK):
        pytest.fail(f"{AIRLOCK_BIN} is missing: build it first (ninja -C build)")
    tmp = tempfile.mkdtemp(prefix="airlock-sdk-snap-")
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        for k in TOKENS:
            f.write(f"{TOKENS[k]} {TEAMS[k]}\n")
    port, state = free_port(), pathlib.Path(tmp) / "state"
    log = open(os.path.join(tmp, "daemon.log"), "wb")
    proc = subprocess.Popen([AIRLOCK_BIN, "serve", "--state-dir", str(state), "--listen",
                             f"127.0.0.1:{port}", "--tokens", tokens],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v1/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "airlock serve did not start"
        time.sleep(0.1)
    yield port, state
    for team in TOKENS:
        cl = Client(port, team)
        r = cl.req("GET", "/v2/sandboxes")
        for s in (r.json.get("sandboxes", []) if r.status == 200 else []):
            if s["status"] == "running":
                cl.req("POST", cl.ses(s["name"], "/stop"))
    proc.terminate()
    proc.wait(10)
    log.close()
    shutil.rmtree(tmp, ignore_errors=True)


def test_sdk_snapshots_and_fork(snapd):
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node and npm are needed to run the @vercel/sandbox SDK")
    deps = json.load(open(HERE / "package.json"))["dependencies"]  # every pinned package
    if not all((HERE / "node_modules" / d).is_dir() for d in deps):
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"npm ci failed:\n{r.stdout}\n{r.stderr}"
    env = dict(os.environ, AIRLOCK_URL=f"http://127.0.0.1:{snapd[0]}",
               AIRLOCK_TOKEN=TOKENS["A"], AIRLOCK_TEAM_ID=TEAMS["A"],
               AIRLOCK_TOKEN_B=TOKENS["B"], AIRLOCK_TEAM_ID_B=TEAMS["B"],
               AIRLOCK_PROJECT_ID="prj_sdk", AIRLOCK_STEP_TIMEOUT_MS="60000")
    r = subprocess.run([node, "snapshots.mjs"], cwd=HERE, env=env, capture_output=True,
                       text=True, timeout=300)
    out = r.stdout.strip().splitlines()
    report = f"stdout:\n{r.stdout}\nstderr:\n{r.stderr[-3000:]}"
    assert r.returncode == 0, report
    assert out == [f"ok {s}" for s in SNAP_STEPS] + [f"{len(SNAP_STEPS)} passed, 0 failed"], report


def test_corrupted_snapshot_refused_on_restore(snapd):
    port, state = snapd
    api = Client(port, "A")
    sid = api.create(timeout=120000)["session"]["id"]
    api.run(sid, "sh", ["-c", "echo important-data > /vercel/sandbox/f"])
    r = api.req("POST", api.ses(sid, "/snapshot"), {"expiration": 60000})
    assert r.status == 200, r
    s = r.json["snapshot"]
    assert r.json["session"]["status"] == "running" and s["expiresAt"] > s["createdAt"]
    tar = state / "snapshots" / f"{s['id']}.tar"
    data = bytearray(tar.read_bytes())
    data[data.find(b"important-data")] ^= 1
    tar.write_bytes(bytes(data))
    r = api.req("POST", "/v3/sandboxes", {"projectId": "prj", "source": {
        "type": "snapshot", "snapshotId": s["id"]}})
    assert r.status == 422 and "corrupt" in r.json["error"]["message"], r
    # a snapshot source without its id, and one of an id that is not there
    r = api.req("POST", "/v3/sandboxes", {"projectId": "prj", "source": {"type": "snapshot"}})
    assert r.status == 400 and "snapshotId" in r.json["error"]["message"], r
    r = api.req("POST", "/v3/sandboxes", {"projectId": "prj", "source": {
        "type": "snapshot", "snapshotId": "snap_nosuch"}})
    assert r.status == 404, r
    api.req("POST", api.ses(sid, "/stop"))
