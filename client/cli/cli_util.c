/*
 * cli_util.c — what the commands of `rckpt` share (rckpt_cli.h).
 */
#define _GNU_SOURCE /* memmem */
#include "rckpt_cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

int cli_json_out(json_t *j, const rckpt_connect_opts_t *conn)
{
	const size_t flags = JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER |
			     (cli_format(conn) == CLI_FORMAT_JSON_PRETTY ? JSON_INDENT(4) : JSON_COMPACT);
	int rc;
	if (j == NULL) {
		fprintf(stderr, "rckpt: out of memory\n");
		return 1;
	}
	rc = json_dumpf(j, stdout, flags);
	json_decref(j);
	if (rc == 0)
		putchar('\n');
	return rc ? 1 : 0;
}

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

/* Prints the lines of text [a, b). */
static void put_lines(const char *a, const char *b)
{
	fwrite(a, 1, (size_t)(b - a), stdout);
}

/* The end of the line at p (after its newline). */
static const char *line_end(const char *p)
{
	const char *e = strchr(p, '\n');
	return e ? e + 1 : p + strlen(p);
}

int cli_sub_help(const char *text, const char *cmd, const char *sub)
{
	char key[64];
	const char *p, *e, *desc = NULL, *syn = NULL;
	size_t sl = strlen(sub);
	int n;
	n = snprintf(key, sizeof(key), " %s %s ", cmd, sub);
	if (n < 0 || (size_t)n >= sizeof(key))
		return -1;
	/* its synopsis: the usage line naming "CMD SUB", with the lines
	 * continuing it (deeper indented, starting with '[') */
	for (p = text; *p; p = line_end(p)) {
		e = line_end(p);
		if (syn == NULL && memmem(p, (size_t)(e - p), key, strlen(key)) != NULL)
			syn = p;
		/* its description: the paragraph starting "SUB " at column 0 */
		if (desc == NULL && strncmp(p, sub, sl) == 0 && p[sl] == ' ')
			desc = p;
	}
	if (syn == NULL || desc == NULL)
		return -1;
	e = line_end(syn);
	fputs("usage: ", stdout);
	while (*syn == ' ')
		syn++;
	if (strncmp(syn, "usage: ", 7) == 0)
		syn += 7;
	for (;;) {
		const char *q = e;
		while (*q == ' ')
			q++;
		if (*q != '[' || q - e < 8)
			break;
		e = line_end(e);
	}
	put_lines(syn, e);
	fputc('\n', stdout);
	for (e = line_end(desc); *e == ' '; e = line_end(e))
		;
	put_lines(desc, e);
	/* the closing lines (global options) */
	if ((p = strstr(text, "\nGlobal options")) != NULL) {
		fputc('\n', stdout);
		put_lines(p + 1, line_end(line_end(p + 1)));
	}
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
