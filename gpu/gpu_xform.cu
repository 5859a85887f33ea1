// gpu_xform.cu — an optimizer's state into the encoder's domain: the LOG2
// transform and its inverse (rckpt_xf_forward, rckpt_xf_inverse) and the
// NORM transform's division (rckpt_norm_divide), element by element.
#include "common.cuh"
#include "rckpt_record.h" // enum rckpt_seg_transform

#define XF_THREADS 256

// rckpt_xf_log2_fwd: integer steps, one exact scaling.
__device__ __forceinline__ float log2_fwd(float v)
{
	uint32_t b = __float_as_uint(v);
	if (b == 0x80000000u) // -0
		b = 0;
	if (b >= 0x7f800000u) // Inf, NaN, every negative value
		return __uint_as_float(0x7fc00000u);
	return __fmul_rn(__int2float_rn((int32_t)b - 0x3f800000), 0x1p-23f);
}

// rckpt_xf_log2_inv.
__device__ __forceinline__ float log2_inv(float x)
{
	if (x != x)
		return x;
	const float y = __fmul_rn(x, 0x1p23f);
	if (!(y > -1065353216.0f))
		return 0.0f;
	if (y >= 1073741824.0f)
		return __uint_as_float(0x7f7fffffu);
	const int32_t k = __float2int_rn(y) + 0x3f800000; // y is in int32's range here
	return __uint_as_float(k < 0 ? 0u : (uint32_t)k);
}

__global__ void k_xf_values(float *out, const void *in, unsigned dt, u64 n, unsigned xf)
{
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
		const float x = ld_dt(in, dt, i);
		out[i] = xf == RCKPT_XF_LOG2 ? log2_fwd(x) : x;
	}
}

__global__ void k_xf_inverse(float *v, u64 n)
{
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
		v[i] = log2_inv(v[i]);
}

__global__ void k_norm_divide(float *out, const void *m, unsigned dt, const float *v, float eps, u64 n)
{
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
		out[i] = __fdiv_rn(ld_dt(m, dt, i), __fadd_rn(__fsqrt_rn(v[i]), eps));
}

static unsigned xf_blocks(u64 n)
{
	const u64 want = (n + XF_THREADS - 1) / XF_THREADS, cap = (u64)sm_count() * 32;
	return (unsigned)(want < cap ? want : cap);
}

static int xf_known(unsigned xf)
{
	return xf == RCKPT_XF_NONE || xf == RCKPT_XF_LOG2;
}

extern "C" int rckpt_gpu_xf_values(float *d_out, const void *d_in, unsigned dtype, uint64_t n, unsigned xf,
				   void *stream)
{
	if (!dtype_ok(dtype) || !xf_known(xf) || (n && (!d_out || !d_in)))
		return -EINVAL;
	if (n == 0)
		return 0;
	k_xf_values<<<xf_blocks(n), XF_THREADS, 0, ST(stream)>>>(d_out, d_in, dtype, n, xf);
	return launched();
}

extern "C" int rckpt_gpu_xf_inverse(float *d_v, uint64_t n, unsigned xf, void *stream)
{
	if (!xf_known(xf) || (n && !d_v))
		return -EINVAL;
	if (n == 0 || xf == RCKPT_XF_NONE)
		return 0;
	k_xf_inverse<<<xf_blocks(n), XF_THREADS, 0, ST(stream)>>>(d_v, n);
	return launched();
}

extern "C" int rckpt_gpu_norm_divide(float *d_out, const void *d_m, unsigned mdtype, const float *d_v, float eps,
				     uint64_t n, void *stream)
{
	if (!dtype_ok(mdtype) || (n && (!d_out || !d_m || !d_v)))
		return -EINVAL;
	if (n == 0)
		return 0;
	k_norm_divide<<<xf_blocks(n), XF_THREADS, 0, ST(stream)>>>(d_out, d_m, mdtype, d_v, eps, n);
	return launched();
}
