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

#endif /* RCKPT_INTERNAL_H */
