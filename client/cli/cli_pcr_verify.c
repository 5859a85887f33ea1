/*
 * cli_pcr_verify.c — `rckpt pcr verify`: a dataset's images, decoded at
 * every group, against the build's source files (cli_pcr.h).
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <turbojpeg.h>

#include "cli_pcr.h"

int pcr_cmd_verify(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "dataset", 1, 0, 'd' }, { "threads", 1, 0, 't' },
					    { 0, 0, 0, 0 } };
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	const char *dataset = NULL, *dir;
	unsigned images = 0, bad = 0;
	rckpt_pcr_t *d = NULL;
	rckpt_t *h = NULL;
	tjhandle th = NULL;
	int c, rc = 0, ret = 1;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:t:", lo, NULL)) != -1) {
		if (c == 'd')
			dataset = optarg;
		else if (c == 't') {
			if (pcr_parse_uint(optarg, 64, &o.threads) || o.threads == 0)
				return pcr_usage_error("--threads must be a whole number 1..64");
		} else
			return cli_option_error("pcr", "verify", c, argv, optind);
	}
	if (dataset == NULL || optind + 1 != argc)
		return pcr_usage_error("verify needs --dataset D and one DIR");
	dir = argv[optind];
	if (cli_check_name("pcr", "--dataset", dataset))
		return EXIT_USAGE;
	if (cli_check_dir("pcr", dir))
		return 1;
	o.output = RCKPT_PCR_RGB;
	if ((th = tjInitDecompress()) == NULL || (h = pcr_connect(conn)) == NULL)
		goto out;
	if ((rc = rckpt_pcr_open(h, &d, dataset, &o))) {
		cli_err("pcr", rc, "%s", rckpt_errmsg(h));
		goto out;
	}
	for (;;) {
		rckpt_pcr_batch_t *b;
		unsigned i, n;
		if ((rc = rckpt_pcr_next(d, &b))) {
			cli_err("pcr", rc, "%s", rckpt_errmsg(h));
			goto out;
		}
		if (b == NULL)
			break;
		n = rckpt_pcr_batch_count(b);
		for (i = 0; i < n; i++) {
			rckpt_pcr_image_t im;
			char path[4096];
			unsigned char *src = NULL, *px = NULL;
			long len;
			int w, hh, sub, cs, same = 0;
			FILE *f;
			rckpt_pcr_batch_image(b, i, &im);
			snprintf(path, sizeof(path), "%s/%s", dir, im.name);
			images++;
			if ((f = fopen(path, "rb")) != NULL && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 &&
			    fseek(f, 0, SEEK_SET) == 0 && (src = malloc((size_t)len)) != NULL &&
			    fread(src, 1, (size_t)len, f) == (size_t)len &&
			    tjDecompressHeader3(th, src, (unsigned long)len, &w, &hh, &sub, &cs) == 0 &&
			    (unsigned)w == im.width && (unsigned)hh == im.height &&
			    (px = malloc((size_t)w * hh * 3)) != NULL &&
			    tjDecompress2(th, src, (unsigned long)len, px, w, 0, hh, TJPF_RGB, 0) == 0)
				same = memcmp(px, im.rgb, (size_t)w * hh * 3) == 0;
			if (f)
				fclose(f);
			free(src);
			free(px);
			if (!same) {
				cli_err("pcr", -EBADMSG, "image %u (%s) differs from %s", im.id, im.name, path);
				bad++;
			}
		}
		rckpt_pcr_batch_free(b);
	}
	if (cli_json_mode()) {
		if (cli_json_out(json_pack("{s:s, s:s, s:i, s:i, s:i, s:b}", "dataset", dataset, "dir", dir, "images",
					   (int)images, "identical", (int)(images - bad), "different", (int)bad, "ok",
					   bad == 0),
				 conn) == 0)
			ret = bad ? 1 : 0;
		goto out;
	}
	printf("verified %u images of %s against %s: %u identical, %u different\n", images, dataset, dir,
	       images - bad, bad);
	ret = bad ? 1 : 0;
out:
	if (th)
		tjDestroy(th);
	rckpt_pcr_close(d);
	rckpt_destroy(h);
	return ret;
}
