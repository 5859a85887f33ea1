/*
 * cli_ckpt_restore.c — `rckpt ckpt restore`: one committed step, materialized in the OSDs,
 * into files.
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

/* ---- restore ---- */

/* Writes len bytes to path (a staged temporary): 0 or -errno. */
static int write_bytes(const char *path, const void *p, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc = 0;
	if (f == NULL)
		return -errno;
	if (len && fwrite(p, 1, len, f) != len)
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	return rc;
}

int ckpt_cmd_restore(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },
					    { "step", 1, 0, 's' },
					    { "output", 1, 0, 'o' },
					    { "tensors", 1, 0, 'T' },
					    { 0, 0, 0, 0 } };
	const char *job = NULL, *outp = NULL, *tlist = NULL, *tmodel, *topt = NULL, *tstate = NULL;
	char *tcopy = NULL, *names[4096], *optp = NULL, *statep = NULL;
	unsigned nnames = 0, nout = 0;
	uint64_t step = RCKPT_LATEST, total = 0, written = 0;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *r = NULL;
	rckpt_restore_stats_t rs;
	rckpt_tensor_t *t = NULL;
	cli_stage_t sg = { 0 };
	const void *att = NULL;
	size_t attlen = 0;
	uint8_t **bufs = NULL;
	unsigned i, n = 0, nopt = 0;
	int c, rc, here = 0, *opt = NULL, has_att = 0, stale_opt = 0, stale_state = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":j:s:o:T:", lo, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 'T': tlist = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, &step) || step == RCKPT_LATEST)
				return ckpt_usage_error(STEP_RULE);
			break;
		case 'o': outp = optarg; break;
		default: return cli_option_error("ckpt", "restore", c, argv, optind);
		}
	}
	if (job == NULL || outp == NULL || optind != argc)
		return ckpt_usage_error("restore needs --job J and -o OUT.safetensors, nothing else");
	if (cli_check_name("ckpt", "--job", job))
		return EXIT_USAGE;
	if (tlist) {
		char *tok, *save = NULL;
		if ((tcopy = strdup(tlist)) == NULL)
			return 1;
		for (tok = strtok_r(tcopy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (nnames == sizeof(names) / sizeof(names[0])) {
				free(tcopy);
				return ckpt_usage_error("--tensors names at most 4096 tensors");
			}
			names[nnames++] = tok;
		}
		if (nnames == 0) {
			free(tcopy);
			return ckpt_usage_error("--tensors needs names, comma-separated");
		}
	}
	/* the outputs, checked before anything is read: OUT and its siblings */
	optp = ckpt_sibling(outp, "optim.safetensors");
	statep = ckpt_sibling(outp, "state");
	if (optp == NULL || statep == NULL) {
		rc = -ENOMEM;
		cli_err("ckpt", rc, "out of memory");
		goto done;
	}
	if ((rc = cli_check_out("ckpt", outp)) || (rc = cli_check_out("ckpt", optp)) ||
	    (rc = cli_check_out("ckpt", statep)))
		goto done;
	cli_signals_guard(); /* a signal removes the temporaries, then ends it */
	if ((rc = ckpt_open_job(&h, &j, conn, job, NULL)))
		goto done;
	cli_progress_begin("restoring", 0, "", 0);
	if (step != RCKPT_LATEST)
		cli_progress_item("step %" PRIu64, step);
	rc = rckpt_job_restore_tensors(j, step, (const char *const *)names, nnames, &r, &rs);
	if (rc) {
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		goto done;
	}
	{
		char why[160];
		if ((here = rckpt_job_folds_here(j, why, sizeof(why))) == 1)
			cli_note("ckpt", "folded in the client (slower): %s", why);
	}
	n = rckpt_restored_count(r);
	t = calloc(n ? n : 1, sizeof(*t));
	bufs = calloc(n ? n : 1, sizeof(*bufs));
	opt = calloc(n ? n : 1, sizeof(*opt));
	rc = t && bufs && opt ? 0 : -ENOMEM;
	for (i = 0; i < n && rc == 0; i++) {
		rckpt_tensor_t d;
		unsigned k, want = nnames == 0;
		rckpt_restored_tensor(r, i, &d);
		for (k = 0; k < nnames && !want; k++)
			want = strcmp(names[k], d.name) == 0;
		if (want)
			total += ckpt_tensor_bytes(&d);
	}
	cli_progress_begin("restoring", n, "tensors", total);
	cli_progress_item("step %" PRIu64, rckpt_restored_step(r));
	for (i = 0; i < n && rc == 0; i++) {
		rckpt_tensor_t d;
		size_t bytes;
		unsigned k, want = nnames == 0;
		rckpt_restored_tensor(r, i, &d);
		for (k = 0; k < nnames && !want; k++)
			want = strcmp(names[k], d.name) == 0;
		if (!want)
			continue;
		bytes = ckpt_tensor_bytes(&d);
		t[nout] = d;
		bufs[nout] = malloc(bytes ? bytes : 1);
		rc = bufs[nout] ? rckpt_restored_read(r, i, bufs[nout], bytes) : -ENOMEM;
		t[nout].data = bufs[nout];
		opt[nout] = rckpt_restored_role(r, i) != RCKPT_ROLE_MODEL;
		nopt += opt[nout];
		nout++;
		cli_progress_set(i + 1, written += bytes);
	}
	if (rc) {
		cli_err("ckpt", rc, "reading the restored tensors: %s", rc == -ENOMEM ? "out of memory" : rckpt_strerror(rc));
		goto done;
	}
	has_att = rckpt_restored_attachment(r, &att, &attlen) == 0;
	/* every output under a temporary name, renamed into place at the end */
	if ((tmodel = cli_stage_add(&sg, outp)) == NULL || (nopt && (topt = cli_stage_add(&sg, optp)) == NULL) ||
	    (has_att && (tstate = cli_stage_add(&sg, statep)) == NULL)) {
		rc = -ENOMEM;
		cli_err("ckpt", rc, "out of memory");
		goto done;
	}
	/* the model's tensors to OUT, the optimizer's state to its sibling
	 * OUT.optim.safetensors (what `ckpt save` reads beside a model) */
	if (nopt) {
		rckpt_tensor_t *to = calloc(nopt, sizeof(*to));
		unsigned a = 0, b = 0;
		if (to == NULL) {
			rc = -ENOMEM;
			cli_err("ckpt", rc, "out of memory");
			goto done;
		}
		for (i = 0; i < nout; i++) {
			if (opt[i])
				to[b++] = t[i];
			else
				t[a++] = t[i];
		}
		rc = rckpt_file_write(topt, to, nopt);
		free(to);
		if (rc) {
			cli_err("ckpt", rc, "%s: cannot write it: %s", optp, rckpt_strerror(rc));
			goto done;
		}
	}
	if ((rc = rckpt_file_write(tmodel, t, nout - nopt))) {
		cli_err("ckpt", rc, "%s: cannot write it: %s", outp, rckpt_strerror(rc));
		goto done;
	}
	/* the attachment, as stored: the Python binding's plain data (the
	 * scheduler, RNG states, epoch, param groups of a nested state) */
	if (has_att && (rc = write_bytes(tstate, att, attlen))) {
		cli_err("ckpt", rc, "%s: cannot write it: %s", statep, strerror(-rc));
		goto done;
	}
	cli_progress_end();
	if ((rc = cli_stage_commit(&sg, "ckpt")))
		goto done;
	/* siblings of an earlier restore that this step does not have would
	 * be read beside OUT by a later save */
	stale_opt = !nopt && ckpt_exists(optp) && unlink(optp) == 0;
	stale_state = !has_att && ckpt_exists(statep) && unlink(statep) == 0;
	if (cli_json_mode()) {
		rc = cli_json_out(json_pack("{s:s, s:I, s:b, s:i, s:s, s:i, s:o, s:o, s:I, s:i, s:I, s:f, s:b}", "job",
					    job, "step", (json_int_t)rckpt_restored_step(r), "exact",
					    rckpt_restored_exact(r) != 0, "tensors", (int)(nout - nopt), "output", outp,
					    "optimizer_tensors", (int)nopt,
					    "optimizer_output", nopt ? json_string(optp) : json_null(), "state_output",
					    has_att ? json_string(statep) : json_null(), "state_bytes",
					    (json_int_t)(has_att ? attlen : 0), "materialize_calls",
					    here == 1 ? 0 : (int)rs.calls, "wire_bytes",
					    (json_int_t)(here == 1 ? 0 : rs.wire_bytes), "seconds", rs.seconds,
					    "folded_here", here == 1),
				  conn)
			     ? -EIO
			     : 0;
		goto done;
	}
	printf("restored step %" PRIu64 " of job %s%s: %u tensors, %u materialize calls, %" PRIu64
	       " bytes from the OSDs, %.1f ms -> %s\n",
	       rckpt_restored_step(r), job, rckpt_restored_exact(r) ? " (exact)" : "", nout,
	       here == 1 ? 0 : rs.calls, here == 1 ? 0 : rs.wire_bytes, rs.seconds * 1e3, outp);
	if (nopt)
		printf("  of which %u of the optimizer's state -> %s\n", nopt, optp);
	if (has_att)
		printf("  its attachment, the non-tensor state (scheduler, RNG, epoch, param groups: %zu bytes, "
		       "rckpt._plain.loads reads it) -> %s\n",
		       attlen, statep);
	if (stale_opt || stale_state)
		printf("  removed %s%s%s, from before: this step has none\n", stale_opt ? optp : "",
		       stale_opt && stale_state ? " and " : "", stale_state ? statep : "");
done:
	cli_progress_end();
	cli_stage_abort(&sg);
	for (i = 0; bufs && i < nout; i++)
		free(bufs[i]);
	free(tcopy);
	free(optp);
	free(statep);
	free(bufs);
	free(opt);
	free(t);
	rckpt_restored_free(r);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}
