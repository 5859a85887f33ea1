/*
 * test_exact.c — the exact tier (issues 26 and 63, store.md "Exact steps"),
 * over the in-memory pool that runs the real object-class methods, to a
 * class that reads version 5 records (an exact step's records keep every
 * value, in byte planes) and to one told to answer version 4 (a lossy
 * record and a residual beside it):
 *  - an exact step restores every tensor (fp32, bf16, fp16, and a lossless
 *    vector) to the bytes handed in, their SHA-256 equal, before and after
 *    compactions and through a branch; it restores exact with the chain
 *    folded in the client too; with residuals, lossy saves after it are
 *    deltas on it; with whole values, the next exact step is a delta on it
 *    and smaller, and the lossy step after it a base;
 *  - `pin --exact` keeps a milestone exact under retention, and is refused
 *    for a step not saved exact; retention that drops an exact step drops
 *    its residuals; gc removes residuals of an abandoned step;
 *  - damage: every residual byte flipped, or a residual missing, fails the
 *    restore and says so; exact and partial, exact on a read-only job, are
 *    refused.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "mem_io.h"
#include "rckpt.h"
#include "rckpt_internal.h"
#include "rckpt_store_wire.h"
#include "rckpt_wire.h"
#include "cls_rckpt_methods.h"
#include "bf16_round.h"

#define CHUNK ((uint64_t)1 << 15)
#define NW ((uint64_t)80000) /* fp32 matrix: 3 chunks */
#define NB ((uint64_t)20000) /* bf16 */
#define NH ((uint64_t)12000) /* fp16 */
#define NV ((uint64_t)300)   /* fp32 vector, kept lossless */
#define NT 4

typedef struct model {
	float w[NW], v[NV];
	uint16_t b[NB], f[NH];
} model_t;

/* 1: the class is told to read records up to version 4 (residuals) */
static int old_class;

typedef struct fx {
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *j;
	rckpt_job_opts_t o;
	model_t m;
} fx_t;

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

/* Step s's model: smooth fields with noise that changes every step, full
 * mantissas (nothing a lossless coder could shortcut). */
static void model_at(model_t *m, unsigned s)
{
	uint64_t i;
	for (i = 0; i < NW; i++)
		m->w[i] = (float)(0.05 * sin(0.003 * (double)i + 0.01 * s) +
				  0.001 * ((double)(mix((uint32_t)i ^ (s << 20)) & 0xffff) / 65536.0 - 0.5));
	for (i = 0; i < NV; i++)
		m->v[i] = 1.0f + 0.01f * (float)((mix((uint32_t)i * 7 + s) & 0xff) - 128) / 128.0f;
	for (i = 0; i < NB; i++) { /* bf16: the top half of an fp32 */
		float x = (float)(0.02 * cos(0.01 * (double)i + 0.02 * s)) +
			  0.0005f * (float)((mix((uint32_t)i * 3 + (s << 18)) & 0xff) - 128) / 128.0f;
		uint32_t u;
		memcpy(&u, &x, 4);
		m->b[i] = (uint16_t)(u >> 16);
	}
	for (i = 0; i < NH; i++) { /* fp16: sign, exponent 8..13 (2^-7..2^-2), any mantissa */
		uint32_t r = mix((uint32_t)i * 11 + (s << 16));
		m->f[i] = (uint16_t)(((r >> 31) << 15) | ((8 + (r >> 10) % 6) << 10) | (r & 0x3ff));
	}
}

static unsigned tensors(model_t *m, rckpt_tensor_t *t)
{
	/* name order: "b", "f", "v", "w" */
	t[0] = (rckpt_tensor_t){ "b", RCKPT_BF16, 2, { 100, NB / 100 }, m->b };
	t[1] = (rckpt_tensor_t){ "f", RCKPT_F16, 2, { 120, NH / 120 }, m->f };
	t[2] = (rckpt_tensor_t){ "v", RCKPT_F32, 1, { NV }, m->v };
	t[3] = (rckpt_tensor_t){ "w", RCKPT_F32, 2, { 400, NW / 400 }, m->w };
	return NT;
}

static void sha256(uint8_t out[32], const void *p, size_t n)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	assert_non_null(c);
	assert_true(EVP_DigestInit_ex(c, EVP_sha256(), NULL) && EVP_DigestUpdate(c, p, n) &&
		    EVP_DigestFinal_ex(c, out, NULL));
	EVP_MD_CTX_free(c);
}

static void open_fx(fx_t *F)
{
	memset(F, 0, sizeof(*F));
	assert_int_equal(mem_pool_create(&F->pool), 0);
	assert_int_equal(rckpt_create(&F->h), 0);
	assert_int_equal(rckpt_set_io(F->h, mem_pool_open, F->pool, "mem"), 0);
	F->o = (rckpt_job_opts_t)RCKPT_JOB_OPTS_INIT;
	F->o.writer = 1;
	F->o.compute = RCKPT_COMPUTE_CPU;
	F->o.chunk_params = CHUNK;
	if (old_class) { /* this class's answer to version, its records cut to 4 */
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		rckpt_wire_version_t v;
		uint8_t rep[RCKPT_WIRE_VERSION_BOUND];
		size_t len;
		unsigned i;
		assert_int_equal(cls_rckpt_version(NULL, 0, &out), 0);
		assert_int_equal(rckpt_wire_version_decode(&v, out.p, out.len), 0);
		rckpt_buf_free(&out);
		for (i = 0; i < v.nformats && strcmp(v.formats[i].name, "ckpt-record") != 0; i++)
			;
		assert_true(i < v.nformats && v.formats[i].max_version >= 5);
		v.formats[i].max_version = 4;
		assert_int_equal(rckpt_wire_version_encode(rep, sizeof(rep), &len, &v), 0);
		mem_pool_forge(F->pool, "version", rep, len);
	}
	assert_int_equal(rckpt_job_open(F->h, &F->j, "ex", &F->o), 0);
}

static void close_fx(fx_t *F)
{
	rckpt_job_close(F->j);
	rckpt_destroy(F->h);
	mem_pool_destroy(F->pool);
}

static int save(fx_t *F, unsigned s, int exact)
{
	rckpt_tensor_t t[NT];
	unsigned n;
	model_at(&F->m, s);
	n = tensors(&F->m, t);
	assert_int_equal(rckpt_job_set_exact(F->j, exact), 0);
	return rckpt_job_save(F->j, s, t, n, NULL, 0, NULL);
}

/* How step s of job j restores against the model of step s: 1 when every
 * tensor's SHA-256 is the source's (and the handle says exact), 0 when
 * lossy (the fp32 matrix within 5% relative error). */
static int restore_cmp(rckpt_job_t *j, unsigned s)
{
	rckpt_restored_t *r = NULL;
	static model_t src;
	rckpt_tensor_t t[NT];
	unsigned i, same = 0;
	int rc;

	if ((rc = rckpt_job_restore(j, s, &r, NULL)))
		fail_msg("step %u does not restore (%d)", s, rc);
	model_at(&src, s);
	tensors(&src, t);
	assert_int_equal(rckpt_restored_count(r), NT);
	for (i = 0; i < NT; i++) {
		uint64_t n = t[i].ndim == 1 ? t[i].shape[0] : t[i].shape[0] * t[i].shape[1];
		size_t bytes = (size_t)n * (t[i].dtype == RCKPT_F32 ? 4 : 2);
		uint8_t *got = malloc(bytes), a[32], b[32];
		assert_non_null(got);
		assert_int_equal(rckpt_restored_read(r, i, got, bytes), 0);
		sha256(a, got, bytes);
		sha256(b, t[i].data, bytes);
		same += memcmp(a, b, 32) == 0;
		if (i == 2) { /* the vector: the source's bits, or their bf16 */
			float *want = malloc(bytes);
			assert_true(want && t[i].dtype == RCKPT_F32);
			memcpy(want, t[i].data, bytes);
			if (!rckpt_restored_exact(r))
				bf16_round(want, n);
			assert_memory_equal(got, want, bytes);
			free(want);
		}
		if (i == 3) {
			double num = 0, den = 0;
			const float *g = (const float *)got, *w = t[i].data;
			uint64_t k;
			for (k = 0; k < n; k++) {
				num += (g[k] - w[k]) * (double)(g[k] - w[k]);
				den += w[k] * (double)w[k];
			}
			if (!(num / den < 0.05))
				fail_msg("step %u: relative error %g", s, num / den);
		}
		free(got);
	}
	rc = rckpt_restored_exact(r);
	rckpt_restored_free(r);
	if (rc)
		assert_int_equal(same, NT); /* exact: every tensor's bytes */
	else
		assert_true(same < NT); /* lossy: the quantized ones differ */
	return rc;
}

static const rckpt_step_info_t *info(fx_t *F, unsigned s, rckpt_step_info_t *si, unsigned cap)
{
	unsigned n = 0, k;
	int more = 0;
	assert_int_equal(rckpt_job_steps(F->j, RCKPT_LATEST, si, cap, &n, &more), 0);
	for (k = 0; k < n; k++)
		if (si[k].step == s)
			return &si[k];
	return NULL;
}

typedef struct count {
	mem_pool_t *pool;
	const char *ns;
	unsigned exact[64]; /* residual objects by step */
} count_t;

static int count_one(void *arg, const char *oid, const char *ns)
{
	count_t *c = arg;
	uint64_t step;
	uint32_t chunk;
	if (strcmp(ns, c->ns) == 0 && rckpt_store_parse_exact_oid(oid, &step, &chunk) == 0 && step < 64)
		c->exact[step]++;
	return 0;
}

static count_t residuals(fx_t *F, const char *ns)
{
	count_t c;
	rckpt_io_t *io;
	memset(&c, 0, sizeof(c));
	c.pool = F->pool;
	c.ns = ns;
	assert_int_equal(mem_pool_open(F->pool, RCKPT_IO_ALL_NS, &io), 0);
	assert_int_equal(io->ops->objects(io, count_one, &c), 0);
	io->ops->close(io);
	return c;
}

static void test_exact_steps(void **state)
{
	fx_t F;
	rckpt_step_info_t si[64];
	const rckpt_step_info_t *x;
	const rckpt_retention_t keep2 = { 2, 0 };
	rckpt_job_opts_t ro = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *main_j;
	uint64_t lossy_bytes, exact_bytes;
	unsigned s, nres;

	(void)state;
	open_fx(&F);
	assert_int_equal(save(&F, 1, 0), 0);
	assert_int_equal(save(&F, 2, 1), 0);
	for (s = 3; s <= 6; s++)
		assert_int_equal(save(&F, s, s == 4), 0);
	assert_int_equal(restore_cmp(F.j, 1), 0);
	assert_int_equal(restore_cmp(F.j, 2), 1);
	assert_int_equal(restore_cmp(F.j, 3), 0);
	assert_int_equal(restore_cmp(F.j, 4), 1);
	assert_int_equal(restore_cmp(F.j, 5), 0);
	/* the exact step is a base; with residuals the lossy steps after it
	 * chain from it, with whole values the first of them is a base */
	x = info(&F, 2, si, 64);
	assert_non_null(x);
	assert_true((x->flags & RCKPT_STEP_EXACT) && x->parent == RCKPT_LATEST);
	exact_bytes = x->enc_bytes;
	x = info(&F, 3, si, 64);
	assert_true(!(x->flags & RCKPT_STEP_EXACT) && x->parent == (old_class ? 2 : RCKPT_LATEST));
	x = info(&F, 1, si, 64);
	lossy_bytes = x->enc_bytes;
	print_message("exact step: %" PRIu64 " bytes, lossy base %" PRIu64 ", raw %" PRIu64 "\n",
		      exact_bytes, lossy_bytes, x->raw_bytes);
	assert_true(exact_bytes > lossy_bytes && exact_bytes < x->raw_bytes);
	nres = residuals(&F, "ex").exact[2]; /* a residual per chunk with quantized values */
	if (old_class)
		assert_true(nres >= 3 && nres <= x->nchunks);
	else
		assert_int_equal(nres, 0);

	/* pin --exact: refused for a lossy step, taken for an exact one */
	assert_int_equal(rckpt_job_pin(F.j, 3, RCKPT_PIN_EXACT), -EINVAL);
	assert_int_equal(rckpt_job_pinned(F.j, 3), 0);
	assert_int_equal(rckpt_job_pin(F.j, 2, RCKPT_PIN_EXACT), 0);
	assert_int_equal(rckpt_job_pinned(F.j, 2), 1);
	assert_int_equal(rckpt_job_pin(F.j, 77, RCKPT_PIN_EXACT), -ENOENT);

	/* retention: the pinned milestone stays exact; exact step 4, dropped,
	 * takes its residuals with it */
	assert_true(old_class ? residuals(&F, "ex").exact[4] >= 3 : residuals(&F, "ex").exact[4] == 0);
	assert_int_equal(rckpt_job_compact(F.j, &keep2, NULL), 0);
	assert_null(info(&F, 4, si, 64));
	assert_int_equal(residuals(&F, "ex").exact[4], 0);
	assert_int_equal(residuals(&F, "ex").exact[2], nres);
	assert_int_equal(restore_cmp(F.j, 2), 1);
	for (s = 7; s <= 9; s++) /* a delta on the last one, then compacted again */
		assert_int_equal(save(&F, s, 0), 0);
	assert_int_equal(rckpt_job_compact(F.j, &keep2, NULL), 0);
	assert_int_equal(restore_cmp(F.j, 2), 1);
	assert_int_equal(restore_cmp(F.j, 9), 0);

	/* the chain folded in the client: still the saved bits */
	setenv("RCKPT_FOLD", "client", 1);
	ro.compute = RCKPT_COMPUTE_CPU;
	main_j = F.j;
	assert_int_equal(rckpt_job_open(F.h, &F.j, "ex", &ro), 0);
	assert_int_equal(rckpt_job_set_exact(F.j, 1), -EPERM); /* read-only */
	assert_int_equal(restore_cmp(F.j, 2), 1);
	rckpt_job_close(F.j);
	unsetenv("RCKPT_FOLD");
	F.j = main_j;

	/* a branch from the exact step: its copy restores exact too */
	assert_int_equal(rckpt_job_branch(F.j, 2, 2, "ft"), 0);
	assert_int_equal(residuals(&F, "ft").exact[2], nres);
	main_j = F.j;
	assert_int_equal(rckpt_job_open(F.h, &F.j, "ft", &ro), 0);
	assert_int_equal(restore_cmp(F.j, 2), 1);
	rckpt_job_close(F.j);
	F.j = main_j;
	if (!old_class) { /* exact after exact: a delta, its values predicted */
		for (s = 10; s <= 12; s++)
			assert_int_equal(save(&F, s, s > 10), 0);
		x = info(&F, 12, si, 64);
		assert_true((x->flags & RCKPT_STEP_EXACT) && x->parent == 11);
		assert_true(x->enc_bytes < info(&F, 11, si, 64)->enc_bytes);
		assert_int_equal(info(&F, 11, si, 64)->parent, RCKPT_LATEST);
		assert_int_equal(restore_cmp(F.j, 11), 1);
		assert_int_equal(restore_cmp(F.j, 12), 1);
		assert_int_equal(restore_cmp(F.j, 10), 0);
		assert_int_equal(save(&F, 13, 0), 0); /* a lossy base again */
		assert_int_equal(info(&F, 13, si, 64)->parent, RCKPT_LATEST);
		assert_int_equal(restore_cmp(F.j, 13), 0);
		assert_int_equal(rckpt_job_compact(F.j, &keep2, NULL), 0);
		assert_int_equal(restore_cmp(F.j, 12), 1);
		assert_int_equal(restore_cmp(F.j, 2), 1);
	}
	close_fx(&F);
}

static void test_rewind_over_an_exact_step(void **state)
{
	fx_t F;
	rckpt_step_info_t si[64];
	unsigned removed = 0, s;

	(void)state;
	open_fx(&F);
	for (s = 1; s <= 4; s++) /* a lossy step after an exact one */
		assert_int_equal(save(&F, s, s == 3), 0);
	assert_true(old_class ? residuals(&F, "ex").exact[3] >= 3 : residuals(&F, "ex").exact[3] == 0);
	assert_int_equal(restore_cmp(F.j, 3), 1);
	assert_int_equal(restore_cmp(F.j, 4), 0);
	assert_int_equal(rckpt_job_rewind(F.j, 2, NULL), 0);
	/* a new, lossy step 3: the old one's residuals are not its */
	assert_int_equal(save(&F, 3, 0), 0);
	assert_false(info(&F, 3, si, 64)->flags & RCKPT_STEP_EXACT);
	assert_int_equal(restore_cmp(F.j, 3), 0);
	rckpt_job_close(F.j);
	F.j = NULL;
	{
		rckpt_job_opts_t o = F.o;
		o.writer = 1;
		assert_int_equal(rckpt_job_open(F.h, &F.j, "ex", &o), 0);
	}
	assert_int_equal(rckpt_job_gc(F.j, &removed), 0);
	assert_int_equal(residuals(&F, "ex").exact[3], 0);
	assert_true(!old_class || removed >= 3); /* the residuals, when there were any */
	assert_int_equal(restore_cmp(F.j, 3), 0);
	close_fx(&F);
}

static void test_damage(void **state)
{
	fx_t F;
	rckpt_io_t *io;
	rckpt_restored_t *r = NULL;
	rckpt_partial_t part = { 0.5, RCKPT_SELECT_ROUND_ROBIN, 0 };
	rckpt_tensor_t t[NT];
	uint8_t *obj;
	uint64_t size = 0;
	char oid[64];
	unsigned k, caught = 0;
	int rc;

	(void)state;
	open_fx(&F);
	assert_int_equal(save(&F, 1, 1), 0);
	if (!old_class) { /* no residual: damage to records is test_record's */
		close_fx(&F);
		goto partial;
	}
	assert_int_equal(mem_pool_open(F.pool, "ex", &io), 0);
	rckpt_store_exact_oid(oid, sizeof(oid), 1, 1);
	assert_int_equal(io->ops->stat(io, oid, &size), 0);
	assert_non_null(obj = malloc((size_t)size));
	assert_int_equal(io->ops->read(io, oid, obj, (size_t)size, 0), (int)size);
	/* every byte flipped in turn (200 of them spread over the object):
	 * each one fails the restore */
	for (k = 0; k < 200; k++) {
		size_t at = (size_t)((uint64_t)k * size / 200);
		obj[at] ^= 0x5a;
		assert_int_equal(io->ops->write_full(io, oid, obj, (size_t)size), 0);
		rc = rckpt_job_restore(F.j, 1, &r, NULL);
		if (rc == 0)
			rckpt_restored_free(r);
		caught += rc != 0;
		obj[at] ^= 0x5a;
	}
	assert_int_equal(caught, 200);
	assert_int_equal(io->ops->write_full(io, oid, obj, (size_t)size), 0);
	assert_int_equal(restore_cmp(F.j, 1), 1);
	/* a missing residual: the restore fails and names it */
	assert_int_equal(io->ops->remove(io, oid), 0);
	assert_int_equal(rckpt_job_restore(F.j, 1, &r, NULL), -ENOENT);
	assert_non_null(strstr(rckpt_errmsg(F.h), "is missing"));
	assert_non_null(strstr(rckpt_errmsg(F.h), oid));
	io->ops->close(io);
	free(obj);
	/* an exact partial save is refused, and nothing is written */
	close_fx(&F);
partial:
	open_fx(&F);
	rckpt_job_close(F.j);
	F.o.partial_block = 1024;
	assert_int_equal(rckpt_job_open(F.h, &F.j, "ex", &F.o), 0);
	assert_int_equal(save(&F, 1, 0), 0);
	model_at(&F.m, 2);
	tensors(&F.m, t);
	assert_int_equal(rckpt_job_set_exact(F.j, 1), 0);
	assert_int_equal(rckpt_job_save_partial(F.j, 2, t, NT, NULL, 0, &part, NULL), -EINVAL);
	assert_null(info(&F, 2, (rckpt_step_info_t[64]){ { 0 } }, 64));
	close_fx(&F);
}

/* A chunk of 2^22 fp32 values (what a writer puts in one) saved exact,
 * step after step: the records are about its raw bytes, so the writer's
 * segments hold two, and compaction (keeping the last three: a segment's
 * two records re-encoded in one call, within the class's bounds of 34 MiB
 * re-encoded and 32 MiB written) and a rewind onto an exact step both
 * work; every kept step restores its bits. */
static void test_exact_whole_chunks(void **state)
{
	const uint64_t n = (uint64_t)1 << 22;
	const rckpt_retention_t keep3 = { 3, 0 };
	float *w = malloc(4 * (size_t)n);
	uint8_t want[8][32];
	mem_pool_t *pool;
	rckpt_t *h;
	rckpt_job_t *j;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	unsigned s;
	uint64_t i;

	(void)state;
	if (old_class)
		return; /* the residual form is test_exact_steps' */
	assert_non_null(w);
	assert_int_equal(mem_pool_create(&pool), 0);
	assert_int_equal(rckpt_create(&h), 0);
	assert_int_equal(rckpt_set_io(h, mem_pool_open, pool, "mem"), 0);
	o.writer = 1;
	o.compute = RCKPT_COMPUTE_CPU;
	o.exact = 1;
	assert_int_equal(rckpt_job_open(h, &j, "big", &o), 0);
	for (s = 1; s <= 7; s++) {
		rckpt_tensor_t t = { "w", RCKPT_F32, 2, { 2048, n / 2048 }, w };
		for (i = 0; i < n; i++) /* a weight each, moving a little each step */
			w[i] = (float)(0.02 * sin(0.001 * (double)i) + 1e-4 * s * cos((double)i)) +
			       1e-3f * (float)((mix((uint32_t)i) & 0xffff) / 65536.0 - 0.5);
		sha256(want[s], w, 4 * (size_t)n);
		if (rckpt_job_save(j, s, &t, 1, NULL, 0, NULL))
			fail_msg("save %u: %s", s, rckpt_errmsg(h));
	}
	if (rckpt_job_compact(j, &keep3, NULL))
		fail_msg("compact: %s", rckpt_errmsg(h));
	for (s = 5; s <= 7; s++) {
		rckpt_restored_t *r = NULL;
		uint8_t got[32];
		assert_int_equal(rckpt_job_restore(j, s, &r, NULL), 0);
		assert_true(rckpt_restored_exact(r));
		assert_int_equal(rckpt_restored_read(r, 0, w, 4 * (size_t)n), 0);
		sha256(got, w, 4 * (size_t)n);
		assert_memory_equal(got, want[s], 32);
		rckpt_restored_free(r);
	}
	if (rckpt_job_rewind(j, 6, NULL))
		fail_msg("rewind: %s", rckpt_errmsg(h));
	rckpt_job_close(j);
	rckpt_destroy(h);
	mem_pool_destroy(pool);
	free(w);
}

static int whole_values(void **state)
{
	(void)state;
	old_class = 0;
	return 0;
}

static int residual_class(void **state)
{
	(void)state;
	old_class = 1;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_exact_steps, whole_values),
		cmocka_unit_test_setup(test_rewind_over_an_exact_step, whole_values),
		cmocka_unit_test_setup(test_damage, whole_values),
		cmocka_unit_test_setup(test_exact_whole_chunks, whole_values),
		cmocka_unit_test_setup(test_exact_steps, residual_class),
		cmocka_unit_test_setup(test_rewind_over_an_exact_step, residual_class),
		cmocka_unit_test_setup(test_damage, residual_class),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
