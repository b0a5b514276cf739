/* SPDX-License-Identifier: MIT */
/*
 * Build-time compiler of the gateway's own seccomp filter (src/gateway/gw_seccomp.c,
 * docs/security-model.md R2): the policy below becomes raw BPF in a C header, so the
 * gateway installs bytes at start instead of running libseccomp (~0.27 ms of CPU on
 * every gateway start here, on the sandbox's start-up path).
 *
 * Policy: allow by default (a deny list: OpenSSL, glibc and libnftnl change which
 * ordinary calls they make, and a missing one would break every sandbox's network);
 * these fail with EPERM: exec, ptrace and cross-process memory access, mounts and new
 * namespaces (clone with CLONE_NEW*, unshare, setns other than into a network
 * namespace), module and kexec loading, BPF, perf, keyrings, userfaultfd, io_uring,
 * file handles, identity, ownership, device nodes, clock and reboot calls; clone3
 * answers ENOSYS (its flags are behind a pointer; glibc then uses clone). Any other ABI
 * (i386, x32) kills the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>

#include "bpf_header.h"

static void die(const char *what, int rc)
{
	bpf_die("gen_gw_seccomp", what, rc);
}

static void add_rules(scmp_filter_ctx ctx)
{
	static const char *const denied[] = {
	    "execve",
	    "execveat",
	    "ptrace",
	    "process_vm_readv",
	    "process_vm_writev",
	    "pidfd_getfd",
	    "kcmp",
	    "mount",
	    "umount2",
	    "pivot_root",
	    "chroot",
	    "move_mount",
	    "open_tree",
	    "fsopen",
	    "fsmount",
	    "fsconfig",
	    "fspick",
	    "mount_setattr",
	    "unshare",
	    "kexec_load",
	    "kexec_file_load",
	    "init_module",
	    "finit_module",
	    "delete_module",
	    "bpf",
	    "perf_event_open",
	    "keyctl",
	    "add_key",
	    "request_key",
	    "userfaultfd",
	    "io_uring_setup",
	    "io_uring_enter",
	    "io_uring_register",
	    "open_by_handle_at",
	    "name_to_handle_at",
	    "reboot",
	    "swapon",
	    "swapoff",
	    "acct",
	    "settimeofday",
	    "clock_settime",
	    "clock_adjtime",
	    "adjtimex",
	    "quotactl",
	    "iopl",
	    "ioperm",
	    "personality",
	    "setuid",
	    "setgid",
	    "setreuid",
	    "setregid",
	    "setresuid",
	    "setresgid",
	    "setgroups",
	    "chown",
	    "fchown",
	    "fchownat",
	    "lchown",
	    "mknod",
	    "mknodat",
	    "syslog",
	    "vhangup",
	};
	static const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
						 CLONE_NEWIPC, CLONE_NEWUSER,	CLONE_NEWPID,
						 CLONE_NEWNET, 0x00000080 /* CLONE_NEWTIME */};
	int rc;

	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);

		if (nr == __NR_SCMP_ERROR)
			continue; /* not a system call on this architecture */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
		if (rc < 0)
			die(denied[i], rc);
	}
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	for (size_t i = 0; rc == 0 && i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	/* setns only into a network namespace (the upstream one, per connection thread). */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setns), 1,
				      SCMP_A1(SCMP_CMP_NE, CLONE_NEWNET));
	if (rc < 0)
		die("clone/setns", rc);
}

int main(int argc, char **argv)
{
	scmp_filter_ctx ctx;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_gw_seccomp OUT.h\n");
		return 2;
	}
	ctx = bpf_new_filter("gen_gw_seccomp", SCMP_ACT_KILL_PROCESS);
	add_rules(ctx);
	bpf_write_header("gen_gw_seccomp", ctx, argv[1], "gw_seccomp_insns", NULL, 0);
	seccomp_release(ctx);
	return 0;
}
