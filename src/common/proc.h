/* SPDX-License-Identifier: MIT */
/* Starting a child cheaply and placing it on the CPUs: shared by the jail, the agent and the
 * host plumbing that starts gateways. */
#ifndef AL_COMMON_PROC_H
#define AL_COMMON_PROC_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>

/* Start fn(arg) in a child that shares our memory until it execs or exits (CLONE_VM |
 * CLONE_VFORK, as posix_spawn does: no copy of the address space to make and tear down),
 * on a stack of the caller's; the caller waits meanwhile. What the child allocates stays
 * allocated here. */
pid_t al_clone_vfork(int (*fn)(void *), void *arg);
/* pid to the CPUs of `cpus` but the calling thread's (a hint: failing changes nothing). */
void al_cpu_move_off_here(const cpu_set_t *cpus, pid_t pid);
/* The same with the calling thread's own CPUs, where it has more than one (a one-shot's
 * gateway, which takes back its parent's CPUs itself once started). */
void al_move_elsewhere(pid_t pid);

/* Give thread tid (0: the caller), if it is SCHED_OTHER, an EEVDF slice of ns nanoseconds
 * (0: the kernel's default; it keeps others within 0.1-100 ms), which threads it makes
 * and children it forks inherit. A task with a shorter slice than the running one's
 * preempts it on waking (Linux 6.12 and later; older kernels ignore the slice). -1 with
 * errno on failure. */
int al_sched_slice(pid_t tid, uint64_t ns);
/* The slice of airlock's own hand-off processes (airlockd, a sandbox's agent and shims):
 * the kernel's shortest. They run briefly and often; a sandbox spinning beside them then
 * delays each of their wake-ups by at most this instead of the default slice (1.4 ms on 2
 * CPUs). Their share of the CPU stays their cgroup's weight. */
#define AL_SLICE_HANDOFF_NS (100 * 1000)

#endif
