/*
 * rckpt_locality.c — the pure part of locality-aware loading: the epoch
 * order every learner computes alike, the cache directory (who caches
 * which sample), and the plan that balances each step's local batches.
 *
 * No I/O and no communication: every learner runs these on the same
 * inputs and gets the same answers, so nobody has to tell anybody what it
 * holds. The loader (rckpt_loader.c) moves the bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt.h"
#include "rckpt_pcr_internal.h"

/* splitmix64: the stream behind the epoch order (documented in rckpt.h, so
 * another implementation can reproduce it). */
static uint64_t next64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int rckpt_loc_order(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t *perm)
{
	uint64_t x = seed ^ (epoch * 0xd1b54a32d192ed03ull);
	uint32_t i;
	if (n && perm == NULL)
		return -EINVAL;
	for (i = 0; i < n; i++)
		perm[i] = i;
	for (i = n; i > 1; i--) { /* Fisher-Yates, from the end */
		const uint32_t j = (uint32_t)(((next64(&x) >> 32) * (uint64_t)i) >> 32);
		const uint32_t t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
	return 0;
}

/* Learner r's share of a global batch of g samples among p: g/p, the first
 * g%p learners one more; its first position in the batch. */
static uint32_t share(uint32_t g, unsigned p, unsigned r)
{
	return g / p + (r < g % p);
}

static uint32_t share_start(uint32_t g, unsigned p, unsigned r)
{
	return r * (g / p) + (r < g % p ? r : g % p);
}

int rckpt_loc_directory(uint64_t seed, uint64_t epoch, uint32_t n, unsigned p, uint32_t local_batch,
			uint32_t capacity, uint32_t *owner)
{
	return rckpt_loc_directory_from(seed, epoch, n, p, local_batch, capacity, 0, owner);
}

int rckpt_loc_directory_from(uint64_t seed, uint64_t epoch, uint32_t n, unsigned p,
			     uint32_t local_batch, uint32_t capacity, uint32_t start, uint32_t *owner)
{
	uint32_t *perm, *held, g, t, k;
	unsigned r;
	int rc;

	if (p == 0 || local_batch == 0 || (uint64_t)p * local_batch > UINT32_MAX || (n && !owner) ||
	    start > n)
		return -EINVAL;
	if (n == 0)
		return 0;
	perm = malloc(sizeof(*perm) * (size_t)n);
	held = calloc(p, sizeof(*held));
	if (!perm || !held) {
		free(perm);
		free(held);
		return -ENOMEM;
	}
	if ((rc = rckpt_loc_order(seed, epoch, n, perm)) == 0) {
		g = p * local_batch;
		for (t = 0; t < start; t++) /* not read in this epoch: in no cache */
			owner[perm[t]] = RCKPT_LOC_STORAGE;
		for (t = start; t < n; t += g) {
			const uint32_t gl = n - t < g ? n - t : g;
			for (r = 0; r < p; r++) {
				const uint32_t s0 = share_start(gl, p, r), sn = share(gl, p, r);
				for (k = 0; k < sn; k++) {
					const uint32_t id = perm[t + s0 + k];
					owner[id] = held[r] < capacity ? r : RCKPT_LOC_STORAGE;
					held[r] += held[r] < capacity;
				}
			}
		}
	}
	free(perm);
	free(held);
	return rc;
}

/* A max-heap of (amount, learner): larger amounts first, then lower
 * learners, so the plan is the same on every learner. */
typedef struct {
	uint32_t amount;
	unsigned r;
} hent_t;

static int above(const hent_t *a, const hent_t *b)
{
	return a->amount > b->amount || (a->amount == b->amount && a->r < b->r);
}

static void hpush(hent_t *h, unsigned *n, hent_t e)
{
	unsigned i = (*n)++;
	while (i > 0 && above(&e, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static hent_t hpop(hent_t *h, unsigned *n)
{
	const hent_t top = h[0], last = h[--*n];
	unsigned i = 0;
	for (;;) {
		unsigned c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && above(&h[c + 1], &h[c]))
			c++;
		if (!above(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = last;
	return top;
}

int rckpt_loc_plan(const uint32_t *owner, uint32_t n, unsigned p, const uint32_t *ids, uint32_t g,
		   uint32_t *src, uint32_t *dst, rckpt_loc_plan_stats_t *st)
{
	uint32_t *cnt = NULL, *need = NULL, *next = NULL, i;
	hent_t *sur = NULL, *def = NULL;
	unsigned r, ns = 0, nd = 0;
	rckpt_loc_plan_stats_t s = { 0, 0, 0 };
	int rc = 0;

	if (p == 0 || (g && (!owner || !ids || !src || !dst)))
		return -EINVAL;
	for (i = 0; i < g; i++)
		if (ids[i] >= n || (owner[ids[i]] >= p && owner[ids[i]] != RCKPT_LOC_STORAGE))
			return -ERANGE;
	cnt = calloc(p, sizeof(*cnt));
	need = calloc(p, sizeof(*need));
	next = calloc(p, sizeof(*next));
	sur = malloc(sizeof(*sur) * p);
	def = malloc(sizeof(*def) * p);
	if (!cnt || !need || !next || !sur || !def) {
		rc = -ENOMEM;
		goto out;
	}
	for (r = 0; r < p; r++)
		need[r] = share(g, p, r);
	/* 1. each cached sample stays with its owner while the owner's local
	 *    batch has room (in batch order); the rest is surplus */
	for (i = 0; i < g; i++) {
		const uint32_t o = owner[ids[i]];
		src[i] = o;
		dst[i] = RCKPT_LOC_STORAGE; /* unplaced */
		if (o != RCKPT_LOC_STORAGE && cnt[o] < need[o]) {
			dst[i] = o;
			cnt[o]++;
		}
	}
	/* 2. samples in no cache fill the deficits in learner order: the
	 *    learner short of samples reads them from storage itself */
	r = 0;
	for (i = 0; i < g; i++) {
		if (src[i] != RCKPT_LOC_STORAGE)
			continue;
		while (cnt[r] == need[r])
			r++; /* misses never exceed the deficits: r stays < p */
		dst[i] = r;
		cnt[r]++;
		s.from_storage++;
	}
	/* 3. the greedy surplus/deficit plan: the largest surplus goes to the
	 *    largest deficit, min(surplus, deficit) samples a transfer; each
	 *    round settles one learner, so at most p-1 transfers */
	for (r = 0; r < p; r++)
		if (cnt[r] < need[r])
			hpush(def, &nd, (hent_t){ need[r] - cnt[r], r });
	memset(cnt, 0, sizeof(*cnt) * p); /* now: each owner's unplaced samples */
	for (i = 0; i < g; i++)
		if (dst[i] == RCKPT_LOC_STORAGE)
			cnt[src[i]]++;
	for (r = 0; r < p; r++)
		if (cnt[r])
			hpush(sur, &ns, (hent_t){ cnt[r], r });
	while (ns && nd) {
		hent_t a = hpop(sur, &ns), b = hpop(def, &nd);
		const uint32_t m = a.amount < b.amount ? a.amount : b.amount;
		uint32_t k = 0;
		for (i = next[a.r]; i < g && k < m; i++)
			if (src[i] == a.r && dst[i] == RCKPT_LOC_STORAGE) {
				dst[i] = b.r;
				k++;
			}
		next[a.r] = i;
		s.moved += m;
		s.transfers++;
		if (a.amount > m)
			hpush(sur, &ns, (hent_t){ a.amount - m, a.r });
		if (b.amount > m)
			hpush(def, &nd, (hent_t){ b.amount - m, b.r });
	}
	if (ns || nd)
		rc = -EFAULT; /* cannot happen: surplus and deficit are equal */
	if (st)
		*st = s;
out:
	free(cnt);
	free(need);
	free(next);
	free(sur);
	free(def);
	return rc;
}
