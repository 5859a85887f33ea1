/*
 * rckpt_group_xchg.c — the exchange of a group save (rckpt_group_xchg.h).
 */
#include "rckpt_group_xchg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_record.h"

#define XCHG_MAGIC 0x474b4352u /* "RCKG" as little-endian bytes */
#define XCHG_HEADER 16u

static size_t esize(const rckpt_tset_t *ts, uint32_t t)
{
	return rckpt_dtype_size(ts->t[t].dtype);
}

/* Copies what held[] has of elements [first, first + n) of tensor t into
 * dst (element first at dst); the elements found. */
static uint64_t copy_held(uint8_t *dst, const rckpt_tset_t *ts, const rckpt_hold_t *held, size_t nheld,
			  uint32_t t, uint64_t first, uint64_t n)
{
	const size_t es = esize(ts, t);
	uint64_t got = 0;
	size_t i;
	for (i = 0; i < nheld; i++) {
		const rckpt_hold_t *h = &held[i];
		uint64_t a, b;
		if (h->tensor != t)
			continue;
		a = h->first > first ? h->first : first;
		b = h->first + h->n < first + n ? h->first + h->n : first + n;
		if (b <= a)
			continue;
		memcpy(dst + (a - first) * es, (const uint8_t *)h->data + (a - h->first) * es, (b - a) * es);
		got += b - a;
	}
	return got;
}

/* The holding that has all of [first, first + n) of tensor t, or NULL. */
static const rckpt_hold_t *whole_in(const rckpt_hold_t *held, size_t nheld, uint32_t t, uint64_t first,
				    uint64_t n)
{
	size_t i;
	for (i = 0; i < nheld; i++)
		if (held[i].tensor == t && held[i].first <= first && first + n <= held[i].first + held[i].n)
			return &held[i];
	return NULL;
}

static int keep_buf(rckpt_group_data_t *d, void *p)
{
	void **b = realloc(d->bufs, sizeof(*b) * (d->nbufs + 1));
	if (b == NULL) {
		free(p);
		return -ENOMEM;
	}
	d->bufs = b;
	d->bufs[d->nbufs++] = p;
	return 0;
}

/* The messages of pair g->xfer[a..b) (one sender, one receiver): this
 * rank sends them, or receives them into *in (the payload) and their
 * positions in it into pos[a..b). */
static int pair(const rckpt_group_plan_t *g, const rckpt_tset_t *ts, const rckpt_hold_t *held, size_t nheld,
		const rckpt_loc_transport_t *tr, size_t a, size_t b, uint8_t **in, size_t *pos,
		rckpt_group_data_t *d)
{
	const unsigned from = g->xfer[a].from, to = g->xfer[a].to;
	uint8_t hdr[XCHG_HEADER], *p;
	uint64_t bytes = 0;
	size_t k;
	int rc;

	for (k = a; k < b; k++) {
		pos[k] = (size_t)bytes;
		bytes += g->xfer[k].n * esize(ts, g->xfer[k].tensor);
	}
	if (tr->rank == from) {
		rckpt_writer_t w = rckpt_writer(hdr, sizeof(hdr));
		rckpt_wr_u32(&w, XCHG_MAGIC);
		rckpt_wr_u32(&w, (uint32_t)(b - a));
		rckpt_wr_u64(&w, bytes);
		if ((p = malloc(bytes ? (size_t)bytes : 1)) == NULL)
			return -ENOMEM;
		for (k = a; k < b; k++)
			if (copy_held(p + pos[k], ts, held, nheld, g->xfer[k].tensor, g->xfer[k].first,
				      g->xfer[k].n) < g->xfer[k].n) {
				free(p);
				return -EINVAL; /* the plan was made from other holdings */
			}
		rc = tr->send(tr->ctx, to, hdr, sizeof(hdr));
		if (rc == 0 && bytes)
			rc = tr->send(tr->ctx, to, p, (size_t)bytes);
		free(p);
		d->sent += bytes;
		return rc;
	}
	/* tr->rank == to */
	if ((rc = tr->recv(tr->ctx, from, hdr, sizeof(hdr))))
		return rc;
	{
		rckpt_reader_t r = rckpt_reader(hdr, sizeof(hdr));
		uint32_t magic = rckpt_rd_u32(&r), m = rckpt_rd_u32(&r);
		uint64_t got = rckpt_rd_u64(&r);
		if (magic != XCHG_MAGIC || m != b - a || got != bytes)
			return -EBADMSG;
	}
	if ((*in = malloc(bytes ? (size_t)bytes : 1)) == NULL)
		return -ENOMEM;
	if ((rc = keep_buf(d, *in)))
		return rc;
	if (bytes && (rc = tr->recv(tr->ctx, from, *in, (size_t)bytes)))
		return rc;
	d->received += bytes;
	return 0;
}

int rckpt_group_exchange(rckpt_group_data_t *out, const rckpt_group_plan_t *g, const rckpt_layout_t *l,
			 const rckpt_tset_t *ts, const rckpt_hold_t *held, size_t nheld,
			 const rckpt_loc_transport_t *tr)
{
	rckpt_group_data_t d;
	const uint8_t **src = NULL; /* per transfer to this rank: its bytes */
	size_t *pos = NULL, a, b, k;
	uint32_t c;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	memset(&d, 0, sizeof(d));
	if (tr->size != g->p || tr->rank >= g->p || g->nchunks != l->nchunks)
		return -EINVAL;
	for (k = 0; k < nheld; k++)
		if (held[k].n && held[k].data == NULL)
			return -EINVAL;
	src = calloc(g->nxfer ? g->nxfer : 1, sizeof(*src));
	pos = calloc(g->nxfer ? g->nxfer : 1, sizeof(*pos));
	if (!src || !pos) {
		rc = -ENOMEM;
		goto out;
	}
	/* every pair in the plan's order; this rank takes part in some */
	for (a = 0; a < g->nxfer && rc == 0; a = b) {
		uint8_t *in = NULL;
		for (b = a + 1; b < g->nxfer && g->xfer[b].from == g->xfer[a].from && g->xfer[b].to == g->xfer[a].to; b++)
			;
		if (g->xfer[a].from != tr->rank && g->xfer[a].to != tr->rank)
			continue;
		rc = pair(g, ts, held, nheld, tr, a, b, &in, pos, &d);
		for (k = a; rc == 0 && in && k < b; k++)
			src[k] = in + pos[k];
	}
	/* the pieces of the chunks this rank encodes, whole */
	for (c = 0; c < l->nchunks && rc == 0; c++) {
		rckpt_owned_t *o;
		if (g->owner[c] != tr->rank)
			continue;
		o = realloc(d.owned, sizeof(*o) * (d.nowned + 1));
		if (o == NULL) {
			rc = -ENOMEM;
			break;
		}
		d.owned = o;
		o = &d.owned[d.nowned];
		o->chunk = c;
		if ((o->data = calloc(l->npieces[c] ? l->npieces[c] : 1, sizeof(*o->data))) == NULL) {
			rc = -ENOMEM;
			break;
		}
		d.nowned++;
		for (k = 0; k < l->npieces[c] && rc == 0; k++) {
			const rckpt_piece_t *pc = &l->pieces[c][k];
			const rckpt_hold_t *h = whole_in(held, nheld, pc->tensor, pc->first, pc->n);
			const size_t es = esize(ts, pc->tensor);
			uint64_t got;
			uint8_t *buf;
			size_t x;
			if (h) {
				o->data[k] = (const uint8_t *)h->data + (pc->first - h->first) * es;
				continue;
			}
			if ((buf = malloc(pc->n ? (size_t)(pc->n * es) : 1)) == NULL || (rc = keep_buf(&d, buf))) {
				rc = -ENOMEM;
				break;
			}
			got = copy_held(buf, ts, held, nheld, pc->tensor, pc->first, pc->n);
			for (x = 0; x < g->nxfer; x++) {
				const rckpt_xfer_t *xf = &g->xfer[x];
				if (xf->to != tr->rank || xf->chunk != c || xf->tensor != pc->tensor || !src[x])
					continue;
				memcpy(buf + (xf->first - pc->first) * es, src[x], (size_t)(xf->n * es));
				got += xf->n;
			}
			if (got != pc->n) /* the plan was made from other holdings */
				rc = -EINVAL;
			o->data[k] = buf;
		}
	}
out:
	free(src);
	free(pos);
	if (rc)
		rckpt_group_data_free(&d);
	else
		*out = d;
	return rc;
}

void rckpt_group_data_free(rckpt_group_data_t *d)
{
	uint32_t i;
	size_t k;
	for (i = 0; i < d->nowned; i++)
		free((void *)d->owned[i].data);
	free(d->owned);
	for (k = 0; k < d->nbufs; k++)
		free(d->bufs[k]);
	free(d->bufs);
	memset(d, 0, sizeof(*d));
}
