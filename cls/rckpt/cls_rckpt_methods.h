/*
 * cls_rckpt_methods.h — C bodies of the `rckpt` object class (checkpoints).
 */
#ifndef RCKPT_CLS_RCKPT_METHODS_H
#define RCKPT_CLS_RCKPT_METHODS_H

#include "cls_common.h"

/* version (RD) — Input: empty. Output: a version frame (formats/cls-wire.md).
 * Returns 0, or -EINVAL when the input is not empty. */
int cls_rckpt_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* ping (RD) — Input: empty. Output: empty. Touches nothing: the floor under
 * every method, for benchmarks. Returns 0 or -EINVAL. */
int cls_rckpt_ping(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* The store's methods (formats/store.md). Write methods (WR) reply with
 * nothing: the OSD drops a write's output; clients read results back. A
 * malformed request is -EINVAL; stored bytes that fail their checks are
 * -EBADMSG (or RCKPT_FMT_ECHECKSUM for a record whose CRC fails). */

/* append (RD|WR, chunk) — Input: an APPEND frame holding one chunk record.
 * Checks the record's header and CRC; a delta's parent must be the tip.
 * Appends it to the data and indexes it ("r.<step>", "tip").
 * Returns 0, -EINVAL, -EEXIST (step not after the tip), -ESTALE (delta
 * whose parent is not the tip), -EFBIG (object would pass 1 GiB),
 * RCKPT_FMT_EVERSION (a record kind or version this plugin cannot store). */
int cls_rckpt_append(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* materialize (RD, chunk) — Input: a MATERIALIZE frame (step, budget of
 * decoded elements, optional base record to resume from). Output: a
 * MATERIALIZED frame: a base record of the step reached, done = reached is
 * the step. Folds base + deltas; stops once the budget is spent (after at
 * least one delta), so one call stays bounded; the caller resumes by
 * sending the reply's record back. A step stored as a base is answered
 * with its record as stored (CRC checked), without decoding it. Returns 0, -EINVAL, -ENOENT (step not
 * in this chunk), -EBADMSG, RCKPT_FMT_ECHECKSUM, -E2BIG, -ENOMEM. */
int cls_rckpt_materialize(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len,
			  rckpt_cls_out_t *out);

/* index (RD, chunk) — Input: empty. Output: an INDEX frame, every entry in
 * step order (for client-side reads and for tools). */
int cls_rckpt_index(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* trim (RD|WR, chunk) — Input: a TRIM frame (after). Drops every record of
 * a later step, truncates the data after the last one kept, resets the
 * tip. Idempotent. Returns 0, -EINVAL, -EBADMSG. */
int cls_rckpt_trim(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* tip (RD, chunk) — Input: empty. Output: a HEAD frame (tip, entries). */
int cls_rckpt_tip(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* head (RD, job) — Input: empty. Output: a HEAD frame (committed head,
 * steps committed); RCKPT_STORE_NONE and 0 for a new job. */
int cls_rckpt_head(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* commit (RD|WR, job) — Input: a COMMIT frame (expected head, step,
 * summary, writer token). Compare-and-set: moves the head to step and
 * records the summary when the head is the expected one and the token is
 * the last claimed (or none was). Returns 0, -EINVAL (malformed, or step
 * not after the head), -ESTALE (the head is not the expected, or another
 * writer claimed the job). */
int cls_rckpt_commit(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* claim (RD|WR, job) — Input: a CLAIM frame (prev, token, flags).
 * Compare-and-set of the job's writer token ("writer") from prev to token;
 * requests carrying an older token are refused from then on, so a writer
 * whose lock lapsed (paused, partitioned) cannot change what its successor
 * wrote. A deleter's claim (RCKPT_CLAIM_DELETE) also marks the job
 * "deleting": later claims and commits that are not a deleter's are
 * refused. Returns 0, -EINVAL, -ESTALE (writer is not prev), -EIDRM (the
 * job is being deleted). */
int cls_rckpt_claim(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* list (RD, job) — Input: a LIST frame (after, max <= 1024). Output: a
 * STEPS frame: committed steps after `after` with their summaries, in
 * order, and whether more follow. */
int cls_rckpt_list(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* rewind (RD|WR, job) — Input: a REWIND frame (the writer's token, the
 * head it read, a committed step). Forgets the listed steps after the step, at most
 * RCKPT_STORE_REWIND_MAX per call, and once none is left moves the head
 * to it (the caller calls again until the head is there). Returns 0,
 * -EINVAL, -ESTALE (not the job's writer token, or the head is
 * not the one expected: a late request), -EIDRM (being deleted),
 * -ENOENT (the step is not listed), -EBUSY (a pinned step after it;
 * nothing changed). */
int cls_rckpt_rewind(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* compact (RD|WR, chunk) — Input: a COMPACT frame (token, upto, steps to
 * keep); -ESTALE when a writer newer than the token has touched the chunk.
 * Rewrites the log in one operation: of the steps <= upto, the kept ones
 * (those asked for, the newest, and any a later record applies to) stay
 * and the others go; the newest kept step becomes a base and each older
 * kept step (bases included) a delta on the next kept one, or a base where
 * its layout differs from that one's. Later records are copied as they
 * are. Copies what is already in shape, so a repeat changes nothing.
 * Returns 0, -EINVAL, -EBADMSG, RCKPT_FMT_ECHECKSUM (a damaged record:
 * nothing changes), -E2BIG, -EFBIG, -ENOMEM. */
int cls_rckpt_compact(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* verify (RD, chunk) — Input: empty. Output: a VERIFIED frame: records
 * indexed, bytes checked, how many fail (range, header, CRC, a parent that
 * is gone) and the first of them. Returns 0, -EINVAL, -EBADMSG (index). */
int cls_rckpt_verify(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* drop (RD|WR, job) — Input: a DROP frame (token, steps). Forgets each
 * listed step ("s.<step>") except the head and pinned steps; steps not
 * listed are skipped. Returns 0, -EINVAL, -E2BIG (more than
 * RCKPT_STORE_DROP_MAX steps), -ESTALE (a newer writer claimed the job). */
int cls_rckpt_drop(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* pin (RD|WR, job) — Input: a PIN frame (token, step, on). Pins
 * ("p.<step>") a listed step so that retention keeps it, or unpins it.
 * Returns 0, -EINVAL, -ENOENT (pinning a step that is not listed),
 * -ESTALE (a newer writer claimed the job). */
int cls_rckpt_pin(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* retire (RD|WR, an object of the job) — Input: a RETIRE frame (token,
 * step, kind). Removes, so that compaction, gc and rm need no plain write
 * access: a step's manifest or attachment (its magic and step), a chunk
 * (never a job object), or the job object once its deleter (this token)
 * has removed the rest. The object's own token (manifests, attachments,
 * chunks: "writer") must not be newer. Returns 0, -EINVAL (another object,
 * another step), -EACCES (a job object as a chunk), -ESTALE, -ENOENT. */
int cls_rckpt_retire(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* put (RD|WR, a step's manifest or attachment) — Input: a PUT frame
 * (token, step, bytes <= RCKPT_STORE_PUT_MAX). Replaces the object's data
 * with the bytes, which must be a manifest or an attachment of that step,
 * and records the token ("writer"). The object must be new or already one
 * of that step's, never another object of the pool. Returns 0, -EINVAL,
 * -ESTALE (a newer writer put it). */
int cls_rckpt_put(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

#endif
