/*
 * ckenc_cuda.c — the encoder's compute backend on a CUDA device, over
 * rckpt_gpuenc.h (the kernels are in gpu/): the same bin indices and
 * bytes as ckenc_cpu.c, shown by tests/gpu/test_gpu_parity.c on a device.
 * Built without CUDA too, where rckpt_gpuenc says -ENODEV.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_gpuenc.h"

static void cuda_step_begin(rckpt_ckenc_t *e)
{
	rckpt_gpuenc_step_begin(e->o.gpu);
}

/* A tensor with a transform (LOG2, NORM: an optimizer's state) goes
 * through the same passes over its values in the transform's domain, fp32
 * on the device (rckpt_gpuenc_xvalues): *t becomes that shadow. Its
 * records keep the tensor's own dtype. */
static int dev_values(rckpt_ckenc_t *e, const rckpt_ctensor_t **t, rckpt_ctensor_t *shadow)
{
	const int v = ckenc_norm_of(e, *t);
	const unsigned xf = ckenc_value_xf(e, rckpt_ctensor_kind(*t));
	const rckpt_ctensor_t *vt;
	int rc;

	if (v < 0 && xf == RCKPT_XF_NONE)
		return 0;
	if (v >= 0) {
		vt = &e->xparams->t[v];
		rc = rckpt_gpuenc_xvalues(e->o.gpu, shadow, *t, RCKPT_XF_NONE, vt,
					  ckenc_value_xf(e, RCKPT_LK_MOMENT2), e->xg[v], e->xq[v],
					  (float)ckenc_eps(vt));
	} else {
		rc = rckpt_gpuenc_xvalues(e->o.gpu, shadow, *t, xf, NULL, RCKPT_XF_NONE, NULL, NULL, 0.0f);
	}
	if (rc == 0)
		*t = shadow;
	return rc;
}

static int cuda_prepare(rckpt_ckenc_t *e, rckpt_tensor_prep_t *p, uint64_t *bad,
			const rckpt_ctensor_t *t, const float *g, unsigned kind, sample_t *sp)
{
	const unsigned dtype = t->dtype;
	rckpt_ctensor_t sh;
	int rc = dev_values(e, &t, &sh);
	if (rc == 0)
		rc = rckpt_gpuenc_prepare(e->o.gpu, p, bad, t, g, kind, sp->stride, sp->w, sp->g, &sp->n);
	if (rc == 0)
		p->dtype = dtype; /* the record's: the values' own */
	return rc;
}

static int cuda_qerr(rckpt_ckenc_t *e, double *num, double *den, const rckpt_ctensor_t *t,
		     const float *g, const rckpt_qparams_t *q)
{
	rckpt_ctensor_t sh;
	int rc = dev_values(e, &t, &sh);
	return rc ? rc : rckpt_gpuenc_qerr(e->o.gpu, num, den, t, g, q);
}

static int cuda_dequantize(rckpt_ckenc_t *e, float *out, const rckpt_ctensor_t *t,
			   const float *g, const rckpt_qparams_t *q)
{
	rckpt_ctensor_t sh;
	int rc = dev_values(e, &t, &sh);
	return rc ? rc : rckpt_gpuenc_dequantize_f32(e->o.gpu, out, t, g, q);
}

static int cuda_quantize(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_ctensor_t *t,
			 const float *g, const rckpt_qparams_t *q, uint64_t first, uint64_t n,
			 float *snap)
{
	rckpt_ctensor_t sh;
	size_t dsz, np = 0;
	uint16_t *pr;
	uint64_t k;
	int rc;

	if ((rc = dev_values(e, &t, &sh)))
		return rc;
	dsz = rckpt_dtype_size(t->dtype);
	if ((seg->prot = malloc(2 * (size_t)(n ? n : 1))) == NULL)
		return -ENOMEM;
	if ((rc = rckpt_gpuenc_quantize(e->o.gpu, seg->idx, seg->prot, &np, t, g, first, n, q)))
		return rc;
	seg->nprot = np;
	if ((pr = realloc(seg->prot, 2 * (np ? np : 1))) != NULL)
		seg->prot = pr;
	for (k = 0; snap && k < n && rc == 0; k += BLK) { /* the values as saved, for partial steps */
		const size_t m = n - k < BLK ? (size_t)(n - k) : BLK;
		rc = rckpt_gpuenc_read(e->o.gpu, e->wblk, (const uint8_t *)t->data + (first + k) * dsz,
				       m * dsz); /* wblk holds BLK fp32 */
		if (rc == 0)
			rckpt_widen_to_f32(snap + k, e->wblk, t->dtype, m);
	}
	return rc;
}

/* On the device, reading t where it is (a host tensor is staged once);
 * only the saved values go up. A block that is not finite is looked for
 * on the host, to name the element. */
static int cuda_block_dist(rckpt_ckenc_t *e, double *out, const rckpt_ctensor_t *t, uint64_t first, size_t n,
			   const float *saved, uint64_t block, uint64_t *bad)
{
	const rckpt_ctensor_t *v = t;
	rckpt_ctensor_t sh;
	const uint64_t nb = n ? (n + block - 1) / block : 0;
	uint64_t b;
	int rc = dev_values(e, &v, &sh);
	if (rc || (rc = rckpt_gpuenc_block_dist(e->o.gpu, out, v, first, n, saved, block)))
		return rc;
	for (b = 0; b < nb; b++)
		if (!isfinite(out[b])) {
			const uint64_t lo = b * block, len = n - lo < block ? n - lo : block;
			const float *w = ckenc_values(e, t, first + lo, (size_t)len);
			uint64_t j;
			for (j = 0; j < len && isfinite(w[j]); j++)
				;
			*bad = first + lo + (j < len ? j : 0);
			return -EDOM;
		}
	return 0;
}

static int cuda_update_weights(rckpt_ckenc_t *e, float *wv, float *wm, double *den,
			       const rckpt_ctensor_t *vt, const rckpt_ctensor_t *mt, double eps, int lin)
{
	return rckpt_gpuenc_update_weights(e->o.gpu, wv, wm, den, vt, mt, eps, lin);
}

static int cuda_to_host(rckpt_ckenc_t *e, const void *src, size_t bytes, const void **out,
			void **owned)
{
	void *h = malloc(bytes ? bytes : 1);
	int rc = h ? rckpt_gpuenc_read(e->o.gpu, h, src, bytes) : -ENOMEM;
	if (rc) {
		free(h);
		return rc;
	}
	*out = *owned = h;
	return 0;
}

const ckenc_backend_t ckenc_cuda_backend = {
	.name = "cuda",
	.host = 0,
	.step_begin = cuda_step_begin,
	.prepare = cuda_prepare,
	.qerr = cuda_qerr,
	.dequantize = cuda_dequantize,
	.block_dist = cuda_block_dist,
	.quantize = cuda_quantize,
	.to_host = cuda_to_host,
	.update_weights = cuda_update_weights,
};
