/*
 * bench_pcr_pairs.c — bench_pcr's sections measured in interleaved pairs
 * against their baselines: 5, decode at reduced scale (in memory, then read
 * + decode from the cluster), and 6, each prefix transcoded losslessly to a
 * baseline JPEG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include <rados/librados.h>

#include "rckpt.h"
#include "rckpt_pcr.h"
#include "rckpt_clock.h" /* rckpt_now_s */
#include "bench_pcr.h"

/* ---- interleaved pairs for one case (sections 5 and 6) ---- */

typedef struct run {
	double (*fn)(void *arg); /* one timed run: seconds */
	void *arg;
} run_t;

/* After an untimed run of each: R rounds of base[0..nb), then the case;
 * then the bases once more. ratio[b][r]: the mean of base b's runs on
 * either side of round r's case over the case's time; sorted, with the
 * median returned in med[b]. tcase: the case's median seconds. */
static double pairs_run(const run_t *base, unsigned nb, run_t cs, int R, double ratio[][PAIRS_MAX],
			double *med)
{
	double prev[4], tc[PAIRS_MAX];
	unsigned b;
	int r;
	for (b = 0; b < nb; b++)
		(void)base[b].fn(base[b].arg);
	(void)cs.fn(cs.arg);
	for (b = 0; b < nb; b++)
		prev[b] = base[b].fn(base[b].arg);
	for (r = 0; r < R; r++) {
		tc[r] = cs.fn(cs.arg);
		for (b = 0; b < nb; b++) {
			double next = base[b].fn(base[b].arg);
			ratio[b][r] = (prev[b] + next) / 2 / tc[r];
			prev[b] = next;
		}
	}
	for (b = 0; b < nb; b++)
		med[b] = median(ratio[b], R);
	return median(tc, R);
}

static const char *ratio_str(char *buf, size_t cap, const double *sorted, int R, double med)
{
	snprintf(buf, cap, "%.3f [%.3f, %.3f]", med, sorted[0], sorted[R - 1]);
	return buf;
}

/* A set of JPEGs decoded in memory at per-image scales (NULL: full). */
typedef struct dec_set {
	tjhandle th;
	uint8_t **jpg;
	size_t *len;
	unsigned n;
	uint8_t *px;
	const uint8_t *scale;
	uint64_t pixels;
} dec_set_t;

static double run_decode(void *arg)
{
	dec_set_t *d = arg;
	return decode_all_at(d->th, d->jpg, d->len, d->n, d->px, &d->pixels, d->scale);
}

/* Transcodes a set to baseline JPEGs (xh: a handle that never made a
 * progressive JPEG; see section 6) and, if decode, decodes them. */
typedef struct xcode_set {
	dec_set_t *in;
	tjhandle xh;
	int decode;
	double xcode_s, decode_s; /* of the last run */
	uint64_t out_bytes;
} xcode_set_t;

static double run_xcode(void *arg)
{
	xcode_set_t *x = arg;
	uint8_t *o;
	unsigned long ol;
	double t0 = rckpt_now_s(), tx = 0, td = 0;
	unsigned i;
	x->out_bytes = 0;
	for (i = 0; i < x->in->n; i++) {
		tjtransform xf;
		double t1 = rckpt_now_s();
		memset(&xf, 0, sizeof(xf));
		xf.options = TJXOPT_COPYNONE;
		o = NULL;
		ol = 0;
		if (tjTransform(x->xh, x->in->jpg[i], x->in->len[i], 1, &o, &ol, &xf, 0))
			die("transcode", -EBADMSG);
		tx += rckpt_now_s() - t1;
		x->out_bytes += ol;
		if (x->decode) {
			int w, h, sub, cs;
			t1 = rckpt_now_s();
			if (tjDecompressHeader3(x->in->th, o, ol, &w, &h, &sub, &cs) ||
			    tjDecompress2(x->in->th, o, ol, x->in->px, w, 0, h, TJPF_RGB, 0))
				die("decode the transcoded", -EBADMSG);
			td += rckpt_now_s() - t1;
		}
		tjFree(o);
	}
	x->xcode_s = tx;
	x->decode_s = td;
	return rckpt_now_s() - t0;
}

/* The baseline objects read and decoded (scale: per image, NULL full). */
typedef struct base_rd {
	rados_ioctx_t io;
	const src_t *s;
	unsigned threads;
	const uint8_t *scale;
	uint64_t bytes;
} base_rd_t;

static double run_base_read(void *arg)
{
	base_rd_t *b = arg;
	return baseline_read(b->io, b->s, b->threads, &b->bytes, b->scale);
}

typedef struct pcr_rd {
	rckpt_t *h;
	const char *ds;
	unsigned k, threads, scale;
	uint64_t bytes, pixels;
	unsigned images;
} pcr_rd_t;

static double run_pcr_read(void *arg)
{
	pcr_rd_t *p = arg;
	return pcr_read(p->h, p->ds, p->k, p->threads, p->scale, &p->bytes, &p->images, &p->pixels);
}

static const char *scale_name(char *buf, size_t cap, unsigned sc)
{
	if (sc == RCKPT_PCR_SCALE_AUTO)
		snprintf(buf, cap, "auto");
	else
		snprintf(buf, cap, "1/%u", sc);
	return buf;
}

/* Per image, the scale a case decodes prefix k at: sc, or for auto what
 * the reader picks (rckpt_pcr_auto_scale of the prefix's luma scans). */
static void scales_of(uint8_t *out, uint8_t *const *jpg, const size_t *len, unsigned n, unsigned sc,
		      unsigned hist[9])
{
	unsigned i;
	memset(hist, 0, 9 * sizeof(*hist));
	for (i = 0; i < n; i++) {
		rckpt_pcr_split_t sp;
		if (sc != RCKPT_PCR_SCALE_AUTO)
			out[i] = (uint8_t)sc;
		else
			out[i] = rckpt_pcr_jpeg_split(&sp, jpg[i], len[i]) ? 1
									   : (uint8_t)rckpt_pcr_auto_scale(sp.luma_se);
		hist[out[i]]++;
	}
}

/* 5. decode at reduced scale: decode only (one core, in memory), then read
 * + decode from the cluster; each case against the baseline JPEGs at full
 * size and at the same scale. */
void scaled_sections(rckpt_t *h, const char *ds, rados_ioctx_t base_io, const src_t *s, unsigned G,
			    uint8_t **jk[], size_t *lk[], tjhandle th, uint8_t *px, const unsigned *thr,
			    unsigned nthr, const unsigned *scales, unsigned nscales, int R)
{
	uint8_t *sc = malloc(s->n);
	double ratio[2][PAIRS_MAX], med[2];
	unsigned si, k, ti, hist[9];
	char sn[16], r0[64], r1[64];

	printf("\ndecode only at reduced scale (one core, in memory; each case %d rounds of pairs: base full, base "
	       "at the same scale, case; images/s, ratio median [min, max]; scales: images at 1/8 1/4 1/2 1/1):\n",
	       R);
	printf("%6s %6s %10s %22s %22s %19s\n", "scale", "groups", "images/s", "x base full", "x base same scale",
	       "images 8/4/2/1");
	for (si = 0; si < nscales; si++)
		for (k = 1; k <= G; k++) {
			dec_set_t bf = { th, s->data, s->len, s->n, px, NULL, 0 };
			dec_set_t bs = { th, s->data, s->len, s->n, px, sc, 0 };
			dec_set_t cs = { th, jk[k], lk[k], s->n, px, sc, 0 };
			run_t base[2] = { { run_decode, &bf }, { run_decode, &bs } };
			double tc;
			scales_of(sc, jk[k], lk[k], s->n, scales[si], hist);
			tc = pairs_run(base, 2, (run_t){ run_decode, &cs }, R, ratio, med);
			printf("%6s %6u %10.0f %22s %22s %4u/%4u/%4u/%4u\n", scale_name(sn, sizeof(sn), scales[si]), k,
			       s->n / tc, ratio_str(r0, sizeof(r0), ratio[0], R, med[0]),
			       ratio_str(r1, sizeof(r1), ratio[1], R, med[1]), hist[8], hist[4], hist[2], hist[1]);
			printf("csv,ratio,decode-scale,%s,%u,1,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d\n", sn, k, med[0],
			       ratio[0][0], ratio[0][R - 1], med[1], ratio[1][0], ratio[1][R - 1], R);
		}
	printf("\nread + decode at reduced scale (cluster; each case %d rounds of pairs as above):\n", R);
	printf("%6s %3s %6s %10s %22s %22s\n", "scale", "thr", "groups", "images/s", "x base full",
	       "x base same scale");
	for (ti = 0; ti < nthr; ti++)
		for (si = 0; si < nscales; si++)
			for (k = 1; k <= G; k++) {
				base_rd_t bf = { base_io, s, thr[ti], NULL, 0 }, bs = { base_io, s, thr[ti], sc, 0 };
				pcr_rd_t cs = { h, ds, k, thr[ti], scales[si], 0, 0, 0 };
				run_t base[2] = { { run_base_read, &bf }, { run_base_read, &bs } };
				double tc;
				scales_of(sc, jk[k], lk[k], s->n, scales[si], hist);
				tc = pairs_run(base, 2, (run_t){ run_pcr_read, &cs }, R, ratio, med);
				printf("%6s %3u %6u %10.0f %22s %22s\n", scale_name(sn, sizeof(sn), scales[si]), thr[ti], k,
				       s->n / tc, ratio_str(r0, sizeof(r0), ratio[0], R, med[0]),
				       ratio_str(r1, sizeof(r1), ratio[1], R, med[1]));
				printf("csv,ratio,read-scale,%s,%u,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d\n", sn, k, thr[ti],
				       med[0], ratio[0][0], ratio[0][R - 1], med[1], ratio[1][0], ratio[1][R - 1], R);
			}
	free(sc);
}

/* 6. each prefix transcoded losslessly to a baseline JPEG, decode only. */
void transcode_section(unsigned G, uint8_t **jk[], size_t *lk[], unsigned n, tjhandle th, uint8_t *px,
			      int R)
{
	/* A handle of its own: in libjpeg-turbo 2.1.5 a transform handle that
	 * made a progressive JPEG makes corrupt baseline ones afterwards. */
	tjhandle xh = tjInitTransform();
	uint8_t **bj = calloc(n, sizeof(*bj)), *a = malloc((size_t)64 << 20);
	size_t *bl = calloc(n, sizeof(*bl));
	double ratio[1][PAIRS_MAX], med[1];
	char r0[64], r1[64], r2[64];
	unsigned k, i;

	if (xh == NULL || !bj || !bl || !a)
		die("transcode section", -ENOMEM);
	printf("\ntranscode each prefix to a baseline JPEG (one core, in memory; each case %d rounds of pairs "
	       "against decoding the prefix directly; ratio: images/s of the case over the direct decode's):\n",
	       R);
	printf("%6s %10s %9s %10s %22s %22s %22s %9s\n", "groups", "direct/s", "same px", "bytes x", "transcode",
	       "decode its output", "transcode + decode", "xcode ms");
	for (k = 1; k <= G; k++) {
		dec_set_t direct = { th, jk[k], lk[k], n, px, NULL, 0 };
		xcode_set_t xo = { &direct, xh, 0, 0, 0, 0 }, xd = { &direct, xh, 1, 0, 0, 0 };
		dec_set_t bd = { th, bj, bl, n, px, NULL, 0 };
		run_t base[1] = { { run_decode, &direct } };
		uint64_t pb = 0, ob = 0;
		unsigned same = 0;
		double mx, md, mxd, td;
		for (i = 0; i < n; i++) { /* the transcoded set, and whether its pixels are the prefix's */
			unsigned long ol = 0;
			uint8_t *o = NULL;
			tjtransform xf;
			int w, hh, sub, cs;
			memset(&xf, 0, sizeof(xf));
			xf.options = TJXOPT_COPYNONE;
			if (tjTransform(xh, jk[k][i], lk[k][i], 1, &o, &ol, &xf, 0) ||
			    tjDecompressHeader3(th, o, ol, &w, &hh, &sub, &cs) ||
			    tjDecompress2(th, o, ol, a, w, 0, hh, TJPF_RGB, 0) ||
			    (tjDecompress2(th, jk[k][i], lk[k][i], px, w, 0, hh, TJPF_RGB, 0) &&
			     tjGetErrorCode(th) != TJERR_WARNING))
				die("transcode", -EBADMSG);
			same += memcmp(a, px, (size_t)w * hh * 3) == 0;
			bj[i] = malloc(ol);
			memcpy(bj[i], o, ol);
			bl[i] = ol;
			tjFree(o);
			pb += lk[k][i];
			ob += ol;
		}
		td = pairs_run(base, 1, (run_t){ run_xcode, &xo }, R, ratio, med);
		mx = med[0];
		snprintf(r0, sizeof(r0), "%.3f [%.3f, %.3f]", mx, ratio[0][0], ratio[0][R - 1]);
		(void)pairs_run(base, 1, (run_t){ run_decode, &bd }, R, ratio, med);
		md = med[0];
		snprintf(r1, sizeof(r1), "%.3f [%.3f, %.3f]", md, ratio[0][0], ratio[0][R - 1]);
		(void)pairs_run(base, 1, (run_t){ run_xcode, &xd }, R, ratio, med);
		mxd = med[0];
		snprintf(r2, sizeof(r2), "%.3f [%.3f, %.3f]", mxd, ratio[0][0], ratio[0][R - 1]);
		{
			double tdir = median((double[]){ run_decode(&direct), run_decode(&direct), run_decode(&direct) }, 3);
			printf("%6u %10.0f %4u/%4u %10.3f %22s %22s %22s %9.3f\n", k, n / tdir, same, n, (double)ob / pb,
			       r0, r1, r2, td / n * 1e3);
		}
		printf("csv,transcode,%u,%u,%u,%" PRIu64 ",%" PRIu64 ",%.4f,%.4f,%.4f,%.6f,%d\n", k, same, n, pb, ob, mx,
		       md, mxd, td / n, R);
		for (i = 0; i < n; i++)
			free(bj[i]);
	}
	free(bj);
	free(bl);
	free(a);
	tjDestroy(xh);
}
