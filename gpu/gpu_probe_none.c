/*
 * gpu_probe_none.c — rckpt_gpu_probe for builds without the CUDA toolkit.
 */
#include "rckpt_gpu.h"

#include <string.h>

int rckpt_gpu_probe(rckpt_gpu_probe_t *out)
{
	memset(out, 0, sizeof(*out));
	return 0;
}
