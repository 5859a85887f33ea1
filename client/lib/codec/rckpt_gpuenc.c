/*
 * rckpt_gpuenc.c — the encoder's GPU passes, over rckpt_gpu.h.
 */
#include "rckpt_gpuenc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_quant.h"
#include "rckpt_record.h"

_Static_assert(RCKPT_GPU_MAX_BINS == RCKPT_MAX_BINS, "the kernels take every codebook");

enum { H2D = 0, D2H = 1 };

/* A device buffer that only grows. */
typedef struct dbuf {
	void *d;
	size_t cap;
} dbuf_t;

/* A host tensor's copy on the device, kept while the same bytes are asked
 * for again. */
typedef struct stage {
	dbuf_t b;
	const void *src;
	size_t bytes;
} stage_t;

/* What the values in xv are: a tensor through a transform (and, NORM,
 * normalized by a second moment quantized with gq and weights gv). */
typedef struct xkey {
	const rckpt_ctensor_t *t, *vt;
	const void *data;
	const float *gv;
	uint64_t n;
	unsigned xf, vxf;
	float eps;
	rckpt_gpu_qparams_t gq;
} xkey_t;

struct rckpt_gpuenc {
	void *stream;
	dbuf_t hist, small, idx, prot, f32, temp;
	dbuf_t xv, xw; /* a transformed tensor's values; a second moment's */
	stage_t st[2]; /* values, gradients */
	int have_x;    /* xv holds the values of key x */
	xkey_t x;
};

static int grow(dbuf_t *b, size_t need)
{
	void *d;
	int rc;
	if (need <= b->cap)
		return 0;
	rckpt_gpu_free(b->d);
	b->d = NULL;
	b->cap = 0;
	need += need / 8; /* fewer regrowths as tensors vary */
	if ((rc = rckpt_gpu_malloc(&d, need)))
		return rc;
	b->d = d;
	b->cap = need;
	return 0;
}

int rckpt_gpuenc_create(rckpt_gpuenc_t **out)
{
	rckpt_gpu_probe_t pr;
	rckpt_gpuenc_t *g;
	int rc;

	*out = NULL;
	rckpt_gpu_probe(&pr);
	if (!pr.built_with_cuda || pr.device_count == 0)
		return -ENODEV;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return -ENOMEM;
	/* two histograms of the finest sketch, and a few counters */
	if ((rc = rckpt_gpu_stream_create(&g->stream)) ||
	    (rc = grow(&g->hist, 2 * 8 * rckpt_gpu_sketch_hist_len(RCKPT_SKETCH_MBITS_MAX))) ||
	    (rc = grow(&g->small, 64))) {
		rckpt_gpuenc_destroy(g);
		return rc;
	}
	*out = g;
	return 0;
}

void rckpt_gpuenc_destroy(rckpt_gpuenc_t *g)
{
	unsigned i;
	if (g == NULL)
		return;
	rckpt_gpu_free(g->hist.d);
	rckpt_gpu_free(g->small.d);
	rckpt_gpu_free(g->idx.d);
	rckpt_gpu_free(g->prot.d);
	rckpt_gpu_free(g->f32.d);
	rckpt_gpu_free(g->temp.d);
	rckpt_gpu_free(g->xv.d);
	rckpt_gpu_free(g->xw.d);
	for (i = 0; i < 2; i++)
		rckpt_gpu_free(g->st[i].b.d);
	rckpt_gpu_stream_destroy(g->stream);
	free(g);
}

void rckpt_gpuenc_step_begin(rckpt_gpuenc_t *g)
{
	g->st[0].src = g->st[1].src = NULL;
	g->have_x = 0;
}

int rckpt_gpuenc_any_on_device(const rckpt_tset_t *params, const rckpt_tset_t *grads, const char **name)
{
	rckpt_gpu_probe_t pr;
	unsigned i;
	rckpt_gpu_probe(&pr);
	if (pr.device_count == 0) /* nothing can be on a device */
		return 0;
	for (i = 0; params && i < params->ntensors; i++)
		if (rckpt_gpu_is_device_ptr(params->t[i].data)) {
			*name = params->t[i].name;
			return 1;
		}
	for (i = 0; grads && i < grads->ntensors; i++)
		if (rckpt_gpu_is_device_ptr(grads->t[i].data)) {
			*name = grads->t[i].name;
			return 1;
		}
	return 0;
}

void rckpt_gpu_qparams_make(rckpt_gpu_qparams_t *out, const rckpt_qparams_t *q)
{
	const unsigned pl = rckpt_q_pruned_level(q);
	unsigned j;

	memset(out, 0, sizeof(*out));
	out->nbins = q->nbins;
	out->pruned_level = pl;
	out->prune_by_sensitivity = q->prune_by_sensitivity ? 1 : 0;
	rckpt_q_midpoints(out->mid, q);
	for (j = 0; j < q->nbins; j++)
		out->level[j + (j >= pl)] = q->centroids[j];
	out->level[pl] = 0.0f;
	out->prune_below = q->prune_below;
	out->protect_mag = q->protect_mag;
	out->protect_sens = q->protect_sens;
}

/* src on the device: itself; on the host: its copy in slot k. */
static int stage(rckpt_gpuenc_t *g, const void **out, unsigned k, const void *src, size_t bytes)
{
	stage_t *s = &g->st[k];
	int rc;
	*out = src;
	if (src == NULL || bytes == 0 || rckpt_gpu_is_device_ptr(src))
		return 0;
	if (s->src != src || s->bytes != bytes) {
		s->src = NULL;
		if ((rc = grow(&s->b, bytes)) || (rc = rckpt_gpu_memcpy(s->b.d, src, bytes, H2D, g->stream)))
			return rc;
		s->src = src;
		s->bytes = bytes;
	}
	*out = s->b.d;
	return 0;
}

static int stage_tensor(rckpt_gpuenc_t *g, const void **dw, const float **dg, const rckpt_ctensor_t *t,
			const float *grads)
{
	const void *gp = NULL;
	int rc = stage(g, dw, 0, t->data, (size_t)t->n * rckpt_dtype_size(t->dtype));
	if (rc == 0 && grads)
		rc = stage(g, &gp, 1, grads, (size_t)t->n * 4);
	*dg = gp;
	return rc;
}

int rckpt_gpuenc_prepare(rckpt_gpuenc_t *g, rckpt_tensor_prep_t *p, uint64_t *bad,
			 const rckpt_ctensor_t *t, const float *grads, unsigned kind, uint64_t stride,
			 float *sw, float *sg, size_t *ns)
{
	const size_t dsz = rckpt_dtype_size(t->dtype);
	const size_t count = t->n ? (size_t)((t->n + stride - 1) / stride) : 0;
	const void *dw;
	const float *dg;
	uint64_t *dh, first_bad = 0;
	uint16_t *narrow = NULL;
	size_t hl;
	int rc;

	*ns = 0;
	if ((rc = rckpt_codec_prep_begin(p, t->dtype, t->n, grads, kind)))
		return rc;
	hl = rckpt_gpu_sketch_hist_len(p->value.mbits);
	dh = g->hist.d;
	if (dsz == 2 && (narrow = malloc(2 * (count ? count : 1))) == NULL)
		rc = -ENOMEM;
	if (rc == 0)
		rc = stage_tensor(g, &dw, &dg, t, grads);
	if (rc == 0)
		rc = rckpt_gpu_sketch(dh, dg ? dh + hl : NULL, g->small.d, dw, t->dtype, dg, t->n,
				      p->value.mbits, NULL, 0, g->stream);
	if (rc == 0)
		rc = rckpt_gpu_memcpy(p->value.neg, dh, 8 * hl, D2H, g->stream);
	if (rc == 0 && dg)
		rc = rckpt_gpu_memcpy(p->sens.neg, dh + hl, 8 * hl, D2H, g->stream);
	if (rc == 0)
		rc = rckpt_gpu_memcpy(&first_bad, g->small.d, 8, D2H, g->stream);
	if (rc == 0)
		rc = rckpt_gpu_gather_d2h(narrow ? (void *)narrow : (void *)sw, dw, dsz, stride, count, g->stream);
	if (rc == 0 && dg)
		rc = rckpt_gpu_gather_d2h(sg, dg, 4, stride, count, g->stream);
	if (rc == 0)
		rc = rckpt_gpu_stream_sync(g->stream);
	if (rc == 0 && first_bad != UINT64_MAX) {
		*bad = first_bad;
		rc = -EDOM;
	}
	if (rc == 0) {
		if (narrow)
			rckpt_widen_to_f32(sw, narrow, t->dtype, count);
		*ns = count;
		rckpt_sketch_adopt_counts(&p->value, t->n);
		if (dg)
			rckpt_sketch_adopt_counts(&p->sens, t->n);
		rc = rckpt_codec_prep_end(p); /* frees p on failure */
	} else {
		rckpt_codec_prep_free(p);
	}
	free(narrow);
	return rc;
}

int rckpt_gpuenc_qerr(rckpt_gpuenc_t *g, double *num, double *den, const rckpt_ctensor_t *t,
		      const float *grads, const rckpt_qparams_t *q)
{
	rckpt_gpu_qparams_t gq;
	const void *dw;
	const float *dg;
	double out[2] = { 0, 0 };
	const size_t tb = rckpt_gpu_qerr_temp_bytes(t->n);
	int rc;

	rckpt_gpu_qparams_make(&gq, q);
	if ((rc = stage_tensor(g, &dw, &dg, t, grads)) || (rc = grow(&g->temp, tb)) ||
	    (rc = rckpt_gpu_qerr(g->small.d, dw, t->dtype, dg, t->n, &gq, g->temp.d, tb, g->stream)) ||
	    (rc = rckpt_gpu_memcpy(out, g->small.d, 16, D2H, g->stream)) ||
	    (rc = rckpt_gpu_stream_sync(g->stream)))
		return rc;
	*num = out[0];
	*den = out[1];
	return 0;
}

/* Levels and protected values of [first, first + n) of t, left in g->idx
 * and g->prot; *nprot their count. */
static int quantize_dev(rckpt_gpuenc_t *g, uint64_t *nprot, const rckpt_ctensor_t *t,
			const float *grads, uint64_t first, uint64_t n, const rckpt_gpu_qparams_t *gq)
{
	const size_t dsz = rckpt_dtype_size(t->dtype), tb = rckpt_gpu_quantize_temp_bytes(n);
	const void *dw;
	const float *dg;
	int rc;

	if ((rc = stage_tensor(g, &dw, &dg, t, grads)) || (rc = grow(&g->idx, n ? n : 1)) ||
	    (rc = grow(&g->prot, 2 * (n ? n : 1))) || (rc = grow(&g->temp, tb)))
		return rc;
	if ((rc = rckpt_gpu_quantize(g->idx.d, g->prot.d, g->small.d, (const uint8_t *)dw + first * dsz,
				     t->dtype, dg ? dg + first : NULL, n, gq, g->temp.d, tb, g->stream)) ||
	    (rc = rckpt_gpu_memcpy(nprot, g->small.d, 8, D2H, g->stream)))
		return rc;
	return 0;
}

int rckpt_gpuenc_quantize(rckpt_gpuenc_t *g, uint8_t *idx, uint16_t *prot, size_t *nprot,
			  const rckpt_ctensor_t *t, const float *grads, uint64_t first, uint64_t n,
			  const rckpt_qparams_t *q)
{
	rckpt_gpu_qparams_t gq;
	uint64_t np = 0;
	int rc;

	rckpt_gpu_qparams_make(&gq, q);
	if ((rc = quantize_dev(g, &np, t, grads, first, n, &gq)) ||
	    (rc = rckpt_gpu_memcpy(idx, g->idx.d, (size_t)n, D2H, g->stream)) ||
	    (rc = rckpt_gpu_stream_sync(g->stream)) ||
	    (rc = rckpt_gpu_memcpy(prot, g->prot.d, 2 * (size_t)np, D2H, g->stream)) ||
	    (rc = rckpt_gpu_stream_sync(g->stream)))
		return rc;
	*nprot = (size_t)np;
	return 0;
}

int rckpt_gpuenc_dequantize_f32(rckpt_gpuenc_t *g, float *out, const rckpt_ctensor_t *t,
				const float *grads, const rckpt_qparams_t *q)
{
	rckpt_gpu_qparams_t gq;
	uint64_t np = 0;
	int bad = 0, rc;
	const size_t tb = rckpt_gpu_dequantize_temp_bytes(t->n);

	rckpt_gpu_qparams_make(&gq, q);
	if ((rc = quantize_dev(g, &np, t, grads, 0, t->n, &gq)) || (rc = rckpt_gpu_stream_sync(g->stream)) ||
	    (rc = grow(&g->f32, 4 * (t->n ? (size_t)t->n : 1))) || (rc = grow(&g->temp, tb)) ||
	    (rc = rckpt_gpu_dequantize(g->f32.d, RCKPT_DT_F32, (int *)((char *)g->small.d + 16), g->idx.d,
				       t->n, &gq, g->prot.d, np, g->temp.d, tb, g->stream)) ||
	    (rc = rckpt_gpu_memcpy(out, g->f32.d, 4 * (size_t)t->n, D2H, g->stream)) ||
	    (rc = rckpt_gpu_memcpy(&bad, (char *)g->small.d + 16, sizeof(bad), D2H, g->stream)) ||
	    (rc = rckpt_gpu_stream_sync(g->stream)))
		return rc;
	return bad ? -EBADMSG : 0;
}

/* Whether xv holds the values that key k names; the key's padding is
 * zeroed where it is made, so bytes compare. */
static int same_key(const xkey_t *a, const xkey_t *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

int rckpt_gpuenc_xvalues(rckpt_gpuenc_t *g, rckpt_ctensor_t *shadow, const rckpt_ctensor_t *t, unsigned xf,
			 const rckpt_ctensor_t *vt, unsigned vxf, const float *gv,
			 const rckpt_qparams_t *qv, float eps)
{
	const size_t bytes = 4 * (t->n ? (size_t)t->n : 1);
	xkey_t k;
	const void *d;
	const float *dg;
	int rc = 0;

	if (vt && (qv == NULL || vt->n != t->n))
		return -EINVAL;
	memset(&k, 0, sizeof(k));
	k.t = t;
	k.vt = vt;
	k.data = t->data;
	k.gv = gv;
	k.n = t->n;
	k.xf = xf;
	k.vxf = vxf;
	k.eps = eps;
	if (vt)
		rckpt_gpu_qparams_make(&k.gq, qv);
	*shadow = *t;
	shadow->dtype = RCKPT_DT_F32;
	if (g->have_x && same_key(&g->x, &k)) {
		shadow->data = g->xv.d;
		return 0;
	}
	g->have_x = 0;
	if ((rc = grow(&g->xv, bytes)))
		return rc;
	if (vt == NULL) {
		if ((rc = stage(g, &d, 0, t->data, (size_t)t->n * rckpt_dtype_size(t->dtype))) ||
		    (rc = rckpt_gpu_xf_values(g->xv.d, d, t->dtype, t->n, xf, g->stream)))
			return rc;
	} else {
		/* v' = the second moment quantized as it was judged, restored */
		rckpt_ctensor_t vx = *vt;
		uint64_t np = 0;
		int bad = 0;
		const size_t tb = rckpt_gpu_dequantize_temp_bytes(t->n);
		if ((rc = grow(&g->xw, bytes)) ||
		    (rc = stage(g, &d, 0, vt->data, (size_t)vt->n * rckpt_dtype_size(vt->dtype))) ||
		    (rc = rckpt_gpu_xf_values(g->xw.d, d, vt->dtype, vt->n, vxf, g->stream)))
			return rc;
		vx.data = g->xw.d;
		vx.dtype = RCKPT_DT_F32;
		if ((rc = quantize_dev(g, &np, &vx, gv, 0, vx.n, &k.gq)) || (rc = rckpt_gpu_stream_sync(g->stream)) ||
		    (rc = grow(&g->temp, tb)) ||
		    (rc = rckpt_gpu_dequantize(g->xw.d, RCKPT_DT_F32, (int *)((char *)g->small.d + 16), g->idx.d,
					       vx.n, &k.gq, g->prot.d, np, g->temp.d, tb, g->stream)) ||
		    (rc = rckpt_gpu_memcpy(&bad, (char *)g->small.d + 16, sizeof(bad), D2H, g->stream)) ||
		    (rc = rckpt_gpu_xf_inverse(g->xw.d, vx.n, vxf, g->stream)) ||
		    (rc = stage_tensor(g, &d, &dg, t, NULL)) ||
		    (rc = rckpt_gpu_norm_divide(g->xv.d, d, t->dtype, g->xw.d, eps, t->n, g->stream)))
			return rc;
		if ((rc = rckpt_gpu_stream_sync(g->stream)))
			return rc;
		if (bad)
			return -EBADMSG;
	}
	if ((rc = rckpt_gpu_stream_sync(g->stream)))
		return rc;
	memcpy(&g->x, &k, sizeof(k)); /* padding too: same_key compares bytes */
	g->have_x = 1;
	shadow->data = g->xv.d;
	return 0;
}

int rckpt_gpuenc_update_weights(rckpt_gpuenc_t *g, float *wv, float *wm, double *den, const rckpt_ctensor_t *vt,
				const rckpt_ctensor_t *mt, double eps, int lin)
{
	const size_t n = (size_t)vt->n, tb = rckpt_gpu_update_weights_temp_bytes(vt->n);
	const void *dv, *dm = NULL;
	float *dwv, *dwm = NULL;
	int rc;

	if ((mt && mt->n != vt->n) || (wm && !mt))
		return -EINVAL;
	/* the weights into f32 (and xw), the second moment in slot 0, the first in 1 */
	if ((rc = grow(&g->f32, 4 * (n ? n : 1))) || (rc = grow(&g->temp, tb)) ||
	    (wm && (rc = grow(&g->xw, 4 * (n ? n : 1)))) ||
	    (rc = stage(g, &dv, 0, vt->data, n * rckpt_dtype_size(vt->dtype))) ||
	    (mt && (rc = stage(g, &dm, 1, mt->data, n * rckpt_dtype_size(mt->dtype)))))
		return rc;
	dwv = g->f32.d;
	if (wm)
		dwm = g->xw.d;
	if ((rc = rckpt_gpu_update_weights(dwv, dwm, g->small.d, dv, vt->dtype, dm, mt ? mt->dtype : 0, vt->n, eps,
					   lin, g->temp.d, tb, g->stream)) ||
	    (rc = rckpt_gpu_memcpy(den, g->small.d, 8, D2H, g->stream)) ||
	    (rc = rckpt_gpu_memcpy(wv, dwv, 4 * n, D2H, g->stream)) ||
	    (wm && (rc = rckpt_gpu_memcpy(wm, dwm, 4 * n, D2H, g->stream))))
		return rc;
	return rckpt_gpu_stream_sync(g->stream);
}

int rckpt_gpuenc_read(rckpt_gpuenc_t *g, void *dst, const void *src, size_t bytes)
{
	int rc;
	if (bytes == 0)
		return 0;
	if (!rckpt_gpu_is_device_ptr(src)) {
		memcpy(dst, src, bytes);
		return 0;
	}
	if ((rc = rckpt_gpu_memcpy(dst, src, bytes, D2H, g->stream)))
		return rc;
	return rckpt_gpu_stream_sync(g->stream);
}

int rckpt_gpuenc_block_dist(rckpt_gpuenc_t *g, double *out, const rckpt_ctensor_t *t, uint64_t first,
			    uint64_t n, const float *saved, uint64_t block)
{
	const size_t dsz = rckpt_dtype_size(t->dtype);
	const uint64_t nb = n && block ? (n + block - 1) / block : 0;
	const void *dw;
	const float *dg;
	int rc;
	if (nb == 0)
		return n ? -EINVAL : 0;
	if (first > t->n || n > t->n - first)
		return -ERANGE;
	if ((rc = stage_tensor(g, &dw, &dg, t, NULL)) || (rc = grow(&g->f32, 4 * (size_t)n)) ||
	    (rc = grow(&g->temp, 8 * (size_t)nb)) ||
	    (rc = rckpt_gpu_memcpy(g->f32.d, saved, 4 * (size_t)n, H2D, g->stream)) ||
	    (rc = rckpt_gpu_block_dist(g->temp.d, (const uint8_t *)dw + first * dsz, t->dtype, g->f32.d, n, block,
				       g->stream)) ||
	    (rc = rckpt_gpu_memcpy(out, g->temp.d, 8 * (size_t)nb, D2H, g->stream)))
		return rc;
	return rckpt_gpu_stream_sync(g->stream);
}

/* ---- a decoded step into device memory (rckpt_ckdec_tensor_to) ---- */

typedef struct devsink {
	rckpt_gpuenc_t *g;
	uint8_t *dst;
} devsink_t;

/* Waits for the copy: src may be a staging buffer the caller reuses. */
static int dev_put(void *arg, uint64_t off, const void *src, size_t bytes)
{
	devsink_t *s = arg;
	int rc;
	if (bytes == 0)
		return 0;
	if ((rc = rckpt_gpu_memcpy(s->dst + off, src, bytes, H2D, s->g->stream)))
		return rc;
	return rckpt_gpu_stream_sync(s->g->stream);
}

/* The levels and protected values up (1 and 2 bytes an element, not 4),
 * dequantized and narrowed on the device straight into dst. */
static int dev_dequantize(void *arg, uint64_t off, unsigned dtype, const uint8_t *idx, uint64_t n,
			  const rckpt_qparams_t *q, const uint16_t *prot, uint64_t np)
{
	devsink_t *s = arg;
	rckpt_gpuenc_t *g = s->g;
	rckpt_gpu_qparams_t gq;
	const size_t tb = rckpt_gpu_dequantize_temp_bytes(n);
	int bad = 0, rc;
	if (n == 0)
		return np ? -EBADMSG : 0;
	rckpt_gpu_qparams_make(&gq, q);
	if ((rc = grow(&g->idx, (size_t)n)) || (rc = grow(&g->prot, 2 * (np ? (size_t)np : 1))) ||
	    (rc = grow(&g->temp, tb)) || (rc = rckpt_gpu_memcpy(g->idx.d, idx, (size_t)n, H2D, g->stream)) ||
	    (np && (rc = rckpt_gpu_memcpy(g->prot.d, prot, 2 * (size_t)np, H2D, g->stream))) ||
	    (rc = rckpt_gpu_dequantize(s->dst + off, dtype, (int *)((char *)g->small.d + 16), g->idx.d, n, &gq,
				       g->prot.d, np, g->temp.d, tb, g->stream)) ||
	    (rc = rckpt_gpu_memcpy(&bad, (char *)g->small.d + 16, sizeof(bad), D2H, g->stream)) ||
	    (rc = rckpt_gpu_stream_sync(g->stream)))
		return rc;
	return bad ? -EBADMSG : 0;
}

int rckpt_gpuenc_decode_to(rckpt_gpuenc_t *g, void *dst, const rckpt_ckdec_t *d, uint32_t t)
{
	devsink_t s = { g, dst };
	rckpt_ckdec_sink_t sink = { dev_put, dev_dequantize, &s };
	uint64_t n = 1;
	unsigned k;
	if (t < d->mf.ntensors) {
		for (k = 0; k < d->mf.t[t].ndim; k++)
			n *= d->mf.t[t].shape[k];
		if (n == 0)
			return 0; /* nothing to write */
	}
	if (dst == NULL || !rckpt_gpu_is_device_ptr(dst))
		return -EFAULT;
	return rckpt_ckdec_tensor_to(d, t, &sink);
}
