/*
 * rckpt_fold.c — restores that do not depend on the plugin (formats/store.md,
 * "Restore without the plugin"). When the OSDs cannot fold a job's chains
 * (the rckpt class is not installed, not in osd_class_load_list, or of a
 * version that cannot read this client's records), the client runs the
 * class's own read methods itself, on a read-only view of the object that
 * it reads through librados: the same code as in the OSD, so the same
 * bytes, at the cost of moving every record of a chain over the network.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cls_rckpt_methods.h"
#include "rckpt_record.h"
#include "rckpt_store_internal.h"

/* ---- a read-only object over rckpt_io ---- */

typedef struct view {
	rckpt_io_t *io;
	const char *oid;
	uint64_t size; /* the object's, once a read asked (have_size) */
	int have_size;
} view_t;

#define V(o) ((view_t *)(o)->ctx)

static int v_stat(rckpt_cls_obj_t *o, uint64_t *size)
{
	return V(o)->io->ops->stat(V(o)->io, V(o)->oid, size);
}

static int v_read(rckpt_cls_obj_t *o, uint64_t off, size_t len, rckpt_buf_t *out)
{
	size_t at = out->len;
	int rc, got;
	if (len > INT32_MAX)
		return -EFBIG; /* the plugin reads records, each far smaller */
	/* what the object holds, not what an index entry says it holds: an
	 * OSD reads what is there, and so may this */
	if (!V(o)->have_size) {
		if ((rc = V(o)->io->ops->stat(V(o)->io, V(o)->oid, &V(o)->size)))
			return rc;
		V(o)->have_size = 1;
	}
	if (off >= V(o)->size)
		len = 0;
	else if (len > V(o)->size - off)
		len = (size_t)(V(o)->size - off);
	if ((rc = rckpt_buf_reserve(out, len ? len : 1)))
		return rc;
	got = V(o)->io->ops->read(V(o)->io, V(o)->oid, out->p + at, len, off);
	if (got < 0)
		return got;
	out->len = at + (size_t)got;
	return 0;
}

static int v_omap_get(rckpt_cls_obj_t *o, const char *key, rckpt_buf_t *out)
{
	return V(o)->io->ops->omap_get(V(o)->io, V(o)->oid, key, out);
}

static int v_omap_list(rckpt_cls_obj_t *o, const char *start_after, unsigned max,
		       int (*fn)(void *arg, const char *key, const uint8_t *val, size_t len), void *arg,
		       int *more)
{
	return V(o)->io->ops->omap_list(V(o)->io, V(o)->oid, start_after, "", max, fn, arg, more);
}

/* A read method that tries to write: a bug, refused as the OSD would. */
static int v_write(rckpt_cls_obj_t *o, uint64_t off, const uint8_t *p, size_t len)
{
	(void)o, (void)off, (void)p, (void)len;
	return -EROFS;
}

static int v_truncate(rckpt_cls_obj_t *o, uint64_t size)
{
	(void)o, (void)size;
	return -EROFS;
}

static int v_omap_set(rckpt_cls_obj_t *o, const char *key, const uint8_t *p, size_t len)
{
	(void)o, (void)key, (void)p, (void)len;
	return -EROFS;
}

static int v_omap_remove(rckpt_cls_obj_t *o, const char *key)
{
	(void)o, (void)key;
	return -EROFS;
}

static int v_remove(rckpt_cls_obj_t *o)
{
	(void)o;
	return -EROFS;
}

static const rckpt_cls_obj_ops_t view_ops = {
	v_stat, v_read, v_write, v_truncate, v_omap_get, v_omap_set, v_omap_remove, v_omap_list, v_remove,
};

/* The class's read methods a client may run for itself. */
static rckpt_cls_obj_method_fn read_method(const char *method)
{
	if (strcmp(method, "materialize") == 0)
		return cls_rckpt_materialize;
	if (strcmp(method, "index") == 0)
		return cls_rckpt_index;
	if (strcmp(method, "verify") == 0)
		return cls_rckpt_verify;
	if (strcmp(method, "head") == 0)
		return cls_rckpt_head;
	if (strcmp(method, "list") == 0)
		return cls_rckpt_list;
	if (strcmp(method, "tip") == 0)
		return cls_rckpt_tip;
	return NULL;
}

int rckpt_fold_exec(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in,
		    rckpt_buf_t *out)
{
	rckpt_cls_obj_method_fn fn = read_method(method);
	view_t v = { j->io, oid, 0, 0 };
	rckpt_cls_obj_t o;
	rckpt_cls_out_t reply = RCKPT_CLS_OUT_INIT;
	uint64_t size;
	int rc;

	if (fn == NULL)
		return -EOPNOTSUPP;
	/* a read method on an object that does not exist: -ENOENT, as in the OSD */
	if ((rc = j->io->ops->stat(j->io, oid, &size)))
		return rc;
	memset(&o, 0, sizeof(o));
	o.ops = &view_ops;
	o.ctx = &v;
	o.client = 1; /* the client's memory: what older writers wrote reads here */
	rc = fn(&o, in ? in->p : NULL, in ? in->len : 0, &reply);
	if (rc == 0 && reply.len)
		rc = rckpt_buf_append(out, reply.p, reply.len);
	rckpt_buf_free(&reply);
	return rc;
}

int rckpt_fold_refused(int rc)
{
	return rc == -EOPNOTSUPP || rc == -EPERM;
}

/* ---- where restores fold ---- */

/* The newest chunk record version a class's `version` answer says it
 * reads (its ckpt-record range), UINT_MAX when it does not say. */
static unsigned records_read(const rckpt_wire_version_t *v)
{
	unsigned i;
	for (i = 0; i < v->nformats; i++)
		if (strcmp(v->formats[i].name, "ckpt-record") == 0 && v->formats[i].max_version >= 1)
			return v->formats[i].max_version;
	return UINT_MAX;
}

/* Whether the class's answer to `version` says it reads what this client
 * writes: the store's messages and the records' layout. */
static int plugin_reads_ours(const rckpt_wire_version_t *v)
{
	const unsigned rec = records_read(v);
	unsigned i, store = 0;
	for (i = 0; i < v->nformats; i++) {
		const rckpt_wire_format_range_t *f = &v->formats[i];
		/* what a restore sends is the same since layout 3 (4 added
		 * APPEND's head record, which a plugin of 3 skips) */
		if (strcmp(f->name, "store") == 0 && f->max_version >= RCKPT_STORE_FENCED3_VERSION)
			store = 1;
	}
	return store && rec != UINT_MAX && rec >= RCKPT_RECORD_VERSION;
}

unsigned rckpt_class_records(rckpt_job_t *j)
{
	rckpt_wire_version_t v;
	int rc;

	if (j->class_records)
		return j->class_records;
	rc = rckpt_plugin_probe(j->io, RCKPT_STORE_JOB_OID, "rckpt", &v);
	if (rc && !rckpt_fold_refused(rc))
		return UINT_MAX; /* no job object yet, or no answer: asked again */
	j->class_records = rc ? UINT_MAX : records_read(&v);
	return j->class_records;
}

/* Decides from RCKPT_FOLD when it names a way: 1 (decided), 0 (auto: the
 * OSDs are asked), or -EINVAL with the handle's message set. */
static int fold_by_env(rckpt_job_t *j)
{
	const char *env = getenv("RCKPT_FOLD");
	if (env && strcmp(env, "client") == 0) {
		j->fold = RCKPT_FOLD_CLIENT;
		snprintf(j->fold_why, sizeof(j->fold_why), "RCKPT_FOLD=client");
		return 1;
	}
	if (env && strcmp(env, "osd") == 0) {
		j->fold = RCKPT_FOLD_OSD;
		return 1;
	}
	if (env && *env && strcmp(env, "auto") != 0)
		return rckpt_fail(j->h, -EINVAL, "rckpt_job_restore",
				  "RCKPT_FOLD is '%s'; it must be auto, osd or client", env);
	return 0;
}

static int fold_from(rckpt_job_t *j, int rc, const rckpt_wire_version_t *vp);

int rckpt_fold_decide(rckpt_job_t *j)
{
	rckpt_wire_version_t v;
	int rc;

	if (j->fold != RCKPT_FOLD_UNKNOWN)
		return 0;
	if ((rc = fold_by_env(j)))
		return rc < 0 ? rc : 0;
	rc = rckpt_plugin_probe(j->io, RCKPT_STORE_JOB_OID, "rckpt", &v);
	return fold_from(j, rc, &v);
}

void rckpt_fold_ask(rckpt_job_t *j, rckpt_fold_ask_t *a)
{
	memset(a, 0, sizeof(*a));
	if (j->fold != RCKPT_FOLD_UNKNOWN || fold_by_env(j) != 0)
		return; /* decided (or a bad RCKPT_FOLD, said again by decide) */
	if (j->io->ops->aio_exec(j->io, RCKPT_STORE_JOB_OID, "rckpt", "version", NULL, 0, &a->out, &a->c))
		a->c = NULL;
}

int rckpt_fold_decide_asked(rckpt_job_t *j, rckpt_fold_ask_t *a)
{
	rckpt_wire_version_t v;
	int rc;
	if (a->c == NULL) {
		rckpt_buf_free(&a->out);
		return rckpt_fold_decide(j);
	}
	rc = j->io->ops->aio_wait(a->c);
	a->c = NULL;
	memset(&v, 0, sizeof(v));
	if (rc >= 0)
		rc = a->out.len > RCKPT_WIRE_VERSION_BOUND ? -EBADMSG
							    : rckpt_wire_version_decode(&v, a->out.p, a->out.len);
	rckpt_buf_free(&a->out);
	return j->fold != RCKPT_FOLD_UNKNOWN ? 0 : fold_from(j, rc, &v);
}

void rckpt_fold_ask_drop(rckpt_job_t *j, rckpt_fold_ask_t *a)
{
	if (a->c)
		(void)j->io->ops->aio_wait(a->c);
	a->c = NULL;
	rckpt_buf_free(&a->out);
}

/* The decision from the class's version reply v (rc: the probe's). */
static int fold_from(rckpt_job_t *j, int rc, const rckpt_wire_version_t *vp)
{
	const rckpt_wire_version_t v = *vp;
	if (rc == 0 && !j->class_records)
		j->class_records = records_read(&v); /* the answer a writer asks for */
	if (rc == 0 && plugin_reads_ours(&v)) {
		j->fold = RCKPT_FOLD_OSD;
		return 0;
	}
	if (rc == -ENOENT || rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -ENOMEM)
		return rc; /* no job object, or no answer: nothing to decide on */
	j->fold = RCKPT_FOLD_CLIENT;
	if (rc == 0)
		snprintf(j->fold_why, sizeof(j->fold_why),
			 "the OSDs' rckpt class %u.%u.%u cannot read this client's records", v.major, v.minor,
			 v.patch);
	else
		snprintf(j->fold_why, sizeof(j->fold_why), "the OSDs' rckpt class is not available (%s)",
			 rckpt_plugin_hint(rc));
	return 0;
}

int rckpt_job_folds_here(rckpt_job_t *j, char *why, size_t cap)
{
	int rc;
	rckpt_clear_error(j->h);
	if ((rc = rckpt_fold_decide(j)))
		return rckpt_fail(j->h, rc, __func__, "cannot tell whether the OSDs fold job %s's chains",
				  j->name);
	if (why && cap)
		snprintf(why, cap, "%s", j->fold == RCKPT_FOLD_CLIENT ? j->fold_why : "");
	return j->fold == RCKPT_FOLD_CLIENT;
}
