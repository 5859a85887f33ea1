/*
 * cli_ckpt.h — what the files of `rckpt ckpt` share (rckpt_cli_ckpt.c):
 * the subcommands the table dispatches to, and the helpers they have in
 * common. Internal to the CLI.
 */
#ifndef CLI_CKPT_H
#define CLI_CKPT_H

#include <jansson.h>
#include <stdint.h>

#include "cli.h"

#define STEP_RULE "--step must be a whole number 0..18446744073709551614 (a step)"

/* The writer options of save, rewind and gc, for a getopt_long table
 * (handled by ckpt_writer_opt). */
#define WRITER_LONGOPTS { "takeover", 0, 0, 'K' }, { "no-takeover", 0, 0, 'k' }, { "wait", 1, 0, 'w' }

/* The subcommands: argv[0] is the subcommand's name; an exit status. */
int ckpt_cmd_save(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_restore(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_export(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_ls(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_jobs(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_compact(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_pin(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_rewind(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_branch(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_verify(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_gc(int argc, char **argv, const rckpt_connect_opts_t *conn);
int ckpt_cmd_rm(int argc, char **argv, const rckpt_connect_opts_t *conn);

/* "ckpt: WHAT" and the usage exit status. */
int ckpt_usage_error(const char *what);
/* 1 when getopt's c was a writer option (jo set), -1 a bad value (said),
 * 0 not one. */
int ckpt_writer_opt(int c, rckpt_job_opts_t *jo);
/* X.SUFFIX beside X.safetensors (or beside X), malloc'd. */
char *ckpt_sibling(const char *path, const char *suffix);
uint64_t ckpt_size_of(const char *path); /* 0 when it cannot be stat'ed */
int ckpt_exists(const char *path);       /* lstat: a dangling link exists */
int ckpt_open_job(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *job,
		  const rckpt_job_opts_t *jo);
/* The same for a job that must exist already (then opened with jo when
 * given): says so and fails (-ENOENT) for a missing one. */
int ckpt_open_existing(rckpt_t **h, rckpt_job_t **j, const rckpt_connect_opts_t *conn, const char *job,
		       const rckpt_job_opts_t *jo);
void ckpt_close_job(rckpt_t *h, rckpt_job_t *j);
/* The bytes a tensor of d's shape and dtype holds. */
size_t ckpt_tensor_bytes(const rckpt_tensor_t *d);
/* After a signal stopped a command: says so; the exit status (130, 143). */
int ckpt_interrupted(const char *what);

/* A compaction's line and its JSON object (ckpt compact, rckpt compact). */
void ckpt_print_compact(const char *job, const rckpt_compact_stats_t *cs);
json_t *ckpt_compact_json(const char *job, const rckpt_compact_stats_t *cs);

/* Options shared by the housekeeping commands (cli_ckpt_admin.c, verify):
 * --job, --step, --upto, --keep-last, --keep-every, --off, --deep, ... */
typedef struct admin_opts {
	const char *job, *branch, *to;
	uint64_t step, upto;
	int have_step, have_upto, off, have_policy, deep, exact;
	rckpt_retention_t pol;
	rckpt_job_opts_t jo; /* the writer options (allowed 'K') */
} admin_opts_t;
/* Parses them (only the options whose letters `allowed` lists) for
 * subcommand `what`: 0, or a usage error's exit status (EXIT_USAGE). */
int ckpt_admin_parse(int argc, char **argv, admin_opts_t *a, const char *allowed, const char *what);

#endif
