/*
 * cli_lock.c — the floor of the CLI's utility layer: the run's one lock
 * and its output format. The lock orders what the run's threads (the
 * command's, the signal thread, the progress ticker) share: every line on
 * stderr, the progress line (cli_progress.c, whose ticker waits on it),
 * the kept error (cli_out.c), the temporaries (cli_files.c) and the
 * signal state (cli_signals.c). The format is set by main before the
 * command runs.
 */
#include "cli.h"

#include <pthread.h>

#include "cli_lock.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int g_format = CLI_FORMAT_PLAIN;

pthread_mutex_t *cli_mutex(void)
{
	return &mu;
}

void cli_lock(void)
{
	pthread_mutex_lock(&mu);
}

void cli_unlock(void)
{
	pthread_mutex_unlock(&mu);
}

void cli_set_format(int format)
{
	g_format = format;
}

int cli_json_mode(void)
{
	return g_format != CLI_FORMAT_PLAIN;
}
