/*
 * rckpt_buf.c — bounded growable buffer.
 */
#include "rckpt_buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rckpt_buf_reserve(rckpt_buf_t *b, size_t n)
{
	size_t max = b->max ? b->max : RCKPT_BUF_DEFAULT_MAX;
	size_t want, cap;
	uint8_t *p;

	if (n > max || b->len > max - n)
		return -EFBIG;
	want = b->len + n;
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < want)
		cap = cap > max / 2 ? max : cap * 2;
	p = realloc(b->p, cap);
	if (p == NULL)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

void *rckpt_grow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *q;
	if (need <= *cap && p != NULL)
		return p;
	while (n < need)
		n = n > SIZE_MAX / 2 ? need : 2 * n;
	if (size == 0 || n > SIZE_MAX / size || (q = realloc(p, n * size)) == NULL)
		return NULL;
	*cap = n;
	return q;
}

int rckpt_buf_append(rckpt_buf_t *b, const void *src, size_t n)
{
	int rc = rckpt_buf_reserve(b, n);
	if (rc == 0 && n) {
		memcpy(b->p + b->len, src, n);
		b->len += n;
	}
	return rc;
}

void rckpt_buf_free(rckpt_buf_t *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
