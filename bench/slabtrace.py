"""Which kernel objects a sandbox keeps, by allocation site (bench/density --slab, --trace).

Slab caches of the same size and flags are merged (SLUB), so /proc/slabinfo's name of a
cache can stand for several object types: `cache_aliases` lists, for each cache shown,
the other caches merged into it (/sys/kernel/slab symlinks).

`Tracer` says which allocations made them: a tracefs instance of our own records every
kmalloc, kmem_cache_alloc and percpu allocation (each with its kernel stack, by an event
trigger) and every free while K sandboxes are created; an object allocated (by one of `pids`:
the daemon's threads and descendants, so that other work on the host is left out) and not
freed by the end is one that K sandboxes keep. Grouped by (cache, allocating function, the
system call or kernel thread it came from) and by what made it (CATEGORIES, a function in
its stack), divided by K. Pointers in the trace are
hashed by the kernel but stable, so an allocation and its free match. Other work on the
host that allocates long-lived objects in the window shows too: its rows carry the
command name, so they can be told apart. Needs root and tracefs.
"""
import os
import re
import subprocess

TRACEFS = "/sys/kernel/tracing"
ALLOC_EVENTS = ["kmem/kmalloc", "kmem/kmem_cache_alloc", "percpu/percpu_alloc_percpu"]
ALLOC_NAMES = {e.split("/")[1] for e in ALLOC_EVENTS}
FREE_EVENTS = ["kmem/kfree", "kmem/kmem_cache_free", "percpu/percpu_free_percpu"]

LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+):"
                  r" (?P<ev>\w+): (?P<rest>.*)$")
STACK = re.compile(r"^\s*.*?-\d+\s+\[(?P<cpu>\d+)\]")
FIELD = re.compile(r"(\w+)=(\S+)")
# frames that say nothing about who wanted the object
GENERIC = re.compile(r"^(trace_event_raw|\w+_noprof$|__?kmalloc|kmalloc|kmem_cache_alloc|__kmem_cache|kvmalloc|__kvmalloc|"
                     r"kzalloc|kmemdup|kstrdup|pcpu_alloc|__alloc_percpu|alloc_percpu|"
                     r"__do_kmalloc|kmalloc_trace|kmem_cache_zalloc|__kmalloc_cache|"
                     r"krealloc|__krealloc|kvzalloc|kcalloc|kmalloc_node|__kmalloc_node|"
                     r"memdup|kmalloc_reserve|slab_|___slab|entry_SYSCALL|do_syscall|"
                     r"x64_sys_call|ret_from_fork|kthread|worker_thread|process_one_work|"
                     r"__x64_sys|__do_sys|__se_sys)")


def cache_aliases():
    """cache name -> sorted list of the other cache names merged with it."""
    base = "/sys/kernel/slab"
    groups = {}
    try:
        names = os.listdir(base)
    except OSError:
        return {}
    for n in names:
        p = os.path.join(base, n)
        if os.path.islink(p):
            groups.setdefault(os.readlink(p).rsplit("/", 1)[-1], []).append(n)
    out = {}
    for members in groups.values():
        for m in members:
            out[m] = sorted(x for x in members if x != m)
    return out


def slab_table(s0, s1, n, aliases, top=40):
    """Rows (KiB per sandbox, cache, objects per sandbox, merged names) of the caches grown."""
    rows = []
    for name in set(s0) | set(s1):
        b0, o0 = s0.get(name, (0, 0))
        b1, o1 = s1.get(name, (0, 0))
        if b1 - b0 <= 0:
            continue
        rows.append(((b1 - b0) / 1024 / n, name, (o1 - o0) / n, aliases.get(name, [])))
    rows.sort(reverse=True)
    return rows[:top]


def _w(path, value):
    with open(path, "w") as f:
        f.write(value)


class Tracer:
    def __init__(self, tag, buffer_kb=131072):
        if not os.path.isdir(os.path.join(TRACEFS, "events")):
            subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=False,
                           stderr=subprocess.DEVNULL)
        self.dir = os.path.join(TRACEFS, "instances", tag)
        os.mkdir(self.dir)
        _w(os.path.join(self.dir, "buffer_size_kb"), str(buffer_kb))
        _w(os.path.join(self.dir, "trace_clock"), "mono")
        _w(os.path.join(self.dir, "options", "overwrite"), "0")  # drop new, never old
        for ev in ALLOC_EVENTS + FREE_EVENTS:
            _w(os.path.join(self.dir, "events", ev, "enable"), "1")
        for ev in ALLOC_EVENTS:
            _w(os.path.join(self.dir, "events", ev, "trigger"), "stacktrace")
        _w(os.path.join(self.dir, "tracing_on"), "1")

    def stop(self):
        _w(os.path.join(self.dir, "tracing_on"), "0")
        dropped = 0
        for cpu in os.listdir(os.path.join(self.dir, "per_cpu")):
            with open(os.path.join(self.dir, "per_cpu", cpu, "stats")) as f:
                for ln in f:
                    if ln.startswith(("overrun:", "dropped events:")):
                        dropped += int(ln.split(":")[1])
        with open(os.path.join(self.dir, "trace"), errors="replace") as f:
            text = f.read()
        self.close()
        return text, dropped

    def close(self):
        for ev in ALLOC_EVENTS:
            try:
                _w(os.path.join(self.dir, "events", ev, "trigger"), "!stacktrace")
            except OSError:
                pass
        try:
            _w(os.path.join(self.dir, "events", "enable"), "0")
        except OSError:
            pass
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def _func(frame):
    return frame.split("+", 1)[0].strip()


def _origin(stack, comm):
    """The system call (or, in a kernel thread, the work function) an allocation came from."""
    for fr in stack:
        f = _func(fr)
        m = re.match(r"^(?:__x64_sys_|__do_sys_|__se_sys_)(\w+)", f)
        if m:
            return m.group(1)
    for fr in reversed(stack):
        f = _func(fr)
        if not GENERIC.match(f):
            return f"{comm.split('/')[0]}:{f}"
    return comm


def _site(stack, call_site):
    """The first frame above the allocator that says what the object is for."""
    for fr in stack:
        f = _func(fr)
        if not GENERIC.match(f):
            return f
    return _func(call_site)


# What made an object, by a function in its stack (the first rule that matches wins).
CATEGORIES = [
    ("memcg shrinker info", ("alloc_shrinker_info", "expand_shrinker_info")),
    ("memcg list_lru", ("memcg_list_lru_alloc",)),
    ("network namespace", ("copy_net_ns", "setup_net", "register_netdev")),
    ("user namespace", ("create_user_ns",)),
    ("ipc namespace", ("create_ipc_ns", "copy_ipcs", "mq_init_ns")),
    ("uts/time/pid/cgroup namespace", ("copy_utsname", "copy_time_ns", "create_pid_namespace",
                                       "copy_cgroup_ns", "timens_on_fork")),
    ("cgroup directories", ("cgroup_mkdir",)),
    ("mount namespace", ("copy_mnt_ns", "alloc_mnt_ns")),
    ("mounts and superblocks", ("alloc_vfsmnt", "alloc_super", "vfs_get_tree", "do_new_mount",
                                "path_mount", "clone_mnt", "do_move_mount", "attach_recursive_mnt")),
    ("processes (fork)", ("copy_process",)),
    ("exec", ("do_execveat_common", "bprm_execve", "begin_new_exec")),
    ("seccomp, landlock", ("seccomp", "landlock")),
    ("sockets", ("__sys_socket", "__sys_socketpair", "unix_create", "sock_alloc", "__sys_accept")),
    ("epoll, eventfd, pipes", ("ep_insert", "do_epoll_create", "eventfd", "create_pipe_files",
                              "alloc_pipe_info")),
    ("files, inodes, dentries", ("shmem_", "d_alloc", "alloc_inode", "proc_", "path_openat")),
]


def category(stack):
    for name, funcs in CATEGORIES:
        for fr in stack:
            if any(fr.startswith(f) for f in funcs):
                return name
    return "other"


def analyse(text, k, top=40, pids=None):
    """Live objects of the trace grouped; rows (KiB per sandbox, objects per sandbox,
    cache, site, origin, comms, an example stack)."""
    live = {}  # ptr -> (bytes, cache, site, origin, comm, stack, category)
    pending = {}  # cpu -> an allocation waiting for its stack (the trigger's, same CPU)
    cpu = None  # the CPU of the last event line: a stack's lines follow their entry

    def finish(c, stack):
        p = pending.pop(c, None)
        if p:
            ptr, nbytes, cache, call_site, comm = p
            funcs = [_func(s) for s in stack]
            live[ptr] = (nbytes, cache, _site(stack, call_site), _origin(stack, comm), comm,
                         tuple(funcs[:12]), category(funcs))

    stack = None
    for ln in text.splitlines():
        if ln.startswith(" => "):
            if stack is not None:
                stack.append(ln[4:])
            continue
        if ln.startswith("#"):
            continue
        if stack is not None:
            finish(cpu, stack)
            stack = None
        if ln.endswith("<stack trace>"):
            m = STACK.match(ln)
            if m:
                cpu, stack = m.group("cpu"), []
            continue
        m = LINE.match(ln)
        if not m:
            continue
        ev, rest, comm, cpu = m.group("ev"), m.group("rest"), m.group("comm").strip(), \
            m.group("cpu")
        finish(cpu, [])  # an allocation whose stack never came
        fields = dict(FIELD.findall(rest))
        if pids is not None and ev in ALLOC_NAMES and int(m.group("pid")) not in pids:
            continue  # another process's (other work on the host)
        if ev in ("kmalloc", "kmem_cache_alloc"):
            nbytes = int(fields.get("bytes_alloc", 0))
            cg = "-cg" if fields.get("accounted") == "true" else ""  # charged to a memcg
            cache = fields.get("name") or f"kmalloc{cg}-{nbytes}"
            pending[cpu] = (fields.get("ptr"), nbytes, cache, fields.get("call_site", "?"), comm)
        elif ev == "percpu_alloc_percpu":
            nbytes = int(fields.get("bytes_alloc", 0))
            pending[cpu] = (("pcpu", fields.get("ptr")), nbytes, "(percpu)",
                            fields.get("call_site", "?"), comm)
        elif ev in ("kfree", "kmem_cache_free"):
            live.pop(fields.get("ptr"), None)
        elif ev == "percpu_free_percpu":
            live.pop(("pcpu", fields.get("ptr")), None)
    if stack is not None:
        finish(cpu, stack)
    groups, cats = {}, {}
    for nbytes, cache, site, origin, comm, st, cat in live.values():
        cats[cat] = cats.get(cat, 0) + nbytes / 1024 / k
        key = (cache, site, origin)
        g = groups.setdefault(key, [0, 0, set(), st])
        g[0] += nbytes
        g[1] += 1
        g[2].add(re.sub(r"\d+$", "N", comm))
    rows = [(b / 1024 / k, c / k, key[0], key[1], key[2], sorted(comms), st)
            for key, (b, c, comms, st) in groups.items()]
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    return rows[:top], total, sorted(((v, c) for c, v in cats.items()), reverse=True)
