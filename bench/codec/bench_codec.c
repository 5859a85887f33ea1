/*
 * bench_codec.c — compression of a sequence of real checkpoints by every
 * method, side by side in one run, at one quality threshold.
 *
 * usage: bench_codec [--eps E] [--opt-eps E] [--methods a,b,...] [--limit N] [--verbose] DIR
 *
 * DIR holds checkpoints X.safetensors, in file-name order; a sibling
 * X.grads.safetensors, if present, holds the gradient EMA of the same
 * tensors (sensitivity); a sibling X.optim.safetensors, an optimizer's
 * state (exp_avg.P, exp_avg_sq.P, momentum_buffer.P: Adam's moments and
 * SGD's momentum of P), which every method saves as the optimizer's
 * (rckpt_ckenc.h), its ratio reported apart. Every method encodes the whole sequence; decoding
 * rebuilds each step from its chain and dequantizes it to fp32. Reported:
 * the compression ratio against the fp32 bytes per checkpoint and overall,
 * the chosen configuration, the quality loss (sensitivity-weighted relative
 * error), and encode and decode throughput in MB/s of fp32 on one core.
 * One "csv:" line per checkpoint and method, then a table and the command.
 */
#define _GNU_SOURCE /* getopt_long */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <zstd.h>

#include "rckpt.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"
#include "rckpt_stepfile.h"
#include "rckpt_ckenc.h"
#include "rckpt_codec.h"
#include "rckpt_safetensors.h"
#include "rckpt_planes.h"
#include "rckpt_clock.h" /* rckpt_now_s */

typedef struct method {
	const char *name;
	const char *what;
	int kind; /* 0: ckenc, 1: zstd on raw bytes, 2: the exact tier
		     (mode: the dtype; base_every 1: each step alone) */
	int zstd_level;
	unsigned mode, quantizer, stages, policy, base_every;
	int use_grads;
	unsigned opt_abl; /* the optimizer's state: 0 as rckpt stores it, 1 first
			     moments plain (no NORM), 2 second moments linear
			     (no LOG2) */
} method_t;

/* In a method's quantizer: the allocation gives every tensor that
 * quantizer too (rckpt_ckenc_opts_t.alloc_one_quantizer). */
#define UNIFORM_ONLY 0x100u
/* In a method's stages: no predicted blobs (rckpt_istream_opts_t.predict,
 * on for every method of the search but this one). */
#define NO_PRED 0x100u

static const method_t methods[] = {
	{ "rckpt", "k-means + prune/protect + search, rearranged delta, RLE + entropy or context-coded", 0, 0,
	  RCKPT_CKENC_SEARCH, RCKPT_QUANTIZER_KMEANS, RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX, RCKPT_EST_TRY_ALL, 0,
	  1, 0 },
	{ "abl-huffman-delta", "ablation: delta + Huffman only", 0, 0, RCKPT_CKENC_SEARCH,
	  RCKPT_QUANTIZER_KMEANS, 0, RCKPT_EST_TRY_HUFF, 0, 1, 0 },
	{ "abl-rle-huffman", "ablation: delta + RLE + Huffman", 0, 0, RCKPT_CKENC_SEARCH,
	  RCKPT_QUANTIZER_KMEANS, RCKPT_IS_RLE, RCKPT_EST_TRY_HUFF, 0, 1, 0 },
	{ "abl-no-ctx", "ablation: no context coding (rearranged delta, RLE, entropy)", 0, 0,
	  RCKPT_CKENC_SEARCH, RCKPT_QUANTIZER_KMEANS, RCKPT_IS_REARRANGED | RCKPT_IS_RLE,
	  RCKPT_EST_TRY_ALL, 0, 1, 0 },
	{ "abl-no-pred", "ablation: lossless and protected values not predicted from the parent's", 0, 0,
	  RCKPT_CKENC_SEARCH, RCKPT_QUANTIZER_KMEANS, RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX | NO_PRED,
	  RCKPT_EST_TRY_ALL, 0, 1, 0 },
	{ "abl-no-rearrange", "ablation: no rearrangement", 0, 0, RCKPT_CKENC_SEARCH,
	  RCKPT_QUANTIZER_KMEANS, RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 0, 1, 0 },
	{ "abl-uniform-bins", "ablation: uniform bins in the search (the allocation may still pick k-means)", 0, 0,
	  RCKPT_CKENC_SEARCH, RCKPT_QUANTIZER_UNIFORM, RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
	  RCKPT_EST_TRY_ALL, 0, 1, 0 },
	{ "abl-uniform-only", "ablation: uniform bins in the search and in every tensor's allocation", 0,
	  0, RCKPT_CKENC_SEARCH, RCKPT_QUANTIZER_UNIFORM | UNIFORM_ONLY, RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
	  RCKPT_EST_TRY_ALL, 0, 1, 0 },
	{ "abl-magnitude-only", "ablation: no gradients (magnitude ranking only)", 0, 0,
	  RCKPT_CKENC_SEARCH, RCKPT_QUANTIZER_KMEANS, RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
	  RCKPT_EST_TRY_ALL, 0, 0, 0 },
	{ "abl-opt-plain-m", "ablation: Adam's first moments as they are, not NORM", 0, 0,
	  RCKPT_CKENC_SEARCH, RCKPT_QUANTIZER_KMEANS, RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
	  RCKPT_EST_TRY_ALL, 0, 1, 1 },
	{ "abl-opt-linear-v", "ablation: Adam's second moments as they are, not LOG2", 0, 0,
	  RCKPT_CKENC_SEARCH, RCKPT_QUANTIZER_KMEANS, RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
	  RCKPT_EST_TRY_ALL, 0, 1, 2 },
	{ "qd", "baseline: uniform quantization, bit-width search, delta + Huffman", 0, 0,
	  RCKPT_CKENC_BITWIDTH, RCKPT_QUANTIZER_UNIFORM, 0, RCKPT_EST_TRY_HUFF, 0, 0, 0 },
	{ "checknrun", "baseline: adaptive uniform quantization per checkpoint, no delta", 0, 0,
	  RCKPT_CKENC_BITWIDTH, RCKPT_QUANTIZER_UNIFORM, 0, RCKPT_EST_TRY_ALL, 1, 0, 0 },
	{ "exact", "lossless: the exact tier (byte planes), a run: each step on the last", 2, 0,
	  RCKPT_DT_F32, 0, 0, 0, 0, 0, 0 },
	{ "exact-lone", "lossless: the exact tier, each step alone", 2, 0, RCKPT_DT_F32, 0, 0, 0, 1, 0, 0 },
	{ "exact-bf16", "lossless: the exact tier on the tensors rounded to bf16, a run", 2, 0,
	  RCKPT_DT_BF16, 0, 0, 0, 0, 0, 0 },
	{ "exact-bf16-lone", "lossless: the exact tier on bf16, each step alone", 2, 0, RCKPT_DT_BF16, 0,
	  0, 0, 1, 0, 0 },
	{ "zstd-1-bf16", "lossless: zstd -1 on the tensors rounded to bf16", 1, 1, RCKPT_DT_BF16, 0, 0, 0,
	  0, 0, 0 },
	{ "zstd-3-bf16", "lossless: zstd -3 on the tensors rounded to bf16", 1, 3, RCKPT_DT_BF16, 0, 0, 0,
	  0, 0, 0 },
	{ "zstd-1", "lossless: zstd -1 on the raw tensors", 1, 1, 0, 0, 0, 0, 0, 0, 0 },
	{ "zstd-3", "lossless: zstd -3 on the raw tensors", 1, 3, 0, 0, 0, 0, 0, 0, 0 },
};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

typedef struct ckpt {
	char *path;
	rckpt_st_t params, grads, optim;
	int have_grads, have_optim;
	rckpt_tset_t set; /* what is saved: the model's tensors, and the
			     optimizer's state when there is a sibling */
	size_t raw;       /* fp32 bytes */
	size_t opt_raw;   /* of them the optimizer's */
} ckpt_t;

/* X.optim.safetensors beside X.safetensors (bench/data/make_transformer.py's),
 * its tensors' roles by rckpt_file_optim_role: c->set holds both. */
static int join_optim(ckpt_t *c)
{
	const rckpt_tset_t *m = &c->params.set, *o = &c->optim.set;
	unsigned k, n = 0;
	c->set.t = calloc(m->ntensors + o->ntensors + 1, sizeof(*c->set.t));
	if (c->set.t == NULL)
		return -ENOMEM;
	for (k = 0; k < m->ntensors; k++)
		c->set.t[n++] = m->t[k];
	for (k = 0; k < o->ntensors; k++) {
		rckpt_ctensor_t t = o->t[k];
		rckpt_tensor_role_t r;
		rckpt_file_optim_role(t.name, &r);
		rckpt_ctensor_set_role(&t, &r);
		c->opt_raw += (size_t)t.n * 4;
		c->set.t[n++] = t;
	}
	c->set.ntensors = n;
	return rckpt_tset_sort(&c->set);
}

static void free_ckpts(ckpt_t *c, unsigned n)
{
	unsigned i;
	for (i = 0; c && i < n; i++) {
		if (c[i].have_optim) { /* set.t was joined; else it is params' */
			free(c[i].set.t);
			rckpt_st_free(&c[i].optim);
		}
		if (c[i].have_grads)
			rckpt_st_free(&c[i].grads);
		rckpt_st_free(&c[i].params);
		free(c[i].path);
	}
	free(c);
}

static int load_dir(const char *dir, ckpt_t **out, unsigned *n, unsigned limit)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL, err[512];
	unsigned cnt = 0, cap = 0, i;
	ckpt_t *c;

	if (d == NULL) {
		fprintf(stderr, "bench_codec: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		/* siblings: gradients, the old signed gradient EMA, optimizer state */
		if (!ends_with(de->d_name, ".safetensors") || ends_with(de->d_name, ".grads.safetensors") ||
		    ends_with(de->d_name, ".gmean.safetensors") || ends_with(de->d_name, ".optim.safetensors"))
			continue;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 16;
			names = realloc(names, sizeof(char *) * cap);
		}
		names[cnt++] = strdup(de->d_name);
	}
	closedir(d);
	if (cnt == 0) {
		fprintf(stderr, "bench_codec: no *.safetensors in %s\n", dir);
		return -1;
	}
	qsort(names, cnt, sizeof(char *), by_str);
	if (limit && cnt > limit)
		cnt = limit;
	c = calloc(cnt, sizeof(*c));
	for (i = 0; i < cnt; i++) {
		char path[4096], gpath[4096];
		unsigned k;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		snprintf(gpath, sizeof(gpath), "%.*s.grads.safetensors", (int)(strlen(path) - 12), path);
		if (rckpt_st_read(&c[i].params, path, err, sizeof(err))) {
			fprintf(stderr, "bench_codec: %s\n", err);
			return -1;
		}
		c[i].have_grads = rckpt_st_read(&c[i].grads, gpath, err, sizeof(err)) == 0;
		snprintf(gpath, sizeof(gpath), "%.*s.optim.safetensors", (int)(strlen(path) - 12), path);
		c[i].have_optim = rckpt_st_read(&c[i].optim, gpath, err, sizeof(err)) == 0;
		c[i].set = c[i].params.set;
		if (c[i].have_optim && join_optim(&c[i])) {
			fprintf(stderr, "bench_codec: %s: cannot join its optimizer's state\n", path);
			return -1;
		}
		c[i].path = strdup(names[i]);
		for (k = 0; k < c[i].set.ntensors; k++)
			c[i].raw += (size_t)c[i].set.t[k].n * 4;
	}
	for (i = 0; i < cap && names && i < cnt; i++)
		free(names[i]);
	free(names);
	*out = c;
	*n = cnt;
	return 0;
}

/* Raw tensor bytes in fp32 (what "ratio" is measured against). */
static size_t raw_f32(const ckpt_t *c, float *buf)
{
	size_t off = 0;
	unsigned k;
	for (k = 0; k < c->set.ntensors; k++) {
		const rckpt_ctensor_t *t = &c->set.t[k];
		rckpt_widen_to_f32(buf + off, t->data, t->dtype, t->n);
		off += t->n;
	}
	return off * 4;
}

typedef struct result {
	size_t raw, enc;
	double t_enc, t_dec, q_sum, q_max;
	size_t raw_steady;     /* from the third checkpoint on: past the full searches */
	double t_enc_steady;
	double t_prep, t_search, t_quant, t_code; /* encode, split by stage */
	double t_dstep, t_ddigest, t_dvalues;     /* decode: records and digests, digests alone, values */
	double t_penc, t_pdec;  /* the exact tier: its codec alone (PLANES payloads, no records) */
	unsigned n, accepted;
	double first_ratio, last_ratio;
	size_t opt_raw, opt_enc; /* the optimizer's state, when there is one */
	double oq_max;           /* its worst update error, as the encoder estimated it */
	double ou_max;           /* ... as measured on the decoded state */
	unsigned opaired;        /* first moments measured with their second: none,
				    and there is no measurement to print */
	double onorm_worst;      /* the worst per-tensor ratio of the decoded update's
				    norm to the original's (farthest from 1) */
} result_t;

/* The update error of a decoded step, measured: per first moment m of P
 * with its second v (their param P, rckpt_file_optim_role's pairing),
 * u = m / (sqrt(v) + eps) from the original and from the decoded values
 * (dec[k]: tensor k of the set, fp32); sum (u'-u)^2 / sum u^2 into *err,
 * and the per-tensor norm ratio farthest from 1 into *worst. */
static void measure_update(const rckpt_tset_t *set, float *const *dec, double *err, double *worst,
			   unsigned *paired)
{
	double num = 0, den = 0;
	unsigned a, b;
	for (a = 0; a < set->ntensors; a++) {
		const rckpt_ctensor_t *m = &set->t[a];
		if (m->kind1 != RCKPT_LK_MOMENT1 + 1 || m->param == NULL)
			continue;
		for (b = 0; b < set->ntensors; b++) {
			const rckpt_ctensor_t *v = &set->t[b];
			if (v->kind1 == RCKPT_LK_MOMENT2 + 1 && v->param && strcmp(v->param, m->param) == 0 &&
			    v->n == m->n)
				break;
		}
		if (b == set->ntensors)
			continue;
		const rckpt_ctensor_t *v = &set->t[b];
		const double eps = v->eps > 0 ? v->eps : 1e-8;
		++*paired;
		float *mo = malloc(4 * (size_t)(m->n ? m->n : 1)), *vo = malloc(4 * (size_t)(m->n ? m->n : 1));
		double tn = 0, t0 = 0, t1 = 0;
		if (mo && vo) {
			rckpt_widen_to_f32(mo, m->data, m->dtype, m->n);
			rckpt_widen_to_f32(vo, v->data, v->dtype, v->n);
			for (uint64_t k = 0; k < m->n; k++) {
				const double u = mo[k] / (sqrt(vo[k]) + eps);
				const double u2 = dec[a][k] / (sqrt(dec[b][k] > 0 ? dec[b][k] : 0) + eps);
				tn += (u2 - u) * (u2 - u);
				t0 += u * u;
				t1 += u2 * u2;
			}
			num += tn;
			den += t0;
			if (t0 > 0) {
				const double r = sqrt(t1 / t0);
				if (fabs(log(r > 0 ? r : 1e-30)) > fabs(log(*worst)))
					*worst = r;
			}
		}
		free(mo);
		free(vo);
	}
	if (den > 0 && num / den > *err)
		*err = num / den;
}

static int run_zstd(const method_t *m, ckpt_t *c, unsigned n, result_t *r, float *buf)
{
	unsigned i;
	for (i = 0; i < n; i++) {
		size_t raw = raw_f32(&c[i], buf), cap, z, got;
		if (m->mode == RCKPT_DT_BF16) { /* in place: each bf16 is read before written */
			rckpt_narrow_from_f32(buf, buf, RCKPT_DT_BF16, raw / 4);
			raw /= 2;
		}
		cap = ZSTD_compressBound(raw);
		void *dst = malloc(cap), *back = malloc(raw ? raw : 1);
		double t0 = rckpt_now_s();
		z = ZSTD_compress(dst, cap, buf, raw, m->zstd_level);
		r->t_enc += rckpt_now_s() - t0;
		if (i >= 2) {
			r->t_enc_steady += rckpt_now_s() - t0;
			r->raw_steady += raw;
		}
		t0 = rckpt_now_s();
		got = ZSTD_decompress(back, raw, dst, z);
		r->t_dec += rckpt_now_s() - t0;
		if (ZSTD_isError(z) || got != raw || memcmp(back, buf, raw)) {
			fprintf(stderr, "bench_codec: zstd round trip failed\n");
			return -1;
		}
		r->raw += raw;
		r->enc += z;
		if (i == 0)
			r->first_ratio = (double)raw / (double)z;
		r->last_ratio = (double)raw / (double)z;
		r->n++;
		r->accepted++;
		printf("csv:%s,%s,%zu,%zu,%.3f,0,1,lossless,%.1f\n", m->name, c[i].path, raw, z,
		       (double)raw / (double)z, raw / 1e6 / (r->t_enc / (i + 1)));
		free(dst);
		free(back);
	}
	return 0;
}

/* Step i of c in dtype (its tensors widened or rounded; data pointers into
 * bufs[k], owned by the caller) into x. */
static int exact_view(rckpt_tset_t *x, uint8_t **bufs, const ckpt_t *c, unsigned dtype, size_t *raw)
{
	unsigned k;
	x->ntensors = c->set.ntensors;
	x->t = calloc(x->ntensors + 1, sizeof(*x->t));
	if (x->t == NULL)
		return -ENOMEM;
	*raw = 0;
	for (k = 0; k < x->ntensors; k++) {
		const rckpt_ctensor_t *t = &c->set.t[k];
		float *f = malloc(4 * (size_t)(t->n ? t->n : 1));
		x->t[k] = *t;
		bufs[k] = (uint8_t *)f;
		if (f == NULL)
			return -ENOMEM;
		rckpt_widen_to_f32(f, t->data, t->dtype, t->n);
		if (dtype != RCKPT_DT_F32)
			rckpt_narrow_from_f32(f, f, dtype, t->n);
		x->t[k].dtype = dtype;
		x->t[k].data = bufs[k];
		*raw += (size_t)t->n * rckpt_dtype_size(dtype);
	}
	return 0;
}

/* The exact tier's codec alone: each tensor of x, in pieces of at most
 * 4 Mi elements (a chunk), as PLANES payloads (predicted by the same
 * tensor of prev when given and it is smaller) and back, timed apart from
 * the records' framing and digests; the bits checked. */
static int planes_alone(result_t *r, const rckpt_tset_t *x, const rckpt_tset_t *prev)
{
	const uint64_t piece = (uint64_t)1 << 22;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	uint8_t *back = NULL;
	unsigned k;
	int rc = 0;

	for (k = 0; k < x->ntensors && rc == 0; k++) {
		const rckpt_ctensor_t *t = &x->t[k];
		const rckpt_ctensor_t *p = prev ? rckpt_tset_find(prev, t->name) : NULL;
		const unsigned w = (unsigned)rckpt_dtype_size(t->dtype);
		uint64_t at;
		if (p && (p->n != t->n || p->dtype != t->dtype))
			p = NULL;
		for (at = 0; at < t->n && rc == 0; at += piece) {
			const size_t n = (size_t)((t->n - at < piece ? t->n - at : piece) * w);
			int pred = 0;
			double t0;
			uint8_t *nb = realloc(back, n);
			if (nb == NULL) {
				rc = -ENOMEM;
				break;
			}
			back = nb;
			b.len = 0;
			t0 = rckpt_now_s();
			rc = rckpt_planes_encode(&b, &pred, t->data + at * w, p ? p->data + at * w : NULL, n, w);
			r->t_penc += rckpt_now_s() - t0;
			t0 = rckpt_now_s();
			if (rc == 0)
				rc = rckpt_planes_decode(back, pred ? p->data + at * w : NULL, n, w, b.p, b.len);
			r->t_pdec += rckpt_now_s() - t0;
			if (rc == 0 && memcmp(back, t->data + at * w, n))
				rc = -EILSEQ;
		}
	}
	free(back);
	rckpt_buf_free(&b);
	return rc;
}

/* The exact tier (rckpt_ckenc_step_exact: the records an exact save
 * stores) over the run in m->mode's dtype, each step decoded again and
 * checked bit for bit. */
static int run_exact(const method_t *m, ckpt_t *c, unsigned n, result_t *r)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e = NULL;
	rckpt_ckdec_t dec;
	rckpt_tset_t prev = { 0 };
	unsigned i, k;
	int rc;

	rckpt_ckenc_opts_default(&o);
	if ((rc = rckpt_ckenc_create(&e, &o)))
		return rc;
	memset(&dec, 0, sizeof(dec));
	for (i = 0; i < n && rc == 0; i++) {
		rckpt_tset_t x = { 0 };
		uint8_t **bufs = calloc(c[i].set.ntensors + 1, sizeof(*bufs));
		rckpt_ckenc_out_t out = { RCKPT_BUF_INIT, 0, NULL };
		rckpt_ckenc_stats_t st;
		size_t raw = 0, enc = 0;
		double t0;

		rc = bufs ? exact_view(&x, bufs, &c[i], m->mode, &raw) : -ENOMEM;
		if (rc == 0)
			rc = planes_alone(r, &x, m->base_every || i == 0 ? NULL : &prev);
		if (rc == 0 && m->base_every)
			rckpt_ckenc_restart(e);
		t0 = rckpt_now_s();
		if (rc == 0)
			rc = rckpt_ckenc_step_whole(e, &out, &st, &x, (uint64_t)i + 1);
		r->t_enc += rckpt_now_s() - t0;
		if (i >= 2) {
			r->t_enc_steady += rckpt_now_s() - t0;
			r->raw_steady += raw;
		}
		if (rc == 0) { /* decode, then every tensor's bits */
			const uint8_t **recs = calloc(out.nchunks + 1, sizeof(*recs));
			size_t *lens = calloc(out.nchunks + 1, sizeof(*lens));
			uint8_t *back = malloc(4 * (c[i].raw / 4 + 1));
			rc = recs && lens && back ? 0 : -ENOMEM;
			for (k = 0; rc == 0 && k < out.nchunks; k++) {
				recs[k] = out.records[k].p;
				lens[k] = out.records[k].len;
				enc += lens[k];
			}
			enc += out.manifest.len;
			t0 = rckpt_now_s();
			if (rc == 0)
				rc = rckpt_ckdec_step(&dec, out.manifest.p, out.manifest.len, recs, lens);
			for (k = 0; rc == 0 && k < dec.mf.ntensors; k++) {
				const rckpt_ctensor_t *t = rckpt_tset_find(&x, dec.mf.t[k].name);
				rckpt_ckdec_sink_t hs;
				rckpt_ckdec_host_sink(&hs, back);
				rc = t ? rckpt_ckdec_tensor_to(&dec, k, &hs) : -EBADMSG;
				if (rc == 0 && memcmp(back, t->data, (size_t)t->n * rckpt_dtype_size(t->dtype)))
					rc = -EILSEQ;
			}
			r->t_dec += rckpt_now_s() - t0;
			free(recs);
			free(lens);
			free(back);
		}
		for (k = 0; prev.t && k < prev.ntensors; k++)
			free((void *)prev.t[k].data);
		free(prev.t);
		prev = x; /* the next step's prediction, in the codec-alone pass */
		free(bufs);
		rckpt_ckenc_out_free(&out);
		if (rc) {
			fprintf(stderr, "bench_codec: %s on %s: %s\n", m->name, c[i].path,
				rc == -EILSEQ ? "the decoded bits differ" : strerror(-rc));
			break;
		}
		r->raw += raw;
		r->enc += enc;
		if (i == 0)
			r->first_ratio = (double)raw / (double)enc;
		r->last_ratio = (double)raw / (double)enc;
		r->n++;
		r->accepted++;
		printf("csv:%s,%s,%zu,%zu,%.3f,0,1,%slossless,%.1f\n", m->name, c[i].path, raw, enc,
		       (double)raw / (double)enc, st.is_base ? "base " : "", raw / 1e6 / (r->t_enc / (i + 1)));
	}
	for (k = 0; prev.t && k < prev.ntensors; k++)
		free((void *)prev.t[k].data);
	free(prev.t);
	rckpt_ckdec_free(&dec);
	rckpt_ckenc_destroy(e);
	return rc;
}

/* DIR/METHOD, made if missing. */
static int method_dir(const char *dir, const char *method)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, method);
	if (mkdir(dir, 0777) && errno != EEXIST)
		return -errno;
	if (mkdir(path, 0777) && errno != EEXIST)
		return -errno;
	return 0;
}

/* The encoded step as DIR/METHOD/STEM.rckpt (STEM: the checkpoint's file
 * name without .safetensors), a step file rckpt codec and
 * bench/codec/record_bytes.py read. */
static int write_encoded(const char *dir, const char *method, const ckpt_t *c,
			 const rckpt_ckenc_out_t *out)
{
	const char *base = strrchr(c->path, '/');
	char path[4096];
	size_t k;
	int rc = method_dir(dir, method);

	snprintf(path, sizeof(path), "%s/%s/%s", dir, method, base ? base + 1 : c->path);
	k = strlen(path);
	if (k > 12 && strcmp(path + k - 12, ".safetensors") == 0)
		path[k - 12] = '\0';
	strncat(path, ".rckpt", sizeof(path) - strlen(path) - 1);
	if (rc == 0)
		rc = rckpt_stepfile_write(path, out);
	if (rc)
		fprintf(stderr, "bench_codec: writing %s: %s\n", path, strerror(-rc));
	return rc;
}

/* The decoded step as DIR/METHOD/NAME (NAME: the checkpoint's file name),
 * fp32, for judging it by the model's real loss. */
static int write_decoded(const char *dir, const char *method, const ckpt_t *c, const rckpt_ckdec_t *dec)
{
	const char *base = strrchr(c->path, '/');
	char path[4096];
	rckpt_ctensor_t *t = calloc(dec->mf.ntensors + 1, sizeof(*t));
	uint32_t k;
	int rc = t ? 0 : -ENOMEM;

	if (rc == 0)
		rc = method_dir(dir, method);
	snprintf(path, sizeof(path), "%s/%s/%s", dir, method, base ? base + 1 : c->path);
	for (k = 0; rc == 0 && k < dec->mf.ntensors; k++) {
		const rckpt_mf_tensor_t *mt = &dec->mf.t[k];
		float *f;
		unsigned dd;
		t[k].name = mt->name;
		t[k].dtype = RCKPT_DT_F32;
		t[k].ndim = mt->ndim;
		t[k].n = 1;
		for (dd = 0; dd < mt->ndim; dd++) {
			t[k].shape[dd] = mt->shape[dd];
			t[k].n *= mt->shape[dd];
		}
		f = malloc(4 * (size_t)(t[k].n ? t[k].n : 1));
		t[k].data = (const uint8_t *)f;
		rc = f ? rckpt_ckdec_tensor_f32(dec, k, f) : -ENOMEM;
	}
	if (rc == 0)
		rc = rckpt_st_write(path, t, dec->mf.ntensors);
	for (k = 0; t && k < dec->mf.ntensors; k++)
		free((void *)t[k].data);
	free(t);
	if (rc)
		fprintf(stderr, "bench_codec: writing %s: %s\n", path, strerror(-rc));
	return rc;
}

static int run_ckenc(const method_t *m, ckpt_t *c, unsigned n, double eps, double opt_eps, int verbose,
		     result_t *r, const char *decode_dir, const char *encode_dir)
{
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e;
	rckpt_ckenc_out_t *rec = calloc(n, sizeof(rckpt_ckenc_out_t));
	rckpt_ckdec_t dec;
	char msg[256], cfg[160];
	unsigned i;
	int rc;

	rckpt_ckenc_opts_default(&o);
	o.mode = m->mode;
	o.eps = eps;
	o.quantizer = m->quantizer & ~UNIFORM_ONLY;
	o.alloc_one_quantizer = (m->quantizer & UNIFORM_ONLY) != 0;
	o.use_grads = m->use_grads;
	o.is.stages = m->stages & ~NO_PRED;
	o.is.predict = m->mode == RCKPT_CKENC_SEARCH && !(m->stages & NO_PRED);
	o.is.est_policy = m->policy;
	o.base_every = m->base_every;
	o.opt_eps = opt_eps;
	o.plain_moments = m->opt_abl == 1;
	o.moment2_linear = m->opt_abl == 2;
	r->onorm_worst = 1;
	if ((rc = rckpt_ckenc_create(&e, &o)))
		return rc;
	for (i = 0; i < n; i++) {
		rckpt_ckenc_stats_t st;
		double t0 = rckpt_now_s();
		rc = rckpt_ckenc_step(e, &rec[i], &st, &c[i].set, c[i].have_grads ? &c[i].grads.set : NULL,
				      (uint64_t)i + 1, msg, sizeof(msg));
		r->t_enc += rckpt_now_s() - t0;
		if (i >= 2) {
			r->t_enc_steady += rckpt_now_s() - t0;
			r->raw_steady += st.raw_bytes;
		}
		if (rc) {
			fprintf(stderr, "bench_codec: %s on %s: %s (%s)\n", m->name, c[i].path, strerror(-rc), msg);
			return rc;
		}
		if (encode_dir && (rc = write_encoded(encode_dir, m->name, &c[i], &rec[i])))
			return rc;
		r->raw += st.raw_bytes;
		r->enc += st.enc_bytes;
		r->opt_raw += st.opt_raw_bytes;
		r->opt_enc += st.opt_enc_bytes;
		if (st.opt_quality > r->oq_max)
			r->oq_max = st.opt_quality;
		r->t_prep += st.t_prepare;
		r->t_search += st.t_search;
		r->t_quant += st.t_quantize;
		r->t_code += st.t_encode;
		r->q_sum += st.quality;
		if (st.quality > r->q_max)
			r->q_max = st.quality;
		r->accepted += (unsigned)st.accepted;
		r->n++;
		if (i == 0)
			r->first_ratio = (double)st.raw_bytes / (double)st.enc_bytes;
		r->last_ratio = (double)st.raw_bytes / (double)st.enc_bytes;
		rckpt_qconfig_format(cfg, sizeof(cfg), &st.config);
		if (verbose) {
			char ocfg[256];
			rckpt_qconfig_format(ocfg, sizeof(ocfg), &st.opt_config);
			fprintf(stderr, "%s %s: %u configurations; prepare %.2f ms, search %.2f ms, quantize %.2f ms, record %.2f ms\n",
				m->name, c[i].path, st.configs_tried, st.t_prepare * 1e3, st.t_search * 1e3,
				st.t_quantize * 1e3, st.t_encode * 1e3);
			if (st.opt_raw_bytes)
				fprintf(stderr, "%s %s: optimizer %llu bytes, update error %.4f, %s\n", m->name,
					c[i].path, (unsigned long long)st.opt_enc_bytes, st.opt_quality, ocfg);
		}
		printf("csv:%s,%s,%zu,%zu,%.3f,%.6f,%d,%s%s,%.1f\n", m->name, c[i].path, st.raw_bytes,
		       st.enc_bytes, (double)st.raw_bytes / (double)st.enc_bytes, st.quality, st.accepted,
		       st.is_base ? "base " : "", cfg,
		       st.raw_bytes / 1e6 / (st.t_prepare + st.t_search + st.t_quantize + st.t_encode));
	}
	rckpt_ckenc_destroy(e);

	/* Decode: fold each chunk's chain (digests checked), dequantize every
	 * tensor to fp32. */
	memset(&dec, 0, sizeof(dec));
	for (i = 0; i < n; i++) {
		const uint8_t **recs = malloc(sizeof(*recs) * (rec[i].nchunks + 1));
		size_t *lens = malloc(sizeof(*lens) * (rec[i].nchunks + 1));
		double t0 = rckpt_now_s(), t1;
		float **vals = calloc(c[i].set.ntensors + 1, sizeof(*vals));
		uint32_t k;
		if (vals == NULL)
			return -ENOMEM;
		for (k = 0; k < rec[i].nchunks; k++) {
			recs[k] = rec[i].records[k].p;
			lens[k] = rec[i].records[k].len;
		}
		rc = rckpt_ckdec_step(&dec, rec[i].manifest.p, rec[i].manifest.len, recs, lens);
		r->t_dstep += rckpt_now_s() - t0;
		t1 = rckpt_now_s();
		for (k = 0; rc == 0 && k < dec.mf.ntensors; k++) {
			const rckpt_mf_tensor_t *t = &dec.mf.t[k];
			uint64_t elems = 1;
			unsigned dd;
			float *out;
			for (dd = 0; dd < t->ndim; dd++)
				elems *= t->shape[dd];
			out = malloc(4 * (size_t)(elems ? elems : 1));
			rc = out ? rckpt_ckdec_tensor_f32(&dec, k, out) : -ENOMEM;
			const rckpt_ctensor_t *ct = rckpt_tset_find(&c[i].set, t->name);
			if (ct && ct->n == elems && vals[ct - c[i].set.t] == NULL)
				vals[ct - c[i].set.t] = out;
			else
				free(out);
		}
		r->t_dec += rckpt_now_s() - t0;
		r->t_dvalues += rckpt_now_s() - t1;
		/* the digests' share of the step (each chunk's SHA-256 again, outside
		 * the decode's time) */
		t1 = rckpt_now_s();
		for (k = 0; rc == 0 && k < dec.mf.nchunks; k++) {
			uint8_t h[32];
			rc = rckpt_record_digest(h, &dec.chunk[k]);
		}
		r->t_ddigest += rckpt_now_s() - t1;
		if (rc == 0 && c[i].have_optim) {
			for (k = 0; k < c[i].set.ntensors && vals[k]; k++)
				;
			if (k == c[i].set.ntensors)
				measure_update(&c[i].set, vals, &r->ou_max, &r->onorm_worst, &r->opaired);
		}
		for (k = 0; k < c[i].set.ntensors; k++)
			free(vals[k]);
		free(vals);
		free(recs);
		free(lens);
		if (rc == 0 && decode_dir)
			rc = write_decoded(decode_dir, m->name, &c[i], &dec);
		if (rc) {
			fprintf(stderr, "bench_codec: %s: decoding %s failed: %s\n", m->name, c[i].path,
				strerror(-rc));
			return rc;
		}
		rckpt_ckenc_out_free(&rec[i]);
	}
	rckpt_ckdec_free(&dec);
	free(rec);
	return 0;
}

static void usage(FILE *f)
{
	unsigned i;
	fprintf(f, "usage: bench_codec [--eps E] [--opt-eps E] [--methods a,b,...] [--limit N]\n"
		   "                   [--verbose] [--decode-dir OUT] [--encode-dir OUT] DIR\n\n"
		   "Compress the checkpoints DIR/*.safetensors (file-name order; gradients in\n"
		   "X.grads.safetensors beside X.safetensors; an optimizer's state in\n"
		   "X.optim.safetensors, reported apart) with every method, side by side.\n"
		   "--opt-eps is the optimizer state's threshold (its update error; default %g);\n"
		   "the abl-opt-* methods run only where there is optimizer state.\n"
		   "--verbose prints each step's configurations tried and stage times to stderr\n"
		   "(and, with an optimizer's state, its bytes, update error and configuration).\n"
		   "--decode-dir writes each lossy method's decoded steps, fp32, to\n"
		   "OUT/METHOD/NAME.safetensors (to judge them by the model's real loss).\n"
		   "--encode-dir writes each step file of every method but zstd-* to\n"
		   "OUT/METHOD/STEM.rckpt (for bench/codec/record_bytes.py).\n\n"
		   "methods:\n", RCKPT_OPT_EPS_DEFAULT);
	for (i = 0; i < NMETHODS; i++)
		fprintf(f, "  %-20s %s\n", methods[i].name, methods[i].what);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "eps", 1, 0, 'e' }, { "methods", 1, 0, 'm' },
					    { "limit", 1, 0, 'l' }, { "verbose", 0, 0, 'v' },
					    { "help", 0, 0, 'h' },  { "decode-dir", 1, 0, 'd' },
					    { "opt-eps", 1, 0, 'o' }, { "encode-dir", 1, 0, 'w' },
					    { 0, 0, 0, 0 } };
	const char *only = NULL, *decode_dir = NULL, *encode_dir = NULL;
	double eps = RCKPT_EPS_DEFAULT, opt_eps = RCKPT_OPT_EPS_DEFAULT;
	unsigned limit = 0, n, i, j;
	result_t res[NMETHODS];
	ckpt_t *c;
	float *buf;
	size_t maxraw = 0;
	int opt, verbose = 0;

	while ((opt = getopt_long(argc, argv, "e:m:l:vh", lo, NULL)) != -1) {
		switch (opt) {
		case 'e': eps = atof(optarg); break;
		case 'm': only = optarg; break;
		case 'l': limit = (unsigned)atoi(optarg); break;
		case 'v': verbose = 1; break;
		case 'd': decode_dir = optarg; break;
		case 'w': encode_dir = optarg; break;
		case 'o': opt_eps = atof(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || !(eps > 0) || !(opt_eps > 0)) {
		usage(stderr);
		return 2;
	}
	if (load_dir(argv[optind], &c, &n, limit))
		return 1;
	for (i = 0; i < n; i++)
		maxraw = c[i].raw > maxraw ? c[i].raw : maxraw;
	buf = malloc(maxraw + 4);
	printf("checkpoints: %u from %s (%.2f MB of fp32 each), gradients: %s, optimizer state: %s, "
	       "eps %g\n\n",
	       n, argv[optind], c[0].raw / 1e6, c[0].have_grads ? "yes" : "no",
	       c[0].have_optim ? "yes" : "no", eps);
	printf("csv:method,checkpoint,raw_bytes,enc_bytes,ratio,quality_loss,accepted,config,encode_MBps\n");
	memset(res, 0, sizeof(res));
	for (j = 0; j < NMETHODS; j++) {
		const method_t *m = &methods[j];
		if ((only && !strstr(only, m->name)) || (m->opt_abl && !c[0].have_optim))
			continue;
		if ((m->kind == 2   ? run_exact(m, c, n, &res[j])
		     : m->kind == 1 ? run_zstd(m, c, n, &res[j], buf)
				    : run_ckenc(m, c, n, eps, opt_eps, verbose, &res[j], decode_dir, encode_dir)))
			return 1;
	}
	printf("\n%-20s %8s %8s %8s %11s %11s %9s %9s %9s\n", "method", "overall", "first", "last",
	       "mean loss", "max loss", "enc MB/s", "steady", "dec MB/s");
	for (j = 0; j < NMETHODS; j++) {
		const result_t *r = &res[j];
		if (r->n == 0)
			continue;
		printf(methods[j].kind ? "%-20s %7.2fx %7.2fx %7.2fx %11.2e %11.2e %9.0f %9.0f %9.0f%s\n"
				       : "%-20s %7.1fx %7.1fx %7.1fx %11.2e %11.2e %9.0f %9.0f %9.0f%s\n",
		       methods[j].name, (double)r->raw / (double)r->enc, r->first_ratio, r->last_ratio, r->q_sum / r->n,
		       r->q_max, r->raw / 1e6 / r->t_enc,
		       r->t_enc_steady > 0 ? r->raw_steady / 1e6 / r->t_enc_steady : 0.0, r->raw / 1e6 / r->t_dec,
		       r->accepted == r->n ? "" : "  (some steps over eps)");
	}
	for (j = 0; j < NMETHODS; j++) {
		const result_t *r = &res[j];
		if (r->n == 0 || methods[j].kind != 2 || r->t_penc <= 0)
			continue;
		if (strcmp(methods[j].name, "exact") == 0 || j == 0 || methods[j - 1].kind != 2)
			printf("\nthe exact tier's codec alone (PLANES payloads of each tensor, no record\n"
			       "framing, CRC or SHA-256 digests), MB of the tensors' bytes per second:\n");
		printf("  %-20s encode %6.0f  decode %6.0f MB/s\n", methods[j].name, r->raw / 1e6 / r->t_penc,
		       r->raw / 1e6 / r->t_pdec);
	}
	if (c[0].have_optim) {
		printf("\nthe optimizer's state (X.optim.safetensors, opt_eps %g): its share of the bytes,\n"
		       "the worst update error (sum (u'-u)^2 / sum u^2, u = exp_avg / (sqrt(exp_avg_sq) + eps))\n"
		       "as the encoder estimated it and as measured on the decoded state, and the\n"
		       "per-tensor ratio of the decoded update's norm to the original's farthest from 1:\n",
		       opt_eps);
		for (j = 0; j < NMETHODS; j++) {
			const result_t *r = &res[j];
			if (r->n == 0 || methods[j].kind)
				continue;
			if (r->opaired == 0) { /* nothing measured: no score to print */
				printf("  %-20s weights %7.1fx  optimizer %7.1fx  update error: none measured "
				       "(no exp_avg.P with its exp_avg_sq.P; each moment was judged by its "
				       "own relative error, est %.4f)\n",
				       methods[j].name, (double)(r->raw - r->opt_raw) / (double)(r->enc - r->opt_enc),
				       r->opt_enc ? (double)r->opt_raw / (double)r->opt_enc : 0.0, r->oq_max);
				continue;
			}
			printf("  %-20s weights %7.1fx  optimizer %7.1fx  update error %.4f est, %.4f "
			       "measured  norm ratio %.3f\n",
			       methods[j].name, (double)(r->raw - r->opt_raw) / (double)(r->enc - r->opt_enc),
			       r->opt_enc ? (double)r->opt_raw / (double)r->opt_enc : 0.0, r->oq_max, r->ou_max,
			       r->onorm_worst);
		}
	}
	printf("\nencode time by stage (prepare: widen, check, sketch; search; quantize with\n"
	       "verification; record: delta, rearrangement, RLE, entropy):\n");
	for (j = 0; j < NMETHODS; j++) {
		const result_t *r = &res[j];
		double t = r->t_prep + r->t_search + r->t_quant + r->t_code;
		if (r->n == 0 || methods[j].kind)
			continue;
		printf("  %-20s prepare %4.0f%%  search %4.0f%%  quantize %4.0f%%  record %4.0f%%  (record "
		       "stage alone %.0f MB/s)\n",
		       methods[j].name, 100 * r->t_prep / t, 100 * r->t_search / t, 100 * r->t_quant / t,
		       100 * r->t_code / t, r->raw / 1e6 / r->t_code);
		printf("stages:%s,%.0f,%.6f,%.6f,%.6f,%.6f\n", methods[j].name, (double)r->raw, r->t_prep,
		       r->t_search, r->t_quant, r->t_code);
	}
	printf("\ndecode by stage, MB of fp32 per second of each (records: entropy decoding, run\n"
	       "lengths, the delta on the parent's levels; digests: each chunk's SHA-256; values:\n"
	       "dequantization to fp32):\n");
	for (j = 0; j < NMETHODS; j++) {
		const result_t *r = &res[j];
		const double trec = r->t_dstep > r->t_ddigest ? r->t_dstep - r->t_ddigest : 0;
		if (r->n == 0 || methods[j].kind || r->t_dvalues <= 0)
			continue;
		printf("  %-20s records %6.0f  digests %6.0f  values %6.0f MB/s\n", methods[j].name,
		       trec > 0 ? r->raw / 1e6 / trec : 0.0, r->t_ddigest > 0 ? r->raw / 1e6 / r->t_ddigest : 0.0,
		       r->raw / 1e6 / r->t_dvalues);
		printf("dstages:%s,%.0f,%.6f,%.6f,%.6f\n", methods[j].name, (double)r->raw, trec, r->t_ddigest,
		       r->t_dvalues);
	}
	for (j = 0; j < NMETHODS && strcmp(methods[j].name, "zstd-1") != 0; j++)
		;
	if (res[0].n && j < NMETHODS && res[j].n)
		printf("\nrckpt encodes at %.2fx the speed of zstd -1 on the same bytes overall, %.2fx from the\n"
		       "third checkpoint on (\"steady\": past the two full configuration searches)\n",
		       res[j].t_enc / res[0].t_enc,
		       res[0].t_enc_steady > 0 ? (res[j].t_enc_steady / res[j].raw_steady) /
						 (res[0].t_enc_steady / res[0].raw_steady)
					       : 0.0);
	printf("\nreproduce: %s --eps %g --opt-eps %g%s%s%s DIR=%s\n", argv[0], eps, opt_eps, only ? " --methods " : "",
	       only ? only : "", limit ? " --limit N" : "", argv[optind]);
	free(buf);
	free_ckpts(c, n);
	return 0;
}
