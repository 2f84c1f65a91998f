/* SPDX-License-Identifier: BSD-3-Clause */
/* The fake gateway's state, shared by its socket side (fake_gateway.c) and
 * its room side (fake_rooms.c). */
#ifndef EGW_FAKE_GATEWAY_H
#define EGW_FAKE_GATEWAY_H

#include <stdbool.h>
#include <stdint.h>

#include "egw_attach.h"

#define FAKE_MAX_CLIENTS 64

struct fake_cfg {
	const char *socket_path;
	const char *port;
	uint32_t flags;          /* EGW_WELCOME_F_ENCODE / _LANGUAGE */
	uint32_t dtype, dtype_bytes, hidden, block_tokens, capacity;
	uint32_t max_runs, run_blocks, lease_ms, step_ms, max_total;
	uint32_t max_clients, mrope, speak_version, aux_bytes;
	int64_t allow_uid;       /* -1: anyone */
	uint32_t npeers;
	char peers[EGW_ATTACH_MAX_PEERS][EGW_ATTACH_NAME_LEN];
};

struct fake_pool {
	int fd;
	uint8_t *mem;
	uint64_t bytes;
	uint64_t off[4], len[4];
	uint32_t nblocks;
	uint8_t *used;           /* one byte per block */
	uint32_t nfree;
};

/* A room as the fake gateway holds it: one per slot. */
struct fake_room {
	uint64_t room;           /* 0: the slot is free */
	uint8_t op;              /* SEND_OPEN or RECV_OPEN */
	uint8_t state;
	bool aux_only, committed, released;
	uint16_t rank, nranks;
	uint32_t total;
	uint64_t next_ns;        /* when the room moves on */
	uint32_t nruns;
	struct egw_attach_run *runs; /* max_runs, from the client's table */
};

struct fake_client {
	int sock;
	int efd;                 /* -1 without wake-up */
	uint32_t id;
	void *area_mem;
	uint64_t area_bytes;
	struct egw_attach_map map; /* our own copy of the layout */
	struct fake_room *rooms; /* nslots */
	struct egw_attach_run *run_store;
	uint64_t beat, beat_ns;  /* lease: last value seen and when */
	uint32_t wakeups;
};

struct fake_gw {
	struct fake_cfg cfg;
	struct fake_pool pool;
	struct fake_client *clients[FAKE_MAX_CLIENTS];
	uint32_t next_id;
};

uint64_t fake_now_ns(void);

/* Take every command waiting in the client's ring. @return 0, or -EBADMSG
 * when the client broke its ring (it is to be detached). */
int fake_commands(struct fake_gw *gw, struct fake_client *c);

/* Move the client's rooms on whose time has come. */
void fake_rooms_step(struct fake_gw *gw, struct fake_client *c);

/* Abort and free every room of a client that went away. */
void fake_rooms_drop(struct fake_gw *gw, struct fake_client *c,
		     const char *why);

#endif
