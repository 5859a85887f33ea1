/*
 * cli_progress.c — the progress line on a terminal and cli_line
 * (cli.h), under the run's one lock (cli_lock.c).
 */
#define _GNU_SOURCE /* ioctl, clock_gettime, pthread_cond_timedwait */
#include "cli.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli_lock.h"
#include "rckpt_clock.h" /* rckpt_now_s */

static struct {
	int on, shown, stop;
	char what[64], unit[16], item[96];
	uint64_t ti, tb, i, b;
	double t0;
	pthread_t th;
	pthread_cond_t cv;
} pg = { .cv = PTHREAD_COND_INITIALIZER };

void cli_progress_clear_locked(void)
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
	cli_lock();
	while (!pg.stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000L; /* at most 4 redraws a second */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_nsec -= 1000000000L;
			ts.tv_sec++;
		}
		pthread_cond_timedwait(&pg.cv, cli_mutex(), &ts);
		if (!pg.stop)
			progress_draw_locked();
	}
	cli_unlock();
	return NULL;
}

void cli_progress_begin(const char *what, uint64_t total_items, const char *unit, uint64_t total_bytes)
{
	cli_progress_end();
	if (cli_json_mode() || !isatty(2))
		return;
	cli_lock();
	snprintf(pg.what, sizeof(pg.what), "%s", what);
	snprintf(pg.unit, sizeof(pg.unit), "%s", unit ? unit : "");
	pg.item[0] = '\0';
	pg.ti = total_items;
	pg.tb = total_bytes;
	pg.i = pg.b = 0;
	pg.t0 = rckpt_now_s();
	pg.stop = 0;
	pg.on = pthread_create(&pg.th, NULL, progress_thread, NULL) == 0;
	cli_unlock();
}

void cli_progress_set(uint64_t items, uint64_t bytes)
{
	cli_lock();
	pg.i = items;
	pg.b = bytes;
	cli_unlock();
}

void cli_progress_item(const char *fmt, ...)
{
	va_list ap;
	cli_lock();
	va_start(ap, fmt);
	vsnprintf(pg.item, sizeof(pg.item), fmt, ap);
	va_end(ap);
	cli_unlock();
}

void cli_progress_end(void)
{
	int on;
	cli_lock();
	on = pg.on;
	pg.stop = 1;
	pthread_cond_signal(&pg.cv);
	cli_unlock();
	if (on)
		pthread_join(pg.th, NULL);
	cli_lock();
	pg.on = 0;
	cli_progress_clear_locked();
	cli_unlock();
}

void cli_line(const char *fmt, ...)
{
	va_list ap;
	cli_lock();
	cli_progress_clear_locked();
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	cli_unlock();
}
