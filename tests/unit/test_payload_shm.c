/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm payload driver: an encode side writing into a language side's
 * pool file, both in this process. Writes land where the REGISTER says
 * and nowhere else; a batch fails whole when a write is outside the
 * peer's regions or the peer is not connected; a full completion ring and
 * an unknown peer are errors of post() itself. The pool file: its header
 * by value, created only where nothing else is (a stopped gateway's file
 * is replaced by a new inode), reserved whole, checked by the sender
 * against the REGISTER, removed on close only while it is ours.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu_main.h"

#include "payload_pair.h"

static char path[96];
static struct pp_pair pp;

static void
open_pair_at(const char *suffix)
{
	pp_close(&pp); /* what a failed test left open */
	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld%s", (long)getpid(),
		 suffix);
	CU_ASSERT_FATAL(pp_open(&pp, &egw_payload_shm_ops, path) == 0);
}

static void
open_pair(void)
{
	open_pair_at("");
}

static uint32_t
ring_size(void)
{
	return pp.side[PP_ENC].par.max_batches;
}

static void
test_write_lands(void)
{
	struct egw_write w[2];
	struct egw_payload_cpl c[4];
	struct egw_payload_stats st;

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	pp_fill(&pp, 2, 5);
	pp_fill(&pp, 3, 9);
	w[0] = pp_emb(&pp, 2, 5, PP_BLOCK_TOKENS);
	w[1] = pp_emb(&pp, 3, 0, 3);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, w, 2, 42) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 42);
	CU_ASSERT(c[0].ok);
	CU_ASSERT(pp_landed(&pp, 5, 5, PP_BLOCK_TOKENS));
	CU_ASSERT(pp_landed(&pp, 0, 9, 3));
	CU_ASSERT(!pp_landed(&pp, 0, 9, 4)); /* only the 3 tokens written */
	pp.ops->stats(pp.side[PP_ENC].drv, &st);
	CU_ASSERT_EQUAL(st.batches, 1);
	CU_ASSERT_EQUAL(st.writes, 2);
	CU_ASSERT_EQUAL(st.bytes, w[0].bytes + w[1].bytes);
	CU_ASSERT_EQUAL(st.blocks, 2);
	CU_ASSERT_EQUAL(st.failed_batches, 0);
	pp_close(&pp);
}

static void
test_write_outside_regions_fails_batch(void)
{
	struct egw_write bad[2];
	struct egw_payload_cpl c[4];
	struct egw_payload_stats st;

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	bad[0] = pp_emb(&pp, 0, PP_BLOCKS, 1); /* past the last block */
	bad[1] = pp_emb(&pp, 0, 0, 1);
	bad[1].kind = EGW_KIND_MAX;            /* no such kind */
	for (unsigned i = 0; i < 2; i++) {
		struct egw_write w[2] = { pp_emb(&pp, 1, 1, 1), bad[i] };

		CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, w, 2, 7 + i) == 0);
		CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
		CU_ASSERT_EQUAL(c[0].cookie, 7 + i);
		CU_ASSERT(!c[0].ok);
	}
	/* a write longer than what is left of the source region */
	{
		struct egw_write w = pp_emb(&pp, PP_BLOCKS - 1, 0, 2 * PP_BLOCK_TOKENS);

		CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 9) == 0);
		CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
		CU_ASSERT(!c[0].ok);
	}
	pp.ops->stats(pp.side[PP_ENC].drv, &st);
	CU_ASSERT_EQUAL(st.failed_batches, 3);
	CU_ASSERT_EQUAL(st.refused_writes, 3);
	pp_close(&pp);
}

static void
test_unconnected_peer_fails_batch(void)
{
	struct egw_write w;
	struct egw_payload_cpl c[2];

	open_pair();
	w = pp_emb(&pp, 0, 0, 1);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 3) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 3);
	CU_ASSERT(!c[0].ok);
	pp_close(&pp);
}

/* The peer restarted: disconnect unmaps its pool; a write after it fails
 * until the next connect. */
static void
test_disconnect_unmaps(void)
{
	struct egw_write w;
	struct egw_payload_cpl c[2];

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	w = pp_emb(&pp, 0, 0, 1);
	pp.ops->disconnect(pp.side[PP_ENC].drv, 0);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 5) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].cookie == 5 && !c[0].ok);
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 6) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].cookie == 6 && c[0].ok);
	pp_close(&pp);
}

static void
test_post_errors(void)
{
	struct egw_write w;
	struct egw_payload_cpl c[64];
	uint32_t n = 0;

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	w = pp_emb(&pp, 0, 0, 1);
	CU_ASSERT_EQUAL(pp.ops->post(pp.side[PP_ENC].drv, EGW_PAYLOAD_MAX_PEERS,
				     &w, 1, 1), -EINVAL);
	for (uint32_t i = 0; i < ring_size(); i++)
		CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, i) == 0);
	/* nothing taken: the batch can be posted again after a poll */
	CU_ASSERT_EQUAL(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 99),
			-ENOBUFS);
	CU_ASSERT_EQUAL(pp.ops->poll(pp.side[PP_ENC].drv, c, 1, 0), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 0);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 99) == 0);
	n = pp_poll(&pp, PP_ENC, c, 64);
	CU_ASSERT_EQUAL_FATAL(n, ring_size());
	CU_ASSERT_EQUAL(c[n - 1].cookie, 99);
	pp_close(&pp);
}

static uint64_t
be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static uint64_t
file_ino(const char *f)
{
	struct stat st;

	return lstat(f, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static size_t
data_bytes(void)
{
	return egw_pool_geom_mem_bytes(&pp.side[PP_LANG].par.geom);
}

/* The pool file as doc/protocol.md lays it out: a 4096-byte big-endian
 * header, then the regions; mode 0600; the whole size allocated. */
static void
test_header_fields(void)
{
	uint8_t h[4096];
	struct stat st;
	int fd;

	open_pair();
	fd = open(path, O_RDONLY);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	CU_ASSERT_FATAL(fstat(fd, &st) == 0);
	close(fd);
	CU_ASSERT(memcmp(h, "EGWP", 4) == 0);
	CU_ASSERT_EQUAL(be(h + 4, 2), 1);         /* format */
	CU_ASSERT_EQUAL(be(h + 6, 2), 0);
	CU_ASSERT_EQUAL(be(h + 8, 8), PP_SESSION);
	CU_ASSERT_EQUAL(be(h + 16, 8), 4096 + data_bytes());
	CU_ASSERT_EQUAL(be(h + 16, 8), (uint64_t)st.st_size);
	CU_ASSERT_EQUAL(be(h + 24, 8), 4096);     /* data_offset */
	CU_ASSERT_EQUAL(be(h + 32, 4), PP_BLOCK_TOKENS);
	CU_ASSERT_EQUAL(be(h + 36, 4), PP_BLOCKS);
	CU_ASSERT_EQUAL(be(h + 40, 4), 64);       /* hidden_size */
	CU_ASSERT_EQUAL(be(h + 44, 4), 2);        /* dtype_bytes */
	CU_ASSERT_EQUAL(be(h + 48, 4), pp.side[PP_LANG].par.geom.aux_bytes);
	CU_ASSERT_EQUAL(be(h + 52, 4), (uint64_t)getpid());
	for (size_t i = 56; i < sizeof(h); i++)
		if (h[i] != 0) {
			CU_FAIL("reserved header byte not 0");
			break;
		}
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
	/* reserved, not sparse: a full filesystem fails here, not later */
	CU_ASSERT((uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size);
	pp_close(&pp);
}

/* The language side's driver opened alone, as a second gateway would. */
static int
open_lang(struct egw_payload **drv, struct egw_pool **pool)
{
	static struct egw_payload_params par;

	pp_params(&par, EGW_ROLE_LANGUAGE, path);
	return egw_payload_shm_ops.open(&par, PP_SESSION + 1, drv, pool);
}

static void
write_file(const char *f, const void *buf, size_t len)
{
	int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, buf, len) == (ssize_t)len);
	close(fd);
}

/* A stranger's file at the path: the start is refused, the file keeps
 * its inode and its bytes. */
static void
test_refuses_a_strangers_file(void)
{
	static const char text[] = "somebody's data, not a pool";
	char buf[64] = { 0 };
	struct egw_payload *drv = NULL;
	struct egw_pool *pool;
	uint64_t ino;
	int fd;

	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld", (long)getpid());
	write_file(path, text, sizeof(text));
	ino = file_ino(path);
	CU_ASSERT_EQUAL(open_lang(&drv, &pool), -EEXIST);
	CU_ASSERT_EQUAL(file_ino(path), ino);
	fd = open(path, O_RDONLY);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(read(fd, buf, sizeof(buf)), (ssize_t)sizeof(text));
	close(fd);
	CU_ASSERT_STRING_EQUAL(buf, text);
	unlink(path);
}

/* A directory, a FIFO, a device node, a symbolic link (even to a pool
 * file): refused at once (a FIFO must not block the start), untouched. */
static void
test_refuses_what_is_not_a_regular_file(void)
{
	char target[96];
	struct egw_payload *drv = NULL;
	struct egw_pool *pool;
	struct stat st;

	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld", (long)getpid());
	CU_ASSERT_FATAL(mkdir(path, 0700) == 0);
	CU_ASSERT_EQUAL(open_lang(&drv, &pool), -EEXIST);
	CU_ASSERT(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
	CU_ASSERT(rmdir(path) == 0);

	CU_ASSERT_FATAL(mkfifo(path, 0600) == 0);
	CU_ASSERT_EQUAL(open_lang(&drv, &pool), -EEXIST);
	CU_ASSERT(stat(path, &st) == 0 && S_ISFIFO(st.st_mode));
	CU_ASSERT(unlink(path) == 0);

	/* the node of /dev/null; creating one needs CAP_MKNOD */
	if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0) {
		CU_ASSERT_EQUAL(open_lang(&drv, &pool), -EEXIST);
		CU_ASSERT(stat(path, &st) == 0 && S_ISCHR(st.st_mode));
		CU_ASSERT(unlink(path) == 0);
	} else {
		printf("(device node case skipped: %s) ", strerror(errno));
	}

	/* a symbolic link to a stopped gateway's pool file */
	open_pair_at(".target");
	snprintf(target, sizeof(target), "%s", path);
	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld", (long)getpid());
	CU_ASSERT_FATAL(symlink(target, path) == 0);
	CU_ASSERT_EQUAL(open_lang(&drv, &pool), -EEXIST);
	CU_ASSERT(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
	CU_ASSERT(access(target, F_OK) == 0);
	unlink(path);
	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld.target",
		 (long)getpid());
	pp_close(&pp);
}

/* A file with our header whose lock is free (its gateway was killed):
 * unlinked and created anew - a new inode, the old one's bytes unchanged
 * for whoever still maps it. */
static void
test_takes_over_a_dead_owners_file(void)
{
	uint8_t h[8192] = { 'E', 'G', 'W', 'P', 0, 1 };
	struct egw_payload *drv = NULL;
	struct egw_pool *pool;
	uint8_t old[8192];
	uint64_t ino;
	int fd;

	memset(h + 4096, 0xcc, 4096);
	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld", (long)getpid());
	write_file(path, h, sizeof(h));
	ino = file_ino(path);
	fd = open(path, O_RDONLY); /* keeps the old inode alive */
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(open_lang(&drv, &pool) == 0);
	CU_ASSERT(file_ino(path) != ino);
	CU_ASSERT_EQUAL(pread(fd, old, sizeof(old), 0), (ssize_t)sizeof(old));
	CU_ASSERT(memcmp(old, h, sizeof(h)) == 0);
	close(fd);
	egw_payload_shm_ops.close(drv);
	CU_ASSERT(access(path, F_OK) != 0);
}

/* --check-config counts a stopped gateway's pool file at the path as
 * space the start frees (it takes it over); a live gateway's, a
 * stranger's file, or nothing at all frees nothing. */
static void
test_reclaimable_bytes(void)
{
	uint8_t h[8192] = { 'E', 'G', 'W', 'P', 0, 1 };
	struct stat st;

	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld", (long)getpid());
	unlink(path);
	CU_ASSERT_EQUAL(egw_payload_shm_reclaimable(path), 0);
	write_file(path, h, sizeof(h));
	CU_ASSERT_FATAL(stat(path, &st) == 0);
	CU_ASSERT(st.st_blocks > 0);
	CU_ASSERT_EQUAL(egw_payload_shm_reclaimable(path),
			(uint64_t)st.st_blocks * 512);
	write_file(path, "not a pool", 10);
	CU_ASSERT_EQUAL(egw_payload_shm_reclaimable(path), 0);
	unlink(path);
	open_pair(); /* a live gateway's */
	CU_ASSERT_EQUAL(egw_payload_shm_reclaimable(path), 0);
	pp_close(&pp);
}

/* A live gateway's pool file (its lock held): a second gateway with the
 * same path is refused and the first keeps its file, whole. */
static void
test_refuses_a_live_gateways_file(void)
{
	struct egw_payload *drv = NULL;
	struct egw_pool *pool;
	struct stat before, after;

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	CU_ASSERT_FATAL(stat(path, &before) == 0);
	CU_ASSERT_EQUAL(open_lang(&drv, &pool), -EBUSY);
	CU_ASSERT_FATAL(stat(path, &after) == 0);
	CU_ASSERT_EQUAL(after.st_ino, before.st_ino);
	CU_ASSERT_EQUAL(after.st_size, before.st_size);
	/* and it still works */
	{
		struct egw_write w = pp_emb(&pp, 1, 2, 4);
		struct egw_payload_cpl c[2];

		pp_fill(&pp, 1, 77);
		CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 1) == 0);
		CU_ASSERT_EQUAL(pp_poll(&pp, PP_ENC, c, 2), 1);
		CU_ASSERT(c[0].ok);
		CU_ASSERT(pp_landed(&pp, 2, 77, 4));
	}
	pp_close(&pp);
}

/* One descriptor over a UNIX socket, as the attach socket passes it. */
static int
send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte = 'f';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

static int
recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	if (c == NULL || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* What a local client is handed (pool_fd, sent over SCM_RIGHTS) is not
 * the description that holds the pool file's lock: a client that keeps it
 * after the gateway exits does not keep the lock (the next gateway takes
 * the path over), and a client that unlocks it cannot let a second
 * gateway take a live pool. */
static void
test_clients_fd_holds_no_lock(void)
{
	struct egw_payload *drv = NULL, *drv2 = NULL;
	struct egw_pool *pool;
	uint64_t off, bytes;
	int client, sv[2], status;
	pid_t pid;

	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld", (long)getpid());
	CU_ASSERT_FATAL(open_lang(&drv, &pool) == 0);
	/* SCM_RIGHTS passes the same open file description, as dup does */
	client = dup(egw_payload_shm_ops.pool_fd(drv, &off, &bytes));
	CU_ASSERT_FATAL(client >= 0);
	CU_ASSERT_EQUAL(flock(client, LOCK_UN), 0);
	CU_ASSERT_EQUAL(open_lang(&drv2, &pool), -EBUSY);
	if (drv2 != NULL)
		egw_payload_shm_ops.close(drv2);
	close(client);
	egw_payload_shm_ops.close(drv);

	/* a gateway hands its pool fd to a client and is killed */
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		if (open_lang(&drv, &pool) != 0 ||
		    send_fd(sv[1], egw_payload_shm_ops.pool_fd(drv, &off,
								&bytes)) != 0)
			_exit(1);
		_exit(0); /* no teardown: its file stays at the path */
	}
	close(sv[1]);
	client = recv_fd(sv[0]);
	close(sv[0]);
	CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
	CU_ASSERT_FATAL(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT_FATAL(client >= 0);
	/* the client keeps its fd; a new gateway starts on the same path */
	CU_ASSERT_EQUAL(open_lang(&drv2, &pool), 0);
	if (drv2 != NULL)
		egw_payload_shm_ops.close(drv2);
	close(client);
	unlink(path);
}

/* A pool larger than the file may grow (RLIMIT_FSIZE stands in for a
 * full filesystem): refused at start, and the file it created is gone. */
static void
test_no_room_is_a_start_error(void)
{
	struct rlimit old, lim;
	struct egw_payload *drv = NULL;
	struct egw_pool *pool;
	int rc;

	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld", (long)getpid());
	CU_ASSERT_FATAL(getrlimit(RLIMIT_FSIZE, &old) == 0);
	lim = old;
	lim.rlim_cur = 8192;
	signal(SIGXFSZ, SIG_IGN);
	CU_ASSERT_FATAL(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	rc = open_lang(&drv, &pool);
	setrlimit(RLIMIT_FSIZE, &old);
	CU_ASSERT_EQUAL(rc, -EFBIG);
	CU_ASSERT(access(path, F_OK) != 0);
}

/* The sending side checks the peer's file against its REGISTER: another
 * session, another geometry, regions outside the file, a file that is
 * not a pool: refused, and nothing is written to the peer afterwards. */
static void
test_connect_checks_file(void)
{
	struct egw_register r;
	struct egw_write w;
	struct egw_payload_cpl c[2];
	uint64_t file_bytes;

	open_pair();
	file_bytes = 4096 + data_bytes();
	pp_register(&pp, PP_LANG, &r);
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, EGW_PAYLOAD_MAX_PEERS,
					&r), -EINVAL);
	CU_ASSERT(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r) == 0);
	r.session = PP_SESSION + 1;     /* another incarnation */
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -ESTALE);
	/* the failed connect dropped the old mapping: nothing is written */
	w = pp_emb(&pp, 0, 0, 1);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 5) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(!c[0].ok);
	pp_register(&pp, PP_LANG, &r);
	r.pool_blocks = 2 * PP_BLOCKS;  /* more than the file holds */
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -EINVAL);
	pp_register(&pp, PP_LANG, &r);
	r.hidden_size = 128;
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -EINVAL);
	pp_register(&pp, PP_LANG, &r);
	r.region[EGW_KIND_EMB].addr = file_bytes - 64;  /* runs past the end */
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -ERANGE);
	pp_register(&pp, PP_LANG, &r);
	r.region[EGW_KIND_EMB].addr = 0;                /* over the header */
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -ERANGE);
	pp_register(&pp, PP_LANG, &r);
	pp_close(&pp);
	/* the peer's file named by its shm_path: none, then no pool */
	open_pair();
	pp_register(&pp, PP_LANG, &r);
	snprintf(pp.side[PP_ENC].par.peers[0].shm_path,
		 sizeof(pp.side[PP_ENC].par.peers[0].shm_path),
		 "%s.other", path);
	CU_ASSERT_FATAL(pp_reopen(&pp, PP_ENC) == 0);
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -ENOENT);
	write_file(pp.side[PP_ENC].par.peers[0].shm_path, "not a pool", 10);
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -EBADMSG);
	unlink(pp.side[PP_ENC].par.peers[0].shm_path);
	pp_close(&pp);
}

/* A connect that fails (the peer's file missing, retried with each of
 * its REGISTERs) logs nothing: the reason goes back to the caller through
 * why(), and the node notes it once. */
static void
test_connect_failure_is_not_logged(void)
{
	char log[64], buf[512];
	struct egw_register r;
	const char *why;
	int saved, fd;
	ssize_t n;

	open_pair();
	pp_register(&pp, PP_LANG, &r);
	snprintf(pp.side[PP_ENC].par.peers[0].shm_path,
		 sizeof(pp.side[PP_ENC].par.peers[0].shm_path),
		 "%s.missing", path);
	CU_ASSERT_FATAL(pp_reopen(&pp, PP_ENC) == 0);
	snprintf(log, sizeof(log), "/tmp/egw-test-shm-log-%ld", (long)getpid());
	fd = open(log, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	CU_ASSERT_FATAL(saved >= 0 && dup2(fd, STDERR_FILENO) >= 0);
	for (int i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r),
				-ENOENT);
	r.session = PP_SESSION + 7;
	pp.side[PP_ENC].par.peers[0].shm_path[0] = '\0';
	CU_ASSERT_FATAL(pp_reopen(&pp, PP_ENC) == 0);
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -ESTALE);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(log);
	CU_ASSERT_EQUAL(n, 0);
	if (n > 0) {
		buf[n] = '\0';
		printf("\n  logged: %s", buf);
	}
	CU_ASSERT_FATAL(pp.ops->why != NULL);
	why = pp.ops->why(pp.side[PP_ENC].drv, 0);
	CU_ASSERT(strstr(why, "belongs to session 0x5e55100000000001") != NULL);
	pp_register(&pp, PP_LANG, &r);
	r.hidden_size = 128;
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -EINVAL);
	CU_ASSERT(strstr(pp.ops->why(pp.side[PP_ENC].drv, 0), "geometry") != NULL);
	pp_close(&pp);
}

static void
test_close_removes_pool_file(void)
{
	open_pair();
	CU_ASSERT(access(path, F_OK) == 0);
	pp_close(&pp);
	CU_ASSERT(access(path, F_OK) != 0);
}

/* At exit the path is unlinked only while it names our file: a file an
 * operator put there since stays. */
static void
test_close_leaves_a_replaced_file(void)
{
	char other[112];
	uint64_t ino;

	open_pair();
	snprintf(other, sizeof(other), "%s.new", path);
	write_file(other, "x", 1);
	CU_ASSERT_FATAL(rename(other, path) == 0);
	ino = file_ino(path);
	pp_close(&pp);
	CU_ASSERT_EQUAL(file_ino(path), ino);
	unlink(path);
}

/* Both sides' pools can be mapped through pool_fd (local engines do):
 * the same bytes as the pool at the offset it names; the sending side's
 * is a memfd sealed so that no holder of the fd can shrink it. */
static void
test_pool_fd_maps_the_pool(void)
{
	open_pair();
	for (int side = PP_ENC; side <= PP_LANG; side++) {
		struct egw_pool *pool = pp.side[side].pool;
		size_t bytes = egw_pool_geom_mem_bytes(egw_pool_geom(pool));
		uint64_t off, fd_bytes;
		int fd = pp.ops->pool_fd(pp.side[side].drv, &off, &fd_bytes);
		uint8_t *m;

		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT_EQUAL(off, side == PP_LANG ? 4096 : 0);
		CU_ASSERT_FATAL(off + bytes <= fd_bytes);
		m = mmap(NULL, fd_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CU_ASSERT_FATAL(m != MAP_FAILED);
		m[off + bytes - 1] = 0x5a;
		CU_ASSERT_EQUAL(((uint8_t *)egw_pool_mem(pool))[bytes - 1], 0x5a);
		((uint8_t *)egw_pool_mem(pool))[0] = 0xa5;
		CU_ASSERT_EQUAL(m[off], 0xa5);
		munmap(m, fd_bytes);
	}
	{
		uint64_t off, fd_bytes;

		CU_ASSERT_EQUAL(ftruncate(pp.ops->pool_fd(pp.side[PP_ENC].drv,
							  &off, &fd_bytes), 4096),
				-1);
		CU_ASSERT_EQUAL(errno, EPERM);
	}
	pp_close(&pp);
}

/* An encode pool cut into segments: the pool is one range as before, each
 * segment a sealed memfd of its own that holds exactly its blocks' bytes
 * of every kind. Written through a segment's mapping, the bytes show in
 * the pool at that segment's blocks and nowhere else; the fd cannot grow
 * to reach more; the pool has no whole-pool fd to hand out. */
static void
test_segments_cut_the_pool(void)
{
	enum { NB = 256, NSEG = 4, PER = NB / NSEG };
	struct egw_payload_params par;
	struct egw_payload *drv = NULL;
	struct egw_pool *pool = NULL;
	const struct egw_pool_mem *m;
	uint64_t off, bytes;
	int fd, wrong = 0, right = 0;

	pp_params(&par, EGW_ROLE_ENCODE, "");
	par.geom.block_tokens = 16;
	par.geom.capacity_tokens = NB * 16;
	par.segments = NSEG;
	CU_ASSERT_FATAL(egw_payload_shm_ops.open(&par, 1, &drv, &pool) == 0);
	CU_ASSERT(egw_payload_shm_ops.pool_fd(drv, &off, &bytes) < 0);
	m = egw_payload_shm_ops.pool_mem(drv);
	CU_ASSERT_FATAL(m != NULL);
	CU_ASSERT_EQUAL(m->seg.nseg, NSEG);
	CU_ASSERT_EQUAL(m->seg.blocks, PER);
	CU_ASSERT_EQUAL(egw_payload_pool_seg_fd(m, NSEG), -ERANGE);
	for (uint32_t s = 0; s < NSEG; s++) {
		struct stat st;
		uint8_t *v;

		fd = egw_payload_pool_seg_fd(m, s);
		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT_EQUAL(fstat(fd, &st), 0);
		CU_ASSERT_EQUAL((uint64_t)st.st_size, m->seg.bytes);
		CU_ASSERT_EQUAL(ftruncate(fd, st.st_size + 4096), -1);
		CU_ASSERT_EQUAL(errno, EPERM);
		v = mmap(NULL, m->seg.bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, 0);
		CU_ASSERT_FATAL(v != MAP_FAILED);
		/* the whole segment file written: (s + 1) everywhere */
		memset(v, (int)s + 1, m->seg.bytes);
		/* and one token of each kind, named by its block */
		for (int k = 0; k < EGW_KIND_MAX; k++) {
			uint8_t *at;

			if (m->seg.len[k] == 0)
				continue;
			at = egw_pool_addr(pool, (enum egw_kind)k, s * PER + 5,
					   0);
			v[m->seg.off[k] +
			  egw_pool_geom_offset(&par.geom, (enum egw_kind)k, 5,
					       0)] = 0xc0 | (uint8_t)s;
			right += at != NULL && *at == (0xc0 | s);
		}
		munmap(v, m->seg.bytes);
	}
	CU_ASSERT_EQUAL(right, NSEG * 4);
	/* every byte of every kind shows its own segment's value */
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		size_t unit = egw_pool_geom_unit_bytes(&par.geom,
						       (enum egw_kind)k);

		for (uint32_t b = 0; b < NB; b++) {
			uint8_t *a = egw_pool_addr(pool, (enum egw_kind)k, b,
						   0);
			size_t n = k == EGW_KIND_AUX ? unit : unit * 16;

			for (size_t i = 0; a != NULL && i < n; i++)
				if (a[i] != b / PER + 1 &&
				    !(b % PER == 5 && i == 0))
					wrong++;
		}
	}
	CU_ASSERT_EQUAL(wrong, 0);
	egw_payload_shm_ops.close(drv);
	/* a geometry whose shares are not whole pages is refused */
	par.segments = 8; /* 32 blocks: fill_ids 2048 bytes a share */
	CU_ASSERT_EQUAL(egw_payload_shm_ops.open(&par, 1, &drv, &pool),
			-EINVAL);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "segments cut the encode pool", test_segments_cut_the_pool },
		{ "write lands where the REGISTER says", test_write_lands },
		{ "a write outside the peer's regions fails its batch",
		  test_write_outside_regions_fails_batch },
		{ "a batch to an unconnected peer fails",
		  test_unconnected_peer_fails_batch },
		{ "unknown peer -EINVAL, full ring -ENOBUFS",
		  test_post_errors },
		{ "disconnect unmaps the peer's pool", test_disconnect_unmaps },
		{ "the pool file's header, by value", test_header_fields },
		{ "a stranger's file at the path: refused, untouched",
		  test_refuses_a_strangers_file },
		{ "a directory, FIFO, device, symlink: refused, untouched",
		  test_refuses_what_is_not_a_regular_file },
		{ "a dead owner's file: taken over, a new inode",
		  test_takes_over_a_dead_owners_file },
		{ "a client's pool fd holds no lock of the pool file",
		  test_clients_fd_holds_no_lock },
		{ "a stopped gateway's file counts as reclaimable space",
		  test_reclaimable_bytes },
		{ "a live gateway's file: refused, it keeps working",
		  test_refuses_a_live_gateways_file },
		{ "no room for the pool: a start error, no file left",
		  test_no_room_is_a_start_error },
		{ "connect checks session, geometry, regions of the file",
		  test_connect_checks_file },
		{ "a failed connect logs nothing, its reason is kept",
		  test_connect_failure_is_not_logged },
		{ "close removes the pool file", test_close_removes_pool_file },
		{ "close leaves a file that replaced ours",
		  test_close_leaves_a_replaced_file },
		{ "pool_fd maps the pool; the sending side's cannot shrink",
		  test_pool_fd_maps_the_pool },
		{ NULL, NULL },
	};

	return cu_run("payload_shm", tests);
}
