/*
 * test_store_faults.c — the checkpoint store driven through its fault
 * points without a cluster: librckpt's store over the in-memory pool of
 * tests/common/mem_io.c, which runs the real object-class methods, fails
 * a chosen operation, and (linked with --wrap=malloc,calloc,realloc) the
 * k-th allocation of the library.
 *
 * After every fault: the call fails with the cause in its message (or, for
 * a fault the library absorbs, succeeds), every step committed before
 * restores to exactly what it restored to when it was committed, the
 * lossless tensors to their source bits, the head has not moved, and the
 * next save of the same job succeeds and restores.
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

/* ---- failing an allocation of the library ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);

/* Each call site fails once: an armed fault fails the next allocation from
 * a site that has not failed yet, so a loop that arms it until nothing
 * fails any more has failed every allocation site the call reaches. */
#define MAX_SITES 4096
static const void *failed_site[MAX_SITES];
static unsigned nfailed_sites;
static int alloc_armed, alloc_struck;

static int alloc_fails(const void *site)
{
	unsigned i;
	if (!alloc_armed || mem_pool_busy())
		return 0;
	for (i = 0; i < nfailed_sites; i++)
		if (failed_site[i] == site)
			return 0;
	if (nfailed_sites == MAX_SITES)
		return 0;
	failed_site[nfailed_sites++] = site;
	alloc_armed = 0;
	alloc_struck = 1;
	return 1;
}

void *__wrap_malloc(size_t n)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __real_realloc(p, n);
}

/* Arms the next allocation from a site that has not failed yet (on, 1),
 * or disarms (0); sites_forget starts the list of failed sites over. */
static void fail_allocation(int on)
{
	if (on)
		alloc_struck = 0;
	alloc_armed = on;
}

static void sites_forget(void)
{
	nfailed_sites = 0;
}

/* ---- a model whose steps drift a little, as training does ---- */

#define NT 5
static const struct {
	const char *name;
	unsigned ndim;
	uint64_t shape[2];
} MODEL[NT] = {
	{ "embed.weight", 2, { 64, 16 } }, { "fc1.bias", 1, { 48 } },
	{ "fc1.weight", 2, { 48, 64 } },   { "fc2.weight", 2, { 10, 48 } },
	{ "norm.weight", 1, { 48 } },
};

static uint64_t numel(unsigned t)
{
	return MODEL[t].shape[0] * (MODEL[t].ndim > 1 ? MODEL[t].shape[1] : 1);
}

static double gauss(uint64_t *x)
{
	uint64_t a, b;
	double u, v;
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	a = *x >> 11;
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	b = *x >> 11;
	u = ((double)a + 1) / 9007199254740993.0;
	v = (double)b / 9007199254740992.0;
	return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

typedef struct model {
	float *v[NT];
	rckpt_tensor_t t[NT];
} model_t;

/* Step s of the run: step 0's values plus s small moves. */
static void model_at(model_t *m, unsigned s)
{
	unsigned t, k;
	for (t = 0; t < NT; t++) {
		uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1), i;
		if (m->v[t] == NULL)
			assert_non_null(m->v[t] = __real_malloc(4 * numel(t)));
		for (i = 0; i < numel(t); i++)
			m->v[t][i] = (float)(0.05 * gauss(&x));
		for (k = 1; k <= s; k++)
			for (i = 0; i < numel(t); i++)
				m->v[t][i] += (float)(0.002 * gauss(&x));
		m->t[t].name = MODEL[t].name;
		m->t[t].dtype = RCKPT_F32;
		m->t[t].ndim = MODEL[t].ndim;
		memcpy(m->t[t].shape, MODEL[t].shape, sizeof(MODEL[t].shape));
		m->t[t].data = m->v[t];
	}
}

static void model_free(model_t *m)
{
	unsigned t;
	for (t = 0; t < NT; t++)
		free(m->v[t]);
}

/* ---- the fixture: a pool, a handle on it, a writer ---- */

#define MAX_COMMITTED 64

typedef struct fx {
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *j;
	model_t m;
	unsigned next; /* the next step to save */
	/* what each committed step restored to when it was committed */
	uint64_t step[MAX_COMMITTED];
	float *got[MAX_COMMITTED][NT];
	unsigned ncommitted;
} fx_t;

static int open_writer(fx_t *f)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	o.writer = 1;
	o.chunk_params = 1024; /* a few chunks: appends in the middle of a step */
	o.inflight = 2;        /* and some reaped while others are encoded */
	o.compute = RCKPT_COMPUTE_CPU;
	return rckpt_job_open(f->h, &f->j, "faults", &o);
}

static int setup(void **state)
{
	fx_t *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(mem_pool_create(&f->pool), 0);
	assert_int_equal(rckpt_create(&f->h), 0);
	assert_int_equal(rckpt_set_io(f->h, mem_pool_open, f->pool, "mem"), 0);
	assert_int_equal(open_writer(f), 0);
	f->next = 1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_t *f = *state;
	unsigned i, t;
	rckpt_job_close(f->j);
	rckpt_destroy(f->h);
	mem_pool_destroy(f->pool);
	model_free(&f->m);
	for (i = 0; i < f->ncommitted; i++)
		for (t = 0; t < NT; t++)
			free(f->got[i][t]);
	free(f);
	return 0;
}

/* Restores step s into out[t] (fp32, numel(t) each). */
static int restore(fx_t *f, uint64_t s, float **out)
{
	rckpt_restored_t *r = NULL;
	unsigned t;
	int rc = rckpt_job_restore(f->j, s, &r, NULL);
	for (t = 0; rc == 0 && t < NT; t++) {
		int i = rckpt_restored_find(r, MODEL[t].name);
		if (i < 0) {
			rc = i;
			break;
		}
		rc = rckpt_restored_read(r, (unsigned)i, out[t], 4 * numel(t));
	}
	rckpt_restored_free(r);
	return rc;
}

/* A step that was just committed: what it restores to is kept, and its
 * lossless tensors must be the source's bits. */
static void committed(fx_t *f, uint64_t s)
{
	unsigned t, i = f->ncommitted++;
	assert_true(i < MAX_COMMITTED);
	f->step[i] = s;
	for (t = 0; t < NT; t++)
		assert_non_null(f->got[i][t] = __real_malloc(4 * numel(t)));
	assert_int_equal(restore(f, s, f->got[i]), 0);
	for (t = 0; t < NT; t++)
		if (MODEL[t].ndim == 1)
			assert_memory_equal(f->got[i][t], f->m.v[t], 4 * numel(t));
}

/* Nothing committed is lost: every committed step restores as it did,
 * and the head is the last of them. */
static void nothing_lost(fx_t *f)
{
	float *now[NT];
	rckpt_step_info_t si[MAX_COMMITTED];
	unsigned i, t, n = 0;
	int more = 0;
	for (t = 0; t < NT; t++)
		assert_non_null(now[t] = __real_malloc(4 * numel(t)));
	for (i = 0; i < f->ncommitted; i++) {
		if (restore(f, f->step[i], now) != 0)
			fail_msg("committed step %llu does not restore: %s", (unsigned long long)f->step[i],
				 rckpt_errmsg(f->h));
		for (t = 0; t < NT; t++)
			assert_memory_equal(now[t], f->got[i][t], 4 * numel(t));
	}
	for (t = 0; t < NT; t++)
		free(now[t]);
	assert_int_equal(rckpt_job_steps(f->j, RCKPT_LATEST, si, MAX_COMMITTED, &n, &more), 0);
	assert_int_equal(n, f->ncommitted);
	for (i = 0; i < n; i++)
		assert_int_equal(si[i].step, f->step[i]);
}

/* Saves the next step of the run; 0 or the save's error. */
static int save_next(fx_t *f)
{
	const unsigned s = f->next++;
	int rc;
	model_at(&f->m, s);
	rc = rckpt_job_save(f->j, s, f->m.t, NT, NULL, 0, NULL);
	if (rc == 0)
		committed(f, s);
	return rc;
}

static void assert_says(fx_t *f, const char *what)
{
	if (strstr(rckpt_errmsg(f->h), what) == NULL)
		fail_msg("the error \"%s\" does not say \"%s\"", rckpt_errmsg(f->h), what);
}

/* ---- the fault points ---- */

/* Every allocation site of a save, in turn, fails: in a delta save, and
 * in the base that follows a failed one. */
static void test_allocation_fails_at_each_step_of_a_save(void **state)
{
	fx_t *f = *state;
	long k;
	unsigned failed = 0, absorbed = 0;

	assert_int_equal(save_next(f), 0); /* a base */
	assert_int_equal(save_next(f), 0); /* a delta */
	sites_forget();
	for (k = 0;; k++) {
		int rc;
		fail_allocation(1);
		model_at(&f->m, f->next);
		rc = rckpt_job_save(f->j, f->next, f->m.t, NT, NULL, 0, NULL);
		fail_allocation(0);
		if (!alloc_struck) { /* every site has failed once */
			assert_int_equal(rc, 0);
			committed(f, f->next++);
			break;
		}
		if (rc == 0) { /* the library did without it */
			committed(f, f->next++);
			absorbed++;
		} else {
			if (rc != -ENOMEM)
				fail_msg("allocation site %ld: %d (%s), not -ENOMEM", k, rc,
					 rckpt_errmsg(f->h));
			assert_says(f, "memory");
			f->next++;
			failed++;
		}
		nothing_lost(f);
	}
	print_message("allocation sites of a save: %ld; %u failed the save, %u were absorbed\n", k,
		      failed, absorbed);
	assert_true(k > 50);
	assert_true(failed > 0);
	/* and the job goes on */
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* An append fails in the middle of a step (some chunks have the step's
 * record, some not). */
static void test_append_fails_mid_step(void **state)
{
	fx_t *f = *state;
	const mem_fault_t fault = { "append", 3, -EIO, 0, 0 };
	unsigned appends;

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	appends = mem_pool_calls(f->pool, "append");
	mem_pool_fault(f->pool, &fault);
	model_at(&f->m, f->next);
	assert_int_equal(rckpt_job_save(f->j, f->next++, f->m.t, NT, NULL, 0, NULL), -EIO);
	assert_true(mem_pool_struck(f->pool));
	mem_pool_fault(f->pool, NULL);
	assert_true(mem_pool_calls(f->pool, "append") - appends >= 3);
	assert_says(f, "cannot append step");
	assert_says(f, "Input/output error");
	nothing_lost(f);
	/* the next save trims what the failed one appended, and is a base */
	{
		rckpt_save_stats_t st;
		model_at(&f->m, f->next);
		assert_int_equal(rckpt_job_save(f->j, f->next, f->m.t, NT, NULL, 0, &st), 0);
		assert_true(st.is_base);
		committed(f, f->next++);
	}
	assert_int_equal(save_next(f), 0); /* and deltas follow it */
	nothing_lost(f);
}

/* An append that the cluster runs after the ones started later. */
static void test_append_runs_late(void **state)
{
	fx_t *f = *state;
	const mem_fault_t late = { "append", 2, 0, 1, 0 };
	assert_int_equal(save_next(f), 0);
	mem_pool_fault(f->pool, &late);
	assert_int_equal(save_next(f), 0);
	assert_true(mem_pool_struck(f->pool));
	mem_pool_fault(f->pool, NULL);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* The commit fails: the step's records and manifest are written, the head
 * does not move. */
static void test_commit_fails(void **state)
{
	fx_t *f = *state;
	const mem_fault_t fault = { "commit", 1, -EIO, 0, 0 };
	const uint64_t lost = 3;
	rckpt_restored_t *r = NULL;

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	mem_pool_fault(f->pool, &fault);
	model_at(&f->m, f->next);
	assert_int_equal(rckpt_job_save(f->j, f->next++, f->m.t, NT, NULL, 0, NULL), -EIO);
	mem_pool_fault(f->pool, NULL);
	assert_says(f, "cannot commit step 3");
	nothing_lost(f);
	assert_int_equal(rckpt_job_restore(f->j, lost, &r, NULL), -ENOENT);
	assert_null(r);
	/* a lost lease looks the same from here: the head moved under us */
	{
		const mem_fault_t stale = { "commit", 1, -ESTALE, 0, 0 };
		mem_pool_fault(f->pool, &stale);
		model_at(&f->m, f->next);
		assert_int_equal(rckpt_job_save(f->j, f->next++, f->m.t, NT, NULL, 0, NULL), -ESTALE);
		mem_pool_fault(f->pool, NULL);
		assert_says(f, "another writer");
	}
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* A commit lands but its reply is lost (the network failed as the OSD
 * answered): the save reports the failure, yet the step is committed. The
 * next save trims past the head as the job has it, not as the writer last
 * saw it, so the step stays; before, its trim cut the step's records. */
static void test_commit_reply_lost(void **state)
{
	fx_t *f = *state;
	const mem_fault_t lost = { "commit", 1, -ETIMEDOUT, 0, 1 };

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	mem_pool_fault(f->pool, &lost);
	model_at(&f->m, f->next);
	assert_int_equal(rckpt_job_save(f->j, f->next, f->m.t, NT, NULL, 0, NULL), -ETIMEDOUT);
	assert_true(mem_pool_struck(f->pool));
	mem_pool_fault(f->pool, NULL);
	assert_says(f, "cannot commit step 3");
	committed(f, f->next++); /* it is, though the writer was told otherwise */
	nothing_lost(f);
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* A manifest that cannot be written: nothing is committed. */
static void test_manifest_write_fails(void **state)
{
	fx_t *f = *state;
	const mem_fault_t fault = { "write_full", 1, -ENOSPC, 0, 0 };
	assert_int_equal(save_next(f), 0);
	mem_pool_fault(f->pool, &fault);
	model_at(&f->m, f->next);
	assert_int_equal(rckpt_job_save(f->j, f->next++, f->m.t, NT, NULL, 0, NULL), -ENOSPC);
	mem_pool_fault(f->pool, NULL);
	assert_says(f, "cannot write the manifest");
	nothing_lost(f);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* A materialize fails during a restore: the restore fails naming the
 * chunk, and the next one succeeds with the same values. */
static void test_materialize_fails(void **state)
{
	fx_t *f = *state;
	float *now[NT];
	unsigned t;
	const mem_fault_t fault = { "materialize", 2, -EIO, 0, 0 };

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	for (t = 0; t < NT; t++)
		assert_non_null(now[t] = __real_malloc(4 * numel(t)));
	mem_pool_fault(f->pool, &fault);
	assert_int_equal(restore(f, 2, now), -EIO);
	assert_true(mem_pool_struck(f->pool));
	mem_pool_fault(f->pool, NULL);
	assert_says(f, "cannot materialize step 2 from faults/rckpt.chunk.");
	for (t = 0; t < NT; t++)
		free(now[t]);
	nothing_lost(f);
	/* and a reader's restore fails alike, leaving the job as it was */
	{
		const mem_fault_t readfault = { "read", 1, -EIO, 0, 0 };
		mem_pool_fault(f->pool, &readfault);
		assert_int_not_equal(rckpt_job_restore(f->j, 3, &(rckpt_restored_t *){ NULL }, NULL), 0);
		mem_pool_fault(f->pool, NULL);
		assert_says(f, "cannot read the manifest of step 3");
	}
	nothing_lost(f);
}

/* A restore's allocations fail in turn: each one fails cleanly or
 * succeeds, and the next restore gives the same values. */
static void test_allocation_fails_in_a_restore(void **state)
{
	fx_t *f = *state;
	float *now[NT];
	unsigned t;
	long k;

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	for (t = 0; t < NT; t++)
		assert_non_null(now[t] = __real_malloc(4 * numel(t)));
	sites_forget();
	for (k = 0;; k++) {
		int rc;
		fail_allocation(1);
		rc = restore(f, 2, now);
		fail_allocation(0);
		if (!alloc_struck) {
			assert_int_equal(rc, 0);
			break;
		}
		if (rc != 0 && rc != -ENOMEM)
			fail_msg("allocation site %ld of a restore: %d (%s)", k, rc, rckpt_errmsg(f->h));
	}
	print_message("allocation sites of a restore: %ld\n", k);
	assert_true(k > 20);
	for (t = 0; t < NT; t++)
		free(now[t]);
	nothing_lost(f);
}

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
		const mem_fault_t fault = { NULL, k, -EIO, 0, 0 };
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
	const mem_fault_t mid = { "append", 3, -EIO, 0, 0 };
	unsigned k, removed = 0, failed = 0;

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	mem_pool_fault(f->pool, &mid);
	model_at(&f->m, f->next);
	assert_int_equal(rckpt_job_save(f->j, f->next++, f->m.t, NT, NULL, 0, NULL), -EIO);
	mem_pool_fault(f->pool, NULL);
	for (k = 1;; k++) {
		const mem_fault_t fault = { NULL, k, -EIO, 0, 0 };
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
		const mem_fault_t fault = { NULL, k, -EIO, 0, 0 };
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
		const mem_fault_t fault = { "omap_set", 1, -EIO, 0, 0 };
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
		cmocka_unit_test_setup_teardown(test_allocation_fails_at_each_step_of_a_save, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_append_fails_mid_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_append_runs_late, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_reply_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_manifest_write_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_materialize_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allocation_fails_in_a_restore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compaction_faults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_faults, setup, teardown),
		cmocka_unit_test(test_policy_interval),
		cmocka_unit_test_setup_teardown(test_policy_faults, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
