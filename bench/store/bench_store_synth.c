/*
 * bench_store_synth.c — bench_store's sections on synthetic models: 1b, a
 * save's peak memory against the model's size, and 4, what one call of
 * each rckpt method costs in the OSD on a chunk of the largest size a
 * client writes, with the OSD's peak memory above its resident size.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rados/librados.h>

#include "rckpt.h"
#include "rckpt_manifest.h"
#include "rckpt_record.h"
#include "rckpt_store_wire.h"
#include "rckpt_clock.h" /* rckpt_now_s */
#include "bench_store.h"

/* ---- 1b. a save's memory vs the model's size ---- */

typedef struct synth {
	rckpt_tensor_t *t;
	float **w;
	unsigned n;
	uint64_t params;
} synth_t;

/* A synthetic model of `mi` Mi parameters: fp32 matrices of 4 Mi
 * (2048 x 2048), values of a bell-shaped spread (a sum of four uniforms,
 * as trained weights look), fixed seed. Noise is the hard case for the
 * codec: records are larger than a real model's. */
static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

static void synth_make(synth_t *m, unsigned mi)
{
	static char names[256][16];
	uint64_t seed = 42, k;
	unsigned i;
	m->n = (mi + 3) / 4;
	m->t = calloc(m->n, sizeof(*m->t));
	m->w = calloc(m->n, sizeof(*m->w));
	m->params = 0;
	for (i = 0; i < m->n && i < 256; i++) {
		uint64_t rows = i + 1 < m->n || mi % 4 == 0 ? 2048 : 512 * (mi % 4);
		m->w[i] = malloc(sizeof(float) * rows * 2048);
		if (m->w[i] == NULL)
			die("synthetic model", -ENOMEM);
		for (k = 0; k < rows * 2048; k++) {
			double u = 0;
			int r;
			for (r = 0; r < 4; r++)
				u += (double)(lcg(&seed) & 0xffffff) / 16777216.0;
			m->w[i][k] = (float)((u - 2.0) * 0.05);
		}
		snprintf(names[i], sizeof(names[i]), "layer%03u.weight", i);
		m->t[i] = (rckpt_tensor_t){ names[i], RCKPT_F32, 2, { rows, 2048 }, m->w[i] };
		m->params += rows * 2048;
	}
}

/* A training step's worth of change: every 8th value moves a little. */
static void synth_drift(synth_t *m, uint64_t *seed)
{
	unsigned i;
	uint64_t k;
	for (i = 0; i < m->n; i++)
		for (k = lcg(seed) & 7; k < m->t[i].shape[0] * m->t[i].shape[1]; k += 8)
			m->w[i][k] += (float)(((double)(lcg(seed) & 0xffff) / 65536.0 - 0.5) * 0.002);
}

static void synth_free(synth_t *m)
{
	unsigned i;
	for (i = 0; i < m->n; i++)
		free(m->w[i]);
	free(m->w);
	free(m->t);
}

/* Saves 3 steps of a model of each size. A save's peak is VmHWM (reset
 * before it) minus VmRSS before it, less what the encoder keeps when it
 * ends (its state: one byte per parameter, made by the first save); the
 * state is VmRSS after a save minus VmRSS before the first. Freed heap is
 * handed back to the kernel before every reading. */

void mem_vs_size(rckpt_t *h, const char *sizes, uint64_t budget_mib)
{
	char *list = strdup(sizes), *tok, *sv = NULL;
	printf("\n1b. memory of a save vs model size (synthetic fp32, 3 steps, --mem-budget %" PRIu64
	       " MiB)\n", budget_mib);
	printf("   %8s %9s | %14s %14s | %10s %8s | %8s\n", "Mi param", "fp32 MB", "base peak MiB",
	       "delta peak MiB", "state MiB", "B/param", "MB/s");
	for (tok = strtok_r(list, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
		unsigned mi = (unsigned)atoi(tok), k;
		synth_t m;
		rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
		rckpt_job_t *j;
		char job[64];
		long rss_first = 0, peak[3], state = 0;
		double mem_restore[3];
		uint64_t seed = 7;
		double t = 0;
		int rc;
		if (mi == 0 || mi > 1024)
			continue;
		synth_make(&m, mi);
		snprintf(job, sizeof(job), "bench-mem%u-%d", mi, (int)getpid());
		rckpt_job_delete(h, job);
		o.writer = 1;
		o.mem_budget = budget_mib << 20;
		o.threads = opt_threads;
		if ((rc = rckpt_job_open(h, &j, job, &o))) {
			fprintf(stderr, "bench_store: %s\n", rckpt_errmsg(h));
			exit(1);
		}
		for (k = 0; k < 3; k++) {
			long rss0, hwm;
			double t0;
			if (k)
				synth_drift(&m, &seed);
			reset_hwm();
			rss0 = proc_kib("VmRSS");
			if (k == 0)
				rss_first = rss0;
			t0 = rckpt_now_s();
			if ((rc = rckpt_job_save(j, 100 * (uint64_t)(k + 1), m.t, m.n, NULL, 0, NULL))) {
				fprintf(stderr, "bench_store: %s\n", rckpt_errmsg(h));
				exit(1);
			}
			t += rckpt_now_s() - t0;
			hwm = proc_kib("VmHWM");
			malloc_trim(0);
			state = proc_kib("VmRSS") - rss_first;
			peak[k] = hwm - rss0 - (k == 0 ? state : 0);
		}
		{ /* the second step (one delta on a base) restored, every tensor
		   * read out as fp32, as a trainer's restart does */
			rckpt_restore_stats_t rs;
			const double t0 = restore_all(j, 200, &rs, NULL, 0);
			mem_restore[0] = t0;
			mem_restore[1] = (double)rs.wire_bytes;
			mem_restore[2] = rs.calls;
		}
		{
			long dmax = peak[1] > peak[2] ? peak[1] : peak[2];
			printf("   %8u %9.1f | %14.1f %14.1f | %10.1f %8.2f | %8.1f\n", mi,
			       (double)m.params * 4 / 1e6, peak[0] / 1024.0, dmax / 1024.0, state / 1024.0,
			       (double)state * 1024.0 / (double)m.params,
			       (double)m.params * 4 * 3 / 1e6 / t);
			printf("csv:mem,%u,%" PRIu64 ",%ld,%ld,%ld,%.1f\n", mi, budget_mib, peak[0], dmax,
			       state, (double)m.params * 4 * 3 / 1e6 / t);
			printf("   restore of step 2 (a delta on a base) read out as fp32: %.3f s, %.1f MB/s of "
			       "fp32, %.1f MB over the wire, %.0f materialize calls\n",
			       mem_restore[0], (double)m.params * 4 / 1e6 / mem_restore[0], mem_restore[1] / 1e6,
			       mem_restore[2]);
			printf("csv:memrestore,%u,%" PRIu64 ",%.4f,%.1f,%.0f,%.0f\n", mi, m.params, mem_restore[0],
			       (double)m.params * 4 / 1e6 / mem_restore[0], mem_restore[1], mem_restore[2]);
		}
		rckpt_job_close(j);
		rckpt_job_delete(h, job);
		synth_free(&m);
	}
	free(list);
}

/* ---- 4. one call of each method, in the OSD ---- */

/* ... of process pid (the OSD). */
static long pid_kib(long pid, const char *field)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	return status_kib(path, field);
}

static void pid_reset_hwm(long pid)
{
	char path[64];
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%ld/clear_refs", pid);
	if ((f = fopen(path, "w")) != NULL) {
		fputs("5", f);
		fclose(f);
	}
}

typedef struct cost {
	const char *method, *what;
	double slowest; /* s */
	unsigned calls;
	long peak_kib; /* -1: not measured */
	long rss0;
} cost_t;

static void cost_begin(cost_t *c, const char *method, const char *what, long osd)
{
	memset(c, 0, sizeof(*c));
	c->method = method;
	c->what = what;
	c->peak_kib = -1;
	if (osd > 0) {
		pid_reset_hwm(osd);
		c->rss0 = pid_kib(osd, "VmRSS");
	}
}

/* One call, timed. */
static int cost_call(cost_t *c, rados_ioctx_t io, const char *oid, const char *method,
		     const rckpt_buf_t *in, char *out, size_t cap)
{
	double t0 = rckpt_now_s(), dt;
	int rc = rados_exec(io, oid, "rckpt", method, in ? (const char *)in->p : "", in ? in->len : 0,
			    out, cap);
	dt = rckpt_now_s() - t0;
	if (dt > c->slowest)
		c->slowest = dt;
	c->calls++;
	return rc;
}

static void cost_end(cost_t *c, long osd)
{
	char peak[32] = "-";
	if (osd > 0) {
		long hwm = pid_kib(osd, "VmHWM");
		c->peak_kib = hwm >= 0 && c->rss0 >= 0 ? hwm - c->rss0 : -1;
	}
	if (c->peak_kib >= 0)
		snprintf(peak, sizeof(peak), "%.1f", c->peak_kib / 1024.0);
	printf("   %-12s %-44s %6u %10.1f %12s\n", c->method, c->what, c->calls, c->slowest * 1e3,
	       peak);
	printf("csv:call,%s,%u,%.3f,%ld\n", c->method, c->calls, c->slowest * 1e3, c->peak_kib);
}

static uint64_t job_token(rados_ioctx_t io)
{
	rados_omap_iter_t it;
	rados_read_op_t op = rados_create_read_op();
	const char *keys[1] = { "writer" };
	char *k = NULL, *v = NULL;
	size_t vl = 0;
	uint64_t t = 0;
	int prval = 0, i;
	rados_read_op_omap_get_vals_by_keys(op, keys, 1, &it, &prval);
	if (rados_read_op_operate(op, io, RCKPT_STORE_JOB_OID, 0) == 0 &&
	    rados_omap_get_next(it, &k, &v, &vl) == 0 && k && vl == 8)
		for (i = 0; i < 8; i++)
			t |= (uint64_t)(uint8_t)v[i] << (8 * i);
	rados_omap_get_end(it);
	rados_release_read_op(op);
	return t;
}

void per_call(rckpt_t *h, rados_ioctx_t io, unsigned mi, long osd, int exact)
{
	const char *chunk = "rckpt.chunk.00000";
	const unsigned steps = 6; /* a base and 5 deltas */
	size_t cap = (size_t)80 << 20;
	char *out = malloc(cap), job[64];
	synth_t m;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j;
	rckpt_store_entry_t *ix = NULL;
	uint32_t nix = 0;
	uint64_t seed = 11, token, newest = 0;
	double slowest_save = 0;
	unsigned k;
	int rc;
	cost_t c;

	if (out == NULL || mi == 0 || (uint64_t)mi << 20 > RCKPT_STORE_CHUNK_ELEMENTS_MAX)
		die("--per-call takes 1..4 (Mi elements in one chunk: 4 is the most a client writes)",
		    -EINVAL);
	synth_make(&m, mi);
	snprintf(job, sizeof(job), "bench-calls-%d", (int)getpid());
	rckpt_job_delete(h, job);
	o.writer = 1;
	o.chunk_params = m.params; /* the whole model in one chunk */
	o.exact = exact;
	o.mem_budget = 8 * m.params + ((uint64_t)64 << 20);
	if ((rc = rckpt_job_open(h, &j, job, &o)))
		die(rckpt_errmsg(h), rc);
	for (k = 0; k < steps; k++) {
		double t0 = rckpt_now_s();
		if (k)
			synth_drift(&m, &seed);
		if ((rc = rckpt_job_save(j, k + 1, m.t, m.n, NULL, 0, NULL)))
			die(rckpt_errmsg(h), rc);
		if (rckpt_now_s() - t0 > slowest_save)
			slowest_save = rckpt_now_s() - t0;
	}
	rados_ioctx_set_namespace(io, job);
	token = job_token(io);
	printf("\n4. one call of each rckpt method on a chunk of %" PRIu64 " elements (%u steps%s: a "
	       "base and %u deltas; slowest save %.2f s)\n",
	       m.params, steps, exact ? " saved bit-exact" : "", steps - 1, slowest_save);
	printf("   %-12s %-44s %6s %10s %12s\n", "method", "what", "calls", "slowest ms", "OSD peak MiB");
	{ /* the chunk's index */
		rckpt_buf_t in = RCKPT_BUF_INIT;
		int n;
		cost_begin(&c, "index", "every entry", osd);
		n = cost_call(&c, io, chunk, "index", NULL, out, cap);
		if (n < 0 || rckpt_msg_index_decode(&ix, &nix, (const uint8_t *)out, (size_t)n) || nix < 2)
			die("index", n < 0 ? n : -EBADMSG);
		cost_end(&c, osd);
		newest = ix[nix - 1].step;
		if (exact) /* whole values: two records fill a 32 MiB segment */
			printf("   (%s holds steps %" PRIu64 "..%" PRIu64 ": exact steps roll into segments of "
			       "their own)\n",
			       chunk, ix[0].step, newest);
		rckpt_buf_free(&in);
	}
	{ /* trim the newest record, then append it again: the largest append */
		const rckpt_store_entry_t *e = &ix[nix - 1];
		char *rec = malloc(e->length);
		rckpt_buf_t in = RCKPT_BUF_INIT;
		if (rec == NULL || rados_read(io, chunk, rec, e->length, e->offset) != (int)e->length)
			die("read the newest record", -EIO);
		cost_begin(&c, "trim", "the newest record", osd);
		if (rckpt_msg_trim_encode(&in, token, e->parent) ||
		    (rc = cost_call(&c, io, chunk, "trim", &in, NULL, 0)) < 0)
			die("trim", rc);
		cost_end(&c, osd);
		in.len = 0;
		cost_begin(&c, "append", "it again (a delta)", osd);
		if (rckpt_msg_append_encode(&in, token, (const uint8_t *)rec, e->length) ||
		    (rc = cost_call(&c, io, chunk, "append", &in, NULL, 0)) < 0)
			die("append", rc);
		cost_end(&c, osd);
		rckpt_buf_free(&in);
		free(rec);
	}
	{ /* materialize the newest step: its whole chain, call after call */
		rckpt_msg_materialize_t q = { newest, 0, { NULL, 0 } };
		rckpt_msg_materialized_t a;
		rckpt_buf_t in = RCKPT_BUF_INIT, start = RCKPT_BUF_INIT;
		int n;
		cost_begin(&c, "materialize", "the newest step (base + 5 deltas)", osd);
		for (;;) {
			in.len = 0;
			q.start.p = start.p;
			q.start.len = start.len;
			if (rckpt_msg_materialize_encode(&in, &q) ||
			    (n = cost_call(&c, io, chunk, "materialize", &in, out, cap)) < 0 ||
			    rckpt_msg_materialized_decode(&a, (const uint8_t *)out, (size_t)n))
				die("materialize", -EIO);
			if (a.done)
				break;
			start.len = 0;
			if (rckpt_buf_append(&start, a.record.p, a.record.len))
				die("materialize", -ENOMEM);
		}
		cost_end(&c, osd);
		rckpt_buf_free(&in);
		rckpt_buf_free(&start);
	}
	{ /* verify, from where each reply says */
		uint64_t after = RCKPT_STORE_NONE;
		rckpt_buf_t in = RCKPT_BUF_INIT;
		rckpt_msg_verified_t v;
		int n;
		cost_begin(&c, "verify", "the chunk, call after call", osd);
		do {
			in.len = 0;
			if (rckpt_msg_verify_encode(&in, after) ||
			    (n = cost_call(&c, io, chunk, "verify", &in, out, cap)) < 0 ||
			    rckpt_msg_verified_decode(&v, (const uint8_t *)out, (size_t)n))
				die("verify", -EIO);
			after = v.next;
		} while (after != RCKPT_STORE_NONE);
		cost_end(&c, osd);
		rckpt_buf_free(&in);
	}
	{ /* the job object: head, list */
		rckpt_msg_list_t l = { RCKPT_STORE_NONE, RCKPT_STORE_LIST_MAX };
		rckpt_buf_t in = RCKPT_BUF_INIT;
		cost_begin(&c, "head", "the job's head", osd);
		if ((rc = cost_call(&c, io, RCKPT_STORE_JOB_OID, "head", NULL, out, cap)) < 0)
			die("head", rc);
		cost_end(&c, osd);
		cost_begin(&c, "list", "every step", osd);
		if (rckpt_msg_list_encode(&in, &l) ||
		    (rc = cost_call(&c, io, RCKPT_STORE_JOB_OID, "list", &in, out, cap)) < 0)
			die("list", rc);
		cost_end(&c, osd);
		rckpt_buf_free(&in);
	}
	{ /* the small ones: tip, ping, pin and unpin, a drop of no step, a
	   * put of a step's manifest and an attachment's put and retire */
		rckpt_buf_t in = RCKPT_BUF_INIT, obj = RCKPT_BUF_INIT;
		char oid[64];
		uint64_t none = 999999;
		int n;
		cost_begin(&c, "tip", "the chunk's tip", osd);
		if ((rc = cost_call(&c, io, chunk, "tip", NULL, out, cap)) < 0)
			die("tip", rc);
		cost_end(&c, osd);
		cost_begin(&c, "ping", "nothing (the floor)", osd);
		if ((rc = cost_call(&c, io, chunk, "ping", NULL, out, cap)) < 0)
			die("ping", rc);
		cost_end(&c, osd);
		cost_begin(&c, "pin", "pin and unpin a step", osd);
		for (k = 0; k < 2; k++) {
			in.len = 0;
			if (rckpt_msg_pin_encode(&in, token, 2, k == 0) ||
			    (rc = cost_call(&c, io, RCKPT_STORE_JOB_OID, "pin", &in, NULL, 0)) < 0)
				die("pin", rc);
		}
		cost_end(&c, osd);
		cost_begin(&c, "drop", "a step that is not listed", osd);
		in.len = 0;
		if (rckpt_msg_drop_encode(&in, token, &none, 1) ||
		    (rc = cost_call(&c, io, RCKPT_STORE_JOB_OID, "drop", &in, NULL, 0)) < 0)
			die("drop", rc);
		cost_end(&c, osd);
		rckpt_store_manifest_oid(oid, sizeof(oid), newest);
		if ((n = rados_read(io, oid, out, cap, 0)) <= 0 || rckpt_buf_append(&obj, out, (size_t)n))
			die("read the newest manifest", n < 0 ? n : -EIO);
		cost_begin(&c, "put", "the newest step's manifest again", osd);
		in.len = 0;
		if (rckpt_msg_put_encode(&in, token, newest, obj.p, obj.len) ||
		    (rc = cost_call(&c, io, oid, "put", &in, NULL, 0)) < 0)
			die("put", rc);
		cost_end(&c, osd);
		obj.len = 0;
		in.len = 0;
		rckpt_store_attach_oid(oid, sizeof(oid), none);
		if (rckpt_attach_encode(&obj, none, "x", 1) || rckpt_msg_put_encode(&in, token, none, obj.p, obj.len) ||
		    (rc = rados_exec(io, oid, "rckpt", "put", (const char *)in.p, in.len, NULL, 0)) < 0)
			die("put an attachment", rc);
		cost_begin(&c, "retire", "an attachment", osd);
		{
			rckpt_msg_retire_t r = { token, none, RCKPT_RETIRE_STEP };
			in.len = 0;
			if (rckpt_msg_retire_encode(&in, &r) ||
			    (rc = cost_call(&c, io, oid, "retire", &in, NULL, 0)) < 0)
				die("retire", rc);
		}
		cost_end(&c, osd);
		rckpt_buf_free(&in);
		rckpt_buf_free(&obj);
	}
	{ /* one compact call at a time: steps 1..2, then 1..4, then 1..6,
	   * keep-all (as the client's stages of two records would) */
		const uint64_t keep[6] = { 1, 2, 3, 4, 5, 6 };
		rckpt_buf_t in = RCKPT_BUF_INIT;
		uint64_t upto;
		char what[48];
		for (upto = 2; upto <= steps; upto += 2) {
			in.len = 0;
			snprintf(what, sizeof(what), "one call, up to step %" PRIu64, upto);
			cost_begin(&c, "compact", what, osd);
			rc = rckpt_msg_compact_encode(&in, token, upto, keep, (unsigned)upto);
			if (rc == 0)
				rc = cost_call(&c, io, chunk, "compact", &in, NULL, 0);
			if (rc < 0)
				printf("   (compact up to %" PRIu64 ": %d)\n", upto, rc);
			cost_end(&c, osd);
		}
		rckpt_buf_free(&in);
	}
	rados_ioctx_set_namespace(io, "");
	{ /* compaction, keep-all: its stages, through the client (which
	   * shortens a stage the plugin refuses as too much for one call) */
		rckpt_compact_stats_t cs;
		rckpt_retention_t all = { 0, 0 };
		cost_begin(&c, "compact", "keep-all: every stage", osd);
		if ((rc = rckpt_job_compact(j, &all, &cs)))
			die(rckpt_errmsg(h), rc);
		c.calls = cs.stages;
		c.slowest = cs.max_call_seconds;
		cost_end(&c, osd);
	}
	{ /* a claim (the last thing: it fences this job's writer) */
		rckpt_buf_t in = RCKPT_BUF_INIT;
		rados_ioctx_set_namespace(io, job);
		cost_begin(&c, "claim", "a new writer's", osd);
		if (rckpt_msg_claim_encode(&in, token, token + 1, 0) ||
		    (rc = cost_call(&c, io, RCKPT_STORE_JOB_OID, "claim", &in, NULL, 0)) < 0)
			die("claim", rc);
		cost_end(&c, osd);
		rados_ioctx_set_namespace(io, "");
		rckpt_buf_free(&in);
	}
	rckpt_job_close(j);
	rckpt_job_delete(h, job);
	synth_free(&m);
	free(ix);
	free(out);
}
