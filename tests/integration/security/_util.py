"""Small helpers shared by the security suite's modules."""

import json
import textwrap

PY = "/usr/bin/python3"

# ctypes prelude for probes: sc(nr, *args) -> (ret, errno)
PRELUDE = r'''
import ctypes, errno, json, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
EPERM, ENOSYS = errno.EPERM, errno.ENOSYS
def _a(a):
    if isinstance(a, int):
        return ctypes.c_long(a if a < (1 << 63) else a - (1 << 64))
    if isinstance(a, bytes):
        return ctypes.c_char_p(a)
    return a
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[_a(a) for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def forked(fn):
    """Run fn() in a child; returns its JSON result, or {'signal': n}."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            os.write(wfd, json.dumps(fn()).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    data = b""
    while True:
        c = os.read(rfd, 65536)
        if not c:
            break
        data += c
    os.close(rfd)
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        return {"signal": os.WTERMSIG(st)}
    return json.loads(data) if data else None
'''


def probe(run, src, *flags, timeout=30, expect_rc=0):
    """Run PRELUDE + src with python3 in `airlock run`; src prints one JSON line last."""
    r = run([*flags, "--", PY, "-c", PRELUDE + textwrap.dedent(src)], timeout=timeout)
    assert r.returncode == expect_rc, (r.returncode, r.out[-2000:], r.err[-2000:])
    lines = [l for l in r.out.replace("\r", "").splitlines() if l.strip()]
    return json.loads(lines[-1])
