/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_CLUSTER_H
#define EGW_CLUSTER_H

/**
 * @file
 * Cluster membership in etcd v3, sans-I/O (doc/cluster.md).
 *
 * Each identity of a gateway publishes a record (JSON) under
 * /embgw/<cluster>/<name>, held by a lease the gateway keeps alive; each
 * gateway lists the prefix and watches it from the listed revision, and
 * takes the compatible records of the others as peers. This library holds
 * the records, the decision of what is compatible and the state machine;
 * it performs no I/O and reads no clock: the caller passes `now` into
 * every call, carries out the actions it emits (HTTP requests to etcd's
 * JSON gateway, peers to hold or release, log lines) and feeds back what
 * came of them (responses, watch lines, failures).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EGW_CLUSTER_NAME_LEN 32
#define EGW_CLUSTER_PATH_LEN 256
#define EGW_CLUSTER_MAX_SELF 32 /**< records of one process: its identities */
#define EGW_CLUSTER_KEY_ID_BYTES 16
#define EGW_CLUSTER_KEY_ID_LEN (2 * EGW_CLUSTER_KEY_ID_BYTES + 1)
#define EGW_CLUSTER_RECORD_MAX 2048 /**< a record's JSON, bytes */
#define EGW_CLUSTER_BODY_MAX 8192   /**< a request body, bytes */
#define EGW_CLUSTER_TEXT_LEN 384    /**< a log line or an error text */
/** The record format written here (field "v"). */
#define EGW_CLUSTER_RECORD_VERSION 1

/** The library's errors (negative returns), each with a text. */
#define EGW_CLUSTER_ERRORS(X)                                      \
	X(JSON, "not a JSON object")                               \
	X(FIELD_MISSING, "a required field is missing")            \
	X(FIELD_TYPE, "a field has the wrong type")                \
	X(FIELD_RANGE, "a field's value is out of range")          \
	X(RECORD_VERSION, "unknown record version")                \
	X(KEY_NAME, "the key does not end with the record's name") \
	X(TOO_BIG, "does not fit")

enum egw_cluster_err {
	EGW_CLUSTER_OK = 0,
#define EGW_CLUSTER_X(n, t) EGW_CLUSTER_E_##n,
	EGW_CLUSTER_ERRORS(EGW_CLUSTER_X)
#undef EGW_CLUSTER_X
		EGW_CLUSTER_E_MAX
};

/** "JSON", "FIELD_MISSING", ... of a positive or negated code. */
const char *egw_cluster_err_name(int e);
/** The text of a positive or negated code. */
const char *egw_cluster_strerror(int e);

/** What a record says about one identity. */
struct egw_cluster_record {
	char name[EGW_CLUSTER_NAME_LEN]; /**< the peer name (REGISTER's) */
	uint16_t roles;			 /**< EGW_ROLE_* */
	uint32_t addr;			 /**< IPv4, host byte order */
	uint16_t udp_port;
	uint32_t block_tokens;
	uint32_t hidden;
	char dtype[8]; /**< "bf16", ... */
	uint32_t dtype_bytes;
	uint8_t kinds; /**< 1 << EGW_KIND_* present */
	uint32_t aux_bytes;
	uint32_t protocol;		     /**< EGW_PROTO_VERSION */
	char payload[8];		     /**< "shm" or "verbs" */
	char shm_path[EGW_CLUSTER_PATH_LEN]; /**< shm: its pool file */
	char key_id[EGW_CLUSTER_KEY_ID_LEN]; /**< hex, see egw_cluster_key_id */
};

/**
 * The key id of a pre-shared key: BLAKE2b-128 keyed by the key over a
 * fixed context string, in hex. A keyed BLAKE2b is a pseudo-random
 * function: its output tells two keys apart and says nothing else about
 * the key (finding it back is a search of the whole key space, as for the
 * MAC itself). `key`: the key file's bytes (at least 16).
 * Returns 0 or -EINVAL.
 */
int egw_cluster_key_id(const uint8_t *key, size_t len,
		       char out[EGW_CLUSTER_KEY_ID_LEN]);

/** The record as JSON (NUL-terminated). Returns its length or
 * -EGW_CLUSTER_E_TOO_BIG. */
int egw_cluster_record_write(const struct egw_cluster_record *r, char *buf,
			     size_t len);

/**
 * Parse and validate a record: every field present, of its type and in
 * range. Returns 0, or a negated EGW_CLUSTER_E_* with `why` naming the
 * field and its value.
 */
int egw_cluster_record_parse(const char *json, size_t len,
			     struct egw_cluster_record *r, char *why,
			     size_t why_len);

/** Why a peer's record is not compatible with ours. */
enum egw_cluster_compat {
	EGW_CLUSTER_COMPAT_OK = 0,
	EGW_CLUSTER_COMPAT_ROLES,    /**< neither serves the other */
	EGW_CLUSTER_COMPAT_GEOMETRY, /**< blocks, width, type or kinds */
	EGW_CLUSTER_COMPAT_KEY,	     /**< another pre-shared key */
	EGW_CLUSTER_COMPAT_PROTOCOL, /**< another protocol version */
	EGW_CLUSTER_COMPAT_PAYLOAD,  /**< another payload driver */
};

/** Whether `peer` can be a peer of `self`; `why` (optional) says how
 * they differ, with both values. */
enum egw_cluster_compat
egw_cluster_compat(const struct egw_cluster_record *self,
		   const struct egw_cluster_record *peer, char *why,
		   size_t why_len);

/* ---- the state machine ------------------------------------------------ */

/** The requests in flight at once: each channel carries one. */
enum egw_cluster_chan {
	EGW_CLUSTER_CH_MAIN = 0, /**< auth, grant, txn, range, delete, revoke */
	EGW_CLUSTER_CH_KEEPALIVE,
	EGW_CLUSTER_CH_WATCH, /**< the stream: one JSON object a line */
	EGW_CLUSTER_CH_MAX
};

struct egw_cluster_conf {
	char cluster[EGW_CLUSTER_NAME_LEN]; /**< keys under /embgw/<cluster>/ */
	uint32_t lease_ttl_s;
	uint64_t backoff_min_ns;	 /**< first retry after a failure */
	uint64_t backoff_max_ns;	 /**< the bound of the doubling */
	uint64_t seed;			 /**< the jitter's */
	char user[EGW_CLUSTER_NAME_LEN]; /**< "": no authentication */
	char password[256];
	struct egw_cluster_record self[EGW_CLUSTER_MAX_SELF];
	unsigned nself;
};

enum egw_cluster_state {
	EGW_CLUSTER_ST_INIT = 0,
	EGW_CLUSTER_ST_AUTH,
	EGW_CLUSTER_ST_GRANT,
	EGW_CLUSTER_ST_PUT, /**< our records, one txn each */
	EGW_CLUSTER_ST_LIST,
	EGW_CLUSTER_ST_WATCH,	 /**< in step: watching, keeping alive */
	EGW_CLUSTER_ST_BACKOFF,	 /**< after a failure, waiting to retry */
	EGW_CLUSTER_ST_PROBE,	 /**< back: is our lease still alive? */
	EGW_CLUSTER_ST_STOPPING, /**< deleting our keys, revoking */
	EGW_CLUSTER_ST_STOPPED,
	EGW_CLUSTER_ST_REFUSED, /**< our name is another's: do not start */
};

const char *egw_cluster_state_name(enum egw_cluster_state s);

enum egw_cluster_act_kind {
	EGW_CLUSTER_ACT_REQUEST = 1, /**< POST body to path on chan */
	EGW_CLUSTER_ACT_CANCEL,	     /**< drop what is in flight on chan */
	EGW_CLUSTER_ACT_HOLD,	     /**< self[self] takes peer as a peer */
	EGW_CLUSTER_ACT_RELEASE,     /**< self[self] lets go of peer.name */
	EGW_CLUSTER_ACT_LOG,
	EGW_CLUSTER_ACT_REFUSE,	 /**< the start fails: text says why */
	EGW_CLUSTER_ACT_STOPPED, /**< the clean stop is over */
};

enum egw_cluster_level {
	EGW_CLUSTER_ERR = 1,
	EGW_CLUSTER_WARN,
	EGW_CLUSTER_INFO,
	EGW_CLUSTER_DEBUG
};

struct egw_cluster_action {
	enum egw_cluster_act_kind kind;
	enum egw_cluster_chan chan; /**< REQUEST, CANCEL */
	const char *path;	    /**< REQUEST: "/v3/kv/range", ... */
	const char *token;	    /**< REQUEST: Authorization, or NULL */
	/** REQUEST: NUL-terminated, valid until the next request on chan */
	const char *body;
	unsigned self;			 /**< HOLD, RELEASE */
	struct egw_cluster_record peer;	 /**< HOLD, RELEASE (name) */
	enum egw_cluster_level level;	 /**< LOG */
	char text[EGW_CLUSTER_TEXT_LEN]; /**< LOG, REFUSE, RELEASE (why) */
};

struct egw_cluster;

/** A machine for `conf` (copied). NULL when out of memory. */
struct egw_cluster *egw_cluster_create(const struct egw_cluster_conf *conf);
void egw_cluster_destroy(struct egw_cluster *c);

/** Begin: the first requests. */
void egw_cluster_start(struct egw_cluster *c, uint64_t now);

/** The answer to the request on `chan`: its HTTP status and body. */
void egw_cluster_on_response(struct egw_cluster *c, enum egw_cluster_chan chan,
			     long status, const char *body, size_t len,
			     uint64_t now);

/** One line of the watch stream (one JSON object). */
void egw_cluster_on_watch_line(struct egw_cluster *c, const char *line,
			       size_t len, uint64_t now);

/** The request on `chan` failed without an answer (connection, timeout,
 * the watch stream ended). */
void egw_cluster_on_failure(struct egw_cluster *c, enum egw_cluster_chan chan,
			    const char *why, uint64_t now);

/** Timers: keep-alive, back-off. Call at next_deadline or later. */
void egw_cluster_tick(struct egw_cluster *c, uint64_t now);

/** When tick is next due (UINT64_MAX: nothing timed). */
uint64_t egw_cluster_next_deadline(const struct egw_cluster *c);

/** Clean stop: our keys deleted, the lease revoked, then ACT_STOPPED
 * (at once when etcd is not reachable: the keys go at the lease's end). */
void egw_cluster_stop(struct egw_cluster *c, uint64_t now);

/** The next action, in order; false when there is none. */
bool egw_cluster_next_action(struct egw_cluster *c,
			     struct egw_cluster_action *a);

/** What telemetry shows. */
struct egw_cluster_status {
	enum egw_cluster_state state;
	bool connected;	     /**< the last request got an answer */
	int64_t lease;	     /**< 0: none */
	int64_t revision;    /**< the last seen */
	uint32_t peers;	     /**< records of others known */
	uint32_t compatible; /**< ... held as peers */
	uint32_t failures;   /**< since start */
	char last_error[EGW_CLUSTER_TEXT_LEN];
};
void egw_cluster_get_status(const struct egw_cluster *c,
			    struct egw_cluster_status *s);

#ifdef __cplusplus
}
#endif

#endif /* EGW_CLUSTER_H */
