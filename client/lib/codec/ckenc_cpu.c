/*
 * ckenc_cpu.c — the encoder's compute backend on the CPU: the reference
 * that ckenc_cuda.c must match bit for bit. Tensors go through in blocks
 * of BLK elements, so a step's working memory does not grow with the model.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void cpu_step_begin(rckpt_ckenc_t *e)
{
	(void)e;
}

static int cpu_prepare(rckpt_ckenc_t *e, rckpt_tensor_prep_t *p, uint64_t *bad,
		       const rckpt_ctensor_t *t, const float *g, unsigned kind, sample_t *sp)
{
	uint64_t k, u;
	int rc = rckpt_codec_prep_begin(p, t->dtype, t->n, g, kind);

	for (k = 0; k < t->n && rc == 0; k += BLK) {
		const size_t m = t->n - k < BLK ? (size_t)(t->n - k) : BLK;
		const float *w = ckenc_values(e, t, k, m);
		rc = rckpt_codec_prep_add(p, w, g ? g + k : NULL, m, bad);
		if (rc == -EDOM)
			*bad += k;
		for (u = (k + sp->stride - 1) / sp->stride * sp->stride; rc == 0 && u < k + m;
		     u += sp->stride) {
			sp->w[sp->n] = w[u - k];
			if (g)
				sp->g[sp->n] = g[u];
			sp->n++;
		}
	}
	return rc ? rc : rckpt_codec_prep_end(p);
}

static int cpu_qerr(rckpt_ckenc_t *e, double *num, double *den, const rckpt_ctensor_t *t,
		    const float *g, const rckpt_qparams_t *q)
{
	rckpt_qerr_t *qe = &e->qerr;
	uint64_t k;
	int rc = 0;
	rckpt_qerr_init(qe);
	for (k = 0; k < t->n && rc == 0; k += BLK) {
		const size_t m = t->n - k < BLK ? (size_t)(t->n - k) : BLK;
		const float *w = ckenc_values(e, t, k, m);
		size_t np;
		rckpt_quantize(e->iblk, e->pblk, &np, w, g ? g + k : NULL, m, q);
		rc = rckpt_qerr_add(qe, e->iblk, w, g ? g + k : NULL, m, q);
	}
	rckpt_qerr_end(qe, num, den);
	return rc;
}

static int cpu_dequantize(rckpt_ckenc_t *e, float *out, const rckpt_ctensor_t *t,
			  const float *g, const rckpt_qparams_t *q)
{
	uint64_t k;
	int rc = 0;
	for (k = 0; k < t->n && rc == 0; k += BLK) {
		const size_t m = t->n - k < BLK ? (size_t)(t->n - k) : BLK;
		const float *w = ckenc_values(e, t, k, m);
		size_t np;
		rckpt_quantize(e->iblk, e->pblk, &np, w, g ? g + k : NULL, m, q);
		rc = rckpt_dequantize(out + k, e->iblk, m, q, e->pblk, np);
	}
	return rc;
}

static int cpu_quantize(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_ctensor_t *t,
			const float *g, const rckpt_qparams_t *q, uint64_t first, uint64_t n,
			float *snap)
{
	uint64_t k, cap = 1;
	if ((seg->prot = malloc(2)) == NULL)
		return -ENOMEM;
	for (k = 0; k < n; k += BLK) {
		const size_t m = n - k < BLK ? (size_t)(n - k) : BLK;
		const float *w = ckenc_values(e, t, first + k, m);
		size_t np;
		rckpt_quantize(seg->idx + k, e->pblk, &np, w, g ? g + first + k : NULL, m, q);
		if (snap)
			memcpy(snap + k, w, 4 * m);
		if (seg->nprot + np > cap) {
			uint64_t nc = (seg->nprot + np) * 2;
			uint16_t *pr = realloc(seg->prot, 2 * (size_t)nc);
			if (pr == NULL)
				return -ENOMEM;
			seg->prot = pr;
			cap = nc;
		}
		memcpy(seg->prot + seg->nprot, e->pblk, 2 * np);
		seg->nprot += np;
	}
	return 0;
}

static int cpu_to_host(rckpt_ckenc_t *e, const void *src, size_t bytes, const void **out,
		       void **owned)
{
	(void)e;
	(void)bytes;
	*out = src; /* host memory already */
	*owned = NULL;
	return 0;
}

static int cpu_block_dist(rckpt_ckenc_t *e, double *out, const rckpt_ctensor_t *t, uint64_t first, size_t n,
			  const float *saved, uint64_t block, uint64_t *bad)
{
	const float *w = ckenc_values(e, t, first, n);
	size_t j;
	for (j = 0; j < n; j++)
		if (!isfinite(w[j])) {
			*bad = first + j;
			return -EDOM;
		}
	rckpt_block_dist(out, w, saved, n, block);
	return 0;
}

const ckenc_backend_t ckenc_cpu_backend = {
	.name = "cpu",
	.host = 1,
	.step_begin = cpu_step_begin,
	.prepare = cpu_prepare,
	.qerr = cpu_qerr,
	.dequantize = cpu_dequantize,
	.block_dist = cpu_block_dist,
	.quantize = cpu_quantize,
	.to_host = cpu_to_host,
	.update_weights = NULL, /* the reference: ckenc_optim.c's host path */
};
