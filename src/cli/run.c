/* SPDX-License-Identifier: MIT */
/* airlock run [flags] -- CMD [ARGS...] */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/getopt_exact.h"
#include "common/parse.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "jail/ahead/pool.h"
#include "jail/ahead/recycle.h"
#include "jail/run.h"
#include "jail/spec.h"
#include "jail/ahead/template.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>

void cli_run_usage(FILE *out)
{
	fputs(
	    "usage: airlock run [flags] [--] CMD [ARGS...]\n"
	    "\n"
	    "Run CMD in a fresh sandbox: its own user, pid, mount, network, ipc, uts and\n"
	    "cgroup namespaces, a read-only runtime, no network, no capabilities, seccomp,\n"
	    "Landlock and cgroup limits. The sandbox is removed when CMD ends.\n"
	    "\n"
	    "flags:\n"
	    "  --timeout DURATION   wall-clock limit: 30, 30s, 1.5s, 500ms, 2m, 1h (default 5m; 0 "
	    "= none)\n"
	    "  --memory SIZE        memory limit: 512K, 64M, 1G (default 1G; 0 = none)\n"
	    "  --pids N             process/thread limit (default 512, at most 4194304; 0 = none)\n"
	    "  --cpus N             CPU quota in CPUs, e.g. 0.5 (default: no limit)\n"
	    "  --disk SIZE          cap on all the sandbox writes: /workspace, /tmp, /home/user,\n"
	    "                       /dev/shm share one tmpfs of this size (default 1G)\n"
	    "  --output-limit SIZE  per stream; beyond it output is dropped and reported\n"
	    "                       (default 64M; 0 = none)\n"
	    "  -e, --env K=V        add an environment variable (repeatable)\n"
	    "  -w, --workdir DIR    working directory inside (default /workspace; created)\n"
	    "  --image DIR          use DIR as the root filesystem instead of the host runtime\n"
	    "  --file SRC:DST       copy a host file or directory in before CMD (repeatable, <= "
	    "64);\n"
	    "                       a relative DST is relative to the working directory\n"
	    "  --root               run as uid 0 inside the sandbox (still nobody on the host)\n"
	    "  -i, --interactive    pass stdin through even when it is a terminal\n"
	    "  -t, --tty            give CMD a pseudo-terminal (stdout and stderr merged)\n"
	    "  --json               print one JSON result object at the end instead of streaming\n"
	    "  --net deny|allow-all network: loopback only (the default), or the public internet\n"
	    "                       through the gateway (metadata, private ranges, loopback "
	    "refused)\n"
	    "  --allow DOMAIN       allow a domain (repeatable); *.example.com = any depth below\n"
	    "  --allow-cidr CIDR    allow an address range (also opens private ranges)\n"
	    "  --deny-cidr CIDR     refuse an address range (wins over everything)\n"
	    "  --policy FILE        a whole policy document (docs/network-policy.md)\n"
	    "  --egress-log FILE    append every egress decision as a JSON line\n"
	    "  --upstream-netns NS  the gateway dials out from network namespace NS\n"
	    "  --upstream-dns IP[:PORT]  the resolver the gateway asks (default: the host's)\n"
	    "  --upstream-ca FILE   CA certificates that upstreams of TLS-terminated domains\n"
	    "                       (per-request rules) must chain to (default: the system's)\n"
	    "  --hostname NAME      hostname inside: letters, digits, '-', '.' (default sandbox)\n"
	    "  --no-pool            make every namespace now, even if `airlock pool fill` has\n"
	    "                       some ready (`airlock pool --help`)\n"
	    "  --fresh-netns        network namespaces of its own (deny-all: one; an allowlist:\n"
	    "                       its own and its gateway's), destroyed after, instead of\n"
	    "                       recycled ones proven clean (docs/security.md, \"Recycled\n"
	    "                       network namespaces\"; for the whole host: create\n"
	    "                       " JAIL_RECYCLE_OFF_FILE ")\n"
	    "  --no-template        build the sandbox's whole root now instead of copying the\n"
	    "                       read-only template kept for default runs\n"
	    "                       (`airlock template --help`)\n"
	    "  -h, --help           this text\n"
	    "\n"
	    "Inside: uid 1000 (user), cwd /workspace, HOME=/home/user, environment PATH, HOME,\n"
	    "LANG (and TERM with -t) plus --env; nothing of the caller's environment.\n"
	    "CMD is found and run as POSIX execvp does: through PATH unless it has a '/',\n"
	    "and a file without a #! line runs under /bin/sh.\n"
	    "\n"
	    "exit codes:\n"
	    "  N        CMD exited with N\n"
	    "  128+N    CMD was killed by signal N\n"
	    "  64       usage error (bad flag or value)\n"
	    "  122      out of memory: CMD was killed at the --memory limit\n"
	    "  124      timeout: the whole sandbox was killed at --timeout\n"
	    "  125      the sandbox could not be set up (reason on stderr); CMD never ran\n"
	    "  126      CMD could not be executed\n"
	    "  127      CMD was not found\n"
	    "  130/143  airlock itself got SIGINT/SIGTERM; the sandbox was killed\n",
	    out);
}

struct buf {
	char *data;
	size_t len, cap;
};

struct run_opts {
	struct al_config cfg;
	const char **env;
	struct al_file_copy *files;
	bool json, interactive, no_pool, no_template, fresh_netns;
	struct buf out, err;
	/* network flags, turned into one policy document */
	const char *net_mode; /* deny / allow-all, or NULL */
	const char *policy_file;
	json_t *allow, *allow_cidr, *deny_cidr;
	const char *egress_log;
};

static void buf_add(struct buf *b, const char *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 4096;
		b->data = xrealloc(b->data, b->cap);
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void on_output(void *ctx, enum al_stream s, const char *p, size_t n)
{
	struct run_opts *o = ctx; /* --json: collect; streaming goes through io.out_fd/err_fd */

	buf_add(s == AL_STDOUT ? &o->out : &o->err, p, n);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("airlock: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(see 'airlock run --help')\n", stderr);
	return AL_EXIT_USAGE;
}

enum {
	OPT_TIMEOUT = 256,
	OPT_MEMORY,
	OPT_PIDS,
	OPT_CPUS,
	OPT_DISK,
	OPT_OUTPUT,
	OPT_IMAGE,
	OPT_FILE,
	OPT_ROOT,
	OPT_JSON,
	OPT_NET,
	OPT_HOSTNAME,
	OPT_ALLOW,
	OPT_ALLOW_CIDR,
	OPT_DENY_CIDR,
	OPT_POLICY,
	OPT_UP_NETNS,
	OPT_UP_DNS,
	OPT_UP_CA,
	OPT_EGRESS_LOG,
	OPT_NO_POOL,
	OPT_NO_TEMPLATE,
	OPT_FRESH_NETNS,
};

static const struct option long_opts[] = {
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"disk", required_argument, NULL, OPT_DISK},
    {"output-limit", required_argument, NULL, OPT_OUTPUT},
    {"env", required_argument, NULL, 'e'},
    {"workdir", required_argument, NULL, 'w'},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"file", required_argument, NULL, OPT_FILE},
    {"root", no_argument, NULL, OPT_ROOT},
    {"interactive", no_argument, NULL, 'i'},
    {"tty", no_argument, NULL, 't'},
    {"json", no_argument, NULL, OPT_JSON},
    {"net", required_argument, NULL, OPT_NET},
    {"hostname", required_argument, NULL, OPT_HOSTNAME},
    {"allow", required_argument, NULL, OPT_ALLOW},
    {"allow-cidr", required_argument, NULL, OPT_ALLOW_CIDR},
    {"deny-cidr", required_argument, NULL, OPT_DENY_CIDR},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"upstream-netns", required_argument, NULL, OPT_UP_NETNS},
    {"upstream-dns", required_argument, NULL, OPT_UP_DNS},
    {"upstream-ca", required_argument, NULL, OPT_UP_CA},
    {"egress-log", required_argument, NULL, OPT_EGRESS_LOG},
    {"no-pool", no_argument, NULL, OPT_NO_POOL},
    {"no-template", no_argument, NULL, OPT_NO_TEMPLATE},
    {"fresh-netns", no_argument, NULL, OPT_FRESH_NETNS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Returns -1 to go on, or an exit code. */
/* --workdir (AL_EXIT_USAGE, or -1: taken): the normal form (common/path.h) is what the jail
 * gets and what the rules see; /, /proc, /sys and /dev are the kernel's (only /dev/shm
 * there is the sandbox's). */
static int parse_workdir(struct al_config *cfg, const char *arg)
{
	_cleanup_error_ struct al_error *e = NULL;
	char *norm = NULL;

	if (al_path_normalize(arg, "--workdir", &norm, &e) < 0)
		return usage_error("%s", e->msg);
	if (al_path_in_pseudo_fs(norm)) {
		usage_error("--workdir '%s': is /, or in /proc, /sys or /dev (only /dev/shm there "
			    "is the sandbox's)",
			    norm);
		free(norm);
		return AL_EXIT_USAGE;
	}
	cfg->workdir = norm; /* lives as long as the run */
	return -1;	     /* parse_opt's "go on" */
}

/* --file's DST (relative ones are the workdir's) must normalize like any path (0: it
 * does). */
static int check_file_dst(const char *arg, const char *dst)
{
	_cleanup_error_ struct al_error *e = NULL;
	_cleanup_free_ char *full = xasprintf("%s%s", dst[0] == '/' ? "" : "/", dst);
	_cleanup_free_ char *norm = NULL;

	if (al_path_normalize(full, "destination", &norm, &e) < 0)
		return usage_error("--file '%s': %s", arg, e->msg);
	return 0;
}

/* The resource limits: --timeout, --memory, --disk, --output-limit, --pids, --cpus. */
static int parse_limit_opt(struct al_config *cfg, int c, const char *arg)
{
	switch (c) {
	case OPT_TIMEOUT:
		if (al_parse_duration_ms(arg, &cfg->timeout_ms) < 0)
			return usage_error(
			    "--timeout '%s': expected a duration like 30s, 500ms, 2m "
			    "(1ms to 30 days; 0 = none)",
			    arg);
		break;
	case OPT_MEMORY:
		if (al_parse_size(arg, &cfg->memory_bytes) < 0)
			return usage_error("--memory '%s': expected a size like 64M or 1G", arg);
		if (cfg->memory_bytes && cfg->memory_bytes < (4u << 20))
			return usage_error("--memory '%s': must be at least 4M", arg);
		break;
	case OPT_DISK:
		if (al_parse_size(arg, &cfg->disk_bytes) < 0 || cfg->disk_bytes < 4096)
			return usage_error("--disk '%s': expected a size like 64M or 1G (>= 4K)",
					   arg);
		break;
	case OPT_OUTPUT:
		if (al_parse_size(arg, &cfg->output_limit) < 0)
			return usage_error("--output-limit '%s': expected a size like 1M", arg);
		break;
	case OPT_PIDS:
		if (al_parse_u32(arg, &cfg->pids) < 0 || cfg->pids > AL_PIDS_MAX)
			return usage_error("--pids '%s': expected a whole number up to %u", arg,
					   AL_PIDS_MAX);
		break;
	case OPT_CPUS:
		if (al_parse_cpus(arg, &cfg->cpus) < 0)
			return usage_error("--cpus '%s': expected a number of CPUs from 0.01", arg);
		break;
	}
	return -1;
}

/* --file SRC:DST, one more copy into the sandbox's root. */
static int parse_file_opt(struct run_opts *o, const char *arg)
{
	struct al_config *cfg = &o->cfg;
	char *colon = strrchr(arg, ':');

	if (!colon || colon == arg || !colon[1])
		return usage_error("--file '%s': expected SRC:DST", arg);
	if (cfg->n_files == AL_FILES_MAX)
		return usage_error("--file '%s': too many --file copies (at most %d)", arg,
				   AL_FILES_MAX);
	if (strlen(colon + 1) < AL_FILE_DST_MAX && check_file_dst(arg, colon + 1) != 0)
		return AL_EXIT_USAGE;
	if (strlen(colon + 1) >= AL_FILE_DST_MAX)
		return usage_error("--file '%s': the destination is too long (at most %d "
				   "bytes)",
				   arg, AL_FILE_DST_MAX - 1);
	o->files = xrealloc(o->files, (cfg->n_files + 1) * sizeof(*o->files));
	o->files[cfg->n_files].src = strndup(arg, (size_t)(colon - arg));
	o->files[cfg->n_files++].dst = colon + 1;
	return -1;
}

/* What the sandbox starts with: --env, --workdir, --image, --file. */
static int parse_files_env_opt(struct run_opts *o, int c, const char *arg)
{
	struct al_config *cfg = &o->cfg;

	switch (c) {
	case 'e':
		if (!strchr(arg, '=') || arg[0] == '=')
			return usage_error("--env '%s': expected KEY=VALUE", arg);
		o->env = xrealloc(o->env, (cfg->n_env + 1) * sizeof(*o->env));
		o->env[cfg->n_env++] = arg;
		break;
	case 'w':
		return parse_workdir(cfg, arg);
	case OPT_IMAGE:
		cfg->image = arg;
		break;
	case OPT_FILE:
		return parse_file_opt(o, arg);
	}
	return -1;
}

/* The network: --net, --allow, --allow-cidr, --deny-cidr, --policy, the upstream
 * options and --egress-log. */
static int parse_net_opt(struct run_opts *o, int c, const char *arg)
{
	struct al_config *cfg = &o->cfg;

	switch (c) {
	case OPT_NET:
		if (strcmp(arg, "deny") == 0 || strcmp(arg, "deny-all") == 0 ||
		    strcmp(arg, "none") == 0)
			o->net_mode = "deny-all";
		else if (strcmp(arg, "allow-all") == 0)
			o->net_mode = "allow-all";
		else
			return usage_error(
			    "--net '%s': expected deny or allow-all (use --allow for "
			    "domains)",
			    arg);
		break;
	case OPT_ALLOW:
	case OPT_ALLOW_CIDR:
	case OPT_DENY_CIDR: {
		json_t **list = c == OPT_ALLOW	      ? &o->allow
				: c == OPT_ALLOW_CIDR ? &o->allow_cidr
						      : &o->deny_cidr;
		if (!*list)
			*list = json_array();
		json_array_append_new(*list, json_string(arg));
		break;
	}
	case OPT_POLICY:
		o->policy_file = arg;
		break;
	case OPT_UP_NETNS:
		if (!arg[0])
			return usage_error("%s", "--upstream-netns '': expected a name under "
						 "/run/netns or a path");
		cfg->upstream_netns = arg;
		break;
	case OPT_UP_DNS:
		cfg->upstream_dns = arg;
		break;
	case OPT_UP_CA: {
		struct stat st;

		if (access(arg, R_OK) < 0 || stat(arg, &st) < 0)
			return usage_error("--upstream-ca '%s': %s", arg, strerror(errno));
		if (!S_ISREG(st.st_mode))
			return usage_error("--upstream-ca '%s': not a file of PEM certificates",
					   arg);
		cfg->upstream_ca = arg;
		break;
	}
	case OPT_EGRESS_LOG:
		o->egress_log = arg;
		break;
	}
	return -1;
}

/* One option: -1 to go on, else the exit code (0 after --help). Each group of options
 * has its own parser above; the rest are flags. */
static int parse_opt(struct run_opts *o, int c, const char *arg)
{
	struct al_config *cfg = &o->cfg;

	switch (c) {
	case OPT_TIMEOUT:
	case OPT_MEMORY:
	case OPT_DISK:
	case OPT_OUTPUT:
	case OPT_PIDS:
	case OPT_CPUS:
		return parse_limit_opt(cfg, c, arg);
	case 'e':
	case 'w':
	case OPT_IMAGE:
	case OPT_FILE:
		return parse_files_env_opt(o, c, arg);
	case OPT_NET:
	case OPT_ALLOW:
	case OPT_ALLOW_CIDR:
	case OPT_DENY_CIDR:
	case OPT_POLICY:
	case OPT_UP_NETNS:
	case OPT_UP_DNS:
	case OPT_UP_CA:
	case OPT_EGRESS_LOG:
		return parse_net_opt(o, c, arg);
	case OPT_ROOT:
		cfg->root = true;
		break;
	case 'i':
		o->interactive = true;
		break;
	case 't':
		cfg->tty = true;
		break;
	case OPT_JSON:
		o->json = true;
		break;
	case OPT_NO_POOL:
		o->no_pool = true;
		break;
	case OPT_NO_TEMPLATE:
		o->no_template = true;
		break;
	case OPT_FRESH_NETNS:
		o->fresh_netns = true;
		break;
	case OPT_HOSTNAME:
		if (!jail_hostname_ok(arg))
			return usage_error("--hostname '%s': 1 to 63 letters, digits, '-' and '.', "
					   "not starting or ending with '-' or '.'",
					   arg);
		cfg->hostname = arg;
		break;
	case 'h':
		cli_run_usage(stdout);
		return 0;
	case ':':
		return usage_error("option '%s' needs a value", arg);
	default:
		return usage_error("unknown option '%s'", arg);
	}
	return -1;
}

/* The caller's terminal in raw mode while a PTY session runs; restored after. */
struct tty_state {
	bool raw;
	struct termios saved;
};

static void tty_raw(struct tty_state *t)
{
	struct termios raw;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &t->saved) < 0)
		return;
	raw = t->saved;
	cfmakeraw(&raw);
	if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
		t->raw = true;
}

static void tty_restore(struct tty_state *t)
{
	if (t->raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

static void report(const struct run_opts *o, const struct al_result *res)
{
	if (res->stdout_truncated)
		fprintf(stderr, "airlock: stdout truncated at %llu bytes (--output-limit)\n",
			(unsigned long long)o->cfg.output_limit);
	if (res->stderr_truncated)
		fprintf(stderr, "airlock: stderr truncated at %llu bytes (--output-limit)\n",
			(unsigned long long)o->cfg.output_limit);
	switch (res->reason) {
	case AL_REASON_SETUP_FAILED:
		fprintf(stderr, "airlock: setup failed: %s\n", res->error ? res->error : "?");
		break;
	case AL_REASON_EXEC_FAILED:
		fprintf(stderr, "airlock: %s\n", res->error ? res->error : "cannot execute");
		break;
	case AL_REASON_TIMEOUT:
		fprintf(stderr, "airlock: timeout after %.3gs: the sandbox was killed\n",
			(double)o->cfg.timeout_ms / 1000);
		break;
	case AL_REASON_OOM:
		fprintf(stderr, "airlock: out of memory (--memory %llu bytes): killed\n",
			(unsigned long long)o->cfg.memory_bytes);
		break;
	case AL_REASON_SECCOMP:
		fputs("airlock: killed by the seccomp filter\n", stderr);
		break;
	case AL_REASON_INTERRUPTED:
		fprintf(stderr, "airlock: interrupted by %s: the sandbox was killed\n",
			strsignal(res->interrupt_signal));
		break;
	default:
		break;
	}
}

/* A --policy file's text (a heap string), or NULL after a usage error that names it: not
 * a regular file, unreadable, over AL_POLICY_MAX bytes, or with a NUL byte in it. */
static char *read_policy_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	ssize_t r = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		usage_error("--policy '%s': %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		usage_error("--policy '%s': not a regular file", path);
		goto out;
	}
	buf = xzalloc(AL_POLICY_MAX + 2);
	while (n <= AL_POLICY_MAX && (r = read(fd, buf + n, AL_POLICY_MAX + 1 - n)) > 0)
		n += (size_t)r;
	if (r < 0)
		usage_error("--policy '%s': %s", path, strerror(errno));
	else if (n > AL_POLICY_MAX)
		usage_error("--policy '%s': larger than %d bytes", path, AL_POLICY_MAX);
	else if (memchr(buf, '\0', n))
		usage_error("--policy '%s': has a NUL byte (not a JSON text)", path);
	else
		goto out;
	free(buf);
	buf = NULL;
out:
	if (fd >= 0)
		close(fd);
	return buf;
}

/* The one policy document the flags describe (NULL: deny-all), and whether it surely has
 * no per-request rules (flags cannot give any; a --policy file is looked at); -1 on a
 * usage error. */
static int build_policy(struct run_opts *o, char **out)
{
	bool lists = o->allow || o->allow_cidr || o->deny_cidr;
	json_t *p, *subnets;

	*out = NULL;
	if (o->policy_file && (lists || o->net_mode))
		return -!!usage_error("%s", "--policy cannot be combined with --net, --allow, "
					    "--allow-cidr or --deny-cidr");
	if (o->net_mode && lists)
		return -!!usage_error("--net %s cannot be combined with --allow, --allow-cidr or "
				      "--deny-cidr",
				      o->net_mode);
	if (o->policy_file) {
		char *buf = read_policy_file(o->policy_file);

		if (!buf)
			return -1;
		*out = buf;
		return 0;
	}
	if (o->net_mode && !lists) {
		*out = xasprintf("\"%s\"", o->net_mode);
		return 0;
	}
	if (!lists)
		return 0;
	p = json_object();
	/* The lists move into the document (their references with them). */
	json_object_set_new(p, "allow", o->allow ? o->allow : json_array());
	subnets = json_object();
	if (o->allow_cidr)
		json_object_set_new(subnets, "allow", o->allow_cidr);
	if (o->deny_cidr)
		json_object_set_new(subnets, "deny", o->deny_cidr);
	o->allow = o->allow_cidr = o->deny_cidr = NULL;
	json_object_set_new(p, "subnets", subnets);
	*out = json_dumps(p, JSON_COMPACT);
	json_decref(p);
	return 0;
}

/* --json: the egress decisions, read back from the gateway's log. */
static json_t *read_egress(int fd)
{
	json_t *arr = json_array();
	char *buf;
	off_t len = lseek(fd, 0, SEEK_END);

	if (fd < 0 || len <= 0)
		return arr;
	buf = xzalloc((size_t)len + 1);
	if (pread(fd, buf, (size_t)len, 0) == len)
		for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			json_t *j = json_loads(line, 0, NULL);
			if (j)
				json_array_append_new(arr, j);
		}
	free(buf);
	return arr;
}

/*
 * --egress-log: open (or make) the file; -1 to go on, or an exit code. Made here, it goes
 * again if the run is refused (a policy the gateway refuses is a usage error too): a
 * refused run leaves nothing behind.
 */
static int open_egress_log(const char *path, int *fd, bool *made)
{
	*fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
	*made = *fd >= 0;
	if (*fd < 0 && errno == EEXIST)
		*fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (*fd < 0)
		return usage_error("--egress-log '%s': %s", path, strerror(errno));
	return -1;
}

/*
 * The run's I/O: the signals we turn into events (interrupt the run, or resize the PTY),
 * where output goes (memory for --json, else our stdout and stderr), stdin, and the
 * caller's terminal in raw mode for -it.
 */
static void prepare_io(struct run_opts *o, struct al_io *io, int egress_log_fd,
		       struct tty_state *tty)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGWINCH);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	io->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	io->egress_log_fd = egress_log_fd;
	if (o->json) {
		io->on_output = on_output; /* into memory: never blocks */
		io->ctx = o;
	} else {
		io->out_fd = STDOUT_FILENO; /* the run loop writes when the fd is writable */
		io->err_fd = STDERR_FILENO;
	}
	/* stdin: passed through unless it is a terminal and -i was not given. */
	if (o->interactive || !isatty(STDIN_FILENO))
		io->stdin_fd = STDIN_FILENO;
	if (o->cfg.tty) {
		io->tty_fd = isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
		if (o->interactive)
			tty_raw(tty);
	}
}

/* --json with --egress-log: the file gets the same lines as the result object. */
static void copy_egress_log(int json_fd, int egress_fd)
{
	char buf[65536];
	off_t off = 0;
	ssize_t n;

	while ((n = pread(json_fd, buf, sizeof(buf), off)) > 0) {
		if (write(egress_fd, buf, (size_t)n) != n)
			break;
		off += n;
	}
}

/* What parsing and the run allocated (a short-lived CLI would not need it, but the
 * sanitized build's leak check then reports only real leaks). */
static void run_opts_release(struct run_opts *o)
{
	for (size_t i = 0; o->files && i < o->cfg.n_files; i++)
		free((char *)o->files[i].src);
	free(o->files);
	free(o->env);
	free(o->out.data);
	free(o->err.data);
	json_decref(o->allow);
	json_decref(o->allow_cidr);
	json_decref(o->deny_cidr);
}

static int run_main(struct run_opts *o, int argc, char **argv);

int cli_run(int argc, char **argv)
{
	struct run_opts o;
	int code;

	memset(&o, 0, sizeof(o));
	code = run_main(&o, argc, argv);
	run_opts_release(&o);
	return code;
}

static int run_main(struct run_opts *o, int argc, char **argv)
{
	struct al_io io = {.stdin_fd = -1,
			   .signal_fd = -1,
			   .tty_fd = -1,
			   .out_fd = -1,
			   .err_fd = -1,
			   .egress_log_fd = -1};
	struct al_result res;
	struct al_error *err = NULL;
	struct tty_state tty = {0};
	_cleanup_free_ char *policy_json = NULL;
	char pool_dir[200], recycle_root[200];
	struct jail_run_opts ro = {.caller_exits = true}; /* main returns right after */
	int c, code, egress_fd = -1, json_fd = -1;
	bool egress_made = false;

	al_config_init(&o->cfg);
	opterr = 0;
	optind = 1;
	while ((c = al_getopt_exact(argc, argv, "+:e:w:ith", long_opts)) != -1) {
		/* For errors, report the option as the user wrote it. */
		code = parse_opt(o, c, c == '?' || c == ':' ? argv[optind - 1] : optarg);
		if (code >= 0)
			return code;
	}
	if (optind >= argc)
		return usage_error("%s", "no command given: airlock run [flags] -- CMD [ARGS...]");
	if (build_policy(o, &policy_json) < 0)
		return AL_EXIT_USAGE;
	o->cfg.net_policy_json = policy_json;
	if (o->egress_log) {
		code = open_egress_log(o->egress_log, &egress_fd, &egress_made);
		if (code >= 0)
			return code;
	}
	if (o->json && policy_json) {
		/* The log goes to memory too, to be returned in the result object. */
		json_fd = memfd_create("airlock-egress", MFD_CLOEXEC);
	}
	/* Namespaces made ahead by `airlock pool fill`, if there are any (src/cli/pool.c). */
	if (!o->no_pool && jail_pool_dir(NULL, pool_dir, sizeof(pool_dir)) == 0)
		ro.pool_dir = pool_dir;
	/* A read-only root template for default settings (src/cli/template.c). */
	if (!o->no_template)
		ro.template_dir = jail_template_root(NULL);
	/* Recycled network namespaces (deny-all: one; an allowlist: a linked pair), unless the
	 * run or the host says no. */
	if (!o->fresh_netns)
		ro.recycle_root = jail_recycle_root(NULL, recycle_root, sizeof(recycle_root));
	o->cfg.argv = argv + optind;
	o->cfg.env = o->env;
	o->cfg.files = o->files;
	o->cfg.term = getenv("TERM");

	prepare_io(o, &io, json_fd >= 0 ? json_fd : egress_fd, &tty);
	if (jail_run(&o->cfg, &io, &ro, &res, &err) < 0) {
		tty_restore(&tty);
		code = usage_error("%s", err->msg);
		al_error_free(err);
		if (egress_made)
			unlink(o->egress_log);
		return code;
	}
	tty_restore(&tty);
	if (json_fd >= 0 && egress_fd >= 0)
		copy_egress_log(json_fd, egress_fd);
	if (o->json)
		cli_print_json(stdout, &res, o->out.data, o->out.len, o->err.data, o->err.len,
			       policy_json ? read_egress(json_fd) : NULL);
	else
		report(o, &res);
	code = al_result_exit_code(&res);
	al_result_release(&res);
	return code;
}
