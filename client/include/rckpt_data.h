/*
 * rckpt_data.h — training data in RADOS: Progressive Compressed Records and locality-aware loading.
 *
 * Part of librckpt's public interface: include <rckpt.h>, which includes
 * this file, not this file itself (its conventions are stated there).
 */
#ifndef RCKPT_RCKPT_DATA_H
#define RCKPT_RCKPT_DATA_H

#ifndef RCKPT_H
#error "include <rckpt.h>, not <rckpt_data.h>"
#endif

/* ---- training data: Progressive Compressed Records (formats/pcr.md) ---- */

/* A dataset is the namespace "pcr/<name>" of the pool (name: 1..63 of
 * [A-Za-z0-9._-], the first not . or -): record objects "rec.<n>", each holding up to
 * images_per_record JPEGs rewritten losslessly as progressive JPEGs with
 * their scans regrouped (group g: scan g of every image), and an "index"
 * object, written last, that makes the dataset visible. Reading a record
 * through group k gives every image in it at fidelity k. */

#define RCKPT_PCR_GROUPS_MAX 64
#define RCKPT_PCR_ALL 0u /* a group count meaning every group */

/* A file to put into a dataset. */
typedef struct rckpt_pcr_input {
	const char *path;  /* a JPEG file */
	const char *name;  /* the name kept for it (1..255 bytes, no '/'); NULL: path's basename */
	const void *label; /* opaque label bytes (0..1024), e.g. a class name */
	size_t label_len;
} rckpt_pcr_input_t;

typedef struct rckpt_pcr_progress {
	unsigned done, total;  /* inputs handled so far (skipped ones included) */
	unsigned skipped, records_written;
	uint64_t bytes_written;
} rckpt_pcr_progress_t;

#define RCKPT_PCR_BUILD_OPTS_VERSION 1

/* The progressive scan script of a dataset's images (build option
 * scan_script): a record's group k is its images' first k scans. */
#define RCKPT_PCR_SCRIPT_DEFAULT 0  /* libjpeg's: spectral selection and successive approximation */
#define RCKPT_PCR_SCRIPT_SPECTRAL 1 /* spectral selection alone: prefixes decode faster, fidelity
				       grows more slowly at the low groups (docs/datasets.md, "The scan script") */

typedef struct rckpt_pcr_build_opts {
	unsigned version;           /* RCKPT_PCR_BUILD_OPTS_VERSION */
	unsigned images_per_record; /* 0: 512 (at most 16384) */
	unsigned threads;           /* transform threads; 0: the online CPUs */
	unsigned inflight;          /* record writes in flight; 0: 4 */
	unsigned fidelity_sample;   /* images (spread) whose SSIM per group is measured; 0: 64 */
	int skip_bad;               /* skip and report an unusable file; else fail */
	uint64_t max_pixels;        /* a larger image is refused; 0: 64 Mi, the most */
	/* Called from the building thread after each record, and with a
	 * message for every file that is refused (skipped or fatal). */
	void (*progress)(void *arg, const rckpt_pcr_progress_t *p);
	void (*refused)(void *arg, const char *path, int err, const char *why);
	void *arg;
	unsigned scan_script; /* RCKPT_PCR_SCRIPT_* */
} rckpt_pcr_build_opts_t;

#define RCKPT_PCR_BUILD_OPTS_INIT                                                                  \
	{ RCKPT_PCR_BUILD_OPTS_VERSION, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, RCKPT_PCR_SCRIPT_DEFAULT }

typedef struct rckpt_pcr_build_stats {
	unsigned images, skipped, records, groups;
	uint64_t source_bytes; /* the input files */
	uint64_t stored_bytes; /* records and index */
	double seconds;
} rckpt_pcr_build_stats_t;

/* Builds dataset `dataset` from in[0..n). -EEXIST when it exists already;
 * -EINVAL for bad options or two inputs with the same name; for a file
 * that cannot be used (not a JPEG, corrupt, too large: -EBADMSG, -E2BIG,
 * or the errno of reading it), the build fails naming it unless skip_bad.
 * Records are written as they fill and the index last, so a failed build
 * leaves no dataset (rckpt_pcr_delete removes its records). */
RCKPT_API int rckpt_pcr_build(rckpt_t *h, const char *dataset, const rckpt_pcr_input_t *in,
			      unsigned n, const rckpt_pcr_build_opts_t *opts,
			      rckpt_pcr_build_stats_t *st);

/* Removes a dataset, index first; -ENOENT when there is none. */
RCKPT_API int rckpt_pcr_delete(rckpt_t *h, const char *dataset);

/* The datasets of the pool, sorted; free with rckpt_jobs_free. */
RCKPT_API int rckpt_pcr_datasets(rckpt_t *h, char ***names, unsigned *n);

/* An open dataset, read at a chosen number of groups. */
typedef struct rckpt_pcr rckpt_pcr_t;

enum rckpt_pcr_output { RCKPT_PCR_JPEG = 0, RCKPT_PCR_RGB = 1 };

#define RCKPT_PCR_OPTS_VERSION 1

/* rckpt_pcr_opts_t.scale: decode each image at 1/scale of its width and
 * height, in the DCT domain (libjpeg-turbo's scaled inverse DCT: the
 * entropy decoding is the same, the transform and colour conversion work
 * on fewer pixels), each side rounded up. 0 and 1 are full size; 2, 4 and
 * 8 are 1/2, 1/4 and 1/8. RCKPT_PCR_SCALE_AUTO picks per image the
 * smallest of those that keeps every luma DCT coefficient the image's
 * prefix holds: 1/8 when its scans hold the DC coefficients alone (group 1
 * of libjpeg's progression), 1/4 through zig-zag index 2, 1/2 through
 * index 9 (groups 2..4 of colour images), else full size. */
#define RCKPT_PCR_SCALE_AUTO 0x100u

typedef struct rckpt_pcr_opts {
	unsigned version;  /* RCKPT_PCR_OPTS_VERSION */
	unsigned groups;   /* k: read groups 1..k; RCKPT_PCR_ALL: every group */
	unsigned output;   /* enum rckpt_pcr_output */
	unsigned threads;  /* assemble/decode threads; 0: 1 */
	unsigned prefetch; /* records read ahead while iterating; 0: 2 */
	unsigned scale;    /* RCKPT_PCR_RGB: 0, 1, 2, 4, 8 or RCKPT_PCR_SCALE_AUTO
			      (above); other values -EINVAL. rckpt_pcr_image_t's
			      width and height are those of the decoded pixels */
} rckpt_pcr_opts_t;

#define RCKPT_PCR_OPTS_INIT { RCKPT_PCR_OPTS_VERSION, RCKPT_PCR_ALL, RCKPT_PCR_JPEG, 0, 0, 0 }

/* Opens a dataset (reads its index). -ENOENT when there is none;
 * -EINVAL, naming the option, for options out of range, groups above the
 * dataset's scan groups among them. */
RCKPT_API int rckpt_pcr_open(rckpt_t *h, rckpt_pcr_t **out, const char *dataset,
			     const rckpt_pcr_opts_t *opts);
/* Waits for reads in flight and frees d (batches handed out stay valid).
 * Accepts NULL. */
RCKPT_API void rckpt_pcr_close(rckpt_pcr_t *d);

typedef struct rckpt_pcr_info {
	uint32_t records, images;
	unsigned groups;         /* the most groups of any record */
	uint32_t fidelity_sample;
	uint64_t created;        /* Unix seconds */
	uint64_t source_bytes;   /* the original files */
	uint64_t head_bytes;     /* record heads: read at every fidelity */
	uint64_t group_bytes[RCKPT_PCR_GROUPS_MAX];
	uint32_t group_images[RCKPT_PCR_GROUPS_MAX]; /* images that have scan g */
	double mssim[RCKPT_PCR_GROUPS_MAX];          /* mean SSIM at g+1 groups; -1: not measured */
} rckpt_pcr_info_t;

RCKPT_API int rckpt_pcr_info(rckpt_pcr_t *d, rckpt_pcr_info_t *out);

/* What the index says of image id, with no I/O (rckpt_pcr_open read it):
 * the record that holds it, and its label (pointing into d, valid until
 * rckpt_pcr_close; NULL and 0 when it has none). record, label and
 * label_len may each be NULL. -ERANGE past the dataset. */
RCKPT_API int rckpt_pcr_lookup(rckpt_pcr_t *d, uint32_t id, uint32_t *record, const void **label,
			       size_t *label_len);

/* Starts a new pass over the records at k groups (RCKPT_PCR_ALL: all;
 * more than the dataset has: -EINVAL): the fidelity may change between
 * epochs. Reads in flight are waited for and dropped. */
RCKPT_API int rckpt_pcr_rewind(rckpt_pcr_t *d, unsigned groups);
/* The same, the pass reading only records[0..n), in that order (a
 * worker's share of an epoch, a shuffled order); records NULL: all, in
 * order. The list is copied. -ERANGE for a record past the dataset,
 * -EINVAL for more records than it has; either changes nothing. */
RCKPT_API int rckpt_pcr_rewind_records(rckpt_pcr_t *d, unsigned groups, const uint32_t *records,
				       uint32_t n);

/* The images of one record, or of a fetch. */
typedef struct rckpt_pcr_batch rckpt_pcr_batch_t;

/* The next record's images, in order, read with a ranged read (the head
 * and groups 1..k, checksums checked) and prefetch records ahead; with
 * RCKPT_PCR_RGB decoded on the thread pool. *out is NULL at the end of
 * the pass. RCKPT_ECHECKSUM for a damaged record. */
RCKPT_API int rckpt_pcr_next(rckpt_pcr_t *d, rckpt_pcr_batch_t **out);

/* Images ids[0..n) at the current fidelity, in that order, gathered in the
 * OSDs (`images`: one call per record touched). -ERANGE past the dataset. */
RCKPT_API int rckpt_pcr_fetch(rckpt_pcr_t *d, const uint32_t *ids, unsigned n,
			      rckpt_pcr_batch_t **out);

typedef struct rckpt_pcr_image {
	uint32_t id;           /* the image's index in the dataset */
	const char *name;      /* NUL-terminated */
	const void *label;
	size_t label_len;
	const uint8_t *jpeg;   /* header + scans 1..k + EOI */
	size_t jpeg_len;
	const uint8_t *rgb;    /* RCKPT_PCR_RGB: width * height * 3 bytes; else NULL */
	unsigned width, height; /* of rgb: the image's at 1/scale (rckpt_pcr_opts_t) */
} rckpt_pcr_image_t;

RCKPT_API unsigned rckpt_pcr_batch_count(const rckpt_pcr_batch_t *b);
/* Image i of b; its pointers live as long as b. */
RCKPT_API int rckpt_pcr_batch_image(const rckpt_pcr_batch_t *b, unsigned i, rckpt_pcr_image_t *out);
RCKPT_API void rckpt_pcr_batch_free(rckpt_pcr_batch_t *b);

typedef struct rckpt_pcr_read_stats {
	uint64_t wire_bytes; /* bytes the OSDs sent since open */
	uint64_t reads;      /* ranged reads and cls calls */
	uint64_t images;     /* images handed out */
} rckpt_pcr_read_stats_t;

RCKPT_API int rckpt_pcr_read_stats(rckpt_pcr_t *d, rckpt_pcr_read_stats_t *out);

/* ---- locality-aware loading ----
 * p learners read one dataset every epoch in global mini-batches of p x b
 * samples. In the first epoch each learner caches the samples it reads;
 * afterwards each builds its share of every global batch out of its own
 * cache, and only the imbalance moves between learners. These functions
 * are pure: every learner computes the same answers from the same inputs,
 * without communicating. */

#define RCKPT_LOC_STORAGE UINT32_MAX /* no learner: read from the cluster */

/* The order of epoch `epoch`'s n samples, perm[0..n): Fisher-Yates from
 * the end, j = (hi32(x) * i) >> 32 for i = n..2, x the splitmix64 stream
 * seeded with seed ^ (epoch * 0xd1b54a32d192ed03). Global batch t of
 * p x b samples is perm[t*p*b ..), the last one shorter; learner r's
 * share of a batch of g samples is g/p (the first g%p learners one more),
 * in rank order. */
RCKPT_API int rckpt_loc_order(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t *perm);

/* The cache directory: owner[s] for each of the n samples, the learner
 * that reads s in epoch `epoch` (the first the loader runs: its share of
 * each global batch of p x local_batch) while it has cached fewer than
 * `capacity` samples; else RCKPT_LOC_STORAGE. */
RCKPT_API int rckpt_loc_directory(uint64_t seed, uint64_t epoch, uint32_t n, unsigned p,
				  uint32_t local_batch, uint32_t capacity, uint32_t *owner);

typedef struct rckpt_loc_plan_stats {
	uint32_t moved;        /* samples sent from one learner's cache to another */
	uint32_t from_storage; /* samples in no cache, read from the cluster */
	uint32_t transfers;    /* (sender, receiver) pairs: at most p - 1 */
} rckpt_loc_plan_stats_t;

/* The plan for one global batch ids[0..g) under directory owner[0..n):
 * sample ids[i] goes into learner dst[i]'s local batch, from learner
 * src[i]'s cache (src == dst: no traffic) or, src[i] == RCKPT_LOC_STORAGE,
 * read by dst[i] from the cluster. Local batch sizes are the shares above.
 * A learner keeps its own cached samples (in batch order) up to its share;
 * samples in no cache fill the short learners in rank order; then the
 * largest surplus goes to the largest deficit, min of the two a transfer,
 * ties to the lower rank (two max-heaps): at most p - 1 transfers, within
 * twice the fewest. -ERANGE for an id >= n or a bad owner. */
RCKPT_API int rckpt_loc_plan(const uint32_t *owner, uint32_t n, unsigned p, const uint32_t *ids,
			     uint32_t g, uint32_t *src, uint32_t *dst, rckpt_loc_plan_stats_t *st);

/* How learners exchange samples: the caller's existing transport (MPI,
 * torch.distributed, ...), never a socket of ours. send and recv move
 * exactly len bytes to or from learner `peer` and block until done (a
 * matching recv may be needed first); 0 or a negative errno. The loader
 * keeps every step's messages in one global order (by sender, then
 * receiver) and no learner both sends and receives in one step, so
 * blocking, unbuffered transports cannot deadlock. */
typedef struct rckpt_loc_transport {
	void *ctx;
	unsigned rank, size; /* this learner, and p */
	int (*send)(void *ctx, unsigned peer, const void *buf, size_t len);
	int (*recv)(void *ctx, unsigned peer, void *buf, size_t len);
} rckpt_loc_transport_t;

/* In librckpt_mpi (built when MPI is found; link it beside librckpt): a
 * transport over the MPI communicator *(MPI_Comm *)comm, which must stay
 * valid while the loader is open. */
RCKPT_API int rckpt_loc_transport_mpi(void *comm, rckpt_loc_transport_t *out);

enum rckpt_loader_mode {
	RCKPT_LOADER_REGULAR = 0,  /* every learner reads its share from the cluster, every epoch */
	RCKPT_LOADER_LOCALITY = 1, /* epoch 0 fills the caches; later epochs read them */
};

#define RCKPT_LOADER_OPTS_VERSION 1

typedef struct rckpt_loader_opts {
	unsigned version;     /* RCKPT_LOADER_OPTS_VERSION */
	unsigned mode;        /* enum rckpt_loader_mode */
	uint32_t local_batch; /* b: a global batch is p x b samples */
	uint64_t seed;        /* the epoch orders (rckpt_loc_order) */
	uint64_t cache_bytes; /* per learner (JPEG bytes at the fidelity); 0: 1 GiB */
	unsigned groups;      /* fidelity: groups 1..k; RCKPT_PCR_ALL: all */
	unsigned output;      /* enum rckpt_pcr_output */
	unsigned threads;     /* decode threads; 0: 1 */
} rckpt_loader_opts_t;

#define RCKPT_LOADER_OPTS_INIT { RCKPT_LOADER_OPTS_VERSION, RCKPT_LOADER_REGULAR, 32, 0, 0, RCKPT_PCR_ALL, RCKPT_PCR_JPEG, 0 }

typedef struct rckpt_loader rckpt_loader_t;

/* This learner's loader of PCR dataset `dataset` (every learner opens it
 * with the same options). The transport is copied; it is used only in
 * locality mode. */
RCKPT_API int rckpt_loader_open(rckpt_t *h, rckpt_loader_t **out, const char *dataset,
				const rckpt_loc_transport_t *tr, const rckpt_loader_opts_t *o);
RCKPT_API void rckpt_loader_close(rckpt_loader_t *l);

/* Starts epoch `epoch` (epochs need not follow each other; the caches
 * fill during the first one run, whatever its number); *steps is its
 * number of global batches. */
RCKPT_API int rckpt_loader_epoch(rckpt_loader_t *l, uint64_t epoch, uint32_t *steps);

/* The data position (what a checkpoint keeps so that a resumed job sees
 * the samples it would have seen): *epoch, the epoch started last, and
 * *consumed, the samples of its order that the global batches given out
 * so far hold, over all learners (steps x p x b, from where it started,
 * at most the epoch's size). -EINVAL before any epoch. */
RCKPT_API int rckpt_loader_position(const rckpt_loader_t *l, uint64_t *epoch, uint32_t *consumed);

/* Starts epoch `epoch` after its first `consumed` samples (a position
 * rckpt_loader_position gave, on any number of learners: the global
 * batches are the epoch's remaining samples in order, p x b at a time);
 * *steps is the number of global batches left. In locality mode, the
 * first epoch a loader runs fills the caches with what it reads. -ERANGE
 * past the epoch's size. */
RCKPT_API int rckpt_loader_seek(rckpt_loader_t *l, uint64_t epoch, uint32_t consumed,
				uint32_t *steps);

/* This learner's local batch of the next step (its share of the global
 * batch: the same samples over all learners as the regular mode, in
 * global-batch order); *out is NULL after the epoch's last step. Every
 * learner must call it for every step (the exchange is collective). */
RCKPT_API int rckpt_loader_next(rckpt_loader_t *l, rckpt_pcr_batch_t **out);

typedef struct rckpt_loader_stats {
	uint64_t storage_bytes;   /* read from the cluster since open (index included) */
	uint64_t storage_samples;
	uint64_t cache_hits;      /* samples served from this learner's cache */
	uint64_t sent_samples, sent_bytes;
	uint64_t recv_samples, recv_bytes;
	uint64_t cached_samples, cached_bytes; /* in the cache now */
} rckpt_loader_stats_t;

RCKPT_API int rckpt_loader_stats(rckpt_loader_t *l, rckpt_loader_stats_t *out);

#endif /* RCKPT_RCKPT_DATA_H */
