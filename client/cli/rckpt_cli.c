/*
 * rckpt_cli.c — the `rckpt` command: a thin layer over librckpt for
 * operators. Exit status: 0 success, 1 the operation failed, 2 bad usage.
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static void usage_main(FILE *f)
{
	fprintf(f,
		"usage: rckpt [options] COMMAND [ARGS]\n"
		"\n"
		"Compressed deep-learning checkpoints and training data on Ceph.\n"
		"\n"
		"commands:\n"
		"  status    connect; print the cluster, the pool and each plugin's version\n"
		"            as answered by the OSD\n"
		"  call      call a method of an object class on an object (diagnostics)\n"
		"  version   print this client's version and build features\n"
		"  codec     compress checkpoints in local safetensors files, and back\n"
		"  ckpt      save, restore, list, compact, verify and delete a training job's\n"
		"            checkpoints in the pool; list the pool's jobs\n"
		"  compact   compact every job of the pool under its policy (cron-friendly)\n"
		"  pcr       build, read, list and delete JPEG datasets stored as Progressive\n"
		"            Compressed Records\n"
		"  bench     run the benchmark suites against the cluster; write a report\n"
		"            with tables and plots ('bench compare A B': two reports)\n"
		"\n"
		"options:\n"
		"  -c, --conf PATH    ceph.conf (default: $CEPH_CONF, then Ceph's search path)\n"
		"  -i, --id NAME      cephx user (default: admin); --user is the same\n"
		"  -p, --pool NAME    pool (default: rckpt)\n"
		"  -t, --timeout S    seconds to wait for the cluster (default: 30)\n"
		"  --read-from WHERE  which copy of a replicated pool serves reads: balance\n"
		"                     (any replica; the default), primary, or localize (the\n"
		"                     replica nearest this client's crush_location)\n"
		"  -f, --format F     plain (default), json or json-pretty: every command's\n"
		"                     output as one JSON document on stdout (README \"JSON\n"
		"                     output\"); a failure as {\"error\": MESSAGE, \"code\": NAME},\n"
		"                     one line, with the same exit status\n"
		"  --version          this client's version (as 'rckpt version')\n"
		"  -h, --help         this text; 'rckpt COMMAND --help' for a command's\n"
		"Global options may also follow the command, in their long forms (and -p).\n"
		"Exit status: 0 success, 1 failure, 2 bad usage, 130 and 143 stopped by SIGINT\n"
		"and SIGTERM. Every file named is checked before any work. On a terminal, long\n"
		"commands show a progress line on stderr.\n");
}

/* ---- rckpt version ---- */

int rckpt_cli_version(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	rckpt_gpu_info_t gi;

	(void)conn;
	if (cli_wants_help(argc, argv)) {
		printf("usage: rckpt version\n\nPrint the client library's version and build features.\n");
		return 0;
	}
	if (argc > 1)
		return cli_usage_errorf(NULL, "version: unexpected argument '%s'", argv[1]);
	rckpt_gpu_info(&gi);
	if (cli_json_mode())
		return cli_json_out(json_pack("{s:s, s:i, s:{s:b, s:i, s:i, s:i, s:s}}", "version", rckpt_version_string(),
					      "version_number", (int)rckpt_version_number(), "gpu", "built_with_cuda",
					      gi.built_with_cuda, "runtime_version", gi.runtime_version,
					      "driver_version", gi.driver_version, "devices", gi.device_count,
					      "device_name", gi.device_count ? gi.device_name : ""),
				    conn);
	printf("librckpt %s\n", rckpt_version_string());
	if (!gi.built_with_cuda)
		printf("gpu       not built (no CUDA toolkit at build time)\n");
	else if (gi.device_count == 0)
		printf("gpu       CUDA runtime %d.%d; %s\n", gi.runtime_version / 1000,
		       gi.runtime_version % 1000 / 10,
		       gi.driver_version ? "no device" : "no CUDA driver on this machine");
	else
		printf("gpu       CUDA runtime %d.%d, %d device(s): %s\n", gi.runtime_version / 1000,
		       gi.runtime_version % 1000 / 10, gi.device_count, gi.device_name);
	return 0;
}

/* ---- main ---- */

static int parse_timeout(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > 3600 || s[0] == '-')
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* The index of v in the NULL-ended names, or -1. */
static int choice(const char *v, const char *const *names)
{
	int k;
	for (k = 0; names[k]; k++)
		if (strcmp(v, names[k]) == 0)
			return k;
	return -1;
}

/* Applies global option `which` (its short letter) with value v: 0, or
 * the exit status of a usage error. */
static int set_global(cli_opts_t *opts, int which, const char *v)
{
	/* indexes are the CLI_FORMAT_* and RCKPT_READ_* values */
	static const char *const formats[] = { "plain", "json", "json-pretty", NULL },
				 *const reads[] = { "balance", "primary", "localize", NULL };
	rckpt_connect_opts_t *conn = &opts->conn;
	int k;
	switch (which) {
	case 'f':
		if ((k = choice(v, formats)) < 0)
			return cli_usage_errorf(NULL, "--format must be plain, json or json-pretty, not '%s'", v);
		opts->format = k;
		cli_set_format(k);
		break;
	case 'c': conn->conf_path = v; break;
	case 'u':
	case 'i': conn->user = v; break;
	case 'p': conn->pool = v; break;
	case 't':
		if (parse_timeout(v, &conn->timeout_s))
			return cli_usage_errorf(NULL, "--timeout must be 1..3600 seconds, not '%s'", v);
		break;
	case 'R':
		if ((k = choice(v, reads)) < 0)
			return cli_usage_errorf(NULL, "--read-from must be balance, primary or localize, not '%s'", v);
		conn->read_from = (unsigned)k;
		break;
	}
	return 0;
}

/* Whether arg is a global option that may follow the command: its letter
 * (and *v its value when given as --opt=value), or 0. */
static int global_after(const char *arg, const char **v)
{
	static const struct {
		const char *name;
		int which;
	} g[] = { { "--conf", 'c' }, { "--user", 'u' },	     { "--id", 'i' },	     { "--pool", 'p' },
		  { "-p", 'p' },     { "--timeout", 't' }, { "--read-from", 'R' }, { "--format", 'f' } };
	size_t k;
	*v = NULL;
	for (k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		size_t n = strlen(g[k].name);
		if (strncmp(arg, g[k].name, n) == 0 && (arg[n] == '\0' || (arg[n] == '=' && arg[1] == '-'))) {
			if (arg[n] == '=')
				*v = arg + n + 1;
			return g[k].which;
		}
	}
	return 0;
}

/* The --format a run asks for, before the options are parsed, so that
 * an error among them is JSON too. */
static void prescan_format(int argc, char **argv)
{
	static const char *const formats[] = { "plain", "json", "json-pretty", NULL };
	int i, k;
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *v = NULL;
		if (strncmp(argv[i], "--format=", 9) == 0)
			v = argv[i] + 9;
		else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
			v = argv[i + 1];
		if (v && (k = choice(v, formats)) >= 0)
			cli_set_format(k);
	}
}

static int run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "user", required_argument, NULL, 'u' },
		{ "id", required_argument, NULL, 'i' },
		{ "pool", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "read-from", required_argument, NULL, 'R' },
		{ "version", no_argument, NULL, 'V' },
		{ "format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct command {
		const char *name;
		rckpt_cli_fn fn;
	} commands[] = {
		{ "status", rckpt_cli_status }, { "call", rckpt_cli_call },
		{ "version", rckpt_cli_version }, { "codec", rckpt_cli_codec },
		{ "ckpt", rckpt_cli_ckpt },	{ "compact", rckpt_cli_compact },
		{ "pcr", rckpt_cli_pcr },	{ "bench", rckpt_cli_bench },
	};
	cli_opts_t opts = { RCKPT_CONNECT_OPTS_INIT, CLI_FORMAT_PLAIN };
	rckpt_connect_opts_t *const conn = &opts.conn;
	size_t k;
	const char *cmd;
	int c, rc;

	/* A process that resumes from a long pause (SIGSTOP, a frozen VM)
	 * finds connections its peers closed meanwhile; librados writing to
	 * one must get EPIPE and reconnect, not kill the tool. */
	signal(SIGPIPE, SIG_IGN);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:c:u:i:p:t:f:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
		case 'u':
		case 'i':
		case 'p':
		case 't':
		case 'R':
		case 'f':
			if ((rc = set_global(&opts, c, optarg)) != 0)
				return rc;
			break;
		case 'V':
			return rckpt_cli_version(1, argv, conn);
		case 'h':
			usage_main(stdout);
			return 0;
		case ':':
			return cli_usage_errorf(NULL, "option '%s' needs a value", argv[optind - 1]);
		default:
			return cli_usage_errorf(NULL, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_errorf(NULL, "%s", "missing command");
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	/* The global options after the command too (`rckpt ckpt ls --job J
	 * --pool P`), long forms and -p: the subcommands' own short options
	 * use -c, -i and -t. Taken out before the command parses the rest;
	 * "--" ends them. */
	{
		int i, k = 1;
		for (i = 1; i < argc; i++) {
			const char *a = argv[i], *v = NULL;
			int which;
			if (strcmp(a, "--") == 0) {
				while (i < argc)
					argv[k++] = argv[i++];
				break;
			}
			which = global_after(a, &v);
			if (which == 0) {
				argv[k++] = argv[i];
				continue;
			}
			if (v == NULL) {
				if (i + 1 >= argc)
					return cli_usage_errorf(NULL, "option '%s' needs a value", a);
				v = argv[++i];
			}
			if ((c = set_global(&opts, which, v)) != 0)
				return c;
		}
		argv[k] = NULL;
		argc = k;
	}
	for (k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (strcmp(cmd, commands[k].name) == 0)
			return commands[k].fn(argc, argv, conn);
	if (strcmp(cmd, "help") == 0) {
		usage_main(stdout);
		return 0;
	}
	return cli_usage_errorf(NULL, "unknown command '%s'", cmd);
}

int main(int argc, char **argv)
{
	prescan_format(argc, argv);
	return cli_exit(run(argc, argv));
}
