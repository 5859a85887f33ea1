/*
 * rckpt_io_dump.c — rckpt_io over a `rados export` dump (read only), so
 * that a job's checkpoints restore with no cluster at all (formats/store.md,
 * "Restore without the plugin"). The dump is indexed once: every object's
 * name, namespace and omap are kept in memory, its data stays in the file
 * and is read where the index says. There are no object classes in a
 * file: every class call is -EOPNOTSUPP, and the store folds chains here.
 *
 * The dump format (Ceph's src/tools/RadosDump.h): a 16-byte super header
 * (magic ceff ceff, version, header and footer sizes), then sections, each
 * a header (an encoded struct: type and size), the section's encoded
 * struct and a footer, except POOL_BEGIN, OBJECT_END and POOL_END, which
 * are a bare header. An object is OBJECT_BEGIN (its hobject: name,
 * namespace), DATA sections (offset, length, bytes), ATTRS, OMAP_HDR,
 * OMAP sections (key, value pairs), OBJECT_END. Every field is read
 * bounded: a dump is untrusted input.
 *
 * What it costs is what is exported, not what the dump holds: the index
 * keeps, per object, its name and where its DATA and OMAP sections are;
 * an object's omap is read (into one block, its pairs sorted) the first
 * time it is asked for. Objects are found by binary search, omap keys
 * too. An object's DATA must run from 0 without a hole, as `rados export`
 * writes it (its size is then at most the dump's), and its omap is at
 * most OMAP_OBJECT_MAX bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_internal.h"
#include "rckpt_buf.h"

enum { T_OBJECT_BEGIN = 3, T_OBJECT_END = 4, T_DATA = 5, T_ATTRS = 6, T_OMAP_HDR = 7, T_OMAP = 8,
       T_POOL_BEGIN = 10, T_POOL_END = 11 };

#define SECTION_MAX ((uint64_t)256 << 20) /* a section read whole (not DATA) */
#define OMAP_OBJECT_MAX ((uint64_t)512 << 20) /* an object's OMAP sections, in all */
#define HEADER_BYTES 18
#define FOOTER_BYTES 10
#define DATA_HEAD 26 /* a DATA section up to its bytes: struct start, offset, length, u32 */

typedef struct extent {
	uint64_t off, len, at; /* object bytes [off, off + len) at file offset at */
} extent_t;

typedef struct kv {
	const char *key; /* into the object's omap block */
	const uint8_t *val;
	size_t len;
} kv_t;

typedef struct dobj {
	char *ns, *oid;
	uint64_t size;
	extent_t *ext;
	size_t next, capext;
	extent_t *om;     /* its OMAP sections: file offset (at) and size (len) */
	size_t nom, capom;
	uint64_t om_bytes;
	int om_read;      /* kv holds them (or om_err says why not) */
	int om_err;
	uint8_t *block;   /* every key (NUL-ended) and value */
	kv_t *kv;         /* sorted by key */
	size_t nkv;
} dobj_t;

struct rckpt_dump {
	FILE *f;
	dobj_t *o;
	size_t n, cap;
};

typedef struct dio {
	rckpt_io_t io;
	rckpt_dump_t *d;
	char *ns; /* NULL: every namespace */
} dio_t;

#define D(io) (((dio_t *)(io))->d)

/* ---- reading the dump ---- */

static int read_at(FILE *f, void *p, size_t n)
{
	return n == 0 || fread(p, 1, n, f) == n ? 0 : -EBADMSG;
}

/* An encoded struct's start: version, compat, length; the length must fit. */
static int struct_start(rckpt_reader_t *r, uint32_t *len)
{
	(void)rckpt_rd_u8(r);
	(void)rckpt_rd_u8(r);
	*len = rckpt_rd_u32(r);
	return r->err || *len > r->len - r->pos ? -EBADMSG : 0;
}

/* A Ceph string or bufferlist: u32 length, bytes (pointing into r). */
static const uint8_t *blob(rckpt_reader_t *r, uint32_t *len)
{
	const uint8_t *p;
	*len = rckpt_rd_u32(r);
	if (r->err || *len > r->len - r->pos) {
		r->err = -EBADMSG;
		return NULL;
	}
	p = r->p + r->pos;
	r->pos += *len;
	return p;
}

static char *dup_str(const uint8_t *p, uint32_t n)
{
	char *s = malloc((size_t)n + 1);
	if (s) {
		if (n)
			memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

/* OBJECT_BEGIN: the hobject's name and namespace. */
static int object_begin(rckpt_dump_t *d, rckpt_reader_t *r)
{
	uint32_t len, hlen, n;
	const uint8_t *p, *ns;
	size_t end;
	dobj_t *o, *q;
	if (struct_start(r, &len) || struct_start(r, &hlen))
		return -EBADMSG;
	end = r->pos + hlen;
	(void)blob(r, &n); /* key */
	p = blob(r, &len); /* name */
	(void)rckpt_rd_u64(r); /* snap */
	(void)rckpt_rd_u32(r); /* hash */
	(void)rckpt_rd_u8(r);  /* max */
	ns = blob(r, &n);
	if (r->err || r->pos > end || memchr(p, 0, len) || memchr(ns, 0, n))
		return -EBADMSG;
	if ((q = rckpt_grow(d->o, &d->cap, d->n + 1, sizeof(*q))) == NULL)
		return -ENOMEM;
	d->o = q;
	o = &d->o[d->n];
	memset(o, 0, sizeof(*o));
	o->oid = dup_str(p, len);
	o->ns = dup_str(ns, n);
	d->n++;
	return o->oid && o->ns ? 0 : -ENOMEM;
}

/* OMAP: where the section is; its pairs are read when asked for. */
static int omap_at(dobj_t *o, uint64_t size, long at)
{
	if (size > SECTION_MAX || size > OMAP_OBJECT_MAX - o->om_bytes)
		return -EFBIG;
	extent_t *q = rckpt_grow(o->om, &o->capom, o->nom + 1, sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	o->om = q;
	o->om[o->nom].at = (uint64_t)at;
	o->om[o->nom].len = size;
	o->nom++;
	o->om_bytes += size;
	return 0;
}

/* The pairs of one OMAP section (body[0..len)) into block at *fill and
 * kv[*n..]: keys NUL-ended, values as they are. */
static int omap_pairs(dobj_t *o, const uint8_t *body, size_t blen, size_t *fill, size_t *n, size_t capkv)
{
	rckpt_reader_t r = rckpt_reader(body, blen);
	uint32_t len, count, i;
	if (struct_start(&r, &len))
		return -EBADMSG;
	count = rckpt_rd_u32(&r);
	if (r.err || count > (r.len - r.pos) / 8 || count > capkv - *n)
		return -EBADMSG;
	for (i = 0; i < count; i++) {
		uint32_t kl, vl;
		const uint8_t *k = blob(&r, &kl), *v = blob(&r, &vl);
		kv_t *e = &o->kv[(*n)++];
		if (r.err || memchr(k, 0, kl))
			return -EBADMSG;
		memcpy(o->block + *fill, k, kl);
		o->block[*fill + kl] = '\0';
		e->key = (const char *)o->block + *fill;
		*fill += (size_t)kl + 1;
		if (vl)
			memcpy(o->block + *fill, v, vl);
		e->val = o->block + *fill;
		e->len = vl;
		*fill += vl;
	}
	return 0;
}

static int cmp_kv(const void *a, const void *b)
{
	return strcmp(((const kv_t *)a)->key, ((const kv_t *)b)->key);
}

/* An object's omap, read the first time it is asked for: one block (at
 * most its sections' bytes) and a pair per 8 of them at most. */
static int omap_load(rckpt_dump_t *d, dobj_t *o)
{
	size_t fill = 0, n = 0, capkv = (size_t)(o->om_bytes / 8) + 1, k;
	uint8_t *body = NULL;
	int rc = 0;
	if (o->om_read)
		return o->om_err;
	o->om_read = 1;
	o->block = malloc(o->om_bytes ? (size_t)o->om_bytes : 1);
	o->kv = calloc(capkv, sizeof(*o->kv));
	if (o->block == NULL || o->kv == NULL)
		rc = -ENOMEM;
	for (k = 0; k < o->nom && rc == 0; k++) {
		const extent_t *e = &o->om[k];
		if ((body = malloc(e->len ? (size_t)e->len : 1)) == NULL)
			rc = -ENOMEM;
		else if (fseek(d->f, (long)e->at, SEEK_SET) || read_at(d->f, body, (size_t)e->len))
			rc = -EIO;
		else
			rc = omap_pairs(o, body, (size_t)e->len, &fill, &n, capkv);
		free(body);
		body = NULL;
	}
	if (rc) {
		free(o->block);
		free(o->kv);
		o->block = NULL;
		o->kv = NULL;
		n = 0;
	}
	o->nkv = n;
	if (n > 1)
		qsort(o->kv, n, sizeof(kv_t), cmp_kv);
	return o->om_err = rc;
}

/* DATA: where in the file the object's bytes [off, off + len) are; only
 * the section's start is read. */
static int data(rckpt_dump_t *d, dobj_t *o, uint64_t size, long at)
{
	uint8_t h[DATA_HEAD];
	rckpt_reader_t r;
	uint32_t len, bl;
	uint64_t off, n;
	extent_t *e, *q;
	if (size < DATA_HEAD || read_at(d->f, h, DATA_HEAD))
		return -EBADMSG;
	r = rckpt_reader(h, DATA_HEAD);
	(void)rckpt_rd_u8(&r);
	(void)rckpt_rd_u8(&r);
	len = rckpt_rd_u32(&r);
	off = rckpt_rd_u64(&r);
	n = rckpt_rd_u64(&r);
	bl = rckpt_rd_u32(&r);
	/* from 0, without a hole: the object's size is then what the dump
	 * holds of it, never a number a section makes up */
	if (r.err || len != size - 6 || bl != n || n != size - DATA_HEAD || off != o->size)
		return -EBADMSG;
	if ((q = rckpt_grow(o->ext, &o->capext, o->next + 1, sizeof(*q))) == NULL)
		return -ENOMEM;
	o->ext = q;
	e = &o->ext[o->next++];
	e->off = off;
	e->len = n;
	e->at = (uint64_t)at + DATA_HEAD;
	if (off + n > o->size)
		o->size = off + n;
	return fseek(d->f, (long)(size - DATA_HEAD), SEEK_CUR) ? -EBADMSG : 0;
}

static int cmp_name(const char *ns_a, const char *oid_a, const char *ns_b, const char *oid_b)
{
	const int c = strcmp(ns_a, ns_b);
	return c ? c : strcmp(oid_a, oid_b);
}

static int cmp_obj(const void *a, const void *b)
{
	const dobj_t *x = a, *y = b;
	return cmp_name(x->ns, x->oid, y->ns, y->oid);
}

static void dump_free(rckpt_dump_t *d)
{
	size_t i;
	if (d == NULL)
		return;
	for (i = 0; i < d->n; i++) {
		free(d->o[i].kv);
		free(d->o[i].block);
		free(d->o[i].om);
		free(d->o[i].ext);
		free(d->o[i].ns);
		free(d->o[i].oid);
	}
	free(d->o);
	if (d->f)
		fclose(d->f);
	free(d);
}

static int dump_index(rckpt_dump_t *d)
{
	uint8_t sh[16], hb[HEADER_BYTES];
	dobj_t *cur = NULL;
	rckpt_reader_t r;
	int rc = 0, ended = 0;

	if (read_at(d->f, sh, sizeof(sh)))
		return -EBADMSG;
	r = rckpt_reader(sh, sizeof(sh));
	if (rckpt_rd_u32(&r) != 0xffceffceu || rckpt_rd_u32(&r) < 1 || rckpt_rd_u32(&r) != HEADER_BYTES ||
	    rckpt_rd_u32(&r) != FOOTER_BYTES)
		return -EBADMSG;
	while (rc == 0 && !ended) {
		uint32_t len, magic;
		uint8_t type;
		int64_t size;
		uint8_t *body = NULL;
		long at;
		if (read_at(d->f, hb, sizeof(hb)))
			return -EBADMSG; /* no POOL_END */
		r = rckpt_reader(hb, sizeof(hb));
		if (struct_start(&r, &len) || len != 12)
			return -EBADMSG;
		magic = rckpt_rd_u32(&r);
		size = (int64_t)rckpt_rd_u64(&r);
		type = (uint8_t)(magic >> 24);
		if ((magic & 0xffff) != 0xffceu || ((magic >> 16) & 0xff) != type || size < 0)
			return -EBADMSG;
		if (type == T_POOL_BEGIN || type == T_OBJECT_END || type == T_POOL_END) {
			if (size != 0)
				return -EBADMSG;
			if (type == T_OBJECT_END)
				cur = NULL;
			ended = type == T_POOL_END;
			continue;
		}
		at = ftell(d->f);
		if (type == T_DATA) {
			if (cur == NULL)
				return -EBADMSG;
			rc = data(d, cur, (uint64_t)size, at);
		} else if (type == T_OMAP) {
			if (cur == NULL)
				return -EBADMSG;
			if ((rc = omap_at(cur, (uint64_t)size, at)) == 0 && fseek(d->f, (long)size, SEEK_CUR))
				rc = -EBADMSG;
		} else if ((uint64_t)size > SECTION_MAX) {
			return -EFBIG;
		} else if ((body = malloc(size ? (size_t)size : 1)) == NULL) {
			return -ENOMEM;
		} else if ((rc = read_at(d->f, body, (size_t)size)) == 0) {
			r = rckpt_reader(body, (size_t)size);
			if (type == T_OBJECT_BEGIN) {
				if (cur)
					rc = -EBADMSG;
				else if ((rc = object_begin(d, &r)) == 0)
					cur = &d->o[d->n - 1];
			} else if (type != T_ATTRS && type != T_OMAP_HDR) {
				rc = -EBADMSG; /* a PG's sections: an OSD's export, not rados export's */
			}
		}
		free(body);
		if (rc == 0) {
			uint8_t fb[FOOTER_BYTES];
			if (read_at(d->f, fb, sizeof(fb)))
				return -EBADMSG;
			r = rckpt_reader(fb, sizeof(fb));
			if (struct_start(&r, &len) || len != 4 || rckpt_rd_u32(&r) != 0xecffffceu)
				return -EBADMSG;
		}
	}
	if (rc == 0 && d->n > 1) /* found by binary search from here on */
		qsort(d->o, d->n, sizeof(dobj_t), cmp_obj);
	return rc;
}

/* ---- rckpt_io over it ---- */

static dobj_t *find(rckpt_io_t *io, const char *oid)
{
	const dio_t *m = (const dio_t *)io;
	size_t i;
	size_t a = 0, b;
	if (m->ns == NULL)
		return NULL;
	b = m->d->n;
	while (a < b) { /* the first of this name (a dump may hold one twice) */
		i = a + (b - a) / 2;
		if (cmp_name(m->d->o[i].ns, m->d->o[i].oid, m->ns, oid) < 0)
			a = i + 1;
		else
			b = i;
	}
	if (a < m->d->n && cmp_name(m->d->o[a].ns, m->d->o[a].oid, m->ns, oid) == 0)
		return &m->d->o[a];
	return NULL;
}

static int no_class(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		    const void *in, size_t len, rckpt_buf_t *out)
{
	(void)io, (void)oid, (void)cls, (void)method, (void)in, (void)len, (void)out;
	return -EOPNOTSUPP; /* a file runs no object class */
}

static int no_aio_class(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
			const void *in, size_t len, rckpt_buf_t *out, rckpt_aio_t **c)
{
	(void)io, (void)oid, (void)cls, (void)method, (void)in, (void)len, (void)out;
	*c = NULL;
	return -EOPNOTSUPP;
}

static int no_call(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		   const void *in, size_t len, void *out, size_t cap)
{
	(void)io, (void)oid, (void)cls, (void)method, (void)in, (void)len, (void)out, (void)cap;
	return -EOPNOTSUPP;
}

static int no_aio_wait(rckpt_aio_t *c)
{
	(void)c;
	return -EINVAL; /* nothing is ever started */
}

static int d_stat(rckpt_io_t *io, const char *oid, uint64_t *size)
{
	dobj_t *o = find(io, oid);
	if (o == NULL)
		return -ENOENT;
	*size = o->size;
	return 0;
}

static int d_read(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off)
{
	dobj_t *o = find(io, oid);
	size_t k, n;
	if (o == NULL)
		return -ENOENT;
	if (len > INT32_MAX)
		return -EINVAL;
	if (off >= o->size)
		return 0;
	n = o->size - off < len ? (size_t)(o->size - off) : len;
	memset(buf, 0, n); /* a hole reads as zeros */
	for (k = 0; k < o->next; k++) {
		const extent_t *e = &o->ext[k];
		uint64_t a = e->off > off ? e->off : off, b = e->off + e->len < off + n ? e->off + e->len : off + n;
		if (a >= b)
			continue;
		if (fseek(D(io)->f, (long)(e->at + (a - e->off)), SEEK_SET) ||
		    fread((uint8_t *)buf + (a - off), 1, (size_t)(b - a), D(io)->f) != b - a)
			return -EIO;
	}
	return (int)n;
}

static int d_aio_read(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off,
		      void (*done)(void *arg), void *arg, rckpt_aio_t **c)
{
	(void)io, (void)oid, (void)buf, (void)len, (void)off, (void)done, (void)arg;
	*c = NULL;
	return -EOPNOTSUPP; /* datasets are not read from dumps */
}

static int d_omap_list(rckpt_io_t *io, const char *oid, const char *after, const char *prefix,
		       unsigned max, rckpt_io_kv_fn fn, void *arg, int *more)
{
	dobj_t *o = find(io, oid);
	size_t k, pl = prefix ? strlen(prefix) : 0, a = 0, b;
	const char *from = after && (!prefix || strcmp(after, prefix) > 0) ? after : prefix;
	unsigned got = 0;
	int rc;
	*more = 0;
	if (o == NULL)
		return -ENOENT;
	if ((rc = omap_load(D(io), o)))
		return rc;
	b = o->nkv;
	while (from && a < b) { /* the first key at or after where the listing starts */
		k = a + (b - a) / 2;
		if (strcmp(o->kv[k].key, from) < 0)
			a = k + 1;
		else
			b = k;
	}
	for (k = a; k < o->nkv; k++) {
		if (after && strcmp(o->kv[k].key, after) <= 0)
			continue;
		if (pl && strncmp(o->kv[k].key, prefix, pl))
			break; /* sorted: past the prefix's keys */
		if (got == max) {
			*more = 1;
			break;
		}
		if ((rc = fn(arg, o->kv[k].key, o->kv[k].val, o->kv[k].len)))
			return rc;
		got++;
	}
	return 0;
}

static int d_omap_get(rckpt_io_t *io, const char *oid, const char *key, rckpt_buf_t *out)
{
	dobj_t *o = find(io, oid);
	kv_t want, *e;
	int rc;
	if (o == NULL)
		return -ENOENT;
	if ((rc = omap_load(D(io), o)))
		return rc;
	want.key = key;
	e = o->nkv ? bsearch(&want, o->kv, o->nkv, sizeof(kv_t), cmp_kv) : NULL;
	return e ? rckpt_buf_append(out, e->val, e->len) : -ENOENT;
}

static int d_objects(rckpt_io_t *io, int (*fn)(void *arg, const char *oid, const char *ns), void *arg)
{
	const dio_t *m = (const dio_t *)io;
	size_t i;
	int rc;
	for (i = 0; i < m->d->n; i++)
		if ((m->ns == NULL || strcmp(m->ns, m->d->o[i].ns) == 0) &&
		    (rc = fn(arg, m->d->o[i].oid, m->d->o[i].ns)))
			return rc;
	return 0;
}

static int ro_write_full(rckpt_io_t *io, const char *oid, const void *p, size_t len)
{
	(void)io, (void)oid, (void)p, (void)len;
	return -EROFS;
}

static int ro_aio_write_full(rckpt_io_t *io, const char *oid, const void *p, size_t len, rckpt_aio_t **c)
{
	(void)io, (void)oid, (void)p, (void)len;
	*c = NULL;
	return -EROFS;
}

static int ro_remove(rckpt_io_t *io, const char *oid)
{
	(void)io, (void)oid;
	return -EROFS;
}

static int ro_omap_set(rckpt_io_t *io, const char *oid, const char *key, const void *val, size_t len)
{
	(void)io, (void)oid, (void)key, (void)val, (void)len;
	return -EROFS;
}

static int ro_omap_rm(rckpt_io_t *io, const char *oid, const char *key)
{
	(void)io, (void)oid, (void)key;
	return -EROFS;
}

static int ro_omap_rm_range(rckpt_io_t *io, const char *oid, const char *lo, const char *hi)
{
	(void)io, (void)oid, (void)lo, (void)hi;
	return -EROFS;
}

static int ro_lock(rckpt_io_t *io, const char *oid, const char *name, const char *cookie, unsigned s,
		   int renew)
{
	(void)io, (void)oid, (void)name, (void)cookie, (void)s, (void)renew;
	return -EROFS;
}

static int ro_unlock(rckpt_io_t *io, const char *oid, const char *name, const char *cookie)
{
	(void)io, (void)oid, (void)name, (void)cookie;
	return -EROFS;
}

static int ro_exec_locked(rckpt_io_t *io, const char *oid, const char *lock, const char *cookie,
			  const char *cls, const char *method, const void *in, size_t len)
{
	(void)io, (void)oid, (void)lock, (void)cookie, (void)cls, (void)method, (void)in, (void)len;
	return -EROFS;
}

static int ro_lock_holder(rckpt_io_t *io, const char *oid, const char *name, char *cookie, size_t cap,
			  char *client, size_t ccap)
{
	(void)io, (void)oid, (void)name, (void)cookie, (void)cap, (void)client, (void)ccap;
	return -ENOENT; /* a dump holds no locks */
}

static int ro_break_lock(rckpt_io_t *io, const char *oid, const char *name, const char *client,
			 const char *cookie)
{
	(void)io, (void)oid, (void)name, (void)client, (void)cookie;
	return -EROFS;
}

static int d_pool_limits(rckpt_io_t *io, uint64_t *max_object, int *erasure)
{
	(void)io;
	*max_object = 0;
	*erasure = 0;
	return 0;
}

static uint64_t d_client_id(rckpt_io_t *io)
{
	(void)io;
	return 0;
}

static void d_close(rckpt_io_t *io)
{
	if (io) {
		free(((dio_t *)io)->ns);
		free(io);
	}
}

static const rckpt_io_ops_t dump_ops = {
	.exec = no_class,
	.aio_exec = no_aio_class,
	.aio_wait = no_aio_wait,
	.call = no_call,
	.aio_write_full = ro_aio_write_full,
	.aio_read = d_aio_read,
	.stat = d_stat,
	.read = d_read,
	.write_full = ro_write_full,
	.remove = ro_remove,
	.omap_list = d_omap_list,
	.omap_get = d_omap_get,
	.omap_set = ro_omap_set,
	.omap_rm = ro_omap_rm,
	.omap_rm_range = ro_omap_rm_range,
	.objects = d_objects,
	.lock = ro_lock,
	.unlock = ro_unlock,
	.exec_locked = ro_exec_locked,
	.lock_holder = ro_lock_holder,
	.break_lock = ro_break_lock,
	.pool_limits = d_pool_limits,
	.client_id = d_client_id,
	.close = d_close,
};

static int dump_open_ns(void *arg, const char *ns, rckpt_io_t **out)
{
	dio_t *m = calloc(1, sizeof(*m));
	*out = NULL;
	if (m == NULL || (ns && (m->ns = strdup(ns)) == NULL)) {
		free(m);
		return -ENOMEM;
	}
	m->io.ops = &dump_ops;
	m->io.ctx = m;
	m->d = arg;
	*out = &m->io;
	return 0;
}

int rckpt_open_dump(rckpt_t *h, const char *path)
{
	rckpt_dump_t *d;
	int rc;

	rckpt_clear_error(h);
	if (path == NULL || h->io_open)
		return rckpt_fail(h, -EINVAL, __func__, "%s", path ? "the handle is connected already" : "no file");
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return rckpt_fail(h, -ENOMEM, __func__, "out of memory");
	if ((d->f = fopen(path, "rb")) == NULL) {
		rc = -errno;
		free(d);
		return rckpt_fail(h, rc, __func__, "cannot open %s", path);
	}
	if ((rc = dump_index(d)) || (rc = rckpt_set_io(h, dump_open_ns, d, path))) {
		dump_free(d);
		return rckpt_fail(h, rc, __func__, "%s is not a dump that `rados export` writes%s", path,
				  rc == -EFBIG ? " (a section is too large)" : "");
	}
	h->dump = d;
	return 0;
}

void rckpt_dump_close(rckpt_dump_t *d)
{
	dump_free(d);
}
