/*
 * rckpt_manifest.c — manifest codec and chunk digest.
 */
#include "rckpt_manifest.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "rckpt_bytes.h"
#include "rckpt_crc32c.h"

void rckpt_manifest_free(rckpt_manifest_t *m)
{
	uint32_t i;
	for (i = 0; m->t && i < m->ntensors; i++) {
		free(m->t[i].name);
		free(m->t[i].seg);
	}
	free(m->t);
	free(m->chunk);
	memset(m, 0, sizeof(*m));
}

static void wr_config(rckpt_writer_t *w, const rckpt_mf_config_t *c)
{
	unsigned k;
	rckpt_wr_u8(w, c->bins);
	rckpt_wr_u8(w, c->emb_bins);
	rckpt_wr_u8(w, c->metric);
	rckpt_wr_u8(w, c->flags);
	for (k = 0; k < RCKPT_MF_KINDS; k++)
		rckpt_wr_u32(w, rckpt_f2u(c->prune[k]));
	rckpt_wr_u32(w, rckpt_f2u(c->protect));
	rckpt_wr_u32(w, rckpt_f2u(c->lambda));
}

/* 3 when a chunk names its stored base, else 2 when a tensor is of an
 * optimizer kind, else 1. */
static unsigned manifest_version(const rckpt_manifest_t *m)
{
	uint32_t i;
	for (i = 0; i < m->nchunks; i++)
		if (m->chunk[i].base_bytes)
			return 3;
	for (i = 0; i < m->ntensors; i++)
		if (m->t[i].kind >= RCKPT_MF_KIND_OPTIM_FIRST)
			return 2;
	return 1;
}

int rckpt_manifest_encode(rckpt_buf_t *out, const rckpt_manifest_t *m)
{
	const unsigned version = manifest_version(m);
	size_t need = 40 + 32 + 24 + (version > 1 ? 8 : 0) + 4 + (size_t)m->nchunks * (version > 2 ? 88 : 48),
	       start = out->len;
	rckpt_writer_t w;
	uint32_t i, k;
	int rc;

	if (m->ntensors > RCKPT_MF_MAX_TENSORS || m->nchunks > RCKPT_MF_MAX_CHUNKS)
		return -EINVAL;
	for (i = 0; i < m->ntensors; i++) {
		size_t nl = strlen(m->t[i].name);
		if (nl == 0 || nl > RCKPT_MF_MAX_NAME || m->t[i].ndim > RCKPT_MF_MAX_DIMS ||
		    m->t[i].kind >= RCKPT_MF_TENSOR_KINDS)
			return -EINVAL;
		need += 2 + nl + 4 + 8 * m->t[i].ndim + 4 + 16 * (size_t)m->t[i].nseg +
			(m->t[i].kind >= RCKPT_MF_KIND_OPTIM_FIRST ? 8 : 0);
	}
	if ((rc = rckpt_buf_reserve(out, need)))
		return rc;
	w = rckpt_writer(out->p + start, need);
	rckpt_wr_u32(&w, RCKPT_MANIFEST_MAGIC);
	rckpt_wr_u8(&w, (uint8_t)version);
	rckpt_wr_u8(&w, (uint8_t)version);
	rckpt_wr_u16(&w, 0);
	rckpt_wr_u64(&w, m->step);
	rckpt_wr_u64(&w, m->parent);
	rckpt_wr_u32(&w, m->ntensors);
	rckpt_wr_u32(&w, m->nchunks);
	rckpt_wr_u64(&w, m->chunk_params);
	for (i = 0; i < m->ntensors; i++) {
		const rckpt_mf_tensor_t *t = &m->t[i];
		size_t nl = strlen(t->name);
		rckpt_wr_u16(&w, (uint16_t)nl);
		rckpt_wr_bytes(&w, t->name, nl);
		rckpt_wr_u8(&w, t->dtype);
		rckpt_wr_u8(&w, t->kind);
		rckpt_wr_u8(&w, t->encoding);
		rckpt_wr_u8(&w, (uint8_t)t->ndim);
		for (k = 0; k < t->ndim; k++)
			rckpt_wr_u64(&w, t->shape[k]);
		rckpt_wr_u32(&w, t->nseg);
		for (k = 0; k < t->nseg; k++) {
			rckpt_wr_u32(&w, t->seg[k].chunk);
			rckpt_wr_u32(&w, t->seg[k].index);
			rckpt_wr_u64(&w, t->seg[k].n);
		}
		if (t->kind >= RCKPT_MF_KIND_OPTIM_FIRST) {
			rckpt_wr_u32(&w, t->norm);
			rckpt_wr_u32(&w, rckpt_f2u(t->eps));
		}
	}
	wr_config(&w, &m->cfg);
	rckpt_wr_u64(&w, rckpt_d2u(m->quality));
	rckpt_wr_u64(&w, m->raw_bytes);
	rckpt_wr_u64(&w, m->enc_bytes);
	if (version > 1)
		rckpt_wr_u64(&w, rckpt_d2u(m->opt_quality));
	for (i = 0; i < m->nchunks; i++) {
		rckpt_wr_u32(&w, m->chunk[i].elements);
		rckpt_wr_u32(&w, m->chunk[i].nseg);
		rckpt_wr_u64(&w, m->chunk[i].record_bytes);
		rckpt_wr_bytes(&w, m->chunk[i].sha256, 32);
		if (version > 2) {
			rckpt_wr_u64(&w, m->chunk[i].base_bytes);
			rckpt_wr_bytes(&w, m->chunk[i].base_sha256, 32);
		}
	}
	rckpt_wr_u32(&w, rckpt_crc32c(0, out->p + start, w.pos));
	if (w.err)
		return w.err;
	out->len += w.pos;
	return 0;
}

uint64_t rckpt_mf_numel(const rckpt_mf_tensor_t *t)
{
	uint64_t n = 1;
	unsigned d;
	for (d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

static uint64_t mf_elements(const rckpt_mf_tensor_t *t)
{
	uint64_t n = 0;
	uint32_t k;
	for (k = 0; k < t->nseg; k++)
		n += t->seg[k].n;
	return n;
}

int rckpt_manifest_decode(rckpt_manifest_t *out, const uint8_t *src, size_t len)
{
	rckpt_reader_t r = rckpt_reader(src, len);
	unsigned version, compat;
	uint32_t i, k, crc;
	int rc = -EBADMSG, named = 0;

	memset(out, 0, sizeof(*out));
	if (src == NULL || len < 44 || rckpt_rd_u32(&r) != RCKPT_MANIFEST_MAGIC)
		return -EBADMSG;
	version = rckpt_rd_u8(&r);
	compat = rckpt_rd_u8(&r);
	if (rckpt_rd_u16(&r) != 0 || compat == 0 || compat > version)
		return -EBADMSG;
	if (compat > 3)
		return RCKPT_FMT_EVERSION;
	if (version >= 3 && compat < 3) /* its chunk entries are version 3's */
		return -EBADMSG;
	crc = rckpt_le32(src + len - 4);
	if (rckpt_crc32c(0, src, len - 4) != crc)
		return RCKPT_FMT_ECHECKSUM;
	r.len = len - 4;
	out->step = rckpt_rd_u64(&r);
	out->parent = rckpt_rd_u64(&r);
	out->ntensors = rckpt_rd_u32(&r);
	out->nchunks = rckpt_rd_u32(&r);
	out->chunk_params = rckpt_rd_u64(&r);
	if (r.err || out->ntensors > RCKPT_MF_MAX_TENSORS || out->nchunks > RCKPT_MF_MAX_CHUNKS ||
	    /* every tensor takes >= 12 bytes, every chunk 48 (88): bound before allocating */
	    (uint64_t)out->ntensors * 12 + (uint64_t)out->nchunks * (version > 2 ? 88 : 48) >
		    rckpt_rd_left(&r))
		goto bad;
	out->t = calloc(out->ntensors ? out->ntensors : 1, sizeof(*out->t));
	out->chunk = calloc(out->nchunks ? out->nchunks : 1, sizeof(*out->chunk));
	if (!out->t || !out->chunk) {
		rc = -ENOMEM;
		goto bad;
	}
	for (i = 0; i < out->ntensors; i++) {
		rckpt_mf_tensor_t *t = &out->t[i];
		size_t nl = rckpt_rd_u16(&r);
		const uint8_t *name = rckpt_rd_bytes(&r, nl);
		uint64_t elems = 1, covered = 0;
		if (name == NULL || nl == 0 || nl > RCKPT_MF_MAX_NAME || memchr(name, 0, nl))
			goto bad;
		t->name = malloc(nl + 1);
		if (t->name == NULL) {
			rc = -ENOMEM;
			goto bad;
		}
		memcpy(t->name, name, nl);
		t->name[nl] = '\0';
		if (i && strcmp(out->t[i - 1].name, t->name) >= 0) /* sorted, distinct */
			goto bad;
		t->dtype = rckpt_rd_u8(&r);
		t->kind = rckpt_rd_u8(&r);
		t->encoding = rckpt_rd_u8(&r);
		t->ndim = rckpt_rd_u8(&r);
		if (r.err || rckpt_dtype_size(t->dtype) == 0 || t->kind >= (version > 1 ? RCKPT_MF_TENSOR_KINDS
									      : RCKPT_MF_KINDS) ||
		    (t->encoding != RCKPT_SEG_QUANTIZED && t->encoding != RCKPT_SEG_LOSSLESS) ||
		    t->ndim > RCKPT_MF_MAX_DIMS)
			goto bad;
		for (k = 0; k < t->ndim; k++) {
			t->shape[k] = rckpt_rd_u64(&r);
			if (t->shape[k] && elems > UINT64_MAX / t->shape[k])
				goto bad;
			elems *= t->shape[k];
		}
		t->nseg = rckpt_rd_u32(&r);
		if (r.err || (uint64_t)t->nseg * 16 > rckpt_rd_left(&r))
			goto bad;
		t->seg = calloc(t->nseg ? t->nseg : 1, sizeof(*t->seg));
		if (t->seg == NULL) {
			rc = -ENOMEM;
			goto bad;
		}
		for (k = 0; k < t->nseg; k++) {
			t->seg[k].chunk = rckpt_rd_u32(&r);
			t->seg[k].index = rckpt_rd_u32(&r);
			t->seg[k].n = rckpt_rd_u64(&r);
			if (t->seg[k].chunk >= out->nchunks || t->seg[k].n > elems - covered)
				goto bad;
			covered += t->seg[k].n;
		}
		if (r.err || covered != elems)
			goto bad;
		t->norm = RCKPT_MF_NO_NORM;
		if (t->kind >= RCKPT_MF_KIND_OPTIM_FIRST) {
			t->norm = rckpt_rd_u32(&r);
			t->eps = rckpt_u2f(rckpt_rd_u32(&r));
			if (r.err || (t->norm != RCKPT_MF_NO_NORM &&
				      (t->kind != RCKPT_MF_KIND_OPTIM_FIRST || !(t->eps >= 0) ||
				       !isfinite(t->eps))))
				goto bad;
		}
	}
	/* a first moment's norm is a second moment of as many elements */
	for (i = 0; i < out->ntensors; i++) {
		const rckpt_mf_tensor_t *t = &out->t[i], *v;
		if (t->norm == RCKPT_MF_NO_NORM)
			continue;
		if (t->norm >= out->ntensors)
			goto bad;
		v = &out->t[t->norm];
		if (v->kind != RCKPT_MF_KIND_OPTIM_FIRST + 1 || mf_elements(v) != mf_elements(t))
			goto bad;
	}
	out->cfg.bins = rckpt_rd_u8(&r);
	out->cfg.emb_bins = rckpt_rd_u8(&r);
	out->cfg.metric = rckpt_rd_u8(&r);
	out->cfg.flags = rckpt_rd_u8(&r);
	for (k = 0; k < RCKPT_MF_KINDS; k++)
		out->cfg.prune[k] = rckpt_u2f(rckpt_rd_u32(&r));
	out->cfg.protect = rckpt_u2f(rckpt_rd_u32(&r));
	out->cfg.lambda = rckpt_u2f(rckpt_rd_u32(&r));
	out->quality = rckpt_u2d(rckpt_rd_u64(&r));
	out->raw_bytes = rckpt_rd_u64(&r);
	out->enc_bytes = rckpt_rd_u64(&r);
	if (version > 1)
		out->opt_quality = rckpt_u2d(rckpt_rd_u64(&r));
	for (i = 0; i < out->nchunks; i++) {
		const uint8_t *h;
		out->chunk[i].elements = rckpt_rd_u32(&r);
		out->chunk[i].nseg = rckpt_rd_u32(&r);
		out->chunk[i].record_bytes = rckpt_rd_u64(&r);
		h = rckpt_rd_bytes(&r, 32);
		if (h == NULL)
			goto bad;
		memcpy(out->chunk[i].sha256, h, 32);
		if (version > 2) {
			static const uint8_t none[32];
			out->chunk[i].base_bytes = rckpt_rd_u64(&r);
			if ((h = rckpt_rd_bytes(&r, 32)) == NULL ||
			    (out->chunk[i].base_bytes == 0 && memcmp(h, none, 32) != 0))
				goto bad; /* none named: 32 zero bytes */
			memcpy(out->chunk[i].base_sha256, h, 32);
			named |= out->chunk[i].base_bytes != 0;
		}
	}
	if (version > 2 && !named) /* version 3 names one, else it is written as version 2 or 1 */
		goto bad;
	if (r.err || rckpt_rd_left(&r) != 0)
		goto bad;
	return 0;
bad:
	rckpt_manifest_free(out);
	return rc;
}

int rckpt_record_digest(uint8_t out[32], const rckpt_record_t *rec)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint32_t i;
	int ok;

	if (ctx == NULL)
		return -ENOMEM;
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	for (i = 0; ok && i < rec->nseg; i++) {
		const rckpt_seg_t *s = &rec->seg[i];
		uint8_t h[24 + 1 + 4 * RCKPT_SEG_MAX_BINS + 8];
		rckpt_writer_t w = rckpt_writer(h, sizeof(h));
		unsigned j;
		rckpt_wr_u32(&w, s->tensor);
		rckpt_wr_u64(&w, s->first);
		rckpt_wr_u64(&w, s->n);
		rckpt_wr_u8(&w, s->encoding);
		rckpt_wr_u8(&w, s->dtype);
		if (s->transform != RCKPT_XF_NONE) /* absent when none: v1 digests stand */
			rckpt_wr_u8(&w, s->transform);
		if (s->encoding == RCKPT_SEG_QUANTIZED) {
			rckpt_wr_u8(&w, (uint8_t)s->nbins);
			for (j = 0; j < s->nbins; j++)
				rckpt_wr_u32(&w, rckpt_f2u(s->centroids[j]));
			rckpt_wr_u64(&w, s->nprot);
		}
		ok = EVP_DigestUpdate(ctx, h, w.pos);
		if (s->encoding == RCKPT_SEG_QUANTIZED) {
			uint8_t b[4096]; /* the protected values' bytes, a buffer at a time */
			uint64_t k = 0;
			while (ok && k < s->nprot) {
				size_t m = 0;
				for (; k < s->nprot && m < sizeof(b); k++, m += 2) {
					b[m] = (uint8_t)s->prot[k];
					b[m + 1] = (uint8_t)(s->prot[k] >> 8);
				}
				ok = EVP_DigestUpdate(ctx, b, m);
			}
			if (ok && s->n)
				ok = EVP_DigestUpdate(ctx, s->idx, (size_t)s->n);
		} else if (ok && s->n) {
			ok = EVP_DigestUpdate(ctx, s->raw, (size_t)s->n * rckpt_dtype_size(s->dtype));
		}
	}
	if (ok)
		ok = EVP_DigestFinal_ex(ctx, out, NULL);
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -ENOMEM;
}

int rckpt_sha256(uint8_t out[32], const uint8_t *p, size_t n)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, p, n) &&
		 EVP_DigestFinal_ex(ctx, out, NULL);
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -ENOMEM;
}

int rckpt_manifest_is_base(const rckpt_manifest_t *m, uint32_t c, const uint8_t *rec, size_t len)
{
	uint8_t h[32];
	int rc;
	if (c >= m->nchunks || m->chunk[c].base_bytes == 0 || m->chunk[c].base_bytes != len)
		return 0;
	if ((rc = rckpt_sha256(h, rec, len)))
		return rc;
	return memcmp(h, m->chunk[c].base_sha256, 32) == 0;
}

void rckpt_manifest_optim_bytes(const rckpt_manifest_t *m, uint64_t *raw, uint64_t *enc)
{
	uint8_t *kinds = calloc(m->nchunks ? m->nchunks : 1, 1); /* bit 0 optimizer, bit 1 model */
	uint32_t i, k;
	*raw = *enc = 0;
	for (i = 0; i < m->ntensors; i++) {
		const rckpt_mf_tensor_t *t = &m->t[i];
		const int opt = t->kind >= RCKPT_MF_KIND_OPTIM_FIRST;
		for (k = 0; k < t->nseg; k++) {
			*raw += opt ? 4 * t->seg[k].n : 0;
			if (kinds && t->seg[k].chunk < m->nchunks)
				kinds[t->seg[k].chunk] |= opt ? 1 : 2;
		}
	}
	for (k = 0; kinds && k < m->nchunks; k++)
		if (kinds[k] == 1)
			*enc += m->chunk[k].record_bytes;
	free(kinds);
}
