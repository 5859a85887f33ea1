/*
 * test_group_mpi.c — group saves (issue 27) with p ranks under mpirun,
 * against the local cluster, over the MPI transport (librckpt_mpi). Each
 * rank holds a ZeRO-3 slice of every tensor of a model (a contiguous range
 * of each flattened tensor); the group saves five steps, in parallel.
 * Then every rank restores its own slice of every tensor (only the chunks
 * that hold it) and rank 0 the whole step in one process: each slice is
 * bit for bit the whole step's, every tensor within the codec's error of
 * the source, the norm its bf16 exactly; the later steps are deltas. A
 * second group on the same job is refused on every rank. Then the job is
 * saved by the first half of the ranks alone (a smaller world): the next
 * step is a delta and restores.
 *
 *   mpirun -np 4 test_group_mpi      (CEPH_CONF)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rckpt.h"

#define NT 4
#define STEPS 5

static int rank, size;

#include "mpi_test.h"
#include "bf16_round.h"

static const char *const names[NT] = { "blocks.0.weight", "blocks.1.weight", "embed.weight", "norm.weight" };
static const unsigned ndims[NT] = { 2, 2, 2, 1 };
static const uint64_t shapes[NT][2] = { { 512, 384 }, { 384, 512 }, { 1000, 96 }, { 384, 0 } };

static uint64_t numel(unsigned t)
{
	return ndims[t] == 1 ? shapes[t][0] : shapes[t][0] * shapes[t][1];
}

/* Element i of tensor t at step s. */
static float value(unsigned t, uint64_t i, unsigned s)
{
	uint32_t h = (uint32_t)(i * 2654435761u) ^ (t * 40503u) ^ (s * 0x9e3779b9u);
	if (t == 3)
		return 1.0f + 0.0005f * (float)i + 0.0001f * (float)s;
	return (float)(0.04 * sin(0.002 * (double)i + 0.3 * t + 0.02 * s) + 0.002 * ((double)(h >> 16) / 65536.0 - 0.5));
}

static void slice_of(unsigned t, int r, int p, uint64_t *a, uint64_t *b)
{
	const uint64_t n = numel(t), each = (n + p - 1) / p;
	*a = (uint64_t)r * each < n ? (uint64_t)r * each : n;
	*b = (uint64_t)(r + 1) * each < n ? (uint64_t)(r + 1) * each : n;
}

/* This rank's slices of step s, saved by the group of comm's ranks. */
static int save_step(rckpt_group_t *g, unsigned s, int r, int p)
{
	rckpt_shard_t sh[NT];
	float *buf[NT];
	unsigned t;
	int rc;
	for (t = 0; t < NT; t++) {
		uint64_t a, b, i;
		slice_of(t, r, p, &a, &b);
		buf[t] = malloc((b - a ? b - a : 1) * sizeof(float));
		CHECK(buf[t] != NULL, "out of memory");
		for (i = a; i < b; i++)
			buf[t][i - a] = value(t, i, s);
		sh[t] = (rckpt_shard_t){ names[t], RCKPT_F32, ndims[t], { shapes[t][0], shapes[t][1] }, a, b - a, buf[t] };
	}
	rc = rckpt_group_save(g, s, sh, NT, NULL);
	for (t = 0; t < NT; t++)
		free(buf[t]);
	return rc;
}

static void open_group(rckpt_t *h, rckpt_group_t **g, const char *job, MPI_Comm *comm)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_loc_transport_t tr;
	o.chunk_params = (uint64_t)1 << 16;
	o.compute = RCKPT_COMPUTE_CPU;
	CHECK(rckpt_loc_transport_mpi(comm, &tr) == 0, "transport");
	CHECK(rckpt_group_open(h, g, job, &o, &tr) == 0, "group open: %s", rckpt_errmsg(h));
}

int main(int argc, char **argv)
{
	const char *conf = getenv("CEPH_CONF");
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_group_t *g = NULL;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *whole = NULL;
	rckpt_step_info_t si[STEPS + 2];
	rckpt_t *h = NULL;
	MPI_Comm comm, half;
	char job[64];
	unsigned s, t, n = 0;
	int more = 0, bad = 0, all_bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (!conf || !*conf)
		return mpi_test_skip(rank, "needs CEPH_CONF");
	CHECK(size >= 2 && size <= 8, "run with 2..8 ranks (mpirun -np 4)");
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	co.timeout_s = 30;
	CHECK(rckpt_create(&h) == 0 && rckpt_connect(h, &co) == 0, "connect: %s", h ? rckpt_errmsg(h) : "");
	if (rank == 0)
		snprintf(job, sizeof(job), "grpmpi-%d", (int)getpid());
	MPI_Bcast(job, sizeof(job), MPI_CHAR, 0, MPI_COMM_WORLD);

	/* the group saves STEPS steps */
	open_group(h, &g, job, &comm);
	for (s = 1; s <= STEPS; s++)
		CHECK(save_step(g, s, rank, size) == 0, "step %u: %s", s, rckpt_errmsg(h));
	/* a second group is refused while the first holds the job */
	{
		rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
		rckpt_loc_transport_t tr;
		rckpt_group_t *g2 = NULL;
		MPI_Comm c2;
		int rc;
		MPI_Comm_dup(MPI_COMM_WORLD, &c2);
		CHECK(rckpt_loc_transport_mpi(&c2, &tr) == 0, "transport");
		rc = rckpt_group_open(h, &g2, job, &o, &tr);
		CHECK(rc == -EBUSY, "a second group: %d", rc);
		MPI_Comm_free(&c2);
	}
	rckpt_group_close(g);

	/* every rank restores its slices; rank 0 the whole step too */
	CHECK(rckpt_job_open(h, &j, job, NULL) == 0, "open: %s", rckpt_errmsg(h));
	CHECK(rckpt_job_restore(j, STEPS, &whole, NULL) == 0, "restore: %s", rckpt_errmsg(h));
	for (t = 0; t < NT; t++) {
		rckpt_range_t rg;
		rckpt_restored_t *mine = NULL;
		float *w = malloc(numel(t) * sizeof(float)), *got;
		uint64_t a, b, i;
		double num = 0, den = 0;
		int k;
		slice_of(t, rank, size, &a, &b);
		got = malloc((b - a ? b - a : 1) * sizeof(float));
		CHECK(w && got, "out of memory");
		k = rckpt_restored_find(whole, names[t]);
		CHECK(k >= 0 && rckpt_restored_read(whole, (unsigned)k, w, numel(t) * 4) == 0, "%s", names[t]);
		rg = (rckpt_range_t){ names[t], a, b - a };
		CHECK(rckpt_job_restore_ranges(j, STEPS, &rg, 1, &mine, NULL) == 0, "ranges: %s", rckpt_errmsg(h));
		k = rckpt_restored_find(mine, names[t]);
		CHECK(k >= 0 && rckpt_restored_read_range(mine, (unsigned)k, a, b - a, got) == 0, "%s", names[t]);
		bad += memcmp(got, w + a, (b - a) * sizeof(float)) != 0; /* the slice is the step's */
		for (i = 0; i < numel(t); i++) {
			float v = value(t, i, STEPS);
			if (t == 3) /* the norm: its bf16 */
				bf16_round(&v, 1);
			num += (w[i] - v) * ((double)w[i] - v);
			den += (double)v * v;
		}
		if (t == 3)
			CHECK(num == 0, "the norm is not its bf16");
		else
			CHECK(num / den < 0.01, "%s: relative error %g", names[t], num / den);
		rckpt_restored_free(mine);
		free(w);
		free(got);
	}
	rckpt_restored_free(whole);
	MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(all_bad == 0, "%d slices differ from the whole step", all_bad);
	CHECK(rckpt_job_steps(j, RCKPT_LATEST, si, STEPS + 2, &n, &more) == 0 && n == STEPS, "steps");
	for (s = 1; s < STEPS; s++)
		CHECK(si[s].parent == si[s - 1].step, "step %" PRIu64 " is not a delta", si[s].step);
	rckpt_job_close(j);

	/* half the ranks go on: their next step is a delta on the head */
	MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2 ? 0 : 1, rank, &half);
	if (rank < size / 2) {
		open_group(h, &g, job, &half);
		CHECK(save_step(g, STEPS + 1, rank, size / 2) == 0, "step %u on %d ranks: %s", STEPS + 1, size / 2,
		      rckpt_errmsg(h));
		rckpt_group_close(g);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		CHECK(rckpt_job_open(h, &j, job, NULL) == 0, "open");
		CHECK(rckpt_job_steps(j, RCKPT_LATEST, si, STEPS + 2, &n, &more) == 0 && n == STEPS + 1, "steps");
		CHECK(si[STEPS].parent == STEPS, "the smaller group's step is not a delta");
		CHECK(rckpt_job_restore(j, STEPS + 1, &whole, NULL) == 0, "restore: %s", rckpt_errmsg(h));
		rckpt_restored_free(whole);
		rckpt_job_close(j);
		rckpt_job_delete(h, job);
		printf("group saves under mpirun: %d ranks, %u steps, slices bit-identical, a delta on %d ranks\n",
		       size, STEPS, size / 2);
	}
	MPI_Comm_free(&half);
	MPI_Comm_free(&comm);
	rckpt_destroy(h);
	MPI_Finalize();
	return 0;
}
