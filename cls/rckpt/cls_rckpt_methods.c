/*
 * cls_rckpt_methods.c — C bodies of the `rckpt` object class.
 */
#include "cls_rckpt_methods.h"

/* The formats this plugin reads and writes, with the versions it handles. */
static const rckpt_wire_format_range_t cls_rckpt_formats[] = {
	{ "cls-wire", 1, RCKPT_WIRE_VERSION },
};

int cls_rckpt_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return rckpt_cls_version_reply(out, "rckpt", cls_rckpt_formats,
				       sizeof(cls_rckpt_formats) / sizeof(cls_rckpt_formats[0]), in,
				       in_len);
}
