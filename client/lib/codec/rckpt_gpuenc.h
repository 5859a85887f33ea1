/*
 * rckpt_gpuenc.h — the checkpoint encoder's GPU path: the passes over a
 * tensor's values (sketch and samples, the quality sums, bin assignment,
 * dequantization for a trainer's callback) run as CUDA kernels
 * (gpu/include/rckpt_gpu.h); the small work between them (thresholds from
 * the histogram, the weighted k-means, the search, entropy coding) stays on
 * the host, so the records are the CPU path's bytes. Internal to librckpt.
 *
 * Tensors may live in device memory (used in place) or host memory (copied
 * to the device, one tensor and its gradients at a time; the copy is kept
 * until another tensor is needed or the step ends). One encoder per thread.
 */
#ifndef RCKPT_GPUENC_H
#define RCKPT_GPUENC_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_ckdec.h"
#include "rckpt_codec.h"
#include "rckpt_gpu.h"
#include "rckpt_tset.h"

typedef struct rckpt_gpuenc rckpt_gpuenc_t;

/* 0; -ENODEV when the build has no CUDA or the machine no device; -ENOMEM. */
int rckpt_gpuenc_create(rckpt_gpuenc_t **out);
void rckpt_gpuenc_destroy(rckpt_gpuenc_t *g); /* accepts NULL */

/* Host copies kept from the last step are stale: the caller's buffers may
 * hold new values at the same addresses. */
void rckpt_gpuenc_step_begin(rckpt_gpuenc_t *g);

/* 1 when some tensor (or gradient) of params is in device memory. */
int rckpt_gpuenc_any_on_device(const rckpt_tset_t *params, const rckpt_tset_t *grads, const char **name);

/* The kernels' form of q, midpoints by the CPU's own code. */
void rckpt_gpu_qparams_make(rckpt_gpu_qparams_t *out, const rckpt_qparams_t *q);

/* rckpt_codec_prep_begin .. prep_end for tensor t on the GPU: the sketches
 * (of t and of |t * grads| when grads) and every stride-th value and
 * gradient into sw[], sg[] (*ns of them). -EDOM with *bad set for a NaN or
 * Inf. The prep is the CPU's, bit for bit. */
int rckpt_gpuenc_prepare(rckpt_gpuenc_t *g, rckpt_tensor_prep_t *p, uint64_t *bad,
			 const rckpt_ctensor_t *t, const float *grads, unsigned kind, uint64_t stride,
			 float *sw, float *sg, size_t *ns);

/* rckpt_qerr over all of t with q: *num, *den. */
int rckpt_gpuenc_qerr(rckpt_gpuenc_t *g, double *num, double *den, const rckpt_ctensor_t *t,
		      const float *grads, const rckpt_qparams_t *q);

/* rckpt_quantize of elements [first, first + n) of t into idx[0..n) and
 * prot (room for n); *nprot protected values. */
int rckpt_gpuenc_quantize(rckpt_gpuenc_t *g, uint8_t *idx, uint16_t *prot, size_t *nprot,
			  const rckpt_ctensor_t *t, const float *grads, uint64_t first, uint64_t n,
			  const rckpt_qparams_t *q);

/* t quantized with q and dequantized, as fp32 into out[0..t->n). */
int rckpt_gpuenc_dequantize_f32(rckpt_gpuenc_t *g, float *out, const rckpt_ctensor_t *t,
				const float *grads, const rckpt_qparams_t *q);

/* The values of t as the encoder quantizes them (ckenc_values), in device
 * memory: t widened to fp32 through transform xf, or, when vt is not
 * NULL, t normalized by its second moment vt quantized with qv (weights
 * gv) and restored through vxf: t / (sqrtf(v') + eps) (NORM). *shadow is
 * t with those values (fp32, device memory), valid until the next call or
 * the step's end. -EINVAL for a vt without qv or of another length. */
int rckpt_gpuenc_xvalues(rckpt_gpuenc_t *g, rckpt_ctensor_t *shadow, const rckpt_ctensor_t *t, unsigned xf,
			 const rckpt_ctensor_t *vt, unsigned vxf, const float *gv,
			 const rckpt_qparams_t *qv, float eps);

/* rckpt_update_weights of second moment vt and first moment mt (NULL:
 * none) into host memory wv, wm (NULL: not wanted), *den. */
int rckpt_gpuenc_update_weights(rckpt_gpuenc_t *g, float *wv, float *wm, double *den, const rckpt_ctensor_t *vt,
				const rckpt_ctensor_t *mt, double eps, int lin);

/* rckpt_block_dist of elements [first, first + n) of t (on the device, or
 * staged there) against saved[0..n) (fp32, host memory, copied up) into
 * out (host): a double per block of `block`, by rckpt_gpu_block_dist. */
int rckpt_gpuenc_block_dist(rckpt_gpuenc_t *g, double *out, const rckpt_ctensor_t *t, uint64_t first,
			    uint64_t n, const float *saved, uint64_t block);

/* bytes at src (device or host memory) into dst (host). */
int rckpt_gpuenc_read(rckpt_gpuenc_t *g, void *dst, const void *src, size_t bytes);

/* Tensor t of decoder d's step into device memory at dst, in its dtype
 * (rckpt_ckdec_tensor_to): plain quantized segments go up as levels and
 * protected values and are dequantized there (rckpt_gpu_dequantize), the
 * rest as bytes. Returns once the values are there; -EFAULT when dst is
 * not device memory. */
int rckpt_gpuenc_decode_to(rckpt_gpuenc_t *g, void *dst, const rckpt_ckdec_t *d, uint32_t t);

#endif /* RCKPT_GPUENC_H */
