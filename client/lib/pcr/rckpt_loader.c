/*
 * rckpt_loader.c — the locality-aware PCR loader: each learner caches the
 * samples it reads in the first epoch (the cache directory of
 * rckpt_locality.c says whose they are), then builds its share of every
 * global batch out of its cache, and only the imbalance moves between
 * learners, over the caller's transport.
 *
 * A step, in locality mode after the first epoch: every learner computes
 * the same plan. A learner with surplus sends it, one message per
 * receiver in rank order; a learner short of samples receives, one
 * message per sender in rank order, then reads what no cache holds from
 * the cluster. No learner is both, so blocking transports cannot
 * deadlock. Samples a learner owns but could not cache (its byte budget
 * ran out) it reads from the cluster itself.
 *
 * Message (little-endian): u64 payload length; then u32 count, and per
 * sample u32 id, u32 name length, u32 label length, u32 JPEG length and
 * those bytes. The receiver checks every length and that the ids are the
 * ones the plan promised.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt.h"
#include "rckpt_bytes.h"
#include "rckpt_pcr.h"
#include "rckpt_pcr_internal.h"

#define MSG_MAX ((uint64_t)1 << 34) /* one message: at most 16 GiB */
#define ITEM_HDR 16u

typedef struct centry {
	uint8_t *buf; /* name, label, JPEG; NULL: not cached */
	uint32_t name_len, label_len, jpeg_len;
} centry_t;

struct rckpt_loader {
	rckpt_t *h;
	rckpt_pcr_t *d; /* JPEG output; decoding happens when a batch is made */
	rckpt_loader_opts_t o;
	rckpt_loc_transport_t tr;
	char name[64];
	uint32_t n;         /* samples */
	uint32_t *owner;    /* the directory; NULL until the first epoch */
	uint32_t *perm;     /* this epoch's order */
	uint64_t epoch;     /* the epoch started last */
	uint32_t start;     /* its samples skipped by a seek: perm[0..start) */
	uint32_t steps, step;
	int started, filling;
	uint32_t capacity;  /* samples the directory gives each learner */
	centry_t *cache;
	uint32_t *src, *dst, *mine; /* a step's plan; this learner's positions */
	rckpt_loader_stats_t st;
	uint64_t wire0;     /* the index read before the stats began */
};

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static void put64(uint8_t *b, uint64_t v)
{
	put32(b, (uint32_t)v);
	put32(b + 4, (uint32_t)(v >> 32));
}

static uint64_t get64(const uint8_t *b)
{
	return (uint64_t)rckpt_le32(b) | (uint64_t)rckpt_le32(b + 4) << 32;
}

static uint32_t gsize(const rckpt_loader_t *l)
{
	return l->tr.size * l->o.local_batch;
}

/* ---- open, close ---- */

int rckpt_loader_open(rckpt_t *h, rckpt_loader_t **out, const char *dataset, const rckpt_loc_transport_t *tr,
		      const rckpt_loader_opts_t *o)
{
	static const rckpt_loader_opts_t def = RCKPT_LOADER_OPTS_INIT;
	rckpt_pcr_opts_t po = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_info_t info;
	rckpt_pcr_read_stats_t rs;
	rckpt_loader_t *l;
	uint64_t per, k;
	int rc;

	*out = NULL;
	rckpt_clear_error(h);
	if (o == NULL)
		o = &def;
	if (o->version != RCKPT_LOADER_OPTS_VERSION || o->mode > RCKPT_LOADER_LOCALITY || o->local_batch == 0 ||
	    o->output > RCKPT_PCR_RGB || tr == NULL || tr->size == 0 || tr->rank >= tr->size ||
	    (uint64_t)tr->size * o->local_batch > (1u << 24) ||
	    (o->mode == RCKPT_LOADER_LOCALITY && tr->size > 1 && (!tr->send || !tr->recv)))
		return rckpt_fail(h, -EINVAL, __func__, "bad loader options or transport");
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return rckpt_fail(h, -ENOMEM, __func__, "out of memory");
	l->h = h;
	l->o = *o;
	l->tr = *tr;
	if (l->o.cache_bytes == 0)
		l->o.cache_bytes = (uint64_t)1 << 30;
	snprintf(l->name, sizeof(l->name), "%s", dataset ? dataset : "");
	po.groups = o->groups;
	po.output = RCKPT_PCR_JPEG;
	po.threads = o->threads;
	if ((rc = rckpt_pcr_open(h, &l->d, dataset, &po))) {
		free(l);
		return rc; /* rckpt_pcr_open said why */
	}
	rckpt_pcr_info(l->d, &info);
	rckpt_pcr_read_stats(l->d, &rs);
	l->st.storage_bytes = rs.wire_bytes;
	l->n = info.images;
	/* the directory's capacity: the byte budget over the mean JPEG at
	 * this fidelity (heads plus the groups read); the budget itself is
	 * enforced as samples arrive */
	per = info.head_bytes;
	for (k = 0; k < info.groups && (o->groups == RCKPT_PCR_ALL || k < o->groups); k++)
		per += info.group_bytes[k];
	per = l->n ? (per + l->n - 1) / l->n : 1;
	per = per ? per : 1;
	l->capacity = l->o.cache_bytes / per > UINT32_MAX ? UINT32_MAX : (uint32_t)(l->o.cache_bytes / per);
	l->perm = malloc(sizeof(*l->perm) * (l->n ? l->n : 1));
	l->src = malloc(sizeof(*l->src) * gsize(l));
	l->dst = malloc(sizeof(*l->dst) * gsize(l));
	l->mine = malloc(sizeof(*l->mine) * gsize(l));
	if (o->mode == RCKPT_LOADER_LOCALITY) {
		l->owner = malloc(sizeof(*l->owner) * (l->n ? l->n : 1));
		l->cache = calloc(l->n ? l->n : 1, sizeof(*l->cache));
	}
	if (!l->perm || !l->src || !l->dst || !l->mine ||
	    (o->mode == RCKPT_LOADER_LOCALITY && (!l->owner || !l->cache))) {
		rckpt_loader_close(l);
		return rckpt_fail(h, -ENOMEM, __func__, "out of memory");
	}
	*out = l;
	return 0;
}

void rckpt_loader_close(rckpt_loader_t *l)
{
	uint32_t i;
	if (l == NULL)
		return;
	for (i = 0; l->cache && i < l->n; i++)
		free(l->cache[i].buf);
	free(l->cache);
	free(l->owner);
	free(l->perm);
	free(l->src);
	free(l->dst);
	free(l->mine);
	rckpt_pcr_close(l->d);
	free(l);
}

int rckpt_loader_epoch(rckpt_loader_t *l, uint64_t epoch, uint32_t *steps)
{
	return rckpt_loader_seek(l, epoch, 0, steps);
}

int rckpt_loader_seek(rckpt_loader_t *l, uint64_t epoch, uint32_t consumed, uint32_t *steps)
{
	int rc;
	rckpt_clear_error(l->h);
	if (consumed > l->n)
		return rckpt_fail(l->h, -ERANGE, __func__, "epoch %" PRIu64 " of %s has %" PRIu32
				  " samples, not %" PRIu32, epoch, l->name, l->n, consumed);
	if ((rc = rckpt_loc_order(l->o.seed, epoch, l->n, l->perm)))
		return rckpt_fail(l->h, rc, __func__, "cannot order epoch %" PRIu64, epoch);
	if (l->o.mode == RCKPT_LOADER_LOCALITY && !l->started) {
		/* the caches fill with what this epoch reads: from `consumed` on */
		rc = rckpt_loc_directory_from(l->o.seed, epoch, l->n, l->tr.size, l->o.local_batch,
					      l->capacity, consumed, l->owner);
		if (rc)
			return rckpt_fail(l->h, rc, __func__, "cannot build the cache directory");
		l->filling = 1;
	} else {
		l->filling = 0;
	}
	l->started = 1;
	l->epoch = epoch;
	l->start = consumed;
	l->steps = (uint32_t)(((uint64_t)(l->n - consumed) + gsize(l) - 1) / gsize(l));
	l->step = 0;
	if (steps)
		*steps = l->steps;
	return 0;
}

int rckpt_loader_position(const rckpt_loader_t *l, uint64_t *epoch, uint32_t *consumed)
{
	uint64_t c;
	if (!l->started)
		return -EINVAL;
	c = (uint64_t)l->start + (uint64_t)l->step * gsize(l);
	*epoch = l->epoch;
	*consumed = c > l->n ? l->n : (uint32_t)c;
	return 0;
}

/* ---- samples ---- */

/* Storage reads of ids[0..n) (JPEG bytes at the fidelity), counted. */
static int fetch(rckpt_loader_t *l, const uint32_t *ids, unsigned n, rckpt_pcr_batch_t **out)
{
	rckpt_pcr_read_stats_t a, b;
	int rc;
	*out = NULL;
	if (n == 0)
		return 0;
	rckpt_pcr_read_stats(l->d, &a);
	rc = rckpt_pcr_fetch(l->d, ids, n, out);
	rckpt_pcr_read_stats(l->d, &b);
	l->st.storage_bytes += b.wire_bytes - a.wire_bytes;
	if (rc == 0)
		l->st.storage_samples += n;
	return rc;
}

static void item_of_image(const rckpt_pcr_image_t *im, rckpt_pcr_jpeg_t *it)
{
	it->id = im->id;
	it->name = im->name;
	it->name_len = strlen(im->name);
	it->label = im->label;
	it->label_len = im->label_len;
	it->jpeg = im->jpeg;
	it->jpeg_len = im->jpeg_len;
}

static void item_of_cache(const rckpt_loader_t *l, uint32_t id, rckpt_pcr_jpeg_t *it)
{
	const centry_t *c = &l->cache[id];
	it->id = id;
	it->name = (const char *)c->buf;
	it->name_len = c->name_len;
	it->label = c->buf + c->name_len;
	it->label_len = c->label_len;
	it->jpeg = c->buf + c->name_len + c->label_len;
	it->jpeg_len = c->jpeg_len;
}

/* Keeps a copy of it in the cache while the byte budget allows. */
static void cache_put(rckpt_loader_t *l, const rckpt_pcr_jpeg_t *it)
{
	const size_t len = it->name_len + it->label_len + it->jpeg_len;
	centry_t *c = &l->cache[it->id];
	if (c->buf || l->st.cached_bytes + len > l->o.cache_bytes)
		return;
	if ((c->buf = malloc(len ? len : 1)) == NULL)
		return; /* not cached: read from the cluster when needed */
	memcpy(c->buf, it->name, it->name_len);
	memcpy(c->buf + it->name_len, it->label, it->label_len);
	memcpy(c->buf + it->name_len + it->label_len, it->jpeg, it->jpeg_len);
	c->name_len = (uint32_t)it->name_len;
	c->label_len = (uint32_t)it->label_len;
	c->jpeg_len = (uint32_t)it->jpeg_len;
	l->st.cached_bytes += len;
	l->st.cached_samples++;
}

/* Fills it[k] for the ids that are this learner's to supply (src == me):
 * from the cache, or (not cached) read from the cluster into *extra. */
static int own_items(rckpt_loader_t *l, const uint32_t *ids, const uint32_t *pos, unsigned n,
		     rckpt_pcr_jpeg_t *it, rckpt_pcr_batch_t **extra)
{
	uint32_t *miss = malloc(sizeof(*miss) * (n ? n : 1));
	unsigned k, nm = 0;
	int rc = 0;
	*extra = NULL;
	if (miss == NULL)
		return -ENOMEM;
	for (k = 0; k < n; k++) {
		const uint32_t id = ids[pos[k]];
		if (l->cache[id].buf) {
			item_of_cache(l, id, &it[k]);
			l->st.cache_hits++;
		} else {
			miss[nm++] = id;
		}
	}
	if (nm && (rc = fetch(l, miss, nm, extra)) == 0) {
		unsigned m = 0;
		for (k = 0; k < n; k++) {
			rckpt_pcr_image_t im;
			if (l->cache[ids[pos[k]]].buf)
				continue;
			rckpt_pcr_batch_image(*extra, m++, &im);
			item_of_image(&im, &it[k]);
		}
	}
	free(miss);
	return rc;
}

/* ---- the exchange ---- */

static int send_items(rckpt_loader_t *l, unsigned peer, const rckpt_pcr_jpeg_t *it, unsigned n)
{
	uint64_t len = 4;
	uint8_t *m, *q;
	unsigned k;
	int rc;
	for (k = 0; k < n; k++)
		len += ITEM_HDR + it[k].name_len + it[k].label_len + it[k].jpeg_len;
	if (len > MSG_MAX)
		return -E2BIG;
	if ((m = malloc(8 + len)) == NULL)
		return -ENOMEM;
	put64(m, len);
	put32(m + 8, n);
	q = m + 12;
	for (k = 0; k < n; k++) {
		put32(q, it[k].id);
		put32(q + 4, (uint32_t)it[k].name_len);
		put32(q + 8, (uint32_t)it[k].label_len);
		put32(q + 12, (uint32_t)it[k].jpeg_len);
		q += ITEM_HDR;
		memcpy(q, it[k].name, it[k].name_len);
		q += it[k].name_len;
		memcpy(q, it[k].label, it[k].label_len);
		q += it[k].label_len;
		memcpy(q, it[k].jpeg, it[k].jpeg_len);
		q += it[k].jpeg_len;
	}
	rc = l->tr.send(l->tr.ctx, peer, m, 8);
	if (rc == 0)
		rc = l->tr.send(l->tr.ctx, peer, m + 8, (size_t)len);
	free(m);
	if (rc == 0) {
		l->st.sent_samples += n;
		l->st.sent_bytes += 8 + len;
	}
	return rc < 0 ? rc : rc ? -EIO : 0;
}

int rckpt_loader_parse_items(const uint8_t *m, size_t len, const uint32_t *want, unsigned n,
			     rckpt_pcr_jpeg_t *it)
{
	const uint8_t *q = m + 4, *end = m + len;
	unsigned k;
	if (len < 4 || rckpt_le32(m) != n)
		return -EBADMSG;
	for (k = 0; k < n; k++) {
		uint32_t nl, ll, jl;
		if ((size_t)(end - q) < ITEM_HDR)
			return -EBADMSG;
		it[k].id = rckpt_le32(q);
		nl = rckpt_le32(q + 4);
		ll = rckpt_le32(q + 8);
		jl = rckpt_le32(q + 12);
		q += ITEM_HDR;
		if (it[k].id != want[k] || nl > RCKPT_PCR_MAX_NAME || ll > RCKPT_PCR_MAX_LABEL || jl == 0 ||
		    (uint64_t)nl + ll + jl > (uint64_t)(end - q))
			return -EBADMSG;
		it[k].name = (const char *)q;
		it[k].name_len = nl;
		it[k].label = q + nl;
		it[k].label_len = ll;
		it[k].jpeg = q + nl + ll;
		it[k].jpeg_len = jl;
		q += (size_t)nl + ll + jl;
	}
	return q == end ? 0 : -EBADMSG;
}

/* Receives peer's message into *msg and points it[k] into it; the ids
 * must be want[0..n) in order. */
static int recv_items(rckpt_loader_t *l, unsigned peer, const uint32_t *want, unsigned n,
		      rckpt_pcr_jpeg_t *it, uint8_t **msg)
{
	uint8_t hdr[8], *m;
	uint64_t len;
	int rc;
	*msg = NULL;
	if ((rc = l->tr.recv(l->tr.ctx, peer, hdr, 8)))
		return rc < 0 ? rc : -EIO;
	len = get64(hdr);
	/* no more than n items can fill, before allocating */
	if (len < 4 || len > MSG_MAX ||
	    len > 4 + (uint64_t)n * (ITEM_HDR + RCKPT_PCR_MAX_NAME + RCKPT_PCR_MAX_LABEL + RCKPT_PCR_MAX_RECORD))
		return -EBADMSG;
	if ((m = malloc((size_t)len)) == NULL)
		return -ENOMEM;
	if ((rc = l->tr.recv(l->tr.ctx, peer, m, (size_t)len))) {
		free(m);
		return rc < 0 ? rc : -EIO;
	}
	*msg = m;
	if ((rc = rckpt_loader_parse_items(m, (size_t)len, want, n, it)))
		return rc;
	l->st.recv_samples += n;
	l->st.recv_bytes += 8 + len;
	return 0;
}

/* ---- a step ---- */

/* The regular mode's step (and the locality mode's first epoch): this
 * learner's share, read from the cluster; in the first epoch its own
 * samples go into the cache. */
static int step_regular(rckpt_loader_t *l, const uint32_t *ids, uint32_t g, rckpt_pcr_batch_t **out)
{
	const unsigned p = l->tr.size, r = l->tr.rank;
	const uint32_t sh = g / p + (r < g % p), s0 = r * (g / p) + (r < g % p ? r : g % p);
	rckpt_pcr_jpeg_t *it = malloc(sizeof(*it) * (sh ? sh : 1));
	rckpt_pcr_batch_t *b = NULL;
	uint32_t k;
	int rc;
	if (it == NULL)
		return -ENOMEM;
	rc = fetch(l, ids + s0, sh, &b);
	for (k = 0; rc == 0 && k < sh; k++) {
		rckpt_pcr_image_t im;
		rckpt_pcr_batch_image(b, k, &im);
		item_of_image(&im, &it[k]);
		if (l->filling && l->owner[it[k].id] == r)
			cache_put(l, &it[k]);
	}
	if (rc == 0)
		rc = rckpt_pcr_batch_make(l->d, it, sh, l->o.output == RCKPT_PCR_RGB, out);
	rckpt_pcr_batch_free(b);
	free(it);
	return rc;
}

static int step_locality(rckpt_loader_t *l, const uint32_t *ids, uint32_t g, rckpt_pcr_batch_t **out)
{
	const unsigned p = l->tr.size, me = l->tr.rank;
	rckpt_pcr_jpeg_t *it = NULL, *tmp = NULL;
	rckpt_pcr_batch_t *own = NULL, *stor = NULL;
	uint8_t **msgs = NULL;
	uint32_t *want = NULL, *pos = NULL, i, nmine = 0, nstor = 0;
	unsigned peer, nmsg = 0;
	int rc;

	if ((rc = rckpt_loc_plan(l->owner, l->n, p, ids, g, l->src, l->dst, NULL)))
		return rc;
	it = calloc(g ? g : 1, sizeof(*it));    /* by position in the batch */
	tmp = calloc(g ? g : 1, sizeof(*tmp));
	want = malloc(sizeof(*want) * (g ? g : 1));
	pos = malloc(sizeof(*pos) * (g ? g : 1));
	msgs = calloc(p, sizeof(*msgs));
	if (!it || !tmp || !want || !pos || !msgs) {
		rc = -ENOMEM;
		goto out;
	}
	/* what this learner supplies from its cache: its own local samples and
	 * what it sends (read from the cluster if it could not cache them) */
	for (i = 0; i < g; i++)
		if (l->src[i] == me)
			pos[nmine++] = i;
	if ((rc = own_items(l, ids, pos, nmine, tmp, &own)))
		goto out;
	for (i = 0; i < nmine; i++)
		it[pos[i]] = tmp[i];
	/* senders send, in receiver order */
	for (peer = 0; peer < p && rc == 0; peer++) {
		unsigned n = 0;
		if (peer == me)
			continue;
		for (i = 0; i < g; i++)
			if (l->src[i] == me && l->dst[i] == peer)
				tmp[n++] = it[i];
		if (n)
			rc = send_items(l, peer, tmp, n);
	}
	/* receivers receive, in sender order */
	for (peer = 0; peer < p && rc == 0; peer++) {
		unsigned n = 0;
		if (peer == me)
			continue;
		for (i = 0; i < g; i++)
			if (l->src[i] == peer && l->dst[i] == me)
				want[n] = ids[i], pos[n++] = i;
		if (n == 0)
			continue;
		if ((rc = recv_items(l, peer, want, n, tmp, &msgs[nmsg++])))
			break;
		for (i = 0; i < n; i++)
			it[pos[i]] = tmp[i];
	}
	if (rc)
		goto out;
	/* then the samples in no cache */
	for (i = 0; i < g; i++)
		if (l->src[i] == RCKPT_LOC_STORAGE && l->dst[i] == me)
			want[nstor] = ids[i], pos[nstor++] = i;
	if ((rc = fetch(l, want, nstor, &stor)))
		goto out;
	for (i = 0; i < nstor; i++) {
		rckpt_pcr_image_t im;
		rckpt_pcr_batch_image(stor, i, &im);
		item_of_image(&im, &it[pos[i]]);
	}
	/* this learner's local batch, in global-batch order */
	for (i = 0, nmine = 0; i < g; i++)
		if (l->dst[i] == me)
			tmp[nmine++] = it[i];
	rc = rckpt_pcr_batch_make(l->d, tmp, nmine, l->o.output == RCKPT_PCR_RGB, out);
out:
	for (peer = 0; msgs && peer < nmsg; peer++)
		free(msgs[peer]);
	free(msgs);
	rckpt_pcr_batch_free(own);
	rckpt_pcr_batch_free(stor);
	free(it);
	free(tmp);
	free(want);
	free(pos);
	return rc;
}

int rckpt_loader_next(rckpt_loader_t *l, rckpt_pcr_batch_t **out)
{
	const uint32_t G = gsize(l);
	uint32_t g, at;
	int rc;

	*out = NULL;
	rckpt_clear_error(l->h);
	if (!l->started)
		return rckpt_fail(l->h, -EINVAL, __func__, "no epoch started (rckpt_loader_epoch)");
	if (l->step >= l->steps)
		return 0;
	at = l->start + l->step * G;
	g = l->n - at < G ? l->n - at : G;
	if (l->o.mode == RCKPT_LOADER_REGULAR || l->filling)
		rc = step_regular(l, l->perm + at, g, out);
	else
		rc = step_locality(l, l->perm + at, g, out);
	if (rc)
		return rckpt_fail(l->h, rc, __func__, "step %" PRIu32 " of %s (learner %u of %u)", l->step, l->name,
				  l->tr.rank, l->tr.size);
	l->step++;
	if (l->step == l->steps)
		l->filling = 0;
	return 0;
}

int rckpt_loader_stats(rckpt_loader_t *l, rckpt_loader_stats_t *out)
{
	*out = l->st;
	return 0;
}
