/*
 * cls_rckpt_job.c — the `rckpt` class's methods on the job object: head,
 * commit, claim, list, drop, pin; and retire and put on the job's other
 * objects. Its omap holds "head" -> the committed head, "count" -> steps
 * committed, "s.<step>" -> a step's summary, "p.<step>" -> a pin,
 * "writer" -> the newest claim's token, "job" (empty: this is a job
 * object) and, once a deleter has claimed it, "deleting" -> its token.
 */
#include "cls_rckpt_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_manifest.h"
#include "rckpt_record.h"
#include "rckpt_store_wire.h"

/* 1 when the object's omap has key, 0 when not, or a negative errno. */
static int has_key(rckpt_cls_obj_t *o, const char *key)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	int rc = o->ops->omap_get(o, key, &b);
	rckpt_buf_free(&b);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

int cls_rckpt_head(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return crk_head_reply(o, "head", 0, in, in_len, out);
}

/* ---- commit (job, write) ---- */

int cls_rckpt_commit(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_commit_t m;
	uint64_t head = RCKPT_STORE_NONE, count = 0;
	char key[KEY_MAX];
	int rc;

	(void)out;
	if (rckpt_msg_commit_decode(&m, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "commit: a malformed request");
	rc = crk_get_u64(o, "head", &head);
	if (rc && rc != -ENOENT)
		return rc;
	if (head != m.expect)
		return rckpt_cls_fail(o, -ESTALE, "commit: the head is %llu, not %llu", /* another writer moved it */
				      (unsigned long long)head, (unsigned long long)m.expect);
	{
		uint64_t owner;
		rc = crk_get_u64(o, "writer", &owner);
		if (rc && rc != -ENOENT)
			return rc;
		if (rc == 0 && owner != m.writer)
			return rckpt_cls_fail(o, -ESTALE, "commit: writer token %llu is not the job's %llu",
					      (unsigned long long)m.writer, (unsigned long long)owner);
	}
	if (head != RCKPT_STORE_NONE && m.step <= head)
		return -EINVAL;
	rc = crk_get_u64(o, "count", &count);
	if (rc && rc != -ENOENT)
		return rc;
	if ((rc = has_key(o, "deleting")) != 0)
		return rc < 0 ? rc : rckpt_cls_fail(o, -EIDRM, "commit: the job is being deleted");
	if ((rc = has_key(o, "rewinding")) != 0) /* the old line's summaries go first */
		return rc < 0 ? rc : rckpt_cls_fail(o, -EBUSY, "commit: a rewind is not finished");
	if ((rc = rckpt_store_step_key(key, sizeof(key), 's', m.step)) ||
	    (rc = o->ops->omap_set(o, key, m.summary.p, m.summary.len)) ||
	    (rc = crk_set_u64(o, "count", count + 1)))
		return rc;
	return crk_set_u64(o, "head", m.step);
}

/* ---- claim (job, write) ---- */

#define CLAIM_HORIZON ((uint64_t)1 << 53)
#define CLAIM_JUMP ((uint64_t)1 << 32)

int cls_rckpt_claim(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	uint64_t prev, token, cur = 0;
	unsigned flags;
	int rc;
	(void)out;
	if (rckpt_msg_claim_decode(&prev, &token, &flags, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "claim: a malformed request");
	rc = crk_get_u64(o, "writer", &cur);
	if (rc && rc != -ENOENT)
		return rc;
	if (cur != prev) /* claimed since the claimer read it: a late claim, or a race */
		return rckpt_cls_fail(o, -ESTALE, "claim: from token %llu, but the job's is %llu",
				      (unsigned long long)prev, (unsigned long long)cur);
	/* Tokens cannot be used up: a claim moves at most CLAIM_JUMP past the
	 * larger of the job's token and CLAIM_HORIZON (a writer's token is the
	 * wall clock in microseconds, under 2^53 until the year 2255, or the
	 * job's plus one), so 2^64 - 1 is billions of claims away. */
	if (token > (prev > CLAIM_HORIZON ? prev : CLAIM_HORIZON) + CLAIM_JUMP)
		return rckpt_cls_fail(o, -EINVAL, "claim: token %llu jumps too far past %llu",
				      (unsigned long long)token, (unsigned long long)prev);
	{ /* a job object holds no data: never claim another object */
		uint64_t size = 0;
		rc = o->ops->stat(o, &size);
		if (rc && rc != -ENOENT)
			return rc;
		if (rc == 0 && size > 0)
			return rckpt_cls_fail(o, -EINVAL, "claim: the object is not a job's");
	}
	if ((rc = has_key(o, "deleting")) < 0)
		return rc;
	if (rc && !(flags & RCKPT_CLAIM_DELETE)) /* only another deleter may go on */
		return rckpt_cls_fail(o, -EIDRM, "claim: the job is being deleted");
	/* token > prev (the decoder checks): claims only move forward */
	if ((rc = o->ops->omap_set(o, "job", (const uint8_t *)"", 0)) ||
	    ((flags & RCKPT_CLAIM_DELETE) && (rc = crk_set_u64(o, "deleting", token))))
		return rc;
	return crk_set_u64(o, "writer", token);
}

/* Fencing for an actor that is not the writer (store.md): refused once a
 * writer newer than the token it read has claimed the job. */
static int job_fence(rckpt_cls_obj_t *o, const char *what, uint64_t token)
{
	uint64_t cur = 0;
	int rc = crk_get_u64(o, "writer", &cur);
	if (rc && rc != -ENOENT)
		return rc;
	if (token < cur)
		return rckpt_cls_fail(o, -ESTALE, "%s: token %llu is older than the job's %llu", what,
				      (unsigned long long)token, (unsigned long long)cur);
	return 0;
}

/* ---- list (job, read) ---- */

typedef struct list_walk {
	rckpt_msg_steps_writer_t *w;
	uint32_t n;
	uint64_t head; /* steps after it are an unfinished rewind's: not listed */
} list_walk_t;

static int list_one(void *arg, const char *key, const uint8_t *val, size_t len)
{
	list_walk_t *lw = arg;
	uint64_t step;
	if (key[0] != 's')
		return 1;
	if (rckpt_store_parse_step_key(&step, key, 's') || len > RCKPT_STORE_SUMMARY_MAX)
		return -EBADMSG;
	if (lw->head == RCKPT_STORE_NONE || step > lw->head)
		return 1;
	rckpt_msg_stepsum_add(lw->w, step, val, len);
	lw->n++;
	return lw->w->err;
}

int cls_rckpt_list(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_list_t m;
	rckpt_msg_steps_writer_t w;
	list_walk_t lw;
	char after[KEY_MAX] = "s.";
	int more = 0, rc;

	if (rckpt_msg_list_decode(&m, in, in_len))
		return -EINVAL;
	if (m.after != RCKPT_STORE_NONE && (rc = rckpt_store_step_key(after, sizeof(after), 's', m.after)))
		return rc;
	lw.head = RCKPT_STORE_NONE;
	rc = crk_get_u64(o, "head", &lw.head);
	if (rc && rc != -ENOENT)
		return rc;
	rckpt_msg_stepsum_begin(&w, out);
	lw.w = &w;
	lw.n = 0;
	rc = o->ops->omap_list(o, after, m.max, list_one, &lw, &more);
	if (rc == 1) { /* ran past the "s." keys */
		rc = 0;
		more = 0;
	}
	if (rc)
		return rc;
	return rckpt_msg_stepsum_end(&w, more);
}

/* ---- rewind (job, write) ---- */

typedef struct after_walk {
	char prefix;    /* 's' or 'p' */
	uint64_t *step; /* the steps found, at most max */
	uint32_t n, max;
} after_walk_t;

static int after_one(void *arg, const char *key, const uint8_t *val, size_t len)
{
	after_walk_t *w = arg;
	uint64_t step;
	(void)val;
	(void)len;
	if (key[0] != w->prefix || key[1] != '.')
		return 1; /* past the prefix's keys ("policy" follows the pins) */
	if (rckpt_store_parse_step_key(&step, key, w->prefix))
		return -EBADMSG;
	if (w->n == w->max)
		return 2; /* more than one call takes */
	w->step[w->n++] = step;
	return 0;
}

/* The steps of keys "<prefix>.<s>" for s > after, at most max of them into
 * step[]: the count, or -E2BIG when there are more. */
static int steps_after(rckpt_cls_obj_t *o, char prefix, uint64_t after, uint64_t *step, uint32_t max)
{
	char from[KEY_MAX];
	after_walk_t w = { prefix, step, 0, max };
	int more = 0, rc = rckpt_store_step_key(from, sizeof(from), prefix, after);
	if (rc == 0)
		rc = o->ops->omap_list(o, from, max + 1, after_one, &w, &more);
	if (rc == 2)
		return -E2BIG;
	if (rc < 0)
		return rc;
	return rc == 0 && more ? -E2BIG : (int)w.n;
}

int cls_rckpt_rewind(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_rewind_t m;
	uint64_t token, step, owner = 0, head = RCKPT_STORE_NONE, count = 0, *gone = NULL;
	char key[KEY_MAX];
	int rc, n, i;

	(void)out;
	if (rckpt_msg_rewind_decode(&m, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "rewind: a malformed request");
	token = m.token;
	step = m.step;
	rc = crk_get_u64(o, "writer", &owner);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc || owner != token) /* only the writer that holds the job */
		return rckpt_cls_fail(o, -ESTALE, "rewind: writer token %llu is not the job's %llu",
				      (unsigned long long)token, (unsigned long long)owner);
	if ((rc = has_key(o, "deleting")) != 0)
		return rc < 0 ? rc : rckpt_cls_fail(o, -EIDRM, "rewind: the job is being deleted");
	rc = crk_get_u64(o, "head", &head);
	if (rc == 0)
		rc = crk_get_u64(o, "count", &count);
	if (rc && rc != -ENOENT)
		return rc;
	if (head != m.expect) /* a late rewind, after the writer saved on */
		return rckpt_cls_fail(o, -ESTALE, "rewind: the head is %llu, not %llu",
				      (unsigned long long)head, (unsigned long long)m.expect);
	if (head == RCKPT_STORE_NONE || step > head)
		return rckpt_cls_fail(o, -EINVAL, "rewind: step %llu is not committed (the head is %llu)",
				      (unsigned long long)step, (unsigned long long)head);
	if ((rc = rckpt_store_step_key(key, sizeof(key), 's', step)) || (rc = has_key(o, key)) < 0)
		return rc;
	if (rc == 0)
		return rckpt_cls_fail(o, -ENOENT, "rewind: step %llu is not listed (dropped)",
				      (unsigned long long)step);
	if ((gone = calloc(RCKPT_STORE_REWIND_MAX, sizeof(*gone))) == NULL)
		return -ENOMEM;
	/* a pinned step after it: refused, nothing changed (pins past the
	 * head cannot be made: pin takes committed steps only) */
	n = steps_after(o, 'p', step, gone, RCKPT_STORE_REWIND_MAX);
	if (n != 0) {
		rc = n < 0 ? (n == -E2BIG ? rckpt_cls_fail(o, -EBUSY, "rewind: pinned steps after %llu",
							    (unsigned long long)step)
					  : n)
			   : rckpt_cls_fail(o, -EBUSY, "rewind: step %llu is pinned: unpin it first",
					    (unsigned long long)gone[0]);
		goto out;
	}
	/* One commit point: the head moves in this call, whatever the steps
	 * after it number; from here on they are not listed (list stops at
	 * the head) and nothing commits (commit waits for "rewinding" to go).
	 * Their summaries go a call's worth at a time: this call's, and the
	 * writer's next calls (rewind to the head, the same step) until none
	 * is left; a writer that finds "rewinding" finishes it. */
	n = steps_after(o, 's', step, gone, RCKPT_STORE_REWIND_MAX);
	if (n == -E2BIG)
		n = (int)RCKPT_STORE_REWIND_MAX;
	else if (n < 0) {
		rc = n;
		goto out;
	}
	rc = crk_set_u64(o, "head", step);
	for (i = 0; i < n && rc == 0; i++)
		if ((rc = rckpt_store_step_key(key, sizeof(key), 's', gone[i])) == 0)
			rc = o->ops->omap_remove(o, key);
	if (rc == 0 && n)
		rc = crk_set_u64(o, "count", count >= (uint64_t)n ? count - (uint64_t)n : 0);
	if (rc == 0) { /* some left: the mark says so; none: it goes */
		if (n == (int)RCKPT_STORE_REWIND_MAX)
			rc = crk_set_u64(o, "rewinding", step);
		else if ((rc = o->ops->omap_remove(o, "rewinding")) == -ENOENT)
			rc = 0;
	}
out:
	free(gone);
	return rc;
}

/* ---- drop, pin (job, write) ---- */

int cls_rckpt_drop(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_stepset_t s;
	uint64_t token, head = RCKPT_STORE_NONE, count = 0;
	uint32_t i, gone = 0;
	int rc;

	(void)out;
	if (rckpt_msg_drop_decode(&token, &s, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "drop: a malformed request");
	if (s.n > RCKPT_STORE_DROP_MAX) /* the work of one call is the plugin's to bound */
		return rckpt_cls_fail(o, -E2BIG, "drop: %u steps in one call (at most %u)", s.n,
				      RCKPT_STORE_DROP_MAX);
	if ((rc = job_fence(o, "drop", token)))
		return rc;
	rc = crk_get_u64(o, "head", &head);
	if (rc == 0)
		rc = crk_get_u64(o, "count", &count);
	if (rc)
		return rc == -ENOENT ? 0 : rc; /* nothing committed: nothing to drop */
	for (i = 0; i < s.n; i++) {
		uint64_t step = rckpt_stepset_at(&s, i);
		char key[KEY_MAX];
		int r;
		if (step == head)
			continue; /* the head stays */
		if ((rc = rckpt_store_step_key(key, sizeof(key), 'p', step)))
			return rc;
		if ((r = has_key(o, key)) != 0) {
			if (r < 0)
				return r;
			continue; /* pinned */
		}
		if ((rc = rckpt_store_step_key(key, sizeof(key), 's', step)))
			return rc;
		if ((r = has_key(o, key)) < 0)
			return r;
		if (r == 0)
			continue; /* not (or no longer) listed */
		if ((rc = o->ops->omap_remove(o, key)))
			return rc;
		gone++;
	}
	return gone ? crk_set_u64(o, "count", count >= gone ? count - gone : 0) : 0;
}

int cls_rckpt_pin(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	uint64_t token, step;
	char key[KEY_MAX];
	int on, rc;

	(void)out;
	if (rckpt_msg_pin_decode(&token, &step, &on, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "pin: a malformed request");
	if ((rc = job_fence(o, "pin", token)))
		return rc;
	if ((rc = rckpt_store_step_key(key, sizeof(key), 's', step)))
		return rc;
	if (on) {
		uint64_t head = RCKPT_STORE_NONE;
		if ((rc = crk_get_u64(o, "head", &head)) && rc != -ENOENT)
			return rc;
		if (head == RCKPT_STORE_NONE || step > head)
			return -ENOENT; /* past the head: not committed (or a rewound line's) */
		if ((rc = has_key(o, key)) <= 0)
			return rc == 0 ? -ENOENT : rc; /* only a listed step */
	}
	if ((rc = rckpt_store_step_key(key, sizeof(key), 'p', step)))
		return rc;
	if (on)
		return o->ops->omap_set(o, key, (const uint8_t *)"", 0);
	rc = o->ops->omap_remove(o, key);
	return rc == -ENOENT ? 0 : rc;
}

/* ---- retire, put (the job's other objects, write) ---- */

/* The first 16 bytes of a manifest or an attachment: u32 magic, u8
 * version, u8 compat, u16 flags, u64 step. 0 when p is one of step. */
static int step_object(const uint8_t *p, size_t len, uint64_t step)
{
	rckpt_reader_t r = rckpt_reader(p, len);
	uint32_t magic = rckpt_rd_u32(&r);
	(void)rckpt_rd_u32(&r);
	if (r.err || (magic != RCKPT_MANIFEST_MAGIC && magic != RCKPT_ATTACH_MAGIC) ||
	    rckpt_rd_u64(&r) != step || r.err)
		return -EINVAL;
	return 0;
}

static int retire_step(rckpt_cls_obj_t *o, const rckpt_msg_retire_t *m)
{
	rckpt_buf_t head = RCKPT_BUF_INIT;
	uint64_t size = 0;
	int rc, record;

	if ((rc = o->ops->stat(o, &size)))
		return rc;
	if (size < 16)
		return rckpt_cls_fail(o, -EINVAL, "retire: not a manifest or an attachment");
	if ((rc = o->ops->read(o, 0, 16, &head)) == 0)
		rc = head.len == 16 ? step_object(head.p, head.len, m->step) : -EINVAL;
	rckpt_buf_free(&head);
	if (rc)
		return rckpt_cls_fail(o, rc, "retire: not a manifest or an attachment of step %llu",
				      (unsigned long long)m->step);
	return crk_fence(o, m->token, &record);
}

/* A chunk: an object with a writer token (every fenced append and trim
 * leaves one) that is not the job object. */
static int retire_chunk(rckpt_cls_obj_t *o, const rckpt_msg_retire_t *m)
{
	static const char *const job_keys[] = { "job", "head", "deleting" };
	unsigned i;
	int rc, record;
	for (i = 0; i < sizeof(job_keys) / sizeof(job_keys[0]); i++) {
		if ((rc = has_key(o, job_keys[i])) < 0)
			return rc;
		if (rc)
			return rckpt_cls_fail(o, -EACCES, "retire: a job object is not a chunk"); /* not -EPERM: the OSD's (cls-wire.md) */
	}
	if ((rc = has_key(o, "writer")) <= 0)
		return rc < 0 ? rc : rckpt_cls_fail(o, -EINVAL, "retire: not a chunk (no writer token)");
	return crk_fence(o, m->token, &record);
}

static int retire_job(rckpt_cls_obj_t *o, const rckpt_msg_retire_t *m)
{
	uint64_t del = 0, cur = 0;
	int rc = crk_get_u64(o, "deleting", &del);
	if (rc == 0)
		rc = crk_get_u64(o, "writer", &cur);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == -ENOENT || del != m->token || cur != m->token)
		return rckpt_cls_fail(o, -ESTALE, "retire: the job is not being deleted by token %llu",
				      (unsigned long long)m->token);
	return 0;
}

int cls_rckpt_retire(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_retire_t m;
	int rc;

	(void)out;
	if (rckpt_msg_retire_decode(&m, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "retire: a malformed request");
	rc = m.kind == RCKPT_RETIRE_STEP    ? retire_step(o, &m)
	     : m.kind == RCKPT_RETIRE_CHUNK ? retire_chunk(o, &m)
					    : retire_job(o, &m);
	return rc ? rc : o->ops->remove(o);
}

int cls_rckpt_put(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_blob_t b;
	uint64_t token, step, size = 0;
	int rc, record;

	(void)out;
	if (rckpt_msg_put_decode(&token, &step, &b, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "put: a malformed request");
	if (step_object(b.p, b.len, step))
		return rckpt_cls_fail(o, -EINVAL, "put: not a manifest or an attachment of step %llu",
				      (unsigned long long)step);
	if ((rc = crk_fence(o, token, &record)))
		return rc;
	rc = o->ops->stat(o, &size);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == 0) { /* it replaces only a step's object of that step, never another object */
		rckpt_buf_t head = RCKPT_BUF_INIT;
		rc = size < 16 ? -EINVAL : o->ops->read(o, 0, 16, &head);
		if (rc == 0)
			rc = head.len == 16 ? step_object(head.p, head.len, step) : -EINVAL;
		rckpt_buf_free(&head);
		if (rc)
			return rckpt_cls_fail(o, -EINVAL, "put: the object is not step %llu's",
					      (unsigned long long)step);
	}
	if ((rc = o->ops->write(o, 0, b.p, b.len)) ||
	    (size > b.len && (rc = o->ops->truncate(o, b.len))))
		return rc;
	return crk_fence_record(o, token, record);
}
