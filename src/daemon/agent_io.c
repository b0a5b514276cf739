/* SPDX-License-Identifier: MIT */
/*
 * The threads that read every sandbox's agent connection: DM_AGENT_WORKERS of them on one
 * epoll set, whatever the number of sandboxes (a thread per sandbox cost each idle sandbox
 * a kernel stack, a task and its stack's pages: bench/density).
 *
 * Each connection is registered EPOLLONESHOT: one worker at a time handles a sandbox, so
 * its frames are handled in the order the agent sent them (its output is stored before
 * its EXIT), and the connection is armed again only when that worker is done with it. A
 * turn reads at most AIO_READS_PER_TURN times, so one busy agent cannot hold a worker.
 *
 * Output pacing (agent_conn.c, DM_OUTPUT_STORE_SHARE): a sandbox that owes a pause is not
 * armed again until it has passed. Its connection waits on a list that one timerfd in the
 * same epoll set walks; no worker sleeps for it, and the agent's send blocks meanwhile, as
 * does the command writing its pipe.
 *
 * Bytes are read into the worker's scratch buffer; only what is left of a frame that did
 * not arrive whole is kept with the sandbox (s->rx), so an idle sandbox holds no buffer.
 */
#include "daemon/internal.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define AIO_SCRATCH (256u * 1024)
#define AIO_READS_PER_TURN 8
#define AIO_RX_MIN 4096

struct paused {
	struct dm_sbx *s;
	int64_t until_ns;
};

struct dm_agent_io {
	int epfd;
	int timerfd; /* its epoll data is NULL: every other entry is a sandbox */
	pthread_mutex_t pace_mu;
	struct paused *paused; /* connections waiting out an output pause (pace_mu) */
	size_t n_paused, cap_paused;
	int64_t armed_ns; /* when timerfd fires next (pace_mu); 0 when disarmed */
};

static int arm(struct dm_agent_io *io, int op, int fd, void *ptr)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = ptr};

	return epoll_ctl(io->epfd, op, fd, &ev);
}

/* The timer fires at when (CLOCK_MONOTONIC), or never if when is 0 (pace_mu held). */
static void set_timer(struct dm_agent_io *io, int64_t when)
{
	struct itimerspec its = {0};

	if (when > 0) {
		its.it_value.tv_sec = (time_t)(when / 1000000000);
		its.it_value.tv_nsec = (long)(when % 1000000000);
	}
	timerfd_settime(io->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
	io->armed_ns = when;
}

int dm_agent_io_open(struct daemon *d, struct al_error **err)
{
	struct dm_agent_io *io = xzalloc(sizeof(*io));

	pthread_mutex_init(&io->pace_mu, NULL);
	io->timerfd = -1;
	io->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (io->epfd >= 0)
		io->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (io->epfd < 0 || io->timerfd < 0 || arm(io, EPOLL_CTL_ADD, io->timerfd, NULL) < 0) {
		int e = errno;

		if (io->epfd >= 0)
			close(io->epfd);
		if (io->timerfd >= 0)
			close(io->timerfd);
		free(io);
		return al_error_set(err, e, "the agents' epoll set");
	}
	d->aio = io;
	return 0;
}

int dm_agent_io_watch(struct daemon *d, struct dm_sbx *s, struct al_error **err)
{
	if (arm(d->aio, EPOLL_CTL_ADD, s->agent_fd, s) < 0)
		return al_error_set(err, errno, "watch the agent's connection");
	return 0;
}

/* s's connection waits pause_ns before it is read again. */
static void pace(struct dm_agent_io *io, struct dm_sbx *s, int64_t pause_ns)
{
	int64_t until = dm_mono_ns() + pause_ns;

	pthread_mutex_lock(&io->pace_mu);
	if (io->n_paused == io->cap_paused) {
		io->cap_paused = io->cap_paused ? 2 * io->cap_paused : 16;
		io->paused = xrealloc(io->paused, io->cap_paused * sizeof(*io->paused));
	}
	io->paused[io->n_paused++] = (struct paused){.s = s, .until_ns = until};
	if (!io->armed_ns || until < io->armed_ns)
		set_timer(io, until);
	pthread_mutex_unlock(&io->pace_mu);
}

/* The timer fired: arm the connections whose pause is over, and the timer for the next. */
static void pace_tick(struct dm_agent_io *io)
{
	uint64_t ticks;
	int64_t now = dm_mono_ns(), next = 0;
	size_t kept = 0;

	if (read(io->timerfd, &ticks, sizeof(ticks)) < 0) /* EAGAIN: another tick took it */
		ticks = 0;
	pthread_mutex_lock(&io->pace_mu);
	for (size_t i = 0; i < io->n_paused; i++) {
		struct paused p = io->paused[i];

		if (p.until_ns <= now) {
			/* Its fd is open: only the worker that paused it closes it, and it
			 * is not armed until now. */
			arm(io, EPOLL_CTL_MOD, p.s->agent_fd, p.s);
			continue;
		}
		if (!next || p.until_ns < next)
			next = p.until_ns;
		io->paused[kept++] = p;
	}
	io->n_paused = kept;
	set_timer(io, next);
	pthread_mutex_unlock(&io->pace_mu);
	arm(io, EPOLL_CTL_MOD, io->timerfd, NULL);
}

/* Room in s->rx for the rest of the frame it holds the start of; -1 if that frame is
 * impossible (over PROTO_MAX_FRAME, or a length under the header's). */
static int rx_reserve(struct dm_sbx *s)
{
	long need = proto_frame_size(s->rx.buf, s->rx.len);
	size_t want;

	if (need < 0)
		return -1;
	want = need > 0 ? (size_t)need : s->rx.len + AIO_RX_MIN;
	if (want < AIO_RX_MIN)
		want = AIO_RX_MIN;
	if (want > s->rx.cap) {
		s->rx.buf = xrealloc(s->rx.buf, want);
		s->rx.cap = want;
	}
	return 0;
}

/* s->rx's first used bytes were handled: keep the rest, and no buffer once it is empty. */
static void rx_consume(struct dm_sbx *s, size_t used)
{
	s->rx.len -= used;
	if (s->rx.len) {
		memmove(s->rx.buf, s->rx.buf + used, s->rx.len);
		return;
	}
	free(s->rx.buf);
	s->rx.buf = NULL;
	s->rx.cap = 0;
}

/* One turn of s: read, handle the whole frames, keep the rest; armed again after, unless
 * the agent is gone or its output owes a pause. */
static void serve(struct daemon *d, struct dm_sbx *s, uint8_t *scratch)
{
	for (int i = 0; i < AIO_READS_PER_TURN; i++) {
		uint8_t *dst = scratch;
		size_t room = AIO_SCRATCH;
		int64_t pause;
		ssize_t n;
		long used;

		if (s->rx.len) { /* a frame's start is waiting for its rest: read after it */
			if (rx_reserve(s) < 0)
				goto gone;
			dst = s->rx.buf + s->rx.len;
			room = s->rx.cap - s->rx.len;
		}
		n = recv(s->agent_fd, dst, room, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0)
			goto gone;
		if (s->rx.len) {
			s->rx.len += (size_t)n;
			used = dm_agent_frames(d, s, s->rx.buf, s->rx.len);
			if (used < 0)
				goto gone;
			rx_consume(s, (size_t)used);
		} else {
			used = dm_agent_frames(d, s, scratch, (size_t)n);
			if (used < 0)
				goto gone;
			if ((size_t)used < (size_t)n) {
				s->rx.len = (size_t)n - (size_t)used;
				s->rx.cap = s->rx.len < AIO_RX_MIN ? AIO_RX_MIN : s->rx.len;
				s->rx.buf = xrealloc(NULL, s->rx.cap);
				memcpy(s->rx.buf, scratch + used, s->rx.len);
			}
		}
		pause = dm_agent_take_pause(s);
		if (pause > 0) {
			pace(d->aio, s, pause);
			return;
		}
	}
	if (arm(d->aio, EPOLL_CTL_MOD, s->agent_fd, s) == 0)
		return;
gone:
	free(s->rx.buf);
	s->rx = (struct dm_agent_rx){0};
	dm_agent_gone(d, s);
}

static void *worker_main(void *arg)
{
	struct daemon *d = arg;
	uint8_t *scratch = xrealloc(NULL, AIO_SCRATCH);

	for (;;) {
		struct epoll_event ev;

		/* One event a call: a worker does not hold events that another, idle, could
		 * serve meanwhile. */
		if (epoll_wait(d->aio->epfd, &ev, 1, -1) != 1)
			continue;
		if (ev.data.ptr)
			serve(d, ev.data.ptr, scratch);
		else
			pace_tick(d->aio);
	}
	return NULL;
}

int dm_agent_io_start(struct daemon *d, struct al_error **err)
{
	pthread_attr_t attr;
	pthread_t t;
	int e = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, DM_WORKER_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < DM_AGENT_WORKERS && !e; i++)
		e = pthread_create(&t, &attr, worker_main, d);
	pthread_attr_destroy(&attr);
	if (e)
		return al_error_set(err, e, "start the agent workers");
	return 0;
}
