"""The network boundary per container: the airlock.dev/network-policy annotation gives a
container its own gateway with that policy, and its egress log. A fake upstream in a
network namespace made here (upstream.py); the gateway dials out from there
(AIRLOCK_OCI_UPSTREAM_NETNS, AIRLOCK_OCI_UPSTREAM_DNS: the operator's settings)."""
import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    try:
        import dnslib  # noqa: F401
    except ImportError:
        pytest.skip("python3-dnslib is not installed (scripts/setup installs it)")
    ns = "aloci-%d" % os.getpid()
    d = tmp_path_factory.mktemp("upstream")
    hits = d / "hits"
    hits.write_text("")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    srv = None
    try:
        for cmd in (["link", "set", "lo", "up"], ["addr", "add", "203.0.113.10/32", "dev", "lo"],
                    ["addr", "add", "203.0.113.53/32", "dev", "lo"]):
            subprocess.run(["ip", "-n", ns] + cmd, check=True)
        srv = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable,
                                os.path.join(HERE, "upstream.py"), str(hits)],
                               stdout=subprocess.PIPE, text=True)
        assert srv.stdout.readline().strip() == "ready"
        yield {"netns": "/run/netns/" + ns, "hits": hits}
    finally:
        if srv:
            srv.kill()
            srv.wait()
        subprocess.run(["ip", "netns", "del", ns])


def test_allowed_name_reaches_upstream_denied_name_is_blocked_and_logged(
        bundle, lifecycle, upstream, tmp_path, monkeypatch):
    log = tmp_path / "egress.log"
    policy = {"allow": ["allowed.test"]}
    monkeypatch.setenv("AIRLOCK_OCI_UPSTREAM_NETNS", upstream["netns"])
    monkeypatch.setenv("AIRLOCK_OCI_UPSTREAM_DNS", "203.0.113.53")
    # busybox-static cannot resolve (no NSS in a static glibc): the names travel in the
    # Host header, as the gateway's transparent proxy reads them.
    get = ("printf 'GET / HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n' | nc -w 3 203.0.113.10 80 "
           "2>&1; echo %s=$?; ")
    b = bundle(["sh", "-c", get % ("allowed.test", "allowed") + get % ("denied.test", "denied")],
               annotations={"airlock.dev/network-policy": json.dumps(policy),
                            "airlock.dev/egress-log": str(log)})
    r = lifecycle(b)
    assert "hello from upstream" in r.out, (r.out, r.err, r.create_err)
    assert r.out.count("hello from upstream") == 1
    assert upstream["hits"].read_text().split() == ["allowed.test"]
    time.sleep(0.2)  # the gateway writes its last lines as the container ends
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    assert any(e.get("verdict") == "allow" and "allowed.test" in json.dumps(e) for e in lines)
    assert any(e.get("verdict") == "deny" and "denied.test" in json.dumps(e) for e in lines), \
        lines


def test_no_annotation_is_loopback_only(bundle, lifecycle):
    r = lifecycle(bundle(["sh", "-c", "ls /sys/class/net 2>/dev/null; cat /proc/net/dev | "
                          "tail -n +3 | cut -d: -f1; echo x | nc -w 2 203.0.113.10 80; "
                          "echo nc=$?"]))
    ifaces = [x.strip() for x in r.out.splitlines()[:-1] if x.strip()]
    assert ifaces == ["lo"], r.out
    assert "nc=0" not in r.out and "nc=" in r.out


def test_an_invalid_policy_is_refused_at_create(bundle, lifecycle):
    b = bundle(["true"], annotations={"airlock.dev/network-policy": '{"allow": 5}'})
    r = lifecycle(b)
    assert r.create_rc == 1 and "network-policy" in r.create_err, r.create_err


def test_the_gateways_channel_never_reaches_the_workload(bundle, lifecycle, upstream,
                                                         monkeypatch):
    monkeypatch.setenv("AIRLOCK_OCI_UPSTREAM_NETNS", upstream["netns"])
    b = bundle(["sh", "-c", "ls /proc/self/fd; ls /proc/1/fd 2>&1 | head -3"],
               annotations={"airlock.dev/network-policy": json.dumps({"allow": ["x.test"]})})
    r = lifecycle(b)
    fds = r.out.split()
    assert fds[:4] == ["0", "1", "2", "3"] and (len(fds) == 4 or not fds[4].isdigit()), r.out


@pytest.mark.parametrize("policy", ["deny-all", '"deny-all"', '{"mode": "deny-all"}'])
def test_a_deny_all_annotation_is_loopback_only_without_a_gateway(bundle, lifecycle, policy):
    r = lifecycle(bundle(["sh", "-c", "cut -d: -f1 /proc/net/dev | tail -n +3"],
                         annotations={"airlock.dev/network-policy": policy}))
    assert r.out.split() == ["lo"], (r.out, r.create_err)


def test_delete_leaves_nothing_in_the_state_directory(oci, bundle, upstream, monkeypatch):
    monkeypatch.setenv("AIRLOCK_OCI_UPSTREAM_NETNS", upstream["netns"])
    b = bundle(["true"], annotations={"airlock.dev/network-policy": '{"allow": ["x.test"]}'})
    assert oci(["create", "--bundle", str(b), "e"]).returncode == 0
    assert os.path.exists(os.path.join(oci.root, "e", "egress.log"))
    assert oci(["delete", "--force", "e"]).returncode == 0
    assert sorted(os.listdir(oci.root)) == [".lock"]
    assert oci(["create", "--bundle", str(b), "e"]).returncode == 0  # the ID is free again
    assert oci(["delete", "--force", "e"]).returncode == 0
