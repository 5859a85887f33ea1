/*
 * cli.h — the commands of `rckpt` and what they share: the utility
 * layer (from the top down cli_args.c, cli_signals.c, cli_files.c,
 * cli_out.c, cli_progress.c, cli_lock.c), which calls nothing of the
 * commands' files. main (rckpt_cli.c) stands above the command groups.
 * The command is built on librckpt's public headers only: rckpt.h, and
 * rckpt_files.h for local files. Exit status: 0 success, 1 the operation
 * failed, 2 bad usage.
 */
#ifndef CLI_H
#define CLI_H

#include <stdint.h>

#include "rckpt.h"

#define EXIT_USAGE 2

/* A command: argv[0] is its name; conn the global connection options. */
typedef int (*rckpt_cli_fn)(int argc, char **argv, const rckpt_connect_opts_t *conn);

int rckpt_cli_status(int argc, char **argv, const rckpt_connect_opts_t *conn);  /* cli_status.c */
int rckpt_cli_call(int argc, char **argv, const rckpt_connect_opts_t *conn);    /* cli_call.c */
int rckpt_cli_version(int argc, char **argv, const rckpt_connect_opts_t *conn); /* rckpt_cli.c */
int rckpt_cli_codec(int argc, char **argv, const rckpt_connect_opts_t *conn);   /* rckpt_cli_codec.c */
int rckpt_cli_ckpt(int argc, char **argv, const rckpt_connect_opts_t *conn);    /* rckpt_cli_ckpt.c */
int rckpt_cli_compact(int argc, char **argv, const rckpt_connect_opts_t *conn); /* cli_ckpt_compact.c */
int rckpt_cli_pcr(int argc, char **argv, const rckpt_connect_opts_t *conn);     /* rckpt_cli_pcr.c */
int rckpt_cli_bench(int argc, char **argv, const rckpt_connect_opts_t *conn);   /* rckpt_cli_bench.c */

/* ---- the utility layer: it calls nothing above it ---- */

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* ---- cli_out.c: the output, errors, usage errors, subcommands' help ---- */

/* Output formats (--format): the tables, or JSON like `ceph -f`. */
#define CLI_FORMAT_PLAIN 0
#define CLI_FORMAT_JSON 1
#define CLI_FORMAT_JSON_PRETTY 2

/* What the global options set (main, rckpt_cli.c, fills it): the
 * connection, first, so that commands get &opts.conn, and the output
 * format (cli_format; cli_json_out reads it). */
typedef struct cli_opts {
	rckpt_connect_opts_t conn;
	int format;
} cli_opts_t;

/* The --format of the options whose conn this is. */
static inline int cli_format(const rckpt_connect_opts_t *conn)
{
	return ((const cli_opts_t *)(const void *)conn)->format;
}

struct json_t;
/* Prints j (a jansson value; its reference is taken) in conn's format,
 * one document and a newline on stdout: 0, or 1 when it cannot. */
int cli_json_out(struct json_t *j, const rckpt_connect_opts_t *conn);

/* Errors. Every failure goes through cli_err (or the usage errors below):
 * "rckpt CMD: MESSAGE" on stderr, one line (CMD NULL: "rckpt: MESSAGE").
 * The first of a run is kept: with --format json, cli_exit prints it on
 * stdout as {"error": MESSAGE, "code": NAME} (NAME: the errno's name,
 * "EISDIR", an RCKPT_E* code's, or the exit status as a number when code
 * is 0), unless the command printed its own document. code: a negative
 * errno or RCKPT_E* code, or 0. */
void cli_set_format(int format);
int cli_json_mode(void);
void cli_err(const char *cmd, int code, const char *fmt, ...) CLI_PRINTF(3, 4);
/* A remark on stderr, "rckpt CMD: MESSAGE", that is no failure. */
void cli_note(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
/* A field added to the error object (a save's committed steps); takes
 * the reference of v. */
void cli_err_detail(const char *key, struct json_t *v);
/* What main returns: status, after the error object when one is due. */
int cli_exit(int status);

/* "rckpt CMD: WHAT; try 'rckpt CMD --help'" on stderr (CMD NULL: "rckpt:
 * WHAT; try 'rckpt --help'"); EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *what);
/* The same, formatted. */
int cli_usage_errorf(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
/* A getopt_long error of subcommand `sub` of CMD (c: ':' for an option
 * missing its value, else an unknown one; at: optind), naming the option:
 * on stderr; EXIT_USAGE. Option strings start with ':' for it. */
int cli_option_error(const char *cmd, const char *sub, int c, char **argv, int at);

/* A command of subcommands (ckpt, pcr), as a table: each subcommand's
 * name, handler, synopsis (its options and operands; a newline starts a
 * line aligned under the first) and what it does (a newline starts a
 * line). Its help, the help of each subcommand and the manual pages
 * (make_man.py reads the help) all come from the table. */
typedef struct cli_sub {
	const char *name;
	rckpt_cli_fn fn;
	const char *synopsis;
	const char *text;
} cli_sub_t;
typedef struct cli_cmd {
	const char *name;
	const cli_sub_t *subs;
	size_t nsubs;
	const char *footer; /* the help's closing lines */
} cli_cmd_t;
/* argv[1] names one of cmd's subcommands, which runs with argv + 1. -h or
 * --help anywhere prints the help (or the named subcommand's); none, or
 * an unknown one, is a usage error that lists the names. An exit status.
 * cli_args.c. */
int cli_dispatch(const cli_cmd_t *cmd, int argc, char **argv, const rckpt_connect_opts_t *conn);
/* Prints cmd's help (sub NULL) or sub's: its synopsis and its paragraph.
 * 0, or -1 when cmd has no subcommand sub. */
int cli_cmd_help(const cli_cmd_t *cmd, const char *sub);

/* ---- cli_args.c: names, numbers, file names, the connection ---- */

/* Checks a job's or data set's name given with option OPT (--job, --to,
 * --dataset): 1..63 characters of [A-Za-z0-9._-], the first not . or -
 * (no . or .., nothing that reads as an option), the names a RADOS
 * namespace of the store may have. 0, or a usage error naming the rule
 * (EXIT_USAGE). */
#define CLI_NAME_MAX 63

/* "s" unless n is 1: "%u step%s" reads "1 step", "2 steps". */
static inline const char *cli_s(uint64_t n)
{
	return n == 1 ? "" : "s";
}
int cli_check_name(const char *cmd, const char *opt, const char *name);

/* True when argv[1..] asks for help. */
int cli_wants_help(int argc, char **argv);

/* An option of a command: --name (and -letter, if nonzero), which takes
 * a value (stored in *value) or is a flag (*flag set to 1). */
typedef struct cli_opt {
	const char *name;
	char letter;
	const char **value;
	int *flag;
} cli_opt_t;
#define CLI_OPTS_MAX 16
/* Parses the options of argv[1..] by opts (ended by a NULL name), up to
 * the first operand: its index, or -EXIT_USAGE after a usage error
 * ("CMD: option '--x' needs a value", "CMD: bad option '--y'"). */
int cli_parse_opts(const char *cmd, const cli_opt_t *opts, int argc, char **argv);
/* A decimal number, all of s: 0, or -1. */
int cli_parse_u64(const char *s, uint64_t *v);
/* The step number of a file: the last run of digits in its name, or dflt. */
uint64_t cli_step_of(const char *path, uint64_t dflt);
/* Whether path is a checkpoint's sibling, not a checkpoint:
 * X.grads.safetensors (read as X's gradient RMS), X.gmean.safetensors,
 * X.optim.safetensors and X.state (the step's attachment, as `ckpt
 * restore` writes it); a glob that names them among checkpoints means no
 * harm. */
int cli_is_sibling(const char *path);
/* (Time: rckpt_now_s, formats/rckpt_clock.h.) */

/* A handle connected with conn, or NULL with the reason on stderr
 * ("rckpt CMD: ..."). */
rckpt_t *cli_connect(const rckpt_connect_opts_t *conn, const char *cmd);
/* The same, then job `job` opened with jo; 0 or the error (reported). */
int cli_open_job(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *cmd,
		 const char *job, const rckpt_job_opts_t *jo);

/* ---- cli_files.c: files named on the command line, staged outputs ---- */

/* Files named on the command line, checked before any work: on failure
 * "rckpt CMD: PATH: WHAT IS WRONG" (cli_err) and a negative errno. */
/* An input file: exists, a regular file (a directory is -EISDIR; a FIFO,
 * a socket, a device -EINVAL, a FIFO never opened), readable. */
int cli_check_file(const char *cmd, const char *path);
/* The same, and a safetensors file whose header holds every tensor within
 * the file (rckpt_file_check): a truncated or foreign file is -EBADMSG. */
int cli_check_safetensors(const char *cmd, const char *path);
/* The same, flags as rckpt_file_check_flags's (RCKPT_FILE_ANY_DTYPE: the
 * dtypes files keep as they are too). */
int cli_check_safetensors_flags(const char *cmd, const char *path, unsigned flags);
/* An input directory: exists, a directory, readable. */
int cli_check_dir(const char *cmd, const char *path);
/* An output file: not a directory or special file; its directory exists
 * and may be written. It may exist (it is replaced, whole, at the end). */
int cli_check_out(const char *cmd, const char *path);
/* An output directory: a directory that may be written, or one that can
 * be made (its parent exists and may be written). */
int cli_check_out_dir(const char *cmd, const char *path);

/* Outputs written whole or not at all: each under a temporary name in its
 * own directory (DIR/.NAME.rckpt-PID.tmp), renamed into place by
 * cli_stage_commit, removed by cli_stage_abort, or by a SIGINT or SIGTERM
 * that ends the process (cli_signals_guard). */
#define CLI_STAGE_MAX 4
typedef struct cli_stage {
	char *final[CLI_STAGE_MAX];
	char *tmp[CLI_STAGE_MAX];
	unsigned n;
} cli_stage_t;
/* The temporary name to write `final` under (owned by st), or NULL (out
 * of memory, or more than CLI_STAGE_MAX). */
const char *cli_stage_add(cli_stage_t *st, const char *final);
/* Renames every temporary into place: 0 or the first -errno (reported;
 * the rest removed). Frees the names. */
int cli_stage_commit(cli_stage_t *st, const char *cmd);
/* Removes every temporary; frees the names. */
void cli_stage_abort(cli_stage_t *st);

/* ---- cli_signals.c ---- */

/* Signals. cli_signals_guard, before the command connects (librados'
 * threads inherit the mask): SIGINT and SIGTERM (those not ignored) go to
 * a thread of their own. There, a signal removes the staged temporaries
 * and ends the process (exit 130 for SIGINT, 143 for SIGTERM); when the
 * command holds a job's writer lock (cli_signals_job), the lock is
 * released first (rckpt_job_release, while a save may run). When that
 * fails, or while the command asked to finish first (cli_signals_defer:
 * the lock being taken), the signal is noted, said on stderr, and the
 * command stops at its next check of cli_interrupted(), closing the job
 * (the lock released) before it exits with cli_interrupt_status(). A
 * second signal ends the process at once. */
int cli_signals_guard(void);
void cli_signals_job(rckpt_job_t *j);
void cli_signals_defer(int on);
int cli_interrupted(void);
int cli_interrupt_status(void);

/* ---- cli_progress.c ---- */

/* Progress on a terminal: one line on stderr, redrawn in place (\r) at
 * most 4 times a second, cleared at the end; nothing when stderr is not a
 * terminal or the format is JSON. what: "saving"; totals 0 when not
 * known (no ETA then). cli_progress_item names what is under way
 * ("step 25"). cli_line prints a line on stdout without mixing it with
 * the progress line. */
void cli_progress_begin(const char *what, uint64_t total_items, const char *unit, uint64_t total_bytes);
void cli_progress_set(uint64_t items, uint64_t bytes);
void cli_progress_item(const char *fmt, ...) CLI_PRINTF(1, 2);
void cli_progress_end(void);
void cli_line(const char *fmt, ...) CLI_PRINTF(1, 2);

#endif /* CLI_H */
