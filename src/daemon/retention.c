/* SPDX-License-Identifier: MIT */
/* airlockd: retention -- the timer and reaper threads, expiry, forgetting ended sandboxes
 * and old commands, reclaiming cgroups, pruning egress logs. */
#include "daemon/internal.h"
#include "daemon/cowfork.h"
#include "daemon/freeze.h"
#include "jail/sandbox.h"
#include "net/contract.h"
#include "net/policy.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

static void kill_cmd(struct dm_sbx *s, const char *cmd_id, int sig)
{
	struct proto_buf b = {0};
	uint32_t sg = (uint32_t)sig;

	proto_begin(&b, PROTO_KILL, 0);
	proto_put_str(&b, PT_CMD_ID, cmd_id, strlen(cmd_id));
	proto_put_u32(&b, PT_SIGNAL, sg);
	dm_agent_send(s, &b);
}

/*
 * Cgroups of ended sandboxes not removed yet (d->mu held; it is dropped around the
 * attempts): those of stopped sandboxes, left to us so that a stop answers sooner, and
 * those still busy when their sandbox ended; before them, the mount namespaces that
 * stops held (s->root_held). One try each, no waiting; their uid ranges
 * stay reserved until they are gone (alloc_host_base). Returns how many are still left.
 */
size_t dm_reclaim_cgroups(struct daemon *d)
{
	char(*ids)[DM_ID_LEN + 1] = NULL;
	int *roots = NULL;
	size_t n = 0, left = 0, n_roots = 0;

	for (size_t i = 0; i < d->n_sbxs; i++) {
		if (d->sbxs[i]->root_held >= 0) {
			roots = xrealloc(roots, (n_roots + 1) * sizeof(*roots));
			roots[n_roots++] = d->sbxs[i]->root_held;
			d->sbxs[i]->root_held = -1;
		}
		if (d->sbxs[i]->cgroup_left) {
			ids = xrealloc(ids, (n + 1) * sizeof(*ids));
			strcpy(ids[n++], d->sbxs[i]->id);
		}
	}
	if (!n && !n_roots)
		return 0;
	pthread_mutex_unlock(&d->mu);
	/* The stopped sandboxes' mounts: torn down here (as each close returns), not in the
	 * stop that the caller waited for. */
	for (size_t k = 0; k < n_roots; k++)
		close(roots[k]);
	free(roots);
	for (size_t k = 0; k < n; k++)
		if (jail_sandbox_reclaim(ids[k]) < 0) {
			ids[k][0] = '\0';
			left++;
		} else {
			dm_freeze_forget(ids[k]); /* v1: a snapshot's freezer cgroup */
			dm_cow_forget(d, ids[k]); /* its layers (a fork's overlays keep theirs) */
		}
	pthread_mutex_lock(&d->mu);
	for (size_t k = 0; k < n; k++)
		for (size_t i = 0; ids[k][0] && i < d->n_sbxs; i++)
			if (strcmp(d->sbxs[i]->id, ids[k]) == 0)
				d->sbxs[i]->cgroup_left = false;
	free(ids);
	return left;
}

/* An ended sandbox nobody uses any more (d->mu held): no caller holds it, the agent
 * workers have let it go, its cgroup is gone. */
static bool forgettable(const struct dm_sbx *s)
{
	return dm_sbx_has_ended(s) && !__atomic_load_n(&s->refs, __ATOMIC_ACQUIRE) &&
	       !s->agent_served && !s->cgroup_left;
}

/* STATE/egress/<sandbox id>.jsonl of sandboxes the store no longer has (at start). */
void dm_prune_egress_logs(struct daemon *d)
{
	char *path = xasprintf("%s/egress", d->state_dir);
	DIR *dir = opendir(path);
	struct dirent *de;

	free(path);
	while (dir && (de = readdir(dir))) {
		struct store_sandbox row;
		struct al_error *err = NULL;
		char id[DM_ID_LEN + 1];
		int r;

		if (strlen(de->d_name) != DM_ID_LEN + 6 || strncmp(de->d_name, "sbx_", 4) != 0 ||
		    strcmp(de->d_name + DM_ID_LEN, ".jsonl") != 0)
			continue;
		memcpy(id, de->d_name, DM_ID_LEN);
		id[DM_ID_LEN] = '\0';
		r = store_sandbox_get(d->store, id, &row, &err);
		if (r == 1)
			store_sandbox_release(&row);
		else if (r == 0)
			unlinkat(dirfd(dir), de->d_name, 0);
		else /* it stays: the next start looks again */
			dm_log_err(d, &err, "keeping egress log %s", de->d_name);
	}
	if (dir)
		closedir(dir);
}

/* What forget_ended took out of memory leaves the store, and each sandbox's egress log
 * the disk, with d->mu dropped meanwhile; ids is freed. */
static void delete_forgotten(struct daemon *d, char (*ids)[DM_ID_LEN + 1], size_t n)
{
	if (!n)
		return;
	pthread_mutex_unlock(&d->mu);
	for (size_t k = 0; k < n; k++) {
		char *log = dm_egress_log_path(d, ids[k]);
		struct al_error *err = NULL;

		/* A failure leaves a row, pruned at a later start (store_prune). */
		if (store_sandbox_delete(d->store, ids[k], &err) < 0)
			dm_log_err(d, &err, "forgetting sandbox %s", ids[k]);
		unlink(log);
		free(log);
	}
	free(ids);
	pthread_mutex_lock(&d->mu);
}

/*
 * Retention (d->mu held; dropped around the store): an ended sandbox is forgotten, with
 * its commands and their output, its egress log and its rows, once it ended retain_ms
 * ago, or when more than max_ended ended ones are held or their output in the store is
 * over ended_output_max (the oldest first). Without it the daemon kept every sandbox it
 * ever made: memory, every look-up and every timer round grew with them (3,000
 * create+stop cycles: +17 MB), and the store without end.
 */
static void forget_ended(struct daemon *d)
{
	uint64_t retain = d->opts.retain_ms ? d->opts.retain_ms : DM_RETAIN_DEFAULT_MS;
	size_t max = d->opts.max_ended ? d->opts.max_ended : DM_MAX_ENDED_DEFAULT;
	uint64_t max_bytes =
	    d->opts.ended_output_max ? d->opts.ended_output_max : DM_ENDED_OUTPUT_DEFAULT;
	int64_t now = dm_now_ms();
	char(*ids)[DM_ID_LEN + 1] = NULL;
	size_t n = 0, ended = 0;
	uint64_t bytes = 0; /* the output the ended ones hold in the store */

	for (size_t i = 0; i < d->n_sbxs; i++)
		if (dm_sbx_has_ended(d->sbxs[i]))
			ended++, bytes += d->sbxs[i]->out_total;
	for (;;) {
		bool over = ended > max || bytes > max_bytes;
		size_t pick = d->n_sbxs;

		for (size_t i = 0; i < d->n_sbxs; i++) {
			const struct dm_sbx *s = d->sbxs[i];

			if (!forgettable(s))
				continue;
			if (s->stopped_ms + (int64_t)retain <= now) {
				pick = i;
				break;
			}
			if (over &&
			    (pick == d->n_sbxs || s->stopped_ms < d->sbxs[pick]->stopped_ms))
				pick = i;
		}
		if (pick == d->n_sbxs)
			break;
		ids = xrealloc(ids, (n + 1) * sizeof(*ids));
		strcpy(ids[n++], d->sbxs[pick]->id);
		dm_sub_floor0(&bytes, d->sbxs[pick]->out_total);
		dm_sbx_free(d->sbxs[pick]);
		memmove(&d->sbxs[pick], &d->sbxs[pick + 1],
			(d->n_sbxs - pick - 1) * sizeof(*d->sbxs));
		d->n_sbxs--;
		ended--;
	}
	delete_forgotten(d, ids, n);
}

uint64_t dm_cmd_rec_bytes(const struct dm_cmd *c)
{
	return strlen(c->argv_json) + (c->cwd ? strlen(c->cwd) : 0);
}

static void ids_add(struct dm_ids *ids, const char *id)
{
	if (ids->n == ids->cap)
		ids->id =
		    xrealloc(ids->id, (ids->cap = ids->cap ? 2 * ids->cap : 64) * sizeof(*ids->id));
	strcpy(ids->id[ids->n++], id);
}

void dm_ids_delete(struct daemon *d, struct dm_ids *ids)
{
	struct al_error *err = NULL;

	/* A failure leaves the row until its sandbox's rows go. */
	for (size_t k = 0; k < ids->n; k++)
		if (store_command_delete(d->store, ids->id[k], &err) < 0)
			dm_log_err(d, &err, "forgetting command %s", ids->id[k]);
	free(ids->id);
	*ids = (struct dm_ids){0};
}

/*
 * A sandbox keeps its newest max_cmds finished commands, and no more of their records
 * (argv, cwd) than the records budget: older finished ones nobody holds are forgotten
 * with their output. Without it a client running `true` in a loop grew the daemon by ~360
 * bytes a command (~2 GB an hour at full speed) and the store without end, and 120
 * commands with ~512 KiB of arguments each held 52 MiB. One pass keeps the others in
 * order (a memmove per command would move the whole array each time, under the lock: at
 * 1,500 commands/s and 10,000 kept, ~120 MB a second). One that is held, or not in the
 * store yet, stays past its turn; by count the newest max stay regardless.
 */
bool dm_cmds_trim(struct daemon *d, struct dm_sbx *s, uint64_t extra, struct dm_ids *ids)
{
	size_t max = d->opts.max_cmds ? d->opts.max_cmds : DM_MAX_CMDS_DEFAULT;
	uint64_t budget =
	    d->opts.sbx_records_max ? d->opts.sbx_records_max : DM_SBX_RECORDS_DEFAULT;
	size_t due = 0, kept = 0;

	if (s->n_cmds <= max && s->rec_total + extra <= budget)
		return true;
	for (size_t k = 0; k < s->n_cmds; k++)
		due += s->cmds[k]->finished;
	due = due > max ? due - max : 0;
	for (size_t k = 0; k < s->n_cmds; k++) {
		struct dm_cmd *c = s->cmds[k];
		bool over = s->rec_total + extra > budget;

		if (c->finished && (due || over)) {
			due -= due > 0;
			if (c->row_stored && !__atomic_load_n(&c->refs, __ATOMIC_ACQUIRE)) {
				ids_add(ids, c->id);
				/* Its output and record leave the store: room in the budgets. */
				dm_sub_floor0(&s->out_total, c->stored[0] + c->stored[1]);
				dm_sub_floor0(&s->rec_total, dm_cmd_rec_bytes(c));
				dm_cmd_free(c);
				continue;
			}
		}
		s->cmds[kept++] = c;
	}
	s->n_cmds = kept;
	return s->rec_total + extra <= budget;
}

/* Once a second, every sandbox (d->mu held; dropped around the store). */
static void forget_old_cmds(struct daemon *d)
{
	struct dm_ids ids = {0};

	for (size_t i = 0; i < d->n_sbxs; i++)
		dm_cmds_trim(d, d->sbxs[i], 0, &ids);
	if (!ids.n)
		return;
	pthread_mutex_unlock(&d->mu);
	dm_ids_delete(d, &ids);
	pthread_mutex_lock(&d->mu);
}

/*
 * d->mu held: an expired sandbox that is a persistent name's current session keeps its
 * files (a snapshot, as its stop through the API takes) before the timer stops it. Once
 * per sandbox (s->expiry_snapped); d->mu is dropped meanwhile: true if it was.
 */
static bool expiry_snapshot(struct daemon *d, struct dm_sbx *s)
{
	struct al_error *err = NULL;
	char id[DM_ID_LEN + 1];
	char *team;
	uint64_t exp = 0;
	json_t *view = NULL;

	if (s->expiry_snapped || !s->team[0])
		return false;
	s->expiry_snapped = true;
	team = xstrdup(s->team);
	strcpy(id, s->id);
	dm_sbx_hold(s);
	pthread_mutex_unlock(&d->mu);
	if (dm_name_persistent(d, team, id, &exp) &&
	    (dm_snapshot_create(d, team, id, exp, &view, &err) < 0 ||
	     dm_name_snapshotted(d, team, id, json_string_value(json_object_get(view, "id")),
				 &err) < 0))
		dm_log_err(d, &err, "sandbox %s: its snapshot at expiry", id);
	json_decref(view);
	free(team);
	pthread_mutex_lock(&d->mu);
	dm_sbx_put(s);
	return true;
}

/* Sandboxes past their expiry are stopped; commands past their timeout are killed; once
 * a second, ended sandboxes past retention and old finished commands are forgotten. */
void *dm_timer_main(void *arg)
{
	struct daemon *d = arg;
	int64_t next_forget = 0;

	pthread_mutex_lock(&d->mu);
	while (!d->closing) {
		struct timespec ts;
		int64_t now = dm_now_ms();

		for (size_t i = 0; i < d->n_sbxs; i++) {
			struct dm_sbx *s = d->sbxs[i];

			if (s->state != DM_SBX_RUNNING)
				continue;
			if (s->expires_ms <= now) {
				if (expiry_snapshot(d, s))
					break; /* d->mu was dropped: the list may have changed */
				for (size_t j = 0; j < s->n_cmds; j++)
					if (!s->cmds[j]->finished)
						s->cmds[j]->timed_out = true;
				dm_sbx_stop_locked(d, s, DM_SBX_STOPPED);
				break; /* the list may have changed while unlocked */
			}
			for (size_t j = 0; j < s->n_cmds; j++) {
				struct dm_cmd *c = s->cmds[j];
				char cid[DM_ID_LEN + 1];

				if (c->finished || !c->deadline_ms ||
				    (int64_t)c->deadline_ms > now || c->timed_out)
					continue;
				c->timed_out = true;
				strcpy(cid, c->id);
				pthread_mutex_unlock(&d->mu);
				kill_cmd(s, cid, SIGKILL);
				pthread_mutex_lock(&d->mu);
			}
		}
		dm_reclaim_cgroups(d);
		if (now >= next_forget) {
			forget_ended(d);
			forget_old_cmds(d);
			dm_snaps_expire(d);
			next_forget = now + 1000;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000;
		if (ts.tv_nsec >= 1000000000)
			ts.tv_sec++, ts.tv_nsec -= 1000000000;
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* We are the subreaper of every sandbox's PID 1 once its spawner exits. */
void *dm_reaper_main(void *arg)
{
	struct daemon *d = arg;

	while (!__atomic_load_n(&d->closing, __ATOMIC_RELAXED)) {
		/* __WALL: sandbox PID 1s are CLONE_PARENT children without an exit signal. */
		if (waitpid(-1, NULL, __WALL) < 0) {
			struct timespec ts = {0, 50 * 1000000};
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}
