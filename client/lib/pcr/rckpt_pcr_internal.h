/*
 * rckpt_pcr_internal.h — what the PCR builder, reader and admin share.
 * Not installed.
 */
#ifndef RCKPT_PCR_INTERNAL_H
#define RCKPT_PCR_INTERNAL_H

#include "rckpt_internal.h"
#include "rckpt_pcr.h"

#define RCKPT_PCR_NS_PREFIX "pcr/"
#define RCKPT_PCR_INDEX_OID "index"
#define RCKPT_PCR_OID_MAX 32

/* "rec.<n>", n zero-padded to 8 digits. */
void rckpt_pcr_record_oid(char out[RCKPT_PCR_OID_MAX], uint32_t n);

/* The dataset's namespace (rckpt_io.h); -EINVAL for a bad name. */
int rckpt_pcr_io(rckpt_t *h, const char *dataset, rckpt_io_t **out);

/* Transcodes JPEG src losslessly into a progressive JPEG of spectral
 * selection scans alone (rckpt_pcr_script.c); *out is malloc'd. -EBADMSG,
 * saying why in why[0..why_cap), for a file libjpeg refuses or warns of. */
int rckpt_pcr_transcode_spectral(const uint8_t *src, size_t len, uint8_t **out, size_t *out_len, char *why,
				 size_t why_cap);

/* Reads a whole object (at most max bytes: -EFBIG) into a malloc'd buffer. */
int rckpt_pcr_read_object(rckpt_io_t *io, const char *oid, size_t max, uint8_t **out,
			  size_t *len);

/* A batch of copies of it[0..n) (images the caller holds: the
 * locality-aware loader's cache and exchange), in that order, decoded to RGB on d's
 * threads when rgb. -EINVAL for a name too long or an empty JPEG;
 * -EBADMSG for one that does not decode. */
int rckpt_pcr_batch_make(rckpt_pcr_t *d, const rckpt_pcr_jpeg_t *it, unsigned n, int rgb,
			 rckpt_pcr_batch_t **out);

/* The locality-aware loader's exchange message from a peer, m[0..len):
 * u32 n, then per item u32 id, name length, label length, JPEG length
 * (not 0) and the three byte strings. Points it[0..n) into m; the ids must
 * be want[0..n) in order and the items fill m exactly (-EBADMSG if not). */
int rckpt_loader_parse_items(const uint8_t *m, size_t len, const uint32_t *want, unsigned n,
			     rckpt_pcr_jpeg_t *it);

/* rckpt_loc_directory for an epoch started after its first `start`
 * samples (rckpt_loader_seek): those are in no cache, and the global
 * batches that fill the caches begin at perm[start]. */
int rckpt_loc_directory_from(uint64_t seed, uint64_t epoch, uint32_t n, unsigned p,
			     uint32_t local_batch, uint32_t capacity, uint32_t start, uint32_t *owner);

#endif
