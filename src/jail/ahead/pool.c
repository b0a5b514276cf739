/* SPDX-License-Identifier: MIT */
/* The one-shot pool of namespaces made ahead (see pool.h for the layout). */
#include "jail/ahead/pool.h"
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/syscalls.h"
#include "net/contract.h"
#include "host/link.h"
#include "host/gw_client.h"
#include "host/nft.h"
#include "gw_nft_batch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *const kind_dir[] = {
    [JAIL_POOL_LOOPBACK] = "loopback", [JAIL_POOL_LINK] = "link"};

/* What a pooled entry was built by: the ruleset's bytes, the link's addresses, and this
 * very binary (a rebuild is a new file: its roots and links may differ). */
static unsigned version_hash(void)
{
	static const char link[] = NET_GW_ADDR " " NET_SBX_ADDR " " NET_SBX_LINK " " NET_GW_LINK;
	struct stat st;
	uint32_t h = 2166136261u;

	h = jail_fnv(h, gw_nft_batch, sizeof(gw_nft_batch));
	h = jail_fnv(h, link, sizeof(link));
	if (stat("/proc/self/exe", &st) == 0) {
		uint64_t id[] = {st.st_dev, st.st_ino, (uint64_t)st.st_size,
				 (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec};
		h = jail_fnv(h, id, sizeof(id));
	}
	return h;
}

/* root, else $AIRLOCK_POOL, else JAIL_POOL_ROOT (a relative path counts as none). */
static const char *pool_root(const char *root)
{
	if (!root)
		root = getenv("AIRLOCK_POOL");
	return root && root[0] == '/' ? root : JAIL_POOL_ROOT;
}

/* Entry names are at most 100 characters. */
static const char *next_entry(DIR *d)
{
	return jail_next_entry(d, 100);
}

/* DIR/SUB, opened for next_entry (its path in path), or NULL. */
static DIR *open_sub(const char *dir, const char *sub, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", dir, sub);
	return opendir(path);
}

/* Take entry name of DIR/KIND: rename(2) into claimed/, which one caller alone can win
 * (ENOENT: another took it first). Its new path in to. */
static bool take(const char *dir, const char *kind, const char *name, char *to, size_t len)
{
	char from[600];

	snprintf(from, sizeof(from), "%s/%s/%s", dir, kind, name);
	snprintf(to, len, "%s/claimed/%d-%s", dir, (int)getpid(), name);
	return rename(from, to) == 0;
}

int jail_pool_dir(const char *root, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/v1-%08x", pool_root(root), version_hash());

	return n > 0 && (size_t)n < len && (size_t)n < sizeof(((struct jail_pool_claim *)0)->dir)
		   ? 0
		   : -1;
}

unsigned jail_pool_size(const char *dir)
{
	char path[256], buf[16];
	unsigned long n;
	ssize_t got;
	char *end;
	int fd;

	snprintf(path, sizeof(path), "%s/size", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got <= 0)
		return 0;
	buf[got] = '\0';
	n = strtoul(buf, &end, 10);
	return (*end == '\n' || *end == '\0') && n <= JAIL_POOL_MAX_SIZE ? (unsigned)n : 0;
}

void jail_pool_stop_gateway(const char *dir, const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, sock) >=
	    (int)sizeof(sa.sun_path))
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		(void)!connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
	}
	unlink(sa.sun_path);
}

/* Unpin and remove one entry directory (its namespaces go when their last user does). */
static void discard(const char *entry)
{
	static const char *const files[] = {"sbx", "gw", "mnt"};
	char path[400];

	jail_pool_stop_gateway(entry, "gw.sock");
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", entry, files[i]);
		jail_unpin(path);
	}
	rmdir(entry);
}

bool jail_pool_claim(const char *dir, enum jail_pool_kind kind, struct jail_pool_claim *c)
{
	char kdir[256], from[600];
	const char *name;
	bool found = false;
	DIR *d;

	memset(c, 0, sizeof(*c));
	c->sbx_fd = c->mnt_fd = -1;
	if (!jail_dir_is_ours(dir) || !(d = open_sub(dir, kind_dir[kind], kdir, sizeof(kdir))))
		return false;
	while (!found && (name = next_entry(d)))
		found = take(dir, kind_dir[kind], name, c->entry, sizeof(c->entry));
	closedir(d);
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	if (!found) {
		/* Emptied while launches filled the host (run.c): refilled after this run. */
		c->refill_only = jail_pool_size(dir) > 0;
		return false;
	}
	snprintf(from, sizeof(from), "%s/sbx", c->entry);
	c->sbx_fd = jail_pin_open(from, CLONE_NEWNET);
	c->held = true;
	snprintf(from, sizeof(from), "%s/mnt", c->entry);
	c->mnt_fd = jail_pin_open(from, CLONE_NEWNS);
	if (kind == JAIL_POOL_LINK) {
		_cleanup_close_ int gw = -1;

		snprintf(c->gw_path, sizeof(c->gw_path), "%s/gw", c->entry);
		snprintf(c->gw_sock, sizeof(c->gw_sock), "%s/gw.sock", c->entry);
		gw = jail_pin_open(c->gw_path, CLONE_NEWNET);
		if (gw < 0)
			al_closep(&c->sbx_fd);
	}
	if (c->sbx_fd >= 0 && c->mnt_fd >= 0)
		return true;
	al_closep(&c->sbx_fd);
	al_closep(&c->mnt_fd);
	discard(c->entry);
	c->held = false;
	return false;
}

/* A new namespace for this thread, loopback up; its fd in *out. The thread stays in it. */
static int new_netns(int *out, bool loopback, struct al_error **err)
{
	if (unshare(CLONE_NEWNET) < 0)
		return al_error_set(err, errno, "unshare(CLONE_NEWNET)");
	*out = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*out < 0)
		return al_error_set(err, errno, "open the new network namespace");
	if (loopback) {
		_cleanup_close_ int nl = net_nl_open(err);

		if (nl < 0 || net_link_up(nl, "lo", err) < 0)
			return -1;
	}
	return 0;
}

/* In the pooled gateway namespace (this thread's): its ruleset, and the link to the pooled
 * sandbox namespace sbx, as a gateway attaching to a sandbox makes it (net_link_make). */
static int build_link(int sbx, struct al_error **err)
{
	_cleanup_close_ int nl = net_nl_open(err);

	if (nl < 0 || net_nft_apply(err) < 0)
		return -1;
	return net_link_make(nl, sbx, err);
}

/* Bind-mount namespace fd onto DIR/name. */
static int pin(int fd, const char *dir, const char *name, struct al_error **err)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return jail_pin(fd, path, err);
}

bool jail_pool_start_gateway(const char *dir, const char *sock_name, unsigned idle_exit_s)
{
	/* The lite gateway next to us: a pooled gateway serves no per-request rules. */
	_cleanup_free_ char *path = gw_sibling("airlock-gateway-lite");
	char sock[400], ns[400], ready[256];
	const char *argv[10];
	char idle[16];
	int sp[2];
	pid_t pid;
	bool up = false;

	snprintf(sock, sizeof(sock), "%s/%s", dir, sock_name);
	snprintf(ns, sizeof(ns), "%s/gw", dir);
	if (access(path, X_OK) < 0 || strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return false;
	argv[0] = "airlock-gateway";
	argv[1] = "--pool-serve";
	argv[2] = sock;
	argv[3] = "--pooled-netns";
	argv[4] = ns;
	argv[5] = "--sandbox";
	argv[6] = "pool";
	argv[7] = idle_exit_s ? "--idle-exit" : NULL;
	snprintf(idle, sizeof(idle), "%u", idle_exit_s);
	argv[8] = idle;
	argv[9] = NULL;
	pid = gw_exec(path, argv, sp[1], -1, NULL);
	close(sp[1]);
	if (pid > 0) {
		struct pollfd p = {.fd = sp[0], .events = POLLIN};

		/* "P": listening. Anything else, or nothing within 10 s: it is of no use. */
		up = poll(&p, 1, 10000) > 0 && read(sp[0], ready, sizeof(ready)) > 0 &&
		     ready[0] == 'P';
		if (!up)
			kill(pid, SIGKILL);
	}
	close(sp[0]);
	return up;
}

/* Make one entry in new/, then publish it with a rename. -1 with err; -2 when this thread
 * could not get back to its own namespace (the caller must stop: it is stranded). */
static int make_entry(const char *dir, enum jail_pool_kind kind, unsigned serial,
		      struct al_error **err)
{
	_cleanup_close_ int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int sbx = -1, gw = -1, mnt = -1;
	char tmp[300], dst[300];
	struct timespec ts;
	int r;

	if (home < 0)
		return al_error_set(err, errno, "open this thread's network namespace");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(tmp, sizeof(tmp), "%s/new/%d-%u-%lld%09ld", dir, (int)getpid(), serial,
		 (long long)ts.tv_sec, ts.tv_nsec);
	snprintf(dst, sizeof(dst), "%s/%s/%s", dir, kind_dir[kind], strrchr(tmp, '/') + 1);
	if (mkdir(tmp, 0700) < 0)
		return al_error_set(err, errno, "mkdir '%s'", tmp);
	r = new_netns(&sbx, true, err);
	if (r == 0 && kind == JAIL_POOL_LINK) {
		r = new_netns(&gw, false, err);
		if (r == 0)
			r = build_link(sbx, err);
	}
	if (setns(home, CLONE_NEWNET) < 0) {
		al_error_set(err, errno, "setns back from a pooled namespace");
		return -2;
	}
	/* The root of a sandbox with the default settings (jail_pool_root_fits) */
	if (r == 0) {
		struct al_config cfg;
		struct jail_ctx ctx = {.cfg = &cfg, .net_link = kind == JAIL_POOL_LINK};

		al_config_init(&cfg);
		r = jail_rootfs_ahead(&ctx, &mnt, err);
		if (r == JAIL_NS_STRANDED)
			return -2;
	}
	if (r == 0)
		r = pin(mnt, tmp, "mnt", err);
	if (r == 0)
		r = pin(sbx, tmp, "sbx", err);
	if (r == 0 && kind == JAIL_POOL_LINK)
		r = pin(gw, tmp, "gw", err);
	if (r == 0 && kind == JAIL_POOL_LINK) /* best effort: without it a run starts its own */
		jail_pool_start_gateway(tmp, "gw.sock", 0);
	if (r == 0 && rename(tmp, dst) < 0)
		r = al_error_set(err, errno, "publish '%s'", dst);
	if (r < 0) {
		discard(tmp);
		return al_error_wrap(err, "pooled network namespace");
	}
	return 0;
}

static unsigned count_in(const char *dir, const char *sub)
{
	char path[300];
	unsigned n = 0;
	DIR *d = open_sub(dir, sub, path, sizeof(path));

	if (!d)
		return 0;
	while (next_entry(d))
		n++;
	closedir(d);
	return n;
}

void jail_pool_count(const char *dir, unsigned *loopback, unsigned *link)
{
	*loopback = count_in(dir, kind_dir[JAIL_POOL_LOOPBACK]);
	*link = count_in(dir, kind_dir[JAIL_POOL_LINK]);
}

/* Entries whose maker or claimer is gone (its pid leads the name). With the lock held,
 * all of new/ is dead; claimed/ only where the claiming process no longer exists. */
static int sweep(const char *dir, const char *sub, bool only_dead)
{
	char path[300], entry[600];
	const char *name;
	int n = 0;
	DIR *d = open_sub(dir, sub, path, sizeof(path));

	if (!d)
		return 0;
	while ((name = next_entry(d))) {
		int pid = atoi(name);

		if (only_dead && pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH))
			continue;
		snprintf(entry, sizeof(entry), "%s/%s", path, name);
		discard(entry);
		n++;
	}
	closedir(d);
	return n;
}

/* A smaller size: take the entries beyond it (as a run would: by rename) and release them. */
static void shrink(const char *dir, const char *kind, unsigned size)
{
	char path[300], to[600];
	unsigned n = count_in(dir, kind);
	const char *name;
	DIR *d = open_sub(dir, kind, path, sizeof(path));

	while (d && n > size && (name = next_entry(d))) {
		if (take(dir, kind, name, to, sizeof(to))) {
			discard(to);
			n--;
		}
	}
	if (d)
		closedir(d);
}

/* Do one-shot launches (src/jail/ahead/crowd.c; we hold no slot) occupy every CPU of ours? */
static bool launches_fill_cpus(void)
{
	_cleanup_close_ int fd = open(JAIL_CROWD_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	return jail_crowd_full(fd, jail_crowd_cpus(), false);
}

/* With the lock held: make (or release) entries until size of each kind are ready. A
 * refill after a run (`yield`) stops early while launches occupy every CPU: it would
 * only take CPU from them, and they are served best cold then. */
static int fill_locked(const char *dir, unsigned size, bool yield, struct al_error **err)
{
	unsigned serial = 0;
	int made = 0;

	sweep(dir, "new", false);
	sweep(dir, "claimed", true);
	for (int k = JAIL_POOL_LINK; k >= JAIL_POOL_LOOPBACK; k--)
		shrink(dir, kind_dir[k], size);
	for (int k = JAIL_POOL_LINK; k >= JAIL_POOL_LOOPBACK; k--) {
		while (count_in(dir, kind_dir[k]) < size && jail_pool_size(dir) >= size &&
		       !(yield && launches_fill_cpus())) {
			int r = make_entry(dir, (enum jail_pool_kind)k, serial++, err);

			if (r == -2)
				_exit(AL_EXIT_SETUP); /* stranded in a pooled namespace */
			if (r < 0)
				return -1;
			made++;
		}
	}
	return made;
}

static int open_lock(const char *dir, int how)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "%s/lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0 && flock(fd, how) < 0)
		al_closep(&fd);
	return fd;
}

static int mkdirs(const char *dir, struct al_error **err)
{
	static const char *const subs[] = {"loopback", "link", "claimed", "new"};
	char path[300], *slash;

	snprintf(path, sizeof(path), "%s", dir);
	for (slash = strchr(path + 1, '/');; slash = strchr(slash + 1, '/')) {
		if (slash)
			*slash = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return al_error_set(err, errno, "mkdir '%s'", path);
		if (!slash)
			break;
		*slash = '/';
	}
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, subs[i]);
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return al_error_set(err, errno, "mkdir '%s'", path);
	}
	return 0;
}

static int write_size(const char *dir, unsigned size, struct al_error **err)
{
	char tmp[300], path[300];
	int fd, len;
	char buf[16];

	snprintf(tmp, sizeof(tmp), "%s/size.%d", dir, (int)getpid());
	snprintf(path, sizeof(path), "%s/size", dir);
	len = snprintf(buf, sizeof(buf), "%u\n", size);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, buf, (size_t)len) != len || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		int e = errno;

		unlink(tmp);
		return al_error_set(err, e, "write '%s'", path);
	}
	return 0;
}

int jail_pool_fill(const char *dir, unsigned size, struct al_error **err)
{
	_cleanup_close_ int lock = -1;

	if (size > JAIL_POOL_MAX_SIZE)
		return al_error_msg(err, EINVAL, "pool size %u is more than the most, %u", size,
				    JAIL_POOL_MAX_SIZE);
	if (mkdirs(dir, err) < 0)
		return -1;
	if (!jail_dir_is_ours(dir))
		return al_error_msg(
		    err, EPERM, "'%s' is not a directory of this user that only it may write to",
		    dir);
	if (write_size(dir, size, err) < 0)
		return -1;
	lock = open_lock(dir, LOCK_EX);
	if (lock < 0)
		return al_error_set(err, errno, "lock the pool '%s'", dir);
	return fill_locked(dir, size, false, err);
}

void jail_pool_release(struct jail_pool_claim *c)
{
	sigset_t all;
	pid_t pid;
	int fd;
	bool held = c && c->held;

	if (!c || !(held || (c->refill_only && !c->no_refill)))
		return;
	al_closep(&c->sbx_fd);
	al_closep(&c->mnt_fd);
	c->held = c->refill_only = false;
	pid = fork();
	if (pid > 0)
		return;
	if (pid < 0) { /* no refill then, but the entry must not stay pinned */
		if (held)
			discard(c->entry);
		return;
	}
	/* The refiller: nothing of the caller's (its pipes would keep a reader waiting for
	 * EOF), no terminal, below the caller's next run in priority. */
	setsid();
	sys_close_range(0, ~0U, 0);
	fd = open("/dev/null", O_RDWR);
	if (fd == 0) {
		dup2(0, 1);
		dup2(0, 2);
	}
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	setpriority(PRIO_PROCESS, 0, 10);
	if (held)
		discard(c->entry);
	unsigned size = c->no_refill ? 0 : jail_pool_size(c->dir);
	if (size) {
		int lock = open_lock(c->dir, LOCK_EX | LOCK_NB); /* busy: a filler is at work */

		if (lock >= 0)
			fill_locked(c->dir, size, true, NULL);
	}
	_exit(0);
}

int jail_pool_drain(const char *root, struct al_error **err)
{
	static const char *const subs[] = {"loopback", "link", "new"};
	char path[300];
	const char *name;
	int n = 0;
	DIR *d;

	root = pool_root(root);
	d = opendir(root);
	if (!d)
		return errno == ENOENT ? 0 : al_error_set(err, errno, "open '%s'", root);
	while ((name = next_entry(d))) {
		_cleanup_close_ int lock = -1;

		snprintf(path, sizeof(path), "%s/%s/size", root, name);
		unlink(path); /* off first: no refill starts from here on */
		snprintf(path, sizeof(path), "%s/%s", root, name);
		lock = open_lock(path, LOCK_EX); /* a filler at work finishes its entry */
		for (size_t i = 0; i < ARRAY_SIZE(subs); i++)
			n += sweep(path, subs[i], false);
		/* Claimed entries of live runs are theirs to release. */
		n += sweep(path, "claimed", true);
	}
	closedir(d);
	return n;
}

bool jail_pool_root_fits(const struct al_config *cfg, bool needs_ca)
{
	return jail_rootfs_is_default(cfg) && !needs_ca &&
	       (cfg->disk_bytes ? cfg->disk_bytes : JAIL_DISK_DEFAULT) == JAIL_DISK_DEFAULT;
}
