/*
 * test_rng.h — the tests' one random generator: xorshift64, seeded per
 * program (define TEST_RNG_SEED before including it; a fixed default
 * otherwise), so that every run draws the same numbers and a failure
 * reproduces. rnd() 32 bits, urand() uniform in [0, 1), nrand() and
 * nrandf() standard normal (Box-Muller).
 */
#ifndef RCKPT_TEST_RNG_H
#define RCKPT_TEST_RNG_H

#include <math.h>
#include <stdint.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = TEST_RNG_SEED;

static inline uint64_t rng_next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static inline uint32_t rnd(void)
{
	return (uint32_t)(rng_next() >> 16);
}

static inline double urand(void)
{
	return (double)(rng_next() >> 11) * 0x1.0p-53;
}

static inline double nrand(void)
{
	const double u = urand() + 1e-300, v = urand();
	return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static inline float nrandf(void)
{
	return (float)nrand();
}

#endif
