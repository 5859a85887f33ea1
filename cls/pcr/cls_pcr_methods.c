/*
 * cls_pcr_methods.c — C bodies of the `pcr` object class.
 */
#include "cls_pcr_methods.h"

/* The formats this plugin reads and writes, with the versions it handles. */
static const rckpt_wire_format_range_t cls_pcr_formats[] = {
	{ "cls-wire", 1, RCKPT_WIRE_VERSION },
};

int cls_pcr_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return rckpt_cls_version_reply(out, "pcr", cls_pcr_formats,
				       sizeof(cls_pcr_formats) / sizeof(cls_pcr_formats[0]), in,
				       in_len);
}
