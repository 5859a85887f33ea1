/*
 * rckpt_quant.c — classification, bin assignment, dequantization.
 *
 * Bin assignment counts the midpoints a value reaches: bin = #{j : x >=
 * mid[j]}, with mid[j] = c[j] + (c[j+1] - c[j]) * 0.5f in float: a count,
 * so the order of the compares cannot change it, and the GPU can do the
 * very same float operations.
 */
#include "rckpt_quant.h"

#include "rckpt_bytes.h"
#include "rckpt_record.h" /* enum rckpt_seg_transform */

#include <errno.h>
#include <math.h>
#include <string.h>

#define BLOCK 512

/* Eight lanes of GCC's vector extension: AVX2 in the avx2 clone, two SSE
 * halves in the default one. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

uint16_t rckpt_f32_to_bf16(float f)
{
	uint32_t u = rckpt_f2u(f);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float rckpt_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

unsigned rckpt_q_pruned_level(const rckpt_qparams_t *q)
{
	unsigned p = 0;
	while (p < q->nbins && q->centroids[p] < 0.0f)
		p++;
	return p;
}

int rckpt_qparams_check(const rckpt_qparams_t *q)
{
	unsigned j;
	if (q->nbins < 1 || q->nbins > RCKPT_MAX_BINS || isnan(q->prune_below) ||
	    isnan(q->protect_mag) || isnan(q->protect_sens))
		return -EINVAL;
	for (j = 0; j < q->nbins; j++)
		if (!isfinite(q->centroids[j]) || (j && !(q->centroids[j] > q->centroids[j - 1])))
			return -EINVAL;
	return 0;
}

unsigned rckpt_q_midpoints(float *mid, const rckpt_qparams_t *q)
{
	unsigned j;
	for (j = 0; j + 1 < q->nbins; j++)
		mid[j] = q->centroids[j] + (q->centroids[j + 1] - q->centroids[j]) * 0.5f;
	return q->nbins ? q->nbins - 1 : 0;
}

/* The count #{j : x >= mid[j]} of up to 63 sorted midpoints in two levels
 * instead of one compare per midpoint: the midpoints, padded with +inf to
 * 64, are 8 groups of 8; k = #{g < 7 : x >= last of group g} is how many
 * whole groups x passes (sorted: it passes every midpoint of those and
 * none after group k), and group k's eight are then picked per lane by a
 * permute (vpermps) and compared. 8 k + that count is the same integer as
 * the full count, for every x (a NaN passes none either way; +inf, which
 * passes the padding, is clamped to nm): 15 compares and 8 permutes for
 * 8 values instead of 63 compares. */
#define TWO_LEVEL_MIN 20u

static int mids_sorted(const float *mid, unsigned nm)
{
	unsigned j;
	for (j = 1; j < nm; j++)
		if (!(mid[j] >= mid[j - 1]))
			return 0;
	return 1;
}

static void two_level_tables(v8f *coarse, v8f *fine, const float *mid, unsigned nm)
{
	float m64[64];
	unsigned g, j, l;
	for (j = 0; j < 64; j++)
		m64[j] = j < nm ? mid[j] : INFINITY;
	for (g = 0; g < 7; g++)
		for (l = 0; l < 8; l++)
			coarse[g][l] = m64[8 * g + 7];
	for (j = 0; j < 8; j++)
		for (g = 0; g < 8; g++)
			fine[j][g] = m64[8 * g + j]; /* lane g: group g's j-th */
}

static inline __attribute__((always_inline)) void bins_two_level(uint32_t *out, const float *x,
								  const v8f *coarse, const v8f *fine,
								  int32_t nm)
{
	const v8i nmv = { nm, nm, nm, nm, nm, nm, nm, nm };
	v8i k = { 0, 0, 0, 0, 0, 0, 0, 0 }, acc;
	v8f xv;
	unsigned j;
	memcpy(&xv, x, sizeof(xv));
	for (j = 0; j < 7; j++)
		k -= (v8i)(xv >= coarse[j]);
	acc = k * 8;
	for (j = 0; j < 8; j++)
		acc -= (v8i)(xv >= __builtin_shuffle(fine[j], k));
	acc += (acc > nmv) & (nmv - acc); /* min(acc, nm) */
	memcpy(out, &acc, sizeof(acc));
}

/* AVX2 where the CPU has it, SSE2 otherwise; the same float operations,
 * so the same levels, on either. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void rckpt_quantize(uint8_t *idx, uint16_t *prot, size_t *nprot, const float *w, const float *g,
		    size_t n, const rckpt_qparams_t *q)
{
	float mid[RCKPT_MAX_BINS];
	v8f midv[RCKPT_MAX_BINS];
	const unsigned nb = q->nbins, pl = rckpt_q_pruned_level(q), protl = nb + 1;
	size_t base, np = 0;
	unsigned j, nm = rckpt_q_midpoints(mid, q);

	/* Many bins: count in two levels (see bins_two_level). */
	const int two = nm > TWO_LEVEL_MIN && mids_sorted(mid, nm);
	v8f coarse[7], fine[8];

	if (two)
		two_level_tables(coarse, fine, mid, nm);
	for (j = 0; j < nm && !two; j++)
		midv[j] = (v8f){ mid[j], mid[j], mid[j], mid[j], mid[j], mid[j], mid[j], mid[j] };
	for (base = 0; base < n; base += BLOCK) {
		/* 32-bit counters, the width of the floats, lane for lane; the
		 * count of eight values stays in a register across the
		 * midpoints (a compare gives -1 per lane that reaches one). */
		uint32_t bin[BLOCK];
		size_t i, m = n - base < BLOCK ? n - base : BLOCK;
		const float *x = w + base;

		for (i = 0; i + 8 <= m && two; i += 8)
			bins_two_level(bin + i, x + i, coarse, fine, (int32_t)nm);
		for (i = two ? i : 0; i + 8 <= m; i += 8) {
			v8f xv;
			v8i acc = { 0, 0, 0, 0, 0, 0, 0, 0 };
			memcpy(&xv, x + i, sizeof(xv));
			for (j = 0; j + 1 < nb; j++)
				acc -= (v8i)(xv >= midv[j]);
			memcpy(bin + i, &acc, sizeof(acc));
		}
		for (; i < m; i++) {
			uint32_t c = 0;
			for (j = 0; j + 1 < nb; j++)
				c += (uint32_t)(x[i] >= mid[j]);
			bin[i] = c;
		}
		/* Levels, branch-free and without the gradients' test inside
		 * the loop, so it vectorizes; then the protected values, rare,
		 * are gathered in order by a second scan. */
		if (g) {
			const float *gg = g + base;
			for (i = 0; i < m; i++) {
				const float a = fabsf(x[i]), s = fabsf(x[i] * gg[i]);
				const float metric = q->prune_by_sensitivity ? s : a;
				const uint32_t is_prot = (a >= q->protect_mag) | (s >= q->protect_sens);
				const uint32_t lvl = bin[i] + (bin[i] >= pl);
				const uint32_t v = metric < q->prune_below ? pl : lvl;
				bin[i] = is_prot ? protl : v;
			}
		} else {
			for (i = 0; i < m; i++) {
				const float a = fabsf(x[i]);
				const uint32_t lvl = bin[i] + (bin[i] >= pl);
				const uint32_t v = a < q->prune_below ? pl : lvl;
				bin[i] = a >= q->protect_mag ? protl : v;
			}
		}
		for (i = 0; i < m; i++)
			idx[base + i] = (uint8_t)bin[i];
		/* protected values are rare: test eight lanes at once */
		for (i = 0; i < m; i += 8) {
			size_t k, e = m - i < 8 ? m - i : 8;
			if (e == 8) {
				v8i b, eq;
				uint64_t any[4];
				memcpy(&b, bin + i, sizeof(b));
				eq = b == (v8i){ (int32_t)protl, (int32_t)protl, (int32_t)protl, (int32_t)protl,
						 (int32_t)protl, (int32_t)protl, (int32_t)protl, (int32_t)protl };
				memcpy(any, &eq, sizeof(any));
				if ((any[0] | any[1] | any[2] | any[3]) == 0)
					continue;
			}
			for (k = i; k < i + e; k++)
				if (bin[k] == protl)
					prot[np++] = rckpt_f32_to_bf16(x[k]);
		}
	}
	*nprot = np;
}

int rckpt_dequantize_xf(float *out, const uint8_t *idx, size_t n, const rckpt_qparams_t *q,
			const uint16_t *prot, size_t nprot, unsigned xf, size_t *used)
{
	float lv[RCKPT_MAX_BINS + 2];
	const unsigned nb = q->nbins, pl = rckpt_q_pruned_level(q), protl = nb + 1;
	size_t i, k = 0;
	unsigned j;

	for (j = 0; j < nb; j++)
		lv[j + (j >= pl)] = q->centroids[j];
	lv[pl] = 0.0f;
	rckpt_xf_inverse(lv, nb + 1, xf);
	for (i = 0; i < n; i++) {
		unsigned v = idx[i];
		if (v < protl) {
			out[i] = lv[v];
		} else if (v == protl && k < nprot) {
			float x = rckpt_bf16_to_f32(prot[k++]);
			rckpt_xf_inverse(&x, 1, xf);
			out[i] = x;
		} else {
			return -EBADMSG;
		}
	}
	if (used)
		*used = k;
	return k == nprot || used ? 0 : -EBADMSG;
}

int rckpt_dequantize(float *out, const uint8_t *idx, size_t n, const rckpt_qparams_t *q,
		     const uint16_t *prot, size_t nprot)
{
	return rckpt_dequantize_xf(out, idx, n, q, prot, nprot, RCKPT_XF_NONE, NULL);
}

/* ---- fixed-order sums (the GPU's twins) ---- */

/* lane[j] += lane[j + s] for s = 128 ... 1: lane 0 holds the sum. */
static double fold(double *lane)
{
	unsigned s, j;
	for (s = RCKPT_QERR_LANES / 2; s >= 1; s >>= 1)
		for (j = 0; j < s; j++)
			lane[j] = lane[j] + lane[j + s];
	return lane[0];
}

void rckpt_qerr_init(rckpt_qerr_t *e)
{
	memset(e, 0, sizeof(*e));
}

int rckpt_qerr_add(rckpt_qerr_t *e, const uint8_t *idx, const float *w, const float *g, size_t n,
		   const rckpt_qparams_t *q)
{
	float lv[RCKPT_MAX_BINS + 2];
	const unsigned nb = q->nbins, pl = rckpt_q_pruned_level(q), protl = nb + 1;
	size_t t0;
	unsigned j, bad = 0;

	if (n && e->ended)
		return -EINVAL;
	for (j = 0; j < nb; j++)
		lv[j + (j >= pl)] = q->centroids[j];
	lv[pl] = 0.0f;
	lv[protl] = 0.0f;
	for (t0 = 0; t0 < n; t0 += RCKPT_QERR_TILE) {
		double a[RCKPT_QERR_LANES] = { 0 }, b[RCKPT_QERR_LANES] = { 0 };
		float r[RCKPT_QERR_LANES];
		const size_t len = n - t0 < RCKPT_QERR_TILE ? n - t0 : RCKPT_QERR_TILE;
		size_t i0;
		/* lane l sums elements l, l + LANES, ... in that order, as the
		 * GPU's does; a row of lanes at a time, so the sums vectorize */
		for (i0 = 0; i0 < len; i0 += RCKPT_QERR_LANES) {
			const size_t rl = len - i0 < RCKPT_QERR_LANES ? len - i0 : RCKPT_QERR_LANES;
			const uint8_t *ix = idx + t0 + i0;
			const float *wx = w + t0 + i0, *gx = g ? g + t0 + i0 : NULL;
			unsigned l;
			for (l = 0; l < rl; l++) {
				const unsigned v = ix[l] <= protl ? ix[l] : pl;
				bad |= ix[l] > protl;
				r[l] = v == protl ? rckpt_bf16_to_f32(rckpt_f32_to_bf16(wx[l])) : lv[v];
			}
			if (gx) {
				for (l = 0; l < rl; l++) {
					const double gg = (double)gx[l] * (double)gx[l];
					const double d = (double)wx[l] - (double)r[l];
					a[l] += gg * d * d;
					b[l] += gg * (double)wx[l] * (double)wx[l];
				}
			} else {
				for (l = 0; l < rl; l++) {
					const double d = (double)wx[l] - (double)r[l];
					a[l] += 1.0 * d * d;
					b[l] += 1.0 * (double)wx[l] * (double)wx[l];
				}
			}
		}
		e->num[e->tiles % RCKPT_QERR_LANES] += fold(a);
		e->den[e->tiles % RCKPT_QERR_LANES] += fold(b);
		e->tiles++;
		if (len < RCKPT_QERR_TILE)
			e->ended = 1;
	}
	return bad ? -EBADMSG : 0;
}

void rckpt_qerr_end(const rckpt_qerr_t *e, double *num, double *den)
{
	double a[RCKPT_QERR_LANES], b[RCKPT_QERR_LANES];
	memcpy(a, e->num, sizeof(a));
	memcpy(b, e->den, sizeof(b));
	*num = fold(a);
	*den = fold(b);
}

void rckpt_block_dist(double *out, const float *cur, const float *saved, uint64_t n, uint64_t block)
{
	uint64_t b0, i;
	for (b0 = 0; b0 < n; b0 += block) {
		double a[RCKPT_QERR_LANES] = { 0 };
		const uint64_t len = n - b0 < block ? n - b0 : block;
		for (i = 0; i < len; i++) {
			const double d = (double)cur[b0 + i] - (double)saved[b0 + i];
			a[i % RCKPT_QERR_LANES] += d * d;
		}
		*out++ = fold(a);
	}
}

/* ---- transforms ---- */

float rckpt_xf_log2_fwd(float v)
{
	uint32_t b;
	memcpy(&b, &v, 4);
	if (b == 0x80000000u) /* -0 */
		b = 0;
	if (b >= 0x7f800000u) /* Inf, NaN, and every negative value */
		return NAN;
	return (float)((int32_t)b - 0x3f800000) * 0x1p-23f;
}

float rckpt_xf_log2_inv(float x)
{
	const float y = x * 0x1p23f; /* exact: a power of two */
	int32_t k;
	uint32_t b;
	float v;
	if (x != x)
		return x;
	if (!(y > -1065353216.0f)) /* -127 * 2^23: bits 0 and below */
		return 0.0f;
	if (y >= 1073741824.0f) /* past FLT_MAX's bits */
		return 0x1.fffffep127f;
	k = (int32_t)rintf(y) + 0x3f800000;
	b = k < 0 ? 0 : (uint32_t)k;
	memcpy(&v, &b, 4);
	return v;
}

void rckpt_xf_forward(float *v, size_t n, unsigned xf)
{
	size_t i;
	if (xf == RCKPT_XF_LOG2)
		for (i = 0; i < n; i++)
			v[i] = rckpt_xf_log2_fwd(v[i]);
}

void rckpt_xf_inverse(float *v, size_t n, unsigned xf)
{
	size_t i;
	if (xf == RCKPT_XF_LOG2)
		for (i = 0; i < n; i++)
			v[i] = rckpt_xf_log2_inv(v[i]);
}

void rckpt_norm_divide(float *out, const float *m, const float *v, float eps, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		out[i] = m[i] / (sqrtf(v[i]) + eps);
}

/* 1 + the fraction of v's binary32 mantissa: dv / v = dx / that, x = LOG2(v). */
static double mant1(float v)
{
	uint32_t b;
	memcpy(&b, &v, 4);
	return 1.0 + (double)(b & 0x7fffffu) * 0x1p-23;
}

void rckpt_update_weights(float *wv, float *wm, double *den, const float *v, const float *m,
			  uint64_t n, double eps, int lin)
{
	double outer[RCKPT_QERR_LANES] = { 0 };
	const double e2 = eps * eps;
	uint64_t t0, tiles = 0;

	for (t0 = 0; t0 < n; t0 += RCKPT_QERR_TILE, tiles++) {
		double a[RCKPT_QERR_LANES] = { 0 };
		const uint64_t len = n - t0 < RCKPT_QERR_TILE ? n - t0 : RCKPT_QERR_TILE;
		uint64_t i;
		for (i = 0; i < len; i++) {
			const uint64_t k = t0 + i;
			const double vv = v[k] > 0 && isfinite(v[k]) ? (double)v[k] : 0.0;
			const double sv = sqrt(vv), d = sv + eps, rho = sv / d;
			/* d(log v) per unit of the stored value: 1 / (1 + f)
			 * in LOG2 (f the mantissa's fraction), 1 / v as it is */
			const double f1 = lin ? (vv > e2 ? vv : e2) : mant1(v[k]);
			double term = 1.0;
			if (m) {
				const double mm = isfinite(m[k]) ? (double)m[k] : 0.0, up = mm / d;
				if (wm)
					wm[k] = (float)(1.0 / d);
				wv[k] = (float)(fabs(up) * rho / (2.0 * f1));
				term = up * up;
			} else {
				wv[k] = (float)(rho / (2.0 * f1));
			}
			a[i % RCKPT_QERR_LANES] += term;
		}
		outer[tiles % RCKPT_QERR_LANES] += fold(a);
	}
	*den = fold(outer);
}
