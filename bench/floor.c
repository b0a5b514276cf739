/*
 * floor: the hand-made floor jail of issue 7, measured in the same run as airlock.
 *
 *   floor CMD [ARG]...
 *
 * The least a launcher can do and still isolate a command the way the
 * targets mean: the floor jail of the peer baseline (docs/performance.md,
 * "The floor jail"), rebuilt here so that the target "within 1.3x of the
 * hand-made floor" compares like with like on the machine and in the run at
 * hand, not with a figure from another day:
 *
 *  - one clone with user, pid, mount, network, IPC and UTS namespaces; the
 *    parent writes the uid/gid map (0 -> 0, one id, as bwrap does as root);
 *  - a fresh root: tmpfs, and an overlay on it over an empty skeleton;
 *    /usr bound read-only, nosuid, nodev (bin, lib, lib64, sbin symlinks to it);
 *    a fresh /tmp, a new /proc, a tmpfs /dev with null, zero, random and
 *    urandom bound from the host; pivot_root and the old root detached;
 *  - its own hostname, lo up, NO_NEW_PRIVS, a fixed seccomp denylist (BPF
 *    written out here, nothing compiled at run time), an empty environment;
 *  - the command runs as PID 1 of its namespace; the parent waits and exits
 *    with its status.
 *
 * Not there (as in the baseline's floor jail): cgroup limits, Landlock, dropping
 * capabilities, rlimits, stdio relaying, a timeout, any clean-up. It is a
 * yardstick, not a sandbox: never run untrusted code with it.
 *
 * Every step is checked; any failure exits 125 with a message, so a broken
 * floor can never look fast. bench/run builds it with the same compiler and
 * libc as airlock (scripts/musl-cc when present), static.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKEL "/tmp/airlock-floor-skel"
#define TOP "/tmp/airlock-floor-top" /* a mount point only; empty on the host */

static void die(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	_exit(125);
}

/* The skeleton the overlay's lower layer is: made once, reused by every run. */
static void skeleton(void)
{
	static const char *const dirs[] = {"usr", "tmp", "proc", "dev", "old"};
	static const char *const links[][2] = {
	    {"usr/bin", "bin"}, {"usr/lib", "lib"}, {"usr/lib64", "lib64"}, {"usr/sbin", "sbin"}};
	char p[128];

	if (mkdir(SKEL, 0755) < 0 && errno != EEXIST)
		die("mkdir " SKEL);
	if (mkdir(TOP, 0755) < 0 && errno != EEXIST)
		die("mkdir " TOP);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), SKEL "/%s", dirs[i]);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			die(p);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(p, sizeof(p), SKEL "/%s", links[i][1]);
		if (symlink(links[i][0], p) < 0 && errno != EEXIST)
			die(p);
	}
}

#define DENY(nr)                                                                                   \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1),                                           \
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)

/* A denylist of the size the baseline's floor jail had (~70 instructions). */
static const struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    DENY(SYS_kexec_load),
    DENY(SYS_kexec_file_load),
    DENY(SYS_init_module),
    DENY(SYS_finit_module),
    DENY(SYS_delete_module),
    DENY(SYS_reboot),
    DENY(SYS_swapon),
    DENY(SYS_swapoff),
    DENY(SYS_mount),
    DENY(SYS_umount2),
    DENY(SYS_pivot_root),
    DENY(SYS_unshare),
    DENY(SYS_setns),
    DENY(SYS_ptrace),
    DENY(SYS_process_vm_readv),
    DENY(SYS_process_vm_writev),
    DENY(SYS_bpf),
    DENY(SYS_perf_event_open),
    DENY(SYS_userfaultfd),
    DENY(SYS_keyctl),
    DENY(SYS_add_key),
    DENY(SYS_request_key),
    DENY(SYS_acct),
    DENY(SYS_open_by_handle_at),
    DENY(SYS_name_to_handle_at),
    DENY(SYS_syslog),
    DENY(SYS_iopl),
    DENY(SYS_ioperm),
    DENY(SYS_io_uring_setup),
    DENY(SYS_fsopen),
    DENY(SYS_fsmount),
    DENY(SYS_open_tree),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

static void lo_up(void)
{
	struct ifreq ifr = {.ifr_name = "lo"};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		die("lo flags");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		die("lo up");
	close(fd);
}

static void mnt(const char *src, const char *dst, const char *type, unsigned long fl,
		const char *data)
{
	if (mount(src, dst, type, fl, data) < 0)
		die(dst);
}

static void bind_node(const char *name)
{
	char host[32], in[64];
	int fd;

	snprintf(host, sizeof(host), "/dev/%s", name);
	snprintf(in, sizeof(in), TOP "/root/dev/%s", name);
	fd = open(in, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
	if (fd < 0)
		die(in);
	close(fd);
	mnt(host, in, NULL, MS_BIND, NULL);
}

static int child(char **argv, int sync_fd)
{
	static const struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]),
					       .filter = (struct sock_filter *)filter};
	static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
	char c;

	if (read(sync_fd, &c, 1) != 1) /* the parent has written the id maps */
		die("sync");
	close(sync_fd);
	mnt(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	mnt("tmpfs", TOP, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0755");
	if (mkdir(TOP "/upper", 0755) < 0 || mkdir(TOP "/work", 0755) < 0 ||
	    mkdir(TOP "/root", 0755) < 0)
		die("mkdir in " TOP);
	mnt("overlay", TOP "/root", "overlay", 0,
	    "lowerdir=" SKEL ",upperdir=" TOP "/upper,workdir=" TOP "/work");
	mnt("/usr", TOP "/root/usr", NULL, MS_BIND | MS_REC, NULL);
	mnt(NULL, TOP "/root/usr", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
	    NULL);
	mnt("tmpfs", TOP "/root/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mnt("proc", TOP "/root/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mnt("tmpfs", TOP "/root/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755");
	bind_node("null");
	bind_node("zero");
	bind_node("random");
	bind_node("urandom");
	if (chdir(TOP "/root") < 0 || syscall(SYS_pivot_root, ".", "old") < 0 ||
	    umount2("/old", MNT_DETACH) < 0 || chdir("/") < 0)
		die("pivot_root");
	if (sethostname("floor", 5) < 0)
		die("sethostname");
	lo_up();
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		die("seccomp");
	execvpe(argv[0], argv, envp);
	die(argv[0]);
	return 125;
}

static void write_map(pid_t pid, const char *file, const char *text)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die(path);
	close(fd);
}

int main(int argc, char **argv)
{
	int sync[2], st;
	pid_t pid;

	if (argc < 2) {
		fprintf(stderr, "usage: floor CMD [ARG]...\n");
		return 125;
	}
	skeleton();
	if (pipe2(sync, O_CLOEXEC) < 0)
		die("pipe2");
	pid = (pid_t)syscall(SYS_clone,
			     CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET |
				 CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD,
			     NULL, NULL, NULL, 0);
	if (pid < 0)
		die("clone");
	if (pid == 0) {
		close(sync[1]);
		return child(argv + 1, sync[0]);
	}
	close(sync[0]);
	write_map(pid, "setgroups", "deny");
	write_map(pid, "uid_map", "0 0 1\n");
	write_map(pid, "gid_map", "0 0 1\n");
	if (write(sync[1], "x", 1) != 1)
		die("sync");
	close(sync[1]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
