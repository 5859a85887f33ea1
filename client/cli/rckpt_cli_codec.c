/*
 * rckpt_cli_codec.c — `rckpt codec encode | decode | inspect`: the
 * checkpoint codec on local files (safetensors in, step files out, and back).
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rckpt_cli.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"

static int usage_error(const char *what)
{
	return cli_usage_error("codec", what);
}

static void usage(void)
{
	printf("usage: rckpt codec encode [--eps E] [--bins B] [--chunk-params N] [--base-every N]\n"
	       "                          -o DIR CKPT.safetensors...\n"
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
	       "         base every N steps (default: the first only).\n"
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

static int cmd_encode(int argc, char **argv)
{
	static const struct option lo[] = { { "eps", 1, 0, 'e' },  { "bins", 1, 0, 'b' },
					    { "chunk-params", 1, 0, 'c' }, { "base-every", 1, 0, 'B' },
					    { "out", 1, 0, 'o' },   { 0, 0, 0, 0 } };
	rckpt_stepenc_opts_t o = RCKPT_STEPENC_OPTS_INIT;
	rckpt_stepenc_t *e;
	const char *dir = NULL;
	size_t raw = 0, enc = 0;
	char *end;
	int c, i, rc = 0, made = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:e:b:c:B:o:", lo, NULL)) != -1) {
		switch (c) {
		case 'e':
			o.eps = strtod(optarg, &end);
			if (*end || !(o.eps > 0))
				return usage_error("--eps must be a number > 0");
			break;
		case 'b':
			o.bins = (unsigned)strtoul(optarg, &end, 10);
			if (*end || o.bins < 1 || o.bins > 64)
				return usage_error("--bins must be 1..64");
			break;
		case 'c':
			o.chunk_params = strtoull(optarg, &end, 10);
			if (*end || o.chunk_params == 0 || o.chunk_params > (1ull << 31))
				return usage_error("--chunk-params must be 1..2147483648");
			break;
		case 'B':
			o.base_every = (unsigned)strtoul(optarg, &end, 10);
			if (*end)
				return usage_error("--base-every must be a number");
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
	if (mkdir(dir, 0777) == 0)
		made = 1; /* removed again if nothing lands in it */
	else if (errno != EEXIST) {
		fprintf(stderr, "rckpt codec: cannot create %s: %s\n", dir, strerror(errno));
		return 1;
	}
	if ((rc = rckpt_stepenc_create(&e, &o))) {
		fprintf(stderr, "rckpt codec: %s\n", rckpt_strerror(rc));
		return 1;
	}
	for (i = optind; i < argc && rc == 0; i++) {
		rckpt_file_t *p = NULL, *g = NULL;
		rckpt_step_report_t st;
		char err[512], msg[256], *gpath, *opath, *name;
		size_t l = strlen(argv[i]);

		/* X.grads.safetensors is read as X's gradients */
		if (cli_is_sibling(argv[i]))
			continue;
		name = stem(argv[i]);
		gpath = malloc(l + 16);
		opath = malloc(strlen(dir) + (name ? strlen(name) : 0) + 16);
		if (!name || !gpath || !opath) {
			rc = -ENOMEM;
		} else {
			snprintf(gpath, l + 16, "%.*s.grads.safetensors",
				 (int)(l > 12 && strcmp(argv[i] + l - 12, ".safetensors") == 0 ? l - 12 : l),
				 argv[i]);
			sprintf(opath, "%s/%s.rckpt", dir, name);
			if ((rc = rckpt_file_read(&p, argv[i], err, sizeof(err))) != 0)
				fprintf(stderr, "rckpt codec: %s: %s\n", argv[i], err);
		}
		if (rc == 0) {
			if (rckpt_file_read(&g, gpath, err, sizeof(err)) != 0)
				g = NULL;
			rc = rckpt_stepenc_file(e, p, g, cli_step_of(argv[i], (uint64_t)(i - optind)), opath,
						&st, msg, sizeof(msg));
			if (rc) {
				fprintf(stderr, "rckpt codec: %s: %s%s%s\n", argv[i], rckpt_strerror(rc),
					*msg ? ": " : "", msg);
			} else {
				printf("%s: %.2f MB -> %.1f kB (%.1fx), loss %.2e%s, %s%s -> %s\n", argv[i],
				       st.raw_bytes / 1e6, st.enc_bytes / 1e3,
				       (double)st.raw_bytes / (double)st.enc_bytes, st.quality,
				       st.accepted ? "" : " (over eps)", st.is_base ? "base, " : "", st.config,
				       opath);
				fflush(stdout);
				raw += st.raw_bytes;
				enc += st.enc_bytes;
			}
		}
		rckpt_file_free(g);
		rckpt_file_free(p);
		free(name);
		free(gpath);
		free(opath);
	}
	rckpt_stepenc_destroy(e);
	if (rc == 0 && enc)
		printf("total: %.2f MB -> %.1f kB (%.1fx)\n", raw / 1e6, enc / 1e3, (double)raw / (double)enc);
	if (rc && made)
		rmdir(dir); /* a failed run leaves no empty folder (one with steps in it stays) */
	return rc ? 1 : 0;
}

static int cmd_decode(int argc, char **argv)
{
	static const struct option lo[] = { { "out", 1, 0, 'o' }, { 0, 0, 0, 0 } };
	const char *outp = NULL;
	rckpt_stepdec_t *d;
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
	if ((rc = rckpt_stepdec_create(&d))) {
		fprintf(stderr, "rckpt codec: %s\n", rckpt_strerror(rc));
		return 1;
	}
	for (i = optind; i < argc && rc == 0; i++) {
		rc = rckpt_stepdec_file(d, argv[i]);
		if (rc == -ESTALE)
			fprintf(stderr, "rckpt codec: %s is a delta of a step that is not the one before it "
					"in the chain (give the chain base first)\n",
				argv[i]);
		else if (rc)
			fprintf(stderr, "rckpt codec: %s: %s\n", argv[i], rckpt_strerror(rc));
	}
	if (rc == 0) {
		if ((rc = rckpt_stepdec_write(d, outp, &step, &nt)))
			fprintf(stderr, "rckpt codec: writing %s: %s\n", outp, rckpt_strerror(rc));
		else
			printf("step %llu: %u tensors -> %s\n", (unsigned long long)step, nt, outp);
	}
	rckpt_stepdec_destroy(d);
	return rc ? 1 : 0;
}

static int cmd_inspect(int argc, char **argv)
{
	int rc;
	if (argc != 2)
		return usage_error("inspect needs one step file");
	if ((rc = rckpt_stepfile_describe(argv[1], stdout))) {
		fprintf(stderr, "rckpt codec: %s: %s\n", argv[1], rckpt_strerror(rc));
		return 1;
	}
	return 0;
}

int rckpt_cli_codec(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	(void)conn; /* local files only */
	if (cli_wants_help(argc, argv)) {
		usage();
		return 0;
	}
	if (argc < 2)
		return usage_error("missing subcommand (encode, decode, inspect)");
	if (strcmp(argv[1], "encode") == 0)
		return cmd_encode(argc - 1, argv + 1);
	if (strcmp(argv[1], "decode") == 0)
		return cmd_decode(argc - 1, argv + 1);
	if (strcmp(argv[1], "inspect") == 0)
		return cmd_inspect(argc - 1, argv + 1);
	return usage_error("unknown subcommand");
}
