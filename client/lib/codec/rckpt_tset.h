/*
 * rckpt_tset.h — the codec's tensor set: the tensors of one step, sorted by
 * name, each a name, a dtype, a shape and a pointer to its values. The
 * codec reads tensors only through this; where they come from is the
 * producer's business: a safetensors file (rckpt_safetensors.h), or the
 * trainer's rckpt_tensor_t array (rckpt_tset_view).
 *
 * A set does not own its tensors' names or values. Its array `t` is owned
 * by whoever filled it (rckpt_tset_free frees what rckpt_tset_view made).
 */
#ifndef RCKPT_TSET_H
#define RCKPT_TSET_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt.h"

#define RCKPT_TSET_MAX_DIMS RCKPT_MAX_DIMS

typedef struct rckpt_ctensor {
	const char *name;
	unsigned dtype; /* enum rckpt_dtype (formats/rckpt_dtype.h) */
	unsigned ndim;
	uint64_t shape[RCKPT_TSET_MAX_DIMS];
	uint64_t n;          /* elements: the product of the shape */
	const uint8_t *data; /* n * dtype size bytes, little-endian; host or device memory */
	unsigned kind1;      /* the layer kind + 1 when set by the caller (a
				group save's part of a tensor: its kind is the
				whole tensor's); 0: from the name and shape */
	/* An optimizer's state (kind1 - 1 >= RCKPT_LK_MOMENT1): */
	const char *param;   /* the parameter whose state it is, or NULL: a first
				and a second moment of the same parameter pair
				up for the update error */
	double eps;          /* a second moment's eps in the update
				m / (sqrt(v) + eps), in v's units (Adam's eps
				times sqrt(1 - beta2^t)); 0: 1e-8 */
} rckpt_ctensor_t;

/* t's layer kind (enum rckpt_layer_kind). */
unsigned rckpt_ctensor_kind(const rckpt_ctensor_t *t);

/* Gives t the role r->role (enum rckpt_role; RCKPT_ROLE_MODEL leaves t as
 * it is), r->param and r->eps: the kind, partner and eps the encoder
 * reads. The role must be valid (rckpt_job_set_roles checks it). */
void rckpt_ctensor_set_role(rckpt_ctensor_t *t, const rckpt_tensor_role_t *r);

typedef struct rckpt_tset {
	unsigned ntensors;
	rckpt_ctensor_t *t; /* sorted by name, names distinct */
} rckpt_tset_t;

/* Sorts t[0..ntensors) by name. -EINVAL when two share a name. */
int rckpt_tset_sort(rckpt_tset_t *s);

/* The tensor called name, or NULL. The set must be sorted. */
const rckpt_ctensor_t *rckpt_tset_find(const rckpt_tset_t *s, const char *name);

/* A set over the trainer's tensors t[0..n), borrowed (names and values are
 * the caller's), sorted. -EINVAL for a tensor without a name, of an unknown
 * dtype, of more than RCKPT_MAX_DIMS dimensions, with elements but no data,
 * of a size that overflows, or named twice; -ENOMEM. On failure the set is
 * empty and needs no free. */
int rckpt_tset_view(rckpt_tset_t *s, const rckpt_tensor_t *t, unsigned n);

/* Frees what rckpt_tset_view allocated; the set is empty after. */
void rckpt_tset_free(rckpt_tset_t *s);

#endif /* RCKPT_TSET_H */
