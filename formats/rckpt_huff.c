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

#include "rckpt_bytes.h"

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

/* The codes of symbols [i, end) (s16[i], or s8[i] when s8 is set) from
 * p on, zero padded to a byte; returns the end. Up to four codes (48
 * bits) join the fewer than 8 bits left over, then every whole byte goes
 * out in one 8-byte store (the caller leaves room past the end). */
static uint8_t *put_codes(uint8_t *p, const uint16_t *s16, const uint8_t *s8, size_t i, size_t end,
			  const uint8_t *len, const uint16_t *codes)
{
	uint64_t acc = 0;
	unsigned accbits = 0, s;
	while (i < end) {
		const size_t stop = end - i >= 4 ? i + 4 : end;
		for (; i < stop; i++) {
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
	return p;
}

/* The block of n symbols (s16[i], or s8[i] when s8 is set) with code
 * lengths len[0..nsym), appended to out: one stream of codes, or with
 * split the four of a split block. */
static int emit(rckpt_buf_t *out, const uint16_t *s16, const uint8_t *s8, size_t n,
		const uint8_t *len, unsigned nsym, size_t bytes, int split)
{
	uint16_t codes[RCKPT_HUFF_MAX_SYMBOLS];
	unsigned a = 0, s, k;
	uint8_t *p, *lens;
	int rc;

	for (s = 0; s < nsym; s++)
		if (len[s])
			a = s + 1;
	canonical_codes(len, a, codes);
	/* the block's size when known (rckpt_huff_plan's, plus a split
	 * block's lengths and its streams' padding), else the worst; and
	 * room for the last 8-byte store */
	if (bytes == 0)
		bytes = 2 + (a + 1) / 2 + n * MAX_BITS / 8 + 1;
	if ((rc = rckpt_buf_reserve(out, bytes + (split ? RCKPT_HUFF_SPLIT_BYTES + 3 : 0) + 16)))
		return rc;
	/* Header: alphabet size, then the lengths as nibbles, low first. */
	p = out->p + out->len;
	p[0] = (uint8_t)a;
	p[1] = (uint8_t)(a >> 8);
	p += 2;
	for (s = 0; s < a; s += 2)
		*p++ = (uint8_t)(len[s] | (s + 1 < a ? len[s + 1] << 4 : 0));
	if (!split) {
		p = put_codes(p, s16, s8, 0, n, len, codes);
		out->len = (size_t)(p - out->p);
		return 0;
	}
	/* stream k: symbols [k q, (k + 1) q), the last to n; the first
	 * three's byte lengths ahead of them */
	lens = p;
	p += RCKPT_HUFF_SPLIT_BYTES;
	for (k = 0; k < 4; k++) {
		const size_t q = n / 4, from = k * q, to = k < 3 ? from + q : n;
		uint8_t *start = p;
		p = put_codes(p, s16, s8, from, to, len, codes);
		if (k < 3) {
			rckpt_writer_t w = rckpt_writer(lens + 4 * k, 4);
			if ((size_t)(p - start) > UINT32_MAX)
				return -EFBIG;
			rckpt_wr_u32(&w, (uint32_t)(p - start));
		}
	}
	out->len = (size_t)(p - out->p);
	return 0;
}

int rckpt_huff_encode(rckpt_buf_t *out, const uint16_t *syms, size_t n, unsigned nsym, int split)
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
		rc = emit(out, syms, NULL, n, len, nsym, bytes, split);
out:
	free(freq);
	return rc;
}

int rckpt_huff_encode8(rckpt_buf_t *out, const uint8_t *syms, size_t n, const uint8_t len[256],
		       size_t bytes)
{
	return emit(out, NULL, syms, n, len, 256, bytes, 0);
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

/* A block's code: its one-code table over the next maxlen bits (symbol,
 * and length from bit MAX_BITS on). */
typedef struct code {
	uint16_t table[TABLE_SIZE];
	unsigned a, maxlen, mask;
	size_t hdr; /* the header's bytes */
} code_t;

/* The block header at src[0..len): the lengths checked (a complete code
 * of an alphabet within nsym), the table filled. */
static int code_read(code_t *c, unsigned nsym, const uint8_t *src, size_t len)
{
	uint8_t lens[RCKPT_HUFF_MAX_SYMBOLS];
	uint16_t codes[RCKPT_HUFF_MAX_SYMBOLS];
	uint64_t kraft = 0;
	unsigned s;

	if (len < 2 || nsym > RCKPT_HUFF_MAX_SYMBOLS)
		return -EBADMSG;
	c->a = (unsigned)src[0] | (unsigned)src[1] << 8;
	c->hdr = 2 + ((size_t)c->a + 1) / 2;
	c->maxlen = 0;
	if (c->a < 2 || c->a > nsym || len < c->hdr)
		return -EBADMSG;
	for (s = 0; s < c->a; s++) {
		lens[s] = (uint8_t)((src[2 + s / 2] >> (s & 1 ? 4 : 0)) & 15);
		if (lens[s] > MAX_BITS)
			return -EBADMSG;
		if (lens[s])
			kraft += 1u << (MAX_BITS - lens[s]);
		if (lens[s] > c->maxlen)
			c->maxlen = lens[s];
	}
	if (c->a & 1 && src[c->hdr - 1] >> 4) /* the unused nibble must be zero */
		return -EBADMSG;
	if (kraft != TABLE_SIZE) /* incomplete or over-full code */
		return -EBADMSG;
	/* A table of 2^maxlen entries, not 2^MAX_BITS: small streams have
	 * short codes, and filling the table is most of their cost. */
	c->mask = (1u << c->maxlen) - 1;
	canonical_codes(lens, c->a, codes);
	for (s = 0; s < c->a; s++) {
		unsigned k, step = 1u << lens[s];
		if (lens[s] == 0)
			continue;
		for (k = codes[s]; k <= c->mask; k += step)
			c->table[k] = (uint16_t)(lens[s] << MAX_BITS | s);
	}
	return 0;
}

/* Eight bytes as a little-endian number: one load where the machine is
 * little-endian. */
static inline uint64_t le64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
#else
	uint64_t v = 0;
	unsigned k;
	for (k = 0; k < 8; k++)
		v |= (uint64_t)p[k] << (8 * k);
	return v;
#endif
}

/* Where a stream of codes is: src[pos..len) not yet read, bits of it in
 * buf. */
typedef struct bitin {
	const uint8_t *src;
	size_t len, pos;
	uint64_t buf;
	unsigned bits;
} bitin_t;

/* Eight bytes more into the bit buffer (at least 56 bits in it after). */
#define REFILL(b)                                                    \
	do {                                                         \
		const uint64_t v_ = le64((b).src + (b).pos);         \
		(b).buf |= v_ << (b).bits;                           \
		(b).pos += (63 - (b).bits) >> 3;                     \
		(b).bits |= 56;                                      \
	} while (0)

/* Symbols [i, n) from b, one code at a time, every read checked; then
 * only the zero padding of the stream's last byte may be left. */
static int decode_rest(uint16_t *s16, uint8_t *s8, size_t i, size_t n, const code_t *c, bitin_t *b)
{
	const unsigned mask = c->mask;
	while (i < n) {
		unsigned e, l;
		if (b->bits < 4 * MAX_BITS) {
			if (b->len - b->pos >= 8) {
				REFILL(*b);
			} else {
				while (b->bits <= 56 && b->pos < b->len) {
					b->buf |= (uint64_t)b->src[b->pos++] << b->bits;
					b->bits += 8;
				}
			}
		}
		if (b->bits >= 4 * MAX_BITS && n - i >= 4) {
			/* four codes of at most MAX_BITS each are in buf */
			unsigned k;
			for (k = 0; k < 4; k++) {
				e = c->table[b->buf & mask];
				l = e >> MAX_BITS;
				PUT(i, e & (TABLE_SIZE - 1));
				i++;
				b->buf >>= l;
				b->bits -= l;
			}
			continue;
		}
		e = c->table[b->buf & mask];
		l = e >> MAX_BITS;
		if (l > b->bits) /* the code runs past the end of the stream */
			return -EBADMSG;
		PUT(i, e & (TABLE_SIZE - 1));
		i++;
		b->buf >>= l;
		b->bits -= l;
	}
	/* What is left must be the zero padding of the last byte. */
	if (b->pos != b->len || b->bits >= 8 || (b->buf & ((1u << b->bits) - 1)) != 0)
		return -EBADMSG;
	return 0;
}

static int decode(uint16_t *s16, uint8_t *s8, size_t n, unsigned nsym, const uint8_t *src, size_t len)
{
	code_t c;
	bitin_t b;
	size_t i = 0;
	int rc = code_read(&c, nsym, src, len);

	if (rc)
		return rc;
	b.src = src;
	b.len = len;
	b.pos = c.hdr;
	b.buf = 0;
	b.bits = 0;
	if (c.a <= 256 && n >= MULTI_MIN) {
		uint32_t multi[TABLE_SIZE];
		const unsigned mask = c.mask;
		multi_table(multi, c.table, c.maxlen);
		/* four look-ups of at most maxlen bits each, each giving up to
		 * three symbols, while the output has room for twelve; the
		 * state in locals (the output's stores may alias b's fields) */
		uint64_t buf = 0;
		unsigned bits = 0;
		size_t pos = b.pos;
		while (n - i >= 12 && len - pos >= 8) { /* then the tail: checked */
			unsigned k;
			buf |= le64(src + pos) << bits;
			pos += (63 - bits) >> 3;
			bits |= 56;
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
		b.pos = pos;
		b.buf = buf;
		b.bits = bits;
	}
	return decode_rest(s16, s8, i, n, &c, &b);
}

/* The fast loop's state of stream k, in locals (a store through the
 * uint8_t output may alias any struct field; locals it cannot). */
#define SPLIT_LOAD(k) const uint8_t *p##k = b##k.src; size_t pos##k = b##k.pos; uint64_t buf##k = b##k.buf; unsigned bits##k = b##k.bits
#define SPLIT_SAVE(k) (b##k.pos = pos##k, b##k.buf = buf##k, b##k.bits = bits##k)
#define SPLIT_ROOM(k) (b##k.len - pos##k >= 8)
#define SPLIT_REFILL(k)                                                      \
	do {                                                                 \
		const uint64_t v_ = le64(p##k + pos##k);                     \
		buf##k |= v_ << bits##k;                                     \
		pos##k += (63 - bits##k) >> 3;                               \
		bits##k |= 56;                                               \
	} while (0)
#define SPLIT_ONE(k, o)                                                      \
	do {                                                                 \
		const unsigned e_ = table[buf##k & mask];                    \
		o = e_ & (TABLE_SIZE - 1);                                   \
		buf##k >>= e_ >> MAX_BITS;                                   \
		bits##k -= e_ >> MAX_BITS;                                   \
	} while (0)

/* Symbols [0, *i) of the four streams' first q, four codes of each per
 * refill, while every stream has eight bytes and four symbols left; the
 * output's type T. */
#define SPLIT_FAST(T, out)                                                          \
	do {                                                                        \
		T *const o0 = (out), *const o1 = o0 + q, *const o2 = o1 + q, *const o3 = o2 + q; \
		SPLIT_LOAD(0);                                                      \
		SPLIT_LOAD(1);                                                      \
		SPLIT_LOAD(2);                                                      \
		SPLIT_LOAD(3);                                                      \
		while (q - i >= 4 && SPLIT_ROOM(0) && SPLIT_ROOM(1) && SPLIT_ROOM(2) && SPLIT_ROOM(3)) { \
			unsigned u_;                                                \
			SPLIT_REFILL(0);                                            \
			SPLIT_REFILL(1);                                            \
			SPLIT_REFILL(2);                                            \
			SPLIT_REFILL(3);                                            \
			for (u_ = 0; u_ < 4; u_++, i++) {                           \
				SPLIT_ONE(0, o0[i]);                                \
				SPLIT_ONE(1, o1[i]);                                \
				SPLIT_ONE(2, o2[i]);                                \
				SPLIT_ONE(3, o3[i]);                                \
			}                                                           \
		}                                                                   \
		SPLIT_SAVE(0);                                                      \
		SPLIT_SAVE(1);                                                      \
		SPLIT_SAVE(2);                                                      \
		SPLIT_SAVE(3);                                                      \
	} while (0)

/* Up to three symbols, the bytes of s from the lowest, at o: one store
 * of four bytes where the machine is little-endian (room for four is the
 * caller's; the fourth is written over next). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define PUT3(o, s) memcpy((o), &(s), 4)
#else
#define PUT3(o, s) ((o)[0] = (uint8_t)(s), (o)[1] = (uint8_t)((s) >> 8), (o)[2] = (uint8_t)((s) >> 16))
#endif

/* One look-up of the multi table in stream k: up to three symbols at
 * o##k + i##k. */
#define SPLIT_MULTI_ONE(k)                                                   \
	do {                                                                 \
		const uint32_t me_ = multi[buf##k & mask], sy_ = me_ >> 8;   \
		PUT3(o##k + i##k, sy_);                                      \
		i##k += me_ >> 5 & 3;                                        \
		buf##k >>= me_ & 31;                                         \
		bits##k -= me_ & 31;                                         \
	} while (0)

/* SPLIT_FAST for an alphabet of at most 256 through the multi table: four
 * look-ups of each stream per refill (each up to three symbols), while
 * every stream has eight bytes and sixteen symbols of room left (twelve
 * symbols, and the last store's fourth byte); each stream's own count in
 * ik[]. */
static void split_multi(uint8_t *s8, size_t q, size_t qlast, const code_t *c, bitin_t *b, size_t ik[4])
{
	uint32_t multi[TABLE_SIZE];
	const unsigned mask = c->mask;
	uint8_t *const o0 = s8, *const o1 = o0 + q, *const o2 = o1 + q, *const o3 = o2 + q;
	size_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
	bitin_t b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
	SPLIT_LOAD(0);
	SPLIT_LOAD(1);
	SPLIT_LOAD(2);
	SPLIT_LOAD(3);

	multi_table(multi, c->table, c->maxlen);
	while (q - i0 >= 16 && q - i1 >= 16 && q - i2 >= 16 && qlast - i3 >= 16 && SPLIT_ROOM(0) &&
	       SPLIT_ROOM(1) && SPLIT_ROOM(2) && SPLIT_ROOM(3)) {
		unsigned u;
		SPLIT_REFILL(0);
		SPLIT_REFILL(1);
		SPLIT_REFILL(2);
		SPLIT_REFILL(3);
		for (u = 0; u < 4; u++) {
			SPLIT_MULTI_ONE(0);
			SPLIT_MULTI_ONE(1);
			SPLIT_MULTI_ONE(2);
			SPLIT_MULTI_ONE(3);
		}
	}
	SPLIT_SAVE(0);
	SPLIT_SAVE(1);
	SPLIT_SAVE(2);
	SPLIT_SAVE(3);
	b[0] = b0;
	b[1] = b1;
	b[2] = b2;
	b[3] = b3;
	ik[0] = i0;
	ik[1] = i1;
	ik[2] = i2;
	ik[3] = i3;
}

/* A split block (rckpt_huff_decode_split): its four streams decoded
 * together, four codes of each per refill (or, for a byte alphabet, four
 * look-ups of up to three codes) while every stream has eight bytes and
 * room left, then each stream's rest one code at a time, checked. */
static int decode_split(uint16_t *s16, uint8_t *s8, size_t n, unsigned nsym, const uint8_t *src,
			size_t len)
{
	const size_t q = n / 4;
	code_t c;
	bitin_t b0, b1, b2, b3;
	size_t at, i = 0, l[4], ik[4];
	unsigned k;
	int rc = code_read(&c, nsym, src, len);

	if (rc)
		return rc;
	if (len - c.hdr < RCKPT_HUFF_SPLIT_BYTES)
		return -EBADMSG;
	at = c.hdr + RCKPT_HUFF_SPLIT_BYTES;
	for (k = 0; k < 3; k++) {
		const uint8_t *p = src + c.hdr + 4 * k;
		l[k] = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
		if (l[k] > len - at)
			return -EBADMSG;
		at += l[k];
	}
	l[3] = len - at;
	/* each stream's bytes alone: its reads stop at its end */
	at = c.hdr + RCKPT_HUFF_SPLIT_BYTES;
	b0 = (bitin_t){ src + at, l[0], 0, 0, 0 };
	b1 = (bitin_t){ src + at + l[0], l[1], 0, 0, 0 };
	b2 = (bitin_t){ src + at + l[0] + l[1], l[2], 0, 0, 0 };
	b3 = (bitin_t){ src + at + l[0] + l[1] + l[2], l[3], 0, 0, 0 };
	ik[0] = ik[1] = ik[2] = ik[3] = 0;
	if (s8 && c.a <= 256 && q >= MULTI_MIN) {
		bitin_t bk[4] = { b0, b1, b2, b3 };
		split_multi(s8, q, n - 3 * q, &c, bk, ik);
		b0 = bk[0];
		b1 = bk[1];
		b2 = bk[2];
		b3 = bk[3];
	} else {
		const uint16_t *const table = c.table;
		const unsigned mask = c.mask;
		if (s8)
			SPLIT_FAST(uint8_t, s8);
		else
			SPLIT_FAST(uint16_t, s16);
		ik[0] = ik[1] = ik[2] = ik[3] = i;
	}
	if ((rc = decode_rest(s16, s8, ik[0], q, &c, &b0)) ||
	    (rc = decode_rest(s16 ? s16 + q : NULL, s8 ? s8 + q : NULL, ik[1], q, &c, &b1)) ||
	    (rc = decode_rest(s16 ? s16 + 2 * q : NULL, s8 ? s8 + 2 * q : NULL, ik[2], q, &c, &b2)))
		return rc;
	return decode_rest(s16 ? s16 + 3 * q : NULL, s8 ? s8 + 3 * q : NULL, ik[3], n - 3 * q, &c, &b3);
}

int rckpt_huff_decode(uint16_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len)
{
	return decode(syms, NULL, n, nsym, src, len);
}

int rckpt_huff_decode8(uint8_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len)
{
	return nsym > 256 ? -EBADMSG : decode(NULL, syms, n, nsym, src, len);
}

int rckpt_huff_decode_split(uint16_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len)
{
	return decode_split(syms, NULL, n, nsym, src, len);
}

int rckpt_huff_decode8_split(uint8_t *syms, size_t n, unsigned nsym, const uint8_t *src, size_t len)
{
	return nsym > 256 ? -EBADMSG : decode_split(NULL, syms, n, nsym, src, len);
}
