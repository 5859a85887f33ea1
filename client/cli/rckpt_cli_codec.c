/*
 * rckpt_cli_codec.c — `rckpt codec encode | decode | inspect`: the
 * checkpoint codec on local files (safetensors in, step files out, and back).
 */
#define _GNU_SOURCE /* getopt_long */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rckpt.h"
#include "rckpt_ckenc.h"
#include "rckpt_safetensors.h"
#include "rckpt_stepfile.h"

#define EXIT_USAGE 2

int rckpt_cli_codec(int argc, char **argv);

static int usage_error(const char *what)
{
	fprintf(stderr, "rckpt codec: %s; try 'rckpt codec --help'\n", what);
	return EXIT_USAGE;
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

/* The step number of a file: the last run of digits in its name, or dflt. */
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
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e;
	const char *dir = NULL;
	size_t raw = 0, enc = 0;
	char *end;
	int c, i, rc = 0;

	rckpt_ckenc_opts_default(&o);
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
			o.mode = RCKPT_CKENC_FIXED;
			o.fixed.bins = (unsigned)strtoul(optarg, &end, 10);
			if (*end || o.fixed.bins < 1 || o.fixed.bins > 64)
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
		case ':':
			return usage_error("an option needs a value");
		default:
			return usage_error("unknown option");
		}
	}
	if (dir == NULL)
		return usage_error("encode needs -o DIR");
	if (optind >= argc)
		return usage_error("encode needs checkpoints");
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "rckpt codec: cannot create %s: %s\n", dir, strerror(errno));
		return 1;
	}
	if ((rc = rckpt_ckenc_create(&e, &o))) {
		fprintf(stderr, "rckpt codec: %s\n", rckpt_strerror(rc));
		return 1;
	}
	for (i = optind; i < argc && rc == 0; i++) {
		rckpt_st_t p, g;
		size_t al = strlen(argv[i]);
		/* X.grads.safetensors is read as X's gradients; it and the
		 * other siblings (.gmean., .optim.) named by a glob among the
		 * checkpoints mean no harm */
		if ((al >= 18 && strcmp(argv[i] + al - 18, ".grads.safetensors") == 0) ||
		    (al >= 18 && strcmp(argv[i] + al - 18, ".gmean.safetensors") == 0) ||
		    (al >= 18 && strcmp(argv[i] + al - 18, ".optim.safetensors") == 0))
			continue;
		rckpt_ckenc_out_t out;
		rckpt_ckenc_stats_t st;
		char err[512], msg[256], cfg[160], *gpath, *opath, *name = stem(argv[i]);
		int have_g;
		size_t l = strlen(argv[i]);

		memset(&out, 0, sizeof(out));
		gpath = malloc(l + 16);
		opath = malloc(strlen(dir) + (name ? strlen(name) : 0) + 16);
		if (!name || !gpath || !opath) {
			rc = -ENOMEM;
			break;
		}
		snprintf(gpath, l + 16, "%.*s.grads.safetensors",
			 (int)(l > 12 && strcmp(argv[i] + l - 12, ".safetensors") == 0 ? l - 12 : l), argv[i]);
		sprintf(opath, "%s/%s.rckpt", dir, name);
		if ((rc = rckpt_st_read(&p, argv[i], err, sizeof(err))) != 0) {
			fprintf(stderr, "rckpt codec: %s\n", err);
		} else {
			have_g = rckpt_st_read(&g, gpath, err, sizeof(err)) == 0;
			rc = rckpt_ckenc_step(e, &out, &st, &p, have_g ? &g : NULL,
					      step_of(argv[i], (uint64_t)(i - optind)), msg, sizeof(msg));
			if (rc)
				fprintf(stderr, "rckpt codec: %s: %s%s%s\n", argv[i], rckpt_strerror(rc),
					*msg ? ": " : "", msg);
			else if ((rc = rckpt_stepfile_write(opath, &out)))
				fprintf(stderr, "rckpt codec: writing %s: %s\n", opath, rckpt_strerror(rc));
			if (rc == 0) {
				rckpt_qconfig_format(cfg, sizeof(cfg), &st.config);
				printf("%s: %.2f MB -> %.1f kB (%.1fx), loss %.2e%s, %s%s -> %s\n", argv[i],
				       st.raw_bytes / 1e6, st.enc_bytes / 1e3,
				       (double)st.raw_bytes / (double)st.enc_bytes, st.quality,
				       st.accepted ? "" : " (over eps)", st.is_base ? "base, " : "", cfg, opath);
				fflush(stdout);
				raw += st.raw_bytes;
				enc += st.enc_bytes;
			}
			if (have_g)
				rckpt_st_free(&g);
			rckpt_st_free(&p);
		}
		rckpt_ckenc_out_free(&out);
		free(name);
		free(gpath);
		free(opath);
	}
	rckpt_ckenc_destroy(e);
	if (rc == 0 && enc)
		printf("total: %.2f MB -> %.1f kB (%.1fx)\n", raw / 1e6, enc / 1e3, (double)raw / (double)enc);
	return rc ? 1 : 0;
}

static int cmd_decode(int argc, char **argv)
{
	static const struct option lo[] = { { "out", 1, 0, 'o' }, { 0, 0, 0, 0 } };
	const char *outp = NULL;
	rckpt_ckdec_t d;
	int c, i, rc = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:o:", lo, NULL)) != -1) {
		if (c == 'o')
			outp = optarg;
		else
			return usage_error(c == ':' ? "-o needs a value" : "unknown option");
	}
	if (outp == NULL || optind >= argc)
		return usage_error("decode needs -o OUT.safetensors and step files");
	memset(&d, 0, sizeof(d));
	for (i = optind; i < argc && rc == 0; i++) {
		rckpt_stepfile_t f;
		if ((rc = rckpt_stepfile_read(&f, argv[i]))) {
			fprintf(stderr, "rckpt codec: %s: %s\n", argv[i], rckpt_strerror(rc));
			break;
		}
		rc = rckpt_ckdec_step(&d, f.manifest, f.mlen, f.records, f.lens);
		if (rc == -ESTALE)
			fprintf(stderr, "rckpt codec: %s is a delta of a step that is not the one before it "
					"in the chain (give the chain base first)\n",
				argv[i]);
		else if (rc)
			fprintf(stderr, "rckpt codec: %s: %s\n", argv[i], rckpt_strerror(rc));
		rckpt_stepfile_free(&f);
	}
	if (rc == 0) {
		rckpt_st_tensor_t *t = calloc(d.mf.ntensors ? d.mf.ntensors : 1, sizeof(*t));
		uint32_t k;
		for (k = 0; t && rc == 0 && k < d.mf.ntensors; k++) {
			const rckpt_mf_tensor_t *m = &d.mf.t[k];
			uint64_t n = 1;
			unsigned dd;
			float *f32;
			void *data;
			for (dd = 0; dd < m->ndim; dd++)
				n *= m->shape[dd];
			f32 = malloc(4 * (size_t)(n ? n : 1));
			data = malloc(rckpt_dtype_size(m->dtype) * (size_t)(n ? n : 1));
			if (!f32 || !data) {
				rc = -ENOMEM;
				break;
			}
			rc = rckpt_ckdec_tensor_f32(&d, k, f32);
			rckpt_narrow_from_f32(data, f32, m->dtype, n);
			free(f32);
			t[k].name = m->name;
			t[k].dtype = m->dtype;
			t[k].ndim = m->ndim;
			memcpy(t[k].shape, m->shape, sizeof(t[k].shape));
			t[k].n = n;
			t[k].data = data;
		}
		if (rc == 0 && t)
			rc = rckpt_st_write(outp, t, d.mf.ntensors);
		if (rc)
			fprintf(stderr, "rckpt codec: writing %s: %s\n", outp, rckpt_strerror(rc));
		else
			printf("step %llu: %u tensors -> %s\n", (unsigned long long)d.mf.step, d.mf.ntensors, outp);
		for (k = 0; t && k < d.mf.ntensors; k++)
			free((void *)t[k].data);
		free(t);
	}
	rckpt_ckdec_free(&d);
	return rc ? 1 : 0;
}

static int cmd_inspect(int argc, char **argv)
{
	static const char *const kinds[] = { "other", "embedding", "conv", "linear", "norm/bias" };
	static const char *const dtypes[] = { "?", "F32", "F16", "BF16" };
	rckpt_stepfile_t f;
	rckpt_manifest_t m;
	uint32_t i, k;
	int rc;

	if (argc != 2)
		return usage_error("inspect needs one step file");
	if ((rc = rckpt_stepfile_read(&f, argv[1])) || (rc = rckpt_manifest_decode(&m, f.manifest, f.mlen))) {
		fprintf(stderr, "rckpt codec: %s: %s\n", argv[1], rckpt_strerror(rc));
		if (f.buf)
			rckpt_stepfile_free(&f);
		return 1;
	}
	printf("step        %llu (%s%llu)\n", (unsigned long long)m.step,
	       m.parent == RCKPT_NO_PARENT ? "base" : "delta of step ",
	       m.parent == RCKPT_NO_PARENT ? 0ull : (unsigned long long)m.parent);
	printf("size        %.2f MB of fp32 -> %.1f kB (%.1fx), loss %.3e\n", m.raw_bytes / 1e6,
	       (m.enc_bytes + f.mlen) / 1e3, (double)m.raw_bytes / (double)(m.enc_bytes + f.mlen), m.quality);
	printf("config      bins=%u emb=%u prune=%g metric=%s protect=%g lambda=%g\n", m.cfg.bins,
	       m.cfg.emb_bins, (double)m.cfg.prune[3], m.cfg.metric ? "sens" : "mag", (double)m.cfg.protect,
	       (double)m.cfg.lambda);
	printf("chunks      %u of up to %llu elements\n", m.nchunks, (unsigned long long)m.chunk_params);
	for (i = 0; i < m.nchunks; i++) {
		printf("  chunk %-4u %10u elements %4u segments %10llu bytes  sha256 ", i, m.chunk[i].elements,
		       m.chunk[i].nseg, (unsigned long long)m.chunk[i].record_bytes);
		for (k = 0; k < 8; k++)
			printf("%02x", m.chunk[i].sha256[k]);
		printf("...\n");
	}
	printf("tensors     %u\n", m.ntensors);
	for (i = 0; i < m.ntensors; i++) {
		const rckpt_mf_tensor_t *t = &m.t[i];
		printf("  %-32s %-4s %-9s %-9s [", t->name, dtypes[t->dtype < 4 ? t->dtype : 0],
		       kinds[t->kind < 5 ? t->kind : 0], t->encoding == RCKPT_SEG_LOSSLESS ? "lossless" : "quantized");
		for (k = 0; k < t->ndim; k++)
			printf("%s%llu", k ? "," : "", (unsigned long long)t->shape[k]);
		printf("] in chunk%s", t->nseg > 1 ? "s" : "");
		for (k = 0; k < t->nseg; k++)
			printf(" %u", t->seg[k].chunk);
		printf("\n");
	}
	rckpt_manifest_free(&m);
	rckpt_stepfile_free(&f);
	return 0;
}

int rckpt_cli_codec(int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
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
