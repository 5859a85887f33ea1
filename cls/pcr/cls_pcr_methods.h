/*
 * cls_pcr_methods.h — C bodies of the `pcr` object class (Progressive
 * Compressed Records, formats/pcr.md). Every method runs on one record
 * object, reads only, and never trusts the record or the request: a record
 * that fails to decode is -EBADMSG (or RCKPT_EVERSION / RCKPT_ECHECKSUM for
 * a newer version or a damaged head), a malformed request -EINVAL.
 */
#ifndef RCKPT_CLS_PCR_METHODS_H
#define RCKPT_CLS_PCR_METHODS_H

#include "cls_common.h"

/* version (RD) — Input: empty. Output: a version frame (formats/cls-wire.md).
 * Returns 0, or -EINVAL when the input is not empty. */
int cls_pcr_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* read (RD) — Input: a READ frame (k groups, or all). Output: a PREFIX
 * frame with the groups returned (k, or fewer when the record has fewer)
 * and the record's bytes from its start through group k: the head and
 * groups 1..k, for a client that holds no index. -ENOENT (no object),
 * -EFBIG when the prefix would not fit in one reply. */
int cls_pcr_read(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* images (RD) — Input: an IMAGES frame: k and image indices within the
 * record (repeats allowed). Output: a JPEGS frame with, for each index in
 * request order, the image's id, name, label and its JPEG at k groups
 * (header + scans 1..k + EOI), gathered in the OSD from coalesced ranged
 * reads. -ERANGE for an index past the record's images, -EFBIG when the
 * reply would not fit. */
int cls_pcr_images(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* stat (RD) — Input: empty. Output: a STAT frame: record number, images,
 * groups, head bytes, object size, and each group's end. */
int cls_pcr_stat(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

#endif
