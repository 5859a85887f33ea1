/*
 * ckenc_optim.c — the optimizer's state in a step: the order tensors are
 * prepared in, and the terms of the update error that judges the state by
 * the update the restored optimizer takes (rckpt_ckenc.h).
 *
 * Adam's update is u = m / (sqrt(v) + eps) (bias corrections fold into
 * eps, which the trainer hands in per second moment). A first moment's
 * error moves it by dm / (sqrt(v) + eps): its weights are 1 / (sqrt(v) +
 * eps). A second moment is quantized as x = LOG2(v), where dv / v = dx /
 * (1 + f), f the fraction of v's mantissa; so to first order its error
 * moves u by |u| rho / (2 (1 + f)) dx, rho = sqrt(v) / (sqrt(v) + eps):
 * those are its weights. Both errors are relative to sum u^2, which the
 * pair adds to the step's denominator once. A second moment without its
 * first is judged by the relative error of sqrt(v) + eps (weights rho /
 * (2 (1 + f)), denominator its count); a first moment without a second
 * (SGD's momentum: its update) and any other state by their relative
 * error, as the model's tensors without gradients.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

unsigned ckenc_prep_order(const rckpt_tset_t *params, unsigned lossless_kinds, unsigned *order,
			  unsigned *nmodel)
{
	unsigned i, n = 0, pass;
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < params->ntensors; i++) {
			const unsigned kind = rckpt_ctensor_kind(&params->t[i]);
			if ((lossless_kinds & (1u << kind)) || rckpt_lk_is_optim(kind) != (int)pass)
				continue;
			order[n++] = i;
		}
		if (pass == 0 && nmodel)
			*nmodel = n;
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

/* 1 + the fraction of v's binary32 mantissa: dv / v = dx / that, x = LOG2(v). */
static double mant1(float v)
{
	uint32_t b;
	memcpy(&b, &v, 4);
	return 1.0 + (double)(b & 0x7fffffu) * 0x1p-23;
}

/* The first moment of the same parameter as second moment j, or -1. */
static int partner_of(const rckpt_tset_t *params, unsigned j)
{
	const rckpt_ctensor_t *v = &params->t[j];
	unsigned i;
	if (v->param == NULL)
		return -1;
	for (i = 0; i < params->ntensors; i++) {
		const rckpt_ctensor_t *m = &params->t[i];
		if (rckpt_ctensor_kind(m) == RCKPT_LK_MOMENT1 && m->param && m->n == v->n &&
		    strcmp(m->param, v->param) == 0)
			return (int)i;
	}
	return -1;
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
		const float *v = NULL, *m = NULL;
		float *vown = NULL, *mown = NULL, *wv, *wm = NULL;
		int mi;
		double den = 0;
		uint64_t k;
		if (rckpt_ctensor_kind(vt) != RCKPT_LK_MOMENT2 || (lossless & (1u << RCKPT_LK_MOMENT2)))
			continue;
		mi = partner_of(params, j);
		if (mi >= 0 && (lossless & (1u << RCKPT_LK_MOMENT1)))
			mi = -1; /* a lossless first moment adds no error */
		if ((rc = host_f32(e, vt, &v, &vown)) == 0 && mi >= 0)
			rc = host_f32(e, &params->t[mi], &m, &mown);
		wv = rc ? NULL : malloc(vt->n ? 4 * (size_t)vt->n : 4);
		if (rc == 0 && mi >= 0 && (wm = malloc(vt->n ? 4 * (size_t)vt->n : 4)) == NULL)
			rc = -ENOMEM;
		if (rc == 0 && wv == NULL)
			rc = -ENOMEM;
		for (k = 0; rc == 0 && k < vt->n; k++) {
			/* a value the LOG2 transform refuses is the encoder's to
			 * report (-EDOM); its weights here are only kept finite */
			const double vv = v[k] > 0 && isfinite(v[k]) ? (double)v[k] : 0.0;
			const double sv = sqrt(vv), d = sv + eps, rho = sv / d, f1 = mant1(v[k]);
			if (mi >= 0) {
				const double mm = isfinite(m[k]) ? (double)m[k] : 0.0, up = mm / d;
				wm[k] = (float)(1.0 / d);
				wv[k] = (float)(fabs(up) * rho / (2.0 * f1));
				den += up * up;
			} else {
				wv[k] = (float)(rho / (2.0 * f1));
				den += 1.0;
			}
		}
		free(vown);
		free(mown);
		if (rc) {
			free(wv);
			free(wm);
			break;
		}
		u->w[j] = wv;
		u->den[j] = den;
		if (mi >= 0) {
			u->w[mi] = wm;
			u->den[mi] = den;
			u->counted[j] = 0; /* the pair's sum u^2 counts once */
		}
	}
	if (rc)
		ckenc_update_free(u);
	return rc;
}
