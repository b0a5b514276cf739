"""CPU spinners for the tests of how runs and sandboxes share the CPU (test_limits.py,
daemon/test_daemon_cpu_weight.py): the argv of a spinner script to run in a sandbox, and
the share of CPU seconds one side got of the other's."""

PY = "/usr/bin/python3"
# n processes spinning for t seconds of wall time, each in a session of its own (with
# the kernel's autogroups a session outside any cpu cgroup weighs as much as a task), all
# on the first CPU allowed with "pin" (so that two sandboxes meet on one CPU, where their
# weights alone decide); prints the CPU seconds they used.
SPIN = ("import os, sys, time\n"
        "n, t = int(sys.argv[1]), float(sys.argv[2])\n"
        "if sys.argv[3:] == ['pin']:\n"
        "    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "for _ in range(n):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        end = time.monotonic() + t\n"
        "        while time.monotonic() < end:\n"
        "            pass\n"
        "        os._exit(0)\n"
        "cpu = 0.0\n"
        "for _ in range(n):\n"
        "    ru = os.wait4(-1, 0)[2]\n"
        "    cpu += ru.ru_utime + ru.ru_stime\n"
        "print(cpu)\n")


def spin_argv(n, seconds=3, pin=True):
    """The argv of n spinners for `seconds`, on the first CPU allowed if pin."""
    return [PY, "-c", SPIN, str(n), str(seconds)] + (["pin"] if pin else [])


def share(few, many, n_few=2, n_many=8):
    """CPU seconds of n_few spinners over those of n_many, printed with both."""
    ratio = few / many
    print(f"\nCPU s: {n_few} spinners {few:.2f}, {n_many} spinners {many:.2f} ({ratio:.2f})")
    return ratio
