/*
 * rckpt_gpu.h — the C interface of rckpt's CUDA kernels. No CUDA type
 * appears here, so the library and its tests build and link with or without
 * the CUDA toolkit: without it (gpu_none.c) every call but the probe returns
 * -ENODEV.
 *
 * The shape is nvCOMP's low-level API: the caller owns device memory and a
 * stream; each stage has a temp-size query and an asynchronous call that
 * only enqueues work on the stream (`stream` is a cudaStream_t, NULL for the
 * default stream). Pointers named d_* are device memory. A call returns 0
 * once its work is enqueued, -EINVAL for bad arguments (checked before
 * anything is enqueued), -ENOSPC when temp_bytes is short, -EIO when a
 * launch fails; results and per-input errors (a non-finite value, a level
 * out of range) are written to device memory and are valid after the
 * stream synchronizes.
 *
 * Every kernel has a CPU twin that is the reference: the same integers (bin
 * indices, histogram counts, symbols) and the same floats, bit for bit
 * (fixed reduction trees in double; the device code is built without fused
 * multiply-adds). The twins are named with each call.
 *
 * Thread-safety: calls on distinct streams and buffers may run
 * concurrently; nothing is kept between calls.
 */
#ifndef RCKPT_GPU_H
#define RCKPT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- what the machine offers ---- */

typedef struct rckpt_gpu_probe {
	int built_with_cuda;   /* 1 when this build compiled the CUDA code */
	int runtime_version;   /* CUDA runtime linked in, as 1000*major + 10*minor; 0 if none */
	int driver_version;    /* CUDA driver found at run time, same encoding; 0 if none */
	int device_count;      /* usable devices; 0 when there is no driver or device */
	char device_name[128]; /* device 0, or "" */
	int cc_major, cc_minor; /* compute capability of device 0 */
	size_t total_mem;      /* bytes of memory on device 0 */
	int sm_count;          /* multiprocessors of device 0 */
} rckpt_gpu_probe_t;

/* Fills *out with what this build and this machine offer. Never fails for
 * lack of a device or driver: that is device_count == 0. Returns 0. */
int rckpt_gpu_probe(rckpt_gpu_probe_t *out);

/* ---- memory, streams, copies: thin wrappers so C callers need no CUDA
 * headers. 0, -ENODEV (no CUDA), -ENOMEM, -EIO. ---- */

int rckpt_gpu_malloc(void **out, size_t bytes); /* device memory; bytes 0 gives NULL */
void rckpt_gpu_free(void *d);                   /* accepts NULL */
int rckpt_gpu_stream_create(void **out);
void rckpt_gpu_stream_destroy(void *stream);    /* accepts NULL */
int rckpt_gpu_stream_sync(void *stream);
int rckpt_gpu_memset(void *d, int byte, size_t bytes, void *stream);
/* kind: 0 host to device, 1 device to host, 2 device to device. */
int rckpt_gpu_memcpy(void *dst, const void *src, size_t bytes, int kind, void *stream);
/* count elements of esize bytes, every stride-th from src (device) into
 * dst (host), packed: the search's samples. */
int rckpt_gpu_gather_d2h(void *dst, const void *d_src, size_t esize, size_t stride, size_t count,
			 void *stream);
/* 1 when p is device (or managed) memory of the current device, else 0. */
int rckpt_gpu_is_device_ptr(const void *p);
/* Makes the device that holds p (device or managed memory) this thread's
 * current one, the one it was into *prev: 0, or -EFAULT when p is not
 * device memory. rckpt_gpu_set_device(*prev) puts it back. */
int rckpt_gpu_use_device_of(const void *p, int *prev);
int rckpt_gpu_set_device(int d);

/* Element types: enum rckpt_dtype (formats/rckpt_dtype.h). */

/* ---- sketch: log-bucket histograms (twin: rckpt_sketch_add and
 * rckpt_sketch_add_abs_prod, client/lib/codec/rckpt_sketch.c) ---- */

#define RCKPT_GPU_SKETCH_MBITS_MAX 10

/* u64 counters of one histogram: [neg keys | pos keys | zero], keys per sign
 * 254 << mbits, laid out as rckpt_sketch_t's array (neg, then pos, then the
 * zeros and subnormals in the last slot). */
size_t rckpt_gpu_sketch_hist_len(unsigned mbits);
size_t rckpt_gpu_sketch_temp_bytes(uint64_t n, unsigned mbits);

/* Counts the n values d_w (dtype) into d_hist (signed values) and, when
 * d_g (fp32) is given, |w * g| into d_hsens; both are cleared first. Every
 * value must be finite and every gradient finite and not negative: *d_bad
 * gets the first index whose value is NaN or Inf or whose gradient is NaN,
 * Inf or below 0 (-0 passes), or UINT64_MAX when none (twin:
 * rckpt_codec_prep_add). */
int rckpt_gpu_sketch(uint64_t *d_hist, uint64_t *d_hsens, uint64_t *d_bad, const void *d_w,
		     unsigned dtype, const float *d_g, uint64_t n, unsigned mbits, void *d_temp,
		     size_t temp_bytes, void *stream);

/* Quantile lookup for thresholds (twin: rckpt_sketch_abs_quantile_bounds):
 * for each q[i], the bucket edges [lo, hi) of the magnitude at rank
 * floor(q (total - 1)) of histogram d_hist (total values), as
 * d_bounds[2i], d_bounds[2i + 1]. nq <= RCKPT_GPU_MAX_QUANTILES. */
#define RCKPT_GPU_MAX_QUANTILES 16
size_t rckpt_gpu_bounds_temp_bytes(unsigned mbits);
int rckpt_gpu_abs_bounds(float *d_bounds, const uint64_t *d_hist, unsigned mbits, uint64_t total,
			 const double *q, unsigned nq, void *d_temp, size_t temp_bytes, void *stream);

/* ---- classification and bin assignment ---- */

#define RCKPT_GPU_MAX_BINS 64

/* The quantization parameters as the kernels take them: made from an
 * rckpt_qparams_t by rckpt_gpu_qparams_make (client/lib/codec/rckpt_gpuenc.c),
 * which computes the midpoints with the CPU's own code. Passed by value. */
typedef struct rckpt_gpu_qparams {
	uint32_t nbins;                       /* B, 1..64 */
	uint32_t pruned_level;                /* P */
	uint32_t prune_by_sensitivity;
	float mid[RCKPT_GPU_MAX_BINS];        /* B - 1 ascending midpoints */
	float level[RCKPT_GPU_MAX_BINS + 2];  /* level -> value (P: 0; B + 1 unused) */
	float prune_below, protect_mag, protect_sens;
} rckpt_gpu_qparams_t;

size_t rckpt_gpu_quantize_temp_bytes(uint64_t n);

/* Levels of d_w[0..n) into d_idx, the protected values (bf16) in position
 * order into d_prot (room for n), their count into *d_nprot. d_g (fp32)
 * may be NULL: then no sensitivity tests (twin: rckpt_quantize). Values
 * must be finite (the sketch checked). */
int rckpt_gpu_quantize(uint8_t *d_idx, uint16_t *d_prot, uint64_t *d_nprot, const void *d_w,
		       unsigned dtype, const float *d_g, uint64_t n, const rckpt_gpu_qparams_t *q,
		       void *d_temp, size_t temp_bytes, void *stream);

/* The inverse into d_out (out_dtype; fp16 and bf16 round to nearest even):
 * level -> value, 0, or the next protected value. *d_bad gets 1 when a
 * level is >= B + 2 or the levels do not use exactly nprot protected values
 * (twin: rckpt_dequantize, then rckpt_narrow_from_f32). */
size_t rckpt_gpu_dequantize_temp_bytes(uint64_t n);
int rckpt_gpu_dequantize(void *d_out, unsigned out_dtype, int *d_bad, const uint8_t *d_idx,
			 uint64_t n, const rckpt_gpu_qparams_t *q, const uint16_t *d_prot,
			 uint64_t nprot, void *d_temp, size_t temp_bytes, void *stream);

/* The quality loss terms of quantizing d_w with q, without writing levels:
 * d_out[0] = sum g^2 (w - r)^2, d_out[1] = sum g^2 w^2 (g NULL: weights 1),
 * r the reconstruction (a protected value's is its bf16 rounding), summed
 * in double in the fixed order rckpt_qerr describes (its twin,
 * client/lib/codec/rckpt_quant.h): tiles of 2048, 256 lanes, folded as trees. */
size_t rckpt_gpu_qerr_temp_bytes(uint64_t n);
int rckpt_gpu_qerr(double *d_out, const void *d_w, unsigned dtype, const float *d_g, uint64_t n,
		   const rckpt_gpu_qparams_t *q, void *d_temp, size_t temp_bytes, void *stream);

/* ---- an optimizer's state ---- */

/* d_in[0..n) (dtype) widened to fp32 and through transform xf (0: none,
 * 1: LOG2; enum rckpt_seg_transform) into d_out (twin: rckpt_widen_to_f32
 * then rckpt_xf_forward). */
int rckpt_gpu_xf_values(float *d_out, const void *d_in, unsigned dtype, uint64_t n, unsigned xf,
			void *stream);
/* In place, the inverse (twin: rckpt_xf_inverse). */
int rckpt_gpu_xf_inverse(float *d_v, uint64_t n, unsigned xf, void *stream);
/* d_out[i] = m[i] / (sqrtf(d_v[i]) + eps), m of mdtype widened (twin:
 * rckpt_norm_divide). */
int rckpt_gpu_norm_divide(float *d_out, const void *d_m, unsigned mdtype, const float *d_v, float eps,
			  uint64_t n, void *stream);

/* The update error's weights of a second moment d_v (vdtype) and its first
 * moment d_m (mdtype; NULL: none) into d_wv and, when not NULL (d_m
 * given), d_wm, and their denominator into *d_den (one double), summed in
 * rckpt_qerr's fixed order (twin: rckpt_update_weights,
 * client/lib/codec/rckpt_quant.h). */
size_t rckpt_gpu_update_weights_temp_bytes(uint64_t n);
int rckpt_gpu_update_weights(float *d_wv, float *d_wm, double *d_den, const void *d_v, unsigned vdtype,
			     const void *d_m, unsigned mdtype, uint64_t n, double eps, int lin,
			     void *d_temp, size_t temp_bytes, void *stream);

/* ---- index deltas ---- */

/* The symbols of an index stream before run-length and entropy coding
 * (twin: rckpt_istream_symbols, formats/rckpt_istream.c): with d_prev NULL
 * the levels themselves; else the cyclic delta (cur - prev) mod M, M =
 * max(lcur, lprev), grouped by prev (a stable counting sort) when
 * rearrange. *d_bad gets 1 when a cur >= lcur or a prev >= lprev. n <
 * 2^32; levels <= 255. */
size_t rckpt_gpu_delta_temp_bytes(uint64_t n);
int rckpt_gpu_delta(uint8_t *d_out, int *d_bad, const uint8_t *d_cur, unsigned lcur,
		    const uint8_t *d_prev, unsigned lprev, uint64_t n, int rearrange, void *d_temp,
		    size_t temp_bytes, void *stream);

/* ---- change distance for prioritized partial checkpoints ---- */

/* d_out[b] = sum over block b (elements [b*block, min(n, (b+1)*block))) of
 * ((double)cur - (double)saved)^2, cur of dtype, saved fp32, summed in the
 * fixed order of rckpt_block_dist (its twin, client/lib/codec/rckpt_quant.c).
 * block >= 1. */
int rckpt_gpu_block_dist(double *d_out, const void *d_cur, unsigned dtype, const float *d_saved,
			 uint64_t n, uint64_t block, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* RCKPT_GPU_H */
