/*
 * template_probe: what a mount template would save (issue 7's "build the mount tree once
 * in a template and clone it"), measured before anyone builds one into airlock.
 *
 *   cc -O2 -Wall -o /tmp/template_probe bench/template_probe.c
 *   /tmp/template_probe [N [0|1]]       as root; N iterations (300), only one variant
 *
 * Two ways to give a child (cloned with a new pid namespace, as airlock's is) the root
 * airlock's one-shot builds (src/jail/rootfs.c; mirrored from an strace of a deny-all
 * run, not linked to it):
 *   classic   cloned with CLONE_NEWNS (a copy of the host's mounts), a tmpfs root, the
 *             runtime bound read-only, symlinks, /etc files, device nodes, devpts, /proc
 *             with its masks, pivot_root and the host's mounts detached;
 *   template  setns into a mount namespace made once whose root is that skeleton,
 *             remounted read-only (the superblock), then unshare(CLONE_NEWNS) for a
 *             private copy, and only the per-run parts: one tmpfs bound to /tmp,
 *             /workspace and /home/user, devpts, /proc and its masks.
 * It prints the median time from clone to reap (the child's whole life: set-up, exit
 * and the teardown of its mounts) of each, alternated. The host's CPU per iteration is
 * what /proc/stat says around a run of one variant alone (docs/performance.md, "Root template").
 * A yardstick only: the template here has no invalidation, no variants for --image,
 * --file or --hostname, and is thrown away at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                      \
	do {                                                                                       \
		if ((x) < 0) {                                                                     \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                  \
				strerror(errno));                                                  \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static void wr(const char *p, const char *s)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	CK(fd);
	CK(write(fd, s, strlen(s)));
	close(fd);
}
static void robind(const char *src, const char *dst)
{
	CK(mount(src, dst, NULL, MS_BIND, NULL));
	CK(mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL));
}
static const char *masks[] = {"kcore",	  "keys",	 "timer_list", "sysrq-trigger",
			      "kallsyms", "sched_debug", "config.gz"};

/* the runtime part: what a template would hold */
static void skeleton(const char *r)
{
	char p[256];
#define P(x) (snprintf(p, sizeof p, "%s/%s", r, x), p)
	CK(mkdir(P("usr"), 0755));
	robind("/usr", P("usr"));
	CK(symlink("usr/bin", P("bin")));
	CK(symlink("usr/sbin", P("sbin")));
	CK(symlink("usr/lib", P("lib")));
	CK(symlink("usr/lib32", P("lib32")));
	CK(symlink("usr/lib64", P("lib64")));
	CK(mkdir(P("etc"), 0755));
	CK(mkdir(P("etc/ssl"), 0755));
	wr(P("etc/passwd"),
	   "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n");
	wr(P("etc/group"), "root:x:0:\nuser:x:1000:\n");
	wr(P("etc/nsswitch.conf"), "passwd: files\n");
	wr(P("etc/resolv.conf"), "# none\n");
	wr(P("etc/hosts"), "127.0.0.1 localhost\n");
	wr(P("etc/hostname"), "sandbox\n");
	wr(P("etc/ld.so.cache"), "");
	robind("/etc/ld.so.cache", P("etc/ld.so.cache"));
	CK(symlink("/usr/share/zoneinfo/Etc/UTC", P("etc/localtime")));
	CK(mkdir(P("etc/ssl/certs"), 0755));
	robind("/etc/ssl/certs", P("etc/ssl/certs"));
	CK(mkdir(P("etc/alternatives"), 0755));
	robind("/etc/alternatives", P("etc/alternatives"));
	CK(mkdir(P("tmp"), 01777));
	CK(mkdir(P("workspace"), 0755));
	CK(mkdir(P("home"), 0755));
	CK(mkdir(P("home/user"), 0755));
	CK(mkdir(P("dev"), 0755));
	CK(mkdir(P("dev/pts"), 0755));
	CK(mkdir(P("dev/shm"), 01777));
	CK(mknod(P("dev/null"), S_IFCHR | 0666, makedev(1, 3)));
	CK(mknod(P("dev/zero"), S_IFCHR | 0666, makedev(1, 5)));
	CK(mknod(P("dev/full"), S_IFCHR | 0666, makedev(1, 7)));
	CK(mknod(P("dev/random"), S_IFCHR | 0666, makedev(1, 8)));
	CK(mknod(P("dev/urandom"), S_IFCHR | 0666, makedev(1, 9)));
	CK(mknod(P("dev/tty"), S_IFCHR | 0666, makedev(5, 0)));
	CK(symlink("pts/ptmx", P("dev/ptmx")));
	CK(symlink("/proc/self/fd", P("dev/fd")));
	CK(mkdir(P("proc"), 0555));
#undef P
}
static void procfs(const char *r)
{
	char p[256], q[256];
	snprintf(p, sizeof p, "%s/dev/pts", r);
	CK(mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC,
		 "newinstance,ptmxmode=0666,mode=0620"));
	snprintf(p, sizeof p, "%s/proc", r);
	CK(mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
	snprintf(q, sizeof q, "%s/dev/null", r);
	for (unsigned i = 0; i < sizeof masks / sizeof *masks; i++) {
		snprintf(p, sizeof p, "%s/proc/%s", r, masks[i]);
		mount(q, p, NULL, MS_BIND, NULL);
	}
}
static int classic(void)
{ /* child: cloned with CLONE_NEWNS|CLONE_NEWPID */
	CK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
	CK(mount("airlock", "/tmp", "tmpfs", MS_NOSUID,
		 "size=1073741824,nr_inodes=262144,mode=0755"));
	skeleton("/tmp");
	procfs("/tmp");
	CK(chown("/tmp/workspace", 1000, 1000));
	CK(chown("/tmp/home/user", 1000, 1000));
	CK(chdir("/tmp"));
	CK(syscall(SYS_pivot_root, ".", "."));
	CK(umount2(".", MNT_DETACH));
	CK(chdir("/"));
	return 0;
}
static int tmplfd = -1;
static int templated(void)
{ /* child: cloned with CLONE_NEWPID only */
	CK(setns(tmplfd, CLONE_NEWNS));
	CK(unshare(CLONE_NEWNS));
	/* per run: one rw tmpfs (the --disk limit) bound to the writable places */
	CK(mount("airlock", "/dev/shm", "tmpfs", MS_NOSUID,
		 "size=1073741824,nr_inodes=262144,mode=0755")); /* scratch mountpoint */
	CK(mkdir("/dev/shm/tmp", 01777));
	CK(mkdir("/dev/shm/workspace", 0755));
	CK(mkdir("/dev/shm/home", 0755));
	CK(mkdir("/dev/shm/shm", 01777));
	CK(chown("/dev/shm/workspace", 1000, 1000));
	CK(chown("/dev/shm/home", 1000, 1000));
	CK(mount("/dev/shm/tmp", "/tmp", NULL, MS_BIND, NULL));
	CK(mount("/dev/shm/workspace", "/workspace", NULL, MS_BIND, NULL));
	CK(mount("/dev/shm/home", "/home/user", NULL, MS_BIND, NULL));
	procfs("");
	return 0;
}
static char stk[1 << 16];
static int entry(void *a)
{
	_exit(((int (*)(void))a)());
}
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300;
	/* the template: a mount namespace whose root is the skeleton, read-only */
	char dir[] = "/run/airlock-template-probe-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	pid_t tp = fork();
	if (tp == 0) {
		CK(unshare(CLONE_NEWNS));
		CK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
		CK(mount("tmpl", dir, "tmpfs", 0, "mode=0755"));
		skeleton(dir);
		CK(chdir(dir));
		CK(syscall(SYS_pivot_root, ".", "."));
		CK(umount2(".", MNT_DETACH));
		CK(chdir("/"));
		CK(mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL)); /* superblock read-only */
		pause();
		_exit(0);
	}
	usleep(200000); /* the template is built (a failure shows below as the children's) */
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/ns/mnt", tp);
	tmplfd = open(p, O_RDONLY | O_CLOEXEC);
	CK(tmplfd);
	double a[2][5000];
	int cnt[2] = {0, 0};
	int only = argc > 2 ? atoi(argv[2]) : -1;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 2; k++) {
			int kk = (i & 1) ? 1 - k : k;
			if (only >= 0 && kk != only)
				continue;
			double t0 = now();
			pid_t c = clone(entry, stk + sizeof stk,
					(kk ? 0 : CLONE_NEWNS) | CLONE_NEWPID | SIGCHLD,
					(void *)(kk ? templated : classic));
			CK(c);
			int st;
			CK(waitpid(c, &st, 0));
			double t = now() - t0;
			if (!WIFEXITED(st) || WEXITSTATUS(st)) {
				fprintf(stderr, "child %d failed\n", kk);
				kill(tp, 9);
				waitpid(tp, 0, 0);
				rmdir(dir);
				return 1;
			}
			a[kk][cnt[kk]++] = t;
		}
	kill(tp, 9);
	waitpid(tp, 0, 0);
	rmdir(dir);
	for (int k = 0; k < 2; k++) {
		int m = cnt[k];
		if (!m)
			continue;
		for (int i = 0; i < m; i++)
			for (int j = i + 1; j < m; j++)
				if (a[k][j] < a[k][i]) {
					double x = a[k][i];
					a[k][i] = a[k][j];
					a[k][j] = x;
				}
		printf("%-9s median %.3f ms  p10 %.3f  p90 %.3f  (clone..reap, n=%d)\n",
		       k ? "template" : "classic", a[k][m / 2], a[k][m / 10], a[k][m * 9 / 10], m);
	}
	return 0;
}
