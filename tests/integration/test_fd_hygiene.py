"""airlock never closes a descriptor it no longer owns.

A second close of a number already closed fails with EBADF when nothing
reused it, and silently closes someone else's file when something did (a
library caller's thread, or airlock's own later open). strace sees both the
same way: every close of a number that was already closed is a bug, so the
test asserts that no close(2) in airlock's whole process tree fails with
EBADF, over the paths that hand descriptors around (stdin relayed, files
copied in, an allowlist with its gateway, a timeout, a failed exec).
"""

import re
import shutil
import subprocess

import pytest

CASES = {
    "deny-all": ["--", "/bin/true"],
    "stdin and output": ["-i", "--", "/bin/sh", "-c", "cat; echo err >&2"],
    "file copied in": ["--file", "{file}:/workspace/f", "--", "/bin/cat", "/workspace/f"],
    "allowlist": ["--allow", "example.test", "--", "/bin/true"],
    "timeout": ["--timeout", "300ms", "--", "/bin/sleep", "5"],
    "exec fails": ["--", "/no/such/command"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_descriptor_is_closed_twice(airlock, tmp_path, case):
    strace = shutil.which("strace")
    assert strace, "strace is installed by scripts/setup"
    f = tmp_path / "in.txt"
    f.write_text("hello\n")
    args = [a.replace("{file}", str(f)) for a in CASES[case]]
    log = tmp_path / "strace.txt"
    r = subprocess.run([strace, "-f", "-qq", "-o", str(log), "-e", "trace=close,close_range",
                        airlock, "run", "--no-pool"] + args,
                       input=b"in\n", capture_output=True, timeout=60)
    assert r.returncode in (0, 124, 127), (r.returncode, r.stderr)
    text = log.read_text()
    closes = re.findall(r"\bclose\(\d+\)", text)
    assert closes, "strace saw no close(2) at all: the trace is not working"
    bad = [line for line in text.splitlines() if "EBADF" in line]
    assert bad == [], "closed twice:\n" + "\n".join(bad[:10])
