/*
 * test_group_save.c — group saves (issue 27) against the local cluster,
 * ranks as threads of one process, each with its own connection, over a
 * rendezvous transport:
 *  - three ranks holding ZeRO-3 slices save three steps; one process
 *    restores each, every tensor within the codec's error and the
 *    norm its bf16 bit for bit; the later steps are deltas;
 *  - the job restarted on two ranks saves on, its next step a delta (each
 *    rank takes up the head's levels of the chunks it now owns);
 *  - three ranks holding everything (DDP) save into another job;
 *  - a rank whose shard disagrees about a tensor's shape fails the step
 *    on every rank, and the head stays;
 *  - a second group is refused while the first holds the job;
 *  - a group's exact step restores every tensor bit for bit, and the
 *    next lossy step is a delta on it;
 *  - a group whose tensors change: that step a base in a segment of its
 *    own, marked, restoring its own tensors; a restarted group goes on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rckpt.h"
#include "rv_hub.h"
#include "test_skip.h"
#include "bf16_round.h"

#define NT 4
static const char *const names[NT] = { "enc.0.weight", "enc.1.weight", "mlp.weight", "norm.weight" };
static const uint64_t rows[NT] = { 300, 160, 256, 128 }, cols[NT] = { 200, 128, 96, 1 };
static const unsigned dtypes[NT] = { RCKPT_F32, RCKPT_F32, RCKPT_BF16, RCKPT_F32 };

typedef struct model {
	void *v[NT];
} model_t;

static uint64_t numel(unsigned t)
{
	return rows[t] * cols[t];
}

/* Step s's values: smooth fields drifting with s, and noise. */
static void model_at(model_t *m, unsigned s)
{
	unsigned t;
	uint64_t i;
	for (t = 0; t < NT; t++) {
		if (m->v[t] == NULL)
			assert_non_null(m->v[t] = malloc(numel(t) * 4));
		for (i = 0; i < numel(t); i++) {
			uint32_t h = (uint32_t)(i * 2654435761u) ^ (t * 40503u) ^ (s * 0x9e3779b9u);
			double x = t == 3 ? 1.0 + 0.001 * (double)i + 0.0001 * s
					  : 0.05 * sin(0.01 * (double)i + 0.05 * t + 0.01 * s) +
						    0.001 * ((double)(h >> 16) / 65536.0 - 0.5);
			float f = (float)x;
			if (dtypes[t] == RCKPT_BF16) {
				uint32_t u;
				memcpy(&u, &f, 4);
				((uint16_t *)m->v[t])[i] = (uint16_t)(u >> 16);
			} else {
				((float *)m->v[t])[i] = f;
			}
		}
	}
}

static void model_free(model_t *m)
{
	unsigned t;
	for (t = 0; t < NT; t++)
		free(m->v[t]);
}

enum mode { SHARDED, REPLICATED, BAD_SHAPE };

typedef struct rank {
	hub_t *hub;
	const char *job;
	unsigned rank, p;
	enum mode mode;
	unsigned first, last;   /* steps saved */
	const model_t *steps;   /* the model at each step */
	int open_rc, save_rc;   /* the first failure */
	int hold;               /* keep the group open until released */
	unsigned exact_at;      /* this step is saved bit-exact */
	pthread_mutex_t *mu;
	pthread_cond_t *cv;
	int *release, *opened;
	unsigned drop_from;     /* from this step on, enc.0.weight is gone (0: never) */
} rank_t;

static void *rank_main(void *arg)
{
	rank_t *R = arg;
	port_t port = { R->hub, R->rank };
	rckpt_loc_transport_t tr = { &port, R->rank, R->p, hub_send, hub_recv };
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_group_t *g = NULL;
	rckpt_t *h = NULL;
	unsigned s, t;

	R->open_rc = R->save_rc = 0;
	o.chunk_params = (uint64_t)1 << 14;
	o.compute = RCKPT_COMPUTE_CPU;
	if (rckpt_create(&h) || rckpt_connect(h, &co)) {
		R->open_rc = -ENOTCONN;
		hub_close(R->hub);
		goto out;
	}
	if ((R->open_rc = rckpt_group_open(h, &g, R->job, &o, &tr))) {
		if (R->hold) {
			pthread_mutex_lock(R->mu);
			++*R->opened;
			pthread_cond_broadcast(R->cv);
			pthread_mutex_unlock(R->mu);
		}
		goto out;
	}
	if (R->hold) { /* opened: say so, and wait to be released */
		pthread_mutex_lock(R->mu);
		++*R->opened;
		pthread_cond_broadcast(R->cv);
		while (!*R->release)
			pthread_cond_wait(R->cv, R->mu);
		pthread_mutex_unlock(R->mu);
	}
	for (s = R->first; s <= R->last && R->save_rc == 0; s++) {
		rckpt_shard_t sh[NT];
		const model_t *m = &R->steps[s];
		const unsigned t0 = R->drop_from && s >= R->drop_from;
		for (t = 0; t < NT; t++) {
			const uint64_t n = numel(t), each = (n + R->p - 1) / R->p;
			const uint64_t a = R->mode == REPLICATED ? 0 : R->rank * each < n ? R->rank * each : n;
			const uint64_t b = R->mode == REPLICATED ? n : (R->rank + 1) * each < n ? (R->rank + 1) * each : n;
			const size_t es = dtypes[t] == RCKPT_BF16 ? 2 : 4;
			sh[t] = (rckpt_shard_t){ names[t], dtypes[t], cols[t] == 1 ? 1 : 2, { rows[t], cols[t] }, a,
						 b - a, (const uint8_t *)m->v[t] + a * es };
			if (cols[t] == 1)
				sh[t].shape[1] = 0; /* a vector: norm.weight, kept as bf16 */
			if (R->mode == BAD_SHAPE && R->rank == 1 && t == 1)
				sh[t].shape[0] += 1;
		}
		rckpt_group_set_exact(g, s == R->exact_at);
		R->save_rc = rckpt_group_save(g, s, sh + t0, NT - t0, NULL);
		if (R->save_rc)
			print_message("rank %u, step %u: %s\n", R->rank, s, rckpt_errmsg(h));
	}
out:
	rckpt_group_close(g);
	rckpt_destroy(h);
	return NULL;
}

/* Runs p ranks saving steps [first, last] of job in mode; the ranks' results in R. */
static void run_x(rank_t *R, unsigned p, const char *job, enum mode mode, unsigned first, unsigned last,
		  const model_t *steps, unsigned exact_at, unsigned drop_from)
{
	hub_t hub;
	pthread_t th[RV_HUB_MAX];
	unsigned r;
	hub_init(&hub);
	for (r = 0; r < p; r++) {
		memset(&R[r], 0, sizeof(R[r]));
		R[r] = (rank_t){ &hub, job, r, p, mode, first, last, steps, 0, 0, 0, 0, NULL, NULL, NULL, NULL, 0 };
		R[r].exact_at = exact_at;
		R[r].drop_from = drop_from;
		assert_int_equal(pthread_create(&th[r], NULL, rank_main, &R[r]), 0);
	}
	for (r = 0; r < p; r++)
		pthread_join(th[r], NULL);
	hub_destroy(&hub);
}

static void run(rank_t *R, unsigned p, const char *job, enum mode mode, unsigned first, unsigned last,
		const model_t *steps)
{
	run_x(R, p, job, mode, first, last, steps, 0, 0);
}

/* Step s of job restores (one process) to the model within the codec's
 * error, the norm its bf16 bit for bit. */
static void check_step_from(rckpt_job_t *j, unsigned s, const model_t *m, unsigned t0)
{
	rckpt_restored_t *r = NULL;
	unsigned t;
	if (rckpt_job_restore(j, s, &r, NULL))
		fail_msg("step %u does not restore", s);
	assert_int_equal(rckpt_restored_count(r), NT - t0);
	assert_int_equal(rckpt_restored_find(r, names[0]) >= 0, t0 == 0);
	for (t = t0; t < NT; t++) {
		const int i = rckpt_restored_find(r, names[t]);
		const size_t es = dtypes[t] == RCKPT_BF16 ? 2 : 4;
		uint8_t *got = malloc(numel(t) * es);
		double num = 0, den = 0;
		uint64_t k;
		assert_true(i >= 0 && got != NULL);
		assert_int_equal(rckpt_restored_read(r, (unsigned)i, got, numel(t) * es), 0);
		if (t == 3) {
			float *want = malloc(numel(t) * es);
			assert_true(want != NULL && es == 4);
			memcpy(want, m->v[t], numel(t) * es);
			bf16_round(want, numel(t)); /* norm: its bf16 */
			assert_memory_equal(got, want, numel(t) * es);
			free(want);
		} else {
			for (k = 0; k < numel(t); k++) {
				double a, b;
				if (es == 4) {
					a = ((float *)got)[k];
					b = ((float *)m->v[t])[k];
				} else {
					uint32_t ua = (uint32_t)((uint16_t *)got)[k] << 16;
					uint32_t ub = (uint32_t)((uint16_t *)m->v[t])[k] << 16;
					float fa, fb;
					memcpy(&fa, &ua, 4);
					memcpy(&fb, &ub, 4);
					a = fa;
					b = fb;
				}
				num += (a - b) * (a - b);
				den += b * b;
			}
			if (!(num / den < 0.01))
				fail_msg("step %u, %s: relative error %g", s, names[t], num / den);
		}
		free(got);
	}
	rckpt_restored_free(r);
}

static void check_step(rckpt_job_t *j, unsigned s, const model_t *m)
{
	check_step_from(j, s, m, 0);
}

static char job[64], job2[64];
static rckpt_t *H;

static int setup(void **state)
{
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	const char *conf = getenv("CEPH_CONF");
	*state = NULL;
	if (!conf || !*conf) {
		print_message("skipped: needs CEPH_CONF\n");
		return 0;
	}
	if (rckpt_create(&H) || rckpt_connect(H, &co)) {
		print_message("skipped: cannot connect (%s)\n", rckpt_errmsg(H));
		rckpt_destroy(H);
		H = NULL;
		return 0;
	}
	snprintf(job, sizeof(job), "grp-%d", (int)getpid());
	snprintf(job2, sizeof(job2), "grp-ddp-%d", (int)getpid());
	rckpt_job_delete(H, job);
	rckpt_job_delete(H, job2);
	*state = H;
	return 0;
}

static int teardown(void **state)
{
	if (*state) {
		rckpt_job_delete(H, job);
		rckpt_job_delete(H, job2);
		rckpt_destroy(H);
	}
	return 0;
}

static void test_group_save(void **state)
{
	model_t steps[8];
	rank_t R[4];
	rckpt_job_t *j = NULL;
	rckpt_step_info_t si[8];
	unsigned r, s, t, n = 0;
	int more = 0;

	if (*state == NULL)
		TEST_SKIP(TEST_NEED_CLUSTER, "needs CEPH_CONF and a running cluster");
	memset(steps, 0, sizeof(steps));
	for (s = 1; s <= 5; s++)
		model_at(&steps[s], s);
	/* three ranks, ZeRO-3 slices, three steps */
	run(R, 3, job, SHARDED, 1, 3, steps);
	for (r = 0; r < 3; r++) {
		assert_int_equal(R[r].open_rc, 0);
		assert_int_equal(R[r].save_rc, 0);
	}
	assert_int_equal(rckpt_job_open(H, &j, job, NULL), 0);
	for (s = 1; s <= 3; s++)
		check_step(j, s, &steps[s]);
	assert_int_equal(rckpt_job_steps(j, RCKPT_LATEST, si, 8, &n, &more), 0);
	assert_int_equal(n, 3);
	assert_true(si[0].parent == RCKPT_LATEST && si[1].parent == 1 && si[2].parent == 2);
	assert_true(si[0].ranks == 3 && si[2].ranks == 3); /* the summary says who saved it */
	rckpt_job_close(j);
	/* restarted on two ranks: it saves on */
	run(R, 2, job, SHARDED, 4, 4, steps);
	for (r = 0; r < 2; r++)
		assert_int_equal(R[r].save_rc, 0);
	/* a rank that disagrees about a shape: every rank fails, the head stays */
	run(R, 3, job, BAD_SHAPE, 5, 5, steps);
	for (r = 0; r < 3; r++)
		assert_int_equal(R[r].save_rc, -EINVAL);
	assert_int_equal(rckpt_job_open(H, &j, job, NULL), 0);
	check_step(j, 4, &steps[4]);
	assert_int_equal(rckpt_job_steps(j, RCKPT_LATEST, si, 8, &n, &more), 0);
	assert_int_equal(n, 4);
	assert_int_equal(si[3].parent, 3); /* restarted on 2 ranks: a delta on the head */
	assert_int_equal(si[3].ranks, 2);
	rckpt_job_close(j);
	/* DDP: every rank holds everything */
	run(R, 3, job2, REPLICATED, 1, 2, steps);
	for (r = 0; r < 3; r++)
		assert_int_equal(R[r].save_rc, 0);
	assert_int_equal(rckpt_job_open(H, &j, job2, NULL), 0);
	check_step(j, 1, &steps[1]);
	check_step(j, 2, &steps[2]);
	rckpt_job_close(j);
	/* an exact step in a group: every tensor comes back as saved */
	rckpt_job_delete(H, job2);
	run_x(R, 3, job2, SHARDED, 1, 3, steps, 2, 0);
	for (r = 0; r < 3; r++)
		assert_int_equal(R[r].save_rc, 0);
	assert_int_equal(rckpt_job_open(H, &j, job2, NULL), 0);
	assert_int_equal(rckpt_job_steps(j, RCKPT_LATEST, si, 8, &n, &more), 0);
	assert_true(n == 3 && (si[1].flags & RCKPT_STEP_EXACT) && !(si[2].flags & RCKPT_STEP_EXACT));
	assert_int_equal(si[2].parent, 2); /* the next lossy step is a delta on it */
	{
		rckpt_restored_t *x = NULL;
		assert_int_equal(rckpt_job_restore(j, 2, &x, NULL), 0);
		assert_int_equal(rckpt_restored_exact(x), 1);
		for (t = 0; t < NT; t++) {
			const size_t es = dtypes[t] == RCKPT_BF16 ? 2 : 4;
			uint8_t *got = malloc(numel(t) * es);
			const int i = rckpt_restored_find(x, names[t]);
			assert_true(i >= 0 && got != NULL);
			assert_int_equal(rckpt_restored_read(x, (unsigned)i, got, numel(t) * es), 0);
			assert_memory_equal(got, steps[2].v[t], numel(t) * es);
			free(got);
		}
		rckpt_restored_free(x);
	}
	check_step(j, 3, &steps[3]);
	rckpt_job_close(j);
	for (s = 1; s <= 5; s++)
		model_free(&steps[s]);
}

/* A group's tensors change (issue 63): the step without enc.0.weight is a
 * base that begins a segment, marked; the next is a delta; a group
 * restarted on two ranks goes on with the head's tensors as a delta. */
static void test_group_layouts(void **state)
{
	model_t steps[8];
	rank_t R[4];
	rckpt_job_t *j = NULL;
	rckpt_step_info_t si[8];
	unsigned r, s, n = 0;
	int more = 0;

	if (*state == NULL)
		TEST_SKIP(TEST_NEED_CLUSTER, "needs CEPH_CONF and a running cluster");
	memset(steps, 0, sizeof(steps));
	for (s = 1; s <= 5; s++)
		model_at(&steps[s], s);
	rckpt_job_delete(H, job2);
	run_x(R, 3, job2, SHARDED, 1, 4, steps, 0, 3);
	for (r = 0; r < 3; r++)
		assert_int_equal(R[r].save_rc, 0);
	run_x(R, 2, job2, SHARDED, 5, 5, steps, 0, 3);
	for (r = 0; r < 2; r++)
		assert_int_equal(R[r].save_rc, 0);
	assert_int_equal(rckpt_job_open(H, &j, job2, NULL), 0);
	assert_int_equal(rckpt_job_steps(j, RCKPT_LATEST, si, 8, &n, &more), 0);
	assert_int_equal(n, 5);
	for (s = 1; s <= 5; s++) {
		assert_int_equal((si[s - 1].flags & RCKPT_STEP_LAYOUT) != 0, s == 3);
		assert_int_equal(si[s - 1].parent == RCKPT_LATEST, s == 1 || s == 3);
		check_step_from(j, s, &steps[s], s >= 3);
	}
	rckpt_job_close(j);
	for (s = 1; s <= 5; s++)
		model_free(&steps[s]);
}

/* A group holds the job: a second one is refused, on every rank. */
static void test_second_group(void **state)
{
	model_t steps[2];
	rank_t A[2], B[2];
	hub_t ha, hb;
	pthread_t ta[2], tb[2];
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	int release = 0, opened = 0;
	unsigned r;

	if (*state == NULL)
		TEST_SKIP(TEST_NEED_CLUSTER, "needs CEPH_CONF and a running cluster");
	memset(steps, 0, sizeof(steps));
	model_at(&steps[1], 9);
	hub_init(&ha);
	hub_init(&hb);
	for (r = 0; r < 2; r++) {
		A[r] = (rank_t){ &ha, job, r, 2, SHARDED, 1, 0, steps, 0, 0, 1, 0, &mu, &cv, &release, &opened, 0 };
		assert_int_equal(pthread_create(&ta[r], NULL, rank_main, &A[r]), 0);
	}
	pthread_mutex_lock(&mu);
	while (opened < 2)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	for (r = 0; r < 2; r++) {
		B[r] = (rank_t){ &hb, job, r, 2, SHARDED, 1, 0, steps, 0, 0, 0, 0, NULL, NULL, NULL, NULL, 0 };
		assert_int_equal(pthread_create(&tb[r], NULL, rank_main, &B[r]), 0);
	}
	for (r = 0; r < 2; r++)
		pthread_join(tb[r], NULL);
	pthread_mutex_lock(&mu);
	release = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (r = 0; r < 2; r++)
		pthread_join(ta[r], NULL);
	for (r = 0; r < 2; r++) {
		assert_int_equal(A[r].open_rc, 0);
		assert_int_equal(B[r].open_rc, -EBUSY);
	}
	hub_destroy(&ha);
	hub_destroy(&hb);
	model_free(&steps[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_save),
		cmocka_unit_test(test_second_group),
		cmocka_unit_test(test_group_layouts),
	};
	return test_exit(cmocka_run_group_tests(tests, setup, teardown)); /* 77: skipped */
}
