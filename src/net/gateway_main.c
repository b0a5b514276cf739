/* SPDX-License-Identifier: MIT */
/*
 * airlock-gateway: the egress gateway of one sandbox, as its own process
 * (see net/gw_client.h for the control protocol on fd 3).
 *
 *   airlock-gateway --policy JSON --sandbox ID --log-fd N
 *                   [--upstream-netns NS] [--upstream-dns IP[:PORT]]
 */
#include "net/gateway.h"
#include "net/policy.h"
#include "common/error.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CTL 3

static int fail(struct al_error *err)
{
	char msg[900];
	size_t i;

	snprintf(msg, sizeof(msg), "%s", err && err->msg ? err->msg : "failed");
	for (i = 0; msg[i]; i++)
		if (msg[i] == '\n')
			msg[i] = ' ';
	dprintf(CTL, "E%d %s\n", err ? err->code : EIO, msg);
	return 1;
}

int main(int argc, char **argv)
{
	struct net_gateway_opts o = {.log_fd = -1};
	struct net_gateway *g = NULL;
	struct net_policy *p = NULL;
	struct al_error *err = NULL;
	const char *policy = NULL;
	char line[64];
	ssize_t n;
	pid_t pid;

	signal(SIGPIPE, SIG_IGN);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--policy") == 0)
			policy = argv[i + 1];
		else if (strcmp(argv[i], "--sandbox") == 0)
			o.sandbox_id = argv[i + 1];
		else if (strcmp(argv[i], "--log-fd") == 0)
			o.log_fd = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--upstream-netns") == 0)
			o.upstream_netns = argv[i + 1];
		else if (strcmp(argv[i], "--upstream-dns") == 0)
			o.upstream_dns = argv[i + 1];
	}
	if (!policy) {
		al_error_msg(&err, EINVAL, "airlock-gateway: --policy is required");
		return fail(err);
	}
	/* An invalid policy is the caller's mistake: EINVAL, the message names the problem. */
	if (net_policy_parse_string(policy, strlen(policy), &p, &err) < 0) {
		al_error_wrap(&err, "network policy");
		err->code = EINVAL;
		return fail(err);
	}
	p->generation = 1;
	o.policy = p;
	if (net_gateway_prepare(&o, &g, &err) < 0)
		return fail(err);
	dprintf(CTL, "R\n");
	n = read(CTL, line, sizeof(line) - 1);
	if (n <= 0)
		return 0; /* the caller gave up */
	line[n] = '\0';
	pid = (pid_t)atoi(line);
	if (pid <= 0 || net_gateway_attach(g, pid, &err) < 0 || net_gateway_start(g, &err) < 0)
		return fail(err);
	dprintf(CTL, "A\n");
	/* Serve until the caller closes the channel (the sandbox ended, or airlock died). */
	for (;;) {
		struct pollfd pf = {.fd = CTL, .events = POLLIN};
		char c;

		if (poll(&pf, 1, -1) < 0 && errno == EINTR)
			continue;
		if (read(CTL, &c, 1) <= 0)
			break;
	}
	net_gateway_stop(g);
	return 0;
}
