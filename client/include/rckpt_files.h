/*
 * rckpt_files.h — librckpt on local files, no cluster: safetensors
 * checkpoints, and step files (formats/checkpoint.md, "Step file"), the
 * codec's output written to disk. What `rckpt codec` and `rckpt ckpt save`
 * are built on.
 *
 * Not yet stable: these functions may change between minor versions, so a
 * program states that it accepts that by defining RCKPT_FILES_UNSTABLE
 * before including this header (zstd's ZSTD_STATIC_LINKING_ONLY habit).
 * The conventions of rckpt.h hold.
 */
#ifndef RCKPT_FILES_H
#define RCKPT_FILES_H

#ifndef RCKPT_FILES_UNSTABLE
#error "rckpt_files.h is not yet stable API: define RCKPT_FILES_UNSTABLE to use it"
#endif

#include <stdio.h>

#include "rckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors files ---- */

/* A safetensors file read into memory and checked. */
typedef struct rckpt_file rckpt_file_t;

/* Dtypes a file may hold beside RCKPT_F32, RCKPT_F16 and RCKPT_BF16:
 * kept as they are (rckpt_file_write, and rckpt_file_read_flags with
 * RCKPT_FILE_ANY_DTYPE), never compressed (a save refuses them). What
 * `rckpt ckpt restore` writes of a step's exact state (an int buffer, an
 * optimizer's step count). Since 0.1.0 (unstable). */
enum rckpt_file_dtype {
	RCKPT_F64 = 16,
	RCKPT_I64 = 17,
	RCKPT_I32 = 18,
	RCKPT_I16 = 19,
	RCKPT_I8 = 20,
	RCKPT_U8 = 21,
	RCKPT_BOOL = 22,
};
#define RCKPT_FILE_ANY_DTYPE 1u /* rckpt_file_read_flags: the dtypes above too */
/* Bytes of an element of dtype (any of a file's), or 0 for none. */
RCKPT_API size_t rckpt_file_dtype_size(unsigned dtype);

/* Reads path. On failure err (when not NULL) gets a one-line reason, not
 * naming the file (its caller does): 0,
 * -errno of the I/O, -EISDIR (a directory), -EINVAL (not a regular file:
 * a FIFO, never opened, a socket, a device), -EBADMSG (malformed or
 * truncated), -ENOTSUP (a dtype other than F32, F16, BF16), -ENOMEM (it
 * does not fit in memory). */
RCKPT_API int rckpt_file_read(rckpt_file_t **out, const char *path, char *err, size_t errlen);
/* rckpt_file_read, flags RCKPT_FILE_ANY_DTYPE or 0 (the same); the same
 * returns for rckpt_file_check_flags. Since 0.1.0 (unstable). */
RCKPT_API int rckpt_file_read_flags(rckpt_file_t **out, const char *path, unsigned flags, char *err,
				    size_t errlen);
RCKPT_API int rckpt_file_check_flags(const char *path, unsigned flags, char *err, size_t errlen);
/* Checks path as rckpt_file_read would, reading only its header (every
 * tensor's bytes within the file's size): the same returns. Cheap before
 * a long run over many files. Since 0.1.0 (unstable). */
RCKPT_API int rckpt_file_check(const char *path, char *err, size_t errlen);
RCKPT_API unsigned rckpt_file_count(const rckpt_file_t *f);
/* Its tensors, in name order; their data lives as long as f. */
RCKPT_API const rckpt_tensor_t *rckpt_file_tensors(const rckpt_file_t *f);
RCKPT_API void rckpt_file_free(rckpt_file_t *f);

/* Writes t[0..n) (any dtype of a file's) to path (through a temporary file
 * renamed into place). -EINVAL for an unknown dtype or a name twice. */
RCKPT_API int rckpt_file_write(const char *path, const rckpt_tensor_t *t, unsigned n);

/* The role of a tensor of an optimizer's file (MODEL.optim.safetensors
 * beside MODEL.safetensors, as `rckpt ckpt save` reads and `rckpt ckpt
 * restore` writes it) from its name: exp_avg.P and momentum_buffer.P are
 * first moments of P, exp_avg_sq.P its second, anything else other state.
 * r->name and r->param point into name; r->eps is 0 (Adam's 1e-8: the
 * file has no step count to correct it by). */
RCKPT_API void rckpt_file_optim_role(const char *name, rckpt_tensor_role_t *r);

/* ---- step files ---- */

/* An encoder across the checkpoints of a run: the first step a base, each
 * next a delta against the one before (or a base every base_every). */
typedef struct rckpt_stepenc rckpt_stepenc_t;

typedef struct rckpt_stepenc_opts {
	unsigned version;      /* RCKPT_STEPENC_OPTS_VERSION */
	double eps;            /* quality threshold; 0: RCKPT_EPS_DEFAULT */
	unsigned bins;         /* 1..64: this many bins, no search; 0: search */
	uint64_t chunk_params; /* elements per chunk; 0: 4 Mi */
	unsigned base_every;   /* 0: only the first step is a base */
	int exact;             /* 1: every step exact, its values whole in byte
				  planes (formats/checkpoint.md "Planes"),
				  each a delta on the step before; eps and bins
				  then do nothing */
} rckpt_stepenc_opts_t;
#define RCKPT_STEPENC_OPTS_VERSION 1
#define RCKPT_STEPENC_OPTS_INIT { RCKPT_STEPENC_OPTS_VERSION, 0.0, 0, 0, 0, 0 }

typedef struct rckpt_step_report {
	uint64_t raw_bytes;  /* the tensors as fp32 */
	uint64_t enc_bytes;  /* the step file */
	double quality;      /* the compressor's loss */
	int accepted;        /* quality <= eps (else the least aggressive
				configuration was used) */
	int is_base;
	char config[160];    /* "bins=16 emb=32 prune=0.1 metric=mag protect=0.005" */
} rckpt_step_report_t;

/* -EINVAL for options out of range. */
RCKPT_API int rckpt_stepenc_create(rckpt_stepenc_t **out, const rckpt_stepenc_opts_t *o);
/* Encodes params (and grads, the gradient RMS of the same tensors, or
 * NULL) as step `step` into the step file at path. msg gets the reason of
 * a failure. */
RCKPT_API int rckpt_stepenc_file(rckpt_stepenc_t *e, const rckpt_file_t *params,
				 const rckpt_file_t *grads, uint64_t step, const char *path,
				 rckpt_step_report_t *rep, char *msg, size_t msglen);
RCKPT_API void rckpt_stepenc_destroy(rckpt_stepenc_t *e);

/* A decoder of a chain of step files, base first. */
typedef struct rckpt_stepdec rckpt_stepdec_t;

RCKPT_API int rckpt_stepdec_create(rckpt_stepdec_t **out);
/* Decodes the next step file of the chain (every chunk's SHA-256
 * checked). -ESTALE: a delta of another step than the last one; -EISDIR,
 * -EINVAL: path is a directory, or not a regular file (a FIFO is never
 * opened). */
RCKPT_API int rckpt_stepdec_file(rckpt_stepdec_t *d, const char *path);
/* Writes the last decoded step's tensors, in their own dtypes, to the
 * safetensors file at path; *step and *ntensors (when not NULL) say what. */
RCKPT_API int rckpt_stepdec_write(const rckpt_stepdec_t *d, const char *path, uint64_t *step,
				  unsigned *ntensors);
RCKPT_API void rckpt_stepdec_destroy(rckpt_stepdec_t *d);

/* Prints a step file's manifest to out: the step and its parent, sizes,
 * configuration, chunks and tensors (the text of `rckpt codec inspect`). */
RCKPT_API int rckpt_stepfile_describe(const char *path, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* RCKPT_FILES_H */
