/*
 * cli_util.c — what the commands of `rckpt` share (rckpt_cli.h).
 */
#define _GNU_SOURCE /* memmem, strerrorname_np */
#include "rckpt_cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define RCKPT_FILES_UNSTABLE
#include "rckpt_clock.h" /* rckpt_now_s */
#include "rckpt_files.h"

/* What the run shares between its threads (the command's, the signal
 * thread, the progress ticker): mu orders every line on stderr, the
 * progress line, the kept error and the signal state. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int g_format = CLI_FORMAT_PLAIN;
static int g_json_done; /* a document is on stdout */
static int g_have_err, g_code;
static char g_msg[1024];
static json_t *g_extra;

static void progress_clear_locked(void);

void cli_set_format(int format)
{
	g_format = format;
}

int cli_json_mode(void)
{
	return g_format != CLI_FORMAT_PLAIN;
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
	pthread_mutex_lock(&mu);
	progress_clear_locked();
	rc = json_dumpf(j, stdout, flags);
	json_decref(j);
	if (rc == 0) {
		putchar('\n');
		g_json_done = 1;
	}
	fflush(stdout);
	pthread_mutex_unlock(&mu);
	return rc ? 1 : 0;
}

/* Keeps the run's first error (mu held). */
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
	pthread_mutex_lock(&mu);
	progress_clear_locked();
	if (cmd)
		fprintf(stderr, "rckpt %s: %s\n", cmd, m);
	else
		fprintf(stderr, "rckpt: %s\n", m);
	keep_error_locked(code, m);
	pthread_mutex_unlock(&mu);
}

void cli_note(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&mu);
	progress_clear_locked();
	fprintf(stderr, "rckpt %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	pthread_mutex_unlock(&mu);
}

void cli_err_detail(const char *key, json_t *v)
{
	pthread_mutex_lock(&mu);
	if (g_extra == NULL)
		g_extra = json_object();
	if (g_extra && v)
		json_object_set(g_extra, key, v);
	json_decref(v);
	pthread_mutex_unlock(&mu);
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
	if (status != 0 && g_format != CLI_FORMAT_PLAIN && !g_json_done) {
		json_t *o = json_object();
		const char *name = code_name(g_code);
		json_object_set_new(o, "error", json_text(g_have_err ? g_msg : "failed"));
		json_object_set_new(o, "code", name ? json_string(name)
						    : json_integer(g_code ? g_code : status));
		if (g_extra)
			json_object_update(o, g_extra);
		pthread_mutex_lock(&mu);
		progress_clear_locked();
		if (json_dumpf(o, stdout, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER | JSON_COMPACT) == 0)
			putchar('\n');
		fflush(stdout);
		pthread_mutex_unlock(&mu);
		json_decref(o);
	}
	json_decref(g_extra);
	g_extra = NULL;
	fflush(stdout);
	return status;
}

int cli_usage_error(const char *cmd, const char *what)
{
	pthread_mutex_lock(&mu);
	if (cmd)
		fprintf(stderr, "rckpt %s: %s; try 'rckpt %s --help'\n", cmd, what, cmd);
	else
		fprintf(stderr, "rckpt: %s; try 'rckpt --help'\n", what);
	keep_error_locked(-EINVAL, what);
	pthread_mutex_unlock(&mu);
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
		return cli_usage_errorf(cmd, "%s is empty: a name is 1..%d characters of A-Z a-z 0-9 . _ -", opt,
					CLI_NAME_MAX);
	if (i < n)
		return cli_usage_errorf(cmd,
					"%s '%s': %s%c%s is not allowed in a name (1..%d characters of A-Z a-z "
					"0-9 . _ -)",
					opt, name, isprint((unsigned char)name[i]) ? "'" : "byte ",
					isprint((unsigned char)name[i]) ? name[i] : '?',
					isprint((unsigned char)name[i]) ? "'" : "", CLI_NAME_MAX);
	if (n > CLI_NAME_MAX)
		return cli_usage_errorf(cmd, "%s '%s': %zu characters, a name has at most %d (of A-Z a-z 0-9 . _ -)",
					opt, name, n, CLI_NAME_MAX);
	return 0;
}

/* ---- files named on the command line ---- */

static const char *kind_of(mode_t m)
{
	return S_ISDIR(m)    ? "a directory"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
			     : "a special file";
}

/* Reports the errno e of path and returns -e. */
static int file_err(const char *cmd, const char *path, int e, const char *what)
{
	cli_err(cmd, -e, "%s: %s%s", path, what ? what : "", strerror(e));
	return -e;
}

int cli_check_file(const char *cmd, const char *path)
{
	struct stat sb;
	int fd;
	if (stat(path, &sb) != 0)
		return file_err(cmd, path, errno, NULL);
	if (S_ISDIR(sb.st_mode)) {
		cli_err(cmd, -EISDIR, "%s: is a directory, not a file", path);
		return -EISDIR;
	}
	if (!S_ISREG(sb.st_mode)) {
		cli_err(cmd, -EINVAL, "%s: is %s, not a regular file", path, kind_of(sb.st_mode));
		return -EINVAL;
	}
	/* never blocks: it is not a FIFO */
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return file_err(cmd, path, errno, "cannot read it: ");
	close(fd);
	return 0;
}

int cli_check_safetensors(const char *cmd, const char *path)
{
	char why[512] = "";
	int rc = cli_check_file(cmd, path);
	if (rc == 0 && (rc = rckpt_file_check(path, why, sizeof(why))) != 0)
		cli_err(cmd, rc, "%s: %s", path, why[0] ? why : rckpt_strerror(rc));
	return rc;
}

int cli_check_dir(const char *cmd, const char *path)
{
	struct stat sb;
	int fd;
	if (stat(path, &sb) != 0)
		return file_err(cmd, path, errno, NULL);
	if (!S_ISDIR(sb.st_mode)) {
		cli_err(cmd, -ENOTDIR, "%s: is %s, not a directory", path,
			S_ISREG(sb.st_mode) ? "a file" : kind_of(sb.st_mode));
		return -ENOTDIR;
	}
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return file_err(cmd, path, errno, "cannot read it: ");
	close(fd);
	return 0;
}

/* The directory of path (a copy; "." for a bare name), or NULL. */
static char *dir_of(const char *path)
{
	const char *sl = strrchr(path, '/');
	char *d;
	if (sl == NULL)
		return strdup(".");
	if (sl == path)
		return strdup("/");
	if ((d = malloc((size_t)(sl - path) + 1)) != NULL) {
		memcpy(d, path, (size_t)(sl - path));
		d[sl - path] = '\0';
	}
	return d;
}

/* Whether files may be made in directory d (which must exist): 0 or the
 * error reported about path. */
static int writable_dir(const char *cmd, const char *path, const char *d)
{
	struct stat sb;
	if (stat(d, &sb) != 0) {
		int e = errno;
		cli_err(cmd, -e, "%s: its directory %s: %s", path, d, strerror(e));
		return -e;
	}
	if (!S_ISDIR(sb.st_mode)) {
		cli_err(cmd, -ENOTDIR, "%s: %s is not a directory", path, d);
		return -ENOTDIR;
	}
	if (access(d, W_OK | X_OK) != 0) {
		int e = errno;
		cli_err(cmd, -e, "%s: cannot write in %s: %s", path, d, strerror(e));
		return -e;
	}
	return 0;
}

int cli_check_out(const char *cmd, const char *path)
{
	struct stat sb;
	char *d;
	int rc;
	if (*path == '\0') {
		cli_err(cmd, -ENOENT, "an empty output file name");
		return -ENOENT;
	}
	if (stat(path, &sb) == 0) {
		if (S_ISDIR(sb.st_mode)) {
			cli_err(cmd, -EISDIR, "%s: is a directory; the output is a file: give its name", path);
			return -EISDIR;
		}
		if (!S_ISREG(sb.st_mode)) {
			cli_err(cmd, -EINVAL, "%s: is %s, not a regular file to write", path, kind_of(sb.st_mode));
			return -EINVAL;
		}
	} else if (errno != ENOENT) {
		return file_err(cmd, path, errno, NULL);
	} else if (path[strlen(path) - 1] == '/') {
		cli_err(cmd, -EISDIR, "%s: names a directory; the output is a file: give its name", path);
		return -EISDIR;
	}
	if ((d = dir_of(path)) == NULL) {
		cli_err(cmd, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	rc = writable_dir(cmd, path, d);
	free(d);
	return rc;
}

int cli_check_out_dir(const char *cmd, const char *path)
{
	struct stat sb;
	char *d, *p;
	size_t n;
	int rc;
	if (stat(path, &sb) == 0) {
		if (!S_ISDIR(sb.st_mode)) {
			cli_err(cmd, -ENOTDIR, "%s: is %s, not a directory", path,
				S_ISREG(sb.st_mode) ? "a file" : kind_of(sb.st_mode));
			return -ENOTDIR;
		}
		if (access(path, W_OK | X_OK) != 0)
			return file_err(cmd, path, errno, "cannot write in it: ");
		return 0;
	}
	if (errno != ENOENT)
		return file_err(cmd, path, errno, NULL);
	/* to be made: its parent (without trailing slashes) must take it */
	if ((p = strdup(path)) == NULL) {
		cli_err(cmd, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	for (n = strlen(p); n > 1 && p[n - 1] == '/'; n--)
		p[n - 1] = '\0';
	d = dir_of(p);
	rc = d ? writable_dir(cmd, path, d) : -ENOMEM;
	free(d);
	free(p);
	return rc;
}

/* ---- staged outputs, and the temporaries a signal removes ---- */

#define CLI_TMP_MAX 16
static char *g_tmp[CLI_TMP_MAX]; /* registered temporaries (mu) */

/* Removes tmp and the library's own temporary beside it (rckpt_file_write
 * writes PATH.tmp, then renames it to PATH). */
static void remove_tmp(const char *tmp)
{
	char t2[4096];
	unlink(tmp);
	if (snprintf(t2, sizeof(t2), "%s.tmp", tmp) < (int)sizeof(t2))
		unlink(t2);
}

static void remove_all_tmp_locked(void)
{
	unsigned i;
	for (i = 0; i < CLI_TMP_MAX; i++)
		if (g_tmp[i])
			remove_tmp(g_tmp[i]);
}

static void tmp_register(char *t, int on)
{
	unsigned i;
	pthread_mutex_lock(&mu);
	for (i = 0; i < CLI_TMP_MAX; i++)
		if (on ? g_tmp[i] == NULL : g_tmp[i] == t) {
			g_tmp[i] = on ? t : NULL;
			break;
		}
	pthread_mutex_unlock(&mu);
}

const char *cli_stage_add(cli_stage_t *st, const char *final)
{
	const char *base = strrchr(final, '/');
	size_t dl = base ? (size_t)(base + 1 - final) : 0, cap = strlen(final) + 48;
	char *t, *f;
	if (st->n == CLI_STAGE_MAX)
		return NULL;
	base = base ? base + 1 : final;
	t = malloc(cap);
	f = strdup(final);
	if (t == NULL || f == NULL) {
		free(t);
		free(f);
		return NULL;
	}
	snprintf(t, cap, "%.*s.%s.rckpt-%ld.tmp", (int)dl, final, base, (long)getpid());
	st->final[st->n] = f;
	st->tmp[st->n] = t;
	st->n++;
	tmp_register(t, 1);
	return t;
}

static void stage_free(cli_stage_t *st)
{
	unsigned i;
	for (i = 0; i < st->n; i++) {
		tmp_register(st->tmp[i], 0);
		free(st->tmp[i]);
		free(st->final[i]);
	}
	st->n = 0;
}

void cli_stage_abort(cli_stage_t *st)
{
	unsigned i;
	for (i = 0; i < st->n; i++)
		remove_tmp(st->tmp[i]);
	stage_free(st);
}

int cli_stage_commit(cli_stage_t *st, const char *cmd)
{
	unsigned i;
	int rc = 0;
	for (i = 0; i < st->n && rc == 0; i++)
		if (rename(st->tmp[i], st->final[i]) != 0) {
			rc = -errno;
			cli_err(cmd, rc, "%s: cannot write it: %s", st->final[i], strerror(-rc));
		}
	for (; i < st->n; i++)
		remove_tmp(st->tmp[i]);
	stage_free(st);
	return rc;
}

/* ---- signals ---- */

static sigset_t g_sigs;
static int g_sig_got;         /* the first signal (mu) */
static rckpt_job_t *g_sig_job; /* its lock is released before exiting (mu) */
static int g_sig_defer;

/* Releases a writer's lock from the signal thread while the command's
 * thread may be saving (rckpt_job_release is thread-safe): 0, or an error,
 * and then the command stops at its next check of cli_interrupted and
 * closes the job. */
static int release_now(rckpt_job_t *j)
{
	return rckpt_job_release(j);
}

static void *signal_thread(void *arg)
{
	(void)arg;
	for (;;) {
		int s = 0;
		if (sigwait(&g_sigs, &s) != 0)
			continue;
		pthread_mutex_lock(&mu);
		progress_clear_locked();
		if (g_sig_got == 0 && (g_sig_job || g_sig_defer)) {
			g_sig_got = s;
			if (g_sig_job && release_now(g_sig_job) == 0) {
				fprintf(stderr, "rckpt: interrupted by %s: the job's writer lock released\n",
					s == SIGINT ? "SIGINT" : "SIGTERM");
				if (g_format != CLI_FORMAT_PLAIN && !g_json_done)
					printf("{\"error\": \"interrupted by %s\", \"code\": \"EINTR\"}\n",
					       s == SIGINT ? "SIGINT" : "SIGTERM");
				fflush(stdout);
				remove_all_tmp_locked();
				_exit(128 + s);
			}
			fprintf(stderr,
				"rckpt: %s: stopping after the work under way%s (%s again to quit at once%s)\n",
				s == SIGINT ? "SIGINT" : "SIGTERM",
				g_sig_job ? ", then releasing the job's writer lock" : "",
				s == SIGINT ? "Ctrl-C" : "the signal",
				g_sig_job ? ": the lock then stays until its lease ends" : "");
			pthread_mutex_unlock(&mu);
			continue;
		}
		remove_all_tmp_locked();
		fprintf(stderr, "rckpt: interrupted by %s\n", s == SIGINT ? "SIGINT" : "SIGTERM");
		if (g_format != CLI_FORMAT_PLAIN && !g_json_done)
			printf("{\"error\": \"interrupted by %s\", \"code\": \"EINTR\"}\n",
			       s == SIGINT ? "SIGINT" : "SIGTERM");
		fflush(stdout);
		_exit(128 + s);
	}
	return NULL;
}

int cli_signals_guard(void)
{
	static const int sigs[] = { SIGINT, SIGTERM };
	pthread_t th;
	unsigned k;
	sigemptyset(&g_sigs);
	for (k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++) {
		struct sigaction old;
		/* a signal the caller ignores (nohup, a background job of a
		 * script) stays ignored */
		if (sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaddset(&g_sigs, sigs[k]);
	}
	if (pthread_sigmask(SIG_BLOCK, &g_sigs, NULL) != 0 || pthread_create(&th, NULL, signal_thread, NULL) != 0) {
		pthread_sigmask(SIG_UNBLOCK, &g_sigs, NULL);
		return -EAGAIN;
	}
	pthread_detach(th);
	return 0;
}

void cli_signals_job(rckpt_job_t *j)
{
	pthread_mutex_lock(&mu);
	g_sig_job = j;
	pthread_mutex_unlock(&mu);
}

void cli_signals_defer(int on)
{
	pthread_mutex_lock(&mu);
	g_sig_defer = on;
	pthread_mutex_unlock(&mu);
}

int cli_interrupted(void)
{
	int s;
	pthread_mutex_lock(&mu);
	s = g_sig_got;
	pthread_mutex_unlock(&mu);
	return s;
}

int cli_interrupt_status(void)
{
	int s = cli_interrupted();
	return s ? 128 + s : 1;
}

/* ---- progress ---- */

static struct {
	int on, shown, stop;
	char what[64], unit[16], item[96];
	uint64_t ti, tb, i, b;
	double t0;
	pthread_t th;
	pthread_cond_t cv;
} pg = { .cv = PTHREAD_COND_INITIALIZER };

static void progress_clear_locked(void)
{
	if (pg.shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		pg.shown = 0;
	}
}

/* "12.3 MB" */
static void human(char *out, size_t cap, double b)
{
	static const char *const u[] = { "B", "kB", "MB", "GB", "TB" };
	unsigned k = 0;
	while (b >= 1000 && k < 4) {
		b /= 1000;
		k++;
	}
	snprintf(out, cap, k ? "%.1f %s" : "%.0f %s", b, u[k]);
}

static void clock_text(char *out, size_t cap, double s)
{
	unsigned long t = s > 0 ? (unsigned long)(s + 0.5) : 0;
	if (t >= 3600)
		snprintf(out, cap, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(out, cap, "%lu:%02lu", t / 60, t % 60);
}

static void progress_draw_locked(void)
{
	char line[512], a[32], b[32];
	const double el = rckpt_now_s() - pg.t0;
	double rate = 0, eta = -1;
	size_t n = 0, cols = 80;
	struct winsize ws;
#define PUT(...)                                                                               \
	do {                                                                                   \
		if (n < sizeof(line))                                                          \
			n += (size_t)snprintf(line + n, sizeof(line) - n, __VA_ARGS__);        \
	} while (0)
	PUT("%s", pg.what);
	if (pg.item[0])
		PUT(" %s", pg.item);
	if (pg.ti)
		PUT(": %llu/%llu %s", (unsigned long long)pg.i, (unsigned long long)pg.ti, pg.unit);
	else if (pg.i)
		PUT(": %llu %s", (unsigned long long)pg.i, pg.unit);
	if (pg.b || pg.tb) {
		human(a, sizeof(a), (double)pg.b);
		if (pg.tb) {
			human(b, sizeof(b), (double)pg.tb);
			PUT(", %s of %s", a, b);
		} else
			PUT(", %s", a);
	}
	if (el > 0.5 && pg.b) {
		rate = (double)pg.b / el;
		human(a, sizeof(a), rate);
		PUT(", %s/s", a);
	}
	if (pg.tb && rate > 0)
		eta = (double)(pg.tb > pg.b ? pg.tb - pg.b : 0) / rate;
	else if (pg.ti && pg.i)
		eta = el * (double)(pg.ti > pg.i ? pg.ti - pg.i : 0) / (double)pg.i;
	clock_text(a, sizeof(a), el);
	PUT(", %s", a);
	if (eta >= 0) {
		clock_text(b, sizeof(b), eta);
		PUT(", ETA %s", b);
	}
#undef PUT
	if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 8)
		cols = ws.ws_col;
	if (n > cols - 1)
		n = cols - 1; /* a wrapped line would not be redrawn in place */
	if (n >= sizeof(line))
		n = sizeof(line) - 1;
	fprintf(stderr, "\r%.*s\033[K", (int)n, line);
	fflush(stderr);
	pg.shown = 1;
}

static void *progress_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (!pg.stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000L; /* at most 4 redraws a second */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_nsec -= 1000000000L;
			ts.tv_sec++;
		}
		pthread_cond_timedwait(&pg.cv, &mu, &ts);
		if (!pg.stop)
			progress_draw_locked();
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

void cli_progress_begin(const char *what, uint64_t total_items, const char *unit, uint64_t total_bytes)
{
	cli_progress_end();
	if (g_format != CLI_FORMAT_PLAIN || !isatty(2))
		return;
	pthread_mutex_lock(&mu);
	snprintf(pg.what, sizeof(pg.what), "%s", what);
	snprintf(pg.unit, sizeof(pg.unit), "%s", unit ? unit : "");
	pg.item[0] = '\0';
	pg.ti = total_items;
	pg.tb = total_bytes;
	pg.i = pg.b = 0;
	pg.t0 = rckpt_now_s();
	pg.stop = 0;
	pg.on = pthread_create(&pg.th, NULL, progress_thread, NULL) == 0;
	pthread_mutex_unlock(&mu);
}

void cli_progress_set(uint64_t items, uint64_t bytes)
{
	pthread_mutex_lock(&mu);
	pg.i = items;
	pg.b = bytes;
	pthread_mutex_unlock(&mu);
}

void cli_progress_item(const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&mu);
	va_start(ap, fmt);
	vsnprintf(pg.item, sizeof(pg.item), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&mu);
}

void cli_progress_end(void)
{
	int on;
	pthread_mutex_lock(&mu);
	on = pg.on;
	pg.stop = 1;
	pthread_cond_signal(&pg.cv);
	pthread_mutex_unlock(&mu);
	if (on)
		pthread_join(pg.th, NULL);
	pthread_mutex_lock(&mu);
	pg.on = 0;
	progress_clear_locked();
	pthread_mutex_unlock(&mu);
}

void cli_line(const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&mu);
	progress_clear_locked();
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	pthread_mutex_unlock(&mu);
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
