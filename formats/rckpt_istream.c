/*
 * rckpt_istream.c — index stream: delta, rearrangement, run length, entropy.
 *
 *   u8  stages          RCKPT_IS_* flags; other bits must be zero
 *   if RLE: u32 ntokens, u32 nlenbytes
 *   estream tokens      alphabet M (no RLE) or 2M (RLE)
 *   if RLE: estream run lengths, alphabet 256 (LEB128 bytes)
 *
 * M is max(lcur, lprev) for a delta, lcur for a base. A delta symbol is
 * (cur - prev) mod M. Rearranged: symbols are ordered by the parent's index
 * (stable), which the decoder knows, so no permutation is stored. RLE token
 * t < M is the symbol t once; t = M + v is v repeated r >= 2 times, r - 2
 * being the next LEB128 number of the run-length stream.
 *
 * CTX (rckpt_ctx.c) replaces the tokens of a rearranged delta: u32 length,
 * then one frequency table per parent level present and a rANS stream.
 */
#include "rckpt_istream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_ctx.h"
#include "rckpt_estream.h"

#define LEB_MAX_BYTES 5 /* run lengths < 2^35 */

static unsigned modulus(const uint8_t *prev, unsigned lcur, unsigned lprev)
{
	return prev && lprev > lcur ? lprev : lcur;
}

/*
 * Stable counting sort by key, in four lanes: the array is cut into four
 * quarters, each with its own histogram and offsets (a lane's offset for key
 * k starts after the earlier lanes' k), and the lanes advance together. A
 * run of one key then does not serialize every store through one counter,
 * and the result is exactly that of the one-lane sort.
 */
#define LANES 4

static void lane_offsets(size_t off[LANES][RCKPT_ISTREAM_MAX_LEVELS + 1], const uint8_t *key,
			 size_t n, unsigned nkeys, size_t q)
{
	size_t i, sum = 0;
	unsigned k, l;

	memset(off, 0, sizeof(size_t) * LANES * (RCKPT_ISTREAM_MAX_LEVELS + 1));
	/* the lanes advance together, so a run of one key is four chains */
	for (i = 0; i < q; i++)
		for (l = 0; l < LANES; l++)
			off[l][key[l * q + i]]++;
	for (i = LANES * q; i < n; i++)
		off[LANES - 1][key[i]]++;
	for (k = 0; k < nkeys; k++)
		for (l = 0; l < LANES; l++) {
			size_t c = off[l][k];
			off[l][k] = sum;
			sum += c;
		}
}

/* The cyclic delta (cur - key) mod m, grouped by key in the same pass. */
static inline uint8_t cdelta(uint8_t c, uint8_t p, unsigned m)
{
	return (uint8_t)(c - p + (c < p ? m : 0));
}

/* Also checks the input on the way: returns nonzero when a key is >= nkeys
 * (seen in the histogram) or a cur value is >= lcur. */
static unsigned group_delta(uint8_t *e, const uint8_t *cur, const uint8_t *key, size_t n,
			    unsigned nkeys, unsigned m, unsigned lcur)
{
	size_t off[LANES][RCKPT_ISTREAM_MAX_LEVELS + 1], q = n / LANES, i;
	unsigned l, bad = 0;

	/* Offsets over every possible key: lane 0's offset of key nkeys counts
	 * the elements whose key is below nkeys, which must be all of them. */
	lane_offsets(off, key, n, RCKPT_ISTREAM_MAX_LEVELS + 1, q);
	if (nkeys <= RCKPT_ISTREAM_MAX_LEVELS && off[0][nkeys] != n)
		return 1;
	for (i = 0; i < q; i++)
		for (l = 0; l < LANES; l++) {
			const size_t j = l * q + i;
			bad |= (unsigned)(cur[j] >= lcur);
			e[off[l][key[j]]++] = cdelta(cur[j], key[j], m);
		}
	for (i = LANES * q; i < n; i++) {
		bad |= (unsigned)(cur[i] >= lcur);
		e[off[LANES - 1][key[i]]++] = cdelta(cur[i], key[i], m);
	}
	return bad;
}

/* The inverse of the grouping (ungroup_by). */
static void ungroup_by(uint8_t *d, const uint8_t *e, const uint8_t *key, size_t n, unsigned nkeys)
{
	size_t off[LANES][RCKPT_ISTREAM_MAX_LEVELS + 1], q = n / LANES, i;
	unsigned l;

	lane_offsets(off, key, n, nkeys, q);
	for (i = 0; i < q; i++)
		for (l = 0; l < LANES; l++)
			d[l * q + i] = e[off[l][key[l * q + i]]++];
	for (i = LANES * q; i < n; i++)
		d[i] = e[off[LANES - 1][key[i]]++];
}

/*
 * The sparse path of a rearranged delta with RLE. Most levels do not change
 * between steps, so most of the rearranged symbols are 0. One pass counts
 * the keys per lane (which gives each element its rank within its group)
 * and keeps only the nonzero deltas, with key, lane and rank; sorting those
 * few by (key, lane) puts them in stream order, and the runs follow from the
 * gaps between them. RLE of a given sequence is canonical, so the tokens are
 * those of the scatter path. When more than 1/8 of the deltas are nonzero
 * the caller falls back to the scatter path.
 */
typedef struct nzent {
	uint32_t rank; /* within its (lane, key) group */
	uint8_t key, lane, val, pad;
} nzent_t;

typedef struct rle_out {
	uint16_t *tok, *lens;
	size_t ntok, nlen;
	unsigned m, val;
	size_t len; /* the pending run */
} rle_out_t;

static void rle_emit(rle_out_t *o)
{
	if (o->len == 1) {
		o->tok[o->ntok++] = (uint16_t)o->val;
	} else if (o->len >= 2) {
		size_t x = o->len - 2;
		o->tok[o->ntok++] = (uint16_t)(o->m + o->val);
		do {
			o->lens[o->nlen++] = (uint16_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
			x >>= 7;
		} while (x);
	}
}

static void rle_push(rle_out_t *o, unsigned val, size_t count)
{
	if (count == 0)
		return;
	if (val == o->val) {
		o->len += count;
		return;
	}
	rle_emit(o);
	o->val = val;
	o->len = count;
}

/* Returns 1 when it took the input (tokens in o), 0 to fall back, and sets
 * *bad for an out-of-range level. */
static int sparse_rearranged(rle_out_t *o, rckpt_istream_scratch_t *sc, const uint8_t *cur,
			     const uint8_t *prev, size_t n, unsigned lprev, unsigned lcur, unsigned m,
			     unsigned *bad)
{
	size_t cnt[LANES][RCKPT_ISTREAM_MAX_LEVELS + 1], base[LANES][RCKPT_ISTREAM_MAX_LEVELS + 1];
	size_t q = n / LANES, i, nnz = 0, cap = n / 8 + 64, pos = 0, sum = 0;
	size_t start[LANES * (RCKPT_ISTREAM_MAX_LEVELS + 1) + 1];
	nzent_t *e, *sorted;
	unsigned l, k, bd = 0;

	if (n < 4096 || n > UINT32_MAX)
		return 0;
	if (sc->nzcap < 2 * cap) {
		void *p = realloc(sc->nz, sizeof(nzent_t) * 2 * cap);
		if (p == NULL)
			return 0;
		sc->nz = p;
		sc->nzcap = 2 * cap;
	}
	e = sc->nz;
	sorted = e + cap;
	memset(cnt, 0, sizeof(cnt));
	for (i = 0; i < q; i++)
		for (l = 0; l < LANES; l++) {
			const size_t j = l * q + i;
			const uint8_t c = cur[j], p = prev[j], d = cdelta(c, p, m);
			const size_t r = cnt[l][p]++;
			bd |= (unsigned)(c >= lcur);
			if (d) {
				if (nnz == cap)
					return 0;
				e[nnz++] = (nzent_t){ (uint32_t)r, p, (uint8_t)l, d, 0 };
			}
		}
	for (i = LANES * q; i < n; i++) {
		const uint8_t c = cur[i], p = prev[i], d = cdelta(c, p, m);
		const size_t r = cnt[LANES - 1][p]++;
		bd |= (unsigned)(c >= lcur);
		if (d) {
			if (nnz == cap)
				return 0;
			e[nnz++] = (nzent_t){ (uint32_t)r, p, LANES - 1, d, 0 };
		}
	}
	for (k = lprev; k <= RCKPT_ISTREAM_MAX_LEVELS; k++)
		for (l = 0; l < LANES; l++)
			bd |= (unsigned)(cnt[l][k] != 0); /* a key >= lprev */
	*bad = bd;
	if (bd)
		return 1;
	/* stream order: key, then lane, then rank */
	for (k = 0; k <= RCKPT_ISTREAM_MAX_LEVELS; k++)
		for (l = 0; l < LANES; l++) {
			base[l][k] = sum;
			sum += cnt[l][k];
		}
	memset(start, 0, sizeof(start));
	for (i = 0; i < nnz; i++)
		start[(size_t)e[i].key * LANES + e[i].lane + 1]++;
	for (k = 1; k <= LANES * (RCKPT_ISTREAM_MAX_LEVELS + 1); k++)
		start[k] += start[k - 1];
	for (i = 0; i < nnz; i++)
		sorted[start[(size_t)e[i].key * LANES + e[i].lane]++] = e[i];
	o->val = 0;
	o->len = 0;
	for (i = 0; i < nnz; i++) {
		const size_t at = base[sorted[i].lane][sorted[i].key] + sorted[i].rank;
		rle_push(o, 0, at - pos);
		rle_push(o, sorted[i].val, 1);
		pos = at + 1;
	}
	rle_push(o, 0, n - pos);
	rle_emit(o);
	return 1;
}

/* Length of the run of d[i] starting at i (at least 1). */
static size_t run_at(const uint8_t *d, size_t i, size_t n)
{
	const uint64_t pat = 0x0101010101010101ull * d[i];
	size_t j = i + 1;

	while (j + 8 <= n) {
		uint64_t w;
		memcpy(&w, d + j, 8);
		w ^= pat;
		if (w) /* little-endian: the lowest nonzero byte ends the run */
			return j - i + (size_t)(__builtin_ctzll(w) >> 3);
		j += 8;
	}
	while (j < n && d[j] == d[i])
		j++;
	return j - i;
}

/* The input is checked on the way (branch-free, so it vectorizes): every
 * cur < lcur, every prev < lprev. */
static int symbols(uint8_t *d, const uint8_t *cur, size_t n, unsigned lcur, const uint8_t *prev,
		   unsigned lprev, unsigned m, unsigned rearranged)
{
	unsigned bad = 0;
	size_t i;
	if (prev && rearranged) {
		bad = group_delta(d, cur, prev, n, lprev, m, lcur); /* one pass */
	} else if (prev) {
		for (i = 0; i < n; i++) {
			bad |= (unsigned)(cur[i] >= lcur) | (unsigned)(prev[i] >= lprev);
			d[i] = cdelta(cur[i], prev[i], m);
		}
	} else {
		for (i = 0; i < n; i++) {
			bad |= (unsigned)(cur[i] >= lcur);
			d[i] = cur[i];
		}
	}
	return bad ? -EINVAL : 0;
}

int rckpt_istream_symbols(uint8_t *d, const uint8_t *cur, size_t n, unsigned lcur,
			  const uint8_t *prev, unsigned lprev, int rearranged)
{
	if (lcur == 0 || lcur > RCKPT_ISTREAM_MAX_LEVELS ||
	    (prev && (lprev == 0 || lprev > RCKPT_ISTREAM_MAX_LEVELS)))
		return -EINVAL;
	return symbols(d, cur, n, lcur, prev, lprev, modulus(prev, lcur, lprev), rearranged != 0);
}

void rckpt_istream_scratch_free(rckpt_istream_scratch_t *s)
{
	free(s->nz);
	free(s->d);
	free(s->tok);
	free(s->lens);
	memset(s, 0, sizeof(*s));
}

static int scratch_grow(rckpt_istream_scratch_t *s, size_t n)
{
	uint8_t *d;
	uint16_t *t, *l;
	if (n <= s->cap)
		return 0;
	d = realloc(s->d, n);
	if (d)
		s->d = d;
	t = d ? realloc(s->tok, sizeof(*t) * n) : NULL;
	if (t)
		s->tok = t;
	l = t ? realloc(s->lens, sizeof(*l) * n) : NULL;
	if (l)
		s->lens = l;
	if (!l)
		return -ENOMEM;
	s->cap = n;
	return 0;
}

/* Streams shorter than this are not tried in the CTX form: its tables
 * cost more than the context saves. */
#define CTX_MIN 256

/* The parent's level counts: cnt[0..lprev). */
static void count_levels(size_t *cnt, const uint8_t *prev, size_t n, unsigned lprev)
{
	size_t h[4][256], i;
	unsigned k;
	memset(h, 0, sizeof(h));
	for (i = 0; i + 4 <= n; i += 4) {
		h[0][prev[i]]++;
		h[1][prev[i + 1]]++;
		h[2][prev[i + 2]]++;
		h[3][prev[i + 3]]++;
	}
	for (; i < n; i++)
		h[0][prev[i]]++;
	for (k = 0; k < lprev; k++)
		cnt[k] = h[0][k] + h[1][k] + h[2][k] + h[3][k];
}

/* Replaces the stream at out->p + start by its CTX form when that is
 * smaller. d: the rearranged delta symbols. */
static int keep_smaller_ctx(rckpt_buf_t *out, size_t start, const uint8_t *d, const uint8_t *prev,
			    size_t n, unsigned lprev, unsigned m)
{
	rckpt_buf_t alt = RCKPT_BUF_INIT;
	size_t cnt[RCKPT_ISTREAM_MAX_LEVELS + 1];
	int rc;

	count_levels(cnt, prev, n, lprev);
	rc = rckpt_buf_put_u8(&alt, RCKPT_IS_DELTA | RCKPT_IS_REARRANGED | RCKPT_IS_CTX);
	if (rc == 0)
		rc = rckpt_ctx_encode(&alt, d, cnt, lprev, m);
	if (rc == 0 && alt.len < out->len - start) {
		out->len = start;
		rc = rckpt_buf_append(out, alt.p, alt.len);
	}
	rckpt_buf_free(&alt);
	return rc;
}

int rckpt_istream_encode(rckpt_buf_t *out, const uint8_t *cur, size_t n, unsigned lcur,
			 const uint8_t *prev, unsigned lprev, const rckpt_istream_opts_t *o)
{
	const size_t start = out->len;
	int have_d = 0;
	unsigned stages = (o->stages & (RCKPT_IS_REARRANGED | RCKPT_IS_RLE)) |
			  (prev ? RCKPT_IS_DELTA : 0);
	unsigned m = modulus(prev, lcur, lprev);
	uint8_t *d = NULL;
	uint16_t *tok = NULL, *lens = NULL;
	size_t i, ntok = 0, nlen = 0;
	int rc = -EINVAL;

	if (!prev)
		stages &= ~RCKPT_IS_REARRANGED;
	if (lcur == 0 || lcur > RCKPT_ISTREAM_MAX_LEVELS || n > RCKPT_EST_MAX_COUNT ||
	    (prev && (lprev == 0 || lprev > RCKPT_ISTREAM_MAX_LEVELS)))
		return -EINVAL;
	if (o->scratch) {
		if ((rc = scratch_grow(o->scratch, n ? n : 1)))
			goto out;
		d = o->scratch->d;
		tok = o->scratch->tok;
		lens = o->scratch->lens;
	} else {
		d = malloc(n ? n : 1);
		tok = malloc(sizeof(*tok) * (n ? n : 1));
		lens = malloc(sizeof(*lens) * (n ? n : 1));
		if (d == NULL || tok == NULL || lens == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (o->scratch && (stages & (RCKPT_IS_REARRANGED | RCKPT_IS_RLE)) ==
				  (RCKPT_IS_REARRANGED | RCKPT_IS_RLE)) {
		rle_out_t ro = { tok, lens, 0, 0, m, 0, 0 };
		unsigned bad = 0;
		if (sparse_rearranged(&ro, o->scratch, cur, prev, n, lprev, lcur, m, &bad)) {
			if (bad) {
				rc = -EINVAL;
				goto out;
			}
			ntok = ro.ntok;
			nlen = ro.nlen;
			goto tokens_ready;
		}
	}
	if ((rc = symbols(d, cur, n, lcur, prev, lprev, m, stages & RCKPT_IS_REARRANGED)))
		goto out;
	have_d = 1;
	if (stages & RCKPT_IS_RLE) {
		for (i = 0; i < n;) {
			size_t r = run_at(d, i, n);
			if (r == 1) {
				tok[ntok++] = d[i];
			} else {
				size_t x = r - 2;
				tok[ntok++] = (uint16_t)(m + d[i]);
				do {
					lens[nlen++] = (uint16_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
					x >>= 7;
				} while (x);
			}
			i += r;
		}
	} else {
		for (i = 0; i < n; i++)
			tok[i] = d[i];
		ntok = n;
	}

tokens_ready:
	rc = rckpt_buf_reserve(out, 9);
	if (rc)
		goto out;
	out->p[out->len++] = (uint8_t)stages;
	if (stages & RCKPT_IS_RLE) {
		rckpt_writer_t w = rckpt_writer(out->p + out->len, 8);
		rckpt_wr_u32(&w, (uint32_t)ntok);
		rckpt_wr_u32(&w, (uint32_t)nlen);
		out->len += 8;
	}
	rc = rckpt_estream_encode(out, tok, ntok, stages & RCKPT_IS_RLE ? 2 * m : m, o->est_policy,
				  o->zstd_level);
	if (rc == 0 && (stages & RCKPT_IS_RLE))
		rc = rckpt_estream_encode(out, lens, nlen, 256, o->est_policy, o->zstd_level);
	if (rc == 0 && (o->stages & RCKPT_IS_CTX) && (stages & RCKPT_IS_REARRANGED) && n >= CTX_MIN &&
	    m >= 2) {
		if (!have_d)
			rc = symbols(d, cur, n, lcur, prev, lprev, m, 1);
		if (rc == 0)
			rc = keep_smaller_ctx(out, start, d, prev, n, lprev, m);
	}
out:
	if (!o->scratch) {
		free(d);
		free(tok);
		free(lens);
	}
	return rc;
}

int rckpt_istream_peek_stages(const rckpt_reader_t *r)
{
	return rckpt_rd_left(r) >= 1 ? r->p[r->pos] : -1;
}

int rckpt_istream_peek_split(const rckpt_reader_t *r)
{
	rckpt_reader_t k = *r;
	const unsigned stages = rckpt_rd_u8(&k);
	unsigned i, streams = stages & RCKPT_IS_RLE ? 2 : 1;
	if (k.err || (stages & RCKPT_IS_CTX))
		return 0; /* a CTX body holds no entropy stream */
	if (stages & RCKPT_IS_RLE)
		(void)rckpt_rd_bytes(&k, 8);
	for (i = 0; i < streams && !k.err; i++) { /* method, count, length, payload */
		if (rckpt_estream_peek_method(&k) == RCKPT_EST_HUFF4)
			return 1;
		(void)rckpt_rd_bytes(&k, 5);
		(void)rckpt_rd_bytes(&k, rckpt_rd_u32(&k));
	}
	return 0;
}

/* The run lengths' LEB128 numbers, each + 2 (what a run covers), into
 * run[0..nrun): the number of runs, or -1 for a number cut short, longer
 * than LEB_MAX_BYTES, or past n. */
static long run_lengths(uint32_t *run, size_t nrun, const uint16_t *lens, size_t nlen, size_t n)
{
	size_t li = 0, k = 0;
	while (li < nlen) {
		uint64_t x = lens[li] & 0x7f;
		unsigned shift = 7, b = lens[li++];
		while (b & 0x80) {
			if (shift == 7 * LEB_MAX_BYTES || li >= nlen)
				return -1;
			b = lens[li++];
			x |= (uint64_t)(b & 0x7f) << shift;
			shift += 7;
		}
		if (k == nrun || x > n)
			return -1;
		run[k++] = (uint32_t)x + 2;
	}
	return (long)k;
}

/* Expands RLE tokens into d[0..n), d having RUN_SLACK bytes more: each
 * token writes RUN_SLACK bytes of its value and moves on by what it
 * covers (a literal 1, a run its length), so a stretch of literals and
 * short runs takes no branch of its own; a run longer than the slack
 * writes the rest. run: every run's length (run_lengths), and room for
 * one more, which this sets to 0 (a run token with no length left reads
 * it, and the count of runs is then wrong at the end). */
#define RUN_SLACK 16
static int unrun(uint8_t *d, size_t n, const uint16_t *tok, size_t ntok, uint32_t *run, size_t nrun,
		 unsigned m)
{
	size_t i, pos = 0, ri = 0;

	run[nrun] = 0;
	for (i = 0; i < ntok; i++) {
		const unsigned t = tok[i];
		const size_t isrun = t >= m, at = ri < nrun ? ri : nrun;
		const size_t len = 1 + (((size_t)run[at] - 1) & (0 - isrun));
		const unsigned v = t - (m & (0u - (unsigned)isrun));
		ri += isrun;
		if (len > n - pos)
			return -EBADMSG; /* past the end of d */
		memset(d + pos, (int)v, RUN_SLACK);
		if (len > RUN_SLACK)
			memset(d + pos + RUN_SLACK, (int)v, len - RUN_SLACK);
		pos += len;
	}
	return pos == n && ri == nrun ? 0 : -EBADMSG;
}

int rckpt_istream_decode(uint8_t *cur, size_t n, unsigned lcur, const uint8_t *prev,
			 unsigned lprev, rckpt_reader_t *r)
{
	unsigned stages = rckpt_rd_u8(r), m = modulus(prev, lcur, lprev);
	uint8_t *d = NULL, *e = NULL;
	uint16_t *tok = NULL, *lens = NULL;
	uint32_t *run = NULL;
	size_t i, ntok = n, nlen = 0;
	long nrun;
	int rc = -EBADMSG;

	if (r->err || (stages & ~RCKPT_IS_KNOWN) || !(stages & RCKPT_IS_DELTA) != !prev ||
	    ((stages & RCKPT_IS_REARRANGED) && !prev))
		goto bad;
	if (lcur == 0 || lcur > RCKPT_ISTREAM_MAX_LEVELS || n > RCKPT_EST_MAX_COUNT ||
	    (prev && (lprev == 0 || lprev > RCKPT_ISTREAM_MAX_LEVELS)))
		goto bad;
	if (stages & RCKPT_IS_CTX) {
		size_t cnt[RCKPT_ISTREAM_MAX_LEVELS + 1], sum = 0;
		unsigned k;
		if ((stages & (RCKPT_IS_REARRANGED | RCKPT_IS_RLE)) != RCKPT_IS_REARRANGED)
			goto bad;
		d = malloc(n ? n : 1);
		e = malloc(n ? n : 1);
		if (d == NULL || e == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		count_levels(cnt, prev, n, lprev);
		for (k = 0; k < lprev; k++)
			sum += cnt[k];
		if (sum != n) { /* a parent's level >= lprev */
			rc = -EINVAL;
			goto out;
		}
		if ((rc = rckpt_ctx_decode(e, cnt, lprev, m, r)) == -ENOMEM)
			goto out;
		if (rc)
			goto bad;
		ungroup_by(d, e, prev, n, lprev);
		goto delta;
	}
	if (!prev && !(stages & RCKPT_IS_RLE)) {
		/* a base without run lengths: its symbols are the levels, read
		 * straight into cur, each < lcur (one pass, nothing allocated) */
		if ((rc = rckpt_estream_decode8(cur, n, lcur < 256 ? lcur : 256, r)) == -ENOMEM)
			return rc;
		if (rc)
			goto bad;
		return 0;
	}
	if (stages & RCKPT_IS_RLE) {
		ntok = rckpt_rd_u32(r);
		nlen = rckpt_rd_u32(r);
		/* Every token covers at least one index; a run length takes at
		 * most LEB_MAX_BYTES bytes and each run covers two indices. */
		if (r->err || ntok > n || nlen > (n / 2) * LEB_MAX_BYTES)
			goto bad;
	}
	d = malloc(n + RUN_SLACK);
	tok = malloc(sizeof(*tok) * (ntok ? ntok : 1));
	lens = malloc(sizeof(*lens) * (nlen ? nlen : 1));
	run = malloc(sizeof(*run) * ((nlen < ntok ? nlen : ntok) + 1)); /* a run a token at most */
	if (d == NULL || tok == NULL || lens == NULL || run == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = rckpt_estream_decode(tok, ntok, stages & RCKPT_IS_RLE ? 2 * m : m, r)) == -ENOMEM)
		goto out; /* out of memory is not damage */
	if (rc)
		goto bad;
	if (stages & RCKPT_IS_RLE) {
		if ((rc = rckpt_estream_decode(lens, nlen, 256, r)) == -ENOMEM)
			goto out;
		if (rc || (nrun = run_lengths(run, nlen < ntok ? nlen : ntok, lens, nlen, n)) < 0 ||
		    unrun(d, n, tok, ntok, run, (size_t)nrun, m))
			goto bad;
	} else {
		for (i = 0; i < n; i++)
			d[i] = (uint8_t)tok[i]; /* < m <= 255, checked by the decoder */
	}
	if (prev) {
		unsigned bad = 0;
		for (i = 0; i < n; i++)
			bad |= (unsigned)(prev[i] >= lprev);
		if (bad) {
			rc = -EINVAL;
			goto out;
		}
	}
	if (stages & RCKPT_IS_REARRANGED) {
		e = malloc(n ? n : 1);
		if (e == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		ungroup_by(e, d, prev, n, lprev);
		free(d);
		d = e;
		e = NULL;
	}
delta:
	{
		/* d < m (checked by the entropy decoder), prev < m: one subtract. */
		unsigned bad = 0;
		if (prev) {
			for (i = 0; i < n; i++) {
				unsigned v = (unsigned)d[i] + prev[i];
				v = v >= m ? v - m : v;
				bad |= (unsigned)(v >= lcur);
				cur[i] = (uint8_t)v;
			}
		} else {
			for (i = 0; i < n; i++) {
				bad |= (unsigned)(d[i] >= lcur);
				cur[i] = d[i];
			}
		}
		if (bad)
			goto bad;
	}
	rc = 0;
	goto out;
bad:
	r->err = -EBADMSG;
	rc = -EBADMSG;
out:
	free(d);
	free(e);
	free(tok);
	free(lens);
	free(run);
	return rc;
}
