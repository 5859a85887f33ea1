/*
 * cli_pcr.h — what the files of `rckpt pcr` share (rckpt_cli_pcr.c): the
 * subcommands the table dispatches to, and the helpers they have in
 * common. Internal to the CLI.
 */
#ifndef CLI_PCR_H
#define CLI_PCR_H

#include "cli.h"

/* The subcommands: argv[0] is the subcommand's name; an exit status. */
int pcr_cmd_build(int argc, char **argv, const rckpt_connect_opts_t *conn);  /* cli_pcr_build.c */
int pcr_cmd_get(int argc, char **argv, const rckpt_connect_opts_t *conn);    /* cli_pcr_get.c */
int pcr_cmd_verify(int argc, char **argv, const rckpt_connect_opts_t *conn); /* cli_pcr_verify.c */
int pcr_cmd_ls(int argc, char **argv, const rckpt_connect_opts_t *conn);     /* cli_pcr_info.c */
int pcr_cmd_stat(int argc, char **argv, const rckpt_connect_opts_t *conn);   /* cli_pcr_info.c */
int pcr_cmd_rm(int argc, char **argv, const rckpt_connect_opts_t *conn);     /* cli_pcr_info.c */

/* "pcr: WHAT" and the usage exit status. */
int pcr_usage_error(const char *what);
/* A decimal number, all of s, at most max: 0 (*v set), or -1. */
int pcr_parse_uint(const char *s, unsigned max, unsigned *v);
/* A handle connected with conn, or NULL with the reason on stderr. */
rckpt_t *pcr_connect(const rckpt_connect_opts_t *conn);

#endif
