/*
 * mem_io.h — a pool in memory behind librckpt's rckpt_io seam
 * (client/lib/rckpt_io.h). Its objects are mem_obj_t; class calls run the
 * real method bodies of cls/rckpt (all of a method's changes or none, as in
 * the OSD); locks, namespaces and listing behave as RADOS's do. A fault
 * plan fails or delays a chosen operation, so that unit tests can drive
 * the store through every fault point without a cluster.
 *
 *   mem_pool_t *p;
 *   mem_pool_create(&p);
 *   rckpt_create(&h);
 *   rckpt_set_io(h, mem_pool_open, p, "mem");   (then use h as usual)
 */
#ifndef RCKPT_MEM_IO_H
#define RCKPT_MEM_IO_H

#include "rckpt_io.h"

typedef struct mem_pool mem_pool_t;

int mem_pool_create(mem_pool_t **out);
void mem_pool_destroy(mem_pool_t *p);

/* What pool_limits answers: the OSDs' largest object (0: unknown), which
 * writes past it then fail with -EFBIG as in the OSD, and whether the pool
 * is erasure-coded. A new pool: 0, 0. */
void mem_pool_set_limits(mem_pool_t *p, uint64_t max_object, int erasure);

/* Calls of class cls's methods answer -EOPNOTSUPP from now on, as an OSD
 * without the class does (NULL or "": every class is there again). */
void mem_pool_unload_class(mem_pool_t *p, const char *cls);

/* rckpt_io_open_fn: arg is the mem_pool_t. */
int mem_pool_open(void *arg, const char *ns, rckpt_io_t **out);

/* One fault. op names what it hits: a class method ("append", "commit",
 * "materialize", ...) or a plain operation ("stat", "read", "write_full",
 * "remove", "omap_list", "omap_get", "omap_set", "omap_rm",
 * "omap_rm_range", "objects", "lock", "unlock"); NULL: any. The nth such
 * call from now (1-based) fails with rc and changes nothing; or, with
 * delay set, an asynchronous call runs only when it is waited for, after
 * the calls started later; or, with lost set, a synchronous class call
 * runs and its reply is lost: the caller gets rc though the change was
 * made (a commit that landed while the network failed); or, with held
 * set, a class call of a write method is kept, not run, and the caller
 * gets rc: the request of a client that paused or was cut off, still
 * queued, which mem_pool_release lands later (after its successor has
 * moved on); or, with before set, before(arg) runs first (another actor
 * acting at that moment, through the same pool), then the call as it
 * was asked. */
typedef struct mem_fault {
	const char *op;
	unsigned nth;
	int rc;
	int delay;
	int lost;
	int held;
	void (*before)(void *arg);
	void *arg;
} mem_fault_t;

/* Arms f (replacing any armed fault); NULL disarms. */
void mem_pool_fault(mem_pool_t *p, const mem_fault_t *f);
/* The next call of class method `method` runs nothing and replies
 * reply[0..len) (a plugin that is not this one, or damage on the way):
 * what a client does with a reply it did not ask for. Copied; NULL
 * disarms. */
void mem_pool_forge(mem_pool_t *p, const char *method, const void *reply, size_t len);
/* Runs the held call now, as the OSD would once it arrives: its result,
 * or -ENOENT when no call is held. */
int mem_pool_release(mem_pool_t *p);
/* Whether the armed fault has struck. */
int mem_pool_struck(const mem_pool_t *p);
/* The operation it struck ("" before it has). */
const char *mem_pool_struck_op(const mem_pool_t *p);
/* Calls of op (as above; NULL: every operation) since the pool was made. */
unsigned mem_pool_calls(const mem_pool_t *p, const char *op);
/* Whether the calling thread is inside the pool: allocations it makes
 * there are the fake's, not the library's (tests that fail allocations
 * leave them alone). */
int mem_pool_busy(void);

#endif /* RCKPT_MEM_IO_H */
