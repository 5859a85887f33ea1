/*
 * cls_pcr_methods.c — C bodies of the `pcr` object class.
 *
 * A record object is the head (image table, group table) and then group
 * 1, 2, ... (formats/pcr.md). Every method first reads and decodes the
 * head, which checks its CRC and that every offset lies inside the
 * object; only then does it read group data.
 */
#include "cls_pcr_methods.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_pcr.h"

/* The formats this plugin reads and writes, with the versions it handles. */
static const rckpt_wire_format_range_t cls_pcr_formats[] = {
	{ "cls-wire", 1, RCKPT_WIRE_VERSION },
	{ "pcr", 1, RCKPT_PCR_VERSION },
};

int cls_pcr_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return rckpt_cls_version_reply(out, "pcr", cls_pcr_formats,
				       sizeof(cls_pcr_formats) / sizeof(cls_pcr_formats[0]), in,
				       in_len);
}

/* Reads exactly len bytes at off into out, or -EBADMSG when the object
 * ends first (a head that points past the object). */
static int read_exact(rckpt_cls_obj_t *o, uint64_t off, size_t len, rckpt_buf_t *out)
{
	size_t before = out->len;
	int rc = len ? o->ops->read(o, off, len, out) : 0;
	if (rc < 0)
		return rc;
	return out->len - before == len ? 0 : -EBADMSG;
}

/* Reads and decodes the record's head; *size gets the object's size, and
 * hb (freed by the caller) the head's bytes, which h points into. */
static int load_head(rckpt_cls_obj_t *o, rckpt_pcr_head_t *h, rckpt_buf_t *hb, uint64_t *size)
{
	rckpt_pcr_fixed_t f;
	int rc = o->ops->stat(o, size);

	memset(h, 0, sizeof(*h));
	if (rc)
		return rc;
	if (*size < RCKPT_PCR_FIXED_BYTES || *size > RCKPT_PCR_MAX_RECORD)
		return -EBADMSG;
	rc = read_exact(o, 0, RCKPT_PCR_FIXED_BYTES, hb);
	rc = rc ? rc : rckpt_pcr_fixed_decode(&f, hb->p, hb->len);
	if (rc)
		return rc;
	if (f.head_len > *size)
		return -EBADMSG;
	rc = read_exact(o, RCKPT_PCR_FIXED_BYTES, f.head_len - RCKPT_PCR_FIXED_BYTES, hb);
	rc = rc ? rc : rckpt_pcr_head_decode(h, hb->p, hb->len);
	if (rc == 0 && h->end[h->f.ngroups - 1] != *size) {
		rckpt_pcr_head_free(h);
		rc = -EBADMSG;
	}
	return rc;
}

static unsigned groups_for(const rckpt_pcr_head_t *h, uint16_t k)
{
	return k == RCKPT_PCR_GROUPS_ALL || k > h->f.ngroups ? h->f.ngroups : k;
}

int cls_pcr_read(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_buf_t hb = RCKPT_BUF_INIT;
	rckpt_pcr_head_t h;
	uint64_t size, end;
	size_t at;
	uint16_t k;
	unsigned kk;
	int rc;

	if (rckpt_msg_pcr_read_decode(&k, in, in_len))
		return -EINVAL;
	rc = load_head(o, &h, &hb, &size);
	if (rc)
		goto out;
	kk = groups_for(&h, k);
	end = h.end[kk - 1];
	if (end + 64 > RCKPT_CLS_OUT_MAX) {
		rc = -EFBIG;
		goto out;
	}
	/* The frame by hand, so the group bytes are read straight into it. */
	rc = rckpt_frame_buf_begin(out, RCKPT_MSG_PCR_PREFIX, RCKPT_PCR_VERSION, 1, &at);
	rc = rc ? rc : rckpt_buf_put_u16(out, (uint16_t)kk);
	rc = rc ? rc : rckpt_buf_put_u32(out, (uint32_t)end);
	rc = rc ? rc : rckpt_buf_append(out, hb.p, hb.len);
	rc = rc ? rc : read_exact(o, hb.len, end - hb.len, out);
	rc = rckpt_frame_buf_end(out, at, rc);
out:
	rckpt_pcr_head_free(&h);
	rckpt_buf_free(&hb);
	return rc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Pieces further apart than this are read separately. */
#define GATHER_GAP 32768u

int cls_pcr_images(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_buf_t hb = RCKPT_BUF_INIT, gb = RCKPT_BUF_INIT;
	rckpt_pcr_head_t h;
	const uint8_t *idx;
	uint32_t n, nu = 0, i, *uniq = NULL, *slot = NULL, *piece = NULL;
	uint64_t size;
	uint16_t k;
	unsigned kk, g;
	size_t at;
	int rc;

	if (rckpt_msg_pcr_images_decode(&k, &idx, &n, in, in_len))
		return -EINVAL;
	rc = load_head(o, &h, &hb, &size);
	if (rc)
		goto out;
	kk = groups_for(&h, k);
	uniq = malloc((size_t)n * sizeof(*uniq));
	slot = malloc((size_t)h.f.nimages * sizeof(*slot));
	if (!uniq || !slot) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		uniq[i] = rckpt_le32(idx + 4 * i);
		if (uniq[i] >= h.f.nimages) {
			rc = -ERANGE;
			goto out;
		}
	}
	qsort(uniq, n, sizeof(*uniq), cmp_u32);
	for (i = 0; i < n; i++)
		if (nu == 0 || uniq[nu - 1] != uniq[i])
			uniq[nu++] = uniq[i];
	for (i = 0; i < nu; i++)
		slot[uniq[i]] = i;
	piece = malloc((size_t)nu * kk * sizeof(*piece));
	if (!piece) {
		rc = -ENOMEM;
		goto out;
	}
	gb.max = RCKPT_CLS_OUT_MAX;
	/* Group by group, the requested scans in offset order, coalesced into
	 * runs; piece[u * kk + g] is where image uniq[u]'s scan g+1 lands in gb. */
	for (g = 0; g < kk && !rc; g++) {
		uint64_t gs = rckpt_pcr_group_start(&h, g + 1), run_from = 0, run_to = 0;
		size_t run_at = 0;
		int open = 0;
		for (i = 0; i < nu && !rc; i++) {
			const rckpt_pcr_img_t *im = &h.img[uniq[i]];
			uint64_t off = gs + h.pos[(size_t)uniq[i] * h.f.ngroups + g];
			uint32_t len = rckpt_pcr_scan_len(im, g + 1);
			if (len == 0)
				continue;
			if (open && off - run_to > GATHER_GAP) {
				rc = read_exact(o, run_from, run_to - run_from, &gb);
				open = 0;
			}
			if (!open) {
				run_from = off;
				run_at = gb.len;
				open = 1;
			}
			piece[(size_t)i * kk + g] = (uint32_t)(run_at + (off - run_from));
			run_to = off + len;
		}
		if (open && !rc)
			rc = read_exact(o, run_from, run_to - run_from, &gb);
	}
	if (rc)
		goto out;
	rc = rckpt_msg_pcr_jpegs_begin(out, &at, n);
	for (i = 0; i < n && !rc; i++) {
		static const uint8_t eoi[2] = { 0xFF, 0xD9 };
		uint32_t img = rckpt_le32(idx + 4 * i), u = slot[img];
		const rckpt_pcr_img_t *im = &h.img[img];
		size_t len_at;
		rc = rckpt_msg_pcr_jpegs_add(out, im, &len_at);
		rc = rc ? rc : rckpt_buf_append(out, im->hdr, im->hdr_len);
		for (g = 0; g < kk && g < im->nscans && !rc; g++)
			rc = rckpt_buf_append(out, gb.p + piece[(size_t)u * kk + g],
					      rckpt_pcr_scan_len(im, g + 1));
		rc = rc ? rc : rckpt_buf_append(out, eoi, 2);
		rc = rc ? rc : rckpt_msg_pcr_jpegs_add_done(out, len_at);
	}
	rc = rc ? rc : rckpt_msg_pcr_jpegs_end(out, at);
out:
	free(uniq);
	free(slot);
	free(piece);
	rckpt_pcr_head_free(&h);
	rckpt_buf_free(&hb);
	rckpt_buf_free(&gb);
	return rc;
}

int cls_pcr_stat(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_buf_t hb = RCKPT_BUF_INIT;
	rckpt_msg_pcr_stat_t m;
	rckpt_pcr_head_t h;
	uint64_t size;
	int rc;

	(void)in;
	if (in_len)
		return -EINVAL;
	rc = load_head(o, &h, &hb, &size);
	if (rc == 0) {
		memset(&m, 0, sizeof(m));
		m.record_no = h.f.record_no;
		m.nimages = h.f.nimages;
		m.head_len = h.f.head_len;
		m.ngroups = h.f.ngroups;
		m.size = size;
		memcpy(m.end, h.end, sizeof(m.end));
		rc = rckpt_msg_pcr_stat_encode(out, &m);
	}
	rckpt_pcr_head_free(&h);
	rckpt_buf_free(&hb);
	return rc;
}
