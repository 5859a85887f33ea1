/*
 * rckpt_segment.c — one segment's chunks compacted up to a step, in stages
 * that each OSD call can do within its bound (formats/store.md
 * "Compaction"): what compaction does to every segment it keeps
 * (rckpt_compact.c), and what a writer does to the head's segment before
 * it trims past the head (a rewind onto a compacted line).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_clock.h"
#include "rckpt_manifest.h"
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

#define COMPACT_STRIDE RCKPT_STORE_SEGMENT_RECORDS /* records a compact call folds at
			   * most, per stage (what the plugin caches); fewer by their
			   * elements, and when the plugin says a stage is more than one
			   * call may do */
#define COMPACT_CALL_WORK ((uint64_t)32 << 20) /* elements a stage aims at: ~100 ms */

/* Compacts the chunks of one segment up to step `end` (the head, or the
 * segment's newest kept step), keeping keep[0, nk) (its kept steps), in
 * stages: from chunk 0's first record that a writer left (a delta on an
 * earlier step: what compaction has not reshaped yet), at most
 * COMPACT_STRIDE records each, the last one at `end`. */
int rckpt_segment_compact(rckpt_job_t *j, uint64_t seg, unsigned nchunks, uint64_t token,
			   uint64_t end, const uint64_t *keep, unsigned nk, uint64_t per,
			   rckpt_compact_stats_t *st)
{
	rckpt_store_entry_t *ix = NULL;
	uint32_t nix = 0, from, at, stride;
	int rc;

	if ((rc = rckpt_chunk_index(j, seg, 0, &ix, &nix)))
		return rckpt_fail(j->h, rc, "rckpt_job_compact", "cannot read the index of job %s", j->name);
	from = nix;
	for (at = 0; at < nix && ix[at].step <= end; at++)
		if (ix[at].kind != RCKPT_REC_BASE && ix[at].parent < ix[at].step) {
			from = at;
			break;
		}
	{
		/* stages of about COMPACT_CALL_WORK elements: a stage of s
		 * records folds and encodes about 2 s + 1 of them, each of at
		 * most `per` elements (the job's largest chunk) */
		if (per == 0)
			per = j->o.chunk_params ? j->o.chunk_params : 1;
		stride = COMPACT_CALL_WORK / (2 * per) < COMPACT_STRIDE ? (uint32_t)(COMPACT_CALL_WORK / (2 * per))
									: COMPACT_STRIDE;
		if (stride == 0)
			stride = 1;
	}
	/* none: everything up to `end` is in shape, one stage at it */
	for (;;) {
		uint64_t upto = end;
		rckpt_buf_t in = RCKPT_BUF_INIT;
		unsigned nkeep = 0;
		double c0 = rckpt_now_s(), dt;
		if (from < nix && from + stride < nix && ix[from + stride].step < end)
			upto = ix[from + stride].step;
		while (nkeep < nk && keep[nkeep] <= upto)
			nkeep++;
		rc = rckpt_msg_compact_encode(&in, token, upto, keep, nkeep);
		if (rc == 0)
			rc = rckpt_chunk_writes(j, seg, "compact", &in, 1, nchunks);
		rckpt_buf_free(&in);
		if (rc == -E2BIG && stride > 1 && (upto != end || from < nix)) {
			stride /= 2; /* more than one call may do: a shorter stage */
			continue;
		}
		if (rc) {
			rc = rckpt_fail(j->h, rc, "rckpt_job_compact", "cannot compact job %s up to step %" PRIu64 "%s",
					j->name, upto, rc == RCKPT_ECHECKSUM ? " (a damaged record: run verify)" : "");
			break;
		}
		st->stages++;
		dt = rckpt_now_s() - c0;
		if (dt > st->max_call_seconds)
			st->max_call_seconds = dt; /* every chunk's call ran within it */
		if (upto == end)
			break;
		from += stride;
	}
	free(ix);
	return rc;
}

/* Elements of the largest chunk of step's manifest into *most (0: no
 * manifest): what a record of the job holds at most, to size
 * compaction's stages. 0, or the read's or the decoder's error. */
int rckpt_largest_chunk(rckpt_job_t *j, uint64_t step, uint64_t *most)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_manifest_t mf;
	char oid[64];
	uint32_t c;
	int rc;
	*most = 0;
	memset(&mf, 0, sizeof(mf));
	rckpt_store_manifest_oid(oid, sizeof(oid), step);
	rc = rckpt_read_object(j, oid, (uint64_t)64 << 20, &b);
	if (rc == 0 && (rc = rckpt_manifest_decode(&mf, b.p, b.len)) == 0)
		for (c = 0; c < mf.nchunks; c++)
			if (mf.chunk[c].elements > *most)
				*most = mf.chunk[c].elements;
	rckpt_manifest_free(&mf);
	rckpt_buf_free(&b);
	return rc == -ENOENT ? 0 : rc;
}

int rckpt_head_rebase(rckpt_job_t *j)
{
	rckpt_store_summary_t sum, si;
	rckpt_store_entry_t *ix = NULL;
	rckpt_compact_stats_t st;
	uint64_t *keep = NULL, per = 0;
	uint32_t nix = 0, i;
	unsigned nk = 0;
	int rc, needed = 0;

	if (j->head == RCKPT_STORE_NONE)
		return 0;
	if ((rc = rckpt_step_summary(j, j->head, &sum)))
		return rckpt_fail(j->h, rc, __func__, "cannot read step %" PRIu64 " of job %s", j->head, j->name);
	/* what compaction wrote: a kept step a delta on the next kept one */
	rc = rckpt_chunk_index(j, sum.segment, 0, &ix, &nix);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rckpt_fail(j->h, rc, __func__, "cannot read the index of job %s", j->name);
	for (i = 0; i < nix; i++)
		if (ix[i].step <= j->head && ix[i].kind != RCKPT_REC_BASE && ix[i].parent > j->head &&
		    ix[i].parent != RCKPT_STORE_NONE)
			needed = 1;
	/* the listed steps of the segment (a summary naming it; at most the
	 * records a segment holds) stay: the head becomes a base, each before
	 * it a delta on the next */
	if (needed && (keep = calloc(nix ? nix : 1, sizeof(*keep))) == NULL)
		rc = -ENOMEM;
	for (i = 0; needed && rc == 0 && i < nix && ix[i].step <= j->head; i++) {
		rc = rckpt_step_summary(j, ix[i].step, &si);
		if (rc == 0 && si.segment == sum.segment && (nk == 0 || keep[nk - 1] < ix[i].step))
			keep[nk++] = ix[i].step;
		if (rc == -ENOENT)
			rc = 0; /* not listed */
	}
	free(ix);
	if (rc == 0 && needed && (rc = rckpt_largest_chunk(j, j->head, &per)) == 0) {
		memset(&st, 0, sizeof(st));
		rc = rckpt_segment_compact(j, sum.segment, sum.nchunks, j->token, j->head, keep, nk, per, &st);
	} else if (rc) {
		rc = rckpt_fail(j->h, rc, __func__, "cannot read the steps of job %s", j->name);
	}
	free(keep);
	return rc;
}
