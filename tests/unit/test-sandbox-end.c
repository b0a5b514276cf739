/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of jail_sandbox_end_held (src/jail/sandbox.c) and its meanwhile callback, on a
 * plain child process standing in for PID 1: the callback runs exactly once whether the
 * process is killed, is not the one named (another start time: left alone), or is gone;
 * the process named is dead when the call returns, and only then is its mount namespace
 * handed over.
 */
#include "jail/sandbox.h"
#include "tap.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct seen {
	int calls;
	pid_t pid;
	bool signalled; /* when the callback ran, the child had a SIGKILL pending or was dead */
};

/* Whether pid has a SIGKILL pending (its shared or own pending set in /proc), or has
 * already died of one (looked at without reaping it: the call waits on its pidfd). */
static bool killed_or_dying(pid_t pid)
{
	siginfo_t si = {0};
	char path[64], line[256];
	bool pending = false;
	FILE *f;

	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid)
		return si.si_code == CLD_KILLED && si.si_status == SIGKILL;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long mask;

		if ((sscanf(line, "ShdPnd: %llx", &mask) == 1 ||
		     sscanf(line, "SigPnd: %llx", &mask) == 1) &&
		    (mask >> (SIGKILL - 1)) & 1)
			pending = true;
		if (strncmp(line, "State:", 6) == 0 && (strchr(line, 'Z') || strchr(line, 'X')))
			pending = true; /* exited meanwhile */
	}
	fclose(f);
	return pending;
}

static void meanwhile(void *arg)
{
	struct seen *s = arg;

	s->calls++;
	s->signalled = s->pid > 0 && killed_or_dying(s->pid);
}

static pid_t sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

int main(void)
{
	struct seen s = {0};
	uint64_t st = 0;
	int root = -2, status = 0;
	pid_t pid = sleeper();

	CHECK(pid > 0 && jail_proc_start_time(pid, &st) == 0, "a child and its start time");

	/* Another start time: not ours, never signalled; the callback still runs once. */
	s = (struct seen){.pid = pid};
	jail_sandbox_end_held(pid, st + 1, &root, meanwhile, &s);
	CHECK(s.calls == 1, "meanwhile once for a process not ours (%d)", s.calls);
	CHECK(!s.signalled, "no SIGKILL sent to a process not ours");
	CHECK(root == -1, "no mount namespace handed over for it (%d)", root);
	CHECK(waitpid(pid, &status, WNOHANG) == 0, "that process is left running");

	/* Ours: killed, the callback once after the kill, dead on return, its namespace held. */
	s = (struct seen){.pid = pid};
	jail_sandbox_end_held(pid, st, &root, meanwhile, &s);
	CHECK(s.calls == 1, "meanwhile once for our process (%d)", s.calls);
	CHECK(s.signalled, "the process was signalled before meanwhile ran");
	CHECK(waitpid(pid, &status, WNOHANG) == pid && WIFSIGNALED(status) &&
		  WTERMSIG(status) == SIGKILL,
	      "dead of SIGKILL when the call returns");
	CHECK(root >= 0, "its mount namespace is handed over (%d)", root);
	if (root >= 0)
		close(root);

	/* Gone (reaped): nothing to kill; the callback still runs once. */
	s = (struct seen){.pid = pid};
	jail_sandbox_end_held(pid, st, &root, meanwhile, &s);
	CHECK(s.calls == 1 && root == -1, "meanwhile once for a process gone (%d, %d)", s.calls,
	      root);
	s = (struct seen){.pid = 0};
	jail_sandbox_end_held(0, 0, &root, meanwhile, &s);
	CHECK(s.calls == 1 && root == -1, "meanwhile once for no process (%d, %d)", s.calls, root);

	/* Without a callback, as jail_sandbox_end calls it. */
	pid = sleeper();
	CHECK(pid > 0 && jail_proc_start_time(pid, &st) == 0, "a second child");
	jail_sandbox_end_held(pid, st, NULL, NULL, NULL);
	CHECK(waitpid(pid, &status, WNOHANG) == pid && WIFSIGNALED(status),
	      "killed without a callback");
	return tap_done();
}
