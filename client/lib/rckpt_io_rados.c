/*
 * rckpt_io_rados.c — rckpt_io over librados: each rckpt_io_t is an I/O
 * context of the handle's pool set to one namespace. With the handle's
 * connection code (rckpt_handle.c) the only file of librckpt that calls
 * rados_* (tests/check_rados_symbols.sh holds it to that).
 */
#define _POSIX_C_SOURCE 200809L
#include "rckpt_io.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <jansson.h>
#include <rados/librados.h>

/* A namespace of the pool, and the flags of its reads (rckpt_io.h
 * rckpt_rados_pool_t: where replicated reads may be served). */
typedef struct rio {
	rckpt_io_t io; /* first: the rckpt_io_t handed out */
	rados_ioctx_t x;
	int read_flags;
} rio_t;

#define IOX(io) (((rio_t *)(io))->x)
#define RFLAGS(io) (((rio_t *)(io))->read_flags)

struct rckpt_aio {
	rados_completion_t c;
	rados_read_op_t rop;
	rados_write_op_t wop;
	int prval;
	int is_read; /* an aio_read: aio_wait returns the bytes read */
	size_t nread;
	char *ob; /* a read method's reply, librados' */
	size_t olen;
	rckpt_buf_t *out;
	void (*done)(void *arg); /* aio_read's */
	void *done_arg;
};

static int r_exec(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		  const void *in, size_t len, rckpt_buf_t *out)
{
	int prval = 0, rc;
	if (out == NULL) {
		rados_write_op_t op = rados_create_write_op();
		if (op == NULL)
			return -ENOMEM;
		rados_write_op_exec(op, cls, method, in, len, &prval);
		rc = rados_write_op_operate(op, IOX(io), oid, NULL, 0);
		rados_release_write_op(op);
	} else {
		rados_read_op_t op = rados_create_read_op();
		char *ob = NULL;
		size_t olen = 0;
		if (op == NULL)
			return -ENOMEM;
		rados_read_op_exec(op, cls, method, in, len, &ob, &olen, &prval);
		rc = rados_read_op_operate(op, IOX(io), oid, RFLAGS(io));
		if (rc == 0 && prval == 0 && olen)
			rc = rckpt_buf_append(out, ob, olen);
		if (ob)
			rados_buffer_free(ob);
		rados_release_read_op(op);
	}
	return rc ? rc : prval;
}

static void aio_free(rckpt_aio_t *a)
{
	if (a->c)
		rados_aio_release(a->c);
	if (a->rop)
		rados_release_read_op(a->rop);
	if (a->wop)
		rados_release_write_op(a->wop);
	if (a->ob)
		rados_buffer_free(a->ob);
	free(a);
}

static int r_aio_exec(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		      const void *in, size_t len, rckpt_buf_t *out, rckpt_aio_t **c)
{
	rckpt_aio_t *a = calloc(1, sizeof(*a));
	int rc;
	*c = NULL;
	if (a == NULL)
		return -ENOMEM;
	a->out = out;
	if (rados_aio_create_completion2(NULL, NULL, &a->c)) {
		a->c = NULL;
		aio_free(a);
		return -ENOMEM;
	}
	if (out == NULL) {
		if ((a->wop = rados_create_write_op()) == NULL) {
			aio_free(a);
			return -ENOMEM;
		}
		rados_write_op_exec(a->wop, cls, method, in, len, &a->prval);
		rc = rados_aio_write_op_operate(a->wop, IOX(io), a->c, oid, NULL, 0);
	} else {
		if ((a->rop = rados_create_read_op()) == NULL) {
			aio_free(a);
			return -ENOMEM;
		}
		rados_read_op_exec(a->rop, cls, method, in, len, &a->ob, &a->olen, &a->prval);
		rc = rados_aio_read_op_operate(a->rop, IOX(io), a->c, oid, RFLAGS(io));
	}
	if (rc) {
		aio_free(a);
		return rc;
	}
	*c = a;
	return 0;
}

static int r_aio_wait(rckpt_aio_t *a)
{
	int rc;
	rados_aio_wait_for_complete(a->c);
	rc = rados_aio_get_return_value(a->c);
	if (rc == 0)
		rc = a->prval;
	if (rc == 0 && a->is_read)
		rc = a->nread > INT_MAX ? -EOVERFLOW : (int)a->nread;
	if (rc == 0 && a->out && a->olen)
		rc = rckpt_buf_append(a->out, a->ob, a->olen);
	aio_free(a);
	return rc;
}

static int r_call(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		  const void *in, size_t len, void *out, size_t cap)
{
	return rados_exec(IOX(io), oid, cls, method, in, len, out, cap);
}

static int r_aio_write_full(rckpt_io_t *io, const char *oid, const void *p, size_t len,
			    rckpt_aio_t **c)
{
	rckpt_aio_t *a = calloc(1, sizeof(*a));
	int rc;
	*c = NULL;
	if (a == NULL)
		return -ENOMEM;
	if (rados_aio_create_completion2(NULL, NULL, &a->c)) {
		free(a);
		return -ENOMEM;
	}
	if ((rc = rados_aio_write_full(IOX(io), oid, a->c, p, len))) {
		aio_free(a);
		return rc;
	}
	*c = a;
	return 0;
}

/* librados' thread: the read completed. */
static void read_complete(rados_completion_t c, void *arg)
{
	rckpt_aio_t *a = arg;
	(void)c;
	a->done(a->done_arg);
}

static int r_aio_read(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off,
		      void (*done)(void *arg), void *arg, rckpt_aio_t **c)
{
	rckpt_aio_t *a = calloc(1, sizeof(*a));
	int rc;
	*c = NULL;
	if (a == NULL)
		return -ENOMEM;
	a->done = done;
	a->done_arg = arg;
	if (rados_aio_create_completion2(a, done ? read_complete : NULL, &a->c)) {
		free(a);
		return -ENOMEM;
	}
	if ((a->rop = rados_create_read_op()) == NULL) {
		aio_free(a);
		return -ENOMEM;
	}
	a->is_read = 1;
	rados_read_op_read(a->rop, off, len, buf, &a->nread, &a->prval);
	*c = a; /* before the read can complete */
	if ((rc = rados_aio_read_op_operate(a->rop, IOX(io), a->c, oid, RFLAGS(io)))) {
		*c = NULL;
		aio_free(a);
		return rc;
	}
	return 0;
}

static int r_stat(rckpt_io_t *io, const char *oid, uint64_t *size)
{
	return rados_stat(IOX(io), oid, size, NULL);
}

static int r_read(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off)
{
	rados_read_op_t op;
	size_t got = 0;
	int prval = 0, rc;
	if (len > INT_MAX)
		return -EINVAL; /* the count read must fit the return */
	if ((op = rados_create_read_op()) == NULL)
		return -ENOMEM;
	rados_read_op_read(op, off, len, buf, &got, &prval);
	rc = rados_read_op_operate(op, IOX(io), oid, RFLAGS(io));
	rados_release_read_op(op);
	if (rc == 0)
		rc = prval;
	return rc ? rc : (int)got;
}

static int r_write_full(rckpt_io_t *io, const char *oid, const void *p, size_t len)
{
	return rados_write_full(IOX(io), oid, p, len);
}

static int r_remove(rckpt_io_t *io, const char *oid)
{
	return rados_remove(IOX(io), oid);
}

static int r_omap_list(rckpt_io_t *io, const char *oid, const char *after, const char *prefix,
		       unsigned max, rckpt_io_kv_fn fn, void *arg, int *more)
{
	rados_read_op_t op = rados_create_read_op();
	rados_omap_iter_t it = NULL;
	unsigned char m = 0;
	int prval = 0, rc;
	*more = 0;
	if (op == NULL)
		return -ENOMEM;
	rados_read_op_omap_get_vals2(op, after, prefix, max, &it, &m, &prval);
	rc = rados_read_op_operate(op, IOX(io), oid, RFLAGS(io));
	if (rc == 0)
		rc = prval;
	while (rc == 0 && it) {
		char *key = NULL, *val = NULL;
		size_t klen = 0, vlen = 0;
		if (rados_omap_get_next2(it, &key, &val, &klen, &vlen) || key == NULL)
			break;
		rc = fn(arg, key, (const uint8_t *)val, vlen);
	}
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	*more = m;
	return rc;
}

static int r_omap_get(rckpt_io_t *io, const char *oid, const char *key, rckpt_buf_t *out)
{
	rados_read_op_t op = rados_create_read_op();
	rados_omap_iter_t it = NULL;
	const size_t klen = strlen(key);
	int prval = 0, rc;
	if (op == NULL)
		return -ENOMEM;
	rados_read_op_omap_get_vals_by_keys2(op, &key, 1, &klen, &it, &prval);
	rc = rados_read_op_operate(op, IOX(io), oid, RFLAGS(io));
	if (rc == 0)
		rc = prval;
	if (rc == 0) {
		char *k = NULL, *v = NULL;
		size_t kl = 0, vl = 0;
		if (it && rados_omap_get_next2(it, &k, &v, &kl, &vl) == 0 && k)
			rc = rckpt_buf_append(out, v, vl);
		else
			rc = -ENOENT;
	}
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	return rc;
}

static int r_omap_set(rckpt_io_t *io, const char *oid, const char *key, const void *val,
		      size_t len)
{
	rados_write_op_t op = rados_create_write_op();
	const char *v = val;
	int rc;
	if (op == NULL)
		return -ENOMEM;
	rados_write_op_create(op, LIBRADOS_CREATE_IDEMPOTENT, NULL);
	rados_write_op_omap_set(op, &key, &v, &len, 1);
	rc = rados_write_op_operate(op, IOX(io), oid, NULL, 0);
	rados_release_write_op(op);
	return rc;
}

static int r_omap_rm(rckpt_io_t *io, const char *oid, const char *key)
{
	rados_write_op_t op = rados_create_write_op();
	int rc;
	if (op == NULL)
		return -ENOMEM;
	rados_write_op_omap_rm_keys(op, &key, 1);
	rc = rados_write_op_operate(op, IOX(io), oid, NULL, 0);
	rados_release_write_op(op);
	return rc;
}

static int r_omap_rm_range(rckpt_io_t *io, const char *oid, const char *lo, const char *hi)
{
	rados_write_op_t op = rados_create_write_op();
	int rc;
	if (op == NULL)
		return -ENOMEM;
	rados_write_op_assert_exists(op);
	rados_write_op_omap_rm_range2(op, lo, strlen(lo), hi, strlen(hi));
	rc = rados_write_op_operate(op, IOX(io), oid, NULL, 0);
	rados_release_write_op(op);
	return rc;
}

static int r_objects(rckpt_io_t *io, int (*fn)(void *arg, const char *oid, const char *ns),
		     void *arg)
{
	rados_list_ctx_t lc;
	const char *oid, *ns;
	int rc = rados_nobjects_list_open(IOX(io), &lc);
	if (rc)
		return rc;
	while ((rc = rados_nobjects_list_next(lc, &oid, NULL, &ns)) == 0)
		if ((rc = fn(arg, oid, ns ? ns : "")) != 0)
			break;
	rados_nobjects_list_close(lc);
	return rc == -ENOENT ? 0 : rc; /* -ENOENT: the end of the list */
}

static int r_lock(rckpt_io_t *io, const char *oid, const char *name, const char *cookie,
		  unsigned seconds, int renew)
{
	struct timeval tv = { (time_t)seconds, 0 };
	/* renew may take the lock again when its lease ran out between two
	 * saves (a save every few minutes, a lease of 30 s): what keeps the
	 * job safe is the token, not the lock */
	return rados_lock_exclusive(IOX(io), oid, name, cookie, "rckpt writer", &tv,
				    renew ? LIBRADOS_LOCK_FLAG_MAY_RENEW : 0);
}

static int r_unlock(rckpt_io_t *io, const char *oid, const char *name, const char *cookie)
{
	return rados_unlock(IOX(io), oid, name, cookie);
}

/* cls_lock_assert_op as the lock class decodes it (Ceph's encoding: a
 * versioned struct of name, u8 type, cookie, tag; strings as u32 length
 * and bytes), for an exclusive lock with no tag, as rados_lock_exclusive
 * takes them. */
static size_t lock_assert_op(uint8_t *out, size_t cap, const char *name, const char *cookie)
{
	const size_t nl = strlen(name), cl = strlen(cookie), body = 4 + nl + 1 + 4 + cl + 4;
	uint8_t *p = out;
	if (6 + body > cap)
		return 0;
	*p++ = 1; /* struct version */
	*p++ = 1; /* compat */
	p[0] = (uint8_t)body, p[1] = (uint8_t)(body >> 8), p[2] = (uint8_t)(body >> 16), p[3] = (uint8_t)(body >> 24);
	p += 4;
	p[0] = (uint8_t)nl, p[1] = (uint8_t)(nl >> 8), p[2] = (uint8_t)(nl >> 16), p[3] = (uint8_t)(nl >> 24);
	memcpy(p + 4, name, nl);
	p += 4 + nl;
	*p++ = 1; /* LOCK_EXCLUSIVE */
	p[0] = (uint8_t)cl, p[1] = (uint8_t)(cl >> 8), p[2] = (uint8_t)(cl >> 16), p[3] = (uint8_t)(cl >> 24);
	memcpy(p + 4, cookie, cl);
	p += 4 + cl;
	memset(p, 0, 4); /* tag "" */
	return 6 + body;
}

static int r_exec_locked(rckpt_io_t *io, const char *oid, const char *lock, const char *cookie,
			 const char *cls, const char *method, const void *in, size_t len)
{
	uint8_t a[512];
	const size_t alen = lock_assert_op(a, sizeof(a), lock, cookie);
	int prval_lock = 0, prval = 0, rc;
	rados_write_op_t op;
	if (alen == 0)
		return -EINVAL;
	if ((op = rados_create_write_op()) == NULL)
		return -ENOMEM;
	rados_write_op_exec(op, "lock", "assert_locked", (const char *)a, alen, &prval_lock);
	rados_write_op_exec(op, cls, method, in, len, &prval);
	rc = rados_write_op_operate(op, IOX(io), oid, NULL, 0);
	rados_release_write_op(op);
	return rc ? rc : prval_lock ? prval_lock : prval;
}

/* The first locker of an exclusive lock (there is at most one). */
static int r_lock_holder(rckpt_io_t *io, const char *oid, const char *name, char *cookie, size_t cap,
			 char *client, size_t ccap)
{
	char tag[128], clients[256], cookies[256], addrs[256];
	size_t tl = sizeof(tag), cl = sizeof(clients), kl = sizeof(cookies), al = sizeof(addrs);
	int exclusive = 0;
	ssize_t n = rados_list_lockers(IOX(io), oid, name, &exclusive, tag, &tl, clients, &cl, cookies, &kl,
				       addrs, &al);
	if (n < 0)
		return (int)n;
	if (n == 0)
		return -ENOENT;
	/* each list is NUL-separated: the first entry of each */
	snprintf(cookie, cap, "%.*s", (int)strnlen(cookies, kl), cookies);
	snprintf(client, ccap, "%.*s", (int)strnlen(clients, cl), clients);
	return 0;
}

static int r_break_lock(rckpt_io_t *io, const char *oid, const char *name, const char *client,
			const char *cookie)
{
	return rados_break_lock(IOX(io), oid, name, client, cookie);
}

/* A monitor command's reply, NUL-terminated into out (cap bytes). */
static int mon_command(rados_t cl, const char *cmd, char *out, size_t cap)
{
	const char *argv[1] = { cmd };
	char *ob = NULL, *os = NULL;
	size_t olen = 0, oslen = 0;
	int rc = rados_mon_command(cl, argv, 1, "", 0, &ob, &olen, &os, &oslen);
	if (rc == 0) {
		size_t n = olen < cap - 1 ? olen : cap - 1;
		memcpy(out, ob ? ob : "", n);
		out[n] = '\0';
	}
	rados_buffer_free(ob);
	rados_buffer_free(os);
	return rc;
}

/* osd_max_object_size as the monitors' configuration gives it to the
 * OSDs, else as this client's configuration has it; whether the pool is
 * erasure-coded: it needs aligned appends, or the monitor has an
 * erasure-code profile for it (an erasure-coded pool that allows
 * overwrites does not need alignment, and has no omap either). */
static int r_pool_limits(rckpt_io_t *io, uint64_t *max_object, int *erasure)
{
	rados_t cl = rados_ioctx_get_cluster(IOX(io));
	char buf[512], pool[256], cmd[600];
	int req = 0, rc;

	*max_object = 0;
	*erasure = 0;
	if (mon_command(cl, "{\"prefix\": \"config get\", \"who\": \"osd\", \"key\": \"osd_max_object_size\"}",
			buf, sizeof(buf)) == 0 ||
	    rados_conf_get(cl, "osd_max_object_size", buf, sizeof(buf)) == 0) {
		char *end;
		unsigned long long v = strtoull(buf, &end, 10);
		if (end != buf)
			*max_object = v;
	}
	if ((rc = rados_ioctx_pool_requires_alignment2(IOX(io), &req)))
		return rc;
	if (req) {
		*erasure = 1;
		return 0;
	}
	rc = rados_ioctx_get_pool_name(IOX(io), pool, sizeof(pool));
	if (rc < 0)
		return rc;
	if (strpbrk(pool, "\"\\"))
		return 0; /* a name JSON would need escapes for: not asked */
	snprintf(cmd, sizeof(cmd),
		 "{\"prefix\": \"osd pool get\", \"pool\": \"%s\", \"var\": \"erasure_code_profile\"}", pool);
	/* -EACCES: "not a erasure pool"; other failures (no rights to ask)
	 * say nothing, and the first write would fail */
	*erasure = mon_command(cl, cmd, buf, sizeof(buf)) == 0;
	return 0;
}

/* A monitor command's JSON reply, parsed (json_decref it). */
static json_t *mon_json(rados_t cl, const char *cmd, int *rc)
{
	const char *argv[1] = { cmd };
	char *ob = NULL, *os = NULL;
	size_t olen = 0, oslen = 0;
	json_t *j = NULL;
	*rc = rados_mon_command(cl, argv, 1, "", 0, &ob, &olen, &os, &oslen);
	if (*rc == 0) {
		j = json_loadb(ob ? ob : "", olen, 0, NULL);
		if (j == NULL)
			*rc = -EBADMSG;
	}
	rados_buffer_free(ob);
	rados_buffer_free(os);
	return j;
}

static int cmp_int(const void *a, const void *b)
{
	const int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static int r_up_osds(rckpt_io_t *io, int *osds, unsigned cap, unsigned *n)
{
	int rc;
	json_t *j = mon_json(rados_ioctx_get_cluster(IOX(io)), "{\"prefix\": \"osd dump\", \"format\": \"json\"}", &rc),
	       *a, *o;
	size_t i;
	*n = 0;
	if (j == NULL)
		return rc;
	a = json_object_get(j, "osds");
	json_array_foreach(a, i, o)
	{
		json_t *id = json_object_get(o, "osd"), *up = json_object_get(o, "up");
		if (!json_is_integer(id) || !json_is_integer(up) || json_integer_value(up) != 1)
			continue;
		if (*n == cap) {
			rc = -ERANGE;
			break;
		}
		osds[(*n)++] = (int)json_integer_value(id);
	}
	json_decref(j);
	qsort(osds, *n, sizeof(*osds), cmp_int);
	return rc;
}

static int r_primary_of(rckpt_io_t *io, const char *oid, int *osd)
{
	char pool[256], cmd[768], ns[256];
	json_t *j, *p;
	int rc = rados_ioctx_get_pool_name(IOX(io), pool, sizeof(pool));
	if (rc < 0)
		return rc;
	rc = rados_ioctx_get_namespace(IOX(io), ns, sizeof(ns));
	if (rc < 0)
		return rc;
	if (strpbrk(pool, "\"\\") || strpbrk(oid, "\"\\") || strpbrk(ns, "\"\\"))
		return -EINVAL; /* names JSON would need escapes for: not asked */
	snprintf(cmd, sizeof(cmd),
		 "{\"prefix\": \"osd map\", \"pool\": \"%s\", \"object\": \"%s\", \"nspace\": \"%s\", "
		 "\"format\": \"json\"}",
		 pool, oid, ns);
	if ((j = mon_json(rados_ioctx_get_cluster(IOX(io)), cmd, &rc)) == NULL)
		return rc;
	p = json_object_get(j, "acting_primary");
	rc = json_is_integer(p) ? 0 : -EBADMSG;
	if (rc == 0)
		*osd = (int)json_integer_value(p);
	json_decref(j);
	return rc;
}

static uint64_t r_client_id(rckpt_io_t *io)
{
	return rados_get_instance_id(rados_ioctx_get_cluster(IOX(io)));
}

static void r_close(rckpt_io_t *io)
{
	if (io == NULL)
		return;
	rados_ioctx_destroy(IOX(io));
	free((rio_t *)io);
}

static const rckpt_io_ops_t rados_ops = {
	.exec = r_exec,
	.aio_exec = r_aio_exec,
	.aio_wait = r_aio_wait,
	.call = r_call,
	.aio_write_full = r_aio_write_full,
	.aio_read = r_aio_read,
	.stat = r_stat,
	.read = r_read,
	.write_full = r_write_full,
	.remove = r_remove,
	.omap_list = r_omap_list,
	.omap_get = r_omap_get,
	.omap_set = r_omap_set,
	.omap_rm = r_omap_rm,
	.omap_rm_range = r_omap_rm_range,
	.objects = r_objects,
	.lock = r_lock,
	.unlock = r_unlock,
	.exec_locked = r_exec_locked,
	.lock_holder = r_lock_holder,
	.break_lock = r_break_lock,
	.pool_limits = r_pool_limits,
	.client_id = r_client_id,
	.up_osds = r_up_osds,
	.primary_of = r_primary_of,
	.close = r_close,
};

int rckpt_io_rados_open(void *arg, const char *ns, rckpt_io_t **out)
{
	const rckpt_rados_pool_t *rp = arg;
	rados_ioctx_t pool = rp->ioctx, x = NULL;
	rio_t *r;
	int rc;
	*out = NULL;
	rc = rados_ioctx_create2(rados_ioctx_get_cluster(pool), rados_ioctx_get_id(pool), &x);
	if (rc)
		return rc;
	if ((r = malloc(sizeof(*r))) == NULL) {
		rados_ioctx_destroy(x);
		return -ENOMEM;
	}
	rados_ioctx_set_namespace(x, ns ? ns : LIBRADOS_ALL_NSPACES);
	r->io.ops = &rados_ops;
	r->io.ctx = NULL;
	r->x = x;
	r->read_flags = rp->read_flags;
	*out = &r->io;
	return 0;
}
