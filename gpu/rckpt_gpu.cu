// rckpt_gpu.cu — the device, memory and streams behind rckpt_gpu.h. The
// stages' kernels are beside it: gpu_sketch.cu, gpu_quantize.cu,
// gpu_qerr.cu, gpu_delta.cu (common.cuh holds what they share).
#include "common.cuh"

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

extern "C" int rckpt_gpu_use_device_of(const void *p, int *prev)
{
	cudaPointerAttributes a;
	int rc;
	if (p == NULL || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError();
		return -EFAULT;
	}
	if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
		return -EFAULT;
	if ((rc = err_of(cudaGetDevice(prev))))
		return rc;
	return err_of(cudaSetDevice(a.device));
}

extern "C" int rckpt_gpu_set_device(int d)
{
	return err_of(cudaSetDevice(d));
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
