/*
 * ckenc_state.c — the encoder's state between steps, and what every stage
 * reads of it: the transform a tensor's values take, the last step's
 * summary that seeds k-means, the chunk layout, the tensors' names, and
 * their release. The floor of the encoder's files: it calls none of them.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The index of the tensor whose values normalize t (a NORM first moment
 * over its second moment's root), or -1. */
int ckenc_norm_of(const rckpt_ckenc_t *e, const rckpt_ctensor_t *t)
{
	const rckpt_tset_t *p = e->xparams;
	if (p == NULL || e->xnorm == NULL || t < p->t || t >= p->t + p->ntensors)
		return -1;
	return e->xnorm[t - p->t];
}

unsigned ckenc_value_xf(const rckpt_ckenc_t *e, unsigned kind)
{
	return kind == RCKPT_LK_MOMENT2 && e->o.moment2_linear ? RCKPT_XF_NONE : rckpt_lk_transform(kind);
}

unsigned ckenc_transform_of(const rckpt_ckenc_t *e, const rckpt_ctensor_t *t)
{
	return ckenc_norm_of(e, t) >= 0 ? RCKPT_XF_NORM : ckenc_value_xf(e, rckpt_ctensor_kind(t));
}

/* The last step's summary of tensor i, when quantized: it seeds k-means. */
const rckpt_seg_t *ckenc_warm_of(const rckpt_ckenc_t *e, unsigned i)
{
	return e->steps && e->prev.seg[i].encoding == RCKPT_SEG_QUANTIZED ? &e->prev.seg[i] : NULL;
}

/* Lays the tensors out per kind (embedding, conv, linear, other,
 * norm/bias), in name order, and cuts each kind's space into chunks of at
 * most chunk_params elements and RCKPT_STORE_CHUNK_SEGMENTS_MAX pieces
 * (what the plugin decodes of one record). */
int ckenc_build_layout(rckpt_ckenc_t *e, const rckpt_tset_t *params)
{
	rckpt_layout_t l;
	int rc;

	ckenc_free_layout(e);
	if ((rc = e->o.layout ? rckpt_layout_copy(&l, e->o.layout)
			      : rckpt_layout_build(&l, params, e->o.chunk_params)))
		return rc;
	e->nchunks = l.nchunks;
	e->pieces = l.pieces;
	e->npieces = l.npieces;
	e->prev_chunks = calloc(e->nchunks ? e->nchunks : 1, sizeof(*e->prev_chunks));
	return e->prev_chunks ? 0 : -ENOMEM;
}

void ckenc_free_names(rckpt_ckenc_t *e)
{
	unsigned i;
	for (i = 0; e->names && i < e->ntensors; i++)
		free(e->names[i]);
	free(e->names);
	e->names = NULL;
	e->ntensors = 0;
}

void ckenc_free_saved(rckpt_ckenc_t *e)
{
	unsigned i;
	for (i = 0; e->saved && i < e->ntensors; i++)
		free(e->saved[i]);
	free(e->saved);
	free(e->lastq);
	e->saved = NULL;
	e->lastq = NULL;
}

void ckenc_free_allocs(rckpt_ckenc_t *e)
{
	unsigned k;
	for (k = 0; k < 3; k++) {
		free(e->palloc[k]);
		e->palloc[k] = NULL;
		e->npalloc[k] = 0;
	}
}

void ckenc_free_prev_samples(rckpt_ckenc_t *e)
{
	unsigned i;
	for (i = 0; i < e->npsmp; i++) {
		free(e->psmp[i].w);
		free(e->psmp[i].g);
	}
	free(e->psmp);
	e->psmp = NULL;
	e->npsmp = 0;
}

void ckenc_free_layout(rckpt_ckenc_t *e)
{
	uint32_t c;
	for (c = 0; c < e->nchunks; c++) {
		free(e->pieces ? e->pieces[c] : NULL);
		if (e->prev_chunks)
			rckpt_record_free(&e->prev_chunks[c]);
	}
	free(e->pieces);
	free(e->npieces);
	free(e->prev_chunks);
	e->pieces = NULL;
	e->npieces = NULL;
	e->prev_chunks = NULL;
	e->nchunks = 0;
}

/* Whether params are the last step's tensors (names, sizes, dtypes). */
int ckenc_same_tensors(const rckpt_ckenc_t *e, const rckpt_tset_t *params)
{
	unsigned i;
	if (params->ntensors != e->ntensors || e->prev.nseg < params->ntensors)
		return 0;
	for (i = 0; i < params->ntensors; i++)
		if (strcmp(params->t[i].name, e->names[i]) != 0 || params->t[i].n != e->prev.seg[i].n ||
		    params->t[i].dtype != e->prev.seg[i].dtype)
			return 0;
	return 1;
}

/* The names of params, as the tensors of every step from now on. */
int ckenc_take_names(rckpt_ckenc_t *e, const rckpt_tset_t *params)
{
	unsigned i;
	ckenc_free_names(e);
	e->names = calloc(params->ntensors ? params->ntensors : 1, sizeof(char *));
	if (e->names == NULL)
		return -ENOMEM;
	for (i = 0; i < params->ntensors; i++) {
		e->names[i] = strdup(params->t[i].name);
		if (e->names[i] == NULL)
			return -ENOMEM;
		e->ntensors++;
	}
	return 0;
}
