/*
 * rckpt_kmeans.c — weighted 1-D k-means. With points and centroids sorted,
 * each centroid owns a contiguous range of points, so an assignment step is
 * one sweep.
 */
#include "rckpt_kmeans.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* xorshift64*, seeded identically every call: determinism, not quality. */
static double uniform(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (double)((*s * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-53;
}

/* Sorts c[0..k) ascending, stably (as glibc's qsort, a merge sort, did:
 * the same array, -0 and +0 kept in their order). Lloyd's centroids come
 * out of each step nearly sorted already, so this is one pass then. */
static void sort_centroids(double *c, unsigned k)
{
	unsigned i;
	for (i = 1; i < k; i++) {
		const double v = c[i];
		unsigned j = i;
		while (j > 0 && c[j - 1] > v) {
			c[j] = c[j - 1];
			j--;
		}
		c[j] = v;
	}
}

/* Picks index i with probability p[i] / sum(p), sum the p[i] added in
 * order; -1 when sum is 0. */
static long sample_of(const double *p, size_t n, double sum, uint64_t *rng)
{
	double t, acc = 0;
	size_t i;
	if (!(sum > 0))
		return -1;
	t = uniform(rng) * sum;
	for (i = 0; i < n; i++) {
		acc += p[i];
		if (p[i] > 0 && acc > t)
			return (long)i;
	}
	for (i = n; i-- > 0;)
		if (p[i] > 0)
			return (long)i;
	return -1;
}

/* sample_of(p, n, acc[n - 1], rng), with acc[i] the running sum of p
 * up to i added in order (as sample_of adds it): the first i whose sum
 * passes the draw is found by bisection. It is the same i: the sums never
 * fall, and where one rises above the draw, p there is not 0. */
static long sample_acc(const double *p, const double *acc, size_t n, uint64_t *rng)
{
	double t;
	size_t lo = 0, hi = n, i;
	if (n == 0 || !(acc[n - 1] > 0))
		return -1;
	t = uniform(rng) * acc[n - 1];
	while (lo < hi) { /* the first i with acc[i] > t */
		const size_t mid = lo + (hi - lo) / 2;
		if (acc[mid] > t)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo < n)
		return (long)lo;
	for (i = n; i-- > 0;)
		if (p[i] > 0)
			return (long)i;
	return -1;
}

static long sample(const double *p, size_t n, uint64_t *rng)
{
	double sum = 0;
	size_t i;
	for (i = 0; i < n; i++)
		sum += p[i];
	return sample_of(p, n, sum, rng);
}

static int kmeans(float *out, unsigned k, const double *x, const double *w, size_t n,
		  unsigned max_iter, const float *init);

int rckpt_kmeans_1d(float *out, unsigned k, const double *x, const double *w, size_t n,
		    unsigned max_iter)
{
	return kmeans(out, k, x, w, n, max_iter, NULL);
}

int rckpt_kmeans_1d_from(float *out, unsigned k, const double *x, const double *w, size_t n,
			 unsigned max_iter, const float *init)
{
	return kmeans(out, k, x, w, n, max_iter, init);
}

static int kmeans(float *out, unsigned k, const double *x, const double *w, size_t n,
		  unsigned max_iter, const float *init)
{
	double *c = NULL, *d2 = NULL, *near = NULL, *sw = NULL, *swx = NULL, *acc = NULL, tol;
	size_t i, distinct = 0;
	unsigned j, kk, it;
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int rc = -ENOMEM;

	if (k == 0)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (w[i] > 0 && (distinct == 0 || i == 0 || x[i] != x[i - 1]))
			distinct++;
	if (distinct == 0)
		return 0;
	kk = distinct < k ? (unsigned)distinct : k;
	c = malloc(sizeof(*c) * kk);
	d2 = malloc(sizeof(*d2) * n);
	near = malloc(sizeof(*near) * n);
	sw = malloc(sizeof(*sw) * kk);
	swx = malloc(sizeof(*swx) * kk);
	acc = malloc(sizeof(*acc) * n);
	if (!c || !d2 || !near || !sw || !swx || !acc)
		goto out;

	if (init && kk == k) {
		for (j = 0; j < kk; j++)
			c[j] = init[j];
		goto lloyd;
	}
	/* k-means++: the first centroid by weight, each next by w * D^2. */
	c[0] = x[sample(w, n, &rng)];
	for (i = 0; i < n; i++)
		near[i] = DBL_MAX;
	for (j = 1; j < kk; j++) {
		const double cj = c[j - 1];
		size_t first = 0;
		long pick;
		/* distance to the nearest centroid so far: it changes only from
		 * the first point the new centroid is nearer to, and so does the
		 * running sum of w * D^2 (acc[]: the sums sample_of adds, in its
		 * order); before it, both stay what they were */
		while (j > 1 && first < n && !((x[first] - cj) * (x[first] - cj) < near[first]))
			first++; /* (the first seed sets every point's distance) */
		for (i = first; i < n; i++) {
			double dd = (x[i] - cj) * (x[i] - cj);
			near[i] = dd < near[i] ? dd : near[i];
			d2[i] = w[i] * near[i];
		}
		{
			double a = first ? acc[first - 1] : 0;
			for (i = first; i < n; i++)
				acc[i] = a += d2[i];
		}
		pick = sample_acc(d2, acc, n, &rng);
		if (pick < 0) /* every weighted point sits on a centroid */
			break;
		c[j] = x[pick];
	}
	kk = j;
lloyd:
	sort_centroids(c, kk);

	/* Lloyd: points ascending and centroids ascending, so the owner of
	 * point i only moves right as i grows. Done when no centroid moves by
	 * more than 1e-7 of the points' range (float noise, by then);
	 * deterministic all the same. */
	tol = 1e-7 * (x[n - 1] - x[0]);
	for (it = 0; it < max_iter; it++) {
		unsigned owner = 0, moved = 0;
		memset(sw, 0, sizeof(*sw) * kk);
		memset(swx, 0, sizeof(*swx) * kk);
		{
			/* A cluster's points are contiguous (both sides sorted):
			 * sum in registers, store once per cluster, rather than
			 * through memory for every point. */
			double aw = 0, awx = 0;
			for (i = 0; i < n; i++) {
				unsigned o = owner;
				while (o + 1 < kk && fabs(x[i] - c[o + 1]) <= fabs(x[i] - c[o]))
					o++;
				if (o != owner) {
					sw[owner] = aw;
					swx[owner] = awx;
					aw = awx = 0;
					owner = o;
				}
				aw += w[i];
				awx += w[i] * x[i];
			}
			sw[owner] = aw;
			swx[owner] = awx;
		}
		for (j = 0; j < kk; j++) {
			double nc = sw[j] > 0 ? swx[j] / sw[j] : c[j];
			if (fabs(nc - c[j]) > tol)
				moved = 1;
			c[j] = nc;
		}
		sort_centroids(c, kk);
		if (!moved)
			break;
	}
	/* As floats, ascending and distinct. */
	for (j = 0, rc = 0; j < kk; j++) {
		float f = (float)c[j];
		if (rc == 0 || f > out[rc - 1])
			out[rc++] = f;
	}
out:
	free(c);
	free(d2);
	free(near);
	free(sw);
	free(swx);
	free(acc);
	return rc;
}
