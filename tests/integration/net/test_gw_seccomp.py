"""The gateway's own seccomp filter (docs/security-model.md, R2): airlock-gateway
parses hostile bytes as host root, so once set up it refuses the calls that would
turn a parser bug into a host compromise, and still serves (the rest of this suite
runs with the filter on)."""
import os
import pathlib
import subprocess
import time

import pytest

from .conftest import gateways_of

BIN = pathlib.Path(os.environ.get("AIRLOCK_BIN", pathlib.Path(__file__).resolve()
                                  .parents[3] / "build" / "airlock")).parent


@pytest.mark.parametrize("gateway", ["airlock-gateway", "airlock-gateway-lite"])
def test_filter_refuses_escalation_and_keeps_what_serving_needs(gateway):
    r = subprocess.run([str(BIN / gateway), "--check-seccomp"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (r.stdout, r.stderr)
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    for call in ("execve", "unshare", "clone_newuser", "mount", "ptrace", "bpf",
                 "setns_mnt", "setuid", "io_uring_setup"):
        assert got.get(call) == "Operation not permitted", (call, got)
    assert got.get("clone3") == "Function not implemented", got   # glibc falls back to clone
    assert got.get("setns_net") == "allowed", got                  # upstream netns per thread
    assert got.get("thread") == "allowed", got


def test_running_gateways_carry_the_filter():
    """A live gateway (one-shot mode) is in seccomp filter mode with one filter."""
    p = subprocess.Popen([os.environ.get("AIRLOCK_BIN", str(BIN / "airlock")), "run",
                          "--allow", "allowed.test", "--", "sleep", "2"])
    try:
        # The filter goes on once the gateway is set up (after the link is made): a
        # gateway seen earlier is still setting up, so look until it is serving.
        status = None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for pid, comm in gateways_of(p.pid).items():
                if comm != "airlock-gateway":
                    continue
                try:
                    with open(f"/proc/{pid}/status") as f:
                        status = f.read()
                except OSError:
                    continue
            if status and "Seccomp:\t2" in status:
                break
            time.sleep(0.05)
        assert status, "no gateway found for the run"
        fields = dict(l.split(":", 1) for l in status.splitlines() if ":" in l)
        assert fields["Seccomp"].strip() == "2", status
        assert int(fields["Seccomp_filters"].strip()) >= 1, status
    finally:
        p.wait(timeout=30)
