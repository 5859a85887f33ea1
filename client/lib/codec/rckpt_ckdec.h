/*
 * rckpt_ckdec.h — the checkpoint decoder: folds each chunk's chain of
 * records (formats/checkpoint.md) step after step. Internal to librckpt;
 * the restore path and `rckpt codec decode` use it.
 */
#ifndef RCKPT_CKDEC_H
#define RCKPT_CKDEC_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_manifest.h"
#include "rckpt_quant.h"
#include "rckpt_record.h"

/* The decoding side: folds each chunk's chain step after step. */
typedef struct rckpt_ckdec {
	rckpt_manifest_t mf;   /* the last decoded step */
	rckpt_record_t *chunk; /* its chunks, decoded (mf.nchunks) */
	unsigned threads;      /* chunks decoded at once: 0, every CPU the
				  process may use up to 4 (rckpt_cpus); 1, in
				  order on the caller's thread. Each holds one
				  chunk's scratch, about 5 bytes an element.
				  Kept by rckpt_ckdec_free. */
} rckpt_ckdec_t;

/* What a decoder takes from untrusted bytes before it allocates: records
 * of at most 2^26 elements (what any store writer laid into a chunk; a
 * local file's own chunk size where it is larger, at most 2^31) and 2^16
 * segments,
 * and the bases of a step may declare at most RCKPT_DECODE_RATIO_MAX
 * times the bytes they and the manifest take, as fp32 (a bound like
 * zstd's window limit: a few hundred bytes cannot ask for a gigabyte).
 * Real steps stay far under it (a base of real weights is a few times
 * smaller than its fp32); a step of almost nothing but zeros may not:
 * the environment variable RCKPT_DECODE_RATIO_MAX raises the bound. */
#define RCKPT_DECODE_RATIO_MAX 4096u

/* Decodes a step from its manifest and chunk records (records[i] for chunk
 * i; NULL: skip that chunk, whose tensors then read as -ENOENT), on top of
 * the last step this decoder decoded when it is a delta.
 * Each chunk's SHA-256 is checked against the manifest. 0, -EBADMSG,
 * -ESTALE (a delta of another step than the last), -E2BIG (past the
 * bounds above: nothing allocated for it), RCKPT_FMT_ECHECKSUM,
 * RCKPT_FMT_EVERSION, -ENOMEM. On failure the decoder keeps its last step. */
int rckpt_ckdec_step(rckpt_ckdec_t *d, const uint8_t *manifest, size_t mlen,
		     const uint8_t *const *records, const size_t *lens);

/* rckpt_ckdec_step in parts, so that a restore decodes each chunk as its
 * record arrives: begin (the manifest), chunk (one record, decoded at
 * once, on the caller's thread, unless the bytes given so far do not
 * bound what it declares: then at end), end (every record: what is not
 * decoded yet, then the step's own bound over all of them, as
 * rckpt_ckdec_step checks it first). The same results and errors as
 * rckpt_ckdec_step with the same records. Calls of chunk for distinct
 * chunks may run at once on other threads; a record must stay as given
 * until end. */
typedef struct rckpt_ckdec_inc {
	const rckpt_ckdec_t *d;   /* the decoder (its last step: deltas' parents) */
	rckpt_manifest_t mf;
	rckpt_record_t *chunk;    /* decoded chunks (mf.nchunks) */
	int *rc;                  /* each chunk's result; 1: not decoded yet */
	const uint8_t **given;    /* each chunk's record as given (NULL: not yet) */
	uint64_t elems, bytes;    /* bases' declared elements decoded, bytes given */
	size_t mlen;              /* the manifest's bytes */
	double cpu;               /* CPU seconds of the chunks' decodes, all
				     threads (end and abort keep it) */
	double ratio;
	void *mu;                 /* pthread_mutex_t */
} rckpt_ckdec_inc_t;

int rckpt_ckdec_inc_begin(rckpt_ckdec_inc_t *x, const rckpt_ckdec_t *d, const uint8_t *manifest,
			  size_t mlen);
/* Chunk c's record. Returns 0: its result is kept for end. */
int rckpt_ckdec_inc_chunk(rckpt_ckdec_inc_t *x, uint32_t c, const uint8_t *rec, size_t len);
/* records/lens: every chunk's (NULL: not wanted), those given to chunk
 * among them; the step goes into d on success. x is freed either way. */
int rckpt_ckdec_inc_end(rckpt_ckdec_inc_t *x, rckpt_ckdec_t *d, const uint8_t *const *records,
			const size_t *lens);
/* Frees x without a step. */
void rckpt_ckdec_inc_abort(rckpt_ckdec_inc_t *x);

/* Tensor t of the decoded step as fp32, into out[0..its elements). */
int rckpt_ckdec_tensor_f32(const rckpt_ckdec_t *d, uint32_t t, float *out);

/* Elements [first, first + count) of tensor t of the decoded step as fp32
 * into out[0..count). -ERANGE past the tensor; -ENOENT when a chunk
 * holding part of the range was not decoded. */
int rckpt_ckdec_range_f32(const rckpt_ckdec_t *d, uint32_t t, uint64_t first, uint64_t count,
			  float *out);

/* Where rckpt_ckdec_tensor_to puts a tensor's values, in its dtype, at
 * byte offsets of a destination the sink knows (device memory, say). */
typedef struct rckpt_ckdec_sink {
	/* bytes of host memory at src, to offset off */
	int (*put)(void *arg, uint64_t off, const void *src, size_t bytes);
	/* levels idx[0..n) dequantized with q and the protected values
	 * prot[0..np) (host memory) then narrowed to dtype (rckpt_dequantize,
	 * then rckpt_narrow_from_f32), to offset off */
	int (*dequantize)(void *arg, uint64_t off, unsigned dtype, const uint8_t *idx, uint64_t n,
			  const rckpt_qparams_t *q, const uint16_t *prot, uint64_t np);
	void *arg;
} rckpt_ckdec_sink_t;

/* Tensor t of the decoded step, in its dtype, through sink s: the same
 * bytes as rckpt_ckdec_tensor_f32 then rckpt_narrow_from_f32, but with no
 * fp32 copy of the tensor. A plain quantized segment goes as its levels
 * and protected values (s->dequantize); a lossless one of the tensor's
 * dtype as its bytes (s->put); the rest (LOG2 and NORM segments, lossless
 * ones of another dtype) is decoded here in blocks of RCKPT_CKDEC_STAGE
 * elements and put. -ENOENT, -EBADMSG as rckpt_ckdec_range_f32. */
#define RCKPT_CKDEC_STAGE (1u << 20)
int rckpt_ckdec_tensor_to(const rckpt_ckdec_t *d, uint32_t t, const rckpt_ckdec_sink_t *s);

/* Whether tensor t reads whole: its segments (and a NORM tensor's second
 * moment's) are there and whole; their levels are as the record decoder
 * let them in (in range, checked again as they are read). 0, -ENOENT,
 * -EBADMSG. */
int rckpt_ckdec_tensor_check(const rckpt_ckdec_t *d, uint32_t t);

/* Elements [first, first + count) of tensor t, in its dtype, into host
 * memory at dst (its element `first`'s place): the same bytes as
 * rckpt_ckdec_tensor_to's into host memory. After rckpt_ckdec_tensor_check
 * of t; ranges of one tensor may run at once on other threads. */
int rckpt_ckdec_range_to_host(const rckpt_ckdec_t *d, uint32_t t, uint64_t first, uint64_t count,
			      void *dst);

/* Tensors idx[0..n) into host memory at dst[k] (each whole, in its
 * dtype), on up to `threads` threads (0: the CPUs the process may use, at
 * most 8), in pieces of at most 4 Mi elements: rckpt_restored_read_many.
 * rcs[k] comes in 0 for each tensor to read (else it is left out, as it
 * is); every tensor is checked (rckpt_ckdec_tensor_check) before any is
 * written, and rcs[k] gets its result. 0, or -ENOMEM (nothing written). */
int rckpt_ckdec_read_many(const rckpt_ckdec_t *d, unsigned n, const unsigned *idx, void *const *dst,
			  int *rcs, unsigned threads);

/* The threads a decode of this decoder's steps runs on (its `threads`, or
 * the CPUs the process may use, at most 4). */
unsigned rckpt_ckdec_threads(const rckpt_ckdec_t *d);

/* The sink into host memory at dst: the CPU twin of a device's. */
void rckpt_ckdec_host_sink(rckpt_ckdec_sink_t *s, void *dst);

void rckpt_ckdec_free(rckpt_ckdec_t *d);

#endif /* RCKPT_CKDEC_H */
