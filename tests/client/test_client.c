/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/client against the fake gateway (tests/client/fake_gateway.c):
 * attach and its refusals, language and encode rooms byte-exact over
 * several runs, ranks and an aux-only rank, the overflow recovery, the
 * wake-up wait, the lease, a full submission ring, a client killed with
 * SIGKILL, a gateway that goes away.
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
#include "pattern.h"

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
	struct fake f;
	const struct egw_client_geometry *g;
	uint64_t bytes;
	int n = 0;

	CU_ASSERT_FATAL(fake_start(&f, args) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", 0, &c) == 0);
	g = egw_client_geometry(c);
	CU_ASSERT(g->dtype == EGW_CLIENT_FP16 && g->dtype_bytes == 2);
	CU_ASSERT(g->hidden_size == 96 && g->block_tokens == 64);
	CU_ASSERT(g->nblocks == 128 && g->nslots == 64);
	CU_ASSERT(g->flags == EGW_CLIENT_G_LANGUAGE);
	CU_ASSERT(egw_client_peer_index(c, "encB") == 1);
	CU_ASSERT(egw_client_peer_index(c, "encC") == -ENOENT);
	CU_ASSERT(egw_client_peer(c, 2) == NULL);
	CU_ASSERT(egw_client_region(c, EGW_CLIENT_EMBEDDING, &bytes) != NULL);
	CU_ASSERT(bytes == 8192ull * 96 * 2);
	CU_ASSERT(egw_client_event_fd(c) == -1);
	CU_ASSERT(fake_expect(&f, "name cunit", MS));
	CU_ASSERT(egw_client_nop(c, 77) == 0);
	CU_ASSERT(egw_client_wait(c, MS) == 1);
	n = egw_client_poll(c, ev, 4);
	CU_ASSERT(n == 1 && ev[0].op == EGW_CLIENT_NOP && ev[0].tag == 77 &&
		  ev[0].result == 0);
	/* the wrong side's command is caught before it is sent */
	CU_ASSERT(egw_client_send_open(c, 5, 10, 1, 0, 0, 1) == -EOPNOTSUPP);
	CU_ASSERT(strstr(egw_client_last_error(), "send_open") != NULL);
	egw_client_detach(c);
	CU_ASSERT(fake_expect(&f, "detached (socket closed): aborted 0", MS));
	fake_stop(&f);
}

static void
test_attach_refusals(void)
{
	const char *v2[] = { "--speak-version", "3", NULL };
	const char *one[] = { "--max-clients", "1", NULL };
	struct egw_client *c = NULL, *c2 = NULL;
	struct fake f;

	CU_ASSERT_FATAL(fake_start(&f, NULL) == 0);
	CU_ASSERT(fake_attach(&f, "nope", 0, &c) == -ENOENT);
	CU_ASSERT(strstr(egw_client_last_error(), "no port called nope") !=
		  NULL);
	CU_ASSERT(fake_attach(&f, "a-port-name-that-is-far-too-long-1", 0,
			      &c) == -EINVAL);
	fake_stop(&f);

	CU_ASSERT_FATAL(fake_start(&f, v2) == 0);
	CU_ASSERT(fake_attach(&f, "lang0", 0, &c) == -EPROTONOSUPPORT);
	CU_ASSERT(strstr(egw_client_last_error(), "version 2") != NULL);
	CU_ASSERT(strstr(egw_client_last_error(), "version 3") != NULL);
	fake_stop(&f);

	CU_ASSERT_FATAL(fake_start(&f, one) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", 0, &c) == 0);
	CU_ASSERT(fake_attach(&f, "lang0", 0, &c2) == -EUSERS);
	CU_ASSERT(strstr(egw_client_last_error(), "1 clients") != NULL);
	egw_client_detach(c);
	fake_stop(&f);

	char arg[16], why[64];
	const char *uid[] = { "--allow-uid", arg, NULL };

	snprintf(arg, sizeof(arg), "%u", (unsigned int)getuid() + 1);
	snprintf(why, sizeof(why), "uid %u may not attach",
		 (unsigned int)getuid());
	CU_ASSERT_FATAL(fake_start(&f, uid) == 0);
	CU_ASSERT(fake_attach(&f, "lang0", 0, &c) == -EACCES);
	CU_ASSERT(strstr(egw_client_last_error(), why) != NULL);
	fake_stop(&f);

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
	int n = egw_client_room_runs(c, slot, runs, 256);

	if (n <= 0 || n > 256 || egw_client_room_aux(c, slot, &aux) != 0)
		return false;
	if (aux.total_tokens != total || aux.cookie != pat_cookie(room) ||
	    aux.mrope_delta != pat_delta(room) ||
	    aux.hidden_size != g->hidden_size)
		return false;
	for (int r = 0; r < n; r++)
		for (uint32_t i = 0; i < runs[r].count * g->block_tokens &&
				     t < total; i++, t++) {
			uint64_t tok = (uint64_t)runs[r].start *
				       g->block_tokens + i;
			uint32_t f = pat_fill(room, t);

			for (uint32_t k = 0; k < eb; k++)
				if (emb[tok * eb + k] != pat_emb(room, t, k))
					return false;
			if (memcmp(fill + tok * 4, &f, 4) != 0)
				return false;
			for (uint32_t k = 0; k < 3; k++) {
				uint32_t m = pat_mrope(room, t, k);

				if (memcmp(mrope + tok * 12 + 4 * k, &m, 4))
					return false;
			}
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
	struct fake f;

	CU_ASSERT_FATAL(fake_start(&f, args) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", 0, &c) == 0);
	for (unsigned int i = 0; i < 5; i++) {
		uint64_t room = ((uint64_t)(i + 1) << 24) | lengths[i];
		int s = egw_client_recv_open(c, room, 0, 0, 1, 0, 100 + i);
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
	CU_ASSERT(fake_expect(&f, "aborted 0 rooms, freed 0 blocks", MS));
	fake_stop(&f);
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
	struct fake f;
	int s[3];

	CU_ASSERT_FATAL(fake_start(&f, lang_args) == 0);
	for (int r = 0; r < 3; r++) {
		CU_ASSERT_FATAL(fake_attach(&f, "lang0", 0, &c[r]) == 0);
		s[r] = egw_client_recv_open(c[r], room, 0, (uint16_t)r, 3,
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
		  aux.total_tokens == 300 && aux.cookie == pat_cookie(room));
	/* a rank already open on the port is refused by the gateway */
	int dup = egw_client_recv_open(c[0], room, 0, 1, 3, 0, 9);

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
	CU_ASSERT(fake_expect(&f, "aborted 0 rooms, freed 0 blocks; pool "
			      "free 1024 of 1024", MS));
	fake_stop(&f);
}

static void
test_language_failure_abort(void)
{
	struct egw_client_event ev;
	struct egw_client *c;
	struct fake f;
	int s;

	CU_ASSERT_FATAL(fake_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", 0, &c) == 0);
	s = egw_client_recv_open(c, PAT_FAIL | 1000, 0, 0, 1, 0, 1);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_FAILED, MS, &ev) &&
		  ev.result == -1019 && (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(strcmp(egw_client_strerror(ev.result), "peer dead") == 0);
	/* a stalled room aborted: Failed is its last event */
	s = egw_client_recv_open(c, PAT_STALL | 1000, 0, 0, 1, 0, 2);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	CU_ASSERT(egw_client_abort(c, (uint32_t)s, 3) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_FAILED, MS, &ev) &&
		  ev.result == 0 && ev.op == EGW_CLIENT_ABORT &&
		  (ev.flags & EGW_CLIENT_EV_END));
	CU_ASSERT(egw_client_abort(c, (uint32_t)s, 4) == -ENOENT);
	/* a command the gateway refuses: RELEASE before Success */
	s = egw_client_recv_open(c, PAT_STALL | 1001, 0, 0, 1, 0, 5);
	CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_WAITING_FOR_INPUT, MS,
			     &ev));
	CU_ASSERT(egw_client_release(c, (uint32_t)s, 6) == 0);
	CU_ASSERT(wait_event(c, (uint32_t)s, -1, MS, &ev) && ev.tag == 6 &&
		  ev.result == -EBADFD && ev.flags == EGW_CLIENT_EV_REFUSED);
	egw_client_detach(c);
	CU_ASSERT(fake_expect(&f, "detached (socket closed): aborted 1 rooms",
			      MS));
	fake_stop(&f);
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
			uint32_t f = pat_fill(room, t);

			for (uint32_t k = 0; k < eb; k++)
				emb[tok * eb + k] = pat_emb(room, t, k);
			memcpy(fill + tok * 4, &f, 4);
			for (uint32_t k = 0; k < 3; k++) {
				uint32_t m = pat_mrope(room, t, k);

				memcpy(mrope + tok * 12 + 4 * k, &m, 4);
			}
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
	struct fake f;
	char line[96];

	CU_ASSERT_FATAL(fake_start(&f, args) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "enc0", 0, &c) == 0);
	for (unsigned int i = 0; i < 6; i++) {
		uint32_t total = lengths[i % 5];
		uint64_t room = 500 + i;
		bool spoil = i == 5;
		int s = egw_client_send_open(c, room, total, 2, -7, 0xc0ffee,
					     i);

		CU_ASSERT_FATAL(s >= 0);
		CU_ASSERT_FATAL(wait_event(c, (uint32_t)s,
					   EGW_CLIENT_WAITING_FOR_INPUT, MS,
					   &ev));
		CU_ASSERT(egw_client_room_aux(c, (uint32_t)s, &aux) == 0 &&
			  aux.total_tokens == total && aux.mrope_delta == -7 &&
			  aux.cookie == 0xc0ffee);
		write_encode_room(c, (uint32_t)s, room, total, spoil);
		CU_ASSERT(egw_client_send_commit(c, (uint32_t)s, 50 + i) == 0);
		CU_ASSERT(wait_event(c, (uint32_t)s, EGW_CLIENT_TRANSFERRING,
				     MS, &ev) && ev.tag == 50 + i);
		CU_ASSERT(wait_event(c, (uint32_t)s, -1, MS, &ev) &&
			  (ev.flags & EGW_CLIENT_EV_END));
		if (spoil) {
			CU_ASSERT(ev.state == EGW_CLIENT_FAILED &&
				  ev.result == -1021);
			CU_ASSERT(fake_expect(&f, "differs from the pattern",
					      MS));
		} else {
			CU_ASSERT(ev.state == EGW_CLIENT_SUCCESS);
			snprintf(line, sizeof(line), "success, %u tokens "
				 "checked", total);
			CU_ASSERT(fake_expect(&f, line, MS));
		}
	}
	/* over the limit: refused before sending */
	CU_ASSERT(egw_client_send_open(c, 9, 1u << 30, 1, 0, 0, 0) == -EFBIG);
	egw_client_detach(c);
	fake_stop(&f);
}

/* ---- overflow, wake-up, lease, full ring --------------------------------- */

static void
test_overflow_recovery(void)
{
	struct egw_client_opts o = { .size = sizeof(o), .cq_entries = 2 };
	struct egw_client_event ev[64];
	struct egw_client *c;
	struct fake f;
	int s[6], seen[6] = { 0 }, ended = 0, n;
	char line[64];

	CU_ASSERT_FATAL(fake_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(egw_client_attach(f.path, "lang0", &o, &c) == 0);
	for (int i = 0; i < 6; i++) {
		s[i] = egw_client_recv_open(c, (uint64_t)(i + 1) << 24 | 200,
					    0, 0, 1, 0, (uint64_t)i);
		CU_ASSERT_FATAL(s[i] >= 0);
	}
	/* nobody polls while the rooms run: the ring overflows */
	for (int i = 0; i < 6; i++) {
		snprintf(line, sizeof(line), "room %llu rank 0: success",
			 (unsigned long long)((uint64_t)(i + 1) << 24 | 200));
		CU_ASSERT(fake_expect(&f, line, MS));
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
	CU_ASSERT(fake_expect(&f, "room 100663496 rank 0: released", MS));
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
	CU_ASSERT(fake_expect(&f, "aborted 0 rooms, freed 0 blocks", MS));
	fake_stop(&f);
}

/* Rooms that fail while the ring is full end once each, with the slot's
 * code, also those whose every completion was lost. */
static void
test_overflow_unseen_failures(void)
{
	struct egw_client_opts o = { .size = sizeof(o), .cq_entries = 2 };
	struct egw_client_event ev[16];
	struct egw_client *c;
	struct fake f;
	int s[4], ended[4] = { 0 }, n;

	CU_ASSERT_FATAL(fake_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(egw_client_attach(f.path, "lang0", &o, &c) == 0);
	for (int i = 0; i < 4; i++) {
		s[i] = egw_client_recv_open(c, PAT_FAIL | (uint64_t)(i + 1),
					    0, 0, 1, 0, 1);
		CU_ASSERT_FATAL(s[i] >= 0);
	}
	for (int i = 0; i < 4; i++)
		CU_ASSERT(fake_expect(&f, "failed -1019", MS));
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
					CU_ASSERT(ev[k].result == -1019);
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
	CU_ASSERT(fake_expect(&f, "aborted 0 rooms, freed 0 blocks", MS));
	fake_stop(&f);
}

static void
test_wakeup_wait(void)
{
	const char *args[] = { "--step-ms", "100", NULL };
	struct egw_client_event ev;
	struct egw_client *c;
	struct fake f;
	int s, rc;

	CU_ASSERT_FATAL(fake_start(&f, args) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", EGW_CLIENT_F_WAKEUP, &c) ==
			0);
	CU_ASSERT(egw_client_geometry(c)->flags & EGW_CLIENT_G_WAKEUP);
	CU_ASSERT(egw_client_event_fd(c) >= 0);
	CU_ASSERT(fake_expect(&f, "wakeup", MS));
	s = egw_client_recv_open(c, 40, 0, 0, 1, 0, 1);
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
	CU_ASSERT(fake_expect(&f, "wake-up", MS));
	/* nothing pending: the wait ends at its deadline */
	CU_ASSERT(egw_client_wait(c, 20) == 0);
	egw_client_detach(c);
	fake_stop(&f);
}

static void
test_lease(void)
{
	/* leases long enough for a loaded machine: the thread beats every
	 * 125 ms */
	const char *args[] = { "--lease-ms", "500", NULL };
	struct egw_client_event ev;
	struct egw_client *a, *b;
	struct fake f;

	CU_ASSERT_FATAL(fake_start(&f, args) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", EGW_CLIENT_F_LEASE_THREAD,
				    &a) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", 0, &b) == 0);
	CU_ASSERT(egw_client_geometry(a)->lease_ms == 500);
	/* b stays away from the library for five leases: the gateway
	 * detaches it; a's thread keeps it attached */
	CU_ASSERT(fake_expect(&f, "client 1 detached (lease expired)", MS));
	usleep(1500 * 1000);
	CU_ASSERT(egw_client_nop(a, 5) == 0);
	CU_ASSERT(wait_event(a, 0, -1, MS, &ev) && ev.tag == 5);
	CU_ASSERT(egw_client_wait(b, MS) == -ECONNRESET);
	CU_ASSERT(egw_client_nop(b, 6) == -ECONNRESET);
	/* a client that keeps calling the library needs no thread */
	egw_client_detach(b);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", 0, &b) == 0);
	for (int i = 0; i < 10; i++)
		CU_ASSERT(egw_client_wait(b, 150) == 0);
	CU_ASSERT(egw_client_nop(b, 7) == 0);
	CU_ASSERT(wait_event(b, 0, -1, MS, &ev) && ev.tag == 7);
	egw_client_detach(a);
	egw_client_detach(b);
	CU_ASSERT(fake_expect(&f, "client 0 detached (socket closed)", MS));
	fake_stop(&f);
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
	struct fake f;
	int s;

	CU_ASSERT_FATAL(fake_start(&f, args) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", 0, &c) == 0);
	s = egw_client_recv_open(c, 700, 0, 0, 1, 0, 1);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT_FATAL(wait_event(c, (uint32_t)s, EGW_CLIENT_SUCCESS, MS,
				   &ev));
	emb = egw_client_region(c, EGW_CLIENT_EMBEDDING, &bytes);
	CU_ASSERT(egw_client_lost(c) == 0);
	CU_ASSERT(fake_expect(&f, "detached (lease expired)", MS));
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
	fake_stop(&f);
}

static void
test_full_ring(void)
{
	struct egw_client_opts o = { .size = sizeof(o), .sq_entries = 2 };
	struct egw_client_event ev[4];
	struct egw_client *c;
	struct fake f;
	int n = 0;

	CU_ASSERT_FATAL(fake_start(&f, NULL) == 0);
	CU_ASSERT_FATAL(egw_client_attach(f.path, "lang0", &o, &c) == 0);
	kill(f.pid, SIGSTOP);
	CU_ASSERT(egw_client_nop(c, 1) == 0);
	CU_ASSERT(egw_client_nop(c, 2) == 0);
	CU_ASSERT(egw_client_nop(c, 3) == -EAGAIN);
	CU_ASSERT(egw_client_recv_open(c, 10, 0, 0, 1, 0, 4) == -EAGAIN);
	kill(f.pid, SIGCONT);
	while (n < 2 && egw_client_wait(c, MS) == 1)
		n += egw_client_poll(c, ev + n, 4 - (unsigned int)n);
	CU_ASSERT(n == 2 && ev[0].tag == 1 && ev[1].tag == 2);
	/* the refused OPEN left its slot free */
	CU_ASSERT(egw_client_recv_open(c, 10, 0, 0, 1, 0, 4) >= 0);
	egw_client_detach(c);
	fake_stop(&f);
}

/* ---- deaths --------------------------------------------------------------- */

static void
test_client_killed(void)
{
	struct fake f;
	int pfd[2], st;
	char ok = 0;
	pid_t child;

	CU_ASSERT_FATAL(fake_start(&f, lang_args) == 0);
	CU_ASSERT_FATAL(pipe(pfd) == 0);
	child = fork();
	if (child == 0) {
		struct egw_client_event ev;
		struct egw_client *c;
		int s;

		if (fake_attach(&f, "lang0", 0, &c) != 0)
			_exit(1);
		s = egw_client_recv_open(c, PAT_STALL | 640, 0, 0, 1, 0, 1);
		if (s < 0 || !wait_event(c, (uint32_t)s,
					 EGW_CLIENT_WAITING_FOR_INPUT, MS,
					 &ev))
			_exit(1);
		s = egw_client_recv_open(c, 641, 0, 0, 1, 0, 1);
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
	/* the stalled room held no blocks, the Success one held 6 */
	CU_ASSERT(fake_expect(&f, "room 641: aborted (socket closed, state 4)",
			      MS));
	CU_ASSERT(fake_expect(&f, "detached (socket closed): aborted 2 rooms, "
			      "freed 6 blocks; pool free 1024 of 1024", MS));
	fake_stop(&f);
}

static void
test_gateway_gone(void)
{
	struct egw_client_event ev[2];
	struct egw_client *c;
	struct fake f;

	CU_ASSERT_FATAL(fake_start(&f, NULL) == 0);
	CU_ASSERT_FATAL(fake_attach(&f, "lang0", EGW_CLIENT_F_WAKEUP, &c) ==
			0);
	fake_stop(&f);
	CU_ASSERT(egw_client_wait(c, MS) == -ECONNRESET);
	CU_ASSERT(egw_client_poll(c, ev, 2) == -ECONNRESET);
	CU_ASSERT(strstr(egw_client_last_error(), "closed") != NULL);
	egw_client_detach(c);
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
		{ NULL, NULL },
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s FAKE_GATEWAY\n", argv[0]);
		return 2;
	}
	fake_program = argv[1];
	signal(SIGPIPE, SIG_IGN);
	return cu_run("client", tests);
}
