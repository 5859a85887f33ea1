/*
 * rckpt_sketch.c — log-bucket histogram over float bit patterns.
 */
#include "rckpt_sketch.h"

#include "rckpt_bytes.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The first normal exponent has key (1 << mbits); keys start there. */
static inline uint32_t first_key(unsigned mbits)
{
	return 1u << mbits;
}

int rckpt_sketch_init(rckpt_sketch_t *s, unsigned mbits)
{
	memset(s, 0, sizeof(*s));
	if (mbits < RCKPT_SKETCH_MBITS_MIN || mbits > RCKPT_SKETCH_MBITS_MAX)
		return -EINVAL;
	s->mbits = mbits;
	s->nkeys = (size_t)254 << mbits; /* exponents 1..254 */
	s->neg = calloc(2 * s->nkeys + 1, sizeof(uint64_t)); /* [neg | pos | scratch] */
	s->pos = s->neg ? s->neg + s->nkeys : NULL;
	if (s->neg == NULL) {
		rckpt_sketch_free(s);
		return -ENOMEM;
	}
	return 0;
}

void rckpt_sketch_free(rckpt_sketch_t *s)
{
	free(s->neg); /* pos is its second half */
	memset(s, 0, sizeof(*s));
}

void rckpt_sketch_clear(rckpt_sketch_t *s)
{
	if (s->hi > s->lo) {
		memset(s->neg + s->lo, 0, (s->hi - s->lo) * sizeof(uint64_t));
		memset(s->pos + s->lo, 0, (s->hi - s->lo) * sizeof(uint64_t));
	}
	s->zero = s->total = 0;
	s->lo = s->hi = 0;
}

double rckpt_sketch_alpha(const rckpt_sketch_t *s)
{
	return ldexp(1.0, -(int)s->mbits - 1);
}

uint32_t rckpt_sketch_key(const rckpt_sketch_t *s, float magnitude)
{
	return (rckpt_f2u(magnitude) & 0x7fffffffu) >> (23 - s->mbits);
}

float rckpt_sketch_value(const rckpt_sketch_t *s, uint32_t key)
{
	/* lo + half the bucket's width, which is the octave's power of two
	 * times 2^-mbits: exact, and finite even for the topmost bucket. */
	float lo = rckpt_u2f(key << (23 - s->mbits));
	float octave = rckpt_u2f((key >> s->mbits) << 23);
	return lo + octave * ldexpf(1.0f, -(int)s->mbits - 1);
}

/*
 * Counting. pos and neg are the two halves of one array, allocated as
 * [neg | pos | scratch], so a value's counter is found with arithmetic
 * instead of a three-way branch: zeros and subnormals (exponent 0) go to the
 * scratch slot past the end of pos, moved to s->zero after the loop. The
 * loop keeps everything in locals: a store through a pointer into the
 * counts could otherwise alias *s and force reloads every iteration.
 *
 * It also keeps [lo, hi) around the keys counted, so scans skip the
 * thousands of empty buckets a tensor's few octaves leave (the array covers
 * every exponent). Zero and subnormal magnitudes widen nothing.
 */
static void add_words(rckpt_sketch_t *s, const float *x, const float *g, size_t n, uint32_t mask)
{
	uint64_t *const c = s->neg;
	const size_t nkeys = s->nkeys, scratch = 2 * nkeys;
	const unsigned shift = 23 - s->mbits;
	const uint32_t k0 = first_key(s->mbits);
	uint32_t mmin = 0x7fffffffu, mmax = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		const uint32_t u = rckpt_f2u(g ? x[i] * g[i] : x[i]) & mask, mag = u & 0x7fffffffu;
		const size_t off = (size_t)((mag >> shift) - k0) + (u >> 31 ? 0 : nkeys);
		const uint32_t m = mag < 0x00800000u ? mmin : mag;
		mmin = m < mmin ? m : mmin;
		mmax = mag > mmax ? mag : mmax;
		c[mag < 0x00800000u ? scratch : off]++;
	}
	s->zero += c[scratch];
	c[scratch] = 0;
	s->total += n;
	if (mmax >= 0x00800000u) {
		size_t lo = (mmin >> shift) - k0, hi = (mmax >> shift) - k0 + 1;
		if (s->hi == s->lo) {
			s->lo = lo;
			s->hi = hi;
		} else {
			s->lo = lo < s->lo ? lo : s->lo;
			s->hi = hi > s->hi ? hi : s->hi;
		}
	}
}

void rckpt_sketch_add(rckpt_sketch_t *s, const float *x, size_t n)
{
	add_words(s, x, NULL, n, 0xffffffffu);
}

void rckpt_sketch_add_abs_prod(rckpt_sketch_t *s, const float *x, const float *g, size_t n)
{
	add_words(s, x, g, n, 0x7fffffffu);
}

void rckpt_sketch_adopt_counts(rckpt_sketch_t *s, uint64_t total)
{
	size_t k;
	s->zero = s->neg[2 * s->nkeys];
	s->neg[2 * s->nkeys] = 0;
	s->total = total;
	s->lo = s->hi = 0;
	for (k = 0; k < s->nkeys; k++)
		if (s->neg[k] | s->pos[k]) {
			if (s->hi == s->lo)
				s->lo = k;
			s->hi = k + 1;
		}
}

int rckpt_sketch_merge(rckpt_sketch_t *dst, const rckpt_sketch_t *src)
{
	size_t k;
	if (dst->mbits != src->mbits)
		return -EINVAL;
	for (k = src->lo; k < src->hi; k++) {
		dst->pos[k] += src->pos[k];
		dst->neg[k] += src->neg[k];
	}
	if (src->hi > src->lo) {
		if (dst->hi == dst->lo) {
			dst->lo = src->lo;
			dst->hi = src->hi;
		} else {
			dst->lo = src->lo < dst->lo ? src->lo : dst->lo;
			dst->hi = src->hi > dst->hi ? src->hi : dst->hi;
		}
	}
	dst->zero += src->zero;
	dst->total += src->total;
	return 0;
}

void rckpt_sketch_foreach(const rckpt_sketch_t *s, void (*fn)(float value, uint64_t count, void *arg),
			  void *arg)
{
	uint32_t k0 = first_key(s->mbits);
	size_t k;

	for (k = s->hi; k-- > s->lo;)
		if (s->neg[k])
			fn(-rckpt_sketch_value(s, (uint32_t)k + k0), s->neg[k], arg);
	if (s->zero)
		fn(0.0f, s->zero, arg);
	for (k = s->lo; k < s->hi; k++)
		if (s->pos[k])
			fn(rckpt_sketch_value(s, (uint32_t)k + k0), s->pos[k], arg);
}

/* Finds the bucket holding rank floor(q (total - 1)): side -1, 0 (zero) or
 * +1, and its key. Returns 0 for an empty sketch. */
static int find_rank(const rckpt_sketch_t *s, double q, int *side, uint32_t *key)
{
	uint32_t k0 = first_key(s->mbits);
	uint64_t rank, seen = 0;
	size_t k;

	if (s->total == 0)
		return 0;
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	rank = (uint64_t)(q * (double)(s->total - 1));
	for (k = s->nkeys; k-- > 0;) {
		seen += s->neg[k];
		if (seen > rank) {
			*side = -1;
			*key = (uint32_t)k + k0;
			return 1;
		}
	}
	seen += s->zero;
	if (seen > rank) {
		*side = 0;
		*key = 0;
		return 1;
	}
	for (k = 0; k < s->nkeys; k++) {
		seen += s->pos[k];
		if (seen > rank)
			break;
	}
	*side = 1;
	*key = (uint32_t)(k < s->nkeys ? k : s->nkeys - 1) + k0;
	return 1;
}

void rckpt_sketch_quantile_bounds(const rckpt_sketch_t *s, double q, float *lo, float *hi)
{
	int side;
	uint32_t key;
	float a, b;

	if (!find_rank(s, q, &side, &key)) {
		*lo = *hi = 0.0f;
		return;
	}
	if (side == 0) {
		*lo = -FLT_MIN;
		*hi = FLT_MIN;
		return;
	}
	a = rckpt_u2f(key << (23 - s->mbits));
	b = rckpt_u2f((key + 1) << (23 - s->mbits)); /* +inf past the largest float */
	if (side > 0) {
		*lo = a;
		*hi = b;
	} else {
		*lo = -b;
		*hi = -a;
	}
}

void rckpt_sketch_abs_quantile_bounds(const rckpt_sketch_t *s, double q, float *lo, float *hi)
{
	uint32_t k0 = first_key(s->mbits);
	uint64_t rank, seen = s->zero;
	size_t k;

	if (s->total == 0) {
		*lo = *hi = 0.0f;
		return;
	}
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	rank = (uint64_t)(q * (double)(s->total - 1));
	if (seen > rank) {
		*lo = -FLT_MIN;
		*hi = FLT_MIN;
		return;
	}
	for (k = 0; k < s->nkeys; k++) {
		seen += s->pos[k] + s->neg[k];
		if (seen > rank)
			break;
	}
	if (k == s->nkeys)
		k = s->nkeys - 1;
	*lo = rckpt_u2f(((uint32_t)k + k0) << (23 - s->mbits));
	*hi = rckpt_u2f(((uint32_t)k + k0 + 1) << (23 - s->mbits));
}

float rckpt_sketch_quantile(const rckpt_sketch_t *s, double q)
{
	int side;
	uint32_t key;

	if (!find_rank(s, q, &side, &key))
		return 0.0f;
	if (side == 0)
		return 0.0f;
	return side > 0 ? rckpt_sketch_value(s, key) : -rckpt_sketch_value(s, key);
}

/* ---- compact views ---- */

void rckpt_sketch_view_free(rckpt_sketch_view_t *v)
{
	free(v->value);
	free(v->count);
	free(v->mkey);
	free(v->mcum);
	memset(v, 0, sizeof(*v));
}

typedef struct view_fill {
	rckpt_sketch_view_t *v;
} view_fill_t;

static void view_add(float value, uint64_t count, void *arg)
{
	rckpt_sketch_view_t *v = ((view_fill_t *)arg)->v;
	v->value[v->n] = value;
	v->count[v->n] = count;
	v->n++;
}

int rckpt_sketch_view_init(rckpt_sketch_view_t *v, const rckpt_sketch_t *s)
{
	const uint32_t k0 = first_key(s->mbits);
	size_t cap = 2 * (s->hi - s->lo) + 1, k;
	uint64_t cum = 0;
	view_fill_t f = { v };

	memset(v, 0, sizeof(*v));
	v->mbits = s->mbits;
	v->total = s->total;
	v->value = malloc(sizeof(float) * cap);
	v->count = malloc(sizeof(uint64_t) * cap);
	v->mkey = malloc(sizeof(uint32_t) * cap);
	v->mcum = malloc(sizeof(uint64_t) * cap);
	if (!v->value || !v->count || !v->mkey || !v->mcum) {
		rckpt_sketch_view_free(v);
		return -ENOMEM;
	}
	rckpt_sketch_foreach(s, view_add, &f);
	if (s->zero) {
		cum = s->zero;
		v->mkey[v->nmag] = 0;
		v->mcum[v->nmag++] = cum;
	}
	for (k = s->lo; k < s->hi; k++) {
		uint64_t c = s->pos[k] + s->neg[k];
		if (c) {
			cum += c;
			v->mkey[v->nmag] = (uint32_t)k + k0;
			v->mcum[v->nmag++] = cum;
		}
	}
	return 0;
}

void rckpt_sketch_view_abs_bounds(const rckpt_sketch_view_t *v, double q, float *lo, float *hi)
{
	uint64_t rank;
	size_t a = 0, b = v->nmag;
	uint32_t key;

	if (v->total == 0 || v->nmag == 0) {
		*lo = *hi = 0.0f;
		return;
	}
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	rank = (uint64_t)(q * (double)(v->total - 1));
	while (a < b) { /* the first bucket whose cumulative count exceeds rank */
		size_t m = a + (b - a) / 2;
		if (v->mcum[m] > rank)
			b = m;
		else
			a = m + 1;
	}
	if (a == v->nmag)
		a = v->nmag - 1;
	key = v->mkey[a];
	if (key == 0) {
		*lo = -FLT_MIN;
		*hi = FLT_MIN;
		return;
	}
	*lo = rckpt_u2f(key << (23 - v->mbits));
	*hi = rckpt_u2f((key + 1) << (23 - v->mbits));
}
