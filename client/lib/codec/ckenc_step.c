/*
 * ckenc_step.c — one full step of the checkpoint encoder: prepare the
 * tensors, choose a configuration per search (the model's, the optimizer
 * state's), judge it on all the data, emit the records. The top of the
 * encoder's files: the stages it drives are beside it (ckenc_impl.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"
#include "rckpt_store_wire.h" /* RCKPT_STORE_CHAIN_REBASE */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt.h"
#include "rckpt_clock.h"
#include "rckpt_gpu.h" /* rckpt_gpu_is_device_ptr */

void rckpt_ckenc_out_free(rckpt_ckenc_out_t *o)
{
	uint32_t i;
	rckpt_buf_free(&o->manifest);
	for (i = 0; o->records && i < o->nchunks; i++)
		rckpt_buf_free(&o->records[i]);
	free(o->records);
	memset(o, 0, sizeof(*o));
}

/* ---- one step ---- */

/* One of a step's two searches: the model's tensors under eps, or the
 * optimizer's state under opt_eps (its own configuration and its own last
 * accepted point). Prepared tensors [off, off + n) of the step's. */
typedef struct part {
	rckpt_ckenc_opts_t o; /* eps: this search's threshold */
	unsigned off, n;
	cpoint_t *last;
	int *have_last;
	int have_emb, have_g;
	int callback; /* the trainer's callback judges this one (the model's) */
	unsigned k;   /* which of the step's searches: e->plast[k], e->palloc[k] */
	unsigned *alloc; /* the allocation it accepted (taken by step_done), or NULL */
} part_t;

/* What a step's searches share. */
typedef struct stepctx {
	const rckpt_tset_t *params;
	rckpt_tensor_prep_t *prep;
	sample_t *smp;
	unsigned *which;
	rckpt_codebook_cache_t *cache;
	rckpt_qparams_t *qp;
	double *dfix;
	uint8_t *dsum;
	unsigned nprep; /* all of them */
	/* per tensor of params: */
	unsigned *order;            /* the order they are prepared in */
	const rckpt_qparams_t **tq; /* the chosen quantization, once chosen */
	const float **tg;           /* the weights it was judged with */
	int *xnorm;                 /* the NORM partner (ckenc_values) */
	uint64_t *stride;           /* the sample stride */
} stepctx_t;

/* x's arrays for params' tensors: 0 or -ENOMEM (step_free frees). */
static int step_alloc(stepctx_t *x, const rckpt_tset_t *params)
{
	const size_t nt = params->ntensors ? params->ntensors : 1;
	memset(x, 0, sizeof(*x));
	x->params = params;
	x->prep = calloc(nt, sizeof(*x->prep));
	x->cache = calloc(nt, sizeof(*x->cache));
	x->smp = calloc(nt, sizeof(*x->smp));
	x->which = calloc(nt, sizeof(*x->which));
	x->qp = calloc(nt, sizeof(*x->qp));
	x->dfix = calloc(nt, sizeof(*x->dfix));
	x->dsum = calloc(nt, sizeof(*x->dsum));
	x->order = calloc(nt, sizeof(*x->order));
	x->tq = calloc(nt, sizeof(*x->tq));
	x->tg = calloc(nt, sizeof(*x->tg));
	x->xnorm = calloc(nt, sizeof(*x->xnorm));
	x->stride = calloc(nt, sizeof(*x->stride));
	return x->prep && x->smp && x->which && x->cache && x->qp && x->dfix && x->dsum && x->order &&
			       x->tq && x->tg && x->xnorm && x->stride
		       ? 0
		       : -ENOMEM;
}

static void step_free(stepctx_t *x)
{
	unsigned i;
	for (i = 0; i < x->nprep; i++) {
		rckpt_codec_prep_free(&x->prep[i]);
		free(x->smp[i].w);
		free(x->smp[i].g);
	}
	free(x->prep);
	free(x->cache);
	free(x->smp);
	free(x->which);
	free(x->qp);
	free(x->dfix);
	free(x->dsum);
	free(x->order);
	free(x->tq);
	free(x->tg);
	free(x->xnorm);
	free(x->stride);
	memset(x, 0, sizeof(*x));
}

/* The per-tensor allocation of configuration c, from tables made now
 * (into *a): *tbins filled, or freed and NULL where none is smaller than c
 * itself. 0 or the error. */
static int alloc_new(evalctx_t *ex, const rckpt_qconfig_t *c, alloc_t *a, double eps, unsigned **tbins)
{
	int rc = ckenc_alloc_tables(ex, c, a);
	if (rc < 0)
		return rc;
	if (!ckenc_alloc_pick(a, eps, ex->cap, *tbins, 0)) { /* no smaller than the search's choice */
		free(*tbins);
		*tbins = NULL;
	}
	return 0;
}

/* The allocation P judges first (*tbins, or NULL: none smaller than c).
 * Between refreshes, where the search chose the point of the last step
 * (same_point), the last step's allocation (*reused set): the tables,
 * every tensor's options on the samples, are made only when it fails on
 * all the data. Else one from tables made now. 0 or the error. */
static int alloc_first(const rckpt_ckenc_t *e, const part_t *P, evalctx_t *ex, const rckpt_qconfig_t *c,
		       int same_point, alloc_t *a, double eps, unsigned **tbins, int *reused)
{
	if ((*tbins = calloc(P->n ? P->n : 1, sizeof(**tbins))) == NULL)
		return -ENOMEM;
	if (ex->alloc_near && same_point && e->palloc[P->k] && e->npalloc[P->k] == P->n) {
		memcpy(*tbins, e->palloc[P->k], sizeof(**tbins) * P->n);
		*reused = 1;
		return 0;
	}
	return alloc_new(ex, c, a, eps, tbins);
}

/* Whether a is more aggressive than b on any axis. */
static int bolder(cpoint_t a, cpoint_t b)
{
	return a.b < b.b || a.e < b.e || a.p < b.p || a.q < b.q;
}

/* Chooses P's configuration, its per-tensor allocation, and its
 * quantization parameters (x->qp[P->off ..]), judged on all the data
 * (and by the callback) until within P->o.eps or nothing is less
 * aggressive.
 *  - An allocation that fails on all the data, where the samples said it
 *    passed, is chosen again within a budget smaller by the miss, a few
 *    times, then the search's choice. Falling back switches every
 *    tensor's codebook at once, and the allocations that follow start
 *    from that choice's bins (a step of bins at a time): on the small LM
 *    run one such fall back cost its linear weights 1.5x the bytes for
 *    the rest of the run. So any allocation within the smaller budget is
 *    taken, even where the estimate puts it above the search's choice or
 *    that choice is itself over the budget. The cap on each tensor
 *    shrinks with it. (When the quality callback refused it, by a margin
 *    only.)
 *  - A bolder neighbour the samples passed and all the data did not
 *    gives way to the last configuration, with the last step's
 *    allocation, before any step less aggressive (relaxing the bolder one
 *    would mix axes, and never gives back embedding bins). */
static int choose(rckpt_ckenc_t *e, part_t *P, const stepctx_t *x, rckpt_ckenc_stats_t *st,
		  rckpt_qconfig_t *config, double *quality, int *accepted, char *msg, size_t msglen)
{
	const rckpt_ckenc_opts_t *o = &P->o;
	rckpt_tensor_prep_t *prep = x->prep + P->off;
	const unsigned *which = x->which + P->off;
	rckpt_codebook_cache_t *cache = x->cache + P->off;
	rckpt_qparams_t *qp = x->qp + P->off;
	const double *dfix = x->dfix + P->off;
	const uint8_t *dsum = x->dsum + P->off;
	const struct prev_sample *psmp =
		e->npsmp == x->nprep && e->psmp ? e->psmp + P->off : NULL;
	unsigned *tbins = NULL; /* the per-tensor allocation, when there is one */
	judged_t *memo = calloc(P->n ? P->n : 1, sizeof(*memo)); /* none: every pass in full */
	alloc_t alloc = { 0 };  /* its tables */
	double alloc_eps = o->eps, cbq = 0;
	unsigned alloc_tries = 0;
	cpoint_t best = ckenc_point_safest(), before = *P->last;
	const int had_before = *P->have_last;
	int reused = 0; /* tbins is the last step's allocation, not yet judged */
	int reverted = 0; /* a bolder choice gave way to the last one */
	evalctx_t ex = { .o = o,
			 .prep = prep,
			 .smp = x->smp + P->off,
			 .nprep = P->n,
			 .prev = e->steps ? &e->prev : NULL,
			 .which = which,
			 .psmp = psmp,
			 .cache = cache,
			 .dfix = dfix,
			 .dsum = dsum,
			 .cap = tensor_cap(P->k, o->eps) };
	int rc = 0, found = 0;

	ex.alloc_near = e->steps >= 2 && e->steps % ALLOC_REFRESH != 0;
	ex.memo = calloc(P->n ? P->n : 1, sizeof(*ex.memo)); /* none: every evaluation in full */
	*accepted = 0;
	if (o->mode == RCKPT_CKENC_FIXED) {
		*config = o->fixed;
	} else if (o->mode == RCKPT_CKENC_BITWIDTH) {
		rckpt_qconfig_t c = o->fixed;
		unsigned bits, k;
		for (bits = 2; bits <= 6; bits++) {
			double loss, bytes;
			cpoint_t dummy = { 0, 0, 0, 0, 0 };
			c.bins = c.emb_bins = 1u << bits;
			for (k = 0; k < RCKPT_LK_COUNT; k++)
				c.prune_frac[k] = 0.0f;
			c.protect_frac = 0.0f;
			*config = c;
			ex.fixed_cfg = &c;
			if ((rc = ckenc_evaluate(&ex, dummy, &loss, &bytes)))
				goto out;
			if (loss <= o->eps)
				break;
		}
		*config = c;
	} else {
		/* The first step's choice is provisional: it is made without
		 * knowing how stable each configuration's levels are. The second
		 * step, the first that can measure it, searches the whole space
		 * again; the neighbourhood of the last choice from there on. */
		rc = ckenc_search(&ex, *P->have_last && e->steps != 1 ? P->last : NULL, P->have_emb,
				  P->have_g, &best, &found);
		if (rc)
			goto out;
		if (!found && *P->have_last)
			best = ckenc_point_safest();
		*P->last = best;
		*P->have_last = 1;
		*config = ckenc_config_of(o, best);
		if (found && o->alloc &&
		    (rc = alloc_first(e, P, &ex, config, had_before && memcmp(&before, &best, sizeof(best)) == 0,
				      &alloc, alloc_eps, &tbins, &reused)) < 0)
			goto out;
	}
	st->configs_tried += ex.tried;
	st->allocs_reused += reused;

	/* Judge it on all the data (the search judged samples) and, while
	 * over eps, step one axis less aggressive. */
	for (;;) {
		int ok;
		rc = ckenc_judge(e, x->params, prep, which, P->n, config, tbins, cache, dfix, dsum, ex.cap, qp,
				 memo, quality);
		if (rc == 0 && P->callback && e->o.quality) {
			rc = ckenc_ask_callback(e, x->params, x->prep, x->which, x->nprep, x->qp, &cbq);
			st->cb_quality = cbq;
			if (rc)
				snprintf(msg, msglen, "the quality callback failed");
		}
		ok = *quality <= o->eps && (!P->callback || !e->o.quality || cbq <= e->o.quality_eps);
		if (rc || o->mode == RCKPT_CKENC_FIXED || ok)
			break;
		if (tbins && reused) { /* the last step's allocation failed: a new one */
			reused = 0;
			if ((rc = alloc_new(&ex, config, &alloc, alloc_eps, &tbins)) < 0)
				break;
			st->configs_tried++;
			continue;
		}
		if (tbins) { /* an allocation that missed (above) */
			alloc_eps *= 0.98 * (*quality > o->eps ? o->eps / *quality : 1.0);
			if (++alloc_tries > ALLOC_RETRIES || !ckenc_alloc_pick(&alloc, alloc_eps, ex.cap, tbins, 1)) {
				free(tbins);
				tbins = NULL;
			}
			st->configs_tried++;
			continue;
		}
		if (o->mode == RCKPT_CKENC_BITWIDTH) { /* one bit more */
			if (config->bins >= 64)
				break;
			config->bins *= 2;
			config->emb_bins = config->bins;
		} else if (had_before && !reverted && bolder(best, before)) { /* (above) */
			reverted = 1;
			best = before;
			*config = ckenc_config_of(o, best);
			*P->last = best;
			ckenc_alloc_free(&alloc);
			alloc_eps = o->eps;
			alloc_tries = 0;
			if (o->alloc && (rc = alloc_first(e, P, &ex, config, 1, &alloc, alloc_eps, &tbins, &reused)) < 0)
				break;
		} else {
			if (!ckenc_relax(&best))
				break;
			*config = ckenc_config_of(o, best);
			*P->last = best;
		}
		st->configs_tried++;
	}
	if (rc == 0)
		*accepted = *quality <= o->eps &&
			    (!P->callback || !e->o.quality || cbq <= e->o.quality_eps);
	if (rc == 0 && *accepted) { /* the next step's first try */
		st->allocs_kept += reused;
		P->alloc = tbins;
		tbins = NULL;
	}
out:
	free(tbins);
	free(memo);
	ckenc_evmemo_free(ex.memo, P->n);
	ckenc_alloc_free(&alloc);
	return rc;
}

/* Whether a quantized tensor's transform differs from the last step's:
 * its records cannot be deltas then. */
static int transforms_changed(const rckpt_ckenc_t *e, const rckpt_tset_t *params)
{
	unsigned i;
	for (i = 0; e->steps && i < params->ntensors && i < e->prev.nseg; i++)
		if (e->prev.seg[i].encoding == RCKPT_SEG_QUANTIZED &&
		    e->prev.seg[i].transform != ckenc_transform_of(e, &params->t[i]))
			return 1;
	return 0;
}

/* Element i of fp32 gradients in host or device memory (NaN when it
 * cannot be read). */
static float grad_at(const float *g, uint64_t i)
{
	float v = NAN;
	if (!rckpt_gpu_is_device_ptr(g))
		return g[i];
	if (rckpt_gpu_memcpy(&v, g + i, 4, 1, NULL) || rckpt_gpu_stream_sync(NULL))
		return NAN;
	return v;
}

/* Why prepare refused element bad of tensor t (-EDOM), in one line. A
 * tensor's gradient weights are its gradient RMS (the square root of a
 * moving average of grad**2, or Adam's sqrt(exp_avg_sq)): finite and not
 * negative. A signed mean handed in its place weighs the error by nothing
 * where the gradient changes sign, and the quality bound no longer holds
 * (a model restored at +157% held-out loss with the bound reported met):
 * the message says what the weights must be. */
static void bad_element(char *msg, size_t msglen, const rckpt_ctensor_t *t, unsigned kind,
			const float *gd, uint64_t bad)
{
	const float gv = gd && !rckpt_lk_is_optim(kind) ? grad_at(gd, bad) : 0.0f;
	if (!(isfinite(gv) && gv >= 0))
		snprintf(msg, msglen,
			 "gradients of '%s': element %llu is %g, but gradient weights are the "
			 "gradient's RMS (sqrt of a moving average of grad**2), finite and >= 0 (a "
			 "signed mean of the gradients belongs in a .gmean sibling)",
			 t->name, (unsigned long long)bad, (double)gv);
	else
		snprintf(msg, msglen,
			 kind == RCKPT_LK_MOMENT2 ? "tensor '%s' (a second moment) holds a negative "
						    "value, NaN or Inf at element %llu"
						  : "tensor '%s' holds NaN or Inf at element %llu",
			 t->name, (unsigned long long)bad);
}

/* Prepares the tensors order[k0 .. k1) as x's next prepared ones: their
 * weights (the gradients, or the update error's terms), sketches and
 * samples. A tensor of partition P[j] marks it (have_emb, have_g). */
static int prep_range(rckpt_ckenc_t *e, stepctx_t *x, const rckpt_tset_t *params,
		      const rckpt_tset_t *grads, const ckenc_upd_t *upd, const unsigned *order,
		      unsigned k0, unsigned k1, const uint64_t *stride, part_t *P, char *msg,
		      size_t msglen)
{
	unsigned k;
	int rc = 0;
	for (k = k0; k < k1; k++) {
		const unsigned i = order[k];
		const rckpt_ctensor_t *t = &params->t[i], *g = NULL;
		const unsigned kind = rckpt_ctensor_kind(t);
		const unsigned n = x->nprep;
		part_t *pp = &P[n >= P[2].off ? 2 : n >= P[1].off ? 1 : 0];
		const float *gd = NULL;
		sample_t *sp = &x->smp[n];
		uint64_t bad = 0;
		x->dfix[n] = -1;
		/* a kind kept as bf16 adds nothing to the sums: eps bounds the
		 * other tensors as before, and chooses what it chose before */
		x->dsum[n] = e->o.fixed.bf16_kinds & (1u << kind) ? SUM_NONE : SUM_ALL;
		if (rckpt_lk_is_optim(kind)) { /* the update error's terms */
			if (upd->w) {
				gd = upd->w[i];
				x->dfix[n] = upd->den[i];
				x->dsum[n] = upd->counted[i];
			}
		} else if (grads && (g = rckpt_tset_find(grads, t->name)) != NULL) {
			if (g->dtype != RCKPT_DT_F32 || g->n != t->n || ((uintptr_t)g->data & 3)) {
				snprintf(msg, msglen, "gradients of '%s' are not aligned fp32 of its shape",
					 t->name);
				return -EINVAL;
			}
			gd = (const float *)g->data;
		}
		sp->full = t->n;
		sp->stride = stride[i];
		sp->w = malloc(4 * (size_t)(t->n / sp->stride + 1));
		sp->g = gd ? malloc(4 * (size_t)(t->n / sp->stride + 1)) : NULL;
		x->which[n] = i;
		rc = sp->w == NULL || (gd && sp->g == NULL)
			     ? -ENOMEM
			     : e->be->prepare(e, &x->prep[n], &bad, t, gd, kind, sp);
		x->nprep++; /* from here on the cleanup frees it */
		if (rc == 0)
			ckenc_sample_den(sp);
		if (rc == -EDOM)
			bad_element(msg, msglen, t, kind, gd, bad);
		if (rc)
			return rc;
		pp->have_emb |= kind == RCKPT_LK_EMBEDDING;
		pp->have_g |= gd != NULL;
	}
	return 0;
}

/* The three searches of a step (the part_t's P[0..3)): prepares the
 * model's tensors and the optimizer's state that stands alone, chooses the
 * latter's configuration (its second moments' levels normalize the first
 * moments), prepares those, chooses theirs, then the model's last, so that
 * the trainer's callback sees every tensor as it will be saved. */
static int choose_all(rckpt_ckenc_t *e, part_t *P, stepctx_t *x, rckpt_ckenc_stats_t *st,
		      const rckpt_tset_t *grads, const ckenc_upd_t *upd, unsigned n1, unsigned nq,
		      char *msg, size_t msglen)
{
	const rckpt_ckenc_opts_t *o = &e->o;
	const rckpt_tset_t *params = x->params;
	int rc, ok_model = 1, ok_opt = 1;
	unsigned i;
	double t0 = rckpt_now_s();

	if ((rc = prep_range(e, x, params, grads, upd, x->order, 0, n1, x->stride, P, msg, msglen)))
		return rc;
	st->t_prepare = rckpt_now_s() - t0;
	st->opt_config = o->fixed;
	if (P[1].n) {
		t0 = rckpt_now_s();
		rc = choose(e, &P[1], x, st, &st->opt_config, &st->opt_quality, &ok_opt, msg, msglen);
		st->t_search += rckpt_now_s() - t0;
		if (rc)
			return rc;
		for (i = P[1].off; i < P[1].off + P[1].n; i++) /* the partners' parameters */
			x->tq[x->which[i]] = &x->qp[i];
		for (i = 0; i < x->nprep; i++)
			x->tg[x->which[i]] = x->prep[i].g;
	}
	if (P[2].n) {
		double q2 = 0;
		int ok2 = 1;
		rckpt_qconfig_t c2;
		t0 = rckpt_now_s();
		rc = prep_range(e, x, params, grads, upd, x->order, n1, nq, x->stride, P, msg, msglen);
		st->t_prepare += rckpt_now_s() - t0;
		t0 = rckpt_now_s();
		/* what the second moments left of the update error's budget */
		if (P[1].n && st->opt_quality < o->opt_eps / 2)
			P[2].o.eps = o->opt_eps - st->opt_quality;
		if (rc == 0)
			rc = choose(e, &P[2], x, st, &c2, &q2, &ok2, msg, msglen);
		st->t_search += rckpt_now_s() - t0;
		if (rc)
			return rc;
		/* the state's update error: the two add */
		st->opt_quality += q2;
		st->opt_config = c2;
		ok_opt &= ok2;
	}
	t0 = rckpt_now_s();
	rc = choose(e, &P[0], x, st, &st->config, &st->quality, &ok_model, msg, msglen);
	st->t_search += rckpt_now_s() - t0;
	if (rc == 0)
		st->accepted = ok_model && ok_opt;
	return rc;
}

/* A partial-block writer keeps every quantized value as last saved: its
 * buffers, at the first full step. 0 or -ENOMEM. */
static int saved_ensure(rckpt_ckenc_t *e, const stepctx_t *x)
{
	const rckpt_tset_t *params = x->params;
	const size_t nt = params->ntensors ? params->ntensors : 1;
	unsigned i;
	if (!e->o.partial_block || e->saved != NULL)
		return 0;
	e->saved = calloc(nt, sizeof(*e->saved));
	e->lastq = calloc(nt, sizeof(*e->lastq));
	for (i = 0; e->saved && e->lastq && i < params->ntensors; i++)
		if (x->tq[i] && (e->saved[i] = malloc(params->t[i].n ? 4 * (size_t)params->t[i].n : 4)) == NULL)
			break;
	if (!e->saved || !e->lastq || i < params->ntensors) {
		ckenc_free_saved(e);
		return -ENOMEM;
	}
	return 0;
}

/* After a step's records went out: its summary (*sum, taken) becomes the
 * last step's, its samples the next step's "last". */
static void step_done(rckpt_ckenc_t *e, stepctx_t *x, const rckpt_ckenc_stats_t *st, rckpt_record_t *sum,
		      unsigned nprep)
{
	unsigned i;
	if (e->lastq) {
		for (i = 0; i < x->params->ntensors; i++)
			if (x->tq[i])
				e->lastq[i] = *x->tq[i];
		e->lastcfg = st->config;
	}
	rckpt_record_free(&e->prev);
	e->prev = *sum;
	memset(sum, 0, sizeof(*sum));
	e->steps++;
	e->depth = st->is_base ? 1 : e->depth + 1;
	ckenc_free_prev_samples(e);
	e->psmp = calloc(nprep ? nprep : 1, sizeof(*e->psmp));
	if (e->psmp) {
		for (i = 0; i < nprep; i++) {
			e->psmp[i].w = x->smp[i].w;
			e->psmp[i].g = x->smp[i].g;
			e->psmp[i].n = x->smp[i].n;
			e->psmp[i].tensor = x->which[i];
			x->smp[i].w = x->smp[i].g = NULL;
		}
		e->npsmp = nprep;
	}
}

int rckpt_ckenc_step_stream(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
			    rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, const rckpt_tset_t *grads,
			    uint64_t step, char *msg, size_t msglen)
{
	const rckpt_ckenc_opts_t *o = &e->o;
	stepctx_t x;
	ckenc_upd_t upd = { 0 };
	unsigned nprep = 0, nmodel = 0, n1 = 0, nq, i, k;
	rckpt_record_t sum;
	cpoint_t plast_before[3];
	int had_plast[3];
	part_t P[3];
	int rc, emitting = 0;
	double t0;

	memset(st, 0, sizeof(*st));
	memset(&sum, 0, sizeof(sum));
	memset(&x, 0, sizeof(x));
	memset(P, 0, sizeof(P));
	memcpy(plast_before, e->plast, sizeof(plast_before));
	memcpy(had_plast, e->have_plast, sizeof(had_plast));
	st->step = step;
	if (e->resume && (rc = ckenc_adopt(e, params)) < 0)
		return rc;
	if ((rc = e->steps == 0			     ? ckenc_take_names(e, params)
		  : ckenc_same_tensors(e, params) ? 0
						  : ckenc_relayout(e, params)))
		return rc;
	e->be->step_begin(e);

	/* Prepare the quantized tensors block by block: widen, check,
	 * sketch, sample; the model's first, then the optimizer's state. */
	if ((rc = step_alloc(&x, params)))
		goto out;
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_ctensor_t *t = &params->t[i];
		st->raw_bytes += (size_t)t->n * 4;
		x.stride[i] = t->n > o->sample_max ? (t->n + o->sample_max - 1) / o->sample_max : 1;
	}
	nq = ckenc_prep_order(o, params, x.order, &nmodel, &n1);
	if (nq > nmodel && (rc = ckenc_update_terms(e, &upd, params)))
		goto out;
	/* the normalized first moments' partners, and what ckenc_values reads
	 * of them once their quantization is chosen */
	for (i = 0; i < params->ntensors; i++) {
		x.xnorm[i] = ckenc_norm_partner(o, params, i);
		if (x.xnorm[i] >= 0 && (o->fixed.lossless_kinds & (1u << rckpt_ctensor_kind(&params->t[i]))))
			x.xnorm[i] = -1;
	}
	e->xparams = params;
	e->xnorm = x.xnorm;
	e->xq = x.tq;
	e->xg = x.tg;
	for (k = 0; k < 3; k++) {
		P[k].o = *o;
		P[k].o.eps = k == 0 ? o->eps : n1 < nq ? o->opt_eps / 2 : o->opt_eps;
		P[k].last = &e->plast[k];
		P[k].have_last = &e->have_plast[k];
		P[k].k = k;
	}
	P[0].off = 0;
	P[0].n = nmodel;
	P[0].callback = 1;
	P[1].off = nmodel;
	P[1].n = n1 - nmodel;
	P[2].off = n1;
	P[2].n = nq - n1;
	if ((rc = choose_all(e, P, &x, st, grads, &upd, n1, nq, msg, msglen)))
		goto out;
	nprep = x.nprep;
	st->t_quantize = 0;

	/* Quantize again, chunk by chunk, and hand out each record. */
	t0 = rckpt_now_s();
	for (i = 0; i < nprep; i++) {
		x.tq[x.which[i]] = &x.qp[i];
		x.tg[x.which[i]] = x.prep[i].g;
	}
	if ((e->steps == 0 || e->prev_chunks == NULL) && (rc = ckenc_build_layout(e, params)))
		goto out;
	if ((rc = saved_ensure(e, &x)) || (rc = ckenc_summary_init(e, &sum, params, x.tq, x.stride, step)))
		goto out;
	st->is_base = e->steps == 0 || e->force_base || (o->base_every && e->steps % o->base_every == 0) ||
		      e->depth >= RCKPT_STORE_CHAIN_REBASE || /* keep chains far from what the OSD folds */
		      e->exact_last || transforms_changed(e, params);
	/* From the first record handed out, a failure leaves the chunks'
	 * parents half replaced: the next step must then be a base. */
	e->force_base = 1;
	emitting = 1;
	if ((rc = ckenc_emit_full(e, sink, manifest, st, params, x.tg, x.tq, x.stride, &sum, step)))
		goto out;
	e->force_base = 0;
	e->exact_last = 0;
	st->t_encode = rckpt_now_s() - t0;
	step_done(e, &x, st, &sum, nprep);
	for (k = 0; k < 3; k++) { /* each search's allocation, for the next step */
		free(e->palloc[k]);
		e->palloc[k] = P[k].alloc;
		e->npalloc[k] = P[k].n;
		P[k].alloc = NULL;
	}
out:
	for (k = 0; k < 3; k++)
		free(P[k].alloc);
	if (rc && !emitting) { /* nothing handed out: as if never called */
		memcpy(e->plast, plast_before, sizeof(plast_before));
		memcpy(e->have_plast, had_plast, sizeof(had_plast));
	} else if (rc) { /* the points moved on, the allocations did not */
		ckenc_free_allocs(e);
	}
	e->xparams = NULL; /* what they point at goes now */
	e->xnorm = NULL;
	e->xq = NULL;
	e->xg = NULL;
	rckpt_record_free(&sum);
	step_free(&x);
	ckenc_update_free(&upd);
	return rc;
}

int rckpt_ckenc_step_exact(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
			   rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, uint64_t step)
{
	const size_t nt = params->ntensors ? params->ntensors : 1;
	const rckpt_qparams_t **tq = calloc(nt, sizeof(*tq));
	const float **tg = calloc(nt, sizeof(*tg));
	uint64_t *stride = calloc(nt, sizeof(*stride));
	const unsigned planes = e->o.is.planes;
	rckpt_record_t sum;
	unsigned i;
	int rc;

	memset(st, 0, sizeof(*st));
	memset(&sum, 0, sizeof(sum));
	st->step = step;
	if (!tq || !tg || !stride) {
		rc = -ENOMEM;
		goto out;
	}
	if (e->resume && (rc = ckenc_adopt(e, params)) < 0)
		goto out;
	if ((rc = e->steps == 0			     ? ckenc_take_names(e, params)
		  : ckenc_same_tensors(e, params) ? 0
						  : ckenc_relayout(e, params)))
		goto out;
	for (i = 0; i < params->ntensors; i++) {
		st->raw_bytes += (size_t)params->t[i].n * 4;
		stride[i] = 1;
	}
	if ((e->steps == 0 || e->prev_chunks == NULL) && (rc = ckenc_build_layout(e, params)))
		goto out;
	if ((rc = ckenc_summary_init(e, &sum, params, tq, stride, step)))
		goto out;
	/* a delta only on an exact step of the same chunks: its values are
	 * the prediction of this one's */
	st->is_base = e->steps == 0 || e->force_base || !e->exact_last ||
		      (e->o.base_every && e->steps % e->o.base_every == 0) ||
		      e->depth >= RCKPT_STORE_CHAIN_REBASE;
	st->accepted = 1;
	e->force_base = 1; /* until every record went out */
	e->exact_step = 1;
	e->o.is.planes = 1;
	rc = ckenc_emit_full(e, sink, manifest, st, params, tg, tq, stride, &sum, step);
	e->exact_step = 0;
	e->o.is.planes = planes;
	if (rc)
		goto out;
	e->force_base = 0;
	e->exact_last = 1;
	/* the last lossy step's per-tensor allocations may keep codebooks
	 * this step's records no longer hold */
	ckenc_free_allocs(e);
	rckpt_record_free(&e->prev); /* the tensors' headers: what the next step compares */
	e->prev = sum;
	memset(&sum, 0, sizeof(sum));
	e->steps++;
	e->depth = st->is_base ? 1 : e->depth + 1;
out:
	rckpt_record_free(&sum);
	free(tq);
	free(tg);
	free(stride);
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

static int collect_record(void *arg, uint32_t c, rckpt_buf_t *rec, rckpt_buf_t *head)
{
	rckpt_ckenc_out_t *out = arg;
	(void)head;
	out->records[c] = *rec;
	memset(rec, 0, sizeof(*rec));
	return 0;
}

int rckpt_ckenc_step_whole(rckpt_ckenc_t *e, rckpt_ckenc_out_t *out, rckpt_ckenc_stats_t *st,
			   const rckpt_tset_t *params, uint64_t step)
{
	const rckpt_ckenc_sink_t sink = { collect_begin, collect_record, out };
	int rc = rckpt_ckenc_step_exact(e, &sink, &out->manifest, st, params, step);
	if (rc)
		rckpt_ckenc_out_free(out);
	return rc;
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

