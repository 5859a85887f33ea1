/*
 * rckpt_cli.h — the commands of `rckpt` and what they share (cli_util.c).
 * The command is built on librckpt's public headers only: rckpt.h, and
 * rckpt_files.h for local files. Exit status: 0 success, 1 the operation
 * failed, 2 bad usage.
 */
#ifndef RCKPT_CLI_H
#define RCKPT_CLI_H

#include <stdint.h>

#include "rckpt.h"

#define EXIT_USAGE 2

/* Output formats (--format): the tables, or JSON like `ceph -f`. */
#define CLI_FORMAT_PLAIN 0
#define CLI_FORMAT_JSON 1
#define CLI_FORMAT_JSON_PRETTY 2

/* What the global options set: the connection, first, so that commands
 * get &opts.conn, and the output format (cli_format). */
typedef struct cli_opts {
	rckpt_connect_opts_t conn;
	int format;
} cli_opts_t;

/* The --format of the options whose conn this is. */
static inline int cli_format(const rckpt_connect_opts_t *conn)
{
	return ((const cli_opts_t *)(const void *)conn)->format;
}

/* A command: argv[0] is its name; conn the global connection options. */
typedef int (*rckpt_cli_fn)(int argc, char **argv, const rckpt_connect_opts_t *conn);

int rckpt_cli_status(int argc, char **argv, const rckpt_connect_opts_t *conn);  /* rckpt_cli.c */
int rckpt_cli_call(int argc, char **argv, const rckpt_connect_opts_t *conn);    /* rckpt_cli.c */
int rckpt_cli_version(int argc, char **argv, const rckpt_connect_opts_t *conn); /* rckpt_cli.c */
int rckpt_cli_codec(int argc, char **argv, const rckpt_connect_opts_t *conn);   /* rckpt_cli_codec.c */
int rckpt_cli_ckpt(int argc, char **argv, const rckpt_connect_opts_t *conn);    /* rckpt_cli_ckpt.c */
int rckpt_cli_compact(int argc, char **argv, const rckpt_connect_opts_t *conn); /* rckpt_cli_ckpt.c */
int rckpt_cli_pcr(int argc, char **argv, const rckpt_connect_opts_t *conn);     /* rckpt_cli_pcr.c */
int rckpt_cli_bench(int argc, char **argv, const rckpt_connect_opts_t *conn);   /* rckpt_cli_bench.c */

/* ---- cli_util.c ---- */

struct json_t;
/* Prints j (a jansson value; its reference is taken) in conn's format,
 * one document and a newline on stdout: 0, or 1 when it cannot. */
int cli_json_out(struct json_t *j, const rckpt_connect_opts_t *conn);

/* "rckpt CMD: WHAT; try 'rckpt CMD --help'" on stderr; EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *what);
/* A getopt_long error of subcommand `sub` of CMD (c: ':' for an option
 * missing its value, else an unknown one; at: optind), naming the option:
 * on stderr; EXIT_USAGE. Option strings start with ':' for it. */
int cli_option_error(const char *cmd, const char *sub, int c, char **argv, int at);
/* Prints the help of subcommand SUB of command CMD out of CMD's whole
 * help text (its synopsis, its paragraph, the global options' note), so
 * that `rckpt CMD SUB --help` and `rckpt CMD --help` say the same. 0, or
 * -1 when text has no such subcommand. */
int cli_sub_help(const char *text, const char *cmd, const char *sub);
/* True when argv[1..] asks for help. */
int cli_wants_help(int argc, char **argv);
/* A decimal number, all of s: 0, or -1. */
int cli_parse_u64(const char *s, uint64_t *v);
/* The step number of a file: the last run of digits in its name, or dflt. */
uint64_t cli_step_of(const char *path, uint64_t dflt);
/* Whether path is a checkpoint's sibling, not a checkpoint:
 * X.grads.safetensors (read as X's gradient RMS), X.gmean.safetensors and
 * X.optim.safetensors; a glob that names them among checkpoints means no
 * harm. */
int cli_is_sibling(const char *path);
/* (Time: rckpt_now_s, formats/rckpt_clock.h.) */

/* A handle connected with conn, or NULL with the reason on stderr
 * ("rckpt CMD: ..."). */
rckpt_t *cli_connect(const rckpt_connect_opts_t *conn, const char *cmd);
/* The same, then job `job` opened with jo; 0 or the error (reported). */
int cli_open_job(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *cmd,
		 const char *job, const rckpt_job_opts_t *jo);

#endif /* RCKPT_CLI_H */
