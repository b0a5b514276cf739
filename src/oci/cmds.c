/* SPDX-License-Identifier: MIT */
/* The commands that read or act on a container made by create: state, kill, delete, list,
 * ps, update, pause/resume, features. */
#include "oci/oci.h"
#include "jail/sandbox.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const struct {
	const char *name;
	int sig;
} signals[] = {{"HUP", SIGHUP},	  {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"ILL", SIGILL},
	       {"TRAP", SIGTRAP}, {"ABRT", SIGABRT},   {"BUS", SIGBUS},	  {"FPE", SIGFPE},
	       {"KILL", SIGKILL}, {"USR1", SIGUSR1},   {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
	       {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},   {"TERM", SIGTERM}, {"CHLD", SIGCHLD},
	       {"CONT", SIGCONT}, {"STOP", SIGSTOP},   {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},
	       {"TTOU", SIGTTOU}, {"WINCH", SIGWINCH}, {"IO", SIGIO},	  {"SYS", SIGSYS}};

/* "TERM", "SIGTERM", "sigterm" or "15"; -1 if none. */
static int parse_signal(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);

	if (*s && !*end)
		return n > 0 && n < 65 ? (int)n : -1;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < ARRAY_SIZE(signals); i++)
		if (strcasecmp(s, signals[i].name) == 0)
			return signals[i].sig;
	return -1;
}

/* Load ID's state under the lock (taken here, returned in *lock). */
static int load(const struct oci_opts *o, const char *id, bool excl, int *lock,
		struct oci_state *st, struct al_error **err)
{
	*lock = oci_lock(o->root, excl, err);
	if (*lock < 0)
		return -1;
	return oci_state_load(o->root, id, st, err);
}

int oci_cmd_state(const struct oci_opts *o, int argc, char **argv)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_close_ int lock = -1;
	struct oci_state st;
	json_t *j;

	if (argc != 2)
		return oci_fail(o, "usage: state ID");
	if (load(o, argv[1], false, &lock, &st, &err) < 0)
		return oci_fail(o, "%s", err->msg);
	j = oci_state_json(o->root, &st);
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(j);
	oci_state_free(&st);
	return 0;
}

int oci_cmd_kill(const struct oci_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {{"all", no_argument, NULL, 'a'}, {NULL, 0, NULL, 0}};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_close_ int lock = -1;
	bool all = false;
	struct oci_state st;
	pid_t pids[4096];
	size_t n;
	int sig = SIGTERM, ch;

	optind = 0; /* a fresh scan of a new argv (glibc, musl) */
	while ((ch = getopt_long_only(argc, argv, "+a", opts, NULL)) != -1)
		if (ch == 'a')
			all = true;
		else
			return oci_fail(o, "usage: kill [--all] ID [SIGNAL]");
	if (optind >= argc || argc - optind > 2)
		return oci_fail(o, "usage: kill [--all] ID [SIGNAL]");
	if (argc - optind == 2 && (sig = parse_signal(argv[optind + 1])) < 0)
		return oci_fail(o, "invalid signal '%s'", argv[optind + 1]);
	if (load(o, argv[optind], false, &lock, &st, &err) < 0)
		return oci_fail(o, "%s", err->msg);
	if (strcmp(oci_status(o->root, &st), "stopped") == 0) {
		oci_state_free(&st);
		return oci_fail(o, "container not running");
	}
	/* PID 1 passes the signal on to the workload (init.c); SIGKILL ends the whole pid
	 * namespace. --all: every process of the container, each by its host pid. */
	n = all ? oci_pids(st.pid, pids, ARRAY_SIZE(pids)) : 1;
	pids[0] = st.pid;
	for (size_t i = n; i-- > 0;)
		kill(pids[i], sig);
	oci_state_free(&st);
	return 0;
}

int oci_cmd_delete(const struct oci_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {{"force", no_argument, NULL, 'f'}, {NULL, 0, NULL, 0}};
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_close_ int lock = -1;
	bool force = false;
	struct oci_state st;
	const char *status;
	int ch;

	optind = 0; /* a fresh scan of a new argv (glibc, musl) */
	while ((ch = getopt_long_only(argc, argv, "+f", opts, NULL)) != -1)
		if (ch == 'f')
			force = true;
		else
			return oci_fail(o, "usage: delete [--force] ID");
	if (optind != argc - 1)
		return oci_fail(o, "usage: delete [--force] ID");
	if (load(o, argv[optind], true, &lock, &st, &err) < 0)
		return oci_fail(o, "%s", err->msg);
	status = oci_status(o->root, &st);
	if (!force && strcmp(status, "stopped") != 0 && strcmp(status, "created") != 0) {
		oci_state_free(&st);
		return oci_fail(o, "cannot delete container %s that is not stopped: %s", st.id,
				status);
	}
	/* PID 1 (if still ours) and with it the pid namespace, then the cgroups. A paused one
	 * is thawed first: a frozen task does not die until it thaws. */
	if (strcmp(status, "paused") == 0)
		oci_freeze(st.cgroup, false, NULL);
	/* Safe for one already stopped: PID 1 is signalled only if it is still the same process;
	 * the cgroup is waited for (up to 1 s) while its last tasks leave. */
	jail_sandbox_kill(st.pid, st.start_time, st.cgroup);
	oci_freezer_remove(st.cgroup);
	oci_remove_dir(o->root, st.id);
	oci_state_free(&st);
	return 0;
}

int oci_cmd_list(const struct oci_opts *o, int argc, char **argv)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_close_ int lock = oci_lock(o->root, false, &err);
	_cleanup_closedir_ DIR *d = NULL;
	bool json = argc > 1 && (strcmp(argv[argc - 1], "--format=json") == 0 ||
				 strcmp(argv[argc - 1], "json") == 0);
	json_t *arr = json_array();
	struct dirent *de;
	size_t i;
	json_t *v;

	if (lock < 0 || !(d = opendir(o->root))) {
		json_decref(arr);
		return oci_fail(o, "%s", err ? err->msg : "cannot read the state directory");
	}
	while ((de = readdir(d))) {
		struct oci_state st;
		struct al_error *e = NULL;

		if (de->d_name[0] == '.' || oci_state_load(o->root, de->d_name, &st, &e) < 0) {
			al_error_free(e);
			continue;
		}
		json_array_append_new(arr, oci_state_json(o->root, &st));
		oci_state_free(&st);
	}
	if (json) {
		json_dumpf(arr, stdout, JSON_COMPACT);
		putchar('\n');
	} else {
		printf("ID\tPID\tSTATUS\tBUNDLE\n");
		json_array_foreach(arr, i, v)
		    printf("%s\t%d\t%s\t%s\n", json_string_value(json_object_get(v, "id")),
			   (int)json_integer_value(json_object_get(v, "pid")),
			   json_string_value(json_object_get(v, "status")),
			   json_string_value(json_object_get(v, "bundle")));
	}
	json_decref(arr);
	return 0;
}

int oci_cmd_ps(const struct oci_opts *o, int argc, char **argv)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_close_ int lock = -1;
	struct oci_state st;
	pid_t pids[4096];
	size_t n = 0;
	json_t *arr = json_array();

	if (argc < 2)
		return json_decref(arr), oci_fail(o, "usage: ps [--format json] ID");
	if (load(o, argv[argc - 1], false, &lock, &st, &err) < 0)
		return json_decref(arr), oci_fail(o, "%s", err->msg);
	if (strcmp(oci_status(o->root, &st), "stopped") != 0)
		n = oci_pids(st.pid, pids, ARRAY_SIZE(pids));
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_integer(pids[i]));
	json_dumpf(arr, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(arr);
	oci_state_free(&st);
	return 0;
}

int oci_cmd_update(const struct oci_opts *o, int argc, char **argv)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_close_ int lock = -1;
	struct oci_state st;
	struct al_config cfg;
	json_error_t je;
	json_t *res;
	int r;

	if (argc < 3 || (strcmp(argv[1], "--resources") != 0 && strcmp(argv[1], "-r") != 0 &&
			 strcmp(argv[1], "--resources=-") != 0))
		return oci_fail(o, "usage: update --resources - ID (LinuxResources on stdin)");
	res = json_loadf(stdin, 0, &je);
	if (!res)
		return oci_fail(o, "update: resources: %s", je.text);
	if (load(o, argv[argc - 1], true, &lock, &st, &err) < 0) {
		json_decref(res);
		return oci_fail(o, "%s", err->msg);
	}
	al_config_init(&cfg);
	r = oci_config_resources(res, &cfg, &err);
	if (r == 0)
		r = jail_sandbox_set_limits(st.cgroup, &cfg, &err);
	json_decref(res);
	oci_state_free(&st);
	return r < 0 ? oci_fail(o, "%s", err->msg) : 0;
}

/* The freezer: cgroup v2's cgroup.freeze of the container's cgroup, or v1's freezer. */
int oci_cmd_pause(const struct oci_opts *o, int argc, char **argv, bool pause)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_close_ int lock = -1;
	struct oci_state st;
	const char *status;
	int r;

	if (argc != 2)
		return oci_fail(o, "usage: %s ID", pause ? "pause" : "resume");
	if (load(o, argv[1], true, &lock, &st, &err) < 0)
		return oci_fail(o, "%s", err->msg);
	status = oci_status(o->root, &st);
	if (strcmp(status, pause ? "running" : "paused") != 0) {
		oci_state_free(&st);
		return oci_fail(o, "container %s is %s, not %s", argv[1], status,
				pause ? "running" : "paused");
	}
	r = oci_freeze(st.cgroup, pause, &err);
	oci_state_free(&st);
	return r < 0 ? oci_fail(o, "%s", err->msg) : 0;
}

int oci_cmd_features(const struct oci_opts *o, int argc, char **argv)
{
	static const char doc[] =
	    "{\"ociVersionMin\":\"1.0.0\",\"ociVersionMax\":\"" OCI_VERSION "\","
	    "\"hooks\":[],"
	    "\"mountOptions\":[\"bind\",\"rbind\",\"ro\",\"rw\",\"nosuid\",\"nodev\",\"noexec\"],"
	    "\"linux\":{\"namespaces\":[\"cgroup\",\"ipc\",\"mount\",\"network\",\"pid\","
	    "\"user\",\"uts\"],"
	    "\"capabilities\":[\"CAP_CHOWN\",\"CAP_DAC_OVERRIDE\",\"CAP_FOWNER\",\"CAP_FSETID\","
	    "\"CAP_KILL\",\"CAP_SETGID\",\"CAP_SETUID\",\"CAP_NET_BIND_SERVICE\"],"
	    "\"cgroup\":{\"v1\":true,\"v2\":true,\"systemd\":false,\"systemdUser\":false},"
	    "\"seccomp\":{\"enabled\":true,\"actions\":[\"SCMP_ACT_ALLOW\",\"SCMP_ACT_ERRNO\","
	    "\"SCMP_ACT_KILL\",\"SCMP_ACT_KILL_PROCESS\",\"SCMP_ACT_KILL_THREAD\","
	    "\"SCMP_ACT_LOG\",\"SCMP_ACT_TRAP\"],\"operators\":[\"SCMP_CMP_EQ\",\"SCMP_CMP_GE\","
	    "\"SCMP_CMP_GT\",\"SCMP_CMP_LE\",\"SCMP_CMP_LT\",\"SCMP_CMP_MASKED_EQ\","
	    "\"SCMP_CMP_NE\"]},"
	    "\"apparmor\":{\"enabled\":false},\"selinux\":{\"enabled\":false}},"
	    "\"annotations\":{\"dev.airlock.network-policy\":\"" OCI_POLICY_ANNOTATION "\"}}";
	json_t *j = json_loads(doc, 0, NULL);

	(void)argc;
	(void)argv;
	if (!j)
		return oci_fail(o, "features: internal error");
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(j);
	return 0;
}
