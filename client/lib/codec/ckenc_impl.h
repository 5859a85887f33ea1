/*
 * ckenc_impl.h — the encoder's state and the seams between its files.
 * Private to client/lib/codec/ckenc_*.c. From the top down (a file calls
 * only files below it):
 *
 *   ckenc_handle.c    the handle (rckpt_ckenc.h): options, create, destroy
 *   ckenc_step.c      one full step (step_stream): prepare, choose, emit
 *   ckenc_search.c    the configuration search and the per-tensor allocation
 *   ckenc_judge.c     judging the chosen configuration on all the data
 *   ckenc_emit.c      the chunk layout, and the one path that turns chunks
 *                     into records and a manifest (full and partial steps)
 *   ckenc_partial.c   partial steps (SCAR): the blocks that moved most
 *   ckenc_resume.c    taking up a committed step written by another writer
 *   ckenc_cpu.c       the compute backend on the CPU (the reference)
 *   ckenc_cuda.c      the compute backend on a CUDA device, beside it
 *   ckenc_optim.c     the optimizer's state: roles, partners, update terms
 *   ckenc_values.c    a tensor's values as quantized (transformed, NORM)
 *   ckenc_state.c     the state between steps: transforms, layout, release
 *   ckenc_par.c       parallel loops, and helper threads' scratch
 *   rckpt_ckdec.c     the decoder (rckpt_ckdec.h), which needs none of this
 */
#ifndef RCKPT_CKENC_IMPL_H
#define RCKPT_CKENC_IMPL_H

#include "rckpt_ckenc.h"
#include "rckpt_layout.h"
#include "rckpt_par.h"

/* A point of the search space: an index per axis (bins, embedding bins,
 * pruning, metric, protection); higher is less aggressive. */
typedef struct cpoint {
	unsigned b, e, p, m, q;
} cpoint_t;

/* The last step's samples of one prepared tensor. */
struct prev_sample {
	float *w, *g;
	size_t n;
	unsigned tensor; /* its index in that step's tensors */
};


typedef struct ckenc_backend ckenc_backend_t;

/* A helper thread's scratch: the encoder's block buffers and the entropy
 * coder's, its own, so that the chunks it quantizes and encodes share
 * nothing writable with the others'. Held during a step's emission. */
struct ckenc_worker {
	float *wblk, *nblk;
	uint8_t *iblk;
	uint16_t *pblk;
	rckpt_istream_scratch_t is;
};

struct rckpt_ckenc {
	rckpt_ckenc_opts_t o;
	const ckenc_backend_t *be; /* where the passes over the values run */
	rckpt_record_t prev; /* the last step's summary: per tensor its header and
				codebook and, when quantized, its levels at the
				sample positions (idx[j]: element j * stride) */
	char **names;        /* the tensors of every step, sorted */
	unsigned ntensors;
	unsigned steps;
	unsigned depth; /* records in the chain of the last step, its base included (0: none) */
	/* the last accepted configuration of each of a step's searches: the
	 * model's, the optimizer's state's, its normalized first moments' */
	int have_plast[3];
	cpoint_t plast[3];
	/* ... and its per-tensor allocation (ckenc_search.c, alloc_pick), or
	 * NULL: a later step whose search chose the same point tries it first */
	unsigned *palloc[3];
	unsigned npalloc[3];
	struct prev_sample *psmp; /* the last step's samples, per prepared tensor */
	unsigned npsmp;
	/* the chunk layout: the first step's, or that of the last step whose
	   tensors differed from the step before (ckenc_relayout) */
	uint32_t nchunks;
	rckpt_piece_t **pieces; /* pieces[c][0..npieces[c]) */
	uint32_t *npieces;
	rckpt_record_t *prev_chunks; /* the last step's chunk records */
	rckpt_istream_scratch_t is_scratch; /* reused by every record */
	struct ckenc_worker *workers; /* opts.threads - 1 helpers' scratch, during
					 a step's emission or judgement (ckenc_par.c) */
	unsigned nworkers;
	int force_base;      /* the next step is a base (a step failed midway) */
	int exact_step;      /* the step being emitted keeps every tensor whole
				(rckpt_ckenc_step_exact) */
	int exact_last;      /* the last step was exact: its records hold no
				levels, so a lossy step after it is a base */
	float *wblk;         /* BLK values widened to fp32 */
	float *nblk;         /* BLK values of a normalizing second moment */
	/* this step's NORM first moments (ckenc_values), per tensor: */
	const rckpt_tset_t *xparams;
	int *xnorm;                      /* the partner, or -1 */
	const rckpt_qparams_t *const *xq; /* tensors' parameters (NULL: lossless) */
	const float *const *xg;          /* and weights */
	uint8_t *iblk;       /* BLK levels */
	uint16_t *pblk;      /* BLK protected values */
	rckpt_qerr_t qerr;   /* judge's sums */
	/* partial steps (opts.partial_block) */
	float **saved;          /* per tensor: its values as last saved (fp32);
				   NULL for a lossless tensor */
	rckpt_qparams_t *lastq; /* per tensor: the last full step's parameters */
	rckpt_qconfig_t lastcfg;
	uint64_t rr_cursor;     /* ROUND_ROBIN: the next block */
	rckpt_ckdec_t *resume;  /* a committed step to continue from, taken up by
				   the next step when its tensors match */
};

/* The threads for `work` elements: opts.threads, or 1 below
 * opts.par_min_work. */
unsigned ckenc_threads_for(const rckpt_ckenc_opts_t *o, uint64_t work);

/* Frees the helper threads' scratch (ckenc_par.c). */
void ckenc_workers_free(rckpt_ckenc_t *e);
int ckenc_workers_ensure(rckpt_ckenc_t *e, unsigned n); /* 0 or -ENOMEM */
int ckenc_parallel_views(rckpt_ckenc_t *e, unsigned n, unsigned threads,
			 int (*fn)(rckpt_ckenc_t *view, void *arg, unsigned i), void *arg);

/* Tensors go through the encoder in blocks of this many elements (a
 * multiple of 8), so a step's working memory does not grow with the model. */
#define BLK 65536u
_Static_assert(BLK % RCKPT_QERR_TILE == 0, "judge's blocks are whole tiles");

/* ---- the compute backend: every pass of a save over the values ---- */

/* Every stride-th element of a prepared tensor. */
typedef struct sample {
	float *w, *g;
	size_t n;
	uint64_t full, stride;
	double den; /* sum g^2 w^2 over the sample, in order (g: 1 without
		       gradients): every configuration's error is over it
		       (ckenc_sample_den, once a step) */
} sample_t;

void ckenc_sample_den(sample_t *s);

/* Chosen with the device (rckpt_ckenc_set_gpu): e->be. Stages added later
 * go here, with both implementations. g: the tensor's gradient RMS (fp32,
 * host memory), or NULL. */
struct ckenc_backend {
	const char *name;
	int host; /* 1: the passes run on the CPU over host memory (the reference) */
	void (*step_begin)(rckpt_ckenc_t *e);
	/* rckpt_codec_prep_begin .. end of tensor t, and every sp->stride-th
	 * value and gradient into sp->w, sp->g (allocated; sp->n counts them).
	 * -EDOM with *bad the element for a NaN or Inf. */
	int (*prepare)(rckpt_ckenc_t *e, rckpt_tensor_prep_t *p, uint64_t *bad,
		       const rckpt_ctensor_t *t, const float *g, unsigned kind, sample_t *sp);
	/* rckpt_qerr's sums over all of t quantized with q. */
	int (*qerr)(rckpt_ckenc_t *e, double *num, double *den, const rckpt_ctensor_t *t,
		    const float *g, const rckpt_qparams_t *q);
	/* t quantized with q and dequantized, as fp32 into out[0..t->n). */
	int (*dequantize)(rckpt_ckenc_t *e, float *out, const rckpt_ctensor_t *t, const float *g,
			  const rckpt_qparams_t *q);
	/* The levels of elements [first, first + n) of t into seg->idx (room
	 * for n), its protected values into seg->prot (allocated here) and
	 * seg->nprot; the values as saved, fp32, into snap when not NULL. */
	int (*quantize)(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_ctensor_t *t,
			const float *g, const rckpt_qparams_t *q, uint64_t first, uint64_t n,
			float *snap);
	/* bytes of a tensor's data at src in host memory: *out (src itself, or
	 * a copy in *owned, which the caller frees). */
	int (*to_host)(rckpt_ckenc_t *e, const void *src, size_t bytes, const void **out,
		       void **owned);
	/* rckpt_block_dist of elements [first, first + n) of t (the values
	 * ckenc_values gives) against saved[0..n) (fp32, host memory) into
	 * out, a double per block of `block` from first. n <= BLK. -EDOM with
	 * *bad the element of t for a NaN or Inf. */
	int (*block_dist)(rckpt_ckenc_t *e, double *out, const rckpt_ctensor_t *t, uint64_t first, size_t n,
			  const float *saved, uint64_t block, uint64_t *bad);
	/* rckpt_update_weights of second moment vt and first moment mt (or
	 * NULL) into host memory; NULL: the host computes them. */
	int (*update_weights)(rckpt_ckenc_t *e, float *wv, float *wm, double *den,
			      const rckpt_ctensor_t *vt, const rckpt_ctensor_t *mt, double eps, int lin);
};

extern const ckenc_backend_t ckenc_cpu_backend, ckenc_cuda_backend;

/* ---- ckenc_state.c ---- */
void ckenc_free_names(rckpt_ckenc_t *e);
void ckenc_free_saved(rckpt_ckenc_t *e);
void ckenc_free_prev_samples(rckpt_ckenc_t *e);
void ckenc_free_allocs(rckpt_ckenc_t *e);
void ckenc_free_layout(rckpt_ckenc_t *e);
/* The first step's tensors' names: e->names. 0 or -ENOMEM. */
int ckenc_take_names(rckpt_ckenc_t *e, const rckpt_tset_t *params);
/* Whether params are the last step's tensors (names, sizes, dtypes). */
int ckenc_same_tensors(const rckpt_ckenc_t *e, const rckpt_tset_t *params);

/* ---- ckenc_search.c ---- */

/* What evaluating a configuration on the samples reads. */
typedef struct evalctx {
	const rckpt_ckenc_opts_t *o;
	rckpt_tensor_prep_t *prep; /* quantized tensors only */
	sample_t *smp;
	unsigned nprep;
	unsigned tried;
	const rckpt_qconfig_t *fixed_cfg; /* evaluate this instead of a point */
	const rckpt_record_t *prev;       /* the last step's record, or NULL */
	const unsigned *which;            /* prep t is tensor which[t] */
	const struct prev_sample *psmp;   /* the last step's samples, or NULL */
	rckpt_codebook_cache_t *cache;    /* per prepared tensor, this step */
	int drift;                        /* a fresh codebook's recurring cost is
					     its switch cost (see alloc_tables) */
	const double *dfix;               /* per prepared tensor: the denominator of
					     its error, or < 0 for its own sum g^2 w^2
					     (NULL: every one its own) */
	const uint8_t *dsum;              /* ... and what it adds to the step's
					     sums, SUM_* (NULL: every one SUM_ALL) */
	double cap;                       /* tensor_cap of the pass (0: TENSOR_CAP) */
	int alloc_near;                   /* the allocation weighs, for a tensor
					     with a quantized parent, only the bin
					     counts next to its parent's (see
					     alloc_tables) */
	struct evmemo *memo;              /* per prepared tensor, this call of
					     choose: its evaluations so far
					     (NULL: none kept) */
} evalctx_t;

/* The evaluations of one tensor so far, keyed by what of a configuration
 * the tensor reads (ckenc_search.c). */
typedef struct evmemo {
	struct evmemo_entry *e;
	size_t n, cap;
} evmemo_t;

void ckenc_evmemo_free(evmemo_t *m, unsigned n);

/* A per-tensor allocation's tables: option k of prepared tensor t has loss
 * term tn[t * NALLOC + k] (negative: not available) and estimated bytes
 * tb[...]; den is the loss's denominator, c_num and c_bytes those of the
 * search's choice. */
typedef struct alloc {
	double *tn, *tb;
	double *tden, *cap; /* per tensor: den, and the cap on num of a pick */
	double den, c_num, c_bytes;
	unsigned nprep;
} alloc_t;

/* Times the allocation is chosen again, within a smaller budget, when it
 * fails on all the data. */
#define ALLOC_RETRIES 3

/* Every ALLOC_REFRESH-th step weighs every option of every tensor's
 * allocation again (evalctx_t.alloc_near). */
#define ALLOC_REFRESH 8

/* ---- what the search (ckenc_search.c) and the judgement (ckenc_judge.c)
 * share ---- */

/* A tensor's allocation that keeps the last record's codebook, with this
 * step's thresholds, instead of any bin count: its levels then change only
 * where its values crossed a boundary, which is what makes deltas small
 * (rckpt_codec_qparams_keep). */
#define KEEP_LAST 0xffffu

/* The options of a tensor: every bin count with k-means, with uniform
 * bins, and KEEP_LAST. An allocation names one as bins | quantizer << 16. */
#define ALLOC_BINS(a) ((a) & 0xffffu)
#define ALLOC_QUANTIZER(a) ((a) >> 16)

/* The quality loss of a step: the Fisher-weighted relative error of all its
 * quantized tensors together, sum num_t / sum den_t, or a tensor's own
 * num_t / den_t divided by TENSOR_CAP when that is more. The sum is what
 * predicts the model's loss; the cap keeps one tensor from being wrecked
 * because it weighs little in the sum (a small first layer without
 * gradients, a tensor pruned hard), where the second-order estimate stops
 * holding. Calibrated: docs/compression.md, "What eps means". */
#define TENSOR_CAP 20.0

/* The optimizer's state is held tighter: a tensor's own update error at
 * most OPT_TENSOR_MAX (or its pass's eps, when that is more), so that a
 * loose opt_eps spreads over the tensors instead of landing on one whose
 * first update after a restore would then be far from the original's. */
#define OPT_TENSOR_MAX 0.1

/* The divisor of the worst tensor's own error in pass k (0: the model's)
 * under threshold eps. */
static inline double tensor_cap(unsigned k, double eps)
{
	double c;
	if (k == 0 || !(eps > 0))
		return TENSOR_CAP;
	c = OPT_TENSOR_MAX / eps;
	return c < 1 ? 1 : c > TENSOR_CAP ? TENSOR_CAP : c;
}

/* What a prepared tensor adds to its step's sums (dsum[t]). */
enum {
	SUM_NUM = 0,  /* its error alone: an optimizer tensor whose weight
			 another's stands for */
	SUM_ALL = 1,  /* its error and its weight */
	SUM_NONE = 2, /* nothing: a kind kept as bf16, whose error the format
			 bounds (each value within 2^-8 of its own) */
};

static inline int sums_num(const uint8_t *dsum, unsigned t)
{
	return !dsum || dsum[t] != SUM_NONE;
}

static inline int sums_den(const uint8_t *dsum, unsigned t)
{
	return !dsum || dsum[t] == SUM_ALL;
}

static inline double step_loss(double num, double den, double worst, double cap)
{
	const double g = den > 0 ? num / den : 0;
	return worst / cap > g ? worst / cap : g;
}

/* Tensor t's denominator: fixed (the update error of an optimizer's
 * state), or its own sum g^2 w^2. */
static inline double den_of(const double *dfix, unsigned t, double own)
{
	return dfix && dfix[t] >= 0 ? dfix[t] : own;
}

/* Tensor t's own configuration: c with its bin count set to bins[t] (the
 * allocation), or c itself when bins is NULL. */
static inline rckpt_qconfig_t tensor_config(const rckpt_qconfig_t *c, const rckpt_tensor_prep_t *p,
					    const unsigned *bins, unsigned t)
{
	rckpt_qconfig_t ct = *c;
	if (bins && bins[t] && bins[t] != KEEP_LAST) {
		if (p->kind == RCKPT_LK_EMBEDDING)
			ct.emb_bins = ALLOC_BINS(bins[t]);
		else
			ct.bins = ALLOC_BINS(bins[t]);
	}
	return ct;
}

/* The number of settings of each axis of a cpoint_t (b, e, p, m, q). */
extern const unsigned ckenc_axis_len[5];

rckpt_qconfig_t ckenc_config_of(const rckpt_ckenc_opts_t *o, cpoint_t c);
/* The least aggressive point: what a step falls back to. */
cpoint_t ckenc_point_safest(void);
/* The point a stored configuration is; 0 when it is none. */
int ckenc_point_of(cpoint_t *c, const rckpt_mf_config_t *m);
/* One step less aggressive; 0 when there is none. */
int ckenc_relax(cpoint_t *c);
int ckenc_evaluate(evalctx_t *x, cpoint_t cp, double *loss, double *bytes);
int ckenc_search(evalctx_t *x, const cpoint_t *last, int have_emb, int have_g, cpoint_t *best,
		 int *found);
int ckenc_alloc_tables(evalctx_t *x, const rckpt_qconfig_t *c, alloc_t *a);
int ckenc_alloc_pick(alloc_t *a, double eps, double cap, unsigned *bins, int any);
void ckenc_alloc_free(alloc_t *a);
/* A tensor's last judged parameters and error sums: a judgement after a
 * retry reuses them where its parameters did not change (the same values
 * and parameters give the same sums), so a retry costs a pass over the
 * tensors it changed only. */
typedef struct judged {
	rckpt_qparams_t q;
	double tn, td;
	int valid;
} judged_t;

int ckenc_judge(rckpt_ckenc_t *e, const rckpt_tset_t *params, const rckpt_tensor_prep_t *prep,
		const unsigned *which, unsigned nprep, const rckpt_qconfig_t *c, const unsigned *tbins,
		rckpt_codebook_cache_t *cache, const double *dfix, const uint8_t *dsum,
		double cap, rckpt_qparams_t *qp, judged_t *memo, double *quality);
int ckenc_ask_callback(rckpt_ckenc_t *e, const rckpt_tset_t *params, const rckpt_tensor_prep_t *prep,
		       const unsigned *which, unsigned nprep, const rckpt_qparams_t *qp, double *loss);

/* ---- ckenc_optim.c ---- */

/* The second moment whose restored values normalize first moment i (its
 * NORM segments), or -1: none (not a first moment, no partner, or
 * o->plain_moments). */
int ckenc_norm_partner(const rckpt_ckenc_opts_t *o, const rckpt_tset_t *params, unsigned i);

/* The quantized tensors in the order a step prepares them, each group in
 * name order: the model's (*n0 of them), the optimizer's state that stands
 * alone (up to *n1), the normalized first moments (the rest; they need
 * their second moments' quantization). Returns the count. */
unsigned ckenc_prep_order(const rckpt_ckenc_opts_t *o, const rckpt_tset_t *params, unsigned *order,
			  unsigned *n0, unsigned *n1);

/* The update error's terms for the optimizer's tensors (rckpt_ckenc.h,
 * "The optimizer's state"), per tensor of params: w[i] the weights g of
 * its elements (NULL: 1), den[i] the denominator of its error (< 0: its
 * own sum g^2 w^2), counted[i] whether that adds to the step's. */
typedef struct ckenc_upd {
	float **w;
	double *den;
	uint8_t *counted;
	unsigned n;
} ckenc_upd_t;

int ckenc_update_terms(rckpt_ckenc_t *e, ckenc_upd_t *u, const rckpt_tset_t *params);
void ckenc_update_free(ckenc_upd_t *u);

/* ---- ckenc_values.c ---- */
/* Elements [first, first + n) of t as the encoder quantizes them: fp32, in
 * the domain of t's transform. */
const float *ckenc_values(rckpt_ckenc_t *e, const rckpt_ctensor_t *t, uint64_t first, size_t n);
/* The NORM values of elements [first, first + n) of first moment m:
 * m / (sqrtf(v') + eps), v' its second moment v quantized with qv (and
 * weights gv, as it was judged) and restored, into out (room for n). */
int ckenc_norm_values(rckpt_ckenc_t *e, float *out, const rckpt_ctensor_t *m, const rckpt_ctensor_t *v,
		      const float *gv, const rckpt_qparams_t *qv, float eps, uint64_t first, size_t n);

/* ---- ckenc_state.c, ckenc_emit.c ---- */
/* t's transform this step, and its NORM partner (-1: none). */
unsigned ckenc_transform_of(const rckpt_ckenc_t *e, const rckpt_ctensor_t *t);
/* The transform a tensor of this kind's values go through (LOG2 for second
 * moments unless o.moment2_linear; NORM aside). */
unsigned ckenc_value_xf(const rckpt_ckenc_t *e, unsigned kind);
int ckenc_norm_of(const rckpt_ckenc_t *e, const rckpt_ctensor_t *t);
/* A second moment's eps, as the manifest keeps it (f32; 0 given: 1e-8). */
static inline double ckenc_eps(const rckpt_ctensor_t *v)
{
	return (double)(float)(v->eps > 0 ? v->eps : 1e-8);
}
const rckpt_seg_t *ckenc_warm_of(const rckpt_ckenc_t *e, unsigned i);
int ckenc_build_layout(rckpt_ckenc_t *e, const rckpt_tset_t *params);
int ckenc_lossless_piece(rckpt_ckenc_t *e, rckpt_seg_t *seg, const rckpt_ctensor_t *t,
			 uint64_t first, uint64_t n);
int ckenc_summary_init(const rckpt_ckenc_t *e, rckpt_record_t *sum, const rckpt_tset_t *params,
		       const rckpt_qparams_t *const *tq, const uint64_t *stride, uint64_t step);

/* One step's records going out, full or partial alike: begin (the manifest,
 * the sink's begin), a record per chunk in order (the caller fills its
 * segments; chunk encodes it against the chunk's last record, digests it,
 * hands it to the sink and makes it that chunk's next parent), end (the
 * manifest's bytes). free in every case. */
typedef struct ckenc_emit {
	rckpt_ckenc_t *e;
	const rckpt_ckenc_sink_t *sink;
	rckpt_ckenc_stats_t *st;
	rckpt_manifest_t mf;
} ckenc_emit_t;

int ckenc_emit_begin(ckenc_emit_t *x, rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink,
		     rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, uint64_t step,
		     uint64_t parent);
/* r: chunk c's record (kind, step, parent, segments), taken over. sel: the
 * blocks a sparse record carries (block elements each), else NULL. */
int ckenc_emit_chunk(ckenc_emit_t *x, uint32_t c, rckpt_record_t *r, uint32_t block,
		     const rckpt_sparse_sel_t *sel);
int ckenc_emit_end(ckenc_emit_t *x, rckpt_buf_t *manifest);
void ckenc_emit_free(ckenc_emit_t *x);

/* A full step's records: every piece quantized with tq[tensor] (NULL:
 * lossless) and the weights tg[tensor] it was judged with (NULL: none).
 * sum: the next step's summary, whose levels this fills. */
int ckenc_emit_full(rckpt_ckenc_t *e, const rckpt_ckenc_sink_t *sink, rckpt_buf_t *manifest,
		    rckpt_ckenc_stats_t *st, const rckpt_tset_t *params, const float *const *tg,
		    const rckpt_qparams_t *const *tq, const uint64_t *stride, rckpt_record_t *sum,
		    uint64_t step);

/* ---- ckenc_resume.c ---- */
/* Takes up e->resume when params are its tensors in the same layout: 0
 * taken up, 1 not (the next step is a base), or -ENOMEM. */
int ckenc_adopt(rckpt_ckenc_t *e, const rckpt_tset_t *params);
/* Whether the committed step e->resume holds params' tensors as this
 * encoder would lay them out (the next step takes it up). */
int ckenc_resume_matches(const rckpt_ckenc_t *e, const rckpt_tset_t *params);
/* The step's tensors (params) differ from the last step's: the next step
 * is a base in a new layout, and what the encoder knows of each tensor
 * still there (same name, size, dtype) moves to its new index: codebook,
 * levels at the sample positions, samples. 0 or -ENOMEM. */
int ckenc_relayout(rckpt_ckenc_t *e, const rckpt_tset_t *params);

#endif
