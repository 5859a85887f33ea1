/*
 * rckpt_objects.c — the floor of the store: the calls on a job's objects
 * (formats/store.md) that every part above shares: the plugin's methods
 * (run here when the OSDs will not), the head and the step summaries, the
 * chunk objects' writes, bases and indexes, a chain's depth, whole
 * objects, and the list of steps. It calls nothing of the files above it
 * (the job handle, save, restore, branch, admin, group).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

/* ---- calls ---- */

/* A read method's reply appended to out: run by the OSD, or here when
 * the OSDs will not (store.md "Restore without the plugin"). */
int rckpt_exec_read(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in,
		    rckpt_buf_t *out)
{
	int rc = -EOPNOTSUPP;
	if (j->fold != RCKPT_FOLD_CLIENT)
		rc = j->io->ops->exec(j->io, oid, "rckpt", method, in ? in->p : NULL, in ? in->len : 0, out);
	/* refused (no class), or past the OSD's bounds (an older writer's
	 * object): the same method here, on the client's memory */
	if (rckpt_fold_refused(rc) || rc == -E2BIG) {
		const int osd = rc;
		rc = rckpt_fold_exec(j, oid, method, in, out);
		if (rc == -EOPNOTSUPP)
			rc = osd; /* not a method a client may run */
	}
	return rc;
}

int rckpt_exec_write(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in)
{
	return j->io->ops->exec(j->io, oid, "rckpt", method, in->p, in->len, NULL);
}

int rckpt_read_head(rckpt_job_t *j, uint64_t *head, uint64_t *count)
{
	return rckpt_read_head_summary(j, head, count, NULL, NULL);
}

int rckpt_read_head_summary(rckpt_job_t *j, uint64_t *head, uint64_t *count, rckpt_store_summary_t *sum,
			    int *have)
{
	rckpt_buf_t out = RCKPT_BUF_INIT;
	rckpt_msg_head_t m;
	int rc = rckpt_exec_read(j, RCKPT_STORE_JOB_OID, "head", NULL, &out);
	if (have)
		*have = 0;
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
		/* the head's summary, when the class sent one that reads (a
		 * damaged one is read again apart, and refused there) */
		if (sum && have && m.head != RCKPT_STORE_NONE && m.summary.len)
			*have = rckpt_store_summary_get(sum, m.summary.p, m.summary.len) == 0;
	}
	rckpt_buf_free(&out);
	return rc;
}

int rckpt_step_summary(rckpt_job_t *j, uint64_t step, rckpt_store_summary_t *s)
{
	rckpt_buf_t v = RCKPT_BUF_INIT;
	char key[32];
	int rc = rckpt_store_step_key(key, sizeof(key), 's', step);
	if (rc == 0)
		rc = j->io->ops->omap_get(j->io, RCKPT_STORE_JOB_OID, key, &v);
	if (rc == 0)
		rc = rckpt_store_summary_get(s, v.p, v.len);
	rckpt_buf_free(&v);
	return rc;
}

static void chunk_oid(void *arg, unsigned i, char *buf, size_t cap)
{
	rckpt_store_segment_oid(buf, cap, i, *(const uint64_t *)arg);
}

int rckpt_chunk_writes(rckpt_job_t *j, uint64_t seg, const char *method, const rckpt_buf_t *msgs,
		       int same, unsigned n)
{
	return rckpt_chunk_writes_at(j, seg, method, msgs, same, n, NULL);
}

int rckpt_chunk_writes_at(rckpt_job_t *j, uint64_t seg, const char *method, const rckpt_buf_t *msgs,
			  int same, unsigned n, unsigned *failed)
{
	return rckpt_io_fanout(j->io, n, j->o.inflight, chunk_oid, &seg, "rckpt", method, msgs, same,
			       NULL, NULL, failed);
}

/* ---- records and whole objects ---- */

int rckpt_chunk_base(rckpt_job_t *j, uint64_t seg, unsigned c, uint64_t s, rckpt_buf_t *rec)
{
	rckpt_buf_t start = RCKPT_BUF_INIT;
	char oid[64];
	unsigned rounds;
	int rc = 0, done = 0;

	rckpt_store_segment_oid(oid, sizeof(oid), c, seg);
	for (rounds = 0; rc == 0 && !done && rounds < 4 * RCKPT_STORE_CHAIN_MAX; rounds++) {
		rckpt_buf_t in = RCKPT_BUF_INIT, out = RCKPT_BUF_INIT;
		rckpt_msg_materialize_t q = { s, 0, { start.p, start.len } };
		rckpt_msg_materialized_t a;
		rc = rckpt_msg_materialize_encode(&in, &q);
		if (rc == 0)
			rc = rckpt_exec_read(j, oid, "materialize", &in, &out);
		if (rc == 0)
			rc = rckpt_msg_materialized_decode(&a, out.p, out.len);
		if (rc == 0) {
			rckpt_buf_t *dst = a.done ? rec : &start;
			dst->len = 0;
			rc = rckpt_buf_append(dst, a.record.p, a.record.len);
			done = a.done;
		}
		rckpt_buf_free(&in);
		rckpt_buf_free(&out);
	}
	rckpt_buf_free(&start);
	return rc ? rc : done ? 0 : -E2BIG;
}

int rckpt_read_object(rckpt_job_t *j, const char *oid, uint64_t max, rckpt_buf_t *b)
{
	uint64_t size = 0;
	int rc = j->io->ops->stat(j->io, oid, &size), got;
	if (rc)
		return rc;
	if (size > max)
		return -EFBIG;
	b->len = 0;
	if ((rc = rckpt_buf_reserve(b, size ? (size_t)size : 1)))
		return rc;
	got = j->io->ops->read(j->io, oid, b->p, (size_t)size, 0);
	if (got < 0)
		return got;
	if ((uint64_t)got != size)
		return -EBADMSG;
	b->len = (size_t)size;
	return 0;
}

int rckpt_put_object(rckpt_job_t *j, const char *oid, uint64_t step, const rckpt_buf_t *b)
{
	rckpt_buf_t in = RCKPT_BUF_INIT;
	int rc = rckpt_msg_put_encode(&in, j->token, step, b->p, b->len);
	if (rc == -EINVAL && b->len > RCKPT_STORE_PUT_MAX)
		rc = -EFBIG;
	if (rc == 0)
		rc = rckpt_exec_write(j, oid, "put", &in);
	rckpt_buf_free(&in);
	return rc;
}

/* ---- chunk indexes and chains ---- */

/* A chunk's index in segment seg: the steps it holds records of. */
int rckpt_chunk_index(rckpt_job_t *j, uint64_t seg, unsigned chunk, rckpt_store_entry_t **e,
		      uint32_t *n)
{
	rckpt_buf_t out = RCKPT_BUF_INIT;
	char oid[64];
	int rc;
	*e = NULL;
	*n = 0;
	rckpt_store_segment_oid(oid, sizeof(oid), chunk, seg);
	rc = rckpt_exec_read(j, oid, "index", NULL, &out);
	if (rc == 0)
		rc = rckpt_msg_index_decode(e, n, out.p, out.len);
	rckpt_buf_free(&out);
	return rc == -ENOENT ? 0 : rc;
}

int rckpt_chain_depth(rckpt_job_t *j, uint64_t seg, uint64_t step, unsigned *depth)
{
	rckpt_store_entry_t *ix = NULL;
	uint32_t n = 0, i;
	unsigned d = 0;
	int rc = rckpt_chunk_index(j, seg, 0, &ix, &n);
	*depth = 0;
	while (rc == 0) {
		for (i = 0; i < n && ix[i].step != step; i++)
			;
		if (i == n) {
			rc = -ENOENT; /* a parent that is not in the chunk */
			break;
		}
		if (++d > RCKPT_STORE_CHAIN_MAX) {
			rc = -E2BIG;
			break;
		}
		if (ix[i].kind == RCKPT_REC_BASE)
			break;
		step = ix[i].parent;
	}
	free(ix);
	if (rc == 0)
		*depth = d;
	return rc;
}

/* ---- the steps ---- */

int rckpt_list_steps(rckpt_job_t *j, uint64_t after, rckpt_step_info_t *out, uint64_t *segs,
		     unsigned cap, unsigned *n, int *more)
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
			rckpt_step_info_t *s = &out[*n];
			rckpt_store_summary_t v;
			if (*n >= l.max) { /* more than it asked for: not the plugin's reply */
				rc = -EBADMSG;
				break;
			}
			rckpt_store_summary_get(&v, sum.p, sum.len); /* too short: zeros */
			memset(s, 0, sizeof(*s));
			s->step = step;
			s->raw_bytes = v.raw_bytes;
			s->enc_bytes = v.enc_bytes;
			s->parent = v.parent;
			s->nchunks = v.nchunks;
			s->flags = v.flags & (RCKPT_STEP_EXACT | RCKPT_STEP_ATTACH | RCKPT_STEP_LAYOUT);
			s->ranks = v.ranks;
			s->opt_raw_bytes = v.opt_raw_bytes;
			s->opt_enc_bytes = v.opt_enc_bytes;
			if (segs)
				segs[*n] = v.segment;
			++*n;
		}
		*more = rd.more;
	}
	rckpt_buf_free(&in);
	rckpt_buf_free(&rep);
	return rc ? rckpt_fail(j->h, rc, "rckpt_job_steps", "cannot list the steps of job %s", j->name) : 0;
}
