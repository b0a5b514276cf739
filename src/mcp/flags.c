/* SPDX-License-Identifier: MIT */
/* airlock mcp's command line: the sandbox's limits and network policy, and only there. */
#include "mcp/mcp.h"
#include "common/cleanup.h"
#include "common/getopt_exact.h"
#include "common/parse.h"
#include "common/xalloc.h"
#include "jail/spec.h"

#include <airlock/airlock.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void mcp_usage(FILE *out)
{
	fputs(
	    "usage: airlock mcp [--url URL | --socket PATH [--token TOKEN]] [sandbox flags]\n"
	    "\n"
	    "An MCP server (Model Context Protocol, JSON-RPC over stdin/stdout) for agent hosts:\n"
	    "tools run_code, exec, write_file, read_file, list_files (and reset with a daemon);\n"
	    "the egress log as the resource " MCP_EGRESS_URI ". docs/mcp.md has the details.\n"
	    "\n"
	    "  (no --url/--socket)  embedded: every command is a one-shot `airlock run`; files\n"
	    "                       written with write_file are copied into each run's\n"
	    "                       /workspace; what a command writes ends with it\n"
	    "  --url URL, --socket PATH, --token TOKEN\n"
	    "                       against airlockd: one sandbox per session, made on first\n"
	    "                       need, kept between calls, stopped when the client goes\n"
	    "\n"
	    "sandbox flags (as `airlock run --help`; the model cannot change them, and a tool's\n"
	    "timeout can only shorten --timeout):\n"
	    "  --timeout D, --memory SIZE, --cpus N, --disk SIZE, -e/--env K=V, --image DIR,\n"
	    "  --hostname NAME, --net deny|allow-all, --allow DOMAIN, --allow-cidr CIDR,\n"
	    "  --deny-cidr CIDR, --policy FILE\n"
	    "  --output-limit SIZE  output a result carries, per stream (default 1M)\n"
	    "  embedded only: --pids N, --egress-log FILE, --upstream-netns NS,\n"
	    "  --upstream-dns IP[:PORT], --upstream-ca FILE, --no-pool, --no-template\n"
	    "  -h, --help           this text\n",
	    out);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("airlock mcp: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(see 'airlock mcp --help')\n", stderr);
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
	OPT_NET,
	OPT_HOSTNAME,
	OPT_ALLOW,
	OPT_ALLOW_CIDR,
	OPT_DENY_CIDR,
	OPT_POLICY,
	OPT_EGRESS_LOG,
	OPT_UP_NETNS,
	OPT_UP_DNS,
	OPT_UP_CA,
	OPT_NO_POOL,
	OPT_NO_TEMPLATE,
};

static const struct option long_opts[] = {
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"disk", required_argument, NULL, OPT_DISK},
    {"output-limit", required_argument, NULL, OPT_OUTPUT},
    {"env", required_argument, NULL, 'e'},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"net", required_argument, NULL, OPT_NET},
    {"hostname", required_argument, NULL, OPT_HOSTNAME},
    {"allow", required_argument, NULL, OPT_ALLOW},
    {"allow-cidr", required_argument, NULL, OPT_ALLOW_CIDR},
    {"deny-cidr", required_argument, NULL, OPT_DENY_CIDR},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"egress-log", required_argument, NULL, OPT_EGRESS_LOG},
    {"upstream-netns", required_argument, NULL, OPT_UP_NETNS},
    {"upstream-dns", required_argument, NULL, OPT_UP_DNS},
    {"upstream-ca", required_argument, NULL, OPT_UP_CA},
    {"no-pool", no_argument, NULL, OPT_NO_POOL},
    {"no-template", no_argument, NULL, OPT_NO_TEMPLATE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* What parsing collects before the policy document is built. */
struct net_flags {
	const char *mode, *policy_file;
	json_t *allow, *allow_cidr, *deny_cidr;
};

/* Option c (and its argument) again, in its long form, for `airlock run`. */
static void pass(struct mcp_opts *o, int c, const char *arg)
{
	const char *name = "env";

	for (const struct option *l = long_opts; l->name; l++)
		if (l->val == c)
			name = l->name;
	o->run_args = xrealloc(o->run_args, (o->n_run_args + 3) * sizeof(*o->run_args));
	o->run_args[o->n_run_args++] = xasprintf("--%s", name);
	if (arg)
		o->run_args[o->n_run_args++] = xstrdup(arg);
	o->run_args[o->n_run_args] = NULL;
}

static int parse_limit(struct mcp_opts *o, int c, const char *arg)
{
	uint32_t u;

	if (c == OPT_TIMEOUT && al_parse_duration_ms(arg, &o->timeout_ms) < 0)
		return usage_error("--timeout '%s': expected a duration like 30s, 500ms, 2m", arg);
	if (c == OPT_MEMORY &&
	    (al_parse_size(arg, &o->memory) < 0 || (o->memory && o->memory < (4u << 20))))
		return usage_error("--memory '%s': expected a size like 64M or 1G (>= 4M)", arg);
	if (c == OPT_DISK && (al_parse_size(arg, &o->disk) < 0 || o->disk < 4096))
		return usage_error("--disk '%s': expected a size like 64M or 1G (>= 4K)", arg);
	if (c == OPT_OUTPUT && al_parse_size(arg, &o->output_limit) < 0)
		return usage_error("--output-limit '%s': expected a size like 1M", arg);
	if (c == OPT_PIDS && (al_parse_u32(arg, &u) < 0 || u > AL_PIDS_MAX))
		return usage_error("--pids '%s': expected a whole number up to %u", arg,
				   AL_PIDS_MAX);
	if (c == OPT_CPUS && al_parse_cpus(arg, &o->cpus) < 0)
		return usage_error("--cpus '%s': expected a number of CPUs from 0.01", arg);
	o->memory_set |= c == OPT_MEMORY;
	o->disk_set |= c == OPT_DISK;
	return -1;
}

static int parse_net(struct net_flags *n, int c, const char *arg)
{
	json_t **list = c == OPT_ALLOW	      ? &n->allow
			: c == OPT_ALLOW_CIDR ? &n->allow_cidr
					      : &n->deny_cidr;

	if (c == OPT_POLICY) {
		n->policy_file = arg;
	} else if (c == OPT_NET) {
		if (strcmp(arg, "deny") == 0 || strcmp(arg, "deny-all") == 0 ||
		    strcmp(arg, "none") == 0)
			n->mode = "deny-all";
		else if (strcmp(arg, "allow-all") == 0)
			n->mode = "allow-all";
		else
			return usage_error("--net '%s': expected deny or allow-all", arg);
	} else {
		if (!*list)
			*list = json_array();
		json_array_append_new(*list, json_string(arg));
	}
	return -1;
}

/* One option: -1 to go on, or an exit code. */
static int parse_opt(struct mcp_opts *o, struct net_flags *n, int c, const char *arg,
		     const char *as_written)
{
	switch (c) {
	case OPT_TIMEOUT:
	case OPT_MEMORY:
	case OPT_DISK:
	case OPT_OUTPUT:
	case OPT_PIDS:
	case OPT_CPUS:
		return parse_limit(o, c, arg);
	case OPT_NET:
	case OPT_ALLOW:
	case OPT_ALLOW_CIDR:
	case OPT_DENY_CIDR:
	case OPT_POLICY:
		return parse_net(n, c, arg);
	case 'e':
		if (!strchr(arg, '=') || arg[0] == '=')
			return usage_error("--env '%s': expected KEY=VALUE", arg);
		json_object_setn_new(o->env, arg, (size_t)(strchr(arg, '=') - arg),
				     json_string(strchr(arg, '=') + 1));
		return -1;
	case OPT_HOSTNAME:
		if (!jail_hostname_ok(arg))
			return usage_error("--hostname '%s': 1 to 63 letters, digits, '-' and '.'",
					   arg);
		o->hostname = arg;
		return -1;
	case OPT_IMAGE:
		o->image = arg;
		return -1;
	case OPT_EGRESS_LOG:
		o->egress_log = arg;
		return -1;
	case OPT_UP_NETNS:
	case OPT_UP_DNS:
	case OPT_UP_CA:
	case OPT_NO_POOL:
	case OPT_NO_TEMPLATE:
		return -1; /* embedded only; passed through as written */
	case 'h':
		mcp_usage(stdout);
		return 0;
	case ':':
		return usage_error("option '%s' needs a value", as_written);
	default:
		return usage_error("unknown option '%s'", as_written);
	}
}

/* A --policy file's text: a JSON document of at most AL_POLICY_MAX bytes (NULL: usage
 * error printed). `airlock run` reads it again and judges it whole. */
static char *read_policy(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	json_t *j;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0) {
		usage_error("--policy '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > AL_POLICY_MAX) {
		usage_error("--policy '%s': not a regular file of at most %d bytes", path,
			    AL_POLICY_MAX);
		return NULL;
	}
	buf = xzalloc((size_t)st.st_size + 1);
	n = read(fd, buf, (size_t)st.st_size);
	j = n == st.st_size ? json_loadb(buf, (size_t)n, JSON_DECODE_ANY, NULL) : NULL;
	if (!j) {
		usage_error("--policy '%s': not a JSON document", path);
		return NULL;
	}
	json_decref(j);
	return TAKE_PTR(buf);
}

/* The one policy document the flags describe (NULL: deny-all); -1 after a usage error. */
static int build_policy(struct net_flags *n, char **out)
{
	bool lists = n->allow || n->allow_cidr || n->deny_cidr;
	json_t *p, *subnets;

	*out = NULL;
	if (n->policy_file && (lists || n->mode))
		return -!!usage_error("%s", "--policy cannot be combined with --net, --allow, "
					    "--allow-cidr or --deny-cidr");
	if (n->mode && lists)
		return -!!usage_error("--net %s cannot be combined with --allow, --allow-cidr or "
				      "--deny-cidr",
				      n->mode);
	if (n->policy_file)
		return (*out = read_policy(n->policy_file)) ? 0 : -1;
	if (n->mode) {
		*out = xasprintf("\"%s\"", n->mode);
		return 0;
	}
	if (!lists)
		return 0;
	subnets = json_object();
	if (n->allow_cidr)
		json_object_set(subnets, "allow", n->allow_cidr);
	if (n->deny_cidr)
		json_object_set(subnets, "deny", n->deny_cidr);
	p = json_pack("{s:o, s:o}", "allow", n->allow ? json_incref(n->allow) : json_array(),
		      "subnets", subnets);
	*out = json_dumps(p, JSON_COMPACT);
	json_decref(p);
	return 0;
}

static bool embedded_only(int c)
{
	return c == OPT_PIDS || c == OPT_EGRESS_LOG || c == OPT_UP_NETNS || c == OPT_UP_DNS ||
	       c == OPT_UP_CA || c == OPT_NO_POOL || c == OPT_NO_TEMPLATE;
}

static void net_flags_free(struct net_flags *n)
{
	json_decref(n->allow);
	json_decref(n->allow_cidr);
	json_decref(n->deny_cidr);
}

/* argv has lost --url/--socket/--token (client_init) when o->remote is set. */
int mcp_flags_parse(struct mcp_opts *o, int argc, char **argv)
{
	struct net_flags n = {0};
	int c, code = 0;

	o->timeout_ms = 5 * 60 * 1000; /* airlock run's default */
	o->output_limit = MCP_OUTPUT_DEFAULT;
	o->env = json_object();
	opterr = 0;
	optind = 1;
	while ((c = al_getopt_exact(argc, argv, "+:e:h", long_opts)) != -1) {
		const char *written = argv[optind - 1];

		code = parse_opt(o, &n, c, c == '?' || c == ':' ? written : optarg, written);
		if (code >= 0)
			goto out;
		if (o->remote && embedded_only(c)) {
			code = usage_error("%s applies to embedded runs only (not with --url or "
					   "--socket)",
					   written);
			goto out;
		}
		if (c != OPT_TIMEOUT && c != OPT_OUTPUT && c != OPT_EGRESS_LOG)
			pass(o, c, optarg);
	}
	if (optind < argc) {
		code = usage_error("unexpected argument '%s'", argv[optind]);
		goto out;
	}
	code = build_policy(&n, &o->policy_json) < 0 ? AL_EXIT_USAGE : 0;
out:
	net_flags_free(&n);
	return code;
}

void mcp_flags_free(struct mcp_opts *o)
{
	for (size_t i = 0; i < o->n_run_args; i++)
		free(o->run_args[i]);
	free(o->run_args);
	json_decref(o->env);
	free(o->policy_json);
}
