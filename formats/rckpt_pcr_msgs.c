/*
 * rckpt_pcr_msgs.c — the cls_pcr messages (formats/pcr.md), each
 * described once by a field table (rckpt_wire_fields.h).
 */
#include "rckpt_pcr.h"

#include <errno.h>
#include <string.h>

#include "rckpt_wire.h"

#define FLD(T, f, k) .name = #f, .offset = offsetof(T, f), .kind = RCKPT_WF_##k
#define COUNT(a) (uint8_t)(sizeof(a) / sizeof((a)[0]))
#define MSG(nm, T, ty, fl, rl)                                                                    \
	{                                                                                         \
		.name = nm, .type = ty, .version = RCKPT_PCR_VERSION, .compat = 1, .oldest = 1,   \
		.newest = RCKPT_PCR_VERSION, .size = sizeof(T), .nfields = COUNT(fl), .fields = fl, \
		.rule = rl                                                                        \
	}
#define ELEM(nm, T, fl, rl)                                                                      \
	{                                                                                        \
		.name = nm, .size = sizeof(T), .nfields = COUNT(fl), .fields = fl, .rule = rl    \
	}

static const rckpt_wire_field_t u32_f[] = { { .name = "index", .kind = RCKPT_WF_U32 } };
static const rckpt_wire_msg_t u32_desc = ELEM("index", uint32_t, u32_f, NULL);
static const rckpt_wire_field_t u64_f[] = { { .name = "end", .kind = RCKPT_WF_U64 } };
static const rckpt_wire_msg_t u64_desc = ELEM("end", uint64_t, u64_f, NULL);

/* k groups: 1..RCKPT_PCR_MAX_GROUPS, or every group. */
static int k_ok(uint16_t k)
{
	return k == RCKPT_PCR_GROUPS_ALL || (k >= 1 && k <= RCKPT_PCR_MAX_GROUPS);
}

static int read_rule(const void *m)
{
	return k_ok(((const rckpt_msg_pcr_read_t *)m)->k) ? 0 : -EINVAL;
}

static int images_rule(const void *m)
{
	return k_ok(((const rckpt_msg_pcr_images_t *)m)->k) ? 0 : -EINVAL;
}

static int entry_rule(const void *m)
{
	const rckpt_msg_pcr_entry_t *e = m;
	return rckpt_pcr_name_ok((const char *)e->name.p, e->name.len) ? 0 : -EINVAL;
}

static const rckpt_wire_field_t read_f[] = { { FLD(rckpt_msg_pcr_read_t, k, U16) } };

/* the reply: the groups returned (never "all") and the record's bytes */
static const rckpt_wire_field_t prefix_f[] = {
	{ FLD(rckpt_msg_pcr_prefix_t, k, U16), .min = 1, .max = RCKPT_PCR_MAX_GROUPS },
	{ FLD(rckpt_msg_pcr_prefix_t, bytes, BLOB) },
};

static const rckpt_wire_field_t images_f[] = {
	{ FLD(rckpt_msg_pcr_images_t, k, U16) },
	{ FLD(rckpt_msg_pcr_images_t, idx, LIST), .min = 1, .max = RCKPT_PCR_MAX_IMAGES, .elem = &u32_desc },
};

static const rckpt_wire_field_t entry_f[] = {
	{ FLD(rckpt_msg_pcr_entry_t, id, U32) },
	{ FLD(rckpt_msg_pcr_entry_t, name, BLOB), .width = 1 },
	{ FLD(rckpt_msg_pcr_entry_t, label, BLOB), .width = 2, .max = RCKPT_PCR_MAX_LABEL },
	{ FLD(rckpt_msg_pcr_entry_t, jpeg, BLOB), .min = 4 },
};
static const rckpt_wire_msg_t entry_desc = ELEM("jpeg", rckpt_msg_pcr_entry_t, entry_f, entry_rule);

static const rckpt_wire_field_t jpegs_f[] = {
	{ FLD(rckpt_msg_pcr_jpegs_t, jpegs, LIST), .max = RCKPT_PCR_MAX_IMAGES, .elem = &entry_desc },
};

static const rckpt_wire_field_t stat_f[] = {
	{ FLD(rckpt_msg_pcr_stat_t, record_no, U32) },
	{ FLD(rckpt_msg_pcr_stat_t, nimages, U32) },
	{ FLD(rckpt_msg_pcr_stat_t, head_len, U32) },
	{ FLD(rckpt_msg_pcr_stat_t, ngroups, U16), .min = 1, .max = RCKPT_PCR_MAX_GROUPS },
	{ FLD(rckpt_msg_pcr_stat_t, size, U64) },
	{ FLD(rckpt_msg_pcr_stat_t, end, ARRAY), .count = 3,
	  .max = sizeof(((rckpt_msg_pcr_stat_t *)0)->end) / sizeof(uint64_t), .elem = &u64_desc },
};

static const rckpt_wire_msg_t read_d = MSG("pcr-read", rckpt_msg_pcr_read_t, RCKPT_MSG_PCR_READ, read_f, read_rule);
static const rckpt_wire_msg_t prefix_d =
	MSG("pcr-prefix", rckpt_msg_pcr_prefix_t, RCKPT_MSG_PCR_PREFIX, prefix_f, NULL);
static const rckpt_wire_msg_t images_d =
	MSG("pcr-images", rckpt_msg_pcr_images_t, RCKPT_MSG_PCR_IMAGES, images_f, images_rule);
static const rckpt_wire_msg_t jpegs_d = MSG("pcr-jpegs", rckpt_msg_pcr_jpegs_t, RCKPT_MSG_PCR_JPEGS, jpegs_f, NULL);
static const rckpt_wire_msg_t stat_d = MSG("pcr-stat", rckpt_msg_pcr_stat_t, RCKPT_MSG_PCR_STAT, stat_f, NULL);

/* In type order (0x0201 up). */
const rckpt_wire_msg_t *const rckpt_pcr_msgs[] = { &read_d, &prefix_d, &images_d, &jpegs_d, &stat_d };
const unsigned rckpt_pcr_nmsgs = COUNT(rckpt_pcr_msgs);

const rckpt_wire_msg_t *rckpt_pcr_msg(uint16_t type)
{
	unsigned i = (unsigned)type - RCKPT_MSG_PCR_READ;
	return type >= RCKPT_MSG_PCR_READ && i < rckpt_pcr_nmsgs ? rckpt_pcr_msgs[i] : NULL;
}

/* ---- each message with its own arguments ---- */

int rckpt_msg_pcr_read_encode(rckpt_buf_t *out, uint16_t k)
{
	rckpt_msg_pcr_read_t m = { k };
	return rckpt_wire_encode(out, &read_d, &m);
}

int rckpt_msg_pcr_read_decode(uint16_t *k, const uint8_t *src, size_t len)
{
	rckpt_msg_pcr_read_t m;
	int rc = rckpt_wire_decode(&read_d, &m, src, len);
	*k = m.k;
	return rc;
}

int rckpt_msg_pcr_prefix_encode(rckpt_buf_t *out, uint16_t k, const uint8_t *p, size_t len)
{
	rckpt_msg_pcr_prefix_t m = { k, { p, len } };
	return rckpt_wire_encode(out, &prefix_d, &m);
}

int rckpt_msg_pcr_prefix_decode(uint16_t *k, const uint8_t **p, size_t *len, const uint8_t *src,
				size_t srclen)
{
	rckpt_msg_pcr_prefix_t m;
	int rc = rckpt_wire_decode(&prefix_d, &m, src, srclen);
	*k = m.k;
	*p = m.bytes.p;
	*len = m.bytes.len;
	return rc;
}

int rckpt_msg_pcr_images_encode(rckpt_buf_t *out, uint16_t k, const uint32_t *idx, uint32_t n)
{
	rckpt_msg_pcr_images_t m = { k, { NULL, 0, idx, n } };
	return rckpt_wire_encode(out, &images_d, &m);
}

int rckpt_msg_pcr_images_decode(uint16_t *k, const uint8_t **idx, uint32_t *n, const uint8_t *src,
				size_t len)
{
	rckpt_msg_pcr_images_t m;
	int rc = rckpt_wire_decode(&images_d, &m, src, len);
	*k = m.k;
	*idx = m.idx.p;
	*n = m.idx.n;
	return rc;
}

int rckpt_msg_pcr_stat_encode(rckpt_buf_t *out, const rckpt_msg_pcr_stat_t *m)
{
	return rckpt_wire_encode(out, &stat_d, m);
}

int rckpt_msg_pcr_stat_decode(rckpt_msg_pcr_stat_t *m, const uint8_t *src, size_t len)
{
	return rckpt_wire_decode(&stat_d, m, src, len);
}

/* ---- the JPEGS reply, an image at a time ---- */

int rckpt_msg_pcr_jpegs_begin(rckpt_buf_t *out, size_t *at, uint32_t n)
{
	int rc = n > RCKPT_PCR_MAX_IMAGES ? -EINVAL : rckpt_wire_begin(out, &jpegs_d, at);
	return rc ? rc : rckpt_buf_put_u32(out, n);
}

/* The entry's fields but its JPEG, whose length follows as a placeholder
 * (the caller appends the bytes, then add_done sets it). */
int rckpt_msg_pcr_jpegs_add(rckpt_buf_t *out, const rckpt_pcr_img_t *im, size_t *len_at)
{
	static const uint8_t soi[4] = { 0xFF, 0xD8, 0xFF, 0xD9 }; /* stands in for the JPEG */
	rckpt_msg_pcr_entry_t e = { im->id,
				    { (const uint8_t *)im->name, im->name_len },
				    { im->label, im->label_len },
				    { soi, sizeof(soi) } };
	int rc = rckpt_wire_valid(&entry_desc, &e);
	unsigned i;
	for (i = 0; i < 3 && rc == 0; i++)
		rc = rckpt_wire_put_field(out, &entry_f[i], &e);
	*len_at = out->len;
	return rc ? rc : rckpt_buf_put_u32(out, 0);
}

int rckpt_msg_pcr_jpegs_add_done(rckpt_buf_t *out, size_t len_at)
{
	size_t n = out->len - len_at - 4;
	if (n > UINT32_MAX || n < entry_f[3].min)
		return -EINVAL;
	rckpt_buf_set_u32(out, len_at, (uint32_t)n);
	return 0;
}

/* The frame closed, then read back as a decoder will (a walk over its
 * entries, not their bytes): as many entries as begin said, each whole. */
int rckpt_msg_pcr_jpegs_end(rckpt_buf_t *out, size_t at)
{
	rckpt_msg_pcr_jpegs_t m;
	int rc = rckpt_frame_buf_end(out, at, 0);
	if (rc == 0 && rckpt_wire_decode(&jpegs_d, &m, out->p + at, out->len - at))
		rc = -EINVAL;
	return rc;
}

int rckpt_msg_pcr_jpegs_open(rckpt_pcr_jpegs_reader_t *jr, const uint8_t *src, size_t len)
{
	rckpt_msg_pcr_jpegs_t m;
	int rc = rckpt_wire_decode(&jpegs_d, &m, src, len);
	memset(jr, 0, sizeof(*jr));
	if (rc == 0)
		rckpt_wire_cursor_init(&jr->c, &jpegs_f[0], &m.jpegs);
	return rc;
}

int rckpt_msg_pcr_jpegs_next(rckpt_pcr_jpegs_reader_t *jr, rckpt_pcr_jpeg_t *out)
{
	rckpt_msg_pcr_entry_t e;
	int rc = rckpt_wire_cursor_next(&jr->c, &e);
	memset(out, 0, sizeof(*out));
	if (rc == 1) {
		out->id = e.id;
		out->name = (const char *)e.name.p;
		out->name_len = e.name.len;
		out->label = e.label.p;
		out->label_len = e.label.len;
		out->jpeg = e.jpeg.p;
		out->jpeg_len = e.jpeg.len;
	}
	return rc;
}
