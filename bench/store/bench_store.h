/*
 * bench_store.h — what bench_store.c and bench_store_synth.c (its
 * sections on synthetic models, 1b and 4) share: one program, two files.
 */
#ifndef RCKPT_BENCH_STORE_H
#define RCKPT_BENCH_STORE_H

#include <stdint.h>

#include <rados/librados.h>

#include "rckpt.h"

/* --threads (0: the cores), for every job this program opens. */
extern unsigned opt_threads;
/* Prints what failed and exits 1. */
void die(const char *what, int rc);
/* A field (VmRSS, VmHWM) of a /proc/.../status file, in KiB; -1: none. */
long status_kib(const char *path, const char *field);

/* This process's /proc/self/status field in KiB; its VmHWM reset. */
long proc_kib(const char *field);
void reset_hwm(void);
/* The job, opened (as its writer when writer); exits on failure. */
rckpt_job_t *open_job(rckpt_t *h, const char *name, int writer);
/* Seconds of a restore of step (stats in rs when not NULL). */
double restore_all(rckpt_job_t *j, uint64_t step, rckpt_restore_stats_t *rs, uint8_t *dst, size_t cap);

/* 1b. a save's peak memory against the model's size, for each of the
 * comma-separated sizes (Mi parameters; "0": none) within budget_mib. */
void mem_vs_size(rckpt_t *h, const char *sizes, uint64_t budget_mib);

/* 4. one call of each rckpt method on a chunk of mi Mi elements: the
 * slowest call, and with osd (its PID) the OSD's peak memory. */
void per_call(rckpt_t *h, rados_ioctx_t io, unsigned mi, long osd, int exact);

#endif
