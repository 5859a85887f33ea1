/*
 * rckpt_record.c — chunk record encoder and materializing decoder.
 */
#include "rckpt_record.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "rckpt_bytes.h"
#include "rckpt_crc32c.h"
#include "rckpt_estream.h"
#include "rckpt_planes.h"

#define BLOB_RAW RCKPT_BLOB_RAW
#define BLOB_ZSTD RCKPT_BLOB_ZSTD
#define BLOB_ZSTD_LEVEL 3

size_t rckpt_dtype_size(unsigned dtype)
{
	switch (dtype) {
	case RCKPT_DT_F32:
		return 4;
	case RCKPT_DT_F16:
	case RCKPT_DT_BF16:
		return 2;
	}
	return 0;
}

static int centroids_ok(const float *c, unsigned nb)
{
	unsigned j;
	if (nb < 1 || nb > RCKPT_SEG_MAX_BINS)
		return 0;
	for (j = 0; j < nb; j++)
		if (!isfinite(c[j]) || (j && !(c[j] > c[j - 1])))
			return 0;
	return 1;
}

/* ---- blobs: u8 method (raw or zstd, maybe predicted), u32 length, payload ---- */

static int blob_put_m(rckpt_buf_t *out, const void *src, size_t n, unsigned flags)
{
	size_t bound = ZSTD_compressBound(n), z = 0;
	uint8_t *zb = NULL;
	int rc, use_zstd = 0;

	if (n > UINT32_MAX)
		return -EINVAL;
	if (n >= 64) {
		zb = malloc(bound);
		if (zb == NULL)
			return -ENOMEM;
		z = ZSTD_compress(zb, bound, src, n, BLOB_ZSTD_LEVEL);
		use_zstd = !ZSTD_isError(z) && z < n;
	}
	rc = rckpt_buf_reserve(out, 5 + (use_zstd ? z : n));
	if (rc == 0) {
		rckpt_writer_t w = rckpt_writer(out->p + out->len, 5 + (use_zstd ? z : n));
		rckpt_wr_u8(&w, (uint8_t)((use_zstd ? BLOB_ZSTD : BLOB_RAW) | flags));
		rckpt_wr_u32(&w, (uint32_t)(use_zstd ? z : n));
		rckpt_wr_bytes(&w, use_zstd ? (const void *)zb : src, use_zstd ? z : n);
		out->len += w.pos;
	}
	free(zb);
	return rc;
}

static int blob_put(rckpt_buf_t *out, const void *src, size_t n)
{
	return blob_put_m(out, src, n, 0);
}

/* Predicted bytes (formats/checkpoint.md "Predicted blobs"): n bytes of
 * elements w bytes wide, each XORed with its prediction (element-major,
 * pred[i * w + j]), as w byte planes (byte j of every element, then byte
 * j + 1). Byte j of element i goes from src[i * si + j * sj] to
 * dst[i * di + j * dj]: to planes (di 1, dj m; si w, sj 1) or back (the
 * strides swapped). dst may be pred: each byte is read before it is
 * written. */
static void planes_xor(uint8_t *dst, size_t di, size_t dj, const uint8_t *src, size_t si, size_t sj,
		       const uint8_t *pred, size_t n, unsigned w)
{
	const size_t m = n / w;
	size_t i;
	unsigned j;
	for (j = 0; j < w; j++)
		for (i = 0; i < m; i++)
			dst[i * di + j * dj] = src[i * si + j * sj] ^ pred[i * w + j];
}

static void plane_xor(uint8_t *dst, const uint8_t *src, const uint8_t *pred, size_t n, unsigned w)
{
	planes_xor(dst, 1, n / w, src, w, 1, pred, n, w);
}

static void unplane_xor(uint8_t *dst, const uint8_t *planes, const uint8_t *pred, size_t n,
			unsigned w)
{
	planes_xor(dst, w, 1, planes, 1, n / w, pred, n, w);
}

/* The blob of src[0..n); with pred (a delta's record, opted in), also
 * the predicted form, and the smaller kept (ties: the plain one, so a
 * record that gains nothing is the bytes it was). *used becomes at least
 * 4 when the predicted form went in: the record's version. */
static int blob_put_pred(rckpt_buf_t *out, const uint8_t *src, size_t n, const uint8_t *pred,
			 unsigned w, unsigned *used)
{
	const size_t at = out->len;
	rckpt_buf_t alt = RCKPT_BUF_INIT;
	uint8_t *res;
	int rc = blob_put(out, src, n);

	if (rc || pred == NULL || n == 0)
		return rc;
	if ((res = malloc(n)) == NULL)
		return -ENOMEM;
	plane_xor(res, src, pred, n, w);
	rc = blob_put_m(&alt, res, n, RCKPT_BLOB_PREDICTED);
	if (rc == 0 && alt.len < out->len - at) {
		out->len = at;
		rc = rckpt_buf_append(out, alt.p, alt.len);
		if (*used < 4)
			*used = 4;
	}
	free(res);
	rckpt_buf_free(&alt);
	return rc;
}

/* A lossless segment's values src[0..n) (elements w bytes wide) as a
 * PLANES blob, with pred (a delta's parent's values) predicted when that
 * is smaller. *used becomes 5: the record's version. */
static int blob_put_planes(rckpt_buf_t *out, const uint8_t *src, size_t n, const uint8_t *pred,
			   unsigned w, unsigned *used)
{
	const size_t at = out->len;
	int predicted = 0, rc;

	if (n > UINT32_MAX)
		return -EINVAL;
	if ((rc = rckpt_buf_reserve(out, 5)))
		return rc;
	out->len += 5;
	if ((rc = rckpt_planes_encode(out, &predicted, src, pred, n, w)) == 0 &&
	    out->len - at - 5 > UINT32_MAX)
		rc = -EFBIG;
	if (rc) {
		out->len = at;
		return rc;
	}
	{
		rckpt_writer_t wr = rckpt_writer(out->p + at, 5);
		rckpt_wr_u8(&wr, (uint8_t)(RCKPT_BLOB_PLANES | (predicted ? RCKPT_BLOB_PREDICTED : 0)));
		rckpt_wr_u32(&wr, (uint32_t)(out->len - at - 5));
	}
	*used = 5;
	return 0;
}

/* Reads a blob that must hold exactly n bytes into dst. A predicted blob
 * is taken only where allowed (*pred then set: dst holds the planes, for
 * the caller to unplane against its prediction). */
static int blob_get_p(void *dst, size_t n, rckpt_reader_t *r, unsigned allow_pred, unsigned *pred)
{
	unsigned method = rckpt_rd_u8(r);
	size_t len = rckpt_rd_u32(r);
	const uint8_t *p = rckpt_rd_bytes(r, len);

	if (p == NULL)
		return -EBADMSG;
	if (method & RCKPT_BLOB_PREDICTED) {
		if (!allow_pred)
			return -EBADMSG;
		*pred = 1;
		method &= ~RCKPT_BLOB_PREDICTED;
	}
	if (method == BLOB_RAW) {
		if (len != n)
			return -EBADMSG;
		if (n)
			memcpy(dst, p, n);
		return 0;
	}
	if (method == BLOB_ZSTD) {
		size_t got;
		if (n == 0 || ZSTD_getFrameContentSize(p, len) != (unsigned long long)n)
			return -EBADMSG;
		got = rckpt_zstd_decompress(r, dst, n, p, len);
		return ZSTD_isError(got) || got != n ? -EBADMSG : 0;
	}
	return -EBADMSG;
}

static int blob_get(void *dst, size_t n, rckpt_reader_t *r)
{
	unsigned pred = 0;
	return blob_get_p(dst, n, r, 0, &pred);
}

static uint64_t count_level(const uint8_t *idx, uint64_t n, uint8_t level)
{
	uint64_t i, c = 0;
	for (i = 0; i < n; i++)
		c += idx[i] == level;
	return c;
}

/* The first position >= from of level in idx[0..n), or n. */
static uint64_t next_level(const uint8_t *idx, uint64_t from, uint64_t n, uint8_t level)
{
	const uint8_t *q = from < n ? memchr(idx + from, level, (size_t)(n - from)) : NULL;
	return q ? (uint64_t)(q - idx) : n;
}

/* The prediction of a delta's protected values (formats/checkpoint.md
 * "Predicted blobs"), as little-endian bf16 bytes: at each protected
 * position of s, the parent's protected value there if the parent's level
 * is protected, else the parent's level's value (its centroid, or 0 for
 * the pruned level) rounded to bf16. */
static void prot_pred(uint8_t *dst, const rckpt_seg_t *s, const rckpt_seg_t *ps)
{
	uint16_t val[RCKPT_SEG_MAX_BINS + 1];
	const uint8_t P = (uint8_t)(s->nbins + 1), PP = (uint8_t)(ps->nbins + 1);
	unsigned j, pruned = 0;
	uint64_t i, k = 0, pp = 0, pnext;

	while (pruned < ps->nbins && pruned < RCKPT_SEG_MAX_BINS && ps->centroids[pruned] < 0)
		pruned++;
	for (j = 0; j < PP && j <= RCKPT_SEG_MAX_BINS; j++) {
		uint32_t u = j == pruned ? 0u : rckpt_f2u(ps->centroids[j < pruned ? j : j - 1]);
		val[j] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
	}
	/* from one protected position of s to the next, and of the parent's
	 * (memchr both: protected levels are rare) */
	pnext = next_level(ps->idx, 0, ps->n, PP);
	for (i = 0; k < s->nprot && i < s->n; k++) {
		const uint64_t at = next_level(s->idx, i, s->n, P);
		uint8_t l;
		uint16_t v;
		if (at == s->n)
			break; /* fewer than nprot: s not checked; the rest stay 0 */
		while (pnext < at) { /* pp: the parent's protected levels before at */
			pp++;
			pnext = next_level(ps->idx, pnext + 1, ps->n, PP);
		}
		l = ps->idx[at];
		/* a parent not checked reads 0, never out of bounds */
		if (l == PP)
			v = pp < ps->nprot ? ps->prot[pp] : 0;
		else
			v = l < PP && l <= RCKPT_SEG_MAX_BINS ? val[l] : 0;
		dst[2 * k] = (uint8_t)v;
		dst[2 * k + 1] = (uint8_t)(v >> 8);
		i = at + 1;
	}
	for (; k < s->nprot; k++)
		dst[2 * k] = dst[2 * k + 1] = 0;
}

/* ---- encoding ---- */

static int same_layout(const rckpt_seg_t *a, const rckpt_seg_t *b)
{
	return a->tensor == b->tensor && a->first == b->first && a->n == b->n &&
	       a->encoding == b->encoding && a->dtype == b->dtype && a->transform == b->transform;
}

static int seg_check(const rckpt_seg_t *s)
{
	uint64_t i, np = 0;

	if (rckpt_dtype_size(s->dtype) == 0 || s->n > RCKPT_EST_MAX_COUNT ||
	    s->transform >= RCKPT_XF_COUNT)
		return -EINVAL;
	if (s->encoding == RCKPT_SEG_LOSSLESS)
		return (s->n == 0 || s->raw) && s->transform == RCKPT_XF_NONE ? 0 : -EINVAL;
	if (s->encoding != RCKPT_SEG_QUANTIZED || !centroids_ok(s->centroids, s->nbins) ||
	    s->nprot > s->n || (s->n && !s->idx) || (s->nprot && !s->prot))
		return -EINVAL;
	{
		/* branch-free, so that it vectorizes */
		const uint8_t prot = (uint8_t)(s->nbins + 1);
		unsigned bad = 0;
		for (i = 0; i < s->n; i++) {
			bad |= (unsigned)(s->idx[i] > prot);
			np += s->idx[i] == prot;
		}
		return !bad && np == s->nprot ? 0 : -EINVAL;
	}
}

/* The index stream of a segment; *ctx is set when it took the CTX form,
 * which makes the record version 3. */
static int istream_put(rckpt_buf_t *out, const uint8_t *cur, size_t n, unsigned lcur,
		       const uint8_t *prev, unsigned lprev, const rckpt_istream_opts_t *o,
		       unsigned *ctx)
{
	const size_t at = out->len;
	int rc = rckpt_istream_encode(out, cur, n, lcur, prev, lprev, o);
	rckpt_reader_t r;
	if (rc == 0 && (out->p[at] & RCKPT_IS_CTX))
		*ctx |= 1;
	r = rckpt_reader(out->p + at, out->len - at);
	if (rc == 0 && rckpt_istream_peek_split(&r))
		*ctx |= 2;
	return rc;
}

/* The index stream of a segment in a record of the given version: CTX is
 * version 3's, a split Huffman block version 6's. */
static int istream_get(uint8_t *cur, size_t n, unsigned lcur, const uint8_t *prev, unsigned lprev,
		       rckpt_reader_t *r, unsigned version)
{
	const int st = rckpt_istream_peek_stages(r);
	if ((st >= 0 && (st & RCKPT_IS_CTX) && version < 3) || (version < 6 && rckpt_istream_peek_split(r))) {
		r->err = -EBADMSG;
		return -EBADMSG;
	}
	return rckpt_istream_decode(cur, n, lcur, prev, lprev, r);
}

static int seg_encode(rckpt_buf_t *out, const rckpt_seg_t *s, const rckpt_seg_t *ps,
		      const rckpt_istream_opts_t *o, unsigned *ctx, unsigned *pred)
{
	const int predict = ps != NULL && o != NULL && o->predict;
	uint8_t hdr[24 + 1 + 4 * RCKPT_SEG_MAX_BINS + 8];
	rckpt_writer_t w = rckpt_writer(hdr, sizeof(hdr));
	unsigned j;
	int rc;

	rckpt_wr_u32(&w, s->tensor);
	rckpt_wr_u64(&w, s->first);
	rckpt_wr_u64(&w, s->n);
	rckpt_wr_u8(&w, s->encoding);
	rckpt_wr_u8(&w, s->dtype);
	rckpt_wr_u8(&w, s->transform);
	rckpt_wr_u8(&w, 0);
	if (s->encoding == RCKPT_SEG_LOSSLESS) {
		if ((rc = rckpt_buf_append(out, hdr, w.pos)))
			return rc;
		if (o != NULL && o->planes)
			return blob_put_planes(out, s->raw, (size_t)s->n * rckpt_dtype_size(s->dtype),
					       predict ? ps->raw : NULL, (unsigned)rckpt_dtype_size(s->dtype),
					       pred);
		return blob_put_pred(out, s->raw, (size_t)s->n * rckpt_dtype_size(s->dtype),
				     predict ? ps->raw : NULL, (unsigned)rckpt_dtype_size(s->dtype),
				     pred);
	}
	rckpt_wr_u8(&w, (uint8_t)s->nbins);
	for (j = 0; j < s->nbins; j++)
		rckpt_wr_u32(&w, rckpt_f2u(s->centroids[j]));
	rckpt_wr_u64(&w, s->nprot);
	if ((rc = rckpt_buf_append(out, hdr, w.pos)))
		return rc;
	{
		/* bf16 values as little-endian bytes; their prediction beside */
		uint8_t *pb = malloc(s->nprot ? 4 * s->nprot : 1);
		uint64_t i;
		if (pb == NULL)
			return -ENOMEM;
		for (i = 0; i < s->nprot; i++) {
			pb[2 * i] = (uint8_t)s->prot[i];
			pb[2 * i + 1] = (uint8_t)(s->prot[i] >> 8);
		}
		if (predict && s->nprot)
			prot_pred(pb + 2 * s->nprot, s, ps);
		rc = blob_put_pred(out, pb, 2 * s->nprot, predict ? pb + 2 * s->nprot : NULL, 2,
				   pred);
		free(pb);
		if (rc)
			return rc;
	}
	/* ps has the same layout (checked): a delta of the parent's levels. */
	return istream_put(out, s->idx, s->n, s->nbins + 2, ps ? ps->idx : NULL,
			   ps ? ps->nbins + 2 : 0, o, ctx);
}

/* The version a record is written in: 6 when an index stream holds a
 * split Huffman block (ctx bit 1), 5 when a value blob is in PLANES, 4
 * when a blob took the predicted form, 3 when an index stream took the
 * CTX form (ctx bit 0), 2 when a segment has a transform (older decoders
 * then answer RCKPT_EVERSION rather than misread it), else 1, which every
 * decoder reads. Compat is the same. */
static unsigned record_version(const rckpt_record_t *rec, unsigned ctx, unsigned pred)
{
	uint32_t i;
	if (ctx & 2)
		return 6;
	if (pred)
		return pred; /* 4 or 5 */
	if (ctx)
		return 3;
	for (i = 0; i < rec->nseg; i++)
		if (rec->seg[i].transform != RCKPT_XF_NONE)
			return 2;
	return 1;
}

/* Fills in the header of the record that starts at out->p + start (its
 * segments follow it) and appends the CRC. */
static int record_close(rckpt_buf_t *out, size_t start, const rckpt_record_t *rec, unsigned ctx,
			unsigned pred)
{
	const size_t body = out->len - start - RCKPT_RECORD_HEADER_BYTES;
	uint8_t hdr[RCKPT_RECORD_HEADER_BYTES], tail[4];
	rckpt_writer_t w = rckpt_writer(hdr, sizeof(hdr));

	rckpt_wr_u32(&w, RCKPT_RECORD_MAGIC);
	rckpt_wr_u8(&w, (uint8_t)record_version(rec, ctx, pred));
	rckpt_wr_u8(&w, (uint8_t)record_version(rec, ctx, pred));
	rckpt_wr_u8(&w, (uint8_t)rec->kind);
	rckpt_wr_u8(&w, 0);
	rckpt_wr_u64(&w, rec->step);
	rckpt_wr_u64(&w, rec->parent);
	rckpt_wr_u32(&w, rec->nseg);
	rckpt_wr_u32(&w, 0);
	rckpt_wr_u64(&w, body);
	memcpy(out->p + start, hdr, sizeof(hdr));
	w = rckpt_writer(tail, sizeof(tail));
	rckpt_wr_u32(&w, rckpt_crc32c(0, out->p + start, out->len - start));
	return rckpt_buf_append(out, tail, sizeof(tail));
}

int rckpt_record_encode(rckpt_buf_t *out, const rckpt_record_t *rec, const rckpt_record_t *parent,
			const rckpt_istream_opts_t *o)
{
	size_t start = out->len;
	uint32_t i;
	unsigned ctx = 0, pred = 0;
	int rc;

	if ((rec->kind == RCKPT_REC_BASE) != (parent == NULL) ||
	    (rec->kind != RCKPT_REC_BASE && rec->kind != RCKPT_REC_DELTA))
		return -EINVAL;
	if (parent && (parent->step != rec->parent || parent->nseg != rec->nseg))
		return -EINVAL;
	if (!parent && rec->parent != RCKPT_NO_PARENT)
		return -EINVAL;
	for (i = 0; i < rec->nseg; i++) {
		if ((rc = seg_check(&rec->seg[i])))
			return rc;
		if (parent && (!same_layout(&rec->seg[i], &parent->seg[i]) ||
			       seg_check(&parent->seg[i])))
			return -EINVAL;
	}
	if ((rc = rckpt_buf_reserve(out, RCKPT_RECORD_HEADER_BYTES)))
		return rc;
	out->len += RCKPT_RECORD_HEADER_BYTES;
	for (i = 0; i < rec->nseg; i++) {
		const rckpt_seg_t *ps = parent ? &parent->seg[i] : NULL;
		if ((rc = seg_encode(out, &rec->seg[i], ps, o, &ctx, &pred)))
			goto fail;
	}
	if ((rc = record_close(out, start, rec, ctx, pred)))
		goto fail;
	return 0;
fail:
	out->len = start;
	return rc;
}

/* ---- sparse partial records ---- */

static uint64_t block_count(uint64_t n, uint32_t block)
{
	return n / block + (n % block != 0);
}

/* Block b's elements [*lo, *hi) in a segment of n. */
static void block_range(uint64_t *lo, uint64_t *hi, uint32_t b, uint32_t block, uint64_t n)
{
	*lo = (uint64_t)b * block;
	*hi = n - *lo > block ? *lo + block : n;
}


/* The 24-byte segment header; a parent's segment must match it. */
static void seg_head_put(rckpt_writer_t *w, const rckpt_seg_t *s)
{
	rckpt_wr_u32(w, s->tensor);
	rckpt_wr_u64(w, s->first);
	rckpt_wr_u64(w, s->n);
	rckpt_wr_u8(w, s->encoding);
	rckpt_wr_u8(w, s->dtype);
	rckpt_wr_u8(w, s->transform);
	rckpt_wr_u8(w, 0);
}

static int sparse_seg_encode(rckpt_buf_t *out, const rckpt_seg_t *s, const rckpt_seg_t *ps,
			     uint32_t block, const rckpt_sparse_sel_t *sel,
			     const rckpt_istream_opts_t *o, unsigned *ctx)
{
	uint8_t hdr[24 + 8];
	rckpt_writer_t w = rckpt_writer(hdr, sizeof(hdr));
	const uint8_t P = (uint8_t)(s->nbins + 1);
	uint8_t *cur = NULL, *prev = NULL, *bl = NULL, *pb = NULL;
	uint64_t nb, m = 0, lo, hi, pos = 0, sp = 0, pp = 0, np = 0, c;
	uint32_t i;
	int rc;

	seg_head_put(&w, s);
	if (s->encoding == RCKPT_SEG_LOSSLESS) {
		if ((rc = rckpt_buf_append(out, hdr, w.pos)))
			return rc;
		return blob_put(out, s->raw, (size_t)s->n * rckpt_dtype_size(s->dtype));
	}
	if (s->nbins != ps->nbins || memcmp(s->centroids, ps->centroids, 4 * (size_t)s->nbins) != 0)
		return -EINVAL; /* a sparse record keeps its parent's codebook */
	nb = block_count(s->n, block);
	for (i = 0; i < sel->nblocks; i++) {
		if (sel->blocks[i] >= nb || (i && sel->blocks[i] <= sel->blocks[i - 1]))
			return -EINVAL;
		block_range(&lo, &hi, sel->blocks[i], block, s->n);
		m += hi - lo;
	}
	cur = malloc(m ? (size_t)m : 1);
	prev = malloc(m ? (size_t)m : 1);
	bl = malloc(sel->nblocks ? 4 * (size_t)sel->nblocks : 1);
	pb = malloc(s->nprot ? 2 * (size_t)s->nprot : 1);
	if (!cur || !prev || !bl || !pb) {
		rc = -ENOMEM;
		goto out;
	}
	/* Walk the segment: outside the blocks s must be its parent; inside,
	 * gather the levels of both and s's protected values. seg_check made
	 * every protected count agree with nprot, so the cursors stay in. */
	for (i = 0, m = 0; i <= sel->nblocks; i++) {
		if (i < sel->nblocks)
			block_range(&lo, &hi, sel->blocks[i], block, s->n);
		else
			lo = hi = s->n;
		c = count_level(s->idx + pos, lo - pos, P);
		if (memcmp(s->idx + pos, ps->idx + pos, (size_t)(lo - pos)) != 0 ||
		    (c && memcmp(s->prot + sp, ps->prot + pp, 2 * (size_t)c) != 0)) {
			rc = -EINVAL;
			goto out;
		}
		sp += c;
		pp += c;
		if (i == sel->nblocks)
			break;
		memcpy(cur + m, s->idx + lo, (size_t)(hi - lo));
		memcpy(prev + m, ps->idx + lo, (size_t)(hi - lo));
		m += hi - lo;
		c = count_level(s->idx + lo, hi - lo, P);
		for (; c > 0; c--, sp++, np++) {
			pb[2 * np] = (uint8_t)s->prot[sp];
			pb[2 * np + 1] = (uint8_t)(s->prot[sp] >> 8);
		}
		pp += count_level(ps->idx + lo, hi - lo, P);
		pos = hi;
		w = rckpt_writer(bl + 4 * (size_t)i, 4);
		rckpt_wr_u32(&w, sel->blocks[i]);
	}
	w = rckpt_writer(hdr + 24, 8);
	rckpt_wr_u32(&w, block);
	rckpt_wr_u32(&w, sel->nblocks);
	if ((rc = rckpt_buf_append(out, hdr, 32)) ||
	    (rc = blob_put(out, bl, 4 * (size_t)sel->nblocks)))
		goto out;
	w = rckpt_writer(hdr, 8);
	rckpt_wr_u64(&w, np);
	if ((rc = rckpt_buf_append(out, hdr, 8)) || (rc = blob_put(out, pb, 2 * (size_t)np)))
		goto out;
	rc = istream_put(out, cur, (size_t)m, s->nbins + 2, prev, ps->nbins + 2, o, ctx);
out:
	free(cur);
	free(prev);
	free(bl);
	free(pb);
	return rc;
}

int rckpt_record_encode_sparse(rckpt_buf_t *out, const rckpt_record_t *rec,
			       const rckpt_record_t *parent, uint32_t block,
			       const rckpt_sparse_sel_t *sel, const rckpt_istream_opts_t *o)
{
	size_t start = out->len;
	uint32_t i;
	unsigned ctx = 0;
	int rc;

	if (rec->kind != RCKPT_REC_SPARSE || parent == NULL || parent->step != rec->parent ||
	    rec->step == rec->parent || rec->step == RCKPT_NO_PARENT || parent->nseg != rec->nseg ||
	    block == 0 || block > RCKPT_SPARSE_BLOCK_MAX || (rec->nseg && sel == NULL))
		return -EINVAL;
	for (i = 0; i < rec->nseg; i++)
		if ((rc = seg_check(&rec->seg[i])) || (rc = seg_check(&parent->seg[i])) ||
		    !same_layout(&rec->seg[i], &parent->seg[i]))
			return rc ? rc : -EINVAL;
	if ((rc = rckpt_buf_reserve(out, RCKPT_RECORD_HEADER_BYTES)))
		return rc;
	out->len += RCKPT_RECORD_HEADER_BYTES;
	for (i = 0; i < rec->nseg; i++)
		if ((rc = sparse_seg_encode(out, &rec->seg[i], &parent->seg[i], block, &sel[i], o,
					     &ctx)))
			goto fail;
	if ((rc = record_close(out, start, rec, ctx, 0)))
		goto fail;
	return 0;
fail:
	out->len = start;
	return rc;
}

/* ---- decoding ---- */

void rckpt_record_free(rckpt_record_t *rec)
{
	uint32_t i;
	if (rec->seg) {
		for (i = 0; i < rec->nseg; i++) {
			free(rec->seg[i].prot);
			free(rec->seg[i].idx);
			free(rec->seg[i].raw);
		}
	}
	free(rec->seg);
	memset(rec, 0, sizeof(*rec));
}

int rckpt_record_peek(unsigned *kind, uint64_t *step, uint64_t *parent, const uint8_t *src,
		      size_t len)
{
	rckpt_reader_t r = rckpt_reader(src, len);
	if (len < RCKPT_RECORD_HEADER_BYTES || rckpt_rd_u32(&r) != RCKPT_RECORD_MAGIC)
		return -EBADMSG;
	rckpt_rd_u16(&r);
	*kind = rckpt_rd_u8(&r);
	rckpt_rd_u8(&r);
	*step = rckpt_rd_u64(&r);
	*parent = rckpt_rd_u64(&r);
	return 0;
}

int rckpt_record_check(unsigned *kind, uint64_t *step, uint64_t *parent, const uint8_t *src,
		       size_t len)
{
	rckpt_reader_t r = rckpt_reader(src, len);
	unsigned version, compat, k, flags;
	uint64_t st, ps, body;

	if (src == NULL || len < RCKPT_RECORD_HEADER_BYTES + 4 || rckpt_rd_u32(&r) != RCKPT_RECORD_MAGIC)
		return -EBADMSG;
	version = rckpt_rd_u8(&r);
	compat = rckpt_rd_u8(&r);
	k = rckpt_rd_u8(&r);
	flags = rckpt_rd_u8(&r);
	st = rckpt_rd_u64(&r);
	ps = rckpt_rd_u64(&r);
	(void)rckpt_rd_u32(&r); /* segments */
	if (rckpt_rd_u32(&r) != 0 || flags != 0 || compat == 0 || compat > version)
		return -EBADMSG;
	if (compat > RCKPT_RECORD_VERSION)
		return RCKPT_FMT_EVERSION;
	body = rckpt_rd_u64(&r);
	if (body != len - RCKPT_RECORD_HEADER_BYTES - 4)
		return -EBADMSG;
	if (rckpt_crc32c(0, src, len - 4) != rckpt_le32(src + len - 4))
		return RCKPT_FMT_ECHECKSUM;
	if (k != RCKPT_REC_BASE && k != RCKPT_REC_DELTA && k != RCKPT_REC_SPARSE)
		return -EBADMSG;
	if ((k == RCKPT_REC_BASE) != (ps == RCKPT_NO_PARENT) || st == RCKPT_NO_PARENT ||
	    (k != RCKPT_REC_BASE && ps == st))
		return -EBADMSG;
	*kind = k;
	*step = st;
	*parent = ps;
	return 0;
}

/* The 24-byte segment header. A transform is known, on a quantized segment,
 * in a version 2 record; the byte after it is 0. */
static int seg_head_get(rckpt_seg_t *s, rckpt_reader_t *r, unsigned version)
{
	unsigned res;
	s->tensor = rckpt_rd_u32(r);
	s->first = rckpt_rd_u64(r);
	s->n = rckpt_rd_u64(r);
	s->encoding = rckpt_rd_u8(r);
	s->dtype = rckpt_rd_u8(r);
	s->transform = rckpt_rd_u8(r);
	res = rckpt_rd_u8(r);
	if (r->err || res != 0 || s->transform >= RCKPT_XF_COUNT ||
	    (s->transform != RCKPT_XF_NONE && (version < 2 || s->encoding != RCKPT_SEG_QUANTIZED)))
		return -EBADMSG;
	return 0;
}

/* A PLANES blob of a lossless segment's k value bytes (elements w wide)
 * into dst: in a record of version 5 or later; predicted (by pred, the
 * parent's values) only where pred is given. */
static int planes_get(uint8_t *dst, size_t k, unsigned w, rckpt_reader_t *r, unsigned version,
		      const uint8_t *pred)
{
	const unsigned method = rckpt_rd_u8(r);
	const size_t len = rckpt_rd_u32(r);
	const uint8_t *p = rckpt_rd_bytes(r, len);
	int rc;

	if (p == NULL || version < 5 || ((method & RCKPT_BLOB_PREDICTED) && pred == NULL))
		return -EBADMSG;
	rc = rckpt_planes_decode(dst, method & RCKPT_BLOB_PREDICTED ? pred : NULL, k, w, p, len);
	return rc == -ENOMEM ? rc : rc ? -EBADMSG : 0;
}

/* A base's segment (ps NULL) or a delta's on its parent's ps. Predicted
 * blobs: in a delta of version 4 or later. With take, a lossless segment
 * is decoded in ps's memory, ps left without it (rckpt_record_decode_onto). */
static int seg_decode(rckpt_seg_t *s, rckpt_reader_t *r, rckpt_seg_t *ps, unsigned version, int take)
{
	const unsigned allow = ps != NULL && version >= 4;
	unsigned j, pred = 0;
	size_t dsz;
	uint8_t *pb;
	uint64_t i, np = 0;
	int rc;

	if (seg_head_get(s, r, version))
		return -EBADMSG;
	dsz = rckpt_dtype_size(s->dtype);
	if (dsz == 0 || s->n > RCKPT_EST_MAX_COUNT ||
	    (s->encoding != RCKPT_SEG_QUANTIZED && s->encoding != RCKPT_SEG_LOSSLESS))
		return -EBADMSG;
	if (ps && !same_layout(s, ps))
		return -EBADMSG;
	if (s->encoding == RCKPT_SEG_LOSSLESS) {
		const size_t k = (size_t)s->n * dsz;
		const int predicted = rckpt_rd_left(r) > 0 && (r->p[r->pos] & RCKPT_BLOB_PREDICTED);
		const uint8_t *pv = ps ? ps->raw : NULL; /* the parent's values */
		if (take && pv) { /* decoded in the parent's memory */
			s->raw = ps->raw;
			ps->raw = NULL;
		} else if ((s->raw = malloc(k ? k : 1)) == NULL) {
			return -ENOMEM;
		}
		if (rckpt_rd_left(r) > 0 && (r->p[r->pos] & ~RCKPT_BLOB_PREDICTED) == RCKPT_BLOB_PLANES)
			return planes_get(s->raw, k, (unsigned)dsz, r, version, allow ? pv : NULL);
		if (!predicted)
			return blob_get_p(s->raw, k, r, allow, &pred);
		if ((pb = malloc(k ? k : 1)) == NULL)
			return -ENOMEM;
		rc = blob_get_p(pb, k, r, allow, &pred);
		if (rc == 0 && k) /* element by element: in place when taken */
			unplane_xor(s->raw, pb, pv, k, (unsigned)dsz);
		free(pb);
		return rc;
	}
	s->nbins = rckpt_rd_u8(r);
	if (r->err || s->nbins < 1 || s->nbins > RCKPT_SEG_MAX_BINS)
		return -EBADMSG;
	for (j = 0; j < s->nbins; j++)
		s->centroids[j] = rckpt_u2f(rckpt_rd_u32(r));
	s->nprot = rckpt_rd_u64(r);
	if (r->err || !centroids_ok(s->centroids, s->nbins) || s->nprot > s->n)
		return -EBADMSG;
	/* the blob's bytes (as before: nothing past them allocated until they
	 * are read), the levels, then a prediction's, when predicted */
	pb = malloc(s->nprot ? 2 * (size_t)s->nprot : 1);
	s->prot = malloc(s->nprot ? 2 * (size_t)s->nprot : 1);
	if (pb == NULL || s->prot == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = blob_get_p(pb, 2 * (size_t)s->nprot, r, allow, &pred)))
		goto out;
	if ((s->idx = malloc(s->n ? (size_t)s->n : 1)) == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = istream_get(s->idx, (size_t)s->n, s->nbins + 2, ps ? ps->idx : NULL,
			      ps ? ps->nbins + 2 : 0, r, version)))
		goto out;
	for (i = 0; i < s->n; i++)
		np += s->idx[i] == s->nbins + 1;
	rc = -EBADMSG;
	if (np != s->nprot)
		goto out;
	if (pred && s->nprot) { /* the levels are known now: so is the prediction */
		uint8_t *pr = malloc(2 * (size_t)s->nprot);
		if (pr == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		prot_pred(pr, s, ps);
		unplane_xor(pr, pb, pr, 2 * (size_t)s->nprot, 2); /* in place: element by element */
		free(pb);
		pb = pr;
	}
	for (i = 0; i < s->nprot; i++)
		s->prot[i] = (uint16_t)(pb[2 * i] | pb[2 * i + 1] << 8);
	rc = 0;
out:
	free(pb);
	return rc;
}

/* A sparse record's segment on top of its parent's ps (formats/checkpoint.md,
 * "Sparse partial record"): ps with the stored blocks' levels and protected
 * values replaced. */
static int sparse_seg_decode(rckpt_seg_t *s, rckpt_reader_t *r, rckpt_seg_t *ps,
			     unsigned version, int take)
{
	uint8_t *cur = NULL, *prev = NULL, *bb = NULL, *pb = NULL;
	uint32_t *blocks = NULL, block, nblocks, i;
	uint64_t nb, m = 0, lo, hi, np, old = 0, total, pos, pp, sp, c;
	uint8_t P;
	size_t dsz;
	int rc = -EBADMSG;

	if (seg_head_get(s, r, version) || !same_layout(s, ps))
		return -EBADMSG;
	dsz = rckpt_dtype_size(s->dtype);
	if (dsz == 0 || s->n > RCKPT_EST_MAX_COUNT)
		return -EBADMSG;
	if (s->encoding == RCKPT_SEG_LOSSLESS) { /* whole, over the parent's when take */
		if (take && ps->raw) {
			s->raw = ps->raw;
			ps->raw = NULL;
		} else if ((s->raw = malloc(s->n ? (size_t)s->n * dsz : 1)) == NULL) {
			return -ENOMEM;
		}
		return blob_get(s->raw, (size_t)s->n * dsz, r);
	}
	if (s->encoding != RCKPT_SEG_QUANTIZED || ps->nbins < 1 || ps->nbins > RCKPT_SEG_MAX_BINS ||
	    ps->nprot > ps->n)
		return -EBADMSG;
	s->nbins = ps->nbins;
	memcpy(s->centroids, ps->centroids, sizeof(s->centroids));
	P = (uint8_t)(s->nbins + 1);
	block = rckpt_rd_u32(r);
	nblocks = rckpt_rd_u32(r);
	if (r->err || block == 0 || block > RCKPT_SPARSE_BLOCK_MAX)
		return -EBADMSG;
	nb = block_count(s->n, block);
	if (nblocks > nb)
		return -EBADMSG;
	bb = malloc(nblocks ? 4 * (size_t)nblocks : 1);
	blocks = malloc(nblocks ? 4 * (size_t)nblocks : 4);
	if (!bb || !blocks) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = blob_get(bb, 4 * (size_t)nblocks, r)))
		goto out;
	rc = -EBADMSG;
	for (i = 0; i < nblocks; i++) {
		blocks[i] = rckpt_le32(bb + 4 * (size_t)i);
		if (blocks[i] >= nb || (i && blocks[i] <= blocks[i - 1]))
			goto out;
		block_range(&lo, &hi, blocks[i], block, s->n);
		m += hi - lo;
		old += count_level(ps->idx + lo, hi - lo, P);
	}
	np = rckpt_rd_u64(r);
	if (r->err || np > m || old > ps->nprot)
		goto out;
	total = ps->nprot - old + np;
	if (total > s->n)
		goto out;
	pb = malloc(np ? 2 * (size_t)np : 1);
	cur = malloc(m ? (size_t)m : 1);
	prev = malloc(m ? (size_t)m : 1);
	s->idx = malloc(s->n ? (size_t)s->n : 1);
	s->prot = malloc(total ? 2 * (size_t)total : 2);
	if (!pb || !cur || !prev || !s->idx || !s->prot) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = blob_get(pb, 2 * (size_t)np, r)))
		goto out;
	for (i = 0, m = 0; i < nblocks; i++) {
		block_range(&lo, &hi, blocks[i], block, s->n);
		memcpy(prev + m, ps->idx + lo, (size_t)(hi - lo));
		m += hi - lo;
	}
	if ((rc = istream_get(cur, (size_t)m, P + 1u, prev, P + 1u, r, version)))
		goto out;
	rc = -EBADMSG;
	if (count_level(cur, m, P) != np)
		goto out;
	/* The parent's levels and protected values, the blocks replaced. */
	if (s->n)
		memcpy(s->idx, ps->idx, (size_t)s->n);
	for (i = 0, m = 0, pos = 0, pp = 0, sp = 0, s->nprot = 0; i <= nblocks; i++) {
		if (i < nblocks)
			block_range(&lo, &hi, blocks[i], block, s->n);
		else
			lo = hi = s->n;
		c = count_level(ps->idx + pos, lo - pos, P);
		if (c > ps->nprot - pp || c > total - s->nprot)
			goto out;
		memcpy(s->prot + s->nprot, ps->prot + pp, 2 * (size_t)c);
		s->nprot += c;
		pp += c;
		if (i == nblocks)
			break;
		memcpy(s->idx + lo, cur + m, (size_t)(hi - lo));
		m += hi - lo;
		pp += count_level(ps->idx + lo, hi - lo, P);
		for (c = count_level(s->idx + lo, hi - lo, P); c > 0; c--, sp++) {
			if (s->nprot == total || sp == np)
				goto out;
			s->prot[s->nprot++] = (uint16_t)(pb[2 * sp] | pb[2 * sp + 1] << 8);
		}
		pos = hi;
	}
	rc = s->nprot == total && sp == np && pp == ps->nprot ? 0 : -EBADMSG;
out:
	free(bb);
	free(blocks);
	free(pb);
	free(cur);
	free(prev);
	return rc;
}

static int record_decode(rckpt_record_t *out, const uint8_t *src, size_t len, rckpt_record_t *parent,
			 const rckpt_record_limits_t *lim, int take)
{
	rckpt_record_limits_t deflim = RCKPT_RECORD_LIMITS_DEFAULT;
	rckpt_reader_t r = rckpt_reader(src, len);
	rckpt_zws_t zws = RCKPT_ZWS_INIT;
	unsigned version, compat, kind, flags;
	uint64_t step, pstep, body, elements = 0;
	uint32_t nseg, i, crc;
	int rc = -EBADMSG;

	memset(out, 0, sizeof(*out));
	if (lim == NULL)
		lim = &deflim;
	if (src == NULL || len < RCKPT_RECORD_HEADER_BYTES + 4 || rckpt_rd_u32(&r) != RCKPT_RECORD_MAGIC)
		return -EBADMSG;
	version = rckpt_rd_u8(&r);
	compat = rckpt_rd_u8(&r);
	kind = rckpt_rd_u8(&r);
	flags = rckpt_rd_u8(&r);
	step = rckpt_rd_u64(&r);
	pstep = rckpt_rd_u64(&r);
	nseg = rckpt_rd_u32(&r);
	if (rckpt_rd_u32(&r) != 0 || flags != 0 || compat == 0 || compat > version)
		return -EBADMSG;
	if (compat > RCKPT_RECORD_VERSION)
		return RCKPT_FMT_EVERSION;
	body = rckpt_rd_u64(&r);
	if (body != len - RCKPT_RECORD_HEADER_BYTES - 4)
		return -EBADMSG;
	crc = rckpt_le32(src + len - 4);
	if (rckpt_crc32c(0, src, len - 4) != crc)
		return RCKPT_FMT_ECHECKSUM;
	if (kind != RCKPT_REC_BASE && kind != RCKPT_REC_DELTA && kind != RCKPT_REC_SPARSE)
		return -EBADMSG;
	if ((kind == RCKPT_REC_BASE) != (pstep == RCKPT_NO_PARENT) || step == RCKPT_NO_PARENT ||
	    (kind != RCKPT_REC_BASE && pstep == step))
		return -EBADMSG; /* as rckpt_record_check: 2^64-1 is no step */
	if (kind != RCKPT_REC_BASE) {
		if (parent == NULL)
			return -EINVAL;
		if (parent->step != pstep)
			return -ESTALE;
		if (parent->nseg != nseg)
			return -EBADMSG;
	}
	if (nseg > lim->max_segments)
		return -E2BIG;
	out->kind = kind;
	out->step = step;
	out->parent = pstep;
	out->seg = calloc(nseg ? nseg : 1, sizeof(*out->seg));
	if (out->seg == NULL)
		return -ENOMEM;
	out->nseg = nseg;
	r = rckpt_reader(src + RCKPT_RECORD_HEADER_BYTES, (size_t)body);
	r.zws = &zws; /* one zstd context for every frame of the record */
	for (i = 0; i < nseg; i++) {
		rckpt_seg_t *ps = kind != RCKPT_REC_BASE ? &parent->seg[i] : NULL;
		/* Peek n to bound the allocation before seg_decode makes it. */
		if (rckpt_rd_left(&r) >= 20) {
			rckpt_reader_t pk = r;
			uint64_t n;
			rckpt_rd_u32(&pk);
			rckpt_rd_u64(&pk);
			n = rckpt_rd_u64(&pk);
			if (n > lim->max_elements - elements) {
				rc = -E2BIG;
				goto fail;
			}
			elements += n;
		}
		/* Same layout as the parent's segment, encoding included; a
		 * lossless segment is whole in every record. */
		if (kind == RCKPT_REC_SPARSE)
			rc = sparse_seg_decode(&out->seg[i], &r, ps, version, take);
		else
			rc = seg_decode(&out->seg[i], &r, ps, version, take);
		if (rc)
			goto fail;
	}
	if (rckpt_rd_left(&r) != 0 || r.err) {
		rc = -EBADMSG;
		goto fail;
	}
	rckpt_zws_free(&zws);
	return 0;
fail:
	rckpt_zws_free(&zws);
	rckpt_record_free(out);
	return rc == -EINVAL ? -EBADMSG : rc;
}

int rckpt_record_decode(rckpt_record_t *out, const uint8_t *src, size_t len,
			const rckpt_record_t *parent, const rckpt_record_limits_t *lim)
{
	/* the parent is only read when nothing is taken */
	return record_decode(out, src, len, (rckpt_record_t *)parent, lim, 0);
}

int rckpt_record_decode_onto(rckpt_record_t *out, const uint8_t *src, size_t len,
			     rckpt_record_t *parent, const rckpt_record_limits_t *lim)
{
	return record_decode(out, src, len, parent, lim, 1);
}
