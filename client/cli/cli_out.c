/*
 * cli_out.c — the output of `rckpt` (cli.h): JSON
 * documents, errors and notes, the error document and the exit status,
 * usage and option errors, a subcommand's help.
 */
#define _GNU_SOURCE /* memmem, strerrorname_np */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli_lock.h"

/* Under the lock (cli_lock.c). */
static int g_json_done; /* a document is on stdout */
static int g_have_err, g_code;
static char g_msg[1024];
static json_t *g_extra;

int cli_json_due(void)
{
	return cli_json_mode() && !g_json_done;
}

/* A JSON string of s, which may not be UTF-8 (a file name): bytes that
 * are not become '?'. */
static json_t *json_text(const char *s)
{
	json_t *j = json_string(s);
	char *c;
	size_t i;
	if (j || (c = strdup(s)) == NULL)
		return j;
	for (i = 0; c[i]; i++)
		if ((unsigned char)c[i] >= 0x80 || (unsigned char)c[i] < 0x20)
			c[i] = '?';
	j = json_string(c);
	free(c);
	return j;
}

int cli_json_out(json_t *j, const rckpt_connect_opts_t *conn)
{
	const size_t flags = JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER |
			     (cli_format(conn) == CLI_FORMAT_JSON_PRETTY ? JSON_INDENT(4) : JSON_COMPACT);
	int rc;
	if (j == NULL) {
		cli_err(NULL, -ENOMEM, "out of memory");
		return 1;
	}
	cli_lock();
	cli_progress_clear_locked();
	rc = json_dumpf(j, stdout, flags);
	json_decref(j);
	if (rc == 0) {
		putchar('\n');
		g_json_done = 1;
	}
	fflush(stdout);
	cli_unlock();
	return rc ? 1 : 0;
}

/* Keeps the run's first error (the lock held). */
static void keep_error_locked(int code, const char *msg)
{
	if (g_have_err)
		return;
	g_have_err = 1;
	g_code = code;
	snprintf(g_msg, sizeof(g_msg), "%s", msg);
}

void cli_err(const char *cmd, int code, const char *fmt, ...)
{
	char m[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	cli_lock();
	cli_progress_clear_locked();
	if (cmd)
		fprintf(stderr, "rckpt %s: %s\n", cmd, m);
	else
		fprintf(stderr, "rckpt: %s\n", m);
	keep_error_locked(code, m);
	cli_unlock();
}

void cli_note(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	cli_lock();
	cli_progress_clear_locked();
	fprintf(stderr, "rckpt %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	cli_unlock();
}

void cli_err_detail(const char *key, json_t *v)
{
	cli_lock();
	if (g_extra == NULL)
		g_extra = json_object();
	if (g_extra && v)
		json_object_set(g_extra, key, v);
	json_decref(v);
	cli_unlock();
}

/* The name of an error code: "ENOENT", "RCKPT_ECHECKSUM", or NULL. */
static const char *code_name(int code)
{
	if (code == RCKPT_ECHECKSUM)
		return "RCKPT_ECHECKSUM";
	if (code == RCKPT_EVERSION)
		return "RCKPT_EVERSION";
	return code < 0 ? strerrorname_np(-code) : NULL;
}

int cli_exit(int status)
{
	if (status != 0 && cli_json_mode() && !g_json_done) {
		json_t *o = json_object();
		const char *name = code_name(g_code);
		json_object_set_new(o, "error", json_text(g_have_err ? g_msg : "failed"));
		json_object_set_new(o, "code", name ? json_string(name)
						    : json_integer(g_code ? g_code : status));
		if (g_extra)
			json_object_update(o, g_extra);
		cli_lock();
		cli_progress_clear_locked();
		if (json_dumpf(o, stdout, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER | JSON_COMPACT) == 0)
			putchar('\n');
		fflush(stdout);
		cli_unlock();
		json_decref(o);
	}
	json_decref(g_extra);
	g_extra = NULL;
	fflush(stdout);
	return status;
}

int cli_usage_error(const char *cmd, const char *what)
{
	cli_lock();
	if (cmd)
		fprintf(stderr, "rckpt %s: %s; try 'rckpt %s --help'\n", cmd, what, cmd);
	else
		fprintf(stderr, "rckpt: %s; try 'rckpt --help'\n", what);
	keep_error_locked(-EINVAL, what);
	cli_unlock();
	return EXIT_USAGE;
}

int cli_usage_errorf(const char *cmd, const char *fmt, ...)
{
	char m[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	return cli_usage_error(cmd, m);
}

int cli_option_error(const char *cmd, const char *sub, int c, char **argv, int at)
{
	const char *opt = at > 0 ? argv[at - 1] : "?";
	if (c == ':')
		return cli_usage_errorf(cmd, "option '%s' of %s needs a value", opt, sub);
	return cli_usage_errorf(cmd, "%s takes no option '%s'", sub, opt);
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
	char key[64], key2[64];
	const char *p, *e, *desc = NULL, *syn = NULL;
	size_t sl = strlen(sub);
	int n;
	n = snprintf(key, sizeof(key), " %s %s ", cmd, sub);
	if (n < 0 || (size_t)n >= sizeof(key))
		return -1;
	snprintf(key2, sizeof(key2), " %s %s\n", cmd, sub); /* one with no options */
	/* its synopsis: the usage line naming "CMD SUB", with the lines
	 * continuing it (deeper indented, starting with '[') */
	for (p = text; *p; p = line_end(p)) {
		e = line_end(p);
		if (syn == NULL && (memmem(p, (size_t)(e - p), key, strlen(key)) != NULL ||
				    memmem(p, (size_t)(e - p), key2, strlen(key2)) != NULL))
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
