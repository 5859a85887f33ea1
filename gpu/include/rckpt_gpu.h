/*
 * rckpt_gpu.h — the C interface of rckpt's CUDA code. No CUDA type appears
 * here, so the library and its tests build and link with or without the CUDA
 * toolkit (gpu_probe.cu or gpu_probe_none.c provides each call).
 */
#ifndef RCKPT_GPU_H
#define RCKPT_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rckpt_gpu_probe {
	int built_with_cuda;   /* 1 when this build compiled the CUDA code */
	int runtime_version;   /* CUDA runtime linked in, as 1000*major + 10*minor; 0 if none */
	int driver_version;    /* CUDA driver found at run time, same encoding; 0 if none */
	int device_count;      /* usable devices; 0 when there is no driver or device */
	char device_name[128]; /* device 0, or "" */
	int cc_major, cc_minor; /* compute capability of device 0 */
	size_t total_mem;      /* bytes of memory on device 0 */
} rckpt_gpu_probe_t;

/* Fills *out with what this build and this machine offer. Never fails for
 * lack of a device or driver: that is device_count == 0. Returns 0. */
int rckpt_gpu_probe(rckpt_gpu_probe_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RCKPT_GPU_H */
