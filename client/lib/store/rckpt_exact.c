/*
 * rckpt_exact.c — exact steps (formats/store.md "Exact steps"): a step
 * stored bit-exact is its lossy record plus, per chunk, the bits the
 * quantizer changed. The residual is the source XOR the lossy values in
 * the tensor's own dtype, split into byte planes (ZipNN's observation: the
 * high bytes of nearby floats agree, so their XOR is mostly zeros) and
 * coded with zstd inside an attachment envelope (magic, step, CRC-32C).
 * Lossless segments are exact already and take no residual.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "rckpt_bytes.h"
#include "rckpt_codec.h"
#include "rckpt_quant.h"
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

/* Bytes per element of the widths a residual has planes for: fp32, then
 * fp16 and bf16. */
static const unsigned widths[2] = { 4, 2 };

typedef struct plan {
	uint32_t nseg;       /* quantized segments */
	uint64_t elems[2];   /* of each width */
	uint64_t bytes;      /* the planes' total */
	uint64_t max_n;      /* the largest segment */
} plan_t;

static int width_slot(unsigned dtype)
{
	size_t w = rckpt_dtype_size(dtype);
	return w == 4 ? 0 : w == 2 ? 1 : -1;
}

/* Counts quantized segment s, of tensor dtype `dtype`, into p: its width
 * slot, or -1 for a dtype the residual has no planes for. */
static int plan_add(plan_t *p, const rckpt_seg_t *s, unsigned dtype)
{
	int ws = width_slot(dtype);
	if (ws < 0)
		return -1;
	p->nseg++;
	p->elems[ws] += s->n;
	p->bytes += s->n * widths[ws];
	if (s->n > p->max_n)
		p->max_n = s->n;
	return ws;
}

/* The lossy values of quantized segment s in dtype (n elements of its
 * width into out; f: n floats of scratch). */
static int lossy_bytes(uint8_t *out, float *f, const rckpt_seg_t *s, unsigned dtype)
{
	rckpt_qparams_t q;
	int rc;
	memset(&q, 0, sizeof(q));
	if (s->nbins == 0 || s->nbins > RCKPT_SEG_MAX_BINS)
		return -EBADMSG;
	q.nbins = s->nbins;
	memcpy(q.centroids, s->centroids, sizeof(float) * s->nbins);
	if ((rc = rckpt_dequantize(f, s->idx, (size_t)s->n, &q, s->prot, (size_t)s->nprot)))
		return rc;
	rckpt_xf_inverse(f, (size_t)s->n, s->transform);
	rckpt_narrow_from_f32(out, f, dtype, s->n);
	return 0;
}

/* Element k's byte b of width slot ws in the planes that follow the
 * header. */
static size_t plane_at(const plan_t *p, int ws, unsigned b, uint64_t k)
{
	size_t base = ws == 0 ? 0 : (size_t)p->elems[0] * 4;
	return base + (size_t)b * (size_t)p->elems[ws] + (size_t)k;
}

int rckpt_exact_build(rckpt_buf_t *out, uint64_t step, uint32_t chunk, const uint8_t *rec,
		      size_t len, const rckpt_tset_t *params, const rckpt_piece_t *pieces)
{
	const rckpt_record_limits_t lim = RCKPT_RECORD_LIMITS_DEFAULT;
	rckpt_record_t d;
	plan_t p;
	uint8_t *raw = NULL, *lossy = NULL;
	float *f = NULL;
	uint64_t k[2] = { 0, 0 };
	EVP_MD_CTX *ctx = NULL;
	size_t rawlen;
	uint32_t i;
	int rc;

	memset(&p, 0, sizeof(p));
	if ((rc = rckpt_record_decode(&d, rec, len, NULL, &lim)))
		return rc; /* a base: an exact step's record always is */
	for (i = 0; i < d.nseg; i++) {
		const rckpt_seg_t *s = &d.seg[i];
		const rckpt_ctensor_t *t;
		uint32_t ti = pieces ? pieces[i].tensor : s->tensor;
		uint64_t first = pieces ? pieces[i].first : s->first;
		if (s->encoding != RCKPT_SEG_QUANTIZED)
			continue;
		if (ti >= params->ntensors || (pieces && pieces[i].n != s->n)) {
			rc = -EINVAL;
			goto out;
		}
		t = &params->t[ti];
		if (first > t->n || s->n > t->n - first || plan_add(&p, s, t->dtype) < 0) {
			rc = -EINVAL;
			goto out;
		}
	}
	if (p.nseg == 0)
		goto out; /* lossless already: no residual, out stays empty */
	rawlen = RCKPT_EXACT_HEADER + (size_t)p.bytes;
	raw = calloc(1, rawlen);
	f = malloc((size_t)(p.max_n ? p.max_n : 1) * sizeof(float));
	lossy = malloc((size_t)(p.max_n ? p.max_n : 1) * 4);
	ctx = EVP_MD_CTX_new();
	if (!raw || !f || !lossy || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < d.nseg; i++) {
		const rckpt_seg_t *s = &d.seg[i];
		const rckpt_ctensor_t *t;
		const uint8_t *src;
		unsigned w, b;
		uint64_t e;
		int ws;
		if (s->encoding != RCKPT_SEG_QUANTIZED)
			continue;
		t = &params->t[pieces ? pieces[i].tensor : s->tensor];
		ws = width_slot(t->dtype);
		w = widths[ws];
		src = t->data + (size_t)(pieces ? pieces[i].first : s->first) * w;
		if ((rc = lossy_bytes(lossy, f, s, t->dtype)))
			goto out;
		if (!EVP_DigestUpdate(ctx, src, (size_t)s->n * w)) {
			rc = -ENOMEM;
			goto out;
		}
		for (b = 0; b < w; b++) {
			uint8_t *pl = raw + RCKPT_EXACT_HEADER + plane_at(&p, ws, b, k[ws]);
			for (e = 0; e < s->n; e++)
				pl[e] = src[e * w + b] ^ lossy[e * w + b];
		}
		k[ws] += s->n;
	}
	{
		rckpt_writer_t w = rckpt_writer(raw, RCKPT_EXACT_HEADER);
		rckpt_wr_u32(&w, RCKPT_EXACT_MAGIC);
		rckpt_wr_u8(&w, 1);
		rckpt_wr_u8(&w, 1);
		rckpt_wr_u16(&w, 0);
		rckpt_wr_u64(&w, step);
		rckpt_wr_u32(&w, chunk);
		rckpt_wr_u32(&w, p.nseg);
		rckpt_wr_u64(&w, p.elems[0]);
		rckpt_wr_u64(&w, p.elems[1]);
		if (!EVP_DigestFinal_ex(ctx, raw + w.pos, NULL)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	rc = rckpt_attach_encode(out, step, raw, rawlen);
out:
	EVP_MD_CTX_free(ctx);
	free(raw);
	free(lossy);
	free(f);
	rckpt_record_free(&d);
	return rc;
}

int rckpt_exact_quantized(const rckpt_record_t *rec)
{
	uint32_t i;
	for (i = 0; i < rec->nseg; i++)
		if (rec->seg[i].encoding == RCKPT_SEG_QUANTIZED)
			return 1;
	return 0;
}

int rckpt_exact_apply(rckpt_record_t *rec, const rckpt_manifest_t *mf, uint64_t step,
		      uint32_t chunk, const uint8_t *obj, size_t len)
{
	uint8_t *raw = NULL, **exact = NULL, *lossy = NULL, digest[32];
	float *f = NULL;
	size_t rawlen = 0;
	plan_t p, want;
	uint64_t k[2] = { 0, 0 };
	EVP_MD_CTX *ctx = NULL;
	uint32_t i;
	int rc;

	memset(&p, 0, sizeof(p));
	memset(&want, 0, sizeof(want));
	if ((rc = rckpt_attach_decode(&raw, &rawlen, step, obj, len)))
		return rc;
	{
		rckpt_reader_t r = rckpt_reader(raw, rawlen);
		uint32_t magic = rckpt_rd_u32(&r);
		uint8_t version = rckpt_rd_u8(&r), compat = rckpt_rd_u8(&r);
		uint16_t flags = rckpt_rd_u16(&r);
		uint64_t s = rckpt_rd_u64(&r);
		uint32_t c = rckpt_rd_u32(&r);
		want.nseg = rckpt_rd_u32(&r);
		want.elems[0] = rckpt_rd_u64(&r);
		want.elems[1] = rckpt_rd_u64(&r);
		if (r.err || magic != RCKPT_EXACT_MAGIC || compat == 0 || compat > version) {
			rc = -EBADMSG;
			goto out;
		}
		if (compat > 1) {
			rc = RCKPT_FMT_EVERSION;
			goto out;
		}
		if (flags != 0 || s != step || c != chunk) {
			rc = -EBADMSG;
			goto out;
		}
	}
	/* The record's quantized segments must be the ones the residual
	 * covers, in dtypes of the manifest's tensors. */
	for (i = 0; i < rec->nseg; i++) {
		const rckpt_seg_t *s = &rec->seg[i];
		if (s->encoding != RCKPT_SEG_QUANTIZED)
			continue;
		if (s->tensor >= mf->ntensors || plan_add(&p, s, mf->t[s->tensor].dtype) < 0) {
			rc = -EBADMSG;
			goto out;
		}
	}
	if (p.nseg != want.nseg || p.elems[0] != want.elems[0] || p.elems[1] != want.elems[1] ||
	    rawlen != RCKPT_EXACT_HEADER + p.bytes) {
		rc = -EBADMSG;
		goto out;
	}
	exact = calloc(rec->nseg ? rec->nseg : 1, sizeof(*exact));
	f = malloc((size_t)(p.max_n ? p.max_n : 1) * sizeof(float));
	lossy = malloc((size_t)(p.max_n ? p.max_n : 1) * 4);
	ctx = EVP_MD_CTX_new();
	if (!exact || !f || !lossy || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < rec->nseg; i++) {
		const rckpt_seg_t *s = &rec->seg[i];
		unsigned dtype, w, b;
		uint64_t e;
		int ws;
		if (s->encoding != RCKPT_SEG_QUANTIZED)
			continue;
		dtype = mf->t[s->tensor].dtype;
		ws = width_slot(dtype);
		w = widths[ws];
		if ((exact[i] = malloc((size_t)(s->n ? s->n : 1) * w)) == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		if ((rc = lossy_bytes(lossy, f, s, dtype)))
			goto out;
		for (b = 0; b < w; b++) {
			const uint8_t *pl = raw + RCKPT_EXACT_HEADER + plane_at(&p, ws, b, k[ws]);
			for (e = 0; e < s->n; e++)
				exact[i][e * w + b] = pl[e] ^ lossy[e * w + b];
		}
		k[ws] += s->n;
		if (!EVP_DigestUpdate(ctx, exact[i], (size_t)s->n * w)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (!EVP_DigestFinal_ex(ctx, digest, NULL)) {
		rc = -ENOMEM;
		goto out;
	}
	if (memcmp(digest, raw + RCKPT_EXACT_HEADER - 32, 32) != 0) {
		rc = RCKPT_FMT_ECHECKSUM; /* not the bits that were saved */
		goto out;
	}
	/* Only now does the record change: each quantized segment becomes a
	 * lossless one holding the saved bits. */
	for (i = 0; i < rec->nseg; i++) {
		rckpt_seg_t *s = &rec->seg[i];
		if (exact[i] == NULL)
			continue;
		free(s->idx);
		free(s->prot);
		free(s->raw);
		s->idx = NULL;
		s->prot = NULL;
		s->nprot = 0;
		s->nbins = 0;
		s->raw = exact[i];
		s->dtype = mf->t[s->tensor].dtype;
		s->encoding = RCKPT_SEG_LOSSLESS;
		exact[i] = NULL;
	}
out:
	for (i = 0; exact && i < rec->nseg; i++)
		free(exact[i]);
	free(exact);
	EVP_MD_CTX_free(ctx);
	free(raw);
	free(lossy);
	free(f);
	return rc;
}
