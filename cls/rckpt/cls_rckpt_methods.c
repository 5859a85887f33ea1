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
#include "rckpt_manifest.h"
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

int cls_rckpt_ping(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	(void)o;
	(void)in;
	(void)out;
	return in_len == 0 ? 0 : -EINVAL;
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
	rc = get_u64(o, "tip", &tip);
	if (rc && rc != -ENOENT)
		return rc;
	if (tip != RCKPT_STORE_NONE && step <= tip)
		return -EEXIST; /* steps only grow; trim first to rewrite */
	if (kind != RCKPT_REC_BASE && parent != tip)
		return -ESTALE; /* a delta's or sparse record's parent must be the tip */
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
		if (rc || kind != RCKPT_REC_BASE)
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
			rc = -ESTALE; /* not on this step's chain (compacted since?) */
			goto out;
		}
	}
	/* The step is a base itself (the latest after a compaction): its
	 * record, CRC checked, is the answer as it is stored. */
	if (start_step == RCKPT_STORE_NONE && n == 1) {
		rckpt_msg_materialized_t rep;
		if ((rc = read_record(o, &chain[0], &raw)))
			goto out;
		if (raw.len > RCKPT_CLS_OUT_MAX) {
			rc = -E2BIG;
			goto out;
		}
		rep.reached = m.step;
		rep.done = 1;
		rep.record.p = raw.p;
		rep.record.len = raw.len;
		rc = rckpt_msg_materialized_encode(out, &rep);
		goto out;
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

/* Every "r." entry of the chunk, in step order. On failure w holds
 * nothing (freed). */
static int all_entries(rckpt_cls_obj_t *o, walk_t *w)
{
	char after[KEY_MAX] = "r.";
	int more = 1, rc = 0;
	memset(w, 0, sizeof(*w));
	while (more) {
		uint32_t before = w->n;
		rc = o->ops->omap_list(o, after, 256, collect_entry, w, &more);
		if (rc == 1) {
			rc = 0;
			break;
		}
		if (rc || w->n == before)
			break;
		if ((rc = rckpt_store_step_key(after, sizeof(after), 'r', w->e[w->n - 1].step)))
			break;
	}
	if (rc) {
		free(w->e);
		memset(w, 0, sizeof(*w));
	}
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
	{
		uint64_t owner;
		rc = get_u64(o, "writer", &owner);
		if (rc && rc != -ENOENT)
			return rc;
		if (rc == 0 && owner != m.writer)
			return -ESTALE; /* fenced: a newer writer claimed the job */
	}
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

/* ---- claim (job, write) ---- */

int cls_rckpt_claim(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	uint64_t token;
	(void)out;
	if (rckpt_msg_claim_decode(&token, in, in_len))
		return -EINVAL;
	return set_u64(o, "writer", token);
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

/* ---- compact (chunk, write) ---- */

/*
 * The kept steps <= upto form one chain after compaction: the newest is a
 * base, every other one a delta on the next kept step (or a base when its
 * layout differs). Records of later steps stay as they are; a step they
 * apply to is kept too. A kept record already in that shape is copied, so
 * compacting twice changes nothing the second time. An older base (a
 * writer's periodic one, or an earlier compaction's) becomes a delta.
 *
 * Decoding a step means folding its chain, which may run through steps
 * about to be dropped; a few decoded steps are cached so that walking the
 * kept steps in order folds each record about once.
 */

#define COMPACT_CACHE 4

typedef struct dcache {
	rckpt_record_t rec[COMPACT_CACHE];
	uint64_t used[COMPACT_CACHE]; /* 0: empty */
	uint64_t clock;
} dcache_t;

static void dcache_free(dcache_t *c)
{
	unsigned i;
	for (i = 0; i < COMPACT_CACHE; i++)
		if (c->used[i])
			rckpt_record_free(&c->rec[i]);
	memset(c, 0, sizeof(*c));
}

static rckpt_record_t *dcache_find(dcache_t *c, uint64_t step)
{
	unsigned i;
	for (i = 0; i < COMPACT_CACHE; i++)
		if (c->used[i] && c->rec[i].step == step) {
			c->used[i] = ++c->clock;
			return &c->rec[i];
		}
	return NULL;
}

/* Takes ownership of *r; evicts the least recently used entry. */
static rckpt_record_t *dcache_put(dcache_t *c, rckpt_record_t *r)
{
	unsigned i, v = 0;
	for (i = 0; i < COMPACT_CACHE; i++) {
		if (!c->used[i]) {
			v = i;
			break;
		}
		if (c->used[i] < c->used[v])
			v = i;
	}
	if (c->used[v])
		rckpt_record_free(&c->rec[v]);
	c->rec[v] = *r;
	c->used[v] = ++c->clock;
	memset(r, 0, sizeof(*r));
	return &c->rec[v];
}

/* Position of step in the (sorted) entries, or -1. */
static long find_entry(const walk_t *w, uint64_t step)
{
	uint32_t a = 0, b = w->n;
	while (a < b) {
		uint32_t c = a + (b - a) / 2;
		if (w->e[c].step == step)
			return (long)c;
		if (w->e[c].step < step)
			a = c + 1;
		else
			b = c;
	}
	return -1;
}

/* The decoded record of step (cached): walks back to a base or a cached
 * step, then folds forward. */
static int resolve(rckpt_cls_obj_t *o, const walk_t *w, dcache_t *c, uint64_t step,
		   rckpt_record_t **outp, uint64_t *work)
{
	const rckpt_record_limits_t lim = { 1u << 16, RCKPT_CLS_ELEMENTS_MAX };
	uint32_t *chain = NULL;
	rckpt_record_t cur, next;
	rckpt_record_t *top = NULL;
	rckpt_buf_t raw = RCKPT_BUF_INIT;
	unsigned n = 0, i;
	uint64_t s = step;
	int rc = 0;

	if ((*outp = dcache_find(c, step)) != NULL)
		return 0;
	memset(&cur, 0, sizeof(cur));
	chain = malloc(CHAIN_MAX * sizeof(*chain));
	if (chain == NULL)
		return -ENOMEM;
	for (;;) {
		long at;
		if ((top = dcache_find(c, s)) != NULL)
			break;
		if (n == CHAIN_MAX) {
			rc = -E2BIG;
			goto out;
		}
		if ((at = find_entry(w, s)) < 0) {
			rc = -EBADMSG; /* a parent that is not in the log */
			goto out;
		}
		chain[n++] = (uint32_t)at;
		if (w->e[at].kind == RCKPT_REC_BASE)
			break;
		s = w->e[at].parent;
	}
	for (i = n; i-- > 0;) {
		const rckpt_store_entry_t *e = &w->e[chain[i]];
		const rckpt_record_t *parent = i + 1 < n ? &cur : top;
		if ((rc = read_record(o, e, &raw)) ||
		    (rc = rckpt_record_decode(&next, raw.p, raw.len,
					      e->kind == RCKPT_REC_BASE ? NULL : parent, &lim)))
			goto out;
		*work += record_elements(&next);
		rckpt_record_free(&cur);
		cur = next;
	}
	*outp = n ? dcache_put(c, &cur) : top;
out:
	rckpt_record_free(&cur);
	rckpt_buf_free(&raw);
	free(chain);
	return rc;
}

/* One record of the new log: copied from the old one, or re-encoded. */
typedef struct plan {
	uint32_t from; /* entry in the old log */
	int fresh;     /* bytes in enc, else copied */
	rckpt_store_entry_t e;
	size_t at; /* offset of the fresh bytes in enc */
} plan_t;

/* Re-encodes the record of step as a base (to == NULL) or as a delta on
 * `to`; a delta whose layout differs from its target becomes a base. */
static int reencode(rckpt_cls_obj_t *o, const walk_t *w, dcache_t *c, uint64_t step,
		    const uint64_t *to, rckpt_buf_t *enc, plan_t *p, uint64_t *work)
{
	/* stored for good: every entropy coder, as the writer's encoder does */
	rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL };
	rckpt_record_t *self, *parent = NULL, r;
	size_t before = enc->len;
	int rc;

	if ((rc = resolve(o, w, c, step, &self, work)))
		return rc;
	if (to && (rc = resolve(o, w, c, *to, &parent, work)))
		return rc;
	/* resolving the parent may not evict self: the cache keeps the newest */
	if ((self = dcache_find(c, step)) == NULL)
		return -EFAULT;
	r = *self;
	r.kind = parent ? RCKPT_REC_DELTA : RCKPT_REC_BASE;
	r.parent = parent ? parent->step : RCKPT_NO_PARENT;
	rc = rckpt_record_encode(enc, &r, parent, &is);
	if (rc == -EINVAL && parent) { /* another layout: store it whole */
		enc->len = before;
		r.kind = RCKPT_REC_BASE;
		r.parent = RCKPT_NO_PARENT;
		rc = rckpt_record_encode(enc, &r, NULL, &is);
	}
	if (rc)
		return rc;
	if (enc->len - before > UINT32_MAX)
		return -EFBIG;
	p->fresh = 1;
	p->at = before;
	p->e.kind = (uint8_t)r.kind;
	p->e.parent = r.parent;
	p->e.length = (uint32_t)(enc->len - before);
	return 0;
}

int cls_rckpt_compact(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_compact_t m;
	walk_t w;
	dcache_t cache;
	uint8_t *keep = NULL;
	plan_t *plan = NULL;
	rckpt_buf_t enc = RCKPT_BUF_INIT, log = RCKPT_BUF_INIT, raw = RCKPT_BUF_INIT;
	uint64_t work = 0;
	uint32_t i, k, np = 0;
	long top = -1;
	int changed = 0, rc;

	(void)out;
	memset(&cache, 0, sizeof(cache));
	if (rckpt_msg_compact_decode(&m, in, in_len))
		return -EINVAL;
	if ((rc = all_entries(o, &w)))
		return rc == -ENOENT ? 0 : rc;
	keep = calloc(w.n ? w.n : 1, 1);
	plan = calloc(w.n ? w.n : 1, sizeof(*plan));
	enc.max = (size_t)RCKPT_STORE_OBJECT_MAX;
	log.max = (size_t)RCKPT_STORE_OBJECT_MAX;
	if (!keep || !plan) {
		rc = -ENOMEM;
		goto out;
	}
	/* What stays: the steps asked for, the newest step <= upto, and every
	 * step <= upto that a later record applies to. */
	for (i = 0, k = 0; i < w.n && w.e[i].step <= m.upto; i++) {
		while (k < m.keep.n && rckpt_stepset_at(&m.keep, k) < w.e[i].step)
			k++;
		if (k < m.keep.n && rckpt_stepset_at(&m.keep, k) == w.e[i].step)
			keep[i] = 1;
		top = (long)i;
	}
	if (top < 0)
		goto out; /* nothing at or before upto */
	keep[top] = 1;
	for (i = (uint32_t)top + 1; i < w.n; i++) {
		long at;
		if (w.e[i].kind == RCKPT_REC_BASE || w.e[i].parent > m.upto)
			continue; /* a delta or sparse record keeps its parent */
		if ((at = find_entry(&w, w.e[i].parent)) < 0) {
			rc = -EBADMSG;
			goto out;
		}
		keep[at] = 1;
	}
	/* The new log, in step order. */
	for (i = 0; i < w.n; i++) {
		plan_t *p = &plan[np];
		if (w.e[i].step <= m.upto && !keep[i]) {
			changed = 1; /* dropped */
			continue;
		}
		p->from = i;
		p->e = w.e[i];
		if (w.e[i].step <= m.upto) {
			uint32_t nx;
			for (nx = i + 1; nx <= (uint32_t)top && !keep[nx]; nx++)
				;
			if ((long)i == top) {
				if (w.e[i].kind != RCKPT_REC_BASE)
					rc = reencode(o, &w, &cache, w.e[i].step, NULL, &enc, p, &work);
			} else if (w.e[i].kind != RCKPT_REC_DELTA || w.e[i].parent != w.e[nx].step) {
				rc = reencode(o, &w, &cache, w.e[i].step, &w.e[nx].step, &enc, p, &work);
			}
			if (rc)
				goto out;
			changed |= p->fresh;
		}
		np++;
	}
	if (!changed)
		goto out;
	/* Write the new log over the old one, then its index. */
	for (i = 0; i < np; i++) {
		plan_t *p = &plan[i];
		p->e.offset = log.len;
		if (p->fresh) {
			rc = rckpt_buf_append(&log, enc.p + p->at, p->e.length);
		} else {
			if ((rc = read_record(o, &w.e[p->from], &raw)) == 0)
				rc = rckpt_buf_append(&log, raw.p, raw.len);
		}
		if (rc)
			goto out;
	}
	if ((rc = o->ops->write(o, 0, log.p, log.len)) || (rc = o->ops->truncate(o, log.len)))
		goto out;
	for (i = 0, k = 0; i < w.n; i++) {
		char key[KEY_MAX];
		if ((rc = rckpt_store_step_key(key, sizeof(key), 'r', w.e[i].step)))
			goto out;
		if (k < np && plan[k].from == i) {
			uint8_t val[RCKPT_STORE_ENTRY_BYTES];
			rckpt_store_entry_put(val, &plan[k].e);
			rc = o->ops->omap_set(o, key, val, sizeof(val));
			k++;
		} else {
			rc = o->ops->omap_remove(o, key);
		}
		if (rc)
			goto out;
	}
out:
	dcache_free(&cache);
	rckpt_buf_free(&enc);
	rckpt_buf_free(&log);
	rckpt_buf_free(&raw);
	free(keep);
	free(plan);
	free(w.e);
	return rc;
}

/* ---- verify (chunk, read) ---- */

int cls_rckpt_verify(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_verified_t v = { 0, 0, 0, RCKPT_STORE_NONE, 0 };
	rckpt_buf_t raw = RCKPT_BUF_INIT;
	walk_t w;
	uint64_t size = 0;
	uint32_t i;
	int rc;

	(void)in;
	if (in_len != 0)
		return -EINVAL;
	if ((rc = all_entries(o, &w)))
		return rc;
	rc = o->ops->stat(o, &size);
	if (rc == -ENOENT)
		rc = 0;
	for (i = 0; i < w.n && rc == 0; i++) {
		const rckpt_store_entry_t *e = &w.e[i];
		int bad = 0;
		v.records++;
		if (e->offset > size || e->length > size - e->offset)
			bad = -EBADMSG; /* past the data */
		else if (e->kind != RCKPT_REC_BASE && find_entry(&w, e->parent) < 0)
			bad = -EBADMSG; /* applies to a step that is gone */
		else
			bad = read_record(o, e, &raw);
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
	if (rc == 0)
		rc = rckpt_msg_verified_encode(out, &v);
	rckpt_buf_free(&raw);
	free(w.e);
	return rc;
}

/* ---- drop, pin (job, write) ---- */

static int has_key(rckpt_cls_obj_t *o, const char *key)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	int rc = o->ops->omap_get(o, key, &b);
	rckpt_buf_free(&b);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

int cls_rckpt_drop(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_stepset_t s;
	uint64_t head = RCKPT_STORE_NONE, count = 0;
	uint32_t i, gone = 0;
	int rc;

	(void)out;
	if (rckpt_msg_drop_decode(&s, in, in_len))
		return -EINVAL;
	rc = get_u64(o, "head", &head);
	if (rc == 0)
		rc = get_u64(o, "count", &count);
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
	return gone ? set_u64(o, "count", count >= gone ? count - gone : 0) : 0;
}

int cls_rckpt_pin(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	uint64_t step;
	char key[KEY_MAX];
	int on, rc;

	(void)out;
	if (rckpt_msg_pin_decode(&step, &on, in, in_len))
		return -EINVAL;
	if ((rc = rckpt_store_step_key(key, sizeof(key), 's', step)))
		return rc;
	if (on) {
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

int cls_rckpt_retire(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_buf_t head = RCKPT_BUF_INIT;
	uint64_t step, size = 0;
	uint32_t magic;
	int rc;

	(void)out;
	if (rckpt_msg_retire_decode(&step, in, in_len))
		return -EINVAL;
	if ((rc = o->ops->stat(o, &size)))
		return rc;
	if (size < 16)
		return -EINVAL;
	if ((rc = o->ops->read(o, 0, 16, &head)) == 0 && head.len != 16)
		rc = -EINVAL;
	if (rc == 0) {
		/* both formats: u32 magic, u8 version, u8 compat, u16 flags, u64 step */
		rckpt_reader_t r = rckpt_reader(head.p, head.len);
		magic = rckpt_rd_u32(&r);
		(void)rckpt_rd_u32(&r);
		if ((magic != RCKPT_MANIFEST_MAGIC && magic != RCKPT_ATTACH_MAGIC) || rckpt_rd_u64(&r) != step)
			rc = -EINVAL;
	}
	rckpt_buf_free(&head);
	return rc ? rc : o->ops->remove(o);
}
