/*
 * rckpt_wire_version.c — the `version` reply of every plugin
 * (formats/cls-wire.md), described once by a field table
 * (rckpt_wire_fields.h).
 */
#include "rckpt_wire.h"

#include <errno.h>
#include <stddef.h>

#include "rckpt_wire_fields.h"

#define FLD(T, f, k) .name = #f, .offset = offsetof(T, f), .kind = RCKPT_WF_##k
#define ROOM(T, f) (sizeof(((T *)0)->f) - 1) /* a string member's most bytes */
#define NAME_STR(T, f) FLD(T, f, STR), .width = 1, .min = 1, .max = ROOM(T, f), .flags = RCKPT_WF_NAME

static int range_rule(const void *m)
{
	const rckpt_wire_format_range_t *r = m;
	return r->min_version > r->max_version ? -EINVAL : 0;
}

static const rckpt_wire_field_t range_f[] = {
	{ NAME_STR(rckpt_wire_format_range_t, name) },
	{ FLD(rckpt_wire_format_range_t, min_version, U16) },
	{ FLD(rckpt_wire_format_range_t, max_version, U16) },
};
static const rckpt_wire_msg_t range_desc = {
	.name = "format", .size = sizeof(rckpt_wire_format_range_t), .nfields = 3, .fields = range_f,
	.rule = range_rule,
};

static const rckpt_wire_field_t version_f[] = {
	{ NAME_STR(rckpt_wire_version_t, plugin) },
	{ FLD(rckpt_wire_version_t, major, U16) },
	{ FLD(rckpt_wire_version_t, minor, U16) },
	{ FLD(rckpt_wire_version_t, patch, U16) },
	{ FLD(rckpt_wire_version_t, built_for, STR), .width = 1, .max = ROOM(rckpt_wire_version_t, built_for),
	  .flags = RCKPT_WF_PRINTABLE },
	{ FLD(rckpt_wire_version_t, nformats, U32), .width = 1, .max = RCKPT_WIRE_FORMATS_MAX },
	{ FLD(rckpt_wire_version_t, formats, ARRAY), .count = 5,
	  .max = sizeof(((rckpt_wire_version_t *)0)->formats) / sizeof(rckpt_wire_format_range_t),
	  .elem = &range_desc },
};

const rckpt_wire_msg_t rckpt_wire_version_desc = {
	.name = "version", .type = RCKPT_MSG_VERSION_REPLY, .version = 1, .compat = 1, .oldest = 1,
	.newest = 1, .size = sizeof(rckpt_wire_version_t), .nfields = 7, .fields = version_f,
};

int rckpt_wire_version_encode(uint8_t *dst, size_t cap, size_t *out_len, const rckpt_wire_version_t *v)
{
	rckpt_buf_t b = { dst, 0, cap, cap };
	int rc = cap ? rckpt_wire_encode(&b, &rckpt_wire_version_desc, v) : -EFBIG; /* max 0 is no limit */
	*out_len = rc ? 0 : b.len;
	return rc == -EFBIG ? -ERANGE : rc;
}

int rckpt_wire_version_decode(rckpt_wire_version_t *out, const uint8_t *src, size_t len)
{
	return rckpt_wire_decode(&rckpt_wire_version_desc, out, src, len);
}
