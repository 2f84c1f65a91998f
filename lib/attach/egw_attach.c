/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach ABI's layout, its two SPSC rings and the field checks of a
 * command. Both sides link this; nothing here makes a system call.
 */
#include "egw_attach.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* the layout's static assertions are in egw_attach.h: every user checks */

#define MAX_SLOTS (1u << 20)
#define MAX_RUNS 4096u
#define MAX_NRANKS 8u

static bool
entries_ok(uint32_t n)
{
	return n > 0 && n <= EGW_ATTACH_MAX_ENTRIES && (n & (n - 1)) == 0;
}

static bool
counts_ok(uint32_t sq, uint32_t cq, uint32_t nslots, uint32_t max_runs,
	  uint32_t max_peers)
{
	return entries_ok(sq) && entries_ok(cq) && nslots > 0 &&
	       nslots <= MAX_SLOTS && max_runs > 0 && max_runs <= MAX_RUNS &&
	       max_peers <= EGW_ATTACH_MAX_PEER_RECS;
}

size_t
egw_attach_area_bytes(uint32_t sq_entries, uint32_t cq_entries, uint32_t nslots,
		      uint32_t max_runs, uint32_t max_peers)
{
	if (!counts_ok(sq_entries, cq_entries, nslots, max_runs, max_peers))
		return 0;
	return EGW_ATTACH_HEADER_BYTES +
	       (size_t)(sq_entries + cq_entries) * EGW_ATTACH_ENTRY_BYTES +
	       (size_t)nslots * egw_attach_slot_bytes(max_runs) +
	       (size_t)max_peers * sizeof(struct egw_attach_peer_rec);
}

int
egw_attach_area_init(void *mem, uint32_t sq_entries, uint32_t cq_entries,
		     uint32_t nslots, uint32_t max_runs, uint32_t max_peers)
{
	struct egw_attach_area *a = mem;
	size_t bytes = egw_attach_area_bytes(sq_entries, cq_entries, nslots,
					     max_runs, max_peers);

	if (mem == NULL || bytes == 0)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->magic = EGW_ATTACH_MAGIC;
	a->version = EGW_ATTACH_VERSION;
	a->area_bytes = bytes;
	a->sq.entries = sq_entries;
	a->sq.offset = EGW_ATTACH_HEADER_BYTES;
	a->cq.entries = cq_entries;
	a->cq.offset = a->sq.offset + sq_entries * EGW_ATTACH_ENTRY_BYTES;
	a->slots_offset = a->cq.offset + cq_entries * EGW_ATTACH_ENTRY_BYTES;
	a->nslots = nslots;
	a->max_runs = max_runs;
	a->slot_bytes = egw_attach_slot_bytes(max_runs);
	a->peers_offset = a->slots_offset + nslots * a->slot_bytes;
	a->max_peers = max_peers;
	memset(egw_attach_peers_of(a), 0, sizeof(struct egw_attach_peers));
	return 0;
}

/* [off, off + len) inside [lo, hi), with 64-bit arithmetic */
static bool
inside(uint64_t off, uint64_t len, uint64_t lo, uint64_t hi)
{
	return off >= lo && off <= hi && len <= hi - off;
}

int
egw_attach_area_check(const struct egw_attach_area *a, size_t mapped_bytes)
{
	uint64_t sq_len, cq_len, slots_len, peers_len;

	if (a == NULL || mapped_bytes < EGW_ATTACH_HEADER_BYTES)
		return -EINVAL;
	if (a->magic != EGW_ATTACH_MAGIC || a->version != EGW_ATTACH_VERSION)
		return -EPROTO;
	if (a->area_bytes > mapped_bytes ||
	    !counts_ok(a->sq.entries, a->cq.entries, a->nslots, a->max_runs,
		       a->max_peers) ||
	    a->slot_bytes != egw_attach_slot_bytes(a->max_runs))
		return -EINVAL;
	sq_len = (uint64_t)a->sq.entries * EGW_ATTACH_ENTRY_BYTES;
	cq_len = (uint64_t)a->cq.entries * EGW_ATTACH_ENTRY_BYTES;
	slots_len = (uint64_t)a->nslots * a->slot_bytes;
	peers_len = (uint64_t)a->max_peers * sizeof(struct egw_attach_peer_rec);
	/* the parts in the order the gateway lays them out, none overlapping
	 * another or the header */
	if (a->sq.offset != EGW_ATTACH_HEADER_BYTES ||
	    a->cq.offset != a->sq.offset + sq_len ||
	    a->slots_offset != a->cq.offset + cq_len ||
	    a->peers_offset != a->slots_offset + slots_len ||
	    !inside(a->peers_offset, peers_len, EGW_ATTACH_HEADER_BYTES,
		    a->area_bytes))
		return -EINVAL;
	return 0;
}

int
egw_attach_map_init(struct egw_attach_map *m, void *mem, size_t mapped_bytes)
{
	struct egw_attach_area *a = mem;
	int rc = egw_attach_area_check(a, mapped_bytes);

	if (rc != 0)
		return rc;
	m->area = a;
	m->bytes = a->area_bytes;
	m->sq = (struct egw_attach_rview){ &a->sq, (uint8_t *)a + a->sq.offset,
					   a->sq.entries };
	m->cq = (struct egw_attach_rview){ &a->cq, (uint8_t *)a + a->cq.offset,
					   a->cq.entries };
	m->slots = (uint8_t *)a + a->slots_offset;
	m->nslots = a->nslots;
	m->slot_bytes = a->slot_bytes;
	m->max_runs = a->max_runs;
	m->peers = (struct egw_attach_peer_rec *)(void *)((uint8_t *)a +
							  a->peers_offset);
	m->max_peers = a->max_peers;
	return 0;
}

struct egw_attach_slot *
egw_attach_slot_at(const struct egw_attach_map *m, uint32_t slot)
{
	if (slot >= m->nslots)
		return NULL;
	return (struct egw_attach_slot *)(m->slots + (size_t)slot * m->slot_bytes);
}

/*
 * Each side writes only its own index (the producer tail, the consumer
 * head) and reads the other's with acquire ordering. The other side's
 * index is never trusted: a distance outside 0..nentries is reported, not
 * used.
 */
int
egw_attach_ring_put(const struct egw_attach_rview *r, const void *entry)
{
	uint32_t tail = r->ctl->tail; /* ours: only we write it */
	uint32_t head = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);
	uint32_t used = tail - head;

	if (used > r->nentries)
		return -EBADMSG;
	if (used == r->nentries)
		return -ENOBUFS;
	memcpy(r->entries + (size_t)(tail & (r->nentries - 1)) *
	       EGW_ATTACH_ENTRY_BYTES, entry, EGW_ATTACH_ENTRY_BYTES);
	__atomic_store_n(&r->ctl->tail, tail + 1, __ATOMIC_RELEASE);
	return 0;
}

int
egw_attach_ring_putn(const struct egw_attach_rview *r, const void *entries,
		     uint32_t n)
{
	uint32_t tail = r->ctl->tail; /* ours: only we write it */
	uint32_t head = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);
	uint32_t used = tail - head;

	if (used > r->nentries)
		return -EBADMSG;
	if (n > r->nentries - used)
		return -ENOBUFS;
	for (uint32_t i = 0; i < n; i++)
		memcpy(r->entries + (size_t)((tail + i) & (r->nentries - 1)) *
					    EGW_ATTACH_ENTRY_BYTES,
		       (const uint8_t *)entries +
			       (size_t)i * EGW_ATTACH_ENTRY_BYTES,
		       EGW_ATTACH_ENTRY_BYTES);
	/* the command and its name become visible together */
	__atomic_store_n(&r->ctl->tail, tail + n, __ATOMIC_RELEASE);
	return 0;
}

int
egw_attach_ring_get(const struct egw_attach_rview *r, void *entry)
{
	uint32_t head = r->ctl->head; /* ours: only we write it */
	uint32_t tail = __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE);
	uint32_t used = tail - head;

	if (used > r->nentries)
		return -EBADMSG;
	if (used == 0)
		return 0;
	memcpy(entry, r->entries + (size_t)(head & (r->nentries - 1)) *
	       EGW_ATTACH_ENTRY_BYTES, EGW_ATTACH_ENTRY_BYTES);
	__atomic_store_n(&r->ctl->head, head + 1, __ATOMIC_RELEASE);
	return 1;
}

uint32_t
egw_attach_ring_count(const struct egw_attach_rview *r)
{
	uint32_t used = __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE) -
			__atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);

	return used <= r->nentries ? used : 0;
}

static bool
zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != 0)
			return false;
	return true;
}

int
egw_attach_cmd_check(const struct egw_attach_cmd *c,
		     const struct egw_attach_limits *l)
{
	bool keyed = !zero(c->content, sizeof(c->content));

	switch (c->op) {
	case EGW_OP_NOP:
		break;
	case EGW_OP_SEND_OPEN:
		if (!l->encode)
			return -EOPNOTSUPP;
		/* a content key names what a language port keeps: the
		 * encode side has no use for one */
		if (c->room == 0 || c->flags != 0 || c->rank != 0 ||
		    c->reserved0 != 0 || c->nranks == 0 ||
		    c->nranks > MAX_NRANKS || c->total_tokens == 0 || keyed)
			return -EINVAL;
		if (c->total_tokens > l->max_total_tokens)
			return -EFBIG;
		return c->slot < l->nslots ? 0 : -ERANGE;
	case EGW_OP_SEND_COMMIT:
		if (!l->encode)
			return -EOPNOTSUPP;
		break;
	case EGW_OP_RECV_OPEN:
		if (!l->language)
			return -EOPNOTSUPP;
		if (c->room == 0 ||
		    (c->flags & ~(EGW_CMDF_AUX_ONLY | EGW_CMDF_PEER_NAME)) !=
			    0 ||
		    c->nranks == 0 || c->nranks > MAX_NRANKS ||
		    c->rank >= c->nranks || c->reserved0 != 0 ||
		    c->mrope_delta != 0 || c->cookie != 0)
			return -EINVAL;
		/* the peer by id or by name: one of the two */
		if ((c->peer_id == 0) != ((c->flags & EGW_CMDF_PEER_NAME) != 0))
			return -EINVAL;
		/* an aux-only rank holds one block of its own: it cannot
		 * share another room's */
		if (keyed && (c->flags & EGW_CMDF_AUX_ONLY) != 0)
			return -EINVAL;
		return c->slot < l->nslots ? 0 : -ERANGE;
	case EGW_OP_RELEASE:
		if (!l->language)
			return -EOPNOTSUPP;
		break;
	case EGW_OP_ABORT:
		break;
	case EGW_OP_LOOKUP:
		if (!l->language)
			return -EOPNOTSUPP;
		/* the key and the tag, nothing else */
		return keyed && c->room == 0 && c->flags == 0 &&
				       c->total_tokens == 0 && c->rank == 0 &&
				       c->nranks == 0 && c->reserved0 == 0 &&
				       c->slot == 0 && c->mrope_delta == 0 &&
				       c->cookie == 0 && c->attempt == 0 ?
			       0 :
			       -EINVAL;
	default:
		return -EOPNOTSUPP;
	}
	if (c->attempt != 0 || keyed)
		return -EINVAL;
	if (c->op == EGW_OP_NOP)
		return c->flags == 0 && c->room == 0 ? 0 : -EINVAL;
	/* COMMIT, RELEASE, ABORT name the room and its slot, nothing else */
	if (c->room == 0 || c->flags != 0 || c->total_tokens != 0 ||
	    c->rank != 0 || c->nranks != 0 || c->reserved0 != 0 ||
	    c->mrope_delta != 0 || c->cookie != 0)
		return -EINVAL;
	return c->slot < l->nslots ? 0 : -ERANGE;
}

static bool
terminated(const char *s, size_t n, bool nonempty)
{
	size_t len = strnlen(s, n);

	return len < n && (!nonempty || len > 0) &&
	       zero((const uint8_t *)s + len, n - len);
}

int
egw_attach_name_check(const struct egw_attach_cmd_name *n)
{
	return terminated(n->name, sizeof(n->name), true) &&
			       zero(n->reserved, sizeof(n->reserved)) ?
		       0 :
		       -EINVAL;
}

/* The table's records move a word at a time, as atomics: the writer's
 * release stores keep the odd sequence ahead of them, the reader's
 * acquire loads keep its second look at the sequence behind them (a
 * seqlock without fences, which ThreadSanitizer checks as it is). */
_Static_assert(sizeof(struct egw_attach_peer_rec) % 8 == 0,
	       "records move as 64-bit words");

static void
words_store(uint64_t *dst, const uint64_t *src, size_t words)
{
	for (size_t i = 0; i < words; i++)
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELEASE);
}

static void
words_load(uint64_t *dst, const uint64_t *src, size_t words)
{
	for (size_t i = 0; i < words; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
}

int
egw_attach_peers_write(const struct egw_attach_map *m,
		       const struct egw_attach_peer_rec *recs, uint32_t n,
		       uint64_t gen)
{
	struct egw_attach_peers *pt = egw_attach_peers_of(m->area);
	uint32_t seq = pt->seq; /* ours: only the gateway writes it */

	if (n > m->max_peers)
		return -E2BIG;
	/* odd while the records move: a reader that sees it retries */
	__atomic_store_n(&pt->seq, seq | 1u, __ATOMIC_RELAXED);
	words_store((uint64_t *)(void *)m->peers, (const uint64_t *)recs,
		    n * sizeof(*recs) / 8);
	__atomic_store_n(&pt->count, n, __ATOMIC_RELEASE);
	__atomic_store_n(&pt->gen, gen, __ATOMIC_RELEASE);
	__atomic_store_n(&pt->seq, (seq | 1u) + 1, __ATOMIC_RELEASE);
	return 0;
}

int
egw_attach_peers_read(const struct egw_attach_map *m,
		      struct egw_attach_peer_rec *out, uint32_t max,
		      uint64_t *gen)
{
	const struct egw_attach_peers *pt = egw_attach_peers_of(m->area);
	uint32_t s0 = __atomic_load_n(&pt->seq, __ATOMIC_ACQUIRE), n, s1;
	uint64_t g;

	if (s0 & 1u)
		return -EAGAIN;
	n = __atomic_load_n(&pt->count, __ATOMIC_ACQUIRE);
	g = __atomic_load_n(&pt->gen, __ATOMIC_ACQUIRE);
	if (n > m->max_peers)
		n = UINT32_MAX; /* decided after the second read */
	else if (out != NULL)
		words_load((uint64_t *)(void *)out,
			   (const uint64_t *)(const void *)m->peers,
			   (n < max ? n : max) * sizeof(*out) / 8);
	s1 = __atomic_load_n(&pt->seq, __ATOMIC_RELAXED);
	if (s1 != s0)
		return -EAGAIN;
	if (n == UINT32_MAX)
		return -EBADMSG;
	if (gen != NULL)
		*gen = g;
	return (int)n;
}

int
egw_attach_hello_check(const void *msg, size_t len, char *why, size_t why_len)
{
	struct egw_attach_hello h;

	if (len != sizeof(h)) {
		snprintf(why, why_len, "hello of %zu bytes, expected %zu", len,
			 sizeof(h));
		return -EPROTO;
	}
	memcpy(&h, msg, sizeof(h));
	if (h.magic != EGW_HELLO_MAGIC) {
		snprintf(why, why_len, "not an embgw hello (magic %08x)",
			 h.magic);
		return -EPROTO;
	}
	if (h.version != EGW_ATTACH_VERSION) {
		snprintf(why, why_len, "client speaks attach version %u, the "
			 "gateway speaks version %u", h.version,
			 EGW_ATTACH_VERSION);
		return -EPROTONOSUPPORT;
	}
	if ((h.flags & ~(EGW_HELLO_F_WAKEUP | EGW_HELLO_F_PEERS)) != 0 ||
	    h.reserved0 != 0 || !zero(h.reserved, sizeof(h.reserved))) {
		snprintf(why, why_len, "unknown flags or non-zero reserved "
			 "bytes");
		return -EINVAL;
	}
	if (!terminated(h.port, sizeof(h.port), true) ||
	    !terminated(h.client, sizeof(h.client), false)) {
		snprintf(why, why_len, "port or client name not a "
			 "NUL-terminated string of at most %u characters",
			 EGW_ATTACH_NAME_LEN - 1);
		return -EINVAL;
	}
	if ((h.sq_entries != 0 && !entries_ok(h.sq_entries)) ||
	    (h.cq_entries != 0 && !entries_ok(h.cq_entries)) ||
	    h.nslots > MAX_SLOTS) {
		snprintf(why, why_len, "ring entries must be powers of two up "
			 "to %u, slots at most %u", EGW_ATTACH_MAX_ENTRIES,
			 MAX_SLOTS);
		return -EINVAL;
	}
	return 0;
}

const char *
egw_attach_op_name(uint8_t op)
{
	static const char *const names[EGW_OP_MAX] = {
		[EGW_OP_NOP] = "nop",
		[EGW_OP_SEND_OPEN] = "send_open",
		[EGW_OP_SEND_COMMIT] = "send_commit",
		[EGW_OP_RECV_OPEN] = "recv_open",
		[EGW_OP_RELEASE] = "release",
		[EGW_OP_ABORT] = "abort",
		[EGW_OP_LOOKUP] = "lookup",
		[EGW_OP_PEERS] = "peers",
	};

	return op < EGW_OP_MAX ? names[op] : "unknown";
}
