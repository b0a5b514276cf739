/* SPDX-License-Identifier: MIT */
/* Starting a child cheaply and placing it on the CPUs: shared by the jail, the agent and the
 * host plumbing that starts gateways. */
#ifndef AL_COMMON_PROC_H
#define AL_COMMON_PROC_H

#include <sched.h>
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

#endif
