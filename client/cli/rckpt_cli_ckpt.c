/*
 * rckpt_cli_ckpt.c — `rckpt ckpt save | restore | ls | compact | pin |
 * verify | gc | rm` and `rckpt compact --all`: checkpoints of training jobs
 * in the cluster (librckpt's public job API).
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
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

static const char help_text[] =
	"usage: rckpt [options] ckpt save --job J [--step N] [--eps E] [--exact] [--lease S]\n"
	"                                 [--chunk-params N] [--mem-budget MIB]\n"
	"                                 [--grads G.safetensors] MODEL.safetensors...\n"
	"       rckpt [options] ckpt restore --job J [--step N] [--tensors a,b] -o OUT.safetensors\n"
	"       rckpt [options] ckpt export --job J [--step N] [--from-dump FILE] -o DIR\n"
	"       rckpt [options] ckpt ls --job J\n"
	"       rckpt [options] ckpt compact --job J [--keep-last N] [--keep-every M]\n"
	"       rckpt [options] ckpt pin --job J --step N [--exact | --off]\n"
	"       rckpt [options] ckpt rewind --job J --step N [--branch NAME]\n"
	"       rckpt [options] ckpt branch --job J --step N [--upto M] --to NEWJOB\n"
	"       rckpt [options] ckpt verify --job J [--deep]\n"
	"       rckpt [options] ckpt gc --job J\n"
	"       rckpt [options] ckpt rm --job J [--step N]\n"
	"\n"
	"save     compress and commit checkpoints into job J (a namespace of the pool), in\n"
	"         the order given, each as the step its file name ends with (step-000025\n"
	"         is step 25), or from --step N on (N, N+1, ...). Each step is a delta against\n"
	"         the one before, the first too when the job has a committed head of the same\n"
	"         tensors (its levels come from the OSDs). The gradient RMS that weighs errors\n"
	"         comes from --grads (one file only) or a sibling MODEL.grads.safetensors;\n"
	"         --eps bounds the Fisher-weighted relative error (default 0.0012: see\n"
	"         'rckpt codec --help'). --exact stores the steps bit-exact: lossy records\n"
	"         plus the bits quantization changed, in byte planes (zstd); their\n"
	"         restores match the files' SHA-256, and later lossy saves are deltas on\n"
	"         them. An optimizer's state beside a model, MODEL.optim.safetensors\n"
	"         (exp_avg.P, exp_avg_sq.P: Adam's moments of P; momentum_buffer.P; other\n"
	"         tensors), is saved as the step's optimizer state: compressed apart, judged\n"
	"         by the error of the update it makes (README \"Adam's state\").\n"
	"         Takes the job's writer lock: a second writer is refused; a dead\n"
	"         writer's lock expires --lease seconds (default 30) after its last save.\n"
	"         --mem-budget (default 256 MiB)\n"
	"         bounds what a save holds beyond the encoder's state of one byte per\n"
	"         parameter, whatever the model's size; chunks hold --chunk-params\n"
	"         parameters (default and most: 4 Mi). Prints each step's ratio and timings.\n"
	"restore  materialize a committed step (default: the latest) in the OSDs, check\n"
	"         every chunk's SHA-256, and write its tensors (or only those --tensors\n"
	"         names, reading only the chunks that hold them) to OUT.safetensors, and\n"
	"         its optimizer's state, if it has one, to OUT.optim.safetensors.\n"
	"         When the OSDs lack the rckpt class (or refuse it), the chains are\n"
	"         folded here instead, to the same bytes, slower; it says so.\n"
	"export   write every listed step (or step N) of job J to DIR/step-NNNNNN.safetensors,\n"
	"         folding each chain here, without the OSDs' rckpt class; with --from-dump,\n"
	"         from a file that `rados -p POOL --all export FILE` wrote, with no cluster\n"
	"         at all. DIR is made if it does not exist.\n"
	"ls       list the committed steps as they were saved (kind, size, ratio, and\n"
	"         the weights' and the optimizer state's bytes and ratios apart; a\n"
	"         compaction rewrites them later), what the job stores now, and its\n"
	"         retention policy.\n"
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
	"Global options (--conf, --id/--user, --pool, --timeout, --read-from) go before\n"
	"'ckpt' or after the subcommand.\n"
	"'rckpt compact --all' compacts every job of the pool under its own policy.\n";

static void usage(void)
{
	fputs(help_text, stdout);
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
			fprintf(stderr, "rckpt ckpt: job %s does not exist in pool %s\n", job, rckpt_pool_name(*h));
		else
			fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(*h));
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
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(*h));
		rckpt_destroy(*h);
		*h = NULL;
	}
	return rc;
}

/* Waits for a save's commit and prints its line. */
static int finish(rckpt_t *h, rckpt_save_t *pend, uint64_t s, int exact, uint64_t *raw, uint64_t *enc)
{
	rckpt_save_stats_t ss;
	int rc = rckpt_save_wait(pend, &ss);
	if (rc) {
		fprintf(stderr, "rckpt ckpt: step %" PRIu64 ": %s\n", s, rckpt_errmsg(h));
		return rc;
	}
	*raw += ss.raw_bytes;
	*enc += ss.enc_bytes;
	printf("step %-8" PRIu64 " %-5s %6.1fx  %9" PRIu64 " -> %8" PRIu64
	       " bytes  %2u chunks  encode %6.1f ms  write %6.1f ms\n",
	       s, exact ? "exact" : ss.is_base ? "base" : "delta", (double)ss.raw_bytes / (double)ss.enc_bytes,
	       ss.raw_bytes, ss.enc_bytes, ss.nchunks, ss.t_encode * 1e3, ss.t_write * 1e3);
	fflush(stdout);
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

static int cmd_save(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },   { "step", 1, 0, 's' },
					    { "eps", 1, 0, 'e' },   { "lease", 1, 0, 'l' },
					    { "chunk-params", 1, 0, 'C' }, { "grads", 1, 0, 'g' },
					    { "mem-budget", 1, 0, 'M' }, { "exact", 0, 0, 'X' },
					    { 0, 0, 0, 0 } };
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	const char *job = NULL, *gfile = NULL;
	uint64_t step = UINT64_MAX, v, raw = 0, enc = 0;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_save_t *pend = NULL;
	uint64_t pend_step = 0;
	int c, i, rc = 0, nfiles = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:e:l:C:g:M:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 'X': jo.exact = 1; break;
		case 'g': gfile = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &step))
				return usage_error("--step needs a number");
			break;
		case 'e':
			jo.eps = atof(optarg);
			if (!(jo.eps > 0 && jo.eps < 1))
				return usage_error("--eps must be in (0, 1)");
			break;
		case 'l':
			if (cli_parse_u64(optarg, &v) || v == 0 || v > 86400)
				return usage_error("--lease must be 1..86400 seconds");
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
				return usage_error("--mem-budget must be 1..2^30 MiB");
			jo.mem_budget = v << 20;
			break;
		default: return cli_option_error("ckpt", "save", c, argv, optind);
		}
	}
	if (job == NULL)
		return usage_error("save needs --job");
	for (i = optind; i < argc; i++)
		nfiles += !cli_is_sibling(argv[i]);
	if (nfiles == 0)
		return usage_error("save needs at least one MODEL.safetensors");
	if (gfile && nfiles != 1)
		return usage_error("--grads goes with exactly one MODEL.safetensors");
	/* A first file that cannot be used stops the save before the job is
	 * touched (no empty job left behind); later ones stop it after the
	 * steps before them are committed. */
	for (i = optind; i < argc; i++) {
		rckpt_file_t *st;
		char err[256];
		if (cli_is_sibling(argv[i]))
			continue;
		if (rckpt_file_read(&st, argv[i], err, sizeof(err))) {
			fprintf(stderr, "rckpt ckpt: %s: %s\n", argv[i], err);
			return 1;
		}
		rckpt_file_free(st);
		break;
	}
	jo.writer = 1;
	if (open_job(&h, &j, conn, job, &jo))
		return 1;
	for (i = optind, nfiles = 0; i < argc && rc == 0; i++) {
		rckpt_file_t *st = NULL, *gs = NULL, *os = NULL;
		rckpt_tensor_t *all = NULL;
		unsigned nall = 0;
		char err[256], gpath[4096];
		uint64_t s = step != UINT64_MAX ? step + (uint64_t)nfiles : cli_step_of(argv[i], 0);
		size_t n = strlen(argv[i]);

		if (cli_is_sibling(argv[i]))
			continue;
		nfiles++;
		if ((rc = rckpt_file_read(&st, argv[i], err, sizeof(err)))) {
			fprintf(stderr, "rckpt ckpt: %s: %s\n", argv[i], err);
			break;
		}
		if (gfile) {
			if (rckpt_file_read(&gs, gfile, err, sizeof(err))) {
				fprintf(stderr, "rckpt ckpt: %s: %s\n", gfile, err);
				rckpt_file_free(st);
				rc = -EINVAL;
				break;
			}
		} else if (n > 12 && strcmp(argv[i] + n - 12, ".safetensors") == 0 && n + 6 < sizeof(gpath)) {
			snprintf(gpath, sizeof(gpath), "%.*s.grads.safetensors", (int)(n - 12), argv[i]);
			if (rckpt_file_read(&gs, gpath, err, sizeof(err)))
				gs = NULL;
		}
		if (n > 12 && strcmp(argv[i] + n - 12, ".safetensors") == 0 && n + 6 < sizeof(gpath)) {
			snprintf(gpath, sizeof(gpath), "%.*s.optim.safetensors", (int)(n - 12), argv[i]);
			if (access(gpath, F_OK) == 0 && rckpt_file_read(&os, gpath, err, sizeof(err))) {
				fprintf(stderr, "rckpt ckpt: %s: %s\n", gpath, err);
				rckpt_file_free(st);
				rckpt_file_free(gs);
				rc = -EINVAL;
				break;
			}
		}
		/* The previous step's appends ran while this file was read. */
		if (pend && (rc = finish(h, pend, pend_step, jo.exact, &raw, &enc)) != 0) {
			pend = NULL;
			rckpt_file_free(st);
			rckpt_file_free(gs);
			rckpt_file_free(os);
			break;
		}
		pend = NULL;
		rc = optim_join(j, st, os, &all, &nall);
		if (rc == 0)
			rc = rckpt_job_save_async(j, s, all, nall, gs ? rckpt_file_tensors(gs) : NULL,
						  gs ? rckpt_file_count(gs) : 0, &pend);
		if (rc)
			fprintf(stderr, "rckpt ckpt: %s: %s\n", argv[i], rckpt_errmsg(h));
		pend_step = s;
		free(all);
		all = NULL;
		rckpt_file_free(st);
		rckpt_file_free(gs);
		rckpt_file_free(os);
	}
	if (rc == 0 && pend)
		rc = finish(h, pend, pend_step, jo.exact, &raw, &enc);
	if (rc == 0 && nfiles > 1)
		printf("saved %d steps: %.1fx overall (%" PRIu64 " -> %" PRIu64 " bytes)\n", nfiles,
		       enc ? (double)raw / (double)enc : 0.0, raw, enc);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

static int cmd_restore(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },
					    { "step", 1, 0, 's' },
					    { "output", 1, 0, 'o' },
					    { "tensors", 1, 0, 'T' },
					    { 0, 0, 0, 0 } };
	const char *job = NULL, *outp = NULL, *tlist = NULL;
	char *tcopy = NULL, *names[4096];
	unsigned nnames = 0, nout = 0;
	uint64_t step = RCKPT_LATEST;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *r = NULL;
	rckpt_restore_stats_t rs;
	rckpt_tensor_t *t = NULL;
	uint8_t **bufs = NULL;
	unsigned i, n = 0, nopt = 0;
	int c, rc, here = 0, *opt = NULL;
	char optp[4096];

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:o:T:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 'T': tlist = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &step))
				return usage_error("--step needs a number");
			break;
		case 'o': outp = optarg; break;
		default: return cli_option_error("ckpt", "restore", c, argv, optind);
		}
	}
	if (job == NULL || outp == NULL || optind != argc)
		return usage_error("restore needs --job and -o OUT.safetensors, nothing else");
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
	if (open_job(&h, &j, conn, job, NULL)) {
		free(tcopy);
		return 1;
	}
	rc = rckpt_job_restore_tensors(j, step, (const char *const *)names, nnames, &r, &rs);
	if (rc) {
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
		goto done;
	}
	{
		char why[160];
		if ((here = rckpt_job_folds_here(j, why, sizeof(why))) == 1)
			fprintf(stderr, "rckpt ckpt: folded in the client (slower): %s\n", why);
	}
	n = rckpt_restored_count(r);
	t = calloc(n ? n : 1, sizeof(*t));
	bufs = calloc(n ? n : 1, sizeof(*bufs));
	opt = calloc(n ? n : 1, sizeof(*opt));
	rc = t && bufs && opt ? 0 : -ENOMEM;
	for (i = 0; i < n && rc == 0; i++) {
		rckpt_tensor_t d;
		uint64_t e = 1;
		unsigned k, want = nnames == 0;
		rckpt_restored_tensor(r, i, &d);
		for (k = 0; k < nnames && !want; k++)
			want = strcmp(names[k], d.name) == 0;
		if (!want)
			continue;
		for (k = 0; k < d.ndim; k++)
			e *= d.shape[k];
		t[nout] = d;
		bufs[nout] = malloc(e ? (size_t)e * (d.dtype == RCKPT_F32 ? 4 : 2) : 1);
		rc = bufs[nout] ? rckpt_restored_read(r, i, bufs[nout],
						      (size_t)e * (d.dtype == RCKPT_F32 ? 4 : 2))
				: -ENOMEM;
		t[nout].data = bufs[nout];
		opt[nout] = rckpt_restored_role(r, i) != RCKPT_ROLE_MODEL;
		nopt += opt[nout];
		nout++;
	}
	/* the model's tensors to OUT, the optimizer's state to its sibling
	 * OUT.optim.safetensors (what `ckpt save` reads beside a model) */
	if (rc == 0 && nopt) {
		rckpt_tensor_t *to = calloc(nopt, sizeof(*to));
		const size_t ol = strlen(outp);
		unsigned a = 0, b = 0;
		if (to == NULL) {
			rc = -ENOMEM;
			goto done;
		}
		for (i = 0; i < nout; i++) {
			if (opt[i])
				to[b++] = t[i];
			else
				t[a++] = t[i];
		}
		if (ol > 12 && strcmp(outp + ol - 12, ".safetensors") == 0)
			snprintf(optp, sizeof(optp), "%.*s.optim.safetensors", (int)(ol - 12), outp);
		else
			snprintf(optp, sizeof(optp), "%s.optim.safetensors", outp);
		rc = rckpt_file_write(optp, to, nopt);
		free(to);
		if (rc)
			fprintf(stderr, "rckpt ckpt: cannot write %s: %s\n", optp, rckpt_strerror(rc));
	}
	if (rc == 0 && (rc = rckpt_file_write(outp, t, nout - nopt)))
		fprintf(stderr, "rckpt ckpt: cannot write %s: %s\n", outp, rckpt_strerror(rc));
	if (rc == 0) {
		printf("restored step %" PRIu64 " of job %s%s: %u tensors, %u materialize calls, %" PRIu64
		       " bytes from the OSDs, %.1f ms -> %s\n",
		       rckpt_restored_step(r), job, rckpt_restored_exact(r) ? " (exact)" : "", nout,
		       here == 1 ? 0 : rs.calls, here == 1 ? 0 : rs.wire_bytes, rs.seconds * 1e3, outp);
		if (nopt)
			printf("  of which %u of the optimizer's state -> %s\n", nopt, optp);
	}
done:
	for (i = 0; bufs && i < nout; i++)
		free(bufs[i]);
	free(tcopy);
	free(bufs);
	free(opt);
	free(t);
	rckpt_restored_free(r);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

/* Writes every tensor of r to path (safetensors). */
static int write_all(const rckpt_restored_t *r, const char *path)
{
	const unsigned n = rckpt_restored_count(r);
	rckpt_tensor_t *t = calloc(n ? n : 1, sizeof(*t));
	uint8_t **bufs = calloc(n ? n : 1, sizeof(*bufs));
	unsigned i, k;
	int rc = t && bufs ? 0 : -ENOMEM;
	for (i = 0; i < n && rc == 0; i++) {
		uint64_t e = 1;
		size_t bytes;
		rckpt_restored_tensor(r, i, &t[i]);
		for (k = 0; k < t[i].ndim; k++)
			e *= t[i].shape[k];
		bytes = (size_t)e * (t[i].dtype == RCKPT_F32 ? 4 : 2);
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
	uint64_t step = RCKPT_LATEST, after = RCKPT_LATEST;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	unsigned done = 0;
	char why[160];
	int c, rc = 0, more = 1;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:o:d:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &step) || step == RCKPT_LATEST)
				return usage_error("--step needs a number");
			break;
		case 'o': dir = optarg; break;
		case 'd': dump = optarg; break;
		default: return cli_option_error("ckpt", "export", c, argv, optind);
		}
	}
	if (job == NULL || dir == NULL || optind != argc)
		return usage_error("export needs --job and -o DIR, nothing else");
	if (mkdir(dir, 0777) && errno != EEXIST) {
		fprintf(stderr, "rckpt ckpt: cannot make %s: %s\n", dir, strerror(errno));
		return 1;
	}
	/* the plugin-free path, whatever the OSDs have (RCKPT_FOLD, when
	 * set, says otherwise) */
	if (getenv("RCKPT_FOLD") == NULL)
		setenv("RCKPT_FOLD", "client", 1);
	if (dump) {
		if ((rc = rckpt_create(&h)) || (rc = rckpt_open_dump(h, dump))) {
			fprintf(stderr, "rckpt ckpt: %s\n", h ? rckpt_errmsg(h) : rckpt_strerror(rc));
			rckpt_destroy(h);
			return 1;
		}
		if ((rc = rckpt_job_open(h, &j, job, &jo))) {
			fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
			rckpt_destroy(h);
			return 1;
		}
	} else if (open_existing(&h, &j, conn, job, &jo)) {
		return 1;
	}
	if ((rc = rckpt_job_folds_here(j, why, sizeof(why))) < 0) {
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
		goto out;
	}
	printf("exporting job %s from %s, %s%s%s\n", job, dump ? dump : rckpt_pool_name(h),
	       rc == 1 ? "folding chains here (" : "folding chains in the OSDs", rc == 1 ? why : "",
	       rc == 1 ? ")" : "");
	rc = 0;
	while (more && rc == 0) {
		rckpt_step_info_t si[64];
		unsigned n = 0, k;
		if (step != RCKPT_LATEST) {
			si[0].step = step;
			n = 1;
			more = 0;
		} else if ((rc = rckpt_job_steps(j, after, si, 64, &n, &more))) {
			fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
			break;
		}
		for (k = 0; k < n && rc == 0; k++) {
			rckpt_restored_t *r = NULL;
			rckpt_restore_stats_t rs;
			char path[4096];
			snprintf(path, sizeof(path), "%s/step-%06" PRIu64 ".safetensors", dir, si[k].step);
			if ((rc = rckpt_job_restore(j, si[k].step, &r, &rs))) {
				fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
				break;
			}
			if ((rc = write_all(r, path)))
				fprintf(stderr, "rckpt ckpt: cannot write %s: %s\n", path, rckpt_strerror(rc));
			else
				printf("step %-8" PRIu64 " %.1f ms -> %s\n", si[k].step, rs.seconds * 1e3, path);
			fflush(stdout);
			rckpt_restored_free(r);
			after = si[k].step;
			done++;
		}
		if (n == 0)
			more = 0;
	}
	if (rc == 0 && done == 0) {
		fprintf(stderr, "rckpt ckpt: job %s has no committed step in %s\n", job,
			dump ? dump : rckpt_pool_name(h));
		rc = -ENOENT;
	}
	if (rc == 0)
		printf("exported %u steps of job %s to %s\n", done, job, dir);
out:
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
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
			json_t *x = json_pack("{s:I, s:s, s:I, s:I, s:i, s:I, s:I, s:I, s:I, s:i, s:b}", "step",
					      (json_int_t)s[i].step, "saved_as",
					      s[i].parent == RCKPT_LATEST ? "base" : "delta", "raw_bytes",
					      (json_int_t)s[i].raw_bytes, "stored_bytes", (json_int_t)s[i].enc_bytes,
					      "chunks", (int)s[i].nchunks, "weights_raw_bytes",
					      (json_int_t)(s[i].raw_bytes - s[i].opt_raw_bytes), "weights_stored_bytes",
					      (json_int_t)(s[i].enc_bytes - s[i].opt_enc_bytes), "optimizer_raw_bytes",
					      (json_int_t)s[i].opt_raw_bytes, "optimizer_stored_bytes",
					      (json_int_t)s[i].opt_enc_bytes, "ranks", (int)s[i].ranks, "exact",
					      (s[i].flags & RCKPT_STEP_EXACT) != 0);
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
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
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
	uint64_t after = RCKPT_LATEST, raw = 0, enc = 0, total = 0, oraw = 0, oenc = 0;
	int c, more = 1, rc = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:", lo, NULL)) != -1) {
		if (c != 'j')
			return cli_option_error("ckpt", "ls", c, argv, optind);
		job = optarg;
	}
	if (job == NULL || optind != argc)
		return usage_error("ls needs --job, nothing else");
	if (open_existing(&h, &j, conn, job, NULL))
		return 1;
	if (cli_format(conn) != CLI_FORMAT_PLAIN) {
		rc = ls_json(h, j, job, conn);
		rckpt_job_close(j);
		rckpt_destroy(h);
		return rc;
	}
	printf("%-10s %-8s %14s %12s %8s %7s %21s %21s\n", "step", "saved as", "raw bytes", "saved",
	       "ratio", "chunks", "weights: saved ratio", "optimizer: saved ratio");
	while (more && rc == 0) {
		unsigned n, i;
		rc = rckpt_job_steps(j, after, s, 256, &n, &more);
		for (i = 0; rc == 0 && i < n; i++) {
			/* the optimizer's state: its chunks' records; the weights:
			 * the rest (manifest and attachment included) */
			const uint64_t wraw = s[i].raw_bytes - s[i].opt_raw_bytes,
				       wenc = s[i].enc_bytes - s[i].opt_enc_bytes;
			char by[32] = "", opt[32] = "-";
			if (s[i].ranks)
				snprintf(by, sizeof(by), "  %u ranks", s[i].ranks);
			if (s[i].opt_raw_bytes)
				snprintf(opt, sizeof(opt), "%" PRIu64 " %6.1fx", s[i].opt_enc_bytes,
					 s[i].opt_enc_bytes ? (double)s[i].opt_raw_bytes / (double)s[i].opt_enc_bytes
							    : 0.0);
			printf("%-10" PRIu64 " %-8s %14" PRIu64 " %12" PRIu64 " %7.1fx %7u %13" PRIu64
			       " %6.1fx %22s%s%s\n",
			       s[i].step, s[i].parent == RCKPT_LATEST ? "base" : "delta", s[i].raw_bytes,
			       s[i].enc_bytes,
			       s[i].enc_bytes ? (double)s[i].raw_bytes / (double)s[i].enc_bytes : 0.0,
			       s[i].nchunks, wenc, wenc ? (double)wraw / (double)wenc : 0.0, opt, by,
			       s[i].flags & RCKPT_STEP_EXACT ? "  exact" : "");
			raw += s[i].raw_bytes;
			enc += s[i].enc_bytes;
			oraw += s[i].opt_raw_bytes;
			oenc += s[i].opt_enc_bytes;
			after = s[i].step;
			total++;
		}
		if (n == 0)
			break;
	}
	if (rc == 0) {
		uint64_t stored = 0;
		unsigned objects = 0;
		printf("%" PRIu64 " steps, %.1fx overall as saved", total,
		       enc ? (double)raw / (double)enc : 0.0);
		if (oraw)
			printf(": weights %.1fx, optimizer state %.1fx",
			       enc > oenc ? (double)(raw - oraw) / (double)(enc - oenc) : 0.0,
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
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

static void print_compact(const char *job, const rckpt_compact_stats_t *cs)
{
	printf("job %s: %" PRIu64 " -> %" PRIu64 " steps, chunks %" PRIu64 " -> %" PRIu64
	       " bytes, %u chunk objects, %u stages, slowest stage %.1f ms, %.2f s\n",
	       job, cs->steps_before, cs->steps_after, cs->bytes_before, cs->bytes_after, cs->chunks,
	       cs->stages, cs->max_call_seconds * 1e3, cs->seconds);
}

/* Options shared by the housekeeping commands: --job, --step, --keep-last,
 * --keep-every, --off. */
typedef struct admin_opts {
	const char *job, *branch, *to;
	uint64_t step, upto;
	int have_step, have_upto, off, have_policy, deep, exact;
	rckpt_retention_t pol;
} admin_opts_t;

static int admin_parse(int argc, char **argv, admin_opts_t *a, const char *allowed, const char *what)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },       { "step", 1, 0, 's' },
					    { "keep-last", 1, 0, 'L' }, { "keep-every", 1, 0, 'M' },
					    { "off", 0, 0, 'O' },       { "deep", 0, 0, 'D' },
					    { "branch", 1, 0, 'B' },    { "to", 1, 0, 'T' },
					    { "upto", 1, 0, 'U' },      { "exact", 0, 0, 'X' },
					    { 0, 0, 0, 0 } };
	uint64_t v;
	int c;
	memset(a, 0, sizeof(*a));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:", lo, NULL)) != -1) {
		if (c == '?' || c == ':' || strchr(allowed, c) == NULL)
			return cli_option_error("ckpt", what, c, argv, optind);
		switch (c) {
		case 'j': a->job = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &a->step))
				return usage_error("--step needs a number");
			a->have_step = 1;
			break;
		case 'L':
			if (cli_parse_u64(optarg, &v) || v > UINT32_MAX)
				return usage_error("--keep-last needs a number");
			a->pol.keep_last = (uint32_t)v;
			a->have_policy = 1;
			break;
		case 'M':
			if (cli_parse_u64(optarg, &v))
				return usage_error("--keep-every needs a number");
			a->pol.keep_every = v;
			a->have_policy = 1;
			break;
		case 'O': a->off = 1; break;
		case 'X': a->exact = 1; break;
		case 'D': a->deep = 1; break;
		case 'B': a->branch = optarg; break;
		case 'T': a->to = optarg; break;
		case 'U':
			if (cli_parse_u64(optarg, &a->upto))
				return usage_error("--upto needs a number");
			a->have_upto = 1;
			break;
		}
	}
	if (a->job == NULL || optind != argc) {
		fprintf(stderr, "rckpt ckpt: %s needs --job, and no other arguments; try 'rckpt ckpt --help'\n",
			what);
		return EXIT_USAGE;
	}
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
	if (a.have_policy)
		rc = rckpt_job_set_retention(j, &a.pol);
	if (rc == 0)
		rc = rckpt_job_compact(j, NULL, &cs);
	if (rc)
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
	else
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
		return usage_error("pin needs --step");
	if (a.exact && a.off)
		return usage_error("pin takes --exact or --off, not both");
	if (open_existing(&h, &j, conn, a.job, NULL))
		return 1;
	rc = rckpt_job_pin(j, a.step, a.off ? 0 : a.exact ? RCKPT_PIN_EXACT : 1);
	if (rc)
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
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
	int rc = admin_parse(argc, argv, &a, "jsB", "rewind"), more = 1;
	if (rc)
		return rc;
	if (!a.have_step || a.step == RCKPT_LATEST)
		return usage_error("rewind needs --step N (a committed step)");
	jo.writer = 1;
	if (open_existing(&h, &j, conn, a.job, &jo))
		return 1;
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
	if (a.branch && gone)
		printf("copying steps %" PRIu64 "..%" PRIu64 " into job %s.%s ...\n", a.step, head, a.job, a.branch);
	fflush(stdout);
	rc = rckpt_job_rewind(j, a.step, a.branch);
	if (rc)
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
	else if (gone && a.branch)
		printf("job %s rewound to step %" PRIu64 ": %u later steps (to %" PRIu64
		       ") kept as job %s.%s; the next save follows step %" PRIu64 "\n",
		       a.job, a.step, gone, head, a.job, a.branch, a.step);
	else if (gone)
		printf("job %s rewound to step %" PRIu64 ": %u later steps (to %" PRIu64
		       ") forgotten; the next save follows step %" PRIu64 ", and 'rckpt ckpt gc' removes "
		       "what they stored\n",
		       a.job, a.step, gone, head, a.step);
	else
		printf("job %s: step %" PRIu64 " is the head already\n", a.job, a.step);
	rckpt_job_close(j);
	rckpt_destroy(h);
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
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
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
	const int json = cli_format(conn) != CLI_FORMAT_PLAIN;
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
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
	if (a.deep && (rc == 0 || rc == RCKPT_ECHECKSUM)) {
		/* every committed step, materialized in the OSDs and checked
		 * against its manifest's SHA-256 per chunk */
		rckpt_step_info_t si[256];
		uint64_t after = RCKPT_LATEST, done = 0, failed = 0;
		unsigned n = 0, i;
		int more = 1, r2 = 0;
		while (more && r2 == 0) {
			r2 = rckpt_job_steps(j, after, si, 256, &n, &more);
			for (i = 0; r2 == 0 && i < n; i++) {
				rckpt_restored_t *r = NULL;
				after = si[i].step;
				if (rckpt_job_restore_tensors(j, si[i].step, NULL, 0, &r, NULL)) {
					failed++;
					fprintf(stderr, "rckpt ckpt: step %" PRIu64 ": %s\n", si[i].step, rckpt_errmsg(h));
				}
				rckpt_restored_free(r);
				done++;
				if (isatty(2))
					fprintf(stderr, "\r%" PRIu64 " steps materialized", done);
			}
		}
		if (isatty(2))
			fputc('\n', stderr);
		if (r2)
			fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
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
	int rc = admin_parse(argc, argv, &a, "j", "gc");
	if (rc)
		return rc;
	jo.writer = 1;
	if (open_existing(&h, &j, conn, a.job, &jo))
		return 1;
	rc = rckpt_job_gc(j, &removed);
	if (rc)
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
	else
		printf("job %s: trimmed records past the head, removed %u stale manifest(s)\n", a.job,
		       removed);
	rckpt_job_close(j);
	rckpt_destroy(h);
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
		if (rc == 0)
			printf("step %" PRIu64 " of job %s dropped (its records go at the next compaction)\n",
			       a.step, a.job);
		rckpt_job_close(j);
	} else {
		if ((rc = rckpt_create(&h)) == 0 && (rc = rckpt_connect(h, conn)) == 0 &&
		    (rc = rckpt_job_delete(h, a.job)) == 0)
			printf("job %s deleted\n", a.job);
	}
	if (rc)
		fprintf(stderr, "rckpt ckpt: %s\n", h ? rckpt_errmsg(h) : rckpt_strerror(rc));
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
	const int json = cli_format(conn) != CLI_FORMAT_PLAIN;
	json_t *jobs = json ? json_array() : NULL;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":aj:h", lo, NULL)) != -1) {
		switch (c) {
		case 'a': all = 1; break;
		case 'j': only = optarg; break;
		case 'h':
			printf("usage: rckpt [--pool P] compact (--all | --job J)\n\n"
			       "Compact every job of the pool (or job J) under its own retention policy\n"
			       "(set with 'rckpt ckpt compact --job J --keep-last N --keep-every M'; none\n"
			       "keeps every step): forget the steps it does not keep and rewrite each\n"
			       "chunk so that the latest step is a base. Safe beside running trainers\n"
			       "and beside another compaction, and to run twice. Prints a line per job\n"
			       "and a summary; exits 1 if any job failed.\n");
			return 0;
		default:
			return cli_option_error("compact", "compact", c, argv, optind);
		}
	}
	if (all == (only != NULL) || optind != argc) {
		fprintf(stderr, "rckpt compact: give --all or --job J; try 'rckpt compact --help'\n");
		return EXIT_USAGE;
	}
	if ((rc = rckpt_create(&h)) || (rc = rckpt_connect(h, conn))) {
		fprintf(stderr, "rckpt compact: %s\n", h ? rckpt_errmsg(h) : rckpt_strerror(rc));
		rckpt_destroy(h);
		return 1;
	}
	if (only) {
		names = calloc(1, sizeof(*names));
		if (names && (names[0] = strdup(only)) != NULL)
			n = 1;
	} else if ((rc = rckpt_jobs(h, &names, &n))) {
		fprintf(stderr, "rckpt compact: %s\n", rckpt_errmsg(h));
		rckpt_destroy(h);
		return 1;
	}
	if (!json) {
		printf("compacting %u job(s) in pool %s\n", n, rckpt_pool_name(h));
		fflush(stdout);
	}
	for (i = 0; i < n; i++) {
		rckpt_job_t *j = NULL;
		rckpt_compact_stats_t cs;
		const char *why = NULL;
		if ((rc = rckpt_job_open(h, &j, names[i], NULL)) == 0 && only && rckpt_job_exists(j) == 0)
			why = "it does not exist";
		else if (rc || (rc = rckpt_job_compact(j, NULL, &cs)))
			why = rckpt_errmsg(h);
		if (why) {
			/* failures on stderr, where a cron job's mail looks */
			fprintf(stderr, "[%u/%u] job %s: FAILED: %s\n", i + 1, n, names[i], why);
			if (json)
				json_array_append_new(jobs, json_pack("{s:s, s:b, s:s}", "job", names[i], "ok", 0, "error",
								      why));
			failed++;
		} else {
			if (json)
				json_array_append_new(
					jobs, json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:i, s:i, s:f, s:f}", "job",
							names[i], "ok", 1, "steps_before", (json_int_t)cs.steps_before,
							"steps_after", (json_int_t)cs.steps_after, "bytes_before",
							(json_int_t)cs.bytes_before, "bytes_after", (json_int_t)cs.bytes_after,
							"chunk_objects", (int)cs.chunks, "stages", (int)cs.stages,
							"slowest_stage_seconds", cs.max_call_seconds, "seconds", cs.seconds));
			else {
				printf("[%u/%u] ", i + 1, n);
				print_compact(names[i], &cs);
			}
			sb += cs.steps_before;
			sa += cs.steps_after;
			bb += cs.bytes_before;
			ba += cs.bytes_after;
		}
		fflush(stdout);
		rckpt_job_close(j);
	}
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
	int i;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			if (i < 2 || argv[1][0] == '-' || cli_sub_help(help_text, "ckpt", argv[1]))
				usage();
			return 0;
		}
	if (argc < 2)
		return usage_error("missing subcommand (save, restore, export, ls, compact, pin, rewind, branch, verify, gc, rm)");
	if (strcmp(argv[1], "save") == 0)
		return cmd_save(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "restore") == 0)
		return cmd_restore(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "ls") == 0)
		return cmd_ls(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "export") == 0)
		return cmd_export(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "compact") == 0)
		return cmd_compact(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "pin") == 0)
		return cmd_pin(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "rewind") == 0)
		return cmd_rewind(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "branch") == 0)
		return cmd_branch(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "verify") == 0)
		return cmd_verify(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "gc") == 0)
		return cmd_gc(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "rm") == 0)
		return cmd_rm(argc - 1, argv + 1, conn);
	return usage_error("unknown subcommand");
}
