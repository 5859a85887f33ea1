/*
 * rckpt_job.c — a job of the checkpoint store (formats/store.md): a
 * namespace of the pool; chunk objects hold append-only record logs,
 * manifests are objects of their own, and the job object's head moves by
 * compare-and-set after everything else of a step is durable. This file:
 * the job's handle: opening (the writer's lock and fencing token, its
 * encoder), closing, the tensors' roles. The calls on the job's objects it
 * stands on are rckpt_objects.c; saves (rckpt_save.c), restores
 * (rckpt_restore.c), rewinds, branches and the housekeeping stand on it.
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

/* ---- open, close ---- */

/* The pool's limits, asked once per handle: an erasure-coded pool is
 * refused (chunk objects need omap), and a writer's segments stay well
 * under the OSDs' largest object (store.md "Segments", "Pools"). */
static int pool_check(rckpt_job_t *j, const char *job)
{
	rckpt_t *h = j->h;
	if (!h->limits_known) {
		int rc = j->io->ops->pool_limits(j->io, &h->max_object, &h->erasure);
		if (rc)
			return rckpt_fail(h, rc, "rckpt_job_open", "cannot tell what pool %s allows", h->pool);
		h->limits_known = 1;
	}
	if (h->erasure)
		return rckpt_fail(h, -EOPNOTSUPP, "rckpt_job_open",
				  "pool %s is erasure-coded, and a job's objects need omap, which such "
				  "pools do not have: use a replicated pool (ceph osd pool create NAME "
				  "replicated; see ceph-conf/README.md)", h->pool);
	(void)job;
	return 0;
}

/* A writer's segment cap: the job's, or the default, never more than half
 * the OSDs' largest object (the rest is room for one record the writer
 * did not foresee). */
static int segment_cap(rckpt_job_t *j)
{
	rckpt_t *h = j->h;
	const uint64_t half = h->max_object ? h->max_object / 2 : SEGMENT_BYTES_DEFAULT;
	uint64_t cap = j->o.segment_bytes;
	if (cap == 0)
		cap = SEGMENT_BYTES_DEFAULT < half ? SEGMENT_BYTES_DEFAULT : half;
	if (cap > half)
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "segments of %" PRIu64 " bytes: more than half the OSDs' osd_max_object_size "
				  "(%" PRIu64 ")", cap, h->max_object);
	if (cap > RCKPT_STORE_MOVE_MAX)
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "segments of %" PRIu64 " bytes: at most %" PRIu64 " (what one compaction call "
				  "in an OSD may move)", cap, RCKPT_STORE_MOVE_MAX);
	if (cap < ((uint64_t)1 << 20))
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "segments of %" PRIu64 " bytes: at least 1 MiB%s", cap,
				  h->max_object && h->max_object < ((uint64_t)2 << 20)
					  ? " (the OSDs' osd_max_object_size is too small for the store)"
					  : "");
	j->seg_cap = cap;
	return 0;
}


/* The encoder's quality callback, handed on to the trainer's in the
 * public form. */
static int call_quality(void *arg, const rckpt_tset_t *params, const float *const *values, double *loss)
{
	rckpt_job_t *j = arg;
	rckpt_tensor_t *t = calloc(params->ntensors ? params->ntensors : 1, sizeof(*t));
	unsigned i, d;
	int rc;

	if (t == NULL)
		return -ENOMEM;
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_ctensor_t *p = &params->t[i];
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

int rckpt_job_encoder(rckpt_job_t *j, rckpt_ckenc_t **out)
{
	return rckpt_job_encoder_for(j, NULL, out);
}

int rckpt_job_encoder_for(rckpt_job_t *j, const rckpt_layout_t *layout, rckpt_ckenc_t **out)
{
	rckpt_ckenc_opts_t eo;
	int rc;
	rckpt_ckenc_opts_default(&eo);
	eo.layout = layout;
	eo.eps = j->o.eps;
	eo.opt_eps = j->o.opt_eps;
	eo.chunk_params = j->o.chunk_params;
	eo.base_every = j->o.base_every;
	eo.partial_block = j->o.partial_block;
	eo.threads = j->o.threads;
	eo.heads = !j->o.no_heads;
	if (j->o.quality) {
		eo.quality = call_quality;
		eo.quality_arg = j;
		eo.quality_eps = j->o.quality_eps;
	}
	rc = rckpt_ckenc_create(out, &eo);
	if (rc == 0) /* a group's other ranks too, whose handles never claim */
		rckpt_ckenc_limit_records(*out, rckpt_class_records(j));
	return rc;
}

int rckpt_read_u64s(rckpt_job_t *j, const char *key, uint64_t *v, unsigned n)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	int rc = j->io->ops->omap_get(j->io, RCKPT_STORE_JOB_OID, key, &b);
	unsigned i;
	if (rc == 0 && b.len != 8 * (size_t)n)
		rc = -EBADMSG;
	if (rc == 0) {
		rckpt_reader_t r = rckpt_reader(b.p, b.len);
		for (i = 0; i < n; i++)
			v[i] = rckpt_rd_u64(&r);
	}
	rckpt_buf_free(&b);
	return rc;
}

int rckpt_read_writer(rckpt_job_t *j, uint64_t *token)
{
	int rc = rckpt_read_u64s(j, "writer", token, 1);
	if (rc)
		*token = 0;
	return rc == -ENOENT ? 0 : rc;
}

/* The writer's claim (store.md "Fencing"): a token after the job's newest,
 * compared and set in the job object, so tokens only grow and an older
 * writer's late requests are refused. It is at least the wall clock in
 * microseconds, so that a job deleted and made again under the same name
 * starts past every token of its earlier life. Another claim can land
 * between our read and our set only from a writer whose lease lapsed; then
 * we read again, a bounded number of times. */
static int claim(rckpt_job_t *j, unsigned flags)
{
	unsigned tries;
	int rc = -ESTALE;
	for (tries = 0; tries < 8 && rc == -ESTALE; tries++) {
		rckpt_buf_t cm = RCKPT_BUF_INIT;
		struct timespec ts;
		uint64_t prev, now;
		rc = rckpt_read_writer(j, &prev);
		if (rc == 0 && prev == UINT64_MAX)
			rc = -EOVERFLOW;
		if (rc == 0) {
			clock_gettime(CLOCK_REALTIME, &ts);
			now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
			j->token = now > prev ? now : prev + 1;
			rc = rckpt_msg_claim_encode(&cm, prev, j->token, flags);
		}
		/* under our lock, in one operation: a writer that lost it to a
		 * takeover meanwhile cannot take the token from its holder */
		if (rc == 0)
			rc = j->locked ? j->io->ops->exec_locked(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, j->cookie,
								  "rckpt", "claim", cm.p, cm.len)
				       : rckpt_exec_write(j, RCKPT_STORE_JOB_OID, "claim", &cm);
		rckpt_buf_free(&cm);
	}
	return rc;
}

int rckpt_job_reclaim(rckpt_job_t *j)
{
	return claim(j, 0);
}

static int take_lock(rckpt_job_t *j, int renew)
{
	return j->io->ops->lock(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, j->cookie, j->o.lease_s, renew);
}

/* The writer lock, taken (store.md "Takeover"): when another holds it,
 * broken at once if j's takeover says so (always, or auto and its holder
 * has exited), else waited for up to wait_s. -EBUSY with the handle's
 * message naming the holder. */
static int lock_job(rckpt_job_t *j, const char *fn)
{
	const double until = rckpt_now_s() + j->o.wait_s;
	char cookie[256], client[64], what[160];
	int rc;

	for (;;) {
		int gone;
		rc = take_lock(j, 0);
		if (rc != -EBUSY && rc != -EEXIST)
			break;
		rc = j->io->ops->lock_holder(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, cookie, sizeof(cookie),
					     client, sizeof(client));
		if (rc == -ENOENT) /* released (or its lease ended) since */
			continue;
		if (rc)
			return rckpt_fail(j->h, rc, fn, "cannot tell who holds the lock of job %s", j->name);
		gone = rckpt_holder_gone(cookie, what, sizeof(what));
		if (j->o.takeover == RCKPT_TAKEOVER_ALWAYS || (j->o.takeover == RCKPT_TAKEOVER_AUTO && gone)) {
			/* Taking over: the holder's requests are fenced by
			 * the claim that follows, whatever it still sends. */
			rc = j->io->ops->break_lock(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, client, cookie);
			if (rc && rc != -ENOENT)
				return rckpt_fail(j->h, rc, fn, "cannot take job %s over from %s", j->name,
						  what);
			rc = take_lock(j, 0);
			if (rc == -EBUSY || rc == -EEXIST)
				return rckpt_fail(j->h, -EBUSY, fn,
						  "job %s: another writer took it over at the same time",
						  j->name);
			break;
		}
		if (rckpt_now_s() >= until)
			return rckpt_fail(j->h, -EBUSY, fn,
					  "job %s has another writer: %s%s%s (its lock expires %u s after "
					  "that writer's last save if it died; a takeover takes it at once)",
					  j->name, what, *client ? ", " : "", client, j->o.lease_s);
		{
			const double left = until - rckpt_now_s();
			const struct timespec ts = { 0, left < 0.25 ? (long)(left * 1e9) : 250000000L };
			nanosleep(&ts, NULL);
		}
	}
	if (rc)
		return rckpt_fail(j->h, rc, fn, "cannot lock job %s", j->name);
	j->locked = 1;
	return 0;
}

int rckpt_job_rewind_calls(rckpt_job_t *j, uint64_t step)
{
	uint64_t head, count;
	unsigned calls;
	int rc = rckpt_read_head(j, &head, &count), marked = 1;
	if (rc == 0 && head == RCKPT_STORE_NONE)
		rc = -EINVAL; /* nothing committed */
	/* each call forgets a bounded number of steps; the first moves the
	 * head, the last takes the job's "rewinding" mark away. Each names
	 * the head it read: a late one, landing after the writer saved on, is
	 * refused. */
	for (calls = 0; rc == 0 && (head != step || marked) && calls < 1u << 20; calls++) {
		rckpt_buf_t in = RCKPT_BUF_INIT, v = RCKPT_BUF_INIT;
		const rckpt_msg_rewind_t m = { j->token, head, step };
		rc = rckpt_msg_rewind_encode(&in, &m);
		if (rc == 0)
			rc = rckpt_exec_write(j, RCKPT_STORE_JOB_OID, "rewind", &in);
		rckpt_buf_free(&in);
		if (rc == 0)
			rc = rckpt_read_head(j, &head, &count);
		if (rc == 0) {
			rc = j->io->ops->omap_get(j->io, RCKPT_STORE_JOB_OID, "rewinding", &v);
			marked = rc == 0;
			rc = rc == -ENOENT ? 0 : rc;
		}
		rckpt_buf_free(&v);
	}
	return rc;
}

/* A rewind its writer left unfinished (store.md "Rewind": the head moved,
 * the old line's summaries not all gone): finished before this writer
 * commits anything. */
static int finish_rewind(rckpt_job_t *j, const char *fn)
{
	rckpt_buf_t v = RCKPT_BUF_INIT;
	uint64_t head, count;
	int rc = j->io->ops->omap_get(j->io, RCKPT_STORE_JOB_OID, "rewinding", &v);
	rckpt_buf_free(&v);
	if (rc == -ENOENT)
		return 0;
	if (rc == 0 && (rc = rckpt_read_head(j, &head, &count)) == 0)
		rc = rckpt_job_rewind_calls(j, head);
	return rc ? rckpt_fail(j->h, rc, fn, "cannot finish the rewind of job %s", j->name) : 0;
}

/* The writer's lock and claim (store.md "Commit protocol" 1). */
static int acquire(rckpt_job_t *j, unsigned claim_flags, const char *fn)
{
	int rc;
	if ((rc = lock_job(j, fn)))
		return rc;
	/* Fencing: claimed before it reads the head. */
	if ((rc = claim(j, claim_flags))) {
		j->io->ops->unlock(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, j->cookie);
		j->locked = 0;
		if (rc == -EBUSY || rc == -ENOENT) /* the lock's assertion: not ours any more */
			return rckpt_fail(j->h, -EBUSY, fn,
					  "job %s: another writer took it over while this one claimed it",
					  j->name);
		return rckpt_fail(j->h, rc, fn, "cannot claim job %s%s", j->name,
				  rc == -ESTALE ? " (claimed again and again under our lock)"
				  : rc == -EIDRM ? ": it is being deleted (run rm again to finish)"
						 : "");
	}
	/* Still ours after the claim? Another writer that took the job over
	 * between our lock and our claim holds the lock without the token
	 * (ours is newer): it would fail every commit while its lock kept
	 * everyone else out. Whoever holds the lock after the claims is the
	 * one that must own the token: renew, and if we lost it, claim no
	 * more and say so (the holder's next claim fences us). */
	if ((rc = take_lock(j, 1))) {
		j->locked = 0;
		return rckpt_fail(j->h, -EBUSY, fn,
				  "job %s: another writer took it over while this one claimed it", j->name);
	}
	j->lazy = 0;
	/* The records the OSDs' class reads: an older class is not sent
	 * newer ones (its append would refuse them). The job object exists
	 * now; an encoder made before it did (a new job's) learns it here. */
	if (j->enc && !(claim_flags & RCKPT_CLAIM_DELETE))
		rckpt_ckenc_limit_records(j->enc, rckpt_class_records(j));
	return (claim_flags & RCKPT_CLAIM_DELETE) ? 0 : finish_rewind(j, fn);
}

int rckpt_job_hold(rckpt_job_t *j, const char *fn)
{
	char cookie[256], client[64], what[160];
	int rc;
	if (j->lazy) {
		uint64_t count;
		if ((rc = acquire(j, 0, fn)))
			return rc;
		/* what a writer that found the job reads at open */
		if ((rc = rckpt_read_head(j, &j->head, &count)))
			return rckpt_fail(j->h, rc, fn, "cannot read the head of job %s", j->name);
		return 0;
	}
	if (!j->locked)
		return rckpt_fail(j->h, -ENOLCK, fn, "job %s: this writer released its lock", j->name);
	rc = take_lock(j, 1);
	if (rc == 0)
		return 0;
	if ((rc == -EBUSY || rc == -EEXIST) &&
	    j->io->ops->lock_holder(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, cookie, sizeof(cookie), client,
				    sizeof(client)) == 0) {
		rckpt_holder_gone(cookie, what, sizeof(what));
		return rckpt_fail(j->h, -EBUSY, fn,
				  "job %s was taken over by another writer (%s): this one may no "
				  "longer save",
				  j->name, what);
	}
	return rckpt_fail(j->h, rc, fn, "lost the writer lock of job %s", j->name);
}

int rckpt_job_release(rckpt_job_t *j)
{
	int rc = 0;
	if (j == NULL)
		return -EINVAL;
	if (atomic_exchange(&j->locked, 0)) /* once, whichever thread asks first */
		rc = j->io->ops->unlock(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, j->cookie);
	return rc == -ENOENT ? 0 : rc;
}

int rckpt_job_head(rckpt_job_t *j, uint64_t *out)
{
	uint64_t head, count;
	int rc;
	rckpt_clear_error(j->h);
	*out = RCKPT_LATEST;
	if ((rc = rckpt_read_head(j, &head, &count)))
		return rckpt_fail(j->h, rc, __func__, "cannot read the head of job %s", j->name);
	if (head != RCKPT_STORE_NONE)
		*out = head;
	return 0;
}

int rckpt_job_writer(rckpt_job_t *j, rckpt_writer_info_t *out)
{
	char cookie[256], client[64], what[128];
	int rc;
	rckpt_clear_error(j->h);
	memset(out, 0, sizeof(*out));
	if ((rc = rckpt_read_writer(j, &out->token)))
		return rckpt_fail(j->h, rc, __func__, "cannot read the writer of job %s", j->name);
	rc = j->io->ops->lock_holder(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, cookie, sizeof(cookie), client,
				     sizeof(client));
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rckpt_fail(j->h, rc, __func__, "cannot read the lock of job %s", j->name);
	rckpt_holder_gone(cookie, what, sizeof(what));
	out->locked = 1;
	snprintf(out->holder, sizeof(out->holder), "%.96s%s%.50s", what, *client ? ", " : "", client);
	return 0;
}

static int open_job(rckpt_t *h, rckpt_job_t **out, const char *job, const rckpt_job_opts_t *opts,
		    unsigned claim_flags, int lazy);

int rckpt_job_open(rckpt_t *h, rckpt_job_t **out, const char *job, const rckpt_job_opts_t *opts)
{
	return open_job(h, out, job, opts, 0, 1);
}

int rckpt_job_open_claim(rckpt_t *h, rckpt_job_t **out, const char *job,
			 const rckpt_job_opts_t *opts, unsigned claim_flags)
{
	return open_job(h, out, job, opts, claim_flags, 0);
}

static int open_job(rckpt_t *h, rckpt_job_t **out, const char *job, const rckpt_job_opts_t *opts,
		    unsigned claim_flags, int lazy)
{
	rckpt_job_opts_t def = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j;
	uint64_t count;
	int rc;

	*out = NULL;
	rckpt_clear_error(h);
	if (opts == NULL)
		opts = &def;
	if (!rckpt_connected(h))
		return rckpt_fail(h, -ENOTCONN, "rckpt_job_open", "not connected");
	if (opts->version != RCKPT_JOB_OPTS_VERSION)
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "options of version %u, where this library takes %u (start from "
				  "RCKPT_JOB_OPTS_INIT of its rckpt.h)",
				  opts->version, RCKPT_JOB_OPTS_VERSION);
	if (job == NULL || !rckpt_valid_name(job))
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "bad job name '%.80s': 1 to 63 characters of A-Z a-z 0-9 . _ -, not beginning with . or -",
				  job ? job : "(none)");
	if (opts->compute > RCKPT_COMPUTE_GPU || !(opts->quality_eps >= 0) || opts->partial_block > 65536 ||
	    opts->takeover < RCKPT_TAKEOVER_AUTO || opts->takeover > RCKPT_TAKEOVER_ALWAYS)
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "bad options (compute, quality_eps, partial_block or takeover out of "
				  "range)");
	if (!(opts->opt_eps >= 0 && opts->opt_eps < 1))
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "opt_eps %g: the update error's threshold is in (0, 1) (0: the "
				  "default %g)",
				  opts->opt_eps, RCKPT_OPT_EPS_DEFAULT);
	if (!(opts->eps > 0 && opts->eps < 1))
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "eps %g: the compressor's threshold is in (0, 1) (default %g); eps 0 "
				  "would not make a step bit-exact",
				  opts->eps, RCKPT_EPS_DEFAULT);
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return rckpt_fail(h, -ENOMEM, "rckpt_job_open", "out of memory");
	j->h = h;
	j->o = *opts;
	j->exact = j->o.writer && j->o.exact;
	if (j->o.compute == RCKPT_COMPUTE_AUTO) {
		const char *env = getenv("RCKPT_COMPUTE");
		if (env && strcmp(env, "cpu") == 0)
			j->o.compute = RCKPT_COMPUTE_CPU;
		else if (env && strcmp(env, "gpu") == 0)
			j->o.compute = RCKPT_COMPUTE_GPU;
		else if (env && *env && strcmp(env, "auto") != 0) {
			free(j);
			return rckpt_fail(h, -EINVAL, "rckpt_job_open",
					  "RCKPT_COMPUTE is '%s'; it must be auto, cpu or gpu", env);
		}
	}
	if (j->o.opt_eps == 0)
		j->o.opt_eps = RCKPT_OPT_EPS_DEFAULT;
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
	if (j->o.chunk_params > RCKPT_STORE_CHUNK_ELEMENTS_MAX) {
		const uint64_t chunk = j->o.chunk_params;
		free(j);
		return rckpt_fail(h, -EINVAL, "rckpt_job_open",
				  "chunks of %" PRIu64 " parameters are more than the OSD plugin takes "
				  "in one record (at most %" PRIu64 ")",
				  chunk, RCKPT_STORE_CHUNK_ELEMENTS_MAX);
	}
	{
		uint64_t work = 6 * j->o.chunk_params + ((uint64_t)4 << 20);
		const uint64_t need = work + 2 * j->o.chunk_params, have = j->o.mem_budget;
		const uint64_t chunk = j->o.chunk_params;
		if (have < need) {
			free(j);
			return rckpt_fail(h, -EINVAL, "rckpt_job_open",
					  "a memory budget of %" PRIu64 " MiB is too small for chunks of %" PRIu64
					  " parameters (needs %" PRIu64 " MiB)",
					  have >> 20, chunk, (need + (1 << 20) - 1) >> 20);
		}
		/* threads beyond the first: a chunk's levels, protected values
		 * and record each, out of what the budget has left */
		if (j->o.threads == 0)
			j->o.threads = rckpt_cpus(8);
		while (j->o.threads > 1 && have - need < 3 * chunk * (j->o.threads - 1))
			j->o.threads--;
		work += 3 * chunk * (j->o.threads - 1);
		j->io_budget = (j->o.mem_budget - work) / 2;
	}
	snprintf(j->name, sizeof(j->name), "%s", job);
	rc = rckpt_io_open(h, job, &j->io);
	if (rc) {
		free(j);
		return rckpt_fail(h, rc, "rckpt_job_open", "cannot open pool %s", h->pool);
	}
	if ((rc = pool_check(j, job)) || (j->o.writer && (rc = segment_cap(j)))) {
		rckpt_job_close(j);
		return rc;
	}
	j->seg = RCKPT_STORE_NONE;
	if (j->o.writer) {
		uint64_t size;
		rckpt_holder_cookie(j->cookie, sizeof(j->cookie), j->io->ops->client_id(j->io));
		/* A job that does not exist yet is made by the first write,
		 * not by an open that may only restore. */
		j->lazy = lazy && j->io->ops->stat(j->io, RCKPT_STORE_JOB_OID, &size) == -ENOENT;
		if (!j->lazy && (rc = acquire(j, claim_flags, "rckpt_job_open"))) {
			rckpt_job_close(j);
			return rc;
		}
		if ((rc = rckpt_job_encoder(j, &j->enc))) {
			rckpt_job_close(j);
			return rckpt_fail(h, rc, "rckpt_job_open", "cannot create the encoder");
		}
	}
	if ((rc = rckpt_read_head(j, &j->head, &count))) {
		rckpt_job_close(j);
		return rckpt_fail(h, rc, "rckpt_job_open", "cannot read the head of job %s", job);
	}
	*out = j;
	return 0;
}

void rckpt_job_close(rckpt_job_t *j)
{
	if (j == NULL)
		return;
	if (j->pending) /* never committed: its records are past the head */
		j->pending_abandon(j->pending);
	if (j->locked)
		j->io->ops->unlock(j->io, RCKPT_STORE_JOB_OID, LOCK_NAME, j->cookie);
	rckpt_ckenc_destroy(j->enc);
	rckpt_gpuenc_destroy(j->gpu);
	rckpt_buf_free(&j->attach);
	rckpt_roles_free(&j->roles);
	free(j->seg_bytes);
	free(j->rec_max);
	free(j->head_bytes);
	if (j->io)
		j->io->ops->close(j->io);
	free(j);
}

/* ---- roles, options, steps ---- */

void rckpt_roles_free(rckpt_roles_t *r)
{
	unsigned i;
	for (i = 0; r->r && i < r->n; i++) {
		free(r->r[i].name);
		free(r->r[i].param);
	}
	free(r->r);
	memset(r, 0, sizeof(*r));
}

static int role_cmp(const void *a, const void *b)
{
	return strcmp(((const rckpt_role_t *)a)->name, ((const rckpt_role_t *)b)->name);
}

int rckpt_roles_set(rckpt_roles_t *out, const rckpt_tensor_role_t *r, unsigned n, char *msg,
		    size_t msglen)
{
	rckpt_roles_t x = { NULL, 0 };
	unsigned i;

	for (i = 0; i < n; i++)
		if (r[i].name == NULL || r[i].name[0] == '\0' || r[i].role > RCKPT_ROLE_OPTIM ||
		    !(r[i].eps >= 0)) {
			snprintf(msg, msglen, "role %u: %s", i,
				 r[i].name == NULL || r[i].name[0] == '\0' ? "no tensor name"
				 : r[i].role > RCKPT_ROLE_OPTIM	   ? "an unknown role"
								   : "eps must be >= 0");
			return -EINVAL;
		}
	if (n && (x.r = calloc(n, sizeof(*x.r))) == NULL)
		return -ENOMEM;
	for (x.n = 0; x.n < n; x.n++) {
		rckpt_role_t *d = &x.r[x.n];
		d->role = r[x.n].role;
		d->eps = r[x.n].eps;
		d->name = strdup(r[x.n].name);
		d->param = r[x.n].param ? strdup(r[x.n].param) : NULL;
		if (d->name == NULL || (r[x.n].param && d->param == NULL)) {
			x.n++;
			rckpt_roles_free(&x);
			return -ENOMEM;
		}
	}
	if (n)
		qsort(x.r, n, sizeof(*x.r), role_cmp);
	for (i = 1; i < n; i++)
		if (strcmp(x.r[i - 1].name, x.r[i].name) == 0) {
			snprintf(msg, msglen, "tensor '%s' is given a role twice", x.r[i].name);
			rckpt_roles_free(&x);
			return -EINVAL;
		}
	rckpt_roles_free(out);
	*out = x;
	return 0;
}

void rckpt_roles_apply(const rckpt_roles_t *r, rckpt_tset_t *ts)
{
	unsigned i;
	for (i = 0; r->n && i < ts->ntensors; i++) {
		rckpt_ctensor_t *t = &ts->t[i];
		const rckpt_role_t key = { (char *)t->name, 0, NULL, 0 };
		const rckpt_role_t *f = bsearch(&key, r->r, r->n, sizeof(*r->r), role_cmp);
		if (f != NULL) {
			const rckpt_tensor_role_t tr = { f->name, f->role, f->param, f->eps };
			rckpt_ctensor_set_role(t, &tr);
		}
	}
}

int rckpt_job_set_roles(rckpt_job_t *j, const rckpt_tensor_role_t *r, unsigned n)
{
	char msg[200];
	int rc;
	rckpt_clear_error(j->h);
	if (!j->o.writer)
		return rckpt_fail(j->h, -EPERM, __func__, "job %s was opened read-only", j->name);
	if (n && r == NULL)
		return rckpt_fail(j->h, -EINVAL, __func__, "no roles");
	if ((rc = rckpt_roles_set(&j->roles, r, n, msg, sizeof(msg))))
		return rckpt_fail(j->h, rc, __func__, "%s", rc == -ENOMEM ? "out of memory" : msg);
	return 0;
}

int rckpt_job_set_exact(rckpt_job_t *j, int on)
{
	rckpt_clear_error(j->h);
	if (!j->o.writer)
		return rckpt_fail(j->h, -EPERM, __func__, "job %s was opened read-only", j->name);
	j->exact = on != 0;
	return 0;
}

int rckpt_job_set_eps(rckpt_job_t *j, double eps, double opt_eps)
{
	rckpt_clear_error(j->h);
	if (!j->o.writer)
		return rckpt_fail(j->h, -EPERM, __func__, "job %s was opened read-only", j->name);
	if (!(eps >= 0 && eps < 1) || !(opt_eps >= 0 && opt_eps < 1))
		return rckpt_fail(j->h, -EINVAL, __func__,
				  "eps %g, opt_eps %g: each threshold is in (0, 1) (0: keep the one in use)",
				  eps, opt_eps);
	if (eps > 0)
		j->o.eps = eps;
	if (opt_eps > 0)
		j->o.opt_eps = opt_eps;
	/* the encoder a rewind makes takes them from j->o */
	return j->enc ? rckpt_ckenc_set_eps(j->enc, eps, opt_eps) : 0;
}

int rckpt_job_exists(rckpt_job_t *j)
{
	uint64_t size = 0;
	int rc;
	rckpt_clear_error(j->h);
	rc = j->io->ops->stat(j->io, RCKPT_STORE_JOB_OID, &size);
	if (rc == 0)
		return 1;
	if (rc == -ENOENT)
		return 0;
	return rckpt_fail(j->h, rc, __func__, "cannot tell whether job %s exists", j->name);
}

int rckpt_job_steps(rckpt_job_t *j, uint64_t after, rckpt_step_info_t *out, unsigned cap,
		    unsigned *n, int *more)
{
	return rckpt_list_steps(j, after, out, NULL, cap, n, more);
}
