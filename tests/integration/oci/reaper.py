"""Play an engine's shim for one container: be a child subreaper, run `RUNTIME create`,
`start`, wait for the pid in the pid file (the container's exit status is that process's),
then `delete`. The container's stdio is this process's. Writes a JSON result to RESULT.

usage: reaper.py RESULT RUNTIME ROOT BUNDLE ID [--keep]
"""
import ctypes
import json
import os
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main():
    result, runtime, root, bundle, cid = sys.argv[1:6]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    pidfile = os.path.join(os.path.dirname(result), cid + ".pid")
    out = {"id": cid}
    t0 = time.monotonic()
    log = os.path.join(os.path.dirname(result), cid + ".log")
    # The container's stdio is create's (as a shim passes its pipes): errors come through
    # the log, as containerd reads them.
    c = subprocess.run([runtime, "--root", root, "--log", log, "--log-format", "json",
                        "create", "--bundle", bundle, "--pid-file", pidfile, cid])
    out["create_rc"] = c.returncode
    out["create_err"] = open(log).read() if os.path.exists(log) else ""
    if c.returncode == 0:
        pid = int(open(pidfile).read())
        s = subprocess.run([runtime, "--root", root, "start", cid], stderr=subprocess.PIPE)
        out["start_rc"] = s.returncode
        _, st = os.waitpid(pid, 0)
        out["status"] = os.waitstatus_to_exitcode(st)
        out["seconds"] = time.monotonic() - t0
        d = subprocess.run([runtime, "--root", root, "delete", cid], stderr=subprocess.PIPE)
        out["delete_rc"] = d.returncode
    with open(result, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
