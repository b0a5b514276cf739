"""airlock-oci against runc and crun (Debian's) on the same bundle, in one test: the state
document's fields, the status at each step, exit codes and the error strings that engines
match by substring ("does not exist", "container not running", "already exists"), and the
top-level keys of `features`. A reference runtime that is not installed, or cannot run a
container on this host, is left out of the comparison (saying so)."""
import json
import shutil
import subprocess
import tempfile
import time
import warnings

import pytest


def drive(runtime, root, bundle, cid):
    """One runtime through the lifecycle; what an engine would observe."""
    def call(*args, **kw):
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.run([runtime, "--root", root] + list(args), stdout=out,
                               stderr=err, stdin=subprocess.DEVNULL, timeout=30, **kw)
            out.seek(0)
            err.seek(0)
            return p.returncode, out.read().decode(), err.read().decode()

    def status():
        rc, out, _ = call("state", cid)
        return json.loads(out)["status"] if rc == 0 else None

    seen = {}
    rc, _, err = call("state", cid)
    seen["state_missing"] = (rc, "does not exist" in err)
    rc, _, err = call("create", "--bundle", str(bundle), cid)
    seen["create"] = rc
    if rc != 0:
        return None, err
    rc, out, _ = call("state", cid)
    st = json.loads(out)
    seen["state_keys"] = sorted(k for k in ("ociVersion", "id", "status", "pid", "bundle",
                                            "annotations") if k in st)
    seen["created"] = (st["status"], st["pid"] > 0, st["id"] == cid)
    rc, _, err = call("create", "--bundle", str(bundle), cid)
    seen["create_again"] = (rc != 0, "already exists" in err or "exists" in err)
    seen["start"] = call("start", cid)[0]
    seen["running"] = status()
    seen["kill"] = call("kill", cid, "KILL")[0]
    deadline = time.monotonic() + 10
    while status() != "stopped" and time.monotonic() < deadline:
        time.sleep(0.02)
    seen["stopped"] = status()
    rc, _, err = call("kill", cid, "KILL")
    seen["kill_stopped"] = (rc != 0, "not running" in err)
    seen["delete"] = call("delete", cid)[0]
    rc, _, err = call("delete", cid)
    seen["delete_missing"] = (rc != 0, "does not exist" in err)
    rc, out, _ = call("features")
    seen["features"] = sorted(json.loads(out)) if rc == 0 else None
    return seen, ""


def test_lifecycle_state_and_errors_match_runc_and_crun(oci_bin, bundle, tmp_path):
    b = bundle(["sleep", "1000"])
    refs = {}
    for name in ("runc", "crun"):
        path = shutil.which(name)
        if not path:
            warnings.warn("%s is not installed: not compared" % name)
            continue
        seen, err = drive(path, str(tmp_path / name), b, "conf-" + name)
        if seen is None:
            warnings.warn("%s cannot run a container here: %s" % (name, err.strip()[-200:]))
            continue
        refs[name] = seen
    ours, err = drive(oci_bin, str(tmp_path / "airlock"), b, "conf-airlock")
    assert ours is not None, err
    if not refs:
        pytest.skip("neither runc nor crun can run a container here to compare with")
    for name, ref in refs.items():
        for key, want in ref.items():
            if key == "state_keys":  # runc leaves out empty annotations
                assert set(want) <= set(ours[key]), (name, want, ours[key])
                continue
            if key == "features":
                if want is not None:  # every top-level key the reference has, we have too
                    assert set(want) <= set(ours["features"]), (name, want, ours[key])
                continue
            if key in ("kill_stopped", "create_again") and not want[1]:
                want = (want[0], ours[key][1])  # its wording differs: only the exit code
            assert ours[key] == want, (name, key, ours[key], want)
