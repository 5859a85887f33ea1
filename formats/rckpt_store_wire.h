/*
 * rckpt_store_wire.h — the messages of the checkpoint store's object-class
 * methods and the values it keeps in omaps. Spec: formats/store.md.
 *
 * Every message is one cls-wire frame (formats/cls-wire.md). Decoders take
 * untrusted bytes (they run in the OSD and in clients), point blobs into
 * the caller's bytes instead of copying, and return 0, -EBADMSG or
 * RCKPT_FMT_EVERSION. Encoders append to an rckpt_buf_t and return 0,
 * -EINVAL (a field the format cannot hold), -ENOMEM or -EFBIG.
 */
#ifndef RCKPT_STORE_WIRE_H
#define RCKPT_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_wire_fields.h"

/* The newest message layout: 4. Every message that changes stored data
 * carries a token (store.md "Fencing"): APPEND and TRIM since version 2;
 * CLAIM, COMPACT, DROP, PIN and RETIRE since 3, and PUT is new in 3.
 * APPEND gains its head record in 4 (written with compat 2: a plugin of
 * layout 2 or 3 takes the record and skips the head). The other messages
 * are still version 1 (COMMIT carried its token from the start). A
 * decoder refuses a message of a layout older than its token's. */
#define RCKPT_STORE_WIRE_VERSION 4u
#define RCKPT_STORE_FENCED_VERSION 2u /* APPEND, TRIM */
#define RCKPT_STORE_FENCED3_VERSION 3u /* CLAIM, COMPACT, DROP, PIN, RETIRE, PUT */
#define RCKPT_STORE_HEAD_VERSION 4u /* APPEND's head record */
#define RCKPT_STORE_NONE UINT64_MAX /* no step: an empty head, a base's parent */

#define RCKPT_STORE_SUMMARY_MAX 4096u  /* bytes of a step's summary */
#define RCKPT_STORE_LIST_MAX 1024u     /* steps per list reply */
#define RCKPT_STORE_OBJECT_MAX ((uint64_t)1 << 30) /* bytes of a chunk object */
/* What one chunk's record may hold (store.md "Limits"). A client lays no
 * more than RCKPT_STORE_CHUNK_ELEMENTS_MAX into a chunk, so that one
 * record costs an OSD call about 100 ms, and the plugin decodes no larger
 * one, however it got there; a client folding for itself decodes records
 * of up to RCKPT_STORE_RECORD_ELEMENTS_MAX, what clients before it could
 * write, so that their jobs stay readable. */
#define RCKPT_STORE_CHUNK_ELEMENTS_MAX ((uint64_t)1 << 22)
#define RCKPT_STORE_RECORD_ELEMENTS_MAX ((uint64_t)1 << 26)
#define RCKPT_STORE_CHUNK_SEGMENTS_MAX (1u << 16)
/* Chains: materialize folds at most RCKPT_STORE_CHAIN_MAX records from a
 * base (-E2BIG past it). Nothing the system writes comes near it: a writer
 * starts a new base once its chain has RCKPT_STORE_CHAIN_REBASE records,
 * and compaction keeps every chain it builds under that too. */
#define RCKPT_STORE_CHAIN_MAX 4096u
/* Records of one chunk object (store.md "Segments"): a writer begins a
 * new segment before any of its chunk objects would hold more than
 * RCKPT_STORE_SEGMENT_RECORDS, and `append` refuses a record past
 * RCKPT_STORE_OBJECT_RECORDS_MAX, the same (-EFBIG), so that what a method
 * reads of an object's index is bounded whatever the job's length (and
 * methods refuse an object of more index entries, however it was made). */
#define RCKPT_STORE_SEGMENT_RECORDS 1024u
/* Bytes one compact call may write to its object (the records it moves and
 * re-encodes; the OSD holds them in the operation's transaction): a
 * writer's segment cap is at most this, so compacting its objects never
 * passes it; an object that would is refused (-E2BIG). */
#define RCKPT_STORE_MOVE_MAX ((uint64_t)32 << 20)
#define RCKPT_STORE_OBJECT_RECORDS_MAX RCKPT_STORE_SEGMENT_RECORDS
#define RCKPT_STORE_CHAIN_REBASE 256u

/* Message types (cls-wire), pinned. */
enum rckpt_store_msg {
	RCKPT_MSG_APPEND = 0x0101,
	RCKPT_MSG_MATERIALIZE = 0x0102,
	RCKPT_MSG_MATERIALIZED = 0x0103,
	RCKPT_MSG_TRIM = 0x0104,
	RCKPT_MSG_COMMIT = 0x0105,
	RCKPT_MSG_HEAD = 0x0106,
	RCKPT_MSG_LIST = 0x0107,
	RCKPT_MSG_STEPS = 0x0108,
	RCKPT_MSG_INDEX = 0x0109,
	RCKPT_MSG_COMPACT = 0x010A,
	RCKPT_MSG_DROP = 0x010B,
	RCKPT_MSG_PIN = 0x010C,
	RCKPT_MSG_VERIFIED = 0x010D,
	RCKPT_MSG_CLAIM = 0x010E,
	RCKPT_MSG_RETIRE = 0x010F,
	RCKPT_MSG_PUT = 0x0110,
	RCKPT_MSG_VERIFY = 0x0111,
	RCKPT_MSG_REWIND = 0x0112,
};

#define RCKPT_STORE_STEPSET_MAX (1u << 20) /* steps in a COMPACT or DROP message */
#define RCKPT_STORE_DROP_MAX 1024u          /* steps one drop call forgets (-E2BIG past it) */

/* Each message is described once, by a field table (rckpt_wire_fields.h):
 * rckpt_store_msg(type) gives it; the functions below are its encoder and
 * decoder with the message's own arguments. The tables of every message
 * and of the index entry, for tests and tools: */
extern const rckpt_wire_msg_t *const rckpt_store_msgs[];
extern const unsigned rckpt_store_nmsgs;
const rckpt_wire_msg_t *rckpt_store_msg(uint16_t type);

/* append (chunk, write): one record, from the writer holding claim token
 * `writer` (nonzero), and optionally (head.len > 0, layout 4) a base
 * record of the same step, the chunk's head record (store.md "Head
 * records"). */
typedef struct rckpt_msg_append {
	uint64_t writer;
	rckpt_blob_t record;
	rckpt_blob_t head;
} rckpt_msg_append_t;
/* Without a head: the layout-2 frame, byte for byte as before. */
int rckpt_msg_append_encode(rckpt_buf_t *out, uint64_t writer, const uint8_t *record, size_t len);
/* With one (head.len > 0): layout 4, compat 2. */
int rckpt_msg_append_head_encode(rckpt_buf_t *out, const rckpt_msg_append_t *m);
int rckpt_msg_append_decode(rckpt_msg_append_t *m, const uint8_t *src, size_t len);

/* materialize (chunk, read): step, an element budget (0: the plugin's),
 * and optionally a base record of an earlier step of the same chain to
 * resume from (start.len 0: none). */
typedef struct rckpt_msg_materialize {
	uint64_t step;
	uint64_t budget;
	rckpt_blob_t start;
} rckpt_msg_materialize_t;

int rckpt_msg_materialize_encode(rckpt_buf_t *out, const rckpt_msg_materialize_t *m);
int rckpt_msg_materialize_decode(rckpt_msg_materialize_t *m, const uint8_t *src, size_t len);

/* its reply: the step reached (== the step asked for when done) and a base
 * record of it. */
typedef struct rckpt_msg_materialized {
	uint64_t reached;
	uint8_t done;
	rckpt_blob_t record;
} rckpt_msg_materialized_t;

int rckpt_msg_materialized_encode(rckpt_buf_t *out, const rckpt_msg_materialized_t *m);
int rckpt_msg_materialized_decode(rckpt_msg_materialized_t *m, const uint8_t *src, size_t len);

/* trim (chunk, write): drop every record of a step after `after`
 * (RCKPT_STORE_NONE: drop all), for the writer holding claim token
 * `writer` (nonzero). */
typedef struct rckpt_msg_trim {
	uint64_t writer, after;
} rckpt_msg_trim_t;
int rckpt_msg_trim_encode(rckpt_buf_t *out, uint64_t writer, uint64_t after);
int rckpt_msg_trim_decode(uint64_t *writer, uint64_t *after, const uint8_t *src, size_t len);

/* commit (job, write): move the head from `expect` to `step`, recording
 * `summary` (opaque to the plugin, <= RCKPT_STORE_SUMMARY_MAX bytes) for it;
 * `writer` is the committing writer's claim token (nonzero). */
typedef struct rckpt_msg_commit {
	uint64_t expect;
	uint64_t step;
	rckpt_blob_t summary;
	uint64_t writer;
} rckpt_msg_commit_t;

int rckpt_msg_commit_encode(rckpt_buf_t *out, const rckpt_msg_commit_t *m);
int rckpt_msg_commit_decode(rckpt_msg_commit_t *m, const uint8_t *src, size_t len);

/* head (job or chunk, read): the committed head (job) or the tip (chunk),
 * and how many steps are indexed; since version 2 (compat 1) the job's
 * reply carries the head's summary (empty: none, or one over
 * RCKPT_STORE_SUMMARY_MAX; a version-1 reply decodes with it empty). */
typedef struct rckpt_msg_head {
	uint64_t head;
	uint64_t count;
	rckpt_blob_t summary;
} rckpt_msg_head_t;

int rckpt_msg_head_encode(rckpt_buf_t *out, const rckpt_msg_head_t *m);
int rckpt_msg_head_decode(rckpt_msg_head_t *m, const uint8_t *src, size_t len);

/* list (job, read): steps after `after` (RCKPT_STORE_NONE: from the
 * first), at most `max`. The reply: steps with their summaries, and
 * whether more follow. */
typedef struct rckpt_msg_list {
	uint64_t after;
	uint32_t max;
} rckpt_msg_list_t;

int rckpt_msg_list_encode(rckpt_buf_t *out, const rckpt_msg_list_t *m);
int rckpt_msg_list_decode(rckpt_msg_list_t *m, const uint8_t *src, size_t len);

/* The reply (STEPS): a list of (step, summary) and whether more follow. */
typedef struct rckpt_msg_stepsum {
	uint64_t step;
	rckpt_blob_t summary;
} rckpt_msg_stepsum_t;
typedef struct rckpt_msg_steps {
	rckpt_wire_list_t steps; /* of rckpt_msg_stepsum_t */
	uint8_t more;
} rckpt_msg_steps_t;

/* It is written incrementally: begin, add each step, end. */
typedef struct rckpt_msg_steps_writer {
	rckpt_buf_t *out;
	size_t header_at, count_at;
	uint32_t n;
	int err;
} rckpt_msg_steps_writer_t;

void rckpt_msg_stepsum_begin(rckpt_msg_steps_writer_t *w, rckpt_buf_t *out);
void rckpt_msg_stepsum_add(rckpt_msg_steps_writer_t *w, uint64_t step, const uint8_t *summary,
			   size_t len);
int rckpt_msg_stepsum_end(rckpt_msg_steps_writer_t *w, int more);

/* Reading it: iterate with rckpt_msg_stepsum_next until it returns 0. */
typedef struct rckpt_msg_stepsum_reader {
	rckpt_wire_cursor_t c;
	uint8_t more;
} rckpt_msg_stepsum_reader_t;

int rckpt_msg_stepsum_open(rckpt_msg_stepsum_reader_t *r, const uint8_t *src, size_t len);
/* 1 with the next step, 0 at the end, -EBADMSG. */
int rckpt_msg_stepsum_next(rckpt_msg_stepsum_reader_t *r, uint64_t *step, rckpt_blob_t *summary);

/* A chunk's index entry for one step (omap value, and the `index` reply's
 * elements). */
typedef struct rckpt_store_entry {
	uint64_t step;
	uint64_t offset; /* of the record in the object's data */
	uint32_t length;
	uint8_t kind;    /* enum rckpt_record_kind */
	uint64_t parent; /* RCKPT_STORE_NONE for a base */
} rckpt_store_entry_t;

#define RCKPT_STORE_ENTRY_BYTES 29u

/* 0, or -EINVAL for an entry its table refuses. */
int rckpt_store_entry_put(uint8_t out[RCKPT_STORE_ENTRY_BYTES], const rckpt_store_entry_t *e);
extern const rckpt_wire_msg_t rckpt_store_entry_desc;
int rckpt_store_entry_get(rckpt_store_entry_t *e, const uint8_t *src, size_t len);

/* index (chunk, read; empty input): every entry, in step order. */
typedef struct rckpt_msg_index {
	rckpt_wire_list_t entries; /* of rckpt_store_entry_t */
} rckpt_msg_index_t;
int rckpt_msg_index_encode(rckpt_buf_t *out, const rckpt_store_entry_t *e, uint32_t n);
/* Allocates *e (free it); *n entries. */
int rckpt_msg_index_decode(rckpt_store_entry_t **e, uint32_t *n, const uint8_t *src, size_t len);

/* A set of steps inside a message, strictly increasing: a list whose
 * element is one u64 (decoded: step i at p + 8 i, little-endian; to
 * encode: v is a uint64_t array). */
typedef rckpt_wire_list_t rckpt_stepset_t;

uint64_t rckpt_stepset_at(const rckpt_stepset_t *s, uint32_t i);

/* The token of an actor that is not the writer (a compactor, a pinner) is
 * the job's writer token as it read it when it decided (0: none yet); the
 * plugin refuses the request once a newer writer has claimed the job or
 * touched the object (store.md "Fencing"). */

/* compact (chunk, write): rewrite the log so that its newest step <= upto
 * is a base and, of the steps <= upto, only those in keep (and that one)
 * remain restorable. */
typedef struct rckpt_msg_compact {
	uint64_t token;
	uint64_t upto;
	rckpt_stepset_t keep; /* every step <= upto */
} rckpt_msg_compact_t;

/* steps: n strictly increasing values (encoders check). */
int rckpt_msg_compact_encode(rckpt_buf_t *out, uint64_t token, uint64_t upto, const uint64_t *keep,
			     uint32_t n);
int rckpt_msg_compact_decode(rckpt_msg_compact_t *m, const uint8_t *src, size_t len);

/* drop (job, write): forget these committed steps (never the head or a
 * pinned step). */
typedef struct rckpt_msg_drop {
	uint64_t token;
	rckpt_stepset_t steps;
} rckpt_msg_drop_t;
int rckpt_msg_drop_encode(rckpt_buf_t *out, uint64_t token, const uint64_t *steps, uint32_t n);
int rckpt_msg_drop_decode(uint64_t *token, rckpt_stepset_t *s, const uint8_t *src, size_t len);

/* claim (job, write): the writer holding the lock takes the job from the
 * token `prev` it read (0: none) with `token` > prev; requests with an
 * older token are refused from here on (fencing). With
 * RCKPT_CLAIM_DELETE the claimer is deleting the job: the job refuses
 * every later claim that is not a deleter's, so no writer can take it
 * over while its objects go. */
#define RCKPT_CLAIM_DELETE 1u
typedef struct rckpt_msg_claim {
	uint64_t prev, token;
	uint8_t flags;
} rckpt_msg_claim_t;
int rckpt_msg_claim_encode(rckpt_buf_t *out, uint64_t prev, uint64_t token, unsigned flags);
int rckpt_msg_claim_decode(uint64_t *prev, uint64_t *token, unsigned *flags, const uint8_t *src,
			   size_t len);

/* retire (write): remove an object of the job for the actor holding
 * `token`. What it may remove: */
enum rckpt_retire_kind {
	RCKPT_RETIRE_STEP = 0,  /* the manifest or attachment of `step` (its magic and step) */
	RCKPT_RETIRE_CHUNK = 1, /* a chunk object (step RCKPT_STORE_NONE) */
	RCKPT_RETIRE_JOB = 2,   /* the job object, claimed for deletion by `token` */
};
typedef struct rckpt_msg_retire {
	uint64_t token;
	uint64_t step;
	uint8_t kind;
} rckpt_msg_retire_t;

int rckpt_msg_retire_encode(rckpt_buf_t *out, const rckpt_msg_retire_t *m);
int rckpt_msg_retire_decode(rckpt_msg_retire_t *m, const uint8_t *src, size_t len);

/* rewind (job, write): the writer holding `token`, which read the head
 * `expect`, moves the head back to committed step `step`, forgetting the
 * steps after it, at most RCKPT_STORE_REWIND_MAX per call (store.md
 * "Rewind"). */
#define RCKPT_STORE_REWIND_MAX 1024u
typedef struct rckpt_msg_rewind {
	uint64_t token, expect, step;
} rckpt_msg_rewind_t;
int rckpt_msg_rewind_encode(rckpt_buf_t *out, const rckpt_msg_rewind_t *m);
int rckpt_msg_rewind_decode(rckpt_msg_rewind_t *m, const uint8_t *src, size_t len);

/* pin (job, write): pin (on = 1) or unpin (on = 0) a committed step. */
typedef struct rckpt_msg_pin {
	uint64_t token, step;
	uint8_t on;
} rckpt_msg_pin_t;
int rckpt_msg_pin_encode(rckpt_buf_t *out, uint64_t token, uint64_t step, int on);
int rckpt_msg_pin_decode(uint64_t *token, uint64_t *step, int *on, const uint8_t *src, size_t len);

/* put (a step's manifest or attachment object, write): its whole content,
 * from the writer holding `token` (nonzero); `bytes` must be a manifest or
 * an attachment of `step`. Refused when a newer writer has put it. */
#define RCKPT_STORE_PUT_MAX ((uint64_t)80 << 20) /* bytes of one put (under osd_max_write_size) */
typedef struct rckpt_msg_put {
	uint64_t token, step;
	rckpt_blob_t bytes;
} rckpt_msg_put_t;
int rckpt_msg_put_encode(rckpt_buf_t *out, uint64_t token, uint64_t step, const uint8_t *bytes,
			 size_t len);
int rckpt_msg_put_decode(uint64_t *token, uint64_t *step, rckpt_blob_t *bytes, const uint8_t *src,
			 size_t len);

/* verify (chunk, read): the records of steps after `after`
 * (RCKPT_STORE_NONE: from the first; an empty input is that too), as many
 * as one call may read (the plugin's share: 64 MiB, and at least one). */
typedef struct rckpt_msg_verify {
	uint64_t after;
} rckpt_msg_verify_t;
int rckpt_msg_verify_encode(rckpt_buf_t *out, uint64_t after);
int rckpt_msg_verify_decode(uint64_t *after, const uint8_t *src, size_t len);

/* Its reply: what it found among the records it checked, and where to go
 * on from (`next`: the last step it checked; RCKPT_STORE_NONE when it
 * reached the end). Version 2 adds `next`; a version-1 reply (a plugin
 * that checks a chunk whole) decodes with next = RCKPT_STORE_NONE. */
typedef struct rckpt_msg_verified {
	uint32_t records; /* indexed and checked in this call */
	uint64_t bytes;   /* of records read and checked */
	uint32_t bad;     /* records that fail a check */
	uint64_t first_bad; /* its step; RCKPT_STORE_NONE if none */
	int32_t error;      /* its error (negative errno or RCKPT_ECHECKSUM) */
	uint64_t next;      /* the step to go on after; RCKPT_STORE_NONE: done */
} rckpt_msg_verified_t;

int rckpt_msg_verified_encode(rckpt_buf_t *out, const rckpt_msg_verified_t *m);
int rckpt_msg_verified_decode(rckpt_msg_verified_t *m, const uint8_t *src, size_t len);

/* Object names (NUL-terminated into out[cap]): the job object, a chunk, a
 * manifest. 0 or -ERANGE. */
#define RCKPT_STORE_JOB_OID "rckpt.job"
/* A chunk's object in the job's first segment: "rckpt.chunk.<c>". */
int rckpt_store_chunk_oid(char *out, size_t cap, uint32_t chunk);
/* A chunk's object in segment seg (store.md "Segments"): the first
 * segment's (seg RCKPT_STORE_NONE) is rckpt_store_chunk_oid's; a later one
 * is "rckpt.chunk.<c>.<seg>", seg the step that began it (20 digits). */
int rckpt_store_segment_oid(char *out, size_t cap, uint32_t chunk, uint64_t seg);
/* The inverse: 0 and the chunk and segment when oid names a chunk object
 * in either form, else -EINVAL. */
int rckpt_store_parse_chunk_oid(const char *oid, uint32_t *chunk, uint64_t *seg);
int rckpt_store_manifest_oid(char *out, size_t cap, uint64_t step);
/* The object of a step's attachment: "rckpt.attach.<step>". */
int rckpt_store_attach_oid(char *out, size_t cap, uint64_t step);
/* The object of chunk c's residual in exact step `step` (store.md "Exact
 * steps"): "rckpt.exact.<step>.<c>" (20 and 5 digits). */
int rckpt_store_exact_oid(char *out, size_t cap, uint64_t step, uint32_t chunk);
/* The inverse: 0 and the step and chunk when oid names one, else -EINVAL. */
int rckpt_store_parse_exact_oid(const char *oid, uint64_t *step, uint32_t *chunk);
/* omap keys: "r.<step>" (chunk index), "s.<step>" (job steps) and
 * "p.<step>" (job pins), the step
 * as 20 decimal digits so that keys sort as steps do. */
int rckpt_store_step_key(char *out, size_t cap, char prefix, uint64_t step);
int rckpt_store_parse_step_key(uint64_t *step, const char *key, char prefix);

/* A step's summary in the job object (store.md "Objects"), opaque to the
 * plugin. A client writes RCKPT_STORE_SUMMARY_BYTES; readers take the
 * fields a shorter one has (36 bytes: an earlier client's, in the first
 * segment, not exact; 48: written by one writer; 52: no optimizer state
 * counted apart) and ignore any that follow. */
#define RCKPT_STORE_SUMMARY_BYTES 68u
#define RCKPT_STORE_SUMMARY_V3_BYTES 52u
#define RCKPT_STORE_SUMMARY_V2_BYTES 48u
#define RCKPT_STORE_SUMMARY_V1_BYTES 36u
#define RCKPT_SUMMARY_EXACT 1u  /* flags: the step is stored bit-exact */
#define RCKPT_SUMMARY_ATTACH 2u /* flags: the step has an attachment (a first-layout
				   summary may: readers look for one) */
#define RCKPT_SUMMARY_LAYOUT 4u /* flags: the step's tensors differ from the step
				   before it: a new chunk layout, a new segment */
typedef struct rckpt_store_summary {
	uint64_t raw_bytes; /* of the step's tensors as fp32 */
	uint64_t enc_bytes; /* stored: records, manifest, attachment */
	uint64_t parent;    /* the manifest's parent step; RCKPT_STORE_NONE: a base */
	uint32_t nchunks;
	double quality;     /* the compressor's loss measure */
	uint64_t segment;   /* the segment holding its records */
	uint32_t flags;     /* RCKPT_SUMMARY_* */
	uint32_t ranks;     /* the ranks of the group that saved it; 0: one writer */
	uint64_t opt_raw_bytes; /* the optimizer state's share of raw_bytes */
	uint64_t opt_enc_bytes; /* ... and the bytes of the records of its chunks */
} rckpt_store_summary_t;

void rckpt_store_summary_put(uint8_t out[RCKPT_STORE_SUMMARY_BYTES], const rckpt_store_summary_t *s);
/* 0, or -EBADMSG for a summary shorter than the first layout's. */
int rckpt_store_summary_get(rckpt_store_summary_t *s, const uint8_t *p, size_t len);

/* A step's attachment (store.md, "Attachment"): bytes the trainer keeps
 * with a step (optimizer state, counters), zstd-compressed, CRC-32C of the
 * raw bytes. The plugin never reads it. */
#define RCKPT_ATTACH_MAGIC 0x414b4352u          /* "RCKA" as little-endian bytes */
#define RCKPT_ATTACH_HEADER 28u
#define RCKPT_ATTACH_RAW_MAX ((uint64_t)1 << 30) /* raw bytes */

/* 0, -EFBIG (len past RCKPT_ATTACH_RAW_MAX), -ENOMEM. */
int rckpt_attach_encode(rckpt_buf_t *out, uint64_t step, const void *data, size_t len);
/* Checks src (untrusted) and decompresses it into a malloc'd *out (*len
 * bytes; a 1-byte allocation when empty). 0, -EBADMSG (not an attachment,
 * or of another step), RCKPT_FMT_EVERSION, RCKPT_FMT_ECHECKSUM, -ENOMEM. */
int rckpt_attach_decode(uint8_t **out, size_t *len, uint64_t step, const uint8_t *src,
			size_t srclen);

/* A chunk's residual in an exact step (store.md "Exact steps"): the raw
 * bytes of an attachment-format object (the envelope's step is the
 * step's), a 72-byte header then the byte planes. */
#define RCKPT_EXACT_MAGIC 0x584b4352u /* "RCKX" as little-endian bytes */
#define RCKPT_EXACT_HEADER 72u

#endif /* RCKPT_STORE_WIRE_H */
