/*
 * test_loader_faults.c — the locality-aware loader with learners as
 * threads of one process over an in-memory transport, against the local
 * cluster: a clean run (every step's local batches are the global batch;
 * no reads from the cluster after the first epoch), then faults in the
 * exchange: a flipped id, a wrong count, a length past the message, a
 * message cut short, and a transport that fails. The learner that gets a
 * bad message fails the step with an error (never a crash, never a wrong
 * image), and every loader closes cleanly (no leak under ASan). And the
 * data position: a loader resumed at a saved position (rckpt_loader_seek),
 * on as many learners or fewer, gives exactly the samples the epoch had
 * left, in their global batches; in locality mode too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
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

#include "rckpt.h"

#define P 3
#define B 4
#define NIMG 36

enum fault { F_NONE, F_ID, F_COUNT, F_LENGTH, F_SHORT, F_SEND_FAILS };

typedef struct msg {
	struct msg *next;
	size_t len;
	uint8_t *p;
} msg_t;

typedef struct hub {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	msg_t *q[P][P]; /* [from][to], oldest first */
	enum fault fault;
	int faulted;
	int closed; /* a learner gave up: its peers' receives end at once */
} hub_t;

typedef struct {
	hub_t *hub;
	unsigned rank;
} ctx_t;

static int hub_send(void *c, unsigned peer, const void *buf, size_t len)
{
	ctx_t *x = c;
	hub_t *h = x->hub;
	msg_t *m = calloc(1, sizeof(*m)), **tail;
	if (m == NULL || (m->p = malloc(len ? len : 1)) == NULL) {
		free(m);
		return -ENOMEM;
	}
	memcpy(m->p, buf, len);
	m->len = len;
	pthread_mutex_lock(&h->mu);
	/* the first payload (not a length header) gets the fault */
	if (len > 8 && !h->faulted && h->fault != F_NONE) {
		h->faulted = 1;
		switch (h->fault) {
		case F_ID: m->p[4] ^= 0x01; break;          /* the first sample's id */
		case F_COUNT: m->p[0] ^= 0x02; break;       /* the sample count */
		case F_LENGTH: m->p[16 + 3] = 0x7f; break;  /* the first JPEG length */
		case F_SHORT: m->len = len - 1; break;      /* one byte short */
		case F_SEND_FAILS:
			pthread_mutex_unlock(&h->mu);
			free(m->p);
			free(m);
			return -EIO;
		default: break;
		}
	}
	for (tail = &h->q[x->rank][peer]; *tail; tail = &(*tail)->next)
		;
	*tail = m;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	return 0;
}

static int hub_recv(void *c, unsigned peer, void *buf, size_t len)
{
	ctx_t *x = c;
	hub_t *h = x->hub;
	struct timespec until;
	msg_t *m;
	int rc = 0, closed;
	/* A liveness bound only: a receive ends when its message comes, or at
	 * once when a learner has given up (hub closed, as a real transport
	 * sees a peer's connection close). The clean case must never depend
	 * on how fast the learners run. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 120;
	pthread_mutex_lock(&h->mu);
	while ((m = h->q[peer][x->rank]) == NULL && !h->closed && rc == 0)
		rc = pthread_cond_timedwait(&h->cv, &h->mu, &until);
	if (m)
		h->q[peer][x->rank] = m->next;
	closed = h->closed;
	pthread_mutex_unlock(&h->mu);
	if (m == NULL)
		return closed ? -EPIPE : -ETIMEDOUT;
	if (m->len != len) {
		rc = -EIO; /* a message of another size than expected: the transport says so */
	} else {
		memcpy(buf, m->p, len);
		rc = 0;
	}
	free(m->p);
	free(m);
	return rc;
}

typedef struct {
	hub_t *hub;
	ctx_t ctx;
	const char *ds;
	uint32_t got[8][2 * B]; /* epoch 1: ids per step */
	unsigned ngot[8];
	int rc1;                /* epoch 1's first error */
	uint64_t storage1;      /* bytes from the cluster in epoch 1 */
	uint32_t start;         /* nonzero: run only epoch 1, from this position */
} learner_t;

static void *learner(void *arg)
{
	learner_t *L = arg;
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_loader_opts_t o = RCKPT_LOADER_OPTS_INIT;
	rckpt_loc_transport_t tr = { &L->ctx, L->ctx.rank, P, hub_send, hub_recv };
	rckpt_loader_stats_t s0, s1;
	rckpt_loader_t *l = NULL;
	rckpt_t *h = NULL;
	rckpt_pcr_batch_t *b;
	unsigned e, step;
	int rc = 0;

	L->rc1 = -1000;
	if (rckpt_create(&h) || rckpt_connect(h, &co))
		goto out;
	o.mode = RCKPT_LOADER_LOCALITY;
	o.local_batch = B;
	o.seed = 5;
	o.groups = 2;
	if (rckpt_loader_open(h, &l, L->ds, &tr, &o))
		goto out;
	L->rc1 = 0;
	for (e = L->start ? 1 : 0; e < 2; e++) {
		if ((rc = L->start ? rckpt_loader_seek(l, e, L->start, NULL) : rckpt_loader_epoch(l, e, NULL))) {
			L->rc1 = rc;
			break;
		}
		rckpt_loader_stats(l, &s0);
		for (step = 0;; step++) {
			unsigned i;
			rc = rckpt_loader_next(l, &b);
			if (rc) {
				if (e == 1)
					L->rc1 = rc;
				break;
			}
			if (b == NULL)
				break;
			for (i = 0; e == 1 && i < rckpt_pcr_batch_count(b) && step < 8; i++) {
				rckpt_pcr_image_t im;
				rckpt_pcr_batch_image(b, i, &im);
				L->got[step][L->ngot[step]++] = im.id;
			}
			rckpt_pcr_batch_free(b);
		}
		rckpt_loader_stats(l, &s1);
		if (e == 1)
			L->storage1 = s1.storage_bytes - s0.storage_bytes;
		if (rc)
			break;
	}
out:
	if (L->rc1 != 0 || rc != 0) { /* its peers must not wait for it */
		pthread_mutex_lock(&L->hub->mu);
		L->hub->closed = 1;
		pthread_cond_broadcast(&L->hub->cv);
		pthread_mutex_unlock(&L->hub->mu);
	}
	rckpt_loader_close(l);
	rckpt_destroy(h);
	return NULL;
}

static void hub_drain(hub_t *h)
{
	unsigned a, c;
	for (a = 0; a < P; a++)
		for (c = 0; c < P; c++)
			while (h->q[a][c]) {
				msg_t *m = h->q[a][c];
				h->q[a][c] = m->next;
				free(m->p);
				free(m);
			}
}

static int cmp_u32(const void *a, const void *b)
{
	const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static char dsname[64];

static int setup(void **state)
{
	const char *conf = getenv("CEPH_CONF"), *dir = getenv("RCKPT_TEST_PCR_DIR");
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_pcr_build_opts_t bo = RCKPT_PCR_BUILD_OPTS_INIT;
	rckpt_pcr_input_t in[NIMG];
	char paths[NIMG][600];
	rckpt_t *h = NULL;
	unsigned i;
	*state = NULL;
	if (!conf || !*conf || !dir || access(dir, R_OK)) {
		print_message("skipped: needs CEPH_CONF and RCKPT_TEST_PCR_DIR\n");
		return 0;
	}
	snprintf(dsname, sizeof(dsname), "faults-%d", (int)getpid());
	for (i = 0; i < NIMG; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/img-%05u.jpg", dir, 100 + i);
		in[i] = (rckpt_pcr_input_t){ paths[i], NULL, NULL, 0 };
	}
	bo.images_per_record = 8;
	bo.threads = 1;
	if (rckpt_create(&h) || rckpt_connect(h, &co))
		return -1;
	rckpt_pcr_delete(h, dsname);
	if (rckpt_pcr_build(h, dsname, in, NIMG, &bo, NULL)) {
		print_message("build: %s\n", rckpt_errmsg(h));
		rckpt_destroy(h);
		return -1;
	}
	rckpt_destroy(h);
	*state = dsname;
	return 0;
}

static int teardown(void **state)
{
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_t *h = NULL;
	if (*state && rckpt_create(&h) == 0 && rckpt_connect(h, &co) == 0)
		rckpt_pcr_delete(h, dsname);
	rckpt_destroy(h);
	return 0;
}

static void run_from(enum fault f, learner_t *L, uint32_t start)
{
	hub_t hub;
	pthread_t t[P];
	unsigned r;
	memset(&hub, 0, sizeof(hub));
	pthread_mutex_init(&hub.mu, NULL);
	pthread_cond_init(&hub.cv, NULL);
	hub.fault = f;
	for (r = 0; r < P; r++) {
		memset(&L[r], 0, sizeof(L[r]));
		L[r].hub = &hub;
		L[r].ctx = (ctx_t){ &hub, r };
		L[r].ds = dsname;
		L[r].start = start;
		assert_int_equal(pthread_create(&t[r], NULL, learner, &L[r]), 0);
	}
	for (r = 0; r < P; r++)
		pthread_join(t[r], NULL);
	hub_drain(&hub);
	pthread_mutex_destroy(&hub.mu);
	pthread_cond_destroy(&hub.cv);
}

static void run(enum fault f, learner_t *L)
{
	run_from(f, L, 0);
}

/* Steps s of every learner's batches in L[0..p) hold, together, the ids
 * want[0..n) (any order within a global batch). */
static void assert_batches(uint32_t (*got)[8][2 * B], const unsigned (*ngot)[8], unsigned p,
			   const uint32_t *want, uint32_t n, uint32_t g)
{
	uint32_t all[P * B], w[P * B];
	unsigned s, r, k, i;
	for (s = 0; s * g < n; s++) {
		const uint32_t gl = n - s * g < g ? n - s * g : g;
		for (r = 0, k = 0; r < p; r++)
			for (i = 0; i < ngot[r][s]; i++)
				all[k++] = got[r][s][i];
		assert_int_equal(k, gl);
		memcpy(w, want + s * g, gl * sizeof(w[0]));
		qsort(all, k, sizeof(all[0]), cmp_u32);
		qsort(w, gl, sizeof(w[0]), cmp_u32);
		assert_memory_equal(all, w, gl * sizeof(w[0]));
	}
}

/* The data position: after one step of epoch 1 on P learners, the
 * position says 1 x P x B samples; P - 1 learners resumed there read the
 * rest of the epoch in their global batches. Regular mode, one thread. */
static void test_resume(void **state)
{
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_loader_opts_t o = RCKPT_LOADER_OPTS_INIT;
	static uint32_t got[P][8][2 * B];
	unsigned ngot[P][8];
	uint32_t perm[NIMG], consumed = 0, steps = 0;
	uint64_t epoch = 0;
	rckpt_loader_t *l[P];
	rckpt_pcr_batch_t *b;
	learner_t L[P];
	rckpt_t *h = NULL;
	unsigned r, s, i;

	if (*state == NULL)
		TEST_SKIP(TEST_NEED_CLUSTER, "needs CEPH_CONF and RCKPT_TEST_PCR_DIR");
	assert_int_equal(rckpt_create(&h), 0);
	assert_int_equal(rckpt_connect(h, &co), 0);
	assert_int_equal(rckpt_loc_order(5, 1, NIMG, perm), 0);
	o.local_batch = B;
	o.seed = 5;
	o.groups = 2;
	for (r = 0; r < P; r++) {
		rckpt_loc_transport_t tr = { NULL, r, P, NULL, NULL };
		assert_int_equal(rckpt_loader_open(h, &l[r], dsname, &tr, &o), 0);
		assert_int_equal(rckpt_loader_position(l[r], &epoch, &consumed), -EINVAL); /* no epoch yet */
		assert_int_equal(rckpt_loader_epoch(l[r], 1, NULL), 0);
		assert_int_equal(rckpt_loader_next(l[r], &b), 0);
		rckpt_pcr_batch_free(b);
		assert_int_equal(rckpt_loader_position(l[r], &epoch, &consumed), 0);
		assert_true(epoch == 1 && consumed == P * B);
		assert_int_equal(rckpt_loader_seek(l[r], 1, NIMG + 1, NULL), -ERANGE);
		rckpt_loader_close(l[r]);
	}
	/* resumed on P - 1 learners */
	memset(ngot, 0, sizeof(ngot));
	for (r = 0; r < P - 1; r++) {
		rckpt_loc_transport_t tr = { NULL, r, P - 1, NULL, NULL };
		assert_int_equal(rckpt_loader_open(h, &l[r], dsname, &tr, &o), 0);
		assert_int_equal(rckpt_loader_seek(l[r], epoch, consumed, &steps), 0);
		assert_int_equal(steps, (NIMG - consumed + (P - 1) * B - 1) / ((P - 1) * B));
		for (s = 0; rckpt_loader_next(l[r], &b) == 0 && b; s++) {
			assert_true(s < 8);
			for (i = 0; i < rckpt_pcr_batch_count(b); i++) {
				rckpt_pcr_image_t im;
				rckpt_pcr_batch_image(b, i, &im);
				got[r][s][ngot[r][s]++] = im.id;
			}
			rckpt_pcr_batch_free(b);
		}
		assert_int_equal(s, steps);
		assert_int_equal(rckpt_loader_position(l[r], &epoch, &consumed), 0);
		assert_int_equal(consumed, NIMG);
		consumed = P * B;
		rckpt_loader_close(l[r]);
	}
	assert_batches(got, (const unsigned(*)[8])ngot, P - 1, perm + P * B, NIMG - P * B, (P - 1) * B);
	rckpt_destroy(h);

	/* locality mode, resumed at the same position: the epoch it resumes
	 * fills the caches with what it reads, the rest */
	run_from(F_NONE, L, P * B);
	for (r = 0; r < P; r++) {
		assert_int_equal(L[r].rc1, 0);
		memcpy(got[r], L[r].got, sizeof(L[r].got));
		memcpy(ngot[r], L[r].ngot, sizeof(L[r].ngot));
	}
	assert_batches(got, (const unsigned(*)[8])ngot, P, perm + P * B, NIMG - P * B, P * B);
}

static void test_clean(void **state)
{
	learner_t L[P];
	uint32_t perm[NIMG], all[P * B], want[P * B];
	unsigned r, s, n, i;
	if (*state == NULL)
		TEST_SKIP(TEST_NEED_CLUSTER, "needs CEPH_CONF and RCKPT_TEST_PCR_DIR");
	run(F_NONE, L);
	assert_int_equal(rckpt_loc_order(5, 1, NIMG, perm), 0);
	for (r = 0; r < P; r++) {
		assert_int_equal(L[r].rc1, 0);
		assert_int_equal(L[r].storage1, 0); /* whole caches: nothing from the cluster */
	}
	for (s = 0; s * P * B < NIMG; s++) {
		for (r = 0, n = 0; r < P; r++) {
			assert_int_equal(L[r].ngot[s], B);
			for (i = 0; i < L[r].ngot[s]; i++)
				all[n++] = L[r].got[s][i];
		}
		memcpy(want, perm + s * P * B, sizeof(want));
		qsort(all, n, sizeof(all[0]), cmp_u32);
		qsort(want, P * B, sizeof(want[0]), cmp_u32);
		assert_memory_equal(all, want, sizeof(want));
	}
}

static void test_faults(void **state)
{
	static const struct {
		enum fault f;
		int rc; /* what the learner hit reports */
	} cases[] = {
		{ F_ID, -EBADMSG }, { F_COUNT, -EBADMSG }, { F_LENGTH, -EBADMSG },
		{ F_SHORT, -EIO },  { F_SEND_FAILS, -EIO },
	};
	unsigned k, r;
	if (*state == NULL)
		TEST_SKIP(TEST_NEED_CLUSTER, "needs CEPH_CONF and RCKPT_TEST_PCR_DIR");
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		learner_t L[P];
		int seen = 0;
		run(cases[k].f, L);
		for (r = 0; r < P; r++) {
			if (L[r].rc1 == cases[k].rc)
				seen++;
			else if (L[r].rc1 != 0) /* a peer whose partner gave up */
				assert_int_equal(L[r].rc1, -EPIPE);
		}
		print_message("fault %u: %d learner(s) report %d\n", (unsigned)cases[k].f, seen, cases[k].rc);
		assert_true(seen >= 1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_faults),
		cmocka_unit_test(test_resume),
	};
	return test_exit(cmocka_run_group_tests(tests, setup, teardown));
}
