/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm pool file (doc/protocol.md, "The shm pool file"): a 4096-byte
 * big-endian header, then the receiving gateway's pool. The receiving
 * side owns it (exclusive creation, the whole size reserved, an
 * exclusive lock held for life, unlinked only while the path still names
 * it); the sending side checks a peer's header before mapping its data.
 */
#ifndef EGW_SHM_POOL_FILE_H
#define EGW_SHM_POOL_FILE_H

#include <stdint.h>
#include <sys/types.h>

#include "egw_payload.h"

#define SHM_FILE_MAGIC 0x45475750u /* "EGWP" */
#define SHM_FILE_FORMAT 1u
#define SHM_FILE_HDR 4096u          /* header bytes = data_offset */

/** The header's fields (host order). */
struct shm_file_hdr {
	uint32_t magic;
	uint16_t format;
	uint64_t session;
	uint64_t file_bytes;
	uint64_t data_offset;
	uint32_t block_tokens, pool_blocks, hidden_size, dtype_bytes, aux_bytes;
	uint32_t owner_pid;
};

/** A pool file this process created and owns. */
struct shm_file {
	int fd;                 /* locked (flock LOCK_EX) while open */
	uint8_t *map;           /* the whole file, header included */
	uint64_t bytes;
	dev_t dev;
	ino_t ino;
};

#define shm_log(...) egw_payload_log("shm", __VA_ARGS__)

/** Encode/decode the 4096-byte header. */
void shm_file_hdr_put(uint8_t *buf, const struct shm_file_hdr *h);
void shm_file_hdr_get(const uint8_t *buf, struct shm_file_hdr *h);

/**
 * Create `path` for a pool of `data_bytes` with header `h` (file_bytes,
 * data_offset and owner_pid are filled in; the session is written last):
 * take over a dead gateway's file, refuse anything else that is there,
 * reserve the whole size - waiting up to `wait_ns` (one log line) while
 * the filesystem lacks the room it could have (a killed gateway's file
 * still mapped by a peer). Logs why on failure and leaves no file of its
 * own behind. 0 or -errno: -EEXIST (something else at the path), -EBUSY
 * (a live gateway's pool), -ENOSPC/-EFBIG/... (no room for it).
 */
int shm_file_create(const char *path, const struct shm_file_hdr *h,
		    uint64_t data_bytes, uint64_t wait_ns, struct shm_file *f);

/**
 * A second open file description of our file (read-write, close-on-exec),
 * for local clients: the lock stays on f->fd alone. The descriptor, or
 * -errno (logged).
 */
int shm_file_reopen(const struct shm_file *f);

/** Unmap and close; unlink `path` only while it still names our file. */
void shm_file_remove(const char *path, struct shm_file *f);

/**
 * Open a peer's pool file and check it against its REGISTER: magic,
 * format, session, geometry, every region inside the file. Returns the
 * open descriptor (the caller maps [data_offset, file_bytes)) and the
 * header, or -errno: -ENOENT and the like (cannot open), -EBADMSG (not a
 * pool file), -ESTALE (another incarnation's file), -EINVAL (geometry
 * differs), -ERANGE (a region outside the file), the reason in `why`
 * (nothing is logged: a peer that cannot be reached is tried again with
 * each of its REGISTERs).
 */
int shm_file_open_peer(const char *path, const struct egw_register *r,
		       struct shm_file_hdr *h, char *why, size_t why_len);

#endif /* EGW_SHM_POOL_FILE_H */
