/*
 * ckenc_emit.c — from a chosen configuration to records: the chunk layout,
 * each piece quantized or kept, and the one emission path (records to the
 * sink, then the manifest) that full and partial steps share.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"
#include "rckpt_store_wire.h" /* what one chunk record may hold */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>


/* Piece [first, first + n) of tensor t quantized with q into seg, a block
 * at a time. Levels at the tensor's sample positions (multiples of
 * stride) also go to summary[position / stride]. */
static int quantize_piece(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_ctensor_t *t,
			  const float *grads, const rckpt_qparams_t *q, uint64_t first, uint64_t n,
			  uint64_t stride, uint8_t *summary, float *snap)
{
	uint64_t u;
	int rc;

	seg->n = n;
	seg->first = first;
	seg->dtype = (uint8_t)t->dtype;
	seg->encoding = RCKPT_SEG_QUANTIZED;
	seg->transform = (uint8_t)ckenc_transform_of(e, t);
	seg->nbins = q->nbins;
	memcpy(seg->centroids, q->centroids, sizeof(float) * q->nbins);
	if ((seg->idx = malloc(n ? (size_t)n : 1)) == NULL)
		return -ENOMEM;
	if ((rc = e->be->quantize(e, seg, t, grads, q, first, n, snap)))
		return rc;
	for (u = (first + stride - 1) / stride * stride; u < first + seg->n; u += stride)
		summary[u / stride] = seg->idx[u - first];
	return 0;
}

/* Piece [first, first + n) of tensor t, kept whole in seg. */
int ckenc_lossless_piece(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_ctensor_t *t,
			  uint64_t first, uint64_t n)
{
	const size_t dsz = rckpt_dtype_size(t->dtype);
	const void *src;
	void *owned;
	int rc = e->be->to_host(e, (const uint8_t *)t->data + first * dsz, (size_t)n * dsz, &src, &owned);
	if (rc == 0)
		rc = rckpt_codec_lossless_segment(seg, src, t->dtype, n);
	free(owned);
	seg->first = first;
	return rc;
}

/* ---- the one emission path ---- */

/* Tensor i's encoding: a kind the options keep lossless, else quantized
 * (full steps quantize exactly these; partial steps keep their values);
 * in an exact step, lossless. */
static unsigned encoding_of(const rckpt_ckenc_t *e, unsigned kind)
{
	return e->exact_step || e->o.fixed.lossless_kinds & (1u << kind) ? RCKPT_SEG_LOSSLESS : RCKPT_SEG_QUANTIZED;
}

int ckenc_emit_begin(ckenc_emit_t *x, rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink,
		     rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, uint64_t step,
		     uint64_t parent)
{
	rckpt_manifest_t *mf = &x->mf;
	unsigned i;

	memset(x, 0, sizeof(*x));
	x->e = e;
	x->sink = sink;
	x->st = st;
	mf->t = calloc(params->ntensors ? params->ntensors : 1, sizeof(*mf->t));
	mf->chunk = calloc(e->nchunks ? e->nchunks : 1, sizeof(*mf->chunk));
	if (!mf->t || !mf->chunk)
		return -ENOMEM;
	mf->step = step;
	mf->parent = parent;
	mf->chunk_params = e->o.chunk_params;
	mf->ntensors = params->ntensors;
	mf->nchunks = e->nchunks;
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_ctensor_t *t = &params->t[i];
		const unsigned kind = rckpt_ctensor_kind(t);
		mf->t[i].name = (char *)t->name; /* borrowed; emit_free leaves it */
		mf->t[i].dtype = (uint8_t)t->dtype;
		mf->t[i].kind = (uint8_t)kind;
		mf->t[i].encoding = (uint8_t)encoding_of(e, kind);
		mf->t[i].ndim = t->ndim;
		memcpy(mf->t[i].shape, t->shape, sizeof(t->shape));
		mf->t[i].norm = RCKPT_MF_NO_NORM;
		if (ckenc_norm_of(e, t) >= 0) {
			mf->t[i].norm = (uint32_t)ckenc_norm_of(e, t);
			mf->t[i].eps = (float)ckenc_eps(&params->t[mf->t[i].norm]);
		}
	}
	return sink->begin ? sink->begin(sink->arg, e->nchunks) : 0;
}

/* Segment k of chunk c, n elements, belongs to tensor t. */
static int mf_add_seg(rckpt_manifest_t *mf, uint32_t t, uint32_t c, uint32_t k, uint64_t n)
{
	rckpt_mf_tensor_t *mt = &mf->t[t];
	rckpt_mf_seg_t *ms = realloc(mt->seg, sizeof(*ms) * (mt->nseg + 1));
	if (ms == NULL)
		return -ENOMEM;
	mt->seg = ms;
	ms[mt->nseg++] = (rckpt_mf_seg_t){ c, k, n };
	mf->chunk[c].elements += (uint32_t)n;
	return 0;
}

/* The chunk's record, encoded, goes to the manifest and the sink, and
 * becomes the chunk's next parent (rc: the encoding's result). */
static int emit_finish(ckenc_emit_t *x, uint32_t c, rckpt_record_t *r, rckpt_buf_t *enc,
		       rckpt_buf_t *head, const uint8_t sha[32], int rc)
{
	rckpt_ckenc_t *e = x->e;
	rckpt_manifest_t *mf = &x->mf;
	rckpt_record_t *parent = &e->prev_chunks[c];
	uint32_t k;

	if (rc == 0 && r->nseg != e->npieces[c])
		rc = -EINVAL;
	for (k = 0; k < r->nseg && rc == 0; k++)
		rc = mf_add_seg(mf, e->pieces[c][k].tensor, c, k, e->pieces[c][k].n);
	mf->chunk[c].nseg = r->nseg;
	if (rc == 0) { /* the stored base a restore reads as it is: the head record, or a base */
		const rckpt_buf_t *base = head->len ? head : r->kind == RCKPT_REC_BASE ? enc : NULL;
		if (base && (rc = rckpt_sha256(mf->chunk[c].base_sha256, base->p, base->len)) == 0)
			mf->chunk[c].base_bytes = base->len;
	}
	if (rc == 0) {
		memcpy(mf->chunk[c].sha256, sha, 32);
		mf->chunk[c].record_bytes = enc->len;
		mf->enc_bytes += enc->len;
		x->st->head_bytes += head->len;
		rc = x->sink->record(x->sink->arg, c, enc, head);
	}
	rckpt_buf_free(enc);
	rckpt_buf_free(head);
	if (rc == 0) { /* this record is the chunk's next parent */
		rckpt_record_free(parent);
		*parent = *r;
	} else { /* the caller's step fails, and the next is a base */
		rckpt_record_free(r);
	}
	memset(r, 0, sizeof(*r));
	return rc;
}

/* A delta's head record (store.md "Head records"): the same step as a
 * base, its levels coded for a fast decode (Huffman alone, split in four
 * streams where the plugin reads that, no run lengths: the levels of
 * trained state have few runs, and without them a restore decodes
 * straight into the levels; no trials of other coders),
 * so that a restore of it reads one record whatever the chain. */
static int encode_head(const rckpt_record_t *r, const rckpt_istream_opts_t *is, rckpt_buf_t *head)
{
	rckpt_istream_opts_t hs = *is;
	rckpt_record_t b = *r;
	b.kind = RCKPT_REC_BASE;
	b.parent = RCKPT_NO_PARENT;
	hs.stages = 0;
	hs.est_policy = RCKPT_EST_TRY_HUFF | (is->est_policy & RCKPT_EST_SPLIT);
	hs.predict = 0;
	return rckpt_record_encode(head, &b, NULL, &hs);
}

/* Record r of chunk c encoded against the chunk's parent (and, when the
 * options ask for one and r is not a base, its head record), and its
 * digest: a function of r and the parent alone, so chunks may run at
 * once. */
static int encode_chunk(const rckpt_ckenc_t *e, uint32_t c, const rckpt_record_t *r, uint32_t block,
			const rckpt_sparse_sel_t *sel, const rckpt_istream_opts_t *is, rckpt_buf_t *enc,
			rckpt_buf_t *head, uint8_t sha[32])
{
	const rckpt_record_t *parent = &e->prev_chunks[c];
	int rc;
	if (r->kind == RCKPT_REC_SPARSE)
		rc = rckpt_record_encode_sparse(enc, r, parent, block, sel, is);
	else
		rc = rckpt_record_encode(enc, r, r->kind == RCKPT_REC_BASE ? NULL : parent, is);
	if (rc == 0 && e->o.heads && r->kind != RCKPT_REC_BASE)
		rc = encode_head(r, is, head);
	return rc ? rc : rckpt_record_digest(sha, r);
}

int ckenc_emit_chunk(ckenc_emit_t *x, uint32_t c, rckpt_record_t *r, uint32_t block,
		     const rckpt_sparse_sel_t *sel)
{
	rckpt_buf_t enc = RCKPT_BUF_INIT, head = RCKPT_BUF_INIT;
	uint8_t sha[32];
	int rc = r->nseg == x->e->npieces[c]
			 ? encode_chunk(x->e, c, r, block, sel, &x->e->o.is, &enc, &head, sha)
			 : -EINVAL;
	return emit_finish(x, c, r, &enc, &head, sha, rc);
}

/* The configuration and statistics, then the bytes. */
int ckenc_emit_end(ckenc_emit_t *x, rckpt_buf_t *manifest)
{
	rckpt_manifest_t *mf = &x->mf;
	const rckpt_ckenc_stats_t *st = x->st;
	unsigned k;
	int rc;
	mf->raw_bytes = st->raw_bytes;
	mf->quality = st->quality;
	mf->opt_quality = st->opt_quality;
	mf->cfg.bins = (uint8_t)st->config.bins;
	mf->cfg.emb_bins = (uint8_t)st->config.emb_bins;
	mf->cfg.metric = (uint8_t)st->config.prune_metric;
	mf->cfg.flags = (uint8_t)(st->config.protect_by_sensitivity ? 1 : 0);
	for (k = 0; k < RCKPT_MF_KINDS; k++)
		mf->cfg.prune[k] = st->config.prune_frac[k];
	mf->cfg.protect = st->config.protect_frac;
	mf->cfg.lambda = st->config.lambda;
	rc = rckpt_manifest_encode(manifest, mf);
	if (rc == 0)
		x->st->enc_bytes = mf->enc_bytes + manifest->len;
	rckpt_manifest_optim_bytes(mf, &x->st->opt_raw_bytes, &x->st->opt_enc_bytes);
	return rc;
}

void ckenc_emit_free(ckenc_emit_t *x)
{
	rckpt_manifest_t *mf = &x->mf;
	uint32_t i;
	for (i = 0; mf->t && i < mf->ntensors; i++)
		free(mf->t[i].seg);
	free(mf->t);
	free(mf->chunk);
	memset(mf, 0, sizeof(*mf));
}

/* ---- chunks at once (opts.threads; the helpers' scratch: ckenc_par.c) ---- */

/* What one full step's emission needs to build a chunk's record. */
typedef struct fullctx {
	rckpt_ckenc_t *e;
	const rckpt_tset_t *params;
	const float *const *tg;
	const rckpt_qparams_t *const *tq;
	const uint64_t *stride;
	rckpt_record_t *sum;
	uint64_t step, parent;
	int is_base;
} fullctx_t;

/* Chunk c's record with every piece quantized or kept, by encoder e (the
 * step's encoder, or a helper's view of it with its own scratch). */
static int build_chunk(rckpt_ckenc_t *e, const fullctx_t *f, uint32_t c, rckpt_record_t *r)
{
	uint32_t k;
	int rc = 0;
	memset(r, 0, sizeof(*r));
	r->kind = f->is_base ? RCKPT_REC_BASE : RCKPT_REC_DELTA;
	r->step = f->step;
	r->parent = f->parent;
	r->nseg = e->npieces[c];
	r->seg = calloc(r->nseg ? r->nseg : 1, sizeof(rckpt_seg_t));
	if (r->seg == NULL)
		return -ENOMEM;
	for (k = 0; k < r->nseg && rc == 0; k++) {
		const rckpt_piece_t *pc = &e->pieces[c][k];
		const rckpt_ctensor_t *t = &f->params->t[pc->tensor];
		if (f->tq[pc->tensor])
			rc = quantize_piece(e, &r->seg[k], t, f->tg[pc->tensor], f->tq[pc->tensor], pc->first, pc->n,
					    f->stride[pc->tensor], f->sum->seg[pc->tensor].idx,
					    e->saved && e->saved[pc->tensor] ? e->saved[pc->tensor] + pc->first : NULL);
		else
			rc = ckenc_lossless_piece(e, &r->seg[k], t, pc->first, pc->n);
		r->seg[k].tensor = pc->gtensor; /* the record names the global tensor */
		r->seg[k].first = pc->gfirst;
	}
	return rc;
}

typedef struct pjob {
	rckpt_record_t r;
	rckpt_buf_t enc, head;
	uint8_t sha[32];
	uint32_t c;
	int built; /* quantized already (by the step's thread) */
	int rc;
} pjob_t;

typedef struct pbatch {
	const fullctx_t *f;
	pjob_t *job;
	unsigned njob, next;
	pthread_mutex_t mu;
} pbatch_t;

typedef struct pthr {
	pbatch_t *b;
	rckpt_ckenc_t view; /* the step's encoder with this thread's scratch */
	rckpt_istream_opts_t is;
} pthr_t;

static void *run_jobs(void *arg)
{
	pthr_t *t = arg;
	pbatch_t *b = t->b;
	for (;;) {
		pjob_t *j;
		pthread_mutex_lock(&b->mu);
		j = b->next < b->njob ? &b->job[b->next++] : NULL;
		pthread_mutex_unlock(&b->mu);
		if (j == NULL)
			return NULL;
		j->rc = j->built ? 0 : build_chunk(&t->view, b->f, j->c, &j->r);
		if (j->rc == 0)
			j->rc = encode_chunk(&t->view, j->c, &j->r, 0, NULL, &t->is, &j->enc, &j->head, j->sha);
	}
}

/* The step's thread and `threads - 1` helpers over chunks [c0, c0 + n):
 * each chunk quantized (on the CPU backend; the GPU's chunks are
 * quantized by the step's thread first, its device state being one) and
 * encoded, then handed on in chunk order. */
static int emit_batch(ckenc_emit_t *x, const fullctx_t *f, pjob_t *job, uint32_t c0, unsigned n,
		      unsigned threads)
{
	rckpt_ckenc_t *e = f->e;
	pthr_t thr[RCKPT_CKENC_THREADS_MAX];
	pthread_t tid[RCKPT_CKENC_THREADS_MAX];
	pbatch_t b = { f, job, n, 0, PTHREAD_MUTEX_INITIALIZER };
	unsigned i, started = 0;
	int rc = 0;

	for (i = 0; i < n; i++) {
		memset(&job[i], 0, sizeof(job[i]));
		job[i].c = c0 + i;
		if (!e->be->host) {
			job[i].rc = build_chunk(e, f, c0 + i, &job[i].r);
			job[i].built = 1;
		}
	}
	if (threads > n)
		threads = n;
	for (i = 0; i < threads; i++) {
		thr[i].b = &b;
		thr[i].view = *e;
		thr[i].is = e->o.is;
		if (i > 0) { /* thread 0 is this one, with the encoder's own scratch */
			struct ckenc_worker *w = &e->workers[i - 1];
			thr[i].view.wblk = w->wblk;
			thr[i].view.nblk = w->nblk;
			thr[i].view.iblk = w->iblk;
			thr[i].view.pblk = w->pblk;
			thr[i].is.scratch = &w->is;
			if (pthread_create(&tid[i], NULL, run_jobs, &thr[i]))
				break; /* fewer helpers: the rest is done here */
			started++;
		}
	}
	run_jobs(&thr[0]);
	for (i = 0; i < started; i++)
		pthread_join(tid[i + 1], NULL);
	for (i = 0; i < n; i++) {
		if (rc == 0)
			rc = emit_finish(x, job[i].c, &job[i].r, &job[i].enc, &job[i].head, job[i].sha, job[i].rc);
		else { /* after a failure nothing more is handed on */
			rckpt_record_free(&job[i].r);
			rckpt_buf_free(&job[i].enc);
			rckpt_buf_free(&job[i].head);
		}
	}
	return rc;
}

/* Cuts the step into chunks, a record each (base, or delta against the
 * chunk's last record), quantizing each piece as its chunk is built, and
 * hands each record to the sink as soon as it is encoded (with
 * opts.threads, a batch of that many chunks at a time, in chunk order);
 * then the manifest. */
int ckenc_emit_full(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
		    rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, const float *const *tg,
		    const rckpt_qparams_t *const *tq, const uint64_t *stride, rckpt_record_t *sum,
		    uint64_t step)
{
	const uint64_t parent = st->is_base ? RCKPT_NO_PARENT : e->prev.step;
	const fullctx_t f = { e, params, tg, tq, stride, sum, step, parent, st->is_base };
	unsigned threads = e->o.threads > RCKPT_CKENC_THREADS_MAX ? RCKPT_CKENC_THREADS_MAX : e->o.threads;
	ckenc_emit_t x;
	uint32_t c;
	int rc = ckenc_emit_begin(&x, e, sink, st, params, step, parent);

	if (threads > e->nchunks)
		threads = e->nchunks;
	{ /* a small step: starting threads would cost more than they save */
		uint64_t n = 0;
		unsigned i;
		for (i = 0; i < params->ntensors; i++)
			n += params->t[i].n;
		if (ckenc_threads_for(&e->o, n) == 1)
			threads = 1;
	}
	if (rc == 0 && threads > 1 && ckenc_workers_ensure(e, threads - 1))
		threads = 1; /* no memory for helpers: one at a time */
	if (threads > 1) {
		pjob_t *job = calloc(threads, sizeof(*job));
		if (job == NULL)
			rc = -ENOMEM;
		for (c = 0; c < e->nchunks && rc == 0; c += threads) {
			const unsigned n = e->nchunks - c < threads ? e->nchunks - c : threads;
			rc = emit_batch(&x, &f, job, c, n, threads);
		}
		free(job);
		/* the helpers' scratch is a chunk's worth each: not kept
		 * between saves, whose state is documented as one byte per
		 * parameter (rckpt.h, mem_budget) */
		ckenc_workers_free(e);
	}
	for (c = 0; threads <= 1 && c < e->nchunks && rc == 0; c++) {
		rckpt_record_t r;
		rc = build_chunk(e, &f, c, &r);
		if (rc == 0)
			rc = ckenc_emit_chunk(&x, c, &r, 0, NULL);
		else
			rckpt_record_free(&r);
	}
	if (rc == 0)
		rc = ckenc_emit_end(&x, manifest);
	ckenc_emit_free(&x);
	return rc;
}

/* The next step's summary of this one: per tensor its header (dtype, size,
 * encoding, codebook) and, when quantized, its levels at the sample
 * positions, which ckenc_emit_full fills. */
int ckenc_summary_init(const rckpt_ckenc_t *e, rckpt_record_t *sum, const rckpt_tset_t *params,
			const rckpt_qparams_t *const *tq, const uint64_t *stride, uint64_t step)
{
	unsigned i;
	memset(sum, 0, sizeof(*sum));
	sum->step = step;
	sum->nseg = params->ntensors;
	sum->seg = calloc(params->ntensors ? params->ntensors : 1, sizeof(*sum->seg));
	if (sum->seg == NULL)
		return -ENOMEM;
	for (i = 0; i < params->ntensors; i++) {
		rckpt_seg_t *s = &sum->seg[i];
		s->tensor = i;
		s->n = params->t[i].n;
		s->dtype = (uint8_t)params->t[i].dtype;
		s->encoding = tq[i] ? RCKPT_SEG_QUANTIZED : RCKPT_SEG_LOSSLESS;
		if (tq[i] == NULL)
			continue;
		s->transform = (uint8_t)ckenc_transform_of(e, &params->t[i]);
		s->nbins = tq[i]->nbins;
		memcpy(s->centroids, tq[i]->centroids, sizeof(float) * tq[i]->nbins);
		s->idx = calloc(s->n / stride[i] + 1, 1);
		if (s->idx == NULL)
			return -ENOMEM;
	}
	return 0;
}
