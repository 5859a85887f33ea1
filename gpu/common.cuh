// common.cuh — what the kernel files of gpu/ share: the CUDA error
// mapping, dtype loads (the CPU's conversions, step by step), and the level
// of a value (rckpt_quantize's rules). Included by gpu/*.cu only.
//
// Bit-for-bit parity with the CPU twins rests on three rules: integer
// results (counts, levels, offsets) do not depend on the order of the
// atomics that build them; float operations are the CPU's, one by one, with
// _rn intrinsics where a compiler could otherwise fuse a multiply and an add
// (and every file is built with -fmad=false); sums in double follow the
// fixed trees rckpt_qerr and rckpt_block_dist describe.
#ifndef RCKPT_GPU_COMMON_CUH
#define RCKPT_GPU_COMMON_CUH

#include "rckpt_gpu.h"

#include <cuda_runtime.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

typedef unsigned long long u64;
static_assert(sizeof(u64) == sizeof(uint64_t), "u64 is uint64_t's size");

#define ST(s) ((cudaStream_t)(s))

static inline int err_of(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return 0;
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorInvalidValue:
		return -EINVAL;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
		return -ENODEV;
	default:
		return -EIO;
	}
}

// The launch's own error (a bad configuration); not a sticky device fault.
static inline int launched(void)
{
	return err_of(cudaGetLastError());
}

static inline int dtype_ok(unsigned dt)
{
	return dt == RCKPT_DT_F32 || dt == RCKPT_DT_F16 || dt == RCKPT_DT_BF16;
}

static inline size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static inline int sm_count(void)
{
	int dev = 0, n = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
		return 1;
	return n;
}

// ---------------------------------------------------------------- elements

// fp16 -> fp32, the integer steps of the CPU's half_to_f32 (exact).
__device__ __forceinline__ float half_to_f32(uint32_t h)
{
	const uint32_t sign = (h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023;
	if (exp == 31)
		return __uint_as_float(sign | 0x7f800000u | man << 13);
	if (exp == 0) {
		const float f = __fmul_rn(__uint2float_rn(man), 0x1p-24f); // exact
		return sign ? -f : f;
	}
	return __uint_as_float(sign | (exp + 112) << 23 | man << 13);
}

// fp32 -> fp16, round to nearest even: the CPU's f32_to_half.
__device__ __forceinline__ uint16_t f32_to_half(float f)
{
	const uint32_t u = __float_as_uint(f), sign = (u >> 16) & 0x8000u;
	uint32_t mag = u & 0x7fffffffu;
	if (mag >= 0x7f800000u)
		return (uint16_t)(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0));
	if (mag >= 0x477ff000u)
		return (uint16_t)(sign | 0x7c00u);
	if (mag < 0x38800000u) {
		const uint32_t q = __float2uint_rn(__fmul_rn(__uint_as_float(mag), 0x1p24f));
		return (uint16_t)(sign | q);
	}
	mag = mag - 0x38000000u;
	mag += 0xfffu + ((mag >> 13) & 1u);
	return (uint16_t)(sign | (mag >> 13));
}

__device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
	uint32_t u = __float_as_uint(f);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

__device__ __forceinline__ float bf16_to_f32(uint32_t h)
{
	return __uint_as_float(h << 16);
}

template <int DT> __device__ __forceinline__ float ld1(const void *p, u64 i)
{
	if (DT == RCKPT_DT_F32)
		return ((const float *)p)[i];
	const uint32_t h = ((const uint16_t *)p)[i];
	return DT == RCKPT_DT_F16 ? half_to_f32(h) : bf16_to_f32(h);
}

// The same, the dtype known at run time: rckpt_widen_to_f32's value of element i of an array of dtype dt.
__device__ __forceinline__ float ld_dt(const void *p, unsigned dt, u64 i)
{
	if (dt == RCKPT_DT_F32)
		return ld1<RCKPT_DT_F32>(p, i);
	if (dt == RCKPT_DT_F16)
		return ld1<RCKPT_DT_F16>(p, i);
	return ld1<RCKPT_DT_BF16>(p, i);
}

// Four consecutive elements from i (a multiple of 4) of an array whose base
// is aligned for it: one 16-byte (fp32) or 8-byte (fp16, bf16) load.
template <int DT> __device__ __forceinline__ void ld4(float x[4], const void *p, u64 i)
{
	if (DT == RCKPT_DT_F32) {
		const float4 v = ((const float4 *)p)[i / 4];
		x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
	} else {
		const uint2 v = ((const uint2 *)p)[i / 4];
		const uint32_t h[4] = { v.x & 0xffffu, v.x >> 16, v.y & 0xffffu, v.y >> 16 };
#pragma unroll
		for (int e = 0; e < 4; e++)
			x[e] = DT == RCKPT_DT_F16 ? half_to_f32(h[e]) : bf16_to_f32(h[e]);
	}
}

// Loads elements [i, i + 4) that lie below n into x (the rest 0), the
// gradients too when G; vector loads when VEC and all four are there.
template <int DT, bool VEC, bool G>
__device__ __forceinline__ void ld_quad(float x[4], float gv[4], const void *w, const float *g, u64 i,
					u64 n)
{
	if (VEC && i + 4 <= n) {
		ld4<DT>(x, w, i);
		if (G)
			ld4<RCKPT_DT_F32>(gv, g, i);
		return;
	}
#pragma unroll
	for (int e = 0; e < 4; e++) {
		x[e] = i + e < n ? ld1<DT>(w, i + e) : 0.0f;
		gv[e] = G && i + e < n ? g[i + e] : 0.0f;
	}
}

static inline int aligned(const void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

// ---------------------------------------------------------------- levels

// The level of x (and its gradient gv when G): rckpt_quantize's rules.
template <bool G>
__device__ __forceinline__ uint32_t level_of(float x, float gv, const float *smid, const rckpt_gpu_qparams_t &q)
{
	// bin = #{j : x >= mid[j]}: mid is non-decreasing and padded with +inf
	// to 64 entries, so that count is a binary search.
	uint32_t pos = 0;
#pragma unroll
	for (uint32_t step = 32; step; step >>= 1)
		if (smid[pos + step - 1] <= x)
			pos += step;
	const uint32_t pl = q.pruned_level, protl = q.nbins + 1;
	const uint32_t lvl = pos + (pos >= pl);
	const float a = fabsf(x);
	if (G) {
		const float s = fabsf(__fmul_rn(x, gv));
		const float metric = q.prune_by_sensitivity ? s : a;
		const bool prot = (a >= q.protect_mag) | (s >= q.protect_sens);
		const uint32_t v = metric < q.prune_below ? pl : lvl;
		return prot ? protl : v;
	}
	const uint32_t v = a < q.prune_below ? pl : lvl;
	return a >= q.protect_mag ? protl : v;
}

__device__ __forceinline__ void load_mids(float *smid, const rckpt_gpu_qparams_t &q)
{
	if (threadIdx.x < 64)
		smid[threadIdx.x] = threadIdx.x + 1 < q.nbins ? q.mid[threadIdx.x] : __int_as_float(0x7f800000);
}

static inline int qparams_ok(const rckpt_gpu_qparams_t *q)
{
	return q && q->nbins >= 1 && q->nbins <= RCKPT_GPU_MAX_BINS && q->pruned_level <= q->nbins;
}

#endif
