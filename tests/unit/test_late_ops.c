/*
 * test_late_ops.c — the store's fencing (formats/store.md, "Fencing")
 * against late requests, without a cluster: an actor pauses (or is cut
 * off) with a request queued, its successor moves on, then the request
 * lands (mem_fault_t.held, mem_pool_release). The actors: a writer (its
 * claim, trim, append and manifest put), a compactor (its drop and compact
 * stage), gc (its retire) and rm (its retire of a chunk and of the job
 * object, once the job was made again). Each late request is refused
 * (-ESTALE) and every committed step still restores to what it restored to
 * when committed (store_fx.h keeps that), and the successor saves on.
 */
#define _GNU_SOURCE /* unshare, CLONE_NEWTIME */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "mem_io.h"
#include "rckpt.h"
#include "rckpt_clock.h"
#include "rckpt_store_internal.h"
#include "store_fx.h"

#define PAUSED -ETIMEDOUT /* what the paused actor's own call returns */

static int open_as(fx_t *f, rckpt_job_t **j, int writer)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	o.writer = writer;
	o.chunk_params = 1024; /* as store_fx's writer */
	o.inflight = 2;
	o.compute = RCKPT_COMPUTE_CPU;
	return rckpt_job_open(f->h, j, "faults", &o);
}

/* The fixture's writer goes (its lease with it) and a new one takes the
 * job: it claims, so its token is newer than every earlier actor's. */
static void successor(fx_t *f)
{
	rckpt_job_close(f->j);
	f->j = NULL;
	assert_int_equal(open_as(f, &f->j, 1), 0);
}

/* Arms a hold on the nth call of op: the call fails (PAUSED), its request
 * waits for mem_pool_release. */
static void hold(fx_t *f, const char *op, unsigned nth)
{
	const mem_fault_t h = { op, nth, PAUSED, 0, 0, 1, NULL, NULL };
	mem_pool_fault(f->pool, &h);
}

static void unhold(fx_t *f)
{
	assert_true(mem_pool_struck(f->pool));
	mem_pool_fault(f->pool, NULL);
}

/* Saves step s with the values of run step `like` (so that a step saved
 * again under the same number differs from the first try). */
static int save_as(fx_t *f, rckpt_job_t *j, uint64_t s, unsigned like)
{
	int rc;
	model_at(&f->m, like);
	rc = rckpt_job_save(j, s, f->m.t, NT, NULL, 0, NULL);
	if (rc == 0 && j == f->j)
		committed(f, s);
	return rc;
}

/* Lands the held request: first nothing committed may be lost (what each
 * step restores to, against what it restored to when committed), then it
 * must have been refused as `want` says. */
static void landed(fx_t *f, int want)
{
	int rc = mem_pool_release(f->pool);
	nothing_lost(f);
	assert_int_equal(rc, want);
}

/* The scenario: writer W1 renews its lease and stalls with the
 * trim of its first save queued; W2 claims, trims, saves 3 and 4; then
 * W1's trim(after 2) lands. Before fencing it cut every chunk back to 2. */
static void test_late_trim(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *w1 = NULL;
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	rckpt_job_close(f->j);
	f->j = NULL;
	assert_int_equal(open_as(f, &w1, 1), 0);
	hold(f, "trim", 1);
	assert_int_equal(save_as(f, w1, 3, 3), PAUSED);
	unhold(f);
	rckpt_job_close(w1);
	assert_int_equal(open_as(f, &f->j, 1), 0);
	assert_int_equal(save_as(f, f->j, 3, 3), 0);
	assert_int_equal(save_as(f, f->j, 4, 4), 0);
	landed(f, -ESTALE);
	assert_int_equal(save_as(f, f->j, 5, 5), 0);
	nothing_lost(f);
}

/* W1's request `op` (the nth of its save of step 3) is queued; W2 saves
 * its own step 3 (other values) and 4; the request lands. */
static void late_save_request(fx_t *f, const char *op, unsigned nth)
{
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	hold(f, op, nth);
	assert_int_equal(save_as(f, f->j, 3, 3), PAUSED);
	unhold(f);
	successor(f);
	assert_int_equal(save_as(f, f->j, 3, 13), 0);
	assert_int_equal(save_as(f, f->j, 4, 14), 0);
	landed(f, -ESTALE);
	assert_int_equal(save_as(f, f->j, 5, 15), 0);
	nothing_lost(f);
}

/* An append of W1's. */
static void test_late_append(void **state)
{
	late_save_request(*state, "append", 2);
}

/* W1's manifest of step 3. Before `put` it replaced W2's, and step 3 no
 * longer restored to what W2 committed. */
static void test_late_manifest(void **state)
{
	late_save_request(*state, "put", 1);
}

/* W1's claim is queued (its open fails); W2 claims and saves; W1's claim
 * lands: refused, W2 saves on. */
static void test_late_claim(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *w1 = NULL;
	assert_int_equal(save_next(f), 0);
	rckpt_job_close(f->j);
	f->j = NULL;
	hold(f, "claim", 1);
	assert_int_equal(open_as(f, &w1, 1), PAUSED);
	unhold(f);
	assert_int_equal(open_as(f, &f->j, 1), 0);
	assert_int_equal(save_next(f), 0);
	assert_int_equal(mem_pool_release(f->pool), -ESTALE);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

/* A compactor (no writer lock) reads the writer's token, pauses with a
 * compact stage queued; a new writer claims and saves on; the stage lands
 * on chunks that writer has touched: refused. Then its drop, the same
 * way. A compaction run afterwards reads the new token and goes through. */
static void test_late_compactor(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *c = NULL;
	rckpt_retention_t all = { 0, 0 }, last2 = { 2, 0 };
	unsigned i;
	for (i = 0; i < 6; i++)
		assert_int_equal(save_next(f), 0);
	assert_int_equal(open_as(f, &c, 0), 0);
	hold(f, "compact", 1);
	assert_int_equal(rckpt_job_compact(c, &all, NULL), PAUSED);
	unhold(f);
	successor(f);
	assert_int_equal(save_next(f), 0);
	landed(f, -ESTALE);

	hold(f, "drop", 1); /* keep-last 2 would forget steps 1..5 */
	assert_int_equal(rckpt_job_compact(c, &last2, NULL), PAUSED);
	unhold(f);
	successor(f);
	assert_int_equal(save_next(f), 0);
	landed(f, -ESTALE); /* every step still listed, and restores */

	assert_int_equal(rckpt_job_compact(c, &all, NULL), 0);
	nothing_lost(f);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
	rckpt_job_close(c);
}

/* Another client that acts when armed: a compaction under `keep`, or
 * (rewind set) a writer that takes the job over, rewinds to step 2 and
 * saves steps 3 and 4 anew. */
typedef struct actor {
	fx_t *f;
	rckpt_t *h;
	rckpt_job_t *j;
	rckpt_retention_t keep;
	int rewind;
	unsigned round; /* rewinds so far: each saves other values */
	int rc;
} actor_t;

static void act_now(void *arg)
{
	actor_t *c = arg;
	rckpt_job_t *w = NULL;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	uint64_t s;
	if (!c->rewind) {
		c->rc = rckpt_job_compact(c->j, &c->keep, NULL);
		return;
	}
	o.writer = 1;
	o.chunk_params = 1024;
	o.compute = RCKPT_COMPUTE_CPU;
	o.takeover = RCKPT_TAKEOVER_ALWAYS;
	c->rc = rckpt_job_open(c->h, &w, "faults", &o);
	if (c->rc == 0)
		c->rc = rckpt_job_rewind(w, 2, NULL);
	for (s = 3; s <= 4 && c->rc == 0; s++) {
		model_at(&c->f->m, 40 + 10 * c->round + (unsigned)s); /* values no earlier 3, 4 had */
		c->rc = rckpt_job_save(w, s, c->f->m.t, NT, NULL, 0, NULL);
	}
	rckpt_job_close(w);
	c->round++;
}

/* Restores step s (the sth committed) while another client acts (a
 * compaction under `keep`, or a rewind and saves) just before the
 * restore's first materialize call (after it read the step's summary and
 * manifest): the restore's result; restored, the values it restored to
 * when it was committed. */
static int restore_beside(fx_t *f, uint64_t s, rckpt_retention_t keep, int rewind, actor_t *c)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	float *out[NT];
	unsigned t;
	int rc;
	mem_fault_t before = { "materialize", 1, 0, 0, 0, 0, act_now, c };
	c->f = f;
	c->keep = keep;
	c->rewind = rewind;
	c->rc = 1;
	assert_int_equal(rckpt_create(&c->h), 0);
	assert_int_equal(rckpt_set_io(c->h, mem_pool_open, f->pool, "mem"), 0);
	o.compute = RCKPT_COMPUTE_CPU;
	assert_int_equal(rckpt_job_open(c->h, &c->j, "faults", &o), 0);
	for (t = 0; t < NT; t++)
		assert_non_null(out[t] = __real_malloc(4 * numel(t)));
	mem_pool_fault(f->pool, &before);
	rc = restore(f, s, out);
	assert_true(mem_pool_struck(f->pool));
	mem_pool_fault(f->pool, NULL);
	assert_int_equal(c->rc, 0);
	assert_int_equal(f->step[s - 1], s);
	for (t = 0; t < NT; t++) {
		if (rc == 0)
			assert_memory_equal(out[t], f->got[s - 1][t], 4 * numel(t));
		free(out[t]);
	}
	rckpt_job_close(c->j);
	rckpt_destroy(c->h);
	return rc;
}

/* A restore that a compaction overtakes (the campaign's "cannot
 * materialize step 334 ... No such file or directory", issue 64): a step
 * the compaction keeps restores as committed; one it drops fails saying
 * so, not as damage; so does one that a rewind drops and a writer saves
 * anew under the same number. */
static void test_restore_beside_compaction(void **state)
{
	fx_t *f = *state;
	actor_t c;
	rckpt_retention_t every2 = { 0, 2 }, last1 = { 1, 0 }, none = { 0, 0 };
	unsigned i;
	for (i = 0; i < 6; i++)
		assert_int_equal(save_next(f), 0);
	/* rewinds first, while every step is listed: the head rewound away
	 * (to 2, then 3 and 4 saved anew); then 4 saved anew again */
	c.round = 0;
	assert_int_equal(restore_beside(f, 6, none, 1, &c), -ENOENT);
	assert_says(f, "step 6 was dropped");
	assert_int_equal(restore_beside(f, 4, none, 1, &c), -ENOENT);
	assert_says(f, "step 4 was dropped");
	/* step 2 kept (every 2: 2 and the head 4), made a delta on 4 meanwhile */
	assert_int_equal(restore_beside(f, 2, every2, 0, &c), 0);
	/* step 2 dropped (keep-last 1) */
	assert_int_equal(restore_beside(f, 2, last1, 0, &c), -ENOENT);
	assert_says(f, "step 2 was dropped");
}

/* The writer commits the first step of a new segment (step 4, of other
 * tensors: a new layout begins one; exact, to compare bits) just as a
 * compaction lists the job, after it read the head: that segment holds no
 * step at or before the head the compaction read, yet its steps are not
 * gone; the compaction leaves it alone and the step restores as committed
 * (the 30-minute campaign's steps 5183-5185: listed, their segment
 * removed under them, for the compactor's token was still the writer's). */
static void save_relaid_now(void *arg)
{
	actor_t *c = arg;
	assert_int_equal(rckpt_job_set_exact(c->f->j, 1), 0);
	model_at(&c->f->m, 4);
	c->rc = rckpt_job_save(c->f->j, 4, c->f->m.t, NT - 1, NULL, 0, NULL);
}

static void test_compaction_beside_a_new_segment(void **state)
{
	fx_t *f = *state;
	actor_t c;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_retention_t all = { 0, 0 };
	mem_fault_t before = { "list", 1, 0, 0, 0, 0, save_relaid_now, &c };
	rckpt_restored_t *r = NULL;
	float *out[NT];
	unsigned i;
	memset(&c, 0, sizeof(c));
	c.f = f;
	c.rc = 1;
	for (i = 0; i < 3; i++)
		assert_int_equal(save_next(f), 0);
	assert_int_equal(rckpt_create(&c.h), 0);
	assert_int_equal(rckpt_set_io(c.h, mem_pool_open, f->pool, "mem"), 0);
	o.compute = RCKPT_COMPUTE_CPU;
	assert_int_equal(rckpt_job_open(c.h, &c.j, "faults", &o), 0);
	mem_pool_fault(f->pool, &before);
	assert_int_equal(rckpt_job_compact(c.j, &all, NULL), 0);
	assert_true(mem_pool_struck(f->pool));
	mem_pool_fault(f->pool, NULL);
	assert_int_equal(c.rc, 0); /* step 4 committed, in a segment of its own */
	rckpt_job_close(c.j);
	rckpt_destroy(c.h);
	for (i = 0; i < NT; i++)
		assert_non_null(out[i] = __real_malloc(4 * numel(i)));
	if (rckpt_job_restore(f->j, 4, &r, NULL) != 0)
		fail_msg("step 4 does not restore: %s", rckpt_errmsg(f->h));
	for (i = 0; i + 1 < NT; i++) { /* bit for bit */
		int k = rckpt_restored_find(r, MODEL[i].name);
		assert_true(k >= 0);
		assert_int_equal(rckpt_restored_read(r, (unsigned)k, out[i], 4 * numel(i)), 0);
		assert_memory_equal(out[i], f->m.v[i], 4 * numel(i));
	}
	rckpt_restored_free(r);
	for (i = 0; i < 3; i++) { /* and 1-3 as committed */
		unsigned t;
		assert_int_equal(restore(f, i + 1, out), 0);
		for (t = 0; t < NT; t++)
			assert_memory_equal(out[t], f->got[i][t], 4 * numel(t));
	}
	for (i = 0; i < NT; i++)
		free(out[i]);
}

/* gc removes the manifest a failed save left (step 3, never committed)
 * but pauses with that retire queued; a new writer saves its own step 3
 * and 4; the retire lands: refused, step 3 restores to what it committed. */
static void test_late_gc(void **state)
{
	fx_t *f = *state;
	const mem_fault_t no_commit = { "commit", 1, -EIO, 0, 0, 0, NULL, NULL };
	unsigned removed = 0;
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	mem_pool_fault(f->pool, &no_commit);
	assert_int_equal(save_as(f, f->j, 3, 3), -EIO);
	mem_pool_fault(f->pool, NULL);
	hold(f, "retire", 1);
	assert_int_equal(rckpt_job_gc(f->j, &removed), PAUSED);
	unhold(f);
	successor(f);
	assert_int_equal(save_as(f, f->j, 3, 33), 0);
	assert_int_equal(save_as(f, f->j, 4, 34), 0);
	landed(f, -ESTALE);
}

/* Forget every step the fixture recorded: the job was deleted. */
static void forget_all(fx_t *f)
{
	unsigned i, t;
	for (i = 0; i < f->ncommitted; i++)
		for (t = 0; t < NT; t++)
			free(f->got[i][t]);
	f->ncommitted = 0;
	f->next = 1;
}

/* rm pauses with a removal queued (the first chunk's; in the second round
 * the job object's, its last). Until an rm finishes the job, no writer
 * can take it (-EIDRM). An rm run again finishes; a writer makes the job
 * again under the same name and saves; the first rm's removal lands: its
 * token is older than every token of the new job, so it is refused. */
static void test_late_rm(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *w = NULL;
	unsigned round;
	for (round = 0; round < 2; round++) {
		unsigned nth = 1;
		assert_int_equal(save_next(f), 0);
		assert_int_equal(save_next(f), 0);
		assert_int_equal(save_next(f), 0);
		if (round == 1) {
			uint64_t bytes;
			unsigned objects;
			assert_int_equal(rckpt_job_stored(f->j, &bytes, &objects), 0);
			nth = objects + 1; /* the job object goes last */
		}
		rckpt_job_close(f->j);
		f->j = NULL;
		hold(f, "retire", nth);
		assert_int_equal(rckpt_job_delete(f->h, "faults"), PAUSED);
		unhold(f);
		assert_int_equal(open_as(f, &w, 1), -EIDRM);
		assert_non_null(strstr(rckpt_errmsg(f->h), "being deleted"));
		assert_int_equal(rckpt_job_delete(f->h, "faults"), 0);
		forget_all(f);
		assert_int_equal(open_as(f, &f->j, 1), 0);
		assert_int_equal(save_next(f), 0);
		assert_int_equal(save_next(f), 0);
		assert_int_equal(save_next(f), 0);
		landed(f, -ESTALE);
		nothing_lost(f);
		forget_all(f);
		rckpt_job_close(f->j);
		f->j = NULL;
		assert_int_equal(rckpt_job_delete(f->h, "faults"), 0);
		assert_int_equal(open_as(f, &f->j, 1), 0);
	}
}

/* ---- takeover (store.md "Takeover") ---- */

static int open_taking(fx_t *f, rckpt_job_t **j, int takeover, unsigned wait_s)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	o.writer = 1;
	o.chunk_params = 1024;
	o.inflight = 2;
	o.compute = RCKPT_COMPUTE_CPU;
	o.takeover = takeover;
	o.wait_s = wait_s;
	return rckpt_job_open(f->h, j, "faults", &o);
}

/* Locks the job object under `cookie` for a minute, as a writer that
 * then vanished would have left it. */
static void lock_as(fx_t *f, const char *cookie)
{
	rckpt_io_t *io = NULL;
	assert_int_equal(mem_pool_open(f->pool, "faults", &io), 0);
	assert_int_equal(io->ops->lock(io, "rckpt.job", "rckpt.writer", cookie, 60, 0), 0);
	io->ops->close(io);
}

/* Whether process pid's /proc stat says state `st`, within a few seconds. */
static int state_is(pid_t pid, char st)
{
	char path[64], b[512];
	int tries;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	for (tries = 0; tries < 500; tries++) {
		FILE *f = fopen(path, "r");
		size_t k = f ? fread(b, 1, sizeof(b) - 1, f) : 0;
		const char *p;
		if (f)
			fclose(f);
		b[k] = '\0';
		p = strrchr(b, ')');
		if (p && p[1] == ' ' && p[2] == st)
			return 1;
		nanosleep(&(struct timespec){ 0, 10000000L }, NULL);
	}
	return 0;
}

/* A cookie made in a child process that has exited by the time this
 * returns: reaped (reap) or left a zombie. *pid gets the child's pid. */
static void dead_cookie(char *cookie, size_t cap, int reap, pid_t *pid)
{
	int fd[2];
	ssize_t n;
	assert_int_equal(pipe(fd), 0);
	*pid = fork();
	assert_true(*pid >= 0);
	if (*pid == 0) {
		char c[LOCK_COOKIE_MAX];
		rckpt_holder_cookie(c, sizeof(c), 7);
		if (write(fd[1], c, strlen(c) + 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	n = read(fd[0], cookie, cap - 1);
	close(fd[0]);
	assert_true(n > 0);
	cookie[n] = '\0';
	if (reap) {
		int st;
		assert_int_equal(waitpid(*pid, &st, 0), *pid);
	} else { /* until it is a zombie: its stat says Z */
		assert_true(state_is(*pid, 'Z'));
	}
}

/* The restart: writer W1 is still there (it holds the lock, and a
 * request of its save of step 3 is queued), and a new writer takes the
 * job over at once. W1's request then lands: refused; W1's next save is
 * refused saying it was taken over; every committed step restores as it
 * did, and W2 saves on. */
static void test_takeover_late_requests(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *w2 = NULL, *w3 = NULL;
	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	hold(f, "append", 2);
	assert_int_equal(save_as(f, f->j, 3, 3), PAUSED);
	unhold(f);
	/* W1 (f->j) holds the lock: not taken by default from a live process */
	assert_int_equal(open_taking(f, &w2, RCKPT_TAKEOVER_AUTO, 0), -EBUSY);
	assert_says(f, "this process");
	assert_int_equal(open_taking(f, &w2, RCKPT_TAKEOVER_ALWAYS, 0), 0);
	model_at(&f->m, 13);
	assert_int_equal(rckpt_job_save(w2, 3, f->m.t, NT, NULL, 0, NULL), 0);
	{ /* W2 is now the fixture's writer */
		rckpt_job_t *w1 = f->j;
		f->j = w2;
		committed(f, 3);
		assert_int_equal(save_as(f, f->j, 4, 14), 0);
		landed(f, -ESTALE);
		model_at(&f->m, 5);
		assert_int_equal(rckpt_job_save(w1, 5, f->m.t, NT, NULL, 0, NULL), -EBUSY);
		assert_says(f, "taken over");
		nothing_lost(f);
		rckpt_job_close(w1); /* its unlock is not W2's lock */
	}
	assert_int_equal(save_as(f, f->j, 5, 15), 0);
	assert_int_equal(open_taking(f, &w3, RCKPT_TAKEOVER_NEVER, 0), -EBUSY);
	nothing_lost(f);
}

/* AUTO takes over at once from a writer of this machine that has exited
 * (reaped, or a zombie not yet waited for), and never from one it cannot
 * tell about; NEVER waits wait_s and gives up; the lock's holder is named. */
static void test_takeover_auto(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *w = NULL;
	char cookie[LOCK_COOKIE_MAX], live[LOCK_COOKIE_MAX];
	pid_t pid;
	double t0;
	int reap;

	assert_int_equal(save_next(f), 0);
	assert_int_equal(save_next(f), 0);
	rckpt_job_close(f->j);
	f->j = NULL;
	for (reap = 1; reap >= 0; reap--) {
		dead_cookie(cookie, sizeof(cookie), reap, &pid);
		assert_int_equal(rckpt_holder_gone(cookie, live, sizeof(live)), 1);
		lock_as(f, cookie);
		assert_int_equal(open_taking(f, &w, RCKPT_TAKEOVER_NEVER, 0), -EBUSY);
		assert_says(f, "which has exited");
		assert_int_equal(open_taking(f, &f->j, RCKPT_TAKEOVER_AUTO, 0), 0);
		assert_int_equal(save_next(f), 0);
		nothing_lost(f);
		rckpt_job_close(f->j);
		f->j = NULL;
		if (!reap) {
			int st;
			assert_int_equal(waitpid(pid, &st, 0), pid);
		}
	}
	/* holders it cannot tell about: this live process, another machine,
	 * an older cookie */
	rckpt_holder_cookie(live, sizeof(live), 9);
	{
		const char *others[] = { live, "w1.00000001.4026531836.1.1.1", "4123.999" };
		unsigned i;
		for (i = 0; i < 3; i++) {
			rckpt_io_t *io = NULL;
			lock_as(f, others[i]);
			assert_int_equal(open_taking(f, &w, RCKPT_TAKEOVER_AUTO, 0), -EBUSY);
			assert_int_equal(mem_pool_open(f->pool, "faults", &io), 0);
			assert_int_equal(io->ops->unlock(io, "rckpt.job", "rckpt.writer", others[i]), 0);
			io->ops->close(io);
		}
	}
	/* waiting: NEVER with wait_s 1 gives up after a second */
	lock_as(f, live);
	t0 = rckpt_now_s();
	assert_int_equal(open_taking(f, &w, RCKPT_TAKEOVER_NEVER, 1), -EBUSY);
	assert_true(rckpt_now_s() - t0 >= 0.9);
	assert_says(f, "another writer");
	/* and ALWAYS takes it from anyone */
	assert_int_equal(open_taking(f, &f->j, RCKPT_TAKEOVER_ALWAYS, 0), 0);
	assert_int_equal(save_next(f), 0);
	nothing_lost(f);
}

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Until the parent closes its end of the pipe: the process lives on
 * here; then it ends at once (no exit handlers: a sanitizer's would
 * report the parent's heap). */
static void *hold_on(void *arg)
{
	char c;
	while (read(*(int *)arg, &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);
	return NULL;
}

/* The cookie child pid wrote to fd (the parent's ends kept: fd[0], the
 * hold pipe's writing end). */
static void child_cookie(char *cookie, size_t cap, pid_t pid, int fd[2], int hold[2])
{
	ssize_t n;
	assert_true(pid > 0);
	close(fd[1]);
	close(hold[0]);
	n = read(fd[0], cookie, cap - 1);
	close(fd[0]);
	assert_true(n > 0);
	cookie[n] = '\0';
}

/* A cookie made by a live process that `auto` must not take the job
 * from: one whose main thread has exited while another thread runs (its
 * leader shows as a zombie), and one in a time namespace of its own
 * (its start time reads otherwise from here), where the machine lets this
 * test make one. Each counts as gone once it has really exited. */
static void test_takeover_live_holders(void **state)
{
	char cookie[LOCK_COOKIE_MAX], what[128];
	int fd[2], hold[2], st;
	pid_t pid;

	(void)state;
	/* a zombie leader with a live thread */
	assert_int_equal(pipe(fd), 0);
	assert_int_equal(pipe(hold), 0);
	if ((pid = fork()) == 0) {
		pthread_t t;
		char c[LOCK_COOKIE_MAX];
		close(hold[1]);
		rckpt_holder_cookie(c, sizeof(c), 5);
		if (pthread_create(&t, NULL, hold_on, &hold[0]) || write(fd[1], c, strlen(c) + 1) < 0)
			_exit(1);
		pthread_exit(NULL); /* the main thread goes; the process does not */
	}
	child_cookie(cookie, sizeof(cookie), pid, fd, hold);
	assert_true(state_is(pid, 'Z'));
	assert_int_equal(rckpt_holder_gone(cookie, what, sizeof(what)), 0);
	print_message("a zombie leader with a live thread: %s\n", what);
	assert_non_null(strstr(what, "still running"));
	close(hold[1]); /* its thread returns: the process exits */
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(rckpt_holder_gone(cookie, what, sizeof(what)), 1);

	/* a writer in a time namespace of its own, its boot clock a day on */
	assert_int_equal(pipe(fd), 0);
	assert_int_equal(pipe(hold), 0);
	if ((pid = fork()) == 0) {
		int off, ok;
		pid_t inner;
		close(fd[0]);
		close(hold[1]);
		ok = unshare(CLONE_NEWTIME) == 0 && (off = open("/proc/self/timens_offsets", O_WRONLY)) >= 0;
		ok = ok && write(off, "boottime 86400 0\n", 17) == 17;
		if (!ok) { /* no time namespaces here: say so */
			if (write(fd[1], "", 1) < 0)
				_exit(1);
			_exit(0);
		}
		close(off);
		if ((inner = fork()) == 0) { /* the new namespace's first process */
			char c[LOCK_COOKIE_MAX];
			rckpt_holder_cookie(c, sizeof(c), 6);
			if (write(fd[1], c, strlen(c) + 1) < 0)
				_exit(1);
			hold_on(&hold[0]);
			_exit(0);
		}
		_exit(inner > 0 && waitpid(inner, &ok, 0) == inner ? 0 : 1);
	}
	child_cookie(cookie, sizeof(cookie), pid, fd, hold);
	if (cookie[0] == '\0') {
		print_message("no time namespace could be made here (unshare refused): that case untested\n");
	} else {
		long inner = 0;
		const char *p = cookie;
		unsigned dots = 0;
		for (; *p && dots < 4; p++) /* w2.boot.pidns.timens.PID */
			dots += *p == '.';
		inner = strtol(p, NULL, 10);
		assert_true(inner > 0);
		assert_int_equal(rckpt_holder_gone(cookie, what, sizeof(what)), 0);
		print_message("a writer in its own time namespace: %s\n", what);
		assert_non_null(strstr(what, "still running"));
		close(hold[1]);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_int_equal(rckpt_holder_gone(cookie, what, sizeof(what)), 1);
		hold[1] = -1;
	}
	if (hold[1] >= 0) {
		close(hold[1]);
		waitpid(pid, &st, 0);
	}
}

/* A writer's open of a job that does not exist creates nothing (an open
 * only to restore leaves no job); its first save makes the job and takes
 * its lock. rckpt_job_release lets the next writer in at once. */
static void test_lazy_open(void **state)
{
	fx_t *f = *state;
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_job_t *a = NULL, *b = NULL;
	rckpt_restored_t *r = NULL;
	rckpt_io_t *io = NULL;
	uint64_t size;

	o.writer = 1;
	o.chunk_params = 1024;
	o.compute = RCKPT_COMPUTE_CPU;
	o.takeover = RCKPT_TAKEOVER_NEVER;
	assert_int_equal(mem_pool_open(f->pool, "fresh", &io), 0);
	assert_int_equal(rckpt_job_open(f->h, &a, "fresh", &o), 0);
	assert_int_not_equal(rckpt_job_restore(a, RCKPT_LATEST, &r, NULL), 0);
	assert_int_equal(rckpt_job_open(f->h, &b, "fresh", &o), 0); /* no lock yet */
	rckpt_job_close(b);
	b = NULL;
	assert_int_equal(io->ops->stat(io, "rckpt.job", &size), -ENOENT);
	model_at(&f->m, 1);
	assert_int_equal(rckpt_job_save(a, 1, f->m.t, NT, NULL, 0, NULL), 0);
	assert_int_equal(io->ops->stat(io, "rckpt.job", &size), 0);
	assert_int_equal(rckpt_job_open(f->h, &b, "fresh", &o), -EBUSY);
	assert_int_equal(rckpt_job_release(a), 0);
	assert_int_equal(rckpt_job_open(f->h, &b, "fresh", &o), 0);
	model_at(&f->m, 2);
	assert_int_equal(rckpt_job_save(a, 2, f->m.t, NT, NULL, 0, NULL), -ENOLCK);
	assert_int_equal(rckpt_job_save(b, 2, f->m.t, NT, NULL, 0, NULL), 0);
	rckpt_job_close(a);
	rckpt_job_close(b);
	io->ops->close(io);
}

/* Two takeovers at once: writer A holds the lock; B takes it over and
 * claims; A's claim (its reclaim here) comes after. It runs under A's lock
 * in one operation, so it is refused (A no longer holds the lock) and B,
 * which holds the lock, keeps the token and saves on. Before, A's claim
 * took the token from the lock's holder: B could not commit any more. */
static void test_takeover_race(void **state)
{
	fx_t *f = *state;
	rckpt_job_t *b = NULL;
	assert_int_equal(save_next(f), 0);
	assert_int_equal(open_taking(f, &b, RCKPT_TAKEOVER_ALWAYS, 0), 0);
	assert_int_equal(rckpt_job_reclaim(f->j), -EBUSY); /* A's claim, landing after B's */
	{
		rckpt_job_t *a = f->j;
		f->j = b;
		assert_int_equal(save_as(f, f->j, 2, 2), 0); /* B commits */
		rckpt_job_close(a);
	}
	nothing_lost(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_late_trim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_append, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_manifest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_claim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_compactor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_gc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_rm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_takeover_late_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_takeover_auto, setup, teardown),
		cmocka_unit_test(test_takeover_live_holders),
		cmocka_unit_test_setup_teardown(test_lazy_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_takeover_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restore_beside_compaction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compaction_beside_a_new_segment, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
