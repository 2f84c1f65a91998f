/* SPDX-License-Identifier: BSD-3-Clause */
/* The Internet checksum's sum 8 bytes at a time (app/embgw/gw_cksum.h)
 * against RFC 1071's 2 bytes at a time, at every length and alignment. */
#include "gw_cksum.h"

#include "cu_main.h"

/* RFC 1071, section 4.1, in 16-bit loads of the buffer's bytes */
static uint16_t
ref_sum(const uint8_t *p, size_t len)
{
	uint32_t sum = 0;
	uint16_t w;

	for (; len > 1; p += 2, len -= 2) {
		memcpy(&w, p, 2);
		sum += w;
	}
	if (len > 0)
		sum += *p; /* the low byte of a 16-bit load */
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

static void
test_every_length_and_alignment(void)
{
	static uint8_t buf[600];
	uint32_t x = 12345;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len <= 512; len++)
			CU_ASSERT_EQUAL_FATAL(gw_cksum_raw(buf + off, len),
					      ref_sum(buf + off, len));
}

/* All ones: every 64-bit addition carries out, and the folds carry. */
static void
test_carries(void)
{
	static uint8_t ff[256];

	memset(ff, 0xff, sizeof(ff));
	for (size_t len = 0; len <= sizeof(ff); len++)
		CU_ASSERT_EQUAL_FATAL(gw_cksum_raw(ff, len), ref_sum(ff, len));
	CU_ASSERT_EQUAL(gw_cksum_raw(ff, 200), 0xffff);
}

/* RFC 1071's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2 in network
 * order, f2dd as little-endian loads read it. */
static void
test_rfc1071_example(void)
{
	static const uint8_t b[] = { 0x00, 0x01, 0xf2, 0x03,
				     0xf4, 0xf5, 0xf6, 0xf7 };
	uint16_t s = gw_cksum_raw(b, sizeof(b));
	const uint8_t *o = (const uint8_t *)&s;

	CU_ASSERT_EQUAL(o[0], 0xdd);
	CU_ASSERT_EQUAL(o[1], 0xf2);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "every_length_and_alignment",
		  test_every_length_and_alignment },
		{ "carries", test_carries },
		{ "rfc1071_example", test_rfc1071_example },
		{ NULL, NULL },
	};

	return cu_run("gw_cksum", tests);
}
