// gpu_qerr.cu — the quality sums (rckpt_qerr's fixed tiles and folds), the
// update error's weights (rckpt_update_weights') and the per-block change
// distance of partial steps (rckpt_block_dist's).
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

// ---------------------------------------------------------------- update error's weights

// One block per tile, as k_qerr_tiles: the weights of its elements, and the
// tile's sum of u^2 (or of 1) in tsum[tile].
template <bool M, bool WM>
__global__ __launch_bounds__(QE_LANES) void k_upd_tiles(double *tsum, float *wv, float *wm, const void *v,
							unsigned vdt, const void *m, unsigned mdt, u64 n,
							double eps, int lin)
{
	__shared__ double a[QE_LANES];
	const u64 t0 = (u64)blockIdx.x * QE_TILE;
	const double e2 = __dmul_rn(eps, eps);
	double acc = 0.0;
#pragma unroll
	for (int r = 0; r < QE_TILE / QE_LANES; r++) {
		const u64 k = t0 + (u64)r * QE_LANES + threadIdx.x;
		if (k < n) {
			const float vf = ld_dt(v, vdt, k);
			const double vv = vf > 0.0f && isfinite(vf) ? (double)vf : 0.0;
			const double sv = __dsqrt_rn(vv), d = __dadd_rn(sv, eps), rho = __ddiv_rn(sv, d);
			const double mant = __dadd_rn(1.0, __dmul_rn((double)(__float_as_uint(vf) & 0x7fffffu), 0x1p-23));
			const double f1 = lin ? (vv > e2 ? vv : e2) : mant;
			const double two_f1 = __dmul_rn(2.0, f1);
			double term = 1.0;
			if (M) {
				const float mf = ld_dt(m, mdt, k);
				const double mm = isfinite(mf) ? (double)mf : 0.0, up = __ddiv_rn(mm, d);
				if (WM)
					wm[k] = __double2float_rn(__ddiv_rn(1.0, d));
				wv[k] = __double2float_rn(__ddiv_rn(__dmul_rn(fabs(up), rho), two_f1));
				term = __dmul_rn(up, up);
			} else {
				wv[k] = __double2float_rn(__ddiv_rn(rho, two_f1));
			}
			acc = __dadd_rn(acc, term);
		}
	}
	a[threadIdx.x] = acc;
	__syncthreads();
	const double sum = fold256(a);
	if (threadIdx.x == 0)
		tsum[blockIdx.x] = sum;
}

// Outer lanes over the tiles' sums, in order; then the fold.
__global__ __launch_bounds__(QE_LANES) void k_upd_fold(double *out, const double *tsum, u64 ntiles)
{
	__shared__ double a[QE_LANES];
	double acc = 0.0;
	for (u64 t = threadIdx.x; t < ntiles; t += QE_LANES)
		acc = __dadd_rn(acc, tsum[t]);
	a[threadIdx.x] = acc;
	__syncthreads();
	const double sum = fold256(a);
	if (threadIdx.x == 0)
		out[0] = sum;
}

extern "C" size_t rckpt_gpu_update_weights_temp_bytes(uint64_t n)
{
	return 8 * (qetiles(n) ? qetiles(n) : 1);
}

extern "C" int rckpt_gpu_update_weights(float *d_wv, float *d_wm, double *d_den, const void *d_v, unsigned vdtype,
					const void *d_m, unsigned mdtype, uint64_t n, double eps, int lin,
					void *d_temp, size_t temp_bytes, void *stream)
{
	const cudaStream_t s = ST(stream);
	double *tsum = (double *)d_temp;
	const unsigned nt = (unsigned)qetiles(n);

	if (!dtype_ok(vdtype) || (d_m && !dtype_ok(mdtype)) || (d_wm && !d_m) || !d_den ||
	    (n && (!d_wv || !d_v)) || !aligned(d_temp, 8) || qetiles(n) > 0x7fffffffu)
		return -EINVAL;
	if (temp_bytes < rckpt_gpu_update_weights_temp_bytes(n))
		return -ENOSPC;
	if (n == 0)
		return err_of(cudaMemsetAsync(d_den, 0, 8, s)); // +0.0
	if (d_m && d_wm)
		k_upd_tiles<true, true><<<nt, QE_LANES, 0, s>>>(tsum, d_wv, d_wm, d_v, vdtype, d_m, mdtype, n, eps, lin);
	else if (d_m)
		k_upd_tiles<true, false><<<nt, QE_LANES, 0, s>>>(tsum, d_wv, NULL, d_v, vdtype, d_m, mdtype, n, eps, lin);
	else
		k_upd_tiles<false, false><<<nt, QE_LANES, 0, s>>>(tsum, d_wv, NULL, d_v, vdtype, NULL, 0, n, eps, lin);
	int rc = launched();
	if (rc)
		return rc;
	k_upd_fold<<<1, QE_LANES, 0, s>>>(d_den, tsum, qetiles(n));
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
