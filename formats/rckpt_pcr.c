/*
 * rckpt_pcr.c — PCR records, index and messages (formats/pcr.md).
 */
#include "rckpt_pcr.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_crc32c.h"
#include "rckpt_wire.h"

/* ---- JPEG scans ---- */

static int is_sof(uint8_t m)
{
	/* C0..CF except DHT (C4), JPG (C8), DAC (CC) */
	return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

/* The end of the entropy-coded data that starts at p[i]: the offset of
 * the next marker's first 0xFF (fill bytes included), or len if none. */
static size_t entropy_end(const uint8_t *p, size_t i, size_t len)
{
	while (i < len) {
		const uint8_t *ff = memchr(p + i, 0xFF, len - i);
		size_t j;
		if (ff == NULL)
			return len;
		i = (size_t)(ff - p);
		j = i + 1;
		while (j < len && p[j] == 0xFF)
			j++;
		if (j >= len)
			return i;
		if (p[j] != 0x00 && !(p[j] >= 0xD0 && p[j] <= 0xD7))
			return i;
		i = j + 1;
	}
	return len;
}

int rckpt_pcr_jpeg_split(rckpt_pcr_split_t *out, const uint8_t *p, size_t len)
{
	size_t pos = 2, scan_from = 0;
	int have_sof = 0, luma = -1;

	memset(out, 0, sizeof(*out));
	if (len < 4 || len > UINT32_MAX || p[0] != 0xFF || p[1] != 0xD8)
		return -EBADMSG;
	for (;;) {
		size_t at = pos, seg_len, seg_end;
		uint8_t m;

		if (pos >= len || p[pos] != 0xFF)
			return -EBADMSG;
		while (pos < len && p[pos] == 0xFF)
			pos++;
		if (pos >= len)
			return -EBADMSG;
		m = p[pos++];
		if (m == 0xD9) { /* EOI: right after the last scan, and the end */
			if (out->nscans == 0 || at != scan_from || pos != len)
				return -EBADMSG;
			return 0;
		}
		if (m == 0x00 || m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7))
			return -EBADMSG;
		if (len - pos < 2)
			return -EBADMSG;
		seg_len = (size_t)p[pos] << 8 | p[pos + 1];
		if (seg_len < 2 || seg_len > len - pos)
			return -EBADMSG;
		seg_end = pos + seg_len;
		if (is_sof(m)) {
			if (have_sof || seg_len < 8)
				return -EBADMSG;
			have_sof = 1;
			out->height = (uint16_t)(p[pos + 3] << 8 | p[pos + 4]);
			out->width = (uint16_t)(p[pos + 5] << 8 | p[pos + 6]);
			out->ncomp = p[pos + 7];
			out->progressive = m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE;
			if (out->ncomp >= 1 && seg_len >= 11)
				luma = p[pos + 8]; /* the first component's id */
			if (seg_end > RCKPT_PCR_MAX_HEADER)
				return -E2BIG;
			out->header_len = (uint32_t)seg_end;
			scan_from = seg_end;
		} else if (m == 0xDA) {
			size_t e;
			if (!have_sof)
				return -EBADMSG;
			if (out->nscans == RCKPT_PCR_MAX_GROUPS)
				return -E2BIG;
			{ /* Ns, Ns component ids and table bytes, Ss, Se, AhAl */
				unsigned ns = seg_len >= 3 ? p[pos + 2] : 0, j, has = 0;
				if (ns == 0 || seg_len < 6 + 2 * ns || luma < 0) {
					out->luma_se = 63; /* not understood: keep it all */
				} else {
					for (j = 0; j < ns; j++)
						has |= p[pos + 3 + 2 * j] == luma;
					if (has && p[pos + 4 + 2 * ns] > out->luma_se)
						out->luma_se = p[pos + 4 + 2 * ns] > 63 ? 63 : p[pos + 4 + 2 * ns];
				}
			}
			e = entropy_end(p, seg_end, len);
			if (e >= len)
				return -EBADMSG; /* no EOI */
			out->start[out->nscans] = (uint32_t)scan_from;
			out->len[out->nscans] = (uint32_t)(e - scan_from);
			out->nscans++;
			scan_from = e;
			pos = e;
			continue;
		}
		pos = seg_end;
	}
}

unsigned rckpt_pcr_auto_scale(unsigned luma_se)
{
	/* zig-zag 0 is the DC; 0..2 lie in the top-left 2x2 of the 8x8
	 * block, 0..9 in its 4x4: what the 1x1, 2x2, 4x4 inverse DCTs use */
	return luma_se == 0 ? 8 : luma_se <= 2 ? 4 : luma_se <= 9 ? 2 : 1;
}

/* ---- record objects ---- */

int rckpt_pcr_name_ok(const char *s, size_t n)
{
	size_t i;
	if (n == 0 || n > RCKPT_PCR_MAX_NAME || (n == 1 && s[0] == '.') ||
	    (n == 2 && s[0] == '.' && s[1] == '.'))
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == '/' || s[i] == 0x7F)
			return 0;
	return 1;
}

uint32_t rckpt_pcr_scan_len(const rckpt_pcr_img_t *im, unsigned g)
{
	return g >= 1 && g <= im->nscans ? rckpt_le32(im->scan_lens + 4 * (g - 1)) : 0;
}

int rckpt_pcr_record_encode(rckpt_buf_t *out, uint32_t record_no, const rckpt_pcr_src_t *src,
			    unsigned n)
{
	size_t base = out->len, table, head_len;
	unsigned ngroups = 0, i, g;
	int rc = 0;

	if (n == 0 || n > RCKPT_PCR_MAX_IMAGES)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		const rckpt_pcr_src_t *s = &src[i];
		if (s->id != src[0].id + i || s->id < src[0].id || !s->name ||
		    !rckpt_pcr_name_ok(s->name, strlen(s->name)) || s->label_len > RCKPT_PCR_MAX_LABEL ||
		    s->split.nscans == 0 || s->split.nscans > RCKPT_PCR_MAX_GROUPS ||
		    s->split.header_len == 0 || s->split.header_len > RCKPT_PCR_MAX_HEADER)
			return -EINVAL;
		if (s->split.nscans > ngroups)
			ngroups = s->split.nscans;
	}
	rc = rckpt_buf_put_u32(out, RCKPT_PCR_REC_MAGIC);
	rc = rc ? rc : rckpt_buf_put_u16(out, RCKPT_PCR_VERSION);
	rc = rc ? rc : rckpt_buf_put_u16(out, 0);
	rc = rc ? rc : rckpt_buf_put_u32(out, n);
	rc = rc ? rc : rckpt_buf_put_u16(out, (uint16_t)ngroups);
	rc = rc ? rc : rckpt_buf_put_u16(out, 0);
	rc = rc ? rc : rckpt_buf_put_u32(out, 0); /* head_len, patched below */
	rc = rc ? rc : rckpt_buf_put_u32(out, record_no);
	table = out->len;
	for (g = 0; g < ngroups && !rc; g++) {
		rc = rckpt_buf_put_u64(out, 0);
		rc = rc ? rc : rckpt_buf_put_u32(out, 0);
	}
	for (i = 0; i < n && !rc; i++) {
		const rckpt_pcr_src_t *s = &src[i];
		size_t nl = strlen(s->name);
		rc = rckpt_buf_put_u32(out, s->id);
		rc = rc ? rc : rckpt_buf_put_u8(out, (uint8_t)nl);
		rc = rc ? rc : rckpt_buf_append(out, s->name, nl);
		rc = rc ? rc : rckpt_buf_put_u16(out, (uint16_t)s->label_len);
		rc = rc ? rc : rckpt_buf_append(out, s->label, s->label_len);
		rc = rc ? rc : rckpt_buf_put_u32(out, s->split.header_len);
		rc = rc ? rc : rckpt_buf_append(out, s->jpeg, s->split.header_len);
		rc = rc ? rc : rckpt_buf_put_u8(out, (uint8_t)s->split.nscans);
		for (g = 0; g < s->split.nscans && !rc; g++)
			rc = rckpt_buf_put_u32(out, s->split.len[g]);
	}
	if (rc)
		goto out;
	head_len = out->len - base + 4;
	if (head_len > RCKPT_PCR_MAX_HEAD) {
		rc = -EINVAL;
		goto out;
	}
	rckpt_buf_set_u32(out, base + 16, (uint32_t)head_len);
	rc = rckpt_buf_put_u32(out, rckpt_crc32c(0, out->p + base, head_len - 4));
	for (g = 0; g < ngroups && !rc; g++) {
		size_t from = out->len;
		uint32_t crc;
		for (i = 0; i < n && !rc; i++)
			if (g < src[i].split.nscans)
				rc = rckpt_buf_append(out, src[i].jpeg + src[i].split.start[g],
						      src[i].split.len[g]);
		if (rc)
			break;
		if (out->len - base > RCKPT_PCR_MAX_RECORD) {
			rc = -EFBIG;
			break;
		}
		crc = rckpt_crc32c(0, out->p + from, out->len - from);
		rckpt_buf_set_u32(out, table + 12 * g, (uint32_t)(out->len - base));
		rckpt_buf_set_u32(out, table + 12 * g + 4, (uint32_t)((uint64_t)(out->len - base) >> 32));
		rckpt_buf_set_u32(out, table + 12 * g + 8, crc);
	}
	if (!rc) /* the group table changed: the head's CRC covers it */
		rckpt_buf_set_u32(out, base + head_len - 4,
				  rckpt_crc32c(0, out->p + base, head_len - 4));
out:
	if (rc)
		out->len = base;
	return rc;
}

int rckpt_pcr_fixed_decode(rckpt_pcr_fixed_t *out, const uint8_t *src, size_t len)
{
	rckpt_reader_t r = rckpt_reader(src, len);
	uint32_t magic = rckpt_rd_u32(&r);
	uint16_t version = rckpt_rd_u16(&r), flags = rckpt_rd_u16(&r);
	uint16_t reserved;

	memset(out, 0, sizeof(*out));
	out->nimages = rckpt_rd_u32(&r);
	out->ngroups = rckpt_rd_u16(&r);
	reserved = rckpt_rd_u16(&r);
	out->head_len = rckpt_rd_u32(&r);
	out->record_no = rckpt_rd_u32(&r);
	if (r.err || magic != RCKPT_PCR_REC_MAGIC)
		return -EBADMSG;
	if (version != RCKPT_PCR_VERSION)
		return version > RCKPT_PCR_VERSION ? RCKPT_FMT_EVERSION : -EBADMSG;
	if (flags || reserved || out->nimages == 0 || out->nimages > RCKPT_PCR_MAX_IMAGES ||
	    out->ngroups == 0 || out->ngroups > RCKPT_PCR_MAX_GROUPS || out->head_len > RCKPT_PCR_MAX_HEAD ||
	    out->head_len < RCKPT_PCR_FIXED_BYTES + 12u * out->ngroups + 4u)
		return -EBADMSG;
	return 0;
}

void rckpt_pcr_head_free(rckpt_pcr_head_t *h)
{
	if (h == NULL)
		return;
	free(h->img);
	free(h->pos);
	h->img = NULL;
	h->pos = NULL;
}

int rckpt_pcr_head_decode(rckpt_pcr_head_t *h, const uint8_t *src, size_t len)
{
	uint64_t size[RCKPT_PCR_MAX_GROUPS] = { 0 };
	rckpt_reader_t r;
	unsigned i, g, ng;
	int rc;

	memset(h, 0, sizeof(*h));
	rc = rckpt_pcr_fixed_decode(&h->f, src, len);
	if (rc)
		return rc;
	if (len < h->f.head_len)
		return -EBADMSG;
	if (rckpt_crc32c(0, src, h->f.head_len - 4) != rckpt_le32(src + h->f.head_len - 4))
		return RCKPT_FMT_ECHECKSUM;
	ng = h->f.ngroups;
	/* every image takes at least 16 head bytes: bound before allocating */
	if ((uint64_t)h->f.nimages * 16 > h->f.head_len)
		return -EBADMSG;
	r = rckpt_reader(src, h->f.head_len - 4);
	r.pos = RCKPT_PCR_FIXED_BYTES;
	for (g = 0; g < ng; g++) {
		h->end[g] = rckpt_rd_u64(&r);
		h->crc[g] = rckpt_rd_u32(&r);
		if (h->end[g] <= rckpt_pcr_group_start(h, g + 1) || h->end[g] > RCKPT_PCR_MAX_RECORD)
			return -EBADMSG;
	}
	h->img = calloc(h->f.nimages, sizeof(*h->img));
	h->pos = calloc((size_t)h->f.nimages * ng, sizeof(*h->pos));
	if (!h->img || !h->pos) {
		rckpt_pcr_head_free(h);
		return -ENOMEM;
	}
	for (i = 0; i < h->f.nimages && !r.err; i++) {
		rckpt_pcr_img_t *im = &h->img[i];
		im->id = rckpt_rd_u32(&r);
		im->name_len = rckpt_rd_u8(&r);
		im->name = (const char *)rckpt_rd_bytes(&r, im->name_len);
		im->label_len = rckpt_rd_u16(&r);
		im->label = rckpt_rd_bytes(&r, im->label_len);
		im->hdr_len = rckpt_rd_u32(&r);
		if (im->hdr_len == 0 || im->hdr_len > RCKPT_PCR_MAX_HEADER || im->label_len > RCKPT_PCR_MAX_LABEL)
			break;
		im->hdr = rckpt_rd_bytes(&r, im->hdr_len);
		im->nscans = rckpt_rd_u8(&r);
		if (im->nscans == 0 || im->nscans > ng)
			break;
		im->scan_lens = rckpt_rd_bytes(&r, 4u * im->nscans);
		if (r.err || !rckpt_pcr_name_ok(im->name, im->name_len) || im->id != h->img[0].id + i ||
		    im->id < h->img[0].id)
			break;
		for (g = 0; g < ng; g++) {
			uint32_t sl = rckpt_pcr_scan_len(im, g + 1);
			if (g < im->nscans && sl == 0)
				break;
			h->pos[(size_t)i * ng + g] = (uint32_t)size[g];
			size[g] += sl;
			if (size[g] > RCKPT_PCR_MAX_RECORD)
				break;
		}
		if (g < ng)
			break;
	}
	if (i < h->f.nimages || r.err || rckpt_rd_left(&r) != 0)
		goto bad;
	for (g = 0; g < ng; g++)
		if (size[g] != h->end[g] - rckpt_pcr_group_start(h, g + 1))
			goto bad;
	return 0;
bad:
	rckpt_pcr_head_free(h);
	return -EBADMSG;
}

int rckpt_pcr_groups_check(const rckpt_pcr_head_t *h, const uint8_t *src, size_t len, unsigned k)
{
	unsigned g;
	if (k > h->f.ngroups || (k && len < h->end[k - 1]))
		return -EBADMSG;
	for (g = 1; g <= k; g++) {
		uint64_t s = rckpt_pcr_group_start(h, g);
		if (rckpt_crc32c(0, src + s, h->end[g - 1] - s) != h->crc[g - 1])
			return RCKPT_FMT_ECHECKSUM;
	}
	return 0;
}

int rckpt_pcr_assemble(rckpt_buf_t *out, const rckpt_pcr_head_t *h, unsigned i, unsigned k,
		       const uint8_t *prefix, size_t len)
{
	static const uint8_t eoi[2] = { 0xFF, 0xD9 };
	const rckpt_pcr_img_t *im;
	unsigned g;
	int rc;

	if (i >= h->f.nimages || k == 0)
		return -EINVAL;
	im = &h->img[i];
	rc = rckpt_buf_append(out, im->hdr, im->hdr_len);
	for (g = 1; g <= k && g <= im->nscans && !rc; g++) {
		uint64_t off = rckpt_pcr_group_start(h, g) + h->pos[(size_t)i * h->f.ngroups + g - 1];
		uint32_t n = rckpt_pcr_scan_len(im, g);
		if (off + n > len)
			return -EBADMSG;
		rc = rckpt_buf_append(out, prefix + off, n);
	}
	return rc ? rc : rckpt_buf_append(out, eoi, 2);
}

/* ---- the dataset index ---- */

#define IDX_FIXED_BYTES 48u

int rckpt_pcr_index_encode(rckpt_buf_t *out, const rckpt_pcr_index_t *x)
{
	size_t base = out->len;
	uint64_t total = 0;
	unsigned g, i;
	int rc;

	if (x->ngroups == 0 || x->ngroups > RCKPT_PCR_MAX_GROUPS || x->nrecords == 0 ||
	    x->nrecords > RCKPT_PCR_MAX_RECORDS || x->nimages > RCKPT_PCR_MAX_DATASET_IMAGES)
		return -EINVAL;
	for (i = 0; i < x->nimages; i++)
		if (x->label_off[i + 1] < x->label_off[i] ||
		    x->label_off[i + 1] - x->label_off[i] > RCKPT_PCR_MAX_LABEL)
			return -EINVAL;
	rc = rckpt_buf_put_u32(out, RCKPT_PCR_IDX_MAGIC);
	rc = rc ? rc : rckpt_buf_put_u16(out, RCKPT_PCR_VERSION);
	rc = rc ? rc : rckpt_buf_put_u16(out, 0);
	rc = rc ? rc : rckpt_buf_put_u32(out, x->nrecords);
	rc = rc ? rc : rckpt_buf_put_u32(out, x->nimages);
	rc = rc ? rc : rckpt_buf_put_u16(out, x->ngroups);
	rc = rc ? rc : rckpt_buf_put_u16(out, 0);
	rc = rc ? rc : rckpt_buf_put_u32(out, x->fidelity_sample);
	rc = rc ? rc : rckpt_buf_put_u64(out, x->created);
	rc = rc ? rc : rckpt_buf_put_u64(out, x->source_bytes);
	rc = rc ? rc : rckpt_buf_put_u64(out, x->head_bytes);
	for (g = 0; g < x->ngroups && !rc; g++) {
		rc = rckpt_buf_put_u64(out, x->group_bytes[g]);
		rc = rc ? rc : rckpt_buf_put_u64(out, rckpt_d2u(x->mssim[g]));
		rc = rc ? rc : rckpt_buf_put_u32(out, x->group_images[g]);
	}
	for (i = 0; i < x->nrecords && !rc; i++) {
		const rckpt_pcr_index_rec_t *e = &x->rec[i];
		if (e->ngroups == 0 || e->ngroups > x->ngroups) {
			rc = -EINVAL;
			break;
		}
		rc = rckpt_buf_put_u32(out, e->first_id);
		rc = rc ? rc : rckpt_buf_put_u32(out, e->nimages);
		rc = rc ? rc : rckpt_buf_put_u32(out, e->head_len);
		rc = rc ? rc : rckpt_buf_put_u16(out, e->ngroups);
		for (g = 0; g < e->ngroups && !rc; g++)
			rc = rckpt_buf_put_u64(out, e->end[g]);
		total += e->nimages;
	}
	if (!rc && total != x->nimages)
		rc = -EINVAL;
	rc = rc ? rc : rckpt_buf_put_u32(out, x->nimages ? x->label_off[x->nimages] - x->label_off[0] : 0);
	for (i = 0; i < x->nimages && !rc; i++)
		rc = rckpt_buf_put_u16(out, (uint16_t)(x->label_off[i + 1] - x->label_off[i]));
	if (!rc && x->nimages)
		rc = rckpt_buf_append(out, x->labels + x->label_off[0],
				      x->label_off[x->nimages] - x->label_off[0]);
	rc = rc ? rc : rckpt_buf_put_u32(out, rckpt_crc32c(0, out->p + base, out->len - base));
	if (rc)
		out->len = base;
	return rc;
}

void rckpt_pcr_index_free(rckpt_pcr_index_t *x)
{
	if (x == NULL)
		return;
	free(x->rec);
	free(x->label_off);
	x->rec = NULL;
	x->label_off = NULL;
}

int rckpt_pcr_index_decode(rckpt_pcr_index_t *x, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	uint32_t magic, label_total, first = 0;
	uint16_t version, flags, reserved;
	unsigned g, i;

	memset(x, 0, sizeof(*x));
	if (len < IDX_FIXED_BYTES + 8)
		return -EBADMSG;
	r = rckpt_reader(src, len - 4);
	magic = rckpt_rd_u32(&r);
	version = rckpt_rd_u16(&r);
	flags = rckpt_rd_u16(&r);
	if (magic != RCKPT_PCR_IDX_MAGIC)
		return -EBADMSG;
	if (version != RCKPT_PCR_VERSION)
		return version > RCKPT_PCR_VERSION ? RCKPT_FMT_EVERSION : -EBADMSG;
	if (rckpt_crc32c(0, src, len - 4) != rckpt_le32(src + len - 4))
		return RCKPT_FMT_ECHECKSUM;
	x->nrecords = rckpt_rd_u32(&r);
	x->nimages = rckpt_rd_u32(&r);
	x->ngroups = rckpt_rd_u16(&r);
	reserved = rckpt_rd_u16(&r);
	x->fidelity_sample = rckpt_rd_u32(&r);
	x->created = rckpt_rd_u64(&r);
	x->source_bytes = rckpt_rd_u64(&r);
	x->head_bytes = rckpt_rd_u64(&r);
	if (flags || reserved || x->ngroups == 0 || x->ngroups > RCKPT_PCR_MAX_GROUPS ||
	    x->nrecords == 0 || x->nrecords > RCKPT_PCR_MAX_RECORDS ||
	    x->nimages > RCKPT_PCR_MAX_DATASET_IMAGES ||
	    /* each record takes 22 bytes and each image 2: bound before allocating */
	    (uint64_t)x->nrecords * 22 + (uint64_t)x->nimages * 2 > len)
		return -EBADMSG;
	for (g = 0; g < x->ngroups; g++) {
		x->group_bytes[g] = rckpt_rd_u64(&r);
		x->mssim[g] = rckpt_u2d(rckpt_rd_u64(&r));
		x->group_images[g] = rckpt_rd_u32(&r);
		if (!(x->mssim[g] >= -1.0 && x->mssim[g] <= 1.0))
			return -EBADMSG;
	}
	x->rec = calloc(x->nrecords, sizeof(*x->rec));
	x->label_off = calloc((size_t)x->nimages + 1, sizeof(*x->label_off));
	if (!x->rec || !x->label_off) {
		rckpt_pcr_index_free(x);
		return -ENOMEM;
	}
	for (i = 0; i < x->nrecords && !r.err; i++) {
		rckpt_pcr_index_rec_t *e = &x->rec[i];
		e->first_id = rckpt_rd_u32(&r);
		e->nimages = rckpt_rd_u32(&r);
		e->head_len = rckpt_rd_u32(&r);
		e->ngroups = rckpt_rd_u16(&r);
		if (e->first_id != first || e->nimages == 0 || e->nimages > RCKPT_PCR_MAX_IMAGES ||
		    e->nimages > x->nimages - first || e->ngroups == 0 || e->ngroups > x->ngroups ||
		    e->head_len < RCKPT_PCR_FIXED_BYTES || e->head_len > RCKPT_PCR_MAX_HEAD)
			goto bad;
		first += e->nimages;
		for (g = 0; g < e->ngroups; g++) {
			e->end[g] = rckpt_rd_u64(&r);
			if (e->end[g] <= (g ? e->end[g - 1] : e->head_len) || e->end[g] > RCKPT_PCR_MAX_RECORD)
				goto bad;
		}
	}
	if (r.err || first != x->nimages)
		goto bad;
	label_total = rckpt_rd_u32(&r);
	for (i = 0; i < x->nimages && !r.err; i++) {
		uint16_t n = rckpt_rd_u16(&r);
		if (n > RCKPT_PCR_MAX_LABEL || x->label_off[i] + (uint64_t)n > label_total)
			goto bad;
		x->label_off[i + 1] = x->label_off[i] + n;
	}
	if (r.err || x->label_off[x->nimages] != label_total)
		goto bad;
	x->labels = rckpt_rd_bytes(&r, label_total);
	if (r.err || rckpt_rd_left(&r) != 0)
		goto bad;
	return 0;
bad:
	rckpt_pcr_index_free(x);
	return -EBADMSG;
}
