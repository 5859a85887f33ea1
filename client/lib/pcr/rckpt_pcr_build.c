/*
 * rckpt_pcr_build.c — building PCR datasets (formats/pcr.md), listing and
 * deleting them.
 *
 * A build goes through its inputs a record's worth at a time: threads
 * read, check and transform each file to a progressive JPEG (TurboJPEG's
 * lossless transform) and cut it at its scans; the building thread then
 * encodes the record and starts its write, which runs while the next
 * record's files are transformed. The index goes last.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "rckpt_pcr.h"
#include "rckpt_clock.h"
#include "rckpt_pcr_internal.h"
#include "rckpt_ssim.h"
#include "rckpt_buf.h"

#define DEFAULT_PER_RECORD 512u
#define DEFAULT_INFLIGHT 4u
#define DEFAULT_SAMPLE 64u
#define DEFAULT_MAX_PIXELS RCKPT_PCR_MAX_PIXELS
#define MAX_FILE_BYTES ((uint64_t)256 << 20)

/* ---- shared with the reader ---- */

void rckpt_pcr_record_oid(char out[RCKPT_PCR_OID_MAX], uint32_t n)
{
	snprintf(out, RCKPT_PCR_OID_MAX, "rec.%08" PRIu32, n);
}


int rckpt_pcr_io(rckpt_t *h, const char *dataset, rckpt_io_t **out)
{
	char ns[80];

	*out = NULL;
	if (!rckpt_connected(h))
		return -ENOTCONN;
	if (dataset == NULL || !rckpt_valid_name(dataset))
		return -EINVAL;
	snprintf(ns, sizeof(ns), RCKPT_PCR_NS_PREFIX "%s", dataset);
	return rckpt_io_open(h, ns, out);
}

int rckpt_pcr_read_object(rckpt_io_t *io, const char *oid, size_t max, uint8_t **out, size_t *len)
{
	uint64_t size;
	uint8_t *p;
	int rc;

	*out = NULL;
	*len = 0;
	rc = io->ops->stat(io, oid, &size);
	if (rc)
		return rc;
	if (size > max)
		return -EFBIG;
	p = malloc(size ? size : 1);
	if (p == NULL)
		return -ENOMEM;
	rc = size ? io->ops->read(io, oid, p, size, 0) : 0;
	if (rc >= 0 && (uint64_t)rc != size)
		rc = -EBADMSG; /* changed under us */
	if (rc < 0) {
		free(p);
		return rc;
	}
	*out = p;
	*len = size;
	return 0;
}

/* ---- one input ---- */

typedef struct bimg {
	int rc;
	char why[200];
	uint8_t *prog; /* the progressive JPEG (tjAlloc'd) */
	unsigned long prog_len;
	rckpt_pcr_split_t split;
	uint64_t src_bytes;
	int sampled;
	double ssim[RCKPT_PCR_MAX_GROUPS]; /* at g+1 scans */
} bimg_t;

typedef struct builder {
	rckpt_t *h;
	rckpt_io_t *io;
	rckpt_pcr_build_opts_t o;
	const rckpt_pcr_input_t *in;
	unsigned n;
	/* the window being transformed */
	bimg_t *win;
	unsigned from, count;
	unsigned next; /* under mu */
	pthread_mutex_t mu;
} builder_t;

static const char *input_name(const rckpt_pcr_input_t *in)
{
	const char *s;
	if (in->name)
		return in->name;
	s = strrchr(in->path, '/');
	return s ? s + 1 : in->path;
}

static int name_valid(const char *s)
{
	size_t n = strlen(s), i;
	if (n == 0 || n > RCKPT_PCR_MAX_NAME || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == '/' || s[i] == 0x7F)
			return 0;
	return 1;
}

/* Which inputs get their fidelity measured: `sample` of them, spread evenly. */
static int is_sampled(unsigned i, unsigned n, unsigned sample)
{
	if (sample >= n)
		return 1;
	return (uint64_t)(i + 1) * sample / n != (uint64_t)i * sample / n;
}

static int refuse(bimg_t *b, int rc, const char *fmt, const char *detail)
{
	b->rc = rc;
	snprintf(b->why, sizeof(b->why), fmt, detail);
	return rc;
}

static int read_file(const char *path, uint8_t **out, size_t *len)
{
	struct stat sb;
	uint8_t *p;
	size_t got = 0;
	FILE *f = fopen(path, "rb");

	*out = NULL;
	if (f == NULL)
		return -errno;
	if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
		fclose(f);
		return -EINVAL;
	}
	if ((uint64_t)sb.st_size > MAX_FILE_BYTES) {
		fclose(f);
		return -EFBIG;
	}
	p = malloc(sb.st_size ? (size_t)sb.st_size : 1);
	if (p == NULL) {
		fclose(f);
		return -ENOMEM;
	}
	while (got < (size_t)sb.st_size) {
		size_t r = fread(p + got, 1, (size_t)sb.st_size - got, f);
		if (r == 0)
			break;
		got += r;
	}
	fclose(f);
	if (got != (size_t)sb.st_size) {
		free(p);
		return -EIO;
	}
	*out = p;
	*len = got;
	return 0;
}

/* Mean SSIM over the channels (R, G, B, or gray) of two decoded images. */
static double ssim_channels(const uint8_t *a, const uint8_t *b, unsigned w, unsigned h, unsigned nch,
			    uint8_t *pa, uint8_t *pb)
{
	double sum = 0;
	unsigned c;
	size_t i, n = (size_t)w * h;
	if (nch == 1)
		return rckpt_ssim(a, b, w, h);
	for (c = 0; c < nch; c++) {
		double s;
		for (i = 0; i < n; i++) {
			pa[i] = a[i * nch + c];
			pb[i] = b[i * nch + c];
		}
		s = rckpt_ssim(pa, pb, w, h);
		if (s < -1)
			return s;
		sum += s;
	}
	return sum / nch;
}

/* SSIM of the image at 1..nscans-1 scans against all of them. */
static int measure(bimg_t *b, tjhandle dh)
{
	const unsigned w = b->split.width, hgt = b->split.height, ns = b->split.nscans;
	const unsigned nch = b->split.ncomp == 1 ? 1 : 3;
	const int pf = nch == 1 ? TJPF_GRAY : TJPF_RGB;
	const size_t px = (size_t)w * hgt;
	uint8_t *full = malloc(px * nch), *part = malloc(px * nch), *pa = malloc(px), *pb = malloc(px);
	uint8_t *jp = malloc(b->prog_len);
	unsigned k;
	int rc = 0;

	if (!full || !part || !pa || !pb || !jp) {
		rc = -ENOMEM;
		goto out;
	}
	if (tjDecompress2(dh, b->prog, b->prog_len, full, (int)w, 0, (int)hgt, pf, TJFLAG_LIMITSCANS)) {
		rc = -EBADMSG;
		goto out;
	}
	for (k = 1; k <= RCKPT_PCR_MAX_GROUPS; k++)
		b->ssim[k - 1] = 1.0;
	for (k = 1; k < ns; k++) {
		size_t at = b->split.start[k - 1] + b->split.len[k - 1];
		memcpy(jp, b->prog, at);
		jp[at] = 0xFF;
		jp[at + 1] = 0xD9;
		if (tjDecompress2(dh, jp, at + 2, part, (int)w, 0, (int)hgt, pf, TJFLAG_LIMITSCANS)) {
			rc = -EBADMSG;
			goto out;
		}
		b->ssim[k - 1] = ssim_channels(full, part, w, hgt, nch, pa, pb);
		if (b->ssim[k - 1] < -1) {
			rc = -ENOMEM;
			goto out;
		}
	}
	b->sampled = 1;
out:
	free(full);
	free(part);
	free(pa);
	free(pb);
	free(jp);
	return rc;
}

static int transform_one(builder_t *B, unsigned i, bimg_t *b, tjhandle th, tjhandle dh)
{
	const rckpt_pcr_input_t *in = &B->in[i];
	tjtransform xf;
	uint8_t *src = NULL;
	size_t len = 0;
	int w, hgt, sub, cs, rc;

	memset(b, 0, sizeof(*b));
	rc = read_file(in->path, &src, &len);
	if (rc)
		return refuse(b, rc, "cannot read it (%s)",
			      rc == -EFBIG ? "larger than 256 MiB" : rckpt_strerror(rc));
	b->src_bytes = len;
	if (len > ULONG_MAX || tjDecompressHeader3(dh, src, (unsigned long)len, &w, &hgt, &sub, &cs)) {
		rc = refuse(b, -EBADMSG, "not a JPEG (%s)", tjGetErrorStr2(dh));
		goto out;
	}
	if ((uint64_t)w * (uint64_t)hgt > B->o.max_pixels) {
		rc = refuse(b, -E2BIG, "%s", "too many pixels (see max_pixels)");
		goto out;
	}
	if (B->o.scan_script == RCKPT_PCR_SCRIPT_SPECTRAL) {
		char why[160];
		size_t n = 0;
		if ((rc = rckpt_pcr_transcode_spectral(src, len, &b->prog, &n, why, sizeof(why)))) {
			rc = refuse(b, rc, "corrupt JPEG (%s)", why);
			goto out;
		}
		b->prog_len = n;
	} else {
		memset(&xf, 0, sizeof(xf));
		xf.op = TJXOP_NONE;
		xf.options = TJXOPT_PROGRESSIVE | TJXOPT_COPYNONE;
		/* Any warning (a truncated or damaged file) refuses the file. */
		if (tjTransform(th, src, (unsigned long)len, 1, &b->prog, &b->prog_len, &xf,
				TJFLAG_LIMITSCANS | TJFLAG_STOPONWARNING)) {
			rc = refuse(b, -EBADMSG, "corrupt JPEG (%s)", tjGetErrorStr2(th));
			goto out;
		}
	}
	rc = rckpt_pcr_jpeg_split(&b->split, b->prog, b->prog_len);
	if (rc || !b->split.progressive) {
		rc = refuse(b, rc ? rc : -EBADMSG, "%s", "its progressive form cannot be cut at its scans");
		goto out;
	}
	if (is_sampled(i, B->n, B->o.fidelity_sample) && (rc = measure(b, dh)))
		refuse(b, rc, "%s", "its prefixes do not decode");
out:
	free(src);
	return rc;
}

static void *transform_worker(void *arg)
{
	builder_t *B = arg;
	tjhandle th = tjInitTransform(), dh = tjInitDecompress();

	for (;;) {
		unsigned k;
		pthread_mutex_lock(&B->mu);
		k = B->next++;
		pthread_mutex_unlock(&B->mu);
		if (k >= B->count)
			break;
		if (!th || !dh) {
			refuse(&B->win[k], -ENOMEM, "%s", "cannot start TurboJPEG");
			continue;
		}
		transform_one(B, B->from + k, &B->win[k], th, dh);
	}
	if (th)
		tjDestroy(th);
	if (dh)
		tjDestroy(dh);
	return NULL;
}

static void window_free(bimg_t *w, unsigned n)
{
	unsigned i;
	for (i = 0; i < n; i++) {
		if (w[i].prog)
			tjFree(w[i].prog);
		w[i].prog = NULL;
	}
}

/* Transforms inputs [from, from+count) on the threads. */
static int run_window(builder_t *B, unsigned from, unsigned count, unsigned threads)
{
	pthread_t tid[64];
	unsigned t, started = 0;

	B->from = from;
	B->count = count;
	B->next = 0;
	if (threads > count)
		threads = count;
	for (t = 1; t < threads; t++) {
		if (pthread_create(&tid[started], NULL, transform_worker, B))
			break;
		started++;
	}
	transform_worker(B); /* this thread works too */
	for (t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	return 0;
}

/* ---- writes in flight ---- */

/* Record writes in flight: slot i's bytes, until its write ends. */
typedef struct wslots {
	rckpt_buf_t *buf;
	uint32_t *no;
	int err;         /* the first write that failed */
	uint32_t err_no; /* its record */
} wslots_t;

static void wslot_reaped(void *arg, unsigned i, int rc)
{
	wslots_t *w = arg;
	if (rc && w->err == 0) {
		w->err = rc;
		w->err_no = w->no[i];
	}
	rckpt_buf_free(&w->buf[i]);
}

/* ---- removing a dataset's objects ---- */

static int remove_all(rckpt_io_t *io, unsigned *removed)
{
	char **names;
	unsigned n, i;
	int rc;

	*removed = 0;
	rc = rckpt_io_names(io, &names, &n);
	/* the index first: the dataset disappears before its records */
	for (i = 0; i < n && rc == 0; i++)
		if (strcmp(names[i], RCKPT_PCR_INDEX_OID) == 0) {
			rc = io->ops->remove(io, names[i]);
			if (rc == 0)
				++*removed;
		}
	for (i = 0; i < n && (rc == 0 || rc == -ENOENT); i++) {
		if (strcmp(names[i], RCKPT_PCR_INDEX_OID) == 0)
			continue;
		rc = io->ops->remove(io, names[i]);
		if (rc == 0)
			++*removed;
	}
	if (rc == -ENOENT)
		rc = 0;
	rckpt_names_free(names, n);
	return rc;
}

int rckpt_pcr_delete(rckpt_t *h, const char *dataset)
{
	rckpt_io_t *io;
	unsigned removed = 0;
	int rc;

	rckpt_clear_error(h);
	if ((rc = rckpt_pcr_io(h, dataset, &io)))
		return rckpt_fail(h, rc, __func__, "cannot open dataset %s", dataset ? dataset : "(null)");
	rc = remove_all(io, &removed);
	io->ops->close(io);
	if (rc == 0 && removed == 0)
		rc = -ENOENT;
	return rc ? rckpt_fail(h, rc, __func__, "cannot delete dataset %s%s", dataset,
			       rc == -ENOENT ? ": no such dataset" : "")
		  : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int rckpt_pcr_datasets(rckpt_t *h, char ***names, unsigned *n)
{
	return rckpt_ns_list(h, RCKPT_PCR_INDEX_OID, RCKPT_PCR_NS_PREFIX, "datasets", __func__, names,
			     n);
}

/* ---- the build ---- */

static int check_names(rckpt_t *h, const rckpt_pcr_input_t *in, unsigned n)
{
	const char **v = malloc((size_t)n * sizeof(*v));
	unsigned i;
	int rc = 0;

	if (v == NULL)
		return rckpt_fail(h, -ENOMEM, "rckpt_pcr_build", "out of memory");
	for (i = 0; i < n && rc == 0; i++) {
		if (in[i].path == NULL || (in[i].label_len && in[i].label == NULL) ||
		    in[i].label_len > RCKPT_PCR_MAX_LABEL)
			rc = rckpt_fail(h, -EINVAL, "rckpt_pcr_build", "input %u: no path, or a bad label", i);
		else if (!name_valid(v[i] = input_name(&in[i])))
			rc = rckpt_fail(h, -EINVAL, "rckpt_pcr_build",
					"%s: its name must be 1..255 bytes without '/' or control characters",
					in[i].path);
	}
	if (rc == 0) {
		qsort(v, n, sizeof(*v), cmp_str);
		for (i = 1; i < n && rc == 0; i++)
			if (strcmp(v[i - 1], v[i]) == 0)
				rc = rckpt_fail(h, -EINVAL, "rckpt_pcr_build",
						"two inputs are named %s: names must be unique", v[i]);
	}
	free(v);
	return rc;
}

/* B's options from opts (NULL: the defaults), checked, their zeros made
 * the defaults, and *threads. 0, or -EINVAL with the handle's message. */
static int build_opts(rckpt_t *h, builder_t *B, const rckpt_pcr_build_opts_t *opts, const rckpt_pcr_input_t *in,
		      unsigned n, unsigned *threads)
{
	static const rckpt_pcr_build_opts_t def = RCKPT_PCR_BUILD_OPTS_INIT;
	if (opts == NULL)
		opts = &def;
	if (opts->version != RCKPT_PCR_BUILD_OPTS_VERSION)
		return rckpt_fail(h, -EINVAL, "rckpt_pcr_build",
				  "options of version %u, where this library takes %u (start from "
				  "RCKPT_PCR_BUILD_OPTS_INIT of its rckpt.h)",
				  opts->version, RCKPT_PCR_BUILD_OPTS_VERSION);
	if (opts->images_per_record > RCKPT_PCR_MAX_IMAGES || opts->max_pixels > RCKPT_PCR_MAX_PIXELS || n == 0 ||
	    n > RCKPT_PCR_MAX_DATASET_IMAGES || in == NULL || opts->scan_script > RCKPT_PCR_SCRIPT_SPECTRAL)
		return rckpt_fail(h, -EINVAL, "rckpt_pcr_build", "bad options, or no inputs");
	B->o = *opts;
	if (B->o.images_per_record == 0)
		B->o.images_per_record = DEFAULT_PER_RECORD;
	if (B->o.inflight == 0)
		B->o.inflight = DEFAULT_INFLIGHT;
	if (B->o.fidelity_sample == 0)
		B->o.fidelity_sample = DEFAULT_SAMPLE;
	if (B->o.max_pixels == 0)
		B->o.max_pixels = DEFAULT_MAX_PIXELS;
	*threads = B->o.threads ? B->o.threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (*threads == 0)
		*threads = 1;
	if (*threads > 64)
		*threads = 64;
	return 0;
}

/* What a build gathers over its windows besides the index. */
typedef struct build_acc {
	double ssum[RCKPT_PCR_MAX_GROUPS]; /* SSIM per group, summed over the sampled images */
	unsigned sampled;
	rckpt_buf_t labels;
	size_t rec_cap; /* x->rec's room */
} build_acc_t;

/* The window's images B->win[0..wcount) (inputs first..): the refused ones
 * reported (and skipped with skip_bad, else the build fails), the good
 * ones into src[0..*good) and the index x. 0, or the error with the
 * handle's message. */
static int take_window(builder_t *B, unsigned first, unsigned wcount, rckpt_pcr_src_t *src,
		       rckpt_pcr_index_t *x, build_acc_t *acc, rckpt_pcr_progress_t *pr, unsigned *good)
{
	unsigned i, g;
	*good = 0;
	for (i = 0; i < wcount; i++) {
		bimg_t *b = &B->win[i];
		const rckpt_pcr_input_t *ip = &B->in[first + i];
		rckpt_pcr_src_t *sp = &src[*good];
		if (b->rc) {
			if (B->o.refused)
				B->o.refused(B->o.arg, ip->path, b->rc, b->why);
			if (!B->o.skip_bad)
				return rckpt_fail(B->h, b->rc, "rckpt_pcr_build", "%s: %s", ip->path, b->why);
			pr->skipped++;
			continue;
		}
		sp->id = x->nimages + *good;
		sp->name = input_name(ip);
		sp->label = ip->label;
		sp->label_len = ip->label_len;
		sp->jpeg = b->prog;
		sp->split = b->split;
		if (rckpt_buf_append(&acc->labels, ip->label, ip->label_len))
			return rckpt_fail(B->h, -ENOMEM, "rckpt_pcr_build", "out of memory");
		x->label_off[x->nimages + *good + 1] = (uint32_t)acc->labels.len;
		for (g = 0; g < b->split.nscans; g++) {
			x->group_bytes[g] += b->split.len[g];
			x->group_images[g]++;
		}
		if (b->split.nscans > x->ngroups)
			x->ngroups = (uint16_t)b->split.nscans;
		if (b->sampled) {
			for (g = 0; g < RCKPT_PCR_MAX_GROUPS; g++)
				acc->ssum[g] += b->ssim[g];
			acc->sampled++;
		}
		x->source_bytes += b->src_bytes;
		++*good;
	}
	return 0;
}

/* src[0..good) as the dataset's next record: encoded into a free write
 * slot (the oldest write ends first when all are busy), its index entry,
 * written asynchronously. 0, or the error with the handle's message. */
static int put_record(builder_t *B, const char *dataset, rckpt_pcr_index_t *x, build_acc_t *acc,
		      wslots_t *ws, rckpt_io_window_t *win, unsigned *wnext, const rckpt_pcr_src_t *src,
		      unsigned good, rckpt_pcr_progress_t *pr)
{
	rckpt_t *h = B->h;
	rckpt_pcr_head_t hd;
	rckpt_pcr_index_rec_t *e;
	char oid[RCKPT_PCR_OID_MAX];
	rckpt_aio_t *c;
	unsigned slot;
	int rc;

	rckpt_io_window_room(win, 0);
	if (ws->err)
		return rckpt_fail(h, ws->err, "rckpt_pcr_build", "cannot write record %u of %s", ws->err_no, dataset);
	slot = *wnext;
	*wnext = (*wnext + 1) % B->o.inflight;
	ws->no[slot] = x->nrecords;
	ws->buf[slot].max = RCKPT_PCR_MAX_RECORD;
	if ((rc = rckpt_pcr_record_encode(&ws->buf[slot], ws->no[slot], src, good)))
		return rckpt_fail(h, rc, "rckpt_pcr_build", "record %u of %s is too large (%u images)", ws->no[slot],
				  dataset, good);
	{
		rckpt_pcr_index_rec_t *p = rckpt_grow(x->rec, &acc->rec_cap, (size_t)x->nrecords + 1, sizeof(*p));
		if (p == NULL)
			return rckpt_fail(h, -ENOMEM, "rckpt_pcr_build", "out of memory");
		x->rec = p;
	}
	if ((rc = rckpt_pcr_head_decode(&hd, ws->buf[slot].p, ws->buf[slot].len)))
		return rckpt_fail(h, rc, "rckpt_pcr_build", "record %u does not decode (a bug)", ws->no[slot]);
	e = &x->rec[x->nrecords];
	memset(e, 0, sizeof(*e));
	e->first_id = x->nimages;
	e->nimages = good;
	e->head_len = hd.f.head_len;
	e->ngroups = hd.f.ngroups;
	memcpy(e->end, hd.end, sizeof(e->end));
	x->head_bytes += hd.f.head_len;
	rckpt_pcr_head_free(&hd);
	rckpt_pcr_record_oid(oid, ws->no[slot]);
	if ((rc = B->io->ops->aio_write_full(B->io, oid, ws->buf[slot].p, ws->buf[slot].len, &c)))
		return rckpt_fail(h, rc, "rckpt_pcr_build", "cannot write record %u of %s", ws->no[slot], dataset);
	pr->bytes_written += ws->buf[slot].len;
	rckpt_io_window_add(win, c, slot, ws->buf[slot].len);
	x->nrecords++;
	x->nimages += good;
	pr->records_written = x->nrecords;
	return 0;
}

int rckpt_pcr_build(rckpt_t *h, const char *dataset, const rckpt_pcr_input_t *in, unsigned n,
		    const rckpt_pcr_build_opts_t *opts, rckpt_pcr_build_stats_t *st)
{
	builder_t B;
	rckpt_pcr_index_t x;
	rckpt_buf_t ib = RCKPT_BUF_INIT;
	rckpt_pcr_progress_t pr;
	rckpt_pcr_src_t *src = NULL;
	wslots_t ws = { NULL, NULL, 0, 0 };
	rckpt_io_window_t win;
	build_acc_t acc;
	double t0 = rckpt_now_s();
	unsigned threads = 1, wcount = 0, wnext = 0, i, g, first;
	uint64_t size;
	int rc;

	rckpt_clear_error(h);
	memset(&x, 0, sizeof(x));
	memset(&pr, 0, sizeof(pr));
	memset(&B, 0, sizeof(B));
	memset(&win, 0, sizeof(win));
	memset(&acc, 0, sizeof(acc));
	if (st)
		memset(st, 0, sizeof(*st));
	if ((rc = build_opts(h, &B, opts, in, n, &threads)) || (rc = check_names(h, in, n)))
		return rc;
	if ((rc = rckpt_pcr_io(h, dataset, &B.io)))
		return rckpt_fail(h, rc, __func__, "bad dataset name %s (1..63 of [A-Za-z0-9._-], not beginning with . or -)",
				  dataset ? dataset : "(null)");
	B.h = h;
	B.in = in;
	B.n = n;
	pthread_mutex_init(&B.mu, NULL);
	rc = B.io->ops->stat(B.io, RCKPT_PCR_INDEX_OID, &size);
	if (rc == 0) {
		rc = rckpt_fail(h, -EEXIST, __func__, "dataset %s exists (rckpt pcr rm removes it)", dataset);
		goto out;
	}
	if (rc != -ENOENT) {
		rc = rckpt_fail(h, rc, __func__, "cannot look for dataset %s", dataset);
		goto out;
	}
	{ /* what a failed build left */
		unsigned removed;
		if ((rc = remove_all(B.io, &removed))) {
			rc = rckpt_fail(h, rc, __func__, "cannot clear what an earlier build of %s left", dataset);
			goto out;
		}
	}
	B.win = calloc(B.o.images_per_record, sizeof(*B.win));
	src = calloc(B.o.images_per_record, sizeof(*src));
	ws.buf = calloc(B.o.inflight, sizeof(*ws.buf));
	ws.no = calloc(B.o.inflight, sizeof(*ws.no));
	x.label_off = calloc((size_t)n + 1, sizeof(*x.label_off));
	if (!B.win || !src || !ws.buf || !ws.no || !x.label_off ||
	    rckpt_io_window_init(&win, B.io, B.o.inflight, 0, wslot_reaped, &ws)) {
		rc = rckpt_fail(h, -ENOMEM, __func__, "out of memory");
		goto out;
	}
	pr.total = n;
	for (first = 0; first < n; first += wcount) {
		unsigned good = 0;
		wcount = n - first < B.o.images_per_record ? n - first : B.o.images_per_record;
		run_window(&B, first, wcount, threads);
		rc = take_window(&B, first, wcount, src, &x, &acc, &pr, &good);
		if (rc == 0)
			pr.done += wcount;
		if (rc == 0 && good)
			rc = put_record(&B, dataset, &x, &acc, &ws, &win, &wnext, src, good, &pr);
		window_free(B.win, wcount);
		if (rc)
			goto out;
		if (good && B.o.progress)
			B.o.progress(B.o.arg, &pr);
	}
	rckpt_io_window_free(&win); /* every write ends */
	if (ws.err) {
		rc = rckpt_fail(h, ws.err, __func__, "cannot write record %u of %s", ws.err_no, dataset);
		goto out;
	}
	if (x.nimages == 0) {
		rc = rckpt_fail(h, -ENODATA, __func__, "no usable image among the %u inputs", n);
		goto out;
	}
	x.fidelity_sample = acc.sampled;
	for (g = 0; g < x.ngroups; g++)
		x.mssim[g] = acc.sampled ? acc.ssum[g] / acc.sampled : -1.0;
	x.created = (uint64_t)time(NULL);
	x.labels = acc.labels.p;
	if ((rc = rckpt_pcr_index_encode(&ib, &x)) ||
	    (rc = B.io->ops->write_full(B.io, RCKPT_PCR_INDEX_OID, ib.p, ib.len))) {
		rc = rckpt_fail(h, rc, __func__, "cannot write the index of %s", dataset);
		goto out;
	}
	pr.bytes_written += ib.len;
	if (st) {
		st->images = x.nimages;
		st->skipped = pr.skipped;
		st->records = x.nrecords;
		st->groups = x.ngroups;
		st->source_bytes = x.source_bytes;
		st->stored_bytes = pr.bytes_written;
		st->seconds = rckpt_now_s() - t0;
	}
out:
	rckpt_io_window_free(&win);
	for (i = 0; ws.buf && i < B.o.inflight; i++)
		rckpt_buf_free(&ws.buf[i]);
	free(ws.buf);
	free(ws.no);
	free(src);
	free(B.win);
	free(x.rec);
	free(x.label_off);
	rckpt_buf_free(&acc.labels);
	rckpt_buf_free(&ib);
	pthread_mutex_destroy(&B.mu);
	if (B.io)
		B.io->ops->close(B.io);
	return rc;
}
