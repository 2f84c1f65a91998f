/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stub rdma-core for the verbs driver's unit tests, compiled into the
 * test binary instead of libibverbs. It plays one RoCE device with one
 * port and behaves like an RC QP where the driver can tell:
 *  - create_qp refuses a send queue deeper than max_qp_wr; post_send
 *    refuses (ENOMEM) a WR the send queue has no room for, and a QP that
 *    is not in RTS or ERR;
 *  - completions come out of poll_cq in posting order, one per signalled
 *    WR on success; a QP in error flushes every WR (signalled or not)
 *    with IBV_WC_WR_FLUSH_ERR; moving a QP to RESET discards its WRs;
 *  - with `execute`, an RDMA WRITE copies its bytes when it completes,
 *    after checking the destination against the memory registered under
 *    its rkey (a bad one fails with IBV_WC_REM_ACCESS_ERR, QP to error):
 *    a region registered with remote write access, or a type-2 memory
 *    window that is bound, on the QP the write arrives at, over the
 *    destination;
 *  - memory windows of type 2: IBV_WR_BIND_MW (the region must have
 *    MW-bind access and hold the range; the window must be free and named
 *    by its current key in mw->rkey, which the device does not update:
 *    the application sets it to the new key after the bind) and IBV_WR_LOCAL_INV (a bound window
 *    of that QP) take effect when they complete, in order with the QP's
 *    other WRs; ibv_dealloc_mw invalidates at once.
 * The test sets the device up in `ibv_stub` and reads what happened back.
 */
#ifndef EGW_IBV_STUB_H
#define EGW_IBV_STUB_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define IBV_STUB_MAX_GID 16
#define IBV_STUB_MAX_WR 16384

struct ibv_stub_wr {             /* one posted WR, as the device saw it */
	struct ibv_qp *qp;
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	bool signaled;
	uint64_t src, remote;
	uint32_t len, lkey, rkey;    /* bind: the range and the new key;
				      * invalidation: rkey */
	struct ibv_mw *mw;           /* bind */
	uint32_t mw_rkey;            /* bind: mw->rkey when posted (names the
				      * window, as rdma-core's providers do) */
	bool done;                   /* completed, flushed or discarded */
};

#define IBV_STUB_MAX_MW 64

struct ibv_stub_mw {             /* a memory window as the device keeps it */
	struct ibv_mw mw;            /* first: the driver holds &mw */
	bool used;                   /* allocated */
	bool bound;
	uint32_t key;                /* the device's current key: a bind
				      * must name it (mw.rkey is the
				      * application's copy) */
	struct ibv_qp *qp;           /* bound on */
	uint64_t addr, len;
};

struct ibv_stub {
	/* the device as the driver finds it */
	char name[32];
	enum ibv_port_state port_state;
	enum ibv_mtu mtu;
	struct ibv_gid_entry gid[IBV_STUB_MAX_GID];
	uint32_t ngid;
	uint32_t gid_unreadable;     /* bit i: entry i cannot be read */
	int max_qp_wr;
	int modify_qp_rc;            /* != 0: ibv_modify_qp fails with it */
	int post_send_rc;            /* != 0: ibv_post_send fails with it */
	bool hold;                   /* completions wait until cleared */
	bool execute;                /* RDMA WRITEs copy their bytes */
	/* what happened */
	uint32_t post_calls;         /* ibv_post_send calls that succeeded */
	uint32_t max_send_wr;        /* of the last QP created */
	struct ibv_qp *qp[8];        /* QPs in the order they were created */
	uint32_t nqp;
	struct ibv_stub_wr wr[IBV_STUB_MAX_WR];
	uint32_t nwr;
	struct ibv_stub_mw mw[IBV_STUB_MAX_MW];
	uint32_t mw_allocs, mw_deallocs, binds, invalidations;
	int last_mr_access;          /* access flags of the last region */
};

extern struct ibv_stub ibv_stub;

/** Back to one active device "stub0" (MTU 1024, max_qp_wr 4096) with an
 *  empty GID table and nothing posted. */
void ibv_stub_reset(void);

/** Put GID entry `i`: ::ffff:`ipv4` (host order) of `type`. */
void ibv_stub_gid(uint32_t i, uint32_t ipv4, enum ibv_gid_type type);

/** QP state and the peer it was brought to RTR towards. */
enum ibv_qp_state ibv_stub_qp_state(const struct ibv_qp *qp);
uint32_t ibv_stub_qp_dest(const struct ibv_qp *qp);
/** The address vector the QP was brought to RTR with. */
const struct ibv_ah_attr *ibv_stub_qp_av(const struct ibv_qp *qp);

/** The allocated memory window whose current key is `rkey`, or NULL. */
struct ibv_stub_mw *ibv_stub_mw_by_key(uint32_t rkey);

#endif /* EGW_IBV_STUB_H */
