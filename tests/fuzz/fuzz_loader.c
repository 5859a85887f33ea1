/*
 * fuzz_loader.c — libFuzzer target: the locality-aware loader's parser of
 * the exchange messages peers send (rckpt_loader_parse_items). The first
 * byte gives how many items are wanted (0..8), the rest is the message;
 * the wanted ids are 1, 8, 15, ... Whatever the bytes, it must not crash
 * or read out of bounds, and a message it accepts must be exactly the
 * wanted items, each inside the message, back to back, filling it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_pcr.h"
#include "rckpt_pcr_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rckpt_pcr_jpeg_t it[8];
	uint32_t want[8];
	const uint8_t *p;
	uint8_t *m;
	unsigned n, k;
	size_t len;

	if (size < 1)
		return 0;
	n = data[0] % 9;
	len = size - 1;
	for (k = 0; k < n; k++)
		want[k] = 1 + 7 * k;
	if ((m = malloc(len ? len : 1)) == NULL) /* exact size: ASan sees overreads */
		return 0;
	memcpy(m, data + 1, len);
	if (rckpt_loader_parse_items(m, len, want, n, it) == 0) {
		p = m + 4;
		for (k = 0; k < n; k++) {
			p += 16;
			if (it[k].id != want[k] || (const uint8_t *)it[k].name != p || it[k].jpeg_len == 0 ||
			    it[k].name_len > RCKPT_PCR_MAX_NAME || it[k].label_len > RCKPT_PCR_MAX_LABEL ||
			    (const uint8_t *)it[k].label != p + it[k].name_len ||
			    it[k].jpeg != p + it[k].name_len + it[k].label_len)
				abort();
			p = it[k].jpeg + it[k].jpeg_len;
		}
		if (p != m + len)
			abort();
	}
	free(m);
	return 0;
}
