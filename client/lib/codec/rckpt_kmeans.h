/*
 * rckpt_kmeans.h — weighted k-means in one dimension, over the buckets of a
 * histogram rather than raw values: k-means++ seeding (D^2 sampling from a
 * fixed-seed generator, so the result is a function of the input alone)
 * then Lloyd iterations.
 */
#ifndef RCKPT_KMEANS_H
#define RCKPT_KMEANS_H

#include <stddef.h>

/* Clusters points x[0..n) (ascending) with weights w[0..n) (>= 0, not all
 * 0) into at most k centroids, written ascending to out. Returns how many:
 * k, or fewer when there are fewer distinct points of positive weight; 0
 * when there is none; -EINVAL for k == 0; -ENOMEM. */
int rckpt_kmeans_1d(float *out, unsigned k, const double *x, const double *w, size_t n,
		    unsigned max_iter);

/* The same, seeded with init[0..k) (ascending) instead of k-means++: a
 * warm start from the last step's codebook keeps the centroids, and so the
 * levels of unchanged weights, where they were. */
int rckpt_kmeans_1d_from(float *out, unsigned k, const double *x, const double *w, size_t n,
			 unsigned max_iter, const float *init);

#endif /* RCKPT_KMEANS_H */
