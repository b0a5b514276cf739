/* SPDX-License-Identifier: MIT */
#include "common/proc.h"

#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

pid_t al_clone_vfork(int (*fn)(void *), void *arg)
{
	/* On our own stack: a heap block this size would be an mmap, and its munmap a TLB
	 * shootdown on every CPU. We are suspended until the child execs or exits. */
	char stack[64 * 1024] __attribute__((aligned(16)));
	pid_t pid = clone(fn, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, arg);

#ifdef __SANITIZE_ADDRESS__
	/* The child's frames lived in this array under our shadow memory (CLONE_VM) and never
	 * returned: the redzones they poisoned would stay, and a later frame of ours at that
	 * depth would be reported as overflowing them. */
	__asan_unpoison_memory_region(stack, sizeof(stack));
#endif
	return pid;
}

void al_cpu_move_off_here(const cpu_set_t *cpus, pid_t pid)
{
	cpu_set_t other = *cpus;
	int here = sched_getcpu();

	if (here < 0)
		return;
	CPU_CLR(here, &other);
	if (CPU_COUNT(&other) > 0)
		sched_setaffinity(pid, sizeof(other), &other);
}

void al_move_elsewhere(pid_t pid)
{
	cpu_set_t mine;

	if (sched_getaffinity(0, sizeof(mine), &mine) == 0 && CPU_COUNT(&mine) > 1)
		al_cpu_move_off_here(&mine, pid);
}

int al_sched_slice(pid_t tid, uint64_t ns)
{
	/* struct sched_attr of sched_getattr(2) and sched_setattr(2) (no libc wrapper: the
	 * agent's musl has none, and its sched_getscheduler is a stub). For SCHED_OTHER,
	 * sched_runtime is the slice the EEVDF scheduler gives the task (0: the default). */
	struct {
		uint32_t size, policy;
		uint64_t flags;
		int32_t nice;
		uint32_t priority;
		uint64_t runtime, deadline, period;
	} attr = {0};

	if (syscall(SYS_sched_getattr, tid, &attr, sizeof(attr), 0) < 0)
		return -1;
	if (attr.policy != SCHED_OTHER) /* a real-time, batch or idle task keeps its own */
		return 0;
	attr.size = sizeof(attr);
	attr.flags = 0;
	attr.runtime = ns;
	return (int)syscall(SYS_sched_setattr, tid, &attr, 0);
}
