/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's state, shared by its files: egw_node.c (peers, sessions,
 * the engines' actions) and node_window.c (per-window keys). Not
 * installed: nothing outside lib/node sees it.
 */
#ifndef EGW_NODE_PRIV_H
#define EGW_NODE_PRIV_H

#include "egw_node.h"

#define REGISTER_RETRY_NS 200000000ull /* REGISTER, nudges, refusals */
/* REGISTERs to a peer that never answered back off up to this: a cluster
 * may list peers that are not up yet, and each costs the worker nothing
 * much while it waits */
#define REGISTER_BACKOFF_MAX_NS 3200000000ull
#define NODE_RETIRED 4                 /* sessions refused for good */
#define NODE_SENT 16                   /* our REGISTERs a proof may name */
#define FRESH_NS 2000000000ull         /* how old a named REGISTER may be */
#define WINDOW_DEADLINE_NS 2000000000ull /* a bind or invalidation completes */
#define WNIL UINT32_MAX                /* no window */

/* One of our REGISTERs to a peer: what a peer's peer_seq may name. */
struct sent_register {
	uint64_t seq;
	uint64_t at;
};

struct node_peer {
	struct egw_node_peer cfg;
	uint8_t state;		 /* enum egw_node_peer_state */
	uint32_t id;		 /* never reused by this node */
	uint64_t register_ns;	 /* the current REGISTER interval: doubles
				  * while the peer says nothing */
	uint64_t heard;          /* session of its last authenticated REGISTER */
	uint64_t heard_seq;      /* ... and that REGISTER's seq */
	uint64_t proof;          /* peer_seq that adopted the current session */
	struct sent_register sent[NODE_SENT]; /* ring of our recent REGISTERs */
	uint32_t nsent;
	uint64_t adopted;        /* the incarnation served (0: none yet) */
	uint64_t retired[NODE_RETIRED];
	uint32_t nretired;       /* retired so far (ring position) */
	bool confirmed;          /* it adopted our session */
	bool reached;            /* its memory: the last apply succeeded */
	bool was_registered;     /* for the REGISTERED note */
	bool endpoint_unacked;   /* our endpoint changed: no ACK echoed it */
	bool silent;             /* declared dead: let go after the engines */
	bool fence;              /* a quarantine expired: fence after them */
	uint64_t fence_room;     /* ... the first such room, for the note */
	uint16_t fence_rank;
	struct egw_proto_replay replay;    /* the adopted session's window */
	struct egw_proto_replay heard_win; /* REGISTERs from other sessions */
	struct egw_register applied; /* content last applied (reached) */
	uint32_t my_qpn, my_psn; /* our endpoint as last sent to it */
	uint64_t next_register;  /* periodic REGISTER */
	uint64_t next_nudge;     /* REGISTER for traffic it should not send */
	uint64_t next_refusal;   /* ERROR answering a refused REGISTER */
	uint32_t noted;          /* notes given once (note_bit) */
};

struct node_addr_slot {
	uint32_t addr;
	uint16_t port;
	uint16_t used; /* 0: empty, 1: taken, 2: deleted */
	uint32_t slot;
};

struct alloc_res {
	uint64_t room;
	uint16_t rank;
	int nruns;               /* runs, or -errno: the pool's answer */
	struct egw_run runs[EGW_XFER_MAX_RUNS];
	uint32_t rkeys[EGW_KIND_MAX]; /* the window's keys (window_bind) */
};

/* A window's state, kept by its first block (windows are single runs and
 * never overlap). */
enum window_state {
	WIN_NONE = 0,            /* no window starts here */
	WIN_BINDING,             /* bind posted: its allocation waits */
	WIN_BOUND,               /* offered: its keys admit the peer's writes */
	WIN_UNBINDING,           /* invalidation posted: its blocks wait */
	WIN_STUCK,               /* ... past its deadline: they stay out */
};

struct node_window {
	uint64_t room;
	uint64_t since;          /* its bind or invalidation was posted */
	uint32_t count;          /* blocks bound */
	uint32_t keep;           /* ... of which the room keeps (a trim) */
	uint32_t prev, next;     /* the parked list, oldest post first */
	uint32_t dl;             /* closed for a delivery: its first window */
	uint32_t dl_next;        /* the delivery's next run */
	uint32_t peer;
	uint32_t rkeys[EGW_KIND_MAX];
	uint16_t rank;
	uint8_t state;           /* enum window_state */
	uint8_t gen;             /* moves with every post: in its cookie */
};

/* A room delivered while its windows' invalidations are under way: the
 * application gets it when the last one completed. Kept by the first
 * window's block; its runs are rebuilt from the windows' list. */
struct node_delivery {
	uint64_t room;
	uint64_t waited_ns, open_ns;
	uint32_t peer, tokens, aux_block;
	uint32_t waiting;        /* invalidations not completed */
	uint16_t rank;
	bool dummy;
	bool pending;
	bool done;               /* its DONE came: given after the DELIVER */
	enum egw_err error;
};

struct egw_node {
	struct egw_proto_key key;
	uint64_t quarantine_ns;  /* for the FENCED note */
	struct egw_node_ops ops;
	struct egw_pool *pool;
	struct egw_register self;
	struct egw_xfer_sender *sender;
	struct egw_xfer_receiver *receiver;
	struct node_peer *peers; /* nslots of them */
	uint32_t nslots;
	uint32_t npeers; /* one past the highest slot ever used: the
			  * loops over peers stop there */
	uint32_t next_id;
	uint64_t peers_gen;
	/* what spares a quiet tick the walk over every peer: no REGISTER is
	 * due before register_due (0: look), no peer is flagged (fence or
	 * silent) while nflagged is 0, none leaves while nleaving is 0 */
	uint64_t register_due;
	uint32_t nflagged;
	uint32_t nleaving;
	/* source address -> slot, open addressing (twice the slots) */
	struct node_addr_slot *addr_tab;
	uint32_t addr_mask;
	uint64_t session, seq;
	/* a room has one request pending at a time and chains at most
	 * pipeline depth (< EGW_XFER_PIPE) of them in one drain */
	struct alloc_res *allocq;
	uint32_t nalloc, allocq_len;
	/* cookies of refused posts: each is an outstanding batch of the
	 * sender, so there are never more than it can have in flight */
	uint64_t *refusedq;
	uint32_t nrefused, refusedq_len;
	/* per-window keys (ops.window_bind): windows and deliveries by
	 * first block; parked windows in a list ordered by post time (one
	 * deadline for all: the head is the next to expire) */
	struct node_window *win;
	struct node_delivery *dl;
	struct egw_run *dl_runs; /* a delivery's runs, rebuilt */
	uint32_t parked_head, parked_tail;
	uint32_t last_dl;        /* the last delivery parked (its DONE) */
	bool window_keys;        /* the receiver's windows have keys */
	uint32_t emitting;       /* inside an engine's emit callback */
	uint64_t now;
	struct egw_node_stats st;
	uint8_t buf[EGW_PROTO_MAX_LEN];
};

/* egw_node.c */
/* Hand a line to the application; `once`: only the first time per peer
 * and reason until the peer registers. */
void node_note(struct egw_node *n, uint32_t peer, enum egw_node_note_kind k,
	       enum egw_err code, bool once, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* Feed queued allocation results and refused posts to the engines. */
void node_drain_deferred(struct egw_node *n);

static inline bool
node_peer_registered(const struct node_peer *pe)
{
	return pe->adopted != 0 && pe->confirmed && pe->reached;
}

/* node_peers.c */
int node_peers_create(struct egw_node *n, uint32_t nslots);
void node_peers_destroy(struct egw_node *n);
/* The slot of a peer (active or leaving) by source address, or -1. */
int node_peer_find(const struct egw_node *n, uint32_t addr, uint16_t port);
/* Take a free slot for `p`: its slot, -EINVAL, -EEXIST, -ENOSPC. */
int node_peer_insert(struct egw_node *n, const struct egw_node_peer *p,
		     uint64_t now);
/* Free the slots of leaving peers with no room left. */
void node_peers_reap(struct egw_node *n);

/* node_window.c */
/* Windows parked (a bind or invalidation posted) for `peer`. */
uint32_t node_windows_parked_for(const struct egw_node *n, uint32_t peer);
int node_windows_create(struct egw_node *n, uint32_t max_runs);
/* EGW_ACT_ALLOC: answered now, or once its window's bind completed. */
void node_window_open(struct egw_node *n, const struct egw_act *a);
/* A room's run is done with (freed: dl WNIL; delivered: delivery dl):
 * true when its window's invalidation was posted, false without one. */
bool node_window_close(struct egw_node *n, const struct egw_run *run,
		       uint32_t dl);
/* EGW_ACT_DELIVER and EGW_ACT_DONE: a delivery waits for its windows. */
void node_deliver(struct egw_node *n, const struct egw_act *a);
void node_done(struct egw_node *n, const struct egw_act *a, bool is_sender);
/* Parked windows past their deadline: noted and failed. */
void node_windows_expire(struct egw_node *n);
/* When the oldest parked window passes its deadline (UINT64_MAX: none). */
uint64_t node_windows_next_deadline(const struct egw_node *n);

#endif /* EGW_NODE_PRIV_H */
