"""Per-request rules through airlockd (issue 5): set on create and on update
(native and Vercel routes), read back redacted, the CA installed into a
running sandbox, commands trusting it without flags, live updates cutting
terminated flows and replacing the rules."""
import json

import pytest

from .test_daemon_life import (  # noqa: F401  (fixtures)
    api, box, ldaemon, wait_for, gateway_pids)


@pytest.fixture
def secret(canary):
    return f"SECRET-{canary}"


def rules(secret, **extra):
    return {"allow": {"allowed.test": [
        {"match": {"path": {"startsWith": "/api"}},
         "transform": [{"headers": {"Authorization": f"Bearer {secret}"}}]}], **extra}}


CURL = ["curl", "-sS", "-m", "5"]


def test_create_with_rules_injects_and_reads_back_redacted(api, box, world, secret):
    sid = box(rules(secret))
    code, out, err = api.run(sid, CURL + ["https://allowed.test/api/echo-headers"])
    assert code == 0, (out, err)
    evs = world.events("allowed", "http")
    assert evs and f"Authorization: Bearer {secret}" in evs[-1]["headers"], evs
    assert secret not in out and "*" * len(f"Bearer {secret}") in out
    # native read-back: the value is never shown
    pol = api.sandbox(sid)["network_policy"]
    hdrs = pol["allow"]["allowed.test"][0]["transform"][0]["headers"]
    assert hdrs == {"Authorization": "<redacted>"}, pol
    assert secret not in json.dumps(api.sandbox(sid))
    # Vercel read-back: injectionRules list header names only, with the match
    r = api.request("GET", f"/v2/sandboxes/sessions/{sid}")
    assert r.status == 200, r
    vp = r.json["session"]["networkPolicy"]
    assert vp["mode"] == "custom" and vp["allowedDomains"] == ["allowed.test"], vp
    assert vp["injectionRules"] == [{"domain": "allowed.test", "headerNames": ["Authorization"],
                                     "match": {"path": {"startsWith": "/api"}}}], vp
    assert secret not in r.data.decode()
    # the command's environment points at the CA; no secret anywhere it can read
    code, out, _ = api.run(sid, ["sh", "-c", "env; ls /etc/airlock; "
                                 "grep -rl SECRET- /etc /tmp /workspace /home 2>/dev/null; "
                                 "true"])
    assert "SSL_CERT_FILE=/etc/airlock/ca-bundle.pem" in out, out
    assert "NODE_EXTRA_CA_CERTS=/etc/airlock/ca.pem" in out
    assert "ca-bundle.pem" in out and secret not in out


def test_rules_added_by_update_to_a_running_sandbox(api, box, world, secret):
    sid = box({"allow": ["allowed.test"]})
    code, out, _ = api.run(sid, ["sh", "-c", "env | grep -c SSL_CERT_FILE; ls /etc/airlock"])
    assert out.split()[0] == "0", out          # no CA yet: nothing to trust
    r = api.put_policy(sid, rules(secret))
    assert r.status == 200, r
    code, out, err = api.run(sid, CURL + ["https://allowed.test/api/x"])
    assert code == 0, (out, err)
    evs = [e for e in world.events("allowed", "http") if e["path"] == "/api/x"]
    assert evs and f"Authorization: Bearer {secret}" in evs[0]["headers"], evs
    # an update that drops the rule: the next request carries no secret
    r = api.put_policy(sid, {"allow": {"allowed.test": [
        {"response": {"statusCode": 418, "body": "teapot", "contentType": "text/plain"}}]}})
    assert r.status == 200, r
    code, out, _ = api.run(sid, CURL + ["-w", " %{http_code}", "https://allowed.test/api/y"])
    assert out.strip().endswith("teapot 418"), out
    assert not [e for e in world.events("allowed", "http") if e["path"] == "/api/y"]


def test_vercel_route_sets_rules(api, box, world, secret):
    sid = box({"allow": ["allowed.test"]})
    r = api.request("POST", f"/v2/sandboxes/sessions/{sid}/network-policy",
                    body=rules(secret))
    assert r.status == 200, r
    vp = r.json["session"]["networkPolicy"]
    assert vp["injectionRules"][0]["headerNames"] == ["Authorization"], vp
    assert secret not in r.data.decode()
    code, out, err = api.run(sid, CURL + ["https://allowed.test/api/v"])
    assert code == 0, (out, err)
    evs = [e for e in world.events("allowed", "http") if e["path"] == "/api/v"]
    assert evs and f"Authorization: Bearer {secret}" in evs[0]["headers"], evs


FLOW_PY = r"""
import socket, ssl, time
c = ssl.create_default_context(cafile="/etc/airlock/ca-bundle.pem")
s = c.wrap_socket(socket.create_connection(("allowed.test", 443)), server_hostname="allowed.test")
open("/workspace/flow.ready", "w").write("ok")
t = time.time()
s.settimeout(30)
try:
    d = s.recv(1)
except Exception as e:
    d = repr(e).encode()
open("/workspace/flow.out", "w").write("END %.2f %r" % (time.time() - t, d))
"""


def test_update_cuts_a_live_terminated_flow(api, box, world, secret):
    """A terminated connection (handshake done, request not yet sent) is cut by an update
    before the update is acknowledged: it ran under the old rules."""
    sid = box(rules(secret))
    api.put_files(sid, {"flow.py": FLOW_PY.encode()})
    api.start(sid, ["python3", "/workspace/flow.py"])
    assert wait_for(lambda: api.read_file(sid, "/workspace/flow.ready").status == 200,
                    timeout=10)
    r = api.put_policy(sid, rules(secret + "-v2"))
    assert r.status == 200, r
    assert wait_for(lambda: api.read_file(sid, "/workspace/flow.out").status == 200, timeout=5)
    out = api.read_file(sid, "/workspace/flow.out").data.decode()
    assert out.startswith("END") and float(out.split()[1]) < 5, out
    # the cut connection's thread writes its line as it winds down, just after the cut
    def cut_logged():
        return [e for e in api.egress(sid) if e.get("layer") == "tls" and
                e.get("reason") == "policy_changed" and e.get("name") == "allowed.test"]
    assert wait_for(cut_logged, timeout=5), api.egress(sid)
    # the new secret is in force for the next request
    code, out, err = api.run(sid, CURL + ["https://allowed.test/api/after"])
    evs = [e for e in world.events("allowed", "http") if e["path"] == "/api/after"]
    assert evs and f"Authorization: Bearer {secret}-v2" in evs[0]["headers"], evs


def test_bad_rule_on_create_is_400(api):
    r = api.create({"allow": {"allowed.test": [{"transform": [{"headers": {"Host": "x"}}]}]}})
    assert r.status == 400, r
    assert "managed by the proxy" in r.json["error"]["message"], r.json


def test_ca_key_is_host_only_0600_and_removed_at_stop(api, box, ldaemon, secret):
    import os
    import stat
    sid = box(rules(secret))
    d = ldaemon.state / "ca" / sid
    assert (d / "ca.pem").exists(), list(d.parent.iterdir()) if d.parent.exists() else None
    st = os.stat(d / "ca.key")
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
    code, out, _ = api.run(sid, ["sh", "-c", "ls -a /etc/airlock; "
                                 "grep -rl 'PRIVATE KEY' /etc /tmp /workspace /home 2>/dev/null;"
                                 " true"])
    assert "PRIVATE KEY" not in out and "ca.key" not in out, out
    assert api.stop(sid).status == 200
    assert wait_for(lambda: not d.exists(), timeout=5), list(d.iterdir())


def test_image_sandbox_gets_the_ca_in_run(api, ldaemon, world, secret, tmp_path):
    """A daemon sandbox with --image: its /etc is the image's, so the gateway installs the
    CA in /run/airlock (made by the root for it) and commands point there."""
    import subprocess
    root = ldaemon.images / tmp_path.name
    for d in ("usr", "etc"):
        (root / d).mkdir(parents=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        (root / link).symlink_to(f"usr/{link}")
    subprocess.run(["mount", "--bind", "/usr", str(root / "usr")], check=True)
    sid = None
    try:
        r = api.request("POST", "/v1/sandboxes",
                        body={"image": str(root), "network_policy": rules(secret)})
        assert r.status == 201, r
        sid = r.json["sandbox"]["id"]
        ldaemon.sids.add(sid)
        code, out, err = api.run(sid, ["sh", "-c", "echo $SSL_CERT_FILE; " + " ".join(CURL) +
                                       " https://allowed.test/api/image"])
        assert code == 0, (out, err)
        assert out.startswith("/run/airlock/ca-bundle.pem\n"), out
        evs = [e for e in world.events("allowed", "http") if e["path"] == "/api/image"]
        assert evs and f"Authorization: Bearer {secret}" in evs[0]["headers"], evs
        assert secret not in out
    finally:
        if sid:
            api.stop(sid)
        subprocess.run(["umount", "-l", str(root / "usr")], check=False)
