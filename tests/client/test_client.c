/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/client against the gateway's own attach server, lib/engines, behind
 * the attach shim (shim.h): attach and its refusals, language and encode
 * rooms byte-exact (lib/pattern) over several runs, ranks and an aux-only
 * rank, failures with the gateway's codes, the overflow recovery, the
 * wake-up wait, the lease, a full submission ring, a client killed with
 * SIGKILL, a gateway that goes away, the published stats, content keys,
 * a read-only pool.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_harness.h"
#include "cu_main.h"
#include "egw_pattern.h"
#include "egw_xfer.h"
#include "shim.h"

#define MS 5000u

static const char *const lang_args[] = { "--run-blocks", "3", NULL };

/* ---- attach ------------------------------------------------------------ */

static void
test_attach_geometry_nop(void)
{
	const char *args[] = { "--dtype", "fp16", "--hidden", "96",
			       "--block-tokens", "64", "--capacity", "8192",
			       "--peers", "encA,encB", NULL };
	struct egw_client_event ev[4];
	struct egw_client *c;
	struct shim_proc f;
	const struct egw_client_geometry *g;
	uint64_t bytes;
	int n = 0;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	g = egw_client_geometry(c);
	CU_ASSERT(g->dtype == EGW_CLIENT_FP16 && g->dtype_bytes == 2);
	CU_ASSERT(g->hidden_size == 96 && g->block_tokens == 64);
	CU_ASSERT(g->nblocks == 128 && g->nslots == 64);
	CU_ASSERT(g->flags == EGW_CLIENT_G_LANGUAGE);
	/* the static peers: ids 1.. in the order the port names them */
	CU_ASSERT(egw_client_peer_id(c, "encB") == 2);
	CU_ASSERT(egw_client_peer_id(c, "encC") == -ENOENT);
	CU_ASSERT(g->max_peers == SHIM_MAX_PEERS);
	CU_ASSERT(egw_client_region(c, EGW_CLIENT_EMBEDDING, &bytes) != NULL);
	CU_ASSERT(bytes == 8192ull * 96 * 2);
	CU_ASSERT(egw_client_event_fd(c) == -1);
	CU_ASSERT(shim_expect(&f, "name cunit", MS));
	CU_ASSERT(egw_client_nop(c, 77) == 0);
	CU_ASSERT(egw_client_wait(c, MS) == 1);
	n = egw_client_poll(c, ev, 4);
	CU_ASSERT(n == 1 && ev[0].op == EGW_CLIENT_NOP && ev[0].tag == 77 &&
		  ev[0].result == 0);
	/* the wrong side's command is caught before it is sent */
	CU_ASSERT(egw_client_send_open(c, 5, 10, 1, 0, 0, 1) == -EOPNOTSUPP);
	CU_ASSERT(strstr(egw_client_last_error(), "send_open") != NULL);
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "detached (socket closed): ended 0", MS));
	shim_stop(&f);
}

static void
test_attach_refusals(void)
{
	char v[16], mine[32], theirs[32];
	const char *v2[] = { "--speak-version", v, NULL };
	const char *one[] = { "--max-clients", "1", NULL };
	struct egw_client *c = NULL, *c2 = NULL;
	struct shim_proc f;

	CU_ASSERT_FATAL(shim_start(&f, NULL) == 0);
	CU_ASSERT(shim_attach(&f, "nope", 0, &c) == -ENOENT);
	CU_ASSERT(strstr(egw_client_last_error(), "no port 'nope'") != NULL);
	CU_ASSERT(shim_attach(&f, "a-port-name-that-is-far-too-long-1", 0,
			      &c) == -EINVAL);
	shim_stop(&f);

	/* a gateway of another release */
	snprintf(v, sizeof(v), "%u", EGW_ATTACH_VERSION + 1);
	snprintf(mine, sizeof(mine), "version %u", EGW_ATTACH_VERSION);
	snprintf(theirs, sizeof(theirs), "version %u", EGW_ATTACH_VERSION + 1);
	CU_ASSERT_FATAL(shim_start(&f, v2) == 0);
	CU_ASSERT(shim_attach(&f, "lang0", 0, &c) == -EPROTONOSUPPORT);
	CU_ASSERT(strstr(egw_client_last_error(), mine) != NULL);
	CU_ASSERT(strstr(egw_client_last_error(), theirs) != NULL);
	shim_stop(&f);

	CU_ASSERT_FATAL(shim_start(&f, one) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	CU_ASSERT(shim_attach(&f, "lang0", 0, &c2) == -EUSERS);
	/* lib/engines' own answer, as the gateway passes it on */
	CU_ASSERT(strstr(egw_client_last_error(), "takes no more clients") !=
		  NULL);
	egw_client_detach(c);
	shim_stop(&f);

	char arg[16], why[64];
	const char *uid[] = { "--allow-uid", arg, NULL };

	snprintf(arg, sizeof(arg), "%u", (unsigned int)getuid() + 1);
	snprintf(why, sizeof(why), "uid %u may not attach",
		 (unsigned int)getuid());
	CU_ASSERT_FATAL(shim_start(&f, uid) == 0);
	CU_ASSERT(shim_attach(&f, "lang0", 0, &c) == -EACCES);
	CU_ASSERT(strstr(egw_client_last_error(), why) != NULL);
	shim_stop(&f);

	/* nobody listening: connect's own error */
	CU_ASSERT(egw_client_attach("/tmp/egw-client-test-nobody.sock",
				    "lang0", NULL, &c) == -ENOENT);
	CU_ASSERT(strstr(egw_client_last_error(), "connect") != NULL);
}

/* ---- language rooms ------------------------------------------------------ */

/* Every token of a Success room against the pattern, through the runs. */
static bool
check_language_room(struct egw_client *c, uint32_t slot, uint64_t room,
		    uint32_t total)
{
	const struct egw_client_geometry *g = egw_client_geometry(c);
	uint8_t *emb = egw_client_region(c, EGW_CLIENT_EMBEDDING, NULL);
	uint8_t *fill = egw_client_region(c, EGW_CLIENT_FILL_IDS, NULL);
	uint8_t *mrope = egw_client_region(c, EGW_CLIENT_MROPE, NULL);
	uint32_t eb = g->hidden_size * g->dtype_bytes, t = 0;
	struct egw_client_run runs[256];
	struct egw_client_aux aux;
	uint8_t want[1024];
	int n = egw_client_room_runs(c, slot, runs, 256);

	if (n <= 0 || n > 256 || eb > sizeof(want) ||
	    egw_client_room_aux(c, slot, &aux) != 0)
		return false;
	if (aux.total_tokens != total || aux.cookie != room ||
	    aux.mrope_delta != EGW_PATTERN_MROPE_DELTA ||
	    aux.hidden_size != g->hidden_size)
		return false;
	for (int r = 0; r < n; r++)
		for (uint32_t i = 0; i < runs[r].count * g->block_tokens &&
				     t < total; i++, t++) {
			uint64_t tok = (uint64_t)runs[r].start *
				       g->block_tokens + i;
			int32_t f = egw_pattern_fill_id(room, t), m[3];

			egw_pattern_emb(room, t, want, eb);
			if (memcmp(emb + tok * eb, want, eb) != 0 ||
			    memcmp(fill + tok * 4, &f, 4) != 0)
				return false;
			egw_pattern_mrope(room, t, m);
			if (memcmp(mrope + tok * 12, m, 12) != 0)
				return false;
		}
	return t == total;
}

static void
language_round_trip(const char *dtype)
{
	static const uint32_t lengths[] = { 1, 127, 128, 129, 50000 };
	const char *args[] = { "--dtype", dtype, "--run-blocks", "3",
			       "--max-runs", "256", NULL };
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	for (unsigned int i = 0; i < 5; i++) {
		uint64_t room = ((uint64_t)(i + 1) << 24) | lengths[i];
		int s = egw_client_recv_open(c, room, 1, 0, 1, 0, 100 + i);
		struct egw_client_room info;

		CU_ASSERT_FATAL(s >= 0);
		CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_BOOTSTRAPPING,
				     MS, &ev) && ev.tag == 100 + i &&
			  ev.op == EGW_CLIENT_RECV_OPEN);
		CU_ASSERT_FATAL(wait_event(c, (uint32_t)s,
					   EGW_CLIENT_SUCCESS, MS, &ev));
		CU_ASSERT(ev.total_tokens == lengths[i] &&
			  (ev.flags & EGW_CLIENT_EV_MORE));
		CU_ASSERT(egw_client_room_info(c, (uint32_t)s, &info) == 0 &&
			  info.room == room && info.total_tokens == lengths[i]);
		CU_ASSERT(check_language_room(c, (uint32_t)s, room,
					      lengths[i]));
		CU_ASSERT(egw_client_release(c, (uint32_t)s, 200 + i) == 0);
		CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS,
				     &ev) && ev.tag == 200 + i &&
			  ev.op == EGW_CLIENT_RELEASE &&
			  (ev.flags & EGW_CLIENT_EV_END));
		/* the slot is the client's no more */
		CU_ASSERT(egw_client_release(c, (uint32_t)s, 1) == -ENOENT);
	}
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "ended 0 rooms, freed 0 blocks", MS));
	shim_stop(&f);
}

static void test_language_bf16(void) { language_round_trip("bf16"); }
static void test_language_fp16(void) { language_round_trip("fp16"); }
static void test_language_fp32(void) { language_round_trip("fp32"); }

static void
test_language_ranks_aux_only(void)
{
	const uint64_t room = (7ull << 24) | 300;
	struct egw_client *c[3];
	struct egw_client_event ev;
	struct egw_client_run run;
	struct egw_client_aux aux;
	struct shim_proc f;
	int s[3];

	CU_ASSERT_FATAL(shim_start(&f, lang_args) == 0);
	for (int r = 0; r < 3; r++) {
		CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c[r]) == 0);
		s[r] = egw_client_recv_open(c[r], room, 1, (uint16_t)r, 3,
					    r == 2 ? EGW_CLIENT_AUX_ONLY : 0,
					    1);
		CU_ASSERT_FATAL(s[r] >= 0);
	}
	for (int r = 0; r < 3; r++)
		CU_ASSERT_FATAL(wait_event(c[r], (uint32_t)s[r],
					   EGW_CLIENT_SUCCESS, MS, &ev));
	CU_ASSERT(check_language_room(c[0], (uint32_t)s[0], room, 300));
	CU_ASSERT(check_language_room(c[1], (uint32_t)s[1], room, 300));
	/* the aux-only rank: one run of one block, the room's total */
	CU_ASSERT(egw_client_room_runs(c[2], (uint32_t)s[2], &run, 1) == 1 &&
		  run.count == 1);
	CU_ASSERT(egw_client_room_aux(c[2], (uint32_t)s[2], &aux) == 0 &&
		  aux.total_tokens == 300 && aux.cookie == room);
	/* a rank already open on the port is refused by the gateway */
	int dup = egw_client_recv_open(c[0], room, 1, 1, 3, 0, 9);

	CU_ASSERT_FATAL(dup >= 0);
	CU_ASSERT(wait_event(c[0], (uint32_t)dup, -1, MS, &ev) &&
		  ev.result == -EEXIST && (ev.flags & EGW_CLIENT_EV_REFUSED) &&
		  (ev.flags & EGW_CLIENT_EV_END));
	for (int r = 0; r < 3; r++) {
		CU_ASSERT(egw_client_release(c[r], (uint32_t)s[r], 2) == 0);
		CU_ASSERT(wait_event(c[r], (uint32_t)s[r], EGW_CLIENT_SUCCESS,
				     MS, &ev) && (ev.flags & EGW_CLIENT_EV_END));
		egw_client_detach(c[r]);
	}
	/* a quarter of the pool cut out (--run-blocks 3) */
	CU_ASSERT(shim_expect(&f, "ended 0 rooms, freed 0 blocks; pool "
			      "free 768 of 768", MS));
	shim_stop(&f);
}

static void
test_language_failure_abort(void)
{
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	int s;

	CU_ASSERT_FATAL(shim_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	s = egw_client_recv_open(c, SHIM_FAIL | 1000, 1, 0, 1, 0, 1);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_FAILED, MS, &ev) &&
		  ev.result == -EGW_E_PEER_DEAD &&
		  (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(strcmp(egw_client_strerror(ev.result), "peer dead") == 0);
	/* a stalled room aborted: Failed is its last event */
	s = egw_client_recv_open(c, SHIM_STALL | 1000, 1, 0, 1, 0, 2);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	CU_ASSERT(egw_client_abort(c, (uint32_t)s, 3) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_FAILED, MS, &ev) &&
		  ev.result == 0 && ev.op == EGW_CLIENT_ABORT &&
		  (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(egw_client_abort(c, (uint32_t)s, 4) == -ENOENT);
	/* a command the gateway refuses: RELEASE before Success */
	s = egw_client_recv_open(c, SHIM_STALL | 1001, 1, 0, 1, 0, 5);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	CU_ASSERT(egw_client_release(c, (uint32_t)s, 6) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, -1, MS, &ev) && ev.tag == 6 &&
		  ev.result == -EBADFD && ev.flags == EGW_CLIENT_EV_REFUSED);
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "detached (socket closed): ended 1 rooms",
			      MS));
	shim_stop(&f);
}

/* ---- encode rooms -------------------------------------------------------- */

static void
write_encode_room(struct egw_client *c, uint32_t slot, uint64_t room,
		  uint32_t total, bool spoil)
{
	const struct egw_client_geometry *g = egw_client_geometry(c);
	uint8_t *emb = egw_client_region(c, EGW_CLIENT_EMBEDDING, NULL);
	uint8_t *fill = egw_client_region(c, EGW_CLIENT_FILL_IDS, NULL);
	uint8_t *mrope = egw_client_region(c, EGW_CLIENT_MROPE, NULL);
	uint32_t eb = g->hidden_size * g->dtype_bytes, t = 0;
	struct egw_client_run runs[256];
	int n = egw_client_room_runs(c, slot, runs, 256);

	CU_ASSERT_FATAL(n > 0 && n <= 256);
	for (int r = 0; r < n; r++)
		for (uint32_t i = 0; i < runs[r].count * g->block_tokens &&
				     t < total; i++, t++) {
			uint64_t tok = (uint64_t)runs[r].start *
				       g->block_tokens + i;
			int32_t f = egw_pattern_fill_id(room, t), m[3];

			egw_pattern_emb(room, t, emb + tok * eb, eb);
			memcpy(fill + tok * 4, &f, 4);
			egw_pattern_mrope(room, t, m);
			memcpy(mrope + tok * 12, m, 12);
		}
	if (spoil)
		emb[(uint64_t)runs[n - 1].start * g->block_tokens * eb] ^= 1;
}

static void
test_encode_round_trip(void)
{
	static const uint32_t lengths[] = { 1, 127, 128, 129, 50000 };
	const char *args[] = { "--mode", "encode", "--port", "enc0",
			       "--dtype", "fp32", "--run-blocks", "4",
			       "--max-runs", "128", NULL };
	struct egw_client_event ev;
	struct egw_client_aux aux;
	struct egw_client *c;
	struct shim_proc f;
	char line[96];

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "enc0", 0, &c) == 0);
	for (unsigned int i = 0; i < 6; i++) {
		uint32_t total = lengths[i % 5];
		uint64_t room = 500 + i;
		bool spoil = i == 5;
		/* the aux record lib/pattern defines: cookie = room */
		int s = egw_client_send_open(c, room, total, 2,
					     EGW_PATTERN_MROPE_DELTA, room, i);

		CU_ASSERT_FATAL(s >= 0);
		CU_ASSERT_FATAL(wait_event(c, (uint32_t)s,
					   EGW_CLIENT_WAITING_FOR_INPUT, MS,
					   &ev));
		CU_ASSERT(egw_client_room_aux(c, (uint32_t)s, &aux) == 0 &&
			  aux.total_tokens == total &&
			  aux.mrope_delta == EGW_PATTERN_MROPE_DELTA &&
			  aux.cookie == room);
		write_encode_room(c, (uint32_t)s, room, total, spoil);
		CU_ASSERT(egw_client_send_commit(c, (uint32_t)s, 50 + i) == 0);
		CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_TRANSFERRING,
				     MS, &ev) && ev.tag == 50 + i);
		CU_ASSERT(wait_event(c, (uint32_t)s, -1, MS, &ev) &&
			  (ev.flags & EGW_CLIENT_EV_END));
		if (spoil) {
			CU_ASSERT(ev.state == EGW_CLIENT_FAILED &&
				  ev.result == -EGW_E_TRANSPORT);
			CU_ASSERT(shim_expect(&f, "1 units differ from the "
					      "pattern", MS));
		} else {
			CU_ASSERT(ev.state == EGW_CLIENT_SUCCESS);
			snprintf(line, sizeof(line), "success, %u tokens "
				 "checked", total);
			CU_ASSERT(shim_expect(&f, line, MS));
		}
	}
	/* over the limit: refused before sending */
	CU_ASSERT(egw_client_send_open(c, 9, 1u << 30, 1, 0, 0, 0) == -EFBIG);
	egw_client_detach(c);
	shim_stop(&f);
}

/* ---- overflow, wake-up, lease, full ring --------------------------------- */

static void
test_overflow_recovery(void)
{
	struct egw_client_opts o = { .size = sizeof(o), .cq_entries = 2 };
	struct egw_client_event ev[64];
	struct egw_client *c;
	struct shim_proc f;
	int s[6], seen[6] = { 0 }, ended = 0, n;
	char line[64];

	CU_ASSERT_FATAL(shim_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(egw_client_attach(f.path, "lang0", &o, &c) == 0);
	for (int i = 0; i < 6; i++) {
		s[i] = egw_client_recv_open(c, (uint64_t)(i + 1) << 24 | 200, 1,
					    0, 1, 0, (uint64_t)i);
		CU_ASSERT_FATAL(s[i] >= 0);
	}
	/* nobody polls while the rooms run: the ring overflows */
	for (int i = 0; i < 6; i++) {
		snprintf(line, sizeof(line), "room %llu rank 0: delivered",
			 (unsigned long long)((uint64_t)(i + 1) << 24 | 200));
		CU_ASSERT(shim_expect(&f, line, MS));
	}
	CU_ASSERT(egw_client_overflow(c) > 0);
	n = egw_client_poll(c, ev, 64);
	for (int k = 0; k < n; k++)
		for (int i = 0; i < 6; i++)
			if (ev[k].slot == (uint32_t)s[i] &&
			    ev[k].state == EGW_CLIENT_SUCCESS)
				seen[i]++;
	for (int i = 0; i < 6; i++) {
		CU_ASSERT(seen[i] == 1);
		CU_ASSERT(check_language_room(c, (uint32_t)s[i],
					      (uint64_t)(i + 1) << 24 | 200,
					      200));
		CU_ASSERT(egw_client_release(c, (uint32_t)s[i], 9) == 0);
	}
	/* the releases' answers overflow too; each room ends exactly once */
	CU_ASSERT(shim_expect(&f, "room 100663496 rank 0: released 2 blocks",
			      MS));
	for (int round = 0; round < 100 && ended < 6; round++) {
		n = egw_client_poll(c, ev, 64);
		for (int k = 0; k < n; k++)
			if (ev[k].flags & EGW_CLIENT_EV_END) {
				CU_ASSERT(ev[k].state == EGW_CLIENT_SUCCESS);
				ended++;
			}
		if (n == 0)
			egw_client_wait(c, 10);
	}
	CU_ASSERT(ended == 6);
	CU_ASSERT(egw_client_poll(c, ev, 64) == 0);
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "ended 0 rooms, freed 0 blocks", MS));
	shim_stop(&f);
}

/* Rooms that fail while the ring is full end once each, with the slot's
 * code, also those whose every completion was lost. */
static void
test_overflow_unseen_failures(void)
{
	struct egw_client_opts o = { .size = sizeof(o), .cq_entries = 2 };
	struct egw_client_event ev[16];
	struct egw_client *c;
	struct shim_proc f;
	int s[4], ended[4] = { 0 }, n;

	CU_ASSERT_FATAL(shim_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(egw_client_attach(f.path, "lang0", &o, &c) == 0);
	for (int i = 0; i < 4; i++) {
		s[i] = egw_client_recv_open(c, SHIM_FAIL | (uint64_t)(i + 1), 1,
					    0, 1, 0, 1);
		CU_ASSERT_FATAL(s[i] >= 0);
	}
	for (int i = 0; i < 4; i++)
		CU_ASSERT(shim_expect(&f, "failed 1019", MS));
	/* the rooms that were never seen need a NOP's round trip */
	for (int round = 0; round < 100 && ended[0] + ended[1] + ended[2] +
						   ended[3] < 4; round++) {
		if (round > 0)
			egw_client_wait(c, 10);
		n = egw_client_poll(c, ev, 16);
		for (int k = 0; k < n; k++)
			for (int i = 0; i < 4; i++)
				if (ev[k].slot == (uint32_t)s[i] &&
				    (ev[k].flags & EGW_CLIENT_EV_END)) {
					CU_ASSERT(ev[k].state ==
						  EGW_CLIENT_FAILED);
					CU_ASSERT(ev[k].result ==
						  -EGW_E_PEER_DEAD);
					ended[i]++;
				}
	}
	for (int i = 0; i < 4; i++) {
		if (ended[i] != 1)
			fprintf(stderr, "slot %d: room ended %d times\n", s[i],
				ended[i]);
		CU_ASSERT(ended[i] == 1);
	}
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "ended 0 rooms, freed 0 blocks", MS));
	shim_stop(&f);
}

static void
test_wakeup_wait(void)
{
	const char *args[] = { "--step-ms", "100", NULL };
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	int s, rc;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", EGW_CLIENT_F_WAKEUP, &c) ==
			0);
	CU_ASSERT(egw_client_geometry(c)->flags & EGW_CLIENT_G_WAKEUP);
	CU_ASSERT(egw_client_event_fd(c) >= 0);
	CU_ASSERT(shim_expect(&f, "wakeup", MS));
	s = egw_client_recv_open(c, 40, 1, 0, 1, 0, 1);
	CU_ASSERT_FATAL(s >= 0);
	for (int i = 0; i < 20; i++) {
		rc = egw_client_wait(c, MS);
		CU_ASSERT_FATAL(rc == 1);
		rc = egw_client_poll(c, &ev, 1);
		if (rc == 1 && ev.state == EGW_CLIENT_SUCCESS)
			break;
	}
	CU_ASSERT(ev.state == EGW_CLIENT_SUCCESS);
	/* the gateway found the bit set and wrote the eventfd */
	CU_ASSERT(shim_expect(&f, "wake-up", MS));
	/* nothing pending: the wait ends at its deadline */
	CU_ASSERT(egw_client_wait(c, 20) == 0);
	egw_client_detach(c);
	shim_stop(&f);
}

static void
test_lease(void)
{
	/* leases long enough for a loaded machine: the thread beats every
	 * 125 ms */
	const char *args[] = { "--lease-ms", "500", NULL };
	struct egw_client_event ev;
	struct egw_client *a, *b;
	struct shim_proc f;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", EGW_CLIENT_F_LEASE_THREAD,
				    &a) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &b) == 0);
	CU_ASSERT(egw_client_geometry(a)->lease_ms == 500);
	/* b stays away from the library for a lease: lib/engines gives it
	 * up; a's thread keeps it attached */
	CU_ASSERT(shim_expect(&f, "client 1 given up (lease expired", MS));
	usleep(1500 * 1000);
	CU_ASSERT(egw_client_nop(a, 5) == 0);
	CU_ASSERT(wait_event(a, 0, -1, MS, &ev) && ev.tag == 5);
	CU_ASSERT(egw_client_wait(b, MS) == -ECONNRESET);
	CU_ASSERT(egw_client_nop(b, 6) == -ECONNRESET);
	/* a client that keeps calling the library needs no thread */
	egw_client_detach(b);
	CU_ASSERT(shim_expect(&f, "client 1 detached (socket closed)", MS));
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &b) == 0);
	for (int i = 0; i < 10; i++)
		CU_ASSERT(egw_client_wait(b, 150) == 0);
	CU_ASSERT(egw_client_nop(b, 7) == 0);
	CU_ASSERT(wait_event(b, 0, -1, MS, &ev) && ev.tag == 7);
	egw_client_detach(a);
	egw_client_detach(b);
	CU_ASSERT(shim_expect(&f, "client 0 detached (socket closed)", MS));
	shim_stop(&f);
}

/* A client the gateway gave up (lease) while it held a delivered room:
 * every call says so before it can act on the room, and the pool's
 * mapping is revoked in place (zeros, no fault). */
static void
test_lost_lease_every_call(void)
{
	const char *args[] = { "--lease-ms", "200", NULL };
	struct egw_client_event ev;
	struct egw_client_run run;
	struct egw_client *c;
	const uint8_t *emb;
	uint64_t bytes, nonzero = 0;
	struct shim_proc f;
	int s;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	s = egw_client_recv_open(c, 700, 1, 0, 1, 0, 1);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT_FATAL(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS,
				   &ev));
	emb = egw_client_region(c, EGW_CLIENT_EMBEDDING, &bytes);
	CU_ASSERT(egw_client_lost(c) == 0);
	/* the shim's clock past the lease: no waiting for it */
	shim_say(&f, "skip 1000");
	/* the delivered room's 6 blocks stay out of the pool while the
	 * client may still map them */
	CU_ASSERT(shim_expect(&f, "given up (lease expired (client_beat did "
			      "not move)): 6 blocks held", MS));
	CU_ASSERT(egw_client_lost(c) == EGW_CLIENT_LOST_LEASE);
	CU_ASSERT(egw_client_room_runs(c, (uint32_t)s, &run, 1) ==
		  -ECONNRESET);
	CU_ASSERT(strstr(egw_client_last_error(), "lease expired") != NULL);
	CU_ASSERT(egw_client_release(c, (uint32_t)s, 2) == -ECONNRESET);
	CU_ASSERT(egw_client_poll(c, &ev, 1) == -ECONNRESET);
	CU_ASSERT(egw_client_check(c) == -ECONNRESET);
	for (uint64_t i = 0; i < bytes; i += 4096)
		nonzero += emb[i] != 0;
	CU_ASSERT(nonzero == 0);
	egw_client_detach(c);
	/* its socket closed: the held blocks go back */
	CU_ASSERT(shim_expect(&f, "ended 0 rooms, freed 6 blocks; pool free "
			      "1024 of 1024", MS));
	shim_stop(&f);
}

static void
test_full_ring(void)
{
	struct egw_client_opts o = { .size = sizeof(o), .sq_entries = 2 };
	struct egw_client_event ev[4];
	struct egw_client *c;
	struct shim_proc f;
	int n = 0;

	CU_ASSERT_FATAL(shim_start(&f, NULL) == 0);
	CU_ASSERT_FATAL(egw_client_attach(f.path, "lang0", &o, &c) == 0);
	kill(f.pid, SIGSTOP);
	CU_ASSERT(egw_client_nop(c, 1) == 0);
	CU_ASSERT(egw_client_nop(c, 2) == 0);
	CU_ASSERT(egw_client_nop(c, 3) == -EAGAIN);
	CU_ASSERT(egw_client_recv_open(c, 10, 1, 0, 1, 0, 4) == -EAGAIN);
	kill(f.pid, SIGCONT);
	while (n < 2 && egw_client_wait(c, MS) == 1)
		n += egw_client_poll(c, ev + n, 4 - (unsigned int)n);
	CU_ASSERT(n == 2 && ev[0].tag == 1 && ev[1].tag == 2);
	/* the refused OPEN left its slot free */
	CU_ASSERT(egw_client_recv_open(c, 10, 1, 0, 1, 0, 4) >= 0);
	egw_client_detach(c);
	shim_stop(&f);
}

/* ---- deaths --------------------------------------------------------------- */

static void
test_client_killed(void)
{
	struct shim_proc f;
	int pfd[2], st;
	char ok = 0;
	pid_t child;

	CU_ASSERT_FATAL(shim_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(pipe(pfd) == 0);
	child = fork();
	if (child == 0) {
		struct egw_client_event ev;
		struct egw_client *c;
		int s;

		if (shim_attach(&f, "lang0", 0, &c) != 0)
			_exit(1);
		s = egw_client_recv_open(c, SHIM_STALL | 640, 1, 0, 1, 0, 1);
		if (s < 0 || !wait_event(c, (uint32_t)s,
					 EGW_CLIENT_WAITING_FOR_INPUT, MS,
					 &ev))
			_exit(1);
		s = egw_client_recv_open(c, 641, 1, 0, 1, 0, 1);
		if (s < 0 || !wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS,
					 MS, &ev))
			_exit(1);
		(void)!write(pfd[1], "k", 1);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	CU_ASSERT(read(pfd[0], &ok, 1) == 1 && ok == 'k');
	close(pfd[0]);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* the stalled room held no blocks, the delivered one 6 */
	CU_ASSERT(shim_expect(&f, "room 641 rank 0: released 6 blocks", MS));
	CU_ASSERT(shim_expect(&f, "detached (socket closed): ended 2 rooms, "
			      "freed 6 blocks; pool free 768 of 768", MS));
	shim_stop(&f);
}

static void
test_gateway_gone(void)
{
	struct egw_client_event ev[2];
	struct egw_client *c;
	struct shim_proc f;

	CU_ASSERT_FATAL(shim_start(&f, NULL) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", EGW_CLIENT_F_WAKEUP, &c) ==
			0);
	shim_stop(&f);
	CU_ASSERT(egw_client_wait(c, MS) == -ECONNRESET);
	CU_ASSERT(egw_client_poll(c, ev, 2) == -ECONNRESET);
	CU_ASSERT(strstr(egw_client_last_error(), "closed") != NULL);
	egw_client_detach(c);
}

/* ---- scripted failures, stats, content keys, read-only pool, memory ---- */

/* The gateway's failures reach the client with the gateway's code, on
 * both sides, at any state the transfer reports them in. */
static void
test_scripted_failures(void)
{
	const char *enc[] = { "--mode", "encode", "--port", "enc0", NULL };
	const uint64_t lang = SHIM_STALL | 3000, send = SHIM_STALL | 3001;
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	int s;

	CU_ASSERT_FATAL(shim_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	s = egw_client_recv_open(c, lang, 1, 0, 1, 0, 1);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	shim_say(&f, "fail %llu 0 %d", (unsigned long long)lang,
		 EGW_E_TIMEOUT_ROUND);
	CU_ASSERT(wait_event(c, (uint32_t)s, -1, MS, &ev) &&
		  ev.state == EGW_CLIENT_FAILED &&
		  ev.result == -EGW_E_TIMEOUT_ROUND &&
		  (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(strcmp(egw_client_strerror(ev.result), "timeout: round") ==
		  0);
	/* a plain errno the node may end a room with */
	s = egw_client_recv_open(c, lang, 1, 0, 1, 0, 2);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	shim_say(&f, "fail %llu 0 %d", (unsigned long long)lang, -ETIMEDOUT);
	CU_ASSERT(wait_event(c, (uint32_t)s, -1, MS, &ev) &&
		  ev.state == EGW_CLIENT_FAILED && ev.result == -ETIMEDOUT);
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "ended 0 rooms, freed 0 blocks; pool free "
			      "768 of 768", MS));
	shim_stop(&f);

	/* an encode room ended by its peers after the commit */
	CU_ASSERT_FATAL(shim_start(&f, enc) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "enc0", 0, &c) == 0);
	s = egw_client_send_open(c, send, 300, 1, EGW_PATTERN_MROPE_DELTA,
				 send, 1);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	CU_ASSERT(egw_client_send_commit(c, (uint32_t)s, 2) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_TRANSFERRING, MS,
			     &ev));
	shim_say(&f, "fail %llu 0 %d", (unsigned long long)send,
		 EGW_E_ABORTED);
	CU_ASSERT(wait_event(c, (uint32_t)s, -1, MS, &ev) &&
		  ev.state == EGW_CLIENT_FAILED &&
		  ev.result == -EGW_E_ABORTED);
	CU_ASSERT(shim_expect(&f, "failed 1020", MS));
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "ended 0 rooms, freed 0 blocks; pool free "
			      "1024 of 1024", MS));
	shim_stop(&f);
}

/* Read the published stats until `ok` holds of them (the gateway
 * publishes about once a millisecond). */
static bool
stats_until(struct egw_client *c, bool (*ok)(const struct egw_client_stats *,
					   uint32_t), uint32_t arg,
	    struct egw_client_stats *st)
{
	for (int i = 0; i < 500; i++) {
		int rc = egw_client_stats(c, st);

		if (rc == 0 && ok(st, arg))
			return true;
		if (rc != 0 && rc != -EAGAIN && rc != -ENODATA)
			return false;
		egw_client_wait(c, 10);
	}
	fprintf(stderr, "stats: pool %u free %u hits %llu\n", st->pool_blocks,
		st->free_blocks, (unsigned long long)st->cache_hits);
	return false;
}

static bool
free_is(const struct egw_client_stats *st, uint32_t n)
{
	return st->free_blocks == n;
}

static void
test_published_stats(void)
{
	struct egw_client_stats st = { 0 };
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	int s;

	CU_ASSERT_FATAL(shim_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	CU_ASSERT(stats_until(c, free_is, 768, &st) && st.pool_blocks == 768);
	/* 1000 tokens: 8 blocks are the client's until RELEASE */
	s = egw_client_recv_open(c, 1000, 1, 0, 1, 0, 1);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT_FATAL(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS,
				   &ev));
	CU_ASSERT(stats_until(c, free_is, 760, &st));
	CU_ASSERT(st.admission_queue == 0 && st.quarantined_blocks == 0);
	CU_ASSERT(egw_client_release(c, (uint32_t)s, 2) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS, &ev) &&
		  (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(stats_until(c, free_is, 768, &st));
	egw_client_detach(c);
	shim_stop(&f);
}

static bool
hits_are(const struct egw_client_stats *st, uint32_t n)
{
	return st->cache_hits == n;
}

/* A content key names data the port keeps: the second room with the key
 * is served from the first one's blocks, without a transfer. */
static void
test_content_keys(void)
{
	const char *args[] = { "--cache-entries", "8", NULL };
	const uint8_t key[EGW_CLIENT_CONTENT_BYTES] = { 0xeb, 1, 2, 3 };
	const uint64_t first = 400, second = (1ull << 24) | 400;
	struct egw_client_stats st = { 0 };
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	int s, s2;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	CU_ASSERT(egw_client_lookup(c, key, 1) == 0);
	CU_ASSERT(wait_event(c, 0, -1, MS, &ev) &&
		  ev.op == EGW_CLIENT_LOOKUP && ev.tag == 1 &&
		  ev.result == EGW_CLIENT_LOOKUP_NONE);
	s = egw_client_recv_open_ex(c, first, 1, 0, 1, 0, 0, key, 2);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT_FATAL(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS,
				   &ev));
	CU_ASSERT(!(ev.flags & EGW_CLIENT_EV_CACHED));
	CU_ASSERT(check_language_room(c, (uint32_t)s, first, 400));
	CU_ASSERT(egw_client_release(c, (uint32_t)s, 3) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS, &ev) &&
		  (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(egw_client_lookup(c, key, 4) == 0);
	CU_ASSERT(wait_event(c, 0, -1, MS, &ev) && ev.tag == 4 &&
		  ev.result == EGW_CLIENT_LOOKUP_LANDED);
	/* another room, the same content: the first room's bytes, at once */
	s2 = egw_client_recv_open_ex(c, second, 1, 0, 1, 0, 0, key, 5);
	CU_ASSERT_FATAL(s2 >= 0);
	CU_ASSERT_FATAL(wait_event(c, (uint32_t)s2, EGW_CLIENT_SUCCESS, MS,
				   &ev));
	CU_ASSERT(ev.flags & EGW_CLIENT_EV_CACHED);
	CU_ASSERT(check_language_room(c, (uint32_t)s2, first, 400));
	CU_ASSERT(stats_until(c, hits_are, 1, &st) && st.cache_misses == 1 &&
		  st.cache_entries == 1);
	CU_ASSERT(egw_client_release(c, (uint32_t)s2, 6) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s2, EGW_CLIENT_SUCCESS, MS, &ev));
	egw_client_detach(c);
	shim_stop(&f);
}

/* A language port's pool as the gateway hands it over: read-only. The
 * client reads every byte; a write faults. */
static void
test_pool_read_only(void)
{
	const char *args[] = { "--pool-rdonly", NULL };
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	uint8_t *emb;
	pid_t child;
	int s, st;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	CU_ASSERT(egw_client_geometry(c)->flags & EGW_CLIENT_G_POOL_RDONLY);
	s = egw_client_recv_open(c, 777, 1, 0, 1, 0, 1);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT_FATAL(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS,
				   &ev));
	CU_ASSERT(check_language_room(c, (uint32_t)s, 777, 777));
	emb = egw_client_region(c, EGW_CLIENT_EMBEDDING, NULL);
	child = fork();
	if (child == 0) {
		signal(SIGSEGV, SIG_DFL);
		__atomic_store_n(emb, 1, __ATOMIC_RELAXED);
		_exit(0);
	}
	CU_ASSERT_FATAL(child > 0);
	waitpid(child, &st, 0);
	CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
	egw_client_detach(c);
	shim_stop(&f);

	/* without it, the same mapping is writable (the check can fail) */
	CU_ASSERT_FATAL(shim_start(&f, NULL) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "lang0", 0, &c) == 0);
	CU_ASSERT(!(egw_client_geometry(c)->flags & EGW_CLIENT_G_POOL_RDONLY));
	egw_client_detach(c);
	shim_stop(&f);
}

/* SEND_OPEN waits for memory the pool does not have (Bootstrapping), is
 * served once a room gives its blocks back, and is refused at the
 * allocation deadline with the gateway's code. */
static void
test_encode_waits_for_memory(void)
{
	const char *args[] = { "--mode", "encode", "--port", "enc0",
			       "--capacity", "1024", "--alloc-ms", "300",
			       NULL };
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	int a, b;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "enc0", 0, &c) == 0);
	a = egw_client_send_open(c, 60, 1024, 1, EGW_PATTERN_MROPE_DELTA, 60,
				 1);
	CU_ASSERT_FATAL(a >= 0);
	CU_ASSERT(wait_event(c, (uint32_t)a, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	b = egw_client_send_open(c, 61, 128, 1, EGW_PATTERN_MROPE_DELTA, 61,
				 2);
	CU_ASSERT_FATAL(b >= 0);
	CU_ASSERT(wait_event(c, (uint32_t)b, EGW_CLIENT_BOOTSTRAPPING, MS,
			     &ev));
	CU_ASSERT(egw_client_abort(c, (uint32_t)a, 3) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)a, EGW_CLIENT_FAILED, MS, &ev));
	CU_ASSERT(wait_event(c, (uint32_t)b, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	/* the pool full again: the next one waits out its deadline */
	a = egw_client_send_open(c, 62, 1000, 1, EGW_PATTERN_MROPE_DELTA, 62,
				 4);
	CU_ASSERT_FATAL(a >= 0);
	CU_ASSERT(wait_event(c, (uint32_t)a, EGW_CLIENT_BOOTSTRAPPING, MS,
			     &ev));
	shim_say(&f, "skip 1000");
	CU_ASSERT(wait_event(c, (uint32_t)a, -1, MS, &ev) &&
		  ev.state == EGW_CLIENT_FAILED &&
		  ev.result == -EGW_E_POOL_EXHAUSTED);
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "ended 1 rooms, freed 1 blocks; pool free "
			      "8 of 8", MS));
	shim_stop(&f);
}

/* Rooms waiting for memory are bounded per engine: one more is told
 * "busy" at once, a clear answer instead of a queue without end. */
static void
test_encode_busy(void)
{
	const char *args[] = { "--mode", "encode", "--port", "enc0",
			       "--capacity", "1024", NULL };
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	int full, s[9];

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(shim_attach(&f, "enc0", 0, &c) == 0);
	full = egw_client_send_open(c, 70, 1024, 1, 0, 0, 1);
	CU_ASSERT_FATAL(full >= 0);
	CU_ASSERT(wait_event(c, (uint32_t)full, EGW_CLIENT_WAITING_FOR_INPUT,
			     MS, &ev));
	/* the shim's gateway lets 8 wait (lib/engines' max_waiting) */
	for (int i = 0; i < 9; i++) {
		s[i] = egw_client_send_open(c, 71 + (uint64_t)i, 128, 1, 0, 0,
					    2);
		CU_ASSERT_FATAL(s[i] >= 0);
	}
	for (int i = 0; i < 8; i++)
		CU_ASSERT(wait_event(c, (uint32_t)s[i],
				     EGW_CLIENT_BOOTSTRAPPING, MS, &ev));
	CU_ASSERT(wait_event(c, (uint32_t)s[8], -1, MS, &ev) &&
		  ev.state == EGW_CLIENT_FAILED &&
		  ev.result == -EGW_E_BUSY && (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(strcmp(egw_client_strerror(ev.result), "busy") == 0);
	egw_client_detach(c);
	CU_ASSERT(shim_expect(&f, "ended 9 rooms, freed 8 blocks; pool free "
			      "8 of 8", MS));
	shim_stop(&f);
}

/* ---- peers by id and by name ------------------------------------------- */

/* Take events for up to `ms`: note a PEERS event whose generation is past
 * `*gen` (it moves *gen) and the state of `slot`'s room. @return whether
 * both came: the list changed and the room reached `state`. */
static bool
peers_and_room(struct egw_client *c, uint64_t *gen, uint32_t slot,
	       uint32_t state, unsigned int ms)
{
	bool moved = false, reached = false;

	for (unsigned int waited = 0; waited < ms && !(moved && reached);
	     waited += 10) {
		struct egw_client_event ev[8];
		int n = egw_client_poll(c, ev, 8);

		for (int i = 0; i < n; i++) {
			if (ev[i].op == EGW_CLIENT_PEERS && ev[i].room > *gen) {
				*gen = ev[i].room;
				moved = true;
			} else if (ev[i].op != EGW_CLIENT_PEERS &&
				   ev[i].slot == slot && ev[i].state == state) {
				reached = true;
			}
		}
		if (n == 0)
			(void)egw_client_wait(c, 10);
	}
	return moved && reached;
}

static void
test_peers_by_id_and_name(void)
{
	const char *args[] = { "--peers", "encA", "--peer-wait-ms", "5000",
			       NULL };
	struct egw_client_opts o = { .size = sizeof(o),
				     .name = "cunit",
				     .flags = EGW_CLIENT_F_PEER_EVENTS };
	char long_name[40];
	struct egw_client_peer p[4];
	struct egw_client_event ev;
	struct egw_client *c;
	struct shim_proc f;
	uint64_t gen = 0, seen = 0;
	int s;

	CU_ASSERT_FATAL(shim_start(&f, args) == 0);
	CU_ASSERT_FATAL(egw_client_attach(f.path, "lang0", &o, &c) == 0);
	CU_ASSERT(egw_client_peers(c, p, 4, &gen) == 1);
	CU_ASSERT(p[0].id == 1 && strcmp(p[0].name, "encA") == 0 &&
		  p[0].flags == EGW_CLIENT_PEER_READY && gen > 0);
	CU_ASSERT(egw_client_peer_id(c, "encB") == -ENOENT);
	/* a room from a peer not listed yet waits for it */
	s = egw_client_recv_open_named(c, 1 << 24 | 200, "encB", 0, 1, 0, 0,
				       NULL, 1);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT(peers_and_room(c, &seen, (uint32_t)s,
				 EGW_CLIENT_BOOTSTRAPPING, MS) &&
		  seen == gen);
	shim_say(&f, "peer-add encB");
	CU_ASSERT(shim_expect(&f, "peer encB joined as id 2", MS));
	CU_ASSERT(
		peers_and_room(c, &seen, (uint32_t)s, EGW_CLIENT_SUCCESS, MS) &&
		seen > gen);
	CU_ASSERT(egw_client_peers(c, p, 4, &gen) == 2 && gen == seen);
	CU_ASSERT(egw_client_peer_id(c, "encB") == 2);
	CU_ASSERT(check_language_room(c, (uint32_t)s, 1 << 24 | 200, 200));
	CU_ASSERT(egw_client_release(c, (uint32_t)s, 2) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS, &ev) &&
		  (ev.flags & EGW_CLIENT_EV_END));
	/* removed: its id fails a room, never reaches another peer */
	shim_say(&f, "peer-remove encB");
	CU_ASSERT(shim_expect(&f, "peer encB removed", MS));
	s = egw_client_recv_open(c, 2 << 24 | 10, 2, 0, 1, 0, 3);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_FAILED, MS, &ev) &&
		  ev.result == -1026 && (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(strcmp(egw_client_strerror(-1026), "peer removed") == 0);
	/* names and ids that are none: caught before anything is sent */
	memset(long_name, 'x', 32);
	long_name[32] = '\0';
	CU_ASSERT(egw_client_recv_open_named(c, 5, long_name, 0, 1, 0, 0, NULL,
					     4) == -EINVAL);
	CU_ASSERT(egw_client_recv_open_named(c, 5, "", 0, 1, 0, 0, NULL, 4) ==
		  -EINVAL);
	CU_ASSERT(egw_client_recv_open(c, 5, 0, 0, 1, 0, 4) == -EINVAL);
	egw_client_detach(c);
	shim_stop(&f);
}

int
main(int argc, char **argv)
{
	static const struct cu_test tests[] = {
		{ "attach, geometry, nop", test_attach_geometry_nop },
		{ "attach refusals", test_attach_refusals },
		{ "language bf16 round trip", test_language_bf16 },
		{ "language fp16 round trip", test_language_fp16 },
		{ "language fp32 round trip", test_language_fp32 },
		{ "language ranks + aux-only", test_language_ranks_aux_only },
		{ "language failure, abort, refusal",
		  test_language_failure_abort },
		{ "encode round trip", test_encode_round_trip },
		{ "overflow recovery", test_overflow_recovery },
		{ "overflow: unseen failures", test_overflow_unseen_failures },
		{ "wake-up wait", test_wakeup_wait },
		{ "lease", test_lease },
		{ "lost_lease_every_call", test_lost_lease_every_call },
		{ "full submission ring", test_full_ring },
		{ "client killed", test_client_killed },
		{ "gateway gone", test_gateway_gone },
		{ "scripted failures", test_scripted_failures },
		{ "peers by id and name", test_peers_by_id_and_name },
		{ "published stats", test_published_stats },
		{ "content keys", test_content_keys },
		{ "read-only pool", test_pool_read_only },
		{ "encode waits for memory", test_encode_waits_for_memory },
		{ "encode busy", test_encode_busy },
		{ NULL, NULL },
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s ATTACH_SHIM\n", argv[0]);
		return 2;
	}
	shim_program = argv[1];
	signal(SIGPIPE, SIG_IGN);
	return cu_run("client", tests);
}
