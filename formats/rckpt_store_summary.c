/*
 * rckpt_store_summary.c — a committed step's summary, the fixed-size value
 * the job's head object keeps per step (formats/store.md): written at its
 * newest layout, read at any earlier one.
 */
#include "rckpt_store_wire.h"

#include <string.h>

#include "rckpt_bytes.h"

void rckpt_store_summary_put(uint8_t out[RCKPT_STORE_SUMMARY_BYTES], const rckpt_store_summary_t *s)
{
	rckpt_writer_t w = rckpt_writer(out, RCKPT_STORE_SUMMARY_BYTES);
	rckpt_wr_u64(&w, s->raw_bytes);
	rckpt_wr_u64(&w, s->enc_bytes);
	rckpt_wr_u64(&w, s->parent);
	rckpt_wr_u32(&w, s->nchunks);
	rckpt_wr_u64(&w, rckpt_d2u(s->quality));
	rckpt_wr_u64(&w, s->segment);
	rckpt_wr_u32(&w, s->flags);
	rckpt_wr_u32(&w, s->ranks);
	rckpt_wr_u64(&w, s->opt_raw_bytes);
	rckpt_wr_u64(&w, s->opt_enc_bytes);
}

int rckpt_store_summary_get(rckpt_store_summary_t *s, const uint8_t *p, size_t len)
{
	rckpt_reader_t r = rckpt_reader(p, len);
	memset(s, 0, sizeof(*s));
	s->segment = RCKPT_STORE_NONE;
	if (len < RCKPT_STORE_SUMMARY_V1_BYTES)
		return -EBADMSG;
	s->raw_bytes = rckpt_rd_u64(&r);
	s->enc_bytes = rckpt_rd_u64(&r);
	s->parent = rckpt_rd_u64(&r);
	s->nchunks = rckpt_rd_u32(&r);
	s->quality = rckpt_u2d(rckpt_rd_u64(&r));
	if (len >= RCKPT_STORE_SUMMARY_V2_BYTES) {
		s->segment = rckpt_rd_u64(&r);
		s->flags = rckpt_rd_u32(&r);
	} else {
		s->flags = RCKPT_SUMMARY_ATTACH;
	}
	if (len >= RCKPT_STORE_SUMMARY_V3_BYTES)
		s->ranks = rckpt_rd_u32(&r);
	if (len >= RCKPT_STORE_SUMMARY_BYTES) {
		s->opt_raw_bytes = rckpt_rd_u64(&r);
		s->opt_enc_bytes = rckpt_rd_u64(&r);
	}
	return 0;
}
