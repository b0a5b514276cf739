/* SPDX-License-Identifier: MIT */
/*
 * `exec`: one more process in a running container (podman exec, ctr task exec, kubectl
 * exec). A helper forked from airlock-oci joins the container's cgroup and namespaces
 * (cgroup, IPC, UTS, network, pid, mount, and its user namespace last), makes itself
 * undumpable first (a process of the container must not ptrace or read a host root
 * process on its way in), and forks the process, which drops privileges exactly as a
 * workload does (src/jail/init.c: capabilities cut to the process's, no_new_privs,
 * Landlock, airlock's seccomp floor and then the container's) and execs. The helper sends
 * its host pid back and exits: the process becomes the shim's child, as runc's does.
 */
#include "oci/oci.h"
#include "jail/sandbox.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/fdpass.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct exec_args {
	const char *process, *pid_file, *console, *id;
	bool detach, tty;
	char **argv; /* without --process: the command line */
};

static int parse_exec(int argc, char **argv, struct exec_args *a)
{
	static const struct option opts[] = {{"process", required_argument, NULL, 'p'},
					     {"pid-file", required_argument, NULL, 'f'},
					     {"console-socket", required_argument, NULL, 'c'},
					     {"detach", no_argument, NULL, 'd'},
					     {"tty", no_argument, NULL, 't'},
					     {NULL, 0, NULL, 0}};
	int ch;

	optind = 0; /* a fresh scan of a new argv (glibc, musl) */
	while ((ch = getopt_long_only(argc, argv, "+p:dt", opts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			a->process = optarg;
			break;
		case 'f':
			a->pid_file = optarg;
			break;
		case 'c':
			a->console = optarg;
			break;
		case 'd':
			a->detach = true;
			break;
		case 't':
			a->tty = true;
			break;
		default:
			return -1;
		}
	}
	if (optind >= argc || (!a->process && optind + 1 >= argc))
		return -1;
	a->id = argv[optind];
	a->argv = argv + optind + 1;
	return 0;
}

static int connect_console(const char *path, struct al_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (strlen(path) >= sizeof(sa.sun_path))
		return al_error_msg(err, ENAMETOOLONG, "console socket '%s'", path);
	strcpy(sa.sun_path, path);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return al_error_set(err, errno, "connect to the console socket '%s'", path);
	return TAKE_FD(s);
}

/* In the helper: the container's cgroup, then its namespaces, the user namespace last. */
static int join(const struct oci_state *st, struct al_error **err)
{
	static const struct {
		const char *name;
		int type;
	} order[] = {{"cgroup", CLONE_NEWCGROUP}, {"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS},
		     {"net", CLONE_NEWNET},	  {"pid", CLONE_NEWPID}, {"mnt", CLONE_NEWNS},
		     {"user", CLONE_NEWUSER}};
	int fds[ARRAY_SIZE(order)];
	struct jail_cgroup *cg = jail_cgroup_open(st->cgroup);
	int r = cg ? jail_cgroup_attach(cg, getpid(), err) : 0;
	size_t i;

	jail_cgroup_forget(cg);
	if (r < 0)
		return -1;
	/* Every one opened before any is joined: /proc is the host's until the mount one. */
	for (i = 0; i < ARRAY_SIZE(order); i++) {
		char p[64];

		snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)st->pid, order[i].name);
		fds[i] = open(p, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			r = al_error_set(err, errno, "open '%s'", p);
			break;
		}
	}
	for (size_t k = 0; r == 0 && k < ARRAY_SIZE(order); k++)
		if (setns(fds[k], order[k].type) < 0)
			r = al_error_set(err, errno, "setns to the container's %s namespace",
					 order[k].name);
	for (size_t k = 0; k < i; k++)
		close(fds[k]);
	if (r == 0 && (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0))
		r = al_error_set(err, errno, "setresuid(0) in the container's user namespace");
	return r;
}

/* A PTY in the container's own devpts: the master to the console socket. */
static int open_tty(int console, int *slave, struct al_error **err)
{
	static const char name[] = "/dev/pts/ptmx";
	_cleanup_close_ int master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	int unlock = 0;

	if (master < 0 || ioctl(master, TIOCSPTLCK, &unlock) < 0)
		return al_error_set(err, errno, "open the container's /dev/pts/ptmx");
	*slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY);
	if (*slave < 0)
		return al_error_set(err, errno, "TIOCGPTPEER");
	if (al_send_with_fd(console, name, sizeof(name) - 1, master) < 0)
		return al_error_set(err, errno, "send the console");
	return 0;
}

/* The helper: join, fork the process, report its host pid (or an error) on `report`. */
__attribute__((noreturn)) static void helper(const struct oci_state *st, struct oci_config *c,
					     int console, int report)
{
	struct al_error *err = NULL;
	struct jail_ctx ctx = {.cfg = &c->cfg,
			       .host_base = 0,
			       .uid = c->uid,
			       .envp = (char **)c->envp,
			       .stdio = {0, 1, 2},
			       .cwd = c->cwd,
			       .oci = &c->oci,
			       .workdir = "/workspace"};
	int slave = -1, devnull = -1;
	pid_t pid;

	prctl(PR_SET_DUMPABLE, 0); /* before anything of the container's can see us */
	if (join(st, &err) < 0 || (console >= 0 && open_tty(console, &slave, &err) < 0) ||
	    (devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
		dprintf(report, "E%s", err ? err->msg : strerror(errno));
		_exit(1);
	}
	pid = fork();
	if (pid == 0) {
		/* Its exec report has no reader (we are gone by then): its exit status says it,
		 * 127 or 126, as a workload's. */
		close(report);
		jail_exec_workload(&ctx, slave, devnull);
	}
	dprintf(report, "P%d", (int)pid);
	_exit(pid < 0 ? 1 : 0);
}

static int load_process(const struct exec_args *a, const struct oci_state *st, struct oci_config *c,
			struct al_error **err)
{
	json_error_t je;
	json_t *proc;
	int r;

	if (oci_config_load(st->bundle, c, err) < 0)
		return al_error_wrap(err, "the container's config");
	if (!a->process) { /* the command line, in the container's process settings */
		size_t n = 0;

		while (a->argv[n])
			n++;
		free(c->argv);
		c->argv = xzalloc((n + 1) * sizeof(char *));
		memcpy(c->argv, a->argv, n * sizeof(char *));
		c->cfg.argv = (char *const *)c->argv;
		c->cfg.tty = a->tty;
		return 0;
	}
	proc = json_load_file(a->process, 0, &je);
	if (!proc)
		return al_error_msg(err, EINVAL, "%s: %s", a->process, je.text);
	/* The strings stay owned by the config document. */
	json_object_set_new(c->doc, "airlock.exec", proc);
	r = oci_config_process(proc, c, err);
	return r;
}

static int do_exec(const struct oci_opts *o, const struct exec_args *a, struct al_error **err)
{
	_cleanup_close_ int lock = oci_lock(o->root, false, err), console = -1;
	struct oci_config c;
	struct oci_state st;
	int rep[2] = {-1, -1}, status = 0, r = -1;
	char msg[600] = {0};
	pid_t h;

	memset(&c, 0, sizeof(c));
	if (lock < 0 || oci_state_load(o->root, a->id, &st, err) < 0)
		return -1;
	if (strcmp(oci_status(o->root, &st), "running") != 0) {
		al_error_msg(err, ESRCH, "cannot exec in a container that is not running");
		goto out;
	}
	if (load_process(a, &st, &c, err) < 0)
		goto out;
	if (c.cfg.tty && !a->console) {
		al_error_msg(err, EINVAL, "a terminal needs --console-socket");
		goto out;
	}
	if (c.cfg.tty && (console = connect_console(a->console, err)) < 0)
		goto out;
	if (pipe2(rep, O_CLOEXEC) < 0) {
		al_error_set(err, errno, "pipe");
		goto out;
	}
	/* Not detached: we wait for the process ourselves, so it must come back to us when the
	 * helper exits. Detached: it goes to the shim (a subreaper above us), as runc's. */
	if (!a->detach)
		prctl(PR_SET_CHILD_SUBREAPER, 1);
	h = fork();
	if (h == 0) {
		close(rep[0]);
		helper(&st, &c, console, rep[1]);
	}
	al_closep(&rep[1]);
	if (h < 0 || read(rep[0], msg, sizeof(msg) - 1) <= 0) {
		al_error_msg(err, ECHILD, "exec: the helper died");
	} else if (msg[0] == 'E') {
		al_error_msg(err, EPERM, "exec: %s", msg + 1);
	} else if (a->pid_file && oci_write_pid_file(a->pid_file, atoi(msg + 1), err) < 0) {
		;
	} else {
		r = 0;
	}
	if (h > 0)
		waitpid(h, NULL, 0);
	if (r == 0 && !a->detach) {
		pid_t p = atoi(msg + 1);

		if (waitpid(p, &status, 0) == p)
			r = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	}
out:
	al_closep(&rep[0]);
	oci_config_free(&c);
	oci_state_free(&st);
	return r;
}

int oci_exec(const struct oci_opts *o, int argc, char **argv)
{
	struct exec_args a = {0};
	_cleanup_error_ struct al_error *err = NULL;
	int r;

	if (parse_exec(argc, argv, &a) < 0)
		return oci_fail(o, "usage: exec [--process P.json | ID CMD...] [--detach] "
				   "[--pid-file F] [--console-socket S] [--tty] ID");
	r = do_exec(o, &a, &err);
	return r < 0 ? oci_fail(o, "%s", err->msg) : r;
}
