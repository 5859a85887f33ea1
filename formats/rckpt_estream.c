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
		rc = rckpt_huff_encode(&huff, syms, n, nsym);
		if (rc)
			goto out;
		if (huff.len < best_len) {
			best = RCKPT_EST_HUFF;
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
	       best == RCKPT_EST_HUFF ? huff.p : best == RCKPT_EST_ZSTD ? zbuf : raw, best_len);
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
		if (n == 0)
			goto bad;
		if ((rc = rckpt_huff_decode(syms, n, nsym, p, len)) == -ENOMEM)
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
		got = ZSTD_decompress(raw, n * width, p, len);
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
