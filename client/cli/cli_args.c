/*
 * cli_args.c — the arguments of `rckpt` (cli.h): names, help
 * requests, numbers, step numbers and siblings of checkpoint files, and
 * the connection the global options ask for.
 */
#define _GNU_SOURCE /* getopt_long */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_RULE "1..63 characters of A-Z a-z 0-9 . _ -, the first not . or -"

int cli_check_name(const char *cmd, const char *opt, const char *name)
{
	size_t n = strlen(name), i;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!isalnum(c) || c >= 0x80)
			if (c != '.' && c != '_' && c != '-')
				break;
	}
	if (n == 0)
		return cli_usage_errorf(cmd, "%s is empty: a name is " NAME_RULE, opt);
	if (i < n) {
		const unsigned char c = (unsigned char)name[i];
		char what[16];
		if (c < 0x80 && isprint(c))
			snprintf(what, sizeof(what), "'%c'", c);
		else
			snprintf(what, sizeof(what), "byte 0x%02x", c);
		return cli_usage_errorf(cmd, "%s '%s': %s is not allowed in a name (" NAME_RULE ")", opt, name,
					what);
	}
	if (name[0] == '.' || name[0] == '-')
		return cli_usage_errorf(cmd, "%s '%s': a name may not begin with '%c' (" NAME_RULE ")", opt, name,
					name[0]);
	if (n > CLI_NAME_MAX)
		return cli_usage_errorf(cmd, "%s '%s': %zu characters, a name has at most %d (" NAME_RULE ")", opt,
					name, n, CLI_NAME_MAX);
	return 0;
}

int cli_wants_help(int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return 1;
	return 0;
}

int cli_parse_opts(const char *cmd, const cli_opt_t *opts, int argc, char **argv)
{
	struct option lo[CLI_OPTS_MAX + 1];
	char shorts[2 + 2 * CLI_OPTS_MAX + 1] = "+:";
	size_t n, k = 2, i;
	int c;

	memset(lo, 0, sizeof(lo));
	for (n = 0; opts[n].name && n < CLI_OPTS_MAX; n++) {
		lo[n].name = opts[n].name;
		lo[n].has_arg = opts[n].value ? required_argument : no_argument;
		lo[n].val = 256 + (int)n;
		if (opts[n].letter) {
			shorts[k++] = opts[n].letter;
			if (opts[n].value)
				shorts[k++] = ':';
		}
	}
	shorts[k] = '\0';
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		for (i = 0; i < n && c != 256 + (int)i && c != opts[i].letter; i++)
			;
		if (i < n && opts[i].value)
			*opts[i].value = optarg;
		else if (i < n)
			*opts[i].flag = 1;
		else if (c == ':')
			return -cli_usage_errorf(NULL, "%s: option '%s' needs a value", cmd, argv[optind - 1]);
		else
			return -cli_usage_errorf(NULL, "%s: bad option '%s'", cmd, argv[optind - 1]);
	}
	return optind;
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
					   ".optim.safetensors", ".state" };
	size_t n = strlen(path), k;
	for (k = 0; k < sizeof(sib) / sizeof(sib[0]); k++)
		if (n >= strlen(sib[k]) && strcmp(path + n - strlen(sib[k]), sib[k]) == 0)
			return 1;
	return 0;
}

rckpt_t *cli_connect(const rckpt_connect_opts_t *conn, const char *cmd)
{
	rckpt_t *h;
	int rc;
	if (conn->conf_path && cli_check_file(cmd, conn->conf_path))
		return NULL; /* --conf names a directory, a FIFO, a missing file */
	rc = rckpt_create(&h);
	if (rc) {
		cli_err(cmd, rc, "%s", rckpt_strerror(rc));
		return NULL;
	}
	if ((rc = rckpt_connect(h, conn)) != 0) {
		cli_err(cmd, rc, "%s", rckpt_errmsg(h));
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
		cli_err(cmd, rc, "%s", rckpt_errmsg(*h));
		rckpt_destroy(*h);
		*h = NULL;
	}
	return rc;
}

int cli_dispatch(const cli_cmd_t *cmd, int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	char list[256] = "";
	size_t k, len = 0;
	int i;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			if (i < 2 || argv[1][0] == '-' || cli_cmd_help(cmd, argv[1])) {
				cli_cmd_help(cmd, NULL);
				printf("\nGlobal options (--conf, --id/--user, --pool, --timeout, --read-from, "
				       "--format)\ngo before '%s' or after the subcommand.\n", cmd->name);
			}
			return 0;
		}
	if (argc >= 2) {
		for (k = 0; k < cmd->nsubs; k++)
			if (strcmp(argv[1], cmd->subs[k].name) == 0)
				return cmd->subs[k].fn(argc - 1, argv + 1, conn);
		return cli_usage_errorf(cmd->name, "unknown subcommand '%s'", argv[1]);
	}
	for (k = 0; k < cmd->nsubs && len < sizeof(list); k++) {
		const int w = snprintf(list + len, sizeof(list) - len, "%s%s", k ? ", " : "", cmd->subs[k].name);
		len += w > 0 ? (size_t)w : 0;
	}
	return cli_usage_errorf(cmd->name, "missing subcommand (%s)", list);
}
