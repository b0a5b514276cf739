"""The jail suite's escape checks, as one busybox shell script run inside a container that
an engine started with airlock-oci. Each check prints "ok NAME" or "FAIL NAME detail"."""

CHECKS = ["no_host_fs", "unprivileged_ids", "no_caps_over_host", "seccomp_floor",
          "no_userns", "no_mount", "no_host_devices", "no_mknod", "no_host_pids",
          "read_only_image"]


def script(host_marker, writable_root=False):
    """The checks; with writable_root (root.readonly false, podman's and ctr's default) the
    image's /bin takes a write, which the caller checks never reached the image itself."""
    image = ("ck read_only_image 'touch /bin/x && test -e /bin/x && rm /bin/x'" if writable_root
             else "ck read_only_image '! touch /bin/x'")
    return r"""
ck() { if eval "$2" >/dev/null 2>&1; then echo "ok $1"; else echo "FAIL $1"; fi; }
ck no_host_fs '! test -e %(marker)s && ! test -e /etc/shadow-airlock-never'
ck unprivileged_ids 'read a b c < /proc/self/uid_map; test "$a" = 0 && test "$b" -ge 536870912 && test "$c" = 65536'
ck no_caps_over_host 'test "$(cat /proc/self/uid_map | wc -l)" = 1 && ! test "$(cat /proc/self/uid_map)" = "0 0 4294967295"'
ck seccomp_floor 'grep -q "^Seccomp:.*2" /proc/self/status && grep -q "^NoNewPrivs:.*1" /proc/self/status'
ck no_userns '! unshare -U true'
ck no_mount '! mount -t tmpfs x /mnt'
ck no_host_devices 'test -z "$(ls /dev | grep -vxE "null|zero|full|random|urandom|tty|pts|shm|ptmx|fd|stdin|stdout|stderr|mqueue|console")"'
ck no_mknod '! mknod /tmp/sda b 8 0'
ck no_host_pids 'test "$(ls -d /proc/[0-9]* | wc -l)" -lt 8 && grep -q airlock-init /proc/1/cmdline'
%(image)s
""" % {"marker": host_marker, "image": image}


def assert_all_ok(out):
    got = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("ok", "FAIL"):
            got[parts[1]] = parts[0]
    missing = [c for c in CHECKS if got.get(c) != "ok"]
    assert not missing, "escape checks not passed: %s\n%s" % (missing, out)
