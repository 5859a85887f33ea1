/*
 * cli_ckpt_compact.c — `rckpt compact --all | --job J`: every job of a pool under its own
 * retention policy (an operator's cron job).
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

/* `rckpt compact --all | --job J`: the operator's cron job. */
int rckpt_cli_compact(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "all", 0, 0, 'a' }, { "job", 1, 0, 'j' },
					    { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	const char *only = NULL;
	char **names = NULL;
	unsigned n = 0, i, failed = 0;
	uint64_t sb = 0, sa = 0, bb = 0, ba = 0;
	int all = 0, c, rc;
	rckpt_t *h = NULL;
	const int json = cli_json_mode();
	json_t *jobs = json ? json_array() : NULL;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":aj:h", lo, NULL)) != -1) {
		switch (c) {
		case 'a': all = 1; break;
		case 'j': only = optarg; break;
		case 'h':
			json_decref(jobs);
			printf("usage: rckpt [--pool P] compact (--all | --job J)\n\n"
			       "Compact every job of the pool (or job J) under its own retention policy\n"
			       "(set with 'rckpt ckpt compact --job J --keep-last N --keep-every M'; none\n"
			       "keeps every step): forget the steps it does not keep and rewrite each\n"
			       "chunk so that the latest step is a base. Safe beside running trainers\n"
			       "and beside another compaction, and to run twice. Prints a line per job\n"
			       "and a summary; exits 1 if any job failed. On a terminal, a progress\n"
			       "line on stderr.\n");
			return 0;
		default:
			json_decref(jobs);
			return cli_option_error("compact", "compact", c, argv, optind);
		}
	}
	if (all == (only != NULL) || optind != argc) {
		json_decref(jobs);
		return cli_usage_error("compact", "give --all or --job J");
	}
	if (only && cli_check_name("compact", "--job", only)) {
		json_decref(jobs);
		return EXIT_USAGE;
	}
	if ((rc = rckpt_create(&h)) || (rc = rckpt_connect(h, conn))) {
		cli_err("compact", rc, "%s", h ? rckpt_errmsg(h) : rckpt_strerror(rc));
		rckpt_destroy(h);
		json_decref(jobs);
		return 1;
	}
	if (only) {
		names = calloc(1, sizeof(*names));
		if (names && (names[0] = strdup(only)) != NULL)
			n = 1;
	} else if ((rc = rckpt_jobs(h, &names, &n))) {
		cli_err("compact", rc, "%s", rckpt_errmsg(h));
		rckpt_destroy(h);
		json_decref(jobs);
		return 1;
	}
	if (!json) {
		printf("compacting %u job(s) in pool %s\n", n, rckpt_pool_name(h));
		fflush(stdout);
	}
	cli_progress_begin("compacting", n, "jobs", 0);
	for (i = 0; i < n; i++) {
		rckpt_job_t *j = NULL;
		rckpt_compact_stats_t cs;
		const char *why = NULL;
		cli_progress_item("%s", names[i]);
		if ((rc = rckpt_job_open(h, &j, names[i], NULL)) == 0 && only && rckpt_job_exists(j) == 0) {
			why = "it does not exist";
			rc = -ENOENT;
		} else if (rc || (rc = rckpt_job_compact(j, NULL, &cs)))
			why = rckpt_errmsg(h);
		if (why) {
			/* failures on stderr, where a cron job's mail looks */
			cli_err("compact", rc, "[%u/%u] job %s: FAILED: %s", i + 1, n, names[i], why);
			if (json)
				json_array_append_new(jobs, json_pack("{s:s, s:b, s:s}", "job", names[i], "ok", 0, "error",
								      why));
			failed++;
		} else {
			if (json)
				json_array_append_new(jobs, ckpt_compact_json(names[i], &cs));
			else {
				cli_line("[%u/%u] ", i + 1, n);
				ckpt_print_compact(names[i], &cs);
			}
			sb += cs.steps_before;
			sa += cs.steps_after;
			bb += cs.bytes_before;
			ba += cs.bytes_after;
		}
		rckpt_job_close(j);
		cli_progress_set(i + 1, 0);
	}
	cli_progress_end();
	if (json)
		rc = cli_json_out(json_pack("{s:s, s:o, s:i, s:I, s:I, s:I, s:I}", "pool", rckpt_pool_name(h), "jobs",
					    jobs, "failed", (int)failed, "steps_before", (json_int_t)sb,
					    "steps_after", (json_int_t)sa, "bytes_before", (json_int_t)bb,
					    "bytes_after", (json_int_t)ba),
				  conn);
	else
		printf("compacted %u of %u job(s): %" PRIu64 " -> %" PRIu64 " steps, %" PRIu64 " -> %" PRIu64
		       " chunk bytes%s\n",
		       n - failed, n, sb, sa, bb, ba, failed ? " (some FAILED)" : "");
	rckpt_jobs_free(names, n);
	rckpt_destroy(h);
	return failed || (json && rc) ? 1 : 0;
}
