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

#endif /* RCKPT_BUF_H */
