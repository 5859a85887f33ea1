/*
 * rckpt_planes.h — the payload of a PLANES blob (formats/checkpoint.md,
 * "Planes"): elements of 2 or 4 bytes, each XORed with its prediction when
 * there is one, rotated left by one bit (the exponent then fills the top
 * byte), cut into byte planes, each plane an entropy stream of byte
 * symbols. The exponent's plane takes a Huffman code; the mantissa's,
 * close to random, stay raw.
 */
#ifndef RCKPT_PLANES_H
#define RCKPT_PLANES_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"

/* Appends the payload of src[0..n), n a multiple of w (2 or 4). With pred
 * (element i's prediction at pred[i * w .. i * w + w)), the plain or the
 * predicted payload, whichever is smaller (ties: plain): both sized in
 * full below 64 Ki elements, past it chosen by the planes' entropy on
 * every 16th element. *predicted says which. -EINVAL, -ENOMEM, -EFBIG. */
int rckpt_planes_encode(rckpt_buf_t *out, int *predicted, const uint8_t *src, const uint8_t *pred,
			size_t n, unsigned w);

/* Decodes the payload src[0..len) into dst[0..n) (n a multiple of w):
 * exactly w streams of n / w symbols each, filling len. pred as above;
 * pred may be dst (decoded in place, over the prediction). -EBADMSG for
 * anything else (dst then undefined), -ENOMEM. */
int rckpt_planes_decode(uint8_t *dst, const uint8_t *pred, size_t n, unsigned w, const uint8_t *src,
			size_t len);

#endif /* RCKPT_PLANES_H */
