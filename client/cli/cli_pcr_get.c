/*
 * cli_pcr_get.c — `rckpt pcr get`: a dataset's images, read through K
 * groups, written as JPEG files into a directory (cli_pcr.h).
 */
#define _GNU_SOURCE /* getopt_long */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include <unistd.h>

#include "cli_pcr.h"
#include "rckpt_buf.h"
#include "rckpt_clock.h" /* rckpt_now_s */

static int parse_ids(const char *s, uint32_t **ids, unsigned *n)
{
	size_t cap = 0;
	*ids = NULL;
	*n = 0;
	while (*s) {
		char *end;
		unsigned long v;
		errno = 0;
		if (!isdigit((unsigned char)*s))
			return -1;
		v = strtoul(s, &end, 10);
		if (errno || v > UINT32_MAX || (*end && *end != ','))
			return -1;
		uint32_t *p = rckpt_grow(*ids, &cap, (size_t)*n + 1, sizeof(*p));
		if (p == NULL)
			return -1;
		*ids = p;
		(*ids)[(*n)++] = (uint32_t)v;
		s = *end ? end + 1 : end;
	}
	return *n ? 0 : -1;
}

/* Writes the images of b into dir, each whole (a temporary renamed into
 * place) or not at all. */
static int write_batch(const rckpt_pcr_batch_t *b, const char *dir, uint64_t *bytes)
{
	unsigned i, n = rckpt_pcr_batch_count(b);
	for (i = 0; i < n; i++) {
		rckpt_pcr_image_t im;
		cli_stage_t sg = { 0 };
		const char *tmp;
		char path[4096];
		FILE *f = NULL;
		int rc = 0;
		rckpt_pcr_batch_image(b, i, &im);
		snprintf(path, sizeof(path), "%s/%s", dir, im.name);
		if ((tmp = cli_stage_add(&sg, path)) == NULL)
			rc = -ENOMEM;
		else if ((f = fopen(tmp, "wb")) == NULL)
			rc = -errno;
		else {
			if (fwrite(im.jpeg, 1, im.jpeg_len, f) != im.jpeg_len)
				rc = -errno ? -errno : -EIO;
			if (fclose(f) != 0 && rc == 0)
				rc = -errno;
		}
		if (rc) {
			cli_err("pcr", rc, "%s: cannot write it: %s", path, strerror(-rc));
			cli_stage_abort(&sg);
			return -1;
		}
		if (cli_stage_commit(&sg, "pcr"))
			return -1;
		*bytes += im.jpeg_len;
	}
	return 0;
}

int pcr_cmd_get(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "dataset", 1, 0, 'd' }, { "group", 1, 0, 'g' },
					    { "ids", 1, 0, 'i' },     { "out", 1, 0, 'o' },
					    { 0, 0, 0, 0 } };
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_read_stats_t rs;
	const char *dataset = NULL, *outdir = NULL;
	uint32_t *ids = NULL;
	unsigned nids = 0, images = 0;
	uint64_t written = 0;
	rckpt_pcr_t *d = NULL;
	rckpt_t *h = NULL;
	double t0;
	int c, rc = 0, ret = 1, made = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:g:i:o:", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			dataset = optarg;
			break;
		case 'g':
			if (strcmp(optarg, "all") == 0)
				o.groups = RCKPT_PCR_ALL;
			else if (pcr_parse_uint(optarg, RCKPT_PCR_GROUPS_MAX, &o.groups) || o.groups == 0)
				return pcr_usage_error("--group must be 1..64 or 'all'");
			break;
		case 'i':
			free(ids);
			if (parse_ids(optarg, &ids, &nids)) {
				free(ids);
				return pcr_usage_error("--ids must be a comma-separated list of image numbers");
			}
			break;
		case 'o':
			outdir = optarg;
			break;
		default:
			free(ids);
			return cli_option_error("pcr", "get", c, argv, optind);
		}
	}
	if (dataset == NULL || outdir == NULL || optind != argc) {
		free(ids);
		return pcr_usage_error("get needs --dataset D and --out DIR, nothing else");
	}
	if (cli_check_name("pcr", "--dataset", dataset)) {
		free(ids);
		return EXIT_USAGE;
	}
	if (cli_check_out_dir("pcr", outdir)) {
		free(ids);
		return 1;
	}
	cli_signals_guard(); /* a signal removes the image being written, then ends it */
	if (mkdir(outdir, 0777) == 0)
		made = 1; /* removed again if nothing lands in it */
	else if (errno != EEXIST) {
		cli_err("pcr", -errno, "%s: %s", outdir, strerror(errno));
		free(ids);
		return 1;
	}
	if ((h = pcr_connect(conn)) == NULL)
		goto out;
	if ((rc = rckpt_pcr_open(h, &d, dataset, &o)))
		goto fail;
	t0 = rckpt_now_s();
	if (ids) {
		rckpt_pcr_batch_t *b;
		if ((rc = rckpt_pcr_fetch(d, ids, nids, &b)))
			goto fail;
		images = rckpt_pcr_batch_count(b);
		rc = write_batch(b, outdir, &written);
		rckpt_pcr_batch_free(b);
		if (rc)
			goto out;
	} else {
		for (;;) {
			rckpt_pcr_batch_t *b;
			if ((rc = rckpt_pcr_next(d, &b)))
				goto fail;
			if (b == NULL)
				break;
			images += rckpt_pcr_batch_count(b);
			rc = write_batch(b, outdir, &written);
			rckpt_pcr_batch_free(b);
			if (rc)
				goto out;
		}
	}
	rckpt_pcr_read_stats(d, &rs);
	{
		double dt = rckpt_now_s() - t0;
		char g[16];
		snprintf(g, sizeof(g), o.groups == RCKPT_PCR_ALL ? "all" : "%u", o.groups);
		if (cli_json_mode()) {
			ret = cli_json_out(json_pack("{s:s, s:s, s:i, s:s, s:I, s:I, s:I, s:f}", "dataset", dataset,
						     "group", g, "images", (int)images, "dir", outdir, "wire_bytes",
						     (json_int_t)rs.wire_bytes, "reads", (json_int_t)rs.reads,
						     "written_bytes", (json_int_t)written, "seconds", dt),
					   conn);
			goto out;
		}
		printf("%u images at group %s into %s: %.2f MB read in %" PRIu64 " reads, %.2f MB of JPEG "
		       "written, %.2f s, %.0f images/s\n",
		       images, g, outdir, rs.wire_bytes / 1e6, rs.reads, written / 1e6, dt,
		       dt > 0 ? images / dt : 0);
	}
	ret = 0;
	goto out;
fail:
	cli_err("pcr", rc, "%s", rckpt_errmsg(h));
out:
	if (ret && made)
		rmdir(outdir); /* only if empty */
	free(ids);
	rckpt_pcr_close(d);
	rckpt_destroy(h);
	return ret;
}
