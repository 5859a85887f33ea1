/*
 * test_record.c — chunk records: round trips of bases and delta chains,
 * determinism, corruption, limits, sparse partial records, the golden
 * vectors of version 1, and the chunk digest. Manifests: test_manifest.c.
 */
#include <errno.h>
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

#include "rckpt_crc32c.h"
#include "rckpt_estream.h"
#include "rckpt_manifest.h" /* the chunk digest */
#include "rckpt_huff.h"
#include "rckpt_record.h"

#define TEST_RNG_SEED 0x1234567887654321ull
#include "test_rng.h"

static const rckpt_istream_opts_t opts = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };

/* A quantized segment with nb bins: levels from a bell, some protected. */
static void make_quant(rckpt_seg_t *s, uint32_t tensor, uint64_t first, uint64_t n, unsigned nb,
		       const rckpt_seg_t *like)
{
	uint64_t i;
	unsigned j;

	memset(s, 0, sizeof(*s));
	s->tensor = tensor;
	s->first = first;
	s->n = n;
	s->encoding = RCKPT_SEG_QUANTIZED;
	s->dtype = RCKPT_DT_F32;
	s->nbins = nb;
	for (j = 0; j < nb; j++)
		s->centroids[j] = -1.0f + 2.0f * (float)j / (float)nb;
	s->idx = malloc(n ? n : 1);
	s->prot = malloc(sizeof(uint16_t) * (n ? n : 1));
	for (i = 0; i < n; i++) {
		unsigned v;
		if (like && rnd() % 10) /* mostly where it was, clamped into range */
			v = like->idx[i] == like->nbins + 1 ? nb + 1 : like->idx[i] % (nb + 1);
		else
			v = rnd() % 50 == 0 ? nb + 1 : (rnd() % (nb + 1) + rnd() % (nb + 1)) / 2;
		s->idx[i] = (uint8_t)v;
		if (v == nb + 1)
			s->prot[s->nprot++] = (uint16_t)rnd();
	}
}

static void make_lossless(rckpt_seg_t *s, uint32_t tensor, uint64_t n, unsigned dtype)
{
	uint64_t i;
	memset(s, 0, sizeof(*s));
	s->tensor = tensor;
	s->n = n;
	s->encoding = RCKPT_SEG_LOSSLESS;
	s->dtype = (uint8_t)dtype;
	s->raw = malloc(n * rckpt_dtype_size(dtype) + 1);
	for (i = 0; i < n * rckpt_dtype_size(dtype); i++)
		s->raw[i] = (uint8_t)(i % 7 == 0 ? rnd() : i);
}

static void assert_same(const rckpt_record_t *a, const rckpt_record_t *b)
{
	uint32_t i;
	assert_int_equal(a->step, b->step);
	assert_int_equal(a->nseg, b->nseg);
	for (i = 0; i < a->nseg; i++) {
		const rckpt_seg_t *x = &a->seg[i], *y = &b->seg[i];
		assert_int_equal(x->tensor, y->tensor);
		assert_int_equal(x->first, y->first);
		assert_int_equal(x->n, y->n);
		assert_int_equal(x->encoding, y->encoding);
		assert_int_equal(x->dtype, y->dtype);
		if (x->encoding == RCKPT_SEG_LOSSLESS) {
			if (x->n)
				assert_memory_equal(x->raw, y->raw, x->n * rckpt_dtype_size(x->dtype));
			continue;
		}
		assert_int_equal(x->nbins, y->nbins);
		assert_memory_equal(x->centroids, y->centroids, sizeof(float) * x->nbins);
		assert_int_equal(x->nprot, y->nprot);
		if (x->nprot)
			assert_memory_equal(x->prot, y->prot, 2 * x->nprot);
		if (x->n)
			assert_memory_equal(x->idx, y->idx, x->n);
	}
}

static void build_base(rckpt_record_t *rec, uint64_t step)
{
	rec->kind = RCKPT_REC_BASE;
	rec->step = step;
	rec->parent = RCKPT_NO_PARENT;
	rec->nseg = 6;
	rec->seg = calloc(6, sizeof(rckpt_seg_t));
	make_quant(&rec->seg[0], 0, 0, 100003, 12, NULL);
	make_quant(&rec->seg[1], 0, 100003, 1, 4, NULL);
	make_quant(&rec->seg[2], 1, 0, 0, 6, NULL);
	make_lossless(&rec->seg[3], 2, 769, RCKPT_DT_F32);
	make_lossless(&rec->seg[4], 3, 33, RCKPT_DT_BF16);
	make_quant(&rec->seg[5], 4, 0, 4099, 32, NULL);
	rec->seg[5].dtype = RCKPT_DT_F16;
}

/* The next step: same layout, levels mostly unchanged, bins changed. */
static void build_next(rckpt_record_t *rec, const rckpt_record_t *prev, uint64_t step, unsigned nb0)
{
	uint32_t i;
	rec->kind = RCKPT_REC_DELTA;
	rec->step = step;
	rec->parent = prev->step;
	rec->nseg = prev->nseg;
	rec->seg = calloc(prev->nseg, sizeof(rckpt_seg_t));
	for (i = 0; i < prev->nseg; i++) {
		const rckpt_seg_t *p = &prev->seg[i];
		if (p->encoding == RCKPT_SEG_LOSSLESS) {
			make_lossless(&rec->seg[i], p->tensor, p->n, p->dtype);
		} else {
			make_quant(&rec->seg[i], p->tensor, p->first, p->n, i == 0 ? nb0 : p->nbins, p);
			rec->seg[i].dtype = p->dtype;
		}
	}
}

/* A decoded record's own copy. */
static void copy_record(rckpt_record_t *d, const rckpt_record_t *r)
{
	uint32_t i;
	*d = *r;
	d->seg = calloc(r->nseg ? r->nseg : 1, sizeof(rckpt_seg_t));
	assert_non_null(d->seg);
	for (i = 0; i < r->nseg; i++) {
		const rckpt_seg_t *s = &r->seg[i];
		rckpt_seg_t *t = &d->seg[i];
		const size_t k = s->n * rckpt_dtype_size(s->dtype);
		*t = *s;
		t->prot = s->prot ? malloc(2 * s->nprot + 1) : NULL;
		t->idx = s->idx ? malloc(s->n + 1) : NULL;
		t->raw = s->raw ? malloc(k + 1) : NULL;
		if (s->prot)
			memcpy(t->prot, s->prot, 2 * s->nprot);
		if (s->idx)
			memcpy(t->idx, s->idx, s->n);
		if (s->raw)
			memcpy(t->raw, s->raw, k);
	}
}

/* src decoded on parent into *out (as rckpt_record_decode) and also in the
 * memory of a copy of the parent (rckpt_record_decode_onto): the same
 * record, the copy's lossless values taken. */
static int decode_both(rckpt_record_t *out, const uint8_t *src, size_t len, const rckpt_record_t *parent)
{
	rckpt_record_t cp, on;
	uint32_t i;
	int rc = rckpt_record_decode(out, src, len, parent, NULL);
	if (parent == NULL)
		return rc;
	copy_record(&cp, parent);
	assert_int_equal(rckpt_record_decode_onto(&on, src, len, &cp, NULL), rc);
	if (rc == 0) {
		assert_same(&on, out);
		for (i = 0; i < cp.nseg; i++)
			assert_true(cp.seg[i].raw == NULL || out->seg[i].encoding != RCKPT_SEG_LOSSLESS);
		rckpt_record_free(&on);
	}
	rckpt_record_free(&cp);
	return rc;
}

static void encode(rckpt_buf_t *b, const rckpt_record_t *rec, const rckpt_record_t *parent)
{
	b->len = 0;
	assert_int_equal(rckpt_record_encode(b, rec, parent, &opts), 0);
}

static void test_base_round_trip(void **state)
{
	rckpt_record_t rec, dec;
	rckpt_buf_t b = RCKPT_BUF_INIT, b2 = RCKPT_BUF_INIT;
	unsigned kind;
	uint64_t step, parent;

	(void)state;
	build_base(&rec, 7);
	encode(&b, &rec, NULL);
	encode(&b2, &rec, NULL);
	assert_int_equal(b.len, b2.len); /* deterministic */
	assert_memory_equal(b.p, b2.p, b.len);
	assert_int_equal(rckpt_record_decode(&dec, b.p, b.len, NULL, NULL), 0);
	assert_same(&rec, &dec);
	assert_int_equal(dec.kind, RCKPT_REC_BASE);
	assert_int_equal(dec.parent, RCKPT_NO_PARENT);
	assert_int_equal(rckpt_record_peek(&kind, &step, &parent, b.p, b.len), 0);
	assert_int_equal(kind, RCKPT_REC_BASE);
	assert_int_equal(step, 7);
	rckpt_record_free(&dec);
	rckpt_record_free(&rec);
	rckpt_buf_free(&b);
	rckpt_buf_free(&b2);
}

/* Ten steps, the bin count of one segment changing along the way: folding
 * the chain from its base gives every step's levels bit for bit. */
static void test_delta_chain(void **state)
{
	static const unsigned bins[] = { 12, 12, 16, 16, 8, 8, 8, 32, 4, 12 };
	rckpt_record_t orig[10], dec[10], scratch;
	rckpt_buf_t enc[10];
	size_t total_delta = 0;
	int s;

	(void)state;
	build_base(&orig[0], 100);
	for (s = 1; s < 10; s++)
		build_next(&orig[s], &orig[s - 1], 100 + (uint64_t)s * 10, bins[s]);
	for (s = 0; s < 10; s++) {
		enc[s] = (rckpt_buf_t)RCKPT_BUF_INIT;
		/* each delta is taken against the decoded parent, as a writer does */
		encode(&enc[s], &orig[s], s ? &orig[s - 1] : NULL);
		if (s)
			total_delta += enc[s].len;
	}
	assert_int_equal(rckpt_record_decode(&dec[0], enc[0].p, enc[0].len, NULL, NULL), 0);
	for (s = 1; s < 10; s++) {
		assert_int_equal(decode_both(&dec[s], enc[s].p, enc[s].len, &dec[s - 1]), 0);
		assert_int_equal(dec[s].kind, RCKPT_REC_DELTA);
		assert_same(&orig[s], &dec[s]);
	}
	/* mostly-unchanged levels: a delta is much smaller than the base */
	assert_true(total_delta / 9 < enc[0].len);
	/* wrong parent: another step, or none */
	assert_int_equal(rckpt_record_decode(&scratch, enc[3].p, enc[3].len, &dec[1], NULL), -ESTALE);
	assert_int_equal(rckpt_record_decode(&scratch, enc[3].p, enc[3].len, NULL, NULL), -EINVAL);
	assert_null(scratch.seg);
	for (s = 0; s < 10; s++) {
		rckpt_record_free(&orig[s]);
		rckpt_record_free(&dec[s]);
		rckpt_buf_free(&enc[s]);
	}
}

/* Any flipped byte is caught (by the checksum, or a header check before
 * it), and so is every truncation. */
static void test_corruption(void **state)
{
	rckpt_record_t rec, dec;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	size_t k;

	(void)state;
	build_base(&rec, 1);
	rckpt_record_free(&rec);
	rec.kind = RCKPT_REC_BASE;
	rec.step = 1;
	rec.parent = RCKPT_NO_PARENT;
	rec.nseg = 2;
	rec.seg = calloc(2, sizeof(rckpt_seg_t));
	make_quant(&rec.seg[0], 0, 0, 2000, 8, NULL);
	make_lossless(&rec.seg[1], 1, 100, RCKPT_DT_F16);
	encode(&b, &rec, NULL);
	for (k = 0; k < b.len; k++) {
		uint8_t *c = malloc(b.len);
		int rc;
		memcpy(c, b.p, b.len);
		c[k] ^= (uint8_t)(1u << (rnd() & 7));
		rc = rckpt_record_decode(&dec, c, b.len, NULL, NULL);
		if (k >= RCKPT_RECORD_HEADER_BYTES)
			assert_int_equal(rc, RCKPT_FMT_ECHECKSUM);
		else
			assert_true(rc < 0);
		assert_null(dec.seg);
		free(c);
	}
	for (k = 0; k < b.len; k++) {
		uint8_t *c = malloc(k ? k : 1);
		memcpy(c, b.p, k);
		assert_true(rckpt_record_decode(&dec, c, k, NULL, NULL) < 0);
		free(c);
	}
	rckpt_record_free(&rec);
	rckpt_buf_free(&b);
}

static void test_limits_and_versions(void **state)
{
	rckpt_record_limits_t few_segs = { 1, 1u << 30 }, few_elems = { 100, 1000 };
	rckpt_record_t rec, dec;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	build_base(&rec, 5);
	encode(&b, &rec, NULL);
	assert_int_equal(rckpt_record_decode(&dec, b.p, b.len, NULL, &few_segs), -E2BIG);
	assert_int_equal(rckpt_record_decode(&dec, b.p, b.len, NULL, &few_elems), -E2BIG);
	b.p[5] = RCKPT_RECORD_VERSION + 1; /* a newer format */
	b.p[4] = RCKPT_RECORD_VERSION + 1;
	assert_int_equal(rckpt_record_decode(&dec, b.p, b.len, NULL, NULL), RCKPT_FMT_EVERSION);
	rckpt_record_free(&rec);
	rckpt_buf_free(&b);
}

static void test_encoder_rejects(void **state)
{
	rckpt_record_t rec, next;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	build_base(&rec, 5);
	rec.seg[0].nprot++; /* disagrees with the levels */
	assert_int_equal(rckpt_record_encode(&b, &rec, NULL, &opts), -EINVAL);
	rec.seg[0].nprot--;
	rec.seg[0].centroids[3] = rec.seg[0].centroids[2];
	assert_int_equal(rckpt_record_encode(&b, &rec, NULL, &opts), -EINVAL);
	rec.seg[0].centroids[3] = 100.0f;
	rec.seg[0].centroids[3] = rec.seg[0].centroids[2] + 1e-3f;
	rec.seg[1].idx[0] = 6; /* level >= nbins + 2 */
	assert_int_equal(rckpt_record_encode(&b, &rec, NULL, &opts), -EINVAL);
	rec.seg[1].idx[0] = 0;
	rec.seg[0].centroids[3] = -1.0f + 2.0f * 3 / 12;
	assert_int_equal(rckpt_record_encode(&b, &rec, NULL, &opts), 0);
	build_next(&next, &rec, 6, 12);
	next.seg[0].first = 1; /* layout differs from the parent's */
	assert_int_equal(rckpt_record_encode(&b, &next, &rec, &opts), -EINVAL);
	next.seg[0].first = 0;
	next.parent = 99;
	assert_int_equal(rckpt_record_encode(&b, &next, &rec, &opts), -EINVAL);
	next.parent = 5;
	assert_int_equal(rckpt_record_encode(&b, &next, NULL, &opts), -EINVAL);
	assert_int_equal(rckpt_record_encode(&b, &next, &rec, &opts), 0);
	rckpt_record_free(&rec);
	rckpt_record_free(&next);
	rckpt_buf_free(&b);
}

/* A small record whose bytes are kept forever (tests/golden). The test
 * decodes them and re-encodes the result to the same bytes. */
/* ---- sparse partial records ---- */

/* rec = parent with some blocks of every quantized segment changed at
 * random (about pct in 100 of them): levels, and the protected values
 * inside; outside, the parent's protected values in order. sel[i] gets the
 * blocks (storage in blk[i], freed by the caller). */
static void build_sparse(rckpt_record_t *rec, const rckpt_record_t *parent, uint64_t step,
			 uint32_t block, unsigned pct, rckpt_sparse_sel_t *sel, uint32_t **blk)
{
	uint32_t i;
	memset(rec, 0, sizeof(*rec));
	rec->kind = RCKPT_REC_SPARSE;
	rec->step = step;
	rec->parent = parent->step;
	rec->nseg = parent->nseg;
	rec->seg = calloc(parent->nseg, sizeof(rckpt_seg_t));
	for (i = 0; i < parent->nseg; i++) {
		const rckpt_seg_t *p = &parent->seg[i];
		rckpt_seg_t *s = &rec->seg[i];
		uint64_t nb = (p->n + block - 1) / block, b, k, pp = 0;
		uint8_t *chosen = calloc(nb + 1, 1);
		const uint8_t P = (uint8_t)(p->nbins + 1);
		blk[i] = malloc(4 * (nb + 1));
		sel[i].nblocks = 0;
		sel[i].blocks = blk[i];
		*s = *p;
		s->idx = NULL;
		s->prot = NULL;
		s->raw = NULL;
		if (p->encoding == RCKPT_SEG_LOSSLESS) {
			s->raw = malloc(p->n * rckpt_dtype_size(p->dtype) + 1);
			memcpy(s->raw, p->raw, p->n * rckpt_dtype_size(p->dtype));
			free(chosen);
			continue;
		}
		for (b = 0; b < nb; b++)
			if (rnd() % 100 < pct) {
				chosen[b] = 1;
				blk[i][sel[i].nblocks++] = (uint32_t)b;
			}
		s->idx = malloc(p->n + 1);
		s->prot = malloc(2 * (p->n + 1));
		s->nprot = 0;
		for (k = 0; k < p->n; k++) {
			const int in = chosen[k / block];
			s->idx[k] = in ? (uint8_t)(rnd() % 20 == 0 ? P : rnd() % P) : p->idx[k];
			if (p->idx[k] == P)
				pp++;
			if (s->idx[k] == P)
				s->prot[s->nprot++] = in ? (uint16_t)rnd() : p->prot[pp - 1];
		}
		free(chosen);
	}
}

static void free_sel(uint32_t **blk, uint32_t n)
{
	uint32_t i;
	for (i = 0; i < n; i++)
		free(blk[i]);
}

/* A chain base, sparse, sparse, delta, sparse, ... with block sizes 1, odd,
 * one block per segment, and none or every block stored: folding it gives
 * every step bit for bit; a sparse record of an eighth of the blocks is
 * far smaller than a delta of all of them. */
static void test_sparse_chain(void **state)
{
	static const uint32_t blocks[] = { 0, 64, 1, 7, 0, 4096, 1u << 31, 64, 3 };
	static const unsigned pct[] = { 0, 12, 30, 50, 0, 100, 100, 0, 12 };
	rckpt_record_t orig[9], dec[9];
	rckpt_buf_t enc[9];
	int s;

	(void)state;
	build_base(&orig[0], 10);
	for (s = 0; s < 9; s++) {
		rckpt_sparse_sel_t sel[6];
		uint32_t *blk[6];
		enc[s] = (rckpt_buf_t)RCKPT_BUF_INIT;
		if (s == 0) {
			encode(&enc[s], &orig[0], NULL);
		} else if (blocks[s] == 0) { /* a delta of everything */
			build_next(&orig[s], &orig[s - 1], 10 + (uint64_t)s, orig[s - 1].seg[0].nbins);
			encode(&enc[s], &orig[s], &orig[s - 1]);
		} else {
			build_sparse(&orig[s], &orig[s - 1], 10 + (uint64_t)s, blocks[s], pct[s], sel, blk);
			assert_int_equal(rckpt_record_encode_sparse(&enc[s], &orig[s], &orig[s - 1], blocks[s],
								  sel, &opts),
					 0);
			free_sel(blk, 6);
		}
		assert_int_equal(decode_both(&dec[s], enc[s].p, enc[s].len, s ? &dec[s - 1] : NULL), 0);
		assert_same(&orig[s], &dec[s]);
		if (blocks[s] && s)
			assert_int_equal(dec[s].kind, RCKPT_REC_SPARSE);
		{ /* the shape without decoding: the decoded record's, of every kind */
			uint32_t nseg, i;
			uint64_t elements, sum = 0;
			assert_int_equal(rckpt_record_geometry(&nseg, &elements, enc[s].p, enc[s].len), 0);
			for (i = 0; i < dec[s].nseg; i++)
				sum += dec[s].seg[i].n;
			assert_int_equal(nseg, dec[s].nseg);
			assert_int_equal(elements, sum);
		}
	}
	/* step 1 stored an eighth of the 64-element blocks at random levels:
	 * far smaller than the base; step 8 stored none */
	assert_true(enc[1].len * 3 < enc[0].len);
	for (s = 0; s < 9; s++) {
		rckpt_record_free(&orig[s]);
		rckpt_record_free(&dec[s]);
		rckpt_buf_free(&enc[s]);
	}
}

/* The encoder refuses what a sparse record cannot say; the decoder
 * refuses damaged ones (CRC, then with the CRC fixed: each field). */
static void test_sparse_rejects(void **state)
{
	rckpt_record_t base, sp, dec;
	rckpt_sparse_sel_t sel[6];
	uint32_t *blk[6], saved;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	size_t k;

	(void)state;
	build_base(&base, 1);
	build_sparse(&sp, &base, 2, 16, 25, sel, blk);
	assert_true(sel[0].nblocks > 2);
	sp.seg[0].idx[blk[0][1] * 16 - 1] ^= 1; /* outside the blocks */
	assert_int_equal(rckpt_record_encode_sparse(&b, &sp, &base, 16, sel, &opts), -EINVAL);
	sp.seg[0].idx[blk[0][1] * 16 - 1] ^= 1;
	sp.seg[0].centroids[0] -= 0.5f; /* another codebook */
	assert_int_equal(rckpt_record_encode_sparse(&b, &sp, &base, 16, sel, &opts), -EINVAL);
	sp.seg[0].centroids[0] += 0.5f;
	saved = blk[0][1];
	blk[0][1] = blk[0][0]; /* not increasing */
	assert_int_equal(rckpt_record_encode_sparse(&b, &sp, &base, 16, sel, &opts), -EINVAL);
	blk[0][1] = saved;
	assert_int_equal(rckpt_record_encode_sparse(&b, &sp, &base, 0, sel, &opts), -EINVAL);
	sp.kind = RCKPT_REC_DELTA;
	assert_int_equal(rckpt_record_encode_sparse(&b, &sp, &base, 16, sel, &opts), -EINVAL);
	sp.kind = RCKPT_REC_SPARSE;
	assert_int_equal(b.len, 0);
	assert_int_equal(rckpt_record_encode_sparse(&b, &sp, &base, 16, sel, &opts), 0);
	/* no parent, or another step's */
	assert_int_equal(rckpt_record_decode(&dec, b.p, b.len, NULL, NULL), -EINVAL);
	base.step = 0;
	assert_int_equal(rckpt_record_decode(&dec, b.p, b.len, &base, NULL), -ESTALE);
	base.step = 1;
	/* every flipped byte, every truncation */
	for (k = 0; k < b.len; k++) {
		uint8_t *c = malloc(b.len);
		memcpy(c, b.p, b.len);
		c[k] ^= (uint8_t)(1u << (rnd() & 7));
		assert_true(rckpt_record_decode(&dec, c, b.len, &base, NULL) < 0);
		assert_null(dec.seg);
		assert_true(rckpt_record_decode(&dec, c, k, &base, NULL) < 0);
		free(c);
	}
	/* fields of segment 0 with a good CRC: block, nblocks, the list */
	{
		static const struct {
			size_t at;
			uint32_t v;
		} bad[] = { { 64, 0 }, { 64, 0x80000001u }, { 68, 100003 / 16 + 2 }, { 68, 0 } };
		unsigned t;
		for (t = 0; t < sizeof(bad) / sizeof(bad[0]); t++) {
			uint8_t *c = malloc(b.len);
			uint32_t crc;
			memcpy(c, b.p, b.len);
			c[bad[t].at] = (uint8_t)bad[t].v;
			c[bad[t].at + 1] = (uint8_t)(bad[t].v >> 8);
			c[bad[t].at + 2] = (uint8_t)(bad[t].v >> 16);
			c[bad[t].at + 3] = (uint8_t)(bad[t].v >> 24);
			crc = rckpt_crc32c(0, c, b.len - 4);
			memcpy(c + b.len - 4, &crc, 4); /* little-endian hosts */
			assert_int_equal(rckpt_record_decode(&dec, c, b.len, &base, NULL), -EBADMSG);
			free(c);
		}
	}
	free_sel(blk, 6);
	rckpt_record_free(&base);
	rckpt_record_free(&sp);
	rckpt_buf_free(&b);
}

static void test_golden_vector(void **state)
{
	uint8_t want[4096];
	size_t n;
	rckpt_record_t rec, dec;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	memset(&rec, 0, sizeof(rec));
	rec.kind = RCKPT_REC_BASE;
	rec.step = 42;
	rec.parent = RCKPT_NO_PARENT;
	rec.nseg = 1;
	rec.seg = calloc(1, sizeof(rckpt_seg_t));
	rec.seg[0].n = 8;
	rec.seg[0].encoding = RCKPT_SEG_QUANTIZED;
	rec.seg[0].dtype = RCKPT_DT_F32;
	rec.seg[0].nbins = 2;
	rec.seg[0].centroids[0] = -0.5f;
	rec.seg[0].centroids[1] = 0.25f;
	rec.seg[0].idx = malloc(8);
	memcpy(rec.seg[0].idx, (uint8_t[]){ 0, 1, 2, 2, 2, 2, 3, 0 }, 8);
	rec.seg[0].nprot = 1;
	rec.seg[0].prot = malloc(2);
	rec.seg[0].prot[0] = 0x4120; /* bf16 10.0 */
	encode(&b, &rec, NULL);

	n = golden_hex("ckpt-record-v1.hex", want, sizeof(want));
	assert_int_equal(b.len, n);
	assert_memory_equal(b.p, want, n);
	assert_int_equal(rckpt_record_decode(&dec, want, n, NULL, NULL), 0);
	assert_same(&rec, &dec);
	rckpt_record_free(&dec);
	rckpt_record_free(&rec);
	rckpt_buf_free(&b);
}

/* Version 2 (tests/golden/ckpt-xform-v2.hex): the v1 segment twice, as
 * NORM and as LOG2, encoded to the spec's bytes and decoded back. */
static void test_golden_xform(void **state)
{
	uint8_t want[4096];
	size_t n;
	rckpt_record_t rec, dec;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	unsigned i;

	(void)state;
	memset(&rec, 0, sizeof(rec));
	rec.kind = RCKPT_REC_BASE;
	rec.step = 42;
	rec.parent = RCKPT_NO_PARENT;
	rec.nseg = 2;
	rec.seg = calloc(2, sizeof(rckpt_seg_t));
	for (i = 0; i < 2; i++) {
		rckpt_seg_t *s = &rec.seg[i];
		s->tensor = i;
		s->n = 8;
		s->encoding = RCKPT_SEG_QUANTIZED;
		s->dtype = RCKPT_DT_F32;
		s->transform = i == 0 ? RCKPT_XF_NORM : RCKPT_XF_LOG2;
		s->nbins = 2;
		s->centroids[0] = -0.5f;
		s->centroids[1] = 0.25f;
		s->idx = malloc(8);
		memcpy(s->idx, (uint8_t[]){ 0, 1, 2, 2, 2, 2, 3, 0 }, 8);
		s->nprot = 1;
		s->prot = malloc(2);
		s->prot[0] = 0x4120; /* bf16 10.0 */
	}
	encode(&b, &rec, NULL);
	n = golden_hex("ckpt-xform-v2.hex", want, sizeof(want));
	assert_int_equal(b.len, n);
	assert_memory_equal(b.p, want, n);
	assert_int_equal(rckpt_record_decode(&dec, want, n, NULL, NULL), 0);
	assert_same(&rec, &dec);
	assert_int_equal(dec.seg[0].transform, RCKPT_XF_NORM);
	assert_int_equal(dec.seg[1].transform, RCKPT_XF_LOG2);
	rckpt_record_free(&dec);
	rckpt_record_free(&rec);
	rckpt_buf_free(&b);
}

/* A delta record, derived by hand (tests/golden/ckpt-delta-v1.hex): delta,
 * rearrangement by the parent's levels, a Huffman block in an entropy
 * stream. The decoder must give the levels, codebook and protected values
 * the spec says, on the golden base; a bit changed is refused. */
static void test_golden_delta(void **state)
{
	static const uint8_t levels[8] = { 0, 1, 2, 2, 2, 3, 2, 1 };
	uint8_t base[4096], delta[4096];
	size_t nb, nd;
	rckpt_record_t parent, dec;

	(void)state;
	nb = golden_hex("ckpt-record-v1.hex", base, sizeof(base));
	nd = golden_hex("ckpt-delta-v1.hex", delta, sizeof(delta));
	assert_int_equal(rckpt_record_decode(&parent, base, nb, NULL, NULL), 0);
	assert_int_equal(rckpt_record_decode(&dec, delta, nd, &parent, NULL), 0);
	assert_int_equal(dec.kind, RCKPT_REC_DELTA);
	assert_int_equal(dec.step, 43);
	assert_int_equal(dec.parent, 42);
	assert_int_equal(dec.nseg, 1);
	assert_int_equal(dec.seg[0].n, 8);
	assert_int_equal(dec.seg[0].nbins, 2);
	assert_true(dec.seg[0].centroids[0] == -0.5f && dec.seg[0].centroids[1] == 0.5f);
	assert_memory_equal(dec.seg[0].idx, levels, 8);
	assert_int_equal(dec.seg[0].nprot, 1);
	assert_int_equal(dec.seg[0].prot[0], 0x4000);
	{
		/* the encoder, with the stages of the vector (delta, rearranged,
		 * no RLE), chooses the Huffman block and writes the same bytes */
		const rckpt_istream_opts_t ro = { RCKPT_IS_REARRANGED, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
		rckpt_buf_t b = RCKPT_BUF_INIT;
		assert_int_equal(rckpt_record_encode(&b, &dec, &parent, &ro), 0);
		assert_int_equal(b.len, nd);
		assert_memory_equal(b.p, delta, nd);
		rckpt_buf_free(&b);
	}
	rckpt_record_free(&dec);
	/* one code bit flipped: the CRC refuses it before any segment is read */
	assert_int_equal(delta[40 + 24 + 1 + 8 + 8 + 7 + 1 + 9 + 4], 0x82);
	delta[40 + 24 + 1 + 8 + 8 + 7 + 1 + 9 + 4] ^= 0x01;
	assert_int_equal(rckpt_record_decode(&dec, delta, nd, &parent, NULL), RCKPT_FMT_ECHECKSUM);
	rckpt_record_free(&parent);
}

/* A base record whose lossless blob and index stream are zstd frames
 * (tests/golden/ckpt-zstd-v1.hex, raw-block frames written by hand from RFC
 * 8878): the decoder must accept them, as the spec allows any method. */
static void test_golden_zstd(void **state)
{
	static const uint8_t levels[4] = { 1, 0, 1, 1 };
	static const uint8_t raw[8] = { 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0 };
	uint8_t v[512];
	size_t n;
	rckpt_record_t dec;

	(void)state;
	n = golden_hex("ckpt-zstd-v1.hex", v, sizeof(v));
	assert_int_equal(rckpt_record_decode(&dec, v, n, NULL, NULL), 0);
	assert_int_equal(dec.step, 7);
	assert_int_equal(dec.nseg, 2);
	assert_int_equal(dec.seg[0].encoding, RCKPT_SEG_LOSSLESS);
	assert_int_equal(dec.seg[0].n, 2);
	assert_memory_equal(dec.seg[0].raw, raw, 8);
	assert_int_equal(dec.seg[1].tensor, 1);
	assert_int_equal(dec.seg[1].nbins, 1);
	assert_true(dec.seg[1].centroids[0] == 0.5f);
	assert_int_equal(dec.seg[1].nprot, 0);
	assert_memory_equal(dec.seg[1].idx, levels, 4);
	rckpt_record_free(&dec);
}

/* A sparse partial record, derived by hand (tests/golden/ckpt-sparse-v1.hex)
 * on the golden base: the decoded record is the parent's with block 2
 * replaced, and the sparse encoder writes the same bytes. */
static void test_golden_sparse(void **state)
{
	static const uint8_t levels[8] = { 0, 1, 2, 2, 2, 2, 2, 3 };
	static const uint32_t blocks[1] = { 2 };
	const rckpt_sparse_sel_t sel = { 1, blocks };
	uint8_t base[4096], sparse[4096];
	size_t nb, ns;
	rckpt_record_t parent, dec;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	nb = golden_hex("ckpt-record-v1.hex", base, sizeof(base));
	ns = golden_hex("ckpt-sparse-v1.hex", sparse, sizeof(sparse));
	assert_int_equal(rckpt_record_decode(&parent, base, nb, NULL, NULL), 0);
	assert_int_equal(rckpt_record_decode(&dec, sparse, ns, &parent, NULL), 0);
	assert_int_equal(dec.step, 44);
	assert_int_equal(dec.parent, 42);
	assert_int_equal(dec.seg[0].nbins, 2); /* the parent's codebook */
	assert_true(dec.seg[0].centroids[0] == -0.5f && dec.seg[0].centroids[1] == 0.25f);
	assert_memory_equal(dec.seg[0].idx, levels, 8);
	assert_int_equal(dec.seg[0].nprot, 1);
	assert_int_equal(dec.seg[0].prot[0], 0xc080);
	dec.kind = RCKPT_REC_SPARSE;
	{ /* the stages of the vector: delta only */
		const rckpt_istream_opts_t so = { 0, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
		assert_int_equal(rckpt_record_encode_sparse(&b, &dec, &parent, 3, &sel, &so), 0);
	}
	assert_int_equal(b.len, ns);
	assert_memory_equal(b.p, sparse, ns);
	rckpt_buf_free(&b);
	rckpt_record_free(&dec);
	rckpt_record_free(&parent);
}

/* The chunk digest covers what decodes, not how it was coded. */
static void test_digest(void **state)
{
	rckpt_record_t rec, dec;
	rckpt_buf_t b1 = RCKPT_BUF_INIT, b2 = RCKPT_BUF_INIT;
	rckpt_istream_opts_t plain = { 0, 0, 1, NULL, 0, 0 };
	uint8_t h1[32], h2[32], h3[32];

	(void)state;
	build_base(&rec, 3);
	encode(&b1, &rec, NULL);
	assert_int_equal(rckpt_record_encode(&b2, &rec, NULL, &plain), 0);
	assert_true(b1.len != b2.len); /* two codings... */
	assert_int_equal(rckpt_record_decode(&dec, b2.p, b2.len, NULL, NULL), 0);
	assert_int_equal(rckpt_record_digest(h1, &rec), 0);
	assert_int_equal(rckpt_record_digest(h2, &dec), 0);
	assert_memory_equal(h1, h2, 32); /* ...one content */
	rec.seg[0].idx[17] ^= 1;
	assert_int_equal(rckpt_record_digest(h3, &rec), 0);
	assert_memory_not_equal(h1, h3, 32);
	rckpt_record_free(&dec);
	rckpt_record_free(&rec);
	rckpt_buf_free(&b1);
	rckpt_buf_free(&b2);
}

/* Re-seals a record whose bytes a test changed. */
static void reseal(uint8_t *p, size_t len)
{
	const uint32_t crc = rckpt_crc32c(0, p, len - 4);
	p[len - 4] = (uint8_t)crc;
	p[len - 3] = (uint8_t)(crc >> 8);
	p[len - 2] = (uint8_t)(crc >> 16);
	p[len - 1] = (uint8_t)(crc >> 24);
}

/* Version 3 (tests/golden/ckpt-ctx-v3.hex, derived by hand): a delta whose
 * index stream is in the CTX form. The decoder gives the spec's levels and
 * protected values, and its geometry the OSD's check; the same bytes as
 * version 2 (by both), a rANS state changed, or a table's frequencies that
 * do not sum to 4096 are refused. */
static void test_golden_ctx(void **state)
{
	static const uint8_t levels[8] = { 0, 2, 2, 2, 2, 3, 3, 0 };
	uint8_t base[4096], rec[4096], c[4096];
	size_t nb, nr;
	rckpt_record_t parent, dec;

	(void)state;
	nb = golden_hex("ckpt-record-v1.hex", base, sizeof(base));
	nr = golden_hex("ckpt-ctx-v3.hex", rec, sizeof(rec));
	assert_int_equal(rckpt_record_decode(&parent, base, nb, NULL, NULL), 0);
	assert_int_equal(rckpt_record_decode(&dec, rec, nr, &parent, NULL), 0);
	assert_int_equal(dec.step, 44);
	assert_int_equal(dec.parent, 42);
	assert_memory_equal(dec.seg[0].idx, levels, 8);
	assert_int_equal(dec.seg[0].nprot, 2);
	assert_int_equal(dec.seg[0].prot[0], 0x4000);
	assert_int_equal(dec.seg[0].prot[1], 0x4040);
	rckpt_record_free(&dec);
	{ /* the OSD's check of an appended record reads the same */
		uint32_t nseg;
		uint64_t elems;
		assert_int_equal(rckpt_record_geometry(&nseg, &elems, rec, nr), 0);
		assert_true(nseg == 1 && elems == 8);
		memcpy(c, rec, nr); /* CTX in a version 2 record */
		c[4] = c[5] = 2;
		reseal(c, nr);
		assert_int_equal(rckpt_record_decode(&dec, c, nr, &parent, NULL), -EBADMSG);
		assert_int_equal(rckpt_record_geometry(&nseg, &elems, c, nr), -EBADMSG);
	}
	memcpy(c, rec, nr); /* CTX with RLE: refused by both */
	assert_int_equal(c[90], RCKPT_IS_DELTA | RCKPT_IS_REARRANGED | RCKPT_IS_CTX);
	c[90] |= RCKPT_IS_RLE;
	reseal(c, nr);
	assert_int_equal(rckpt_record_decode(&dec, c, nr, &parent, NULL), -EBADMSG);
	{
		uint32_t nseg;
		uint64_t elems;
		assert_int_equal(rckpt_record_geometry(&nseg, &elems, c, nr), -EBADMSG);
	}
	memcpy(c, rec, nr); /* x1 one off: it does not end at 2^23 */
	c[nr - 8] ^= 1;
	reseal(c, nr);
	assert_int_equal(rckpt_record_decode(&dec, c, nr, &parent, NULL), -EBADMSG);
	memcpy(c, rec, nr); /* level 2's first frequency 3073: the sum is 4097 */
	c[nr - 19] = 0x80;
	c[nr - 18] = 0x18;
	reseal(c, nr);
	assert_int_equal(rckpt_record_decode(&dec, c, nr, &parent, NULL), -EBADMSG);
	rckpt_record_free(&parent);
}

/* Version 4 (tests/golden/ckpt-pred-v4.hex, derived by hand, on the base
 * ckpt-pbase-v1.hex): a delta whose protected and lossless values are
 * predicted from the parent's. The decoder gives the spec's values, and its
 * geometry the OSD's check; the same bytes as version 3, or a base whose
 * blob claims a prediction, are refused by both; a residual bit flipped
 * flips the value's bit (XOR, not a checksum). */
static void test_golden_pred(void **state)
{
	static const uint8_t levels[8] = { 0, 1, 2, 3, 2, 2, 3, 0 };
	static const uint8_t raw[8] = { 0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0 };
	uint8_t base[4096], rec[4096], c[4096];
	size_t nb, nr;
	uint32_t nseg;
	uint64_t elems;
	rckpt_record_t parent, dec;

	(void)state;
	nb = golden_hex("ckpt-pbase-v1.hex", base, sizeof(base));
	nr = golden_hex("ckpt-pred-v4.hex", rec, sizeof(rec));
	assert_int_equal(rckpt_record_decode(&parent, base, nb, NULL, NULL), 0);
	assert_int_equal(rckpt_record_decode(&dec, rec, nr, &parent, NULL), 0);
	assert_int_equal(dec.step, 43);
	assert_memory_equal(dec.seg[0].idx, levels, 8);
	assert_int_equal(dec.seg[0].nprot, 2);
	assert_int_equal(dec.seg[0].prot[0], 0x3e90);
	assert_int_equal(dec.seg[0].prot[1], 0x4128);
	assert_memory_equal(dec.seg[1].raw, raw, 8);
	rckpt_record_free(&dec);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, rec, nr), 0);
	assert_true(nseg == 2 && elems == 10);
	memcpy(c, rec, nr); /* the residual's bit 0 of position 3 */
	assert_int_equal(c[86], 0x10);
	c[86] ^= 1;
	reseal(c, nr);
	assert_int_equal(rckpt_record_decode(&dec, c, nr, &parent, NULL), 0);
	assert_int_equal(dec.seg[0].prot[0], 0x3e91);
	rckpt_record_free(&dec);
	memcpy(c, rec, nr); /* predicted blobs in a version 3 record */
	c[4] = c[5] = 3;
	reseal(c, nr);
	assert_int_equal(rckpt_record_decode(&dec, c, nr, &parent, NULL), -EBADMSG);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, c, nr), -EBADMSG);
	memcpy(c, base, nb); /* a base's lossless blob "predicted": nothing to predict from */
	assert_int_equal(c[146], RCKPT_BLOB_RAW);
	c[4] = c[5] = 4;
	c[146] = RCKPT_BLOB_PREDICTED;
	reseal(c, nb);
	assert_int_equal(rckpt_record_decode(&dec, c, nb, NULL, NULL), -EBADMSG);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, c, nb), -EBADMSG);
	rckpt_record_free(&parent);
}

/* Version 5 (tests/golden/ckpt-planes-v5.hex and ckpt-planes-delta-v5.hex,
 * derived by hand): a lossless segment's values in byte planes, a base's
 * (a Huffman, two constant and a raw plane) and a delta's predicted by its
 * parent's. The decoder gives the spec's values and the geometry reads
 * both; as version 4, predicted in a base, or a plane short of symbols,
 * both refuse them. */
static void test_golden_planes(void **state)
{
	static const float want0[4] = { 1.0f, 2.0f, -1.0f, 0.5f }, want1[4] = { 1.5f, 2.0f, -1.0f, 0.25f };
	uint8_t base[512], rec[512], c[512];
	size_t nb, nr;
	uint32_t nseg;
	uint64_t elems;
	rckpt_record_t parent, dec;

	(void)state;
	nb = golden_hex("ckpt-planes-v5.hex", base, sizeof(base));
	nr = golden_hex("ckpt-planes-delta-v5.hex", rec, sizeof(rec));
	assert_int_equal(rckpt_record_decode(&parent, base, nb, NULL, NULL), 0);
	assert_int_equal(parent.step, 7);
	assert_memory_equal(parent.seg[0].raw, want0, 16);
	assert_int_equal(rckpt_record_decode(&dec, rec, nr, &parent, NULL), 0);
	assert_int_equal(dec.step, 8);
	assert_memory_equal(dec.seg[0].raw, want1, 16);
	rckpt_record_free(&dec);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, base, nb), 0);
	assert_true(nseg == 1 && elems == 4);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, rec, nr), 0);
	memcpy(c, rec, nr); /* as version 4 */
	c[4] = c[5] = 4;
	reseal(c, nr);
	assert_int_equal(rckpt_record_decode(&dec, c, nr, &parent, NULL), -EBADMSG);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, c, nr), -EBADMSG);
	memcpy(c, base, nb); /* a base's planes "predicted" */
	assert_int_equal(c[64], RCKPT_BLOB_PLANES);
	c[64] |= RCKPT_BLOB_PREDICTED;
	reseal(c, nb);
	assert_int_equal(rckpt_record_decode(&dec, c, nb, NULL, NULL), -EBADMSG);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, c, nb), -EBADMSG);
	memcpy(c, base, nb); /* plane 0 of 3 symbols */
	assert_int_equal(c[70], 4);
	c[70] = 3;
	reseal(c, nb);
	assert_int_equal(rckpt_record_decode(&dec, c, nb, NULL, NULL), -EBADMSG);
	rckpt_record_free(&parent);
}

/* Floats as a layer's weights are: a bell of magnitudes around 0.02, every
 * mantissa bit used. */
static float weight(void)
{
	double u = 0;
	unsigned k;
	for (k = 0; k < 4; k++)
		u += (double)(rnd() & 0xffffff) / 16777216.0 - 0.5;
	return (float)(0.03 * u);
}

/* Version 6 (tests/golden/ckpt-split-v6.hex, derived by hand): the
 * levels of ckpt-record-v1.hex's record in a split Huffman block, the
 * Huffman coder's own bytes for them; as version 5 the record is
 * malformed, to the decoder and to the OSD's check. An encoder given the
 * split policy writes version 6 only where a stream of 64 Ki symbols took
 * it, and such a record decodes and passes the OSD's check. */
static void test_golden_split(void **state)
{
	static const uint16_t levels[8] = { 0, 1, 2, 2, 2, 2, 3, 0 };
	uint8_t rec[512], c[512];
	size_t nr;
	uint32_t nseg;
	uint64_t elems;
	rckpt_record_t dec, big;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_istream_opts_t so = opts;

	(void)state;
	nr = golden_hex("ckpt-split-v6.hex", rec, sizeof(rec));
	assert_int_equal(rckpt_record_decode(&dec, rec, nr, NULL, NULL), 0);
	assert_int_equal(dec.step, 42);
	assert_int_equal(dec.seg[0].n, 8);
	assert_memory_equal(dec.seg[0].idx, ((uint8_t[]){ 0, 1, 2, 2, 2, 2, 3, 0 }), 8);
	assert_int_equal(dec.seg[0].prot[0], 0x4120);
	rckpt_record_free(&dec);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, rec, nr), 0);
	assert_true(nseg == 1 && elems == 8);
	assert_int_equal(rckpt_huff_encode(&b, levels, 8, 4, 1), 0); /* the block at 98 */
	assert_int_equal(b.len, 20);
	assert_memory_equal(b.p, rec + 98, 20);
	memcpy(c, rec, nr); /* as version 5 */
	c[4] = c[5] = 5;
	reseal(c, nr);
	assert_int_equal(rckpt_record_decode(&dec, c, nr, NULL, NULL), -EBADMSG);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, c, nr), -EBADMSG);
	/* the encoder: a small record stays version 1, one of 64 Ki levels
	 * is version 6 */
	so.est_policy |= RCKPT_EST_SPLIT;
	memset(&big, 0, sizeof(big));
	big.kind = RCKPT_REC_BASE;
	big.step = 3;
	big.parent = RCKPT_NO_PARENT;
	big.nseg = 2;
	big.seg = calloc(2, sizeof(rckpt_seg_t));
	make_quant(&big.seg[0], 0, 0, 100, 8, NULL);
	make_quant(&big.seg[1], 1, 0, 4 * RCKPT_EST_SPLIT_MIN + 5, 12, NULL);
	b.len = 0;
	big.nseg = 1;
	assert_int_equal(rckpt_record_encode(&b, &big, NULL, &so), 0);
	assert_int_equal(b.p[4], 1);
	b.len = 0;
	big.nseg = 2;
	assert_int_equal(rckpt_record_encode(&b, &big, NULL, &so), 0);
	assert_int_equal(b.p[4], 6);
	assert_int_equal(b.p[5], 6);
	assert_int_equal(rckpt_record_geometry(&nseg, &elems, b.p, b.len), 0);
	assert_int_equal(decode_both(&dec, b.p, b.len, NULL), 0);
	assert_same(&dec, &big);
	rckpt_record_free(&dec);
	b.len = 0; /* without the policy: not split */
	assert_int_equal(rckpt_record_encode(&b, &big, NULL, &opts), 0);
	assert_true(b.p[4] < 6);
	rckpt_record_free(&big);
	rckpt_buf_free(&b);
}

/* The encoder's PLANES blobs (opts.planes, version 5): a base of weights
 * in fp32, bf16 and fp16 (and an empty segment) is smaller than the plain
 * form and decodes to the same bits; a step of slowly moving values is a
 * smaller delta, its blobs predicted; one of new values keeps the plain
 * planes. Damage never crashes the decoder. */
static void test_planes_blobs(void **state)
{
	static const struct { uint64_t n; unsigned dtype; } segs[4] = {
		{ 50001, RCKPT_DT_F32 }, { 4097, RCKPT_DT_BF16 }, { 3001, RCKPT_DT_F16 }, { 0, RCKPT_DT_F32 }
	};
	rckpt_istream_opts_t po = opts;
	rckpt_record_t base, next, dec;
	rckpt_buf_t plain = RCKPT_BUF_INIT, b0 = RCKPT_BUF_INIT, b1 = RCKPT_BUF_INIT;
	uint32_t i, k;

	(void)state;
	po.predict = 1;
	po.planes = 1;
	memset(&base, 0, sizeof(base));
	base.kind = RCKPT_REC_BASE;
	base.step = 1;
	base.parent = RCKPT_NO_PARENT;
	base.nseg = 4;
	base.seg = calloc(4, sizeof(rckpt_seg_t));
	for (i = 0; i < 4; i++) {
		rckpt_seg_t *s = &base.seg[i];
		make_lossless(s, i, segs[i].n, segs[i].dtype);
		for (k = 0; k < s->n; k++) {
			float f = weight();
			if (s->dtype == RCKPT_DT_F32)
				memcpy(s->raw + 4 * k, &f, 4);
			else /* any 16 bits of a small value: the top of an fp32 */
				memcpy(s->raw + 2 * k, (uint8_t *)&f + 2, 2);
		}
	}
	assert_int_equal(rckpt_record_encode(&plain, &base, NULL, &opts), 0);
	assert_int_equal(rckpt_record_encode(&b0, &base, NULL, &po), 0);
	assert_int_equal(plain.p[4], 1);
	assert_int_equal(b0.p[4], 5);
	assert_int_equal(b0.p[5], 5);
	print_message("weights: %zu bytes raw, plain %zu, planes %zu\n", (size_t)(4 * 50001 + 2 * 7098),
		      plain.len, b0.len);
	assert_true(b0.len < plain.len - plain.len / 20);
	assert_int_equal(rckpt_record_decode(&dec, b0.p, b0.len, NULL, NULL), 0);
	assert_same(&dec, &base);
	rckpt_record_free(&dec);
	/* the next step: every value's low byte moved */
	build_next(&next, &base, 2, 0);
	for (i = 0; i < 4; i++) {
		const size_t w = rckpt_dtype_size(base.seg[i].dtype);
		memcpy(next.seg[i].raw, base.seg[i].raw, base.seg[i].n * w);
		for (k = 0; k < base.seg[i].n; k++)
			next.seg[i].raw[k * w] ^= (uint8_t)(rnd() & 0x0f);
	}
	assert_int_equal(rckpt_record_encode(&b1, &next, &base, &po), 0);
	assert_int_equal(b1.p[4], 5);
	assert_int_equal(b1.p[40 + 24], RCKPT_BLOB_PLANES | RCKPT_BLOB_PREDICTED);
	assert_true(b1.len < b0.len / 2);
	assert_int_equal(decode_both(&dec, b1.p, b1.len, &base), 0);
	assert_same(&dec, &next);
	rckpt_record_free(&dec);
	{
		uint32_t nseg;
		uint64_t elems;
		assert_int_equal(rckpt_record_geometry(&nseg, &elems, b1.p, b1.len), 0);
		assert_true(nseg == 4 && elems == 50001 + 4097 + 3001);
	}
	/* new values: the plain planes, not predicted */
	for (i = 0; i < 4; i++)
		for (k = 0; k < next.seg[i].n; k++) {
			float f = weight();
			memcpy(next.seg[i].raw + k * rckpt_dtype_size(next.seg[i].dtype), &f,
			       rckpt_dtype_size(next.seg[i].dtype));
		}
	b1.len = 0;
	assert_int_equal(rckpt_record_encode(&b1, &next, &base, &po), 0);
	assert_int_equal(b1.p[40 + 24], RCKPT_BLOB_PLANES);
	assert_int_equal(decode_both(&dec, b1.p, b1.len, &base), 0);
	assert_same(&dec, &next);
	rckpt_record_free(&dec);
	/* a byte changed anywhere (the CRC made right): an error or other
	 * values, never a crash */
	for (k = 0; k < 400; k++) {
		uint8_t *c = malloc(b0.len);
		assert_non_null(c);
		memcpy(c, b0.p, b0.len);
		c[40 + rnd() % (b0.len - 44)] ^= (uint8_t)(1 + rnd() % 255);
		reseal(c, b0.len);
		if (rckpt_record_decode(&dec, c, b0.len, NULL, NULL) == 0)
			rckpt_record_free(&dec);
		free(c);
	}
	rckpt_buf_free(&plain);
	rckpt_buf_free(&b0);
	rckpt_buf_free(&b1);
	rckpt_record_free(&base);
	rckpt_record_free(&next);
}

/* The encoder's predicted blobs: on a step whose lossless values and
 * protected values moved little, the predicted record (version 4) is
 * smaller and decodes to the step; without predict, or on a step whose
 * values are new, the record is the bytes it was. */
static void test_predicted_blobs(void **state)
{
	rckpt_istream_opts_t po = opts;
	rckpt_record_t base, next, dec, pdec;
	rckpt_buf_t b0 = RCKPT_BUF_INIT, b1 = RCKPT_BUF_INIT;
	uint32_t i;

	(void)state;
	po.predict = 1;
	build_base(&base, 8);
	build_next(&next, &base, 9, 12);
	for (i = 0; i < next.nseg; i++) { /* values all new: nothing to gain */
		rckpt_seg_t *s = &next.seg[i];
		uint64_t j;
		if (s->encoding == RCKPT_SEG_LOSSLESS)
			for (j = 0; j < s->n * rckpt_dtype_size(s->dtype); j++)
				s->raw[j] = (uint8_t)rnd();
		else
			for (j = 0; j < s->nprot; j++)
				s->prot[j] = (uint16_t)rnd();
	}
	encode(&b0, &next, &base);
	b1.len = 0;
	assert_int_equal(rckpt_record_encode(&b1, &next, &base, &po), 0);
	assert_int_equal(b1.len, b0.len);
	assert_memory_equal(b1.p, b0.p, b0.len);
	assert_int_equal(b1.p[4], 1);
	for (i = 0; i < next.nseg; i++) { /* now: slowly moving values */
		rckpt_seg_t *s = &next.seg[i];
		const rckpt_seg_t *p = &base.seg[i];
		uint64_t j, k = 0, pp = 0;
		const size_t w = rckpt_dtype_size(s->dtype);
		if (s->encoding == RCKPT_SEG_LOSSLESS) {
			memcpy(s->raw, p->raw, s->n * w);
			for (j = 0; j < s->n; j += 3)
				s->raw[j * w] ^= (uint8_t)rnd(); /* the low byte of every third */
			continue;
		}
		for (j = 0; j < s->n; j++) {
			if (s->idx[j] == s->nbins + 1) {
				s->prot[k] = p->idx[j] == p->nbins + 1 ? p->prot[pp] ^ (uint16_t)(rnd() & 3)
									: (uint16_t)(0x3f00 | (rnd() & 0xff));
				k++;
			}
			pp += p->idx[j] == p->nbins + 1;
		}
	}
	encode(&b0, &next, &base);
	b1.len = 0;
	assert_int_equal(rckpt_record_encode(&b1, &next, &base, &po), 0);
	assert_int_equal(b0.p[4], 1);
	assert_int_equal(b1.p[4], 4);
	assert_int_equal(b1.p[5], 4);
	assert_true(b1.len < b0.len - 1000);
	assert_int_equal(decode_both(&dec, b1.p, b1.len, &base), 0);
	assert_same(&dec, &next);
	{ /* the OSD's check reads it; a delta of it on the decoded record too */
		uint32_t nseg;
		uint64_t elems;
		assert_int_equal(rckpt_record_geometry(&nseg, &elems, b1.p, b1.len), 0);
		assert_int_equal(nseg, next.nseg);
	}
	b0.len = 0;
	dec.kind = RCKPT_REC_DELTA;
	next.step = 10;
	next.parent = 9;
	assert_int_equal(rckpt_record_encode(&b0, &next, &dec, &po), 0);
	assert_int_equal(decode_both(&pdec, b0.p, b0.len, &dec), 0);
	assert_same(&pdec, &next);
	rckpt_record_free(&pdec);
	rckpt_record_free(&dec);
	rckpt_record_free(&next);
	rckpt_record_free(&base);
	rckpt_buf_free(&b0);
	rckpt_buf_free(&b1);
}

/* Version 2: a segment's transform (checkpoint.md "Transforms"). */
static void test_transform_segments(void **state)
{
	const size_t xf_at = RCKPT_RECORD_HEADER_BYTES + 22; /* segment 0's transform byte */
	rckpt_record_t rec, dec, next, dnext;
	rckpt_buf_t b = RCKPT_BUF_INIT, b2 = RCKPT_BUF_INIT;
	uint8_t h0[32], h1[32];
	uint8_t *c;

	(void)state;
	build_base(&rec, 8);
	encode(&b, &rec, NULL);
	assert_int_equal(b.p[4], 1); /* without transforms: version 1, as before */
	assert_int_equal(rckpt_record_digest(h0, &rec), 0);
	rec.seg[0].transform = RCKPT_XF_LOG2;
	encode(&b, &rec, NULL);
	assert_int_equal(b.p[4], 2);
	assert_int_equal(b.p[5], 2);
	assert_int_equal(b.p[xf_at], RCKPT_XF_LOG2);
	assert_int_equal(rckpt_record_decode(&dec, b.p, b.len, NULL, NULL), 0);
	assert_int_equal(dec.seg[0].transform, RCKPT_XF_LOG2);
	assert_int_equal(dec.seg[1].transform, RCKPT_XF_NONE);
	encode(&b2, &dec, NULL);
	assert_int_equal(b2.len, b.len);
	assert_memory_equal(b2.p, b.p, b.len);
	assert_int_equal(rckpt_record_digest(h1, &dec), 0);
	assert_memory_not_equal(h0, h1, 32); /* the transform is content */

	/* a delta's segment keeps its parent's transform */
	build_next(&next, &dec, 9, 12);
	assert_int_equal(rckpt_record_encode(&b2, &next, &dec, &opts), -EINVAL);
	next.seg[0].transform = RCKPT_XF_LOG2;
	encode(&b2, &next, &dec);
	assert_int_equal(rckpt_record_decode(&dnext, b2.p, b2.len, &dec, NULL), 0);
	assert_int_equal(dnext.seg[0].transform, RCKPT_XF_LOG2);
	rckpt_record_free(&dnext);
	rckpt_record_free(&next);

	/* what a decoder refuses */
	c = malloc(b.len);
	memcpy(c, b.p, b.len);
	c[4] = c[5] = 1; /* a transform in a version 1 record */
	reseal(c, b.len);
	assert_int_equal(rckpt_record_decode(&next, c, b.len, NULL, NULL), -EBADMSG);
	memcpy(c, b.p, b.len);
	c[xf_at] = RCKPT_XF_COUNT; /* unknown */
	reseal(c, b.len);
	assert_int_equal(rckpt_record_decode(&next, c, b.len, NULL, NULL), -EBADMSG);
	memcpy(c, b.p, b.len);
	c[xf_at + 1] = 1; /* the reserved byte */
	reseal(c, b.len);
	assert_int_equal(rckpt_record_decode(&next, c, b.len, NULL, NULL), -EBADMSG);
	free(c);

	/* and an encoder: no transform on a lossless segment */
	rec.seg[3].transform = RCKPT_XF_LOG2;
	assert_int_equal(rckpt_record_encode(&b2, &rec, NULL, &opts), -EINVAL);
	rckpt_record_free(&dec);
	rckpt_record_free(&rec);
	rckpt_buf_free(&b);
	rckpt_buf_free(&b2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base_round_trip),
		cmocka_unit_test(test_delta_chain),
		cmocka_unit_test(test_corruption),
		cmocka_unit_test(test_limits_and_versions),
		cmocka_unit_test(test_encoder_rejects),
		cmocka_unit_test(test_sparse_chain),
		cmocka_unit_test(test_sparse_rejects),
		cmocka_unit_test(test_golden_vector),
		cmocka_unit_test(test_golden_delta),
		cmocka_unit_test(test_golden_ctx),
		cmocka_unit_test(test_golden_pred),
		cmocka_unit_test(test_predicted_blobs),
		cmocka_unit_test(test_golden_planes),
		cmocka_unit_test(test_golden_split),
		cmocka_unit_test(test_planes_blobs),
		cmocka_unit_test(test_golden_xform),
		cmocka_unit_test(test_golden_zstd),
		cmocka_unit_test(test_golden_sparse),
		cmocka_unit_test(test_digest),
		cmocka_unit_test(test_transform_segments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
