// gpu_qerr.cu — the quality sums (rckpt_qerr's fixed tiles and folds) and
// the per-block change distance of partial steps (rckpt_block_dist's).
#include "common.cuh"

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
	case RCKPT_DT_F32:
		rc = launch_qerr<RCKPT_DT_F32>(tsum, d_w, d_g, n, q, s);
		break;
	case RCKPT_DT_F16:
		rc = launch_qerr<RCKPT_DT_F16>(tsum, d_w, d_g, n, q, s);
		break;
	default:
		rc = launch_qerr<RCKPT_DT_BF16>(tsum, d_w, d_g, n, q, s);
		break;
	}
	if (rc)
		return rc;
	k_qerr_fold<<<1, QE_LANES, 0, s>>>(d_out, tsum, qetiles(n));
	return launched();
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
	case RCKPT_DT_F32:
		k_block_dist<RCKPT_DT_F32><<<(unsigned)nb, QE_LANES, 0, s>>>(d_out, d_cur, d_saved, n, block);
		break;
	case RCKPT_DT_F16:
		k_block_dist<RCKPT_DT_F16><<<(unsigned)nb, QE_LANES, 0, s>>>(d_out, d_cur, d_saved, n, block);
		break;
	default:
		k_block_dist<RCKPT_DT_BF16><<<(unsigned)nb, QE_LANES, 0, s>>>(d_out, d_cur, d_saved, n, block);
		break;
	}
	return launched();
}
