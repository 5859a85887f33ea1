/*
 * ckenc_values.c — a tensor's values as the encoder quantizes them: in
 * its transform's domain (rckpt_lk_transform), a NORM first moment over
 * its second moment's quantized root, a device tensor through the host
 * when transformed. What the backends, the emission and the partial
 * steps read; above the state (ckenc_state.c) only.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckenc_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ckenc_norm_values(rckpt_ckenc_t *e, float *out, const rckpt_ctensor_t *m, const rckpt_ctensor_t *v,
		      const float *gv, const rckpt_qparams_t *qv, float eps, uint64_t first, size_t n)
{
	const size_t dm = rckpt_dtype_size(m->dtype), dv = rckpt_dtype_size(v->dtype);
	const void *hm, *hv;
	void *om = NULL, *ov = NULL;
	size_t np;
	int rc = e->be->to_host(e, m->data + first * dm, n * dm, &hm, &om);
	if (rc == 0 && (rc = e->be->to_host(e, v->data + first * dv, n * dv, &hv, &ov)) == 0) {
		rckpt_widen_to_f32(out, hm, m->dtype, n);
		rckpt_widen_to_f32(e->nblk, hv, v->dtype, n);
	}
	free(om);
	free(ov);
	if (rc)
		return rc;
	rckpt_xf_forward(e->nblk, n, ckenc_value_xf(e, RCKPT_LK_MOMENT2));
	rckpt_quantize(e->iblk, e->pblk, &np, e->nblk, gv ? gv + first : NULL, n, qv);
	if ((rc = rckpt_dequantize(e->nblk, e->iblk, n, qv, e->pblk, np)))
		return rc;
	rckpt_xf_inverse(e->nblk, n, ckenc_value_xf(e, RCKPT_LK_MOMENT2));
	rckpt_norm_divide(out, out, e->nblk, eps, n);
	return 0;
}

/* Elements [first, first + n) of t as fp32: in place when t is aligned
 * fp32, else widened into the block buffer (n <= BLK). */
const float *ckenc_values(rckpt_ckenc_t *e, const rckpt_ctensor_t *t, uint64_t first, size_t n)
{
	const int v = ckenc_norm_of(e, t);
	const unsigned xf = ckenc_value_xf(e, rckpt_ctensor_kind(t));
	if (v >= 0) {
		const rckpt_ctensor_t *vt = &e->xparams->t[v];
		if (ckenc_norm_values(e, e->wblk, t, vt, e->xg[v], e->xq[v], (float)ckenc_eps(vt), first,
				      n))
			for (size_t i = 0; i < n; i++) /* unreachable with checked parameters */
				e->wblk[i] = NAN;
		return e->wblk;
	}
	const size_t dsz = rckpt_dtype_size(t->dtype);
	if (!e->be->host) { /* a transformed tensor on the device: by the host */
		const void *h;
		void *owned = NULL;
		if (e->be->to_host(e, (const uint8_t *)t->data + first * dsz, n * dsz, &h, &owned)) {
			for (size_t i = 0; i < n; i++)
				e->wblk[i] = NAN; /* refused as NaN, as a value it cannot read */
			return e->wblk;
		}
		rckpt_widen_to_f32(e->wblk, h, t->dtype, n);
		free(owned);
		rckpt_xf_forward(e->wblk, n, xf);
		return e->wblk;
	}
	if (t->dtype == RCKPT_DT_F32 && ((uintptr_t)t->data & 3) == 0 && xf == RCKPT_XF_NONE)
		return (const float *)t->data + first;
	rckpt_widen_to_f32(e->wblk, (const uint8_t *)t->data + first * dsz, t->dtype, n);
	rckpt_xf_forward(e->wblk, n, xf); /* the encoder works in the transform's domain */
	return e->wblk;
}
