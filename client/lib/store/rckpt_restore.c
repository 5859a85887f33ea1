/*
 * rckpt_restore.c — restoring a step: its manifest, each wanted chunk
 * materialized in the OSD (one call per chunk, a bounded number in flight)
 * and decoded, and the step's attachment; and reading the result.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rckpt_clock.h"
#include "rckpt_gpuenc.h"

#include <pthread.h>
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

/* ---- restore ---- */

typedef struct mat {
	rckpt_buf_t start; /* the base to resume from, if any */
	rckpt_buf_t reply; /* the reply holding the final base record, */
	const uint8_t *rec; /* ... which is rec[0..len) */
	size_t len;
	int done;
	int skip;          /* not wanted (a partial restore) */
} mat_t;

/* The step's attachment, decompressed into *out; none: *out NULL, 0 (a
 * step dropped meanwhile too: the restore checks at its end that the step
 * is still the one it found). */
static int read_attachment(rckpt_job_t *j, uint64_t step, uint8_t **out, size_t *len)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	uint64_t size = 0;
	char oid[64];
	int rc, got;

	*out = NULL;
	*len = 0;
	rckpt_store_attach_oid(oid, sizeof(oid), step);
	rc = j->io->ops->stat(j->io, oid, &size);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (size > ATTACH_STORED_MAX || size < RCKPT_ATTACH_HEADER)
		return -EBADMSG;
	if ((rc = rckpt_buf_reserve(&b, (size_t)size)))
		return rc;
	got = j->io->ops->read(j->io, oid, b.p, (size_t)size, 0);
	rc = got < 0 ? got : (uint64_t)got == size ? 0 : -EBADMSG;
	if (rc == 0)
		rc = rckpt_attach_decode(out, len, step, b.p, (size_t)size);
	rckpt_buf_free(&b);
	return rc;
}

int rckpt_job_restore(rckpt_job_t *j, uint64_t step, rckpt_restored_t **outp, rckpt_restore_stats_t *rst)
{
	return rckpt_restore_sel(j, step, NULL, 0, NULL, 0, outp, rst, RCKPT_RESTORE_ATTACH | RCKPT_RESTORE_EXACT, __func__);
}

int rckpt_job_restore_tensors(rckpt_job_t *j, uint64_t step, const char *const *names,
			      unsigned nnames, rckpt_restored_t **outp, rckpt_restore_stats_t *rst)
{
	return rckpt_restore_sel(j, step, names, nnames, NULL, 0, outp, rst, RCKPT_RESTORE_ATTACH | RCKPT_RESTORE_EXACT, __func__);
}

int rckpt_job_restore_ranges(rckpt_job_t *j, uint64_t step, const rckpt_range_t *ranges,
			     unsigned n, rckpt_restored_t **outp, rckpt_restore_stats_t *rst)
{
	if (n == 0 || ranges == NULL) {
		*outp = NULL;
		return rckpt_fail(j->h, -EINVAL, __func__, "no ranges");
	}
	return rckpt_restore_sel(j, step, NULL, 0, ranges, n, outp, rst, RCKPT_RESTORE_ATTACH | RCKPT_RESTORE_EXACT, __func__);
}

/* Marks the chunks holding elements [first, first + count) of tensor t. */
static void want_chunks(const rckpt_manifest_t *mf, mat_t *m, unsigned *left, unsigned t,
			uint64_t first, uint64_t count)
{
	uint64_t at = 0;
	unsigned k;
	for (k = 0; k < mf->t[t].nseg; k++) {
		const rckpt_mf_seg_t *ms = &mf->t[t].seg[k];
		if (at < first + count && first < at + ms->n && ms->chunk < mf->nchunks &&
		    m[ms->chunk].done) {
			m[ms->chunk].done = 0;
			(*left)++;
		}
		at += ms->n;
	}
}

/* The chunks of a round: which[k] of segment seg. */
typedef struct round {
	const unsigned *which;
	uint64_t seg;
} round_t;

static void pending_oid(void *arg, unsigned k, char *buf, size_t cap)
{
	const round_t *r = arg;
	rckpt_store_segment_oid(buf, cap, r->which[k], r->seg);
}

/* Where step's records are (*seg) and whether it has an attachment and
 * is exact (clearing *attach, *exact when not), *step resolved from
 * RCKPT_LATEST. 0, or the error with the handle's message set. */
static int restore_locate(rckpt_job_t *j, uint64_t *step, rckpt_store_summary_t *sump, int *attach,
			  int *exact, const char *fn)
{
	rckpt_t *h = j->h;
	rckpt_store_summary_t sum;
	uint64_t head, count;
	int rc, have = 0;

	if ((rc = rckpt_read_head_summary(j, &head, &count, &sum, &have)))
		return rckpt_fail(h, rc, fn, "cannot read the head of job %s", j->name);
	if (*step == RCKPT_LATEST)
		*step = head;
	if (head == RCKPT_STORE_NONE) {
		if (rckpt_job_exists(j) == 0)
			return rckpt_fail(h, -ENOENT, fn, "job %s does not exist", j->name);
		return rckpt_fail(h, -ENOENT, fn, "job %s has no committed step yet", j->name);
	}
	if (*step > head)
		return rckpt_fail(h, -ENOENT, fn, "job %s has no committed step %" PRIu64 " (its latest is %" PRIu64 ")",
				  j->name, *step, head);
	/* the segment that holds its records: the head's came with it */
	rc = have && *step == head ? 0 : rckpt_step_summary(j, *step, &sum);
	if (rc == -ENOENT)
		return rckpt_fail(h, rc, fn, "job %s has no step %" PRIu64 " (never saved, or dropped)", j->name,
				  *step);
	if (rc)
		return rckpt_fail(h, rc, fn, "cannot read the summary of step %" PRIu64, *step);
	*sump = sum;
	/* a rewound job may hold an attachment of an abandoned step of this
	 * number: only one the summary names is the step's */
	if (!(sum.flags & RCKPT_SUMMARY_ATTACH))
		*attach = 0;
	if (!(sum.flags & RCKPT_SUMMARY_EXACT))
		*exact = 0;
	return 0;
}

/* rc of reading step's manifest, with the handle's message set. */
static int manifest_failed(rckpt_job_t *j, int rc, uint64_t step, const char *fn)
{
	if (rc == -ENOENT)
		return rckpt_fail(j->h, rc, fn, "job %s has no step %" PRIu64 " (never saved, or dropped)", j->name,
				  step);
	return rckpt_fail(j->h, rc, fn, "cannot read the manifest of step %" PRIu64, step);
}

/* Step's manifest object into man, decoded into mf (at most 1 GiB). 0, or
 * the error with the handle's message set. */
static int restore_manifest(rckpt_job_t *j, uint64_t step, rckpt_buf_t *man, rckpt_manifest_t *mf,
			    const char *fn)
{
	uint64_t size = 0;
	char oid[64];
	int rc;

	rckpt_store_manifest_oid(oid, sizeof(oid), step);
	rc = j->io->ops->stat(j->io, oid, &size);
	if (rc == 0 && size > ((uint64_t)1 << 30))
		rc = -EFBIG;
	if (rc == 0)
		rc = rckpt_buf_reserve(man, size ? (size_t)size : 1);
	if (rc == 0) {
		int got = j->io->ops->read(j->io, oid, man->p, (size_t)size, 0);
		rc = got < 0 ? got : (uint64_t)got == size ? 0 : -EBADMSG;
		man->len = (size_t)size;
	}
	if (rc == 0)
		rc = rckpt_manifest_decode(mf, man->p, man->len);
	return rc ? manifest_failed(j, rc, step, fn) : 0;
}

/* Marks done every chunk but those that hold the named tensors and
 * ranges (and their NORM partners), *left those to materialize. 0, or the
 * error with the handle's message set. */
static int restore_select(rckpt_job_t *j, const rckpt_manifest_t *mf, mat_t *m, unsigned *left,
			  const char *const *names, unsigned nnames, const rckpt_range_t *ranges,
			  unsigned nranges, uint64_t step, const char *fn)
{
	unsigned i;
	for (i = 0; i < mf->nchunks; i++)
		m[i].done = 1;
	*left = 0;
	for (i = 0; i < nnames + nranges; i++) {
		const char *name = i < nnames ? names[i] : ranges[i - nnames].name;
		uint64_t numel = 1, first = 0, count = UINT64_MAX;
		unsigned t, d;
		for (t = 0; name && t < mf->ntensors && strcmp(mf->t[t].name, name) != 0; t++)
			;
		if (name == NULL || t == mf->ntensors)
			return rckpt_fail(j->h, -ENOENT, fn, "step %" PRIu64 " has no tensor '%s'", step,
					  name ? name : "(null)");
		for (d = 0; d < mf->t[t].ndim; d++)
			numel *= mf->t[t].shape[d];
		if (i >= nnames) {
			first = ranges[i - nnames].first;
			count = ranges[i - nnames].count;
			if (first > numel || count > numel - first)
				return rckpt_fail(j->h, -ERANGE, fn,
						  "range [%" PRIu64 ", +%" PRIu64 ") is past tensor '%s' (%" PRIu64
						  " elements)",
						  first, count, name, numel);
		} else {
			count = numel;
		}
		want_chunks(mf, m, left, t, first, count);
		if (mf->t[t].norm != RCKPT_MF_NO_NORM) /* its values need its second moment's */
			want_chunks(mf, m, left, mf->t[t].norm, first, count);
	}
	for (i = 0; i < mf->nchunks; i++)
		m[i].skip = m[i].done;
	return 0;
}

/* ---- chunks decoded as their records arrive ---- */

/* The decoder threads of a restore: the thread that runs the materialize
 * calls queues each chunk whose record has come (in its window's
 * callback, while the others are in flight); they decode it
 * (rckpt_ckdec_inc_chunk). A small step (under DPOOL_INLINE_BYTES of
 * fp32) decodes on that thread as each record comes: starting threads
 * would cost more. Without threads otherwise (one chunk, one CPU) the
 * chunks are decoded at the end, as before. */
#define DPOOL_THREADS 8
#define DPOOL_INLINE_BYTES ((uint64_t)4 << 20)

typedef struct dpool {
	rckpt_ckdec_inc_t *x;
	mat_t *m;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t *q;
	unsigned head, tail, cap, nthr;
	int closed, inline_;
	pthread_t tid[DPOOL_THREADS];
} dpool_t;

static void dpool_drain(dpool_t *p)
{
	for (;;) {
		uint32_t c;
		pthread_mutex_lock(&p->mu);
		while (p->head == p->tail && !p->closed)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->head == p->tail) {
			pthread_mutex_unlock(&p->mu);
			return;
		}
		c = p->q[p->head++];
		pthread_mutex_unlock(&p->mu);
		(void)rckpt_ckdec_inc_chunk(p->x, c, p->m[c].rec, p->m[c].len);
	}
}

static void *dpool_run(void *arg)
{
	dpool_drain(arg);
	return NULL;
}

/* Starts up to `threads` decoders over n chunks (none: p->nthr 0), or
 * none for a step of raw_bytes under DPOOL_INLINE_BYTES (decoded inline). */
static void dpool_start(dpool_t *p, rckpt_ckdec_inc_t *x, mat_t *m, unsigned n, unsigned threads,
			uint64_t raw_bytes)
{
	memset(p, 0, sizeof(*p));
	p->x = x;
	p->m = m;
	if ((p->inline_ = raw_bytes < DPOOL_INLINE_BYTES))
		return;
	if (threads > DPOOL_THREADS)
		threads = DPOOL_THREADS;
	if (n < 2 || threads < 2 || (p->q = malloc(n * sizeof(*p->q))) == NULL)
		return;
	p->cap = n;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (p->nthr = 0; p->nthr < threads; p->nthr++)
		if (pthread_create(&p->tid[p->nthr], NULL, dpool_run, p))
			break;
}

/* Chunk c's record has come: to a decoder. */
static void dpool_put(dpool_t *p, uint32_t c)
{
	if (p && p->inline_)
		(void)rckpt_ckdec_inc_chunk(p->x, c, p->m[c].rec, p->m[c].len);
	if (p == NULL || p->nthr == 0)
		return;
	pthread_mutex_lock(&p->mu);
	if (p->tail < p->cap)
		p->q[p->tail++] = c;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* Every queued chunk decoded (this thread helping), the threads gone. */
static void dpool_stop(dpool_t *p)
{
	unsigned i;
	if (p->q == NULL)
		return;
	if (p->nthr) {
		pthread_mutex_lock(&p->mu);
		p->closed = 1;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		dpool_drain(p);
		for (i = 0; i < p->nthr; i++)
			pthread_join(p->tid[i], NULL);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->q);
	p->q = NULL;
}

/* A whole step's manifest, read while its materialize calls are in
 * flight (the summary names its chunks and segment): taken at the first
 * reply, which then starts the decoders. */
typedef struct ahead {
	rckpt_job_t *j;
	uint64_t step;
	uint32_t nchunks;   /* the summary's */
	uint64_t raw_bytes; /* the summary's */
	rckpt_aio_t *c;     /* the read in flight, or NULL */
	int rc;             /* 1: not taken yet; else 0 or the error */
	rckpt_buf_t *man;
	rckpt_manifest_t *mf;
	rckpt_ckdec_inc_t *inc;
	const rckpt_ckdec_t *dec;
	dpool_t *pool;
	mat_t *m;
	const char *fn;
} ahead_t;

/* What the rounds of materialize calls count. */
typedef struct mat_run {
	unsigned left, calls, restarts, bad_chunk;
	uint64_t wire;
	dpool_t *pool; /* where a chunk whose record came goes */
	ahead_t *ahead; /* a manifest still to take, or NULL */
} mat_run_t;

/* The first read of a manifest read ahead: a step of a few thousand
 * tensors; a longer one is read on from there. */
#define AHEAD_BYTES ((size_t)256 << 10)
#define MANIFEST_MAX ((size_t)1 << 30)

/* Starts the read of a's manifest: 0, or the error (nothing in flight). */
static int ahead_start(ahead_t *a)
{
	char oid[64];
	int rc;
	a->c = NULL;
	a->man->max = MANIFEST_MAX;
	rckpt_store_manifest_oid(oid, sizeof(oid), a->step);
	if ((rc = rckpt_buf_reserve(a->man, AHEAD_BYTES)))
		return rc;
	rc = a->j->io->ops->aio_read(a->j->io, oid, a->man->p, AHEAD_BYTES, 0, NULL, NULL, &a->c);
	a->rc = rc ? rc : 1;
	return rc;
}

/* The rest of a manifest whose first read came back full: its size, at
 * most MANIFEST_MAX, then the rest in one read. 0 or the error. */
static int ahead_rest(ahead_t *a)
{
	char oid[64];
	uint64_t size = 0;
	size_t have = a->man->len;
	int got, rc;
	rckpt_store_manifest_oid(oid, sizeof(oid), a->step);
	if ((rc = a->j->io->ops->stat(a->j->io, oid, &size)))
		return rc;
	if (size > MANIFEST_MAX)
		return -EFBIG;
	if (size <= have)
		return size == have ? 0 : -EBADMSG; /* (shorter: replaced meanwhile) */
	if ((rc = rckpt_buf_reserve(a->man, (size_t)size - have)))
		return rc;
	got = a->j->io->ops->read(a->j->io, oid, a->man->p + have, (size_t)size - have, have);
	if (got < 0)
		return got;
	if ((uint64_t)got != size - have)
		return -EBADMSG;
	a->man->len = (size_t)size;
	return 0;
}

/* rc 0 when the manifest of a restore names the chunks its summary does
 * (a summary a trainer planted may not); else -EBADMSG with the handle's
 * message set. */
static int chunks_agree(rckpt_job_t *j, uint64_t step, const rckpt_manifest_t *mf, uint32_t nchunks,
			const char *fn)
{
	if (mf->nchunks == nchunks)
		return 0;
	return rckpt_fail(j->h, -EBADMSG, fn,
			  "step %" PRIu64 ": its manifest names %" PRIu32 " chunks, its summary %" PRIu32, step,
			  mf->nchunks, nchunks);
}

/* The manifest read ahead, waited for: read to its end, decoded and
 * checked against the summary's chunk count (a->rc: 0, or the error with
 * the handle's message set). */
static void ahead_manifest(ahead_t *a)
{
	int got = a->j->io->ops->aio_wait(a->c);
	a->c = NULL;
	a->man->len = got > 0 ? (size_t)got : 0;
	if (got >= 0 && (size_t)got == AHEAD_BYTES)
		got = ahead_rest(a);
	a->rc = got < 0 ? got : rckpt_manifest_decode(a->mf, a->man->p, a->man->len);
	if (a->rc)
		a->rc = manifest_failed(a->j, a->rc, a->step, a->fn);
	else
		a->rc = chunks_agree(a->j, a->step, a->mf, a->nchunks, a->fn);
}

/* The manifest read ahead, once, at the first reply: taken
 * (ahead_manifest) and the decoders started (a->rc: 0, or the error with
 * the handle's message set). */
static void ahead_take(ahead_t *a)
{
	uint32_t i;
	if (a->rc != 1)
		return;
	ahead_manifest(a);
	if (a->rc == 0 && (a->rc = rckpt_ckdec_inc_begin(a->inc, a->dec, a->man->p, a->man->len)))
		a->rc = rckpt_fail(a->j->h, a->rc, a->fn, "the manifest of step %" PRIu64 " does not decode",
				   a->step);
	if (a->rc)
		return;
	dpool_start(a->pool, a->inc, a->m, a->nchunks, rckpt_ckdec_threads(a->dec), a->raw_bytes);
	for (i = 0; i < a->nchunks; i++)
		if (a->m[i].done && !a->m[i].skip)
			dpool_put(a->pool, i);
}

/* The manifest read ahead, not wanted (the rounds failed): its read
 * ended, nothing decoded (a->rc 2). */
static void ahead_drop(ahead_t *a)
{
	if (a->rc != 1)
		return;
	(void)a->j->io->ops->aio_wait(a->c);
	a->c = NULL;
	a->rc = 2;
}

/* Chunk i's materialize reply: its base record, done (then to a decoder),
 * or where to go on from. */
static int take_reply(mat_t *m, unsigned i, rckpt_buf_t *out, mat_run_t *x)
{
	rckpt_msg_materialized_t a;
	rckpt_buf_t t;
	int e;
	if (x->ahead)
		ahead_take(x->ahead);
	e = rckpt_msg_materialized_decode(&a, out->p, out->len);
	if (e)
		return e;
	if (a.record.len == 0)
		return -EBADMSG; /* a reply must hold a record (done or not) */
	x->wire += out->len;
	if (!a.done) {
		m[i].start.len = 0;
		return rckpt_buf_append(&m[i].start, a.record.p, a.record.len);
	}
	/* the record stays in the reply, which the chunk keeps */
	t = m[i].reply;
	m[i].reply = *out;
	*out = t;
	m[i].rec = a.record.p;
	m[i].len = a.record.len;
	m[i].done = 1;
	x->left--;
	dpool_put(x->pool, i);
	return 0;
}

/* A round's calls as they end: each reply taken at once, so that its
 * chunk decodes while the others are in flight. */
typedef struct round_ctx {
	const unsigned *which;
	mat_t *m;
	rckpt_buf_t *out;
	uint8_t *taken;
	mat_run_t *x;
} round_ctx_t;

static void round_each(void *arg, unsigned k, int rc)
{
	round_ctx_t *c = arg;
	if (rc == 0 && take_reply(c->m, c->which[k], &c->out[k], c->x) == 0)
		c->taken[k] = 1; /* else the round's loop says what failed */
}

/* One round of materialize calls, `inflight` at a time, for every chunk
 * not done yet: in the OSDs, or here when they lack the class. 0, or the
 * error (x->bad_chunk: the chunk, when one failed). */
static int materialize_round(rckpt_job_t *j, unsigned nchunks, mat_t *m, uint64_t step, uint64_t seg,
			     mat_run_t *x)
{
	unsigned *which = calloc(nchunks, sizeof(*which)), nw = 0, k, i;
	rckpt_buf_t *in = calloc(nchunks, sizeof(*in));
	rckpt_buf_t *out = calloc(nchunks, sizeof(*out));
	int *res = calloc(nchunks, sizeof(*res));
	uint8_t *taken = calloc(nchunks, 1);
	round_ctx_t ctx = { which, m, out, taken, x };
	int rc = 0, osd_ran = 0;
	char oid[64];

	if (!which || !in || !out || !res || !taken)
		rc = -ENOMEM;
	for (i = 0; i < nchunks && rc == 0; i++) {
		rckpt_msg_materialize_t q = { step, 0, { m[i].start.p, m[i].start.len } };
		if (m[i].done)
			continue;
		rc = rckpt_msg_materialize_encode(&in[nw], &q);
		which[nw++] = i;
	}
	if (rc == 0 && j->fold == RCKPT_FOLD_OSD) {
		round_t rd = { which, seg };
		osd_ran = 1;
		rc = rckpt_io_fanout_each(j->io, nw, j->o.inflight, pending_oid, &rd, "rckpt", "materialize", in,
					  0, out, res, NULL, round_each, &ctx);
		x->calls += nw;
		for (k = 0; rc == 0 && k < nw; k++)
			if (rckpt_fold_refused(res[k])) {
				/* the class went (or an OSD of the pool lacks it): here from now on */
				j->fold = RCKPT_FOLD_CLIENT;
				snprintf(j->fold_why, sizeof(j->fold_why), "an OSD refused rckpt.materialize (%s)",
					 rckpt_plugin_hint(res[k]));
			}
	}
	for (k = 0; rc == 0 && k < nw; k++) {
		round_t rd = { which, seg };
		/* a chunk past the OSD's bounds (an older writer's: records of
		 * 2^26 elements) folds here, on the client's memory */
		const int here = j->fold == RCKPT_FOLD_CLIENT || (osd_ran && res[k] == -E2BIG);
		if (!here || (osd_ran && !rckpt_fold_refused(res[k]) && res[k] != -E2BIG))
			continue; /* the OSD's own answer stands */
		out[k].len = 0;
		pending_oid(&rd, k, oid, sizeof(oid));
		res[k] = rckpt_fold_exec(j, oid, "materialize", &in[k], &out[k]);
	}
	for (k = 0; rc == 0 && k < nw; k++) {
		int e = res[k];
		i = which[k];
		if (taken[k])
			continue; /* taken as it came */
		if (e == -ESTALE && m[i].start.len && x->restarts < 8) {
			/* compacted since the last round: start this chunk over */
			m[i].start.len = 0;
			x->restarts++;
			e = 0;
		} else if (e == 0) {
			e = take_reply(m, i, &out[k], x);
		}
		if (e) {
			rc = e;
			x->bad_chunk = i;
		}
	}
	for (k = 0; in && out && k < nchunks; k++) {
		rckpt_buf_free(&in[k]);
		rckpt_buf_free(&out[k]);
	}
	free(which);
	free(in);
	free(out);
	free(res);
	free(taken);
	return rc;
}

/* Makes r's decoded chunks bit-exact with their residual objects (an
 * exact step). 0, or the error with the handle's message set. */
static int restore_exact(rckpt_job_t *j, rckpt_restored_t *r, const mat_t *m, uint64_t step, uint64_t *wire,
			 const char *fn)
{
	rckpt_buf_t obj = RCKPT_BUF_INIT;
	char oid[64] = "";
	unsigned i;
	int rc = 0;
	for (i = 0; i < r->dec.mf.nchunks && rc == 0; i++) {
		rckpt_record_t *rec = &r->dec.chunk[i];
		if (m[i].skip || !rckpt_exact_quantized(rec))
			continue;
		rckpt_store_exact_oid(oid, sizeof(oid), step, i);
		if ((rc = rckpt_read_object(j, oid, ATTACH_STORED_MAX, &obj)) == 0) {
			*wire += obj.len;
			rc = rckpt_exact_apply(rec, &r->dec.mf, step, i, obj.p, obj.len);
		}
	}
	rckpt_buf_free(&obj);
	if (rc)
		return rckpt_fail(j->h, rc, fn, "cannot restore step %" PRIu64 " bit-exact: %s %s", step, oid,
				  rc == -ENOENT		  ? "is missing"
				  : rc == RCKPT_ECHECKSUM ? "does not give the saved bits (SHA-256)"
							  : "is damaged");
	r->exact = 1;
	return 0;
}

/* The job's record of resumes (formats/store.md, `x.restores`): u64 the
 * resumes, u64 the step the last one read. A resume is a writer's first
 * restore before it saves (a restarted trainer reading where it left
 * off): once per handle, however many reads it takes; a writer's
 * restores after its saves (a check, an evaluation) are not. The record
 * only informs later thresholds (rckpt_job_restores), so a failure to
 * write it fails nothing. */
#define RESTORES_KEY "x.restores"

static int read_restores(rckpt_job_t *j, uint64_t *count, uint64_t *last)
{
	uint64_t v[2] = { 0, RCKPT_LATEST };
	int rc = rckpt_read_u64s(j, RESTORES_KEY, v, 2); /* v untouched on failure */
	*count = v[0];
	*last = v[1];
	return rc == -ENOENT ? 0 : rc;
}

static void note_restore(rckpt_job_t *j, uint64_t step)
{
	uint64_t count, last;
	uint8_t b[16];
	rckpt_writer_t w = rckpt_writer(b, sizeof(b));
	int rc = read_restores(j, &count, &last);
	if (rc == -EBADMSG)
		count = 0; /* a damaged record starts again */
	else if (rc)
		return; /* not read: a record that may be good is not overwritten */
	rckpt_wr_u64(&w, count < UINT64_MAX ? count + 1 : count);
	rckpt_wr_u64(&w, step);
	if (j->io->ops->omap_set(j->io, RCKPT_STORE_JOB_OID, RESTORES_KEY, b, sizeof(b)) == 0)
		j->resumed = 1;
}

int rckpt_job_restores(rckpt_job_t *j, uint64_t *count, uint64_t *last)
{
	uint64_t c, l;
	int rc;
	rckpt_clear_error(j->h);
	rc = read_restores(j, &c, &l);
	if (rc == -EBADMSG)
		return rckpt_fail(j->h, rc, __func__, "job %s: its record of restores is not 16 bytes", j->name);
	if (rc)
		return rckpt_fail(j->h, rc, __func__, "cannot read job %s's record of restores", j->name);
	if (count)
		*count = c;
	if (last)
		*last = l;
	return 0;
}

/* Whether step is still what the restore found (its summary was): listed
 * at or before the head with the same summary. A compaction's retention
 * policy or a rewind may drop it under a restore (its records, manifest
 * or attachment go), and a rewound job may save another step of that
 * number. 1, 0 (gone or another), or the read's error. */
static int still_the_step(rckpt_job_t *j, uint64_t step, const rckpt_store_summary_t *was)
{
	rckpt_store_summary_t now;
	uint8_t a[RCKPT_STORE_SUMMARY_BYTES], b[RCKPT_STORE_SUMMARY_BYTES];
	uint64_t head, count;
	int rc = rckpt_step_summary(j, step, &now);
	if (rc == 0)
		rc = rckpt_read_head(j, &head, &count);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	rckpt_store_summary_put(a, &now);
	rckpt_store_summary_put(b, was);
	return head != RCKPT_STORE_NONE && step <= head && memcmp(a, b, sizeof(a)) == 0;
}

/* A restore of step that ended with rc (0: it succeeded): -ENOENT with a
 * message saying so when the step is no longer the one it found, the
 * handle's message (when rc) appended; else rc as it was. */
static int dropped_meanwhile(rckpt_job_t *j, uint64_t step, const rckpt_store_summary_t *was, int rc,
			     const char *fn)
{
	char why[160] = "";
	if (rc == -ENOMEM || still_the_step(j, step, was) != 0)
		return rc;
	if (rc)
		snprintf(why, sizeof(why), " (%s)", rckpt_errmsg(j->h));
	return rckpt_fail(j->h, -ENOENT, fn,
			  "job %s: step %" PRIu64 " was dropped while it was restored (by a retention policy or "
			  "a rewind; or saved anew, or the job deleted)%s",
			  j->name, step, why);
}

/* rc of the rounds of materialize calls (bad: the chunk that failed, or
 * UINT_MAX), with the handle's message set. */
static int materialize_failed(rckpt_job_t *j, int rc, unsigned bad, uint64_t step, uint64_t seg,
			      const char *fn)
{
	char oid[64];
	if (bad == UINT_MAX)
		return rckpt_fail(j->h, rc, fn, "cannot materialize step %" PRIu64, step);
	rckpt_store_segment_oid(oid, sizeof(oid), bad, seg);
	return rckpt_fail(j->h, rc, fn, "cannot materialize step %" PRIu64 " from %s/%s", step, j->name, oid);
}

/* rc of decoding the step's records, with the handle's message set. */
static int decode_failed(rckpt_t *h, int rc, uint64_t step, const char *fn)
{
	return rckpt_fail(h, rc, fn, "step %" PRIu64 " does not decode%s", step,
			  rc == RCKPT_ECHECKSUM ? ": a chunk's digest differs from its manifest"
			  : rc == -E2BIG ? ": it declares more values than its bytes can hold (over "
					   "RCKPT_DECODE_RATIO_MAX, 4096x as fp32), refused"
					 : "");
}

int rckpt_restore_sel(rckpt_job_t *j, uint64_t step, const char *const *names, unsigned nnames,
		       const rckpt_range_t *ranges, unsigned nranges, rckpt_restored_t **outp,
		       rckpt_restore_stats_t *rst, unsigned what, const char *fn)
{
	rckpt_t *h = j->h;
	rckpt_restored_t *r = NULL;
	rckpt_manifest_t mf = { 0 };
	int attach = (what & RCKPT_RESTORE_ATTACH) != 0, exact = (what & RCKPT_RESTORE_EXACT) != 0;
	rckpt_buf_t man = RCKPT_BUF_INIT;
	mat_t *m = NULL;
	mat_run_t x = { 0, 0, 0, UINT_MAX, 0, NULL, NULL };
	rckpt_ckdec_inc_t inc = { 0 };
	dpool_t pool = { 0 };
	const uint8_t **recs = NULL;
	size_t *lens = NULL;
	rckpt_store_summary_t sum = { 0 };
	ahead_t ahead = { 0 };
	rckpt_fold_ask_t ask;
	unsigned i, nchunks = 0;
	double t0 = rckpt_now_s(), t_loc = t0, t_fetch = t0, t_dec = 0;
	int rc, located = 0, begun = 0;

	rckpt_clear_error(h);
	*outp = NULL;
	rckpt_fold_ask(j, &ask); /* (a handle's first restore: beside the head's read) */
	if ((rc = restore_locate(j, &step, &sum, &attach, &exact, fn))) {
		rckpt_fold_ask_drop(j, &ask);
		return rc;
	}
	/* from here the step may be dropped under the restore (done:) */
	located = 1;
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		rc = rckpt_fail(h, -ENOMEM, fn, "out of memory");
		goto done;
	}
	/* A whole step: its manifest read beside its materialize calls (the
	 * summary names its chunks); a part of one: the manifest first, to
	 * choose the chunks. */
	ahead = (ahead_t){ j, step, sum.nchunks, sum.raw_bytes, NULL, 0, &man, &mf, &inc, &r->dec, &pool, NULL, fn };
	if (nnames || nranges || sum.nchunks == 0 || sum.nchunks > RCKPT_MF_MAX_CHUNKS || ahead_start(&ahead)) {
		ahead.rc = 0;
		if ((rc = restore_manifest(j, step, &man, &mf, fn)) || (rc = chunks_agree(j, step, &mf, sum.nchunks, fn)))
			goto done;
	} else if (sum.nchunks > (j->o.inflight ? j->o.inflight : 1)) {
		/* more calls than a window: none before the summary's count (a
		 * trainer may write it) is checked against the manifest */
		ahead_manifest(&ahead);
		if ((rc = ahead.rc))
			goto done;
	}
	nchunks = ahead.rc == 1 ? sum.nchunks : mf.nchunks;
	t_loc = rckpt_now_s();
	if ((rc = rckpt_fold_decide_asked(j, &ask))) {
		rc = rckpt_fail(h, rc, fn, "cannot ask the OSDs for the rckpt class");
		goto done;
	}
	m = calloc(nchunks ? nchunks : 1, sizeof(*m));
	recs = calloc(nchunks ? nchunks : 1, sizeof(*recs));
	lens = calloc(nchunks ? nchunks : 1, sizeof(*lens));
	if (!m || !recs || !lens) {
		rc = rckpt_fail(h, -ENOMEM, fn, "out of memory");
		goto done;
	}
	x.left = nchunks;
	if ((nnames || nranges) && /* only the chunks that hold these */
	    (rc = restore_select(j, &mf, m, &x.left, names, nnames, ranges, nranges, step, fn)))
		goto done;
	/* Rounds of materialize calls until every chunk is done, each chunk
	 * decoded as its record comes */
	x.pool = &pool;
	if (ahead.rc == 1) { /* (at most a window of calls: taken at the first reply) */
		ahead.m = m;
		x.ahead = &ahead;
	} else {
		if ((rc = rckpt_ckdec_inc_begin(&inc, &r->dec, man.p, man.len))) {
			rc = rckpt_fail(h, rc, fn, "the manifest of step %" PRIu64 " does not decode", step);
			goto done;
		}
		dpool_start(&pool, &inc, m, nchunks, rckpt_ckdec_threads(&r->dec), sum.raw_bytes);
	}
	while (x.left > 0 && rc == 0 && ahead.rc >= 0)
		rc = materialize_round(j, nchunks, m, step, sum.segment, &x);
	t_fetch = rckpt_now_s();
	if (rc) /* (no reply came, or none that could be used) */
		ahead_drop(&ahead);
	else
		ahead_take(&ahead);
	begun = ahead.rc == 0;
	dpool_stop(&pool);
	if (ahead.rc < 0) { /* (the cause, when a chunk failed too: one past the manifest's) */
		rc = ahead.rc; /* said */
		goto done;
	}
	if (rc) {
		if (begun)
			rckpt_ckdec_inc_abort(&inc);
		rc = materialize_failed(j, rc, x.bad_chunk, step, sum.segment, fn);
		goto done;
	}
	for (i = 0; i < mf.nchunks; i++) {
		recs[i] = m[i].skip ? NULL : m[i].rec;
		lens[i] = m[i].skip ? 0 : m[i].len;
	}
	r->step = step;
	if (attach && (rc = read_attachment(j, step, &r->attach, &r->attach_len))) {
		rckpt_ckdec_inc_abort(&inc);
		rc = rckpt_fail(h, rc, fn, "cannot read the attachment of step %" PRIu64 "%s", step,
				rc == RCKPT_ECHECKSUM ? ": it fails its checksum" : "");
		goto done;
	}
	rc = rckpt_ckdec_inc_end(&inc, &r->dec, recs, lens);
	t_dec = rckpt_now_s() - t_fetch;
	if (rc) {
		rc = decode_failed(h, rc, step, fn);
		goto done;
	}
	if (exact && (rc = restore_exact(j, r, m, step, &x.wire, fn)))
		goto done;
	/* Each chunk matched the manifest's SHA-256, but the attachment is
	 * read apart: that of the same step only if the step is still the one
	 * found (a rewound job may have saved another of that number). */
	if (attach && (rc = dropped_meanwhile(j, step, &sum, 0, fn))) {
		located = 0; /* said */
		goto done;
	}
	if (rst)
		*rst = (rckpt_restore_stats_t){ x.wire + man.len, x.calls, rckpt_now_s() - t0, t_loc - t0,
						t_fetch - t_loc, t_dec, inc.cpu };
	*outp = r;
	r = NULL;
	if (j->o.writer && !j->resumed)
		note_restore(j, step);
done:
	rckpt_fold_ask_drop(j, &ask);
	if (ahead.rc == 1) /* still in flight */
		(void)j->io->ops->aio_wait(ahead.c);
	if (rc && located)
		rc = dropped_meanwhile(j, step, &sum, rc, fn);
	if (r)
		rckpt_restored_free(r);
	for (i = 0; m && i < nchunks; i++) { /* (m's: the summary's count, or the manifest's) */
		rckpt_buf_free(&m[i].start);
		rckpt_buf_free(&m[i].reply);
	}
	free(m);
	free(recs);
	free(lens);
	rckpt_manifest_free(&mf);
	rckpt_buf_free(&man);
	return rc;
}

uint64_t rckpt_restored_step(const rckpt_restored_t *r)
{
	return r->step;
}

unsigned rckpt_restored_count(const rckpt_restored_t *r)
{
	return r->dec.mf.ntensors;
}

int rckpt_restored_tensor(const rckpt_restored_t *r, unsigned i, rckpt_tensor_t *out)
{
	const rckpt_mf_tensor_t *t;
	unsigned d;
	if (i >= r->dec.mf.ntensors)
		return -EINVAL;
	t = &r->dec.mf.t[i];
	memset(out, 0, sizeof(*out));
	out->name = t->name;
	out->dtype = t->dtype;
	out->ndim = t->ndim;
	for (d = 0; d < t->ndim && d < RCKPT_MAX_DIMS; d++)
		out->shape[d] = t->shape[d];
	return 0;
}

int rckpt_restored_role(const rckpt_restored_t *r, unsigned i)
{
	if (i >= r->dec.mf.ntensors)
		return -EINVAL;
	switch (r->dec.mf.t[i].kind) {
	case RCKPT_LK_MOMENT1: return RCKPT_ROLE_MOMENT1;
	case RCKPT_LK_MOMENT2: return RCKPT_ROLE_MOMENT2;
	case RCKPT_LK_OPTIM: return RCKPT_ROLE_OPTIM;
	default: return RCKPT_ROLE_MODEL;
	}
}


/* Whether tensor i fits in cap bytes: 0, -EINVAL (no tensor i), -ERANGE. */
static int fits(const rckpt_restored_t *r, unsigned i, size_t cap)
{
	const rckpt_mf_tensor_t *t;
	if (i >= r->dec.mf.ntensors)
		return -EINVAL;
	t = &r->dec.mf.t[i];
	return cap < rckpt_mf_numel(t) * rckpt_dtype_size(t->dtype) ? -ERANGE : 0;
}

int rckpt_restored_read(const rckpt_restored_t *r, unsigned i, void *dst, size_t cap)
{
	rckpt_ckdec_sink_t s;
	int rc = fits(r, i, cap);
	if (rc)
		return rc;
	/* no fp32 copy of the tensor: levels are dequantized into dst */
	rckpt_ckdec_host_sink(&s, dst);
	return rckpt_ckdec_tensor_to(&r->dec, i, &s);
}

int rckpt_restored_read_many(const rckpt_restored_t *r, unsigned n, const unsigned *idx, void *const *dst,
			     const size_t *cap, int *rcs, unsigned threads)
{
	unsigned k;
	if (r == NULL || (n && (idx == NULL || dst == NULL || cap == NULL || rcs == NULL)))
		return -EINVAL;
	for (k = 0; k < n; k++)
		rcs[k] = fits(r, idx[k], cap[k]);
	return rckpt_ckdec_read_many(&r->dec, n, idx, dst, rcs, threads);
}

int rckpt_restored_read_device(const rckpt_restored_t *r, unsigned i, void *d_dst, size_t cap)
{
	rckpt_gpu_probe_t pr;
	rckpt_gpuenc_t *g;
	int rc = fits(r, i, cap), prev;
	if (rc)
		return rc;
	rckpt_gpu_probe(&pr);
	if (!pr.built_with_cuda || pr.device_count == 0)
		return -ENODEV;
	if (rckpt_mf_numel(&r->dec.mf.t[i]) == 0)
		return 0; /* nothing to write, wherever d_dst is */
	/* the stream and buffers on the device that holds d_dst; the
	 * thread's current device back afterwards */
	if ((rc = rckpt_gpu_use_device_of(d_dst, &prev)))
		return rc;
	if ((rc = rckpt_gpuenc_create(&g)) == 0) {
		rc = rckpt_gpuenc_decode_to(g, d_dst, &r->dec, i);
		rckpt_gpuenc_destroy(g);
	}
	rckpt_gpu_set_device(prev);
	return rc;
}

int rckpt_restored_read_range(const rckpt_restored_t *r, unsigned i, uint64_t first,
			      uint64_t count, void *dst)
{
	float *f;
	int rc;
	if (i >= r->dec.mf.ntensors)
		return -EINVAL;
	if (count == 0)
		return 0;
	f = malloc(count > ((uint64_t)1 << 20) ? (size_t)1 << 22 : (size_t)count * 4);
	if (f == NULL)
		return -ENOMEM;
	{
		/* in pieces of at most 1 Mi elements: bounded memory */
		const size_t dsz = rckpt_dtype_size(r->dec.mf.t[i].dtype);
		uint64_t done = 0;
		rc = 0;
		while (done < count && rc == 0) {
			uint64_t m = count - done < ((uint64_t)1 << 20) ? count - done : (uint64_t)1 << 20;
			rc = rckpt_ckdec_range_f32(&r->dec, i, first + done, m, f);
			if (rc == 0)
				rckpt_narrow_from_f32((uint8_t *)dst + done * dsz, f, r->dec.mf.t[i].dtype, m);
			done += m;
		}
	}
	free(f);
	return rc;
}

int rckpt_restored_find(const rckpt_restored_t *r, const char *name)
{
	unsigned i;
	for (i = 0; name && i < r->dec.mf.ntensors; i++)
		if (strcmp(r->dec.mf.t[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

void rckpt_restored_free(rckpt_restored_t *r)
{
	if (r == NULL)
		return;
	rckpt_ckdec_free(&r->dec);
	free(r->attach);
	free(r);
}

int rckpt_restored_exact(const rckpt_restored_t *r)
{
	return r->exact;
}

int rckpt_restored_attachment(const rckpt_restored_t *r, const void **data, size_t *len)
{
	*data = NULL;
	*len = 0;
	if (r->attach == NULL)
		return -ENOENT;
	*data = r->attach;
	*len = r->attach_len;
	return 0;
}

int rckpt_job_attachment(rckpt_job_t *j, uint64_t *step, void *dst, size_t cap, size_t *len)
{
	int attach = 1, exact = 0, rc;
	rckpt_store_summary_t sum;
	uint8_t *p = NULL;
	size_t n = 0;

	rckpt_clear_error(j->h);
	*len = 0;
	if ((rc = restore_locate(j, step, &sum, &attach, &exact, __func__)))
		return rc;
	if (attach && (rc = read_attachment(j, *step, &p, &n)))
		return rckpt_fail(j->h, rc, __func__, "cannot read the attachment of step %" PRIu64 "%s", *step,
				  rc == RCKPT_ECHECKSUM ? ": it fails its checksum" : "");
	if (p == NULL)
		return rckpt_fail(j->h, -ENOENT, __func__, "step %" PRIu64 " has no attachment", *step);
	*len = n;
	if (n > cap || (n && dst == NULL))
		rc = -ERANGE;
	else if (n)
		memcpy(dst, p, n);
	free(p);
	return rc;
}
