/*
 * rckpt_ckenc.h — a checkpoint encoder that lives across training steps:
 * each step it picks a compression configuration under a quality threshold
 * (the Inshrinkerator search), quantizes every tensor, and writes one record
 * holding every tensor as a segment — a base at the first step, a delta
 * against the previous step after. Internal to librckpt; the store (RADOS
 * chunks, manifests) builds on it.
 *
 * The search. Space: bins {4,6,8,12,16,32}, embedding bins {16,32}, pruned
 * fraction {0,.1,.2,.3,.4,.5}, metric {magnitude, sensitivity}, protected
 * fraction {.0005,.005,.01}. The metric ranks both pruning and protection:
 * magnitude by |w|; sensitivity prunes by |w g| and protects the top |w|
 * and the top |w g|. A configuration is acceptable when its quality
 * loss is <= eps. Quality is the sensitivity-weighted relative error of all
 * quantized tensors together (rckpt_codec_rel_error over the model),
 * estimated on a deterministic sample of each tensor. Among acceptable
 * configurations the one with the smallest estimated size wins (entropy of
 * its levels on the sample, plus protected values).
 *  - First step, or when the neighbourhood fails: guided exhaustive search:
 *    for every (embedding bins, pruning, metric, protection), bins are tried
 *    from fewest up and the first acceptable ends that line.
 *  - Later steps: the last accepted configuration and its neighbours one
 *    step less aggressive in each dimension (more bins, less pruning, more
 *    protection, either metric).
 *  - Never more aggressive than the last accepted configuration.
 * When nothing is acceptable the least aggressive configuration is used and
 * the step's statistics say so (accepted = 0).
 */
#ifndef RCKPT_CKENC_H
#define RCKPT_CKENC_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_codec.h"
#include "rckpt_record.h"
#include "rckpt_safetensors.h"

typedef struct rckpt_ckenc rckpt_ckenc_t;

enum rckpt_ckenc_mode {
	RCKPT_CKENC_SEARCH = 0, /* the guided search above */
	RCKPT_CKENC_FIXED = 1,  /* always opts.fixed */
	RCKPT_CKENC_BITWIDTH = 2, /* QD-style baseline: the fewest of 4, 8, 16,
				     32, 64 levels that pass eps, no pruning,
				     no protection (with the uniform quantizer,
				     uniform quantization with bit-width search) */
};

typedef struct rckpt_ckenc_opts {
	unsigned mode;             /* enum rckpt_ckenc_mode */
	double eps;                /* quality threshold (relative error) */
	rckpt_qconfig_t fixed;     /* FIXED: the configuration; SEARCH: lambda and
				      lossless kinds are taken from it */
	unsigned quantizer;        /* enum rckpt_quantizer */
	int use_grads;             /* rank by sensitivity (prune metric, protection)
				      when gradients are given; the quality loss
				      is weighted by them either way */
	rckpt_istream_opts_t is;   /* index-stream stages and entropy coders */
	unsigned base_every;       /* a base record every N steps; 0: first only */
	unsigned sample_max;       /* elements sampled per tensor by the search */
} rckpt_ckenc_opts_t;

void rckpt_ckenc_opts_default(rckpt_ckenc_opts_t *o);

typedef struct rckpt_ckenc_stats {
	uint64_t step;
	size_t raw_bytes;      /* the checkpoint's tensors as fp32 */
	size_t enc_bytes;      /* the record */
	double quality;        /* the chosen configuration's loss, on all data */
	int accepted;          /* quality <= eps */
	int is_base;
	rckpt_qconfig_t config;
	unsigned configs_tried;
	double t_prepare, t_search, t_quantize, t_encode; /* seconds */
} rckpt_ckenc_stats_t;

int rckpt_ckenc_create(rckpt_ckenc_t **out, const rckpt_ckenc_opts_t *o);
void rckpt_ckenc_destroy(rckpt_ckenc_t *e);

/* Encodes one step: params (and grads, tensors of the same names in fp32,
 * or NULL) into a record appended to out. Every step must have the same
 * tensors. 0, -EINVAL (tensors differ from the previous step's, grads of
 * another shape or dtype), -EDOM (NaN/Inf; msg names the tensor), -ENOMEM. */
int rckpt_ckenc_step(rckpt_ckenc_t *e, rckpt_buf_t *out, rckpt_ckenc_stats_t *st,
		     const rckpt_st_t *params, const rckpt_st_t *grads, uint64_t step, char *msg,
		     size_t msglen);

/* Format a configuration as "bins=16 emb=32 prune=0.1 metric=mag protect=0.005". */
void rckpt_qconfig_format(char *out, size_t cap, const rckpt_qconfig_t *c);

#endif /* RCKPT_CKENC_H */
