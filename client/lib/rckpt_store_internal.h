/*
 * rckpt_store_internal.h — what the store's client files share: the job
 * handle and the calls on its objects. Internal to librckpt.
 */
#ifndef RCKPT_STORE_INTERNAL_H
#define RCKPT_STORE_INTERNAL_H

#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_ckenc.h"
#include "rckpt_internal.h"

#define LOCK_NAME "rckpt.writer"
#define LOCK_COOKIE_MAX 64
#define SUMMARY_BYTES 36

struct rckpt_job {
	rckpt_t *h;
	rados_ioctx_t io;
	char name[64];
	rckpt_job_opts_t o;
	int locked;
	char cookie[LOCK_COOKIE_MAX];
	rckpt_ckenc_t *enc; /* writer: the encoder across saves */
	uint64_t head;      /* writer: the head it last saw or moved */
	int trimmed;        /* writer: uncommitted records dropped */
	int resume_tried;   /* writer: the head was offered to the encoder */
	struct rckpt_save *pending; /* writer: the save in flight, if any */
	uint64_t io_budget; /* writer: bytes of appends a save may have in flight */
	uint64_t token;     /* writer: its claim on the job (fencing) */
	struct rckpt_gpuenc *gpu; /* writer: made at its first save on the GPU */
	rckpt_buf_t attach; /* writer: the next save's attachment, encoded
			       (store.md), its step filled in at the save */
};


/* A read method's reply appended to out; a write method (no reply). */
int rckpt_exec_read(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in,
		    rckpt_buf_t *out);
int rckpt_exec_write(rckpt_job_t *j, const char *oid, const char *method, const rckpt_buf_t *in);

/* The committed head and step count; RCKPT_STORE_NONE and 0 for a new job. */
int rckpt_read_head(rckpt_job_t *j, uint64_t *head, uint64_t *count);

/* Takes (or, renew, extends) the writer lock. */
int rckpt_take_lock(rckpt_job_t *j, int renew);

/* Runs write method `method` on chunk objects [0, n), `inflight` at a
 * time: msgs[i] is chunk i's input, or msgs[0] for all when `same`. */
int rckpt_chunk_writes(rckpt_job_t *j, const char *method, const rckpt_buf_t *msgs, int same,
		       unsigned n);

#endif /* RCKPT_STORE_INTERNAL_H */
