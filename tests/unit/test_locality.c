/*
 * test_locality.c — the pure part of locality-aware loading: epoch order,
 * cache directory, and the balancing plan (rckpt_loc_*).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rckpt.h"

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

static int cmp_u32(const void *a, const void *b)
{
	const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void assert_permutation(const uint32_t *perm, uint32_t n)
{
	uint8_t *seen = calloc(n + 1, 1);
	uint32_t i;
	assert_non_null(seen);
	for (i = 0; i < n; i++) {
		assert_true(perm[i] < n);
		assert_int_equal(seen[perm[i]], 0);
		seen[perm[i]] = 1;
	}
	free(seen);
}

static void test_order(void **state)
{
	enum { N = 10007 };
	uint32_t *a = malloc(sizeof(*a) * N), *b = malloc(sizeof(*b) * N), i, same = 0;
	uint32_t one = 7;
	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(rckpt_loc_order(42, 0, N, a), 0);
	assert_permutation(a, N);
	assert_int_equal(rckpt_loc_order(42, 0, N, b), 0);
	assert_memory_equal(a, b, sizeof(*a) * N); /* the same on every learner */
	assert_int_equal(rckpt_loc_order(42, 1, N, b), 0);
	assert_permutation(b, N);
	for (i = 0; i < N; i++)
		same += a[i] == b[i];
	assert_true(same < 20); /* another epoch, another order (expected: 1) */
	assert_int_equal(rckpt_loc_order(43, 0, N, b), 0);
	for (i = 0, same = 0; i < N; i++)
		same += a[i] == b[i];
	assert_true(same < 20);
	/* uniform enough: where sample 0 lands over many epochs */
	{
		enum { M = 10, E = 20000 };
		uint32_t hist[M] = { 0 }, p[M];
		uint64_t e;
		for (e = 0; e < E; e++) {
			assert_int_equal(rckpt_loc_order(5, e, M, p), 0);
			for (i = 0; i < M; i++)
				if (p[i] == 0)
					hist[i]++;
		}
		for (i = 0; i < M; i++)
			assert_true(hist[i] > E / M * 0.9 && hist[i] < E / M * 1.1);
	}
	assert_int_equal(rckpt_loc_order(1, 0, 0, NULL), 0);
	assert_int_equal(rckpt_loc_order(1, 0, 1, &one), 0);
	assert_int_equal(one, 0);
	assert_int_equal(rckpt_loc_order(1, 0, 5, NULL), -EINVAL);
	free(a);
	free(b);
}

/* The global batches of an epoch, as the loader forms them. */
static uint32_t batch_of(const uint32_t *perm, uint32_t n, uint32_t g, uint32_t t, const uint32_t **ids)
{
	*ids = perm + (size_t)t * g;
	return n - t * g < g ? n - t * g : g;
}

static void test_directory(void **state)
{
	enum { N = 1000, P = 7, B = 16 };
	uint32_t owner[N], perm[N], held[P] = { 0 }, i, t;
	unsigned r;
	(void)state;
	/* unbounded: every sample has the owner that read it in epoch 0 */
	assert_int_equal(rckpt_loc_directory(9, 0, N, P, B, UINT32_MAX, owner), 0);
	assert_int_equal(rckpt_loc_order(9, 0, N, perm), 0);
	for (t = 0; t * P * B < N; t++) {
		const uint32_t *ids;
		const uint32_t g = batch_of(perm, N, P * B, t, &ids);
		uint32_t pos = 0;
		for (r = 0; r < P; r++) {
			const uint32_t sh = g / P + (r < g % P);
			for (i = 0; i < sh; i++, pos++)
				assert_int_equal(owner[ids[pos]], r);
		}
		assert_int_equal(pos, g);
	}
	for (i = 0; i < N; i++)
		held[owner[i]]++;
	for (r = 0, i = 0; r < P; r++)
		i += held[r];
	assert_int_equal(i, N);
	/* bounded: nobody holds more than its capacity; the rest is nobody's */
	assert_int_equal(rckpt_loc_directory(9, 0, N, P, B, 50, owner), 0);
	memset(held, 0, sizeof(held));
	for (i = 0, t = 0; i < N; i++) {
		if (owner[i] == RCKPT_LOC_STORAGE) {
			t++;
			continue;
		}
		assert_true(owner[i] < P);
		held[owner[i]]++;
	}
	for (r = 0; r < P; r++)
		assert_int_equal(held[r], 50);
	assert_int_equal(t, N - 50 * P);
	assert_int_equal(rckpt_loc_directory(9, 0, N, P, B, 0, owner), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(owner[i], RCKPT_LOC_STORAGE);
	/* bad input changes nothing */
	owner[0] = 12345;
	assert_int_equal(rckpt_loc_directory(9, 0, N, 0, B, 1, owner), -EINVAL);
	assert_int_equal(rckpt_loc_directory(9, 0, N, P, 0, 1, owner), -EINVAL);
	assert_int_equal(rckpt_loc_directory(9, 0, N, 65536, 65536, 1, owner), -EINVAL);
	assert_int_equal(owner[0], 12345);
}

/* Every property of one plan; returns the samples moved. */
static uint32_t check_plan(const uint32_t *owner, uint32_t n, unsigned p, const uint32_t *ids, uint32_t g)
{
	uint32_t *src = malloc(sizeof(*src) * (g + 1)), *dst = malloc(sizeof(*dst) * (g + 1));
	uint32_t *size = calloc(p, sizeof(*size)), *sends = calloc(p, sizeof(*sends));
	uint32_t *recvs = calloc(p, sizeof(*recvs)), *cached = calloc(p, sizeof(*cached));
	uint8_t *pair = calloc((size_t)p * p, 1);
	uint32_t *a = malloc(sizeof(*a) * (g + 1)), *b = malloc(sizeof(*b) * (g + 1));
	uint32_t i, moved = 0, misses = 0, pairs = 0, nsur = 0, ndef = 0, pos = 0;
	rckpt_loc_plan_stats_t st;
	unsigned r;

	assert_true(src && dst && size && sends && recvs && cached && pair && a && b);
	assert_int_equal(rckpt_loc_plan(owner, n, p, ids, g, src, dst, &st), 0);
	for (i = 0; i < g; i++) {
		const uint32_t o = owner[ids[i]];
		assert_true(dst[i] < p);
		assert_int_equal(src[i], o); /* a sample comes from its owner's cache or from storage */
		size[dst[i]]++;
		if (o == RCKPT_LOC_STORAGE) {
			misses++;
			continue;
		}
		cached[o]++;
		if (o != dst[i]) {
			moved++;
			sends[o]++;
			recvs[dst[i]]++;
			if (!pair[(size_t)o * p + dst[i]]++)
				pairs++;
		}
	}
	/* the local batches: the shares, and their union is the global batch */
	for (r = 0; r < p; r++) {
		assert_int_equal(size[r], g / p + (r < g % p));
		for (i = 0; i < g; i++)
			if (dst[i] == r)
				a[pos++] = ids[i];
	}
	assert_int_equal(pos, g);
	memcpy(b, ids, sizeof(*b) * g);
	qsort(a, g, sizeof(*a), cmp_u32);
	qsort(b, g, sizeof(*b), cmp_u32);
	assert_memory_equal(a, b, sizeof(*a) * g);
	for (r = 0; r < p; r++) {
		const uint32_t sh = g / p + (r < g % p);
		/* nobody both sends and receives; a learner sends exactly its
		 * surplus and keeps all it can */
		assert_false(sends[r] && recvs[r]);
		assert_int_equal(sends[r], cached[r] > sh ? cached[r] - sh : 0);
		nsur += sends[r] > 0;
		ndef += cached[r] < sh;
	}
	assert_int_equal(st.moved, moved);
	assert_int_equal(st.from_storage, misses);
	assert_int_equal(st.transfers, pairs);
	assert_true(pairs <= (p ? p - 1 : 0) || pairs == 0);
	/* within twice the fewest: every sender sends and every short learner
	 * that storage does not fill receives at least once */
	assert_true(pairs <= 2 * (nsur > ndef ? nsur : ndef));
	free(src);
	free(dst);
	free(size);
	free(sends);
	free(recvs);
	free(cached);
	free(pair);
	free(a);
	free(b);
	return moved;
}

static void test_plan_properties(void **state)
{
	static const unsigned ps[] = { 1, 2, 3, 4, 7, 16, 64, 257 };
	static const uint32_t bs[] = { 1, 3, 32 };
	uint64_t s = 77;
	unsigned k, q;
	(void)state;
	for (k = 0; k < sizeof(ps) / sizeof(ps[0]); k++)
		for (q = 0; q < sizeof(bs) / sizeof(bs[0]); q++) {
			const unsigned p = ps[k];
			const uint32_t b = bs[q], n = 3 * p * b + 5, cap[3] = { UINT32_MAX, b, 0 };
			uint32_t *owner = malloc(sizeof(*owner) * n), *perm = malloc(sizeof(*perm) * n);
			uint32_t e, t, c;
			assert_true(owner && perm);
			for (c = 0; c < 3; c++) {
				assert_int_equal(rckpt_loc_directory(s, 0, n, p, b, cap[c], owner), 0);
				for (e = 0; e < 3; e++) {
					assert_int_equal(rckpt_loc_order(s, e, n, perm), 0);
					for (t = 0; t * p * b < n; t++) {
						const uint32_t *ids;
						const uint32_t g = batch_of(perm, n, p * b, t, &ids);
						const uint32_t moved = check_plan(owner, n, p, ids, g);
						if (e == 0 && c == 0)
							assert_int_equal(moved, 0); /* epoch 0 is the directory */
					}
				}
			}
			/* random owners, random batches with repeats (a multiset) */
			for (t = 0; t < 20; t++) {
				uint32_t ids[600], g = (uint32_t)(lcg(&s) % 600), i;
				for (i = 0; i < n; i++) {
					const uint64_t x = lcg(&s) % (p + 2);
					owner[i] = x >= p ? RCKPT_LOC_STORAGE : (uint32_t)x;
				}
				for (i = 0; i < g; i++)
					ids[i] = (uint32_t)(lcg(&s) % n);
				check_plan(owner, n, p, ids, g);
			}
			s++;
			free(owner);
			free(perm);
		}
}

/* Later epochs with every sample cached: nothing from storage, and the
 * traffic is the imbalance: about 7%, 5%, 3.5% of the batch for local
 * batches of 32, 64, 128 (the expected surplus of a binomial share). */
static void test_plan_traffic(void **state)
{
	static const uint32_t bs[] = { 32, 64, 128 };
	static const double lo[] = { 0.055, 0.038, 0.026 }, hi[] = { 0.085, 0.060, 0.044 };
	enum { P = 64, STEPS = 60 };
	unsigned q;
	(void)state;
	for (q = 0; q < 3; q++) {
		const uint32_t b = bs[q], g = P * b, n = g * STEPS;
		uint32_t *owner = malloc(sizeof(*owner) * n), *perm = malloc(sizeof(*perm) * n);
		uint32_t *src = malloc(sizeof(*src) * g), *dst = malloc(sizeof(*dst) * g), t;
		double frac[STEPS], tmp;
		unsigned i, j;
		rckpt_loc_plan_stats_t st;
		assert_true(owner && perm && src && dst);
		assert_int_equal(rckpt_loc_directory(1, 0, n, P, b, UINT32_MAX, owner), 0);
		assert_int_equal(rckpt_loc_order(1, 1, n, perm), 0);
		for (t = 0; t < STEPS; t++) {
			assert_int_equal(rckpt_loc_plan(owner, n, P, perm + t * g, g, src, dst, &st), 0);
			assert_int_equal(st.from_storage, 0);
			assert_true(st.transfers <= P - 1);
			frac[t] = (double)st.moved / g;
		}
		for (i = 1; i < STEPS; i++) /* insertion sort for the median */
			for (j = i; j > 0 && frac[j - 1] > frac[j]; j--) {
				tmp = frac[j];
				frac[j] = frac[j - 1];
				frac[j - 1] = tmp;
			}
		print_message("local batch %u: median traffic %.2f%%\n", b, 100 * frac[STEPS / 2]);
		assert_true(frac[STEPS / 2] > lo[q] && frac[STEPS / 2] < hi[q]);
		free(owner);
		free(perm);
		free(src);
		free(dst);
	}
}

static void test_plan_rejects(void **state)
{
	uint32_t owner[4] = { 0, 1, RCKPT_LOC_STORAGE, 9 }, ids[3] = { 0, 1, 2 }, src[3], dst[3];
	(void)state;
	src[0] = dst[0] = 555;
	assert_int_equal(rckpt_loc_plan(owner, 4, 0, ids, 3, src, dst, NULL), -EINVAL);
	assert_int_equal(rckpt_loc_plan(owner, 4, 2, ids, 3, NULL, dst, NULL), -EINVAL);
	ids[2] = 4; /* past n */
	assert_int_equal(rckpt_loc_plan(owner, 4, 2, ids, 3, src, dst, NULL), -ERANGE);
	ids[2] = 3; /* owner 9 of 2 learners */
	assert_int_equal(rckpt_loc_plan(owner, 4, 2, ids, 3, src, dst, NULL), -ERANGE);
	assert_int_equal(src[0], 555); /* nothing written */
	assert_int_equal(dst[0], 555);
	ids[2] = 2;
	assert_int_equal(rckpt_loc_plan(owner, 4, 2, ids, 3, src, dst, NULL), 0);
	assert_int_equal(rckpt_loc_plan(owner, 4, 2, ids, 0, NULL, NULL, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_directory),
		cmocka_unit_test(test_plan_properties),
		cmocka_unit_test(test_plan_traffic),
		cmocka_unit_test(test_plan_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
