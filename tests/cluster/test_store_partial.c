/*
 * test_store_partial.c — part of test_store_api: prioritized partial saves
 * and partial recovery (SCAR), and the adaptive checkpoint policy, on a
 * live cluster.
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

#include "store_fixture.h"

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
void test_partial(void **state)
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
void test_policy(void **state)
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

