/*
 * store_fx.h — the fixture of the store's fault tests (test_store_faults.c,
 * test_admin_faults.c): librckpt over the in-memory pool of
 * tests/common/mem_io.c, a model whose steps drift a little, the record of
 * what every committed step restored to, and failing the library's k-th
 * allocation (the programs link with --wrap=malloc,calloc,realloc).
 */
#ifndef RCKPT_STORE_FX_H
#define RCKPT_STORE_FX_H

#include <stddef.h>
#include <stdint.h>

#include "mem_io.h"
#include "rckpt.h"

void *__real_malloc(size_t n);

/* Arms the next allocation from a site that has not failed yet (on, 1),
 * or disarms (0); alloc_struck says whether it struck. sites_forget starts
 * the list of failed sites over. */
void fail_allocation(int on);
void sites_forget(void);
extern int alloc_struck;

#define NT 5
typedef struct model_tensor {
	const char *name;
	unsigned ndim;
	uint64_t shape[2];
} model_tensor_t;
extern const model_tensor_t MODEL[NT];
uint64_t numel(unsigned t);

typedef struct model {
	float *v[NT];
	rckpt_tensor_t t[NT];
} model_t;

/* Step s of the run: step 0's values plus s small moves. */
void model_at(model_t *m, unsigned s);
void model_free(model_t *m);

#define MAX_COMMITTED 64

typedef struct fx {
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *j;
	model_t m;
	unsigned next; /* the next step to save */
	/* what each committed step restored to when it was committed */
	uint64_t step[MAX_COMMITTED];
	float *got[MAX_COMMITTED][NT];
	unsigned ncommitted;
} fx_t;

/* cmocka setup/teardown: a pool, a handle on it, a writer of job "faults". */
int setup(void **state);
int teardown(void **state);
/* Restores step s into out[t] (fp32, numel(t) each). */
int restore(fx_t *f, uint64_t s, float **out);
/* Step s was just committed: keeps what it restores to; its lossless
 * tensors must be the source's bits. */
void committed(fx_t *f, uint64_t s);
/* Every committed step restores as it did, and they are what is listed. */
void nothing_lost(fx_t *f);
/* Saves the next step of the run; 0 or the save's error. */
int save_next(fx_t *f);
/* The handle's last error says `what`. */
void assert_says(fx_t *f, const char *what);

#endif /* RCKPT_STORE_FX_H */
