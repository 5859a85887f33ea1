// rckpt_gpu.cu — the CUDA kernels behind rckpt_gpu.h, and the host calls
// that check arguments and enqueue them.
//
// Bit-for-bit parity with the CPU twins rests on three rules: integer
// results (counts, levels, offsets) do not depend on the order of the
// atomics that build them; float operations are the CPU's, one by one, with
// _rn intrinsics where a compiler could otherwise fuse a multiply and an add
// (and the whole file is built with -fmad=false); sums in double follow the
// fixed trees rckpt_qerr and rckpt_block_dist describe.
#include "rckpt_gpu.h"

#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <errno.h>
#include <string.h>

typedef unsigned long long u64;
static_assert(sizeof(u64) == sizeof(uint64_t), "u64 is uint64_t's size");

#define ST(s) ((cudaStream_t)(s))

static int err_of(cudaError_t e)
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
static int launched(void)
{
	return err_of(cudaGetLastError());
}

static int dtype_ok(unsigned dt)
{
	return dt == RCKPT_GPU_F32 || dt == RCKPT_GPU_F16 || dt == RCKPT_GPU_BF16;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static int sm_count(void)
{
	int dev = 0, n = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
		return 1;
	return n;
}

// ---------------------------------------------------------------- probe

extern "C" int rckpt_gpu_probe(rckpt_gpu_probe_t *out)
{
	cudaDeviceProp prop;
	int n = 0;

	memset(out, 0, sizeof(*out));
	out->built_with_cuda = 1;
	cudaRuntimeGetVersion(&out->runtime_version);
	// Without a driver these fail; that is "no device", not an error.
	if (cudaDriverGetVersion(&out->driver_version) != cudaSuccess)
		out->driver_version = 0;
	if (out->driver_version == 0 || cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
		cudaGetLastError(); // clear the error the failed call left
		return 0;
	}
	out->device_count = n;
	if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
		strncpy(out->device_name, prop.name, sizeof(out->device_name) - 1);
		out->cc_major = prop.major;
		out->cc_minor = prop.minor;
		out->total_mem = prop.totalGlobalMem;
		out->sm_count = prop.multiProcessorCount;
	}
	return 0;
}

// ---------------------------------------------------------------- wrappers

extern "C" int rckpt_gpu_malloc(void **out, size_t bytes)
{
	*out = NULL;
	if (bytes == 0)
		return 0;
	return err_of(cudaMalloc(out, bytes));
}

extern "C" void rckpt_gpu_free(void *d)
{
	if (d)
		cudaFree(d);
}

extern "C" int rckpt_gpu_stream_create(void **out)
{
	cudaStream_t s = NULL;
	int rc = err_of(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	*out = rc ? NULL : (void *)s;
	return rc;
}

extern "C" void rckpt_gpu_stream_destroy(void *stream)
{
	if (stream)
		cudaStreamDestroy(ST(stream));
}

extern "C" int rckpt_gpu_stream_sync(void *stream)
{
	return err_of(cudaStreamSynchronize(ST(stream)));
}

extern "C" int rckpt_gpu_memset(void *d, int byte, size_t bytes, void *stream)
{
	return bytes ? err_of(cudaMemsetAsync(d, byte, bytes, ST(stream))) : 0;
}

extern "C" int rckpt_gpu_memcpy(void *dst, const void *src, size_t bytes, int kind, void *stream)
{
	static const cudaMemcpyKind kinds[3] = { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
						 cudaMemcpyDeviceToDevice };
	if (kind < 0 || kind > 2)
		return -EINVAL;
	return bytes ? err_of(cudaMemcpyAsync(dst, src, bytes, kinds[kind], ST(stream))) : 0;
}

extern "C" int rckpt_gpu_gather_d2h(void *dst, const void *d_src, size_t esize, size_t stride,
				    size_t count, void *stream)
{
	size_t i;
	if (count == 0)
		return 0;
	if (esize == 0 || stride == 0)
		return -EINVAL;
	if (esize * stride <= ((size_t)1 << 30)) // within any device's largest pitch
		return err_of(cudaMemcpy2DAsync(dst, esize, d_src, esize * stride, esize, count,
						cudaMemcpyDeviceToHost, ST(stream)));
	for (i = 0; i < count; i++) {
		int rc = err_of(cudaMemcpyAsync((char *)dst + i * esize,
						(const char *)d_src + i * esize * stride, esize,
						cudaMemcpyDeviceToHost, ST(stream)));
		if (rc)
			return rc;
	}
	return 0;
}

extern "C" int rckpt_gpu_is_device_ptr(const void *p)
{
	cudaPointerAttributes a;
	if (p == NULL || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
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
	if (DT == RCKPT_GPU_F32)
		return ((const float *)p)[i];
	const uint32_t h = ((const uint16_t *)p)[i];
	return DT == RCKPT_GPU_F16 ? half_to_f32(h) : bf16_to_f32(h);
}

// Four consecutive elements from i (a multiple of 4) of an array whose base
// is aligned for it: one 16-byte (fp32) or 8-byte (fp16, bf16) load.
template <int DT> __device__ __forceinline__ void ld4(float x[4], const void *p, u64 i)
{
	if (DT == RCKPT_GPU_F32) {
		const float4 v = ((const float4 *)p)[i / 4];
		x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
	} else {
		const uint2 v = ((const uint2 *)p)[i / 4];
		const uint32_t h[4] = { v.x & 0xffffu, v.x >> 16, v.y & 0xffffu, v.y >> 16 };
#pragma unroll
		for (int e = 0; e < 4; e++)
			x[e] = DT == RCKPT_GPU_F16 ? half_to_f32(h[e]) : bf16_to_f32(h[e]);
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
			ld4<RCKPT_GPU_F32>(gv, g, i);
		return;
	}
#pragma unroll
	for (int e = 0; e < 4; e++) {
		x[e] = i + e < n ? ld1<DT>(w, i + e) : 0.0f;
		gv[e] = G && i + e < n ? g[i + e] : 0.0f;
	}
}

static int aligned(const void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

// ---------------------------------------------------------------- sketch

extern "C" size_t rckpt_gpu_sketch_hist_len(unsigned mbits)
{
	return 2 * ((size_t)254 << mbits) + 1;
}

extern "C" size_t rckpt_gpu_sketch_temp_bytes(uint64_t n, unsigned mbits)
{
	(void)n;
	(void)mbits;
	return 0;
}

#define SK_THREADS 1024

// Slot of a value in [neg | pos | zero] (nkeys per sign), or -1 for a
// non-finite value (which the caller reports, never counts).
__device__ __forceinline__ int sk_slot(uint32_t u, unsigned shift, uint32_t k0, uint32_t nkeys)
{
	const uint32_t mag = u & 0x7fffffffu;
	if (mag >= 0x7f800000u)
		return -1;
	if (mag < 0x00800000u)
		return (int)(2 * nkeys);
	return (int)((mag >> shift) - k0 + (u >> 31 ? 0 : nkeys));
}

// SHARED: block-private u32 counters in shared memory ([neg | pos | zero]
// for the values, [pos | zero] for the sensitivities), flushed once into the
// u64 histograms; else u64 atomics on the histograms themselves (mbits > 6,
// or a device with less shared memory). Zeros (common in sensitivities: a
// zero gradient) are counted per warp, not per lane.
template <int DT, bool VEC, bool SENS, bool SHARED>
__global__ __launch_bounds__(SK_THREADS) void k_sketch(u64 *hist, u64 *hsens, u64 *bad, const void *w,
						       const float *g, u64 n, unsigned mbits)
{
	extern __shared__ uint32_t sh[];
	const unsigned shift = 23 - mbits;
	const uint32_t k0 = 1u << mbits, nkeys = 254u << mbits, nv = 2 * nkeys + 1, ns = nkeys + 1;
	uint32_t *shv = sh, *shs = sh + nv;
	const unsigned lane = threadIdx.x & 31;
	u64 i;

	if (SHARED) {
		for (uint32_t k = threadIdx.x; k < nv + (SENS ? ns : 0); k += blockDim.x)
			sh[k] = 0;
		__syncthreads();
	}
	// Each pass of the loop takes four consecutive elements per thread; the
	// loop's trip count is the same for every lane of a warp (the warp
	// votes below need all 32).
	const u64 stride = (u64)gridDim.x * blockDim.x * 4;
	const u64 span = (n + 3) / 4 * 4;
	for (u64 b = ((u64)blockIdx.x * blockDim.x) * 4; b < span; b += stride) {
		float x[4], gv[4];
		i = b + (u64)threadIdx.x * 4;
		ld_quad<DT, VEC, SENS>(x, gv, w, g, i, n);
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const bool in = i + e < n;
			const uint32_t u = __float_as_uint(x[e]);
			int sv = in ? sk_slot(u, shift, k0, nkeys) : -2;
			int ss = -2;
			if (SENS && in) {
				const uint32_t us = __float_as_uint(__fmul_rn(x[e], gv[e])) & 0x7fffffffu;
				ss = sk_slot(us, shift, k0, nkeys);
				if ((__float_as_uint(gv[e]) & 0x7f800000u) == 0x7f800000u)
					ss = sv = -1; // a non-finite gradient: the element is bad
			}
			if (sv == -1 || ss == -1) {
				atomicMin(bad, (u64)(i + e));
				sv = ss = -2;
			}
			const unsigned zv = __ballot_sync(0xffffffffu, sv == (int)(2 * nkeys));
			const unsigned zs = SENS ? __ballot_sync(0xffffffffu, ss == (int)(2 * nkeys)) : 0u;
			if (SHARED) {
				if (sv >= 0 && sv < (int)(2 * nkeys))
					atomicAdd(&shv[sv], 1u);
				if (SENS && ss >= 0 && ss < (int)(2 * nkeys))
					atomicAdd(&shs[ss - nkeys], 1u);
				if (lane == 0 && zv)
					atomicAdd(&shv[2 * nkeys], (uint32_t)__popc(zv));
				if (SENS && lane == 0 && zs)
					atomicAdd(&shs[nkeys], (uint32_t)__popc(zs));
			} else {
				if (sv >= 0 && sv < (int)(2 * nkeys))
					atomicAdd(&hist[sv], 1ull);
				if (SENS && ss >= 0 && ss < (int)(2 * nkeys))
					atomicAdd(&hsens[ss], 1ull);
				if (lane == 0 && zv)
					atomicAdd(&hist[2 * nkeys], (u64)__popc(zv));
				if (SENS && lane == 0 && zs)
					atomicAdd(&hsens[2 * nkeys], (u64)__popc(zs));
			}
		}
	}
	if (SHARED) {
		__syncthreads();
		for (uint32_t k = threadIdx.x; k < nv; k += blockDim.x)
			if (shv[k])
				atomicAdd(&hist[k], (u64)shv[k]);
		if (SENS)
			for (uint32_t k = threadIdx.x; k < ns; k += blockDim.x)
				if (shs[k])
					atomicAdd(&hsens[nkeys + k], (u64)shs[k]);
	}
}

template <int DT, bool VEC, bool SENS, bool SHARED>
static int launch_sketch(u64 *hist, u64 *hsens, u64 *bad, const void *w, const float *g, u64 n,
			 unsigned mbits, cudaStream_t s)
{
	auto k = k_sketch<DT, VEC, SENS, SHARED>;
	const size_t nkeys = (size_t)254 << mbits;
	const size_t shbytes = SHARED ? 4 * (2 * nkeys + 1 + (SENS ? nkeys + 1 : 0)) : 0;
	u64 blocks = (u64)sm_count() * (SHARED ? 1 : 2);
	const u64 need = (n + 4 * SK_THREADS - 1) / (4 * SK_THREADS);
	// a block's u32 counters must not wrap: at most 2^31 elements a block
	const u64 least = (n >> 31) + 1;
	if (blocks > need)
		blocks = need;
	if (blocks < least)
		blocks = least;
	if (blocks == 0)
		return 0;
	if (SHARED && cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shbytes) !=
			      cudaSuccess)
		return launched();
	k<<<(unsigned)blocks, SK_THREADS, shbytes, s>>>(hist, hsens, bad, w, g, n, mbits);
	return launched();
}

template <int DT, bool VEC>
static int sketch_dt(u64 *hist, u64 *hsens, u64 *bad, const void *w, const float *g, u64 n,
		     unsigned mbits, bool shared, cudaStream_t s)
{
	if (g)
		return shared ? launch_sketch<DT, VEC, true, true>(hist, hsens, bad, w, g, n, mbits, s)
			      : launch_sketch<DT, VEC, true, false>(hist, hsens, bad, w, g, n, mbits, s);
	return shared ? launch_sketch<DT, VEC, false, true>(hist, hsens, bad, w, g, n, mbits, s)
		      : launch_sketch<DT, VEC, false, false>(hist, hsens, bad, w, g, n, mbits, s);
}

extern "C" int rckpt_gpu_sketch(uint64_t *d_hist, uint64_t *d_hsens, uint64_t *d_bad, const void *d_w,
				unsigned dtype, const float *d_g, uint64_t n, unsigned mbits, void *d_temp,
				size_t temp_bytes, void *stream)
{
	const cudaStream_t s = ST(stream);
	const size_t hl = rckpt_gpu_sketch_hist_len(mbits <= RCKPT_GPU_SKETCH_MBITS_MAX ? mbits : 1);
	size_t shbytes;
	int optin = 0, dev = 0, rc;
	bool vec, shared;

	(void)d_temp;
	(void)temp_bytes;
	if (!dtype_ok(dtype) || mbits < 1 || mbits > RCKPT_GPU_SKETCH_MBITS_MAX || !d_hist || !d_bad ||
	    (d_g && !d_hsens) || (n && !d_w))
		return -EINVAL;
	if ((rc = err_of(cudaMemsetAsync(d_hist, 0, 8 * hl, s))) ||
	    (d_g && (rc = err_of(cudaMemsetAsync(d_hsens, 0, 8 * hl, s)))) ||
	    (rc = err_of(cudaMemsetAsync(d_bad, 0xff, 8, s))))
		return rc;
	if (n == 0)
		return 0;
	u64 *const hv = (u64 *)d_hist, *const hs = (u64 *)d_hsens, *const bd = (u64 *)d_bad;
	shbytes = 4 * (hl + (d_g ? hl / 2 + 1 : 0));
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
	shared = shbytes <= (size_t)optin;
	vec = aligned(d_w, dtype == RCKPT_GPU_F32 ? 16 : 8) && (!d_g || aligned(d_g, 16));
	switch (dtype) {
	case RCKPT_GPU_F32:
		return vec ? sketch_dt<RCKPT_GPU_F32, true>(hv, hs, bd, d_w, d_g, n, mbits, shared, s)
			   : sketch_dt<RCKPT_GPU_F32, false>(hv, hs, bd, d_w, d_g, n, mbits, shared, s);
	case RCKPT_GPU_F16:
		return vec ? sketch_dt<RCKPT_GPU_F16, true>(hv, hs, bd, d_w, d_g, n, mbits, shared, s)
			   : sketch_dt<RCKPT_GPU_F16, false>(hv, hs, bd, d_w, d_g, n, mbits, shared, s);
	default:
		return vec ? sketch_dt<RCKPT_GPU_BF16, true>(hv, hs, bd, d_w, d_g, n, mbits, shared, s)
			   : sketch_dt<RCKPT_GPU_BF16, false>(hv, hs, bd, d_w, d_g, n, mbits, shared, s);
	}
}

// ---------------------------------------------------------------- quantiles

struct ranks {
	u64 rank[RCKPT_GPU_MAX_QUANTILES];
	unsigned nq;
	int empty;
};

#define QB_THREADS 1024

// One block walks the magnitude buckets (pos + neg of each key) in order,
// 1024 at a time, with a running total: the bucket where the cumulative
// count first exceeds a rank is that quantile's (rckpt_sketch_abs_quantile_bounds).
__global__ __launch_bounds__(QB_THREADS) void k_bounds(float *out, const u64 *hist, unsigned mbits, ranks r)
{
	typedef cub::BlockScan<u64, QB_THREADS> scan_t;
	__shared__ typename scan_t::TempStorage ts;
	__shared__ int found[RCKPT_GPU_MAX_QUANTILES];
	const uint32_t nkeys = 254u << mbits, k0 = 1u << mbits;
	const unsigned shift = 23 - mbits;
	const u64 zero = hist[2 * nkeys];
	u64 carry = zero;

	if (threadIdx.x < RCKPT_GPU_MAX_QUANTILES)
		found[threadIdx.x] = 0;
	__syncthreads();
	if (r.empty) {
		if (threadIdx.x < r.nq)
			out[2 * threadIdx.x] = out[2 * threadIdx.x + 1] = 0.0f;
		return;
	}
	if (threadIdx.x < r.nq && zero > r.rank[threadIdx.x]) {
		out[2 * threadIdx.x] = -1.17549435e-38f; // -FLT_MIN
		out[2 * threadIdx.x + 1] = 1.17549435e-38f;
		found[threadIdx.x] = 1;
	}
	__syncthreads();
	for (uint32_t base = 0; base < nkeys; base += QB_THREADS) {
		const uint32_t k = base + threadIdx.x;
		const u64 c = k < nkeys ? hist[k] + hist[nkeys + k] : 0;
		u64 incl, agg;
		scan_t(ts).InclusiveSum(c, incl, agg);
		const u64 cum = carry + incl;
		for (unsigned q = 0; q < r.nq; q++)
			if (!found[q] && c && cum > r.rank[q] && cum - c <= r.rank[q]) {
				out[2 * q] = __uint_as_float((k + k0) << shift);
				out[2 * q + 1] = __uint_as_float((k + k0 + 1) << shift);
				found[q] = 2; // written; seen by all after the barrier
			}
		carry += agg;
		__syncthreads();
	}
	// ranks past the end cannot happen (rank < total); the CPU's answer
	// for them is the topmost key all the same
	if (threadIdx.x < r.nq && !found[threadIdx.x]) {
		out[2 * threadIdx.x] = __uint_as_float((nkeys - 1 + k0) << shift);
		out[2 * threadIdx.x + 1] = __uint_as_float((nkeys + k0) << shift);
	}
}

extern "C" size_t rckpt_gpu_bounds_temp_bytes(unsigned mbits)
{
	(void)mbits;
	return 0;
}

extern "C" int rckpt_gpu_abs_bounds(float *d_bounds, const uint64_t *d_hist, unsigned mbits,
				    uint64_t total, const double *q, unsigned nq, void *d_temp,
				    size_t temp_bytes, void *stream)
{
	ranks r;
	unsigned i;

	(void)d_temp;
	(void)temp_bytes;
	if (!d_bounds || !d_hist || nq == 0 || nq > RCKPT_GPU_MAX_QUANTILES || mbits < 1 ||
	    mbits > RCKPT_GPU_SKETCH_MBITS_MAX)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.nq = nq;
	r.empty = total == 0;
	for (i = 0; i < nq; i++) { // the CPU's rank, computed by the CPU
		double qq = q[i] < 0 ? 0 : q[i] > 1 ? 1 : q[i];
		if (q[i] != q[i])
			return -EINVAL;
		r.rank[i] = total ? (u64)(qq * (double)(total - 1)) : 0;
	}
	k_bounds<<<1, QB_THREADS, 0, ST(stream)>>>(d_bounds, (const u64 *)d_hist, mbits, r);
	return launched();
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

// ---------------------------------------------------------------- chained scan

// A single-pass scan across tiles (decoupled look-back): each tile takes a
// ticket (so every earlier tile is already running), publishes its own
// count, then its inclusive prefix once it knows it; a status word holds
// flag and value together, so one 64-bit access reads both.
#define FLAG_AGG (1ull << 62)
#define FLAG_PFX (2ull << 62)
#define VAL_MASK ((1ull << 62) - 1)

__device__ __forceinline__ u64 lookback(u64 *status, u64 tile, u64 agg)
{
	u64 excl = 0;
	if (tile == 0) {
		atomicExch(&status[0], FLAG_PFX | agg);
		return 0;
	}
	atomicExch(&status[tile], FLAG_AGG | agg);
	for (u64 j = tile; j-- > 0;) {
		u64 s;
		do
			s = *(volatile u64 *)&status[j];
		while ((s >> 62) == 0);
		excl += s & VAL_MASK;
		if ((s >> 62) == 2)
			break;
	}
	atomicExch(&status[tile], FLAG_PFX | (excl + agg));
	return excl;
}

// Tiles of 4096 elements: 256 threads, four rows of four consecutive
// elements each (row r, thread t: elements r*1024 + 4t .. + 3), so loads
// and stores are 16 bytes wide and position order is (row, thread, item).
#define QT 256
#define QROWS 4
#define QTILE (QT * 4 * QROWS)
#define QWARPS (QT / 32)

// Exclusive offsets, in position order, of the flagged items: cnt[r] is
// this thread's count in row r; off[r] gets the tile-relative offset of
// its first; returns the tile's total to every thread.
__device__ __forceinline__ uint32_t tile_offsets(uint32_t off[QROWS], const uint32_t cnt[QROWS],
						 uint32_t (*wsum)[QWARPS])
{
	const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	uint32_t incl[QROWS];
#pragma unroll
	for (int r = 0; r < QROWS; r++) {
		uint32_t v = cnt[r];
#pragma unroll
		for (int d = 1; d < 32; d <<= 1) {
			const uint32_t o = __shfl_up_sync(0xffffffffu, v, d);
			if (lane >= (unsigned)d)
				v += o;
		}
		incl[r] = v;
		if (lane == 31)
			wsum[r][warp] = v;
	}
	__syncthreads();
	if (warp == 0) { // QROWS * QWARPS == 32 entries, row-major
		uint32_t v = wsum[lane / QWARPS][lane % QWARPS], x = v;
#pragma unroll
		for (int d = 1; d < 32; d <<= 1) {
			const uint32_t o = __shfl_up_sync(0xffffffffu, x, d);
			if (lane >= (unsigned)d)
				x += o;
		}
		__syncwarp();
		wsum[lane / QWARPS][lane % QWARPS] = x - v; // exclusive
		const uint32_t total = __shfl_sync(0xffffffffu, x, 31);
		if (lane == 0)
			wsum[QROWS][0] = total;
	}
	__syncthreads();
#pragma unroll
	for (int r = 0; r < QROWS; r++)
		off[r] = wsum[r][warp] + incl[r] - cnt[r];
	return wsum[QROWS][0];
}

// ---------------------------------------------------------------- quantize

template <int DT, bool VEC, bool G>
__global__ __launch_bounds__(QT) void k_quantize(uint8_t *idx, uint16_t *prot, u64 *nprot, const void *w,
						 const float *g, u64 n, rckpt_gpu_qparams_t q, u64 *ticket,
						 u64 *status, u64 ntiles)
{
	__shared__ float smid[64];
	__shared__ uint32_t wsum[QROWS + 1][QWARPS];
	__shared__ u64 s_tile, s_base;
	const uint32_t protl = q.nbins + 1;
	float x[QROWS][4];
	uint32_t cnt[QROWS], off[QROWS], mask[QROWS];

	load_mids(smid, q);
	if (threadIdx.x == 0)
		s_tile = atomicAdd(ticket, 1ull);
	__syncthreads();
	const u64 tile = s_tile, t0 = tile * QTILE;
#pragma unroll
	for (int r = 0; r < QROWS; r++) {
		const u64 i = t0 + (u64)r * (QT * 4) + threadIdx.x * 4;
		float gv[4];
		uint32_t lv[4];
		ld_quad<DT, VEC, G>(x[r], gv, w, g, i, n);
		mask[r] = 0;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			lv[e] = level_of<G>(x[r][e], gv[e], smid, q);
			if (i + e < n && lv[e] == protl)
				mask[r] |= 1u << e;
		}
		if (VEC && i + 4 <= n) {
			((uchar4 *)idx)[i / 4] = make_uchar4(lv[0], lv[1], lv[2], lv[3]);
		} else {
#pragma unroll
			for (int e = 0; e < 4; e++)
				if (i + e < n)
					idx[i + e] = (uint8_t)lv[e];
		}
		cnt[r] = __popc(mask[r]);
	}
	const uint32_t total = tile_offsets(off, cnt, wsum);
	if (threadIdx.x == 0) {
		s_base = lookback(status, tile, total);
		if (tile == ntiles - 1)
			*nprot = s_base + total;
	}
	__syncthreads();
	const u64 base = s_base;
#pragma unroll
	for (int r = 0; r < QROWS; r++) {
		u64 o = base + off[r];
#pragma unroll
		for (int e = 0; e < 4; e++)
			if (mask[r] >> e & 1)
				prot[o++] = f32_to_bf16(x[r][e]);
	}
}

static u64 qtiles(u64 n)
{
	return (n + QTILE - 1) / QTILE;
}

extern "C" size_t rckpt_gpu_quantize_temp_bytes(uint64_t n)
{
	return 8 * (1 + qtiles(n));
}

static int qparams_ok(const rckpt_gpu_qparams_t *q)
{
	return q && q->nbins >= 1 && q->nbins <= RCKPT_GPU_MAX_BINS && q->pruned_level <= q->nbins;
}

template <int DT, bool VEC, bool G>
static int launch_quantize(uint8_t *idx, uint16_t *prot, u64 *nprot, const void *w, const float *g, u64 n,
			   const rckpt_gpu_qparams_t *q, u64 *temp, cudaStream_t s)
{
	const u64 nt = qtiles(n);
	k_quantize<DT, VEC, G><<<(unsigned)nt, QT, 0, s>>>(idx, prot, nprot, w, g, n, *q, temp, temp + 1, nt);
	return launched();
}

template <int DT>
static int quantize_dt(uint8_t *idx, uint16_t *prot, u64 *nprot, const void *w, const float *g, u64 n,
		       const rckpt_gpu_qparams_t *q, u64 *temp, bool vec, cudaStream_t s)
{
	if (g)
		return vec ? launch_quantize<DT, true, true>(idx, prot, nprot, w, g, n, q, temp, s)
			   : launch_quantize<DT, false, true>(idx, prot, nprot, w, g, n, q, temp, s);
	return vec ? launch_quantize<DT, true, false>(idx, prot, nprot, w, g, n, q, temp, s)
		   : launch_quantize<DT, false, false>(idx, prot, nprot, w, g, n, q, temp, s);
}

extern "C" int rckpt_gpu_quantize(uint8_t *d_idx, uint16_t *d_prot, uint64_t *d_nprot, const void *d_w,
				  unsigned dtype, const float *d_g, uint64_t n, const rckpt_gpu_qparams_t *q,
				  void *d_temp, size_t temp_bytes, void *stream)
{
	const cudaStream_t s = ST(stream);
	u64 *temp = (u64 *)d_temp;
	bool vec;
	int rc;

	if (!dtype_ok(dtype) || !qparams_ok(q) || !d_nprot || (n && (!d_idx || !d_prot || !d_w)) ||
	    !aligned(d_temp, 8) || qtiles(n) > 0x7fffffffu)
		return -EINVAL;
	if (temp_bytes < rckpt_gpu_quantize_temp_bytes(n))
		return -ENOSPC;
	if ((rc = err_of(cudaMemsetAsync(d_nprot, 0, 8, s))) ||
	    (rc = err_of(cudaMemsetAsync(d_temp, 0, rckpt_gpu_quantize_temp_bytes(n), s))))
		return rc;
	if (n == 0)
		return 0;
	vec = aligned(d_w, dtype == RCKPT_GPU_F32 ? 16 : 8) && aligned(d_idx, 4) && (!d_g || aligned(d_g, 16));
	switch (dtype) {
	case RCKPT_GPU_F32:
		return quantize_dt<RCKPT_GPU_F32>(d_idx, d_prot, (u64 *)d_nprot, d_w, d_g, n, q, temp, vec, s);
	case RCKPT_GPU_F16:
		return quantize_dt<RCKPT_GPU_F16>(d_idx, d_prot, (u64 *)d_nprot, d_w, d_g, n, q, temp, vec, s);
	default:
		return quantize_dt<RCKPT_GPU_BF16>(d_idx, d_prot, (u64 *)d_nprot, d_w, d_g, n, q, temp, vec, s);
	}
}

// ---------------------------------------------------------------- dequantize

template <int ODT>
__device__ __forceinline__ void st1(void *out, u64 i, float v)
{
	if (ODT == RCKPT_GPU_F32)
		((float *)out)[i] = v;
	else
		((uint16_t *)out)[i] = ODT == RCKPT_GPU_F16 ? f32_to_half(v) : f32_to_bf16(v);
}

template <int ODT, bool VEC>
__global__ __launch_bounds__(QT) void k_dequantize(void *out, int *bad, const uint8_t *idx, u64 n,
						   rckpt_gpu_qparams_t q, const uint16_t *prot, u64 nprot,
						   u64 *ticket, u64 *status, u64 ntiles)
{
	__shared__ float slv[RCKPT_GPU_MAX_BINS + 2];
	__shared__ uint32_t wsum[QROWS + 1][QWARPS];
	__shared__ u64 s_tile, s_base;
	const uint32_t protl = q.nbins + 1;
	uint32_t lv[QROWS][4], cnt[QROWS], off[QROWS], mask[QROWS];
	int badlv = 0;

	if (threadIdx.x < RCKPT_GPU_MAX_BINS + 2)
		slv[threadIdx.x] = q.level[threadIdx.x];
	if (threadIdx.x == 0)
		s_tile = atomicAdd(ticket, 1ull);
	__syncthreads();
	const u64 tile = s_tile, t0 = tile * QTILE;
#pragma unroll
	for (int r = 0; r < QROWS; r++) {
		const u64 i = t0 + (u64)r * (QT * 4) + threadIdx.x * 4;
		if (VEC && i + 4 <= n) {
			const uchar4 v = ((const uchar4 *)idx)[i / 4];
			lv[r][0] = v.x, lv[r][1] = v.y, lv[r][2] = v.z, lv[r][3] = v.w;
		} else {
#pragma unroll
			for (int e = 0; e < 4; e++)
				lv[r][e] = i + e < n ? idx[i + e] : 0;
		}
		mask[r] = 0;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			badlv |= lv[r][e] > protl;
			if (lv[r][e] == protl)
				mask[r] |= 1u << e;
		}
		cnt[r] = __popc(mask[r]);
	}
	if (badlv)
		atomicOr(bad, 1);
	const uint32_t total = tile_offsets(off, cnt, wsum);
	if (threadIdx.x == 0) {
		s_base = lookback(status, tile, total);
		if (tile == ntiles - 1 && s_base + total != nprot)
			atomicOr(bad, 1);
	}
	__syncthreads();
	const u64 base = s_base;
#pragma unroll
	for (int r = 0; r < QROWS; r++) {
		const u64 i = t0 + (u64)r * (QT * 4) + threadIdx.x * 4;
		u64 o = base + off[r];
		float v[4];
#pragma unroll
		for (int e = 0; e < 4; e++) {
			if (lv[r][e] < protl) {
				v[e] = slv[lv[r][e]];
			} else if (lv[r][e] == protl) {
				v[e] = o < nprot ? bf16_to_f32(prot[o]) : 0.0f;
				o++;
			} else {
				v[e] = 0.0f;
			}
		}
		if (ODT == RCKPT_GPU_F32 && VEC && i + 4 <= n) {
			((float4 *)out)[i / 4] = make_float4(v[0], v[1], v[2], v[3]);
		} else {
#pragma unroll
			for (int e = 0; e < 4; e++)
				if (i + e < n)
					st1<ODT>(out, i + e, v[e]);
		}
	}
}

extern "C" size_t rckpt_gpu_dequantize_temp_bytes(uint64_t n)
{
	return 8 * (1 + qtiles(n));
}

template <int ODT>
static int launch_dequantize(void *out, int *bad, const uint8_t *idx, u64 n, const rckpt_gpu_qparams_t *q,
			     const uint16_t *prot, u64 nprot, u64 *temp, bool vec, cudaStream_t s)
{
	const u64 nt = qtiles(n);
	if (vec)
		k_dequantize<ODT, true><<<(unsigned)nt, QT, 0, s>>>(out, bad, idx, n, *q, prot, nprot, temp,
								     temp + 1, nt);
	else
		k_dequantize<ODT, false><<<(unsigned)nt, QT, 0, s>>>(out, bad, idx, n, *q, prot, nprot, temp,
								      temp + 1, nt);
	return launched();
}

extern "C" int rckpt_gpu_dequantize(void *d_out, unsigned out_dtype, int *d_bad, const uint8_t *d_idx,
				    uint64_t n, const rckpt_gpu_qparams_t *q, const uint16_t *d_prot,
				    uint64_t nprot, void *d_temp, size_t temp_bytes, void *stream)
{
	const cudaStream_t s = ST(stream);
	bool vec;
	int rc;

	if (!dtype_ok(out_dtype) || !qparams_ok(q) || !d_bad || (n && (!d_out || !d_idx)) ||
	    (nprot && !d_prot) || !aligned(d_temp, 8) || qtiles(n) > 0x7fffffffu)
		return -EINVAL;
	if (temp_bytes < rckpt_gpu_dequantize_temp_bytes(n))
		return -ENOSPC;
	if ((rc = err_of(cudaMemsetAsync(d_bad, 0, sizeof(int), s))) ||
	    (rc = err_of(cudaMemsetAsync(d_temp, 0, rckpt_gpu_dequantize_temp_bytes(n), s))))
		return rc;
	if (n == 0) // no tile checks the count: nprot must be 0
		return nprot ? err_of(cudaMemsetAsync(d_bad, 1, 1, s)) : 0;
	vec = aligned(d_idx, 4) && aligned(d_out, 16);
	switch (out_dtype) {
	case RCKPT_GPU_F32:
		return launch_dequantize<RCKPT_GPU_F32>(d_out, d_bad, d_idx, n, q, d_prot, nprot, (u64 *)d_temp, vec, s);
	case RCKPT_GPU_F16:
		return launch_dequantize<RCKPT_GPU_F16>(d_out, d_bad, d_idx, n, q, d_prot, nprot, (u64 *)d_temp, vec, s);
	default:
		return launch_dequantize<RCKPT_GPU_BF16>(d_out, d_bad, d_idx, n, q, d_prot, nprot, (u64 *)d_temp, vec, s);
	}
}

// ---------------------------------------------------------------- quality sums

#define QE_TILE 2048
#define QE_LANES 256

static_assert(QE_TILE == 8 * QE_LANES, "a lane adds eight elements of a tile");

// lane[j] += lane[j + s] for s = 128 ... 1, as rckpt_qerr's fold.
__device__ __forceinline__ double fold256(double *lane)
{
#pragma unroll
	for (unsigned s = QE_LANES / 2; s >= 1; s >>= 1) {
		if (threadIdx.x < s)
			lane[threadIdx.x] = __dadd_rn(lane[threadIdx.x], lane[threadIdx.x + s]);
		__syncthreads();
	}
	return lane[0];
}

// One block per tile: lane j adds elements j, j + 256, ... of the tile.
template <int DT, bool G>
__global__ __launch_bounds__(QE_LANES) void k_qerr_tiles(double *tsum, const void *w, const float *g, u64 n,
							 rckpt_gpu_qparams_t q)
{
	__shared__ float smid[64];
	__shared__ float slv[RCKPT_GPU_MAX_BINS + 2];
	__shared__ double a[QE_LANES], b[QE_LANES];
	const u64 t0 = (u64)blockIdx.x * QE_TILE;
	const uint32_t protl = q.nbins + 1;
	double an = 0.0, ad = 0.0;

	load_mids(smid, q);
	if (threadIdx.x < RCKPT_GPU_MAX_BINS + 2)
		slv[threadIdx.x] = q.level[threadIdx.x];
	__syncthreads();
#pragma unroll
	for (int m = 0; m < QE_TILE / QE_LANES; m++) {
		const u64 i = t0 + (u64)m * QE_LANES + threadIdx.x;
		if (i < n) {
			const float x = ld1<DT>(w, i), gv = G ? g[i] : 0.0f;
			const uint32_t v = level_of<G>(x, gv, smid, q);
			const float r = v == protl ? bf16_to_f32(f32_to_bf16(x)) : slv[v];
			const double gg = G ? __dmul_rn((double)gv, (double)gv) : 1.0;
			const double d = __dsub_rn((double)x, (double)r);
			an = __dadd_rn(an, __dmul_rn(__dmul_rn(gg, d), d));
			ad = __dadd_rn(ad, __dmul_rn(__dmul_rn(gg, (double)x), (double)x));
		}
	}
	a[threadIdx.x] = an;
	b[threadIdx.x] = ad;
	__syncthreads();
	const double sa = fold256(a), sb = fold256(b);
	if (threadIdx.x == 0) {
		tsum[2 * blockIdx.x] = sa;
		tsum[2 * blockIdx.x + 1] = sb;
	}
}

// Outer lanes: lane j adds tiles j, j + 256, ... in order; then the fold.
__global__ __launch_bounds__(QE_LANES) void k_qerr_fold(double *out, const double *tsum, u64 ntiles)
{
	__shared__ double a[QE_LANES], b[QE_LANES];
	double an = 0.0, ad = 0.0;
	for (u64 t = threadIdx.x; t < ntiles; t += QE_LANES) {
		an = __dadd_rn(an, tsum[2 * t]);
		ad = __dadd_rn(ad, tsum[2 * t + 1]);
	}
	a[threadIdx.x] = an;
	b[threadIdx.x] = ad;
	__syncthreads();
	const double sa = fold256(a), sb = fold256(b);
	if (threadIdx.x == 0) {
		out[0] = sa;
		out[1] = sb;
	}
}

static u64 qetiles(u64 n)
{
	return (n + QE_TILE - 1) / QE_TILE;
}

extern "C" size_t rckpt_gpu_qerr_temp_bytes(uint64_t n)
{
	return 16 * (qetiles(n) ? qetiles(n) : 1);
}

template <int DT>
static int launch_qerr(double *tsum, const void *w, const float *g, u64 n, const rckpt_gpu_qparams_t *q,
		       cudaStream_t s)
{
	if (g)
		k_qerr_tiles<DT, true><<<(unsigned)qetiles(n), QE_LANES, 0, s>>>(tsum, w, g, n, *q);
	else
		k_qerr_tiles<DT, false><<<(unsigned)qetiles(n), QE_LANES, 0, s>>>(tsum, w, g, n, *q);
	return launched();
}

extern "C" int rckpt_gpu_qerr(double *d_out, const void *d_w, unsigned dtype, const float *d_g, uint64_t n,
			      const rckpt_gpu_qparams_t *q, void *d_temp, size_t temp_bytes, void *stream)
{
	const cudaStream_t s = ST(stream);
	double *tsum = (double *)d_temp;
	int rc = 0;

	if (!dtype_ok(dtype) || !qparams_ok(q) || !d_out || (n && !d_w) || !aligned(d_temp, 8) ||
	    qetiles(n) > 0x7fffffffu)
		return -EINVAL;
	if (temp_bytes < rckpt_gpu_qerr_temp_bytes(n))
		return -ENOSPC;
	if (n == 0)
		return err_of(cudaMemsetAsync(d_out, 0, 16, s)); // +0.0, +0.0
	switch (dtype) {
	case RCKPT_GPU_F32:
		rc = launch_qerr<RCKPT_GPU_F32>(tsum, d_w, d_g, n, q, s);
		break;
	case RCKPT_GPU_F16:
		rc = launch_qerr<RCKPT_GPU_F16>(tsum, d_w, d_g, n, q, s);
		break;
	default:
		rc = launch_qerr<RCKPT_GPU_BF16>(tsum, d_w, d_g, n, q, s);
		break;
	}
	if (rc)
		return rc;
	k_qerr_fold<<<1, QE_LANES, 0, s>>>(d_out, tsum, qetiles(n));
	return launched();
}

// ---------------------------------------------------------------- deltas

__device__ __forceinline__ uint8_t cdelta(uint32_t c, uint32_t p, uint32_t m)
{
	return (uint8_t)(c - p + (c < p ? m : 0));
}

// Base (prev NULL) or plain delta: one element a thread.
__global__ void k_delta_plain(uint8_t *out, int *bad, const uint8_t *cur, unsigned lcur, const uint8_t *prev,
			      unsigned lprev, unsigned m, u64 n)
{
	const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const uint32_t c = cur[i], p = prev ? prev[i] : 0;
	if (c >= lcur || (prev && p >= lprev)) {
		atomicOr(bad, 1);
		return;
	}
	out[i] = prev ? cdelta(c, p, m) : (uint8_t)c;
}

// Rearranged: a stable counting sort by prev. Tiles of 4096; each of the 8
// warps owns 512 consecutive elements of its tile, taken 32 at a time.
#define DT_THREADS 256
#define DT_WARPS (DT_THREADS / 32)
#define DT_TILE 4096
#define DT_WSPAN (DT_TILE / DT_WARPS)

// Per tile, the count of each key, key-major: counts[key * ntiles + tile].
__global__ __launch_bounds__(DT_THREADS) void k_delta_hist(uint32_t *counts, int *bad, const uint8_t *cur,
							   unsigned lcur, const uint8_t *prev, unsigned lprev,
							   u64 n, u64 ntiles)
{
	__shared__ uint32_t h[256];
	const u64 t0 = (u64)blockIdx.x * DT_TILE;
	int b = 0;
	h[threadIdx.x] = 0;
	__syncthreads();
	for (unsigned k = threadIdx.x; k < DT_TILE; k += DT_THREADS) {
		const u64 i = t0 + k;
		if (i >= n)
			break;
		const uint32_t p = prev[i];
		b |= cur[i] >= lcur || p >= lprev;
		if (p < lprev)
			atomicAdd(&h[p], 1u);
	}
	if (b)
		atomicOr(bad, 1);
	__syncthreads();
	if (threadIdx.x < lprev)
		counts[(u64)threadIdx.x * ntiles + blockIdx.x] = h[threadIdx.x];
}

__global__ __launch_bounds__(DT_THREADS) void k_delta_scatter(uint8_t *out, const uint32_t *offsets,
							      const uint8_t *cur, const uint8_t *prev,
							      unsigned lprev, unsigned m, u64 n, u64 ntiles)
{
	__shared__ uint32_t wc[DT_WARPS][256];
	const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const u64 w0 = (u64)blockIdx.x * DT_TILE + (u64)warp * DT_WSPAN;
	const unsigned lt = (1u << lane) - 1;

	for (unsigned k = lane; k < 256; k += 32)
		wc[warp][k] = 0;
	__syncwarp();
	// counts of each key in this warp's span
	for (unsigned st = 0; st < DT_WSPAN; st += 32) {
		const u64 i = w0 + st + lane;
		const uint32_t key = i < n && prev[i] < lprev ? prev[i] : 0x100u; // 0x100: no element
		const unsigned peers = __match_any_sync(0xffffffffu, key);
		if (key < 0x100u && (peers & lt) == 0)
			wc[warp][key] += __popc(peers);
		__syncwarp();
	}
	__syncthreads();
	// each key's start for each warp: the tile's offset, then earlier warps
	{
		const unsigned k = threadIdx.x; // DT_THREADS == 256 keys
		uint32_t run = k < lprev ? offsets[(u64)k * ntiles + blockIdx.x] : 0;
		for (unsigned wv = 0; wv < DT_WARPS; wv++) {
			const uint32_t t = wc[wv][k];
			wc[wv][k] = run;
			run += t;
		}
	}
	__syncthreads();
	for (unsigned st = 0; st < DT_WSPAN; st += 32) {
		const u64 i = w0 + st + lane;
		const bool in = i < n && prev[i] < lprev;
		const uint32_t key = in ? prev[i] : 0x100u;
		const unsigned peers = __match_any_sync(0xffffffffu, key);
		if (in)
			out[wc[warp][key] + __popc(peers & lt)] = cdelta(cur[i], key, m);
		__syncwarp();
		if (in && (peers & lt) == 0)
			wc[warp][key] += __popc(peers);
		__syncwarp();
	}
}

static u64 dtiles(u64 n)
{
	return (n + DT_TILE - 1) / DT_TILE;
}

static size_t delta_scan_bytes(u64 items)
{
	size_t b = 0;
	cub::DeviceScan::ExclusiveSum(NULL, b, (const uint32_t *)NULL, (uint32_t *)NULL, (int64_t)items);
	return b;
}

extern "C" size_t rckpt_gpu_delta_temp_bytes(uint64_t n)
{
	const u64 items = 256 * (dtiles(n) ? dtiles(n) : 1);
	return 2 * align_up(4 * items, 256) + align_up(delta_scan_bytes(items), 256);
}

extern "C" int rckpt_gpu_delta(uint8_t *d_out, int *d_bad, const uint8_t *d_cur, unsigned lcur,
			       const uint8_t *d_prev, unsigned lprev, uint64_t n, int rearrange, void *d_temp,
			       size_t temp_bytes, void *stream)
{
	const cudaStream_t s = ST(stream);
	const unsigned m = d_prev && lprev > lcur ? lprev : lcur;
	const u64 nt = dtiles(n);
	int rc;

	if (!d_bad || lcur == 0 || lcur > 255 || (d_prev && (lprev == 0 || lprev > 255)) ||
	    (n && (!d_out || !d_cur)) || n >= ((u64)1 << 32))
		return -EINVAL;
	if ((rc = err_of(cudaMemsetAsync(d_bad, 0, sizeof(int), s))) || n == 0)
		return rc;
	if (!d_prev || !rearrange) {
		k_delta_plain<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(d_out, d_bad, d_cur, lcur, d_prev, lprev,
									   m, n);
		return launched();
	}
	if (temp_bytes < rckpt_gpu_delta_temp_bytes(n) || !aligned(d_temp, 256))
		return temp_bytes < rckpt_gpu_delta_temp_bytes(n) ? -ENOSPC : -EINVAL;
	{
		const u64 items = (u64)lprev * nt;
		const size_t cb = align_up(4 * 256 * nt, 256);
		uint32_t *counts = (uint32_t *)d_temp, *offsets = (uint32_t *)((char *)d_temp + cb);
		void *st = (char *)d_temp + 2 * cb;
		size_t sb = temp_bytes - 2 * cb;
		k_delta_hist<<<(unsigned)nt, DT_THREADS, 0, s>>>(counts, d_bad, d_cur, lcur, d_prev, lprev, n, nt);
		if ((rc = launched()) ||
		    (rc = err_of(cub::DeviceScan::ExclusiveSum(st, sb, counts, offsets, (int64_t)items, s))))
			return rc;
		k_delta_scatter<<<(unsigned)nt, DT_THREADS, 0, s>>>(d_out, offsets, d_cur, d_prev, lprev, m, n, nt);
		return launched();
	}
}

// ---------------------------------------------------------------- change distance

template <int DT>
__global__ __launch_bounds__(QE_LANES) void k_block_dist(double *out, const void *cur, const float *saved,
							 u64 n, u64 block)
{
	__shared__ double a[QE_LANES];
	const u64 b0 = (u64)blockIdx.x * block;
	const u64 len = n - b0 < block ? n - b0 : block;
	double acc = 0.0;
	for (u64 i = threadIdx.x; i < len; i += QE_LANES) {
		const double d = __dsub_rn((double)ld1<DT>(cur, b0 + i), (double)saved[b0 + i]);
		acc = __dadd_rn(acc, __dmul_rn(d, d));
	}
	a[threadIdx.x] = acc;
	__syncthreads();
	const double sum = fold256(a);
	if (threadIdx.x == 0)
		out[blockIdx.x] = sum;
}

extern "C" int rckpt_gpu_block_dist(double *d_out, const void *d_cur, unsigned dtype, const float *d_saved,
				    uint64_t n, uint64_t block, void *stream)
{
	const cudaStream_t s = ST(stream);
	u64 nb;
	if (!dtype_ok(dtype) || block == 0 || (n && (!d_out || !d_cur || !d_saved)))
		return -EINVAL;
	nb = n / block + (n % block != 0);
	if (nb > 0x7fffffffu)
		return -EINVAL;
	if (nb == 0)
		return 0;
	switch (dtype) {
	case RCKPT_GPU_F32:
		k_block_dist<RCKPT_GPU_F32><<<(unsigned)nb, QE_LANES, 0, s>>>(d_out, d_cur, d_saved, n, block);
		break;
	case RCKPT_GPU_F16:
		k_block_dist<RCKPT_GPU_F16><<<(unsigned)nb, QE_LANES, 0, s>>>(d_out, d_cur, d_saved, n, block);
		break;
	default:
		k_block_dist<RCKPT_GPU_BF16><<<(unsigned)nb, QE_LANES, 0, s>>>(d_out, d_cur, d_saved, n, block);
		break;
	}
	return launched();
}
