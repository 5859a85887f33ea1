/*
 * rckpt_store_internal.h — what the store's client files share: the job
 * handle and the calls on its objects. Internal to librckpt.
 */
#ifndef RCKPT_STORE_INTERNAL_H
#define RCKPT_STORE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_ckenc.h"
#include "rckpt_internal.h"
#include "rckpt_io.h"
#include "rckpt_layout.h"
#include "rckpt_store_wire.h"

#define LOCK_NAME "rckpt.writer"
#define LOCK_COOKIE_MAX 96
#define SUMMARY_BYTES RCKPT_STORE_SUMMARY_BYTES
/* A segment's cap when the job names none, and what the OSDs' largest
 * object must leave over it (store.md "Segments"). */
#define SEGMENT_BYTES_DEFAULT RCKPT_STORE_MOVE_MAX /* what one compact call may move */

/* Objects past this size are refused by the OSD's osd_max_write_size
 * (90 MiB by default) in one write_full: attachments stay under it. */
#define ATTACH_STORED_MAX ((size_t)64 << 20)

/* The roles a writer declared (rckpt_job_set_roles), sorted by name. */
typedef struct rckpt_role_ent {
	char *name;
	unsigned role;
	char *param;
	double eps;
} rckpt_role_t;

typedef struct rckpt_roles {
	rckpt_role_t *r;
	unsigned n;
} rckpt_roles_t;

/* A copy of r[0..n) into *out (replacing it): 0, -EINVAL (msg says why),
 * -ENOMEM; *out unchanged on failure. */
int rckpt_roles_set(rckpt_roles_t *out, const rckpt_tensor_role_t *r, unsigned n, char *msg,
		    size_t msglen);
void rckpt_roles_free(rckpt_roles_t *r);
/* Gives ts's declared tensors their kinds, params and eps (borrowed from r). */
void rckpt_roles_apply(const rckpt_roles_t *r, rckpt_tset_t *ts);

struct rckpt_job {
	rckpt_t *h;
	rckpt_io_t *io;     /* the job's namespace */
	char name[64];
	rckpt_job_opts_t o;
	atomic_int locked;  /* read and cleared by rckpt_job_release from any thread */
	int lazy;           /* writer of a job that did not exist at open: it
			       locks and claims at its first write */
	char cookie[LOCK_COOKIE_MAX];
	rckpt_ckenc_t *enc; /* writer: the encoder across saves */
	uint64_t head;      /* writer: the head it last saw or moved */
	int trimmed;        /* writer: uncommitted records dropped */
	int resume_tried;   /* writer: the head was offered to the encoder */
	atomic_int resumed; /* writer: its resume is recorded, or it has saved (a
			       save may finish on another thread): a restore
			       now is not a resume */
	struct rckpt_save *pending; /* writer: the save in flight, if any, */
	void (*pending_finish)(struct rckpt_save *);  /* committed (or failed) first, */
	void (*pending_abandon)(struct rckpt_save *); /* or dropped when the job closes */
	uint64_t io_budget; /* writer: bytes of appends a save may have in flight */
	uint64_t token;     /* writer: its claim on the job (fencing) */
	struct rckpt_gpuenc *gpu; /* writer: made at its first save on the GPU */
	rckpt_buf_t attach; /* writer: the next save's attachment, encoded
			       (store.md), its step filled in at the save */
	/* writer: the segment it appends to (store.md "Segments") */
	uint64_t seg_cap;    /* a chunk object of a segment stays under it */
	uint64_t seg;        /* the segment (RCKPT_STORE_NONE: the first) */
	uint64_t *seg_bytes; /* chunk c's object in seg: its bytes, [0, seg_n) */
	uint64_t *rec_max;   /* chunk c's largest record this writer appended */
	uint64_t *head_bytes; /* chunk c's head record this writer appended (in
				 seg_bytes until the next append replaces it) */
	unsigned seg_n;
	uint64_t seg_records; /* records each chunk object of seg holds */
	int seg_known;       /* seg and seg_bytes are as stored */
	int exact;           /* writer: its saves store their steps bit-exact */
	rckpt_roles_t roles; /* writer: its saves' optimizer tensors */
	int fold;            /* where restores fold chains: enum rckpt_fold */
	char fold_why[160];  /* why in the client */
	unsigned class_records; /* writer: the newest record version the OSDs'
				   class reads; 0 until asked, UINT_MAX when
				   it did not say */
	unsigned since_compact; /* writer: saves committed since it last
				   compacted (o.compact_every) */
	int relayout_pending; /* writer: its next save begins a segment: 1 a
				 save that began one failed, or the head's
				 tensors are unknown to it; 2 a save of other
				 tensors than the head's failed (the next is
				 marked a new layout too) */
};

/* ---- rckpt_fold.c (store.md "Restore without the plugin") ---- */

enum rckpt_fold { RCKPT_FOLD_UNKNOWN = 0, RCKPT_FOLD_OSD = 1, RCKPT_FOLD_CLIENT = 2 };

/* Decides j->fold once: RCKPT_FOLD (auto, osd, client) in the environment,
 * else whether the OSDs' rckpt class answers and reads this client's
 * records. 0, or an error that leaves it undecided. */
int rckpt_fold_decide(rckpt_job_t *j);
/* The same in two halves, so that the OSDs' answer comes beside other
 * calls: ask starts the probe when a decision is still to make (a->c
 * NULL when none is); decide_asked takes its answer (or decides as
 * rckpt_fold_decide when nothing was asked) and frees what ask held. */
typedef struct rckpt_fold_ask {
	rckpt_aio_t *c;
	rckpt_buf_t out;
} rckpt_fold_ask_t;
void rckpt_fold_ask(rckpt_job_t *j, rckpt_fold_ask_t *a);
int rckpt_fold_decide_asked(rckpt_job_t *j, rckpt_fold_ask_t *a);
/* What ask started, ended and freed, undecided (a failed restore). */
void rckpt_fold_ask_drop(rckpt_job_t *j, rckpt_fold_ask_t *a);
/* The newest chunk record version the OSDs' rckpt class reads (its
 * `version` answer's ckpt-record range), asked on the job object and kept
 * for the handle once the class answers or is known missing; UINT_MAX
 * (asked again next time) while there is no job object or no answer, so
 * a writer writes what it always would and the append says the rest. */
unsigned rckpt_class_records(rckpt_job_t *j);
/* Whether an OSD's answer to a class call says it will not run it: the
 * class is missing or not permitted. (One that fails to load answers
 * -EIO, which a damaged object may answer too: rckpt_fold_decide's probe
 * tells them apart.) */
int rckpt_fold_refused(int rc);
/* A read method of the rckpt class (materialize, index, verify, head,
 * list, tip) run here
 * on oid as the OSD would run it: its reply appended to out. */
int rckpt_fold_exec(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in,
		    rckpt_buf_t *out);


/* A read method's reply appended to out; a write method (no reply). */
int rckpt_exec_read(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in,
		    rckpt_buf_t *out);
int rckpt_exec_write(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in);

/* Chunk c's record of step s in segment seg, materialized (the OSD's
 * materialize, resumed until done): a base, into rec. */
int rckpt_chunk_base(rckpt_job_t *j, uint64_t seg, unsigned c, uint64_t s, rckpt_buf_t *rec);

/* Object oid's data, at most max bytes (-EFBIG past it), into b (its
 * bytes replaced). */
int rckpt_read_object(rckpt_job_t *j, const char *oid, uint64_t max, rckpt_buf_t *b);

/* Writes step's object oid (a manifest, attachment or residual: the
 * whole object) through the plugin's `put`, with j's token, so that a late
 * write of a writer whose lease lapsed cannot replace what its successor
 * wrote (store.md "Fencing"). */
int rckpt_put_object(rckpt_job_t *j, const char *oid, uint64_t step, const rckpt_buf_t *b);

/* The committed head and step count; RCKPT_STORE_NONE and 0 for a new job. */
int rckpt_read_head(rckpt_job_t *j, uint64_t *head, uint64_t *count);
/* The same, and the head's summary into *sum with *have 1 when the reply
 * held one (a class of head version 2); else *have 0. */
int rckpt_read_head_summary(rckpt_job_t *j, uint64_t *head, uint64_t *count, rckpt_store_summary_t *sum,
			    int *have);
/* rckpt_job_steps, and each step's segment into segs[] when not NULL. */
int rckpt_list_steps(rckpt_job_t *j, uint64_t after, rckpt_step_info_t *out, uint64_t *segs,
		     unsigned cap, unsigned *n, int *more);
/* A listed step's summary (-ENOENT: not listed). */
int rckpt_step_summary(rckpt_job_t *j, uint64_t step, rckpt_store_summary_t *s);

/* n little-endian u64s of the job object's omap key into v[0..n):
 * 0, -ENOENT (no such key or object), -EBADMSG (not 8n bytes; v
 * untouched), or a RADOS error. */
int rckpt_read_u64s(rckpt_job_t *j, const char *key, uint64_t *v, unsigned n);
/* The job's writer token as it is now (0: never claimed): the token of an
 * actor that is not the writer (store.md "Fencing"). */
int rckpt_read_writer(rckpt_job_t *j, uint64_t *token);
/* rckpt_job_open, a writer's claim with these flags (RCKPT_CLAIM_DELETE:
 * rm's). */
int rckpt_job_open_claim(rckpt_t *h, rckpt_job_t **out, const char *job,
			 const rckpt_job_opts_t *opts, unsigned claim_flags);
/* Chunk `chunk`'s index in segment seg: the entries of the steps it holds
 * records of, in step order (none when the object does not exist). */
int rckpt_chunk_index(rckpt_job_t *j, uint64_t seg, unsigned chunk, rckpt_store_entry_t **e,
		      uint32_t *n);
/* The records of step's chain in chunk 0 of segment seg, from its base
 * through it: what a writer that continues the chain adds to. */
int rckpt_chain_depth(rckpt_job_t *j, uint64_t seg, uint64_t step, unsigned *depth);

/* ---- rckpt_exact.c (store.md "Exact steps") ---- */

/* The residual object of chunk `chunk` of exact step `step`: from the
 * chunk's encoded base record rec[0..len) and the trainer's tensors
 * (host memory), appended to out; nothing when the chunk has no quantized
 * segment. pieces (NULL: the record's own tensors and offsets index
 * params): the chunk's pieces in params' terms, a group save's part. 0, -EINVAL (the record is not of these tensors),
 * -EBADMSG, -ENOMEM. */
int rckpt_exact_build(rckpt_buf_t *out, uint64_t step, uint32_t chunk, const uint8_t *rec,
		      size_t len, const rckpt_tset_t *params, const rckpt_piece_t *pieces);
/* Whether decoded record rec has a quantized segment (a residual). */
int rckpt_exact_quantized(const rckpt_record_t *rec);
/* Makes decoded chunk rec of step (manifest mf) exact with its residual
 * object obj[0..len) (untrusted): each quantized segment becomes a
 * lossless one holding the saved bits, once their SHA-256 matches; on
 * failure rec is unchanged. 0, -EBADMSG, RCKPT_FMT_ECHECKSUM,
 * RCKPT_FMT_EVERSION, -ENOMEM. */
int rckpt_exact_apply(rckpt_record_t *rec, const rckpt_manifest_t *mf, uint64_t step,
		      uint32_t chunk, const uint8_t *obj, size_t len);

/* ---- rckpt_branch.c ---- */

/* Copies src's listed steps in [from, upto] into the new job dst_name
 * (store.md "Branches"); *copied gets how many. */
int rckpt_branch_copy(rckpt_job_t *src, uint64_t from, uint64_t upto, const char *dst_name,
		      unsigned *copied);
/* Notes in j's job object, under key, a branch: job's steps [from, upto]. */
int rckpt_branch_note(rckpt_job_t *j, const char *key, const char *job, uint64_t from, uint64_t upto);

/* A writer claims the job again, under a newer token (store.md "Rewind"):
 * requests of actors that read the older one are refused from then on on
 * whatever the writer touches. */
int rckpt_job_reclaim(rckpt_job_t *j);
/* The rewind calls of j's writer to step (store.md "Rewind"), until the
 * head is there and no summary of the old line is left. */
int rckpt_job_rewind_calls(rckpt_job_t *j, uint64_t step);

/* A writer's encoder, made from the job's options. */
int rckpt_job_encoder(rckpt_job_t *j, rckpt_ckenc_t **out);
/* The same for a group save's part: its chunks are `layout`'s (copied at
 * the encoder's first step). */
int rckpt_job_encoder_for(rckpt_job_t *j, const rckpt_layout_t *layout, rckpt_ckenc_t **out);

/* A writer's hold on the job before it writes: the lock taken and the
 * job claimed when this writer has not yet (a lazy open), else the lock's
 * lease renewed. 0, or the error with the handle's message set (fn named). */
int rckpt_job_hold(rckpt_job_t *j, const char *fn);

/* ---- rckpt_holder.c (store.md "Takeover") ---- */

/* This process's lock cookie: its machine's boot, PID namespace, pid and
 * the pid's start time, and client_id. */
void rckpt_holder_cookie(char *out, size_t cap, uint64_t client_id);
/* 1 when the process that made cookie is sure to have exited (it was of
 * this boot and PID namespace, and that pid is gone or started at another
 * time); else 0. what gets a description of the holder. */
int rckpt_holder_gone(const char *cookie, char *what, size_t cap);

/* Grows the writer's per-chunk segment arrays (seg_bytes, rec_max,
 * head_bytes) to n chunks, the new ones empty (rckpt_save.c). */
int rckpt_seg_grow(rckpt_job_t *j, unsigned n);

/* Runs write method `method` on the chunk objects [0, n) of segment seg,
 * `inflight` at a time: msgs[i] is chunk i's input, or msgs[0] for all
 * when `same`. */
int rckpt_chunk_writes(rckpt_job_t *j, uint64_t seg, const char *method, const rckpt_buf_t *msgs,
		       int same, unsigned n);
/* The same; *failed: the chunk of the first call that failed. */
int rckpt_chunk_writes_at(rckpt_job_t *j, uint64_t seg, const char *method, const rckpt_buf_t *msgs,
			  int same, unsigned n, unsigned *failed);

/* ---- rckpt_store_admin.c: what compaction (rckpt_compact.c) takes ---- */

/* Every listed step of a job, with the segment of its records. */
typedef struct steps {
	rckpt_step_info_t *s;
	uint64_t *seg; /* the segment of each step's records */
	unsigned n;
	size_t cap, segcap;
} rckpt_steps_t;

/* A segment (store.md "Segments") as the listed steps show it: the
 * steps [first, first + n) of a rckpt_steps_t hold their records in it, and it
 * has as many chunk objects as the most any of them has. */
typedef struct segrun {
	uint64_t seg;
	unsigned first, n, nchunks;
} rckpt_segrun_t;

int rckpt_steps_all(rckpt_job_t *j, rckpt_steps_t *out); /* on failure out holds nothing */
void rckpt_steps_free(rckpt_steps_t *s);
const rckpt_step_info_t *rckpt_steps_find(const rckpt_steps_t *s, uint64_t step); /* or NULL */
int rckpt_steps_has(const rckpt_steps_t *s, uint64_t step);
/* Forgets steps v[0..n) (the plugin's drop, with token). */
int rckpt_steps_drop(rckpt_job_t *j, uint64_t token, const uint64_t *v, unsigned n);
/* The segments of s's steps, in step order, into *out (free it). */
int rckpt_seg_runs(const rckpt_steps_t *s, rckpt_segrun_t **out, unsigned *n);
unsigned rckpt_chunk_count(const rckpt_steps_t *s);
/* The bytes the chunk objects of s's segments hold, and their count. */
int rckpt_chunk_bytes(rckpt_job_t *j, const rckpt_steps_t *s, uint64_t *sum, unsigned *objects);
/* Removes object oid through the plugin's `retire` for the actor holding
 * token: 0 when it is gone (or was never there). */
int rckpt_retire(rckpt_job_t *j, const char *oid, uint64_t token, uint64_t step, unsigned kind);
/* Retires the residuals of exact step si. */
int rckpt_retire_exact(rckpt_job_t *j, uint64_t token, const rckpt_step_info_t *si);
/* The job's pinned steps, sorted, into *pins (free it). */
int rckpt_pins_read(rckpt_job_t *j, uint64_t **pins, unsigned *n);

/* ---- rckpt_segment.c ---- */

/* Compacts the chunks of segment seg up to step `end` (the head, or the
 * segment's newest kept step), keeping keep[0, nk) (its kept steps,
 * ascending), in stages of at most a segment's records, each within an
 * OSD call's bound (per: the elements of the job's largest chunk); token:
 * the compactor's, or the writer's own. 0 or the error, the message set. */
int rckpt_segment_compact(rckpt_job_t *j, uint64_t seg, unsigned nchunks, uint64_t token, uint64_t end,
			  const uint64_t *keep, unsigned nk, uint64_t per, rckpt_compact_stats_t *st);
/* Elements of the largest chunk of step's manifest into *most (0: no
 * manifest). 0, or the read's or the decoder's error. */
int rckpt_largest_chunk(rckpt_job_t *j, uint64_t step, uint64_t *most);
/* Before a writer trims what lies past the head in the head's segment:
 * where compaction left a listed step at or before the head as a delta on
 * a step past it (a rewind onto a compacted line), chunk `chunk` of
 * segment seg is compacted up to the head first (token: the writer's),
 * so that the trim takes no record a listed step needs: one OSD call, or
 * as many as the head's chain there needs to stay within what one call
 * may fold (each makes a step of it nearer the head a base). 0 or the
 * error. */
int rckpt_chunk_rebase(rckpt_job_t *j, uint64_t seg, uint32_t chunk, uint64_t head, uint64_t token);
/* The same for every chunk of the head's segment (a writer's first save,
 * gc). 0 or the error, the handle's message set. */
int rckpt_head_rebase(rckpt_job_t *j, uint64_t head);

/* ---- rckpt_restore.c ---- */

struct rckpt_restored {
	uint64_t step;
	rckpt_ckdec_t dec;
	uint8_t *attach; /* the step's attachment, decompressed; NULL: none */
	size_t attach_len;
	int exact;       /* the tensors read are the saved bits */
};

/* What rckpt_restore_sel reads besides the chunks. */
enum { RCKPT_RESTORE_ATTACH = 1, RCKPT_RESTORE_EXACT = 2 };

/* Restores step (all of it, or the chunks holding names or ranges); with
 * `what` (RCKPT_RESTORE_*) the step's attachment, and the saved bits of an
 * exact step. fn names the caller in errors. */
int rckpt_restore_sel(rckpt_job_t *j, uint64_t step, const char *const *names, unsigned nnames,
		      const rckpt_range_t *ranges, unsigned nranges, rckpt_restored_t **outp,
		      rckpt_restore_stats_t *rst, unsigned what, const char *fn);

#endif /* RCKPT_STORE_INTERNAL_H */
