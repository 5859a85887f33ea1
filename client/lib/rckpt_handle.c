/*
 * rckpt_handle.c — the handle: create, connect, destroy, versions (its
 * errors: rckpt_common.c).
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_build_info.h"
#include "rckpt_gpu.h"
#include "rckpt_internal.h"

#define DEFAULT_POOL "rckpt"
#define DEFAULT_USER "admin"
#define DEFAULT_TIMEOUT_S 30u

unsigned rckpt_version_number(void)
{
	return RCKPT_VERSION_NUMBER;
}

const char *rckpt_version_string(void)
{
	return RCKPT_BUILD_VERSION_STRING RCKPT_BUILD_FEATURES;
}

int rckpt_create(rckpt_t **out)
{
	rckpt_t *h = calloc(1, sizeof(*h));
	*out = h;
	return h ? 0 : -ENOMEM;
}

void rckpt_destroy(rckpt_t *h)
{
	if (h == NULL)
		return;
	if (h->ioctx)
		rados_ioctx_destroy(h->ioctx);
	if (h->cluster)
		rados_shutdown(h->cluster);
	rckpt_dump_close(h->dump);
	free(h->pool);
	free(h);
}

static int set_conf(rckpt_t *h, rados_t c, const char *key, const char *val)
{
	int rc = rados_conf_set(c, key, val);
	if (rc < 0)
		return rckpt_fail(h, rc, "rckpt_connect", "cannot set %s=%s", key, val);
	return 0;
}

static int connect_here(rckpt_t *h, const rckpt_connect_opts_t *opts);

typedef struct connect_arg {
	rckpt_t *h;
	const rckpt_connect_opts_t *opts;
	int rc;
} connect_arg_t;

static void *connect_thread(void *p)
{
	connect_arg_t *a = p;
	a->rc = connect_here(a->h, a->opts);
	return NULL;
}

/* librados draws a new client's address (its nonce) from a random
 * generator of the calling thread's. A process forked from one that has
 * connected on the same thread (a DataLoader's workers, trainers started
 * by fork) would draw the same address as its parent and its siblings,
 * and the OSDs' sessions with them would keep replacing each other
 * (stalls, then timeouts under load). A thread of its own starts a fresh
 * generator, so every connection gets an address of its own. */
int rckpt_connect(rckpt_t *h, const rckpt_connect_opts_t *opts)
{
	connect_arg_t a = { h, opts, 0 };
	pthread_t t;
	if (pthread_create(&t, NULL, connect_thread, &a) != 0)
		return connect_here(h, opts);
	pthread_join(t, NULL);
	return a.rc;
}

static int connect_here(rckpt_t *h, const rckpt_connect_opts_t *opts)
{
	rados_t c = NULL;
	rados_ioctx_t io = NULL;
	char name[128], timeout[16];
	const char *conf, *user, *pool;
	unsigned tmo, read_from;
	int rc;

	rckpt_clear_error(h);
	if (opts == NULL || opts->version != RCKPT_CONNECT_OPTS_VERSION)
		return rckpt_fail(h, -EINVAL, "rckpt_connect",
				  "options missing or of version %u, where this library takes %u (start from "
				  "RCKPT_CONNECT_OPTS_INIT of its rckpt.h)",
				  opts ? opts->version : 0, RCKPT_CONNECT_OPTS_VERSION);
	read_from = opts->read_from;
	if (read_from > RCKPT_READ_LOCALIZE)
		return rckpt_fail(h, -EINVAL, "rckpt_connect", "read_from %u is none of RCKPT_READ_*", read_from);
	if (h->cluster)
		return rckpt_fail(h, -EINVAL, "rckpt_connect", "handle already connected");
	conf = opts->conf_path ? opts->conf_path : getenv("CEPH_CONF");
	if (conf && *conf == '\0')
		conf = NULL;
	user = opts->user && *opts->user ? opts->user : DEFAULT_USER;
	pool = opts->pool && *opts->pool ? opts->pool : DEFAULT_POOL;
	tmo = opts->timeout_s ? opts->timeout_s : DEFAULT_TIMEOUT_S;
	if (strncmp(user, "client.", 7) == 0)
		user += 7;
	if (snprintf(name, sizeof(name), "client.%s", user) >= (int)sizeof(name))
		return rckpt_fail(h, -EINVAL, "rckpt_connect", "user name too long");

	rc = rados_create2(&c, "ceph", name, 0);
	if (rc < 0)
		return rckpt_fail(h, rc, "rckpt_connect", "rados_create2(%s) failed", name);
	rc = rados_conf_read_file(c, conf);
	if (rc < 0) {
		rckpt_fail(h, rc, "rckpt_connect", "cannot read Ceph config %s",
			   conf ? conf : "(default search path; set CEPH_CONF)");
		goto out;
	}
	snprintf(timeout, sizeof(timeout), "%u", tmo);
	/* Without these a call against a dead cluster waits for ever. */
	if ((rc = set_conf(h, c, "client_mount_timeout", timeout)) ||
	    (rc = set_conf(h, c, "rados_mon_op_timeout", timeout)) ||
	    (rc = set_conf(h, c, "rados_osd_op_timeout", timeout)))
		goto out;
	rc = rados_connect(c);
	if (rc < 0) {
		rckpt_fail(h, rc, "rckpt_connect", "cannot connect to the cluster of %s as %s",
			   conf ? conf : "the default config", name);
		goto out;
	}
	rc = rados_ioctx_create(c, pool, &io);
	if (rc < 0) {
		rckpt_fail(h, rc, "rckpt_connect", rc == -ENOENT ? "pool '%s' does not exist"
								   : "cannot open pool '%s'",
			   pool);
		goto out;
	}
	h->pool = strdup(pool);
	if (h->pool == NULL) {
		rc = rckpt_fail(h, -ENOMEM, "rckpt_connect", "out of memory");
		goto out;
	}
	h->cluster = c;
	h->ioctx = io;
	h->rados.ioctx = io;
	h->rados.read_flags = read_from == RCKPT_READ_BALANCE	  ? LIBRADOS_OPERATION_BALANCE_READS
			      : read_from == RCKPT_READ_LOCALIZE ? LIBRADOS_OPERATION_LOCALIZE_READS
								 : 0;
	h->io_open = rckpt_io_rados_open;
	h->io_arg = &h->rados;
	return 0;
out:
	if (io)
		rados_ioctx_destroy(io);
	rados_shutdown(c);
	return rc;
}

int rckpt_cluster_fsid(rckpt_t *h, char *out, size_t cap)
{
	int rc;

	rckpt_clear_error(h);
	if (h->cluster == NULL)
		return rckpt_fail(h, -ENOTCONN, "rckpt_cluster_fsid", "handle not connected");
	if (cap < 37)
		return rckpt_fail(h, -ERANGE, "rckpt_cluster_fsid", "buffer of %zu bytes, need 37", cap);
	rc = rados_cluster_fsid(h->cluster, out, cap);
	return rc < 0 ? rckpt_fail(h, rc, "rckpt_cluster_fsid", "rados_cluster_fsid failed") : 0;
}

const char *rckpt_pool_name(const rckpt_t *h)
{
	return h ? h->pool : NULL;
}

int rckpt_gpu_info(rckpt_gpu_info_t *out)
{
	rckpt_gpu_probe_t p;

	memset(out, 0, sizeof(*out));
	rckpt_gpu_probe(&p);
	out->built_with_cuda = p.built_with_cuda;
	out->runtime_version = p.runtime_version;
	out->driver_version = p.driver_version;
	out->device_count = p.device_count;
	memcpy(out->device_name, p.device_name, sizeof(out->device_name));
	return 0;
}
