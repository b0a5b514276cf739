/* SPDX-License-Identifier: MIT */
#include "common/proc.h"

#include <signal.h>
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
