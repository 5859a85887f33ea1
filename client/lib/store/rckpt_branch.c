/*
 * rckpt_branch.c — a job that starts as a branch of another job's steps
 * (formats/store.md "Branches"): a rewind that keeps the steps it
 * abandons, and a new job starting from another job's step (fine-tuning
 * from a checkpoint). A chain folds inside one object and the source's
 * objects go on with its own line, so a branch has objects of its own:
 * its steps are copied once. The first step copied, and any step that
 * begins a segment of the branch or whose record is no delta on the step
 * copied before it, is copied as its materialized base; every other record
 * is copied as it is stored, a delta on the step before. Manifests,
 * attachments and summaries are copied; every content is the source's,
 * bit for bit.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_manifest.h"
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

int rckpt_branch_note(rckpt_job_t *j, const char *key, const char *job, uint64_t from, uint64_t upto)
{
	uint8_t v[16 + 64];
	const size_t n = strlen(job);
	rckpt_writer_t w = rckpt_writer(v, sizeof(v));
	if (n > 63)
		return -EINVAL;
	rckpt_wr_u64(&w, from);
	rckpt_wr_u64(&w, upto);
	memcpy(v + 16, job, n);
	return j->io->ops->omap_set(j->io, RCKPT_STORE_JOB_OID, key, v, 16 + n);
}

typedef struct branch_walk {
	rckpt_branch_info_t *out;
	unsigned cap, n;
	int made_from;
} branch_walk_t;

static int branch_one(void *arg, const char *key, const uint8_t *val, size_t len)
{
	branch_walk_t *w = arg;
	rckpt_reader_t r = rckpt_reader(val, len);
	rckpt_branch_info_t *b;
	(void)key;
	if (len < 17 || len > 16 + 63)
		return 0; /* not one of ours: skipped */
	if (w->n == w->cap)
		return 0;
	b = &w->out[w->n++];
	memset(b, 0, sizeof(*b));
	b->from = rckpt_rd_u64(&r);
	b->upto = rckpt_rd_u64(&r);
	memcpy(b->job, val + 16, len - 16);
	b->made_from = w->made_from;
	return 0;
}

int rckpt_job_branches(rckpt_job_t *j, rckpt_branch_info_t *out, unsigned cap, unsigned *n)
{
	branch_walk_t w = { out, cap, 0, 1 };
	rckpt_buf_t v = RCKPT_BUF_INIT;
	char after[96] = "";
	int more = 1, rc;

	rckpt_clear_error(j->h);
	*n = 0;
	rc = j->io->ops->omap_get(j->io, RCKPT_STORE_JOB_OID, "x.branch", &v);
	if (rc == 0)
		rc = branch_one(&w, "x.branch", v.p, v.len);
	else if (rc == -ENOENT)
		rc = 0; /* not made from another job */
	rckpt_buf_free(&v);
	w.made_from = 0;
	while (rc == 0 && more) {
		const unsigned before = w.n;
		rc = j->io->ops->omap_list(j->io, RCKPT_STORE_JOB_OID, after, "b.", 64, branch_one, &w, &more);
		if (rc || w.n == before || w.n == cap)
			break;
		snprintf(after, sizeof(after), "b.%s", w.out[w.n - 1].job);
	}
	if (rc == -ENOENT)
		rc = 0; /* no job object: no branches */
	*n = w.n;
	return rc ? rckpt_fail(j->h, rc, __func__, "cannot list the branches of job %s", j->name) : 0;
}

int rckpt_job_branch(rckpt_job_t *src, uint64_t from, uint64_t upto, const char *dst)
{
	unsigned copied;
	rckpt_clear_error(src->h);
	if (dst == NULL || !rckpt_valid_name(dst) || from > upto)
		return rckpt_fail(src->h, -EINVAL, __func__, "bad job name or steps");
	return rckpt_branch_copy(src, from, upto, dst, &copied);
}

static const rckpt_store_entry_t *entry_of(const rckpt_store_entry_t *e, uint32_t n, uint64_t s)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (e[mid].step == s)
			return &e[mid];
		if (e[mid].step < s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* What the copy holds per chunk of the source's current segment. */
typedef struct src_seg {
	uint64_t seg;
	unsigned n;
	rckpt_store_entry_t **ix;
	uint32_t *nix;
} src_seg_t;

static void src_seg_free(src_seg_t *g)
{
	unsigned c;
	for (c = 0; c < g->n; c++)
		free(g->ix ? g->ix[c] : NULL);
	free(g->ix);
	free(g->nix);
	memset(g, 0, sizeof(*g));
	g->seg = RCKPT_STORE_NONE - 1; /* none read */
}

static int src_seg_load(rckpt_job_t *src, src_seg_t *g, uint64_t seg, unsigned n)
{
	unsigned c;
	int rc = 0;
	if (g->seg == seg && g->n == n)
		return 0;
	src_seg_free(g);
	g->ix = calloc(n ? n : 1, sizeof(*g->ix));
	g->nix = calloc(n ? n : 1, sizeof(*g->nix));
	if (!g->ix || !g->nix)
		return -ENOMEM;
	g->n = n;
	for (c = 0; c < n && rc == 0; c++)
		rc = rckpt_chunk_index(src, seg, c, &g->ix[c], &g->nix[c]);
	if (rc == 0)
		g->seg = seg;
	return rc;
}

/* Chunk c's record of step s in the source's segment, into rec: as it is
 * stored when it is a delta on prev (the step copied before), else its
 * materialized base. A compaction beside the copy may have moved or
 * re-encoded it since the index was read: a record that is not what the
 * entry said is looked up again, in a fresh index (a bounded number of
 * times), and taken as a base when it is no delta on prev any more.
 * -ENOENT: the step is gone from the chunk (dropped meanwhile). */
static int source_record(rckpt_job_t *src, src_seg_t *g, unsigned c, uint64_t s, uint64_t prev,
			 int as_base, rckpt_buf_t *rec)
{
	unsigned attempt;
	int rc = 0;
	for (attempt = 0; attempt < 3; attempt++) {
		const rckpt_store_entry_t *e = entry_of(g->ix[c], g->nix[c], s);
		char oid[64];
		unsigned kind;
		uint64_t step, parent;
		if (attempt) { /* read the index again */
			const uint64_t seg = g->seg;
			const unsigned n = g->n;
			src_seg_free(g);
			if ((rc = src_seg_load(src, g, seg, n)))
				return rc;
			e = entry_of(g->ix[c], g->nix[c], s);
		}
		if (e == NULL) {
			rc = -ENOENT;
			continue;
		}
		if (as_base || e->kind == RCKPT_REC_BASE || e->parent != prev)
			return rckpt_chunk_base(src, g->seg, c, s, rec);
		rckpt_store_segment_oid(oid, sizeof(oid), c, g->seg);
		rec->len = 0;
		if ((rc = rckpt_buf_reserve(rec, e->length ? e->length : 1)))
			return rc;
		{
			int got = src->io->ops->read(src->io, oid, rec->p, e->length, e->offset);
			if (got < 0)
				return got;
			rec->len = (size_t)got;
		}
		if (rec->len == e->length && rckpt_record_check(&kind, &step, &parent, rec->p, rec->len) == 0 &&
		    step == s && kind == e->kind && parent == prev)
			return 0;
		rc = -ESTALE; /* moved under us: look again */
	}
	return rc == -ESTALE ? rckpt_chunk_base(src, g->seg, c, s, rec) : rc;
}

/* Copies step s's object oid of src into dst, through buf (-ENOENT: src
 * has none). */
static int copy_object(rckpt_job_t *src, rckpt_job_t *dst, const char *oid, uint64_t s, rckpt_buf_t *buf)
{
	int rc = rckpt_read_object(src, oid, ATTACH_STORED_MAX, buf);
	return rc ? rc : rckpt_put_object(dst, oid, s, buf);
}

/* Copies step s of src (listed, with summary sum) into dst, a writer whose
 * head is prev (RCKPT_STORE_NONE: none yet); fresh: it begins a segment
 * whatever the sizes (what a skipped step appended there is gone). */
static int copy_step(rckpt_job_t *src, rckpt_job_t *dst, src_seg_t *g, uint64_t s,
		     const rckpt_store_summary_t *sum, uint64_t prev, int fresh)
{
	rckpt_buf_t man = RCKPT_BUF_INIT, rec = RCKPT_BUF_INIT, msg = RCKPT_BUF_INIT, att = RCKPT_BUF_INIT;
	rckpt_manifest_t mf;
	rckpt_store_summary_t out = *sum;
	uint8_t summary[SUMMARY_BYTES];
	char oid[64];
	unsigned c, n;
	int rc, roll = 0;

	memset(&mf, 0, sizeof(mf));
	rckpt_store_manifest_oid(oid, sizeof(oid), s);
	if ((rc = rckpt_read_object(src, oid, (uint64_t)1 << 30, &man)) ||
	    (rc = rckpt_manifest_decode(&mf, man.p, man.len)))
		goto out;
	n = mf.nchunks;
	if ((rc = src_seg_load(src, g, sum->segment, n)))
		goto out;
	/* the branch's segment: a new one before a chunk could pass the cap
	 * (every record of this step is then a base) */
	if ((rc = rckpt_seg_grow(dst, n)))
		goto out;
	for (c = 0; c < n && prev != RCKPT_STORE_NONE; c++) {
		const rckpt_store_entry_t *e = entry_of(g->ix[c], g->nix[c], s);
		const uint64_t est = e ? e->length : 4 * dst->o.chunk_params;
		if (dst->seg_bytes[c] + (dst->rec_max[c] > est ? dst->rec_max[c] : est) > dst->seg_cap)
			roll = 1;
	}
	/* by records too, as a writer rolls (store.md "Segments") */
	if (fresh || dst->seg_records >= RCKPT_STORE_SEGMENT_RECORDS)
		roll = 1;
	if (roll || prev == RCKPT_STORE_NONE) {
		const uint64_t seg = prev == RCKPT_STORE_NONE ? RCKPT_STORE_NONE : s;
		rckpt_buf_t tm = RCKPT_BUF_INIT;
		rc = rckpt_msg_trim_encode(&tm, dst->token, RCKPT_STORE_NONE);
		if (rc == 0)
			rc = rckpt_chunk_writes(dst, seg, "trim", &tm, 1, n);
		rckpt_buf_free(&tm);
		if (rc)
			goto out;
		dst->seg = seg;
		for (c = 0; c < dst->seg_n; c++)
			dst->seg_bytes[c] = dst->rec_max[c] = dst->head_bytes[c] = 0;
		dst->seg_records = 0;
	}
	for (c = 0; c < n && rc == 0; c++) {
		rc = source_record(src, g, c, s, prev, roll || prev == RCKPT_STORE_NONE, &rec);
		msg.len = 0;
		if (rc == 0)
			rc = rckpt_msg_append_encode(&msg, dst->token, rec.p, rec.len);
		if (rc == 0) {
			rckpt_store_segment_oid(oid, sizeof(oid), c, dst->seg);
			rc = rckpt_exec_write(dst, oid, "append", &msg);
		}
		if (rc == 0) {
			dst->seg_bytes[c] += rec.len; /* an append without a head drops one */
			dst->seg_bytes[c] -= dst->head_bytes[c];
			dst->head_bytes[c] = 0;
			if (rec.len > dst->rec_max[c])
				dst->rec_max[c] = rec.len;
		}
	}
	if (rc)
		goto out;
	if (sum->flags & RCKPT_SUMMARY_ATTACH) {
		rckpt_store_attach_oid(oid, sizeof(oid), s);
		rc = copy_object(src, dst, oid, s, &att);
		if (rc == -ENOENT)
			out.flags &= ~RCKPT_SUMMARY_ATTACH, rc = 0;
		if (rc)
			goto out;
	}
	for (c = 0; c < n && (sum->flags & RCKPT_SUMMARY_EXACT); c++) {
		/* an exact step's residuals: of its content, which the copy
		 * keeps bit for bit, so they stay as they are (a chunk of
		 * lossless segments has none) */
		rckpt_store_exact_oid(oid, sizeof(oid), s, c);
		if ((rc = copy_object(src, dst, oid, s, &att)) && rc != -ENOENT)
			goto out;
		rc = 0;
	}
	dst->seg_records++; /* one more record in each of its chunk objects */
	rckpt_store_manifest_oid(oid, sizeof(oid), s);
	rc = rckpt_put_object(dst, oid, s, &man);
	if (rc == 0) {
		rckpt_buf_t in = RCKPT_BUF_INIT;
		rckpt_msg_commit_t cm;
		out.segment = dst->seg;
		rckpt_store_summary_put(summary, &out);
		cm.expect = prev;
		cm.step = s;
		cm.summary.p = summary;
		cm.summary.len = sizeof(summary);
		cm.writer = dst->token;
		rc = rckpt_msg_commit_encode(&in, &cm);
		if (rc == 0)
			rc = rckpt_exec_write(dst, RCKPT_STORE_JOB_OID, "commit", &in);
		rckpt_buf_free(&in);
	}
out:
	rckpt_manifest_free(&mf);
	rckpt_buf_free(&man);
	rckpt_buf_free(&rec);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&att);
	return rc;
}

int rckpt_branch_copy(rckpt_job_t *src, uint64_t from, uint64_t upto, const char *dst_name,
		      unsigned *copied)
{
	rckpt_t *h = src->h;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *dst = NULL;
	src_seg_t g;
	uint64_t after = from ? from - 1 : RCKPT_LATEST, prev = RCKPT_STORE_NONE;
	int rc, more = 1, fresh = 0;

	*copied = 0;
	memset(&g, 0, sizeof(g));
	g.seg = RCKPT_STORE_NONE - 1;
	if (from > upto)
		return -EINVAL;
	o.writer = 1;
	o.chunk_params = src->o.chunk_params;
	if ((rc = rckpt_job_open_claim(h, &dst, dst_name, &o, 0))) /* its token: now */
		return rc;
	if (dst->head != RCKPT_STORE_NONE) {
		const uint64_t head = dst->head;
		rckpt_job_close(dst);
		return rckpt_fail(h, -EEXIST, "rckpt_job_branch", "job %s exists (its head is %" PRIu64 ")",
				  dst_name, head);
	}
	while (more && rc == 0) {
		rckpt_step_info_t si[64];
		uint64_t segs[64];
		unsigned n = 0, k;
		if ((rc = rckpt_list_steps(src, after, si, segs, 64, &n, &more)) || n == 0)
			break;
		for (k = 0; k < n && rc == 0 && si[k].step <= upto; k++) {
			rckpt_store_summary_t sum;
			if ((rc = rckpt_step_summary(src, si[k].step, &sum)) == 0 &&
			    (rc = copy_step(src, dst, &g, si[k].step, &sum, prev, fresh)) == 0) {
				prev = si[k].step;
				fresh = 0;
				++*copied;
			} else if (rc == -ENOENT) {
				/* dropped by a compaction since it was listed (the
				 * retention policy let it go): not copied; what it
				 * appended to the branch goes, and the next step is
				 * copied on the one before */
				rckpt_buf_t tm = RCKPT_BUF_INIT;
				rc = rckpt_msg_trim_encode(&tm, dst->token, prev);
				if (rc == 0 && dst->seg_n)
					rc = rckpt_chunk_writes(dst, dst->seg, "trim", &tm, 1, dst->seg_n);
				rckpt_buf_free(&tm);
				fresh = 1; /* the next step begins a segment of its own: a base */
			}
		}
		if (k < n || (n && si[n - 1].step >= upto))
			more = 0;
		after = si[n - 1].step;
	}
	src_seg_free(&g);
	if (rc) {
		/* a failed branch leaves nothing: the next try starts afresh */
		const int del = (rckpt_job_close(dst), dst = NULL, rckpt_job_delete(h, dst_name));
		rc = rckpt_fail(h, rc, "rckpt_job_branch",
				"cannot copy step %" PRIu64 " of job %s into %s (%s)",
				prev == RCKPT_STORE_NONE ? from : prev, src->name, dst_name,
				del == 0 || del == -ENOENT ? "the partial branch was removed"
							   : "the partial branch is left: rm it");
	}
	else if (*copied == 0)
		rc = rckpt_fail(h, -ENOENT, "rckpt_job_branch", "job %s lists no step in [%" PRIu64 ", %" PRIu64 "]",
				src->name, from, upto);
	else if ((rc = rckpt_branch_note(dst, "x.branch", src->name, from, prev)))
		rc = rckpt_fail(h, rc, "rckpt_job_branch", "cannot note in job %s where it came from", dst_name);
	rckpt_job_close(dst);
	return rc;
}
