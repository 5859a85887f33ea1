/*
 * rckpt_record_geometry.c — a record's segments and element count read from
 * its headers, every payload skipped unread: what the OSD checks a record
 * against before it takes it (formats/checkpoint.md).
 */
#include "rckpt_record.h"

#include <errno.h>
#include <stdint.h>

#include "rckpt_bytes.h"
#include "rckpt_estream.h"
#include "rckpt_istream.h"

/* A blob; predicted (pred_ok) only as the decoder takes it: in a delta
 * record of version 4 or later, for lossless and protected values; PLANES
 * (planes_ok) for lossless values in a base or delta of version 5. */
static int blob_skip(rckpt_reader_t *r, unsigned pred_ok, unsigned planes_ok)
{
	unsigned method = rckpt_rd_u8(r);
	size_t len = rckpt_rd_u32(r);
	if ((method & RCKPT_BLOB_PREDICTED) && pred_ok)
		method &= ~RCKPT_BLOB_PREDICTED;
	if ((method != RCKPT_BLOB_RAW && method != RCKPT_BLOB_ZSTD &&
	     (method != RCKPT_BLOB_PLANES || !planes_ok)) ||
	    rckpt_rd_bytes(r, len) == NULL)
		return -EBADMSG;
	return 0;
}

/* An entropy stream of an index stream: a split Huffman block (method
 * 4) only in a record of version 6 or later. */
static int estream_skip(rckpt_reader_t *r, unsigned version)
{
	unsigned method = rckpt_rd_u8(r);
	size_t len;
	(void)rckpt_rd_u32(r); /* count */
	len = rckpt_rd_u32(r);
	if (method > (version >= 6 ? RCKPT_EST_HUFF4 : RCKPT_EST_ZSTD) || rckpt_rd_bytes(r, len) == NULL)
		return -EBADMSG;
	return 0;
}

/* An index stream; CTX only in a record of version 3 or later. */
static int istream_skip(rckpt_reader_t *r, unsigned version)
{
	unsigned stages = rckpt_rd_u8(r);
	int rc;
	if (r->err || (stages & ~RCKPT_IS_KNOWN))
		return -EBADMSG;
	if ((stages & RCKPT_IS_CTX) &&
	    (version < 3 || (stages & ~RCKPT_IS_CTX) != (RCKPT_IS_DELTA | RCKPT_IS_REARRANGED)))
		return -EBADMSG; /* as the decoder: CTX is a rearranged delta's, without RLE */
	if (stages & RCKPT_IS_CTX) { /* u32 length, the body */
		size_t len = rckpt_rd_u32(r);
		return rckpt_rd_bytes(r, len) == NULL ? -EBADMSG : 0;
	}
	if (stages & RCKPT_IS_RLE) {
		(void)rckpt_rd_u32(r); /* tokens */
		(void)rckpt_rd_u32(r); /* run-length bytes */
	}
	rc = estream_skip(r, version);
	if (rc == 0 && (stages & RCKPT_IS_RLE))
		rc = estream_skip(r, version);
	return rc;
}

int rckpt_record_geometry(uint32_t *nseg, uint64_t *elements, const uint8_t *src, size_t len)
{
	unsigned kind;
	uint64_t step, parent, sum = 0;
	uint32_t n, i;
	unsigned pred_ok;
	rckpt_reader_t r;
	int rc = rckpt_record_check(&kind, &step, &parent, src, len);

	*nseg = 0;
	*elements = 0;
	if (rc)
		return rc;
	r = rckpt_reader(src + 24, 4);
	n = rckpt_rd_u32(&r);
	pred_ok = kind == RCKPT_REC_DELTA && src[4] >= 4;
	r = rckpt_reader(src + RCKPT_RECORD_HEADER_BYTES, len - RCKPT_RECORD_HEADER_BYTES - 4);
	for (i = 0; i < n; i++) {
		uint64_t e;
		unsigned enc, b;
		(void)rckpt_rd_u32(&r); /* tensor */
		(void)rckpt_rd_u64(&r); /* first */
		e = rckpt_rd_u64(&r);
		enc = rckpt_rd_u8(&r);
		(void)rckpt_rd_u8(&r); /* dtype */
		(void)rckpt_rd_u16(&r); /* transform: read by the decoder */
		if (r.err || e > RCKPT_EST_MAX_COUNT || e > UINT64_MAX - sum)
			return -EBADMSG;
		sum += e;
		if (enc == RCKPT_SEG_LOSSLESS) {
			rc = blob_skip(&r, pred_ok, kind != RCKPT_REC_SPARSE && src[4] >= 5);
		} else if (enc != RCKPT_SEG_QUANTIZED) {
			rc = -EBADMSG;
		} else if (kind == RCKPT_REC_SPARSE) {
			(void)rckpt_rd_u32(&r); /* block */
			(void)rckpt_rd_u32(&r); /* blocks stored */
			rc = blob_skip(&r, 0, 0);
			(void)rckpt_rd_u64(&r); /* protected */
			if (rc == 0)
				rc = blob_skip(&r, 0, 0);
			if (rc == 0)
				rc = istream_skip(&r, src[4]);
		} else {
			b = rckpt_rd_u8(&r);
			if (b < 1 || b > RCKPT_SEG_MAX_BINS || rckpt_rd_bytes(&r, 4 * (size_t)b) == NULL)
				return -EBADMSG;
			(void)rckpt_rd_u64(&r); /* protected */
			rc = blob_skip(&r, pred_ok, 0);
			if (rc == 0)
				rc = istream_skip(&r, src[4]);
		}
		if (rc || r.err)
			return -EBADMSG;
	}
	if (rckpt_rd_left(&r) != 0)
		return -EBADMSG;
	*nseg = n;
	*elements = sum;
	return 0;
}
