/*
 * fuzz_manifest.c — libFuzzer target: the manifest decoder (clients, and
 * the OSD's verify). Each input is decoded as it is and with its trailing
 * CRC-32C recomputed, so mutations reach the field checks behind it; a
 * version-1 manifest that decodes must re-encode to the same bytes (a
 * newer version with compat 1 decodes too, and re-encodes as version 1),
 * as must a version-3 one that names a stored base.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_crc_fixup.h"
#include "rckpt_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size)
{
	rckpt_manifest_t m;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	uint32_t c;
	int named = 0;

	if (rckpt_manifest_decode(&m, data, size) != 0)
		return;
	if (rckpt_manifest_encode(&b, &m) != 0)
		abort();
	for (c = 0; c < m.nchunks; c++)
		named |= m.chunk[c].base_bytes != 0;
	if ((data[4] == 1 || (data[4] == 3 && data[5] == 3 && named)) &&
	    (b.len != size || memcmp(b.p, data, size) != 0))
		abort();
	for (c = 0; c < m.nchunks; c++) { /* none named: a zero digest */
		static const uint8_t none[32];
		if (m.chunk[c].base_bytes == 0 && memcmp(m.chunk[c].base_sha256, none, 32) != 0)
			abort();
	}
	if (data[4] >= 3 && !named)
		abort(); /* version 3 names a stored base */
	rckpt_buf_free(&b);
	rckpt_manifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed = fuzz_crc_fixed_copy(data, size);

	check(data, size);
	if (fixed)
		check(fixed, size);
	free(fixed);
	return 0;
}
