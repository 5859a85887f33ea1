/*
 * cli_pcr_info.c — `rckpt pcr ls | stat | rm`: the pool's datasets, one
 * dataset's groups, and deleting one (cli_pcr.h).
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <jansson.h>

#include "cli_pcr.h"

static int dataset_only(int argc, char **argv, const char *sub, const char *what, const char **dataset)
{
	static const struct option lo[] = { { "dataset", 1, 0, 'd' }, { 0, 0, 0, 0 } };
	int c;
	optind = 1;
	opterr = 0;
	*dataset = NULL;
	while ((c = getopt_long(argc, argv, ":d:", lo, NULL)) != -1) {
		if (c != 'd')
			return cli_option_error("pcr", sub, c, argv, optind);
		*dataset = optarg;
	}
	if (*dataset == NULL || optind != argc)
		return pcr_usage_error(what);
	if (cli_check_name("pcr", "--dataset", *dataset))
		return EXIT_USAGE;
	return 0;
}

int pcr_cmd_stat(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	rckpt_pcr_info_t in;
	const char *dataset;
	rckpt_pcr_t *d = NULL;
	rckpt_t *h;
	uint64_t total = 0, cum;
	unsigned g;
	int rc;

	if ((rc = dataset_only(argc, argv, "stat", "stat needs --dataset D, nothing else", &dataset)))
		return rc;
	if ((h = pcr_connect(conn)) == NULL)
		return 1;
	if ((rc = rckpt_pcr_open(h, &d, dataset, NULL))) {
		cli_err("pcr", rc, "%s", rckpt_errmsg(h));
		rckpt_destroy(h);
		return 1;
	}
	rckpt_pcr_info(d, &in);
	total = in.head_bytes;
	for (g = 0; g < in.groups; g++)
		total += in.group_bytes[g];
	if (cli_format(conn) != CLI_FORMAT_PLAIN) {
		json_t *o = json_object(), *gs = json_array();
		cum = in.head_bytes;
		for (g = 0; g < in.groups; g++) {
			cum += in.group_bytes[g];
			json_array_append_new(
				gs, json_pack("{s:i, s:I, s:I, s:I, s:o}", "group", (int)g + 1, "images",
					      (json_int_t)in.group_images[g], "bytes", (json_int_t)in.group_bytes[g],
					      "read_through_bytes", (json_int_t)cum, "mssim",
					      in.mssim[g] < -0.5 ? json_null() : json_real(in.mssim[g])));
		}
		json_object_set_new(o, "dataset", json_string(dataset));
		json_object_set_new(o, "images", json_integer(in.images));
		json_object_set_new(o, "records", json_integer(in.records));
		json_object_set_new(o, "created", json_integer((json_int_t)in.created));
		json_object_set_new(o, "stored_bytes", json_integer((json_int_t)total));
		json_object_set_new(o, "head_bytes", json_integer((json_int_t)in.head_bytes));
		json_object_set_new(o, "source_bytes", json_integer((json_int_t)in.source_bytes));
		json_object_set_new(o, "fidelity_sample", json_integer(in.fidelity_sample));
		json_object_set_new(o, "groups", gs);
		rckpt_pcr_close(d);
		rckpt_destroy(h);
		return cli_json_out(o, conn);
	}
	printf("dataset %s: %" PRIu32 " images in %" PRIu32 " records, %u groups\n", dataset, in.images,
	       in.records, in.groups);
	printf("stored %" PRIu64 " bytes (heads %" PRIu64 ") for %" PRIu64 " bytes of source JPEG (%.3fx)\n",
	       total, in.head_bytes, in.source_bytes, in.source_bytes ? (double)total / in.source_bytes : 0);
	printf("fidelity: mean SSIM (per channel) against all groups, on %" PRIu32 " sampled images\n",
	       in.fidelity_sample);
	printf("%5s %8s %14s %14s %8s %8s\n", "group", "images", "group bytes", "read through", "of all",
	       "MSSIM");
	cum = in.head_bytes;
	for (g = 0; g < in.groups; g++) {
		cum += in.group_bytes[g];
		printf("%5u %8" PRIu32 " %14" PRIu64 " %14" PRIu64 " %7.1f%% ", g + 1, in.group_images[g],
		       in.group_bytes[g], cum, total ? 100.0 * cum / total : 0);
		if (in.mssim[g] < -0.5 && in.fidelity_sample == 0)
			printf("%8s\n", "-");
		else
			printf("%8.4f\n", in.mssim[g]);
	}
	rckpt_pcr_close(d);
	rckpt_destroy(h);
	return 0;
}

int pcr_cmd_ls(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	char **names = NULL, pool[256];
	unsigned n = 0, i;
	rckpt_t *h;
	const int json = cli_format(conn) != CLI_FORMAT_PLAIN;
	json_t *all = NULL;
	int rc;

	(void)argv;
	if (argc != 1)
		return pcr_usage_error("ls takes no arguments");
	if ((h = pcr_connect(conn)) == NULL)
		return 1;
	if ((rc = rckpt_pcr_datasets(h, &names, &n))) {
		cli_err("pcr", rc, "%s", rckpt_errmsg(h));
		rckpt_destroy(h);
		return 1;
	}
	snprintf(pool, sizeof(pool), "%s", rckpt_pool_name(h));
	if (json && (all = json_array()) == NULL)
		return 1;
	if (!json)
		printf("%-24s %10s %8s %7s %14s\n", "dataset", "images", "records", "groups", "bytes");
	for (i = 0; i < n; i++) {
		rckpt_pcr_t *d;
		rckpt_pcr_info_t in;
		uint64_t total;
		unsigned g;
		if (rckpt_pcr_open(h, &d, names[i], NULL)) {
			if (json)
				json_array_append_new(all, json_pack("{s:s, s:s}", "dataset", names[i], "error",
								     rckpt_errmsg(h)));
			else
				printf("%-24s (index unreadable: %s)\n", names[i], rckpt_errmsg(h));
			continue;
		}
		rckpt_pcr_info(d, &in);
		total = in.head_bytes;
		for (g = 0; g < in.groups; g++)
			total += in.group_bytes[g];
		if (json)
			json_array_append_new(all, json_pack("{s:s, s:I, s:I, s:i, s:I}", "dataset", names[i], "images",
							     (json_int_t)in.images, "records", (json_int_t)in.records,
							     "groups", (int)in.groups, "stored_bytes", (json_int_t)total));
		else
			printf("%-24s %10" PRIu32 " %8" PRIu32 " %7u %14" PRIu64 "\n", names[i], in.images,
			       in.records, in.groups, total);
		rckpt_pcr_close(d);
	}
	rckpt_jobs_free(names, n);
	rckpt_destroy(h);
	if (json)
		return cli_json_out(json_pack("{s:s, s:o}", "pool", pool, "datasets", all), conn);
	printf("%u dataset(s)\n", n);
	return 0;
}

int pcr_cmd_rm(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	const char *dataset;
	rckpt_t *h;
	int rc;

	if ((rc = dataset_only(argc, argv, "rm", "rm needs --dataset D, nothing else", &dataset)))
		return rc;
	if ((h = pcr_connect(conn)) == NULL)
		return 1;
	rc = rckpt_pcr_delete(h, dataset);
	if (rc)
		cli_err("pcr", rc, "%s", rckpt_errmsg(h));
	else if (cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:b}", "dataset", dataset, "deleted", 1), conn) ? -EIO : 0;
	else
		printf("deleted dataset %s\n", dataset);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}
