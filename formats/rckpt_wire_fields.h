/*
 * rckpt_wire_fields.h — a cls-wire message described once: a table of its
 * fields, from which one encoder, one decoder and one validity check are
 * derived (formats/cls-wire.md, formats/store.md).
 *
 * A message is a C struct and a rckpt_wire_msg_t naming, field by field in
 * wire order, where each lives in the struct, its kind and the values it
 * may hold. rckpt_wire_valid() checks a struct against the table (and the
 * message's own rule across fields, if it has one); the encoder refuses
 * what it refuses (-EINVAL) and the decoder refuses the same (-EBADMSG), so
 * nothing one side writes is refused by the other. Decoders take untrusted
 * bytes, point blobs and lists into them without copying, and leave the
 * struct zeroed on failure.
 */
#ifndef RCKPT_WIRE_FIELDS_H
#define RCKPT_WIRE_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"

enum rckpt_wire_kind {
	RCKPT_WF_U8,   /* uint8_t */
	RCKPT_WF_U16,  /* uint16_t */
	RCKPT_WF_U32,  /* uint32_t */
	RCKPT_WF_I32,  /* int32_t, as its u32 bits; range checked by the message's rule */
	RCKPT_WF_U64,  /* uint64_t */
	RCKPT_WF_BLOB, /* rckpt_blob_t: its length (width bytes), then the bytes */
	RCKPT_WF_LIST, /* rckpt_wire_list_t: its count (width bytes), then each element (elem) */
	RCKPT_WF_STR,  /* char[max + 1], NUL-terminated: its length (width bytes), then
			  the bytes (no NUL), of an alphabet (flags) */
	RCKPT_WF_ARRAY, /* elem structs, a C array of max of them, as many as the
			   earlier field fields[count] says (it is written there) */
};

/* A blob inside a message: points into the decoded bytes. */
typedef struct rckpt_blob {
	const uint8_t *p;
	size_t len;
} rckpt_blob_t;

/* A list inside a message. Decoded: p and bytes cover its elements inside
 * the message (already checked whole), n of them. To encode: v holds n
 * element structs (p NULL). */
typedef struct rckpt_wire_list {
	const uint8_t *p;
	size_t bytes;
	const void *v;
	uint32_t n;
} rckpt_wire_list_t;

struct rckpt_wire_msg;

#define RCKPT_WF_SORTED 1u    /* a list whose elements' first u64 strictly increases */
#define RCKPT_WF_NAME 2u      /* a string of [a-z0-9_-] */
#define RCKPT_WF_PRINTABLE 4u /* a string of printable ASCII (0x20-0x7e) */

typedef struct rckpt_wire_field {
	const char *name;
	uint16_t offset; /* in the struct */
	uint8_t kind;    /* enum rckpt_wire_kind */
	uint8_t flags;   /* RCKPT_WF_* */
	uint8_t since;   /* the layout that added it (0 or 1: the first) */
	uint8_t width;   /* bytes on the wire of a u32 (1, 2, 4; 0: 4), and of a blob's
			    or string's length or a list's count (the same) */
	uint8_t count;   /* an array's count: the index of that field */
	uint64_t min;    /* the least value (integers), length (blob, string), count (list) */
	uint64_t max;    /* the most (0, or more than the kind and width can hold: what
			    they can); a string's or an array's capacity (its C
			    array's size, less the string's NUL) */
	uint64_t absent; /* the value of a field a frame older than `since` lacks
			    (an integer's; a blob it lacks is empty) */
	const struct rckpt_wire_msg *elem; /* a list's or array's element (a list's: <= 64 bytes) */
} rckpt_wire_field_t;

typedef struct rckpt_wire_msg {
	const char *name;
	uint16_t type;    /* cls-wire type; 0: unframed (a list element, an omap value) */
	uint8_t version;  /* the layout written */
	uint8_t compat;   /* written as the frame's compat */
	uint8_t oldest;   /* a frame of an older layout is refused (-EBADMSG) */
	uint8_t newest;   /* a frame whose compat is newer is refused (RCKPT_FMT_EVERSION) */
	uint16_t size;    /* of the struct */
	uint8_t nfields;
	const rckpt_wire_field_t *fields;
	/* What spans fields (0 or -EINVAL); NULL: nothing. */
	int (*rule)(const void *m);
} rckpt_wire_msg_t;

/* 0, or -EINVAL when m holds a value its table refuses. */
int rckpt_wire_valid(const rckpt_wire_msg_t *d, const void *m);

/* Appends m as a frame of d (unframed when d->type is 0). 0, -EINVAL,
 * -ENOMEM, -EFBIG. */
int rckpt_wire_encode(rckpt_buf_t *out, const rckpt_wire_msg_t *d, const void *m);

/* Decodes src[0..len) into m (d->size bytes). 0, -EBADMSG,
 * RCKPT_FMT_EVERSION; m zeroed on failure. An unframed message must fill
 * src exactly. */
int rckpt_wire_decode(const rckpt_wire_msg_t *d, void *m, const uint8_t *src, size_t len);

/* Walking a decoded list: 1 and element i into elem (the list's element
 * struct), 0 past the end. The list was checked when it was decoded. */
typedef struct rckpt_wire_cursor {
	const rckpt_wire_msg_t *elem;
	const uint8_t *p;
	size_t bytes, pos;
	uint32_t n, i;
} rckpt_wire_cursor_t;

void rckpt_wire_cursor_init(rckpt_wire_cursor_t *c, const rckpt_wire_field_t *f,
			    const rckpt_wire_list_t *l);
int rckpt_wire_cursor_next(rckpt_wire_cursor_t *c, void *elem);

/* The pieces, for a message written a part at a time (a reply streamed
 * from an omap): one field's bytes (of a message rckpt_wire_valid passed:
 * a value past its width is cut short here), and a frame's begin. */
int rckpt_wire_put_field(rckpt_buf_t *out, const rckpt_wire_field_t *f, const void *m);
int rckpt_wire_begin(rckpt_buf_t *out, const rckpt_wire_msg_t *d, size_t *at);

#endif /* RCKPT_WIRE_FIELDS_H */
