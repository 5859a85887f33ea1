/*
 * rckpt_crc32c.h — CRC-32C (Castagnoli), as iSCSI and Ceph use it.
 */
#ifndef RCKPT_CRC32C_H
#define RCKPT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of data[0..len), continuing from crc (0 to start): initial value
 * and final xor 0xffffffff, so crc32c(0, "123456789", 9) == 0xe3069283. Uses
 * the SSE4.2 instruction where the CPU has it. */
uint32_t rckpt_crc32c(uint32_t crc, const void *data, size_t len);

/* The same, always by the portable loop (for tests and odd CPUs). */
uint32_t rckpt_crc32c_sw(uint32_t crc, const void *data, size_t len);

#endif /* RCKPT_CRC32C_H */
