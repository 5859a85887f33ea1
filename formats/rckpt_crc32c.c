/*
 * rckpt_crc32c.c — CRC-32C: the SSE4.2 crc32 instruction where present
 * (three streams at once past 12 KiB, with PCLMUL to join them), else a
 * nibble-table loop (slow but short and exact).
 */
#include "rckpt_crc32c.h"

#include <string.h>

/* crc32c of one nibble, reflected polynomial 0x82f63b78. */
static const uint32_t nibble_table[16] = {
	0x00000000u, 0x105ec76fu, 0x20bd8edeu, 0x30e349b1u,
	0x417b1dbcu, 0x5125dad3u, 0x61c69362u, 0x7198540du,
	0x82f63b78u, 0x92a8fc17u, 0xa24bb5a6u, 0xb21572c9u,
	0xc38d26c4u, 0xd3d3e1abu, 0xe330a81au, 0xf36e6f75u,
};

static uint32_t crc32c_portable(uint32_t c, const uint8_t *p, size_t n)
{
	while (n--) {
		c ^= *p++;
		c = (c >> 4) ^ nibble_table[c & 15];
		c = (c >> 4) ^ nibble_table[c & 15];
	}
	return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <wmmintrin.h>

/* Three streams of STRIDE bytes at once (the crc32 instruction's latency
 * is three of its throughput), joined by shifting the first two over the
 * bytes after them: a state c shifted over n zero bytes is crc32(0,
 * clmul(c, K_n)), K_n found by solving that linear map over GF(2) for
 * n = STRIDE and 2 STRIDE (the tests check it against the portable loop). */
#define STRIDE 4096u
#define K_STRIDE 0x18714ea86ull
#define K_2STRIDE 0x54a86326ull

__attribute__((target("sse4.2,pclmul"))) static uint64_t crc_shift(uint64_t c, uint64_t k)
{
	const __m128i x = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)c), _mm_cvtsi64_si128((long long)k), 0);
	return __builtin_ia32_crc32di(0, (unsigned long long)_mm_cvtsi128_si64(x));
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c64 = c;
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}

__attribute__((target("sse4.2,pclmul"))) static uint32_t crc32c_sse42_3(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c0 = c;
	while (n >= 3 * STRIDE) {
		uint64_t c1 = 0, c2 = 0, v0, v1, v2;
		size_t i;
		for (i = 0; i < STRIDE; i += 8) {
			memcpy(&v0, p + i, 8);
			memcpy(&v1, p + STRIDE + i, 8);
			memcpy(&v2, p + 2 * STRIDE + i, 8);
			c0 = __builtin_ia32_crc32di(c0, v0);
			c1 = __builtin_ia32_crc32di(c1, v1);
			c2 = __builtin_ia32_crc32di(c2, v2);
		}
		c0 = crc_shift(c0, K_2STRIDE) ^ crc_shift(c1, K_STRIDE) ^ c2;
		p += 3 * STRIDE;
		n -= 3 * STRIDE;
	}
	return crc32c_sse42((uint32_t)c0, p, n);
}

static int have_sse42(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("sse4.2");
}

static int have_pclmul(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("pclmul");
}
#endif

uint32_t rckpt_crc32c(uint32_t crc, const void *data, size_t len)
{
	uint32_t c = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
	if (len >= 3 * STRIDE && have_sse42() && have_pclmul())
		return ~crc32c_sse42_3(c, (const uint8_t *)data, len);
	if (have_sse42())
		return ~crc32c_sse42(c, (const uint8_t *)data, len);
#endif
	return ~crc32c_portable(c, (const uint8_t *)data, len);
}

uint32_t rckpt_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
	return ~crc32c_portable(~crc, (const uint8_t *)data, len);
}
