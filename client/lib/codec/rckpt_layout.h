/*
 * rckpt_layout.h — the chunk layout of a checkpoint (formats/checkpoint.md,
 * "Chunks"), as a pure function of the tensors' names and shapes: what
 * the encoder cuts a step into, and what a group of ranks plans its save
 * by (rckpt_group_plan.c). Internal to librckpt.
 */
#ifndef RCKPT_LAYOUT_H
#define RCKPT_LAYOUT_H

#include <stdint.h>

#include "rckpt_tset.h"

/* Elements [first, first + n) of tensor `tensor` (its index in the sorted
 * set), one segment of a chunk. In a group save a rank encodes parts of
 * the global tensors: its records name each segment by its global
 * identity, elements [gfirst, gfirst + n) of global tensor gtensor (the
 * same as tensor, first otherwise). */
typedef struct rckpt_piece {
	uint32_t tensor;
	uint64_t first, n;
	uint32_t gtensor;
	uint64_t gfirst;
} rckpt_piece_t;

typedef struct rckpt_layout {
	uint32_t nchunks;
	rckpt_piece_t **pieces; /* pieces[c][0..npieces[c]), in segment order */
	uint32_t *npieces;
} rckpt_layout_t;

/* The layout of the tensors of ts (sorted by name; only names, shapes and
 * element counts are read): per layer kind in the order embedding, conv,
 * linear, other, norm/bias, the tensors' elements as one flat space cut
 * into chunks of at most chunk_params elements and
 * RCKPT_STORE_CHUNK_SEGMENTS_MAX segments. 0 or -ENOMEM (*out empty). */
int rckpt_layout_build(rckpt_layout_t *out, const rckpt_tset_t *ts, uint64_t chunk_params);
void rckpt_layout_free(rckpt_layout_t *l);
/* A deep copy of l. 0 or -ENOMEM (*out empty). */
int rckpt_layout_copy(rckpt_layout_t *out, const rckpt_layout_t *l);

/* Elements in chunk c. */
uint64_t rckpt_layout_chunk_elements(const rckpt_layout_t *l, uint32_t c);

#endif /* RCKPT_LAYOUT_H */
