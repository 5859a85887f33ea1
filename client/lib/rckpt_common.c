/*
 * rckpt_common.c — what every wing of librckpt shares beyond the handle:
 * the rule for job and dataset names, and the walk over the pool's
 * namespaces that lists jobs and datasets alike.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_internal.h"

int rckpt_valid_name(const char *s)
{
	size_t i, n = strlen(s);
	if (n == 0 || n > 63)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

void rckpt_names_free(char **names, unsigned n)
{
	unsigned i;
	for (i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int rckpt_ns_list(rckpt_t *h, const char *oid_want, const char *prefix, const char *what,
		  const char *fn, char ***names, unsigned *n)
{
	const size_t pl = strlen(prefix);
	rados_ioctx_t io;
	rados_list_ctx_t lc;
	const char *oid, *ns;
	unsigned cap = 0;
	int rc;

	rckpt_clear_error(h);
	*names = NULL;
	*n = 0;
	if (h->cluster == NULL)
		return rckpt_fail(h, -ENOTCONN, fn, "not connected");
	if ((rc = rados_ioctx_create(h->cluster, h->pool, &io)))
		return rckpt_fail(h, rc, fn, "cannot open pool %s", h->pool);
	rados_ioctx_set_namespace(io, LIBRADOS_ALL_NSPACES);
	if ((rc = rados_nobjects_list_open(io, &lc))) {
		rados_ioctx_destroy(io);
		return rckpt_fail(h, rc, fn, "cannot list pool %s", h->pool);
	}
	while (rc == 0 && (rc = rados_nobjects_list_next(lc, &oid, NULL, &ns)) == 0) {
		if (strcmp(oid, oid_want) != 0 || ns == NULL || strncmp(ns, prefix, pl) != 0 ||
		    !rckpt_valid_name(ns + pl))
			continue;
		if (*n == cap) {
			char **p = realloc(*names, (cap = cap ? 2 * cap : 16) * sizeof(*p));
			if (p == NULL) {
				rc = -ENOMEM;
				break;
			}
			*names = p;
		}
		if (((*names)[*n] = strdup(ns + pl)) == NULL) {
			rc = -ENOMEM;
			break;
		}
		(*n)++;
	}
	rados_nobjects_list_close(lc);
	rados_ioctx_destroy(io);
	if (rc == -ENOENT)
		rc = 0;
	if (rc) {
		rckpt_names_free(*names, *n);
		*names = NULL;
		*n = 0;
		return rckpt_fail(h, rc, fn, "cannot list the %s of pool %s", what, h->pool);
	}
	qsort(*names, *n, sizeof(**names), cmp_str);
	return 0;
}
