/*
 * cls_common.h — what the C method bodies of every rckpt object class share.
 *
 * A method body is plain C: it gets the request bytes and fills an output
 * buffer; the C++ glue of each plugin (cls/cls_glue.hpp) moves bytes between
 * Ceph bufferlists and these spans. Bodies return 0 or a negative errno that
 * the OSD passes to the client unchanged. They never trust their input.
 */
#ifndef RCKPT_CLS_COMMON_H
#define RCKPT_CLS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_wire.h"

/* The most a method may return in one call; larger results use a cursor. */
#define RCKPT_CLS_OUT_MAX ((size_t)64 << 20)

/* A method's reply: the glue hands each body an empty buffer whose max is
 * RCKPT_CLS_OUT_MAX, and frees it after copying the reply out. */
typedef rckpt_buf_t rckpt_cls_out_t;
#define RCKPT_CLS_OUT_INIT { NULL, 0, 0, RCKPT_CLS_OUT_MAX }

typedef int (*rckpt_cls_method_fn)(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/* The body of every plugin's `version` method: the input must be empty
 * (-EINVAL otherwise); the reply is a version frame (formats/cls-wire.md)
 * naming `plugin`, the project version, the Ceph release the plugin was
 * built against, and the format ranges it understands. */
int rckpt_cls_version_reply(rckpt_cls_out_t *out, const char *plugin,
			    const rckpt_wire_format_range_t *formats, unsigned nformats,
			    const uint8_t *in, size_t in_len);

#endif /* RCKPT_CLS_COMMON_H */
