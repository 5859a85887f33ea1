/*
 * test_late_ops.c — the store's fencing (formats/store.md, "Fencing")
 * against late requests, without a cluster: an actor pauses (or is cut
 * off) with a request queued, its successor moves on, then the request
 * lands (mem_fault_t.held, mem_pool_release). The actors: a writer (its
 * claim, trim, append and manifest put), a compactor (its drop and compact
 * stage), gc (its retire) and rm (its retire of a chunk and of the job
 * object, once the job was made again). Each late request is refused
 * (-ESTALE) and every committed step still restores to what it restored to
 * when committed (store_fx.h keeps that), and the successor saves on.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mem_io.h"
#include "rckpt.h"
#include "store_fx.h"

#define PAUSED -ETIMEDOUT /* what the paused actor's own call returns */

static int open_as(fx_t *f, rckpt_job_t **j, int writer)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	o.writer = writer;
	o.chunk_params = 1024; /* as store_fx's writer */
	o.inflight = 2;
	o.compute = RCKPT_COMPUTE_CPU;
	return rckpt_job_open(f->h, j, "faults", &o);
}

/* The fixture's writer goes (its lease with it) and a new one takes the
 * job: it claims, so its token is newer than every earlier actor's. */
static void successor(fx_t *f)
{
	rckpt_job_close(f->j);
	f->j = NULL;
	assert_int_equal(open_as(f, &f->j, 1), 0);
}

/* Arms a hold on the nth call of op: the call fails (PAUSED), its request
 * waits for mem_pool_release. */
static void hold(fx_t *f, const char *op, unsigned nth)
{
	const mem_fault_t h = { op, nth, PAUSED, 0, 0, 1 };
	mem_pool_fault(f->pool, &h);
}

static void unhold(fx_t *f)
{
	assert_true(mem_pool_struck(f->pool));
	mem_pool_fault(f->pool, NULL);
}

/* Saves step s with the values of run step `like` (so that a step saved
 * again under the same number differs from the first try). */
static int save_as(fx_t *f, rckpt_job_t *j, uint64_t s, unsigned like)
{
	int rc;
	model_at(&f->m, like);
	rc = rckpt_job_save(j, s, f->m.t, NT, NULL, 0, NULL);
	if (rc == 0 && j == f->j)
		committed(f, s);
	return rc;
}

/* Lands the held request: first nothing committed may be lost (what each
 * step restores to, against what it restored to when committed), then it
 * must have been refused as `want` says. */
static void landed(fx_t *f, int want)
{
	int rc = mem_pool_release(f->pool);
	nothing_lost(f);
	assert_int_equal(rc, want);
}

/* The scenario: writer W1 renews its lease and stalls with the
 * trim of its first save queued; W2 claims, trims, saves 3 and 4; then
 * W1's trim(after 2) lands. Before fencing it cut every chunk back to 2. */
static void test_late_trim(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *w1 = NULL;
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	rckpt_job_close(f->j);
	f->j = NULL;
	assert_int_equal(open_as(f, &w1, 1), 0);
	hold(f, "trim", 1);
	assert_int_equal(save_as(f, w1, 3, 3), PAUSED);
	unhold(f);
	rckpt_job_close(w1);
	assert_int_equal(open_as(f, &f->j, 1), 0);
	assert_int_equal(save_as(f, f->j, 3, 3), 0);
	assert_int_equal(save_as(f, f->j, 4, 4), 0);
	landed(f, -ESTALE);
	assert_int_equal(save_as(f, f->j, 5, 5), 0);
	nothing_lost(f);
}

/* W1's request `op` (the nth of its save of step 3) is queued; W2 saves
 * its own step 3 (other values) and 4; the request lands. */
static void late_save_request(fx_t *f, const char *op, unsigned nth)
{
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	hold(f, op, nth);
	assert_int_equal(save_as(f, f->j, 3, 3), PAUSED);
	unhold(f);
	successor(f);
	assert_int_equal(save_as(f, f->j, 3, 13), 0);
	assert_int_equal(save_as(f, f->j, 4, 14), 0);
	landed(f, -ESTALE);
	assert_int_equal(save_as(f, f->j, 5, 15), 0);
	nothing_lost(f);
}

/* An append of W1's. */
static void test_late_append(void **state)
{
	late_save_request(*state, "append", 2);
}

/* W1's manifest of step 3. Before `put` it replaced W2's, and step 3 no
 * longer restored to what W2 committed. */
static void test_late_manifest(void **state)
{
	late_save_request(*state, "put", 1);
}

/* W1's claim is queued (its open fails); W2 claims and saves; W1's claim
 * lands: refused, W2 saves on. */
static void test_late_claim(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *w1 = NULL;
	assert_int_equal(save_next(f), 0);
	rckpt_job_close(f->j);
	f->j = NULL;
	hold(f, "claim", 1);
	assert_int_equal(open_as(f, &w1, 1), PAUSED);
	unhold(f);
	assert_int_equal(open_as(f, &f->j, 1), 0);
	assert_int_equal(save_next(f), 0);
	assert_int_equal(mem_pool_release(f->pool), -ESTALE);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* A compactor (no writer lock) reads the writer's token, pauses with a
 * compact stage queued; a new writer claims and saves on; the stage lands
 * on chunks that writer has touched: refused. Then its drop, the same
 * way. A compaction run afterwards reads the new token and goes through. */
static void test_late_compactor(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *c = NULL;
	rckpt_retention_t all = { 0, 0 }, last2 = { 2, 0 };
	unsigned i;
	for (i = 0; i < 6; i++)
		assert_int_equal(save_next(f), 0);
	assert_int_equal(open_as(f, &c, 0), 0);
	hold(f, "compact", 1);
	assert_int_equal(rckpt_job_compact(c, &all, NULL), PAUSED);
	unhold(f);
	successor(f);
	assert_int_equal(save_next(f), 0);
	landed(f, -ESTALE);

	hold(f, "drop", 1); /* keep-last 2 would forget steps 1..5 */
	assert_int_equal(rckpt_job_compact(c, &last2, NULL), PAUSED);
	unhold(f);
	successor(f);
	assert_int_equal(save_next(f), 0);
	landed(f, -ESTALE); /* every step still listed, and restores */

	assert_int_equal(rckpt_job_compact(c, &all, NULL), 0);
	nothing_lost(f);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
	rckpt_job_close(c);
}

/* gc removes the manifest a failed save left (step 3, never committed)
 * but pauses with that retire queued; a new writer saves its own step 3
 * and 4; the retire lands: refused, step 3 restores to what it committed. */
static void test_late_gc(void **state)
{
	fx_t *f = *state;
	const mem_fault_t no_commit = { "commit", 1, -EIO, 0, 0, 0 };
	unsigned removed = 0;
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	mem_pool_fault(f->pool, &no_commit);
	assert_int_equal(save_as(f, f->j, 3, 3), -EIO);
	mem_pool_fault(f->pool, NULL);
	hold(f, "retire", 1);
	assert_int_equal(rckpt_job_gc(f->j, &removed), PAUSED);
	unhold(f);
	successor(f);
	assert_int_equal(save_as(f, f->j, 3, 33), 0);
	assert_int_equal(save_as(f, f->j, 4, 34), 0);
	landed(f, -ESTALE);
}

/* Forget every step the fixture recorded: the job was deleted. */
static void forget_all(fx_t *f)
{
	unsigned i, t;
	for (i = 0; i < f->ncommitted; i++)
		for (t = 0; t < NT; t++)
			free(f->got[i][t]);
	f->ncommitted = 0;
	f->next = 1;
}

/* rm pauses with a removal queued (the first chunk's; in the second round
 * the job object's, its last). Until an rm finishes the job, no writer
 * can take it (-EIDRM). An rm run again finishes; a writer makes the job
 * again under the same name and saves; the first rm's removal lands: its
 * token is older than every token of the new job, so it is refused. */
static void test_late_rm(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *w = NULL;
	unsigned round;
	for (round = 0; round < 2; round++) {
		unsigned nth = 1;
		assert_int_equal(save_next(f), 0);
		assert_int_equal(save_next(f), 0);
		assert_int_equal(save_next(f), 0);
		if (round == 1) {
			uint64_t bytes;
			unsigned objects;
			assert_int_equal(rckpt_job_stored(f->j, &bytes, &objects), 0);
			nth = objects + 1; /* the job object goes last */
		}
		rckpt_job_close(f->j);
		f->j = NULL;
		hold(f, "retire", nth);
		assert_int_equal(rckpt_job_delete(f->h, "faults"), PAUSED);
		unhold(f);
		assert_int_equal(open_as(f, &w, 1), -EIDRM);
		assert_non_null(strstr(rckpt_errmsg(f->h), "being deleted"));
		assert_int_equal(rckpt_job_delete(f->h, "faults"), 0);
		forget_all(f);
		assert_int_equal(open_as(f, &f->j, 1), 0);
		assert_int_equal(save_next(f), 0);
		assert_int_equal(save_next(f), 0);
		assert_int_equal(save_next(f), 0);
		landed(f, -ESTALE);
		nothing_lost(f);
		forget_all(f);
		rckpt_job_close(f->j);
		f->j = NULL;
		assert_int_equal(rckpt_job_delete(f->h, "faults"), 0);
		assert_int_equal(open_as(f, &f->j, 1), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_late_trim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_append, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_manifest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_claim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_compactor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_gc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_rm, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
