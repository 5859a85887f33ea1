/*
 * test_hostile.c — hostile requests to every object-class method of both
 * plugins on a live OSD, through librados: random bytes, well-framed
 * requests cut short, framed requests with random payloads, valid requests
 * with flipped bits (read methods), appends of random records, and every
 * method on every kind of object (job, chunk, manifest, attachment, PCR
 * record and index, and an object that does not exist).
 *
 * Write methods get only requests that no valid request can be (random
 * bytes, cut frames, appends of random records): a well-framed payload may
 * be a legitimate request, such as a trim after some step.
 *
 * Checked: the OSD answers every call (an error code, or a reply for a
 * read method), every write method refuses what it is sent, no object of
 * the job or the dataset changes (data, omap and xattrs compared before
 * and after), the OSD is still up afterwards, and the job's latest step
 * restores to the same bytes. RCKPT_HOSTILE_CALLS sets the number of calls
 * (default 6000; `./dev.sh test` uses the default).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_skip.h"
#include <rados/librados.h>

#include "rckpt.h"
#include "rckpt_pcr.h"
#include "rckpt_store_wire.h"

typedef struct {
	const char *cls, *method;
	int write;
} method_t;

static const method_t methods[] = {
	{ "rckpt", "version", 0 },  { "rckpt", "ping", 0 },      { "rckpt", "append", 1 },
	{ "rckpt", "materialize", 0 }, { "rckpt", "index", 0 },  { "rckpt", "trim", 1 },
	{ "rckpt", "tip", 0 },      { "rckpt", "head", 0 },      { "rckpt", "commit", 1 },
	{ "rckpt", "list", 0 },     { "rckpt", "compact", 1 },   { "rckpt", "verify", 0 },
	{ "rckpt", "drop", 1 },     { "rckpt", "pin", 1 },       { "rckpt", "claim", 1 },
	{ "rckpt", "retire", 1 },   { "rckpt", "put", 1 },       { "rckpt", "rewind", 1 },
	{ "pcr", "version", 0 },    { "pcr", "read", 0 },        { "pcr", "images", 0 },
	{ "pcr", "stat", 0 },
};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

typedef struct {
	char *oid;
	char *ns;
	char *data;
	size_t len;
	char *omap; /* keys and values, serialized */
	size_t omap_len;
	char *xattrs;
	size_t xattrs_len;
} snap_t;

typedef struct {
	rados_t cl;
	rados_ioctx_t io;
	rckpt_t *h;
	char job[64], ds[64];
	snap_t *snaps;
	unsigned nsnaps;
	uint64_t seed;
	uint64_t token; /* the job's writer token: kind 5 sends older ones */
} fixture_t;

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void append_bytes(char **buf, size_t *len, const void *p, size_t n)
{
	*buf = realloc(*buf, *len + n + 1);
	assert_non_null(*buf);
	if (n) /* an empty omap value comes as NULL (the job object's "job" key) */
		memcpy(*buf + *len, p, n);
	*len += n;
}

/* Everything of one object: its data, omap and xattrs. */
static void snapshot(rados_ioctx_t io, const char *ns, const char *oid, snap_t *s)
{
	uint64_t size = 0;
	time_t mt;
	rados_read_op_t op;
	rados_omap_iter_t it = NULL;
	rados_xattrs_iter_t xi = NULL;
	unsigned char more = 0;
	int prval = 0, rc;
	char *k, *v;
	size_t vl;
	const char *xn, *xv;
	size_t xl;

	memset(s, 0, sizeof(*s));
	s->oid = strdup(oid);
	s->ns = strdup(ns);
	rados_ioctx_set_namespace(io, ns);
	assert_int_equal(rados_stat(io, oid, &size, &mt), 0);
	s->data = malloc(size + 1);
	assert_non_null(s->data);
	if (size) {
		rc = rados_read(io, oid, s->data, size, 0);
		assert_int_equal(rc, (int)size);
	}
	s->len = size;
	op = rados_create_read_op();
	rados_read_op_omap_get_vals2(op, "", "", 100000, &it, &more, &prval);
	assert_int_equal(rados_read_op_operate(op, io, oid, 0), 0);
	while (rados_omap_get_next(it, &k, &v, &vl) == 0 && k) {
		append_bytes(&s->omap, &s->omap_len, k, strlen(k) + 1);
		append_bytes(&s->omap, &s->omap_len, &vl, sizeof(vl));
		append_bytes(&s->omap, &s->omap_len, v, vl);
	}
	rados_omap_get_end(it);
	rados_release_read_op(op);
	if (rados_getxattrs(io, oid, &xi) == 0) {
		while (rados_getxattrs_next(xi, &xn, &xv, &xl) == 0 && xn) {
			append_bytes(&s->xattrs, &s->xattrs_len, xn, strlen(xn) + 1);
			append_bytes(&s->xattrs, &s->xattrs_len, xv, xl);
		}
		rados_getxattrs_end(xi);
	}
}

static void snap_free(snap_t *s)
{
	free(s->oid);
	free(s->ns);
	free(s->data);
	free(s->omap);
	free(s->xattrs);
}

static void snapshot_ns(fixture_t *f, const char *ns)
{
	rados_list_ctx_t lc;
	const char *oid;
	rados_ioctx_set_namespace(f->io, ns);
	assert_int_equal(rados_nobjects_list_open(f->io, &lc), 0);
	while (rados_nobjects_list_next(lc, &oid, NULL, NULL) == 0) {
		f->snaps = realloc(f->snaps, sizeof(*f->snaps) * (f->nsnaps + 1));
		assert_non_null(f->snaps);
		f->snaps[f->nsnaps].oid = strdup(oid); /* filled below: the list context owns oid */
		f->nsnaps++;
	}
	rados_nobjects_list_close(lc);
}

static void take_all(fixture_t *f, snap_t **out, unsigned *n)
{
	unsigned i;
	*out = calloc(f->nsnaps, sizeof(**out));
	assert_non_null(*out);
	for (i = 0; i < f->nsnaps; i++)
		snapshot(f->io, f->snaps[i].ns, f->snaps[i].oid, &(*out)[i]);
	*n = f->nsnaps;
}

static void save_job(fixture_t *f)
{
	enum { N = 3000 };
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *j = NULL;
	float *w = malloc(sizeof(float) * N), b[10];
	rckpt_tensor_t t[2];
	uint64_t s, step;
	unsigned i;
	w = w ? w : NULL;
	assert_non_null(w);
	o.chunk_params = 1000;
	o.writer = 1;
	assert_int_equal(rckpt_job_open(f->h, &j, f->job, &o), 0);
	s = 7;
	for (i = 0; i < N; i++)
		w[i] = (float)((int64_t)(rnd(&s) % 2001) - 1000) / 1000.0f;
	for (i = 0; i < 10; i++)
		b[i] = (float)i;
	memset(t, 0, sizeof(t));
	t[0].name = "w";
	t[0].dtype = RCKPT_F32;
	t[0].ndim = 1;
	t[0].shape[0] = N;
	t[0].data = w;
	t[1].name = "b";
	t[1].dtype = RCKPT_F32;
	t[1].ndim = 1;
	t[1].shape[0] = 10;
	t[1].data = b;
	for (step = 1; step <= 3; step++) {
		for (i = 0; i < N; i += 7)
			w[i] += 0.01f;
		assert_int_equal(rckpt_job_save(j, step, t, 2, NULL, 0, NULL), 0);
	}
	assert_int_equal(rckpt_job_attach(j, "hello", 5), 0);
	assert_int_equal(rckpt_job_save(j, 4, t, 2, NULL, 0, NULL), 0);
	rckpt_job_close(j);
	free(w);
}

static void build_pcr(fixture_t *f)
{
	const char *dir = getenv("RCKPT_TEST_PCR_DIR");
	rckpt_pcr_build_opts_t bo = RCKPT_PCR_BUILD_OPTS_INIT;
	rckpt_pcr_input_t in[20];
	char paths[20][600];
	unsigned n = 0;
	if (dir == NULL || access(dir, R_OK)) {
		f->ds[0] = '\0';
		print_message("no RCKPT_TEST_PCR_DIR: PCR objects left out\n");
		return;
	}
	for (n = 0; n < 20; n++) {
		snprintf(paths[n], sizeof(paths[n]), "%s/img-%05u.jpg", dir, n);
		in[n] = (rckpt_pcr_input_t){ paths[n], NULL, "lbl", 3 };
	}
	bo.images_per_record = 8;
	bo.threads = 1;
	rckpt_pcr_delete(f->h, f->ds);
	assert_int_equal(rckpt_pcr_build(f->h, f->ds, in, n, &bo, NULL), 0);
}

static int setup(void **state)
{
	const char *conf = getenv("CEPH_CONF");
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	fixture_t *f;
	char ns[80];
	unsigned i;

	*state = NULL;
	if (conf == NULL || !*conf) {
		print_message("no cluster: CEPH_CONF is not set (./dev.sh test starts one)\n");
		return 0;
	}
	f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(rados_create(&f->cl, "admin"), 0);
	assert_int_equal(rados_conf_read_file(f->cl, conf), 0);
	assert_int_equal(rados_connect(f->cl), 0);
	assert_int_equal(rados_ioctx_create(f->cl, "rckpt", &f->io), 0);
	assert_int_equal(rckpt_create(&f->h), 0);
	assert_int_equal(rckpt_connect(f->h, &co), 0);
	snprintf(f->job, sizeof(f->job), "hostile-%d", (int)getpid());
	snprintf(f->ds, sizeof(f->ds), "hostile-%d", (int)getpid());
	rckpt_job_delete(f->h, f->job);
	save_job(f);
	build_pcr(f);
	snapshot_ns(f, f->job);
	for (i = 0; i < f->nsnaps; i++)
		f->snaps[i].ns = strdup(f->job);
	if (f->ds[0]) {
		unsigned from = f->nsnaps;
		snprintf(ns, sizeof(ns), "pcr/%s", f->ds);
		snapshot_ns(f, ns);
		for (i = from; i < f->nsnaps; i++)
			f->snaps[i].ns = strdup(ns);
	}
	f->seed = 20261122;
	{ /* the job's writer token, as a stale actor would have read an older one */
		rados_omap_iter_t it;
		rados_read_op_t op = rados_create_read_op();
		const char *keys[1] = { "writer" };
		char *k = NULL, *v = NULL;
		size_t vl = 0;
		int prval = 0;
		rados_ioctx_set_namespace(f->io, f->job);
		rados_read_op_omap_get_vals_by_keys(op, keys, 1, &it, &prval);
		assert_int_equal(rados_read_op_operate(op, f->io, "rckpt.job", 0), 0);
		assert_int_equal(rados_omap_get_next(it, &k, &v, &vl), 0);
		assert_true(k != NULL && vl == 8);
		for (i = 0; i < 8; i++)
			f->token |= (uint64_t)(uint8_t)v[i] << (8 * i);
		rados_omap_get_end(it);
		rados_release_read_op(op);
		rados_ioctx_set_namespace(f->io, "");
		assert_true(f->token > 2);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture_t *f = *state;
	unsigned i;
	if (f == NULL)
		return 0;
	rckpt_job_delete(f->h, f->job);
	if (f->ds[0])
		rckpt_pcr_delete(f->h, f->ds);
	for (i = 0; i < f->nsnaps; i++) {
		free(f->snaps[i].oid);
		free(f->snaps[i].ns);
	}
	free(f->snaps);
	rckpt_destroy(f->h);
	rados_ioctx_destroy(f->io);
	rados_shutdown(f->cl);
	free(f);
	return 0;
}

/* A well-formed request of method m whose token is older than the job's
 * (a stale writer's, or a compactor's or deleter's that read an older
 * one), aimed at the fencing: every field valid, so that only the token
 * can refuse it. 0, or -1 when m carries no token. */
static int stale_request(uint64_t *s, const method_t *m, uint64_t token, rckpt_buf_t *b)
{
	const uint64_t t = 2 + rnd(s) % (token - 2), step = 1 + rnd(s) % 5;
	uint64_t steps[3] = { 1, 2, 3 };
	const char *meth = m->method;
	if (strcmp(m->cls, "rckpt") != 0)
		return -1;
	if (strcmp(meth, "append") == 0)
		assert_int_equal(rckpt_msg_append_encode(b, t, (const uint8_t *)"RKCR", 4), 0);
	else if (strcmp(meth, "trim") == 0)
		assert_int_equal(rckpt_msg_trim_encode(b, t, (rnd(s) & 1) ? RCKPT_STORE_NONE : rnd(s) % 5), 0);
	else if (strcmp(meth, "commit") == 0) {
		uint8_t sum[8] = { 0 };
		rckpt_msg_commit_t c = { 4, 5, { sum, sizeof(sum) }, t };
		assert_int_equal(rckpt_msg_commit_encode(b, &c), 0);
	} else if (strcmp(meth, "compact") == 0)
		assert_int_equal(rckpt_msg_compact_encode(b, t, 3, steps, (uint32_t)(rnd(s) % 4)), 0);
	else if (strcmp(meth, "drop") == 0)
		assert_int_equal(rckpt_msg_drop_encode(b, t, steps, 3), 0);
	else if (strcmp(meth, "pin") == 0)
		assert_int_equal(rckpt_msg_pin_encode(b, t, step, (int)(rnd(s) & 1)), 0);
	else if (strcmp(meth, "claim") == 0)
		assert_int_equal(rckpt_msg_claim_encode(b, t - 1, t, (unsigned)(rnd(s) & 1)), 0);
	else if (strcmp(meth, "retire") == 0) {
		rckpt_msg_retire_t r = { t, step, (uint8_t)(rnd(s) % 3) };
		if (r.kind != RCKPT_RETIRE_STEP)
			r.step = RCKPT_STORE_NONE;
		assert_int_equal(rckpt_msg_retire_encode(b, &r), 0);
	} else if (strcmp(meth, "put") == 0) {
		rckpt_buf_t a = RCKPT_BUF_INIT;
		assert_int_equal(rckpt_attach_encode(&a, step, "x", 1), 0);
		assert_int_equal(rckpt_msg_put_encode(b, t, step, a.p, a.len), 0);
		rckpt_buf_free(&a);
	} else
		return -1;
	return 0;
}

/* A request for method m: kind 0 random bytes, 1 a valid frame of some
 * type cut short, 2 a frame header of m's type with a random payload,
 * 3 a valid request with flipped bits (read methods), 4 an append of a
 * random record, 5 a well-formed request with a stale token (write
 * methods, on an object that exists). Every kind but 5 must be refused;
 * a stale request may succeed only where it changes nothing (a drop on an
 * object with no steps): the objects are compared after all calls. */
static void make_request(uint64_t *s, const method_t *m, rckpt_buf_t *b, int *kind, uint64_t token,
			 int exists)
{
	static const size_t lens[] = { 0, 1, 2, 3, 4, 7, 8, 11, 12, 13, 16, 20, 28, 64, 300, 4096 };
	rckpt_msg_materialize_t mm = { 3, 0, { NULL, 0 } };
	rckpt_msg_list_t ml = { RCKPT_STORE_NONE, 100 };
	rckpt_store_entry_t e;
	uint64_t steps[3] = { 1, 2, 3 };
	uint32_t idx[3] = { 0, 2, 7 };
	size_t n, i;

	b->len = 0;
	*kind = (int)(rnd(s) % 6);
	if (*kind == 5 && (!m->write || !exists || stale_request(s, m, token, b)))
		*kind = 0;
	if (*kind == 5)
		return;
	b->len = 0;
	/* a write method gets only what no valid request can be: a random
	 * payload behind a right header may be a legitimate request (trim
	 * after some step), and so may a flipped bit */
	if ((*kind == 2 || *kind == 3) && m->write)
		*kind = 1;
	if (*kind == 4 && strcmp(m->method, "append") != 0)
		*kind = 0;
	if (*kind == 0) {
		n = (rnd(s) & 1) ? lens[rnd(s) % (sizeof(lens) / sizeof(lens[0]))] : rnd(s) % 2000;
		assert_int_equal(rckpt_buf_reserve(b, n + 1), 0);
		for (i = 0; i < n; i++)
			b->p[i] = (uint8_t)rnd(s);
		b->len = n;
		return;
	}
	if (*kind == 4) {
		uint8_t rec[512];
		n = rnd(s) % sizeof(rec);
		for (i = 0; i < n; i++)
			rec[i] = (uint8_t)rnd(s);
		if (n >= 4)
			memcpy(rec, "RKCR", 4); /* past the magic, into the checks */
		assert_int_equal(rckpt_msg_append_encode(b, 0x1234, rec, n), 0);
		return;
	}
	/* a valid request of some method */
	memset(&e, 0, sizeof(e));
	e.step = 2;
	e.length = 10;
	e.kind = 1;
	e.parent = RCKPT_STORE_NONE;
	switch (rnd(s) % 9) {
	case 0: assert_int_equal(rckpt_msg_materialize_encode(b, &mm), 0); break;
	case 1: assert_int_equal(rckpt_msg_list_encode(b, &ml), 0); break;
	case 2: assert_int_equal(rckpt_msg_trim_encode(b, 0x1234, 1), 0); break;
	case 3: assert_int_equal(rckpt_msg_index_encode(b, &e, 1), 0); break;
	case 4: assert_int_equal(rckpt_msg_compact_encode(b, 0x1234, 3, steps, 3), 0); break;
	case 5: assert_int_equal(rckpt_msg_drop_encode(b, 0x1234, steps, 2), 0); break;
	case 6: assert_int_equal(rckpt_msg_pin_encode(b, 0x1234, 2, 1), 0); break;
	case 7: assert_int_equal(rckpt_msg_claim_encode(b, 0, 0x1234, 0), 0); break;
	default: assert_int_equal(rckpt_msg_pcr_images_encode(b, 2, idx, 3), 0); break;
	}
	if (*kind == 1) {
		b->len = rnd(s) % b->len; /* cut short: the frame's length disagrees */
	} else if (*kind == 2) {
		n = rnd(s) % 64;
		assert_int_equal(rckpt_buf_reserve(b, 12 + n), 0);
		for (i = 12; i < 12 + n; i++)
			b->p[i] = (uint8_t)rnd(s);
		b->len = 12;
		b->p[8] = (uint8_t)(b->len + n - 12); /* the header's length field, LE */
		b->p[9] = b->p[10] = b->p[11] = 0;
		b->len = 12 + n;
	} else {
		unsigned flips = 1 + (unsigned)(rnd(s) % 4), k;
		for (k = 0; k < flips && b->len; k++)
			b->p[rnd(s) % b->len] ^= (uint8_t)(1u << (rnd(s) % 8));
	}
}

static void test_hostile_requests(void **state)
{
	fixture_t *f = *state;
	const char *env = getenv("RCKPT_HOSTILE_CALLS");
	unsigned calls = env ? (unsigned)strtoul(env, NULL, 10) : 6000, c, i, nb = 0, na = 0;
	unsigned refused = 0, answered = 0, per_kind[6] = { 0 }, stale = 0;
	snap_t *before, *after;
	rckpt_buf_t req = RCKPT_BUF_INIT;
	char reply[1 << 16];

	if (f == NULL)
		TEST_SKIP(TEST_NEED_CLUSTER, "no cluster (CEPH_CONF is not set)");
	take_all(f, &before, &nb);
	assert_true(nb >= 4);
	for (c = 0; c < calls; c++) {
		const method_t *m = &methods[rnd(&f->seed) % NMETHODS];
		const unsigned o = (unsigned)(rnd(&f->seed) % (nb + 1));
		const char *oid = o < nb ? before[o].oid : "no-such-object";
		int kind, rc;
		rados_ioctx_set_namespace(f->io, o < nb ? before[o].ns : f->job);
		make_request(&f->seed, m, &req, &kind, f->token, o < nb);
		rc = rados_exec(f->io, oid, m->cls, m->method, (const char *)req.p, req.len, reply,
				sizeof(reply));
		per_kind[kind]++;
		stale += kind == 5 && rc == -ESTALE;
		if (rc < 0) {
			refused++;
		} else {
			answered++;
			if (m->write && kind != 5) /* a stale one may succeed as a no-op: the snapshot says */
				fail_msg("%s.%s on %s accepted a hostile request (kind %d, %zu bytes): %d", m->cls,
					 m->method, oid, kind, req.len, rc);
		}
	}
	rckpt_buf_free(&req);
	print_message("%u calls (random %u, cut %u, random payload %u, flipped %u, bad appends %u, "
		      "stale tokens %u of which %u -ESTALE): %u refused, %u answered (read methods)\n",
		      calls, per_kind[0], per_kind[1], per_kind[2], per_kind[3], per_kind[4], per_kind[5], stale,
		      refused, answered);
	/* the stale requests met the fencing: most of them (those on the
	 * job's own objects) were refused for their token, not their shape */
	assert_true(per_kind[5] > 0 && stale > 0);
	/* nothing changed */
	take_all(f, &after, &na);
	assert_int_equal(na, nb);
	for (i = 0; i < nb; i++) {
		assert_string_equal(after[i].oid, before[i].oid);
		if (after[i].len != before[i].len || memcmp(after[i].data, before[i].data, before[i].len) ||
		    after[i].omap_len != before[i].omap_len ||
		    (before[i].omap_len && memcmp(after[i].omap, before[i].omap, before[i].omap_len)) ||
		    after[i].xattrs_len != before[i].xattrs_len ||
		    (before[i].xattrs_len && memcmp(after[i].xattrs, before[i].xattrs, before[i].xattrs_len)))
			fail_msg("object %s/%s changed (data %zu -> %zu bytes, omap %zu -> %zu, xattrs %zu -> %zu)",
				 before[i].ns, before[i].oid, before[i].len, after[i].len, before[i].omap_len,
				 after[i].omap_len, before[i].xattrs_len, after[i].xattrs_len);
		snap_free(&before[i]);
		snap_free(&after[i]);
	}
	free(before);
	free(after);
	/* the OSD is up and the job restores */
	{
		rckpt_job_t *j = NULL;
		rckpt_restored_t *r = NULL;
		rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
		o.writer = 0;
		assert_int_equal(rckpt_job_open(f->h, &j, f->job, &o), 0);
		assert_int_equal(rckpt_job_restore_tensors(j, RCKPT_LATEST, NULL, 0, &r, NULL), 0);
		assert_int_equal(rckpt_restored_step(r), 4);
		rckpt_restored_free(r);
		assert_int_equal(rckpt_job_verify(j, NULL), 0);
		rckpt_job_close(j);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hostile_requests, setup, teardown),
	};
	return test_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
