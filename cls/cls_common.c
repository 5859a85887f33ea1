/*
 * cls_common.c — helpers shared by the C method bodies of every plugin.
 */
#include "cls_common.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "rckpt_build_info.h"

int rckpt_cls_out_reserve(rckpt_cls_out_t *out, size_t n)
{
	size_t want, cap;
	uint8_t *p;

	if (n > RCKPT_CLS_OUT_MAX || out->len > RCKPT_CLS_OUT_MAX - n)
		return -EFBIG;
	want = out->len + n;
	if (want <= out->cap)
		return 0;
	cap = out->cap ? out->cap : 256;
	while (cap < want)
		cap = cap > RCKPT_CLS_OUT_MAX / 2 ? RCKPT_CLS_OUT_MAX : cap * 2;
	p = realloc(out->p, cap);
	if (p == NULL)
		return -ENOMEM;
	out->p = p;
	out->cap = cap;
	return 0;
}

void rckpt_cls_out_free(rckpt_cls_out_t *out)
{
	free(out->p);
	memset(out, 0, sizeof(*out));
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

	rc = rckpt_cls_out_reserve(out, RCKPT_WIRE_VERSION_BOUND);
	if (rc)
		return rc;
	rc = rckpt_wire_version_encode(out->p + out->len, out->cap - out->len, &n, &v);
	if (rc)
		return rc;
	out->len += n;
	return 0;
}
