/*
 * bf16_round.h — what a restore gives back of a norm or a bias (a 1-D
 * tensor, kept as bf16 by default): each value's bf16, round to nearest
 * even, widened again. Written from formats/checkpoint.md's words, not
 * the library's code (finite values).
 */
#ifndef BF16_ROUND_H
#define BF16_ROUND_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void bf16_round(float *v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &v[i], 4);
		u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
		memcpy(&v[i], &u, 4);
	}
}

#endif
