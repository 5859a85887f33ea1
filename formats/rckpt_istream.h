/*
 * rckpt_istream.h — the stream of bin indices of one tensor segment: either
 * the indices themselves (base) or their cyclic delta against the parent
 * step's indices, optionally rearranged by the parent's bin, optionally
 * run-length coded, then entropy coded (formats/checkpoint.md, "Index
 * stream").
 *
 * Indices are u8: a segment has at most RCKPT_ISTREAM_MAX_LEVELS levels.
 * Decoding takes untrusted bytes: 0, -EBADMSG, -ENOMEM.
 */
#ifndef RCKPT_ISTREAM_H
#define RCKPT_ISTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_bytes.h"

#define RCKPT_ISTREAM_MAX_LEVELS 255

/* Stage flags, as stored in the stream's first byte. */
#define RCKPT_IS_DELTA 0x01u      /* cyclic delta against the parent */
#define RCKPT_IS_REARRANGED 0x02u /* grouped by the parent's index */
#define RCKPT_IS_RLE 0x04u        /* run-length tokens */
#define RCKPT_IS_CTX 0x08u        /* rANS with the parent's level as context
				     (rckpt_ctx.h); needs DELTA and
				     REARRANGED, excludes RLE; version 3 */
#define RCKPT_IS_KNOWN 0x0fu

/* Working memory an encoder may keep across calls, so that large buffers
 * are not mapped and faulted in again each time. Zero-initialize; free with
 * rckpt_istream_scratch_free. One per thread. */
typedef struct rckpt_istream_scratch {
	uint8_t *d;
	uint16_t *tok, *lens;
	size_t cap;
	void *nz; /* the sparse path's entries (rckpt_istream.c) */
	size_t nzcap;
} rckpt_istream_scratch_t;

#define RCKPT_ISTREAM_SCRATCH_INIT { NULL, NULL, NULL, 0, NULL, 0 }

void rckpt_istream_scratch_free(rckpt_istream_scratch_t *s);

typedef struct rckpt_istream_opts {
	unsigned stages;     /* RCKPT_IS_REARRANGED | RCKPT_IS_RLE for the full
				pipeline; DELTA is implied by a parent. With
				CTX too, a rearranged delta is also coded in
				the CTX form and the smaller kept */
	unsigned est_policy; /* RCKPT_EST_TRY_* */
	int zstd_level;
	rckpt_istream_scratch_t *scratch; /* NULL: allocate per call */
	unsigned predict;    /* rckpt_record_encode: a delta's blobs also
				coded against the parent's (predicted
				blobs, version 4), the smaller kept */
	unsigned planes;     /* rckpt_record_encode: lossless values as
				PLANES blobs (version 5), for exact steps:
				no zstd tried, GB/s */
} rckpt_istream_opts_t;

/* Appends the stream for cur[0..n) (each < lcur) to out. prev (each <
 * lprev) is the parent's indices, or NULL for a base stream; REARRANGED
 * needs a parent and is ignored without one. -EINVAL for bad arguments. */
int rckpt_istream_encode(rckpt_buf_t *out, const uint8_t *cur, size_t n, unsigned lcur,
			 const uint8_t *prev, unsigned lprev, const rckpt_istream_opts_t *o);

/* The symbols a stream codes before run length and entropy: cur itself
 * (prev NULL), or the cyclic delta (cur - prev) mod M, M = max(lcur,
 * lprev), grouped by prev when rearranged (a stable counting sort), into
 * d[0..n). The reference of the GPU's rckpt_gpu_delta. 0, or -EINVAL when
 * a cur >= lcur, a prev >= lprev, or a level count is out of range. */
int rckpt_istream_symbols(uint8_t *d, const uint8_t *cur, size_t n, unsigned lcur,
			  const uint8_t *prev, unsigned lprev, int rearranged);

/* Reads one stream from r and writes the n indices (each < lcur) to cur.
 * prev/lprev as for encoding: a delta stream without a parent, or a base
 * stream given one, is -EBADMSG. */
int rckpt_istream_decode(uint8_t *cur, size_t n, unsigned lcur, const uint8_t *prev,
			 unsigned lprev, rckpt_reader_t *r);

/* The stage flags of the stream starting at r, or -1. */
int rckpt_istream_peek_stages(const rckpt_reader_t *r);

/* Whether the stream starting at r holds a split Huffman block (entropy
 * method 4: a record of version 6 or later); 0 when it cannot be read. */
int rckpt_istream_peek_split(const rckpt_reader_t *r);

#endif /* RCKPT_ISTREAM_H */
