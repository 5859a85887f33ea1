/*
 * rckpt_ckenc.c — the checkpoint encoder: its handle and options, and one
 * full step (prepare, choose a configuration, judge it, emit). Its parts
 * live beside it (ckenc_impl.h names them).
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"
#include "rckpt_store_wire.h" /* RCKPT_STORE_CHAIN_REBASE */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt.h"
#include "rckpt_clock.h"

void rckpt_ckenc_opts_default(rckpt_ckenc_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->mode = RCKPT_CKENC_SEARCH;
	o->eps = RCKPT_EPS_DEFAULT;
	rckpt_qconfig_default(&o->fixed);
	o->quantizer = RCKPT_QUANTIZER_KMEANS;
	o->use_grads = 1;
	o->is.stages = RCKPT_IS_REARRANGED | RCKPT_IS_RLE;
	o->is.est_policy = RCKPT_EST_TRY_ALL;
	o->is.zstd_level = 1;
	o->base_every = 0;
	o->sample_max = 1u << 14;
	o->alloc = 1;
	o->chunk_params = (uint64_t)1 << 22;
}

void rckpt_ckenc_out_free(rckpt_ckenc_out_t *o)
{
	uint32_t i;
	rckpt_buf_free(&o->manifest);
	for (i = 0; o->records && i < o->nchunks; i++)
		rckpt_buf_free(&o->records[i]);
	free(o->records);
	memset(o, 0, sizeof(*o));
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
	e->be = o->gpu ? &ckenc_cuda_backend : &ckenc_cpu_backend;
	e->wblk = malloc(4 * (size_t)BLK);
	e->iblk = malloc(BLK);
	e->pblk = malloc(2 * (size_t)BLK);
	if (!e->wblk || !e->iblk || !e->pblk) {
		rckpt_ckenc_destroy(e);
		return -ENOMEM;
	}
	*out = e;
	return 0;
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
	rckpt_istream_scratch_free(&e->is_scratch);
	rckpt_record_free(&e->prev);
	ckenc_free_saved(e);
	ckenc_free_names(e);
	free(e->wblk);
	free(e->iblk);
	free(e->pblk);
	free(e);
}

/* ---- one step ---- */

int ckenc_check_layout(rckpt_ckenc_t *e, const rckpt_tset_t *params, char *msg, size_t msglen)
{
	unsigned i;
	if (e->steps == 0) { /* the first successful step fixes the layout */
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
	if (params->ntensors != e->ntensors) {
		snprintf(msg, msglen, "%u tensors, the first step had %u", params->ntensors, e->ntensors);
		return -EINVAL;
	}
	for (i = 0; i < params->ntensors; i++)
		if (strcmp(params->t[i].name, e->names[i]) != 0 || params->t[i].n != e->prev.seg[i].n ||
		    params->t[i].dtype != e->prev.seg[i].dtype) {
			snprintf(msg, msglen, "tensor '%s' differs from the last step's", params->t[i].name);
			return -EINVAL;
		}
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

int rckpt_ckenc_step_stream(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
			    rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, const rckpt_tset_t *grads,
			    uint64_t step, char *msg, size_t msglen)
{
	const rckpt_ckenc_opts_t *o = &e->o;
	rckpt_tensor_prep_t *prep = NULL;
	rckpt_codebook_cache_t *cache = NULL;
	rckpt_qparams_t *qp = NULL;
	const rckpt_qparams_t **tq = NULL;
	uint64_t *stride = NULL;
	unsigned *tbins = NULL; /* the per-tensor allocation, when there is one */
	alloc_t alloc = { 0 };  /* its tables */
	double alloc_eps = o->eps;
	unsigned alloc_tries = 0;
	sample_t *smp = NULL;
	unsigned *which = NULL, nprep = 0, i;
	rckpt_record_t sum;
	cpoint_t best = ckenc_point_safest();
	const cpoint_t last_before = e->last;
	const int had_last = e->have_last;
	int rc, found = 0, emitting = 0, have_emb = 0, have_g = 0;
	double t0;

	memset(st, 0, sizeof(*st));
	memset(&sum, 0, sizeof(sum));
	st->step = step;
	if (e->resume && (rc = ckenc_adopt(e, params)) < 0)
		return rc;
	if ((rc = ckenc_check_layout(e, params, msg, msglen)))
		return rc;
	e->be->step_begin(e);

	/* Prepare the quantized tensors block by block: widen, check,
	 * sketch, sample. */
	t0 = rckpt_now_s();
	prep = calloc(params->ntensors ? params->ntensors : 1, sizeof(*prep));
	cache = calloc(params->ntensors ? params->ntensors : 1, sizeof(*cache));
	smp = calloc(params->ntensors ? params->ntensors : 1, sizeof(*smp));
	which = calloc(params->ntensors ? params->ntensors : 1, sizeof(*which));
	qp = calloc(params->ntensors ? params->ntensors : 1, sizeof(*qp));
	tq = calloc(params->ntensors ? params->ntensors : 1, sizeof(*tq));
	stride = calloc(params->ntensors ? params->ntensors : 1, sizeof(*stride));
	if (!prep || !smp || !which || !cache || !qp || !tq || !stride) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_ctensor_t *t = &params->t[i], *g = NULL;
		unsigned kind = rckpt_ctensor_kind(t);
		const float *gd;
		sample_t *sp = &smp[nprep];
		uint64_t bad = 0;
		st->raw_bytes += (size_t)t->n * 4;
		stride[i] = t->n > o->sample_max ? (t->n + o->sample_max - 1) / o->sample_max : 1;
		if (o->fixed.lossless_kinds & (1u << kind))
			continue;
		if (grads && (g = rckpt_tset_find(grads, t->name)) != NULL &&
		    (g->dtype != RCKPT_DT_F32 || g->n != t->n || ((uintptr_t)g->data & 3))) {
			snprintf(msg, msglen, "gradients of '%s' are not aligned fp32 of its shape", t->name);
			rc = -EINVAL;
			goto out;
		}
		gd = g ? (const float *)g->data : NULL;
		sp->full = t->n;
		sp->stride = stride[i];
		sp->w = malloc(4 * (size_t)(t->n / sp->stride + 1));
		sp->g = g ? malloc(4 * (size_t)(t->n / sp->stride + 1)) : NULL;
		which[nprep] = i;
		rc = sp->w == NULL || (g && sp->g == NULL)
			     ? -ENOMEM
			     : e->be->prepare(e, &prep[nprep], &bad, t, gd, kind, sp);
		nprep++; /* from here on the cleanup frees it */
		if (rc == -EDOM)
			snprintf(msg, msglen, "tensor '%s' holds NaN or Inf at element %llu", t->name,
				 (unsigned long long)bad);
		if (rc)
			goto out;
		have_emb |= kind == RCKPT_LK_EMBEDDING;
		have_g |= g != NULL;
	}
	st->t_prepare = rckpt_now_s() - t0;

	/* Choose the configuration. */
	t0 = rckpt_now_s();
	if (o->mode == RCKPT_CKENC_FIXED) {
		st->config = o->fixed;
	} else if (o->mode == RCKPT_CKENC_BITWIDTH) {
		evalctx_t x = { o, prep, smp, nprep, 0, NULL, e->steps ? &e->prev : NULL, which,
				e->npsmp == nprep ? e->psmp : NULL, cache, 0 };
		rckpt_qconfig_t c = o->fixed;
		unsigned bits, k;
		for (bits = 2; bits <= 6; bits++) {
			double loss, bytes;
			cpoint_t dummy = { 0, 0, 0, 0, 0 };
			c.bins = c.emb_bins = 1u << bits;
			for (k = 0; k < RCKPT_LK_COUNT; k++)
				c.prune_frac[k] = 0.0f;
			c.protect_frac = 0.0f;
			st->config = c;
			x.fixed_cfg = &c;
			if ((rc = ckenc_evaluate(&x, dummy, &loss, &bytes)))
				goto out;
			if (loss <= o->eps)
				break;
		}
		st->configs_tried = x.tried;
	} else {
		evalctx_t x = { o, prep, smp, nprep, 0, NULL, e->steps ? &e->prev : NULL, which,
				e->npsmp == nprep ? e->psmp : NULL, cache, 0 };
		/* The first step's choice is provisional: it is made without
		 * knowing how stable each configuration's levels are. The second
		 * step, the first that can measure it, searches the whole space
		 * again; "never more aggressive" holds from there on. */
		rc = ckenc_search(&x, e->have_last && e->steps != 1 ? &e->last : NULL, have_emb, have_g, &best,
			    &found);
		st->configs_tried = x.tried;
		if (rc)
			goto out;
		if (!found && e->have_last)
			best = ckenc_point_safest();
		e->last = best;
		e->have_last = 1;
		st->config = ckenc_config_of(o, best);
		if (found && o->alloc) {
			if ((tbins = calloc(nprep ? nprep : 1, sizeof(*tbins))) == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			if ((rc = ckenc_alloc_tables(&x, &st->config, &alloc)) < 0)
				goto out;
			if (!ckenc_alloc_pick(&alloc, alloc_eps, tbins)) { /* no smaller than the search's choice */
				free(tbins);
				tbins = NULL;
			}
			st->configs_tried = x.tried;
		}
	}
	st->t_search = rckpt_now_s() - t0;

	/* Judge it on all the data (the search judged samples) and, while
	 * over eps, step one axis less aggressive. */
	t0 = rckpt_now_s();
	for (;;) {
		int ok;
		rc = ckenc_judge(e, params, prep, which, nprep, &st->config, tbins, cache, qp, &st->quality);
		if (rc == 0 && o->quality) {
			rc = ckenc_ask_callback(e, params, prep, which, nprep, qp, &st->cb_quality);
			if (rc)
				snprintf(msg, msglen, "the quality callback failed");
		}
		ok = st->quality <= o->eps && (!o->quality || st->cb_quality <= o->quality_eps);
		if (rc || o->mode == RCKPT_CKENC_FIXED || ok)
			break;
		if (tbins) {
			/* The allocation failed on all the data, where the samples
			 * said it passed: choose again within a budget smaller by
			 * the miss, a few times (falling back to the search's
			 * choice would switch every tensor's codebook at once,
			 * which costs more than a margin), then the search's
			 * choice. The cap on each tensor shrinks with it. (When
			 * the quality callback refused it, by a margin only.) */
			alloc_eps *= 0.98 * (st->quality > o->eps ? o->eps / st->quality : 1.0);
			if (++alloc_tries > ALLOC_RETRIES || !ckenc_alloc_pick(&alloc, alloc_eps, tbins)) {
				free(tbins);
				tbins = NULL;
			}
			st->configs_tried++;
			continue;
		}
		if (o->mode == RCKPT_CKENC_BITWIDTH) { /* one bit more */
			if (st->config.bins >= 64)
				break;
			st->config.bins *= 2;
			st->config.emb_bins = st->config.bins;
		} else {
			if (!ckenc_relax(&best))
				break;
			st->config = ckenc_config_of(o, best);
			e->last = best;
		}
		st->configs_tried++;
	}
	if (rc)
		goto out;
	st->accepted = st->quality <= o->eps && (!o->quality || st->cb_quality <= o->quality_eps);
	st->t_quantize = rckpt_now_s() - t0;

	/* Quantize again, chunk by chunk, and hand out each record. */
	t0 = rckpt_now_s();
	for (i = 0; i < nprep; i++)
		tq[which[i]] = &qp[i];
	if (e->steps == 0 && (rc = ckenc_build_layout(e, params)))
		goto out;
	if (o->partial_block && e->saved == NULL) {
		e->saved = calloc(params->ntensors ? params->ntensors : 1, sizeof(*e->saved));
		e->lastq = calloc(params->ntensors ? params->ntensors : 1, sizeof(*e->lastq));
		for (i = 0; e->saved && e->lastq && i < params->ntensors; i++)
			if (tq[i] && (e->saved[i] = malloc(params->t[i].n ? 4 * (size_t)params->t[i].n : 4)) == NULL)
				break;
		if (!e->saved || !e->lastq || i < params->ntensors) {
			ckenc_free_saved(e);
			rc = -ENOMEM;
			goto out;
		}
	}
	if ((rc = ckenc_summary_init(&sum, params, tq, stride, step)))
		goto out;
	st->is_base = e->steps == 0 || e->force_base || (o->base_every && e->steps % o->base_every == 0) ||
		      e->depth >= RCKPT_STORE_CHAIN_REBASE; /* keep chains far from what the OSD folds */
	/* From the first record handed out, a failure leaves the chunks'
	 * parents half replaced: the next step must then be a base. */
	e->force_base = 1;
	emitting = 1;
	if ((rc = ckenc_emit_full(e, sink, manifest, st, params, grads, tq, stride, &sum, step)))
		goto out;
	e->force_base = 0;
	st->t_encode = rckpt_now_s() - t0;
	if (e->lastq) {
		for (i = 0; i < params->ntensors; i++)
			if (tq[i])
				e->lastq[i] = *tq[i];
		e->lastcfg = st->config;
	}
	rckpt_record_free(&e->prev);
	e->prev = sum;
	memset(&sum, 0, sizeof(sum));
	e->steps++;
	e->depth = st->is_base ? 1 : e->depth + 1;
	/* this step's samples become the next step's "last" */
	ckenc_free_prev_samples(e);
	e->psmp = calloc(nprep ? nprep : 1, sizeof(*e->psmp));
	if (e->psmp) {
		for (i = 0; i < nprep; i++) {
			e->psmp[i].w = smp[i].w;
			e->psmp[i].g = smp[i].g;
			e->psmp[i].n = smp[i].n;
			smp[i].w = smp[i].g = NULL;
		}
		e->npsmp = nprep;
	}
out:
	if (rc && !emitting) { /* nothing handed out: as if never called */
		e->last = last_before;
		e->have_last = had_last;
	}
	rckpt_record_free(&sum);
	for (i = 0; i < nprep; i++) {
		rckpt_codec_prep_free(&prep[i]);
		free(smp[i].w);
		free(smp[i].g);
	}
	free(prep);
	free(cache);
	free(smp);
	free(which);
	free(qp);
	free(tq);
	free(stride);
	free(tbins);
	ckenc_alloc_free(&alloc);
	return rc;
}

/* The sink of rckpt_ckenc_step: every record kept in out. */
static int collect_begin(void *arg, uint32_t nchunks)
{
	rckpt_ckenc_out_t *out = arg;
	out->records = calloc(nchunks ? nchunks : 1, sizeof(*out->records));
	out->nchunks = out->records ? nchunks : 0;
	return out->records ? 0 : -ENOMEM;
}

static int collect_record(void *arg, uint32_t c, rckpt_buf_t *rec)
{
	rckpt_ckenc_out_t *out = arg;
	out->records[c] = *rec;
	memset(rec, 0, sizeof(*rec));
	return 0;
}

int rckpt_ckenc_step(rckpt_ckenc_t *e, rckpt_ckenc_out_t *out, rckpt_ckenc_stats_t *st,
		     const rckpt_tset_t *params, const rckpt_tset_t *grads, uint64_t step, char *msg,
		     size_t msglen)
{
	const rckpt_ckenc_sink_t sink = { collect_begin, collect_record, out };
	int rc = rckpt_ckenc_step_stream(e, &sink, &out->manifest, st, params, grads, step, msg, msglen);
	if (rc)
		rckpt_ckenc_out_free(out);
	return rc;
}

void rckpt_ckenc_set_gpu(rckpt_ckenc_t *e, struct rckpt_gpuenc *g)
{
	e->o.gpu = g;
	e->be = g ? &ckenc_cuda_backend : &ckenc_cpu_backend;
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
