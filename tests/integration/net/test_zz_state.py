"""Runs last: nothing leaks between tests or out of the suite."""

import os
import subprocess



def host_pids_matching(needle):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    out.append(int(d))
        except OSError:
            pass
    return out


def test_world_still_works_after_everything(run_net, net, world):
    r = run_net(["--allow", "allowed.test"] + net.curl("https://allowed.test/"))
    assert net.http_code(r) == 200, (r.out, r.err)
    r = run_net(net.probe("netinfo"))
    assert r.probe["ifaces"] == ["lo"], r.probe


def test_no_gateway_process_left(world):
    """No process that was told about our world's namespace survives."""
    left = host_pids_matching(world.ns)
    mine = {os.getpid()}
    if world.proc:
        mine.add(world.proc.pid)
    world_pids = set(subprocess.run(["ip", "netns", "pids", world.ns],
                                    capture_output=True, text=True
                                    ).stdout.split())
    left = [p for p in left if p not in mine and str(p) not in world_pids]
    assert left == [], left


def test_no_network_namespace_or_host_link_leaked(world):
    """Namespaces and host links that appeared during the suite and are
    still there (other users of this host may create their own: only names
    absent at the start and present now are reported)."""
    now_ns, now_links = world.host_state()

    def other_live_world(name, prefix):
        # Another run of this suite (e.g. `make test` in parallel) has its
        # own world, named after its live pytest pid.
        rest = name[len(prefix):]
        return name.startswith(prefix) and rest.isdigit() and \
            os.path.exists(f"/proc/{rest}")

    def owned_by_other_live_process(name):
        # airlock itself never names a namespace (its gateways' are anonymous):
        # named ones come from test worlds and benchmarks (alnet-, albw-, albc-,
        # albr- + the creator's pid). Another live creator's are not ours.
        digits = name[len(name.rstrip("0123456789")):]
        return bool(digits) and int(digits) != os.getpid() and \
            os.path.exists(f"/proc/{digits}")
    new_ns = {n for n in now_ns - world.ns_before - {world.ns}
              if not other_live_world(n, "alnet-") and not owned_by_other_live_process(n)}
    new_links = {n for n in now_links - world.links_before
                 if not other_live_world(n, "alh")}
    assert not new_ns and not new_links, (sorted(new_ns), sorted(new_links))


def test_world_namespace_untouched(world):
    """airlock only dials out of the upstream netns: it must not add links,
    addresses, routes or nft tables to it."""
    ns = ["ip", "netns", "exec", world.ns]
    links = subprocess.run(ns + ["ip", "-o", "link"], capture_output=True,
                           text=True).stdout
    names = sorted(ln.split(":")[1].strip().split("@")[0]
                   for ln in links.splitlines())
    assert names == ["eth0", "lo"], names
    tables = subprocess.run(ns + ["nft", "list", "tables"],
                            capture_output=True, text=True).stdout.split("\n")
    assert [t for t in tables if t.strip()] == ["table inet oracle"], tables
    routes = subprocess.run(ns + ["ip", "route"], capture_output=True,
                            text=True).stdout
    assert "default" not in routes, routes
