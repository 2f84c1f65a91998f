/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach shim: the gateway's attach server as the client tests meet
 * it, built from the libraries the gateway uses - lib/engines checks and
 * answers every command, lib/attach lays out the areas and checks hellos
 * and credentials, lib/pool hands out the blocks (in a memfd the clients
 * map), lib/pattern fills and checks the rooms' bytes. What the shim adds
 * is the part the gateway's worker and control thread play: the socket,
 * and a scripted "transfer" standing in for the node and the peers.
 *
 * The shim's transfer, per room (wire id R: the engine's room id for
 * attempt 0, egw_attach_room_id() of it for a retry):
 *  - a language room moves Bootstrapping -> WaitingForInput ->
 *    Transferring -> delivered, one step_ms apart, its R & 0xffffff tokens
 *    written from lib/pattern (an aux-only rank: the aux record alone);
 *  - an encode room, once committed, is checked: its tokens against
 *    lib/pattern, its aux record against SEND_OPEN's; it ends with
 *    success or EGW_E_TRANSPORT;
 *  - SHIM_FAIL in R: the room ends with EGW_E_PEER_DEAD at
 *    WaitingForInput (language) or instead of its check (encode);
 *  - SHIM_STALL in R: the room stops there until it is ended otherwise.
 * Lines on stdin script more: "fail R RANK ERR" ends a room now with a
 * given error (a positive enum egw_err or a negative errno); "skip MS"
 * moves the shim's clock (the `now` lib/engines is given) MS ahead, so
 * that a lease runs out without the test waiting for it.
 *
 * Everything worth checking is one line on stdout, which the tests read.
 */
#ifndef EGW_TEST_SHIM_H
#define EGW_TEST_SHIM_H

#include <stdbool.h>
#include <stdint.h>

#include "egw_attach.h"
#include "egw_engines.h"
#include "egw_pool.h"

#define SHIM_MAX_CLIENTS 64u
#define SHIM_MAX_EMB_BYTES 65536u /* a token's embedding, at most */
#define SHIM_TOTAL(room) ((uint32_t)((room) & 0xffffffu))
#define SHIM_MAX_PEERS 16u /* live at once */
#define SHIM_FAIL (1ull << 62)
#define SHIM_STALL (1ull << 61)

struct shim_cfg {
	const char *socket_path;
	const char *port;
	bool encode, language;
	uint32_t dtype, dtype_bytes, hidden, block_tokens, capacity;
	uint32_t max_runs, run_blocks, lease_ms, step_ms, max_total;
	uint32_t max_clients, slots, cache_entries, speak_version;
	uint32_t alloc_ms;
	uint32_t peer_wait_ms; /* a RECV_OPEN waits this long for a name */
	bool mrope, pool_rdonly;
	int64_t allow_uid;        /* -1: only our own uid (as the gateway) */
	uint16_t npeers;	  /* --peers: ids 1..npeers */
	char peers[SHIM_MAX_PEERS][EGW_ATTACH_NAME_LEN];
};

/* One room of the shim's transfer (the node's part). */
struct shim_room {
	uint64_t room;            /* wire id; 0: free */
	enum egw_attach_side side;
	uint16_t rank;
	bool aux_only, committed, stalled;
	uint8_t state;            /* the last state reported */
	uint32_t total;
	int32_t mrope_delta;      /* SEND_OPEN's, for the aux check */
	uint64_t cookie;
	uint64_t next_ns;
	uint32_t nruns;           /* blocks the transfer holds (0: none) */
	struct egw_run *runs;     /* max_runs */
};

struct shim_conn {
	int sock;                 /* -1: free */
	int efd;
	uint32_t client;          /* lib/engines' id */
	void *area;
	uint64_t area_bytes;
	bool lost;                /* given up: waiting for the socket's end */
	uint32_t wakeups;
};

struct shim {
	struct shim_cfg cfg;
	int pool_fd, pool_ro_fd;
	void *pool_mem;
	uint64_t pool_bytes;
	struct egw_pool *pool;
	uint32_t filler_blocks;   /* kept out to cut the free space in runs */
	struct egw_engines *srv;
	struct shim_conn conns[SHIM_MAX_CLIENTS];
	struct shim_room *rooms;  /* max_rooms */
	struct egw_run *run_store;
	uint32_t max_rooms;
	uint64_t now;
	uint64_t skew_ns;         /* "skip": added to the monotonic clock */
	/* the port's peers as a gateway's worker gives them to lib/engines
	 * (the script adds and removes them) */
	struct egw_engines_peer peers[SHIM_MAX_PEERS];
	uint32_t npeers, next_peer_id;
};

/* The peer list to lib/engines after a change (shim_main.c). */
void shim_peers_changed(struct shim *sh);

uint64_t shim_now_ns(const struct shim *sh);

/* The transfer: lib/engines' operations table, and its time. */
extern const struct egw_engines_ops shim_ops;
int shim_rooms_init(struct shim *sh);
void shim_rooms_step(struct shim *sh, uint64_t now);
/* One scripted line (stdin). */
void shim_script(struct shim *sh, char *line);
/* Blocks the pool has free, the filler's not counted as used. */
uint32_t shim_pool_free(const struct shim *sh);
uint32_t shim_pool_blocks(const struct shim *sh);

#endif
