/*
 * cls_pcr_methods.h — C bodies of the `pcr` object class (Progressive Compressed Records).
 */
#ifndef RCKPT_CLS_PCR_METHODS_H
#define RCKPT_CLS_PCR_METHODS_H

#include "cls_common.h"

/* version (RD) — Input: empty. Output: a version frame (formats/cls-wire.md).
 * Returns 0, or -EINVAL when the input is not empty. */
int cls_pcr_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

#endif
