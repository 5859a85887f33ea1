/*
 * cli_ckpt_verify.c — `rckpt ckpt verify`: every stored record's CRC checked
 * in the OSDs, every manifest, and with --deep every step materialized.
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
#include "rckpt_store_wire.h" /* RCKPT_STORE_CHUNK_ELEMENTS_MAX */

int ckpt_cmd_verify(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	admin_opts_t a;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_verify_stats_t vs;
	const int json = cli_json_mode();
	json_t *o = NULL;
	int rc = ckpt_admin_parse(argc, argv, &a, "jD", "verify");
	if (rc)
		return rc;
	if (ckpt_open_existing(&h, &j, conn, a.job, NULL))
		return 1;
	rc = rckpt_job_verify(j, &vs);
	if ((rc == 0 || rc == RCKPT_ECHECKSUM) && json)
		o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}", "job", a.job, "pool", rckpt_pool_name(h),
			      "steps", (json_int_t)vs.steps, "records", (json_int_t)vs.records, "bytes_checked",
			      (json_int_t)vs.bytes, "bad", (json_int_t)vs.bad, "first_bad_step",
			      vs.first_bad_step == RCKPT_LATEST ? json_null() : json_integer((json_int_t)vs.first_bad_step),
			      "first_bad_chunk",
			      vs.first_bad_chunk == UINT_MAX ? json_null() : json_integer(vs.first_bad_chunk));
	else if (rc == 0 || rc == RCKPT_ECHECKSUM)
		printf("job %s: %" PRIu64 " steps, %" PRIu64 " records, %" PRIu64 " bytes checked, %" PRIu64
		       " bad\n",
		       a.job, vs.steps, vs.records, vs.bytes, vs.bad);
	if (rc)
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
	if (a.deep && (rc == 0 || rc == RCKPT_ECHECKSUM)) {
		/* every committed step, materialized in the OSDs and checked
		 * against its manifest's SHA-256 per chunk */
		rckpt_step_info_t si[256];
		uint64_t after = RCKPT_LATEST, done = 0, failed = 0;
		unsigned n = 0, i;
		int more = 1, r2 = 0;
		cli_progress_begin("materializing", vs.steps, "steps", 0);
		while (more && r2 == 0) {
			r2 = rckpt_job_steps(j, after, si, 256, &n, &more);
			for (i = 0; r2 == 0 && i < n; i++) {
				rckpt_restored_t *r = NULL;
				int r3;
				after = si[i].step;
				cli_progress_item("step %" PRIu64, si[i].step);
				if ((r3 = rckpt_job_restore_tensors(j, si[i].step, NULL, 0, &r, NULL)) != 0) {
					failed++;
					cli_err("ckpt", r3, "step %" PRIu64 ": %s", si[i].step, rckpt_errmsg(h));
				}
				rckpt_restored_free(r);
				cli_progress_set(++done, 0);
			}
			if (n == 0)
				break;
		}
		cli_progress_end();
		if (r2)
			cli_err("ckpt", r2, "%s", rckpt_errmsg(h));
		if (o)
			json_object_set_new(o, "deep", json_pack("{s:I, s:I}", "materialized", (json_int_t)done,
								 "failed", (json_int_t)failed));
		else
			printf("job %s: %" PRIu64 " steps materialized and checked (SHA-256), %" PRIu64
			       " failed\n",
			       a.job, done, failed);
		if (rc == 0 && (r2 || failed))
			rc = r2 ? r2 : RCKPT_ECHECKSUM;
	}
	rckpt_job_close(j);
	rckpt_destroy(h);
	if (o) {
		json_object_set_new(o, "ok", json_boolean(rc == 0));
		if (cli_json_out(o, conn))
			return 1;
	}
	return rc ? 1 : 0;
}
