/*
 * rckpt_codec.c — one tensor through the pipeline and back.
 */
#include "rckpt_codec.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
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
							   "norm/bias", "moment1", "moment2",
							   "optimizer" };
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
	c->protect_by_sensitivity = 1;
	c->lambda = 0.5f;
	c->lossless_kinds = 0;
	c->bf16_kinds = 1u << RCKPT_LK_NORM_BIAS;
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

__attribute__((target_clones("avx2", "default")))
void rckpt_narrow_from_f32(void *dst, const float *src, unsigned dtype, uint64_t n)
{
	uint8_t *p = dst;
	uint64_t i;
	switch (dtype) {
	case RCKPT_DT_F32:
		memcpy(dst, src, (size_t)n * 4);
		break;
	case RCKPT_DT_F16:
		for (i = 0; i < n; i++) {
			uint16_t h = f32_to_half(src[i]);
			p[2 * i] = (uint8_t)h;
			p[2 * i + 1] = (uint8_t)(h >> 8);
		}
		break;
	case RCKPT_DT_BF16: /* rckpt_f32_to_bf16's rounding, in a loop that vectorizes */
		for (i = 0; i < n; i++) {
			uint32_t u = rckpt_f2u(src[i]);
			u += 0x7fffu + ((u >> 16) & 1u);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			{
				const uint16_t h = (uint16_t)(u >> 16);
				memcpy(p + 2 * i, &h, 2);
			}
#else
			p[2 * i] = (uint8_t)(u >> 16);
			p[2 * i + 1] = (uint8_t)(u >> 24);
#endif
		}
		break;
	}
}

/* ---- preparing a tensor ---- */

void rckpt_codec_prep_free(rckpt_tensor_prep_t *p)
{
	free(p->wide);
	rckpt_sketch_view_free(&p->vvalue);
	rckpt_sketch_view_free(&p->vsens);
	rckpt_sketch_free(&p->value);
	rckpt_sketch_free(&p->sens);
	memset(p, 0, sizeof(*p));
}

int rckpt_codec_prep_begin(rckpt_tensor_prep_t *p, unsigned dtype, uint64_t n, const float *grads,
			   unsigned kind)
{
	int rc;

	memset(p, 0, sizeof(*p));
	if (rckpt_dtype_size(dtype) == 0 || kind >= RCKPT_LK_COUNT || n > RCKPT_EST_MAX_COUNT)
		return -EINVAL;
	p->n = n;
	p->kind = kind;
	p->dtype = dtype;
	p->g = grads;
	if ((rc = rckpt_sketch_init(&p->value, SKETCH_MBITS)) ||
	    (grads && (rc = rckpt_sketch_init(&p->sens, SKETCH_MBITS))))
		rckpt_codec_prep_free(p);
	return rc;
}

int rckpt_codec_prep_add(rckpt_tensor_prep_t *p, const float *w, const float *g, size_t n,
			 uint64_t *bad_index)
{
	/* Branch-free (it vectorizes); find the index only when needed.
	 * Non-finite floats are those whose exponent bits are all ones; a
	 * gradient weight (an RMS) must also not be negative: -0 passes, any
	 * other set sign bit does not. */
	uint32_t bad = 0;
	size_t i;
	for (i = 0; i < n; i++) {
		uint32_t u, v = 0;
		memcpy(&u, &w[i], 4);
		if (g)
			memcpy(&v, &g[i], 4);
		bad |= ((u & 0x7f800000u) == 0x7f800000u) | ((v & 0x7f800000u) == 0x7f800000u) |
		       (v > 0x80000000u);
	}
	if (bad) {
		for (i = 0; i < n; i++)
			if (!isfinite(w[i]) || (g && !(isfinite(g[i]) && g[i] >= 0)))
				break;
		*bad_index = i;
		return -EDOM;
	}
	rckpt_sketch_add(&p->value, w, n);
	if (g)
		rckpt_sketch_add_abs_prod(&p->sens, w, g, n);
	return 0;
}

int rckpt_codec_prep_end(rckpt_tensor_prep_t *p)
{
	int rc;
	if ((rc = rckpt_sketch_view_init(&p->vvalue, &p->value)) ||
	    (p->g && (rc = rckpt_sketch_view_init(&p->vsens, &p->sens)))) {
		rckpt_codec_prep_free(p);
		return rc;
	}
	rckpt_sketch_free(&p->value); /* the views answer everything from here */
	rckpt_sketch_free(&p->sens);
	return 0;
}

int rckpt_codec_prepare(rckpt_tensor_prep_t *p, uint64_t *bad_index, const void *data,
			unsigned dtype, uint64_t n, const float *grads, unsigned kind)
{
	float *wide = NULL;
	const float *w = data;
	int rc;

	if (rckpt_dtype_size(dtype) == 0 || kind >= RCKPT_LK_COUNT || n > RCKPT_EST_MAX_COUNT) {
		memset(p, 0, sizeof(*p));
		return -EINVAL;
	}
	if (dtype != RCKPT_DT_F32 || ((uintptr_t)data & 3) != 0) {
		if ((wide = malloc(n ? (size_t)n * 4 : 1)) == NULL) {
			memset(p, 0, sizeof(*p));
			return -ENOMEM;
		}
		rckpt_widen_to_f32(wide, data, dtype, n);
		w = wide;
	}
	if ((rc = rckpt_codec_prep_begin(p, dtype, n, grads, kind))) {
		free(wide);
		return rc;
	}
	p->wide = wide;
	p->w = w;
	if ((rc = rckpt_codec_prep_add(p, w, grads, (size_t)n, bad_index)) ||
	    (rc = rckpt_codec_prep_end(p)))
		rckpt_codec_prep_free(p);
	return rc;
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

/* Whether the last step's codebook c[0..b) can seed this step's k-means
 * on points x[0..n): its span covers the data's roughly. After the values
 * moved far (rescaled, say), centroids outside the data keep no points and
 * Lloyd's iterations never bring them back: seed afresh then. */
static int warm_fits(const float *c, unsigned b, const double *x, size_t n)
{
	double lo = x[0], hi = x[0], span;
	size_t i;
	for (i = 1; i < n; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	span = hi - lo;
	return c[0] >= lo - span && c[b - 1] <= hi + span && (double)c[b - 1] - c[0] >= 0.25 * span;
}

/* An optimizer's first moment (and other state) prunes by magnitude, and
 * what lies nearer 0 than the smallest centroid takes the pruned level, 0:
 * a value over a tiny second moment (a parameter with almost no gradient:
 * a key's bias, an embedding's unused row) is then 0, whose update is 0,
 * where the nearest centroid would make it explode. Its sensitivity metric
 * (|m g|, the size of the update) ranks protection only. */
static int optim_linear(const rckpt_tensor_prep_t *p)
{
	return p->kind == RCKPT_LK_MOMENT1 || p->kind == RCKPT_LK_OPTIM;
}

/* q's prune and protect thresholds for configuration c, on bucket edges
 * (rckpt_sketch_quantile_bounds): at most the asked fraction is protected
 * or pruned, and a tensor of equal values is neither. No codebook. */
static void thresholds(rckpt_qparams_t *q, const rckpt_tensor_prep_t *p, const rckpt_qconfig_t *c)
{
	/* A second moment is never pruned: its pruned level is no zero in the
	 * LOG2 domain, and a value lost there makes the update explode. */
	const float prune_frac = p->kind == RCKPT_LK_MOMENT2 ? 0.0f : c->prune_frac[p->kind];
	memset(q, 0, sizeof(*q));
	q->protect_mag = q->protect_sens = INFINITY;
	if (c->bf16_kinds & (1u << p->kind)) { /* every value protected, none pruned */
		q->protect_mag = 0.0f;
		return;
	}
	if (c->protect_frac > 0) {
		float lo;
		rckpt_sketch_view_abs_bounds(&p->vvalue, 1.0 - c->protect_frac, &lo, &q->protect_mag);
		if (p->g && c->protect_by_sensitivity)
			rckpt_sketch_view_abs_bounds(&p->vsens, 1.0 - c->protect_frac, &lo, &q->protect_sens);
	}
	q->prune_by_sensitivity = p->g && c->prune_metric == RCKPT_PRUNE_SENSITIVITY && !optim_linear(p);
	if (prune_frac > 0) {
		float hi;
		rckpt_sketch_view_abs_bounds(q->prune_by_sensitivity ? &p->vsens : &p->vvalue, prune_frac,
					     &q->prune_below, &hi);
		if (q->prune_below < 0.0f)
			q->prune_below = 0.0f;
	}
}

static void zero_is_a_level(rckpt_qparams_t *q, const rckpt_tensor_prep_t *p)
{
	float m = INFINITY;
	unsigned j;
	if (!optim_linear(p))
		return;
	for (j = 0; j < q->nbins; j++)
		if (fabsf(q->centroids[j]) < m)
			m = fabsf(q->centroids[j]);
	if (m * 0.5f > q->prune_below)
		q->prune_below = m * 0.5f;
	if (q->prune_below < 0x1p-149f)
		q->prune_below = 0x1p-149f; /* exact zeros at least */
}

int rckpt_codec_qparams_keep(rckpt_qparams_t *q, const rckpt_tensor_prep_t *p, const rckpt_qconfig_t *c,
			     const rckpt_seg_t *parent)
{
	if (parent == NULL || parent->encoding != RCKPT_SEG_QUANTIZED || parent->nbins < 1 ||
	    parent->nbins > RCKPT_MAX_BINS)
		return -EINVAL;
	thresholds(q, p, c);
	q->nbins = parent->nbins;
	memcpy(q->centroids, parent->centroids, sizeof(float) * parent->nbins);
	zero_is_a_level(q, p);
	return rckpt_qparams_check(q);
}

int rckpt_codec_qparams(rckpt_qparams_t *q, const rckpt_tensor_prep_t *p, const rckpt_qconfig_t *c,
			unsigned quantizer, const rckpt_seg_t *warm, rckpt_codebook_cache_t *cache)
{
	points_t pts = { NULL, NULL, 0, 0.0f, INFINITY };
	double *wts = NULL, sum_c = 0, sum_m = 0;
	size_t i, cap = p->vvalue.n + 1;
	unsigned bins = p->kind == RCKPT_LK_EMBEDDING ? c->emb_bins : c->bins;
	int rc = -ENOMEM, k = 0;

	if (bins < 1 || bins > RCKPT_MAX_BINS)
		return -EINVAL;
	thresholds(q, p, c);

	/* The codebook covers the buckets that will be quantized: not
	 * protected by magnitude, not pruned by it. */
	pts.x = malloc(sizeof(double) * cap);
	pts.cnt = malloc(sizeof(double) * cap);
	wts = malloc(sizeof(double) * cap);
	if (!pts.x || !pts.cnt || !wts)
		goto out;
	pts.hi = q->protect_mag;
	pts.lo = q->prune_by_sensitivity ? 0.0f : q->prune_below;
	if (cache) {
		unsigned j;
		for (j = 0; j < cache->n; j++)
			if (cache->e[j].bins == bins && cache->e[j].quantizer == quantizer &&
			    cache->e[j].lo == pts.lo && cache->e[j].hi == pts.hi &&
			    cache->e[j].lambda == c->lambda) {
				k = (int)cache->e[j].k;
				memcpy(q->centroids, cache->e[j].centroids, sizeof(float) * (size_t)k);
				q->nbins = (unsigned)k;
				zero_is_a_level(q, p);
				rc = 0;
				goto out;
			}
	}
	for (i = 0; i < p->vvalue.n; i++)
		collect(p->vvalue.value[i], p->vvalue.count[i], &pts);
	if (pts.n && quantizer == RCKPT_QUANTIZER_UNIFORM) {
		/* bins evenly spaced over the kept range, at the centres of its
		 * B equal parts */
		double lo = pts.x[0], hi = pts.x[pts.n - 1];
		unsigned j;
		for (j = 0; j < bins; j++) {
			float v = (float)(lo + (hi - lo) * ((double)j + 0.5) / bins);
			if (k == 0 || v > q->centroids[k - 1])
				q->centroids[k++] = v;
		}
	} else if (pts.n) {
		for (i = 0; i < pts.n; i++) {
			sum_c += pts.cnt[i];
			sum_m += fabs(pts.x[i]) * pts.cnt[i];
		}
		for (i = 0; i < pts.n; i++)
			wts[i] = c->lambda * pts.cnt[i] / sum_c +
				 (sum_m > 0 ? (1.0 - c->lambda) * fabs(pts.x[i]) * pts.cnt[i] / sum_m : 0.0);
		if (warm && warm->encoding == RCKPT_SEG_QUANTIZED && warm->nbins == bins &&
		    warm_fits(warm->centroids, bins, pts.x, pts.n))
			k = rckpt_kmeans_1d_from(q->centroids, bins, pts.x, wts, pts.n, KMEANS_ITERS,
						 warm->centroids);
		else
			k = rckpt_kmeans_1d(q->centroids, bins, pts.x, wts, pts.n, KMEANS_ITERS);
		if (k < 0) {
			rc = k;
			goto out;
		}
	}
	if (k == 0) { /* nothing left to cluster: one unused level */
		q->centroids[0] = 0.0f;
		k = 1;
	}
	q->nbins = (unsigned)k;
	zero_is_a_level(q, p);
	rc = rckpt_qparams_check(q);
	if (rc == 0 && cache) { /* round-robin once full */
		unsigned j = cache->n < RCKPT_CB_CACHE_SIZE ? cache->n++ : cache->next++ % RCKPT_CB_CACHE_SIZE;
		cache->e[j].bins = bins;
		cache->e[j].quantizer = quantizer;
		cache->e[j].lo = pts.lo;
		cache->e[j].hi = pts.hi;
		cache->e[j].lambda = c->lambda;
		cache->e[j].k = q->nbins;
		memcpy(cache->e[j].centroids, q->centroids, sizeof(float) * q->nbins);
	}
out:
	free(pts.x);
	free(pts.cnt);
	free(wts);
	return rc;
}

int rckpt_codec_make_segment(rckpt_seg_t *seg, const rckpt_tensor_prep_t *p, const rckpt_qparams_t *q)
{
	size_t np;

	memset(seg, 0, sizeof(*seg));
	seg->n = p->n;
	seg->dtype = (uint8_t)p->dtype;
	seg->encoding = RCKPT_SEG_QUANTIZED;
	seg->nbins = q->nbins;
	memcpy(seg->centroids, q->centroids, sizeof(float) * q->nbins);
	seg->idx = malloc(p->n ? (size_t)p->n : 1);
	seg->prot = malloc(p->n ? (size_t)p->n * 2 : 1);
	if (!seg->idx || !seg->prot) {
		free(seg->idx);
		free(seg->prot);
		memset(seg, 0, sizeof(*seg));
		return -ENOMEM;
	}
	rckpt_quantize(seg->idx, seg->prot, &np, p->w, p->g, (size_t)p->n, q);
	seg->nprot = np;
	return 0;
}

int rckpt_codec_lossless_segment(rckpt_seg_t *seg, const void *data, unsigned dtype, uint64_t n)
{
	size_t dsz = rckpt_dtype_size(dtype);
	memset(seg, 0, sizeof(*seg));
	if (dsz == 0 || n > RCKPT_EST_MAX_COUNT)
		return -EINVAL;
	seg->n = n;
	seg->dtype = (uint8_t)dtype;
	seg->encoding = RCKPT_SEG_LOSSLESS;
	seg->raw = malloc(n ? (size_t)n * dsz : 1);
	if (seg->raw == NULL)
		return -ENOMEM;
	memcpy(seg->raw, data, (size_t)n * dsz);
	return 0;
}

int rckpt_codec_encode_tensor(rckpt_seg_t *seg, uint64_t *bad_index, const void *data,
			      unsigned dtype, uint64_t n, const float *grads, unsigned kind,
			      const rckpt_qconfig_t *c)
{
	rckpt_tensor_prep_t p;
	rckpt_qparams_t q;
	int rc;

	memset(seg, 0, sizeof(*seg));
	if (kind >= RCKPT_LK_COUNT)
		return -EINVAL;
	if (c->lossless_kinds & (1u << kind))
		return rckpt_codec_lossless_segment(seg, data, dtype, n);
	if ((rc = rckpt_codec_prepare(&p, bad_index, data, dtype, n, grads, kind)))
		return rc;
	rc = rckpt_codec_qparams(&q, &p, c, RCKPT_QUANTIZER_KMEANS, NULL, NULL);
	if (rc == 0)
		rc = rckpt_codec_make_segment(seg, &p, &q);
	rckpt_codec_prep_free(&p);
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

int rckpt_codec_seg_error_lanes(const rckpt_seg_t *seg, const float *w, const float *g,
				double as[8], double bs[8])
{
	float lv[RCKPT_MAX_BINS + 2];
	rckpt_qparams_t q;
	unsigned j, pl, protl, bad = 0;
	uint64_t i, k = 0;

	if (seg->encoding != RCKPT_SEG_QUANTIZED)
		return 0; /* lossless: no error */
	memset(&q, 0, sizeof(q));
	q.nbins = seg->nbins;
	memcpy(q.centroids, seg->centroids, sizeof(float) * seg->nbins);
	pl = rckpt_q_pruned_level(&q);
	protl = seg->nbins + 1;
	for (j = 0; j < seg->nbins; j++)
		lv[j + (j >= pl)] = seg->centroids[j];
	lv[pl] = 0.0f;
	lv[protl] = 0.0f;
	/* A protected value's reconstruction is its own bf16 rounding: no
	 * need to walk the stored list, and the loop has no branch. Eight
	 * partial sums: independent chains instead of one serial one. */
	for (i = 0; i < seg->n; i++) {
		const unsigned v = seg->idx[i] <= protl ? seg->idx[i] : pl;
		bad |= seg->idx[i] > protl;
		k += v == protl;
		const float wi = w[i];
		const float r = v == protl ? rckpt_bf16_to_f32(rckpt_f32_to_bf16(wi)) : lv[v];
		const double gg = g ? (double)g[i] * g[i] : 1.0, d = (double)wi - r;
		as[i & 7] += gg * d * d;
		bs[i & 7] += gg * (double)wi * wi;
	}
	return bad || k != seg->nprot ? -EBADMSG : 0;
}

int rckpt_codec_seg_error(const rckpt_seg_t *seg, const float *w, const float *g, double *num,
			  double *den)
{
	double as[8] = { 0 }, bs[8] = { 0 };
	int rc = rckpt_codec_seg_error_lanes(seg, w, g, as, bs);
	if (rc == 0)
		rckpt_codec_lanes_add(as, bs, num, den);
	return rc;
}

void rckpt_codec_lanes_add(const double as[8], const double bs[8], double *num, double *den)
{
	double a = 0, b = 0;
	unsigned l;
	for (l = 0; l < 8; l++) {
		a += as[l];
		b += bs[l];
	}
	*num += a;
	*den += b;
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
