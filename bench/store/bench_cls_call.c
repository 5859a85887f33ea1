/*
 * bench_cls_call.c — what an object-class call costs next to a plain RADOS
 * operation on the same cluster: the floor under every cls method rckpt
 * adds. Interleaves `version` calls of both plugins with rados_stat of the
 * same object, so the machine's noise hits all three alike, and reports
 * medians, spread, and ratios to stat.
 *
 * usage: bench_cls_call [--conf PATH] [--pool NAME] [--iters N] [--warmup N]
 * Output: a table, then one CSV line per case, then the command line.
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "rckpt.h"
#include "rckpt_clock.h" /* rckpt_now_s */

#define OID "rckpt.probe"

static double now_us(void)
{
	return rckpt_now_s() * 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
	return v[(int)(p * (n - 1) + 0.5)];
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "conf", required_argument, NULL, 'c' }, { "pool", required_argument, NULL, 'p' },
		{ "iters", required_argument, NULL, 'n' }, { "warmup", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },       { NULL, 0, NULL, 0 },
	};
	const char *conf = NULL, *pool = "rckpt";
	const char *names[3] = { "rados_stat", "cls rckpt.version", "cls pcr.version" };
	int iters = 2000, warmup = 100, c, i, k, rc;
	rados_t cl;
	rados_ioctx_t io;
	double *t[3], med[3];
	char out[1024];

	while ((c = getopt_long(argc, argv, "c:p:n:w:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': conf = optarg; break;
		case 'p': pool = optarg; break;
		case 'n': iters = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		case 'h':
			printf("usage: %s [--conf PATH] [--pool NAME] [--iters N] [--warmup N]\n"
			       "Median latency of object-class calls against rados_stat, side by side.\n",
			       argv[0]);
			return 0;
		default: fprintf(stderr, "%s: bad usage; try --help\n", argv[0]); return 2;
		}
	}
	if (iters < 10 || warmup < 0) {
		fprintf(stderr, "%s: --iters must be >= 10, --warmup >= 0\n", argv[0]);
		return 2;
	}
	if ((rc = rados_create(&cl, NULL)) || (rc = rados_conf_read_file(cl, conf)) ||
	    (rc = rados_connect(cl)) || (rc = rados_ioctx_create(cl, pool, &io))) {
		fprintf(stderr, "%s: cannot reach pool '%s': %s\n", argv[0], pool, rckpt_strerror(rc));
		return 1;
	}
	rados_write_full(io, OID, "", 0);
	for (k = 0; k < 3; k++)
		t[k] = malloc(sizeof(double) * (size_t)iters);
	for (i = -warmup; i < iters; i++) {
		for (k = 0; k < 3; k++) {
			uint64_t sz;
			double t0 = now_us();
			if (k == 0)
				rc = rados_stat(io, OID, &sz, NULL);
			else
				rc = rados_exec(io, OID, k == 1 ? "rckpt" : "pcr", "version", NULL, 0, out,
						sizeof(out));
			if (rc < 0) {
				fprintf(stderr, "%s: %s failed: %s\n", argv[0], names[k], rckpt_strerror(rc));
				return 1;
			}
			if (i >= 0)
				t[k][i] = now_us() - t0;
		}
	}
	printf("%-20s %10s %10s %10s %12s\n", "operation", "median us", "p10 us", "p90 us", "vs stat");
	for (k = 0; k < 3; k++) {
		qsort(t[k], (size_t)iters, sizeof(double), cmp_double);
		med[k] = pct(t[k], iters, 0.5);
		printf("%-20s %10.1f %10.1f %10.1f %11.2fx\n", names[k], med[k], pct(t[k], iters, 0.1),
		       pct(t[k], iters, 0.9), med[k] / med[0]);
	}
	printf("\ncsv:operation,iters,median_us,p10_us,p90_us,ratio_to_stat\n");
	for (k = 0; k < 3; k++)
		printf("csv:%s,%d,%.1f,%.1f,%.1f,%.3f\n", names[k], iters, med[k], pct(t[k], iters, 0.1),
		       pct(t[k], iters, 0.9), med[k] / med[0]);
	printf("\nreproduce: %s --pool %s --iters %d --warmup %d%s%s\n", argv[0], pool, iters, warmup,
	       conf ? " --conf " : "", conf ? conf : "");
	for (k = 0; k < 3; k++)
		free(t[k]);
	rados_ioctx_destroy(io);
	rados_shutdown(cl);
	return 0;
}
