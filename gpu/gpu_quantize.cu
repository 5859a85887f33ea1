// gpu_quantize.cu — levels and protected values (rckpt_quantize's twin),
// with a chained scan for the protected values' offsets, and their
// inverse (rckpt_dequantize's).
#include "common.cuh"

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
	vec = aligned(d_w, dtype == RCKPT_DT_F32 ? 16 : 8) && aligned(d_idx, 4) && (!d_g || aligned(d_g, 16));
	switch (dtype) {
	case RCKPT_DT_F32:
		return quantize_dt<RCKPT_DT_F32>(d_idx, d_prot, (u64 *)d_nprot, d_w, d_g, n, q, temp, vec, s);
	case RCKPT_DT_F16:
		return quantize_dt<RCKPT_DT_F16>(d_idx, d_prot, (u64 *)d_nprot, d_w, d_g, n, q, temp, vec, s);
	default:
		return quantize_dt<RCKPT_DT_BF16>(d_idx, d_prot, (u64 *)d_nprot, d_w, d_g, n, q, temp, vec, s);
	}
}

// ---------------------------------------------------------------- dequantize

template <int ODT>
__device__ __forceinline__ void st1(void *out, u64 i, float v)
{
	if (ODT == RCKPT_DT_F32)
		((float *)out)[i] = v;
	else
		((uint16_t *)out)[i] = ODT == RCKPT_DT_F16 ? f32_to_half(v) : f32_to_bf16(v);
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
		if (ODT == RCKPT_DT_F32 && VEC && i + 4 <= n) {
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
	case RCKPT_DT_F32:
		return launch_dequantize<RCKPT_DT_F32>(d_out, d_bad, d_idx, n, q, d_prot, nprot, (u64 *)d_temp, vec, s);
	case RCKPT_DT_F16:
		return launch_dequantize<RCKPT_DT_F16>(d_out, d_bad, d_idx, n, q, d_prot, nprot, (u64 *)d_temp, vec, s);
	default:
		return launch_dequantize<RCKPT_DT_BF16>(d_out, d_bad, d_idx, n, q, d_prot, nprot, (u64 *)d_temp, vec, s);
	}
}
