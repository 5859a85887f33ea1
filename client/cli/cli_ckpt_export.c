/*
 * cli_ckpt_export.c — `rckpt ckpt export`: every step of a job (or of a dump) into files,
 * folded here without the OSDs' class.
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

#include "cli_ckpt.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"
#include "rckpt_buf.h"
#include "rckpt_store_wire.h" /* RCKPT_STORE_CHUNK_ELEMENTS_MAX */

/* ---- export ---- */

/* Writes every tensor of r to path (safetensors). */
static int write_all(const rckpt_restored_t *r, const char *path)
{
	const unsigned n = rckpt_restored_count(r);
	rckpt_tensor_t *t = calloc(n ? n : 1, sizeof(*t));
	uint8_t **bufs = calloc(n ? n : 1, sizeof(*bufs));
	unsigned i;
	int rc = t && bufs ? 0 : -ENOMEM;
	for (i = 0; i < n && rc == 0; i++) {
		size_t bytes;
		rckpt_restored_tensor(r, i, &t[i]);
		bytes = ckpt_tensor_bytes(&t[i]);
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

int ckpt_cmd_export(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },	{ "step", 1, 0, 's' },
					    { "output", 1, 0, 'o' },	{ "from-dump", 1, 0, 'd' },
					    { 0, 0, 0, 0 } };
	const char *job = NULL, *dir = NULL, *dump = NULL;
	uint64_t step = RCKPT_LATEST, after = RCKPT_LATEST, *list = NULL;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	unsigned done = 0, nlist = 0, k;
	size_t cap = 0;
	json_t *steps = json_array();
	char why[160];
	int c, rc = 0, more = 1, here = 0, made = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:o:d:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &step) || step == RCKPT_LATEST) {
				json_decref(steps);
				return ckpt_usage_error(STEP_RULE);
			}
			break;
		case 'o': dir = optarg; break;
		case 'd': dump = optarg; break;
		default: json_decref(steps); return cli_option_error("ckpt", "export", c, argv, optind);
		}
	}
	if (job == NULL || dir == NULL || optind != argc) {
		json_decref(steps);
		return ckpt_usage_error("export needs --job J and -o DIR, nothing else");
	}
	if (cli_check_name("ckpt", "--job", job)) {
		json_decref(steps);
		return EXIT_USAGE;
	}
	if ((dump && cli_check_file("ckpt", dump)) || cli_check_out_dir("ckpt", dir)) {
		json_decref(steps);
		return 1;
	}
	cli_signals_guard(); /* a signal removes the file being written, then ends it */
	/* the plugin-free path, whatever the OSDs have (RCKPT_FOLD, when
	 * set, says otherwise) */
	if (getenv("RCKPT_FOLD") == NULL)
		setenv("RCKPT_FOLD", "client", 1);
	if (dump) {
		if ((rc = rckpt_create(&h)) || (rc = rckpt_open_dump(h, dump))) {
			cli_err("ckpt", rc, "%s", h ? rckpt_errmsg(h) : rckpt_strerror(rc));
			goto out;
		}
		if ((rc = rckpt_job_open(h, &j, job, &jo))) {
			cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
			goto out;
		}
	} else if ((rc = ckpt_open_existing(&h, &j, conn, job, &jo))) {
		goto out;
	}
	if ((here = rckpt_job_folds_here(j, why, sizeof(why))) < 0) {
		rc = here;
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		goto out;
	}
	/* the steps first: a count for the progress line */
	while (step == RCKPT_LATEST && more) {
		rckpt_step_info_t si[64];
		unsigned n = 0;
		if ((rc = rckpt_job_steps(j, after, si, 64, &n, &more))) {
			cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
			goto out;
		}
		if (n) {
			uint64_t *p = rckpt_grow(list, &cap, (size_t)nlist + n, sizeof(*p));
			if (p == NULL) {
				rc = -ENOMEM;
				cli_err("ckpt", rc, "out of memory");
				goto out;
			}
			list = p;
		}
		for (k = 0; k < n; k++)
			list[nlist++] = after = si[k].step;
		if (n == 0)
			more = 0;
	}
	if (step != RCKPT_LATEST) {
		list = malloc(sizeof(*list));
		if (list == NULL) {
			rc = -ENOMEM;
			cli_err("ckpt", rc, "out of memory");
			goto out;
		}
		list[nlist++] = step;
	}
	if (nlist == 0) {
		rc = -ENOENT;
		cli_err("ckpt", rc, "job %s has no committed step in %s", job, dump ? dump : rckpt_pool_name(h));
		goto out;
	}
	if (mkdir(dir, 0777) == 0)
		made = 1;
	else if (errno != EEXIST) {
		rc = -errno;
		cli_err("ckpt", rc, "%s: cannot make it: %s", dir, strerror(errno));
		goto out;
	}
	if (!cli_json_mode())
		printf("exporting job %s from %s, %s%s%s\n", job, dump ? dump : rckpt_pool_name(h),
		       here == 1 ? "folding chains here (" : "folding chains in the OSDs", here == 1 ? why : "",
		       here == 1 ? ")" : "");
	fflush(stdout);
	cli_progress_begin("exporting", nlist, "steps", 0);
	for (k = 0; k < nlist && rc == 0; k++) {
		rckpt_restored_t *r = NULL;
		rckpt_restore_stats_t rs;
		cli_stage_t sg = { 0 };
		const char *tmp;
		char path[4096];
		snprintf(path, sizeof(path), "%s/step-%06" PRIu64 ".safetensors", dir, list[k]);
		cli_progress_item("step %" PRIu64, list[k]);
		if ((rc = rckpt_job_restore(j, list[k], &r, &rs))) {
			cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
			break;
		}
		if ((tmp = cli_stage_add(&sg, path)) == NULL)
			rc = -ENOMEM;
		else
			rc = write_all(r, tmp);
		if (rc)
			cli_err("ckpt", rc, "%s: cannot write it: %s", path, rckpt_strerror(rc));
		else if ((rc = cli_stage_commit(&sg, "ckpt")) == 0) {
			json_array_append_new(steps, json_pack("{s:I, s:f, s:s}", "step", (json_int_t)list[k], "seconds",
							       rs.seconds, "output", path));
			if (!cli_json_mode())
				cli_line("step %-8" PRIu64 " %.1f ms -> %s\n", list[k], rs.seconds * 1e3, path);
			done++;
		}
		cli_stage_abort(&sg);
		rckpt_restored_free(r);
		cli_progress_set(k + 1, 0);
	}
	cli_progress_end();
	if (rc == 0 && cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:s, s:s, s:b, s:O, s:i}", "job", job, "from",
					    dump ? dump : rckpt_pool_name(h), "dir", dir, "folded_here", here == 1, "steps",
					    steps, "exported", (int)done),
				  conn)
			     ? -EIO
			     : 0;
	else if (rc == 0)
		printf("exported %u step%s of job %s to %s\n", done, cli_s(done), job, dir);
out:
	if (rc && made && done == 0)
		rmdir(dir);
	if (rc)
		cli_err_detail("exported", json_incref(steps));
	json_decref(steps);
	free(list);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}
