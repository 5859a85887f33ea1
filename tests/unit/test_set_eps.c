/*
 * test_set_eps.c — a writer's thresholds changed between saves
 * (rckpt_job_set_eps, rckpt_ckenc_set_eps), over the in-memory pool that
 * runs the real object-class methods. Two writers save the same steps, one
 * at the default eps throughout, the other at a looser eps for step 2 and a
 * tighter one for step 3:
 *  - each save's quality is within the eps it was given, and the looser
 *    save is smaller, the tighter one larger, than the default's;
 *  - the restored tensors are nearer the originals after the tighter save;
 *  - out-of-range values are refused with nothing changed (the next save
 *    keeps the last good eps), 0 keeps the one in use, and a read-only job
 *    refuses with -EPERM.
 * And the job's record of resumes (rckpt_job_restores), which a trainer's
 * thresholds may follow: a writer's restores before its first save count
 * once; a reader's, a writer's after it saved, and a failed restore do not;
 * a record that cannot be written or read fails no restore (and one not
 * read is not overwritten); a damaged one is refused with one line and
 * started again by the next resume.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mem_io.h"
#include "test_rng.h"
#include "rckpt.h"
#include "rckpt_internal.h"

#define N ((uint64_t)60000)
#define CHUNK ((uint64_t)1 << 15)

static float w[N];

/* Step s's weights: a smooth field plus noise that moves every step (the
 * generator reseeded by s, so a step's weights can be made again). */
static void model_at(unsigned s)
{
	uint64_t i;
	rng_state = TEST_RNG_SEED ^ ((uint64_t)(s + 1) << 32);
	for (i = 0; i < N; i++)
		w[i] = (float)(0.05 * sin(0.002 * (double)i + 0.01 * s) + 0.002 * (urand() - 0.5));
}

static int save(rckpt_job_t *j, unsigned s, rckpt_save_stats_t *st)
{
	rckpt_tensor_t t = { "w", RCKPT_F32, 2, { 300, N / 300 }, w };
	model_at(s);
	return rckpt_job_save(j, s, &t, 1, NULL, 0, st);
}

/* The relative error of step s restored from j against its weights. */
static double restored_error(rckpt_job_t *j, unsigned s)
{
	rckpt_restored_t *r = NULL;
	float *got = malloc(N * sizeof(*got));
	double num = 0, den = 0;
	uint64_t i;
	assert_non_null(got);
	assert_int_equal(rckpt_job_restore(j, s, &r, NULL), 0);
	assert_int_equal(rckpt_restored_read(r, 0, got, N * sizeof(*got)), 0);
	model_at(s);
	for (i = 0; i < N; i++) {
		num += ((double)got[i] - w[i]) * ((double)got[i] - w[i]);
		den += (double)w[i] * w[i];
	}
	rckpt_restored_free(r);
	free(got);
	return num / den;
}

static void test_set_eps(void **state)
{
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *a, *b, *ro;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_save_stats_t sa, sb;
	(void)state;

	assert_int_equal(mem_pool_create(&pool), 0);
	assert_int_equal(rckpt_create(&h), 0);
	assert_int_equal(rckpt_set_io(h, mem_pool_open, pool, "mem"), 0);
	o.writer = 1;
	o.compute = RCKPT_COMPUTE_CPU;
	o.chunk_params = CHUNK;
	assert_int_equal(rckpt_job_open(h, &a, "default", &o), 0);
	assert_int_equal(rckpt_job_open(h, &b, "moved", &o), 0);

	/* step 1 the same way in both */
	assert_int_equal(save(a, 1, &sa), 0);
	assert_int_equal(save(b, 1, &sb), 0);
	assert_true(sa.quality <= RCKPT_EPS_DEFAULT && sb.quality <= RCKPT_EPS_DEFAULT);
	assert_int_equal(sa.enc_bytes, sb.enc_bytes);

	/* step 2: b looser */
	assert_int_equal(rckpt_job_set_eps(b, 0.03, 0), 0);
	assert_int_equal(save(a, 2, &sa), 0);
	assert_int_equal(save(b, 2, &sb), 0);
	print_message("step 2: default %llu bytes (quality %.5f), eps 0.03 %llu bytes (%.5f)\n",
		      (unsigned long long)sa.enc_bytes, sa.quality, (unsigned long long)sb.enc_bytes,
		      sb.quality);
	assert_true(sa.quality <= RCKPT_EPS_DEFAULT);
	assert_true(sb.quality <= 0.03 && sb.quality > RCKPT_EPS_DEFAULT);
	assert_true(sb.enc_bytes < sa.enc_bytes);

	/* refused values change nothing; 0 keeps the one in use */
	assert_int_equal(rckpt_job_set_eps(b, -0.1, 0), -EINVAL);
	assert_int_equal(rckpt_job_set_eps(b, 1.0, 0), -EINVAL);
	assert_int_equal(rckpt_job_set_eps(b, NAN, 0), -EINVAL);
	assert_int_equal(rckpt_job_set_eps(b, 0.001, -1), -EINVAL);
	assert_int_equal(rckpt_job_set_eps(b, 0.001, INFINITY), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(h), "(0, 1)"));

	/* step 3: b tighter than the default */
	assert_int_equal(rckpt_job_set_eps(b, 0.0002, 0), 0);
	assert_int_equal(rckpt_job_set_eps(b, 0, 0), 0);
	assert_int_equal(save(a, 3, &sa), 0);
	assert_int_equal(save(b, 3, &sb), 0);
	print_message("step 3: default %llu bytes (quality %.6f), eps 0.0002 %llu bytes (%.6f)\n",
		      (unsigned long long)sa.enc_bytes, sa.quality, (unsigned long long)sb.enc_bytes,
		      sb.quality);
	assert_true(sb.quality <= 0.0002);
	assert_true(sb.enc_bytes > sa.enc_bytes);
	{
		const double ea = restored_error(a, 3), eb = restored_error(b, 3);
		print_message("step 3 restored: relative error %.3g (default) %.3g (eps 0.0002)\n", ea,
			      eb);
		assert_true(eb < ea);
	}

	/* a reader cannot set them */
	o.writer = 0;
	assert_int_equal(rckpt_job_open(h, &ro, "moved", &o), 0);
	assert_int_equal(rckpt_job_set_eps(ro, 0.01, 0), -EPERM);
	rckpt_job_close(ro);

	rckpt_job_close(a);
	rckpt_job_close(b);
	rckpt_destroy(h);
	mem_pool_destroy(pool);
}

static rckpt_job_t *open_job(rckpt_t *h, int writer)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j = NULL;
	o.writer = writer;
	o.compute = RCKPT_COMPUTE_CPU;
	o.chunk_params = CHUNK;
	assert_int_equal(rckpt_job_open(h, &j, "resumed", &o), 0);
	return j;
}

static void restore_ok(rckpt_job_t *j, uint64_t step)
{
	rckpt_restored_t *r = NULL;
	assert_int_equal(rckpt_job_restore(j, step, &r, NULL), 0);
	rckpt_restored_free(r);
}

static void expect_restores(rckpt_job_t *j, uint64_t count, uint64_t last)
{
	uint64_t c = 99, l = 99;
	assert_int_equal(rckpt_job_restores(j, &c, &l), 0);
	assert_int_equal(c, count);
	assert_int_equal(l, last);
}

static void test_restores(void **state)
{
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *j, *ro;
	rckpt_restored_t *r = NULL;
	rckpt_io_t *io;
	const mem_fault_t no_omap = { "omap_set", 1, -EIO, 0, 0, 0, NULL, NULL };
	(void)state;

	assert_int_equal(mem_pool_create(&pool), 0);
	assert_int_equal(rckpt_create(&h), 0);
	assert_int_equal(rckpt_set_io(h, mem_pool_open, pool, "mem"), 0);

	/* a new run: two saves, no resume */
	j = open_job(h, 1);
	assert_int_equal(save(j, 1, NULL), 0);
	assert_int_equal(save(j, 2, NULL), 0);
	restore_ok(j, 2); /* after its saves: a check, not a resume */
	expect_restores(j, 0, RCKPT_LATEST);
	rckpt_job_close(j);

	/* a reader's restore is not a resume */
	ro = open_job(h, 0);
	restore_ok(ro, RCKPT_LATEST);
	expect_restores(ro, 0, RCKPT_LATEST);

	/* a restarted writer: a failed restore records nothing; its reads
	 * before the first save count once; after a save, none */
	j = open_job(h, 1);
	assert_int_equal(rckpt_job_restore(j, 7, &r, NULL), -ENOENT);
	expect_restores(j, 0, RCKPT_LATEST);
	restore_ok(j, RCKPT_LATEST);
	restore_ok(j, 1);
	expect_restores(ro, 1, 2);
	assert_int_equal(save(j, 3, NULL), 0);
	restore_ok(j, 3);
	expect_restores(j, 1, 2);
	rckpt_job_close(j);

	/* a record that cannot be written, or read, fails no restore and
	 * loses nothing */
	j = open_job(h, 1);
	mem_pool_fault(pool, &no_omap);
	restore_ok(j, 3);
	assert_true(mem_pool_struck(pool));
	mem_pool_fault(pool, NULL);
	expect_restores(j, 1, 2);
	rckpt_job_close(j);
	j = open_job(h, 1);
	{
		unsigned before = mem_pool_calls(pool, "omap_get");
		unsigned k;
		/* the restore's own reads of the job's omap come first: fail
		 * each in turn until the record's read is the one failing */
		for (k = 1; k < 64; k++) {
			const mem_fault_t no_get = { "omap_get", k, -EIO, 0, 0, 0, NULL, NULL };
			rckpt_job_close(j);
			j = open_job(h, 1);
			mem_pool_fault(pool, &no_get);
			if (rckpt_job_restore(j, 3, &r, NULL) == 0) {
				rckpt_restored_free(r);
				if (mem_pool_struck(pool))
					break;
			}
			mem_pool_fault(pool, NULL);
		}
		mem_pool_fault(pool, NULL);
		assert_true(k < 64);
		assert_true(mem_pool_calls(pool, "omap_get") > before);
	}
	expect_restores(j, 1, 2); /* not overwritten with 1 */
	rckpt_job_close(j);

	/* a damaged record: refused with one line, started again by a resume */
	assert_int_equal(mem_pool_open(pool, "resumed", &io), 0);
	assert_int_equal(io->ops->omap_set(io, "rckpt.job", "x.restores", "abc", 3), 0);
	io->ops->close(io);
	assert_int_equal(rckpt_job_restores(ro, NULL, NULL), -EBADMSG);
	assert_non_null(strstr(rckpt_errmsg(h), "record of restores"));
	j = open_job(h, 1);
	restore_ok(j, 3);
	expect_restores(ro, 1, 3);
	rckpt_job_close(j);

	rckpt_job_close(ro);
	rckpt_destroy(h);
	mem_pool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_eps),
		cmocka_unit_test(test_restores),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
