/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm pool file's header, its owner's life cycle and its check by a
 * sender (shm_pool_file.h). The owner never truncates, reuses or unlinks a
 * file it did not create: a path that exists is taken over only when it
 * is a stopped gateway's pool (our header, lock free), and then it is
 * unlinked and created anew, so a sender still mapping the old inode can
 * never write into the new one. The whole size is reserved at creation,
 * so a full filesystem is a start-up error and never a SIGBUS in a peer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "egw_payload.h"
#include "shm_pool_file.h"

static void
put_be(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t
get_be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

void
shm_file_hdr_put(uint8_t *buf, const struct shm_file_hdr *h)
{
	memset(buf, 0, SHM_FILE_HDR);
	put_be(buf + 0, h->magic, 4);
	put_be(buf + 4, h->format, 2);
	put_be(buf + 8, h->session, 8);
	put_be(buf + 16, h->file_bytes, 8);
	put_be(buf + 24, h->data_offset, 8);
	put_be(buf + 32, h->block_tokens, 4);
	put_be(buf + 36, h->pool_blocks, 4);
	put_be(buf + 40, h->hidden_size, 4);
	put_be(buf + 44, h->dtype_bytes, 4);
	put_be(buf + 48, h->aux_bytes, 4);
	put_be(buf + 52, h->owner_pid, 4);
}

void
shm_file_hdr_get(const uint8_t *buf, struct shm_file_hdr *h)
{
	h->magic = (uint32_t)get_be(buf + 0, 4);
	h->format = (uint16_t)get_be(buf + 4, 2);
	h->session = get_be(buf + 8, 8);
	h->file_bytes = get_be(buf + 16, 8);
	h->data_offset = get_be(buf + 24, 8);
	h->block_tokens = (uint32_t)get_be(buf + 32, 4);
	h->pool_blocks = (uint32_t)get_be(buf + 36, 4);
	h->hidden_size = (uint32_t)get_be(buf + 40, 4);
	h->dtype_bytes = (uint32_t)get_be(buf + 44, 4);
	h->aux_bytes = (uint32_t)get_be(buf + 48, 4);
	h->owner_pid = (uint32_t)get_be(buf + 52, 4);
}

static const char *
kind_of(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISLNK(m) ? "a symbolic link" :
	       S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" :
	       S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : "not a regular file";
}

/* Read the header of an open file; false when it is not one of ours. */
static bool
read_hdr(int fd, struct shm_file_hdr *h)
{
	uint8_t buf[SHM_FILE_HDR];

	if (pread(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		return false;
	shm_file_hdr_get(buf, h);
	return h->magic == SHM_FILE_MAGIC && h->format == SHM_FILE_FORMAT;
}

/* Something at `path` already: unlink it when it is a stopped gateway's
 * pool file, refuse (and leave it as it is) otherwise. With `take` false
 * only what the start would refuse whatever runs is refused, with the
 * start's words (--check-config): the lock a live owner holds is left
 * out, that owner may be gone by the start. */
static int
inspect(const char *path, bool take)
{
	struct stat ls, st;
	struct shm_file_hdr h;
	int fd, rc;

	if (lstat(path, &ls) != 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		shm_log("payload.path %s: %s", path, strerror(errno));
		return rc;
	}
	if (!S_ISREG(ls.st_mode)) {
		shm_log("payload.path %s exists and is %s: refused, left "
			"untouched (remove it or choose another path)", path,
			kind_of(ls.st_mode));
		return -EEXIST;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		shm_log("payload.path %s exists and cannot be opened to check "
			"it: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0 || st.st_dev != ls.st_dev ||
	    st.st_ino != ls.st_ino || !read_hdr(fd, &h)) {
		close(fd);
		shm_log("payload.path %s exists and is not an embgw pool file: "
			"refused, left untouched (remove it or choose another "
			"path)", path);
		return -EEXIST;
	}
	if (!take) {
		close(fd);
		return 0;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		shm_log("payload.path %s is the pool of a running gateway (pid "
			"%u): refused, left untouched (two gateways cannot "
			"share one pool file)", path, h.owner_pid);
		return rc;
	}
	/* a stopped gateway's file: never reused (a sender may still map
	 * it); unlinked while we hold its lock, only if still the same */
	rc = 0;
	if (lstat(path, &ls) == 0 && ls.st_dev == st.st_dev &&
	    ls.st_ino == st.st_ino) {
		if (unlink(path) != 0)
			rc = -errno;
		else
			shm_log("payload.path %s: took over the pool file of a "
				"stopped gateway (pid %u)", path, h.owner_pid);
	}
	/* else it went meanwhile: the exclusive creation decides */
	close(fd);
	if (rc != 0)
		shm_log("cannot remove the stopped gateway's pool file %s: %s",
			path, strerror(-rc));
	return rc;
}

int
egw_payload_shm_path_check(const char *path)
{
	return inspect(path, false);
}

uint64_t
egw_payload_shm_reclaimable(const char *path)
{
	struct shm_file_hdr h;
	struct stat ls, st;
	uint64_t bytes = 0;
	int fd;

	if (lstat(path, &ls) != 0 || !S_ISREG(ls.st_mode))
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	/* a shared lock is refused while a live owner holds its own */
	if (fstat(fd, &st) == 0 && st.st_ino == ls.st_ino &&
	    st.st_dev == ls.st_dev && read_hdr(fd, &h) &&
	    flock(fd, LOCK_SH | LOCK_NB) == 0)
		bytes = (uint64_t)st.st_blocks * 512;
	close(fd);
	return bytes;
}

static void
no_room(const char *path, int fd, uint64_t bytes, int err)
{
	struct statvfs vs;

	if (fstatvfs(fd, &vs) == 0)
		shm_log("cannot reserve %llu bytes for the pool file %s: %s "
			"(%llu bytes free on its filesystem)",
			(unsigned long long)bytes, path, strerror(err),
			(unsigned long long)vs.f_bavail * vs.f_frsize);
	else
		shm_log("cannot reserve %llu bytes for the pool file %s: %s",
			(unsigned long long)bytes, path, strerror(err));
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Bytes the file could have on its filesystem now: what is free to us
 * and what the file holds already (a failed try may leave some). */
static int
could_hold(int fd, uint64_t *bytes, uint64_t *fs_bytes)
{
	struct statvfs vs;
	struct stat st;

	if (fstatvfs(fd, &vs) != 0 || fstat(fd, &st) != 0)
		return -errno;
	*bytes = (uint64_t)vs.f_bavail * vs.f_frsize +
		 (uint64_t)st.st_blocks * 512;
	*fs_bytes = (uint64_t)vs.f_blocks * vs.f_frsize;
	return 0;
}

/* Reserve the file's whole size. Lack of space is waited out for
 * `wait_ns` when the pool would fit the filesystem at all: the space may
 * be held by a killed gateway's pool file (unlinked at take-over) that a
 * peer still maps until it declares that gateway dead and lets go. Free
 * space is checked before every try and nothing is allocated while the
 * file cannot fit: a try that fails fills the filesystem up to its last
 * block for as long as it runs, and everything else writing there would
 * get ENOSPC meanwhile. */
static int
reserve(const char *path, int fd, uint64_t bytes, uint64_t wait_ns)
{
	const struct timespec pause = { 0, 50000000 }; /* 50 ms */
	uint64_t deadline = mono_ns() + wait_ns, room = 0, fs = 0;
	bool said = false;
	int rc;

	for (;;) {
		rc = could_hold(fd, &room, &fs);
		if (rc != 0)
			rc = -rc;
		else if (room < bytes)
			rc = ENOSPC; /* not tried: it cannot fit now */
		else
			rc = posix_fallocate(fd, 0, (off_t)bytes);
		if (rc != ENOSPC || mono_ns() >= deadline || fs < bytes)
			break;
		if (!said)
			shm_log("pool file %s: no room for %llu bytes yet "
				"(%llu free): waiting up to %llu ms for a "
				"stopped gateway's pool file to be let go by "
				"its peers", path, (unsigned long long)bytes,
				(unsigned long long)room,
				(unsigned long long)(wait_ns / 1000000));
		said = true;
		nanosleep(&pause, NULL);
	}
	if (rc != 0)
		no_room(path, fd, bytes, rc);
	return -rc;
}

int
shm_file_create(const char *path, const struct shm_file_hdr *hdr,
		uint64_t data_bytes, uint64_t wait_ns, struct shm_file *f)
{
	struct shm_file_hdr h = *hdr;
	struct stat st;
	uint64_t bytes = SHM_FILE_HDR + data_bytes;
	int rc;

	f->fd = -1;
	f->map = NULL;
	f->bytes = 0;
	if (data_bytes > (uint64_t)INT64_MAX - SHM_FILE_HDR ||
	    bytes > SIZE_MAX) {
		shm_log("pool file %s: %llu bytes cannot be mapped", path,
			(unsigned long long)bytes);
		return -EFBIG;
	}
	rc = inspect(path, true);
	if (rc != 0)
		return rc;
	f->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		     0600);
	if (f->fd < 0) {
		rc = -errno;
		shm_log("cannot create the pool file %s: %s", path,
			strerror(errno));
		return rc;
	}
	if (fstat(f->fd, &st) != 0) {
		/* which file we created is unknown: leave the path alone */
		rc = -errno;
		shm_log("cannot stat the pool file %s: %s", path,
			strerror(errno));
		close(f->fd);
		f->fd = -1;
		return rc;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	if (flock(f->fd, LOCK_EX | LOCK_NB) != 0) {
		rc = -errno;
		shm_log("cannot lock the pool file %s: %s", path,
			strerror(errno));
		goto fail;
	}
	rc = reserve(path, f->fd, bytes, wait_ns);
	if (rc != 0)
		goto fail;
	f->map = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		      f->fd, 0);
	if (f->map == MAP_FAILED) {
		rc = -errno;
		f->map = NULL;
		shm_log("cannot map the pool file %s (%llu bytes): %s", path,
			(unsigned long long)bytes, strerror(errno));
		goto fail;
	}
	f->bytes = bytes;
	h.magic = SHM_FILE_MAGIC;
	h.format = SHM_FILE_FORMAT;
	h.file_bytes = bytes;
	h.data_offset = SHM_FILE_HDR;
	h.owner_pid = (uint32_t)getpid();
	h.session = 0;
	shm_file_hdr_put(f->map, &h);
	/* the session last: a sender that reads it reads a ready file */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	put_be(f->map + 8, hdr->session, 8);
	return 0;
fail:
	shm_file_remove(path, f);
	return rc;
}

int
shm_file_reopen(const struct shm_file *f)
{
	char proc[64];
	struct stat st;
	int fd, rc;

	/* through /proc: the same inode even if the path was replaced */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->fd);
	fd = open(proc, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		shm_log("cannot open the pool file again for local clients "
			"(%s): %s", proc, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0 || st.st_dev != f->dev || st.st_ino != f->ino) {
		close(fd);
		shm_log("%s is not the pool file: is /proc mounted?", proc);
		return -ESTALE;
	}
	return fd;
}

void
shm_file_remove(const char *path, struct shm_file *f)
{
	struct stat st;

	if (f->map != NULL)
		munmap(f->map, (size_t)f->bytes);
	f->map = NULL;
	if (f->fd < 0)
		return;
	/* still ours? (an operator may have replaced it) */
	if (lstat(path, &st) == 0 && st.st_dev == f->dev &&
	    st.st_ino == f->ino)
		unlink(path);
	close(f->fd); /* drops the lock, after the unlink */
	f->fd = -1;
}

/* Each region the peer registered lies in [data_offset, file_bytes). */
static bool
regions_inside(const struct egw_register *r, const struct shm_file_hdr *h)
{
	for (unsigned k = 0; k < EGW_KIND_MAX; k++) {
		uint64_t a = r->region[k].addr, len;

		if (r->region[k].unit_bytes == 0)
			continue;
		len = egw_payload_region_len(r, k);
		if (a < h->data_offset || a > h->file_bytes ||
		    len > h->file_bytes - a)
			return false;
	}
	return true;
}

int
shm_file_open_peer(const char *path, const struct egw_register *r,
		   struct shm_file_hdr *h, char *why, size_t why_len)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	int rc;

	if (fd < 0) {
		rc = -errno;
		snprintf(why, why_len, "cannot open its pool file %s: %s",
			 path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !read_hdr(fd, h) ||
	    h->data_offset != SHM_FILE_HDR) {
		snprintf(why, why_len, "%s is not an embgw pool file", path);
		rc = -EBADMSG;
	} else if (h->session != r->session) {
		snprintf(why, why_len, "pool file %s belongs to session %#llx, "
			 "the REGISTER came from %#llx", path,
			 (unsigned long long)h->session,
			 (unsigned long long)r->session);
		rc = -ESTALE;
	} else if (h->block_tokens != r->block_tokens ||
		   h->pool_blocks != r->pool_blocks ||
		   h->hidden_size != r->hidden_size ||
		   h->dtype_bytes != r->dtype_bytes ||
		   h->aux_bytes != r->aux_bytes) {
		snprintf(why, why_len, "pool file %s: geometry %u/%u/%u/%u/%u, "
			 "the REGISTER says %u/%u/%u/%u/%u (block_tokens/"
			 "pool_blocks/hidden_size/dtype_bytes/aux_bytes)", path,
			 h->block_tokens, h->pool_blocks, h->hidden_size,
			 h->dtype_bytes, h->aux_bytes, r->block_tokens,
			 r->pool_blocks, r->hidden_size, r->dtype_bytes,
			 r->aux_bytes);
		rc = -EINVAL;
	} else if (h->file_bytes > (uint64_t)st.st_size ||
		   h->file_bytes > SIZE_MAX || !regions_inside(r, h)) {
		snprintf(why, why_len, "pool file %s (%llu bytes, header says "
			 "%llu) does not hold the regions its REGISTER names",
			 path, (unsigned long long)st.st_size,
			 (unsigned long long)h->file_bytes);
		rc = -ERANGE;
	} else {
		return fd;
	}
	close(fd);
	return rc;
}
