/*
 * rckpt_holder.c — who holds a job's writer lock, as far as its cookie
 * tells (formats/store.md, "Takeover"). A writer's cookie names its
 * process: this boot of its machine (the kernel's boot_id), its PID
 * namespace, its pid and the pid's start time. A later process of the same
 * boot and namespace can then tell for sure that the holder has exited
 * (no such pid, or one started at another time: a pid reused), which is
 * what lets a trainer restarted after a crash take its job over at once.
 * Anything else (another machine, a container of its own, an old cookie,
 * no /proc) cannot be told: the holder may be alive. A process whose main
 * thread has exited while others run (its leader a zombie) is alive; so is
 * one whose start time reads otherwise from another time namespace (the
 * kernel shows start times in the reader's boot clock): the cookie names
 * the writer's time namespace, and start times are compared only within
 * one.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include "rckpt_store_internal.h"

#define COOKIE_TAG "w2" /* w1: before the time namespace was in it */

/* The first 8 hex digits of this boot's id, or 0. */
static uint32_t boot_id(void)
{
	char b[64];
	uint32_t v = 0;
	unsigned i, n = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f == NULL)
		return 0;
	if (fgets(b, sizeof(b), f) == NULL)
		b[0] = '\0';
	fclose(f);
	for (i = 0; b[i] && n < 8; i++) {
		const char c = b[i];
		const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d >= 0) {
			v = v << 4 | (uint32_t)d;
			n++;
		}
	}
	return n == 8 ? v : 0;
}

/* The inode of this process's namespace at `path` (/proc/self/ns/pid:
 * "pid:[4026531836]"), or 0 (none: a kernel without that kind). */
static uint64_t ns_inode(const char *path)
{
	char b[64];
	ssize_t n = readlink(path, b, sizeof(b) - 1);
	const char *p;
	if (n <= 0)
		return 0;
	b[n] = '\0';
	p = strchr(b, '[');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static uint64_t pid_ns(void)
{
	return ns_inode("/proc/self/ns/pid");
}

static uint64_t time_ns(void)
{
	return ns_inode("/proc/self/ns/time");
}

/* Threads of process pid (/proc/PID/status), or 0 when it cannot be read. */
static unsigned threads_of(long pid)
{
	char path[64], line[128];
	unsigned n = 0;
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %u", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* Process pid's start time (clock ticks after boot, /proc/PID/stat field
 * 22): 0 and *alive 0 when there is no such process (or only its
 * zombie: a leader whose process has other threads still running is
 * alive); *alive -1 when it cannot be told. */
static uint64_t start_time(long pid, int *alive)
{
	char path[64], b[1024];
	size_t n;
	const char *p;
	unsigned field;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (f == NULL) {
		/* /proc may hide other users' processes (hidepid, ProtectProc):
		 * gone only when the kernel says there is no such process */
		*alive = (errno == ENOENT || errno == ESRCH) && kill((pid_t)pid, 0) != 0 && errno == ESRCH
				 ? 0
				 : -1;
		return 0;
	}
	n = fread(b, 1, sizeof(b) - 1, f);
	fclose(f);
	b[n] = '\0';
	/* the command name may hold anything: the fields go on after its last ')' */
	p = strrchr(b, ')');
	*alive = -1;
	if (p == NULL || p[1] != ' ')
		return 0;
	if ((p[2] == 'Z' || p[2] == 'X') && threads_of(pid) <= 1) { /* exited, not yet waited for */
		*alive = 0;
		return 0;
	}
	for (field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return 0;
	*alive = 1;
	return strtoull(p + 1, NULL, 10);
}

void rckpt_holder_cookie(char *out, size_t cap, uint64_t client_id)
{
	int alive;
	const long pid = (long)getpid();
	const uint64_t st = start_time(pid, &alive);
	snprintf(out, cap, COOKIE_TAG ".%08" PRIx32 ".%" PRIu64 ".%" PRIu64 ".%ld.%" PRIu64 ".%" PRIu64,
		 boot_id(), pid_ns(), time_ns(), pid, st, client_id % 1000000000u);
}

/* One field of a cookie: digits of base (no sign, no space) up to the
 * next '.' or the end, at most max; *p moves past it and its dot. */
static int field(const char **p, int base, uint64_t max, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	unsigned n = 0;
	for (; *s && *s != '.'; s++, n++) {
		const char c = *s;
		const int d = c >= '0' && c <= '9' ? c - '0'
			      : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
								   : -1;
		if (d < 0 || x > (max - (uint64_t)d) / (uint64_t)base)
			return -EINVAL;
		x = x * (uint64_t)base + (uint64_t)d;
	}
	if (n == 0)
		return -EINVAL;
	*v = x;
	*p = *s ? s + 1 : s;
	return 0;
}

/* Parses a cookie of rckpt_holder_cookie's (w2), or of the clients before
 * it (w1: no time namespace, *tns 0): 0, or -EINVAL (anything else, a cut
 * one included). */
static int parse(const char *cookie, uint32_t *boot, uint64_t *ns, uint64_t *tns, long *pid, uint64_t *st)
{
	const int w1 = strncmp(cookie, "w1.", 3) == 0;
	const char *p = cookie + 3;
	uint64_t b, n, t = 0, q, s, c;
	if ((!w1 && strncmp(cookie, COOKIE_TAG ".", 3) != 0) || field(&p, 16, UINT32_MAX, &b) ||
	    field(&p, 10, UINT64_MAX, &n) || (!w1 && field(&p, 10, UINT64_MAX, &t)) ||
	    field(&p, 10, 0x7fffffffu, &q) || field(&p, 10, UINT64_MAX, &s) || field(&p, 10, UINT64_MAX, &c) ||
	    *p != '\0' || q == 0 || strlen(cookie) >= LOCK_COOKIE_MAX - 1)
		return -EINVAL;
	*boot = (uint32_t)b;
	*ns = n;
	*tns = t;
	*pid = (long)q;
	*st = s;
	return 0;
}

int rckpt_holder_gone(const char *cookie, char *what, size_t cap)
{
	uint32_t boot;
	uint64_t ns, tns, st, now;
	long pid;
	int alive;

	if (parse(cookie, &boot, &ns, &tns, &pid, &st)) {
		snprintf(what, cap, "a writer of another version or tool");
		return 0;
	}
	if (boot == 0 || boot != boot_id()) {
		snprintf(what, cap, "process %ld of another machine (or an earlier boot)", pid);
		return 0;
	}
	if (ns == 0 || ns != pid_ns()) {
		snprintf(what, cap, "process %ld of another PID namespace (a container) of this machine",
			 pid);
		return 0;
	}
	now = start_time(pid, &alive);
	/* a start time read in another time namespace's boot clock differs
	 * from the writer's own: only "no such process" is sure then */
	if (tns != 0 && tns != time_ns())
		st = 0;
	if (alive == 0 || (alive == 1 && st != 0 && now != st)) {
		snprintf(what, cap, "process %ld of this machine, which has exited", pid);
		return 1;
	}
	if (pid == (long)getpid())
		snprintf(what, cap, "this process (another handle on the job)");
	else if (alive == 1)
		snprintf(what, cap, "process %ld of this machine, still running", pid);
	else
		snprintf(what, cap, "process %ld of this machine", pid);
	return 0;
}
