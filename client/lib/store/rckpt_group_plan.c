/*
 * rckpt_group_plan.c — the plan of a group save (rckpt_group_plan.h).
 */
#include "rckpt_group_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_codec.h"
#include "rckpt_record.h"

/* One rank's holdings, sorted by (tensor, first) and merged. */
typedef struct holds {
	rckpt_piece_t *r;
	size_t n;
} holds_t;

static int cmp_piece(const void *a, const void *b)
{
	const rckpt_piece_t *x = a, *y = b;
	if (x->tensor != y->tensor)
		return x->tensor < y->tensor ? -1 : 1;
	return (x->first > y->first) - (x->first < y->first);
}

static int holds_make(holds_t *h, const rckpt_tset_t *ts, const rckpt_piece_t *in, size_t n)
{
	size_t i, k = 0;
	memset(h, 0, sizeof(*h));
	for (i = 0; i < n; i++) {
		if (in[i].tensor >= ts->ntensors)
			return -EINVAL;
		if (in[i].first > ts->t[in[i].tensor].n || in[i].n > ts->t[in[i].tensor].n - in[i].first)
			return -ERANGE;
	}
	if ((h->r = malloc(sizeof(*h->r) * (n ? n : 1))) == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		if (in[i].n)
			h->r[k++] = in[i];
	qsort(h->r, k, sizeof(*h->r), cmp_piece);
	for (i = 0, h->n = 0; i < k; i++) {
		rckpt_piece_t *last = h->n ? &h->r[h->n - 1] : NULL;
		if (last && last->tensor == h->r[i].tensor && h->r[i].first <= last->first + last->n) {
			uint64_t end = h->r[i].first + h->r[i].n;
			if (end > last->first + last->n)
				last->n = end - last->first;
		} else {
			h->r[h->n++] = h->r[i];
		}
	}
	return 0;
}

/* The first holding of h that ends after element x of tensor t (its index;
 * h->n when none). */
static size_t holds_find(const holds_t *h, uint32_t t, uint64_t x)
{
	size_t a = 0, b = h->n;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const rckpt_piece_t *r = &h->r[m];
		if (r->tensor < t || (r->tensor == t && r->first + r->n <= x))
			a = m + 1;
		else
			b = m;
	}
	return a;
}

/* Elements of [first, first + n) of tensor t that h holds. */
static uint64_t holds_overlap(const holds_t *h, uint32_t t, uint64_t first, uint64_t n)
{
	uint64_t got = 0, end = first + n;
	size_t i;
	for (i = holds_find(h, t, first); i < h->n && h->r[i].tensor == t && h->r[i].first < end; i++) {
		uint64_t a = h->r[i].first > first ? h->r[i].first : first;
		uint64_t b = h->r[i].first + h->r[i].n < end ? h->r[i].first + h->r[i].n : end;
		got += b - a;
	}
	return got;
}

/* Whether h holds element x of tensor t; *until gets the end of the
 * holding (holding) or the start of the next one (not; UINT64_MAX: none). */
static int holds_at(const holds_t *h, uint32_t t, uint64_t x, uint64_t *until)
{
	size_t i = holds_find(h, t, x);
	if (i < h->n && h->r[i].tensor == t && h->r[i].first <= x) {
		*until = h->r[i].first + h->r[i].n;
		return 1;
	}
	*until = i < h->n && h->r[i].tensor == t ? h->r[i].first : UINT64_MAX;
	return 0;
}

static int cmp_xfer(const void *a, const void *b)
{
	const rckpt_xfer_t *x = a, *y = b;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	if (x->to != y->to)
		return x->to < y->to ? -1 : 1;
	if (x->chunk != y->chunk)
		return x->chunk < y->chunk ? -1 : 1;
	if (x->tensor != y->tensor)
		return x->tensor < y->tensor ? -1 : 1;
	return (x->first > y->first) - (x->first < y->first);
}

static int add_xfer(rckpt_group_plan_t *g, size_t *cap, const rckpt_xfer_t *x)
{
	rckpt_xfer_t *p = rckpt_grow(g->xfer, cap, (size_t)g->nxfer + 1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	g->xfer = p;
	g->xfer[g->nxfer++] = *x;
	return 0;
}

/* The transfers that bring the part [first, first + n) of tensor t that
 * owner o lacks to it, for chunk c. */
static int plan_piece(rckpt_group_plan_t *g, size_t *cap, const holds_t *h, uint32_t c, uint32_t t,
		      uint64_t first, uint64_t n)
{
	const unsigned o = g->owner[c];
	uint64_t x = first, end = first + n;
	while (x < end) {
		uint64_t until, stop = end;
		unsigned r, from = g->p;
		int rc;
		if (holds_at(&h[o], t, x, &until)) { /* the owner has it */
			x = until < end ? until : end;
			continue;
		}
		if (until < stop)
			stop = until; /* where the owner's next holding begins */
		for (r = 0; r < g->p; r++) { /* the lowest rank holding x */
			uint64_t u;
			if (r != o && holds_at(&h[r], t, x, &u)) {
				from = r;
				if (u < stop)
					stop = u;
				break;
			}
		}
		if (from == g->p)
			return -ENOENT; /* nobody holds it */
		{
			const rckpt_xfer_t xf = { c, t, x, stop - x, from, o };
			if ((rc = add_xfer(g, cap, &xf)))
				return rc;
		}
		g->sent[from] += stop - x;
		x = stop;
	}
	return 0;
}

int rckpt_group_plan(rckpt_group_plan_t *out, const rckpt_layout_t *l, const rckpt_tset_t *ts,
		     unsigned p, const rckpt_piece_t *const *held, const size_t *nheld)
{
	rckpt_group_plan_t g;
	holds_t *h = NULL;
	uint64_t *have = NULL;
	size_t cap = 0;
	uint32_t c, k;
	unsigned r;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	memset(&g, 0, sizeof(g));
	if (p == 0)
		return -EINVAL;
	g.p = p;
	g.nchunks = l->nchunks;
	h = calloc(p, sizeof(*h));
	have = calloc(p, sizeof(*have));
	g.owner = calloc(l->nchunks ? l->nchunks : 1, sizeof(*g.owner));
	g.load = calloc(p, sizeof(*g.load));
	g.sent = calloc(p, sizeof(*g.sent));
	if (!h || !have || !g.owner || !g.load || !g.sent) {
		rc = -ENOMEM;
		goto out;
	}
	for (r = 0; r < p && rc == 0; r++)
		rc = holds_make(&h[r], ts, held[r], nheld[r]);
	for (c = 0; c < l->nchunks && rc == 0; c++) {
		unsigned best = 0;
		for (r = 0; r < p; r++) {
			have[r] = 0;
			for (k = 0; k < l->npieces[c]; k++)
				have[r] += holds_overlap(&h[r], l->pieces[c][k].tensor, l->pieces[c][k].first,
							 l->pieces[c][k].n);
			if (have[r] > have[best] || (have[r] == have[best] && g.load[r] < g.load[best]))
				best = r;
		}
		g.owner[c] = best;
		g.load[best] += rckpt_layout_chunk_elements(l, c);
		for (k = 0; k < l->npieces[c] && rc == 0; k++)
			rc = plan_piece(&g, &cap, h, c, l->pieces[c][k].tensor, l->pieces[c][k].first,
					l->pieces[c][k].n);
	}
	if (rc == 0 && g.nxfer)
		qsort(g.xfer, g.nxfer, sizeof(*g.xfer), cmp_xfer);
out:
	for (r = 0; h && r < p; r++)
		free(h[r].r);
	free(h);
	free(have);
	if (rc)
		rckpt_group_plan_free(&g);
	else
		*out = g;
	return rc;
}

void rckpt_group_plan_free(rckpt_group_plan_t *g)
{
	free(g->owner);
	free(g->load);
	free(g->sent);
	free(g->xfer);
	memset(g, 0, sizeof(*g));
}

int rckpt_group_manifest(rckpt_buf_t *out, const rckpt_layout_t *l, const rckpt_tset_t *ts,
			 unsigned lossless_kinds, const rckpt_mf_chunk_t *chunks, const rckpt_manifest_t *mf)
{
	rckpt_manifest_t m = *mf;
	uint32_t c, k, i;
	int rc = 0;

	m.ntensors = ts->ntensors;
	m.nchunks = l->nchunks;
	m.chunk = (rckpt_mf_chunk_t *)chunks;
	m.t = calloc(ts->ntensors ? ts->ntensors : 1, sizeof(*m.t));
	if (m.t == NULL)
		return -ENOMEM;
	for (i = 0; i < ts->ntensors; i++) {
		const rckpt_ctensor_t *t = &ts->t[i];
		const unsigned kind = rckpt_ctensor_kind(t);
		m.t[i].name = (char *)t->name;
		m.t[i].dtype = (uint8_t)t->dtype;
		m.t[i].kind = (uint8_t)kind;
		m.t[i].encoding = lossless_kinds & (1u << kind) ? RCKPT_SEG_LOSSLESS : RCKPT_SEG_QUANTIZED;
		m.t[i].norm = RCKPT_MF_NO_NORM;
		m.t[i].ndim = t->ndim;
		memcpy(m.t[i].shape, t->shape, sizeof(t->shape));
	}
	/* each tensor's segments in element order: the layout's pieces, which
	 * follow each tensor's elements chunk after chunk */
	for (c = 0; c < l->nchunks && rc == 0; c++) {
		uint64_t n = 0;
		if (chunks[c].nseg != l->npieces[c])
			rc = -EINVAL;
		for (k = 0; k < l->npieces[c] && rc == 0; k++) {
			const rckpt_piece_t *pc = &l->pieces[c][k];
			rckpt_mf_tensor_t *t = &m.t[pc->tensor];
			rckpt_mf_seg_t *sg = realloc(t->seg, sizeof(*sg) * (t->nseg + 1));
			if (sg == NULL) {
				rc = -ENOMEM;
				break;
			}
			t->seg = sg;
			t->seg[t->nseg++] = (rckpt_mf_seg_t){ c, k, pc->n };
			n += pc->n;
		}
		if (rc == 0 && chunks[c].elements != n)
			rc = -EINVAL;
	}
	if (rc == 0)
		rc = rckpt_manifest_encode(out, &m);
	for (i = 0; i < ts->ntensors; i++)
		free(m.t[i].seg);
	free(m.t);
	return rc;
}
