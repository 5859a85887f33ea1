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
	unsigned failed = 0;
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
		/* stride 0: a stage up to the first record to reshape alone */
		if (from < nix && from + stride < nix && ix[from + stride].step < end)
			upto = ix[from + stride].step;
		while (nkeep < nk && keep[nkeep] <= upto)
			nkeep++;
		rc = rckpt_msg_compact_encode(&in, token, upto, keep, nkeep);
		if (rc == 0)
			rc = rckpt_chunk_writes_at(j, seg, "compact", &in, 1, nchunks, &failed);
		rckpt_buf_free(&in);
		if (rc == -E2BIG && stride > 0 && (upto != end || from < nix)) {
			stride /= 2; /* more than one call may do or hold: a shorter stage */
			continue;
		}
		if (rc == -E2BIG) { /* even one record: an object past the class's bounds */
			char oid[64];
			uint64_t head = end, count;
			rckpt_store_segment_oid(oid, sizeof(oid), failed, seg);
			if (rckpt_read_head(j, &head, &count) || head == RCKPT_STORE_NONE)
				head = end;
			rc = rckpt_fail(j->h, rc, "rckpt_job_compact",
					"cannot compact job %s to step %" PRIu64 ": %s takes no rckpt call (over %u "
					"records, or of 2^22 elements: written without the class); its steps restore, "
					"and 'rckpt ckpt branch --job %s --step S --upto %" PRIu64 " --to NEW' copies "
					"them into a job in shape",
					j->name, upto, oid, RCKPT_STORE_OBJECT_RECORDS_MAX, j->name, head);
			break;
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
		from += stride ? stride : 1;
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

/* The listed steps at or before head among the index entries ix[0, nix)
 * (ascending) whose summaries name segment seg, into keep[0, *nk). */
static int listed_in(rckpt_job_t *j, uint64_t seg, const rckpt_store_entry_t *ix, uint32_t nix, uint64_t head,
		     uint64_t *keep, unsigned *nk)
{
	rckpt_store_summary_t si;
	uint32_t i;
	int rc = 0;
	*nk = 0;
	for (i = 0; rc == 0 && i < nix && ix[i].step <= head; i++) {
		rc = rckpt_step_summary(j, ix[i].step, &si);
		if (rc == 0 && si.segment == seg && (*nk == 0 || keep[*nk - 1] < ix[i].step))
			keep[(*nk)++] = ix[i].step;
		if (rc == -ENOENT)
			rc = 0; /* not listed */
	}
	return rc;
}

/* The index of step among ix[0, nix) (ascending), or -1. */
static long entry_of(const rckpt_store_entry_t *ix, uint32_t nix, uint64_t step)
{
	uint32_t lo = 0, hi = nix;
	while (lo < hi) {
		const uint32_t mid = lo + (hi - lo) / 2;
		if (ix[mid].step < step)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < nix && ix[lo].step == step ? (long)lo : -1;
}

/* The chain the newest record at or before head hangs on, into up[0, *nu):
 * that record's step, its parent, the parent's parent, ... as far as a base
 * or a parent the chunk does not hold. */
static void chain_up(const rckpt_store_entry_t *ix, uint32_t nix, uint64_t head, uint64_t *up, uint32_t *nu)
{
	long at = -1;
	uint32_t i;
	*nu = 0;
	for (i = 0; i < nix && ix[i].step <= head; i++)
		at = (long)i;
	while (at >= 0 && *nu < nix) {
		const rckpt_store_entry_t *e = &ix[at];
		up[(*nu)++] = e->step;
		if (e->kind == RCKPT_REC_BASE || e->parent == RCKPT_STORE_NONE || e->parent <= e->step)
			break;
		at = entry_of(ix, nix, e->parent);
	}
}

int rckpt_chunk_rebase(rckpt_job_t *j, uint64_t seg, uint32_t chunk, uint64_t head, uint64_t token)
{
	rckpt_store_entry_t *ix = NULL;
	uint64_t *keep = NULL, *up = NULL;
	uint32_t nix = 0, nu = 0, i, b, stride;
	unsigned nk = 0, nlisted = 0;
	char oid[64];
	int rc, needed = 0;

	if (head == RCKPT_STORE_NONE)
		return 0;
	if ((rc = rckpt_chunk_index(j, seg, chunk, &ix, &nix)))
		return rc;
	/* what compaction wrote: a kept step a delta on the next kept one */
	for (i = 0; i < nix; i++) {
		if (ix[i].step <= head && ix[i].kind != RCKPT_REC_BASE && ix[i].parent != RCKPT_STORE_NONE &&
		    ix[i].parent > head)
			needed = 1;
		if (i && ix[i].step <= ix[i - 1].step)
			rc = -EBADMSG; /* an index out of order: not the plugin's */
	}
	if (rc == 0 && needed &&
	    ((keep = calloc(nix, sizeof(*keep))) == NULL || (up = calloc(nix, sizeof(*up))) == NULL))
		rc = -ENOMEM;
	if (rc == 0 && needed)
		rc = listed_in(j, seg, ix, nix, head, keep, &nlisted);
	if (rc || !needed || nlisted == 0)
		goto out;
	/* In stages, from the base the head's chain ends on down to the head:
	 * each makes a step of that chain `stride` records nearer the head a
	 * base, keeping every step between it and the head as it is, so a call
	 * folds at most stride records however long the chain is. The first
	 * try is the head itself (one call: the usual case); a stage that is
	 * more than one call may do is asked again half as long. The last
	 * makes the head a base and each listed step before it a delta on the
	 * next; the records past it are copied as they are, for the trim that
	 * follows. */
	chain_up(ix, nix, head, up, &nu);
	rckpt_store_segment_oid(oid, sizeof(oid), chunk, seg);
	b = nu ? nu - 1 : 0;
	stride = b ? b : 1;
	for (;;) {
		const uint32_t t = b > stride ? b - stride : 0;
		const uint64_t upto = t ? up[t] : head;
		rckpt_buf_t in = RCKPT_BUF_INIT;
		nk = nlisted;
		for (i = 0; i < nix && ix[i].step <= upto; i++)
			if (ix[i].step > head)
				keep[nk++] = ix[i].step;
		if ((rc = rckpt_msg_compact_encode(&in, token, upto, keep, nk)) == 0)
			rc = rckpt_exec_write(j, oid, "compact", &in);
		rckpt_buf_free(&in);
		if (rc == -E2BIG && (stride < b ? stride : b) > 1) {
			stride = (stride < b ? stride : b) / 2;
			continue;
		}
		if (rc || t == 0)
			break;
		b = t;
	}
out:
	free(up);
	free(keep);
	free(ix);
	return rc;
}

int rckpt_head_rebase(rckpt_job_t *j, uint64_t head)
{
	rckpt_store_summary_t sum;
	uint32_t c;
	int rc;

	if (head == RCKPT_STORE_NONE)
		return 0;
	if ((rc = rckpt_step_summary(j, head, &sum)))
		return rckpt_fail(j->h, rc, __func__, "cannot read step %" PRIu64 " of job %s", head, j->name);
	/* every chunk the head has (a failed compaction may have reshaped
	 * some and not others), and any past them that later steps made */
	for (c = 0; rc == 0 && c < RCKPT_MF_MAX_CHUNKS; c++) {
		if (c >= sum.nchunks) {
			uint64_t size = 0;
			char oid[64];
			rckpt_store_segment_oid(oid, sizeof(oid), c, sum.segment);
			if (j->io->ops->stat(j->io, oid, &size) == -ENOENT)
				break;
		}
		rc = rckpt_chunk_rebase(j, sum.segment, c, head, j->token);
	}
	if (rc)
		return rckpt_fail(j->h, rc, __func__,
				  "cannot make step %" PRIu64 " of job %s stand without the records after it%s", head,
				  j->name, rc == -E2BIG ? " (one stage of it is more than an OSD call may fold)" : "");
	return 0;
}
