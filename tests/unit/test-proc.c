/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of al_sched_slice (src/common/proc.c): a SCHED_OTHER thread gets the slice it
 * asks for and the default back with 0, keeps its nice value, and children inherit the
 * slice; a thread of another policy is left as it is; a tid that does not exist is an
 * error. Where the kernel gives no custom slices (before Linux 6.12) only what holds
 * there is checked: the call changes neither policy nor nice.
 */
#include "common/proc.h"
#include "tap.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

static struct attr get(pid_t tid)
{
	struct attr a = {0};

	if (syscall(SYS_sched_getattr, tid, &a, sizeof(a), 0) < 0)
		a.policy = UINT32_MAX;
	return a;
}

int main(void)
{
	struct attr before = get(0), now;
	bool custom;
	int st = 0;
	pid_t kid;

	CHECK(before.policy == SCHED_OTHER, "the test runs as SCHED_OTHER (%u)", before.policy);
	setpriority(PRIO_PROCESS, 0, 3);
	CHECK(al_sched_slice(0, 200 * 1000) == 0, "a 0.2 ms slice: %s", strerror(errno));
	now = get(0);
	custom = now.runtime == 200 * 1000;
	CHECK(now.nice == 3 && now.policy == SCHED_OTHER, "nice %d and policy %u kept", now.nice,
	      now.policy);
	if (custom) {
		kid = fork();
		if (kid == 0)
			_exit(get(0).runtime == 200 * 1000 ? 0 : 1);
		CHECK(kid > 0 && waitpid(kid, &st, 0) == kid && WIFEXITED(st) &&
			  WEXITSTATUS(st) == 0,
		      "a child inherits the slice");
	} else {
		printf("# this kernel reports no custom slice (runtime %llu): before Linux 6.12\n",
		       (unsigned long long)now.runtime);
	}
	CHECK(al_sched_slice(0, 0) == 0 && get(0).runtime == before.runtime,
	      "0 gives the default back (%llu)", (unsigned long long)get(0).runtime);

	{
		struct sched_param p = {0};

		CHECK(sched_setscheduler(0, SCHED_BATCH, &p) == 0, "SCHED_BATCH");
		CHECK(al_sched_slice(0, 200 * 1000) == 0 && get(0).policy == SCHED_BATCH &&
			  get(0).runtime == before.runtime,
		      "a SCHED_BATCH thread is left as it is");
		sched_setscheduler(0, SCHED_OTHER, &p);
	}
	errno = 0;
	CHECK(al_sched_slice(0x3ffffff0, 200 * 1000) < 0 && errno == ESRCH,
	      "no such thread: ESRCH (%s)", strerror(errno));
	return tap_done();
}
