/*
 * ckenc_par.c — the encoder's parallel loops (rckpt_par.h) over views of
 * it whose block scratch is each thread's own, and that scratch.
 */
#include "ckenc_impl.h"

#include <stdlib.h>
#include <string.h>

unsigned ckenc_threads_for(const rckpt_ckenc_opts_t *o, uint64_t work)
{
	/* below the floor, starting threads costs more than the work */
	return work < o->par_min_work ? 1 : o->threads;
}

/* ---- helper threads' scratch, and loops over views of the encoder ---- */

void ckenc_workers_free(rckpt_ckenc_t *e)
{
	unsigned i;
	for (i = 0; i < e->nworkers; i++) {
		free(e->workers[i].wblk);
		free(e->workers[i].nblk);
		free(e->workers[i].iblk);
		free(e->workers[i].pblk);
		rckpt_istream_scratch_free(&e->workers[i].is);
	}
	free(e->workers);
	e->workers = NULL;
	e->nworkers = 0;
}

/* At least n helpers' scratch in e->workers: 0 or -ENOMEM. */
int ckenc_workers_ensure(rckpt_ckenc_t *e, unsigned n)
{
	struct ckenc_worker *w;
	unsigned i;
	if (e->nworkers >= n)
		return 0;
	if ((w = realloc(e->workers, n * sizeof(*w))) == NULL)
		return -ENOMEM;
	e->workers = w;
	for (i = e->nworkers; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].wblk = malloc(4 * (size_t)BLK);
		w[i].nblk = malloc(4 * (size_t)BLK);
		w[i].iblk = malloc(BLK);
		w[i].pblk = malloc(2 * (size_t)BLK);
		e->nworkers = i + 1;
		if (!w[i].wblk || !w[i].nblk || !w[i].iblk || !w[i].pblk)
			return -ENOMEM;
	}
	return 0;
}

/* fn(view, arg, i) for every i of [0, n) on up to `threads` threads (the
 * CPU backend), each with a view of e whose block scratch is its own (the
 * first, this thread's, e's own); as rckpt_par_for otherwise. */
typedef struct views {
	int (*fn)(rckpt_ckenc_t *view, void *arg, unsigned i);
	void *arg;
	rckpt_ckenc_t *view;
} views_t;

static int on_view(void *arg, unsigned i, unsigned slot)
{
	const views_t *v = arg;
	return v->fn(&v->view[slot], v->arg, i);
}

int ckenc_parallel_views(rckpt_ckenc_t *e, unsigned n, unsigned threads,
			 int (*fn)(rckpt_ckenc_t *view, void *arg, unsigned i), void *arg)
{
	views_t v = { fn, arg, NULL };
	unsigned i;
	int rc;

	if (threads > RCKPT_CKENC_THREADS_MAX)
		threads = RCKPT_CKENC_THREADS_MAX;
	if (threads > n)
		threads = n;
	if (!e->be->host || threads < 2 || ckenc_workers_ensure(e, threads - 1) ||
	    (v.view = calloc(threads, sizeof(*v.view))) == NULL) {
		for (i = 0, rc = 0; i < n && rc == 0; i++) /* one at a time, in order */
			rc = fn(e, arg, i);
		return rc;
	}
	for (i = 0; i < threads; i++) {
		v.view[i] = *e;
		if (i > 0) {
			const struct ckenc_worker *w = &e->workers[i - 1];
			v.view[i].wblk = w->wblk;
			v.view[i].nblk = w->nblk;
			v.view[i].iblk = w->iblk;
			v.view[i].pblk = w->pblk;
		}
	}
	rc = rckpt_par_slots(n, threads, on_view, &v);
	free(v.view);
	return rc;
}
