/*
 * rckpt_safetensors.h — read and write safetensors files, the plain tensor
 * container of the PyTorch ecosystem: an 8-byte little-endian header length,
 * a JSON header {name: {dtype, shape, data_offsets}}, then the bytes.
 *
 * The JSON is parsed by jansson. Files are untrusted: every offset, shape and
 * size is checked before use. Only F32, F16 and BF16 tensors are accepted
 * (-ENOTSUP names the tensor otherwise), unless a reader asks for the
 * others too (RCKPT_ST_ANY): F64, I64, I32, I16, I8, U8 and BOOL, which
 * no encoder takes (a tensor set refuses them) and files keep as they are.
 */
#ifndef RCKPT_SAFETENSORS_H
#define RCKPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_tset.h"

#define RCKPT_ST_MAX_DIMS RCKPT_TSET_MAX_DIMS

/* The dtypes beside the codec's (rckpt_dtype.h), as rckpt_files.h names
 * them, and the flag that reads them. */
enum { RCKPT_ST_F64 = 16, RCKPT_ST_I64, RCKPT_ST_I32, RCKPT_ST_I16, RCKPT_ST_I8, RCKPT_ST_U8, RCKPT_ST_BOOL };
#define RCKPT_ST_ANY 1u

/* Bytes of an element of dtype d (any of a file's), or 0. */
size_t rckpt_st_dtype_size(unsigned d);
#define RCKPT_ST_MAX_HEADER (100u << 20)

/* A file read: one producer of the codec's tensor set. */
typedef struct rckpt_st {
	uint8_t *buf; /* the whole file; the tensors' values point into it */
	size_t size;
	char *names;      /* the tensors' names, one allocation */
	rckpt_tset_t set; /* the file's tensors, sorted by name */
} rckpt_st_t;

/* Reads and checks the file at path. On failure err (if not NULL) gets a
 * one-line reason, not naming the file. 0, -errno of the I/O, -EISDIR (a
 * directory), -EINVAL (not a regular file: a FIFO, which is never opened,
 * a socket, a device), -EBADMSG (malformed or truncated), -ENOTSUP (a
 * dtype other than F32/F16/BF16), -EFBIG (header over RCKPT_ST_MAX_HEADER),
 * -ENOMEM (the file does not fit in memory). */
int rckpt_st_read(rckpt_st_t *out, const char *path, char *err, size_t errlen);
int rckpt_st_read_flags(rckpt_st_t *out, const char *path, unsigned flags, char *err, size_t errlen);

/* 0 when path is a regular file that can be opened for reading; else as
 * rckpt_st_read: the errno of the open, -EISDIR, -EINVAL (a FIFO is not
 * opened), with the reason in err. For the readers of other files. */
int rckpt_st_regular(const char *path, char *err, size_t errlen);

/* Checks the file at path as rckpt_st_read does, reading only its header:
 * every tensor's bytes within the file's size. The same returns. */
int rckpt_st_check(const char *path, char *err, size_t errlen);
int rckpt_st_check_flags(const char *path, unsigned flags, char *err, size_t errlen);

/* The same over bytes in memory; takes ownership of buf (malloc'd). */
int rckpt_st_parse(rckpt_st_t *out, uint8_t *buf, size_t size, char *err, size_t errlen);
int rckpt_st_parse_flags(rckpt_st_t *out, uint8_t *buf, size_t size, unsigned flags, char *err, size_t errlen);

void rckpt_st_free(rckpt_st_t *st);

/* Writes tensors t[0..n) (any of a file's dtypes) to path (through a
 * temporary file renamed into place). 0, -EINVAL, -errno, -ENOMEM. */
int rckpt_st_write(const char *path, const rckpt_ctensor_t *t, unsigned n);

#endif /* RCKPT_SAFETENSORS_H */
