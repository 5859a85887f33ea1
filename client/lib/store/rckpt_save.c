/*
 * rckpt_save.c — saving a step: the trainer's tensors handed to the
 * encoder, its records appended to the chunk objects as they come (a
 * bounded number of bytes in flight), then the manifest, then the commit
 * that moves the head. Asynchronous: the caller's tensors are free once the
 * encoder is done with them (rckpt_save_wait).
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
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

/* ---- save ---- */

/* Where this save's passes over the values run (rckpt_job_opts_t.compute).
 * On failure msg says why. */
static int pick_compute(rckpt_job_t *j, const rckpt_tset_t *params, const rckpt_tset_t *grads, char *msg,
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

/* ---- segments (store.md "Segments") ---- */

/* What a chunk's next record may take, for the roll: the largest this
 * writer appended to it, or before any, 4 bytes per parameter. */
static uint64_t record_estimate(const rckpt_job_t *j, unsigned c, int whole)
{
	const uint64_t raw = 4 * j->o.chunk_params + ((uint64_t)64 << 10);
	/* an exact step keeps its values whole: about its raw bytes */
	return whole || !j->rec_max[c] ? (j->rec_max[c] > raw ? j->rec_max[c] : raw) : j->rec_max[c];
}

int rckpt_seg_grow(rckpt_job_t *j, unsigned n)
{
	uint64_t *b, *m, *h;
	unsigned c;
	if (n <= j->seg_n)
		return 0;
	if ((b = realloc(j->seg_bytes, n * sizeof(*b))))
		j->seg_bytes = b;
	if (b && (m = realloc(j->rec_max, n * sizeof(*m))))
		j->rec_max = m;
	else
		return -ENOMEM;
	if ((h = realloc(j->head_bytes, n * sizeof(*h))) == NULL)
		return -ENOMEM;
	j->head_bytes = h;
	for (c = j->seg_n; c < n; c++)
		j->seg_bytes[c] = j->rec_max[c] = j->head_bytes[c] = 0;
	j->seg_n = n;
	return 0;
}

/* Sizes chunks [from, n) of the writer's segment (one that does not exist
 * has none), growing the arrays to n. */
static int seg_measure(rckpt_job_t *j, unsigned from, unsigned n)
{
	unsigned c;
	int rc = rckpt_seg_grow(j, n);
	if (rc)
		return rc;
	for (c = from; c < n; c++) {
		char oid[64];
		uint64_t size = 0;
		int rc;
		rckpt_store_segment_oid(oid, sizeof(oid), c, j->seg);
		rc = j->io->ops->stat(j->io, oid, &size);
		if (rc && rc != -ENOENT)
			return rc;
		j->seg_bytes[c] = size;
		j->head_bytes[c] = 0; /* a head record in size, if any, counts as records */
	}
	return 0;
}

/* Where the head's records are, and how full its chunk objects are
 * (records a crashed writer left past the head count too: an early roll,
 * never a late one). */
static int seg_learn(rckpt_job_t *j)
{
	rckpt_store_summary_t sum;
	int rc;
	j->seg = RCKPT_STORE_NONE;
	j->seg_n = 0;
	j->seg_records = 0;
	if (j->head != RCKPT_STORE_NONE) {
		rckpt_buf_t out = RCKPT_BUF_INIT;
		rckpt_msg_head_t tip;
		char oid[64];
		if ((rc = rckpt_step_summary(j, j->head, &sum)))
			return rc;
		j->seg = sum.segment;
		if ((rc = seg_measure(j, 0, sum.nchunks)))
			return rc;
		/* its records: what its chunk 0 holds (every step has one in each) */
		rckpt_store_segment_oid(oid, sizeof(oid), 0, j->seg);
		rc = rckpt_exec_read(j, oid, "tip", NULL, &out);
		if (rc == 0 && (rc = rckpt_msg_head_decode(&tip, out.p, out.len)) == 0)
			j->seg_records = tip.count;
		rckpt_buf_free(&out);
		if (rc && rc != -ENOENT)
			return rc;
	}
	j->seg_known = 1;
	return 0;
}

/* Whether the next step goes to a new segment: some chunk's object could
 * pass the cap with its next record, or its chunk objects hold as many
 * records as a segment may (what a method reads of an object's index
 * stays bounded: store.md "Segments"). */
static int seg_full(const rckpt_job_t *j, int whole)
{
	unsigned c;
	if (j->seg_n && j->seg_records >= RCKPT_STORE_SEGMENT_RECORDS)
		return 1;
	for (c = 0; c < j->seg_n; c++)
		if (j->seg_bytes[c] + record_estimate(j, c, whole) > j->seg_cap)
			return 1;
	return 0;
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
	uint64_t seg;          /* the segment its records go to */
	int roll;              /* it begins that segment */
	int relaid;            /* its tensors differ from the step it follows:
				  a new chunk layout, which begins a segment */
	rckpt_buf_t *msgs;     /* chunk i's append, until it completes */
	rckpt_io_window_t win; /* the appends in flight */
	unsigned issued;       /* appends started: [0, issued) */
	int err;               /* the first append that failed */
	int trim_err;          /* the trim before the first append failed */
	double t0, t1;         /* start; encoded */
	int partial;           /* a sparse partial step */
	int whole;             /* an exact step whose records keep every value
				  (version 5, rckpt_ckenc_step_exact): no
				  residuals */
	int exact;             /* a step stored bit-exact: msgs[nchunks + i] is
				  chunk i's residual put */
	const rckpt_tset_t *params; /* the trainer's tensors, while encoding */
	uint64_t exact_bytes;  /* the residuals' */
	int finished;          /* committed or failed: rc, stats and errmsg hold */
	int rc;
	rckpt_save_stats_t stats;
	char errmsg[RCKPT_ERRMSG_MAX];
};

/* An append ended: its message goes. */
static void save_reaped(void *arg, unsigned i, int rc)
{
	rckpt_save_t *s = arg;
	if (rc && s->err == 0)
		s->err = rc;
	rckpt_buf_free(&s->msgs[i]);
}

/* Ends a save's work: waits for its appends and frees its buffers. The
 * handle stays, detached from the job, for rckpt_save_wait. */
static void save_release(rckpt_save_t *s)
{
	unsigned i;
	rckpt_io_window_free(&s->win);
	for (i = 0; s->msgs && i < (s->exact ? 2 : 1) * s->nchunks; i++)
		rckpt_buf_free(&s->msgs[i]);
	free(s->msgs);
	s->msgs = NULL;
	s->nchunks = s->issued = 0;
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
	s->msgs = calloc(s->exact ? 2 * (size_t)n : n, sizeof(*s->msgs));
	if (s->msgs == NULL ||
	    rckpt_io_window_init(&s->win, j->io, j->o.inflight < n ? j->o.inflight : n, j->io_budget,
				 save_reaped, s))
		return -ENOMEM;
	if (!j->trimmed) {
		rckpt_buf_t tm = RCKPT_BUF_INIT;
		int rc = rckpt_head_rebase(j, j->head); /* a rewind onto a compacted line */
		if (rc)
			return s->trim_err = rc;
		rc = rckpt_msg_trim_encode(&tm, j->token, j->head);
		if (rc == 0) /* the head segment's chunks, in its own layout */
			rc = rckpt_chunk_writes(j, j->seg, "trim", &tm, 1,
						s->roll && j->seg_n ? j->seg_n : nchunks);
		rckpt_buf_free(&tm);
		if (rc)
			return s->trim_err = rc;
		j->trimmed = 1;
	}
	if (s->roll) {
		/* A new segment, named by this step: whatever a writer left
		 * under its names goes first, and our token with it fences any
		 * late append of theirs. */
		rckpt_buf_t tm = RCKPT_BUF_INIT;
		unsigned c;
		int rc = rckpt_msg_trim_encode(&tm, j->token, RCKPT_STORE_NONE);
		if (rc == 0)
			rc = rckpt_chunk_writes(j, s->step, "trim", &tm, 1, nchunks);
		rckpt_buf_free(&tm);
		if (rc)
			return s->trim_err = rc;
		j->seg = s->step;
		if (nchunks > j->seg_n && (rc = seg_measure(j, j->seg_n, nchunks)))
			return rc;
		j->seg_n = nchunks; /* the segment's layout: this step's */
		for (c = 0; c < j->seg_n; c++)
			j->seg_bytes[c] = j->rec_max[c] = j->head_bytes[c] = 0;
		j->seg_records = 0;
	} else if (nchunks > j->seg_n) {
		int rc = seg_measure(j, j->seg_n, nchunks); /* a model with more chunks */
		if (rc)
			return rc;
	}
	s->seg = j->seg;
	return 0;
}

/* The encoder's sink: chunk i's record. Its append starts at once unless
 * `inflight` appends or the memory budget's share of appended bytes are
 * already out; then the oldest are reaped first. */
static int save_record(void *arg, uint32_t i, rckpt_buf_t *rec, rckpt_buf_t *head)
{
	rckpt_save_t *s = arg;
	rckpt_job_t *j = s->j;
	const uint64_t len = rec->len;
	rckpt_buf_t res = RCKPT_BUF_INIT;
	char oid[64];
	int rc = 0;

	/* An exact step's residual, from the base record and the trainer's
	 * values, before the record goes. */
	if (s->exact && !s->whole &&
	    (rc = rckpt_exact_build(&res, s->step, i, rec->p, rec->len, s->params, NULL)) == 0 &&
	    res.len)
		rc = rckpt_msg_put_encode(&s->msgs[s->nchunks + i], j->token, s->step, res.p, res.len);
	s->exact_bytes += res.len;
	rckpt_buf_free(&res);
	if (rc == 0) {
		const rckpt_msg_append_t m = { j->token, { rec->p, rec->len }, { head->p, head->len } };
		rc = rckpt_msg_append_head_encode(&s->msgs[i], &m);
	}
	rckpt_buf_free(rec);
	if (rc)
		return rc;
	if (i < j->seg_n) {
		/* the head record is the chunk's last bytes until the next
		 * append takes its place (store.md "Head records") */
		j->seg_bytes[i] += len + head->len - j->head_bytes[i];
		j->head_bytes[i] = head->len;
		if (len > j->rec_max[i])
			j->rec_max[i] = len;
		if (head->len > j->rec_max[i]) /* the roll's estimate covers a head record too */
			j->rec_max[i] = head->len;
	}
	rckpt_buf_free(head);
	if (i == 0)
		j->seg_records++;
	rckpt_io_window_room(&s->win, s->msgs[i].len);
	if (s->err)
		return s->err;
	rckpt_store_segment_oid(oid, sizeof(oid), i, s->seg);
	if ((rc = rckpt_io_window_exec(&s->win, oid, "rckpt", "append", s->msgs[i].p, s->msgs[i].len,
				       NULL, i)))
		return s->err = rc;
	s->issued = i + 1;
	if (s->exact && s->msgs[s->nchunks + i].len) {
		rckpt_io_window_room(&s->win, s->msgs[s->nchunks + i].len);
		if (s->err)
			return s->err;
		rckpt_store_exact_oid(oid, sizeof(oid), s->step, i);
		if ((rc = rckpt_io_window_exec(&s->win, oid, "rckpt", "put", s->msgs[s->nchunks + i].p,
					       s->msgs[s->nchunks + i].len, NULL, s->nchunks + i)))
			return s->err = rc;
	}
	return 0;
}

static void save_finish(rckpt_save_t *s);

/* After a commit: every compact_every-th one compacts the job, so the
 * head's chain stays short (store.md "Compaction"). The step stays
 * committed whatever it gives; one that failed is tried again
 * compact_every commits on. Its records moved: the segment's sizes are
 * learnt again. */
static void after_commit(rckpt_job_t *j)
{
	char msg[RCKPT_ERRMSG_MAX];
	if (j->o.compact_every == 0 || ++j->since_compact < j->o.compact_every)
		return;
	snprintf(msg, sizeof(msg), "%s", j->h->errmsg);
	j->since_compact = 0; /* failed or not: the next try is N commits on */
	if (rckpt_job_compact(j, NULL, NULL) == 0)
		rckpt_ckenc_set_depth(j->enc, 1); /* the head is a base now */
	j->seg_known = 0;
	snprintf(j->h->errmsg, sizeof(j->h->errmsg), "%s", msg);
}

/* A save that failed after its first append: its records lie past the
 * head. The next save trims them and starts a new base. */
static void save_lost(rckpt_job_t *j)
{
	j->trimmed = 0;
	j->seg_known = 0; /* the head's segment, learnt again */
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

/* A new writer of a job with a committed head continues its chain: the
 * head's levels, materialized in the OSDs, become the parents of this
 * step's deltas. When they cannot be had, this step is a base as it
 * would be anyway; when the model is another one, a base in a layout of
 * its own. */
static void resume_head(rckpt_job_t *j, const char *fn)
{
	rckpt_restored_t *r = NULL;
	j->resume_tried = 1;
	/* unless the head is taken up below, this writer cannot tell its
	 * tensors from the head's: its first step begins a segment */
	j->relayout_pending = j->head != RCKPT_STORE_NONE;
	if (j->head != RCKPT_STORE_NONE && rckpt_restore_sel(j, j->head, NULL, 0, NULL, 0, &r, NULL, 0, fn) == 0 &&
	    rckpt_ckenc_resume(j->enc, &r->dec) == 0) {
		/* how long the chain it continues already is (unknown: as long
		 * as a chain may get, so this step is a base) */
		unsigned depth;
		j->relayout_pending = 0;
		if (rckpt_chain_depth(j, j->seg, j->head, &depth))
			depth = RCKPT_STORE_CHAIN_REBASE;
		rckpt_ckenc_set_depth(j->enc, depth);
	}
	rckpt_restored_free(r);
	rckpt_clear_error(j->h);
}

/* A full save (p NULL) or a partial one. */
static int save_start(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t, unsigned n,
		      const rckpt_tensor_t *g, unsigned ng, const rckpt_partial_t *p,
		      rckpt_save_t **outp, const char *fn)
{
	rckpt_t *h = j->h;
	rckpt_tset_t params, grads;
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
	/* A writer whose open found no job locks and claims it now, before
	 * it reads the head and the segment: another writer may have made
	 * the job since the open. */
	if (j->lazy && (rc = rckpt_job_hold(j, fn)))
		return rc;
	if (!j->trimmed) {
		/* This save trims past the head first: the head as the job has
		 * it now, not as this writer last saw it. A commit of ours whose
		 * reply was lost did land; trimming past an older head would cut
		 * that committed step (store.md "Fencing"). */
		uint64_t head, count;
		if ((rc = rckpt_read_head(j, &head, &count)))
			return rckpt_fail(h, rc, fn, "cannot read the head of job %s", j->name);
		j->head = head;
	}
	if (!j->seg_known && (rc = seg_learn(j)))
		return rckpt_fail(h, rc, fn, "cannot read where job %s's head %" PRIu64 " is stored",
				  j->name, j->head);
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
	if ((rc = rckpt_tset_view(&params, t, n)) || (g && ng && (rc = rckpt_tset_view(&grads, g, ng)))) {
		rc = rckpt_fail(h, rc, fn, "%s",
				rc == -ENOMEM ? "out of memory" : "bad tensors (names, dtypes, shapes)");
		goto fail;
	}
	rckpt_roles_apply(&j->roles, &params);
	s->exact = j->exact;
	/* an exact step's residuals are per chunk: no first moment normalized
	 * by another chunk's second (the step after it is then a base) */
	rckpt_ckenc_set_plain_moments(j->enc, s->exact);
	if (p && s->exact) {
		rc = rckpt_fail(h, -EINVAL, fn, "an exact save stores the whole step: not a partial one");
		goto fail;
	}
	if (s->exact && rckpt_gpuenc_any_on_device(&params, g && ng ? &grads : NULL, &dev_name)) {
		rc = rckpt_fail(h, -EINVAL, fn, "tensor '%s' is in GPU memory; exact saves read host memory",
				dev_name);
		goto fail;
	}
	if ((rc = pick_compute(j, &params, g && ng ? &grads : NULL, msg, sizeof(msg)))) {
		rc = rckpt_fail(h, rc, fn, "%s", msg);
		goto fail;
	}
	if ((rc = rckpt_job_hold(j, fn)))
		goto fail;
	if (!j->resume_tried)
		resume_head(j, fn);
	/* A step whose tensors differ from the last one's is laid out anew:
	 * it begins a segment, so that a segment's steps share one layout. */
	s->relaid = !rckpt_ckenc_keeps_layout(j->enc, &params) || j->relayout_pending == 2;
	/* a step of other tensors, or one this writer cannot compare (a save
	 * that changed the layout failed, or the head was not taken up) */
	/* An exact step keeps its values whole in records of version 5
	 * (store.md "Exact steps"); for a class that reads older ones, it is
	 * a lossy base and the bits quantization changed beside it. */
	s->whole = s->exact && rckpt_class_records(j) >= 5;
	if ((s->roll = seg_full(j, s->whole) || s->relaid || j->relayout_pending) || (s->exact && !s->whole))
		rckpt_ckenc_restart(j->enc); /* a segment begins with a base, and
						so does a residual's step: the
						residual is of its record alone */
	s->params = &params;
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
		} else if (s->whole) {
			rc = rckpt_ckenc_step_exact(j->enc, &sink, &s->manifest, &s->st, &params, step);
		} else {
			rc = rckpt_ckenc_step_stream(j->enc, &sink, &s->manifest, &s->st, &params,
						     g && ng ? &grads : NULL, step, msg, sizeof(msg));
		}
	}
	s->params = NULL;
	rckpt_tset_free(&params);
	rckpt_tset_free(&grads);
	if (rc) {
		if (s->issued)
			save_lost(j);
		/* the encoder may have taken the new layout */
		j->relayout_pending = s->relaid ? 2 : j->relayout_pending | s->roll;
		if (s->err)
			rc = rckpt_fail(h, rc, fn, "cannot append step %" PRIu64 " to its chunks", step);
		else if (s->trim_err)
			rc = rckpt_fail(h, rc, fn,
					"cannot trim the records an unfinished save left past the head");
		else
			rc = rckpt_fail(h, rc, fn, "%s", msg[0] ? msg : "cannot encode");
		goto fail;
	}
	s->t1 = rckpt_now_s(); /* from here on the caller's tensors are free */
	j->pending = s;
	j->pending_finish = save_finish;
	j->pending_abandon = save_abandon;
	*outp = s;
	return 0;
fail:
	rckpt_tset_free(&params);
	rckpt_tset_free(&grads);
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

	rckpt_io_window_free(&s->win); /* every append ends */
	if ((rc = s->err)) {
		rc = rckpt_fail(h, rc, __func__, "cannot append step %" PRIu64 " to its chunks", s->step);
		goto done;
	}
	if (s->attach.len) {
		rckpt_writer_t w = rckpt_writer(s->attach.p + 8, 8);
		rckpt_wr_u64(&w, s->step);
		rckpt_store_attach_oid(oid, sizeof(oid), s->step);
		rc = rckpt_put_object(j, oid, s->step, &s->attach);
		if (rc) {
			rc = rckpt_fail(h, rc, __func__, "cannot write the attachment of step %" PRIu64,
					s->step);
			goto done;
		}
	}
	rckpt_store_manifest_oid(oid, sizeof(oid), s->step);
	rc = rckpt_put_object(j, oid, s->step, &s->manifest);
	if (rc) {
		rc = rckpt_fail(h, rc, __func__, "cannot write the manifest of step %" PRIu64 "%s", s->step,
				rc == -ESTALE ? " (another writer has taken the job)" : "");
		goto done;
	}
	{
		rckpt_manifest_t mf;
		uint64_t parent = RCKPT_STORE_NONE;
		if (rckpt_manifest_decode(&mf, s->manifest.p, s->manifest.len) == 0) {
			parent = mf.parent;
			rckpt_manifest_free(&mf);
		}
		rckpt_store_summary_t sum;
		memset(&sum, 0, sizeof(sum));
		s->st.enc_bytes += s->attach.len + s->exact_bytes; /* what the step stores,
								      attachment and residuals included */
		sum.raw_bytes = s->st.raw_bytes;
		sum.enc_bytes = s->st.enc_bytes;
		sum.parent = parent;
		sum.nchunks = s->nchunks;
		sum.quality = s->st.quality;
		sum.segment = s->seg;
		sum.flags = (s->attach.len ? RCKPT_SUMMARY_ATTACH : 0) | (s->exact ? RCKPT_SUMMARY_EXACT : 0) |
			    (s->relaid ? RCKPT_SUMMARY_LAYOUT : 0);
		sum.opt_raw_bytes = s->st.opt_raw_bytes;
		sum.opt_enc_bytes = s->st.opt_enc_bytes;
		rckpt_store_summary_put(summary, &sum);
	}
	{
		rckpt_msg_commit_t c = { j->head, s->step, { summary, sizeof(summary) }, j->token };
		rc = rckpt_msg_commit_encode(&commit, &c);
		if (rc == 0)
			rc = rckpt_exec_write(j, RCKPT_STORE_JOB_OID, "commit", &commit);
	}
	if (rc) {
		rc = rckpt_fail(h, rc, __func__, "cannot commit step %" PRIu64 "%s", s->step,
				rc == -ESTALE   ? " (the head moved: another writer)"
				: rc == -EBUSY  ? " (a rewind of the job is not finished: rewind again)"
						: "");
		goto done;
	}
	j->head = s->step;
	j->resumed = 1; /* a restore from now on reads what this writer saved */
	j->relayout_pending = 0;
	s->stats.raw_bytes = s->st.raw_bytes;
	s->stats.enc_bytes = s->st.enc_bytes;
	s->stats.nchunks = s->nchunks;
	s->stats.is_base = s->st.is_base;
	s->stats.quality = s->st.quality;
	s->stats.is_partial = s->partial;
	s->stats.blocks = s->st.blocks;
	s->stats.blocks_saved = s->st.blocks_saved;
	s->stats.opt_quality = s->st.opt_quality;
	s->stats.opt_raw_bytes = s->st.opt_raw_bytes;
	s->stats.opt_enc_bytes = s->st.opt_enc_bytes;
	s->stats.head_bytes = s->st.head_bytes;
	s->stats.t_encode = s->t1 - s->t0;
	s->stats.t_write = rckpt_now_s() - s->t1;
	after_commit(j);
done:
	if (rc) {
		/* its segment may hold records past the head */
		j->relayout_pending = s->relaid ? 2 : j->relayout_pending | s->roll;
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

