/*
 * cls_rckpt_chunk.c — the `rckpt` class's methods on chunk objects:
 * append, materialize, index, trim, tip and verify (compact:
 * cls_rckpt_compact.c). A chunk
 * object's data is an append-only log of chunk records; its omap holds
 * "r.<step>" -> index entry, "tip" -> the newest step appended, and
 * "writer" -> the newest writer token that appended, trimmed or compacted
 * (fencing).
 */
#include "cls_rckpt_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_manifest.h"
#include "rckpt_record.h"
#include "rckpt_store_wire.h"

/* ---- append (chunk, write) ---- */

/* An append's head record: a base of the same step and shape as the
 * record it comes with (what it declares; its values are the writer's
 * word, checked by whoever restores it against the manifest, which names
 * its bytes' SHA-256). */
static int append_head_check(rckpt_cls_obj_t *o, const rckpt_blob_t *head, uint64_t step,
			     uint32_t nseg, uint64_t elements)
{
	unsigned kind;
	uint64_t hstep, hparent, helems;
	uint32_t hseg;
	int rc = rckpt_record_check(&kind, &hstep, &hparent, head->p, head->len);
	if (rc == 0)
		rc = rckpt_record_geometry(&hseg, &helems, head->p, head->len);
	if (rc || kind != RCKPT_REC_BASE || hstep != step || hseg != nseg || helems != elements)
		return rckpt_cls_fail(o, -EINVAL,
				      "append: a head record that is not a base of step %llu's shape (%d)",
				      (unsigned long long)step, rc);
	return 0;
}

/* Where the next record goes: over the head record when it is the log's
 * tail, past the tip's record (a head record is always after it), else at
 * the end. */
static int append_at(rckpt_cls_obj_t *o, uint64_t size, uint64_t tip, int *had_head, uint64_t *at)
{
	rckpt_store_entry_t h, t;
	int rc = crk_get_head(o, size, &h);
	*had_head = rc != -ENOENT;
	*at = size;
	if (rc)
		return rc == -ENOENT || rc == -EBADMSG ? 0 : rc;
	if (h.offset + h.length != size || tip == RCKPT_STORE_NONE)
		return 0;
	rc = crk_get_entry(o, tip, &t);
	if (rc == 0 && t.offset + t.length <= h.offset)
		*at = h.offset;
	return rc == -ENOENT || rc == -EBADMSG ? 0 : rc;
}

int cls_rckpt_append(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_append_t m;
	rckpt_store_entry_t e;
	uint8_t val[RCKPT_STORE_ENTRY_BYTES];
	char key[KEY_MAX];
	unsigned kind;
	uint64_t step, parent, tip = RCKPT_STORE_NONE, size = 0, count = 0, at, end;
	uint64_t elements;
	uint32_t nseg;
	int rc, record, had_head;

	(void)out;
	if (rckpt_msg_append_decode(&m, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "append: a malformed request");
	if ((rc = crk_fence(o, m.writer, &record)) || (rc = crk_is_chunk(o, "append")))
		return rc;
	rc = rckpt_record_check(&kind, &step, &parent, m.record.p, m.record.len);
	if (rc == RCKPT_FMT_ECHECKSUM || rc == -EBADMSG)
		return rckpt_cls_fail(o, -EINVAL, "append: a record that fails its checks (%d)", rc);
	if (rc)
		return rckpt_cls_fail(o, rc, "append: a record this plugin cannot take");
	/* What it declares, within the one chunk limit, before it is stored:
	 * nothing stored can make a later call (materialize, compact) decode
	 * more than a chunk a client writes (store.md "Limits"). */
	rc = rckpt_record_geometry(&nseg, &elements, m.record.p, m.record.len);
	if (rc)
		return rckpt_cls_fail(o, -EINVAL, "append: a record whose segments fail their checks (%d)", rc);
	if (elements > RCKPT_STORE_CHUNK_ELEMENTS_MAX || nseg > RCKPT_STORE_CHUNK_SEGMENTS_MAX)
		return rckpt_cls_fail(o, -E2BIG,
				      "append: a record of %llu elements in %u segments; a chunk holds "
				      "at most %llu elements",
				      (unsigned long long)elements, nseg,
				      (unsigned long long)RCKPT_STORE_CHUNK_ELEMENTS_MAX);
	if (m.head.len && (rc = append_head_check(o, &m.head, step, nseg, elements)))
		return rc;
	rc = crk_get_u64(o, "tip", &tip);
	if (rc && rc != -ENOENT)
		return rc;
	if (tip != RCKPT_STORE_NONE && step <= tip)
		return rckpt_cls_fail(o, -EEXIST, "append: step %llu is not after the tip %llu",
				      (unsigned long long)step, (unsigned long long)tip);
	if ((rc = crk_count(o, &count)))
		return rc;
	if (count >= RCKPT_STORE_OBJECT_RECORDS_MAX)
		return rckpt_cls_fail(o, -EFBIG, "append: the chunk holds %llu records, the most one may",
				      (unsigned long long)count);
	if (kind != RCKPT_REC_BASE && parent != tip)
		return rckpt_cls_fail(o, -ESTALE, "append: step %llu's parent %llu is not the tip",
				      (unsigned long long)step, (unsigned long long)parent);
	rc = o->ops->stat(o, &size);
	if (rc == -ENOENT)
		size = 0;
	else if (rc)
		return rc;
	if (size > RCKPT_STORE_OBJECT_MAX)
		return rckpt_cls_fail(o, -EFBIG, "append: the chunk would pass 1 GiB");
	if ((rc = append_at(o, size, tip, &had_head, &at)))
		return rc;
	if (m.record.len > RCKPT_STORE_OBJECT_MAX - at || m.head.len > RCKPT_STORE_OBJECT_MAX - at - m.record.len)
		return rckpt_cls_fail(o, -EFBIG, "append: the chunk would pass 1 GiB");
	end = at + m.record.len + m.head.len;
	e.step = step;
	e.offset = at;
	e.length = (uint32_t)m.record.len;
	e.kind = (uint8_t)kind;
	e.parent = parent;
	if ((rc = rckpt_store_entry_put(val, &e)) || (rc = o->ops->write(o, at, m.record.p, m.record.len)) ||
	    (rc = rckpt_store_step_key(key, sizeof(key), 'r', step)) ||
	    (rc = o->ops->omap_set(o, key, val, sizeof(val))) || (rc = crk_set_u64(o, "tip", step)) ||
	    (rc = crk_set_u64(o, "count", count + 1)))
		return rc;
	if (m.head.len) { /* the step's head record, after it: the old one's place */
		rckpt_store_entry_t h = { step, at + m.record.len, (uint32_t)m.head.len, RCKPT_REC_BASE,
					  RCKPT_STORE_NONE };
		if ((rc = rckpt_store_entry_put(val, &h)) ||
		    (rc = o->ops->write(o, h.offset, m.head.p, m.head.len)) ||
		    (rc = o->ops->omap_set(o, CRK_HEAD_KEY, val, sizeof(val))))
			return rc;
	} else if (had_head && (rc = o->ops->omap_remove(o, CRK_HEAD_KEY)) && rc != -ENOENT) {
		return rc;
	}
	if (end < size && (rc = o->ops->truncate(o, end))) /* the rest of the old head record */
		return rc;
	return crk_fence_record(o, m.writer, record);
}

/* ---- materialize (chunk, read) ---- */

/* levels decoded per call: 8 records of the largest chunk a client writes
 * now (at least one record is folded, whatever its size) */
#define MATERIALIZE_BUDGET_DEFAULT ((uint64_t)32 << 20)

/* A stored base record of the step, CRC checked, as the reply. */
static int reply_stored(rckpt_cls_obj_t *o, const rckpt_store_entry_t *e, rckpt_buf_t *raw,
			rckpt_cls_out_t *out)
{
	rckpt_msg_materialized_t rep;
	int rc = crk_read_record(o, e, raw);
	if (rc)
		return rc;
	if (raw->len > RCKPT_CLS_OUT_MAX)
		return -E2BIG;
	rep.reached = e->step;
	rep.done = 1;
	rep.record.p = raw->p;
	rep.record.len = raw->len;
	return rckpt_msg_materialized_encode(out, &rep);
}

/* The reply from the chunk's head record when it is one of this step, an
 * indexed one; -ENOENT when there is none (then the chain is folded: an
 * entry that is not one, or lies past the object's data, is none). A head
 * record that fails its checks (CRC-32C, a base of the step) fails the
 * call, as any damaged record does. */
static int materialize_head(rckpt_cls_obj_t *o, uint64_t step, rckpt_buf_t *raw, rckpt_cls_out_t *out)
{
	rckpt_store_entry_t h, e, t;
	uint64_t size = 0, tip = RCKPT_STORE_NONE;
	int rc = o->ops->stat(o, &size);
	if (rc == 0)
		rc = crk_get_head(o, size, &h);
	if (rc == -EBADMSG || (rc == 0 && h.step != step))
		return -ENOENT;
	if (rc == 0)
		rc = crk_get_entry(o, step, &e); /* the step is still the chunk's */
	/* and the entry is where a head record is, after the tip's record (an
	 * older plugin's trim may leave an entry whose place later records
	 * took): else none */
	if (rc == 0 && (rc = crk_get_u64(o, "tip", &tip)) == 0 && (rc = crk_get_entry(o, tip, &t)) == 0 &&
	    h.offset < t.offset + t.length)
		return -ENOENT;
	if (rc == -EBADMSG)
		return -ENOENT;
	if (rc)
		return rc;
	return reply_stored(o, &h, raw, out);
}

int cls_rckpt_materialize(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len,
			  rckpt_cls_out_t *out)
{
	rckpt_msg_materialize_t m;
	rckpt_store_entry_t *chain = NULL;
	rckpt_record_t cur, next;
	rckpt_buf_t raw = RCKPT_BUF_INIT, enc = RCKPT_BUF_INIT;
	rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_HUFF, 1, NULL, 0, 0 };
	const rckpt_record_limits_t lim = { RCKPT_STORE_CHUNK_SEGMENTS_MAX, crk_elements_max(o) };
	uint64_t start_step = RCKPT_STORE_NONE, done_elems = 0, budget;
	unsigned n = 0, i, first, folded = 0;
	int rc;

	memset(&cur, 0, sizeof(cur));
	if (rckpt_msg_materialize_decode(&m, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "materialize: a malformed request");
	/* the caller may ask for less work per call, never more */
	budget = m.budget && m.budget < MATERIALIZE_BUDGET_DEFAULT ? m.budget : MATERIALIZE_BUDGET_DEFAULT;
	if (m.start.len) { /* resume from a base the caller hands back */
		unsigned kind;
		uint64_t parent;
		rc = rckpt_record_check(&kind, &start_step, &parent, m.start.p, m.start.len);
		if (rc || kind != RCKPT_REC_BASE)
			return rckpt_cls_fail(o, -EINVAL, "materialize: a resume record that is not a base");
	}
	/* The step's head record, when the chunk keeps one: the answer
	 * without a fold, whatever the chain (store.md "Head records"). */
	if (start_step == RCKPT_STORE_NONE && (rc = materialize_head(o, m.step, &raw, out)) != -ENOENT) {
		rckpt_buf_free(&raw);
		return rc;
	}
	chain = calloc(CHAIN_MAX, sizeof(*chain));
	if (chain == NULL)
		return -ENOMEM;
	/* Walk back from the step to a base (or to the resume point). */
	{
		uint64_t s = m.step;
		for (;;) {
			if (n == CHAIN_MAX) {
				rc = rckpt_cls_fail(o, -E2BIG, "materialize: step %llu's chain passes %u records",
						    (unsigned long long)m.step, CHAIN_MAX);
				goto out;
			}
			if (s == start_step)
				break;
			if ((rc = crk_get_entry(o, s, &chain[n])))
				goto out;
			n++;
			if (chain[n - 1].kind == RCKPT_REC_BASE)
				break;
			if (chain[n - 1].parent == s) {
				rc = -EBADMSG;
				goto out;
			}
			s = chain[n - 1].parent;
		}
	}
	if (start_step != RCKPT_STORE_NONE && (n == 0 || chain[n - 1].parent != start_step)) {
		if (!(n == 0 && start_step == m.step)) {
			rc = rckpt_cls_fail(o, -ESTALE, "materialize: resume step %llu is not on step %llu's chain",
					    (unsigned long long)start_step, (unsigned long long)m.step);
			goto out;
		}
	}
	/* The step is a base itself (the latest after a compaction): its
	 * record, CRC checked, is the answer as it is stored. */
	if (start_step == RCKPT_STORE_NONE && n == 1) {
		rc = reply_stored(o, &chain[0], &raw, out);
		goto out;
	}
	/* Fold forward: chain[n-1] is the oldest. */
	if (start_step != RCKPT_STORE_NONE) {
		/* The resume record is the caller's: it is decoded only within
		 * the shape of the chunk's own record of that step, so a request
		 * costs what the chunk really holds, never what the format
		 * allows (issue 25). */
		rckpt_store_entry_t se;
		rckpt_record_limits_t shape;
		rc = crk_get_entry(o, start_step, &se);
		if (rc == -ENOENT)
			rc = rckpt_cls_fail(o, -ESTALE, "materialize: resume step %llu is not in this chunk",
					    (unsigned long long)start_step);
		if (rc || (rc = crk_read_record(o, &se, &raw)) ||
		    (rc = rckpt_record_geometry(&shape.max_segments, &shape.max_elements, raw.p, raw.len)))
			goto out;
		rc = rckpt_record_decode(&cur, m.start.p, m.start.len, NULL, &shape);
		if (rc || cur.nseg != shape.max_segments || crk_record_elements(&cur) != shape.max_elements) {
			rc = rckpt_cls_fail(o, -EINVAL,
					    "materialize: a resume record of step %llu that is not the shape of "
					    "the chunk's (%d)",
					    (unsigned long long)start_step, rc);
			goto out;
		}
		first = n;
	} else {
		if ((rc = crk_read_record(o, &chain[n - 1], &raw)) ||
		    (rc = rckpt_record_decode(&cur, raw.p, raw.len, NULL, &lim)))
			goto out;
		done_elems += crk_record_elements(&cur);
		first = n - 1;
	}
	for (i = first; i-- > 0;) {
		if (done_elems >= budget && folded > 0)
			break; /* out of budget: reply with where we are */
		if ((rc = crk_read_record(o, &chain[i], &raw)) ||
		    (rc = rckpt_record_decode_onto(&next, raw.p, raw.len, &cur, &lim)))
			goto out; /* exact values decoded over cur's: one copy held */
		rckpt_record_free(&cur);
		cur = next;
		done_elems += crk_record_elements(&cur);
		folded++;
	}
	{
		rckpt_msg_materialized_t rep;
		cur.kind = RCKPT_REC_BASE;
		cur.parent = RCKPT_NO_PARENT;
		enc.max = RCKPT_CLS_OUT_MAX;
		rckpt_buf_free(&raw); /* the last record read: its values are all that is held */
		if ((rc = rckpt_record_encode(&enc, &cur, NULL, &is)))
			goto out;
		rep.reached = cur.step;
		rep.done = cur.step == m.step;
		rckpt_record_free(&cur);
		rep.record.p = enc.p;
		rep.record.len = enc.len;
		rc = rckpt_msg_materialized_encode(out, &rep);
	}
out:
	rckpt_record_free(&cur);
	rckpt_buf_free(&raw);
	rckpt_buf_free(&enc);
	free(chain);
	return rc;
}

/* ---- index (chunk, read) ---- */

int cls_rckpt_index(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	walk_t w;
	int rc;
	(void)in;
	if (in_len != 0)
		return -EINVAL;
	rc = crk_all_entries(o, &w);
	if (rc == 0)
		rc = rckpt_msg_index_encode(out, w.e, w.n);
	free(w.e);
	return rc;
}

/* ---- trim (chunk, write) ---- */

int cls_rckpt_trim(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	walk_t w;
	rckpt_store_entry_t h;
	uint64_t writer, after, end = 0, tip = RCKPT_STORE_NONE, size = 0;
	uint32_t i, kept = 0;
	int rc, record, hrc;

	(void)out;
	memset(&w, 0, sizeof(w));
	if (rckpt_msg_trim_decode(&writer, &after, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "trim: a malformed request");
	if ((rc = crk_fence(o, writer, &record)) || (rc = crk_is_chunk(o, "trim")))
		return rc;
	rc = o->ops->stat(o, &size);
	if (rc == -ENOENT) /* nothing was ever appended: the token is all there is to keep */
		return crk_fence_record(o, writer, record);
	if (rc || (rc = crk_all_entries(o, &w)))
		goto done;
	hrc = crk_get_head(o, size, &h);
	if (hrc && hrc != -ENOENT && hrc != -EBADMSG) {
		rc = hrc;
		goto done;
	}
	for (i = 0; i < w.n && rc == 0; i++) {
		const rckpt_store_entry_t *e = &w.e[i];
		if (after != RCKPT_STORE_NONE && e->step <= after) {
			if (e->offset + e->length > end)
				end = e->offset + e->length;
			tip = e->step;
			kept++;
		} else {
			char key[KEY_MAX];
			rc = rckpt_store_step_key(key, sizeof(key), 'r', e->step);
			if (rc == 0)
				rc = o->ops->omap_remove(o, key);
		}
	}
	if (rc)
		goto done;
	/* the head record stays when it is the kept tip's, after the kept
	 * records (a trim of what a failed save left); else it goes */
	if (hrc == 0 && tip != RCKPT_STORE_NONE && h.step == tip && h.offset >= end)
		end = h.offset + h.length;
	else if (hrc != -ENOENT && (rc = o->ops->omap_remove(o, CRK_HEAD_KEY)) == -ENOENT)
		rc = 0;
	if (rc == 0 && size > end)
		rc = o->ops->truncate(o, end);
	if (rc == 0)
		rc = tip == RCKPT_STORE_NONE ? o->ops->omap_remove(o, "tip") : crk_set_u64(o, "tip", tip);
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 0 && kept != w.n)
		rc = crk_set_u64(o, "count", kept);
	if (rc == 0)
		rc = crk_fence_record(o, writer, record);
done:
	free(w.e);
	return rc;
}

int cls_rckpt_tip(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return crk_head_reply(o, "tip", 1, in, in_len, out);
}

/* ---- verify (chunk, read) ---- */

/* Record bytes one verify call reads and checks (then the caller goes on
 * from where it stopped). */
#ifndef RCKPT_VERIFY_BYTES_MAX /* (a unit test sets a smaller one) */
#define RCKPT_VERIFY_BYTES_MAX ((uint64_t)64 << 20)
#endif

int cls_rckpt_verify(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_verified_t v = { 0, 0, 0, RCKPT_STORE_NONE, 0, RCKPT_STORE_NONE };
	rckpt_buf_t raw = RCKPT_BUF_INIT;
	walk_t w;
	uint64_t size = 0, after, read = 0;
	uint32_t i;
	int rc;

	if (rckpt_msg_verify_decode(&after, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "verify: a malformed request");
	if ((rc = crk_all_entries(o, &w)))
		return rc;
	rc = o->ops->stat(o, &size);
	if (rc == -ENOENT)
		rc = 0;
	for (i = 0; i < w.n && rc == 0; i++) {
		const rckpt_store_entry_t *e = &w.e[i];
		int bad = 0;
		if (after != RCKPT_STORE_NONE && e->step <= after)
			continue;
		if (read >= RCKPT_VERIFY_BYTES_MAX) { /* one call's share: the caller goes on */
			v.next = w.e[i - 1].step;
			break;
		}
		v.records++;
		if (e->offset > size || e->length > size - e->offset)
			bad = -EBADMSG; /* past the data */
		else if (e->kind != RCKPT_REC_BASE && crk_find_entry(&w, e->parent) < 0)
			bad = -EBADMSG; /* applies to a step that is gone */
		else {
			bad = crk_read_record(o, e, &raw);
			read += e->length;
		}
		if (bad == -ENOMEM) {
			rc = bad;
			break;
		}
		if (bad == 0)
			v.bytes += e->length;
		else if (v.bad++ == 0) {
			v.first_bad = e->step;
			v.error = bad;
		}
	}
	/* at the end, the head record (store.md "Head records"): damage in it
	 * is damage in the chunk, though its step's records are whole */
	if (rc == 0 && v.next == RCKPT_STORE_NONE && w.n) {
		rckpt_store_entry_t h;
		const rckpt_store_entry_t *last = &w.e[w.n - 1];
		if (crk_get_head(o, size, &h) == 0 && h.step == last->step && h.offset >= last->offset + last->length) {
			const int bad = crk_read_record(o, &h, &raw);
			if (bad == -ENOMEM)
				rc = bad;
			else if (bad == 0)
				v.bytes += h.length;
			else if (v.bad++ == 0) {
				v.first_bad = h.step;
				v.error = bad;
			}
		}
	}
	if (rc == 0)
		rc = rckpt_msg_verified_encode(out, &v);
	rckpt_buf_free(&raw);
	free(w.e);
	return rc;
}
