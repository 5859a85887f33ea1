/*
 * bench_store.c — the checkpoint store against a live cluster, side by side
 * in one run:
 *   1. save: logical fp32 GB/s of a real checkpoint sequence and the
 *      library's peak extra memory, next to `rados bench` write;
 *  1b. a save's peak memory against the model's size (synthetic models of
 *      --mem-sizes Mi parameters under --mem-budget): flat, whatever the
 *      size, beside the encoder's state of a byte per parameter;
 *   2. the cost of an object-class call: a no-op method (rckpt.ping) and a
 *      plain 4 KiB read of the same object, interleaved (p50, p99);
 *   3. restoring the latest step against chain length (1..64 deltas):
 *      server-side materialization, the same after compaction, and
 *      client-side (fetch the chain's records, fold them here), with bytes
 *      over the wire for each; and the OSD's materialize throughput.
 *   4. (--per-call MI) what one call of each rckpt method costs in the OSD
 *      on a chunk of MI Mi elements (4: the largest a client writes): the
 *      slowest call, and with --osd-pid the OSD's peak memory above its
 *      resident size before the method's calls; --exact with steps
 *      saved bit-exact (the exact tier's whole-value records).
 *
 * usage: bench_store [--conf PATH] [--pool NAME] [--chains 1,2,...] [--reps N]
 *                    [--no-rados-bench] [--mem-sizes 16,64,256] [--mem-budget MIB]
 *                    [--per-call MI [--osd-pid PID] [--exact]] [--threads N] [--save-only] [--steps N] DIR
 * DIR holds step-*.safetensors (bench/data/make_checkpoints.py): at least as many
 * as the longest chain plus one.
 */
#define _GNU_SOURCE /* getopt_long, popen */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rados/librados.h>

#include "rckpt.h"
#include "rckpt_manifest.h"
#include "rckpt_record.h"
#include "rckpt_safetensors.h"
#include "rckpt_store_wire.h"
#include "rckpt_clock.h" /* rckpt_now_s */
#include "bench_store.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[(int)(p * (n - 1) + 0.5)];
}

/* A field (VmRSS, VmHWM) of a /proc/.../status file, in KiB; -1: none. */
long status_kib(const char *path, const char *field)
{
	char line[256];
	long v = -1;
	size_t n = strlen(field);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* ... of this process. */
long proc_kib(const char *field)
{
	return status_kib("/proc/self/status", field);
}

/* Resets VmHWM to VmRSS, after handing freed heap back to the kernel:
 * without it, pages the allocator kept from an earlier save would hide
 * this one's peak (and count as live memory). */
void reset_hwm(void)
{
	malloc_trim(0);
	FILE *f = fopen("/proc/self/clear_refs", "w");
	if (f) {
		fputs("5", f);
		fclose(f);
	}
}

/* --threads: rckpt_job_opts_t.threads of every job this program opens */
unsigned opt_threads; /* --threads: chunks a save encodes at once */

void die(const char *what, int rc)
{
	fprintf(stderr, "bench_store: %s: %s\n", what, rckpt_strerror(rc));
	exit(1);
}

typedef struct ckpts {
	rckpt_st_t *st;
	rckpt_tensor_t **t;
	unsigned n;
	uint64_t raw; /* fp32 bytes of one */
} ckpts_t;

static void load(ckpts_t *c, const char *dir, unsigned max)
{
	glob_t g;
	char pat[4096], err[256];
	size_t i;
	unsigned k = 0;
	snprintf(pat, sizeof(pat), "%s/step-*.safetensors", dir);
	if (glob(pat, 0, NULL, &g) != 0)
		die("no step-*.safetensors in DIR", -ENOENT);
	c->st = calloc(g.gl_pathc, sizeof(*c->st));
	c->t = calloc(g.gl_pathc, sizeof(*c->t));
	for (i = 0; i < g.gl_pathc && k < max; i++) {
		unsigned j, d;
		if (strstr(g.gl_pathv[i], ".grads.") || strstr(g.gl_pathv[i], ".gmean.") ||
		    strstr(g.gl_pathv[i], ".optim."))
			continue; /* a checkpoint's siblings, not checkpoints */
		if (rckpt_st_read(&c->st[k], g.gl_pathv[i], err, sizeof(err))) {
			fprintf(stderr, "bench_store: %s: %s\n", g.gl_pathv[i], err);
			exit(1);
		}
		c->t[k] = calloc(c->st[k].set.ntensors, sizeof(rckpt_tensor_t));
		c->raw = 0;
		for (j = 0; j < c->st[k].set.ntensors; j++) {
			rckpt_tensor_t *t = &c->t[k][j];
			t->name = c->st[k].set.t[j].name;
			t->dtype = c->st[k].set.t[j].dtype;
			t->ndim = c->st[k].set.t[j].ndim;
			for (d = 0; d < t->ndim; d++)
				t->shape[d] = c->st[k].set.t[j].shape[d];
			t->data = c->st[k].set.t[j].data;
			c->raw += c->st[k].set.t[j].n * 4;
		}
		k++;
	}
	c->n = k;
	globfree(&g);
}

static void unload(ckpts_t *c)
{
	unsigned k;
	for (k = 0; k < c->n; k++) {
		free(c->t[k]);
		rckpt_st_free(&c->st[k]);
	}
	free(c->t);
	free(c->st);
	memset(c, 0, sizeof(*c));
}

rckpt_job_t *open_job(rckpt_t *h, const char *name, int writer)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j;
	int rc;
	o.writer = writer;
	o.threads = opt_threads;
	if ((rc = rckpt_job_open(h, &j, name, &o))) {
		fprintf(stderr, "bench_store: %s\n", rckpt_errmsg(h));
		exit(1);
	}
	return j;
}

/* Seconds and stored bytes of a run's first save (a base) and of the rest
 * (deltas), apart. */
typedef struct split {
	double base_s, delta_s;
	uint64_t base_stored, delta_stored;
} split_t;

/* Saves steps [0, n) of c into a fresh job; returns seconds (sp, when not
 * NULL, gets the base and the deltas apart). */
static double save_seq_split(rckpt_t *h, const char *job, const ckpts_t *c, unsigned n, uint64_t *stored,
			     split_t *sp)
{
	rckpt_job_t *j;
	double t0, t1 = 0;
	unsigned i;
	rckpt_job_delete(h, job);
	j = open_job(h, job, 1);
	t0 = rckpt_now_s();
	*stored = 0;
	for (i = 0; i < n; i++) {
		rckpt_save_stats_t ss;
		int rc = rckpt_job_save(j, 25 * (uint64_t)(i + 1), c->t[i], c->st[i].set.ntensors, NULL, 0, &ss);
		if (rc) {
			fprintf(stderr, "bench_store: %s\n", rckpt_errmsg(h));
			exit(1);
		}
		*stored += ss.enc_bytes;
		if (i == 0) {
			t1 = rckpt_now_s();
			if (sp)
				sp->base_stored = ss.enc_bytes;
		}
	}
	if (sp) {
		sp->base_s = t1 - t0;
		sp->delta_s = rckpt_now_s() - t1;
		sp->delta_stored = *stored - sp->base_stored;
	}
	t0 = rckpt_now_s() - t0;
	rckpt_job_close(j);
	return t0;
}

static double save_seq(rckpt_t *h, const char *job, const ckpts_t *c, unsigned n, uint64_t *stored)
{
	return save_seq_split(h, job, c, n, stored, NULL);
}

/* ---- 1. save vs rados bench ---- */

static double rados_bench_mbs(const char *conf, const char *pool)
{
	char cmd[1024], line[512];
	double mbs = -1;
	FILE *p;
	snprintf(cmd, sizeof(cmd),
		 "rados %s%s -p %s bench 2 write -b 1048576 -t 16 --run-name rckpt-bench-store "
		 "--no-cleanup 2>&1",
		 conf ? "-c " : "", conf ? conf : "", pool);
	if ((p = popen(cmd, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (strncmp(line, "Bandwidth (MB/sec):", 19) == 0)
			mbs = atof(line + 19);
	pclose(p);
	snprintf(cmd, sizeof(cmd), "rados %s%s -p %s cleanup --run-name rckpt-bench-store >/dev/null 2>&1",
		 conf ? "-c " : "", conf ? conf : "", pool);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_store: rados cleanup failed\n");
	return mbs;
}

/* ---- 2. a no-op cls call vs a plain read ---- */

static void cls_vs_read(rados_ioctx_t io, int iters)
{
	static char buf[4096];
	double *t[2];
	int i, k;
	const char *oid = "rckpt.bench.probe";
	for (i = 0; i < (int)sizeof(buf); i++)
		buf[i] = (char)i;
	if (rados_write_full(io, oid, buf, sizeof(buf)))
		die("write the probe object", -EIO);
	t[0] = calloc((size_t)iters, sizeof(double));
	t[1] = calloc((size_t)iters, sizeof(double));
	for (i = -iters / 10; i < iters; i++) {
		for (k = 0; k < 2; k++) {
			char out[16];
			double t0 = rckpt_now_s();
			int rc = k == 0 ? rados_read(io, oid, buf, sizeof(buf), 0)
					: rados_exec(io, oid, "rckpt", "ping", NULL, 0, out, sizeof(out));
			double dt = (rckpt_now_s() - t0) * 1e6;
			if (rc < 0)
				die(k ? "rckpt.ping" : "read", rc);
			if (i >= 0)
				t[k][i] = dt;
		}
	}
	{
		double r50 = pct(t[0], iters, .5), r99 = pct(t[0], iters, .99);
		double c50 = pct(t[1], iters, .5), c99 = pct(t[1], iters, .99);
		printf("\n2. object-class call vs plain read (same object, interleaved, %d each)\n", iters);
		printf("   %-24s %9s %9s\n", "operation", "p50 us", "p99 us");
		printf("   %-24s %9.1f %9.1f\n", "rados_read 4 KiB", r50, r99);
		printf("   %-24s %9.1f %9.1f\n", "cls rckpt.ping (no-op)", c50, c99);
		printf("   cls call - read: p50 %+.1f us, p99 %+.1f us\n", c50 - r50, c99 - r99);
		printf("csv:cls,%d,%.1f,%.1f,%.1f,%.1f\n", iters, r50, r99, c50, c99);
	}
	rados_remove(io, oid);
	free(t[0]);
	free(t[1]);
}

/* ---- 3. restore vs chain length ---- */

static double median(double *v, int n)
{
	return pct(v, n, .5);
}

/* Client-side: read each chunk's index and the records of its chain, fold
 * them here, check the digest. Returns seconds; *wire gets the bytes. */
static double client_fold(rckpt_t *h, rados_ioctx_t io, const char *job, uint64_t step,
			  uint64_t *wire, double *fold_s)
{
	char oid[64];
	rckpt_manifest_t mf;
	char *mbuf = NULL;
	uint64_t msize = 0;
	uint32_t c;
	double t0 = rckpt_now_s(), tf = 0;
	int rc;

	(void)h;
	*wire = 0;
	rados_ioctx_set_namespace(io, job);
	rckpt_store_manifest_oid(oid, sizeof(oid), step);
	if (rados_stat(io, oid, &msize, NULL) || (mbuf = malloc(msize)) == NULL ||
	    rados_read(io, oid, mbuf, msize, 0) != (int)msize ||
	    rckpt_manifest_decode(&mf, (const uint8_t *)mbuf, msize))
		die("client fold: manifest", -EIO);
	*wire += msize;
	for (c = 0; c < mf.nchunks; c++) {
		char *ob = NULL, *data;
		size_t olen = 0;
		int prval = 0;
		rckpt_store_entry_t *e;
		uint32_t n, i, first = 0, last = 0;
		rckpt_record_t cur, next;
		rados_read_op_t op = rados_create_read_op();
		uint8_t dg[32];
		double f0;

		rckpt_store_chunk_oid(oid, sizeof(oid), c);
		rados_read_op_exec(op, "rckpt", "index", NULL, 0, &ob, &olen, &prval);
		rc = rados_read_op_operate(op, io, oid, 0);
		rados_release_read_op(op);
		if (rc || prval || rckpt_msg_index_decode(&e, &n, (const uint8_t *)ob, olen))
			die("client fold: index", rc ? rc : -EIO);
		*wire += olen;
		rados_buffer_free(ob);
		for (i = 0; i < n; i++) {
			if (e[i].kind == RCKPT_REC_BASE && e[i].step <= step)
				first = i;
			if (e[i].step == step)
				last = i;
		}
		{
			uint64_t off = e[first].offset, len = e[last].offset + e[last].length - off;
			data = malloc(len);
			if (data == NULL || rados_read(io, oid, data, len, off) != (int)len)
				die("client fold: records", -EIO);
			*wire += len;
			f0 = rckpt_now_s();
			memset(&cur, 0, sizeof(cur));
			for (i = first; i <= last; i++) {
				rc = rckpt_record_decode(&next, (const uint8_t *)data + (e[i].offset - off),
							 e[i].length, i == first ? NULL : &cur, NULL);
				if (rc)
					die("client fold: decode", rc);
				rckpt_record_free(&cur);
				cur = next;
			}
			if (rckpt_record_digest(dg, &cur) || memcmp(dg, mf.chunk[c].sha256, 32) != 0)
				die("client fold: digest", RCKPT_ECHECKSUM);
			tf += rckpt_now_s() - f0;
			rckpt_record_free(&cur);
			free(data);
		}
		free(e);
	}
	rckpt_manifest_free(&mf);
	free(mbuf);
	*fold_s = tf;
	return rckpt_now_s() - t0;
}

static double server_restore(rckpt_job_t *j, uint64_t step, rckpt_restore_stats_t *rs)
{
	rckpt_restored_t *r;
	double t0 = rckpt_now_s();
	int rc = rckpt_job_restore(j, step, &r, rs);
	if (rc)
		die("restore", rc);
	t0 = rckpt_now_s() - t0;
	rckpt_restored_free(r);
	return t0;
}

/* ---- 1c. the same path with raw fp32 ---- */

#define RAW_CHUNK ((size_t)4 << 22) /* bytes: the store's default chunk (4 Mi fp32) */
#define RAW_INFLIGHT 16		    /* the store's default operations in flight */

/* Up to RAW_INFLIGHT started operations, waited for oldest first. */
typedef struct rawwin {
	rados_completion_t c[RAW_INFLIGHT];
	unsigned n;
} rawwin_t;

static void raw_wait(rawwin_t *w, unsigned keep)
{
	unsigned i, k;
	while (w->n > keep) {
		int rc;
		rados_aio_wait_for_complete(w->c[0]);
		rc = rados_aio_get_return_value(w->c[0]);
		rados_aio_release(w->c[0]);
		if (rc < 0)
			die("raw path operation", rc);
		for (i = 1, k = 0; i < w->n; i++)
			w->c[k++] = w->c[i];
		w->n--;
	}
}

static rados_completion_t raw_slot(rawwin_t *w)
{
	rados_completion_t c;
	raw_wait(w, RAW_INFLIGHT - 1);
	if (rados_aio_create_completion2(NULL, NULL, &c))
		die("completion", -ENOMEM);
	w->c[w->n++] = c;
	return c;
}

/* The second baseline: what the store's save and restore would cost if
 * they wrote and read the checkpoints as raw fp32, with the same object
 * layout (a step's tensors, concatenated, cut into chunks of 4 Mi
 * elements, each appended to its chunk's object, then a small write of
 * the job's object as the commit) and the same operations in flight:
 * raw_save writes steps [0, n) (its seconds; *buf keeps the last step's
 * bytes), raw_read reads the last back into back[] as a restarted trainer
 * would (the commit first: which step is the last; then every chunk's
 * tail at once; its seconds), raw_remove removes the objects. */
static void raw_oid(char *oid, size_t cap, const char *what)
{
	snprintf(oid, cap, "bench-raw-%d.%s", (int)getpid(), what);
}

static double raw_save(rados_ioctx_t io, const ckpts_t *c, unsigned n, uint8_t *buf)
{
	const size_t nchunks = (c->raw + RAW_CHUNK - 1) / RAW_CHUNK;
	char oid[96], what[32];
	rawwin_t w = { .n = 0 };
	unsigned i, k;
	double t0;
	rados_ioctx_set_namespace(io, "");
	t0 = rckpt_now_s();
	for (i = 0; i < n; i++) {
		size_t off = 0;
		uint64_t step = i + 1;
		for (k = 0; k < c->st[i].set.ntensors; k++) { /* gathered, as an encoder reads them */
			const rckpt_tensor_t *t = &c->t[i][k];
			size_t nb = 4;
			unsigned d;
			for (d = 0; d < t->ndim; d++)
				nb *= (size_t)t->shape[d];
			if (off + nb > c->raw)
				die("raw path layout", -EINVAL);
			memcpy(buf + off, t->data, nb);
			off += nb;
		}
		for (k = 0; k < nchunks; k++) {
			const size_t at = k * RAW_CHUNK, len = off - at < RAW_CHUNK ? off - at : RAW_CHUNK;
			snprintf(what, sizeof(what), "c%u", k);
			raw_oid(oid, sizeof(oid), what);
			if (rados_aio_append(io, oid, raw_slot(&w), (const char *)buf + at, len))
				die("raw append", -EIO);
		}
		raw_wait(&w, 0);
		raw_oid(oid, sizeof(oid), "job");
		if (rados_write_full(io, oid, (const char *)&step, sizeof(step)))
			die("raw commit", -EIO);
	}
	return rckpt_now_s() - t0;
}

static double raw_read(rados_ioctx_t io, const ckpts_t *c, unsigned n, uint8_t *back)
{
	const size_t nchunks = (c->raw + RAW_CHUNK - 1) / RAW_CHUNK;
	char oid[96], what[32];
	rawwin_t w = { .n = 0 };
	uint64_t last = 0;
	unsigned k;
	double t0 = rckpt_now_s();
	raw_oid(oid, sizeof(oid), "job");
	if (rados_read(io, oid, (char *)&last, sizeof(last), 0) != (int)sizeof(last) || last != n)
		die("raw commit read", -EIO);
	for (k = 0; k < nchunks; k++) { /* the last step: the tail of each chunk's object */
		const size_t at = k * RAW_CHUNK, len = c->raw - at < RAW_CHUNK ? c->raw - at : RAW_CHUNK;
		snprintf(what, sizeof(what), "c%u", k);
		raw_oid(oid, sizeof(oid), what);
		if (rados_aio_read(io, oid, raw_slot(&w), (char *)back + at, len, (last - 1) * len))
			die("raw read", -EIO);
	}
	raw_wait(&w, 0);
	return rckpt_now_s() - t0;
}

static void raw_remove(rados_ioctx_t io, const ckpts_t *c)
{
	const size_t nchunks = (c->raw + RAW_CHUNK - 1) / RAW_CHUNK;
	char oid[96], what[32];
	unsigned k;
	for (k = 0; k < nchunks; k++) {
		snprintf(what, sizeof(what), "c%u", k);
		raw_oid(oid, sizeof(oid), what);
		rados_remove(io, oid);
	}
	raw_oid(oid, sizeof(oid), "job");
	rados_remove(io, oid);
}

/* The last saved step restored by the store and read out as fp32 (what a
 * trainer's restart does), in seconds: each tensor into dst[0..cap) one
 * after the other (a trainer's tensors, which exist and have been
 * touched), or, dst NULL, into one buffer grown as needed. */
double restore_all(rckpt_job_t *j, uint64_t step, rckpt_restore_stats_t *rs, uint8_t *dst, size_t dcap)
{
	rckpt_restored_t *r;
	size_t cap = 0, at = 0;
	uint8_t *buf = NULL;
	unsigned i;
	double t0 = rckpt_now_s();
	int rc;
	if ((rc = rckpt_job_restore(j, step, &r, rs)))
		die("restore", rc);
	for (i = 0; i < rckpt_restored_count(r); i++) {
		rckpt_tensor_t d;
		size_t need = 4;
		unsigned x;
		if ((rc = rckpt_restored_tensor(r, i, &d)))
			die("restored tensor", rc);
		for (x = 0; x < d.ndim; x++)
			need *= (size_t)d.shape[x];
		if (dst && need > dcap - at)
			die("restore buffer", -ERANGE);
		if (!dst && need > cap && (buf = realloc(buf, cap = need)) == NULL)
			die("restore buffer", -ENOMEM);
		if ((rc = dst ? rckpt_restored_read(r, i, dst + at, need) : rckpt_restored_read(r, i, buf, cap)))
			die("restored read", rc);
		at += dst ? need : 0;
	}
	t0 = rckpt_now_s() - t0;
	rckpt_restored_free(r);
	free(buf);
	return t0;
}

/* One materialize call on the largest chunk of an uncompacted chain of L deltas,
 * timed alone, for the step before the head: the OSD folds its base and
 * L - 1 deltas (L records) in one op thread. */
static void materialize_rate(rckpt_t *h, rados_ioctx_t io, const char *job, const ckpts_t *ck,
			     unsigned L)
{
	char j2[80], oid[64], *mbuf;
	/* the step before the head: the head's own has a head record, read
	 * as stored; this one folds its base and L - 1 deltas */
	uint64_t msize = 0, step = 25 * (uint64_t)L, elems;
	rckpt_manifest_t mf;
	rckpt_buf_t in = RCKPT_BUF_INIT;
	rckpt_msg_materialize_t q = { step, 0, { NULL, 0 } };
	double t[32];
	int k, n = 15;

	(void)ck;
	snprintf(j2, sizeof(j2), "%s-raw", job);
	rados_ioctx_set_namespace(io, j2);
	rckpt_store_manifest_oid(oid, sizeof(oid), step);
	if (rados_stat(io, oid, &msize, NULL) || (mbuf = malloc(msize)) == NULL ||
	    rados_read(io, oid, mbuf, msize, 0) != (int)msize ||
	    rckpt_manifest_decode(&mf, (const uint8_t *)mbuf, msize))
		die("materialize rate: manifest", -EIO);
	{ /* the largest chunk */
		uint32_t c, best = 0;
		for (c = 1; c < mf.nchunks; c++)
			if (mf.chunk[c].elements > mf.chunk[best].elements)
				best = c;
		elems = mf.chunk[best].elements;
		rckpt_store_chunk_oid(oid, sizeof(oid), best);
	}
	rckpt_msg_materialize_encode(&in, &q);
	for (k = 0; k < n; k++) {
		rados_read_op_t op = rados_create_read_op();
		char *ob = NULL;
		size_t olen = 0;
		int prval = 0, rc;
		double t0 = rckpt_now_s();
		rados_read_op_exec(op, "rckpt", "materialize", (const char *)in.p, in.len, &ob, &olen,
				   &prval);
		rc = rados_read_op_operate(op, io, oid, 0);
		t[k] = rckpt_now_s() - t0;
		rados_release_read_op(op);
		if (rc || prval)
			die("materialize", rc ? rc : prval);
		rados_buffer_free(ob);
	}
	{
		double m = median(t, n);
		printf("   materialize alone (largest chunk, %" PRIu64 " elements, the step before the head: "
		       "a base and %u deltas folded, one call): %.2f ms; %.2f GB/s of fp32 folded (%u records), "
		       "%.2f GB/s of fp32 out\n",
		       elems, L - 1, m * 1e3, (double)elems * 4 * L / m / 1e9, L, (double)elems * 4 / m / 1e9);
		printf("csv:materialize,%u,%" PRIu64 ",%.3f\n", L - 1, elems, m * 1e3);
	}
	rckpt_buf_free(&in);
	rckpt_manifest_free(&mf);
	free(mbuf);
	rckpt_job_delete(h, j2);
}

/* 3. restoring the latest step against chain length, reps times each. */
static void restore_vs_chain(rckpt_t *h, rados_ioctx_t io, ckpts_t *ck, const unsigned *chain,
			     unsigned nchain, unsigned maxchain, int reps)
{
	char job[64];
	unsigned i;
	int rc;

	printf("\n3. restore the latest step vs chain length (median of %d; wire = bytes the OSD sent)\n",
	       reps);
	printf("   %5s | %9s %10s | %9s %10s | %9s %10s %8s\n", "chain", "server ms", "wire KB",
	       "compact'd", "wire KB", "client ms", "wire KB", "fold ms");
	for (i = 0; i < nchain; i++) {
		unsigned L = chain[i], k;
		uint64_t stored, step = 25 * (uint64_t)(L + 1), wsrv = 0, wcmp = 0, wcli = 0;
		double ts[64], tc[64], tl[64], tf[64], fold = 0;
		rckpt_job_t *j;
		rckpt_restore_stats_t rs;
		rckpt_compact_stats_t cs;
		snprintf(job, sizeof(job), "bench-chain%u-%d", L, (int)getpid());
		save_seq(h, job, ck, L + 1, &stored);
		j = open_job(h, job, 0);
		for (k = 0; k < (unsigned)reps && k < 64; k++) {
			ts[k] = server_restore(j, step, &rs);
			wsrv = rs.wire_bytes;
			tl[k] = client_fold(h, io, job, step, &wcli, &fold);
			tf[k] = fold;
		}
		if (L == maxchain) { /* keep an uncompacted copy for the OSD's rate */
			char j2[80];
			snprintf(j2, sizeof(j2), "%s-raw", job);
			save_seq(h, j2, ck, L + 1, &stored);
		}
		if ((rc = rckpt_job_compact(j, NULL, &cs)))
			die("compact", rc);
		for (k = 0; k < (unsigned)reps && k < 64; k++) {
			tc[k] = server_restore(j, step, &rs);
			wcmp = rs.wire_bytes;
		}
		printf("   %5u | %9.2f %10.1f | %9.2f %10.1f | %9.2f %10.1f %8.2f\n", L,
		       median(ts, reps) * 1e3, wsrv / 1e3, median(tc, reps) * 1e3, wcmp / 1e3,
		       median(tl, reps) * 1e3, wcli / 1e3, median(tf, reps) * 1e3);
		printf("csv:chain,%u,%.3f,%" PRIu64 ",%.3f,%" PRIu64 ",%.3f,%" PRIu64 "\n", L,
		       median(ts, reps) * 1e3, wsrv, median(tc, reps) * 1e3, wcmp,
		       median(tl, reps) * 1e3, wcli);
		rckpt_job_close(j);
		if (L == maxchain)
			materialize_rate(h, io, job, ck, L);
		rckpt_job_delete(h, job);
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "conf", 1, 0, 'c' },	   { "pool", 1, 0, 'p' },
					    { "chains", 1, 0, 'L' },	   { "reps", 1, 0, 'r' },
					    { "no-rados-bench", 0, 0, 'n' }, { "help", 0, 0, 'h' },
					    { "mem-sizes", 1, 0, 'm' },	   { "mem-budget", 1, 0, 'B' },
					    { "per-call", 1, 0, 'P' },	   { "osd-pid", 1, 0, 'O' },
					    { "threads", 1, 0, 'T' },	   { "save-only", 0, 0, 'S' },
					    { "steps", 1, 0, 'N' },	   { "exact", 0, 0, 'X' },
					    { 0, 0, 0, 0 } };
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	const char *pool = "rckpt", *chains = "1,2,4,8,16,32,64", *mem_sizes = "16,64,256";
	uint64_t budget_mib = 256;
	unsigned chain[16], nchain = 0, maxchain = 0, per_call_mi = 0, steps = 64;
	long osd_pid = 0;
	int reps = 5, do_rb = 1, save_only = 0, exact = 0, c, rc;
	rckpt_t *h;
	rados_t cl;
	rados_ioctx_t io;
	ckpts_t ck;
	char job[64];

	while ((c = getopt_long(argc, argv, "c:p:L:r:nhm:B:P:O:T:SN:X", lo, NULL)) != -1) {
		switch (c) {
		case 'c': co.conf_path = optarg; break;
		case 'p': pool = optarg; break;
		case 'L': chains = optarg; break;
		case 'r': reps = atoi(optarg); break;
		case 'n': do_rb = 0; break;
		case 'm': mem_sizes = optarg; break;
		case 'B': budget_mib = strtoull(optarg, NULL, 10); break;
		case 'P': per_call_mi = (unsigned)atoi(optarg); break;
		case 'T': opt_threads = (unsigned)atoi(optarg); break;
		case 'O': osd_pid = atol(optarg); break;
		case 'S': save_only = 1; break;
		case 'N': steps = (unsigned)atoi(optarg); break;
		case 'X': exact = 1; break;
		default:
			printf("usage: bench_store [--conf PATH] [--pool NAME] [--chains 1,2,4,...]\n"
			       "                   [--reps N] [--no-rados-bench]\n"
			       "                   [--mem-sizes MI,MI,... (Mi parameters; 0: skip)]\n"
			       "                   [--mem-budget MIB]\n"
			       "                   [--per-call MI (a chunk of MI Mi elements, 1..4; 0: skip)\n"
			       "                    [--osd-pid PID (the OSD's memory)]\n"
			       "                    [--exact (the steps saved bit-exact)]]\n"
			       "                   [--threads N (chunks a save encodes at once; 0: the cores)]\n"
			       "                   [--save-only (1. and its raw-fp32 pair alone)]\n"
			       "                   [--steps N (checkpoints loaded, at most; default 64)] DIR\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (exact && per_call_mi == 0) {
		fprintf(stderr, "bench_store: --exact is for --per-call MI\n");
		return 2;
	}
	if (optind != argc - 1 || reps < 1 || steps < 2) {
		fprintf(stderr, "bench_store: needs DIR; try --help\n");
		return 2;
	}
	{
		char *s = strdup(chains), *tok, *sv = NULL;
		for (tok = strtok_r(s, ",", &sv); tok && nchain < 16; tok = strtok_r(NULL, ",", &sv)) {
			chain[nchain] = (unsigned)atoi(tok);
			if (chain[nchain] > maxchain)
				maxchain = chain[nchain];
			nchain++;
		}
		free(s);
	}
	co.pool = pool;
	if ((rc = rckpt_create(&h)) || (rc = rckpt_connect(h, &co)))
		die("connect", rc);
	if ((rc = rados_create(&cl, "admin")) ||
	    (rc = rados_conf_read_file(cl, co.conf_path ? co.conf_path : getenv("CEPH_CONF"))) ||
	    (rc = rados_connect(cl)) || (rc = rados_ioctx_create(cl, pool, &io)))
		die("librados connect", rc);

	load(&ck, argv[optind], maxchain + 1 > steps ? maxchain + 1 : steps);
	printf("bench_store: %u checkpoints of %.1f MB (fp32) from %s, pool %s\n", ck.n,
	       (double)ck.raw / 1e6, argv[optind], pool);
	if (ck.n < maxchain + 1) {
		fprintf(stderr, "bench_store: %u checkpoints; the longest chain needs %u\n", ck.n,
			maxchain + 1);
		return 1;
	}

	/* 1. save */
	{
		uint64_t stored;
		split_t sp = { 0 };
		long rss0, hwm;
		double dt, mbs = -1;
		snprintf(job, sizeof(job), "bench-save-%d", (int)getpid());
		reset_hwm();
		rss0 = proc_kib("VmRSS");
		dt = save_seq_split(h, job, &ck, ck.n, &stored, &sp);
		hwm = proc_kib("VmHWM");
		if (do_rb)
			mbs = rados_bench_mbs(co.conf_path ? co.conf_path : getenv("CEPH_CONF"), pool);
		printf("\n1. save %u steps (one writer, encode + append + commit, in order)\n", ck.n);
		printf("   logical %.1f MB in %.2f s: %.1f MB/s of fp32; stored %.2f MB (%.1fx)\n",
		       (double)ck.raw * ck.n / 1e6, dt, (double)ck.raw * ck.n / 1e6 / dt,
		       (double)stored / 1e6, (double)ck.raw * ck.n / (double)stored);
		printf("   peak extra memory during the saves: %.1f MiB (VmHWM %ld KiB - VmRSS before %ld KiB)\n",
		       (double)(hwm - rss0) / 1024.0, hwm, rss0);
		if (mbs > 0)
			printf("   rados bench write (1 MiB objects, 16 in flight, 2 s): %.1f MB/s; "
			       "save logical / rados raw = %.2f\n",
			       mbs, (double)ck.raw * ck.n / 1e6 / dt / mbs);
		printf("   the base (step 1): %.1f MB/s of fp32, %.1fx; the %u deltas: %.1f MB/s of fp32, %.1fx\n",
		       (double)ck.raw / 1e6 / sp.base_s, (double)ck.raw / (double)sp.base_stored, ck.n - 1,
		       (double)ck.raw * (ck.n - 1) / 1e6 / sp.delta_s,
		       (double)ck.raw * (ck.n - 1) / (double)(sp.delta_stored ? sp.delta_stored : 1));
		printf("csv:save,%u,%.4f,%.1f,%.1f,%.1f,%" PRIu64 ",%" PRIu64 "\n", ck.n, dt,
		       (double)ck.raw * ck.n / 1e6 / dt, (double)(hwm - rss0) / 1024.0, mbs,
		       (uint64_t)ck.raw * ck.n, stored);
		printf("csv:savesplit,%.4f,%.1f,%" PRIu64 ",%u,%.4f,%.1f,%" PRIu64 "\n", sp.base_s,
		       (double)ck.raw / 1e6 / sp.base_s, sp.base_stored, ck.n - 1, sp.delta_s,
		       (double)ck.raw * (ck.n - 1) / 1e6 / sp.delta_s, sp.delta_stored);
		{ /* 1c. the same path with raw fp32, right after: pairs */
			enum { PAIRS = 5 };
			double raw_save_s, rst[PAIRS], rrd[PAIRS], q[PAIRS], sr[PAIRS], sd[PAIRS];
			uint8_t *buf = malloc(ck.raw ? ck.raw : 1), *back = malloc(ck.raw ? ck.raw : 1);
			uint8_t *dst = malloc(ck.raw ? ck.raw : 1);
			unsigned p;
			if (!buf || !back || !dst)
				die("raw path buffers", -ENOMEM);
			/* a trainer's tensors exist and have been touched: both sides
			 * read into memory that is already there */
			memset(back, 0, ck.raw);
			memset(dst, 0, ck.raw);
			raw_save_s = raw_save(io, &ck, ck.n, buf);
			for (p = 0; p < PAIRS; p++) { /* A B A B: the store's restore (a new handle), a raw read */
				rckpt_job_t *j = open_job(h, job, 0);
				rst[p] = restore_all(j, 25 * (uint64_t)ck.n, NULL, dst, ck.raw);
				rckpt_job_close(j);
				rrd[p] = raw_read(io, &ck, ck.n, back);
				q[p] = rrd[p] / rst[p];
				sr[p] = rst[p];
				sd[p] = rrd[p];
			}
			raw_remove(io, &ck);
			if (memcmp(back, buf, ck.raw) != 0)
				die("raw path read back other bytes", -EIO);
			qsort(q, PAIRS, sizeof(*q), cmp_double);
			qsort(sr, PAIRS, sizeof(*sr), cmp_double);
			qsort(sd, PAIRS, sizeof(*sd), cmp_double);
			printf("   raw fp32 through the same layout (4 Mi-element chunks appended, %u in flight, "
			       "a commit write a step; read back: the commit, then the chunks):\n"
			       "   save %.1f MB/s, save ÷ raw path = %.3f; restore of the last step (a new handle, "
			       "into touched memory) %.2f ms against a raw read of it %.2f ms: %.3f [%.3f, %.3f] "
			       "(%u pairs; the first %.3f)\n",
			       RAW_INFLIGHT, (double)ck.raw * ck.n / 1e6 / raw_save_s, raw_save_s / dt, sr[PAIRS / 2] * 1e3,
			       sd[PAIRS / 2] * 1e3, q[PAIRS / 2], q[0], q[PAIRS - 1], PAIRS, rrd[0] / rst[0]);
			printf("csv:rawpath,%.4f,%.4f,%.6f,%.6f,%.4f\n", dt, raw_save_s, sr[PAIRS / 2], sd[PAIRS / 2],
			       q[PAIRS / 2]);
			free(buf);
			free(back);
			free(dst);
		}
		rckpt_job_delete(h, job);
	}

	if (!save_only) {
		/* 1b. memory vs model size */
		mem_vs_size(h, mem_sizes, budget_mib);
		/* 2. cls call */
		rados_ioctx_set_namespace(io, "");
		cls_vs_read(io, 2000);
		/* 3. restore vs chain length */
		restore_vs_chain(h, io, &ck, chain, nchain, maxchain, reps);
		/* 4. one call of each method */
		if (per_call_mi)
			per_call(h, io, per_call_mi, osd_pid, exact);
	}
	printf("\ncommand: bench_store %s%s%s --chains %s --reps %d --mem-sizes %s --mem-budget %" PRIu64
	       " --per-call %u%s --steps %u %s\n", co.conf_path ? "--conf " : "", co.conf_path ? co.conf_path : "",
	       save_only ? " --save-only" : "", chains, reps, mem_sizes, budget_mib, per_call_mi,
	       exact ? " --exact" : "", steps, argv[optind]);
	rados_ioctx_destroy(io);
	rados_shutdown(cl);
	rckpt_destroy(h);
	unload(&ck);
	return 0;
}
