/*
 * store_fx.c — the fixture of the store's fault tests (store_fx.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mem_io.h"
#include "rckpt.h"
#include "rckpt_internal.h"
#include "store_fx.h"
#include "bf16_round.h"

/* ---- failing an allocation of the library ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);

/* Each call site fails once: an armed fault fails the next allocation from
 * a site that has not failed yet, so a loop that arms it until nothing
 * fails any more has failed every allocation site the call reaches. */
#define MAX_SITES 4096
static const void *failed_site[MAX_SITES];
static unsigned nfailed_sites;
static int alloc_armed;
int alloc_struck;

static int alloc_fails(const void *site)
{
	unsigned i;
	if (!alloc_armed || mem_pool_busy())
		return 0;
	for (i = 0; i < nfailed_sites; i++)
		if (failed_site[i] == site)
			return 0;
	if (nfailed_sites == MAX_SITES)
		return 0;
	failed_site[nfailed_sites++] = site;
	alloc_armed = 0;
	alloc_struck = 1;
	return 1;
}

void *__wrap_malloc(size_t n)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __real_realloc(p, n);
}

/* Arms the next allocation from a site that has not failed yet (on, 1),
 * or disarms (0); sites_forget starts the list of failed sites over. */
void fail_allocation(int on)
{
	if (on)
		alloc_struck = 0;
	alloc_armed = on;
}

void sites_forget(void)
{
	nfailed_sites = 0;
}

/* ---- a model whose steps drift a little, as training does ---- */

const model_tensor_t MODEL[NT] = {
	{ "embed.weight", 2, { 64, 16 } }, { "fc1.bias", 1, { 48 } },
	{ "fc1.weight", 2, { 48, 64 } },   { "fc2.weight", 2, { 10, 48 } },
	{ "norm.weight", 1, { 48 } },
};

uint64_t numel(unsigned t)
{
	return MODEL[t].shape[0] * (MODEL[t].ndim > 1 ? MODEL[t].shape[1] : 1);
}

static double gauss(uint64_t *x)
{
	uint64_t a, b;
	double u, v;
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	a = *x >> 11;
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	b = *x >> 11;
	u = ((double)a + 1) / 9007199254740993.0;
	v = (double)b / 9007199254740992.0;
	return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}


/* Step s of the run: step 0's values plus s small moves. */
void model_at(model_t *m, unsigned s)
{
	unsigned t, k;
	for (t = 0; t < NT; t++) {
		uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1), i;
		if (m->v[t] == NULL)
			assert_non_null(m->v[t] = __real_malloc(4 * numel(t)));
		for (i = 0; i < numel(t); i++)
			m->v[t][i] = (float)(0.05 * gauss(&x));
		for (k = 1; k <= s; k++)
			for (i = 0; i < numel(t); i++)
				m->v[t][i] += (float)(0.002 * gauss(&x));
		m->t[t].name = MODEL[t].name;
		m->t[t].dtype = RCKPT_F32;
		m->t[t].ndim = MODEL[t].ndim;
		memcpy(m->t[t].shape, MODEL[t].shape, sizeof(MODEL[t].shape));
		m->t[t].data = m->v[t];
	}
}

void model_free(model_t *m)
{
	unsigned t;
	for (t = 0; t < NT; t++)
		free(m->v[t]);
}

/* ---- the fixture: a pool, a handle on it, a writer ---- */



static int open_writer(fx_t *f)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	o.writer = 1;
	o.chunk_params = 1024; /* a few chunks: appends in the middle of a step */
	o.inflight = 2;        /* and some reaped while others are encoded */
	o.compute = RCKPT_COMPUTE_CPU;
	return rckpt_job_open(f->h, &f->j, "faults", &o);
}

int setup(void **state)
{
	fx_t *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(mem_pool_create(&f->pool), 0);
	assert_int_equal(rckpt_create(&f->h), 0);
	assert_int_equal(rckpt_set_io(f->h, mem_pool_open, f->pool, "mem"), 0);
	assert_int_equal(open_writer(f), 0);
	f->next = 1;
	*state = f;
	return 0;
}

int teardown(void **state)
{
	fx_t *f = *state;
	unsigned i, t;
	rckpt_job_close(f->j);
	rckpt_destroy(f->h);
	mem_pool_destroy(f->pool);
	model_free(&f->m);
	for (i = 0; i < f->ncommitted; i++)
		for (t = 0; t < NT; t++)
			free(f->got[i][t]);
	free(f);
	return 0;
}

/* Restores step s into out[t] (fp32, numel(t) each). */
int restore(fx_t *f, uint64_t s, float **out)
{
	rckpt_restored_t *r = NULL;
	unsigned t;
	int rc = rckpt_job_restore(f->j, s, &r, NULL);
	for (t = 0; rc == 0 && t < NT; t++) {
		int i = rckpt_restored_find(r, MODEL[t].name);
		if (i < 0) {
			rc = i;
			break;
		}
		rc = rckpt_restored_read(r, (unsigned)i, out[t], 4 * numel(t));
	}
	rckpt_restored_free(r);
	return rc;
}

/* A step that was just committed: what it restores to is kept, and its
 * 1-D tensors must be the source's bf16. */
void committed(fx_t *f, uint64_t s)
{
	unsigned t, i = f->ncommitted++;
	assert_true(i < MAX_COMMITTED);
	f->step[i] = s;
	for (t = 0; t < NT; t++)
		assert_non_null(f->got[i][t] = __real_malloc(4 * numel(t)));
	assert_int_equal(restore(f, s, f->got[i]), 0);
	for (t = 0; t < NT; t++)
		if (MODEL[t].ndim == 1) {
			float *b = __real_malloc(4 * numel(t));
			assert_non_null(b);
			memcpy(b, f->m.v[t], 4 * numel(t));
			bf16_round(b, numel(t));
			assert_memory_equal(f->got[i][t], b, 4 * numel(t));
			free(b);
		}
}

/* Nothing committed is lost: every committed step restores as it did,
 * and the head is the last of them. */
void nothing_lost(fx_t *f)
{
	float *now[NT];
	rckpt_step_info_t si[MAX_COMMITTED];
	unsigned i, t, n = 0;
	int more = 0;
	for (t = 0; t < NT; t++)
		assert_non_null(now[t] = __real_malloc(4 * numel(t)));
	for (i = 0; i < f->ncommitted; i++) {
		if (restore(f, f->step[i], now) != 0)
			fail_msg("committed step %llu does not restore: %s", (unsigned long long)f->step[i],
				 rckpt_errmsg(f->h));
		for (t = 0; t < NT; t++)
			assert_memory_equal(now[t], f->got[i][t], 4 * numel(t));
	}
	for (t = 0; t < NT; t++)
		free(now[t]);
	assert_int_equal(rckpt_job_steps(f->j, RCKPT_LATEST, si, MAX_COMMITTED, &n, &more), 0);
	assert_int_equal(n, f->ncommitted);
	for (i = 0; i < n; i++)
		assert_int_equal(si[i].step, f->step[i]);
}

/* Saves the next step of the run; 0 or the save's error. */
int save_next(fx_t *f)
{
	const unsigned s = f->next++;
	int rc;
	model_at(&f->m, s);
	rc = rckpt_job_save(f->j, s, f->m.t, NT, NULL, 0, NULL);
	if (rc == 0)
		committed(f, s);
	return rc;
}

void assert_says(fx_t *f, const char *what)
{
	if (strstr(rckpt_errmsg(f->h), what) == NULL)
		fail_msg("the error \"%s\" does not say \"%s\"", rckpt_errmsg(f->h), what);
}
