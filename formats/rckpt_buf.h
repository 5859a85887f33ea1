/*
 * rckpt_buf.h — a growable byte buffer with a hard size limit, for encoders
 * whose output size is not known up front (and for cls replies).
 */
#ifndef RCKPT_BUF_H
#define RCKPT_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct rckpt_buf {
	uint8_t *p;  /* malloc'd; NULL while empty */
	size_t len;  /* bytes used */
	size_t cap;  /* bytes allocated */
	size_t max;  /* the most it may hold; 0 means RCKPT_BUF_DEFAULT_MAX */
} rckpt_buf_t;

#define RCKPT_BUF_DEFAULT_MAX ((size_t)1 << 34) /* 16 GiB */
#define RCKPT_BUF_INIT { NULL, 0, 0, 0 }

/* Makes room for n more bytes past len. 0, -ENOMEM, or -EFBIG past max. */
int rckpt_buf_reserve(rckpt_buf_t *b, size_t n);
/* Appends n bytes. Same returns. */
int rckpt_buf_append(rckpt_buf_t *b, const void *src, size_t n);
/* Frees the bytes and empties b (its max stays). */
void rckpt_buf_free(rckpt_buf_t *b);

/* The array p (malloc'd or NULL, room for *cap elements of `size` bytes)
 * with room for at least need (>= 1): p itself when it has it, else p
 * grown (doubling, 16 at least) and *cap set. NULL when memory or size_t
 * runs out: p is then untouched and still the caller's. The one growable
 * array of the project: a list grown a step at a time goes through it. */
void *rckpt_grow(void *p, size_t *cap, size_t need, size_t size);

/* Appends a little-endian integer. Same returns as rckpt_buf_append. */
static inline int rckpt_buf_put_u8(rckpt_buf_t *b, uint8_t v)
{
	return rckpt_buf_append(b, &v, 1);
}

static inline int rckpt_buf_put_u16(rckpt_buf_t *b, uint16_t v)
{
	uint8_t t[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	return rckpt_buf_append(b, t, 2);
}

static inline int rckpt_buf_put_u32(rckpt_buf_t *b, uint32_t v)
{
	uint8_t t[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	return rckpt_buf_append(b, t, 4);
}

static inline int rckpt_buf_put_u64(rckpt_buf_t *b, uint64_t v)
{
	int rc = rckpt_buf_put_u32(b, (uint32_t)v);
	return rc ? rc : rckpt_buf_put_u32(b, (uint32_t)(v >> 32));
}

/* Overwrites 4 bytes at off (already in b) with a little-endian u32. */
static inline void rckpt_buf_set_u32(rckpt_buf_t *b, size_t off, uint32_t v)
{
	b->p[off] = (uint8_t)v;
	b->p[off + 1] = (uint8_t)(v >> 8);
	b->p[off + 2] = (uint8_t)(v >> 16);
	b->p[off + 3] = (uint8_t)(v >> 24);
}

#endif /* RCKPT_BUF_H */
