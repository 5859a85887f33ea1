/*
 * cls_rckpt_methods.c — C bodies of the `rckpt` object class: the
 * checkpoint store's chunk and job methods (formats/store.md).
 *
 * Chunk object: its data is an append-only log of chunk records; its omap
 * holds "r.<step>" -> index entry and "tip" -> the newest step appended.
 * Job object: omap "head" -> the committed head, "count" -> steps
 * committed, "s.<step>" -> the step's summary.
 *
 * Everything read from the object or the request is checked before use;
 * a method fails (and the OSD drops its changes) rather than trusting it.
 */
#include "cls_rckpt_methods.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_record.h"
#include "rckpt_store_wire.h"

/* The formats this plugin reads and writes, with the versions it handles. */
static const rckpt_wire_format_range_t cls_rckpt_formats[] = {
	{ "cls-wire", 1, RCKPT_WIRE_VERSION },
	{ "store", 1, RCKPT_STORE_WIRE_VERSION },
	{ "ckpt-record", 1, RCKPT_RECORD_VERSION },
};

int cls_rckpt_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return rckpt_cls_version_reply(out, "rckpt", cls_rckpt_formats,
				       sizeof(cls_rckpt_formats) / sizeof(cls_rckpt_formats[0]), in,
				       in_len);
}

/* ---- small helpers over the object ---- */

#define KEY_MAX 32
#define CHAIN_MAX 4096u /* records one materialize folds */

static int get_u64(rckpt_cls_obj_t *o, const char *key, uint64_t *v)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	int rc = o->ops->omap_get(o, key, &b);
	if (rc == 0) {
		if (b.len == 8)
			*v = (uint64_t)rckpt_le32(b.p) | (uint64_t)rckpt_le32(b.p + 4) << 32;
		else
			rc = -EBADMSG;
	}
	rckpt_buf_free(&b);
	return rc;
}

static int set_u64(rckpt_cls_obj_t *o, const char *key, uint64_t v)
{
	uint8_t t[8];
	rckpt_writer_t w = rckpt_writer(t, sizeof(t));
	rckpt_wr_u64(&w, v);
	return o->ops->omap_set(o, key, t, sizeof(t));
}

static int get_entry(rckpt_cls_obj_t *o, uint64_t step, rckpt_store_entry_t *e)
{
	char key[KEY_MAX];
	rckpt_buf_t b = RCKPT_BUF_INIT;
	int rc = rckpt_store_step_key(key, sizeof(key), 'r', step);
	if (rc == 0)
		rc = o->ops->omap_get(o, key, &b);
	if (rc == 0)
		rc = rckpt_store_entry_get(e, b.p, b.len);
	if (rc == 0 && e->step != step)
		rc = -EBADMSG;
	rckpt_buf_free(&b);
	return rc;
}

/* Reads a record's bytes into b (emptied first) and checks its header and
 * CRC against the index entry. */
static int read_record(rckpt_cls_obj_t *o, const rckpt_store_entry_t *e, rckpt_buf_t *b)
{
	unsigned kind;
	uint64_t step, parent;
	int rc;

	b->len = 0;
	rc = o->ops->read(o, e->offset, e->length, b);
	if (rc)
		return rc;
	if (b->len != e->length)
		return -EBADMSG; /* the log is shorter than its index says */
	rc = rckpt_record_check(&kind, &step, &parent, b->p, b->len);
	if (rc)
		return rc;
	if (kind != e->kind || step != e->step || parent != e->parent)
		return -EBADMSG;
	return 0;
}

/* ---- append (chunk, write) ---- */

int cls_rckpt_append(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_blob_t rec;
	rckpt_store_entry_t e;
	uint8_t val[RCKPT_STORE_ENTRY_BYTES];
	char key[KEY_MAX];
	unsigned kind;
	uint64_t step, parent, tip = RCKPT_STORE_NONE, size = 0;
	int rc;

	(void)out;
	if (rckpt_msg_append_decode(&rec, in, in_len))
		return -EINVAL;
	rc = rckpt_record_check(&kind, &step, &parent, rec.p, rec.len);
	if (rc == RCKPT_FMT_ECHECKSUM || rc == -EBADMSG)
		return -EINVAL;
	if (rc)
		return rc;
	if (kind == RCKPT_REC_SPARSE)
		return RCKPT_FMT_EVERSION; /* specified; stored once materialize reads it */
	rc = get_u64(o, "tip", &tip);
	if (rc && rc != -ENOENT)
		return rc;
	if (tip != RCKPT_STORE_NONE && step <= tip)
		return -EEXIST; /* steps only grow; trim first to rewrite */
	if (kind == RCKPT_REC_DELTA && parent != tip)
		return -ESTALE; /* the parent must be the tip */
	rc = o->ops->stat(o, &size);
	if (rc == -ENOENT)
		size = 0;
	else if (rc)
		return rc;
	if (size > RCKPT_STORE_OBJECT_MAX || rec.len > RCKPT_STORE_OBJECT_MAX - size)
		return -EFBIG;
	e.step = step;
	e.offset = size;
	e.length = (uint32_t)rec.len;
	e.kind = (uint8_t)kind;
	e.parent = parent;
	rckpt_store_entry_put(val, &e);
	if ((rc = o->ops->write(o, size, rec.p, rec.len)) ||
	    (rc = rckpt_store_step_key(key, sizeof(key), 'r', step)) ||
	    (rc = o->ops->omap_set(o, key, val, sizeof(val))))
		return rc;
	return set_u64(o, "tip", step);
}

/* ---- materialize (chunk, read) ---- */

#define MATERIALIZE_BUDGET_DEFAULT ((uint64_t)96 << 20) /* levels decoded per call */
#define RCKPT_CLS_ELEMENTS_MAX ((uint64_t)1 << 26)     /* elements of one record */

static uint64_t record_elements(const rckpt_record_t *r)
{
	uint64_t n = 0;
	uint32_t i;
	for (i = 0; i < r->nseg; i++)
		n += r->seg[i].n;
	return n;
}

int cls_rckpt_materialize(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len,
			  rckpt_cls_out_t *out)
{
	rckpt_msg_materialize_t m;
	rckpt_store_entry_t *chain = NULL;
	rckpt_record_t cur, next;
	rckpt_buf_t raw = RCKPT_BUF_INIT, enc = RCKPT_BUF_INIT;
	rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_HUFF, 1, NULL };
	const rckpt_record_limits_t lim = { 1u << 16, RCKPT_CLS_ELEMENTS_MAX };
	uint64_t start_step = RCKPT_STORE_NONE, done_elems = 0, budget;
	unsigned n = 0, i, first, folded = 0;
	int rc;

	memset(&cur, 0, sizeof(cur));
	if (rckpt_msg_materialize_decode(&m, in, in_len))
		return -EINVAL;
	budget = m.budget ? m.budget : MATERIALIZE_BUDGET_DEFAULT;
	if (m.start.len) { /* resume from a base the caller hands back */
		unsigned kind;
		uint64_t parent;
		rc = rckpt_record_check(&kind, &start_step, &parent, m.start.p, m.start.len);
		if (rc || kind != RCKPT_REC_BASE || start_step > m.step)
			return -EINVAL;
	}
	chain = calloc(CHAIN_MAX, sizeof(*chain));
	if (chain == NULL)
		return -ENOMEM;
	/* Walk back from the step to a base (or to the resume point). */
	{
		uint64_t s = m.step;
		for (;;) {
			if (n == CHAIN_MAX) {
				rc = -E2BIG;
				goto out;
			}
			if (s == start_step)
				break;
			if ((rc = get_entry(o, s, &chain[n])))
				goto out;
			if (chain[n].kind == RCKPT_REC_SPARSE) {
				rc = -EOPNOTSUPP;
				goto out;
			}
			n++;
			if (chain[n - 1].kind == RCKPT_REC_BASE)
				break;
			if (chain[n - 1].parent >= s) {
				rc = -EBADMSG;
				goto out;
			}
			s = chain[n - 1].parent;
		}
	}
	if (start_step != RCKPT_STORE_NONE && (n == 0 || chain[n - 1].parent != start_step)) {
		if (!(n == 0 && start_step == m.step)) {
			rc = -EINVAL; /* the resume point is not on this step's chain */
			goto out;
		}
	}
	/* Fold forward: chain[n-1] is the oldest. */
	if (start_step != RCKPT_STORE_NONE) {
		rc = rckpt_record_decode(&cur, m.start.p, m.start.len, NULL, &lim);
		if (rc) {
			rc = -EINVAL;
			goto out;
		}
		first = n;
	} else {
		if ((rc = read_record(o, &chain[n - 1], &raw)) ||
		    (rc = rckpt_record_decode(&cur, raw.p, raw.len, NULL, &lim)))
			goto out;
		done_elems += record_elements(&cur);
		first = n - 1;
	}
	for (i = first; i-- > 0;) {
		if (done_elems >= budget && folded > 0)
			break; /* out of budget: reply with where we are */
		if ((rc = read_record(o, &chain[i], &raw)) ||
		    (rc = rckpt_record_decode(&next, raw.p, raw.len, &cur, &lim)))
			goto out;
		rckpt_record_free(&cur);
		cur = next;
		done_elems += record_elements(&cur);
		folded++;
	}
	{
		rckpt_msg_materialized_t rep;
		cur.kind = RCKPT_REC_BASE;
		cur.parent = RCKPT_NO_PARENT;
		enc.max = RCKPT_CLS_OUT_MAX;
		if ((rc = rckpt_record_encode(&enc, &cur, NULL, &is)))
			goto out;
		rep.reached = cur.step;
		rep.done = cur.step == m.step;
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

/* ---- index walks ---- */

typedef struct walk {
	rckpt_store_entry_t *e;
	uint32_t n, cap;
	int err;
} walk_t;

static int collect_entry(void *arg, const char *key, const uint8_t *val, size_t len)
{
	walk_t *w = arg;
	uint64_t step;
	if (key[0] != 'r')
		return 1; /* past the "r." keys */
	if (rckpt_store_parse_step_key(&step, key, 'r'))
		return -EBADMSG;
	if (w->n == w->cap) {
		uint32_t cap = w->cap ? 2 * w->cap : 64;
		rckpt_store_entry_t *e;
		if (cap > (1u << 20))
			return -E2BIG;
		e = realloc(w->e, cap * sizeof(*e));
		if (e == NULL)
			return -ENOMEM;
		w->e = e;
		w->cap = cap;
	}
	if (rckpt_store_entry_get(&w->e[w->n], val, len) || w->e[w->n].step != step)
		return -EBADMSG;
	w->n++;
	return 0;
}

/* Every "r." entry of the chunk, in step order. */
static int all_entries(rckpt_cls_obj_t *o, walk_t *w)
{
	char after[KEY_MAX] = "r.";
	int more = 1, rc;
	memset(w, 0, sizeof(*w));
	while (more) {
		uint32_t before = w->n;
		rc = o->ops->omap_list(o, after, 256, collect_entry, w, &more);
		if (rc == 1)
			break;
		if (rc)
			return rc;
		if (w->n == before)
			break;
		if ((rc = rckpt_store_step_key(after, sizeof(after), 'r', w->e[w->n - 1].step)))
			return rc;
	}
	return 0;
}

/* ---- index (chunk, read) ---- */

int cls_rckpt_index(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	walk_t w;
	int rc;
	(void)in;
	if (in_len != 0)
		return -EINVAL;
	rc = all_entries(o, &w);
	if (rc == 0)
		rc = rckpt_msg_index_encode(out, w.e, w.n);
	free(w.e);
	return rc;
}

/* ---- trim (chunk, write) ---- */

int cls_rckpt_trim(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	walk_t w;
	uint64_t after, end = 0, tip = RCKPT_STORE_NONE, size = 0;
	uint32_t i;
	int rc;

	(void)out;
	if (rckpt_msg_trim_decode(&after, in, in_len))
		return -EINVAL;
	if ((rc = all_entries(o, &w)))
		goto done;
	for (i = 0; i < w.n && rc == 0; i++) {
		const rckpt_store_entry_t *e = &w.e[i];
		if (after != RCKPT_STORE_NONE && e->step <= after) {
			if (e->offset + e->length > end)
				end = e->offset + e->length;
			tip = e->step;
		} else {
			char key[KEY_MAX];
			rc = rckpt_store_step_key(key, sizeof(key), 'r', e->step);
			if (rc == 0)
				rc = o->ops->omap_remove(o, key);
		}
	}
	if (rc)
		goto done;
	rc = o->ops->stat(o, &size);
	if (rc == -ENOENT) {
		rc = 0;
		goto done; /* nothing was ever appended */
	}
	if (rc == 0 && size > end)
		rc = o->ops->truncate(o, end);
	if (rc == 0)
		rc = tip == RCKPT_STORE_NONE ? o->ops->omap_remove(o, "tip") : set_u64(o, "tip", tip);
	if (rc == -ENOENT)
		rc = 0;
done:
	free(w.e);
	return rc;
}

/* ---- tip (chunk, read), head (job, read) ---- */

static int head_reply(rckpt_cls_obj_t *o, const char *key, int count_entries, const uint8_t *in,
		      size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_head_t h = { RCKPT_STORE_NONE, 0 };
	int rc;
	(void)in;
	if (in_len != 0)
		return -EINVAL;
	rc = get_u64(o, key, &h.head);
	if (rc && rc != -ENOENT)
		return rc;
	if (count_entries) {
		walk_t w;
		rc = all_entries(o, &w);
		h.count = w.n;
		free(w.e);
		if (rc)
			return rc;
	} else {
		rc = get_u64(o, "count", &h.count);
		if (rc && rc != -ENOENT)
			return rc;
	}
	return rckpt_msg_head_encode(out, &h);
}

int cls_rckpt_tip(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return head_reply(o, "tip", 1, in, in_len, out);
}

int cls_rckpt_head(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return head_reply(o, "head", 0, in, in_len, out);
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
		return -EINVAL;
	rc = get_u64(o, "head", &head);
	if (rc && rc != -ENOENT)
		return rc;
	if (head != m.expect)
		return -ESTALE; /* another writer moved it */
	if (head != RCKPT_STORE_NONE && m.step <= head)
		return -EINVAL;
	rc = get_u64(o, "count", &count);
	if (rc && rc != -ENOENT)
		return rc;
	if ((rc = rckpt_store_step_key(key, sizeof(key), 's', m.step)) ||
	    (rc = o->ops->omap_set(o, key, m.summary.p, m.summary.len)) ||
	    (rc = set_u64(o, "count", count + 1)))
		return rc;
	return set_u64(o, "head", m.step);
}

/* ---- list (job, read) ---- */

typedef struct list_walk {
	rckpt_msg_steps_writer_t *w;
	uint32_t n;
} list_walk_t;

static int list_one(void *arg, const char *key, const uint8_t *val, size_t len)
{
	list_walk_t *lw = arg;
	uint64_t step;
	if (key[0] != 's')
		return 1;
	if (rckpt_store_parse_step_key(&step, key, 's') || len > RCKPT_STORE_SUMMARY_MAX)
		return -EBADMSG;
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
