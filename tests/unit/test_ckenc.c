/*
 * test_ckenc.c — the checkpoint encoder and its configuration search, on
 * the real checkpoints the test fixture trains.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
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

#include "test_rng.h"
#include "test_skip.h"

#include "ckenc_impl.h"
#include "rckpt_ckdec.h"
#include "rckpt_ckenc.h"
#include "rckpt_safetensors.h"
#include "bf16_round.h"

#define NSTEPS 6

static rckpt_st_t params[NSTEPS], grads[NSTEPS];
static int have_data;

static int setup(void **state)
{
	const char *d = getenv("RCKPT_TEST_CKPT_DIR");
	char path[512], err[256];
	int i;

	(void)state;
	if (d == NULL || *d == '\0')
		return 0; /* no fixture: the tests that need it skip (TEST_SKIP) */
	/* A fixture that is named but missing or unreadable is a failure,
	 * not a skip. */
	for (i = 0; i < NSTEPS; i++) {
		snprintf(path, sizeof(path), "%s/step-%06d.safetensors", d, 25 * (i + 1));
		if (rckpt_st_read(&params[i], path, err, sizeof(err))) {
			print_message("RCKPT_TEST_CKPT_DIR=%s: %s: %s\n", d, path, err);
			return -1;
		}
		snprintf(path, sizeof(path), "%s/step-%06d.grads.safetensors", d, 25 * (i + 1));
		if (rckpt_st_read(&grads[i], path, err, sizeof(err))) {
			print_message("RCKPT_TEST_CKPT_DIR=%s: %s: %s\n", d, path, err);
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
		rckpt_st_free(&params[i]);
		rckpt_st_free(&grads[i]);
	}
	return 0;
}

#define NEED_DATA()                                                                        \
	do {                                                                               \
		if (!have_data) {                                                          \
			TEST_SKIP(TEST_NEED_DATA, "no real checkpoints (RCKPT_TEST_CKPT_DIR)"); \
		}                                                                          \
	} while (0)

/* The axes on which b is more aggressive than a (fewer bins, less
 * protection, more pruning), or 9 when one of them moved by more than one
 * step of the space (rckpt_ckenc.h). */
static int bolder_axes(const rckpt_qconfig_t *a, const rckpt_qconfig_t *b)
{
	if (3 * b->bins < 2 * a->bins || 2 * b->emb_bins < a->emb_bins || 15 * b->protect_frac < a->protect_frac ||
	    b->prune_frac[RCKPT_LK_LINEAR] > a->prune_frac[RCKPT_LK_LINEAR] + 0.1001f)
		return 9;
	return (b->bins < a->bins) + (b->emb_bins < a->emb_bins) + (b->protect_frac < a->protect_frac) +
	       (b->prune_frac[RCKPT_LK_LINEAR] > a->prune_frac[RCKPT_LK_LINEAR]);
}

/* Decodes out into d and returns the step's loss, recomputed. */
static double decode_step(rckpt_ckdec_t *d, const rckpt_ckenc_out_t *out, const rckpt_tset_t *p,
			  const rckpt_tset_t *g)
{
	const uint8_t *recs[64];
	size_t lens[64], total = out->manifest.len;
	uint32_t c;
	double num = 0, den = 0, worst = 0, tn = 0, td = 0;
	unsigned i;

	assert_true(out->nchunks <= 64);
	for (c = 0; c < out->nchunks; c++) {
		recs[c] = out->records[c].p;
		lens[c] = out->records[c].len;
		total += lens[c];
	}
	assert_int_equal(rckpt_ckdec_step(d, out->manifest.p, out->manifest.len, recs, lens), 0);
	assert_int_equal(d->mf.ntensors, p->ntensors);
	for (i = 0; i < p->ntensors; i++) {
		const rckpt_ctensor_t *t = &p->t[i], *gt = rckpt_tset_find(g, t->name);
		float *w = malloc(4 * (t->n + 1)), *r = malloc(4 * (t->n + 1));
		uint64_t k;
		assert_string_equal(d->mf.t[i].name, t->name);
		rckpt_widen_to_f32(w, t->data, t->dtype, t->n);
		assert_int_equal(rckpt_ckdec_tensor_f32(d, i, r), 0);
		tn = td = 0;
		if (d->mf.t[i].encoding == RCKPT_SEG_LOSSLESS)
			assert_memory_equal(w, r, 4 * t->n);
		else
			for (k = 0; k < t->n; k++) {
				double gg = (double)((const float *)gt->data)[k];
				gg *= gg;
				tn += gg * ((double)w[k] - r[k]) * ((double)w[k] - r[k]);
				td += gg * (double)w[k] * w[k];
			}
		if (d->mf.t[i].kind == RCKPT_LK_NORM_BIAS) { /* kept as bf16, outside the sums */
			assert_true(tn <= 0x1p-16 * td); /* each value within 2^-8 of its own */
			tn = td = 0;
		}
		num += tn;
		den += td;
		if (td > 0 && tn / td > worst)
			worst = tn / td;
		free(w);
		free(r);
	}
	/* the Fisher-weighted relative error of the model's quantized tensors
	 * but its norms and biases, or the worst tensor's over 20
	 * (ckenc_search.c, TENSOR_CAP) */
	return worst / 20 > num / den ? worst / 20 : num / den;
}

/* out's manifest with its chunk digests (content) and stored bases'
 * digests spoiled as asked, then decoded with out's records. */
static int spoiled_decode(const rckpt_ckenc_out_t *out, int content, int base)
{
	const uint8_t *recs[64];
	size_t lens[64];
	rckpt_manifest_t m;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_ckdec_t d;
	uint32_t c;
	int rc;

	assert_int_equal(rckpt_manifest_decode(&m, out->manifest.p, out->manifest.len), 0);
	for (c = 0; c < out->nchunks; c++) {
		recs[c] = out->records[c].p;
		lens[c] = out->records[c].len;
		m.chunk[c].sha256[0] ^= (uint8_t)content;
		m.chunk[c].base_sha256[0] ^= (uint8_t)base;
	}
	assert_int_equal(rckpt_manifest_encode(&b, &m), 0);
	memset(&d, 0, sizeof(d));
	rc = rckpt_ckdec_step(&d, b.p, b.len, recs, lens);
	rckpt_ckdec_free(&d);
	rckpt_buf_free(&b);
	rckpt_manifest_free(&m);
	return rc;
}

/* A base step's manifest names each chunk's record as its stored base
 * (checkpoint.md "Manifest", version 3): a record that is those bytes is
 * taken by them (a spoiled content digest goes unread), any other by its
 * content; with both spoiled it fails closed. */
static void stored_bases(const rckpt_ckenc_out_t *out)
{
	rckpt_manifest_t m;
	uint8_t h[32];
	uint32_t c;

	assert_int_equal(rckpt_manifest_decode(&m, out->manifest.p, out->manifest.len), 0);
	assert_int_equal(out->manifest.p[4], 3);
	for (c = 0; c < out->nchunks; c++) {
		assert_int_equal(m.chunk[c].base_bytes, out->records[c].len);
		assert_int_equal(rckpt_sha256(h, out->records[c].p, out->records[c].len), 0);
		assert_memory_equal(m.chunk[c].base_sha256, h, 32);
	}
	rckpt_manifest_free(&m);
	assert_int_equal(spoiled_decode(out, 0, 0), 0);
	assert_int_equal(spoiled_decode(out, 1, 0), 0);
	assert_int_equal(spoiled_decode(out, 0, 1), 0);
	assert_int_equal(spoiled_decode(out, 1, 1), RCKPT_FMT_ECHECKSUM);
}

static void test_search_chain(void **state)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e;
	rckpt_qconfig_t lastc;
	rckpt_ckdec_t d;
	char msg[256];
	int i;

	(void)state;
	NEED_DATA();
	rckpt_ckenc_opts_default(&o);
	o.eps = 0.01;
	o.chunk_params = 50000; /* several chunks, tensors split across them */
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&d, 0, sizeof(d));
	for (i = 0; i < NSTEPS; i++) {
		rckpt_ckenc_out_t out;
		rckpt_ckenc_stats_t st;
		size_t total;
		uint32_t c;
		memset(&out, 0, sizeof(out));
		assert_int_equal(rckpt_ckenc_step(e, &out, &st, &params[i].set, &grads[i].set, (uint64_t)(25 * (i + 1)),
						  msg, sizeof(msg)),
				 0);
		assert_true(out.nchunks >= 2);
		total = out.manifest.len;
		for (c = 0; c < out.nchunks; c++)
			total += out.records[c].len;
		assert_int_equal(st.enc_bytes, total);
		assert_true(st.accepted);
		assert_true(st.quality <= o.eps);
		assert_int_equal(st.is_base, i == 0);
		assert_true(st.configs_tried >= 1);
		if (i >= 2) /* the second step may search afresh; from then on, a neighbour at most
			       one axis bolder (ckenc_search) */
			assert_true(bolder_axes(&lastc, &st.config) <= 1);
		lastc = st.config;
		if (i == 0) { /* a flipped byte in a chunk or the manifest fails closed */
			const uint8_t *recs[64];
			size_t lens[64];
			rckpt_ckdec_t d2;
			memset(&d2, 0, sizeof(d2));
			for (c = 0; c < out.nchunks; c++) {
				recs[c] = out.records[c].p;
				lens[c] = out.records[c].len;
			}
			out.records[1].p[out.records[1].len / 2] ^= 0x10;
			assert_int_equal(rckpt_ckdec_step(&d2, out.manifest.p, out.manifest.len, recs, lens),
					 RCKPT_FMT_ECHECKSUM);
			out.records[1].p[out.records[1].len / 2] ^= 0x10;
			out.manifest.p[out.manifest.len / 2] ^= 0x01;
			assert_int_equal(rckpt_ckdec_step(&d2, out.manifest.p, out.manifest.len, recs, lens),
					 RCKPT_FMT_ECHECKSUM);
			out.manifest.p[out.manifest.len / 2] ^= 0x01;
			assert_null(d2.chunk); /* nothing was kept */
			stored_bases(&out);
		}
		if (i == NSTEPS - 1) { /* a delta needs the step it applies to */
			const uint8_t *recs[64];
			size_t lens[64];
			rckpt_ckdec_t d2;
			memset(&d2, 0, sizeof(d2));
			for (c = 0; c < out.nchunks; c++) {
				recs[c] = out.records[c].p;
				lens[c] = out.records[c].len;
			}
			assert_int_equal(rckpt_ckdec_step(&d2, out.manifest.p, out.manifest.len, recs, lens),
					 -ESTALE);
		}
		assert_float_equal(decode_step(&d, &out, &params[i].set, &grads[i].set), st.quality, 1e-9);
		rckpt_ckenc_out_free(&out);
	}
	rckpt_ckdec_free(&d);
	rckpt_ckenc_destroy(e);
}

/* A writer that continues a chain from a cautious configuration (64 bins,
 * nothing pruned, the most protection: what a step that failed its sample
 * may leave) moves on to bolder ones, one axis one step at a time, where
 * their estimates say they pay for the switch; with opts.bold_gain 1 (the
 * old rule: never more aggressive than the last accepted point) it stays.
 * The test's small model gains little per step, so the bar is 0 here. */
static unsigned resume_moves(double bold_gain)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *a, *b;
	rckpt_qconfig_t cautious, last;
	rckpt_ckdec_t d;
	char msg[256];
	unsigned moved = 0;
	int i;

	rckpt_ckenc_opts_default(&o);
	o.eps = 0.01;
	cautious = o.fixed;
	cautious.bins = 64;
	cautious.emb_bins = 64;
	for (i = 0; i < RCKPT_LK_COUNT; i++)
		cautious.prune_frac[i] = 0.0f;
	cautious.protect_frac = 0.01f;
	o.mode = RCKPT_CKENC_FIXED;
	o.fixed = cautious;
	assert_int_equal(rckpt_ckenc_create(&a, &o), 0);
	memset(&d, 0, sizeof(d));
	for (i = 0; i < 2; i++) {
		rckpt_ckenc_out_t out;
		rckpt_ckenc_stats_t st;
		memset(&out, 0, sizeof(out));
		assert_int_equal(rckpt_ckenc_step(a, &out, &st, &params[i].set, &grads[i].set, (uint64_t)(25 * (i + 1)),
						  msg, sizeof(msg)),
				 0);
		decode_step(&d, &out, &params[i].set, &grads[i].set);
		rckpt_ckenc_out_free(&out);
	}
	rckpt_ckenc_destroy(a);
	o.mode = RCKPT_CKENC_SEARCH;
	o.bold_gain = bold_gain;
	assert_int_equal(rckpt_ckenc_create(&b, &o), 0);
	assert_int_equal(rckpt_ckenc_resume(b, &d), 0);
	last = cautious;
	for (i = 2; i < NSTEPS; i++) {
		rckpt_ckenc_out_t out;
		rckpt_ckenc_stats_t st;
		memset(&out, 0, sizeof(out));
		assert_int_equal(rckpt_ckenc_step(b, &out, &st, &params[i].set, &grads[i].set, (uint64_t)(25 * (i + 1)),
						  msg, sizeof(msg)),
				 0);
		assert_false(st.is_base); /* it took the chain up */
		assert_true(st.accepted && st.quality <= o.eps);
		assert_true(bolder_axes(&last, &st.config) <= 1);
		moved += (unsigned)bolder_axes(&last, &st.config);
		last = st.config;
		rckpt_ckenc_out_free(&out);
	}
	rckpt_ckdec_free(&d);
	rckpt_ckenc_destroy(b);
	return moved;
}

static void test_resume_walks_back(void **state)
{
	(void)state;
	NEED_DATA();
	assert_int_equal(resume_moves(1.0), 0);
	assert_true(resume_moves(0.0) >= 1);
}

/* Steps 0..2 encoded with opts.threads = th (chunks of 997 parameters:
 * many, of uneven pieces), partial_block as given: every step's manifest
 * and records, one after the other, into b. */
static void encode_threads(rckpt_buf_t *b, unsigned th, uint32_t partial_block, uint32_t *nchunks)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e;
	char msg[256];
	int i;

	rckpt_ckenc_opts_default(&o);
	o.chunk_params = 997;
	o.threads = th;
	o.par_min_work = 0; /* threads even on the small test model */
	o.partial_block = partial_block;
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	for (i = 0; i < 3; i++) {
		rckpt_ckenc_stats_t st;
		rckpt_ckenc_out_t out;
		uint32_t c;
		memset(&out, 0, sizeof(out));
		assert_int_equal(rckpt_ckenc_step(e, &out, &st, &params[i].set, &grads[i].set, (uint64_t)i, msg,
						  sizeof(msg)),
				 0);
		assert_int_equal(st.is_base, i == 0);
		rckpt_buf_append(b, out.manifest.p, out.manifest.len);
		for (c = 0; c < out.nchunks; c++)
			rckpt_buf_append(b, out.records[c].p, out.records[c].len);
		*nchunks = out.nchunks;
		rckpt_ckenc_out_free(&out);
	}
	rckpt_ckenc_destroy(e);
}

/* The same steps give the same bytes, encoder after encoder. */
/* The same steps encode to the same bytes: the search is deterministic. */
static void test_deterministic(void **state)
{
	rckpt_buf_t b[2] = { RCKPT_BUF_INIT, RCKPT_BUF_INIT };
	uint32_t n[2];

	(void)state;
	NEED_DATA();
	encode_threads(&b[0], 1, 0, &n[0]);
	encode_threads(&b[1], 1, 0, &n[1]);
	assert_int_equal(n[0], n[1]);
	assert_int_equal(b[0].len, b[1].len);
	assert_memory_equal(b[0].p, b[1].p, b[0].len);
	rckpt_buf_free(&b[0]);
	rckpt_buf_free(&b[1]);
}

/* Chunks quantized and encoded on several threads give the bytes of one
 * thread, base and deltas, whatever the count (a batch's remainder, more
 * threads than chunks), with and without the values kept for partial
 * steps (a piece's snapshot written from a helper thread). */
static void test_threads_same_bytes(void **state)
{
	static const unsigned TH[] = { 3, 1000 }; /* a batch's remainder; more threads than chunks */
	uint32_t nchunks = 0, n2 = 0;
	unsigned pb, k;

	(void)state;
	NEED_DATA();
	for (pb = 0; pb < 2; pb++) {
		rckpt_buf_t one = RCKPT_BUF_INIT;
		encode_threads(&one, 1, pb ? 4096 : 0, &nchunks);
		assert_true(nchunks > 7); /* several batches, and a remainder */
		for (k = 0; k < sizeof(TH) / sizeof(TH[0]); k++) {
			rckpt_buf_t many = RCKPT_BUF_INIT;
			encode_threads(&many, TH[k], pb ? 4096 : 0, &n2);
			assert_int_equal(n2, nchunks);
			assert_int_equal(many.len, one.len);
			assert_memory_equal(many.p, one.p, one.len);
			rckpt_buf_free(&many);
		}
		rckpt_buf_free(&one);
	}
}

/* Norms and biases kept as bf16 (the default) weigh nothing in the sums
 * eps bounds: every step chooses what it chose when they were lossless,
 * at the same quality, the other tensors decode to the same values, and
 * the steps are smaller. */
static void test_bf16_norms_same_choices(void **state)
{
	rckpt_ckenc_opts_t o[2];
	rckpt_ckenc_t *e[2];
	rckpt_ckdec_t d[2];
	size_t bytes[2] = { 0, 0 };
	char msg[256];
	unsigned k, i, t, norms = 0;

	(void)state;
	NEED_DATA();
	for (k = 0; k < 2; k++) {
		rckpt_ckenc_opts_default(&o[k]);
		o[k].eps = 0.01;
		memset(&d[k], 0, sizeof(d[k]));
	}
	assert_int_equal(o[0].fixed.bf16_kinds, 1u << RCKPT_LK_NORM_BIAS);
	assert_int_equal(o[0].fixed.lossless_kinds, 0);
	o[1].fixed.bf16_kinds = 0;
	o[1].fixed.lossless_kinds = 1u << RCKPT_LK_NORM_BIAS;
	for (k = 0; k < 2; k++)
		assert_int_equal(rckpt_ckenc_create(&e[k], &o[k]), 0);
	for (i = 0; i < NSTEPS; i++) {
		rckpt_ckenc_stats_t st[2];
		for (k = 0; k < 2; k++) {
			rckpt_ckenc_out_t out;
			memset(&out, 0, sizeof(out));
			assert_int_equal(rckpt_ckenc_step(e[k], &out, &st[k], &params[i].set, &grads[i].set,
							  (uint64_t)(25 * (i + 1)), msg, sizeof(msg)),
					 0);
			bytes[k] += st[k].enc_bytes;
			decode_step(&d[k], &out, &params[i].set, &grads[i].set);
			rckpt_ckenc_out_free(&out);
		}
		assert_true(st[0].quality == st[1].quality);
		assert_int_equal(st[0].config.bins, st[1].config.bins);
		assert_int_equal(st[0].config.emb_bins, st[1].config.emb_bins);
		assert_true(st[0].config.protect_frac == st[1].config.protect_frac);
		assert_true(st[0].config.prune_frac[RCKPT_LK_LINEAR] == st[1].config.prune_frac[RCKPT_LK_LINEAR]);
		assert_int_equal(st[0].config.prune_metric, st[1].config.prune_metric);
		for (t = 0; t < params[i].set.ntensors; t++) {
			const rckpt_ctensor_t *ct = &params[i].set.t[t];
			float *a = malloc(4 * (ct->n + 1)), *b = malloc(4 * (ct->n + 1));
			assert_true(a && b);
			assert_int_equal(rckpt_ckdec_tensor_f32(&d[0], t, a), 0);
			assert_int_equal(rckpt_ckdec_tensor_f32(&d[1], t, b), 0);
			if (d[0].mf.t[t].kind == RCKPT_LK_NORM_BIAS) {
				assert_int_equal(d[0].mf.t[t].encoding, RCKPT_SEG_QUANTIZED);
				assert_int_equal(d[1].mf.t[t].encoding, RCKPT_SEG_LOSSLESS);
				bf16_round(b, ct->n); /* the lossless value's bf16 */
				norms++;
			}
			assert_memory_equal(a, b, 4 * ct->n);
			free(a);
			free(b);
		}
	}
	assert_true(norms > 0);
	assert_true(bytes[0] < bytes[1]);
	print_message("%u steps: %zu bytes with norms and biases as bf16, %zu lossless\n", NSTEPS, bytes[0],
		      bytes[1]);
	for (k = 0; k < 2; k++) {
		rckpt_ckdec_free(&d[k]);
		rckpt_ckenc_destroy(e[k]);
	}
}

/* A step's tensors as another run might hold them: `drop` left out,
 * `shrink` a row shorter (a resized vocabulary: the first rows' values),
 * `narrow` in bf16 (a switch of dtype; its buffer is *owned). Names stay
 * sorted. */
static void changed_set(rckpt_tset_t *out, void **owned, const rckpt_tset_t *s, const char *drop,
			const char *shrink, const char *narrow)
{
	unsigned i;
	out->t = calloc(s->ntensors, sizeof(*out->t));
	out->ntensors = 0;
	*owned = NULL;
	assert_non_null(out->t);
	for (i = 0; i < s->ntensors; i++) {
		rckpt_ctensor_t t = s->t[i];
		if (drop && strcmp(t.name, drop) == 0)
			continue;
		if (shrink && strcmp(t.name, shrink) == 0) {
			t.n = t.n / t.shape[0] * (t.shape[0] - 1);
			t.shape[0]--;
		}
		if (narrow && strcmp(t.name, narrow) == 0 && t.dtype == RCKPT_DT_F32) {
			uint16_t *b = malloc(2 * t.n);
			float *f = malloc(4 * t.n);
			uint64_t k;
			assert_true(b && f);
			memcpy(f, t.data, 4 * t.n);
			bf16_round(f, t.n);
			for (k = 0; k < t.n; k++) {
				uint32_t u;
				memcpy(&u, &f[k], 4);
				b[k] = (uint16_t)(u >> 16);
			}
			free(f);
			t.dtype = RCKPT_DT_BF16;
			t.data = (const uint8_t *)b;
			*owned = b;
		}
		out->t[out->ntensors++] = t;
	}
}

static size_t out_bytes(const rckpt_ckenc_out_t *o)
{
	size_t n = o->manifest.len;
	uint32_t c;
	for (c = 0; c < o->nchunks; c++)
		n += o->records[c].len;
	return n;
}

/* Any tensors at any step: a tensor removed, one resized, one retyped
 * and the removed one back, each change a base in a layout of its own
 * that decodes to exactly that step's tensors within eps, and the step
 * after each change a delta again, as small as the same step of a run
 * that held those tensors from its start (within 10%). */
static void test_tensors_change(void **state)
{
	/* step i's tensors: 0 all; 1 no fc1.bias; 2 the same; 3 conv2.weight
	 * a row shorter; 4 the same; 5 fc2.weight bf16, fc1.bias back */
	static const struct {
		const char *drop, *shrink, *narrow;
		int base;
	} plan[NSTEPS] = { { NULL, NULL, NULL, 1 },		 { "fc1.bias", NULL, NULL, 1 },
			   { "fc1.bias", NULL, NULL, 0 },	 { "fc1.bias", "conv2.weight", NULL, 1 },
			   { "fc1.bias", "conv2.weight", NULL, 0 }, { NULL, "conv2.weight", "fc2.weight", 1 } };
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e, *ctl = NULL;
	rckpt_ckdec_t d;
	char msg[256];
	int i;

	(void)state;
	NEED_DATA();
	rckpt_ckenc_opts_default(&o);
	o.eps = 0.01;
	o.chunk_params = 50000;
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&d, 0, sizeof(d));
	for (i = 0; i < NSTEPS; i++) {
		rckpt_tset_t p, g;
		void *owned, *gowned;
		rckpt_ckenc_out_t out;
		rckpt_ckenc_stats_t st;
		changed_set(&p, &owned, &params[i].set, plan[i].drop, plan[i].shrink, plan[i].narrow);
		changed_set(&g, &gowned, &grads[i].set, plan[i].drop, plan[i].shrink, NULL);
		assert_int_equal(rckpt_ckenc_keeps_layout(e, &p), !plan[i].base || i == 0);
		memset(&out, 0, sizeof(out));
		assert_int_equal(rckpt_ckenc_step(e, &out, &st, &p, &g, (uint64_t)(25 * (i + 1)), msg, sizeof(msg)), 0);
		assert_int_equal(st.is_base, plan[i].base);
		assert_true(st.accepted && st.quality <= o.eps);
		/* the step's own tensors, and no other (decode_step checks names
		 * and count, lossless bits and the loss) */
		assert_float_equal(decode_step(&d, &out, &p, &g), st.quality, 1e-9);
		if (i < 3 || i == 4) { /* a run alike but for the change at step 3: a base there
					  of the same tensors as before */
			rckpt_tset_t p2, g2;
			void *o2, *og2;
			rckpt_ckenc_out_t c2;
			rckpt_ckenc_stats_t s2;
			const int j = i == 4 ? 2 : i;
			if (i == 0)
				assert_int_equal(rckpt_ckenc_create(&ctl, &o), 0);
			changed_set(&p2, &o2, &params[i].set, plan[j].drop, plan[j].shrink, plan[j].narrow);
			changed_set(&g2, &og2, &grads[i].set, plan[j].drop, plan[j].shrink, NULL);
			if (i == 4) { /* its step 3 */
				rckpt_tset_t p3, g3;
				void *o3, *og3;
				changed_set(&p3, &o3, &params[3].set, plan[2].drop, NULL, NULL);
				changed_set(&g3, &og3, &grads[3].set, plan[2].drop, NULL, NULL);
				rckpt_ckenc_restart(ctl);
				memset(&c2, 0, sizeof(c2));
				assert_int_equal(rckpt_ckenc_step(ctl, &c2, &s2, &p3, &g3, 100, msg, sizeof(msg)), 0);
				assert_true(s2.is_base);
				rckpt_ckenc_out_free(&c2);
				free(p3.t);
				free(g3.t);
			}
			memset(&c2, 0, sizeof(c2));
			assert_int_equal(rckpt_ckenc_step(ctl, &c2, &s2, &p2, &g2, (uint64_t)(25 * (i + 1)), msg, sizeof(msg)), 0);
			if (i == 4) { /* the delta after a change, per raw byte: as small as
					 without the change (within 10%) */
				const double r = (double)st.raw_bytes / (double)out_bytes(&out),
					     r2 = (double)s2.raw_bytes / (double)out_bytes(&c2);
				print_message("after a change %.2fx, without one %.2fx\n", r, r2);
				assert_false(s2.is_base);
				assert_true(r >= 0.9 * r2);
			}
			rckpt_ckenc_out_free(&c2);
			free(p2.t);
			free(g2.t);
		}
		rckpt_ckenc_out_free(&out);
		free(p.t);
		free(g.t);
		free(owned);
		free(gowned);
	}
	rckpt_ckdec_free(&d);
	rckpt_ckenc_destroy(ctl);
	rckpt_ckenc_destroy(e);
}

static void test_fixed_and_errors(void **state)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e;
	rckpt_ckenc_out_t b;
	rckpt_ckenc_stats_t st;
	rckpt_tset_t bad;
	char msg[256];
	float *w;

	(void)state;
	NEED_DATA();
	rckpt_ckenc_opts_default(&o);
	o.mode = RCKPT_CKENC_FIXED;
	o.fixed.bins = 12;
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&b, 0, sizeof(b));
	assert_int_equal(rckpt_ckenc_step(e, &b, &st, &params[0].set, NULL, 1, msg, sizeof(msg)), 0);
	rckpt_ckenc_out_free(&b);
	assert_int_equal(st.config.bins, 12);
	assert_int_equal(st.configs_tried, 0);
	/* gradients of another shape than their tensor's */
	bad = grads[1].set;
	bad.t[0].n--;
	assert_int_equal(rckpt_ckenc_step(e, &b, &st, &params[1].set, &bad, 2, msg, sizeof(msg)), -EINVAL);
	assert_non_null(strstr(msg, "gradients of"));
	bad.t[0].n++;
	/* NaN in a quantized tensor: refused, naming it; nothing appended */
	bad = params[1].set;
	{
		const rckpt_ctensor_t *t = rckpt_tset_find(&params[1].set, "fc1.weight");
		w = (float *)(uintptr_t)t->data;
		w[3] = NAN;
		assert_int_equal(rckpt_ckenc_step(e, &b, &st, &bad, NULL, 2, msg, sizeof(msg)), -EDOM);
		assert_non_null(strstr(msg, "fc1.weight"));
		assert_int_equal(b.nchunks, 0); /* nothing produced */
		w[3] = 0.0f;
	}
	assert_int_equal(rckpt_ckenc_step(e, &b, &st, &params[1].set, NULL, 2, msg, sizeof(msg)), 0);
	assert_int_equal(st.is_base, 0);
	rckpt_ckenc_out_free(&b);
	rckpt_ckenc_destroy(e);
	o.eps = -1;
	assert_int_equal(rckpt_ckenc_create(&e, &o), -EINVAL);
}

/* A "trainer" that judges only fc1.weight, by its relative error. */
static int fc1_judge(void *arg, const rckpt_tset_t *p, const float *const *values, double *loss)
{
	unsigned i;
	(void)arg;
	for (i = 0; i < p->ntensors; i++)
		if (strcmp(p->t[i].name, "fc1.weight") == 0) {
			*loss = rckpt_codec_rel_error((const float *)p->t[i].data, values[i], NULL, p->t[i].n);
			return 0;
		}
	return -ENOENT;
}

static int failing_judge(void *arg, const rckpt_tset_t *p, const float *const *values, double *loss)
{
	(void)arg;
	(void)p;
	(void)values;
	(void)loss;
	return -EIO;
}

/* The callback's verdict binds: a stricter judge gets a less aggressive
 * configuration, and a failing judge fails the step. */
static void test_quality_callback(void **state)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e;
	rckpt_ckenc_out_t out;
	rckpt_ckenc_stats_t plain, judged;
	char msg[256];

	(void)state;
	NEED_DATA();
	rckpt_ckenc_opts_default(&o);
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&out, 0, sizeof(out));
	assert_int_equal(rckpt_ckenc_step(e, &out, &plain, &params[0].set, &grads[0].set, 1, msg, sizeof(msg)), 0);
	rckpt_ckenc_out_free(&out);
	rckpt_ckenc_destroy(e);

	o.quality = fc1_judge;
	o.quality_eps = 2e-3; /* stricter on fc1 than eps is on the model */
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	assert_int_equal(rckpt_ckenc_step(e, &out, &judged, &params[0].set, &grads[0].set, 1, msg, sizeof(msg)), 0);
	assert_true(judged.accepted);
	assert_true(judged.cb_quality <= 2e-3);
	assert_true(judged.config.bins > plain.config.bins ||
		    judged.config.protect_frac > plain.config.protect_frac ||
		    judged.config.prune_frac[RCKPT_LK_LINEAR] < plain.config.prune_frac[RCKPT_LK_LINEAR]);
	assert_true(judged.enc_bytes > plain.enc_bytes);
	rckpt_ckenc_out_free(&out);
	rckpt_ckenc_destroy(e);

	/* a threshold no configuration meets: the least aggressive one, and
	 * the step says it is not accepted */
	o.quality_eps = 1e-5;
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	assert_int_equal(rckpt_ckenc_step(e, &out, &judged, &params[0].set, &grads[0].set, 1, msg, sizeof(msg)), 0);
	assert_false(judged.accepted);
	assert_int_equal(judged.config.bins, 64);
	assert_true(judged.config.protect_frac == 0.01f);
	assert_true(judged.config.prune_frac[RCKPT_LK_LINEAR] == 0.0f);
	rckpt_ckenc_out_free(&out);
	rckpt_ckenc_destroy(e);

	o.quality = failing_judge;
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	assert_int_equal(rckpt_ckenc_step(e, &out, &judged, &params[0].set, &grads[0].set, 1, msg, sizeof(msg)), -EIO);
	assert_non_null(strstr(msg, "callback"));
	assert_int_equal(out.nchunks, 0);
	rckpt_ckenc_destroy(e);
}

/* A step's records, collected for the decoder. */
typedef struct collect {
	rckpt_buf_t rec[64];
	uint32_t n;
} collect_t;

static int col_begin(void *arg, uint32_t nchunks)
{
	(void)arg;
	return nchunks <= 64 ? 0 : -E2BIG;
}

static int col_record(void *arg, uint32_t chunk, rckpt_buf_t *rec, rckpt_buf_t *head)
{
	collect_t *x = arg;
	(void)head;
	x->n = chunk + 1;
	return rckpt_buf_append(&x->rec[chunk], rec->p, rec->len) ? -ENOMEM : 0;
}

static void collect_decode(rckpt_ckdec_t *d, collect_t *x, rckpt_buf_t *man)
{
	const uint8_t *recs[64];
	size_t lens[64];
	uint32_t c;
	for (c = 0; c < x->n; c++) {
		recs[c] = x->rec[c].p;
		lens[c] = x->rec[c].len;
	}
	assert_int_equal(rckpt_ckdec_step(d, man->p, man->len, recs, lens), 0);
	for (c = 0; c < x->n; c++)
		rckpt_buf_free(&x->rec[c]);
	rckpt_buf_free(man);
	x->n = 0;
}

/* A prioritized partial step through the compute backend's change
 * distance (ckenc_cpu.c's block_dist, the CPU twin of the device's
 * rckpt_gpu_block_dist path): of 64 blocks of one tensor, the 4 that moved
 * far since the full step are the 4 stored, and only their values change
 * in the decoded step. */
static void test_partial_priority(void **state)
{
	enum { BLOCK = 1024, NB = 64, N = BLOCK * NB };
	static const unsigned far[4] = { 3, 17, 40, 63 };
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e;
	rckpt_ckdec_t d;
	rckpt_ckenc_stats_t st;
	rckpt_ctensor_t t;
	rckpt_tset_t set;
	collect_t col;
	rckpt_buf_t man;
	const rckpt_ckenc_partial_t pp = { 4.0 / NB, RCKPT_CKENC_PRIORITY, 0 };
	const rckpt_ckenc_sink_t sink = { col_begin, col_record, &col };
	float *w = malloc(4 * N), *before = malloc(4 * N), *after = malloc(4 * N);
	uint64_t x = 88172645463325252ull;
	unsigned i, b, k;
	char msg[256];

	(void)state;
	assert_true(w && before && after);
	for (i = 0; i < N; i++) { /* a spread of values, xorshift */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		w[i] = (float)((double)(x >> 11) * 0x1.0p-53 - 0.5) * 0.1f;
	}
	memset(&t, 0, sizeof(t));
	t.name = "fc.weight";
	t.dtype = RCKPT_DT_F32;
	t.ndim = 2;
	t.shape[0] = NB;
	t.shape[1] = BLOCK;
	t.n = N;
	t.data = (const uint8_t *)w;
	set.t = &t;
	set.ntensors = 1;
	rckpt_ckenc_opts_default(&o);
	o.partial_block = BLOCK;
	o.mode = RCKPT_CKENC_FIXED; /* 48 bins, nothing pruned: well within eps */
	o.fixed.bins = 48;
	memset(o.fixed.prune_frac, 0, sizeof(o.fixed.prune_frac));
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&d, 0, sizeof(d));
	memset(&col, 0, sizeof(col));
	memset(&man, 0, sizeof(man));
	assert_int_equal(rckpt_ckenc_step_stream(e, &sink, &man, &st, &set, NULL, 1, msg, sizeof(msg)), 0);
	collect_decode(&d, &col, &man);
	assert_int_equal(rckpt_ckdec_tensor_f32(&d, 0, before), 0);
	/* every block moves a little; four move far (by 2% of their values,
	 * within the codebook's reach) */
	for (i = 0; i < N; i += 7)
		w[i] += 1e-6f;
	for (k = 0; k < 4; k++)
		for (i = 0; i < BLOCK; i++)
			w[far[k] * BLOCK + i] *= 0.98f;
	if (rckpt_ckenc_step_partial(e, &sink, &man, &st, &set, NULL, 2, &pp, msg, sizeof(msg)))
		fail_msg("partial step: %s (full step quality %g)", msg, st.quality);
	assert_int_equal(st.blocks, NB);
	assert_int_equal(st.blocks_saved, 4);
	collect_decode(&d, &col, &man);
	assert_int_equal(rckpt_ckdec_tensor_f32(&d, 0, after), 0);
	for (b = 0; b < NB; b++) {
		int is_far = 0, moved = memcmp(before + b * BLOCK, after + b * BLOCK, 4 * BLOCK) != 0;
		for (k = 0; k < 4; k++)
			is_far |= far[k] == b;
		if (is_far != moved)
			fail_msg("block %u: %s", b, is_far ? "moved far, not stored" : "stored, did not move far");
	}
	rckpt_ckdec_free(&d);
	rckpt_ckenc_destroy(e);
	free(w), free(before), free(after);
}

/* A step of almost nothing (a 2048 x 2048 tensor of zeros: its levels
 * run-length code to a few bytes) declares far more than its bytes can
 * hold: the decoder refuses it before allocating (-E2BIG) unless
 * RCKPT_DECODE_RATIO_MAX allows it; then it decodes, all zeros. */
static void test_decode_ratio_bound(void **state)
{
	const uint64_t rows = 2048, cols = 2048;
	float *w = calloc(rows * cols, sizeof(float));
	rckpt_ckenc_t *e = NULL;
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_out_t out;
	rckpt_ckenc_stats_t st;
	rckpt_ckdec_t d = { 0 };
	rckpt_ctensor_t t = { "w", RCKPT_DT_F32, 2, { 2048, 2048 }, 2048 * 2048, NULL, 0, NULL, 0 };
	rckpt_tset_t set = { 1, &t };
	const uint8_t *recs[64];
	size_t lens[64], stored;
	char msg[256];
	uint32_t c;

	(void)state;
	assert_non_null(w);
	t.data = (const uint8_t *)w;
	w[5] = 1.0f; /* not all alike */
	rckpt_ckenc_opts_default(&o);
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&out, 0, sizeof(out));
	assert_int_equal(rckpt_ckenc_step(e, &out, &st, &set, NULL, 1, msg, sizeof(msg)), 0);
	stored = out.manifest.len;
	for (c = 0; c < out.nchunks; c++) {
		recs[c] = out.records[c].p;
		lens[c] = out.records[c].len;
		stored += lens[c];
	}
	assert_true(4 * rows * cols > (uint64_t)RCKPT_DECODE_RATIO_MAX * stored);
	unsetenv("RCKPT_DECODE_RATIO_MAX");
	assert_int_equal(rckpt_ckdec_step(&d, out.manifest.p, out.manifest.len, recs, lens), -E2BIG);
	assert_null(d.chunk); /* nothing decoded */
	setenv("RCKPT_DECODE_RATIO_MAX", "1e9", 1);
	assert_int_equal(rckpt_ckdec_step(&d, out.manifest.p, out.manifest.len, recs, lens), 0);
	unsetenv("RCKPT_DECODE_RATIO_MAX");
	{
		float *back = malloc(rows * cols * sizeof(float));
		assert_non_null(back);
		assert_int_equal(rckpt_ckdec_tensor_f32(&d, 0, back), 0);
		assert_true(back[0] == 0.0f && back[rows * cols - 1] == 0.0f);
		free(back);
	}
	rckpt_ckdec_free(&d);
	rckpt_ckenc_out_free(&out);
	rckpt_ckenc_destroy(e);
	free(w);
}

/* A step decoded in parts (rckpt_ckdec_inc_*, a restore's chunks as they
 * arrive) is the step decoded whole: a chunk whose record declares more
 * than the bytes given so far can hold (a tensor of zeros, given first)
 * waits for the end, where the whole step's bound lets it through; a step
 * over the bound is refused at the end with nothing decoded before. */
static void test_decode_in_parts(void **state)
{
	enum { Z = 2048 * 2048, R = 1 << 20 };
	float *z = calloc(Z, sizeof(float)), *r = malloc(R * sizeof(float)), *a = malloc(Z * 4), *b = malloc(Z * 4);
	rckpt_ctensor_t t[2] = { { "a.zeros", RCKPT_DT_F32, 2, { 2048, 2048 }, Z, NULL, 0, NULL, 0 },
				 { "b.random", RCKPT_DT_F32, 1, { R }, R, NULL, 0, NULL, 0 } };
	rckpt_tset_t set = { 2, t };
	rckpt_ckenc_t *e = NULL;
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_out_t out;
	rckpt_ckenc_stats_t st;
	rckpt_ckdec_t whole = { 0 }, parts = { 0 };
	rckpt_ckdec_inc_t x;
	const uint8_t *recs[2];
	size_t lens[2];
	uint64_t v = 88172645463325252ull;
	unsigned i, k;
	char msg[256];

	(void)state;
	assert_true(z && r && a && b);
	z[5] = 1.0f;
	for (i = 0; i < R; i++) {
		v ^= v << 13, v ^= v >> 7, v ^= v << 17;
		r[i] = (float)((double)(v >> 11) * 0x1.0p-53 - 0.5);
	}
	t[0].data = (const uint8_t *)z;
	t[1].data = (const uint8_t *)r;
	rckpt_ckenc_opts_default(&o);
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&out, 0, sizeof(out));
	if (rckpt_ckenc_step(e, &out, &st, &set, NULL, 1, msg, sizeof(msg)))
		fail_msg("encode: %s", msg);
	assert_int_equal(out.nchunks, 2); /* z alone in chunk 0 */
	for (k = 0; k < 2; k++) {
		recs[k] = out.records[k].p;
		lens[k] = out.records[k].len;
	}
	assert_true(4.0 * Z > (double)RCKPT_DECODE_RATIO_MAX * (double)(out.manifest.len + lens[0]));
	unsetenv("RCKPT_DECODE_RATIO_MAX");
	assert_int_equal(rckpt_ckdec_step(&whole, out.manifest.p, out.manifest.len, recs, lens), 0);

	assert_int_equal(rckpt_ckdec_inc_begin(&x, &parts, out.manifest.p, out.manifest.len), 0);
	assert_int_equal(rckpt_ckdec_inc_chunk(&x, 0, recs[0], lens[0]), 0);
	assert_int_equal(x.rc[0], 1); /* waits: not decoded yet */
	assert_null(x.chunk[0].seg);
	assert_int_equal(rckpt_ckdec_inc_chunk(&x, 1, recs[1], lens[1]), 0);
	assert_int_equal(x.rc[1], 0); /* decoded as it came */
	assert_int_equal(rckpt_ckdec_inc_chunk(&x, 2, recs[1], lens[1]), -EINVAL);
	assert_int_equal(rckpt_ckdec_inc_end(&x, &parts, recs, lens), 0);
	for (k = 0; k < 2; k++) {
		assert_int_equal(rckpt_ckdec_tensor_f32(&whole, k, a), 0);
		assert_int_equal(rckpt_ckdec_tensor_f32(&parts, k, b), 0);
		assert_memory_equal(a, b, 4 * (size_t)t[k].n);
	}

	/* over the bound: the same -E2BIG as whole, nothing decoded early */
	setenv("RCKPT_DECODE_RATIO_MAX", "2", 1);
	assert_int_equal(rckpt_ckdec_step(&whole, out.manifest.p, out.manifest.len, recs, lens), -E2BIG);
	assert_int_equal(rckpt_ckdec_inc_begin(&x, &parts, out.manifest.p, out.manifest.len), 0);
	assert_int_equal(rckpt_ckdec_inc_chunk(&x, 1, recs[1], lens[1]), 0);
	assert_int_equal(rckpt_ckdec_inc_chunk(&x, 0, recs[0], lens[0]), 0);
	assert_null(x.chunk[0].seg);
	assert_null(x.chunk[1].seg);
	assert_int_equal(rckpt_ckdec_inc_end(&x, &parts, recs, lens), -E2BIG);
	unsetenv("RCKPT_DECODE_RATIO_MAX");
	rckpt_ckdec_free(&whole);
	rckpt_ckdec_free(&parts);
	rckpt_ckenc_out_free(&out);
	rckpt_ckenc_destroy(e);
	free(z), free(r), free(a), free(b);
}

/* The decoder's chunks at once (rckpt_ckdec_t.threads) decode to the same
 * values as one at a time, and a step with two bad chunks fails with the
 * error of the first, keeping the last good step, either way. */
static void test_decode_threads(void **state)
{
	enum { STEPS = 3 };
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e = NULL;
	rckpt_ckdec_t d1, d4;
	char msg[256];
	int i;

	(void)state;
	NEED_DATA();
	rckpt_ckenc_opts_default(&o);
	o.chunk_params = 50000; /* several chunks */
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&d1, 0, sizeof(d1));
	memset(&d4, 0, sizeof(d4));
	d1.threads = 1;
	d4.threads = 4;
	for (i = 0; i < STEPS; i++) {
		rckpt_ckenc_out_t out;
		rckpt_ckenc_stats_t st;
		const uint8_t *recs[64];
		size_t lens[64];
		uint32_t c, t;
		memset(&out, 0, sizeof(out));
		assert_int_equal(rckpt_ckenc_step(e, &out, &st, &params[i].set, &grads[i].set, (uint64_t)(i + 1),
						  msg, sizeof(msg)),
				 0);
		assert_true(out.nchunks >= 4 && out.nchunks <= 64);
		for (c = 0; c < out.nchunks; c++) {
			recs[c] = out.records[c].p;
			lens[c] = out.records[c].len;
		}
		if (i == STEPS - 1) {
			/* chunk 1 cut short, chunk 3 flipped: chunk 1's error */
			lens[1]--;
			out.records[3].p[out.records[3].len / 2] ^= 0x10;
			assert_int_equal(rckpt_ckdec_step(&d1, out.manifest.p, out.manifest.len, recs, lens), -EBADMSG);
			assert_int_equal(rckpt_ckdec_step(&d4, out.manifest.p, out.manifest.len, recs, lens), -EBADMSG);
			/* the other way round: chunk 1 flipped, chunk 3 cut short */
			lens[1]++;
			out.records[1].p[out.records[1].len / 2] ^= 0x10;
			out.records[3].p[out.records[3].len / 2] ^= 0x10;
			lens[3]--;
			assert_int_equal(rckpt_ckdec_step(&d1, out.manifest.p, out.manifest.len, recs, lens),
					 RCKPT_FMT_ECHECKSUM);
			assert_int_equal(rckpt_ckdec_step(&d4, out.manifest.p, out.manifest.len, recs, lens),
					 RCKPT_FMT_ECHECKSUM);
			assert_int_equal(d1.mf.step, (uint64_t)(STEPS - 1)); /* the last good step stays */
			assert_int_equal(d4.mf.step, (uint64_t)(STEPS - 1));
			assert_int_equal(d4.threads, 4);
		} else {
			assert_int_equal(rckpt_ckdec_step(&d1, out.manifest.p, out.manifest.len, recs, lens), 0);
			assert_int_equal(rckpt_ckdec_step(&d4, out.manifest.p, out.manifest.len, recs, lens), 0);
			assert_int_equal(d4.threads, 4);
			for (t = 0; t < d1.mf.ntensors; t++) {
				uint64_t n = 1;
				unsigned k;
				for (k = 0; k < d1.mf.t[t].ndim; k++)
					n *= d1.mf.t[t].shape[k];
				float *a = malloc(4 * (n ? n : 1)), *b = malloc(4 * (n ? n : 1));
				assert_true(a && b);
				assert_int_equal(rckpt_ckdec_tensor_f32(&d1, t, a), 0);
				assert_int_equal(rckpt_ckdec_tensor_f32(&d4, t, b), 0);
				assert_memory_equal(a, b, 4 * n);
				free(a);
				free(b);
			}
		}
		rckpt_ckenc_out_free(&out);
	}
	rckpt_ckdec_free(&d1);
	rckpt_ckdec_free(&d4);
	assert_int_equal(d4.threads, 4); /* kept by free */
	rckpt_ckenc_destroy(e);
}

/* alloc_one_quantizer with uniform bins: no tensor gets k-means, in the
 * search or the allocation: every quantized segment's levels are evenly
 * spaced. */
static void test_uniform_only(void **state)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e = NULL;
	rckpt_ckdec_t d;
	char msg[256];
	unsigned quantized = 0;
	int i;

	(void)state;
	NEED_DATA();
	rckpt_ckenc_opts_default(&o);
	o.quantizer = RCKPT_QUANTIZER_UNIFORM;
	o.alloc_one_quantizer = 1;
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&d, 0, sizeof(d));
	for (i = 0; i < 3; i++) {
		rckpt_ckenc_out_t out;
		rckpt_ckenc_stats_t st;
		const uint8_t *recs[64];
		size_t lens[64];
		uint32_t c, k;
		unsigned j;
		memset(&out, 0, sizeof(out));
		assert_int_equal(rckpt_ckenc_step(e, &out, &st, &params[i].set, &grads[i].set, (uint64_t)(i + 1), msg,
						  sizeof(msg)),
				 0);
		assert_true(st.accepted);
		assert_true(out.nchunks <= 64);
		for (c = 0; c < out.nchunks; c++) {
			recs[c] = out.records[c].p;
			lens[c] = out.records[c].len;
		}
		assert_int_equal(rckpt_ckdec_step(&d, out.manifest.p, out.manifest.len, recs, lens), 0);
		for (c = 0; c < d.mf.nchunks; c++)
			for (k = 0; k < d.chunk[c].nseg; k++) {
				const rckpt_seg_t *sg = &d.chunk[c].seg[k];
				double step;
				if (sg->encoding != RCKPT_SEG_QUANTIZED || sg->nbins < 3)
					continue;
				quantized++;
				step = (double)sg->centroids[1] - sg->centroids[0];
				for (j = 2; j < sg->nbins; j++)
					assert_true(fabs(((double)sg->centroids[j] - sg->centroids[j - 1]) - step) <=
						    1e-3 * fabs(step));
			}
		rckpt_ckenc_out_free(&out);
	}
	assert_true(quantized > 0);
	rckpt_ckdec_free(&d);
	rckpt_ckenc_destroy(e);
}

/* A trainer's judge that refuses the next *arg configurations it is
 * shown, then passes every one. */
static int refusing_judge(void *arg, const rckpt_tset_t *p, const float *const *values, double *loss)
{
	unsigned *refuse = arg;
	(void)p;
	(void)values;
	*loss = *refuse ? 1.0 : 0.0;
	*refuse -= *refuse > 0;
	return 0;
}

/* Between refreshes of the per-tensor allocation, a step whose search
 * chose the last step's point judges the last step's allocation first and
 * keeps it when it passes; when it fails (here the trainer's judge refuses
 * it once), a new allocation is made from the tables and the step still
 * ends within eps. */
static void test_alloc_reuse(void **state)
{
	enum { N = 65536, NT = 3, STEPS = 7 };
	static const char *names[NT] = { "a.weight", "b.weight", "c.weight" };
	float *w[NT], *g[NT];
	rckpt_ctensor_t t[NT], tg[NT];
	rckpt_tset_t set = { NT, t }, gset = { NT, tg };
	rckpt_ckenc_t *e = NULL;
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_stats_t st;
	unsigned k, s, kept = 0, refuse = 0;
	size_t i;
	char msg[256];

	(void)state;
	rckpt_ckenc_opts_default(&o);
	assert_true(o.alloc);
	o.quality = refusing_judge;
	o.quality_arg = &refuse;
	o.quality_eps = 0.5;
	for (k = 0; k < NT; k++) {
		w[k] = malloc(N * sizeof(float));
		g[k] = malloc(N * sizeof(float));
		assert_true(w[k] && g[k]);
		for (i = 0; i < N; i++) {
			w[k][i] = (0.02f + 0.02f * (float)k) * nrandf();
			g[k][i] = 0.5f + fabsf(nrandf());
		}
		t[k] = (rckpt_ctensor_t){ names[k], RCKPT_DT_F32, 2, { 256, 256 }, N, (const uint8_t *)w[k], 0, NULL, 0 };
		tg[k] = (rckpt_ctensor_t){ names[k], RCKPT_DT_F32, 2, { 256, 256 }, N, (const uint8_t *)g[k], 0, NULL, 0 };
	}
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	for (s = 0; s < STEPS; s++) {
		rckpt_ckenc_out_t out;
		memset(&out, 0, sizeof(out));
		for (k = 0; k < NT; k++)
			for (i = 0; i < N; i++)
				w[k][i] += 0.0005f * nrandf();
		refuse = s == STEPS - 1; /* the last step's first judgement */
		assert_int_equal(rckpt_ckenc_step(e, &out, &st, &set, &gset, s + 1, msg, sizeof(msg)), 0);
		assert_true(st.accepted);
		assert_true(st.quality <= o.eps);
		assert_true(st.allocs_kept <= st.allocs_reused);
		if (s < 2)
			assert_int_equal(st.allocs_reused, 0); /* the first two steps search it all */
		if (s == STEPS - 1) {
			assert_int_equal(refuse, 0);
			assert_int_equal(st.allocs_reused, 1);
			assert_int_equal(st.allocs_kept, 0);
		} else {
			kept += st.allocs_kept;
		}
		rckpt_ckenc_out_free(&out);
	}
	assert_true(kept >= 3); /* the steady steps kept theirs */
	rckpt_ckenc_destroy(e);
	for (k = 0; k < NT; k++) {
		free(w[k]);
		free(g[k]);
	}
}

/* The search's memo (ckenc_search.c): a configuration evaluated through it
 * gives the same loss and bytes, bit for bit, as evaluated afresh, at every
 * point of the space, with either quantizer, with and without drift, with a
 * last step's samples, and in an order that meets each tensor
 * configuration many times; over tensors of every kind its key treats
 * apart (embedding: its own bins, never pruned; a second moment: never
 * pruned; one without gradients: the metric is moot). And it does keep
 * them: one entry per distinct tensor configuration. */
static void test_search_memo(void **state)
{
	enum { NT = 4, N = 2500 };
	static const unsigned kinds[NT] = { RCKPT_LK_LINEAR, RCKPT_LK_EMBEDDING, RCKPT_LK_MOMENT2,
					    RCKPT_LK_CONV };
	const unsigned *ax = ckenc_axis_len;
	float *w[NT], *g[NT], *pw[NT];
	rckpt_tensor_prep_t prep[NT];
	sample_t smp[NT];
	struct prev_sample psmp[NT];
	rckpt_codebook_cache_t *cache = calloc(2 * NT, sizeof(*cache));
	evmemo_t *memo = calloc(NT, sizeof(*memo));
	rckpt_ckenc_opts_t o;
	evalctx_t x1, x2;
	unsigned t, pass, evals = 0, i, npoints = ax[0] * ax[1] * ax[2] * ax[3] * ax[4];
	uint64_t bad;

	(void)state;
	assert_non_null(cache);
	assert_non_null(memo);
	rckpt_ckenc_opts_default(&o);
	o.threads = 1;
	for (t = 0; t < NT; t++) {
		w[t] = malloc(N * sizeof(float));
		g[t] = t == 3 ? NULL : malloc(N * sizeof(float));
		pw[t] = malloc(N * sizeof(float));
		assert_true(w[t] && pw[t] && (t == 3 || g[t]));
		for (i = 0; i < N; i++) {
			float v = 0.05f * nrandf();
			w[t][i] = kinds[t] == RCKPT_LK_MOMENT2 ? v * v : v;
			pw[t][i] = w[t][i] + 0.002f * nrandf();
			if (g[t])
				g[t][i] = fabsf(nrandf());
		}
		assert_int_equal(rckpt_codec_prepare(&prep[t], &bad, w[t], RCKPT_DT_F32, N, g[t], kinds[t]), 0);
		smp[t] = (sample_t){ .w = w[t], .g = g[t], .n = N, .full = N, .stride = 1 };
		ckenc_sample_den(&smp[t]);
		psmp[t] = (struct prev_sample){ .w = pw[t], .g = g[t], .n = N };
	}
	x1 = (evalctx_t){ .o = &o, .prep = prep, .smp = smp, .nprep = NT, .psmp = psmp, .cache = cache,
			  .memo = memo };
	x2 = x1;
	x2.cache = cache + NT;
	x2.memo = NULL;
	/* k-means, then uniform bins, each twice: the second time every
	 * evaluation is the memo's; points in a stride that scatters them */
	for (pass = 0; pass < 4; pass++) {
		o.quantizer = pass < 2 ? RCKPT_QUANTIZER_KMEANS : RCKPT_QUANTIZER_UNIFORM;
		for (i = 0; i < npoints; i++) {
			unsigned k = (i * 97u) % npoints;
			cpoint_t c = { k % ax[0], k / ax[0] % ax[1], k / (ax[0] * ax[1]) % ax[2],
				       k / (ax[0] * ax[1] * ax[2]) % ax[3], k / (ax[0] * ax[1] * ax[2] * ax[3]) };
			double l1, b1, l2, b2;
			x1.drift = x2.drift = (i + pass) % 3 == 0;
			assert_int_equal(ckenc_evaluate(&x1, c, &l1, &b1), 0);
			assert_int_equal(ckenc_evaluate(&x2, c, &l2, &b2), 0);
			assert_true(l1 == l2 && b1 == b2);
			evals++;
		}
	}
	assert_int_equal(npoints, 972);
	/* what each kind's evaluation reads, per quantizer: linear bins x
	 * prune x metric x protect; embedding bins x metric x protect; a
	 * second moment bins x metric x protect; no gradients bins x prune x
	 * protect */
	assert_int_equal(memo[0].n, 2 * ax[0] * ax[2] * 2 * ax[4]);
	assert_int_equal(memo[1].n, 2 * ax[1] * 2 * ax[4]);
	assert_int_equal(memo[2].n, 2 * ax[0] * 2 * ax[4]);
	assert_int_equal(memo[3].n, 2 * ax[0] * ax[2] * ax[4]);
	assert_int_equal(evals, 4 * npoints);
	for (t = 0; t < NT; t++) {
		rckpt_codec_prep_free(&prep[t]);
		free(w[t]);
		free(g[t]);
		free(pw[t]);
	}
	ckenc_evmemo_free(memo, NT);
	free(cache);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_ratio_bound),
		cmocka_unit_test(test_decode_in_parts),
		cmocka_unit_test(test_search_chain),
		cmocka_unit_test(test_resume_walks_back),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_bf16_norms_same_choices),
		cmocka_unit_test(test_threads_same_bytes),
		cmocka_unit_test(test_fixed_and_errors),
		cmocka_unit_test(test_tensors_change),
		cmocka_unit_test(test_quality_callback),
		cmocka_unit_test(test_partial_priority),
		cmocka_unit_test(test_search_memo),
		cmocka_unit_test(test_alloc_reuse),
		cmocka_unit_test(test_decode_threads),
		cmocka_unit_test(test_uniform_only),
	};
	return test_exit(cmocka_run_group_tests(tests, setup, teardown));
}
