/*
 * bench_gpu.c — rckpt's GPU quantization on the device machine: time per
 * stage and end to end for N fp32 parameters (seeded normal values and
 * gradients), effective GB/s of fp32 input, and the bytes each pass moves
 * as a fraction of a device-to-device copy's bandwidth measured in the same
 * run. Side by side, on the same data in the same run: thresholds by
 * sorting (what torch.quantile and CuPy's quantile do) against the
 * histogram's; a straightforward GPU k-means (Lloyd) on the raw values
 * against the weighted k-means on the histogram; and the CPU path (the
 * reference code) on this machine's cores.
 *
 * Medians of --reps runs after a warm-up; one CSV line per measurement
 * (prefix "csv,") besides the table.
 *
 * usage: bench_gpu [--sizes 10M,100M,1G] [--reps R] [--threads T] [--no-cpu]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rckpt_codec.h"
#include "rckpt_gpu.h"
#include "rckpt_gpuenc.h"
#include "rckpt_kmeans.h"
#include "rckpt_quant.h"
#include "rckpt_sketch.h"
#include "rckpt_clock.h" /* rckpt_now_s */

size_t bench_sort_temp_bytes(uint64_t n);
int bench_sort_quantiles(float *out, const float *d_w, uint64_t n, const double *q, unsigned nq, void *d_temp,
			 size_t temp_bytes, void *stream);
int bench_kmeans_raw(float *centroids, const float *d_w, uint64_t n, unsigned k, unsigned iters, void *d_temp,
		     void *stream);
size_t bench_kmeans_temp_bytes(unsigned k);

#define MAXREPS 31

static void *stream;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *t, unsigned n)
{
	qsort(t, n, sizeof(*t), cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_gpu: %s failed: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

#define CK(what, call)                                                                                                 \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_)                                                                                               \
			die(what, rc_);                                                                                \
	} while (0)

static void *dmalloc(size_t b)
{
	void *d;
	CK("cudaMalloc", rckpt_gpu_malloc(&d, b ? b : 16));
	return d;
}

static uint64_t rng = 0x853c49e6748fea9bull;
static double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) * 0x1.0p-53;
}

/* ---- the CPU path, sliced over threads ---- */

typedef struct cpu_job {
	const float *w, *g;
	size_t n;
	const rckpt_qparams_t *q;
	uint8_t *idx;
	uint16_t *prot;
	size_t nprot;
	rckpt_sketch_t sv, ss;
	int stage; /* 0 sketch, 1 quantize */
} cpu_job_t;

static void *cpu_run(void *arg)
{
	cpu_job_t *j = arg;
	if (j->stage == 0) {
		rckpt_sketch_add(&j->sv, j->w, j->n);
		if (j->g)
			rckpt_sketch_add_abs_prod(&j->ss, j->w, j->g, j->n);
	} else {
		rckpt_quantize(j->idx, j->prot, &j->nprot, j->w, j->g, j->n, j->q);
	}
	return NULL;
}

/* Sketch (stage 0) or quantize (stage 1) of n values on T threads; the
 * slices' protected values concatenated are the whole's. */
static void cpu_stage(int stage, unsigned T, const float *w, const float *g, size_t n, const rckpt_qparams_t *q,
		      uint8_t *idx, uint16_t *prot)
{
	pthread_t th[256];
	cpu_job_t *j = calloc(T, sizeof(*j));
	size_t per = (n + T - 1) / T, np = 0;
	unsigned t;
	for (t = 0; t < T; t++) {
		size_t a = t * per < n ? t * per : n, b = a + per < n ? a + per : n;
		j[t] = (cpu_job_t){ w + a, g ? g + a : NULL, b - a, q, idx + a, prot + a, 0, { 0 }, { 0 }, stage };
		if (stage == 0) {
			rckpt_sketch_init(&j[t].sv, 6);
			rckpt_sketch_init(&j[t].ss, 6);
		}
		pthread_create(&th[t], NULL, cpu_run, &j[t]);
	}
	for (t = 0; t < T; t++) {
		pthread_join(th[t], NULL);
		if (stage == 1) {
			memmove(prot + np, j[t].prot, 2 * j[t].nprot);
			np += j[t].nprot;
		} else {
			rckpt_sketch_free(&j[t].sv);
			rckpt_sketch_free(&j[t].ss);
		}
	}
	free(j);
}

/* ---- one size ---- */

typedef struct timing {
	double t[MAXREPS];
	unsigned n;
} timing_t;

static void put(timing_t *tm, double s)
{
	if (tm->n < MAXREPS)
		tm->t[tm->n++] = s;
}

static void report(const char *stage, uint64_t n, double sec, double bytes, double copy_bw, const char *note)
{
	printf("  %-38s %10.3f ms  %8.1f GB/s fp32-in  %6.1f%% of copy  %s\n", stage, sec * 1e3,
	       4.0 * (double)n / sec / 1e9, bytes > 0 ? 100.0 * bytes / sec / copy_bw : 0.0, note);
	printf("csv,%llu,%s,%.6f,%.3f,%.4f\n", (unsigned long long)n, stage, sec * 1e3,
	       4.0 * (double)n / sec / 1e9, bytes > 0 ? bytes / sec / copy_bw : 0.0);
}

static void run_size(uint64_t n, unsigned reps, unsigned threads, int do_cpu)
{
	const size_t hl = rckpt_gpu_sketch_hist_len(6);
	float *w = malloc(4 * n), *g = malloc(4 * n);
	uint8_t *idx = malloc(n), *cidx = malloc(n);
	uint16_t *prot = malloc(2 * n), *cprot = malloc(2 * n);
	float *dw, *dg, *dcopy, *df;
	uint8_t *didx, *dprev;
	uint16_t *dprot;
	uint64_t *dh, *dsmall, np = 0, bad;
	double *dsum, copy_bw;
	void *dtemp;
	size_t tbytes, sortb;
	timing_t tcopy = { { 0 }, 0 }, tsk = { { 0 }, 0 }, tskg = { { 0 }, 0 }, tbd = { { 0 }, 0 }, tkm = { { 0 }, 0 },
		 tq = { { 0 }, 0 }, tqg = { { 0 }, 0 }, tdq = { { 0 }, 0 }, terr = { { 0 }, 0 }, tdel = { { 0 }, 0 },
		 tdist = { { 0 }, 0 }, tsort = { { 0 }, 0 }, traw = { { 0 }, 0 }, te2e = { { 0 }, 0 };
	rckpt_tensor_prep_t p;
	rckpt_qconfig_t c;
	rckpt_qparams_t q;
	rckpt_gpu_qparams_t gq;
	static const double qs[] = { 0.1, 0.995 };
	float bounds[4], sortq[2];
	unsigned r;
	size_t i;

	if (!w || !g || !idx || !cidx || !prot || !cprot)
		die("malloc", -ENOMEM);
	for (i = 0; i < n; i++) { /* normal weights, gradients a thousandth of them */
		double u = urand() + 1e-300, v = urand();
		w[i] = (float)(0.02 * sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
		g[i] = (float)fabs(1e-3 * sqrt(-2 * log(u)) * sin(6.283185307179586 * v));
	}
	tbytes = rckpt_gpu_quantize_temp_bytes(n);
	if (rckpt_gpu_qerr_temp_bytes(n) > tbytes)
		tbytes = rckpt_gpu_qerr_temp_bytes(n);
	if (rckpt_gpu_delta_temp_bytes(n) > tbytes)
		tbytes = rckpt_gpu_delta_temp_bytes(n);
	sortb = bench_sort_temp_bytes(n);
	dw = dmalloc(4 * n), dg = dmalloc(4 * n), dcopy = dmalloc(4 * n);
	didx = dmalloc(n), dprev = dmalloc(n), dprot = dmalloc(2 * n);
	dh = dmalloc(16 * hl), dsmall = dmalloc(64), dsum = dmalloc(16), df = NULL;
	dtemp = dmalloc(tbytes > sortb ? tbytes : sortb);
	CK("copy in", rckpt_gpu_memcpy(dw, w, 4 * n, 0, stream));
	CK("copy in", rckpt_gpu_memcpy(dg, g, 4 * n, 0, stream));
	CK("sync", rckpt_gpu_stream_sync(stream));
	rckpt_qconfig_default(&c);
	c.bins = 16;

	for (r = 0; r <= reps; r++) { /* run 0 warms up */
		double t0, t1, tk;
		const int keep = r > 0;
		/* device-to-device copy: the bandwidth yardstick */
		t0 = rckpt_now_s();
		CK("d2d", rckpt_gpu_memcpy(dcopy, dw, 4 * n, 2, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&tcopy, rckpt_now_s() - t0);
		/* sketch of values alone, then with sensitivities */
		t0 = rckpt_now_s();
		CK("sketch", rckpt_gpu_sketch(dh, NULL, dsmall, dw, RCKPT_DT_F32, NULL, n, 6, NULL, 0, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&tsk, rckpt_now_s() - t0);
		t0 = rckpt_now_s();
		CK("sketch", rckpt_gpu_sketch(dh, dh + hl, dsmall, dw, RCKPT_DT_F32, dg, n, 6, NULL, 0, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&tskg, rckpt_now_s() - t0);
		/* thresholds from the histogram, on the device */
		t0 = rckpt_now_s();
		CK("bounds", rckpt_gpu_abs_bounds((float *)dsum, dh, 6, n, qs, 2, NULL, 0, stream));
		CK("bounds", rckpt_gpu_memcpy(bounds, dsum, 16, 1, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&tbd, rckpt_now_s() - t0);
		/* histogram to the host, the codec's thresholds and k-means */
		t0 = rckpt_now_s();
		CK("prep", rckpt_codec_prep_begin(&p, RCKPT_DT_F32, n, g, RCKPT_LK_LINEAR));
		CK("hist", rckpt_gpu_memcpy(p.value.neg, dh, 8 * hl, 1, stream));
		CK("hist", rckpt_gpu_memcpy(p.sens.neg, dh + hl, 8 * hl, 1, stream));
		CK("hist", rckpt_gpu_memcpy(&bad, dsmall, 8, 1, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		rckpt_sketch_adopt_counts(&p.value, n);
		rckpt_sketch_adopt_counts(&p.sens, n);
		CK("views", rckpt_codec_prep_end(&p));
		CK("qparams", rckpt_codec_qparams(&q, &p, &c, RCKPT_QUANTIZER_KMEANS, NULL, NULL));
		tk = rckpt_now_s() - t0;
		if (keep)
			put(&tkm, tk);
		rckpt_codec_prep_free(&p);
		rckpt_gpu_qparams_make(&gq, &q);
		/* bin assignment */
		t0 = rckpt_now_s();
		CK("quantize", rckpt_gpu_quantize(didx, dprot, dsmall, dw, RCKPT_DT_F32, NULL, n, &gq, dtemp, tbytes, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		t1 = rckpt_now_s();
		if (keep)
			put(&tq, t1 - t0);
		/* end to end, no gradients: sketch + bounds + host k-means + quantize */
		if (keep)
			put(&te2e, tsk.t[tsk.n - 1] + tkm.t[tkm.n - 1] + (t1 - t0));
		t0 = rckpt_now_s();
		CK("quantize", rckpt_gpu_quantize(didx, dprot, dsmall, dw, RCKPT_DT_F32, dg, n, &gq, dtemp, tbytes, stream));
		CK("nprot", rckpt_gpu_memcpy(&np, dsmall, 8, 1, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&tqg, rckpt_now_s() - t0);
		/* dequantize (restore) */
		if (df == NULL)
			df = dcopy;
		t0 = rckpt_now_s();
		CK("dequantize", rckpt_gpu_dequantize(df, RCKPT_DT_F32, (int *)(dsmall + 4), didx, n, &gq, dprot, np,
						      dtemp, tbytes, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&tdq, rckpt_now_s() - t0);
		/* quality sums */
		t0 = rckpt_now_s();
		CK("qerr", rckpt_gpu_qerr(dsum, dw, RCKPT_DT_F32, dg, n, &gq, dtemp, tbytes, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&terr, rckpt_now_s() - t0);
		/* delta against a previous step's levels, rearranged */
		if (r == 0) {
			CK("prev", rckpt_gpu_memcpy(dprev, didx, n, 2, stream));
			CK("sync", rckpt_gpu_stream_sync(stream));
		}
		t0 = rckpt_now_s();
		CK("delta", rckpt_gpu_delta((uint8_t *)dprot, (int *)(dsmall + 4), didx, q.nbins + 2,
					    dprev, q.nbins + 2, n, 1, dtemp, tbytes, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&tdel, rckpt_now_s() - t0);
		/* change distance, blocks of 64 Ki */
		t0 = rckpt_now_s();
		CK("dist", rckpt_gpu_block_dist((double *)dtemp, dw, RCKPT_DT_F32, dcopy, n, 65536, stream));
		CK("sync", rckpt_gpu_stream_sync(stream));
		if (keep)
			put(&tdist, rckpt_now_s() - t0);
		/* baselines */
		t0 = rckpt_now_s();
		if (bench_sort_quantiles(sortq, dw, n, qs, 2, dtemp, sortb, stream))
			die("sort baseline", -EIO);
		if (keep)
			put(&tsort, rckpt_now_s() - t0);
		{
			float cent[64];
			unsigned j;
			for (j = 0; j < 16; j++) /* evenly spaced over +-3 sigma */
				cent[j] = (float)(-0.06 + 0.12 * (j + 0.5) / 16);
			t0 = rckpt_now_s();
			if (bench_kmeans_raw(cent, dw, n, 16, 30, dtemp, stream))
				die("k-means baseline", -EIO);
			if (keep)
				put(&traw, rckpt_now_s() - t0);
		}
	}
	copy_bw = 8.0 * (double)n / median(tcopy.t, tcopy.n);
	printf("\n%llu fp32 parameters; device-to-device copy %.0f GB/s (read + write), %u runs, medians\n",
	       (unsigned long long)n, copy_bw / 1e9, reps);
	report("copy (yardstick)", n, 8.0 * n / copy_bw, 8.0 * n, copy_bw, "");
	{
		const double sk = median(tsk.t, tsk.n), skg = median(tskg.t, tskg.n), bd = median(tbd.t, tbd.n),
			     km = median(tkm.t, tkm.n), qq = median(tq.t, tq.n), qg = median(tqg.t, tqg.n),
			     e2e = median(te2e.t, te2e.n), so = median(tsort.t, tsort.n), rw = median(traw.t, traw.n);
		char note[160];
		report("sketch |w|", n, sk, 4.0 * n, copy_bw, "reads w");
		report("sketch |w| and |w g|", n, skg, 8.0 * n, copy_bw, "reads w, g");
		report("thresholds from histogram (device)", n, bd, 0, copy_bw, "");
		report("histogram to host + k-means (host)", n, km, 0, copy_bw, "520 KB over PCIe");
		report("quantize", n, qq, 5.0 * n, copy_bw, "reads w, writes levels");
		report("quantize with sensitivities", n, qg, 9.0 * n, copy_bw, "reads w, g");
		report("dequantize", n, median(tdq.t, tdq.n), 5.0 * n, copy_bw, "reads levels, writes fp32");
		report("quality sums", n, median(terr.t, terr.n), 8.0 * n, copy_bw, "reads w, g");
		report("delta, rearranged", n, median(tdel.t, tdel.n), 5.0 * n, copy_bw, "two passes over levels");
		report("change distance (64 Ki blocks)", n, median(tdist.t, tdist.n), 8.0 * n, copy_bw, "");
		snprintf(note, sizeof(note), "9 B/param moved");
		report("END TO END quantize (no gradients)", n, e2e, 9.0 * n, copy_bw, note);
		snprintf(note, sizeof(note), "sort: %.3f ms, ours %.3f ms: %.1fx", so * 1e3, (sk + bd) * 1e3, so / (sk + bd));
		report("thresholds by sort (baseline)", n, so, 0, copy_bw, note);
		snprintf(note, sizeof(note), "raw Lloyd: %.3f ms, histogram k-means %.3f ms: %.1fx", rw * 1e3, km * 1e3,
			 rw / km);
		report("k-means on raw values, 30 it (baseline)", n, rw, 0, copy_bw, note);
		printf("  thresholds: histogram [%g, %g) and [%g, %g); sort %g and %g\n", bounds[0], bounds[1], bounds[2],
		       bounds[3], sortq[0], sortq[1]);
		if (do_cpu) {
			double t0 = rckpt_now_s(), cs, cq, c1;
			cpu_stage(0, threads, w, g, n, &q, cidx, cprot);
			cs = rckpt_now_s() - t0;
			t0 = rckpt_now_s();
			cpu_stage(1, threads, w, g, n, &q, cidx, cprot);
			cq = rckpt_now_s() - t0;
			t0 = rckpt_now_s();
			cpu_stage(1, 1, w, g, n, &q, cidx, cprot);
			c1 = rckpt_now_s() - t0;
			snprintf(note, sizeof(note), "GPU %.0fx faster", cs / skg);
			report("CPU sketch |w|, |w g| (threads)", n, cs, 0, copy_bw, note);
			snprintf(note, sizeof(note), "GPU %.0fx faster", cq / qg);
			report("CPU quantize with sens. (threads)", n, cq, 0, copy_bw, note);
			snprintf(note, sizeof(note), "GPU %.0fx faster", c1 / qg);
			report("CPU quantize with sens. (1 thread)", n, c1, 0, copy_bw, note);
			/* and the GPU's levels are the CPU's */
			CK("levels", rckpt_gpu_memcpy(idx, didx, n, 1, stream));
			CK("sync", rckpt_gpu_stream_sync(stream));
			printf("  levels GPU == CPU: %s\n", memcmp(idx, cidx, n) == 0 ? "yes" : "NO");
		}
	}
	rckpt_gpu_free(dw), rckpt_gpu_free(dg), rckpt_gpu_free(dcopy), rckpt_gpu_free(didx), rckpt_gpu_free(dprev);
	rckpt_gpu_free(dprot), rckpt_gpu_free(dh), rckpt_gpu_free(dsmall), rckpt_gpu_free(dsum), rckpt_gpu_free(dtemp);
	free(w), free(g), free(idx), free(cidx), free(prot), free(cprot);
}

static uint64_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (*end == 'K' || *end == 'k')
		v *= 1e3;
	else if (*end == 'M' || *end == 'm')
		v *= 1e6;
	else if (*end == 'G' || *end == 'g' || *end == 'B' || *end == 'b')
		v *= 1e9;
	return (uint64_t)v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "sizes", 1, 0, 's' }, { "reps", 1, 0, 'r' }, { "threads", 1, 0, 't' },
					    { "no-cpu", 0, 0, 'n' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	char sizes[256] = "10M,100M,1G", *tok, *save;
	unsigned reps = 5, threads = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	int do_cpu = 1, opt;
	rckpt_gpu_probe_t pr;

	setvbuf(stdout, NULL, _IOLBF, 0); /* each figure out as it is made: a run cut short keeps them */

	while ((opt = getopt_long(argc, argv, "s:r:t:nh", lo, NULL)) != -1) {
		switch (opt) {
		case 's':
			snprintf(sizes, sizeof(sizes), "%s", optarg);
			break;
		case 'r':
			reps = (unsigned)atoi(optarg);
			break;
		case 't':
			threads = (unsigned)atoi(optarg);
			break;
		case 'n':
			do_cpu = 0;
			break;
		case 'h':
			printf("usage: bench_gpu [--sizes 10M,100M,1G] [--reps R] [--threads T] [--no-cpu]\n"
			       "GPU quantization stages per size, against a device-to-device copy, sort-based\n"
			       "thresholds, k-means on raw values and the CPU path, in one run.\n");
			return 0;
		default:
			fprintf(stderr, "bench_gpu: see --help\n");
			return 2;
		}
	}
	if (reps < 1 || reps > MAXREPS - 1 || threads < 1 || threads > 256) {
		fprintf(stderr, "bench_gpu: --reps 1..%d, --threads 1..256\n", MAXREPS - 1);
		return 2;
	}
	rckpt_gpu_probe(&pr);
	if (!pr.built_with_cuda || pr.device_count == 0) {
		printf("bench_gpu: skipped: %s\n", pr.built_with_cuda ? "no CUDA device" : "built without CUDA");
		return 0;
	}
	printf("device: %s, %d SMs, %zu MiB; CPU threads: %u\n", pr.device_name, pr.sm_count, pr.total_mem >> 20,
	       threads);
	printf("command: bench_gpu --sizes %s --reps %u --threads %u%s\n", sizes, reps, threads, do_cpu ? "" : " --no-cpu");
	CK("stream", rckpt_gpu_stream_create(&stream));
	for (tok = strtok_r(sizes, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t n = parse_size(tok);
		if (n == 0) {
			fprintf(stderr, "bench_gpu: bad size '%s'\n", tok);
			return 2;
		}
		run_size(n, reps, threads, do_cpu);
	}
	rckpt_gpu_stream_destroy(stream);
	return 0;
}
