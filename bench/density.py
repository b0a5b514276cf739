"""Density: what N idle sandboxes held by airlockd cost the host (see bench/density).

One fresh daemon on a scratch state directory. After one warm-up sandbox
(created and stopped, so one-time allocations of the daemon are not charged
to the sandboxes), a baseline is taken; then N sandboxes are created one after
the other and left idle; after a settle time the host is measured again:

  processes  PSS (/proc/<pid>/smaps_rollup) of the daemon (its growth), of
             every sandbox PID 1 (airlock-agent) and of every airlock-gateway
             among the daemon's descendants; Pss_Shmem is left out of these
             sums because tmpfs pages are counted once, in Shmem, below
  kernel     the change of Slab (SReclaimable + SUnreclaim), KernelStack,
             PageTables, Shmem (the sandboxes' tmpfs roots), Percpu and
             VmallocUsed in /proc/meminfo; each is the median of 3 readings.
             Kernel stacks are vmalloc'ed (CONFIG_VMAP_STACK), so they show in
             both KernelStack and VmallocUsed: only VmallocUsed's change beyond
             KernelStack's is added
  tmpfs      used bytes of each sandbox's root (statvfs of /proc/<pid1>/root)
  charged    a second, independent measure that other work on the host does
             not disturb: the daemon is started inside a memory cgroup of its
             own (cgroup v1 memory, when the host has it), so everything its
             spawner allocates for a sandbox (namespaces, mounts, page tables,
             the daemon's thread stacks and heap) is charged there; its
             growth plus what the sandboxes' own memory cgroups are charged
             (agent pages, tmpfs, kernel objects made inside) is the charged
             cost. Not every kernel allocation is charged to a cgroup, so this
             is a lower bound.

per sandbox = (daemon growth + agents + gateways + kernel deltas) / N.

Then every sandbox is stopped through the API, the daemon is stopped, and
the run checks that no agent, gateway or other descendant of the daemon is
left and that no cgroup of these sandboxes remains.
/proc/meminfo is host-wide: other work on the machine moves it too, so the
kernel part is noisy on a shared machine (the process part is not).
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from apiclient import ApiClient
import slabtrace

ap = argparse.ArgumentParser()
ap.add_argument("airlock")
ap.add_argument("--n", type=int, default=1000, help="idle sandboxes held at once")
ap.add_argument("--allow", action="append", default=[],
                help="domain allowlist for every sandbox (adds a gateway each)")
ap.add_argument("--settle", type=float, default=3.0, help="seconds before measuring")
ap.add_argument("--out", help="JSON file (default bench/results/density-<date>.json)")
ap.add_argument("--slab", action="store_true",
                help="print every slab cache grown, KiB and objects per sandbox, with the "
                     "caches merged into it")
ap.add_argument("--trace", type=int, default=0, metavar="K",
                help="after the measurement, create K more sandboxes under a kmem trace and "
                     "print the kernel objects they keep by allocation site (bench/slabtrace.py)")
args = ap.parse_args()

TOKEN = "bench-token"
KERNEL_FIELDS = ["SReclaimable", "SUnreclaim", "KernelStack", "PageTables", "Shmem", "Percpu",
                 "VmallocUsed"]
INFO_FIELDS = ["MemFree", "MemAvailable", "AnonPages", "Slab"]


def meminfo_once():
    m = {}
    with open("/proc/meminfo") as f:
        for ln in f:
            k, v = ln.split(":", 1)
            m[k] = int(v.split()[0])
    return m


def meminfo():
    """Median of 3 readings 0.3 s apart, per field (kB)."""
    rs = []
    for i in range(3):
        if i:
            time.sleep(0.3)
        rs.append(meminfo_once())
    return {k: statistics.median(r.get(k, 0) for r in rs) for k in rs[0]}


def slabinfo():
    """cache name -> (bytes held (num_objs * objsize), objects), or {} if unreadable."""
    out = {}
    try:
        with open("/proc/slabinfo") as f:
            for ln in f:
                if ln.startswith(("slabinfo", "#")):
                    continue
                p = ln.split()
                out[p[0]] = (int(p[2]) * int(p[3]), int(p[2]))
    except OSError:
        pass
    return out


def proc_table():
    """pid -> (ppid, starttime) for every process."""
    t = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rindex(")") + 2:].split()
        t[int(d)] = (int(rest[1]), int(rest[19]))
    return t


def descendants(root, table=None):
    table = table or proc_table()
    kids = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out, table


def rollup(pid):
    m = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for ln in f:
                if ln.startswith(("Rss:", "Pss:", "Pss_Anon:", "Pss_File:", "Pss_Shmem:")):
                    k, v = ln.split(":")
                    m[k] = int(v.split()[0])
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("Threads:"):
                    m["Threads"] = int(ln.split()[1])
    except OSError:
        return None
    return m


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def kind(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0]
    except OSError:
        return "gone"
    base = os.path.basename(argv0).decode(errors="replace")
    if "agent" in base:
        return "agent"
    if "gateway" in base:
        return "gateway"
    return base or "?"


def tmpfs_used(pid):
    try:
        st = os.statvfs(f"/proc/{pid}/root")
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def cgroup_dirs(ids):
    """Every cgroup directory (any hierarchy) named after one of ids."""
    found = []
    for top in sorted(os.listdir("/sys/fs/cgroup")):
        base = os.path.join("/sys/fs/cgroup", top)
        if os.path.islink(base) or not os.path.isdir(base):
            continue
        for dirpath, dirnames, _ in os.walk(base):
            for d in dirnames:
                if d in ids:
                    found.append(os.path.join(dirpath, d))
    return found


MEMCG_V1 = "/sys/fs/cgroup/memory"


def bench_memcg():
    """A fresh v1 memory cgroup for the daemon, or None (no v1 memory controller)."""
    if not os.path.exists(os.path.join(MEMCG_V1, "memory.usage_in_bytes")):
        return None
    d = os.path.join(MEMCG_V1, f"airlock-bench-density-{os.getpid()}")
    try:
        os.mkdir(d)
    except OSError as e:
        print(f"  (no memory cgroup of our own: {e}; the charged cross-check is skipped)")
        return None
    return d


def memcg_usage(d):
    return {"usage": read_int(os.path.join(d, "memory.usage_in_bytes")) or 0,
            "kmem": read_int(os.path.join(d, "memory.kmem.usage_in_bytes")) or 0}


def read_int(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def cgroup_memory(ids):
    """Bytes charged to the sandboxes' memory cgroups (v1 memory or v2)."""
    usage = kmem = 0
    seen = 0
    for d in cgroup_dirs(set(ids)):
        u = read_int(os.path.join(d, "memory.usage_in_bytes"))
        if u is None:
            u = read_int(os.path.join(d, "memory.current"))
        if u is None:
            continue
        seen += 1
        usage += u
        kmem += read_int(os.path.join(d, "memory.kmem.usage_in_bytes")) or 0
    return {"cgroups": seen, "usage_bytes": usage, "kmem_bytes": kmem}


def Client(port):
    return ApiClient(port, TOKEN, timeout=120)


def quant(xs, p):
    xs = sorted(xs)
    pos = p * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def probe(c, body, reps=20):
    """Median ms of reps (create + stop) cycles over the API, and of reps one-shot
    `airlock run -- /bin/true` (no daemon involved), alternated."""
    cyc, one = [], []
    for _ in range(reps):
        t = time.perf_counter()
        sid = json.loads(c.call("POST", "/v1/sandboxes", body))["sandbox"]["id"]
        c.call("POST", f"/v1/sandboxes/{sid}/stop")
        cyc.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        subprocess.run([args.airlock, "run", "--", "/bin/true"], check=True,
                       stdin=subprocess.DEVNULL)
        one.append((time.perf_counter() - t) * 1000)
    return {"create_stop_ms": statistics.median(cyc), "oneshot_ms": statistics.median(one)}


def tasks_of(root):
    """Every thread of root and of its descendants."""
    out = set()
    for p in [root] + descendants(root)[0]:
        try:
            out |= {int(t) for t in os.listdir(f"/proc/{p}/task")}
        except OSError:
            pass
    return out


def trace_sites(c, body, ids, res, daemon_pid):
    """--trace K: K more sandboxes created under a kmem trace; what they keep, by site."""
    k = args.trace
    tr = slabtrace.Tracer(f"airlock-density-{os.getpid()}", buffer_kb=131072)
    try:
        for _ in range(k):
            ids.append(json.loads(c.call("POST", "/v1/sandboxes", body))["sandbox"]["id"])
        time.sleep(args.settle)
        pids = tasks_of(daemon_pid)
        text, dropped = tr.stop()
    finally:
        tr.close()
    rows, total, cats = slabtrace.analyse(text, k, pids=pids)
    res["trace"] = {"k": k, "dropped_events": dropped, "live_kib_per_sandbox": total,
                    "categories_kib": {c: round(v, 2) for v, c in cats},
                    "sites": [{"kib": round(r[0], 2), "objects": round(r[1], 2),
                               "cache": r[2], "site": r[3], "origin": r[4], "comms": r[5],
                               "stack": list(r[6])} for r in rows]}
    print(f"\n  kernel objects kept by {k} sandboxes created under a kmem trace, per sandbox "
          f"(object sizes only: no slab overhead; {total:.1f} KiB in all; "
          f"{dropped} events dropped):")
    print("  by what made them (a function in the allocation's stack), KiB: " + ", ".join(
        f"{c} {v:.1f}" for v, c in cats if v >= 0.1))
    print(f"  {'KiB':>7} {'objects':>8}  {'cache':<24} {'allocated by':<28} from (who)")
    for kib, objs, cache, site, origin, comms, _ in rows:
        if kib < 0.2:
            break
        print(f"  {kib:>7.1f} {objs:>8.1f}  {cache:<24} {site:<28} {origin} "
              f"({', '.join(comms[:3])})")


def main():
    # a SIGTERM (timeout(1), say) still runs the clean-up below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    n = args.n
    state = tempfile.mkdtemp(prefix="airlock-density-")
    with open(os.path.join(state, "tokens"), "w") as f:
        f.write(f"{TOKEN} bench\n")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    serve = [args.airlock, "serve", "--state-dir", state, "--listen", f"127.0.0.1:{port}",
             "--tokens", os.path.join(state, "tokens")]
    body = {"timeout": 3600 * 1000}
    if args.allow:
        body["network_policy"] = {"allow": args.allow}
    print("  $ " + " ".join(serve), flush=True)
    print(f"  then {n} x POST /v1/sandboxes {json.dumps(body)}, idle; "
          f"then POST /v1/sandboxes/ID/stop for each", flush=True)
    log = open(os.path.join(state, "daemon.log"), "wb")
    memcg = bench_memcg()
    if memcg:
        # join the cgroup, then exec the daemon: it is charged from its first page
        print(f"  (the daemon runs in its own memory cgroup {memcg})", flush=True)
        wrapped = ["/bin/sh", "-c", f'echo $$ > {memcg}/cgroup.procs && exec "$@"', "sh", *serve]
    else:
        wrapped = serve
    daemon = subprocess.Popen(wrapped, stderr=log, stdin=subprocess.DEVNULL)
    res = {"n": n, "policy": body.get("network_policy", "deny-all"),
           "serve_command": " ".join(serve), "create_body": body,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "loadavg_before": os.getloadavg()}
    ids, pid1s, problems = [], {}, []
    c = None
    m0 = None
    try:
        for _ in range(200):
            try:
                c = Client(port)
                c.call("GET", "/v1/health")
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("airlockd did not answer /v1/health")
        # warm-up: one sandbox, created, used and stopped
        w = json.loads(c.call("POST", "/v1/sandboxes", body))["sandbox"]["id"]
        c.call("POST", f"/v1/sandboxes/{w}/commands", {"cmd": "true", "wait": True})
        c.call("POST", f"/v1/sandboxes/{w}/stop")
        res["probe_empty"] = probe(c, body)
        time.sleep(args.settle / 2)
        m0 = meminfo()
        s0 = slabinfo()
        g0 = memcg_usage(memcg) if memcg else None
        d0 = rollup(daemon.pid)
        res["daemon_before"] = d0

        lat = []
        t_all = time.perf_counter()
        for i in range(n):
            t = time.perf_counter()
            ids.append(json.loads(c.call("POST", "/v1/sandboxes", body))["sandbox"]["id"])
            lat.append((time.perf_counter() - t) * 1000)
            if (i + 1) % 100 == 0 or i + 1 == n:
                print(f"    created {i + 1}/{n}  (last create {lat[-1]:.1f} ms)", flush=True)
        res["create_seconds"] = time.perf_counter() - t_all
        k = min(100, n)
        res["create_ms"] = {"median": statistics.median(lat), "p99": quant(lat, 0.99),
                            "max": max(lat), "first_median": statistics.median(lat[:k]),
                            "last_median": statistics.median(lat[-k:])}
        time.sleep(args.settle)

        # one command's round trip in a sandbox while the others idle
        rt = []
        for _ in range(50):
            t = time.perf_counter()
            c.call("POST", f"/v1/sandboxes/{ids[0]}/commands", {"cmd": "true", "wait": True})
            rt.append((time.perf_counter() - t) * 1000)
        res["round_trip_ms_while_idle"] = {"median": statistics.median(rt),
                                           "p90": quant(rt, 0.9)}
        # does a sandbox cost more to make when many exist? the one-shot run
        # shares the kernel but not the daemon, so it tells the two apart
        res["probe_full"] = probe(c, body)

        desc, table = descendants(daemon.pid)
        procs = {"agent": [], "gateway": [], "other": []}
        tmp_used = []
        for p in desc:
            kd = kind(p)
            r = rollup(p)
            if r is None:
                continue
            r["pid"] = p
            procs[kd if kd in procs else "other"].append(r)
            if kd == "agent":
                pid1s[p] = table[p][1]
                u = tmpfs_used(p)
                if u is not None:
                    tmp_used.append(u)
            elif kd in ("gateway", "other"):
                pid1s[p] = table[p][1]
        d1 = rollup(daemon.pid)
        cg = cgroup_memory(ids)
        g1 = memcg_usage(memcg) if memcg else None
        m1 = meminfo()
        s1 = slabinfo()
        sd = sorted(((s1.get(k2, (0, 0))[0] - s0.get(k2, (0, 0))[0], k2)
                     for k2 in set(s0) | set(s1)), reverse=True)
        res["slab_top_kib_per_sandbox"] = {k2: round(v / 1024 / n, 1) for v, k2 in sd[:12]}
        res["daemon_after"] = d1
        res["cgroup_memory"] = cg

        def psum(lst, key):
            return sum(x.get(key, 0) for x in lst)
        parts = {}
        parts["daemon_growth_kib"] = (d1["Pss"] - d1.get("Pss_Shmem", 0)) - \
            (d0["Pss"] - d0.get("Pss_Shmem", 0))
        for kd in ("agent", "gateway", "other"):
            parts[f"{kd}_pss_kib"] = psum(procs[kd], "Pss") - psum(procs[kd], "Pss_Shmem")
        kern = {f: m1.get(f, 0) - m0.get(f, 0) for f in KERNEL_FIELDS}
        res["vmalloc_used_delta_kib"] = kern.pop("VmallocUsed")
        kern["VmallocUsed_beyond_stacks"] = res["vmalloc_used_delta_kib"] - kern["KernelStack"]
        info = {f: m1.get(f, 0) - m0.get(f, 0) for f in INFO_FIELDS}
        proc_total = sum(parts.values())
        kern_total = sum(kern.values())
        res["counts"] = {kd: len(v) for kd, v in procs.items()}
        res["process_kib"] = parts
        res["agent_pss_kib_each"] = {
            "median": statistics.median([x["Pss"] for x in procs["agent"]]) if procs["agent"] else None,
            "rss_median": statistics.median([x["Rss"] for x in procs["agent"]]) if procs["agent"] else None}
        res["daemon_threads"] = {"before": d0.get("Threads"), "after": d1.get("Threads")}
        res["kernel_delta_kib"] = kern
        res["meminfo_delta_kib_info"] = info
        res["tmpfs_used_bytes"] = {"sandboxes": len(tmp_used), "total": sum(tmp_used),
                                   "median": statistics.median(tmp_used) if tmp_used else None}
        per = {k2: v / n for k2, v in parts.items()}
        per.update({k2: v / n for k2, v in kern.items()})
        res["per_sandbox_kib"] = per
        res["per_sandbox_process_kib"] = proc_total / n
        res["per_sandbox_kernel_kib"] = kern_total / n
        res["per_sandbox_total_kib"] = (proc_total + kern_total) / n
        res["per_sandbox_cgroup_charged_kib"] = cg["usage_bytes"] / 1024 / n if cg["cgroups"] else None
        if g0 and g1:
            res["daemon_memcg_growth_bytes"] = {k2: g1[k2] - g0[k2] for k2 in g0}
            res["per_sandbox_charged_kib"] = {
                "daemon_side": (g1["usage"] - g0["usage"]) / 1024 / n,
                "daemon_side_kmem": (g1["kmem"] - g0["kmem"]) / 1024 / n,
                "sandbox_cgroups": cg["usage_bytes"] / 1024 / n,
                "sandbox_cgroups_kmem": cg["kmem_bytes"] / 1024 / n,
            }
            res["per_sandbox_charged_total_kib"] = (
                (g1["usage"] - g0["usage"]) + cg["usage_bytes"]) / 1024 / n

        # ---- report ----
        print(f"\n  {n} idle sandboxes ({res['counts']['agent']} agents, "
              f"{res['counts']['gateway']} gateways, {res['counts']['other']} other "
              f"processes under the daemon); created in {res['create_seconds']:.1f} s "
              f"(create median {res['create_ms']['median']:.1f} ms, first {k} "
              f"{res['create_ms']['first_median']:.1f} ms, last {k} "
              f"{res['create_ms']['last_median']:.1f} ms)")
        print(f"  {'part':<34}{'total MiB':>11}{'per sandbox KiB':>17}")
        rows = [("daemon PSS growth", parts["daemon_growth_kib"]),
                ("agents PSS (sandbox PID 1)", parts["agent_pss_kib"]),
                ("gateways PSS", parts["gateway_pss_kib"]),
                ("other descendants PSS", parts["other_pss_kib"])]
        rows += [(f"kernel: {f}", v) for f, v in kern.items()]
        for label, v in rows:
            print(f"  {label:<34}{v / 1024:>11.1f}{v / n:>17.1f}")
        print(f"  {'= total':<34}{(proc_total + kern_total) / 1024:>11.1f}"
              f"{(proc_total + kern_total) / n:>17.1f}")
        if s1:
            print("  largest slab caches grown, KiB per sandbox (slab caches are merged, "
                  "so a name can stand for several object types): " + ", ".join(
                      f"{k2} {v}" for k2, v in list(res["slab_top_kib_per_sandbox"].items())[:10]))
        pc = res.get("per_sandbox_charged_kib")
        if pc:
            print(f"  charged to memory cgroups, per sandbox (not disturbed by other work on the "
                  f"host; a lower bound): daemon's cgroup {pc['daemon_side']:.0f} KiB (kmem "
                  f"{pc['daemon_side_kmem']:.0f}) + the sandbox's own cgroup "
                  f"{pc['sandbox_cgroups']:.0f} KiB (kmem {pc['sandbox_cgroups_kmem']:.0f}) = "
                  f"{res['per_sandbox_charged_total_kib']:.0f} KiB")
        pe, pf = res["probe_empty"], res["probe_full"]
        print(f"  with 0 / {n} sandboxes held: create+stop over the API {pe['create_stop_ms']:.1f} / "
              f"{pf['create_stop_ms']:.1f} ms, one-shot `airlock run -- /bin/true` "
              f"{pe['oneshot_ms']:.1f} / {pf['oneshot_ms']:.1f} ms (medians of 20)")
        print(f"  cross-checks: tmpfs used per sandbox root {res['tmpfs_used_bytes']['median']} B "
              f"(median); memory cgroups charged {cg['usage_bytes'] / 1024 / max(1, cg['cgroups']):.0f} "
              f"KiB each (kmem {cg['kmem_bytes'] / 1024 / max(1, cg['cgroups']):.0f} KiB) over "
              f"{cg['cgroups']} cgroups; MemFree fell {-info['MemFree'] / n:.0f} KiB per sandbox "
              f"(host-wide, noisy); daemon threads {d0.get('Threads')} -> {d1.get('Threads')}; "
              f"round trip with {n} idle: {res['round_trip_ms_while_idle']['median']:.2f} ms")
        if args.slab and s1:
            rows = slabtrace.slab_table(s0, s1, n, slabtrace.cache_aliases())
            res["slab_caches_per_sandbox"] = [
                {"cache": r[1], "kib": round(r[0], 2), "objects": round(r[2], 2),
                 "merged_with": r[3]} for r in rows]
            print(f"\n  slab caches grown, per sandbox (N = {n}):")
            print(f"  {'KiB':>7} {'objects':>8}  cache (merged with)")
            for kib, name, objs, merged in rows:
                if kib < 0.2:
                    break
                al = f" ({', '.join(merged[:6])}{', ...' if len(merged) > 6 else ''})" \
                    if merged else ""
                print(f"  {kib:>7.1f} {objs:>8.1f}  {name}{al}")
        if args.trace:
            trace_sites(c, body, ids, res, daemon.pid)
    except Exception as e:
        problems.append(f"error: {e}")
        print(f"bench/density: error: {e}", file=sys.stderr)
        log.flush()
        with open(os.path.join(state, "daemon.log"), "rb") as f:
            tail = f.read()[-1500:].decode(errors="replace")
        if tail.strip():
            print("  airlockd stderr (tail):\n" + tail, file=sys.stderr)
    finally:
        # ---- clean up and check ----
        t = time.perf_counter()
        stopped, stop_err = 0, []
        for sid in ids:
            # twice: a kept-alive connection the daemon closed meanwhile (a long --trace
            # analysis) fails the first try
            for attempt in range(2):
                try:
                    if c is None:
                        c = Client(port)
                    c.call("POST", f"/v1/sandboxes/{sid}/stop")
                    stopped += 1
                    break
                except Exception as e:
                    if attempt:
                        stop_err.append(f"{sid}: {e}")
                    try:
                        c = Client(port)
                    except Exception:
                        pass
        res["stop_seconds"] = time.perf_counter() - t
        time.sleep(1.0)
        left_desc, table = descendants(daemon.pid)
        # the daemon's own spawner (forked at start, lives as long as the daemon) is not a
        # sandbox's leftover
        left_desc = [p for p in left_desc if comm(p) != "airlockd-spawn"]
        daemon.terminate()
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
            problems.append("airlockd did not exit on SIGTERM within 20 s")
        table = proc_table()
        alive = [p for p, st in pid1s.items() if table.get(p, (0, -1))[1] == st]
        cgs = cgroup_dirs(set(ids))
        if memcg:
            for _ in range(50):
                try:
                    os.rmdir(memcg)
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                problems.append(f"could not remove the bench's memory cgroup {memcg}")
        mounts = []
        with open("/proc/self/mountinfo") as f:
            for ln in f:
                if state in ln:
                    mounts.append(ln.split()[4])
        m2 = meminfo()
        res["cleanup"] = {"stopped": stopped, "stop_errors": stop_err[:5],
                          "descendants_after_stop": len(left_desc),
                          "processes_still_alive": alive[:20], "cgroups_left": cgs[:20],
                          "mounts_left": mounts[:20]}
        print(f"\n  clean-up: stopped {stopped}/{len(ids)} in {res['stop_seconds']:.1f} s; "
              f"daemon descendants left after the stops: {len(left_desc)}; agent/gateway "
              f"processes alive after the daemon exited: {len(alive)}; cgroups left: {len(cgs)}; "
              f"mounts under the state dir: {len(mounts)}")
        if stop_err:
            problems.append(f"{len(stop_err)} stop(s) failed, first: {stop_err[0]}")
        if alive:
            problems.append(f"{len(alive)} sandbox process(es) still alive: {alive[:10]}")
            for p in alive:
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
        if cgs:
            problems.append(f"{len(cgs)} cgroup(s) left: {cgs[:5]}")
        if left_desc:
            problems.append(f"{len(left_desc)} daemon descendant(s) left after all stops")
        if m0:
            # what the kernel had not given back yet (freeing is partly deferred)
            res["kernel_delta_after_cleanup_kib"] = {f: m2.get(f, 0) - m0.get(f, 0)
                                                     for f in KERNEL_FIELDS}
            print("  kernel counters after clean-up vs the baseline (KiB): " + ", ".join(
                f"{f} {v:+.0f}" for f, v in res["kernel_delta_after_cleanup_kib"].items()))
            r = res["kernel_delta_after_cleanup_kib"]
            resid = sum(v for f, v in r.items() if f != "VmallocUsed") / max(1, len(ids))
            res["kernel_residual_per_sandbox_kib"] = resid
            kp = res.get("per_sandbox_kernel_kib")
            # Some residue is normal (dentry/inode caches, RCU-deferred frees);
            # a large one means other work moved the host-wide counters.
            res["kernel_noisy"] = bool(kp) and abs(resid) > 0.25 * abs(kp)
            if res["kernel_noisy"]:
                print(f"  WARNING: the kernel counters had not come back after the clean-up "
                      f"({resid:+.0f} KiB per sandbox against {kp:.0f} measured): other work on "
                      f"the host moved them, so the kernel part is noisy; the charged figure "
                      f"above is not affected")
        res["problems"] = problems
        for p in problems:
            print(f"  PROBLEM: {p}")
        subprocess.run(["rm", "-rf", state])
    out = args.out
    if not out:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, time.strftime("density-%Y%m%d-%H%M%S.json", time.gmtime()))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"  results: {out}")
    return 0 if not problems else 1


sys.exit(main())
