/*
 * test_long_chain.c — a long job at full length, over the in-memory pool
 * that runs the real object-class methods (issue 25 item 2): 5,000 saves
 * with the writer's defaults, then keep-all compactions, then a retention
 * policy. No chain the system builds may come near what the OSD folds
 * (RCKPT_STORE_CHAIN_MAX), and every kept step restores to exactly what
 * it restored to before: before, the head of such a job stopped restoring
 * after 4096 saves (-E2BIG), and so did old steps after a keep-all
 * compaction. RCKPT_LONG_STEPS sets the length (default 5000, past the
 * 4096 records the OSD folds; 10000 takes about four minutes here).
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
#include "rckpt_clock.h"
#include "rckpt_internal.h"
#include "rckpt_store_wire.h"
#include "bf16_round.h"

#define ROWS 16
#define COLS 16

typedef struct lj {
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *j;
	unsigned n;      /* steps saved: 1..n */
	uint64_t *hash;  /* what step s restored to after it was saved (FNV-1a of its bytes) */
	uint8_t *listed; /* whether step s is listed now */
} lj_t;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;
	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* Step s: a weight that drifts a little every step, and a bias. */
static void model_at(unsigned s, float *w, float *b)
{
	unsigned i;
	for (i = 0; i < ROWS * COLS; i++)
		w[i] = (float)(0.05 * sin(0.37 * i + 1e-3 * s) + 0.01 * cos(0.11 * i * (1 + s % 7)));
	for (i = 0; i < COLS; i++)
		b[i] = 0.001f * (float)(i + s);
}

/* Restores step s: 0 and its hash, checking it against the source (the
 * bias its bf16, the weight within the codec's error). */
static int restore(lj_t *L, unsigned s, uint64_t *hash)
{
	float w[ROWS * COLS], b[COLS], rw[ROWS * COLS], rb[COLS];
	rckpt_restored_t *r = NULL;
	double num = 0, den = 0;
	unsigned i;
	int rc = rckpt_job_restore(L->j, s, &r, NULL);
	if (rc)
		return rc;
	/* name order: "b", "w" */
	assert_int_equal(rckpt_restored_read(r, 0, rb, sizeof(rb)), 0);
	assert_int_equal(rckpt_restored_read(r, 1, rw, sizeof(rw)), 0);
	rckpt_restored_free(r);
	model_at(s, w, b);
	bf16_round(b, COLS);
	assert_memory_equal(rb, b, sizeof(b));
	for (i = 0; i < ROWS * COLS; i++) {
		num += (rw[i] - w[i]) * (double)(rw[i] - w[i]);
		den += w[i] * (double)w[i];
	}
	if (!(num / den < 0.05))
		fail_msg("step %u restores with relative error %g", s, num / den);
	*hash = fnv(fnv(0xcbf29ce484222325ull, rb, sizeof(rb)), rw, sizeof(rw));
	return 0;
}

/* Entry of step s in the (step-sorted) index, or -1. */
static long entry_of(const rckpt_store_entry_t *e, uint32_t n, uint64_t s)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (e[mid].step == s)
			return (long)mid;
		if (e[mid].step < s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Chunk 0's objects, one a segment (store.md "Segments"). */
typedef struct seg_names {
	char names[64][64];
	unsigned n;
} seg_names_t;

static int seg_name(void *arg, const char *oid, const char *ns)
{
	seg_names_t *g = arg;
	(void)ns;
	if (strncmp(oid, "rckpt.chunk.00000", 17) == 0 && (oid[17] == '\0' || oid[17] == '.')) {
		assert_true(g->n < 64);
		snprintf(g->names[g->n++], sizeof(g->names[0]), "%s", oid);
	}
	return 0;
}

/* The chain of every step in chunk 0 (records from its base through it,
 * within its segment's object), into depth[step] (0: no record); the
 * longest. Deltas point back (a writer's) or forward (compaction's);
 * every walk is bounded. No object holds more than a segment's records. */
static unsigned chains(lj_t *L, unsigned *depth)
{
	rckpt_io_t *io = NULL;
	seg_names_t g;
	unsigned most = 0, k;
	assert_int_equal(mem_pool_open(L->pool, "long", &io), 0);
	g.n = 0;
	assert_int_equal(io->ops->objects(io, seg_name, &g), 0);
	memset(depth, 0, (L->n + 1) * sizeof(*depth));
	for (k = 0; k < g.n; k++) {
		rckpt_buf_t out = RCKPT_BUF_INIT;
		rckpt_store_entry_t *e = NULL;
		uint32_t n = 0, i;
		assert_int_equal(io->ops->exec(io, g.names[k], "rckpt", "index", NULL, 0, &out), 0);
		assert_int_equal(rckpt_msg_index_decode(&e, &n, out.p, out.len), 0);
		assert_true(n <= RCKPT_STORE_SEGMENT_RECORDS);
		for (i = 0; i < n; i++) {
			long x = (long)i;
			unsigned d = 0;
			assert_true(e[i].step <= L->n);
			while (x >= 0 && e[x].kind != 1 && depth[e[x].step] == 0) {
				d++;
				assert_true(d <= RCKPT_STORE_CHAIN_MAX);
				x = entry_of(e, n, e[x].parent);
			}
			assert_true(x >= 0); /* every parent is in the chunk */
			d += e[x].kind == 1 ? 1 : depth[e[x].step];
			depth[e[i].step] = d;
			if (d > most)
				most = d;
		}
		free(e);
		rckpt_buf_free(&out);
	}
	io->ops->close(io);
	return most;
}

/* The listed steps restore to the hash they had when saved (each restore
 * also checks every chunk against the manifest's SHA-256, and the step
 * against its source): every `every`-th step, and every step whose chain
 * is among the longest (within 8 of RCKPT_STORE_CHAIN_REBASE). Every
 * listed step's chain is checked to be short enough to fold. */
static void check_steps(lj_t *L, unsigned every, const char *when)
{
	rckpt_step_info_t si[RCKPT_STORE_LIST_MAX];
	uint64_t after = RCKPT_LATEST, h;
	unsigned n = 0, k, listed = 0, restored = 0, most;
	unsigned *depth = calloc(L->n + 1, sizeof(*depth));
	int more = 1;
	const double t0 = rckpt_now_s();
	assert_non_null(depth);
	most = chains(L, depth);
	while (more) {
		assert_int_equal(rckpt_job_steps(L->j, after, si, RCKPT_STORE_LIST_MAX, &n, &more), 0);
		for (k = 0; k < n; k++) {
			unsigned s = (unsigned)si[k].step;
			assert_true(s >= 1 && s <= L->n);
			assert_true(depth[s] >= 1 && depth[s] <= RCKPT_STORE_CHAIN_REBASE);
			listed++;
			if (s % every && depth[s] + 8 < RCKPT_STORE_CHAIN_REBASE && s + 50 < L->n)
				continue;
			restored++;
			if (L->hash[s] == 0 && restore(L, s, &L->hash[s]) == 0)
				continue; /* the first time: what it restores to is what it must */
			if (restore(L, s, &h))
				fail_msg("%s: step %u does not restore: %s", when, s, rckpt_errmsg(L->h));
			if (h != L->hash[s])
				fail_msg("%s: step %u restores to other bytes", when, s);
		}
		if (n)
			after = si[n - 1].step;
	}
	print_message("%s: %u steps listed, each chain at most %u records; %u restored (as saved, where "
		      "restored before) in %.1f s\n",
		      when, listed, most, restored, rckpt_now_s() - t0);
	free(depth);
}

static void test_long_job(void **state)
{
	lj_t L;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	const char *env = getenv("RCKPT_LONG_STEPS");
	float w[ROWS * COLS], b[COLS];
	rckpt_tensor_t t[2];
	const rckpt_retention_t keep_all = { 0, 0 }, some = { 100, 250 };
	rckpt_compact_stats_t cs;
	unsigned s;
	double t0 = rckpt_now_s(), t1;

	(void)state;
	memset(&L, 0, sizeof(L));
	L.n = env ? (unsigned)strtoul(env, NULL, 10) : 5000; /* past the 4096 records materialize folds */
	assert_true(L.n >= 2);
	assert_non_null(L.hash = calloc(L.n + 32, sizeof(*L.hash)));   /* and the 20 saved later */
	assert_non_null(L.listed = calloc(L.n + 32, 1));
	assert_int_equal(mem_pool_create(&L.pool), 0);
	assert_int_equal(rckpt_create(&L.h), 0);
	assert_int_equal(rckpt_set_io(L.h, mem_pool_open, L.pool, "mem"), 0);
	o.writer = 1;
	o.compute = RCKPT_COMPUTE_CPU;
	assert_int_equal(rckpt_job_open(L.h, &L.j, "long", &o), 0);
	t[0] = (rckpt_tensor_t){ "w", RCKPT_F32, 2, { ROWS, COLS }, w };
	t[1] = (rckpt_tensor_t){ "b", RCKPT_F32, 1, { COLS }, b };
	for (s = 1; s <= L.n; s++) {
		model_at(s, w, b);
		if (rckpt_job_save(L.j, s, t, 2, NULL, 0, NULL))
			fail_msg("save %u: %s", s, rckpt_errmsg(L.h));
		if (s == L.n / 2) { /* a new writer halfway: it continues the chain */
			rckpt_job_close(L.j);
			assert_int_equal(rckpt_job_open(L.h, &L.j, "long", &o), 0);
		}
	}
	print_message("saved %u steps in %.1f s\n", L.n, rckpt_now_s() - t0);
	check_steps(&L, 17, "the writers' chains");
	t1 = rckpt_now_s();
	assert_int_equal(rckpt_job_compact(L.j, &keep_all, &cs), 0);
	assert_int_equal(cs.steps_after, L.n);
	print_message("keep-all compaction of %u steps: %.1f s\n", L.n, rckpt_now_s() - t1);
	check_steps(&L, 1, "after a keep-all compaction"); /* every step */
	{ /* a branch of the whole job: its segments roll by records as a
	   * writer's do (before, it packed 4096 records into one object and
	   * the 4097th append was refused), and its steps restore as saved */
		rckpt_job_t *b = NULL;
		rckpt_restored_t *r = NULL;
		uint64_t h;
		const uint64_t probe[3] = { 1, L.n / 2, L.n };
		unsigned k;
		t1 = rckpt_now_s();
		if (rckpt_job_branch(L.j, 1, L.n, "long.b"))
			fail_msg("branch: %s", rckpt_errmsg(L.h));
		print_message("a branch of %u steps: %.1f s\n", L.n, rckpt_now_s() - t1);
		assert_int_equal(rckpt_job_open(L.h, &b, "long.b", &o), 0);
		for (k = 0; k < 3; k++) {
			assert_int_equal(rckpt_job_restore(b, probe[k], &r, NULL), 0);
			{
				float bw[ROWS * COLS], bb[COLS];
				assert_int_equal(rckpt_restored_read(r, 0, bb, sizeof(bb)), 0); /* "b" */
				assert_int_equal(rckpt_restored_read(r, 1, bw, sizeof(bw)), 0); /* "w" */
				h = fnv(fnv(0xcbf29ce484222325ull, bb, sizeof(bb)), bw, sizeof(bw));
			}
			rckpt_restored_free(r);
			r = NULL;
			if (L.hash[probe[k]] && h != L.hash[probe[k]])
				fail_msg("branch step %u restores to other bytes", (unsigned)probe[k]);
		}
		rckpt_job_close(b);
		{ /* no object of the branch holds more than a segment's records */
			rckpt_io_t *io = NULL;
			seg_names_t g;
			g.n = 0;
			assert_int_equal(mem_pool_open(L.pool, "long.b", &io), 0);
			assert_int_equal(io->ops->objects(io, seg_name, &g), 0);
			assert_true(g.n >= L.n / RCKPT_STORE_SEGMENT_RECORDS);
			for (k = 0; k < g.n; k++) {
				rckpt_buf_t out = RCKPT_BUF_INIT;
				rckpt_store_entry_t *e = NULL;
				uint32_t n = 0;
				assert_int_equal(io->ops->exec(io, g.names[k], "rckpt", "index", NULL, 0, &out), 0);
				assert_int_equal(rckpt_msg_index_decode(&e, &n, out.p, out.len), 0);
				assert_true(n <= RCKPT_STORE_SEGMENT_RECORDS);
				free(e);
				rckpt_buf_free(&out);
			}
			io->ops->close(io);
		}
	}
	t1 = rckpt_now_s();
	for (s = 0; s < 20; s++) { /* the writer goes on, and compacts as it goes */
		model_at(L.n + 1, w, b);
		assert_int_equal(rckpt_job_save(L.j, L.n + 1, t, 2, NULL, 0, NULL), 0);
		L.n++;
		assert_int_equal(rckpt_job_compact(L.j, &keep_all, &cs), 0);
	}
	print_message("20 more saves, each compacted: %.1f s\n", rckpt_now_s() - t1);
	check_steps(&L, 31, "after 20 more saves, each compacted");
	assert_int_equal(rckpt_job_compact(L.j, &some, &cs), 0);
	check_steps(&L, 1, "under keep-last 100, keep-every 250");
	print_message("%.1f s in all\n", rckpt_now_s() - t0);
	rckpt_job_close(L.j);
	rckpt_destroy(L.h);
	mem_pool_destroy(L.pool);
	free(L.hash);
	free(L.listed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_long_job),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
