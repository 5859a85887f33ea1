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

const char *rckpt_plugin_strerror(int rc)
{
	return rckpt_plugin_hint(rc);
}

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
	case -ENODATA:
		return "no object to call the class on that this user may use";
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
/* Objects of the pool looked at, at most, for ones the OSDs without a
 * probe object serve: each costs a monitor command. */
#define BORROW_LOOKS 512

/* What rckpt_plugin_versions_in gathers: per OSD (by index into osds),
 * the namespace and name of an object it serves, to call on. */
typedef struct survey {
	rckpt_t *h;
	rckpt_io_t *io;  /* of namespace ns (borrow_fn opens others itself) */
	const int *osds;
	unsigned nosd, left, looked;
	char (*oid)[48];
	char (*ns)[64];
	int rc; /* the first failure to map an object */
} survey_t;

/* One object of the listing: kept for the OSD that serves it, when that
 * OSD has none yet. Names that do not fit are passed over. */
static int borrow_fn(void *arg, const char *oid, const char *ns)
{
	survey_t *s = arg;
	rckpt_io_t *io;
	unsigned i;
	int osd, rc;
	if (s->left == 0 || s->looked == BORROW_LOOKS)
		return 1;
	if (strlen(oid) >= sizeof(s->oid[0]) || strlen(ns) >= sizeof(s->ns[0]))
		return 0;
	s->looked++;
	if ((rc = rckpt_io_open(s->h, ns, &io)))
		return s->rc = rc;
	rc = io->ops->primary_of(io, oid, &osd);
	io->ops->close(io);
	if (rc)
		return s->rc = rc;
	for (i = 0; i < s->nosd; i++)
		if (s->osds[i] == osd && s->oid[i][0] == '\0') {
			snprintf(s->oid[i], sizeof(s->oid[i]), "%s", oid);
			snprintf(s->ns[i], sizeof(s->ns[i]), "%s", ns);
			s->left--;
		}
	return 0;
}

/* The `version` of plugin from OSD i's object, into o. */
static void ask_osd(survey_t *s, unsigned i, const char *plugin, rckpt_osd_plugin_t *o)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND];
	rckpt_io_t *io;
	int r;
	if ((r = rckpt_io_open(s->h, s->ns[i], &io))) {
		o->rc = r;
		return;
	}
	r = io->ops->call(io, s->oid[i], plugin, "version", NULL, 0, buf, sizeof(buf));
	io->ops->close(io);
	o->rc = r < 0 ? r : info_of(s->h, buf, r, plugin, &o->info, "rckpt_plugin_versions");
}

int rckpt_plugin_versions(rckpt_t *h, const char *plugin, rckpt_osd_plugin_t *out, unsigned cap, unsigned *n)
{
	return rckpt_plugin_versions_in(h, NULL, plugin, out, cap, n);
}

int rckpt_plugin_versions_in(rckpt_t *h, const char *ns, const char *plugin, rckpt_osd_plugin_t *out,
			     unsigned cap, unsigned *n)
{
	survey_t s = { .h = h };
	int *osds = NULL, *noprobe = NULL, rc;
	unsigned nosd = 0, i, k, tries;
	const char *func = ns ? "rckpt_plugin_versions_in" : "rckpt_plugin_versions";

	rckpt_clear_error(h);
	*n = 0;
	if (!rckpt_connected(h))
		return rckpt_fail(h, -ENOTCONN, func, "handle not connected");
	if (plugin == NULL || *plugin == '\0' || out == NULL || cap == 0)
		return rckpt_fail(h, -EINVAL, func, "no plugin named, or no room");
	if (ns && strlen(ns) >= sizeof(s.ns[0]))
		return rckpt_fail(h, -ENAMETOOLONG, func, "namespace '%s' is too long", ns);
	if ((rc = rckpt_io_open(h, ns ? ns : "", &s.io)))
		return rckpt_fail(h, rc, func, "cannot open pool %s", h->pool);
	if (!s.io->ops->up_osds || !s.io->ops->primary_of) {
		s.io->ops->close(s.io);
		return rckpt_fail(h, -EOPNOTSUPP, func, "pool %s has no OSDs to ask", h->pool);
	}
	osds = calloc(cap, sizeof(*osds));
	noprobe = calloc(cap, sizeof(*noprobe));
	s.oid = calloc(cap, sizeof(*s.oid));
	s.ns = calloc(cap, sizeof(*s.ns));
	if (!osds || !noprobe || !s.oid || !s.ns) {
		rc = rckpt_fail(h, -ENOMEM, func, "out of memory");
		goto out;
	}
	if ((rc = s.io->ops->up_osds(s.io, osds, cap, &nosd))) {
		if (rc == -ERANGE)
			rc = rckpt_fail(h, rc, func, "more than %u OSDs are up", cap);
		else
			rc = rckpt_fail(h, rc, func, "cannot list the OSDs of the cluster");
		goto out;
	}
	s.osds = osds;
	s.nosd = s.left = nosd;
	if (ns == NULL) {
		/* a probe object for each OSD: the first names whose primary it is */
		tries = nosd * PROBE_TRIES_PER_OSD;
		for (k = 0; s.left > 0 && k < tries; k++) {
			char name[48];
			int osd;
			snprintf(name, sizeof(name), "%s.%u", PROBE_OID, k);
			if ((rc = s.io->ops->primary_of(s.io, name, &osd))) {
				rc = rckpt_fail(h, rc, func, "cannot map object %s to its OSD", name);
				goto out;
			}
			for (i = 0; i < nosd; i++)
				if (osds[i] == osd && s.oid[i][0] == '\0') {
					snprintf(s.oid[i], sizeof(s.oid[i]), "%s", name);
					s.left--;
				}
		}
		/* made empty where missing, once; a reader finds them made, or
		 * borrows another object below */
		s.left = 0;
		for (i = 0; i < nosd; i++) {
			uint64_t size;
			int w;
			if (s.oid[i][0] == '\0')
				continue; /* primary of none of the names: of no PG of the pool, likely */
			w = s.io->ops->stat(s.io, s.oid[i], &size);
			if (w == -ENOENT)
				w = s.io->ops->write_full(s.io, s.oid[i], NULL, 0);
			if (w < 0) {
				noprobe[i] = w;
				s.oid[i][0] = '\0';
				s.left++;
			}
		}
	}
	/* OSDs with no object yet: any object of the pool (of namespace ns)
	 * that they serve; a method that reads no data runs on any object */
	if (s.left > 0) {
		rckpt_io_t *all = s.io;
		if (ns == NULL && (rc = rckpt_io_open(h, RCKPT_IO_ALL_NS, &all))) {
			rc = rckpt_fail(h, rc, func, "cannot open pool %s", h->pool);
			goto out;
		}
		rc = all->ops->objects(all, borrow_fn, &s);
		if (all != s.io)
			all->ops->close(all);
		if (s.rc) {
			rc = rckpt_fail(h, s.rc, func, "cannot map the objects of pool %s to their OSDs", h->pool);
			goto out;
		}
		if (rc < 0 && !(ns == NULL && rc == -EPERM)) {
			/* a user of one namespace may not list the pool: the
			 * OSDs without a probe are then not asked */
			rc = rckpt_fail(h, rc, func, "cannot list the objects of pool %s", h->pool);
			goto out;
		}
	}
	for (i = 0; i < nosd; i++) {
		rckpt_osd_plugin_t *o = &out[i];
		memset(o, 0, sizeof(*o));
		o->osd = osds[i];
		if (s.oid[i][0] != '\0')
			ask_osd(&s, i, plugin, o);
		else if (noprobe[i] || ns)
			o->rc = -ENODATA; /* nothing this user could call on */
		else
			o->rc = -ENOENT; /* serves no PG of the pool, likely */
	}
	*n = nosd;
	rc = 0;
	rckpt_clear_error(h);
out:
	free(osds);
	free(noprobe);
	free(s.oid);
	free(s.ns);
	s.io->ops->close(s.io);
	return rc;
}
