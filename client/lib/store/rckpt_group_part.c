/*
 * rckpt_group_part.c — a rank's part of a group step, and the allgather
 * (rckpt_group_part.h).
 */
#include "rckpt_group_part.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_dtype.h"
#include "rckpt_record.h"

void rckpt_group_part_free(rckpt_group_part_t *p)
{
	unsigned i;
	for (i = 0; p->buf && i < p->ts.ntensors; i++)
		free(p->buf[i]);
	free(p->buf);
	free(p->desc);
	free(p->chunk);
	rckpt_tset_free(&p->ts);
	rckpt_layout_free(&p->layout);
	memset(p, 0, sizeof(*p));
}

/* The public dtype of an internal one. */
static unsigned public_dtype(unsigned dt)
{
	return dt == RCKPT_DT_F16 ? RCKPT_F16 : dt == RCKPT_DT_BF16 ? RCKPT_BF16 : RCKPT_F32;
}

int rckpt_group_part_make(rckpt_group_part_t *out, const rckpt_tset_t *ts, const rckpt_layout_t *l,
			  const rckpt_group_data_t *d)
{
	rckpt_group_part_t p;
	uint64_t *have = NULL, *at = NULL;
	uint32_t *map = NULL, nl = 0, i, k, c;
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	memset(&p, 0, sizeof(p));
	have = calloc(ts->ntensors ? ts->ntensors : 1, sizeof(*have));
	at = calloc(ts->ntensors ? ts->ntensors : 1, sizeof(*at));
	map = calloc(ts->ntensors ? ts->ntensors : 1, sizeof(*map));
	p.desc = calloc(ts->ntensors ? ts->ntensors : 1, sizeof(*p.desc));
	p.buf = calloc(ts->ntensors ? ts->ntensors : 1, sizeof(*p.buf));
	p.chunk = calloc(d->nowned ? d->nowned : 1, sizeof(*p.chunk));
	p.layout.pieces = calloc(d->nowned ? d->nowned : 1, sizeof(*p.layout.pieces));
	p.layout.npieces = calloc(d->nowned ? d->nowned : 1, sizeof(*p.layout.npieces));
	if (!have || !at || !map || !p.desc || !p.buf || !p.chunk || !p.layout.pieces || !p.layout.npieces)
		goto out;
	for (c = 0; c < d->nowned; c++) {
		const uint32_t g = d->owned[c].chunk;
		if (g >= l->nchunks) {
			rc = -EINVAL;
			goto out;
		}
		for (k = 0; k < l->npieces[g]; k++)
			have[l->pieces[g][k].tensor] += l->pieces[g][k].n;
	}
	/* the part's tensors, in the global name order */
	for (i = 0; i < ts->ntensors; i++) {
		if (have[i] == 0)
			continue;
		if ((p.buf[nl] = malloc((size_t)(have[i] * rckpt_dtype_size(ts->t[i].dtype)))) == NULL)
			goto out;
		map[i] = nl;
		p.desc[nl] = (rckpt_tensor_t){ ts->t[i].name, public_dtype(ts->t[i].dtype), 1, { have[i] }, p.buf[nl] };
		nl++;
	}
	p.ts.ntensors = 0;
	for (c = 0; c < d->nowned; c++) {
		const uint32_t g = d->owned[c].chunk;
		p.chunk[c] = g;
		if ((p.layout.pieces[c] = calloc(l->npieces[g] ? l->npieces[g] : 1, sizeof(rckpt_piece_t))) == NULL)
			goto out;
		p.layout.npieces[c] = l->npieces[g];
		p.layout.nchunks = c + 1;
		for (k = 0; k < l->npieces[g]; k++) {
			const rckpt_piece_t *pc = &l->pieces[g][k];
			const size_t es = rckpt_dtype_size(ts->t[pc->tensor].dtype);
			const uint32_t li = map[pc->tensor];
			memcpy(p.buf[li] + at[pc->tensor] * es, d->owned[c].data[k], (size_t)(pc->n * es));
			p.layout.pieces[c][k] = (rckpt_piece_t){ li, at[pc->tensor], pc->n, pc->tensor, pc->first };
			at[pc->tensor] += pc->n;
		}
	}
	p.layout.nchunks = d->nowned;
	if ((rc = rckpt_tset_view(&p.ts, p.desc, nl)))
		goto out;
	/* tset_view sorts by name: the global order, so map[] holds */
	for (i = 0; i < ts->ntensors; i++)
		if (have[i])
			p.ts.t[map[i]].kind1 = rckpt_ctensor_kind(&ts->t[i]) + 1;
	rc = 0;
out:
	free(have);
	free(at);
	free(map);
	if (rc) {
		/* the buffers are counted by ts.ntensors once viewed: free them here */
		for (i = 0; p.buf && i < nl; i++)
			free(p.buf[i]);
		free(p.buf);
		p.buf = NULL;
		p.ts.ntensors = 0;
		rckpt_group_part_free(&p);
	} else {
		*out = p;
	}
	return rc;
}

void rckpt_group_gathered_free(uint8_t **all, size_t *lens, unsigned p)
{
	unsigned r;
	for (r = 0; all && r < p; r++)
		free(all[r]);
	free(all);
	free(lens);
}

int rckpt_group_allgather(const rckpt_loc_transport_t *tr, const void *mine, size_t len, size_t max,
			  uint8_t ***allp, size_t **lensp)
{
	const unsigned p = tr->size, me = tr->rank;
	uint8_t **all = calloc(p ? p : 1, sizeof(*all)), hdr[8];
	size_t *lens = calloc(p ? p : 1, sizeof(*lens));
	unsigned a, b;
	int rc = 0;

	*allp = NULL;
	*lensp = NULL;
	if (!all || !lens || (all[me] = malloc(len ? len : 1)) == NULL) {
		rckpt_group_gathered_free(all, lens, p);
		return -ENOMEM;
	}
	memcpy(all[me], mine, len);
	lens[me] = len;
	if (len > max)
		rc = -EMSGSIZE;
	for (a = 0; a < p && rc == 0; a++)
		for (b = 0; b < p && rc == 0; b++) {
			if (a == b || (a != me && b != me))
				continue;
			if (a == me) {
				rckpt_writer_t w = rckpt_writer(hdr, sizeof(hdr));
				rckpt_wr_u64(&w, len);
				rc = tr->send(tr->ctx, b, hdr, sizeof(hdr));
				if (rc == 0 && len)
					rc = tr->send(tr->ctx, b, mine, len);
			} else {
				rckpt_reader_t r = rckpt_reader(hdr, sizeof(hdr));
				uint64_t n;
				if ((rc = tr->recv(tr->ctx, a, hdr, sizeof(hdr))))
					break;
				n = rckpt_rd_u64(&r);
				if (n > max) {
					rc = -EBADMSG;
					break;
				}
				if ((all[a] = malloc(n ? (size_t)n : 1)) == NULL) {
					rc = -ENOMEM;
					break;
				}
				lens[a] = (size_t)n;
				if (n)
					rc = tr->recv(tr->ctx, a, all[a], (size_t)n);
			}
		}
	if (rc) {
		rckpt_group_gathered_free(all, lens, p);
		return rc;
	}
	*allp = all;
	*lensp = lens;
	return 0;
}
