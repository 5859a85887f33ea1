/*
 * rckpt_bytes.h — explicit little-endian reads and writes over bounded
 * cursors. No struct is ever cast onto bytes: every field goes through these.
 *
 * A reader or writer carries a sticky error: once a read runs past the end
 * (or a write past the capacity) every later call does nothing and the cursor
 * reports -EBADMSG (reader) or -ERANGE (writer). Callers check once at the end.
 *
 * Pure C11, header-only, no allocation; safe on untrusted input.
 */
#ifndef RCKPT_BYTES_H
#define RCKPT_BYTES_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * The library's reserved error band, shared by every format and by the
 * client's public header (client/include/rckpt.h repeats these values and
 * checks them at compile time). Malformed bytes are -EBADMSG, an errno.
 */
#define RCKPT_FMT_EVERSION (-4201)  /* a version this code does not read */
#define RCKPT_FMT_ECHECKSUM (-4202) /* bytes intact in form, checksum wrong */

typedef struct rckpt_reader {
	const uint8_t *p;
	size_t len; /* bytes in total */
	size_t pos; /* bytes consumed */
	int err;    /* 0 or -EBADMSG */
	struct rckpt_zws *zws; /* decoders' reusable workspace (rckpt_estream.h),
				  owned by whoever set it; NULL: none */
} rckpt_reader_t;

typedef struct rckpt_writer {
	uint8_t *p;
	size_t cap;
	size_t pos;
	int err; /* 0 or -ERANGE */
} rckpt_writer_t;

static inline rckpt_reader_t rckpt_reader(const void *src, size_t len)
{
	rckpt_reader_t r = { (const uint8_t *)src, len, 0, 0, NULL };
	return r;
}

static inline rckpt_writer_t rckpt_writer(void *dst, size_t cap)
{
	rckpt_writer_t w = { (uint8_t *)dst, cap, 0, 0 };
	return w;
}

static inline size_t rckpt_rd_left(const rckpt_reader_t *r)
{
	return r->err ? 0 : r->len - r->pos;
}

/* Returns a pointer to the next n bytes and consumes them, or NULL (and sets
 * the error) when fewer than n remain. */
static inline const uint8_t *rckpt_rd_bytes(rckpt_reader_t *r, size_t n)
{
	const uint8_t *q;
	if (r->err || n > r->len - r->pos) {
		r->err = -EBADMSG;
		return NULL;
	}
	q = r->p + r->pos;
	r->pos += n;
	return q;
}

static inline uint8_t rckpt_rd_u8(rckpt_reader_t *r)
{
	const uint8_t *q = rckpt_rd_bytes(r, 1);
	return q ? q[0] : 0;
}

static inline uint16_t rckpt_rd_u16(rckpt_reader_t *r)
{
	const uint8_t *q = rckpt_rd_bytes(r, 2);
	return q ? (uint16_t)(q[0] | (uint16_t)q[1] << 8) : 0;
}

static inline uint32_t rckpt_rd_u32(rckpt_reader_t *r)
{
	const uint8_t *q = rckpt_rd_bytes(r, 4);
	return q ? (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24 : 0;
}

static inline uint64_t rckpt_rd_u64(rckpt_reader_t *r)
{
	uint64_t lo = rckpt_rd_u32(r);
	uint64_t hi = rckpt_rd_u32(r);
	return lo | hi << 32;
}

/* Reserves n bytes and returns where to write them, or NULL (and sets the
 * error) when they do not fit. */
static inline uint8_t *rckpt_wr_reserve(rckpt_writer_t *w, size_t n)
{
	uint8_t *q;
	if (w->err || n > w->cap - w->pos) {
		w->err = -ERANGE;
		return NULL;
	}
	q = w->p + w->pos;
	w->pos += n;
	return q;
}

static inline void rckpt_wr_bytes(rckpt_writer_t *w, const void *src, size_t n)
{
	uint8_t *q = rckpt_wr_reserve(w, n);
	if (q && n)
		memcpy(q, src, n);
}

static inline void rckpt_wr_u8(rckpt_writer_t *w, uint8_t v)
{
	uint8_t *q = rckpt_wr_reserve(w, 1);
	if (q)
		q[0] = v;
}

static inline void rckpt_wr_u16(rckpt_writer_t *w, uint16_t v)
{
	uint8_t *q = rckpt_wr_reserve(w, 2);
	if (q) {
		q[0] = (uint8_t)v;
		q[1] = (uint8_t)(v >> 8);
	}
}

static inline void rckpt_wr_u32(rckpt_writer_t *w, uint32_t v)
{
	uint8_t *q = rckpt_wr_reserve(w, 4);
	if (q) {
		q[0] = (uint8_t)v;
		q[1] = (uint8_t)(v >> 8);
		q[2] = (uint8_t)(v >> 16);
		q[3] = (uint8_t)(v >> 24);
	}
}

static inline void rckpt_wr_u64(rckpt_writer_t *w, uint64_t v)
{
	rckpt_wr_u32(w, (uint32_t)v);
	rckpt_wr_u32(w, (uint32_t)(v >> 32));
}

/* The bits of a float or double and back (memcpy: no aliasing games). */
static inline uint32_t rckpt_f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline float rckpt_u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint64_t rckpt_d2u(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

static inline double rckpt_u2d(uint64_t u)
{
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* A little-endian u32 at p (which has 4 bytes): trailing checksums. */
static inline uint32_t rckpt_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif /* RCKPT_BYTES_H */
