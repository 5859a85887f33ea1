/*
 * rckpt_codec.h — one tensor through the Inshrinkerator pipeline: layer kind,
 * sketch, prune/protect thresholds, weighted k-means on the histogram,
 * quantize; and back. Internal to librckpt.
 *
 * Decisions (say them once, here):
 *  - 1-D tensors (norms, biases) and scalars are lossless by default: they
 *    are tiny, and pruning a LayerNorm's weights wrecks a model.
 *  - A quantized tensor holding NaN or Inf is refused (-EDOM, the index in
 *    the message): a checkpoint that holds them is not worth compressing,
 *    and no quality measure can judge it. Lossless tensors are stored as
 *    they are, NaN and all.
 *  - fp16 and bf16 tensors are widened to fp32 for the pipeline; the levels
 *    are the same kind of thing whatever the dtype, and dequantization
 *    narrows back to the tensor's dtype (round to nearest even).
 */
#ifndef RCKPT_CODEC_H
#define RCKPT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_record.h"
#include "rckpt_sketch.h"

enum rckpt_layer_kind {
	RCKPT_LK_OTHER = 0,
	RCKPT_LK_EMBEDDING = 1,
	RCKPT_LK_CONV = 2,
	RCKPT_LK_LINEAR = 3,
	RCKPT_LK_NORM_BIAS = 4, /* 1-D and 0-D tensors */
	RCKPT_LK_COUNT = 5,
};

/* From the shape, and the name for embeddings ("embed", "wte", "wpe",
 * "tok_emb" in a 2-D tensor's name). */
unsigned rckpt_layer_kind(const char *name, unsigned ndim, const uint64_t *shape);
const char *rckpt_layer_kind_name(unsigned kind);

enum rckpt_prune_metric { RCKPT_PRUNE_MAGNITUDE = 0, RCKPT_PRUNE_SENSITIVITY = 1 };

/* A compression configuration: one point of the search space. */
typedef struct rckpt_qconfig {
	unsigned bins;                     /* conv, linear, other */
	unsigned emb_bins;                 /* embeddings */
	float prune_frac[RCKPT_LK_COUNT];  /* fraction pruned, per layer kind */
	unsigned prune_metric;             /* enum rckpt_prune_metric */
	float protect_frac;                /* top fraction by |w| and by |w g| kept */
	float lambda;                      /* k-means bucket weight: frequency share */
	unsigned lossless_kinds;           /* bit per layer kind stored losslessly */
} rckpt_qconfig_t;

/* Paper-style defaults: 16 bins, 32 for embeddings, 10% pruned, 0.5%
 * protected, lambda 0.5, norms and biases lossless. */
void rckpt_qconfig_default(rckpt_qconfig_t *c);

/* Scratch reused across tensors: three sketches. One per thread. */
typedef struct rckpt_codec_scratch {
	rckpt_sketch_t value, mag, sens;
	float *f32;  /* widened input, grown as needed */
	float *g32;
	size_t cap;
} rckpt_codec_scratch_t;

int rckpt_codec_scratch_init(rckpt_codec_scratch_t *s);
void rckpt_codec_scratch_free(rckpt_codec_scratch_t *s);

/* Encodes a tensor (data in dtype, n elements, little-endian; grads fp32
 * or NULL) as one segment covering it. seg->tensor, ->first are left 0 for
 * the caller. The segment owns its arrays (rckpt_record_free frees them).
 * 0, -EDOM (NaN/Inf in a quantized tensor; *bad_index set), -EINVAL,
 * -ENOMEM. */
int rckpt_codec_encode_tensor(rckpt_seg_t *seg, uint64_t *bad_index, const void *data,
			      unsigned dtype, uint64_t n, const float *grads, unsigned kind,
			      const rckpt_qconfig_t *c, rckpt_codec_scratch_t *scr);

/* Writes the segment's values, dequantized, as fp32 into out[0..seg->n).
 * 0 or -EBADMSG. */
int rckpt_codec_decode_f32(float *out, const rckpt_seg_t *seg);

/* The default quality loss of a reconstruction: sum g^2 (w - r)^2 /
 * sum g^2 w^2, or with g NULL, sum (w - r)^2 / sum w^2; 0 for an all-zero
 * w. Scale-free, so one threshold serves every model. */
double rckpt_codec_rel_error(const float *w, const float *r, const float *g, uint64_t n);

/* Element type conversions (round to nearest even when narrowing). */
void rckpt_widen_to_f32(float *out, const void *src, unsigned dtype, uint64_t n);
void rckpt_narrow_from_f32(void *dst, const float *src, unsigned dtype, uint64_t n);

#endif /* RCKPT_CODEC_H */
