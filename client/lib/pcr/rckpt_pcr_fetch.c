/*
 * rckpt_pcr_fetch.c — a PCR dataset's images by id: the records that hold
 * them asked through the OSDs (pcr.images, only those images' bytes come
 * back), and batches made of JPEGs already in hand; decoded on the
 * reader's pool (rckpt_pcr_read.c).
 */
#define _GNU_SOURCE /* qsort_r */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_pcr_reader.h"

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
	rc = rckpt_pcr_run_images(d, b);
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
	if ((rc = rckpt_pcr_run_images(d, b))) {
		rckpt_pcr_batch_free(b);
		return rc;
	}
	*out = b;
	return 0;
}
