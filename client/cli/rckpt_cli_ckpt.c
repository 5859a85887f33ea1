/*
 * rckpt_cli_ckpt.c — `rckpt ckpt save | restore | ls`: checkpoints of a
 * training job in the cluster (librckpt's public job API).
 */
#define _GNU_SOURCE /* getopt_long */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt.h"
#include "rckpt_safetensors.h"

#define EXIT_USAGE 2

int rckpt_cli_ckpt(int argc, char **argv, const rckpt_connect_opts_t *conn);

static int usage_error(const char *what)
{
	fprintf(stderr, "rckpt ckpt: %s; try 'rckpt ckpt --help'\n", what);
	return EXIT_USAGE;
}

static void usage(void)
{
	printf("usage: rckpt [options] ckpt save --job J [--step N] [--eps E] [--lease S]\n"
	       "                                 MODEL.safetensors...\n"
	       "       rckpt [options] ckpt restore --job J [--step N] -o OUT.safetensors\n"
	       "       rckpt [options] ckpt ls --job J\n"
	       "\n"
	       "save     compress and commit checkpoints into job J (a namespace of the pool), in\n"
	       "         the order given, each as the step its file name ends with (step-000025\n"
	       "         is step 25), or from --step N on (N, N+1, ...). Within one run each step after\n"
	       "         the first is a delta. A sibling MODEL.grads.safetensors (gradient EMA)\n"
	       "         is used for sensitivity. Takes the job's writer lock: a second writer is\n"
	       "         refused; a dead writer's lock expires --lease seconds (default 30) after\n"
	       "         its last save. Prints each step's ratio and timings.\n"
	       "restore  materialize a committed step (default: the latest) in the OSDs, check\n"
	       "         every chunk's SHA-256, and write its tensors to OUT.safetensors.\n"
	       "ls       list the committed steps with their sizes and ratios.\n"
	       "\n"
	       "Global options (--conf, --user, --pool, --timeout) go before 'ckpt'.\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)s[0]))
		return -1;
	*v = strtoull(s, &end, 10);
	return errno || *end ? -1 : 0;
}

static uint64_t step_of(const char *path, uint64_t dflt)
{
	const char *base = strrchr(path, '/'), *p, *end = NULL;
	base = base ? base + 1 : path;
	for (p = base; *p; p++)
		if (isdigit((unsigned char)*p) && !isdigit((unsigned char)p[1]))
			end = p;
	if (end == NULL)
		return dflt;
	for (p = end; p > base && isdigit((unsigned char)p[-1]); p--)
		;
	return strtoull(p, NULL, 10);
}

static int open_job(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *job,
		    const rckpt_job_opts_t *jo)
{
	int rc = rckpt_create(h);
	if (rc) {
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_strerror(rc));
		return rc;
	}
	if ((rc = rckpt_connect(*h, conn)) || (rc = rckpt_job_open(*h, j, job, jo))) {
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(*h));
		rckpt_destroy(*h);
		*h = NULL;
	}
	return rc;
}

static rckpt_tensor_t *as_tensors(const rckpt_st_t *st)
{
	rckpt_tensor_t *t = calloc(st->ntensors ? st->ntensors : 1, sizeof(*t));
	unsigned i, d;
	for (i = 0; t && i < st->ntensors; i++) {
		t[i].name = st->t[i].name;
		t[i].dtype = st->t[i].dtype;
		t[i].ndim = st->t[i].ndim;
		for (d = 0; d < st->t[i].ndim; d++)
			t[i].shape[d] = st->t[i].shape[d];
		t[i].data = st->t[i].data;
	}
	return t;
}

static int is_grads(const char *path)
{
	size_t n = strlen(path);
	return n >= 18 && strcmp(path + n - 18, ".grads.safetensors") == 0;
}

static int cmd_save(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },   { "step", 1, 0, 's' },
					    { "eps", 1, 0, 'e' },   { "lease", 1, 0, 'l' },
					    { "chunk-params", 1, 0, 'C' }, { 0, 0, 0, 0 } };
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	const char *job = NULL;
	uint64_t step = UINT64_MAX, v, raw = 0, enc = 0;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	int c, i, rc = 0, nfiles = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "j:s:e:l:C:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 's':
			if (parse_u64(optarg, &step))
				return usage_error("--step needs a number");
			break;
		case 'e':
			jo.eps = atof(optarg);
			if (!(jo.eps > 0 && jo.eps < 1))
				return usage_error("--eps must be in (0, 1)");
			break;
		case 'l':
			if (parse_u64(optarg, &v) || v == 0 || v > 86400)
				return usage_error("--lease must be 1..86400 seconds");
			jo.lease_s = (unsigned)v;
			break;
		case 'C':
			if (parse_u64(optarg, &v) || v == 0 || v > ((uint64_t)1 << 31))
				return usage_error("--chunk-params must be 1..2^31");
			jo.chunk_params = v;
			break;
		default: return usage_error("bad option for save");
		}
	}
	if (job == NULL)
		return usage_error("save needs --job");
	for (i = optind; i < argc; i++)
		nfiles += !is_grads(argv[i]);
	if (nfiles == 0)
		return usage_error("save needs at least one MODEL.safetensors");
	jo.writer = 1;
	if (open_job(&h, &j, conn, job, &jo))
		return 1;
	for (i = optind, nfiles = 0; i < argc && rc == 0; i++) {
		rckpt_st_t st, gs;
		rckpt_tensor_t *t = NULL, *g = NULL;
		rckpt_save_stats_t ss;
		char err[256], gpath[4096];
		uint64_t s = step != UINT64_MAX ? step + (uint64_t)nfiles : step_of(argv[i], 0);
		size_t n = strlen(argv[i]);
		int have_g = 0;

		if (is_grads(argv[i]))
			continue;
		nfiles++;
		if ((rc = rckpt_st_read(&st, argv[i], err, sizeof(err)))) {
			fprintf(stderr, "rckpt ckpt: %s: %s\n", argv[i], err);
			break;
		}
		if (n > 12 && strcmp(argv[i] + n - 12, ".safetensors") == 0 && n + 6 < sizeof(gpath)) {
			snprintf(gpath, sizeof(gpath), "%.*s.grads.safetensors", (int)(n - 12), argv[i]);
			have_g = rckpt_st_read(&gs, gpath, err, sizeof(err)) == 0;
		}
		t = as_tensors(&st);
		g = have_g ? as_tensors(&gs) : NULL;
		rc = t && (!have_g || g) ? rckpt_job_save(j, s, t, st.ntensors, g, have_g ? gs.ntensors : 0, &ss)
					 : -ENOMEM;
		if (rc)
			fprintf(stderr, "rckpt ckpt: %s: %s\n", argv[i], rc == -ENOMEM ? "out of memory" : rckpt_errmsg(h));
		else {
			raw += ss.raw_bytes;
			enc += ss.enc_bytes;
			printf("step %-8" PRIu64 " %-5s %6.1fx  %9" PRIu64 " -> %8" PRIu64
			       " bytes  %2u chunks  encode %6.1f ms  write %6.1f ms\n",
			       s, ss.is_base ? "base" : "delta", (double)ss.raw_bytes / (double)ss.enc_bytes,
			       ss.raw_bytes, ss.enc_bytes, ss.nchunks, ss.t_encode * 1e3, ss.t_write * 1e3);
			fflush(stdout);
		}
		free(t);
		free(g);
		rckpt_st_free(&st);
		if (have_g)
			rckpt_st_free(&gs);
	}
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
					    { 0, 0, 0, 0 } };
	const char *job = NULL, *outp = NULL;
	uint64_t step = RCKPT_LATEST;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *r = NULL;
	rckpt_restore_stats_t rs;
	rckpt_st_tensor_t *t = NULL;
	uint8_t **bufs = NULL;
	unsigned i, n = 0;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "j:s:o:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 's':
			if (parse_u64(optarg, &step))
				return usage_error("--step needs a number");
			break;
		case 'o': outp = optarg; break;
		default: return usage_error("bad option for restore");
		}
	}
	if (job == NULL || outp == NULL || optind != argc)
		return usage_error("restore needs --job and -o OUT.safetensors, nothing else");
	if (open_job(&h, &j, conn, job, NULL))
		return 1;
	rc = rckpt_job_restore(j, step, &r, &rs);
	if (rc) {
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
		goto done;
	}
	n = rckpt_restored_count(r);
	t = calloc(n ? n : 1, sizeof(*t));
	bufs = calloc(n ? n : 1, sizeof(*bufs));
	rc = t && bufs ? 0 : -ENOMEM;
	for (i = 0; i < n && rc == 0; i++) {
		rckpt_tensor_t d;
		uint64_t e = 1;
		unsigned k;
		rckpt_restored_tensor(r, i, &d);
		for (k = 0; k < d.ndim; k++)
			e *= d.shape[k];
		t[i].name = (char *)d.name;
		t[i].dtype = d.dtype;
		t[i].ndim = d.ndim;
		memcpy(t[i].shape, d.shape, sizeof(d.shape));
		t[i].n = e;
		bufs[i] = malloc(e ? (size_t)e * (d.dtype == RCKPT_F32 ? 4 : 2) : 1);
		rc = bufs[i] ? rckpt_restored_read(r, i, bufs[i], (size_t)e * (d.dtype == RCKPT_F32 ? 4 : 2))
			     : -ENOMEM;
		t[i].data = bufs[i];
	}
	if (rc == 0)
		rc = rckpt_st_write(outp, t, n);
	if (rc)
		fprintf(stderr, "rckpt ckpt: cannot write %s: %s\n", outp, rckpt_strerror(rc));
	else
		printf("restored step %" PRIu64 " of job %s: %u tensors, %u materialize calls, %" PRIu64
		       " bytes from the OSDs, %.1f ms -> %s\n",
		       rckpt_restored_step(r), job, n, rs.calls, rs.wire_bytes, rs.seconds * 1e3, outp);
done:
	for (i = 0; bufs && i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(t);
	rckpt_restored_free(r);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

static int cmd_ls(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' }, { 0, 0, 0, 0 } };
	const char *job = NULL;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_step_info_t s[256];
	uint64_t after = RCKPT_LATEST, raw = 0, enc = 0, total = 0;
	int c, more = 1, rc = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "j:", lo, NULL)) != -1) {
		if (c != 'j')
			return usage_error("bad option for ls");
		job = optarg;
	}
	if (job == NULL || optind != argc)
		return usage_error("ls needs --job, nothing else");
	if (open_job(&h, &j, conn, job, NULL))
		return 1;
	printf("%-10s %-6s %14s %12s %8s %7s\n", "step", "kind", "raw bytes", "stored", "ratio", "chunks");
	while (more && rc == 0) {
		unsigned n, i;
		rc = rckpt_job_steps(j, after, s, 256, &n, &more);
		for (i = 0; rc == 0 && i < n; i++) {
			printf("%-10" PRIu64 " %-6s %14" PRIu64 " %12" PRIu64 " %7.1fx %7u\n", s[i].step,
			       s[i].parent == RCKPT_LATEST ? "base" : "delta", s[i].raw_bytes, s[i].enc_bytes,
			       s[i].enc_bytes ? (double)s[i].raw_bytes / (double)s[i].enc_bytes : 0.0,
			       s[i].nchunks);
			raw += s[i].raw_bytes;
			enc += s[i].enc_bytes;
			after = s[i].step;
			total++;
		}
		if (n == 0)
			break;
	}
	if (rc)
		fprintf(stderr, "rckpt ckpt: %s\n", rckpt_errmsg(h));
	else
		printf("%" PRIu64 " steps, %.1fx overall\n", total, enc ? (double)raw / (double)enc : 0.0);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

int rckpt_cli_ckpt(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	int i;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage();
			return 0;
		}
	if (argc < 2)
		return usage_error("missing subcommand (save, restore, ls)");
	if (strcmp(argv[1], "save") == 0)
		return cmd_save(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "restore") == 0)
		return cmd_restore(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "ls") == 0)
		return cmd_ls(argc - 1, argv + 1, conn);
	return usage_error("unknown subcommand");
}
