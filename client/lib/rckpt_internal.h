/*
 * rckpt_internal.h — the handle and helpers shared by librckpt's sources.
 * Not installed.
 */
#ifndef RCKPT_INTERNAL_H
#define RCKPT_INTERNAL_H

#include <rados/librados.h>

#include "rckpt.h"

#define RCKPT_ERRMSG_MAX 512

struct rckpt {
	rados_t cluster;      /* NULL until connected */
	rados_ioctx_t ioctx;  /* NULL until connected */
	char *pool;
	char errmsg[RCKPT_ERRMSG_MAX];
};

/* Records "func: message: strerror(err)" as h's last error; returns err. */
int rckpt_fail(rckpt_t *h, int err, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Clears h's last error at the start of a call. */
static inline void rckpt_clear_error(rckpt_t *h)
{
	h->errmsg[0] = '\0';
}

/* A job or dataset name: 1..63 of [A-Za-z0-9._-]. */
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
