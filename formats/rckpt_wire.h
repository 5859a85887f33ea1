/*
 * rckpt_wire.h — the framing of every message exchanged with a cls method,
 * and the `version` reply. Spec: formats/cls-wire.md.
 *
 * Pure C11, no allocation, no global state. Decoders take untrusted bytes
 * (they run inside OSDs and in clients) and return 0 or a negative code:
 *   -EBADMSG            malformed: truncated, bad magic, wrong type, bad field
 *   RCKPT_FMT_EVERSION  well formed, but needs a newer decoder
 *   -EINVAL             (encoders) a field the format cannot represent
 *   -ERANGE             (encoders) destination too small
 */
#ifndef RCKPT_WIRE_H
#define RCKPT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_bytes.h"

#define RCKPT_WIRE_MAGIC 0x4b52u /* "RK" as little-endian bytes 'R','K' */
#define RCKPT_WIRE_HEADER_BYTES 12u
#define RCKPT_WIRE_VERSION 1u /* the newest frame version this code writes */

/* Message types. Values are pinned: never renumber, only add. */
enum rckpt_wire_type {
	RCKPT_MSG_VERSION_REPLY = 0x0001,
};

typedef struct rckpt_frame {
	uint8_t version;        /* version the encoder wrote */
	uint8_t compat;         /* oldest decoder version that can read it */
	uint16_t type;          /* enum rckpt_wire_type */
	const uint8_t *payload; /* points into the caller's bytes */
	uint32_t len;           /* payload bytes */
} rckpt_frame_t;

/* Checks the header of the frame in src[0..len) and points out->payload at
 * its payload. The frame must fill src exactly. Fails with -EBADMSG on a bad
 * magic, nonzero flags, a type other than `type`, or a length that disagrees
 * with len; RCKPT_FMT_EVERSION when compat > supported_version. */
int rckpt_frame_open(rckpt_frame_t *out, const uint8_t *src, size_t len, uint16_t type,
		     uint8_t supported_version);

/* Writes a frame header whose length is filled in by rckpt_frame_close;
 * returns the header's offset in w. Errors surface in w->err. */
size_t rckpt_frame_begin(rckpt_writer_t *w, uint16_t type, uint8_t version, uint8_t compat);
void rckpt_frame_close(rckpt_writer_t *w, size_t header_at);

/* The same into a growable buffer: begin appends a header (its offset in
 * *at); end fills in the length, passing a nonzero rc through. 0, -EINVAL
 * (a payload over 4 GiB), -ENOMEM, -EFBIG. */
int rckpt_frame_buf_begin(rckpt_buf_t *b, uint16_t type, uint8_t version, uint8_t compat, size_t *at);
int rckpt_frame_buf_end(rckpt_buf_t *b, size_t at, int rc);

/* ---- the `version` reply of every plugin ---- */

#define RCKPT_WIRE_NAME_MAX 32    /* plugin and format names: [a-z0-9_-], 1..32 */
#define RCKPT_WIRE_RELEASE_MAX 64 /* printable ASCII, 0..64 */
#define RCKPT_WIRE_FORMATS_MAX 16

typedef struct rckpt_wire_format_range {
	char name[RCKPT_WIRE_NAME_MAX + 1];
	uint16_t min_version;
	uint16_t max_version;
} rckpt_wire_format_range_t;

typedef struct rckpt_wire_version {
	char plugin[RCKPT_WIRE_NAME_MAX + 1];
	uint16_t major, minor, patch;
	char built_for[RCKPT_WIRE_RELEASE_MAX + 1]; /* Ceph release built against */
	unsigned nformats;
	rckpt_wire_format_range_t formats[RCKPT_WIRE_FORMATS_MAX];
} rckpt_wire_version_t;

/* Upper bound of an encoded version reply: a destination this large always
 * suffices. */
#define RCKPT_WIRE_VERSION_BOUND                                                         \
	(RCKPT_WIRE_HEADER_BYTES + 1 + RCKPT_WIRE_NAME_MAX + 6 + 1 + RCKPT_WIRE_RELEASE_MAX + \
	 1 + RCKPT_WIRE_FORMATS_MAX * (1 + RCKPT_WIRE_NAME_MAX + 4))

/* Its field table (rckpt_wire_fields.h; rckpt_wire_version.c). */
struct rckpt_wire_msg;
extern const struct rckpt_wire_msg rckpt_wire_version_desc;

/* Encodes v into dst[0..cap); *out_len gets the bytes written. 0, -EINVAL
 * (a field the format cannot hold), -ERANGE (cap too small). */
int rckpt_wire_version_encode(uint8_t *dst, size_t cap, size_t *out_len,
			      const rckpt_wire_version_t *v);

/* Decodes a version reply. On failure *out is zeroed. */
int rckpt_wire_version_decode(rckpt_wire_version_t *out, const uint8_t *src, size_t len);

#endif /* RCKPT_WIRE_H */
