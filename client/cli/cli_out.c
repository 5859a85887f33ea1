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
/* s, each line after the first indented by `indent` spaces. */
static void put_indented(const char *s, int indent)
{
	for (; *s; s++) {
		putchar(*s);
		if (*s == '\n' && s[1])
			printf("%*s", indent, "");
	}
}

static void put_synopsis(const cli_cmd_t *c, const cli_sub_t *s, const char *lead)
{
	int n = printf("%srckpt [options] %s %s%s", lead, c->name, s->name, *s->synopsis ? " " : "");
	put_indented(s->synopsis, n);
	putchar('\n');
}

static void put_paragraph(const cli_sub_t *s, int width)
{
	printf("%-*s", width, s->name);
	put_indented(s->text, width);
	putchar('\n');
}

int cli_cmd_help(const cli_cmd_t *c, const char *sub)
{
	int width = 0;
	size_t k;
	for (k = 0; k < c->nsubs; k++)
		if ((int)strlen(c->subs[k].name) + 2 > width)
			width = (int)strlen(c->subs[k].name) + 2;
	for (k = 0; sub && k < c->nsubs; k++)
		if (strcmp(c->subs[k].name, sub) == 0) {
			put_synopsis(c, &c->subs[k], "usage: ");
			putchar('\n');
			put_paragraph(&c->subs[k], width);
			return 0;
		}
	if (sub)
		return -1;
	for (k = 0; k < c->nsubs; k++)
		put_synopsis(c, &c->subs[k], k ? "       " : "usage: ");
	putchar('\n');
	for (k = 0; k < c->nsubs; k++)
		put_paragraph(&c->subs[k], width);
	printf("\n%s\n", c->footer);
	return 0;
}
