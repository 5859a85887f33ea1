/*
 * rckpt_group_part.h — a rank's part of a group step (issue 27): after
 * the exchange (rckpt_group_xchg.h), the chunks it encodes as an
 * encoder's input: per global tensor, its pieces in those chunks end to
 * end as a tensor of its own (named as the global one, of its layer
 * kind), and the layout of those chunks in their terms, naming the global
 * tensors, so the records it writes are the same chunks whatever the
 * number of ranks. And the one collective besides the exchange: every
 * rank's description to every rank. Internal to librckpt.
 */
#ifndef RCKPT_GROUP_PART_H
#define RCKPT_GROUP_PART_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt.h"
#include "rckpt_group_xchg.h"
#include "rckpt_layout.h"
#include "rckpt_tset.h"

typedef struct rckpt_group_part {
	rckpt_tset_t ts;        /* the part's tensors (its encoder's input) */
	rckpt_layout_t layout;  /* the owned chunks, for rckpt_ckenc_opts.layout */
	uint32_t *chunk;        /* [layout.nchunks]: each one's global number */
	uint8_t **buf;          /* the tensors' values, [ts.ntensors] */
	rckpt_tensor_t *desc;
} rckpt_group_part_t;

/* The part of a rank whose exchange gave d, of global tensors ts cut by
 * layout l. 0, -ENOMEM. */
int rckpt_group_part_make(rckpt_group_part_t *out, const rckpt_tset_t *ts, const rckpt_layout_t *l,
			  const rckpt_group_data_t *d);
void rckpt_group_part_free(rckpt_group_part_t *p);

/* Every rank's bytes to every rank: all[r][0..lens[r]) is rank r's mine
 * (malloc'd; all[tr->rank] a copy of this rank's). Messages go pair by
 * pair in (sender, receiver) order, a u64 length then the bytes, so a
 * blocking transport cannot deadlock. At most max bytes a rank (-EMSGSIZE
 * past it, then the transport's error or -EBADMSG on a peer). Free with
 * rckpt_group_gathered_free. */
int rckpt_group_allgather(const rckpt_loc_transport_t *tr, const void *mine, size_t len, size_t max,
			  uint8_t ***all, size_t **lens);
void rckpt_group_gathered_free(uint8_t **all, size_t *lens, unsigned p);

#endif /* RCKPT_GROUP_PART_H */
