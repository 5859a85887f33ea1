/*
 * rckpt_pcr_reader.h — an open PCR dataset and its batches, shared by the
 * reader's two ways in: records in order (rckpt_pcr_read.c, which owns the
 * pool of workers) and images by id (rckpt_pcr_fetch.c).
 */
#ifndef RCKPT_PCR_READER_H
#define RCKPT_PCR_READER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rckpt.h"
#include "rckpt_pcr.h"
#include "rckpt_pcr_internal.h"

#define MAX_THREADS 64u
#define MAX_PREFETCH 64u

typedef struct pimg {
	uint32_t id;
	char name[RCKPT_PCR_MAX_NAME + 1];
	const uint8_t *label;
	size_t label_len;
	const uint8_t *src; /* a fetched JPEG, in the reply; NULL: assemble it */
	size_t src_len;
	uint8_t *jpeg; /* assembled (owned) */
	size_t jpeg_len;
	uint8_t *rgb;
	unsigned w, h;
} pimg_t;

enum { B_READING, B_WORKING, B_DONE };

struct rckpt_pcr_batch {
	rckpt_pcr_t *d;
	uint32_t record;
	unsigned k;          /* groups of this record read */
	rckpt_aio_t *c;      /* the prefix read, until parsed */
	uint8_t *rbuf;       /* the prefix read */
	size_t rlen;
	rckpt_pcr_head_t head;
	rckpt_buf_t *replies; /* fetch: the `images` replies */
	unsigned nreplies;
	unsigned n;
	pimg_t *img;
	unsigned pending;    /* image tasks left; under d->mu */
	int state;           /* under d->mu */
	int rc;
	int rgb;             /* decode to RGB */
	unsigned scale;      /* at 1/scale (1, 2, 4, 8) or RCKPT_PCR_SCALE_AUTO */
};

typedef struct task {
	rckpt_pcr_batch_t *b;
	uint32_t i; /* an image, or PARSE */
} task_t;
#define PARSE UINT32_MAX

struct rckpt_pcr {
	rckpt_t *h;
	rckpt_io_t *io;
	char name[64];
	rckpt_pcr_opts_t o;
	rckpt_pcr_index_t x;
	uint8_t *xbytes;
	unsigned k; /* this epoch's groups; 0: all */
	uint32_t *order;     /* this pass's records, in order (NULL: all, in order) */
	uint32_t pass_len;   /* records in this pass */
	uint32_t next_issue, next_give; /* positions in the pass */
	rckpt_pcr_batch_t *ring[MAX_PREFETCH + 1];
	unsigned ring_n;
	pthread_t tid[MAX_THREADS];
	unsigned nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	task_t *q;
	size_t qhead, qlen, qcap;
	int stop;
	rckpt_pcr_read_stats_t stats; /* under mu */
};

/* Runs one task per image of b (a fetch's or a made batch's) on the pool
 * and waits for them; b->rc. */
int rckpt_pcr_run_images(rckpt_pcr_t *d, rckpt_pcr_batch_t *b);

#endif
