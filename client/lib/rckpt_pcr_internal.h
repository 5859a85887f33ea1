/*
 * rckpt_pcr_internal.h — what the PCR builder, reader and admin share.
 * Not installed.
 */
#ifndef RCKPT_PCR_INTERNAL_H
#define RCKPT_PCR_INTERNAL_H

#include <rados/librados.h>

#include "rckpt_internal.h"

#define RCKPT_PCR_NS_PREFIX "pcr/"
#define RCKPT_PCR_INDEX_OID "index"
#define RCKPT_PCR_OID_MAX 32

/* "rec.<n>", n zero-padded to 8 digits. */
void rckpt_pcr_record_oid(char out[RCKPT_PCR_OID_MAX], uint32_t n);

/* An I/O context on the dataset's namespace; -EINVAL for a bad name. */
int rckpt_pcr_ioctx(rckpt_t *h, const char *dataset, rados_ioctx_t *out);

/* Reads a whole object (at most max bytes: -EFBIG) into a malloc'd buffer. */
int rckpt_pcr_read_object(rados_ioctx_t io, const char *oid, size_t max, uint8_t **out,
			  size_t *len);

#endif
