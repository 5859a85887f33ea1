/*
 * ckenc_optim.c — the optimizer's state in a step: which tensors are
 * normalized, the order tensors are prepared in, the terms of the errors
 * that judge the state by the update the restored optimizer takes
 * (rckpt_ckenc.h), and the NORM transform's values.
 *
 * Adam's update is u = m / (sqrt(v) + eps) (bias corrections fold into
 * eps, which the trainer hands in per second moment). A first moment with
 * its second is quantized as that very update, y = m / (sqrt(v') + eps)
 * with v' the second moment as restored (NORM): its relative error is the
 * update error, and a restore multiplies back, so the first update after
 * it is y' whatever v' is. The second moment, quantized as x = LOG2(v),
 * sets the scale of the updates that follow (of the new gradients, while
 * the old first moment decays), and the first update too, measured
 * against the original's: y - u = u (sqrt(v) + eps) / (sqrt(v') + eps) - u,
 * whose first-order terms are |u| rho / (2 (1 + f)) dx, rho = sqrt(v) /
 * (sqrt(v) + eps), f the fraction of v's mantissa (dv / v = dx / (1 + f)),
 * relative to sum u^2 (the ablation o.moment2_linear stores x = v: 1 + f
 * becomes v, floored at eps^2). The two errors add (the first moment's quantization
 * error is not correlated with the second's), so the second moments take
 * half of opt_eps and the first moments what the second left. A second
 * moment without a first is judged by the relative error of sqrt(v) + eps
 * (terms rho / (2 (1 + f)) dx over its count). Without normalization (plain_moments: partial
 * steps need every tensor to decode alone) a first moment's error moves u
 * by dm / (sqrt(v) + eps), and its second's by |u| rho / (2 (1 + f)) dx:
 * those are their weights, relative to sum u^2, which the pair counts
 * once. State without a pair (SGD's momentum: its update) and any other
 * is judged by its own relative error, as the model's tensors without
 * gradients.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The second moment of the same parameter as first moment i, or -1. */
static int partner_of(const rckpt_tset_t *params, unsigned i)
{
	const rckpt_ctensor_t *m = &params->t[i];
	unsigned j;
	if (m->param == NULL || rckpt_ctensor_kind(m) != RCKPT_LK_MOMENT1)
		return -1;
	for (j = 0; j < params->ntensors; j++) {
		const rckpt_ctensor_t *v = &params->t[j];
		if (rckpt_ctensor_kind(v) == RCKPT_LK_MOMENT2 && v->param && v->n == m->n &&
		    strcmp(m->param, v->param) == 0)
			return (int)j;
	}
	return -1;
}

int ckenc_norm_partner(const rckpt_ckenc_opts_t *o, const rckpt_tset_t *params, unsigned i)
{
	const unsigned ll = o->fixed.lossless_kinds;
	int j;
	if (o->plain_moments || (ll & (1u << RCKPT_LK_MOMENT1)) || (ll & (1u << RCKPT_LK_MOMENT2)))
		return -1;
	j = partner_of(params, i);
	return j;
}

unsigned ckenc_prep_order(const rckpt_ckenc_opts_t *o, const rckpt_tset_t *params, unsigned *order,
			  unsigned *n0, unsigned *n1)
{
	unsigned i, n = 0, pass;
	for (pass = 0; pass < 3; pass++) {
		for (i = 0; i < params->ntensors; i++) {
			const unsigned kind = rckpt_ctensor_kind(&params->t[i]);
			unsigned g;
			if (o->fixed.lossless_kinds & (1u << kind))
				continue;
			g = !rckpt_lk_is_optim(kind) ? 0 : ckenc_norm_partner(o, params, i) >= 0 ? 2 : 1;
			if (g == pass)
				order[n++] = i;
		}
		if (pass == 0 && n0)
			*n0 = n;
		if (pass == 1 && n1)
			*n1 = n;
	}
	return n;
}

void ckenc_update_free(ckenc_upd_t *u)
{
	unsigned i;
	for (i = 0; u->w && i < u->n; i++)
		free(u->w[i]);
	free(u->w);
	free(u->den);
	free(u->counted);
	memset(u, 0, sizeof(*u));
}

/* Tensor t as fp32 in host memory: *out (its own data, or *owned). */
static int host_f32(rckpt_ckenc_t *e, const rckpt_ctensor_t *t, const float **out, float **owned)
{
	const void *h;
	void *hown = NULL;
	int rc;

	*owned = NULL;
	rc = e->be->to_host(e, t->data, (size_t)t->n * rckpt_dtype_size(t->dtype), &h, &hown);
	if (rc)
		return rc;
	if (t->dtype == RCKPT_DT_F32 && ((uintptr_t)h & 3) == 0 && hown == NULL) {
		*out = h;
		return 0;
	}
	if ((*owned = malloc(t->n ? 4 * (size_t)t->n : 4)) == NULL) {
		free(hown);
		return -ENOMEM;
	}
	rckpt_widen_to_f32(*owned, h, t->dtype, t->n);
	free(hown);
	*out = *owned;
	return 0;
}

/* The weights of second moment vt (and first moment mt, or NULL) by the
 * host: the CPU's path, and any backend's without update_weights. */
static int host_weights(rckpt_ckenc_t *e, float *wv, float *wm, double *den, const rckpt_ctensor_t *vt,
			const rckpt_ctensor_t *mt, double eps, int lin)
{
	const float *v = NULL, *m = NULL;
	float *vown = NULL, *mown = NULL;
	int rc = host_f32(e, vt, &v, &vown);
	if (rc == 0 && mt)
		rc = host_f32(e, mt, &m, &mown);
	if (rc == 0)
		rckpt_update_weights(wv, wm, den, v, m, vt->n, eps, lin);
	free(vown);
	free(mown);
	return rc;
}

int ckenc_update_terms(rckpt_ckenc_t *e, ckenc_upd_t *u, const rckpt_tset_t *params)
{
	const unsigned lossless = e->o.fixed.lossless_kinds;
	unsigned j, i;
	int rc = 0;

	memset(u, 0, sizeof(*u));
	u->n = params->ntensors;
	u->w = calloc(u->n ? u->n : 1, sizeof(*u->w));
	u->den = malloc((u->n ? u->n : 1) * sizeof(*u->den));
	u->counted = malloc(u->n ? u->n : 1);
	if (!u->w || !u->den || !u->counted) {
		ckenc_update_free(u);
		return -ENOMEM;
	}
	for (i = 0; i < u->n; i++) {
		u->den[i] = -1;
		u->counted[i] = 1;
	}
	for (j = 0; j < u->n && rc == 0; j++) {
		const rckpt_ctensor_t *vt = &params->t[j];
		const double eps = vt->eps > 0 ? vt->eps : 1e-8;
		const int lin = ckenc_value_xf(e, RCKPT_LK_MOMENT2) == RCKPT_XF_NONE;
		const size_t bytes = vt->n ? 4 * (size_t)vt->n : 4;
		float *wv, *wm = NULL;
		int mi = -1;
		double den = 0;
		if (rckpt_ctensor_kind(vt) != RCKPT_LK_MOMENT2 || (lossless & (1u << RCKPT_LK_MOMENT2)))
			continue;
		/* its first moment: the update it scales */
		for (i = 0; i < u->n && mi < 0; i++)
			if (partner_of(params, i) == (int)j && !(lossless & (1u << RCKPT_LK_MOMENT1)))
				mi = (int)i;
		wv = malloc(bytes);
		if (mi >= 0 && e->o.plain_moments && (wm = malloc(bytes)) == NULL)
			rc = -ENOMEM;
		if (rc == 0 && wv == NULL)
			rc = -ENOMEM;
		if (rc == 0)
			rc = (e->be->update_weights ? e->be->update_weights : host_weights)(
				e, wv, wm, &den, vt, mi >= 0 ? &params->t[mi] : NULL, eps, lin);
		if (rc) {
			free(wv);
			free(wm);
			break;
		}
		u->w[j] = wv;
		u->den[j] = den;
		if (wm) { /* plain moments: one search, whose sum u^2 the pair counts once */
			u->w[mi] = wm;
			u->den[mi] = den;
			u->counted[j] = 0;
		}
	}
	if (rc)
		ckenc_update_free(u);
	return rc;
}
