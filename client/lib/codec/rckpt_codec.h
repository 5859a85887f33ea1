/*
 * rckpt_codec.h — one tensor through the Inshrinkerator pipeline: layer kind,
 * sketch, prune/protect thresholds, weighted k-means on the histogram,
 * quantize; and back. Internal to librckpt.
 *
 * Decisions (say them once, here):
 *  - 1-D tensors (norms, biases) and scalars are kept as bf16 by default
 *    (bf16_kinds): a quantized segment whose every value is protected,
 *    nothing pruned (pruning a LayerNorm's weights wrecks a model). Each
 *    value is within 2^-8 of its own; they add nothing to the sums eps
 *    bounds (the other tensors are quantized as they were when these were
 *    lossless: ckenc_impl.h SUM_NONE), and a delta's values are
 *    predicted from the parent's (checkpoint.md "Predicted blobs"): half
 *    the bytes of the lossless form, whose low mantissa bits no delta
 *    compresses. A kind in lossless_kinds is stored as it is.
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

#include "rckpt_quant.h"
#include "rckpt_record.h"
#include "rckpt_sketch.h"

enum rckpt_layer_kind {
	RCKPT_LK_OTHER = 0,
	RCKPT_LK_EMBEDDING = 1,
	RCKPT_LK_CONV = 2,
	RCKPT_LK_LINEAR = 3,
	RCKPT_LK_NORM_BIAS = 4, /* 1-D and 0-D tensors */
	/* An optimizer's state, as its trainer declares it (rckpt_job_set_roles);
	 * never inferred. Laid out after the model's tensors, in chunks of their
	 * own, and judged by the update error (rckpt_ckenc.h). */
	RCKPT_LK_MOMENT1 = 5, /* a first moment: Adam's exp_avg, SGD's momentum */
	RCKPT_LK_MOMENT2 = 6, /* Adam's exp_avg_sq: quantized in the LOG2 domain */
	RCKPT_LK_OPTIM = 7,   /* any other float state of an optimizer */
	RCKPT_LK_COUNT = 8,
};
#define RCKPT_LK_MODEL_COUNT 5 /* kinds 0..4: a model's tensors */

static inline int rckpt_lk_is_optim(unsigned kind)
{
	return kind >= RCKPT_LK_MOMENT1 && kind < RCKPT_LK_COUNT;
}

/* The transform of a quantized tensor of this kind (enum
 * rckpt_seg_transform): LOG2 for a second moment, else none. */
static inline unsigned rckpt_lk_transform(unsigned kind)
{
	return kind == RCKPT_LK_MOMENT2 ? RCKPT_XF_LOG2 : RCKPT_XF_NONE;
}

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
	float protect_frac;                /* top fraction by |w| (and |w g|) kept */
	int protect_by_sensitivity;        /* also protect the top |w g| */
	float lambda;                      /* k-means bucket weight: frequency share */
	unsigned lossless_kinds;           /* bit per layer kind stored losslessly */
	unsigned bf16_kinds;               /* bit per layer kind whose values are all
					      protected (kept as bf16), weighing
					      nothing in eps's sum */
} rckpt_qconfig_t;

/* Paper-style defaults: 16 bins, 32 for embeddings, 10% pruned, 0.5%
 * protected, lambda 0.5, norms and biases kept as bf16. */
void rckpt_qconfig_default(rckpt_qconfig_t *c);

enum rckpt_quantizer {
	RCKPT_QUANTIZER_KMEANS = 0,  /* weighted k-means on the histogram */
	RCKPT_QUANTIZER_UNIFORM = 1, /* evenly spaced bins (an ablation) */
};

/* A tensor made ready for any number of configurations: fp32 values, the
 * gradient EMA, and the three sketches every configuration reads. */
typedef struct rckpt_tensor_prep {
	const float *w;    /* n values, fp32: the caller's (fp32, aligned) or wide */
	float *wide;       /* owned fp32 copy for fp16/bf16 input, else NULL */
	const float *g;    /* n gradient-EMA values, or NULL (borrowed) */
	uint64_t n;
	unsigned kind;     /* enum rckpt_layer_kind */
	unsigned dtype;    /* the tensor's own dtype */
	rckpt_sketch_t value; /* signed values; magnitudes come from it too */
	rckpt_sketch_t sens;  /* |w g|, when g */
	rckpt_sketch_view_t vvalue, vsens; /* their compact views, for the search */
} rckpt_tensor_prep_t;

/* Widens data (dtype, n elements) to fp32 (fp32 data, 4-byte aligned, is
 * used in place) and sketches it. data and grads (fp32, may be NULL) are
 * borrowed for the prep's lifetime. 0, -EDOM (NaN or Inf in values, or a
 * gradient weight that is NaN, Inf or negative; *bad_index set), -EINVAL,
 * -ENOMEM. */
int rckpt_codec_prepare(rckpt_tensor_prep_t *p, uint64_t *bad_index, const void *data,
			unsigned dtype, uint64_t n, const float *grads, unsigned kind);
void rckpt_codec_prep_free(rckpt_tensor_prep_t *p);

/* The same in pieces, for tensors too big to widen whole: begin, add the
 * values (fp32, with their gradients or NULL) block after block, end. The
 * prep then has no values (w NULL): quantize blocks with
 * rckpt_quantize and the qparams. prep_add gives -EDOM with *bad_index
 * relative to the block; end frees the sketches (only the views remain). */
int rckpt_codec_prep_begin(rckpt_tensor_prep_t *p, unsigned dtype, uint64_t n, const float *grads,
			   unsigned kind);
int rckpt_codec_prep_add(rckpt_tensor_prep_t *p, const float *w, const float *g, size_t n,
			 uint64_t *bad_index);
int rckpt_codec_prep_end(rckpt_tensor_prep_t *p);

/* Codebooks already computed for one tensor in one step, keyed by what
 * they depend on (bins, the magnitude range clustered, quantizer, lambda):
 * the search asks for the same one under many configurations. Zero it
 * before a tensor's first use; it needs no freeing. */
#define RCKPT_CB_CACHE_SIZE 32
typedef struct rckpt_codebook_cache {
	unsigned n, next;
	struct {
		unsigned bins, quantizer, k;
		float lo, hi, lambda;
		float centroids[RCKPT_MAX_BINS];
	} e[RCKPT_CB_CACHE_SIZE];
} rckpt_codebook_cache_t;

/* The quantization parameters of configuration c for p: bucket-edge
 * thresholds, then the codebook. warm (may be NULL) is the last step's
 * codebook of this tensor: used as k-means seeds when it has as many bins.
 * cache (may be NULL) holds codebooks of this tensor, this step, this warm
 * start. 0, -EINVAL, -ENOMEM. */
int rckpt_codec_qparams(rckpt_qparams_t *q, const rckpt_tensor_prep_t *p, const rckpt_qconfig_t *c,
			unsigned quantizer, const rckpt_seg_t *warm, rckpt_codebook_cache_t *cache);

/* The parameters that keep parent's codebook (the last record's segment of
 * this tensor) with configuration c's thresholds for p: a level then moves
 * only where its value crossed a boundary, and the codebook costs nothing
 * to switch to. Needs only what a record holds, so a writer that resumed
 * from the head has it as much as the one that wrote it. 0, -EINVAL. */
int rckpt_codec_qparams_keep(rckpt_qparams_t *q, const rckpt_tensor_prep_t *p, const rckpt_qconfig_t *c,
			     const rckpt_seg_t *parent);

/* Quantizes p with q into a segment covering the whole tensor. */
int rckpt_codec_make_segment(rckpt_seg_t *seg, const rckpt_tensor_prep_t *p, const rckpt_qparams_t *q);

/* A lossless segment of the tensor's bytes. */
int rckpt_codec_lossless_segment(rckpt_seg_t *seg, const void *data, unsigned dtype, uint64_t n);

/* All of it for one tensor and one configuration: lossless when c says so
 * for its kind, else prepare, qparams, make_segment. seg->tensor and
 * ->first are left 0 for the caller; the segment owns its arrays. */
int rckpt_codec_encode_tensor(rckpt_seg_t *seg, uint64_t *bad_index, const void *data,
			      unsigned dtype, uint64_t n, const float *grads, unsigned kind,
			      const rckpt_qconfig_t *c);

/* Writes the segment's values, dequantized, as fp32 into out[0..seg->n).
 * 0 or -EBADMSG. */
int rckpt_codec_decode_f32(float *out, const rckpt_seg_t *seg);

/* The loss terms of a segment against the values it encodes, without
 * materializing the reconstruction: *num += sum g^2 (w - r)^2, *den +=
 * sum g^2 w^2 (g NULL: weights 1). 0 or -EBADMSG. */
int rckpt_codec_seg_error(const rckpt_seg_t *seg, const float *w, const float *g, double *num,
			  double *den);
/* Its parts, for a tensor judged in blocks: element i of a call goes to
 * as[i % 8] and bs[i % 8], so blocks whose lengths are multiples of 8 sum
 * exactly as the whole tensor would; lanes_add then adds the lanes in
 * order to *num and *den, as seg_error does. */
int rckpt_codec_seg_error_lanes(const rckpt_seg_t *seg, const float *w, const float *g,
				double as[8], double bs[8]);
void rckpt_codec_lanes_add(const double as[8], const double bs[8], double *num, double *den);

/* The default quality loss of a reconstruction: sum g^2 (w - r)^2 /
 * sum g^2 w^2, or with g NULL, sum (w - r)^2 / sum w^2; 0 for an all-zero
 * w. Scale-free, so one threshold serves every model. */
double rckpt_codec_rel_error(const float *w, const float *r, const float *g, uint64_t n);

/* Element type conversions (round to nearest even when narrowing). */
void rckpt_widen_to_f32(float *out, const void *src, unsigned dtype, uint64_t n);
void rckpt_narrow_from_f32(void *dst, const float *src, unsigned dtype, uint64_t n);

#endif /* RCKPT_CODEC_H */
