/*
 * rckpt_io.c — what librckpt builds on the rckpt_io table for every
 * backend: the bounded fan-out of one method over many objects.
 */
#include "rckpt_io.h"

#include <errno.h>
#include <stdlib.h>

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
