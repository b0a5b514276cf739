/* SPDX-License-Identifier: MIT */
/*
 * The gateway's own seccomp filter (docs/security-model.md, R2).
 *
 * airlock-gateway runs as host root and parses bytes a hostile sandbox sends
 * (DNS, ClientHello, HTTP, and with per-request rules a whole TLS session). Once
 * its namespace, link, ruleset and listeners exist, it needs only sockets,
 * pipes, files, threads and setns; so before it starts serving, every system
 * call that would turn a parser bug into a host compromise is refused with
 * EPERM: exec, ptrace and cross-process memory access, mounts and new
 * namespaces (clone with CLONE_NEW*, unshare, setns other than into a network
 * namespace), module and kexec loading, BPF, perf, keyrings, userfaultfd,
 * io_uring, file handles, identity, clock and reboot calls. What it does not
 * take away: a compromised gateway still has root's file access on the host
 * (docs/security-model.md, R2). Other ABIs (i386, x32) kill
 * the process. A deny list, not an allow list: OpenSSL, glibc and libnftnl
 * change which ordinary calls they make, and a missing one would break the
 * network of every sandbox; the dangerous ones are what the filter is for.
 */
#include "net/gw.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>

int gw_seccomp_install(struct al_error **err)
{
	static const int denied[] = {
	    SCMP_SYS(execve),	     SCMP_SYS(execveat),	 SCMP_SYS(ptrace),
	    SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev), SCMP_SYS(pidfd_getfd),
	    SCMP_SYS(kcmp),	     SCMP_SYS(mount),		 SCMP_SYS(umount2),
	    SCMP_SYS(pivot_root),      SCMP_SYS(chroot),		 SCMP_SYS(move_mount),
	    SCMP_SYS(open_tree),       SCMP_SYS(fsopen),		 SCMP_SYS(fsmount),
	    SCMP_SYS(fsconfig),	     SCMP_SYS(fspick),		 SCMP_SYS(mount_setattr),
	    SCMP_SYS(unshare),	     SCMP_SYS(kexec_load),	 SCMP_SYS(kexec_file_load),
	    SCMP_SYS(init_module),     SCMP_SYS(finit_module),	 SCMP_SYS(delete_module),
	    SCMP_SYS(bpf),	     SCMP_SYS(perf_event_open),	 SCMP_SYS(keyctl),
	    SCMP_SYS(add_key),	     SCMP_SYS(request_key),	 SCMP_SYS(userfaultfd),
	    SCMP_SYS(io_uring_setup),  SCMP_SYS(io_uring_enter),	 SCMP_SYS(io_uring_register),
	    SCMP_SYS(open_by_handle_at), SCMP_SYS(name_to_handle_at), SCMP_SYS(reboot),
	    SCMP_SYS(swapon),	     SCMP_SYS(swapoff),		 SCMP_SYS(acct),
	    SCMP_SYS(settimeofday),    SCMP_SYS(clock_settime),	 SCMP_SYS(clock_adjtime),
	    SCMP_SYS(adjtimex),	     SCMP_SYS(quotactl),		 SCMP_SYS(iopl),
	    SCMP_SYS(ioperm),	     SCMP_SYS(personality),	 SCMP_SYS(setuid),
	    SCMP_SYS(setgid),	     SCMP_SYS(setreuid),		 SCMP_SYS(setregid),
	    SCMP_SYS(setresuid),       SCMP_SYS(setresgid),	 SCMP_SYS(setgroups),
	    SCMP_SYS(chown),	     SCMP_SYS(fchown),		 SCMP_SYS(fchownat),
	    SCMP_SYS(lchown),	     SCMP_SYS(mknod),		 SCMP_SYS(mknodat),
	    SCMP_SYS(syslog),	     SCMP_SYS(vhangup),
	};
	static const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
						 CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
						 CLONE_NEWNET, 0x00000080 /* CLONE_NEWTIME */};
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = ctx ? 0 : -ENOMEM;

	/* Only the native ABI: a 32-bit or x32 system call kills (its numbers differ). */
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* Every thread, including ones a library may have started. */
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	/* A binary tree over syscall numbers: the kernel runs the filter once per syscall
	 * number when it is installed (to cache the always-allowed ones); half the cost. */
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(denied); i++)
		if (denied[i] >= 0) /* a call this kernel's headers do not know is skipped */
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), denied[i], 0);
	/* Threads, never namespaces: clone3's flags are behind a pointer, so it answers
	 * ENOSYS (glibc then uses clone), and clone with any CLONE_NEW* flag is refused. */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(ns_flags); i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	/* setns only into a network namespace (the upstream one, per connection thread). */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setns), 1,
				     SCMP_A1(SCMP_CMP_NE, CLONE_NEWNET));
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r < 0 ? al_error_set(err, -r, "the gateway's seccomp filter") : 0;
}
