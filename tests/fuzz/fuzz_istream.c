/*
 * fuzz_istream.c — libFuzzer target: the index-stream decoder (entropy
 * streams, Huffman, run lengths, rearrangement), which runs in the OSDs.
 *
 * Input: u8 lcur, u8 lprev, u8 has_parent, u16 n (LE, capped at 8192), then
 * n parent indices if has_parent (reduced mod lprev), then the stream.
 * Whatever decodes must hold only indices < lcur.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "rckpt_istream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned lcur, lprev, has_parent;
	size_t n, i;
	uint8_t *prev = NULL, *cur;
	rckpt_reader_t r;

	if (size < 5)
		return 0;
	lcur = data[0] ? data[0] : 1;
	lprev = data[1] ? data[1] : 1;
	has_parent = data[2] & 1;
	n = ((size_t)data[3] | (size_t)data[4] << 8) & 8191;
	data += 5;
	size -= 5;
	if (has_parent) {
		if (size < n)
			return 0;
		prev = malloc(n ? n : 1);
		for (i = 0; i < n; i++)
			prev[i] = (uint8_t)(data[i] % lprev);
		data += n;
		size -= n;
	}
	cur = malloc(n ? n : 1);
	r = rckpt_reader(data, size);
	if (rckpt_istream_decode(cur, n, lcur, prev, lprev, &r) == 0)
		for (i = 0; i < n; i++)
			if (cur[i] >= lcur)
				abort();
	free(cur);
	free(prev);
	return 0;
}
