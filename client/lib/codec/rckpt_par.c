/*
 * rckpt_par.c — a parallel loop over independent pieces of work, and the
 * CPUs a process may use (rckpt_par.h).
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "rckpt_par.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

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

int rckpt_par_slots(unsigned n, unsigned threads, int (*fn)(void *arg, unsigned i, unsigned slot),
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

int rckpt_par_for(unsigned n, unsigned threads, int (*fn)(void *arg, unsigned i), void *arg)
{
	plain_t pl = { fn, arg };
	return rckpt_par_slots(n, threads, plain_run, &pl);
}

unsigned rckpt_cpus(unsigned max)
{
	cpu_set_t set;
	long n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : max && (unsigned long)n > max ? max : (unsigned)n;
}
