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
 * the process. A deny list, not an allow list: OpenSSL, glibc and musl
 * change which ordinary calls they make, and a missing one would break the
 * network of every sandbox; the dangerous ones are what the filter is for.
 * The policy is compiled to BPF at build time (tools/gen_gw_seccomp.c): running
 * libseccomp here cost ~0.27 ms of every gateway start.
 */
#include "gateway/gw.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* gw_seccomp_insns[]: the policy, compiled by tools/gen_gw_seccomp.c at build time. */
#include "gw_seccomp_bpf.h"

int gw_seccomp_install(struct al_error **err)
{
	struct sock_fprog prog = {
	    .len = ARRAY_SIZE(gw_seccomp_insns),
	    .filter = (struct sock_filter *)gw_seccomp_insns,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return al_error_set(err, errno, "the gateway's seccomp filter: no_new_privs");
	/* Every thread, including ones a library may have started. */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		return al_error_set(err, errno ? errno : ESRCH, "the gateway's seccomp filter");
	return 0;
}
