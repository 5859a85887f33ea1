/*
 * cli_ckpt_save.c — `rckpt ckpt save`: compress model files (with their gradients,
 * optimizer state and attachment beside them) into a job's steps.
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

#include "cli_attach.h"
#include "cli_ckpt.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"
#include "rckpt_store_wire.h" /* RCKPT_STORE_CHUNK_ELEMENTS_MAX */

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
 * optimizer's (a sibling STEP.optim.safetensors, as bench/data/make_transformer.py
 * writes it; roles by rckpt_file_optim_role's convention). Declares their
 * roles and hands back one array (*out, freed by the caller). */
static int dropped(char *const *drop, unsigned ndrop, const char *name)
{
	unsigned k;
	for (k = 0; k < ndrop; k++)
		if (strcmp(drop[k], name) == 0)
			return 1;
	return 0;
}

static int optim_join(rckpt_job_t *j, const rckpt_file_t *st, const rckpt_file_t *os, char *const *drop,
		      unsigned ndrop, rckpt_tensor_t **out, unsigned *n)
{
	const unsigned nm = rckpt_file_count(st), no = os ? rckpt_file_count(os) : 0;
	rckpt_tensor_role_t *r = NULL;
	unsigned i, nr = 0;
	int rc;

	*n = 0;
	*out = malloc(sizeof(**out) * (nm + no + 1));
	r = malloc(sizeof(*r) * (no + 1));
	if (*out == NULL || r == NULL) {
		free(r);
		return -ENOMEM;
	}
	for (i = 0; i < nm; i++) /* but the tensors the state keeps exact */
		if (!dropped(drop, ndrop, rckpt_file_tensors(st)[i].name))
			(*out)[(*n)++] = rckpt_file_tensors(st)[i];
	for (i = 0; i < no; i++) {
		const rckpt_tensor_t *t = &rckpt_file_tensors(os)[i];
		if (dropped(drop, ndrop, t->name))
			continue;
		(*out)[(*n)++] = *t;
		rckpt_file_optim_role(t->name, &r[nr++]);
	}
	rc = rckpt_job_set_roles(j, r, nr);
	free(r);
	return rc;
}

/* The files beside a state: where cli_attach_join finds its tensors. */
typedef struct beside {
	const rckpt_file_t *f[2];
} beside_t;

static const rckpt_tensor_t *find_beside(void *arg, const char *name)
{
	const beside_t *b = arg;
	unsigned k, i;
	for (k = 0; k < 2; k++)
		for (i = 0; b->f[k] && i < rckpt_file_count(b->f[k]); i++)
			if (strcmp(rckpt_file_tensors(b->f[k])[i].name, name) == 0)
				return &rckpt_file_tensors(b->f[k])[i];
	return NULL;
}

/* A step's tensors and state from its files: the tensors the state keeps
 * exact (as `ckpt restore` writes them) back into the state (*att, *attlen
 * replaced), the rest in *all for the compressor, which takes F32, F16
 * and BF16 only. 0, or an error (said, naming path). */
static int step_inputs(rckpt_t *h, rckpt_job_t *j, const char *path, const char *spath, const rckpt_file_t *st, const rckpt_file_t *os,
		       uint8_t **att, size_t *attlen, rckpt_tensor_t **all, unsigned *nall)
{
	beside_t b = { { st, os } };
	uint8_t *joined = NULL;
	size_t jlen = 0;
	char **drop = NULL, msg[256] = "";
	unsigned ndrop = 0, i;
	int rc = *att ? cli_attach_join(*att, *attlen, find_beside, &b, &joined, &jlen, &drop, &ndrop, msg,
					sizeof(msg))
		      : 0;
	if (rc) {
		cli_err("ckpt", rc, "%s: %s", spath, rc == -ENOMEM ? "out of memory" : msg);
		return rc;
	}
	if (msg[0])
		cli_note("ckpt", "%s: %s", spath, msg);
	if (joined) {
		free(*att);
		*att = joined;
		*attlen = jlen;
	}
	rc = optim_join(j, st, os, drop, ndrop, all, nall);
	cli_names_free(drop, ndrop);
	if (rc)
		cli_err("ckpt", rc, "%s: %s", path, rc == -ENOMEM ? "out of memory" : rckpt_errmsg(h));
	for (i = 0; rc == 0 && i < *nall; i++)
		if ((*all)[i].dtype != RCKPT_F32 && (*all)[i].dtype != RCKPT_F16 && (*all)[i].dtype != RCKPT_BF16) {
			rc = -ENOTSUP;
			cli_err("ckpt", rc,
				"%s: tensor '%s': only F32, F16 and BF16 tensors are compressed, and the state "
				"beside it does not keep this one exact",
				path, (*all)[i].name);
		}
	if (rc) { /* said: the caller says nothing more */
		free(*all);
		*all = NULL;
	}
	return rc;
}

/* Reads a whole file (the MODEL.state beside a model): 0 or -errno. */
static int read_whole(const char *path, uint8_t **out, size_t *len)
{
	FILE *f;
	uint64_t n = ckpt_size_of(path);
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
		g = ckpt_sibling(argv[i], "grads.safetensors");
		o = ckpt_sibling(argv[i], "optim.safetensors");
		st = ckpt_sibling(argv[i], "state");
		/* beside a state, a file may hold what the state keeps exact */
		const unsigned fl = st && ckpt_exists(st) ? RCKPT_FILE_ANY_DTYPE : 0;
		if (!g || !o || !st) {
			cli_err("ckpt", -ENOMEM, "out of memory");
			rc = 1;
		} else if (cli_check_safetensors_flags("ckpt", argv[i], fl) ||
			   (!gfile && ckpt_exists(g) && cli_check_safetensors("ckpt", g)) ||
			   (ckpt_exists(o) && cli_check_safetensors_flags("ckpt", o, fl)) ||
			   (ckpt_exists(st) && cli_check_file("ckpt", st)))
			rc = 1;
		else
			*bytes += ckpt_size_of(argv[i]) + (ckpt_exists(o) ? ckpt_size_of(o) : 0);
		free(g);
		free(o);
		free(st);
	}
	return rc;
}

int ckpt_cmd_save(int argc, char **argv, const rckpt_connect_opts_t *conn)
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
		const int w = ckpt_writer_opt(c, &jo);
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
				return ckpt_usage_error(STEP_RULE);
			break;
		case 'e':
			jo.eps = strtod(optarg, &end);
			if (end == optarg || *end || !(jo.eps > 0 && jo.eps < 1))
				return ckpt_usage_error("--eps must be a number in (0, 1), both excluded: the bound of the "
						   "Fisher-weighted relative error (default 0.0012)");
			break;
		case 'l':
			if (cli_parse_u64(optarg, &v) || v == 0 || v > 86400)
				return ckpt_usage_error("--lease must be a whole number of seconds, 1..86400");
			jo.lease_s = (unsigned)v;
			break;
		case 'C':
			if (cli_parse_u64(optarg, &v) || v == 0 || v > RCKPT_STORE_CHUNK_ELEMENTS_MAX)
				return ckpt_usage_error("--chunk-params must be 1..4194304 (2^22: what one "
						   "call of the OSD plugin takes of a chunk)");
			jo.chunk_params = v;
			break;
		case 'M':
			if (cli_parse_u64(optarg, &v) || v == 0 || v > ((uint64_t)1 << 30))
				return ckpt_usage_error("--mem-budget must be a whole number of MiB, 1..2^30");
			jo.mem_budget = v << 20;
			break;
		default: return cli_option_error("ckpt", "save", c, argv, optind);
		}
	}
	if (job == NULL)
		return ckpt_usage_error("save needs --job J");
	if (cli_check_name("ckpt", "--job", job))
		return EXIT_USAGE;
	for (i = optind; i < argc; i++)
		nfiles += !cli_is_sibling(argv[i]);
	if (nfiles == 0)
		return ckpt_usage_error("save needs at least one MODEL.safetensors");
	if (gfile && nfiles != 1)
		return ckpt_usage_error("--grads goes with exactly one MODEL.safetensors");
	/* Every file checked before the job is touched (no empty job, no step
	 * committed, for a typo in the last file's name). */
	if (save_check_files(argc, argv, optind, gfile, &total))
		return 1;
	/* a signal while the lock is taken waits for it, then releases it */
	cli_signals_guard();
	cli_signals_defer(1);
	jo.writer = 1;
	if (ckpt_open_job(&h, &j, conn, job, &jo))
		return cli_interrupted() ? ckpt_interrupted("the job was not opened") : 1;
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
		gpath = ckpt_sibling(argv[i], "grads.safetensors");
		opath = ckpt_sibling(argv[i], "optim.safetensors");
		spath = ckpt_sibling(argv[i], "state");
		if (!gpath || !opath || !spath) {
			rc = -ENOMEM;
			cli_err("ckpt", rc, "out of memory");
		} else if ((rc = rckpt_file_read_flags(&st, argv[i], ckpt_exists(spath) ? RCKPT_FILE_ANY_DTYPE : 0, err,
						       sizeof(err))))
			cli_err("ckpt", rc, "%s: %s", argv[i], err);
		else if (gfile && (rc = rckpt_file_read(&gs, gfile, err, sizeof(err))))
			cli_err("ckpt", rc, "%s: %s", gfile, err);
		else if (!gfile && ckpt_exists(gpath) && (rc = rckpt_file_read(&gs, gpath, err, sizeof(err))))
			cli_err("ckpt", rc, "%s: %s", gpath, err);
		else if (ckpt_exists(opath) &&
			 (rc = rckpt_file_read_flags(&os, opath, ckpt_exists(spath) ? RCKPT_FILE_ANY_DTYPE : 0, err,
						     sizeof(err))))
			cli_err("ckpt", rc, "%s: %s", opath, err);
		else if (ckpt_exists(spath) && (rc = read_whole(spath, &att, &attlen)))
			cli_err("ckpt", rc, "%s: %s", spath, rc == -EFBIG ? "over 1 GiB, more than a step's attachment may hold" : strerror(-rc));
		bytes = ckpt_size_of(argv[i]) + (os ? ckpt_size_of(opath) : 0);
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
			rc = step_inputs(h, j, argv[i], spath, st, os, &att, &attlen, &all, &nall); /* says why */
			if (rc == 0 && att)
				rc = rckpt_job_attach(j, att, attlen);
			if (rc == 0)
				rc = rckpt_job_save_async(j, s, all, nall, gs ? rckpt_file_tensors(gs) : NULL,
							  gs ? rckpt_file_count(gs) : 0, &pend);
			if (rc && all)
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
		ret = ckpt_interrupted(what);
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
