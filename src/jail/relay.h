/* SPDX-License-Identifier: MIT */
/* The parent's event loop for a running sandbox: I/O relay, sync messages, timeout, signals. */
#ifndef AL_JAIL_RELAY_H
#define AL_JAIL_RELAY_H

#include "jail/jail.h"
#include "host/gw_client.h"

struct relay {
	const struct al_config *cfg;
	const struct al_io *io;
	struct al_result *res;
	struct jail_cgroup *cg;
	pid_t pid;
	uid_t host_base;
	int sync_fd, pidfd, out_fd, err_fd, in_fd, pty_fd;
	/* The sandbox's mount namespace, opened once its root is final (its IDMAP), so that
	 * its mounts are not torn down as PID 1 exits (an expedited RCU grace period and the
	 * unmounts: ~0.1-0.3 ms here) but where the caller lets the last copy go; or -1. */
	int mnt_fd;
	double deadline_ms; /* 0 = none */

	/* output for the caller's out_fd/err_fd, not yet written (index 0 stdout, 1 stderr) */
	struct {
		char *buf;
		size_t len, off;
		int fd;
	} q[2];

	/* stdin bytes read from the caller, not yet written into the sandbox */
	char inbuf[16384];
	size_t in_len, in_off;
	bool stdin_done;

	bool init_reaped;
	int init_status;
	bool got_exit;
	struct jail_msg exit_msg;
	char *setup_error;
	int setup_code;
	bool child_failed;	   /* setup_error is the child's own (JMSG_ERROR): it stands */
	enum al_reason killed_for; /* TIMEOUT or INTERRUPTED once we killed it */
	bool killed;
	uint64_t oom_kills;

	/* With a network link: the gateway's control channel until the link is made */
	struct gw_client *gw;
	bool sandbox_has_ca; /* the sandbox was built with the gateway's CA */
	bool policy_refused; /* the gateway refused the policy (the caller's mistake) */
};

void relay_init(struct relay *rl, const struct al_config *cfg, const struct al_io *io,
		struct al_result *res);
/* Runs until PID 1 is reaped and every output stream is drained. */
void relay_loop(struct relay *rl);
/* Fills rl->res from what the loop saw; closes the relay's fds. */
void relay_finish(struct relay *rl);

#endif
