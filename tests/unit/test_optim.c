/*
 * test_optim.c — Adam's state through the encoder (rckpt_ckenc.h, "The
 * optimizer's state"): the LOG2 transform, and a real AdamW run's moments
 * (the test LM the fixture trains) judged by the update the restored
 * optimizer takes, measured here from the decoded steps.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "golden_hex.h"
#include "test_skip.h"

#include "rckpt_ckenc.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"
#include "rckpt_safetensors.h"

#define NSTEPS 4 /* the fixture's steps 150, 300, 450, 600 */
#define ADAM_EPS 1e-8
#define BETA2 0.999

static rckpt_st_t model[NSTEPS], optim[NSTEPS];
static int have_data;

static int setup(void **state)
{
	const char *d = getenv("RCKPT_TEST_LM_DIR");
	char path[512], err[256];
	int i;

	(void)state;
	if (d == NULL || *d == '\0')
		return 0;
	for (i = 0; i < NSTEPS; i++) {
		snprintf(path, sizeof(path), "%s/step-%06d.safetensors", d, 150 * (i + 1));
		if (rckpt_st_read(&model[i], path, err, sizeof(err))) {
			print_message("RCKPT_TEST_LM_DIR=%s: %s\n", d, err);
			return -1;
		}
		snprintf(path, sizeof(path), "%s/step-%06d.optim.safetensors", d, 150 * (i + 1));
		if (rckpt_st_read(&optim[i], path, err, sizeof(err))) {
			print_message("RCKPT_TEST_LM_DIR=%s: %s\n", d, err);
			return -1;
		}
	}
	have_data = 1;
	return 0;
}

static int teardown(void **state)
{
	int i;
	(void)state;
	for (i = 0; i < NSTEPS; i++) {
		rckpt_st_free(&model[i]);
		rckpt_st_free(&optim[i]);
	}
	return 0;
}

#define NEED_DATA()                                                                          \
	do {                                                                                 \
		if (!have_data) {                                                            \
			TEST_SKIP(TEST_NEED_DATA, "no real optimizer state (RCKPT_TEST_LM_DIR)"); \
		}                                                                            \
	} while (0)

static void test_log2_transform(void **state)
{
	static const float vals[] = { 1.0f, 2.0f, 0.75f, 1e-12f, 3.5e-20f, 1e-30f, 1e-38f,
				      1e-44f /* subnormal */, 7.25e10f, 3.0e38f };
	float prev = -INFINITY;
	unsigned i;
	uint32_t b;

	(void)state;
	assert_true(rckpt_xf_log2_fwd(0.0f) == -127.0f);
	assert_true(rckpt_xf_log2_fwd(-0.0f) == -127.0f);
	assert_true(rckpt_xf_log2_inv(-127.0f) == 0.0f);
	assert_true(rckpt_xf_log2_inv(-500.0f) == 0.0f);
	assert_true(rckpt_xf_log2_fwd(1.0f) == 0.0f);
	assert_true(rckpt_xf_log2_fwd(2.0f) == 1.0f);
	assert_true(rckpt_xf_log2_fwd(1.5f) == 0.5f); /* piecewise linear in an octave */
	assert_true(rckpt_xf_log2_inv(0.5f) == 1.5f);
	assert_true(isnan(rckpt_xf_log2_fwd(-1e-20f)));
	assert_true(isnan(rckpt_xf_log2_fwd(INFINITY)));
	assert_true(isnan(rckpt_xf_log2_fwd(NAN)));
	assert_true(rckpt_xf_log2_inv(1000.0f) == 0x1.fffffep127f); /* clamped, finite */
	assert_true(isnan(rckpt_xf_log2_inv(NAN)));
	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		const float x = rckpt_xf_log2_fwd(vals[i]), v = rckpt_xf_log2_inv(x);
		assert_true(isfinite(x));
		assert_true(fabs((double)v - vals[i]) <= 0x1p-18 * vals[i] || vals[i] < 1e-37f);
	}
	/* monotone over the whole non-negative range */
	for (b = 0; b < 0x7f800000u; b += 0x00012345u) {
		float v, x;
		memcpy(&v, &b, 4);
		x = rckpt_xf_log2_fwd(v);
		assert_true(x >= prev);
		prev = x;
	}
}

/* Step i's model and optimizer state as one set: exp_avg.P a first moment
 * of P, exp_avg_sq.P its second (eps with Adam's bias correction at the
 * step); with_optim 0: the model alone. */
static void make_set(rckpt_tset_t *s, int i, int with_optim, unsigned opt_kind_override)
{
	const rckpt_tset_t *m = &model[i].set, *o = &optim[i].set;
	const double t = 150.0 * (i + 1);
	unsigned k, n = 0;
	s->t = calloc(m->ntensors + o->ntensors, sizeof(*s->t));
	for (k = 0; k < m->ntensors; k++)
		s->t[n++] = m->t[k];
	for (k = 0; with_optim && k < o->ntensors; k++) {
		rckpt_ctensor_t c = o->t[k];
		rckpt_tensor_role_t r;
		rckpt_file_optim_role(c.name, &r);
		if (r.role == RCKPT_ROLE_MOMENT2)
			r.eps = ADAM_EPS * sqrt(1.0 - pow(BETA2, t));
		rckpt_ctensor_set_role(&c, &r);
		if (opt_kind_override)
			c.kind1 = opt_kind_override + 1;
		s->t[n++] = c;
	}
	s->ntensors = n;
	assert_int_equal(rckpt_tset_sort(s), 0);
}

static void decode(rckpt_ckdec_t *d, const rckpt_ckenc_out_t *out)
{
	const uint8_t *recs[256];
	size_t lens[256];
	uint32_t c;
	assert_true(out->nchunks <= 256);
	for (c = 0; c < out->nchunks; c++) {
		recs[c] = out->records[c].p;
		lens[c] = out->records[c].len;
	}
	assert_int_equal(rckpt_ckdec_step(d, out->manifest.p, out->manifest.len, recs, lens), 0);
}

/* Every tensor of d's step through rckpt_ckdec_tensor_to's host sink (the
 * CPU twin of restoring into device memory): the bytes of
 * rckpt_ckdec_tensor_f32 narrowed to the tensor's dtype. Counts the
 * tensors whose segments went each way into seen[0] (levels to the sink),
 * seen[1] (bytes: lossless, LOG2, NORM). */
static void check_sink(const rckpt_ckdec_t *d, unsigned seen[2])
{
	uint32_t t, k;
	for (t = 0; t < d->mf.ntensors; t++) {
		const rckpt_mf_tensor_t *mt = &d->mf.t[t];
		const size_t dsz = rckpt_dtype_size(mt->dtype);
		uint64_t n = 1;
		rckpt_ckdec_sink_t sink;
		float *f;
		uint8_t *want, *got;
		for (k = 0; k < mt->ndim; k++)
			n *= mt->shape[k];
		f = malloc(4 * n + 4);
		want = malloc(dsz * n + 1);
		got = malloc(dsz * n + 1);
		assert_true(f && want && got);
		memset(got, 0xa5, dsz * n);
		assert_int_equal(rckpt_ckdec_tensor_f32(d, t, f), 0);
		rckpt_narrow_from_f32(want, f, mt->dtype, n);
		rckpt_ckdec_host_sink(&sink, got);
		assert_int_equal(rckpt_ckdec_tensor_to(d, t, &sink), 0);
		assert_memory_equal(want, got, dsz * n);
		for (k = 0; k < mt->nseg; k++) {
			const rckpt_seg_t *sg = &d->chunk[mt->seg[k].chunk].seg[mt->seg[k].index];
			seen[sg->encoding != RCKPT_SEG_LOSSLESS && sg->transform == RCKPT_XF_NONE &&
			     mt->norm == RCKPT_MF_NO_NORM ? 0 : 1]++;
		}
		free(f);
		free(want);
		free(got);
	}
}

/* A tensor whose last segment holds a level out of range is refused whole:
 * -EBADMSG and not a byte written (the sink may be a live tensor). */
static void check_sink_refuses(rckpt_ckdec_t *d)
{
	uint32_t t;
	for (t = 0; t < d->mf.ntensors; t++) {
		const rckpt_mf_tensor_t *mt = &d->mf.t[t];
		rckpt_seg_t *sg = &d->chunk[mt->seg[mt->nseg - 1].chunk].seg[mt->seg[mt->nseg - 1].index];
		const size_t bytes = rckpt_dtype_size(mt->dtype) * (size_t)(sg->first + sg->n);
		rckpt_ckdec_sink_t sink;
		uint8_t *got, keep, *want;
		if (sg->encoding == RCKPT_SEG_LOSSLESS || mt->nseg < 2 || sg->n == 0)
			continue;
		got = malloc(bytes);
		want = malloc(bytes);
		assert_true(got && want);
		memset(got, 0x5a, bytes);
		memset(want, 0x5a, bytes);
		keep = sg->idx[sg->n - 1];
		sg->idx[sg->n - 1] = (uint8_t)(sg->nbins + 2);
		rckpt_ckdec_host_sink(&sink, got);
		assert_int_equal(rckpt_ckdec_tensor_to(d, t, &sink), -EBADMSG);
		assert_memory_equal(got, want, bytes);
		sg->idx[sg->n - 1] = keep;
		free(got);
		free(want);
		return;
	}
	fail_msg("no tensor of several quantized segments to corrupt");
}

/* The same set with its model tensors in dtype dt (fp16, bf16), whose
 * buffers *bufs holds (free them). */
static void narrow_set(rckpt_tset_t *out, const rckpt_tset_t *s, unsigned dt, void **bufs)
{
	unsigned k;
	out->t = calloc(s->ntensors, sizeof(*out->t));
	out->ntensors = s->ntensors;
	assert_non_null(out->t);
	for (k = 0; k < s->ntensors; k++) {
		out->t[k] = s->t[k];
		bufs[k] = NULL;
		if (s->t[k].dtype != RCKPT_DT_F32 || rckpt_lk_is_optim(rckpt_ctensor_kind(&s->t[k])))
			continue;
		bufs[k] = malloc(rckpt_dtype_size(dt) * s->t[k].n + 4);
		assert_non_null(bufs[k]);
		rckpt_narrow_from_f32(bufs[k], (const float *)s->t[k].data, dt, s->t[k].n);
		out->t[k].dtype = dt;
		out->t[k].data = bufs[k];
	}
}

/* Restoring into device memory, on its CPU twin (rckpt_ckdec_tensor_to
 * with the host sink): every tensor of the steps (bases and deltas; the
 * model in fp32, fp16 and bf16; Adam's moments, LOG2 and NORM) reads as
 * the fp32 decode narrowed, byte for byte. The device sink's kernels are
 * test_gpu_parity's (on a GPU). */
static void test_decode_to_sink(void **state)
{
	static const unsigned dts[] = { RCKPT_DT_F32, RCKPT_DT_F16, RCKPT_DT_BF16 };
	unsigned v, seen[2] = { 0, 0 };
	(void)state;
	NEED_DATA();
	for (v = 0; v < 3; v++) {
		rckpt_ckenc_opts_t o;
		rckpt_ckenc_t *e;
		rckpt_ckdec_t d;
		char msg[256];
		int i;
		rckpt_ckenc_opts_default(&o);
		o.chunk_params = 3000; /* tensors in several segments, at odd offsets */
		assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
		memset(&d, 0, sizeof(d));
		/* fp32 over every step; fp16 and bf16 over a base and a delta */
		for (i = 0; i < (v ? 2 : NSTEPS); i++) {
			rckpt_tset_t s, sn;
			rckpt_ckenc_out_t out;
			rckpt_ckenc_stats_t st;
			void *bufs[1024];
			unsigned k;
			memset(&out, 0, sizeof(out));
			make_set(&s, i, 1, 0);
			assert_true(s.ntensors <= 1024);
			narrow_set(&sn, &s, dts[v], bufs);
			assert_int_equal(rckpt_ckenc_step(e, &out, &st, &sn, NULL, 150 * (i + 1), msg, sizeof(msg)), 0);
			decode(&d, &out);
			check_sink(&d, seen);
			if (v == 0 && i == NSTEPS - 1)
				check_sink_refuses(&d);
			rckpt_ckenc_out_free(&out);
			for (k = 0; k < sn.ntensors; k++)
				free(bufs[k]);
			free(sn.t);
			free(s.t);
		}
		rckpt_ckdec_free(&d);
		rckpt_ckenc_destroy(e);
	}
	print_message("%u segments as levels, %u as bytes, every tensor equal\n", seen[0], seen[1]);
	assert_true(seen[0] > 0 && seen[1] > 0);
}

static int find(const rckpt_ckdec_t *d, const char *name)
{
	uint32_t i;
	for (i = 0; i < d->mf.ntensors; i++)
		if (strcmp(d->mf.t[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* The update error of the decoded step against step i's state: the
 * relative squared error of u = m / (sqrt(v) + eps) over every parameter,
 * and the worst per-tensor ratio of |u'| to |u| (as max(r, 1/r)). */
static void update_error(const rckpt_ckdec_t *d, int i, double *err, double *worst_ratio,
			 double *worst_err)
{
	const rckpt_tset_t *o = &optim[i].set;
	const double eps = ADAM_EPS * sqrt(1.0 - pow(BETA2, 150.0 * (i + 1)));
	double num = 0, den = 0;
	unsigned k;

	*worst_ratio = 1;
	if (worst_err)
		*worst_err = 0;
	for (k = 0; k < o->ntensors; k++) {
		const rckpt_ctensor_t *mt = &o->t[k], *vt;
		char vname[300];
		float *m, *v, *mr, *vr;
		double tn = 0, tu = 0, tr = 0;
		uint64_t e;
		int dm, dv;
		if (strncmp(mt->name, "exp_avg.", 8) != 0)
			continue;
		snprintf(vname, sizeof(vname), "exp_avg_sq.%s", mt->name + 8);
		vt = rckpt_tset_find(o, vname);
		assert_non_null(vt);
		dm = find(d, mt->name);
		dv = find(d, vname);
		assert_true(dm >= 0 && dv >= 0);
		m = malloc(4 * mt->n + 4);
		v = malloc(4 * mt->n + 4);
		mr = malloc(4 * mt->n + 4);
		vr = malloc(4 * mt->n + 4);
		rckpt_widen_to_f32(m, mt->data, mt->dtype, mt->n);
		rckpt_widen_to_f32(v, vt->data, vt->dtype, vt->n);
		assert_int_equal(rckpt_ckdec_tensor_f32(d, (uint32_t)dm, mr), 0);
		assert_int_equal(rckpt_ckdec_tensor_f32(d, (uint32_t)dv, vr), 0);
		for (e = 0; e < mt->n; e++) {
			const double u = m[e] / (sqrt(v[e]) + eps);
			double ur;
			assert_true(vr[e] >= 0.0f && isfinite(vr[e]));
			ur = mr[e] / (sqrt(vr[e]) + eps);
			tn += (ur - u) * (ur - u);
			tu += u * u;
			tr += ur * ur;
		}
		num += tn;
		den += tu;
		if (tu > 0 && worst_err && tn / tu > *worst_err)
			*worst_err = tn / tu;
		if (tu > 0) {
			const double r = sqrt(tr / tu);
			if ((r > 1 ? r : 1 / r) > *worst_ratio)
				*worst_ratio = r > 1 ? r : 1 / r;
		}
		free(m);
		free(v);
		free(mr);
		free(vr);
	}
	*err = num / den;
}

/* The model's records do not change when the optimizer's state joins the
 * step; the state's update error stays within opt_eps (measured here from
 * the decoded tensors, not the encoder's estimate); second moments come
 * back non-negative from LOG2 segments; and the state costs far less than
 * its fp32 bytes. */
static void test_adam_state(void **state)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e, *ew;
	rckpt_ckdec_t d, dw;
	rckpt_ckenc_stats_t st, stw;
	char msg[256];
	uint64_t opt_raw = 0, opt_enc = 0;
	int i;

	(void)state;
	NEED_DATA();
	rckpt_ckenc_opts_default(&o);
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	assert_int_equal(rckpt_ckenc_create(&ew, &o), 0);
	memset(&d, 0, sizeof(d));
	memset(&dw, 0, sizeof(dw));
	for (i = 0; i < NSTEPS; i++) {
		rckpt_tset_t s, sw;
		rckpt_ckenc_out_t out, outw;
		double err, ratio;
		uint32_t c, nmodel_chunks = 0, v2 = 0, t;
		memset(&out, 0, sizeof(out));
		memset(&outw, 0, sizeof(outw));
		make_set(&s, i, 1, 0);
		make_set(&sw, i, 0, 0);
		assert_int_equal(rckpt_ckenc_step(e, &out, &st, &s, NULL, 150 * (i + 1), msg, sizeof(msg)), 0);
		assert_int_equal(rckpt_ckenc_step(ew, &outw, &stw, &sw, NULL, 150 * (i + 1), msg, sizeof(msg)),
				 0);
		/* the model's search and records are the model-only run's */
		assert_true(st.quality == stw.quality);
		nmodel_chunks = outw.nchunks;
		assert_true(out.nchunks > nmodel_chunks);
		for (c = 0; c < nmodel_chunks; c++) /* the same sizes (tensor numbers differ) */
			assert_int_equal(out.records[c].len, outw.records[c].len);
		for (c = nmodel_chunks; c < out.nchunks; c++)
			v2 += out.records[c].p[4] >= 2;
		assert_true(v2 > 0); /* second moments' chunks are version 2 (LOG2) or 3 */
		decode(&d, &out);
		decode(&dw, &outw);
		for (t = 0; t < dw.mf.ntensors; t++) { /* and the same values */
			const uint64_t n = model[i].set.t[t].n;
			float *a = malloc(4 * n + 4), *b = malloc(4 * n + 4);
			assert_int_equal(rckpt_ckdec_tensor_f32(&dw, t, a), 0);
			assert_int_equal(rckpt_ckdec_tensor_f32(&d, (uint32_t)find(&d, dw.mf.t[t].name), b),
					 0);
			assert_memory_equal(a, b, 4 * n);
			free(a);
			free(b);
		}
		for (t = 0; t < d.mf.ntensors; t++)
			if (strncmp(d.mf.t[t].name, "exp_avg_sq.", 11) == 0)
				assert_int_equal(d.mf.t[t].kind, RCKPT_LK_MOMENT2);
		update_error(&d, i, &err, &ratio, NULL);
		print_message("step %d: model %.2fx, optimizer %" PRIu64 " -> %" PRIu64
			      " bytes (%.1fx), update error %.4f (encoder %.4f, opt_eps %.3f), "
			      "worst update norm ratio %.3f, %s\n",
			      150 * (i + 1), (double)stw.raw_bytes / (double)stw.enc_bytes,
			      st.opt_raw_bytes, st.opt_enc_bytes,
			      (double)st.opt_raw_bytes / (double)st.opt_enc_bytes, err, st.opt_quality,
			      o.opt_eps, ratio, st.is_base ? "base" : "delta");
		assert_true(st.opt_quality > 0 && st.opt_quality <= o.opt_eps);
		/* the encoder's first-order estimate is what a restore does */
		assert_true(err <= 1.25 * o.opt_eps);
		assert_true(fabs(err - st.opt_quality) < 0.25 * o.opt_eps);
		assert_true(ratio < 1.25);
		{
			uint64_t want = 0;
			for (t = 0; t < optim[i].set.ntensors; t++)
				want += 4 * optim[i].set.t[t].n;
			assert_true(st.opt_raw_bytes == want);
		}
		opt_raw += st.opt_raw_bytes;
		opt_enc += st.opt_enc_bytes;
		rckpt_ckenc_out_free(&out);
		rckpt_ckenc_out_free(&outw);
		free(s.t);
		free(sw.t);
	}
	/* the state costs a fraction of its fp32 bytes over the run */
	assert_true(opt_enc * 6 < opt_raw);
	rckpt_ckdec_free(&d);
	rckpt_ckdec_free(&dw);
	rckpt_ckenc_destroy(e);
	rckpt_ckenc_destroy(ew);
}

/* A loose opt_eps spreads over the tensors: no parameter's update is
 * wrecked because it weighs little in the sum (OPT_TENSOR_MAX, each
 * moment's own error at most 0.1; the TENSOR_CAP of the model's tensors
 * let one reach 20 opt_eps), so the first update after a restore keeps
 * every tensor's norm. */
static void test_adam_loose(void **state)
{
	static const double oes[] = { 0.1, 0.2 };
	unsigned k;

	(void)state;
	NEED_DATA();
	for (k = 0; k < sizeof(oes) / sizeof(oes[0]); k++) {
		rckpt_ckenc_opts_t o;
		rckpt_ckenc_t *e;
		rckpt_ckdec_t d;
		char msg[256];
		int i;
		rckpt_ckenc_opts_default(&o);
		o.opt_eps = oes[k];
		assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
		memset(&d, 0, sizeof(d));
		for (i = 0; i < NSTEPS; i++) {
			rckpt_tset_t s;
			rckpt_ckenc_out_t out;
			rckpt_ckenc_stats_t st;
			double err, ratio, worst;
			memset(&out, 0, sizeof(out));
			make_set(&s, i, 1, 0);
			assert_int_equal(rckpt_ckenc_step(e, &out, &st, &s, NULL, 150 * (i + 1), msg, sizeof(msg)),
					 0);
			decode(&d, &out);
			update_error(&d, i, &err, &ratio, &worst);
			print_message("opt_eps %.2f step %d: optimizer %.1fx, update error %.4f, worst "
				      "parameter's %.4f, worst norm ratio %.3f\n",
				      o.opt_eps, 150 * (i + 1),
				      (double)st.opt_raw_bytes / (double)st.opt_enc_bytes, err, worst, ratio);
			assert_true(st.opt_quality <= o.opt_eps && err <= 1.25 * o.opt_eps);
			/* each moment's own error at most max(0.1, its pass's eps): the
			 * two add, and the estimate's first-order slack */
			assert_true(worst <= 2.5 * (o.opt_eps > 0.1 ? o.opt_eps : 0.1));
			assert_true(ratio < 1.3);
			rckpt_ckenc_out_free(&out);
			free(s.t);
		}
		rckpt_ckdec_free(&d);
		rckpt_ckenc_destroy(e);
	}
}

/* A second moment with a negative value is refused, naming it, and the
 * encoder goes on as if the step had not been asked. */
static void test_negative_second_moment(void **state)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e;
	rckpt_ckenc_stats_t st;
	rckpt_ckenc_out_t out;
	rckpt_tset_t s;
	char msg[256];
	float *bad;
	unsigned k;

	(void)state;
	NEED_DATA();
	rckpt_ckenc_opts_default(&o);
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	make_set(&s, 0, 1, 0);
	for (k = 0; k < s.ntensors && rckpt_ctensor_kind(&s.t[k]) != RCKPT_LK_MOMENT2; k++)
		;
	assert_true(k < s.ntensors && s.t[k].dtype == RCKPT_DT_F32);
	bad = malloc(4 * s.t[k].n);
	memcpy(bad, s.t[k].data, 4 * s.t[k].n);
	bad[s.t[k].n / 2] = -1e-9f;
	s.t[k].data = (const uint8_t *)bad;
	memset(&out, 0, sizeof(out));
	assert_int_equal(rckpt_ckenc_step(e, &out, &st, &s, NULL, 150, msg, sizeof(msg)), -EDOM);
	assert_non_null(strstr(msg, s.t[k].name));
	assert_non_null(strstr(msg, "negative"));
	free(s.t);
	make_set(&s, 0, 1, 0);
	assert_int_equal(rckpt_ckenc_step(e, &out, &st, &s, NULL, 150, msg, sizeof(msg)), 0);
	assert_true(st.is_base);
	rckpt_ckenc_out_free(&out);
	free(s.t);
	free(bad);
	rckpt_ckenc_destroy(e);
}

/* The spec's golden step (ckpt-manifest-v2.hex, ckpt-xform-v2.hex) through
 * the decoder: the second moment's LOG2 values, and the first moment's
 * NORM values times sqrtf(v) + eps, in binary32. */
static void test_golden_step(void **state)
{
	static uint8_t man[4096], rec[4096];
	const float y[8] = { -0.5f, 0, 0.25f, 0.25f, 0.25f, 0.25f, 10.0f, -0.5f };
	const float v[8] = { 0.75f, 1, 1.25f, 1.25f, 1.25f, 1.25f, 1024, 0.75f };
	const uint8_t *recs[1];
	size_t lens[1], mn;
	rckpt_ckdec_t d;
	float got[8];
	unsigned k;

	(void)state;
	mn = golden_hex("ckpt-manifest-v2.hex", man, sizeof(man));
	lens[0] = golden_hex("ckpt-xform-v2.hex", rec, sizeof(rec));
	recs[0] = rec;
	memset(&d, 0, sizeof(d));
	assert_int_equal(rckpt_ckdec_step(&d, man, mn, recs, lens), 0);
	assert_int_equal(rckpt_ckdec_tensor_f32(&d, 1, got), 0);
	assert_memory_equal(got, v, sizeof(v));
	assert_int_equal(rckpt_ckdec_tensor_f32(&d, 0, got), 0);
	for (k = 0; k < 8; k++)
		assert_true(got[k] == y[k] * (sqrtf(v[k]) + 1e-8f));
	assert_int_equal(rckpt_ckdec_range_f32(&d, 0, 6, 2, got), 0);
	assert_true(got[0] == 10.0f * (32.0f + 1e-8f) && got[1] == y[7] * (sqrtf(v[7]) + 1e-8f));
	rckpt_ckdec_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log2_transform),
		cmocka_unit_test(test_golden_step),
		cmocka_unit_test(test_adam_state),
		cmocka_unit_test(test_adam_loose),
		cmocka_unit_test(test_decode_to_sink),
		cmocka_unit_test(test_negative_second_moment),
	};
	return test_exit(cmocka_run_group_tests(tests, setup, teardown)); /* 77: skipped */
}
