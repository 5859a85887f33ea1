// gpu_sketch.cu — the magnitude sketch (rckpt_sketch_add's twin) and the
// quantiles read from it.
#include "common.cuh"

#include <cub/block/block_scan.cuh>

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
				const uint32_t ug = __float_as_uint(gv[e]);
				if ((ug & 0x7f800000u) == 0x7f800000u || ug > 0x80000000u)
					ss = sv = -1; // a gradient NaN, Inf or < 0: the element is bad
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
	vec = aligned(d_w, dtype == RCKPT_DT_F32 ? 16 : 8) && (!d_g || aligned(d_g, 16));
	switch (dtype) {
	case RCKPT_DT_F32:
		return vec ? sketch_dt<RCKPT_DT_F32, true>(hv, hs, bd, d_w, d_g, n, mbits, shared, s)
			   : sketch_dt<RCKPT_DT_F32, false>(hv, hs, bd, d_w, d_g, n, mbits, shared, s);
	case RCKPT_DT_F16:
		return vec ? sketch_dt<RCKPT_DT_F16, true>(hv, hs, bd, d_w, d_g, n, mbits, shared, s)
			   : sketch_dt<RCKPT_DT_F16, false>(hv, hs, bd, d_w, d_g, n, mbits, shared, s);
	default:
		return vec ? sketch_dt<RCKPT_DT_BF16, true>(hv, hs, bd, d_w, d_g, n, mbits, shared, s)
			   : sketch_dt<RCKPT_DT_BF16, false>(hv, hs, bd, d_w, d_g, n, mbits, shared, s);
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
		// The buckets' cumulative ranges [cum - c, cum) are disjoint and
		// start above the zero bucket's, so exactly one thread in the
		// whole walk matches a rank not already found: found[] is only
		// written here, never read, until after the loop's last barrier
		// (reading it here raced with that write: compute-sanitizer
		// racecheck on an H100).
		for (unsigned q = 0; q < r.nq; q++)
			if (c && cum > r.rank[q] && cum - c <= r.rank[q]) {
				out[2 * q] = __uint_as_float((k + k0) << shift);
				out[2 * q + 1] = __uint_as_float((k + k0 + 1) << shift);
				found[q] = 2;
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
