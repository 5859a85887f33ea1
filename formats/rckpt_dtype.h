/*
 * rckpt_dtype.h — the element types of stored tensors, one numbering for
 * the formats (formats/checkpoint.md: a segment's dtype byte), the codec
 * and the GPU kernels. The public rckpt.h gives the same values its own
 * names (RCKPT_F32, ...), tied to these by a static assertion in librckpt.
 */
#ifndef RCKPT_DTYPE_H
#define RCKPT_DTYPE_H

enum rckpt_dtype { RCKPT_DT_F32 = 1, RCKPT_DT_F16 = 2, RCKPT_DT_BF16 = 3 };

#endif /* RCKPT_DTYPE_H */
