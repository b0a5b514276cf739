"""A pool of recycled network namespaces of its own for one test (src/jail/ahead/recycle.h):
$AIRLOCK_NETNS_POOL under /run/airlock, drained and removed at the end."""

import fcntl
import os
import pathlib
import random
import shutil
import time

import pytest

from conftest import PY


class Pool:
    def __init__(self, run, invoke):
        self.dir = pathlib.Path("/run/airlock/test-netns-%d-%d" % (
            os.getpid(), random.randrange(1 << 30)))
        self.env = {"AIRLOCK_NETNS_POOL": str(self.dir)}
        self._run, self._invoke = run, invoke

    def run(self, args, **kw):
        self.settle()          # the last run's namespace back first: tests are sequential
        return self._run(args, env=self.env, **kw)

    def py(self, src, *flags, **kw):
        return self.run([*flags, "--", PY, "-c", src], **kw)

    def settle(self):
        """Wait for the checks of runs that ended: `airlock run` leaves them to a detached
        child, which holds ROOT/lock shared until it is done (jail_recycle_settle)."""
        p = self.dir / "lock"
        if not p.exists():
            return
        with open(p) as f:
            deadline = time.monotonic() + 10
            while True:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    assert time.monotonic() < deadline, "a check never ended"
                    time.sleep(0.005)

    def _list(self, *parts):
        self.settle()
        d = self.dir.joinpath(*parts)
        return sorted(os.listdir(d)) if d.exists() else []

    def ready(self):
        return self._list("ready")

    def claimed(self):
        return self._list("claimed")

    def pairs(self, sub="ready"):
        """Linked pairs of allowlisted runs (ROOT/link-VERSION/SUB)."""
        self.settle()
        return sorted(n for d in self.dir.glob("link-*") for n in os.listdir(d / sub)
                      if (d / sub).exists())

    def log(self):
        self.settle()
        p = self.dir / "log"
        return p.read_text() if p.exists() else ""

    def drain(self):
        self._invoke(["pool", "netns", "drain"], env=self.env)
        mounts = pathlib.Path("/proc/self/mountinfo").read_text()
        assert str(self.dir) not in mounts, "a pin survived the drain"
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def pool(run, invoke):
    p = Pool(run, invoke)
    yield p
    p.drain()
