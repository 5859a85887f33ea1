/*
 * rckpt_clock.h — the one monotonic clock of the sources (librckpt, the
 * command, the benchmarks), in seconds. Header-only: the codec, which knows
 * nothing of handles, has it too. Not installed.
 */
#ifndef RCKPT_CLOCK_H
#define RCKPT_CLOCK_H

#include <time.h>

static inline double rckpt_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* RCKPT_CLOCK_H */
