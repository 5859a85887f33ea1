/*
 * bench_codec_stages.c — throughput of the codec's stages on synthetic
 * index data shaped like a real checkpoint delta: n parameters in B bins,
 * a fraction of which move to a neighbouring bin between two steps.
 * Reports MB/s of the fp32 bytes the indices stand for (4 bytes a
 * parameter), one core, median of repeated runs, with zstd -1 on the raw
 * fp32 bytes measured in the same run for scale.
 *
 * usage: bench_codec_stages [--params N] [--bins B] [--moved F] [--runs R]
 */
#define _GNU_SOURCE /* getopt_long */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zstd.h>

#include "rckpt_estream.h"
#include "rckpt_istream.h"
#include "rckpt_clock.h" /* rckpt_now_s */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "params", 1, 0, 'n' }, { "bins", 1, 0, 'b' },
					    { "moved", 1, 0, 'm' }, { "runs", 1, 0, 'r' },
					    { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	size_t n = 16u << 20, i;
	unsigned bins = 16, runs = 7, r, c;
	double moved = 0.05;
	struct {
		const char *name;
		unsigned stages, policy;
	} cases[] = {
		{ "delta+rearrange+rle (no entropy)", RCKPT_IS_REARRANGED | RCKPT_IS_RLE, 0 },
		{ "delta+rearrange+rle+entropy", RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL },
		{ "delta+rearrange+rle+entropy or CTX (the codec's)",
		  RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX, RCKPT_EST_TRY_ALL },
		{ "delta+rle+entropy", RCKPT_IS_RLE, RCKPT_EST_TRY_ALL },
		{ "delta+entropy (huffman only)", 0, RCKPT_EST_TRY_HUFF },
	};
	rckpt_istream_scratch_t scratch = RCKPT_ISTREAM_SCRATCH_INIT;
	uint8_t *prev, *cur, *back;
	float *f32;
	int opt;

	while ((opt = getopt_long(argc, argv, "n:b:m:r:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': n = strtoull(optarg, NULL, 10); break;
		case 'b': bins = (unsigned)atoi(optarg); break;
		case 'm': moved = atof(optarg); break;
		case 'r': runs = (unsigned)atoi(optarg); break;
		case 'h':
			printf("usage: %s [--params N] [--bins B] [--moved F] [--runs R]\n", argv[0]);
			return 0;
		default: fprintf(stderr, "%s: bad usage; try --help\n", argv[0]); return 2;
		}
	}
	if (n == 0 || bins < 2 || bins > 253 || runs == 0 || moved < 0 || moved > 1) {
		fprintf(stderr, "%s: --params > 0, --bins 2..253, --moved 0..1, --runs > 0\n", argv[0]);
		return 2;
	}
	prev = malloc(n);
	cur = malloc(n);
	back = malloc(n);
	f32 = malloc(n * 4);
	for (i = 0; i < n; i++) { /* bell-shaped bin occupancy, like real weights */
		unsigned b = (unsigned)((rnd() % 1000 + rnd() % 1000 + rnd() % 1000) / 3000.0 * bins);
		prev[i] = (uint8_t)(b < bins ? b : bins - 1);
		cur[i] = prev[i];
		if (rnd() % 1000000 < moved * 1e6) { /* to a neighbouring bin */
			unsigned up = (rnd() & 1) && prev[i] + 1u < bins;
			cur[i] = (uint8_t)(up ? prev[i] + 1 : prev[i] > 0 ? prev[i] - 1 : 1);
		}
		f32[i] = (float)((int)prev[i] - (int)bins / 2) * 0.01f + (float)(rnd() % 1000) * 1e-6f;
	}
	printf("params %zu, bins %u, moved %.3f, runs %u (median), fp32 bytes %.1f MB\n\n", n, bins, moved,
	       runs, n * 4 / 1e6);
	printf("%-36s %12s %12s %10s\n", "case", "encode MB/s", "decode MB/s", "ratio");
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]) + 1; c++) {
		double te[64], td[64], ratio = 0;
		const char *name = c < 4 ? cases[c].name : "zstd -1 on fp32 bytes";
		for (r = 0; r < runs && r < 64; r++) {
			double t0;
			if (c < 4) {
				/* an encoder reuses its working memory across calls */
				rckpt_istream_opts_t o = { cases[c].stages, cases[c].policy, 1, &scratch, 0, 0 };
				rckpt_buf_t b = RCKPT_BUF_INIT;
				rckpt_reader_t rd;
				t0 = rckpt_now_s();
				if (rckpt_istream_encode(&b, cur, n, bins + 2, prev, bins + 2, &o))
					return 1;
				te[r] = rckpt_now_s() - t0;
				rd = rckpt_reader(b.p, b.len);
				t0 = rckpt_now_s();
				if (rckpt_istream_decode(back, n, bins + 2, prev, bins + 2, &rd) ||
				    memcmp(back, cur, n))
					return 1;
				td[r] = rckpt_now_s() - t0;
				ratio = (double)n * 4 / (double)b.len;
				rckpt_buf_free(&b);
			} else {
				size_t cap = ZSTD_compressBound(n * 4), z;
				void *dst = malloc(cap);
				t0 = rckpt_now_s();
				z = ZSTD_compress(dst, cap, f32, n * 4, 1);
				te[r] = rckpt_now_s() - t0;
				t0 = rckpt_now_s();
				ZSTD_decompress(f32, n * 4, dst, z);
				td[r] = rckpt_now_s() - t0;
				ratio = (double)n * 4 / (double)z;
				free(dst);
			}
		}
		qsort(te, r, sizeof(double), cmp_double);
		qsort(td, r, sizeof(double), cmp_double);
		printf("%-36s %12.0f %12.0f %10.1f\n", name, n * 4 / te[r / 2] / 1e6, n * 4 / td[r / 2] / 1e6,
		       ratio);
		printf("csv:%s,%zu,%u,%.3f,%.1f,%.1f,%.2f\n", name, n, bins, moved, n * 4 / te[r / 2] / 1e6,
		       n * 4 / td[r / 2] / 1e6, ratio);
	}
	printf("\nreproduce: %s --params %zu --bins %u --moved %g --runs %u\n", argv[0], n, bins, moved, runs);
	return 0;
}
