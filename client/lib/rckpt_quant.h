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

/* bf16 <-> float, round to nearest even (finite input). */
uint16_t rckpt_f32_to_bf16(float f);
float rckpt_bf16_to_f32(uint16_t h);

#endif /* RCKPT_QUANT_H */
