/*
 * cls_rckpt_methods.h — C bodies of the `rckpt` object class (checkpoints).
 */
#ifndef RCKPT_CLS_RCKPT_METHODS_H
#define RCKPT_CLS_RCKPT_METHODS_H

#include "cls_common.h"

/* version (RD) — Input: empty. Output: a version frame (formats/cls-wire.md).
 * Returns 0, or -EINVAL when the input is not empty. */
int cls_rckpt_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

#endif
