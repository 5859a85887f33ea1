/*
 * rckpt_pcr_read.c — reading PCR datasets: records in order with read-ahead,
 * or images by id through the OSDs; JPEG bytes or RGB decoded on a pool.
 *
 * Iteration keeps a ring of up to prefetch+1 records: each is read with a
 * plain ranged read (head and groups 1..k; the index gave the offsets).
 * When a read completes, the backend's callback queues the record for the
 * pool; a worker checks its head and group CRCs and queues one task per
 * image (assemble header + scans + EOI, decode if asked). rckpt_pcr_next
 * hands out the oldest record once all its tasks are done, and tops the
 * ring up, so reading and decoding run ahead of the caller.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "rckpt_pcr.h"
#include "rckpt_pcr_internal.h"

#define DEFAULT_PREFETCH 2u
#define MAX_THREADS 64u
#define MAX_PREFETCH 64u
#define INDEX_MAX ((size_t)1 << 30)

typedef struct pimg {
	uint32_t id;
	char name[RCKPT_PCR_MAX_NAME + 1];
	const uint8_t *label;
	size_t label_len;
	const uint8_t *src; /* a fetched JPEG, in the reply; NULL: assemble it */
	size_t src_len;
	uint8_t *jpeg; /* assembled (owned) */
	size_t jpeg_len;
	uint8_t *rgb;
	unsigned w, h;
} pimg_t;

enum { B_READING, B_WORKING, B_DONE };

struct rckpt_pcr_batch {
	rckpt_pcr_t *d;
	uint32_t record;
	unsigned k;          /* groups of this record read */
	rckpt_aio_t *c;      /* the prefix read, until parsed */
	uint8_t *rbuf;       /* the prefix read */
	size_t rlen;
	rckpt_pcr_head_t head;
	rckpt_buf_t *replies; /* fetch: the `images` replies */
	unsigned nreplies;
	unsigned n;
	pimg_t *img;
	unsigned pending;    /* image tasks left; under d->mu */
	int state;           /* under d->mu */
	int rc;
	int rgb;             /* decode to RGB */
	unsigned scale;      /* at 1/scale (1, 2, 4, 8) or RCKPT_PCR_SCALE_AUTO */
};

typedef struct task {
	rckpt_pcr_batch_t *b;
	uint32_t i; /* an image, or PARSE */
} task_t;
#define PARSE UINT32_MAX

struct rckpt_pcr {
	rckpt_t *h;
	rckpt_io_t *io;
	char name[64];
	rckpt_pcr_opts_t o;
	rckpt_pcr_index_t x;
	uint8_t *xbytes;
	unsigned k; /* this epoch's groups; 0: all */
	uint32_t *order;     /* this pass's records, in order (NULL: all, in order) */
	uint32_t pass_len;   /* records in this pass */
	uint32_t next_issue, next_give; /* positions in the pass */
	rckpt_pcr_batch_t *ring[MAX_PREFETCH + 1];
	unsigned ring_n;
	pthread_t tid[MAX_THREADS];
	unsigned nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	task_t *q;
	size_t qhead, qlen, qcap;
	int stop;
	rckpt_pcr_read_stats_t stats; /* under mu */
};

/* ---- the pool ---- */

static int push_locked(rckpt_pcr_t *d, rckpt_pcr_batch_t *b, uint32_t i)
{
	if (d->qlen == d->qcap) {
		size_t cap = d->qcap ? 2 * d->qcap : 256, j;
		task_t *q = malloc(cap * sizeof(*q));
		if (q == NULL)
			return -ENOMEM;
		for (j = 0; j < d->qlen; j++)
			q[j] = d->q[(d->qhead + j) % d->qcap];
		free(d->q);
		d->q = q;
		d->qcap = cap;
		d->qhead = 0;
	}
	d->q[(d->qhead + d->qlen) % d->qcap] = (task_t){ b, i };
	d->qlen++;
	pthread_cond_signal(&d->cv_work);
	return 0;
}

static void finish_locked(rckpt_pcr_t *d, rckpt_pcr_batch_t *b, int rc)
{
	if (rc && !b->rc)
		b->rc = rc;
	b->state = B_DONE;
	pthread_cond_broadcast(&d->cv_done);
}

/* A record's read came back: check it and queue its images. */
static void parse(rckpt_pcr_t *d, rckpt_pcr_batch_t *b)
{
	const rckpt_pcr_index_rec_t *e = &d->x.rec[b->record];
	int rc = d->io->ops->aio_wait(b->c);
	unsigned i;

	b->c = NULL;
	if (rc >= 0 && (size_t)rc != b->rlen)
		rc = -EBADMSG; /* shorter than the index says */
	if (rc >= 0)
		rc = rckpt_pcr_head_decode(&b->head, b->rbuf, b->rlen);
	if (rc == 0 && (b->head.f.nimages != e->nimages || b->head.f.ngroups != e->ngroups ||
			b->head.f.head_len != e->head_len || b->head.end[b->k - 1] != b->rlen ||
			b->head.img[0].id != e->first_id))
		rc = -EBADMSG; /* not the record the index describes */
	if (rc == 0)
		rc = rckpt_pcr_groups_check(&b->head, b->rbuf, b->rlen, b->k);
	if (rc == 0) {
		b->n = b->head.f.nimages;
		b->img = calloc(b->n, sizeof(*b->img));
		if (b->img == NULL)
			rc = -ENOMEM;
	}
	for (i = 0; rc == 0 && i < b->n; i++) {
		const rckpt_pcr_img_t *im = &b->head.img[i];
		b->img[i].id = im->id;
		memcpy(b->img[i].name, im->name, im->name_len);
		b->img[i].label = im->label;
		b->img[i].label_len = im->label_len;
	}
	pthread_mutex_lock(&d->mu);
	if (rc) {
		finish_locked(d, b, rc);
	} else {
		b->pending = b->n;
		for (i = 0; i < b->n && rc == 0; i++)
			rc = push_locked(d, b, i);
		if (rc) { /* tasks already queued still run; count them out */
			b->pending -= b->n - i + 1;
			b->rc = rc;
			if (b->pending == 0)
				finish_locked(d, b, rc);
		}
	}
	pthread_mutex_unlock(&d->mu);
}

/* RCKPT_PCR_SCALE_AUTO: the smallest scale whose inverse DCT keeps every
 * luma coefficient the image's scans hold (rckpt.h). */
static unsigned auto_scale(const uint8_t *jpg, size_t len)
{
	rckpt_pcr_split_t sp;
	if (rckpt_pcr_jpeg_split(&sp, jpg, len))
		return 1; /* not cut at scans here: let the decoder judge it */
	return rckpt_pcr_auto_scale(sp.luma_se);
}

static int decode_rgb(pimg_t *p, const uint8_t *jpg, size_t len, tjhandle th, unsigned scale)
{
	int w, hh, sub, cs;
	if (th == NULL)
		return -ENOMEM;
	if (tjDecompressHeader3(th, jpg, (unsigned long)len, &w, &hh, &sub, &cs) || w <= 0 || hh <= 0)
		return -EBADMSG;
	if ((uint64_t)w * (uint64_t)hh > RCKPT_PCR_MAX_PIXELS)
		return -E2BIG; /* the record's header says more pixels than any image may have */
	if (scale == RCKPT_PCR_SCALE_AUTO)
		scale = auto_scale(jpg, len);
	if (scale > 1) { /* tjDecompress2 takes the scaling factor that gives this size */
		const tjscalingfactor f = { 1, (int)scale };
		w = TJSCALED(w, f);
		hh = TJSCALED(hh, f);
	}
	p->rgb = malloc((size_t)w * hh * 3);
	if (p->rgb == NULL)
		return -ENOMEM;
	p->w = (unsigned)w;
	p->h = (unsigned)hh;
	if (tjDecompress2(th, jpg, (unsigned long)len, p->rgb, w, 0, hh, TJPF_RGB, TJFLAG_LIMITSCANS) &&
	    tjGetErrorCode(th) != TJERR_WARNING)
		return -EBADMSG;
	return 0;
}

static void image_task(rckpt_pcr_t *d, rckpt_pcr_batch_t *b, uint32_t i, tjhandle th)
{
	pimg_t *p = &b->img[i];
	int rc = 0;

	if (p->src == NULL) {
		rckpt_buf_t jb = RCKPT_BUF_INIT;
		rc = rckpt_pcr_assemble(&jb, &b->head, i, b->k, b->rbuf, b->rlen);
		p->jpeg = jb.p;
		p->jpeg_len = jb.len;
		if (rc)
			rckpt_buf_free(&jb), p->jpeg = NULL;
	} else {
		p->jpeg_len = p->src_len;
	}
	if (rc == 0 && b->rgb)
		rc = decode_rgb(p, p->jpeg ? p->jpeg : p->src, p->jpeg_len, th, b->scale);
	pthread_mutex_lock(&d->mu);
	if (rc && !b->rc)
		b->rc = rc;
	if (--b->pending == 0)
		finish_locked(d, b, 0);
	pthread_mutex_unlock(&d->mu);
}

static void *worker(void *arg)
{
	rckpt_pcr_t *d = arg;
	tjhandle th = tjInitDecompress();

	pthread_mutex_lock(&d->mu);
	for (;;) {
		task_t t;
		while (d->qlen == 0 && !d->stop)
			pthread_cond_wait(&d->cv_work, &d->mu);
		if (d->qlen == 0)
			break;
		t = d->q[d->qhead];
		d->qhead = (d->qhead + 1) % d->qcap;
		d->qlen--;
		pthread_mutex_unlock(&d->mu);
		if (t.i == PARSE)
			parse(d, t.b);
		else
			image_task(d, t.b, t.i, th);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	if (th)
		tjDestroy(th);
	return NULL;
}

/* The backend's thread: queue the record for a worker. */
static void read_done(void *arg)
{
	rckpt_pcr_batch_t *b = arg;
	rckpt_pcr_t *d = b->d;
	pthread_mutex_lock(&d->mu);
	if (push_locked(d, b, PARSE))
		finish_locked(d, b, -ENOMEM);
	pthread_mutex_unlock(&d->mu);
}

/* ---- batches ---- */

void rckpt_pcr_batch_free(rckpt_pcr_batch_t *b)
{
	unsigned i;
	if (b == NULL)
		return;
	if (b->c) /* read, never parsed */
		b->d->io->ops->aio_wait(b->c);
	for (i = 0; b->img && i < b->n; i++) {
		free(b->img[i].jpeg);
		free(b->img[i].rgb);
	}
	for (i = 0; b->replies && i < b->nreplies; i++)
		rckpt_buf_free(&b->replies[i]);
	free(b->replies);
	free(b->img);
	free(b->rbuf);
	rckpt_pcr_head_free(&b->head);
	free(b);
}

unsigned rckpt_pcr_batch_count(const rckpt_pcr_batch_t *b)
{
	return b ? b->n : 0;
}

int rckpt_pcr_batch_image(const rckpt_pcr_batch_t *b, unsigned i, rckpt_pcr_image_t *out)
{
	const pimg_t *p;
	memset(out, 0, sizeof(*out));
	if (b == NULL || i >= b->n)
		return -EINVAL;
	p = &b->img[i];
	out->id = p->id;
	out->name = p->name;
	out->label = p->label;
	out->label_len = p->label_len;
	out->jpeg = p->jpeg ? p->jpeg : p->src;
	out->jpeg_len = p->jpeg_len;
	out->rgb = p->rgb;
	out->width = p->w;
	out->height = p->h;
	return 0;
}

static unsigned groups_of(const rckpt_pcr_t *d, unsigned ngroups)
{
	return d->k == RCKPT_PCR_ALL || d->k > ngroups ? ngroups : d->k;
}

/* Starts the ranged read of the next record into the ring. */
static int issue(rckpt_pcr_t *d)
{
	const uint32_t r = d->order ? d->order[d->next_issue] : d->next_issue;
	const rckpt_pcr_index_rec_t *e = &d->x.rec[r];
	rckpt_pcr_batch_t *b = calloc(1, sizeof(*b));
	char oid[RCKPT_PCR_OID_MAX];
	int rc;

	if (b == NULL)
		return -ENOMEM;
	b->d = d;
	b->rgb = d->o.output == RCKPT_PCR_RGB;
	b->scale = d->o.scale;
	b->record = r;
	b->k = groups_of(d, e->ngroups);
	b->rlen = e->end[b->k - 1];
	b->rbuf = malloc(b->rlen);
	b->state = B_READING;
	if (b->rbuf == NULL) {
		free(b);
		return -ENOMEM;
	}
	rckpt_pcr_record_oid(oid, b->record);
	rc = d->io->ops->aio_read(d->io, oid, b->rbuf, b->rlen, 0, read_done, b, &b->c);
	if (rc) {
		rckpt_pcr_batch_free(b);
		return rc;
	}
	pthread_mutex_lock(&d->mu);
	d->stats.reads++;
	d->stats.wire_bytes += b->rlen;
	pthread_mutex_unlock(&d->mu);
	d->ring[d->ring_n++] = b;
	d->next_issue++;
	return 0;
}

static void wait_done(rckpt_pcr_t *d, rckpt_pcr_batch_t *b)
{
	pthread_mutex_lock(&d->mu);
	while (b->state != B_DONE)
		pthread_cond_wait(&d->cv_done, &d->mu);
	pthread_mutex_unlock(&d->mu);
}

/* Waits for the ring and drops it. */
static void drain(rckpt_pcr_t *d)
{
	unsigned i;
	for (i = 0; i < d->ring_n; i++) {
		wait_done(d, d->ring[i]);
		rckpt_pcr_batch_free(d->ring[i]);
	}
	d->ring_n = 0;
}

/* ---- the dataset ---- */

int rckpt_pcr_open(rckpt_t *h, rckpt_pcr_t **out, const char *dataset, const rckpt_pcr_opts_t *opts)
{
	static const rckpt_pcr_opts_t def = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_t *d;
	size_t len;
	unsigned t;
	int rc;

	*out = NULL;
	rckpt_clear_error(h);
	if (opts == NULL)
		opts = &def;
	if (opts->version != RCKPT_PCR_OPTS_VERSION)
		return rckpt_fail(h, -EINVAL, __func__,
				  "options of version %u, where this library takes %u (start from "
				  "RCKPT_PCR_OPTS_INIT of its rckpt.h)",
				  opts->version, RCKPT_PCR_OPTS_VERSION);
	if (opts->output > RCKPT_PCR_RGB ||
	    opts->threads > MAX_THREADS || opts->prefetch > MAX_PREFETCH ||
	    (opts->groups != RCKPT_PCR_ALL && opts->groups > RCKPT_PCR_MAX_GROUPS))
		return rckpt_fail(h, -EINVAL, __func__, "bad options");
	if (opts->scale != 0 && opts->scale != 1 && opts->scale != 2 &&
	    opts->scale != 4 && opts->scale != 8 && opts->scale != RCKPT_PCR_SCALE_AUTO)
		return rckpt_fail(h, -EINVAL, __func__,
				  "scale %u: 0 or 1 (full size), 2, 4, 8, or RCKPT_PCR_SCALE_AUTO", opts->scale);
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return rckpt_fail(h, -ENOMEM, __func__, "out of memory");
	d->h = h;
	d->o = *opts;
	if (d->o.scale == 0)
		d->o.scale = 1;
	if (d->o.threads == 0)
		d->o.threads = 1;
	if (d->o.prefetch == 0)
		d->o.prefetch = DEFAULT_PREFETCH;
	d->k = d->o.groups;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv_work, NULL);
	pthread_cond_init(&d->cv_done, NULL);
	if ((rc = rckpt_pcr_io(h, dataset, &d->io))) {
		rckpt_pcr_close(d);
		return rckpt_fail(h, rc, __func__, "cannot open dataset %s", dataset ? dataset : "(null)");
	}
	snprintf(d->name, sizeof(d->name), "%s", dataset);
	rc = rckpt_pcr_read_object(d->io, RCKPT_PCR_INDEX_OID, INDEX_MAX, &d->xbytes, &len);
	if (rc == 0)
		rc = rckpt_pcr_index_decode(&d->x, d->xbytes, len);
	if (rc) {
		rckpt_pcr_close(d);
		return rckpt_fail(h, rc, __func__, "cannot read the index of dataset %s%s", dataset,
				  rc == -ENOENT ? ": no such dataset" : "");
	}
	d->stats.wire_bytes += len;
	d->stats.reads++;
	d->pass_len = d->x.nrecords;
	for (t = 0; t < d->o.threads; t++) {
		if (pthread_create(&d->tid[t], NULL, worker, d)) {
			rckpt_pcr_close(d);
			return rckpt_fail(h, -EAGAIN, __func__, "cannot start threads");
		}
		d->nthreads++;
	}
	*out = d;
	return 0;
}

void rckpt_pcr_close(rckpt_pcr_t *d)
{
	unsigned t;
	if (d == NULL)
		return;
	drain(d);
	pthread_mutex_lock(&d->mu);
	d->stop = 1;
	pthread_cond_broadcast(&d->cv_work);
	pthread_mutex_unlock(&d->mu);
	for (t = 0; t < d->nthreads; t++)
		pthread_join(d->tid[t], NULL);
	if (d->io)
		d->io->ops->close(d->io);
	rckpt_pcr_index_free(&d->x);
	free(d->xbytes);
	free(d->order);
	free(d->q);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv_work);
	pthread_cond_destroy(&d->cv_done);
	free(d);
}

int rckpt_pcr_info(rckpt_pcr_t *d, rckpt_pcr_info_t *out)
{
	unsigned g;
	memset(out, 0, sizeof(*out));
	out->records = d->x.nrecords;
	out->images = d->x.nimages;
	out->groups = d->x.ngroups;
	out->fidelity_sample = d->x.fidelity_sample;
	out->created = d->x.created;
	out->source_bytes = d->x.source_bytes;
	out->head_bytes = d->x.head_bytes;
	for (g = 0; g < d->x.ngroups; g++) {
		out->group_bytes[g] = d->x.group_bytes[g];
		out->group_images[g] = d->x.group_images[g];
		out->mssim[g] = d->x.mssim[g];
	}
	return 0;
}

int rckpt_pcr_rewind(rckpt_pcr_t *d, unsigned groups)
{
	return rckpt_pcr_rewind_records(d, groups, NULL, 0);
}

int rckpt_pcr_rewind_records(rckpt_pcr_t *d, unsigned groups, const uint32_t *records, uint32_t n)
{
	uint32_t *order = NULL, i;

	rckpt_clear_error(d->h);
	if (groups != RCKPT_PCR_ALL && groups > RCKPT_PCR_MAX_GROUPS)
		return rckpt_fail(d->h, -EINVAL, __func__, "groups %u: at most %u", groups,
				  RCKPT_PCR_MAX_GROUPS);
	if (records && n > d->x.nrecords)
		return rckpt_fail(d->h, -EINVAL, __func__, "%" PRIu32 " records for a pass of %s, which has %" PRIu32,
				  n, d->name, d->x.nrecords);
	for (i = 0; records && i < n; i++)
		if (records[i] >= d->x.nrecords)
			return rckpt_fail(d->h, -ERANGE, __func__, "record %" PRIu32 ": %s has records 0..%" PRIu32,
					  records[i], d->name, d->x.nrecords - 1);
	if (records && n && (order = malloc((size_t)n * sizeof(*order))) == NULL)
		return rckpt_fail(d->h, -ENOMEM, __func__, "out of memory");
	if (order)
		memcpy(order, records, (size_t)n * sizeof(*order));
	drain(d);
	free(d->order);
	d->order = order;
	d->pass_len = records ? n : d->x.nrecords;
	d->k = groups;
	d->next_issue = d->next_give = 0;
	return 0;
}

int rckpt_pcr_next(rckpt_pcr_t *d, rckpt_pcr_batch_t **out)
{
	rckpt_pcr_batch_t *b;
	int rc = 0;

	*out = NULL;
	rckpt_clear_error(d->h);
	while (d->ring_n < d->o.prefetch + 1 && d->next_issue < d->pass_len && rc == 0)
		rc = issue(d);
	if (rc)
		return rckpt_fail(d->h, rc, __func__, "cannot read record %" PRIu32 " of %s",
				  d->order ? d->order[d->next_issue] : d->next_issue, d->name);
	if (d->ring_n == 0)
		return 0; /* the end of the pass */
	b = d->ring[0];
	wait_done(d, b);
	memmove(d->ring, d->ring + 1, (d->ring_n - 1) * sizeof(d->ring[0]));
	d->ring_n--;
	d->next_give++;
	if (d->next_issue < d->pass_len)
		(void)issue(d); /* a failure is retried and reported by the next call */
	if (b->rc) {
		const uint32_t r = b->record;
		rc = b->rc;
		rckpt_pcr_batch_free(b);
		return rckpt_fail(d->h, rc, __func__, "record %" PRIu32 " of %s%s", r, d->name,
				  rc == RCKPT_ECHECKSUM ? " is damaged" : " cannot be read");
	}
	pthread_mutex_lock(&d->mu);
	d->stats.images += b->n;
	pthread_mutex_unlock(&d->mu);
	*out = b;
	return 0;
}

/* Runs one task per image of b (a fetch's or a made batch's) on the pool
 * and waits for them; b->rc. */
static int run_images(rckpt_pcr_t *d, rckpt_pcr_batch_t *b)
{
	unsigned i;
	int rc = 0;
	pthread_mutex_lock(&d->mu);
	b->pending = b->n;
	b->state = B_WORKING;
	for (i = 0; i < b->n && rc == 0; i++)
		rc = push_locked(d, b, i);
	if (rc) { /* tasks already queued still run; count the others out */
		b->pending -= b->n - i + 1;
		b->rc = rc;
		if (b->pending == 0)
			finish_locked(d, b, rc);
	}
	pthread_mutex_unlock(&d->mu);
	wait_done(d, b);
	return b->rc;
}

/* The record holding image id (the index's records are in id order). */
static uint32_t record_of(const rckpt_pcr_index_t *x, uint32_t id)
{
	uint32_t lo = 0, hi = x->nrecords - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;
		if (x->rec[mid].first_id <= id)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

int rckpt_pcr_lookup(rckpt_pcr_t *d, uint32_t id, uint32_t *record, const void **label,
		     size_t *label_len)
{
	uint32_t a, b;

	rckpt_clear_error(d->h);
	if (id >= d->x.nimages)
		return rckpt_fail(d->h, -ERANGE, __func__, "image %" PRIu32 ": %s has %" PRIu32 " images",
				  id, d->name, d->x.nimages);
	a = d->x.label_off[id];
	b = d->x.label_off[id + 1];
	if (record)
		*record = record_of(&d->x, id);
	if (label)
		*label = b > a ? (const void *)(d->x.labels + a) : NULL;
	if (label_len)
		*label_len = b - a;
	return 0;
}

static int cmp_id(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_pos(const void *a, const void *b, void *arg)
{
	const uint32_t *ids = arg;
	uint32_t x = ids[*(const uint32_t *)a], y = ids[*(const uint32_t *)b];
	return x < y ? -1 : x > y;
}

/* The name of the q-th record of a fetch: recs[q]. */
static void record_oid(void *arg, unsigned q, char *buf, size_t cap)
{
	const uint32_t *recs = arg;
	(void)cap; /* RCKPT_PCR_OID_MAX */
	rckpt_pcr_record_oid(buf, recs[q]);
}

int rckpt_pcr_fetch(rckpt_pcr_t *d, const uint32_t *ids, unsigned n, rckpt_pcr_batch_t **out)
{
	rckpt_pcr_batch_t *b;
	uint32_t *u = NULL, *ord = NULL, nu = 0, i, r;
	rckpt_buf_t *req = NULL;
	uint32_t *recs = NULL;
	unsigned nrec = 0, q;
	int rc = 0;

	*out = NULL;
	rckpt_clear_error(d->h);
	if (n == 0 || ids == NULL)
		return rckpt_fail(d->h, -EINVAL, __func__, "no ids");
	for (i = 0; i < n; i++)
		if (ids[i] >= d->x.nimages)
			return rckpt_fail(d->h, -ERANGE, __func__, "image %" PRIu32 ": %s has %" PRIu32 " images",
					  ids[i], d->name, d->x.nimages);
	b = calloc(1, sizeof(*b));
	u = malloc((size_t)n * sizeof(*u));
	if (b == NULL || u == NULL) {
		free(u);
		free(b);
		return rckpt_fail(d->h, -ENOMEM, __func__, "out of memory");
	}
	b->d = d;
	b->rgb = d->o.output == RCKPT_PCR_RGB;
	b->scale = d->o.scale;
	b->record = UINT32_MAX;
	b->n = n;
	memcpy(u, ids, (size_t)n * sizeof(*u));
	qsort(u, n, sizeof(*u), cmp_id);
	for (i = 0; i < n; i++)
		if (nu == 0 || u[nu - 1] != u[i])
			u[nu++] = u[i];
	/* one `images` call per record touched, all in flight at once */
	for (i = 0; i < nu; i++)
		if (i == 0 || record_of(&d->x, u[i]) != record_of(&d->x, u[i - 1]))
			nrec++;
	b->img = calloc(n, sizeof(*b->img));
	b->replies = calloc(nrec, sizeof(*b->replies));
	req = calloc(nrec, sizeof(*req));
	recs = calloc(nrec, sizeof(*recs));
	if (!b->img || !b->replies || !req || !recs) {
		rc = -ENOMEM;
		goto out;
	}
	b->nreplies = nrec;
	for (i = 0, q = 0; i < nu && rc == 0; q++) {
		uint32_t first = i, k;
		r = record_of(&d->x, u[i]);
		while (i < nu && record_of(&d->x, u[i]) == r)
			i++;
		/* the request holds indices within the record */
		for (k = first; k < i; k++)
			u[k] -= d->x.rec[r].first_id;
		rc = rckpt_msg_pcr_images_encode(&req[q], d->k ? (uint16_t)d->k : RCKPT_PCR_GROUPS_ALL,
						 u + first, i - first);
		for (k = first; k < i; k++)
			u[k] += d->x.rec[r].first_id;
		recs[q] = r;
	}
	if (rc == 0)
		rc = rckpt_io_fanout(d->io, nrec, nrec, record_oid, recs, "pcr", "images", req, 0,
				     b->replies, NULL, NULL);
	if (rc)
		goto out;
	/* place each reply's images at the positions that asked for them:
	 * ord lists the positions by id */
	ord = malloc((size_t)n * sizeof(*ord));
	if (ord == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++)
		ord[i] = i;
	qsort_r(ord, n, sizeof(*ord), cmp_pos, (void *)ids);
	for (q = 0; q < nrec && rc == 0; q++) {
		rckpt_pcr_jpegs_reader_t jr;
		rckpt_pcr_jpeg_t e;
		d->stats.wire_bytes += b->replies[q].len;
		d->stats.reads++;
		rc = rckpt_msg_pcr_jpegs_open(&jr, b->replies[q].p, b->replies[q].len);
		while (rc == 0 && (rc = rckpt_msg_pcr_jpegs_next(&jr, &e)) == 1) {
			uint32_t lo = 0, hi = n;
			rc = 0;
			while (lo < hi) { /* the first position asking for e.id */
				uint32_t mid = lo + (hi - lo) / 2;
				if (ids[ord[mid]] < e.id)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (; lo < n && ids[ord[lo]] == e.id; lo++) {
				pimg_t *p = &b->img[ord[lo]];
				p->id = e.id;
				memcpy(p->name, e.name, e.name_len);
				p->label = e.label;
				p->label_len = e.label_len;
				p->src = e.jpeg;
				p->src_len = e.jpeg_len;
			}
		}
	}
	for (i = 0; i < n && rc == 0; i++)
		if (b->img[i].src == NULL)
			rc = -EBADMSG; /* the OSD left one out */
	if (rc)
		goto out;
	rc = run_images(d, b);
out:
	for (q = 0; req && q < nrec; q++)
		rckpt_buf_free(&req[q]);
	free(req);
	free(recs);
	free(u);
	free(ord);
	if (rc) {
		rckpt_pcr_batch_free(b);
		return rckpt_fail(d->h, rc, __func__, "cannot fetch %u images of %s", n, d->name);
	}
	pthread_mutex_lock(&d->mu);
	d->stats.images += n;
	pthread_mutex_unlock(&d->mu);
	*out = b;
	return 0;
}

int rckpt_pcr_batch_make(rckpt_pcr_t *d, const rckpt_pcr_jpeg_t *it, unsigned n, int rgb,
			 rckpt_pcr_batch_t **out)
{
	rckpt_pcr_batch_t *b;
	size_t total = 0, off = 0;
	unsigned i;
	int rc = 0;

	*out = NULL;
	for (i = 0; i < n; i++) {
		if (it[i].name_len > RCKPT_PCR_MAX_NAME || it[i].jpeg_len == 0)
			return -EINVAL;
		total += it[i].label_len + it[i].jpeg_len;
	}
	b = calloc(1, sizeof(*b));
	if (b == NULL)
		return -ENOMEM;
	b->d = d;
	b->rgb = rgb;
	b->scale = d->o.scale;
	b->record = UINT32_MAX;
	b->n = n;
	b->img = calloc(n ? n : 1, sizeof(*b->img));
	b->rbuf = malloc(total ? total : 1);
	if (b->img == NULL || b->rbuf == NULL) {
		rckpt_pcr_batch_free(b);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) { /* copies: the batch owns what it hands out */
		pimg_t *p = &b->img[i];
		p->id = it[i].id;
		memcpy(p->name, it[i].name, it[i].name_len);
		memcpy(b->rbuf + off, it[i].label, it[i].label_len);
		p->label = b->rbuf + off;
		p->label_len = it[i].label_len;
		off += it[i].label_len;
		memcpy(b->rbuf + off, it[i].jpeg, it[i].jpeg_len);
		p->src = b->rbuf + off;
		p->src_len = it[i].jpeg_len;
		off += it[i].jpeg_len;
	}
	if (n == 0) {
		*out = b;
		return 0;
	}
	if ((rc = run_images(d, b))) {
		rckpt_pcr_batch_free(b);
		return rc;
	}
	*out = b;
	return 0;
}

int rckpt_pcr_read_stats(rckpt_pcr_t *d, rckpt_pcr_read_stats_t *out)
{
	pthread_mutex_lock(&d->mu);
	*out = d->stats;
	pthread_mutex_unlock(&d->mu);
	return 0;
}
