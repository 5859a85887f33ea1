/*
 * test_gpu_parity.c — every CUDA kernel against its CPU twin, exactly:
 * histogram counts, quantile bounds, bin indices, protected values, index
 * symbols, fixed-order sums (bit for bit), dequantized values (bit for bit
 * in fp32, fp16 and bf16), an optimizer's state's transforms and update
 * error weights, and the encoder's records: the same bytes from
 * the GPU path (tensors in device memory, or staged from host memory) as
 * from the CPU path, step after step; and each step restored straight into
 * device memory (rckpt_gpuenc_decode_to, what rckpt_restored_read_device
 * runs) the host twin's bytes.
 *
 * Sizes from 0 to 100M + 7 parameters (RCKPT_TEST_GPU_BIG=0 leaves the big
 * one out), fp32, fp16 and bf16, random data of several shapes and the real
 * checkpoints when RCKPT_TEST_CKPT_DIR names them, and the test transformer's
 * model with its AdamW state (RCKPT_TEST_LM_DIR). Exits 77 (skipped) on a
 * machine without a CUDA device. No cluster. RCKPT_TEST_FILTER=PATTERN runs
 * the cases whose names match it alone (cmocka's filter); RCKPT_TEST_GPU_SMALL=1
 * keeps test_kernels below 64 Ki elements.
 */
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

#include "rckpt_ckenc.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"
#include "rckpt_safetensors.h"
#include "rckpt_codec.h"
#include "rckpt_gpu.h"
#include "rckpt_gpuenc.h"
#include "rckpt_ckdec.h"
#include "rckpt_istream.h"
#include "rckpt_quant.h"
#include "rckpt_sketch.h"

#define TEST_RNG_SEED 0x2545f4914f6cdd1dull
#include "test_rng.h"

static void *stream;
static unsigned long long checks; /* comparisons made, for the summary line */

/* ---- device helpers ---- */

static void *to_dev(const void *h, size_t bytes)
{
	void *d = NULL;
	assert_int_equal(rckpt_gpu_malloc(&d, bytes ? bytes : 16), 0);
	if (bytes)
		assert_int_equal(rckpt_gpu_memcpy(d, h, bytes, 0, stream), 0);
	return d;
}

static void from_dev(void *h, const void *d, size_t bytes)
{
	if (bytes)
		assert_int_equal(rckpt_gpu_memcpy(h, d, bytes, 1, stream), 0);
	assert_int_equal(rckpt_gpu_stream_sync(stream), 0);
}

static void *dalloc(size_t bytes)
{
	void *d = NULL;
	assert_int_equal(rckpt_gpu_malloc(&d, bytes ? bytes : 16), 0);
	return d;
}

/* ---- data ---- */

enum dist { D_NORMAL, D_HEAVY, D_ZEROS, D_EQUAL, D_TINY, D_COUNT };
static const char *const dist_name[D_COUNT] = { "normal", "heavy-tailed", "with zeros", "all equal",
						"subnormals" };

/* n values of dtype (raw) and the same widened to fp32 (wide), and fp32
 * gradients. */
static void make_data(void **raw, float **wide, float **g, size_t n, unsigned dtype, unsigned dist)
{
	const size_t dsz = rckpt_dtype_size(dtype);
	size_t i;
	*raw = malloc(n * dsz + 16);
	*wide = malloc(4 * n + 16);
	*g = malloc(4 * n + 16);
	for (i = 0; i < n; i++) {
		float v;
		switch (dist) {
		case D_HEAVY:
			v = nrandf() * 0.01f / (float)(urand() + 0.02);
			break;
		case D_ZEROS:
			v = i % 3 ? nrandf() * 0.05f : 0.0f;
			break;
		case D_EQUAL:
			v = 0.125f;
			break;
		case D_TINY:
			v = i % 4 ? nrandf() * 1e-39f : nrandf() * 1e-3f;
			break;
		default:
			v = nrandf() * 0.02f;
		}
		(*wide)[i] = v;
		(*g)[i] = i % 7 == 0 ? 0.0f : fabsf(nrandf()) * 1e-3f; /* an RMS */
	}
	rckpt_narrow_from_f32(*raw, *wide, dtype, n);
	rckpt_widen_to_f32(*wide, *raw, dtype, n); /* the values the dtype holds */
}

/* ---- kernels against twins ---- */

static void check_sketch(const void *dw, const float *dg, const float *w, const float *g, size_t n,
			 unsigned dtype, rckpt_sketch_t *sv, rckpt_sketch_t *ss)
{
	const size_t hl = rckpt_gpu_sketch_hist_len(6);
	uint64_t *dh = dalloc(16 * hl), *dbad = dalloc(8), *h = malloc(16 * hl), bad;
	assert_int_equal(rckpt_sketch_init(sv, 6), 0);
	assert_int_equal(rckpt_sketch_init(ss, 6), 0);
	rckpt_sketch_add(sv, w, n);
	rckpt_sketch_add_abs_prod(ss, w, g, n);
	assert_int_equal(rckpt_gpu_sketch(dh, dh + hl, dbad, dw, dtype, dg, n, 6, NULL, 0, stream), 0);
	from_dev(h, dh, 16 * hl);
	from_dev(&bad, dbad, 8);
	assert_true(bad == UINT64_MAX);
	assert_memory_equal(h, sv->neg, 8 * 2 * sv->nkeys);
	assert_true(h[2 * sv->nkeys] == sv->zero);
	assert_memory_equal(h + hl + sv->nkeys, ss->pos, 8 * ss->nkeys);
	assert_true(h[hl + 2 * ss->nkeys] == ss->zero);
	checks += 2 * hl;
	/* without gradients: the same value histogram */
	assert_int_equal(rckpt_gpu_sketch(dh, NULL, dbad, dw, dtype, NULL, n, 6, NULL, 0, stream), 0);
	from_dev(h, dh, 8 * hl);
	assert_memory_equal(h, sv->neg, 8 * 2 * sv->nkeys);
	/* quantile bounds */
	{
		static const double qs[] = { 0, 0.001, 0.1, 0.2, 0.5, 0.9, 0.99, 0.995, 0.9995, 1 };
		const unsigned nq = sizeof(qs) / sizeof(qs[0]);
		float *db = dalloc(8 * nq), b[2 * 10];
		unsigned k, which;
		for (which = 0; which < 2; which++) {
			const rckpt_sketch_t *s = which ? ss : sv;
			assert_int_equal(rckpt_gpu_sketch(dh, dh + hl, dbad, dw, dtype, dg, n, 6, NULL, 0, stream), 0);
			assert_int_equal(rckpt_gpu_abs_bounds(db, dh + (which ? hl : 0), 6, n, qs, nq, NULL, 0, stream), 0);
			from_dev(b, db, 8 * nq);
			for (k = 0; k < nq; k++) {
				float lo, hi;
				rckpt_sketch_abs_quantile_bounds(s, qs[k], &lo, &hi);
				assert_memory_equal(&b[2 * k], &lo, 4);
				assert_memory_equal(&b[2 * k + 1], &hi, 4);
				checks += 2;
			}
		}
		rckpt_gpu_free(db);
	}
	rckpt_gpu_free(dh);
	rckpt_gpu_free(dbad);
	free(h);
}

/* The first non-finite value or gradient is found, whichever comes first. */
static void check_bad_index(void)
{
	const size_t n = 300000;
	float *w = malloc(4 * n), *g = malloc(4 * n);
	const size_t hl = rckpt_gpu_sketch_hist_len(6);
	uint64_t *dh = dalloc(16 * hl), *dbad = dalloc(8), bad;
	size_t i;
	float *dw, *dg;
	for (i = 0; i < n; i++)
		w[i] = nrandf(), g[i] = fabsf(nrandf());
	w[250001] = NAN;
	w[190000] = INFINITY;
	g[123457] = -INFINITY;
	dw = to_dev(w, 4 * n);
	dg = to_dev(g, 4 * n);
	assert_int_equal(rckpt_gpu_sketch(dh, dh + hl, dbad, dw, RCKPT_DT_F32, dg, n, 6, NULL, 0, stream), 0);
	from_dev(&bad, dbad, 8);
	assert_int_equal(bad, 123457);
	/* a gradient weight below 0 is bad too, -0 is not (the CPU's twin agrees) */
	g[5] = -0.0f;
	g[100003] = -1e-30f;
	rckpt_gpu_free(dg);
	dg = to_dev(g, 4 * n);
	assert_int_equal(rckpt_gpu_sketch(dh, dh + hl, dbad, dw, RCKPT_DT_F32, dg, n, 6, NULL, 0, stream), 0);
	from_dev(&bad, dbad, 8);
	assert_int_equal(bad, 100003);
	{
		rckpt_tensor_prep_t p;
		uint64_t cbad = 0;
		assert_int_equal(rckpt_codec_prepare(&p, &cbad, w, RCKPT_DT_F32, n, g, RCKPT_LK_LINEAR), -EDOM);
		assert_int_equal(cbad, 100003);
	}
	assert_int_equal(rckpt_gpu_sketch(dh, NULL, dbad, dw, RCKPT_DT_F32, NULL, n, 6, NULL, 0, stream), 0);
	from_dev(&bad, dbad, 8);
	assert_int_equal(bad, 190000);
	rckpt_gpu_free(dw), rckpt_gpu_free(dg), rckpt_gpu_free(dh), rckpt_gpu_free(dbad);
	free(w), free(g);
}

static int idx_has_above(const uint8_t *x, size_t n, unsigned lim)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (x[i] >= lim)
			return 1;
	return 0;
}

static void check_levels(const void *dw, const float *dg, const float *w, const float *g, size_t n,
			 unsigned dtype, const rckpt_qparams_t *q)
{
	const size_t tq = rckpt_gpu_quantize_temp_bytes(n), td = rckpt_gpu_dequantize_temp_bytes(n),
		     te = rckpt_gpu_qerr_temp_bytes(n), tt = rckpt_gpu_delta_temp_bytes(n);
	const size_t tmax = tq > td ? tq : td, tbytes = (tmax > te ? tmax : te) > tt ? (tmax > te ? tmax : te) : tt;
	uint8_t *idx = malloc(n + 1), *gidx = malloc(n + 1), *pidx = malloc(n + 1);
	uint16_t *prot = malloc(2 * n + 2), *gprot = malloc(2 * n + 2);
	float *r = malloc(4 * n + 4), *wp = malloc(4 * n + 4);
	void *out = malloc(4 * n + 4), *gout = malloc(4 * n + 4);
	uint8_t *didx = dalloc(n), *dpidx, *dsym = dalloc(n), *sym = malloc(n + 1), *gsym = malloc(n + 1);
	uint16_t *dprot = dalloc(2 * n);
	uint64_t *dn = dalloc(8), gnp;
	void *dtemp = dalloc(tbytes), *dout = dalloc(4 * n);
	double *dsum = dalloc(16), gs[2], cn, cd;
	int *dbad = dalloc(sizeof(int)), bad;
	rckpt_gpu_qparams_t gq;
	rckpt_qerr_t qe;
	size_t np, i, pnp;
	unsigned od, rearr;

	rckpt_gpu_qparams_make(&gq, q);
	/* bin assignment */
	rckpt_quantize(idx, prot, &np, w, g, n, q);
	assert_int_equal(rckpt_gpu_quantize(didx, dprot, dn, dw, dtype, dg, n, &gq, dtemp, tq, stream), 0);
	from_dev(&gnp, dn, 8);
	assert_int_equal(gnp, np);
	from_dev(gidx, didx, n);
	from_dev(gprot, dprot, 2 * np);
	assert_memory_equal(gidx, idx, n);
	assert_memory_equal(gprot, prot, 2 * np);
	checks += n + np;
	/* dequantize, into each dtype */
	assert_int_equal(rckpt_dequantize(r, idx, n, q, prot, np), 0);
	for (od = RCKPT_DT_F32; od <= RCKPT_DT_BF16; od++) {
		const size_t osz = rckpt_dtype_size(od);
		rckpt_narrow_from_f32(out, r, od, n);
		assert_int_equal(rckpt_gpu_dequantize(dout, od, dbad, didx, n, &gq, dprot, np, dtemp, td, stream), 0);
		from_dev(gout, dout, osz * n);
		from_dev(&bad, dbad, sizeof(bad));
		assert_int_equal(bad, 0);
		assert_memory_equal(gout, out, osz * n);
		checks += n;
	}
	/* a wrong protected count, and a level out of range, are caught */
	assert_int_equal(rckpt_gpu_dequantize(dout, RCKPT_DT_F32, dbad, didx, n, &gq, dprot, np + 1, dtemp, td, stream), 0);
	from_dev(&bad, dbad, sizeof(bad));
	assert_int_equal(bad, 1);
	if (n) {
		uint8_t over = (uint8_t)(q->nbins + 2);
		assert_int_equal(rckpt_gpu_memcpy(didx + n / 2, &over, 1, 0, stream), 0);
		assert_int_equal(rckpt_gpu_dequantize(dout, RCKPT_DT_F32, dbad, didx, n, &gq, dprot, np, dtemp, td, stream), 0);
		from_dev(&bad, dbad, sizeof(bad));
		assert_int_equal(bad, 1);
		assert_int_equal(rckpt_gpu_memcpy(didx + n / 2, idx + n / 2, 1, 0, stream), 0);
	}
	/* quality sums, bit for bit */
	rckpt_qerr_init(&qe);
	assert_int_equal(rckpt_qerr_add(&qe, idx, w, g, n, q), 0);
	rckpt_qerr_end(&qe, &cn, &cd);
	assert_int_equal(rckpt_gpu_qerr(dsum, dw, dtype, dg, n, &gq, dtemp, te, stream), 0);
	from_dev(gs, dsum, 16);
	assert_memory_equal(&gs[0], &cn, 8);
	assert_memory_equal(&gs[1], &cd, 8);
	checks += 2;
	/* change distance against the reconstruction */
	{
		static const uint64_t blocks[] = { 1000, 65536 };
		unsigned bi;
		for (bi = 0; bi < 2 && n; bi++) {
			const uint64_t nb = (n + blocks[bi] - 1) / blocks[bi];
			double *cpu = malloc(8 * nb), *gpu = malloc(8 * nb), *dd = dalloc(8 * nb);
			float *dr = to_dev(r, 4 * n);
			rckpt_block_dist(cpu, w, r, n, blocks[bi]);
			assert_int_equal(rckpt_gpu_block_dist(dd, dw, dtype, dr, n, blocks[bi], stream), 0);
			from_dev(gpu, dd, 8 * nb);
			assert_memory_equal(gpu, cpu, 8 * nb);
			checks += nb;
			rckpt_gpu_free(dd), rckpt_gpu_free(dr);
			free(cpu), free(gpu);
		}
	}
	/* index symbols against a previous step: the values moved a little */
	for (i = 0; i < n; i++)
		wp[i] = w[i] * (1.0f + (i % 3 == 0 ? nrandf() * 0.05f : 0.0f));
	rckpt_quantize(pidx, prot, &pnp, wp, g, n, q);
	dpidx = to_dev(pidx, n);
	for (rearr = 0; rearr < 2; rearr++) {
		const unsigned L = q->nbins + 2;
		assert_int_equal(rckpt_istream_symbols(sym, idx, n, L, pidx, L, (int)rearr), 0);
		assert_int_equal(rckpt_gpu_delta(dsym, dbad, didx, L, dpidx, L, n, (int)rearr, dtemp, tt, stream), 0);
		from_dev(gsym, dsym, n);
		from_dev(&bad, dbad, sizeof(bad));
		assert_int_equal(bad, 0);
		assert_memory_equal(gsym, sym, n);
		checks += n;
	}
	/* a base stream is the levels; a level past the count is caught */
	assert_int_equal(rckpt_gpu_delta(dsym, dbad, didx, q->nbins + 2, NULL, 0, n, 0, dtemp, tt, stream), 0);
	from_dev(gsym, dsym, n);
	assert_memory_equal(gsym, idx, n);
	if (n) {
		assert_int_equal(rckpt_gpu_delta(dsym, dbad, didx, q->nbins + 2, dpidx, 1, n, 1, dtemp, tt, stream), 0);
		from_dev(&bad, dbad, sizeof(bad));
		assert_int_equal(bad, idx_has_above(pidx, n, 1));
	}
	rckpt_gpu_free(didx), rckpt_gpu_free(dpidx), rckpt_gpu_free(dsym), rckpt_gpu_free(dprot);
	rckpt_gpu_free(dn), rckpt_gpu_free(dtemp), rckpt_gpu_free(dout), rckpt_gpu_free(dsum), rckpt_gpu_free(dbad);
	free(idx), free(gidx), free(pidx), free(prot), free(gprot), free(r), free(wp), free(out), free(gout);
	free(sym), free(gsym);
}

/* Every kernel on one data set: the sketch, then quantization parameters
 * as the codec makes them under a few configurations. */
static void check_case(size_t n, unsigned dtype, unsigned dist)
{
	void *raw;
	float *w, *g;
	void *dw;
	float *dg;
	rckpt_sketch_t sv, ss;
	rckpt_tensor_prep_t p;
	uint64_t bad;
	unsigned ci;
	static const struct {
		unsigned bins, metric;
		float prune, protect;
	} cfg[] = { { 4, RCKPT_PRUNE_MAGNITUDE, 0.5f, 0.01f },
		    { 16, RCKPT_PRUNE_SENSITIVITY, 0.1f, 0.005f },
		    { 64, RCKPT_PRUNE_MAGNITUDE, 0.0f, 0.0f } };

	make_data(&raw, &w, &g, n, dtype, dist);
	dw = to_dev(raw, n * rckpt_dtype_size(dtype));
	dg = to_dev(g, 4 * n);
	check_sketch(dw, dg, w, g, n, dtype, &sv, &ss);
	rckpt_sketch_free(&sv);
	rckpt_sketch_free(&ss);
	assert_int_equal(rckpt_codec_prepare(&p, &bad, w, RCKPT_DT_F32, n, g, RCKPT_LK_LINEAR), 0);
	for (ci = 0; ci < sizeof(cfg) / sizeof(cfg[0]); ci++) {
		rckpt_qconfig_t c;
		rckpt_qparams_t q;
		unsigned withg;
		rckpt_qconfig_default(&c);
		c.bins = cfg[ci].bins;
		c.prune_metric = cfg[ci].metric;
		c.prune_frac[RCKPT_LK_LINEAR] = cfg[ci].prune;
		c.protect_frac = cfg[ci].protect;
		assert_int_equal(rckpt_codec_qparams(&q, &p, &c, RCKPT_QUANTIZER_KMEANS, NULL, NULL), 0);
		for (withg = 0; withg < 2; withg++)
			check_levels(dw, withg ? dg : NULL, w, withg ? g : NULL, n, dtype, &q);
	}
	rckpt_codec_prep_free(&p);
	rckpt_gpu_free(dw);
	rckpt_gpu_free(dg);
	free(raw), free(w), free(g);
}

static void test_kernels(void **state)
{
	static const size_t sizes[] = { 0, 1, 3, 4095, 4096, 4097, 2048 * 3 + 1, (1u << 20) + 13 };
	/* RCKPT_TEST_GPU_SMALL=1: the sizes below 64 Ki alone (under
	 * compute-sanitizer, gpu/device-check.sh) */
	const size_t most = getenv("RCKPT_TEST_GPU_SMALL") ? 65536 : SIZE_MAX;
	unsigned si, dt, d;
	(void)state;
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]) && sizes[si] <= most; si++)
		for (dt = RCKPT_DT_F32; dt <= RCKPT_DT_BF16; dt++)
			for (d = 0; d < D_COUNT; d++) {
				if (sizes[si] < 4096 && d != D_NORMAL)
					continue;
				check_case(sizes[si], dt, d);
			}
	print_message("kernels: %zu sizes x 3 dtypes x %d distributions, %llu values compared\n",
		      sizeof(sizes) / sizeof(sizes[0]), D_COUNT, checks);
	(void)dist_name;
}

/* ---- an optimizer's state: transforms and the update error's weights ---- */

/* A second moment: decades of positives, zeros, subnormals, and what LOG2
 * refuses (negatives, -0, NaN, Inf). */
static float moment2(size_t i)
{
	switch (i % 89) {
	case 1:
		return 0.0f;
	case 2:
		return -0.0f;
	case 3:
		return -2e-7f;
	case 4:
		return NAN;
	case 5:
		return INFINITY;
	case 6:
		return 3e-41f;
	case 7:
		return FLT_MAX;
	default:
		return (float)exp(nrandf() * 6.0 - 14.0);
	}
}

static void check_optim_case(size_t n, unsigned dt)
{
	const size_t dsz = rckpt_dtype_size(dt);
	float *v = malloc(4 * n + 4), *m = malloc(4 * n + 4), *want = malloc(4 * n + 4);
	float *got = malloc(4 * n + 4), *x = malloc(4 * n + 4), *wm = malloc(4 * n + 4);
	float *gwm = malloc(4 * n + 4);
	void *rv = malloc(dsz * n + 4), *rm = malloc(dsz * n + 4);
	void *dv, *dm, *dx, *dout, *dwm, *dtemp;
	const size_t tb = rckpt_gpu_update_weights_temp_bytes(n);
	double den, gden, *dden;
	size_t i;
	unsigned xf, mode;

	for (i = 0; i < n; i++) {
		v[i] = moment2(i);
		m[i] = i % 131 == 17 ? INFINITY : nrandf() * 1e-3f;
		x[i] = i % 53 == 0 ? NAN : (float)((urand() - 0.5) * 400.0); /* LOG2's domain and past it */
	}
	if (n > 2)
		x[1] = -1e30f, x[2] = 1e30f;
	rckpt_narrow_from_f32(rv, v, dt, n);
	rckpt_narrow_from_f32(rm, m, dt, n);
	rckpt_widen_to_f32(v, rv, dt, n);
	rckpt_widen_to_f32(m, rm, dt, n);
	dv = to_dev(rv, dsz * n);
	dm = to_dev(rm, dsz * n);
	dx = to_dev(x, 4 * n);
	dout = dalloc(4 * n);
	dwm = dalloc(4 * n);
	dtemp = dalloc(tb);
	dden = dalloc(8);

	/* forward, both transforms, from each dtype */
	for (xf = RCKPT_XF_NONE; xf <= RCKPT_XF_LOG2; xf++) {
		memcpy(want, v, 4 * n);
		rckpt_xf_forward(want, n, xf);
		assert_int_equal(rckpt_gpu_xf_values(dout, dv, dt, n, xf, stream), 0);
		from_dev(got, dout, 4 * n);
		assert_memory_equal(got, want, 4 * n);
		checks += n;
	}
	/* the inverse, over its whole domain */
	memcpy(want, x, 4 * n);
	rckpt_xf_inverse(want, n, RCKPT_XF_LOG2);
	assert_int_equal(rckpt_gpu_xf_inverse(dx, n, RCKPT_XF_LOG2, stream), 0);
	from_dev(got, dx, 4 * n);
	assert_memory_equal(got, want, 4 * n);
	checks += n;
	/* NORM's division by a restored second moment (finite, >= 0) */
	for (i = 0; i < n; i++)
		x[i] = isfinite(v[i]) && v[i] > 0 ? v[i] : 0.0f;
	assert_int_equal(rckpt_gpu_memcpy(dx, x, 4 * n, 0, stream), 0);
	rckpt_norm_divide(want, m, x, 1e-8f, n);
	assert_int_equal(rckpt_gpu_norm_divide(dout, dm, dt, dx, 1e-8f, n, stream), 0);
	from_dev(got, dout, 4 * n);
	assert_memory_equal(got, want, 4 * n);
	checks += n;
	/* the update error's weights: no first moment; one; one and its own
	 * weights (plain moments); linear second moments */
	for (mode = 0; mode < 4; mode++) {
		const int withm = mode > 0, withwm = mode == 2, lin = mode == 3;
		rckpt_update_weights(want, withwm ? wm : NULL, &den, v, withm ? m : NULL, n, 1e-8, lin);
		assert_int_equal(rckpt_gpu_update_weights(dout, withwm ? dwm : NULL, dden, dv, dt, withm ? dm : NULL,
							  dt, n, 1e-8, lin, dtemp, tb, stream),
				 0);
		from_dev(got, dout, 4 * n);
		from_dev(&gden, dden, 8);
		assert_memory_equal(got, want, 4 * n);
		assert_memory_equal(&gden, &den, 8); /* the fixed order: bit for bit */
		if (withwm) {
			from_dev(gwm, dwm, 4 * n);
			assert_memory_equal(gwm, wm, 4 * n);
		}
		checks += n + 1;
	}
	/* refusals change nothing */
	assert_int_equal(rckpt_gpu_xf_values(dout, dv, 99, n, RCKPT_XF_LOG2, stream), -EINVAL);
	assert_int_equal(rckpt_gpu_xf_values(dout, dv, dt, n, RCKPT_XF_NORM, stream), -EINVAL);
	assert_int_equal(rckpt_gpu_update_weights(dout, dwm, dden, dv, dt, NULL, dt, n, 1e-8, 0, dtemp, tb, stream),
			 -EINVAL); /* wm without m */
	if (n)
		assert_int_equal(rckpt_gpu_update_weights(dout, NULL, dden, dv, dt, NULL, dt, n, 1e-8, 0, dtemp,
							  tb - 8, stream),
				 -ENOSPC);
	rckpt_gpu_free(dv), rckpt_gpu_free(dm), rckpt_gpu_free(dx), rckpt_gpu_free(dout);
	rckpt_gpu_free(dwm), rckpt_gpu_free(dtemp), rckpt_gpu_free(dden);
	free(v), free(m), free(want), free(got), free(x), free(wm), free(gwm), free(rv), free(rm);
}

static void test_optim_kernels(void **state)
{
	static const size_t sizes[] = { 0, 1, 2047, 2048, 2049, 2048 * 257 + 3, (1u << 22) + 5 };
	unsigned si, dt;
	(void)state;
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (dt = RCKPT_DT_F32; dt <= RCKPT_DT_BF16; dt++)
			check_optim_case(sizes[si], dt);
	print_message("optimizer kernels: %zu sizes x 3 dtypes, %llu values compared so far\n",
		      sizeof(sizes) / sizeof(sizes[0]), checks);
}

static void test_bad_index(void **state)
{
	(void)state;
	check_bad_index();
}

static void test_big(void **state)
{
	const char *e = getenv("RCKPT_TEST_GPU_BIG");
	unsigned dt;
	(void)state;
	if (e && strcmp(e, "0") == 0) {
		TEST_SKIP(TEST_NEED_NONE, "RCKPT_TEST_GPU_BIG=0");
	}
	for (dt = RCKPT_DT_F32; dt <= RCKPT_DT_BF16; dt++) {
		unsigned long long before = checks;
		check_case(100000007u, dt, D_NORMAL);
		print_message("100M + 7 parameters, dtype %u: %llu values equal\n", dt, checks - before);
	}
}

/* ---- the encoder: GPU path against CPU path, record for record ---- */

typedef struct model {
	rckpt_tset_t p, g;
	rckpt_ctensor_t t[5], gt[5];
	void *buf[5];
	float *gbuf[5];
} model_t;

/* A small synthetic model of every layer kind, moving a little each step. */
static void model_make(model_t *m, unsigned dtype)
{
	static const char *const names[5] = { "a.embed.weight", "b.conv.weight", "c.fc.bias", "d.fc.weight",
					      "e.head.weight" };
	static const unsigned ndim[5] = { 2, 4, 1, 2, 2 };
	static const uint64_t shape[5][4] = { { 1000, 64 }, { 32, 16, 3, 3 }, { 300 }, { 300, 512 }, { 10, 300 } };
	unsigned i, d;
	memset(m, 0, sizeof(*m));
	for (i = 0; i < 5; i++) {
		rckpt_ctensor_t *t = &m->t[i];
		size_t k;
		t->name = names[i];
		t->dtype = dtype;
		t->ndim = ndim[i];
		t->n = 1;
		for (d = 0; d < ndim[i]; d++)
			t->shape[d] = shape[i][d], t->n *= shape[i][d];
		m->buf[i] = malloc((size_t)t->n * 4);
		m->gbuf[i] = malloc((size_t)t->n * 4);
		{
			float *f = malloc((size_t)t->n * 4);
			for (k = 0; k < t->n; k++) {
				f[k] = nrandf() * 0.05f;
				m->gbuf[i][k] = fabsf(nrandf()) * 1e-3f; /* an RMS */
			}
			rckpt_narrow_from_f32(m->buf[i], f, dtype, t->n);
			free(f);
		}
		t->data = m->buf[i];
		m->gt[i] = *t;
		m->gt[i].dtype = RCKPT_DT_F32;
		m->gt[i].data = (const uint8_t *)m->gbuf[i];
	}
	m->p.t = m->t;
	m->p.ntensors = 5;
	m->g.t = m->gt;
	m->g.ntensors = 5;
}

static void model_step(model_t *m)
{
	unsigned i;
	for (i = 0; i < 5; i++) {
		rckpt_ctensor_t *t = &m->t[i];
		float *f = malloc((size_t)t->n * 4);
		size_t k;
		rckpt_widen_to_f32(f, m->buf[i], t->dtype, t->n);
		for (k = 0; k < t->n; k++)
			if (k % 5 == 0)
				f[k] += nrandf() * 0.002f;
		rckpt_narrow_from_f32(m->buf[i], f, t->dtype, t->n);
		free(f);
	}
}

static void model_free(model_t *m)
{
	unsigned i;
	for (i = 0; i < 5; i++)
		free(m->buf[i]), free(m->gbuf[i]);
}

/* A copy of st whose tensors live in device memory. */
static void st_to_dev(rckpt_tset_t *out, rckpt_ctensor_t *tt, const rckpt_tset_t *st)
{
	unsigned i;
	*out = *st;
	out->t = tt;
	for (i = 0; i < st->ntensors; i++) {
		tt[i] = st->t[i];
		tt[i].data = to_dev(st->t[i].data, (size_t)st->t[i].n * rckpt_dtype_size(st->t[i].dtype));
	}
}

static void st_dev_free(rckpt_tset_t *st)
{
	unsigned i;
	for (i = 0; i < st->ntensors; i++)
		rckpt_gpu_free((void *)st->t[i].data);
}

static void same_out(const rckpt_ckenc_out_t *a, const rckpt_ckenc_out_t *b)
{
	uint32_t c;
	assert_int_equal(a->manifest.len, b->manifest.len);
	assert_memory_equal(a->manifest.p, b->manifest.p, a->manifest.len);
	assert_int_equal(a->nchunks, b->nchunks);
	for (c = 0; c < a->nchunks; c++) {
		assert_int_equal(a->records[c].len, b->records[c].len);
		assert_memory_equal(a->records[c].p, b->records[c].p, a->records[c].len);
		checks += a->records[c].len;
	}
}

/* Every tensor of d's step restored into device memory
 * (rckpt_gpuenc_decode_to: levels up, dequantized there) is the bytes of
 * the host twin (rckpt_ckdec_tensor_to's host sink, which test_optim holds
 * to rckpt_ckdec_tensor_f32 narrowed). */
static void decode_device(rckpt_gpuenc_t *g, const rckpt_ckdec_t *d)
{
	uint32_t t, k;
	for (t = 0; t < d->mf.ntensors; t++) {
		const rckpt_mf_tensor_t *mt = &d->mf.t[t];
		const size_t dsz = rckpt_dtype_size(mt->dtype);
		rckpt_ckdec_sink_t sink;
		uint64_t n = 1;
		uint8_t *want, *got;
		void *dd;
		for (k = 0; k < mt->ndim; k++)
			n *= mt->shape[k];
		want = malloc(dsz * n + 1);
		got = malloc(dsz * n + 1);
		assert_true(want && got);
		rckpt_ckdec_host_sink(&sink, want);
		assert_int_equal(rckpt_ckdec_tensor_to(d, t, &sink), 0);
		dd = dalloc(dsz * n);
		assert_int_equal(rckpt_gpu_memset(dd, 0xa5, dsz * n, stream), 0);
		assert_int_equal(rckpt_gpu_stream_sync(stream), 0);
		assert_int_equal(rckpt_gpuenc_decode_to(g, dd, d, t), 0);
		from_dev(got, dd, dsz * n);
		assert_memory_equal(want, got, dsz * n);
		checks += n;
		rckpt_gpu_free(dd);
		free(want);
		free(got);
	}
	if (d->mf.ntensors) { /* host memory is refused */
		uint8_t host[16];
		assert_int_equal(rckpt_gpuenc_decode_to(g, host, d, 0), -EFAULT);
	}
}

/* Three encoders over the same steps: CPU, GPU with host tensors, GPU with
 * device tensors. Every step's manifest and records are the same bytes;
 * each step restored into device memory is the host's bytes. */
static void encode_three(const rckpt_tset_t *const *params, const rckpt_tset_t *const *grads, unsigned nsteps,
			 uint64_t chunk_params)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e[3];
	rckpt_gpuenc_t *g;
	unsigned s, k;

	rckpt_ckdec_t dec;

	memset(&dec, 0, sizeof(dec));
	rckpt_ckenc_opts_default(&o);
	o.chunk_params = chunk_params;
	assert_int_equal(rckpt_gpuenc_create(&g), 0);
	for (k = 0; k < 3; k++) {
		assert_int_equal(rckpt_ckenc_create(&e[k], &o), 0);
		rckpt_ckenc_set_gpu(e[k], k ? g : NULL);
	}
	for (s = 0; s < nsteps; s++) {
		rckpt_ckenc_out_t out[3];
		rckpt_ckenc_stats_t st[3];
		rckpt_ctensor_t dt[128], dgt[128];
		rckpt_tset_t dp, dg;
		char msg[256];
		assert_true(params[s]->ntensors <= 128 && (!grads[s] || grads[s]->ntensors <= 128));
		st_to_dev(&dp, dt, params[s]);
		if (grads[s])
			st_to_dev(&dg, dgt, grads[s]);
		for (k = 0; k < 3; k++) {
			memset(&out[k], 0, sizeof(out[k]));
			assert_int_equal(rckpt_ckenc_step(e[k], &out[k], &st[k], k == 2 ? &dp : params[s],
							  grads[s] ? (k == 2 ? &dg : grads[s]) : NULL, 100 + s, msg,
							  sizeof(msg)),
					 0);
		}
		same_out(&out[0], &out[1]);
		same_out(&out[0], &out[2]);
		{
			const uint8_t *recs[4096];
			size_t lens[4096];
			uint32_t c;
			assert_true(out[0].nchunks <= 4096);
			for (c = 0; c < out[0].nchunks; c++) {
				recs[c] = out[0].records[c].p;
				lens[c] = out[0].records[c].len;
			}
			assert_int_equal(rckpt_ckdec_step(&dec, out[0].manifest.p, out[0].manifest.len, recs, lens), 0);
			decode_device(g, &dec);
		}
		assert_memory_equal(&st[0].quality, &st[1].quality, sizeof(double));
		assert_memory_equal(&st[0].quality, &st[2].quality, sizeof(double));
		for (k = 0; k < 3; k++)
			rckpt_ckenc_out_free(&out[k]);
		st_dev_free(&dp);
		if (grads[s])
			st_dev_free(&dg);
	}
	for (k = 0; k < 3; k++)
		rckpt_ckenc_destroy(e[k]);
	rckpt_ckdec_free(&dec);
	rckpt_gpuenc_destroy(g);
}

/* Gradients with a weight below 0 (a signed mean handed as the RMS) are
 * refused alike by the CPU, the GPU on staged host tensors and the GPU on
 * device tensors: the same error and the same one-line message, naming
 * the gradient's element. */
static void refuse_three(const rckpt_tset_t *params, const rckpt_tset_t *grads)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e[3];
	rckpt_gpuenc_t *gq;
	rckpt_ctensor_t gt[128], dt[128], dgt[128];
	rckpt_tset_t gs, dp, dg;
	float *neg;
	char msg[3][256];
	unsigned k, i = 0;

	for (k = 1; k < grads->ntensors; k++) /* the largest */
		i = grads->t[k].n > grads->t[i].n ? k : i;
	assert_true(grads->ntensors <= 128 && grads->t[i].n > 4001);
	memcpy(gt, grads->t, grads->ntensors * sizeof(gt[0]));
	gs = *grads;
	gs.t = gt;
	neg = malloc((size_t)gt[i].n * 4);
	memcpy(neg, gt[i].data, (size_t)gt[i].n * 4);
	neg[4001] = -1e-6f;
	gt[i].data = (const uint8_t *)neg;
	st_to_dev(&dp, dt, params);
	st_to_dev(&dg, dgt, &gs);
	rckpt_ckenc_opts_default(&o);
	assert_int_equal(rckpt_gpuenc_create(&gq), 0);
	for (k = 0; k < 3; k++) {
		rckpt_ckenc_out_t out;
		rckpt_ckenc_stats_t st;
		assert_int_equal(rckpt_ckenc_create(&e[k], &o), 0);
		rckpt_ckenc_set_gpu(e[k], k ? gq : NULL);
		memset(&out, 0, sizeof(out));
		msg[k][0] = 0;
		assert_int_equal(rckpt_ckenc_step(e[k], &out, &st, k == 2 ? &dp : params, k == 2 ? &dg : &gs, 7,
						  msg[k], sizeof(msg[k])),
				 -EDOM);
		rckpt_ckenc_destroy(e[k]);
	}
	print_message("refused alike: %s\n", msg[0]);
	assert_non_null(strstr(msg[0], "element 4001 is -1e-06"));
	assert_string_equal(msg[0], msg[1]);
	assert_string_equal(msg[0], msg[2]);
	st_dev_free(&dp);
	st_dev_free(&dg);
	rckpt_gpuenc_destroy(gq);
	free(neg);
}

static void test_encoder_synthetic(void **state)
{
	unsigned dt;
	(void)state;
	for (dt = RCKPT_DT_F32; dt <= RCKPT_DT_BF16; dt++) {
		model_t m[4];
		const rckpt_tset_t *p[4], *g[4];
		unsigned s;
		model_make(&m[0], dt);
		for (s = 1; s < 4; s++) { /* each step a copy of the last, moved */
			unsigned i;
			m[s] = m[s - 1];
			for (i = 0; i < 5; i++) {
				size_t b = (size_t)m[s].t[i].n * rckpt_dtype_size(dt);
				m[s].buf[i] = malloc(b);
				memcpy(m[s].buf[i], m[s - 1].buf[i], b);
				m[s].gbuf[i] = malloc((size_t)m[s].t[i].n * 4);
				memcpy(m[s].gbuf[i], m[s - 1].gbuf[i], (size_t)m[s].t[i].n * 4);
				m[s].t[i].data = m[s].buf[i];
				m[s].gt[i].data = (const uint8_t *)m[s].gbuf[i];
			}
			m[s].p.t = m[s].t;
			m[s].g.t = m[s].gt;
			model_step(&m[s]);
		}
		for (s = 0; s < 4; s++)
			p[s] = &m[s].p, g[s] = s == 2 ? NULL : &m[s].g; /* a step without gradients too */
		encode_three(p, g, 4, 50000);
		refuse_three(p[3], g[3]);
		for (s = 0; s < 4; s++)
			model_free(&m[s]);
	}
}

/* A step's records, one after the other, and their count. */
typedef struct collect {
	rckpt_buf_t all;
	uint32_t n;
} collect_t;

static int col_begin(void *arg, uint32_t nchunks)
{
	(void)arg;
	(void)nchunks;
	return 0;
}

static int col_record(void *arg, uint32_t chunk, rckpt_buf_t *rec, rckpt_buf_t *head)
{
	collect_t *x = arg;
	(void)head;
	(void)chunk;
	x->n++;
	return rckpt_buf_append(&x->all, rec->p, rec->len) ? -ENOMEM : 0;
}

/* Prioritized partial steps (SCAR) after a full one, three ways as
 * encode_three: the change distances on the device (rckpt_gpu_block_dist
 * through the CUDA backend; the gradients in device memory too for the
 * third) choose the CPU's blocks, so every manifest and record is the CPU
 * path's bytes. */
static void test_encoder_partial(void **state)
{
	unsigned dt, one;
	(void)state;
	/* one: a single quantized tensor, the one the GPU encoder staged last
	 * in the step before (its per-step caches must not outlive the step) */
	for (one = 0; one < 2; one++)
	for (dt = RCKPT_DT_F32; dt <= RCKPT_DT_BF16; dt++) {
		rckpt_ckenc_opts_t o;
		rckpt_ckenc_t *e[3];
		rckpt_gpuenc_t *g;
		model_t m;
		unsigned s, k, partials = 0;
		rckpt_ckenc_opts_default(&o);
		o.chunk_params = 50000;
		o.partial_block = 4096;
		assert_int_equal(rckpt_gpuenc_create(&g), 0);
		for (k = 0; k < 3; k++) {
			assert_int_equal(rckpt_ckenc_create(&e[k], &o), 0);
			rckpt_ckenc_set_gpu(e[k], k ? g : NULL);
		}
		model_make(&m, dt);
		for (s = 0; s < 5; s++) {
			const rckpt_ckenc_partial_t pp = { 0.25, RCKPT_CKENC_PRIORITY, 0 };
			collect_t col[3];
			rckpt_buf_t man[3];
			rckpt_ckenc_stats_t st[3];
			rckpt_ctensor_t dtt[128], dgt[128];
			rckpt_tset_t dp, dg;
			char msg[256];
			int rc[3];
			rckpt_tset_t mp = m.p, mg = m.g;
			if (one) { /* d.fc.weight alone */
				mp.t = &m.t[3], mp.ntensors = 1;
				mg.t = &m.gt[3], mg.ntensors = 1;
			}
			if (s)
				model_step(&m);
			st_to_dev(&dp, dtt, &mp);
			st_to_dev(&dg, dgt, &mg);
			for (k = 0; k < 3; k++) {
				const rckpt_ckenc_sink_t sink = { col_begin, col_record, &col[k] };
				memset(&col[k], 0, sizeof(col[k]));
				memset(&man[k], 0, sizeof(man[k]));
				if (s == 0)
					rc[k] = rckpt_ckenc_step_stream(e[k], &sink, &man[k], &st[k], k == 2 ? &dp : &mp,
									k == 2 ? &dg : &mg, 200 + s, msg, sizeof(msg));
				else
					rc[k] = rckpt_ckenc_step_partial(e[k], &sink, &man[k], &st[k], k == 2 ? &dp : &mp,
									 k == 2 ? &dg : &mg, 200 + s, &pp, msg, sizeof(msg));
			}
			/* all three agree, also on a step over eps with the old codebooks */
			assert_int_equal(rc[0], rc[1]);
			assert_int_equal(rc[0], rc[2]);
			if (rc[0] == 0) {
				partials += s > 0;
				for (k = 1; k < 3; k++) {
					assert_int_equal(man[0].len, man[k].len);
					assert_memory_equal(man[0].p, man[k].p, man[0].len);
					assert_int_equal(col[0].all.len, col[k].all.len);
					assert_memory_equal(col[0].all.p, col[k].all.p, col[0].all.len);
					assert_int_equal(st[0].blocks_saved, st[k].blocks_saved);
				}
				checks += col[0].all.len;
			} else {
				assert_int_equal(rc[0], -ERANGE);
			}
			for (k = 0; k < 3; k++) {
				rckpt_buf_free(&col[k].all);
				rckpt_buf_free(&man[k]);
			}
			st_dev_free(&dp);
			st_dev_free(&dg);
		}
		print_message("%s, dtype %u: %u partial steps, the CPU's bytes\n", one ? "one tensor" : "model", dt,
			      partials);
		assert_true(partials > 0);
		model_free(&m);
		for (k = 0; k < 3; k++)
			rckpt_ckenc_destroy(e[k]);
		rckpt_gpuenc_destroy(g);
	}
}

static void test_encoder_real(void **state)
{
	const char *d = getenv("RCKPT_TEST_CKPT_DIR");
	rckpt_st_t st[6], gr[6];
	const rckpt_tset_t *p[6], *g[6];
	char path[512], err[256];
	unsigned s;
	(void)state;
	snprintf(path, sizeof(path), "%s/step-000025.safetensors", d ? d : "");
	if (d == NULL || access(path, R_OK) != 0) {
		TEST_SKIP(TEST_NEED_DATA, "no real checkpoints (RCKPT_TEST_CKPT_DIR)");
	}
	for (s = 0; s < 6; s++) {
		snprintf(path, sizeof(path), "%s/step-%06u.safetensors", d, 25 * (s + 1));
		assert_int_equal(rckpt_st_read(&st[s], path, err, sizeof(err)), 0);
		snprintf(path, sizeof(path), "%s/step-%06u.grads.safetensors", d, 25 * (s + 1));
		assert_int_equal(rckpt_st_read(&gr[s], path, err, sizeof(err)), 0);
		p[s] = &st[s].set;
		g[s] = &gr[s].set;
	}
	encode_three(p, g, 6, (uint64_t)1 << 22);
	for (s = 0; s < 6; s++) {
		rckpt_st_free(&st[s]);
		rckpt_st_free(&gr[s]);
	}
}

/* AdamW's state beside the model (the test transformer's X.optim.safetensors:
 * second moments in LOG2, first moments NORM): the GPU encoder transforms
 * them on the device (rckpt_gpuenc_xvalues) and computes the update
 * error's weights there; every step must still be the CPU's bytes. */
static void test_encoder_optim(void **state)
{
	const char *d = getenv("RCKPT_TEST_LM_DIR");
	rckpt_st_t st[4], os[4], gr[4];
	rckpt_tset_t set[4];
	const rckpt_tset_t *p[4], *g[4];
	char path[512], err[256];
	unsigned s, k;
	(void)state;
	snprintf(path, sizeof(path), "%s/step-000150.optim.safetensors", d ? d : "");
	if (d == NULL || access(path, R_OK) != 0) {
		TEST_SKIP(TEST_NEED_DATA, "no test transformer with optimizer state (RCKPT_TEST_LM_DIR)");
	}
	for (s = 0; s < 4; s++) {
		const unsigned step = 150 * (s + 1);
		unsigned n = 0;
		snprintf(path, sizeof(path), "%s/step-%06u.safetensors", d, step);
		assert_int_equal(rckpt_st_read(&st[s], path, err, sizeof(err)), 0);
		snprintf(path, sizeof(path), "%s/step-%06u.optim.safetensors", d, step);
		assert_int_equal(rckpt_st_read(&os[s], path, err, sizeof(err)), 0);
		snprintf(path, sizeof(path), "%s/step-%06u.grads.safetensors", d, step);
		assert_int_equal(rckpt_st_read(&gr[s], path, err, sizeof(err)), 0);
		set[s].t = calloc(st[s].set.ntensors + os[s].set.ntensors, sizeof(*set[s].t));
		assert_non_null(set[s].t);
		for (k = 0; k < st[s].set.ntensors; k++)
			set[s].t[n++] = st[s].set.t[k];
		for (k = 0; k < os[s].set.ntensors; k++) {
			rckpt_tensor_role_t r;
			set[s].t[n] = os[s].set.t[k];
			rckpt_file_optim_role(set[s].t[n].name, &r);
			rckpt_ctensor_set_role(&set[s].t[n++], &r);
		}
		set[s].ntensors = n;
		assert_int_equal(rckpt_tset_sort(&set[s]), 0);
		p[s] = &set[s];
		g[s] = &gr[s].set;
	}
	encode_three(p, g, 4, (uint64_t)1 << 16); /* several chunks of each */
	for (s = 0; s < 4; s++) {
		free(set[s].t);
		rckpt_st_free(&st[s]);
		rckpt_st_free(&os[s]);
		rckpt_st_free(&gr[s]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernels),
		cmocka_unit_test(test_bad_index),
		cmocka_unit_test(test_optim_kernels),
		cmocka_unit_test(test_encoder_synthetic),
		cmocka_unit_test(test_encoder_partial),
		cmocka_unit_test(test_encoder_real),
		cmocka_unit_test(test_encoder_optim),
		cmocka_unit_test(test_big),
	};
	rckpt_gpu_probe_t pr;
	int rc;

	rckpt_gpu_probe(&pr);
	if (!pr.built_with_cuda || pr.device_count == 0) {
		printf("skipped: %s\n", pr.built_with_cuda ? "no CUDA device on this machine"
							   : "this build has no CUDA");
		if (test_required_by(TEST_NEED_GPU)) {
			printf("failed: %s requires a device\n", test_required_by(TEST_NEED_GPU));
			return 1;
		}
		return 77;
	}
	printf("device: %s (sm_%d%d, %d SMs, %zu MiB), CUDA runtime %d, driver %d\n", pr.device_name,
	       pr.cc_major, pr.cc_minor, pr.sm_count, pr.total_mem >> 20, pr.runtime_version,
	       pr.driver_version);
	if (rckpt_gpu_stream_create(&stream) != 0) {
		printf("cannot create a CUDA stream\n");
		return 1;
	}
	if (getenv("RCKPT_TEST_FILTER")) /* gpu/device-check.sh: some cases, under compute-sanitizer */
		cmocka_set_test_filter(getenv("RCKPT_TEST_FILTER"));
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	printf("%llu values and bytes compared, all equal\n", checks);
	rckpt_gpu_stream_destroy(stream);
	return test_exit(rc);
}
