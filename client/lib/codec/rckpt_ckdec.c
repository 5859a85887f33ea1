/*
 * rckpt_ckdec.c — the checkpoint decoder (rckpt_ckdec.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "rckpt_ckdec.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rckpt_codec.h"
#include "rckpt_par.h"

void rckpt_ckdec_free(rckpt_ckdec_t *d)
{
	uint32_t c;
	for (c = 0; d->chunk && c < d->mf.nchunks; c++)
		rckpt_record_free(&d->chunk[c]);
	const unsigned threads = d->threads;
	free(d->chunk);
	rckpt_manifest_free(&d->mf);
	memset(d, 0, sizeof(*d));
	d->threads = threads;
}

/* Elements a record of this step may hold: 2^26 (what any store writer
 * laid into a chunk), or the step's own chunk size where a local file's
 * encoder was given a larger one (rckpt codec encode --chunk-params), at
 * most 2^31. */
static uint64_t record_max(const rckpt_manifest_t *mf)
{
	const uint64_t floor = (uint64_t)1 << 26, cap = (uint64_t)1 << 31;
	return mf->chunk_params > floor ? (mf->chunk_params < cap ? mf->chunk_params : cap) : floor;
}

/* The bound on declared values against bytes (RCKPT_DECODE_RATIO_MAX, or
 * the environment's). */
static double decode_ratio(void)
{
	const char *env = getenv("RCKPT_DECODE_RATIO_MAX");
	if (env && *env) {
		char *end;
		const double v = strtod(env, &end);
		if (*end == '\0' && v >= 1)
			return v;
	}
	return RCKPT_DECODE_RATIO_MAX;
}

/* What a base record declares, from its segment headers: its elements,
 * or -1 when it is not a base whose headers read (a delta is bounded by
 * its parent; errors come with its decode), -2 past a record's bounds. */
static int64_t declared(const rckpt_manifest_t *mf, const uint8_t *rec, size_t len)
{
	unsigned kind;
	uint64_t step, parent, e;
	uint32_t nseg;
	if (rec == NULL || rckpt_record_peek(&kind, &step, &parent, rec, len) || kind != RCKPT_REC_BASE ||
	    rckpt_record_geometry(&nseg, &e, rec, len))
		return -1;
	return e > record_max(mf) || nseg > (1u << 16) ? -2 : (int64_t)e;
}

/* The bases' declared values against their bytes (RCKPT_DECODE_RATIO_MAX),
 * from the records' segment headers, before anything is decoded. */
static int check_declared(const rckpt_manifest_t *mf, size_t mlen, const uint8_t *const *records,
			  const size_t *lens)
{
	const double ratio = decode_ratio();
	uint64_t elems = 0, bytes = mlen;
	uint32_t c;
	for (c = 0; c < mf->nchunks; c++) {
		const int64_t e = declared(mf, records[c], records[c] ? lens[c] : 0);
		if (e == -2)
			return -E2BIG;
		if (e < 0)
			continue;
		elems += (uint64_t)e;
		bytes += lens[c];
	}
	return 4.0 * (double)elems > ratio * (double)bytes ? -E2BIG : 0;
}

/* By default, a step's records below this many bytes decode on the
 * caller's thread: starting threads would cost more. */
#define PAR_MIN_BYTES (256u << 10)

/* This thread's CPU seconds. */
static double thread_cpu(void)
{
	struct timespec ts;
	return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) ? 0.0 : (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Chunk c's record decoded into *out: against d's last step where it is a
 * delta, checked against the manifest. Reads d and mf only. */
static int decode_rec(const rckpt_ckdec_t *d, const rckpt_manifest_t *mf, uint32_t c, const uint8_t *rec,
		      size_t len, rckpt_record_t *out)
{
	const rckpt_record_limits_t lim = { 1u << 16, record_max(mf) };
	const rckpt_record_t *parent = NULL;
	uint8_t h[32];
	unsigned kind;
	uint64_t rstep, rparent;
	int stored = 0, rc = rckpt_record_peek(&kind, &rstep, &rparent, rec, len);
	if (rc == 0 && kind != RCKPT_REC_BASE) {
		if (d->chunk == NULL || d->mf.step != rparent || d->mf.nchunks != mf->nchunks)
			rc = -ESTALE;
		else
			parent = &d->chunk[c];
	}
	if (rc == 0)
		rc = rckpt_record_decode(out, rec, len, parent, &lim);
	if (rc == 0 && (out->step != mf->step || out->nseg != mf->chunk[c].nseg))
		rc = -EBADMSG;
	if (rc == 0 && kind == RCKPT_REC_BASE) /* the stored base: its bytes are checked, not its content */
		stored = rckpt_manifest_is_base(mf, c, rec, len);
	if (stored < 0)
		rc = stored;
	if (rc == 0 && !stored)
		rc = rckpt_record_digest(h, out);
	if (rc == 0 && !stored && memcmp(h, mf->chunk[c].sha256, 32) != 0)
		rc = RCKPT_FMT_ECHECKSUM;
	return rc;
}

int rckpt_ckdec_inc_begin(rckpt_ckdec_inc_t *x, const rckpt_ckdec_t *d, const uint8_t *manifest,
			  size_t mlen)
{
	uint32_t c;
	int rc;
	memset(x, 0, sizeof(*x));
	if ((rc = rckpt_manifest_decode(&x->mf, manifest, mlen)))
		return rc;
	x->d = d;
	x->bytes = x->mlen = mlen;
	x->ratio = decode_ratio();
	x->chunk = calloc(x->mf.nchunks ? x->mf.nchunks : 1, sizeof(*x->chunk));
	x->rc = malloc((x->mf.nchunks ? x->mf.nchunks : 1) * sizeof(*x->rc));
	x->given = calloc(x->mf.nchunks ? x->mf.nchunks : 1, sizeof(*x->given));
	x->mu = malloc(sizeof(pthread_mutex_t));
	if (!x->chunk || !x->rc || !x->given || !x->mu) {
		free(x->mu);
		x->mu = NULL;
		rckpt_ckdec_inc_abort(x);
		return -ENOMEM;
	}
	pthread_mutex_init(x->mu, NULL);
	for (c = 0; c < x->mf.nchunks; c++)
		x->rc[c] = 1;
	return 0;
}

int rckpt_ckdec_inc_chunk(rckpt_ckdec_inc_t *x, uint32_t c, const uint8_t *rec, size_t len)
{
	const int64_t e = declared(&x->mf, rec, len);
	int now;
	if (c >= x->mf.nchunks || rec == NULL)
		return -EINVAL;
	/* decoded now only while what the bases given so far declare stays
	 * within the bound over the bytes given so far: never more than the
	 * whole step's check would let through */
	pthread_mutex_lock(x->mu);
	if (e >= 0) /* as the whole step's check counts them: bases' bytes */
		x->bytes += len;
	now = x->given[c] == NULL && e != -2 &&
	      4.0 * (double)(x->elems + (e > 0 ? (uint64_t)e : 0)) <= x->ratio * (double)x->bytes;
	if (now) {
		x->elems += e > 0 ? (uint64_t)e : 0;
		x->given[c] = rec;
	}
	pthread_mutex_unlock(x->mu);
	if (now) {
		const double t0 = thread_cpu();
		x->rc[c] = decode_rec(x->d, &x->mf, c, rec, len, &x->chunk[c]);
		pthread_mutex_lock(x->mu);
		x->cpu += thread_cpu() - t0;
		pthread_mutex_unlock(x->mu);
	}
	return 0;
}

/* The chunks end decodes: those not decoded as they came. */
typedef struct rest {
	rckpt_ckdec_inc_t *x;
	const uint8_t *const *records;
	const size_t *lens;
	const uint32_t *todo;
} rest_t;

static int decode_rest(void *arg, unsigned i)
{
	const rest_t *r = arg;
	const uint32_t c = r->todo[i];
	const double t0 = thread_cpu();
	r->x->rc[c] = decode_rec(r->x->d, &r->x->mf, c, r->records[c], r->lens[c], &r->x->chunk[c]);
	pthread_mutex_lock(r->x->mu);
	r->x->cpu += thread_cpu() - t0;
	pthread_mutex_unlock(r->x->mu);
	return 0;
}

void rckpt_ckdec_inc_abort(rckpt_ckdec_inc_t *x)
{
	const double cpu = x->cpu;
	uint32_t c;
	for (c = 0; x->chunk && c < x->mf.nchunks; c++)
		rckpt_record_free(&x->chunk[c]);
	free(x->chunk);
	free(x->rc);
	free(x->given);
	if (x->mu) {
		pthread_mutex_destroy(x->mu);
		free(x->mu);
	}
	rckpt_manifest_free(&x->mf);
	memset(x, 0, sizeof(*x));
	x->cpu = cpu;
}

int rckpt_ckdec_inc_end(rckpt_ckdec_inc_t *x, rckpt_ckdec_t *d, const uint8_t *const *records,
			const size_t *lens)
{
	uint32_t *todo = calloc(x->mf.nchunks ? x->mf.nchunks : 1, sizeof(*todo));
	uint64_t bytes = 0;
	unsigned threads = 1, n = 0;
	uint32_t c;
	int rc = todo ? 0 : -ENOMEM;

	if (rc == 0)
		rc = check_declared(&x->mf, x->mlen, records, lens);
	for (c = 0; rc == 0 && c < x->mf.nchunks; c++) {
		if (records[c] == NULL) { /* not wanted: its tensors read as -ENOENT */
			rckpt_record_free(&x->chunk[c]);
			x->rc[c] = 0;
		} else if (x->given[c] != records[c]) {
			rckpt_record_free(&x->chunk[c]);
			todo[n++] = c;
			bytes += lens[c];
		}
	}
	if (rc == 0 && n) {
		const rest_t r = { x, records, lens, todo };
		if (d->threads) /* as asked */
			threads = d->threads;
		else if (n > 1 && bytes >= PAR_MIN_BYTES)
			threads = rckpt_cpus(4);
		(void)rckpt_par_for(n, threads, decode_rest, (void *)&r);
	}
	for (c = 0; rc == 0 && c < x->mf.nchunks; c++)
		rc = x->rc[c]; /* the first chunk that failed */
	free(todo);
	if (rc == 0) {
		threads = d->threads;
		rckpt_ckdec_free(d);
		d->mf = x->mf;
		d->chunk = x->chunk;
		d->threads = threads;
		memset(&x->mf, 0, sizeof(x->mf));
		x->chunk = NULL;
	}
	rckpt_ckdec_inc_abort(x);
	return rc;
}

int rckpt_ckdec_step(rckpt_ckdec_t *d, const uint8_t *manifest, size_t mlen,
		     const uint8_t *const *records, const size_t *lens)
{
	rckpt_ckdec_inc_t x;
	int rc = rckpt_ckdec_inc_begin(&x, d, manifest, mlen);
	return rc ? rc : rckpt_ckdec_inc_end(&x, d, records, lens);
}

int rckpt_ckdec_tensor_f32(const rckpt_ckdec_t *d, uint32_t t, float *out)
{
	uint64_t numel = 1;
	unsigned k;
	if (t >= d->mf.ntensors)
		return -EINVAL;
	for (k = 0; k < d->mf.t[t].ndim; k++)
		numel *= d->mf.t[t].shape[k];
	return rckpt_ckdec_range_f32(d, t, 0, numel, out);
}

/* Where a reading of one tensor in order stands: at element `at`, in its
 * segment k (which begins at element `off`), after `pk` of that segment's
 * protected values. A read that starts where the last one stopped goes on
 * from there instead of counting the segment's protected values again. */
typedef struct rcur {
	uint32_t t, k;
	uint64_t at, off, pk;
	int valid;
} rcur_t;

/* The values of the segments, their LOG2 undone; a NORM segment's are
 * still the normalized ones (norm: whether the tensor's manifest entry
 * names a second moment, which its segments must agree with). cur: NULL,
 * or the cursor of the reads of this tensor before, then after, this one. */
static int range_raw(const rckpt_ckdec_t *d, uint32_t t, uint64_t first, uint64_t count, float *out,
		     rcur_t *cur)
{
	const rckpt_mf_tensor_t *mt;
	uint64_t off = 0, numel = 1, pk0 = UINT64_MAX;
	uint32_t k = 0;
	unsigned dd;

	if (t >= d->mf.ntensors)
		return -EINVAL;
	mt = &d->mf.t[t];
	for (dd = 0; dd < mt->ndim; dd++)
		numel *= mt->shape[dd];
	if (first > numel || count > numel - first)
		return -ERANGE;
	if (cur && cur->valid && cur->t == t && cur->at == first && cur->k < mt->nseg) {
		k = cur->k; /* go on where the last read stopped */
		off = cur->off;
		pk0 = cur->pk;
	}
	if (cur)
		cur->valid = 0;
	for (; k < mt->nseg && count > 0; k++) {
		const rckpt_mf_seg_t *ms = &mt->seg[k];
		const rckpt_seg_t *s;
		uint64_t a, b, pk = 0, np = 0, i;
		if (off + ms->n <= first) {
			off += ms->n;
			pk0 = UINT64_MAX;
			continue;
		}
		if (ms->chunk >= d->mf.nchunks)
			return -EBADMSG;
		if (d->chunk[ms->chunk].seg == NULL && d->mf.chunk[ms->chunk].nseg > 0)
			return -ENOENT; /* its chunk was not restored */
		if (ms->index >= d->chunk[ms->chunk].nseg)
			return -EBADMSG;
		s = &d->chunk[ms->chunk].seg[ms->index];
		if (s->tensor != t || s->first != off || s->n != ms->n ||
		    (s->transform == RCKPT_XF_NORM) != (mt->norm != RCKPT_MF_NO_NORM))
			return -EBADMSG;
		a = first - off; /* within the segment */
		b = s->n - a < count ? s->n : a + count;
		if (s->encoding == RCKPT_SEG_LOSSLESS) {
			rckpt_widen_to_f32(out, s->raw + a * rckpt_dtype_size(s->dtype), s->dtype, b - a);
		} else {
			rckpt_qparams_t q;
			const uint8_t P = (uint8_t)(s->nbins + 1);
			int rc;
			size_t used;
			if (pk0 != UINT64_MAX)
				pk = pk0;
			else
				for (i = 0; i < a; i++)
					pk += s->idx[i] == P;
			if (pk > s->nprot)
				return -EBADMSG;
			memset(&q, 0, sizeof(q));
			q.nbins = s->nbins;
			memcpy(q.centroids, s->centroids, sizeof(float) * s->nbins);
			/* the range's protected values: as many as its levels take */
			if ((rc = rckpt_dequantize_xf(out, s->idx + a, (size_t)(b - a), &q, s->prot + pk,
						      (size_t)(s->nprot - pk), s->transform, &used)))
				return rc;
			np = used;
		}
		pk0 = UINT64_MAX;
		out += b - a;
		count -= b - a;
		first += b - a;
		if (count == 0 && cur) { /* where the next read goes on */
			const int done = b == s->n;
			*cur = (rcur_t){ t, done ? k + 1 : k, first, done ? off + s->n : off, done ? 0 : pk + np, 1 };
		}
		off += ms->n;
	}
	return count == 0 ? 0 : -EBADMSG;
}

/* Elements of a first moment stored as NORM: y (sqrtf(v') + eps), v' its
 * second moment as restored, in blocks. */
#define NORM_BLK 65536u

/* rckpt_ckdec_range_f32 with the cursors of tensor t's reads and of its
 * second moment's (NULL: none). */
static int range_f32(const rckpt_ckdec_t *d, uint32_t t, uint64_t first, uint64_t count, float *out,
		     rcur_t *ct, rcur_t *cn)
{
	const rckpt_mf_tensor_t *mt;
	rcur_t own = { 0 };
	float *v;
	uint64_t k;
	int rc = range_raw(d, t, first, count, out, ct);

	if (rc || (mt = &d->mf.t[t])->norm == RCKPT_MF_NO_NORM)
		return rc;
	if (mt->norm >= d->mf.ntensors || d->mf.t[mt->norm].norm != RCKPT_MF_NO_NORM)
		return -EBADMSG; /* the manifest's decoder checked it; a second moment is plain */
	if ((v = malloc(4 * (size_t)(count < NORM_BLK ? count + 1 : NORM_BLK))) == NULL)
		return -ENOMEM;
	if (cn == NULL)
		cn = &own;
	for (k = 0; k < count && rc == 0; k += NORM_BLK) {
		const size_t n = count - k < NORM_BLK ? (size_t)(count - k) : NORM_BLK;
		size_t i;
		if ((rc = range_raw(d, mt->norm, first + k, n, v, cn)) != 0)
			break;
		for (i = 0; i < n; i++)
			out[k + i] = out[k + i] * (sqrtf(v[i]) + mt->eps);
	}
	free(v);
	return rc;
}

int rckpt_ckdec_range_f32(const rckpt_ckdec_t *d, uint32_t t, uint64_t first, uint64_t count,
			  float *out)
{
	return range_f32(d, t, first, count, out, NULL, NULL);
}

/* Elements [first, first + count) of tensor t decoded here, narrowed to
 * its dtype and put, in blocks. */
static int staged(const rckpt_ckdec_t *d, uint32_t t, uint64_t first, uint64_t count,
		  const rckpt_ckdec_sink_t *s)
{
	const unsigned dt = d->mf.t[t].dtype;
	const size_t dsz = rckpt_dtype_size(dt);
	const size_t blk = count < RCKPT_CKDEC_STAGE ? (size_t)count : RCKPT_CKDEC_STAGE;
	float *f = malloc(4 * (blk ? blk : 1));
	uint8_t *b = malloc(dsz * (blk ? blk : 1));
	rcur_t ct = { 0 }, cn = { 0 };
	uint64_t k;
	int rc = f && b ? 0 : -ENOMEM;
	for (k = 0; k < count && rc == 0; k += blk) {
		const size_t m = count - k < blk ? (size_t)(count - k) : blk;
		if ((rc = range_f32(d, t, first + k, m, f, &ct, &cn)) == 0) {
			rckpt_narrow_from_f32(b, f, dt, m);
			rc = s->put(s->arg, (first + k) * dsz, b, m * dsz);
		}
	}
	free(f);
	free(b);
	return rc;
}

/* Segment k of tensor t at element off, checked as range_raw checks
 * them: *out, or -ENOENT (its chunk was not restored), -EBADMSG. */
static int seg_of(const rckpt_ckdec_t *d, uint32_t t, uint32_t k, uint64_t off, uint64_t numel,
		  const rckpt_seg_t **out)
{
	const rckpt_mf_seg_t *ms = &d->mf.t[t].seg[k];
	const rckpt_seg_t *sg;
	if (ms->chunk >= d->mf.nchunks)
		return -EBADMSG;
	if (d->chunk[ms->chunk].seg == NULL && d->mf.chunk[ms->chunk].nseg > 0)
		return -ENOENT;
	if (ms->index >= d->chunk[ms->chunk].nseg)
		return -EBADMSG;
	sg = &d->chunk[ms->chunk].seg[ms->index];
	if (sg->tensor != t || sg->first != off || sg->n != ms->n || sg->n > numel - off ||
	    (sg->transform == RCKPT_XF_NORM) != (d->mf.t[t].norm != RCKPT_MF_NO_NORM))
		return -EBADMSG;
	*out = sg;
	return 0;
}

/* The top level in idx[0..n) and how many are P, in blocks of 255 whose
 * byte counts cannot wrap, so that the loop vectorizes. */
static void scan_levels(const uint8_t *idx, uint64_t n, uint8_t P, uint8_t *top, uint64_t *np)
{
	uint64_t i = 0, c = 0;
	uint8_t t = 0;
	while (i < n) {
		const uint64_t e = n - i < 255 ? n : i + 255;
		uint8_t b = 0;
		for (; i < e; i++) {
			t = idx[i] > t ? idx[i] : t;
			b = (uint8_t)(b + (idx[i] == P));
		}
		c += b;
	}
	*top = t;
	*np = c;
}

/* Whether tensor t (numel elements) decodes: its segments are there and
 * whole, and (levels) their levels in range with as many protected as
 * each holds, so that a tensor that cannot be read is refused before a
 * byte of it is written. The record decoder lets nothing else in
 * (rckpt_record_decode: levels below L, exactly nprot protected) and the
 * dequantizer checks each level again as it reads: the levels' pass is
 * for a sink, which may write where nothing is checked (a device). */
static int readable(const rckpt_ckdec_t *d, uint32_t t, uint64_t numel, int levels)
{
	const rckpt_mf_tensor_t *mt = &d->mf.t[t];
	const rckpt_seg_t *sg;
	uint64_t off;
	uint32_t k;
	int rc;
	for (k = 0, off = 0; k < mt->nseg; off += mt->seg[k].n, k++) {
		if (off > numel)
			return -EBADMSG;
		if ((rc = seg_of(d, t, k, off, numel, &sg)))
			return rc;
		if (levels && sg->encoding != RCKPT_SEG_LOSSLESS) {
			uint64_t np;
			uint8_t top;
			scan_levels(sg->idx, sg->n, (uint8_t)(sg->nbins + 1), &top, &np);
			if ((sg->n && top >= sg->nbins + 2) || np != sg->nprot)
				return -EBADMSG;
		}
	}
	return off == numel ? 0 : -EBADMSG;
}

int rckpt_ckdec_tensor_check(const rckpt_ckdec_t *d, uint32_t t)
{
	const rckpt_mf_tensor_t *mt;
	uint64_t numel = 1;
	unsigned dd;
	int rc;
	if (t >= d->mf.ntensors)
		return -EINVAL;
	mt = &d->mf.t[t];
	for (dd = 0; dd < mt->ndim; dd++)
		numel *= mt->shape[dd];
	if ((rc = readable(d, t, numel, 0)) || mt->norm == RCKPT_MF_NO_NORM)
		return rc;
	return mt->norm >= d->mf.ntensors ? -EBADMSG : readable(d, mt->norm, numel, 0);
}

/* Elements a host read of another dtype than fp32 stages at a time: the
 * fp32 block stays in a core's cache until it is narrowed. */
#define HOST_STAGE (1u << 16)

int rckpt_ckdec_range_to_host(const rckpt_ckdec_t *d, uint32_t t, uint64_t first, uint64_t count,
			      void *dst)
{
	const unsigned dt = t < d->mf.ntensors ? d->mf.t[t].dtype : 0;
	const size_t dsz = rckpt_dtype_size(dt);
	rcur_t ct = { 0 }, cn = { 0 };
	float *f;
	uint64_t k;
	int rc = 0;
	if (t >= d->mf.ntensors)
		return -EINVAL;
	if (dt == RCKPT_DT_F32) /* straight into place */
		return range_f32(d, t, first, count, dst, &ct, &cn);
	if ((f = malloc(4 * (size_t)(count < HOST_STAGE ? count + 1 : HOST_STAGE))) == NULL)
		return -ENOMEM;
	for (k = 0; k < count && rc == 0; k += HOST_STAGE) {
		const size_t m = count - k < HOST_STAGE ? (size_t)(count - k) : HOST_STAGE;
		if ((rc = range_f32(d, t, first + k, m, f, &ct, &cn)) == 0)
			rckpt_narrow_from_f32((uint8_t *)dst + k * dsz, f, dt, m);
	}
	free(f);
	return rc;
}

unsigned rckpt_ckdec_threads(const rckpt_ckdec_t *d)
{
	return d->threads ? d->threads : rckpt_cpus(4);
}

/* rckpt_ckdec_read_many's pieces of work: elements [first, first + count)
 * of the k-th tensor asked for. A piece is at most a chunk's worth, so
 * that tensors of any sizes spread over the threads. */
#define READ_PIECE ((uint64_t)1 << 22)

typedef struct rpiece {
	unsigned k;
	uint64_t first, count;
} rpiece_t;

typedef struct rmany {
	const rckpt_ckdec_t *d;
	const unsigned *idx;
	void *const *dst;
	const rpiece_t *pc;
	int *rcs; /* each piece's result */
} rmany_t;

static int read_piece(void *arg, unsigned p)
{
	const rmany_t *m = arg;
	const rpiece_t *pc = &m->pc[p];
	const unsigned t = m->idx[pc->k];
	const size_t dsz = rckpt_dtype_size(m->d->mf.t[t].dtype);
	m->rcs[p] = rckpt_ckdec_range_to_host(m->d, t, pc->first, pc->count,
					      (uint8_t *)m->dst[pc->k] + pc->first * dsz);
	return 0; /* every piece runs: each tensor's result is its own */
}

int rckpt_ckdec_read_many(const rckpt_ckdec_t *d, unsigned n, const unsigned *idx, void *const *dst,
			  int *rcs, unsigned threads)
{
	rpiece_t *pc;
	int *prc;
	rmany_t m;
	size_t np = 0, p;
	unsigned k;

	/* every tensor checked before any is written: one that cannot be
	 * read is not begun (dst may be the trainer's live tensors) */
	for (k = 0; k < n; k++) {
		if (rcs[k] == 0)
			rcs[k] = rckpt_ckdec_tensor_check(d, idx[k]);
		if (rcs[k] == 0)
			np += (size_t)((rckpt_mf_numel(&d->mf.t[idx[k]]) + READ_PIECE - 1) / READ_PIECE);
	}
	pc = malloc((np ? np : 1) * sizeof(*pc));
	prc = calloc(np ? np : 1, sizeof(*prc));
	if (pc == NULL || prc == NULL) {
		free(pc);
		free(prc);
		return -ENOMEM;
	}
	for (k = 0, p = 0; k < n; k++) {
		const uint64_t numel = rcs[k] ? 0 : rckpt_mf_numel(&d->mf.t[idx[k]]);
		uint64_t f;
		for (f = 0; f < numel; f += READ_PIECE, p++)
			pc[p] = (rpiece_t){ k, f, numel - f < READ_PIECE ? numel - f : READ_PIECE };
	}
	m = (rmany_t){ d, idx, dst, pc, prc };
	(void)rckpt_par_for((unsigned)np, threads ? threads : rckpt_cpus(8), read_piece, &m);
	for (p = 0; p < np; p++)
		if (prc[p] && rcs[pc[p].k] == 0)
			rcs[pc[p].k] = prc[p];
	free(pc);
	free(prc);
	return 0;
}

int rckpt_ckdec_tensor_to(const rckpt_ckdec_t *d, uint32_t t, const rckpt_ckdec_sink_t *s)
{
	const rckpt_mf_tensor_t *mt;
	const rckpt_seg_t *sg;
	uint64_t off, numel = 1;
	size_t dsz;
	uint32_t k;
	unsigned dd;
	int rc;

	if (t >= d->mf.ntensors)
		return -EINVAL;
	mt = &d->mf.t[t];
	dsz = rckpt_dtype_size(mt->dtype);
	for (dd = 0; dd < mt->ndim; dd++)
		numel *= mt->shape[dd];
	/* every segment first, and a NORM tensor's partner: a tensor that
	 * cannot be read is not begun (the sink may be the caller's live one) */
	if ((rc = readable(d, t, numel, 1)))
		return rc;
	if (mt->norm != RCKPT_MF_NO_NORM) { /* each value needs its second moment's */
		if (mt->norm >= d->mf.ntensors || (rc = readable(d, mt->norm, numel, 1)))
			return rc ? rc : -EBADMSG;
		return staged(d, t, 0, numel, s);
	}
	for (k = 0, off = 0; k < mt->nseg; off += mt->seg[k].n, k++) {
		if ((rc = seg_of(d, t, k, off, numel, &sg)))
			return rc; /* checked above */
		if (sg->encoding == RCKPT_SEG_LOSSLESS && sg->dtype == mt->dtype) {
			rc = s->put(s->arg, off * dsz, sg->raw, (size_t)sg->n * dsz);
		} else if (sg->encoding == RCKPT_SEG_LOSSLESS || sg->transform != RCKPT_XF_NONE) {
			rc = staged(d, t, off, sg->n, s);
		} else {
			rckpt_qparams_t q; /* (the whole segment: its protected values, which
					      readable counted) */
			memset(&q, 0, sizeof(q));
			q.nbins = sg->nbins;
			memcpy(q.centroids, sg->centroids, sizeof(float) * sg->nbins);
			rc = s->dequantize(s->arg, off * dsz, mt->dtype, sg->idx, sg->n, &q, sg->prot, sg->nprot);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int host_put(void *arg, uint64_t off, const void *src, size_t bytes)
{
	memcpy((uint8_t *)arg + off, src, bytes);
	return 0;
}

static int host_dequantize(void *arg, uint64_t off, unsigned dtype, const uint8_t *idx, uint64_t n,
			   const rckpt_qparams_t *q, const uint16_t *prot, uint64_t np)
{
	const size_t dsz = rckpt_dtype_size(dtype);
	const size_t blk = n < HOST_STAGE ? (size_t)n : HOST_STAGE;
	float *f;
	uint64_t k;
	size_t used = 0;
	int rc = 0;
	if (dtype == RCKPT_DT_F32 && ((uintptr_t)arg + off) % sizeof(float) == 0) { /* in place, one pass */
		rc = rckpt_dequantize_xf((float *)((uint8_t *)arg + off), idx, (size_t)n, q, prot, (size_t)np,
					 RCKPT_XF_NONE, &used);
		return rc ? rc : used == np ? 0 : -EBADMSG;
	}
	/* another dtype: a block at a time through fp32 that stays in cache */
	if ((f = malloc(4 * (blk ? blk : 1))) == NULL)
		return -ENOMEM;
	for (k = 0; k < n && rc == 0; k += blk) {
		const size_t m = n - k < blk ? (size_t)(n - k) : blk;
		if ((rc = rckpt_dequantize_xf(f, idx + k, m, q, prot, (size_t)np, RCKPT_XF_NONE, &used)) == 0)
			rckpt_narrow_from_f32((uint8_t *)arg + off + k * dsz, f, dtype, m);
		prot += used;
		np -= used;
	}
	free(f);
	return rc ? rc : np == 0 ? 0 : -EBADMSG;
}

void rckpt_ckdec_host_sink(rckpt_ckdec_sink_t *s, void *dst)
{
	s->put = host_put;
	s->dequantize = host_dequantize;
	s->arg = dst;
}
