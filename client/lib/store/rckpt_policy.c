/*
 * rckpt_policy.c — the adaptive checkpoint policy for preemptible machines:
 * the Young/Daly interval from measured costs and the learned mean time to
 * preemption, insurance saves, and emergency saves on a notice.
 *
 * The preemption history lives in RADOS, one event per notice: in the job
 * object's omap (keys "x.pre.<unix ns, 20 digits>") and in the pool's
 * object "rckpt.preemptions" of the default namespace (keys "<unix ns, 20
 * digits>.<job>"), so a restarted job, and every job of the pool, learns
 * from it. Value (24 bytes, little-endian): f64 lifetime (seconds from the
 * run's start to the notice), f64 restart (seconds from the notice to the
 * next run's first step; < 0 while unknown), u64 unix ns of the notice.
 * Each object keeps its newest 1024 events: opening a policy trims older
 * ones.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "rckpt.h"
#include "rckpt_bytes.h"
#include "rckpt_clock.h"
#include "rckpt_store_internal.h"
#include "rckpt_store_wire.h"

#define POOL_OID "rckpt.preemptions"
#define JOB_PREFIX "x.pre."
#define EVENT_BYTES 24
#define KEEP_EVENTS 1024u /* events kept per object; older ones are trimmed */
#define PAGE 256u         /* omap entries per read */
#define MAX_PAGES 4096u   /* a bound on one read of a history (1M entries) */

extern char **environ;

struct rckpt_policy {
	rckpt_job_t *j;
	rckpt_policy_opts_t o;
	char *file, *cmd;
	double t_start;     /* monotonic */
	uint64_t start_ns;  /* realtime */
	double step_s, save_s, restart_s; /* moving averages; < 0: none yet */
	double mttp_s;
	unsigned npool, njob;
	double last_save;   /* monotonic; < 0: never */
	double last_poll;
	volatile sig_atomic_t notified;
	double notice_t;    /* monotonic; < 0: none */
	int recorded, emergency_done;
	char pending_key[64]; /* the job's last event, restart unknown */
	uint8_t pending_val[EVENT_BYTES];
};

double rckpt_policy_interval(double delta, double mttp, double r)
{
	const double m = mttp + r;
	double x;
	if (!(delta > 0) || !(m > 0))
		return 0;
	if (delta >= 2 * m)
		return m;
	x = delta / (2 * m);
	return sqrt(2 * delta * m) * (1 + sqrt(x) / 3 + x / 9) - delta;
}

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t le64(const uint8_t *b)
{
	return (uint64_t)rckpt_le32(b) | (uint64_t)rckpt_le32(b + 4) << 32;
}

static void fold(double *avg, double s)
{
	*avg = *avg < 0 ? s : 0.7 * *avg + 0.3 * s;
}

/* Events of an object's omap whose keys start with prefix, read a page
 * at a time, oldest first: the mean lifetime and restart (known ones) of
 * the newest `keep`, and the newest event itself (last_key, last_val).
 * Beyond the newest KEEP_EVENTS, older events are removed (an omap range
 * delete; losing the race to another writer only removes old events). */
struct ev {
	double life, rs;
	char key[64];
};

static int trim_events(rckpt_io_t *io, const char *oid, const char *prefix, const char *first_kept)
{
	int rc = io->ops->omap_rm_range(io, oid, prefix, first_kept);
	return rc == -ENOENT ? 0 : rc;
}

/* One page of a walk over the events. */
typedef struct ev_walk {
	struct ev *ring;
	uint64_t total;
	unsigned got;
	char *after; /* 64 bytes */
	char *last_key;
	uint8_t *last_val;
} ev_walk_t;

static int ev_one(void *arg, const char *key, const uint8_t *val, size_t len)
{
	ev_walk_t *w = arg;
	struct ev *e;
	w->got++;
	snprintf(w->after, 64, "%s", key);
	if (len != EVENT_BYTES || strlen(key) >= sizeof(e->key))
		return 0; /* not ours: skip it */
	e = &w->ring[w->total++ % KEEP_EVENTS];
	e->life = rckpt_u2d(le64(val));
	e->rs = rckpt_u2d(le64(val + 8));
	memcpy(e->key, key, strlen(key) + 1);
	if (w->last_key) {
		memcpy(w->last_key, key, strlen(key) + 1);
		memcpy(w->last_val, val, EVENT_BYTES);
	}
	return 0;
}

static int read_events(rckpt_io_t *io, const char *oid, const char *prefix, unsigned keep,
		       double *life_sum, unsigned *n, double *rs_sum, unsigned *nrs, char *last_key,
		       uint8_t *last_val)
{
	struct ev *ring = malloc(sizeof(*ring) * KEEP_EVENTS);
	char after[64] = "";
	uint64_t total = 0, i, from;
	unsigned page;
	int rc = 0;

	*life_sum = *rs_sum = 0;
	*n = *nrs = 0;
	if (ring == NULL)
		return -ENOMEM;
	for (page = 0; page < MAX_PAGES; page++) {
		ev_walk_t w = { ring, total, 0, after, last_key, last_val };
		int more = 0;
		rc = io->ops->omap_list(io, oid, after, prefix, PAGE, ev_one, &w, &more);
		total = w.total;
		if (rc || !more || w.got == 0)
			break;
	}
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 0) {
		from = total > keep ? total - keep : 0;
		for (i = from; i < total; i++) {
			const struct ev *e = &ring[i % KEEP_EVENTS];
			if (isfinite(e->life) && e->life > 0) {
				*life_sum += e->life;
				(*n)++;
			}
			if (isfinite(e->rs) && e->rs >= 0) {
				*rs_sum += e->rs;
				(*nrs)++;
			}
		}
		if (total > KEEP_EVENTS) /* best effort: a failed trim changes no estimate */
			(void)trim_events(io, oid, prefix, ring[total % KEEP_EVENTS].key);
	}
	free(ring);
	return rc;
}

static int put_event(rckpt_io_t *io, const char *oid, const char *key, const uint8_t *val)
{
	return io->ops->omap_set(io, oid, key, val, EVENT_BYTES);
}

/* The pool's default namespace, for the shared history. */
static int pool_io(rckpt_policy_t *p, rckpt_io_t **io)
{
	return rckpt_io_open(p->j->h, "", io);
}

static int load_history(rckpt_policy_t *p)
{
	rckpt_io_t *io;
	double life, rs, jl, jr;
	unsigned n, nrs, jn, jnrs;
	int rc;

	p->pending_key[0] = '\0';
	rc = read_events(p->j->io, RCKPT_STORE_JOB_OID, JOB_PREFIX, p->o.history, &jl, &jn, &jr, &jnrs,
			 p->pending_key, p->pending_val);
	if (rc)
		return rc;
	if (p->pending_key[0] && rckpt_u2d(le64(p->pending_val + 8)) >= 0)
		p->pending_key[0] = '\0'; /* its restart is known already */
	if ((rc = pool_io(p, &io)))
		return rc;
	rc = read_events(io, POOL_OID, "", p->o.history, &life, &n, &rs, &nrs, NULL, NULL);
	io->ops->close(io);
	if (rc)
		return rc;
	p->njob = jn;
	p->npool = n;
	p->mttp_s = n ? life / n : jn ? jl / jn : p->o.default_mttp_s;
	if (p->restart_s < 0 && (nrs || jnrs))
		p->restart_s = nrs ? rs / nrs : jr / jnrs;
	return 0;
}

int rckpt_policy_open(rckpt_job_t *j, rckpt_policy_t **out, const rckpt_policy_opts_t *o)
{
	rckpt_policy_opts_t def = RCKPT_POLICY_OPTS_INIT;
	rckpt_t *h = j->h;
	rckpt_policy_t *p;
	int rc;

	*out = NULL;
	rckpt_clear_error(h);
	if (o == NULL)
		o = &def;
	if (o->version != RCKPT_POLICY_OPTS_VERSION || o->grace_s < 0 || o->beta_s < 0 ||
	    o->default_mttp_s < 0 || o->min_interval_s < 0 || o->poll_s < 0 || o->history > KEEP_EVENTS)
		return rckpt_fail(h, -EINVAL, __func__, "bad policy options");
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return rckpt_fail(h, -ENOMEM, __func__, "out of memory");
	p->j = j;
	p->o = *o;
	if (p->o.grace_s == 0)
		p->o.grace_s = 30;
	if (p->o.beta_s == 0)
		p->o.beta_s = 1;
	if (p->o.default_mttp_s == 0)
		p->o.default_mttp_s = 3600;
	if (p->o.poll_s == 0)
		p->o.poll_s = 1;
	if (p->o.history == 0)
		p->o.history = 64;
	p->file = o->notice_file ? strdup(o->notice_file) : NULL;
	p->cmd = o->notice_cmd ? strdup(o->notice_cmd) : NULL;
	p->o.notice_file = p->file;
	p->o.notice_cmd = p->cmd;
	p->t_start = rckpt_now_s();
	p->start_ns = real_ns();
	p->step_s = p->save_s = p->restart_s = -1;
	p->last_save = p->notice_t = -1;
	p->last_poll = -1e9;
	if ((o->notice_file && !p->file) || (o->notice_cmd && !p->cmd)) {
		rckpt_policy_close(p);
		return rckpt_fail(h, -ENOMEM, __func__, "out of memory");
	}
	if ((rc = load_history(p))) {
		rckpt_policy_close(p);
		return rckpt_fail(h, rc, __func__, "cannot read the preemption history of job %s", j->name);
	}
	*out = p;
	return 0;
}

void rckpt_policy_close(rckpt_policy_t *p)
{
	if (p == NULL)
		return;
	free(p->file);
	free(p->cmd);
	free(p);
}

void rckpt_policy_step_time(rckpt_policy_t *p, double s)
{
	if (s >= 0 && isfinite(s))
		fold(&p->step_s, s);
}

void rckpt_policy_save_time(rckpt_policy_t *p, double s)
{
	if (s >= 0 && isfinite(s))
		fold(&p->save_s, s);
}

int rckpt_policy_restart_time(rckpt_policy_t *p, double s)
{
	rckpt_t *h = p->j->h;
	rckpt_writer_t w;
	rckpt_io_t *io;
	char key[128];
	int rc;

	rckpt_clear_error(h);
	if (!(s >= 0) || !isfinite(s))
		return rckpt_fail(h, -EINVAL, __func__, "bad restart time");
	fold(&p->restart_s, s);
	if (p->pending_key[0] == '\0')
		return 0; /* no preemption waits for its restart time */
	w = rckpt_writer(p->pending_val + 8, 8);
	rckpt_wr_u64(&w, rckpt_d2u(s));
	if ((rc = put_event(p->j->io, RCKPT_STORE_JOB_OID, p->pending_key, p->pending_val)) == 0 &&
	    (rc = pool_io(p, &io)) == 0) {
		snprintf(key, sizeof(key), "%s.%s", p->pending_key + strlen(JOB_PREFIX), p->j->name);
		rc = put_event(io, POOL_OID, key, p->pending_val);
		io->ops->close(io);
	}
	p->pending_key[0] = '\0';
	return rc ? rckpt_fail(h, rc, __func__, "cannot record the restart time") : 0;
}

void rckpt_policy_notify(rckpt_policy_t *p)
{
	p->notified = 1;
}

/* Runs `sh -c cmd`; 1 when it exits 0 within 5 s (killed after). */
static int run_notice_cmd(const char *cmd)
{
	char *argv[] = { (char *)"sh", (char *)"-c", (char *)cmd, NULL };
	pid_t pid;
	int status = 0, k;
	if (posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ) != 0)
		return 0;
	for (k = 0; k < 500; k++) {
		const struct timespec ts = { 0, 10000000 };
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (r < 0)
			return 0;
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return 0;
}

/* The notice on record: this run's lifetime, in the job and the pool. */
static void record_notice(rckpt_policy_t *p)
{
	uint8_t val[EVENT_BYTES];
	char key[64], pkey[128];
	rckpt_writer_t w = rckpt_writer(val, sizeof(val));
	const uint64_t ns = real_ns();
	rckpt_io_t *io;

	p->recorded = 1;
	rckpt_wr_u64(&w, rckpt_d2u(p->notice_t - p->t_start));
	rckpt_wr_u64(&w, rckpt_d2u(-1.0));
	rckpt_wr_u64(&w, ns);
	snprintf(key, sizeof(key), JOB_PREFIX "%020" PRIu64, ns);
	snprintf(pkey, sizeof(pkey), "%020" PRIu64 ".%s", ns, p->j->name);
	/* best effort: a notice leaves no time to retry */
	(void)put_event(p->j->io, RCKPT_STORE_JOB_OID, key, val);
	if (pool_io(p, &io) == 0) {
		(void)put_event(io, POOL_OID, pkey, val);
		io->ops->close(io);
	}
}

static double interval_of(const rckpt_policy_t *p)
{
	double t = rckpt_policy_interval(p->save_s, p->mttp_s, p->restart_s > 0 ? p->restart_s : 0);
	return t > p->o.min_interval_s ? t : p->o.min_interval_s;
}

static int emergency_fits(const rckpt_policy_t *p)
{
	return (p->step_s > 0 ? p->step_s : 0) + (p->save_s > 0 ? p->save_s : 0) + p->o.beta_s <
	       p->o.grace_s;
}

int rckpt_policy_should_save(rckpt_policy_t *p, uint64_t step)
{
	const double now = rckpt_now_s();
	(void)step;
	if (!p->notified && now - p->last_poll >= p->o.poll_s && (p->file || p->cmd)) {
		struct stat sb;
		p->last_poll = now;
		if ((p->file && stat(p->file, &sb) == 0) || (p->cmd && run_notice_cmd(p->cmd)))
			p->notified = 1;
	}
	if (p->notified) {
		double left;
		if (p->notice_t < 0)
			p->notice_t = now;
		if (!p->recorded)
			record_notice(p);
		if (p->emergency_done)
			return RCKPT_POLICY_STOP;
		left = p->o.grace_s - (now - p->notice_t);
		/* the step is done: what is left is the save and the margin */
		return (p->save_s > 0 ? p->save_s : 0) + p->o.beta_s < left ? RCKPT_POLICY_EMERGENCY
									 : RCKPT_POLICY_STOP;
	}
	if (p->save_s < 0 || p->last_save < 0)
		return RCKPT_POLICY_SAVE; /* the first: it also measures a save */
	if (now - p->last_save < interval_of(p))
		return RCKPT_POLICY_CONTINUE;
	return emergency_fits(p) ? RCKPT_POLICY_SAVE : RCKPT_POLICY_INSURANCE;
}

void rckpt_policy_saved(rckpt_policy_t *p, uint64_t step)
{
	(void)step;
	p->last_save = rckpt_now_s();
	if (p->notified)
		p->emergency_done = 1;
}

int rckpt_policy_info(rckpt_policy_t *p, rckpt_policy_info_t *out)
{
	memset(out, 0, sizeof(*out));
	out->mttp_s = p->mttp_s;
	out->preemptions = p->npool;
	out->job_preemptions = p->njob;
	out->save_s = p->save_s > 0 ? p->save_s : 0;
	out->restart_s = p->restart_s > 0 ? p->restart_s : 0;
	out->step_s = p->step_s > 0 ? p->step_s : 0;
	out->interval_s = interval_of(p);
	out->emergency_fits = emergency_fits(p);
	out->noticed = p->notified != 0;
	out->notice_age_s = p->notice_t >= 0 ? rckpt_now_s() - p->notice_t : 0;
	return 0;
}
