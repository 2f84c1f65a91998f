/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reference design's control path, for comparison: ZeroMQ PUSH/PULL over TCP
 * loopback carrying multipart ASCII frames (room, endpoint, port, session,
 * block indices, ranks, sent/allocated tokens) and parsing them on the
 * other end, as the Python implementation does. Two threads, one process.
 * Prints messages per second.   bench_zmq [messages]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#define PARTS 8

static long total = 1000000;
static void *zctx;
static volatile long parsed_sum;

static void *
puller(void *arg)
{
	void *s = zmq_socket(zctx, ZMQ_PULL);
	char buf[PARTS][256];
	long sum = 0;

	(void)arg;
	zmq_bind(s, "tcp://127.0.0.1:47555");
	for (long i = 0; i < total; i++) {
		for (int k = 0; k < PARTS; k++) {
			int n = zmq_recv(s, buf[k], sizeof(buf[k]) - 1, 0);

			buf[k][n < 0 ? 0 : n] = '\0';
		}
		/* parse like the reference design: int(frame.decode("ascii")) */
		sum += atol(buf[0]) + atol(buf[2]) + atol(buf[5]) + atol(buf[6]) +
		       atol(buf[7]) + (long)strlen(buf[4]);
	}
	parsed_sum = sum;
	zmq_close(s);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t;
	struct timespec a, b;
	void *s;
	char f[PARTS][128];

	if (argc > 1)
		total = atol(argv[1]);
	zctx = zmq_ctx_new();
	pthread_create(&t, NULL, puller, NULL);
	s = zmq_socket(zctx, ZMQ_PUSH);
	zmq_connect(s, "tcp://127.0.0.1:47555");
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < total; i++) {
		int len[PARTS];

		len[0] = snprintf(f[0], sizeof(f[0]), "%ld", 1000000 + i);
		len[1] = snprintf(f[1], sizeof(f[1]), "10.0.0.2");
		len[2] = snprintf(f[2], sizeof(f[2]), "%d", 17001);
		len[3] = snprintf(f[3], sizeof(f[3]), "10.0.0.2:17001");
		len[4] = snprintf(f[4], sizeof(f[4]), "%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld",
				  i % 64, i % 64 + 1, i % 64 + 2, i % 64 + 3,
				  i % 64 + 4, i % 64 + 5, i % 64 + 6, i % 64 + 7);
		len[5] = snprintf(f[5], sizeof(f[5]), "%d", 1);
		len[6] = snprintf(f[6], sizeof(f[6]), "%ld", (i % 8) * 1024);
		len[7] = snprintf(f[7], sizeof(f[7]), "%d", 1024);
		for (int k = 0; k < PARTS; k++)
			zmq_send(s, f[k], (size_t)len[k], k < PARTS - 1 ? ZMQ_SNDMORE : 0);
	}
	pthread_join(t, NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("zmq_msgs_per_s %.0f messages %ld check %ld\n",
	       total / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9),
	       total, parsed_sum);
	zmq_close(s);
	zmq_ctx_term(zctx);
	return 0;
}
