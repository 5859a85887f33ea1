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
#include "rckpt_store_wire.h"
#include "rckpt_wire.h"
#include "cls_rckpt_methods.h"
#include "store_fx.h"
#include "bf16_round.h"

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
	const mem_fault_t fault = { "append", 3, -EIO, 0, 0, 0, NULL, NULL };
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
	const mem_fault_t late = { "append", 2, 0, 1, 0, 0, NULL, NULL };
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
	const mem_fault_t fault = { "commit", 1, -EIO, 0, 0, 0, NULL, NULL };
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
		const mem_fault_t stale = { "commit", 1, -ESTALE, 0, 0, 0, NULL, NULL };
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
	const mem_fault_t lost = { "commit", 1, -ETIMEDOUT, 0, 1, 0, NULL, NULL };

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
	const mem_fault_t fault = { "put", 1, -ENOSPC, 0, 0, 0, NULL, NULL };
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
	const mem_fault_t fault = { "materialize", 2, -EIO, 0, 0, 0, NULL, NULL };

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
		const mem_fault_t readfault = { "read", 1, -EIO, 0, 0, 0, NULL, NULL };
		mem_pool_fault(f->pool, &readfault);
		assert_int_not_equal(rckpt_job_restore(f->j, 3, &(rckpt_restored_t *){ NULL }, NULL), 0);
		mem_pool_fault(f->pool, NULL);
		assert_says(f, "cannot read the manifest of step 3");
	}
	nothing_lost(f);
}

/* A head's summary that disagrees with its manifest on the chunk count
 * (a trainer may write the job object's keys): a restore of the head,
 * which reads the manifest beside the materialize calls, fails -EBADMSG
 * saying so, changing nothing; with the summary put back it restores. An
 * older plugin's head reply (version 1: no summary) restores as before,
 * reading the summary apart. */
static void test_summary_disagrees(void **state)
{
	fx_t *f = *state;
	float *now[NT];
	rckpt_io_t *io = NULL;
	rckpt_buf_t was = RCKPT_BUF_INIT, rep = RCKPT_BUF_INIT;
	rckpt_store_summary_t s;
	rckpt_msg_head_t h = { 2, 2, { NULL, 0 } };
	uint8_t b[RCKPT_STORE_SUMMARY_BYTES];
	char key[32];
	unsigned t, d, reads, n0;

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	for (t = 0; t < NT; t++)
		assert_non_null(now[t] = __real_malloc(4 * numel(t)));
	assert_int_equal(mem_pool_open(f->pool, "faults", &io), 0);
	assert_int_equal(rckpt_store_step_key(key, sizeof(key), 's', 2), 0);
	assert_int_equal(io->ops->omap_get(io, RCKPT_STORE_JOB_OID, key, &was), 0);
	assert_int_equal(rckpt_store_summary_get(&s, was.p, was.len), 0);
	n0 = s.nchunks;
	assert_true(n0 >= 2);
	for (d = 0; d < 3; d++) { /* one chunk more, one fewer, a great many */
		const unsigned calls = mem_pool_calls(f->pool, "materialize");
		s.nchunks = d == 0 ? n0 + 1 : d == 1 ? n0 - 1 : 100000;
		rckpt_store_summary_put(b, &s);
		assert_int_equal(io->ops->omap_set(io, RCKPT_STORE_JOB_OID, key, b, sizeof(b)), 0);
		assert_int_equal(restore(f, 2, now), -EBADMSG);
		assert_says(f, "step 2: its manifest names");
		/* a window of calls at most before the manifest is checked (the
		 * many: none, the manifest read first) */
		assert_true(mem_pool_calls(f->pool, "materialize") - calls <= (d == 2 ? 0 : s.nchunks));
	}
	assert_int_equal(io->ops->omap_set(io, RCKPT_STORE_JOB_OID, key, was.p, was.len), 0);
	reads = mem_pool_calls(f->pool, "omap_get");
	d = mem_pool_calls(f->pool, "materialize");
	assert_int_equal(restore(f, 2, now), 0);
	assert_int_equal(mem_pool_calls(f->pool, "omap_get"), reads); /* the summary came with the head */
	assert_int_equal(mem_pool_calls(f->pool, "materialize") - d, n0); /* one a chunk */
	/* a version-1 head reply: the encoder's version-2 frame, cut back */
	assert_int_equal(rckpt_msg_head_encode(&rep, &h), 0);
	rep.p[2] = 1;
	rep.len -= 4; /* the empty summary's length */
	rep.p[8] = 16;
	mem_pool_forge(f->pool, "head", rep.p, rep.len);
	assert_int_equal(restore(f, 2, now), 0);
	assert_int_equal(mem_pool_calls(f->pool, "omap_get"), reads + 1); /* read apart */
	io->ops->close(io);
	rckpt_buf_free(&was);
	rckpt_buf_free(&rep);
	for (t = 0; t < NT; t++)
		free(now[t]);
	nothing_lost(f);
}

/* A manifest longer than the restore's first read of it (thousands of
 * tensors with long names): read on to its end, and every tensor restores
 * to what was saved. */
static void test_long_manifest(void **state)
{
	enum { N = 7000, E = 4 };
	fx_t *f = *state;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *r = NULL;
	rckpt_tensor_t *t = calloc(N, sizeof(*t));
	char (*names)[96] = calloc(N, sizeof(*names));
	float *v = calloc((size_t)N * E, sizeof(float)), back[E];
	rckpt_io_t *io = NULL;
	uint64_t size = 0;
	char oid[64];
	unsigned i, k;

	assert_true(t && names && v);
	for (i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "model.layers.%04u.a_rather_long_parameter_name.weight", i);
		for (k = 0; k < E; k++)
			v[i * E + k] = (float)(i * E + k);
		t[i] = (rckpt_tensor_t){ names[i], RCKPT_F32, 1, { E }, v + (size_t)i * E };
	}
	o.writer = 1;
	o.compute = RCKPT_COMPUTE_CPU;
	o.exact = 1;
	assert_int_equal(rckpt_job_open(f->h, &j, "many", &o), 0);
	assert_int_equal(rckpt_job_save(j, 1, t, N, NULL, 0, NULL), 0);
	assert_int_equal(mem_pool_open(f->pool, "many", &io), 0);
	rckpt_store_manifest_oid(oid, sizeof(oid), 1);
	assert_int_equal(io->ops->stat(io, oid, &size), 0);
	io->ops->close(io);
	assert_true(size > ((uint64_t)512 << 10)); /* twice the first read and more */
	assert_int_equal(rckpt_job_restore(j, RCKPT_LATEST, &r, NULL), 0);
	assert_int_equal(rckpt_restored_count(r), N);
	for (i = 0; i < N; i += 7) {
		int at = rckpt_restored_find(r, names[i]);
		assert_true(at >= 0);
		assert_int_equal(rckpt_restored_read(r, (unsigned)at, back, sizeof(back)), 0);
		assert_memory_equal(back, v + (size_t)i * E, sizeof(back));
	}
	rckpt_restored_free(r);
	rckpt_job_close(j);
	free(t);
	free(names);
	free(v);
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

/* One limit rules the client and the plugin (issue 25 item 5): chunks of
 * more parameters than the plugin decodes in one record are refused at
 * open, before anything is written; and a model of more tensors than one
 * record may hold segments of is laid into more chunks, so that it
 * restores (before, the save succeeded and every restore failed). */
static void test_chunk_limits(void **state)
{
	fx_t *f = *state;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *r = NULL;
	enum { MANY = 70000 };
	rckpt_tensor_t *t = calloc(MANY, sizeof(*t));
	char(*names)[16] = calloc(MANY, sizeof(*names));
	float *v = calloc(MANY, sizeof(*v)), got;
	unsigned i;

	assert_true(t && names && v);
	o.writer = 1;
	o.compute = RCKPT_COMPUTE_CPU;
	o.mem_budget = (uint64_t)1 << 30;
	{ /* names: not . or .., nothing that reads as an option (issue 63) */
		static const char *const bad[] = { "-trial", "..", ".", ".x", "a/b", "" };
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			assert_int_equal(rckpt_job_open(f->h, &j, bad[i], &o), -EINVAL);
			assert_says(f, "bad job name");
		}
		assert_int_equal(rckpt_job_open(f->h, &j, "_a.-b", &o), 0);
		rckpt_job_close(j);
	}
	o.chunk_params = RCKPT_STORE_CHUNK_ELEMENTS_MAX + 1;
	assert_int_equal(rckpt_job_open(f->h, &j, "limits", &o), -EINVAL);
	assert_says(f, "more than the OSD plugin takes");
	o.chunk_params = RCKPT_STORE_CHUNK_ELEMENTS_MAX;
	assert_int_equal(rckpt_job_open(f->h, &j, "limits", &o), 0);
	rckpt_job_close(j);

	o.chunk_params = 0; /* the default, 4 Mi: room for all of them but for the segment limit */
	assert_int_equal(rckpt_job_open(f->h, &j, "many", &o), 0);
	for (i = 0; i < MANY; i++) {
		snprintf(names[i], sizeof(names[i]), "b%06u.bias", i);
		v[i] = 0.001f * (float)i;
		t[i].name = names[i];
		t[i].dtype = RCKPT_F32;
		t[i].ndim = 1;
		t[i].shape[0] = 1;
		t[i].data = &v[i];
	}
	if (rckpt_job_save(j, 1, t, MANY, NULL, 0, NULL))
		fail_msg("save: %s", rckpt_errmsg(f->h));
	if (rckpt_job_restore(j, 1, &r, NULL))
		fail_msg("restore: %s", rckpt_errmsg(f->h));
	assert_int_equal(rckpt_restored_count(r), MANY);
	for (i = 0; i < MANY; i += 997) {
		float want = v[i];
		bf16_round(&want, 1); /* biases are kept as bf16 */
		assert_int_equal(rckpt_restored_read(r, i, &got, sizeof(got)), 0);
		assert_memory_equal(&got, &want, sizeof(got));
	}
	rckpt_restored_free(r);
	rckpt_job_close(j);
	free(t);
	free(names);
	free(v);
}

/* The steps listed now, in order, into steps[] (at most cap): the count. */
static unsigned listed(rckpt_job_t *j, uint64_t *steps, unsigned cap)
{
	rckpt_step_info_t si[256];
	uint64_t after = RCKPT_LATEST;
	unsigned n = 0, k, got = 0;
	int more = 1;
	while (more) {
		assert_int_equal(rckpt_job_steps(j, after, si, 256, &n, &more), 0);
		for (k = 0; k < n; k++)
			if (got < cap)
				steps[got++] = si[k].step;
		if (n == 0)
			break;
		after = si[n - 1].step;
	}
	return got;
}

/* A rewind over more steps than one call forgets has one commit point
 * (store.md "Rewind"): its writer dying at any call leaves the job as it
 * was (before the first call lands) or rewound (after it: the later steps
 * are no longer listed, and nothing commits until they are gone); the
 * next writer finishes it, and saves on. */
static void test_rewind_atomic(void **state)
{
	fx_t *f = *state;
	const unsigned total = 3000; /* three calls */
	uint64_t *steps = calloc(total + 1, sizeof(*steps));
	float w[16 * 16];
	rckpt_tensor_t t = { "w", RCKPT_F32, 2, { 16, 16 }, w };
	unsigned nth, s, k;
	assert_non_null(steps);
	for (nth = 1; nth <= 3; nth++) {
		rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
		rckpt_job_t *j = NULL;
		rckpt_io_t *io = NULL;
		rckpt_buf_t v = RCKPT_BUF_INIT;
		char name[16];
		const mem_fault_t crash = { "rewind", nth, -EIO, 0, 0, 0, NULL, NULL };
		unsigned n;
		snprintf(name, sizeof(name), "rw%u", nth);
		o.writer = 1;
		o.chunk_params = 1024;
		o.compute = RCKPT_COMPUTE_CPU;
		assert_int_equal(rckpt_job_open(f->h, &j, name, &o), 0);
		for (s = 1; s <= total; s++) { /* one small tensor: many steps, quickly */
			for (k = 0; k < 16 * 16; k++)
				w[k] = sinf(0.1f * (float)k) + 1e-3f * (float)s;
			assert_int_equal(rckpt_job_save(j, s, &t, 1, NULL, 0, NULL), 0);
		}
		mem_pool_fault(f->pool, &crash);
		assert_int_equal(rckpt_job_rewind(j, 5, NULL), -EIO); /* it dies there */
		mem_pool_fault(f->pool, NULL);
		n = listed(j, steps, total + 1);
		if (nth == 1) { /* nothing landed: as it was */
			assert_int_equal(n, total);
			assert_int_equal(steps[n - 1], total);
		} else { /* the first call landed: rewound, all at once */
			assert_int_equal(n, 5);
			assert_int_equal(steps[4], 5);
		}
		rckpt_job_close(j); /* a new writer: it finishes the rewind */
		j = NULL;
		assert_int_equal(rckpt_job_open(f->h, &j, name, &o), 0);
		n = listed(j, steps, total + 1);
		assert_int_equal(n, nth == 1 ? total : 5);
		assert_int_equal(mem_pool_open(f->pool, name, &io), 0);
		assert_int_equal(io->ops->omap_get(io, "rckpt.job", "rewinding", &v), -ENOENT);
		io->ops->close(io);
		if (nth > 1) {
			rckpt_restored_t *r = NULL;
			assert_int_equal(rckpt_job_save(j, 6, &t, 1, NULL, 0, NULL), 0);
			assert_int_equal(rckpt_job_restore(j, 5, &r, NULL), 0);
			rckpt_restored_free(r);
			assert_int_equal(listed(j, steps, total + 1), 6);
		}
		rckpt_job_close(j);
	}
	free(steps);
}

/* A committed step whose bytes declare far more than they hold (a 2048 x
 * 2048 tensor of almost nothing but zeros: a few hundred bytes stored) is
 * refused by restore with a message that says so, before the decoder
 * allocates for it; RCKPT_DECODE_RATIO_MAX lets a user who means it read
 * it. */
/* The newest version among the records job's chunk objects hold (first
 * segment), read through the class's index as a reader would. */
static unsigned newest_record_version(mem_pool_t *pool, const char *job)
{
	static uint8_t buf[1 << 20];
	rckpt_io_t *io;
	unsigned v = 0;
	uint32_t c;

	assert_int_equal(mem_pool_open(pool, job, &io), 0);
	for (c = 0;; c++) {
		char oid[64];
		rckpt_store_entry_t *e;
		uint32_t n, i;
		int len;
		assert_int_equal(rckpt_store_chunk_oid(oid, sizeof(oid), c), 0);
		if ((len = io->ops->call(io, oid, "rckpt", "index", NULL, 0, buf, sizeof(buf))) < 0)
			break; /* past the last chunk */
		assert_int_equal(rckpt_msg_index_decode(&e, &n, buf, (size_t)len), 0);
		for (i = 0; i < n; i++) {
			uint8_t h[8];
			assert_int_equal(io->ops->read(io, oid, h, sizeof(h), e[i].offset), (int)sizeof(h));
			v = h[4] > v ? h[4] : v;
		}
		free(e);
	}
	assert_true(c > 0);
	io->ops->close(io);
	return v;
}

/* A writer writes the records the OSDs' class reads: told by its
 * `version` answer that it reads chunk records up to version 2, it
 * writes version 1 records only (no context-coded streams, no predicted
 * blobs), where this class's writer writes version 3 or later; the saves
 * restore as before. It asks once per handle. */
static void test_writes_what_the_class_reads(void **state)
{
	fx_t *f = *state;
	rckpt_wire_version_t v;
	uint8_t rep[RCKPT_WIRE_VERSION_BOUND];
	size_t len;
	unsigned i, calls;
	int n;

	/* this class's own answer, then its record range cut to version 2 */
	{
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		assert_int_equal(cls_rckpt_version(NULL, 0, &out), 0);
		assert_true(out.len <= sizeof(rep));
		memcpy(rep, out.p, out.len);
		n = (int)out.len;
		rckpt_buf_free(&out);
	}
	assert_int_equal(rckpt_wire_version_decode(&v, rep, (size_t)n), 0);
	for (i = 0; i < v.nformats && strcmp(v.formats[i].name, "ckpt-record") != 0; i++)
		;
	assert_true(i < v.nformats && v.formats[i].max_version >= 4);
	v.formats[i].max_version = 2;
	assert_int_equal(rckpt_wire_version_encode(rep, sizeof(rep), &len, &v), 0);
	mem_pool_forge(f->pool, "version", rep, len);
	for (i = 0; i < 4; i++)
		assert_int_equal(save_next(f), 0);
	calls = mem_pool_calls(f->pool, "version");
	for (i = 0; i < 2; i++)
		assert_int_equal(save_next(f), 0);
	assert_int_equal(mem_pool_calls(f->pool, "version"), calls); /* asked once */
	assert_int_equal(newest_record_version(f->pool, "faults"), 1);
	nothing_lost(f);
}

/* The same saves to a class that reads them all: context-coded streams
 * (version 3) at least. */
static void test_writes_newest_to_this_class(void **state)
{
	fx_t *f = *state;
	unsigned i;
	for (i = 0; i < 4; i++)
		assert_int_equal(save_next(f), 0);
	assert_true(newest_record_version(f->pool, "faults") >= 3);
}

/* A list reply with more steps than the call asked for (not this
 * plugin's, or damaged) is refused, and nothing is written past the
 * caller's room (it was, before: out[] overran). */
static void test_list_reply_too_long(void **state)
{
	fx_t *f = *state;
	rckpt_buf_t rep = RCKPT_BUF_INIT;
	rckpt_msg_steps_writer_t w;
	rckpt_step_info_t si[2];
	const uint8_t *tail = (const uint8_t *)&si[1];
	unsigned n = 0, i;
	int more = 0;

	assert_int_equal(save_next(f), 0);
	rckpt_msg_stepsum_begin(&w, &rep);
	rckpt_msg_stepsum_add(&w, 1, NULL, 0);
	rckpt_msg_stepsum_add(&w, 2, NULL, 0);
	assert_int_equal(rckpt_msg_stepsum_end(&w, 0), 0);
	mem_pool_forge(f->pool, "list", rep.p, rep.len);
	memset(si, 0xa5, sizeof(si));
	assert_int_equal(rckpt_job_steps(f->j, RCKPT_LATEST, si, 1, &n, &more), -EBADMSG);
	for (i = 0; i < sizeof(si[1]); i++)
		assert_int_equal(tail[i], 0xa5);
	/* the next call is the plugin's again */
	assert_int_equal(rckpt_job_steps(f->j, RCKPT_LATEST, si, 1, &n, &more), 0);
	assert_int_equal(n, 1);
	rckpt_buf_free(&rep);
}

static void test_restore_declares_too_much(void **state)
{
	fx_t *f = *state;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *r = NULL;
	float *w = calloc(2048 * 2048, sizeof(float));
	rckpt_tensor_t t = { "w", RCKPT_F32, 2, { 2048, 2048 }, w };
	rckpt_save_stats_t st;
	assert_non_null(w);
	w[7] = 1.0f;
	o.writer = 1;
	o.compute = RCKPT_COMPUTE_CPU;
	assert_int_equal(rckpt_job_open(f->h, &j, "bomb", &o), 0);
	assert_int_equal(rckpt_job_save(j, 1, &t, 1, NULL, 0, &st), 0);
	assert_true(st.enc_bytes < 4096); /* 16 MiB of fp32 in a few hundred bytes */
	unsetenv("RCKPT_DECODE_RATIO_MAX");
	assert_int_equal(rckpt_job_restore(j, 1, &r, NULL), -E2BIG);
	assert_null(r);
	assert_says(f, "declares more values than its bytes can hold");
	setenv("RCKPT_DECODE_RATIO_MAX", "100000", 1);
	assert_int_equal(rckpt_job_restore(j, 1, &r, NULL), 0);
	unsetenv("RCKPT_DECODE_RATIO_MAX");
	rckpt_restored_free(r);
	rckpt_job_close(j);
	free(w);
}

/* A chunk object past the class's bounds, as a trainer can plant with
 * plain omap writes (issue 64): 1100 more index entries in the second
 * chunk (copies of step 3's, of steps past the head). Compaction is refused, naming the object
 * and the repair, and changes nothing; every step still restores (folded
 * in the client). */
static void test_compact_oversized_chunk(void **state)
{
	fx_t *f = *state;
	rckpt_io_t *io = NULL;
	rckpt_retention_t all = { 0, 0 };
	rckpt_buf_t v = RCKPT_BUF_INIT;
	rckpt_store_entry_t e;
	uint8_t b[RCKPT_STORE_ENTRY_BYTES];
	char key[32];
	unsigned i;
	for (i = 0; i < 3; i++)
		assert_int_equal(save_next(f), 0);
	assert_int_equal(mem_pool_open(f->pool, "faults", &io), 0);
	assert_int_equal(rckpt_store_step_key(key, sizeof(key), 'r', 3), 0);
	assert_int_equal(io->ops->omap_get(io, "rckpt.chunk.00001", key, &v), 0);
	assert_int_equal(rckpt_store_entry_get(&e, v.p, v.len), 0);
	for (i = 0; i < 1100; i++) {
		e.step = 1000 + i;
		assert_int_equal(rckpt_store_entry_put(b, &e), 0);
		assert_int_equal(rckpt_store_step_key(key, sizeof(key), 'r', e.step), 0);
		assert_int_equal(io->ops->omap_set(io, "rckpt.chunk.00001", key, b, sizeof(b)), 0);
	}
	assert_int_equal(rckpt_job_compact(f->j, &all, NULL), -E2BIG);
	assert_says(f, "rckpt.chunk.00001 takes no rckpt call");
	assert_says(f, "rckpt ckpt branch --job faults --step S --upto 3 ");
	nothing_lost(f);
	/* the repair it names: a branch copies steps 1..3 into a job in shape,
	 * which restores to the same values and compacts */
	{
		rckpt_job_t *b = NULL;
		rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
		float *out[NT];
		unsigned t, k;
		o.compute = RCKPT_COMPUTE_CPU;
		assert_int_equal(rckpt_job_branch(f->j, 1, 3, "repaired"), 0);
		assert_int_equal(rckpt_job_open(f->h, &b, "repaired", &o), 0);
		for (t = 0; t < NT; t++)
			assert_non_null(out[t] = malloc(4 * numel(t)));
		for (k = 0; k < 3; k++) {
			rckpt_restored_t *r = NULL;
			assert_int_equal(rckpt_job_restore(b, k + 1, &r, NULL), 0);
			for (t = 0; t < NT; t++) {
				int at = rckpt_restored_find(r, MODEL[t].name);
				assert_true(at >= 0);
				assert_int_equal(rckpt_restored_read(r, (unsigned)at, out[t], 4 * numel(t)), 0);
				assert_memory_equal(out[t], f->got[k][t], 4 * numel(t));
			}
			rckpt_restored_free(r);
		}
		assert_int_equal(rckpt_job_compact(b, &all, NULL), 0);
		for (t = 0; t < NT; t++)
			free(out[t]);
		rckpt_job_close(b);
	}
	rckpt_buf_free(&v);
	io->ops->close(io);
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
		cmocka_unit_test_setup_teardown(test_summary_disagrees, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_manifest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allocation_fails_in_a_restore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rewind_atomic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restore_declares_too_much, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_reply_too_long, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writes_what_the_class_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writes_newest_to_this_class, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compact_oversized_chunk, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
