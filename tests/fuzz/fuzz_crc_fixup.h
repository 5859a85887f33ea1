/*
 * fuzz_crc_fixup.h — for harnesses of formats that end in a CRC-32C: a copy
 * of the input with the trailing CRC made right, so that mutations reach
 * the decoder's checks behind the checksum. Returns NULL for inputs under
 * 4 bytes; the caller frees the copy.
 */
#ifndef RCKPT_FUZZ_CRC_FIXUP_H
#define RCKPT_FUZZ_CRC_FIXUP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_crc32c.h"

static inline uint8_t *fuzz_crc_fixed_copy(const uint8_t *data, size_t size)
{
	uint8_t *fixed;
	uint32_t crc;

	if (size < 4 || (fixed = malloc(size)) == NULL)
		return NULL;
	memcpy(fixed, data, size);
	crc = rckpt_crc32c(0, fixed, size - 4);
	fixed[size - 4] = (uint8_t)crc;
	fixed[size - 3] = (uint8_t)(crc >> 8);
	fixed[size - 2] = (uint8_t)(crc >> 16);
	fixed[size - 1] = (uint8_t)(crc >> 24);
	return fixed;
}

#endif
