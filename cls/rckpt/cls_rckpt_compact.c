/*
 * cls_rckpt_compact.c — the `rckpt` class's compact method on a chunk
 * object: the chain's records folded into bases where the request's plan
 * keeps them, within a bounded cache of decoded records, and the log and
 * index rewritten (formats/cls-wire.md: its bounds, and the method).
 */
#include "cls_rckpt_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_manifest.h"
#include "rckpt_record.h"
#include "rckpt_store_wire.h"

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

/* Decoded records a compact call keeps: up to COMPACT_CACHE (a segment's
 * records), within COMPACT_CACHE_BYTES (at least the one in use and one
 * more). A stage the client sizes by its records' elements fits whole,
 * so each record of it is folded once. */
#define COMPACT_CACHE ((int)RCKPT_STORE_SEGMENT_RECORDS)
#define COMPACT_CACHE_BYTES ((uint64_t)32 << 20) /* with the fresh bytes below and a
						      record read: about 64 MiB a call */
/* Elements one compact call may decode and encode, whatever it is asked:
 * 2^27, or six records of the chunk's largest where that is more (a stage
 * of one step, at its first compaction, folds a base and two deltas and
 * encodes two records). A stage that needs more is refused (-E2BIG,
 * nothing changed) and the client asks for a shorter one (cls-wire.md,
 * "What one call may cost"). */
#ifndef RCKPT_COMPACT_WORK_MAX /* (a unit test sets a smaller one to reach it cheaply) */
#define RCKPT_COMPACT_WORK_MAX ((uint64_t)1 << 27)
#endif
#define COMPACT_WORK_RECORDS 6
/* Bytes of re-encoded records one call may hold. */
#define COMPACT_FRESH_MAX ((size_t)34 << 20) /* two records of 2^22 fp32 values kept
						  whole (an exact step's), re-encoded */
/* What one call may hold at once: the decoded records it keeps, the
 * re-encoded ones waiting for the write, and the record it is decoding
 * (its bytes read, its values) or encoding (its values' worth of output).
 * Cached records are evicted to stay within it; a record that cannot be
 * decoded or encoded within it even so is more than a call may do
 * (-E2BIG). With the planes' scratch (a quarter of a record's values) and
 * the OSD's own buffers, a call stays within 64 MiB. */
#define COMPACT_HELD_MAX ((uint64_t)48 << 20)
/* A base this long stays a base: an exact step's record (every value kept
 * whole, about 13 MiB at 2^22 values). As a delta on the next kept step it
 * would be about a sixth smaller, but making it one takes both steps'
 * values and two such records in one call. */
#define COMPACT_KEEP_BASE_BYTES ((uint64_t)8 << 20)

typedef struct dcache {
	rckpt_record_t *rec;          /* [COMPACT_CACHE] */
	uint64_t *used;               /* 0: empty; else when last used */
	uint64_t *bytes;
	uint64_t clock, total;
	int pinned;          /* an entry eviction leaves alone (-1: none) */
	uint64_t record_max; /* elements of the largest record decoded */
	uint64_t fresh;      /* bytes of re-encoded records the call holds */
	uint64_t refused;    /* bytes it would have held: past COMPACT_HELD_MAX */
} dcache_t;

/* The work one call may do, by the records it has seen. */
static uint64_t work_max(const dcache_t *c)
{
	const uint64_t by_records = COMPACT_WORK_RECORDS * c->record_max;
	return by_records > RCKPT_COMPACT_WORK_MAX ? by_records : RCKPT_COMPACT_WORK_MAX;
}

/* What a decoded record holds, about: a byte per level, its protected
 * values and its lossless bytes. */
static uint64_t record_bytes(const rckpt_record_t *r)
{
	uint64_t n = sizeof(*r);
	uint32_t i;
	for (i = 0; i < r->nseg; i++) {
		const rckpt_seg_t *g = &r->seg[i];
		n += sizeof(*g) + (g->idx ? g->n : 0) + 2 * g->nprot +
		     (g->raw ? g->n * rckpt_dtype_size(g->dtype) : 0);
	}
	return n;
}

static int dcache_init(dcache_t *c)
{
	memset(c, 0, sizeof(*c));
	c->pinned = -1;
	c->rec = calloc(COMPACT_CACHE, sizeof(*c->rec));
	c->used = calloc(COMPACT_CACHE, sizeof(*c->used));
	c->bytes = calloc(COMPACT_CACHE, sizeof(*c->bytes));
	return c->rec && c->used && c->bytes ? 0 : -ENOMEM;
}

static void dcache_free(dcache_t *c)
{
	unsigned i;
	for (i = 0; c->used && i < COMPACT_CACHE; i++)
		if (c->used[i])
			rckpt_record_free(&c->rec[i]);
	free(c->rec);
	free(c->used);
	free(c->bytes);
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

static int dcache_index(const dcache_t *c, const rckpt_record_t *r)
{
	return r ? (int)(r - c->rec) : -1;
}

/* The least recently used entry but the pinned one and spare (-1:
 * none); -1 if none. */
static int dcache_lru(const dcache_t *c, int spare)
{
	int i, v = -1;
	for (i = 0; i < COMPACT_CACHE; i++)
		if (c->used[i] && i != c->pinned && i != spare && (v < 0 || c->used[i] < c->used[v]))
			v = i;
	return v;
}

static void dcache_evict(dcache_t *c, int e)
{
	rckpt_record_free(&c->rec[e]);
	c->total -= c->bytes[e];
	c->used[e] = 0;
}

/* Makes room for `more` bytes within COMPACT_HELD_MAX, evicting the least
 * recently used entries but the pinned one and spare; -E2BIG when those
 * and the fresh bytes leave no room. */
static int dcache_room(dcache_t *c, int spare, uint64_t more)
{
	while (c->total + c->fresh + more > COMPACT_HELD_MAX) {
		int e = dcache_lru(c, spare);
		if (e < 0) {
			c->refused = c->total + c->fresh + more;
			return -E2BIG;
		}
		dcache_evict(c, e);
	}
	return 0;
}

/* Takes ownership of *r and returns where it went, evicting the least
 * recently used entries (never the pinned one) while the cache is full or
 * past its bytes. Nothing in the cache is in use across a put but the
 * pinned entry: a fold decodes a record, then puts it. */
static rckpt_record_t *dcache_put(dcache_t *c, rckpt_record_t *r)
{
	const uint64_t nb = record_bytes(r);
	unsigned i, live = 0;
	int v = -1;
	for (i = 0; i < COMPACT_CACHE; i++)
		live += c->used[i] != 0;
	while (live == COMPACT_CACHE || (live > 0 && c->total + nb > COMPACT_CACHE_BYTES)) {
		int e = dcache_lru(c, -1);
		if (e < 0)
			break; /* only the pinned one is left */
		dcache_evict(c, e);
		live--;
	}
	for (i = 0; i < COMPACT_CACHE && v < 0; i++)
		if (!c->used[i])
			v = (int)i; /* there is one: at most one entry is pinned */
	if (v < 0) {
		rckpt_record_free(r);
		return NULL;
	}
	c->rec[v] = *r;
	c->bytes[v] = nb;
	c->total += nb;
	c->used[v] = ++c->clock;
	memset(r, 0, sizeof(*r));
	return &c->rec[v];
}

/* The decoded record of step (cached): walks back to a base or a cached
 * step, then folds forward. */
static int resolve(rckpt_cls_obj_t *o, const walk_t *w, dcache_t *c, uint64_t step,
		   rckpt_record_t **outp, uint64_t *work)
{
	const rckpt_record_limits_t lim = { RCKPT_STORE_CHUNK_SEGMENTS_MAX, crk_elements_max(o) };
	uint32_t *chain = NULL;
	rckpt_record_t next;
	rckpt_record_t *top = NULL;
	rckpt_buf_t raw = RCKPT_BUF_INIT;
	unsigned n = 0, i;
	uint64_t s = step;
	int rc = 0;

	if ((*outp = dcache_find(c, step)) != NULL)
		return 0;
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
		if ((at = crk_find_entry(w, s)) < 0) {
			rc = -EBADMSG; /* a parent that is not in the log */
			goto out;
		}
		chain[n++] = (uint32_t)at;
		if (w->e[at].kind == RCKPT_REC_BASE)
			break;
		s = w->e[at].parent;
	}
	/* fold forward, keeping every step of the way: the steps a stage
	 * re-encodes next are older ones of this chain */
	for (i = n; i-- > 0;) {
		const rckpt_store_entry_t *e = &w->e[chain[i]];
		const int base = e->kind == RCKPT_REC_BASE || top == NULL;
		uint32_t nseg;
		uint64_t values = 0;
		if ((rc = crk_read_record(o, e, &raw)))
			goto out;
		/* room for its values besides its bytes read: a delta's, its
		 * parent's shape; a base's, at most 4 bytes a value */
		if (base && (rc = rckpt_record_geometry(&nseg, &values, raw.p, raw.len)))
			goto out;
		values = base ? 4 * values : record_bytes(top);
		if ((rc = dcache_room(c, dcache_index(c, top), raw.len + values)) ||
		    (rc = rckpt_record_decode(&next, raw.p, raw.len,
					      e->kind == RCKPT_REC_BASE ? NULL : top, &lim)))
			goto out;
		*work += crk_record_elements(&next);
		if (crk_record_elements(&next) > c->record_max)
			c->record_max = crk_record_elements(&next);
		if (*work > work_max(c)) {
			rckpt_record_free(&next);
			rc = -E2BIG;
			goto out;
		}
		if ((top = dcache_put(c, &next)) == NULL) { /* the parent of the next one: spared */
			rc = -ENOMEM;
			goto out;
		}
	}
	*outp = top;
out:
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
	rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX, RCKPT_EST_TRY_ALL, 1,
				    NULL, 1, 0 };
	rckpt_record_t *self, *parent = NULL, r;
	size_t before = enc->len;
	uint32_t i;
	int rc;

	c->fresh = enc->len;
	/* the target first, kept (pinned) while self is resolved, then room
	 * for the output (about its values' bytes at most): only the target
	 * and self need stay */
	if (to && (rc = resolve(o, w, c, *to, &parent, work)))
		return rc;
	c->pinned = dcache_index(c, parent);
	rc = resolve(o, w, c, step, &self, work);
	if (rc == 0)
		rc = dcache_room(c, dcache_index(c, self), record_bytes(self));
	c->pinned = -1;
	if (rc == -E2BIG && c->refused && parent) {
		/* a delta on the target is more than a call may hold (two
		 * exact steps' values and a record): the step is stored whole,
		 * as it is when it is a base already */
		c->refused = 0;
		if (p->e.kind == RCKPT_REC_BASE)
			return 0; /* copied as it is */
		parent = NULL;
		rc = resolve(o, w, c, step, &self, work);
		if (rc == 0)
			rc = dcache_room(c, dcache_index(c, self), record_bytes(self));
	}
	if (rc)
		return rc;
	*work += crk_record_elements(self); /* the encode */
	if (*work > work_max(c))
		return -E2BIG;
	r = *self;
	/* an exact step's record (every value kept) stays in byte planes */
	for (i = 0, is.planes = r.nseg > 0; i < r.nseg; i++)
		if (r.seg[i].encoding != RCKPT_SEG_LOSSLESS)
			is.planes = 0;
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

/* What stays of the log w: the steps m asks for, the newest step <= upto
 * (*top; -1: none), and every step <= upto that a later record applies
 * to. 0, or -EBADMSG (a record's parent is not in the log). */
static int compact_keep(const walk_t *w, const rckpt_msg_compact_t *m, uint8_t *keep, long *top)
{
	uint32_t i, k;
	*top = -1;
	for (i = 0, k = 0; i < w->n && w->e[i].step <= m->upto; i++) {
		while (k < m->keep.n && rckpt_stepset_at(&m->keep, k) < w->e[i].step)
			k++;
		if (k < m->keep.n && rckpt_stepset_at(&m->keep, k) == w->e[i].step)
			keep[i] = 1;
		*top = (long)i;
	}
	if (*top < 0)
		return 0; /* nothing at or before upto */
	keep[*top] = 1;
	for (i = (uint32_t)*top + 1; i < w->n; i++) {
		long at;
		if (w->e[i].kind == RCKPT_REC_BASE || w->e[i].parent > m->upto)
			continue; /* a delta or sparse record keeps its parent */
		if ((at = crk_find_entry(w, w->e[i].parent)) < 0)
			return -EBADMSG;
		keep[at] = 1;
	}
	return 0;
}

/* The new log, in step order (plan[0..*np)). Of the kept steps <= upto,
 * the newest (top) is a base and each older one a delta on the next kept
 * one, except that no chain grows past RCKPT_STORE_CHAIN_REBASE records:
 * walking from top back, a step whose chain would pass it becomes a base,
 * and a base already there stays one when its chain would be at least
 * half that long (so that compactions that follow, with newer steps kept,
 * do not move the bases and rewrite the log). Re-encoded records go to
 * enc; *changed when anything is dropped or re-encoded. */
static int compact_plan(rckpt_cls_obj_t *o, walk_t *w, dcache_t *cache, const rckpt_msg_compact_t *m,
			const uint8_t *keep, long top, plan_t *plan, uint32_t *np, rckpt_buf_t *enc,
			int *changed)
{
	unsigned depth = 0; /* of the kept step after the one at hand */
	uint64_t next = RCKPT_STORE_NONE, work = 0;
	uint32_t i, k;
	int rc = 0;

	*np = 0;
	for (i = 0; i < w->n; i++) {
		plan_t *p = &plan[*np];
		if (w->e[i].step <= m->upto && !keep[i]) {
			*changed = 1; /* dropped */
			continue;
		}
		p->from = i;
		p->e = w->e[i];
		++*np;
	}
	for (k = *np; k-- > 0;) { /* newest first: each resolve finds the next one cached */
		plan_t *p = &plan[k];
		const rckpt_store_entry_t *e = &w->e[p->from];
		int base;
		if (e->step > m->upto)
			continue; /* copied as it is */
		base = (long)p->from == top || depth + 1 > RCKPT_STORE_CHAIN_REBASE ||
		       (e->kind == RCKPT_REC_BASE &&
			(depth + 1 > RCKPT_STORE_CHAIN_REBASE / 2 || e->length > COMPACT_KEEP_BASE_BYTES));
		if (base && e->kind != RCKPT_REC_BASE)
			rc = reencode(o, w, cache, e->step, NULL, enc, p, &work);
		else if (!base && (e->kind != RCKPT_REC_DELTA || e->parent != next))
			rc = reencode(o, w, cache, e->step, &next, enc, p, &work);
		if (rc == -E2BIG && cache->refused)
			return rckpt_cls_fail(o, -E2BIG,
					      "compact: up to step %llu is more than one call may hold (%llu MiB "
					      "at once, at most %llu); ask for less",
					      (unsigned long long)m->upto, (unsigned long long)(cache->refused >> 20),
					      (unsigned long long)(COMPACT_HELD_MAX >> 20));
		if (rc == -E2BIG || rc == -EFBIG)
			return rckpt_cls_fail(o, -E2BIG,
					      "compact: up to step %llu is more than one call may do (%llu "
					      "elements decoded and encoded); ask for less",
					      (unsigned long long)m->upto, (unsigned long long)work);
		if (rc)
			return rc;
		*changed |= p->fresh;
		/* a delta on another layout comes back a base */
		depth = p->e.kind == RCKPT_REC_BASE ? 1 : depth + 1;
		next = e->step;
	}
	return 0;
}

/* The chunk's head record through a compaction (store.md "Head
 * records"): it follows the log's new end when its step stays and it was
 * after every record (then it is checked first, as a record the call
 * copies: a damaged one fails the call); else it goes. */
typedef struct head {
	rckpt_store_entry_t e;
	int had;  /* the chunk had a head entry */
	int keep; /* it is one to keep */
	int kept; /* its step stays */
} head_t;

static int compact_head_read(rckpt_cls_obj_t *o, const walk_t *w, head_t *hd)
{
	uint64_t size = 0, end = 0;
	uint32_t i;
	int rc = o->ops->stat(o, &size);
	memset(hd, 0, sizeof(*hd));
	if (rc == 0)
		rc = crk_get_head(o, size, &hd->e);
	if (rc == -ENOENT)
		return 0;
	hd->had = 1;
	if (rc == -EBADMSG)
		return 0;
	for (i = 0; i < w->n; i++)
		if (w->e[i].offset + w->e[i].length > end)
			end = w->e[i].offset + w->e[i].length;
	hd->keep = rc == 0 && hd->e.offset >= end && hd->e.offset + hd->e.length == size;
	if (rc == 0 && hd->keep) { /* one to keep is checked as any record moved (damage fails the call) */
		rckpt_buf_t b = RCKPT_BUF_INIT;
		rc = crk_read_record(o, &hd->e, &b);
		rckpt_buf_free(&b);
	}
	return rc;
}

/* Moves the head record to the new end, or removes its entry. */
static int compact_head(rckpt_cls_obj_t *o, head_t *hd, uint64_t off, rckpt_buf_t *raw)
{
	uint8_t val[RCKPT_STORE_ENTRY_BYTES];
	int rc;
	if (!hd->keep)
		return hd->had && (rc = o->ops->omap_remove(o, CRK_HEAD_KEY)) != -ENOENT ? rc : 0;
	if (hd->e.offset == off)
		return 0;
	if ((rc = crk_read_record(o, &hd->e, raw)) || (rc = o->ops->write(o, off, raw->p, raw->len)))
		return rc;
	hd->e.offset = off;
	if ((rc = rckpt_store_entry_put(val, &hd->e)))
		return rc;
	return o->ops->omap_set(o, CRK_HEAD_KEY, val, sizeof(val));
}

/* Writes the new log over the old one from the first record that moves
 * or changes (what precedes it stays where it is), record by record: a
 * record copied is read from where it was (a method's reads see the
 * object as it found it, not its own writes), so no more than one record
 * is held besides the re-encoded ones. Then the index entries that
 * changed, and the count. */
static int compact_write(rckpt_cls_obj_t *o, const walk_t *w, plan_t *plan, uint32_t np,
			 const rckpt_buf_t *enc, rckpt_buf_t *raw, head_t *hd)
{
	uint64_t off = 0, from;
	uint32_t i, k, first = np;
	int rc = 0;
	for (i = 0; i < np; i++) {
		plan_t *p = &plan[i];
		p->e.offset = off;
		off += p->e.length;
		if (first == np && (p->fresh || p->e.offset != w->e[p->from].offset))
			first = i;
		if (hd->keep && p->e.step == hd->e.step)
			hd->kept = 1;
	}
	hd->keep &= hd->kept; /* a head record goes with its step */
	from = first < np ? plan[first].e.offset : off;
	/* what moves is held in the OSD's transaction: bounded, checked
	 * before anything is written */
	if (off - from + (hd->keep && hd->e.offset != off ? hd->e.length : 0) > RCKPT_STORE_MOVE_MAX)
		return rckpt_cls_fail(o, -E2BIG, "compact: it would rewrite %llu bytes of the object (at most %llu "
				      "a call): more than a writer's segment holds",
				      (unsigned long long)(off - from), (unsigned long long)RCKPT_STORE_MOVE_MAX);
	for (i = first; i < np && rc == 0; i++) {
		const plan_t *p = &plan[i];
		if (p->fresh)
			rc = o->ops->write(o, p->e.offset, enc->p + p->at, p->e.length);
		else if ((rc = crk_read_record(o, &w->e[p->from], raw)) == 0)
			rc = o->ops->write(o, p->e.offset, raw->p, raw->len);
	}
	if (rc == 0)
		rc = compact_head(o, hd, off, raw);
	if (rc || (rc = o->ops->truncate(o, hd->keep ? off + hd->e.length : off))) /* nothing moved: only a tail goes */
		return rc;
	for (i = 0, k = 0; i < w->n; i++) {
		char key[KEY_MAX];
		const int stays = k < np && plan[k].from == i;
		if (stays && plan[k].e.offset == w->e[i].offset && plan[k].e.length == w->e[i].length &&
		    plan[k].e.kind == w->e[i].kind && plan[k].e.parent == w->e[i].parent) {
			k++;
			continue; /* the same entry */
		}
		if ((rc = rckpt_store_step_key(key, sizeof(key), 'r', w->e[i].step)))
			return rc;
		if (stays) {
			uint8_t val[RCKPT_STORE_ENTRY_BYTES];
			rc = rckpt_store_entry_put(val, &plan[k].e);
			if (rc == 0)
				rc = o->ops->omap_set(o, key, val, sizeof(val));
			k++;
		} else {
			rc = o->ops->omap_remove(o, key);
		}
		if (rc)
			return rc;
	}
	return np != w->n ? crk_set_u64(o, "count", np) : 0;
}

int cls_rckpt_compact(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_compact_t m;
	walk_t w;
	head_t hd;
	dcache_t cache;
	uint8_t *keep = NULL;
	plan_t *plan = NULL;
	rckpt_buf_t enc = RCKPT_BUF_INIT, raw = RCKPT_BUF_INIT;
	uint32_t np = 0;
	long top = -1;
	int changed = 0, rc, newer;

	(void)out;
	memset(&cache, 0, sizeof(cache));
	if (rckpt_msg_compact_decode(&m, in, in_len))
		return rckpt_cls_fail(o, -EINVAL, "compact: a malformed request");
	/* a compactor's token is the job's writer as it read it: a writer
	 * that has touched this chunk since has a newer one (store.md) */
	if ((rc = crk_fence(o, m.token, &newer)) || (rc = crk_is_chunk(o, "compact")))
		return rc;
	if ((rc = crk_all_entries(o, &w)))
		return rc == -ENOENT ? 0 : rc;
	keep = calloc(w.n ? w.n : 1, 1);
	plan = calloc(w.n ? w.n : 1, sizeof(*plan));
	enc.max = COMPACT_FRESH_MAX;
	if (!keep || !plan || dcache_init(&cache)) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = compact_keep(&w, &m, keep, &top)) || top < 0)
		goto out;
	if ((rc = compact_head_read(o, &w, &hd)) ||
	    (rc = compact_plan(o, &w, &cache, &m, keep, top, plan, &np, &enc, &changed)) || !changed)
		goto out;
	dcache_free(&cache); /* the decoded records are done with: the writes hold what moves */
	rc = compact_write(o, &w, plan, np, &enc, &raw, &hd);
out:
	/* a writer's own compaction (before it trims past a rewound head)
	 * fences a compactor that read the token before it, as its trim
	 * would */
	if (rc == 0)
		rc = crk_fence_record(o, m.token, newer);
	dcache_free(&cache);
	rckpt_buf_free(&enc);
	rckpt_buf_free(&raw);
	free(keep);
	free(plan);
	free(w.e);
	return rc;
}
