/* SPDX-License-Identifier: BSD-3-Clause */
/* The client's private state, shared by the library's source files. */
#ifndef EGW_CLIENT_PRIV_H
#define EGW_CLIENT_PRIV_H

#include <pthread.h>
#include <stdbool.h>

#include "egw_attach.h"
#include "egw_client.h"

/* What the client knows of a slot it picked: the gateway's slot table is
 * the truth about the room, this is what was last told to the engine. */
struct client_slot {
	uint64_t room;       /* 0: not held by this client */
	uint8_t state;       /* last state reported to the engine */
	uint8_t op;          /* the OPEN that took the slot */
	bool recovered;      /* `state` came from the slot, not a completion */
	bool released;       /* RELEASE sent: Success is the room's end */
	bool seen;           /* the gateway has told something of the room */
	uint32_t sq_seq;     /* the OPEN's index in the submission ring */
};

struct egw_client {
	int sock;
	int efd;                        /* wake-up eventfd, -1 without */
	int epfd;                       /* egw_client_poll_fd's, -1 before */
	uint8_t *pool;
	size_t pool_map_bytes;
	int pool_prot;                  /* PROT_READ for a read-only pool */
	bool revoked;                   /* the pool's range holds zero pages */
	void *area_mem;
	size_t area_map_bytes;
	struct egw_attach_map map;      /* private copy of the area layout */
	struct egw_attach_limits limits;
	struct egw_client_geometry g;
	struct client_slot *slots;      /* nslots, allocated at attach */
	uint32_t cursor;                /* where a free slot is sought first */
	uint32_t overflow_seen;         /* cq.overflow when last recovered */
	bool recovering;                /* the slots are to be read again */
	bool recover_full;              /* ... because the events ran out */
	bool barrier_sent;              /* a barrier NOP is on its way */
	bool barrier_done;              /* one was answered */
	uint32_t barrier_seq;           /* ring index of the last one sent */
	uint32_t barrier_ov;            /* cq.overflow when it was sent */
	uint32_t barrier_answered;      /* ring index of the last answered */
	uint64_t sock_check_ns;         /* when poll() looks at the socket */
	int gone;                       /* latched -ECONNRESET / -EBADMSG */
	bool lease_running;
	bool lease_stop;
	pthread_t lease_thread;
	pthread_mutex_t lease_lock;
	pthread_cond_t lease_cond;
};

/* NOPs the library sends itself: this top byte, the ring index below. */
#define CLIENT_BARRIER_TAG (0xebull << 56)
#define CLIENT_BARRIER_MASK (0xffull << 56)

/* Put a NOP in the submission ring (the barrier of client_poll.c). */
int client_barrier(struct egw_client *c);

/* Record why the current call failed, for egw_client_last_error(). */
/* Copy the caller's options (NULL: defaults) into *out under the size
 * rule of egw_client_opts: 0, or -EINVAL with the reason in last_error. */
int client_opts_read(const struct egw_client_opts *in,
		     struct egw_client_opts *out);

void client_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Monotonic clock in nanoseconds. */
uint64_t client_now_ns(void);

/* -ECONNRESET once the gateway closed the socket (latched), else 0. */
int client_check_socket(struct egw_client *c);

/* client_trust.c: 0 while the gateway holds the client; else -ECONNRESET
 * (the trust word, the socket's end when `socket`, a latched loss) with
 * the reason in egw_client_last_error(). client_gone_check() also latches
 * the loss and revokes the pool's mapping; it looks at the socket when
 * `force` or CLIENT_SOCKET_CHECK_NS passed since it last did. */
int client_alive(const struct egw_client *c, bool socket);

/* How often a call looks at the socket (the trust word: every call). */
#define CLIENT_SOCKET_CHECK_NS 10000000u
int client_gone_check(struct egw_client *c, bool force);
void client_revoke(struct egw_client *c);

/* The lease thread: started at attach when asked, stopped at detach. */
int client_lease_start(struct egw_client *c);
void client_lease_stop(struct egw_client *c);

#endif
