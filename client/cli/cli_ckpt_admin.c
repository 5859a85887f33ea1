/*
 * cli_ckpt_admin.c — `rckpt ckpt compact | pin | rewind | branch | gc | rm`: the
 * housekeeping of one job (verify: cli_ckpt_verify.c).
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

/* ---- housekeeping ---- */

void ckpt_print_compact(const char *job, const rckpt_compact_stats_t *cs)
{
	cli_line("job %s: %" PRIu64 " -> %" PRIu64 " steps, chunks %" PRIu64 " -> %" PRIu64
		 " bytes, %u chunk objects, %u stages, slowest stage %.1f ms, %.2f s\n",
		 job, cs->steps_before, cs->steps_after, cs->bytes_before, cs->bytes_after, cs->chunks, cs->stages,
		 cs->max_call_seconds * 1e3, cs->seconds);
}

json_t *ckpt_compact_json(const char *job, const rckpt_compact_stats_t *cs)
{
	return json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:i, s:i, s:f, s:f}", "job", job, "ok", 1, "steps_before",
			 (json_int_t)cs->steps_before, "steps_after", (json_int_t)cs->steps_after, "bytes_before",
			 (json_int_t)cs->bytes_before, "bytes_after", (json_int_t)cs->bytes_after, "chunk_objects",
			 (int)cs->chunks, "stages", (int)cs->stages, "slowest_stage_seconds", cs->max_call_seconds,
			 "seconds", cs->seconds);
}

int ckpt_admin_parse(int argc, char **argv, admin_opts_t *a, const char *allowed, const char *what)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },       { "step", 1, 0, 's' },
					    { "keep-last", 1, 0, 'L' }, { "keep-every", 1, 0, 'M' },
					    { "off", 0, 0, 'O' },       { "deep", 0, 0, 'D' },
					    { "branch", 1, 0, 'B' },    { "to", 1, 0, 'T' },
					    { "upto", 1, 0, 'U' },      { "exact", 0, 0, 'X' },
					    WRITER_LONGOPTS,            { 0, 0, 0, 0 } };
	const rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	uint64_t v;
	int c;
	memset(a, 0, sizeof(*a));
	a->jo = jo;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:", lo, NULL)) != -1) {
		if (strchr(allowed, 'K') && (c == 'K' || c == 'k' || c == 'w')) {
			if (ckpt_writer_opt(c, &a->jo) < 0)
				return EXIT_USAGE;
			continue;
		}
		if (c == '?' || c == ':' || strchr(allowed, c) == NULL)
			return cli_option_error("ckpt", what, c, argv, optind);
		switch (c) {
		case 'j': a->job = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &a->step) || a->step == RCKPT_LATEST)
				return ckpt_usage_error(STEP_RULE);
			a->have_step = 1;
			break;
		case 'L':
			if (cli_parse_u64(optarg, &v) || v > UINT32_MAX)
				return ckpt_usage_error("--keep-last must be a whole number 0..4294967295 (the newest "
						   "steps kept; 0: no such rule)");
			a->pol.keep_last = (uint32_t)v;
			a->have_policy = 1;
			break;
		case 'M':
			if (cli_parse_u64(optarg, &v))
				return ckpt_usage_error("--keep-every must be a whole number (steps that are its multiples "
						   "are kept; 0: no such rule)");
			a->pol.keep_every = v;
			a->have_policy = 1;
			break;
		case 'O': a->off = 1; break;
		case 'X': a->exact = 1; break;
		case 'D': a->deep = 1; break;
		case 'B': a->branch = optarg; break;
		case 'T': a->to = optarg; break;
		case 'U':
			if (cli_parse_u64(optarg, &a->upto) || a->upto == RCKPT_LATEST)
				return ckpt_usage_error("--upto must be a whole number 0..18446744073709551614 (a step at "
						   "or after --step)");
			a->have_upto = 1;
			break;
		}
	}
	if (a->job == NULL || optind != argc)
		return cli_usage_errorf("ckpt", "%s needs --job J, and no other arguments", what);
	if (cli_check_name("ckpt", "--job", a->job) || (a->to && cli_check_name("ckpt", "--to", a->to)) ||
	    (a->branch && cli_check_name("ckpt", "--branch", a->branch)))
		return EXIT_USAGE;
	if (a->branch && strlen(a->job) + 1 + strlen(a->branch) > CLI_NAME_MAX)
		return cli_usage_errorf("ckpt",
					"--branch %s: the branch is job %s.%s, over %d characters (a name is 1..%d "
					"characters of A-Z a-z 0-9 . _ -, the first not . or -)",
					a->branch, a->job, a->branch, CLI_NAME_MAX, CLI_NAME_MAX);
	if (a->have_upto && a->have_step && a->upto < a->step)
		return ckpt_usage_error("--upto must be a step at or after --step");
	return 0;
}

int ckpt_cmd_compact(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_compact_stats_t cs;
	int rc = ckpt_admin_parse(argc, argv, &a, "jLM", "compact");
	if (rc)
		return rc;
	if (ckpt_open_existing(&h, &j, conn, a.job, NULL))
		return 1;
	if (a.have_policy && (rc = rckpt_job_set_retention(j, &a.pol)) != 0)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	if (rc == 0) {
		cli_progress_begin("compacting", 0, "", 0);
		cli_progress_item("job %s", a.job);
		if ((rc = rckpt_job_compact(j, NULL, &cs)) != 0)
			cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		cli_progress_end();
	}
	if (rc == 0 && cli_json_mode())
		rc = cli_json_out(ckpt_compact_json(a.job, &cs), conn) ? -EIO : 0;
	else if (rc == 0)
		ckpt_print_compact(a.job, &cs);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

int ckpt_cmd_pin(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	int rc = ckpt_admin_parse(argc, argv, &a, "jsOX", "pin");
	if (rc)
		return rc;
	if (!a.have_step)
		return ckpt_usage_error("pin needs --step N");
	if (a.exact && a.off)
		return ckpt_usage_error("pin takes --exact or --off, not both");
	if (ckpt_open_existing(&h, &j, conn, a.job, NULL))
		return 1;
	rc = rckpt_job_pin(j, a.step, a.off ? 0 : a.exact ? RCKPT_PIN_EXACT : 1);
	if (rc)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	else if (cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:I, s:b, s:b}", "job", a.job, "step", (json_int_t)a.step, "pinned",
					    !a.off, "exact", a.exact && !a.off),
				  conn)
			     ? -EIO
			     : 0;
	else
		printf("step %" PRIu64 " of job %s %s\n", a.step, a.job,
		       a.off ? "unpinned" : a.exact ? "pinned, exact" : "pinned");
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

int ckpt_cmd_rewind(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	uint64_t head = RCKPT_LATEST;
	unsigned n = 0, gone = 0, k;
	int rc = ckpt_admin_parse(argc, argv, &a, "jsBK", "rewind"), more = 1;
	if (rc)
		return rc;
	if (!a.have_step)
		return ckpt_usage_error("rewind needs --step N (a committed step)");
	cli_signals_guard();
	cli_signals_defer(1);
	jo = a.jo;
	jo.writer = 1;
	if (ckpt_open_existing(&h, &j, conn, a.job, &jo))
		return cli_interrupted() ? ckpt_interrupted("the job was not opened") : 1;
	cli_signals_job(j);
	{ /* what it abandons, for the message */
		rckpt_step_info_t si[64];
		uint64_t after = a.step;
		while (more && rckpt_job_steps(j, after, si, 64, &n, &more) == 0 && n) {
			for (k = 0; k < n; k++)
				head = si[k].step;
			gone += n;
			after = head;
		}
	}
	if (cli_interrupted()) {
		ckpt_close_job(h, j);
		return ckpt_interrupted("nothing rewound; the job's writer lock released");
	}
	if (a.branch && gone && !cli_json_mode())
		printf("copying steps %" PRIu64 "..%" PRIu64 " into job %s.%s ...\n", a.step, head, a.job, a.branch);
	fflush(stdout);
	if ((rc = rckpt_job_rewind(j, a.step, a.branch)) != 0)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	ckpt_close_job(h, j);
	if (rc == 0 && cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:I, s:i, s:o, s:o}", "job", a.job, "step", (json_int_t)a.step,
					    "later_steps", (int)gone, "old_head",
					    gone ? json_integer((json_int_t)head) : json_null(), "branch",
					    a.branch && gone ? json_sprintf("%s.%s", a.job, a.branch) : json_null()),
				  conn)
			     ? -EIO
			     : 0;
	else if (rc == 0 && gone && a.branch)
		printf("job %s rewound to step %" PRIu64 ": %u later steps (to %" PRIu64
		       ") kept as job %s.%s; the next save follows step %" PRIu64 "\n",
		       a.job, a.step, gone, head, a.job, a.branch, a.step);
	else if (rc == 0 && gone)
		printf("job %s rewound to step %" PRIu64 ": %u later steps (to %" PRIu64
		       ") forgotten; the next save follows step %" PRIu64 ", and 'rckpt ckpt gc' removes "
		       "what they stored\n",
		       a.job, a.step, gone, head, a.step);
	else if (rc == 0)
		printf("job %s: step %" PRIu64 " is the head already\n", a.job, a.step);
	if (cli_interrupted())
		return ckpt_interrupted(rc == 0 ? "after the rewind; the job's writer lock released"
					   : "the job's writer lock released");
	return rc ? 1 : 0;
}

int ckpt_cmd_branch(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	int rc = ckpt_admin_parse(argc, argv, &a, "jsUT", "branch");
	if (rc)
		return rc;
	if (!a.have_step || a.to == NULL)
		return ckpt_usage_error("branch needs --step N and --to NEWJOB");
	if (ckpt_open_existing(&h, &j, conn, a.job, NULL))
		return 1;
	rc = rckpt_job_branch(j, a.step, a.have_upto ? a.upto : a.step, a.to);
	if (rc)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	else if (cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:s, s:I, s:I}", "job", a.to, "from_job", a.job, "from",
					    (json_int_t)a.step, "upto", (json_int_t)(a.have_upto ? a.upto : a.step)),
				  conn)
			     ? -EIO
			     : 0;
	else
		printf("job %s starts from step %" PRIu64 " of job %s%s (copied); save on into it\n", a.to,
		       a.step, a.job, a.have_upto ? " and the steps after it" : "");
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

int ckpt_cmd_gc(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	unsigned removed = 0;
	int rc = ckpt_admin_parse(argc, argv, &a, "jK", "gc");
	if (rc)
		return rc;
	cli_signals_guard();
	cli_signals_defer(1);
	jo = a.jo;
	jo.writer = 1;
	if (ckpt_open_existing(&h, &j, conn, a.job, &jo))
		return cli_interrupted() ? ckpt_interrupted("the job was not opened") : 1;
	cli_signals_job(j);
	if (cli_interrupted() == 0 && (rc = rckpt_job_gc(j, &removed)) != 0)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	ckpt_close_job(h, j);
	if (cli_interrupted())
		return ckpt_interrupted(rc == 0 && removed ? "after the gc; the job's writer lock released"
						      : "the job's writer lock released");
	if (rc == 0 && cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:i}", "job", a.job, "removed", (int)removed), conn) ? -EIO : 0;
	else if (rc == 0)
		printf("job %s: trimmed records past the head, removed %u stale manifest(s)\n", a.job, removed);
	return rc ? 1 : 0;
}

int ckpt_cmd_rm(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	int rc = ckpt_admin_parse(argc, argv, &a, "js", "rm");
	if (rc)
		return rc;
	if (a.have_step) {
		if (ckpt_open_existing(&h, &j, conn, a.job, NULL))
			return 1;
		rc = rckpt_job_drop(j, a.step);
		if (rc == 0 && cli_json_mode())
			rc = cli_json_out(json_pack("{s:s, s:I, s:b}", "job", a.job, "step", (json_int_t)a.step,
						    "dropped", 1),
					  conn)
				     ? -EIO
				     : 0;
		else if (rc == 0)
			printf("step %" PRIu64 " of job %s dropped (its records go at the next compaction)\n",
			       a.step, a.job);
		else
			cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		rckpt_job_close(j);
	} else {
		/* the deletion holds the writer lock: a signal lets it end */
		cli_signals_guard();
		cli_signals_defer(1);
		if ((rc = rckpt_create(&h)) != 0 || (rc = rckpt_connect(h, conn)) != 0 ||
		    (rc = rckpt_job_delete(h, a.job)) != 0)
			cli_err("ckpt", rc, "%s", h ? rckpt_errmsg(h) : rckpt_strerror(rc));
		else if (cli_json_mode())
			rc = cli_json_out(json_pack("{s:s, s:b}", "job", a.job, "deleted", 1), conn) ? -EIO : 0;
		else
			printf("job %s deleted\n", a.job);
		if (cli_interrupted()) {
			rckpt_destroy(h);
			return ckpt_interrupted(rc == 0 ? "after the job was deleted" : "the deletion stopped");
		}
	}
	rckpt_destroy(h);
	return rc ? 1 : 0;
}
