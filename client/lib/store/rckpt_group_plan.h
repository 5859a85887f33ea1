/*
 * rckpt_group_plan.h — how a group of ranks shares one step's save (the
 * distributed save of issue 27, whose protocol builds on it): which rank
 * encodes each chunk of the global layout, and which ranges of the ranks'
 * tensors move to it first. Chunks follow the global layout, never the
 * ranks, so a job restarted on another number of ranks keeps its chains.
 * Pure: every rank computes the same plan from the same inputs, without
 * communicating. Internal to librckpt.
 */
#ifndef RCKPT_GROUP_PLAN_H
#define RCKPT_GROUP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_layout.h"
#include "rckpt_manifest.h"
#include "rckpt_tset.h"

/* Elements [first, first + n) of global tensor `tensor` go from rank
 * `from` to rank `to`, which encodes chunk `chunk`. */
typedef struct rckpt_xfer {
	uint32_t chunk, tensor;
	uint64_t first, n;
	unsigned from, to;
} rckpt_xfer_t;

typedef struct rckpt_group_plan {
	unsigned p;
	uint32_t nchunks;
	unsigned *owner;    /* [nchunks]: the rank that encodes and appends chunk c */
	uint64_t *load;     /* [p]: elements of the chunks each rank encodes */
	uint64_t *sent;     /* [p]: elements each rank sends */
	rckpt_xfer_t *xfer; /* sorted by (from, to, chunk, tensor, first) */
	size_t nxfer;
} rckpt_group_plan_t;

/* The plan for layout l of the global tensors ts (names, shapes) over p
 * ranks, rank r holding the ranges held[r][0..nheld[r]) (pieces of ts's
 * tensors, any order; ranks may hold the same elements: replication).
 * Chunk c goes, in chunk order, to the rank that holds most of it, ties to
 * the rank with the least load so far, then the lowest; each element of it
 * that its owner lacks comes from the lowest rank holding it. So a
 * replicated model moves nothing and its chunks spread evenly, and a
 * sharded one moves only what straddles its ranks' slices. -EINVAL (p 0, a
 * tensor index out of the set), -ERANGE (a range past its tensor), -ENOENT
 * (an element no rank holds), -ENOMEM. */
int rckpt_group_plan(rckpt_group_plan_t *out, const rckpt_layout_t *l, const rckpt_tset_t *ts,
		     unsigned p, const rckpt_piece_t *const *held, const size_t *nheld);
void rckpt_group_plan_free(rckpt_group_plan_t *g);

/* The manifest of a group step (checkpoint.md "Manifest"): the global
 * tensors ts (sorted; their encoding lossless for the kinds in the mask
 * lossless_kinds), their segments as layout l cuts them, and chunk c's
 * entry (elements, segments, record bytes, SHA-256) as the rank that
 * encoded it described it, chunks[c]. `mf` supplies step, parent,
 * chunk_params, config and stats; its tensors and chunks are ignored.
 * Appended to out. 0, -EINVAL (an entry that disagrees with the layout),
 * -ENOMEM. */
int rckpt_group_manifest(rckpt_buf_t *out, const rckpt_layout_t *l, const rckpt_tset_t *ts,
			 unsigned lossless_kinds, const rckpt_mf_chunk_t *chunks, const rckpt_manifest_t *mf);

#endif /* RCKPT_GROUP_PLAN_H */
