/*
 * rckpt_tset.c — the codec's tensor set (rckpt_tset.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_dtype.h"
#include "rckpt_tset.h"

#include "rckpt_codec.h"

_Static_assert(RCKPT_TSET_MAX_DIMS == RCKPT_MAX_DIMS, "a set's tensor has the public tensor's rank");

static int by_name(const void *a, const void *b)
{
	return strcmp(((const rckpt_ctensor_t *)a)->name, ((const rckpt_ctensor_t *)b)->name);
}

int rckpt_tset_sort(rckpt_tset_t *s)
{
	unsigned i;
	if (s->ntensors > 1)
		qsort(s->t, s->ntensors, sizeof(*s->t), by_name);
	for (i = 1; i < s->ntensors; i++)
		if (strcmp(s->t[i - 1].name, s->t[i].name) == 0)
			return -EINVAL;
	return 0;
}

const rckpt_ctensor_t *rckpt_tset_find(const rckpt_tset_t *s, const char *name)
{
	rckpt_ctensor_t key;
	if (s == NULL || s->ntensors == 0 || name == NULL)
		return NULL;
	key.name = name;
	return bsearch(&key, s->t, s->ntensors, sizeof(*s->t), by_name);
}

static int from_public(rckpt_ctensor_t *o, const rckpt_tensor_t *t)
{
	unsigned d;
	if (t->name == NULL || t->dtype < RCKPT_DT_F32 || t->dtype > RCKPT_DT_BF16 || t->ndim > RCKPT_MAX_DIMS ||
	    (t->data == NULL && t->ndim))
		return -EINVAL;
	o->name = t->name;
	o->dtype = t->dtype;
	o->ndim = t->ndim;
	o->n = 1;
	for (d = 0; d < t->ndim; d++) {
		o->shape[d] = t->shape[d];
		if (o->shape[d] && o->n > UINT64_MAX / o->shape[d])
			return -EINVAL;
		o->n *= o->shape[d];
	}
	o->data = t->data;
	return 0;
}

int rckpt_tset_view(rckpt_tset_t *s, const rckpt_tensor_t *t, unsigned n)
{
	unsigned i;
	int rc = 0;
	memset(s, 0, sizeof(*s));
	if (n && t == NULL)
		return -EINVAL;
	s->t = calloc(n ? n : 1, sizeof(*s->t));
	if (s->t == NULL)
		return -ENOMEM;
	for (i = 0; i < n && rc == 0; i++)
		rc = from_public(&s->t[i], &t[i]);
	s->ntensors = n;
	if (rc == 0)
		rc = rckpt_tset_sort(s);
	if (rc)
		rckpt_tset_free(s);
	return rc;
}

void rckpt_tset_free(rckpt_tset_t *s)
{
	free(s->t);
	memset(s, 0, sizeof(*s));
}

unsigned rckpt_ctensor_kind(const rckpt_ctensor_t *t)
{
	return t->kind1 ? t->kind1 - 1 : rckpt_layer_kind(t->name, t->ndim, t->shape);
}

void rckpt_ctensor_set_role(rckpt_ctensor_t *t, const rckpt_tensor_role_t *r)
{
	static const unsigned kind[] = { 0, RCKPT_LK_MOMENT1, RCKPT_LK_MOMENT2, RCKPT_LK_OPTIM };
	if (r->role == RCKPT_ROLE_MODEL || r->role >= sizeof(kind) / sizeof(kind[0]))
		return;
	t->kind1 = kind[r->role] + 1;
	t->param = r->param;
	t->eps = r->eps;
}
