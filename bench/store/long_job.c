/*
 * long_job.c — a long job on a live cluster left at its defaults (issue 26):
 * --steps saves of one --params parameter matrix that drifts as a trained
 * weight does, keeping everything, each step restored right after its save;
 * then every step restored again and checked by content (the same bytes as
 * right after its save, and within the codec's error of the source it is
 * regenerated from); then a compaction under --keep-last/--keep-every, the
 * chunk objects counted before and after, and the kept steps checked again.
 * Prints the segments, the largest object against the OSDs'
 * osd_max_object_size, and the timings. Exit 1 when any check fails.
 *
 * usage: long_job [--conf PATH] [--pool NAME] [--job J] [--steps N]
 *                 [--params N] [--keep-last N] [--keep-every M] [--check-every K]
 *                 [--noise A] [--restore-every R]
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "rckpt.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t fnv(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;
	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* Step s of a weight matrix: a field that drifts slowly, with noise that
 * changes every step (SGD's), in closed form so any step can be made
 * again to check its restore. */
static double noise = 0.004; /* --noise: the per-step noise's amplitude */

static void model_at(float *w, uint64_t n, uint64_t s)
{
	uint64_t i;
	for (i = 0; i < n; i++) {
		uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(s * 40503u);
		x ^= x >> 13;
		x *= 0x5bd1e995u;
		x ^= x >> 15;
		w[i] = (float)(0.05 * sin(0.0007 * (double)i + 0.001 * (double)s) +
			       noise * ((double)(x & 0xffff) / 65536.0 - 0.5));
	}
}

/* Restores step s into got: 0 and its hash and relative error, or the
 * restore's error. */
static int restore(rckpt_job_t *j, uint64_t s, float *got, float *src, uint64_t n, uint64_t *hash,
		   double *rel)
{
	rckpt_restored_t *r = NULL;
	double num = 0, den = 0;
	uint64_t i;
	int rc = rckpt_job_restore(j, s, &r, NULL);
	if (rc)
		return rc;
	rc = rckpt_restored_read(r, 0, got, n * sizeof(float));
	rckpt_restored_free(r);
	if (rc)
		return rc;
	model_at(src, n, s);
	for (i = 0; i < n; i++) {
		num += (got[i] - src[i]) * (double)(got[i] - src[i]);
		den += src[i] * (double)src[i];
	}
	*rel = num / den;
	*hash = fnv(got, n * sizeof(float));
	return 0;
}

typedef struct census {
	unsigned chunks, segments;
	uint64_t biggest, bytes;
} census_t;

/* The job's chunk objects: how many, in how many segments, the largest. */
static int census(rados_ioctx_t io, census_t *c)
{
	rados_list_ctx_t lc;
	const char *oid;
	char **segs = NULL;
	unsigned nseg = 0, k;
	int rc = rados_nobjects_list_open(io, &lc);
	memset(c, 0, sizeof(*c));
	if (rc)
		return rc;
	while ((rc = rados_nobjects_list_next(lc, &oid, NULL, NULL)) == 0) {
		uint64_t size = 0;
		time_t mt;
		const char *dot;
		if (strncmp(oid, "rckpt.chunk.", 12) != 0)
			continue;
		if (rados_stat(io, oid, &size, &mt) == 0) {
			c->bytes += size;
			if (size > c->biggest)
				c->biggest = size;
		}
		c->chunks++;
		dot = strchr(oid + 12, '.');
		dot = dot ? dot + 1 : "first";
		for (k = 0; k < nseg && strcmp(segs[k], dot) != 0; k++)
			;
		if (k == nseg) {
			char **q = realloc(segs, (nseg + 1) * sizeof(*q));
			if (q == NULL)
				break;
			segs = q;
			segs[nseg++] = strdup(dot);
		}
	}
	rados_nobjects_list_close(lc);
	c->segments = nseg;
	for (k = 0; k < nseg; k++)
		free(segs[k]);
	free(segs);
	return rc == -ENOENT ? 0 : rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: long_job [--conf PATH] [--pool NAME] [--job J] [--steps N (1000)]\n"
		   "                [--params N (4194304)] [--keep-last N (20)] [--keep-every M (100)]\n"
		   "                [--check-every K (1: restore every step again at the end)]\n"
		   "                [--noise A (0.004: each step's noise against a field of 0.05)]\n"
		   "                [--restore-every R (1: restore each R-th step right after its save,\n"
		   "                 and check that later restores give the same bytes)]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "conf", required_argument, NULL, 'c' },   { "pool", required_argument, NULL, 'p' },
		{ "job", required_argument, NULL, 'j' },    { "steps", required_argument, NULL, 's' },
		{ "params", required_argument, NULL, 'n' }, { "keep-last", required_argument, NULL, 'l' },
		{ "keep-every", required_argument, NULL, 'e' },
		{ "check-every", required_argument, NULL, 'k' },
		{ "noise", required_argument, NULL, 'z' },
		{ "restore-every", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
	};
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	rckpt_retention_t keep = { 20, 100 };
	rckpt_compact_stats_t cs;
	const char *job = "long-job";
	uint64_t steps = 1000, n = (uint64_t)1 << 22, every = 1, restore_every = 1, s, *hash = NULL,
		 max_object = 0;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rados_t cl = NULL;
	rados_ioctx_t io = NULL;
	float *w = NULL, *got = NULL, *src = NULL;
	double t0, t_save = 0, t_restore = 0, worst = 0;
	census_t before, after;
	unsigned bad = 0, checked = 0, restored = 0;
	int c, rc;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': co.conf_path = optarg; break;
		case 'p': co.pool = optarg; break;
		case 'j': job = optarg; break;
		case 's': steps = strtoull(optarg, NULL, 10); break;
		case 'n': n = strtoull(optarg, NULL, 10); break;
		case 'l': keep.keep_last = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'e': keep.keep_every = strtoull(optarg, NULL, 10); break;
		case 'k': every = strtoull(optarg, NULL, 10); break;
		case 'z': noise = strtod(optarg, NULL); break;
		case 'r': restore_every = strtoull(optarg, NULL, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || steps == 0 || n < 1024 || every == 0 || restore_every == 0) {
		usage(stderr);
		return 2;
	}
	if (!(hash = calloc(steps + 1, sizeof(*hash))) || !(w = malloc(n * 4)) || !(got = malloc(n * 4)) ||
	    !(src = malloc(n * 4))) {
		fprintf(stderr, "long_job: out of memory\n");
		return 1;
	}
	if (rckpt_create(&h) || rckpt_connect(h, &co)) {
		fprintf(stderr, "long_job: %s\n", h ? rckpt_errmsg(h) : "out of memory");
		return 1;
	}
	/* the OSDs' limit, as the monitors have it, and the job's namespace */
	if (rados_create(&cl, NULL) || rados_conf_read_file(cl, co.conf_path) || rados_connect(cl) ||
	    rados_ioctx_create(cl, rckpt_pool_name(h), &io)) {
		fprintf(stderr, "long_job: cannot connect with librados\n");
		return 1;
	}
	{
		const char *cmd[1] = { "{\"prefix\": \"config get\", \"who\": \"osd\", \"key\": \"osd_max_object_size\"}" };
		char *ob = NULL, *os = NULL;
		size_t ol = 0, osl = 0;
		if (rados_mon_command(cl, cmd, 1, "", 0, &ob, &ol, &os, &osl) == 0 && ob)
			max_object = strtoull(ob, NULL, 10);
		rados_buffer_free(ob);
		rados_buffer_free(os);
	}
	rados_ioctx_set_namespace(io, job);
	printf("long_job: %" PRIu64 " saves of %" PRIu64 " parameters (%.1f MiB fp32) into job %s of pool %s; "
	       "osd_max_object_size %.0f MiB\n",
	       steps, n, n * 4 / 1048576.0, job, rckpt_pool_name(h), max_object / 1048576.0);
	jo.writer = 1;
	if (rckpt_job_open(h, &j, job, &jo)) {
		fprintf(stderr, "long_job: %s\n", rckpt_errmsg(h));
		return 1;
	}
	t0 = now_s();
	for (s = 1; s <= steps; s++) {
		rckpt_tensor_t t = { "layer.weight", RCKPT_F32, 2, { 2048, n / 2048 }, w };
		double a, rel;
		if (n % 2048) {
			t.shape[0] = n;
			t.shape[1] = 1;
		}
		model_at(w, n, s);
		a = now_s();
		if ((rc = rckpt_job_save(j, s, &t, 1, NULL, 0, NULL))) {
			fprintf(stderr, "long_job: save %" PRIu64 ": %s\n", s, rckpt_errmsg(h));
			return 1;
		}
		t_save += now_s() - a;
		a = now_s();
		if (s % restore_every == 0 && (rc = restore(j, s, got, src, n, &hash[s], &rel))) {
			fprintf(stderr, "long_job: restore %" PRIu64 ": %s\n", s, rckpt_errmsg(h));
			return 1;
		}
		if (s % restore_every == 0)
			restored++;
		t_restore += now_s() - a;
		if (s % 100 == 0 || s == steps) {
			census(io, &before);
			printf("  step %" PRIu64 ": %u segments, %u chunk objects, the largest %.1f MiB; "
			       "save %.2f s, restore %.2f s on average (%.0f s so far)\n",
			       s, before.segments, before.chunks, before.biggest / 1048576.0, t_save / s,
			       restored ? t_restore / restored : 0.0, now_s() - t0);
			fflush(stdout);
		}
	}
	census(io, &before);
	/* every step (every --check-every-th) again, by content */
	for (s = 1; s <= steps; s++) {
		uint64_t hh;
		double rel;
		if (s % every && s != steps)
			continue;
		checked++;
		if (restore(j, s, got, src, n, &hh, &rel) || (hash[s] && hh != hash[s]) || !(rel < 0.01)) {
			if (bad++ < 5)
				fprintf(stderr, "long_job: step %" PRIu64 " does not restore as saved (%s)\n", s,
					rckpt_errmsg(h));
		}
		if (rel > worst)
			worst = rel;
		if (hash[s] == 0)
			hash[s] = hh; /* what compaction must keep */
	}
	printf("saved %" PRIu64 " steps: %u segments, %u chunk objects, %.1f MiB, the largest object %.1f MiB "
	       "(osd_max_object_size %.0f MiB); %u restored again by content: %u differ; worst relative "
	       "error %.2e\n",
	       steps, before.segments, before.chunks, before.bytes / 1048576.0, before.biggest / 1048576.0,
	       max_object / 1048576.0, checked, bad, worst);
	if (rckpt_job_compact(j, &keep, &cs)) {
		fprintf(stderr, "long_job: compact: %s\n", rckpt_errmsg(h));
		return 1;
	}
	census(io, &after);
	checked = 0;
	{
		rckpt_step_info_t *si = calloc(steps + 1, sizeof(*si));
		unsigned got_n = 0, k;
		int more = 0;
		if (si == NULL || rckpt_job_steps(j, RCKPT_LATEST, si, (unsigned)steps + 1, &got_n, &more)) {
			fprintf(stderr, "long_job: cannot list the steps: %s\n", rckpt_errmsg(h));
			return 1;
		}
		for (k = 0; k < got_n; k++) {
			uint64_t hh;
			double rel;
			checked++;
			if (restore(j, si[k].step, got, src, n, &hh, &rel) || (hash[si[k].step] && hh != hash[si[k].step]) || !(rel < 0.01)) {
				if (bad++ < 5)
					fprintf(stderr, "long_job: kept step %" PRIu64 " does not restore as saved\n",
						si[k].step);
			}
		}
		free(si);
	}
	printf("compacted (keep-last %u, keep-every %" PRIu64 ") in %.1f s: %" PRIu64 " -> %" PRIu64
	       " steps, %u -> %u segments, %u -> %u chunk objects, %.1f -> %.1f MiB; %u kept steps restored "
	       "as saved: %s\n",
	       keep.keep_last, keep.keep_every, cs.seconds, cs.steps_before, cs.steps_after, before.segments,
	       after.segments, before.chunks, after.chunks, before.bytes / 1048576.0, after.bytes / 1048576.0,
	       checked, bad ? "NO" : "yes");
	rckpt_job_close(j);
	rckpt_destroy(h);
	rados_ioctx_destroy(io);
	rados_shutdown(cl);
	free(hash);
	free(w);
	free(got);
	free(src);
	return bad || after.segments >= before.segments ? 1 : 0;
}
