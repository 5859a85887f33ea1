/*
 * test_loader_mpi.c — the locality-aware loader with p learners under
 * mpirun, against the local cluster. Rank 0 builds a PCR dataset of real
 * JPEGs; every learner then reads it for three epochs in the regular mode,
 * in the locality mode with caches that hold everything, and with caches
 * that hold a third of it. Checked, on rank 0, for every step: the
 * learners' local batches together are exactly the global batch (as a
 * multiset), and each image's bytes are the regular mode's; per epoch:
 * the bytes read from the cluster (none after the first epoch with whole
 * caches; only the samples no cache holds with partial ones).
 *
 *   mpirun -np 4 test_loader_mpi      (CEPH_CONF, RCKPT_TEST_PCR_DIR)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rckpt.h"

#define NIMG 240
#define LOCAL_BATCH 8
#define EPOCHS 3

static int rank, size;

#include "mpi_test.h"

static uint32_t fnv(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;
	while (n--)
		h = (h ^ *p++) * 16777619u;
	return h;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_u32(const void *a, const void *b)
{
	const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void build(rckpt_t *h, const char *dir, const char *name)
{
	rckpt_pcr_build_opts_t bo = RCKPT_PCR_BUILD_OPTS_INIT;
	rckpt_pcr_input_t in[NIMG];
	char *files[4096], paths[NIMG][512];
	unsigned nf = 0, i;
	struct dirent *e;
	DIR *d = opendir(dir);
	int rc;
	CHECK(d != NULL, "cannot open %s", dir);
	while ((e = readdir(d)) != NULL && nf < 4096)
		if (strstr(e->d_name, ".jpg"))
			files[nf++] = strdup(e->d_name);
	closedir(d);
	CHECK(nf >= NIMG, "%s has %u JPEGs", dir, nf);
	qsort(files, nf, sizeof(files[0]), cmp_name);
	for (i = 0; i < NIMG; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/%s", dir, files[i]);
		in[i] = (rckpt_pcr_input_t){ paths[i], NULL, files[i], strlen(files[i]) };
	}
	bo.images_per_record = 16;
	bo.threads = 1;
	rckpt_pcr_delete(h, name);
	rc = rckpt_pcr_build(h, name, in, NIMG, &bo, NULL);
	CHECK(rc == 0, "build: %s", rckpt_errmsg(h));
	for (i = 0; i < nf; i++)
		free(files[i]);
}

/* One epoch's steps: every learner's (id, hash) of each step go to rank
 * 0, which checks them against the global batch and `ref` (the regular
 * mode's hash per id; filled when ref_fill). */
static void run_epoch(rckpt_loader_t *l, uint64_t seed, uint64_t epoch, uint32_t *ref, int ref_fill)
{
	uint32_t steps, s, *perm = malloc(sizeof(*perm) * NIMG);
	const uint32_t G = (uint32_t)size * LOCAL_BATCH;
	int rc;
	CHECK(perm != NULL, "oom");
	rc = rckpt_loader_epoch(l, epoch, &steps);
	CHECK(rc == 0, "epoch");
	CHECK(steps == (NIMG + G - 1) / G, "%u steps", steps);
	CHECK(rckpt_loc_order(seed, epoch, NIMG, perm) == 0, "order");
	for (s = 0;; s++) {
		rckpt_pcr_batch_t *b = NULL;
		uint32_t mine[2 * LOCAL_BATCH], n, i;
		uint32_t all[2 * 4 * 16 * LOCAL_BATCH];
		int counts[64], displs[64], cnt;
		rc = rckpt_loader_next(l, &b);
		CHECK(rc == 0, "next: %d", rc);
		if (b == NULL)
			break;
		n = rckpt_pcr_batch_count(b);
		CHECK(n <= LOCAL_BATCH, "local batch of %u", n);
		for (i = 0; i < n; i++) {
			rckpt_pcr_image_t im;
			CHECK(rckpt_pcr_batch_image(b, i, &im) == 0, "image");
			mine[2 * i] = im.id;
			mine[2 * i + 1] = fnv(im.jpeg, im.jpeg_len);
			CHECK(im.label_len == strlen(im.name) && memcmp(im.label, im.name, im.label_len) == 0,
			      "label of %s", im.name);
		}
		rckpt_pcr_batch_free(b);
		cnt = (int)(2 * n);
		MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			int r, tot = 0;
			for (r = 0; r < size; r++) {
				displs[r] = tot;
				tot += counts[r];
			}
		}
		MPI_Gatherv(mine, cnt, MPI_UINT32_T, all, counts, displs, MPI_UINT32_T, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			const uint32_t g = NIMG - s * G < G ? NIMG - s * G : G;
			uint32_t got[4 * 16 * LOCAL_BATCH], want[4 * 16 * LOCAL_BATCH], tot = 0, k;
			int r;
			for (r = 0; r < size; r++) {
				/* the shares: g/p, the first g%p learners one more */
				CHECK((uint32_t)counts[r] / 2 == g / size + ((uint32_t)r < g % size),
				      "step %u: learner %d has %d", s, r, counts[r] / 2);
				tot += counts[r] / 2;
			}
			CHECK(tot == g, "step %u: %u samples, global batch %u", s, tot, g);
			for (k = 0; k < g; k++) {
				got[k] = all[2 * k];
				want[k] = perm[s * G + k];
				if (ref_fill)
					ref[all[2 * k]] = all[2 * k + 1];
				else
					CHECK(ref[all[2 * k]] == all[2 * k + 1], "image %u: other bytes", all[2 * k]);
			}
			qsort(got, g, sizeof(got[0]), cmp_u32);
			qsort(want, g, sizeof(want[0]), cmp_u32);
			CHECK(memcmp(got, want, g * sizeof(got[0])) == 0, "step %u: not the global batch", s);
		}
	}
	CHECK(s == steps, "%u steps of %u", s, steps);
	free(perm);
}

/* Sums a stat over the learners (on every rank). */
static uint64_t total(uint64_t v)
{
	uint64_t t = 0;
	MPI_Allreduce(&v, &t, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	return t;
}

int main(int argc, char **argv)
{
	const char *conf = getenv("CEPH_CONF"), *dir = getenv("RCKPT_TEST_PCR_DIR");
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	static uint32_t ref[NIMG];
	char name[64];
	uint64_t seed = 2026, per_epoch[3][EPOCHS];
	rckpt_t *h = NULL;
	MPI_Comm comm;
	int mode, rc;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (!conf || !*conf || !dir || access(dir, R_OK))
		return mpi_test_skip(rank, "needs CEPH_CONF and RCKPT_TEST_PCR_DIR");
	CHECK(size >= 2 && size <= 16, "run with 2..16 learners (mpirun -np 4)");
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	co.timeout_s = 30;
	CHECK(rckpt_create(&h) == 0 && rckpt_connect(h, &co) == 0, "connect: %s", h ? rckpt_errmsg(h) : "");
	/* the dataset, named by rank 0 for everybody */
	if (rank == 0) {
		snprintf(name, sizeof(name), "loc-%d", (int)getpid());
		build(h, dir, name);
	}
	MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, MPI_COMM_WORLD);

	for (mode = 0; mode < 3; mode++) {
		rckpt_loader_opts_t o = RCKPT_LOADER_OPTS_INIT;
		rckpt_loc_transport_t tr;
		rckpt_loader_stats_t st, prev;
		rckpt_loader_t *l = NULL;
		uint64_t e, cached;
		CHECK(rckpt_loc_transport_mpi(&comm, &tr) == 0, "transport");
		CHECK(tr.rank == (unsigned)rank && tr.size == (unsigned)size, "transport rank");
		o.mode = mode ? RCKPT_LOADER_LOCALITY : RCKPT_LOADER_REGULAR;
		o.local_batch = LOCAL_BATCH;
		o.seed = seed;
		o.groups = 3;
		o.threads = 2;
		o.output = mode == 1 ? RCKPT_PCR_RGB : RCKPT_PCR_JPEG; /* RGB decodes on the pool */
		if (mode == 2) { /* a third of each learner's share */
			rckpt_pcr_t *d;
			rckpt_pcr_info_t in;
			rckpt_pcr_opts_t po = RCKPT_PCR_OPTS_INIT;
			uint64_t bytes;
			unsigned k;
			CHECK(rckpt_pcr_open(h, &d, name, &po) == 0, "open");
			rckpt_pcr_info(d, &in);
			bytes = in.head_bytes;
			for (k = 0; k < 3; k++)
				bytes += in.group_bytes[k];
			rckpt_pcr_close(d);
			o.cache_bytes = bytes / size / 3;
		}
		rc = rckpt_loader_open(h, &l, name, &tr, &o);
		CHECK(rc == 0, "loader open: %s", rckpt_errmsg(h));
		rckpt_loader_stats(l, &prev);
		for (e = 0; e < EPOCHS; e++) {
			run_epoch(l, seed, e, ref, mode == 0 && e == 0);
			rckpt_loader_stats(l, &st);
			per_epoch[mode][e] = total(st.storage_bytes - prev.storage_bytes);
			if (mode && e > 0) {
				/* a sample comes from the cluster iff no cache holds it */
				cached = total(st.cached_samples);
				CHECK(total(st.storage_samples - prev.storage_samples) == NIMG - cached,
				      "epoch %" PRIu64 ": %" PRIu64 " from storage, %" PRIu64 " cached", e,
				      total(st.storage_samples - prev.storage_samples), cached);
				CHECK(total(st.sent_samples - prev.sent_samples) ==
					      total(st.recv_samples - prev.recv_samples),
				      "sent and received differ");
				if (mode == 1)
					CHECK(cached == NIMG && per_epoch[1][e] == 0, "whole caches: %" PRIu64 " bytes",
					      per_epoch[1][e]);
				else
					CHECK(cached < NIMG && cached > 0 && per_epoch[2][e] > 0 &&
						      per_epoch[2][e] < per_epoch[0][e],
					      "partial caches");
			}
			prev = st;
		}
		if (mode == 2)
			CHECK(st.cached_bytes <= o.cache_bytes, "cache over its budget");
		rckpt_loader_close(l);
	}
	if (rank == 0) {
		int m;
		static const char *names[3] = { "regular", "locality, whole caches", "locality, 1/3 caches" };
		printf("bytes read from the cluster per epoch (%d learners, %d images, groups 1..3):\n", size, NIMG);
		for (m = 0; m < 3; m++)
			printf("  %-24s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n", names[m], per_epoch[m][0],
			       per_epoch[m][1], per_epoch[m][2]);
		rckpt_pcr_delete(h, name);
	}
	/* bad options change nothing and say so */
	{
		rckpt_loader_opts_t o = RCKPT_LOADER_OPTS_INIT;
		rckpt_loc_transport_t tr = { NULL, 0, 2, NULL, NULL };
		rckpt_loader_t *l = (rckpt_loader_t *)&tr;
		o.mode = RCKPT_LOADER_LOCALITY;
		CHECK(rckpt_loader_open(h, &l, "x", &tr, &o) == -EINVAL && l == NULL, "no send/recv");
		o.local_batch = 0;
		CHECK(rckpt_loader_open(h, &l, "x", &tr, &o) == -EINVAL, "local batch 0");
	}
	rckpt_destroy(h);
	MPI_Comm_free(&comm);
	MPI_Finalize();
	if (rank == 0)
		printf("ok\n");
	return 0;
}
