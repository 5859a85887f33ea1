/*
 * cli_pcr_util.c — what the subcommands of `rckpt pcr` share
 * (cli_pcr.h): usage errors, numbers, the connection. The floor of the
 * pcr files: it calls none of them.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_pcr.h"

int pcr_usage_error(const char *what)
{
	return cli_usage_error("pcr", what);
}

int pcr_parse_uint(const char *s, unsigned max, unsigned *v)
{
	char *end;
	unsigned long x;
	errno = 0;
	if (!isdigit((unsigned char)s[0]))
		return -1;
	x = strtoul(s, &end, 10);
	if (errno || *end || x > max)
		return -1;
	*v = (unsigned)x;
	return 0;
}

rckpt_t *pcr_connect(const rckpt_connect_opts_t *conn)
{
	return cli_connect(conn, "pcr");
}
