/*
 * rckpt_cli_ckpt.c — `rckpt ckpt save | restore | export | ls | jobs |
 * compact | pin | rewind | branch | verify | gc | rm` and `rckpt compact
 * --all`: checkpoints of training jobs in the cluster (librckpt's public
 * job API).
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

#include "rckpt_cli.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"
#include "rckpt_store_wire.h" /* RCKPT_STORE_CHUNK_ELEMENTS_MAX */

static int usage_error(const char *what)
{
	return cli_usage_error("ckpt", what);
}

#define STEP_RULE "--step must be a whole number 0..18446744073709551614 (a step)"

/* The writer options of save, rewind and gc (formats/store.md, "Takeover"):
 * 1 when c was one of them (jo set), -1 a bad value (said), 0 not one. */
static int writer_opt(int c, rckpt_job_opts_t *jo)
{
	uint64_t v;
	switch (c) {
	case 'K': jo->takeover = RCKPT_TAKEOVER_ALWAYS; return 1;
	case 'k': jo->takeover = RCKPT_TAKEOVER_NEVER; return 1;
	case 'w':
		if (cli_parse_u64(optarg, &v) || v > 86400) {
			cli_usage_error("ckpt", "--wait must be a whole number of seconds, 0..86400");
			return -1;
		}
		jo->wait_s = (unsigned)v;
		return 1;
	}
	return 0;
}
#define WRITER_LONGOPTS { "takeover", 0, 0, 'K' }, { "no-takeover", 0, 0, 'k' }, { "wait", 1, 0, 'w' }

static const char help_text[] =
	"usage: rckpt [options] ckpt save --job J [--step N] [--eps E] [--exact] [--lease S]\n"
	"                                 [--takeover | --no-takeover] [--wait S]\n"
	"                                 [--chunk-params N] [--mem-budget MIB]\n"
	"                                 [--grads G.safetensors] MODEL.safetensors...\n"
	"       rckpt [options] ckpt restore --job J [--step N] [--tensors a,b] -o OUT.safetensors\n"
	"       rckpt [options] ckpt export --job J [--step N] [--from-dump FILE] -o DIR\n"
	"       rckpt [options] ckpt ls --job J\n"
	"       rckpt [options] ckpt jobs\n"
	"       rckpt [options] ckpt compact --job J [--keep-last N] [--keep-every M]\n"
	"       rckpt [options] ckpt pin --job J --step N [--exact | --off]\n"
	"       rckpt [options] ckpt rewind --job J --step N [--branch NAME] [--takeover] [--wait S]\n"
	"       rckpt [options] ckpt branch --job J --step N [--upto M] --to NEWJOB\n"
	"       rckpt [options] ckpt verify --job J [--deep]\n"
	"       rckpt [options] ckpt gc --job J [--takeover] [--wait S]\n"
	"       rckpt [options] ckpt rm --job J [--step N]\n"
	"\n"
	"save     compress and commit checkpoints into job J (a namespace of the pool, 1..63\n"
	"         characters of A-Z a-z 0-9 . _ -), in the order given, each as the step its\n"
	"         file name ends with (step-000025 is step 25), or from --step N on (N, N+1,\n"
	"         ...). Each step is a delta against\n"
	"         the one before, the first too when the job has a committed head of the same\n"
	"         tensors (its levels come from the OSDs). The gradient RMS that weighs errors\n"
	"         comes from --grads (one file only) or a sibling MODEL.grads.safetensors;\n"
	"         --eps bounds the Fisher-weighted relative error, in (0, 1) (default 0.0012:\n"
	"         see 'rckpt codec --help'). --exact stores the steps bit-exact: lossy records\n"
	"         plus the bits quantization changed, in byte planes (zstd); their\n"
	"         restores match the files' SHA-256, and later lossy saves are deltas on\n"
	"         them. An optimizer's state beside a model, MODEL.optim.safetensors\n"
	"         (exp_avg.P, exp_avg_sq.P: Adam's moments of P; momentum_buffer.P; other\n"
	"         tensors), is saved as the step's optimizer state: compressed apart, judged\n"
	"         by the error of the update it makes (README \"Adam's state\"). A sibling\n"
	"         MODEL.state (what 'restore' writes: the step's non-tensor state) is\n"
	"         attached to the step as it is.\n"
	"         Every file is checked before the job is touched.\n"
	"         Takes the job's writer lock. When another writer holds it: by default\n"
	"         taken over at once if that writer was a process of this machine that\n"
	"         has exited (a restart after a crash); --takeover takes it over at once\n"
	"         whoever holds it (the old writer's requests are fenced: nothing it still\n"
	"         sends can change the job), --no-takeover never; otherwise it waits up to\n"
	"         --wait seconds (default 0), then fails naming the holder. A dead\n"
	"         writer's lock expires --lease seconds (default 30) after its last save.\n"
	"         SIGINT (Ctrl-C) or SIGTERM releases the lock at once and ends it\n"
	"         (exit 130, 143): the steps it printed are committed, the next not.\n"
	"         --mem-budget (default 256 MiB)\n"
	"         bounds what a save holds beyond the encoder's state of one byte per\n"
	"         parameter, whatever the model's size; chunks hold --chunk-params\n"
	"         parameters (default and most: 4 Mi). Prints each step's ratio and timings.\n"
	"restore  materialize a committed step (default: the latest) in the OSDs, check\n"
	"         every chunk's SHA-256, and write its tensors (or only those --tensors\n"
	"         names, reading only the chunks that hold them) to OUT.safetensors, its\n"
	"         optimizer's state, if it has one, to OUT.optim.safetensors, and its\n"
	"         attachment, if it has one (the non-tensor state a trainer keeps: a\n"
	"         scheduler, RNG states, the epoch, param groups; the Python binding's\n"
	"         format, rckpt._plain.loads), to OUT.state, as stored. The files are\n"
	"         written whole or not at all; siblings of OUT from before that the step\n"
	"         does not have are removed.\n"
	"         When the OSDs lack the rckpt class (or refuse it), the chains are\n"
	"         folded here instead, to the same bytes, slower; it says so.\n"
	"export   write every listed step (or step N) of job J to DIR/step-NNNNNN.safetensors,\n"
	"         folding each chain here, without the OSDs' rckpt class; with --from-dump,\n"
	"         from a file that `rados -p POOL --all export FILE` wrote, with no cluster\n"
	"         at all. DIR is made if it does not exist.\n"
	"ls       list the committed steps as they were saved (kind, size, ratio, and\n"
	"         the weights' and the optimizer state's bytes and ratios apart, but for\n"
	"         exact steps, whose residuals are not split; a compaction rewrites them\n"
	"         later), what the job stores now, and its retention policy.\n"
	"jobs     list the jobs of the pool: committed steps, the head step, the bytes\n"
	"         each stores now.\n"
	"compact  apply the retention policy (--keep-last N newest steps, --keep-every M:\n"
	"         steps that are multiples of M; the head and pinned steps always stay; given\n"
	"         options are stored as the job's policy) and rewrite the chunks so that the\n"
	"         latest step is a base. Safe beside a running writer, and to repeat.\n"
	"pin      keep step N whatever the policy (--off: unpin it); --exact: a milestone\n"
	"         that must stay bit-exact, refused for a step not saved with --exact.\n"
	"rewind   move the head back to committed step N (a loss spike: restore N, skip\n"
	"         some batches, save N+1 anew). The later steps are forgotten at once;\n"
	"         the next save trims their records and 'gc' removes the rest; with\n"
	"         --branch NAME they are first copied (with N) into job J.NAME, which\n"
	"         'ls' lists. Takes the writer lock; refused past a pinned step. A writer\n"
	"         restarted later goes on from N.\n"
	"branch   start NEWJOB from step N of job J (through --upto M), copied once (a\n"
	"         chain lives in one object): fine-tune from a checkpoint, then save on\n"
	"         into NEWJOB.\n"
	"verify   check every stored record's CRC in the OSDs and every step's manifest;\n"
	"         --deep also materializes every committed step and checks each chunk's\n"
	"         SHA-256; exit 1 when anything is damaged.\n"
	"gc       remove what no committed step uses (a crashed writer's records and\n"
	"         manifests); refused while a writer holds the job.\n"
	"rm       delete job J and all its objects (refused while a writer holds it), or\n"
	"         with --step N forget that one step (not the head, not a pinned one).\n"
	"\n"
	"Global options (--conf, --id/--user, --pool, --timeout, --read-from, --format)\n"
	"go before 'ckpt' or after the subcommand.\n"
	"On a terminal, save, restore, export and compact show a progress line on stderr.\n"
	"'rckpt compact --all' compacts every job of the pool under its own policy.\n";

static void usage(void)
{
	fputs(help_text, stdout);
}

/* A sibling of a checkpoint file: X.SUFFIX beside X.safetensors (or
 * beside X when it has no such ending), malloc'd. */
static char *sibling(const char *path, const char *suffix)
{
	size_t l = strlen(path), cap = l + strlen(suffix) + 2;
	char *s = malloc(cap);
	if (s)
		snprintf(s, cap, "%.*s.%s", (int)(l > 12 && strcmp(path + l - 12, ".safetensors") == 0 ? l - 12 : l),
			 path, suffix);
	return s;
}

static uint64_t size_of(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int exists(const char *path)
{
	struct stat sb;
	return lstat(path, &sb) == 0;
}

static int open_job(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *job,
		    const rckpt_job_opts_t *jo)
{
	return cli_open_job(h, j, conn, "ckpt", job, jo);
}

/* Opens a job that must exist already: a command on a missing job (a typo)
 * says so and fails, as `pcr` does for a missing dataset. Checked before
 * a writer's open, which would create it. */
static int open_existing(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *job,
			 const rckpt_job_opts_t *jo)
{
	int rc, e;
	if ((rc = open_job(h, j, conn, job, NULL)))
		return rc;
	e = rckpt_job_exists(*j);
	if (e != 1) {
		if (e == 0)
			cli_err("ckpt", -ENOENT, "job %s does not exist in pool %s ('rckpt ckpt jobs' lists them)",
				job, rckpt_pool_name(*h));
		else
			cli_err("ckpt", e, "%s", rckpt_errmsg(*h));
		rckpt_job_close(*j);
		rckpt_destroy(*h);
		*j = NULL;
		*h = NULL;
		return e == 0 ? -ENOENT : e;
	}
	if (jo == NULL)
		return 0;
	rckpt_job_close(*j);
	*j = NULL;
	if ((rc = rckpt_job_open(*h, j, job, jo))) {
		cli_err("ckpt", rc, "%s", rckpt_errmsg(*h));
		rckpt_destroy(*h);
		*h = NULL;
	}
	return rc;
}

/* Closes a job and its handle (first taking the job off the signal
 * thread's hands). */
static void close_job(rckpt_t *h, rckpt_job_t *j)
{
	cli_signals_job(NULL);
	rckpt_job_close(j);
	rckpt_destroy(h);
}

/* After a command stopped on a signal: says so (the lock is released by
 * now), and the exit status, 130 or 143. */
static int interrupted(const char *what)
{
	int s = cli_interrupted();
	cli_err("ckpt", -EINTR, "interrupted by %s: %s", s == SIGTERM ? "SIGTERM" : "SIGINT", what);
	return cli_interrupt_status();
}

/* ---- save ---- */

typedef struct save_run {
	rckpt_t *h;
	int exact;
	uint64_t raw, enc;
	unsigned committed;
	uint64_t last;
	json_t *steps; /* the committed steps (JSON) */
} save_run_t;

/* Waits for a save's commit and reports it. */
static int finish(save_run_t *sr, rckpt_save_t *pend, uint64_t s, size_t attached)
{
	rckpt_save_stats_t ss;
	const char *kind;
	int rc = rckpt_save_wait(pend, &ss);
	if (rc) {
		cli_err("ckpt", rc, "step %" PRIu64 ": %s", s, rckpt_errmsg(sr->h));
		return rc;
	}
	sr->raw += ss.raw_bytes;
	sr->enc += ss.enc_bytes;
	sr->committed++;
	sr->last = s;
	kind = sr->exact ? "exact" : ss.is_base ? "base" : "delta";
	json_array_append_new(sr->steps,
			      json_pack("{s:I, s:s, s:I, s:I, s:f, s:i, s:I, s:f, s:f}", "step", (json_int_t)s, "kind",
					kind, "raw_bytes", (json_int_t)ss.raw_bytes, "stored_bytes",
					(json_int_t)ss.enc_bytes,
					"ratio", ss.enc_bytes ? (double)ss.raw_bytes / (double)ss.enc_bytes : 0.0,
					"chunks", (int)ss.nchunks, "attachment_bytes", (json_int_t)attached,
					"encode_seconds", ss.t_encode, "write_seconds", ss.t_write));
	if (!cli_json_mode()) {
		cli_line("step %-8" PRIu64 " %-5s %6.1fx  %9" PRIu64 " -> %8" PRIu64
			 " bytes  %2u chunks  encode %6.1f ms  write %6.1f ms\n",
			 s, kind, (double)ss.raw_bytes / (double)ss.enc_bytes, ss.raw_bytes, ss.enc_bytes,
			 ss.nchunks, ss.t_encode * 1e3, ss.t_write * 1e3);
		if (attached)
			cli_line("  with its attached state (%zu bytes, from the MODEL.state beside it)\n", attached);
	}
	return 0;
}

/* The tensors of a step: the model's file st and, when there is one, the
 * optimizer's (a sibling STEP.optim.safetensors, as bench/make_transformer.py
 * writes it; roles by rckpt_file_optim_role's convention). Declares their
 * roles and hands back one array (*out, freed by the caller). */
static int optim_join(rckpt_job_t *j, const rckpt_file_t *st, const rckpt_file_t *os,
		      rckpt_tensor_t **out, unsigned *n)
{
	const unsigned nm = rckpt_file_count(st), no = os ? rckpt_file_count(os) : 0;
	rckpt_tensor_role_t *r = NULL;
	unsigned i;
	int rc;

	*out = malloc(sizeof(**out) * (nm + no + 1));
	r = malloc(sizeof(*r) * (no + 1));
	if (*out == NULL || r == NULL) {
		free(r);
		return -ENOMEM;
	}
	memcpy(*out, rckpt_file_tensors(st), sizeof(**out) * nm);
	for (i = 0; i < no; i++) {
		const rckpt_tensor_t *t = &rckpt_file_tensors(os)[i];
		(*out)[nm + i] = *t;
		rckpt_file_optim_role(t->name, &r[i]);
	}
	*n = nm + no;
	rc = rckpt_job_set_roles(j, r, no);
	free(r);
	return rc;
}

/* Reads a whole file (the MODEL.state beside a model): 0 or -errno. */
static int read_whole(const char *path, uint8_t **out, size_t *len)
{
	FILE *f;
	uint64_t n = size_of(path);
	int rc = 0;
	*out = NULL;
	*len = 0;
	if (n > ((uint64_t)1 << 30))
		return -EFBIG; /* what an attachment may hold */
	if ((f = fopen(path, "rb")) == NULL)
		return -errno;
	if ((*out = malloc(n ? (size_t)n : 1)) == NULL)
		rc = -ENOMEM;
	else if (fread(*out, 1, (size_t)n, f) != (size_t)n)
		rc = -EIO;
	fclose(f);
	if (rc) {
		free(*out);
		*out = NULL;
	} else
		*len = (size_t)n;
	return rc;
}

/* The files of a save, each checked before the job is touched: the
 * model's, and beside it its gradients', optimizer's and state's when
 * there. *bytes: what they hold, for the progress line. */
static int save_check_files(int argc, char **argv, int first, const char *gfile, uint64_t *bytes)
{
	int i, rc = 0;
	*bytes = 0;
	if (gfile && cli_check_safetensors("ckpt", gfile))
		return 1;
	for (i = first; i < argc && rc == 0; i++) {
		char *g, *o, *st;
		if (cli_is_sibling(argv[i]))
			continue;
		if (cli_check_safetensors("ckpt", argv[i]))
			return 1;
		g = sibling(argv[i], "grads.safetensors");
		o = sibling(argv[i], "optim.safetensors");
		st = sibling(argv[i], "state");
		if (!g || !o || !st) {
			cli_err("ckpt", -ENOMEM, "out of memory");
			rc = 1;
		} else if ((!gfile && exists(g) && cli_check_safetensors("ckpt", g)) ||
			   (exists(o) && cli_check_safetensors("ckpt", o)) || (exists(st) && cli_check_file("ckpt", st)))
			rc = 1;
		else
			*bytes += size_of(argv[i]) + (exists(o) ? size_of(o) : 0);
		free(g);
		free(o);
		free(st);
	}
	return rc;
}

static int cmd_save(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },   { "step", 1, 0, 's' },
					    { "eps", 1, 0, 'e' },   { "lease", 1, 0, 'l' },
					    { "chunk-params", 1, 0, 'C' }, { "grads", 1, 0, 'g' },
					    { "mem-budget", 1, 0, 'M' }, { "exact", 0, 0, 'X' },
					    WRITER_LONGOPTS,         { 0, 0, 0, 0 } };
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	const char *job = NULL, *gfile = NULL;
	uint64_t step = UINT64_MAX, v, total = 0, done = 0;
	save_run_t sr = { 0 };
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_save_t *pend = NULL;
	uint64_t pend_step = 0, pend_bytes = 0;
	size_t pend_att = 0;
	char *end;
	int c, i, rc = 0, nfiles = 0, k = 0, ret;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:e:l:C:g:M:", lo, NULL)) != -1) {
		const int w = writer_opt(c, &jo);
		if (w < 0)
			return EXIT_USAGE;
		if (w)
			continue;
		switch (c) {
		case 'j': job = optarg; break;
		case 'X': jo.exact = 1; break;
		case 'g': gfile = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &step) || step == RCKPT_LATEST)
				return usage_error(STEP_RULE);
			break;
		case 'e':
			jo.eps = strtod(optarg, &end);
			if (end == optarg || *end || !(jo.eps > 0 && jo.eps < 1))
				return usage_error("--eps must be a number in (0, 1), both excluded: the bound of the "
						   "Fisher-weighted relative error (default 0.0012)");
			break;
		case 'l':
			if (cli_parse_u64(optarg, &v) || v == 0 || v > 86400)
				return usage_error("--lease must be a whole number of seconds, 1..86400");
			jo.lease_s = (unsigned)v;
			break;
		case 'C':
			if (cli_parse_u64(optarg, &v) || v == 0 || v > RCKPT_STORE_CHUNK_ELEMENTS_MAX)
				return usage_error("--chunk-params must be 1..4194304 (2^22: what one "
						   "call of the OSD plugin takes of a chunk)");
			jo.chunk_params = v;
			break;
		case 'M':
			if (cli_parse_u64(optarg, &v) || v == 0 || v > ((uint64_t)1 << 30))
				return usage_error("--mem-budget must be a whole number of MiB, 1..2^30");
			jo.mem_budget = v << 20;
			break;
		default: return cli_option_error("ckpt", "save", c, argv, optind);
		}
	}
	if (job == NULL)
		return usage_error("save needs --job J");
	if (cli_check_name("ckpt", "--job", job))
		return EXIT_USAGE;
	for (i = optind; i < argc; i++)
		nfiles += !cli_is_sibling(argv[i]);
	if (nfiles == 0)
		return usage_error("save needs at least one MODEL.safetensors");
	if (gfile && nfiles != 1)
		return usage_error("--grads goes with exactly one MODEL.safetensors");
	/* Every file checked before the job is touched (no empty job, no step
	 * committed, for a typo in the last file's name). */
	if (save_check_files(argc, argv, optind, gfile, &total))
		return 1;
	/* a signal while the lock is taken waits for it, then releases it */
	cli_signals_guard();
	cli_signals_defer(1);
	jo.writer = 1;
	if (open_job(&h, &j, conn, job, &jo))
		return cli_interrupted() ? interrupted("the job was not opened") : 1;
	cli_signals_job(j);
	sr.h = h;
	sr.exact = jo.exact;
	sr.steps = json_array();
	cli_progress_begin("saving", (uint64_t)nfiles, "files", total);
	for (i = optind; i < argc && rc == 0 && !cli_interrupted(); i++) {
		rckpt_file_t *st = NULL, *gs = NULL, *os = NULL;
		rckpt_tensor_t *all = NULL;
		unsigned nall = 0;
		uint8_t *att = NULL;
		size_t attlen = 0;
		char err[512], *gpath = NULL, *opath = NULL, *spath = NULL;
		uint64_t s = step != UINT64_MAX ? step + (uint64_t)k : cli_step_of(argv[i], 0), bytes;

		if (cli_is_sibling(argv[i]))
			continue;
		k++;
		cli_progress_item("step %" PRIu64, s);
		gpath = sibling(argv[i], "grads.safetensors");
		opath = sibling(argv[i], "optim.safetensors");
		spath = sibling(argv[i], "state");
		if (!gpath || !opath || !spath) {
			rc = -ENOMEM;
			cli_err("ckpt", rc, "out of memory");
		} else if ((rc = rckpt_file_read(&st, argv[i], err, sizeof(err))))
			cli_err("ckpt", rc, "%s: %s", argv[i], err);
		else if (gfile && (rc = rckpt_file_read(&gs, gfile, err, sizeof(err))))
			cli_err("ckpt", rc, "%s: %s", gfile, err);
		else if (!gfile && exists(gpath) && (rc = rckpt_file_read(&gs, gpath, err, sizeof(err))))
			cli_err("ckpt", rc, "%s: %s", gpath, err);
		else if (exists(opath) && (rc = rckpt_file_read(&os, opath, err, sizeof(err))))
			cli_err("ckpt", rc, "%s: %s", opath, err);
		else if (exists(spath) && (rc = read_whole(spath, &att, &attlen)))
			cli_err("ckpt", rc, "%s: %s", spath, rc == -EFBIG ? "over 1 GiB, more than a step's attachment may hold" : strerror(-rc));
		bytes = size_of(argv[i]) + (os ? size_of(opath) : 0);
		/* The previous step's appends ran while this file was read. */
		if (pend) {
			int r2 = finish(&sr, pend, pend_step, pend_att);
			pend = NULL;
			if (r2 == 0)
				cli_progress_set((uint64_t)sr.committed, done += pend_bytes);
			if (rc == 0)
				rc = r2;
		}
		if (rc == 0 && cli_interrupted() == 0) {
			rc = optim_join(j, st, os, &all, &nall);
			if (rc == 0 && att)
				rc = rckpt_job_attach(j, att, attlen);
			if (rc == 0)
				rc = rckpt_job_save_async(j, s, all, nall, gs ? rckpt_file_tensors(gs) : NULL,
							  gs ? rckpt_file_count(gs) : 0, &pend);
			if (rc)
				cli_err("ckpt", rc, "%s: %s", argv[i], rckpt_errmsg(h));
			pend_step = s;
			pend_bytes = bytes;
			pend_att = att ? attlen : 0;
		}
		free(all);
		free(att);
		free(gpath);
		free(opath);
		free(spath);
		rckpt_file_free(st);
		rckpt_file_free(gs);
		rckpt_file_free(os);
	}
	/* the last step, unless a signal asked to stop: then its lock is
	 * released sooner, and the step is not committed */
	if (rc == 0 && pend && !cli_interrupted()) {
		rc = finish(&sr, pend, pend_step, pend_att);
		pend = NULL;
	}
	cli_progress_end();
	cli_signals_job(NULL);
	rckpt_job_close(j); /* releases the lock; a save in flight never commits */
	if (pend)
		rckpt_save_wait(pend, NULL); /* -ECANCELED; frees it */
	rckpt_destroy(h);
	if (cli_interrupted()) {
		char what[160];
		snprintf(what, sizeof(what), "%u step(s) committed%s; the job's writer lock released", sr.committed,
			 sr.committed ? "" : ", none");
		if (sr.committed)
			snprintf(what, sizeof(what), "%u step(s) committed, the last step %" PRIu64
				 "; the job's writer lock released", sr.committed, sr.last);
		cli_err_detail("committed", json_incref(sr.steps));
		ret = interrupted(what);
	} else if (rc) {
		cli_err_detail("committed", json_incref(sr.steps));
		ret = 1;
	} else if (cli_json_mode()) {
		ret = cli_json_out(json_pack("{s:s, s:O, s:I, s:I, s:f}", "job", job, "steps", sr.steps, "raw_bytes",
					     (json_int_t)sr.raw, "stored_bytes", (json_int_t)sr.enc, "ratio",
					     sr.enc ? (double)sr.raw / (double)sr.enc : 0.0),
				   conn);
	} else {
		if (sr.committed > 1)
			printf("saved %u steps: %.1fx overall (%" PRIu64 " -> %" PRIu64 " bytes)\n", sr.committed,
			       sr.enc ? (double)sr.raw / (double)sr.enc : 0.0, sr.raw, sr.enc);
		ret = 0;
	}
	json_decref(sr.steps);
	return ret;
}

/* ---- restore ---- */

/* Writes len bytes to path (a staged temporary): 0 or -errno. */
static int write_bytes(const char *path, const void *p, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc = 0;
	if (f == NULL)
		return -errno;
	if (len && fwrite(p, 1, len, f) != len)
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	return rc;
}

static size_t tensor_bytes(const rckpt_tensor_t *d)
{
	uint64_t e = 1;
	unsigned k;
	for (k = 0; k < d->ndim; k++)
		e *= d->shape[k];
	return (size_t)e * (d->dtype == RCKPT_F32 ? 4 : 2);
}

static int cmd_restore(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },
					    { "step", 1, 0, 's' },
					    { "output", 1, 0, 'o' },
					    { "tensors", 1, 0, 'T' },
					    { 0, 0, 0, 0 } };
	const char *job = NULL, *outp = NULL, *tlist = NULL, *tmodel, *topt = NULL, *tstate = NULL;
	char *tcopy = NULL, *names[4096], *optp = NULL, *statep = NULL;
	unsigned nnames = 0, nout = 0;
	uint64_t step = RCKPT_LATEST, total = 0, written = 0;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *r = NULL;
	rckpt_restore_stats_t rs;
	rckpt_tensor_t *t = NULL;
	cli_stage_t sg = { 0 };
	const void *att = NULL;
	size_t attlen = 0;
	uint8_t **bufs = NULL;
	unsigned i, n = 0, nopt = 0;
	int c, rc, here = 0, *opt = NULL, has_att = 0, stale_opt = 0, stale_state = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:o:T:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 'T': tlist = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &step) || step == RCKPT_LATEST)
				return usage_error(STEP_RULE);
			break;
		case 'o': outp = optarg; break;
		default: return cli_option_error("ckpt", "restore", c, argv, optind);
		}
	}
	if (job == NULL || outp == NULL || optind != argc)
		return usage_error("restore needs --job J and -o OUT.safetensors, nothing else");
	if (cli_check_name("ckpt", "--job", job))
		return EXIT_USAGE;
	if (tlist) {
		char *tok, *save = NULL;
		if ((tcopy = strdup(tlist)) == NULL)
			return 1;
		for (tok = strtok_r(tcopy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (nnames == sizeof(names) / sizeof(names[0])) {
				free(tcopy);
				return usage_error("--tensors names at most 4096 tensors");
			}
			names[nnames++] = tok;
		}
		if (nnames == 0) {
			free(tcopy);
			return usage_error("--tensors needs names, comma-separated");
		}
	}
	/* the outputs, checked before anything is read: OUT and its siblings */
	optp = sibling(outp, "optim.safetensors");
	statep = sibling(outp, "state");
	if (optp == NULL || statep == NULL) {
		rc = -ENOMEM;
		cli_err("ckpt", rc, "out of memory");
		goto done;
	}
	if ((rc = cli_check_out("ckpt", outp)) || (rc = cli_check_out("ckpt", optp)) ||
	    (rc = cli_check_out("ckpt", statep)))
		goto done;
	cli_signals_guard(); /* a signal removes the temporaries, then ends it */
	if ((rc = open_job(&h, &j, conn, job, NULL)))
		goto done;
	cli_progress_begin("restoring", 0, "", 0);
	if (step != RCKPT_LATEST)
		cli_progress_item("step %" PRIu64, step);
	rc = rckpt_job_restore_tensors(j, step, (const char *const *)names, nnames, &r, &rs);
	if (rc) {
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		goto done;
	}
	{
		char why[160];
		if ((here = rckpt_job_folds_here(j, why, sizeof(why))) == 1)
			cli_note("ckpt", "folded in the client (slower): %s", why);
	}
	n = rckpt_restored_count(r);
	t = calloc(n ? n : 1, sizeof(*t));
	bufs = calloc(n ? n : 1, sizeof(*bufs));
	opt = calloc(n ? n : 1, sizeof(*opt));
	rc = t && bufs && opt ? 0 : -ENOMEM;
	for (i = 0; i < n && rc == 0; i++) {
		rckpt_tensor_t d;
		unsigned k, want = nnames == 0;
		rckpt_restored_tensor(r, i, &d);
		for (k = 0; k < nnames && !want; k++)
			want = strcmp(names[k], d.name) == 0;
		if (want)
			total += tensor_bytes(&d);
	}
	cli_progress_begin("restoring", n, "tensors", total);
	cli_progress_item("step %" PRIu64, rckpt_restored_step(r));
	for (i = 0; i < n && rc == 0; i++) {
		rckpt_tensor_t d;
		size_t bytes;
		unsigned k, want = nnames == 0;
		rckpt_restored_tensor(r, i, &d);
		for (k = 0; k < nnames && !want; k++)
			want = strcmp(names[k], d.name) == 0;
		if (!want)
			continue;
		bytes = tensor_bytes(&d);
		t[nout] = d;
		bufs[nout] = malloc(bytes ? bytes : 1);
		rc = bufs[nout] ? rckpt_restored_read(r, i, bufs[nout], bytes) : -ENOMEM;
		t[nout].data = bufs[nout];
		opt[nout] = rckpt_restored_role(r, i) != RCKPT_ROLE_MODEL;
		nopt += opt[nout];
		nout++;
		cli_progress_set(i + 1, written += bytes);
	}
	if (rc) {
		cli_err("ckpt", rc, "reading the restored tensors: %s", rc == -ENOMEM ? "out of memory" : rckpt_strerror(rc));
		goto done;
	}
	has_att = rckpt_restored_attachment(r, &att, &attlen) == 0;
	/* every output under a temporary name, renamed into place at the end */
	if ((tmodel = cli_stage_add(&sg, outp)) == NULL || (nopt && (topt = cli_stage_add(&sg, optp)) == NULL) ||
	    (has_att && (tstate = cli_stage_add(&sg, statep)) == NULL)) {
		rc = -ENOMEM;
		cli_err("ckpt", rc, "out of memory");
		goto done;
	}
	/* the model's tensors to OUT, the optimizer's state to its sibling
	 * OUT.optim.safetensors (what `ckpt save` reads beside a model) */
	if (nopt) {
		rckpt_tensor_t *to = calloc(nopt, sizeof(*to));
		unsigned a = 0, b = 0;
		if (to == NULL) {
			rc = -ENOMEM;
			cli_err("ckpt", rc, "out of memory");
			goto done;
		}
		for (i = 0; i < nout; i++) {
			if (opt[i])
				to[b++] = t[i];
			else
				t[a++] = t[i];
		}
		rc = rckpt_file_write(topt, to, nopt);
		free(to);
		if (rc) {
			cli_err("ckpt", rc, "%s: cannot write it: %s", optp, rckpt_strerror(rc));
			goto done;
		}
	}
	if ((rc = rckpt_file_write(tmodel, t, nout - nopt))) {
		cli_err("ckpt", rc, "%s: cannot write it: %s", outp, rckpt_strerror(rc));
		goto done;
	}
	/* the attachment, as stored: the Python binding's plain data (the
	 * scheduler, RNG states, epoch, param groups of a nested state) */
	if (has_att && (rc = write_bytes(tstate, att, attlen))) {
		cli_err("ckpt", rc, "%s: cannot write it: %s", statep, strerror(-rc));
		goto done;
	}
	cli_progress_end();
	if ((rc = cli_stage_commit(&sg, "ckpt")))
		goto done;
	/* siblings of an earlier restore that this step does not have would
	 * be read beside OUT by a later save */
	stale_opt = !nopt && exists(optp) && unlink(optp) == 0;
	stale_state = !has_att && exists(statep) && unlink(statep) == 0;
	if (cli_json_mode()) {
		rc = cli_json_out(json_pack("{s:s, s:I, s:b, s:i, s:s, s:i, s:o, s:o, s:I, s:i, s:I, s:f, s:b}", "job",
					    job, "step", (json_int_t)rckpt_restored_step(r), "exact",
					    rckpt_restored_exact(r) != 0, "tensors", (int)(nout - nopt), "output", outp,
					    "optimizer_tensors", (int)nopt,
					    "optimizer_output", nopt ? json_string(optp) : json_null(), "state_output",
					    has_att ? json_string(statep) : json_null(), "state_bytes",
					    (json_int_t)(has_att ? attlen : 0), "materialize_calls",
					    here == 1 ? 0 : (int)rs.calls, "wire_bytes",
					    (json_int_t)(here == 1 ? 0 : rs.wire_bytes), "seconds", rs.seconds,
					    "folded_here", here == 1),
				  conn)
			     ? -EIO
			     : 0;
		goto done;
	}
	printf("restored step %" PRIu64 " of job %s%s: %u tensors, %u materialize calls, %" PRIu64
	       " bytes from the OSDs, %.1f ms -> %s\n",
	       rckpt_restored_step(r), job, rckpt_restored_exact(r) ? " (exact)" : "", nout,
	       here == 1 ? 0 : rs.calls, here == 1 ? 0 : rs.wire_bytes, rs.seconds * 1e3, outp);
	if (nopt)
		printf("  of which %u of the optimizer's state -> %s\n", nopt, optp);
	if (has_att)
		printf("  its attachment, the non-tensor state (scheduler, RNG, epoch, param groups: %zu bytes, "
		       "rckpt._plain.loads reads it) -> %s\n",
		       attlen, statep);
	if (stale_opt || stale_state)
		printf("  removed %s%s%s, from before: this step has none\n", stale_opt ? optp : "",
		       stale_opt && stale_state ? " and " : "", stale_state ? statep : "");
done:
	cli_progress_end();
	cli_stage_abort(&sg);
	for (i = 0; bufs && i < nout; i++)
		free(bufs[i]);
	free(tcopy);
	free(optp);
	free(statep);
	free(bufs);
	free(opt);
	free(t);
	rckpt_restored_free(r);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

/* ---- export ---- */

/* Writes every tensor of r to path (safetensors). */
static int write_all(const rckpt_restored_t *r, const char *path)
{
	const unsigned n = rckpt_restored_count(r);
	rckpt_tensor_t *t = calloc(n ? n : 1, sizeof(*t));
	uint8_t **bufs = calloc(n ? n : 1, sizeof(*bufs));
	unsigned i;
	int rc = t && bufs ? 0 : -ENOMEM;
	for (i = 0; i < n && rc == 0; i++) {
		size_t bytes;
		rckpt_restored_tensor(r, i, &t[i]);
		bytes = tensor_bytes(&t[i]);
		bufs[i] = malloc(bytes ? bytes : 1);
		rc = bufs[i] ? rckpt_restored_read(r, i, bufs[i], bytes) : -ENOMEM;
		t[i].data = bufs[i];
	}
	if (rc == 0)
		rc = rckpt_file_write(path, t, n);
	for (i = 0; bufs && i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(t);
	return rc;
}

static int cmd_export(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },	{ "step", 1, 0, 's' },
					    { "output", 1, 0, 'o' },	{ "from-dump", 1, 0, 'd' },
					    { 0, 0, 0, 0 } };
	const char *job = NULL, *dir = NULL, *dump = NULL;
	uint64_t step = RCKPT_LATEST, after = RCKPT_LATEST, *list = NULL;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	unsigned done = 0, nlist = 0, cap = 0, k;
	json_t *steps = json_array();
	char why[160];
	int c, rc = 0, more = 1, here = 0, made = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:o:d:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &step) || step == RCKPT_LATEST) {
				json_decref(steps);
				return usage_error(STEP_RULE);
			}
			break;
		case 'o': dir = optarg; break;
		case 'd': dump = optarg; break;
		default: json_decref(steps); return cli_option_error("ckpt", "export", c, argv, optind);
		}
	}
	if (job == NULL || dir == NULL || optind != argc) {
		json_decref(steps);
		return usage_error("export needs --job J and -o DIR, nothing else");
	}
	if (cli_check_name("ckpt", "--job", job)) {
		json_decref(steps);
		return EXIT_USAGE;
	}
	if ((dump && cli_check_file("ckpt", dump)) || cli_check_out_dir("ckpt", dir)) {
		json_decref(steps);
		return 1;
	}
	cli_signals_guard(); /* a signal removes the file being written, then ends it */
	/* the plugin-free path, whatever the OSDs have (RCKPT_FOLD, when
	 * set, says otherwise) */
	if (getenv("RCKPT_FOLD") == NULL)
		setenv("RCKPT_FOLD", "client", 1);
	if (dump) {
		if ((rc = rckpt_create(&h)) || (rc = rckpt_open_dump(h, dump))) {
			cli_err("ckpt", rc, "%s", h ? rckpt_errmsg(h) : rckpt_strerror(rc));
			goto out;
		}
		if ((rc = rckpt_job_open(h, &j, job, &jo))) {
			cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
			goto out;
		}
	} else if ((rc = open_existing(&h, &j, conn, job, &jo))) {
		goto out;
	}
	if ((here = rckpt_job_folds_here(j, why, sizeof(why))) < 0) {
		rc = here;
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		goto out;
	}
	/* the steps first: a count for the progress line */
	while (step == RCKPT_LATEST && more) {
		rckpt_step_info_t si[64];
		unsigned n = 0;
		if ((rc = rckpt_job_steps(j, after, si, 64, &n, &more))) {
			cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
			goto out;
		}
		if (nlist + n > cap) {
			uint64_t *p = realloc(list, (cap = 2 * cap + n + 64) * sizeof(*p));
			if (p == NULL) {
				rc = -ENOMEM;
				cli_err("ckpt", rc, "out of memory");
				goto out;
			}
			list = p;
		}
		for (k = 0; k < n; k++)
			list[nlist++] = after = si[k].step;
		if (n == 0)
			more = 0;
	}
	if (step != RCKPT_LATEST) {
		list = malloc(sizeof(*list));
		if (list == NULL) {
			rc = -ENOMEM;
			cli_err("ckpt", rc, "out of memory");
			goto out;
		}
		list[nlist++] = step;
	}
	if (nlist == 0) {
		rc = -ENOENT;
		cli_err("ckpt", rc, "job %s has no committed step in %s", job, dump ? dump : rckpt_pool_name(h));
		goto out;
	}
	if (mkdir(dir, 0777) == 0)
		made = 1;
	else if (errno != EEXIST) {
		rc = -errno;
		cli_err("ckpt", rc, "%s: cannot make it: %s", dir, strerror(errno));
		goto out;
	}
	if (!cli_json_mode())
		printf("exporting job %s from %s, %s%s%s\n", job, dump ? dump : rckpt_pool_name(h),
		       here == 1 ? "folding chains here (" : "folding chains in the OSDs", here == 1 ? why : "",
		       here == 1 ? ")" : "");
	fflush(stdout);
	cli_progress_begin("exporting", nlist, "steps", 0);
	for (k = 0; k < nlist && rc == 0; k++) {
		rckpt_restored_t *r = NULL;
		rckpt_restore_stats_t rs;
		cli_stage_t sg = { 0 };
		const char *tmp;
		char path[4096];
		snprintf(path, sizeof(path), "%s/step-%06" PRIu64 ".safetensors", dir, list[k]);
		cli_progress_item("step %" PRIu64, list[k]);
		if ((rc = rckpt_job_restore(j, list[k], &r, &rs))) {
			cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
			break;
		}
		if ((tmp = cli_stage_add(&sg, path)) == NULL)
			rc = -ENOMEM;
		else
			rc = write_all(r, tmp);
		if (rc)
			cli_err("ckpt", rc, "%s: cannot write it: %s", path, rckpt_strerror(rc));
		else if ((rc = cli_stage_commit(&sg, "ckpt")) == 0) {
			json_array_append_new(steps, json_pack("{s:I, s:f, s:s}", "step", (json_int_t)list[k], "seconds",
							       rs.seconds, "output", path));
			if (!cli_json_mode())
				cli_line("step %-8" PRIu64 " %.1f ms -> %s\n", list[k], rs.seconds * 1e3, path);
			done++;
		}
		cli_stage_abort(&sg);
		rckpt_restored_free(r);
		cli_progress_set(k + 1, 0);
	}
	cli_progress_end();
	if (rc == 0 && cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:s, s:s, s:b, s:O, s:i}", "job", job, "from",
					    dump ? dump : rckpt_pool_name(h), "dir", dir, "folded_here", here == 1, "steps",
					    steps, "exported", (int)done),
				  conn)
			     ? -EIO
			     : 0;
	else if (rc == 0)
		printf("exported %u steps of job %s to %s\n", done, job, dir);
out:
	if (rc && made && done == 0)
		rmdir(dir);
	if (rc)
		cli_err_detail("exported", json_incref(steps));
	json_decref(steps);
	free(list);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

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
			json_t *x = json_pack("{s:I, s:s, s:I, s:I, s:f, s:i, s:I, s:o, s:I, s:o, s:i, s:b}", "step",
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
					      (int)ranks_of(&s[i]), "exact", exact);
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

static int cmd_ls(int argc, char **argv, const rckpt_connect_opts_t *conn)
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
		return usage_error("ls needs --job J, nothing else ('rckpt ckpt jobs' lists the jobs)");
	if (cli_check_name("ckpt", "--job", job))
		return EXIT_USAGE;
	if (open_existing(&h, &j, conn, job, NULL))
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
			printf("%-10" PRIu64 " %-8s %14" PRIu64 " %12" PRIu64 " %7.1fx %7u %s%s%s\n", s[i].step,
			       s[i].parent == RCKPT_LATEST ? "base" : "delta", s[i].raw_bytes, s[i].enc_bytes,
			       s[i].enc_bytes ? (double)s[i].raw_bytes / (double)s[i].enc_bytes : 0.0, s[i].nchunks,
			       split, by, exact ? "  exact" : "");
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
		printf("%" PRIu64 " steps, %.1fx overall as saved", total, enc ? (double)raw / (double)enc : 0.0);
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
				printf("policy: keep the last %u steps\n", pol.keep_last);
			else if (pol.keep_last == 0)
				printf("policy: keep the multiples of %" PRIu64 "\n", pol.keep_every);
			else
				printf("policy: keep the last %u steps and the multiples of %" PRIu64 "\n",
				       pol.keep_last, pol.keep_every);
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

static int cmd_jobs(int argc, char **argv, const rckpt_connect_opts_t *conn)
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
		return usage_error("jobs takes no arguments");
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

/* ---- housekeeping ---- */

static void print_compact(const char *job, const rckpt_compact_stats_t *cs)
{
	cli_line("job %s: %" PRIu64 " -> %" PRIu64 " steps, chunks %" PRIu64 " -> %" PRIu64
		 " bytes, %u chunk objects, %u stages, slowest stage %.1f ms, %.2f s\n",
		 job, cs->steps_before, cs->steps_after, cs->bytes_before, cs->bytes_after, cs->chunks, cs->stages,
		 cs->max_call_seconds * 1e3, cs->seconds);
}

static json_t *compact_json(const char *job, const rckpt_compact_stats_t *cs)
{
	return json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:i, s:i, s:f, s:f}", "job", job, "ok", 1, "steps_before",
			 (json_int_t)cs->steps_before, "steps_after", (json_int_t)cs->steps_after, "bytes_before",
			 (json_int_t)cs->bytes_before, "bytes_after", (json_int_t)cs->bytes_after, "chunk_objects",
			 (int)cs->chunks, "stages", (int)cs->stages, "slowest_stage_seconds", cs->max_call_seconds,
			 "seconds", cs->seconds);
}

/* Options shared by the housekeeping commands: --job, --step, --keep-last,
 * --keep-every, --off. */
typedef struct admin_opts {
	const char *job, *branch, *to;
	uint64_t step, upto;
	int have_step, have_upto, off, have_policy, deep, exact;
	rckpt_retention_t pol;
	rckpt_job_opts_t jo; /* the writer options (allowed 'K') */
} admin_opts_t;

static int admin_parse(int argc, char **argv, admin_opts_t *a, const char *allowed, const char *what)
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
			if (writer_opt(c, &a->jo) < 0)
				return EXIT_USAGE;
			continue;
		}
		if (c == '?' || c == ':' || strchr(allowed, c) == NULL)
			return cli_option_error("ckpt", what, c, argv, optind);
		switch (c) {
		case 'j': a->job = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &a->step) || a->step == RCKPT_LATEST)
				return usage_error(STEP_RULE);
			a->have_step = 1;
			break;
		case 'L':
			if (cli_parse_u64(optarg, &v) || v > UINT32_MAX)
				return usage_error("--keep-last must be a whole number 0..4294967295 (the newest "
						   "steps kept; 0: no such rule)");
			a->pol.keep_last = (uint32_t)v;
			a->have_policy = 1;
			break;
		case 'M':
			if (cli_parse_u64(optarg, &v))
				return usage_error("--keep-every must be a whole number (steps that are its multiples "
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
				return usage_error("--upto must be a whole number 0..18446744073709551614 (a step at "
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
					"characters of A-Z a-z 0-9 . _ -)",
					a->branch, a->job, a->branch, CLI_NAME_MAX, CLI_NAME_MAX);
	if (a->have_upto && a->have_step && a->upto < a->step)
		return usage_error("--upto must be a step at or after --step");
	return 0;
}

static int cmd_compact(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_compact_stats_t cs;
	int rc = admin_parse(argc, argv, &a, "jLM", "compact");
	if (rc)
		return rc;
	if (open_existing(&h, &j, conn, a.job, NULL))
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
		rc = cli_json_out(compact_json(a.job, &cs), conn) ? -EIO : 0;
	else if (rc == 0)
		print_compact(a.job, &cs);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

static int cmd_pin(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	int rc = admin_parse(argc, argv, &a, "jsOX", "pin");
	if (rc)
		return rc;
	if (!a.have_step)
		return usage_error("pin needs --step N");
	if (a.exact && a.off)
		return usage_error("pin takes --exact or --off, not both");
	if (open_existing(&h, &j, conn, a.job, NULL))
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

static int cmd_rewind(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	uint64_t head = RCKPT_LATEST;
	unsigned n = 0, gone = 0, k;
	int rc = admin_parse(argc, argv, &a, "jsBK", "rewind"), more = 1;
	if (rc)
		return rc;
	if (!a.have_step)
		return usage_error("rewind needs --step N (a committed step)");
	cli_signals_guard();
	cli_signals_defer(1);
	jo = a.jo;
	jo.writer = 1;
	if (open_existing(&h, &j, conn, a.job, &jo))
		return cli_interrupted() ? interrupted("the job was not opened") : 1;
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
		close_job(h, j);
		return interrupted("nothing rewound; the job's writer lock released");
	}
	if (a.branch && gone && !cli_json_mode())
		printf("copying steps %" PRIu64 "..%" PRIu64 " into job %s.%s ...\n", a.step, head, a.job, a.branch);
	fflush(stdout);
	if ((rc = rckpt_job_rewind(j, a.step, a.branch)) != 0)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	close_job(h, j);
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
		return interrupted(rc == 0 ? "after the rewind; the job's writer lock released"
					   : "the job's writer lock released");
	return rc ? 1 : 0;
}

static int cmd_branch(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	int rc = admin_parse(argc, argv, &a, "jsUT", "branch");
	if (rc)
		return rc;
	if (!a.have_step || a.to == NULL)
		return usage_error("branch needs --step N and --to NEWJOB");
	if (open_existing(&h, &j, conn, a.job, NULL))
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

static int cmd_verify(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_verify_stats_t vs;
	const int json = cli_json_mode();
	json_t *o = NULL;
	int rc = admin_parse(argc, argv, &a, "jD", "verify");
	if (rc)
		return rc;
	if (open_existing(&h, &j, conn, a.job, NULL))
		return 1;
	rc = rckpt_job_verify(j, &vs);
	if ((rc == 0 || rc == RCKPT_ECHECKSUM) && json)
		o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}", "job", a.job, "pool", rckpt_pool_name(h),
			      "steps", (json_int_t)vs.steps, "records", (json_int_t)vs.records, "bytes_checked",
			      (json_int_t)vs.bytes, "bad", (json_int_t)vs.bad, "first_bad_step",
			      vs.first_bad_step == RCKPT_LATEST ? json_null() : json_integer((json_int_t)vs.first_bad_step),
			      "first_bad_chunk",
			      vs.first_bad_chunk == UINT_MAX ? json_null() : json_integer(vs.first_bad_chunk));
	else if (rc == 0 || rc == RCKPT_ECHECKSUM)
		printf("job %s: %" PRIu64 " steps, %" PRIu64 " records, %" PRIu64 " bytes checked, %" PRIu64
		       " bad\n",
		       a.job, vs.steps, vs.records, vs.bytes, vs.bad);
	if (rc)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	if (a.deep && (rc == 0 || rc == RCKPT_ECHECKSUM)) {
		/* every committed step, materialized in the OSDs and checked
		 * against its manifest's SHA-256 per chunk */
		rckpt_step_info_t si[256];
		uint64_t after = RCKPT_LATEST, done = 0, failed = 0;
		unsigned n = 0, i;
		int more = 1, r2 = 0;
		cli_progress_begin("materializing", vs.steps, "steps", 0);
		while (more && r2 == 0) {
			r2 = rckpt_job_steps(j, after, si, 256, &n, &more);
			for (i = 0; r2 == 0 && i < n; i++) {
				rckpt_restored_t *r = NULL;
				int r3;
				after = si[i].step;
				cli_progress_item("step %" PRIu64, si[i].step);
				if ((r3 = rckpt_job_restore_tensors(j, si[i].step, NULL, 0, &r, NULL)) != 0) {
					failed++;
					cli_err("ckpt", r3, "step %" PRIu64 ": %s", si[i].step, rckpt_errmsg(h));
				}
				rckpt_restored_free(r);
				cli_progress_set(++done, 0);
			}
			if (n == 0)
				break;
		}
		cli_progress_end();
		if (r2)
			cli_err("ckpt", r2, "%s", rckpt_errmsg(h));
		if (o)
			json_object_set_new(o, "deep", json_pack("{s:I, s:I}", "materialized", (json_int_t)done,
								 "failed", (json_int_t)failed));
		else
			printf("job %s: %" PRIu64 " steps materialized and checked (SHA-256), %" PRIu64
			       " failed\n",
			       a.job, done, failed);
		if (rc == 0 && (r2 || failed))
			rc = r2 ? r2 : RCKPT_ECHECKSUM;
	}
	rckpt_job_close(j);
	rckpt_destroy(h);
	if (o) {
		json_object_set_new(o, "ok", json_boolean(rc == 0));
		if (cli_json_out(o, conn))
			return 1;
	}
	return rc ? 1 : 0;
}

static int cmd_gc(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	unsigned removed = 0;
	int rc = admin_parse(argc, argv, &a, "jK", "gc");
	if (rc)
		return rc;
	cli_signals_guard();
	cli_signals_defer(1);
	jo = a.jo;
	jo.writer = 1;
	if (open_existing(&h, &j, conn, a.job, &jo))
		return cli_interrupted() ? interrupted("the job was not opened") : 1;
	cli_signals_job(j);
	if (cli_interrupted() == 0 && (rc = rckpt_job_gc(j, &removed)) != 0)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	close_job(h, j);
	if (cli_interrupted())
		return interrupted(rc == 0 && removed ? "after the gc; the job's writer lock released"
						      : "the job's writer lock released");
	if (rc == 0 && cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:i}", "job", a.job, "removed", (int)removed), conn) ? -EIO : 0;
	else if (rc == 0)
		printf("job %s: trimmed records past the head, removed %u stale manifest(s)\n", a.job, removed);
	return rc ? 1 : 0;
}

static int cmd_rm(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	int rc = admin_parse(argc, argv, &a, "js", "rm");
	if (rc)
		return rc;
	if (a.have_step) {
		if (open_existing(&h, &j, conn, a.job, NULL))
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
			return interrupted(rc == 0 ? "after the job was deleted" : "the deletion stopped");
		}
	}
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

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
				json_array_append_new(jobs, compact_json(names[i], &cs));
			else {
				cli_line("[%u/%u] ", i + 1, n);
				print_compact(names[i], &cs);
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

int rckpt_cli_ckpt(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **, const rckpt_connect_opts_t *);
	} subs[] = { { "save", cmd_save },     { "restore", cmd_restore }, { "ls", cmd_ls },
		     { "jobs", cmd_jobs },     { "export", cmd_export },   { "compact", cmd_compact },
		     { "pin", cmd_pin },       { "rewind", cmd_rewind },   { "branch", cmd_branch },
		     { "verify", cmd_verify }, { "gc", cmd_gc },	   { "rm", cmd_rm } };
	size_t k;
	int i;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			if (i < 2 || argv[1][0] == '-' || cli_sub_help(help_text, "ckpt", argv[1]))
				usage();
			return 0;
		}
	if (argc < 2)
		return usage_error("missing subcommand (save, restore, export, ls, jobs, compact, pin, rewind, branch, "
				   "verify, gc, rm)");
	for (k = 0; k < sizeof(subs) / sizeof(subs[0]); k++)
		if (strcmp(argv[1], subs[k].name) == 0)
			return subs[k].fn(argc - 1, argv + 1, conn);
	return cli_usage_errorf("ckpt", "unknown subcommand '%s'", argv[1]);
}
