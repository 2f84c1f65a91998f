/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Completions in, events out; the overflow recovery; sleeping on the
 * wake-up eventfd (doc/client.md sections 2, 5).
 *
 * The gateway never blocks on a full completion ring: it drops the
 * completion, counts it in cq.overflow and leaves the truth in the room's
 * slot. Once the ring is drained and the count grew, the slots of the
 * rooms this client holds are read and every state the engine has not
 * been told is reported as an EGW_CLIENT_RECOVERED event. A slot keeps its
 * state and error after the gateway cleared its room (only an OPEN of this
 * client could reuse it), so a room that ended unseen is reported with its
 * final state. Completions that arrive after the slot told the same thing
 * are dropped, so the engine sees every state once.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "client_priv.h"

#define SPIN_STEP_MIN_NS 20000u     /* sleeping without an eventfd */
#define SPIN_STEP_MAX_NS 1000000u

/* A negated errno answers a refused command; room failures are -(1000+w). */
static bool
refused(int32_t result)
{
	return result < 0 && result > -1000;
}

static bool
is_open(uint8_t op)
{
	return op == EGW_OP_SEND_OPEN || op == EGW_OP_RECV_OPEN;
}

static void
event_from(struct egw_client_event *ev, const struct egw_attach_cqe *q)
{
	*ev = (struct egw_client_event){
		.tag = q->tag, .room = q->room, .result = q->result,
		.slot = q->slot, .op = q->op, .state = q->state,
		.flags = (q->flags & EGW_CQEF_MORE ? EGW_CLIENT_EV_MORE : 0) |
			 (q->flags & EGW_CQEF_CACHED ? EGW_CLIENT_EV_CACHED : 0),
		.total_tokens = q->total_tokens, .nruns = q->nruns,
		.landed_tokens = q->landed_tokens,
	};
}

/* @return true when the completion is reported to the engine. */
static bool
take_cqe(struct egw_client *c, const struct egw_attach_cqe *q,
	 struct egw_client_event *ev)
{
	struct client_slot *s = q->slot < c->map.nslots ? &c->slots[q->slot]
							: NULL;
	bool ours = s != NULL && q->room != 0 && s->room == q->room;

	event_from(ev, q);
	if (q->op == EGW_OP_NOP &&
	    (q->tag & CLIENT_BARRIER_MASK) == CLIENT_BARRIER_TAG) {
		c->barrier_done = true;
		c->barrier_answered = (uint32_t)q->tag;
		if (c->barrier_answered == c->barrier_seq)
			c->barrier_sent = false;
		return false; /* the library's own */
	}
	if (q->op == EGW_OP_NOP || q->op == EGW_OP_LOOKUP ||
	    q->op == EGW_OP_PEERS)
		return true; /* no room: the engine matches the tag or op */
	if (refused(q->result)) {
		ev->flags = EGW_CLIENT_EV_REFUSED;
		/* a refused OPEN never took the slot: the room is over */
		if (ours && is_open(q->op) && s->op == q->op) {
			s->room = 0;
			ev->flags |= EGW_CLIENT_EV_END;
		}
		return true;
	}
	if (!ours)
		return false; /* the room's end was already read from its slot */
	if (s->recovered && s->state == q->state && (q->flags & EGW_CQEF_MORE))
		return false; /* told already, from the slot */
	s->recovered = false;
	s->seen = true;
	s->state = q->state;
	if (!(q->flags & EGW_CQEF_MORE)) {
		s->room = 0;
		ev->flags |= EGW_CLIENT_EV_END;
	}
	return true;
}

/* A state the gateway writes just before it clears the slot's room. */
static bool
final_state(const struct client_slot *s, uint32_t state)
{
	return state == EGW_ATTACH_STATE_FAILED ||
	       (state == EGW_ATTACH_STATE_SUCCESS &&
		(s->op == EGW_OP_SEND_OPEN || s->released));
}

/*
 * An OPEN whose every completion was lost, found with its slot free: the
 * gateway refused it or the room failed unseen - or the gateway has not
 * acted on it yet. A NOP put in the ring after the OPEN tells them apart:
 * commands are taken in order, so once the NOP is answered the OPEN was
 * acted on. (A NOP whose answer may have been dropped is sent again.) The
 * slot's state and error may be an earlier room's, so the room is
 * reported Failed, with the slot's error only when the slot says Failed.
 * @return true when the room is to be reported ended.
 */
static bool
lost_open(struct egw_client *c, const struct client_slot *s)
{
	if (c->barrier_done &&
	    (int32_t)(c->barrier_answered - s->sq_seq) > 0)
		return true;
	if (!c->barrier_sent ||
	    (int32_t)(c->barrier_seq - s->sq_seq) <= 0 ||
	    c->barrier_ov != c->overflow_seen)
		(void)client_barrier(c); /* a full ring: tried again */
	return false;
}

/* Report what the slots say and the engine was not told. @return events
 * written; c->recovering stays set while a slot is still to be read. */
static unsigned int
recover(struct egw_client *c, struct egw_client_event *ev, unsigned int max)
{
	unsigned int n = 0;
	bool again = false, full = false;

	for (uint32_t i = 0; i < c->map.nslots; i++) {
		struct client_slot *s = &c->slots[i];
		const struct egw_attach_slot *sl;
		uint64_t room;
		uint32_t state;
		int32_t result;
		bool ended;

		if (s->room == 0)
			continue;
		if (n == max) {
			again = full = true;
			break;
		}
		sl = egw_attach_slot_at(&c->map, i);
		room = __atomic_load_n(&sl->room, __ATOMIC_ACQUIRE);
		state = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
		ended = room != s->room;
		if (ended && !s->seen) {
			if (!lost_open(c, s)) {
				again = true;
				continue;
			}
			state = EGW_ATTACH_STATE_FAILED;
			result = sl->state == EGW_ATTACH_STATE_FAILED &&
				 sl->error != 0 ? sl->error : -ENODATA;
		} else {
			result = sl->error;
		}
		/* a last state is reported once the slot is cleared, so that
		 * it comes once, with EGW_CLIENT_EV_END */
		if (!ended && final_state(s, state)) {
			again = true;
			continue;
		}
		if (!ended && state == s->state)
			continue;
		ev[n++] = (struct egw_client_event){
			.room = s->room, .result = result, .slot = i,
			.op = EGW_CLIENT_RECOVERED, .state = state,
			.flags = ended ? EGW_CLIENT_EV_END : EGW_CLIENT_EV_MORE,
			.total_tokens = sl->total_tokens, .nruns = sl->nruns,
		};
		s->state = (uint8_t)state;
		s->recovered = true;
		s->seen = true;
		if (ended)
			s->room = 0;
	}
	c->recovering = again;
	c->recover_full = full;
	return n;
}

int
client_check_socket(struct egw_client *c)
{
	struct pollfd p = { .fd = c->sock, .events = POLLIN };

	if (c->gone != 0)
		return c->gone;
	/* the gateway sends nothing after the welcome: anything readable is
	 * its end of the socket closing */
	if (poll(&p, 1, 0) > 0 && p.revents != 0) {
		client_error("the gateway closed the attach socket");
		c->gone = -ECONNRESET;
		client_revoke(c);
	}
	return c->gone;
}

static bool
ready(struct egw_client *c)
{
	return egw_attach_ring_count(&c->map.cq) > 0 || c->recover_full ||
	       __atomic_load_n(&c->map.cq.ctl->overflow, __ATOMIC_ACQUIRE) !=
		       c->overflow_seen;
}

int
egw_client_poll(struct egw_client *c, struct egw_client_event *ev,
		unsigned int max)
{
	struct egw_attach_cqe q;
	unsigned int n = 0;
	uint32_t ov;
	int rc = 0;

	egw_client_beat(c);
	/* a client given up (or gone) hears no event any more: an event
	 * would lead it to pool memory that holds no room of its own */
	if (c->gone != 0 || egw_client_lost(c) != EGW_LOST_NONE)
		return client_gone_check(c, false);
	while (n < max && (rc = egw_attach_ring_get(&c->map.cq, &q)) == 1)
		if (take_cqe(c, &q, &ev[n]))
			n++;
	if (rc < 0) {
		client_error("the gateway's completion ring tail is impossible");
		c->gone = rc;
		client_revoke(c);
		return rc;
	}
	if (n < max && egw_attach_ring_count(&c->map.cq) == 0) {
		ov = __atomic_load_n(&c->map.cq.ctl->overflow,
				     __ATOMIC_ACQUIRE);
		if (ov != c->overflow_seen) {
			c->overflow_seen = ov;
			c->recovering = true;
		}
		if (c->recovering)
			n += recover(c, ev + n, max - n);
	}
	if (n == 0 && c->gone == 0) {
		uint64_t now = client_now_ns();

		if (now >= c->sock_check_ns) {
			c->sock_check_ns = now + CLIENT_SOCKET_CHECK_NS;
			client_check_socket(c);
		}
	}
	if (n == 0 && c->gone != 0)
		return c->gone;
	return (int)n;
}

uint32_t
egw_client_overflow(const struct egw_client *c)
{
	return __atomic_load_n(&c->map.cq.ctl->overflow, __ATOMIC_ACQUIRE);
}

/* Sleep on the eventfd and the socket for up to `ns`. */
static int
sleep_wakeup(struct egw_client *c, uint64_t ns)
{
	struct pollfd p[2] = { { .fd = c->efd, .events = POLLIN },
			       { .fd = c->sock, .events = POLLIN } };
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	uint64_t v;
	int rc = 0;

	__atomic_fetch_or(&c->map.cq.ctl->flags, EGW_RING_F_NEED_WAKEUP,
			  __ATOMIC_SEQ_CST);
	/* a completion posted before the gateway saw the bit wakes nobody:
	 * look once more after setting it */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!ready(c) && ppoll(p, 2, &ts, NULL) < 0 && errno != EINTR)
		rc = -errno;
	__atomic_fetch_and(&c->map.cq.ctl->flags, ~EGW_RING_F_NEED_WAKEUP,
			   __ATOMIC_SEQ_CST);
	if (p[0].revents & POLLIN)
		(void)!read(c->efd, &v, sizeof(v));
	return rc;
}

static int
sleep_step(struct egw_client *c, uint64_t ns)
{
	struct pollfd p = { .fd = c->sock, .events = POLLIN };
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ns };

	if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

int
egw_client_wait(struct egw_client *c, unsigned int timeout_ms)
{
	uint64_t now = client_now_ns();
	uint64_t deadline = now + (uint64_t)timeout_ms * 1000000u;
	/* sleep no longer than a quarter lease: the beat must go on */
	uint64_t slice = c->g.lease_ms ? (uint64_t)c->g.lease_ms * 250000u
				       : UINT64_MAX;
	uint64_t step = SPIN_STEP_MIN_NS;
	int rc;

	for (;;) {
		egw_client_beat(c);
		rc = client_gone_check(c, true);
		if (rc != 0)
			return rc;
		if (ready(c))
			return 1;
		now = client_now_ns();
		if (now >= deadline)
			return 0;
		if (c->recovering) {
			/* a slot the gateway is about to clear, or a barrier
			 * NOP on its way: no eventfd write announces the
			 * first, so look again soon */
			uint64_t left = deadline - now;

			rc = sleep_step(c, left < SPIN_STEP_MAX_NS ?
					left : SPIN_STEP_MAX_NS);
			return rc == 0 ? 1 : rc;
		}
		if (c->efd >= 0) {
			uint64_t left = deadline - now;

			rc = sleep_wakeup(c, left < slice ? left : slice);
		} else {
			uint64_t left = deadline - now;

			rc = sleep_step(c, left < step ? left : step);
			step = step * 2 < SPIN_STEP_MAX_NS ? step * 2
							   : SPIN_STEP_MAX_NS;
		}
		if (rc != 0) {
			client_error("waiting for completions: %s",
				     strerror(-rc));
			return rc;
		}
	}
}

int
egw_client_poll_fd(struct egw_client *c)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd, rc;

	if (c->epfd >= 0)
		return c->epfd;
	if (c->efd < 0) {
		client_error("the gateway granted no wake-up eventfd (attach "
			     "with EGW_CLIENT_F_WAKEUP): nothing would wake a "
			     "sleeper on completions");
		return -EOPNOTSUPP;
	}
	fd = epoll_create1(EPOLL_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		client_error("epoll_create1: %s", strerror(errno));
		return rc;
	}
	ev.data.fd = c->efd;
	rc = epoll_ctl(fd, EPOLL_CTL_ADD, c->efd, &ev);
	if (rc == 0) {
		/* the gateway sends nothing after the welcome: readable or
		 * hung up is its end of the socket closing */
		ev = (struct epoll_event){
			.events = EPOLLIN | EPOLLRDHUP | EPOLLHUP,
			.data.fd = c->sock };
		rc = epoll_ctl(fd, EPOLL_CTL_ADD, c->sock, &ev);
	}
	if (rc != 0) {
		rc = -errno;
		client_error("epoll_ctl: %s", strerror(errno));
		close(fd);
		return rc;
	}
	c->epfd = fd;
	return fd;
}

int
egw_client_prepare(struct egw_client *c, uint32_t *max_sleep_ms)
{
	struct pollfd p = { .fd = c->efd, .events = POLLIN };
	uint32_t limit = UINT32_MAX;
	uint64_t v;
	int rc;

	egw_client_beat(c);
	if (c->efd < 0) {
		client_error("the gateway granted no wake-up eventfd (attach "
			     "with EGW_CLIENT_F_WAKEUP)");
		return -EOPNOTSUPP;
	}
	/* a client given up (or gone) hears no event any more, as in
	 * egw_client_wait(): the socket is looked at on every call */
	rc = client_gone_check(c, true);
	if (rc != 0)
		return rc;
	/* a write consumed here is one whose completions are already in the
	 * ring: ready() below sees them */
	if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
		(void)!read(c->efd, &v, sizeof(v));
	if (ready(c))
		return 1;
	if (c->g.lease_ms)
		limit = c->g.lease_ms / 4 ? c->g.lease_ms / 4 : 1;
	if (c->recovering)
		limit = 1;
	__atomic_fetch_or(&c->map.cq.ctl->flags, EGW_RING_F_NEED_WAKEUP,
			  __ATOMIC_SEQ_CST);
	/* a completion posted before the gateway saw the bit wakes nobody:
	 * look once more after setting it */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (ready(c))
		return 1;
	if (max_sleep_ms != NULL)
		*max_sleep_ms = limit;
	return 0;
}
