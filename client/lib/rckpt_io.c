/*
 * rckpt_io.c — what librckpt builds on the rckpt_io table for every
 * backend: the window of operations in flight (a save's appends, a
 * dataset's record writes), the bounded fan-out of one method over many
 * objects on it, and the names of a namespace's objects.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "rckpt_io.h"
#include "rckpt_buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rckpt_io_window_init(rckpt_io_window_t *w, rckpt_io_t *io, unsigned cap, uint64_t budget,
			 void (*reaped)(void *arg, unsigned slot, int rc), void *arg)
{
	memset(w, 0, sizeof(*w));
	w->q = calloc(cap ? cap : 1, sizeof(*w->q));
	if (w->q == NULL)
		return -ENOMEM;
	w->io = io;
	w->cap = cap ? cap : 1;
	w->budget = budget;
	w->reaped = reaped;
	w->arg = arg;
	return 0;
}

void rckpt_io_window_reap(rckpt_io_window_t *w)
{
	rckpt_io_pending_t p;
	int rc;
	if (w->count == 0)
		return;
	p = w->q[w->first];
	w->first = (w->first + 1) % w->cap;
	w->count--;
	rc = w->io->ops->aio_wait(p.c);
	w->held -= p.bytes;
	if (w->reaped)
		w->reaped(w->arg, p.slot, rc);
}

void rckpt_io_window_room(rckpt_io_window_t *w, uint64_t bytes)
{
	while (w->count && (w->count == w->cap || (w->budget && w->held + bytes > w->budget)))
		rckpt_io_window_reap(w);
}

void rckpt_io_window_add(rckpt_io_window_t *w, rckpt_aio_t *c, unsigned slot, uint64_t bytes)
{
	rckpt_io_pending_t *p;
	if (w->count == w->cap) /* the caller skipped room(): keep the bound anyway */
		rckpt_io_window_reap(w);
	p = &w->q[(w->first + w->count) % w->cap];
	p->c = c;
	p->slot = slot;
	p->bytes = bytes;
	w->count++;
	w->held += bytes;
}

int rckpt_io_window_exec(rckpt_io_window_t *w, const char *oid, const char *cls, const char *method,
			 const void *in, size_t len, rckpt_buf_t *out, unsigned slot)
{
	rckpt_aio_t *c = NULL;
	int rc;
	rckpt_io_window_room(w, len);
	if ((rc = w->io->ops->aio_exec(w->io, oid, cls, method, in, len, out, &c)))
		return rc;
	rckpt_io_window_add(w, c, slot, len);
	return 0;
}

void rckpt_io_window_free(rckpt_io_window_t *w)
{
	while (w->count)
		rckpt_io_window_reap(w);
	free(w->q);
	memset(w, 0, sizeof(*w));
}

typedef struct fan {
	int *rcs;
	unsigned *failed;
	int rc;
	void (*each)(void *arg, unsigned i, int rc);
	void *each_arg;
} fan_t;

/* Item i ended with r: kept in rcs, or the first failure kept. */
static void fan_ended(void *arg, unsigned i, int r)
{
	fan_t *f = arg;
	if (f->rcs) {
		f->rcs[i] = r;
	} else if (r && f->rc == 0) {
		f->rc = r;
		if (f->failed)
			*f->failed = i;
	}
	if (f->each)
		f->each(f->each_arg, i, r);
}

int rckpt_io_fanout(rckpt_io_t *io, unsigned n, unsigned inflight,
		    void (*oid)(void *arg, unsigned i, char *buf, size_t cap), void *arg,
		    const char *cls, const char *method, const rckpt_buf_t *in, int same,
		    rckpt_buf_t *out, int *rcs, unsigned *failed)
{
	return rckpt_io_fanout_each(io, n, inflight, oid, arg, cls, method, in, same, out, rcs, failed, NULL,
				    NULL);
}

int rckpt_io_fanout_each(rckpt_io_t *io, unsigned n, unsigned inflight,
			 void (*oid)(void *arg, unsigned i, char *buf, size_t cap), void *arg,
			 const char *cls, const char *method, const rckpt_buf_t *in, int same,
			 rckpt_buf_t *out, int *rcs, unsigned *failed,
			 void (*each)(void *arg, unsigned i, int rc), void *each_arg)
{
	rckpt_io_window_t w;
	fan_t f = { rcs, failed, 0, each, each_arg };
	unsigned i;
	int rc = rckpt_io_window_init(&w, io, inflight < n ? inflight : n, 0, fan_ended, &f);

	if (rc)
		return rc;
	for (i = 0; i < n && f.rc == 0; i++) {
		const rckpt_buf_t *m = same ? &in[0] : &in[i];
		char name[96];
		oid(arg, i, name, sizeof(name));
		rc = rckpt_io_window_exec(&w, name, cls, method, m->p, m->len, out ? &out[i] : NULL, i);
		if (rc)
			fan_ended(&f, i, rc);
	}
	rckpt_io_window_free(&w); /* every started call ends before we return */
	return f.rc;
}

typedef struct names {
	char **s;
	unsigned n;
	size_t cap;
} names_t;

static int name_one(void *arg, const char *oid, const char *ns)
{
	names_t *l = arg;
	(void)ns;
	char **p = rckpt_grow(l->s, &l->cap, (size_t)l->n + 1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	l->s = p;
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
