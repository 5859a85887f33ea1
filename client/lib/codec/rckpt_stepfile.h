/*
 * rckpt_stepfile.h — one encoded step as a local file (formats/checkpoint.md,
 * "Step file"): what `rckpt codec` reads and writes.
 */
#ifndef RCKPT_STEPFILE_H
#define RCKPT_STEPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_ckenc.h"

/* Writes out to path (through a temporary file renamed into place). */
int rckpt_stepfile_write(const char *path, const rckpt_ckenc_out_t *out);

/* A step file read back: pointers into buf. */
typedef struct rckpt_stepfile {
	uint8_t *buf;
	size_t size;
	const uint8_t *manifest;
	size_t mlen;
	uint32_t nchunks;
	const uint8_t **records;
	size_t *lens;
} rckpt_stepfile_t;

/* 0, -errno, -EBADMSG (framing), -ENOMEM. */
int rckpt_stepfile_read(rckpt_stepfile_t *out, const char *path);
void rckpt_stepfile_free(rckpt_stepfile_t *f);

#endif /* RCKPT_STEPFILE_H */
