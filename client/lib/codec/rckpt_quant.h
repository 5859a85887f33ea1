/*
 * rckpt_quant.h — prune/protect classification, bin assignment (quantize)
 * and dequantize: the CPU reference of the GPU kernels, whose results must
 * match these bit for bit.
 *
 * Levels of a segment with B bins: L = B + 2. The centroids are ascending;
 * the pruned level (value exactly 0) sits at its ordinal place P = the number
 * of centroids < 0, so level order is value order; bins at or above P move
 * up by one; level L - 1 is "protected" (the value is kept as bf16). Indices
 * are ordinal, which keeps the deltas of slowly moving weights small.
 */
#ifndef RCKPT_QUANT_H
#define RCKPT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define RCKPT_MAX_BINS 64

typedef struct rckpt_qparams {
	unsigned nbins;                     /* B, 1..RCKPT_MAX_BINS */
	float centroids[RCKPT_MAX_BINS];    /* ascending, distinct, finite */
	int prune_by_sensitivity;           /* metric: |w*g| instead of |w| */
	float prune_below;                  /* metric < this is pruned (0: none) */
	float protect_mag;                  /* |w| >= this is protected (+inf: none) */
	float protect_sens;                 /* |w*g| >= this is protected (+inf: none) */
} rckpt_qparams_t;

/* Levels and the pruned level of q. */
static inline unsigned rckpt_q_levels(const rckpt_qparams_t *q)
{
	return q->nbins + 2;
}
unsigned rckpt_q_pruned_level(const rckpt_qparams_t *q);

/* 0 when q is usable, -EINVAL otherwise. */
int rckpt_qparams_check(const rckpt_qparams_t *q);

/* Assigns a level to each of w[0..n) (finite values; g may be NULL, then
 * sensitivity tests are skipped). Protected values go, in position order,
 * to prot[] as bf16 (round to nearest even); *nprot gets their count (prot
 * needs room for n). A value is protected if |w| >= protect_mag or |w*g| >=
 * protect_sens; else pruned if its metric < prune_below; else it takes the
 * nearest centroid, ties going to the higher one. */
void rckpt_quantize(uint8_t *idx, uint16_t *prot, size_t *nprot, const float *w, const float *g,
		    size_t n, const rckpt_qparams_t *q);

/* The inverse: level -> centroid, 0 or the next protected value. Returns 0,
 * or -EBADMSG when idx holds a level >= L or does not use exactly nprot
 * protected values. */
int rckpt_dequantize(float *out, const uint8_t *idx, size_t n, const rckpt_qparams_t *q,
		     const uint16_t *prot, size_t nprot);
/* The same, then transform xf undone (rckpt_xf_inverse): the same floats,
 * in one pass (the levels' values are undone once each, in a table).
 * With used, a range of a segment: at most nprot protected values (those
 * past the range's are there), *used the number it took. */
int rckpt_dequantize_xf(float *out, const uint8_t *idx, size_t n, const rckpt_qparams_t *q,
			const uint16_t *prot, size_t nprot, unsigned xf, size_t *used);

/* The B - 1 midpoints the bin assignment compares with: mid[j] = c[j] +
 * (c[j+1] - c[j]) * 0.5f in float, non-decreasing; the GPU gets these very
 * floats. Returns B - 1. */
unsigned rckpt_q_midpoints(float *mid, const rckpt_qparams_t *q);

/*
 * The quality sums of a quantization, in an order a GPU can follow: num =
 * sum g^2 (w - r)^2 and den = sum g^2 w^2 (g NULL: weights 1), r the
 * level's value (a protected value's is its bf16 rounding), terms in double
 * as (g*g * d) * d with d = (double)w - r, and (g*g * w) * w.
 *  - A tensor is cut into tiles of RCKPT_QERR_TILE (2048) elements. In a
 *    tile, lane j (0..255) adds the terms of elements j, j + 256, ...,
 *    j + 1792 in that order, from +0; then the lanes fold as a tree: for s =
 *    128, 64, ..., 1, lane[j] += lane[j + s] for j < s; lane 0 is the
 *    tile's sum.
 *  - Tile t's sum is added to outer lane t mod 256, tiles in order; the
 *    outer lanes fold by the same tree.
 * The GPU twin is rckpt_gpu_qerr. One rckpt_qerr_t per tensor; add the
 * tensor's elements in order, in pieces whose lengths are multiples of the
 * tile except the last.
 */
#define RCKPT_QERR_TILE 2048u
#define RCKPT_QERR_LANES 256u
typedef struct rckpt_qerr {
	double num[RCKPT_QERR_LANES], den[RCKPT_QERR_LANES];
	uint64_t tiles;
	int ended; /* a piece not a multiple of the tile was added */
} rckpt_qerr_t;

void rckpt_qerr_init(rckpt_qerr_t *e);
/* idx: the levels rckpt_quantize gave w[0..n) with q (protected values are
 * recomputed from w). 0; -EBADMSG for a level >= B + 2; -EINVAL when a
 * piece follows one whose length was not a multiple of the tile. */
int rckpt_qerr_add(rckpt_qerr_t *e, const uint8_t *idx, const float *w, const float *g, size_t n,
		   const rckpt_qparams_t *q);
void rckpt_qerr_end(const rckpt_qerr_t *e, double *num, double *den);

/* The change distance of prioritized partial checkpoints: out[b] = sum over
 * block b (elements [b*block, min(n, (b+1)*block))) of ((double)cur -
 * (double)saved)^2. In a block, lane j (0..255) adds elements j, j + 256,
 * ... of the block in order from +0, then the lanes fold as rckpt_qerr's
 * tree. The GPU twin is rckpt_gpu_block_dist. block >= 1. */
void rckpt_block_dist(double *out, const float *cur, const float *saved, uint64_t n, uint64_t block);

/* The LOG2 transform (formats/checkpoint.md "Transforms"): a non-negative
 * float's binary32 bits b read as the fixed-point number (b - 0x3f800000) /
 * 2^23, a piecewise-linear log2 that is exact integer arithmetic on every
 * machine (the GPU's twin gives the same floats). 0 maps to -127. The
 * forward map gives NaN for what it cannot take (a negative value, NaN,
 * Inf; -0 is 0), so the encoder's NaN check refuses it. The inverse rounds
 * x * 2^23 to the nearest integer (ties to even), adds 0x3f800000 and
 * clamps the bits to [0, FLT_MAX's]; NaN stays NaN. */
float rckpt_xf_log2_fwd(float v);
float rckpt_xf_log2_inv(float x);
/* In place, over v[0..n), for transform xf (enum rckpt_seg_transform);
 * none leaves v. */
void rckpt_xf_forward(float *v, size_t n, unsigned xf);
void rckpt_xf_inverse(float *v, size_t n, unsigned xf);

/* The NORM transform's values (formats/checkpoint.md "Transforms"): out[i]
 * = m[i] / (sqrtf(v[i]) + eps), v the second moment as restored, in float,
 * one rounding per operation. The GPU twin is rckpt_gpu_norm_divide. */
void rckpt_norm_divide(float *out, const float *m, const float *v, float eps, size_t n);

/* The update error's weights (client/lib/codec/ckenc_optim.c) of a second
 * moment v[0..n) and its first moment m (NULL: none), Adam's eps in v's
 * units: with s = sqrt(v), d = s + eps, rho = s / d, f1 = 1 + v's mantissa
 * fraction (lin: v floored at eps^2), u = m / d,
 *   wv[k] = |u| rho / (2 f1)   (no m: rho / (2 f1)),
 *   wm[k] = 1 / d              (when wm is not NULL),
 *   *den  = sum u^2            (no m: n),
 * in double, rounded to float once; v not positive or not finite counts as
 * 0, m not finite as 0. *den is summed in rckpt_qerr's fixed order (tiles,
 * lanes, trees). The GPU twin is rckpt_gpu_update_weights. */
void rckpt_update_weights(float *wv, float *wm, double *den, const float *v, const float *m,
			  uint64_t n, double eps, int lin);

/* bf16 <-> float, round to nearest even (finite input). */
uint16_t rckpt_f32_to_bf16(float f);
float rckpt_bf16_to_f32(uint16_t h);

#endif /* RCKPT_QUANT_H */
