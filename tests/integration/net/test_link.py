"""The shape of the sandbox's link when a policy allows anything."""

ALLOW = ["--allow", "allowed.test"]


def test_link_address_route_resolver_env(run_net, net):
    r = run_net(ALLOW + net.probe("netinfo"))
    assert r.returncode == 0, r.err
    info = r.probe
    assert info["ifaces"] == ["eth0", "lo"], info
    eth0 = [a for a in info["addrs"] if a["ifname"] == "eth0"][0]
    v4 = [(x["local"], x["prefixlen"]) for x in eth0["addr_info"]
          if x["family"] == "inet"]
    assert v4 == [("100.96.0.2", 30)], eth0
    v6 = [x for x in eth0["addr_info"] if x["family"] == "inet6"]
    assert v6 == [], f"IPv6 on the link: {v6}"
    default = [x for x in info["routes"] if x["dst"] == "default"]
    assert len(default) == 1 and default[0]["gateway"] == "100.96.0.1", \
        info["routes"]
    assert [x for x in info["routes6"] if x.get("dst") == "default"] == []
    ns = [ln.split()[1] for ln in info["resolv"].splitlines()
          if ln.startswith("nameserver")]
    assert ns == ["100.96.0.1"], info["resolv"]
    env = info["env"]
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert env.get(k) == "http://100.96.0.1:3128", env
    no = env.get("NO_PROXY") or env.get("no_proxy")
    assert no and {"localhost", "127.0.0.1"} <= set(no.split(",")), env


def test_getaddrinfo_through_gateway(run_net, net, world):
    r = run_net(ALLOW + net.batch(["resolve", "allowed.test"],
                                  ["resolve", "denied.test"]))
    assert r.returncode == 0, r.err
    ok, bad = r.probe
    assert ok.get("addrs") == ["203.0.113.10"], ok
    assert "addrs" not in bad, bad
    assert "denied.test" not in world.dns_queries()
    assert net.find(r.egress, layer="dns", verdict="allow", name="allowed.test")
    assert net.find(r.egress, layer="dns", verdict="deny", name="denied.test")


def test_workload_starts_only_once_the_link_is_made(run_net, net):
    """`airlock run` starts the gateway beside the sandbox's own set-up: the gateway makes
    and configures eth0 from outside while the sandbox builds its root, and PID 1 waits
    for the parent's JMSG_LINK before it starts the workload. So the very first thing a
    workload does (a shell's first command, a millisecond in) already finds its address
    and default route, and its first request goes through. Repeated: a race would show."""
    for i in range(8):
        r = run_net(ALLOW + ["--", "/bin/sh", "-c",
                             f"cat /proc/net/route; {net.CURL} https://allowed.test/first{i}"])
        assert r.returncode == 0, (i, r.out, r.err)
        routes = [ln.split() for ln in r.out.splitlines() if ln.startswith("eth0")]
        # default (00000000) via 100.96.0.1 (01006064, little-endian) on eth0
        assert any(f[1] == "00000000" and f[2] == "01006064" for f in routes), (i, r.out)
        assert "HTTPCODE=200" in r.out, (i, r.out, r.err)
        assert net.find(r.egress, verdict="allow", name="allowed.test"), (i, r.egress)


def test_missing_gateway_is_a_clear_setup_error(tmp_path):
    """The gateway starts beside the sandbox, so its failure is seen late; airlock still
    reports the gateway's own words (and no workload runs), not a broken pipe."""
    import shutil
    import subprocess
    from conftest import AIRLOCK_BIN
    lone = tmp_path / "airlock"
    shutil.copy(AIRLOCK_BIN, lone)  # no airlock-gateway next to it
    r = subprocess.run([str(lone), "run", "--allow", "allowed.test", "--", "/bin/echo",
                        "workload-ran"], capture_output=True, timeout=30)
    assert r.returncode == 125, (r.returncode, r.stderr)
    assert b"cannot run" in r.stderr and b"airlock-gateway" in r.stderr, r.stderr
    assert b"Broken pipe" not in r.stderr, r.stderr
    assert b"workload-ran" not in r.stdout, r.stdout
