/*
 * test_planted.c — objects a trainer can write with plain RADOS writes
 * (its caps are `rwx` on its namespace) that no rckpt writer writes, and
 * every method of the `rckpt` class on them (issue "Store safety IV"):
 *
 *  A  a chunk object of 20,000 small records (a base, then deltas) and no
 *     `count` key (an older plugin's chunk had no count; append stops at
 *     1024 records): compacting it would fold and move every one;
 *  B  a chunk object of a base and a delta that each declare 2^26
 *     elements (append refuses past 2^22; a plain write does not ask):
 *     constant index streams of a few dozen bytes that decode to 64 MiB of
 *     levels each;
 *  C  the largest object a writer makes: 1024 records (a segment's), 31
 *     MiB (under the 32 MiB segment cap), whose compaction from its first
 *     step moves every record;
 *  D  the largest records a writer makes, exact steps' (2^22 fp32 values
 *     kept whole, in planes: about 13 MiB each), three in a chain where
 *     the writer rolls at two; compacting steps 1..2 folds two of them
 *     and re-encodes one, and moves the third.
 *
 * And a commit to a job whose rewind has not finished: -EBUSY within 1 s.
 *
 * Checked: each call (index, tip, verify, materialize, compact, trim, and
 * the job object's head and list on them) returns within 1 s (on C and D
 * the compaction succeeds, on D the materialize); the OSD's resident
 * memory grows by at most 64 MiB in any call (its peak, VmHWM reset
 * before each call where /proc allows it, and sampled every 5 ms, over
 * what it held as the call began); the OSD answers `ping` afterwards.
 *
 * Environment: CEPH_CONF; RCKPT_TEST_CLIENT (the cephx user, default
 * admin; test_planted.sh runs it as a trainer of the namespace);
 * RCKPT_TEST_NS (the job's namespace, default planted-<pid>);
 * RCKPT_TEST_OSD_PID, or else the pid file run/osd.0.pid beside
 * CEPH_CONF (the local cluster's). Skipped without a cluster or an OSD
 * pid to watch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
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

#include "rckpt_record.h"
#include "rckpt_store_wire.h"

#define ENTRIES 20000u
#define CALL_SECONDS_MAX 1.0
#define RSS_GROWTH_MAX ((long)64 << 20)
#define RSS_KEPT_MAX ((long)128 << 20) /* what the OSD still holds after every call: the
					  stores' own caches, no call's leftovers */

typedef struct fixture {
	rados_t cl;
	rados_ioctx_t io;
	char ns[80];
	char oid_a[64], oid_b[64], oid_c[64], oid_d[64];
	long osd_pid;
} fixture_t;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A field of the OSD's status (VmRSS, VmHWM) in bytes, or -1. */
static long status_of(long pid, const char *field)
{
	char path[64], line[256], fmt[32];
	long kb = -1;
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	snprintf(fmt, sizeof(fmt), "%s: %%ld kB", field);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

/* The OSD's resident bytes (VmRSS), or -1. */
static long rss_of(long pid)
{
	return status_of(pid, "VmRSS");
}

/* Resets the OSD's peak (VmHWM) to what it holds now; 0 when it could. */
static int reset_peak(long pid)
{
	char path[64];
	FILE *f;
	int rc;
	snprintf(path, sizeof(path), "/proc/%ld/clear_refs", pid);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	rc = fputs("5", f) < 0;
	return fclose(f) || rc ? -1 : 0;
}

/* The OSD's resident memory every 5 ms, its peak since the last take
 * (where VmHWM cannot be reset, a peak between samples is missed). */
typedef struct sampler {
	long pid, peak;
	int stop;
	pthread_mutex_t mu;
} sampler_t;

static void *sample(void *arg)
{
	sampler_t *s = arg;
	for (;;) {
		long r = rss_of(s->pid);
		int stop;
		pthread_mutex_lock(&s->mu);
		if (r > s->peak)
			s->peak = r;
		stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			return NULL;
		usleep(5000);
	}
}

/* The sampled peak since the last take; the next starts from `from`. */
static long sampler_take(sampler_t *s, long from)
{
	long p;
	pthread_mutex_lock(&s->mu);
	p = s->peak;
	s->peak = from;
	pthread_mutex_unlock(&s->mu);
	return p;
}

static long osd_pid(void)
{
	const char *env = getenv("RCKPT_TEST_OSD_PID"), *conf = getenv("CEPH_CONF");
	char path[4096], *slash;
	long pid = -1;
	FILE *f;
	if (env && *env)
		return strtol(env, NULL, 10);
	if (conf == NULL || strlen(conf) + 32 > sizeof(path))
		return -1;
	snprintf(path, sizeof(path), "%s", conf);
	slash = strrchr(path, '/');
	snprintf(slash ? slash + 1 : path, sizeof(path) - (size_t)(slash ? slash + 1 - path : 0),
		 "run/osd.0.pid");
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = -1;
	fclose(f);
	return pid > 0 && rss_of(pid) > 0 ? pid : -1;
}

static void set_u64(fixture_t *f, const char *oid, const char *key, uint64_t v)
{
	uint8_t b[8];
	const char *k[1] = { key }, *vv[1] = { (const char *)b };
	size_t l[1] = { 8 };
	rados_write_op_t op = rados_create_write_op();
	unsigned i;
	for (i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	rados_write_op_omap_set(op, k, vv, l, 1);
	assert_int_equal(rados_write_op_operate(op, f->io, oid, NULL, 0), 0);
	rados_release_write_op(op);
}

/* Record `step` of one quantized segment of n elements, every level
 * `level` (< 3: a constant index stream, a few dozen bytes whatever n; 3:
 * levels 0 and 1 hashed, about a bit an element; 4: an exact step's, n
 * fp32 values kept whole in planes, weight-like, each step moving their
 * low bits), a base or a delta on `parent` (its decoded record), appended
 * to out. */
static void chain_record(rckpt_buf_t *out, rckpt_record_t *r, uint64_t step, const rckpt_record_t *parent,
			 uint64_t n, uint8_t level)
{
	const rckpt_istream_opts_t is = { 0, RCKPT_EST_TRY_HUFF, 1, NULL, level == 4, level == 4 };
	rckpt_seg_t *seg = calloc(1, sizeof(*seg));
	assert_non_null(seg);
	seg->n = n;
	if (level == 4) {
		uint32_t x = 777, y = 1234567u * (uint32_t)step;
		float *v = malloc(4 * (size_t)n);
		uint64_t i;
		assert_non_null(v);
		for (i = 0; i < n; i++) {
			x = x * 1664525u + 1013904223u;
			y = y * 22695477u + 1u;
			v[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 0.05f *
			       (1.0f + 1e-3f * (float)step * ((float)(y >> 8) / 16777216.0f));
		}
		seg->encoding = RCKPT_SEG_LOSSLESS;
		seg->dtype = RCKPT_DT_F32;
		seg->raw = (uint8_t *)v;
		goto record;
	}
	seg->encoding = RCKPT_SEG_QUANTIZED;
	seg->dtype = RCKPT_DT_F32;
	seg->nbins = 2;
	seg->centroids[0] = 0.25f;
	seg->centroids[1] = 0.5f;
	seg->idx = malloc((size_t)n);
	seg->prot = calloc(1, 2);
	assert_non_null(seg->idx);
	if (level < 3) {
		memset(seg->idx, level, (size_t)n);
	} else { /* a level a bit, hashed: about a bit an element coded */
		uint64_t i;
		for (i = 0; i < n; i++)
			seg->idx[i] = (uint8_t)((((uint32_t)i ^ (uint32_t)(step * 2654435761u)) * 2654435761u) >> 31);
	}
record:
	memset(r, 0, sizeof(*r));
	r->kind = parent ? RCKPT_REC_DELTA : RCKPT_REC_BASE;
	r->step = step;
	r->parent = parent ? parent->step : RCKPT_NO_PARENT;
	r->nseg = 1;
	r->seg = seg;
	assert_int_equal(rckpt_record_encode(out, r, parent, &is), 0);
}

/* A log of `n` records (step 1 a base, each next a delta on the one
 * before) of `elems` elements each written as the object's data, with an
 * index entry per record; its tip, and its count when `count`. */
static void plant_chain(fixture_t *f, const char *oid, uint32_t n, uint64_t elems, int count, int level)
{
	rckpt_buf_t data = RCKPT_BUF_INIT;
	rckpt_record_t prev, cur;
	uint32_t s;
	size_t *at = calloc(n + 1, sizeof(*at));
	enum { BATCH = 2000 };
	assert_non_null(at);
	memset(&prev, 0, sizeof(prev));
	for (s = 1; s <= n; s++) {
		at[s - 1] = data.len;
		chain_record(&data, &cur, s, s > 1 ? &prev : NULL, elems, level ? (uint8_t)level : (uint8_t)(s % 3));
		rckpt_record_free(&prev);
		prev = cur;
	}
	at[n] = data.len;
	rckpt_record_free(&prev);
	{ /* in pieces: one write is bounded by the OSD's osd_max_write_size */
		size_t off;
		assert_int_equal(rados_write_full(f->io, oid, "", 0), 0);
		for (off = 0; off < data.len; off += (size_t)4 << 20)
			assert_int_equal(rados_write(f->io, oid, (const char *)data.p + off,
						     data.len - off < ((size_t)4 << 20) ? data.len - off : (size_t)4 << 20,
						     off),
					 0);
	}
	for (s = 1; s <= n;) {
		char keys[BATCH][40];
		uint8_t vals[BATCH][RCKPT_STORE_ENTRY_BYTES];
		const char *kp[BATCH], *vp[BATCH];
		size_t lens[BATCH];
		rados_write_op_t op = rados_create_write_op();
		unsigned k = 0;
		for (; k < BATCH && s <= n; k++, s++) {
			rckpt_store_entry_t e = { s, at[s - 1], (uint32_t)(at[s] - at[s - 1]),
						  s == 1 ? RCKPT_REC_BASE : RCKPT_REC_DELTA,
						  s == 1 ? RCKPT_STORE_NONE : s - 1 };
			assert_int_equal(rckpt_store_step_key(keys[k], sizeof(keys[k]), 'r', s), 0);
			assert_int_equal(rckpt_store_entry_put(vals[k], &e), 0);
			kp[k] = keys[k];
			vp[k] = (const char *)vals[k];
			lens[k] = RCKPT_STORE_ENTRY_BYTES;
		}
		rados_write_op_omap_set(op, kp, vp, lens, k);
		assert_int_equal(rados_write_op_operate(op, f->io, oid, NULL, 0), 0);
		rados_release_write_op(op);
	}
	set_u64(f, oid, "tip", n);
	if (count)
		set_u64(f, oid, "count", n);
	print_message("planted %s: %u records of %" PRIu64 " elements, %zu bytes, %s\n", oid, n, elems,
		      data.len, count ? "a count" : "no count");
	rckpt_buf_free(&data);
	free(at);
}

static int setup_with(void **state, int plant)
{
	const char *conf = getenv("CEPH_CONF"), *user = getenv("RCKPT_TEST_CLIENT"), *ns = getenv("RCKPT_TEST_NS");
	fixture_t *f;

	*state = NULL;
	if (conf == NULL || !*conf) {
		print_message("no cluster: CEPH_CONF is not set (./dev.sh test starts one)\n");
		return 0;
	}
	f = calloc(1, sizeof(*f));
	assert_non_null(f);
	if ((f->osd_pid = osd_pid()) < 0) {
		print_message("no OSD process to watch (RCKPT_TEST_OSD_PID, or run/osd.0.pid beside CEPH_CONF)\n");
		free(f);
		return 0;
	}
	assert_int_equal(rados_create(&f->cl, user && *user ? user : "admin"), 0);
	assert_int_equal(rados_conf_read_file(f->cl, conf), 0);
	assert_int_equal(rados_conf_set(f->cl, "rados_osd_op_timeout", "5"), 0);
	assert_int_equal(rados_connect(f->cl), 0);
	assert_int_equal(rados_ioctx_create(f->cl, "rckpt", &f->io), 0);
	snprintf(f->ns, sizeof(f->ns), "%s", ns && *ns ? ns : "");
	if (!f->ns[0])
		snprintf(f->ns, sizeof(f->ns), "planted-%d", (int)getpid());
	rados_ioctx_set_namespace(f->io, f->ns);
	assert_int_equal(rckpt_store_segment_oid(f->oid_a, sizeof(f->oid_a), 0, RCKPT_STORE_NONE), 0);
	assert_int_equal(rckpt_store_segment_oid(f->oid_b, sizeof(f->oid_b), 1, RCKPT_STORE_NONE), 0);
	assert_int_equal(rckpt_store_segment_oid(f->oid_c, sizeof(f->oid_c), 2, RCKPT_STORE_NONE), 0);
	assert_int_equal(rckpt_store_segment_oid(f->oid_d, sizeof(f->oid_d), 3, RCKPT_STORE_NONE), 0);
	/* A: 20,000 small records, a chain, no count; B: a base and a delta
	 * of 2^26 elements each; C: a writer's largest object; D: three exact
	 * records */
	if (plant) {
		plant_chain(f, f->oid_a, ENTRIES, 8, 0, 0);
		plant_chain(f, f->oid_b, 2, RCKPT_STORE_RECORD_ELEMENTS_MAX, 1, 0);
		plant_chain(f, f->oid_c, RCKPT_STORE_SEGMENT_RECORDS, 165000, 1, 3);
		plant_chain(f, f->oid_d, 3, RCKPT_STORE_CHUNK_ELEMENTS_MAX, 1, 4);
	}
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, 1);
}

static int setup_job(void **state)
{
	return setup_with(state, 0);
}

static int teardown(void **state)
{
	fixture_t *f = *state;
	if (f == NULL)
		return 0;
	rados_remove(f->io, f->oid_a);
	rados_remove(f->io, f->oid_b);
	rados_remove(f->io, f->oid_c);
	rados_remove(f->io, f->oid_d);
	rados_ioctx_destroy(f->io);
	rados_shutdown(f->cl);
	free(f);
	return 0;
}

static void test_planted_objects(void **state)
{
	fixture_t *f = *state;
	rckpt_buf_t req[4][8];
	const char *names[8] = { "index", "tip", "verify", "materialize", "compact", "head", "list", "trim" };
	static char reply[32 << 20]; /* a materialized exact record */
	const char *oids[4];
	const char *what[4] = { "A (20,000 records, no count)", "B (2^26 elements)", "C (1024 records, 31 MiB)",
				"D (3 exact records, 37 MiB)" };
	sampler_t smp;
	pthread_t th;
	long base, most = 0, after;
	unsigned i, k;
	double worst = 0;
	char failed[256] = "";
	int hwm;

	if (f == NULL) {
		TEST_SKIP(TEST_NEED_CLUSTER, "no cluster, or no OSD process of it to watch");
		return;
	}
	oids[0] = f->oid_a;
	oids[1] = f->oid_b;
	oids[2] = f->oid_c;
	oids[3] = f->oid_d;
	for (k = 0; k < 4; k++) {
		/* the last step of A (a chain of 20,000), step 2 of B (both
		 * records decoded); a compaction of steps 1..2 (re-encoded,
		 * so every later record of the log would move) */
		rckpt_msg_materialize_t mm = { k == 0 ? ENTRIES : k == 1 ? 2 : k == 2 ? RCKPT_STORE_SEGMENT_RECORDS : 3,
					       0, { NULL, 0 } };
		rckpt_msg_list_t ml = { RCKPT_STORE_NONE, 16 };
		const uint64_t keep[1] = { 1 };
		for (i = 0; i < 8; i++)
			req[k][i] = (rckpt_buf_t)RCKPT_BUF_INIT;
		assert_int_equal(rckpt_msg_verify_encode(&req[k][2], 0), 0);
		assert_int_equal(rckpt_msg_materialize_encode(&req[k][3], &mm), 0);
		assert_int_equal(rckpt_msg_compact_encode(&req[k][4], 0x1234, 2, keep, 1), 0);
		assert_int_equal(rckpt_msg_list_encode(&req[k][6], &ml), 0);
		assert_int_equal(rckpt_msg_trim_encode(&req[k][7], 0x1234, 0), 0);
	}
	base = rss_of(f->osd_pid);
	assert_true(base > 0);
	hwm = reset_peak(f->osd_pid) == 0 && status_of(f->osd_pid, "VmHWM") > 0;
	print_message("per call: the OSD's %s\n", hwm ? "VmHWM, reset before each call"
						       : "resident memory sampled every 5 ms");
	smp.pid = f->osd_pid;
	smp.peak = base;
	smp.stop = 0;
	assert_int_equal(pthread_mutex_init(&smp.mu, NULL), 0);
	assert_int_equal(pthread_create(&th, NULL, sample, &smp), 0);
	for (k = 0; k < 4; k++)
		for (i = 0; i < 8; i++) {
			/* each call's growth: its peak over what the OSD held
			 * as it began */
			const long before = rss_of(f->osd_pid);
			double t0, dt;
			long peak;
			int rc;
			if (hwm && reset_peak(f->osd_pid))
				hwm = 0; /* the sampler alone from here */
			sampler_take(&smp, before);
			t0 = now_s();
			rc = rados_exec(f->io, oids[k], "rckpt", names[i], (const char *)req[k][i].p,
					req[k][i].len, reply, sizeof(reply));
			dt = now_s() - t0;
			peak = sampler_take(&smp, 0);
			if (hwm && status_of(f->osd_pid, "VmHWM") > peak)
				peak = status_of(f->osd_pid, "VmHWM");
			if (peak - before > most)
				most = peak - before;
			print_message("%-12s on %s: %d in %.3f s, +%.1f MiB\n", names[i], what[k], rc, dt,
				      (double)(peak - before) / 1048576.0);
			if (dt > worst)
				worst = dt;
			/* the first failure, said once the sampler is stopped */
			if (!failed[0] && k == 3 && i == 3 && rc < 0)
				snprintf(failed, sizeof(failed), "materialize of %s failed: %d", what[k], rc);
			if (!failed[0] && k >= 2 && i == 4 && rc != 0)
				snprintf(failed, sizeof(failed), "compact of %s refused: %d", what[k], rc);
			if (!failed[0] && dt > CALL_SECONDS_MAX)
				snprintf(failed, sizeof(failed), "%s on %s took %.2f s (at most %.1f)", names[i],
					 oids[k], dt, CALL_SECONDS_MAX);
		}
	pthread_mutex_lock(&smp.mu);
	smp.stop = 1;
	pthread_mutex_unlock(&smp.mu);
	pthread_join(th, NULL);
	pthread_mutex_destroy(&smp.mu);
	after = rss_of(f->osd_pid);
	print_message("OSD resident memory: %ld MiB before, %ld MiB after; a call's most +%.1f MiB; slowest "
		      "call %.3f s\n",
		      base >> 20, after >> 20, (double)most / 1048576.0, worst);
	if (failed[0])
		fail_msg("%s", failed);
	assert_true(most <= RSS_GROWTH_MAX);
	assert_true(after - base <= RSS_KEPT_MAX);
	/* the OSD is up */
	assert_int_equal(rados_exec(f->io, f->oid_b, "rckpt", "ping", NULL, 0, reply, sizeof(reply)) >= 0, 1);
	for (k = 0; k < 4; k++)
		for (i = 0; i < 8; i++)
			rckpt_buf_free(&req[k][i]);
}

/* A commit to a job whose rewind has not finished (its "rewinding" mark)
 * is refused at once with the documented -EBUSY: never -EAGAIN, which
 * librados resends over and over until its op timeout (set to 5 s here,
 * so that such a plugin fails this test rather than hang it). */
static void test_commit_during_rewind(void **state)
{
	fixture_t *f = *state;
	rckpt_buf_t in = RCKPT_BUF_INIT;
	const uint8_t summary[36] = { 0 };
	rckpt_msg_commit_t m = { RCKPT_STORE_NONE, 7, { summary, sizeof(summary) }, 0x1234 };
	double t0, dt;
	int rc;

	if (f == NULL) {
		TEST_SKIP(TEST_NEED_CLUSTER, "no cluster, or no OSD process of it to watch");
		return;
	}
	set_u64(f, RCKPT_STORE_JOB_OID, "rewinding", 3);
	assert_int_equal(rckpt_msg_commit_encode(&in, &m), 0);
	t0 = now_s();
	rc = rados_exec(f->io, RCKPT_STORE_JOB_OID, "rckpt", "commit", (const char *)in.p, in.len, NULL, 0);
	dt = now_s() - t0;
	print_message("commit during a rewind: %d in %.3f s\n", rc, dt);
	assert_int_equal(rc, -EBUSY);
	assert_true(dt < CALL_SECONDS_MAX);
	rados_remove(f->io, RCKPT_STORE_JOB_OID);
	rckpt_buf_free(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_planted_objects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_during_rewind, setup_job, teardown),
	};
	return test_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
