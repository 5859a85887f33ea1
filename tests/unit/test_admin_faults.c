/*
 * test_admin_faults.c — the store's housekeeping driven through its fault
 * points without a cluster (the fixture of store_fx.h, over the in-memory
 * pool): compaction under a retention policy with a pin, gc after a failed
 * save, pin keys that do not parse, and the preemption policy. After every
 * fault the call fails naming the cause, or succeeds, and nothing the
 * policy keeps is lost.
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
#include "rckpt.h"
#include "rckpt_internal.h"
#include "store_fx.h"

/* ---- housekeeping: compaction, gc, the policy ---- */

/* Whether retention r (with step `pinned` pinned) keeps step s, the
 * newest committed step being head: the test's own reading of rckpt.h. */
static int kept(const fx_t *f, const rckpt_retention_t *r, uint64_t pinned, uint64_t s)
{
	unsigned i, newer = 0;
	const uint64_t head = f->step[f->ncommitted - 1];
	for (i = 0; i < f->ncommitted; i++)
		newer += f->step[i] > s;
	return s == head || s == pinned || (r->keep_last == 0 && r->keep_every == 0) ||
	       newer < r->keep_last || (r->keep_every && s % r->keep_every == 0);
}

/* After a fault in a compaction under r: every step r keeps restores as it
 * did when committed; a step it drops restores the same or is gone
 * (-ENOENT); the head has not moved. */
static void nothing_kept_lost(fx_t *f, const rckpt_retention_t *r, uint64_t pinned)
{
	float *now[NT];
	rckpt_step_info_t si[MAX_COMMITTED];
	unsigned i, t, n = 0;
	int more = 0, rc;
	for (t = 0; t < NT; t++)
		assert_non_null(now[t] = __real_malloc(4 * numel(t)));
	for (i = 0; i < f->ncommitted; i++) {
		const uint64_t s = f->step[i];
		rc = restore(f, s, now);
		if (rc == 0) {
			for (t = 0; t < NT; t++)
				assert_memory_equal(now[t], f->got[i][t], 4 * numel(t));
		} else if (kept(f, r, pinned, s) || rc != -ENOENT) {
			fail_msg("step %llu (%s) does not restore: %d %s", (unsigned long long)s,
				 kept(f, r, pinned, s) ? "kept" : "dropped", rc, rckpt_errmsg(f->h));
		}
	}
	for (t = 0; t < NT; t++)
		free(now[t]);
	assert_int_equal(rckpt_job_steps(f->j, RCKPT_LATEST, si, MAX_COMMITTED, &n, &more), 0);
	assert_true(n > 0);
	assert_int_equal(si[n - 1].step, f->step[f->ncommitted - 1]);
}

/* Drops from the fixture's record the steps r no longer keeps. */
static void forget_dropped(fx_t *f, const rckpt_retention_t *r, uint64_t pinned)
{
	unsigned i, o = 0, t;
	const unsigned n = f->ncommitted;
	int keep[MAX_COMMITTED];
	for (i = 0; i < n; i++)
		keep[i] = kept(f, r, pinned, f->step[i]);
	for (i = 0; i < n; i++) {
		if (!keep[i]) {
			for (t = 0; t < NT; t++)
				free(f->got[i][t]);
			continue;
		}
		f->step[o] = f->step[i];
		memcpy(f->got[o], f->got[i], sizeof(f->got[i]));
		o++;
	}
	f->ncommitted = o;
}

/* Every operation of a compaction under a retention policy fails in turn
 * (the k-th call of any kind), then every allocation site: each attempt
 * fails naming the cause or succeeds, and nothing the policy keeps is lost.
 * Then a clean compaction keeps exactly what the policy says, a second one
 * changes nothing, and the writer goes on. */
static void test_compaction_faults(void **state)
{
	fx_t *f = *state;
	const rckpt_retention_t keep = { 2, 4 }; /* the newest 2, multiples of 4 */
	const uint64_t pinned = 3;
	rckpt_compact_stats_t st, again;
	unsigned k, failed = 0, absorbed = 0, i;

	for (i = 0; i < 9; i++)
		assert_int_equal(save_next(f), 0);
	assert_int_equal(rckpt_job_pin(f->j, pinned, 1), 0);
	for (k = 1;; k++) {
		const mem_fault_t fault = { NULL, k, -EIO, 0, 0, 0, NULL, NULL };
		char op[32];
		int rc, struck;
		mem_pool_fault(f->pool, &fault);
		rc = rckpt_job_compact(f->j, &keep, NULL);
		struck = mem_pool_struck(f->pool);
		snprintf(op, sizeof(op), "%s", mem_pool_struck_op(f->pool));
		mem_pool_fault(f->pool, NULL);
		if (!struck) {
			assert_int_equal(rc, 0);
			break;
		}
		if (rc == 0) {
			print_message("  absorbed: %s\n", op);
			absorbed++;
		} else {
			if (rc != -EIO)
				fail_msg("operation %u of a compaction: %d (%s)", k, rc, rckpt_errmsg(f->h));
			assert_says(f, "Input/output error");
			failed++;
		}
		nothing_kept_lost(f, &keep, pinned);
	}
	print_message("operations of a compaction: %u; %u failed it, %u were absorbed\n", k - 1, failed,
		      absorbed);
	assert_true(failed > 10);
	assert_int_equal(absorbed, 0); /* no I/O error is swallowed, not even a stat's */
	nothing_kept_lost(f, &keep, pinned);
	forget_dropped(f, &keep, pinned);
	nothing_lost(f); /* exactly the kept steps are listed, and restore */

	/* allocations, on a job with more to fold */
	for (i = 0; i < 4; i++)
		assert_int_equal(save_next(f), 0);
	sites_forget();
	for (k = 0;; k++) {
		int rc;
		fail_allocation(1);
		rc = rckpt_job_compact(f->j, &keep, NULL);
		fail_allocation(0);
		if (!alloc_struck) {
			assert_int_equal(rc, 0);
			break;
		}
		if (rc != 0 && rc != -ENOMEM)
			fail_msg("allocation site %u of a compaction: %d (%s)", k, rc, rckpt_errmsg(f->h));
		nothing_kept_lost(f, &keep, pinned);
	}
	print_message("allocation sites of a compaction: %u\n", k);
	assert_true(k > 5);
	forget_dropped(f, &keep, pinned);
	nothing_lost(f);
	assert_int_equal(rckpt_job_compact(f->j, &keep, &st), 0);
	assert_int_equal(rckpt_job_compact(f->j, &keep, &again), 0);
	assert_int_equal(again.steps_before, again.steps_after);
	assert_int_equal(again.bytes_before, again.bytes_after);
	assert_int_equal(again.bytes_after, st.bytes_after);
	nothing_lost(f);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* gc after a failed save left records past the head: every operation of
 * it fails in turn; nothing committed is lost, and the next save works. */
static void test_gc_faults(void **state)
{
	fx_t *f = *state;
	const mem_fault_t mid = { "append", 3, -EIO, 0, 0, 0, NULL, NULL };
	unsigned k, removed = 0, failed = 0;

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	mem_pool_fault(f->pool, &mid);
	model_at(&f->m, f->next);
	assert_int_equal(rckpt_job_save(f->j, f->next++, f->m.t, NT, NULL, 0, NULL), -EIO);
	mem_pool_fault(f->pool, NULL);
	for (k = 1;; k++) {
		const mem_fault_t fault = { NULL, k, -EIO, 0, 0, 0, NULL, NULL };
		int rc, struck;
		mem_pool_fault(f->pool, &fault);
		rc = rckpt_job_gc(f->j, &removed);
		struck = mem_pool_struck(f->pool);
		mem_pool_fault(f->pool, NULL);
		if (!struck) {
			assert_int_equal(rc, 0);
			break;
		}
		if (rc) {
			assert_int_equal(rc, -EIO);
			assert_says(f, "Input/output error");
			failed++;
		}
		nothing_lost(f);
	}
	print_message("operations of a gc: %u; %u failed it\n", k - 1, failed);
	assert_true(failed > 0);
	assert_int_equal(rckpt_job_gc(f->j, &removed), 0);
	assert_int_equal(removed, 0); /* the last clean pass left nothing */
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* 1100 unparsable pin keys ("p.-0000"...) ahead of a real pin, more than
 * one page of the omap listing: reading the pins gets past them (before,
 * the listing restarted from the same key forever) and the real pin holds
 * through a compaction that keeps only the head. */
static void test_unparsable_pins(void **state)
{
	fx_t *f = *state;
	const rckpt_retention_t head_only = { 1, 0 };
	rckpt_io_t *io = NULL;
	unsigned i;

	for (i = 0; i < 4; i++)
		assert_int_equal(save_next(f), 0);
	assert_int_equal(rckpt_job_pin(f->j, 2, 1), 0);
	assert_int_equal(mem_pool_open(f->pool, "faults", &io), 0);
	for (i = 0; i < 1100; i++) {
		char key[32];
		snprintf(key, sizeof(key), "p.-%04u", i);
		assert_int_equal(io->ops->omap_set(io, "rckpt.job", key, "", 0), 0);
	}
	io->ops->close(io);
	assert_int_equal(rckpt_job_compact(f->j, &head_only, NULL), 0);
	assert_int_equal(rckpt_job_pinned(f->j, 2), 1);
	forget_dropped(f, &head_only, 2);
	nothing_lost(f);
	assert_int_equal(f->ncommitted, 2); /* the pin and the head */
}

/* Daly's interval at points worked by hand from the formula in rckpt.h. */
static void test_policy_interval(void **state)
{
	(void)state;
	/* delta 60, M 3600: sqrt(432000) (1 + sqrt(1/120)/3 + 1/1080) - 60 */
	assert_float_equal(rckpt_policy_interval(60, 3600, 0), 617.8756, 1e-3);
	/* the restart time adds to M: delta 60, M 3600 + 400 */
	assert_float_equal(rckpt_policy_interval(60, 3600, 400), 653.3977, 1e-3);
	/* delta >= 2M: M */
	assert_float_equal(rckpt_policy_interval(100, 40, 10), 50.0, 1e-9);
	assert_float_equal(rckpt_policy_interval(0, 3600, 0), 0.0, 0);
	assert_float_equal(rckpt_policy_interval(-1, 3600, 0), 0.0, 0);
}

/* The policy over the pool: a notice goes on record in the job and the
 * pool, a restart reads it back; each operation of opening the policy
 * fails in turn, cleanly; a notice whose record cannot be written still
 * says save now. */
static void test_policy_faults(void **state)
{
	fx_t *f = *state;
	rckpt_policy_t *p;
	rckpt_policy_info_t in;
	unsigned k, failed = 0;

	assert_int_equal(rckpt_policy_open(f->j, &p, NULL), 0);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_int_equal(in.preemptions, 0);
	assert_float_equal(in.mttp_s, 3600, 0);
	assert_int_equal(rckpt_policy_should_save(p, 1), RCKPT_POLICY_SAVE); /* the first */
	rckpt_policy_saved(p, 1);
	rckpt_policy_save_time(p, 2.0);
	assert_int_equal(rckpt_policy_should_save(p, 2), RCKPT_POLICY_CONTINUE);
	rckpt_policy_notify(p);
	assert_int_equal(rckpt_policy_should_save(p, 3), RCKPT_POLICY_EMERGENCY);
	rckpt_policy_saved(p, 3);
	assert_int_equal(rckpt_policy_should_save(p, 4), RCKPT_POLICY_STOP);
	rckpt_policy_close(p);

	/* the restart finds the notice, and records its restart time */
	assert_int_equal(rckpt_policy_open(f->j, &p, NULL), 0);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_int_equal(in.preemptions, 1);
	assert_int_equal(in.job_preemptions, 1);
	assert_true(in.mttp_s >= 0 && in.mttp_s < 60);
	assert_int_equal(rckpt_policy_restart_time(p, 5.0), 0);
	rckpt_policy_close(p);

	for (k = 1;; k++) {
		const mem_fault_t fault = { NULL, k, -EIO, 0, 0, 0, NULL, NULL };
		int rc, struck;
		mem_pool_fault(f->pool, &fault);
		rc = rckpt_policy_open(f->j, &p, NULL);
		struck = mem_pool_struck(f->pool);
		mem_pool_fault(f->pool, NULL);
		if (rc == 0) {
			rckpt_policy_close(p);
			if (!struck)
				break;
			continue;
		}
		assert_true(struck);
		assert_null(p);
		assert_int_equal(rc, -EIO);
		assert_says(f, "cannot read the preemption history");
		failed++;
	}
	assert_true(failed >= 2); /* the job's history and the pool's */
	assert_int_equal(rckpt_policy_open(f->j, &p, NULL), 0);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_int_equal(in.preemptions, 1);
	assert_float_equal(in.restart_s, 5.0, 0);
	/* a notice whose record fails: the decision does not wait on it */
	{
		const mem_fault_t fault = { "omap_set", 1, -EIO, 0, 0, 0, NULL, NULL };
		mem_pool_fault(f->pool, &fault);
		rckpt_policy_notify(p);
		assert_int_equal(rckpt_policy_should_save(p, 1), RCKPT_POLICY_EMERGENCY);
		assert_true(mem_pool_struck(f->pool));
		mem_pool_fault(f->pool, NULL);
	}
	rckpt_policy_close(p);
	assert_int_equal(rckpt_policy_open(f->j, &p, NULL), 0);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_int_equal(in.job_preemptions, 1); /* the job's record failed */
	assert_int_equal(in.preemptions, 2);     /* the pool's was written */
	rckpt_policy_close(p);
	nothing_lost(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_compaction_faults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_faults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unparsable_pins, setup, teardown),
		cmocka_unit_test(test_policy_interval),
		cmocka_unit_test_setup_teardown(test_policy_faults, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
