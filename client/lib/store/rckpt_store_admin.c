/*
 * rckpt_store_admin.c — the store's housekeeping: the listed steps and
 * their segments, retention and pins, retiring objects, verification,
 * garbage collection, deleting jobs and listing them. Compaction, which
 * stands on these, is rckpt_compact.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_clock.h"
#include "rckpt_manifest.h"
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

#define POLICY_KEY "policy"
#define POLICY_BYTES 12

/* ---- steps, pins, policy ---- */

void rckpt_steps_free(rckpt_steps_t *s)
{
	free(s->s);
	free(s->seg);
	memset(s, 0, sizeof(*s));
}

/* Removes an object of the job through the plugin's `retire` (so that a
 * compactor needs no plain write access), for the actor holding token
 * (store.md "Fencing"). 0 when it is gone (or was never there). */
int rckpt_retire(rckpt_job_t *j, const char *oid, uint64_t token, uint64_t step, unsigned kind)
{
	rckpt_buf_t in = RCKPT_BUF_INIT;
	rckpt_msg_retire_t m;
	int rc;
	m.token = token;
	m.step = step;
	m.kind = (uint8_t)kind;
	rc = rckpt_msg_retire_encode(&in, &m);
	if (rc == 0)
		rc = rckpt_exec_write(j, oid, "retire", &in);
	rckpt_buf_free(&in);
	return rc == -ENOENT ? 0 : rc;
}

/* Every listed step, into *out (free out->s); on failure out holds
 * nothing. */
int rckpt_steps_all(rckpt_job_t *j, rckpt_steps_t *out)
{
	uint64_t after = RCKPT_LATEST;
	int more = 1, rc = 0;
	memset(out, 0, sizeof(*out));
	while (more && rc == 0) {
		unsigned got = 0;
		{
			const size_t need = (size_t)out->n + RCKPT_STORE_LIST_MAX;
			rckpt_step_info_t *s = rckpt_grow(out->s, &out->cap, need, sizeof(*s));
			uint64_t *g = s ? rckpt_grow(out->seg, &out->segcap, need, sizeof(*g)) : NULL;
			if (s)
				out->s = s;
			if (g == NULL) {
				rc = -ENOMEM;
				break;
			}
			out->seg = g;
		}
		rc = rckpt_list_steps(j, after, out->s + out->n, out->seg + out->n, RCKPT_STORE_LIST_MAX,
				      &got, &more);
		out->n += got;
		if (got)
			after = out->s[out->n - 1].step;
		else
			more = 0;
	}
	if (rc)
		rckpt_steps_free(out);
	return rc;
}

/* The listed step `step`, or NULL. */
const rckpt_step_info_t *rckpt_steps_find(const rckpt_steps_t *s, uint64_t step)
{
	unsigned a = 0, b = s->n;
	while (a < b) {
		unsigned c = a + (b - a) / 2;
		if (s->s[c].step == step)
			return &s->s[c];
		if (s->s[c].step < step)
			a = c + 1;
		else
			b = c;
	}
	return NULL;
}

int rckpt_steps_has(const rckpt_steps_t *s, uint64_t step)
{
	return rckpt_steps_find(s, step) != NULL;
}

/* Retires the residuals of exact step si (store.md "Exact steps"). */
int rckpt_retire_exact(rckpt_job_t *j, uint64_t token, const rckpt_step_info_t *si)
{
	char oid[64];
	unsigned c;
	int rc = 0;
	for (c = 0; c < si->nchunks && rc == 0 && (si->flags & RCKPT_STEP_EXACT); c++) {
		rckpt_store_exact_oid(oid, sizeof(oid), si->step, c);
		rc = rckpt_retire(j, oid, token, si->step, RCKPT_RETIRE_STEP);
	}
	return rc;
}

typedef struct pins {
	uint64_t *s;
	unsigned n, seen;
	size_t cap;
	char after[32];
} pins_t;

static int pin_one(void *arg, const char *key, const uint8_t *val, size_t len)
{
	pins_t *p = arg;
	uint64_t step, *q;
	(void)val;
	(void)len;
	if (strlen(key) >= sizeof(p->after))
		return -EBADMSG; /* no key of ours is this long */
	strcpy(p->after, key);
	p->seen++;
	if (rckpt_store_parse_step_key(&step, key, 'p'))
		return 0;
	if ((q = rckpt_grow(p->s, &p->cap, (size_t)p->n + 1, sizeof(*q))) == NULL)
		return -ENOMEM;
	p->s = q;
	p->s[p->n++] = step;
	return 0;
}

/* The pinned steps, in order, into *pins (free it). */
int rckpt_pins_read(rckpt_job_t *j, uint64_t **pins, unsigned *n)
{
	pins_t p = { NULL, 0, 0, 0, "p." };
	int more = 1, rc = 0;

	while (more && rc == 0) {
		const unsigned before = p.seen;
		rc = j->io->ops->omap_list(j->io, RCKPT_STORE_JOB_OID, p.after, "p.", 512, pin_one, &p,
					   &more);
		if (rc == -ENOENT) {
			rc = 0;
			break;
		}
		if (p.seen == before)
			break;
	}
	if (rc) {
		free(p.s);
		p.s = NULL;
		p.n = 0;
	}
	*pins = p.s;
	*n = p.n;
	return rc;
}

int rckpt_job_set_retention(rckpt_job_t *j, const rckpt_retention_t *r)
{
	uint8_t v[POLICY_BYTES];
	rckpt_writer_t w = rckpt_writer(v, sizeof(v));
	int rc;

	rckpt_clear_error(j->h);
	if (r == NULL)
		return rckpt_fail(j->h, -EINVAL, __func__, "no policy");
	rckpt_wr_u32(&w, r->keep_last);
	rckpt_wr_u64(&w, r->keep_every);
	rc = j->io->ops->omap_set(j->io, RCKPT_STORE_JOB_OID, POLICY_KEY, v, sizeof(v));
	return rc ? rckpt_fail(j->h, rc, __func__, "cannot store the policy of job %s", j->name) : 0;
}

int rckpt_job_retention(rckpt_job_t *j, rckpt_retention_t *r)
{
	rckpt_buf_t v = RCKPT_BUF_INIT;
	int rc;

	rckpt_clear_error(j->h);
	memset(r, 0, sizeof(*r));
	rc = j->io->ops->omap_get(j->io, RCKPT_STORE_JOB_OID, POLICY_KEY, &v);
	if (rc == 0 && v.len >= POLICY_BYTES) {
		rckpt_reader_t rd = rckpt_reader(v.p, v.len);
		r->keep_last = rckpt_rd_u32(&rd);
		r->keep_every = rckpt_rd_u64(&rd);
	}
	rckpt_buf_free(&v);
	if (rc == -ENOENT)
		rc = 0;
	return rc ? rckpt_fail(j->h, rc, __func__, "cannot read the policy of job %s", j->name) : 0;
}

int rckpt_job_pin(rckpt_job_t *j, uint64_t step, int on)
{
	rckpt_buf_t in = RCKPT_BUF_INIT;
	uint64_t token;
	int rc;
	rckpt_clear_error(j->h);
	if (on == RCKPT_PIN_EXACT) {
		/* a milestone that must stay exact: it must be one */
		rckpt_store_summary_t sum;
		rc = rckpt_step_summary(j, step, &sum);
		if (rc == 0 && !(sum.flags & RCKPT_SUMMARY_EXACT))
			return rckpt_fail(j->h, -EINVAL, __func__,
					  "step %" PRIu64 " was not saved exact: only an exact save makes one "
					  "(rckpt_job_set_exact, lossless=True, --exact)",
					  step);
		if (rc)
			return rckpt_fail(j->h, rc, __func__, "cannot pin step %" PRIu64 "%s", step,
					  rc == -ENOENT ? ": not a committed step" : "");
	}
	rc = rckpt_read_writer(j, &token); /* as it is when we decide */
	if (rc == 0)
		rc = rckpt_msg_pin_encode(&in, token, step, on ? 1 : 0);
	if (rc == 0)
		rc = rckpt_exec_write(j, RCKPT_STORE_JOB_OID, "pin", &in);
	rckpt_buf_free(&in);
	if (rc)
		return rckpt_fail(j->h, rc, __func__, "cannot %spin step %" PRIu64 "%s", on ? "" : "un",
				  step, rc == -ENOENT ? ": not a committed step" : "");
	return 0;
}

int rckpt_job_pinned(rckpt_job_t *j, uint64_t step)
{
	uint64_t *pins;
	unsigned n, i;
	int rc = rckpt_pins_read(j, &pins, &n), found = 0;
	if (rc)
		return rckpt_fail(j->h, rc, __func__, "cannot read the pins of job %s", j->name);
	for (i = 0; i < n; i++)
		found |= pins[i] == step;
	free(pins);
	return found;
}

int rckpt_steps_drop(rckpt_job_t *j, uint64_t token, const uint64_t *v, unsigned n)
{
	unsigned at;
	int rc = 0;
	for (at = 0; at < n && rc == 0; at += RCKPT_STORE_DROP_MAX) {
		rckpt_buf_t in = RCKPT_BUF_INIT;
		unsigned k = n - at < RCKPT_STORE_DROP_MAX ? n - at : RCKPT_STORE_DROP_MAX;
		rc = rckpt_msg_drop_encode(&in, token, v + at, k);
		if (rc == 0)
			rc = rckpt_exec_write(j, RCKPT_STORE_JOB_OID, "drop", &in);
		rckpt_buf_free(&in);
	}
	return rc;
}

int rckpt_job_drop(rckpt_job_t *j, uint64_t step)
{
	uint64_t head, count, count2, token;
	int rc, pinned;

	rckpt_clear_error(j->h);
	if ((rc = rckpt_read_writer(j, &token)) || (rc = rckpt_read_head(j, &head, &count)))
		return rckpt_fail(j->h, rc, __func__, "cannot read the head of job %s", j->name);
	if (step == head)
		return rckpt_fail(j->h, -EBUSY, __func__, "step %" PRIu64 " is the head", step);
	if ((pinned = rckpt_job_pinned(j, step)) < 0)
		return pinned;
	if (pinned)
		return rckpt_fail(j->h, -EBUSY, __func__, "step %" PRIu64 " is pinned", step);
	if ((rc = rckpt_steps_drop(j, token, &step, 1)) || (rc = rckpt_read_head(j, &head, &count2)))
		return rckpt_fail(j->h, rc, __func__, "cannot drop step %" PRIu64, step);
	if (count2 == count)
		return rckpt_fail(j->h, -ENOENT, __func__, "step %" PRIu64 " is not committed", step);
	return 0;
}

/* ---- segments ---- */

/* The segments of s's steps, in step order, into *out (free it). */
int rckpt_seg_runs(const rckpt_steps_t *s, rckpt_segrun_t **out, unsigned *n)
{
	rckpt_segrun_t *r = NULL;
	unsigned i, k = 0;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	for (i = 0; i < s->n; i++) {
		if (k == 0 || r[k - 1].seg != s->seg[i]) {
			rckpt_segrun_t *q = rckpt_grow(r, &cap, (size_t)k + 1, sizeof(*q));
			if (q == NULL) {
				free(r);
				return -ENOMEM;
			}
			r = q;
			r[k].seg = s->seg[i];
			r[k].first = i;
			r[k].n = r[k].nchunks = 0;
			k++;
		}
		r[k - 1].n++;
		if (s->s[i].nchunks > r[k - 1].nchunks)
			r[k - 1].nchunks = s->s[i].nchunks;
	}
	*out = r;
	*n = k;
	return 0;
}

/* Chunk objects: as many as the most any listed step has. */
unsigned rckpt_chunk_count(const rckpt_steps_t *s)
{
	unsigned i, n = 0;
	for (i = 0; i < s->n; i++)
		if (s->s[i].nchunks > n)
			n = s->s[i].nchunks;
	return n;
}

/* The data bytes of the chunk objects of s's segments into *sum (one that
 * does not exist has none), and how many there are into *objects. */
int rckpt_chunk_bytes(rckpt_job_t *j, const rckpt_steps_t *s, uint64_t *sum, unsigned *objects)
{
	rckpt_segrun_t *r;
	unsigned nr, k, i;
	int rc = rckpt_seg_runs(s, &r, &nr);
	*sum = 0;
	if (objects)
		*objects = 0;
	for (k = 0; k < nr && rc == 0; k++)
		for (i = 0; i < r[k].nchunks && rc == 0; i++) {
			char oid[64];
			uint64_t size = 0;
			rckpt_store_segment_oid(oid, sizeof(oid), i, r[k].seg);
			rc = j->io->ops->stat(j->io, oid, &size);
			if (rc == 0 && objects)
				++*objects;
			if (rc == -ENOENT)
				rc = 0;
			*sum += size;
		}
	free(r);
	return rc;
}

/* ---- verify ---- */

int rckpt_job_verify(rckpt_job_t *j, rckpt_verify_stats_t *st)
{
	rckpt_t *h = j->h;
	rckpt_steps_t s;
	rckpt_segrun_t *runs = NULL;
	unsigned nruns = 0, i, k;
	uint64_t bad_seg = RCKPT_STORE_NONE;
	rckpt_verify_stats_t local;
	int rc;

	rckpt_clear_error(h);
	if (st == NULL)
		st = &local;
	memset(st, 0, sizeof(*st));
	st->first_bad_step = RCKPT_LATEST;
	st->first_bad_chunk = UINT_MAX;
	if ((rc = rckpt_steps_all(j, &s)))
		return rckpt_fail(h, rc, __func__, "cannot list job %s", j->name);
	st->steps = s.n;
	if ((rc = rckpt_seg_runs(&s, &runs, &nruns))) {
		rckpt_steps_free(&s);
		return rckpt_fail(h, rc, __func__, "out of memory");
	}
	for (k = 0; k < nruns && rc == 0; k++)
	for (i = 0; i < runs[k].nchunks && rc == 0; i++) {
		uint64_t after = RCKPT_STORE_NONE;
		char oid[64];
		rckpt_store_segment_oid(oid, sizeof(oid), i, runs[k].seg);
		do { /* the plugin checks a share of the chunk per call */
			rckpt_buf_t in = RCKPT_BUF_INIT, out = RCKPT_BUF_INIT;
			rckpt_msg_verified_t v;
			rc = rckpt_msg_verify_encode(&in, after);
			if (rc == 0)
				rc = rckpt_exec_read(j, oid, "verify", &in, &out);
			if (rc == 0)
				rc = rckpt_msg_verified_decode(&v, out.p, out.len);
			rckpt_buf_free(&in);
			rckpt_buf_free(&out);
			if (rc == 0 && v.next != RCKPT_STORE_NONE && after != RCKPT_STORE_NONE && v.next <= after)
				rc = -EBADMSG; /* a reply that does not move on */
			if (rc) {
				rc = rckpt_fail(h, rc, __func__, "cannot verify %s", oid);
				break;
			}
			st->records += v.records;
			st->bytes += v.bytes;
			if (v.bad && st->bad == 0) {
				st->first_bad_step = v.first_bad;
				st->first_bad_chunk = i;
				bad_seg = runs[k].seg;
			}
			st->bad += v.bad;
			after = v.next;
		} while (after != RCKPT_STORE_NONE);
	}
	for (i = 0; i < s.n && rc == 0; i++) {
		char oid[64];
		uint64_t size;
		rckpt_store_manifest_oid(oid, sizeof(oid), s.s[i].step);
		if (j->io->ops->stat(j->io, oid, &size) != 0 || size == 0) {
			if (st->bad++ == 0)
				st->first_bad_step = s.s[i].step;
		}
	}
	rckpt_steps_free(&s);
	free(runs);
	if (rc)
		return rc;
	if (st->bad) {
		char oid[64];
		if (st->first_bad_chunk != UINT_MAX)
			rckpt_store_segment_oid(oid, sizeof(oid), st->first_bad_chunk, bad_seg);
		else
			rckpt_store_manifest_oid(oid, sizeof(oid), st->first_bad_step);
		return rckpt_fail(h, RCKPT_ECHECKSUM, __func__,
				  "job %s: %" PRIu64 " damaged record(s) or missing manifest(s), first at step %" PRIu64
				  " in %s/%s",
				  j->name, st->bad, st->first_bad_step, j->name, oid);
	}
	return 0;
}

/* ---- objects of a job; gc, delete ---- */

typedef int (*each_fn)(rckpt_job_t *j, const char *oid, void *arg);

static int each_object(rckpt_job_t *j, each_fn fn, void *arg)
{
	char **names;
	unsigned n, i;
	int rc = rckpt_io_names(j->io, &names, &n);
	for (i = 0; i < n && rc == 0; i++)
		rc = fn(j, names[i], arg);
	rckpt_names_free(names, n);
	return rc;
}

typedef struct gc_arg {
	rckpt_steps_t s;
	uint64_t head;
	unsigned removed;
} gc_arg_t;

/* Whether seg holds some listed step's records. */
static int seg_listed(const rckpt_steps_t *s, uint64_t seg)
{
	unsigned i;
	for (i = 0; i < s->n; i++)
		if (s->seg[i] == seg)
			return 1;
	return 0;
}

/* The step of a manifest's or an attachment's name; 0 when oid is one. */
static int step_oid(const char *oid, uint64_t *step)
{
	const char *pre = strncmp(oid, "rckpt.attach.", 13) == 0 ? "rckpt.attach." : "rckpt.manifest.";
	size_t i, pl = strlen(pre);
	*step = 0;
	if (strncmp(oid, pre, pl) != 0 || strlen(oid) != pl + 20)
		return -EINVAL;
	for (i = pl; oid[i]; i++) {
		if (oid[i] < '0' || oid[i] > '9')
			return -EINVAL;
		*step = *step * 10 + (uint64_t)(oid[i] - '0');
	}
	return 0;
}

static int gc_one(rckpt_job_t *j, const char *oid, void *arg)
{
	gc_arg_t *g = arg;
	uint64_t step, seg;
	uint32_t chunk;
	int rc;
	if (rckpt_store_parse_chunk_oid(oid, &chunk, &seg) == 0) {
		/* a segment no listed step is in: a crashed writer's, or one a
		 * compaction did not finish removing */
		if (seg_listed(&g->s, seg))
			return 0;
		rc = rckpt_retire(j, oid, j->token, RCKPT_STORE_NONE, RCKPT_RETIRE_CHUNK);
		if (rc == -EINVAL)
			return 0; /* no fenced writer's chunk: left alone */
		if (rc == 0)
			g->removed++;
		return rc;
	}
	if (rckpt_store_parse_exact_oid(oid, &step, &chunk) == 0) {
		/* a residual of a listed exact step stays; one of a step
		 * forgotten, or of an abandoned step of a listed number, goes */
		const rckpt_step_info_t *si = step <= g->head ? rckpt_steps_find(&g->s, step) : NULL;
		if (si && (si->flags & RCKPT_STEP_EXACT) && chunk < si->nchunks)
			return 0;
	} else if (step_oid(oid, &step)) { /* an attachment goes with its manifest */
		return 0;
	} else if (step <= g->head && rckpt_steps_has(&g->s, step)) {
		return 0;
	}
	rc = rckpt_retire(j, oid, j->token, step, RCKPT_RETIRE_STEP);
	if (rc == -EINVAL)
		return 0; /* not what its name says: not the store's, left alone */
	if (rc == 0)
		g->removed++;
	return rc;
}

int rckpt_job_stored(rckpt_job_t *j, uint64_t *bytes, unsigned *objects)
{
	rckpt_steps_t s;
	uint64_t size, chunks;
	unsigned i, c, nchunk_objs = 0;
	char oid[64];
	int rc;

	rckpt_clear_error(j->h);
	*bytes = 0;
	*objects = 0;
	rc = rckpt_steps_all(j, &s);
	for (i = 0; i < s.n && rc == 0; i++) {
		rckpt_store_manifest_oid(oid, sizeof(oid), s.s[i].step);
		rc = j->io->ops->stat(j->io, oid, &size);
		if (rc == 0) {
			*bytes += size;
			++*objects;
		}
		rc = rc == -ENOENT ? 0 : rc;
		rckpt_store_attach_oid(oid, sizeof(oid), s.s[i].step);
		if (rc == 0 && (rc = j->io->ops->stat(j->io, oid, &size)) == 0) {
			*bytes += size;
			++*objects;
		}
		rc = rc == -ENOENT ? 0 : rc;
		for (c = 0; rc == 0 && (s.s[i].flags & RCKPT_STEP_EXACT) && c < s.s[i].nchunks; c++) {
			rckpt_store_exact_oid(oid, sizeof(oid), s.s[i].step, c);
			if ((rc = j->io->ops->stat(j->io, oid, &size)) == 0) {
				*bytes += size;
				++*objects;
			}
			rc = rc == -ENOENT ? 0 : rc;
		}
	}
	if (rc == 0 && (rc = rckpt_chunk_bytes(j, &s, &chunks, &nchunk_objs)) == 0) {
		*bytes += chunks;
		*objects += nchunk_objs;
	}
	rckpt_steps_free(&s);
	if (rc)
		return rckpt_fail(j->h, rc, __func__, "cannot size job %s", j->name);
	return 0;
}

int rckpt_job_gc(rckpt_job_t *j, unsigned *removed)
{
	rckpt_t *h = j->h;
	gc_arg_t g;
	rckpt_buf_t in = RCKPT_BUF_INIT;
	uint64_t count;
	int rc;

	rckpt_clear_error(h);
	memset(&g, 0, sizeof(g));
	if (!j->o.writer)
		return rckpt_fail(h, -EPERM, __func__, "gc needs the writer lock (open as a writer)");
	if ((rc = rckpt_job_hold(j, __func__)))
		return rc;
	if ((rc = rckpt_read_head(j, &g.head, &count)) || (rc = rckpt_steps_all(j, &g.s)))
		return rckpt_fail(h, rc, __func__, "cannot list job %s", j->name);
	rc = rckpt_msg_trim_encode(&in, j->token, g.head);
	if (rc == 0 && g.s.n)
		rc = rckpt_head_rebase(j, g.head); /* a rewind onto a compacted line */
	if (rc == 0 && g.s.n) { /* past the head in its segment; other segments go whole */
		rckpt_segrun_t *runs;
		unsigned nruns;
		if ((rc = rckpt_seg_runs(&g.s, &runs, &nruns)) == 0) {
			rc = rckpt_chunk_writes(j, runs[nruns - 1].seg, "trim", &in, 1, runs[nruns - 1].nchunks);
			free(runs);
		}
	}
	rckpt_buf_free(&in);
	if (rc == 0) {
		j->trimmed = 1;
		rc = each_object(j, gc_one, &g);
	}
	rckpt_steps_free(&g.s);
	if (removed)
		*removed = g.removed;
	return rc ? rckpt_fail(h, rc, __func__, "cannot collect the garbage of job %s", j->name) : 0;
}

/* rm's removal of one object of the job, fenced by the deleter's token:
 * the store's objects through `retire`, anything else plainly. */
static int remove_one(rckpt_job_t *j, const char *oid, void *arg)
{
	uint64_t step;
	int rc;
	if (strcmp(oid, RCKPT_STORE_JOB_OID) == 0)
		return 0; /* last: it holds the lock and the claim */
	if (step_oid(oid, &step) == 0) {
		rc = rckpt_retire(j, oid, j->token, step, RCKPT_RETIRE_STEP);
		if (rc == -EINVAL) /* not what its name says */
			rc = j->io->ops->remove(j->io, oid);
	} else if (strncmp(oid, "rckpt.chunk.", 12) == 0) {
		rc = rckpt_retire(j, oid, j->token, RCKPT_STORE_NONE, RCKPT_RETIRE_CHUNK);
		if (rc == -EINVAL) /* a chunk no fenced writer touched */
			rc = j->io->ops->remove(j->io, oid);
	} else {
		rc = j->io->ops->remove(j->io, oid);
	}
	if (rc == 0)
		++*(unsigned *)arg;
	return rc == -ENOENT ? 0 : rc;
}

int rckpt_job_delete(rckpt_t *h, const char *job)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j;
	uint64_t head = RCKPT_STORE_NONE;
	unsigned removed = 0;
	int rc;

	/* May this user remove the job object at all? A plain write to it
	 * (removing an omap key that is not there) says, before anything
	 * changes: a user who may run the class's methods (a compactor) but
	 * not write the job must not half-delete it, nor mark it deleted. */
	if ((rc = rckpt_job_open(h, &j, job, &o)))
		return rc;
	rc = j->io->ops->omap_rm(j->io, RCKPT_STORE_JOB_OID, "x.delete-probe");
	rckpt_job_close(j);
	if (rc && rc != -ENOENT)
		return rckpt_fail(h, rc, __func__, "cannot delete job %s", job);
	/* A deleter's claim: from here no writer can take the job, and every
	 * removal carries our token, so a late one of ours cannot touch a job
	 * made again under this name (store.md "Fencing"). */
	o.writer = 1;
	if ((rc = rckpt_job_open_claim(h, &j, job, &o, RCKPT_CLAIM_DELETE)))
		return rc;
	head = j->head;
	rc = each_object(j, remove_one, &removed);
	if (rc == 0) {
		rc = rckpt_retire(j, RCKPT_STORE_JOB_OID, j->token, RCKPT_STORE_NONE, RCKPT_RETIRE_JOB);
		if (rc == 0)
			j->locked = 0; /* the lock went with the object */
	}
	rckpt_job_close(j);
	if (rc == 0 && head == RCKPT_STORE_NONE && removed == 0)
		rc = -ENOENT;
	return rc ? rckpt_fail(h, rc, __func__, "cannot delete job %s%s", job,
			       rc == -ENOENT ? ": no such job" : "") : 0;
}

/* ---- jobs of the pool ---- */

int rckpt_jobs(rckpt_t *h, char ***names, unsigned *n)
{
	return rckpt_ns_list(h, RCKPT_STORE_JOB_OID, "", "jobs", __func__, names, n);
}

void rckpt_jobs_free(char **names, unsigned n)
{
	rckpt_names_free(names, n);
}
