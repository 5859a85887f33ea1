/*
 * rckpt_internal.h — the handle and helpers shared by librckpt's sources.
 * Not installed.
 */
#ifndef RCKPT_INTERNAL_H
#define RCKPT_INTERNAL_H

#include <rados/librados.h>

#include "rckpt.h"
#include "rckpt_io.h"
#include "rckpt_wire.h"

#define RCKPT_ERRMSG_MAX 512

typedef struct rckpt_dump rckpt_dump_t; /* rckpt_io_dump.c */

struct rckpt {
	rados_t cluster;      /* NULL until connected */
	rados_ioctx_t ioctx;  /* NULL until connected */
	char *pool;
	rckpt_io_open_fn io_open; /* opens a namespace of the pool (rckpt_io.h);
				     NULL until connected */
	void *io_arg;
	rckpt_rados_pool_t rados; /* io_arg when connected */
	rckpt_dump_t *dump;   /* rckpt_open_dump's file, or NULL */
	int limits_known;     /* the pool's limits, asked once (rckpt_io.h pool_limits) */
	uint64_t max_object;  /* the OSDs' osd_max_object_size; 0: unknown */
	int erasure;          /* the pool is erasure-coded */
	char errmsg[RCKPT_ERRMSG_MAX];
};

/* Whether h can reach its pool (connected, or given a backend). */
static inline int rckpt_connected(const rckpt_t *h)
{
	return h->io_open != NULL;
}

/* Namespace ns of h's pool; close it with io->ops->close. */
int rckpt_io_open(rckpt_t *h, const char *ns, rckpt_io_t **out);

/* The `version` of object class `plugin`, asked on object oid of io (which
 * must exist): 0, or the call's error (rckpt_plugin_hint says what the
 * OSD means by it), or the decoder's. */
int rckpt_plugin_probe(rckpt_io_t *io, const char *oid, const char *plugin, rckpt_wire_version_t *v);
const char *rckpt_plugin_hint(int rc);

/* Frees a dump that rckpt_open_dump indexed. */
void rckpt_dump_close(rckpt_dump_t *d);

/* Points h at another rckpt_io backend instead of a cluster: the store's
 * and the datasets' unit tests run over memory this way. pool names it in
 * messages. h must not be connected. */
int rckpt_set_io(rckpt_t *h, rckpt_io_open_fn open, void *arg, const char *pool);

/* Records "func: message: strerror(err)" as h's last error; returns err. */
int rckpt_fail(rckpt_t *h, int err, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Clears h's last error at the start of a call. */
static inline void rckpt_clear_error(rckpt_t *h)
{
	h->errmsg[0] = '\0';
}

/* A job or dataset name: 1..63 of [A-Za-z0-9._-], not beginning with . or -. */
int rckpt_valid_name(const char *s);

/* Frees a list of names (rckpt_jobs, rckpt_pcr_datasets). Accepts NULL. */
void rckpt_names_free(char **names, unsigned n);

/* The names, sorted, of the pool's namespaces that begin with prefix and
 * hold an object named oid: the jobs (oid RCKPT_STORE_JOB_OID, prefix "")
 * and the datasets ("pcr/" and the PCR index). The part after the prefix
 * must be a valid name. what names the list in an error ("jobs"); fn is the
 * public function reporting it. Free with rckpt_names_free. */
int rckpt_ns_list(rckpt_t *h, const char *oid, const char *prefix, const char *what,
		  const char *fn, char ***names, unsigned *n);

#endif /* RCKPT_INTERNAL_H */
