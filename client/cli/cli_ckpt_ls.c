/*
 * cli_ckpt_ls.c — `rckpt ckpt ls` and `rckpt ckpt jobs`: a job's steps, the pool's jobs.
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_ckpt.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"
#include "rckpt_store_wire.h" /* RCKPT_STORE_CHUNK_ELEMENTS_MAX */

/* ---- ls ---- */

/* The ranks of a step: a single writer is one rank. */
static unsigned ranks_of(const rckpt_step_info_t *s)
{
	return s->ranks ? s->ranks : 1;
}

/* `ckpt ls --format json`: the same as the table, one document. */
static int ls_json(rckpt_t *h, rckpt_job_t *j, const char *job, const rckpt_connect_opts_t *conn)
{
	rckpt_step_info_t s[256];
	rckpt_retention_t pol;
	rckpt_branch_info_t b[64];
	uint64_t after = RCKPT_LATEST, stored = 0;
	unsigned objects = 0, nb = 0, k;
	json_t *o = json_object(), *steps = json_array(), *br = json_array();
	int more = 1, rc = 0;
	while (more && rc == 0) {
		unsigned n = 0, i;
		rc = rckpt_job_steps(j, after, s, 256, &n, &more);
		for (i = 0; rc == 0 && i < n; i++) {
			/* an exact step's residuals are not split between the
			 * weights and the optimizer's state: no split then */
			const int exact = (s[i].flags & RCKPT_STEP_EXACT) != 0;
			json_t *x = json_pack("{s:I, s:s, s:I, s:I, s:f, s:i, s:I, s:o, s:I, s:o, s:i, s:b, s:b}", "step",
					      (json_int_t)s[i].step, "saved_as",
					      s[i].parent == RCKPT_LATEST ? "base" : "delta", "raw_bytes",
					      (json_int_t)s[i].raw_bytes, "stored_bytes", (json_int_t)s[i].enc_bytes,
					      "ratio", s[i].enc_bytes ? (double)s[i].raw_bytes / (double)s[i].enc_bytes : 0.0,
					      "chunks", (int)s[i].nchunks, "weights_raw_bytes",
					      (json_int_t)(s[i].raw_bytes - s[i].opt_raw_bytes), "weights_stored_bytes",
					      exact ? json_null()
						    : json_integer((json_int_t)(s[i].enc_bytes - s[i].opt_enc_bytes)),
					      "optimizer_raw_bytes", (json_int_t)s[i].opt_raw_bytes,
					      "optimizer_stored_bytes",
					      exact ? json_null() : json_integer((json_int_t)s[i].opt_enc_bytes), "ranks",
					      (int)ranks_of(&s[i]), "exact", exact, "new_layout",
					      (s[i].flags & RCKPT_STEP_LAYOUT) != 0);
			json_array_append_new(steps, x);
			after = s[i].step;
		}
		if (n == 0)
			break;
	}
	if (rc == 0)
		rc = rckpt_job_stored(j, &stored, &objects);
	if (rc == 0)
		rc = rckpt_job_retention(j, &pol);
	if (rc == 0)
		rc = rckpt_job_branches(j, b, 64, &nb);
	if (rc) {
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		json_decref(o);
		json_decref(steps);
		json_decref(br);
		return 1;
	}
	for (k = 0; k < nb; k++)
		json_array_append_new(br, json_pack("{s:s, s:s, s:I, s:I}", "job", b[k].job, "kind",
						     b[k].made_from ? "made from" : "kept at a rewind", "from",
						     (json_int_t)b[k].from, "upto", (json_int_t)b[k].upto));
	json_object_set_new(o, "job", json_string(job));
	json_object_set_new(o, "pool", json_string(rckpt_pool_name(h)));
	json_object_set_new(o, "steps", steps);
	json_object_set_new(o, "stored_bytes", json_integer((json_int_t)stored));
	json_object_set_new(o, "stored_objects", json_integer(objects));
	json_object_set_new(o, "policy", json_pack("{s:i, s:I}", "keep_last", (int)pol.keep_last, "keep_every",
						   (json_int_t)pol.keep_every));
	json_object_set_new(o, "branches", br);
	return cli_json_out(o, conn);
}

int ckpt_cmd_ls(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' }, { 0, 0, 0, 0 } };
	const char *job = NULL;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_step_info_t s[256];
	uint64_t after = RCKPT_LATEST, raw = 0, enc = 0, total = 0, oraw = 0, oenc = 0, lraw = 0, lenc = 0;
	unsigned nexact = 0;
	int c, more = 1, rc = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:", lo, NULL)) != -1) {
		if (c != 'j')
			return cli_option_error("ckpt", "ls", c, argv, optind);
		job = optarg;
	}
	if (job == NULL || optind != argc)
		return ckpt_usage_error("ls needs --job J, nothing else ('rckpt ckpt jobs' lists the jobs)");
	if (cli_check_name("ckpt", "--job", job))
		return EXIT_USAGE;
	if (ckpt_open_existing(&h, &j, conn, job, NULL))
		return 1;
	if (cli_json_mode()) {
		rc = ls_json(h, j, job, conn);
		rckpt_job_close(j);
		rckpt_destroy(h);
		return rc;
	}
	printf("%-10s %-8s %14s %12s %8s %7s %21s %22s\n", "step", "saved as", "raw bytes", "saved",
	       "ratio", "chunks", "weights: saved ratio", "optimizer: saved ratio");
	while (more && rc == 0) {
		unsigned n, i;
		rc = rckpt_job_steps(j, after, s, 256, &n, &more);
		for (i = 0; rc == 0 && i < n; i++) {
			/* the optimizer's state: its chunks' records; the weights:
			 * the rest (manifest and attachment included) */
			const uint64_t wraw = s[i].raw_bytes - s[i].opt_raw_bytes,
				       wenc = s[i].enc_bytes - s[i].opt_enc_bytes;
			const int exact = (s[i].flags & RCKPT_STEP_EXACT) != 0;
			char by[32] = "", opt[32] = "-", split[64];
			if (ranks_of(&s[i]) > 1)
				snprintf(by, sizeof(by), "  %u ranks", s[i].ranks);
			if (s[i].opt_raw_bytes)
				snprintf(opt, sizeof(opt), "%" PRIu64 " %6.1fx", s[i].opt_enc_bytes,
					 s[i].opt_enc_bytes ? (double)s[i].opt_raw_bytes / (double)s[i].opt_enc_bytes
							    : 0.0);
			/* an exact step's residuals are counted with no kind:
			 * its split would be false (the weights below 1x) */
			if (exact)
				snprintf(split, sizeof(split), "%44s", "(exact: whole step, not split)");
			else
				snprintf(split, sizeof(split), "%13" PRIu64 " %6.1fx %22s", wenc,
					 wenc ? (double)wraw / (double)wenc : 0.0, opt);
			printf("%-10" PRIu64 " %-8s %14" PRIu64 " %12" PRIu64 " %7.1fx %7u %s%s%s%s\n", s[i].step,
			       s[i].parent == RCKPT_LATEST ? "base" : "delta", s[i].raw_bytes, s[i].enc_bytes,
			       s[i].enc_bytes ? (double)s[i].raw_bytes / (double)s[i].enc_bytes : 0.0, s[i].nchunks,
			       split, by, exact ? "  exact" : "",
			       s[i].flags & RCKPT_STEP_LAYOUT ? "  new layout" : "");
			raw += s[i].raw_bytes;
			enc += s[i].enc_bytes;
			if (exact)
				nexact++;
			else {
				lraw += s[i].raw_bytes;
				lenc += s[i].enc_bytes;
				oraw += s[i].opt_raw_bytes;
				oenc += s[i].opt_enc_bytes;
			}
			after = s[i].step;
			total++;
		}
		if (n == 0)
			break;
	}
	if (rc == 0) {
		uint64_t stored = 0;
		unsigned objects = 0;
		printf("%" PRIu64 " step%s, %.1fx overall as saved", total, cli_s(total), enc ? (double)raw / (double)enc : 0.0);
		if (nexact)
			printf(" (%u exact, %.1fx)", nexact, enc > lenc ? (double)(raw - lraw) / (double)(enc - lenc) : 0.0);
		if (oraw)
			printf(": %sweights %.1fx, optimizer state %.1fx", nexact ? "the lossy steps' " : "",
			       lenc > oenc ? (double)(lraw - oraw) / (double)(lenc - oenc) : 0.0,
			       oenc ? (double)oraw / (double)oenc : 0.0);
		printf("\n");
		if ((rc = rckpt_job_stored(j, &stored, &objects)) == 0)
			printf("stored now: %" PRIu64 " bytes in %u objects (%.1fx of the steps' raw bytes)\n",
			       stored, objects, stored ? (double)raw / (double)stored : 0.0);
	}
	if (rc == 0) {
		rckpt_retention_t pol;
		if ((rc = rckpt_job_retention(j, &pol)) == 0) {
			if (pol.keep_last == 0 && pol.keep_every == 0)
				printf("policy: none (compaction keeps every step)\n");
			else if (pol.keep_every == 0)
				if (pol.keep_last == 1)
					printf("policy: keep the last step\n");
				else
					printf("policy: keep the last %u steps\n", pol.keep_last);
			else if (pol.keep_last == 0)
				printf("policy: keep the multiples of %" PRIu64 "\n", pol.keep_every);
			else
				printf("policy: keep the last %u step%s and the multiples of %" PRIu64 "\n",
				       pol.keep_last, cli_s(pol.keep_last), pol.keep_every);
		}
	}
	if (rc == 0) {
		rckpt_branch_info_t b[64];
		unsigned nb = 0, k;
		if ((rc = rckpt_job_branches(j, b, 64, &nb)) == 0)
			for (k = 0; k < nb; k++)
				printf(b[k].made_from ? "branch of job %s: made from its steps %" PRIu64 "..%" PRIu64 "\n"
						      : "branch %s: steps %" PRIu64 "..%" PRIu64 " kept at a rewind\n",
				       b[k].job, b[k].from, b[k].upto);
	}
	if (rc)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

/* ---- jobs ---- */

/* What `ckpt jobs` says of one job. */
typedef struct job_row {
	uint64_t steps, head, bytes;
	unsigned objects;
	int has_head;
} job_row_t;

static int job_row(rckpt_job_t *j, job_row_t *row)
{
	rckpt_step_info_t s[256];
	uint64_t after = RCKPT_LATEST;
	int more = 1, rc = 0;
	memset(row, 0, sizeof(*row));
	while (more && rc == 0) {
		unsigned n = 0;
		if ((rc = rckpt_job_steps(j, after, s, 256, &n, &more)) != 0 || n == 0)
			break;
		row->steps += n;
		row->head = after = s[n - 1].step;
		row->has_head = 1;
	}
	if (rc == 0)
		rc = rckpt_job_stored(j, &row->bytes, &row->objects);
	return rc;
}

/* Who writes job j: the holder of its lock, or the last writer's fencing
 * token (rckpt_job_writer: a reader may ask, and it takes nothing). */
#define WITH_WRITER 1
static json_t *job_writer(rckpt_job_t *j, char *text, size_t cap)
{
	rckpt_writer_info_t w;
	if (rckpt_job_writer(j, &w) != 0) {
		snprintf(text, cap, "?");
		return json_null();
	}
	if (w.locked)
		snprintf(text, cap, "locked by %.140s", w.holder);
	else if (w.token)
		snprintf(text, cap, "free (token %" PRIu64 ")", w.token);
	else
		snprintf(text, cap, "free");
	return json_pack("{s:b, s:s, s:I}", "locked", w.locked != 0, "holder", w.holder, "token",
			 (json_int_t)w.token);
}

int ckpt_cmd_jobs(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	char **names = NULL;
	unsigned n = 0, i, failed = 0;
	rckpt_t *h;
	json_t *all = json_array();
	int rc, with_writer;
	char wtext[160];

	(void)argv;
	with_writer = WITH_WRITER;
	if (argc != 1) {
		json_decref(all);
		return ckpt_usage_error("jobs takes no arguments");
	}
	if ((h = cli_connect(conn, "ckpt")) == NULL) {
		json_decref(all);
		return 1;
	}
	if ((rc = rckpt_jobs(h, &names, &n))) {
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		rckpt_destroy(h);
		json_decref(all);
		return 1;
	}
	if (!cli_json_mode())
		printf("%-32s %8s %12s %14s%s\n", "job", "steps", "head", "stored bytes", with_writer ? "  writer" : "");
	for (i = 0; i < n; i++) {
		rckpt_job_t *j = NULL;
		job_row_t row;
		json_t *w = NULL;
		if ((rc = rckpt_job_open(h, &j, names[i], NULL)) == 0 && (rc = job_row(j, &row)) == 0)
			w = with_writer ? job_writer(j, wtext, sizeof(wtext)) : NULL;
		if (rc) {
			failed++;
			cli_err("ckpt", rc, "job %s: %s", names[i], rckpt_errmsg(h));
			json_array_append_new(all, json_pack("{s:s, s:s}", "job", names[i], "error", rckpt_errmsg(h)));
		} else if (cli_json_mode()) {
			json_t *x = json_pack("{s:s, s:I, s:o, s:I, s:i}", "job", names[i], "steps", (json_int_t)row.steps,
					      "head", row.has_head ? json_integer((json_int_t)row.head) : json_null(),
					      "stored_bytes", (json_int_t)row.bytes, "stored_objects", (int)row.objects);
			json_object_set_new(x, "writer", w ? w : json_null());
			w = NULL;
			json_array_append_new(all, x);
		} else {
			char head[24] = "-";
			if (row.has_head)
				snprintf(head, sizeof(head), "%" PRIu64, row.head);
			printf("%-32s %8" PRIu64 " %12s %14" PRIu64 "%s%s\n", names[i], row.steps, head, row.bytes,
			       with_writer ? "  " : "", with_writer ? wtext : "");
		}
		json_decref(w);
		rckpt_job_close(j);
	}
	if (cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:O}", "pool", rckpt_pool_name(h), "jobs", all), conn);
	else {
		printf("%u job(s) in pool %s\n", n, rckpt_pool_name(h));
		rc = 0;
	}
	json_decref(all);
	rckpt_jobs_free(names, n);
	rckpt_destroy(h);
	return rc || failed ? 1 : 0;
}
