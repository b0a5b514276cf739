/* SPDX-License-Identifier: MIT */
/*
 * Per-container state under --root (default /run/airlock-oci): ROOT/ID/state.json (what
 * `state` prints, and what delete needs: PID 1's pid and start time, the cgroup, the uid
 * slot) and ROOT/ID/exec.fifo (the start gate, gone once started). ROOT/.lock is flocked
 * by every command for its whole life (exclusive for those that change something), so
 * concurrent invocations never see a half-made container or take the same uid slot.
 */
#include "oci/oci.h"
#include "jail/sandbox.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

bool oci_id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > 128 || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)id[i]) && !strchr("_.+-", id[i]))
			return false;
	return true;
}

char *oci_path(const char *root, const char *id, const char *name)
{
	return name ? xasprintf("%s/%s/%s", root, id, name) : xasprintf("%s/%s", root, id);
}

/* mkdir -p: the shim names a --root under a directory that may not exist yet. */
static int mkdir_parents(const char *root, struct al_error **err)
{
	char buf[4096];

	if (strlen(root) >= sizeof(buf) || root[0] != '/')
		return al_error_msg(err, EINVAL, "--root '%s' must be an absolute path", root);
	strcpy(buf, root);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return al_error_set(err, errno, "mkdir '%s'", buf);
		if (!c)
			return 0;
		*p = c;
	}
}

int oci_lock(const char *root, bool exclusive, struct al_error **err)
{
	_cleanup_free_ char *path = xasprintf("%s/.lock", root);
	int fd;

	if (mkdir_parents(root, err) < 0)
		return -1;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return al_error_set(err, errno, "open '%s'", path);
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
		if (errno != EINTR) {
			int e = errno;

			close(fd);
			return al_error_set(err, e, "flock '%s'", path);
		}
	return fd; /* held until the command exits */
}

int oci_state_load(const char *root, const char *id, struct oci_state *st, struct al_error **err)
{
	_cleanup_free_ char *path = NULL;
	json_t *j;
	json_error_t je;

	memset(st, 0, sizeof(*st));
	if (!oci_id_ok(id))
		return al_error_msg(err, ENOENT, "container %s does not exist", id);
	path = oci_path(root, id, "state.json");
	j = json_load_file(path, 0, &je);
	if (!j)
		return al_error_msg(err, ENOENT, "container %s does not exist", id);
	snprintf(st->id, sizeof(st->id), "%s", id);
	st->pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
	st->start_time = (uint64_t)json_integer_value(json_object_get(j, "start_time"));
	st->slot = (unsigned)json_integer_value(json_object_get(j, "slot"));
	snprintf(st->bundle, sizeof(st->bundle), "%s",
		 json_string_value(json_object_get(j, "bundle")) ?: "");
	snprintf(st->rootfs, sizeof(st->rootfs), "%s",
		 json_string_value(json_object_get(j, "rootfs")) ?: "");
	snprintf(st->created, sizeof(st->created), "%s",
		 json_string_value(json_object_get(j, "created")) ?: "");
	snprintf(st->cgroup, sizeof(st->cgroup), "%s",
		 json_string_value(json_object_get(j, "cgroup")) ?: "");
	st->annotations = json_incref(json_object_get(j, "annotations"));
	json_decref(j);
	return 0;
}

int oci_state_save(const char *root, const struct oci_state *st, struct al_error **err)
{
	_cleanup_free_ char *path = oci_path(root, st->id, "state.json");
	_cleanup_free_ char *tmp = oci_path(root, st->id, "state.json.tmp");
	json_t *j = json_pack("{s:s, s:i, s:I, s:i, s:s, s:s, s:s, s:s, s:o}", "id", st->id, "pid",
			      (int)st->pid, "start_time", (json_int_t)st->start_time, "slot",
			      (int)st->slot, "bundle", st->bundle, "rootfs", st->rootfs, "created",
			      st->created, "cgroup", st->cgroup, "annotations",
			      st->annotations ? json_incref(st->annotations) : json_object());
	int r = json_dump_file(j, tmp, JSON_COMPACT);

	json_decref(j);
	if (r < 0 || rename(tmp, path) < 0)
		return al_error_set(err, errno ? errno : EIO, "write '%s'", path);
	return 0;
}

void oci_state_free(struct oci_state *st)
{
	json_decref(st->annotations);
	st->annotations = NULL;
}

int oci_freezer_join(const char *cgroup, pid_t pid, struct al_error **err)
{
	_cleanup_free_ char *dir = xasprintf(OCI_V1_FREEZER "/airlock/%s", cgroup);
	_cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", dir);
	_cleanup_close_ int fd = -1;
	char buf[16];
	int n;

	if (access(OCI_V1_FREEZER "/cgroup.procs", F_OK) < 0)
		return 0; /* no v1 freezer: v2 freezes the container's own cgroup */
	if ((mkdir(OCI_V1_FREEZER "/airlock", 0755) < 0 && errno != EEXIST) ||
	    (mkdir(dir, 0755) < 0 && errno != EEXIST))
		return al_error_set(err, errno, "mkdir '%s'", dir);
	fd = open(procs, O_WRONLY | O_CLOEXEC);
	n = snprintf(buf, sizeof(buf), "%d", (int)pid);
	if (fd < 0 || write(fd, buf, (size_t)n) != n)
		return al_error_set(err, errno, "join '%s'", dir);
	return 0;
}

void oci_freezer_remove(const char *cgroup)
{
	_cleanup_free_ char *dir = xasprintf(OCI_V1_FREEZER "/airlock/%s", cgroup);

	for (int i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++)
		usleep(10000); /* its last task is still on its way out */
}

int oci_freeze(const char *cgroup, bool freeze, struct al_error **err)
{
	_cleanup_free_ char *v1 = xasprintf(OCI_V1_FREEZER "/airlock/%s/freezer.state", cgroup);
	_cleanup_free_ char *v2 = xasprintf("/sys/fs/cgroup/airlock/%s/cgroup.freeze", cgroup);
	bool is_v1 = access(v1, F_OK) == 0;
	const char *val = is_v1 ? (freeze ? "FROZEN" : "THAWED") : (freeze ? "1" : "0");
	_cleanup_close_ int fd = open(is_v1 ? v1 : v2, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		return al_error_set(err, errno, "write '%s'", is_v1 ? v1 : v2);
	return 0;
}

static bool frozen(const struct oci_state *st)
{
	_cleanup_free_ char *p = xasprintf("/sys/fs/cgroup/airlock/%s/cgroup.freeze", st->cgroup);
	_cleanup_free_ char *v1 =
	    xasprintf("/sys/fs/cgroup/freezer/airlock/%s/freezer.state", st->cgroup);
	char buf[16] = {0};
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		fd = open(v1, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		return false;
	return buf[0] == '1' || strncmp(buf, "FROZEN", 6) == 0;
}

const char *oci_status(const char *root, const struct oci_state *st)
{
	_cleanup_free_ char *fifo = oci_path(root, st->id, "exec.fifo");
	uint64_t t = 0;

	if (st->pid <= 0 || jail_proc_start_time(st->pid, &t) < 0 || t != st->start_time)
		return "stopped";
	/* A zombie PID 1 (exited, not yet reaped by the shim) has stopped too. */
	{
		_cleanup_free_ char *p = xasprintf("/proc/%d/stat", (int)st->pid);
		char buf[256] = {0}, *c;
		_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);

		if (fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0 && (c = strrchr(buf, ')')) &&
		    c[1] == ' ' && (c[2] == 'Z' || c[2] == 'X'))
			return "stopped";
	}
	if (access(fifo, F_OK) == 0)
		return "created";
	return frozen(st) ? "paused" : "running";
}

json_t *oci_state_json(const char *root, const struct oci_state *st)
{
	const char *status = oci_status(root, st);
	bool stopped = strcmp(status, "stopped") == 0;
	return json_pack(
	    "{s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:o, s:s}", "ociVersion", OCI_VERSION, "id",
	    st->id, "status", status, "pid", stopped ? 0 : (int)st->pid, "bundle", st->bundle,
	    "rootfs", st->rootfs, "created", st->created, "annotations",
	    st->annotations ? json_incref(st->annotations) : json_object(), "owner", "");
}

int oci_slot_alloc(const char *root, unsigned *slot, struct al_error **err)
{
	_cleanup_closedir_ DIR *d = opendir(root);
	unsigned char used[OCI_SLOTS / 8] = {0};
	struct dirent *de;

	if (!d)
		return al_error_set(err, errno, "opendir '%s'", root);
	while ((de = readdir(d))) {
		struct oci_state st;
		struct al_error *e = NULL;

		if (de->d_name[0] == '.' || oci_state_load(root, de->d_name, &st, &e) < 0) {
			al_error_free(e);
			continue;
		}
		if (st.slot < OCI_SLOTS)
			used[st.slot / 8] |= (unsigned char)(1u << (st.slot % 8));
		oci_state_free(&st);
	}
	for (unsigned s = 0; s < OCI_SLOTS; s++)
		if (!(used[s / 8] & (1u << (s % 8)))) {
			*slot = s;
			return 0;
		}
	return al_error_msg(err, ENOSPC, "no free uid range for another container");
}

void oci_remove_dir(const char *root, const char *id)
{
	static const char *const files[] = {"exec.fifo", "state.json", "state.json.tmp",
					    "egress.log"};
	_cleanup_free_ char *d = oci_path(root, id, NULL);

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		_cleanup_free_ char *f = oci_path(root, id, files[i]);

		unlink(f);
	}
	rmdir(d);
}

size_t oci_pids(pid_t pid1, pid_t *out, size_t max)
{
	_cleanup_free_ char *own = xasprintf("/proc/%d/ns/pid", (int)pid1);
	_cleanup_closedir_ DIR *d = opendir("/proc");
	struct stat ns, st;
	struct dirent *de;
	size_t n = 0;

	if (stat(own, &ns) < 0 || !d)
		return 0;
	out[n++] = pid1;
	while ((de = readdir(d)) && n < max) {
		char p[64];
		int pid = atoi(de->d_name);

		if (pid <= 0 || pid == pid1)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/ns/pid", pid);
		if (stat(p, &st) == 0 && st.st_ino == ns.st_ino && st.st_dev == ns.st_dev)
			out[n++] = pid;
	}
	return n;
}
