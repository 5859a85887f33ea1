/*
 * mem_obj.h — an object in memory behind rckpt_cls_obj_ops_t, for unit
 * tests and fuzzers of the object-class bodies. mem_obj_call runs a method
 * the way the OSD does: its changes are kept when it returns 0 and dropped
 * when it fails; and, as in the OSD, its reads of data and omap see the
 * object as it was before the method (not its own writes), while stat sees
 * the size it has written. An object the method itself created has no omap
 * to read yet (-ENOENT), as a store without the object answers.
 */
#ifndef RCKPT_MEM_OBJ_H
#define RCKPT_MEM_OBJ_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cls_common.h"

typedef struct mem_kv {
	char *key;
	uint8_t *val;
	size_t len;
} mem_kv_t;

typedef struct mem_obj {
	int exists;
	uint8_t *data;
	size_t size;
	mem_kv_t *kv; /* sorted by key */
	size_t nkv;
	char why[RCKPT_CLS_WHY_MAX]; /* the last failed call's reason, as the OSD would log it */
	int damaged;
	const struct mem_obj *before; /* during a call: the object as the method found it */
	size_t limit;                 /* the OSD's osd_max_object_size (0: none): a method that
					 would pass it fails with -EFBIG, as in the OSD */
	int readonly;                 /* during a read method's call: writes are -EPERM, as in the OSD */
} mem_obj_t;

static char *mem_strdup(const char *k)
{
	size_t n = strlen(k) + 1;
	char *d = malloc(n);
	if (d)
		memcpy(d, k, n);
	return d;
}

static void mem_obj_free(mem_obj_t *m)
{
	size_t i;
	for (i = 0; i < m->nkv; i++) {
		free(m->kv[i].key);
		free(m->kv[i].val);
	}
	free(m->kv);
	free(m->data);
	memset(m, 0, sizeof(*m));
}

static int mem_obj_copy(mem_obj_t *dst, const mem_obj_t *src)
{
	size_t i;
	memset(dst, 0, sizeof(*dst));
	dst->exists = src->exists;
	dst->size = src->size;
	dst->data = malloc(src->size ? src->size : 1);
	dst->kv = calloc(src->nkv ? src->nkv : 1, sizeof(mem_kv_t));
	if (!dst->data || !dst->kv)
		return -ENOMEM;
	if (src->size)
		memcpy(dst->data, src->data, src->size);
	for (i = 0; i < src->nkv; i++) {
		dst->kv[i].key = mem_strdup(src->kv[i].key);
		dst->kv[i].val = malloc(src->kv[i].len ? src->kv[i].len : 1);
		dst->kv[i].len = src->kv[i].len;
		dst->nkv++;
		if (!dst->kv[i].key || !dst->kv[i].val)
			return -ENOMEM;
		if (src->kv[i].len)
			memcpy(dst->kv[i].val, src->kv[i].val, src->kv[i].len);
	}
	return 0;
}

static mem_obj_t *mem_of(rckpt_cls_obj_t *o)
{
	return (mem_obj_t *)o->ctx;
}

/* What a method's data reads see: the object before the method. */
static const mem_obj_t *mem_seen(rckpt_cls_obj_t *o)
{
	const mem_obj_t *m = mem_of(o);
	return m->before ? m->before : m;
}

/* What its omap reads see; NULL: -ENOENT (created by this method, with an
 * omap the store does not have yet). */
static const mem_obj_t *mem_omap_seen(rckpt_cls_obj_t *o)
{
	const mem_obj_t *m = mem_of(o), *b = mem_seen(o);
	if (b != m && !b->exists && m->exists && m->nkv)
		return NULL;
	return b;
}

static int mem_stat(rckpt_cls_obj_t *o, uint64_t *size)
{
	mem_obj_t *m = mem_of(o);
	if (!m->exists)
		return -ENOENT;
	*size = m->size;
	return 0;
}

static int mem_read(rckpt_cls_obj_t *o, uint64_t off, size_t len, rckpt_buf_t *out)
{
	const mem_obj_t *m = mem_seen(o);
	if (!m->exists)
		return -ENOENT;
	if (off >= m->size)
		return 0;
	if (len > m->size - off)
		len = m->size - (size_t)off;
	return rckpt_buf_append(out, m->data + off, len);
}

static int mem_write(rckpt_cls_obj_t *o, uint64_t off, const uint8_t *p, size_t len)
{
	mem_obj_t *m = mem_of(o);
	if (m->readonly)
		return -EPERM;
	size_t end = (size_t)off + len;
	if (end > m->size) {
		uint8_t *d = realloc(m->data, end ? end : 1);
		if (d == NULL)
			return -ENOMEM;
		memset(d + m->size, 0, end - m->size);
		m->data = d;
		m->size = end;
	}
	if (len)
		memcpy(m->data + off, p, len);
	m->exists = 1;
	return 0;
}

static int mem_truncate(rckpt_cls_obj_t *o, uint64_t size)
{
	mem_obj_t *m = mem_of(o);
	if (m->readonly)
		return -EPERM;
	if (size > m->size)
		return mem_write(o, size, NULL, 0);
	m->size = (size_t)size;
	m->exists = 1;
	return 0;
}

static size_t mem_find(const mem_obj_t *m, const char *key, int *found)
{
	size_t a = 0, b = m->nkv;
	while (a < b) {
		size_t c = a + (b - a) / 2;
		int d = strcmp(m->kv[c].key, key);
		if (d == 0) {
			*found = 1;
			return c;
		}
		if (d < 0)
			a = c + 1;
		else
			b = c;
	}
	*found = 0;
	return a;
}

static int mem_omap_get(rckpt_cls_obj_t *o, const char *key, rckpt_buf_t *out)
{
	const mem_obj_t *m = mem_omap_seen(o);
	int found;
	size_t i;
	if (m == NULL)
		return -ENOENT;
	i = mem_find(m, key, &found);
	if (!found)
		return -ENOENT;
	return m->kv[i].len ? rckpt_buf_append(out, m->kv[i].val, m->kv[i].len) : 0;
}

static int mem_omap_set(rckpt_cls_obj_t *o, const char *key, const uint8_t *p, size_t len)
{
	mem_obj_t *m = mem_of(o);
	if (m->readonly)
		return -EPERM;
	int found;
	size_t i = mem_find(m, key, &found);
	uint8_t *v = malloc(len ? len : 1);
	if (v == NULL)
		return -ENOMEM;
	if (len)
		memcpy(v, p, len);
	if (!found) {
		mem_kv_t *kv = realloc(m->kv, (m->nkv + 1) * sizeof(*kv));
		if (kv == NULL) {
			free(v);
			return -ENOMEM;
		}
		m->kv = kv;
		memmove(kv + i + 1, kv + i, (m->nkv - i) * sizeof(*kv));
		kv[i].key = mem_strdup(key);
		kv[i].val = NULL;
		m->nkv++;
	}
	free(m->kv[i].val);
	m->kv[i].val = v;
	m->kv[i].len = len;
	m->exists = 1;
	return 0;
}

static int mem_omap_remove(rckpt_cls_obj_t *o, const char *key)
{
	mem_obj_t *m = mem_of(o);
	if (m->readonly)
		return -EPERM;
	int found;
	size_t i = mem_find(m, key, &found);
	if (!found)
		return -ENOENT;
	free(m->kv[i].key);
	free(m->kv[i].val);
	memmove(m->kv + i, m->kv + i + 1, (m->nkv - i - 1) * sizeof(*m->kv));
	m->nkv--;
	return 0;
}

static int mem_omap_list(rckpt_cls_obj_t *o, const char *start_after, unsigned max,
			 int (*fn)(void *, const char *, const uint8_t *, size_t), void *arg,
			 int *more)
{
	const mem_obj_t *m = mem_omap_seen(o);
	int found;
	size_t i, n = 0;
	*more = 0;
	if (m == NULL)
		return -ENOENT;
	i = mem_find(m, start_after, &found);
	if (found)
		i++;
	*more = 0;
	for (; i < m->nkv; i++, n++) {
		int rc;
		if (n == max) {
			*more = 1;
			break;
		}
		rc = fn(arg, m->kv[i].key, m->kv[i].val, m->kv[i].len);
		if (rc)
			return rc;
	}
	return 0;
}

static int mem_remove(rckpt_cls_obj_t *o)
{
	mem_obj_t *m = mem_of(o);
	if (m->readonly)
		return -EPERM;
	size_t i;
	if (!m->exists)
		return -ENOENT;
	for (i = 0; i < m->nkv; i++) {
		free(m->kv[i].key);
		free(m->kv[i].val);
	}
	free(m->kv);
	free(m->data);
	m->kv = NULL;
	m->nkv = 0;
	m->data = NULL;
	m->size = 0;
	m->exists = 0;
	return 0;
}

static const rckpt_cls_obj_ops_t mem_obj_ops = { mem_stat,	   mem_read,	  mem_write,
						 mem_truncate,	   mem_omap_get,  mem_omap_set,
						 mem_omap_remove, mem_omap_list, mem_remove };

/* Runs fn on m as the OSD would: all of its changes or none. */
static int mem_obj_call(mem_obj_t *m, rckpt_cls_obj_method_fn fn, const uint8_t *in, size_t len,
			rckpt_cls_out_t *out)
{
	mem_obj_t work;
	rckpt_cls_obj_t o;
	int rc = mem_obj_copy(&work, m);
	if (rc) {
		mem_obj_free(&work);
		return rc;
	}
	memset(&o, 0, sizeof(o));
	o.ops = &mem_obj_ops;
	o.ctx = &work;
	work.before = m;
	rc = fn(&o, in, len, out);
	work.before = NULL;
	if (rc == 0 && m->limit && work.size > m->limit)
		rc = -EFBIG;
	if (rc == 0) {
		work.limit = m->limit;
		mem_obj_free(m);
		*m = work;
	} else {
		mem_obj_free(&work);
		memcpy(m->why, o.why, sizeof(m->why));
		m->damaged = o.damaged;
	}
	return rc;
}

#endif /* RCKPT_MEM_OBJ_H */
