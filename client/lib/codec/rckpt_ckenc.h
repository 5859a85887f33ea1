/*
 * rckpt_ckenc.h — a checkpoint encoder that lives across training steps:
 * each step it picks a compression configuration under a quality threshold
 * (the Inshrinkerator search), quantizes every tensor, and writes one record
 * holding every tensor as a segment — a base at the first step, a delta
 * against the previous step after. Internal to librckpt; the store (RADOS
 * chunks, manifests) builds on it.
 *
 * The search. Space: bins {4,6,8,12,16,24,32,48,64}, embedding bins
 * {16,32,64}, pruned fraction {0,.1,.2,.3,.4,.5}, metric {magnitude,
 * sensitivity}, protected fraction {.0005,.005,.01}. The metric ranks both
 * pruning and protection: magnitude by |w|; sensitivity prunes by |w g| and
 * protects the top |w| and the top |w g|, g the gradient RMS the trainer
 * hands in (sqrt of a moving average of grad^2: a diagonal Fisher
 * estimate). A configuration is acceptable when its quality loss is <=
 * eps. Quality is the Fisher-weighted relative error of all quantized
 * tensors together, sum g^2 (w - r)^2 / sum g^2 w^2 (g = 1 without
 * gradients), or a tensor's own such error over 20 when that is more
 * (TENSOR_CAP in ckenc_search.c); estimated on a deterministic sample of each
 * tensor by the search, judged on all the data before the step is written.
 * Among acceptable configurations the one with the smallest estimated size
 * wins (entropy of its levels on the sample, plus protected values).
 *  - First step, or when the neighbourhood fails: guided exhaustive search:
 *    for every (embedding bins, pruning, metric, protection), bins are tried
 *    from fewest up and the first acceptable ends that line.
 *  - Later steps: the last accepted configuration (either metric); when
 *    it fails, its neighbours one step less aggressive in each dimension
 *    (more bins, less pruning, more protection); when it passes, its
 *    neighbours one step more aggressive, each taken only when its
 *    estimate (which holds the cost of switching from the last record's
 *    levels) is smaller by opts.bold_gain: the configuration follows the
 *    run both ways, one axis one step at a time. The exhaustive search
 *    that follows a failed neighbourhood goes no bolder than the last.
 *  - The second step searches exhaustively again, because it is the
 *    first that can judge how stable each configuration's levels are
 *    between steps, which the first step's choice could not know.
 *  - Then each tensor gets its own option (opts.alloc): any bin count with
 *    k-means or uniform bins, or the last step's parameters kept, whichever
 *    minimizes bytes + lambda * its share of the loss, lambda the least
 *    within eps. Segments carry their own bin counts; the manifest records
 *    the search's configuration.
 *  - A writer that continues a chain it did not write (rckpt_ckenc_resume)
 *    starts from the committed step's configuration and codebooks.
 * When nothing is acceptable the least aggressive configuration is used and
 * the step's statistics say so (accepted = 0).
 *
 * The optimizer's state. Tensors of the optimizer kinds (rckpt_codec.h:
 * first moments, second moments, other state) have a search of their own,
 * over the same space, with its own last accepted point, under opts.opt_eps
 * on the update error: the relative error of the update the restored
 * optimizer takes, sum (u' - u)^2 / sum u^2 with u = m / (sqrt(v) + eps)
 * over every pair of moments (ckenc_optim.c: its first-order terms, as
 * per-element weights of the quantization error), or for state without a
 * pair the relative error of the state itself; a tensor's own error
 * capped as the model's are. Second moments are quantized in the LOG2
 * domain (never pruned), and the first moment's sensitivity metric is
 * then the magnitude of the update. The model's search and the quality
 * callback (which sees every tensor, the optimizer's dequantized too) go
 * on as without it. A step with optimizer state holds 4 bytes per value of
 * it (the weights) while it runs.
 */
#ifndef RCKPT_CKENC_H
#define RCKPT_CKENC_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_ckdec.h"
#include "rckpt_codec.h"
#include "rckpt_manifest.h"
#include "rckpt_par.h" /* rckpt_cpus: the default threads */
#include "rckpt_record.h"
#include "rckpt_tset.h"

typedef struct rckpt_ckenc rckpt_ckenc_t;

enum rckpt_ckenc_mode {
	RCKPT_CKENC_SEARCH = 0, /* the guided search above */
	RCKPT_CKENC_FIXED = 1,  /* always opts.fixed */
	RCKPT_CKENC_BITWIDTH = 2, /* QD-style baseline: the fewest of 4, 8, 16,
				     32, 64 levels that pass eps, no pruning,
				     no protection (with the uniform quantizer,
				     uniform quantization with bit-width search) */
};

/* The trainer's judgement of a candidate: given every tensor dequantized
 * (values[i] holds tensor i of the step, in params' order, n elements of
 * fp32), write the quality loss (e.g. the accuracy drop on a few held-out
 * batches) to *loss. Return 0, or a negative errno to abort the step. */
typedef int (*rckpt_quality_fn)(void *arg, const rckpt_tset_t *params, const float *const *values,
				double *loss);

#define RCKPT_CKENC_THREADS_MAX 64 /* opts.threads above this count as this */

typedef struct rckpt_ckenc_opts {
	unsigned mode;             /* enum rckpt_ckenc_mode */
	double eps;                /* quality threshold (the Fisher-weighted relative
				      error above; RCKPT_EPS_DEFAULT) */
	rckpt_qconfig_t fixed;     /* FIXED: the configuration; SEARCH: lambda and
				      lossless kinds are taken from it */
	unsigned quantizer;        /* enum rckpt_quantizer */
	int use_grads;             /* rank by sensitivity (prune metric, protection)
				      when gradients are given; the quality loss
				      is weighted by them either way */
	rckpt_istream_opts_t is;   /* index-stream stages and entropy coders */
	unsigned base_every;       /* a base record every N steps; 0: first only */
	unsigned sample_max;       /* elements sampled per tensor by the search */
	int alloc;                 /* SEARCH: then give each tensor its own bin
				      count (a Lagrangian allocation within eps;
				      default on) */
	double bold_gain;          /* SEARCH: a neighbour one step bolder than a
				      passing last configuration is taken when
				      its estimate is smaller by this share
				      (default 0.05; 1: never) */
	int alloc_one_quantizer;   /* ... with opts.quantizer only (default 0:
				      k-means or uniform bins, whichever costs
				      fewer bytes; 1 with uniform bins is the
				      ablation without k-means) */
	uint64_t chunk_params;     /* elements per chunk, 1..2^31 (default 2^22) */
	rckpt_quality_fn quality;  /* optional: the trainer judges the chosen
				      configuration; while its loss exceeds
				      quality_eps the encoder relaxes one axis */
	void *quality_arg;
	double quality_eps;
	uint32_t partial_block;    /* nonzero: partial steps may follow, over
				      blocks of this many elements of each
				      quantized segment; the encoder then keeps
				      every quantized value as last saved (fp32,
				      4 bytes per parameter) to rank blocks */
	struct rckpt_gpuenc *gpu;  /* the passes over the values run on this GPU
				      (rckpt_gpuenc.h); NULL: on the CPU. The
				      records are the same bytes either way.
				      Borrowed; rckpt_ckenc_set_gpu changes it */
	double opt_eps;            /* the optimizer's state: threshold of its
				      update error (below; RCKPT_OPT_EPS_DEFAULT) */
	int plain_moments;         /* first moments are quantized as they are,
				      not normalized by their second moments
				      (NORM): what partial steps need */
	int moment2_linear;        /* an ablation (bench_codec): second moments
				      quantized as they are, not in LOG2, the
				      search still judging the update error */
	unsigned threads;          /* the search's evaluations a tensor each,
				      and chunks quantized and encoded (full
				      steps), at once; 0 or 1: one at a time,
				      in order. The records
				      are the same bytes either way; records go
				      to the sink in chunk order. Each thread
				      holds a chunk's levels and record */
	uint64_t par_min_work;     /* work of fewer elements than this runs on
				      one thread (default 2^15: less costs
				      less than starting threads); tests set 0 */
	int heads;                 /* with each delta (or sparse) record, a
				      head record: the step as a base, for a
				      restore that reads one record whatever
				      the chain (store.md "Head records"); the
				      sink's `head`. Default 0 (a store's
				      writer sets it) */
	const struct rckpt_layout *layout; /* NULL: the layout of the tensors
				      (checkpoint.md "Chunks"). Else a group
				      save's part: these chunks, whose pieces
				      are of the step's tensors (parts of the
				      global ones, rckpt_layout.h) and whose
				      records name the global tensors. Copied
				      at the first step */
} rckpt_ckenc_opts_t;

/* One step's output: the manifest and a record per chunk. */
typedef struct rckpt_ckenc_out {
	rckpt_buf_t manifest;
	uint32_t nchunks;
	rckpt_buf_t *records;
} rckpt_ckenc_out_t;

void rckpt_ckenc_out_free(rckpt_ckenc_out_t *o);

void rckpt_ckenc_opts_default(rckpt_ckenc_opts_t *o);

typedef struct rckpt_ckenc_stats {
	uint64_t step;
	size_t raw_bytes;      /* the checkpoint's tensors as fp32 */
	size_t enc_bytes;      /* the records and the manifest */
	double quality;        /* the chosen configuration's loss, on all data */
	double opt_quality;    /* the optimizer state's update error (0: none) */
	rckpt_qconfig_t opt_config; /* ... and its configuration */
	uint64_t opt_raw_bytes, opt_enc_bytes; /* the optimizer's share of
				  raw_bytes and of the records' bytes */
	uint64_t head_bytes;   /* head records (opts.heads), beside enc_bytes */
	double cb_quality;     /* the callback's loss, when there is a callback */
	int accepted;          /* quality <= eps (and cb_quality <= quality_eps) */
	int is_base;
	rckpt_qconfig_t config;
	unsigned configs_tried;
	unsigned allocs_reused;  /* searches that judged the last step's
				    per-tensor allocation first ... */
	unsigned allocs_kept;    /* ... and kept it (it passed on all the data) */
	uint64_t blocks;       /* a partial step: quantized blocks in the model */
	uint64_t blocks_saved; /* ... and those it stored */
	double t_prepare, t_search, t_quantize, t_encode; /* seconds */
} rckpt_ckenc_stats_t;

int rckpt_ckenc_create(rckpt_ckenc_t **out, const rckpt_ckenc_opts_t *o);
void rckpt_ckenc_destroy(rckpt_ckenc_t *e);

/* Encodes one step: params (and grads, tensors of the same names in fp32,
 * or NULL) into out (which must be empty; the caller frees it with
 * rckpt_ckenc_out_free). A step whose tensors differ from the previous
 * step's is a base in a chunk layout of its own (rckpt_ckenc_keeps_layout).
 * 0, -EINVAL (grads of another shape or dtype), -EDOM (NaN/Inf; msg names
 * the tensor), -ENOMEM. On failure the encoder keeps its last step (its
 * next step a base when the tensors had differed). */
int rckpt_ckenc_step(rckpt_ckenc_t *e, rckpt_ckenc_out_t *out, rckpt_ckenc_stats_t *st,
		     const rckpt_tset_t *params, const rckpt_tset_t *grads, uint64_t step, char *msg,
		     size_t msglen);

/* Where rckpt_ckenc_step_stream puts a step's records: begin(nchunks)
 * once, before the first; then record(c, rec, head) for c = 0, 1, ... in
 * order, each taking the encoded record and its head record (empty
 * unless opts.heads; either may have its bytes stolen and be left
 * empty). A negative return stops the step with that code. */
typedef struct rckpt_ckenc_sink {
	int (*begin)(void *arg, uint32_t nchunks);
	int (*record)(void *arg, uint32_t chunk, rckpt_buf_t *rec, rckpt_buf_t *head);
	void *arg;
} rckpt_ckenc_sink_t;

/* rckpt_ckenc_step with bounded memory: the tensors go through in blocks,
 * each chunk is quantized as its record is built, and each record goes to
 * the sink as soon as it is encoded; the manifest comes last (manifest
 * must be empty). Working memory: a few blocks of 64 Ki elements, one
 * chunk's record, samples and codebooks, whatever the model's size; the
 * state kept between steps is one byte per parameter (the chunks' levels,
 * the next deltas' parents). A trainer's quality callback is the exception:
 * it gets the model dequantized in fp32. The records are the same bytes as
 * rckpt_ckenc_step's. A failure before the first record leaves the encoder
 * as it was; a failure after it makes the next step a base. */
int rckpt_ckenc_step_stream(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
			    rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, const rckpt_tset_t *grads,
			    uint64_t step, char *msg, size_t msglen);

/* An exact step, streamed like rckpt_ckenc_step_stream: every tensor
 * kept whole, its values as PLANES blobs (checkpoint.md "Planes"; version
 * 5 records), a delta whose values are predicted by the last step's when
 * that step was exact too, else a base. The lossy step after it is a
 * base. Any bits go in (NaN, Inf). 0, -ENOMEM, the sink's error; the same
 * failure rules. */
int rckpt_ckenc_step_exact(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
			   rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, uint64_t step);

/* rckpt_ckenc_step_exact into out, as rckpt_ckenc_step. */
int rckpt_ckenc_step_whole(rckpt_ckenc_t *e, rckpt_ckenc_out_t *out, rckpt_ckenc_stats_t *st,
			   const rckpt_tset_t *params, uint64_t step);

/* Prioritized partial checkpoints (SCAR). A partial step stores, in a
 * sparse partial record per chunk (checkpoint.md), the fraction of the
 * quantized blocks that `select` picks, quantized with the codebooks and
 * thresholds of the last full step; every other value stays as last saved,
 * and lossless tensors go in whole. PRIORITY picks the blocks whose values
 * moved most since they were last saved (L2 distance, rckpt_block_dist),
 * ties to the lower block; ROUND_ROBIN the next blocks after the last
 * partial step's, in layout order; RANDOM a uniform draw seeded by (seed,
 * step). */
enum rckpt_ckenc_select {
	RCKPT_CKENC_PRIORITY = 0,
	RCKPT_CKENC_ROUND_ROBIN = 1,
	RCKPT_CKENC_RANDOM = 2,
};

typedef struct rckpt_ckenc_partial {
	double fraction; /* of the blocks, (0, 1]; at least one block is stored */
	unsigned select; /* enum rckpt_ckenc_select */
	uint64_t seed;
} rckpt_ckenc_partial_t;

/* Whether a partial step can follow: opts.partial_block is set and a full
 * step succeeded since the encoder began or restarted. */
int rckpt_ckenc_partial_ready(const rckpt_ckenc_t *e);

/* A partial step, streamed like rckpt_ckenc_step_stream (grads: optional,
 * for the sensitivity thresholds and the error's weights). -ERANGE, with
 * nothing handed out and the encoder as it was, when the chosen blocks'
 * relative error with the last full step's codebooks passes eps (training
 * moved them out of reach): make it a full step. -EINVAL (not ready, bad
 * p, tensors differ), -EDOM (NaN/Inf), -ENOMEM. The same failure rules. */
int rckpt_ckenc_step_partial(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink,
			     rckpt_buf_t *manifest, rckpt_ckenc_stats_t *st,
			     const rckpt_tset_t *params, const rckpt_tset_t *grads, uint64_t step,
			     const rckpt_ckenc_partial_t *p, char *msg, size_t msglen);

/* Whether the next steps quantize first moments as they are (on = 1) or
 * normalized (0; rckpt_ckenc_opts_t.plain_moments). A tensor whose
 * transform changes makes its step a base. Partial steps keep them plain. */
void rckpt_ckenc_set_plain_moments(rckpt_ckenc_t *e, int on);

/* The thresholds of the next steps: eps (opts.eps) and opt_eps (opts.opt_eps),
 * each in [0, 1), 0 keeping the one in use (a trainer tightens eps as its
 * learning rate decays). 0 or -EINVAL. */
int rckpt_ckenc_set_eps(rckpt_ckenc_t *e, double eps, double opt_eps);

/* Where the next steps' passes over the values run: g, or the CPU (NULL).
 * With the CPU, every tensor must be in host memory. */
void rckpt_ckenc_set_gpu(rckpt_ckenc_t *e, struct rckpt_gpuenc *g);

/* The next step will be a base: the caller lost this step's records (its
 * appends or its commit failed), so they cannot be the next step's parents;
 * or it begins a new segment of the store. After rckpt_ckenc_resume too. */
void rckpt_ckenc_restart(rckpt_ckenc_t *e);

/* Whether a step of params keeps the chunks of the step it follows (the
 * encoder's last, or the one rckpt_ckenc_resume handed it): 1; 0 when its
 * tensors differ (one added, removed, renamed, resized or retyped; for a
 * resumed step also a kind, an encoding or chunk_params), and the step is
 * then a base in a new chunk layout, with the state of the tensors still
 * there kept for the steps after it. 1 for an encoder with nothing to
 * follow. */
int rckpt_ckenc_keeps_layout(const rckpt_ckenc_t *e, const rckpt_tset_t *params);

/* From the next step on, records of at most version max_version (the
 * newest a reader, the OSDs' class, takes): below 6 no split Huffman
 * blocks, below 4 no predicted blobs,
 * below 3 no context-coded streams either. Versions 1 and 2 are what the
 * steps need (a transform makes a record version 2) and stay. */
void rckpt_ckenc_limit_records(rckpt_ckenc_t *e, unsigned max_version);

/* Continue a chain this encoder did not write: d holds a committed step,
 * decoded (a writer that restarts materializes the job's head). The next
 * step takes it up when its tensors are that step's (names, dtypes, sizes,
 * encodings) in the same chunks (same chunk_params): it is then a delta
 * against d's levels, with d's codebooks as warm starts and its
 * configuration as the search's last accepted one; otherwise it is a base,
 * as without this call. Takes d's contents (d is left empty). Only before
 * the encoder's first step: 0, -EINVAL (not before the first step, or d
 * empty), -ENOMEM. */
int rckpt_ckenc_resume(rckpt_ckenc_t *e, rckpt_ckdec_t *d);

/* The chain the next step extends: `depth` records from its base to the
 * last step, the base included (a resumed writer learns it from the
 * store). Once a chain has RCKPT_STORE_CHAIN_REBASE records the next step
 * is a base. rckpt_ckenc_depth: the chain of the last step. */
void rckpt_ckenc_set_depth(rckpt_ckenc_t *e, unsigned depth);
unsigned rckpt_ckenc_depth(const rckpt_ckenc_t *e);

/* Format a configuration as "bins=16 emb=32 prune=0.1 metric=mag protect=0.005". */
void rckpt_qconfig_format(char *out, size_t cap, const rckpt_qconfig_t *c);

/* The inverse: sets the fields that s names ("bins=8 prune=0.2 ...", keys
 * bins, emb, prune (every kind but embeddings), metric (mag or sens: also
 * whether protection ranks by sensitivity) and protect, separated by spaces
 * or commas) in *c, leaving the others. 0, or -EINVAL with *c unchanged. */
int rckpt_qconfig_parse(rckpt_qconfig_t *c, const char *s);

#endif /* RCKPT_CKENC_H */
