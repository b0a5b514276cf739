/* SPDX-License-Identifier: MIT */
/* airlock serve: the daemon (airlockd). */
#include "cli/cli.h"
#include "common/proc.h"
#include "api/api.h"
#include "daemon/daemon.h"
#include "common/getopt_exact.h"
#include "common/selfpath.h"
#include "common/parse.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_serve_usage(FILE *out)
{
	fputs("usage: airlock serve [--listen ADDR:PORT] [--socket PATH] [--state-dir DIR]\n"
	      "                     [--tokens FILE] [--agent PATH]\n"
	      "\n"
	      "Run airlockd: long-lived sandboxes behind an HTTP API (docs/api.yaml).\n"
	      "  --listen ADDR:PORT  TCP address (default 127.0.0.1:7070; 'none' to disable)\n"
	      "  --socket PATH       also (or only) serve on a Unix socket\n"
	      "  --state-dir DIR     SQLite state, agent sockets, the token file\n"
	      "                      (default /var/lib/airlock)\n"
	      "  --tokens FILE       one 'TOKEN TEAM' pair per line; without it a token is\n"
	      "                      generated at first start, kept in DIR/tokens and printed\n"
	      "  --agent PATH        the airlock-agent binary (default: next to airlock)\n"
	      "  --upstream-netns NS, --upstream-dns IP[:PORT]\n"
	      "                      where sandbox gateways dial out from / the resolver they ask\n"
	      "  --pool N            keep N fresh sandboxes started ahead of need (default 0);\n"
	      "                      for each of /workspace and /vercel/sandbox; a create that\n"
	      "                      fits (host runtime, default disk) takes one (\"warm\": true)\n"
	      "  --upstream-ca FILE  CA certificates for upstreams of TLS-terminated domains\n"
	      "                      (default: the system's)\n"
	      "  --e2b-domain DOMAIN E2B SDK hosts <port>-<id>.DOMAIN are sandboxes' envd\n"
	      "                      (E2B_DOMAIN; docs/e2b.md)\n"
	      "  --images DIR        root filesystems a create may name as its \"image\" (a\n"
	      "                      directory under DIR); without it, creates take no image\n"
	      "  --retention DURATION  how long an ended (stopped or failed) sandbox, its\n"
	      "                      commands and their output stay (default 1h; 1s to 720h)\n"
	      "  --keep-ended N      at most N ended sandboxes stay, the oldest go first\n"
	      "                      (default 1000; 1 to 1000000)\n"
	      "  --keep-ended-output SIZE\n"
	      "                      ... and at most SIZE of their output (default 4G)\n"
	      "  --keep-commands N   finished commands a sandbox keeps, the newest; older\n"
	      "                      ones go with their output (default 10000; 1 to 10000000)\n"
	      "  --team-max-sandboxes N\n"
	      "                      live sandboxes one team may have at once; a create over it\n"
	      "                      is refused with 429 (default: no limit)\n"
	      "  --sandbox-output-max SIZE\n"
	      "                      command output stored for one sandbox, all its commands\n"
	      "                      together; beyond it output is dropped (default 1G)\n"
	      "  --command-output-max SIZE\n"
	      "                      output stored for one stream of one command; beyond it\n"
	      "                      that stream's output is dropped (default 64M)\n"
	      "  --sandbox-records-max SIZE\n"
	      "                      bytes of the args and cwd of the commands one sandbox keeps;\n"
	      "                      beyond it its oldest finished commands are forgotten, and a\n"
	      "                      command that does not fit beside the running ones is\n"
	      "                      refused with 429 (default 16M)\n"
	      "  --snapshot-max SIZE bytes all snapshots together may take under the state\n"
	      "                      directory; a snapshot that would not fit is refused\n"
	      "                      (default 16G)\n"
	      "  --metrics-listen ADDR:PORT\n"
	      "                      serve GET /metrics (Prometheus) there, without a token;\n"
	      "                      bind it where only the scraper reaches (e.g. 127.0.0.1:9470)\n"
	      "  --metrics-token-file FILE\n"
	      "                      serve GET /metrics on the API's listeners too, to a bearer\n"
	      "                      token of FILE (one a line); API tokens never grant it\n"
	      "  --preview-domain DOMAIN\n"
	      "                      preview URLs <port>-<sandbox>.DOMAIN for the ports a sandbox\n"
	      "                      declares (wildcard DNS to airlockd); the path form\n"
	      "                      /preview/<sandbox>/<port>/ works without it (docs/ports.md)\n"
	      "  --pty-ticket-ttl DURATION\n"
	      "                      how long a PTY ticket (POST .../interactive, .../pty) may\n"
	      "                      wait for its WebSocket (default 60s; 1s to 1h; docs/pty.md)\n"
	      "  --tls-cert FILE, --tls-key FILE\n"
	      "                      serve HTTPS (TLS 1.2+) on the TCP listener with this PEM\n"
	      "                      certificate chain and key (the key mode 0600 or tighter);\n"
	      "                      PTY URLs are then wss://, preview URLs https://\n"
	      "  --tls-listen ADDR:PORT\n"
	      "                      serve HTTPS there instead, --listen staying plain HTTP\n"
	      "                      (e.g. --listen 127.0.0.1:7070 --tls-listen 0.0.0.0:443)\n"
	      "SIGTERM or SIGINT stops the daemon; running sandboxes keep running and are\n"
	      "found again at the next start.\n",
	      out);
}

/* DIR/tokens, created with one fresh token for team "default" if missing. */
static char *default_tokens(const char *state_dir)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	char *path = xasprintf("%s/tokens", state_dir), tok[40] = "al_";
	unsigned char rnd[32];
	FILE *f;
	int fd;

	if (access(path, R_OK) == 0)
		return path;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return NULL;
	for (int i = 0; i < 32; i++)
		tok[3 + i] = alphabet[rnd[i] % 36];
	tok[35] = '\0';
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		fprintf(stderr, "airlock: cannot create '%s': %s\n", path, strerror(errno));
		return NULL;
	}
	fprintf(f, "# airlockd API tokens: TOKEN TEAM\n%s default\n", tok);
	fclose(f);
	fprintf(stderr, "airlock: generated an API token for team 'default' (kept in %s):\n%s\n",
		path, tok);
	return path;
}

/* A whole number from lo to hi for --name, or a message and -1. */
static int count_arg(const char *name, const char *arg, unsigned long lo, unsigned long hi,
		     unsigned *out)
{
	char *end = NULL;
	unsigned long n = isdigit((unsigned char)arg[0]) ? strtoul(arg, &end, 10) : 0;

	if (!end || *end || n < lo || n > hi) {
		fprintf(stderr, "airlock: serve: --%s '%s': %lu to %lu\n", name, arg, lo, hi);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

/* A size of at least 4 KiB for --name, or a message and -1. */
static int size_arg(const char *name, const char *arg, uint64_t *out)
{
	if (al_parse_size(arg, out) < 0 || *out < 4096) {
		fprintf(stderr,
			"airlock: serve: --%s '%s': a size of at least 4K (e.g. 512M, 2G)\n", name,
			arg);
		return -1;
	}
	return 0;
}

static char *default_agent(void)
{
	char *path = al_sibling_path("airlock-agent");

	return path ? path : xstrdup("airlock-agent");
}

/* airlock serve's options (parse_serve_opt). */
static const struct option serve_opts[] = {{"listen", required_argument, NULL, 'l'},
					   {"socket", required_argument, NULL, 's'},
					   {"state-dir", required_argument, NULL, 'd'},
					   {"tokens", required_argument, NULL, 't'},
					   {"agent", required_argument, NULL, 'a'},
					   {"upstream-netns", required_argument, NULL, 'n'},
					   {"upstream-dns", required_argument, NULL, 'u'},
					   {"upstream-ca", required_argument, NULL, 'c'},
					   {"pool", required_argument, NULL, 'p'},
					   {"images", required_argument, NULL, 'i'},
					   {"e2b-domain", required_argument, NULL, 'E'},
					   {"retention", required_argument, NULL, 'r'},
					   {"keep-ended", required_argument, NULL, 'k'},
					   {"sandbox-output-max", required_argument, NULL, 'o'},
					   {"sandbox-records-max", required_argument, NULL, 'R'},
					   {"command-output-max", required_argument, NULL, 'U'},
					   {"keep-commands", required_argument, NULL, 'K'},
					   {"keep-ended-output", required_argument, NULL, 'O'},
					   {"team-max-sandboxes", required_argument, NULL, 'T'},
					   {"metrics-listen", required_argument, NULL, 'M'},
					   {"snapshot-max", required_argument, NULL, 'S'},
					   {"metrics-token-file", required_argument, NULL, 'm'},
					   {"pty-ticket-ttl", required_argument, NULL, 'P'},
					   {"preview-domain", required_argument, NULL, 'D'},
					   {"tls-cert", required_argument, NULL, 'C'},
					   {"tls-key", required_argument, NULL, 'Y'},
					   {"tls-listen", required_argument, NULL, 'L'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};

/*
 * One option into the daemon's and the API's settings: -1 to go on, else the exit code
 * (0 after --help). as_written is the option as the user wrote it, for a bad one.
 */
static int parse_serve_opt(int c, const char *as_written, struct daemon_opts *dopt,
			   struct api_opts *aopt, char **agent)
{
	switch (c) {
	case 'l':
		aopt->listen = strcmp(optarg, "none") == 0 ? NULL : optarg;
		break;
	case 's':
		aopt->socket_path = optarg;
		break;
	case 'd':
		dopt->state_dir = optarg;
		break;
	case 't':
		aopt->tokens_path = optarg;
		break;
	case 'a':
		*agent = xstrdup(optarg);
		break;
	case 'n':
		dopt->upstream_netns = optarg;
		break;
	case 'u':
		dopt->upstream_dns = optarg;
		break;
	case 'c':
		dopt->upstream_ca = optarg;
		break;
	case 'i':
		dopt->images_dir = optarg;
		break;
	case 'E':
		aopt->e2b_domain = optarg;
		break;
	case 'p':
		if (count_arg("pool", optarg, 0, DM_POOL_LIMIT, &dopt->pool) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'r':
		if (al_parse_duration_ms(optarg, &dopt->retain_ms) < 0 || dopt->retain_ms < 1000 ||
		    dopt->retain_ms > 30ull * 86400 * 1000) {
			fprintf(stderr,
				"airlock: serve: --retention '%s': a duration "
				"from 1s to 720h (e.g. 90s, 2h)\n",
				optarg);
			return AL_EXIT_USAGE;
		}
		break;
	case 'o':
		if (size_arg("sandbox-output-max", optarg, &dopt->sbx_output_max) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'U':
		if (size_arg("command-output-max", optarg, &dopt->cmd_output_max) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'R':
		if (size_arg("sandbox-records-max", optarg, &dopt->sbx_records_max) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'O':
		if (size_arg("keep-ended-output", optarg, &dopt->ended_output_max) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'K':
		if (count_arg("keep-commands", optarg, 1, 10000000, &dopt->max_cmds) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'T':
		if (count_arg("team-max-sandboxes", optarg, 1, 1000000, &dopt->team_max_sbxs) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'k':
		if (count_arg("keep-ended", optarg, 1, 1000000, &dopt->max_ended) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'S':
		if (size_arg("snapshot-max", optarg, &dopt->snap_max_bytes) < 0)
			return AL_EXIT_USAGE;
		break;
	case 'M':
		aopt->metrics_listen = optarg;
		break;
	case 'm':
		aopt->metrics_tokens_path = optarg;
		break;
	case 'D':
		if (!optarg[0] || strlen(optarg) > 200 || optarg[0] == '.' ||
		    optarg[strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789-.")] != '\0') {
			fprintf(stderr,
				"airlock: serve: --preview-domain '%s': a lower-case DNS "
				"name (e.g. preview.localhost)\n",
				optarg);
			return AL_EXIT_USAGE;
		}
		aopt->preview_domain = optarg;
		break;
	case 'P':
		if (al_parse_duration_ms(optarg, &aopt->pty_ticket_ms) < 0 ||
		    aopt->pty_ticket_ms < 1000 || aopt->pty_ticket_ms > 3600 * 1000) {
			fprintf(stderr,
				"airlock: serve: --pty-ticket-ttl '%s': a duration from 1s "
				"to 1h\n",
				optarg);
			return AL_EXIT_USAGE;
		}
		break;
	case 'C':
		aopt->tls_cert = optarg;
		break;
	case 'Y':
		aopt->tls_key = optarg;
		break;
	case 'L':
		aopt->tls_listen = optarg;
		break;
	case 'h':
		cli_serve_usage(stdout);
		return 0;
	default:
		fprintf(stderr, "airlock: serve: bad option '%s'\n", as_written);
		cli_serve_usage(stderr);
		return AL_EXIT_USAGE;
	}
	return -1;
}

/* The TLS flags go together (the files themselves are checked by api_start). */
static int tls_usage(const struct api_opts *o)
{
	const char *why = NULL;

	if (!!o->tls_cert != !!o->tls_key)
		why = o->tls_cert ? "--tls-cert without --tls-key: give both or neither"
				  : "--tls-key without --tls-cert: give both or neither";
	else if (o->tls_listen && !o->tls_cert)
		why = "--tls-listen needs --tls-cert and --tls-key";
	else if (o->tls_cert && !o->listen && !o->tls_listen)
		why = "--tls-cert with --listen none: nothing to serve HTTPS on (--tls-listen)";
	if (!why)
		return 0;
	fprintf(stderr, "airlock: serve: %s\n", why);
	return -1;
}

/* Every client connection and sandbox holds fds: use the whole hard limit. */
static void raise_nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int cli_serve(int argc, char **argv)
{
	struct daemon_opts dopt = {.state_dir = "/var/lib/airlock"};
	struct api_opts aopt = {.listen = "127.0.0.1:7070"};
	struct al_error *err = NULL;
	struct daemon *d = NULL;
	struct api *a = NULL;
	char *agent = NULL, *tokens = NULL;
	sigset_t mask;
	int c, sig, code;

	opterr = 0;
	optind = 1;
	while ((c = al_getopt_exact(argc, argv, "+h", serve_opts)) != -1) {
		code = parse_serve_opt(c, argv[optind - 1], &dopt, &aopt, &agent);
		if (code >= 0)
			return code;
	}
	if (aopt.preview_domain && aopt.e2b_domain &&
	    strcasecmp(aopt.preview_domain, aopt.e2b_domain) == 0) {
		fprintf(stderr,
			"airlock: serve: --preview-domain and --e2b-domain must differ (both "
			"name hosts <port>-<id>.DOMAIN)\n");
		return AL_EXIT_USAGE;
	}
	if (dopt.images_dir && access(dopt.images_dir, R_OK | X_OK) < 0) {
		fprintf(stderr, "airlock: serve: --images '%s': %s\n", dopt.images_dir,
			strerror(errno));
		return AL_EXIT_USAGE;
	}
	if (!aopt.listen && !aopt.tls_listen && !aopt.socket_path) {
		fputs("airlock: serve: nothing to listen on (--listen none and no --socket)\n",
		      stderr);
		return AL_EXIT_USAGE;
	}
	if (tls_usage(&aopt) < 0)
		return AL_EXIT_USAGE;
	if (mkdir(dopt.state_dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "airlock: state dir '%s': %s\n", dopt.state_dir, strerror(errno));
		return AL_EXIT_SETUP;
	}
	if (!aopt.tokens_path && !(aopt.tokens_path = tokens = default_tokens(dopt.state_dir)))
		return AL_EXIT_SETUP;
	dopt.agent_path = agent ? agent : (agent = default_agent());

	raise_nofile_limit();
	/* Its threads, spawner and gateways inherit it (docs/security.md, "CPU between
	 * sandboxes"). */
	al_sched_slice(0, AL_SLICE_HANDOFF_NS);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL); /* every thread inherits it; we sigwait below */
	signal(SIGPIPE, SIG_IGN);

	if (daemon_open(&dopt, &d, &err) < 0 || api_start(d, &aopt, &a, &err) < 0) {
		fprintf(stderr, "airlock: serve: %s\n", err ? err->msg : "failed to start");
		al_error_free(err);
		daemon_close(d);
		free(agent);
		free(tokens);
		return AL_EXIT_SETUP;
	}
	if (aopt.listen || aopt.socket_path)
		fprintf(stderr, "airlock: serving on %s%s%s (state in %s)\n",
			aopt.listen ? aopt.listen : "",
			aopt.listen && aopt.socket_path ? " and " : "",
			aopt.socket_path ? aopt.socket_path : "", dopt.state_dir);
	if (aopt.tls_cert)
		fprintf(stderr, "airlock: HTTPS on %s (TLS 1.2+)\n",
			aopt.tls_listen ? aopt.tls_listen : aopt.listen);
	if (aopt.metrics_listen)
		fprintf(stderr, "airlock: metrics on %s (GET /metrics, no token)\n",
			aopt.metrics_listen);
	while (sigwait(&mask, &sig) == 0 && sig == SIGHUP)
		;
	fprintf(stderr, "airlock: stopping (sandboxes keep running)\n");
	api_stop(a);
	daemon_close(d);
	free(agent);
	free(tokens);
	return 0;
}
