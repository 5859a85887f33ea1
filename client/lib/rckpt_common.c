/*
 * rckpt_common.c — what every wing of librckpt shares, the floor under
 * the handle: errors (rckpt_strerror, rckpt_fail, the handle's last
 * message), the rule for job and dataset names, and the walk over the
 * pool's namespaces that lists jobs and datasets alike.
 */
#define _GNU_SOURCE /* strerrordesc_np: strerror without the thread hazard; strdup */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_internal.h"
#include "rckpt_buf.h"

_Static_assert(RCKPT_EVERSION == RCKPT_FMT_EVERSION, "error band out of step with formats/");
_Static_assert(RCKPT_ECHECKSUM == RCKPT_FMT_ECHECKSUM, "error band out of step with formats/");

const char *rckpt_strerror(int err)
{
	const char *s;

	switch (err) {
	case 0:
		return "success";
	case RCKPT_EVERSION:
		return "format or protocol version not supported";
	case RCKPT_ECHECKSUM:
		return "checksum mismatch: stored data is damaged";
	}
	s = err < 0 ? strerrordesc_np(-err) : NULL;
	return s ? s : "unknown error";
}

int rckpt_fail(rckpt_t *h, int err, const char *func, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(h->errmsg, sizeof(h->errmsg), "%s: ", func);
	if (n < 0 || (size_t)n >= sizeof(h->errmsg))
		return err;
	va_start(ap, fmt);
	vsnprintf(h->errmsg + n, sizeof(h->errmsg) - (size_t)n, fmt, ap);
	va_end(ap);
	n = (int)strlen(h->errmsg);
	snprintf(h->errmsg + n, sizeof(h->errmsg) - (size_t)n, " (%s)", rckpt_strerror(err));
	return err;
}

const char *rckpt_errmsg(const rckpt_t *h)
{
	return h ? h->errmsg : "";
}

int rckpt_valid_name(const char *s)
{
	size_t i, n = strlen(s);
	if (n == 0 || n > 63 || s[0] == '.' || s[0] == '-') /* not an option, not . or .. */
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

void rckpt_names_free(char **names, unsigned n)
{
	unsigned i;
	for (i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct ns_walk {
	const char *oid, *prefix;
	size_t pl;
	char **names;
	unsigned n;
	size_t cap;
} ns_walk_t;

static int ns_one(void *arg, const char *oid, const char *ns)
{
	ns_walk_t *w = arg;
	char **p;
	if (strcmp(oid, w->oid) != 0 || strncmp(ns, w->prefix, w->pl) != 0 ||
	    !rckpt_valid_name(ns + w->pl))
		return 0;
	p = rckpt_grow(w->names, &w->cap, (size_t)w->n + 1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	w->names = p;
	if ((w->names[w->n] = strdup(ns + w->pl)) == NULL)
		return -ENOMEM;
	w->n++;
	return 0;
}

int rckpt_ns_list(rckpt_t *h, const char *oid_want, const char *prefix, const char *what,
		  const char *fn, char ***names, unsigned *n)
{
	ns_walk_t w = { oid_want, prefix, strlen(prefix), NULL, 0, 0 };
	rckpt_io_t *io;
	int rc;

	rckpt_clear_error(h);
	*names = NULL;
	*n = 0;
	if (!rckpt_connected(h))
		return rckpt_fail(h, -ENOTCONN, fn, "not connected");
	if ((rc = rckpt_io_open(h, RCKPT_IO_ALL_NS, &io)))
		return rckpt_fail(h, rc, fn, "cannot open pool %s", h->pool);
	rc = io->ops->objects(io, ns_one, &w);
	io->ops->close(io);
	if (rc) {
		rckpt_names_free(w.names, w.n);
		return rckpt_fail(h, rc, fn, "cannot list the %s of pool %s", what, h->pool);
	}
	if (w.n > 1)
		qsort(w.names, w.n, sizeof(*w.names), cmp_str);
	*names = w.names;
	*n = w.n;
	return 0;
}

int rckpt_io_open(rckpt_t *h, const char *ns, rckpt_io_t **out)
{
	*out = NULL;
	return h->io_open ? h->io_open(h->io_arg, ns, out) : -ENOTCONN;
}

int rckpt_set_io(rckpt_t *h, rckpt_io_open_fn open, void *arg, const char *pool)
{
	char *p;
	if (h->cluster || h->io_open || open == NULL || pool == NULL)
		return -EINVAL;
	if ((p = strdup(pool)) == NULL)
		return -ENOMEM;
	h->pool = p;
	h->io_open = open;
	h->io_arg = arg;
	return 0;
}
