/*
 * rckpt_par.h — a parallel loop over independent pieces of work (an
 * encoder's tensors or chunks, a decoder's chunks), and the CPUs a process
 * may use.
 */
#ifndef RCKPT_PAR_H
#define RCKPT_PAR_H

/* fn(arg, i, slot) for every i of [0, n), each once, on up to `threads`
 * threads (this one among them; fewer when threads cannot be started):
 * whichever thread is free takes the next index. slot numbers the threads
 * from 0 (this one), for scratch of their own. What fn writes must be its
 * own index's or its slot's. Returns what a loop in order that stopped at
 * the first failure would: the result of the lowest index that failed, or
 * 0; indices after a failed one may not run. */
int rckpt_par_slots(unsigned n, unsigned threads, int (*fn)(void *arg, unsigned i, unsigned slot), void *arg);

/* The same without slots. */
int rckpt_par_for(unsigned n, unsigned threads, int (*fn)(void *arg, unsigned i), void *arg);

/* The CPUs this process may run on (its affinity: taskset, cgroup cpusets,
 * containers), at most max when max is not 0; at least 1. */
unsigned rckpt_cpus(unsigned max);

#endif /* RCKPT_PAR_H */
