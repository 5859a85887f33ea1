/*
 * cli_signals.c — SIGINT and SIGTERM on a thread of their own
 * (cli.h): the staged temporaries removed, a job's writer lock
 * released, then the process ended; or the command told to stop.
 */
#define _GNU_SOURCE /* sigaction, sigwait */
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "cli_lock.h"

static sigset_t g_sigs;
static int g_sig_got;         /* the first signal (cli_lock) */
static rckpt_job_t *g_sig_job; /* its lock is released before exiting (cli_lock) */
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
		cli_lock();
		cli_progress_clear_locked();
		if (g_sig_got == 0 && (g_sig_job || g_sig_defer)) {
			g_sig_got = s;
			if (g_sig_job && release_now(g_sig_job) == 0) {
				fprintf(stderr, "rckpt: interrupted by %s: the job's writer lock released\n",
					s == SIGINT ? "SIGINT" : "SIGTERM");
				if (cli_json_due())
					printf("{\"error\": \"interrupted by %s\", \"code\": \"EINTR\"}\n",
					       s == SIGINT ? "SIGINT" : "SIGTERM");
				fflush(stdout);
				cli_tmp_remove_all_locked();
				_exit(128 + s);
			}
			fprintf(stderr,
				"rckpt: %s: stopping after the work under way%s (%s again to quit at once%s)\n",
				s == SIGINT ? "SIGINT" : "SIGTERM",
				g_sig_job ? ", then releasing the job's writer lock" : "",
				s == SIGINT ? "Ctrl-C" : "the signal",
				g_sig_job ? ": the lock then stays until its lease ends" : "");
			cli_unlock();
			continue;
		}
		cli_tmp_remove_all_locked();
		fprintf(stderr, "rckpt: interrupted by %s\n", s == SIGINT ? "SIGINT" : "SIGTERM");
		if (cli_json_due())
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
	cli_lock();
	g_sig_job = j;
	cli_unlock();
}

void cli_signals_defer(int on)
{
	cli_lock();
	g_sig_defer = on;
	cli_unlock();
}

int cli_interrupted(void)
{
	int s;
	cli_lock();
	s = g_sig_got;
	cli_unlock();
	return s;
}

int cli_interrupt_status(void)
{
	int s = cli_interrupted();
	return s ? 128 + s : 1;
}
