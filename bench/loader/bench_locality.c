/*
 * bench_locality.c — the locality-aware loader's imbalance traffic,
 * simulated with the loader's own planner (rckpt_loc_*): p learners, local
 * batch b, a dataset of p x b x steps samples cached whole in epoch 0.
 * For each step of epoch 1 the traffic is the samples that move between
 * learners, as a percentage of the global batch; printed as a box-plot
 * summary (min, quartiles, median, max) per (p, b), and with --csv every
 * step's value (bench/loader/plot_locality.py draws the box plot from it).
 * No cluster, no communication: the plan is what every learner computes.
 *
 * usage: bench_locality [--learners 4,8,...,1024] [--batches 32,64,128]
 *                       [--steps S] [--seed N] [--csv FILE]
 */
#define _GNU_SOURCE /* getopt_long */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rckpt.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static unsigned parse_list(const char *s, unsigned *out, unsigned max)
{
	unsigned n = 0;
	char *end;
	while (*s && n < max) {
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || v == 0 || v > 1u << 20)
			return 0;
		out[n++] = (unsigned)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return 0;
	}
	return n;
}

static double quantile(const double *x, unsigned n, double q)
{
	const double pos = q * (n - 1);
	const unsigned i = (unsigned)pos;
	return i + 1 < n ? x[i] + (pos - i) * (x[i + 1] - x[i]) : x[n - 1];
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_locality [--learners 4,8,...,1024] [--batches 32,64,128]\n"
		   "                      [--steps S] [--seed N] [--csv FILE]\n"
		   "Imbalance traffic of the locality-aware loader's plan, %% of the global batch.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "learners", 1, 0, 'p' }, { "batches", 1, 0, 'b' },
					    { "steps", 1, 0, 's' },    { "seed", 1, 0, 'S' },
					    { "csv", 1, 0, 'c' },      { "help", 0, 0, 'h' },
					    { 0, 0, 0, 0 } };
	unsigned ps[16] = { 4, 8, 16, 32, 64, 128, 256, 512, 1024 }, bs[8] = { 32, 64, 128 };
	unsigned np = 9, nb = 3, steps = 200, i, k, c;
	uint64_t seed = 1;
	const char *csv = NULL;
	FILE *cf = NULL;
	int o;

	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 'p':
			if (!(np = parse_list(optarg, ps, 16)))
				goto bad;
			break;
		case 'b':
			if (!(nb = parse_list(optarg, bs, 8)))
				goto bad;
			break;
		case 's':
			steps = (unsigned)strtoul(optarg, NULL, 10);
			if (steps < 1 || steps > 100000)
				goto bad;
			break;
		case 'S':
			seed = strtoull(optarg, NULL, 10);
			break;
		case 'c':
			csv = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc)
		goto bad;
	if (csv && (cf = fopen(csv, "w")) == NULL) {
		perror(csv);
		return 1;
	}
	if (cf)
		fprintf(cf, "learners,local_batch,step,moved_pct,transfers\n");
	printf("imbalance traffic, %% of the global batch, %u steps of epoch 1 per row (seed %llu)\n\n",
	       steps, (unsigned long long)seed);
	printf("| learners | local batch | min | q1 | median | q3 | max | mean transfers |\n");
	printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (k = 0; k < nb; k++)
		for (i = 0; i < np; i++) {
			const unsigned p = ps[i], b = bs[k];
			const uint64_t g = (uint64_t)p * b, n64 = g * steps;
			uint32_t *owner, *perm, *src, *dst, n;
			double *pct, transfers = 0;
			rckpt_loc_plan_stats_t st;
			int rc;
			if (n64 > UINT32_MAX / 2) {
				fprintf(stderr, "bench_locality: p=%u b=%u: too many samples; fewer --steps\n", p, b);
				return 1;
			}
			n = (uint32_t)n64;
			owner = malloc(sizeof(*owner) * n);
			perm = malloc(sizeof(*perm) * n);
			src = malloc(sizeof(*src) * g);
			dst = malloc(sizeof(*dst) * g);
			pct = malloc(sizeof(*pct) * steps);
			if (!owner || !perm || !src || !dst || !pct) {
				fprintf(stderr, "bench_locality: out of memory\n");
				return 1;
			}
			if ((rc = rckpt_loc_directory(seed, 0, n, p, b, UINT32_MAX, owner)) ||
			    (rc = rckpt_loc_order(seed, 1, n, perm))) {
				fprintf(stderr, "bench_locality: %s\n", strerror(-rc));
				return 1;
			}
			for (c = 0; c < steps; c++) {
				rc = rckpt_loc_plan(owner, n, p, perm + (size_t)c * g, (uint32_t)g, src, dst, &st);
				if (rc) {
					fprintf(stderr, "bench_locality: plan: %s\n", strerror(-rc));
					return 1;
				}
				pct[c] = 100.0 * st.moved / g;
				transfers += st.transfers;
				if (cf)
					fprintf(cf, "%u,%u,%u,%.4f,%u\n", p, b, c, pct[c], st.transfers);
			}
			qsort(pct, steps, sizeof(*pct), cmp_double);
			printf("| %u | %u | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f |\n", p, b, pct[0],
			       quantile(pct, steps, 0.25), quantile(pct, steps, 0.5), quantile(pct, steps, 0.75),
			       pct[steps - 1], transfers / steps);
			fflush(stdout);
			free(owner);
			free(perm);
			free(src);
			free(dst);
			free(pct);
		}
	if (cf && fclose(cf)) {
		perror(csv);
		return 1;
	}
	return 0;
bad:
	usage(stderr);
	return 2;
}
