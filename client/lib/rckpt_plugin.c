/*
 * rckpt_plugin.c — talking to the object classes in the OSDs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rckpt_internal.h"
#include "rckpt_wire.h"

/* The object every plugin query goes to. The OSD answers -ENOENT to a read
 * method called on an object that does not exist, even one that reads no
 * data, so this empty object is created on first use. */
#define PROBE_OID "rckpt.probe"

/* What the OSD means by the codes of a failed class call. */
static const char *call_hint(int rc)
{
	switch (rc) {
	case -EOPNOTSUPP:
		return "the OSD has no such class or method: is the plugin installed in "
		       "'osd class dir' and loadable?";
	case -EPERM:
		return "not permitted: the class is missing from the OSD's 'osd class load list', "
		       "or the user's caps lack 'x' on this pool";
	case -EIO:
		return "the OSD could not load the class (see the OSD log)";
	case -ETIMEDOUT:
		return "no answer from the OSD within the timeout";
	case -ENOENT:
		return "no such object";
	default:
		return "call failed";
	}
}

static int call_failed(rckpt_t *h, int rc, const char *func, const char *oid, const char *cls,
		       const char *method)
{
	return rckpt_fail(h, rc, func, "%s.%s on object '%s' in pool '%s': %s", cls, method, oid,
			  h->pool, call_hint(rc));
}

int rckpt_plugin_call(rckpt_t *h, void *out, size_t out_cap, const char *oid, const char *cls,
		      const char *method, const void *in, size_t in_len)
{
	int rc;

	rckpt_clear_error(h);
	if (h->ioctx == NULL)
		return rckpt_fail(h, -ENOTCONN, "rckpt_plugin_call", "handle not connected");
	if (oid == NULL || *oid == '\0' || cls == NULL || *cls == '\0' || method == NULL ||
	    *method == '\0' || (in == NULL && in_len) || (out == NULL && out_cap) ||
	    out_cap > INT32_MAX)
		return rckpt_fail(h, -EINVAL, "rckpt_plugin_call", "bad arguments");
	rc = rados_exec(h->ioctx, oid, cls, method, in, in_len, out, out_cap);
	return rc < 0 ? call_failed(h, rc, "rckpt_plugin_call", oid, cls, method) : rc;
}

/* Creates the empty probe object; idempotent. */
static int create_probe(rckpt_t *h)
{
	rados_write_op_t op = rados_create_write_op();
	int rc;

	if (op == NULL)
		return -ENOMEM;
	rados_write_op_create(op, LIBRADOS_CREATE_IDEMPOTENT, NULL);
	rc = rados_write_op_operate(op, h->ioctx, PROBE_OID, NULL, 0);
	rados_release_write_op(op);
	return rc;
}

int rckpt_plugin_version(rckpt_t *h, rckpt_plugin_info_t *out, const char *plugin)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v;
	unsigned i;
	int n, rc;

	memset(out, 0, sizeof(*out));
	rckpt_clear_error(h);
	if (h->ioctx == NULL)
		return rckpt_fail(h, -ENOTCONN, "rckpt_plugin_version", "handle not connected");
	if (plugin == NULL || *plugin == '\0')
		return rckpt_fail(h, -EINVAL, "rckpt_plugin_version", "no plugin named");
	n = rados_exec(h->ioctx, PROBE_OID, plugin, "version", NULL, 0, (char *)buf, sizeof(buf));
	if (n == -ENOENT) {
		rc = create_probe(h);
		if (rc < 0)
			return rckpt_fail(h, rc, "rckpt_plugin_version",
					  "probe object '%s' is missing from pool '%s' and this user "
					  "cannot create it",
					  PROBE_OID, h->pool);
		n = rados_exec(h->ioctx, PROBE_OID, plugin, "version", NULL, 0, (char *)buf,
			       sizeof(buf));
	}
	if (n < 0)
		return call_failed(h, n, "rckpt_plugin_version", PROBE_OID, plugin, "version");
	rc = rckpt_wire_version_decode(&v, buf, (size_t)n);
	if (rc)
		return rckpt_fail(h, rc, "rckpt_plugin_version",
				  "the answer of plugin '%s' (%d bytes) cannot be read", plugin, n);
	snprintf(out->name, sizeof(out->name), "%s", v.plugin);
	out->major = v.major;
	out->minor = v.minor;
	out->patch = v.patch;
	snprintf(out->built_for, sizeof(out->built_for), "%s", v.built_for);
	out->nformats = v.nformats;
	for (i = 0; i < v.nformats; i++) {
		snprintf(out->formats[i].name, sizeof(out->formats[i].name), "%s", v.formats[i].name);
		out->formats[i].min_version = v.formats[i].min_version;
		out->formats[i].max_version = v.formats[i].max_version;
	}
	return 0;
}
