/* SPDX-License-Identifier: MIT */
/*
 * Test server: the API over the in-memory fake daemon.
 *   api_test --tokens FILE [--listen ADDR:PORT] [--socket PATH] [--timeout S]
 *            [--max-body N] [--max-upload N]
 * Prints "port N" (the bound TCP port) and "ready" on stdout, runs until SIGTERM/SIGINT.
 */
#include "api/api.h"
#include "common/error.h"
#include "daemon/daemon.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"socket", required_argument, NULL, 's'},
	    {"tokens", required_argument, NULL, 't'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"max-body", required_argument, NULL, 'b'},
	    {"max-upload", required_argument, NULL, 'u'},
	    {NULL, 0, NULL, 0},
	};
	struct api_opts o = {0};
	struct al_error *err = NULL;
	struct daemon *d = NULL;
	struct api *a = NULL;
	sigset_t set;
	int c, sig;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.listen = optarg;
			break;
		case 's':
			o.socket_path = optarg;
			break;
		case 't':
			o.tokens_path = optarg;
			break;
		case 'T':
			o.timeout_s = (unsigned)atoi(optarg);
			break;
		case 'b':
			o.max_body = strtoull(optarg, NULL, 10);
			break;
		case 'u':
			o.max_upload = strtoull(optarg, NULL, 10);
			break;
		default:
			return 64;
		}
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (daemon_open(&(struct daemon_opts){0}, &d, &err) < 0 || api_start(d, &o, &a, &err) < 0) {
		fprintf(stderr, "api_test: %s\n", err->msg);
		return 1;
	}
	printf("port %d\nready\n", api_tcp_port(a));
	fflush(stdout);
	sigwait(&set, &sig);
	api_stop(a);
	daemon_close(d);
	return 0;
}
