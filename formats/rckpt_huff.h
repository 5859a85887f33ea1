/*
 * rckpt_huff.h — canonical Huffman coding of 16-bit symbols, code lengths
 * limited to RCKPT_HUFF_MAX_BITS so one table lookup decodes a symbol.
 * Block layout: formats/checkpoint.md, "Huffman block".
 *
 * Decoding takes untrusted bytes (it runs in OSDs): every length is checked,
 * the code must be complete, reads never pass the end. Returns 0 or -EBADMSG.
 */
#ifndef RCKPT_HUFF_H
#define RCKPT_HUFF_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"

#define RCKPT_HUFF_MAX_BITS 12
#define RCKPT_HUFF_MAX_SYMBOLS 4096

/* A split block (formats/checkpoint.md, "Split Huffman block"): the
 * header, then the byte lengths of its first three streams (u32 each),
 * then four streams of codes: symbols [k q, (k + 1) q) for k < 3 and
 * [3 q, n) for the last, q = floor(n / 4), each padded to a byte. A
 * decoder reads the four at once. */
#define RCKPT_HUFF_SPLIT_BYTES 12

/* Appends the Huffman block of syms[0..n), every symbol < nsym, to out
 * (split: a split block). Needs at least two distinct symbols (a stream
 * of one is stored as a constant by the caller): -EINVAL otherwise, and
 * for nsym out of range or a symbol >= nsym. -ENOMEM, -EFBIG. */
int rckpt_huff_encode(rckpt_buf_t *out, const uint16_t *syms, size_t n, unsigned nsym, int split);

/* The code lengths len[0..nsym) a block of symbols of these frequencies
 * gets (as rckpt_huff_encode gives them), and the block's size in bytes
 * (*bytes): what it costs, known before it is coded. -EINVAL with fewer
 * than two symbols present; -ENOMEM. */
int rckpt_huff_plan(uint8_t *len, size_t *bytes, const uint64_t *freq, unsigned nsym);

/* Appends the block of the byte symbols syms[0..n) coded with lengths len
 * (from rckpt_huff_plan over these symbols' frequencies, so that every
 * symbol has a code; alphabet 256); bytes: the block's size as the plan
 * gave it (what is reserved), or 0. -ENOMEM, -EFBIG. */
int rckpt_huff_encode8(rckpt_buf_t *out, const uint8_t *syms, size_t n, const uint8_t len[256],
		       size_t bytes);

/* Decodes exactly n symbols, each < nsym, from the block src[0..len) (the
 * block must fill it, allowing only the zero padding of its last byte). */
int rckpt_huff_decode(uint16_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len);

/* rckpt_huff_decode into bytes: an alphabet of nsym <= 256. */
int rckpt_huff_decode8(uint8_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len);

/* As rckpt_huff_decode and rckpt_huff_decode8, of a split block: each
 * stream must fill its bytes as a block's codes do. */
int rckpt_huff_decode_split(uint16_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len);
int rckpt_huff_decode8_split(uint8_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len);

#endif /* RCKPT_HUFF_H */
