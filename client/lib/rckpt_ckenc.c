/*
 * rckpt_ckenc.c — checkpoint encoder with configuration search.
 */
#define _POSIX_C_SOURCE 200809L
#include "rckpt_ckenc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rckpt.h"
#include "rckpt_clock.h"
#include "rckpt_gpuenc.h"

/* The search space, each axis from most to least aggressive. */
static const unsigned BINS[] = { 4, 6, 8, 12, 16, 24, 32, 48, 64 };
static const unsigned EMB_BINS[] = { 16, 32, 64 };
static const float PRUNE[] = { 0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f };
static const float PROTECT[] = { 0.0005f, 0.005f, 0.01f };
#define NB (sizeof(BINS) / sizeof(BINS[0]))
#define NE (sizeof(EMB_BINS) / sizeof(EMB_BINS[0]))
#define NP (sizeof(PRUNE) / sizeof(PRUNE[0]))
#define NQ (sizeof(PROTECT) / sizeof(PROTECT[0]))

/* A point of the space: an index per axis; higher is less aggressive. */
typedef struct cpoint {
	unsigned b, e, p, m, q;
} cpoint_t;

struct rckpt_ckenc {
	rckpt_ckenc_opts_t o;
	rckpt_record_t prev; /* the last step's summary: per tensor its header and
				codebook and, when quantized, its levels at the
				sample positions (idx[j]: element j * stride) */
	char **names;        /* the tensors of every step, sorted */
	unsigned ntensors;
	unsigned steps;
	int have_last;
	cpoint_t last; /* the last accepted configuration */
	struct prev_sample {
		float *w, *g;
		size_t n;
	} *psmp; /* the last step's samples, per prepared tensor */
	unsigned npsmp;
	/* the chunk layout, fixed at the first step */
	uint32_t nchunks;
	struct piece {
		uint32_t tensor;
		uint64_t first, n;
	} **pieces;          /* pieces[c][0..npieces[c]) */
	uint32_t *npieces;
	rckpt_record_t *prev_chunks; /* the last step's chunk records */
	rckpt_istream_scratch_t is_scratch; /* reused by every record */
	int force_base;      /* the next step is a base (a step failed midway) */
	float *wblk;         /* BLK values widened to fp32 */
	uint8_t *iblk;       /* BLK levels */
	uint16_t *pblk;      /* BLK protected values */
	rckpt_qerr_t qerr;   /* judge's sums */
	/* partial steps (opts.partial_block) */
	float **saved;          /* per tensor: its values as last saved (fp32);
				   NULL for a lossless tensor */
	rckpt_qparams_t *lastq; /* per tensor: the last full step's parameters */
	rckpt_qconfig_t lastcfg;
	uint64_t rr_cursor;     /* ROUND_ROBIN: the next block */
	rckpt_ckdec_t *resume;  /* a committed step to continue from, taken up by
				   the next step when its tensors match */
};

/* Tensors go through the encoder in blocks of this many elements (a
 * multiple of 8), so a step's working memory does not grow with the model. */
#define BLK 65536u
_Static_assert(BLK % RCKPT_QERR_TILE == 0, "judge's blocks are whole tiles");

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

static void free_names(rckpt_ckenc_t *e)
{
	unsigned i;
	for (i = 0; e->names && i < e->ntensors; i++)
		free(e->names[i]);
	free(e->names);
	e->names = NULL;
	e->ntensors = 0;
}

static void free_saved(rckpt_ckenc_t *e)
{
	unsigned i;
	for (i = 0; e->saved && i < e->ntensors; i++)
		free(e->saved[i]);
	free(e->saved);
	free(e->lastq);
	e->saved = NULL;
	e->lastq = NULL;
}

static void free_prev_samples(rckpt_ckenc_t *e)
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

static void free_layout(rckpt_ckenc_t *e)
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
	free_layout(e);
	free_prev_samples(e);
	rckpt_istream_scratch_free(&e->is_scratch);
	rckpt_record_free(&e->prev);
	free_saved(e);
	free_names(e);
	free(e->wblk);
	free(e->iblk);
	free(e->pblk);
	free(e);
}

static rckpt_qconfig_t config_of(const rckpt_ckenc_opts_t *o, cpoint_t c)
{
	rckpt_qconfig_t q = o->fixed; /* lambda, lossless kinds */
	unsigned k;
	q.bins = BINS[c.b];
	q.emb_bins = EMB_BINS[c.e];
	for (k = 0; k < RCKPT_LK_COUNT; k++)
		q.prune_frac[k] = PRUNE[c.p];
	q.prune_frac[RCKPT_LK_EMBEDDING] = 0.0f; /* embeddings: their bins only */
	q.prune_metric = c.m;
	q.protect_frac = PROTECT[c.q];
	/* The metric axis decides the ranking: magnitude ranks pruning and
	 * protection by |w|; sensitivity ranks pruning by |w g| and protects
	 * the top |w| and the top |w g|. */
	q.protect_by_sensitivity = o->use_grads && c.m == RCKPT_PRUNE_SENSITIVITY;
	return q;
}

/* ---- evaluating a configuration on samples ---- */

typedef struct sample {
	float *w, *g; /* every stride-th element */
	size_t n;
	uint64_t full, stride;
} sample_t;

typedef struct evalctx {
	const rckpt_ckenc_opts_t *o;
	rckpt_tensor_prep_t *prep; /* quantized tensors only */
	sample_t *smp;
	unsigned nprep;
	unsigned tried;
	const rckpt_qconfig_t *fixed_cfg; /* evaluate this instead of a point */
	const rckpt_record_t *prev;       /* the last step's record, or NULL */
	const unsigned *which;            /* prep t is tensor which[t] */
	const struct prev_sample *psmp;   /* the last step's samples, or NULL */
	rckpt_codebook_cache_t *cache;    /* per prepared tensor, this step */
	int drift;                        /* a fresh codebook's recurring cost is
					     its switch cost (see allocate) */
} evalctx_t;

/* A tensor's allocation that keeps the last record's codebook, with this
 * step's thresholds, instead of any bin count: its levels then change only
 * where its values crossed a boundary, which is what makes deltas small
 * (rckpt_codec_qparams_keep). */
#define KEEP_LAST 0xffffu

/* The options of a tensor: every bin count with k-means, with uniform
 * bins, and KEEP_LAST. An allocation names one as bins | quantizer << 16. */
#define ALLOC_Q 2u
#define NALLOC (NB * ALLOC_Q + 1)
#define ALLOC_BINS(a) ((a) & 0xffffu)
#define ALLOC_QUANTIZER(a) ((a) >> 16)

/* The quality loss of a step: the Fisher-weighted relative error of all its
 * quantized tensors together, sum num_t / sum den_t, or a tensor's own
 * num_t / den_t divided by TENSOR_CAP when that is more. The sum is what
 * predicts the model's loss; the cap keeps one tensor from being wrecked
 * because it weighs little in the sum (a small first layer without
 * gradients, a tensor pruned hard), where the second-order estimate stops
 * holding. Calibrated: README "What eps means". */
#define TENSOR_CAP 20.0

static double step_loss(double num, double den, double worst)
{
	const double g = den > 0 ? num / den : 0;
	return worst / TENSOR_CAP > g ? worst / TENSOR_CAP : g;
}

/* Steps over which a configuration's recurring cost is weighed against the
 * one-time cost of switching to it. */
#define HORIZON 3.0

/* Times the allocation is chosen again, within a smaller budget, when it
 * fails on all the data. */
#define ALLOC_RETRIES 3

/* The last step's segment of prep t, if it can seed and be a delta parent. */
static const rckpt_seg_t *parent_seg(const evalctx_t *x, unsigned t)
{
	const rckpt_seg_t *s;
	if (x->prev == NULL)
		return NULL;
	s = &x->prev->seg[x->which[t]];
	return s->encoding == RCKPT_SEG_QUANTIZED ? s : NULL;
}

/* Tensor t under configuration c with quantizer (or under qfix, the
 * parameters kept from the last step, when not NULL): its loss terms
 * scaled to the whole tensor, and its estimated bytes (see evaluate). */
static int eval_tensor(evalctx_t *x, unsigned t, const rckpt_qconfig_t *c, unsigned quantizer,
		       const rckpt_qparams_t *qfix, double *num, double *den, double *bytes)
{
	const sample_t *s = &x->smp[t];
	const rckpt_seg_t *ps = parent_seg(x, t);
	rckpt_qparams_t q;
	uint64_t hist[256] = { 0 };
	const struct prev_sample *pv = x->psmp && x->psmp[t].n == s->n ? &x->psmp[t] : NULL;
	uint8_t *idx = malloc(s->n ? s->n : 1), *pidx = pv ? malloc(s->n ? s->n : 1) : NULL;
	uint16_t *prot = malloc(2 * (s->n ? s->n : 1));
	float *r = malloc(4 * (s->n ? s->n : 1));
	size_t np, i;
	int rc = !idx || !prot || !r ? -ENOMEM
		 : qfix		     ? 0
				     : rckpt_codec_qparams(&q, &x->prep[t], c, quantizer, ps,
							   x->cache ? &x->cache[t] : NULL);

	if (qfix)
		q = *qfix;
	*num = *den = *bytes = 0;
	if (pv && pidx == NULL)
		rc = -ENOMEM;
	if (rc == 0) {
		if (pv) {
			size_t pnp;
			/* a resumed encoder has no gradients of the last step:
			 * this step's stand in */
			rckpt_quantize(pidx, prot, &pnp, pv->w, pv->g ? pv->g : s->g, s->n, &q);
		}
		rckpt_quantize(idx, prot, &np, s->w, s->g, s->n, &q);
		rc = rckpt_dequantize(r, idx, s->n, &q, prot, np);
	}
	if (rc == 0) {
		/* hist: the symbols of this step's record (levels, or their
		 * delta against the last record's levels: the switch cost);
		 * hstab: the change this configuration makes between the last
		 * step's sample and this one (what it will cost from now on) */
		uint64_t hstab[256] = { 0 };
		double h = 0, hs = 0, tn = 0, td = 0;
		unsigned l, m = q.nbins + 2, mp = m;
		if (ps && ps->nbins + 2 > mp)
			mp = ps->nbins + 2;
		for (i = 0; i < s->n; i++) {
			double gg = s->g ? (double)s->g[i] * s->g[i] : 1.0, d = (double)s->w[i] - r[i];
			tn += gg * d * d;
			td += gg * (double)s->w[i] * s->w[i];
			/* cyclic differences; both operands < the modulus, so
			 * one conditional subtraction, not a division */
			if (ps) {
				unsigned dlt = idx[i] + mp - ps->idx[i];
				hist[dlt >= mp ? dlt - mp : dlt]++;
			} else {
				hist[idx[i]]++;
			}
			if (pv) {
				unsigned dlt = idx[i] + m - pidx[i];
				hstab[dlt >= m ? dlt - m : dlt]++;
			}
		}
		for (l = 0; l < 256; l++) {
			if (hist[l]) {
				double pr = (double)hist[l] / (double)s->n;
				h -= pr * log2(pr);
			}
			if (hstab[l]) {
				double pr = (double)hstab[l] / (double)s->n;
				hs -= pr * log2(pr);
			}
		}
		if (pv && (qfix || !x->drift)) /* this step once, then HORIZON more like it */
			h = (h + HORIZON * hs) / (1 + HORIZON);
		*num = tn * (double)s->stride;
		*den = td * (double)s->stride;
		*bytes = h * (double)s->full / 8 + 2.0 * (double)np * (double)s->stride;
	}
	free(idx);
	free(pidx);
	free(prot);
	free(r);
	return rc;
}

/* Tensor t's own configuration: c with its bin count set to bins[t] (the
 * allocation), or c itself when bins is NULL. */
static rckpt_qconfig_t tensor_config(const rckpt_qconfig_t *c, const rckpt_tensor_prep_t *p,
				     const unsigned *bins, unsigned t)
{
	rckpt_qconfig_t ct = *c;
	if (bins && bins[t] && bins[t] != KEEP_LAST) {
		if (p->kind == RCKPT_LK_EMBEDDING)
			ct.emb_bins = ALLOC_BINS(bins[t]);
		else
			ct.bins = ALLOC_BINS(bins[t]);
	}
	return ct;
}

/* Quality loss and estimated bytes of configuration c, from the samples.
 * Each tensor's sums are scaled by its sampling stride, so a sampled large
 * tensor weighs what it weighs in the whole model. The size estimate is the
 * entropy of the symbols records will hold: at the first step the levels;
 * after it, a blend of this step's delta against the last record's actual
 * levels (the one-time cost of switching configuration) and of the change
 * this configuration makes between the last step's sample and this one
 * (its recurring cost), the latter weighed over HORIZON steps. */
static int evaluate(evalctx_t *x, cpoint_t cp, double *loss, double *bytes)
{
	rckpt_qconfig_t c = x->fixed_cfg ? *x->fixed_cfg : config_of(x->o, cp);
	double num = 0, den = 0, est = 0, worst = 0;
	unsigned t;

	x->tried++;
	for (t = 0; t < x->nprep; t++) {
		double tn, td, tb;
		int rc = eval_tensor(x, t, &c, x->o->quantizer, NULL, &tn, &td, &tb);
		if (rc)
			return rc;
		num += tn;
		den += td;
		est += tb;
		if (td > 0 && tn / td > worst)
			worst = tn / td;
	}
	*loss = step_loss(num, den, worst);
	*bytes = est;
	return 0;
}

/* Option k of a tensor's allocation (ALLOC_BINS, ALLOC_QUANTIZER). */
static unsigned alloc_option(unsigned k)
{
	return k + 1 < NALLOC ? BINS[k % NB] | (k / NB) << 16 : KEEP_LAST;
}

/* Each tensor's choice at lambda: bins[], and the sums of num and bytes.
 * An option whose num is negative, or over cap[t], is not available. */
static void pick(const double *tn, const double *tb, const double *cap, unsigned nprep, double lam,
		 unsigned *bins, double *sn, double *sb)
{
	unsigned t, k;
	*sn = *sb = 0;
	for (t = 0; t < nprep; t++) {
		const double *n = tn + (size_t)t * NALLOC, *b = tb + (size_t)t * NALLOC;
		unsigned kb = NALLOC;
		for (k = 0; k < NALLOC; k++)
			if (n[k] >= 0 && n[k] <= cap[t] &&
			    (kb == NALLOC || b[k] + lam * n[k] < b[kb] + lam * n[kb]))
				kb = k;
		if (kb == NALLOC) { /* nothing available: the allocation cannot be had */
			*sn = HUGE_VAL;
			return;
		}
		bins[t] = alloc_option(kb);
		*sn += n[kb];
		*sb += b[kb];
	}
}

/* A per-tensor allocation's tables: option k of prepared tensor t has loss
 * term tn[t * NALLOC + k] (negative: not available) and estimated bytes
 * tb[...]; den is the loss's denominator, c_num and c_bytes those of the
 * search's choice. */
typedef struct alloc {
	double *tn, *tb;
	double *tden, *cap; /* per tensor: den, and the cap on num of a pick */
	double den, c_num, c_bytes;
	unsigned nprep;
} alloc_t;

static void alloc_free(alloc_t *a)
{
	free(a->tn);
	free(a->tb);
	free(a->tden);
	free(a->cap);
	memset(a, 0, sizeof(*a));
}

/* Per-tensor bit allocation. The loss is a sum over tensors (sum_t num_t /
 * sum_t den_t, den_t independent of the configuration), so the fewest bytes
 * within eps come from giving each tensor the option whose bytes + lambda *
 * num_t is least, lambda the smallest that keeps the sum within eps (a
 * Lagrangian allocation, as rate-distortion theory prescribes for a sum of
 * distortions): tensors that matter less to the loss get fewer bins than
 * one count for all would give them. The options: every bin count of the
 * space with k-means or uniform bins, and KEEP_LAST; none that puts the
 * tensor's own error over TENSOR_CAP * eps. A fresh codebook is weighed at
 * its switch cost for every step of the horizon: the next step's will have
 * moved again, and levels move with it; only a kept codebook's recurring
 * cost is the change of the values themselves. c is the search's choice.
 * alloc_tables evaluates every option on the samples into a; alloc_pick
 * then chooses within eps * scale. */
static int alloc_tables(evalctx_t *x, const rckpt_qconfig_t *c, alloc_t *a)
{
	unsigned t, k;
	int rc;

	memset(a, 0, sizeof(*a));
	a->nprep = x->nprep;
	a->tn = calloc((size_t)x->nprep * NALLOC + 1, sizeof(double));
	a->tb = calloc((size_t)x->nprep * NALLOC + 1, sizeof(double));
	a->tden = calloc((size_t)x->nprep + 1, sizeof(double));
	a->cap = calloc((size_t)x->nprep + 1, sizeof(double));
	rc = a->tn && a->tb && a->tden && a->cap ? 0 : -ENOMEM;
	x->tried++;
	x->drift = 1;
	for (t = 0; t < x->nprep && rc == 0; t++) {
		double *tn = a->tn + (size_t)t * NALLOC, *tb = a->tb + (size_t)t * NALLOC;
		double n0, d0, b0;
		rckpt_qparams_t keep;
		rc = eval_tensor(x, t, c, x->o->quantizer, NULL, &n0, &d0, &b0);
		a->den += d0;
		a->tden[t] = d0;
		a->c_num += n0;
		a->c_bytes += b0;
		for (k = 0; k + 1 < NALLOC && rc == 0; k++) {
			const unsigned b[1] = { alloc_option(k) };
			const rckpt_qconfig_t ct = tensor_config(c, &x->prep[t], b, 0);
			rc = eval_tensor(x, t, &ct, ALLOC_QUANTIZER(b[0]), NULL, &tn[k], &d0, &tb[k]);
		}
		tn[NALLOC - 1] = -1; /* unless the last codebook can be kept */
		if (rc == 0 && parent_seg(x, t) &&
		    rckpt_codec_qparams_keep(&keep, &x->prep[t], c, parent_seg(x, t)) == 0)
			rc = eval_tensor(x, t, c, x->o->quantizer, &keep, &tn[NALLOC - 1], &d0,
					 &tb[NALLOC - 1]);
	}
	x->drift = 0;
	if (rc)
		alloc_free(a);
	return rc;
}

/* Fills bins[] with the allocation of a within eps (no option puts a
 * tensor's own error over TENSOR_CAP * eps), and returns 1 when it is
 * smaller than the search's choice by the estimate, else 0 (no allocation;
 * also when the choice itself is over). */
static int alloc_pick(alloc_t *a, double eps, unsigned *bins)
{
	const double budget = eps * a->den;
	double lo = 0, hi, sn, sb;
	unsigned it, t;

	if (!(a->den > 0) || a->c_num > budget)
		return 0;
	for (t = 0; t < a->nprep; t++)
		a->cap[t] = a->tden[t] > 0 ? TENSOR_CAP * eps * a->tden[t] : HUGE_VAL;
	pick(a->tn, a->tb, a->cap, a->nprep, 0, bins, &sn, &sb);
	if (sn > budget) {
		/* the smallest lambda that passes: bracket, then bisect */
		hi = a->c_bytes / budget;
		for (it = 0; it < 64; it++, hi *= 4) {
			pick(a->tn, a->tb, a->cap, a->nprep, hi, bins, &sn, &sb);
			if (sn <= budget)
				break;
			lo = hi;
		}
		if (sn > budget)
			return 0;
		for (it = 0; it < 48; it++) {
			const double mid = (lo + hi) / 2;
			pick(a->tn, a->tb, a->cap, a->nprep, mid, bins, &sn, &sb);
			if (sn <= budget)
				hi = mid;
			else
				lo = mid;
		}
		pick(a->tn, a->tb, a->cap, a->nprep, hi, bins, &sn, &sb);
	}
	return sb < a->c_bytes;
}

static int allowed(cpoint_t c, const cpoint_t *last)
{
	return !last || (c.b >= last->b && c.e >= last->e && c.p >= last->p && c.q >= last->q);
}

/* Keeps the best acceptable point in *best; *bytes gets c's estimate. */
static int consider(evalctx_t *x, cpoint_t c, int *found, cpoint_t *best, double *best_bytes,
		    int *pass, double *bytes_out)
{
	double loss, bytes = 0;
	int rc = evaluate(x, c, &loss, &bytes);
	*bytes_out = bytes;
	*pass = rc == 0 && loss <= x->o->eps;
	if (*pass && (!*found || bytes < *best_bytes)) {
		*found = 1;
		*best = c;
		*best_bytes = bytes;
	}
	return rc;
}

static int search(evalctx_t *x, const cpoint_t *last, int have_emb, int have_g, cpoint_t *best,
		  int *found)
{
	unsigned e, p, m, q, b, mmax = have_g && x->o->use_grads ? 2 : 1, e0 = have_emb ? 0 : NE - 1;
	double best_bytes = 0, bytes;
	int rc, pass;

	*found = 0;
	if (last) {
		/* The neighbourhood: last, then each axis one step less
		 * aggressive. A less aggressive point keeps more information, so
		 * its estimate is no smaller: when last passes (with either
		 * metric: that axis is free), the others need no evaluation. */
		cpoint_t n[5];
		unsigned k;
		n[0] = *last;
		for (k = 1; k < 5; k++)
			n[k] = *last;
		n[1].b = last->b + 1 < NB ? last->b + 1 : last->b;
		n[2].e = last->e + 1 < NE ? last->e + 1 : last->e;
		n[3].p = last->p + 1 < NP ? last->p + 1 : last->p;
		n[4].q = last->q + 1 < NQ ? last->q + 1 : last->q;
		for (k = 0; k < 5; k++)
			for (m = 0; m < mmax; m++) {
				cpoint_t c = n[k];
				c.m = m;
				if (k > 0 && memcmp(&n[k], last, sizeof(c)) == 0)
					continue; /* an axis at its end */
				if ((rc = consider(x, c, found, best, &best_bytes, &pass, &bytes)))
					return rc;
			}
		if (*found)
			return 0;
	}
	/* Guided exhaustive. For each embedding-bins, metric and protection
	 * setting, walk pruning from none to most: more pruning never needs
	 * fewer bins to pass, so each line starts at the bins the last line
	 * first passed with, and once a line has no pass, none with more
	 * pruning will. Within a line, bins rise to the first pass, or until
	 * the estimate is no smaller than the best passing one (more bins only
	 * grow it). */
	for (e = e0; e < NE; e++)
		for (m = 0; m < mmax; m++)
			for (q = 0; q < NQ; q++) {
				unsigned b0 = last ? last->b : 0;
				for (p = NP; p-- > 0;) {
					int line_pass = 0;
					for (b = b0; b < NB; b++) {
						cpoint_t c = { b, e, p, m, q };
						if (!allowed(c, last))
							break;
						if ((rc = consider(x, c, found, best, &best_bytes, &pass, &bytes)))
							return rc;
						if (pass) {
							line_pass = 1;
							b0 = b;
						}
						if (pass || (*found && bytes >= best_bytes))
							break;
					}
					if (!line_pass && b == NB)
						break; /* no bins pass: more pruning will not */
				}
			}
	return 0;
}

/* ---- one step ---- */

static int check_layout(rckpt_ckenc_t *e, const rckpt_st_t *params, char *msg, size_t msglen)
{
	unsigned i;
	if (e->steps == 0) { /* the first successful step fixes the layout */
		free_names(e);
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

/* One step less aggressive: more bins, else more protection, else less
 * pruning. 0 when there is none. */
static int relax(cpoint_t *c)
{
	if (c->b + 1 < NB)
		c->b++;
	else if (c->q + 1 < NQ)
		c->q++;
	else if (c->p + 1 < NP)
		c->p++;
	else
		return 0;
	return 1;
}

/* Elements [first, first + n) of t as fp32: in place when t is aligned
 * fp32, else widened into the block buffer (n <= BLK). */
static const float *values(rckpt_ckenc_t *e, const rckpt_st_tensor_t *t, uint64_t first, size_t n)
{
	if (t->dtype == RCKPT_DT_F32 && ((uintptr_t)t->data & 3) == 0)
		return (const float *)t->data + first;
	rckpt_widen_to_f32(e->wblk, (const uint8_t *)t->data + first * rckpt_dtype_size(t->dtype),
			   t->dtype, n);
	return e->wblk;
}

/* The last step's summary of tensor i, when quantized: it seeds k-means. */
static const rckpt_seg_t *warm_of(const rckpt_ckenc_t *e, unsigned i)
{
	return e->steps && e->prev.seg[i].encoding == RCKPT_SEG_QUANTIZED ? &e->prev.seg[i] : NULL;
}

/* Configuration c's quantization parameters for every prepared tensor
 * (qp[], k-means seeded from the last step's codebooks) and its loss over
 * all the data, judged block by block: nothing of the size of the model is
 * kept. The blocks' lengths are multiples of the tile, so the sums are
 * those of rckpt_qerr over each whole tensor, which the GPU's are too. */
static int judge(rckpt_ckenc_t *e, const rckpt_st_t *params, const rckpt_tensor_prep_t *prep,
		 const unsigned *which, unsigned nprep, const rckpt_qconfig_t *c, const unsigned *tbins,
		 rckpt_codebook_cache_t *cache, rckpt_qparams_t *qp, double *quality)
{
	double num = 0, den = 0, worst = 0;
	unsigned pi;
	int rc = 0;

	for (pi = 0; pi < nprep && rc == 0; pi++) {
		const rckpt_st_tensor_t *t = &params->t[which[pi]];
		const rckpt_qconfig_t ct = tensor_config(c, &prep[pi], tbins, pi);
		double tn = 0, td = 0;
		uint64_t k;
		if (tbins && tbins[pi] == KEEP_LAST)
			rc = rckpt_codec_qparams_keep(&qp[pi], &prep[pi], &ct, warm_of(e, which[pi]));
		else
			rc = rckpt_codec_qparams(&qp[pi], &prep[pi], &ct,
						 tbins ? ALLOC_QUANTIZER(tbins[pi]) : e->o.quantizer,
						 warm_of(e, which[pi]), &cache[pi]);
		if (rc == 0 && e->o.gpu) {
			rc = rckpt_gpuenc_qerr(e->o.gpu, &tn, &td, t, prep[pi].g, &qp[pi]);
		} else {
			rckpt_qerr_t *qe = &e->qerr;
			rckpt_qerr_init(qe);
			for (k = 0; k < t->n && rc == 0; k += BLK) {
				const size_t m = t->n - k < BLK ? (size_t)(t->n - k) : BLK;
				const float *w = values(e, t, k, m), *g = prep[pi].g ? prep[pi].g + k : NULL;
				size_t np;
				rckpt_quantize(e->iblk, e->pblk, &np, w, g, m, &qp[pi]);
				rc = rckpt_qerr_add(qe, e->iblk, w, g, m, &qp[pi]);
			}
			rckpt_qerr_end(qe, &tn, &td);
		}
		num += tn;
		den += td;
		if (td > 0 && tn / td > worst)
			worst = tn / td;
	}
	*quality = step_loss(num, den, worst);
	return rc;
}

/* Tensor t as fp32 into out, from host or (on the GPU path) device memory. */
static int widen_any(rckpt_ckenc_t *e, float *out, const rckpt_st_tensor_t *t)
{
	const size_t bytes = (size_t)t->n * rckpt_dtype_size(t->dtype);
	void *h;
	int rc;
	if (e->o.gpu == NULL) {
		rckpt_widen_to_f32(out, t->data, t->dtype, t->n);
		return 0;
	}
	if ((h = malloc(bytes ? bytes : 1)) == NULL)
		return -ENOMEM;
	rc = rckpt_gpuenc_read(e->o.gpu, h, t->data, bytes);
	if (rc == 0)
		rckpt_widen_to_f32(out, h, t->dtype, t->n);
	free(h);
	return rc;
}

/* Dequantizes every tensor with qp and asks the trainer's callback. This
 * holds the model in fp32: the callback's price. */
static int ask_callback(rckpt_ckenc_t *e, const rckpt_st_t *params, const rckpt_tensor_prep_t *prep,
			const unsigned *which, unsigned nprep, const rckpt_qparams_t *qp,
			double *loss)
{
	float **v = calloc(params->ntensors ? params->ntensors : 1, sizeof(*v));
	unsigned i, pi = 0;
	int rc = v ? 0 : -ENOMEM;

	for (i = 0; rc == 0 && i < params->ntensors; i++) {
		const rckpt_st_tensor_t *t = &params->t[i];
		uint64_t k;
		if ((v[i] = malloc(4 * (size_t)(t->n ? t->n : 1))) == NULL) {
			rc = -ENOMEM;
			break;
		}
		if (pi >= nprep || which[pi] != i) {
			rc = widen_any(e, v[i], t);
			continue;
		}
		if (e->o.gpu) {
			rc = rckpt_gpuenc_dequantize_f32(e->o.gpu, v[i], t, prep[pi].g, &qp[pi]);
			pi++;
			continue;
		}
		for (k = 0; k < t->n && rc == 0; k += BLK) {
			const size_t m = t->n - k < BLK ? (size_t)(t->n - k) : BLK;
			const float *w = values(e, t, k, m), *g = prep[pi].g ? prep[pi].g + k : NULL;
			size_t np;
			rckpt_quantize(e->iblk, e->pblk, &np, w, g, m, &qp[pi]);
			rc = rckpt_dequantize(v[i] + k, e->iblk, m, &qp[pi], e->pblk, np);
		}
		pi++;
	}
	if (rc == 0)
		rc = e->o.quality(e->o.quality_arg, params, (const float *const *)v, loss);
	for (i = 0; v && i < params->ntensors; i++)
		free(v[i]);
	free(v);
	return rc;
}

/* Lays the tensors out per kind (embedding, conv, linear, other,
 * norm/bias), in name order, and cuts each kind's space into chunks. */
static int build_layout(rckpt_ckenc_t *e, const rckpt_st_t *params)
{
	static const unsigned order[RCKPT_LK_COUNT] = { RCKPT_LK_EMBEDDING, RCKPT_LK_CONV, RCKPT_LK_LINEAR,
							 RCKPT_LK_OTHER, RCKPT_LK_NORM_BIAS };
	const uint64_t cap = e->o.chunk_params;
	uint32_t c;
	unsigned k, i;

	free_layout(e);
	for (k = 0; k < RCKPT_LK_COUNT; k++) {
		int open = 0; /* a chunk of this kind with room */
		uint64_t fill = 0;
		for (i = 0; i < params->ntensors; i++) {
			const rckpt_st_tensor_t *t = &params->t[i];
			uint64_t first = 0;
			if (rckpt_layer_kind(t->name, t->ndim, t->shape) != order[k])
				continue;
			do {
				uint64_t take;
				struct piece *pc;
				if (!open || (fill == cap && t->n > first)) {
					void *a = realloc(e->pieces, sizeof(*e->pieces) * (e->nchunks + 1));
					void *b = a ? realloc(e->npieces, sizeof(*e->npieces) * (e->nchunks + 1)) : NULL;
					if (a)
						e->pieces = a;
					if (b)
						e->npieces = b;
					if (!a || !b)
						return -ENOMEM;
					e->pieces[e->nchunks] = NULL;
					e->npieces[e->nchunks] = 0;
					e->nchunks++;
					open = 1;
					fill = 0;
				}
				c = e->nchunks - 1;
				take = t->n - first < cap - fill ? t->n - first : cap - fill;
				pc = realloc(e->pieces[c], sizeof(*pc) * (e->npieces[c] + 1));
				if (pc == NULL)
					return -ENOMEM;
				e->pieces[c] = pc;
				pc[e->npieces[c]++] = (struct piece){ i, first, take };
				first += take;
				fill += take;
			} while (first < t->n);
		}
	}
	e->prev_chunks = calloc(e->nchunks ? e->nchunks : 1, sizeof(*e->prev_chunks));
	return e->prev_chunks ? 0 : -ENOMEM;
}

/* Piece [first, first + n) of tensor t quantized with q into seg, a block
 * at a time. Levels at the tensor's sample positions (multiples of
 * stride) also go to summary[position / stride]. */
static int quantize_piece(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_st_tensor_t *t,
			  const float *grads, const rckpt_qparams_t *q, uint64_t first, uint64_t n,
			  uint64_t stride, uint8_t *summary, float *snap)
{
	uint64_t k, cap = 0, u;

	seg->n = n;
	seg->first = first;
	seg->dtype = (uint8_t)t->dtype;
	seg->encoding = RCKPT_SEG_QUANTIZED;
	seg->nbins = q->nbins;
	memcpy(seg->centroids, q->centroids, sizeof(float) * q->nbins);
	seg->idx = malloc(n ? (size_t)n : 1);
	seg->prot = malloc(e->o.gpu ? 2 * (size_t)(n ? n : 1) : 2);
	if (seg->idx == NULL || seg->prot == NULL)
		return -ENOMEM;
	cap = 1;
	if (e->o.gpu) {
		size_t np = 0;
		uint16_t *pr;
		int rc = rckpt_gpuenc_quantize(e->o.gpu, seg->idx, seg->prot, &np, t, grads, first, n, q);
		if (rc)
			return rc;
		seg->nprot = np;
		if ((pr = realloc(seg->prot, 2 * (np ? np : 1))) != NULL)
			seg->prot = pr;
		if (snap) { /* the values as saved, for partial steps */
			const size_t dsz = rckpt_dtype_size(t->dtype);
			for (k = 0; k < n && rc == 0; k += BLK) {
				const size_t m = n - k < BLK ? (size_t)(n - k) : BLK;
				rc = rckpt_gpuenc_read(e->o.gpu, e->wblk, (const uint8_t *)t->data + (first + k) * dsz,
						       m * dsz); /* wblk holds BLK fp32 */
				if (rc == 0)
					rckpt_widen_to_f32(snap + k, e->wblk, t->dtype, m);
			}
			if (rc)
				return rc;
		}
		n = 0; /* done: skip the CPU's blocks */
	}
	for (k = 0; k < n; k += BLK) {
		const size_t m = n - k < BLK ? (size_t)(n - k) : BLK;
		const float *w = values(e, t, first + k, m);
		size_t np;
		rckpt_quantize(seg->idx + k, e->pblk, &np, w, grads ? grads + first + k : NULL, m, q);
		if (snap)
			memcpy(snap + k, w, 4 * m);
		if (seg->nprot + np > cap) {
			uint64_t nc = (seg->nprot + np) * 2;
			uint16_t *pr = realloc(seg->prot, 2 * (size_t)nc);
			if (pr == NULL)
				return -ENOMEM;
			seg->prot = pr;
			cap = nc;
		}
		memcpy(seg->prot + seg->nprot, e->pblk, 2 * np);
		seg->nprot += np;
	}
	for (u = (first + stride - 1) / stride * stride; u < first + seg->n; u += stride)
		summary[u / stride] = seg->idx[u - first];
	return 0;
}

/* Piece [first, first + n) of tensor t, kept whole in seg. */
static int lossless_piece(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_st_tensor_t *t,
			  uint64_t first, uint64_t n)
{
	const size_t dsz = rckpt_dtype_size(t->dtype);
	const uint8_t *src = (const uint8_t *)t->data + first * dsz;
	uint8_t *h = NULL;
	int rc = 0;
	if (e->o.gpu) { /* the bytes may be in device memory */
		h = malloc(n ? (size_t)n * dsz : 1);
		rc = h ? rckpt_gpuenc_read(e->o.gpu, h, src, (size_t)n * dsz) : -ENOMEM;
		src = h;
	}
	if (rc == 0)
		rc = rckpt_codec_lossless_segment(seg, src, t->dtype, n);
	free(h);
	seg->first = first;
	return rc;
}

/* A step's manifest, tensors filled in (names borrowed from params; the
 * encodings are the caller's), segments and chunks to come. */
static int mf_begin(const rckpt_ckenc_t *e, rckpt_manifest_t *mf, const rckpt_st_t *params,
		    uint64_t step, uint64_t parent)
{
	unsigned i;
	memset(mf, 0, sizeof(*mf));
	mf->t = calloc(params->ntensors ? params->ntensors : 1, sizeof(*mf->t));
	mf->chunk = calloc(e->nchunks ? e->nchunks : 1, sizeof(*mf->chunk));
	if (!mf->t || !mf->chunk)
		return -ENOMEM;
	mf->step = step;
	mf->parent = parent;
	mf->chunk_params = e->o.chunk_params;
	mf->ntensors = params->ntensors;
	mf->nchunks = e->nchunks;
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_st_tensor_t *t = &params->t[i];
		mf->t[i].name = (char *)t->name; /* borrowed; mf_free leaves it */
		mf->t[i].dtype = (uint8_t)t->dtype;
		mf->t[i].kind = (uint8_t)rckpt_layer_kind(t->name, t->ndim, t->shape);
		mf->t[i].ndim = t->ndim;
		memcpy(mf->t[i].shape, t->shape, sizeof(t->shape));
	}
	return 0;
}

/* Segment k of chunk c, n elements, belongs to tensor t. */
static int mf_add_seg(rckpt_manifest_t *mf, uint32_t t, uint32_t c, uint32_t k, uint64_t n)
{
	rckpt_mf_tensor_t *mt = &mf->t[t];
	rckpt_mf_seg_t *ms = realloc(mt->seg, sizeof(*ms) * (mt->nseg + 1));
	if (ms == NULL)
		return -ENOMEM;
	mt->seg = ms;
	ms[mt->nseg++] = (rckpt_mf_seg_t){ c, k, n };
	mf->chunk[c].elements += (uint32_t)n;
	return 0;
}

/* The configuration and statistics, then the bytes. */
static int mf_end(rckpt_manifest_t *mf, rckpt_buf_t *manifest, rckpt_ckenc_stats_t *st)
{
	unsigned k;
	int rc;
	mf->raw_bytes = st->raw_bytes;
	mf->quality = st->quality;
	mf->cfg.bins = (uint8_t)st->config.bins;
	mf->cfg.emb_bins = (uint8_t)st->config.emb_bins;
	mf->cfg.metric = (uint8_t)st->config.prune_metric;
	mf->cfg.flags = (uint8_t)(st->config.protect_by_sensitivity ? 1 : 0);
	for (k = 0; k < RCKPT_MF_KINDS; k++)
		mf->cfg.prune[k] = st->config.prune_frac[k];
	mf->cfg.protect = st->config.protect_frac;
	mf->cfg.lambda = st->config.lambda;
	rc = rckpt_manifest_encode(manifest, mf);
	if (rc == 0)
		st->enc_bytes = mf->enc_bytes + manifest->len;
	return rc;
}

static void mf_free(rckpt_manifest_t *mf)
{
	uint32_t i;
	for (i = 0; mf->t && i < mf->ntensors; i++)
		free(mf->t[i].seg);
	free(mf->t);
	free(mf->chunk);
	memset(mf, 0, sizeof(*mf));
}

/* Cuts the step into chunks, a record each (base, or delta against the
 * chunk's last record), quantizing each piece as its chunk is built, and
 * hands each record to the sink as soon as it is encoded; then the
 * manifest. tq[i]: tensor i's quantization parameters, NULL when lossless.
 * sum: the next step's summary (e->prev), filled here. */
static int emit(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
		rckpt_ckenc_stats_t *st, const rckpt_st_t *params, const rckpt_st_t *grads,
		const rckpt_qparams_t *const *tq, const uint64_t *stride, rckpt_record_t *sum,
		uint64_t step)
{
	rckpt_manifest_t mf;
	rckpt_buf_t enc = RCKPT_BUF_INIT;
	uint32_t c, i, k;
	int rc = 0;

	if ((rc = mf_begin(e, &mf, params, step, st->is_base ? RCKPT_NO_PARENT : e->prev.step)))
		goto done;
	for (i = 0; i < params->ntensors; i++)
		mf.t[i].encoding = tq[i] ? RCKPT_SEG_QUANTIZED : RCKPT_SEG_LOSSLESS;
	if (sink->begin && (rc = sink->begin(sink->arg, e->nchunks)))
		goto done;
	for (c = 0; c < e->nchunks && rc == 0; c++) {
		rckpt_record_t r;
		memset(&r, 0, sizeof(r));
		r.kind = st->is_base ? RCKPT_REC_BASE : RCKPT_REC_DELTA;
		r.step = step;
		r.parent = mf.parent;
		r.nseg = e->npieces[c];
		r.seg = calloc(r.nseg ? r.nseg : 1, sizeof(rckpt_seg_t));
		if (r.seg == NULL)
			rc = -ENOMEM;
		for (k = 0; k < r.nseg && rc == 0; k++) {
			const struct piece *pc = &e->pieces[c][k];
			const rckpt_st_tensor_t *t = &params->t[pc->tensor];
			if ((rc = mf_add_seg(&mf, pc->tensor, c, k, pc->n)))
				break;
			if (tq[pc->tensor]) {
				const rckpt_st_tensor_t *g = grads ? rckpt_st_find(grads, t->name) : NULL;
				rc = quantize_piece(e, &r.seg[k], t, g ? (const float *)g->data : NULL,
						    tq[pc->tensor], pc->first, pc->n, stride[pc->tensor],
						    sum->seg[pc->tensor].idx,
						    e->saved && e->saved[pc->tensor] ? e->saved[pc->tensor] + pc->first
										      : NULL);
			} else {
				rc = lossless_piece(e, &r.seg[k], t, pc->first, pc->n);
			}
			r.seg[k].tensor = pc->tensor;
		}
		mf.chunk[c].nseg = r.nseg;
		if (rc == 0)
			rc = rckpt_record_encode(&enc, &r, st->is_base ? NULL : &e->prev_chunks[c], &e->o.is);
		if (rc == 0)
			rc = rckpt_record_digest(mf.chunk[c].sha256, &r);
		mf.chunk[c].record_bytes = enc.len;
		mf.enc_bytes += enc.len;
		if (rc == 0)
			rc = sink->record(sink->arg, c, &enc);
		rckpt_buf_free(&enc);
		/* this record is the chunk's next parent */
		rckpt_record_free(&e->prev_chunks[c]);
		e->prev_chunks[c] = r;
	}
	if (rc)
		goto done;
	rc = mf_end(&mf, manifest, st);
done:
	mf_free(&mf);
	return rc;
}

/* The next step's summary of this one: per tensor its header (dtype, size,
 * encoding, codebook) and, when quantized, its levels at the sample
 * positions, which emit fills. */
static int summary_init(rckpt_record_t *sum, const rckpt_st_t *params,
			const rckpt_qparams_t *const *tq, const uint64_t *stride, uint64_t step)
{
	unsigned i;
	memset(sum, 0, sizeof(*sum));
	sum->step = step;
	sum->nseg = params->ntensors;
	sum->seg = calloc(params->ntensors ? params->ntensors : 1, sizeof(*sum->seg));
	if (sum->seg == NULL)
		return -ENOMEM;
	for (i = 0; i < params->ntensors; i++) {
		rckpt_seg_t *s = &sum->seg[i];
		s->tensor = i;
		s->n = params->t[i].n;
		s->dtype = (uint8_t)params->t[i].dtype;
		s->encoding = tq[i] ? RCKPT_SEG_QUANTIZED : RCKPT_SEG_LOSSLESS;
		if (tq[i] == NULL)
			continue;
		s->nbins = tq[i]->nbins;
		memcpy(s->centroids, tq[i]->centroids, sizeof(float) * tq[i]->nbins);
		s->idx = calloc(s->n / stride[i] + 1, 1);
		if (s->idx == NULL)
			return -ENOMEM;
	}
	return 0;
}

/* ---- continuing a committed chain ---- */

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

/* The point of the search space a stored configuration is, if it is one. */
static int cpoint_of(cpoint_t *c, const rckpt_mf_config_t *m)
{
	unsigned k;
	memset(c, 0, sizeof(*c));
	for (k = 0; k < NB && BINS[k] != m->bins; k++)
		;
	c->b = k;
	for (k = 0; k < NE && EMB_BINS[k] != m->emb_bins; k++)
		;
	c->e = k;
	for (k = 0; k < NP && PRUNE[k] != m->prune[RCKPT_LK_LINEAR]; k++)
		;
	c->p = k;
	for (k = 0; k < NQ && PROTECT[k] != m->protect; k++)
		;
	c->q = k;
	c->m = m->metric;
	return c->b < NB && c->e < NE && c->p < NP && c->q < NQ && c->m < 2;
}

/* Takes up e->resume when params are the tensors of that step, laid out in
 * the same chunks (same chunk size, same encodings): the step's levels
 * become the chunks' parents and its codebooks the warm starts, as if this
 * encoder had written it. 0 taken up, 1 not (the next step is a base), or
 * -ENOMEM. e->resume is gone either way. */
static int adopt(rckpt_ckenc_t *e, const rckpt_st_t *params)
{
	rckpt_ckdec_t *d = e->resume;
	const rckpt_manifest_t *mf = &d->mf;
	uint64_t *stride = NULL;
	unsigned i, total = 0;
	uint32_t c, k;
	int rc = 1;

	e->resume = NULL;
	if (mf->ntensors != params->ntensors || mf->chunk_params != e->o.chunk_params)
		goto out;
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_st_tensor_t *t = &params->t[i];
		const unsigned kind = rckpt_layer_kind(t->name, t->ndim, t->shape);
		const unsigned enc = e->o.fixed.lossless_kinds & (1u << kind) ? RCKPT_SEG_LOSSLESS
									       : RCKPT_SEG_QUANTIZED;
		if (strcmp(mf->t[i].name, t->name) != 0 || mf->t[i].dtype != t->dtype ||
		    mf->t[i].kind != kind || mf->t[i].encoding != enc)
			goto out;
	}
	if ((rc = build_layout(e, params)) != 0)
		goto out;
	rc = 1;
	if (e->nchunks != mf->nchunks)
		goto fail;
	for (c = 0; c < e->nchunks; c++) {
		if (d->chunk[c].nseg != e->npieces[c])
			goto fail;
		total += e->npieces[c];
	}
	for (i = 0; i < params->ntensors; i++) {
		uint64_t at = 0;
		for (k = 0; k < mf->t[i].nseg; k++, total--) {
			const rckpt_mf_seg_t *ms = &mf->t[i].seg[k];
			const struct piece *pc;
			const rckpt_seg_t *sg;
			if (total == 0 || ms->chunk >= e->nchunks || ms->index >= e->npieces[ms->chunk])
				goto fail;
			pc = &e->pieces[ms->chunk][ms->index];
			sg = &d->chunk[ms->chunk].seg[ms->index];
			if (pc->tensor != i || pc->first != at || pc->n != ms->n || sg->n != ms->n ||
			    sg->encoding != mf->t[i].encoding)
				goto fail;
			at += ms->n;
		}
		if (at != params->t[i].n)
			goto fail;
	}
	if (total != 0)
		goto fail;
	/* The summary the next step's search reads: each quantized tensor's
	 * codebook and its levels at the sample positions. */
	if ((stride = calloc(params->ntensors ? params->ntensors : 1, sizeof(*stride))) == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	rckpt_record_free(&e->prev);
	e->prev.step = mf->step;
	e->prev.nseg = params->ntensors;
	e->prev.seg = calloc(params->ntensors ? params->ntensors : 1, sizeof(*e->prev.seg));
	if (e->prev.seg == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < params->ntensors; i++) {
		rckpt_seg_t *s = &e->prev.seg[i];
		const uint64_t n = params->t[i].n;
		s->tensor = i;
		s->n = n;
		s->dtype = (uint8_t)params->t[i].dtype;
		s->encoding = mf->t[i].encoding;
		stride[i] = n > e->o.sample_max ? (n + e->o.sample_max - 1) / e->o.sample_max : 1;
		if (s->encoding != RCKPT_SEG_QUANTIZED || mf->t[i].nseg == 0)
			continue;
		if ((s->idx = calloc(n / stride[i] + 1, 1)) == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	for (c = 0; c < e->nchunks; c++)
		for (k = 0; k < e->npieces[c]; k++) {
			const struct piece *pc = &e->pieces[c][k];
			rckpt_seg_t *sg = &d->chunk[c].seg[k], *s = &e->prev.seg[pc->tensor];
			uint64_t u;
			sg->tensor = pc->tensor;
			sg->first = pc->first;
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
	free_names(e);
	e->names = calloc(params->ntensors ? params->ntensors : 1, sizeof(char *));
	for (i = 0; e->names && i < params->ntensors; i++, e->ntensors++)
		if ((e->names[i] = strdup(params->t[i].name)) == NULL)
			break;
	if (e->names == NULL || e->ntensors != params->ntensors) {
		rc = -ENOMEM;
		goto fail;
	}
	/* The step's values at the sample positions, dequantized: the search
	 * weighs how stable a configuration's levels are against them, as it
	 * would against the samples of a step it had written itself. */
	free_prev_samples(e);
	e->psmp = calloc(params->ntensors ? params->ntensors : 1, sizeof(*e->psmp));
	if (e->psmp == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < params->ntensors; i++) {
		struct prev_sample *ps = &e->psmp[e->npsmp];
		if (e->prev.seg[i].encoding != RCKPT_SEG_QUANTIZED)
			continue;
		e->npsmp++;
		ps->n = (size_t)((params->t[i].n + stride[i] - 1) / stride[i]);
		if ((ps->w = malloc(4 * (ps->n ? ps->n : 1))) == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	for (c = 0; c < e->nchunks; c++)
		for (k = 0, i = 0; k < e->npieces[c]; k++) {
			const struct piece *pc = &e->pieces[c][k];
			const rckpt_seg_t *sg = &d->chunk[c].seg[k];
			const uint64_t st = stride[pc->tensor];
			struct prev_sample *ps = NULL;
			float *f;
			uint64_t u;
			unsigned pi, t;
			if (sg->encoding != RCKPT_SEG_QUANTIZED || pc->n == 0)
				continue;
			for (t = 0, pi = 0; t < pc->tensor; t++) /* its place among the quantized */
				pi += e->prev.seg[t].encoding == RCKPT_SEG_QUANTIZED;
			ps = &e->psmp[pi];
			if ((f = malloc(4 * (size_t)pc->n)) == NULL) {
				rc = -ENOMEM;
				goto fail;
			}
			if (rckpt_codec_decode_f32(f, sg) != 0)
				memset(f, 0, 4 * (size_t)pc->n);
			for (u = (pc->first + st - 1) / st * st; u < pc->first + pc->n; u += st)
				ps->w[u / st] = f[u - pc->first];
			free(f);
			(void)i;
		}
	for (c = 0; c < e->nchunks; c++) { /* the step's levels: the next deltas' parents */
		e->prev_chunks[c] = d->chunk[c];
		memset(&d->chunk[c], 0, sizeof(d->chunk[c]));
	}
	e->have_last = cpoint_of(&e->last, &mf->cfg);
	/* As if this encoder had written the chain: after a base the next step
	 * is the second (which searches the whole space again, now that it can
	 * weigh how stable each configuration is); after a delta, a later one
	 * (the neighbourhood of the configuration the chain runs with). */
	e->steps = mf->parent == RCKPT_NO_PARENT ? 1 : 2;
	e->force_base = 0;
	rc = 0;
	goto out;
fail:
	free_prev_samples(e);
	free_layout(e);
	free_names(e);
	rckpt_record_free(&e->prev);
	memset(&e->prev, 0, sizeof(e->prev));
out:
	free(stride);
	rckpt_ckdec_free(d);
	free(d);
	return rc;
}

int rckpt_ckenc_step_stream(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
			    rckpt_ckenc_stats_t *st, const rckpt_st_t *params, const rckpt_st_t *grads,
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
	cpoint_t best = { NB - 1, NE - 1, NP - 1, 0, NQ - 1 };
	const cpoint_t last_before = e->last;
	const int had_last = e->have_last;
	int rc, found = 0, emitting = 0, have_emb = 0, have_g = 0;
	double t0;

	memset(st, 0, sizeof(*st));
	memset(&sum, 0, sizeof(sum));
	st->step = step;
	if (e->resume && (rc = adopt(e, params)) < 0)
		return rc;
	if ((rc = check_layout(e, params, msg, msglen)))
		return rc;
	if (o->gpu)
		rckpt_gpuenc_step_begin(o->gpu);

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
		const rckpt_st_tensor_t *t = &params->t[i], *g = NULL;
		unsigned kind = rckpt_layer_kind(t->name, t->ndim, t->shape);
		const float *gd;
		sample_t *sp = &smp[nprep];
		uint64_t bad = 0, k, u;
		st->raw_bytes += (size_t)t->n * 4;
		stride[i] = t->n > o->sample_max ? (t->n + o->sample_max - 1) / o->sample_max : 1;
		if (o->fixed.lossless_kinds & (1u << kind))
			continue;
		if (grads && (g = rckpt_st_find(grads, t->name)) != NULL &&
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
		if (o->gpu) {
			rc = sp->w == NULL || (g && sp->g == NULL)
				     ? -ENOMEM
				     : rckpt_gpuenc_prepare(o->gpu, &prep[nprep], &bad, t, gd, kind, sp->stride,
							    sp->w, sp->g, &sp->n);
			nprep++;
			if (rc == -EDOM)
				snprintf(msg, msglen, "tensor '%s' holds NaN or Inf at element %llu",
					 t->name, (unsigned long long)bad);
			if (rc)
				goto out;
			have_emb |= kind == RCKPT_LK_EMBEDDING;
			have_g |= g != NULL;
			continue;
		}
		rc = sp->w == NULL || (g && sp->g == NULL)
			     ? -ENOMEM
			     : rckpt_codec_prep_begin(&prep[nprep], t->dtype, t->n, gd, kind);
		nprep++; /* from here on the cleanup frees it */
		for (k = 0; k < t->n && rc == 0; k += BLK) {
			const size_t m = t->n - k < BLK ? (size_t)(t->n - k) : BLK;
			const float *w = values(e, t, k, m);
			rc = rckpt_codec_prep_add(&prep[nprep - 1], w, gd ? gd + k : NULL, m, &bad);
			if (rc == -EDOM)
				snprintf(msg, msglen, "tensor '%s' holds NaN or Inf at element %llu",
					 t->name, (unsigned long long)(bad + k));
			for (u = (k + sp->stride - 1) / sp->stride * sp->stride; rc == 0 && u < k + m;
			     u += sp->stride) {
				sp->w[sp->n] = w[u - k];
				if (gd)
					sp->g[sp->n] = gd[u];
				sp->n++;
			}
		}
		if (rc == 0)
			rc = rckpt_codec_prep_end(&prep[nprep - 1]);
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
			if ((rc = evaluate(&x, dummy, &loss, &bytes)))
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
		rc = search(&x, e->have_last && e->steps != 1 ? &e->last : NULL, have_emb, have_g, &best,
			    &found);
		st->configs_tried = x.tried;
		if (rc)
			goto out;
		if (!found && e->have_last)
			best = (cpoint_t){ NB - 1, NE - 1, NP - 1, 0, NQ - 1 };
		e->last = best;
		e->have_last = 1;
		st->config = config_of(o, best);
		if (found && o->alloc) {
			if ((tbins = calloc(nprep ? nprep : 1, sizeof(*tbins))) == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			if ((rc = alloc_tables(&x, &st->config, &alloc)) < 0)
				goto out;
			if (!alloc_pick(&alloc, alloc_eps, tbins)) { /* no smaller than the search's choice */
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
		rc = judge(e, params, prep, which, nprep, &st->config, tbins, cache, qp, &st->quality);
		if (rc == 0 && o->quality) {
			rc = ask_callback(e, params, prep, which, nprep, qp, &st->cb_quality);
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
			if (++alloc_tries > ALLOC_RETRIES || !alloc_pick(&alloc, alloc_eps, tbins)) {
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
			if (!relax(&best))
				break;
			st->config = config_of(o, best);
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
	if (e->steps == 0 && (rc = build_layout(e, params)))
		goto out;
	if (o->partial_block && e->saved == NULL) {
		e->saved = calloc(params->ntensors ? params->ntensors : 1, sizeof(*e->saved));
		e->lastq = calloc(params->ntensors ? params->ntensors : 1, sizeof(*e->lastq));
		for (i = 0; e->saved && e->lastq && i < params->ntensors; i++)
			if (tq[i] && (e->saved[i] = malloc(params->t[i].n ? 4 * (size_t)params->t[i].n : 4)) == NULL)
				break;
		if (!e->saved || !e->lastq || i < params->ntensors) {
			free_saved(e);
			rc = -ENOMEM;
			goto out;
		}
	}
	if ((rc = summary_init(&sum, params, tq, stride, step)))
		goto out;
	st->is_base = e->steps == 0 || e->force_base || (o->base_every && e->steps % o->base_every == 0);
	/* From the first record handed out, a failure leaves the chunks'
	 * parents half replaced: the next step must then be a base. */
	e->force_base = 1;
	emitting = 1;
	if ((rc = emit(e, sink, manifest, st, params, grads, tq, stride, &sum, step)))
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
	/* this step's samples become the next step's "last" */
	free_prev_samples(e);
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
	alloc_free(&alloc);
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
		     const rckpt_st_t *params, const rckpt_st_t *grads, uint64_t step, char *msg,
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
}

void rckpt_ckenc_restart(rckpt_ckenc_t *e)
{
	e->force_base = 1;
}

/* ---- partial steps ---- */

int rckpt_ckenc_partial_ready(const rckpt_ckenc_t *e)
{
	return e->o.partial_block && e->steps > 0 && !e->force_base && e->saved != NULL;
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

typedef struct blkref {
	double d;
	uint64_t i;
} blkref_t;

static int by_distance(const void *a, const void *b)
{
	const blkref_t *x = a, *y = b;
	if (x->d != y->d)
		return x->d > y->d ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* A deep copy of a decoded record. */
static int record_copy(rckpt_record_t *dst, const rckpt_record_t *src)
{
	uint32_t i;
	*dst = *src;
	dst->seg = calloc(src->nseg ? src->nseg : 1, sizeof(*dst->seg));
	if (dst->seg == NULL)
		return -ENOMEM;
	for (i = 0; i < src->nseg; i++) {
		const rckpt_seg_t *a = &src->seg[i];
		rckpt_seg_t *b = &dst->seg[i];
		*b = *a;
		b->idx = NULL;
		b->prot = NULL;
		b->raw = NULL;
		if (a->encoding == RCKPT_SEG_LOSSLESS)
			continue; /* replaced whole by the caller */
		b->idx = malloc(a->n ? (size_t)a->n : 1);
		b->prot = malloc(a->nprot ? 2 * (size_t)a->nprot : 2);
		if (!b->idx || !b->prot) {
			rckpt_record_free(dst);
			return -ENOMEM;
		}
		if (a->n)
			memcpy(b->idx, a->idx, (size_t)a->n);
		if (a->nprot)
			memcpy(b->prot, a->prot, 2 * (size_t)a->nprot);
	}
	return 0;
}

/* The quantized blocks of a piece of n elements. */
static uint64_t piece_blocks(uint64_t n, uint32_t block)
{
	return n / block + (n % block != 0);
}

/* Protected values of seg after its blocks sel[] were requantized: the old
 * ones (of ps, the levels before) outside, nw[] (in order) inside. */
static int merge_prot(rckpt_seg_t *seg, const rckpt_seg_t *ps, uint32_t block, const uint32_t *sel,
		      uint32_t nsel, const uint16_t *nw, uint64_t nnw)
{
	const uint8_t P = (uint8_t)(seg->nbins + 1);
	uint64_t pos = 0, pp = 0, total = 0, i, lo, hi, c;
	uint16_t *out;
	uint32_t b;

	for (i = 0; i < seg->n; i++)
		total += seg->idx[i] == P;
	out = malloc(total ? 2 * (size_t)total : 2);
	if (out == NULL)
		return -ENOMEM;
	seg->nprot = 0;
	for (b = 0; b <= nsel; b++) {
		lo = b < nsel ? (uint64_t)sel[b] * block : seg->n;
		hi = b < nsel ? (seg->n - lo > block ? lo + block : seg->n) : seg->n;
		for (i = pos; i < lo; i++)
			if (ps->idx[i] == P)
				out[seg->nprot++] = ps->prot[pp++];
		for (i = lo; i < hi; i++)
			pp += ps->idx[i] == P;
		pos = hi;
	}
	/* insert the blocks' new values at their places: a second walk */
	{
		uint16_t *merged = malloc(total ? 2 * (size_t)total : 2);
		uint64_t o = 0, n = 0, q = 0;
		if (merged == NULL) {
			free(out);
			return -ENOMEM;
		}
		pos = 0;
		for (b = 0; b <= nsel; b++) {
			lo = b < nsel ? (uint64_t)sel[b] * block : seg->n;
			hi = b < nsel ? (seg->n - lo > block ? lo + block : seg->n) : seg->n;
			for (c = 0, i = pos; i < lo; i++)
				c += seg->idx[i] == P;
			if (c)
				memcpy(merged + n, out + o, 2 * (size_t)c);
			n += c;
			o += c;
			for (c = 0, i = lo; i < hi; i++)
				c += seg->idx[i] == P;
			if (q + c > nnw) {
				free(out);
				free(merged);
				return -EINVAL;
			}
			if (c)
				memcpy(merged + n, nw + q, 2 * (size_t)c);
			n += c;
			q += c;
			pos = hi;
		}
		free(out);
		free(seg->prot);
		seg->prot = merged;
		seg->nprot = n;
		return n == total && q == nnw ? 0 : -EINVAL;
	}
}

int rckpt_ckenc_step_partial(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink,
			     rckpt_buf_t *manifest, rckpt_ckenc_stats_t *st,
			     const rckpt_st_t *params, const rckpt_st_t *grads, uint64_t step,
			     const rckpt_ckenc_partial_t *p, char *msg, size_t msglen)
{
	const uint32_t block = e->o.partial_block;
	const uint64_t run = block <= BLK ? BLK / block * block : 0;
	rckpt_manifest_t mf;
	rckpt_buf_t enc = RCKPT_BUF_INIT;
	uint64_t **boff = NULL, nb = 0, want, b, u;
	double *dist = NULL;
	uint8_t *chosen = NULL;
	uint16_t *nw = NULL;
	uint32_t c, k;
	unsigned i;
	int rc = 0;
	double t0 = rckpt_now_s();

	memset(st, 0, sizeof(*st));
	memset(&mf, 0, sizeof(mf));
	st->step = step;
	if (!rckpt_ckenc_partial_ready(e) || run == 0) {
		snprintf(msg, msglen, "a partial step needs a full one before it%s",
			 e->o.partial_block ? "" : " and the job's partial_block");
		return -EINVAL;
	}
	if (!(p->fraction > 0 && p->fraction <= 1) || p->select > RCKPT_CKENC_RANDOM) {
		snprintf(msg, msglen, "fraction must be in (0, 1] and select known");
		return -EINVAL;
	}
	if (e->o.gpu) {
		snprintf(msg, msglen, "partial steps run on the CPU");
		return -EINVAL;
	}
	if ((rc = check_layout(e, params, msg, msglen)))
		return rc;
	for (i = 0; i < params->ntensors; i++)
		if (grads && rckpt_st_find(grads, params->t[i].name) != NULL) {
			const rckpt_st_tensor_t *g = rckpt_st_find(grads, params->t[i].name);
			if (g->dtype != RCKPT_DT_F32 || g->n != params->t[i].n || ((uintptr_t)g->data & 3)) {
				snprintf(msg, msglen, "gradients of '%s' are not aligned fp32 of its shape",
					 params->t[i].name);
				return -EINVAL;
			}
		}
	/* Number the blocks in layout order and measure how far each moved. */
	boff = calloc(e->nchunks ? e->nchunks : 1, sizeof(*boff));
	if (boff == NULL)
		return -ENOMEM;
	for (c = 0; c < e->nchunks && rc == 0; c++) {
		boff[c] = calloc(e->npieces[c] ? e->npieces[c] : 1, sizeof(**boff));
		if (boff[c] == NULL) {
			rc = -ENOMEM;
			break;
		}
		for (k = 0; k < e->npieces[c]; k++) {
			boff[c][k] = nb;
			if (e->saved[e->pieces[c][k].tensor])
				nb += piece_blocks(e->pieces[c][k].n, block);
		}
	}
	if (rc == 0) {
		dist = malloc(nb ? 8 * (size_t)nb : 8);
		chosen = calloc(nb ? (size_t)nb : 1, 1);
		nw = malloc(2 * (size_t)(block > BLK ? block : BLK));
		if (!dist || !chosen || !nw)
			rc = -ENOMEM;
	}
	for (i = 0; i < params->ntensors; i++)
		st->raw_bytes += (size_t)params->t[i].n * 4;
	for (c = 0; c < e->nchunks && rc == 0; c++)
		for (k = 0; k < e->npieces[c] && rc == 0; k++) {
			const struct piece *pc = &e->pieces[c][k];
			const rckpt_st_tensor_t *t = &params->t[pc->tensor];
			const float *sv = e->saved[pc->tensor];
			if (sv == NULL)
				continue;
			for (u = 0; u < pc->n && rc == 0; u += run) {
				const size_t m = pc->n - u < run ? (size_t)(pc->n - u) : (size_t)run;
				const float *w = values(e, t, pc->first + u, m);
				size_t j;
				for (j = 0; j < m; j++)
					if (!isfinite(w[j])) {
						snprintf(msg, msglen, "tensor '%s' holds NaN or Inf at element %llu",
							 t->name, (unsigned long long)(pc->first + u + j));
						rc = -EDOM;
						break;
					}
				rckpt_block_dist(dist + boff[c][k] + u / block, w, sv + pc->first + u, m, block);
			}
		}
	if (rc)
		goto out;
	/* Choose. */
	want = nb ? (uint64_t)ceil(p->fraction * (double)nb - 1e-9) : 0;
	if (nb && want < 1)
		want = 1;
	if (want > nb)
		want = nb;
	if (p->select == RCKPT_CKENC_PRIORITY) {
		blkref_t *r = malloc(nb ? sizeof(*r) * (size_t)nb : sizeof(*r));
		if (r == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		for (b = 0; b < nb; b++)
			r[b] = (blkref_t){ dist[b], b };
		qsort(r, (size_t)nb, sizeof(*r), by_distance);
		for (b = 0; b < want; b++)
			chosen[r[b].i] = 1;
		free(r);
	} else if (p->select == RCKPT_CKENC_ROUND_ROBIN) {
		for (b = 0; b < want; b++)
			chosen[(e->rr_cursor + b) % nb] = 1;
	} else {
		uint64_t *perm = malloc(nb ? 8 * (size_t)nb : 8), x = p->seed ^ (step * 0x9e3779b97f4a7c15ull);
		if (perm == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		for (b = 0; b < nb; b++)
			perm[b] = b;
		for (b = 0; b < want; b++) { /* a partial Fisher-Yates */
			uint64_t j = b + splitmix64(&x) % (nb - b), tmp = perm[b];
			perm[b] = perm[j];
			perm[j] = tmp;
			chosen[perm[b]] = 1;
		}
		free(perm);
	}
	/* The chosen blocks must meet eps with the last full step's codebooks
	 * (the relative error of their values, gradient-weighted when given):
	 * when training has moved them out of those codebooks' reach, the
	 * caller makes this a full step instead, which fits new ones. */
	{
		float *deq = malloc(4 * (size_t)block);
		double num = 0, den = 0;
		if (deq == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		for (c = 0; c < e->nchunks && rc == 0; c++)
			for (k = 0; k < e->npieces[c] && rc == 0; k++) {
				const struct piece *pc = &e->pieces[c][k];
				const rckpt_st_tensor_t *t = &params->t[pc->tensor];
				const rckpt_st_tensor_t *g = grads ? rckpt_st_find(grads, t->name) : NULL;
				if (e->saved[pc->tensor] == NULL)
					continue;
				for (b = 0; b < piece_blocks(pc->n, block) && rc == 0; b++) {
					const uint64_t lo = b * block, len = pc->n - lo > block ? block : pc->n - lo;
					const float *w, *gd;
					size_t np, j;
					if (!chosen[boff[c][k] + b])
						continue;
					w = values(e, t, pc->first + lo, (size_t)len);
					gd = g ? (const float *)g->data + pc->first + lo : NULL;
					rckpt_quantize(e->iblk, nw, &np, w, gd, (size_t)len, &e->lastq[pc->tensor]);
					rc = rckpt_dequantize(deq, e->iblk, (size_t)len, &e->lastq[pc->tensor], nw, np);
					for (j = 0; rc == 0 && j < len; j++) {
						const double gg = gd ? (double)gd[j] * gd[j] : 1.0, d = (double)w[j] - deq[j];
						num += gg * d * d;
						den += gg * (double)w[j] * w[j];
					}
				}
			}
		free(deq);
		if (rc)
			goto out;
		st->quality = den > 0 ? num / den : 0;
		if (st->quality > e->o.eps) {
			snprintf(msg, msglen, "the chosen blocks' error %.3g is over eps with the last codebooks",
				 st->quality);
			rc = -ERANGE;
			goto out;
		}
	}
	st->blocks = nb;
	st->blocks_saved = want;
	st->config = e->lastcfg;
	st->accepted = 1;
	st->t_search = rckpt_now_s() - t0;

	/* One sparse record per chunk. */
	t0 = rckpt_now_s();
	if ((rc = mf_begin(e, &mf, params, step, e->prev.step)))
		goto out;
	for (i = 0; i < params->ntensors; i++)
		mf.t[i].encoding = e->saved[i] ? RCKPT_SEG_QUANTIZED : RCKPT_SEG_LOSSLESS;
	if (sink->begin && (rc = sink->begin(sink->arg, e->nchunks)))
		goto out;
	e->force_base = 1; /* until every chunk's parent is replaced */
	for (c = 0; c < e->nchunks && rc == 0; c++) {
		const rckpt_record_t *prev = &e->prev_chunks[c];
		rckpt_sparse_sel_t *sel = calloc(e->npieces[c] ? e->npieces[c] : 1, sizeof(*sel));
		uint32_t **bl = calloc(e->npieces[c] ? e->npieces[c] : 1, sizeof(*bl));
		rckpt_record_t r;
		memset(&r, 0, sizeof(r));
		if (!sel || !bl || prev->nseg != e->npieces[c])
			rc = sel && bl ? -EINVAL : -ENOMEM;
		if (rc == 0)
			rc = record_copy(&r, prev);
		r.kind = RCKPT_REC_SPARSE;
		r.step = step;
		r.parent = prev->step;
		for (k = 0; k < e->npieces[c] && rc == 0; k++) {
			const struct piece *pc = &e->pieces[c][k];
			const rckpt_st_tensor_t *t = &params->t[pc->tensor];
			const rckpt_st_tensor_t *g = grads ? rckpt_st_find(grads, t->name) : NULL;
			float *sv = e->saved[pc->tensor];
			rckpt_seg_t *seg = &r.seg[k];
			uint64_t npb, nnw = 0, cap = 0;
			uint16_t *acc = NULL;
			if ((rc = mf_add_seg(&mf, pc->tensor, c, k, pc->n)))
				break;
			if (sv == NULL) {
				rc = lossless_piece(e, seg, t, pc->first, pc->n);
				seg->tensor = pc->tensor;
				continue;
			}
			npb = piece_blocks(pc->n, block);
			bl[k] = malloc(npb ? 4 * (size_t)npb : 4);
			if (bl[k] == NULL) {
				rc = -ENOMEM;
				break;
			}
			sel[k].blocks = bl[k];
			for (b = 0; b < npb && rc == 0; b++) {
				const uint64_t lo = b * block, len = pc->n - lo > block ? block : pc->n - lo;
				const float *w;
				size_t np;
				if (!chosen[boff[c][k] + b])
					continue;
				w = values(e, t, pc->first + lo, (size_t)len);
				rckpt_quantize(seg->idx + lo, nw, &np, w,
					       g ? (const float *)g->data + pc->first + lo : NULL, (size_t)len,
					       &e->lastq[pc->tensor]);
				memcpy(sv + pc->first + lo, w, 4 * (size_t)len);
				if (nnw + np > cap) {
					uint64_t nc = (nnw + np) * 2;
					uint16_t *a = realloc(acc, 2 * (size_t)nc);
					if (a == NULL) {
						rc = -ENOMEM;
						break;
					}
					acc = a;
					cap = nc;
				}
				if (np)
					memcpy(acc + nnw, nw, 2 * np);
				nnw += np;
				bl[k][sel[k].nblocks++] = (uint32_t)b;
			}
			if (rc == 0)
				rc = merge_prot(seg, &prev->seg[k], block, bl[k], sel[k].nblocks, acc, nnw);
			free(acc);
		}
		mf.chunk[c].nseg = e->npieces[c];
		if (rc == 0)
			rc = rckpt_record_encode_sparse(&enc, &r, prev, block, sel, &e->o.is);
		if (rc == 0)
			rc = rckpt_record_digest(mf.chunk[c].sha256, &r);
		mf.chunk[c].record_bytes = enc.len;
		mf.enc_bytes += enc.len;
		if (rc == 0)
			rc = sink->record(sink->arg, c, &enc);
		rckpt_buf_free(&enc);
		for (k = 0; bl && k < e->npieces[c]; k++)
			free(bl[k]);
		free(bl);
		free(sel);
		if (rc == 0) {
			rckpt_record_free(&e->prev_chunks[c]);
			e->prev_chunks[c] = r;
		} else {
			rckpt_record_free(&r);
		}
	}
	if (rc)
		goto out;
	if ((rc = mf_end(&mf, manifest, st)))
		goto out;
	e->force_base = 0;
	e->prev.step = step; /* the next step's parent */
	if (p->select == RCKPT_CKENC_ROUND_ROBIN && nb)
		e->rr_cursor = (e->rr_cursor + want) % nb;
	st->t_encode = rckpt_now_s() - t0;
out:
	mf_free(&mf);
	for (c = 0; boff && c < e->nchunks; c++)
		free(boff[c]);
	free(boff);
	free(dist);
	free(chosen);
	free(nw);
	return rc;
}

/* ---- decoding steps ---- */

void rckpt_ckdec_free(rckpt_ckdec_t *d)
{
	uint32_t c;
	for (c = 0; d->chunk && c < d->mf.nchunks; c++)
		rckpt_record_free(&d->chunk[c]);
	free(d->chunk);
	rckpt_manifest_free(&d->mf);
	memset(d, 0, sizeof(*d));
}

int rckpt_ckdec_step(rckpt_ckdec_t *d, const uint8_t *manifest, size_t mlen,
		     const uint8_t *const *records, const size_t *lens)
{
	rckpt_manifest_t mf;
	rckpt_record_t *chunk;
	uint32_t c;
	int rc = rckpt_manifest_decode(&mf, manifest, mlen);

	if (rc)
		return rc;
	chunk = calloc(mf.nchunks ? mf.nchunks : 1, sizeof(*chunk));
	if (chunk == NULL) {
		rckpt_manifest_free(&mf);
		return -ENOMEM;
	}
	/* Each record says what it needs: a base stands alone (as the store's
	 * materialized records do, whatever the step's manifest parent); a
	 * delta needs this decoder's last step to be its parent. */
	for (c = 0; c < mf.nchunks && rc == 0; c++) {
		uint8_t h[32];
		unsigned kind;
		uint64_t rstep, rparent;
		const rckpt_record_t *parent = NULL;
		if (records[c] == NULL)
			continue; /* a partial restore: this chunk is not wanted */
		rc = rckpt_record_peek(&kind, &rstep, &rparent, records[c], lens[c]);
		if (rc == 0 && kind != RCKPT_REC_BASE) {
			if (d->chunk == NULL || d->mf.step != rparent || d->mf.nchunks != mf.nchunks)
				rc = -ESTALE;
			else
				parent = &d->chunk[c];
		}
		if (rc == 0)
			rc = rckpt_record_decode(&chunk[c], records[c], lens[c], parent, NULL);
		if (rc == 0 && (chunk[c].step != mf.step || chunk[c].nseg != mf.chunk[c].nseg))
			rc = -EBADMSG;
		if (rc == 0)
			rc = rckpt_record_digest(h, &chunk[c]);
		if (rc == 0 && memcmp(h, mf.chunk[c].sha256, 32) != 0)
			rc = RCKPT_FMT_ECHECKSUM;
	}
	if (rc) {
		for (c = 0; c < mf.nchunks; c++)
			rckpt_record_free(&chunk[c]);
		free(chunk);
		rckpt_manifest_free(&mf);
		return rc;
	}
	rckpt_ckdec_free(d);
	d->mf = mf;
	d->chunk = chunk;
	return 0;
}

int rckpt_ckdec_tensor_f32(const rckpt_ckdec_t *d, uint32_t t, float *out)
{
	uint64_t numel = 1;
	unsigned k;
	if (t >= d->mf.ntensors)
		return -EINVAL;
	for (k = 0; k < d->mf.t[t].ndim; k++)
		numel *= d->mf.t[t].shape[k];
	return rckpt_ckdec_range_f32(d, t, 0, numel, out);
}

int rckpt_ckdec_range_f32(const rckpt_ckdec_t *d, uint32_t t, uint64_t first, uint64_t count,
			  float *out)
{
	const rckpt_mf_tensor_t *mt;
	uint64_t off = 0, numel = 1;
	uint32_t k;
	unsigned dd;

	if (t >= d->mf.ntensors)
		return -EINVAL;
	mt = &d->mf.t[t];
	for (dd = 0; dd < mt->ndim; dd++)
		numel *= mt->shape[dd];
	if (first > numel || count > numel - first)
		return -ERANGE;
	for (k = 0; k < mt->nseg && count > 0; k++) {
		const rckpt_mf_seg_t *ms = &mt->seg[k];
		const rckpt_seg_t *s;
		uint64_t a, b;
		if (off + ms->n <= first) {
			off += ms->n;
			continue;
		}
		if (ms->chunk >= d->mf.nchunks)
			return -EBADMSG;
		if (d->chunk[ms->chunk].seg == NULL && d->mf.chunk[ms->chunk].nseg > 0)
			return -ENOENT; /* its chunk was not restored */
		if (ms->index >= d->chunk[ms->chunk].nseg)
			return -EBADMSG;
		s = &d->chunk[ms->chunk].seg[ms->index];
		if (s->tensor != t || s->first != off || s->n != ms->n)
			return -EBADMSG;
		a = first - off; /* within the segment */
		b = s->n - a < count ? s->n : a + count;
		if (s->encoding == RCKPT_SEG_LOSSLESS) {
			rckpt_widen_to_f32(out, s->raw + a * rckpt_dtype_size(s->dtype), s->dtype, b - a);
		} else {
			rckpt_qparams_t q;
			const uint8_t P = (uint8_t)(s->nbins + 1);
			uint64_t pk = 0, np = 0, i;
			int rc;
			for (i = 0; i < a; i++)
				pk += s->idx[i] == P;
			for (i = a; i < b; i++)
				np += s->idx[i] == P;
			if (pk + np > s->nprot)
				return -EBADMSG;
			memset(&q, 0, sizeof(q));
			q.nbins = s->nbins;
			memcpy(q.centroids, s->centroids, sizeof(float) * s->nbins);
			if ((rc = rckpt_dequantize(out, s->idx + a, (size_t)(b - a), &q, s->prot + pk,
						   (size_t)np)))
				return rc;
		}
		out += b - a;
		count -= b - a;
		first += b - a;
		off += ms->n;
	}
	return count == 0 ? 0 : -EBADMSG;
}
