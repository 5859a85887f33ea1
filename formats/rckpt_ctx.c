/*
 * rckpt_ctx.c — the CTX form of an index stream: per parent level a static
 * frequency table, then one rANS stream over every group's symbols.
 *
 *   u32 length           bytes that follow, all of them the CTX body's
 *   per nonempty group g (ascending): a table
 *     u8  k - 1          k symbols present (1..m)
 *     k x ( u8 symbol    ascending, < m
 *           LEB128 f - 1 only when k > 1; f >= 1, sum of f = 4096 )
 *   u32 x0, u32 x1       the two rANS states the decoder starts from
 *   bytes                renormalization bytes, read in order
 *
 * rANS with 32-bit states in [2^23, 2^31) and byte renormalization, two of
 * them interleaved so that a decoder works on two symbols at once: the
 * symbol at position i of the rearranged sequence is coded by state
 * x(i mod 2). A symbol s of frequency f and cumulative frequency c (the
 * sum of the table's frequencies before it) is decoded from its state x
 * by slot = x mod 4096, s the symbol whose [c, c + f) holds slot, x = f *
 * (x >> 12) + slot - c, then while x < 2^23 x = x << 8 | next byte.
 * Decoding ends with both states 2^23 and every byte read. A group with
 * one symbol reads nothing.
 */
#include "rckpt_ctx.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SCALE (1u << RCKPT_CTX_SCALE_BITS)
#define RANS_L (1u << 23)
#define TABLE_MIN 1024 /* a group this large decodes through a slot table */

typedef struct ctab {
	uint16_t f[256], c[256];
	unsigned k; /* symbols present */
} ctab_t;

/* Frequencies summing to SCALE, at least 1 for every symbol present. */
static void normalize(ctab_t *t, const uint32_t *h, unsigned m, size_t total)
{
	unsigned s, big = 0;
	long sum = 0, c = 0;

	t->k = 0;
	for (s = 0; s < m; s++) {
		uint64_t v;
		t->f[s] = 0;
		if (h[s] == 0)
			continue;
		v = ((uint64_t)h[s] * SCALE + total / 2) / total;
		t->f[s] = (uint16_t)(v ? v : 1);
		sum += t->f[s];
		t->k++;
		if (h[s] > h[big])
			big = s;
	}
	while (sum > (long)SCALE) { /* rounding up the rare ones overshot */
		unsigned b = big;
		for (s = 0; s < m; s++)
			if (t->f[s] > t->f[b])
				b = s;
		t->f[b]--;
		sum--;
	}
	t->f[big] = (uint16_t)(t->f[big] + (SCALE - sum));
	for (s = 0; s < m; s++) {
		t->c[s] = (uint16_t)c;
		c += t->f[s];
	}
}

static int put_table(rckpt_buf_t *out, const ctab_t *t, unsigned m)
{
	uint8_t b[256 * 3 + 1];
	size_t len = 0;
	unsigned s;

	b[len++] = (uint8_t)(t->k - 1);
	for (s = 0; s < m; s++) {
		unsigned x;
		if (t->f[s] == 0)
			continue;
		b[len++] = (uint8_t)s;
		if (t->k == 1)
			continue;
		x = t->f[s] - 1u;
		do {
			b[len++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
			x >>= 7;
		} while (x);
	}
	return rckpt_buf_append(out, b, len);
}

/* Codes sym into state x (backwards), its renormalization bytes before
 * *q; x / f as (x * mul) >> sh. */
static inline uint32_t put(uint32_t x, unsigned sym, const ctab_t *t, const uint64_t *mul,
			   const unsigned *sh, uint8_t **q)
{
	const uint32_t f = t->f[sym];
	const uint32_t xmax = ((RANS_L >> RCKPT_CTX_SCALE_BITS) << 8) * f;
	uint32_t qt;
	while (x >= xmax) {
		*--*q = (uint8_t)x;
		x >>= 8;
	}
	qt = (uint32_t)(((uint64_t)x * mul[sym]) >> sh[sym]);
	return (qt << RCKPT_CTX_SCALE_BITS) + (x - qt * f) + t->c[sym];
}

int rckpt_ctx_encode(rckpt_buf_t *out, const uint8_t *e, const size_t *cnt, unsigned ngroups,
		     unsigned m)
{
	ctab_t *tab = NULL;
	uint8_t *rb = NULL, *q;
	size_t n = 0, pos, lenat, i;
	uint32_t h[256], x[2] = { RANS_L, RANS_L };
	unsigned g;
	int rc;

	if (m < 2 || m > 255)
		return -EINVAL;
	for (g = 0; g < ngroups; g++)
		n += cnt[g];
	if (n > (SIZE_MAX - 12) / 2)
		return -EINVAL;
	tab = malloc(sizeof(*tab) * (ngroups ? ngroups : 1));
	/* a renormalized state is below 2^31 and renormalizes down to at
	 * least 2^19: at most 2 bytes a symbol, then the two states */
	rb = malloc(2 * n + 12);
	if (tab == NULL || rb == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	lenat = out->len;
	if ((rc = rckpt_buf_put_u32(out, 0)))
		goto out;
	for (g = 0, pos = 0; g < ngroups; pos += cnt[g], g++) {
		if (cnt[g] == 0)
			continue;
		memset(h, 0, sizeof(h));
		for (i = pos; i < pos + cnt[g]; i++)
			h[e[i]]++;
		for (i = m; i < 256; i++)
			if (h[i]) {
				rc = -EINVAL;
				goto out;
			}
		normalize(&tab[g], h, m, cnt[g]);
		if ((rc = put_table(out, &tab[g], m)))
			goto out;
	}
	/* rANS codes backwards: the last symbol first, bytes from the end. */
	q = rb + 2 * n + 12;
	for (g = ngroups; g-- > 0;) {
		const ctab_t *t = &tab[g];
		uint64_t mul[256];
		unsigned sh[256], s;
		pos -= cnt[g];
		if (cnt[g] == 0 || t->k == 1)
			continue; /* a frequency of 4096 leaves the state as it is */
		/* x / f as (x * mul) >> sh, exact for x < 2^31 (Granlund and
		 * Montgomery: l = ceil(log2 f), mul = floor(2^(31 + l) / f) + 1),
		 * and a renormalized x is below 2^19 f <= 2^31 */
		for (s = 0; s < m; s++) {
			unsigned l = 0;
			if (t->f[s] == 0)
				continue;
			while ((1u << l) < t->f[s])
				l++;
			sh[s] = 31 + l;
			mul[s] = ((uint64_t)1 << sh[s]) / t->f[s] + 1;
		}
		{
			uint32_t x0 = x[0], x1 = x[1]; /* in registers, by parity */
			for (i = pos + cnt[g]; i-- > pos;) {
				const unsigned sym = e[i];
				if (i & 1)
					x1 = put(x1, sym, t, mul, sh, &q);
				else
					x0 = put(x0, sym, t, mul, sh, &q);
			}
			x[0] = x0;
			x[1] = x1;
		}
	}
	for (g = 2; g-- > 0;) { /* x1, then x0 in front of it */
		q -= 4;
		q[0] = (uint8_t)x[g];
		q[1] = (uint8_t)(x[g] >> 8);
		q[2] = (uint8_t)(x[g] >> 16);
		q[3] = (uint8_t)(x[g] >> 24);
	}
	if ((rc = rckpt_buf_append(out, q, (size_t)(rb + 2 * n + 12 - q))))
		goto out;
	if (out->len - lenat - 4 > UINT32_MAX) {
		rc = -EINVAL;
		goto out;
	}
	rckpt_buf_set_u32(out, lenat, (uint32_t)(out->len - lenat - 4));
out:
	free(tab);
	free(rb);
	return rc;
}

/* A table read back: its symbols, frequencies and cumulative frequencies. */
typedef struct dtab {
	uint8_t sym[256];
	uint16_t f[256], c[257];
	unsigned k;
} dtab_t;

static int get_table(dtab_t *t, unsigned m, rckpt_reader_t *b)
{
	unsigned i, sum = 0;
	int last = -1;

	t->k = rckpt_rd_u8(b) + 1u;
	if (b->err || t->k > m)
		return -EBADMSG;
	for (i = 0; i < t->k; i++) {
		unsigned s = rckpt_rd_u8(b), f = SCALE, shift = 0, byte;
		if (t->k > 1) {
			f = 0;
			do { /* f - 1 < 4096: two bytes at most */
				byte = rckpt_rd_u8(b);
				f |= (byte & 0x7fu) << shift;
				shift += 7;
			} while ((byte & 0x80) && shift < 14);
			if (byte & 0x80)
				return -EBADMSG;
			f += 1;
		}
		if (b->err || (int)s <= last || s >= m || f > SCALE - sum)
			return -EBADMSG;
		last = (int)s;
		t->sym[i] = (uint8_t)s;
		t->f[i] = (uint16_t)f;
		t->c[i] = (uint16_t)sum;
		sum += f;
	}
	t->c[t->k] = (uint16_t)sum;
	return sum == SCALE ? 0 : -EBADMSG;
}

/* The entry of t whose [c, c + f) holds slot: a binary search. */
static unsigned find(const dtab_t *t, unsigned slot)
{
	unsigned lo = 0, hi = t->k; /* c[lo] <= slot < c[hi] */
	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;
		if (t->c[mid] <= slot)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* A slot's decoding step, packed: symbol (8 bits), f - 1 (12), slot - c
 * (12). A table with k > 1 has every f < 4096. */
static inline uint32_t packed(const dtab_t *t, unsigned j, unsigned slot)
{
	return t->sym[j] | (uint32_t)(t->f[j] - 1u) << 8 | (uint32_t)(slot - t->c[j]) << 20;
}

/* One symbol from state *x: its packed step; then the state renormalized
 * from *p (< end). 0, or -1 when the bytes run out. */
static inline int step(uint8_t *out, uint32_t *x, uint32_t pk, const uint8_t **p, const uint8_t *end)
{
	*out = (uint8_t)pk;
	*x = ((pk >> 8 & 0xfffu) + 1u) * (*x >> RCKPT_CTX_SCALE_BITS) + (pk >> 20);
	while (*x < RANS_L) {
		if (*p == end)
			return -1;
		*x = *x << 8 | *(*p)++;
	}
	return 0;
}

int rckpt_ctx_decode(uint8_t *e, const size_t *cnt, unsigned ngroups, unsigned m, rckpt_reader_t *r)
{
	const uint32_t len = rckpt_rd_u32(r);
	const uint8_t *p = rckpt_rd_bytes(r, len), *end;
	rckpt_reader_t b;
	dtab_t *tab = NULL;
	uint32_t *slot = NULL, x[2];
	size_t pos, i;
	unsigned g;
	int rc = -EBADMSG;

	if (p == NULL || m < 2 || m > 255)
		goto bad;
	b = rckpt_reader(p, len);
	tab = malloc(sizeof(*tab) * (ngroups ? ngroups : 1));
	if (tab == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (g = 0; g < ngroups; g++)
		if (cnt[g] && get_table(&tab[g], m, &b))
			goto bad;
	x[0] = rckpt_rd_u32(&b);
	x[1] = rckpt_rd_u32(&b);
	if (b.err)
		goto bad;
	p = b.p + b.pos;
	end = b.p + b.len;
	for (g = 0, pos = 0; g < ngroups; pos += cnt[g], g++) {
		const dtab_t *t = &tab[g];
		const size_t hi = pos + cnt[g];
		if (cnt[g] == 0)
			continue;
		if (t->k == 1) {
			memset(e + pos, t->sym[0], cnt[g]);
			continue;
		}
		if (cnt[g] < TABLE_MIN) {
			for (i = pos; i < hi; i++) {
				const unsigned s = x[i & 1] & (SCALE - 1);
				if (step(e + i, &x[i & 1], packed(t, find(t, s), s), &p, end))
					goto bad;
			}
			continue;
		}
		if (slot == NULL && (slot = malloc(sizeof(*slot) * SCALE)) == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		{
			unsigned j, s;
			for (j = 0; j < t->k; j++)
				for (s = t->c[j]; s < t->c[j + 1]; s++)
					slot[s] = packed(t, j, s);
		}
		i = pos;
		if (i & 1) {
			if (step(e + i, &x[1], slot[x[1] & (SCALE - 1)], &p, end))
				goto bad;
			i++;
		}
		{
			uint32_t x0 = x[0], x1 = x[1]; /* two chains at once */
			for (; i + 2 <= hi; i += 2) {
				if (step(e + i, &x0, slot[x0 & (SCALE - 1)], &p, end) ||
				    step(e + i + 1, &x1, slot[x1 & (SCALE - 1)], &p, end))
					goto bad;
			}
			x[0] = x0;
			x[1] = x1;
		}
		if (i < hi && step(e + i, &x[0], slot[x[0] & (SCALE - 1)], &p, end))
			goto bad;
	}
	if (x[0] != RANS_L || x[1] != RANS_L || p != end)
		goto bad;
	rc = 0;
	goto out;
bad:
	r->err = -EBADMSG;
	rc = -EBADMSG;
out:
	free(tab);
	free(slot);
	return rc;
}
