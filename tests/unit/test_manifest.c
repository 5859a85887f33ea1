/*
 * test_manifest.c — step manifests: the golden vector derived by hand
 * from formats/checkpoint.md, round trips, and what the decoder refuses.
 */
#include <errno.h>
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
#include "rckpt_manifest.h"
#include "rckpt_record.h"

static void make_manifest(rckpt_manifest_t *m, rckpt_mf_tensor_t *t, rckpt_mf_seg_t *sa,
			  rckpt_mf_seg_t *sb, rckpt_mf_chunk_t *ch)
{
	memset(m, 0, sizeof(*m));
	m->step = 300;
	m->parent = 275;
	m->chunk_params = 1000;
	m->ntensors = 2;
	m->nchunks = 2;
	m->t = t;
	m->chunk = ch;
	memset(t, 0, 2 * sizeof(*t));
	t[0].name = "a.weight";
	t[0].dtype = RCKPT_DT_F32;
	t[0].kind = 3;
	t[0].encoding = RCKPT_SEG_QUANTIZED;
	t[0].ndim = 2;
	t[0].shape[0] = 30;
	t[0].shape[1] = 50; /* 1500: split over both chunks */
	t[0].nseg = 2;
	t[0].seg = sa;
	sa[0] = (rckpt_mf_seg_t){ 0, 0, 1000 };
	sa[1] = (rckpt_mf_seg_t){ 1, 0, 500 };
	t[1].name = "b.bias";
	t[1].dtype = RCKPT_DT_BF16;
	t[1].kind = 4;
	t[1].encoding = RCKPT_SEG_LOSSLESS;
	t[1].ndim = 1;
	t[1].shape[0] = 7;
	t[1].nseg = 1;
	t[1].seg = sb;
	sb[0] = (rckpt_mf_seg_t){ 1, 1, 7 };
	memset(ch, 0, 2 * sizeof(*ch));
	ch[0] = (rckpt_mf_chunk_t){ 1000, 1, 123, { 1, 2, 3 }, 0, { 0 } };
	ch[1] = (rckpt_mf_chunk_t){ 507, 2, 456, { 9 }, 0, { 0 } };
	m->cfg.bins = 8;
	m->cfg.emb_bins = 32;
	m->cfg.prune[3] = 0.1f;
	m->cfg.protect = 0.005f;
	m->cfg.lambda = 0.5f;
	m->quality = 0.0073;
	m->raw_bytes = 6014;
	m->enc_bytes = 579;
}

static void refresh_crc(uint8_t *p, size_t len)
{
	uint32_t c = rckpt_crc32c(0, p, len - 4);
	p[len - 4] = (uint8_t)c;
	p[len - 3] = (uint8_t)(c >> 8);
	p[len - 2] = (uint8_t)(c >> 16);
	p[len - 1] = (uint8_t)(c >> 24);
}

/* Version 2 (tests/golden/ckpt-manifest-v2.hex): an optimizer's state,
 * a first moment normalized by its second; encoded back to the same bytes;
 * a norm that is no second moment of as many elements is refused. */
static void test_golden_manifest_v2(void **state)
{
	uint8_t want[4096], bad[4096];
	size_t n, at;
	rckpt_manifest_t m, m2;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	n = golden_hex("ckpt-manifest-v2.hex", want, sizeof(want));
	assert_int_equal(rckpt_manifest_decode(&m, want, n), 0);
	assert_int_equal(m.step, 42);
	assert_true(m.parent == UINT64_MAX);
	assert_int_equal(m.ntensors, 2);
	assert_string_equal(m.t[0].name, "exp_avg.w");
	assert_int_equal(m.t[0].kind, 5);
	assert_int_equal(m.t[0].norm, 1);
	assert_true(m.t[0].eps == 1e-8f);
	assert_string_equal(m.t[1].name, "exp_avg_sq.w");
	assert_int_equal(m.t[1].kind, 6);
	assert_true(m.t[1].norm == RCKPT_MF_NO_NORM);
	assert_true(m.opt_quality == 0.0078125);
	assert_int_equal(m.raw_bytes, 64);
	assert_int_equal(m.chunk[0].record_bytes, 208);
	assert_int_equal(rckpt_manifest_encode(&b, &m), 0);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.p, want, n);
	/* the norm byte of exp_avg.w: after its name, 4 bytes, shape, nseg, segment */
	at = 40 + 2 + 9 + 4 + 8 + 4 + 16;
	assert_int_equal(want[at], 1);
	memcpy(bad, want, n);
	bad[at] = 0; /* itself: a first moment */
	refresh_crc(bad, n);
	assert_int_equal(rckpt_manifest_decode(&m2, bad, n), -EBADMSG);
	memcpy(bad, want, n);
	bad[at] = 2; /* no such tensor */
	refresh_crc(bad, n);
	assert_int_equal(rckpt_manifest_decode(&m2, bad, n), -EBADMSG);
	memcpy(bad, want, n);
	bad[4] = 1; /* an optimizer's kind in a version 1 manifest */
	bad[5] = 1;
	refresh_crc(bad, n);
	assert_int_equal(rckpt_manifest_decode(&m2, bad, n), -EBADMSG);
	memcpy(bad, want, n);
	bad[5] = bad[4] = 3; /* version 3 has a stored base in each chunk's entry */
	refresh_crc(bad, n);
	assert_int_equal(rckpt_manifest_decode(&m2, bad, n), -EBADMSG);
	bad[5] = bad[4] = 4; /* newer */
	refresh_crc(bad, n);
	assert_int_equal(rckpt_manifest_decode(&m2, bad, n), RCKPT_FMT_EVERSION);
	rckpt_buf_free(&b);
	rckpt_manifest_free(&m);
}

/* Version 3 (tests/golden/ckpt-manifest-v3.hex): the chunk names its
 * stored base (ckpt-xform-v2.hex, a base record) by length and SHA-256;
 * encoded back to the same bytes; only those bytes are that base. */
static void test_golden_manifest_v3(void **state)
{
	uint8_t want[4096], rec[4096], bad[4096], h[32];
	size_t n, nr;
	rckpt_manifest_t m, m2;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	n = golden_hex("ckpt-manifest-v3.hex", want, sizeof(want));
	nr = golden_hex("ckpt-xform-v2.hex", rec, sizeof(rec));
	assert_int_equal(rckpt_manifest_decode(&m, want, n), 0);
	assert_int_equal(m.step, 42);
	assert_int_equal(m.t[0].norm, 1);
	assert_true(m.opt_quality == 0.0078125);
	assert_int_equal(m.chunk[0].base_bytes, nr);
	assert_int_equal(rckpt_sha256(h, rec, nr), 0);
	assert_memory_equal(m.chunk[0].base_sha256, h, 32);
	assert_int_equal(rckpt_manifest_encode(&b, &m), 0);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.p, want, n);
	for (nr = 0; nr < n; nr++) /* every truncation */
		assert_true(rckpt_manifest_decode(&m2, want, nr) < 0);
	memcpy(bad, want, n);
	bad[5] = 2; /* version 3's entries under compat 2 */
	refresh_crc(bad, n);
	assert_int_equal(rckpt_manifest_decode(&m2, bad, n), -EBADMSG);
	memcpy(bad, want, n);
	memset(bad + n - 4 - 32 - 8, 0, 8); /* no stored base named, but a digest of one */
	refresh_crc(bad, n);
	assert_int_equal(rckpt_manifest_decode(&m2, bad, n), -EBADMSG);
	memset(bad + n - 4 - 32, 0, 32); /* none named at all: then it is version 2 */
	refresh_crc(bad, n);
	assert_int_equal(rckpt_manifest_decode(&m2, bad, n), -EBADMSG);
	nr = golden_hex("ckpt-xform-v2.hex", rec, sizeof(rec));
	assert_int_equal(rckpt_manifest_is_base(&m, 0, rec, nr), 1);
	assert_int_equal(rckpt_manifest_is_base(&m, 0, rec, nr - 1), 0); /* its length */
	assert_int_equal(rckpt_manifest_is_base(&m, 1, rec, nr), 0);     /* no such chunk */
	rec[nr / 2] ^= 1;
	assert_int_equal(rckpt_manifest_is_base(&m, 0, rec, nr), 0); /* any byte */
	rec[nr / 2] ^= 1;
	m.chunk[0].base_bytes = 0; /* none named: version 2 again, byte for byte */
	rckpt_buf_free(&b);
	assert_int_equal(rckpt_manifest_encode(&b, &m), 0);
	assert_int_equal(b.p[4], 2);
	assert_int_equal(rckpt_manifest_decode(&m2, b.p, b.len), 0);
	assert_int_equal(rckpt_manifest_is_base(&m2, 0, rec, nr), 0);
	n = golden_hex("ckpt-manifest-v2.hex", want, sizeof(want));
	assert_int_equal(b.len, n);
	assert_memory_equal(b.p, want, n);
	rckpt_manifest_free(&m2);
	rckpt_buf_free(&b);
	rckpt_manifest_free(&m);
}

/* A manifest derived by hand (tests/golden/ckpt-manifest-v1.hex): decoded
 * to the spec's fields, and encoded back to the same bytes. */
static void test_golden_manifest(void **state)
{
	uint8_t want[4096];
	size_t n;
	unsigned k;
	rckpt_manifest_t m;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	n = golden_hex("ckpt-manifest-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_manifest_decode(&m, want, n), 0);
	assert_int_equal(m.step, 43);
	assert_int_equal(m.parent, 42);
	assert_int_equal(m.chunk_params, 1000);
	assert_int_equal(m.ntensors, 2);
	assert_int_equal(m.nchunks, 1);
	assert_string_equal(m.t[0].name, "fc.bias");
	assert_int_equal(m.t[0].kind, 4);
	assert_int_equal(m.t[0].encoding, RCKPT_SEG_LOSSLESS);
	assert_int_equal(m.t[0].ndim, 1);
	assert_int_equal(m.t[0].shape[0], 4);
	assert_int_equal(m.t[0].nseg, 1);
	assert_int_equal(m.t[0].seg[0].chunk, 0);
	assert_int_equal(m.t[0].seg[0].index, 1);
	assert_int_equal(m.t[0].seg[0].n, 4);
	assert_string_equal(m.t[1].name, "fc.weight");
	assert_int_equal(m.t[1].kind, 3);
	assert_int_equal(m.t[1].encoding, RCKPT_SEG_QUANTIZED);
	assert_int_equal(m.t[1].ndim, 2);
	assert_int_equal(m.t[1].shape[0], 2);
	assert_int_equal(m.t[1].shape[1], 4);
	assert_int_equal(m.t[1].seg[0].index, 0);
	assert_int_equal(m.t[1].seg[0].n, 8);
	assert_int_equal(m.cfg.bins, 32);
	assert_int_equal(m.cfg.emb_bins, 16);
	assert_int_equal(m.cfg.metric, 1);
	assert_int_equal(m.cfg.flags, 1);
	assert_true(m.cfg.prune[2] == 0.25f && m.cfg.prune[3] == 0.25f && m.cfg.prune[4] == 0.0f);
	assert_true(m.cfg.protect == 0.0078125f && m.cfg.lambda == 0.5f);
	assert_true(m.quality == 0.0009765625);
	assert_int_equal(m.raw_bytes, 48);
	assert_int_equal(m.enc_bytes, 160);
	assert_int_equal(m.chunk[0].elements, 12);
	assert_int_equal(m.chunk[0].nseg, 2);
	assert_int_equal(m.chunk[0].record_bytes, 160);
	for (k = 0; k < 32; k++)
		assert_int_equal(m.chunk[0].sha256[k], k);
	assert_int_equal(rckpt_manifest_encode(&b, &m), 0);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.p, want, n);
	rckpt_buf_free(&b);
	rckpt_manifest_free(&m);
}

static void test_manifest(void **state)
{
	rckpt_mf_tensor_t t[2];
	rckpt_mf_seg_t sa[2], sb[1];
	rckpt_mf_chunk_t ch[2];
	rckpt_manifest_t m, d;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	uint8_t *c;
	size_t k;

	(void)state;
	make_manifest(&m, t, sa, sb, ch);
	assert_int_equal(rckpt_manifest_encode(&b, &m), 0);
	assert_int_equal(rckpt_manifest_decode(&d, b.p, b.len), 0);
	assert_int_equal(d.step, 300);
	assert_int_equal(d.parent, 275);
	assert_int_equal(d.ntensors, 2);
	assert_string_equal(d.t[1].name, "b.bias");
	assert_int_equal(d.t[0].seg[1].n, 500);
	assert_int_equal(d.t[1].seg[0].index, 1);
	assert_memory_equal(d.chunk[1].sha256, ch[1].sha256, 32);
	assert_true(d.quality == 0.0073 && d.cfg.protect == 0.005f);
	rckpt_manifest_free(&d);
	for (k = 0; k < b.len; k++) /* every truncation */
		assert_true(rckpt_manifest_decode(&d, b.p, k) < 0);
	c = malloc(b.len);
	/* hostile fields, with the CRC made right so the field check trips */
	memcpy(c, b.p, b.len);
	c[40 + 2 + 8 + 4 + 16 + 4] = 5; /* a.weight's first segment in chunk 5 of 2 */
	refresh_crc(c, b.len);
	assert_int_equal(rckpt_manifest_decode(&d, c, b.len), -EBADMSG);
	memcpy(c, b.p, b.len);
	c[40 + 2 + 8 + 4 + 16 + 4 + 8] = 0xe9; /* segments no longer cover the tensor */
	refresh_crc(c, b.len);
	assert_int_equal(rckpt_manifest_decode(&d, c, b.len), -EBADMSG);
	memcpy(c, b.p, b.len);
	c[40 + 2] = 'z'; /* "z.weight" after "b.bias": not sorted */
	refresh_crc(c, b.len);
	assert_int_equal(rckpt_manifest_decode(&d, c, b.len), -EBADMSG);
	memcpy(c, b.p, b.len);
	c[24] = 0xff; /* a million tensors in a few bytes */
	c[25] = 0xff;
	c[26] = 0x0f;
	refresh_crc(c, b.len);
	assert_int_equal(rckpt_manifest_decode(&d, c, b.len), -EBADMSG);
	memcpy(c, b.p, b.len);
	c[50] ^= 1; /* CRC */
	assert_int_equal(rckpt_manifest_decode(&d, c, b.len), RCKPT_FMT_ECHECKSUM);
	free(c);
	rckpt_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_manifest),
		cmocka_unit_test(test_golden_manifest_v2),
		cmocka_unit_test(test_golden_manifest_v3),
		cmocka_unit_test(test_manifest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
