/*
 * rckpt_wire_fields.c — one encoder, decoder and validity check for every
 * message described by a field table (rckpt_wire_fields.h).
 */
#include "rckpt_wire_fields.h"

#include <errno.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_wire.h"

#define ELEM_MAX 64 /* bytes of a list element's struct */

/* Bytes of a length or count prefix, or of a u32 on the wire: 1, 2 or 4. */
static unsigned width_of(const rckpt_wire_field_t *f)
{
	return f->width == 1 || f->width == 2 ? f->width : 4;
}

/* The most a prefix of the field's width holds. */
static uint64_t width_max(const rckpt_wire_field_t *f)
{
	return width_of(f) == 1 ? UINT8_MAX : width_of(f) == 2 ? UINT16_MAX : UINT32_MAX;
}

/* The most a field may hold: its table's max, never more than its kind
 * and width can carry (so that nothing is cut short on the wire). */
static uint64_t field_max(const rckpt_wire_field_t *f)
{
	uint64_t full;
	switch (f->kind) {
	case RCKPT_WF_U8:
		full = UINT8_MAX;
		break;
	case RCKPT_WF_U16:
		full = UINT16_MAX;
		break;
	case RCKPT_WF_U64:
	case RCKPT_WF_ARRAY: /* its capacity */
		full = UINT64_MAX;
		break;
	default: /* u32, i32, a length or a count */
		full = width_max(f);
	}
	return f->max && f->max < full ? f->max : full;
}

static const void *at(const void *m, const rckpt_wire_field_t *f)
{
	return (const uint8_t *)m + f->offset;
}

static void *at_mut(void *m, const rckpt_wire_field_t *f)
{
	return (uint8_t *)m + f->offset;
}

static uint64_t get_int(const void *m, const rckpt_wire_field_t *f)
{
	const void *p = at(m, f);
	switch (f->kind) {
	case RCKPT_WF_U8:
		return *(const uint8_t *)p;
	case RCKPT_WF_U16:
		return *(const uint16_t *)p;
	case RCKPT_WF_U32:
		return *(const uint32_t *)p;
	case RCKPT_WF_I32:
		return (uint32_t) * (const int32_t *)p;
	default:
		return *(const uint64_t *)p;
	}
}

static void set_int(void *m, const rckpt_wire_field_t *f, uint64_t v)
{
	void *p = at_mut(m, f);
	switch (f->kind) {
	case RCKPT_WF_U8:
		*(uint8_t *)p = (uint8_t)v;
		break;
	case RCKPT_WF_U16:
		*(uint16_t *)p = (uint16_t)v;
		break;
	case RCKPT_WF_U32:
		*(uint32_t *)p = (uint32_t)v;
		break;
	case RCKPT_WF_I32:
		*(int32_t *)p = (int32_t)(uint32_t)v;
		break;
	default:
		*(uint64_t *)p = v;
	}
}

/* The first field of a sorted list's element is its key (a u64). */
static uint64_t key_of(const rckpt_wire_msg_t *e, const void *x)
{
	return get_int(x, &e->fields[0]);
}

static int in_range(const rckpt_wire_field_t *f, uint64_t v)
{
	return v >= f->min && v <= field_max(f);
}

/* The elements of a list to encode (host structs). */
static int host_list_valid(const rckpt_wire_field_t *f, const rckpt_wire_list_t *l)
{
	const rckpt_wire_msg_t *e = f->elem;
	uint32_t i;
	for (i = 0; i < l->n; i++) {
		const void *x = (const uint8_t *)l->v + (size_t)i * e->size;
		if (rckpt_wire_valid(e, x) ||
		    (i && (f->flags & RCKPT_WF_SORTED) &&
		     key_of(e, x) <= key_of(e, (const uint8_t *)x - e->size)))
			return -EINVAL;
	}
	return 0;
}

/* A string's length (never reading past its capacity) and alphabet. */
static int str_valid(const rckpt_wire_field_t *f, const char *s)
{
	size_t n = 0;
	while (n <= f->max && s[n] != '\0')
		n++;
	if (!in_range(f, n))
		return -EINVAL;
	while (n--) {
		const unsigned char c = (unsigned char)s[n];
		if ((f->flags & RCKPT_WF_PRINTABLE) ? c < 0x20 || c > 0x7e
						    : !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
							c == '_' || c == '-'))
			return -EINVAL;
	}
	return 0;
}

static uint64_t array_count(const rckpt_wire_msg_t *d, const void *m, const rckpt_wire_field_t *f)
{
	return get_int(m, &d->fields[f->count]);
}

static int array_valid(const rckpt_wire_msg_t *d, const void *m, const rckpt_wire_field_t *f)
{
	uint64_t i, n = array_count(d, m, f);
	if (n > f->max)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (rckpt_wire_valid(f->elem, (const uint8_t *)at(m, f) + i * f->elem->size))
			return -EINVAL;
	return 0;
}

int rckpt_wire_valid(const rckpt_wire_msg_t *d, const void *m)
{
	unsigned i;
	for (i = 0; i < d->nfields; i++) {
		const rckpt_wire_field_t *f = &d->fields[i];
		if (f->kind == RCKPT_WF_STR) {
			if (str_valid(f, at(m, f)))
				return -EINVAL;
		} else if (f->kind == RCKPT_WF_ARRAY) {
			if (array_valid(d, m, f))
				return -EINVAL;
		} else if (f->kind == RCKPT_WF_BLOB) {
			const rckpt_blob_t *b = at(m, f);
			if (!in_range(f, b->len) || (b->len && b->p == NULL))
				return -EINVAL;
		} else if (f->kind == RCKPT_WF_LIST) {
			/* a decoded list (p) was checked whole when it was read */
			const rckpt_wire_list_t *l = at(m, f);
			if (!in_range(f, l->n) || f->elem->size > ELEM_MAX || (l->n && l->p == NULL && l->v == NULL) ||
			    (l->p == NULL && l->n && host_list_valid(f, l)))
				return -EINVAL;
		} else if (!in_range(f, get_int(m, f))) {
			return -EINVAL;
		}
	}
	return d->rule ? d->rule(m) : 0;
}

/* ---- writing ---- */

static int write_fields(rckpt_buf_t *out, const rckpt_wire_msg_t *d, const void *m)
{
	unsigned i;
	uint64_t k;
	int rc = 0;
	for (i = 0; i < d->nfields && rc == 0; i++) {
		const rckpt_wire_field_t *f = &d->fields[i];
		if (f->kind != RCKPT_WF_ARRAY) {
			rc = rckpt_wire_put_field(out, f, m);
			continue;
		}
		for (k = 0; k < array_count(d, m, f) && rc == 0; k++)
			rc = write_fields(out, f->elem, (const uint8_t *)at(m, f) + k * f->elem->size);
	}
	return rc;
}

/* A length or count of `width` bytes. */
static int put_n(rckpt_buf_t *out, const rckpt_wire_field_t *f, uint64_t n)
{
	switch (width_of(f)) {
	case 1:
		return rckpt_buf_put_u8(out, (uint8_t)n);
	case 2:
		return rckpt_buf_put_u16(out, (uint16_t)n);
	default:
		return rckpt_buf_put_u32(out, (uint32_t)n);
	}
}

static uint64_t rd_n(rckpt_reader_t *r, const rckpt_wire_field_t *f)
{
	switch (width_of(f)) {
	case 1:
		return rckpt_rd_u8(r);
	case 2:
		return rckpt_rd_u16(r);
	default:
		return rckpt_rd_u32(r);
	}
}

int rckpt_wire_put_field(rckpt_buf_t *out, const rckpt_wire_field_t *f, const void *m)
{
	const rckpt_blob_t *b;
	const rckpt_wire_list_t *l;
	uint32_t i;
	size_t n;
	int rc;

	switch (f->kind) {
	case RCKPT_WF_U8:
		return rckpt_buf_put_u8(out, (uint8_t)get_int(m, f));
	case RCKPT_WF_U16:
		return rckpt_buf_put_u16(out, (uint16_t)get_int(m, f));
	case RCKPT_WF_STR:
		for (n = 0; n <= f->max && ((const char *)at(m, f))[n] != '\0'; n++)
			;
		if (n > field_max(f))
			return -EINVAL;
		rc = put_n(out, f, n);
		return rc ? rc : rckpt_buf_append(out, at(m, f), n);
	case RCKPT_WF_U32:
	case RCKPT_WF_I32:
		return put_n(out, f, get_int(m, f)); /* width bytes (0: 4) */
	case RCKPT_WF_U64:
		return rckpt_buf_put_u64(out, get_int(m, f));
	case RCKPT_WF_BLOB:
		b = at(m, f);
		if (b->len > field_max(f) || (b->len && b->p == NULL))
			return -EINVAL;
		rc = put_n(out, f, b->len);
		return rc || b->len == 0 ? rc : rckpt_buf_append(out, b->p, b->len);
	case RCKPT_WF_ARRAY:
		return -EINVAL; /* written by write_fields, which knows its count */
	default:
		l = at(m, f);
		if (l->n > field_max(f))
			return -EINVAL;
		rc = put_n(out, f, l->n);
		if (rc || l->n == 0)
			return rc;
		if (l->p)
			return rckpt_buf_append(out, l->p, l->bytes);
		for (i = 0; i < l->n && rc == 0; i++)
			rc = write_fields(out, f->elem, (const uint8_t *)l->v + (size_t)i * f->elem->size);
		return rc;
	}
}

int rckpt_wire_begin(rckpt_buf_t *out, const rckpt_wire_msg_t *d, size_t *at_)
{
	return rckpt_frame_buf_begin(out, d->type, d->version, d->compat, at_);
}

int rckpt_wire_encode(rckpt_buf_t *out, const rckpt_wire_msg_t *d, const void *m)
{
	size_t hdr;
	int rc;
	if (rckpt_wire_valid(d, m))
		return -EINVAL;
	if (d->type == 0)
		return write_fields(out, d, m);
	rc = rckpt_wire_begin(out, d, &hdr);
	return rckpt_frame_buf_end(out, hdr, rc ? rc : write_fields(out, d, m));
}

/* ---- reading ---- */

static int read_fields(rckpt_reader_t *r, const rckpt_wire_msg_t *d, void *m, unsigned version);

/* A list: its count, then each element read, checked and (sorted) in
 * order; the list points at their bytes. Work is bounded by the bytes. */
static int read_list(rckpt_reader_t *r, const rckpt_wire_field_t *f, rckpt_wire_list_t *l)
{
	const rckpt_wire_msg_t *e = f->elem;
	union {
		max_align_t align;
		unsigned char b[ELEM_MAX];
	} tmp;
	uint64_t prev = 0;
	size_t start;
	uint32_t i, n = (uint32_t)rd_n(r, f);

	if (r->err || !in_range(f, n) || e->size > sizeof(tmp.b))
		return -EBADMSG;
	start = r->pos;
	for (i = 0; i < n; i++) {
		memset(tmp.b, 0, sizeof(tmp.b));
		if (read_fields(r, e, tmp.b, 1) || rckpt_wire_valid(e, tmp.b))
			return -EBADMSG;
		if ((f->flags & RCKPT_WF_SORTED) && i && key_of(e, tmp.b) <= prev)
			return -EBADMSG;
		prev = key_of(e, tmp.b);
	}
	l->p = n ? r->p + start : NULL;
	l->bytes = r->pos - start;
	l->n = n;
	return 0;
}

/* A string into its char array: its length checked before it is copied. */
static int read_str(rckpt_reader_t *r, const rckpt_wire_field_t *f, char *dst)
{
	uint64_t n = rd_n(r, f);
	const uint8_t *p = rckpt_rd_bytes(r, (size_t)n);
	if (p == NULL || n > f->max || memchr(p, '\0', (size_t)n)) /* a NUL is in no alphabet */
		return -EBADMSG;
	memcpy(dst, p, (size_t)n);
	dst[n] = '\0';
	return 0;
}

/* An array: as many elements as its count field (already read) says, at
 * most its capacity. */
static int read_array(rckpt_reader_t *r, const rckpt_wire_msg_t *d, const rckpt_wire_field_t *f,
		      void *m)
{
	uint64_t k, n = array_count(d, m, f);
	if (n > f->max)
		return -EBADMSG;
	for (k = 0; k < n; k++)
		if (read_fields(r, f->elem, (uint8_t *)at_mut(m, f) + k * f->elem->size, 1))
			return -EBADMSG;
	return 0;
}

static int read_fields(rckpt_reader_t *r, const rckpt_wire_msg_t *d, void *m, unsigned version)
{
	unsigned i;
	for (i = 0; i < d->nfields; i++) {
		const rckpt_wire_field_t *f = &d->fields[i];
		rckpt_blob_t *b;
		if (f->since > version) { /* a blob a frame lacks is empty (zeroed) */
			if (f->kind != RCKPT_WF_BLOB)
				set_int(m, f, f->absent);
			continue;
		}
		switch (f->kind) {
		case RCKPT_WF_U8:
			set_int(m, f, rckpt_rd_u8(r));
			break;
		case RCKPT_WF_U16:
			set_int(m, f, rckpt_rd_u16(r));
			break;
		case RCKPT_WF_STR:
			if (read_str(r, f, at_mut(m, f)))
				return -EBADMSG;
			break;
		case RCKPT_WF_ARRAY:
			if (read_array(r, d, f, m))
				return -EBADMSG;
			break;
		case RCKPT_WF_U32:
		case RCKPT_WF_I32:
			set_int(m, f, rd_n(r, f));
			break;
		case RCKPT_WF_U64:
			set_int(m, f, rckpt_rd_u64(r));
			break;
		case RCKPT_WF_BLOB:
			b = at_mut(m, f);
			b->len = (size_t)rd_n(r, f);
			b->p = rckpt_rd_bytes(r, b->len);
			if (b->p == NULL)
				b->len = 0;
			break;
		default:
			if (read_list(r, f, at_mut(m, f)))
				return -EBADMSG;
		}
		if (r->err)
			return -EBADMSG;
	}
	return 0;
}

int rckpt_wire_decode(const rckpt_wire_msg_t *d, void *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	rckpt_frame_t f;
	unsigned version = 1;
	int rc;

	memset(m, 0, d->size);
	if (d->type) {
		rc = rckpt_frame_open(&f, src, len, d->type, d->newest);
		if (rc)
			return rc;
		if (f.version < d->oldest)
			return -EBADMSG;
		version = f.version;
		r = rckpt_reader(f.payload, f.len);
	} else {
		r = rckpt_reader(src, len);
	}
	if (read_fields(&r, d, m, version) || (d->type == 0 && rckpt_rd_left(&r)) ||
	    rckpt_wire_valid(d, m)) {
		memset(m, 0, d->size);
		return -EBADMSG;
	}
	return 0;
}

void rckpt_wire_cursor_init(rckpt_wire_cursor_t *c, const rckpt_wire_field_t *f,
			    const rckpt_wire_list_t *l)
{
	memset(c, 0, sizeof(*c));
	c->elem = f->elem;
	c->p = l->p;
	c->bytes = l->bytes;
	c->n = l->n;
}

int rckpt_wire_cursor_next(rckpt_wire_cursor_t *c, void *elem)
{
	rckpt_reader_t r;
	if (c->i >= c->n)
		return 0;
	r = rckpt_reader(c->p, c->bytes);
	r.pos = c->pos;
	memset(elem, 0, c->elem->size);
	if (read_fields(&r, c->elem, elem, 1))
		return -EBADMSG; /* not for a list that was decoded */
	c->pos = r.pos;
	c->i++;
	return 1;
}
