/*
 * test_streams.c — CRC-32C, Huffman, entropy streams and index streams: the
 * codecs that run on both sides (client and OSD).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rckpt_crc32c.h"
#include "rckpt_estream.h"
#include "rckpt_huff.h"
#include "rckpt_istream.h"

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "test_rng.h"

/* ---- CRC-32C ---- */

static void test_crc32c_vectors(void **state)
{
	static const uint8_t zeros[32], ones[32] = { [0 ... 31] = 0xff };
	uint8_t inc[32];
	int i;

	(void)state;
	for (i = 0; i < 32; i++)
		inc[i] = (uint8_t)i;
	/* RFC 3720, appendix B.4 */
	assert_int_equal(rckpt_crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(rckpt_crc32c(0, zeros, 32), 0x8a9136aau);
	assert_int_equal(rckpt_crc32c(0, ones, 32), 0x62a8ab43u);
	assert_int_equal(rckpt_crc32c(0, inc, 32), 0x46dd794eu);
	assert_int_equal(rckpt_crc32c_sw(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(rckpt_crc32c(0, NULL, 0), 0);
}

/* Hardware and portable paths agree at every length and alignment, and a
 * CRC continued over pieces equals the CRC of the whole. */
static void test_crc32c_paths_agree(void **state)
{
	uint8_t buf[300];
	size_t off, len;

	(void)state;
	for (off = 0; off < sizeof(buf); off++)
		buf[off] = (uint8_t)rnd();
	for (off = 0; off < 9; off++)
		for (len = 0; len + off <= sizeof(buf); len += 7) {
			uint32_t whole = rckpt_crc32c(0, buf + off, len);
			assert_int_equal(whole, rckpt_crc32c_sw(0, buf + off, len));
			assert_int_equal(whole, rckpt_crc32c(rckpt_crc32c(0, buf + off, len / 3),
							    buf + off + len / 3, len - len / 3));
		}
}

/* Past 12 KiB the hardware path runs three streams and joins them:
 * every length around its blocks' edges, at odd offsets, and continued
 * across a split, as the portable loop says. */
static void test_crc32c_long(void **state)
{
	static const size_t lens[] = { 12287, 12288, 12289, 12295, 24576, 24583, 36864 + 7, 100003 };
	const size_t cap = 100003 + 16;
	uint8_t *buf = malloc(cap);
	size_t i, k, off;

	(void)state;
	for (i = 0; i < cap; i++)
		buf[i] = (uint8_t)rnd();
	for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
		for (off = 0; off < 9; off += 3) {
			const size_t len = lens[k];
			const uint32_t whole = rckpt_crc32c(0, buf + off, len);
			assert_int_equal(whole, rckpt_crc32c_sw(0, buf + off, len));
			assert_int_equal(whole, rckpt_crc32c(rckpt_crc32c(0, buf + off, len / 2 + 1),
							    buf + off + len / 2 + 1, len - len / 2 - 1));
			assert_int_equal(rckpt_crc32c(0x12345678u, buf + off, len),
					 rckpt_crc32c_sw(0x12345678u, buf + off, len));
		}
	free(buf);
}

/* ---- Huffman ---- */

static void huff_round_trip(const uint16_t *syms, size_t n, unsigned nsym)
{
	rckpt_buf_t b = RCKPT_BUF_INIT, b2 = RCKPT_BUF_INIT;
	uint16_t *out = malloc(sizeof(*out) * (n + 16));

	assert_int_equal(rckpt_huff_encode(&b, syms, n, nsym, 0), 0);
	assert_int_equal(rckpt_huff_decode(out, n, nsym, b.p, b.len), 0);
	assert_memory_equal(out, syms, n * sizeof(*out));
	assert_int_equal(rckpt_huff_encode(&b2, syms, n, nsym, 0), 0); /* deterministic */
	assert_int_equal(b.len, b2.len);
	assert_memory_equal(b.p, b2.p, b.len);
	/* The block does not store its symbol count (the entropy stream does):
	 * a count off by one may land in the last byte's padding, but 16 more
	 * symbols need at least 16 more bits than there are. */
	assert_int_equal(rckpt_huff_decode(out, n + 16, nsym, b.p, b.len), -EBADMSG);
	free(out);
	rckpt_buf_free(&b);
	rckpt_buf_free(&b2);
}

static void test_huff_distributions(void **state)
{
	enum { N = 20011 };
	uint16_t *s = malloc(sizeof(*s) * N);
	size_t i;

	(void)state;
	for (i = 0; i < N; i++) /* uniform over 510 */
		s[i] = (uint16_t)(rnd() % 510);
	huff_round_trip(s, N, 510);
	for (i = 0; i < N; i++) /* geometric: short codes dominate */
		s[i] = (uint16_t)__builtin_ctz(rnd() | 0x8000);
	huff_round_trip(s, N, 16);
	for (i = 0; i < N; i++) /* two symbols */
		s[i] = (uint16_t)(rnd() & 1 ? 7 : 300);
	huff_round_trip(s, N, 301);
	huff_round_trip(s, 2, 301);
	/* Streams of 8 Ki symbols and more of an alphabet of at most 256 go
	 * through the table of up to three codes a look-up: one-bit codes
	 * (three a look-up), every count around where its loop hands over to
	 * the one-code loop, and a skewed alphabet of 256 (mixed lengths). */
	for (i = 0; i < N; i++)
		s[i] = (uint16_t)(rnd() & 1 ? 0 : 255);
	huff_round_trip(s, N, 256);
	for (i = 8180; i < 8210; i++)
		huff_round_trip(s, i, 256);
	for (i = 0; i < N; i++)
		s[i] = (uint16_t)(rnd() % 8 ? rnd() % 4 : rnd() % 256);
	huff_round_trip(s, N, 256);
	free(s);
}

/* A split block of syms[0..n): both decoders (u16, and bytes when the
 * alphabet allows) give the symbols back; the layout is the spec's (the
 * header, three lengths, four streams that fill the rest, each decoding
 * alone as a plain block's codes of its quarter); damage is an error or
 * other symbols, never a read past the block. */
static void split_round_trip(const uint16_t *syms, size_t n, unsigned nsym)
{
	rckpt_buf_t b = RCKPT_BUF_INIT, one = RCKPT_BUF_INIT;
	uint16_t *out = malloc(sizeof(*out) * (n + 64));
	uint8_t *o8 = malloc(n + 16), *blk;
	size_t hdr, at, l[4], k, i;

	for (i = 1; i < n && syms[i] == syms[0]; i++)
		;
	if (i == n) { /* one symbol: a constant stream's, not a block's */
		assert_int_equal(rckpt_huff_encode(&b, syms, n, nsym, 1), -EINVAL);
		free(out);
		free(o8);
		return;
	}
	assert_int_equal(rckpt_huff_encode(&b, syms, n, nsym, 1), 0);
	assert_int_equal(rckpt_huff_decode_split(out, n, nsym, b.p, b.len), 0);
	assert_memory_equal(out, syms, n * sizeof(*out));
	if (nsym <= 256) {
		assert_int_equal(rckpt_huff_decode8_split(o8, n, nsym, b.p, b.len), 0);
		for (i = 0; i < n; i++)
			assert_int_equal(o8[i], syms[i]);
	}
	/* the same code as the plain block's; each stream that code's bits
	 * for its quarter */
	assert_int_equal(rckpt_huff_encode(&one, syms, n, nsym, 0), 0);
	hdr = 2 + ((size_t)(b.p[0] | b.p[1] << 8) + 1) / 2;
	assert_memory_equal(b.p, one.p, hdr);
	at = hdr + RCKPT_HUFF_SPLIT_BYTES;
	for (k = 0; k < 3; k++)
		l[k] = (size_t)b.p[hdr + 4 * k] | (size_t)b.p[hdr + 4 * k + 1] << 8 |
		       (size_t)b.p[hdr + 4 * k + 2] << 16 | (size_t)b.p[hdr + 4 * k + 3] << 24;
	assert_true(l[0] + l[1] + l[2] <= b.len - at);
	l[3] = b.len - at - l[0] - l[1] - l[2];
	blk = malloc(hdr + b.len);
	memcpy(blk, b.p, hdr);
	for (k = 0; k < 4; k++) {
		const size_t q = n / 4, m = k < 3 ? q : n - 3 * q;
		memcpy(blk + hdr, b.p + at, l[k]);
		if (m) {
			assert_int_equal(rckpt_huff_decode(out, m, nsym, blk, hdr + l[k]), 0);
			assert_memory_equal(out, syms + k * q, m * sizeof(*out));
		} else {
			assert_int_equal(l[k], 0);
		}
		at += l[k];
	}
	/* a plain decoder does not read it as its symbols, nor a split one
	 * a plain block */
	if (n >= 16) {
		assert_true(rckpt_huff_decode(out, n, nsym, b.p, b.len) != 0 ||
			    memcmp(out, syms, n * sizeof(*out)) != 0);
		assert_true(rckpt_huff_decode_split(out, n, nsym, one.p, one.len) != 0 ||
			    memcmp(out, syms, n * sizeof(*out)) != 0);
	}
	/* 16 symbols more a stream need 16 bits more than there are */
	assert_int_equal(rckpt_huff_decode_split(out, n + 64, nsym, b.p, b.len), -EBADMSG);
	/* a length past the block; damage anywhere */
	memcpy(blk, b.p, b.len);
	blk[hdr + 3] = 0x80;
	assert_int_equal(rckpt_huff_decode_split(out, n, nsym, blk, b.len), -EBADMSG);
	assert_int_equal(rckpt_huff_decode_split(out, n, nsym, b.p, hdr + 11), -EBADMSG);
	for (k = 0; k < 64; k++) {
		memcpy(blk, b.p, b.len);
		blk[rnd() % b.len] ^= (uint8_t)(1 + rnd() % 255);
		int rc = rckpt_huff_decode_split(out, n, nsym, blk, b.len);
		assert_true(rc == 0 || rc == -EBADMSG);
		rc = rckpt_huff_decode_split(out, n, nsym, blk, b.len - 1 - rnd() % b.len);
		assert_true(rc == 0 || rc == -EBADMSG);
	}
	free(blk);
	free(out);
	free(o8);
	rckpt_buf_free(&b);
	rckpt_buf_free(&one);
}

static void test_huff_split(void **state)
{
	enum { N = (1 << 17) + 3 };
	uint16_t *s = malloc(sizeof(*s) * N);
	size_t i, n;

	(void)state;
	for (i = 0; i < N; i++) /* skewed over 256, mixed lengths to 12 bits */
		s[i] = (uint16_t)(rnd() % 8 ? rnd() % 4 : rnd() % 256);
	split_round_trip(s, N, 256);
	for (n = 1; n < 40; n++) /* streams empty or of a few symbols */
		split_round_trip(s, n, 256);
	for (i = 0; i < N; i++) /* one-bit codes */
		s[i] = (uint16_t)(rnd() & 1 ? 3 : 250);
	split_round_trip(s, N, 256);
	for (i = 0; i < N; i++) /* an alphabet past 256: the u16 decoder */
		s[i] = (uint16_t)(rnd() % 4 ? rnd() % 16 : rnd() % 1000);
	split_round_trip(s, N, 1000);
	free(s);
}

/* A byte alphabet's split block decodes through up to three codes a look-up
 * (decode8_split), any other one code at a time (decode_split): damaged
 * anywhere, both must agree, on the result and on every symbol. */
static void test_huff_split_damaged(void **state)
{
	enum { N = (1 << 16) + 5 };
	uint16_t *s = malloc(sizeof(*s) * N), *o16 = malloc(sizeof(*o16) * N);
	uint8_t *o8 = malloc(N), *bad;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	size_t i, t, len, fails = 0;

	(void)state;
	for (i = 0; i < N; i++)
		s[i] = (uint16_t)(rnd() % 5 ? rnd() % 8 : rnd() % 200);
	assert_int_equal(rckpt_huff_encode(&b, s, N, 256, 1), 0);
	bad = malloc(b.len);
	for (t = 0; t < 300; t++) {
		int r8, r16;
		memcpy(bad, b.p, b.len);
		bad[rnd() % b.len] ^= (uint8_t)(1u << (rnd() % 8));
		if (t % 3 == 0)
			bad[rnd() % b.len] = (uint8_t)rnd();
		len = b.len - (t % 5 == 0 ? 1 + rnd() % 64 : 0); /* some truncated too */
		r8 = rckpt_huff_decode8_split(o8, N, 256, bad, len);
		r16 = rckpt_huff_decode_split(o16, N, 256, bad, len);
		assert_int_equal(r8, r16);
		fails += r8 != 0;
		if (r8 == 0)
			for (i = 0; i < N; i++)
				assert_int_equal(o8[i], o16[i]);
	}
	assert_true(fails > 0); /* damage was seen (a flipped bit may still decode) */
	free(bad);
	free(o8);
	free(o16);
	free(s);
	rckpt_buf_free(&b);
}

/* Fibonacci frequencies make the unlimited code 40 bits deep: the length
 * limit must fold it to 12 and stay decodable. */
static void test_huff_length_limit(void **state)
{
	uint64_t f[40], total = 0;
	uint16_t *s;
	size_t i, k, n = 0;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	f[0] = f[1] = 1;
	for (i = 2; i < 26; i++)
		f[i] = f[i - 1] + f[i - 2];
	for (i = 0; i < 26; i++)
		total += f[i];
	s = malloc(sizeof(*s) * total);
	for (i = 0; i < 26; i++)
		for (k = 0; k < f[i]; k++)
			s[n++] = (uint16_t)i;
	huff_round_trip(s, n, 26);
	assert_int_equal(rckpt_huff_encode(&b, s, n, 26, 0), 0);
	for (i = 0; i < 26; i++) { /* every length nibble within the limit */
		unsigned l = (b.p[2 + i / 2] >> (i & 1 ? 4 : 0)) & 15;
		assert_true(l >= 1 && l <= RCKPT_HUFF_MAX_BITS);
	}
	rckpt_buf_free(&b);
	free(s);
}

static void test_huff_rejects(void **state)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	uint16_t s[64], out[64];
	size_t i, k;

	(void)state;
	for (i = 0; i < 64; i++)
		s[i] = (uint16_t)(rnd() % 9);
	assert_int_equal(rckpt_huff_encode(&b, s, 64, 1, 0), -EINVAL);
	s[5] = 9;
	assert_int_equal(rckpt_huff_encode(&b, s, 64, 9, 0), -EINVAL); /* symbol >= nsym */
	s[5] = 1;
	memset(out, 0, sizeof(out));
	assert_int_equal(rckpt_huff_encode(&b, (uint16_t[]){ 3, 3, 3 }, 3, 9, 0), -EINVAL);
	assert_int_equal(rckpt_huff_encode(&b, s, 64, 9, 0), 0);
	for (k = 0; k < b.len; k++) /* every truncation */
		assert_int_equal(rckpt_huff_decode(out, 64, 9, b.p, k), -EBADMSG);
	assert_int_equal(rckpt_huff_decode(out, 64, 5, b.p, b.len), -EBADMSG); /* alphabet too big */
	for (k = 0; k < 3000; k++) { /* flips: error, or a valid decode; never a crash */
		uint8_t *c = malloc(b.len);
		memcpy(c, b.p, b.len);
		c[rnd() % b.len] ^= (uint8_t)(1u << (rnd() & 7));
		(void)rckpt_huff_decode(out, 64, 9, c, b.len);
		free(c);
	}
	rckpt_buf_free(&b);
}

/* ---- entropy streams ---- */

static int est_method(const uint16_t *s, size_t n, unsigned nsym, unsigned policy)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	uint16_t *out = malloc(sizeof(*out) * (n ? n : 1));
	rckpt_reader_t r;
	int m;

	assert_int_equal(rckpt_estream_encode(&b, s, n, nsym, policy, 3), 0);
	r = rckpt_reader(b.p, b.len);
	m = rckpt_estream_peek_method(&r);
	assert_int_equal(rckpt_estream_decode(out, n, nsym, &r), 0);
	assert_int_equal(rckpt_rd_left(&r), 0);
	assert_memory_equal(out, s, n * sizeof(*out));
	r = rckpt_reader(b.p, b.len);
	if (n)
		assert_int_equal(rckpt_estream_decode(out, n + 1, nsym, &r), -EBADMSG);
	free(out);
	rckpt_buf_free(&b);
	return m;
}

static void test_estream_choices(void **state)
{
	enum { N = 5000 };
	uint16_t s[N];
	size_t i;

	(void)state;
	for (i = 0; i < N; i++)
		s[i] = 4;
	assert_int_equal(est_method(s, N, 8, RCKPT_EST_TRY_ALL), RCKPT_EST_CONST);
	assert_int_equal(est_method(s, 0, 8, RCKPT_EST_TRY_ALL), RCKPT_EST_RAW);
	for (i = 0; i < N; i++) /* skewed, no structure: Huffman beats raw */
		s[i] = (uint16_t)(rnd() % 16 == 0 ? rnd() % 300 : rnd() % 3);
	assert_int_equal(est_method(s, N, 300, RCKPT_EST_TRY_HUFF), RCKPT_EST_HUFF);
	for (i = 0; i < N; i++) /* a repeating pattern: zstd wins */
		s[i] = (uint16_t)(i % 37);
	assert_int_equal(est_method(s, N, 37, RCKPT_EST_TRY_ALL), RCKPT_EST_ZSTD);
	for (i = 0; i < N; i++) /* uniform noise: raw is as good as it gets */
		s[i] = (uint16_t)(rnd() & 0xff);
	assert_int_equal(est_method(s, N, 256, RCKPT_EST_TRY_ALL), RCKPT_EST_RAW);
	assert_int_equal(est_method(s, N, 4096, 0), RCKPT_EST_RAW); /* u16 raw form */
	{ /* split: Huffman of 64 Ki symbols and more as four streams */
		enum { M = RCKPT_EST_SPLIT_MIN };
		uint16_t *t = malloc(sizeof(*t) * (M + 1));
		uint8_t *d = malloc(M + 1);
		uint16_t *d16 = malloc(sizeof(*d16) * (M + 1));
		rckpt_buf_t b = RCKPT_BUF_INIT;
		rckpt_reader_t r;
		for (i = 0; i <= M; i++)
			t[i] = (uint16_t)(rnd() % 16 == 0 ? rnd() % 200 : rnd() % 3);
		assert_int_equal(est_method(t, M - 1, 200, RCKPT_EST_TRY_HUFF | RCKPT_EST_SPLIT), RCKPT_EST_HUFF);
		assert_int_equal(est_method(t, M, 200, RCKPT_EST_TRY_HUFF), RCKPT_EST_HUFF);
		assert_int_equal(est_method(t, M, 200, RCKPT_EST_TRY_HUFF | RCKPT_EST_SPLIT), RCKPT_EST_HUFF4);
		assert_int_equal(rckpt_estream_encode(&b, t, M + 1, 200, RCKPT_EST_TRY_ALL | RCKPT_EST_SPLIT, 1), 0);
		assert_int_equal(b.p[0], RCKPT_EST_HUFF4);
		r = rckpt_reader(b.p, b.len);
		assert_int_equal(rckpt_estream_decode(d16, M + 1, 200, &r), 0);
		assert_int_equal(rckpt_rd_left(&r), 0);
		assert_memory_equal(d16, t, sizeof(*t) * (M + 1));
		r = rckpt_reader(b.p, b.len);
		assert_int_equal(rckpt_estream_decode8(d, M + 1, 256, &r), 0);
		assert_int_equal(rckpt_rd_left(&r), 0);
		for (i = 0; i <= M; i++)
			assert_int_equal(d[i], t[i]);
		r = rckpt_reader(b.p, b.len); /* one symbol more than the stream says */
		assert_int_equal(rckpt_estream_decode8(d, M, 256, &r), -EBADMSG);
		r = rckpt_reader(b.p, b.len); /* a code of 200 symbols read as 199's */
		assert_int_equal(rckpt_estream_decode8(d, M + 1, 199, &r), -EBADMSG);
		r = rckpt_reader(b.p, b.len);
		assert_int_equal(rckpt_estream_decode8(d, M + 1, 200, &r), 0);
		for (i = 0; i <= M; i++) /* raw and constant streams: each symbol < nsym */
			t[i] = (uint16_t)(i % 256);
		b.len = 0;
		assert_int_equal(rckpt_estream_encode(&b, t, 1000, 256, 0, 1), 0);
		assert_int_equal(b.p[0], RCKPT_EST_RAW);
		r = rckpt_reader(b.p, b.len);
		assert_int_equal(rckpt_estream_decode8(d, 1000, 255, &r), -EBADMSG);
		r = rckpt_reader(b.p, b.len);
		assert_int_equal(rckpt_estream_decode8(d, 1000, 256, &r), 0);
		b.len = 0;
		assert_int_equal(rckpt_estream_encode(&b, t + 7, 1, 256, 0, 1), 0);
		assert_int_equal(b.p[0], RCKPT_EST_CONST);
		r = rckpt_reader(b.p, b.len);
		assert_int_equal(rckpt_estream_decode8(d, 1, 7, &r), -EBADMSG);
		r = rckpt_reader(b.p, b.len);
		assert_int_equal(rckpt_estream_decode8(d, 1, 8, &r), 0);
		assert_int_equal(d[0], 7);
		rckpt_buf_free(&b);
		free(t);
		free(d);
		free(d16);
	}
}

/* ---- index streams ---- */

static const rckpt_istream_opts_t full = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };

static size_t is_round_trip(const uint8_t *cur, size_t n, unsigned lc, const uint8_t *prev, unsigned lp,
			    const rckpt_istream_opts_t *o)
{
	rckpt_buf_t b = RCKPT_BUF_INIT, b2 = RCKPT_BUF_INIT;
	uint8_t *out = malloc(n ? n : 1);
	rckpt_reader_t r;
	size_t len;

	assert_int_equal(rckpt_istream_encode(&b, cur, n, lc, prev, lp, o), 0);
	r = rckpt_reader(b.p, b.len);
	assert_int_equal(rckpt_istream_decode(out, n, lc, prev, lp, &r), 0);
	assert_int_equal(rckpt_rd_left(&r), 0);
	if (n)
		assert_memory_equal(out, cur, n);
	assert_int_equal(rckpt_istream_encode(&b2, cur, n, lc, prev, lp, o), 0);
	assert_int_equal(b.len, b2.len); /* deterministic */
	assert_memory_equal(b.p, b2.p, b.len);
	len = b.len;
	free(out);
	rckpt_buf_free(&b);
	rckpt_buf_free(&b2);
	return len;
}

static void test_istream_sizes_and_stages(void **state)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 1000, 4099, 65537 };
	static const unsigned stage_sets[] = { 0, RCKPT_IS_RLE, RCKPT_IS_REARRANGED,
					       RCKPT_IS_REARRANGED | RCKPT_IS_RLE };
	static const unsigned levels[][2] = { { 6, 6 }, { 10, 34 }, { 34, 10 }, { 1, 1 }, { 255, 255 } };
	rckpt_istream_scratch_t scratch = RCKPT_ISTREAM_SCRATCH_INIT;
	size_t si, k, i;

	(void)state;
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t n = sizes[si];
		uint8_t *cur = malloc(n + 1), *prev = malloc(n + 1);
		for (k = 0; k < sizeof(levels) / sizeof(levels[0]); k++) {
			unsigned lc = levels[k][0], lp = levels[k][1], st;
			for (i = 0; i < n; i++) { /* mostly unchanged, some moves */
				prev[i] = (uint8_t)(rnd() % lp);
				cur[i] = (uint8_t)(rnd() % 8 ? prev[i] % lc : rnd() % lc);
			}
			for (st = 0; st < 4; st++) {
				/* every other call through one scratch, grown and reused */
				rckpt_istream_opts_t o = { stage_sets[st], RCKPT_EST_TRY_ALL, 1,
							   st & 1 ? &scratch : NULL, 0, 0 };
				is_round_trip(cur, n, lc, prev, lp, &o);
				is_round_trip(cur, n, lc, NULL, 0, &o);
				o.est_policy = 0;
				is_round_trip(cur, n, lc, prev, lp, &o);
			}
		}
		free(cur);
		free(prev);
	}
	rckpt_istream_scratch_free(&scratch);
}

/* Long runs and all-equal input: RLE makes them tiny. */
static void test_istream_runs(void **state)
{
	enum { N = 1 << 20 };
	uint8_t *cur = malloc(N), *prev = malloc(N);
	size_t len, i;

	(void)state;
	memset(cur, 3, N);
	memset(prev, 3, N);
	len = is_round_trip(cur, N, 8, prev, 8, &full);
	assert_true(len < 64);
	len = is_round_trip(cur, N, 8, NULL, 0, &full);
	assert_true(len < 64);
	for (i = 0; i < N; i++) /* runs of every length 1..300 */
		cur[i] = (uint8_t)((i / (1 + i % 300)) % 5);
	is_round_trip(cur, N, 5, NULL, 0, &full);
	free(cur);
	free(prev);
}

/* The property the rearrangement exists for: when values in the same parent
 * bin move together, grouping by that bin turns scattered deltas into runs. */
static void test_istream_rearrangement_helps(void **state)
{
	enum { N = 200000 };
	uint8_t *cur = malloc(N), *prev = malloc(N);
	rckpt_istream_opts_t rle_only = { RCKPT_IS_RLE, RCKPT_EST_TRY_HUFF, 1, NULL, 0, 0 };
	size_t a, b, i;

	(void)state;
	for (i = 0; i < N; i++) {
		prev[i] = (uint8_t)(rnd() % 12);
		cur[i] = (uint8_t)(prev[i] % 3 == 0 ? (prev[i] + 1) % 12 : prev[i]);
	}
	a = is_round_trip(cur, N, 12, prev, 12, &rle_only);
	b = is_round_trip(cur, N, 12, prev, 12, &full);
	assert_true(b * 20 < a);
	free(cur);
	free(prev);
}

/* The encoder's sparse path (taken with a scratch when few levels change)
 * writes the same bytes as the scatter path (taken without one): changes at
 * the first and last positions, runs that cross group boundaries, runs of
 * equal nonzero deltas, and too many changes (the fallback). */
static void test_istream_sparse_path(void **state)
{
	static const size_t sizes[] = { 4096, 4097, 10007, 65536, 300001 };
	static const unsigned rates[] = { 0, 1, 37, 400, 3000 }; /* per 10,000 */
	rckpt_istream_scratch_t scratch = RCKPT_ISTREAM_SCRATCH_INIT;
	size_t si, ri, i;

	(void)state;
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (ri = 0; ri < sizeof(rates) / sizeof(rates[0]); ri++) {
			size_t n = sizes[si];
			uint8_t *cur = malloc(n), *prev = malloc(n), *back = malloc(n);
			rckpt_istream_opts_t with = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1,
						      &scratch, 0, 0 };
			rckpt_istream_opts_t without = with;
			rckpt_buf_t a = RCKPT_BUF_INIT, b = RCKPT_BUF_INIT;
			rckpt_reader_t r;
			without.scratch = NULL;
			for (i = 0; i < n; i++) {
				prev[i] = (uint8_t)((i / 7 + rnd() % 3) % 10);
				cur[i] = rnd() % 10000 < rates[ri] ? (uint8_t)((prev[i] + 1 + i % 3) % 12) : prev[i];
			}
			cur[0] = (uint8_t)((prev[0] + 2) % 12);
			cur[n - 1] = (uint8_t)((prev[n - 1] + 5) % 12);
			for (i = 100; i < 140; i++) /* equal nonzero deltas, adjacent in one group */
				if (prev[i] == prev[100])
					cur[i] = (uint8_t)((prev[i] + 3) % 12);
			assert_int_equal(rckpt_istream_encode(&a, cur, n, 12, prev, 10, &with), 0);
			assert_int_equal(rckpt_istream_encode(&b, cur, n, 12, prev, 10, &without), 0);
			assert_int_equal(a.len, b.len);
			assert_memory_equal(a.p, b.p, a.len);
			r = rckpt_reader(a.p, a.len);
			assert_int_equal(rckpt_istream_decode(back, n, 12, prev, 10, &r), 0);
			assert_memory_equal(back, cur, n);
			cur[n / 2] = 12; /* out of range: refused on either path */
			assert_int_equal(rckpt_istream_encode(&a, cur, n, 12, prev, 10, &with), -EINVAL);
			rckpt_buf_free(&a);
			rckpt_buf_free(&b);
			free(cur);
			free(prev);
			free(back);
		}
	rckpt_istream_scratch_free(&scratch);
}

/* The CTX form: per parent level a frequency table and one rANS stream. On
 * deltas whose spread depends on the parent's level (as a pruned or edge
 * level's does) it is chosen and smaller than run length + Huffman; the
 * sparse path (with a scratch) writes the same bytes; a group of one
 * symbol, 2 and 255 levels, and a level count that changes all decode. */
static void test_istream_ctx(void **state)
{
	enum { N = 40000 };
	static const unsigned lv[][2] = { { 34, 34 }, { 2, 2 }, { 255, 255 }, { 20, 34 }, { 34, 20 } };
	const rckpt_istream_opts_t ctx = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
					   RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
	rckpt_istream_scratch_t sc = RCKPT_ISTREAM_SCRATCH_INIT;
	rckpt_istream_opts_t ctx_sc = ctx;
	uint8_t *cur = malloc(N), *prev = malloc(N);
	size_t i, k, a, b;

	(void)state;
	ctx_sc.scratch = &sc;
	for (k = 0; k < sizeof(lv) / sizeof(lv[0]); k++) {
		const unsigned lc = lv[k][0], lp = lv[k][1];
		rckpt_buf_t x = RCKPT_BUF_INIT, y = RCKPT_BUF_INIT;
		for (i = 0; i < N; i++) {
			unsigned p = (unsigned)(rnd() % lp), c = p;
			if (p == 0) /* one symbol only */
				c = 0;
			else if (p % 2) /* mostly still */
				c = rnd() % 16 ? p : p - 1;
			else /* spread */
				c = p + (unsigned)(rnd() % 3) - 1;
			prev[i] = (uint8_t)p;
			cur[i] = (uint8_t)(c >= lc ? lc - 1 : c);
		}
		a = is_round_trip(cur, N, lc, prev, lp, &full);
		b = is_round_trip(cur, N, lc, prev, lp, &ctx);
		assert_int_equal(rckpt_istream_encode(&x, cur, N, lc, prev, lp, &ctx), 0);
		assert_int_equal(rckpt_istream_encode(&y, cur, N, lc, prev, lp, &ctx_sc), 0);
		assert_int_equal(x.len, y.len); /* the sparse path's symbols */
		assert_memory_equal(x.p, y.p, x.len);
		assert_int_equal(x.p[0], RCKPT_IS_DELTA | RCKPT_IS_REARRANGED | RCKPT_IS_CTX);
		print_message("levels %u/%u: run length + Huffman %zu bytes, CTX %zu\n", lc, lp, a, b);
		/* at least 5% smaller; with 255 levels the tables take more */
		assert_true(lp > 64 ? b < a : b * 100 < a * 95);
		rckpt_buf_free(&x);
		rckpt_buf_free(&y);
	}
	/* every level the same: one table of one symbol, no rANS byte */
	memset(cur, 3, N);
	memset(prev, 3, N);
	assert_true(is_round_trip(cur, N, 6, prev, 6, &ctx) <= is_round_trip(cur, N, 6, prev, 6, &full));
	/* short streams stay in the old form */
	for (i = 0; i < 100; i++) {
		prev[i] = (uint8_t)(rnd() % 6);
		cur[i] = (uint8_t)(prev[i] % 2 ? prev[i] : rnd() % 6);
	}
	{
		rckpt_buf_t x = RCKPT_BUF_INIT;
		assert_int_equal(rckpt_istream_encode(&x, cur, 100, 6, prev, 6, &ctx), 0);
		assert_int_equal(x.p[0] & RCKPT_IS_CTX, 0);
		rckpt_buf_free(&x);
	}
	rckpt_istream_scratch_free(&sc);
	free(cur);
	free(prev);
}

/* A CTX stream is read against its contract: with RLE, without
 * REARRANGED or without a parent it is refused; every truncation is
 * refused; a flipped bit decodes to levels in range or is refused (and
 * the rANS state's end check refuses nearly all). */
static void test_istream_ctx_rejects(void **state)
{
	enum { N = 5000 };
	const rckpt_istream_opts_t ctx = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
					   RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
	uint8_t cur[N], prev[N], out[N];
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_reader_t r;
	size_t i, k, refused = 0, flips = 3000;

	(void)state;
	for (i = 0; i < N; i++) {
		prev[i] = (uint8_t)(rnd() % 8);
		cur[i] = (uint8_t)(prev[i] < 4 ? prev[i] : (prev[i] + rnd() % 3) % 8);
	}
	assert_int_equal(rckpt_istream_encode(&b, cur, N, 8, prev, 8, &ctx), 0);
	assert_int_equal(b.p[0], RCKPT_IS_DELTA | RCKPT_IS_REARRANGED | RCKPT_IS_CTX);
	{
		static const uint8_t bad_stages[] = { RCKPT_IS_DELTA | RCKPT_IS_CTX,
						      RCKPT_IS_DELTA | RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
						      0x10 | RCKPT_IS_DELTA | RCKPT_IS_REARRANGED | RCKPT_IS_CTX };
		const uint8_t keep = b.p[0];
		for (k = 0; k < sizeof(bad_stages); k++) {
			b.p[0] = bad_stages[k];
			r = rckpt_reader(b.p, b.len);
			assert_int_equal(rckpt_istream_decode(out, N, 8, prev, 8, &r), -EBADMSG);
		}
		b.p[0] = keep;
	}
	r = rckpt_reader(b.p, b.len); /* without a parent */
	assert_int_equal(rckpt_istream_decode(out, N, 8, NULL, 0, &r), -EBADMSG);
	r = rckpt_reader(b.p, b.len); /* a parent other than the encoder's */
	prev[0] = (uint8_t)((prev[0] + 1) % 8);
	assert_int_equal(rckpt_istream_decode(out, N, 8, prev, 8, &r), -EBADMSG);
	prev[0] = (uint8_t)((prev[0] + 7) % 8);
	r = rckpt_reader(b.p, b.len); /* a parent level past lprev */
	assert_int_equal(rckpt_istream_decode(out, N, 8, prev, 6, &r), -EINVAL);
	r = rckpt_reader(b.p, b.len);
	assert_int_equal(rckpt_istream_decode(out, N, 8, prev, 8, &r), 0);
	assert_memory_equal(out, cur, N);
	for (k = 0; k < b.len; k++) {
		r = rckpt_reader(b.p, k);
		assert_int_equal(rckpt_istream_decode(out, N, 8, prev, 8, &r), -EBADMSG);
	}
	for (k = 0; k < 2 * flips; k++) { /* anywhere, then in the rANS bytes */
		uint8_t *c = malloc(b.len);
		const size_t at = k < flips ? 1 + rnd() % (b.len - 1) : b.len / 2 + rnd() % (b.len / 2);
		int rc;
		memcpy(c, b.p, b.len);
		c[at] ^= (uint8_t)(1u << (rnd() & 7));
		r = rckpt_reader(c, b.len);
		rc = rckpt_istream_decode(out, N, 8, prev, 8, &r);
		if (rc == 0) {
			for (i = 0; i < N; i++)
				assert_true(out[i] < 8);
		} else {
			assert_int_equal(rc, -EBADMSG);
			refused += k >= flips;
		}
		free(c);
	}
	print_message("CTX: %zu of %zu flips in the rANS bytes refused\n", refused, flips);
	assert_true(refused * 100 >= flips * 99);
	rckpt_buf_free(&b);
}

static void test_istream_rejects(void **state)
{
	enum { N = 3000 };
	uint8_t cur[N], prev[N], out[N];
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_reader_t r;
	size_t i, k;

	(void)state;
	for (i = 0; i < N; i++) {
		prev[i] = (uint8_t)(rnd() % 6);
		cur[i] = (uint8_t)(rnd() % 4 ? prev[i] : rnd() % 6);
	}
	cur[7] = 6;
	assert_int_equal(rckpt_istream_encode(&b, cur, N, 6, prev, 6, &full), -EINVAL);
	cur[7] = 5;
	assert_int_equal(rckpt_istream_encode(&b, cur, N, 0, prev, 6, &full), -EINVAL);
	assert_int_equal(rckpt_istream_encode(&b, cur, N, 256, prev, 6, &full), -EINVAL);
	assert_int_equal(rckpt_istream_encode(&b, cur, N, 6, prev, 6, &full), 0);

	r = rckpt_reader(b.p, b.len); /* a delta stream read as a base stream */
	assert_int_equal(rckpt_istream_decode(out, N, 6, NULL, 0, &r), -EBADMSG);
	r = rckpt_reader(b.p, b.len); /* wrong count */
	assert_int_equal(rckpt_istream_decode(out, N - 1, 6, prev, 6, &r), -EBADMSG);
	r = rckpt_reader(b.p, b.len); /* fewer levels than the values need */
	assert_int_equal(rckpt_istream_decode(out, N, 3, prev, 6, &r), -EBADMSG);
	for (k = 0; k < b.len; k++) { /* every truncation */
		r = rckpt_reader(b.p, k);
		assert_int_equal(rckpt_istream_decode(out, N, 6, prev, 6, &r), -EBADMSG);
	}
	for (k = 0; k < 5000; k++) { /* random flips: no crash, bounded output */
		uint8_t *c = malloc(b.len);
		int rc;
		memcpy(c, b.p, b.len);
		c[rnd() % b.len] ^= (uint8_t)(1u << (rnd() & 7));
		r = rckpt_reader(c, b.len);
		rc = rckpt_istream_decode(out, N, 6, prev, 6, &r);
		if (rc == 0)
			for (i = 0; i < N; i++)
				assert_true(out[i] < 6);
		else
			assert_int_equal(rc, -EBADMSG);
		free(c);
	}
	rckpt_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_vectors),
		cmocka_unit_test(test_crc32c_paths_agree),
		cmocka_unit_test(test_crc32c_long),
		cmocka_unit_test(test_huff_distributions),
		cmocka_unit_test(test_huff_split),
		cmocka_unit_test(test_huff_split_damaged),
		cmocka_unit_test(test_huff_length_limit),
		cmocka_unit_test(test_huff_rejects),
		cmocka_unit_test(test_estream_choices),
		cmocka_unit_test(test_istream_sizes_and_stages),
		cmocka_unit_test(test_istream_runs),
		cmocka_unit_test(test_istream_rearrangement_helps),
		cmocka_unit_test(test_istream_sparse_path),
		cmocka_unit_test(test_istream_rejects),
		cmocka_unit_test(test_istream_ctx),
		cmocka_unit_test(test_istream_ctx_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
