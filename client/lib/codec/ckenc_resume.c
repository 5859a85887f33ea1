/*
 * ckenc_resume.c — a writer that continues a chain it did not write: the
 * committed step's levels become the chunks' parents, its codebooks the
 * warm starts, its configuration the search's last accepted one; and a
 * step whose tensors differ from the last one's, which keeps what it can
 * of the encoder's state under a new layout.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Whether the committed step of manifest mf holds params' tensors as
 * this encoder would (names, sizes, dtypes, kinds, encodings, NORM
 * partners). */
static int adopt_same_tensors(const rckpt_ckenc_t *e, const rckpt_tset_t *params, const rckpt_manifest_t *mf)
{
	unsigned i;
	if (mf->ntensors != params->ntensors || mf->chunk_params != e->o.chunk_params)
		return 0;
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_ctensor_t *t = &params->t[i];
		const unsigned kind = rckpt_ctensor_kind(t);
		const unsigned enc = e->o.fixed.lossless_kinds & (1u << kind) ? RCKPT_SEG_LOSSLESS
									       : RCKPT_SEG_QUANTIZED;
		const int norm = ckenc_norm_partner(&e->o, params, i);
		uint64_t n = 1;
		unsigned k;
		for (k = 0; k < mf->t[i].ndim; k++)
			n *= mf->t[i].shape[k];
		if (strcmp(mf->t[i].name, t->name) != 0 || mf->t[i].dtype != t->dtype || n != t->n ||
		    mf->t[i].kind != kind || mf->t[i].encoding != enc ||
		    (norm < 0 ? mf->t[i].norm != RCKPT_MF_NO_NORM : mf->t[i].norm != (uint32_t)norm))
			return 0;
	}
	return 1;
}

/* Whether step d is laid out in e's chunks and pieces (e's layout built
 * for params). */
static int adopt_same_chunks(const rckpt_ckenc_t *e, const rckpt_tset_t *params, const rckpt_ckdec_t *d)
{
	const rckpt_manifest_t *mf = &d->mf;
	unsigned i, total = 0;
	uint32_t c, k;

	if (e->nchunks != mf->nchunks)
		return 0;
	for (c = 0; c < e->nchunks; c++) {
		if (d->chunk[c].nseg != e->npieces[c])
			return 0;
		total += e->npieces[c];
	}
	for (i = 0; i < params->ntensors; i++) {
		uint64_t at = 0;
		for (k = 0; k < mf->t[i].nseg; k++, total--) {
			const rckpt_mf_seg_t *ms = &mf->t[i].seg[k];
			const rckpt_piece_t *pc;
			const rckpt_seg_t *sg;
			if (total == 0 || ms->chunk >= e->nchunks || ms->index >= e->npieces[ms->chunk])
				return 0;
			pc = &e->pieces[ms->chunk][ms->index];
			sg = &d->chunk[ms->chunk].seg[ms->index];
			if (pc->tensor != i || pc->first != at || pc->n != ms->n || sg->n != ms->n ||
			    sg->encoding != mf->t[i].encoding)
				return 0;
			at += ms->n;
		}
		if (at != params->t[i].n)
			return 0;
	}
	return total == 0;
}

/* The summary the next step's search reads (e->prev): each quantized
 * tensor's codebook and its levels at the sample positions; d's segments
 * renamed as this encoder's records name them; the tensors' names. 0 or
 * -ENOMEM. */
static int adopt_summary(rckpt_ckenc_t *e, const rckpt_tset_t *params, rckpt_ckdec_t *d,
			 const uint64_t *stride)
{
	const rckpt_manifest_t *mf = &d->mf;
	unsigned i;
	uint32_t c, k;

	rckpt_record_free(&e->prev);
	e->prev.step = mf->step;
	e->prev.nseg = params->ntensors;
	e->prev.seg = calloc(params->ntensors ? params->ntensors : 1, sizeof(*e->prev.seg));
	if (e->prev.seg == NULL)
		return -ENOMEM;
	for (i = 0; i < params->ntensors; i++) {
		rckpt_seg_t *s = &e->prev.seg[i];
		const uint64_t n = params->t[i].n;
		s->tensor = i;
		s->n = n;
		s->dtype = (uint8_t)params->t[i].dtype;
		s->encoding = mf->t[i].encoding;
		if (s->encoding == RCKPT_SEG_QUANTIZED)
			s->transform = (uint8_t)(mf->t[i].norm != RCKPT_MF_NO_NORM
							 ? RCKPT_XF_NORM
							 : ckenc_value_xf(e, mf->t[i].kind));
		if (s->encoding != RCKPT_SEG_QUANTIZED || mf->t[i].nseg == 0)
			continue;
		if ((s->idx = calloc(n / stride[i] + 1, 1)) == NULL)
			return -ENOMEM;
	}
	for (c = 0; c < e->nchunks; c++)
		for (k = 0; k < e->npieces[c]; k++) {
			const rckpt_piece_t *pc = &e->pieces[c][k];
			rckpt_seg_t *sg = &d->chunk[c].seg[k], *s = &e->prev.seg[pc->tensor];
			uint64_t u;
			sg->tensor = pc->gtensor; /* as this encoder's records name it */
			sg->first = pc->gfirst;
			if (s->idx == NULL)
				continue;
			if (pc->first == 0) { /* every piece of a tensor has its codebook */
				s->nbins = sg->nbins;
				memcpy(s->centroids, sg->centroids, sizeof(s->centroids));
			}
			for (u = (pc->first + stride[pc->tensor] - 1) / stride[pc->tensor] * stride[pc->tensor];
			     u < pc->first + pc->n; u += stride[pc->tensor])
				s->idx[u / stride[pc->tensor]] = sg->idx[u - pc->first];
		}
	ckenc_free_names(e);
	e->names = calloc(params->ntensors ? params->ntensors : 1, sizeof(char *));
	for (i = 0; e->names && i < params->ntensors; i++, e->ntensors++)
		if ((e->names[i] = strdup(params->t[i].name)) == NULL)
			break;
	return e->names == NULL || e->ntensors != params->ntensors ? -ENOMEM : 0;
}

/* The step's values at the sample positions, dequantized (e->psmp, in
 * the order a step prepares its tensors): the search weighs how stable a
 * configuration's levels are against them, as it would against the
 * samples of a step it had written itself. 0 or -ENOMEM. */
static int adopt_samples(rckpt_ckenc_t *e, const rckpt_tset_t *params, const rckpt_ckdec_t *d,
			 const uint64_t *stride)
{
	unsigned i, k, nq, *slot;
	uint32_t c;
	int rc = 0;

	ckenc_free_prev_samples(e);
	e->psmp = calloc(params->ntensors ? params->ntensors : 1, sizeof(*e->psmp));
	slot = calloc(params->ntensors ? params->ntensors : 1, sizeof(*slot));
	if (e->psmp == NULL || slot == NULL) {
		free(slot);
		return -ENOMEM;
	}
	nq = ckenc_prep_order(&e->o, params, slot, NULL, NULL);
	for (k = 0; k < nq && rc == 0; k++) { /* in the order a step prepares them */
		struct prev_sample *ps = &e->psmp[e->npsmp];
		i = slot[k];
		e->npsmp++;
		ps->tensor = i;
		ps->n = (size_t)((params->t[i].n + stride[i] - 1) / stride[i]);
		if ((ps->w = malloc(4 * (ps->n ? ps->n : 1))) == NULL)
			rc = -ENOMEM;
	}
	for (c = 0; c < e->nchunks && rc == 0; c++)
		for (k = 0; k < e->npieces[c] && rc == 0; k++) {
			const rckpt_piece_t *pc = &e->pieces[c][k];
			const rckpt_seg_t *sg = &d->chunk[c].seg[k];
			const uint64_t st = stride[pc->tensor];
			struct prev_sample *ps = NULL;
			float *f;
			uint64_t u;
			unsigned pi;
			if (sg->encoding != RCKPT_SEG_QUANTIZED || pc->n == 0)
				continue;
			for (pi = 0; pi < nq && slot[pi] != pc->tensor; pi++) /* its place */
				;
			if (pi == nq)
				continue;
			ps = &e->psmp[pi];
			if ((f = malloc(4 * (size_t)pc->n)) == NULL) {
				rc = -ENOMEM;
				break;
			}
			if (rckpt_codec_decode_f32(f, sg) != 0)
				memset(f, 0, 4 * (size_t)pc->n);
			for (u = (pc->first + st - 1) / st * st; u < pc->first + pc->n; u += st)
				ps->w[u / st] = f[u - pc->first];
			free(f);
		}
	free(slot);
	return rc;
}

int ckenc_resume_matches(const rckpt_ckenc_t *e, const rckpt_tset_t *params)
{
	return e->resume && adopt_same_tensors(e, params, &e->resume->mf);
}

/* Takes up e->resume when params are the tensors of that step, laid out in
 * the same chunks (same chunk size, same encodings): the step's levels
 * become the chunks' parents and its codebooks the warm starts, as if this
 * encoder had written it. 0 taken up, 1 not (the next step is a base), or
 * -ENOMEM. e->resume is gone either way. */
int ckenc_adopt(rckpt_ckenc_t *e, const rckpt_tset_t *params)
{
	rckpt_ckdec_t *d = e->resume;
	const rckpt_manifest_t *mf = &d->mf;
	uint64_t *stride = NULL;
	unsigned i;
	uint32_t c;
	int rc;

	e->resume = NULL;
	if (!adopt_same_tensors(e, params, mf)) {
		rc = 1;
		goto out;
	}
	if ((rc = ckenc_build_layout(e, params)) != 0)
		goto out;
	if (!adopt_same_chunks(e, params, d)) {
		rc = 1;
		goto fail;
	}
	if ((stride = calloc(params->ntensors ? params->ntensors : 1, sizeof(*stride))) == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < params->ntensors; i++) {
		const uint64_t n = params->t[i].n;
		stride[i] = n > e->o.sample_max ? (n + e->o.sample_max - 1) / e->o.sample_max : 1;
	}
	if ((rc = adopt_summary(e, params, d, stride)) || (rc = adopt_samples(e, params, d, stride)))
		goto fail;
	for (c = 0; c < e->nchunks; c++) { /* the step's levels: the next deltas' parents */
		e->prev_chunks[c] = d->chunk[c];
		memset(&d->chunk[c], 0, sizeof(d->chunk[c]));
	}
	ckenc_free_allocs(e); /* a writer's allocation is its own */
	e->have_plast[0] = ckenc_point_of(&e->plast[0], &mf->cfg); /* the optimizer's: searched anew */
	/* As if this encoder had written the chain: after a base the next step
	 * is the second (which searches the whole space again, now that it can
	 * weigh how stable each configuration is); after a delta, a later one
	 * (the neighbourhood of the configuration the chain runs with). */
	e->steps = mf->parent == RCKPT_NO_PARENT ? 1 : 2;
	/* e->force_base stays: a restart after the resume (a writer that
	 * begins a segment) makes this step a base, with the step's
	 * codebooks as warm starts all the same */
	goto out;
fail:
	ckenc_free_prev_samples(e);
	ckenc_free_layout(e);
	ckenc_free_names(e);
	rckpt_record_free(&e->prev);
	memset(&e->prev, 0, sizeof(e->prev));
out:
	free(stride);
	rckpt_ckdec_free(d);
	free(d);
	return rc;
}

/* The step's tensors differ from the last step's: new chunks, every
 * record a base, and what the encoder knows of a tensor that is still
 * there (its codebook, its levels at the sample positions, its samples)
 * moved to its new index, so that the steps after this one are deltas as
 * small as before. A tensor added, resized or retyped starts anew. The
 * per-tensor allocations are chosen again; a partial step waits for the
 * next full one. 0 or -ENOMEM (the next step is then a base of a fresh
 * encoder's state). */
int ckenc_relayout(rckpt_ckenc_t *e, const rckpt_tset_t *params)
{
	const unsigned nt = params->ntensors;
	rckpt_record_t prev = { 0 };
	struct prev_sample *psmp = NULL;
	unsigned *order = NULL, *slot = NULL, i, j, k, nq = 0;
	int rc = -ENOMEM;

	prev.step = e->prev.step;
	prev.nseg = nt;
	prev.seg = calloc(nt ? nt : 1, sizeof(*prev.seg));
	slot = malloc(sizeof(*slot) * (nt ? nt : 1)); /* new tensor -> old, or UINT_MAX */
	order = malloc(sizeof(*order) * (nt ? nt : 1));
	psmp = calloc(nt ? nt : 1, sizeof(*psmp));
	if (!prev.seg || !slot || !order || !psmp)
		goto out;
	for (i = j = 0; i < nt; i++) { /* both sorted by name */
		int c = 1;
		while (j < e->ntensors && (c = strcmp(e->names[j], params->t[i].name)) < 0)
			j++;
		slot[i] = c == 0 && j < e->prev.nseg && e->prev.seg[j].n == params->t[i].n &&
				  e->prev.seg[j].dtype == params->t[i].dtype
			  ? j
			  : UINT_MAX;
		if (slot[i] != UINT_MAX) {
			prev.seg[i] = e->prev.seg[j];
			prev.seg[i].tensor = i;
			memset(&e->prev.seg[j], 0, sizeof(e->prev.seg[j]));
		}
	}
	/* the samples, in the order this step prepares its tensors */
	nq = ckenc_prep_order(&e->o, params, order, NULL, NULL);
	for (k = 0; k < nq; k++) {
		const unsigned old = slot[order[k]];
		for (j = 0; old != UINT_MAX && j < e->npsmp; j++)
			if (e->psmp[j].tensor == old && e->psmp[j].w) {
				psmp[k] = e->psmp[j];
				memset(&e->psmp[j], 0, sizeof(e->psmp[j]));
				break;
			}
		psmp[k].tensor = order[k];
	}
	rc = 0;
out:
	ckenc_free_saved(e);
	ckenc_free_allocs(e);
	ckenc_free_prev_samples(e);
	ckenc_free_layout(e);
	rckpt_record_free(&e->prev);
	memset(&e->prev, 0, sizeof(e->prev));
	if (rc == 0) {
		e->prev = prev;
		e->psmp = psmp;
		e->npsmp = nq;
		rc = ckenc_take_names(e, params);
	} else {
		rckpt_record_free(&prev);
		free(psmp);
		ckenc_free_names(e);
		e->steps = 0;
	}
	free(slot);
	free(order);
	e->force_base = 1;
	return rc;
}
