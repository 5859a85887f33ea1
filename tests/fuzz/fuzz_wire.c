/*
 * fuzz_wire.c — libFuzzer target: the cls frame and version-reply decoder
 * (runs in clients; the same framing code runs in the OSDs). Whatever the
 * decoder accepts must re-encode without error.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "rckpt_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v;
	rckpt_frame_t f;
	size_t n;

	(void)rckpt_frame_open(&f, data, size, RCKPT_MSG_VERSION_REPLY, RCKPT_WIRE_VERSION);
	if (rckpt_wire_version_decode(&v, data, size) == 0 &&
	    rckpt_wire_version_encode(out, sizeof(out), &n, &v) != 0)
		abort(); /* a decoded reply the encoder refuses: a real bug */
	return 0;
}
