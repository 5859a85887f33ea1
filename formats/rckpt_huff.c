/*
 * rckpt_huff.c — canonical, length-limited Huffman coding.
 *
 * Code lengths come from an ordinary Huffman tree (two-queue construction),
 * then lengths past RCKPT_HUFF_MAX_BITS are folded back in the way of JPEG's
 * Annex K.3, which keeps the code complete. Codes are canonical by (length,
 * symbol) and written least-significant bit first, bit-reversed, so the
 * decoder indexes its table with the next 12 bits of the stream.
 */
#include "rckpt_huff.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BITS RCKPT_HUFF_MAX_BITS
#define TABLE_SIZE (1u << MAX_BITS)
#define DEPTH_MAX 64 /* a tree over < 2^64 weights is shallower than this */

typedef struct leaf {
	uint64_t freq;
	uint16_t sym;
} leaf_t;

static int leaf_by_freq(const void *a, const void *b)
{
	const leaf_t *x = a, *y = b;
	if (x->freq != y->freq)
		return x->freq < y->freq ? -1 : 1;
	return (int)x->sym - (int)y->sym;
}

static unsigned reverse_bits(unsigned code, unsigned len)
{
	unsigned r = 0;
	while (len--) {
		r = r << 1 | (code & 1);
		code >>= 1;
	}
	return r;
}

/* Code lengths for the m >= 2 leaves (sorted by ascending frequency) into
 * len[sym]. Deterministic: ties break by symbol. */
static int build_lengths(const leaf_t *lv, unsigned m, uint8_t *len)
{
	uint64_t *w = malloc(sizeof(uint64_t) * 2 * m);
	uint32_t *parent = malloc(sizeof(uint32_t) * 2 * m);
	uint8_t *depth = malloc(2 * m);
	unsigned count[DEPTH_MAX + 1] = { 0 };
	unsigned i, li = 0, qi = m, qn = m, nodes, l, k;
	int rc = -ENOMEM;

	if (w == NULL || parent == NULL || depth == NULL)
		goto out;
	for (i = 0; i < m; i++)
		w[i] = lv[i].freq;
	/* Leaves are 0..m-1 in ascending order; internal nodes m.. are made in
	 * ascending weight order, so the smaller of the two queue heads is the
	 * next smallest node. */
	for (nodes = m; nodes < 2 * m - 1; nodes++) {
		unsigned pick[2];
		for (k = 0; k < 2; k++) {
			if (li < m && (qi >= qn || w[li] <= w[qi]))
				pick[k] = li++;
			else
				pick[k] = qi++;
		}
		w[nodes] = w[pick[0]] + w[pick[1]];
		parent[pick[0]] = parent[pick[1]] = nodes;
		qn++;
	}
	depth[2 * m - 2] = 0;
	for (i = 2 * m - 2; i-- > 0;) {
		unsigned d = depth[parent[i]] + 1u;
		depth[i] = (uint8_t)(d > DEPTH_MAX ? DEPTH_MAX : d);
	}
	for (i = 0; i < m; i++)
		count[depth[i]]++;
	/* Fold lengths > MAX_BITS: two leaves at depth l become one at l-1,
	 * and a leaf at a shallower depth j splits into two at j+1. */
	for (l = DEPTH_MAX; l > MAX_BITS; l--) {
		while (count[l] > 0) {
			unsigned j = l - 2;
			while (count[j] == 0)
				j--;
			count[l] -= 2;
			count[l - 1] += 1;
			count[j + 1] += 2;
			count[j] -= 1;
		}
	}
	/* The most frequent symbols take the shortest lengths. */
	k = m;
	for (l = 1; l <= MAX_BITS; l++)
		for (i = 0; i < count[l]; i++)
			len[lv[--k].sym] = (uint8_t)l;
	rc = 0;
out:
	free(w);
	free(parent);
	free(depth);
	return rc;
}

/* Canonical codes from lengths: codes[sym] holds the bit-reversed code. */
static void canonical_codes(const uint8_t *len, unsigned nsym, uint16_t *codes)
{
	unsigned count[MAX_BITS + 1] = { 0 }, next[MAX_BITS + 1], l, s, c = 0;

	for (s = 0; s < nsym; s++)
		count[len[s]]++;
	count[0] = 0;
	for (l = 1; l <= MAX_BITS; l++) {
		c = (c + count[l - 1]) << 1;
		next[l] = c;
	}
	for (s = 0; s < nsym; s++)
		if (len[s])
			codes[s] = (uint16_t)reverse_bits(next[len[s]]++, len[s]);
}

int rckpt_huff_plan(uint8_t *len, size_t *bytes, const uint64_t *freq, unsigned nsym)
{
	leaf_t *lv;
	unsigned a = 0, m = 0, s;
	uint64_t bits = 0;
	int rc = -EINVAL;

	if (nsym < 2 || nsym > RCKPT_HUFF_MAX_SYMBOLS)
		return -EINVAL;
	memset(len, 0, nsym);
	if ((lv = malloc(sizeof(*lv) * nsym)) == NULL)
		return -ENOMEM;
	for (s = 0; s < nsym; s++) {
		if (freq[s]) {
			lv[m].freq = freq[s];
			lv[m].sym = (uint16_t)s;
			m++;
			a = s + 1;
		}
	}
	if (m >= 2) {
		qsort(lv, m, sizeof(*lv), leaf_by_freq);
		rc = build_lengths(lv, m, len);
	}
	for (s = 0; rc == 0 && s < a; s++)
		bits += freq[s] * len[s];
	if (rc == 0)
		*bytes = 2 + ((size_t)a + 1) / 2 + (size_t)((bits + 7) / 8);
	free(lv);
	return rc;
}

/* The block of n symbols (s16[i], or s8[i] when s8 is set) with code
 * lengths len[0..nsym), appended to out. */
static int emit(rckpt_buf_t *out, const uint16_t *s16, const uint8_t *s8, size_t n,
		const uint8_t *len, unsigned nsym, size_t bytes)
{
	uint16_t codes[RCKPT_HUFF_MAX_SYMBOLS];
	uint64_t acc = 0;
	unsigned a = 0, s, accbits = 0;
	size_t i;
	uint8_t *p;
	int rc;

	for (s = 0; s < nsym; s++)
		if (len[s])
			a = s + 1;
	canonical_codes(len, a, codes);
	/* Header: alphabet size, then the lengths as nibbles, low first. */
	/* the block's size when known (rckpt_huff_plan's), else the worst;
	 * and room for the last 8-byte store */
	if ((rc = rckpt_buf_reserve(out, (bytes ? bytes : 2 + (a + 1) / 2 + n * MAX_BITS / 8) + 16)))
		return rc;
	p = out->p + out->len;
	p[0] = (uint8_t)a;
	p[1] = (uint8_t)(a >> 8);
	p += 2;
	for (s = 0; s < a; s += 2)
		*p++ = (uint8_t)(len[s] | (s + 1 < a ? len[s + 1] << 4 : 0));
	/* up to four codes (48 bits) join the fewer than 8 bits left over,
	 * then every whole byte goes out in one 8-byte store (the reserve
	 * above leaves room past the end) */
	for (i = 0; i < n;) {
		const size_t end = n - i >= 4 ? i + 4 : n;
		for (; i < end; i++) {
			const unsigned v = s8 ? s8[i] : s16[i];
			acc |= (uint64_t)codes[v] << accbits;
			accbits += len[v];
		}
		for (s = 0; s < 8; s++)
			p[s] = (uint8_t)(acc >> (8 * s));
		p += accbits >> 3;
		acc = accbits >= 64 ? 0 : acc >> (accbits & ~7u);
		accbits &= 7;
	}
	if (accbits > 0)
		*p++ = (uint8_t)acc;
	out->len = (size_t)(p - out->p);
	return 0;
}

int rckpt_huff_encode(rckpt_buf_t *out, const uint16_t *syms, size_t n, unsigned nsym)
{
	uint64_t *freq;
	uint8_t len[RCKPT_HUFF_MAX_SYMBOLS];
	size_t i, bytes;
	int rc = -EINVAL;

	if (nsym < 2 || nsym > RCKPT_HUFF_MAX_SYMBOLS)
		return -EINVAL;
	if ((freq = calloc(nsym, sizeof(*freq))) == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (syms[i] >= nsym)
			goto out;
		freq[syms[i]]++;
	}
	if ((rc = rckpt_huff_plan(len, &bytes, freq, nsym)) == 0)
		rc = emit(out, syms, NULL, n, len, nsym, bytes);
out:
	free(freq);
	return rc;
}

int rckpt_huff_encode8(rckpt_buf_t *out, const uint8_t *syms, size_t n, const uint8_t len[256],
		       size_t bytes)
{
	return emit(out, NULL, syms, n, len, 256, bytes);
}

/* A stream of at least this many symbols of an alphabet of at most 256
 * decodes through a table of up to three symbols an entry: below it, the
 * table costs more to fill than it saves. */
#define MULTI_MIN 8192

/* multi[k] for the next maxlen bits k: as many whole codes as they hold,
 * up to three: the bits they take (bits 0..4), how many (5..6), and the
 * symbols, 8 bits each from bit 8. table: the one-code table, which gives
 * for any k the first code's symbol and length. */
static void multi_table(uint32_t *multi, const uint16_t *table, unsigned maxlen)
{
	const unsigned mask = (1u << maxlen) - 1;
	unsigned k;
	for (k = 0; k <= mask; k++) {
		uint32_t syms = 0;
		unsigned used = 0, cnt = 0;
		while (cnt < 3) {
			/* the bits past used are k's own; above them, zeros: a
			 * code that fits in what is left is read right */
			const unsigned e = table[(k >> used) & mask], l = e >> MAX_BITS;
			if (l > maxlen - used)
				break;
			syms |= (uint32_t)(e & 0xff) << (8 * cnt);
			cnt++;
			used += l;
		}
		multi[k] = used | cnt << 5 | syms << 8;
	}
}

/* Symbol i goes to s8[i] when s8 is set (an alphabet of at most 256),
 * else to s16[i]; GCC unswitches the loops on it. */
#define PUT(i, v) (s8 ? (void)(s8[i] = (uint8_t)(v)) : (void)(s16[i] = (uint16_t)(v)))

static int decode(uint16_t *s16, uint8_t *s8, size_t n, unsigned nsym, const uint8_t *src, size_t len)
{
	uint8_t lens[RCKPT_HUFF_MAX_SYMBOLS];
	uint16_t codes[RCKPT_HUFF_MAX_SYMBOLS];
	uint16_t table[TABLE_SIZE];
	uint64_t buf = 0, kraft = 0;
	unsigned a, s, bits = 0, maxlen = 0, mask;
	size_t i, pos, hdr;
	int rc = -EBADMSG;

	if (len < 2 || nsym > RCKPT_HUFF_MAX_SYMBOLS)
		return -EBADMSG;
	a = (unsigned)src[0] | (unsigned)src[1] << 8;
	hdr = 2 + ((size_t)a + 1) / 2;
	if (a < 2 || a > nsym || len < hdr)
		return -EBADMSG;
	for (s = 0; s < a; s++) {
		lens[s] = (uint8_t)((src[2 + s / 2] >> (s & 1 ? 4 : 0)) & 15);
		if (lens[s] > MAX_BITS)
			return -EBADMSG;
		if (lens[s])
			kraft += 1u << (MAX_BITS - lens[s]);
		if (lens[s] > maxlen)
			maxlen = lens[s];
	}
	if (a & 1 && src[hdr - 1] >> 4) /* the unused nibble must be zero */
		return -EBADMSG;
	if (kraft != TABLE_SIZE) /* incomplete or over-full code */
		return -EBADMSG;
	/* A table of 2^maxlen entries, not 2^MAX_BITS: small streams have
	 * short codes, and filling the table is most of their cost. */
	mask = (1u << maxlen) - 1;
	canonical_codes(lens, a, codes);
	for (s = 0; s < a; s++) {
		unsigned k, step = 1u << lens[s];
		if (lens[s] == 0)
			continue;
		for (k = codes[s]; k <= mask; k += step)
			table[k] = (uint16_t)(lens[s] << MAX_BITS | s);
	}

	pos = hdr;
	i = 0;
	if (a <= 256 && n >= MULTI_MIN) {
		uint32_t multi[TABLE_SIZE];
		multi_table(multi, table, maxlen);
		/* four look-ups of at most maxlen bits each, each giving up to
		 * three symbols, while the output has room for twelve */
		while (n - i >= 12) {
			unsigned k;
			if (len - pos < 8)
				break; /* the tail: one code at a time, checked */
			{
				uint64_t v = 0;
				for (k = 0; k < 8; k++)
					v |= (uint64_t)src[pos + k] << (8 * k);
				buf |= v << bits;
				pos += (63 - bits) >> 3;
				bits |= 56;
			}
			for (k = 0; k < 4; k++) {
				const uint32_t me = multi[buf & mask];
				PUT(i, me >> 8 & 0xff);
				PUT(i + 1, me >> 16 & 0xff);
				PUT(i + 2, me >> 24);
				i += me >> 5 & 3;
				buf >>= me & 31;
				bits -= me & 31;
			}
		}
	}
	while (i < n) {
		unsigned e, l;
		if (bits < 4 * MAX_BITS) {
			if (len - pos >= 8) {
				uint64_t v = 0;
				unsigned k;
				for (k = 0; k < 8; k++)
					v |= (uint64_t)src[pos + k] << (8 * k);
				buf |= v << bits;
				pos += (63 - bits) >> 3;
				bits |= 56;
			} else {
				while (bits <= 56 && pos < len) {
					buf |= (uint64_t)src[pos++] << bits;
					bits += 8;
				}
			}
		}
		if (bits >= 4 * MAX_BITS && n - i >= 4) {
			/* four codes of at most MAX_BITS each are in buf */
			unsigned k;
			for (k = 0; k < 4; k++) {
				e = table[buf & mask];
				l = e >> MAX_BITS;
				PUT(i, e & (TABLE_SIZE - 1));
				i++;
				buf >>= l;
				bits -= l;
			}
			continue;
		}
		e = table[buf & mask];
		l = e >> MAX_BITS;
		if (l > bits) /* the code runs past the end of the block */
			goto out;
		PUT(i, e & (TABLE_SIZE - 1));
		i++;
		buf >>= l;
		bits -= l;
	}
	/* What is left must be the zero padding of the last byte. */
	if (pos != len || bits >= 8 || (buf & ((1u << bits) - 1)) != 0)
		goto out;
	rc = 0;
out:
	return rc;
}

int rckpt_huff_decode(uint16_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len)
{
	return decode(syms, NULL, n, nsym, src, len);
}

int rckpt_huff_decode8(uint8_t *syms, size_t n, const uint8_t *src, size_t len)
{
	return decode(NULL, syms, n, 256, src, len);
}
