/*
 * rckpt_planes.c — PLANES blobs: byte planes of rotated elements, each an
 * entropy stream (ZipNN's grouping of the exponent apart from the mantissa).
 */
#include "rckpt_planes.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_estream.h"

static inline uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Plane j of src[0..m) (elements w bytes wide): byte j of each element
 * XOR its prediction, rotated left by one bit. A plane at a time, so that
 * a record's planes never need a copy of its values beside them. */
static void split(uint8_t *pl, const uint8_t *src, const uint8_t *pred, size_t m, unsigned w, unsigned j)
{
	const unsigned sh = 8 * j;
	size_t i;
	if (w == 4) {
		for (i = 0; i < m; i++) {
			uint32_t v = le32(src + 4 * i) ^ (pred ? le32(pred + 4 * i) : 0);
			pl[i] = (uint8_t)((v << 1 | v >> 31) >> sh);
		}
	} else {
		for (i = 0; i < m; i++) {
			uint32_t v = (uint32_t)(src[2 * i] | src[2 * i + 1] << 8);
			if (pred)
				v ^= (uint32_t)(pred[2 * i] | pred[2 * i + 1] << 8);
			pl[i] = (uint8_t)((v << 1 | v >> 15) >> sh);
		}
	}
}

/* Each of m elements w bytes wide rotated left (left) or right by one
 * bit, then XORed with pred's (when given; pred may not be p). Right
 * with pred is split's inverse: p holds every element's rotated bytes
 * (the planes put back in place). */
static void rotate(uint8_t *p, const uint8_t *pred, size_t m, unsigned w, int left)
{
	size_t i;
	if (w == 4) {
		for (i = 0; i < m; i++) {
			uint32_t v = le32(p + 4 * i);
			v = left ? v << 1 | v >> 31 : v >> 1 | v << 31;
			if (pred)
				v ^= le32(pred + 4 * i);
			p[4 * i] = (uint8_t)v;
			p[4 * i + 1] = (uint8_t)(v >> 8);
			p[4 * i + 2] = (uint8_t)(v >> 16);
			p[4 * i + 3] = (uint8_t)(v >> 24);
		}
	} else {
		for (i = 0; i < m; i++) {
			uint16_t v = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
			v = left ? (uint16_t)(v << 1 | v >> 15) : (uint16_t)(v >> 1 | v << 15);
			if (pred)
				v ^= (uint16_t)(pred[2 * i] | pred[2 * i + 1] << 8);
			p[2 * i] = (uint8_t)v;
			p[2 * i + 1] = (uint8_t)(v >> 8);
		}
	}
}

/* Past this many elements the form is chosen on every SAMPLE_STRIDE-th
 * element alone: sizing both forms in full would double the encoder's
 * work. */
#define SAMPLE_MIN 65536
#define SAMPLE_STRIDE 16

/* The order-0 entropy, in bits, of the planes of every stride-th element
 * of src (XOR pred when given): what a form costs, near enough to choose
 * between two. */
static double sample_bits(const uint8_t *src, const uint8_t *pred, size_t m, unsigned w, size_t stride)
{
	uint32_t h[4][256];
	double bits = 0;
	size_t i, n = 0;
	unsigned j, s;

	memset(h, 0, sizeof(h));
	for (i = 0; i < m; i += stride, n++) {
		uint32_t v = w == 4 ? le32(src + 4 * i) : (uint32_t)(src[2 * i] | src[2 * i + 1] << 8);
		if (pred)
			v ^= w == 4 ? le32(pred + 4 * i) : (uint32_t)(pred[2 * i] | pred[2 * i + 1] << 8);
		v = w == 4 ? v << 1 | v >> 31 : (uint32_t)((v << 1 | v >> 15) & 0xffff);
		for (j = 0; j < w; j++)
			h[j][(v >> (8 * j)) & 0xff]++;
	}
	for (j = 0; j < w; j++)
		for (s = 0; s < 256; s++)
			if (h[j][s])
				bits -= (double)h[j][s] * log2((double)h[j][s] / (double)n);
	return bits;
}

int rckpt_planes_encode(rckpt_buf_t *out, int *predicted, const uint8_t *src, const uint8_t *pred,
			size_t n, unsigned w)
{
	const size_t start = out->len, m = w ? n / w : 0;
	unsigned forms = pred && n ? 2 : 1, first = 0;
	rckpt_est8_plan_t plan;
	size_t size[2] = { 0, 0 };
	uint8_t *pl;
	unsigned f, j, best = 0;
	int rc = 0;

	*predicted = 0;
	if ((w != 2 && w != 4) || n % w)
		return -EINVAL;
	if (forms == 2 && m >= SAMPLE_MIN) { /* one form, chosen on a sample */
		first = sample_bits(src, pred, m, w, SAMPLE_STRIDE) < sample_bits(src, NULL, m, w, SAMPLE_STRIDE);
		forms = 1;
	}
	if ((pl = malloc(m + 1)) == NULL)
		return -ENOMEM;
	/* below SAMPLE_MIN, each form's planes sized first; only the smaller
	 * is coded */
	for (f = 0; forms == 2 && f < forms && rc == 0; f++)
		for (j = 0; j < w && rc == 0; j++) {
			split(pl, src, f ? pred : NULL, m, w, j);
			rc = rckpt_estream_plan8(&plan, pl, m);
			size[f] += rc ? 0 : plan.bytes;
		}
	if (forms == 2 && size[1] < size[0]) /* ties: the plain form */
		best = 1;
	best += first;
	for (j = 0; j < w && rc == 0; j++) {
		split(pl, src, best ? pred : NULL, m, w, j);
		if ((rc = rckpt_estream_plan8(&plan, pl, m)) == 0)
			rc = rckpt_estream_emit8(out, &plan, pl, m);
	}
	if (rc)
		out->len = start;
	*predicted = rc == 0 && best;
	free(pl);
	return rc;
}

int rckpt_planes_decode(uint8_t *dst, const uint8_t *pred, size_t n, unsigned w, const uint8_t *src,
			size_t len)
{
	rckpt_reader_t r = rckpt_reader(src, len);
	const size_t m = w ? n / w : 0;
	uint8_t *pl;
	size_t i;
	unsigned j;
	int rc = 0;

	if ((w != 2 && w != 4) || n % w)
		return -EBADMSG;
	if ((pl = malloc(m ? m : 1)) == NULL)
		return -ENOMEM;
	/* in place (dst == pred): each element of the prediction rotated as
	 * the planes are, the planes xored in, then rotated back; else each
	 * plane into its bytes, then joined with the prediction */
	if (pred == dst)
		rotate(dst, NULL, m, w, 1);
	for (j = 0; j < w && rc == 0; j++)
		if (rckpt_estream_peek_method(&r) == RCKPT_EST_HUFF4) /* an index stream's only */
			rc = -EBADMSG;
		else if ((rc = rckpt_estream_decode8(pl, m, 256, &r)) == 0 && pred == dst)
			for (i = 0; i < m; i++)
				dst[i * w + j] ^= pl[i];
		else if (rc == 0)
			for (i = 0; i < m; i++)
				dst[i * w + j] = pl[i];
	if (rc == 0 && (r.err || r.pos != len))
		rc = -EBADMSG; /* every byte of the payload is a plane's */
	if (rc == 0 && pred == dst)
		rotate(dst, NULL, m, w, 0);
	else if (rc == 0)
		rotate(dst, pred, m, w, 0);
	free(pl);
	return rc;
}
