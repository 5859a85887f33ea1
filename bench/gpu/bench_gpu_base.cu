// bench_gpu_base.cu — the baselines bench_gpu measures rckpt's kernels
// against, in the same run on the same data: a threshold by sorting (what
// torch.quantile and CuPy's quantile do: sort, then index), and a
// straightforward k-means (Lloyd) on the raw values. Not part of the
// library.
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <stdint.h>

extern "C" {
size_t bench_sort_temp_bytes(uint64_t n);
int bench_sort_quantiles(float *out, const float *d_w, uint64_t n, const double *q, unsigned nq, void *d_temp,
			 size_t temp_bytes, void *stream);
int bench_kmeans_raw(float *centroids, const float *d_w, uint64_t n, unsigned k, unsigned iters, void *d_temp,
		     void *stream);
size_t bench_kmeans_temp_bytes(unsigned k);
}

static __global__ void k_abs(float *o, const float *w, uint64_t n)
{
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		o[i] = fabsf(w[i]);
}

static size_t sort_scratch(uint64_t n)
{
	size_t b = 0;
	cub::DeviceRadixSort::SortKeys(NULL, b, (const float *)NULL, (float *)NULL, (int64_t)n);
	return b;
}

extern "C" size_t bench_sort_temp_bytes(uint64_t n)
{
	return 2 * ((4 * n + 255) / 256 * 256) + sort_scratch(n);
}

// |w|, sorted; then each quantile is one element read back.
extern "C" int bench_sort_quantiles(float *out, const float *d_w, uint64_t n, const double *q, unsigned nq,
				    void *d_temp, size_t temp_bytes, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	const size_t half = (4 * n + 255) / 256 * 256;
	float *a = (float *)d_temp, *b = (float *)((char *)d_temp + half);
	size_t sb = temp_bytes - 2 * half;
	k_abs<<<1024, 256, 0, s>>>(a, d_w, n);
	if (cub::DeviceRadixSort::SortKeys((char *)d_temp + 2 * half, sb, a, b, (int64_t)n, 0, 32, s) != cudaSuccess)
		return -1;
	for (unsigned i = 0; i < nq; i++) {
		uint64_t r = (uint64_t)(q[i] * (double)(n - 1));
		cudaMemcpyAsync(&out[i], b + r, 4, cudaMemcpyDeviceToHost, s);
	}
	return cudaStreamSynchronize(s) == cudaSuccess ? 0 : -1;
}

// Assignment and partial sums: per block in shared memory, then atomics.
static __global__ void k_assign(double *sum, double *cnt, const float *w, uint64_t n, const float *c, unsigned k)
{
	extern __shared__ double sh[]; // [k sums | k counts]
	__shared__ float sc[64];
	for (unsigned j = threadIdx.x; j < 2 * k; j += blockDim.x)
		sh[j] = 0;
	if (threadIdx.x < k)
		sc[threadIdx.x] = c[threadIdx.x];
	__syncthreads();
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
		const float x = w[i];
		unsigned best = 0;
		float bd = fabsf(x - sc[0]);
		for (unsigned j = 1; j < k; j++) {
			const float d = fabsf(x - sc[j]);
			if (d < bd)
				bd = d, best = j;
		}
		atomicAdd(&sh[best], (double)x);
		atomicAdd(&sh[k + best], 1.0);
	}
	__syncthreads();
	for (unsigned j = threadIdx.x; j < k; j += blockDim.x) {
		atomicAdd(&sum[j], sh[j]);
		atomicAdd(&cnt[j], sh[k + j]);
	}
}

static __global__ void k_update(float *c, const double *sum, const double *cnt, unsigned k)
{
	const unsigned j = threadIdx.x;
	if (j < k && cnt[j] > 0)
		c[j] = (float)(sum[j] / cnt[j]);
}

extern "C" size_t bench_kmeans_temp_bytes(unsigned k)
{
	return 16 * k + 4 * k + 256;
}

// Lloyd from the given centroids (in and out), iters rounds.
extern "C" int bench_kmeans_raw(float *centroids, const float *d_w, uint64_t n, unsigned k, unsigned iters,
				void *d_temp, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	double *sum = (double *)d_temp, *cnt = sum + k;
	float *c = (float *)(cnt + k);
	int dev = 0, sms = 1;
	if (k == 0 || k > 64)
		return -1;
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	cudaMemcpyAsync(c, centroids, 4 * k, cudaMemcpyHostToDevice, s);
	for (unsigned it = 0; it < iters; it++) {
		cudaMemsetAsync(sum, 0, 16 * k, s);
		k_assign<<<4 * sms, 512, 16 * k, s>>>(sum, cnt, d_w, n, c, k);
		k_update<<<1, 64, 0, s>>>(c, sum, cnt, k);
	}
	cudaMemcpyAsync(centroids, c, 4 * k, cudaMemcpyDeviceToHost, s);
	return cudaStreamSynchronize(s) == cudaSuccess ? 0 : -1;
}
