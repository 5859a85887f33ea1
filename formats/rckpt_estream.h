/*
 * rckpt_estream.h — an entropy-coded stream of symbols: the encoder tries the
 * methods its policy allows and keeps the smallest (formats/checkpoint.md,
 * "Entropy stream"). Decoding takes untrusted bytes.
 */
#ifndef RCKPT_ESTREAM_H
#define RCKPT_ESTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_bytes.h"

/* Methods, as stored. Values are pinned. */
enum rckpt_est_method {
	RCKPT_EST_RAW = 0,   /* symbols as u8 (alphabet <= 256) or u16 */
	RCKPT_EST_CONST = 1, /* one symbol, repeated */
	RCKPT_EST_HUFF = 2,  /* canonical Huffman block */
	RCKPT_EST_ZSTD = 3,  /* a zstd frame of the raw form */
	RCKPT_EST_HUFF4 = 4, /* split Huffman block: four streams (record version 6) */
};

/* A workspace the decoders of one record reuse: the zstd context its
 * frames decompress with (making one costs more than a small frame's
 * decompression). Zero-initialize (RCKPT_ZWS_INIT), set a reader's zws to
 * it, free with rckpt_zws_free; one per thread. Without one, each frame
 * makes and frees its own. */
typedef struct rckpt_zws {
	void *dctx; /* ZSTD_DCtx, made at the first frame */
} rckpt_zws_t;
#define RCKPT_ZWS_INIT { NULL }
void rckpt_zws_free(rckpt_zws_t *w);
/* The zstd frame src[0..len) into dst[0..n): the bytes written, or a zstd
 * error code (ZSTD_isError), through r's workspace when it has one. */
size_t rckpt_zstd_decompress(const rckpt_reader_t *r, void *dst, size_t n, const void *src, size_t len);

/* Policy: which coders the encoder may try (raw and constant always). */
#define RCKPT_EST_TRY_HUFF 1u
#define RCKPT_EST_TRY_ZSTD 2u
#define RCKPT_EST_TRY_ALL (RCKPT_EST_TRY_HUFF | RCKPT_EST_TRY_ZSTD)
/* Huffman coding of at least RCKPT_EST_SPLIT_MIN symbols as a split block
 * (method 4, decoded about twice as fast), never as method 2. */
#define RCKPT_EST_SPLIT 4u
#define RCKPT_EST_SPLIT_MIN 65536u

#define RCKPT_EST_MAX_SYMBOLS 4096 /* alphabet limit */
#define RCKPT_EST_MAX_COUNT 0x7fffffffu /* symbols per stream */

/* Appends the stream of syms[0..n), each < nsym, to out. zstd_level applies
 * when zstd is tried. 0, -EINVAL (bad symbol, n or nsym), -ENOMEM, -EFBIG. */
int rckpt_estream_encode(rckpt_buf_t *out, const uint16_t *syms, size_t n, unsigned nsym,
			 unsigned policy, int zstd_level);

/* Reads one stream from r into syms[0..n): it must hold exactly n symbols,
 * each < nsym. 0 or -EBADMSG (r->err is set too); -ENOMEM. */
int rckpt_estream_decode(uint16_t *syms, size_t n, unsigned nsym, rckpt_reader_t *r);

/* A stream of n byte symbols (alphabet 256): constant when one symbol,
 * else Huffman or raw, whichever is smaller (ties: raw), sized from the
 * symbols' counts before anything is coded (zstd is not tried). 0,
 * -EINVAL (n), -ENOMEM, -EFBIG. */
int rckpt_estream_encode8(rckpt_buf_t *out, const uint8_t *syms, size_t n);

/* rckpt_estream_encode8 in two halves: the method and the stream's size
 * (header included), known before any byte is written; then the stream. */
typedef struct rckpt_est8_plan {
	unsigned method;  /* RCKPT_EST_RAW, _CONST or _HUFF */
	size_t bytes;
	uint8_t len[256]; /* Huffman's code lengths */
} rckpt_est8_plan_t;
int rckpt_estream_plan8(rckpt_est8_plan_t *p, const uint8_t *syms, size_t n);
int rckpt_estream_emit8(rckpt_buf_t *out, const rckpt_est8_plan_t *p, const uint8_t *syms, size_t n);

/* Reads one stream of exactly n symbols of an alphabet of nsym <= 256
 * (any method) into dst[0..n), each checked < nsym (a Huffman code's by
 * its alphabet, raw ones one by one). As rckpt_estream_decode. */
int rckpt_estream_decode8(uint8_t *dst, size_t n, unsigned nsym, rckpt_reader_t *r);

/* The method of the stream that starts at r, without consuming it; -1 if
 * none can be read. For statistics. */
int rckpt_estream_peek_method(const rckpt_reader_t *r);

#endif /* RCKPT_ESTREAM_H */
