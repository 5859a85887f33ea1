/*
 * rckpt_plugin.c — talking to the object classes in the OSDs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_internal.h"
#include "rckpt_wire.h"

/* The object every plugin query goes to. The OSD answers -ENOENT to a read
 * method called on an object that does not exist, even one that reads no
 * data, so this empty object is created on first use. */
#define PROBE_OID "rckpt.probe"

/* What the OSD means by the codes of a failed class call. */
const char *rckpt_plugin_hint(int rc)
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
			  h->pool, rckpt_plugin_hint(rc));
}

int rckpt_plugin_probe(rckpt_io_t *io, const char *oid, const char *plugin, rckpt_wire_version_t *v)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND];
	int n = io->ops->call(io, oid, plugin, "version", NULL, 0, buf, sizeof(buf));
	memset(v, 0, sizeof(*v));
	if (n < 0)
		return n;
	return rckpt_wire_version_decode(v, buf, (size_t)n);
}

int rckpt_plugin_call(rckpt_t *h, void *out, size_t out_cap, const char *oid, const char *cls,
		      const char *method, const void *in, size_t in_len)
{
	int rc;

	rckpt_io_t *io;

	rckpt_clear_error(h);
	if (!rckpt_connected(h))
		return rckpt_fail(h, -ENOTCONN, "rckpt_plugin_call", "handle not connected");
	if (oid == NULL || *oid == '\0' || cls == NULL || *cls == '\0' || method == NULL ||
	    *method == '\0' || (in == NULL && in_len) || (out == NULL && out_cap) ||
	    out_cap > INT32_MAX)
		return rckpt_fail(h, -EINVAL, "rckpt_plugin_call", "bad arguments");
	if ((rc = rckpt_io_open(h, "", &io)))
		return rckpt_fail(h, rc, "rckpt_plugin_call", "cannot open pool %s", h->pool);
	rc = io->ops->call(io, oid, cls, method, in, in_len, out, out_cap);
	io->ops->close(io);
	return rc < 0 ? call_failed(h, rc, "rckpt_plugin_call", oid, cls, method) : rc;
}

static int info_of(rckpt_t *h, const uint8_t *buf, int n, const char *plugin, rckpt_plugin_info_t *out,
		   const char *func);

int rckpt_plugin_version(rckpt_t *h, rckpt_plugin_info_t *out, const char *plugin)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND];
	rckpt_io_t *io;
	int n, rc;

	memset(out, 0, sizeof(*out));
	rckpt_clear_error(h);
	if (!rckpt_connected(h))
		return rckpt_fail(h, -ENOTCONN, "rckpt_plugin_version", "handle not connected");
	if (plugin == NULL || *plugin == '\0')
		return rckpt_fail(h, -EINVAL, "rckpt_plugin_version", "no plugin named");
	if ((rc = rckpt_io_open(h, "", &io)))
		return rckpt_fail(h, rc, "rckpt_plugin_version", "cannot open pool %s", h->pool);
	n = io->ops->call(io, PROBE_OID, plugin, "version", NULL, 0, buf, sizeof(buf));
	if (n == -ENOENT) {
		/* the empty probe object; creating it again changes nothing */
		uint64_t size;
		rc = io->ops->stat(io, PROBE_OID, &size);
		if (rc == -ENOENT)
			rc = io->ops->write_full(io, PROBE_OID, NULL, 0);
		if (rc < 0) {
			io->ops->close(io);
			return rckpt_fail(h, rc, "rckpt_plugin_version",
					  "probe object '%s' is missing from pool '%s' and this user "
					  "cannot create it",
					  PROBE_OID, h->pool);
		}
		n = io->ops->call(io, PROBE_OID, plugin, "version", NULL, 0, buf, sizeof(buf));
	}
	io->ops->close(io);
	if (n < 0)
		return call_failed(h, n, "rckpt_plugin_version", PROBE_OID, plugin, "version");
	return info_of(h, buf, n, plugin, out, "rckpt_plugin_version");
}

/* out from the `version` answer buf[0..n) of plugin. */
static int info_of(rckpt_t *h, const uint8_t *buf, int n, const char *plugin, rckpt_plugin_info_t *out,
		   const char *func)
{
	rckpt_wire_version_t v;
	unsigned i;
	int rc = rckpt_wire_version_decode(&v, buf, (size_t)n);
	if (rc)
		return rckpt_fail(h, rc, func, "the answer of plugin '%s' (%d bytes) cannot be read", plugin, n);
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

/* Tries for a probe object per OSD: names rckpt.probe.K, K < this. */
#define PROBE_TRIES_PER_OSD 64

int rckpt_plugin_versions(rckpt_t *h, const char *plugin, rckpt_osd_plugin_t *out, unsigned cap, unsigned *n)
{
	rckpt_io_t *io;
	int *osds = NULL, rc;
	unsigned nosd = 0, i, k, left, tries;
	char (*oid)[48] = NULL;

	rckpt_clear_error(h);
	*n = 0;
	if (!rckpt_connected(h))
		return rckpt_fail(h, -ENOTCONN, __func__, "handle not connected");
	if (plugin == NULL || *plugin == '\0' || out == NULL || cap == 0)
		return rckpt_fail(h, -EINVAL, __func__, "no plugin named, or no room");
	if ((rc = rckpt_io_open(h, "", &io)))
		return rckpt_fail(h, rc, __func__, "cannot open pool %s", h->pool);
	if (!io->ops->up_osds || !io->ops->primary_of) {
		io->ops->close(io);
		return rckpt_fail(h, -EOPNOTSUPP, __func__, "pool %s has no OSDs to ask", h->pool);
	}
	osds = calloc(cap, sizeof(*osds));
	oid = calloc(cap, sizeof(*oid));
	if (!osds || !oid) {
		rc = rckpt_fail(h, -ENOMEM, __func__, "out of memory");
		goto out;
	}
	if ((rc = io->ops->up_osds(io, osds, cap, &nosd))) {
		if (rc == -ERANGE)
			rc = rckpt_fail(h, rc, __func__, "more than %u OSDs are up", cap);
		else
			rc = rckpt_fail(h, rc, __func__, "cannot list the OSDs of the cluster");
		goto out;
	}
	/* a probe object for each OSD: the first names whose primary it is */
	left = nosd;
	tries = nosd * PROBE_TRIES_PER_OSD;
	for (k = 0; left > 0 && k < tries; k++) {
		char name[48];
		int osd;
		snprintf(name, sizeof(name), "%s.%u", PROBE_OID, k);
		if ((rc = io->ops->primary_of(io, name, &osd))) {
			rc = rckpt_fail(h, rc, __func__, "cannot map object %s to its OSD", name);
			goto out;
		}
		for (i = 0; i < nosd; i++)
			if (osds[i] == osd && oid[i][0] == '\0') {
				snprintf(oid[i], sizeof(oid[i]), "%s", name);
				left--;
			}
	}
	for (i = 0; i < nosd; i++) {
		uint8_t buf[RCKPT_WIRE_VERSION_BOUND];
		rckpt_osd_plugin_t *o = &out[i];
		int r;
		memset(o, 0, sizeof(*o));
		o->osd = osds[i];
		if (oid[i][0] == '\0') {
			o->rc = -ENOENT; /* primary of none of the names tried: of no PG of the pool, likely */
			continue;
		}
		r = io->ops->call(io, oid[i], plugin, "version", NULL, 0, buf, sizeof(buf));
		if (r == -ENOENT) { /* the empty probe object, made once; a reader finds it made */
			uint64_t size;
			int w = io->ops->stat(io, oid[i], &size);
			if (w == -ENOENT)
				w = io->ops->write_full(io, oid[i], NULL, 0);
			r = w < 0 ? w : io->ops->call(io, oid[i], plugin, "version", NULL, 0, buf, sizeof(buf));
		}
		o->rc = r < 0 ? r : info_of(h, buf, r, plugin, &o->info, __func__);
	}
	*n = nosd;
	rc = 0;
	rckpt_clear_error(h);
out:
	free(osds);
	free(oid);
	io->ops->close(io);
	return rc;
}
