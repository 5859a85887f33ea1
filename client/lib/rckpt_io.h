/*
 * rckpt_io.h — the seam between librckpt and RADOS: the few operations the
 * store and the datasets need, on the objects of one namespace of the
 * handle's pool, as a table. rckpt_io_rados.c implements it over librados;
 * tests implement it over memory (tests/common/mem_io.c), running the real
 * object-class methods and failing chosen operations, so that every fault
 * point of a save or a restore can be driven without a cluster.
 *
 * Every call returns 0 (or a count where it says so) or a negative errno,
 * -ENOENT when the object or key does not exist. Internal to librckpt.
 */
#ifndef RCKPT_IO_H
#define RCKPT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"

typedef struct rckpt_io rckpt_io_t;   /* one namespace of one pool */
typedef struct rckpt_aio rckpt_aio_t; /* an operation in flight */

typedef int (*rckpt_io_kv_fn)(void *arg, const char *key, const uint8_t *val, size_t len);

typedef struct rckpt_io_ops {
	/* Object-class method cls.method on oid with input in[0..len). out
	 * NULL: a write method (its changes are kept only when it returns
	 * 0); else a read method, whose reply is appended to out. */
	int (*exec)(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		    const void *in, size_t len, rckpt_buf_t *out);
	/* The same, started: the call returns once it is queued; *c is then
	 * waited for (and freed) by aio_wait, which returns the method's
	 * result and fills out. in and out must live until then. */
	int (*aio_exec)(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
			const void *in, size_t len, rckpt_buf_t *out, rckpt_aio_t **c);
	/* Waits for c (when it has not completed) and frees it: the result
	 * of its operation (for aio_read, the bytes read). */
	int (*aio_wait)(rckpt_aio_t *c);
	/* Object-class method cls.method, read or write as the class
	 * registered it (rados_exec): the reply, at most cap bytes, into out;
	 * the reply's length, or -ERANGE when it does not fit. */
	int (*call)(rckpt_io_t *io, const char *oid, const char *cls, const char *method,
		    const void *in, size_t len, void *out, size_t cap);
	/* Started write_full and read (len bytes at off into buf, which must
	 * live until the wait). done(arg), when not NULL, runs once the read
	 * has completed, on a thread of the backend's, after *c is set. */
	int (*aio_write_full)(rckpt_io_t *io, const char *oid, const void *p, size_t len,
			      rckpt_aio_t **c);
	int (*aio_read)(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off,
			void (*done)(void *arg), void *arg, rckpt_aio_t **c);
	int (*stat)(rckpt_io_t *io, const char *oid, uint64_t *size);
	/* Reads up to len bytes at off into buf: the count read. */
	int (*read)(rckpt_io_t *io, const char *oid, void *buf, size_t len, uint64_t off);
	int (*write_full)(rckpt_io_t *io, const char *oid, const void *p, size_t len);
	int (*remove)(rckpt_io_t *io, const char *oid);
	/* Calls fn on up to max omap entries after `after` ("" from the
	 * first) whose keys begin with prefix, in key order; *more says
	 * whether any are left. fn returning nonzero stops and is returned. */
	int (*omap_list)(rckpt_io_t *io, const char *oid, const char *after, const char *prefix,
			 unsigned max, rckpt_io_kv_fn fn, void *arg, int *more);
	/* One key's value appended to out; -ENOENT without it. */
	int (*omap_get)(rckpt_io_t *io, const char *oid, const char *key, rckpt_buf_t *out);
	/* Sets one key, creating the object when it does not exist. */
	int (*omap_set)(rckpt_io_t *io, const char *oid, const char *key, const void *val,
			size_t len);
	int (*omap_rm)(rckpt_io_t *io, const char *oid, const char *key);
	/* Removes the keys in [lo, hi) of an object that exists. */
	int (*omap_rm_range)(rckpt_io_t *io, const char *oid, const char *lo, const char *hi);
	/* Calls fn(arg, oid, ns) on every object of the namespace, or of
	 * every namespace when io was opened with RCKPT_IO_ALL_NS (any
	 * order); fn returning nonzero stops and is returned. */
	int (*objects)(rckpt_io_t *io, int (*fn)(void *arg, const char *oid, const char *ns),
		       void *arg);
	/* The exclusive advisory lock `name` on oid for seconds (renewed when
	 * renew, or taken again when nobody holds it); -EBUSY or -EEXIST when
	 * another holds it. */
	int (*lock)(rckpt_io_t *io, const char *oid, const char *name, const char *cookie,
		    unsigned seconds, int renew);
	int (*unlock)(rckpt_io_t *io, const char *oid, const char *name, const char *cookie);
	/* Write method cls.method on oid in one operation with the lock
	 * class's assert_locked: it runs only while this client holds the
	 * exclusive lock `lock` under `cookie` (else -EBUSY or -ENOENT,
	 * nothing changed). */
	int (*exec_locked)(rckpt_io_t *io, const char *oid, const char *lock, const char *cookie,
			   const char *cls, const char *method, const void *in, size_t len);
	/* The holder of lock `name` on oid: its cookie, NUL-terminated into
	 * cookie[0..cap), and its client (librados' "client.N"; "" where the
	 * backend has none) into client[0..ccap); -ENOENT when nobody holds
	 * it. A cookie or client too long for its buffer is cut. */
	int (*lock_holder)(rckpt_io_t *io, const char *oid, const char *name, char *cookie,
			   size_t cap, char *client, size_t ccap);
	/* Breaks lock `name` on oid as held by client with cookie (a
	 * takeover); -ENOENT when it is not held so any longer. */
	int (*break_lock)(rckpt_io_t *io, const char *oid, const char *name, const char *client,
			  const char *cookie);
	/* What the pool allows the store (store.md "Segments", "Pools"):
	 * the OSDs' largest object (osd_max_object_size; 0 when it cannot be
	 * told) and whether the pool is erasure-coded (1; such a pool has no
	 * omap). */
	int (*pool_limits)(rckpt_io_t *io, uint64_t *max_object, int *erasure);
	/* A number that tells this client from the others (the cluster's
	 * instance id for librados). */
	uint64_t (*client_id)(rckpt_io_t *io);
	/* The cluster's OSDs that are up, by id (*n of them, at most cap,
	 * ascending), and the OSD that serves object oid of the pool (its
	 * placement group's acting primary): for `rckpt status` per OSD.
	 * NULL in backends without OSDs. */
	int (*up_osds)(rckpt_io_t *io, int *osds, unsigned cap, unsigned *n);
	int (*primary_of)(rckpt_io_t *io, const char *oid, int *osd);
	void (*close)(rckpt_io_t *io);
} rckpt_io_ops_t;

struct rckpt_io {
	const rckpt_io_ops_t *ops;
	void *ctx; /* the implementation's */
};

/* Opens namespace ns of a pool (RCKPT_IO_ALL_NS: all of them, to list
 * objects): what a handle uses to make its rckpt_io_t. arg is the
 * backend's. */
#define RCKPT_IO_ALL_NS NULL
typedef int (*rckpt_io_open_fn)(void *arg, const char *ns, rckpt_io_t **out);

/* The librados backend (rckpt_io_rados.c): arg is an rckpt_rados_pool_t,
 * the pool's context, whose namespace each open sets on a new context of
 * its own, and librados' flags for every read (LIBRADOS_OPERATION_*:
 * balanced or localized reads of replicated pools, or 0 for the primary). */
typedef struct rckpt_rados_pool {
	void *ioctx; /* rados_ioctx_t */
	int read_flags;
} rckpt_rados_pool_t;
int rckpt_io_rados_open(void *arg, const char *ns, rckpt_io_t **out);

/* A window of started operations, ended oldest first: at most cap in
 * flight and, when budget is not 0, at most budget bytes of them. Each
 * operation carries the caller's slot number and its bytes; reaped(arg,
 * slot, rc) runs as each ends (on the caller's thread, inside the window
 * call that waited for it), where the caller frees what the operation
 * needed. Zeroed, a window is empty and safe to free. */
typedef struct rckpt_io_pending {
	rckpt_aio_t *c;
	unsigned slot;
	uint64_t bytes;
} rckpt_io_pending_t;

typedef struct rckpt_io_window {
	rckpt_io_t *io;
	unsigned cap, first, count;
	uint64_t budget, held;
	void (*reaped)(void *arg, unsigned slot, int rc);
	void *arg;
	rckpt_io_pending_t *q; /* ring of cap */
} rckpt_io_window_t;

/* 0 or -ENOMEM (the window is then empty). cap 0 counts as 1. */
int rckpt_io_window_init(rckpt_io_window_t *w, rckpt_io_t *io, unsigned cap, uint64_t budget,
			 void (*reaped)(void *arg, unsigned slot, int rc), void *arg);
/* Waits for the oldest operation, if any, and reports it. */
void rckpt_io_window_reap(rckpt_io_window_t *w);
/* Reaps the oldest until one more operation of `bytes` fits. */
void rckpt_io_window_room(rckpt_io_window_t *w, uint64_t bytes);
/* Adds c, started by the caller after rckpt_io_window_room. */
void rckpt_io_window_add(rckpt_io_window_t *w, rckpt_aio_t *c, unsigned slot, uint64_t bytes);
/* Makes room for, starts and adds cls.method on oid (ops->aio_exec). A
 * start that fails is returned and not added: reaped is not called for
 * it. */
int rckpt_io_window_exec(rckpt_io_window_t *w, const char *oid, const char *cls, const char *method,
			 const void *in, size_t len, rckpt_buf_t *out, unsigned slot);
/* Reaps every operation, then frees the window. */
void rckpt_io_window_free(rckpt_io_window_t *w);

/* Runs the object-class method cls.method on n objects, oid(arg, i) naming
 * object i, with inputs in[i] (or in[0] for all when same), `inflight` at
 * a time; out NULL for a write method, else out[i] gets reply i. Every
 * started call is waited for before it returns. Without rcs the first
 * failure stops it and is returned (*failed, when not NULL, says which);
 * with rcs every object is tried, rcs[i] gets its result, and 0 is
 * returned. */
int rckpt_io_fanout(rckpt_io_t *io, unsigned n, unsigned inflight,
		    void (*oid)(void *arg, unsigned i, char *buf, size_t cap), void *arg,
		    const char *cls, const char *method, const rckpt_buf_t *in, int same,
		    rckpt_buf_t *out, int *rcs, unsigned *failed);
/* The same, each(each_arg, i, rc) called as call i ends (on the caller's
 * thread, in order of ending), out[i] then filled: what a caller can act
 * on while the rest are in flight. */
int rckpt_io_fanout_each(rckpt_io_t *io, unsigned n, unsigned inflight,
			 void (*oid)(void *arg, unsigned i, char *buf, size_t cap), void *arg,
			 const char *cls, const char *method, const rckpt_buf_t *in, int same,
			 rckpt_buf_t *out, int *rcs, unsigned *failed,
			 void (*each)(void *arg, unsigned i, int rc), void *each_arg);

/* The names of the namespace's objects, collected first (removing objects
 * while listing them is not defined): *names[0..*n), freed with
 * rckpt_names_free; nothing on failure. */
int rckpt_io_names(rckpt_io_t *io, char ***names, unsigned *n);

#endif /* RCKPT_IO_H */
