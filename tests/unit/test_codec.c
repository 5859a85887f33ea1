/*
 * test_codec.c — tensors through the pipeline: layer kinds, dtype
 * conversions, quality as bins grow, prune/protect fractions, edge cases,
 * determinism, and a chain of real checkpoints decoded bit for bit.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_skip.h"

#include "rckpt_codec.h"
#include "rckpt_quant.h"
#include "rckpt_safetensors.h"

#define TEST_RNG_SEED 0x0ddba11cafef00dull
#include "test_rng.h"

static void free_seg(rckpt_seg_t *s)
{
	free(s->idx);
	free(s->prot);
	free(s->raw);
	memset(s, 0, sizeof(*s));
}

static double encode_error(const float *w, const float *g, size_t n, const rckpt_qconfig_t *c,
			   rckpt_seg_t *keep)
{
	rckpt_seg_t s;
	uint64_t bad;
	float *r = malloc(sizeof(float) * (n + 1));
	double e;

	assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, w, RCKPT_DT_F32, n, g, RCKPT_LK_LINEAR, c), 0);
	assert_int_equal(rckpt_codec_decode_f32(r, &s), 0);
	e = rckpt_codec_rel_error(w, r, g, n);
	free(r);
	if (keep)
		*keep = s;
	else
		free_seg(&s);
	return e;
}

static void test_layer_kinds(void **state)
{
	const uint64_t s2[2] = { 100, 8 }, s4[4] = { 16, 8, 3, 3 }, s1[1] = { 8 };
	(void)state;
	assert_int_equal(rckpt_layer_kind("embed.weight", 2, s2), RCKPT_LK_EMBEDDING);
	assert_int_equal(rckpt_layer_kind("transformer.wte.weight", 2, s2), RCKPT_LK_EMBEDDING);
	assert_int_equal(rckpt_layer_kind("fc1.weight", 2, s2), RCKPT_LK_LINEAR);
	assert_int_equal(rckpt_layer_kind("conv1.weight", 4, s4), RCKPT_LK_CONV);
	assert_int_equal(rckpt_layer_kind("norm.weight", 1, s1), RCKPT_LK_NORM_BIAS);
	assert_int_equal(rckpt_layer_kind("fc1.bias", 1, s1), RCKPT_LK_NORM_BIAS);
	assert_int_equal(rckpt_layer_kind("scale", 0, NULL), RCKPT_LK_NORM_BIAS);
}

/* Every finite half converts to float and back exactly; ties round to even. */
static void test_half_conversions(void **state)
{
	uint32_t h;
	(void)state;
	for (h = 0; h < 65536; h++) {
		uint8_t in[2] = { (uint8_t)h, (uint8_t)(h >> 8) }, out[2];
		float f;
		if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) /* NaN payloads */
			continue;
		rckpt_widen_to_f32(&f, in, RCKPT_DT_F16, 1);
		rckpt_narrow_from_f32(out, &f, RCKPT_DT_F16, 1);
		assert_int_equal(out[0] | out[1] << 8, h);
	}
	{
		float v[5] = { 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 65519.0f, 0x1p-25f };
		uint8_t o[10];
		rckpt_narrow_from_f32(o, v, RCKPT_DT_F16, 5);
		assert_int_equal(o[0] | o[1] << 8, 0x3c00); /* tie to even: down */
		assert_int_equal(o[2] | o[3] << 8, 0x3c02); /* tie to even: up */
		assert_int_equal(o[4] | o[5] << 8, 0x7c00); /* overflow */
		assert_int_equal(o[6] | o[7] << 8, 0x7bff); /* 65504 */
		assert_int_equal(o[8] | o[9] << 8, 0x0000); /* half the smallest subnormal: to even, 0 */
	}
}

/* More bins, less error: the k-means codebook does its job. */
static void test_error_falls_with_bins(void **state)
{
	enum { N = 200000 };
	static const unsigned bins[] = { 4, 6, 8, 12, 16, 32 };
	float *w = malloc(sizeof(float) * N);
	rckpt_qconfig_t c;
	double last = 1e9;
	size_t i, b;

	(void)state;
	for (i = 0; i < N; i++) /* weights: heavy-tailed around 0 */
		w[i] = (float)(nrand() * 0.02 * (urand() < 0.05 ? 5 : 1));
	rckpt_qconfig_default(&c);
	c.prune_frac[RCKPT_LK_LINEAR] = 0;
	for (b = 0; b < sizeof(bins) / sizeof(bins[0]); b++) {
		double e;
		c.bins = bins[b];
		e = encode_error(w, NULL, N, &c, NULL);
		assert_true(e < last);
		last = e;
	}
	/* 32 bins, 0.5 % protected: measured 3.5e-3 of the energy, near the
	 * MSE-optimal 5-bit quantizer of a Gaussian (~2.5e-3); the magnitude
	 * term of the bucket weights trades a little MSE for large weights. */
	assert_true(last < 5e-3);
	free(w);
}

/* Prune and protect take about the fractions asked, never more. */
static void test_fractions(void **state)
{
	enum { N = 300000 };
	float *w = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N);
	rckpt_qconfig_t c;
	rckpt_seg_t s;
	size_t i, pruned = 0;
	unsigned pl;

	(void)state;
	for (i = 0; i < N; i++) {
		w[i] = (float)(nrand() * 0.05);
		g[i] = (float)fabs(nrand() * 1e-3); /* an RMS */
	}
	rckpt_qconfig_default(&c);
	c.prune_frac[RCKPT_LK_LINEAR] = 0.3f;
	c.protect_frac = 0.01f;
	encode_error(w, NULL, N, &c, &s);
	{
		rckpt_qparams_t q;
		memset(&q, 0, sizeof(q));
		q.nbins = s.nbins;
		memcpy(q.centroids, s.centroids, sizeof(float) * s.nbins);
		pl = rckpt_q_pruned_level(&q);
	}
	for (i = 0; i < N; i++)
		pruned += s.idx[i] == pl;
	assert_true(pruned <= (size_t)(0.3 * N) && pruned > (size_t)(0.27 * N));
	assert_true(s.nprot <= (size_t)(0.01 * N) && s.nprot > (size_t)(0.009 * N));
	free_seg(&s);
	/* with gradients, protection also takes the top |w g|: more protected */
	c.prune_metric = RCKPT_PRUNE_SENSITIVITY;
	encode_error(w, g, N, &c, &s);
	assert_true(s.nprot > (size_t)(0.012 * N) && s.nprot <= (size_t)(0.02 * N));
	free_seg(&s);
	free(w);
	free(g);
}

/* Keeping the parent's codebook: the levels are the parent's, the
 * thresholds this step's (those of c on these values, the same as a fresh
 * codebook gets), a value that did not move keeps its level, and a parent
 * that is not a quantized segment is refused. */
static void test_keep_codebook(void **state)
{
	enum { N = 100000 };
	float *w = malloc(sizeof(float) * N), *w2 = malloc(sizeof(float) * N);
	rckpt_qconfig_t c;
	rckpt_tensor_prep_t p;
	rckpt_qparams_t fresh, keep;
	rckpt_seg_t parent, lossless;
	uint64_t bad;
	size_t i, moved = 0, np;
	uint8_t *i1 = malloc(N), *i2 = malloc(N);
	uint16_t *prot = malloc(2 * N);

	(void)state;
	for (i = 0; i < N; i++)
		w[i] = (float)(nrand() * 0.05);
	rckpt_qconfig_default(&c);
	c.bins = 16;
	c.prune_frac[RCKPT_LK_LINEAR] = 0.2f;
	c.protect_frac = 0.01f;
	encode_error(w, NULL, N, &c, &parent);
	/* the next step: most values unchanged, one in ten moved a little,
	 * and the spread a little wider */
	for (i = 0; i < N; i++)
		w2[i] = i % 10 == 0 ? w[i] * 1.1f + 0.001f : w[i];
	c.bins = 32; /* the parent's bin count wins */
	assert_int_equal(rckpt_codec_prepare(&p, &bad, w2, RCKPT_DT_F32, N, NULL, RCKPT_LK_LINEAR), 0);
	assert_int_equal(rckpt_codec_qparams(&fresh, &p, &c, RCKPT_QUANTIZER_KMEANS, NULL, NULL), 0);
	assert_int_equal(rckpt_codec_qparams_keep(&keep, &p, &c, &parent), 0);
	assert_int_equal(keep.nbins, parent.nbins);
	assert_memory_equal(keep.centroids, parent.centroids, sizeof(float) * parent.nbins);
	assert_true(keep.prune_below == fresh.prune_below);
	assert_true(keep.protect_mag == fresh.protect_mag);
	assert_int_equal(keep.prune_by_sensitivity, fresh.prune_by_sensitivity);
	rckpt_quantize(i1, prot, &np, w, NULL, N, &keep);
	rckpt_quantize(i2, prot, &np, w2, NULL, N, &keep);
	for (i = 0; i < N; i++)
		if (i % 10 != 0)
			moved += i1[i] != i2[i];
	/* an unmoved value changes level only where a threshold moved */
	assert_true(moved < N / 100);
	memset(&lossless, 0, sizeof(lossless));
	lossless.encoding = RCKPT_SEG_LOSSLESS;
	assert_int_equal(rckpt_codec_qparams_keep(&keep, &p, &c, &lossless), -EINVAL);
	assert_int_equal(rckpt_codec_qparams_keep(&keep, &p, &c, NULL), -EINVAL);
	lossless.encoding = RCKPT_SEG_QUANTIZED;
	lossless.nbins = RCKPT_MAX_BINS + 1;
	assert_int_equal(rckpt_codec_qparams_keep(&keep, &p, &c, &lossless), -EINVAL);
	rckpt_codec_prep_free(&p);
	free_seg(&parent);
	free(w);
	free(w2);
	free(i1);
	free(i2);
	free(prot);
}

static void test_edge_cases(void **state)
{
	float w[7] = { 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f }, r[7];
	uint16_t h[3] = { 0x3c00, 0xbc00, 0x0000 }, hb[3] = { 0x3f80, 0x4000, 0xc000 };
	rckpt_qconfig_t c;
	rckpt_seg_t s;
	uint64_t bad = 0;

	(void)state;
	rckpt_qconfig_default(&c);
	/* all equal: nothing pruned or protected; the centroid is the bucket's
	 * midpoint (k-means runs on the histogram), within alpha = 2^-7 */
	assert_true(encode_error(w, NULL, 7, &c, &s) <= 0x1p-14);
	assert_int_equal(s.nprot, 0);
	assert_int_equal(s.nbins, 1);
	free_seg(&s);
	/* one element, and none */
	assert_true(encode_error(w, NULL, 1, &c, NULL) <= 0x1p-14);
	assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, w, RCKPT_DT_F32, 0, NULL, RCKPT_LK_CONV, &c), 0);
	assert_int_equal(s.n, 0);
	free_seg(&s);
	/* all zero */
	memset(w, 0, sizeof(w));
	assert_true(encode_error(w, NULL, 7, &c, NULL) == 0.0);
	/* NaN and Inf are refused, naming the index */
	w[4] = NAN;
	assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, w, RCKPT_DT_F32, 7, NULL, RCKPT_LK_LINEAR, &c),
			 -EDOM);
	assert_int_equal(bad, 4);
	w[4] = 0;
	w[6] = -INFINITY;
	assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, w, RCKPT_DT_F32, 7, NULL, RCKPT_LK_LINEAR, &c),
			 -EDOM);
	assert_int_equal(bad, 6);
	/* gradient weights are an RMS: NaN, Inf and values below 0 are
	 * refused at their index (-0 is 0) */
	{
		float v[7] = { 1, 2, 3, 4, 5, 6, 7 }, gw[7] = { 1, -0.0f, 0, 1, 1, -1e-30f, 1 };
		assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, v, RCKPT_DT_F32, 7, gw, RCKPT_LK_LINEAR, &c),
				 -EDOM);
		assert_int_equal(bad, 5);
		gw[5] = 0;
		gw[3] = NAN;
		assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, v, RCKPT_DT_F32, 7, gw, RCKPT_LK_LINEAR, &c),
				 -EDOM);
		assert_int_equal(bad, 3);
		gw[3] = 1;
		assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, v, RCKPT_DT_F32, 7, gw, RCKPT_LK_LINEAR, &c),
				 0);
		free_seg(&s);
	}
	/* ... and in a norm or bias, kept as bf16 by default */
	assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, w, RCKPT_DT_F32, 7, NULL, RCKPT_LK_NORM_BIAS, &c),
			 -EDOM);
	assert_int_equal(bad, 6);
	/* ... unless the tensor's kind is lossless: stored as it is */
	c.lossless_kinds = 1u << RCKPT_LK_NORM_BIAS;
	assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, w, RCKPT_DT_F32, 7, NULL, RCKPT_LK_NORM_BIAS, &c),
			 0);
	assert_int_equal(s.encoding, RCKPT_SEG_LOSSLESS);
	assert_int_equal(rckpt_codec_decode_f32(r, &s), 0);
	assert_true(isinf(r[6]) && r[6] < 0);
	free_seg(&s);
	c.lossless_kinds = 0;
	/* a norm's values, every one protected: each its bf16 (round to
	 * nearest even), zeros and signs kept, nothing pruned */
	{
		const float v[6] = { 1.0f, 1.0f + 0x1p-8f + 0x1p-20f, -0.0f, 0.0f, -0x1p-100f, 1.0f + 0x1p-8f };
		const float want[6] = { 1.0f, 1.0f + 0x1p-7f, -0.0f, 0.0f, -0x1p-100f, 1.0f };
		assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, v, RCKPT_DT_F32, 6, NULL, RCKPT_LK_NORM_BIAS, &c),
				 0);
		assert_int_equal(s.encoding, RCKPT_SEG_QUANTIZED);
		assert_int_equal(s.nprot, 6);
		assert_int_equal(rckpt_codec_decode_f32(r, &s), 0);
		assert_memory_equal(r, want, sizeof(want));
		free_seg(&s);
	}
	/* fp16 and bf16 tensors (centroids within alpha of the values) */
	assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, h, RCKPT_DT_F16, 3, NULL, RCKPT_LK_LINEAR, &c), 0);
	assert_int_equal(s.dtype, RCKPT_DT_F16);
	assert_int_equal(rckpt_codec_decode_f32(r, &s), 0);
	assert_true(fabsf(r[0] - 1.0f) <= 0x1p-7f && fabsf(r[1] + 1.0f) <= 0x1p-7f && r[2] == 0.0f);
	free_seg(&s);
	assert_int_equal(rckpt_codec_encode_tensor(&s, &bad, hb, RCKPT_DT_BF16, 3, NULL, RCKPT_LK_LINEAR, &c), 0);
	assert_int_equal(rckpt_codec_decode_f32(r, &s), 0);
	assert_true(fabsf(r[0] - 1.0f) <= 0x1p-7f && fabsf(r[1] - 2.0f) <= 0x1p-6f &&
		    fabsf(r[2] + 2.0f) <= 0x1p-6f);
	free_seg(&s);
}

static void test_deterministic(void **state)
{
	enum { N = 50001 };
	float *w = malloc(sizeof(float) * N);
	rckpt_qconfig_t c;
	rckpt_seg_t a, b;
	size_t i;

	(void)state;
	for (i = 0; i < N; i++)
		w[i] = (float)(nrand() * 0.1);
	rckpt_qconfig_default(&c);
	encode_error(w, NULL, N, &c, &a);
	encode_error(w, NULL, N, &c, &b);
	assert_int_equal(a.nbins, b.nbins);
	assert_memory_equal(a.centroids, b.centroids, sizeof(float) * a.nbins);
	assert_memory_equal(a.idx, b.idx, N);
	assert_int_equal(a.nprot, b.nprot);
	free_seg(&a);
	free_seg(&b);
	free(w);
}

/* The real chain: every tensor of every checkpoint the fixture trained,
 * each step a delta record against the decoded previous one; decoding the
 * chain gives every step's levels bit for bit, and the model's error stays
 * small. */
static void test_real_chain(void **state)
{
	const char *d = getenv("RCKPT_TEST_CKPT_DIR");
	rckpt_istream_opts_t o = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
	rckpt_record_t prev_dec;
	rckpt_qconfig_t c;
	size_t raw_bytes = 0, enc_bytes = 0;
	char path[512], err[256];
	int step, have_prev = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/step-000025.safetensors", d ? d : "");
	if (d == NULL || access(path, R_OK) != 0) {
		TEST_SKIP(TEST_NEED_DATA, "no real checkpoints (RCKPT_TEST_CKPT_DIR)");
	}
	rckpt_qconfig_default(&c);
	memset(&prev_dec, 0, sizeof(prev_dec));
	for (step = 25; step <= 150; step += 25) {
		rckpt_st_t st, gr;
		rckpt_record_t rec, dec;
		rckpt_buf_t b = RCKPT_BUF_INIT;
		unsigned i;

		snprintf(path, sizeof(path), "%s/step-%06d.safetensors", d, step);
		assert_int_equal(rckpt_st_read(&st, path, err, sizeof(err)), 0);
		snprintf(path, sizeof(path), "%s/step-%06d.grads.safetensors", d, step);
		assert_int_equal(rckpt_st_read(&gr, path, err, sizeof(err)), 0);
		memset(&rec, 0, sizeof(rec));
		rec.kind = have_prev ? RCKPT_REC_DELTA : RCKPT_REC_BASE;
		rec.step = (uint64_t)step;
		rec.parent = have_prev ? prev_dec.step : RCKPT_NO_PARENT;
		rec.nseg = st.set.ntensors;
		rec.seg = calloc(st.set.ntensors, sizeof(rckpt_seg_t));
		for (i = 0; i < st.set.ntensors; i++) {
			const rckpt_ctensor_t *t = &st.set.t[i], *g = rckpt_tset_find(&gr.set, t->name);
			uint64_t bad;
			unsigned kind = rckpt_layer_kind(t->name, t->ndim, t->shape);
			float *r = malloc(sizeof(float) * (t->n + 1)), *w = malloc(sizeof(float) * (t->n + 1));
			assert_non_null(g);
			assert_int_equal(rckpt_codec_encode_tensor(&rec.seg[i], &bad, t->data, t->dtype, t->n,
								   (const float *)g->data, kind, &c),
					 0);
			rec.seg[i].tensor = i;
			rckpt_widen_to_f32(w, t->data, t->dtype, t->n);
			assert_int_equal(rckpt_codec_decode_f32(r, &rec.seg[i]), 0);
			if (kind == RCKPT_LK_NORM_BIAS) { /* each value's bf16 */
				uint64_t k;
				for (k = 0; k < t->n; k++)
					w[k] = rckpt_bf16_to_f32(rckpt_f32_to_bf16(w[k]));
				assert_memory_equal(r, w, t->n * 4);
			} else
				assert_true(rckpt_codec_rel_error(w, r, NULL, t->n) < 0.02);
			raw_bytes += t->n * 4;
			free(r);
			free(w);
		}
		assert_int_equal(rckpt_record_encode(&b, &rec, have_prev ? &prev_dec : NULL, &o), 0);
		enc_bytes += b.len;
		assert_int_equal(rckpt_record_decode(&dec, b.p, b.len, have_prev ? &prev_dec : NULL, NULL), 0);
		for (i = 0; i < rec.nseg; i++) {
			assert_int_equal(dec.seg[i].encoding, rec.seg[i].encoding);
			if (rec.seg[i].encoding == RCKPT_SEG_QUANTIZED)
				assert_memory_equal(dec.seg[i].idx, rec.seg[i].idx, rec.seg[i].n);
		}
		if (have_prev)
			rckpt_record_free(&prev_dec);
		prev_dec = dec;
		have_prev = 1;
		rckpt_record_free(&rec);
		rckpt_buf_free(&b);
		rckpt_st_free(&st);
		rckpt_st_free(&gr);
	}
	print_message("real chain: %zu fp32 bytes -> %zu encoded (%.1fx)\n", raw_bytes, enc_bytes,
		      (double)raw_bytes / (double)enc_bytes);
	assert_true(raw_bytes > 4 * enc_bytes);
	rckpt_record_free(&prev_dec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layer_kinds),
		cmocka_unit_test(test_half_conversions),
		cmocka_unit_test(test_error_falls_with_bins),
		cmocka_unit_test(test_fractions),
		cmocka_unit_test(test_keep_codebook),
		cmocka_unit_test(test_edge_cases),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_real_chain),
	};
	return test_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
