/* SPDX-License-Identifier: MIT */
/*
 * Build-time seccomp compiler: turns the workload policy below into raw BPF
 * and prints it as a C header. The jail only installs these bytes; libseccomp
 * never runs in the sandbox's start-up path.
 *
 * personality(2) is judged by a hand-written prefix (below): libseccomp
 * compares whole 64-bit arguments with one comparison per argument, which
 * cannot say "any bad flag set, unless the value is exactly the query
 * 0xffffffff".
 *
 * Policy: allow by default; the listed syscalls fail with EPERM (so programs
 * degrade gracefully) or ENOSYS (clone3, so libc falls back to clone, whose
 * flags we can inspect). Any non-native ABI (i386 via int 0x80, x32) fails
 * with EPERM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <sys/syscall.h>

#include "bpf_header.h"

static const unsigned long ns_flags[] = {
    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,	 CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, 0x80 /* CLONE_NEWTIME */,
};

/* personality flags that weaken the address space (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...). */
static const unsigned long bad_persona[] = {
    0x0400000 /* READ_IMPLIES_EXEC */, 0x0040000 /* ADDR_NO_RANDOMIZE */,
    0x0100000 /* MMAP_PAGE_ZERO */,    0x0200000 /* ADDR_COMPAT_LAYOUT */,
    0x0800000 /* ADDR_LIMIT_32BIT */,  0x8000000 /* ADDR_LIMIT_3GB */,
};

/* Syscalls refused outright with EPERM. */
static const char *const denied[] = {
    /* debugging / other processes' memory */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "process_madvise",
    /* kernel attack surface not needed by ordinary programs */
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "add_key",
    "keyctl",
    "request_key",
    "lookup_dcookie",
    /* mounts and namespaces */
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "setns",
    /* machine administration */
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "iopl",
    "ioperm",
    "nfsservctl",
    "sysfs",
    "uselib",
    "vhangup",
    "ustat",
    "_sysctl",
    /* file handles bypass path-based checks */
    "open_by_handle_at",
    "name_to_handle_at",
    /* time */
    "clock_settime",
    "clock_adjtime",
    "settimeofday",
    "adjtimex",
    "stime",
    /* misc */
    "fanotify_init",
    "vm86",
    "vm86old",
    "get_kernel_syms",
    "query_module",
    "create_module",
};

static void die(const char *what, int rc)
{
	bpf_die("gen_seccomp", what, rc);
}

static void deny(scmp_filter_ctx ctx, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	int rc;

	if (nr == __NR_SCMP_ERROR)
		return; /* not a syscall on this architecture */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	if (rc < 0)
		die(name, rc);
}

static void add_rules(scmp_filter_ctx ctx)
{
	int rc = 0;
	size_t i;

	for (i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		deny(ctx, denied[i]);

	/* clone3 passes flags in memory the filter cannot read: make libc fall back to clone. */
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* clone/unshare with any namespace flag: one rule per flag bit. */
	for (i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				       SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
				       SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	}
	if (rc < 0)
		die("clone", rc);
	/*
	 * ioctl's command is an unsigned int: compare only the low 32 bits, or a
	 * caller could set high bits the kernel ignores and slip past the rule.
	 */
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	if (rc < 0)
		die("ioctl", rc);
}

/*
 * The prefix, run before libseccomp's program (which starts with its own
 * architecture check): on x86_64 only, personality(arg) with arg's low 32
 * bits (the kernel reads an unsigned int) exactly 0xffffffff is the query
 * and allowed; any bad flag set otherwise is EPERM; anything else falls
 * through to the main program. Offsets: struct seccomp_data = nr at 0, arch
 * at 4, args[0] at 16 (its low half, little-endian).
 */
static unsigned long bad_mask(void)
{
	unsigned long m = 0;

	for (size_t i = 0; i < sizeof(bad_persona) / sizeof(bad_persona[0]); i++)
		m |= bad_persona[i];
	return m;
}

int main(int argc, char **argv)
{
	const struct sock_filter prefix[] = {
	    /* the personality(2) prefix described above */
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 7),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_personality, 0, 5),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 16),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 2, 0),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, (uint32_t)bad_mask(), 0, 2),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	scmp_filter_ctx ctx;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_seccomp OUT.h\n");
		return 2;
	}
	ctx = bpf_new_filter("gen_seccomp", SCMP_ACT_ERRNO(EPERM));
	add_rules(ctx);
	bpf_write_header("gen_seccomp", ctx, argv[1], "jail_seccomp_insns", prefix,
			 sizeof(prefix) / sizeof(prefix[0]));
	seccomp_release(ctx);
	return 0;
}
