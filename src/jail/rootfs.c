/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's filesystem. Runs in the child as host root, in a private
 * mount namespace that the sandbox will not own.
 *
 * Layout (all on one tmpfs whose size is --disk, so everything the sandbox
 * can write shares one cap):
 *   /usr, /bin, /lib*, /sbin   the host runtime, bind-mounted read-only, nosuid, nodev
 *   /etc                       generated passwd, group, hosts, ...; a few safe host files
 *   /proc                      fresh, for the sandbox's pid namespace, sensitive entries masked
 *   /dev                       null zero full random urandom tty, devpts, shm
 *   /workspace /tmp /home/user /dev/shm   the only writable places
 * The root directory and everything in it but those are owned by host root,
 * a uid the sandbox's user namespace does not map: no uid or capability
 * inside can write them, and Landlock (security.c) refuses writes elsewhere too.
 */
#include "host/ca_bundle.h"
#include "jail/jail.h"
#include "common/cleanup.h"
#include "net/contract.h"
#include "common/xalloc.h"
#include "common/error.h"
#include "common/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define STAGE "/tmp" /* where the new root is built, inside our private mount namespace */
#define MAX_FILES AL_FILES_MAX

static int mount_err(struct al_error **err, const char *what, const char *dst)
{
	return al_error_set(err, errno, "mount %s on '%s'", what, dst);
}

/* A bind, nosuid, nodev, and read-only unless rw (an OCI container's writable root). */
static int bind_at(const char *src, const char *dst, bool rw, struct al_error **err)
{
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return mount_err(err, src, dst);
	if (mount(NULL, dst, NULL,
		  MS_REMOUNT | MS_BIND | (rw ? 0 : MS_RDONLY) | MS_NOSUID | MS_NODEV, NULL) < 0)
		return mount_err(err, rw ? "(nosuid remount)" : "(read-only remount)", dst);
	return 0;
}

static int bind_ro(const char *src, const char *dst, struct al_error **err)
{
	return bind_at(src, dst, false, err);
}

static int write_file(int root_fd, const char *path, const char *content, struct al_error **err)
{
	_cleanup_close_ int fd =
	    openat(root_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	size_t len = strlen(content);

	if (fd < 0)
		return al_error_set(err, errno, "create '/%s'", path);
	if (write(fd, content, len) != (ssize_t)len)
		return al_error_set(err, errno ? errno : EIO, "write '/%s'", path);
	return 0;
}

/* A host file, read-only, nosuid, nodev, on an empty file made for it (a 43 KB
 * ld.so.cache costs 11 us bound and ~50 us copied, and no tmpfs pages). */
static int bind_host_file(const char *src, int root_fd, const char *dst, bool rw,
			  struct al_error **err)
{
	char at[PATH_MAX];
	int fd = openat(root_fd, dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd < 0)
		return al_error_set(err, errno, "create '/%s'", dst);
	close(fd);
	snprintf(at, sizeof(at), STAGE "/%s", dst);
	return bind_at(src, at, rw, err);
}

/*
 * Bring one host path into the new root as what it is: a symlink is recreated,
 * a directory or a regular file is bind-mounted read-only (writable with rw: from an OCI
 * container's own overlay). A missing host path is skipped.
 */
static int import_host_entry(int root_fd, const char *host_path, const char *rel, bool rw,
			     struct al_error **err)
{
	char target[PATH_MAX], dst[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(host_path, &st) < 0)
		return 0;
	if (S_ISLNK(st.st_mode)) {
		n = readlink(host_path, target, sizeof(target) - 1);
		if (n < 0)
			return al_error_set(err, errno, "readlink '%s'", host_path);
		target[n] = '\0';
		if (symlinkat(target, root_fd, rel) < 0)
			return al_error_set(err, errno, "symlink '/%s'", rel);
		return 0;
	}
	if (S_ISREG(st.st_mode))
		return bind_host_file(host_path, root_fd, rel, rw, err);
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (mkdirat(root_fd, rel, 0755) < 0 && errno != EEXIST)
		return al_error_set(err, errno, "mkdir '/%s'", rel);
	snprintf(dst, sizeof(dst), STAGE "/%s", rel);
	return bind_at(host_path, dst, rw, err);
}

/* Whether the regular file at fd holds exactly content (len bytes, owned by root). */
static bool holds(int fd, const char *content, size_t len)
{
	char buf[1024];
	struct stat st;

	if (len > sizeof(buf) || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022) || (size_t)st.st_size != len)
		return false;
	return pread(fd, buf, sizeof(buf), 0) == (ssize_t)len && memcmp(buf, content, len) == 0;
}

/* The file of dir_fd (etc_shared) named by a hash of content, made if missing; its name in
 * name. -1 when there is none that holds exactly content (the caller writes a copy). */
static int shared_file(int dir_fd, const char *content, char *name, size_t cap)
{
	size_t len = strlen(content);
	char tmp[64];
	int fd;

	snprintf(name, cap, "%08x%08x", jail_fnv(2166136261u, content, len),
		 jail_fnv(0x9e3779b9u, content, len));
	fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		bool same = holds(fd, content, len);

		close(fd);
		return same ? 0 : -1;
	}
	if (errno != ENOENT)
		return -1;
	/* Written whole under a temporary name, then renamed: never seen half-written. */
	snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int)getpid());
	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (fchmod(fd, 0644) < 0 || write(fd, content, len) != (ssize_t)len) {
		close(fd);
		unlinkat(dir_fd, tmp, 0);
		return -1;
	}
	close(fd);
	if (renameat(dir_fd, tmp, dir_fd, name) < 0) {
		unlinkat(dir_fd, tmp, 0);
		return -1;
	}
	return 0;
}

/*
 * A generated /etc file that nothing changes after set-up and that is the same in every
 * sandbox (passwd, group, nsswitch.conf; hosts and hostname for the default hostname: a
 * fixed set, so the directory never grows with what tenants ask). With the daemon's
 * etc_shared directory (etc_fd >= 0) its content is kept there once, named by a hash of
 * it, and bound read-only, nosuid, nodev like a host file: no tmpfs page (4 KiB) per
 * sandbox and file (docs/performance.md, "Density"). A file there is used only if it holds
 * exactly this content; otherwise, or without the directory, the root gets its own copy.
 * resolv.conf is always the root's own: a gateway attached later rewrites it
 * (gateway_main.c, set_resolver).
 */
static int put_etc_file(int root_fd, int etc_fd, const char *path, const char *content,
			struct al_error **err)
{
	char name[32], src[64];

	if (etc_fd < 0 || shared_file(etc_fd, content, name, sizeof(name)) < 0)
		return write_file(root_fd, path, content, err);
	snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", etc_fd, name);
	return bind_host_file(src, root_fd, path, false, err);
}

static const char etc_passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
				 "user:x:1000:1000:user:" JAIL_HOME ":/bin/bash\n"
				 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n";
static const char etc_nsswitch[] = "passwd: files\ngroup: files\nshadow: files\n"
				   "hosts: files dns\nnetworks: files\nprotocols: files\n"
				   "services: files\n";
static const char etc_resolv[] = "# airlock: network policy deny-all (loopback only)\n";
static const char etc_resolv_gw[] =
    "# airlock: the sandbox's egress gateway\nnameserver 100.96.0.1\n";

/* The default runtime: the host's system directories, read-only, and a generated /etc. */
/* /etc/airlock: the sandbox CA (made only for per-request rules) and a bundle with it. */
/* The sandbox CA's place: /etc/airlock, or /run/airlock in an --image root (its /etc is the
 * image's, read-only). Made even without a CA: a daemon's gateway may install one later. */
static int build_ca(int root_fd, bool image, const char *ca_pem, struct al_error **err)
{
	_cleanup_free_ char *bundle = NULL;
	const char *cert = image ? NET_CA_IMAGE_CERT_PATH : NET_CA_CERT_PATH;
	const char *all = image ? NET_CA_IMAGE_BUNDLE_PATH : NET_CA_BUNDLE_PATH;

	if (image && mkdirat(root_fd, "run", 0755) < 0)
		return al_error_set(err, errno, "mkdir '/run'");
	if (mkdirat(root_fd, image ? "run/airlock" : "etc/airlock", 0755) < 0)
		return al_error_set(err, errno, "mkdir '%s'",
				    image ? "/run/airlock" : "/etc/airlock");
	if (!ca_pem)
		return 0;
	bundle = net_ca_bundle(ca_pem);
	if (write_file(root_fd, cert + 1, ca_pem, err) < 0 ||
	    write_file(root_fd, all + 1, bundle, err) < 0)
		return -1;
	return 0;
}

/* The host's top-level entries the runtime brings in besides /usr (as what they are). */
static const char *const host_top[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
/* Host /etc entries that are safe and that common tools need. Nothing else of /etc. */
static const char *const host_etc[] = {"ld.so.cache", "localtime", "ssl/certs", "alternatives",
				       "os-release"};

bool jail_rootfs_host_path(size_t i, char *buf, size_t len)
{
	if (i == 0)
		snprintf(buf, len, "/usr");
	else if (i <= ARRAY_SIZE(host_top))
		snprintf(buf, len, "/%s", host_top[i - 1]);
	else if (i <= ARRAY_SIZE(host_top) + ARRAY_SIZE(host_etc))
		snprintf(buf, len, "/etc/%s", host_etc[i - 1 - ARRAY_SIZE(host_top)]);
	else
		return false;
	return true;
}

static int build_host_runtime(int root_fd, int etc_fd, const char *hostname, bool net,
			      struct al_error **err)
{
	char host_path[PATH_MAX], rel[PATH_MAX], hosts[512];
	size_t i;
	/* hosts and hostname are shared only for the default name (put_etc_file). */
	int r, named_fd = strcmp(hostname, JAIL_HOSTNAME_DEFAULT) == 0 ? etc_fd : -1;

	if (mkdirat(root_fd, "usr", 0755) < 0)
		return al_error_set(err, errno, "mkdir '/usr'");
	r = bind_ro("/usr", STAGE "/usr", err);
	for (i = 0; r == 0 && i < ARRAY_SIZE(host_top); i++) {
		snprintf(host_path, sizeof(host_path), "/%s", host_top[i]);
		r = import_host_entry(root_fd, host_path, host_top[i], false, err);
	}
	if (r < 0)
		return r;
	if (mkdirat(root_fd, "etc", 0755) < 0 || mkdirat(root_fd, "etc/ssl", 0755) < 0)
		return al_error_set(err, errno, "mkdir '/etc'");
	snprintf(hosts, sizeof(hosts),
		 "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		 hostname);
	if (put_etc_file(root_fd, etc_fd, "etc/passwd", etc_passwd, err) < 0 ||
	    put_etc_file(root_fd, etc_fd, "etc/group", etc_group, err) < 0 ||
	    put_etc_file(root_fd, etc_fd, "etc/nsswitch.conf", etc_nsswitch, err) < 0 ||
	    write_file(root_fd, "etc/resolv.conf", net ? etc_resolv_gw : etc_resolv, err) < 0 ||
	    put_etc_file(root_fd, named_fd, "etc/hosts", hosts, err) < 0)
		return -1;
	snprintf(hosts, sizeof(hosts), "%s\n", hostname);
	if (put_etc_file(root_fd, named_fd, "etc/hostname", hosts, err) < 0)
		return -1;
	for (i = 0; i < ARRAY_SIZE(host_etc); i++) {
		snprintf(host_path, sizeof(host_path), "/etc/%s", host_etc[i]);
		snprintf(rel, sizeof(rel), "etc/%s", host_etc[i]);
		if (import_host_entry(root_fd, host_path, rel, false, err) < 0)
			return -1;
	}
	return 0;
}

/* --image DIR: every top-level entry of DIR, read-only (writable with rw: DIR is an OCI
 * container's overlay, oci_root.c); we provide /proc, /dev and the writable places
 * ourselves. The name of oci_root.c's scratch directory is never taken from an image. */
static int build_image(int root_fd, int image_fd, const char *image, bool rw, struct al_error **err)
{
	static const char *const ours[] = {"proc",	"dev",	"sys", "tmp",
					   "workspace", "home", "run", ".airlock-root"};
	_cleanup_closedir_ DIR *d = NULL;
	char src[PATH_MAX];
	struct dirent *de;
	size_t i;
	/* image_fd is O_PATH: reopen it for reading the directory. */
	int fd = openat(image_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return al_error_set(err, errno, "opendir image '%s'", image);
	}
	while ((errno = 0, de = readdir(d))) {
		bool skip = de->d_name[0] == '.' &&
			    (de->d_name[1] == '\0' || (de->d_name[1] == '.' && !de->d_name[2]));

		for (i = 0; !skip && i < ARRAY_SIZE(ours); i++)
			skip = strcmp(de->d_name, ours[i]) == 0;
		if (skip)
			continue;
		/* Through the fd, so the image path cannot be swapped under us. */
		snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", image_fd, de->d_name);
		if (import_host_entry(root_fd, src, de->d_name, rw, err) < 0)
			return al_error_wrap(err, "image '%s'", image);
	}
	if (errno)
		return al_error_set(err, errno, "readdir image '%s'", image);
	return 0;
}

/* A private devpts instance: the sandbox sees only its own PTYs. */
static int mount_devpts(const char *at, struct al_error **err)
{
	if (mount("devpts", at, "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		return mount_err(err, "devpts", at);
	return 0;
}

static int build_dev(int root_fd, bool devpts, struct al_error **err)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = {{"null", 1, 3},   {"zero", 1, 5},	  {"full", 1, 7},
		     {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
	static const struct {
		const char *name, *target;
	} links[] = {{"dev/ptmx", "pts/ptmx"},
		     {"dev/fd", "/proc/self/fd"},
		     {"dev/stdin", "/proc/self/fd/0"},
		     {"dev/stdout", "/proc/self/fd/1"},
		     {"dev/stderr", "/proc/self/fd/2"}};
	char path[64];
	size_t i;

	if (mkdirat(root_fd, "dev", 0755) < 0 || mkdirat(root_fd, "dev/pts", 0755) < 0 ||
	    mkdirat(root_fd, "dev/shm", 01777) < 0)
		return al_error_set(err, errno, "mkdir '/dev'");
	for (i = 0; i < ARRAY_SIZE(nodes); i++) {
		snprintf(path, sizeof(path), "dev/%s", nodes[i].name);
		if (mknodat(root_fd, path, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) < 0)
			return al_error_set(err, errno, "mknod '/%s'", path);
	}
	for (i = 0; i < ARRAY_SIZE(links); i++)
		if (symlinkat(links[i].target, root_fd, links[i].name) < 0)
			return al_error_set(err, errno, "symlink '/%s'", links[i].name);
	return devpts ? mount_devpts(STAGE "/dev/pts", err) : 0;
}

/* /proc for the sandbox's pid namespace; top is where the new root is now (STAGE before
 * pivot_root, "" after). */
static int build_proc(const char *top, struct al_error **err)
{
	/* Kernel state no sandbox needs: hidden behind /dev/null even though uid checks
	 * already refuse most of it (defence in depth). */
	static const char *const masked[] = {"kcore",	 "keys",      "timer_list", "sysrq-trigger",
					     "kallsyms", "config.gz", "sched_debug"};
	char path[64], null[64];
	size_t i;

	/* We are PID 1 of the sandbox's pid namespace: this proc shows only its processes. */
	snprintf(path, sizeof(path), "%s/proc", top);
	if (mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return mount_err(err, "proc", path);
	snprintf(null, sizeof(null), "%s/dev/null", top);
	for (i = 0; i < ARRAY_SIZE(masked); i++) {
		snprintf(path, sizeof(path), "%s/proc/%s", top, masked[i]);
		if (mount(null, path, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
			return mount_err(err, "/dev/null", path);
	}
	snprintf(path, sizeof(path), "%s/proc/sys", top);
	return bind_ro(path, path, err);
}

/* The writable places (or, in a template, where they will be mounted) and /proc's. */
static int build_writable(int root_fd, struct al_error **err)
{
	if (mkdirat(root_fd, "tmp", 01777) < 0 || mkdirat(root_fd, "workspace", 0755) < 0 ||
	    mkdirat(root_fd, "home", 0755) < 0 || mkdirat(root_fd, "home/user", 0755) < 0)
		return al_error_set(err, errno, "mkdir writable directories");
	if (mkdirat(root_fd, "proc", 0555) < 0)
		return al_error_set(err, errno, "mkdir '/proc'");
	return 0;
}

/* The sandbox user's own places, owned by it (host_base + uid: known only per sandbox). */
static int chown_writable(int root_fd, const struct jail_ctx *ctx, struct al_error **err)
{
	uid_t owner = ctx->host_base + ctx->uid;

	if (fchownat(root_fd, "workspace", owner, owner, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchownat(root_fd, "home/user", owner, owner, AT_SYMLINK_NOFOLLOW) < 0)
		return al_error_set(err, errno, "chown writable directories");
	return 0;
}

/* Open every --file source now: once the staging tmpfs is mounted, host /tmp is hidden. */
static int open_sources(const struct al_config *cfg, int *fds, struct al_error **err)
{
	size_t i;

	if (cfg->n_files > MAX_FILES)
		return al_error_set(err, E2BIG, "too many --file copies (max %d)", MAX_FILES);
	for (i = 0; i < cfg->n_files; i++) {
		fds[i] = open(cfg->files[i].src, O_PATH | O_CLOEXEC);
		if (fds[i] < 0)
			return al_error_set(err, errno, "--file source '%s'", cfg->files[i].src);
	}
	return 0;
}

static int copy_sources(int root_fd, const struct jail_ctx *ctx, const int *fds,
			const char *workdir, struct al_error **err)
{
	const struct al_config *cfg = ctx->cfg;
	uid_t owner = ctx->host_base + ctx->uid;
	char dst[PATH_MAX];
	size_t i;

	for (i = 0; i < cfg->n_files; i++) {
		const char *d = cfg->files[i].dst;

		int n = d[0] == '/' ? snprintf(dst, sizeof(dst), "%s", d)
				    : snprintf(dst, sizeof(dst), "%s/%s", workdir, d);

		_cleanup_free_ char *norm = NULL;

		if (n < 0 || (size_t)n >= sizeof(dst))
			return al_error_msg(err, ENAMETOOLONG, "--file destination '%.64s...'", d);
		if (al_path_normalize(dst, "--file destination", &norm, err) < 0 ||
		    jail_copy_in(fds[i], cfg->files[i].src, root_fd, norm, owner, owner, err) < 0)
			return -1;
	}
	return 0;
}

/* pivot_root into the staging tmpfs and detach the host's root (never reachable again). */
static int enter_root(const char *workdir, struct al_error **err)
{
	if (chdir(STAGE) < 0)
		return al_error_set(err, errno, "chdir '%s'", STAGE);
	if (sys_pivot_root(".", ".") < 0)
		return al_error_set(err, errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return al_error_set(err, errno, "umount2 old root");
	if (chdir(workdir) < 0)
		return al_error_set(err, errno, "chdir '%s'", workdir);
	return 0;
}

/* The mount options of the tmpfs that holds everything the sandbox writes: --disk. */
static void disk_opts(const struct al_config *cfg, char *buf, size_t len)
{
	uint64_t disk = cfg->disk_bytes ? cfg->disk_bytes : JAIL_DISK_DEFAULT;
	uint64_t inodes = disk / 4096 < 16384 ? 16384 : disk / 4096;

	snprintf(buf, len, "size=%llu,nr_inodes=%llu,mode=0755", (unsigned long long)disk,
		 (unsigned long long)inodes);
}

/* The image's entries: read-only, or from an OCI container's overlay (oci_root.c), whose
 * scratch directory is detached again once they are bound. */
static int build_image_root(const struct jail_ctx *ctx, int root_fd, int image_fd,
			    const struct jail_oci_root *layers, struct al_error **err)
{
	_cleanup_close_ int merged = -1;

	if (!ctx->oci || !ctx->oci->writable_root)
		return build_image(root_fd, image_fd, ctx->cfg->image, false, err);
	if (jail_oci_root_overlay(ctx, STAGE, root_fd, layers, &merged, err) < 0 ||
	    build_image(root_fd, merged, ctx->cfg->image, true, err) < 0)
		return -1;
	al_closep(&merged);
	return jail_oci_root_hide(STAGE, root_fd, err);
}

/* The staging tmpfs at STAGE with everything that depends neither on the sandbox's pid
 * namespace nor on its owner: the runtime (or the image), /etc, the CA's place, the
 * writable directories, /dev. */
static int build_stage(const struct jail_ctx *ctx, int image_fd, const struct jail_oci_root *layers,
		       int *root_fd, struct al_error **err)
{
	const struct al_config *cfg = ctx->cfg;
	/* Opened before the stage hides host /tmp (where a state directory may lie). */
	_cleanup_close_ int etc_fd =
	    ctx->etc_shared && !cfg->image
		? open(ctx->etc_shared, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
		: -1;
	char opts[128];
	int r;

	disk_opts(cfg, opts, sizeof(opts));
	if (mount("airlock", STAGE, "tmpfs", MS_NOSUID, opts) < 0)
		return mount_err(err, "tmpfs", STAGE);
	if ((*root_fd = open(STAGE, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return al_error_set(err, errno, "open '%s'", STAGE);
	r = cfg->image ? build_image_root(ctx, *root_fd, image_fd, layers, err)
		       : build_host_runtime(*root_fd, etc_fd,
					    cfg->hostname ? cfg->hostname : JAIL_HOSTNAME_DEFAULT,
					    ctx->net_link, err);
	if (r == 0)
		r = build_ca(*root_fd, cfg->image != NULL, ctx->ca_pem, err);
	if (r == 0)
		r = build_writable(*root_fd, err);
	if (r == 0)
		r = build_dev(*root_fd, true, err);
	return r;
}

bool jail_rootfs_can_ahead(const struct al_config *cfg)
{
	return !cfg->image && cfg->n_files == 0 &&
	       (!cfg->workdir || strcmp(cfg->workdir, "/workspace") == 0);
}

bool jail_rootfs_is_default(const struct al_config *cfg)
{
	return jail_rootfs_can_ahead(cfg) &&
	       (!cfg->hostname || strcmp(cfg->hostname, JAIL_HOSTNAME_DEFAULT) == 0);
}

/* Undo an unshare(CLONE_NEWNS): back to the namespace `home`, the cwd `cwd`. */
static int go_home(int home, int cwd, mode_t old_umask, struct al_error **err)
{
	umask(old_umask);
	if (setns(home, CLONE_NEWNS) < 0) {
		al_error_set(err, errno, "setns back from a new mount namespace");
		return JAIL_NS_STRANDED;
	}
	if (cwd >= 0 && fchdir(cwd) < 0) {
		al_error_set(err, errno, "fchdir back from a new mount namespace");
		return JAIL_NS_STRANDED;
	}
	return 0;
}

int jail_rootfs_ahead(const struct jail_ctx *ctx, int *out, struct al_error **err)
{
	_cleanup_close_ int home = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int root_fd = -1;
	mode_t old_umask;
	int fd = -1, r = 0, back;

	*out = -1;
	if (!jail_rootfs_can_ahead(ctx->cfg))
		return al_error_msg(err, EINVAL, "this root cannot be made ahead");
	if (home < 0)
		return al_error_set(err, errno, "open this thread's mount namespace");
	if (unshare(CLONE_NEWNS) < 0)
		return al_error_set(err, errno, "unshare(CLONE_NEWNS)");
	old_umask = umask(0);
	/* Opened now: once the host's root is detached there is no /proc to open it from. */
	fd = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		r = al_error_set(err, errno, "open the new mount namespace");
	if (r == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		r = mount_err(err, "(make-rprivate)", "/");
	if (r == 0)
		r = build_stage(ctx, -1, NULL, &root_fd, err);
	if (r == 0)
		r = enter_root("/", err);
	back = go_home(home, cwd, old_umask, r < 0 ? NULL : err);
	if (r < 0 || back < 0) {
		if (fd >= 0)
			close(fd);
		return back < 0 ? back : al_error_wrap(err, "making a sandbox root ahead");
	}
	*out = fd;
	return 0;
}

/* The end of a root joined (made ahead, or a template's copy): /proc, the workdir. */
static int finish_joined(int r, struct al_error **err)
{
	if (r == 0)
		r = build_proc("", err);
	if (r == 0 && chdir("/workspace") < 0)
		r = al_error_set(err, errno, "chdir '/workspace'");
	umask(022);
	return r < 0 ? al_error_wrap(err, "finishing the sandbox filesystem") : 0;
}

int jail_rootfs_enter_ahead(struct jail_ctx *ctx, int mntns_fd, struct al_error **err)
{
	_cleanup_close_ int root_fd = -1;
	int r = 0;

	/* Our root and cwd become that namespace's root: the sandbox's, already pivoted. */
	if (setns(mntns_fd, CLONE_NEWNS) < 0)
		return al_error_set(err, errno, "setns to the sandbox root made ahead");
	umask(0);
	root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		r = al_error_set(err, errno, "open the sandbox root");
	if (r == 0)
		r = chown_writable(root_fd, ctx, err);
	return finish_joined(r, err);
}

int jail_rootfs_build(struct jail_ctx *ctx, struct al_error **err)
{
	const struct al_config *cfg = ctx->cfg;
	const char *workdir = cfg->workdir ? cfg->workdir : "/workspace";
	int src_fds[MAX_FILES], oci_fds[JAIL_OCI_MOUNTS_MAX];
	struct jail_oci_root layers = {.n = 0};
	_cleanup_close_ int image_fd = -1, root_fd = -1, wd_fd = -1;
	size_t i;
	int r;

	umask(0);
	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return mount_err(err, "(make-rprivate)", "/");
	if (cfg->image) {
		image_fd = open(cfg->image, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (image_fd < 0)
			return al_error_set(err, errno, "--image '%s'", cfg->image);
	}
	for (i = 0; i < MAX_FILES; i++)
		src_fds[i] = -1;
	for (i = 0; i < JAIL_OCI_MOUNTS_MAX; i++)
		oci_fds[i] = -1;
	r = open_sources(cfg, src_fds, err);
	if (r == 0) /* an OCI container's bind sources (oci_mounts.c), before /tmp is hidden */
		r = jail_oci_mounts_open(ctx, oci_fds, err);
	if (r == 0) /* an OCI container's writable root: the image's layers, idmapped */
		r = jail_oci_root_open(ctx, image_fd, &layers, err);
	if (r == 0)
		r = build_stage(ctx, image_fd, &layers, &root_fd, err);
	jail_oci_root_close(&layers);
	if (r == 0)
		r = chown_writable(root_fd, ctx, err);
	/* /proc is mounted after the workdir is made: it would hide it. */
	if (r == 0 && al_path_is_under(workdir, "/proc"))
		r = al_error_msg(err, EEXIST, "workdir '%s': the sandbox's /proc goes there",
				 workdir);
	if (r == 0 && strcmp(workdir, "/workspace") != 0) {
		wd_fd = jail_mkdir_p(root_fd, workdir, ctx->host_base + ctx->uid, err);
		r = wd_fd < 0 ? -1 : 0;
	}
	if (r == 0)
		r = copy_sources(root_fd, ctx, src_fds, workdir, err);
	if (r == 0) /* an OCI container's own binds and tmpfs */
		r = jail_oci_mounts(root_fd, ctx, oci_fds, err);
	for (i = 0; i < MAX_FILES; i++)
		if (src_fds[i] >= 0)
			close(src_fds[i]);
	for (i = 0; i < JAIL_OCI_MOUNTS_MAX; i++)
		al_closep(&oci_fds[i]);
	if (r == 0)
		r = build_proc(STAGE, err);
	if (r == 0) /* an OCI container's maskedPaths and readonlyPaths in /proc, beyond ours */
		r = jail_oci_proc_paths(STAGE, ctx, err);
	if (r == 0)
		r = enter_root(workdir, err);
	umask(022);
	return r < 0 ? al_error_wrap(err, "building the sandbox filesystem") : 0;
}

/*
 * Templates (template.c keeps them): in a process of its own, single-threaded, host root,
 * which stays in the namespace it makes. Its root is what every default one-shot's root
 * has in common: the runtime, /etc for the default hostname and this network variant,
 * /etc/airlock (empty), /dev's nodes, and the empty places of /tmp, /workspace,
 * /home/user, /dev/shm, /dev/pts and /proc. No devpts, no proc: those are per sandbox.
 * The superblock ends read-only, so no copy of it can be written by anyone.
 */
int jail_rootfs_template_make(bool net_link, struct al_error **err)
{
	_cleanup_close_ int root_fd = -1;
	int r = 0;

	umask(0);
	if (unshare(CLONE_NEWNS) < 0)
		return al_error_set(err, errno, "unshare(CLONE_NEWNS)");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return mount_err(err, "(make-rprivate)", "/");
	if (mount("airlock-template", STAGE, "tmpfs", MS_NOSUID,
		  "size=1m,nr_inodes=1024,mode=0755") < 0)
		return mount_err(err, "tmpfs", STAGE);
	if ((root_fd = open(STAGE, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return al_error_set(err, errno, "open '%s'", STAGE);
	r = build_host_runtime(root_fd, -1, JAIL_HOSTNAME_DEFAULT, net_link, err);
	if (r == 0)
		r = build_ca(root_fd, false, NULL, err);
	if (r == 0)
		r = build_writable(root_fd, err);
	if (r == 0)
		r = build_dev(root_fd, false, err);
	if (r == 0)
		r = enter_root("/", err);
	/* The superblock read-only (MS_NOSUID again: a remount sets the mount's flags too). */
	if (r == 0 && mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID, NULL) < 0)
		r = mount_err(err, "(read-only remount)", "/");
	return r < 0 ? al_error_wrap(err, "making a root template") : 0;
}

/*
 * In the child instead of jail_rootfs_build: a private copy of the template's namespace,
 * then what is the sandbox's own. One tmpfs (its size is --disk, as the classic root's)
 * is mounted on /proc for a moment: its four directories are bound to /tmp, /workspace,
 * /home/user and /dev/shm, and the tmpfs itself detached, so it is reachable only
 * through them. Then a devpts instance, /proc and its masks.
 */
int jail_rootfs_enter_template(struct jail_ctx *ctx, int mntns_fd, struct al_error **err)
{
	static const struct {
		const char *dir, *at;
		mode_t mode;
		bool owned; /* by the sandbox user */
	} places[] = {{"/proc/tmp", "/tmp", 01777, false},
		      {"/proc/workspace", "/workspace", 0755, true},
		      {"/proc/home", JAIL_HOME, 0755, true},
		      {"/proc/shm", "/dev/shm", 01777, false}};
	uid_t owner = ctx->host_base + ctx->uid;
	char opts[128];
	size_t i;
	int r = 0;

	if (setns(mntns_fd, CLONE_NEWNS) < 0)
		return al_error_set(err, errno, "setns to the root template");
	/* From here on a copy: nothing below reaches the template or another sandbox. */
	if (unshare(CLONE_NEWNS) < 0)
		return al_error_set(err, errno, "unshare(CLONE_NEWNS) from the root template");
	umask(0);
	disk_opts(ctx->cfg, opts, sizeof(opts));
	if (mount("airlock", "/proc", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		r = mount_err(err, "tmpfs", "/proc");
	for (i = 0; r == 0 && i < ARRAY_SIZE(places); i++) {
		if (mkdir(places[i].dir, places[i].mode) < 0)
			r = al_error_set(err, errno, "mkdir '%s'", places[i].dir);
		else if (places[i].owned && lchown(places[i].dir, owner, owner) < 0)
			r = al_error_set(err, errno, "chown '%s'", places[i].dir);
		else if (mount(places[i].dir, places[i].at, NULL, MS_BIND, NULL) < 0)
			r = mount_err(err, places[i].dir, places[i].at);
	}
	if (r == 0 && umount2("/proc", MNT_DETACH) < 0)
		r = al_error_set(err, errno, "detach the writable tmpfs from '/proc'");
	if (r == 0)
		r = mount_devpts("/dev/pts", err);
	return finish_joined(r, err);
}
