/*
 * store_fixture.c — the store API tests' model and cluster fixture
 * (store_fixture.h).
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_skip.h"
#include "bf16_round.h"
#include <rados/librados.h>

#include "store_fixture.h"

uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

static float bell(uint64_t *s)
{
	double u = 0;
	int r;
	for (r = 0; r < 4; r++)
		u += (double)(lcg(s) & 0xffffff) / 16777216.0;
	return (float)((u - 2.0) * 0.05);
}

uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

void model_init(model_t *m, unsigned step)
{
	uint64_t s = 99, d = 1000 + step;
	size_t i;
	for (i = 0; i < ROWS * COLS; i++) {
		float a = bell(&s), b = bell(&s);
		/* every step moves one value in eight a little */
		if ((lcg(&d) & 7) == 0)
			a += 0.001f * (float)step;
		m->w0[i] = a;
		m->w1[i] = to_bf16(b);
	}
	for (i = 0; i < COLS; i++)
		m->bias[i] = 0.01f * (float)i + 0.001f * (float)step;
	m->t[0] = (rckpt_tensor_t){ "layer0.weight", RCKPT_F32, 2, { ROWS, COLS }, m->w0 };
	m->t[1] = (rckpt_tensor_t){ "layer1.weight", RCKPT_BF16, 2, { ROWS, COLS }, m->w1 };
	m->t[2] = (rckpt_tensor_t){ "layer1.bias", RCKPT_F32, 1, { COLS }, m->bias };
}

/* The restored step is the model within the codec's error: the relative
 * squared error of each matrix under a few percent, the bias exact. */
void check_restored(rckpt_job_t *j, uint64_t step, const model_t *m)
{
	rckpt_restored_t *r = NULL;
	float *w0 = malloc(sizeof(float) * ROWS * COLS), *bias = malloc(sizeof(float) * COLS);
	uint16_t *w1 = malloc(2 * ROWS * COLS);
	double n0 = 0, d0 = 0, n1 = 0, d1 = 0;
	size_t i;

	assert_non_null(w0);
	assert_non_null(w1);
	assert_non_null(bias);
	assert_int_equal(rckpt_job_restore(j, step, &r, NULL), 0);
	assert_int_equal(rckpt_restored_step(r), step);
	assert_int_equal(rckpt_restored_count(r), NT);
	/* tensors come back in name order: layer0.weight, layer1.bias, layer1.weight */
	assert_int_equal(rckpt_restored_read(r, 0, w0, sizeof(float) * ROWS * COLS), 0);
	assert_int_equal(rckpt_restored_read(r, 1, bias, sizeof(float) * COLS), 0);
	assert_int_equal(rckpt_restored_read(r, 2, w1, 2 * ROWS * COLS), 0);
	for (i = 0; i < ROWS * COLS; i++) {
		double a = m->w0[i], b = from_bf16(m->w1[i]);
		n0 += (w0[i] - a) * (w0[i] - a);
		d0 += a * a;
		n1 += (from_bf16(w1[i]) - b) * (from_bf16(w1[i]) - b);
		d1 += b * b;
	}
	if (!(n0 / d0 < 0.05)) print_message("n0/d0 %g n1/d1 %g\n", n0 / d0, n1 / d1);
	assert_true(n0 / d0 < 0.05);
	assert_true(n1 / d1 < 0.05);
	memcpy(w0, m->bias, sizeof(float) * COLS); /* the bias: its bf16 */
	bf16_round(w0, COLS);
	assert_memory_equal(bias, w0, sizeof(float) * COLS);
	rckpt_restored_free(r);
	free(w0);
	free(w1);
	free(bias);
}


int group_setup(void **state)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	const char *conf = getenv("CEPH_CONF");
	fixture_t *f;

	*state = NULL;
	if (conf == NULL || *conf == '\0') { /* each test skips, or fails where required */
		print_message("no cluster: CEPH_CONF is not set (./dev.sh test starts one)\n");
		return 0;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL || rckpt_create(&f->h))
		return -1;
	o.timeout_s = 20;
	if (rckpt_connect(f->h, &o) || rados_create(&f->cl, "admin") ||
	    rados_conf_read_file(f->cl, conf) || rados_connect(f->cl) ||
	    rados_ioctx_create(f->cl, "rckpt", &f->io)) {
		print_message("cannot connect: %s\n", rckpt_errmsg(f->h));
		return -1;
	}
	*state = f;
	return 0;
}

int group_teardown(void **state)
{
	fixture_t *f = *state;
	if (f) {
		rados_ioctx_destroy(f->io);
		rados_shutdown(f->cl);
		rckpt_destroy(f->h);
		free(f);
	}
	return 0;
}


rckpt_job_t *open_job(rckpt_t *h, const char *name, int writer, uint64_t chunk)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j = NULL;
	o.writer = writer;
	o.chunk_params = chunk;
	o.lease_s = 5;
	if (rckpt_job_open(h, &j, name, &o))
		fail_msg("open %s: %s", name, rckpt_errmsg(h));
	return j;
}

uint64_t head_of(rckpt_t *h, const char *name, unsigned *count)
{
	rckpt_job_t *r = open_job(h, name, 0, 0);
	rckpt_step_info_t si[16];
	unsigned n = 0;
	int more = 0;
	assert_int_equal(rckpt_job_steps(r, RCKPT_LATEST, si, 16, &n, &more), 0);
	rckpt_job_close(r);
	if (count)
		*count = n;
	return n ? si[n - 1].step : RCKPT_LATEST;
}

