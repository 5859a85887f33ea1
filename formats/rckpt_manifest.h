/*
 * rckpt_manifest.h — the manifest of a checkpoint step, and the digest of a
 * chunk's decoded content (formats/checkpoint.md, "Manifest", "Chunk
 * digest"). Decoding takes untrusted bytes: 0, -EBADMSG, RCKPT_FMT_EVERSION,
 * RCKPT_FMT_ECHECKSUM, -ENOMEM.
 */
#ifndef RCKPT_MANIFEST_H
#define RCKPT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_record.h"

#define RCKPT_MANIFEST_MAGIC 0x4d4b4352u /* "RCKM" as little-endian bytes */
#define RCKPT_MF_MAX_TENSORS (1u << 20)
#define RCKPT_MF_MAX_CHUNKS (1u << 20)
#define RCKPT_MF_MAX_NAME 1024
#define RCKPT_MF_MAX_DIMS 8
#define RCKPT_MF_KINDS 5        /* layer kinds of a config's pruned fractions */
#define RCKPT_MF_TENSOR_KINDS 8 /* a tensor's kind: those, then the optimizer's
				   (5 first moment, 6 second moment, 7 other
				   optimizer state): version 2 */
#define RCKPT_MF_KIND_OPTIM_FIRST 5

typedef struct rckpt_mf_seg {
	uint32_t chunk; /* chunk number */
	uint32_t index; /* the segment's position in that chunk's record */
	uint64_t n;     /* elements */
} rckpt_mf_seg_t;

typedef struct rckpt_mf_tensor {
	char *name;
	uint8_t dtype, kind, encoding;
	unsigned ndim;
	uint64_t shape[RCKPT_MF_MAX_DIMS];
	uint32_t nseg;
	rckpt_mf_seg_t *seg;
	/* version 2, optimizer kinds: */
	uint32_t norm; /* a first moment's NORM segments: the second moment
			  whose restored values normalize them (a tensor index);
			  RCKPT_MF_NO_NORM: none */
	float eps;     /* ... and the eps of m / (sqrt(v) + eps) */
} rckpt_mf_tensor_t;
#define RCKPT_MF_NO_NORM UINT32_MAX

typedef struct rckpt_mf_chunk {
	uint32_t elements, nseg;
	uint64_t record_bytes;
	uint8_t sha256[32];    /* of the decoded content ("Chunk digest") */
	/* version 3: the base record of this step as its writer stored it
	 * (the chunk's record when a base, else its head record), by its
	 * bytes and their SHA-256; base_bytes 0: none */
	uint64_t base_bytes;
	uint8_t base_sha256[32];
} rckpt_mf_chunk_t;

typedef struct rckpt_mf_config {
	uint8_t bins, emb_bins, metric, flags;
	float prune[RCKPT_MF_KINDS], protect, lambda;
} rckpt_mf_config_t;

typedef struct rckpt_manifest {
	uint64_t step, parent, chunk_params;
	uint32_t ntensors, nchunks;
	rckpt_mf_tensor_t *t; /* sorted by name */
	rckpt_mf_config_t cfg;
	double quality;
	uint64_t raw_bytes, enc_bytes;
	double opt_quality; /* version 2: the optimizer state's update error
			       (checkpoint.md "Optimizer state"); 0 without */
	rckpt_mf_chunk_t *chunk;
} rckpt_manifest_t;

/* Written as version 3 when a chunk names its stored base (base_bytes >
 * 0), else as version 2 when a tensor is of an optimizer kind (>= 5),
 * else as version 1, byte for byte as before. */
int rckpt_manifest_encode(rckpt_buf_t *out, const rckpt_manifest_t *m);
int rckpt_manifest_decode(rckpt_manifest_t *out, const uint8_t *src, size_t len);
/* A tensor's elements, by its shape (a decoded manifest's: their product
 * fits a u64). */
uint64_t rckpt_mf_numel(const rckpt_mf_tensor_t *t);
void rckpt_manifest_free(rckpt_manifest_t *m);

/* The optimizer's share of a step: its tensors' elements as fp32 bytes
 * (*raw) and the record bytes of the chunks that hold them (*enc). Chunks
 * hold one kind each (checkpoint.md "Chunks"); a chunk named by both kinds
 * counts as the model's (*enc 0 when memory runs out). */
void rckpt_manifest_optim_bytes(const rckpt_manifest_t *m, uint64_t *raw, uint64_t *enc);

/* SHA-256 of a chunk's decoded content (formats/checkpoint.md). 0 or
 * -ENOMEM. */
int rckpt_record_digest(uint8_t out[32], const rckpt_record_t *rec);

/* SHA-256 of n bytes (a stored base's). 0 or -ENOMEM. */
int rckpt_sha256(uint8_t out[32], const uint8_t *p, size_t n);

/* 1 when rec (len bytes) is chunk c's stored base as the manifest names
 * it (its length and SHA-256), else 0; -ENOMEM. Such a record holds the
 * content the manifest's chunk digest names: its writer made both. */
int rckpt_manifest_is_base(const rckpt_manifest_t *m, uint32_t c, const uint8_t *rec, size_t len);

#endif /* RCKPT_MANIFEST_H */
