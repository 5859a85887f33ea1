/*
 * bench_pcr.h — what bench_pcr.c and bench_pcr_pairs.c (sections 5 and 6)
 * share: one program, two files.
 */
#ifndef RCKPT_BENCH_PCR_H
#define RCKPT_BENCH_PCR_H

#include <stddef.h>
#include <stdint.h>
#include <turbojpeg.h>

#include <rados/librados.h>

#include "rckpt.h"

#define PAIRS_MAX 64 /* rounds of pairs kept */

/* The source JPEGs, in name order. */
typedef struct src {
	char **name;
	uint8_t **data;
	size_t *len;
	unsigned n;
	uint64_t bytes, pixels;
} src_t;

/* Prints what failed and exits 1. */
void die(const char *what, int rc);
/* The median of v[0..n) (sorts v). */
double median(double *v, int n);
/* Seconds to read every source JPEG from its object and decode it on
 * threads (at scale[i] each, or full size); *bytes read. */
double baseline_read(rados_ioctx_t io, const src_t *s, unsigned threads, uint64_t *bytes,
		     const uint8_t *scale);
/* Seconds to read and decode the dataset through its first k groups. */
double pcr_read(rckpt_t *h, const char *ds, unsigned k, unsigned threads, unsigned scale,
		uint64_t *bytes, unsigned *images, uint64_t *pixels);
/* Seconds to decode n JPEGs in memory on one core (at scale[i] each). */
double decode_all_at(tjhandle th, uint8_t *const *jpg, const size_t *len, unsigned n, uint8_t *px,
		     uint64_t *pixels, const uint8_t *scale);

/* 5. decode at reduced scale, in memory then from the cluster, in pairs. */
void scaled_sections(rckpt_t *h, const char *ds, rados_ioctx_t base_io, const src_t *s, unsigned G,
		     uint8_t **jk[], size_t *lk[], tjhandle th, uint8_t *px, const unsigned *thr,
		     unsigned nthr, const unsigned *scales, unsigned nscales, int R);
/* 6. each prefix transcoded losslessly to a baseline JPEG, decode only. */
void transcode_section(unsigned G, uint8_t **jk[], size_t *lk[], unsigned n, tjhandle th, uint8_t *px,
		       int R);

#endif
