/*
 * rckpt_group_world.h — the shards of a group save's ranks as one model
 * (rckpt_group_world.c). Internal to librckpt.
 */
#ifndef RCKPT_GROUP_WORLD_H
#define RCKPT_GROUP_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt.h"
#include "rckpt_buf.h"
#include "rckpt_layout.h"
#include "rckpt_tset.h"

/* One shard as a rank described it. */
typedef struct sdesc {
	unsigned rank, dtype, ndim;
	char name[1025];
	uint64_t shape[RCKPT_MAX_DIMS], offset, count;
} sdesc_t;

/* The group's global tensors and every rank's holdings, from the
 * gathered descriptions. */
typedef struct world {
	rckpt_tensor_t *t;   /* the global tensors, by name (data: a placeholder) */
	sdesc_t *s;          /* every shard; t[].name points into these */
	size_t ns;
	unsigned nt;
	rckpt_tset_t ts;     /* the same, as the encoder's set */
	rckpt_piece_t **held; /* [p]: each rank's ranges, tensors as in ts */
	size_t *nheld;
	unsigned p;
} world_t;

/* s[0..n) as bytes into b (rckpt_group_world.c says how): 0, -EINVAL (a
 * bad shard), -ENOMEM. */
int rckpt_group_describe(rckpt_buf_t *b, const rckpt_shard_t *s, unsigned n);
/* The world of the p ranks' descriptions all[r][0..lens[r]): 0, or
 * -EINVAL when they do not make one model, -ENOMEM. */
int rckpt_group_world_make(world_t *w, uint8_t **all, const size_t *lens, unsigned p);
void rckpt_group_world_free(world_t *w);

#endif
