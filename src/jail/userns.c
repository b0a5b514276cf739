/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's user namespace, made so that the kernel's per-user accounting of what
 * happens inside ends at the sandbox's own host uid, not at host root's.
 *
 * The kernel charges many resources to a (user namespace, uid) pair and to every
 * ancestor pair up to the initial namespace: inotify instances and watches, fanotify
 * groups, user namespaces, pending signals (RLIMIT_SIGPENDING), POSIX message-queue
 * bytes (RLIMIT_MSGQUEUE), processes (RLIMIT_NPROC), locked memory. In the parent
 * namespace the pair is (parent, the namespace's owner), the euid of the process that
 * made it. A namespace made by host root charges all of that to host root itself, and
 * to every other sandbox made the same way: 128 inotify instances in one sandbox and
 * host root's own inotify_init1() fails.
 *
 * So the namespace is made as host_base, the host uid the sandbox's uid 0 maps to. Each
 * sandbox has its own range, hence its own owner and its own counters in the initial
 * namespace, bounded there by the host's per-user limits (fs.inotify.max_user_instances,
 * user.max_*) and by the rlimits the namespace is made with (set just before it:
 * rlimits set when a user namespace is made are its ceiling for every process in it).
 *
 * The saved uid stays 0 until the namespace exists: if the host forbids unprivileged
 * user namespaces (kernel.unprivileged_userns_clone=0, an LSM rule), the child takes
 * root back and makes the namespace as root, with the old accounting (the owner of a
 * sandbox's namespace shows from the host: ioctl NS_GET_OWNER_UID on /proc/PID/ns/user).
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

/* Per-sandbox ceilings (or the caller's, where lower; airlockd raises its NOFILE). */
static const struct {
	int resource;
	rlim_t value;
	const char *name;
} sandbox_rlimits[] = {
    {RLIMIT_SIGPENDING, JAIL_RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING"},
    {RLIMIT_MSGQUEUE, JAIL_RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE"},
    {RLIMIT_NOFILE, JAIL_RLIMIT_NOFILE, "RLIMIT_NOFILE"},
};

static int set_rlimits(struct al_error **err)
{
	for (size_t i = 0; i < ARRAY_SIZE(sandbox_rlimits); i++) {
		rlim_t v = sandbox_rlimits[i].value;
		struct rlimit rl;

		/* Only ever lowered: raising a hard limit takes CAP_SYS_RESOURCE, which a host
		 * (or a container airlock runs in) may not give. */
		if (getrlimit(sandbox_rlimits[i].resource, &rl) == 0 && rl.rlim_max < v)
			v = rl.rlim_max;
		rl.rlim_cur = rl.rlim_max = v;
		if (setrlimit(sandbox_rlimits[i].resource, &rl) < 0)
			return al_error_set(err, errno, "setrlimit(%s, %llu)",
					    sandbox_rlimits[i].name,
					    (unsigned long long)sandbox_rlimits[i].value);
	}
	return 0;
}

int jail_userns_enter(const struct jail_ctx *ctx, struct al_error **err)
{
	uid_t id = ctx->host_base;

	if (set_rlimits(err) < 0)
		return -1;
	/* Real and effective ids become the sandbox's host uid (effective capabilities are
	 * cleared, permitted ones kept by the saved uid 0); no supplementary groups. */
	if (setgroups(0, NULL) < 0 || setresgid(id, id, 0) < 0)
		return al_error_set(err, errno, "setresgid(%u) before the user namespace",
				    (unsigned)id);
	if (setresuid(id, id, 0) < 0)
		return al_error_set(err, errno, "setresuid(%u) before the user namespace",
				    (unsigned)id);
	if (unshare(CLONE_NEWUSER) == 0)
		return 0;
	if (errno != EPERM && errno != EACCES && errno != ENOSPC)
		return al_error_set(err, errno, "unshare(CLONE_NEWUSER) as uid %u", (unsigned)id);
	/* Not allowed unprivileged here: root back (the saved uid), and make it as root. */
	if (setresuid(0, 0, 0) < 0 || setresgid(0, 0, 0) < 0)
		return al_error_set(err, errno, "setresuid(0) after a refused user namespace");
	if (unshare(CLONE_NEWUSER) < 0)
		return al_error_set(err, errno, "unshare(CLONE_NEWUSER)");
	return 0;
}
