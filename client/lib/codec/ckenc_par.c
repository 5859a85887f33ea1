/*
 * ckenc_par.c — a parallel loop for the encoder's independent pieces of
 * work (a search's evaluations, one tensor each). Each index runs once, on
 * whichever thread takes it next; what it writes must be its own (or its
 * thread's: slot numbers the threads from 0, this one). The result is that
 * of the lowest index that failed, as a loop in order that stops there
 * would return.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "ckenc_impl.h"

#include <sched.h>
#include <unistd.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PAR_THREADS_MAX 64

typedef struct par {
	int (*fn)(void *arg, unsigned i, unsigned slot);
	void *arg;
	unsigned n, next, failed_at;
	int rc;
	pthread_mutex_t mu;
} par_t;

typedef struct slot {
	par_t *p;
	unsigned s;
} slot_t;

static void *par_run(void *sl_)
{
	const slot_t *sl = sl_;
	par_t *p = sl->p;
	for (;;) {
		unsigned i;
		int rc;
		pthread_mutex_lock(&p->mu);
		/* once an index failed, later ones are not started */
		i = p->next < p->n && p->next < p->failed_at ? p->next++ : p->n;
		pthread_mutex_unlock(&p->mu);
		if (i == p->n)
			return NULL;
		if ((rc = p->fn(p->arg, i, sl->s)) != 0) {
			pthread_mutex_lock(&p->mu);
			if (i < p->failed_at) {
				p->failed_at = i;
				p->rc = rc;
			}
			pthread_mutex_unlock(&p->mu);
		}
	}
}

int ckenc_parallel_slots(unsigned n, unsigned threads, int (*fn)(void *arg, unsigned i, unsigned slot),
			 void *arg)
{
	par_t p = { fn, arg, n, 0, n, 0, PTHREAD_MUTEX_INITIALIZER };
	pthread_t tid[PAR_THREADS_MAX];
	slot_t sl[PAR_THREADS_MAX];
	unsigned t, started = 0;

	if (threads > PAR_THREADS_MAX)
		threads = PAR_THREADS_MAX;
	if (threads > n)
		threads = n;
	for (t = 0; t < threads || t == 0; t++)
		sl[t] = (slot_t){ &p, t };
	for (t = 1; t < threads; t++) { /* this thread is the first */
		if (pthread_create(&tid[t], NULL, par_run, &sl[t]))
			break; /* fewer threads: the rest runs here */
		started++;
	}
	par_run(&sl[0]);
	for (t = 1; t <= started; t++)
		pthread_join(tid[t], NULL);
	return p.rc;
}

typedef struct plain {
	int (*fn)(void *arg, unsigned i);
	void *arg;
} plain_t;

static int plain_run(void *arg, unsigned i, unsigned slot)
{
	const plain_t *pl = arg;
	(void)slot;
	return pl->fn(pl->arg, i);
}

int ckenc_parallel_for(unsigned n, unsigned threads, int (*fn)(void *arg, unsigned i), void *arg)
{
	plain_t pl = { fn, arg };
	return ckenc_parallel_slots(n, threads, plain_run, &pl);
}

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
 * first, this thread's, e's own); as ckenc_parallel_for otherwise. */
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
	rc = ckenc_parallel_slots(n, threads, on_view, &v);
	free(v.view);
	return rc;
}

unsigned rckpt_ckenc_cpus(unsigned max)
{
	cpu_set_t set;
	long n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : max && (unsigned long)n > max ? max : (unsigned)n;
}
