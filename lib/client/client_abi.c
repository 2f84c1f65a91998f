/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The library's side of its ABI (doc/client.md, "ABI"): the layouts an
 * engine and the Python package (python/embgw/_lib.py) were built against,
 * pinned here, and the size rule of egw_client_opts.
 */
#include <errno.h>
#include <string.h>

#include "client_priv.h"

_Static_assert(EGW_CLIENT_SOVERSION == EGW_CLIENT_ABI_VERSION,
	       "the soname (lib/client/meson.build) and the header disagree");

/* LP64 layouts as doc/client.md gives them; tests/python/test_abi.py
 * compares the ctypes copies field by field */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(offsetof(struct egw_client_opts, size) == 0 &&
		       offsetof(struct egw_client_opts, name) == 8 &&
		       offsetof(struct egw_client_opts, timeout_ms) == 28 &&
		       sizeof(struct egw_client_opts) == 32,
	       "egw_client_opts: ABI 2 layout");
#endif
_Static_assert(sizeof(struct egw_client_geometry) == 144 &&
		       offsetof(struct egw_client_geometry, pool_bytes) == 72 &&
		       offsetof(struct egw_client_geometry, region_bytes) ==
			       112,
	       "egw_client_geometry: ABI 2 layout");
_Static_assert(sizeof(struct egw_client_event) == 48 &&
		       offsetof(struct egw_client_event, result) == 16 &&
		       offsetof(struct egw_client_event, landed_tokens) == 44,
	       "egw_client_event: ABI 2 layout");
_Static_assert(sizeof(struct egw_client_room) == 32 &&
		       offsetof(struct egw_client_room, slot) == 28,
	       "egw_client_room: ABI 2 layout");
_Static_assert(sizeof(struct egw_client_run) == 8,
	       "egw_client_run: ABI 2 layout");
_Static_assert(sizeof(struct egw_client_aux) == 32 &&
		       offsetof(struct egw_client_aux, cookie) == 24,
	       "egw_client_aux: ABI 2 layout");
_Static_assert(sizeof(struct egw_client_stats) == 72 &&
		       offsetof(struct egw_client_stats, cache_hits) == 40,
	       "egw_client_stats: ABI 2 layout");

_Static_assert(sizeof(struct egw_client_peer) == 40 &&
		       offsetof(struct egw_client_peer, flags) == 4 &&
		       offsetof(struct egw_client_peer, name) == 8,
	       "egw_client_peer: ABI 2 layout");

/* The smallest egw_client_opts a caller may pass: ABI 1's, the first with
 * a size. A later version adds fields after timeout_ms and keeps this. */
#define OPTS_SIZE_MIN (offsetof(struct egw_client_opts, timeout_ms) + \
		       sizeof(uint32_t))

unsigned int
egw_client_abi_version(void)
{
	return EGW_CLIENT_ABI_VERSION;
}

int
client_opts_read(const struct egw_client_opts *in, struct egw_client_opts *out)
{
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	if (in == NULL)
		return 0;
	if (in->size < OPTS_SIZE_MIN) {
		client_error("egw_client_opts.size is %u, at least %zu: set it "
			     "to sizeof(struct egw_client_opts)", in->size,
			     (size_t)OPTS_SIZE_MIN);
		return -EINVAL;
	}
	if (in->size > sizeof(*out)) {
		client_error("egw_client_opts.size is %u, this library knows "
			     "%zu bytes (ABI %u): the caller was built against "
			     "a newer egw_client.h", in->size, sizeof(*out),
			     EGW_CLIENT_ABI_VERSION);
		return -EINVAL;
	}
	/* an older caller's struct: the fields it lacks stay 0, defaults */
	memcpy(out, in, in->size);
	return 0;
}
