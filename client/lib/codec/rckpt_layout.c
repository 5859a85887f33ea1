/*
 * rckpt_layout.c — the chunk layout (rckpt_layout.h).
 */
#include "rckpt_layout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_codec.h"
#include "rckpt_store_wire.h"

void rckpt_layout_free(rckpt_layout_t *l)
{
	uint32_t c;
	for (c = 0; l->pieces && c < l->nchunks; c++)
		free(l->pieces[c]);
	free(l->pieces);
	free(l->npieces);
	memset(l, 0, sizeof(*l));
}

/* A new, empty chunk at the end. */
static int add_chunk(rckpt_layout_t *l)
{
	void *a = realloc(l->pieces, sizeof(*l->pieces) * (l->nchunks + 1));
	void *b = a ? realloc(l->npieces, sizeof(*l->npieces) * (l->nchunks + 1)) : NULL;
	if (a)
		l->pieces = a;
	if (b)
		l->npieces = b;
	if (!a || !b)
		return -ENOMEM;
	l->pieces[l->nchunks] = NULL;
	l->npieces[l->nchunks] = 0;
	l->nchunks++;
	return 0;
}

int rckpt_layout_build(rckpt_layout_t *out, const rckpt_tset_t *ts, uint64_t cap)
{
	static const unsigned order[RCKPT_LK_COUNT] = {
		RCKPT_LK_EMBEDDING, RCKPT_LK_CONV,    RCKPT_LK_LINEAR,	 RCKPT_LK_OTHER,
		RCKPT_LK_NORM_BIAS, RCKPT_LK_MOMENT1, RCKPT_LK_MOMENT2, RCKPT_LK_OPTIM
	};
	rckpt_layout_t l;
	unsigned k, i;
	int rc = 0;

	memset(&l, 0, sizeof(l));
	memset(out, 0, sizeof(*out));
	for (k = 0; k < RCKPT_LK_COUNT && rc == 0; k++) {
		int open = 0; /* a chunk of this kind with room */
		uint64_t fill = 0;
		for (i = 0; i < ts->ntensors && rc == 0; i++) {
			const rckpt_ctensor_t *t = &ts->t[i];
			uint64_t first = 0;
			if (rckpt_ctensor_kind(t) != order[k])
				continue;
			do {
				uint64_t take;
				uint32_t c;
				rckpt_piece_t *pc;
				if (!open || (fill == cap && t->n > first) ||
				    l.npieces[l.nchunks - 1] == RCKPT_STORE_CHUNK_SEGMENTS_MAX) {
					if ((rc = add_chunk(&l)))
						break;
					open = 1;
					fill = 0;
				}
				c = l.nchunks - 1;
				take = t->n - first < cap - fill ? t->n - first : cap - fill;
				pc = realloc(l.pieces[c], sizeof(*pc) * (l.npieces[c] + 1));
				if (pc == NULL) {
					rc = -ENOMEM;
					break;
				}
				l.pieces[c] = pc;
				pc[l.npieces[c]++] = (rckpt_piece_t){ i, first, take, i, first };
				first += take;
				fill += take;
			} while (first < t->n);
		}
	}
	if (rc) {
		rckpt_layout_free(&l);
		return rc;
	}
	*out = l;
	return 0;
}

uint64_t rckpt_layout_chunk_elements(const rckpt_layout_t *l, uint32_t c)
{
	uint64_t n = 0;
	uint32_t k;
	for (k = 0; c < l->nchunks && k < l->npieces[c]; k++)
		n += l->pieces[c][k].n;
	return n;
}

int rckpt_layout_copy(rckpt_layout_t *out, const rckpt_layout_t *l)
{
	uint32_t c;
	memset(out, 0, sizeof(*out));
	out->pieces = calloc(l->nchunks ? l->nchunks : 1, sizeof(*out->pieces));
	out->npieces = calloc(l->nchunks ? l->nchunks : 1, sizeof(*out->npieces));
	if (!out->pieces || !out->npieces) {
		rckpt_layout_free(out);
		return -ENOMEM;
	}
	out->nchunks = l->nchunks;
	for (c = 0; c < l->nchunks; c++) {
		out->pieces[c] = malloc(sizeof(**out->pieces) * (l->npieces[c] ? l->npieces[c] : 1));
		if (out->pieces[c] == NULL) {
			rckpt_layout_free(out);
			return -ENOMEM;
		}
		memcpy(out->pieces[c], l->pieces[c], sizeof(**out->pieces) * l->npieces[c]);
		out->npieces[c] = l->npieces[c];
	}
	return 0;
}
