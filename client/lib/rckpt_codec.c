/*
 * rckpt_codec.c — one tensor through the pipeline and back.
 */
#include "rckpt_codec.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_kmeans.h"
#include "rckpt_quant.h"

#define SKETCH_MBITS 6 /* alpha = 1/128 */
#define KMEANS_ITERS 30

/* ---- layer kinds ---- */

unsigned rckpt_layer_kind(const char *name, unsigned ndim, const uint64_t *shape)
{
	(void)shape;
	if (ndim <= 1)
		return RCKPT_LK_NORM_BIAS;
	if (ndim == 2) {
		if (strstr(name, "embed") || strstr(name, "wte") || strstr(name, "wpe") ||
		    strstr(name, "tok_emb"))
			return RCKPT_LK_EMBEDDING;
		return RCKPT_LK_LINEAR;
	}
	if (ndim >= 3 && ndim <= 5)
		return RCKPT_LK_CONV;
	return RCKPT_LK_OTHER;
}

const char *rckpt_layer_kind_name(unsigned kind)
{
	static const char *const names[RCKPT_LK_COUNT] = { "other", "embedding", "conv", "linear",
							   "norm/bias" };
	return kind < RCKPT_LK_COUNT ? names[kind] : "?";
}

void rckpt_qconfig_default(rckpt_qconfig_t *c)
{
	unsigned k;
	memset(c, 0, sizeof(*c));
	c->bins = 16;
	c->emb_bins = 32;
	for (k = 0; k < RCKPT_LK_COUNT; k++)
		c->prune_frac[k] = 0.1f;
	c->prune_frac[RCKPT_LK_EMBEDDING] = 0.0f;
	c->prune_metric = RCKPT_PRUNE_MAGNITUDE;
	c->protect_frac = 0.005f;
	c->lambda = 0.5f;
	c->lossless_kinds = 1u << RCKPT_LK_NORM_BIAS;
}

/* ---- element types ---- */

static float half_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, u;
	float f;
	if (exp == 31) {
		u = sign | 0x7f800000u | man << 13; /* inf, nan */
	} else if (exp == 0) {
		/* zero or subnormal: man * 2^-24, exact in float */
		f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	} else {
		u = sign | (exp + 112) << 23 | man << 13;
	}
	memcpy(&f, &u, 4);
	return f;
}

static uint16_t f32_to_half(float f)
{
	uint32_t u, sign, mag;
	memcpy(&u, &f, 4);
	sign = (u >> 16) & 0x8000u;
	mag = u & 0x7fffffffu;
	if (mag >= 0x7f800000u) /* inf stays inf, nan stays a quiet nan */
		return (uint16_t)(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0));
	if (mag >= 0x477ff000u) /* rounds to >= 65520: overflow */
		return (uint16_t)(sign | 0x7c00u);
	if (mag < 0x38800000u) { /* below 2^-14: subnormal half, round to even */
		float a;
		uint32_t q;
		memcpy(&a, &mag, 4);
		q = (uint32_t)lrintf(a * 0x1p24f); /* default rounding: nearest even */
		return (uint16_t)(sign | q);
	}
	/* normal: rebias, round the 13 dropped bits to nearest even */
	mag = mag - 0x38000000u;
	mag += 0xfffu + ((mag >> 13) & 1u);
	return (uint16_t)(sign | (mag >> 13));
}

void rckpt_widen_to_f32(float *out, const void *src, unsigned dtype, uint64_t n)
{
	const uint8_t *p = src;
	uint64_t i;
	switch (dtype) {
	case RCKPT_DT_F32:
		memcpy(out, src, (size_t)n * 4);
		break;
	case RCKPT_DT_F16:
		for (i = 0; i < n; i++)
			out[i] = half_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		break;
	case RCKPT_DT_BF16:
		for (i = 0; i < n; i++)
			out[i] = rckpt_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		break;
	}
}

void rckpt_narrow_from_f32(void *dst, const float *src, unsigned dtype, uint64_t n)
{
	uint8_t *p = dst;
	uint64_t i;
	switch (dtype) {
	case RCKPT_DT_F32:
		memcpy(dst, src, (size_t)n * 4);
		break;
	case RCKPT_DT_F16:
	case RCKPT_DT_BF16:
		for (i = 0; i < n; i++) {
			uint16_t h = dtype == RCKPT_DT_F16 ? f32_to_half(src[i]) : rckpt_f32_to_bf16(src[i]);
			p[2 * i] = (uint8_t)h;
			p[2 * i + 1] = (uint8_t)(h >> 8);
		}
		break;
	}
}

/* ---- scratch ---- */

int rckpt_codec_scratch_init(rckpt_codec_scratch_t *s)
{
	int rc;
	memset(s, 0, sizeof(*s));
	if ((rc = rckpt_sketch_init(&s->value, SKETCH_MBITS)) ||
	    (rc = rckpt_sketch_init(&s->mag, SKETCH_MBITS)) ||
	    (rc = rckpt_sketch_init(&s->sens, SKETCH_MBITS))) {
		rckpt_codec_scratch_free(s);
		return rc;
	}
	return 0;
}

void rckpt_codec_scratch_free(rckpt_codec_scratch_t *s)
{
	rckpt_sketch_free(&s->value);
	rckpt_sketch_free(&s->mag);
	rckpt_sketch_free(&s->sens);
	free(s->f32);
	free(s->g32);
	memset(s, 0, sizeof(*s));
}

static int grow(rckpt_codec_scratch_t *s, uint64_t n)
{
	float *a, *b;
	if (n <= s->cap)
		return 0;
	a = realloc(s->f32, (size_t)n * 4);
	if (a == NULL)
		return -ENOMEM;
	s->f32 = a;
	b = realloc(s->g32, (size_t)n * 4);
	if (b == NULL)
		return -ENOMEM;
	s->g32 = b;
	s->cap = n;
	return 0;
}

/* ---- k-means points from the histogram ---- */

typedef struct points {
	double *x, *cnt;
	size_t n;
	float lo, hi; /* keep buckets with lo <= |v| < hi */
} points_t;

static void collect(float v, uint64_t count, void *arg)
{
	points_t *p = arg;
	float a = fabsf(v);
	if (a >= p->lo && a < p->hi) {
		p->x[p->n] = v;
		p->cnt[p->n] = (double)count;
		p->n++;
	}
}

int rckpt_codec_encode_tensor(rckpt_seg_t *seg, uint64_t *bad_index, const void *data,
			      unsigned dtype, uint64_t n, const float *grads, unsigned kind,
			      const rckpt_qconfig_t *c, rckpt_codec_scratch_t *scr)
{
	rckpt_qparams_t q;
	points_t pts = { NULL, NULL, 0, 0.0f, INFINITY };
	double *wts = NULL, sum_c = 0, sum_m = 0;
	const float *w, *g = grads;
	float prune_frac;
	size_t dsz = rckpt_dtype_size(dtype), i;
	unsigned bins;
	int rc = -ENOMEM, k;

	memset(seg, 0, sizeof(*seg));
	seg->n = n;
	seg->dtype = (uint8_t)dtype;
	if (dsz == 0 || kind >= RCKPT_LK_COUNT || n > RCKPT_EST_MAX_COUNT)
		return -EINVAL;
	if (c->lossless_kinds & (1u << kind)) {
		seg->encoding = RCKPT_SEG_LOSSLESS;
		seg->raw = malloc(n ? (size_t)n * dsz : 1);
		if (seg->raw == NULL)
			return -ENOMEM;
		memcpy(seg->raw, data, (size_t)n * dsz);
		return 0;
	}
	seg->encoding = RCKPT_SEG_QUANTIZED;
	if ((rc = grow(scr, n)))
		return rc;
	rckpt_widen_to_f32(scr->f32, data, dtype, n);
	w = scr->f32;
	for (i = 0; i < n; i++)
		if (!isfinite(w[i]) || (g && !isfinite(g[i]))) {
			*bad_index = i;
			return -EDOM;
		}

	rckpt_sketch_clear(&scr->value);
	rckpt_sketch_clear(&scr->mag);
	rckpt_sketch_add(&scr->value, w, n);
	rckpt_sketch_add_abs(&scr->mag, w, n);
	if (g) {
		rckpt_sketch_clear(&scr->sens);
		rckpt_sketch_add_abs_prod(&scr->sens, w, g, n);
	}

	memset(&q, 0, sizeof(q));
	q.protect_mag = q.protect_sens = INFINITY;
	/* Thresholds on bucket edges (rckpt_sketch_quantile_bounds): at most
	 * the asked fraction is protected or pruned, and a tensor of equal
	 * values is neither. */
	if (c->protect_frac > 0) {
		float lo;
		rckpt_sketch_quantile_bounds(&scr->mag, 1.0 - c->protect_frac, &lo, &q.protect_mag);
		if (g)
			rckpt_sketch_quantile_bounds(&scr->sens, 1.0 - c->protect_frac, &lo, &q.protect_sens);
	}
	prune_frac = c->prune_frac[kind];
	q.prune_by_sensitivity = g && c->prune_metric == RCKPT_PRUNE_SENSITIVITY;
	if (prune_frac > 0) {
		float hi;
		rckpt_sketch_quantile_bounds(q.prune_by_sensitivity ? &scr->sens : &scr->mag, prune_frac,
					     &q.prune_below, &hi);
		if (q.prune_below < 0.0f)
			q.prune_below = 0.0f;
	}

	/* Cluster the buckets that will be quantized: not protected by
	 * magnitude, not pruned by it. */
	pts.x = malloc(sizeof(double) * (2 * scr->value.nkeys + 1));
	pts.cnt = malloc(sizeof(double) * (2 * scr->value.nkeys + 1));
	wts = malloc(sizeof(double) * (2 * scr->value.nkeys + 1));
	if (!pts.x || !pts.cnt || !wts)
		goto out;
	pts.hi = q.protect_mag;
	pts.lo = q.prune_by_sensitivity ? 0.0f : q.prune_below;
	rckpt_sketch_foreach(&scr->value, collect, &pts);
	for (i = 0; i < pts.n; i++) {
		sum_c += pts.cnt[i];
		sum_m += fabs(pts.x[i]) * pts.cnt[i];
	}
	for (i = 0; i < pts.n; i++)
		wts[i] = c->lambda * pts.cnt[i] / sum_c +
			 (sum_m > 0 ? (1.0 - c->lambda) * fabs(pts.x[i]) * pts.cnt[i] / sum_m : 0.0);
	bins = kind == RCKPT_LK_EMBEDDING ? c->emb_bins : c->bins;
	if (bins < 1 || bins > RCKPT_MAX_BINS) {
		rc = -EINVAL;
		goto out;
	}
	k = pts.n ? rckpt_kmeans_1d(q.centroids, bins, pts.x, wts, pts.n, KMEANS_ITERS) : 0;
	if (k < 0) {
		rc = k;
		goto out;
	}
	if (k == 0) { /* nothing left to cluster: one unused level */
		q.centroids[0] = 0.0f;
		k = 1;
	}
	q.nbins = (unsigned)k;
	if ((rc = rckpt_qparams_check(&q)))
		goto out;
	seg->nbins = q.nbins;
	memcpy(seg->centroids, q.centroids, sizeof(float) * q.nbins);
	seg->idx = malloc(n ? (size_t)n : 1);
	seg->prot = malloc(n ? (size_t)n * 2 : 1);
	if (!seg->idx || !seg->prot) {
		rc = -ENOMEM;
		goto out;
	}
	{
		size_t np;
		rckpt_quantize(seg->idx, seg->prot, &np, w, g, (size_t)n, &q);
		seg->nprot = np;
	}
	rc = 0;
out:
	free(pts.x);
	free(pts.cnt);
	free(wts);
	if (rc) {
		free(seg->idx);
		free(seg->prot);
		seg->idx = NULL;
		seg->prot = NULL;
	}
	return rc;
}

int rckpt_codec_decode_f32(float *out, const rckpt_seg_t *seg)
{
	rckpt_qparams_t q;
	if (seg->encoding == RCKPT_SEG_LOSSLESS) {
		rckpt_widen_to_f32(out, seg->raw, seg->dtype, seg->n);
		return 0;
	}
	memset(&q, 0, sizeof(q));
	q.nbins = seg->nbins;
	memcpy(q.centroids, seg->centroids, sizeof(float) * seg->nbins);
	return rckpt_dequantize(out, seg->idx, (size_t)seg->n, &q, seg->prot, (size_t)seg->nprot);
}

double rckpt_codec_rel_error(const float *w, const float *r, const float *g, uint64_t n)
{
	double num = 0, den = 0;
	uint64_t i;
	for (i = 0; i < n; i++) {
		double s = g ? (double)g[i] * g[i] : 1.0, d = (double)w[i] - r[i];
		num += s * d * d;
		den += s * (double)w[i] * w[i];
	}
	return den > 0 ? num / den : 0.0;
}
