/*
 * mem_io.c — the pool in memory of mem_io.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "mem_io.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cls_rckpt_methods.h"
#include "mem_obj.h"

/* `version` takes no object; the OSD runs it on any. */
static int m_version(rckpt_cls_obj_t *o, const uint8_t *in, size_t len, rckpt_cls_out_t *out)
{
	(void)o;
	return cls_rckpt_version(in, len, out);
}

/* The class methods this pool runs, as cls_rckpt_glue.cc registers them. */
static const struct method {
	const char *cls, *name;
	rckpt_cls_obj_method_fn fn;
	int write;
} METHODS[] = {
	{ "rckpt", "version", m_version, 0 },
	{ "rckpt", "ping", cls_rckpt_ping, 0 },
	{ "rckpt", "append", cls_rckpt_append, 1 },
	{ "rckpt", "materialize", cls_rckpt_materialize, 0 },
	{ "rckpt", "index", cls_rckpt_index, 0 },
	{ "rckpt", "trim", cls_rckpt_trim, 1 },
	{ "rckpt", "tip", cls_rckpt_tip, 0 },
	{ "rckpt", "head", cls_rckpt_head, 0 },
	{ "rckpt", "commit", cls_rckpt_commit, 1 },
	{ "rckpt", "list", cls_rckpt_list, 0 },
	{ "rckpt", "compact", cls_rckpt_compact, 1 },
	{ "rckpt", "verify", cls_rckpt_verify, 0 },
	{ "rckpt", "drop", cls_rckpt_drop, 1 },
	{ "rckpt", "pin", cls_rckpt_pin, 1 },
	{ "rckpt", "rewind", cls_rckpt_rewind, 1 },
	{ "rckpt", "claim", cls_rckpt_claim, 1 },
	{ "rckpt", "retire", cls_rckpt_retire, 1 },
	{ "rckpt", "put", cls_rckpt_put, 1 },
};

typedef struct entry {
	char *ns, *oid;
	mem_obj_t obj;
	char lock_name[64], lock_cookie[128];
	struct timespec lock_until;
} entry_t;

#define MAX_OPS 64

struct mem_pool {
	entry_t *e;
	size_t n, cap;
	uint64_t next_client;
	mem_fault_t fault;
	char fault_op[32];
	unsigned fault_seen;
	int struck;
	char struck_op[32]; /* what the fault hit */
	struct {
		char name[32];
		unsigned n;
	} calls[MAX_OPS];
	unsigned ncalls;
	unsigned all_calls;
	char no_class[32];   /* a class the "OSD" has not loaded */
	uint64_t max_object; /* pool_limits' answers */
	int erasure;
	char forge_method[32]; /* mem_pool_forge's */
	uint8_t *forge;
	size_t forge_len;
	struct held { /* a held class call (mem_fault_t.held) */
		char *ns, *oid;
		const struct method *meth;
		uint8_t *in;
		size_t len;
	} held;
};

typedef struct mem_io {
	rckpt_io_t io;
	mem_pool_t *p;
	char *ns; /* NULL: every namespace (listing only) */
	uint64_t client;
} mem_io_t;

struct rckpt_aio {
	mem_io_t *m;
	char *oid;
	const struct method *meth;
	uint8_t *in;
	size_t len;
	rckpt_buf_t *out;
	int rc;   /* its result, once run */
	int done; /* run */
};

static int m_write_full(rckpt_io_t *io, const char *oid, const void *p, size_t len);
static int run(mem_io_t *m, const char *oid, const struct method *meth, const void *in, size_t len,
	       rckpt_buf_t *out);
static int m_read(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off);

static _Thread_local unsigned depth; /* > 0: inside the pool */

int mem_pool_busy(void)
{
	return depth > 0;
}

int mem_pool_create(mem_pool_t **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void held_free(struct held *h)
{
	free(h->ns);
	free(h->oid);
	free(h->in);
	memset(h, 0, sizeof(*h));
}

void mem_pool_destroy(mem_pool_t *p)
{
	size_t i;
	if (p == NULL)
		return;
	held_free(&p->held);
	free(p->forge);
	for (i = 0; i < p->n; i++) {
		free(p->e[i].ns);
		free(p->e[i].oid);
		mem_obj_free(&p->e[i].obj);
	}
	free(p->e);
	free(p);
}

void mem_pool_unload_class(mem_pool_t *p, const char *cls)
{
	snprintf(p->no_class, sizeof(p->no_class), "%s", cls ? cls : "");
}

void mem_pool_set_limits(mem_pool_t *p, uint64_t max_object, int erasure)
{
	p->max_object = max_object;
	p->erasure = erasure;
}

void mem_pool_forge(mem_pool_t *p, const char *method, const void *reply, size_t len)
{
	free(p->forge);
	p->forge = NULL;
	p->forge_len = 0;
	p->forge_method[0] = '\0';
	if (method == NULL || (p->forge = malloc(len ? len : 1)) == NULL)
		return;
	memcpy(p->forge, reply, len);
	p->forge_len = len;
	strncpy(p->forge_method, method, sizeof(p->forge_method) - 1);
}

void mem_pool_fault(mem_pool_t *p, const mem_fault_t *f)
{
	memset(&p->fault, 0, sizeof(p->fault));
	p->fault_seen = 0;
	p->struck = 0;
	p->fault_op[0] = '\0';
	if (f == NULL)
		return;
	p->fault = *f;
	if (f->op) {
		strncpy(p->fault_op, f->op, sizeof(p->fault_op) - 1);
		p->fault.op = p->fault_op;
	}
}

int mem_pool_release(mem_pool_t *p)
{
	struct held *h = &p->held;
	mem_io_t m;
	int rc;
	if (h->meth == NULL)
		return -ENOENT;
	memset(&m, 0, sizeof(m));
	m.p = p;
	m.ns = h->ns;
	depth++;
	rc = run(&m, h->oid, h->meth, h->in, h->len, NULL);
	depth--;
	held_free(h);
	return rc;
}

int mem_pool_struck(const mem_pool_t *p)
{
	return p->struck;
}

const char *mem_pool_struck_op(const mem_pool_t *p)
{
	return p->struck ? p->struck_op : "";
}

unsigned mem_pool_calls(const mem_pool_t *p, const char *op)
{
	unsigned i;
	if (op == NULL)
		return p->all_calls;
	for (i = 0; i < p->ncalls; i++)
		if (strcmp(p->calls[i].name, op) == 0)
			return p->calls[i].n;
	return 0;
}

/* Counts a call of op. 1 when the armed fault is to strike it (and, for
 * a delay, *delay says so instead). */
static int hit(mem_pool_t *p, const char *op, int *delay)
{
	unsigned i;
	p->all_calls++;
	for (i = 0; i < p->ncalls && strcmp(p->calls[i].name, op) != 0; i++)
		;
	if (i == p->ncalls && p->ncalls < MAX_OPS) {
		strncpy(p->calls[i].name, op, sizeof(p->calls[i].name) - 1);
		p->ncalls++;
	}
	if (i < p->ncalls)
		p->calls[i].n++;
	if (p->fault.nth == 0 || p->struck || (p->fault.op && strcmp(p->fault.op, op) != 0))
		return 0;
	if (++p->fault_seen != p->fault.nth)
		return 0;
	p->struck = 1;
	snprintf(p->struck_op, sizeof(p->struck_op), "%s", op);
	if (p->fault.before) {
		p->fault.before(p->fault.arg);
		return 0;
	}
	if (p->fault.delay) {
		if (delay)
			*delay = 1;
		return 0;
	}
	return 1;
}

static mem_io_t *M(rckpt_io_t *io)
{
	return (mem_io_t *)io->ctx;
}

/* Keeps a struck call of a write method for mem_pool_release; 1 when it
 * is held (not to be run), 0 when it is not a call to hold. */
static int hold(mem_io_t *m, const char *oid, const struct method *meth, const void *in, size_t len)
{
	struct held *h = &m->p->held;
	if (!m->p->fault.held || meth == NULL || !meth->write || m->ns == NULL)
		return 0;
	held_free(h);
	h->ns = strdup(m->ns);
	h->oid = strdup(oid);
	h->in = malloc(len ? len : 1);
	if (!h->ns || !h->oid || !h->in) {
		held_free(h);
		return 0;
	}
	if (len)
		memcpy(h->in, in, len);
	h->len = len;
	h->meth = meth;
	return 1;
}

/* The object ns/oid, made (not existing yet) when make. */
static entry_t *find(mem_pool_t *p, const char *ns, const char *oid, int make)
{
	size_t i;
	for (i = 0; i < p->n; i++)
		if (strcmp(p->e[i].ns, ns) == 0 && strcmp(p->e[i].oid, oid) == 0)
			return &p->e[i];
	if (!make)
		return NULL;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		entry_t *e = realloc(p->e, cap * sizeof(*e));
		if (e == NULL)
			return NULL;
		p->e = e;
		p->cap = cap;
	}
	memset(&p->e[p->n], 0, sizeof(p->e[p->n]));
	p->e[p->n].ns = strdup(ns);
	p->e[p->n].oid = strdup(oid);
	if (!p->e[p->n].ns || !p->e[p->n].oid) {
		free(p->e[p->n].ns);
		free(p->e[p->n].oid);
		return NULL;
	}
	return &p->e[p->n++];
}

static entry_t *existing(mem_io_t *m, const char *oid)
{
	entry_t *e = m->ns ? find(m->p, m->ns, oid, 0) : NULL;
	return e && e->obj.exists ? e : NULL;
}

static const struct method *method_of(const mem_pool_t *p, const char *cls, const char *name)
{
	size_t i;
	if (strcmp(cls, p->no_class) == 0)
		return NULL; /* the class is not loaded: -EOPNOTSUPP */
	for (i = 0; i < sizeof(METHODS) / sizeof(METHODS[0]); i++)
		if (strcmp(METHODS[i].cls, cls) == 0 && strcmp(METHODS[i].name, name) == 0)
			return &METHODS[i];
	return NULL;
}

/* Runs a class method as the OSD does: a read method on an object that
 * does not exist is -ENOENT; a write method's changes stay when it
 * returns 0; a read method changes nothing. */
static int run(mem_io_t *m, const char *oid, const struct method *meth, const void *in,
	       size_t len, rckpt_buf_t *out)
{
	rckpt_cls_out_t reply = RCKPT_CLS_OUT_INIT;
	entry_t *e;
	int rc;
	if (m->ns == NULL)
		return -EINVAL;
	if ((e = find(m->p, m->ns, oid, meth->write)) == NULL)
		return meth->write ? -ENOMEM : -ENOENT;
	if (!meth->write && !e->obj.exists)
		return -ENOENT;
	if (meth->write) {
		e->obj.limit = (size_t)m->p->max_object;
		rc = mem_obj_call(&e->obj, meth->fn, in, len, &reply);
		if (!e->obj.exists)
			e->lock_name[0] = '\0'; /* a lock is the object's: it goes with it */
	} else { /* on the object itself: a read method cannot change it */
		rckpt_cls_obj_t o = { .ops = &mem_obj_ops, .ctx = &e->obj };
		e->obj.readonly = 1;
		rc = meth->fn(&o, in, len, &reply);
		e->obj.readonly = 0;
	}
	if (rc == 0 && out && reply.len)
		rc = rckpt_buf_append(out, reply.p, reply.len);
	rckpt_buf_free(&reply);
	return rc;
}

static int m_exec(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		  const void *in, size_t len, rckpt_buf_t *out)
{
	mem_io_t *m = M(io);
	const struct method *meth = method_of(m->p, cls, method);
	int rc;
	if (m->p->forge && strcmp(method, m->p->forge_method) == 0) { /* a forged reply, once */
		rc = out ? rckpt_buf_append(out, m->p->forge, m->p->forge_len) : 0;
		mem_pool_forge(m->p, NULL, NULL, 0);
		return rc;
	}
	depth++;
	if (hit(m->p, method, NULL)) {
		if (m->p->fault.lost && meth)
			(void)run(m, oid, meth, in, len, out); /* it lands; its reply does not */
		else
			(void)hold(m, oid, meth, in, len);
		rc = m->p->fault.rc;
	} else {
		rc = meth ? run(m, oid, meth, in, len, out) : -EOPNOTSUPP;
	}
	depth--;
	return rc;
}

static int m_aio_exec(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		      const void *in, size_t len, rckpt_buf_t *out, rckpt_aio_t **c)
{
	mem_io_t *m = M(io);
	rckpt_aio_t *a;
	int delay = 0, rc = 0;
	depth++;
	*c = NULL;
	if (hit(m->p, method, &delay)) {
		(void)hold(m, oid, method_of(m->p, cls, method), in, len);
		rc = m->p->fault.rc;
		goto out;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL || (a->oid = strdup(oid)) == NULL ||
	    (a->in = malloc(len ? len : 1)) == NULL) {
		if (a)
			free(a->oid);
		free(a);
		rc = -ENOMEM;
		goto out;
	}
	if (len)
		memcpy(a->in, in, len);
	a->m = m;
	a->len = len;
	a->out = out;
	a->meth = method_of(m->p, cls, method);
	if (a->meth && a->meth->write && !delay) {
		/* a write runs now, as if the OSD were quick, and its result
		 * waits; a read (no effects) or a delayed write runs when it is
		 * waited for */
		a->rc = run(m, oid, a->meth, a->in, len, NULL);
		a->done = 1;
	}
	*c = a;
out:
	depth--;
	return rc;
}

static int m_aio_wait(rckpt_aio_t *a)
{
	int rc;
	depth++;
	if (a->done)
		rc = a->rc;
	else
		rc = a->meth ? run(a->m, a->oid, a->meth, a->in, a->len, a->out) : -EOPNOTSUPP;
	free(a->oid);
	free(a->in);
	free(a);
	depth--;
	return rc;
}

static int m_call(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		  const void *in, size_t len, void *out, size_t cap)
{
	mem_io_t *m = M(io);
	const struct method *meth = method_of(m->p, cls, method);
	rckpt_buf_t reply = RCKPT_BUF_INIT;
	int rc;
	if (m->p->forge && strcmp(method, m->p->forge_method) == 0) { /* a forged reply, once */
		rc = m->p->forge_len > cap ? -ERANGE : (int)m->p->forge_len;
		if (rc > 0)
			memcpy(out, m->p->forge, m->p->forge_len);
		mem_pool_forge(m->p, NULL, NULL, 0);
		return rc;
	}
	depth++;
	if (hit(m->p, method, NULL)) {
		(void)hold(m, oid, meth, in, len);
		rc = m->p->fault.rc;
	} else {
		rc = meth ? run(m, oid, meth, in, len, &reply) : -EOPNOTSUPP;
	}
	if (rc == 0 && reply.len > cap)
		rc = -ERANGE;
	if (rc == 0) {
		if (reply.len)
			memcpy(out, reply.p, reply.len);
		rc = (int)reply.len;
	}
	rckpt_buf_free(&reply);
	depth--;
	return rc;
}

/* A plain operation started: done at once, its result kept for the wait. */
static int started(int rc, rckpt_aio_t **c)
{
	rckpt_aio_t *a;
	depth++;
	a = calloc(1, sizeof(*a));
	depth--;
	if (a == NULL)
		return -ENOMEM;
	a->rc = rc;
	a->done = 1;
	*c = a;
	return 0;
}

static int m_aio_write_full(rckpt_io_t *io, const char *oid, const void *p, size_t len,
			    rckpt_aio_t **c)
{
	*c = NULL;
	return started(m_write_full(io, oid, p, len), c);
}

static int m_aio_read(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off,
		      void (*done)(void *arg), void *arg, rckpt_aio_t **c)
{
	int rc;
	*c = NULL;
	if ((rc = started(m_read(io, oid, buf, len, off), c)))
		return rc;
	if (done) /* after *c is set, as the seam promises */
		done(arg);
	return 0;
}

static int m_stat(rckpt_io_t *io, const char *oid, uint64_t *size)
{
	mem_io_t *m = M(io);
	entry_t *e;
	if (hit(m->p, "stat", NULL))
		return m->p->fault.rc;
	if ((e = existing(m, oid)) == NULL)
		return -ENOENT;
	*size = e->obj.size;
	return 0;
}

static int m_read(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off)
{
	mem_io_t *m = M(io);
	entry_t *e;
	size_t n;
	if (hit(m->p, "read", NULL))
		return m->p->fault.rc;
	if ((e = existing(m, oid)) == NULL)
		return -ENOENT;
	if (off >= e->obj.size)
		return 0;
	n = e->obj.size - off < len ? (size_t)(e->obj.size - off) : len;
	memcpy(buf, e->obj.data + off, n);
	return (int)n;
}

static int m_write_full(rckpt_io_t *io, const char *oid, const void *p, size_t len)
{
	mem_io_t *m = M(io);
	entry_t *e;
	uint8_t *d;
	if (hit(m->p, "write_full", NULL))
		return m->p->fault.rc;
	depth++;
	e = m->ns ? find(m->p, m->ns, oid, 1) : NULL;
	d = malloc(len ? len : 1);
	depth--;
	if (e == NULL || d == NULL) {
		free(d);
		return e ? -ENOMEM : -EINVAL;
	}
	if (m->p->max_object && len > m->p->max_object) {
		free(d);
		return -EFBIG;
	}
	if (len)
		memcpy(d, p, len);
	free(e->obj.data);
	e->obj.data = d;
	e->obj.size = len;
	e->obj.exists = 1;
	return 0;
}

static int m_remove(rckpt_io_t *io, const char *oid)
{
	mem_io_t *m = M(io);
	entry_t *e;
	if (hit(m->p, "remove", NULL))
		return m->p->fault.rc;
	if ((e = existing(m, oid)) == NULL)
		return -ENOENT;
	mem_obj_free(&e->obj);
	e->lock_name[0] = '\0';
	return 0;
}

static int m_omap_list(rckpt_io_t *io, const char *oid, const char *after, const char *prefix,
		       unsigned max, rckpt_io_kv_fn fn, void *arg, int *more)
{
	mem_io_t *m = M(io);
	const size_t pl = prefix ? strlen(prefix) : 0;
	entry_t *e;
	size_t i;
	int found;
	unsigned n = 0;
	*more = 0;
	if (hit(m->p, "omap_list", NULL))
		return m->p->fault.rc;
	if ((e = existing(m, oid)) == NULL)
		return -ENOENT;
	/* librados counts max over the prefixed keys only */
	i = mem_find(&e->obj, after, &found);
	if (found)
		i++;
	for (; i < e->obj.nkv; i++) {
		int rc;
		if (pl && strncmp(e->obj.kv[i].key, prefix, pl) != 0)
			continue;
		if (n == max) {
			*more = 1;
			break;
		}
		n++;
		rc = fn(arg, e->obj.kv[i].key, e->obj.kv[i].val, e->obj.kv[i].len);
		if (rc)
			return rc;
	}
	return 0;
}

static int m_omap_get(rckpt_io_t *io, const char *oid, const char *key, rckpt_buf_t *out)
{
	mem_io_t *m = M(io);
	rckpt_cls_obj_t o;
	entry_t *e;
	if (hit(m->p, "omap_get", NULL))
		return m->p->fault.rc;
	if ((e = existing(m, oid)) == NULL)
		return -ENOENT;
	o.ops = &mem_obj_ops;
	o.ctx = &e->obj;
	return mem_omap_get(&o, key, out);
}

static int m_omap_set(rckpt_io_t *io, const char *oid, const char *key, const void *val,
		      size_t len)
{
	mem_io_t *m = M(io);
	rckpt_cls_obj_t o;
	entry_t *e;
	int rc;
	if (hit(m->p, "omap_set", NULL))
		return m->p->fault.rc;
	depth++;
	e = m->ns ? find(m->p, m->ns, oid, 1) : NULL;
	o.ops = &mem_obj_ops;
	o.ctx = e ? &e->obj : NULL;
	rc = e ? mem_omap_set(&o, key, val, len) : -EINVAL;
	depth--;
	return rc;
}

static int m_omap_rm(rckpt_io_t *io, const char *oid, const char *key)
{
	mem_io_t *m = M(io);
	rckpt_cls_obj_t o;
	entry_t *e;
	int rc;
	if (hit(m->p, "omap_rm", NULL))
		return m->p->fault.rc;
	if ((e = existing(m, oid)) == NULL)
		return -ENOENT;
	o.ops = &mem_obj_ops;
	o.ctx = &e->obj;
	rc = mem_omap_remove(&o, key);
	return rc == -ENOENT ? 0 : rc; /* RADOS removes absent keys quietly */
}

static int m_omap_rm_range(rckpt_io_t *io, const char *oid, const char *lo, const char *hi)
{
	mem_io_t *m = M(io);
	entry_t *e;
	size_t i = 0;
	if (hit(m->p, "omap_rm_range", NULL))
		return m->p->fault.rc;
	if ((e = existing(m, oid)) == NULL)
		return -ENOENT;
	while (i < e->obj.nkv) {
		const char *k = e->obj.kv[i].key;
		if (strcmp(k, lo) >= 0 && strcmp(k, hi) < 0) {
			rckpt_cls_obj_t o = { .ops = &mem_obj_ops, .ctx = &e->obj };
			mem_omap_remove(&o, k);
		} else {
			i++;
		}
	}
	return 0;
}

static int m_objects(rckpt_io_t *io, int (*fn)(void *arg, const char *oid, const char *ns),
		     void *arg)
{
	mem_io_t *m = M(io);
	size_t i;
	if (hit(m->p, "objects", NULL))
		return m->p->fault.rc;
	for (i = 0; i < m->p->n; i++) {
		const entry_t *e = &m->p->e[i];
		int rc;
		if (!e->obj.exists || (m->ns && strcmp(e->ns, m->ns) != 0))
			continue;
		if ((rc = fn(arg, e->oid, e->ns)) != 0)
			return rc;
	}
	return 0;
}

static int later(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

static int m_lock(rckpt_io_t *io, const char *oid, const char *name, const char *cookie,
		  unsigned seconds, int renew)
{
	mem_io_t *m = M(io);
	struct timespec now;
	entry_t *e;
	if (hit(m->p, "lock", NULL))
		return m->p->fault.rc;
	clock_gettime(CLOCK_MONOTONIC, &now);
	depth++;
	e = m->ns ? find(m->p, m->ns, oid, 1) : NULL;
	depth--;
	if (e == NULL)
		return -ENOMEM;
	if (e->lock_name[0] && strcmp(e->lock_name, name) == 0 && later(&e->lock_until, &now)) {
		if (strcmp(e->lock_cookie, cookie) != 0)
			return -EBUSY;
		if (!renew)
			return -EEXIST;
	}
	snprintf(e->lock_name, sizeof(e->lock_name), "%s", name);
	snprintf(e->lock_cookie, sizeof(e->lock_cookie), "%s", cookie);
	e->lock_until = now;
	e->lock_until.tv_sec += seconds;
	e->obj.exists = 1; /* locking creates the object */
	return 0;
}

static int m_unlock(rckpt_io_t *io, const char *oid, const char *name, const char *cookie)
{
	mem_io_t *m = M(io);
	entry_t *e;
	if (hit(m->p, "unlock", NULL))
		return m->p->fault.rc;
	if ((e = existing(m, oid)) == NULL || strcmp(e->lock_name, name) != 0 ||
	    strcmp(e->lock_cookie, cookie) != 0)
		return -ENOENT;
	e->lock_name[0] = '\0';
	return 0;
}

/* The lock check at the call (a held request lands as a plain exec). */
static int m_exec_locked(rckpt_io_t *io, const char *oid, const char *lock, const char *cookie,
			 const char *cls, const char *method, const void *in, size_t len)
{
	mem_io_t *m = M(io);
	struct timespec now;
	entry_t *e;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if ((e = existing(m, oid)) == NULL || strcmp(e->lock_name, lock) != 0 ||
	    strcmp(e->lock_cookie, cookie) != 0 || !later(&e->lock_until, &now))
		return -EBUSY;
	return m_exec(io, oid, cls, method, in, len, NULL);
}

static int m_lock_holder(rckpt_io_t *io, const char *oid, const char *name, char *cookie, size_t cap,
			 char *client, size_t ccap)
{
	mem_io_t *m = M(io);
	struct timespec now;
	entry_t *e;
	if (hit(m->p, "lock_holder", NULL))
		return m->p->fault.rc;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if ((e = existing(m, oid)) == NULL || strcmp(e->lock_name, name) != 0 ||
	    !later(&e->lock_until, &now))
		return -ENOENT;
	snprintf(cookie, cap, "%s", e->lock_cookie);
	snprintf(client, ccap, "%s", "");
	return 0;
}

static int m_break_lock(rckpt_io_t *io, const char *oid, const char *name, const char *client,
			const char *cookie)
{
	(void)client;
	return m_unlock(io, oid, name, cookie);
}

static int m_pool_limits(rckpt_io_t *io, uint64_t *max_object, int *erasure)
{
	mem_io_t *m = M(io);
	if (hit(m->p, "pool_limits", NULL))
		return m->p->fault.rc;
	*max_object = m->p->max_object;
	*erasure = m->p->erasure;
	return 0;
}

static uint64_t m_client_id(rckpt_io_t *io)
{
	return M(io)->client;
}

static void m_close(rckpt_io_t *io)
{
	mem_io_t *m;
	if (io == NULL)
		return;
	m = M(io);
	free(m->ns);
	free(m);
}

static const rckpt_io_ops_t mem_ops = {
	.exec = m_exec,
	.aio_exec = m_aio_exec,
	.aio_wait = m_aio_wait,
	.call = m_call,
	.aio_write_full = m_aio_write_full,
	.aio_read = m_aio_read,
	.stat = m_stat,
	.read = m_read,
	.write_full = m_write_full,
	.remove = m_remove,
	.omap_list = m_omap_list,
	.omap_get = m_omap_get,
	.omap_set = m_omap_set,
	.omap_rm = m_omap_rm,
	.omap_rm_range = m_omap_rm_range,
	.objects = m_objects,
	.lock = m_lock,
	.unlock = m_unlock,
	.exec_locked = m_exec_locked,
	.lock_holder = m_lock_holder,
	.break_lock = m_break_lock,
	.pool_limits = m_pool_limits,
	.client_id = m_client_id,
	.close = m_close,
};

int mem_pool_open(void *arg, const char *ns, rckpt_io_t **out)
{
	mem_pool_t *p = arg;
	mem_io_t *m;
	*out = NULL;
	depth++;
	m = calloc(1, sizeof(*m));
	if (m && ns && (m->ns = strdup(ns)) == NULL) {
		free(m);
		m = NULL;
	}
	depth--;
	if (m == NULL)
		return -ENOMEM;
	m->p = p;
	m->client = ++p->next_client;
	m->io.ops = &mem_ops;
	m->io.ctx = m;
	*out = &m->io;
	return 0;
}
