/*
 * rckpt_pcr_read.c — reading PCR datasets: records in order with read-ahead;
 * JPEG bytes or RGB decoded on a pool (images by id through the OSDs:
 * rckpt_pcr_fetch.c, on the same pool).
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
#include "rckpt_pcr_reader.h"

#define DEFAULT_PREFETCH 2u
#define INDEX_MAX ((size_t)1 << 30)

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
	if (opts->output > RCKPT_PCR_RGB)
		return rckpt_fail(h, -EINVAL, __func__, "output %u: RCKPT_PCR_JPEG or RCKPT_PCR_RGB", opts->output);
	if (opts->threads > MAX_THREADS || opts->prefetch > MAX_PREFETCH)
		return rckpt_fail(h, -EINVAL, __func__, "threads %u, prefetch %u: at most %u and %u", opts->threads,
				  opts->prefetch, MAX_THREADS, MAX_PREFETCH);
	if (opts->groups != RCKPT_PCR_ALL && opts->groups > RCKPT_PCR_MAX_GROUPS)
		return rckpt_fail(h, -EINVAL, __func__, "groups %u: 1..%u scan groups, or RCKPT_PCR_ALL (0) for every one",
				  opts->groups, RCKPT_PCR_MAX_GROUPS);
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
	if (d->k != RCKPT_PCR_ALL && d->k > d->x.ngroups) {
		rc = rckpt_fail(h, -EINVAL, __func__, "groups %u: dataset %s has %u scan groups (1..%u, or RCKPT_PCR_ALL)",
				d->k, dataset, d->x.ngroups, d->x.ngroups);
		rckpt_pcr_close(d);
		return rc;
	}
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
	if (groups != RCKPT_PCR_ALL && groups > d->x.ngroups)
		return rckpt_fail(d->h, -EINVAL, __func__, "groups %u: dataset %s has %u scan groups (1..%u, or RCKPT_PCR_ALL)",
				  groups, d->name, d->x.ngroups, d->x.ngroups);
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

int rckpt_pcr_run_images(rckpt_pcr_t *d, rckpt_pcr_batch_t *b)
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

int rckpt_pcr_read_stats(rckpt_pcr_t *d, rckpt_pcr_read_stats_t *out)
{
	pthread_mutex_lock(&d->mu);
	*out = d->stats;
	pthread_mutex_unlock(&d->mu);
	return 0;
}
