/*
 * rckpt_io.c — what librckpt builds on the rckpt_io table for every
 * backend: the bounded fan-out of one method over many objects, and the
 * names of a namespace's objects.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "rckpt_io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Item i ended with r: kept in rcs, or the first failure kept in *rc. */
static void ended(int r, unsigned i, int *rcs, int *rc, unsigned *failed)
{
	if (rcs) {
		rcs[i] = r;
	} else if (r && *rc == 0) {
		*rc = r;
		if (failed)
			*failed = i;
	}
}

int rckpt_io_fanout(rckpt_io_t *io, unsigned n, unsigned inflight,
		    void (*oid)(void *arg, unsigned i, char *buf, size_t cap), void *arg,
		    const char *cls, const char *method, const rckpt_buf_t *in, int same,
		    rckpt_buf_t *out, int *rcs, unsigned *failed)
{
	rckpt_aio_t **c = calloc(n ? n : 1, sizeof(*c));
	unsigned next = 0, done = 0;
	int rc = c ? 0 : -ENOMEM;

	if (inflight == 0)
		inflight = 1;
	while (rc == 0 && next < n) {
		const rckpt_buf_t *m = same ? &in[0] : &in[next];
		char name[96];
		int r;
		if (next - done == inflight) { /* bounded: wait for the oldest */
			if (c[done])
				ended(io->ops->aio_wait(c[done]), done, rcs, &rc, failed);
			c[done++] = NULL;
			continue;
		}
		oid(arg, next, name, sizeof(name));
		r = io->ops->aio_exec(io, name, cls, method, m->p, m->len, out ? &out[next] : NULL,
				      &c[next]);
		if (r)
			c[next] = NULL;
		ended(r, next, rcs, &rc, failed);
		next++;
	}
	for (; c && done < next; done++) /* every started call ends before we return */
		if (c[done])
			ended(io->ops->aio_wait(c[done]), done, rcs, &rc, failed);
	free(c);
	return rc;
}

typedef struct names {
	char **s;
	unsigned n, cap;
} names_t;

static int name_one(void *arg, const char *oid, const char *ns)
{
	names_t *l = arg;
	(void)ns;
	if (l->n == l->cap) {
		unsigned cap = l->cap ? 2 * l->cap : 64;
		char **p = realloc(l->s, cap * sizeof(*p));
		if (p == NULL)
			return -ENOMEM;
		l->s = p;
		l->cap = cap;
	}
	if ((l->s[l->n] = strdup(oid)) == NULL)
		return -ENOMEM;
	l->n++;
	return 0;
}

int rckpt_io_names(rckpt_io_t *io, char ***names, unsigned *n)
{
	names_t l = { NULL, 0, 0 };
	unsigned i;
	int rc = io->ops->objects(io, name_one, &l);
	if (rc == -ENOENT)
		rc = 0;
	if (rc) {
		for (i = 0; i < l.n; i++)
			free(l.s[i]);
		free(l.s);
		l.s = NULL;
		l.n = 0;
	}
	*names = l.s;
	*n = l.n;
	return rc;
}
