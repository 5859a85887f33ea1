/*
 * bench_fold.c — the rckpt class's `materialize` and `compact` bodies on one
 * core, in this process, with no cluster: the fold the OSD runs, measured
 * without the OSD's op queue and messenger around it, so that a profiler
 * (perf, callgrind) sees only the fold.
 *
 * A base and L deltas of real checkpoints (DIR/step-*.safetensors, as
 * bench_store reads them) are saved with the writer's defaults into an
 * in-memory pool that runs the real method bodies (tests/common/mem_io.c).
 * Then `materialize` of the newest step is called on the largest chunk,
 * --reps times after one warm-up call, and the chain is compacted.
 *
 * Prints fp32 GB/s folded (elements x 4 bytes x (L + 1) records per
 * second), the median and min-max of the calls, and a CRC-32C of the
 * reply, so that a change to the fold can be shown to give the same bytes.
 *
 * usage: bench_fold [--chain L] [--reps N] [--chunk-mi M] DIR
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem_io.h"
#include "rckpt.h"
#include "rckpt_clock.h" /* rckpt_now_s */
#include "rckpt_crc32c.h"
#include "rckpt_internal.h" /* rckpt_set_io */
#include "rckpt_manifest.h"
#include "rckpt_safetensors.h"
#include "rckpt_store_wire.h"

#define MAX_REPS 1000

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_fold: %s: %s\n", what, rckpt_strerror(rc));
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Loads the first `want` checkpoints of dir (its siblings skipped). */
static unsigned load(rckpt_st_t *st, rckpt_tensor_t **t, const char *dir, unsigned want)
{
	glob_t g;
	char pat[4096], err[256];
	size_t i;
	unsigned k = 0, j, d;

	snprintf(pat, sizeof(pat), "%s/step-*.safetensors", dir);
	if (glob(pat, 0, NULL, &g) != 0)
		die("no step-*.safetensors in DIR", -ENOENT);
	for (i = 0; i < g.gl_pathc && k < want; i++) {
		if (strstr(g.gl_pathv[i], ".grads.") || strstr(g.gl_pathv[i], ".gmean.") ||
		    strstr(g.gl_pathv[i], ".optim."))
			continue;
		if (rckpt_st_read(&st[k], g.gl_pathv[i], err, sizeof(err))) {
			fprintf(stderr, "bench_fold: %s: %s\n", g.gl_pathv[i], err);
			exit(1);
		}
		t[k] = calloc(st[k].set.ntensors, sizeof(rckpt_tensor_t));
		for (j = 0; j < st[k].set.ntensors; j++) {
			rckpt_tensor_t *x = &t[k][j];
			x->name = st[k].set.t[j].name;
			x->dtype = st[k].set.t[j].dtype;
			x->ndim = st[k].set.t[j].ndim;
			for (d = 0; d < x->ndim; d++)
				x->shape[d] = st[k].set.t[j].shape[d];
			x->data = st[k].set.t[j].data;
		}
		k++;
	}
	globfree(&g);
	return k;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "chain", 1, 0, 'L' }, { "reps", 1, 0, 'r' },
					    { "chunk-mi", 1, 0, 'm' }, { "help", 0, 0, 'h' },
					    { 0, 0, 0, 0 } };
	unsigned L = 16, reps = 30, n, i;
	double chunk_mi = 0, t[MAX_REPS];
	rckpt_st_t *st;
	rckpt_tensor_t **ten;
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *j;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_io_t *io;
	rckpt_manifest_t mf;
	rckpt_buf_t in = RCKPT_BUF_INIT, out = RCKPT_BUF_INIT, mb = RCKPT_BUF_INIT;
	rckpt_msg_materialize_t q = { 0, 0, { NULL, 0 } };
	char oid[64];
	uint64_t elems;
	uint32_t hash = 0;
	uint32_t c, best = 0;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "L:r:m:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'L': L = (unsigned)atoi(optarg); break;
		case 'r': reps = (unsigned)atoi(optarg); break;
		case 'm': chunk_mi = atof(optarg); break;
		default:
			printf("usage: bench_fold [--chain L (deltas, default 16)] [--reps N (default 30)]\n"
			       "                  [--chunk-mi M (Mi parameters a chunk; default: the writer's)] DIR\n"
			       "DIR holds step-*.safetensors (bench/data/make_checkpoints.py); L + 1 of them are used.\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind != argc - 1 || L < 1 || L > 4000 || reps < 1 || reps > MAX_REPS) {
		fprintf(stderr, "bench_fold: needs DIR, 1 <= L <= 4000, 1 <= reps <= %d; try --help\n", MAX_REPS);
		return 2;
	}
	st = calloc(L + 1, sizeof(*st));
	ten = calloc(L + 1, sizeof(*ten));
	if (st == NULL || ten == NULL)
		die("memory", -ENOMEM);
	n = load(st, ten, argv[optind], L + 1);
	if (n < L + 1) {
		fprintf(stderr, "bench_fold: %s has %u checkpoints, a chain of %u needs %u\n", argv[optind], n, L,
			L + 1);
		return 1;
	}
	if ((rc = mem_pool_create(&pool)) || (rc = rckpt_create(&h)) ||
	    (rc = rckpt_set_io(h, mem_pool_open, pool, "mem")))
		die("in-memory pool", rc);
	o.writer = 1;
	if (chunk_mi > 0)
		o.chunk_params = (uint64_t)(chunk_mi * 1048576.0);
	if ((rc = rckpt_job_open(h, &j, "fold", &o)))
		die(rckpt_errmsg(h), rc);
	for (i = 0; i <= L; i++)
		if ((rc = rckpt_job_save(j, i + 1, ten[i], st[i].set.ntensors, NULL, 0, NULL)))
			die(rckpt_errmsg(h), rc);
	if ((rc = mem_pool_open(pool, "fold", &io)))
		die("open", rc);
	rckpt_store_manifest_oid(oid, sizeof(oid), L + 1);
	{
		uint64_t size = 0;
		if ((rc = io->ops->stat(io, oid, &size)) || (rc = rckpt_buf_reserve(&mb, (size_t)size + 1)))
			die("manifest", rc);
		if ((rc = io->ops->read(io, oid, mb.p, (size_t)size, 0)) < 0)
			die("manifest", rc);
		mb.len = (size_t)rc;
		if ((rc = rckpt_manifest_decode(&mf, mb.p, mb.len)))
			die("manifest", rc);
	}
	for (c = 1; c < mf.nchunks; c++)
		if (mf.chunk[c].elements > mf.chunk[best].elements)
			best = c;
	elems = mf.chunk[best].elements;
	rckpt_store_chunk_oid(oid, sizeof(oid), best);
	q.step = L + 1;
	rckpt_msg_materialize_encode(&in, &q);
	for (i = 0; i <= reps; i++) { /* call 0 warms up */
		double t0 = rckpt_now_s();
		out.len = 0;
		if ((rc = io->ops->exec(io, oid, "rckpt", "materialize", in.p, in.len, &out)))
			die("materialize", rc);
		if (i)
			t[i - 1] = rckpt_now_s() - t0;
		else
			hash = rckpt_crc32c(0, out.p, out.len);
		if (rckpt_crc32c(0, out.p, out.len) != hash)
			die("materialize gave different bytes on the same chain", -EIO);
	}
	qsort(t, reps, sizeof(*t), cmp_double);
	printf("bench_fold: chunk %u of %u, %" PRIu64 " elements, a base and %u deltas, %u calls\n", best,
	       mf.nchunks, elems, L, reps);
	printf("materialize: %.3f ms median [%.3f, %.3f]; %.3f GB/s of fp32 folded; reply %zu B, crc32c %08" PRIx32
	       "\n",
	       t[reps / 2] * 1e3, t[0] * 1e3, t[reps - 1] * 1e3, elems * 4.0 * (L + 1) / t[reps / 2] / 1e9, out.len,
	       hash);
	printf("csv:fold,%u,%" PRIu64 ",%.6f,%.6f,%.6f,%08" PRIx32 "\n", L, elems, t[reps / 2], t[0], t[reps - 1],
	       hash);
	rckpt_manifest_free(&mf);
	rckpt_buf_free(&in);
	rckpt_buf_free(&out);
	rckpt_buf_free(&mb);
	io->ops->close(io);
	rckpt_job_close(j);
	rckpt_destroy(h);
	mem_pool_destroy(pool);
	for (i = 0; i <= L; i++) {
		free(ten[i]);
		rckpt_st_free(&st[i]);
	}
	free(ten);
	free(st);
	return 0;
}
