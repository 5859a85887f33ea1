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

#include "cli_attach.h"
#include "cli_ckpt.h"
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

/* What a restore writes: the step's tensors, the model's and the
 * optimizer's (opt[i]), compressed ones read into bufs, exact ones in
 * place in the attachment; and the attachment itself. */
typedef struct rout {
	rckpt_tensor_t *t;
	uint8_t **bufs;
	int *opt;
	unsigned n, nopt, nexact, nbufs; /* t[0..nbufs) were read into bufs */
	uint64_t total;
	cli_exact_t *x; /* the attachment's exact tensors (cli_attach.h) */
	unsigned nx;
	const void *att; /* the attachment to write: as stored, or without them */
	size_t attlen;
	uint8_t *att2;
} rout_t;

static int wanted(char *const *names, unsigned nnames, const char *name)
{
	unsigned k;
	for (k = 0; k < nnames; k++)
		if (strcmp(names[k], name) == 0)
			return 1;
	return nnames == 0;
}

/* The names of --tensors that the step keeps exact in its attachment are
 * moved to the end of names: *nlib the others, which the library
 * restores (none: every tensor). 0, or an error (said). */
static int split_names(rckpt_job_t *j, rckpt_t *h, uint64_t *step, char **names, unsigned nnames, unsigned *nlib)
{
	size_t len = 0;
	uint8_t *att = NULL, *rest = NULL;
	cli_exact_t *x = NULL;
	unsigned nx = 0, i, k, m = 0;
	int unread = 0, rc = rckpt_job_attachment(j, step, NULL, 0, &len); /* the head pinned: *step */

	*nlib = nnames;
	if (rc == -ENOENT || (rc == 0 && len == 0))
		return 0; /* none: the library names a tensor the step lacks */
	if (rc == -ERANGE && (att = malloc(len)) != NULL)
		rc = rckpt_job_attachment(j, step, att, len, &len);
	if (rc == 0)
		rc = cli_attach_split(att, len, NULL, NULL, &x, &nx, &rest, &len, &unread);
	if (rc)
		cli_err("ckpt", rc, "%s", rc == -ENOMEM ? "out of memory" : rckpt_errmsg(h));
	for (i = 0; rc == 0 && i < nnames; i++) { /* stable: the others first */
		char *nm = names[i];
		for (k = 0; k < nx && strcmp(x[k].name, nm) != 0; k++)
			;
		if (k == nx) {
			memmove(names + m + 1, names + m, (i - m) * sizeof(*names));
			names[m++] = nm;
		}
	}
	*nlib = m;
	cli_exact_free(x, nx);
	free(rest);
	free(att);
	return rc;
}

typedef struct names {
	char *const *v;
	unsigned n;
} names_t;

static int want_name(void *arg, const char *name)
{
	const names_t *w = arg;
	return wanted(w->v, w->n, name);
}

/* Every wanted tensor of r into o: the compressed ones read, the exact
 * ones of its attachment (and the attachment without them: those not
 * wanted stay in it). */
static int collect(rout_t *o, rckpt_restored_t *r, char *const *names, unsigned nnames)
{
	const void *att = NULL;
	size_t attlen = 0;
	unsigned n = rckpt_restored_count(r), i;
	uint64_t written = 0;
	names_t nm = { names, nnames };
	int rc = 0, unread = 0;

	if (rckpt_restored_attachment(r, &att, &attlen) == 0) {
		o->att = att;
		o->attlen = attlen;
		if ((rc = cli_attach_split(att, attlen, want_name, &nm, &o->x, &o->nx, &o->att2, &attlen, &unread)))
			return rc;
		if (unread)
			cli_note("ckpt", "the step's attachment cannot be read here (malformed, or an integer past "
				 "64 bits): written as stored, its exact tensors in it");
		if (o->att2) {
			o->att = o->att2;
			o->attlen = attlen;
		}
	}
	o->t = calloc(n + o->nx + 1, sizeof(*o->t));
	o->bufs = calloc(n + 1, sizeof(*o->bufs));
	o->opt = calloc(n + o->nx + 1, sizeof(*o->opt));
	if (!o->t || !o->bufs || !o->opt)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		rckpt_tensor_t d;
		rckpt_restored_tensor(r, i, &d);
		if (wanted(names, nnames, d.name))
			o->total += ckpt_tensor_bytes(&d);
	}
	cli_progress_begin("restoring", n, "tensors", o->total);
	cli_progress_item("step %" PRIu64, rckpt_restored_step(r));
	for (i = 0; i < n && rc == 0; i++) {
		rckpt_tensor_t d;
		size_t bytes;
		rckpt_restored_tensor(r, i, &d);
		if (!wanted(names, nnames, d.name))
			continue;
		bytes = ckpt_tensor_bytes(&d);
		o->t[o->n] = d;
		o->bufs[o->n] = malloc(bytes ? bytes : 1);
		rc = o->bufs[o->n] ? rckpt_restored_read(r, i, o->bufs[o->n], bytes) : -ENOMEM;
		o->t[o->n].data = o->bufs[o->n];
		o->nbufs = o->n + 1;
		o->opt[o->n] = rckpt_restored_role(r, i) != RCKPT_ROLE_MODEL;
		o->nopt += o->opt[o->n];
		o->n++;
		cli_progress_set(i + 1, written += bytes);
	}
	for (i = 0; i < o->nx && rc == 0; i++) {
		if (!wanted(names, nnames, o->x[i].name))
			continue;
		o->t[o->n] = o->x[i].t;
		o->opt[o->n] = o->x[i].optim;
		o->nopt += o->opt[o->n];
		o->nexact++;
		o->n++;
	}
	return rc;
}

static void rout_free(rout_t *o)
{
	unsigned i;
	for (i = 0; o->bufs && i < o->nbufs; i++)
		free(o->bufs[i]);
	free(o->bufs);
	free(o->t);
	free(o->opt);
	free(o->att2);
	cli_exact_free(o->x, o->nx);
}

/* The model's tensors to outp, the optimizer's to optp, the attachment to
 * statep, each under a temporary name of sg. 0, or an error (said). */
static int write_outputs(rout_t *o, cli_stage_t *sg, const char *outp, const char *optp, const char *statep)
{
	const char *tmodel, *topt = NULL, *tstate = NULL;
	rckpt_tensor_t *to = NULL;
	unsigned a = 0, b = 0, i;
	int rc = 0;

	if ((tmodel = cli_stage_add(sg, outp)) == NULL || (o->nopt && (topt = cli_stage_add(sg, optp)) == NULL) ||
	    (o->att && (tstate = cli_stage_add(sg, statep)) == NULL) ||
	    (o->nopt && (to = calloc(o->nopt, sizeof(*to))) == NULL)) {
		cli_err("ckpt", -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	/* the model's tensors to OUT, the optimizer's state to its sibling
	 * OUT.optim.safetensors (what `ckpt save` reads beside a model) */
	for (i = 0; i < o->n; i++) {
		if (o->opt[i])
			to[b++] = o->t[i];
		else
			o->t[a++] = o->t[i];
	}
	if (o->nopt && (rc = rckpt_file_write(topt, to, o->nopt)))
		cli_err("ckpt", rc, "%s: cannot write it: %s", optp, rckpt_strerror(rc));
	else if ((rc = rckpt_file_write(tmodel, o->t, o->n - o->nopt)))
		cli_err("ckpt", rc, "%s: cannot write it: %s", outp, rckpt_strerror(rc));
	/* the attachment without the tensors put in the files: the Python
	 * binding's plain data (the scheduler, RNG states, epoch, param
	 * groups, the trainer's extra state) */
	else if (o->att && (rc = write_bytes(tstate, o->att, o->attlen)))
		cli_err("ckpt", rc, "%s: cannot write it: %s", statep, strerror(-rc));
	free(to);
	return rc;
}

int ckpt_cmd_restore(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' },
					    { "step", 1, 0, 's' },
					    { "output", 1, 0, 'o' },
					    { "tensors", 1, 0, 'T' },
					    { 0, 0, 0, 0 } };
	const char *job = NULL, *outp = NULL, *tlist = NULL;
	char *tcopy = NULL, *names[4096], *optp = NULL, *statep = NULL;
	unsigned nnames = 0, nlib = 0;
	uint64_t step = RCKPT_LATEST;
	rckpt_t *h = NULL;
	rckpt_job_t *j = NULL;
	rckpt_restored_t *r = NULL;
	rckpt_restore_stats_t rs;
	cli_stage_t sg = { 0 };
	rout_t o;
	int c, rc, here = 0, stale_opt = 0, stale_state = 0;

	memset(&o, 0, sizeof(o));
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
	if (nnames && (rc = split_names(j, h, &step, names, nnames, &nlib)))
		goto done;
	/* the tensors the library restores: those named but kept exact in the
	 * attachment (then every one, when only such are named) */
	rc = rckpt_job_restore_tensors(j, step, (const char *const *)names, nlib, &r, &rs);
	if (rc) {
		cli_err("ckpt", rc, "%s", rckpt_errmsg(h));
		goto done;
	}
	{
		char why[160];
		if ((here = rckpt_job_folds_here(j, why, sizeof(why))) == 1)
			cli_note("ckpt", "folded in the client (slower): %s", why);
	}
	if ((rc = collect(&o, r, names, nnames))) {
		cli_err("ckpt", rc, "reading the restored tensors: %s", rc == -ENOMEM ? "out of memory" : rckpt_strerror(rc));
		goto done;
	}
	/* every output under a temporary name, renamed into place at the end */
	if ((rc = write_outputs(&o, &sg, outp, optp, statep)))
		goto done;
	cli_progress_end();
	if ((rc = cli_stage_commit(&sg, "ckpt")))
		goto done;
	/* siblings of an earlier restore that this step does not have would
	 * be read beside OUT by a later save */
	stale_opt = !o.nopt && ckpt_exists(optp) && unlink(optp) == 0;
	stale_state = !o.att && ckpt_exists(statep) && unlink(statep) == 0;
	if (cli_json_mode()) {
		rc = cli_json_out(json_pack("{s:s, s:I, s:b, s:i, s:i, s:s, s:i, s:o, s:o, s:I, s:i, s:I, s:f, s:b}",
					    "job", job, "step", (json_int_t)rckpt_restored_step(r), "exact",
					    rckpt_restored_exact(r) != 0, "tensors", (int)(o.n - o.nopt),
					    "exact_tensors", (int)o.nexact, "output", outp, "optimizer_tensors",
					    (int)o.nopt, "optimizer_output", o.nopt ? json_string(optp) : json_null(),
					    "state_output", o.att ? json_string(statep) : json_null(), "state_bytes",
					    (json_int_t)(o.att ? o.attlen : 0), "materialize_calls",
					    here == 1 ? 0 : (int)rs.calls, "wire_bytes",
					    (json_int_t)(here == 1 ? 0 : rs.wire_bytes), "seconds", rs.seconds,
					    "folded_here", here == 1),
				  conn)
			     ? -EIO
			     : 0;
		goto done;
	}
	printf("restored step %" PRIu64 " of job %s%s: %u tensor%s, %u materialize calls, %" PRIu64
	       " bytes from the OSDs, %.1f ms -> %s\n",
	       rckpt_restored_step(r), job, rckpt_restored_exact(r) ? " (exact)" : "", o.n - o.nopt,
	       cli_s(o.n - o.nopt), here == 1 ? 0 : rs.calls, here == 1 ? 0 : rs.wire_bytes, rs.seconds * 1e3,
	       outp);
	if (o.nopt)
		printf("  and %u tensor%s of the optimizer's state -> %s\n", o.nopt, cli_s(o.nopt), optp);
	if (o.nexact)
		printf("  (%u of these stored exact: tensors the codec does not quantize)\n",
		       o.nexact);
	if (o.att)
		printf("  the step's other state (scheduler, RNG, epoch, param groups: %zu bytes, "
		       "rckpt._plain.loads reads it) -> %s\n",
		       o.attlen, statep);
	if (stale_opt || stale_state)
		printf("  removed %s%s%s, from before: this step has none\n", stale_opt ? optp : "",
		       stale_opt && stale_state ? " and " : "", stale_state ? statep : "");
done:
	cli_progress_end();
	cli_stage_abort(&sg);
	rout_free(&o);
	free(tcopy);
	free(optp);
	free(statep);
	rckpt_restored_free(r);
	rckpt_job_close(j);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}
