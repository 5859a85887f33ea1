/*
 * rckpt_gpu_none.c — rckpt_gpu.h for builds without the CUDA toolkit: the
 * probe says so, and every other call is -ENODEV.
 */
#include "rckpt_gpu.h"

#include <errno.h>
#include <string.h>

int rckpt_gpu_probe(rckpt_gpu_probe_t *out)
{
	memset(out, 0, sizeof(*out));
	return 0;
}

int rckpt_gpu_malloc(void **out, size_t bytes)
{
	(void)bytes;
	*out = NULL;
	return -ENODEV;
}

void rckpt_gpu_free(void *d)
{
	(void)d;
}

int rckpt_gpu_stream_create(void **out)
{
	*out = NULL;
	return -ENODEV;
}

void rckpt_gpu_stream_destroy(void *stream)
{
	(void)stream;
}

int rckpt_gpu_stream_sync(void *stream)
{
	(void)stream;
	return -ENODEV;
}

int rckpt_gpu_memset(void *d, int byte, size_t bytes, void *stream)
{
	(void)d, (void)byte, (void)bytes, (void)stream;
	return -ENODEV;
}

int rckpt_gpu_memcpy(void *dst, const void *src, size_t bytes, int kind, void *stream)
{
	(void)dst, (void)src, (void)bytes, (void)kind, (void)stream;
	return -ENODEV;
}

int rckpt_gpu_gather_d2h(void *dst, const void *d_src, size_t esize, size_t stride, size_t count,
			 void *stream)
{
	(void)dst, (void)d_src, (void)esize, (void)stride, (void)count, (void)stream;
	return -ENODEV;
}

int rckpt_gpu_use_device_of(const void *p, int *prev)
{
	(void)p;
	*prev = 0;
	return -ENODEV;
}

int rckpt_gpu_set_device(int d)
{
	(void)d;
	return -ENODEV;
}

int rckpt_gpu_is_device_ptr(const void *p)
{
	(void)p;
	return 0;
}

size_t rckpt_gpu_sketch_hist_len(unsigned mbits)
{
	return 2 * ((size_t)254 << mbits) + 1;
}

size_t rckpt_gpu_sketch_temp_bytes(uint64_t n, unsigned mbits)
{
	(void)n, (void)mbits;
	return 0;
}

int rckpt_gpu_sketch(uint64_t *d_hist, uint64_t *d_hsens, uint64_t *d_bad, const void *d_w,
		     unsigned dtype, const float *d_g, uint64_t n, unsigned mbits, void *d_temp,
		     size_t temp_bytes, void *stream)
{
	(void)d_hist, (void)d_hsens, (void)d_bad, (void)d_w, (void)dtype, (void)d_g, (void)n;
	(void)mbits, (void)d_temp, (void)temp_bytes, (void)stream;
	return -ENODEV;
}

size_t rckpt_gpu_bounds_temp_bytes(unsigned mbits)
{
	(void)mbits;
	return 0;
}

int rckpt_gpu_abs_bounds(float *d_bounds, const uint64_t *d_hist, unsigned mbits, uint64_t total,
			 const double *q, unsigned nq, void *d_temp, size_t temp_bytes, void *stream)
{
	(void)d_bounds, (void)d_hist, (void)mbits, (void)total, (void)q, (void)nq, (void)d_temp;
	(void)temp_bytes, (void)stream;
	return -ENODEV;
}

size_t rckpt_gpu_quantize_temp_bytes(uint64_t n)
{
	return 8 * (1 + (n + 4095) / 4096);
}

int rckpt_gpu_quantize(uint8_t *d_idx, uint16_t *d_prot, uint64_t *d_nprot, const void *d_w,
		       unsigned dtype, const float *d_g, uint64_t n, const rckpt_gpu_qparams_t *q,
		       void *d_temp, size_t temp_bytes, void *stream)
{
	(void)d_idx, (void)d_prot, (void)d_nprot, (void)d_w, (void)dtype, (void)d_g, (void)n, (void)q;
	(void)d_temp, (void)temp_bytes, (void)stream;
	return -ENODEV;
}

size_t rckpt_gpu_dequantize_temp_bytes(uint64_t n)
{
	return 8 * (1 + (n + 4095) / 4096);
}

int rckpt_gpu_dequantize(void *d_out, unsigned out_dtype, int *d_bad, const uint8_t *d_idx,
			 uint64_t n, const rckpt_gpu_qparams_t *q, const uint16_t *d_prot,
			 uint64_t nprot, void *d_temp, size_t temp_bytes, void *stream)
{
	(void)d_out, (void)out_dtype, (void)d_bad, (void)d_idx, (void)n, (void)q, (void)d_prot;
	(void)nprot, (void)d_temp, (void)temp_bytes, (void)stream;
	return -ENODEV;
}

size_t rckpt_gpu_qerr_temp_bytes(uint64_t n)
{
	return 16 * (n ? (n + 2047) / 2048 : 1);
}

int rckpt_gpu_qerr(double *d_out, const void *d_w, unsigned dtype, const float *d_g, uint64_t n,
		   const rckpt_gpu_qparams_t *q, void *d_temp, size_t temp_bytes, void *stream)
{
	(void)d_out, (void)d_w, (void)dtype, (void)d_g, (void)n, (void)q, (void)d_temp;
	(void)temp_bytes, (void)stream;
	return -ENODEV;
}

size_t rckpt_gpu_delta_temp_bytes(uint64_t n)
{
	(void)n;
	return 0;
}

int rckpt_gpu_delta(uint8_t *d_out, int *d_bad, const uint8_t *d_cur, unsigned lcur,
		    const uint8_t *d_prev, unsigned lprev, uint64_t n, int rearrange, void *d_temp,
		    size_t temp_bytes, void *stream)
{
	(void)d_out, (void)d_bad, (void)d_cur, (void)lcur, (void)d_prev, (void)lprev, (void)n;
	(void)rearrange, (void)d_temp, (void)temp_bytes, (void)stream;
	return -ENODEV;
}

int rckpt_gpu_block_dist(double *d_out, const void *d_cur, unsigned dtype, const float *d_saved,
			 uint64_t n, uint64_t block, void *stream)
{
	(void)d_out, (void)d_cur, (void)dtype, (void)d_saved, (void)n, (void)block, (void)stream;
	return -ENODEV;
}

int rckpt_gpu_xf_values(float *d_out, const void *d_in, unsigned dtype, uint64_t n, unsigned xf,
			void *stream)
{
	(void)d_out, (void)d_in, (void)dtype, (void)n, (void)xf, (void)stream;
	return -ENODEV;
}

int rckpt_gpu_xf_inverse(float *d_v, uint64_t n, unsigned xf, void *stream)
{
	(void)d_v, (void)n, (void)xf, (void)stream;
	return -ENODEV;
}

int rckpt_gpu_norm_divide(float *d_out, const void *d_m, unsigned mdtype, const float *d_v, float eps,
			  uint64_t n, void *stream)
{
	(void)d_out, (void)d_m, (void)mdtype, (void)d_v, (void)eps, (void)n, (void)stream;
	return -ENODEV;
}

size_t rckpt_gpu_update_weights_temp_bytes(uint64_t n)
{
	return 8 * (n ? (n + 2047) / 2048 : 1);
}

int rckpt_gpu_update_weights(float *d_wv, float *d_wm, double *d_den, const void *d_v, unsigned vdtype,
			     const void *d_m, unsigned mdtype, uint64_t n, double eps, int lin,
			     void *d_temp, size_t temp_bytes, void *stream)
{
	(void)d_wv, (void)d_wm, (void)d_den, (void)d_v, (void)vdtype, (void)d_m, (void)mdtype, (void)n;
	(void)eps, (void)lin, (void)d_temp, (void)temp_bytes, (void)stream;
	return -ENODEV;
}
