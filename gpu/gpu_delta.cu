// gpu_delta.cu — cyclic deltas of levels, plain and rearranged per
// bucket (the record encoder's twin).
#include "common.cuh"

#include <cub/device/device_scan.cuh>

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
