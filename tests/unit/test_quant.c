/*
 * test_quant.c — the sketch, weighted k-means, and quantize/dequantize.
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

#include "rckpt_kmeans.h"
#include "rckpt_quant.h"
#include "rckpt_sketch.h"

#define TEST_RNG_SEED 0x243f6a8885a308d3ull
#include "test_rng.h"

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* ---- sketch ---- */

/* The sketch's quantiles are within alpha (relative) of the exact ones. */
static void check_quantiles(const float *x, size_t n, unsigned mbits)
{
	static const double qs[] = { 0, .001, .01, .1, .25, .5, .75, .9, .99, .999, 1 };
	float *sorted = malloc(sizeof(float) * n);
	rckpt_sketch_t s;
	size_t k;

	assert_int_equal(rckpt_sketch_init(&s, mbits), 0);
	rckpt_sketch_add(&s, x, n);
	assert_int_equal(s.total, n);
	memcpy(sorted, x, sizeof(float) * n);
	qsort(sorted, n, sizeof(float), cmp_float);
	for (k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
		float truth = sorted[(size_t)(qs[k] * (double)(n - 1))];
		float est = rckpt_sketch_quantile(&s, qs[k]);
		if (fabsf(truth) < FLT_MIN) /* zeros and subnormals count as 0 */
			assert_true(est == 0.0f);
		else if (!(fabs((double)est - truth) <= rckpt_sketch_alpha(&s) * fabs(truth) * (1 + 1e-6)))
			fail_msg("q=%g: sketch %.9g, exact %.9g, alpha %g", qs[k], est, truth,
				 rckpt_sketch_alpha(&s));
	}
	rckpt_sketch_free(&s);
	free(sorted);
}

static void test_sketch_error_bound(void **state)
{
	enum { N = 100003 };
	float *x = malloc(sizeof(float) * N);
	unsigned mbits;
	size_t i;

	(void)state;
	for (mbits = 1; mbits <= 10; mbits += 3) {
		for (i = 0; i < N; i++) /* weights: normal, small */
			x[i] = (float)(nrand() * 0.02);
		check_quantiles(x, N, mbits);
		for (i = 0; i < N; i++) /* log-normal over 60 decades */
			x[i] = (float)(exp(fmax(-85, fmin(85, nrand() * 30))) * (urand() < 0.5 ? -1 : 1));
		check_quantiles(x, N, mbits);
		for (i = 0; i < N; i++) /* power law: heavy tail */
			x[i] = (float)pow(urand() + 1e-12, -3.0);
		check_quantiles(x, N, mbits);
		for (i = 0; i < N; i++) /* adversarial: bucket edges, extremes, subnormals */
			x[i] = (i % 5 == 0)   ? nextafterf(1.0f, 0.0f)
			       : (i % 5 == 1) ? 1.0f
			       : (i % 5 == 2) ? FLT_MAX
			       : (i % 5 == 3) ? -FLT_MIN
					      : FLT_MIN / 4;
		check_quantiles(x, N, mbits);
		for (i = 0; i < N; i++) /* all equal */
			x[i] = 0.125f;
		check_quantiles(x, N, mbits);
		for (i = 0; i < N; i++) /* the topmost bucket: its midpoint is finite */
			x[i] = i % 2 ? FLT_MAX : -FLT_MAX;
		check_quantiles(x, N, mbits);
		check_quantiles(x, 1, mbits);
	}
	free(x);
}

/* Merging the sketches of two halves gives the sketch of the whole. */
static void test_sketch_merge(void **state)
{
	enum { N = 50001 };
	float *x = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N);
	rckpt_sketch_t a, b, all;
	size_t i;

	(void)state;
	for (i = 0; i < N; i++) {
		x[i] = (float)(nrand() * 0.1);
		g[i] = (float)(nrand() * 1e-3);
	}
	assert_int_equal(rckpt_sketch_init(&a, 7), 0);
	assert_int_equal(rckpt_sketch_init(&b, 7), 0);
	assert_int_equal(rckpt_sketch_init(&all, 7), 0);
	rckpt_sketch_add_abs_prod(&a, x, g, N / 3);
	rckpt_sketch_add_abs_prod(&b, x + N / 3, g + N / 3, N - N / 3);
	rckpt_sketch_add_abs_prod(&all, x, g, N);
	assert_int_equal(rckpt_sketch_merge(&a, &b), 0);
	assert_int_equal(a.total, all.total);
	assert_int_equal(a.zero, all.zero);
	assert_memory_equal(a.pos, all.pos, a.nkeys * sizeof(uint64_t));
	assert_memory_equal(a.neg, all.neg, a.nkeys * sizeof(uint64_t));
	for (i = 0; i < a.nkeys; i++) /* |w*g| has no negative bucket */
		assert_int_equal(all.neg[i], 0);
	rckpt_sketch_free(&b);
	assert_int_equal(rckpt_sketch_init(&b, 6), 0);
	assert_int_equal(rckpt_sketch_merge(&a, &b), -EINVAL);
	rckpt_sketch_free(&a);
	rckpt_sketch_free(&b);
	rckpt_sketch_free(&all);
	assert_int_equal(rckpt_sketch_init(&a, 0), -EINVAL);
	assert_int_equal(rckpt_sketch_init(&a, 11), -EINVAL);
	free(x);
	free(g);
}

/* The compact view answers what the sketch answers. */
static void test_sketch_view(void **state)
{
	enum { N = 40000 };
	float *x = malloc(sizeof(float) * N), a, b, c, d;
	rckpt_sketch_t s;
	rckpt_sketch_view_t v;
	size_t i, k;
	double q;

	(void)state;
	for (i = 0; i < N; i++)
		x[i] = i % 97 == 0 ? 0.0f : (float)(exp(nrand() * 3) * (urand() < 0.4 ? -1 : 1));
	assert_int_equal(rckpt_sketch_init(&s, 6), 0);
	rckpt_sketch_add(&s, x, N);
	assert_int_equal(rckpt_sketch_view_init(&v, &s), 0);
	for (q = 0; q <= 1.0; q += 0.0137) {
		rckpt_sketch_abs_quantile_bounds(&s, q, &a, &b);
		rckpt_sketch_view_abs_bounds(&v, q, &c, &d);
		assert_true(a == c && b == d);
	}
	for (i = 1, k = 0; i < v.n; i++) /* ascending, counts add up */
		assert_true(v.value[i] > v.value[i - 1]);
	for (i = 0; i < v.n; i++)
		k += v.count[i];
	assert_int_equal(k, N);
	rckpt_sketch_view_free(&v);
	rckpt_sketch_free(&s);
	free(x);
}

/* The sketch scans only the keys it has counted: merging disjoint ranges,
 * clearing and adding again, and extremes and subnormals all still give
 * what scanning every key gives. */
static void test_sketch_ranges(void **state)
{
	static const float lo[] = { 1e-30f, -3e-29f, 2e-30f, 1e-44f /* subnormal */, 0.0f };
	static const float hi[] = { 3e38f, -1e30f, 7.5f, -FLT_MAX };
	rckpt_sketch_t a, b, all;
	rckpt_sketch_view_t v;
	float p, r, u, w;
	double q;

	(void)state;
	assert_int_equal(rckpt_sketch_init(&a, 6), 0);
	assert_int_equal(rckpt_sketch_init(&b, 6), 0);
	assert_int_equal(rckpt_sketch_init(&all, 6), 0);
	rckpt_sketch_add(&b, hi, 4);
	rckpt_sketch_clear(&b); /* forgets hi entirely */
	assert_int_equal(b.total, 0);
	assert_true(b.lo == b.hi);
	rckpt_sketch_add(&a, lo, 5);
	rckpt_sketch_add(&b, hi, 4);
	rckpt_sketch_add(&all, hi, 4);
	rckpt_sketch_add(&all, lo, 5);
	assert_int_equal(rckpt_sketch_merge(&a, &b), 0);
	assert_memory_equal(a.neg, all.neg, 2 * a.nkeys * sizeof(uint64_t));
	assert_int_equal(a.zero, 2);
	assert_int_equal(a.lo, all.lo);
	assert_int_equal(a.hi, all.hi);
	assert_int_equal(rckpt_sketch_view_init(&v, &a), 0);
	assert_int_equal(v.n, 8); /* seven buckets and zero */
	for (q = 0; q <= 1.0; q += 0.05) {
		rckpt_sketch_abs_quantile_bounds(&all, q, &p, &r);
		rckpt_sketch_view_abs_bounds(&v, q, &u, &w);
		assert_true(p == u && r == w);
		assert_true(rckpt_sketch_quantile(&a, q) == rckpt_sketch_quantile(&all, q));
	}
	rckpt_sketch_view_free(&v);
	rckpt_sketch_free(&a);
	rckpt_sketch_free(&b);
	rckpt_sketch_free(&all);
}

/* ---- k-means ---- */

static void test_kmeans_separated(void **state)
{
	double x[300], w[300];
	float c[3], c2[3];
	size_t i;

	(void)state;
	for (i = 0; i < 300; i++) { /* three tight groups around -5, 0.5, 7 */
		double centre = i < 100 ? -5 : i < 200 ? 0.5 : 7;
		x[i] = centre + (double)(i % 100) * 1e-4;
		w[i] = 1 + (double)(i % 7);
	}
	assert_int_equal(rckpt_kmeans_1d(c, 3, x, w, 300, 50), 3);
	assert_float_equal(c[0], -5 + 0.005, 0.01);
	assert_float_equal(c[1], 0.5 + 0.005, 0.01);
	assert_float_equal(c[2], 7 + 0.005, 0.01);
	assert_int_equal(rckpt_kmeans_1d(c2, 3, x, w, 300, 50), 3);
	assert_memory_equal(c, c2, sizeof(c)); /* deterministic */
}

static void test_kmeans_few_points(void **state)
{
	double x[4] = { -1, 2, 2, 3 }, w[4] = { 1, 1, 1, 0 }, z[4] = { 0 };
	float c[8];

	(void)state;
	assert_int_equal(rckpt_kmeans_1d(c, 8, x, w, 4, 20), 2); /* 3 has no weight */
	assert_true(c[0] == -1.0f && c[1] == 2.0f);
	assert_int_equal(rckpt_kmeans_1d(c, 8, x, z, 4, 20), 0);
	assert_int_equal(rckpt_kmeans_1d(c, 0, x, w, 4, 20), -EINVAL);
}

/* Weight pulls centroids: with three centroids for {0..3, 100}, a heavy 100
 * keeps one for itself and the other two split 0..3 (which way is a local
 * optimum of the seeding). */
static void test_kmeans_weights_matter(void **state)
{
	double x[5] = { 0, 1, 2, 3, 100 }, w[5] = { 1, 1, 1, 1, 50 };
	float c[3];

	(void)state;
	assert_int_equal(rckpt_kmeans_1d(c, 3, x, w, 5, 50), 3);
	assert_true(c[2] == 100.0f);
	assert_true(c[0] >= 0.0f && c[1] <= 3.0f); /* 0..3 split between two */
}

/* ---- quantize ---- */

static rckpt_qparams_t sample_q(void)
{
	rckpt_qparams_t q;
	memset(&q, 0, sizeof(q));
	q.nbins = 4;
	q.centroids[0] = -1.0f;
	q.centroids[1] = -0.2f;
	q.centroids[2] = 0.3f;
	q.centroids[3] = 1.0f;
	q.prune_below = 0.0f;
	q.protect_mag = INFINITY;
	q.protect_sens = INFINITY;
	return q;
}

static void test_quant_levels_by_hand(void **state)
{
	/* midpoints -0.6, 0.05, 0.65; pruned level 2 (two centroids < 0);
	 * levels: 0:-1 1:-0.2 2:pruned(0) 3:0.3 4:1 5:protected */
	const float w[] = { -3.0f, -0.6f, -0.59f, 0.0f, 0.05f, 0.04999f, 0.65f, 9.0f, 0.01f };
	const uint8_t want[] = { 0, 1, 1, 1, 3, 1, 4, 4, 1 };
	rckpt_qparams_t q = sample_q();
	uint8_t idx[9];
	uint16_t prot[9];
	size_t np = 99;

	(void)state;
	assert_int_equal(rckpt_qparams_check(&q), 0);
	assert_int_equal(rckpt_q_levels(&q), 6);
	assert_int_equal(rckpt_q_pruned_level(&q), 2);
	rckpt_quantize(idx, prot, &np, w, NULL, 9, &q);
	assert_int_equal(np, 0);
	assert_memory_equal(idx, want, 9);

	q.prune_below = 0.02f; /* |0.01| and 0 are pruned */
	q.protect_mag = 5.0f;  /* 9 is protected, -3 not */
	rckpt_quantize(idx, prot, &np, w, NULL, 9, &q);
	assert_int_equal(idx[8], 2);
	assert_int_equal(idx[3], 2);
	assert_int_equal(idx[7], 5);
	assert_int_equal(idx[0], 0);
	assert_int_equal(np, 1);
	assert_int_equal(prot[0], rckpt_f32_to_bf16(9.0f));
}

static void test_quant_sensitivity(void **state)
{
	const float w[4] = { 0.5f, 0.5f, 0.5f, 0.5f }, g[4] = { 0.0f, 1e-3f, 1.0f, 100.0f };
	rckpt_qparams_t q = sample_q();
	uint8_t idx[4];
	uint16_t prot[4];
	size_t np;

	(void)state;
	q.prune_by_sensitivity = 1;
	q.prune_below = 0.01f; /* |w g| = 0, 5e-4 pruned */
	q.protect_sens = 10.0f; /* |w g| = 50 protected */
	rckpt_quantize(idx, prot, &np, w, g, 4, &q);
	assert_int_equal(idx[0], 2);
	assert_int_equal(idx[1], 2);
	assert_int_equal(idx[2], 3);
	assert_int_equal(idx[3], 5);
	assert_int_equal(np, 1);
	rckpt_quantize(idx, prot, &np, w, NULL, 4, &q); /* no gradients: magnitude only */
	assert_int_equal(idx[0], 3);
	assert_int_equal(np, 0);
}

/* On random data: every level is the nearest centroid (ties up), protected
 * values come back as their bf16, and dequantize inverts the levels. */
static void test_quant_random_property(void **state)
{
	static const size_t sizes[] = { 0, 1, 2, 511, 512, 513, 100003 };
	size_t si;

	(void)state;
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t n = sizes[si], i, np, k = 0;
		float *w = malloc(sizeof(float) * (n + 1)), *out = malloc(sizeof(float) * (n + 1));
		uint8_t *idx = malloc(n + 1);
		uint16_t *prot = malloc(sizeof(uint16_t) * (n + 1));
		rckpt_qparams_t q;
		unsigned j;

		memset(&q, 0, sizeof(q));
		q.nbins = 12;
		for (j = 0; j < q.nbins; j++)
			q.centroids[j] = -0.05f + 0.01f * (float)j;
		q.prune_below = 0.004f;
		q.protect_mag = 0.09f;
		q.protect_sens = INFINITY;
		for (i = 0; i < n; i++)
			w[i] = (float)(nrand() * 0.03);
		rckpt_quantize(idx, prot, &np, w, NULL, n, &q);
		assert_int_equal(rckpt_dequantize(out, idx, n, &q, prot, np), 0);
		for (i = 0; i < n; i++) {
			float a = fabsf(w[i]);
			if (a >= q.protect_mag) {
				assert_int_equal(idx[i], 13);
				assert_true(out[i] == rckpt_bf16_to_f32(rckpt_f32_to_bf16(w[i])));
				k++;
			} else if (a < q.prune_below) {
				assert_int_equal(idx[i], rckpt_q_pruned_level(&q));
				assert_true(out[i] == 0.0f);
			} else {
				unsigned best = 0;
				for (j = 0; j + 1 < q.nbins; j++) {
					float mid = q.centroids[j] + (q.centroids[j + 1] - q.centroids[j]) * 0.5f;
					if (w[i] >= mid)
						best = j + 1;
				}
				assert_true(out[i] == q.centroids[best]);
			}
		}
		assert_int_equal(k, np);
		if (n > 2) {
			assert_int_equal(rckpt_dequantize(out, idx, n, &q, prot, np ? np - 1 : 0),
					 np ? -EBADMSG : 0);
			idx[n / 2] = 14;
			assert_int_equal(rckpt_dequantize(out, idx, n, &q, prot, np), -EBADMSG);
		}
		free(w);
		free(out);
		free(idx);
		free(prot);
	}
}

/* Every bin count, values drawn around, between and exactly on the
 * midpoints (and on the centroids, and beyond both ends): the vector
 * paths (one compare per midpoint below 21 bins, two levels above) give
 * each value the level of the plain count #{j : x >= mid[j]}. */
static void test_quant_bins_exact(void **state)
{
	enum { N = 4099 }; /* not a multiple of 8: the scalar tail too */
	float *x = malloc(sizeof(float) * N), mid[RCKPT_MAX_BINS];
	uint8_t *idx = malloc(N);
	uint16_t *prot = malloc(2 * N);
	unsigned nb, j, trial;
	size_t i, np;

	(void)state;
	for (trial = 0; trial < 4; trial++)
		for (nb = 1; nb <= RCKPT_MAX_BINS; nb++) {
			rckpt_qparams_t q = { 0 };
			unsigned nm;
			q.nbins = nb;
			q.prune_below = 0.0f;	      /* none pruned */
			q.protect_mag = INFINITY;     /* none protected */
			q.protect_sens = INFINITY;
			q.centroids[0] = (float)(nrand() * (trial ? 0.01 : 1e-30));
			for (j = 1; j < nb; j++) /* close ones too: rounding at the midpoints */
				q.centroids[j] = nextafterf(q.centroids[j - 1], INFINITY) +
						 (float)(urand() < 0.2 ? 0 : urand() * 0.003);
			assert_int_equal(rckpt_qparams_check(&q), 0);
			nm = rckpt_q_midpoints(mid, &q);
			for (i = 0; i < N; i++) {
				const double u = urand();
				const unsigned k = (unsigned)(urand() * nb);
				if (u < 0.3 && nm)
					x[i] = mid[k < nm ? k : nm - 1];
				else if (u < 0.4)
					x[i] = q.centroids[k];
				else if (u < 0.45 && nm)
					x[i] = nextafterf(mid[k < nm ? k : nm - 1], -INFINITY);
				else
					x[i] = q.centroids[0] - 0.001f +
					       (float)urand() * (q.centroids[nb - 1] - q.centroids[0] + 0.002f);
			}
			x[N - 1] = FLT_MAX; /* the ends of the finite values */
			x[N - 2] = -FLT_MAX;
			rckpt_quantize(idx, prot, &np, x, NULL, N, &q);
			assert_int_equal(np, 0);
			for (i = 0; i < N; i++) {
				unsigned c = 0;
				for (j = 0; j < nm; j++)
					c += x[i] >= mid[j];
				c += c >= rckpt_q_pruned_level(&q); /* the pruned level's slot */
				if (idx[i] != c)
					fail_msg("%u bins, value %zu (%.9g): level %u, the count says %u", nb, i,
						 (double)x[i], idx[i], c);
			}
		}
	free(x);
	free(idx);
	free(prot);
}

static void test_bf16(void **state)
{
	(void)state;
	assert_int_equal(rckpt_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(rckpt_f32_to_bf16(-2.0f), 0xc000);
	assert_int_equal(rckpt_f32_to_bf16(1.00390625f), 0x3f80); /* tie: to even */
	assert_int_equal(rckpt_f32_to_bf16(1.01171875f), 0x3f82); /* tie: to even, up */
	assert_int_equal(rckpt_f32_to_bf16(1.0078125f + 1e-6f), 0x3f81);
	assert_true(rckpt_bf16_to_f32(0x3f80) == 1.0f);
}

static void test_qparams_check(void **state)
{
	rckpt_qparams_t q = sample_q();

	(void)state;
	q.centroids[2] = -0.2f; /* not strictly ascending */
	assert_int_equal(rckpt_qparams_check(&q), -EINVAL);
	q = sample_q();
	q.centroids[1] = NAN;
	assert_int_equal(rckpt_qparams_check(&q), -EINVAL);
	q = sample_q();
	q.nbins = 0;
	assert_int_equal(rckpt_qparams_check(&q), -EINVAL);
	q = sample_q();
	q.prune_below = NAN;
	assert_int_equal(rckpt_qparams_check(&q), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sketch_error_bound),
		cmocka_unit_test(test_sketch_merge),
		cmocka_unit_test(test_sketch_view),
		cmocka_unit_test(test_sketch_ranges),
		cmocka_unit_test(test_kmeans_separated),
		cmocka_unit_test(test_kmeans_few_points),
		cmocka_unit_test(test_kmeans_weights_matter),
		cmocka_unit_test(test_quant_levels_by_hand),
		cmocka_unit_test(test_quant_sensitivity),
		cmocka_unit_test(test_quant_random_property),
		cmocka_unit_test(test_quant_bins_exact),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_qparams_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
