/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Commands: checked here with the gateway's own rules (egw_attach_cmd_check)
 * so that a wrong call fails at once with a message instead of a refusal
 * completion afterwards, then put in the submission ring. A full ring is
 * -EAGAIN: nothing here waits.
 */
#include <errno.h>
#include <string.h>

#include "client_priv.h"

/* `name`: the RECV_OPEN's name entry (EGW_CMDF_PEER_NAME), published with
 * the command in one store of the tail; NULL for every other command. */
static int
submit(struct egw_client *c, const struct egw_attach_cmd *cmd,
       const struct egw_attach_cmd_name *name)
{
	struct egw_attach_cmd two[2];
	int rc;

	egw_client_beat(c);
	rc = client_gone_check(c, false);
	if (rc != 0)
		return rc;
	rc = egw_attach_cmd_check(cmd, &c->limits);
	if (rc != 0) {
		client_error("%s refused before sending: %s (room %llu, slot "
			     "%u, total or peer id %u, nranks %u, rank %u)",
			     egw_attach_op_name(cmd->op), strerror(-rc),
			     (unsigned long long)cmd->room, cmd->slot,
			     cmd->total_tokens, cmd->nranks, cmd->rank);
		return rc;
	}
	if (name != NULL) {
		two[0] = *cmd;
		memcpy(&two[1], name, sizeof(two[1]));
		rc = egw_attach_ring_putn(&c->map.sq, two, 2);
	} else {
		rc = egw_attach_ring_put(&c->map.sq, cmd);
	}
	if (rc == -ENOBUFS) {
		client_error("the submission ring is full (%u entries)",
			     c->map.sq.nentries);
		return -EAGAIN;
	}
	if (rc == -EBADMSG) {
		client_error("the gateway's submission ring head is impossible");
		c->gone = rc;
		client_revoke(c);
	}
	return rc;
}

/* A slot free on both sides: not held by us, and cleared by the gateway
 * (it clears a slot just after the room's last completion). */
static int
pick_slot(struct egw_client *c)
{
	for (uint32_t i = 0; i < c->map.nslots; i++) {
		uint32_t s = (c->cursor + i) % c->map.nslots;
		struct egw_attach_slot *sl = egw_attach_slot_at(&c->map, s);

		if (c->slots[s].room == 0 &&
		    __atomic_load_n(&sl->room, __ATOMIC_ACQUIRE) == 0) {
			c->cursor = s + 1;
			return (int)s;
		}
	}
	client_error("all %u slots hold rooms", c->map.nslots);
	return -ENOSPC;
}

static int
open_room(struct egw_client *c, struct egw_attach_cmd *cmd,
	  const struct egw_attach_cmd_name *name)
{
	uint32_t seq = c->map.sq.ctl->tail; /* ours: only we write it */
	int slot, rc;

	if (cmd->room == 0) {
		client_error("room id 0 is not a room");
		return -EINVAL;
	}
	slot = pick_slot(c);
	if (slot < 0)
		return slot;
	cmd->slot = (uint32_t)slot;
	rc = submit(c, cmd, name);
	if (rc != 0)
		return rc;
	c->slots[slot] = (struct client_slot){
		.room = cmd->room,
		.op = cmd->op,
		.state = EGW_ATTACH_STATE_BOOTSTRAPPING,
		.sq_seq = seq
	};
	return slot;
}

int
egw_client_send_open_ex(struct egw_client *c, uint64_t room,
			uint32_t total_tokens, uint16_t nranks,
			int32_t mrope_delta, uint64_t cookie, uint32_t attempt,
			const uint8_t *content, uint64_t tag)
{
	struct egw_attach_cmd cmd = {
		.op = EGW_OP_SEND_OPEN, .nranks = nranks, .tag = tag,
		.room = room, .total_tokens = total_tokens,
		.mrope_delta = mrope_delta, .cookie = cookie,
		.attempt = attempt,
	};

	if (content != NULL) {
		client_error("send_open: content keys are the language "
			     "side's (the encode side sends what it is given)");
		return -EINVAL;
	}
	return open_room(c, &cmd, NULL);
}

int
egw_client_send_open(struct egw_client *c, uint64_t room,
		     uint32_t total_tokens, uint16_t nranks,
		     int32_t mrope_delta, uint64_t cookie, uint64_t tag)
{
	return egw_client_send_open_ex(c, room, total_tokens, nranks,
				       mrope_delta, cookie, 0, NULL, tag);
}

/* RECV_OPEN by id (`peer` NULL) or by name (`id` 0). */
static int
recv_open(struct egw_client *c, uint64_t room, uint32_t id, const char *peer,
	  uint16_t rank, uint16_t nranks, uint32_t flags, uint32_t attempt,
	  const uint8_t *content, uint64_t tag)
{
	struct egw_attach_cmd cmd = {
		.op = EGW_OP_RECV_OPEN,
		.rank = rank,
		.nranks = nranks,
		.tag = tag,
		.room = room,
		.attempt = attempt,
	};
	struct egw_attach_cmd_name name;

	if (flags & ~EGW_CLIENT_AUX_ONLY) {
		client_error("unknown recv_open flags %#x", flags);
		return -EINVAL;
	}
	cmd.flags = (uint8_t)flags;
	cmd.peer_id = id;
	if (content != NULL)
		memcpy(cmd.content, content, sizeof(cmd.content));
	if (peer == NULL)
		return open_room(c, &cmd, NULL);
	if (peer[0] == '\0' || strlen(peer) >= sizeof(name.name)) {
		client_error("recv_open: a peer's name is 1 to %zu characters, "
			     "not '%s'",
			     sizeof(name.name) - 1, peer);
		return -EINVAL;
	}
	memset(&name, 0, sizeof(name));
	memcpy(name.name, peer, strlen(peer));
	cmd.flags |= EGW_CMDF_PEER_NAME;
	return open_room(c, &cmd, &name);
}

int
egw_client_recv_open_ex(struct egw_client *c, uint64_t room, uint32_t peer,
			uint16_t rank, uint16_t nranks, uint32_t flags,
			uint32_t attempt, const uint8_t *content, uint64_t tag)
{
	if (peer == 0) {
		client_error("recv_open: peer id 0 names no peer (ids come "
			     "from egw_client_peers)");
		return -EINVAL;
	}
	return recv_open(c, room, peer, NULL, rank, nranks, flags, attempt,
			 content, tag);
}

int
egw_client_recv_open_named(struct egw_client *c, uint64_t room,
			   const char *peer, uint16_t rank, uint16_t nranks,
			   uint32_t flags, uint32_t attempt,
			   const uint8_t *content, uint64_t tag)
{
	if (peer == NULL) {
		client_error("recv_open: no peer name");
		return -EINVAL;
	}
	return recv_open(c, room, 0, peer, rank, nranks, flags, attempt,
			 content, tag);
}

int
egw_client_recv_open(struct egw_client *c, uint64_t room, uint32_t peer,
		     uint16_t rank, uint16_t nranks, uint32_t flags,
		     uint64_t tag)
{
	return egw_client_recv_open_ex(c, room, peer, rank, nranks, flags, 0,
				       NULL, tag);
}

int
egw_client_lookup(struct egw_client *c, const uint8_t content[16],
		  uint64_t tag)
{
	struct egw_attach_cmd cmd = { .op = EGW_OP_LOOKUP, .tag = tag };

	memcpy(cmd.content, content, sizeof(cmd.content));
	return submit(c, &cmd, NULL);
}

/* COMMIT, RELEASE, ABORT: the room is the one this client opened in the
 * slot. */
static int
room_cmd(struct egw_client *c, uint8_t op, uint32_t slot, uint64_t tag)
{
	struct egw_attach_cmd cmd = { .op = op, .tag = tag, .slot = slot };

	if (slot >= c->map.nslots) {
		client_error("%s: slot %u out of range (%u slots)",
			     egw_attach_op_name(op), slot, c->map.nslots);
		return -ERANGE;
	}
	cmd.room = c->slots[slot].room;
	if (cmd.room == 0) {
		client_error("%s: slot %u holds no room of this client",
			     egw_attach_op_name(op), slot);
		egw_client_beat(c);
		return -ENOENT;
	}
	return submit(c, &cmd, NULL);
}

int
egw_client_send_commit(struct egw_client *c, uint32_t slot, uint64_t tag)
{
	return room_cmd(c, EGW_OP_SEND_COMMIT, slot, tag);
}

int
egw_client_release(struct egw_client *c, uint32_t slot, uint64_t tag)
{
	int rc = room_cmd(c, EGW_OP_RELEASE, slot, tag);

	if (rc == 0)
		c->slots[slot].released = true;
	return rc;
}

int
egw_client_abort(struct egw_client *c, uint32_t slot, uint64_t tag)
{
	return room_cmd(c, EGW_OP_ABORT, slot, tag);
}

int
egw_client_nop(struct egw_client *c, uint64_t tag)
{
	struct egw_attach_cmd cmd = { .op = EGW_OP_NOP, .tag = tag };

	if ((tag & CLIENT_BARRIER_MASK) == CLIENT_BARRIER_TAG) {
		client_error("nop tags with the top byte 0xeb are the "
			     "library's own");
		return -EINVAL;
	}
	return submit(c, &cmd, NULL);
}

int
client_barrier(struct egw_client *c)
{
	uint32_t seq = c->map.sq.ctl->tail;
	struct egw_attach_cmd cmd = { .op = EGW_OP_NOP,
				      .tag = CLIENT_BARRIER_TAG | seq };
	int rc = submit(c, &cmd, NULL);

	if (rc == 0) {
		c->barrier_sent = true;
		c->barrier_seq = seq;
		c->barrier_ov = c->overflow_seen;
	}
	return rc;
}
