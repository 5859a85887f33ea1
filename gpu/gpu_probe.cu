// gpu_probe.cu — what CUDA offers on this machine, asked of the CUDA runtime.
#include "rckpt_gpu.h"

#include <cuda_runtime.h>
#include <string.h>

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
		cudaGetLastError(); // clear the sticky error the failed call left
		return 0;
	}
	out->device_count = n;
	if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
		strncpy(out->device_name, prop.name, sizeof(out->device_name) - 1);
		out->cc_major = prop.major;
		out->cc_minor = prop.minor;
		out->total_mem = prop.totalGlobalMem;
	}
	return 0;
}
