/*
 * rckpt_group_xchg.h — the exchange of a group save (issue 27): each rank
 * sends the owners of the chunks it does not encode the ranges the plan
 * (rckpt_group_plan.h) says they lack, over the trainer's transport, and
 * gets back, for every chunk it encodes, each of its pieces whole. Internal
 * to librckpt.
 */
#ifndef RCKPT_GROUP_XCHG_H
#define RCKPT_GROUP_XCHG_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt.h"
#include "rckpt_group_plan.h"

/* A rank's holding with its values: elements [first, first + n) of global
 * tensor `tensor`, at data (host memory, little-endian, in the tensor's
 * dtype). */
typedef struct rckpt_hold {
	uint32_t tensor;
	uint64_t first, n;
	const void *data;
} rckpt_hold_t;

/* A chunk this rank encodes: piece k of the layout's chunk at data[k]
 * (this rank's own memory when one holding has all of it, else a buffer
 * of the exchange's). */
typedef struct rckpt_owned {
	uint32_t chunk;
	const void **data;
} rckpt_owned_t;

typedef struct rckpt_group_data {
	rckpt_owned_t *owned; /* in chunk order */
	uint32_t nowned;
	void **bufs;          /* what the exchange allocated */
	size_t nbufs;
	uint64_t sent, received; /* bytes */
} rckpt_group_data_t;

/* Rank tr->rank's side of plan g (layout l of the global tensors ts) with
 * its holdings held[0..nheld) (the ranges it gave the plan, with data).
 * Every message goes in the plan's global order (by sender, then
 * receiver): one per pair, a 16-byte header (u32 magic "RCKG", u32
 * ranges, u64 bytes) then the ranges' bytes in the plan's order, so a
 * blocking, unbuffered transport cannot deadlock. -EBADMSG for a header
 * other than the plan says, -EINVAL (a holding without data, or a plan of
 * another size), the transport's error, -ENOMEM. */
int rckpt_group_exchange(rckpt_group_data_t *out, const rckpt_group_plan_t *g, const rckpt_layout_t *l,
			 const rckpt_tset_t *ts, const rckpt_hold_t *held, size_t nheld,
			 const rckpt_loc_transport_t *tr);
void rckpt_group_data_free(rckpt_group_data_t *d);

#endif /* RCKPT_GROUP_XCHG_H */
