/* SPDX-License-Identifier: MIT */
/*
 * Taking a snapshot of a live sandbox, restoring one into a new sandbox, and fork (both at
 * once, with nothing kept). docs/snapshots.md.
 *
 * Capture: the sandbox's cgroup is frozen (freeze.c), each writable area is opened from
 * its root fd without following anything and written as a tar (snap_tar.c), the cgroup is
 * thawed. The sandbox stays running: its state is never anything but the truth.
 * Restore: the .tar is read whole and its SHA-256 checked against the record; each
 * area's tar then goes in through the same extraction as an upload (dm_fs_write_tar: the
 * sandbox user's credentials, no-follow walks, the sandbox's disk as its limit).
 */
#include "daemon/snap_internal.h"
#include "daemon/cowfork.h"
#include "daemon/freeze.h"
#include "daemon/files_internal.h"
#include "daemon/snap_tar.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP_MAX_ENTRIES 1000000 /* as an upload (fs.c) */

static const char *const snap_areas[] = {"/workspace", "/tmp", "/home/user", "/dev/shm"};

/* What a capture needs of its sandbox, copied under d->mu. */
struct snap_src {
	struct dm_sbx *s; /* held */
	char id[DM_ID_LEN + 1];
	pid_t pid;
	uid_t host_base;
	struct jail_spec spec;
};

static int src_hold(struct daemon *d, const char *team, const char *id, struct snap_src *out,
		    struct al_error **err)
{
	_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);
	struct dm_sbx *s = dm_find_sbx(d, team, id, err);

	if (!s)
		return -ENOENT;
	if (s->state != DM_SBX_RUNNING)
		return al_error_msg(err, ESRCH,
				    "sandbox '%s' is %s: only a running sandbox's files "
				    "can be captured",
				    s->id, dm_sbx_state_name(s->state));
	dm_sbx_hold(s);
	out->s = s;
	out->pid = s->pid;
	out->host_base = s->host_base;
	out->spec = s->spec;
	snprintf(out->id, sizeof(out->id), "%s", s->id);
	return 0;
}

struct skip_ctx {
	struct daemon *d;
	const char *what, *sbx;
};

static void on_skip(void *ctx, const char *path, const char *why)
{
	struct skip_ctx *c = ctx;

	dm_log(c->d, "%s of sandbox %s: '%s' %s", c->what, c->sbx, path, why);
}

static void hex(const unsigned char *md, unsigned n, char *out)
{
	for (unsigned i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void evp_freep(EVP_MD_CTX **c)
{
	if (*c)
		EVP_MD_CTX_free(*c);
}

/* Opens an area below the sandbox root, every component with O_NOFOLLOW (files_walk). */
static int open_area(int root, const char *area, struct al_error **err)
{
	struct files_path p;
	struct files_show sh;

	if (files_api_path("/", area, &p, &sh, err) < 0)
		return -1;
	return files_walk(root, &p, p.n, false, 0, sh.s, err);
}

/* The areas of a sandbox with workdir wd into m (the workdir when no area holds it). */
static void areas_of(const char *wd, struct dm_snap *m)
{
	bool inside = false;

	m->areas = xzalloc((ARRAY_SIZE(snap_areas) + 1) * sizeof(*m->areas));
	for (size_t i = 0; i < ARRAY_SIZE(snap_areas); i++) {
		m->areas[m->n_areas++].path = xstrdup(snap_areas[i]);
		inside |= al_path_is_under(wd, snap_areas[i]);
	}
	if (!inside)
		m->areas[m->n_areas++].path = xstrdup(wd);
}

/* The frozen part: every area into sink (the caller thaws). */
static int capture_areas(struct daemon *d, const struct snap_src *src, struct dm_snap *m,
			 struct snap_sink *sink, struct al_error **err)
{
	char path[64];
	struct skip_ctx sc = {d, m->id[0] ? m->id : "a fork's capture", src->id};
	_cleanup_close_ int root = -1;

	snprintf(path, sizeof(path), "/proc/%d/root", (int)src->pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return al_error_set(err, errno, "open the sandbox root");
	for (size_t i = 0; i < m->n_areas; i++) {
		struct al_error *why = NULL;
		_cleanup_close_ int fd = open_area(root, m->areas[i].path, &why);
		uint64_t before = sink->bytes, entries = 0;

		if (fd < 0) { /* a workdir that is a symlink, an area not there: logged */
			dm_log_err(d, &why, "snapshot of sandbox %s: area '%s' left out", src->id,
				   m->areas[i].path);
			m->areas[i].off = before;
			continue;
		}
		if (snap_capture_area(fd, m->areas[i].path, sink, SNAP_MAX_ENTRIES, on_skip, &sc,
				      err) < 0)
			return al_error_wrap(err, "capturing '%s'", m->areas[i].path);
		entries = 1; /* an area with a tar; empty ones still restore cleanly */
		m->areas[i].off = before;
		m->areas[i].len = sink->bytes - before;
		m->areas[i].entries = entries;
	}
	return 0;
}

/*
 * Captures src's writable areas into fd (a new file, path names it in messages): m gets the areas
 * and size, and when durable (a snapshot, not a fork's private copy) the file is synced and m gets
 * its digest. At most cap bytes (ENOSPC).
 */
static int capture_to(struct daemon *d, const struct snap_src *src, int fd, const char *path,
		      bool durable, uint64_t cap, struct dm_snap *m, struct al_error **err)
{
	_snap_cleanup_(evp_freep) EVP_MD_CTX *sha = durable ? EVP_MD_CTX_new() : NULL;
	struct snap_sink sink = {.fd = fd, .sha = sha, .cap = cap};
	struct al_error *why = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	int r;

	if (fd < 0)
		return al_error_set(err, errno, "create '%s'", path);
	if (durable && (!sha || EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1))
		return al_error_msg(err, ENOMEM, "SHA-256 context");
	areas_of(src->spec.workdir, m);
	if (dm_freeze(src->id, true, err) < 0) {
		if (dm_freeze(src->id, false, &why) < 0)
			dm_log_err(d, &why, "sandbox %s: thaw after a failed freeze", src->id);
		return al_error_wrap(err, "freezing sandbox %s", src->id);
	}
	r = capture_areas(d, src, m, &sink, err);
	if (dm_freeze(src->id, false, &why) < 0) /* never left frozen: logged, and it fails */
		dm_log_err(d, &why, "sandbox %s: THAW FAILED after a capture", src->id);
	if (r < 0)
		return -1;
	m->size = sink.bytes;
	if (!durable) /* a fork's: private, read back at once, never stored */
		return 0;
	if (fsync(fd) < 0)
		return al_error_set(err, errno, "fsync '%s'", path);
	if (EVP_DigestFinal_ex(sha, md, &n) != 1 || n != 32)
		return al_error_msg(err, EIO, "SHA-256 of the snapshot");
	hex(md, n, m->sha);
	return 0;
}

static uint64_t snaps_room(struct daemon *d)
{
	struct dm_snaps *ss = d->snaps;
	uint64_t room;

	pthread_mutex_lock(&ss->mu);
	room = ss->cap > ss->total ? ss->cap - ss->total : 0;
	pthread_mutex_unlock(&ss->mu);
	return room;
}

/* A capture that will not be kept: its files and m. */
static void snap_drop(struct daemon *d, struct dm_snap *m)
{
	_cleanup_free_ char *tar = dm_snap_path(d, m->id, ".tar");
	_cleanup_free_ char *rec = dm_snap_path(d, m->id, ".json");

	unlink(rec);
	unlink(tar);
	dm_snap_free(m);
}

int dm_snapshot_create(struct daemon *d, const char *team, const char *sbx, uint64_t expire_ms,
		       json_t **out, struct al_error **err)
{
	struct snap_src src = {0};
	struct dm_snap *m = xzalloc(sizeof(*m));
	_cleanup_free_ char *tar = NULL;
	struct dm_snaps *ss = d->snaps;
	_cleanup_close_ int fd = -1;
	int r;

	if (src_hold(d, team, sbx, &src, err) < 0) {
		dm_snap_free(m);
		return -1;
	}
	dm_new_id("snp_", m->id);
	m->team = xstrdup(team);
	snprintf(m->src, sizeof(m->src), "%s", src.id);
	m->workdir = xstrdup(src.spec.workdir);
	m->disk_bytes = src.spec.disk_bytes;
	m->created_ms = dm_now_ms();
	m->expires_ms = expire_ms ? m->created_ms + (int64_t)expire_ms : 0;
	pthread_mutex_lock(&ss->mu);
	snprintf(m->parent, sizeof(m->parent), "%s", dm_snap_origin(ss, src.id));
	pthread_mutex_unlock(&ss->mu);
	tar = dm_snap_path(d, m->id, ".tar");
	fd = open(tar, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	r = fd < 0 ? al_error_set(err, errno, "create '%s'", tar)
		   : capture_to(d, &src, fd, tar, true, snaps_room(d), m, err);
	dm_sbx_put(src.s);
	if (r == 0)
		r = dm_snap_record_write(d, m, err);
	if (r < 0) {
		unlink(tar);
		dm_snap_free(m);
		return al_error_wrap(err, "snapshot of sandbox %s", sbx);
	}
	pthread_mutex_lock(&ss->mu);
	if (ss->total + m->size > ss->cap) { /* another capture filled the room meanwhile */
		pthread_mutex_unlock(&ss->mu);
		snap_drop(d, m);
		return al_error_msg(err, ENOSPC,
				    "snapshot of sandbox %s: the snapshot store is full (airlock "
				    "serve --snapshot-max)",
				    sbx);
	}
	*out = dm_snap_json(m);
	dm_snap_add(ss, m);
	pthread_mutex_unlock(&ss->mu);
	return 0;
}

/* --- restore ---------------------------------------------------------------- */

struct snap_map {
	struct dm_snap *m; /* a copy of the record */
	void *p;
	size_t len;
};

static void map_free(struct snap_map *x)
{
	if (x->p && x->p != MAP_FAILED)
		munmap(x->p, x->len);
	dm_snap_free(x->m);
	memset(x, 0, sizeof(*x));
}

static struct dm_snap *snap_copy(const struct dm_snap *s)
{
	struct dm_snap *c = xzalloc(sizeof(*c));

	*c = *s;
	c->team = xstrdup(s->team);
	c->workdir = xstrdup(s->workdir);
	c->areas = xzalloc((s->n_areas + 1) * sizeof(*c->areas));
	for (size_t i = 0; i < s->n_areas; i++) {
		c->areas[i] = s->areas[i];
		c->areas[i].path = xstrdup(s->areas[i].path);
	}
	return c;
}

static int map_file(const char *path, struct snap_map *x, struct al_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return al_error_set(err, errno, "open '%s'", path);
	x->len = (size_t)st.st_size;
	if (x->len == 0)
		return 0;
	x->p = mmap(NULL, x->len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (x->p == MAP_FAILED) {
		x->p = NULL;
		return al_error_set(err, errno, "mmap '%s'", path);
	}
	return 0;
}

/* The team's snapshot id, read whole and checked against its recorded size and digest. */
static int snap_load(struct daemon *d, const char *team, const char *id, struct snap_map *x,
		     struct al_error **err)
{
	struct dm_snaps *ss = d->snaps;
	_cleanup_free_ char *tar = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	char got[65];
	struct dm_snap *s;

	pthread_mutex_lock(&ss->mu);
	s = dm_snap_find(ss, team, id, err);
	if (s) {
		x->m = snap_copy(s);
		tar = dm_snap_path(d, s->id, ".tar");
		if (map_file(tar, x, err) < 0) /* under the lock: a delete waits for the open */
			s = NULL;
	}
	pthread_mutex_unlock(&ss->mu);
	if (!s)
		return -1;
	if (x->len != x->m->size ||
	    EVP_Digest(x->p ? x->p : "", x->len, md, &n, EVP_sha256(), NULL) != 1 || n != 32)
		goto corrupt;
	hex(md, n, got);
	if (strcmp(got, x->m->sha) == 0)
		return 0;
corrupt:
	dm_log(d,
	       "snapshot %s: its data does not match the digest recorded at capture (%zu of "
	       "%llu bytes): refused",
	       id, x->len, (unsigned long long)x->m->size);
	return al_error_msg(err, EBADMSG,
			    "snapshot '%s' is corrupt: its data does not match the SHA-256 "
			    "recorded when it was taken; nothing was restored",
			    id);
}

/* Every area's tar of x into sandbox sbx, through the upload path (dm_fs_write_tar). */
static int restore_into(struct daemon *d, const char *team, const char *sbx,
			const struct snap_map *x, struct al_error **err)
{
	for (size_t i = 0; i < x->m->n_areas; i++) {
		const struct dm_snap_area *a = &x->m->areas[i];

		if (!a->entries || a->len == 0)
			continue;
		if (a->off + a->len > x->len)
			return al_error_msg(err, EBADMSG, "snapshot area '%s' out of its file",
					    a->path);
		if (dm_fs_write_tar(d, team, sbx, a->path, (const char *)x->p + a->off, a->len,
				    err) < 0)
			return al_error_wrap(err, "restoring '%s'", a->path);
	}
	return 0;
}

/* The create's spec completed from a source's: what the create leaves unset is the
 * source's (its limits, root, workdir); the disk is at least the source's. */
static void spec_from(struct jail_spec *want, const struct jail_spec *src)
{
	if (!want->vcpus && !want->memory_bytes)
		want->vcpus = src->vcpus;
	if (!want->memory_bytes)
		want->memory_bytes = src->memory_bytes;
	if (want->disk_bytes < src->disk_bytes)
		want->disk_bytes = src->disk_bytes;
	if (!want->workdir[0])
		memcpy(want->workdir, src->workdir, sizeof(want->workdir));
	if (!want->image[0])
		memcpy(want->image, src->image, sizeof(want->image));
}

/* A sandbox that got no files: stopped, its failure logged. */
static void undo_sandbox(struct daemon *d, const char *team, const char *id)
{
	struct al_error *why = NULL;

	if (dm_sandbox_stop(d, team, id, &why) < 0)
		dm_log_err(d, &why, "sandbox %s: stop after a failed restore", id);
}

int dm_sandbox_create_from(struct daemon *d, const char *team, const struct dm_create *asked,
			   const char *snap, char **out_id, struct al_error **err)
{
	struct snap_map x = {0};
	struct dm_create c = *asked;
	struct jail_spec src = {0};
	int r;

	if (snap_load(d, team, snap, &x, err) < 0) {
		map_free(&x);
		return -1;
	}
	src.disk_bytes = x.m->disk_bytes;
	JAIL_SPEC_SET(src.workdir, x.m->workdir, "workdir", NULL);
	spec_from(&c.spec, &src);
	r = dm_sandbox_create(d, team, &c, out_id, err);
	if (r == 0 && (r = restore_into(d, team, *out_id, &x, err)) < 0) {
		undo_sandbox(d, team, *out_id);
		free(*out_id);
		*out_id = NULL;
	}
	if (r == 0)
		dm_snap_origin_set(d, *out_id, x.m->id);
	map_free(&x);
	return r < 0 ? al_error_wrap(err, "sandbox from snapshot %s", snap) : 0;
}

/* --- fork ------------------------------------------------------------------- */

/* Captures src into a private memory file (memfd: no file system, nothing left after a
 * crash) and maps it. Its size counts against the snapshot cap while it exists. */
static int fork_capture(struct daemon *d, const struct snap_src *src, struct snap_map *x,
			struct al_error **err)
{
	_cleanup_close_ int fd = memfd_create("airlock-fork", MFD_CLOEXEC);
	struct stat st;

	x->m = xzalloc(sizeof(*x->m));
	if (fd < 0)
		return al_error_set(err, errno, "memfd_create");
	if (capture_to(d, src, fd, "(a fork's capture)", false, snaps_room(d), x->m, err) < 0)
		return -1;
	if (fstat(fd, &st) < 0)
		return al_error_set(err, errno, "fstat a fork's capture");
	x->len = (size_t)st.st_size;
	if (x->len == 0)
		return 0;
	x->p = mmap(NULL, x->len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (x->p == MAP_FAILED) {
		x->p = NULL;
		return al_error_set(err, errno, "mmap a fork's capture");
	}
	return 0;
}

/* The copy: src's files captured and extracted into the new sandbox fid. */
static int fork_copy(struct daemon *d, const char *team, const struct snap_src *src,
		     const char *fid, struct al_error **err)
{
	struct snap_map x = {0};
	int r = fork_capture(d, src, &x, err);

	if (r == 0 && (r = restore_into(d, team, fid, &x, err)) < 0)
		al_error_wrap(err, "copying the files of %s", src->id);
	map_free(&x);
	return r;
}

/* The new sandbox is made on a thread of its own while the source's side of a fork is
 * done (its create may do file operations, which wait while the source switches). */
struct fork_create {
	struct daemon *d;
	const char *team;
	struct dm_create c;
	pthread_t t;
	bool started, joined;
	char *id;
	struct al_error *err;
	int r;
};

static void *fork_create_main(void *arg)
{
	struct fork_create *f = arg;

	f->r = dm_sandbox_create(f->d, f->team, &f->c, &f->id, &f->err);
	return NULL;
}

/* dm_cow_wait_fn: the create's end. */
static const char *fork_join(void *arg)
{
	struct fork_create *f = arg;

	if (!f->joined && f->started)
		pthread_join(f->t, NULL);
	f->joined = true;
	return f->r == 0 ? f->id : NULL;
}

/* Copy-on-write (cowfork.c) when it can be done safely, else the copy; logged either way. */
static int fork_files(struct daemon *d, const struct snap_src *src, struct fork_create *f,
		      struct al_error **err)
{
	struct dm_snap areas = {0};
	struct al_error *why = NULL;
	struct dm_cow_src cs = {.team = f->team,
				.id = src->id,
				.pid = src->pid,
				.host_base = src->host_base,
				.disk_bytes = src->spec.disk_bytes};
	const char *paths[ARRAY_SIZE(snap_areas) + 1];
	int r;

	areas_of(src->spec.workdir, &areas);
	for (size_t i = 0; i < areas.n_areas; i++)
		paths[i] = areas.areas[i].path;
	cs.areas = paths;
	cs.n_areas = areas.n_areas;
	f->started = pthread_create(&f->t, NULL, fork_create_main, f) == 0;
	if (!f->started)
		fork_create_main(f); /* no thread: one after the other */
	r = dm_cow_fork(d, &cs, fork_join, f, &why);
	fork_join(f);
	for (size_t i = 0; i < areas.n_areas; i++)
		free(areas.areas[i].path);
	free(areas.areas);
	if (f->r < 0) {
		al_error_free(why);
		*err = f->err, f->err = NULL;
		return -1;
	}
	if (r == 0) {
		dm_log(d, "fork of sandbox %s into %s: copy-on-write", src->id, f->id);
		return 0;
	}
	dm_log_err(d, &why, "fork of sandbox %s into %s: copied, not copy-on-write", src->id,
		   f->id);
	return fork_copy(d, f->team, src, f->id, err);
}

int dm_sandbox_fork(struct daemon *d, const char *team, const char *from,
		    const struct dm_create *asked, char **out_id, struct al_error **err)
{
	struct fork_create f = {.d = d, .team = team, .c = *asked};
	struct snap_src src = {0};
	int r;

	if (src_hold(d, team, from, &src, err) < 0)
		return -1;
	spec_from(&f.c.spec, &src.spec);
	r = fork_files(d, &src, &f, err);
	if (r == 0) {
		pthread_mutex_lock(&d->snaps->mu);
		const char *origin = dm_snap_origin(d->snaps, src.id);
		char o[DM_ID_LEN + 1];

		snprintf(o, sizeof(o), "%s", origin);
		pthread_mutex_unlock(&d->snaps->mu);
		if (o[0])
			dm_snap_origin_set(d, f.id, o);
		*out_id = TAKE_PTR(f.id);
	} else if (f.id) {
		undo_sandbox(d, team, f.id);
	}
	dm_sbx_put(src.s);
	al_error_free(f.err);
	free(f.id);
	return r < 0 ? al_error_wrap(err, "fork of sandbox %s", from) : 0;
}
