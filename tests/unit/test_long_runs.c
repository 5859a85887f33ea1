/*
 * test_long_runs.c — long runs on a stock cluster (issue 26), over the
 * in-memory pool that runs the real object-class methods and, like an OSD,
 * refuses any write that would make an object larger than its
 * osd_max_object_size:
 *  - chunk logs as segment objects (store.md "Segments"): a job far larger
 *    than that limit saves every step (the writer rolls to a new segment
 *    before a chunk object could pass its cap, never after a refusal),
 *    restores every step to what it restored to when saved, survives a new
 *    writer, a save that failed as it rolled, compaction under retention
 *    (old segments go whole), gc and verify;
 *  - what open refuses: a segment cap the OSDs cannot hold, an
 *    erasure-coded pool, eps 0;
 *  - rewind (store.md "Rewind"): back to a committed step and on anew,
 *    across segments, a restarted writer continuing the new line, gc
 *    removing the abandoned line, onto a compacted line (a head whose
 *    chain is longer than one call of the test's plugin may fold: the
 *    plugin's work per call is set low in CMakeLists.txt); refused to an
 *    uncommitted or dropped
 *    step, past a pinned one, and for a stale writer;
 *  - restores without the class (store.md "Restore without the plugin").
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "mem_io.h"
#include "rckpt.h"
#include "rckpt_internal.h"
#include "rckpt_store_wire.h"
#include "bf16_round.h"

#define N ((uint64_t)1 << 18)      /* parameters: 4 chunks of 64 Ki */
#define NW ((uint64_t)1 << 14)     /* of them in a matrix (lossy); the rest a vector
				      (kept as bf16: large records, so segments fill fast) */
#define CHUNK ((uint64_t)1 << 16)
#define LIMIT ((uint64_t)2 << 20)  /* the OSDs' largest object: segments of 1 MiB */
#define STEPS 120

typedef struct sj {
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *j;
	rckpt_job_opts_t o;
	float *w;
	unsigned drift; /* added to the step: another line of values */
	uint64_t hash[STEPS + 3]; /* what step s restored to when saved (FNV-1a) */
} sj_t;

static uint64_t fnv(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;
	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* Step s's weights: a smooth field that drifts, and noise that changes
 * every step, so that each delta carries real changes; the vector's noise
 * fills all 16 bits of its bf16 (large records). */
static void model_at(float *w, unsigned s)
{
	uint64_t i;
	for (i = 0; i < N; i++) {
		uint32_t x = (uint32_t)(i * 2654435761u) ^ (s * 40503u);
		x ^= x >> 13;
		x *= 0x5bd1e995u;
		x ^= x >> 15;
		w[i] = (float)(0.05 * sin(0.001 * (double)i + 0.002 * s) +
			       0.0004 * ((double)(x & 0xffff) / 65536.0 - 0.5));
		if (i >= NW)
			w[i] = ldexpf((float)(x & 0xffff) / 65536.0f - 0.5f, (int)(x >> 16 & 63) - 32);
	}
}

/* Restores step s: 0 and the hash of its bytes; the weights within the
 * codec's error of the source. */
static int restore(sj_t *J, unsigned s, uint64_t *hash)
{
	rckpt_restored_t *r = NULL;
	float *got = malloc(N * sizeof(float));
	double num = 0, den = 0;
	uint64_t i;
	int rc;
	assert_non_null(got);
	if ((rc = rckpt_job_restore(J->j, s, &r, NULL))) {
		free(got);
		return rc;
	}
	/* name order: "b", "w" */
	assert_int_equal(rckpt_restored_read(r, 0, got + NW, (N - NW) * sizeof(float)), 0);
	assert_int_equal(rckpt_restored_read(r, 1, got, NW * sizeof(float)), 0);
	rckpt_restored_free(r);
	model_at(J->w, s + J->drift);
	bf16_round(J->w + NW, N - NW); /* the bias: its bf16 */
	assert_memory_equal(got + NW, J->w + NW, (N - NW) * sizeof(float));
	for (i = 0; i < NW; i++) {
		num += (got[i] - J->w[i]) * (double)(got[i] - J->w[i]);
		den += J->w[i] * (double)J->w[i];
	}
	if (!(num / den < 0.05))
		fail_msg("step %u restores with relative error %g", s, num / den);
	*hash = fnv(got, N * sizeof(float));
	free(got);
	return 0;
}

typedef struct census {
	unsigned chunks, segments; /* chunk objects; distinct segments */
	uint64_t seg[64];
	uint64_t biggest;          /* bytes of the largest object */
	mem_pool_t *pool;
} census_t;

static int count_one(void *arg, const char *oid, const char *ns)
{
	census_t *c = arg;
	uint32_t chunk;
	uint64_t seg, size = 0;
	unsigned k;
	rckpt_io_t *io;
	if (strcmp(ns, "seg") != 0)
		return 0;
	assert_int_equal(mem_pool_open(c->pool, "seg", &io), 0);
	assert_int_equal(io->ops->stat(io, oid, &size), 0);
	io->ops->close(io);
	if (size > c->biggest)
		c->biggest = size;
	if (rckpt_store_parse_chunk_oid(oid, &chunk, &seg))
		return 0;
	c->chunks++;
	for (k = 0; k < c->segments && c->seg[k] != seg; k++)
		;
	if (k == c->segments && k < 64)
		c->seg[c->segments++] = seg;
	return 0;
}

static census_t census(sj_t *J)
{
	census_t c;
	rckpt_io_t *io;
	memset(&c, 0, sizeof(c));
	c.pool = J->pool;
	assert_int_equal(mem_pool_open(J->pool, RCKPT_IO_ALL_NS, &io), 0);
	assert_int_equal(io->ops->objects(io, count_one, &c), 0);
	io->ops->close(io);
	return c;
}

static void open_pool(sj_t *J, uint64_t limit, int erasure)
{
	memset(J, 0, sizeof(*J));
	assert_int_equal(mem_pool_create(&J->pool), 0);
	mem_pool_set_limits(J->pool, limit, erasure);
	assert_int_equal(rckpt_create(&J->h), 0);
	assert_int_equal(rckpt_set_io(J->h, mem_pool_open, J->pool, "mem"), 0);
	J->o = (rckpt_job_opts_t)RCKPT_JOB_OPTS_INIT;
	J->o.writer = 1;
	J->o.compute = RCKPT_COMPUTE_CPU;
	J->o.chunk_params = CHUNK;
	assert_non_null(J->w = malloc(N * sizeof(float)));
}

static void close_pool(sj_t *J)
{
	rckpt_job_close(J->j);
	rckpt_destroy(J->h);
	mem_pool_destroy(J->pool);
	free(J->w);
}

static int save(sj_t *J, unsigned s)
{
	rckpt_tensor_t t[2] = { { "b", RCKPT_F32, 1, { N - NW }, J->w + NW },
				{ "w", RCKPT_F32, 2, { 128, NW / 128 }, J->w } };
	model_at(J->w, s + J->drift);
	return rckpt_job_save(J->j, s, t, 2, NULL, 0, NULL);
}

/* Every listed step restores to the hash it had when saved. */
static unsigned check_all(sj_t *J, const char *when)
{
	rckpt_step_info_t si[STEPS + 3];
	unsigned n = 0, k;
	int more = 0;
	uint64_t h;
	assert_int_equal(rckpt_job_steps(J->j, RCKPT_LATEST, si, STEPS + 3, &n, &more), 0);
	for (k = 0; k < n; k++) {
		unsigned s = (unsigned)si[k].step;
		if (restore(J, s, &h))
			fail_msg("%s: step %u does not restore: %s", when, s, rckpt_errmsg(J->h));
		if (h != J->hash[s])
			fail_msg("%s: step %u restores to other bytes", when, s);
	}
	return n;
}

/* The first step that begins a segment, saving [1, upto] into a fresh job
 * of a pool with the test's limit (0: none within). */
static unsigned first_roll(unsigned upto)
{
	sj_t J;
	unsigned s, at = 0;
	open_pool(&J, LIMIT, 0);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= upto && at == 0; s++) {
		assert_int_equal(save(&J, s), 0);
		if (census(&J).segments > 1)
			at = s;
	}
	close_pool(&J);
	return at;
}

static void test_long_job_in_segments(void **state)
{
	sj_t J;
	const rckpt_retention_t some = { 10, 25 };
	rckpt_compact_stats_t cs;
	rckpt_verify_stats_t vs;
	census_t before, after;
	unsigned s, removed, listed;
	uint64_t bytes;
	unsigned objects;

	(void)state;
	open_pool(&J, LIMIT, 0);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= STEPS; s++) {
		if (save(&J, s)) {
			census_t c = census(&J);
			unsigned k;
			for (k = 0; k < c.segments; k++) print_message("seg %llu\n", (unsigned long long)c.seg[k]);
			fail_msg("save %u: %s", s, rckpt_errmsg(J.h));
		}
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
		if (s == STEPS / 2) { /* a new writer: it goes on in the head's segment */
			rckpt_job_close(J.j);
			assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
		}
	}
	before = census(&J);
	print_message("%u steps of %u KiB: %u segments, %u chunk objects, the largest object %.2f MiB "
		      "(limit %.0f MiB)\n",
		      STEPS, (unsigned)(N * 4 >> 10), before.segments, before.chunks,
		      before.biggest / 1048576.0, LIMIT / 1048576.0);
	assert_true(before.segments >= 3);
	assert_true(before.biggest <= LIMIT / 2 + 4 * CHUNK + (64 << 10));
	assert_int_equal(check_all(&J, "as saved"), STEPS);
	assert_int_equal(rckpt_job_verify(J.j, &vs), 0);
	assert_int_equal(vs.bad, 0);
	assert_int_equal(rckpt_job_stored(J.j, &bytes, &objects), 0);
	assert_int_equal(objects, before.chunks + STEPS); /* and a manifest per step */

	/* Retention: old segments go whole, kept steps restore as saved. */
	assert_int_equal(rckpt_job_compact(J.j, &some, &cs), 0);
	after = census(&J);
	print_message("compacted (keep-last 10, keep-every 25): %" PRIu64 " -> %" PRIu64 " steps, "
		      "%.2f -> %.2f MiB of chunks, %u -> %u segments\n",
		      cs.steps_before, cs.steps_after, cs.bytes_before / 1048576.0, cs.bytes_after / 1048576.0,
		      before.segments, after.segments);
	listed = check_all(&J, "after compaction");
	assert_int_equal(listed, cs.steps_after);
	assert_true(cs.bytes_after < cs.bytes_before);
	assert_true(after.chunks < before.chunks);
	assert_int_equal(rckpt_job_verify(J.j, &vs), 0);
	assert_int_equal(rckpt_job_gc(J.j, &removed), 0);
	assert_int_equal(check_all(&J, "after gc"), listed);

	/* The writer goes on after all that. */
	for (s = STEPS + 1; s <= STEPS + 2; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
	}
	assert_int_equal(check_all(&J, "saved on"), listed + 2);
	close_pool(&J);
}

/* A save that fails as it begins a segment (its commit lost) leaves that
 * segment's objects as garbage: the next save begins another, and gc
 * removes the orphan. */
static void test_failed_roll(void **state)
{
	sj_t J;
	const unsigned roll = first_roll(STEPS);
	const mem_fault_t fail_commit = { "commit", 1, -EIO, 0, 0, 0, NULL, NULL };
	census_t c0, c1;
	unsigned s, removed;

	(void)state;
	assert_true(roll > 1);
	open_pool(&J, LIMIT, 0);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s < roll; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
	}
	c0 = census(&J);
	mem_pool_fault(J.pool, &fail_commit);
	assert_int_equal(save(&J, roll), -EIO);
	mem_pool_fault(J.pool, NULL);
	assert_int_equal(census(&J).segments, c0.segments + 1); /* the orphan */
	assert_int_equal(save(&J, roll + 1), 0);
	assert_int_equal(restore(&J, roll + 1, &J.hash[roll + 1]), 0);
	c1 = census(&J);
	assert_int_equal(c1.segments, c0.segments + 2);
	assert_int_equal(rckpt_job_gc(J.j, &removed), 0);
	assert_true(removed >= 4); /* the orphan segment's chunk objects */
	assert_int_equal(census(&J).segments, c0.segments + 1);
	assert_int_equal(check_all(&J, "after gc"), roll);
	close_pool(&J);
}

/* What open refuses before it changes anything. */
static void test_limits_at_open(void **state)
{
	sj_t J;
	(void)state;
	/* a cap over half the OSDs' largest object */
	open_pool(&J, LIMIT, 0);
	J.o.segment_bytes = LIMIT / 2 + 1;
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(J.h), "osd_max_object_size"));
	J.o.segment_bytes = LIMIT / 2;
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	close_pool(&J);
	/* eps 0 is refused, not taken as the default nor as exact; a caller
	 * of version 5 (before 0 was refused) still gets the default */
	open_pool(&J, LIMIT, 0);
	J.o.eps = 0;
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(J.h), "eps 0"));
	J.o.eps = 1;
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), -EINVAL);
	assert_int_equal(mem_pool_calls(J.pool, "claim"), 0); /* nothing changed */
	J.o.eps = RCKPT_EPS_DEFAULT;
	J.o.version = 5; /* before the first release, only the library's own version */
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(J.h), "options of version 5, where this library takes 1"));
	J.o.version = RCKPT_JOB_OPTS_VERSION;
	close_pool(&J);
	/* an erasure-coded pool: refused, readers too, naming the fix */
	open_pool(&J, 0, 1);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), -EOPNOTSUPP);
	assert_non_null(strstr(rckpt_errmsg(J.h), "use a replicated pool"));
	J.o.writer = 0;
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), -EOPNOTSUPP);
	assert_int_equal(mem_pool_calls(J.pool, "claim"), 0); /* nothing changed */
	close_pool(&J);
}

/* Restores that do not depend on the plugin (store.md "Restore without
 * the plugin"): with the class gone from the "OSD", every step restores
 * to the same bytes, folded in the client by the class's own code; a
 * reader that found the class and then lost it mid-way goes on in the
 * client; RCKPT_FOLD=client asks for it. */
static void test_restore_without_the_class(void **state)
{
	sj_t J;
	const rckpt_retention_t some = { 8, 5 };
	rckpt_job_t *before, *after;
	rckpt_job_opts_t ro = RCKPT_JOB_OPTS_INIT;
	char why[160];
	unsigned s, kept;

	(void)state;
	open_pool(&J, LIMIT, 0);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= 30; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
	}
	assert_int_equal(rckpt_job_compact(J.j, &some, NULL), 0); /* deltas on later steps too */
	assert_true(census(&J).segments >= 3);
	rckpt_job_close(J.j);
	J.j = NULL;
	ro.compute = RCKPT_COMPUTE_CPU;
	assert_int_equal(rckpt_job_open(J.h, &before, "seg", &ro), 0);
	assert_int_equal(rckpt_job_folds_here(before, why, sizeof(why)), 0);
	J.j = before;
	kept = check_all(&J, "with the class");
	assert_int_equal(kept, 12); /* 23..30, and 5, 10, 15, 20 */

	mem_pool_unload_class(J.pool, "rckpt");
	assert_int_equal(rckpt_job_open(J.h, &after, "seg", &ro), 0);
	assert_int_equal(rckpt_job_folds_here(after, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "not available"));
	J.j = after;
	assert_int_equal(check_all(&J, "without the class"), kept);
	J.j = before; /* it found the class; its first materialize is refused */
	assert_int_equal(check_all(&J, "the class gone since"), kept);
	assert_int_equal(rckpt_job_folds_here(before, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "refused"));
	rckpt_job_close(before);
	rckpt_job_close(after);

	mem_pool_unload_class(J.pool, NULL);
	setenv("RCKPT_FOLD", "client", 1);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &ro), 0);
	assert_int_equal(rckpt_job_folds_here(J.j, why, sizeof(why)), 1);
	assert_int_equal(check_all(&J, "RCKPT_FOLD=client"), kept);
	rckpt_job_close(J.j);
	setenv("RCKPT_FOLD", "sideways", 1);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &ro), 0);
	assert_true(rckpt_job_folds_here(J.j, why, sizeof(why)) == -EINVAL);
	unsetenv("RCKPT_FOLD");
	close_pool(&J);
}

/* Rewind 100 -> 60 and save 61..120 anew, across segments: every new step
 * restores by content (the source's values, within the codec's error), a
 * writer restarted after the rewind continues the new line, and gc removes
 * what the abandoned line left (store.md "Rewind"). */
static void test_rewind(void **state)
{
	sj_t J;
	uint64_t old_hash[STEPS + 3], h;
	census_t c0, c1;
	unsigned s, removed, same = 0;

	(void)state;
	open_pool(&J, LIMIT, 0);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= 100; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
		old_hash[s] = J.hash[s];
	}
	c0 = census(&J);
	assert_true(c0.segments >= 10);
	/* the bad cases first: nothing changes */
	assert_int_equal(rckpt_job_rewind(J.j, 101, NULL), -EINVAL); /* not committed */
	assert_non_null(strstr(rckpt_errmsg(J.h), "not a committed step"));
	assert_int_equal(rckpt_job_pin(J.j, 70, 1), 0);
	assert_int_equal(rckpt_job_rewind(J.j, 60, NULL), -EBUSY);
	assert_non_null(strstr(rckpt_errmsg(J.h), "pinned"));
	assert_int_equal(rckpt_job_pin(J.j, 70, 0), 0);
	assert_int_equal(rckpt_job_drop(J.j, 50), 0);
	assert_int_equal(rckpt_job_rewind(J.j, 50, NULL), -ENOENT); /* dropped */
	{
		rckpt_job_opts_t ro = RCKPT_JOB_OPTS_INIT;
		rckpt_job_t *r;
		assert_int_equal(rckpt_job_open(J.h, &r, "seg", &ro), 0);
		assert_int_equal(rckpt_job_rewind(r, 60, NULL), -EPERM); /* a reader */
		rckpt_job_close(r);
	}
	assert_int_equal(check_all(&J, "after refused rewinds"), 99); /* 1..100 but 50 */

	/* 100 -> 60, then 61..120 anew: other values than the first line's */
	assert_int_equal(rckpt_job_rewind(J.j, 60, NULL), 0);
	{
		rckpt_step_info_t si[STEPS + 3];
		unsigned n = 0;
		int more = 0;
		assert_int_equal(rckpt_job_steps(J.j, 60, si, STEPS + 3, &n, &more), 0);
		assert_int_equal(n, 0); /* nothing after it is listed */
		rckpt_restored_t *r = NULL;
		assert_int_equal(rckpt_job_restore(J.j, 61, &r, NULL), -ENOENT);
	}
	assert_int_equal(rckpt_job_gc(J.j, &removed), 0);
	c1 = census(&J);
	print_message("rewound 100 -> 60: gc removed %u objects; segments %u -> %u\n", removed, c0.segments,
		      c1.segments);
	assert_true(removed >= 40); /* the abandoned manifests, and segments */
	assert_true(c1.segments < c0.segments);
	J.drift = 1000; /* the new line: other values */
	for (s = 61; s <= 120; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
		if (s <= 100 && J.hash[s] == old_hash[s])
			same++;
		if (s == 90) { /* a writer restarted after the rewind goes on in the new line */
			rckpt_job_close(J.j);
			assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
		}
	}
	assert_int_equal(same, 0);
	for (s = 61; s <= 120; s++) {
		assert_int_equal(restore(&J, s, &h), 0);
		assert_true(h == J.hash[s]);
	}
	J.drift = 0; /* the steps before the rewind are as they were */
	for (s = 1; s <= 60; s++) {
		if (s == 50)
			continue;
		assert_int_equal(restore(&J, s, &h), 0);
		assert_true(h == old_hash[s]);
	}
	close_pool(&J);
}

/* A rewind is fenced: a writer whose successor claimed the job cannot
 * move the head, by the API (its lock is gone) nor by a late request
 * carrying its token; and a writer's own rewind that lands late, after it
 * saved on, is refused too (it names the head it read). */
/* A rewind onto a compacted line: compaction left each kept step a delta
 * on the next kept one (store.md "Compaction"), so the step rewound to
 * is a delta on a step past it, in the same segment. gc and the next save
 * trim what lies past the head: each compacts the head's segment up to
 * the head first, and every listed step still restores as it did. */
static void test_rewind_onto_compacted(void **state)
{
	sj_t J;
	const rckpt_retention_t every2 = { 1, 2 }; /* 2, 4, 6 and the last */
	uint64_t h;
	unsigned s, removed;

	(void)state;
	open_pool(&J, LIMIT, 0);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= 7; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
	}
	assert_int_equal(census(&J).segments, 1); /* one segment: the trim's */
	assert_int_equal(rckpt_job_compact(J.j, &every2, NULL), 0);
	assert_int_equal(check_all(&J, "compacted"), 4);
	assert_int_equal(rckpt_job_rewind(J.j, 4, NULL), 0); /* 4: a delta on 6 */
	assert_int_equal(rckpt_job_gc(J.j, &removed), 0); /* gc trims past the head too */
	assert_int_equal(restore(&J, 4, &h), 0);
	assert_true(h == J.hash[4]);
	J.drift = 300;
	for (s = 5; s <= 6; s++) {
		if (save(&J, s))
			fail_msg("save %u after the rewind: %s", s, rckpt_errmsg(J.h));
		if (restore(&J, s, &J.hash[s]))
			fail_msg("restore %u after the rewind: %s", s, rckpt_errmsg(J.h));
	}
	J.drift = 0;
	for (s = 2; s <= 4; s += 2) { /* as they were */
		assert_int_equal(restore(&J, s, &h), 0);
		assert_true(h == J.hash[s]);
	}
	{
		rckpt_step_info_t si[8];
		unsigned n = 0;
		int more = 0;
		assert_int_equal(rckpt_job_steps(J.j, RCKPT_LATEST, si, 8, &n, &more), 0);
		assert_int_equal(n, 4); /* 2, 4, then 5, 6 anew */
		assert_true(si[0].step == 2 && si[1].step == 4 && si[2].step == 5 && si[3].step == 6);
	}
	close_pool(&J);
}

/* A rewind onto a compacted line whose head hangs on a chain longer than
 * one OSD call may fold (this test's plugin folds about 8 of its records
 * per call): the head is made to stand alone in stages, and every step
 * before it restores as it did. */
static void test_rewind_onto_a_long_chain(void **state)
{
	sj_t J;
	const rckpt_retention_t all = { 0, 0 };
	uint64_t h;
	unsigned s, removed;

	(void)state;
	open_pool(&J, (uint64_t)64 << 20, 0); /* one segment holds them all */
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= 28; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
	}
	assert_int_equal(rckpt_job_compact(J.j, &all, NULL), 0); /* 28 a base, each before a delta on the next */
	assert_int_equal(check_all(&J, "compacted"), 28);
	assert_int_equal(rckpt_job_rewind(J.j, 3, NULL), 0); /* 3 hangs on 25 records */
	assert_int_equal(rckpt_job_gc(J.j, &removed), 0);
	assert_int_equal(check_all(&J, "rebased"), 3);
	J.drift = 300;
	for (s = 4; s <= 5; s++) {
		if (save(&J, s))
			fail_msg("save %u after the rewind: %s", s, rckpt_errmsg(J.h));
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
	}
	J.drift = 0;
	for (s = 1; s <= 3; s++) {
		assert_int_equal(restore(&J, s, &h), 0);
		assert_true(h == J.hash[s]);
	}
	close_pool(&J);
}

static void test_rewind_by_a_stale_writer(void **state)
{
	sj_t J;
	rckpt_job_t *w2;
	rckpt_io_t *io;
	rckpt_buf_t msg = RCKPT_BUF_INIT, out = RCKPT_BUF_INIT;
	uint64_t old_token;
	rckpt_msg_head_t hd;
	unsigned s;
	int rc;

	(void)state;
	open_pool(&J, LIMIT, 0);
	J.o.lease_s = 1;
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= 10; s++)
		assert_int_equal(save(&J, s), 0);
	{
		rckpt_buf_t v = RCKPT_BUF_INIT;
		assert_int_equal(mem_pool_open(J.pool, "seg", &io), 0);
		assert_int_equal(io->ops->omap_get(io, RCKPT_STORE_JOB_OID, "writer", &v), 0);
		assert_int_equal(v.len, 8);
		memcpy(&old_token, v.p, 8); /* little-endian, as this machine */
		rckpt_buf_free(&v);
		io->ops->close(io);
	}
	{
		struct timespec ts = { 1, 200000000 };
		nanosleep(&ts, NULL); /* its lease lapses */
	}
	assert_int_equal(rckpt_job_open(J.h, &w2, "seg", &J.o), 0); /* the successor */
	rc = rckpt_job_rewind(J.j, 5, NULL); /* its lock is gone */
	assert_true(rc == -EBUSY || rc == -EEXIST || rc == -ENOENT);
	assert_int_equal(mem_pool_open(J.pool, "seg", &io), 0);
	{
		const rckpt_msg_rewind_t m = { old_token, 10, 5 };
		assert_int_equal(rckpt_msg_rewind_encode(&msg, &m), 0);
	}
	assert_int_equal(io->ops->exec(io, RCKPT_STORE_JOB_OID, "rckpt", "rewind", msg.p, msg.len, NULL), -ESTALE);
	assert_int_equal(io->ops->exec(io, RCKPT_STORE_JOB_OID, "rckpt", "head", NULL, 0, &out), 0);
	assert_int_equal(rckpt_msg_head_decode(&hd, out.p, out.len), 0);
	assert_int_equal(hd.head, 10); /* unmoved */
	io->ops->close(io);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	assert_int_equal(rckpt_job_rewind(w2, 5, NULL), 0); /* the successor may */
	{
		/* and its own rewind, landing again late after it saved on (a
		 * request held in the network), is refused: the head moved */
		rckpt_job_t *keep = J.j;
		rckpt_buf_t v = RCKPT_BUF_INIT;
		uint64_t t2;
		J.j = w2;
		assert_int_equal(save(&J, 6), 0);
		J.j = keep;
		assert_int_equal(mem_pool_open(J.pool, "seg", &io), 0);
		assert_int_equal(io->ops->omap_get(io, RCKPT_STORE_JOB_OID, "writer", &v), 0);
		memcpy(&t2, v.p, 8);
		rckpt_buf_free(&v);
		{
			const rckpt_msg_rewind_t m = { t2, 10, 5 };
			assert_int_equal(rckpt_msg_rewind_encode(&msg, &m), 0);
		}
		assert_int_equal(io->ops->exec(io, RCKPT_STORE_JOB_OID, "rckpt", "rewind", msg.p, msg.len, NULL),
				 -ESTALE);
		assert_int_equal(io->ops->exec(io, RCKPT_STORE_JOB_OID, "rckpt", "head", NULL, 0, &out), 0);
		assert_int_equal(rckpt_msg_head_decode(&hd, out.p, out.len), 0);
		assert_int_equal(hd.head, 6); /* step 6 stays */
		io->ops->close(io);
		rckpt_buf_free(&msg);
		rckpt_buf_free(&out);
	}
	rckpt_job_close(w2);
	close_pool(&J);
}

/* A rewind that keeps what it abandons (store.md "Branches"): the steps
 * from the rewind's step to the head, copied once into job "seg.spike",
 * restore there to the bytes they had, across segments and after a
 * compaction made some deltas point forward; both jobs list the branch;
 * the main line goes on. A new job started from a step (fine-tuning)
 * restores it and saves on from it. */
/* Step s with tensors of shape `shape`: 0 {b, w}; 1 {a, b, w} (a tensor
 * added); 2 {b, w} with w half as long (resized). */
static int save_shaped(sj_t *J, unsigned s, unsigned shape, rckpt_save_stats_t *st)
{
	rckpt_tensor_t t[3] = { { "a", RCKPT_F32, 2, { 64, 64 }, J->w + 8192 },
				{ "b", RCKPT_F32, 1, { N - NW }, J->w + NW },
				{ "w", RCKPT_F32, 2, { shape == 2 ? 64 : 128, NW / 128 }, J->w } };
	model_at(J->w, s);
	return rckpt_job_save(J->j, s, shape == 1 ? t : t + 1, shape == 1 ? 3 : 2, NULL, 0, st);
}

/* Step s restores the tensors of shape `shape`, w within the codec's error. */
static void restores_shaped(sj_t *J, unsigned s, unsigned shape)
{
	rckpt_restored_t *r = NULL;
	rckpt_tensor_t t;
	const uint64_t nw = shape == 2 ? NW / 2 : NW;
	float *got = malloc(NW * sizeof(float));
	double num = 0, den = 0;
	uint64_t i;
	int k;
	assert_non_null(got);
	if (rckpt_job_restore(J->j, s, &r, NULL))
		fail_msg("step %u does not restore: %s", s, rckpt_errmsg(J->h));
	assert_int_equal(rckpt_restored_count(r), shape == 1 ? 3 : 2);
	assert_int_equal(rckpt_restored_find(r, "a") >= 0, shape == 1);
	assert_true((k = rckpt_restored_find(r, "w")) >= 0);
	assert_int_equal(rckpt_restored_tensor(r, (unsigned)k, &t), 0);
	assert_true(t.ndim == 2 && t.shape[0] * t.shape[1] == nw);
	assert_int_equal(rckpt_restored_read(r, (unsigned)k, got, nw * sizeof(float)), 0);
	rckpt_restored_free(r);
	model_at(J->w, s);
	for (i = 0; i < nw; i++) {
		num += (got[i] - J->w[i]) * (double)(got[i] - J->w[i]);
		den += J->w[i] * (double)J->w[i];
	}
	if (!(num / den < 0.05))
		fail_msg("step %u restores with relative error %g", s, num / den);
	free(got);
}

/* Tensors that change between steps (issue 63): each change is a base
 * that begins a segment (a segment's steps share one layout) and is
 * marked RCKPT_STEP_LAYOUT; every step restores its own tensors; a new
 * writer continues the head's layout as a delta, and with other tensors
 * begins a segment; compaction retires the older layouts' segments whole;
 * verify and gc agree; a rewind into an older layout goes on there. */
static void test_layouts_change(void **state)
{
	/* steps 1-3 shape 0, 4-6 shape 1, 7-9 shape 2; 10 shape 2 and 11
	 * shape 0 from new writers */
	static const unsigned shape[13] = { 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 2 };
	const rckpt_retention_t last2 = { 2, 0 };
	rckpt_step_info_t si[16];
	rckpt_save_stats_t st;
	rckpt_verify_stats_t vs;
	unsigned s, n = 0, removed;
	int more;
	sj_t J;

	(void)state;
	open_pool(&J, 0, 0);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= 11; s++) {
		if (s == 10 || s == 11) { /* a new writer */
			rckpt_job_close(J.j);
			assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
		}
		if (save_shaped(&J, s, shape[s], &st))
			fail_msg("save %u: %s", s, rckpt_errmsg(J.h));
		assert_int_equal(st.is_base, s == 1 || shape[s] != shape[s - 1]);
	}
	assert_int_equal(census(&J).segments, 4); /* the first, 4, 7 and 11 */
	assert_int_equal(rckpt_job_steps(J.j, RCKPT_LATEST, si, 16, &n, &more), 0);
	assert_int_equal(n, 11);
	for (s = 1; s <= 11; s++) {
		assert_int_equal((si[s - 1].flags & RCKPT_STEP_LAYOUT) != 0, s == 4 || s == 7 || s == 11);
		restores_shaped(&J, s, shape[s]);
	}
	assert_int_equal(rckpt_job_verify(J.j, &vs), 0);
	assert_int_equal(vs.bad, 0);
	/* compaction keeps 10 and 11: the first two segments go whole */
	assert_int_equal(rckpt_job_compact(J.j, &last2, NULL), 0);
	assert_int_equal(census(&J).segments, 2);
	restores_shaped(&J, 10, 2);
	restores_shaped(&J, 11, 0);
	/* back to 10, in shape 2 again: a delta in its segment */
	assert_int_equal(rckpt_job_rewind(J.j, 10, NULL), 0);
	assert_int_equal(save_shaped(&J, 12, 2, &st), 0);
	assert_false(st.is_base);
	assert_int_equal(rckpt_job_gc(J.j, &removed), 0);
	assert_int_equal(census(&J).segments, 1);
	restores_shaped(&J, 10, 2);
	restores_shaped(&J, 12, 2);
	assert_int_equal(rckpt_job_verify(J.j, &vs), 0);
	assert_int_equal(vs.bad, 0);
	close_pool(&J);
}

/* A save of other tensors that fails (a NaN) leaves the encoder on the
 * new tensors: the save after it, of those tensors, still begins a
 * segment and is marked; every step restores its own. */
static void test_layout_after_failed_save(void **state)
{
	rckpt_tensor_t t[3] = { { "a", RCKPT_F32, 2, { 64, 64 }, NULL },
				{ "b", RCKPT_F32, 1, { N - NW }, NULL },
				{ "w", RCKPT_F32, 2, { 128, NW / 128 }, NULL } };
	rckpt_step_info_t si[4];
	rckpt_save_stats_t st;
	unsigned n = 0;
	int more;
	sj_t J;

	(void)state;
	open_pool(&J, 0, 0);
	t[0].data = J.w + 8192;
	t[1].data = J.w + NW;
	t[2].data = J.w;
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	assert_int_equal(save_shaped(&J, 1, 0, &st), 0);
	model_at(J.w, 2);
	J.w[8192 + 5] = NAN; /* in "a", the new tensor */
	assert_int_equal(rckpt_job_save(J.j, 2, t, 3, NULL, 0, &st), -EDOM);
	assert_int_equal(save_shaped(&J, 3, 1, &st), 0);
	assert_true(st.is_base);
	assert_int_equal(census(&J).segments, 2);
	assert_int_equal(rckpt_job_steps(J.j, RCKPT_LATEST, si, 4, &n, &more), 0);
	assert_int_equal(n, 2);
	assert_false(si[0].flags & RCKPT_STEP_LAYOUT);
	assert_true(si[1].flags & RCKPT_STEP_LAYOUT);
	restores_shaped(&J, 1, 0);
	restores_shaped(&J, 3, 1);
	close_pool(&J);
}

static void test_branches(void **state)
{
	sj_t J;
	const rckpt_retention_t some = { 20, 3 };
	rckpt_job_opts_t ro = RCKPT_JOB_OPTS_INIT;
	rckpt_branch_info_t b[4];
	rckpt_step_info_t si[STEPS + 3];
	rckpt_job_t *main_j;
	unsigned s, n = 0, nb = 0, k;
	uint64_t h;
	int more = 0;

	(void)state;
	open_pool(&J, LIMIT, 0);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg", &J.o), 0);
	for (s = 1; s <= 100; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &J.hash[s]), 0);
	}
	assert_int_equal(rckpt_job_compact(J.j, &some, NULL), 0); /* deltas on later steps too */
	assert_int_equal(rckpt_job_steps(J.j, 59, si, STEPS + 3, &n, &more), 0);
	assert_int_equal(rckpt_job_rewind(J.j, 60, "spike"), 0);
	assert_int_equal(rckpt_job_rewind(J.j, 60, "spike"), -EEXIST); /* it is there */
	assert_int_equal(rckpt_job_branches(J.j, b, 4, &nb), 0);
	assert_int_equal(nb, 1);
	assert_string_equal(b[0].job, "seg.spike");
	assert_true(b[0].from == 60 && b[0].upto == 100 && !b[0].made_from);
	main_j = J.j;
	ro.compute = RCKPT_COMPUTE_CPU;
	assert_int_equal(rckpt_job_open(J.h, &J.j, "seg.spike", &ro), 0);
	assert_int_equal(check_all(&J, "the branch"), n); /* every listed step from 60 on, as it was */
	assert_int_equal(rckpt_job_branches(J.j, b, 4, &nb), 0);
	assert_true(nb == 1 && b[0].made_from && strcmp(b[0].job, "seg") == 0);
	print_message("rewind 100 -> 60 kept %u steps as job seg.spike (%u segments in the pool)\n", n,
		      census(&J).segments);
	rckpt_job_close(J.j);
	J.j = main_j;
	if (restore(&J, 60, &h))
		fail_msg("restore 60 after the rewind: %s", rckpt_errmsg(J.h));
	J.drift = 500;
	for (s = 61; s <= 70; s++) { /* the main line goes on */
		if (save(&J, s))
			fail_msg("save %u after the rewind: %s", s, rckpt_errmsg(J.h));
		if (restore(&J, s, &h))
			fail_msg("restore %u after the rewind: %s", s, rckpt_errmsg(J.h));
	}
	J.drift = 0;
	/* fine-tuning from step 30 of the job: a new job from it */
	assert_int_equal(rckpt_job_branch(J.j, 30, 30, "ft"), 0);
	assert_int_equal(rckpt_job_branch(J.j, 30, 30, "ft"), -EEXIST);
	rckpt_job_close(J.j);
	assert_int_equal(rckpt_job_open(J.h, &J.j, "ft", &J.o), 0);
	assert_int_equal(restore(&J, 30, &h), 0);
	assert_true(h == J.hash[30]);
	for (s = 31; s <= 35; s++) {
		assert_int_equal(save(&J, s), 0);
		assert_int_equal(restore(&J, s, &h), 0);
	}
	assert_int_equal(rckpt_job_steps(J.j, RCKPT_LATEST, si, STEPS + 3, &n, &more), 0);
	assert_int_equal(n, 6);
	for (k = 0; k < n; k++)
		assert_int_equal(si[k].step, 30 + k);
	close_pool(&J);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limits_at_open),
		cmocka_unit_test(test_long_job_in_segments),
		cmocka_unit_test(test_failed_roll),
		cmocka_unit_test(test_restore_without_the_class),
		cmocka_unit_test(test_rewind),
		cmocka_unit_test(test_rewind_onto_compacted),
		cmocka_unit_test(test_rewind_onto_a_long_chain),
		cmocka_unit_test(test_rewind_by_a_stale_writer),
		cmocka_unit_test(test_branches),
		cmocka_unit_test(test_layouts_change),
		cmocka_unit_test(test_layout_after_failed_save),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
