/*
 * ckenc_handle.c — the checkpoint encoder's handle (rckpt_ckenc.h): its
 * options and their text form, creation and release, the backend, and
 * what a writer sets between steps. One step is ckenc_step.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt.h"

void rckpt_ckenc_opts_default(rckpt_ckenc_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->mode = RCKPT_CKENC_SEARCH;
	o->eps = RCKPT_EPS_DEFAULT;
	o->opt_eps = RCKPT_OPT_EPS_DEFAULT;
	rckpt_qconfig_default(&o->fixed);
	o->quantizer = RCKPT_QUANTIZER_KMEANS;
	o->use_grads = 1;
	o->is.stages = RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX;
	o->is.est_policy = RCKPT_EST_TRY_ALL | RCKPT_EST_SPLIT;
	o->is.zstd_level = 1;
	o->is.predict = 1;
	o->base_every = 0;
	o->sample_max = 1u << 14;
	o->alloc = 1;
	o->bold_gain = 0.05;
	o->chunk_params = (uint64_t)1 << 22;
	o->par_min_work = (uint64_t)1 << 15;
}

void rckpt_qconfig_format(char *out, size_t cap, const rckpt_qconfig_t *c)
{
	snprintf(out, cap, "bins=%u emb=%u prune=%g metric=%s protect=%g", c->bins, c->emb_bins,
		 (double)c->prune_frac[RCKPT_LK_LINEAR],
		 c->prune_metric == RCKPT_PRUNE_SENSITIVITY ? "sens" : "mag", (double)c->protect_frac);
}

int rckpt_qconfig_parse(rckpt_qconfig_t *c, const char *s)
{
	rckpt_qconfig_t q = *c;
	const char *p = s;
	unsigned k;

	while (*p) {
		char key[16], val[32], *end;
		size_t kl = 0, vl = 0;
		double v;
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		while (*p && *p != '=' && kl + 1 < sizeof(key))
			key[kl++] = *p++;
		key[kl] = '\0';
		if (*p++ != '=')
			return -EINVAL;
		while (*p && *p != ' ' && *p != ',' && vl + 1 < sizeof(val))
			val[vl++] = *p++;
		val[vl] = '\0';
		if (vl == 0)
			return -EINVAL;
		if (strcmp(key, "metric") == 0) {
			if (strcmp(val, "mag") == 0)
				q.prune_metric = RCKPT_PRUNE_MAGNITUDE;
			else if (strcmp(val, "sens") == 0)
				q.prune_metric = RCKPT_PRUNE_SENSITIVITY;
			else
				return -EINVAL;
			q.protect_by_sensitivity = q.prune_metric == RCKPT_PRUNE_SENSITIVITY;
			continue;
		}
		v = strtod(val, &end);
		if (*end || !(v >= 0))
			return -EINVAL;
		if (strcmp(key, "bins") == 0 || strcmp(key, "emb") == 0) {
			if (v != (unsigned)v || v < 1 || v > RCKPT_MAX_BINS)
				return -EINVAL;
			*(strcmp(key, "bins") == 0 ? &q.bins : &q.emb_bins) = (unsigned)v;
		} else if (strcmp(key, "prune") == 0) {
			if (v >= 1)
				return -EINVAL;
			for (k = 0; k < RCKPT_LK_COUNT; k++)
				if (k != RCKPT_LK_EMBEDDING)
					q.prune_frac[k] = (float)v;
		} else if (strcmp(key, "protect") == 0) {
			if (v >= 1)
				return -EINVAL;
			q.protect_frac = (float)v;
		} else {
			return -EINVAL;
		}
	}
	*c = q;
	return 0;
}

int rckpt_ckenc_resume(rckpt_ckenc_t *e, rckpt_ckdec_t *d)
{
	rckpt_ckdec_t *r;
	if (e->steps != 0 || d->chunk == NULL)
		return -EINVAL;
	if ((r = malloc(sizeof(*r))) == NULL)
		return -ENOMEM;
	*r = *d;
	memset(d, 0, sizeof(*d));
	if (e->resume) {
		rckpt_ckdec_free(e->resume);
		free(e->resume);
	}
	e->resume = r;
	return 0;
}

void rckpt_ckenc_set_plain_moments(rckpt_ckenc_t *e, int on)
{
	e->o.plain_moments = on || e->o.partial_block;
}

int rckpt_ckenc_set_eps(rckpt_ckenc_t *e, double eps, double opt_eps)
{
	if (!(eps >= 0 && eps < 1) || !(opt_eps >= 0 && opt_eps < 1))
		return -EINVAL;
	if (eps > 0)
		e->o.eps = eps;
	if (opt_eps > 0)
		e->o.opt_eps = opt_eps;
	return 0;
}

int rckpt_ckenc_keeps_layout(const rckpt_ckenc_t *e, const rckpt_tset_t *params)
{
	if (e->resume)
		return ckenc_resume_matches(e, params);
	return e->steps == 0 || ckenc_same_tensors(e, params);
}

void rckpt_ckenc_restart(rckpt_ckenc_t *e)
{
	e->force_base = 1;
}

void rckpt_ckenc_set_depth(rckpt_ckenc_t *e, unsigned depth)
{
	e->depth = depth;
}

unsigned rckpt_ckenc_depth(const rckpt_ckenc_t *e)
{
	return e->depth;
}

int rckpt_ckenc_create(rckpt_ckenc_t **out, const rckpt_ckenc_opts_t *o)
{
	rckpt_ckenc_t *e;

	*out = NULL;
	if (o->eps < 0 || o->quantizer > RCKPT_QUANTIZER_UNIFORM || o->mode > RCKPT_CKENC_BITWIDTH ||
	    o->sample_max == 0 || o->chunk_params == 0 || o->chunk_params > ((uint64_t)1 << 31))
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	e->o = *o;
	e->o.is.scratch = &e->is_scratch;
	if (o->partial_block) /* a partial step's blocks decode alone */
		e->o.plain_moments = 1;
	e->be = o->gpu ? &ckenc_cuda_backend : &ckenc_cpu_backend;
	e->wblk = malloc(4 * (size_t)BLK);
	e->nblk = malloc(4 * (size_t)BLK);
	e->iblk = malloc(BLK);
	e->pblk = malloc(2 * (size_t)BLK);
	if (!e->wblk || !e->nblk || !e->iblk || !e->pblk) {
		rckpt_ckenc_destroy(e);
		return -ENOMEM;
	}
	*out = e;
	return 0;
}

void rckpt_ckenc_destroy(rckpt_ckenc_t *e)
{
	if (e == NULL)
		return;
	if (e->resume) {
		rckpt_ckdec_free(e->resume);
		free(e->resume);
	}
	ckenc_free_layout(e);
	ckenc_free_prev_samples(e);
	ckenc_free_allocs(e);
	rckpt_istream_scratch_free(&e->is_scratch);
	ckenc_workers_free(e);
	rckpt_record_free(&e->prev);
	ckenc_free_saved(e);
	ckenc_free_names(e);
	free(e->wblk);
	free(e->nblk);
	free(e->iblk);
	free(e->pblk);
	free(e);
}

void rckpt_ckenc_set_gpu(rckpt_ckenc_t *e, struct rckpt_gpuenc *g)
{
	e->o.gpu = g;
	e->be = g ? &ckenc_cuda_backend : &ckenc_cpu_backend;
}

void rckpt_ckenc_limit_records(rckpt_ckenc_t *e, unsigned max_version)
{
	if (max_version < 6)
		e->o.is.est_policy &= ~RCKPT_EST_SPLIT;
	if (max_version < 4)
		e->o.is.predict = 0;
	if (max_version < 3)
		e->o.is.stages &= ~RCKPT_IS_CTX;
}
