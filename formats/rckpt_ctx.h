/*
 * rckpt_ctx.h — the context-coded form of a rearranged delta index stream
 * (stage CTX, formats/checkpoint.md "Index stream"): the symbols of each
 * parent level's group coded by one rANS stream, each group with its own
 * static frequency table. The group is the context: a level's neighbours
 * move differently from the pruned level's or an edge bin's.
 *
 * Decoding takes untrusted bytes and costs at most a constant times the
 * symbols it writes plus the bytes it reads: 0, -EBADMSG, -ENOMEM.
 */
#ifndef RCKPT_CTX_H
#define RCKPT_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_bytes.h"

#define RCKPT_CTX_SCALE_BITS 12 /* frequencies of a table sum to 4096 */

/* Appends the CTX body (u32 length, the tables, the rANS bytes) of the
 * grouped symbols e[0..n): group g is the next cnt[g] symbols, g <
 * ngroups, each symbol < m (2..255). 0, -EINVAL, -ENOMEM. */
int rckpt_ctx_encode(rckpt_buf_t *out, const uint8_t *e, const size_t *cnt, unsigned ngroups,
		     unsigned m);

/* Reads a CTX body from r into e[0..sum cnt). */
int rckpt_ctx_decode(uint8_t *e, const size_t *cnt, unsigned ngroups, unsigned m, rckpt_reader_t *r);

#endif /* RCKPT_CTX_H */
