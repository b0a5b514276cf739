/* SPDX-License-Identifier: MIT */
/*
 * The workload's last steps before exec, in this order:
 *   1. drop privileges: uid/gid, capabilities (bounding, ambient, effective)
 *   2. no_new_privs (required by Landlock and seccomp for unprivileged callers)
 *   3. Landlock: writes only in the writable places, no signals or abstract
 *      sockets outside the sandbox's own domain
 *   4. seccomp: the precompiled filter (tools/gen_seccomp.c); last, so the
 *      steps above may use any syscall
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail_seccomp_bpf.h"

/* Capabilities kept with --root (uid 0 inside): enough to own and chmod the sandbox's own
 * files and to switch uid inside, nothing over any namespace or the host. */
static const int root_caps[] = {CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID,
				CAP_KILL,  CAP_SETGID,	     CAP_SETUID, CAP_NET_BIND_SERVICE};

static int last_cap(void)
{
	char buf[16] = {0};
	_cleanup_close_ int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0)
		return atoi(buf);
	return 63;
}

static bool kept(int cap, bool root)
{
	size_t i;

	for (i = 0; root && i < ARRAY_SIZE(root_caps); i++)
		if (root_caps[i] == cap)
			return true;
	return false;
}

int jail_bset_limit(struct al_error **err)
{
	int last = last_cap();

	for (int cap = 0; cap <= last; cap++)
		if (!kept(cap, true) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return al_error_set(err, errno, "PR_CAPBSET_DROP %d", cap);
	return 0;
}

int jail_drop_privileges(const struct jail_ctx *ctx, struct al_error **err)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	bool root = ctx->uid == 0;
	uid_t id = ctx->uid;
	gid_t gid = ctx->oci ? ctx->oci->gid : id;
	size_t n_groups = ctx->oci ? ctx->oci->n_groups : 0;
	uint64_t granted = ctx->oci ? ctx->oci->caps : ~0ULL;
	size_t i;

	/* The bounding set: at most root_caps (once, ahead, when ctx->prepared), and empty
	 * for the sandbox user. */
	if (!ctx->prepared && jail_bset_limit(err) < 0)
		return -1;
	for (i = 0; i < ARRAY_SIZE(root_caps); i++)
		if ((!root || !(granted & (1ULL << root_caps[i]))) &&
		    prctl(PR_CAPBSET_DROP, root_caps[i], 0, 0, 0) < 0 && errno != EINVAL)
			return al_error_set(err, errno, "PR_CAPBSET_DROP %d", root_caps[i]);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return al_error_set(err, errno, "PR_CAP_AMBIENT_CLEAR_ALL");
	/* An OCI container's supplementary gids are ids of its own namespace's range. */
	if (setgroups(n_groups, n_groups ? ctx->oci->groups : NULL) < 0 ||
	    setresgid(gid, gid, gid) < 0 || setresuid(id, id, id) < 0)
		return al_error_set(err, errno, "setresuid(%u)", (unsigned)id);
	/* Effective, permitted, inheritable: exactly the kept set (empty for uid 1000); an OCI
	 * container's is cut to what its config grants, never widened. */
	memset(data, 0, sizeof(data));
	for (i = 0; root && i < ARRAY_SIZE(root_caps); i++) {
		if (!(granted & (1ULL << root_caps[i])))
			continue;
		data[root_caps[i] / 32].effective |= 1u << (root_caps[i] % 32);
		data[root_caps[i] / 32].permitted |= 1u << (root_caps[i] % 32);
	}
	if (syscall(SYS_capset, &hdr, data) < 0)
		return al_error_set(err, errno, "capset");
	return 0;
}

#define FILE_RIGHTS                                                                                \
	(AL_LL_FS_EXECUTE | AL_LL_FS_WRITE_FILE | AL_LL_FS_READ_FILE | AL_LL_FS_TRUNCATE |         \
	 AL_LL_FS_IOCTL_DEV)

/* Landlock ABI version -> the filesystem rights it knows. */
static uint64_t fs_rights_for(int abi)
{
	uint64_t r = (AL_LL_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */

	if (abi >= 2)
		r |= AL_LL_FS_REFER;
	if (abi >= 3)
		r |= AL_LL_FS_TRUNCATE;
	if (abi >= 5)
		r |= AL_LL_FS_IOCTL_DEV;
	return r;
}

static int add_path(int ruleset, const char *path, uint64_t access, struct al_error **err)
{
	struct al_landlock_path_beneath_attr pb = {.allowed_access = access};
	struct stat st;
	_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : al_error_set(err, errno, "landlock: open '%s'", path);
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		access &= FILE_RIGHTS; /* the kernel refuses directory rights on a file */
	pb.allowed_access = access;
	pb.parent_fd = fd;
	if (sys_landlock_add_rule(ruleset, AL_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return al_error_set(err, errno, "landlock_add_rule '%s'", path);
	return 0;
}

/* Every filesystem right the running kernel's Landlock knows. */
static uint64_t landlock_all(void)
{
	int abi = sys_landlock_create_ruleset(NULL, 0, AL_LANDLOCK_CREATE_RULESET_VERSION);

	return fs_rights_for(abi < 0 ? 1 : abi);
}

int jail_landlock_build(const char *wd, int *fd_out, struct al_error **err)
{
	static const char *const writable[] = {"/workspace", "/tmp", JAIL_HOME, "/dev/shm"};
	static const char *const devices[] = {"/dev/null",   "/dev/zero",    "/dev/full",
					      "/dev/random", "/dev/urandom", "/dev/tty",
					      "/dev/pts"};
	struct al_landlock_ruleset_attr attr = {0};
	_cleanup_close_ int rs = -1;
	uint64_t all, read_exec, dev;
	size_t size = sizeof(attr);
	int abi;
	size_t i;

	*fd_out = -1;
	abi = sys_landlock_create_ruleset(NULL, 0, AL_LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0) {
		if (errno == ENOSYS || errno == EOPNOTSUPP)
			return 0; /* no Landlock: DAC and the unmapped owner protect it */
		return al_error_set(err, errno, "landlock_create_ruleset(version)");
	}
	all = fs_rights_for(abi);
	read_exec = AL_LL_FS_EXECUTE | AL_LL_FS_READ_FILE | AL_LL_FS_READ_DIR;
	dev = read_exec | AL_LL_FS_WRITE_FILE | (all & (AL_LL_FS_IOCTL_DEV | AL_LL_FS_TRUNCATE));
	attr.handled_access_fs = all;
	if (abi >= 6)
		attr.scoped = AL_LL_SCOPE_ABSTRACT_UNIX_SOCKET | AL_LL_SCOPE_SIGNAL;
	else
		size = offsetof(struct al_landlock_ruleset_attr, scoped);
	rs = sys_landlock_create_ruleset(&attr, size, 0); /* always close-on-exec */
	if (rs < 0)
		return al_error_set(err, errno, "landlock_create_ruleset");
	if (add_path(rs, "/", read_exec, err) < 0)
		return -1;
	for (i = 0; i < ARRAY_SIZE(writable); i++)
		if (add_path(rs, writable[i], all, err) < 0)
			return -1;
	if (wd && add_path(rs, wd, all, err) < 0)
		return -1;
	for (i = 0; i < ARRAY_SIZE(devices); i++)
		if (add_path(rs, devices[i], dev, err) < 0)
			return -1;
	*fd_out = TAKE_FD(rs);
	return 0;
}

int jail_landlock_restrict(int ruleset, struct al_error **err)
{
	if (ruleset < 0)
		return 0; /* no Landlock on this kernel */
	if (sys_landlock_restrict_self(ruleset, 0) < 0)
		return al_error_set(err, errno, "landlock_restrict_self");
	return 0;
}

/* An OCI container's writable root (oci_root.c): every top-level directory of it but /proc,
 * /sys and /dev (whose writable parts are in the base rules). */
static int add_root_dirs(int rs, struct al_error **err)
{
	_cleanup_closedir_ DIR *d = opendir("/");
	struct dirent *de;
	char path[PATH_MAX];

	if (!d)
		return al_error_set(err, errno, "landlock: opendir '/'");
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    strcmp(de->d_name, "proc") == 0 || strcmp(de->d_name, "sys") == 0 ||
		    strcmp(de->d_name, "dev") == 0)
			continue;
		snprintf(path, sizeof(path), "/%s", de->d_name);
		if (add_path(rs, path, landlock_all(), err) < 0)
			return -1;
	}
	return 0;
}

int jail_landlock_apply(const struct jail_ctx *ctx, struct al_error **err)
{
	_cleanup_close_ int rs = -1;

	if (jail_landlock_build(ctx->workdir ? ctx->workdir : ctx->cfg->workdir, &rs, err) < 0)
		return -1;
	/* An OCI container's writable mounts (binds and tmpfs its config asks for). */
	for (size_t i = 0; rs >= 0 && ctx->oci && i < ctx->oci->n_mounts; i++)
		if (!ctx->oci->mounts[i].rdonly &&
		    add_path(rs, ctx->oci->mounts[i].dst, landlock_all(), err) < 0)
			return -1;
	if (rs >= 0 && ctx->oci && ctx->oci->writable_root && add_root_dirs(rs, err) < 0)
		return -1;
	return jail_landlock_restrict(rs, err);
}

int jail_seccomp_install(struct al_error **err)
{
	struct sock_fprog prog = {
	    .len = ARRAY_SIZE(jail_seccomp_insns),
	    .filter = (struct sock_filter *)jail_seccomp_insns,
	};

	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return al_error_set(err, errno, "seccomp(SET_MODE_FILTER)");
	return 0;
}

int jail_seccomp_install_extra(const void *prog, struct al_error **err)
{
	/* In addition to ours, never instead: the kernel runs every filter installed and takes
	 * the most restrictive answer. */
	if (prog && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
		return al_error_set(err, errno,
				    "seccomp(SET_MODE_FILTER) of the container's filter");
	return 0;
}
