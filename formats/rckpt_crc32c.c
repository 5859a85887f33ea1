/*
 * rckpt_crc32c.c — CRC-32C: the SSE4.2 crc32 instruction where present,
 * else a nibble-table loop (slow but short and exact).
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

static int have_sse42(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("sse4.2");
}
#endif

uint32_t rckpt_crc32c(uint32_t crc, const void *data, size_t len)
{
	uint32_t c = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
	if (have_sse42())
		return ~crc32c_sse42(c, (const uint8_t *)data, len);
#endif
	return ~crc32c_portable(c, (const uint8_t *)data, len);
}

uint32_t rckpt_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
	return ~crc32c_portable(~crc, (const uint8_t *)data, len);
}
