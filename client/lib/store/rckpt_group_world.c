/*
 * rckpt_group_world.c — a group save's view of the model (rckpt_group.c):
 * each rank's shards described as bytes, and from every rank's
 * descriptions the global tensors and what each rank holds of them,
 * checked so that ranks that disagree fail alike.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_dtype.h"
#include "rckpt_group_world.h"
#include "rckpt_store_internal.h"

/* s[0..n) as bytes: u32 n, then per shard u16 name length, the name, u8
 * dtype (public), u8 ndim, u64 shape[ndim], u64 offset, u64 count. */
int rckpt_group_describe(rckpt_buf_t *b, const rckpt_shard_t *s, unsigned n)
{
	unsigned i, d;
	int rc = rckpt_buf_put_u32(b, n);
	for (i = 0; i < n && rc == 0; i++) {
		size_t nl = s[i].name ? strlen(s[i].name) : 0;
		if (nl == 0 || nl > 1024 || s[i].ndim > RCKPT_MAX_DIMS)
			return -EINVAL;
		rc = rckpt_buf_put_u16(b, (uint16_t)nl);
		if (rc == 0)
			rc = rckpt_buf_append(b, s[i].name, nl);
		if (rc == 0)
			rc = rckpt_buf_put_u8(b, (uint8_t)s[i].dtype);
		if (rc == 0)
			rc = rckpt_buf_put_u8(b, (uint8_t)s[i].ndim);
		for (d = 0; d < s[i].ndim && rc == 0; d++)
			rc = rckpt_buf_put_u64(b, s[i].shape[d]);
		if (rc == 0)
			rc = rckpt_buf_put_u64(b, s[i].offset);
		if (rc == 0)
			rc = rckpt_buf_put_u64(b, s[i].count);
	}
	return rc;
}

void rckpt_group_world_free(world_t *w)
{
	unsigned i;
	for (i = 0; w->held && i < w->p; i++)
		free(w->held[i]);
	free(w->held);
	free(w->nheld);
	free(w->t);
	free(w->s);
	rckpt_tset_free(&w->ts);
	memset(w, 0, sizeof(*w));
}

static int cmp_sdesc(const void *a, const void *b)
{
	const sdesc_t *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* Every rank computes the same world from the same bytes, so a bad
 * description fails the step on every rank alike. -EINVAL: descriptions
 * that disagree about a tensor's dtype or shape, a range past its tensor,
 * a malformed one; -ENOMEM. */
int rckpt_group_world_make(world_t *w, uint8_t **all, const size_t *lens, unsigned p)
{
	static const uint8_t placeholder = 0;
	size_t cap = 0, i;
	unsigned r, d;
	int rc = 0;

	memset(w, 0, sizeof(*w));
	w->p = p;
	w->held = calloc(p, sizeof(*w->held));
	w->nheld = calloc(p, sizeof(*w->nheld));
	if (!w->held || !w->nheld)
		return -ENOMEM;
	for (r = 0; r < p && rc == 0; r++) {
		rckpt_reader_t rd = rckpt_reader(all[r], lens[r]);
		uint32_t n = rckpt_rd_u32(&rd), k;
		if (rd.err || n > (1u << 20))
			return -EINVAL;
		for (k = 0; k < n; k++) {
			sdesc_t *x;
			uint16_t nl;
			const uint8_t *name;
			uint64_t numel = 1;
			sdesc_t *g = rckpt_grow(w->s, &cap, (size_t)w->ns + 1, sizeof(*g));
			if (g == NULL)
				return -ENOMEM;
			w->s = g;
			x = &w->s[w->ns];
			memset(x, 0, sizeof(*x));
			x->rank = r;
			nl = rckpt_rd_u16(&rd);
			name = rckpt_rd_bytes(&rd, nl);
			x->dtype = rckpt_rd_u8(&rd);
			x->ndim = rckpt_rd_u8(&rd);
			for (d = 0; d < x->ndim && d < RCKPT_MAX_DIMS; d++)
				x->shape[d] = rckpt_rd_u64(&rd);
			x->offset = rckpt_rd_u64(&rd);
			x->count = rckpt_rd_u64(&rd);
			if (rd.err || nl == 0 || nl > 1024 || x->ndim > RCKPT_MAX_DIMS)
				return -EINVAL;
			memcpy(x->name, name, nl);
			x->name[nl] = '\0';
			for (d = 0; d < x->ndim; d++)
				numel *= x->shape[d];
			if (x->offset > numel || x->count > numel - x->offset)
				return -EINVAL;
			w->ns++;
		}
		if (rd.pos != lens[r])
			return -EINVAL;
	}
	qsort(w->s, w->ns, sizeof(*w->s), cmp_sdesc);
	if ((w->t = calloc(w->ns ? w->ns : 1, sizeof(*w->t))) == NULL)
		return -ENOMEM;
	for (i = 0; i < w->ns; i++) {
		const sdesc_t *x = &w->s[i];
		if (i && strcmp(x->name, w->s[i - 1].name) == 0) {
			const rckpt_tensor_t *t = &w->t[w->nt - 1];
			if (t->dtype != x->dtype || t->ndim != x->ndim ||
			    memcmp(t->shape, x->shape, sizeof(x->shape)) != 0)
				return -EINVAL; /* two ranks disagree about the tensor */
			continue;
		}
		w->t[w->nt] = (rckpt_tensor_t){ x->name, x->dtype, x->ndim, { 0 }, &placeholder };
		memcpy(w->t[w->nt].shape, x->shape, sizeof(x->shape));
		w->nt++;
	}
	if ((rc = rckpt_tset_view(&w->ts, w->t, w->nt)))
		return rc;
	for (r = 0; r < p; r++)
		if ((w->held[r] = calloc(w->ns ? w->ns : 1, sizeof(rckpt_piece_t))) == NULL)
			return -ENOMEM;
	for (i = 0; i < w->ns; i++) {
		const sdesc_t *x = &w->s[i];
		const rckpt_ctensor_t *ct = rckpt_tset_find(&w->ts, x->name);
		const uint32_t ti = (uint32_t)(ct - w->ts.t);
		if (x->count)
			w->held[x->rank][w->nheld[x->rank]++] = (rckpt_piece_t){ ti, x->offset, x->count, ti, x->offset };
	}
	return 0;
}
