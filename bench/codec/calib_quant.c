/*
 * calib_quant.c — one checkpoint through the codec under many fixed
 * configurations, each decoded back to fp32, for bench/codec/calibrate.py to
 * judge by the model's real held-out loss.
 *
 * usage: calib_quant [--grads G.safetensors] -o OUTDIR CKPT.safetensors < CONFIGS
 *
 * CONFIGS has one configuration a line, as rckpt codec prints them
 * ("bins=8 emb=16 prune=0.1 metric=sens protect=0.005"; keys left out keep
 * the library's defaults). For line i the checkpoint is encoded as a base
 * step in that configuration, decoded as a restore would, and written to
 * OUTDIR/cfg-NNNN.safetensors (fp32). One CSV line a configuration on
 * stdout: i, bytes of the records and manifest, fp32 bytes, the codec's
 * own quality loss of that configuration, and the configuration.
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rckpt.h"
#include "rckpt_ckenc.h"
#include "rckpt_safetensors.h"

static int usage(int code)
{
	fprintf(code ? stderr : stdout,
		"usage: calib_quant [--grads G.safetensors] -o OUTDIR CKPT.safetensors < CONFIGS\n"
		"  encodes CKPT as a base under each configuration of CONFIGS (one a line,\n"
		"  e.g. 'bins=8 emb=16 prune=0.1 metric=sens protect=0.005'), decodes it and\n"
		"  writes OUTDIR/cfg-NNNN.safetensors; prints 'csv:i,bytes,raw,quality,config'\n");
	return code;
}

/* Encodes p (and g) under c, decodes, writes path. */
static int one(const rckpt_tset_t *p, const rckpt_tset_t *g, const rckpt_qconfig_t *c, const char *path,
	       size_t *bytes, rckpt_ckenc_stats_t *st)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e = NULL;
	rckpt_ckenc_out_t out;
	rckpt_ckdec_t d;
	rckpt_ctensor_t *t = NULL;
	const uint8_t **recs = NULL;
	size_t *lens = NULL;
	char msg[256] = "";
	unsigned i;
	int rc;

	memset(&out, 0, sizeof(out));
	memset(&d, 0, sizeof(d));
	rckpt_ckenc_opts_default(&o);
	o.mode = RCKPT_CKENC_FIXED;
	o.fixed = *c;
	if ((rc = rckpt_ckenc_create(&e, &o)))
		goto out;
	if ((rc = rckpt_ckenc_step(e, &out, st, p, g, 1, msg, sizeof(msg)))) {
		fprintf(stderr, "calib_quant: %s%s%s\n", rckpt_strerror(rc), *msg ? ": " : "", msg);
		goto out;
	}
	recs = calloc(out.nchunks + 1, sizeof(*recs));
	lens = calloc(out.nchunks + 1, sizeof(*lens));
	t = calloc(p->ntensors + 1, sizeof(*t));
	if (!recs || !lens || !t) {
		rc = -ENOMEM;
		goto out;
	}
	*bytes = out.manifest.len;
	for (i = 0; i < out.nchunks; i++) {
		recs[i] = out.records[i].p;
		lens[i] = out.records[i].len;
		*bytes += lens[i];
	}
	if ((rc = rckpt_ckdec_step(&d, out.manifest.p, out.manifest.len, recs, lens)))
		goto out;
	for (i = 0; i < p->ntensors && rc == 0; i++) {
		float *f = malloc(4 * (p->t[i].n ? p->t[i].n : 1));
		t[i] = p->t[i];
		t[i].dtype = RCKPT_DT_F32;
		t[i].data = (const uint8_t *)f;
		rc = f ? rckpt_ckdec_tensor_f32(&d, i, f) : -ENOMEM;
	}
	if (rc == 0 && (rc = rckpt_st_write(path, t, p->ntensors)))
		fprintf(stderr, "calib_quant: writing %s: %s\n", path, rckpt_strerror(rc));
out:
	for (i = 0; t && i < p->ntensors; i++)
		free((void *)t[i].data);
	free(t);
	free(recs);
	free(lens);
	rckpt_ckdec_free(&d);
	rckpt_ckenc_out_free(&out);
	rckpt_ckenc_destroy(e);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "grads", 1, 0, 'g' }, { "out", 1, 0, 'o' },
					     { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	const char *gpath = NULL, *dir = NULL;
	rckpt_st_t p, g;
	char err[512], line[512], path[4096], cfg[160];
	unsigned n = 0;
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "g:o:h", lo, NULL)) != -1) {
		if (c == 'g')
			gpath = optarg;
		else if (c == 'o')
			dir = optarg;
		else
			return usage(c == 'h' ? 0 : 2);
	}
	if (dir == NULL || optind + 1 != argc)
		return usage(2);
	if (mkdir(dir, 0777) && errno != EEXIST) {
		fprintf(stderr, "calib_quant: cannot create %s: %s\n", dir, strerror(errno));
		return 1;
	}
	if (rckpt_st_read(&p, argv[optind], err, sizeof(err))) {
		fprintf(stderr, "calib_quant: %s\n", err);
		return 1;
	}
	if (gpath && rckpt_st_read(&g, gpath, err, sizeof(err))) {
		fprintf(stderr, "calib_quant: %s\n", err);
		rckpt_st_free(&p);
		return 1;
	}
	while (rc == 0 && fgets(line, sizeof(line), stdin)) {
		rckpt_qconfig_t q;
		rckpt_ckenc_stats_t st;
		size_t bytes = 0;
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0' || line[0] == '#')
			continue;
		rckpt_qconfig_default(&q);
		if (rckpt_qconfig_parse(&q, line)) {
			fprintf(stderr, "calib_quant: bad configuration '%s'\n", line);
			rc = -EINVAL;
			break;
		}
		snprintf(path, sizeof(path), "%s/cfg-%04u.safetensors", dir, n);
		if ((rc = one(&p.set, gpath ? &g.set : NULL, &q, path, &bytes, &st)))
			break;
		rckpt_qconfig_format(cfg, sizeof(cfg), &q);
		printf("csv:%u,%zu,%zu,%.6e,%s\n", n, bytes, st.raw_bytes, st.quality, cfg);
		fflush(stdout);
		n++;
	}
	if (gpath)
		rckpt_st_free(&g);
	rckpt_st_free(&p);
	return rc ? 1 : 0;
}
