/*
 * ckenc_partial.c — partial steps (SCAR): the blocks that moved most since
 * they were last saved, requantized with the last full step's codebooks,
 * as one sparse record per chunk.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"
#include "rckpt_gpu.h"
#include "rckpt_store_wire.h" /* RCKPT_STORE_CHAIN_REBASE */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_clock.h"

int rckpt_ckenc_partial_ready(const rckpt_ckenc_t *e)
{
	return e->o.partial_block && e->steps > 0 && !e->force_base && !e->exact_last && e->saved != NULL &&
	       e->depth < RCKPT_STORE_CHAIN_REBASE; /* else a full step, a base */
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

typedef struct blkref {
	double d;
	uint64_t i;
} blkref_t;

static int by_distance(const void *a, const void *b)
{
	const blkref_t *x = a, *y = b;
	if (x->d != y->d)
		return x->d > y->d ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* A deep copy of a decoded record. */
static int record_copy(rckpt_record_t *dst, const rckpt_record_t *src)
{
	uint32_t i;
	*dst = *src;
	dst->seg = calloc(src->nseg ? src->nseg : 1, sizeof(*dst->seg));
	if (dst->seg == NULL)
		return -ENOMEM;
	for (i = 0; i < src->nseg; i++) {
		const rckpt_seg_t *a = &src->seg[i];
		rckpt_seg_t *b = &dst->seg[i];
		*b = *a;
		b->idx = NULL;
		b->prot = NULL;
		b->raw = NULL;
		if (a->encoding == RCKPT_SEG_LOSSLESS)
			continue; /* replaced whole by the caller */
		b->idx = malloc(a->n ? (size_t)a->n : 1);
		b->prot = malloc(a->nprot ? 2 * (size_t)a->nprot : 2);
		if (!b->idx || !b->prot) {
			rckpt_record_free(dst);
			return -ENOMEM;
		}
		if (a->n)
			memcpy(b->idx, a->idx, (size_t)a->n);
		if (a->nprot)
			memcpy(b->prot, a->prot, 2 * (size_t)a->nprot);
	}
	return 0;
}

/* The quantized blocks of a piece of n elements. */
static uint64_t piece_blocks(uint64_t n, uint32_t block)
{
	return n / block + (n % block != 0);
}

/* Protected values of seg after its blocks sel[] were requantized: the old
 * ones (of ps, the levels before) outside, nw[] (in order) inside. */
static int merge_prot(rckpt_seg_t *seg, const rckpt_seg_t *ps, uint32_t block, const uint32_t *sel,
		      uint32_t nsel, const uint16_t *nw, uint64_t nnw)
{
	const uint8_t P = (uint8_t)(seg->nbins + 1);
	uint64_t pos = 0, pp = 0, total = 0, i, lo, hi, c;
	uint16_t *out;
	uint32_t b;

	for (i = 0; i < seg->n; i++)
		total += seg->idx[i] == P;
	out = malloc(total ? 2 * (size_t)total : 2);
	if (out == NULL)
		return -ENOMEM;
	seg->nprot = 0;
	for (b = 0; b <= nsel; b++) {
		lo = b < nsel ? (uint64_t)sel[b] * block : seg->n;
		hi = b < nsel ? (seg->n - lo > block ? lo + block : seg->n) : seg->n;
		for (i = pos; i < lo; i++)
			if (ps->idx[i] == P)
				out[seg->nprot++] = ps->prot[pp++];
		for (i = lo; i < hi; i++)
			pp += ps->idx[i] == P;
		pos = hi;
	}
	/* insert the blocks' new values at their places: a second walk */
	{
		uint16_t *merged = malloc(total ? 2 * (size_t)total : 2);
		uint64_t o = 0, n = 0, q = 0;
		if (merged == NULL) {
			free(out);
			return -ENOMEM;
		}
		pos = 0;
		for (b = 0; b <= nsel; b++) {
			lo = b < nsel ? (uint64_t)sel[b] * block : seg->n;
			hi = b < nsel ? (seg->n - lo > block ? lo + block : seg->n) : seg->n;
			for (c = 0, i = pos; i < lo; i++)
				c += seg->idx[i] == P;
			if (c)
				memcpy(merged + n, out + o, 2 * (size_t)c);
			n += c;
			o += c;
			for (c = 0, i = lo; i < hi; i++)
				c += seg->idx[i] == P;
			if (q + c > nnw) {
				free(out);
				free(merged);
				return -EINVAL;
			}
			if (c)
				memcpy(merged + n, nw + q, 2 * (size_t)c);
			n += c;
			q += c;
			pos = hi;
		}
		free(out);
		free(seg->prot);
		seg->prot = merged;
		seg->nprot = n;
		return n == total && q == nnw ? 0 : -EINVAL;
	}
}

/* The weights of tensor i's error: the update error's for the optimizer's
 * state, the gradients' for the model's. */
static const float *weights_of(const ckenc_upd_t *upd, const rckpt_tset_t *grads,
			       const rckpt_ctensor_t *t, unsigned i)
{
	const rckpt_ctensor_t *g;
	if (rckpt_lk_is_optim(rckpt_ctensor_kind(t)))
		return upd->w ? upd->w[i] : NULL;
	g = grads ? rckpt_tset_find(grads, t->name) : NULL;
	return g ? (const float *)g->data : NULL;
}

/* Weights g0 (gradients, or update weights) of elements [first, first + n)
 * in host memory: g0 + first, or with a device backend, whose gradients
 * may be in device memory, a copy (*owned, the caller frees it). */
static int host_weights(rckpt_ckenc_t *e, const float *g0, uint64_t first, size_t n, const float **out,
			void **owned)
{
	const void *h;
	int rc;
	*owned = NULL;
	*out = g0 ? g0 + first : NULL;
	if (g0 == NULL || e->be->host || !rckpt_gpu_is_device_ptr(g0))
		return 0;
	if ((rc = e->be->to_host(e, g0 + first, 4 * n, &h, owned)))
		return rc;
	*out = h;
	return 0;
}

/* Gradients handed to a partial step must be aligned fp32 of their
 * tensors' shapes: 0, or -EINVAL with msg set. */
static int partial_check_grads(const rckpt_tset_t *params, const rckpt_tset_t *grads, char *msg,
			       size_t msglen)
{
	unsigned i;
	for (i = 0; grads && i < params->ntensors; i++) {
		const rckpt_ctensor_t *g = rckpt_tset_find(grads, params->t[i].name);
		if (g != NULL && (g->dtype != RCKPT_DT_F32 || g->n != params->t[i].n || ((uintptr_t)g->data & 3))) {
			snprintf(msg, msglen, "gradients of '%s' are not aligned fp32 of its shape",
				 params->t[i].name);
			return -EINVAL;
		}
	}
	return 0;
}

/* How far each block moved since it was last saved (dist[], numbered in
 * layout order from boff), `run` elements at a time. */
static int partial_measure(rckpt_ckenc_t *e, const rckpt_tset_t *params, uint64_t run, uint32_t block,
			   uint64_t *const *boff, double *dist, char *msg, size_t msglen)
{
	uint32_t c, k;
	uint64_t u;
	int rc = 0;
	for (c = 0; c < e->nchunks && rc == 0; c++)
		for (k = 0; k < e->npieces[c] && rc == 0; k++) {
			const rckpt_piece_t *pc = &e->pieces[c][k];
			const rckpt_ctensor_t *t = &params->t[pc->tensor];
			const float *sv = e->saved[pc->tensor];
			if (sv == NULL)
				continue;
			for (u = 0; u < pc->n && rc == 0; u += run) {
				const size_t m = pc->n - u < run ? (size_t)(pc->n - u) : (size_t)run;
				uint64_t bad = 0;
				/* on the device when the backend is (rckpt_gpu_block_dist) */
				rc = e->be->block_dist(e, dist + boff[c][k] + u / block, t, pc->first + u, m,
						       sv + pc->first + u, block, &bad);
				if (rc == -EDOM)
					snprintf(msg, msglen, "tensor '%s' holds NaN or Inf at element %llu", t->name,
						 (unsigned long long)bad);
				else if (rc)
					snprintf(msg, msglen, "tensor '%s': the change distance failed: %s", t->name,
						 strerror(-rc));
			}
		}
	return rc;
}

/* The blocks a partial step chooses among: those of the tensors not kept
 * as bf16, their numbers into elig[0, *nel) and their distances moved to
 * the front of dist; every other block is marked chosen. */
static void partial_eligible(const rckpt_ckenc_t *e, const rckpt_tset_t *params, uint64_t *const *boff,
			     double *dist, uint8_t *chosen, uint64_t *nel, uint64_t *elig)
{
	uint32_t c, k;
	uint64_t b, n = 0;
	for (c = 0; c < e->nchunks; c++)
		for (k = 0; k < e->npieces[c]; k++) {
			const rckpt_piece_t *pc = &e->pieces[c][k];
			const int always = (e->o.fixed.bf16_kinds >> rckpt_ctensor_kind(&params->t[pc->tensor])) & 1;
			if (e->saved[pc->tensor] == NULL)
				continue;
			for (b = boff[c][k]; b < boff[c][k] + piece_blocks(pc->n, e->o.partial_block); b++) {
				if (always)
					chosen[b] = 1;
				else
					elig[n++] = b;
			}
		}
	for (b = 0; b < n; b++) /* elig is ascending: each move is to a place at or before its own */
		dist[b] = dist[elig[b]];
	*nel = n;
}

/* Marks `want` of the nb blocks chosen[], as p->select says. 0 or -ENOMEM. */
static int partial_choose(const rckpt_ckenc_t *e, const rckpt_ckenc_partial_t *p, uint64_t step,
			  const double *dist, uint64_t nb, uint64_t want, uint8_t *chosen)
{
	uint64_t b;
	if (p->select == RCKPT_CKENC_PRIORITY) {
		blkref_t *r = malloc(nb ? sizeof(*r) * (size_t)nb : sizeof(*r));
		if (r == NULL)
			return -ENOMEM;
		for (b = 0; b < nb; b++)
			r[b] = (blkref_t){ dist[b], b };
		qsort(r, (size_t)nb, sizeof(*r), by_distance);
		for (b = 0; b < want; b++)
			chosen[r[b].i] = 1;
		free(r);
	} else if (p->select == RCKPT_CKENC_ROUND_ROBIN) {
		for (b = 0; b < want; b++)
			chosen[(e->rr_cursor + b) % nb] = 1;
	} else {
		uint64_t *perm = malloc(nb ? 8 * (size_t)nb : 8), x = p->seed ^ (step * 0x9e3779b97f4a7c15ull);
		if (perm == NULL)
			return -ENOMEM;
		for (b = 0; b < nb; b++)
			perm[b] = b;
		for (b = 0; b < want; b++) { /* a partial Fisher-Yates */
			uint64_t j = b + splitmix64(&x) % (nb - b), tmp = perm[b];
			perm[b] = perm[j];
			perm[j] = tmp;
			chosen[perm[b]] = 1;
		}
		free(perm);
	}
	return 0;
}

/* The relative error of the chosen blocks' values with the last full
 * step's codebooks (gradient-weighted when given) into *quality. */
static int partial_judge(rckpt_ckenc_t *e, const rckpt_tset_t *params, const rckpt_tset_t *grads,
			 const ckenc_upd_t *upd, uint64_t *const *boff, const uint8_t *chosen, uint16_t *nw,
			 uint32_t block, double *quality)
{
	float *deq = malloc(4 * (size_t)block);
	double num = 0, den = 0;
	uint32_t c, k;
	uint64_t b;
	int rc = 0;
	if (deq == NULL)
		return -ENOMEM;
	for (c = 0; c < e->nchunks && rc == 0; c++)
		for (k = 0; k < e->npieces[c] && rc == 0; k++) {
			const rckpt_piece_t *pc = &e->pieces[c][k];
			const rckpt_ctensor_t *t = &params->t[pc->tensor];
			const float *g0 = weights_of(upd, grads, t, pc->tensor);
			if (e->saved[pc->tensor] == NULL ||
			    (e->o.fixed.bf16_kinds & (1u << rckpt_ctensor_kind(t))))
				continue; /* a kind kept as bf16 adds nothing to the sums */
			for (b = 0; b < piece_blocks(pc->n, block) && rc == 0; b++) {
				const uint64_t lo = b * block, len = pc->n - lo > block ? block : pc->n - lo;
				const float *w, *gd;
				void *gown;
				size_t np, j;
				if (!chosen[boff[c][k] + b])
					continue;
				if ((rc = host_weights(e, g0, pc->first + lo, (size_t)len, &gd, &gown)))
					break;
				w = ckenc_values(e, t, pc->first + lo, (size_t)len);
				rckpt_quantize(e->iblk, nw, &np, w, gd, (size_t)len, &e->lastq[pc->tensor]);
				rc = rckpt_dequantize(deq, e->iblk, (size_t)len, &e->lastq[pc->tensor], nw, np);
				for (j = 0; rc == 0 && j < len; j++) {
					const double gg = gd ? (double)gd[j] * gd[j] : 1.0, d = (double)w[j] - deq[j];
					num += gg * d * d;
					den += gg * (double)w[j] * w[j];
				}
				free(gown);
			}
		}
	free(deq);
	*quality = den > 0 ? num / den : 0;
	return rc;
}

/* Piece pc's chosen blocks (from chosen[], its blocks numbered from
 * `first`) quantized into seg (a copy of its parent's, prev) with the last
 * codebooks, their values kept as saved (sv), the block numbers into
 * sel->blocks (room for all), the protected values merged. */
static int partial_piece(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_seg_t *prev,
			 const rckpt_piece_t *pc, const rckpt_ctensor_t *t, const float *g0, float *sv,
			 const uint8_t *chosen, uint32_t block, uint16_t *nw, rckpt_sparse_sel_t *sel,
			 uint32_t *blocks)
{
	const uint64_t npb = piece_blocks(pc->n, block);
	uint64_t b, nnw = 0, cap = 0;
	uint16_t *acc = NULL;
	int rc = 0;
	sel->blocks = blocks;
	for (b = 0; b < npb && rc == 0; b++) {
		const uint64_t lo = b * block, len = pc->n - lo > block ? block : pc->n - lo;
		const float *w, *gd;
		void *gown;
		size_t np;
		if (!chosen[b])
			continue;
		if ((rc = host_weights(e, g0, pc->first + lo, (size_t)len, &gd, &gown)))
			break;
		w = ckenc_values(e, t, pc->first + lo, (size_t)len);
		rckpt_quantize(seg->idx + lo, nw, &np, w, gd, (size_t)len, &e->lastq[pc->tensor]);
		free(gown);
		memcpy(sv + pc->first + lo, w, 4 * (size_t)len);
		if (nnw + np > cap) {
			uint64_t nc = (nnw + np) * 2;
			uint16_t *a = realloc(acc, 2 * (size_t)nc);
			if (a == NULL) {
				rc = -ENOMEM;
				break;
			}
			acc = a;
			cap = nc;
		}
		if (np)
			memcpy(acc + nnw, nw, 2 * np);
		nnw += np;
		blocks[sel->nblocks++] = (uint32_t)b;
	}
	if (rc == 0)
		rc = merge_prot(seg, prev, block, blocks, sel->nblocks, acc, nnw);
	free(acc);
	return rc;
}

/* Chunk c's sparse record of step: its chosen blocks requantized, handed
 * to the emission. */
static int partial_chunk(rckpt_ckenc_t *e, ckenc_emit_t *x, uint32_t c, const rckpt_tset_t *params,
			 const rckpt_tset_t *grads, const ckenc_upd_t *upd, uint64_t step,
			 uint64_t *const *boff, const uint8_t *chosen, uint32_t block, uint16_t *nw)
{
	const rckpt_record_t *prev = &e->prev_chunks[c];
	rckpt_sparse_sel_t *sel = calloc(e->npieces[c] ? e->npieces[c] : 1, sizeof(*sel));
	uint32_t **bl = calloc(e->npieces[c] ? e->npieces[c] : 1, sizeof(*bl));
	rckpt_record_t r;
	uint32_t k;
	int rc = 0;
	memset(&r, 0, sizeof(r));
	if (!sel || !bl || prev->nseg != e->npieces[c])
		rc = sel && bl ? -EINVAL : -ENOMEM;
	if (rc == 0)
		rc = record_copy(&r, prev);
	r.kind = RCKPT_REC_SPARSE;
	r.step = step;
	r.parent = prev->step;
	for (k = 0; k < e->npieces[c] && rc == 0; k++) {
		const rckpt_piece_t *pc = &e->pieces[c][k];
		const rckpt_ctensor_t *t = &params->t[pc->tensor];
		const uint64_t npb = piece_blocks(pc->n, block);
		if (e->saved[pc->tensor] == NULL) {
			rc = ckenc_lossless_piece(e, &r.seg[k], t, pc->first, pc->n);
			r.seg[k].tensor = pc->tensor;
			continue;
		}
		if ((bl[k] = malloc(npb ? 4 * (size_t)npb : 4)) == NULL) {
			rc = -ENOMEM;
			break;
		}
		rc = partial_piece(e, &r.seg[k], &prev->seg[k], pc, t, weights_of(upd, grads, t, pc->tensor),
				   e->saved[pc->tensor], chosen + boff[c][k], block, nw, &sel[k], bl[k]);
	}
	if (rc == 0)
		rc = ckenc_emit_chunk(x, c, &r, block, sel);
	else
		rckpt_record_free(&r);
	for (k = 0; bl && k < e->npieces[c]; k++)
		free(bl[k]);
	free(bl);
	free(sel);
	return rc;
}

int rckpt_ckenc_step_partial(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink,
			     rckpt_buf_t *manifest, rckpt_ckenc_stats_t *st,
			     const rckpt_tset_t *params, const rckpt_tset_t *grads, uint64_t step,
			     const rckpt_ckenc_partial_t *p, char *msg, size_t msglen)
{
	const uint32_t block = e->o.partial_block;
	const uint64_t run = block <= BLK ? BLK / block * block : 0;
	ckenc_emit_t x;
	uint64_t **boff = NULL, nb = 0, want, nel = 0, b, *elig = NULL;
	double *dist = NULL;
	uint8_t *chosen = NULL;
	uint16_t *nw = NULL;
	uint32_t c, k;
	unsigned i;
	int rc = 0;
	double t0 = rckpt_now_s();
	ckenc_upd_t upd = { 0 };

	memset(st, 0, sizeof(*st));
	memset(&x, 0, sizeof(x));
	st->step = step;
	if (!rckpt_ckenc_partial_ready(e) || run == 0) {
		snprintf(msg, msglen, "a partial step needs a full one before it%s",
			 e->o.partial_block ? "" : " and the job's partial_block");
		return -EINVAL;
	}
	if (!(p->fraction > 0 && p->fraction <= 1) || p->select > RCKPT_CKENC_RANDOM) {
		snprintf(msg, msglen, "fraction must be in (0, 1] and select known");
		return -EINVAL;
	}
	if (!ckenc_same_tensors(e, params)) {
		snprintf(msg, msglen, "the tensors differ from the last step's: a full step");
		return -ERANGE;
	}
	/* the tensors may hold new values at the same addresses */
	e->be->step_begin(e);
	if ((rc = partial_check_grads(params, grads, msg, msglen)))
		return rc;
	for (i = 0; i < params->ntensors; i++)
		if (rckpt_lk_is_optim(rckpt_ctensor_kind(&params->t[i])))
			break;
	if (i < params->ntensors && (rc = ckenc_update_terms(e, &upd, params)))
		return rc;
	/* Number the blocks in layout order and measure how far each moved. */
	boff = calloc(e->nchunks ? e->nchunks : 1, sizeof(*boff));
	if (boff == NULL)
		return -ENOMEM;
	for (c = 0; c < e->nchunks && rc == 0; c++) {
		boff[c] = calloc(e->npieces[c] ? e->npieces[c] : 1, sizeof(**boff));
		if (boff[c] == NULL) {
			rc = -ENOMEM;
			break;
		}
		for (k = 0; k < e->npieces[c]; k++) {
			boff[c][k] = nb;
			if (e->saved[e->pieces[c][k].tensor])
				nb += piece_blocks(e->pieces[c][k].n, block);
		}
	}
	if (rc == 0) {
		dist = malloc(nb ? 8 * (size_t)nb : 8);
		chosen = calloc(nb ? 2 * (size_t)nb : 1, 1); /* and the eligible blocks' choice */
		elig = malloc(nb ? 8 * (size_t)nb : 8);
		nw = malloc(2 * (size_t)(block > BLK ? block : BLK));
		if (!dist || !chosen || !nw || !elig)
			rc = -ENOMEM;
	}
	for (i = 0; i < params->ntensors; i++)
		st->raw_bytes += (size_t)params->t[i].n * 4;
	if (rc || (rc = partial_measure(e, params, run, block, boff, dist, msg, msglen)))
		goto out;
	/* Choose among the blocks of the tensors not kept as bf16 (the first
	 * nel after numbering them apart); a kind kept as bf16 (norms,
	 * biases: a few values) is saved whole in every step, as a lossless
	 * one would be, outside the fraction. */
	partial_eligible(e, params, boff, dist, chosen, &nel, elig);
	want = nel ? (uint64_t)ceil(p->fraction * (double)nel - 1e-9) : 0;
	if (nel && want < 1)
		want = 1;
	if (want > nel)
		want = nel;
	if ((rc = partial_choose(e, p, step, dist, nel, want, chosen + nb)))
		goto out;
	for (b = 0; b < nel; b++)
		chosen[elig[b]] = chosen[nb + b];
	/* The chosen blocks must meet eps with the last full step's codebooks
	 * (the relative error of their values, gradient-weighted when given):
	 * when training has moved them out of those codebooks' reach, the
	 * caller makes this a full step instead, which fits new ones. */
	if ((rc = partial_judge(e, params, grads, &upd, boff, chosen, nw, block, &st->quality)))
		goto out;
	if (st->quality > e->o.eps) {
		snprintf(msg, msglen, "the chosen blocks' error %.3g is over eps with the last codebooks",
			 st->quality);
		rc = -ERANGE;
		goto out;
	}
	st->blocks = nel;
	st->blocks_saved = want;
	st->config = e->lastcfg;
	st->accepted = 1;
	st->t_search = rckpt_now_s() - t0;

	/* One sparse record per chunk. */
	t0 = rckpt_now_s();
	rc = ckenc_emit_begin(&x, e, sink, st, params, step, e->prev.step);
	if (rc == 0)
		e->force_base = 1; /* until every chunk's parent is replaced */
	for (c = 0; c < e->nchunks && rc == 0; c++)
		rc = partial_chunk(e, &x, c, params, grads, &upd, step, boff, chosen, block, nw);
	if (rc == 0)
		rc = ckenc_emit_end(&x, manifest);
	if (rc)
		goto out;
	e->force_base = 0;
	e->depth++;
	e->prev.step = step; /* the next step's parent */
	if (p->select == RCKPT_CKENC_ROUND_ROBIN && nel)
		e->rr_cursor = (e->rr_cursor + want) % nel;
	st->t_encode = rckpt_now_s() - t0;
out:
	ckenc_emit_free(&x);
	for (c = 0; boff && c < e->nchunks; c++)
		free(boff[c]);
	free(boff);
	free(dist);
	free(elig);
	ckenc_update_free(&upd);
	free(chosen);
	free(nw);
	return rc;
}
