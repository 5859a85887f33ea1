/*
 * rckpt_rewind.c — a writer moves its job's head back to a committed step
 * (formats/store.md "Rewind"), after copying the steps it abandons into a
 * branch when asked (rckpt_branch.c). Above the job's handle and beside
 * the saves: the save in flight commits first, through the hook it left.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

int rckpt_job_rewind(rckpt_job_t *j, uint64_t step, const char *branch)
{
	rckpt_t *h = j->h;
	uint64_t head = RCKPT_STORE_NONE, count;
	char bname[96];
	int rc;

	rckpt_clear_error(h);
	if (!j->o.writer)
		return rckpt_fail(h, -EPERM, __func__, "job %s was opened read-only", j->name);
	if (step == RCKPT_LATEST)
		return rckpt_fail(h, -EINVAL, __func__, "no step to rewind to");
	if (j->pending) /* the save in flight commits (or fails) first */
		j->pending_finish(j->pending);
	rckpt_clear_error(h);
	if ((rc = rckpt_job_hold(j, __func__)))
		return rc;
	if (branch) {
		/* the steps it abandons, and the step itself, copied into a job of
		 * their own first: nothing is forgotten if that fails */
		unsigned copied = 0;
		char key[128];
		snprintf(bname, sizeof(bname), "%s.%s", j->name, branch);
		if (!rckpt_valid_name(bname) || !*branch)
			return rckpt_fail(h, -EINVAL, __func__, "branch '%s' of job %s: '%s' is no job name (1..63 of [A-Za-z0-9._-], not beginning with . or -)",
					  branch, j->name, bname);
		if ((rc = rckpt_read_head(j, &head, &count)))
			return rckpt_fail(h, rc, __func__, "cannot read the head of job %s", j->name);
		if (head == RCKPT_STORE_NONE || step > head)
			return rckpt_fail(h, -EINVAL, __func__, "cannot rewind job %s to step %" PRIu64 ": not a committed step",
					  j->name, step);
		{
			rckpt_store_summary_t sum;
			if ((rc = rckpt_step_summary(j, step, &sum)))
				return rckpt_fail(h, rc, __func__, "cannot rewind job %s to step %" PRIu64 "%s", j->name, step,
						  rc == -ENOENT ? ": not a listed step (dropped)" : "");
		}
		if ((rc = rckpt_branch_copy(j, step, head, bname, &copied)))
			return rc; /* its message says */
		snprintf(key, sizeof(key), "b.%s", bname);
		if ((rc = rckpt_branch_note(j, key, bname, step, head)))
			return rckpt_fail(h, rc, __func__, "copied steps %" PRIu64 "..%" PRIu64 " into job %s, but cannot note it in job %s",
					  step, head, bname, j->name);
		head = RCKPT_STORE_NONE;
	}
	/* A newer token first: a compactor that read the older one may trim
	 * the tail of an old segment (store.md "Compaction"), which is
	 * garbage only as long as no writer goes on in it, as this one may
	 * now; whatever this writer touches from here is refused to it. */
	if ((rc = rckpt_job_reclaim(j)))
		return rckpt_fail(h, rc, __func__, "cannot claim job %s again%s", j->name,
				  rc == -ESTALE ? " (another writer has taken it)" : "");
	rc = rckpt_job_rewind_calls(j, step);
	if (rc) {
		/* Past its commit point (the head moved) the rewind stands even
		 * though a later call failed: this writer goes on from the step,
		 * and its next rewind (or the next writer's claim) finishes it. */
		uint64_t now, n;
		rckpt_ckenc_t *e = NULL;
		if (rckpt_read_head(j, &now, &n) == 0 && now == step && rckpt_job_encoder(j, &e) == 0) {
			j->head = step;
			j->trimmed = 0;
			j->seg_known = 0;
			j->resume_tried = 0;
			rckpt_ckenc_destroy(j->enc);
			j->enc = e;
		}
	}
	if (rc)
		return rckpt_fail(h, rc, __func__, "cannot rewind job %s to step %" PRIu64 "%s", j->name, step,
				  rc == -ESTALE   ? " (another writer has taken the job)"
				  : rc == -ENOENT ? ": not a listed step (dropped)"
				  : rc == -EINVAL ? ": not a committed step"
				  : rc == -EBUSY  ? ": a later step is pinned (unpin it first)"
						  : "");
	/* The next save goes on from the step as a new writer would: it
	 * trims what lies past it, learns its segment, and continues its
	 * chain with a fresh encoder (the old one's parents are abandoned). */
	j->head = step;
	j->trimmed = 0;
	j->seg_known = 0;
	j->resume_tried = 0;
	{
		rckpt_ckenc_t *e = NULL;
		if ((rc = rckpt_job_encoder(j, &e)))
			return rckpt_fail(h, rc, __func__, "rewound job %s to step %" PRIu64
					  ", but cannot make a new encoder", j->name, step);
		rckpt_ckenc_destroy(j->enc);
		j->enc = e;
	}
	return 0;
}
