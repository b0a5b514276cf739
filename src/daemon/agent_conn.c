/* SPDX-License-Identifier: MIT */
/*
 * airlockd's side of the agent protocol: one connection per sandbox, read by the
 * daemon's agent workers (agent_io.c). Everything the agent says is decoded strictly
 * (proto_decode): the agent shares its sandbox with hostile code.
 */
#include "daemon/internal.h"
#include "jail/sandbox.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint32_t dm_agent_next_id(struct dm_sbx *s)
{
	return __atomic_add_fetch(&s->next_req, 1, __ATOMIC_RELAXED) | 1u;
}

/* Writes b to the agent (send_mu taken, then held while it writes). timeout_ms < 0 waits
 * as long as the agent takes; otherwise -ETIMEDOUT once it has passed, lock included. */
static int send_frame(struct dm_sbx *s, struct proto_buf *b, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? 0 : dm_mono_ns() + (int64_t)timeout_ms * 1000000;
	size_t off = 0;
	int r = proto_finish(b);

	if (timeout_ms < 0) {
		pthread_mutex_lock(&s->send_mu);
	} else {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += timeout_ms / 1000;
		until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		if (pthread_mutex_timedlock(&s->send_mu, &until) != 0) {
			proto_buf_free(b);
			return -ETIMEDOUT;
		}
	}
	while (r == 0 && off < b->len) {
		ssize_t n = s->agent_fd < 0
				? -1
				: send(s->agent_fd, b->data + off, b->len - off,
				       MSG_NOSIGNAL | (timeout_ms < 0 ? 0 : MSG_DONTWAIT));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && timeout_ms >= 0) {
			int64_t left = deadline - dm_mono_ns();
			struct pollfd p = {.fd = s->agent_fd, .events = POLLOUT};

			if (left <= 0) {
				r = -ETIMEDOUT;
				break;
			}
			poll(&p, 1, (int)(left / 1000000) + 1);
			continue;
		}
		if (n <= 0)
			r = -EPIPE;
		else
			off += (size_t)n;
	}
	pthread_mutex_unlock(&s->send_mu);
	proto_buf_free(b);
	return r;
}

int dm_agent_send(struct dm_sbx *s, struct proto_buf *b)
{
	return send_frame(s, b, -1);
}

int dm_agent_request(struct daemon *d, struct dm_sbx *s, struct proto_buf *b, uint32_t *pid,
		     struct al_error **err)
{
	uint32_t id = ((uint32_t)b->data[8]) | ((uint32_t)b->data[9] << 8) |
		      ((uint32_t)b->data[10] << 16) | ((uint32_t)b->data[11] << 24);
	struct dm_pending *p = NULL;
	struct timespec ts;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < sizeof(s->pending) / sizeof(s->pending[0]) && !p; i++)
		if (s->pending[i].id == 0)
			p = &s->pending[i];
	if (!p) {
		pthread_mutex_unlock(&d->mu);
		proto_buf_free(b);
		return al_error_msg(err, EBUSY, "too many requests in flight to the sandbox");
	}
	*p = (struct dm_pending){.id = id};
	pthread_mutex_unlock(&d->mu);
	r = dm_agent_send(s, b);
	if (r < 0) {
		pthread_mutex_lock(&d->mu);
		p->id = 0;
		pthread_mutex_unlock(&d->mu);
		if (r == -E2BIG)
			return al_error_msg(err, E2BIG, "request too large for the agent protocol");
		return al_error_msg(err, ESRCH, "the sandbox's agent is not reachable");
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&d->mu);
	while (!p->done && r == 0 && s->agent_fd >= 0)
		r = pthread_cond_timedwait(&s->cv, &d->mu, &ts);
	if (!p->done)
		r = al_error_msg(err, r ? ETIMEDOUT : ESRCH, "no answer from the sandbox's agent");
	else if (p->err)
		r = al_error_msg(err, p->err, "agent: %s", p->msg ? p->msg : "(no message)");
	else if (pid)
		*pid = p->pid;
	free(p->msg);
	*p = (struct dm_pending){.id = 0};
	pthread_mutex_unlock(&d->mu);
	return r;
}

/*
 * Commands that ended in one batch of frames, written to the store once the worker has
 * let go of d->mu and woken the waiters: the client's answer does not wait on SQLite
 * (~40 us a command), nor does every other request on d->mu. Until the row is written
 * a restarted daemon still learns the end from the agent (HELLO, REPLAY, EXIT).
 */
#define DM_FINISH_BATCH 16

struct finish_batch {
	struct dm_cmd_end row[DM_FINISH_BATCH];
	size_t n;
};

static void finish_flush(struct daemon *d, struct finish_batch *fb)
{
	for (size_t i = 0; i < fb->n; i++)
		dm_cmd_end_store(d, &fb->row[i]);
	fb->n = 0;
}

/* Reason vocabulary of a finished command, as in `airlock run`. */
static void finish_cmd(struct daemon *d, struct dm_cmd *c, const struct proto_msg *m,
		       struct finish_batch *fb)
{
	int st = m->status, e = (m->present & (1u << PT_ERRNO)) ? m->err : 0;
	uint64_t peak = 0, ooms = 0;
	enum al_reason reason;

	c->exit_code = -1;
	c->signal = 0;
	if (e > 0) {
		reason = AL_REASON_EXEC_FAILED;
		c->exit_code = e == ENOENT ? AL_EXIT_NOTFOUND : AL_EXIT_NOEXEC;
	} else if (e < 0) {
		reason = AL_REASON_SETUP_FAILED;
	} else if (WIFEXITED(st)) {
		reason = AL_REASON_EXITED;
		c->exit_code = WEXITSTATUS(st);
	} else {
		c->signal = WIFSIGNALED(st) ? WTERMSIG(st) : SIGKILL;
		jail_sandbox_stats(c->sbx->id, &peak, &ooms);
		reason = c->timed_out			      ? AL_REASON_TIMEOUT
			 : c->signal == SIGSYS		      ? AL_REASON_SECCOMP
			 : (c->signal == SIGKILL && ooms > 0) ? AL_REASON_OOM
							      : AL_REASON_SIGNALED;
	}
	c->finished = true;
	c->reason = reason;
	c->finished_ms = dm_now_ms();
	dm_metrics_cmd_end(d, c);
	if (!c->row_stored)
		return; /* the start path writes the end right after the row */
	if (fb->n == DM_FINISH_BATCH)
		finish_flush(d, fb); /* rare: a full batch is written now, under d->mu */
	dm_cmd_end_copy(c, &fb->row[fb->n++]);
}

static struct dm_cmd *msg_cmd(struct dm_sbx *s, const struct proto_msg *m)
{
	char id[DM_ID_LEN + 1];

	if (!m->cmd_id || m->cmd_id_len != DM_ID_LEN)
		return NULL;
	memcpy(id, m->cmd_id, DM_ID_LEN);
	id[DM_ID_LEN] = '\0';
	return dm_find_cmd(s, id);
}

/*
 * Wake the sandbox's waiters if a frame changed something since they were last woken (d->mu
 * held). The worker does this after it has let go of d->mu where it can: a waiter woken
 * while the lock is held only wakes to sleep again on the lock (a second switch each way,
 * twice a command); before it lets the lock go in the middle of a batch, it does it here.
 */
static bool take_wake(struct dm_sbx *s)
{
	bool wake = s->gen != s->woken_gen;

	s->woken_gen = s->gen;
	return wake;
}

static void wake_now(struct dm_sbx *s)
{
	if (take_wake(s))
		pthread_cond_broadcast(&s->cv);
}

/*
 * After (re)connecting: ask for whatever the store is missing of unfinished commands. Sent
 * by an agent worker, which must not wait on one agent for long: an agent that does not
 * take its replay within DM_AGENT_REPLAY_MS breaks the protocol (-1).
 *
 * One REPLAY per command, of both streams from the lower of the two offsets stored (the
 * store drops the bytes it holds already): the agent's EXIT then comes after all of the
 * command's output. With one REPLAY per stream, the first one's EXIT finished the command
 * while the other stream's bytes were still on their way, and a client that read the
 * logs as soon as the command ended could miss them.
 */
static int replay_missing(struct daemon *d, struct dm_sbx *s)
{
	int r = 0;

	for (size_t i = 0; i < s->n_cmds && r == 0; i++) {
		struct dm_cmd *c = s->cmds[i];
		struct proto_buf b = {0};
		char id[DM_ID_LEN + 1];
		uint64_t off;

		if (c->finished)
			continue;
		strcpy(id, c->id);
		off = c->stored[0] < c->stored[1] ? c->stored[0] : c->stored[1];
		wake_now(s);
		pthread_mutex_unlock(&d->mu);
		proto_begin(&b, PROTO_REPLAY, 0);
		proto_put_str(&b, PT_CMD_ID, id, strlen(id));
		proto_put_u64(&b, PT_OFFSET, off);
		r = send_frame(s, &b, DM_AGENT_REPLAY_MS);
		pthread_mutex_lock(&d->mu);
	}
	return r < 0 ? -1 : 0;
}

/*
 * One sandbox's output may keep the store busy at most DM_OUTPUT_STORE_SHARE
 * percent of the time: each append's duration, scaled, becomes a debt, which its
 * connection pays as a pause before it is read again (agent_io.c). While it
 * pauses, the agent's send blocks, and so does the command writing its pipe: a
 * flood is slowed down at its source (nothing is dropped) instead of taking the
 * store, which every command of every sandbox needs, and a host CPU, on the
 * sandbox's behalf.
 */
static void pace_output(struct dm_sbx *s, int64_t spent_ns)
{
	s->out_debt_ns += spent_ns * (100 - DM_OUTPUT_STORE_SHARE) / DM_OUTPUT_STORE_SHARE;
}

int64_t dm_agent_take_pause(struct dm_sbx *s)
{
	int64_t debt = s->out_debt_ns;

	if (debt < DM_OUTPUT_PAUSE_MIN_NS)
		return 0; /* a trickle of output costs nothing */
	s->out_debt_ns = 0;
	return debt;
}

/*
 * An OUTPUT frame (d->mu held on entry and on return). The store write runs
 * without d->mu: an output flood in one sandbox must not hold the lock every
 * request of every other sandbox needs. c is held meanwhile (the cap on a
 * sandbox's commands forgets only unheld ones); frames of one sandbox are
 * handled in order by one worker at a time, so output is stored before its EXIT.
 */
static void store_output(struct daemon *d, struct dm_sbx *s, struct dm_cmd *c,
			 const struct proto_msg *m)
{
	size_t len = m->data_len;
	struct al_error *err = NULL;
	/* One stream's cap: the host's disk is not the sandbox's to fill. */
	uint64_t cap = d->opts.cmd_output_max ? d->opts.cmd_output_max : DM_CMD_OUTPUT_DEFAULT;
	uint64_t budget;
	int64_t t0;
	int r;

	if (!c || m->stream < 1 || m->stream > 2)
		return;
	if (m->offset + len <= c->stored[m->stream - 1])
		return; /* a replay of bytes stored already: nothing to store, nothing cut */
	if (m->offset >= cap) {
		c->truncated = true;
		return;
	}
	if (m->offset + len > cap) {
		len = (size_t)(cap - m->offset);
		c->truncated = true;
	}
	/* The sandbox's own budget, all its commands together: the host's disk is shared. */
	budget = d->opts.sbx_output_max ? d->opts.sbx_output_max : DM_SBX_OUTPUT_DEFAULT;
	if (s->out_total >= budget) {
		c->truncated = true;
		return;
	}
	if (len > budget - s->out_total) {
		len = (size_t)(budget - s->out_total);
		c->truncated = true;
	}
	wake_now(s);
	dm_cmd_hold(c); /* not forgotten while we store for it */
	pthread_mutex_unlock(&d->mu);
	t0 = dm_mono_ns();
	r = store_output_append(d->store, c->id, m->stream, m->offset, m->data, len, &err);
	pace_output(s, dm_mono_ns() - t0);
	if (r < 0) /* the worker has nobody to tell: the chunk is missing from the logs */
		dm_log_err(d, &err, "command %s: %zu bytes of output at offset %llu", c->id, len,
			   (unsigned long long)m->offset);
	pthread_mutex_lock(&d->mu);
	dm_cmd_put(c);
	if (r >= 0)
		c->out_gen++; /* readers (dm_logs_next) look in the store again */
	if (r >= 0 && m->offset + len > c->stored[m->stream - 1]) {
		uint64_t from =
		    m->offset > c->stored[m->stream - 1] ? m->offset : c->stored[m->stream - 1];

		s->out_total += m->offset + len - from; /* what a replay re-sent counts once */
		c->stored[m->stream - 1] = m->offset + len;
	}
}

/* One frame from the agent (d->mu held); -1 if the agent broke the protocol. */
static int handle(struct daemon *d, struct dm_sbx *s, const struct proto_msg *m,
		  struct finish_batch *fb)
{
	struct dm_cmd *c = msg_cmd(s, m);

	switch (m->type) {
	case PROTO_HELLO:
		/* One a connection: a second one asks for nothing more (each replay is sent
		 * by the worker that reads this agent). */
		if (s->hello_seen)
			break;
		s->hello_seen = true;
		s->agent_version = m->version;
		if (replay_missing(d, s) < 0)
			return -1;
		break;
	case PROTO_OK:
	case PROTO_ERROR:
		for (size_t i = 0; i < sizeof(s->pending) / sizeof(s->pending[0]); i++) {
			struct dm_pending *p = &s->pending[i];

			if (p->id != m->id || p->done || m->id == 0)
				continue;
			p->done = true;
			p->pid = m->pid;
			p->err = m->type == PROTO_ERROR ? (m->err > 0 ? m->err : EIO) : 0;
			if (m->message && p->err)
				p->msg = xasprintf("%.*s",
						   (int)(m->message_len < DM_AGENT_MSG_MAX
							     ? m->message_len
							     : DM_AGENT_MSG_MAX),
						   m->message);
		}
		break;
	case PROTO_OUTPUT:
		store_output(d, s, c, m);
		break;
	case PROTO_EXIT:
		if (c && !c->finished)
			finish_cmd(d, c, m, fb);
		break;
	default:
		break;
	}
	s->gen++; /* its waiters are woken by the worker (wake_now, take_wake) */
	return 0;
}

long dm_agent_frames(struct daemon *d, struct dm_sbx *s, const uint8_t *buf, size_t len)
{
	struct finish_batch fb = {.n = 0};
	size_t off = 0;
	long r = 0;
	bool wake;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		long need = proto_frame_size(buf + off, len - off);
		struct proto_msg m;

		if (need < 0) {
			r = -1;
			break;
		}
		if (need == 0 || (size_t)need > len - off)
			break;
		/* A frame that does not decode is a lying agent: it is dropped. */
		if (proto_decode(buf + off, (size_t)need, &m) < 0 || handle(d, s, &m, &fb) < 0) {
			r = -1;
			break;
		}
		off += (size_t)need;
	}
	wake = take_wake(s);
	pthread_mutex_unlock(&d->mu);
	if (wake)
		pthread_cond_broadcast(&s->cv); /* only this sandbox's waiters wake */
	finish_flush(d, &fb); /* what was decoded before a bad frame still counts */
	return r < 0 ? -1 : (long)off;
}

void dm_agent_gone(struct daemon *d, struct dm_sbx *s)
{
	uint64_t st = 0;

	pthread_mutex_lock(&d->mu);
	pthread_mutex_lock(&s->send_mu);
	close(s->agent_fd); /* and so out of the workers' epoll set */
	s->agent_fd = -1;
	pthread_mutex_unlock(&s->send_mu);
	/* The agent is PID 1: its socket closing means the sandbox is gone (or it broke the
	 * protocol, and then it is killed: we cannot trust it any more). */
	if (s->state == DM_SBX_RUNNING) {
		pid_t pid = s->pid;
		uint64_t start = s->start_time;
		char id[DM_ID_LEN + 1];
		bool same, left;

		strcpy(id, s->id);
		pthread_mutex_unlock(&d->mu);
		/* PID 1 may be gone already (the agent killed, say by the OOM killer): its
		 * cgroup must go all the same. */
		same = jail_proc_start_time(pid, &st) == 0 && st == start;
		left = jail_sandbox_kill(same ? pid : 0, start, id) < 0;
		pthread_mutex_lock(&d->mu);
		s->cgroup_left |= left;
		dm_sbx_ended(d, s, DM_SBX_FAILED);
	}
	s->gen++;
	pthread_cond_broadcast(&s->cv);
	/* Last, under d->mu up to the end: only now may the retention forget it. */
	s->agent_served = false;
	pthread_mutex_unlock(&d->mu);
}

int dm_agent_connect(struct daemon *d, struct dm_sbx *s, struct al_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, e;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s.sock", d->sock_dir, s->id);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return al_error_set(err, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = errno;
		close(fd);
		return al_error_set(err, e, "connect to the agent at '%s'", sa.sun_path);
	}
	s->agent_fd = fd;
	s->hello_seen = false;
	s->agent_served = true;
	/* Last: once watched, a worker may read it (agent_io.c). */
	if (dm_agent_io_watch(d, s, err) < 0) {
		close(fd);
		s->agent_fd = -1;
		s->agent_served = false;
		return -1;
	}
	return 0;
}
