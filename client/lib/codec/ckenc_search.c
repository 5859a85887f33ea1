/*
 * ckenc_search.c — choosing a step's configuration: the search space, a
 * configuration's loss and size estimated on samples, the guided search,
 * the per-tensor allocation (the judgement on all the data:
 * ckenc_judge.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"
#include "rckpt_buf.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


/* The search space, each axis from most to least aggressive. */
static const unsigned BINS[] = { 4, 6, 8, 12, 16, 24, 32, 48, 64 };
static const unsigned EMB_BINS[] = { 16, 32, 64 };
static const float PRUNE[] = { 0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f };
static const float PROTECT[] = { 0.0005f, 0.005f, 0.01f };
#define NB (sizeof(BINS) / sizeof(BINS[0]))
#define NE (sizeof(EMB_BINS) / sizeof(EMB_BINS[0]))
#define NP (sizeof(PRUNE) / sizeof(PRUNE[0]))
#define NQ (sizeof(PROTECT) / sizeof(PROTECT[0]))

const unsigned ckenc_axis_len[5] = { NB, NE, NP, 2, NQ };

cpoint_t ckenc_point_safest(void)
{
	return (cpoint_t){ NB - 1, NE - 1, NP - 1, 0, NQ - 1 };
}

rckpt_qconfig_t ckenc_config_of(const rckpt_ckenc_opts_t *o, cpoint_t c)
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

/* A tensor's options: every bin count with either quantizer, and
 * KEEP_LAST. */
#define ALLOC_Q 2u
#define NALLOC (NB * ALLOC_Q + 1)

/* Steps over which a configuration's recurring cost is weighed against the
 * one-time cost of switching to it. */
#define HORIZON 3.0

/* The last step's segment of prep t, if it can seed and be a delta parent. */
static const rckpt_seg_t *parent_seg(const evalctx_t *x, unsigned t)
{
	const rckpt_seg_t *s;
	if (x->prev == NULL)
		return NULL;
	s = &x->prev->seg[x->which[t]];
	return s->encoding == RCKPT_SEG_QUANTIZED ? s : NULL;
}

void ckenc_sample_den(sample_t *s)
{
	double td = 0;
	size_t i;
	for (i = 0; i < s->n; i++) {
		double gg = s->g ? (double)s->g[i] * s->g[i] : 1.0;
		td += gg * (double)s->w[i] * s->w[i];
	}
	s->den = td;
}

/* What an evaluation of a tensor found on its samples: its error sum,
 * the entropy (bits a symbol) of its record's symbols and of the change
 * from the last step's sample (hs, when there is one: pv), and the
 * protected values. The bytes follow from these and the evaluation's
 * context (see eval_tensor). */
typedef struct evres {
	double tn, h, hs;
	size_t np;
	int pv;
} evres_t;

/* A tensor's evaluation depends on the configuration only through what
 * rckpt_codec_qparams reads of it for the tensor's kind: the memo's key. */
typedef struct evmemo_entry {
	unsigned quantizer, bins, metric, protect_sens;
	float prune, protect, lambda;
	evres_t r;
} evmemo_entry_t;

static evmemo_entry_t key_of(const rckpt_tensor_prep_t *p, const rckpt_qconfig_t *c, unsigned quantizer)
{
	evmemo_entry_t k;
	memset(&k, 0, sizeof(k));
	k.quantizer = quantizer;
	k.bins = p->kind == RCKPT_LK_EMBEDDING ? c->emb_bins : c->bins;
	k.prune = p->kind == RCKPT_LK_MOMENT2 ? 0.0f : c->prune_frac[p->kind];
	k.metric = p->g ? c->prune_metric : 0; /* without gradients, magnitude either way */
	k.protect_sens = p->g ? c->protect_by_sensitivity != 0 : 0;
	k.protect = c->protect_frac;
	k.lambda = c->lambda;
	return k;
}

static int key_equal(const evmemo_entry_t *a, const evmemo_entry_t *b)
{
	return a->quantizer == b->quantizer && a->bins == b->bins && a->metric == b->metric &&
	       a->protect_sens == b->protect_sens && a->prune == b->prune && a->protect == b->protect &&
	       a->lambda == b->lambda;
}

void ckenc_evmemo_free(evmemo_t *m, unsigned n)
{
	unsigned t;
	for (t = 0; m && t < n; t++)
		free(m[t].e);
	free(m);
}

/* Tensor t's samples quantized with q: *r. */
static int measure(const evalctx_t *x, unsigned t, const rckpt_qparams_t *q, evres_t *r)
{
	const sample_t *s = &x->smp[t];
	const rckpt_seg_t *ps = parent_seg(x, t);
	uint64_t hist[256] = { 0 }, hstab[256] = { 0 };
	const struct prev_sample *pv = x->psmp && x->psmp[t].n == s->n ? &x->psmp[t] : NULL;
	uint8_t *idx = malloc(s->n ? s->n : 1), *pidx = pv ? malloc(s->n ? s->n : 1) : NULL;
	uint16_t *prot = malloc(2 * (s->n ? s->n : 1));
	float *deq = malloc(4 * (s->n ? s->n : 1));
	size_t np, i;
	int rc = !idx || !prot || !deq || (pv && !pidx) ? -ENOMEM : 0;

	memset(r, 0, sizeof(*r));
	if (rc == 0) {
		if (pv) {
			size_t pnp;
			/* a resumed encoder has no gradients of the last step:
			 * this step's stand in */
			rckpt_quantize(pidx, prot, &pnp, pv->w, pv->g ? pv->g : s->g, s->n, q);
		}
		rckpt_quantize(idx, prot, &np, s->w, s->g, s->n, q);
		rc = rckpt_dequantize(deq, idx, s->n, q, prot, np);
	}
	if (rc == 0) {
		/* hist: the symbols of this step's record (levels, or their
		 * delta against the last record's levels: the switch cost);
		 * hstab: the change this configuration makes between the last
		 * step's sample and this one (what it will cost from now on) */
		double h = 0, hs = 0, tn = 0;
		unsigned l, m = q->nbins + 2, mp = m;
		/* four lanes of counts, element i in lane i % 4: most symbols
		 * are one (a delta's 0), and one counter would make every
		 * increment wait for the last */
		uint32_t h4[4][256], s4[4][256];
		memset(h4, 0, sizeof(h4));
		memset(s4, 0, sizeof(s4));
		if (ps && ps->nbins + 2 > mp)
			mp = ps->nbins + 2;
		double t4[4] = { 0, 0, 0, 0 };
		for (i = 0; i < s->n; i++) {
			double gg = s->g ? (double)s->g[i] * s->g[i] : 1.0, d = (double)s->w[i] - deq[i];
			t4[i & 3] += gg * d * d;
			/* cyclic differences; both operands < the modulus, so
			 * one conditional subtraction, not a division */
			if (ps) {
				unsigned dlt = idx[i] + mp - ps->idx[i];
				h4[i & 3][dlt >= mp ? dlt - mp : dlt]++;
			} else {
				h4[i & 3][idx[i]]++;
			}
			if (pv) {
				unsigned dlt = idx[i] + m - pidx[i];
				s4[i & 3][dlt >= m ? dlt - m : dlt]++;
			}
		}
		tn = (t4[0] + t4[1]) + (t4[2] + t4[3]);
		for (l = 0; l < 256; l++) {
			hist[l] = (uint64_t)h4[0][l] + h4[1][l] + h4[2][l] + h4[3][l];
			hstab[l] = (uint64_t)s4[0][l] + s4[1][l] + s4[2][l] + s4[3][l];
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
		r->tn = tn;
		r->h = h;
		r->hs = hs;
		r->np = np;
		r->pv = pv != NULL;
	}
	free(idx);
	free(pidx);
	free(prot);
	free(deq);
	return rc;
}

/* Tensor t under configuration c with quantizer (or under qfix, the
 * parameters kept from the last step, when not NULL): its loss terms
 * scaled to the whole tensor, and its estimated bytes (see evaluate).
 * An evaluation the memo has (the search meets the same tensor
 * configuration under many points: an embedding's under every bin count
 * and pruning, the others' under every embedding bin count) costs a look
 * up; the bytes and sums are those of evaluating it again. */
static int eval_tensor(evalctx_t *x, unsigned t, const rckpt_qconfig_t *c, unsigned quantizer,
		       const rckpt_qparams_t *qfix, double *num, double *den, double *bytes)
{
	const sample_t *s = &x->smp[t];
	evmemo_t *m = x->memo && !qfix ? &x->memo[t] : NULL;
	evmemo_entry_t k = key_of(&x->prep[t], c, quantizer);
	evres_t r;
	double h;
	size_t i;
	int rc = 0;

	*num = *den = *bytes = 0;
	for (i = 0; m && i < m->n && !key_equal(&m->e[i], &k); i++)
		;
	if (m && i < m->n) {
		r = m->e[i].r;
	} else {
		rckpt_qparams_t q;
		if (qfix)
			q = *qfix;
		else
			rc = rckpt_codec_qparams(&q, &x->prep[t], c, quantizer, parent_seg(x, t),
						 x->cache ? &x->cache[t] : NULL);
		if (rc == 0)
			rc = measure(x, t, &q, &r);
		if (rc)
			return rc;
		if (m) { /* kept if there is room; else measured again when met */
			evmemo_entry_t *e = rckpt_grow(m->e, &m->cap, m->n + 1, sizeof(*m->e));
			if (e) {
				m->e = e;
				k.r = r;
				m->e[m->n++] = k;
			}
		}
	}
	h = r.h;
	if (r.pv && (qfix || !x->drift)) /* this step once, then HORIZON more like it */
		h = (h + HORIZON * r.hs) / (1 + HORIZON);
	*num = r.tn * (double)s->stride;
	*den = s->den * (double)s->stride;
	*bytes = h * (double)s->full / 8 + 2.0 * (double)r.np * (double)s->stride;
	return 0;
}

/* Quality loss and estimated bytes of configuration c, from the samples.
 * Each tensor's sums are scaled by its sampling stride, so a sampled large
 * tensor weighs what it weighs in the whole model. The size estimate is the
 * entropy of the symbols records will hold: at the first step the levels;
 * after it, a blend of this step's delta against the last record's actual
 * levels (the one-time cost of switching configuration) and of the change
 * this configuration makes between the last step's sample and this one
 * (its recurring cost), the latter weighed over HORIZON steps. */
/* The sampled elements of every prepared tensor: one evaluation's work. */
static uint64_t sampled(const evalctx_t *x)
{
	uint64_t n = 0;
	unsigned t;
	for (t = 0; t < x->nprep; t++)
		n += x->smp[t].n;
	return n;
}

/* One configuration over every prepared tensor, a tensor per call
 * (rckpt_par_for): each writes its own row. */
typedef struct evjob {
	evalctx_t *x;
	const rckpt_qconfig_t *c;
	double *tn, *td, *tb;
} evjob_t;

static int eval_one(void *arg, unsigned t)
{
	evjob_t *j = arg;
	return eval_tensor(j->x, t, j->c, j->x->o->quantizer, NULL, &j->tn[t], &j->td[t], &j->tb[t]);
}

int ckenc_evaluate(evalctx_t *x, cpoint_t cp, double *loss, double *bytes)
{
	rckpt_qconfig_t c = x->fixed_cfg ? *x->fixed_cfg : ckenc_config_of(x->o, cp);
	double num = 0, den = 0, est = 0, worst = 0, *v = calloc(3 * (size_t)x->nprep + 1, sizeof(double));
	evjob_t j = { x, &c, v, v + x->nprep, v + 2 * (size_t)x->nprep };
	unsigned t;
	int rc;

	if (v == NULL)
		return -ENOMEM;
	x->tried++;
	/* the tensors at once; their sums in tensor order, as one thread would */
	if ((rc = rckpt_par_for(x->nprep, ckenc_threads_for(x->o, sampled(x)), eval_one, &j)) == 0)
		for (t = 0; t < x->nprep; t++) {
			double tn = sums_num(x->dsum, t) ? j.tn[t] : 0, td = den_of(x->dfix, t, j.td[t]);
			num += tn;
			den += sums_den(x->dsum, t) ? td : 0;
			est += j.tb[t];
			if (td > 0 && tn / td > worst)
				worst = tn / td;
		}
	free(v);
	if (rc)
		return rc;
	*loss = step_loss(num, den, worst, x->cap > 0 ? x->cap : TENSOR_CAP);
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

void ckenc_alloc_free(alloc_t *a)
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
 * then chooses within eps * scale. With x->alloc_near (a job's steps after
 * its second, but for every ALLOC_REFRESH-th), a tensor whose last record
 * is quantized weighs only the bin counts next to that record's (its own,
 * one fewer, one more, with either quantizer) and keeping its codebook:
 * allocations move by a step of bins at a time, at 7 evaluations of the
 * tensor in place of 19. */
/* Tensor t's row of the allocation's tables (rckpt_par_for); its
 * terms under the search's choice go to c0[3 t ..]. */
typedef struct aljob {
	evalctx_t *x;
	const rckpt_qconfig_t *c;
	alloc_t *a;
	double *c0;
} aljob_t;

/* The index of BINS next to nbins levels, from below. */
static unsigned bins_index(unsigned nbins)
{
	unsigned b = 0;
	while (b + 1 < NB && BINS[b + 1] <= nbins)
		b++;
	return b;
}

static int alloc_row(void *arg, unsigned t)
{
	aljob_t *j = arg;
	evalctx_t *x = j->x;
	const rckpt_qconfig_t *c = j->c;
	const rckpt_seg_t *ps = x->alloc_near ? parent_seg(x, t) : NULL;
	double *tn = j->a->tn + (size_t)t * NALLOC, *tb = j->a->tb + (size_t)t * NALLOC, d0;
	rckpt_qparams_t keep;
	unsigned k, lo = 0, hi = NB - 1;
	int rc = eval_tensor(x, t, c, x->o->quantizer, NULL, &j->c0[3 * t], &j->c0[3 * t + 1],
			     &j->c0[3 * t + 2]);
	if (ps) { /* the parent's bin count and its neighbours */
		const unsigned bi = bins_index(ps->nbins);
		lo = bi ? bi - 1 : 0;
		hi = bi + 1 < NB ? bi + 1 : bi;
	}
	for (k = 0; k + 1 < NALLOC && rc == 0; k++) {
		const unsigned b[1] = { alloc_option(k) };
		rckpt_qconfig_t ct;
		if (k % NB < lo || k % NB > hi ||
		    (x->o->alloc_one_quantizer && ALLOC_QUANTIZER(alloc_option(k)) != x->o->quantizer)) {
			tn[k] = -1; /* not weighed this step */
			continue;
		}
		ct = tensor_config(c, &x->prep[t], b, 0);
		rc = eval_tensor(x, t, &ct, ALLOC_QUANTIZER(b[0]), NULL, &tn[k], &d0, &tb[k]);
	}
	tn[NALLOC - 1] = -1; /* unless the last codebook can be kept */
	if (rc == 0 && parent_seg(x, t) && rckpt_codec_qparams_keep(&keep, &x->prep[t], c, parent_seg(x, t)) == 0)
		rc = eval_tensor(x, t, c, x->o->quantizer, &keep, &tn[NALLOC - 1], &d0, &tb[NALLOC - 1]);
	return rc;
}

int ckenc_alloc_tables(evalctx_t *x, const rckpt_qconfig_t *c, alloc_t *a)
{
	double *c0 = calloc(3 * (size_t)x->nprep + 1, sizeof(double));
	aljob_t j = { x, c, a, c0 };
	unsigned t;
	int rc;

	memset(a, 0, sizeof(*a));
	a->nprep = x->nprep;
	a->tn = calloc((size_t)x->nprep * NALLOC + 1, sizeof(double));
	a->tb = calloc((size_t)x->nprep * NALLOC + 1, sizeof(double));
	a->tden = calloc((size_t)x->nprep + 1, sizeof(double));
	a->cap = calloc((size_t)x->nprep + 1, sizeof(double));
	rc = a->tn && a->tb && a->tden && a->cap && c0 ? 0 : -ENOMEM;
	x->tried++;
	x->drift = 1;
	/* the tensors' rows at once; the sums in tensor order */
	if (rc == 0)
		rc = rckpt_par_for(x->nprep, ckenc_threads_for(x->o, NALLOC * sampled(x)), alloc_row, &j);
	for (t = 0; t < x->nprep && rc == 0; t++) {
		const double d0 = den_of(x->dfix, t, c0[3 * t + 1]);
		a->den += sums_den(x->dsum, t) ? d0 : 0;
		a->tden[t] = d0;
		a->c_num += sums_num(x->dsum, t) ? c0[3 * t] : 0;
		a->c_bytes += c0[3 * t + 2];
		if (!sums_num(x->dsum, t)) { /* its options weigh nothing in the sum */
			unsigned k;
			for (k = 0; k < NALLOC; k++)
				if (a->tn[(size_t)t * NALLOC + k] > 0)
					a->tn[(size_t)t * NALLOC + k] = 0;
		}
	}
	x->drift = 0;
	free(c0);
	if (rc)
		ckenc_alloc_free(a);
	return rc;
}

/* Fills bins[] with the allocation of a within eps (no option puts a
 * tensor's own error over TENSOR_CAP * eps), and returns 1 when it is
 * smaller than the search's choice by the estimate, else 0 (no allocation;
 * also when the choice itself is over). With any, 1 whenever there is an
 * allocation within eps. */
int ckenc_alloc_pick(alloc_t *a, double eps, double cap, unsigned *bins, int any)
{
	const double budget = eps * a->den;
	double lo = 0, hi, sn, sb;
	unsigned it, t;

	if (!(a->den > 0) || (!any && a->c_num > budget))
		return 0;
	for (t = 0; t < a->nprep; t++)
		a->cap[t] = a->tden[t] > 0 ? cap * eps * a->tden[t] : HUGE_VAL;
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
	return any || sb < a->c_bytes;
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
	int rc = ckenc_evaluate(x, c, &loss, &bytes);
	*bytes_out = bytes;
	*pass = rc == 0 && loss <= x->o->eps;
	if (*pass && (!*found || bytes < *best_bytes)) {
		*found = 1;
		*best = c;
		*best_bytes = bytes;
	}
	return rc;
}

int ckenc_search(evalctx_t *x, const cpoint_t *last, int have_emb, int have_g, cpoint_t *best,
		  int *found)
{
	unsigned e, p, m, q, b, mmax = have_g && x->o->use_grads ? 2 : 1, e0 = have_emb ? 0 : NE - 1;
	double best_bytes = 0, bytes;
	int rc, pass;

	*found = 0;
	if (last) {
		/* The neighbourhood: last (with either metric: that axis is
		 * free). When it fails, each axis one step less aggressive
		 * (those keep more information, so while last passes their
		 * estimates are no smaller and need no weighing). When it
		 * passes, each axis one step more aggressive, taken when its
		 * estimate is smaller by opts.bold_gain: the estimate holds the
		 * switch's cost (the delta against the last record's levels),
		 * so the configuration follows the run both ways, where a
		 * ratchet would keep one step's caution for good; the margin
		 * keeps it from swinging on the samples' noise. */
		cpoint_t n[8];
		unsigned k, k0, m0;
		double bar;
		for (k = 0; k < 8; k++)
			n[k] = *last;
		n[0].b = last->b + 1 < NB ? last->b + 1 : last->b;
		n[1].e = last->e + 1 < NE ? last->e + 1 : last->e;
		n[2].p = last->p + 1 < NP ? last->p + 1 : last->p;
		n[3].q = last->q + 1 < NQ ? last->q + 1 : last->q;
		n[4].b = last->b ? last->b - 1 : 0;
		n[5].e = last->e > e0 ? last->e - 1 : last->e;
		n[6].p = last->p ? last->p - 1 : 0;
		n[7].q = last->q ? last->q - 1 : 0;
		for (m = 0; m < mmax; m++) {
			cpoint_t c = *last;
			c.m = m;
			if ((rc = consider(x, c, found, best, &best_bytes, &pass, &bytes)))
				return rc;
		}
		bar = best_bytes * (1 - x->o->bold_gain);
		m0 = *found ? best->m : 0;
		k0 = *found ? 4 : 0;
		for (k = k0; k < k0 + 4 && !(*found && x->o->bold_gain >= 1); k++)
			for (m = 0; m < mmax; m++) {
				cpoint_t c = n[k];
				double loss;
				c.m = m;
				if (k >= 4 && m != m0)
					continue; /* bolder: with the metric last passed best with */
				if (memcmp(&n[k], last, sizeof(c)) == 0)
					continue; /* an axis at its end */
				if (k < 4) {
					if ((rc = consider(x, c, found, best, &best_bytes, &pass, &bytes)))
						return rc;
					continue;
				}
				if ((rc = ckenc_evaluate(x, c, &loss, &bytes)))
					return rc;
				if (loss <= x->o->eps && bytes < bar) {
					*best = c;
					bar = bytes;
				}
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

/* One step less aggressive: more bins, else more protection, else less
 * pruning. 0 when there is none. */
int ckenc_relax(cpoint_t *c)
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

/* The point of the search space a stored configuration is, if it is one. */
int ckenc_point_of(cpoint_t *c, const rckpt_mf_config_t *m)
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
