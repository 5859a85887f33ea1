/*
 * cli_util.c — what the commands of `rckpt` share (rckpt_cli.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "rckpt_cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *cmd, const char *what)
{
	fprintf(stderr, "rckpt %s: %s; try 'rckpt %s --help'\n", cmd, what, cmd);
	return EXIT_USAGE;
}

int cli_option_error(const char *cmd, const char *sub, int c, char **argv, int at)
{
	const char *opt = at > 0 ? argv[at - 1] : "?";
	if (c == ':')
		fprintf(stderr, "rckpt %s: option '%s' of %s needs a value; try 'rckpt %s --help'\n", cmd, opt, sub,
			cmd);
	else
		fprintf(stderr, "rckpt %s: %s takes no option '%s'; try 'rckpt %s --help'\n", cmd, sub, opt, cmd);
	return EXIT_USAGE;
}

int cli_wants_help(int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return 1;
	return 0;
}

int cli_parse_u64(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)s[0]))
		return -1;
	*v = strtoull(s, &end, 10);
	return errno || *end ? -1 : 0;
}

uint64_t cli_step_of(const char *path, uint64_t dflt)
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

int cli_is_sibling(const char *path)
{
	static const char *const sib[] = { ".grads.safetensors", ".gmean.safetensors",
					   ".optim.safetensors" };
	size_t n = strlen(path), k;
	for (k = 0; k < sizeof(sib) / sizeof(sib[0]); k++)
		if (n >= strlen(sib[k]) && strcmp(path + n - strlen(sib[k]), sib[k]) == 0)
			return 1;
	return 0;
}

rckpt_t *cli_connect(const rckpt_connect_opts_t *conn, const char *cmd)
{
	rckpt_t *h;
	int rc = rckpt_create(&h);
	if (rc) {
		fprintf(stderr, "rckpt %s: %s\n", cmd, rckpt_strerror(rc));
		return NULL;
	}
	if (rckpt_connect(h, conn)) {
		fprintf(stderr, "rckpt %s: %s\n", cmd, rckpt_errmsg(h));
		rckpt_destroy(h);
		return NULL;
	}
	return h;
}

int cli_open_job(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *cmd,
		 const char *job, const rckpt_job_opts_t *jo)
{
	int rc;
	*j = NULL;
	if ((*h = cli_connect(conn, cmd)) == NULL)
		return -ENOTCONN;
	if ((rc = rckpt_job_open(*h, j, job, jo))) {
		fprintf(stderr, "rckpt %s: %s\n", cmd, rckpt_errmsg(*h));
		rckpt_destroy(*h);
		*h = NULL;
	}
	return rc;
}
