/*
 * rckpt_record.h — chunk records: a header, segments, a CRC-32C
 * (formats/checkpoint.md, "Segment" and "Chunk record").
 *
 * A decoded record is always materialized: decoding a delta takes the
 * parent's decoded record and yields absolute levels, so a chain is decoded
 * by folding it from its base. Decoders take untrusted bytes and are bounded
 * by rckpt_record_limits_t.
 */
#ifndef RCKPT_RECORD_H
#define RCKPT_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_dtype.h"
#include "rckpt_estream.h"
#include "rckpt_istream.h"

#define RCKPT_RECORD_MAGIC 0x524b4352u /* "RCKR" as little-endian bytes */
#define RCKPT_RECORD_VERSION 6u /* the newest this code reads and writes;
				  a record is written in the oldest version
				  that holds it (6: a split Huffman block,
				  5: a PLANES blob, 4: a
				  predicted blob, 3: a CTX
				  index stream, 2: a transform, else 1, byte
				  for byte as before) */
#define RCKPT_RECORD_HEADER_BYTES 40u
#define RCKPT_NO_PARENT UINT64_MAX
#define RCKPT_SEG_MAX_BINS 64
/* A blob's method byte (formats/checkpoint.md, "A blob holds") */
#define RCKPT_BLOB_RAW 0u
#define RCKPT_BLOB_ZSTD 3u
#define RCKPT_BLOB_PLANES 4u /* a lossless segment's values as byte planes,
				each an entropy stream (version 5) */
#define RCKPT_BLOB_PREDICTED 0x80u /* with raw or zstd: XOR with a prediction,
				     in byte planes (a delta's, version 4) */

enum rckpt_record_kind { RCKPT_REC_BASE = 1, RCKPT_REC_DELTA = 2, RCKPT_REC_SPARSE = 3 };
enum rckpt_seg_encoding { RCKPT_SEG_QUANTIZED = 1, RCKPT_SEG_LOSSLESS = 2 };
/* A quantized segment's levels are values of a transform of the tensor's
 * (formats/checkpoint.md "Transforms"): none; LOG2 (a non-negative value's
 * binary32 bits read as a fixed-point base-2 logarithm: Adam's
 * exp_avg_sq); NORM (a first moment divided by sqrt of its second, as
 * restored, plus eps: Adam's update; the manifest names the second moment).
 * Version 2 records only. */
enum rckpt_seg_transform {
	RCKPT_XF_NONE = 0,
	RCKPT_XF_LOG2 = 1,
	RCKPT_XF_NORM = 2,
	RCKPT_XF_COUNT = 3
};

/* Bytes per element of a dtype; 0 for an unknown one. */
size_t rckpt_dtype_size(unsigned dtype);

typedef struct rckpt_seg {
	uint32_t tensor;
	uint64_t first;
	uint64_t n;
	uint8_t encoding; /* enum rckpt_seg_encoding */
	uint8_t dtype;    /* enum rckpt_dtype */
	uint8_t transform; /* enum rckpt_seg_transform; NONE when lossless */
	/* quantized */
	unsigned nbins;
	float centroids[RCKPT_SEG_MAX_BINS];
	uint64_t nprot;
	uint16_t *prot; /* nprot bf16, position order */
	uint8_t *idx;   /* n levels, each < nbins + 2; exactly nprot of them
			   are nbins + 1 (protected). A decoded segment holds
			   both: the decoder checks them, and readers rely on it */
	/* lossless */
	uint8_t *raw;   /* n * rckpt_dtype_size(dtype) bytes */
} rckpt_seg_t;

typedef struct rckpt_record {
	unsigned kind;   /* as stored; a decoded delta's levels are absolute */
	uint64_t step;
	uint64_t parent; /* RCKPT_NO_PARENT for a base */
	uint32_t nseg;
	rckpt_seg_t *seg;
} rckpt_record_t;

/* What a decoder accepts before allocating anything. */
typedef struct rckpt_record_limits {
	uint32_t max_segments;
	uint64_t max_elements; /* over all segments */
} rckpt_record_limits_t;

#define RCKPT_RECORD_LIMITS_DEFAULT { 1u << 16, (uint64_t)1 << 31 }

/* A record's shape without decoding it: its segments and their elements,
 * from the segment headers, every payload skipped by its stated length
 * (formats/checkpoint.md). Checks the header and CRC as
 * rckpt_record_check does; -EBADMSG when a payload runs past the body.
 * Allocates nothing: a bound for decoding a record of the same chain. */
int rckpt_record_geometry(uint32_t *nseg, uint64_t *elements, const uint8_t *src, size_t len);

/* Encodes rec's segments as a base (parent == NULL) or as a delta against
 * parent (a decoded record of the same layout), appending to out. Every
 * segment is checked first: -EINVAL for one that the format cannot hold
 * or that does not match its parent's. With o->predict, a delta's blobs
 * (lossless values, protected values) are also coded against the
 * parent's and the smaller kept (version 4). With o->planes, lossless
 * segments' values are PLANES blobs instead (also predicted in a delta,
 * the smaller kept; version 5). */
int rckpt_record_encode(rckpt_buf_t *out, const rckpt_record_t *rec, const rckpt_record_t *parent,
			const rckpt_istream_opts_t *o);

/* The blocks of one segment that a sparse partial record stores: block
 * numbers, increasing, each < ceil(n / block). Block b is the segment's
 * elements [b * block, min(n, (b + 1) * block)). */
typedef struct rckpt_sparse_sel {
	uint32_t nblocks;
	const uint32_t *blocks;
} rckpt_sparse_sel_t;

#define RCKPT_SPARSE_BLOCK_MAX ((uint32_t)1 << 31)

/* Encodes rec (kind RCKPT_REC_SPARSE, rec->parent == parent->step, the
 * parent's layout) as a sparse partial record against parent, a decoded
 * record: of each quantized segment i only the blocks sel[i] go in (their
 * levels as a delta of the parent's, and their protected values); rec must
 * equal parent everywhere else: codebook, levels and protected values
 * (-EINVAL otherwise). Lossless segments go in whole. block: 1..2^31. */
int rckpt_record_encode_sparse(rckpt_buf_t *out, const rckpt_record_t *rec,
			       const rckpt_record_t *parent, uint32_t block,
			       const rckpt_sparse_sel_t *sel, const rckpt_istream_opts_t *o);

/* Decodes src[0..len) into out, materialized. A delta or a sparse record needs its parent's
 * decoded record (-EINVAL without it, -ESTALE if it is another step, -EBADMSG
 * if its layout differs); a base takes no parent. Returns 0, -EBADMSG,
 * RCKPT_FMT_EVERSION, RCKPT_FMT_ECHECKSUM, -E2BIG (over a limit), -ENOMEM.
 * On failure *out is empty. */
int rckpt_record_decode(rckpt_record_t *out, const uint8_t *src, size_t len,
			const rckpt_record_t *parent, const rckpt_record_limits_t *lim);

/* As rckpt_record_decode, a delta's or a sparse record's lossless values
 * decoded in the parent's memory (a fold holds one copy of them, not two):
 * the parent is left fit only for rckpt_record_free, whatever the result. */
int rckpt_record_decode_onto(rckpt_record_t *out, const uint8_t *src, size_t len,
			     rckpt_record_t *parent, const rckpt_record_limits_t *lim);

/* Reads only the fixed header (no CRC check). */
int rckpt_record_peek(unsigned *kind, uint64_t *step, uint64_t *parent, const uint8_t *src,
		      size_t len);

/* Checks the header and the CRC of the record in src[0..len) without
 * decoding its segments, and reads its kind, step and parent. A delta's
 * parent must be an earlier step. 0, -EBADMSG, RCKPT_FMT_EVERSION,
 * RCKPT_FMT_ECHECKSUM. */
int rckpt_record_check(unsigned *kind, uint64_t *step, uint64_t *parent, const uint8_t *src,
		       size_t len);

/* Frees what a decoded (or caller-built) record owns and empties it. */
void rckpt_record_free(rckpt_record_t *rec);

#endif /* RCKPT_RECORD_H */
