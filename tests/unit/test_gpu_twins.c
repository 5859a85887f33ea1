/*
 * test_gpu_twins.c — the CPU twins of the GPU kernels, on any machine: the
 * fixed-order sums (rckpt_qerr, rckpt_block_dist) follow their documented
 * order and agree with plain sums; the index-stream symbols are a stable
 * sort of the deltas; a histogram laid out as the GPU writes it becomes the
 * same sketch; the kernels' parameters carry the CPU's midpoints and
 * levels; the update error's weights and the NORM division are the
 * documented element formulas, their sum in the documented order; and
 * without a device the GPU path says -ENODEV.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_skip.h"

#include "rckpt_codec.h"
#include "rckpt_gpuenc.h"
#include "rckpt_istream.h"
#include "rckpt_quant.h"
#include "rckpt_sketch.h"

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "test_rng.h"

/* A codebook and thresholds as the codec makes them, for data x. */
static void make_q(rckpt_qparams_t *q, const float *x, const float *g, size_t n, unsigned bins)
{
	rckpt_tensor_prep_t p;
	rckpt_qconfig_t c;
	uint64_t bad;
	rckpt_qconfig_default(&c);
	c.bins = bins;
	c.prune_frac[RCKPT_LK_LINEAR] = 0.2f;
	c.protect_frac = 0.01f;
	assert_int_equal(rckpt_codec_prepare(&p, &bad, x, RCKPT_DT_F32, n, g, RCKPT_LK_LINEAR), 0);
	assert_int_equal(rckpt_codec_qparams(q, &p, &c, RCKPT_QUANTIZER_KMEANS, NULL, NULL), 0);
	rckpt_codec_prep_free(&p);
}

/* The documented order, written out again from the header's words. */
static double tree(double *a)
{
	unsigned s, j;
	for (s = 128; s >= 1; s /= 2)
		for (j = 0; j < s; j++)
			a[j] = a[j] + a[j + s];
	return a[0];
}

static void spec_qerr(double *num, double *den, const float *w, const float *g, const float *r, size_t n)
{
	double on[256] = { 0 }, od[256] = { 0 };
	size_t t, ntiles = (n + 2047) / 2048;
	for (t = 0; t < ntiles; t++) {
		double a[256] = { 0 }, b[256] = { 0 };
		unsigned j, m;
		for (j = 0; j < 256; j++)
			for (m = 0; m < 8; m++) {
				size_t i = t * 2048 + (size_t)m * 256 + j;
				double gg, d;
				if (i >= n)
					continue;
				gg = g ? (double)g[i] * (double)g[i] : 1.0;
				d = (double)w[i] - (double)r[i];
				a[j] += gg * d * d;
				b[j] += gg * (double)w[i] * (double)w[i];
			}
		on[t % 256] += tree(a);
		od[t % 256] += tree(b);
	}
	*num = tree(on);
	*den = tree(od);
}

static void test_qerr_order(void **state)
{
	static const size_t sizes[] = { 0, 1, 2047, 2048, 2049, 65536 * 3 + 17, 2048 * 300 + 5 };
	unsigned si;
	(void)state;
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		const size_t n = sizes[si];
		float *w = malloc(4 * (n + 1)), *g = malloc(4 * (n + 1)), *r = malloc(4 * (n + 1));
		uint8_t *idx = malloc(n + 1);
		uint16_t *prot = malloc(2 * (n + 1));
		rckpt_qparams_t q;
		rckpt_qerr_t e;
		double num, den, sn, sd, pn = 0, pd = 0;
		size_t i, np, k;
		for (i = 0; i < n; i++) {
			w[i] = nrandf() * 0.02f;
			g[i] = fabsf(nrandf()) * 1e-3f; /* an RMS */
		}
		w[n] = 1.0f, g[n] = 1.0f; /* make_q on n == 0 gets one value */
		make_q(&q, w, g, n ? n : 1, 8);
		rckpt_quantize(idx, prot, &np, w, g, n, &q);
		assert_int_equal(rckpt_dequantize(r, idx, n, &q, prot, np), 0);
		/* whole */
		rckpt_qerr_init(&e);
		assert_int_equal(rckpt_qerr_add(&e, idx, w, g, n, &q), 0);
		rckpt_qerr_end(&e, &num, &den);
		spec_qerr(&sn, &sd, w, g, r, n);
		assert_memory_equal(&num, &sn, sizeof(num)); /* bit for bit */
		assert_memory_equal(&den, &sd, sizeof(den));
		/* in pieces of whole tiles: the same bits */
		rckpt_qerr_init(&e);
		for (k = 0; k < n; k += 2048 * 3) {
			size_t m = n - k < 2048 * 3 ? n - k : 2048 * 3;
			assert_int_equal(rckpt_qerr_add(&e, idx + k, w + k, g + k, m, &q), 0);
		}
		rckpt_qerr_end(&e, &pn, &pd);
		assert_memory_equal(&num, &pn, sizeof(num));
		/* and close to the plain sums */
		{
			double rel = rckpt_codec_rel_error(w, r, g, n);
			if (den > 0)
				assert_true(fabs(num / den - rel) <= 1e-12 * (rel + 1e-300));
			else
				assert_true(rel == 0);
		}
		/* a piece after a partial tile is refused */
		if (n % 2048) {
			assert_int_equal(rckpt_qerr_add(&e, idx, w, g, 1, &q), -EINVAL);
		}
		/* a level out of range is reported */
		if (n) {
			idx[n / 2] = (uint8_t)(q.nbins + 2);
			rckpt_qerr_init(&e);
			assert_int_equal(rckpt_qerr_add(&e, idx, w, g, n, &q), -EBADMSG);
		}
		free(w), free(g), free(r), free(idx), free(prot);
	}
}

static void test_block_dist(void **state)
{
	static const uint64_t blocks[] = { 1, 7, 256, 1000, 4096, 100000 };
	const size_t n = 123457;
	float *c = malloc(4 * n), *s = malloc(4 * n);
	double *out = malloc(8 * (n + 1));
	size_t i;
	unsigned bi;
	(void)state;
	for (i = 0; i < n; i++) {
		s[i] = nrandf();
		c[i] = s[i] + (i % 5 == 0 ? nrandf() * 0.1f : 0.0f);
	}
	for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
		const uint64_t b = blocks[bi], nb = (n + b - 1) / b;
		uint64_t k;
		rckpt_block_dist(out, c, s, n, b);
		for (k = 0; k < nb; k++) {
			double a[256] = { 0 }, plain = 0, spec;
			uint64_t i0 = k * b, e = i0 + b < n ? i0 + b : n, u;
			for (u = i0; u < e; u++) {
				double d = (double)c[u] - (double)s[u];
				a[(u - i0) % 256] += d * d;
				plain += d * d;
			}
			spec = tree(a);
			assert_memory_equal(&out[k], &spec, sizeof(spec));
			assert_true(fabs(out[k] - plain) <= 1e-12 * (plain + 1e-300));
		}
	}
	free(c), free(s), free(out);
}

/* A second moment's values: decades of positives, zeros, and what the
 * LOG2 transform refuses (negatives, NaN, Inf), every few. */
static float moment2(size_t i)
{
	switch (i % 97) {
	case 3:
		return 0.0f;
	case 5:
		return -1e-9f;
	case 7:
		return NAN;
	case 11:
		return INFINITY;
	case 13:
		return 1e-42f; /* subnormal */
	default:
		return (float)exp(nrandf() * 6.0 - 14.0);
	}
}

/* rckpt_update_weights, from rckpt_quant.h's words: the element formulas,
 * and the sum in rckpt_qerr's order. */
static void test_update_weights(void **state)
{
	static const size_t sizes[] = { 0, 1, 2047, 2048, 2049, 2048 * 257 + 3 };
	static const double epss[] = { 1e-8, 3e-6 };
	unsigned si, mode, ei;
	(void)state;
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (ei = 0; ei < 2; ei++)
			for (mode = 0; mode < 4; mode++) { /* no m; m; m and wm; m, linear */
				const size_t n = sizes[si];
				const double eps = epss[ei];
				const int withm = mode > 0, withwm = mode == 2, lin = mode == 3;
				float *v = malloc(4 * n + 4), *m = malloc(4 * n + 4);
				float *wv = malloc(4 * n + 4), *wm = malloc(4 * n + 4);
				double on[256] = { 0 }, den = -1, spec, plain = 0;
				size_t i, t, ntiles = (n + 2047) / 2048;
				for (i = 0; i < n; i++) {
					v[i] = moment2(i);
					m[i] = i % 101 == 9 ? NAN : nrandf() * 1e-3f;
				}
				rckpt_update_weights(wv, withwm ? wm : NULL, &den, v, withm ? m : NULL, n, eps, lin);
				for (t = 0; t < ntiles; t++) {
					double a[256] = { 0 };
					unsigned j, r;
					for (j = 0; j < 256; j++)
						for (r = 0; r < 8; r++) {
							const size_t k = t * 2048 + (size_t)r * 256 + j;
							double vv, s, d, rho, f1, term = 1.0;
							float want;
							uint32_t b;
							if (k >= n)
								continue;
							vv = v[k] > 0 && isfinite(v[k]) ? v[k] : 0.0;
							s = sqrt(vv), d = s + eps, rho = s / d;
							memcpy(&b, &v[k], 4);
							f1 = lin ? fmax(vv, eps * eps) : 1.0 + (double)(b & 0x7fffff) * 0x1p-23;
							if (withm) {
								const double u = (isfinite(m[k]) ? m[k] : 0.0) / d;
								want = (float)(fabs(u) * rho / (2.0 * f1));
								term = u * u;
								if (withwm) {
									const float w1 = (float)(1.0 / d);
									assert_memory_equal(&wm[k], &w1, 4);
								}
							} else {
								want = (float)(rho / (2.0 * f1));
							}
							assert_memory_equal(&wv[k], &want, 4);
							assert_true(isfinite(wv[k]) && wv[k] >= 0);
							a[j] += term;
							plain += term;
						}
					on[t % 256] += tree(a);
				}
				spec = tree(on);
				assert_memory_equal(&den, &spec, sizeof(den)); /* bit for bit */
				assert_true(fabs(den - plain) <= 1e-12 * plain);
				if (!withm)
					assert_true(den == (double)n);
				free(v), free(m), free(wv), free(wm);
			}
}

/* rckpt_norm_divide: m / (sqrtf(v) + eps), one float rounding per step;
 * in place too (out == m), as the encoder calls it. */
static void test_norm_divide(void **state)
{
	const size_t n = 10007;
	float *m = malloc(4 * n), *v = malloc(4 * n), *out = malloc(4 * n);
	size_t i;
	(void)state;
	for (i = 0; i < n; i++) {
		m[i] = nrandf() * 1e-3f;
		v[i] = i % 9 == 0 ? 0.0f : (float)exp(nrandf() * 6.0 - 14.0);
	}
	rckpt_norm_divide(out, m, v, 1e-8f, n);
	for (i = 0; i < n; i++) {
		volatile float s = sqrtf(v[i]), d = s + 1e-8f, q = m[i] / d;
		assert_memory_equal(&out[i], (const float *)&q, 4);
		if (v[i] == 0.0f)
			assert_true(fabsf(out[i] - m[i] * 1e8f) <= 1e-6f * fabsf(m[i] * 1e8f));
	}
	memcpy(out, m, 4 * n);
	rckpt_norm_divide(out, out, v, 1e-8f, n);
	for (i = 0; i < n; i++) {
		volatile float s = sqrtf(v[i]), d = s + 1e-8f, q = m[i] / d;
		assert_memory_equal(&out[i], (const float *)&q, 4);
	}
	free(m), free(v), free(out);
}

static void test_symbols(void **state)
{
	const size_t n = 50000;
	uint8_t *cur = malloc(n), *prev = malloc(n), *d = malloc(n), *plain = malloc(n), *want = malloc(n);
	const unsigned lc = 18, lp = 10;
	size_t i, o = 0;
	unsigned k;
	(void)state;
	for (i = 0; i < n; i++) {
		prev[i] = (uint8_t)(urand() * lp);
		cur[i] = urand() < 0.9 ? prev[i] : (uint8_t)(urand() * lc);
	}
	/* base: the levels themselves */
	assert_int_equal(rckpt_istream_symbols(d, cur, n, lc, NULL, 0, 0), 0);
	assert_memory_equal(d, cur, n);
	/* plain delta: (cur - prev) mod max(lc, lp) */
	assert_int_equal(rckpt_istream_symbols(plain, cur, n, lc, prev, lp, 0), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(plain[i], (cur[i] + lc - prev[i]) % lc);
	/* rearranged: the plain deltas, stably grouped by prev */
	for (k = 0; k < lp; k++)
		for (i = 0; i < n; i++)
			if (prev[i] == k)
				want[o++] = plain[i];
	assert_int_equal(rckpt_istream_symbols(d, cur, n, lc, prev, lp, 1), 0);
	assert_memory_equal(d, want, n);
	/* bad levels */
	cur[7] = lc;
	assert_int_equal(rckpt_istream_symbols(d, cur, n, lc, prev, lp, 1), -EINVAL);
	assert_int_equal(rckpt_istream_symbols(d, cur, n, lc, prev, lp, 0), -EINVAL);
	cur[7] = 0;
	prev[9] = lp;
	assert_int_equal(rckpt_istream_symbols(d, cur, n, lc, prev, lp, 1), -EINVAL);
	assert_int_equal(rckpt_istream_symbols(d, cur, n, 0, prev, lp, 1), -EINVAL);
	free(cur), free(prev), free(d), free(plain), free(want);
}

/* A histogram in the GPU's layout ([neg | pos | zeros]) adopted by a fresh
 * sketch answers as the sketch that counted the values. */
static void test_adopt_counts(void **state)
{
	const size_t n = 100000;
	float *x = malloc(4 * n);
	rckpt_sketch_t a, b;
	size_t i;
	static const double qs[] = { 0, 0.001, 0.1, 0.5, 0.9, 0.995, 1 };
	unsigned k;
	(void)state;
	for (i = 0; i < n; i++)
		x[i] = i % 17 == 0 ? 0.0f : i % 101 == 0 ? 1e-40f : nrandf() * 0.05f;
	assert_int_equal(rckpt_sketch_init(&a, 6), 0);
	assert_int_equal(rckpt_sketch_init(&b, 6), 0);
	rckpt_sketch_add(&a, x, n);
	/* what the kernel writes: counts, the zeros in the last slot */
	memcpy(b.neg, a.neg, 8 * 2 * a.nkeys);
	b.neg[2 * b.nkeys] = a.zero;
	rckpt_sketch_adopt_counts(&b, n);
	assert_int_equal(b.zero, a.zero);
	assert_int_equal(b.total, a.total);
	assert_int_equal(b.lo, a.lo);
	assert_int_equal(b.hi, a.hi);
	assert_int_equal(b.neg[2 * b.nkeys], 0);
	for (k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
		float l1, h1, l2, h2;
		rckpt_sketch_abs_quantile_bounds(&a, qs[k], &l1, &h1);
		rckpt_sketch_abs_quantile_bounds(&b, qs[k], &l2, &h2);
		assert_memory_equal(&l1, &l2, 4);
		assert_memory_equal(&h1, &h2, 4);
	}
	rckpt_sketch_free(&a);
	rckpt_sketch_free(&b);
	free(x);
}

/* The kernels' parameters: the CPU's midpoints, and a level table that
 * dequantizes as the CPU does. */
static void test_qparams_make(void **state)
{
	const size_t n = 20000;
	float *x = malloc(4 * n), *r = malloc(4 * 70);
	uint8_t lv[70];
	uint16_t none = 0;
	rckpt_qparams_t q;
	rckpt_gpu_qparams_t gq;
	float mid[RCKPT_MAX_BINS];
	unsigned j, nm;
	(void)state;
	for (j = 0; j < n; j++)
		x[j] = nrandf();
	make_q(&q, x, NULL, n, 12);
	rckpt_gpu_qparams_make(&gq, &q);
	nm = rckpt_q_midpoints(mid, &q);
	assert_int_equal(nm, q.nbins - 1);
	assert_memory_equal(gq.mid, mid, 4 * nm);
	for (j = 1; j < nm; j++)
		assert_true(mid[j - 1] <= mid[j]); /* the kernel's binary search needs it */
	assert_int_equal(gq.pruned_level, rckpt_q_pruned_level(&q));
	for (j = 0; j < q.nbins + 1; j++)
		lv[j] = (uint8_t)j;
	assert_int_equal(rckpt_dequantize(r, lv, q.nbins + 1, &q, &none, 0), 0);
	assert_memory_equal(gq.level, r, 4 * (q.nbins + 1));
	free(x), free(r);
}

/* Without a device the GPU path refuses, and says so. */
static void test_no_device(void **state)
{
	rckpt_gpu_probe_t p;
	rckpt_gpuenc_t *g = (rckpt_gpuenc_t *)&p;
	(void)state;
	rckpt_gpu_probe(&p);
	if (p.device_count > 0) {
		TEST_SKIP(TEST_NEED_NONE, "this machine has a CUDA device (test_gpu_parity covers it)");
	}
	assert_int_equal(rckpt_gpuenc_create(&g), -ENODEV);
	assert_null(g);
	{
		float x = 1.0f;
		double den;
		assert_int_equal(rckpt_gpu_is_device_ptr(&x), 0);
		assert_int_equal(rckpt_gpu_xf_values(&x, &x, RCKPT_DT_F32, 1, 1, NULL), -ENODEV);
		assert_int_equal(rckpt_gpu_xf_inverse(&x, 1, 1, NULL), -ENODEV);
		assert_int_equal(rckpt_gpu_norm_divide(&x, &x, RCKPT_DT_F32, &x, 1e-8f, 1, NULL), -ENODEV);
		assert_int_equal(rckpt_gpu_update_weights(&x, NULL, &den, &x, RCKPT_DT_F32, NULL, 0, 1, 1e-8, 0,
							  &den, 8, NULL), -ENODEV);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_qerr_order),
		cmocka_unit_test(test_block_dist),
		cmocka_unit_test(test_update_weights),
		cmocka_unit_test(test_norm_divide),
		cmocka_unit_test(test_symbols),
		cmocka_unit_test(test_adopt_counts),
		cmocka_unit_test(test_qparams_make),
		cmocka_unit_test(test_no_device),
	};
	return test_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
