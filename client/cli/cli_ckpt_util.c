/*
 * cli_ckpt_util.c — what the subcommands of `rckpt ckpt` share
 * (cli_ckpt.h): usage errors and the writer options, siblings of a
 * model file, opening and closing a job, the message after a signal. The
 * floor of the ckpt files: it calls none of them.
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

int ckpt_usage_error(const char *what)
{
	return cli_usage_error("ckpt", what);
}

/* The writer options of save, rewind and gc (formats/store.md, "Takeover"):
 * 1 when c was one of them (jo set), -1 a bad value (said), 0 not one. */
int ckpt_writer_opt(int c, rckpt_job_opts_t *jo)
{
	uint64_t v;
	switch (c) {
	case 'K': jo->takeover = RCKPT_TAKEOVER_ALWAYS; return 1;
	case 'k': jo->takeover = RCKPT_TAKEOVER_NEVER; return 1;
	case 'w':
		if (cli_parse_u64(optarg, &v) || v > 86400) {
			cli_usage_error("ckpt", "--wait must be a whole number of seconds, 0..86400");
			return -1;
		}
		jo->wait_s = (unsigned)v;
		return 1;
	}
	return 0;
}

/* A sibling of a checkpoint file: X.SUFFIX beside X.safetensors (or
 * beside X when it has no such ending), malloc'd. */
char *ckpt_sibling(const char *path, const char *suffix)
{
	size_t l = strlen(path), cap = l + strlen(suffix) + 2;
	char *s = malloc(cap);
	if (s)
		snprintf(s, cap, "%.*s.%s", (int)(l > 12 && strcmp(path + l - 12, ".safetensors") == 0 ? l - 12 : l),
			 path, suffix);
	return s;
}

uint64_t ckpt_size_of(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

int ckpt_exists(const char *path)
{
	struct stat sb;
	return lstat(path, &sb) == 0;
}

int ckpt_open_job(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *job,
		    const rckpt_job_opts_t *jo)
{
	return cli_open_job(h, j, conn, "ckpt", job, jo);
}

/* Opens a job that must exist already: a command on a missing job (a typo)
 * says so and fails, as `pcr` does for a missing dataset. Checked before
 * a writer's open, which would create it. */
int ckpt_open_existing(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *job,
			 const rckpt_job_opts_t *jo)
{
	int rc, e;
	if ((rc = ckpt_open_job(h, j, conn, job, NULL)))
		return rc;
	e = rckpt_job_exists(*j);
	if (e != 1) {
		if (e == 0)
			cli_err("ckpt", -ENOENT, "job %s does not exist in pool %s ('rckpt ckpt jobs' lists them)",
				job, rckpt_pool_name(*h));
		else
			cli_err("ckpt", e, "%s", rckpt_errmsg(*h));
		rckpt_job_close(*j);
		rckpt_destroy(*h);
		*j = NULL;
		*h = NULL;
		return e == 0 ? -ENOENT : e;
	}
	if (jo == NULL)
		return 0;
	rckpt_job_close(*j);
	*j = NULL;
	if ((rc = rckpt_job_open(*h, j, job, jo))) {
		cli_err("ckpt", rc, "%s", rckpt_errmsg(*h));
		rckpt_destroy(*h);
		*h = NULL;
	}
	return rc;
}

/* Closes a job and its handle (first taking the job off the signal
 * thread's hands). */
void ckpt_close_job(rckpt_t *h, rckpt_job_t *j)
{
	cli_signals_job(NULL);
	rckpt_job_close(j);
	rckpt_destroy(h);
}

/* After a command stopped on a signal: says so (the lock is released by
 * now), and the exit status, 130 or 143. */
int ckpt_interrupted(const char *what)
{
	int s = cli_interrupted();
	cli_err("ckpt", -EINTR, "interrupted by %s: %s", s == SIGTERM ? "SIGTERM" : "SIGINT", what);
	return cli_interrupt_status();
}

size_t ckpt_tensor_bytes(const rckpt_tensor_t *d)
{
	uint64_t e = 1;
	unsigned k;
	for (k = 0; k < d->ndim; k++)
		e *= d->shape[k];
	return (size_t)e * rckpt_file_dtype_size(d->dtype);
}
