/* SPDX-License-Identifier: MIT */
/*
 * config.json, as far as it is safe (docs/oci.md has the table): what a container asks for
 * becomes the jail's settings; what would weaken the jail is refused, naming the field.
 * Our own protections are not settings: a user namespace with an unprivileged id range,
 * no_new_privs, our seccomp floor, Landlock, no host device.
 */
#include "oci/oci.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/path.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Destinations the jail itself provides: the config's mount there is ours already. */
static const char *const provided[] = {"/proc",	      "/dev", "/dev/pts",      "/dev/shm",
				       "/dev/mqueue", "/sys", "/sys/fs/cgroup"};

static const char *const cap_names[] = {
    "CAP_CHOWN",	   "CAP_DAC_OVERRIDE",	  "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",	   "CAP_FSETID",	  "CAP_KILL",
    "CAP_SETGID",	   "CAP_SETUID",	  "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE"};

static const char **string_array(json_t *a, const char *what, struct al_error **err)
{
	size_t i, n = json_array_size(a);
	const char **v;

	if (a && !json_is_array(a))
		return al_error_msg(err, EINVAL, "config.json: %s is not an array", what), NULL;
	v = xzalloc((n + 1) * sizeof(*v));
	for (i = 0; i < n; i++) {
		v[i] = json_string_value(json_array_get(a, i));
		if (!v[i]) {
			free(v);
			al_error_msg(err, EINVAL, "config.json: %s[%zu] is not a string", what, i);
			return NULL;
		}
	}
	return v;
}

/* The capability set the process may have: the union of what it lists (we keep at most
 * ours, security.c). */
static uint64_t caps_of(json_t *caps)
{
	static const char *const sets[] = {"bounding", "effective", "permitted"};
	uint64_t m = 0;
	json_t *v;
	size_t k, i;

	if (!caps)
		return 0;
	for (k = 0; k < ARRAY_SIZE(sets); k++) {
		json_t *a = json_object_get(caps, sets[k]);

		json_array_foreach(a, i, v) for (size_t c = 0; c < ARRAY_SIZE(cap_names);
						 c++) if (json_is_string(v) &&
							  strcmp(json_string_value(v),
								 cap_names[c]) == 0) m |= 1ULL << c;
	}
	return m;
}

/* process.rlimits, by name; each only lowers what the sandbox has (src/jail/init.c). */
static int rlimits(json_t *a, struct oci_config *c, struct al_error **err)
{
	static const struct {
		const char *name;
		int resource;
	} names[] = {{"RLIMIT_AS", RLIMIT_AS},
		     {"RLIMIT_CORE", RLIMIT_CORE},
		     {"RLIMIT_CPU", RLIMIT_CPU},
		     {"RLIMIT_DATA", RLIMIT_DATA},
		     {"RLIMIT_FSIZE", RLIMIT_FSIZE},
		     {"RLIMIT_LOCKS", RLIMIT_LOCKS},
		     {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
		     {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
		     {"RLIMIT_NICE", RLIMIT_NICE},
		     {"RLIMIT_NOFILE", RLIMIT_NOFILE},
		     {"RLIMIT_NPROC", RLIMIT_NPROC},
		     {"RLIMIT_RSS", RLIMIT_RSS},
		     {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
		     {"RLIMIT_RTTIME", RLIMIT_RTTIME},
		     {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
		     {"RLIMIT_STACK", RLIMIT_STACK}};
	size_t i, k;
	json_t *r;

	c->oci.n_rlimits = 0;
	json_array_foreach(a, i, r)
	{
		const char *t = json_string_value(json_object_get(r, "type"));

		for (k = 0; t && k < ARRAY_SIZE(names); k++)
			if (strcmp(t, names[k].name) == 0)
				break;
		if (!t || k == ARRAY_SIZE(names) || c->oci.n_rlimits >= ARRAY_SIZE(c->rlimits))
			return al_error_msg(err, EINVAL, "config.json: process.rlimits[%zu]", i);
		c->rlimits[c->oci.n_rlimits++] = (struct jail_rlimit){
		    .resource = names[k].resource,
		    .soft = (uint64_t)json_integer_value(json_object_get(r, "soft")),
		    .hard = (uint64_t)json_integer_value(json_object_get(r, "hard"))};
	}
	c->oci.rlimits = c->rlimits;
	return 0;
}

int oci_config_process(json_t *proc, struct oci_config *c, struct al_error **err)
{
	json_t *user = json_object_get(proc, "user"), *gids;
	json_t *uid = json_object_get(user, "uid"), *gid = json_object_get(user, "gid"), *v;
	size_t i;

	if (!json_is_object(proc))
		return al_error_msg(err, EINVAL, "config.json: no process object");
	free(c->argv);
	free(c->envp);
	c->argv = string_array(json_object_get(proc, "args"), "process.args", err);
	if (!c->argv)
		return -1;
	c->envp = string_array(json_object_get(proc, "env"), "process.env", err);
	if (!c->envp)
		return -1;
	c->cfg.argv = (char *const *)c->argv;
	if (!c->argv[0] || !c->argv[0][0])
		return al_error_msg(err, EINVAL, "config.json: process.args is empty");
	c->cwd = json_string_value(json_object_get(proc, "cwd"));
	if (!c->cwd || c->cwd[0] != '/')
		return al_error_msg(err, EINVAL, "config.json: process.cwd must be absolute");
	if ((uid && !json_is_integer(uid)) || json_integer_value(uid) < 0 ||
	    json_integer_value(uid) >= JAIL_UID_RANGE || json_integer_value(gid) < 0 ||
	    json_integer_value(gid) >= JAIL_UID_RANGE)
		return al_error_msg(err, EINVAL,
				    "config.json: process.user uid and gid must be 0..%u (the "
				    "container's id range)",
				    JAIL_UID_RANGE - 1);
	c->uid = (uid_t)json_integer_value(uid);
	c->oci.gid = (gid_t)json_integer_value(gid);
	gids = json_object_get(user, "additionalGids");
	c->oci.n_groups = 0;
	json_array_foreach(gids, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= JAIL_UID_RANGE || i >= ARRAY_SIZE(c->groups))
			return al_error_msg(err, EINVAL,
					    "config.json: process.user.additionalGids[%zu]", i);
		c->groups[c->oci.n_groups++] = (gid_t)json_integer_value(v);
	}
	c->oci.groups = c->groups;
	if (rlimits(json_object_get(proc, "rlimits"), c, err) < 0)
		return -1;
	c->cfg.tty = json_is_true(json_object_get(proc, "terminal"));
	c->oci.caps = caps_of(json_object_get(proc, "capabilities"));
	c->cfg.root = c->uid == 0;
	return 0;
}

int oci_config_resources(json_t *res, struct al_config *cfg, struct al_error **err)
{
	json_t *mem = json_object_get(json_object_get(res, "memory"), "limit");
	json_t *pids = json_object_get(json_object_get(res, "pids"), "limit");
	json_t *cpu = json_object_get(res, "cpu");
	json_int_t quota = json_integer_value(json_object_get(cpu, "quota"));
	json_int_t period = json_integer_value(json_object_get(cpu, "period"));

	if (json_is_integer(mem) && json_integer_value(mem) > 0)
		cfg->memory_bytes = (uint64_t)json_integer_value(mem);
	if (json_is_integer(pids) && json_integer_value(pids) > 0) {
		if (json_integer_value(pids) > AL_PIDS_MAX)
			return al_error_msg(err, EINVAL, "linux.resources.pids.limit is too large");
		cfg->pids = (uint32_t)json_integer_value(pids);
	}
	if (quota > 0)
		cfg->cpus = (double)quota / (double)(period > 0 ? period : 100000);
	return 0;
}

static bool has_option(json_t *opts, const char *o)
{
	size_t i;
	json_t *v;

	json_array_foreach(opts, i, v) if (json_is_string(v) &&
					   strcmp(json_string_value(v), o) == 0) return true;
	return false;
}

/* One entry of config.json's mounts: ours already, a bind, a tmpfs, or refused. */
static int one_mount(json_t *m, size_t i, struct oci_config *c, struct al_error **err)
{
	const char *dst = json_string_value(json_object_get(m, "destination"));
	const char *type = json_string_value(json_object_get(m, "type"));
	const char *src = json_string_value(json_object_get(m, "source"));
	json_t *opts = json_object_get(m, "options");
	struct jail_mount *jm;
	_cleanup_close_ int fd = -1;
	struct stat st;
	bool bind = has_option(opts, "bind") || has_option(opts, "rbind") ||
		    (type && strcmp(type, "bind") == 0);

	if (!dst || dst[0] != '/')
		return al_error_msg(err, EINVAL,
				    "config.json: mounts[%zu] has no absolute destination", i);
	for (size_t k = 0; k < ARRAY_SIZE(provided); k++)
		if (strcmp(dst, provided[k]) == 0)
			return 0; /* the jail's own (docs/oci.md) */
	if (al_path_in_pseudo_fs(dst) && strcmp(dst, "/dev/termination-log") != 0)
		return al_error_msg(
		    err, EPERM, "mount on '%s' refused: /proc, /sys and /dev are the sandbox's own",
		    dst);
	if (c->oci.n_mounts >= JAIL_OCI_MOUNTS_MAX)
		return al_error_msg(err, E2BIG, "config.json: more than %d mounts",
				    JAIL_OCI_MOUNTS_MAX);
	jm = &c->mounts[c->oci.n_mounts];
	*jm = (struct jail_mount){
	    .dst = dst, .dir = true, .rdonly = has_option(opts, "ro"), .tmpfs_size = 64u << 20};
	if (!bind && type && strcmp(type, "tmpfs") == 0) {
		c->oci.n_mounts++;
		return 0;
	}
	if (!bind)
		return al_error_msg(err, EPERM,
				    "mount on '%s' of type '%s' refused (only bind and "
				    "tmpfs are, docs/oci.md)",
				    dst, type ? type : "(none)");
	fd = src ? open(src, O_PATH | O_CLOEXEC) : -1;
	if (fd < 0 || fstat(fd, &st) < 0)
		return al_error_set(err, errno, "bind mount on '%s': source '%s'", dst,
				    src ? src : "(none)");
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return al_error_msg(err, EPERM,
				    "bind mount of '%s' on '%s' refused: not a file or directory "
				    "(no host device, socket or FIFO enters a sandbox)",
				    src, dst);
	if (jail_kernel_fs(fd))
		return al_error_msg(
		    err, EPERM,
		    "bind mount of '%s' on '%s' refused: a kernel filesystem (proc, "
		    "sysfs, cgroup, ...) would show the host's",
		    src, dst);
	jm->src = src;
	jm->recursive = has_option(opts, "rbind");
	c->oci.n_mounts++;
	jm->dir = S_ISDIR(st.st_mode);
	return 0;
}

/* linux.namespaces: ours are always new, but a pod's network, IPC and UTS namespaces may
 * be joined by path; the host's own never (that would be no namespace at all). */
static int namespaces(json_t *nss, struct oci_config *c, struct al_error **err)
{
	static const struct {
		const char *type;
		int flag;
		const char *own;
	} joinable[] = {{"network", CLONE_NEWNET, "/proc/self/ns/net"},
			{"ipc", CLONE_NEWIPC, "/proc/self/ns/ipc"},
			{"uts", CLONE_NEWUTS, "/proc/self/ns/uts"}};
	size_t i;
	json_t *n;

	json_array_foreach(nss, i, n)
	{
		const char *type = json_string_value(json_object_get(n, "type"));
		const char *path = json_string_value(json_object_get(n, "path"));
		struct stat ns, own;
		int *fd = NULL, k;

		if (!path || !path[0])
			continue; /* a new one: every namespace of ours is new anyway */
		for (k = 0; k < (int)ARRAY_SIZE(joinable); k++)
			if (type && strcmp(type, joinable[k].type) == 0)
				break;
		if (k == (int)ARRAY_SIZE(joinable))
			return al_error_msg(err, EPERM,
					    "joining the %s namespace '%s' refused: only network, "
					    "ipc and uts namespaces are joined (docs/oci.md)",
					    type ? type : "(none)", path);
		fd = k == 0 ? &c->netns_fd : k == 1 ? &c->oci.ipc_fd : &c->oci.uts_fd;
		if (*fd >= 0)
			close(*fd);
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			return al_error_set(err, errno, "%s namespace '%s'", type, path);
		if (fstat(*fd, &ns) < 0 || stat(joinable[k].own, &own) < 0 ||
		    (ns.st_dev == own.st_dev && ns.st_ino == own.st_ino))
			return al_error_msg(
			    err, EPERM, "joining the %s namespace '%s' refused: it is the host's",
			    type, path);
	}
	return 0;
}

/* "deny-all", as a bare word, a JSON string or {"mode": "deny-all"}: no gateway needed. */
static bool deny_all(const char *doc)
{
	json_t *j = json_loads(doc, JSON_DECODE_ANY, NULL);
	const char *s = json_is_object(j) && json_object_size(j) == 1
			    ? json_string_value(json_object_get(j, "mode"))
			    : json_string_value(j);
	bool r = s ? strcmp(s, "deny-all") == 0 : strcmp(doc, "deny-all") == 0;

	json_decref(j);
	return r;
}

static int load_doc(const char *bundle, struct oci_config *c, struct al_error **err)
{
	_cleanup_free_ char *path = xasprintf("%s/config.json", bundle);
	json_error_t je;
	json_t *root;
	const char *rp;

	c->doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!c->doc)
		return al_error_msg(err, EINVAL, "%s: %s (line %d)", path, je.text, je.line);
	root = json_object_get(c->doc, "root");
	rp = json_string_value(json_object_get(root, "path"));
	if (!rp)
		return al_error_msg(err, EINVAL, "config.json: no root.path");
	if (rp[0] == '/')
		snprintf(c->rootfs, sizeof(c->rootfs), "%s", rp);
	else
		snprintf(c->rootfs, sizeof(c->rootfs), "%s/%s", bundle, rp);
	return 0;
}

/* root.readonly false: a writable root (src/jail/oci_root.c), an overlay whose upper is a
 * tmpfs of the airlock.dev/root-size annotation's size, else JAIL_DISK_DEFAULT. */
static int root_options(struct oci_config *c, json_t *ann, struct al_error **err)
{
	json_t *ro = json_object_get(json_object_get(c->doc, "root"), "readonly");
	const char *size = json_string_value(json_object_get(ann, OCI_ROOT_SIZE_ANNOTATION));

	if (ro && !json_is_boolean(ro))
		return al_error_msg(err, EINVAL, "config.json: root.readonly is not a boolean");
	c->oci.writable_root = !json_is_true(ro);
	c->oci.root_size = JAIL_DISK_DEFAULT;
	if (size && (al_parse_size(size, &c->oci.root_size) < 0 || c->oci.root_size < 4096))
		return al_error_msg(err, EINVAL, "annotation %s: '%s' is not a size of 4K or more",
				    OCI_ROOT_SIZE_ANNOTATION, size);
	return 0;
}

int oci_config_load(const char *bundle, struct oci_config *c, struct al_error **err)
{
	json_t *linux_, *m, *ann;
	size_t i;

	memset(c, 0, sizeof(*c));
	c->netns_fd = c->oci.ipc_fd = c->oci.uts_fd = c->oci.gate_fd = c->oci.hold_fd = -1;
	al_config_init(&c->cfg);
	c->cfg.timeout_ms = 0;
	if (load_doc(bundle, c, err) < 0 ||
	    oci_config_process(json_object_get(c->doc, "process"), c, err) < 0)
		return -1;
	c->cfg.image = c->rootfs;
	c->cfg.hostname = json_string_value(json_object_get(c->doc, "hostname"));
	if (!c->cfg.hostname || !c->cfg.hostname[0])
		c->cfg.hostname = JAIL_HOSTNAME_DEFAULT;
	if (strlen(c->cfg.hostname) > 63)
		return al_error_msg(err, EINVAL, "config.json: hostname is longer than 63");
	json_array_foreach(json_object_get(c->doc, "mounts"), i,
			   m) if (one_mount(m, i, c, err) < 0) return -1;
	c->oci.mounts = c->mounts;
	linux_ = json_object_get(c->doc, "linux");
	if (oci_config_resources(json_object_get(linux_, "resources"), &c->cfg, err) < 0 ||
	    namespaces(json_object_get(linux_, "namespaces"), c, err) < 0)
		return -1;
	if (oci_seccomp_compile(json_object_get(linux_, "seccomp"), &c->seccomp, err) < 0)
		return al_error_wrap(err, "config.json: linux.seccomp");
	c->oci.seccomp = c->seccomp;
	c->masked = string_array(json_object_get(linux_, "maskedPaths"), "linux.maskedPaths", err);
	c->readonly =
	    string_array(json_object_get(linux_, "readonlyPaths"), "linux.readonlyPaths", err);
	if (!c->masked || !c->readonly)
		return -1;
	c->oci.masked = c->masked;
	c->oci.n_masked = json_array_size(json_object_get(linux_, "maskedPaths"));
	c->oci.readonly = c->readonly;
	c->oci.n_readonly = json_array_size(json_object_get(linux_, "readonlyPaths"));
	ann = json_object_get(c->doc, "annotations");
	if (root_options(c, ann, err) < 0)
		return -1;
	c->policy = json_string_value(json_object_get(ann, OCI_POLICY_ANNOTATION));
	if (c->policy && c->netns_fd >= 0)
		return al_error_msg(err, EINVAL,
				    "annotation %s and a network namespace to join: a joined "
				    "namespace has no airlock gateway (docs/oci.md)",
				    OCI_POLICY_ANNOTATION);
	if (c->policy && deny_all(c->policy))
		c->policy = NULL; /* loopback only, as without one: no gateway */
	return 0;
}

void oci_config_free(struct oci_config *c)
{
	al_closep(&c->netns_fd);
	al_closep(&c->oci.ipc_fd);
	al_closep(&c->oci.uts_fd);
	free(c->argv);
	free(c->envp);
	free(c->masked);
	free(c->readonly);
	oci_seccomp_free(c->seccomp);
	json_decref(c->doc);
	memset(c, 0, sizeof(*c));
}
