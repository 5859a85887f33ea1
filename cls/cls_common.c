/*
 * cls_common.c — helpers shared by the C method bodies of every plugin.
 */
#include "cls_common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rckpt_build_info.h"

static void why(rckpt_cls_obj_t *o, const char *fmt, va_list ap)
{
	if (o->why[0] == '\0') /* the first reason is the cause */
		vsnprintf(o->why, sizeof(o->why), fmt, ap);
}

int rckpt_cls_fail(rckpt_cls_obj_t *o, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	why(o, fmt, ap);
	va_end(ap);
	return rc;
}

int rckpt_cls_damaged(rckpt_cls_obj_t *o, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	why(o, fmt, ap);
	va_end(ap);
	o->damaged = 1;
	return rc;
}

int rckpt_cls_version_reply(rckpt_cls_out_t *out, const char *plugin,
			    const rckpt_wire_format_range_t *formats, unsigned nformats,
			    const uint8_t *in, size_t in_len)
{
	rckpt_wire_version_t v;
	size_t n;
	int rc;

	(void)in;
	if (in_len != 0 || nformats > RCKPT_WIRE_FORMATS_MAX)
		return -EINVAL;
	memset(&v, 0, sizeof(v));
	if (strlen(plugin) > RCKPT_WIRE_NAME_MAX)
		return -EINVAL;
	strcpy(v.plugin, plugin);
	v.major = RCKPT_BUILD_VERSION_MAJOR;
	v.minor = RCKPT_BUILD_VERSION_MINOR;
	v.patch = RCKPT_BUILD_VERSION_PATCH;
	snprintf(v.built_for, sizeof(v.built_for), "%s", RCKPT_CEPH_RELEASE);
	v.nformats = nformats;
	memcpy(v.formats, formats, nformats * sizeof(*formats));

	rc = rckpt_buf_reserve(out, RCKPT_WIRE_VERSION_BOUND);
	if (rc)
		return rc;
	rc = rckpt_wire_version_encode(out->p + out->len, out->cap - out->len, &n, &v);
	if (rc)
		return rc;
	out->len += n;
	return 0;
}
