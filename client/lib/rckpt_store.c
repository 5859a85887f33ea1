/*
 * rckpt_store.c — checkpoints in RADOS: a job is a namespace of the pool;
 * chunk objects hold append-only record logs, manifests are objects of
 * their own, and the job object's head moves by compare-and-set after
 * everything else of the step is durable (formats/store.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rckpt_ckenc.h"
#include "rckpt_clock.h"
#include "rckpt_internal.h"
#include "rckpt_store_wire.h"
#include "rckpt_store_internal.h"
#include "rckpt_gpuenc.h"

struct rckpt_restored {
	uint64_t step;
	rckpt_ckdec_t dec;
	uint8_t *attach; /* the step's attachment, decompressed; NULL: none */
	size_t attach_len;
};

/* Objects past this size are refused by the OSD's osd_max_write_size
 * (90 MiB by default) in one write_full: attachments stay under it. */
#define ATTACH_STORED_MAX ((size_t)64 << 20)

/* ---- calls ---- */

/* A read method's reply, allocated by librados, copied into out. */
int rckpt_exec_read(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in,
		     rckpt_buf_t *out)
{
	rados_read_op_t op = rados_create_read_op();
	char *ob = NULL;
	size_t olen = 0;
	int prval = 0, rc;
	if (op == NULL)
		return -ENOMEM;
	rados_read_op_exec(op, "rckpt", method, in ? (const char *)in->p : NULL, in ? in->len : 0, &ob,
			   &olen, &prval);
	rc = rados_read_op_operate(op, j->io, oid, 0);
	if (rc == 0)
		rc = prval;
	if (rc == 0 && olen)
		rc = rckpt_buf_append(out, ob, olen);
	if (ob)
		rados_buffer_free(ob);
	rados_release_read_op(op);
	return rc;
}

int rckpt_exec_write(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in)
{
	rados_write_op_t op = rados_create_write_op();
	int prval = 0, rc;
	if (op == NULL)
		return -ENOMEM;
	rados_write_op_exec(op, "rckpt", method, (const char *)in->p, in->len, &prval);
	rc = rados_write_op_operate(op, j->io, oid, NULL, 0);
	if (rc == 0)
		rc = prval;
	rados_release_write_op(op);
	return rc;
}

int rckpt_read_head(rckpt_job_t *j, uint64_t *head, uint64_t *count)
{
	rckpt_buf_t out = RCKPT_BUF_INIT;
	rckpt_msg_head_t m;
	int rc = rckpt_exec_read(j, RCKPT_STORE_JOB_OID, "head", NULL, &out);
	if (rc == -ENOENT) { /* a job nobody has saved to */
		*head = RCKPT_STORE_NONE;
		*count = 0;
		return 0;
	}
	if (rc == 0)
		rc = rckpt_msg_head_decode(&m, out.p, out.len);
	if (rc == 0) {
		*head = m.head;
		*count = m.count;
	}
	rckpt_buf_free(&out);
	return rc;
}

/* ---- open, close ---- */

int rckpt_take_lock(rckpt_job_t *j, int renew)
{
	struct timeval tv = { (time_t)j->o.lease_s, 0 };
	return rados_lock_exclusive(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, j->cookie, "rckpt writer",
				    &tv, renew ? LIBRADOS_LOCK_FLAG_RENEW : 0);
}

/* The encoder's quality callback, handed on to the trainer's in the
 * public form. */
static int call_quality(void *arg, const rckpt_st_t *params, const float *const *values, double *loss)
{
	rckpt_job_t *j = arg;
	rckpt_tensor_t *t = calloc(params->ntensors ? params->ntensors : 1, sizeof(*t));
	unsigned i, d;
	int rc;

	if (t == NULL)
		return -ENOMEM;
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_st_tensor_t *p = &params->t[i];
		t[i].name = p->name;
		t[i].dtype = RCKPT_F32;
		t[i].ndim = p->ndim;
		for (d = 0; d < p->ndim && d < RCKPT_MAX_DIMS; d++)
			t[i].shape[d] = p->shape[d];
		t[i].data = values[i];
	}
	rc = j->o.quality(j->o.quality_arg, t, params->ntensors, loss);
	free(t);
	if (rc > 0 || !(*loss == *loss)) /* a positive return or a NaN loss: the callback is broken */
		rc = -EINVAL;
	return rc;
}

int rckpt_job_open(rckpt_t *h, rckpt_job_t **out, const char *job, const rckpt_job_opts_t *opts)
{
	rckpt_job_opts_t def = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j;
	uint64_t count;
	int rc;

	*out = NULL;
	rckpt_clear_error(h);
	if (opts == NULL)
		opts = &def;
	if (h->cluster == NULL)
		return rckpt_fail(h, -ENOTCONN, __func__, "not connected");
	if (opts->version < 1 || opts->version > RCKPT_JOB_OPTS_VERSION || job == NULL ||
	    !rckpt_valid_name(job) || opts->eps < 0 ||
	    (opts->version >= 3 && opts->compute > RCKPT_COMPUTE_GPU) ||
	    (opts->version >= 4 && !(opts->quality_eps >= 0)) ||
	    (opts->version >= 5 && opts->partial_block > 65536))
		return rckpt_fail(h, -EINVAL, __func__, "bad job name or options");
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return rckpt_fail(h, -ENOMEM, __func__, "out of memory");
	j->h = h;
	/* what the caller's version has; later fields keep their defaults */
	memcpy(&j->o, opts, opts->version == 1   ? offsetof(rckpt_job_opts_t, mem_budget)
			    : opts->version == 2 ? offsetof(rckpt_job_opts_t, compute)
			    : opts->version == 3 ? offsetof(rckpt_job_opts_t, quality)
			    : opts->version == 4 ? offsetof(rckpt_job_opts_t, partial_block)
						 : sizeof(j->o));
	j->o.version = RCKPT_JOB_OPTS_VERSION;
	if (j->o.compute == RCKPT_COMPUTE_AUTO) {
		const char *env = getenv("RCKPT_COMPUTE");
		if (env && strcmp(env, "cpu") == 0)
			j->o.compute = RCKPT_COMPUTE_CPU;
		else if (env && strcmp(env, "gpu") == 0)
			j->o.compute = RCKPT_COMPUTE_GPU;
		else if (env && *env && strcmp(env, "auto") != 0) {
			free(j);
			return rckpt_fail(h, -EINVAL, __func__,
					  "RCKPT_COMPUTE is '%s'; it must be auto, cpu or gpu", env);
		}
	}
	if (j->o.eps == 0)
		j->o.eps = RCKPT_EPS_DEFAULT;
	if (j->o.chunk_params == 0)
		j->o.chunk_params = (uint64_t)1 << 22;
	if (j->o.lease_s == 0)
		j->o.lease_s = 30;
	if (j->o.inflight == 0)
		j->o.inflight = 16;
	if (j->o.mem_budget == 0)
		j->o.mem_budget = (uint64_t)256 << 20;
	if (j->o.quality_eps == 0)
		j->o.quality_eps = 0.01;
	/* What a save holds besides its appends: one chunk's levels, its
	 * encoded record and that record's append message, the entropy
	 * coder's scratch (rckpt_ckenc_step_stream), with room to spare. The
	 * rest of the budget is for appends in flight, whose messages librados
	 * copies (so each counts twice), and at least one always goes. */
	{
		uint64_t work = 6 * j->o.chunk_params + ((uint64_t)4 << 20);
		const uint64_t need = work + 2 * j->o.chunk_params, have = j->o.mem_budget;
		const uint64_t chunk = j->o.chunk_params;
		if (chunk > ((uint64_t)1 << 31) || have < need) {
			free(j);
			return rckpt_fail(h, -EINVAL, __func__,
					  "a memory budget of %" PRIu64 " MiB is too small for chunks of %" PRIu64
					  " parameters (needs %" PRIu64 " MiB)",
					  have >> 20, chunk, (need + (1 << 20) - 1) >> 20);
		}
		j->io_budget = (j->o.mem_budget - work) / 2;
	}
	snprintf(j->name, sizeof(j->name), "%s", job);
	rc = rados_ioctx_create(h->cluster, h->pool, &j->io);
	if (rc) {
		free(j);
		return rckpt_fail(h, rc, __func__, "cannot open pool %s", h->pool);
	}
	rados_ioctx_set_namespace(j->io, job);
	if (j->o.writer) {
		rckpt_ckenc_opts_t eo;
		snprintf(j->cookie, sizeof(j->cookie), "%" PRIu64 ".%ld", rados_get_instance_id(h->cluster),
			 (long)getpid());
		rc = rckpt_take_lock(j, 0);
		if (rc == -EBUSY || rc == -EEXIST) {
			rckpt_job_close(j);
			return rckpt_fail(h, -EBUSY, __func__,
					  "job %s has another writer (its lock expires %u s after that "
					  "writer's last save if it died)",
					  job, opts->lease_s ? opts->lease_s : 30);
		}
		if (rc) {
			rckpt_job_close(j);
			return rckpt_fail(h, rc, __func__, "cannot lock job %s", job);
		}
		j->locked = 1;
		/* Fencing: a token of this writer's own, claimed before it reads
		 * the head; a writer whose lock lapsed cannot commit after it. */
		{
			struct timespec ts;
			rckpt_buf_t cm = RCKPT_BUF_INIT;
			clock_gettime(CLOCK_REALTIME, &ts);
			j->token = (rados_get_instance_id(h->cluster) << 24) ^ (uint64_t)ts.tv_nsec ^
				   ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)getpid();
			j->token |= 1; /* never 0 */
			rc = rckpt_msg_claim_encode(&cm, j->token);
			if (rc == 0)
				rc = rckpt_exec_write(j, RCKPT_STORE_JOB_OID, "claim", &cm);
			rckpt_buf_free(&cm);
			if (rc) {
				rckpt_job_close(j);
				return rckpt_fail(h, rc, __func__, "cannot claim job %s", job);
			}
		}
		rckpt_ckenc_opts_default(&eo);
		eo.eps = j->o.eps;
		eo.chunk_params = j->o.chunk_params;
		eo.base_every = j->o.base_every;
		eo.partial_block = j->o.partial_block;
		if (j->o.quality) {
			eo.quality = call_quality;
			eo.quality_arg = j;
			eo.quality_eps = j->o.quality_eps;
		}
		if ((rc = rckpt_ckenc_create(&j->enc, &eo))) {
			rckpt_job_close(j);
			return rckpt_fail(h, rc, __func__, "cannot create the encoder");
		}
	}
	if ((rc = rckpt_read_head(j, &j->head, &count))) {
		rckpt_job_close(j);
		return rckpt_fail(h, rc, __func__, "cannot read the head of job %s", job);
	}
	*out = j;
	return 0;
}

static void save_abandon(rckpt_save_t *s);

void rckpt_job_close(rckpt_job_t *j)
{
	if (j == NULL)
		return;
	if (j->pending) /* never committed: its records are past the head */
		save_abandon(j->pending);
	if (j->locked)
		rados_unlock(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, j->cookie);
	rckpt_ckenc_destroy(j->enc);
	rckpt_gpuenc_destroy(j->gpu);
	rckpt_buf_free(&j->attach);
	if (j->io)
		rados_ioctx_destroy(j->io);
	free(j);
}

/* ---- save ---- */

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const rckpt_st_tensor_t *)a)->name, ((const rckpt_st_tensor_t *)b)->name);
}

/* A borrowed view of the caller's tensors, sorted by name. */
static int as_st(rckpt_st_t *st, const rckpt_tensor_t *t, unsigned n)
{
	unsigned i, d;
	memset(st, 0, sizeof(*st));
	st->t = calloc(n ? n : 1, sizeof(*st->t));
	if (st->t == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		rckpt_st_tensor_t *o = &st->t[i];
		if (t[i].name == NULL || t[i].dtype < 1 || t[i].dtype > 3 || t[i].ndim > RCKPT_MAX_DIMS ||
		    (t[i].data == NULL && t[i].ndim))
			return -EINVAL;
		o->name = (char *)t[i].name;
		o->dtype = t[i].dtype;
		o->ndim = t[i].ndim;
		o->n = 1;
		for (d = 0; d < t[i].ndim; d++) {
			o->shape[d] = t[i].shape[d];
			if (o->shape[d] && o->n > UINT64_MAX / o->shape[d])
				return -EINVAL;
			o->n *= o->shape[d];
		}
		o->data = t[i].data;
	}
	st->ntensors = n;
	qsort(st->t, n, sizeof(*st->t), cmp_name);
	for (i = 1; i < n; i++)
		if (strcmp(st->t[i - 1].name, st->t[i].name) == 0)
			return -EINVAL;
	return 0;
}

/* Where this save's passes over the values run (rckpt_job_opts_t.compute).
 * On failure msg says why. */
static int pick_compute(rckpt_job_t *j, const rckpt_st_t *params, const rckpt_st_t *grads, char *msg,
			size_t msglen)
{
	const char *name = NULL;
	int on_dev = rckpt_gpuenc_any_on_device(params, grads, &name), rc;
	unsigned c = j->o.compute;

	if (c == RCKPT_COMPUTE_CPU && on_dev) {
		snprintf(msg, msglen, "tensor '%s' is in GPU memory, and compute=cpu reads host memory only", name);
		return -EINVAL;
	}
	if (c == RCKPT_COMPUTE_GPU || (c == RCKPT_COMPUTE_AUTO && on_dev)) {
		if (j->gpu == NULL && (rc = rckpt_gpuenc_create(&j->gpu))) {
			snprintf(msg, msglen, "%s",
				 rc == -ENODEV ? "compute=gpu, but this build has no CUDA or the machine no GPU"
					       : "cannot set up the GPU");
			return rc;
		}
		rckpt_ckenc_set_gpu(j->enc, j->gpu);
		return 0;
	}
	rckpt_ckenc_set_gpu(j->enc, NULL);
	return 0;
}

/* Runs one write method on objects [0, n) of the chunks, `inflight` at a
 * time; msgs[i] is object i's input. */
int rckpt_chunk_writes(rckpt_job_t *j, const char *method, const rckpt_buf_t *msgs, int same,
		       unsigned n)
{
	rados_completion_t *c = calloc(n ? n : 1, sizeof(*c));
	rados_write_op_t *op = calloc(n ? n : 1, sizeof(*op));
	int *prval = calloc(n ? n : 1, sizeof(int));
	unsigned i, done = 0;
	int rc = 0;

	if (!c || !op || !prval) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		char oid[64];
		if (i >= done + j->o.inflight) { /* bounded: wait for the oldest */
			rados_aio_wait_for_complete(c[done]);
			done++;
		}
		rckpt_store_chunk_oid(oid, sizeof(oid), i);
		op[i] = rados_create_write_op();
		if (op[i] == NULL || rados_aio_create_completion2(NULL, NULL, &c[i])) {
			rc = -ENOMEM;
			n = i + (op[i] != NULL);
			break;
		}
		{
			const rckpt_buf_t *m = &msgs[same ? 0 : i];
			rados_write_op_exec(op[i], "rckpt", method, (const char *)m->p, m->len, &prval[i]);
		}
		rc = rados_aio_write_op_operate(op[i], j->io, c[i], oid, NULL, 0);
		if (rc) {
			n = i + 1;
			break;
		}
	}
	for (i = 0; i < n; i++) {
		int r = 0;
		if (c[i]) {
			rados_aio_wait_for_complete(c[i]);
			r = rados_aio_get_return_value(c[i]);
			if (r == 0)
				r = prval[i];
			rados_aio_release(c[i]);
		}
		if (op[i])
			rados_release_write_op(op[i]);
		if (r && rc == 0)
			rc = r;
	}
out:
	free(c);
	free(op);
	free(prval);
	return rc;
}

static void put_summary(uint8_t *b, const rckpt_ckenc_stats_t *st, uint64_t parent, unsigned nchunks)
{
	rckpt_writer_t w = rckpt_writer(b, SUMMARY_BYTES);
	rckpt_wr_u64(&w, st->raw_bytes);
	rckpt_wr_u64(&w, st->enc_bytes);
	rckpt_wr_u64(&w, parent);
	rckpt_wr_u32(&w, nchunks);
	rckpt_wr_u64(&w, rckpt_d2u(st->quality));
}

/* A save in flight: its manifest and its chunk appends. */
struct rckpt_save {
	rckpt_job_t *j;
	rckpt_t *h;
	uint64_t step;
	rckpt_buf_t manifest;
	rckpt_buf_t attach;    /* the attachment it took from the job */
	rckpt_ckenc_stats_t st;
	unsigned nchunks;
	rckpt_buf_t *msgs;    /* chunk i's append, until it completes */
	rados_completion_t *c;
	rados_write_op_t *op;
	int *prval;
	unsigned issued, done; /* appends started: [0, issued); reaped: [0, done) */
	uint64_t held;         /* bytes of the appends started and not reaped */
	int err;               /* the first append that failed */
	double t0, t1;         /* start; encoded */
	int partial;           /* a sparse partial step */
	int finished;          /* committed or failed: rc, stats and errmsg hold */
	int rc;
	rckpt_save_stats_t stats;
	char errmsg[RCKPT_ERRMSG_MAX];
};

/* Waits for the oldest append in flight and frees its message. */
static void save_reap(rckpt_save_t *s)
{
	unsigned i = s->done++;
	int r;
	rados_aio_wait_for_complete(s->c[i]);
	r = rados_aio_get_return_value(s->c[i]);
	if (r == 0)
		r = s->prval[i];
	if (r && s->err == 0)
		s->err = r;
	rados_aio_release(s->c[i]);
	rados_release_write_op(s->op[i]);
	s->c[i] = NULL;
	s->op[i] = NULL;
	s->held -= s->msgs[i].len;
	rckpt_buf_free(&s->msgs[i]);
}

/* Ends a save's work: waits for its appends and frees its buffers. The
 * handle stays, detached from the job, for rckpt_save_wait. */
static void save_release(rckpt_save_t *s)
{
	unsigned i;
	while (s->done < s->issued)
		save_reap(s);
	for (i = s->issued; s->op && i < s->nchunks; i++)
		if (s->op[i])
			rados_release_write_op(s->op[i]);
	for (i = 0; s->msgs && i < s->nchunks; i++)
		rckpt_buf_free(&s->msgs[i]);
	free(s->msgs);
	free(s->c);
	free(s->op);
	free(s->prval);
	s->msgs = NULL;
	s->c = NULL;
	s->op = NULL;
	s->prval = NULL;
	s->nchunks = s->issued = s->done = 0;
	rckpt_buf_free(&s->manifest);
	rckpt_buf_free(&s->attach);
	if (s->j && s->j->pending == s)
		s->j->pending = NULL;
	s->j = NULL;
	s->finished = 1;
}

static void save_free(rckpt_save_t *s)
{
	if (s == NULL)
		return;
	save_release(s);
	free(s);
}

/* Job closed with s in flight: it never commits. */
static void save_abandon(rckpt_save_t *s)
{
	save_release(s);
	s->rc = -ECANCELED;
	snprintf(s->errmsg, sizeof(s->errmsg), "rckpt_save_wait: the job was closed before this save committed (%s)",
		 rckpt_strerror(-ECANCELED));
}

/* The encoder's sink, first call: the chunk count is known; drop what a
 * crashed writer appended past the head before appending anything. */
static int save_begin(void *arg, uint32_t nchunks)
{
	rckpt_save_t *s = arg;
	rckpt_job_t *j = s->j;
	unsigned n = nchunks ? nchunks : 1;

	s->nchunks = nchunks;
	s->msgs = calloc(n, sizeof(*s->msgs));
	s->c = calloc(n, sizeof(*s->c));
	s->op = calloc(n, sizeof(*s->op));
	s->prval = calloc(n, sizeof(*s->prval));
	if (!s->msgs || !s->c || !s->op || !s->prval)
		return -ENOMEM;
	if (!j->trimmed) {
		rckpt_buf_t tm = RCKPT_BUF_INIT;
		int rc = rckpt_msg_trim_encode(&tm, j->head);
		if (rc == 0)
			rc = rckpt_chunk_writes(j, "trim", &tm, 1, nchunks);
		rckpt_buf_free(&tm);
		if (rc)
			return rc;
		j->trimmed = 1;
	}
	return 0;
}

/* The encoder's sink: chunk i's record. Its append starts at once unless
 * `inflight` appends or the memory budget's share of appended bytes are
 * already out; then the oldest are reaped first. */
static int save_record(void *arg, uint32_t i, rckpt_buf_t *rec)
{
	rckpt_save_t *s = arg;
	rckpt_job_t *j = s->j;
	char oid[64];
	int rc = rckpt_msg_append_encode(&s->msgs[i], rec->p, rec->len);

	rckpt_buf_free(rec);
	if (rc)
		return rc;
	while (s->done < s->issued &&
	       (s->issued - s->done >= j->o.inflight || s->held + s->msgs[i].len > j->io_budget))
		save_reap(s);
	if (s->err)
		return s->err;
	rckpt_store_chunk_oid(oid, sizeof(oid), i);
	s->op[i] = rados_create_write_op();
	if (s->op[i] == NULL || rados_aio_create_completion2(NULL, NULL, &s->c[i]))
		return -ENOMEM;
	rados_write_op_exec(s->op[i], "rckpt", "append", (const char *)s->msgs[i].p, s->msgs[i].len,
			    &s->prval[i]);
	if ((rc = rados_aio_write_op_operate(s->op[i], j->io, s->c[i], oid, NULL, 0))) {
		rados_aio_release(s->c[i]);
		s->c[i] = NULL;
		return rc;
	}
	s->issued = i + 1;
	s->held += s->msgs[i].len;
	return 0;
}

static void save_finish(rckpt_save_t *s);

/* A save that failed after its first append: its records lie past the
 * head. The next save trims them and starts a new base. */
static void save_lost(rckpt_job_t *j)
{
	j->trimmed = 0;
	rckpt_ckenc_restart(j->enc);
}

int rckpt_job_attach(rckpt_job_t *j, const void *data, size_t len)
{
	rckpt_t *h = j->h;
	int rc;

	rckpt_clear_error(h);
	if (!j->o.writer)
		return rckpt_fail(h, -EPERM, __func__, "job %s was opened read-only", j->name);
	if (data == NULL && len)
		return rckpt_fail(h, -EINVAL, __func__, "no bytes to attach");
	rckpt_buf_free(&j->attach);
	if (data == NULL)
		return 0;
	rc = rckpt_attach_encode(&j->attach, RCKPT_STORE_NONE, data, len);
	if (rc == 0 && j->attach.len > ATTACH_STORED_MAX)
		rc = -EFBIG;
	if (rc) {
		rckpt_buf_free(&j->attach);
		return rckpt_fail(h, rc, __func__,
				  "cannot attach %zu bytes (at most 1 GiB, and 64 MiB once compressed)", len);
	}
	return 0;
}

/* Restores step (all of it, or the chunks holding names or ranges); the
 * step's attachment too when attach. Below, with the restore calls. */
static int restore_sel(rckpt_job_t *j, uint64_t step, const char *const *names, unsigned nnames,
		       const rckpt_range_t *ranges, unsigned nranges, rckpt_restored_t **outp,
		       rckpt_restore_stats_t *rst, int attach, const char *fn);

/* A full save (p NULL) or a partial one. */
static int save_start(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t, unsigned n,
		      const rckpt_tensor_t *g, unsigned ng, const rckpt_partial_t *p,
		      rckpt_save_t **outp, const char *fn)
{
	rckpt_t *h = j->h;
	rckpt_st_t params, grads;
	rckpt_save_t *s = NULL;
	char msg[256] = "";
	const char *dev_name = NULL;
	int rc;

	rckpt_clear_error(h);
	*outp = NULL;
	memset(&params, 0, sizeof(params));
	memset(&grads, 0, sizeof(grads));
	if (!j->o.writer)
		return rckpt_fail(h, -EPERM, fn, "job %s was opened read-only", j->name);
	if (p && j->o.partial_block == 0)
		return rckpt_fail(h, -EINVAL, fn, "job %s was opened without partial_block", j->name);
	if (p && (!(p->fraction > 0 && p->fraction <= 1) || p->select > RCKPT_SELECT_RANDOM))
		return rckpt_fail(h, -EINVAL, fn, "a partial save's fraction is in (0, 1], its select one of the three");
	if (j->pending) /* back-pressure: one save in flight per job; its own
			   result waits in its handle */
		save_finish(j->pending);
	rckpt_clear_error(h);
	if (step == RCKPT_STORE_NONE || (j->head != RCKPT_STORE_NONE && step <= j->head))
		return rckpt_fail(h, -EINVAL, fn, "step %" PRIu64 " is not after the head %" PRIu64,
				  step, j->head);
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return rckpt_fail(h, -ENOMEM, fn, "out of memory");
	s->j = j;
	s->h = h;
	s->step = step;
	s->t0 = rckpt_now_s();
	s->attach = j->attach; /* it goes with this save, whatever happens */
	memset(&j->attach, 0, sizeof(j->attach));
	if ((rc = as_st(&params, t, n)) || (g && ng && (rc = as_st(&grads, g, ng)))) {
		rc = rckpt_fail(h, rc, fn, "bad tensors (names, dtypes, shapes)");
		goto fail;
	}
	if (p && rckpt_gpuenc_any_on_device(&params, g && ng ? &grads : NULL, &dev_name)) {
		rc = rckpt_fail(h, -EINVAL, fn, "tensor '%s' is in GPU memory; partial saves read host memory",
				dev_name);
		goto fail;
	}
	if ((rc = pick_compute(j, &params, g && ng ? &grads : NULL, msg, sizeof(msg)))) {
		rc = rckpt_fail(h, rc, fn, "%s", msg);
		goto fail;
	}
	if ((rc = rckpt_take_lock(j, 1))) {
		rc = rckpt_fail(h, rc, fn, "lost the writer lock of job %s", j->name);
		goto fail;
	}
	if (!j->resume_tried) {
		/* A new writer of a job with a committed head continues its
		 * chain: the head's levels, materialized in the OSDs, become the
		 * parents of this step's deltas. When they cannot be had, or the
		 * model is another one, this step is a base as it would be
		 * anyway. */
		rckpt_restored_t *r = NULL;
		j->resume_tried = 1;
		if (j->head != RCKPT_STORE_NONE &&
		    restore_sel(j, j->head, NULL, 0, NULL, 0, &r, NULL, 0, fn) == 0)
			rckpt_ckenc_resume(j->enc, &r->dec);
		rckpt_restored_free(r);
		rckpt_clear_error(h);
	}
	{
		/* Chunks are encoded and appended as they come: the encoder never
		 * holds the step, and appends wait when the budget is out. */
		const rckpt_ckenc_sink_t sink = { save_begin, save_record, s };
		if (p && rckpt_ckenc_partial_ready(j->enc)) {
			const rckpt_ckenc_partial_t cp = { p->fraction, p->select, p->seed };
			rc = rckpt_ckenc_step_partial(j->enc, &sink, &s->manifest, &s->st, &params,
						      g && ng ? &grads : NULL, step, &cp, msg, sizeof(msg));
			s->partial = 1;
			if (rc == -ERANGE) { /* over eps with the old codebooks: a full save */
				s->partial = 0;
				msg[0] = '\0';
				memset(&s->st, 0, sizeof(s->st));
				rc = rckpt_ckenc_step_stream(j->enc, &sink, &s->manifest, &s->st, &params,
							     g && ng ? &grads : NULL, step, msg, sizeof(msg));
			}
		} else {
			rc = rckpt_ckenc_step_stream(j->enc, &sink, &s->manifest, &s->st, &params,
						     g && ng ? &grads : NULL, step, msg, sizeof(msg));
		}
	}
	free(params.t);
	free(grads.t);
	params.t = grads.t = NULL;
	if (rc) {
		if (s->issued)
			save_lost(j);
		if (s->err)
			rc = rckpt_fail(h, rc, fn, "cannot append step %" PRIu64 " to its chunks", step);
		else
			rc = rckpt_fail(h, rc, fn, "%s", msg[0] ? msg : "cannot encode");
		goto fail;
	}
	s->t1 = rckpt_now_s(); /* from here on the caller's tensors are free */
	j->pending = s;
	*outp = s;
	return 0;
fail:
	free(params.t);
	free(grads.t);
	save_free(s);
	return rc;
}

int rckpt_job_save_async(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t, unsigned n,
			 const rckpt_tensor_t *g, unsigned ng, rckpt_save_t **outp)
{
	return save_start(j, step, t, n, g, ng, NULL, outp, __func__);
}

int rckpt_job_save_partial_async(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t, unsigned n,
				 const rckpt_tensor_t *g, unsigned ng, const rckpt_partial_t *p,
				 rckpt_save_t **outp)
{
	if (p == NULL) {
		*outp = NULL;
		return rckpt_fail(j->h, -EINVAL, __func__, "no partial-save parameters");
	}
	return save_start(j, step, t, n, g, ng, p, outp, __func__);
}

/* Finishes s: its appends, manifest and commit; keeps the result in it. */
static void save_finish(rckpt_save_t *s)
{
	rckpt_job_t *j = s->j;
	rckpt_t *h = j->h;
	rckpt_buf_t commit = RCKPT_BUF_INIT;
	uint8_t summary[SUMMARY_BYTES];
	char oid[64];
	int rc = 0;

	while (s->done < s->issued)
		save_reap(s);
	if ((rc = s->err)) {
		rc = rckpt_fail(h, rc, __func__, "cannot append step %" PRIu64 " to its chunks", s->step);
		goto done;
	}
	if (s->attach.len) {
		rckpt_writer_t w = rckpt_writer(s->attach.p + 8, 8);
		rckpt_wr_u64(&w, s->step);
		rckpt_store_attach_oid(oid, sizeof(oid), s->step);
		rc = rados_write_full(j->io, oid, (const char *)s->attach.p, s->attach.len);
		if (rc) {
			rc = rckpt_fail(h, rc, __func__, "cannot write the attachment of step %" PRIu64,
					s->step);
			goto done;
		}
	}
	rckpt_store_manifest_oid(oid, sizeof(oid), s->step);
	rc = rados_write_full(j->io, oid, (const char *)s->manifest.p, s->manifest.len);
	if (rc) {
		rc = rckpt_fail(h, rc, __func__, "cannot write the manifest of step %" PRIu64, s->step);
		goto done;
	}
	{
		rckpt_manifest_t mf;
		uint64_t parent = RCKPT_STORE_NONE;
		if (rckpt_manifest_decode(&mf, s->manifest.p, s->manifest.len) == 0) {
			parent = mf.parent;
			rckpt_manifest_free(&mf);
		}
		s->st.enc_bytes += s->attach.len; /* what the step stores, attachment included */
		put_summary(summary, &s->st, parent, s->nchunks);
	}
	{
		rckpt_msg_commit_t c = { j->head, s->step, { summary, sizeof(summary) }, j->token };
		rc = rckpt_msg_commit_encode(&commit, &c);
		if (rc == 0)
			rc = rckpt_exec_write(j, RCKPT_STORE_JOB_OID, "commit", &commit);
	}
	if (rc) {
		rc = rckpt_fail(h, rc, __func__, "cannot commit step %" PRIu64 "%s", s->step,
				rc == -ESTALE ? " (the head moved: another writer)" : "");
		goto done;
	}
	j->head = s->step;
	s->stats.raw_bytes = s->st.raw_bytes;
	s->stats.enc_bytes = s->st.enc_bytes;
	s->stats.nchunks = s->nchunks;
	s->stats.is_base = s->st.is_base;
	s->stats.quality = s->st.quality;
	s->stats.is_partial = s->partial;
	s->stats.blocks = s->st.blocks;
	s->stats.blocks_saved = s->st.blocks_saved;
	s->stats.t_encode = s->t1 - s->t0;
	s->stats.t_write = rckpt_now_s() - s->t1;
done:
	if (rc) {
		save_lost(j);
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", h->errmsg);
	}
	s->rc = rc;
	rckpt_buf_free(&commit);
	save_release(s);
}

int rckpt_save_wait(rckpt_save_t *s, rckpt_save_stats_t *sst)
{
	rckpt_t *h = s->h;
	int rc;

	rckpt_clear_error(h);
	if (!s->finished)
		save_finish(s);
	rc = s->rc;
	if (rc)
		snprintf(h->errmsg, sizeof(h->errmsg), "%s", s->errmsg);
	else if (sst)
		*sst = s->stats;
	free(s);
	return rc;
}

int rckpt_job_save(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t, unsigned n,
		   const rckpt_tensor_t *g, unsigned ng, rckpt_save_stats_t *sst)
{
	rckpt_save_t *s;
	int rc = rckpt_job_save_async(j, step, t, n, g, ng, &s);
	return rc ? rc : rckpt_save_wait(s, sst);
}

int rckpt_job_save_partial(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t, unsigned n,
			   const rckpt_tensor_t *g, unsigned ng, const rckpt_partial_t *p,
			   rckpt_save_stats_t *sst)
{
	rckpt_save_t *s;
	int rc = rckpt_job_save_partial_async(j, step, t, n, g, ng, p, &s);
	return rc ? rc : rckpt_save_wait(s, sst);
}

/* ---- restore ---- */

typedef struct mat {
	rckpt_buf_t start; /* the base to resume from, if any */
	rckpt_buf_t rec;   /* the final base record */
	int done;
	int skip;          /* not wanted (a partial restore) */
} mat_t;

/* The step's attachment, decompressed into *out; none: *out NULL, 0. */
static int read_attachment(rckpt_job_t *j, uint64_t step, uint8_t **out, size_t *len)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	uint64_t size = 0;
	char oid[64];
	int rc, got;

	*out = NULL;
	*len = 0;
	rckpt_store_attach_oid(oid, sizeof(oid), step);
	rc = rados_stat(j->io, oid, &size, NULL);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (size > ATTACH_STORED_MAX || size < RCKPT_ATTACH_HEADER)
		return -EBADMSG;
	if ((rc = rckpt_buf_reserve(&b, (size_t)size)))
		return rc;
	got = rados_read(j->io, oid, (char *)b.p, (size_t)size, 0);
	rc = got < 0 ? got : (uint64_t)got == size ? 0 : -EBADMSG;
	if (rc == 0)
		rc = rckpt_attach_decode(out, len, step, b.p, (size_t)size);
	rckpt_buf_free(&b);
	return rc;
}


int rckpt_job_restore(rckpt_job_t *j, uint64_t step, rckpt_restored_t **outp, rckpt_restore_stats_t *rst)
{
	return restore_sel(j, step, NULL, 0, NULL, 0, outp, rst, 1, __func__);
}

int rckpt_job_restore_tensors(rckpt_job_t *j, uint64_t step, const char *const *names,
			      unsigned nnames, rckpt_restored_t **outp, rckpt_restore_stats_t *rst)
{
	return restore_sel(j, step, names, nnames, NULL, 0, outp, rst, 1, __func__);
}

int rckpt_job_restore_ranges(rckpt_job_t *j, uint64_t step, const rckpt_range_t *ranges,
			     unsigned n, rckpt_restored_t **outp, rckpt_restore_stats_t *rst)
{
	if (n == 0 || ranges == NULL) {
		*outp = NULL;
		return rckpt_fail(j->h, -EINVAL, __func__, "no ranges");
	}
	return restore_sel(j, step, NULL, 0, ranges, n, outp, rst, 1, __func__);
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

static int restore_sel(rckpt_job_t *j, uint64_t step, const char *const *names, unsigned nnames,
		       const rckpt_range_t *ranges, unsigned nranges, rckpt_restored_t **outp,
		       rckpt_restore_stats_t *rst, int attach, const char *fn)
{
	rckpt_t *h = j->h;
	rckpt_restored_t *r = NULL;
	rckpt_manifest_t mf;
	rckpt_buf_t man = RCKPT_BUF_INIT;
	mat_t *m = NULL;
	const uint8_t **recs = NULL;
	size_t *lens = NULL;
	uint64_t head, count, size = 0, wire = 0;
	unsigned i, calls = 0, left, restarts = 0, bad_chunk = UINT_MAX;
	char oid[64];
	double t0 = rckpt_now_s();
	int rc;

	rckpt_clear_error(h);
	*outp = NULL;
	memset(&mf, 0, sizeof(mf));
	if ((rc = rckpt_read_head(j, &head, &count)))
		return rckpt_fail(h, rc, fn, "cannot read the head of job %s", j->name);
	if (step == RCKPT_LATEST)
		step = head;
	if (head == RCKPT_STORE_NONE || step > head)
		return rckpt_fail(h, -ENOENT, fn, "job %s has no committed step %" PRIu64, j->name,
				  step);
	rckpt_store_manifest_oid(oid, sizeof(oid), step);
	rc = rados_stat(j->io, oid, &size, NULL);
	if (rc == 0 && size > ((uint64_t)1 << 30))
		rc = -EFBIG;
	if (rc == 0)
		rc = rckpt_buf_reserve(&man, size ? (size_t)size : 1);
	if (rc == 0) {
		int got = rados_read(j->io, oid, (char *)man.p, (size_t)size, 0);
		rc = got < 0 ? got : (uint64_t)got == size ? 0 : -EBADMSG;
		man.len = (size_t)size;
	}
	if (rc == 0)
		rc = rckpt_manifest_decode(&mf, man.p, man.len);
	if (rc == -ENOENT) {
		rc = rckpt_fail(h, rc, fn, "job %s has no step %" PRIu64 " (never saved, or dropped)",
				j->name, step);
		goto done;
	}
	if (rc) {
		rc = rckpt_fail(h, rc, fn, "cannot read the manifest of step %" PRIu64, step);
		goto done;
	}
	m = calloc(mf.nchunks ? mf.nchunks : 1, sizeof(*m));
	recs = calloc(mf.nchunks ? mf.nchunks : 1, sizeof(*recs));
	lens = calloc(mf.nchunks ? mf.nchunks : 1, sizeof(*lens));
	if (!m || !recs || !lens) {
		rc = rckpt_fail(h, -ENOMEM, fn, "out of memory");
		goto done;
	}
	left = mf.nchunks;
	if (nnames || nranges) { /* only the chunks that hold these */
		for (i = 0; i < mf.nchunks; i++)
			m[i].done = 1;
		left = 0;
		for (i = 0; i < nnames + nranges; i++) {
			const char *name = i < nnames ? names[i] : ranges[i - nnames].name;
			uint64_t numel = 1, first = 0, count = UINT64_MAX;
			unsigned t, d;
			for (t = 0; name && t < mf.ntensors && strcmp(mf.t[t].name, name) != 0; t++)
				;
			if (name == NULL || t == mf.ntensors) {
				rc = rckpt_fail(h, -ENOENT, fn, "step %" PRIu64 " has no tensor '%s'", step,
						name ? name : "(null)");
				goto done;
			}
			for (d = 0; d < mf.t[t].ndim; d++)
				numel *= mf.t[t].shape[d];
			if (i >= nnames) {
				first = ranges[i - nnames].first;
				count = ranges[i - nnames].count;
				if (first > numel || count > numel - first) {
					rc = rckpt_fail(h, -ERANGE, fn,
							"range [%" PRIu64 ", +%" PRIu64 ") is past tensor '%s' (%" PRIu64
							" elements)",
							first, count, name, numel);
					goto done;
				}
			} else {
				count = numel;
			}
			want_chunks(&mf, m, &left, t, first, count);
		}
		for (i = 0; i < mf.nchunks; i++)
			m[i].skip = m[i].done;
	}
	/* Rounds of parallel materialize calls until every chunk is done. */
	while (left > 0 && rc == 0) {
		rados_completion_t *c = calloc(mf.nchunks, sizeof(*c));
		rados_read_op_t *op = calloc(mf.nchunks, sizeof(*op));
		char **ob = calloc(mf.nchunks, sizeof(*ob));
		size_t *olen = calloc(mf.nchunks, sizeof(*olen));
		int *prval = calloc(mf.nchunks, sizeof(int));
		rckpt_buf_t *in = calloc(mf.nchunks, sizeof(*in));
		if (!c || !op || !ob || !olen || !prval || !in)
			rc = -ENOMEM;
		for (i = 0; i < mf.nchunks && rc == 0; i++) {
			rckpt_msg_materialize_t q = { step, 0, { m[i].start.p, m[i].start.len } };
			if (m[i].done)
				continue;
			rckpt_store_chunk_oid(oid, sizeof(oid), i);
			rc = rckpt_msg_materialize_encode(&in[i], &q);
			op[i] = rados_create_read_op();
			if (rc == 0 && (op[i] == NULL || rados_aio_create_completion2(NULL, NULL, &c[i])))
				rc = -ENOMEM;
			if (rc)
				break;
			rados_read_op_exec(op[i], "rckpt", "materialize", (const char *)in[i].p, in[i].len,
					   &ob[i], &olen[i], &prval[i]);
			rc = rados_aio_read_op_operate(op[i], j->io, c[i], oid, 0);
			calls++;
		}
		for (i = 0; i < mf.nchunks; i++) {
			int e = 0;
			if (c && c[i]) {
				rados_aio_wait_for_complete(c[i]);
				e = rados_aio_get_return_value(c[i]);
				if (e == 0)
					e = prval[i];
				rados_aio_release(c[i]);
			}
			if (op && op[i])
				rados_release_read_op(op[i]);
			if (e == -ESTALE && m[i].start.len && restarts < 8) {
				/* compacted since the last round: start this chunk over */
				m[i].start.len = 0;
				restarts++;
				e = 0;
			} else if (e == 0 && c && c[i]) {
				rckpt_msg_materialized_t a;
				wire += olen[i];
				e = rckpt_msg_materialized_decode(&a, (const uint8_t *)ob[i], olen[i]);
				if (e == 0) {
					rckpt_buf_t *dst = a.done ? &m[i].rec : &m[i].start;
					dst->len = 0;
					e = rckpt_buf_append(dst, a.record.p, a.record.len);
					if (a.done) {
						m[i].done = 1;
						left--;
					}
				}
			}
			if (ob && ob[i])
				rados_buffer_free(ob[i]);
			if (in)
				rckpt_buf_free(&in[i]);
			if (e && rc == 0) {
				rc = e;
				bad_chunk = i;
			}
		}
		free(c);
		free(op);
		free(ob);
		free(olen);
		free(prval);
		free(in);
	}
	if (rc) {
		if (bad_chunk != UINT_MAX) {
			rckpt_store_chunk_oid(oid, sizeof(oid), bad_chunk);
			rc = rckpt_fail(h, rc, fn, "cannot materialize step %" PRIu64 " from %s/%s", step, j->name,
					oid);
		} else {
			rc = rckpt_fail(h, rc, fn, "cannot materialize step %" PRIu64, step);
		}
		goto done;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		rc = rckpt_fail(h, -ENOMEM, fn, "out of memory");
		goto done;
	}
	for (i = 0; i < mf.nchunks; i++) {
		recs[i] = m[i].skip ? NULL : m[i].rec.p;
		lens[i] = m[i].skip ? 0 : m[i].rec.len;
	}
	r->step = step;
	if (attach && (rc = read_attachment(j, step, &r->attach, &r->attach_len))) {
		rc = rckpt_fail(h, rc, fn, "cannot read the attachment of step %" PRIu64 "%s", step,
				rc == RCKPT_ECHECKSUM ? ": it fails its checksum" : "");
		rckpt_restored_free(r);
		r = NULL;
		goto done;
	}
	rc = rckpt_ckdec_step(&r->dec, man.p, man.len, recs, lens);
	if (rc) {
		rc = rckpt_fail(h, rc, fn, "step %" PRIu64 " does not decode%s", step,
				rc == RCKPT_ECHECKSUM ? ": a chunk's digest differs from its manifest" : "");
		rckpt_restored_free(r);
		r = NULL;
		goto done;
	}
	if (rst) {
		rst->wire_bytes = wire + man.len;
		rst->calls = calls;
		rst->seconds = rckpt_now_s() - t0;
	}
	*outp = r;
done:
	for (i = 0; m && i < mf.nchunks; i++) {
		rckpt_buf_free(&m[i].start);
		rckpt_buf_free(&m[i].rec);
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

int rckpt_restored_read(const rckpt_restored_t *r, unsigned i, void *dst, size_t cap)
{
	const rckpt_mf_tensor_t *t;
	uint64_t n = 1;
	unsigned d;
	float *f;
	int rc;
	if (i >= r->dec.mf.ntensors)
		return -EINVAL;
	t = &r->dec.mf.t[i];
	for (d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	if (cap < n * rckpt_dtype_size(t->dtype))
		return -ERANGE;
	f = malloc(n ? (size_t)n * 4 : 4);
	if (f == NULL)
		return -ENOMEM;
	rc = rckpt_ckdec_tensor_f32(&r->dec, i, f);
	if (rc == 0)
		rckpt_narrow_from_f32(dst, f, t->dtype, n);
	free(f);
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

/* ---- steps ---- */

int rckpt_job_steps(rckpt_job_t *j, uint64_t after, rckpt_step_info_t *out, unsigned cap,
		    unsigned *n, int *more)
{
	rckpt_buf_t in = RCKPT_BUF_INIT, rep = RCKPT_BUF_INIT;
	rckpt_msg_list_t l = { after, cap > RCKPT_STORE_LIST_MAX ? RCKPT_STORE_LIST_MAX : cap };
	rckpt_msg_stepsum_reader_t rd;
	uint64_t step;
	rckpt_blob_t sum;
	int rc;

	rckpt_clear_error(j->h);
	*n = 0;
	*more = 0;
	if (cap == 0)
		return rckpt_fail(j->h, -EINVAL, __func__, "no room");
	rc = rckpt_msg_list_encode(&in, &l);
	if (rc == 0)
		rc = rckpt_exec_read(j, RCKPT_STORE_JOB_OID, "list", &in, &rep);
	if (rc == -ENOENT)
		rc = 0; /* a new job: nothing yet */
	else if (rc == 0 && (rc = rckpt_msg_stepsum_open(&rd, rep.p, rep.len)) == 0) {
		while ((rc = rckpt_msg_stepsum_next(&rd, &step, &sum)) == 1) {
			rckpt_step_info_t *s = &out[(*n)++];
			rckpt_reader_t r = rckpt_reader(sum.p, sum.len);
			memset(s, 0, sizeof(*s));
			s->step = step;
			s->raw_bytes = rckpt_rd_u64(&r);
			s->enc_bytes = rckpt_rd_u64(&r);
			s->parent = rckpt_rd_u64(&r);
			s->nchunks = rckpt_rd_u32(&r);
		}
		*more = rd.more;
	}
	rckpt_buf_free(&in);
	rckpt_buf_free(&rep);
	return rc ? rckpt_fail(j->h, rc, __func__, "cannot list the steps of job %s", j->name) : 0;
}
