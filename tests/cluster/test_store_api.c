/*
 * test_store_api.c — librckpt's checkpoint store through its C API on a
 * live cluster: asynchronous saves and their back-pressure, a job closed
 * with a save in flight, a save whose appends fail (the next one trims and
 * starts a base), small chunks under a tight memory budget, the
 * budget's check at open, attachments and the trainer's quality callback. Needs CEPH_CONF (./dev.sh test starts a
 * cluster); skips without one unless RCKPT_REQUIRE_CLUSTER=1.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_skip.h"
#include <rados/librados.h>

#include "rckpt.h"

#define NT 3
#define ROWS 256
#define COLS 300 /* 76800 elements: more than one block of the encoder */

/* A small model: two matrices (fp32, bf16) and a bias; `step` drifts it. */
typedef struct model {
	float w0[ROWS * COLS];
	uint16_t w1[ROWS * COLS];
	float bias[COLS];
	rckpt_tensor_t t[NT];
} model_t;

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

static float bell(uint64_t *s)
{
	double u = 0;
	int r;
	for (r = 0; r < 4; r++)
		u += (double)(lcg(s) & 0xffffff) / 16777216.0;
	return (float)((u - 2.0) * 0.05);
}

static uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void model_init(model_t *m, unsigned step)
{
	uint64_t s = 99, d = 1000 + step;
	size_t i;
	for (i = 0; i < ROWS * COLS; i++) {
		float a = bell(&s), b = bell(&s);
		/* every step moves one value in eight a little */
		if ((lcg(&d) & 7) == 0)
			a += 0.001f * (float)step;
		m->w0[i] = a;
		m->w1[i] = to_bf16(b);
	}
	for (i = 0; i < COLS; i++)
		m->bias[i] = 0.01f * (float)i + 0.001f * (float)step;
	m->t[0] = (rckpt_tensor_t){ "layer0.weight", RCKPT_F32, 2, { ROWS, COLS }, m->w0 };
	m->t[1] = (rckpt_tensor_t){ "layer1.weight", RCKPT_BF16, 2, { ROWS, COLS }, m->w1 };
	m->t[2] = (rckpt_tensor_t){ "layer1.bias", RCKPT_F32, 1, { COLS }, m->bias };
}

/* The restored step is the model within the codec's error: the relative
 * squared error of each matrix under a few percent, the bias exact. */
static void check_restored(rckpt_job_t *j, uint64_t step, const model_t *m)
{
	rckpt_restored_t *r = NULL;
	float *w0 = malloc(sizeof(float) * ROWS * COLS), *bias = malloc(sizeof(float) * COLS);
	uint16_t *w1 = malloc(2 * ROWS * COLS);
	double n0 = 0, d0 = 0, n1 = 0, d1 = 0;
	size_t i;

	assert_non_null(w0);
	assert_non_null(w1);
	assert_non_null(bias);
	assert_int_equal(rckpt_job_restore(j, step, &r, NULL), 0);
	assert_int_equal(rckpt_restored_step(r), step);
	assert_int_equal(rckpt_restored_count(r), NT);
	/* tensors come back in name order: layer0.weight, layer1.bias, layer1.weight */
	assert_int_equal(rckpt_restored_read(r, 0, w0, sizeof(float) * ROWS * COLS), 0);
	assert_int_equal(rckpt_restored_read(r, 1, bias, sizeof(float) * COLS), 0);
	assert_int_equal(rckpt_restored_read(r, 2, w1, 2 * ROWS * COLS), 0);
	for (i = 0; i < ROWS * COLS; i++) {
		double a = m->w0[i], b = from_bf16(m->w1[i]);
		n0 += (w0[i] - a) * (w0[i] - a);
		d0 += a * a;
		n1 += (from_bf16(w1[i]) - b) * (from_bf16(w1[i]) - b);
		d1 += b * b;
	}
	if (!(n0 / d0 < 0.05)) print_message("n0/d0 %g n1/d1 %g\n", n0 / d0, n1 / d1);
	assert_true(n0 / d0 < 0.05);
	assert_true(n1 / d1 < 0.05);
	assert_memory_equal(bias, m->bias, sizeof(float) * COLS);
	rckpt_restored_free(r);
	free(w0);
	free(w1);
	free(bias);
}

typedef struct fixture {
	rckpt_t *h;
	rados_t cl;
	rados_ioctx_t io;
} fixture_t;

static int group_setup(void **state)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	const char *conf = getenv("CEPH_CONF");
	fixture_t *f;

	*state = NULL;
	if (conf == NULL || *conf == '\0') { /* each test skips, or fails where required */
		print_message("no cluster: CEPH_CONF is not set (./dev.sh test starts one)\n");
		return 0;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL || rckpt_create(&f->h))
		return -1;
	o.timeout_s = 20;
	if (rckpt_connect(f->h, &o) || rados_create(&f->cl, "admin") ||
	    rados_conf_read_file(f->cl, conf) || rados_connect(f->cl) ||
	    rados_ioctx_create(f->cl, "rckpt", &f->io)) {
		print_message("cannot connect: %s\n", rckpt_errmsg(f->h));
		return -1;
	}
	*state = f;
	return 0;
}

static int group_teardown(void **state)
{
	fixture_t *f = *state;
	if (f) {
		rados_ioctx_destroy(f->io);
		rados_shutdown(f->cl);
		rckpt_destroy(f->h);
		free(f);
	}
	return 0;
}

#define NEED_CLUSTER(f)                                    \
	do {                                               \
		if ((f) == NULL) {                         \
			TEST_SKIP(TEST_NEED_CLUSTER, "no cluster (CEPH_CONF is not set)"); \
		}                                          \
	} while (0)

static rckpt_job_t *open_job(rckpt_t *h, const char *name, int writer, uint64_t chunk)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j = NULL;
	o.writer = writer;
	o.chunk_params = chunk;
	o.lease_s = 5;
	if (rckpt_job_open(h, &j, name, &o))
		fail_msg("open %s: %s", name, rckpt_errmsg(h));
	return j;
}

static uint64_t head_of(rckpt_t *h, const char *name, unsigned *count)
{
	rckpt_job_t *r = open_job(h, name, 0, 0);
	rckpt_step_info_t si[16];
	unsigned n = 0;
	int more = 0;
	assert_int_equal(rckpt_job_steps(r, RCKPT_LATEST, si, 16, &n, &more), 0);
	rckpt_job_close(r);
	if (count)
		*count = n;
	return n ? si[n - 1].step : RCKPT_LATEST;
}

/* A second asynchronous save finishes the first before it starts: the
 * first is committed when the second returns, and each handle reports its
 * own save. */
static void test_async_back_pressure(void **state)
{
	fixture_t *f = *state;
	model_t *m1 = malloc(sizeof(*m1)), *m2 = malloc(sizeof(*m2));
	rckpt_save_t *s1 = NULL, *s2 = NULL;
	rckpt_save_stats_t st1, st2;
	rckpt_job_t *j;
	char name[64];
	unsigned n;

	NEED_CLUSTER(f);
	snprintf(name, sizeof(name), "api-bp-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	model_init(m1, 1);
	model_init(m2, 2);
	j = open_job(f->h, name, 1, 20000);
	assert_int_equal(rckpt_job_save_async(j, 10, m1->t, NT, NULL, 0, &s1), 0);
	assert_int_equal(rckpt_job_save_async(j, 20, m2->t, NT, NULL, 0, &s2), 0);
	assert_int_equal(head_of(f->h, name, &n), 10); /* s1 committed, s2 not yet */
	assert_int_equal(n, 1);
	assert_int_equal(rckpt_save_wait(s1, &st1), 0);
	assert_int_equal(rckpt_save_wait(s2, &st2), 0);
	assert_int_equal(head_of(f->h, name, &n), 20);
	assert_int_equal(n, 2);
	assert_true(st1.is_base);
	assert_false(st2.is_base);
	assert_true(st1.nchunks > 3); /* 20000-parameter chunks */
	assert_int_equal(st1.raw_bytes, 4 * (2 * ROWS * COLS + COLS));
	assert_true(st2.enc_bytes < st1.enc_bytes); /* a delta of a small change */
	check_restored(j, 10, m1);
	check_restored(j, 20, m2);
	rckpt_job_close(j);
	rckpt_job_delete(f->h, name);
	free(m1);
	free(m2);
}

/* Closing a job with a save in flight abandons it: waiting gives
 * -ECANCELED, the head stays, and the next writer saves over it. */
static void test_close_abandons(void **state)
{
	fixture_t *f = *state;
	model_t *m = malloc(sizeof(*m));
	rckpt_save_t *s = NULL;
	rckpt_save_stats_t st;
	rckpt_job_t *j;
	char name[64];

	NEED_CLUSTER(f);
	snprintf(name, sizeof(name), "api-ab-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	model_init(m, 1);
	j = open_job(f->h, name, 1, 0);
	assert_int_equal(rckpt_job_save(j, 1, m->t, NT, NULL, 0, NULL), 0);
	model_init(m, 2);
	assert_int_equal(rckpt_job_save_async(j, 2, m->t, NT, NULL, 0, &s), 0);
	rckpt_job_close(j);
	assert_int_equal(rckpt_save_wait(s, &st), -ECANCELED);
	assert_non_null(strstr(rckpt_errmsg(f->h), "closed"));
	assert_int_equal(head_of(f->h, name, NULL), 1);
	j = open_job(f->h, name, 1, 0);
	model_init(m, 3);
	assert_int_equal(rckpt_job_save(j, 3, m->t, NT, NULL, 0, &st), 0);
	assert_int_equal(head_of(f->h, name, NULL), 3);
	check_restored(j, 3, m);
	model_init(m, 1);
	check_restored(j, 1, m);
	rckpt_job_close(j);
	rckpt_job_delete(f->h, name);
	free(m);
}

/* A chunk object lost under a writer: the save's delta append to it fails,
 * the save fails and says so; the next save trims and writes a base, and
 * it restores. */
static void test_failed_append_restarts_chain(void **state)
{
	fixture_t *f = *state;
	model_t *m = malloc(sizeof(*m));
	rckpt_save_stats_t st;
	rckpt_job_t *j;
	char name[64];

	NEED_CLUSTER(f);
	snprintf(name, sizeof(name), "api-fa-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	j = open_job(f->h, name, 1, 20000);
	model_init(m, 1);
	assert_int_equal(rckpt_job_save(j, 1, m->t, NT, NULL, 0, &st), 0);
	model_init(m, 2);
	assert_int_equal(rckpt_job_save(j, 2, m->t, NT, NULL, 0, &st), 0);
	assert_false(st.is_base);
	rados_ioctx_set_namespace(f->io, name);
	assert_int_equal(rados_remove(f->io, "rckpt.chunk.00002"), 0);
	model_init(m, 3);
	assert_true(rckpt_job_save(j, 3, m->t, NT, NULL, 0, &st) < 0);
	assert_int_equal(head_of(f->h, name, NULL), 2);
	model_init(m, 4);
	assert_int_equal(rckpt_job_save(j, 4, m->t, NT, NULL, 0, &st), 0);
	assert_true(st.is_base);
	assert_int_equal(head_of(f->h, name, NULL), 4);
	check_restored(j, 4, m);
	rckpt_job_close(j);
	rckpt_job_delete(f->h, name);
	free(m);
}

/* A writer that starts on a job with a committed head continues its chain:
 * its first save is a delta against the head (the head's levels come from
 * the OSDs), as small as the one the first writer would have written, and
 * every step restores. A writer with another chunk size, whose chunks
 * cannot be deltas of the head's, writes a base. */
static void test_restart_continues_chain(void **state)
{
	fixture_t *f = *state;
	model_t *m = malloc(sizeof(*m));
	rckpt_save_stats_t st, cont;
	rckpt_job_t *j;
	char name[64], other[64];
	unsigned s;

	NEED_CLUSTER(f);
	snprintf(name, sizeof(name), "api-rs-%d", (int)getpid());
	snprintf(other, sizeof(other), "api-rs1-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	rckpt_job_delete(f->h, other);
	/* the reference: one writer for steps 1..3 */
	j = open_job(f->h, other, 1, 20000);
	for (s = 1; s <= 3; s++) {
		model_init(m, s);
		assert_int_equal(rckpt_job_save(j, s, m->t, NT, NULL, 0, &st), 0);
	}
	rckpt_job_close(j);
	/* one writer per step */
	for (s = 1; s <= 3; s++) {
		j = open_job(f->h, name, 1, 20000);
		model_init(m, s);
		assert_int_equal(rckpt_job_save(j, s, m->t, NT, NULL, 0, &cont), 0);
		assert_int_equal(cont.is_base, s == 1);
		rckpt_job_close(j);
	}
	assert_true(cont.enc_bytes <= st.enc_bytes + st.enc_bytes / 10);
	j = open_job(f->h, name, 0, 0);
	for (s = 1; s <= 3; s++) {
		model_init(m, s);
		check_restored(j, s, m);
	}
	rckpt_job_close(j);
	/* another chunk size: a base, and it restores */
	j = open_job(f->h, name, 1, 30000);
	model_init(m, 4);
	assert_int_equal(rckpt_job_save(j, 4, m->t, NT, NULL, 0, &st), 0);
	assert_true(st.is_base);
	check_restored(j, 4, m);
	model_init(m, 3);
	check_restored(j, 3, m);
	rckpt_job_close(j);
	rckpt_job_delete(f->h, name);
	rckpt_job_delete(f->h, other);
	free(m);
}

/* Fencing. Writer A's lease lapses with a save in flight (a paused or
 * partitioned trainer); writer B takes the job. A's commit is refused, so
 * B's first save (which trims past the head it read) cannot remove the
 * records of a step A committed behind its back. */
static void test_lapsed_writer_fenced(void **state)
{
	fixture_t *f = *state;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	model_t *m = malloc(sizeof(*m));
	rckpt_job_t *a = NULL, *b = NULL;
	rckpt_save_t *s = NULL;
	rckpt_save_stats_t st;
	struct timespec nap = { 2, 500000000 };
	char name[64];

	NEED_CLUSTER(f);
	snprintf(name, sizeof(name), "api-fe-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	o.writer = 1;
	o.lease_s = 2;
	assert_int_equal(rckpt_job_open(f->h, &a, name, &o), 0);
	model_init(m, 1);
	assert_int_equal(rckpt_job_save(a, 1, m->t, NT, NULL, 0, NULL), 0);
	assert_int_equal(rckpt_job_open(f->h, &b, name, &o), -EBUSY); /* A holds it */
	model_init(m, 2);
	assert_int_equal(rckpt_job_save_async(a, 2, m->t, NT, NULL, 0, &s), 0);
	nanosleep(&nap, NULL); /* A's lease lapses */
	assert_int_equal(rckpt_job_open(f->h, &b, name, &o), 0);
	assert_int_equal(rckpt_save_wait(s, &st), -ESTALE);
	assert_non_null(strstr(rckpt_errmsg(f->h), "another writer"));
	assert_int_equal(head_of(f->h, name, NULL), 1);
	model_init(m, 3);
	assert_int_equal(rckpt_job_save(b, 3, m->t, NT, NULL, 0, &st), 0);
	assert_int_equal(head_of(f->h, name, NULL), 3);
	check_restored(b, 3, m);
	model_init(m, 1);
	check_restored(b, 1, m);
	rckpt_job_close(a);
	rckpt_job_close(b);
	rckpt_job_delete(f->h, name);
	free(m);
}

/* A budget below what one chunk needs is refused at open, saying why;
 * the smallest accepted one saves and restores. */
static void test_mem_budget(void **state)
{
	fixture_t *f = *state;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	model_t *m = malloc(sizeof(*m));
	rckpt_job_t *j = NULL;
	char name[64];

	NEED_CLUSTER(f);
	snprintf(name, sizeof(name), "api-mb-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	o.writer = 1;
	o.mem_budget = 16 << 20; /* default chunks of 4 Mi need 36 MiB */
	assert_int_equal(rckpt_job_open(f->h, &j, name, &o), -EINVAL);
	assert_null(j);
	assert_non_null(strstr(rckpt_errmsg(f->h), "memory budget"));
	o.chunk_params = 20000; /* 8 x 20000 + 4 MiB */
	o.mem_budget = 5 << 20;
	assert_int_equal(rckpt_job_open(f->h, &j, name, &o), 0);
	model_init(m, 1);
	assert_int_equal(rckpt_job_save(j, 1, m->t, NT, NULL, 0, NULL), 0);
	model_init(m, 2);
	assert_int_equal(rckpt_job_save(j, 2, m->t, NT, NULL, 0, NULL), 0);
	check_restored(j, 2, m);
	rckpt_job_close(j);
	/* options of version 1 (no budget) still open */
	o.version = 1;
	o.mem_budget = 1; /* not read */
	o.chunk_params = 0;
	assert_int_equal(rckpt_job_open(f->h, &j, name, &o), 0);
	rckpt_job_close(j);
	rckpt_job_delete(f->h, name);
	free(m);
}

/* Attachments: each save takes the bytes attached before it; a restore
 * gives them back with their step, a step without one says -ENOENT,
 * compaction removes those of the steps it drops, and a damaged one fails
 * the restore with RCKPT_ECHECKSUM or -EBADMSG. A read-only job cannot attach. */
static void test_attachment(void **state)
{
	fixture_t *f = *state;
	model_t *m = malloc(sizeof(*m));
	rckpt_restored_t *r = NULL;
	rckpt_retention_t keep = { 1, 0 };
	const void *data;
	size_t len, big = 3u << 20;
	uint8_t *blob = malloc(big);
	rckpt_job_t *j, *ro;
	char name[64], oid[80];
	uint64_t size;
	size_t i;

	NEED_CLUSTER(f);
	assert_non_null(blob);
	for (i = 0; i < big; i++)
		blob[i] = (uint8_t)(i * 2654435761u >> 13);
	snprintf(name, sizeof(name), "api-at-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	j = open_job(f->h, name, 1, 0);
	model_init(m, 1);
	assert_int_equal(rckpt_job_attach(j, blob, big), 0);
	assert_int_equal(rckpt_job_save(j, 1, m->t, NT, NULL, 0, NULL), 0);
	model_init(m, 2);
	assert_int_equal(rckpt_job_save(j, 2, m->t, NT, NULL, 0, NULL), 0); /* taken by step 1 */
	model_init(m, 3);
	assert_int_equal(rckpt_job_attach(j, "x", 1), 0);
	assert_int_equal(rckpt_job_attach(j, "opt", 3), 0); /* replaces */
	assert_int_equal(rckpt_job_save(j, 3, m->t, NT, NULL, 0, NULL), 0);

	assert_int_equal(rckpt_job_restore(j, 1, &r, NULL), 0);
	assert_int_equal(rckpt_restored_attachment(r, &data, &len), 0);
	assert_int_equal(len, big);
	assert_memory_equal(data, blob, big);
	rckpt_restored_free(r);
	assert_int_equal(rckpt_job_restore(j, 2, &r, NULL), 0);
	assert_int_equal(rckpt_restored_attachment(r, &data, &len), -ENOENT);
	assert_null(data);
	rckpt_restored_free(r);
	assert_int_equal(rckpt_job_restore(j, 3, &r, NULL), 0);
	assert_int_equal(rckpt_restored_attachment(r, &data, &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(data, "opt", 3);
	rckpt_restored_free(r);

	ro = open_job(f->h, name, 0, 0);
	assert_int_equal(rckpt_job_attach(ro, "x", 1), -EPERM);
	rckpt_job_close(ro);

	/* damage step 3's: the restore fails closed */
	rados_ioctx_set_namespace(f->io, name);
	snprintf(oid, sizeof(oid), "rckpt.attach.%020u", 3u);
	assert_int_equal(rados_stat(f->io, oid, &size, NULL), 0);
	assert_int_equal(rados_write(f->io, oid, "\x00\x00\x00\x00", 4, size - 4), 0);
	assert_true(rckpt_job_restore(j, 3, &r, NULL) < 0);
	assert_null(r);
	assert_non_null(strstr(rckpt_errmsg(f->h), "attachment"));

	/* compaction keeping the head only removes step 1's */
	assert_int_equal(rckpt_job_compact(j, &keep, NULL), 0);
	snprintf(oid, sizeof(oid), "rckpt.attach.%020u", 1u);
	assert_int_equal(rados_stat(f->io, oid, &size, NULL), -ENOENT);
	rados_ioctx_set_namespace(f->io, "");
	rckpt_job_close(j);
	rckpt_job_delete(f->h, name);
	free(blob);
	free(m);
}

/* The trainer's quality callback: it sees every tensor dequantized in
 * fp32 under its name and shape, its loss decides (a loss over quality_eps
 * makes the encoder step less aggressive until it passes), an error from
 * it fails the save and commits nothing. */
typedef struct judge {
	const model_t *m;
	unsigned calls;
	double limit; /* the relative error the "trainer" accepts */
	int fail;
} judge_t;

/* Restores step of job j whole: w0 and w1 (name order 0 and 2). */
static void restore_w(rckpt_job_t *j, uint64_t step, float *w0, uint16_t *w1)
{
	rckpt_restored_t *r = NULL;
	assert_int_equal(rckpt_job_restore(j, step, &r, NULL), 0);
	assert_int_equal(rckpt_restored_read(r, 0, w0, sizeof(float) * ROWS * COLS), 0);
	assert_int_equal(rckpt_restored_read(r, 2, w1, 2 * ROWS * COLS), 0);
	rckpt_restored_free(r);
}

/* Prioritized partial saves pick the blocks that moved and nothing else
 * changes; round robin covers every block in 1/fraction saves; random
 * saves restore; partial recovery writes only the asked range; compaction
 * keeps partial steps bit-exact; a new writer's first partial save is
 * full; a job without partial_block refuses them. */
static void test_partial(void **state)
{
	fixture_t *f = *state;
	static model_t m;
	const size_t NW = ROWS * COLS;
	float *a0 = malloc(4 * NW), *b0 = malloc(4 * NW), *live = malloc(4 * NW);
	uint16_t *a1 = malloc(2 * NW), *b1 = malloc(2 * NW);
	static const size_t moved[] = { 300, 5000, 20000 }; /* block starts in chunk 0 */
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_partial_t p = { 0.01, RCKPT_SELECT_PRIORITY, 0 };
	rckpt_save_stats_t st;
	rckpt_restored_t *r = NULL;
	rckpt_job_t *j = NULL;
	uint64_t full_bytes, want;
	size_t i, k;
	unsigned s;

	NEED_CLUSTER(f);
	assert_true(a0 && b0 && live && a1 && b1);
	rckpt_job_delete(f->h, "t-partial");
	rckpt_job_delete(f->h, "t-partial-no");
	/* a job opened without partial_block refuses partial saves */
	j = open_job(f->h, "t-partial-no", 1, 32768);
	model_init(&m, 0);
	assert_int_equal(rckpt_job_save_partial(j, 1, m.t, NT, NULL, 0, &p, &st), -EINVAL);
	rckpt_job_close(j);
	rckpt_job_delete(f->h, "t-partial-no"); /* may hold nothing */

	o.writer = 1;
	o.chunk_params = 32768;
	o.lease_s = 5;
	o.partial_block = 100;
	assert_int_equal(rckpt_job_open(f->h, &j, "t-partial", &o), 0);
	p.fraction = 0; /* bad fraction */
	assert_int_equal(rckpt_job_save_partial(j, 1, m.t, NT, NULL, 0, &p, &st), -EINVAL);
	p.fraction = 0.01;
	/* a writer's first save is full */
	assert_int_equal(rckpt_job_save_partial(j, 1, m.t, NT, NULL, 0, &p, &st), 0);
	assert_false(st.is_partial);
	full_bytes = st.enc_bytes;
	restore_w(j, 1, a0, a1);

	/* three blocks move far; nothing else */
	for (k = 0; k < 3; k++)
		for (i = moved[k]; i < moved[k] + 100; i++)
			m.w0[i] += 0.5f;
	assert_int_equal(rckpt_job_save_partial(j, 2, m.t, NT, NULL, 0, &p, &st), 0);
	assert_true(st.is_partial);
	/* chunk pieces of 32768, 32768, 11264 + 21504, 32768, 22528: blocks rounded up per piece */
	assert_int_equal(st.blocks, 328 + 328 + 113 + 216 + 328 + 226);
	want = (st.blocks + 99) / 100;
	assert_int_equal(st.blocks_saved, want);
	assert_true(st.enc_bytes * 4 < full_bytes);
	restore_w(j, 2, b0, b1);
	for (i = 0; i < NW; i++) {
		int in = 0;
		for (k = 0; k < 3; k++)
			in |= i >= moved[k] && i < moved[k] + 100;
		if (in)
			assert_true(fabsf(b0[i] - m.w0[i]) < 0.02f); /* saved */
		else
			assert_true(memcmp(&b0[i], &a0[i], 4) == 0); /* as step 1 */
	}
	assert_memory_equal(b1, a1, 2 * NW);
	check_restored(j, 2, &m);

	/* round robin: every block moves; after 1/fraction saves all are
	 * saved, not before */
	for (i = 0; i < NW; i += 7) {
		m.w0[i] += 0.2f;
		m.w1[i] = to_bf16(from_bf16(m.w1[i]) + 0.2f);
	}
	p.select = RCKPT_SELECT_ROUND_ROBIN;
	p.fraction = 0.25;
	for (s = 3; s <= 6; s++) {
		size_t off_by = 0;
		assert_int_equal(rckpt_job_save_partial(j, s, m.t, NT, NULL, 0, &p, &st), 0);
		assert_true(st.is_partial);
		assert_int_equal(st.blocks_saved, (st.blocks + 3) / 4);
		restore_w(j, s, b0, b1);
		for (i = 0; i < NW; i += 7)
			off_by += (fabsf(b0[i] - m.w0[i]) > 0.1f) +
				  (fabsf(from_bf16(b1[i]) - from_bf16(m.w1[i])) > 0.1f);
		if (s < 6)
			assert_true(off_by > 0);
		else
			assert_int_equal(off_by, 0);
	}
	check_restored(j, 6, &m);
	/* random: half the blocks of a model that moved a little */
	p.select = RCKPT_SELECT_RANDOM;
	p.fraction = 0.5;
	p.seed = 7;
	for (i = 0; i < NW; i += 3)
		m.w0[i] += 0.002f;
	assert_int_equal(rckpt_job_save_partial(j, 7, m.t, NT, NULL, 0, &p, &st), 0);
	assert_int_equal(st.blocks_saved, (st.blocks + 1) / 2);
	check_restored(j, 7, &m);

	/* partial recovery: only [1000, 1500) of layer0.weight, into a live
	 * copy whose other values stay */
	restore_w(j, 7, a0, a1);
	{
		const rckpt_range_t rg = { "layer0.weight", 1000, 500 }, past = { "layer0.weight", NW - 10, 11 },
				    none = { "nope", 0, 1 };
		for (i = 0; i < NW; i++)
			live[i] = (float)i;
		assert_int_equal(rckpt_job_restore_ranges(j, 7, &past, 1, &r, NULL), -ERANGE);
		assert_int_equal(rckpt_job_restore_ranges(j, 7, &none, 1, &r, NULL), -ENOENT);
		assert_int_equal(rckpt_job_restore_ranges(j, 7, &rg, 1, &r, NULL), 0);
		assert_int_equal(rckpt_restored_find(r, "layer0.weight"), 0);
		assert_int_equal(rckpt_restored_find(r, "layer1.weight"), 2);
		assert_int_equal(rckpt_restored_find(r, "nope"), -ENOENT);
		assert_int_equal(rckpt_restored_read_range(r, 0, 1000, 500, live + 1000), 0);
		assert_int_equal(rckpt_restored_read_range(r, 0, 40000, 10, live + 40000), -ENOENT);
		assert_int_equal(rckpt_restored_read_range(r, 0, NW - 5, 6, live), -ERANGE);
		rckpt_restored_free(r);
		for (i = 0; i < NW; i++) {
			if (i >= 1000 && i < 1500)
				assert_true(memcmp(&live[i], &a0[i], 4) == 0);
			else
				assert_true(live[i] == (float)i);
		}
	}
	/* compaction keeps partial steps bit-exact */
	{
		rckpt_retention_t keep = { 3, 0 };
		rckpt_compact_stats_t cs;
		restore_w(j, 6, b0, b1);
		assert_int_equal(rckpt_job_compact(j, &keep, &cs), 0);
		assert_int_equal(cs.steps_after, 3);
		restore_w(j, 7, live, a1);
		assert_memory_equal(live, a0, 4 * NW);
		restore_w(j, 6, live, a1);
		assert_memory_equal(live, b0, 4 * NW);
	}
	/* values the last codebooks cannot reach within eps: a full save */
	for (i = 0; i < NW; i++) {
		m.w0[i] *= 0.02f;
		m.w1[i] = to_bf16(from_bf16(m.w1[i]) * 0.02f);
	}
	assert_int_equal(rckpt_job_save_partial(j, 8, m.t, NT, NULL, 0, &p, &st), 0);
	assert_false(st.is_partial);
	check_restored(j, 8, &m);
	/* a new writer's first partial save is full, then partial again */
	rckpt_job_close(j);
	assert_int_equal(rckpt_job_open(f->h, &j, "t-partial", &o), 0);
	p.select = RCKPT_SELECT_PRIORITY;
	assert_int_equal(rckpt_job_save_partial(j, 9, m.t, NT, NULL, 0, &p, &st), 0);
	assert_false(st.is_partial);
	assert_int_equal(rckpt_job_save_partial(j, 10, m.t, NT, NULL, 0, &p, &st), 0);
	assert_true(st.is_partial);
	assert_true(st.quality <= 0.003);
	check_restored(j, 10, &m);
	rckpt_job_close(j);
	assert_int_equal(rckpt_job_delete(f->h, "t-partial"), 0);
	free(a0);
	free(b0);
	free(live);
	free(a1);
	free(b1);
}

/* The adaptive policy: Daly's interval, the first save, the interval,
 * emergency and insurance decisions, notices from a call, a file and a
 * command, and the preemption history learned across runs. */
static void test_policy(void **state)
{
	fixture_t *f = *state;
	rckpt_policy_opts_t po = RCKPT_POLICY_OPTS_INIT;
	rckpt_policy_info_t in;
	rckpt_policy_t *p = NULL;
	rckpt_job_t *j;
	char path[64];
	double y;

	/* pure: no cluster needed */
	y = sqrt(2.0 * 10 * 3600);
	assert_true(fabs(rckpt_policy_interval(10, 3600, 0) -
			 (y * (1 + sqrt(10 / 7200.0) / 3 + 10 / 7200.0 / 9) - 10)) < 1e-9);
	assert_true(rckpt_policy_interval(10, 3590, 10) == rckpt_policy_interval(10, 3600, 0));
	assert_true(rckpt_policy_interval(100, 20, 0) == 20); /* delta >= 2M: M */
	assert_true(rckpt_policy_interval(0, 3600, 0) == 0);
	NEED_CLUSTER(f);
	rckpt_job_delete(f->h, "t-policy");
	j = open_job(f->h, "t-policy", 1, 0);
	po.version = 99;
	assert_int_equal(rckpt_policy_open(j, &p, &po), -EINVAL);
	po.version = RCKPT_POLICY_OPTS_VERSION;
	po.grace_s = 30;
	assert_int_equal(rckpt_policy_open(j, &p, &po), 0);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_int_equal(in.job_preemptions, 0);
	assert_true(in.preemptions ? in.mttp_s > 0 : in.mttp_s == 3600); /* the pool may have some */
	assert_int_equal(rckpt_policy_should_save(p, 1), RCKPT_POLICY_SAVE); /* the first */
	rckpt_policy_save_time(p, 0.5);
	rckpt_policy_step_time(p, 0.1);
	rckpt_policy_saved(p, 1);
	assert_int_equal(rckpt_policy_should_save(p, 2), RCKPT_POLICY_CONTINUE);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_true(fabs(in.interval_s - rckpt_policy_interval(0.5, in.mttp_s, in.restart_s)) < 1e-9);
	assert_true(in.emergency_fits);
	rckpt_policy_notify(p);
	assert_int_equal(rckpt_policy_should_save(p, 3), RCKPT_POLICY_EMERGENCY);
	rckpt_policy_saved(p, 3);
	assert_int_equal(rckpt_policy_should_save(p, 3), RCKPT_POLICY_STOP);
	rckpt_policy_close(p);
	/* the next run learns the first's lifetime; its restart time is kept */
	assert_int_equal(rckpt_policy_open(j, &p, &po), 0);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_int_equal(in.job_preemptions, 1);
	assert_true(in.preemptions >= 1);
	assert_int_equal(rckpt_policy_restart_time(p, 2.0), 0);
	rckpt_policy_close(p);
	assert_int_equal(rckpt_policy_open(j, &p, &po), 0);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_true(in.restart_s > 0);
	/* a grace too short for a save: insurance saves, then stop */
	rckpt_policy_close(p);
	po.grace_s = 0.5;
	po.min_interval_s = 0.01;
	po.default_mttp_s = 1e-6;
	assert_int_equal(rckpt_policy_open(j, &p, &po), 0);
	assert_int_equal(rckpt_policy_should_save(p, 1), RCKPT_POLICY_SAVE);
	rckpt_policy_save_time(p, 0.001); /* beta alone passes the grace */
	rckpt_policy_saved(p, 1);
	{
		const struct timespec ts = { 0, 150000000 };
		nanosleep(&ts, NULL);
	}
	assert_int_equal(rckpt_policy_should_save(p, 2), RCKPT_POLICY_INSURANCE);
	rckpt_policy_notify(p);
	assert_int_equal(rckpt_policy_should_save(p, 3), RCKPT_POLICY_STOP);
	rckpt_policy_close(p);
	/* notices from a file and from a command */
	snprintf(path, sizeof(path), "/tmp/rckpt-notice-%ld", (long)getpid());
	unlink(path);
	po = (rckpt_policy_opts_t)RCKPT_POLICY_OPTS_INIT;
	po.notice_file = path;
	po.poll_s = 0.001;
	assert_int_equal(rckpt_policy_open(j, &p, &po), 0);
	rckpt_policy_saved(p, 1);
	rckpt_policy_save_time(p, 0.1);
	assert_int_equal(rckpt_policy_should_save(p, 2), RCKPT_POLICY_CONTINUE);
	fclose(fopen(path, "w"));
	{
		const struct timespec ts = { 0, 5000000 }; /* past poll_s */
		nanosleep(&ts, NULL);
	}
	assert_int_equal(rckpt_policy_should_save(p, 3), RCKPT_POLICY_EMERGENCY);
	rckpt_policy_close(p);
	unlink(path);
	po.notice_file = NULL;
	{
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "test -e %s", path);
		po.notice_cmd = cmd;
		assert_int_equal(rckpt_policy_open(j, &p, &po), 0);
	}
	rckpt_policy_saved(p, 1);
	rckpt_policy_save_time(p, 0.1);
	assert_int_equal(rckpt_policy_should_save(p, 2), RCKPT_POLICY_CONTINUE);
	fclose(fopen(path, "w"));
	{
		const struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	assert_int_equal(rckpt_policy_should_save(p, 3), RCKPT_POLICY_EMERGENCY);
	rckpt_policy_close(p);
	unlink(path);
	assert_int_equal(rckpt_policy_open(j, &p, NULL), 0);
	assert_int_equal(rckpt_policy_info(p, &in), 0);
	assert_int_equal(in.job_preemptions, 4);
	rckpt_policy_close(p);
	/* a long history: 1100 more events (the oldest 80 with lifetime 1 s,
	 * then 1020 of 500 s), more than a page; opening estimates from the
	 * newest `history` and trims the job's object (1104 events) to its
	 * newest 1024, exactly those of 1 s gone */
	{
		enum { NEV = 1100, PER_OP = 100 };
		rados_omap_iter_t it = NULL;
		unsigned char more = 0;
		unsigned k, left = 0;
		int prval = 0;
		rados_ioctx_set_namespace(f->io, "t-policy");
		for (k = 0; k < NEV; k += PER_OP) {
			char keys[PER_OP][32];
			uint8_t vals[PER_OP][24];
			const char *kp[PER_OP], *vp[PER_OP];
			size_t lens[PER_OP];
			rados_write_op_t op = rados_create_write_op();
			unsigned e;
			for (e = 0; e < PER_OP; e++) {
				const double life = k + e < 80 ? 1.0 : 500.0, rs = -1;
				const uint64_t ns = 1000000000ull + k + e;
				memcpy(&vals[e][0], &life, 8); /* little-endian hosts */
				memcpy(&vals[e][8], &rs, 8);
				memcpy(&vals[e][16], &ns, 8);
				snprintf(keys[e], sizeof(keys[e]), "x.pre.%020llu", (unsigned long long)ns);
				kp[e] = keys[e];
				vp[e] = (const char *)vals[e];
				lens[e] = 24;
			}
			rados_write_op_omap_set(op, kp, vp, lens, PER_OP);
			assert_int_equal(rados_write_op_operate(op, f->io, "rckpt.job", NULL, 0), 0);
			rados_release_write_op(op);
		}
		po = (rckpt_policy_opts_t)RCKPT_POLICY_OPTS_INIT;
		po.history = 1025;
		assert_int_equal(rckpt_policy_open(j, &p, &po), -EINVAL);
		po.history = 1000;
		assert_int_equal(rckpt_policy_open(j, &p, &po), 0);
		assert_int_equal(rckpt_policy_info(p, &in), 0);
		assert_int_equal(in.job_preemptions, 1000); /* the 4 real ones sort last */
		rckpt_policy_close(p);
		/* the job's object holds its newest 1024 events now */
		rados_read_op_t rop = rados_create_read_op();
		rados_read_op_omap_get_vals2(rop, "", "x.pre.", 4096, &it, &more, &prval);
		assert_int_equal(rados_read_op_operate(rop, f->io, "rckpt.job", 0), 0);
		assert_int_equal(prval, 0);
		{
			char *key, *val;
			size_t len;
			while (rados_omap_get_next(it, &key, &val, &len) == 0 && key != NULL) {
				double life;
				memcpy(&life, val, 8);
				assert_int_equal(len, 24);
				assert_true(life != 1.0); /* the oldest are gone */
				left++;
			}
		}
		rados_omap_get_end(it);
		rados_release_read_op(rop);
		rados_ioctx_set_namespace(f->io, "");
		assert_int_equal(left, 1024);
	}
	rckpt_job_close(j);
	rckpt_job_delete(f->h, "t-policy");
}

static int judge_cb(void *arg, const rckpt_tensor_t *t, unsigned n, double *loss)
{
	judge_t *jd = arg;
	const float *w;
	double num = 0, den = 0;
	size_t i;
	jd->calls++;
	if (jd->fail)
		return -EIO;
	if (n != NT || strcmp(t[0].name, "layer0.weight") != 0 || t[0].dtype != RCKPT_F32 ||
	    t[0].ndim != 2 || t[0].shape[0] != ROWS || t[0].shape[1] != COLS ||
	    strcmp(t[2].name, "layer1.weight") != 0 || t[2].dtype != RCKPT_F32)
		return -EINVAL;
	w = t[0].data;
	for (i = 0; i < ROWS * COLS; i++) {
		num += (w[i] - jd->m->w0[i]) * (double)(w[i] - jd->m->w0[i]);
		den += jd->m->w0[i] * (double)jd->m->w0[i];
	}
	/* the loss is the error in units of the limit: passes at <= 0.01 */
	*loss = 0.01 * (num / den) / jd->limit;
	return 0;
}

static void test_quality_callback(void **state)
{
	fixture_t *f = *state;
	model_t *m = malloc(sizeof(*m));
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_save_stats_t loose, tight;
	judge_t jd = { m, 0, 1.0, 0 };
	rckpt_job_t *j = NULL;
	char name[64];
	unsigned n;

	NEED_CLUSTER(f);
	model_init(m, 1);
	o.writer = 1;
	o.eps = 0.05; /* the built-in measure lets a lot through */
	o.quality = judge_cb;
	o.quality_arg = &jd;
	snprintf(name, sizeof(name), "api-q-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	assert_int_equal(rckpt_job_open(f->h, &j, name, &o), 0);
	assert_int_equal(rckpt_job_save(j, 1, m->t, NT, NULL, 0, &loose), 0);
	assert_true(jd.calls >= 1);
	rckpt_job_close(j);
	rckpt_job_delete(f->h, name);

	/* a stricter trainer: more bins, more calls, more bytes */
	jd.calls = 0;
	jd.limit = 1e-4;
	assert_int_equal(rckpt_job_open(f->h, &j, name, &o), 0);
	assert_int_equal(rckpt_job_save(j, 1, m->t, NT, NULL, 0, &tight), 0);
	assert_true(jd.calls > 1);
	assert_true(tight.enc_bytes > loose.enc_bytes);
	check_restored(j, 1, m);

	/* a failing callback fails the save; nothing is committed */
	jd.fail = 1;
	model_init(m, 2);
	assert_int_equal(rckpt_job_save(j, 2, m->t, NT, NULL, 0, NULL), -EIO);
	assert_int_equal(head_of(f->h, name, &n), 1);
	rckpt_job_close(j);
	rckpt_job_delete(f->h, name);

	/* a negative threshold is refused at open */
	o.quality_eps = -1;
	assert_int_equal(rckpt_job_open(f->h, &j, name, &o), -EINVAL);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_async_back_pressure),
		cmocka_unit_test(test_close_abandons),
		cmocka_unit_test(test_failed_append_restarts_chain),
		cmocka_unit_test(test_restart_continues_chain),
		cmocka_unit_test(test_lapsed_writer_fenced),
		cmocka_unit_test(test_mem_budget),
		cmocka_unit_test(test_attachment),
		cmocka_unit_test(test_quality_callback),
		cmocka_unit_test(test_partial),
		cmocka_unit_test(test_policy),
	};
	return test_exit(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
