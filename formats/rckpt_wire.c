/*
 * rckpt_wire.c — frame and version-reply codec. Spec: formats/cls-wire.md.
 */
#include "rckpt_wire.h"

#include <errno.h>
#include <string.h>

#define FLAGS_NONE 0u

int rckpt_frame_open(rckpt_frame_t *out, const uint8_t *src, size_t len, uint16_t type,
		     uint8_t supported_version)
{
	rckpt_reader_t r = rckpt_reader(src, len);
	rckpt_frame_t f;
	uint16_t magic, flags;

	memset(out, 0, sizeof(*out));
	if (src == NULL || len < RCKPT_WIRE_HEADER_BYTES)
		return -EBADMSG;
	magic = rckpt_rd_u16(&r);
	f.version = rckpt_rd_u8(&r);
	f.compat = rckpt_rd_u8(&r);
	f.type = rckpt_rd_u16(&r);
	flags = rckpt_rd_u16(&r);
	f.len = rckpt_rd_u32(&r);
	if (magic != RCKPT_WIRE_MAGIC || flags != FLAGS_NONE || f.type != type)
		return -EBADMSG;
	/* A frame claiming compat > version was not written by a sane encoder. */
	if (f.compat > f.version || f.compat == 0)
		return -EBADMSG;
	if (f.compat > supported_version)
		return RCKPT_FMT_EVERSION;
	if ((uint64_t)f.len != (uint64_t)(len - RCKPT_WIRE_HEADER_BYTES))
		return -EBADMSG;
	f.payload = src + RCKPT_WIRE_HEADER_BYTES;
	*out = f;
	return 0;
}

size_t rckpt_frame_begin(rckpt_writer_t *w, uint16_t type, uint8_t version, uint8_t compat)
{
	size_t at = w->pos;
	rckpt_wr_u16(w, RCKPT_WIRE_MAGIC);
	rckpt_wr_u8(w, version);
	rckpt_wr_u8(w, compat);
	rckpt_wr_u16(w, type);
	rckpt_wr_u16(w, FLAGS_NONE);
	rckpt_wr_u32(w, 0); /* length, patched by rckpt_frame_close */
	return at;
}

void rckpt_frame_close(rckpt_writer_t *w, size_t header_at)
{
	size_t len;
	rckpt_writer_t lw;

	if (w->err)
		return;
	len = w->pos - header_at - RCKPT_WIRE_HEADER_BYTES;
	if (len > UINT32_MAX) {
		w->err = -ERANGE;
		return;
	}
	lw = rckpt_writer(w->p + header_at + 8, 4);
	rckpt_wr_u32(&lw, (uint32_t)len);
}

/* ---- strings: u8 length, then bytes; no NUL, restricted alphabets ---- */

enum str_kind { STR_NAME, STR_PRINTABLE };

static int str_char_ok(enum str_kind kind, uint8_t c)
{
	if (kind == STR_PRINTABLE)
		return c >= 0x20 && c <= 0x7e;
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static int str_ok(enum str_kind kind, const uint8_t *s, size_t n, size_t min, size_t max)
{
	size_t i;
	if (n < min || n > max)
		return 0;
	for (i = 0; i < n; i++)
		if (!str_char_ok(kind, s[i]))
			return 0;
	return 1;
}

/* Reads a string into dst (capacity max + 1, NUL-terminated). */
static int rd_str(rckpt_reader_t *r, char *dst, enum str_kind kind, size_t min, size_t max)
{
	size_t n = rckpt_rd_u8(r);
	const uint8_t *s = rckpt_rd_bytes(r, n);
	if (s == NULL || !str_ok(kind, s, n, min, max))
		return -EBADMSG;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

static int wr_str(rckpt_writer_t *w, const char *s, enum str_kind kind, size_t min, size_t max)
{
	size_t n = 0;
	while (n <= max && s[n] != '\0') /* bounded: never reads past max + 1 */
		n++;
	if (!str_ok(kind, (const uint8_t *)s, n, min, max))
		return -EINVAL;
	rckpt_wr_u8(w, (uint8_t)n);
	rckpt_wr_bytes(w, s, n);
	return 0;
}

int rckpt_wire_version_encode(uint8_t *dst, size_t cap, size_t *out_len,
			      const rckpt_wire_version_t *v)
{
	rckpt_writer_t w = rckpt_writer(dst, cap);
	size_t at, i;

	*out_len = 0;
	if (v->nformats > RCKPT_WIRE_FORMATS_MAX)
		return -EINVAL;
	at = rckpt_frame_begin(&w, RCKPT_MSG_VERSION_REPLY, 1, 1);
	if (wr_str(&w, v->plugin, STR_NAME, 1, RCKPT_WIRE_NAME_MAX))
		return -EINVAL;
	rckpt_wr_u16(&w, v->major);
	rckpt_wr_u16(&w, v->minor);
	rckpt_wr_u16(&w, v->patch);
	if (wr_str(&w, v->built_for, STR_PRINTABLE, 0, RCKPT_WIRE_RELEASE_MAX))
		return -EINVAL;
	rckpt_wr_u8(&w, (uint8_t)v->nformats);
	for (i = 0; i < v->nformats; i++) {
		const rckpt_wire_format_range_t *f = &v->formats[i];
		if (f->min_version > f->max_version)
			return -EINVAL;
		if (wr_str(&w, f->name, STR_NAME, 1, RCKPT_WIRE_NAME_MAX))
			return -EINVAL;
		rckpt_wr_u16(&w, f->min_version);
		rckpt_wr_u16(&w, f->max_version);
	}
	rckpt_frame_close(&w, at);
	if (w.err)
		return w.err;
	*out_len = w.pos;
	return 0;
}

int rckpt_wire_version_decode(rckpt_wire_version_t *out, const uint8_t *src, size_t len)
{
	rckpt_frame_t f;
	rckpt_reader_t r;
	unsigned i;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = rckpt_frame_open(&f, src, len, RCKPT_MSG_VERSION_REPLY, 1);
	if (rc)
		return rc;
	r = rckpt_reader(f.payload, f.len);
	if (rd_str(&r, out->plugin, STR_NAME, 1, RCKPT_WIRE_NAME_MAX))
		goto bad;
	out->major = rckpt_rd_u16(&r);
	out->minor = rckpt_rd_u16(&r);
	out->patch = rckpt_rd_u16(&r);
	if (rd_str(&r, out->built_for, STR_PRINTABLE, 0, RCKPT_WIRE_RELEASE_MAX))
		goto bad;
	out->nformats = rckpt_rd_u8(&r);
	if (r.err || out->nformats > RCKPT_WIRE_FORMATS_MAX)
		goto bad;
	for (i = 0; i < out->nformats; i++) {
		rckpt_wire_format_range_t *fr = &out->formats[i];
		if (rd_str(&r, fr->name, STR_NAME, 1, RCKPT_WIRE_NAME_MAX))
			goto bad;
		fr->min_version = rckpt_rd_u16(&r);
		fr->max_version = rckpt_rd_u16(&r);
		if (r.err || fr->min_version > fr->max_version)
			goto bad;
	}
	/* Bytes past the fields this version knows belong to newer encoders:
	 * skipped, as the spec says. */
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -EBADMSG;
}

int rckpt_frame_buf_begin(rckpt_buf_t *b, uint16_t type, uint8_t version, uint8_t compat, size_t *at)
{
	uint8_t h[RCKPT_WIRE_HEADER_BYTES];
	rckpt_writer_t w = rckpt_writer(h, sizeof(h));
	rckpt_frame_begin(&w, type, version, compat);
	*at = b->len;
	return w.err ? -EINVAL : rckpt_buf_append(b, h, w.pos);
}

int rckpt_frame_buf_end(rckpt_buf_t *b, size_t at, int rc)
{
	uint64_t len;
	if (rc)
		return rc;
	len = b->len - at - RCKPT_WIRE_HEADER_BYTES;
	if (len > UINT32_MAX)
		return -EINVAL;
	rckpt_buf_set_u32(b, at + 8, (uint32_t)len);
	return 0;
}
