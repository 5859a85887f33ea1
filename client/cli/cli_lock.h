/*
 * cli_lock.h — what the files of the CLI's utility layer (cli.h:
 * cli_args.c, cli_signals.c, cli_files.c, cli_out.c, cli_progress.c,
 * cli_lock.c, from the top down) share among themselves. Internal to
 * them: the commands include cli.h only.
 */
#ifndef CLI_LOCK_H
#define CLI_LOCK_H

#include <pthread.h>

/* The one lock of the run's threads (the command's, the signal thread,
 * the progress ticker), cli_lock.c: it orders every line on stderr, the
 * progress line, the kept error, the temporaries and the signal state.
 * Not recursive. cli_mutex: the lock itself, for a condition's wait. */
void cli_lock(void);
void cli_unlock(void);
pthread_mutex_t *cli_mutex(void);
/* Erases the progress line if it is shown (lock held), cli_progress.c. */
void cli_progress_clear_locked(void);
/* Removes every staged temporary still registered (lock held; a signal
 * ending the process), cli_files.c. */
void cli_tmp_remove_all_locked(void);
/* Whether a failure owes stdout its JSON error document: the format is
 * JSON and no document was printed yet (cli_out.c). */
int cli_json_due(void);

#endif
