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
