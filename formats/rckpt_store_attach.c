/*
 * rckpt_store_attach.c — a step's attachment object (formats/store.md): a
 * header naming its step, size and CRC32C, then one zstd frame that must
 * say its own size.
 */
#include "rckpt_store_wire.h"

#include <errno.h>
#include <stdlib.h>

#include <zstd.h>

#include "rckpt_bytes.h"
#include "rckpt_crc32c.h"

int rckpt_attach_encode(rckpt_buf_t *out, uint64_t step, const void *data, size_t len)
{
	size_t bound, z;
	int rc;

	if ((uint64_t)len > RCKPT_ATTACH_RAW_MAX)
		return -EFBIG;
	bound = ZSTD_compressBound(len);
	if ((rc = rckpt_buf_reserve(out, RCKPT_ATTACH_HEADER + bound)))
		return rc;
	if ((rc = rckpt_buf_put_u32(out, RCKPT_ATTACH_MAGIC)) || (rc = rckpt_buf_put_u8(out, 1)) ||
	    (rc = rckpt_buf_put_u8(out, 1)) || (rc = rckpt_buf_put_u16(out, 0)) ||
	    (rc = rckpt_buf_put_u64(out, step)) || (rc = rckpt_buf_put_u64(out, len)) ||
	    (rc = rckpt_buf_put_u32(out, rckpt_crc32c(0, data, len))))
		return rc;
	z = ZSTD_compress(out->p + out->len, bound, len ? data : "", len, 3);
	if (ZSTD_isError(z))
		return -ENOMEM; /* the bound was reserved: only allocation can fail */
	out->len += z;
	return 0;
}

int rckpt_attach_decode(uint8_t **out, size_t *lenp, uint64_t step, const uint8_t *src,
			size_t srclen)
{
	rckpt_reader_t r = rckpt_reader(src, srclen);
	uint32_t magic, crc;
	uint8_t version, compat;
	uint16_t flags;
	uint64_t s, raw;
	unsigned long long fcs;
	uint8_t *p;
	size_t got;

	*out = NULL;
	*lenp = 0;
	magic = rckpt_rd_u32(&r);
	version = rckpt_rd_u8(&r);
	compat = rckpt_rd_u8(&r);
	flags = rckpt_rd_u16(&r);
	s = rckpt_rd_u64(&r);
	raw = rckpt_rd_u64(&r);
	crc = rckpt_rd_u32(&r);
	if (r.err || magic != RCKPT_ATTACH_MAGIC || compat == 0 || compat > version)
		return -EBADMSG; /* no sane writer says either */
	if (compat > 1)
		return RCKPT_FMT_EVERSION;
	if (version < 1 || flags != 0 || s != step || raw > RCKPT_ATTACH_RAW_MAX)
		return -EBADMSG;
	/* The frame must say its size, and say the header's. */
	fcs = ZSTD_getFrameContentSize(src + RCKPT_ATTACH_HEADER, srclen - RCKPT_ATTACH_HEADER);
	if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR || fcs != raw)
		return -EBADMSG;
	if ((p = malloc(raw ? (size_t)raw : 1)) == NULL)
		return -ENOMEM;
	got = ZSTD_decompress(p, (size_t)raw, src + RCKPT_ATTACH_HEADER, srclen - RCKPT_ATTACH_HEADER);
	if (ZSTD_isError(got) || got != raw) {
		free(p);
		return -EBADMSG;
	}
	if (rckpt_crc32c(0, p, (size_t)raw) != crc) {
		free(p);
		return RCKPT_FMT_ECHECKSUM;
	}
	*out = p;
	*lenp = (size_t)raw;
	return 0;
}
