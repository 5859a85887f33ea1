/*
 * rckpt_cli_codec.c — `rckpt codec encode | decode | inspect`: the
 * checkpoint codec on local files (safetensors in, step files out, and back).
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"

static int usage_error(const char *what)
{
	return cli_usage_error("codec", what);
}

static void usage(void)
{
	printf("usage: rckpt codec encode [--eps E] [--bins B] [--chunk-params N] [--base-every N]\n"
	       "                          [--exact] -o DIR CKPT.safetensors...\n"
	       "       rckpt codec decode -o OUT.safetensors STEP.rckpt...\n"
	       "       rckpt codec inspect STEP.rckpt\n"
	       "\n"
	       "encode   compress a sequence of checkpoints, in the order given, into DIR/NAME.rckpt:\n"
	       "         the first as a base, each next as a delta against the one before. A\n"
	       "         sibling NAME.grads.safetensors with the gradient RMS of the same tensors\n"
	       "         (sqrt of a moving average of grad**2, or Adam's sqrt(exp_avg_sq)) weighs\n"
	       "         each value's error and ranks values for pruning and protection (it is\n"
	       "         skipped when a glob names it among the checkpoints, as are .gmean. and\n"
	       "         .optim. siblings). --eps bounds the Fisher-weighted relative error of\n"
	       "         the quantized tensors, sum g^2 (w - r)^2 / sum g^2 w^2 (default 0.0012,\n"
	       "         at which no model of the calibration suite lost over 1%% held-out loss);\n"
	       "         --bins B skips the search and uses B bins; --chunk-params\n"
	       "         sets the elements per chunk (default 4194304); --base-every N writes a\n"
	       "         base every N steps (default: the first only). --exact keeps every\n"
	       "         value bit for bit: no quantization, each value's bytes in planes\n"
	       "         (the exponent's entropy-coded), each step's predicted by the last's.\n"
	       "decode   rebuild the last of a chain of step files (base first, then each delta\n"
	       "         in order) and write its tensors, in their own dtypes, to OUT.safetensors.\n"
	       "         Every chunk's SHA-256 is checked.\n"
	       "inspect  print a step file's manifest: tensors, chunks, configuration, sizes.\n");
}

static char *stem(const char *path)
{
	const char *base = strrchr(path, '/');
	char *s;
	size_t n;
	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 12 && strcmp(base + n - 12, ".safetensors") == 0)
		n -= 12;
	s = malloc(n + 1);
	if (s) {
		memcpy(s, base, n);
		s[n] = '\0';
	}
	return s;
}

/* The gradient sibling of a checkpoint file: X.grads.safetensors beside
 * X.safetensors (malloc'd). */
static char *grads_of(const char *path)
{
	size_t l = strlen(path);
	char *g = malloc(l + 20);
	if (g)
		snprintf(g, l + 20, "%.*s.grads.safetensors",
			 (int)(l > 12 && strcmp(path + l - 12, ".safetensors") == 0 ? l - 12 : l), path);
	return g;
}

/* A file size for the progress line (0 when unknown). */
static uint64_t size_of(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int cmd_encode(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "eps", 1, 0, 'e' },  { "bins", 1, 0, 'b' },
					    { "chunk-params", 1, 0, 'c' }, { "base-every", 1, 0, 'B' },
					    { "out", 1, 0, 'o' },   { "exact", 0, 0, 'x' },
					    { 0, 0, 0, 0 } };
	rckpt_stepenc_opts_t o = RCKPT_STEPENC_OPTS_INIT;
	rckpt_stepenc_t *e = NULL;
	const char *dir = NULL;
	uint64_t raw = 0, enc = 0, v, total = 0, done = 0;
	unsigned nfiles = 0, k = 0;
	json_t *steps = NULL;
	char *end;
	int c, i, rc = 0, made = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:e:b:c:B:o:", lo, NULL)) != -1) {
		switch (c) {
		case 'x':
			o.exact = 1;
			break;
		case 'e':
			o.eps = strtod(optarg, &end);
			if (*end || end == optarg || !(o.eps > 0))
				return usage_error("--eps must be a number > 0: the bound of the Fisher-weighted "
						   "relative error (default 0.0012)");
			break;
		case 'b':
			if (cli_parse_u64(optarg, &v) || v < 1 || v > 64)
				return usage_error("--bins must be a whole number 1..64");
			o.bins = (unsigned)v;
			break;
		case 'c':
			if (cli_parse_u64(optarg, &v) || v == 0 || v > (1ull << 31))
				return usage_error("--chunk-params must be a whole number 1..2147483648 (2^31)");
			o.chunk_params = v;
			break;
		case 'B':
			if (cli_parse_u64(optarg, &v) || v > UINT32_MAX)
				return usage_error("--base-every must be a whole number 0..4294967295 (0: only "
						   "the first step is a base)");
			o.base_every = (unsigned)v;
			break;
		case 'o':
			dir = optarg;
			break;
		default:
			return cli_option_error("codec", "encode", c, argv, optind);
		}
	}
	if (dir == NULL)
		return usage_error("encode needs -o DIR");
	if (optind >= argc)
		return usage_error("encode needs checkpoints");
	/* every file checked before anything is written */
	for (i = optind; i < argc; i++) {
		char *g;
		if (cli_is_sibling(argv[i]))
			continue;
		if (cli_check_safetensors("codec", argv[i]))
			return 1;
		if ((g = grads_of(argv[i])) == NULL)
			return 1;
		rc = access(g, F_OK) == 0 ? cli_check_safetensors("codec", g) : 0;
		free(g);
		if (rc)
			return 1;
		nfiles++;
		total += size_of(argv[i]);
	}
	if (nfiles == 0)
		return usage_error("encode needs checkpoints (X.grads/.gmean/.optim.safetensors are siblings)");
	if (cli_check_out_dir("codec", dir))
		return 1;
	cli_signals_guard(); /* a signal removes the step file being written */
	if (cli_json_mode())
		steps = json_array();
	if (mkdir(dir, 0777) == 0)
		made = 1; /* removed again if nothing lands in it */
	else if (errno != EEXIST) {
		cli_err("codec", -errno, "%s: cannot make it: %s", dir, strerror(errno));
		return 1;
	}
	if ((rc = rckpt_stepenc_create(&e, &o))) {
		cli_err("codec", rc, "%s", rckpt_strerror(rc));
		goto out;
	}
	cli_progress_begin("encoding", nfiles, "files", total);
	for (i = optind; i < argc && rc == 0; i++) {
		rckpt_file_t *p = NULL, *g = NULL;
		rckpt_step_report_t st;
		cli_stage_t sg = { 0 };
		const char *tmp = NULL;
		char err[512] = "", msg[256] = "", *gpath = NULL, *opath = NULL, *name = NULL;

		/* X.grads.safetensors is read as X's gradients */
		if (cli_is_sibling(argv[i]))
			continue;
		cli_progress_item("%s", argv[i]);
		name = stem(argv[i]);
		gpath = grads_of(argv[i]);
		opath = malloc(strlen(dir) + (name ? strlen(name) : 0) + 16);
		if (!name || !gpath || !opath) {
			rc = -ENOMEM;
			cli_err("codec", rc, "out of memory");
		} else {
			sprintf(opath, "%s/%s.rckpt", dir, name);
			if ((tmp = cli_stage_add(&sg, opath)) == NULL) {
				rc = -ENOMEM;
				cli_err("codec", rc, "out of memory");
			} else if ((rc = rckpt_file_read(&p, argv[i], err, sizeof(err))) != 0)
				cli_err("codec", rc, "%s: %s", argv[i], err);
		}
		if (rc == 0) {
			if (access(gpath, F_OK) == 0 && (rc = rckpt_file_read(&g, gpath, err, sizeof(err))) != 0)
				cli_err("codec", rc, "%s: %s", gpath, err);
		}
		if (rc == 0) {
			rc = rckpt_stepenc_file(e, p, g, cli_step_of(argv[i], (uint64_t)k), tmp, &st, msg,
						sizeof(msg));
			if (rc)
				cli_err("codec", rc, "%s: %s%s%s", argv[i], rckpt_strerror(rc), *msg ? ": " : "", msg);
			else
				rc = cli_stage_commit(&sg, "codec");
		}
		cli_stage_abort(&sg);
		if (rc == 0) {
			if (steps)
				json_array_append_new(
					steps, json_pack("{s:s, s:I, s:I, s:I, s:f, s:b, s:b, s:s, s:s}", "file", argv[i],
							 "step", (json_int_t)cli_step_of(argv[i], (uint64_t)k), "raw_bytes",
							 (json_int_t)st.raw_bytes, "enc_bytes", (json_int_t)st.enc_bytes,
							 "quality", st.quality, "accepted", st.accepted, "base", st.is_base,
							 "config", st.config, "output", opath));
			else
				cli_line("%s: %.2f MB -> %.1f kB (%.1fx), loss %.2e%s, %s%s -> %s\n", argv[i],
					 st.raw_bytes / 1e6, st.enc_bytes / 1e3,
					 (double)st.raw_bytes / (double)st.enc_bytes, st.quality,
					 st.accepted ? "" : " (over eps)", st.is_base ? "base, " : "", st.config, opath);
			raw += st.raw_bytes;
			enc += st.enc_bytes;
			done += size_of(argv[i]);
			cli_progress_set(++k, done);
		}
		rckpt_file_free(g);
		rckpt_file_free(p);
		free(name);
		free(gpath);
		free(opath);
	}
	cli_progress_end();
out:
	rckpt_stepenc_destroy(e);
	if (rc == 0 && steps) {
		rc = cli_json_out(json_pack("{s:s, s:O, s:I, s:I}", "out", dir, "steps", steps, "raw_bytes",
					    (json_int_t)raw, "enc_bytes", (json_int_t)enc),
				  conn)
			     ? -EIO
			     : 0;
	} else if (rc == 0 && enc)
		printf("total: %.2f MB -> %.1f kB (%.1fx)\n", raw / 1e6, enc / 1e3, (double)raw / (double)enc);
	json_decref(steps);
	if (rc && made)
		rmdir(dir); /* a failed run leaves no empty folder (one with steps in it stays) */
	return rc ? 1 : 0;
}

static int cmd_decode(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "out", 1, 0, 'o' }, { 0, 0, 0, 0 } };
	const char *outp = NULL, *tmp;
	rckpt_stepdec_t *d;
	cli_stage_t sg = { 0 };
	uint64_t step = 0;
	unsigned nt = 0;
	int c, i, rc = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:o:", lo, NULL)) != -1) {
		if (c == 'o')
			outp = optarg;
		else
			return cli_option_error("codec", "decode", c, argv, optind);
	}
	if (outp == NULL || optind >= argc)
		return usage_error("decode needs -o OUT.safetensors and step files");
	for (i = optind; i < argc; i++)
		if (cli_check_file("codec", argv[i]))
			return 1;
	if (cli_check_out("codec", outp))
		return 1;
	cli_signals_guard(); /* a signal removes the file being written */
	if ((rc = rckpt_stepdec_create(&d))) {
		cli_err("codec", rc, "%s", rckpt_strerror(rc));
		return 1;
	}
	for (i = optind; i < argc && rc == 0; i++) {
		rc = rckpt_stepdec_file(d, argv[i]);
		if (rc == -E2BIG)
			cli_err("codec", rc,
				"%s declares more values than its bytes can hold (over 4096x as fp32): refused "
				"(the environment variable RCKPT_DECODE_RATIO_MAX raises the bound)",
				argv[i]);
		else if (rc == -ESTALE)
			cli_err("codec", rc,
				"%s is a delta of a step that is not the one before it in the chain (give the chain "
				"base first)",
				argv[i]);
		else if (rc == -EBADMSG || rc == -EINVAL || rc == RCKPT_EVERSION)
			cli_err("codec", rc, "%s: not a step file, or a damaged one (%s)", argv[i], rckpt_strerror(rc));
		else if (rc)
			cli_err("codec", rc, "%s: %s", argv[i], rckpt_strerror(rc));
	}
	if (rc == 0) {
		if ((tmp = cli_stage_add(&sg, outp)) == NULL) {
			rc = -ENOMEM;
			cli_err("codec", rc, "out of memory");
		} else if ((rc = rckpt_stepdec_write(d, tmp, &step, &nt)))
			cli_err("codec", rc, "%s: cannot write it: %s", outp, rckpt_strerror(rc));
		else
			rc = cli_stage_commit(&sg, "codec");
		cli_stage_abort(&sg);
	}
	if (rc == 0) {
		if (cli_json_mode())
			rc = cli_json_out(json_pack("{s:I, s:i, s:s}", "step", (json_int_t)step, "tensors", (int)nt,
						    "output", outp),
					  conn)
				     ? -EIO
				     : 0;
		else
			printf("step %llu: %u tensors -> %s\n", (unsigned long long)step, nt, outp);
	}
	rckpt_stepdec_destroy(d);
	return rc ? 1 : 0;
}

static int cmd_inspect(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;
	if (argc != 2)
		return usage_error("inspect needs one step file");
	if (cli_check_file("codec", argv[1]))
		return 1;
	/* the description, then printed: nothing of a damaged file's half */
	if ((f = open_memstream(&text, &len)) == NULL) {
		cli_err("codec", -ENOMEM, "out of memory");
		return 1;
	}
	rc = rckpt_stepfile_describe(argv[1], f);
	fclose(f);
	if (rc == -EBADMSG || rc == -EINVAL || rc == RCKPT_EVERSION)
		cli_err("codec", rc, "%s: not a step file, or a damaged one (%s)", argv[1], rckpt_strerror(rc));
	else if (rc)
		cli_err("codec", rc, "%s: %s", argv[1], rckpt_strerror(rc));
	else if (cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:s}", "file", argv[1], "description", text ? text : ""), conn)
			     ? -EIO
			     : 0;
	else
		fputs(text ? text : "", stdout);
	free(text);
	return rc ? 1 : 0;
}

int rckpt_cli_codec(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	/* local files only: conn for the output format */
	if (cli_wants_help(argc, argv)) {
		usage();
		return 0;
	}
	if (argc < 2)
		return usage_error("missing subcommand (encode, decode, inspect)");
	if (strcmp(argv[1], "encode") == 0)
		return cmd_encode(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "decode") == 0)
		return cmd_decode(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "inspect") == 0)
		return cmd_inspect(argc - 1, argv + 1, conn);
	return usage_error("unknown subcommand");
}
