/*
 * test_store_api.c — librckpt's checkpoint store through its C API on a
 * live cluster: asynchronous saves and their back-pressure, a job closed
 * with a save in flight, a save whose appends fail (the next one trims and
 * starts a base), a restarted writer that continues the chain, a lapsed
 * writer fenced, small chunks under a tight memory budget and the budget's
 * check at open, attachments, the trainer's quality callback; and, from
 * test_store_partial.c, partial saves and recovery and the adaptive
 * policy. Needs CEPH_CONF (./dev.sh test starts a cluster); skips without
 * one unless RCKPT_REQUIRE_CLUSTER=1.
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

#include "rckpt_manifest.h"
#include "rckpt_store_wire.h" /* a stale writer's requests, by hand */
#include "store_fixture.h"

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

/* Every tensor of step s of j, restored, into one buffer (name order). */
#define MODEL_BYTES (4 * ROWS * COLS + 4 * COLS + 2 * ROWS * COLS)
static void restore_bytes(rckpt_job_t *j, uint64_t s, uint8_t *buf)
{
	rckpt_restored_t *r = NULL;
	assert_int_equal(rckpt_job_restore(j, s, &r, NULL), 0);
	assert_int_equal(rckpt_restored_read(r, 0, buf, 4 * ROWS * COLS), 0);
	assert_int_equal(rckpt_restored_read(r, 1, buf + 4 * ROWS * COLS, 4 * COLS), 0);
	assert_int_equal(rckpt_restored_read(r, 2, buf + 4 * ROWS * COLS + 4 * COLS, 2 * ROWS * COLS), 0);
	rckpt_restored_free(r);
}

/* A class call of the stale writer, sent by hand as librados would send
 * its queued request once the partition heals. */
static int late_call(fixture_t *f, const char *oid, const char *method, const rckpt_buf_t *msg)
{
	return rados_exec(f->io, oid, "rckpt", method, (const char *)msg->p, msg->len, NULL, 0);
}

/* Issue 25: writer A saves, then pauses past its lease with requests
 * queued; B claims the job, trims past the head, saves on. Then A's
 * queued requests land on the OSD: a trim that would cut every chunk back
 * to step 0, an append, a claim, its manifest of step 3; and those of
 * other actors that read A's token (a compactor, gc, rm). Each is refused
 * (-ESTALE) and changes nothing: B's committed steps restore to the same
 * bytes as before, and B saves on. */
static void test_stale_writer_requests_refused(void **state)
{
	fixture_t *f = *state;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	model_t *m = malloc(sizeof(*m));
	uint8_t *was[2], *now = malloc(MODEL_BYTES);
	rckpt_job_t *a = NULL, *b = NULL;
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	struct timespec nap = { 2, 500000000 };
	uint64_t token_a = 0;
	char name[64], tok[8];
	int prval = 0;
	unsigned i;

	NEED_CLUSTER(f);
	was[0] = malloc(MODEL_BYTES);
	was[1] = malloc(MODEL_BYTES);
	assert_true(m && now && was[0] && was[1]);
	snprintf(name, sizeof(name), "api-stale-%d", (int)getpid());
	rckpt_job_delete(f->h, name);
	o.writer = 1;
	o.lease_s = 2;
	assert_int_equal(rckpt_job_open(f->h, &a, name, &o), 0);
	for (i = 1; i <= 2; i++) {
		model_init(m, i);
		assert_int_equal(rckpt_job_save(a, i, m->t, NT, NULL, 0, NULL), 0);
	}
	/* A's token, as its queued requests carry it */
	rados_ioctx_set_namespace(f->io, name);
	{
		rados_omap_iter_t it;
		rados_read_op_t op = rados_create_read_op();
		char *k = NULL, *v = NULL;
		size_t vl = 0;
		const char *keys[1] = { "writer" };
		rados_read_op_omap_get_vals_by_keys(op, keys, 1, &it, &prval);
		assert_int_equal(rados_read_op_operate(op, f->io, "rckpt.job", 0), 0);
		assert_int_equal(rados_omap_get_next(it, &k, &v, &vl), 0);
		assert_non_null(k);
		assert_int_equal(vl, 8);
		memcpy(tok, v, 8);
		rados_omap_get_end(it);
		rados_release_read_op(op);
	}
	for (i = 0; i < 8; i++)
		token_a |= (uint64_t)(uint8_t)tok[i] << (8 * i);
	assert_true(token_a != 0);
	nanosleep(&nap, NULL); /* A's lease lapses */
	assert_int_equal(rckpt_job_open(f->h, &b, name, &o), 0);
	for (i = 3; i <= 4; i++) {
		model_init(m, i);
		assert_int_equal(rckpt_job_save(b, i, m->t, NT, NULL, 0, NULL), 0);
	}
	restore_bytes(b, 3, was[0]);
	restore_bytes(b, 4, was[1]);

	assert_int_equal(rckpt_msg_trim_encode(&msg, token_a, 0), 0);
	assert_int_equal(late_call(f, "rckpt.chunk.00000", "trim", &msg), -ESTALE);
	msg.len = 0;
	assert_int_equal(rckpt_msg_trim_encode(&msg, token_a, RCKPT_STORE_NONE), 0);
	assert_int_equal(late_call(f, "rckpt.chunk.00000", "trim", &msg), -ESTALE);
	msg.len = 0;
	assert_int_equal(rckpt_msg_append_encode(&msg, token_a, (const uint8_t *)"RKCR", 4), 0);
	assert_int_equal(late_call(f, "rckpt.chunk.00000", "append", &msg), -ESTALE);
	msg.len = 0;
	assert_int_equal(rckpt_msg_claim_encode(&msg, 0, token_a, 0), 0);
	assert_int_equal(late_call(f, "rckpt.job", "claim", &msg), -ESTALE);
	msg.len = 0;
	assert_int_equal(rckpt_msg_claim_encode(&msg, 0, token_a, RCKPT_CLAIM_DELETE), 0);
	assert_int_equal(late_call(f, "rckpt.job", "claim", &msg), -ESTALE);
	{ /* A's manifest of step 3 (B has put its own), and the late requests
	   * of actors that read A's token: a compactor's stage and drop, an
	   * operator's pin, gc's or rm's retire of a manifest and a chunk */
		rckpt_manifest_t mf;
		rckpt_buf_t man = RCKPT_BUF_INIT;
		const uint64_t keep[1] = { 4 }, three[1] = { 3 };
		rckpt_msg_retire_t r = { token_a, 3, RCKPT_RETIRE_STEP };
		memset(&mf, 0, sizeof(mf));
		mf.step = 3;
		mf.parent = RCKPT_STORE_NONE;
		mf.chunk_params = 1;
		assert_int_equal(rckpt_manifest_encode(&man, &mf), 0);
		msg.len = 0;
		assert_int_equal(rckpt_msg_put_encode(&msg, token_a, 3, man.p, man.len), 0);
		assert_int_equal(late_call(f, "rckpt.manifest.00000000000000000003", "put", &msg), -ESTALE);
		rckpt_buf_free(&man);
		msg.len = 0;
		assert_int_equal(rckpt_msg_compact_encode(&msg, token_a, 4, keep, 1), 0);
		assert_int_equal(late_call(f, "rckpt.chunk.00000", "compact", &msg), -ESTALE);
		msg.len = 0;
		assert_int_equal(rckpt_msg_drop_encode(&msg, token_a, three, 1), 0);
		assert_int_equal(late_call(f, "rckpt.job", "drop", &msg), -ESTALE);
		msg.len = 0;
		assert_int_equal(rckpt_msg_pin_encode(&msg, token_a, 3, 1), 0);
		assert_int_equal(late_call(f, "rckpt.job", "pin", &msg), -ESTALE);
		msg.len = 0;
		assert_int_equal(rckpt_msg_retire_encode(&msg, &r), 0);
		assert_int_equal(late_call(f, "rckpt.manifest.00000000000000000003", "retire", &msg), -ESTALE);
		r.step = RCKPT_STORE_NONE;
		r.kind = RCKPT_RETIRE_CHUNK;
		msg.len = 0;
		assert_int_equal(rckpt_msg_retire_encode(&msg, &r), 0);
		assert_int_equal(late_call(f, "rckpt.chunk.00000", "retire", &msg), -ESTALE);
		r.kind = RCKPT_RETIRE_JOB;
		msg.len = 0;
		assert_int_equal(rckpt_msg_retire_encode(&msg, &r), 0);
		assert_int_equal(late_call(f, "rckpt.job", "retire", &msg), -ESTALE);
	}
	rados_ioctx_set_namespace(f->io, "");

	assert_int_equal(head_of(f->h, name, NULL), 4);
	restore_bytes(b, 3, now);
	assert_memory_equal(now, was[0], MODEL_BYTES);
	restore_bytes(b, 4, now);
	assert_memory_equal(now, was[1], MODEL_BYTES);
	model_init(m, 5);
	assert_int_equal(rckpt_job_save(b, 5, m->t, NT, NULL, 0, NULL), 0); /* B saves on */
	check_restored(b, 5, m);
	rckpt_buf_free(&msg);
	rckpt_job_close(a);
	rckpt_job_close(b);
	rckpt_job_delete(f->h, name);
	free(m);
	free(now);
	free(was[0]);
	free(was[1]);
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
	/* options of another version are refused, naming both (one version
	 * until the first release) */
	o.version = RCKPT_JOB_OPTS_VERSION + 1;
	assert_int_equal(rckpt_job_open(f->h, &j, name, &o), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(f->h), "where this library takes"));
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
		cmocka_unit_test(test_stale_writer_requests_refused),
		cmocka_unit_test(test_mem_budget),
		cmocka_unit_test(test_attachment),
		cmocka_unit_test(test_quality_callback),
		cmocka_unit_test(test_partial),
		cmocka_unit_test(test_policy),
	};
	return test_exit(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
