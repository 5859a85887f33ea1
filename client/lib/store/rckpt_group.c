/*
 * rckpt_group.c — group saves (issue 27): a job saved by a group of ranks
 * over the trainer's transport, each rank encoding and appending only the
 * chunks the plan gives it, the step committed once by rank 0 when every
 * rank's chunks are appended.
 *
 * open:  rank 0 opens the job as its writer (lock, claim) and sends the
 *        others its token and segment cap; they join under that claim.
 * save:  every rank's shard descriptions to every rank (allgather); the
 *        global tensors, their layout, the plan, the exchange; each rank
 *        decides whether its chunks need a new segment, rank 0 the step's
 *        (gather, broadcast); each rank encodes its part and appends its
 *        records; each sends rank 0 its chunks' manifest entries and its
 *        result; rank 0 puts the manifest and commits when every rank
 *        succeeded, and sends every rank the step's result.
 * Every message goes in one global order, so blocking transports cannot
 * deadlock. A rank's failure fails the step on every rank; what it had
 * appended lies past the head, and the next save trims it.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_clock.h"
#include "rckpt_dtype.h"
#include "rckpt_group_part.h"
#include "rckpt_group_world.h"
#include "rckpt_group_plan.h"
#include "rckpt_group_xchg.h"
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

/* A rank's description of its shards, at most this many bytes. */
#define DESC_MAX ((size_t)16 << 20)

struct rckpt_group {
	rckpt_t *h;
	rckpt_job_t *j;           /* rank 0: the writer; others: joined */
	rckpt_loc_transport_t tr;
	rckpt_ckenc_t *enc;       /* this rank's part's encoder, across saves */
	rckpt_layout_t enc_layout; /* the part it was made for */
	int trimmed;              /* this rank's chunks trimmed past the head */
	int exact;                /* the next saves store their steps bit-exact */
	uint64_t sig;             /* the tensors of step sig_step, the last this
				     group committed (tensors_sig), when have_sig */
	uint64_t sig_step;
	int have_sig;
	int relaid;               /* this save's tensors differ from its head's */
};

/* FNV-1a of what lays a step out: each tensor's name, elements, dtype and
 * kind, in name order. */
static uint64_t sig_add(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;
	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t tensor_sig(uint64_t h, const char *name, uint64_t n, unsigned dtype, unsigned kind)
{
	uint8_t f[10];
	rckpt_writer_t w = rckpt_writer(f, sizeof(f));
	rckpt_wr_u64(&w, n);
	rckpt_wr_u8(&w, (uint8_t)dtype);
	rckpt_wr_u8(&w, (uint8_t)kind);
	h = sig_add(h, name, strlen(name) + 1);
	return sig_add(h, f, sizeof(f));
}

static uint64_t tensors_sig(const rckpt_tset_t *ts)
{
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned i;
	for (i = 0; i < ts->ntensors; i++)
		h = tensor_sig(h, ts->t[i].name, ts->t[i].n, ts->t[i].dtype, rckpt_ctensor_kind(&ts->t[i]));
	return h;
}

/* Rank 0: whether the step's tensors ts differ from the head's (a group
 * whose last commit is not the head reads the head's manifest; one it
 * cannot read counts as the same, as before). */
static int tensors_changed(rckpt_group_t *g, const rckpt_tset_t *ts, uint64_t head)
{
	rckpt_buf_t man = RCKPT_BUF_INIT;
	rckpt_manifest_t mf;
	char oid[64];
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned i, k;
	if (head == RCKPT_STORE_NONE)
		return 0;
	if (g->have_sig && g->sig_step == head) /* else another writer moved it */
		return g->sig != tensors_sig(ts);
	memset(&mf, 0, sizeof(mf));
	rckpt_store_manifest_oid(oid, sizeof(oid), head);
	if (rckpt_read_object(g->j, oid, (uint64_t)1 << 30, &man) || rckpt_manifest_decode(&mf, man.p, man.len)) {
		rckpt_buf_free(&man);
		return 0;
	}
	for (i = 0; i < mf.ntensors; i++) {
		uint64_t n = 1;
		for (k = 0; k < mf.t[i].ndim; k++)
			n *= mf.t[i].shape[k];
		h = tensor_sig(h, mf.t[i].name, n, mf.t[i].dtype, mf.t[i].kind);
	}
	rckpt_manifest_free(&mf);
	rckpt_buf_free(&man);
	return h != tensors_sig(ts);
}

/* ---- small collectives over the transport, in one global order ---- */

/* Rank 0 sends every other rank n bytes of p; they receive them. */
static int bcast(const rckpt_loc_transport_t *tr, void *p, size_t n)
{
	unsigned r;
	int rc = 0;
	if (tr->rank != 0)
		return tr->recv(tr->ctx, 0, p, n);
	for (r = 1; r < tr->size && rc == 0; r++)
		rc = tr->send(tr->ctx, r, p, n);
	return rc;
}

/* Every rank sends rank 0 n bytes; rank 0 gets rank r's at all + r * n. */
static int gather(const rckpt_loc_transport_t *tr, const void *mine, size_t n, uint8_t *all)
{
	unsigned r;
	int rc = 0;
	if (tr->rank != 0)
		return tr->send(tr->ctx, 0, mine, n);
	memcpy(all, mine, n);
	for (r = 1; r < tr->size && rc == 0; r++)
		rc = tr->recv(tr->ctx, r, all + (size_t)r * n, n);
	return rc;
}

/* ---- open ---- */

int rckpt_group_open(rckpt_t *h, rckpt_group_t **out, const char *job, const rckpt_job_opts_t *opts,
		     const rckpt_loc_transport_t *tr)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_group_t *g;
	uint8_t msg[24];
	int rc, rc0;

	*out = NULL;
	rckpt_clear_error(h);
	if (tr == NULL || tr->size == 0 || tr->rank >= tr->size || (tr->size > 1 && (!tr->send || !tr->recv)))
		return rckpt_fail(h, -EINVAL, __func__, "bad transport");
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return rckpt_fail(h, -ENOMEM, __func__, "out of memory");
	g->h = h;
	g->tr = *tr;
	if (opts)
		o = *opts;
	g->exact = opts && opts->version >= 7 && opts->exact;
	o.writer = tr->rank == 0;
	o.exact = 0; /* the group's, not the job handle's */
	rc0 = rckpt_job_open_claim(h, &g->j, job, &o, 0); /* claimed now: its token goes to every rank */
	{
		rckpt_writer_t w = rckpt_writer(msg, sizeof(msg));
		rckpt_wr_u32(&w, (uint32_t)rc0);
		rckpt_wr_u32(&w, 0);
		rckpt_wr_u64(&w, rc0 == 0 && tr->rank == 0 ? g->j->token : 0);
		rckpt_wr_u64(&w, rc0 == 0 && tr->rank == 0 ? g->j->seg_cap : 0);
	}
	/* rank 0's verdict and claim go to every rank (the others' own
	 * opens failing is theirs to report, after the collective) */
	if ((rc = bcast(tr, msg, sizeof(msg)))) {
		rckpt_group_close(g);
		return rckpt_fail(h, rc, __func__, "the group's transport failed (rank %u of %u)", tr->rank,
				  tr->size);
	}
	{
		rckpt_reader_t r = rckpt_reader(msg, sizeof(msg));
		int rc_root = (int)rckpt_rd_u32(&r);
		(void)rckpt_rd_u32(&r);
		if (rc_root) {
			rckpt_group_close(g);
			return tr->rank == 0 ? rc_root
					     : rckpt_fail(h, rc_root, __func__, "rank 0 cannot open job %s", job);
		}
		if (rc0) {
			rckpt_group_close(g);
			return rc0;
		}
		if (tr->rank != 0) { /* joined under rank 0's claim */
			g->j->token = rckpt_rd_u64(&r);
			g->j->seg_cap = rckpt_rd_u64(&r);
		}
	}
	*out = g;
	return 0;
}

int rckpt_group_set_exact(rckpt_group_t *g, int on)
{
	g->exact = on != 0;
	return 0;
}

int rckpt_group_attach(rckpt_group_t *g, const void *data, size_t len)
{
	if (g->tr.rank != 0)
		return 0; /* rank 0's is the step's */
	return rckpt_job_attach(g->j, data, len);
}

void rckpt_group_close(rckpt_group_t *g)
{
	if (g == NULL)
		return;
	rckpt_ckenc_destroy(g->enc);
	rckpt_layout_free(&g->enc_layout);
	rckpt_job_close(g->j);
	free(g);
}

/* ---- save ---- */

/* Rank 0 gets every rank's bytes (a u64 length, then them), at most max
 * each; the others send theirs. Rank 0: all[r], lens[r] (malloc'd). */
static int gatherv(const rckpt_loc_transport_t *tr, const rckpt_buf_t *mine, size_t max, uint8_t **all,
		   size_t *lens)
{
	uint8_t hdr[8];
	unsigned r;
	int rc = 0;
	if (tr->rank != 0) {
		rckpt_writer_t w = rckpt_writer(hdr, sizeof(hdr));
		rckpt_wr_u64(&w, mine->len);
		rc = tr->send(tr->ctx, 0, hdr, sizeof(hdr));
		if (rc == 0 && mine->len)
			rc = tr->send(tr->ctx, 0, mine->p, mine->len);
		return rc;
	}
	if ((all[0] = malloc(mine->len ? mine->len : 1)) == NULL)
		return -ENOMEM;
	memcpy(all[0], mine->p, mine->len);
	lens[0] = mine->len;
	for (r = 1; r < tr->size && rc == 0; r++) {
		rckpt_reader_t rd = rckpt_reader(hdr, sizeof(hdr));
		uint64_t n;
		if ((rc = tr->recv(tr->ctx, r, hdr, sizeof(hdr))))
			break;
		n = rckpt_rd_u64(&rd);
		if (n > max)
			return -EBADMSG;
		if ((all[r] = malloc(n ? (size_t)n : 1)) == NULL)
			return -ENOMEM;
		lens[r] = (size_t)n;
		if (n)
			rc = tr->recv(tr->ctx, r, all[r], (size_t)n);
	}
	return rc;
}

/* A part's encoder sink: each record appended to its chunk's object, and
 * in an exact step its residual put beside it. */
typedef struct gsink {
	rckpt_group_t *g;
	const rckpt_group_part_t *part;
	uint64_t seg;
	uint64_t bytes;
	uint64_t step;
	int exact;
} gsink_t;

static int gsink_begin(void *arg, uint32_t nchunks)
{
	gsink_t *s = arg;
	return nchunks == s->part->layout.nchunks ? 0 : -EINVAL;
}

static int gsink_record(void *arg, uint32_t c, rckpt_buf_t *rec, rckpt_buf_t *head)
{
	gsink_t *s = arg;
	rckpt_job_t *j = s->g->j;
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	const rckpt_msg_append_t m = { j->token, { rec->p, rec->len }, { head->p, head->len } };
	char oid[64];
	int rc = rckpt_msg_append_head_encode(&msg, &m);
	s->bytes += rec->len;
	rckpt_store_segment_oid(oid, sizeof(oid), s->part->chunk[c], s->seg);
	if (rc == 0 && s->exact) {
		rckpt_buf_t res = RCKPT_BUF_INIT;
		rc = rckpt_exact_build(&res, s->step, s->part->chunk[c], rec->p, rec->len, &s->part->ts,
				       s->part->layout.pieces[c]);
		if (rc == 0 && res.len) {
			char xoid[64];
			rckpt_store_exact_oid(xoid, sizeof(xoid), s->step, s->part->chunk[c]);
			rc = rckpt_put_object(j, xoid, s->step, &res);
			s->bytes += res.len;
		}
		rckpt_buf_free(&res);
	}
	if (rc == 0)
		rc = rckpt_exec_write(j, oid, "append", &msg);
	rckpt_buf_free(&msg);
	return rc;
}

/* Trims this rank's chunk objects of segment seg after `after`. */
static int trim_part(rckpt_group_t *g, const rckpt_group_part_t *part, uint64_t seg, uint64_t after)
{
	rckpt_buf_t tm = RCKPT_BUF_INIT;
	uint32_t c;
	int rc = rckpt_msg_trim_encode(&tm, g->j->token, after);
	for (c = 0; c < part->layout.nchunks && rc == 0; c++) {
		char oid[64];
		rckpt_store_segment_oid(oid, sizeof(oid), part->chunk[c], seg);
		/* a rewind onto a compacted line: the head stands alone first */
		if ((rc = rckpt_chunk_rebase(g->j, seg, part->chunk[c], after, g->j->token)) == 0)
			rc = rckpt_exec_write(g->j, oid, "trim", &tm);
	}
	rckpt_buf_free(&tm);
	return rc;
}

/* Whether one of this rank's chunk objects of segment seg could pass the
 * cap with its next record (4 bytes a parameter, at most), or they hold
 * as many records as a segment may (each step has one in every chunk:
 * the first tells). */
static int part_full(rckpt_group_t *g, const rckpt_group_part_t *part, uint64_t seg, int *full)
{
	uint32_t c, k;
	*full = 0;
	if (part->layout.nchunks) {
		rckpt_buf_t out = RCKPT_BUF_INIT;
		rckpt_msg_head_t tip;
		char oid[64];
		int rc;
		rckpt_store_segment_oid(oid, sizeof(oid), part->chunk[0], seg);
		rc = rckpt_exec_read(g->j, oid, "tip", NULL, &out);
		if (rc == 0 && (rc = rckpt_msg_head_decode(&tip, out.p, out.len)) == 0 &&
		    tip.count >= RCKPT_STORE_SEGMENT_RECORDS)
			*full = 1;
		rckpt_buf_free(&out);
		if (rc && rc != -ENOENT)
			return rc;
	}
	for (c = 0; c < part->layout.nchunks; c++) {
		uint64_t size = 0, n = 0;
		char oid[64];
		int rc;
		rckpt_store_segment_oid(oid, sizeof(oid), part->chunk[c], seg);
		rc = g->j->io->ops->stat(g->j->io, oid, &size);
		if (rc && rc != -ENOENT)
			return rc;
		for (k = 0; k < part->layout.npieces[c]; k++)
			n += part->layout.pieces[c][k].n;
		if (size + 4 * n + ((uint64_t)64 << 10) > g->j->seg_cap)
			*full = 1;
	}
	return 0;
}

static int same_layout(const rckpt_layout_t *a, const rckpt_layout_t *b)
{
	uint32_t c;
	if (a->nchunks != b->nchunks)
		return 0;
	for (c = 0; c < a->nchunks; c++)
		if (a->npieces[c] != b->npieces[c] ||
		    memcmp(a->pieces[c], b->pieces[c], a->npieces[c] * sizeof(*a->pieces[c])) != 0)
			return 0;
	return 1;
}

/* A new encoder of this rank's part takes up the head's levels of its
 * chunks (a group restarted on another number of ranks, or with other
 * owners): each chunk materialized at the head, and a manifest of the
 * part that the encoder checks them against. Then its first step is a
 * delta, as a restarted single writer's is. Best effort: on any failure
 * the step is a base. */
static void resume_part(rckpt_group_t *g, const rckpt_group_part_t *part, uint64_t head, uint64_t seg)
{
	rckpt_job_t *j = g->j;
	rckpt_buf_t man = RCKPT_BUF_INIT, rec = RCKPT_BUF_INIT;
	rckpt_manifest_t gm;
	rckpt_ckdec_t *d = NULL;
	char oid[64];
	uint32_t c, k, i;
	unsigned depth;
	int rc;

	memset(&gm, 0, sizeof(gm));
	rckpt_store_manifest_oid(oid, sizeof(oid), head);
	if (rckpt_read_object(j, oid, (uint64_t)1 << 30, &man) || rckpt_manifest_decode(&gm, man.p, man.len))
		goto out;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		goto out;
	d->mf.step = head;
	d->mf.parent = gm.parent;
	d->mf.chunk_params = gm.chunk_params;
	d->mf.cfg = gm.cfg;
	d->mf.ntensors = part->ts.ntensors;
	d->mf.nchunks = part->layout.nchunks;
	d->mf.t = calloc(part->ts.ntensors ? part->ts.ntensors : 1, sizeof(*d->mf.t));
	d->mf.chunk = calloc(part->layout.nchunks ? part->layout.nchunks : 1, sizeof(*d->mf.chunk));
	d->chunk = calloc(part->layout.nchunks ? part->layout.nchunks : 1, sizeof(*d->chunk));
	if (!d->mf.t || !d->mf.chunk || !d->chunk)
		goto out;
	for (i = 0; i < part->ts.ntensors; i++) {
		const rckpt_ctensor_t *t = &part->ts.t[i];
		uint32_t x;
		for (x = 0; x < gm.ntensors && strcmp(gm.t[x].name, t->name) != 0; x++)
			;
		if (x == gm.ntensors || (d->mf.t[i].name = strdup(t->name)) == NULL)
			goto out; /* another model: a base */
		d->mf.t[i].dtype = (uint8_t)t->dtype;
		d->mf.t[i].kind = (uint8_t)rckpt_ctensor_kind(t);
		d->mf.t[i].encoding = gm.t[x].encoding;
		d->mf.t[i].norm = RCKPT_MF_NO_NORM; /* group saves have no optimizer roles yet */
		d->mf.t[i].ndim = 1;
		d->mf.t[i].shape[0] = t->n;
	}
	for (c = 0; c < part->layout.nchunks; c++) {
		for (k = 0; k < part->layout.npieces[c]; k++) {
			const rckpt_piece_t *pc = &part->layout.pieces[c][k];
			rckpt_mf_tensor_t *mt = &d->mf.t[pc->tensor];
			rckpt_mf_seg_t *sg = realloc(mt->seg, sizeof(*sg) * (mt->nseg + 1));
			if (sg == NULL)
				goto out;
			mt->seg = sg;
			mt->seg[mt->nseg++] = (rckpt_mf_seg_t){ c, k, pc->n };
		}
		rec.len = 0;
		if (rckpt_chunk_base(j, seg, part->chunk[c], head, &rec) ||
		    rckpt_record_decode(&d->chunk[c], rec.p, rec.len, NULL, NULL))
			goto out;
	}
	if (rckpt_ckenc_resume(g->enc, d) == 0) {
		if (rckpt_chain_depth(j, seg, head, &depth))
			depth = RCKPT_STORE_CHAIN_REBASE;
		rckpt_ckenc_set_depth(g->enc, depth);
	}
out:
	if (d) {
		rckpt_ckdec_free(d);
		free(d);
	}
	rckpt_manifest_free(&gm);
	rckpt_buf_free(&man);
	rckpt_buf_free(&rec);
	(void)rc;
}

/* This rank's part of step `step`: encoded and appended (seg: its
 * segment; roll: it begins it). Its report to rank 0 into rep: u32 rc,
 * u32 chunks, u64 raw, u64 stored, f64 quality, u8 base, u8 exact, then
 * per chunk u32 global number and its manifest entry as version 3 lays it
 * (stored base included; the ranks of a group run one library). */
static int encode_part(rckpt_group_t *g, const rckpt_group_part_t *part, uint64_t step, uint64_t head,
		       uint64_t seg, int roll, rckpt_buf_t *rep, rckpt_mf_config_t *cfg, char *msg, size_t msglen)
{
	rckpt_buf_t man = RCKPT_BUF_INIT;
	rckpt_ckenc_stats_t st;
	rckpt_manifest_t mf;
	gsink_t sk = { g, part, roll ? step : seg, 0, step, g->exact };
	const rckpt_ckenc_sink_t sink = { gsink_begin, gsink_record, &sk };
	uint32_t c;
	int rc = 0;

	memset(&mf, 0, sizeof(mf));
	memset(&st, 0, sizeof(st));
	if (!g->trimmed && (rc = trim_part(g, part, seg, head)))
		snprintf(msg, msglen, "cannot trim what an unfinished save left past the head");
	if (rc == 0 && roll && (rc = trim_part(g, part, step, RCKPT_STORE_NONE)))
		snprintf(msg, msglen, "cannot begin a new segment");
	if (rc == 0 && (g->enc == NULL || roll || !g->trimmed || !same_layout(&g->enc_layout, &part->layout))) {
		/* a new part (the first save, other owners, another segment, a
		 * failed save): its chunks start with bases */
		rckpt_ckenc_destroy(g->enc);
		g->enc = NULL;
		rckpt_layout_free(&g->enc_layout);
		if ((rc = rckpt_job_encoder_for(g->j, &part->layout, &g->enc)) ||
		    (rc = rckpt_layout_copy(&g->enc_layout, &part->layout)))
			snprintf(msg, msglen, "cannot make the encoder");
		else if (head != RCKPT_STORE_NONE && !roll)
			resume_part(g, part, head, seg);
	}
	if (rc == 0 && g->exact)
		rckpt_ckenc_restart(g->enc); /* an exact step is a base: its residual is of its record */
	if (rc == 0) {
		rc = rckpt_ckenc_step_stream(g->enc, &sink, &man, &st, &part->ts, NULL, step, msg, msglen);
		if (rc && !msg[0])
			snprintf(msg, msglen, "cannot encode or append its chunks");
	}
	if (rc == 0 && (rc = rckpt_manifest_decode(&mf, man.p, man.len)) == 0)
		*cfg = mf.cfg;
	g->trimmed = rc == 0;
	rckpt_buf_put_u32(rep, (uint32_t)rc);
	rckpt_buf_put_u32(rep, rc ? 0 : part->layout.nchunks);
	rckpt_buf_put_u64(rep, st.raw_bytes);
	rckpt_buf_put_u64(rep, sk.bytes);
	rckpt_buf_put_u64(rep, rckpt_d2u(st.quality));
	rckpt_buf_put_u8(rep, (uint8_t)(st.is_base ? 1 : 0));
	rckpt_buf_put_u8(rep, (uint8_t)(g->exact ? 1 : 0));
	for (c = 0; rc == 0 && c < part->layout.nchunks; c++) {
		rckpt_buf_put_u32(rep, part->chunk[c]);
		rckpt_buf_put_u32(rep, mf.chunk[c].elements);
		rckpt_buf_put_u32(rep, mf.chunk[c].nseg);
		rckpt_buf_put_u64(rep, mf.chunk[c].record_bytes);
		rckpt_buf_append(rep, mf.chunk[c].sha256, 32);
		rckpt_buf_put_u64(rep, mf.chunk[c].base_bytes);
		rckpt_buf_append(rep, mf.chunk[c].base_sha256, 32);
	}
	rckpt_manifest_free(&mf);
	rckpt_buf_free(&man);
	if (rc) {
		rckpt_ckenc_destroy(g->enc);
		g->enc = NULL;
	}
	return rc;
}

/* Rank 0: the reports, the manifest and the commit. */
static int commit_step(rckpt_group_t *g, const world_t *w, const rckpt_layout_t *l, uint64_t step, uint64_t head,
		       uint64_t seg, const rckpt_mf_config_t *cfg, uint8_t **rep, const size_t *replen,
		       uint64_t *raw, uint64_t *stored, unsigned *bad_rank, int *bad_rc)
{
	rckpt_mf_chunk_t *ent = calloc(l->nchunks ? l->nchunks : 1, sizeof(*ent));
	uint8_t *seen = calloc(l->nchunks ? l->nchunks : 1, 1);
	rckpt_buf_t man = RCKPT_BUF_INIT, in = RCKPT_BUF_INIT;
	rckpt_ckenc_opts_t dflt;
	rckpt_manifest_t mf;
	double quality = 0;
	int rc = 0, all_delta = 1, attached = 0, all_exact = 1;
	unsigned r;
	uint32_t c;

	*raw = *stored = 0;
	if (!ent || !seen) {
		rc = -ENOMEM;
		goto out;
	}
	for (r = 0; r < g->tr.size && rc == 0; r++) {
		rckpt_reader_t rd = rckpt_reader(rep[r], replen[r]);
		int rrc = (int)rckpt_rd_u32(&rd);
		uint32_t n = rckpt_rd_u32(&rd), k;
		double q;
		*raw += rckpt_rd_u64(&rd);
		*stored += rckpt_rd_u64(&rd);
		q = rckpt_u2d(rckpt_rd_u64(&rd));
		all_delta &= rckpt_rd_u8(&rd) == 0;
		all_exact &= rckpt_rd_u8(&rd) == 1;
		quality = q > quality ? q : quality;
		if (rd.err) {
			rc = -EBADMSG;
			break;
		}
		if (rrc) {
			*bad_rank = r;
			*bad_rc = rc = rrc;
			break;
		}
		for (k = 0; k < n; k++) {
			uint32_t gc = rckpt_rd_u32(&rd);
			rckpt_mf_chunk_t e = { 0 };
			const uint8_t *sh, *bh;
			e.elements = rckpt_rd_u32(&rd);
			e.nseg = rckpt_rd_u32(&rd);
			e.record_bytes = rckpt_rd_u64(&rd);
			sh = rckpt_rd_bytes(&rd, 32);
			e.base_bytes = rckpt_rd_u64(&rd);
			bh = rckpt_rd_bytes(&rd, 32);
			if (sh && bh) {
				memcpy(e.sha256, sh, 32);
				memcpy(e.base_sha256, bh, 32);
			}
			if (rd.err || gc >= l->nchunks || seen[gc]) {
				rc = -EBADMSG;
				break;
			}
			seen[gc] = 1;
			ent[gc] = e;
		}
	}
	for (c = 0; c < l->nchunks && rc == 0; c++)
		if (!seen[c])
			rc = -EBADMSG; /* a chunk no rank encoded */
	if (rc)
		goto out;
	memset(&mf, 0, sizeof(mf));
	mf.step = step;
	mf.parent = all_delta && head != RCKPT_STORE_NONE ? head : RCKPT_NO_PARENT;
	mf.chunk_params = g->j->o.chunk_params;
	mf.cfg = *cfg;
	mf.quality = quality;
	mf.raw_bytes = *raw;
	mf.enc_bytes = *stored;
	rckpt_ckenc_opts_default(&dflt);
	if ((rc = rckpt_group_manifest(&man, l, &w->ts, dflt.fixed.lossless_kinds, ent, &mf)))
		goto out;
	*stored += man.len;
	if (g->j->attach.len) { /* rank 0's attachment goes with the step */
		char oid[64];
		rckpt_writer_t aw = rckpt_writer(g->j->attach.p + 8, 8);
		rckpt_wr_u64(&aw, step);
		rckpt_store_attach_oid(oid, sizeof(oid), step);
		if ((rc = rckpt_put_object(g->j, oid, step, &g->j->attach)))
			goto out;
		*stored += g->j->attach.len;
		attached = 1;
	}
	{
		char oid[64];
		rckpt_store_manifest_oid(oid, sizeof(oid), step);
		if ((rc = rckpt_put_object(g->j, oid, step, &man)))
			goto out;
	}
	{
		rckpt_store_summary_t sum;
		uint8_t summary[SUMMARY_BYTES];
		rckpt_msg_commit_t cm;
		memset(&sum, 0, sizeof(sum));
		sum.raw_bytes = *raw;
		sum.enc_bytes = *stored;
		sum.parent = mf.parent;
		sum.nchunks = l->nchunks;
		sum.quality = quality;
		sum.segment = seg;
		sum.flags = (attached ? RCKPT_SUMMARY_ATTACH : 0) | (all_exact ? RCKPT_SUMMARY_EXACT : 0) |
			    (g->relaid ? RCKPT_SUMMARY_LAYOUT : 0);
		sum.ranks = g->tr.size;
		rckpt_store_summary_put(summary, &sum);
		cm = (rckpt_msg_commit_t){ head, step, { summary, sizeof(summary) }, g->j->token };
		rc = rckpt_msg_commit_encode(&in, &cm);
		if (rc == 0)
			rc = rckpt_exec_write(g->j, RCKPT_STORE_JOB_OID, "commit", &in);
	}
out:
	free(ent);
	free(seen);
	rckpt_buf_free(&man);
	rckpt_buf_free(&in);
	return rc;
}

/* Step 4 of a group save: whether the step begins a new segment, which
 * it does when any rank's chunk could pass the cap, or when the step's
 * tensors ts differ from the head's (a segment's steps share one layout;
 * every rank learns rank 0's verdict). 0, or the transport's error. */
static int group_roll(rckpt_group_t *g, const rckpt_group_part_t *part, const rckpt_tset_t *ts, uint64_t seg,
		      uint64_t head, int *roll)
{
	const rckpt_loc_transport_t *tr = &g->tr;
	uint8_t mine = 0, verdict = 0, *flags = calloc(tr->size, 1);
	unsigned r;
	int full = 0, rc;
	if (flags == NULL)
		return -ENOMEM;
	if (part_full(g, part, seg, &full) == 0)
		mine = (uint8_t)full;
	if (tr->rank == 0 && tensors_changed(g, ts, head))
		mine |= 2;
	if ((rc = gather(tr, &mine, 1, flags)) == 0) {
		for (r = 0; tr->rank == 0 && r < tr->size; r++)
			verdict |= flags[r];
		rc = bcast(tr, &verdict, 1);
	}
	free(flags);
	*roll = verdict != 0 && head != RCKPT_STORE_NONE;
	g->relaid = (verdict & 2) != 0;
	return rc;
}

/* Step 5: this rank's part encoded and appended, and its report to rank
 * 0 into rep (an error's report when head_rc or the checks fail; msg says
 * why). */
static void group_part_report(rckpt_group_t *g, const rckpt_group_part_t *part, uint64_t step,
			      uint64_t head, int head_rc, uint64_t seg, int roll, rckpt_buf_t *rep,
			      rckpt_mf_config_t *cfg, char *msg, size_t msglen)
{
	int e = head_rc ? head_rc : head != RCKPT_STORE_NONE && step <= head ? -EINVAL : 0;
	if (e == 0 && g->tr.rank == 0 && (e = rckpt_job_hold(g->j, "rckpt_group_save")))
		snprintf(msg, msglen, "rank 0: %s", rckpt_errmsg(g->h));
	if (e == 0)
		e = encode_part(g, part, step, head, seg, roll, rep, cfg, msg, msglen);
	else {
		rckpt_buf_put_u32(rep, (uint32_t)e);
		rckpt_buf_put_u32(rep, 0);
		rckpt_buf_put_u64(rep, 0);
		rckpt_buf_put_u64(rep, 0);
		rckpt_buf_put_u64(rep, 0);
		rckpt_buf_put_u8(rep, 0);
		rckpt_buf_put_u8(rep, 0);
	}
	if (e && !msg[0])
		snprintf(msg, msglen, "%s", e == -EINVAL ? "the step is not after the head" : rckpt_strerror(e));
}

/* Step 6: rank 0 commits when every rank succeeded, and every rank learns
 * how it went (*raw, *stored). 0, or the error with the handle's message
 * set (the encoder dropped: the next step is a base). */
static int group_outcome(rckpt_group_t *g, world_t *w, const rckpt_layout_t *l, uint64_t step, uint64_t head,
			 uint64_t seg, int roll, const rckpt_mf_config_t *cfg, uint8_t **reps,
			 const size_t *replens, const char *msg, uint64_t *raw, uint64_t *stored)
{
	const rckpt_loc_transport_t *tr = &g->tr;
	rckpt_t *h = g->h;
	uint8_t res[24];
	unsigned bad_rank = 0;
	int final = 0, bad_rc = 0, rc;
	uint32_t br;
	if (tr->rank == 0)
		final = commit_step(g, w, l, step, head, roll ? step : seg, cfg, reps, replens, raw, stored,
				    &bad_rank, &bad_rc);
	{
		rckpt_writer_t wr = rckpt_writer(res, sizeof(res));
		rckpt_wr_u32(&wr, (uint32_t)final);
		rckpt_wr_u32(&wr, bad_rc ? bad_rank : UINT32_MAX);
		rckpt_wr_u64(&wr, *raw);
		rckpt_wr_u64(&wr, *stored);
	}
	if ((rc = bcast(tr, res, sizeof(res))))
		return rckpt_fail(h, rc, "rckpt_group_save", "the group's transport failed");
	{
		rckpt_reader_t rd = rckpt_reader(res, sizeof(res));
		final = (int)rckpt_rd_u32(&rd);
		br = rckpt_rd_u32(&rd);
		*raw = rckpt_rd_u64(&rd);
		*stored = rckpt_rd_u64(&rd);
	}
	if (!final)
		return 0;
	rckpt_buf_free(&g->j->attach); /* it went with this save */
	g->trimmed = 0;                /* what this step appended lies past the head */
	rckpt_ckenc_destroy(g->enc);
	g->enc = NULL;
	if (br == tr->rank && msg[0])
		return rckpt_fail(h, final, "rckpt_group_save", "step %" PRIu64 ": %s", step, msg);
	if (br != UINT32_MAX)
		return rckpt_fail(h, final, "rckpt_group_save", "step %" PRIu64 " failed on rank %u of %u", step,
				  br, tr->size);
	return rckpt_fail(h, final, "rckpt_group_save", "cannot commit step %" PRIu64 "%s", step,
			  final == -ESTALE ? " (another writer has taken the job)" : "");
}

int rckpt_group_save(rckpt_group_t *g, uint64_t step, const rckpt_shard_t *s, unsigned n,
		     rckpt_save_stats_t *st)
{
	const rckpt_loc_transport_t *tr = &g->tr;
	rckpt_t *h = g->h;
	rckpt_buf_t desc = RCKPT_BUF_INIT, rep = RCKPT_BUF_INIT;
	uint8_t **all = NULL, **reps = NULL;
	size_t *lens = NULL, *replens = NULL, k;
	world_t w;
	rckpt_layout_t l;
	rckpt_group_plan_t plan;
	rckpt_group_data_t data;
	rckpt_group_part_t part;
	rckpt_hold_t *held = NULL;
	rckpt_mf_config_t cfg;
	uint64_t head = RCKPT_STORE_NONE, count, seg = RCKPT_STORE_NONE, raw = 0, stored = 0;
	char msg[256] = "";
	int rc, head_rc, roll = 0;
	double t0 = rckpt_now_s();

	rckpt_clear_error(h);
	memset(&w, 0, sizeof(w));
	memset(&l, 0, sizeof(l));
	memset(&plan, 0, sizeof(plan));
	memset(&data, 0, sizeof(data));
	memset(&part, 0, sizeof(part));
	memset(&cfg, 0, sizeof(cfg));
	/* 1. every rank's shards to every rank (a bad list still goes, as
	 *    bytes every rank rejects alike) */
	if (rckpt_group_describe(&desc, s, n)) {
		desc.len = 0;
		rckpt_buf_put_u32(&desc, UINT32_MAX);
	}
	if ((rc = rckpt_group_allgather(tr, desc.p, desc.len, DESC_MAX, &all, &lens))) {
		rc = rckpt_fail(h, rc, __func__, "the group's transport failed describing the shards");
		goto out;
	}
	if ((rc = rckpt_group_world_make(&w, all, lens, tr->size))) {
		rc = rckpt_fail(h, rc, __func__,
				"the ranks' shards do not make one model (a malformed list, a range past its "
				"tensor, or ranks that disagree about a tensor's dtype or shape)");
		goto out;
	}
	/* 2. the head as every rank reads it (rank 0 holds the lock: nothing
	 *    moves it meanwhile), and its segment */
	if ((rc = rckpt_read_head(g->j, &head, &count)) == 0 && head != RCKPT_STORE_NONE) {
		rckpt_store_summary_t sum;
		if ((rc = rckpt_step_summary(g->j, head, &sum)) == 0)
			seg = sum.segment;
	}
	head_rc = rc; /* reported to rank 0 with this rank's part, below */
	rc = 0;
	/* 3. the layout, the plan, the exchange, this rank's part */
	held = calloc(n ? n : 1, sizeof(*held));
	if (held == NULL) {
		rc = rckpt_fail(h, -ENOMEM, __func__, "out of memory");
		goto out;
	}
	for (k = 0; k < n; k++) {
		const rckpt_ctensor_t *ct = rckpt_tset_find(&w.ts, s[k].name);
		held[k] = (rckpt_hold_t){ (uint32_t)(ct - w.ts.t), s[k].offset, s[k].count, s[k].data };
	}
	{
		int e = rckpt_layout_build(&l, &w.ts, g->j->o.chunk_params);
		if (e == 0)
			e = rckpt_group_plan(&plan, &l, &w.ts, tr->size, (const rckpt_piece_t *const *)w.held, w.nheld);
		if (e) { /* the same on every rank */
			rc = rckpt_fail(h, e, __func__, "cannot plan the step (%s)",
					e == -ENOENT ? "an element no rank holds" : rckpt_strerror(e));
			goto out;
		}
	}
	if ((rc = rckpt_group_exchange(&data, &plan, &l, &w.ts, held, n, tr))) {
		rc = rckpt_fail(h, rc, __func__, "the exchange of the shards failed (rank %u of %u)", tr->rank,
				tr->size);
		goto out;
	}
	if ((rc = rckpt_group_part_make(&part, &w.ts, &l, &data))) {
		rc = rckpt_fail(h, rc, __func__, "out of memory");
		goto out;
	}
	/* 4. a new segment when any rank's chunk could pass the cap */
	if ((rc = group_roll(g, &part, &w.ts, seg, head, &roll))) {
		rc = rckpt_fail(h, rc, __func__,
				rc == -ENOMEM ? "out of memory" : "the group's transport failed");
		goto out;
	}
	/* 5. this rank's part, encoded and appended; its report to rank 0 */
	group_part_report(g, &part, step, head, head_rc, seg, roll, &rep, &cfg, msg, sizeof(msg));
	reps = calloc(tr->size, sizeof(*reps));
	replens = calloc(tr->size, sizeof(*replens));
	if (!reps || !replens) {
		rc = rckpt_fail(h, -ENOMEM, __func__, "out of memory");
		goto out;
	}
	if ((rc = gatherv(tr, &rep, DESC_MAX, reps, replens))) {
		rc = rckpt_fail(h, rc, __func__, "the group's transport failed");
		goto out;
	}
	/* 6. rank 0 commits when every rank succeeded; everyone learns how it went */
	if ((rc = group_outcome(g, &w, &l, step, head, seg, roll, &cfg, reps, replens, msg, &raw, &stored)))
		goto out;
	g->j->head = step;
	g->sig = tensors_sig(&w.ts);
	g->sig_step = step;
	g->have_sig = 1;
	rckpt_buf_free(&g->j->attach);
	if (st) {
		memset(st, 0, sizeof(*st));
		st->raw_bytes = raw;
		st->enc_bytes = stored;
		st->nchunks = l.nchunks;
		st->t_encode = rckpt_now_s() - t0;
	}
out:
	if (all)
		rckpt_group_gathered_free(all, lens, tr->size);
	if (reps)
		rckpt_group_gathered_free(reps, replens, tr->size);
	free(held);
	rckpt_buf_free(&desc);
	rckpt_buf_free(&rep);
	rckpt_group_part_free(&part);
	rckpt_group_data_free(&data);
	rckpt_group_plan_free(&plan);
	rckpt_layout_free(&l);
	rckpt_group_world_free(&w);
	return rc;
}
