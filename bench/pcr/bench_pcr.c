/*
 * bench_pcr.c — PCR datasets against a live cluster, side by side in one
 * run with the same images stored one object per original JPEG:
 *   1. build: images/s and stored bytes against the source JPEGs;
 *   2. read + decode to RGB through k groups (every k, 1 and 2 threads):
 *      bytes moved and images/s, as ratios to reading every original
 *      object whole and decoding it the same way, and the mean SSIM of k
 *      groups from the index;
 *   3. decode only, one core, in memory: megapixels/s of each prefix of k
 *      groups against the baseline JPEGs;
 *   2 and 3 are measured in pairs (base, 1, base, 2, ..., G, base, --reps
 *   rounds after an untimed one): a case's ratio in a round is taken
 *   against the baseline runs on either side of it, and the report gives
 *   the median and the min-max of those per-pair ratios. On a shared
 *   machine a neighbour's load then hits both halves of a pair alike,
 *   where medians of separate blocks would measure the neighbour;
 *   4. a subset of a record's images: the `read` method (the record's
 *      prefix in one call, cut here) against the `images` method (gathered
 *      in the OSD): bytes over the wire and time (median of --reps);
 *   5. decode at reduced scale (rckpt_pcr_opts_t.scale, --scales: 2, 4, 8,
 *      auto), decode only and read + decode: each case in its own series
 *      of pairs (base full, base same scale, case; ...; base full, base
 *      same scale), its ratio against the baseline JPEGs decoded at full
 *      size and against them decoded at the same scale (for auto: each
 *      baseline JPEG at the scale auto chose for its prefix);
 *   6. transcoding each prefix losslessly to a baseline (sequential) JPEG
 *      (tjTransform without TJXOPT_PROGRESSIVE), decode only: the
 *      transcode's cost, the baseline's decode and both together, each in
 *      pairs against decoding the progressive prefix directly.
 * One CSV line per case (lines starting "csv,"), then a table.
 *
 * usage: bench_pcr [--conf PATH] [--pool NAME] [--reps N] [--per-record N]
 *                  [--threads LIST] [--scales LIST] [--no-transcode]
 *                  [--scan-script default|spectral] [--keep] DIR
 * --threads: the read + decode thread counts (default 1,2); --scales: those
 * of 5 (default auto; "none" skips 5); --scan-script: the builder's
 * (rckpt_pcr_build_opts_t.scan_script): run once with each for the
 * trade-off of bytes, SSIM and decode speed per group.
 * DIR holds the JPEGs and labels.csv (bench/data/make_pcr_images.py).
 */
#define _GNU_SOURCE /* getopt_long, qsort_r */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <rados/librados.h>

#include "rckpt.h"
#include "rckpt_pcr.h"
#include "rckpt_clock.h" /* rckpt_now_s */
#include "bench_pcr.h"

#define MAX_IMAGES 100000
#define INFLIGHT 16

void die(const char *what, int rc)
{
	fprintf(stderr, "bench_pcr: %s: %s\n", what, rckpt_strerror(rc));
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load(src_t *s, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	tjhandle th = tjInitDecompress();
	unsigned i;

	memset(s, 0, sizeof(*s));
	if (d == NULL)
		die(dir, -errno);
	s->name = calloc(MAX_IMAGES, sizeof(*s->name));
	while ((e = readdir(d)) != NULL && s->n < MAX_IMAGES) {
		size_t l = strlen(e->d_name);
		if (l > 4 && strcmp(e->d_name + l - 4, ".jpg") == 0)
			s->name[s->n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(s->name, s->n, sizeof(*s->name), cmp_str);
	s->data = calloc(s->n, sizeof(*s->data));
	s->len = calloc(s->n, sizeof(*s->len));
	for (i = 0; i < s->n; i++) {
		char path[4096];
		FILE *f;
		int w, h, sub, cs;
		snprintf(path, sizeof(path), "%s/%s", dir, s->name[i]);
		f = fopen(path, "rb");
		if (f == NULL)
			die(path, -errno);
		fseek(f, 0, SEEK_END);
		s->len[i] = (size_t)ftell(f);
		fseek(f, 0, SEEK_SET);
		s->data[i] = malloc(s->len[i]);
		if (fread(s->data[i], 1, s->len[i], f) != s->len[i])
			die(path, -EIO);
		fclose(f);
		s->bytes += s->len[i];
		if (tjDecompressHeader3(th, s->data[i], s->len[i], &w, &h, &sub, &cs) == 0)
			s->pixels += (uint64_t)w * h;
	}
	tjDestroy(th);
}

/* ---- the baseline: one object per JPEG, read whole, decoded on threads ---- */

typedef struct dec_job {
	uint8_t **buf;
	size_t *len;
	unsigned from, to, step;
	uint64_t pixels;
	const uint8_t *scale; /* per image (from buf[0]), 1 2 4 8; NULL: full size */
} dec_job_t;

/* The size TurboJPEG decodes w x h to at 1/scale. */
static void scaled(int *w, int *h, unsigned scale)
{
	if (scale > 1) {
		const tjscalingfactor f = { 1, (int)scale };
		*w = TJSCALED(*w, f);
		*h = TJSCALED(*h, f);
	}
}

static void *decode_range(void *arg)
{
	dec_job_t *j = arg;
	tjhandle th = tjInitDecompress();
	uint8_t *px = NULL;
	size_t cap = 0;
	unsigned i;
	for (i = j->from; i < j->to; i += j->step) {
		int w, h, sub, cs;
		if (tjDecompressHeader3(th, j->buf[i], j->len[i], &w, &h, &sub, &cs))
			continue;
		if (j->scale)
			scaled(&w, &h, j->scale[i]);
		if ((size_t)w * h * 3 > cap) {
			free(px);
			px = malloc(cap = (size_t)w * h * 3);
		}
		if (tjDecompress2(th, j->buf[i], j->len[i], px, w, 0, h, TJPF_RGB, 0) == 0)
			j->pixels += (uint64_t)w * h;
	}
	free(px);
	tjDestroy(th);
	return NULL;
}

/* Reads every baseline object (INFLIGHT at once, in batches of 64) and
 * decodes each batch on `threads` threads while the next one is read. */
double baseline_read(rados_ioctx_t io, const src_t *s, unsigned threads, uint64_t *bytes,
			    const uint8_t *scale)
{
	enum { BATCH = 64 };
	uint8_t *buf[2][BATCH];
	size_t len[2][BATCH];
	rados_completion_t c[2][BATCH];
	pthread_t tid[8];
	dec_job_t job[8];
	unsigned b, cur = 0, i, t;
	double t0 = rckpt_now_s();

	*bytes = 0;
	for (b = 0; b * BATCH < s->n + BATCH; b++) {
		unsigned from = b * BATCH, cnt = from < s->n ? (s->n - from < BATCH ? s->n - from : BATCH) : 0;
		unsigned prev = cur ^ 1, pfrom = from >= BATCH ? from - BATCH : 0;
		unsigned pcnt = b ? (pfrom < s->n ? (s->n - pfrom < BATCH ? s->n - pfrom : BATCH) : 0) : 0;
		for (i = 0; i < cnt; i++) { /* start this batch's reads */
			buf[cur][i] = malloc(s->len[from + i]);
			len[cur][i] = s->len[from + i];
			rados_aio_create_completion2(NULL, NULL, &c[cur][i]);
			rados_aio_read(io, s->name[from + i], c[cur][i], (char *)buf[cur][i], len[cur][i], 0);
		}
		if (pcnt) { /* decode the previous batch meanwhile */
			for (i = 0; i < pcnt; i++) {
				rados_aio_wait_for_complete(c[prev][i]);
				*bytes += (uint64_t)rados_aio_get_return_value(c[prev][i]);
				rados_aio_release(c[prev][i]);
			}
			for (t = 0; t < threads; t++) {
				job[t] = (dec_job_t){ buf[prev], len[prev], t, pcnt, threads, 0,
						      scale ? scale + pfrom : NULL };
				pthread_create(&tid[t], NULL, decode_range, &job[t]);
			}
			for (t = 0; t < threads; t++)
				pthread_join(tid[t], NULL);
			for (i = 0; i < pcnt; i++)
				free(buf[prev][i]);
		}
		cur = prev;
	}
	return rckpt_now_s() - t0;
}

/* ---- PCR read + decode ---- */

double pcr_read(rckpt_t *h, const char *ds, unsigned k, unsigned threads, unsigned scale,
		       uint64_t *bytes, unsigned *images, uint64_t *pixels)
{
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_read_stats_t rs;
	rckpt_pcr_t *d;
	double t0;
	int rc;

	o.groups = k;
	o.output = RCKPT_PCR_RGB;
	o.threads = threads;
	o.prefetch = 2;
	o.scale = scale;
	if ((rc = rckpt_pcr_open(h, &d, ds, &o)))
		die(rckpt_errmsg(h), rc);
	*images = 0;
	*pixels = 0;
	t0 = rckpt_now_s();
	for (;;) {
		rckpt_pcr_batch_t *b;
		unsigned i;
		if ((rc = rckpt_pcr_next(d, &b)))
			die(rckpt_errmsg(h), rc);
		if (b == NULL)
			break;
		for (i = 0; i < rckpt_pcr_batch_count(b); i++) {
			rckpt_pcr_image_t im;
			rckpt_pcr_batch_image(b, i, &im);
			*pixels += (uint64_t)im.width * im.height;
		}
		*images += rckpt_pcr_batch_count(b);
		rckpt_pcr_batch_free(b);
	}
	t0 = rckpt_now_s() - t0;
	rckpt_pcr_read_stats(d, &rs);
	*bytes = rs.wire_bytes;
	rckpt_pcr_close(d);
	return t0;
}

/* Decodes n JPEGs once on this thread; returns seconds, adds pixels. */
double decode_all_at(tjhandle th, uint8_t *const *jpg, const size_t *len, unsigned n, uint8_t *px,
			    uint64_t *pixels, const uint8_t *scale)
{
	double t0 = rckpt_now_s();
	unsigned i;
	*pixels = 0;
	for (i = 0; i < n; i++) {
		int w, h, sub, cs;
		if (tjDecompressHeader3(th, jpg[i], len[i], &w, &h, &sub, &cs))
			die("decode", -EBADMSG);
		*pixels += (uint64_t)w * h; /* the image's, whatever the scale */
		if (scale)
			scaled(&w, &h, scale[i]);
		if (tjDecompress2(th, jpg[i], len[i], px, w, 0, h, TJPF_RGB, 0) &&
		    tjGetErrorCode(th) != TJERR_WARNING)
			die("decode", -EBADMSG);
	}
	return rckpt_now_s() - t0;
}

/* Decodes n JPEGs once on this thread; returns seconds, adds pixels. */
static double decode_all(tjhandle th, uint8_t *const *jpg, const size_t *len, unsigned n, uint8_t *px,
			 uint64_t *pixels)
{
	return decode_all_at(th, jpg, len, n, px, pixels, NULL);
}

/* A record's prefix through the `read` method, or its images through the
 * `images` method; returns seconds; *wire gets the reply's bytes. */
static double cls_call(rados_ioctx_t io, const char *oid, const char *method, const rckpt_buf_t *in,
		       size_t *wire)
{
	rados_read_op_t op = rados_create_read_op();
	char *out = NULL;
	size_t out_len = 0;
	int prval = 0, rc;
	double t0 = rckpt_now_s();
	rados_read_op_exec(op, "pcr", method, (const char *)in->p, in->len, &out, &out_len, &prval);
	rc = rados_read_op_operate(op, io, oid, 0);
	t0 = rckpt_now_s() - t0;
	rados_release_read_op(op);
	if (rc || prval)
		die(method, rc ? rc : prval);
	*wire = out_len;
	rados_buffer_free(out);
	return t0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "conf", 1, 0, 'c' },	  { "pool", 1, 0, 'p' },
					    { "reps", 1, 0, 'r' },	  { "per-record", 1, 0, 'n' },
					    { "keep", 0, 0, 'k' },	  { "help", 0, 0, 'h' },
					    { "threads", 1, 0, 't' },	  { "scales", 1, 0, 's' },
					    { "no-transcode", 0, 0, 'x' }, { "scan-script", 1, 0, 'S' },
					    { 0, 0, 0, 0 } };
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_pcr_build_opts_t bo = RCKPT_PCR_BUILD_OPTS_INIT;
	rckpt_pcr_build_stats_t bs;
	rckpt_pcr_info_t info;
	const char *pool = "rckpt";
	int reps = 5, keep = 0, c, rc;
	unsigned per_record = 512, i, k, G;
	char ds[64], ns[80];
	rckpt_pcr_input_t *in;
	rckpt_pcr_t *d;
	rckpt_t *h;
	rados_t cl;
	rados_ioctx_t base_io, pcr_io;
	src_t s;

	unsigned thr[8] = { 1, 2 }, nthr = 2, scales[8] = { RCKPT_PCR_SCALE_AUTO }, nscales = 1;
	int transcode = 1;
	while ((c = getopt_long(argc, argv, "c:p:r:n:kht:s:xS:", lo, NULL)) != -1) {
		switch (c) {
		case 'c': co.conf_path = optarg; break;
		case 'p': pool = optarg; break;
		case 'r': reps = atoi(optarg); break;
		case 'n': per_record = (unsigned)atoi(optarg); break;
		case 'k': keep = 1; break;
		case 'x': transcode = 0; break;
		case 'S':
			if (strcmp(optarg, "default") && strcmp(optarg, "spectral")) {
				fprintf(stderr, "bench_pcr: --scan-script takes default or spectral\n");
				return 2;
			}
			bo.scan_script = strcmp(optarg, "spectral") == 0 ? RCKPT_PCR_SCRIPT_SPECTRAL
									 : RCKPT_PCR_SCRIPT_DEFAULT;
			break;
		case 't':
		case 's': {
			char *tok, *save = NULL, *list = strdup(optarg);
			unsigned *v = c == 't' ? thr : scales, *nv = c == 't' ? &nthr : &nscales;
			*nv = 0;
			for (tok = strtok_r(list, ",", &save); tok && *nv < 8; tok = strtok_r(NULL, ",", &save)) {
				unsigned x = strcmp(tok, "auto") == 0 ? RCKPT_PCR_SCALE_AUTO : (unsigned)atoi(tok);
				if (c == 's' && strcmp(tok, "none") == 0)
					continue;
				if (c == 't' ? (x < 1 || x > 8) : (x != 2 && x != 4 && x != 8 && x != RCKPT_PCR_SCALE_AUTO)) {
					fprintf(stderr, "bench_pcr: --threads takes 1..8, --scales 2, 4, 8, auto or none\n");
					return 2;
				}
				v[(*nv)++] = x;
			}
			free(list);
			break;
		}
		default:
			printf("usage: bench_pcr [--conf PATH] [--pool NAME] [--reps N] [--per-record N] "
			       "[--threads LIST] [--scales LIST] [--no-transcode] "
			       "[--scan-script default|spectral] [--keep] DIR\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind != argc - 1 || reps < 1 || per_record < 1) {
		fprintf(stderr, "bench_pcr: needs DIR; try --help\n");
		return 2;
	}
	load(&s, argv[optind]);
	if (s.n == 0)
		die("no .jpg files in DIR", -ENOENT);
	co.pool = pool;
	if ((rc = rckpt_create(&h)) || (rc = rckpt_connect(h, &co)))
		die("connect", rc);
	if ((rc = rados_create(&cl, "admin")) ||
	    (rc = rados_conf_read_file(cl, co.conf_path ? co.conf_path : getenv("CEPH_CONF"))) ||
	    (rc = rados_connect(cl)) || (rc = rados_ioctx_create(cl, pool, &base_io)) ||
	    (rc = rados_ioctx_create(cl, pool, &pcr_io)))
		die("librados connect", rc);
	snprintf(ds, sizeof(ds), "bench-%ld", (long)getpid());
	snprintf(ns, sizeof(ns), "pcrbase-%ld", (long)getpid());
	rados_ioctx_set_namespace(base_io, ns);
	snprintf(ns, sizeof(ns), "pcr/%s", ds);
	rados_ioctx_set_namespace(pcr_io, ns);
	printf("bench_pcr: %u JPEGs, %.1f MB, %.1f Mpx, from %s; pool %s, %u images per record, scan "
	       "script %s\n",
	       s.n, s.bytes / 1e6, s.pixels / 1e6, argv[optind], pool, per_record,
	       bo.scan_script == RCKPT_PCR_SCRIPT_SPECTRAL ? "spectral" : "default");

	/* 1. build, and the baseline objects */
	in = calloc(s.n, sizeof(*in));
	for (i = 0; i < s.n; i++)
		in[i].name = s.name[i];
	{
		char **paths = calloc(s.n, sizeof(*paths));
		for (i = 0; i < s.n; i++) {
			if (asprintf(&paths[i], "%s/%s", argv[optind], s.name[i]) < 0)
				die("asprintf", -ENOMEM);
			in[i].path = paths[i];
		}
		bo.images_per_record = per_record;
		if ((rc = rckpt_pcr_build(h, ds, in, s.n, &bo, &bs)))
			die(rckpt_errmsg(h), rc);
		for (i = 0; i < s.n; i++)
			free(paths[i]);
		free(paths);
	}
	printf("build: %u images in %u records, %.2f s, %.0f images/s; stored %.1f MB = %.3fx the source "
	       "JPEGs\n",
	       bs.images, bs.records, bs.seconds, bs.images / bs.seconds, bs.stored_bytes / 1e6,
	       (double)bs.stored_bytes / bs.source_bytes);
	printf("csv,build,%u,%u,%.3f,%" PRIu64 ",%" PRIu64 "\n", bs.images, bs.records, bs.seconds,
	       bs.stored_bytes, bs.source_bytes);
	{
		rados_completion_t cc[INFLIGHT] = { 0 };
		for (i = 0; i < s.n; i++) {
			rados_completion_t *slot = &cc[i % INFLIGHT];
			if (*slot) {
				rados_aio_wait_for_complete(*slot);
				if ((rc = rados_aio_get_return_value(*slot)))
					die("baseline write", rc);
				rados_aio_release(*slot);
			}
			rados_aio_create_completion2(NULL, NULL, slot);
			rados_aio_write_full(base_io, s.name[i], *slot, (const char *)s.data[i], s.len[i]);
		}
		for (i = 0; i < INFLIGHT; i++)
			if (cc[i]) {
				rados_aio_wait_for_complete(cc[i]);
				rados_aio_release(cc[i]);
			}
	}
	if ((rc = rckpt_pcr_open(h, &d, ds, NULL)))
		die(rckpt_errmsg(h), rc);
	rckpt_pcr_info(d, &info);
	rckpt_pcr_close(d);
	G = info.groups;

	/* 2. read + decode through k groups, against the baseline, in pairs:
	 * base, 1, base, 2, ..., G, base; group k's ratio in a round is its
	 * images/s over that of the two baseline runs around it, so that a
	 * neighbour's load hits both sides of a pair alike. One untimed round
	 * of each first (caches, connections, the OSD's threads). */
	printf("\nread + decode to RGB (cluster; %d rounds of pairs, after a warm-up; images/s and ratio to "
	       "the baseline: median [min, max] of the per-pair figures):\n",
	       reps);
	printf("%6s %3s %12s %8s %10s %22s %8s\n", "groups", "thr", "bytes read", "x base", "images/s",
	       "x base (pairs)", "MSSIM");
	for (unsigned ti = 0; ti < nthr; ti++) {
		const unsigned t = thr[ti];
		uint64_t bb = 0, px, bk[RCKPT_PCR_MAX_GROUPS + 1];
		double tb[PAIRS_MAX + 1], tk[RCKPT_PCR_MAX_GROUPS + 1][PAIRS_MAX],
			ratio[RCKPT_PCR_MAX_GROUPS + 1][PAIRS_MAX];
		unsigned imgs;
		int R = reps < PAIRS_MAX ? reps : PAIRS_MAX;
		(void)baseline_read(base_io, &s, t, &bb, NULL); /* warm-up */
		(void)pcr_read(h, ds, G, t, 1, &bk[G], &imgs, &px);
		for (int r = 0; r < R; r++) {
			double prev = baseline_read(base_io, &s, t, &bb, NULL);
			tb[r] = prev;
			for (k = 1; k <= G; k++) {
				double next;
				tk[k][r] = pcr_read(h, ds, k, t, 1, &bk[k], &imgs, &px);
				next = baseline_read(base_io, &s, t, &bb, NULL);
				ratio[k][r] = (prev + next) / 2 / tk[k][r];
				printf("csv,pair,read,%u,%u,%d,%.4f,%.4f\n", k, t, r, (prev + next) / 2, tk[k][r]);
				prev = next;
			}
		}
		{
			double m = median(tb, R);
			printf("%6s %3u %12" PRIu64 " %8.3f %10.0f %22s %8s\n", "base", t, bb, 1.0, s.n / m, "1", "1");
			printf("csv,read,base,%u,%" PRIu64 ",%.4f,%u\n", t, bb, m, s.n);
		}
		for (k = 1; k <= G; k++) {
			double m = median(tk[k], R), lo, hi, mr;
			char rs[64];
			mr = median(ratio[k], R); /* sorts: [0] and are the extremes */
			lo = ratio[k][0];
			hi = ratio[k][R - 1];
			snprintf(rs, sizeof(rs), "%.3f [%.3f, %.3f]", mr, lo, hi);
			printf("%6u %3u %12" PRIu64 " %8.3f %10.0f %22s %8.4f\n", k, t, bk[k], (double)bk[k] / bb,
			       s.n / m, rs, info.mssim[k - 1]);
			printf("csv,read,%u,%u,%" PRIu64 ",%.4f,%u,%.4f\n", k, t, bk[k], m, s.n, info.mssim[k - 1]);
			printf("csv,ratio,read,%u,%u,%.4f,%.4f,%.4f,%d\n", k, t, mr, lo, hi, R);
		}
	}

	/* 3. decode only, one core, in memory */
	{
		uint8_t **jk[RCKPT_PCR_MAX_GROUPS + 1];
		size_t *lk[RCKPT_PCR_MAX_GROUPS + 1];
		double best[RCKPT_PCR_MAX_GROUPS + 1], bbest, tbase[PAIRS_MAX];
		double tdk[RCKPT_PCR_MAX_GROUPS + 1][PAIRS_MAX], dratio[RCKPT_PCR_MAX_GROUPS + 1][PAIRS_MAX];
		int R = reps < PAIRS_MAX ? reps : PAIRS_MAX;
		uint64_t pk[RCKPT_PCR_MAX_GROUPS + 1], pbase = 0;
		uint8_t *px = malloc((size_t)64 << 20);
		tjhandle th = tjInitDecompress();
		unsigned got = 0;
		uint32_t r;

		/* every image's prefix at each k, cut from the stored records */
		for (k = 1; k <= G; k++) {
			jk[k] = calloc(s.n, sizeof(*jk[k]));
			lk[k] = calloc(s.n, sizeof(*lk[k]));
			best[k] = 1e30;
		}
		for (r = 0; r < info.records; r++) {
			char oid[32];
			uint8_t *rec;
			uint64_t size;
			time_t mt;
			rckpt_pcr_head_t hd;
			snprintf(oid, sizeof(oid), "rec.%08" PRIu32, r);
			if ((rc = rados_stat(pcr_io, oid, &size, &mt)))
				die(oid, rc);
			rec = malloc(size);
			if ((rc = rados_read(pcr_io, oid, (char *)rec, size, 0)) < 0)
				die(oid, rc);
			if ((rc = rckpt_pcr_head_decode(&hd, rec, size)))
				die("record head", rc);
			for (i = 0; i < hd.f.nimages; i++, got++)
				for (k = 1; k <= G; k++) {
					rckpt_buf_t b = RCKPT_BUF_INIT;
					unsigned kk = k > hd.f.ngroups ? hd.f.ngroups : k;
					if ((rc = rckpt_pcr_assemble(&b, &hd, i, kk, rec, size)))
						die("assemble", rc);
					jk[k][got] = b.p;
					lk[k][got] = b.len;
				}
			rckpt_pcr_head_free(&hd);
			free(rec);
		}
		/* pairs again: base, 1, base, 2, ..., G, base, after a warm-up */
		(void)decode_all(th, s.data, s.len, s.n, px, &pbase);
		for (k = 1; k <= G; k++)
			(void)decode_all(th, jk[k], lk[k], got, px, &pk[k]);
		for (int rr = 0; rr < R; rr++) {
			double prev = decode_all(th, s.data, s.len, s.n, px, &pbase);
			tbase[rr] = prev;
			for (k = 1; k <= G; k++) {
				double next, x = decode_all(th, jk[k], lk[k], got, px, &pk[k]);
				next = decode_all(th, s.data, s.len, s.n, px, &pbase);
				tdk[k][rr] = x;
				/* Mpx/s over the baseline's Mpx/s around it */
				dratio[k][rr] = (pk[k] / x) / (pbase / ((prev + next) / 2));
				prev = next;
			}
		}
		bbest = median(tbase, R);
		printf("\ndecode only (one core, in memory; %d rounds of pairs; Mpx/s median, ratio median [min, "
		       "max] of the pairs):\n",
		       R);
		printf("%6s %10s %22s %12s\n", "groups", "Mpx/s", "x base (pairs)", "bytes");
		printf("%6s %10.1f %22s %12" PRIu64 "\n", "base", pbase / bbest / 1e6, "1", s.bytes);
		printf("csv,decode,base,%.4f,%" PRIu64 "\n", bbest, pbase);
		for (k = 1; k <= G; k++) {
			uint64_t bytes = 0;
			double mr = median(dratio[k], R);
			char rs[64];
			best[k] = median(tdk[k], R);
			for (i = 0; i < got; i++)
				bytes += lk[k][i];
			snprintf(rs, sizeof(rs), "%.3f [%.3f, %.3f]", mr, dratio[k][0], dratio[k][R - 1]);
			printf("%6u %10.1f %22s %12" PRIu64 "\n", k, pk[k] / best[k] / 1e6, rs, bytes);
			printf("csv,decode,%u,%.4f,%" PRIu64 ",%" PRIu64 "\n", k, best[k], pk[k], bytes);
			printf("csv,ratio,decode,%u,1,%.4f,%.4f,%.4f,%d\n", k, mr, dratio[k][0], dratio[k][R - 1], R);
		}
		if (got != s.n)
			die("the records hold other images than DIR", -EBADMSG);
		if (nscales)
			scaled_sections(h, ds, base_io, &s, G, jk, lk, th, px, thr, nthr, scales, nscales, R);
		if (transcode)
			transcode_section(G, jk, lk, s.n, th, px, R);
		for (k = 1; k <= G; k++) {
			for (i = 0; i < got; i++)
				free(jk[k][i]);
			free(jk[k]);
			free(lk[k]);
		}
		free(px);
		tjDestroy(th);
	}

	/* 4. a subset of one record: `read` (whole prefix) vs `images` */
	{
		const unsigned sizes[] = { 1, 8, 50 }, ks[] = { 1, 5, RCKPT_PCR_ALL };
		uint32_t nrec0 = info.records ? (uint32_t)(s.n < per_record ? s.n : per_record) : 0;
		uint32_t seed = 12345;
		printf("\na subset of record 0's %" PRIu32 " images (median of %d):\n", nrec0, reps);
		printf("%7s %6s %12s %10s %12s %10s %8s\n", "images", "groups", "read bytes", "read ms",
		       "images bytes", "images ms", "x bytes");
		for (unsigned si = 0; si < 3; si++)
			for (unsigned ki = 0; ki < 3; ki++) {
				unsigned n = sizes[si] < nrec0 ? sizes[si] : nrec0;
				uint32_t idx[50];
				rckpt_buf_t rin = RCKPT_BUF_INIT, iin = RCKPT_BUF_INIT;
				double tr[64], ti[64];
				size_t wr = 0, wi = 0;
				uint16_t kk = ks[ki] == RCKPT_PCR_ALL ? RCKPT_PCR_GROUPS_ALL : (uint16_t)ks[ki];
				for (i = 0; i < n; i++) {
					seed = seed * 1664525u + 1013904223u;
					idx[i] = (seed >> 8) % nrec0;
				}
				rckpt_msg_pcr_read_encode(&rin, kk);
				rckpt_msg_pcr_images_encode(&iin, kk, idx, n);
				for (int rr = 0; rr < reps && rr < 64; rr++) {
					tr[rr] = cls_call(pcr_io, "rec.00000000", "read", &rin, &wr);
					ti[rr] = cls_call(pcr_io, "rec.00000000", "images", &iin, &wi);
				}
				{
					int m = reps < 64 ? reps : 64;
					double mr = median(tr, m), mi = median(ti, m);
					char kname[8];
					snprintf(kname, sizeof(kname), ks[ki] == RCKPT_PCR_ALL ? "all" : "%u", ks[ki]);
					printf("%7u %6s %12zu %10.2f %12zu %10.2f %8.4f\n", n, kname, wr, mr * 1e3, wi,
					       mi * 1e3, (double)wi / wr);
					printf("csv,subset,%u,%s,%zu,%.6f,%zu,%.6f\n", n, kname, wr, mr, wi, mi);
				}
				rckpt_buf_free(&rin);
				rckpt_buf_free(&iin);
			}
	}

	if (!keep) {
		for (i = 0; i < s.n; i++)
			rados_remove(base_io, s.name[i]);
		rckpt_pcr_delete(h, ds);
	} else {
		printf("kept dataset %s and the baseline objects\n", ds);
	}
	rados_ioctx_destroy(base_io);
	rados_ioctx_destroy(pcr_io);
	rados_shutdown(cl);
	rckpt_destroy(h);
	return 0;
}
