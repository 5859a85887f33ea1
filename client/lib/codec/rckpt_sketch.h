/*
 * rckpt_sketch.h — a mergeable log-bucket histogram with relative error
 * alpha = 2^-(mbits+1) (a DDSketch-style quantile sketch).
 *
 * A finite float's bucket is its magnitude's exponent and top `mbits`
 * mantissa bits: buckets grow geometrically from octave to octave and are
 * linear inside one, so the bucket's midpoint is within alpha of every value
 * in it, and the key is a shift of the float's bits — the same integer on
 * every machine and on the GPU. Negative values have buckets of their own;
 * zeros and subnormals (|x| < FLT_MIN) are counted as zero.
 *
 * One thread per sketch; sketches with the same mbits merge by addition.
 */
#ifndef RCKPT_SKETCH_H
#define RCKPT_SKETCH_H

#include <stddef.h>
#include <stdint.h>

#define RCKPT_SKETCH_MBITS_MIN 1
#define RCKPT_SKETCH_MBITS_MAX 10
#define RCKPT_SKETCH_MBITS_DEFAULT 7 /* alpha = 1/256 */

typedef struct rckpt_sketch {
	unsigned mbits;
	size_t nkeys;   /* buckets per sign: 254 << mbits */
	uint64_t *pos;  /* counts of positive buckets, by key (second half of neg's array) */
	uint64_t *neg;  /* counts of negative buckets, by key of |x| (owns the array) */
	uint64_t zero;  /* zeros and subnormals */
	uint64_t total; /* every value added */
	size_t lo, hi;  /* every nonzero count of pos and neg lies in [lo, hi) */
} rckpt_sketch_t;

/* 0, -EINVAL (mbits out of range) or -ENOMEM. */
int rckpt_sketch_init(rckpt_sketch_t *s, unsigned mbits);
void rckpt_sketch_free(rckpt_sketch_t *s);
void rckpt_sketch_clear(rckpt_sketch_t *s);

/* The relative error bound of s: 2^-(mbits+1). */
double rckpt_sketch_alpha(const rckpt_sketch_t *s);

/* Add values. Every value must be finite (the caller checks). */
void rckpt_sketch_add(rckpt_sketch_t *s, const float *x, size_t n);
/* Add |x[i] * g[i]| (sensitivity), computed in float. */
void rckpt_sketch_add_abs_prod(rckpt_sketch_t *s, const float *x, const float *g, size_t n);

/* Adopts counts written straight into s's array ([neg | pos | zeros in
 * the slot after pos], the layout of the GPU's histogram, rckpt_gpu.h) for
 * total values: the zeros move to s->zero, lo and hi are set. */
void rckpt_sketch_adopt_counts(rckpt_sketch_t *s, uint64_t total);

/* dst += src; both with the same mbits. 0 or -EINVAL. */
int rckpt_sketch_merge(rckpt_sketch_t *dst, const rckpt_sketch_t *src);

/* The value at quantile q in [0, 1] (rank floor(q * (total - 1)) in value
 * order), as its bucket's representative; 0 for an empty sketch. */
float rckpt_sketch_quantile(const rckpt_sketch_t *s, double q);

/* The bounds [*lo, *hi) of the bucket holding quantile q: thresholds set on
 * bucket edges never split a bucket, so "below lo" holds at most a fraction
 * q and "at or above hi" at most 1 - q, even when many values are equal. *hi
 * is +inf for the topmost bucket. An empty sketch gives [0, 0). */
void rckpt_sketch_quantile_bounds(const rckpt_sketch_t *s, double q, float *lo, float *hi);

/* The same for the magnitudes |x| of a sketch of signed values: its
 * positive and negative buckets together, which are the buckets |x| would
 * have had (a bucket is keyed by magnitude). Saves sketching |x| apart. */
void rckpt_sketch_abs_quantile_bounds(const rckpt_sketch_t *s, double q, float *lo, float *hi);

/* Bucket key of a magnitude and the representative (midpoint) of a key. */
uint32_t rckpt_sketch_key(const rckpt_sketch_t *s, float magnitude);
float rckpt_sketch_value(const rckpt_sketch_t *s, uint32_t key);

/* Calls fn(value, count, arg) for each nonempty bucket in increasing value
 * order (negative buckets, zero, positive buckets). */
void rckpt_sketch_foreach(const rckpt_sketch_t *s, void (*fn)(float value, uint64_t count, void *arg),
			  void *arg);

/*
 * A compact, read-only view of a sketch for many queries: its nonempty
 * buckets in value order, and cumulative counts in magnitude order, so
 * quantiles are a binary search and the buckets a short array. Built once
 * per sketch; answers exactly what the sketch's own functions answer.
 */
typedef struct rckpt_sketch_view {
	unsigned mbits;
	size_t n;        /* nonempty buckets, zero included */
	float *value;    /* representative, ascending */
	uint64_t *count;
	size_t nmag;     /* nonempty magnitude buckets (|x| merges both signs) */
	uint32_t *mkey;  /* their keys, ascending; zero is key 0 */
	uint64_t *mcum;  /* counts up to and including each */
	uint64_t total;
} rckpt_sketch_view_t;

int rckpt_sketch_view_init(rckpt_sketch_view_t *v, const rckpt_sketch_t *s);
void rckpt_sketch_view_free(rckpt_sketch_view_t *v);

/* As rckpt_sketch_abs_quantile_bounds (of a signed sketch), or as
 * rckpt_sketch_quantile_bounds for a sketch of magnitudes. */
void rckpt_sketch_view_abs_bounds(const rckpt_sketch_view_t *v, double q, float *lo, float *hi);

#endif /* RCKPT_SKETCH_H */
