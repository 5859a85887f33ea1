/*
 * rckpt_estream.c — entropy stream: header, then the payload of one method.
 *
 *   u8  method   (enum rckpt_est_method)
 *   u32 count    symbols in the stream
 *   u32 length   payload bytes
 *   ... payload
 */
#include "rckpt_estream.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "rckpt_huff.h"

#define HDR_BYTES 9u

static size_t sym_width(unsigned nsym)
{
	return nsym <= 256 ? 1 : 2;
}

static void put_hdr(uint8_t *p, unsigned method, size_t n, size_t len)
{
	rckpt_writer_t w = rckpt_writer(p, HDR_BYTES);
	rckpt_wr_u8(&w, (uint8_t)method);
	rckpt_wr_u32(&w, (uint32_t)n);
	rckpt_wr_u32(&w, (uint32_t)len);
}

/* The raw form: u8 or u16 little-endian per symbol. */
static void to_raw(uint8_t *dst, const uint16_t *syms, size_t n, size_t width)
{
	size_t i;
	if (width == 1) {
		for (i = 0; i < n; i++)
			dst[i] = (uint8_t)syms[i];
	} else {
		for (i = 0; i < n; i++) {
			dst[2 * i] = (uint8_t)syms[i];
			dst[2 * i + 1] = (uint8_t)(syms[i] >> 8);
		}
	}
}

static int from_raw(uint16_t *syms, const uint8_t *src, size_t n, size_t width, unsigned nsym)
{
	size_t i;
	for (i = 0; i < n; i++) {
		unsigned v = width == 1 ? src[i] : (unsigned)src[2 * i] | (unsigned)src[2 * i + 1] << 8;
		if (v >= nsym)
			return -EBADMSG;
		syms[i] = (uint16_t)v;
	}
	return 0;
}

int rckpt_estream_encode(rckpt_buf_t *out, const uint16_t *syms, size_t n, unsigned nsym,
			 unsigned policy, int zstd_level)
{
	size_t width = sym_width(nsym), rawlen, i, start = out->len, best_len;
	rckpt_buf_t huff = RCKPT_BUF_INIT;
	uint8_t *raw = NULL, *zbuf = NULL;
	const int split = (policy & RCKPT_EST_SPLIT) && n >= RCKPT_EST_SPLIT_MIN;
	unsigned best = RCKPT_EST_RAW;
	int rc, distinct_one = n > 0;

	if (nsym == 0 || nsym > RCKPT_EST_MAX_SYMBOLS || n > RCKPT_EST_MAX_COUNT)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (syms[i] >= nsym)
			return -EINVAL;
		if (syms[i] != syms[0])
			distinct_one = 0;
	}
	if (distinct_one) {
		rc = rckpt_buf_reserve(out, HDR_BYTES + 2);
		if (rc)
			return rc;
		put_hdr(out->p + start, RCKPT_EST_CONST, n, 2);
		out->p[start + HDR_BYTES] = (uint8_t)syms[0];
		out->p[start + HDR_BYTES + 1] = (uint8_t)(syms[0] >> 8);
		out->len += HDR_BYTES + 2;
		return 0;
	}
	rawlen = n * width;
	best_len = rawlen;
	raw = malloc(rawlen ? rawlen : 1);
	if (raw == NULL)
		return -ENOMEM;
	to_raw(raw, syms, n, width);
	if ((policy & RCKPT_EST_TRY_HUFF) && n > 0 && nsym >= 2) {
		rc = rckpt_huff_encode(&huff, syms, n, nsym, split);
		if (rc)
			goto out;
		if (huff.len < best_len) {
			best = split ? RCKPT_EST_HUFF4 : RCKPT_EST_HUFF;
			best_len = huff.len;
		}
	}
	if ((policy & RCKPT_EST_TRY_ZSTD) && n > 0) {
		size_t bound = ZSTD_compressBound(rawlen), zlen;
		zbuf = malloc(bound);
		if (zbuf == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		zlen = ZSTD_compress(zbuf, bound, raw, rawlen, zstd_level);
		if (!ZSTD_isError(zlen) && zlen < best_len) {
			best = RCKPT_EST_ZSTD;
			best_len = zlen;
		}
	}
	if (best_len > UINT32_MAX) {
		rc = -EFBIG;
		goto out;
	}
	rc = rckpt_buf_reserve(out, HDR_BYTES + best_len);
	if (rc)
		goto out;
	put_hdr(out->p + start, best, n, best_len);
	memcpy(out->p + start + HDR_BYTES,
	       best == RCKPT_EST_ZSTD ? zbuf : best != RCKPT_EST_RAW ? huff.p : raw, best_len);
	out->len += HDR_BYTES + best_len;
out:
	rckpt_buf_free(&huff);
	free(raw);
	free(zbuf);
	return rc;
}

int rckpt_estream_peek_method(const rckpt_reader_t *r)
{
	return rckpt_rd_left(r) >= HDR_BYTES ? r->p[r->pos] : -1;
}

void rckpt_zws_free(rckpt_zws_t *w)
{
	ZSTD_freeDCtx(w->dctx);
	w->dctx = NULL;
}

size_t rckpt_zstd_decompress(const rckpt_reader_t *r, void *dst, size_t n, const void *src, size_t len)
{
	rckpt_zws_t *w = r->zws;
	if (w && w->dctx == NULL)
		w->dctx = ZSTD_createDCtx(); /* (NULL: as without a workspace) */
	return w && w->dctx ? ZSTD_decompressDCtx(w->dctx, dst, n, src, len) : ZSTD_decompress(dst, n, src, len);
}

int rckpt_estream_decode(uint16_t *syms, size_t n, unsigned nsym, rckpt_reader_t *r)
{
	size_t width = sym_width(nsym), i;
	unsigned method = rckpt_rd_u8(r);
	size_t count = rckpt_rd_u32(r), len = rckpt_rd_u32(r);
	const uint8_t *p = rckpt_rd_bytes(r, len);
	uint8_t *raw;
	int rc;

	if (p == NULL || count != n || nsym == 0 || nsym > RCKPT_EST_MAX_SYMBOLS)
		goto bad;
	switch (method) {
	case RCKPT_EST_RAW:
		if (len != n * width || from_raw(syms, p, n, width, nsym))
			goto bad;
		return 0;
	case RCKPT_EST_CONST: {
		unsigned v;
		if (len != 2 || n == 0)
			goto bad;
		v = (unsigned)p[0] | (unsigned)p[1] << 8;
		if (v >= nsym)
			goto bad;
		for (i = 0; i < n; i++)
			syms[i] = (uint16_t)v;
		return 0;
	}
	case RCKPT_EST_HUFF:
	case RCKPT_EST_HUFF4:
		if (n == 0)
			goto bad;
		rc = method == RCKPT_EST_HUFF ? rckpt_huff_decode(syms, n, nsym, p, len)
					      : rckpt_huff_decode_split(syms, n, nsym, p, len);
		if (rc == -ENOMEM)
			return rc; /* out of memory is not damage */
		if (rc)
			goto bad;
		return 0;
	case RCKPT_EST_ZSTD: {
		unsigned long long size = ZSTD_getFrameContentSize(p, len);
		size_t got;
		if (n == 0 || size != (unsigned long long)(n * width))
			goto bad;
		raw = malloc(n * width);
		if (raw == NULL)
			return -ENOMEM;
		got = rckpt_zstd_decompress(r, raw, n * width, p, len);
		rc = (ZSTD_isError(got) || got != n * width) ? -EBADMSG
							    : from_raw(syms, raw, n, width, nsym);
		free(raw);
		if (rc)
			goto bad;
		return 0;
	}
	}
bad:
	r->err = -EBADMSG;
	return -EBADMSG;
}

/* ---- byte symbols (alphabet 256), as a PLANES blob's planes are ---- */

/* n symbols of these counts take at least this many bytes in any prefix
 * code (less a margin for rounding). */
static double entropy_bytes(const uint64_t *freq, size_t n)
{
	double bits = 0;
	unsigned s;
	for (s = 0; s < 256; s++)
		if (freq[s])
			bits -= (double)freq[s] * log2((double)freq[s] / (double)n);
	return bits / 8 * (1 - 1e-9);
}

/* A plane is Huffman coded when that saves at least 1/32 of its bytes:
 * below it, decoding the code costs more time than the bytes it saves
 * (a mantissa's top byte, 7.9 bits of entropy, stays raw). */
#define RCKPT_EST8_MIN_GAIN 32

int rckpt_estream_plan8(rckpt_est8_plan_t *p, const uint8_t *syms, size_t n)
{
	uint64_t freq[4][256] = { { 0 } };
	size_t i, hbytes = 0;
	unsigned s, present = 0;
	int rc;

	if (n > RCKPT_EST_MAX_COUNT)
		return -EINVAL;
	/* four tables, so that runs of one byte do not stall on one counter */
	for (i = 0; i + 4 <= n; i += 4) {
		freq[0][syms[i]]++;
		freq[1][syms[i + 1]]++;
		freq[2][syms[i + 2]]++;
		freq[3][syms[i + 3]]++;
	}
	for (; i < n; i++)
		freq[0][syms[i]]++;
	for (s = 0; s < 256; s++) {
		freq[0][s] += freq[1][s] + freq[2][s] + freq[3][s];
		present += freq[0][s] != 0;
	}
	p->method = RCKPT_EST_RAW;
	p->bytes = HDR_BYTES + n;
	if (present == 1) {
		p->method = RCKPT_EST_CONST;
		p->bytes = HDR_BYTES + 2;
		return 0;
	}
	/* No code is shorter than the symbols' order-0 entropy: where that
	 * alone saves too little (a mantissa's plane), raw, without building
	 * one. */
	if (present >= 2 && entropy_bytes(freq[0], n) < (double)(n - n / RCKPT_EST8_MIN_GAIN)) {
		if ((rc = rckpt_huff_plan(p->len, &hbytes, freq[0], 256)))
			return rc;
		if (hbytes < n - n / RCKPT_EST8_MIN_GAIN) { /* worth its decoding */
			p->method = RCKPT_EST_HUFF;
			p->bytes = HDR_BYTES + hbytes;
		}
	}
	return 0;
}

int rckpt_estream_emit8(rckpt_buf_t *out, const rckpt_est8_plan_t *p, const uint8_t *syms, size_t n)
{
	const size_t start = out->len;
	int rc;

	if ((rc = rckpt_buf_reserve(out, p->bytes)))
		return rc;
	out->len += HDR_BYTES;
	switch (p->method) {
	case RCKPT_EST_CONST:
		out->p[out->len] = syms[0];
		out->p[out->len + 1] = 0;
		out->len += 2;
		break;
	case RCKPT_EST_HUFF:
		if ((rc = rckpt_huff_encode8(out, syms, n, p->len, p->bytes - HDR_BYTES))) {
			out->len = start;
			return rc;
		}
		break;
	default:
		if (n)
			memcpy(out->p + out->len, syms, n);
		out->len += n;
	}
	put_hdr(out->p + start, p->method, n, out->len - start - HDR_BYTES);
	return 0;
}

int rckpt_estream_encode8(rckpt_buf_t *out, const uint8_t *syms, size_t n)
{
	rckpt_est8_plan_t p;
	int rc = rckpt_estream_plan8(&p, syms, n);
	return rc ? rc : rckpt_estream_emit8(out, &p, syms, n);
}

int rckpt_estream_decode8(uint8_t *dst, size_t n, unsigned nsym, rckpt_reader_t *r)
{
	const size_t at = r->pos;
	uint16_t *syms;
	size_t i;
	int rc;

	if (nsym == 0 || nsym > 256) {
		r->err = -EBADMSG;
		return -EBADMSG;
	}
	/* raw, constant and Huffman (split or not) straight into dst; zstd
	 * through the general decoder */
	if (rckpt_rd_left(r) >= HDR_BYTES) {
		const unsigned method = r->p[at];
		rckpt_reader_t h = rckpt_reader(r->p + at + 1, HDR_BYTES - 1);
		const size_t count = rckpt_rd_u32(&h), len = rckpt_rd_u32(&h);
		const uint8_t *p = r->p + at + HDR_BYTES;
		if (count == n && len <= rckpt_rd_left(r) - HDR_BYTES &&
		    (method == RCKPT_EST_RAW || method == RCKPT_EST_CONST || method == RCKPT_EST_HUFF ||
		     method == RCKPT_EST_HUFF4)) {
			rc = -EBADMSG;
			if (method == RCKPT_EST_RAW && len == n) {
				unsigned bad = 0;
				size_t i;
				if (n)
					memcpy(dst, p, n);
				for (i = 0; nsym < 256 && i < n; i++) /* no branch: it vectorizes */
					bad |= (unsigned)(p[i] >= nsym);
				rc = bad ? -EBADMSG : 0;
			} else if (method == RCKPT_EST_CONST && len == 2 && n > 0 && p[1] == 0 && p[0] < nsym) {
				memset(dst, p[0], n);
				rc = 0;
			} else if (method == RCKPT_EST_HUFF && n > 0) { /* its code's alphabet within nsym */
				rc = rckpt_huff_decode8(dst, n, nsym, p, len);
			} else if (method == RCKPT_EST_HUFF4 && n > 0) {
				rc = rckpt_huff_decode8_split(dst, n, nsym, p, len);
			}
			if (rc == -ENOMEM)
				return rc;
			if (rc) {
				r->err = -EBADMSG;
				return -EBADMSG;
			}
			r->pos += HDR_BYTES + len;
			return 0;
		}
	}
	if ((syms = malloc(n ? n * sizeof(*syms) : 1)) == NULL)
		return -ENOMEM;
	rc = rckpt_estream_decode(syms, n, nsym, r);
	for (i = 0; rc == 0 && i < n; i++)
		dst[i] = (uint8_t)syms[i];
	free(syms);
	return rc;
}
