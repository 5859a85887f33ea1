/*
 * ckenc_judge.c — judging a step's chosen configuration on all the data
 * (the search judged samples), and asking the trainer's callback.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int qparams_equal(const rckpt_qparams_t *a, const rckpt_qparams_t *b)
{
	return a->nbins == b->nbins && a->prune_by_sensitivity == b->prune_by_sensitivity &&
	       a->prune_below == b->prune_below && a->protect_mag == b->protect_mag &&
	       a->protect_sens == b->protect_sens && a->nbins <= RCKPT_MAX_BINS &&
	       memcmp(a->centroids, b->centroids, sizeof(float) * a->nbins) == 0;
}

/* Configuration c's quantization parameters for every prepared tensor
 * (qp[], k-means seeded from the last step's codebooks) and its loss over
 * all the data, judged block by block: nothing of the size of the model is
 * kept. The blocks' lengths are multiples of the tile, so the sums are
 * those of rckpt_qerr over each whole tensor, which the GPU's are too.
 * The tensors are judged at once on the CPU (each writes its own terms),
 * and their terms summed in tensor order after, as one thread would. */
typedef struct jjob {
	const rckpt_tset_t *params;
	const rckpt_tensor_prep_t *prep;
	const unsigned *which, *tbins;
	const rckpt_qconfig_t *c;
	rckpt_codebook_cache_t *cache;
	rckpt_qparams_t *qp;
	judged_t *memo;
	double *tn, *td;
} jjob_t;

static int judge_one(rckpt_ckenc_t *e, void *arg, unsigned pi)
{
	const jjob_t *j = arg;
	const rckpt_ctensor_t *t = &j->params->t[j->which[pi]];
	const rckpt_qconfig_t ct = tensor_config(j->c, &j->prep[pi], j->tbins, pi);
	rckpt_qparams_t *q = &j->qp[pi];
	judged_t *m = j->memo ? &j->memo[pi] : NULL;
	int rc;
	if (j->tbins && j->tbins[pi] == KEEP_LAST)
		rc = rckpt_codec_qparams_keep(q, &j->prep[pi], &ct, ckenc_warm_of(e, j->which[pi]));
	else
		rc = rckpt_codec_qparams(q, &j->prep[pi], &ct, j->tbins ? ALLOC_QUANTIZER(j->tbins[pi]) : e->o.quantizer,
					 ckenc_warm_of(e, j->which[pi]), &j->cache[pi]);
	if (rc)
		return rc;
	if (m && m->valid && qparams_equal(&m->q, q)) {
		j->tn[pi] = m->tn;
		j->td[pi] = m->td;
		return 0;
	}
	if ((rc = e->be->qerr(e, &j->tn[pi], &j->td[pi], t, j->prep[pi].g, q)) == 0 && m) {
		m->q = *q;
		m->tn = j->tn[pi];
		m->td = j->td[pi];
		m->valid = 1;
	}
	return rc;
}

int ckenc_judge(rckpt_ckenc_t *e, const rckpt_tset_t *params, const rckpt_tensor_prep_t *prep,
		 const unsigned *which, unsigned nprep, const rckpt_qconfig_t *c, const unsigned *tbins,
		 rckpt_codebook_cache_t *cache, const double *dfix, const uint8_t *dsum,
		 double cap, rckpt_qparams_t *qp, judged_t *memo, double *quality)
{
	double num = 0, den = 0, worst = 0, *v = calloc(2 * (size_t)nprep + 1, sizeof(double));
	jjob_t j = { params, prep, which, tbins, c, cache, qp, memo, v, v + nprep };
	uint64_t work = 0;
	unsigned pi;
	int rc;

	if (v == NULL)
		return -ENOMEM;
	for (pi = 0; pi < nprep; pi++)
		work += params->t[which[pi]].n;
	rc = ckenc_parallel_views(e, nprep, ckenc_threads_for(&e->o, work), judge_one, &j);
	ckenc_workers_free(e); /* kept only while in use, as the emission's */
	for (pi = 0; pi < nprep && rc == 0; pi++) {
		const double tn = sums_num(dsum, pi) ? j.tn[pi] : 0, td = den_of(dfix, pi, j.td[pi]);
		num += tn;
		den += sums_den(dsum, pi) ? td : 0;
		if (td > 0 && tn / td > worst)
			worst = tn / td;
	}
	free(v);
	*quality = step_loss(num, den, worst, cap);
	return rc;
}

/* Tensor t as fp32 into out, wherever its data is. */
static int widen_any(rckpt_ckenc_t *e, float *out, const rckpt_ctensor_t *t)
{
	const void *h;
	void *owned;
	int rc = e->be->to_host(e, t->data, (size_t)t->n * rckpt_dtype_size(t->dtype), &h, &owned);
	if (rc == 0)
		rckpt_widen_to_f32(out, h, t->dtype, t->n);
	free(owned);
	return rc;
}

/* Dequantizes every tensor with qp and asks the trainer's callback. This
 * holds the model in fp32: the callback's price. */
int ckenc_ask_callback(rckpt_ckenc_t *e, const rckpt_tset_t *params, const rckpt_tensor_prep_t *prep,
			const unsigned *which, unsigned nprep, const rckpt_qparams_t *qp,
			double *loss)
{
	const size_t nt = params->ntensors ? params->ntensors : 1;
	float **v = calloc(nt, sizeof(*v));
	unsigned *slot = malloc(nt * sizeof(*slot)), i, pi;
	int rc = v && slot ? 0 : -ENOMEM;

	for (i = 0; rc == 0 && i < params->ntensors; i++)
		slot[i] = nprep;
	for (pi = 0; rc == 0 && pi < nprep; pi++)
		slot[which[pi]] = pi;
	for (i = 0; rc == 0 && i < params->ntensors; i++) {
		const rckpt_ctensor_t *t = &params->t[i];
		if ((v[i] = malloc(4 * (size_t)(t->n ? t->n : 1))) == NULL) {
			rc = -ENOMEM;
			break;
		}
		if ((pi = slot[i]) == nprep) { /* lossless */
			rc = widen_any(e, v[i], t);
			continue;
		}
		rc = e->be->dequantize(e, v[i], t, prep[pi].g, &qp[pi]);
		rckpt_xf_inverse(v[i], (size_t)t->n, ckenc_value_xf(e, rckpt_ctensor_kind(t)));
	}
	if (rc == 0)
		rc = e->o.quality(e->o.quality_arg, params, (const float *const *)v, loss);
	for (i = 0; v && i < params->ntensors; i++)
		free(v[i]);
	free(v);
	free(slot);
	return rc;
}
