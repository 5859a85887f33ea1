/*
 * rckpt_ckpt.h — checkpoints in RADOS: jobs, saves, restores, compaction and retention, the adaptive policy, group saves.
 *
 * Part of librckpt's public interface: include <rckpt.h>, which includes
 * this file, not this file itself (its conventions are stated there).
 */
#ifndef RCKPT_RCKPT_CKPT_H
#define RCKPT_RCKPT_CKPT_H

#ifndef RCKPT_H
#error "include <rckpt.h>, not <rckpt_ckpt.h>"
#endif

/* ---- checkpoints in RADOS (formats/store.md) ---- */

/* A tensor handed to rckpt_job_save: fp32, fp16 or bf16, little-endian,
 * contiguous. The library reads data during the call only. */
enum rckpt_dtype_public { RCKPT_F32 = 1, RCKPT_F16 = 2, RCKPT_BF16 = 3 };

#define RCKPT_MAX_DIMS 8

typedef struct rckpt_tensor {
	const char *name;
	unsigned dtype; /* enum rckpt_dtype_public */
	unsigned ndim;
	uint64_t shape[RCKPT_MAX_DIMS];
	const void *data;
} rckpt_tensor_t;

typedef struct rckpt_job rckpt_job_t;

/* The trainer's judgement of the configuration a save chose (the
 * Inshrinkerator method): t[0..n) are the step's tensors in name order,
 * dequantized, as fp32 (dtype RCKPT_F32; data valid during the call only;
 * lossless tensors as saved, widened). Write the quality loss, e.g. the
 * relative drop of a metric on a few held-out batches, to *loss and return
 * 0, or return a negative errno to fail the save. While the loss exceeds
 * quality_eps the encoder steps one axis less aggressive and asks again;
 * each ask holds the model in fp32 once. */
typedef int (*rckpt_quality_cb)(void *arg, const rckpt_tensor_t *t, unsigned n, double *loss);

#define RCKPT_JOB_OPTS_VERSION 1
#define RCKPT_LATEST UINT64_MAX

/* The compressor's default quality threshold: the Fisher-weighted relative
 * error of the quantized tensors (sum F (w - r)^2 / sum F w^2, F the square
 * of the gradient RMS the trainer hands in, 1 without one). Calibrated
 * against real held-out loss (bench/codec/calibrate.py, docs/compression.md "What eps means"):
 * at this value no model of the calibration suite lost more than 1%. */
#define RCKPT_EPS_DEFAULT 0.0012

/* The threshold of the optimizer state's update error (rckpt_job_set_roles):
 * the relative squared error of the update the restored optimizer takes,
 * sum (u' - u)^2 / sum u^2, u = exp_avg / (sqrt(exp_avg_sq) + eps), each
 * moment's own at most 0.1 (or this, when more). Calibrated by resuming
 * real AdamW training from compressed state (docs/compression.md "Adam's
 * state"): every tensor's first update within 1.2x of the exact one's. */
#define RCKPT_OPT_EPS_DEFAULT 0.1

typedef struct rckpt_job_opts {
	unsigned version;      /* RCKPT_JOB_OPTS_VERSION */
	int writer;            /* take the job's writer lock (save, trim); else read only */
	double eps;            /* quality threshold of the compressor, > 0
				  (RCKPT_JOB_OPTS_INIT: RCKPT_EPS_DEFAULT).
				  0 is refused (-EINVAL): no threshold makes
				  a step bit-exact; `exact` does */
	uint64_t chunk_params; /* parameters per chunk; 0: 4 Mi; at most 4 Mi */
	unsigned base_every;   /* a base record every N saves; 0: only the first */
	unsigned lease_s;      /* the writer lock's lease, renewed by every save; 0: 30 s */
	unsigned inflight;     /* chunk operations in flight at once; 0: 16 */
	uint64_t mem_budget;   /* bytes a save may hold beyond the encoder's state
				  (one byte per parameter, kept between saves);
				  0: 256 MiB. It must hold 8 chunks' parameters
				  and 4 MiB; -EINVAL at open otherwise */
	unsigned compute;      /* enum rckpt_compute: where a save's passes over
				  the values run. The records are the same bytes
				  either way */
	rckpt_quality_cb quality; /* NULL: the built-in measure alone (a
				     sensitivity-weighted relative error <= eps) */
	void *quality_arg;
	double quality_eps;    /* the callback's threshold; 0: 0.01 */
	uint32_t partial_block; /* elements per block of partial saves
				   (rckpt_job_save_partial), 1..65536; 0: the
				   job takes no partial saves. A writer with it
				   keeps every quantized value as last saved:
				   4 bytes per parameter, between saves */
	uint64_t segment_bytes; /* a chunk's log goes on in a new object (a
				   segment, starting with a base) before one
				   passes this many bytes; 0: 32 MiB, or half
				   the OSDs' osd_max_object_size when that is
				   less. More than that half, or than 32 MiB
				   (what one compaction call in an OSD may
				   move), is -EINVAL */
	int exact;              /* the writer's saves store their steps
				   bit-exact (rckpt_job_set_exact) */
	double opt_eps;         /* threshold of the optimizer state's update
				   error, in (0, 1); 0: RCKPT_OPT_EPS_DEFAULT
				   (rckpt_job_set_roles) */
	unsigned threads;       /* threads a save runs on: the search's
				   evaluations a tensor each, then chunks
				   quantized and encoded a chunk each; 0: the
				   machine's online cores, at most 8; 1: one
				   at a time. Each thread beyond the first
				   holds 3 bytes per chunk parameter, taken
				   from mem_budget: fewer run when it does not
				   hold them. The records are the same bytes
				   whatever the count */
	int takeover;           /* enum rckpt_takeover: what a writer's open
				   does when another holds the job's lock */
	unsigned wait_s;        /* then wait up to this many seconds for
				   the lock before -EBUSY; 0: do not wait */
	unsigned compact_every; /* the writer compacts the job (rckpt_job_compact
				   under its stored policy: every step kept
				   unless one was set) after every N-th save it
				   commits, so that a restore of the head folds
				   at most N records a chunk; 0: never (the C
				   default; Python's Checkpointer compacts
				   every 8). A failed compaction leaves the
				   save committed and is tried again N saves
				   later */
	int no_heads;           /* 1: the writer's deltas go without head
				   records (formats/store.md "Head records"):
				   fewer bytes written a save, and a restore
				   of the newest step folds its chain; 0 (the
				   default): each delta comes with one, and
				   restoring the newest step reads one record
				   a chunk whatever the chain */
} rckpt_job_opts_t;

/* A writer that finds the job's lock held by another (formats/store.md,
 * "Takeover"). Taking over is always safe for the job's data: every
 * request of the old writer carries its token, and the new writer's claim
 * makes them stale (-ESTALE, nothing changed); the old writer's next save
 * fails. AUTO (the default): take over at once when the holder was a
 * process of this machine (the same boot and PID namespace) that has
 * exited, the usual restart after a crash; else as NEVER. ALWAYS: take
 * over at once (a restart on another node). NEVER: wait up to wait_s for
 * the lock to be released or its lease to end, then -EBUSY. */
enum rckpt_takeover { RCKPT_TAKEOVER_AUTO = 0, RCKPT_TAKEOVER_NEVER = 1, RCKPT_TAKEOVER_ALWAYS = 2 };

/* AUTO: on the GPU when this build has CUDA, the machine a device, and a
 * saved tensor (or gradient) is in device memory; else on the CPU. The
 * environment variable RCKPT_COMPUTE (auto, cpu, gpu) overrides AUTO.
 * CPU: tensors must be in host memory (-EINVAL names one that is not).
 * GPU: host tensors are copied to the device one at a time; -ENODEV at
 * save when there is no device. */
enum rckpt_compute { RCKPT_COMPUTE_AUTO = 0, RCKPT_COMPUTE_CPU = 1, RCKPT_COMPUTE_GPU = 2 };

#define RCKPT_JOB_OPTS_INIT \
	{ RCKPT_JOB_OPTS_VERSION, 0, RCKPT_EPS_DEFAULT, 0, 0, 0, 0, 0, RCKPT_COMPUTE_AUTO, NULL, NULL, 0.0, \
	  0, 0, 0, 0.0, 0, RCKPT_TAKEOVER_AUTO, 0, 0, 0 }

/* Opens job `job` (a RADOS namespace of the pool, 1..63 characters of
 * [A-Za-z0-9._-], the first not . or -). A writer takes an exclusive lock on the job object and
 * claims the job (a new fencing token): -EBUSY (with a message naming the
 * holder) while another writer holds it and opts->takeover does not take
 * it over; a lock whose holder died expires after its lease. A writer of
 * a job that does not exist yet creates nothing until its first save (or
 * other write): an open only to restore leaves no job behind. Its first
 * save trims records that a crashed writer appended past the committed
 * head. */
RCKPT_API int rckpt_job_open(rckpt_t *h, rckpt_job_t **out, const char *job,
			     const rckpt_job_opts_t *opts);
/* Releases the lock (a writer) and frees j. */
RCKPT_API void rckpt_job_close(rckpt_job_t *j);
/* Releases a writer's lock now, without waiting for a save in flight,
 * from any thread: for a process about to exit on a signal, so that the
 * next writer need not wait for the lease. The
 * handle must then only be closed. 0, or a RADOS error. */
RCKPT_API int rckpt_job_release(rckpt_job_t *j);
/* The job's committed head, read now, into *out: RCKPT_LATEST when no
 * step is committed (a new job). 0, or a RADOS error. */
RCKPT_API int rckpt_job_head(rckpt_job_t *j, uint64_t *out);

/* Who writes a job, as read now (a reader may ask; nothing is taken). */
typedef struct rckpt_writer_info {
	uint64_t token;   /* the newest writer's fencing token; 0: never claimed */
	int locked;       /* 1 while a writer holds the job's lock */
	char holder[160]; /* that writer as a takeover sees it ("process 123 of
			     this machine, still running, client.4567"); "" */
} rckpt_writer_info_t;
/* 0, or a RADOS error. */
RCKPT_API int rckpt_job_writer(rckpt_job_t *j, rckpt_writer_info_t *out);

typedef struct rckpt_save_stats {
	uint64_t raw_bytes;  /* the tensors as fp32 */
	uint64_t enc_bytes;  /* records, manifest and attachment written */
	unsigned nchunks;
	int is_base;
	double quality;      /* the compressor's loss for this step (a partial
				save: that of the blocks it stored) */
	double t_encode, t_write; /* seconds */
	/* since partial saves: */
	int is_partial;           /* a sparse partial step */
	uint64_t blocks;          /* a partial save: quantized blocks in the model */
	uint64_t blocks_saved;    /* ... and those it stored */
	/* since optimizer roles (rckpt_job_set_roles): */
	double opt_quality;       /* the optimizer state's update error (0: none) */
	uint64_t opt_raw_bytes;   /* its share of raw_bytes */
	uint64_t opt_enc_bytes;   /* and of the records' bytes */
	/* since head records: */
	uint64_t head_bytes;      /* the deltas' head records written besides
				     enc_bytes (each replaces the chunk's last
				     one: formats/store.md "Head records") */
} rckpt_save_stats_t;

/* Compresses tensors t[0..n) (and the gradient RMS g[0..ng), fp32, same
 * names, or none) as step `step`, appends a record to every chunk object,
 * writes the manifest, and commits the step. Returns when the step is
 * committed. Steps must grow. A save may hold other tensors than the one
 * before it (added, removed, renamed, resized or retyped): it is then a
 * base in a layout of its own (RCKPT_STEP_LAYOUT), and the tensors still
 * there go on as deltas from the save after it.
 * -EINVAL, -EDOM (NaN/Inf), -ESTALE (the head moved: another writer), a
 * RADOS error. st may be NULL. Tensors in CUDA device memory are read on a
 * stream of the library's own: the caller's work writing them must be
 * finished (synchronized) before the call. */
RCKPT_API int rckpt_job_save(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t, unsigned n,
			     const rckpt_tensor_t *g, unsigned ng, rckpt_save_stats_t *st);

/* Asynchronous save. rckpt_job_save_async compresses the step chunk by
 * chunk, starting each chunk's append as soon as its record is encoded, and
 * returns a handle once every chunk is encoded: the caller's tensors are
 * no longer needed then, and the trainer goes on while the last appends
 * run. Appends wait for earlier ones when `inflight` are out or their bytes
 * would pass the memory budget, so a save's memory does not grow with the
 * model. rckpt_save_wait finishes the appends, writes the manifest,
 * commits, returns the save's result and frees the handle; every handle
 * must be waited on once. One save is in flight per job: a second
 * rckpt_job_save_async first finishes the first (back-pressure), whose
 * result then waits in its handle. A save that fails after appending
 * leaves records past the head; the next save trims them and writes a
 * base. Closing the job with a save in flight abandons it: it never
 * commits, and waiting on it gives -ECANCELED. */
typedef struct rckpt_save rckpt_save_t;
RCKPT_API int rckpt_job_save_async(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t,
				   unsigned n, const rckpt_tensor_t *g, unsigned ng,
				   rckpt_save_t **out);
RCKPT_API int rckpt_save_wait(rckpt_save_t *s, rckpt_save_stats_t *st);

/* Prioritized partial checkpoints (SCAR). A partial save stores only a
 * fraction of the model's blocks (partial_block elements of a quantized
 * tensor's chunk piece each) in a sparse partial record per chunk; every
 * other value stays as it was last saved, so each committed step restores
 * the "running checkpoint": every block at its latest save. Saving a
 * fraction r every r*C steps writes about as much as a full save every C.
 * Norms and biases (kept as bf16) go in whole every time, outside the
 * fraction (st->blocks counts the others). The blocks are
 * quantized with the codebooks of the last full save; when their error
 * with those passes eps (training moved them out of reach), the save is a
 * full one instead, which fits new codebooks (st->is_partial says). */
enum rckpt_select {
	RCKPT_SELECT_PRIORITY = 0,    /* the blocks whose values moved most since
					 they were last saved (L2 distance) */
	RCKPT_SELECT_ROUND_ROBIN = 1, /* the next blocks in layout order */
	RCKPT_SELECT_RANDOM = 2,      /* a uniform draw seeded by (seed, step) */
};

typedef struct rckpt_partial {
	double fraction; /* of the blocks, (0, 1]; at least one block */
	unsigned select; /* enum rckpt_select */
	uint64_t seed;   /* RCKPT_SELECT_RANDOM */
} rckpt_partial_t;

/* As rckpt_job_save(_async), saving the blocks p picks. The job must have
 * been opened with partial_block (-EINVAL otherwise); tensors must be in
 * host memory (-EINVAL). A writer's first save, and its first after a
 * failed one, is a full save instead (st->is_partial says which). g
 * (optional) refines the sensitivity thresholds as in a full save. */
RCKPT_API int rckpt_job_save_partial_async(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t,
					   unsigned n, const rckpt_tensor_t *g, unsigned ng,
					   const rckpt_partial_t *p, rckpt_save_t **out);
RCKPT_API int rckpt_job_save_partial(rckpt_job_t *j, uint64_t step, const rckpt_tensor_t *t,
				     unsigned n, const rckpt_tensor_t *g, unsigned ng,
				     const rckpt_partial_t *p, rckpt_save_stats_t *st);

/* Optimizer state as first-class tensors of a step (formats/checkpoint.md
 * "Optimizer state"). A save's tensors are the model's unless declared
 * here: an optimizer's float state goes in the same save, each tensor
 * under a name of its own ("exp_avg.fc1.weight", a path), with its role.
 * It is compressed apart from the model: laid out in chunks of its own,
 * second moments in the log domain, and judged by the update error (the
 * relative error of the update u = m / (sqrt(v) + eps) the restored
 * optimizer takes, <= opt_eps) instead of the model's measure. Integer
 * state (a step count) is not a tensor: attach it. */
enum rckpt_role {
	RCKPT_ROLE_MODEL = 0,   /* a model's tensor (the default) */
	RCKPT_ROLE_MOMENT1 = 1, /* a first moment: Adam's exp_avg, SGD's momentum_buffer */
	RCKPT_ROLE_MOMENT2 = 2, /* Adam's exp_avg_sq (non-negative) */
	RCKPT_ROLE_OPTIM = 3,   /* any other float state of an optimizer */
};

typedef struct rckpt_tensor_role {
	const char *name;  /* a tensor of the saves */
	unsigned role;     /* enum rckpt_role */
	const char *param; /* MOMENT1, MOMENT2: the parameter whose state it is
			      (any string; NULL: none). A first and a second
			      moment of the same param pair up for the update
			      error; unpaired state is judged by its own
			      relative error */
	double eps;        /* MOMENT2: the eps of the update, in the units of
			      sqrt(this tensor): Adam's eps * sqrt(1 - beta2^t)
			      folds in the bias corrections; 0: 1e-8 */
} rckpt_tensor_role_t;

/* Declares the roles of the writer's next saves' tensors (a copy; it
 * replaces the last declaration; n = 0 clears it). A declared name that a
 * save lacks is ignored. 0, -EINVAL (no name, a name twice, an unknown
 * role, eps < 0), -EPERM (read-only job), -ENOMEM. A save whose second
 * moment holds a negative value fails with -EDOM, naming it. */
RCKPT_API int rckpt_job_set_roles(rckpt_job_t *j, const rckpt_tensor_role_t *r, unsigned n);

/* Attaches a copy of data[0..len) to the job's next save: the bytes are
 * stored with that step, zstd-compressed and checksummed, and come back
 * with it (rckpt_restored_attachment). For what is not a tensor of fp32,
 * fp16 or bf16: optimizer state kept losslessly, counters, a scheduler.
 * The next rckpt_job_save(_async) takes them, whether or not it commits;
 * a later call before it replaces them, and data NULL with len 0 clears
 * them. 0, -EPERM (read-only job), -EFBIG (over 1 GiB, or over 64 MiB
 * compressed), -ENOMEM. */
RCKPT_API int rckpt_job_attach(rckpt_job_t *j, const void *data, size_t len);

/* The exact tier (formats/store.md "Exact steps"). With on = 1, the
 * writer's next saves store their steps bit-exact: each is a base record,
 * as lossy as any, and per chunk the bits quantization changed (the
 * source XOR the lossy values, in byte planes, zstd-coded): a restore
 * then reads every tensor as it was handed in, bit for bit (its SHA-256
 * checked), before and after compactions. The lossy saves that follow
 * are deltas on it. Costs about 2-3 bytes a parameter (fp32) more than a
 * lossy step; tensors must be in host memory, and a partial save is never
 * exact (-EINVAL). on = 0: lossy again. 0, -EPERM (read-only job). */
RCKPT_API int rckpt_job_set_exact(rckpt_job_t *j, int on);

/* The thresholds of the writer's next saves, in place of the options'
 * eps and opt_eps: each in (0, 1), 0 keeping the one in use. A trainer
 * tightens eps as its learning rate decays: a late restore's error is
 * no longer healed by training (docs/compression.md "Thresholds that
 * follow the learning rate"). Group saves keep the options'. 0, -EINVAL
 * (out of range, changing nothing), -EPERM (read-only job). */
RCKPT_API int rckpt_job_set_eps(rckpt_job_t *j, double eps, double opt_eps);

/* The job's record of resumes, read now: *count the writers that restored
 * a step before their first save (a restarted trainer reading where it
 * left off; once per handle), *last the step the newest one read
 * (RCKPT_LATEST: none). A trainer that resumes often stores finer: a
 * restore's error is paid once per resume (docs/compression.md "Thresholds
 * that follow the restores"). Either pointer may be NULL. 0, -EBADMSG (a
 * damaged record), or a RADOS error. */
RCKPT_API int rckpt_job_restores(rckpt_job_t *j, uint64_t *count, uint64_t *last);

/* A restored step: its tensors, decoded (every chunk's SHA-256 checked). */
typedef struct rckpt_restored rckpt_restored_t;

typedef struct rckpt_restore_stats {
	uint64_t wire_bytes;   /* bytes the OSDs sent */
	unsigned calls;        /* materialize calls, resumed ones included */
	double seconds;
	/* since head records, where the seconds went (the chunks decode as
	 * their records come, so t_fetch holds most of decode_cpu's work): */
	double t_locate;       /* the head and the step's summary (and its manifest
				  when it is read first: a restore of some
				  tensors, or of more chunks than `inflight`) */
	double t_fetch;        /* the materialize calls, first sent to last
				  answered (the OSDs' work, the transfer) */
	double t_decode;       /* decoding after the last answer came (and
				  the attachment's read) */
	double decode_cpu;     /* CPU seconds of decoding every chunk's record
				  (entropy decode, digest), on all threads */
} rckpt_restore_stats_t;

/* Restores committed step `step` (RCKPT_LATEST: the head). -ENOENT when
 * no such step is committed, RCKPT_ECHECKSUM when stored data is damaged. */
RCKPT_API int rckpt_job_restore(rckpt_job_t *j, uint64_t step, rckpt_restored_t **out,
				rckpt_restore_stats_t *st);
/* The attachment of committed step *step (RCKPT_LATEST: the head, *step
 * then set to it), without restoring its tensors: its *len bytes into
 * dst[0..cap). -ERANGE (with *len) when cap is too small: call with dst
 * NULL, cap 0 to learn *len; -ENOENT when there is no such step or it was
 * saved without one. Since 0.1.0. */
RCKPT_API int rckpt_job_attachment(rckpt_job_t *j, uint64_t *step, void *dst, size_t cap, size_t *len);
/* Partial recovery: restores only the chunks holding tensors names[0..n)
 * (-ENOENT for a name the step lacks). The others read as -ENOENT. */
RCKPT_API int rckpt_job_restore_tensors(rckpt_job_t *j, uint64_t step, const char *const *names,
					unsigned n, rckpt_restored_t **out,
					rckpt_restore_stats_t *st);
/* Partial recovery of element ranges (what a failed worker owned):
 * restores only the chunks that hold ranges[0..n), each elements [first,
 * first + count) of tensor `name` in row-major order. -ENOENT for a name
 * the step lacks, -ERANGE for a range past its tensor. */
typedef struct rckpt_range {
	const char *name;
	uint64_t first, count;
} rckpt_range_t;
RCKPT_API int rckpt_job_restore_ranges(rckpt_job_t *j, uint64_t step, const rckpt_range_t *ranges,
				       unsigned n, rckpt_restored_t **out, rckpt_restore_stats_t *st);
/* Rewinds writer j to committed step `step` (a loss spike: go back, skip
 * some batches, save a new step + 1): atomically and fenced by the
 * writer's token, the head moves back to it and the steps after it are
 * forgotten (formats/store.md "Rewind"). With branch NULL their objects
 * are garbage that the next save trims and rckpt_job_gc removes; with a
 * branch name, they are first copied, with the step itself, into a new
 * job "<job>.<branch>" (copied once: a branch needs objects of its own),
 * which rckpt_job_branches lists. Later saves go on from the step, as a
 * new writer would. -EPERM (read-only), -EINVAL (not a committed step:
 * after the head; or a branch name that makes no job name), -ENOENT (not
 * listed: dropped), -EBUSY (a later step is pinned; nothing changed),
 * -EEXIST (the branch's job exists), -ESTALE (another writer has taken
 * the job). */
RCKPT_API int rckpt_job_rewind(rckpt_job_t *j, uint64_t step, const char *branch);

/* Starts job `dst` (it must have no committed step) as a branch of src's
 * listed steps in [from, upto] (fine-tuning from a checkpoint: from =
 * upto), copied once, the first as its materialized base, the rest as
 * stored where they are deltas on the step before: the same contents, bit
 * for bit. A writer of dst then goes on from its head. -EINVAL, -EEXIST,
 * -ENOENT (no listed step in the range), or a copy's error (dst then
 * holds the steps copied before it). */
RCKPT_API int rckpt_job_branch(rckpt_job_t *src, uint64_t from, uint64_t upto, const char *dst);

typedef struct rckpt_branch_info {
	char job[64];        /* the other job */
	uint64_t from, upto; /* the steps copied */
	int made_from;       /* 1: j was made from that job's steps; 0: that job
				was made from j's (a rewind that kept them) */
} rckpt_branch_info_t;

/* The branches of j: the job it was made from, if any, then the jobs made
 * of its steps, at most cap into out; *n gets how many. */
RCKPT_API int rckpt_job_branches(rckpt_job_t *j, rckpt_branch_info_t *out, unsigned cap, unsigned *n);

/* Where j's restores fold chains: 0 in the OSDs (the rckpt class), 1 here
 * in the client (slower: every record of a chain crosses the network),
 * with why (NUL-terminated, cap bytes) saying why: the class is missing,
 * not permitted, or cannot read this client's records, or RCKPT_FOLD=client
 * is set (auto, osd or client; auto by default). Both give the same bytes
 * (formats/store.md, "Restore without the plugin"). Negative: an error
 * (the job object cannot be asked). */
RCKPT_API int rckpt_job_folds_here(rckpt_job_t *j, char *why, size_t cap);

RCKPT_API uint64_t rckpt_restored_step(const rckpt_restored_t *r);
RCKPT_API unsigned rckpt_restored_count(const rckpt_restored_t *r);
/* Tensor i's description (data is NULL): name, dtype, shape. */
RCKPT_API int rckpt_restored_tensor(const rckpt_restored_t *r, unsigned i, rckpt_tensor_t *out);
/* Tensor i's role (enum rckpt_role) as saved, or -EINVAL. */
RCKPT_API int rckpt_restored_role(const rckpt_restored_t *r, unsigned i);
/* Writes tensor i, dequantized, in its own dtype into dst (elements x the
 * dtype's size bytes). -ENOENT for a tensor a partial restore left out
 * (then nothing is written); -ENOMEM may leave dst partly written. */
RCKPT_API int rckpt_restored_read(const rckpt_restored_t *r, unsigned i, void *dst, size_t cap);
/* Tensors idx[0..n), each as rckpt_restored_read writes it, into dst[k]
 * (cap[k] bytes), on up to `threads` threads (0: the CPUs the process may
 * use, at most 8), every tensor in pieces of at most 4 Mi elements, so
 * that the threads share any mix of sizes. Every tensor is checked before
 * any is written; rcs[k] gets tensor k's result (-ENOENT: left out by a
 * partial restore, nothing written). Returns 0, or -EINVAL, -ENOMEM (then
 * nothing is written). */
RCKPT_API int rckpt_restored_read_many(const rckpt_restored_t *r, unsigned n, const unsigned *idx,
				       void *const *dst, const size_t *cap, int *rcs, unsigned threads);
/* The same into CUDA device memory at d_dst (a tensor's data on the GPU):
 * the levels (a byte an element) and protected values go to the device and
 * are dequantized there, straight into d_dst, with no fp32 copy of the
 * tensor in host memory; the same bytes as rckpt_restored_read. Returns
 * once the values are in place (the caller's own streams must not be
 * using d_dst meanwhile). The calling thread's current CUDA device is
 * left as it was. -ENODEV when this build has no CUDA or the machine no
 * device; -EFAULT when d_dst is not device memory; -ENOMEM when the
 * device has no room for the levels (read on the host instead). */
RCKPT_API int rckpt_restored_read_device(const rckpt_restored_t *r, unsigned i, void *d_dst, size_t cap);
/* Writes elements [first, first + count) of tensor i, dequantized, in its
 * own dtype to dst (count x the dtype's size bytes): partial recovery into
 * the caller's live tensor (dst = its data + first elements) leaves every
 * other element as it was. -ERANGE past the tensor; -ENOENT when a chunk
 * holding the range was not restored. */
RCKPT_API int rckpt_restored_read_range(const rckpt_restored_t *r, unsigned i, uint64_t first,
					uint64_t count, void *dst);
/* 1 when r holds the saved bits (an exact step: every tensor restored
 * reads as it was handed in), 0 when the lossy values. */
RCKPT_API int rckpt_restored_exact(const rckpt_restored_t *r);
/* The index of tensor `name` in r, or -ENOENT. */
RCKPT_API int rckpt_restored_find(const rckpt_restored_t *r, const char *name);
/* The step's attachment: *data (valid as long as r) and *len; -ENOENT
 * when the step was saved without one. */
RCKPT_API int rckpt_restored_attachment(const rckpt_restored_t *r, const void **data, size_t *len);
RCKPT_API void rckpt_restored_free(rckpt_restored_t *r);

#define RCKPT_STEP_EXACT 1u  /* stored bit-exact */
#define RCKPT_STEP_ATTACH 2u /* has an attachment (steps of early clients
				may have one and not say so) */
#define RCKPT_STEP_LAYOUT 4u /* its tensors differ from the step before it
				(added, removed, renamed, resized, retyped):
				a base in a new chunk layout */
typedef struct rckpt_step_info {
	uint64_t step, parent; /* parent: RCKPT_LATEST for a base */
	uint64_t raw_bytes, enc_bytes;
	unsigned nchunks;
	unsigned flags;        /* RCKPT_STEP_* */
	unsigned ranks;        /* the ranks of the group that saved it
				  (rckpt_group_save); 0: one writer */
	uint64_t opt_raw_bytes, opt_enc_bytes; /* the optimizer state's share of
				  raw_bytes and of the records' bytes (0: none,
				  or saved before roles) */
} rckpt_step_info_t;

/* 1 when job j exists in the pool (a writer has opened it: its job
 * object is there), 0 when it does not, or a negative errno. A reader may
 * open a job that does not exist; it then lists no steps and restores
 * none, and tools say "does not exist" with this. */
RCKPT_API int rckpt_job_exists(rckpt_job_t *j);

/* The committed steps after `after` (RCKPT_LATEST: from the first), at
 * most cap into out; *n gets how many; *more whether others follow. */
RCKPT_API int rckpt_job_steps(rckpt_job_t *j, uint64_t after, rckpt_step_info_t *out, unsigned cap,
			      unsigned *n, int *more);

/* Retention: the committed steps a compaction keeps. The head and pinned
 * steps are always kept; with both fields 0 every step is kept. */
typedef struct rckpt_retention {
	uint32_t keep_last;  /* the newest N steps */
	uint64_t keep_every; /* steps that are multiples of M */
} rckpt_retention_t;

/* Stores r as the job's policy (what `rckpt compact --all` applies), or
 * reads it back (both 0 when none was set). */
RCKPT_API int rckpt_job_set_retention(rckpt_job_t *j, const rckpt_retention_t *r);
RCKPT_API int rckpt_job_retention(rckpt_job_t *j, rckpt_retention_t *r);

/* Pins (on = 1) a committed step so that retention keeps it, or unpins it
 * (0). RCKPT_PIN_EXACT pins a milestone that must stay exact: it is
 * refused (-EINVAL) for a step that was not saved exact, and an exact
 * step keeps its residuals as long as it is kept. -ENOENT for a step that
 * is not committed. */
#define RCKPT_PIN_EXACT 2
RCKPT_API int rckpt_job_pin(rckpt_job_t *j, uint64_t step, int on);
/* Whether step is pinned: 1, 0, or a negative code. */
RCKPT_API int rckpt_job_pinned(rckpt_job_t *j, uint64_t step);

/* Forgets committed step `step` (not the head, not a pinned step: -EBUSY);
 * its records go at the next compaction. */
RCKPT_API int rckpt_job_drop(rckpt_job_t *j, uint64_t step);

typedef struct rckpt_compact_stats {
	uint64_t steps_before, steps_after; /* committed steps listed */
	uint64_t bytes_before, bytes_after; /* chunk objects' data */
	unsigned chunks;
	unsigned stages;         /* rounds of compact calls (bounded work each) */
	double seconds;
	double max_call_seconds; /* the slowest single compact call */
} rckpt_compact_stats_t;

/* Compacts the job under retention r (NULL: the job's stored policy):
 * forgets the steps r does not keep, then rewrites every chunk so that the
 * head is a base and each kept step stays restorable, in stages of at most
 * 16 records folded per chunk call. Safe beside a writer (records past the
 * head are left alone) and beside another compaction; repeating it changes
 * nothing. Read-only handles may compact. */
RCKPT_API int rckpt_job_compact(rckpt_job_t *j, const rckpt_retention_t *r,
				rckpt_compact_stats_t *st);

typedef struct rckpt_verify_stats {
	uint64_t steps;      /* committed steps listed */
	uint64_t records;    /* chunk records indexed */
	uint64_t bytes;      /* record bytes checked */
	uint64_t bad;        /* records or manifests that fail a check */
	uint64_t first_bad_step; /* RCKPT_LATEST if none */
	unsigned first_bad_chunk; /* UINT_MAX if none */
} rckpt_verify_stats_t;

/* Checks every chunk record in the OSDs (range, header, CRC-32C, parent
 * present) and that every listed step has its manifest. RCKPT_ECHECKSUM
 * when anything fails (st says what), else 0. */
RCKPT_API int rckpt_job_verify(rckpt_job_t *j, rckpt_verify_stats_t *st);

/* What the job occupies now (after compactions and drops, unlike the
 * sizes its steps were saved with): the bytes of its chunk objects (the
 * head step's chunks) and of its committed steps' manifests and
 * attachments, and how many
 * objects those are. */
RCKPT_API int rckpt_job_stored(rckpt_job_t *j, uint64_t *bytes, unsigned *objects);

/* A writer only: removes what no committed step uses — records past the
 * head (a crashed writer's) and manifests of steps not listed. *removed
 * (may be NULL) gets the objects removed. */
RCKPT_API int rckpt_job_gc(rckpt_job_t *j, unsigned *removed);

/* Deletes job `job` and every object in it, under the writer lock (-EBUSY while a
 * writer holds it); -EPERM, with nothing removed, for a user who may not remove the
 * job object (a reader, a compactor). */
RCKPT_API int rckpt_job_delete(rckpt_t *h, const char *job);

/* The pool's jobs (namespaces with a job object), sorted; free with rckpt_jobs_free. */
RCKPT_API int rckpt_jobs(rckpt_t *h, char ***names, unsigned *n);
RCKPT_API void rckpt_jobs_free(char **names, unsigned n);

/* ---- adaptive checkpoint policy (preemptible machines) ---- */

/* The Young/Daly interval: with save time delta, mean time to preemption
 * mttp and restart time r (seconds), M = mttp + r: Daly's higher-order
 * optimum sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9)
 * - delta for delta < 2M, else M. Young's first-order form is its leading
 * term, sqrt(2 delta M). Seconds; 0 for delta <= 0. */
RCKPT_API double rckpt_policy_interval(double delta, double mttp, double r);

typedef struct rckpt_policy rckpt_policy_t;

#define RCKPT_POLICY_OPTS_VERSION 1

typedef struct rckpt_policy_opts {
	unsigned version;       /* RCKPT_POLICY_OPTS_VERSION */
	double grace_s;         /* the platform's grace after a notice; 0: 30 s */
	double beta_s;          /* margin of the emergency test; 0: 1 s */
	double default_mttp_s;  /* until a preemption is on record; 0: 3600 s */
	double min_interval_s;  /* the interval's floor; 0: none (one step) */
	const char *notice_file;/* a notice is this file appearing; NULL: none */
	const char *notice_cmd; /* a notice is `sh -c cmd` exiting 0; NULL: none */
	double poll_s;          /* how often file and command are checked; 0: 1 s */
	unsigned history;       /* preemptions the estimate uses, newest; 0: 64;
				   at most 1024 (each history object keeps 1024) */
} rckpt_policy_opts_t;

#define RCKPT_POLICY_OPTS_INIT { RCKPT_POLICY_OPTS_VERSION, 0, 0, 0, 0, NULL, NULL, 0, 0 }

/* What should_save says. */
enum rckpt_policy_decision {
	RCKPT_POLICY_CONTINUE = 0,  /* train on */
	RCKPT_POLICY_SAVE = 1,      /* the interval is due */
	RCKPT_POLICY_INSURANCE = 2, /* the interval is due and no emergency save would fit
				       the grace: all a preemption will leave */
	RCKPT_POLICY_EMERGENCY = 3, /* a notice came, a save fits the grace: save, stop */
	RCKPT_POLICY_STOP = 4,      /* a notice came and no save fits: stop */
};

/* The policy of job j (which it keeps using: close it first). It reads the
 * preemption history, the job's (its job object's omap) and the pool's
 * (object "rckpt.preemptions" of the default namespace, which every job of
 * the pool adds to), and marks this run's start. */
RCKPT_API int rckpt_policy_open(rckpt_job_t *j, rckpt_policy_t **out, const rckpt_policy_opts_t *o);
RCKPT_API void rckpt_policy_close(rckpt_policy_t *p);

/* Measurements (seconds), each folded into a moving average: a training
 * step, a save (as the trainer waits for it, or its encode + write), a
 * restart (preemption to the first step after the restore; stored with the
 * last preemption). */
RCKPT_API void rckpt_policy_step_time(rckpt_policy_t *p, double s);
RCKPT_API void rckpt_policy_save_time(rckpt_policy_t *p, double s);
RCKPT_API int rckpt_policy_restart_time(rckpt_policy_t *p, double s);

/* A preemption notice, e.g. from a SIGTERM handler: async-signal-safe. */
RCKPT_API void rckpt_policy_notify(rckpt_policy_t *p);

/* The decision after step `step` finished (enum rckpt_policy_decision).
 * Checks the notice file and command at most every poll_s. A notice is
 * put on record (the run's lifetime, in the job and the pool) once. A
 * save the trainer makes after SAVE, INSURANCE or EMERGENCY should be
 * followed by rckpt_policy_saved. */
RCKPT_API int rckpt_policy_should_save(rckpt_policy_t *p, uint64_t step);
RCKPT_API void rckpt_policy_saved(rckpt_policy_t *p, uint64_t step);

typedef struct rckpt_policy_info {
	double mttp_s;        /* the estimate in use */
	unsigned preemptions; /* on record: the pool's (the job's are among them) */
	unsigned job_preemptions;
	double save_s, restart_s, step_s; /* the averages in use */
	double interval_s;    /* rckpt_policy_interval of those */
	int emergency_fits;   /* step + save + beta < grace */
	int noticed;          /* a notice has come */
	double notice_age_s;  /* since the notice */
} rckpt_policy_info_t;

RCKPT_API int rckpt_policy_info(rckpt_policy_t *p, rckpt_policy_info_t *out);

/* ---- group saves (distributed training) ---- */

/* A rank's share of a tensor for a group save: global tensor `name` of
 * dtype and global shape, elements [offset, offset + count) of it
 * flattened in row-major order, at data (host memory). Under DDP every
 * rank hands every tensor whole (offset 0, count all); under ZeRO-3 or
 * FSDP each rank its slice. Ranks may hold the same elements. */
typedef struct rckpt_shard {
	const char *name;
	unsigned dtype; /* enum rckpt_dtype_public */
	unsigned ndim;
	uint64_t shape[RCKPT_MAX_DIMS];
	uint64_t offset, count;
	const void *data;
} rckpt_shard_t;

typedef struct rckpt_group rckpt_group_t;

/* Opens job `job` for a group of tr->size ranks, collectively (every rank
 * calls it, with the same job and options, over the trainer's transport:
 * rckpt_loc_transport_t, MPI or torch.distributed). Rank 0 takes the job's
 * writer lock and claims it; the others join under that claim, so a
 * writer that later takes the job fences every rank. A second group is
 * refused as a second writer is (-EBUSY, on every rank). */
RCKPT_API int rckpt_group_open(rckpt_t *h, rckpt_group_t **out, const char *job,
			       const rckpt_job_opts_t *opts, const rckpt_loc_transport_t *tr);
/* Saves step `step` collectively: every rank hands its shards s[0..n).
 * The chunks follow the global tensors (checkpoint.md "Chunks"), never
 * the ranks: each chunk is encoded and appended by one rank, the one
 * holding most of it (what it lacks comes over the transport first), in
 * parallel; rank 0 commits the step once every rank's chunks are
 * appended, and every rank returns its result. A failure on any rank
 * fails the step on every rank (the head stays; the next save trims what
 * it left). The step restores as any other (rckpt_job_restore), on any
 * number of processes. st (may be NULL): the whole step's bytes. */
RCKPT_API int rckpt_group_save(rckpt_group_t *g, uint64_t step, const rckpt_shard_t *s, unsigned n,
			       rckpt_save_stats_t *st);
/* The exact tier for a group (rckpt_job_set_exact; opts->exact at open):
 * the next group saves store their steps bit-exact, every rank its own
 * chunks' residuals. Every rank must say the same: a step is exact only
 * when every rank saved it so. */
RCKPT_API int rckpt_group_set_exact(rckpt_group_t *g, int on);
/* Bytes kept with the next group save, as rckpt_job_attach: rank 0's are
 * the step's attachment; the other ranks' calls do nothing. */
RCKPT_API int rckpt_group_attach(rckpt_group_t *g, const void *data, size_t len);
RCKPT_API void rckpt_group_close(rckpt_group_t *g);

#endif /* RCKPT_RCKPT_CKPT_H */
