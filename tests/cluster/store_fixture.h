/*
 * store_fixture.h — what the cluster tests of the store API share
 * (test_store_api.c, test_store_partial.c): a small model that drifts step
 * by step, the check that a restored step is that model within the codec's
 * error, and a fixture connected to the cluster of CEPH_CONF.
 */
#ifndef RCKPT_STORE_FIXTURE_H
#define RCKPT_STORE_FIXTURE_H

#include <stdint.h>

#include <rados/librados.h>

#include "rckpt.h"

#define NT 3
#define ROWS 256
#define COLS 300 /* 76800 elements: more than one block of the encoder */

/* A small model: two matrices (fp32, bf16) and a bias; `step` drifts it. */
typedef struct model {
	float w0[ROWS * COLS];
	uint16_t w1[ROWS * COLS];
	float bias[COLS];
	rckpt_tensor_t t[NT];
} model_t;


uint64_t lcg(uint64_t *s);
uint16_t to_bf16(float f);
float from_bf16(uint16_t h);
/* The model at step `step`. */
void model_init(model_t *m, unsigned step);
/* Restores step of j and checks it against m: each matrix within a few
 * percent of relative squared error, the bias exact. */
void check_restored(rckpt_job_t *j, uint64_t step, const model_t *m);

typedef struct fixture {
	rckpt_t *h;
	rados_t cl;
	rados_ioctx_t io;
} fixture_t;

/* cmocka group setup/teardown: *state is a fixture_t, or NULL without a
 * cluster (each test then skips, or fails where one is required). */
int group_setup(void **state);
int group_teardown(void **state);

#define NEED_CLUSTER(f)                                    \
	do {                                               \
		if ((f) == NULL) {                         \
			TEST_SKIP(TEST_NEED_CLUSTER, "no cluster (CEPH_CONF is not set)"); \
		}                                          \
	} while (0)

rckpt_job_t *open_job(rckpt_t *h, const char *name, int writer, uint64_t chunk);
/* The head of job name (RCKPT_LATEST: none); *count the steps listed. */
uint64_t head_of(rckpt_t *h, const char *name, unsigned *count);

/* test_store_partial.c */
void test_partial(void **state);
void test_policy(void **state);

#endif /* RCKPT_STORE_FIXTURE_H */
