/*
 * rckpt_compact.c — compaction of a job (formats/store.md, "Compaction"):
 * the steps its retention policy keeps, each segment's chunks rewritten so
 * that the latest step kept is a base (rckpt_segment.c). Above the
 * housekeeping's steps, pins and retirement (rckpt_store_admin.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_clock.h"
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

static int keeps(const rckpt_retention_t *r, const rckpt_steps_t *s, unsigned i, uint64_t head,
		 const uint64_t *pins, unsigned np)
{
	unsigned k;
	uint64_t step = s->s[i].step;
	if (step == head || (r->keep_last == 0 && r->keep_every == 0))
		return 1;
	if (r->keep_last && s->n - i <= r->keep_last)
		return 1;
	if (r->keep_every && step % r->keep_every == 0)
		return 1;
	for (k = 0; k < np; k++)
		if (pins[k] == step)
			return 1;
	return 0;
}

/* Whether segment seg holds a listed step after head: one a writer
 * committed after the compactor read the head. */
static int after_head(const rckpt_steps_t *s, uint64_t seg, uint64_t head)
{
	unsigned i;
	for (i = 0; i < s->n; i++)
		if (s->s[i].step > head && s->seg[i] == seg)
			return 1;
	return 0;
}

/* One compaction, for a compactor whose token is the job's writer token
 * as it read it first: a writer that claims the job meanwhile makes it
 * -ESTALE before it changes anything that writer touched. */
static int compact_once(rckpt_job_t *j, const rckpt_retention_t *pol, rckpt_compact_stats_t *st)
{
	rckpt_t *h = j->h;
	rckpt_retention_t r;
	rckpt_steps_t s, kept;
	uint64_t *pins = NULL, *drop = NULL, *keep = NULL, head, count, token, head_seg, per;
	rckpt_segrun_t *runs = NULL;
	unsigned np = 0, nd = 0, nk, nruns = 0, i, k;
	double t0 = rckpt_now_s();
	rckpt_compact_stats_t local;
	int rc;

	rckpt_clear_error(h);
	memset(&s, 0, sizeof(s));
	memset(&kept, 0, sizeof(kept));
	if (st == NULL)
		st = &local;
	memset(st, 0, sizeof(*st));
	if (pol)
		r = *pol;
	else if ((rc = rckpt_job_retention(j, &r)))
		return rc;
	if ((rc = rckpt_read_writer(j, &token)) || (rc = rckpt_read_head(j, &head, &count)))
		return rckpt_fail(h, rc, __func__, "cannot read the head of job %s", j->name);
	if (head == RCKPT_STORE_NONE)
		return 0; /* nothing committed */
	if ((rc = rckpt_steps_all(j, &s)) || (rc = rckpt_pins_read(j, &pins, &np))) {
		rc = rckpt_fail(h, rc, __func__, "cannot list job %s", j->name);
		goto out;
	}
	st->steps_before = s.n;
	/* 1. Forget the steps retention does not keep (the job object skips
	 * the head and steps pinned meanwhile). */
	drop = calloc(s.n ? s.n : 1, sizeof(*drop));
	if (drop == NULL) {
		rc = rckpt_fail(h, -ENOMEM, __func__, "out of memory");
		goto out;
	}
	head_seg = RCKPT_STORE_NONE;
	for (i = 0; i < s.n; i++) {
		if (s.s[i].step <= head && !keeps(&r, &s, i, head, pins, np))
			drop[nd++] = s.s[i].step;
		if (s.s[i].step == head)
			head_seg = s.seg[i];
	}
	if (nd && (rc = rckpt_steps_drop(j, token, drop, nd))) {
		rc = rckpt_fail(h, rc, __func__, "cannot drop steps of job %s", j->name);
		goto out;
	}
	/* 2. What is listed now is what stays. */
	if ((rc = rckpt_steps_all(j, &kept))) {
		rc = rckpt_fail(h, rc, __func__, "cannot list job %s", j->name);
		goto out;
	}
	st->steps_after = kept.n;
	st->chunks = rckpt_chunk_count(&s);
	if ((rc = rckpt_chunk_bytes(j, &s, &st->bytes_before, NULL)) || (rc = rckpt_seg_runs(&s, &runs, &nruns))) {
		rc = rckpt_fail(h, rc, __func__, "cannot measure the chunks of job %s", j->name);
		goto out;
	}
	keep = calloc(kept.n ? kept.n : 1, sizeof(*keep));
	if (keep == NULL) {
		rc = rckpt_fail(h, -ENOMEM, __func__, "out of memory");
		goto out;
	}
	if ((rc = rckpt_largest_chunk(j, head, &per))) {
		rc = rckpt_fail(h, rc, __func__, "cannot read the manifest of step %" PRIu64 " of job %s", head,
				j->name);
		goto out;
	}
	/* 3. Each segment on its own: one whose steps are all gone goes
	 * whole; the others are compacted up to the head (its segment) or
	 * their newest kept step. */
	for (k = 0; k < nruns && rc == 0; k++) {
		const rckpt_segrun_t *g = &runs[k];
		nk = 0;
		for (i = 0; i < kept.n; i++)
			if (kept.s[i].step <= head && kept.seg[i] == g->seg)
				keep[nk++] = kept.s[i].step;
		if (nk == 0 && (after_head(&s, g->seg, head) || after_head(&kept, g->seg, head)))
			continue; /* a segment a writer began after the head we read: the next compaction's */
		if (nk == 0 && g->seg != head_seg) {
			unsigned c;
			for (c = 0; c < g->nchunks && rc == 0; c++) {
				char oid[64];
				rckpt_store_segment_oid(oid, sizeof(oid), c, g->seg);
				rc = rckpt_retire(j, oid, token, RCKPT_STORE_NONE, RCKPT_RETIRE_CHUNK);
				if (rc == -EINVAL)
					rc = 0; /* a chunk no fenced writer touched: gc's or rm's */
				if (rc)
					rc = rckpt_fail(h, rc, __func__, "cannot remove %s/%s", j->name, oid);
			}
			continue;
		}
		if (nk)
			rc = rckpt_segment_compact(j, g->seg, g->nchunks, token, g->seg == head_seg ? head : keep[nk - 1],
					     keep, nk, per, st);
		if (nk && rc == 0 && g->seg != head_seg) {
			/* An old segment: no writer appends to it (only to the
			 * head's, or a new one), so what follows its newest kept
			 * step is of steps no longer listed. A writer that
			 * rewinds into it claims anew first, and then our token
			 * is refused on whatever it touches. */
			rckpt_buf_t in = RCKPT_BUF_INIT;
			rc = rckpt_msg_trim_encode(&in, token, keep[nk - 1]);
			if (rc == 0)
				rc = rckpt_chunk_writes(j, g->seg, "trim", &in, 1, g->nchunks);
			rckpt_buf_free(&in);
			if (rc)
				rc = rckpt_fail(h, rc, __func__, "cannot trim an old segment of job %s after step %" PRIu64,
						j->name, keep[nk - 1]);
		}
	}
	if (rc)
		goto out;
	/* 4. The manifests of steps that are gone. */
	for (i = 0; i < s.n; i++) {
		char oid[64];
		if (s.s[i].step < head && !rckpt_steps_has(&kept, s.s[i].step)) {
			rckpt_store_attach_oid(oid, sizeof(oid), s.s[i].step);
			rc = rckpt_retire_exact(j, token, &s.s[i]);
			if (rc == 0)
				rc = rckpt_retire(j, oid, token, s.s[i].step, RCKPT_RETIRE_STEP);
			if (rc == 0) {
				rckpt_store_manifest_oid(oid, sizeof(oid), s.s[i].step);
				rc = rckpt_retire(j, oid, token, s.s[i].step, RCKPT_RETIRE_STEP);
			}
			if (rc) {
				rc = rckpt_fail(h, rc, __func__, "cannot remove %s", oid);
				goto out;
			}
			rc = 0;
		}
	}
	if ((rc = rckpt_chunk_bytes(j, &s, &st->bytes_after, NULL))) {
		rc = rckpt_fail(h, rc, __func__,
				"job %s is compacted, but its chunks cannot be measured (compact again)",
				j->name);
		goto out;
	}
	st->seconds = rckpt_now_s() - t0;
out:
	rckpt_steps_free(&s);
	rckpt_steps_free(&kept);
	free(runs);
	free(pins);
	free(drop);
	free(keep);
	return rc;
}

int rckpt_job_compact(rckpt_job_t *j, const rckpt_retention_t *pol, rckpt_compact_stats_t *st)
{
	unsigned tries;
	int rc = -ESTALE;
	/* a writer that took the job over meanwhile: start again from what
	 * it committed, a few times */
	for (tries = 0; tries < 3 && rc == -ESTALE; tries++)
		rc = compact_once(j, pol, st);
	return rc;
}
