/*
 * test_group.c — a group save's plan (rckpt_group_plan.h) and exchange
 * (rckpt_group_xchg.h) on a transformer-shaped model of many tensors, over
 * 1 to 5 ranks. The plan:
 *  - replicated (DDP): nothing moves, every chunk has an owner, the loads
 *    are within one chunk of each other;
 *  - sharded ZeRO-3 style (rank r holds a contiguous slice of every
 *    flattened tensor): each chunk goes to a rank holding the most of it,
 *    and what moves to it is exactly what it lacks, each element once, from
 *    a rank that holds it, in (from, to, chunk, tensor, first) order;
 *  - the plan does not depend on the order a rank lists its ranges in, and
 *    the layout does not depend on the ranks at all;
 *  - refusals: an element nobody holds, a range past its tensor, a tensor
 *    out of the set, no ranks.
 * The exchange, ranks as threads over an in-memory rendezvous transport
 * (a send waits for its receive, as MPI's synchronous sends do): every
 * rank ends with each piece of the chunks it encodes holding the model's
 * values, bit for bit, sharded or replicated (then nothing is copied); a
 * header other than the plan's fails the receiver with -EBADMSG.
 * Encoding a part: three ranks holding ZeRO-3 slices of a real-valued
 * model exchange, then each encodes only its chunks (its parts of the
 * tensors, the global layout's chunks); the records name the global
 * tensors, and with the manifest made from the layout one decoder
 * restores the whole model, lossless tensors bit for bit.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rckpt_ckdec.h"
#include "rckpt_ckenc.h"
#include "rckpt_codec.h"
#include "bf16_round.h"
#include "rckpt_group_part.h"
#include "rckpt_group_plan.h"
#include "rckpt_group_xchg.h"
#include "rckpt_record.h"
#include "rckpt_layout.h"
#include "rckpt_tset.h"
#include "rv_hub.h"

#define NT 27
#define CHUNK ((uint64_t)1 << 14)
#define PMAX 5

typedef struct model {
	rckpt_tensor_t t[NT];
	char names[NT][48];
	rckpt_tset_t ts;
} model_t;

/* A small transformer's tensors: an embedding, per block two matrices and
 * two norms' vectors, a head. Data is never read: a non-NULL pointer. */
static void model_init(model_t *m)
{
	static const float dummy = 0;
	unsigned i = 0, b;
	snprintf(m->names[i], sizeof(m->names[i]), "embed.weight");
	m->t[i] = (rckpt_tensor_t){ m->names[i], RCKPT_F32, 2, { 500, 64 }, &dummy };
	i++;
	for (b = 0; b < 6; b++) {
		snprintf(m->names[i], sizeof(m->names[i]), "blocks.%u.attn.weight", b);
		m->t[i] = (rckpt_tensor_t){ m->names[i], RCKPT_F32, 2, { 192, 64 }, &dummy };
		i++;
		snprintf(m->names[i], sizeof(m->names[i]), "blocks.%u.mlp.weight", b);
		m->t[i] = (rckpt_tensor_t){ m->names[i], RCKPT_BF16, 2, { 256, 64 }, &dummy };
		i++;
		snprintf(m->names[i], sizeof(m->names[i]), "blocks.%u.norm1.weight", b);
		m->t[i] = (rckpt_tensor_t){ m->names[i], RCKPT_F32, 1, { 64 }, &dummy };
		i++;
		snprintf(m->names[i], sizeof(m->names[i]), "blocks.%u.norm2.bias", b);
		m->t[i] = (rckpt_tensor_t){ m->names[i], RCKPT_F32, 1, { 64 }, &dummy };
		i++;
	}
	snprintf(m->names[i], sizeof(m->names[i]), "head.weight");
	m->t[i] = (rckpt_tensor_t){ m->names[i], RCKPT_F32, 2, { 10, 64 }, &dummy };
	i++;
	assert_int_equal(i, NT - 1);
	snprintf(m->names[i], sizeof(m->names[i]), "head.bias");
	m->t[i] = (rckpt_tensor_t){ m->names[i], RCKPT_F32, 1, { 10 }, &dummy };
	assert_int_equal(rckpt_tset_view(&m->ts, m->t, NT), 0);
}

typedef struct holdings {
	rckpt_piece_t *r[PMAX];
	size_t n[PMAX];
} holdings_t;

static void holdings_free(holdings_t *h)
{
	unsigned r;
	for (r = 0; r < PMAX; r++)
		free(h->r[r]);
	memset(h, 0, sizeof(*h));
}

/* Every rank holds every tensor whole. */
static holdings_t replicated(const model_t *m, unsigned p)
{
	holdings_t h;
	unsigned r, i;
	memset(&h, 0, sizeof(h));
	for (r = 0; r < p; r++) {
		assert_non_null(h.r[r] = calloc(NT, sizeof(rckpt_piece_t)));
		for (i = 0; i < m->ts.ntensors; i++)
			h.r[r][h.n[r]++] = (rckpt_piece_t){ i, 0, m->ts.t[i].n, i, 0 };
	}
	return h;
}

/* ZeRO-3: rank r holds elements [r * s, (r + 1) * s) of every tensor, s =
 * ceil(n / p), listed backwards (the plan must not care). */
static holdings_t sharded(const model_t *m, unsigned p)
{
	holdings_t h;
	unsigned r, i;
	memset(&h, 0, sizeof(h));
	for (r = 0; r < p; r++) {
		assert_non_null(h.r[r] = calloc(NT, sizeof(rckpt_piece_t)));
		for (i = m->ts.ntensors; i-- > 0;) {
			const uint64_t n = m->ts.t[i].n, s = (n + p - 1) / p;
			const uint64_t a = r * s < n ? r * s : n, b = (r + 1) * s < n ? (r + 1) * s : n;
			if (b > a)
				h.r[r][h.n[r]++] = (rckpt_piece_t){ i, a, b - a, i, a };
		}
	}
	return h;
}

static uint64_t overlap(const rckpt_piece_t *rs, size_t n, uint32_t t, uint64_t a, uint64_t len)
{
	uint64_t got = 0;
	size_t i;
	for (i = 0; i < n; i++) {
		uint64_t x = rs[i].first > a ? rs[i].first : a;
		uint64_t y = rs[i].first + rs[i].n < a + len ? rs[i].first + rs[i].n : a + len;
		if (rs[i].tensor == t && y > x)
			got += y - x;
	}
	return got;
}

/* The properties every plan has; returns the elements moved. */
static uint64_t check_plan(const rckpt_group_plan_t *g, const rckpt_layout_t *l, const model_t *m,
			   const holdings_t *h, unsigned p)
{
	uint64_t moved = 0, load[PMAX] = { 0 }, sent[PMAX] = { 0 };
	uint32_t c, k;
	size_t x;
	unsigned r;
	(void)m;
	assert_int_equal(g->nchunks, l->nchunks);
	for (x = 0; x < g->nxfer; x++) {
		const rckpt_xfer_t *a = &g->xfer[x];
		assert_true(a->from < p && a->to < p && a->from != a->to && a->n > 0);
		assert_int_equal(a->to, g->owner[a->chunk]);
		/* the sender holds all of it; the owner none of it */
		assert_true(overlap(h->r[a->from], h->n[a->from], a->tensor, a->first, a->n) == a->n);
		assert_true(overlap(h->r[a->to], h->n[a->to], a->tensor, a->first, a->n) == 0);
		if (x) { /* in (from, to, chunk, tensor, first) order */
			const rckpt_xfer_t *b = &g->xfer[x - 1];
			assert_true(b->from < a->from ||
				    (b->from == a->from &&
				     (b->to < a->to ||
				      (b->to == a->to &&
				       (b->chunk < a->chunk ||
					(b->chunk == a->chunk &&
					 (b->tensor < a->tensor ||
					  (b->tensor == a->tensor && b->first + b->n <= a->first))))))));
		}
		moved += a->n;
		sent[a->from] += a->n;
	}
	for (c = 0; c < l->nchunks; c++) {
		const unsigned o = g->owner[c];
		uint64_t mine = 0, best = 0;
		assert_true(o < p);
		load[o] += rckpt_layout_chunk_elements(l, c);
		for (r = 0; r < p; r++) {
			uint64_t have = 0;
			for (k = 0; k < l->npieces[c]; k++)
				have += overlap(h->r[r], h->n[r], l->pieces[c][k].tensor, l->pieces[c][k].first,
						l->pieces[c][k].n);
			if (have > best)
				best = have;
			if (r == o)
				mine = have;
		}
		assert_true(mine == best); /* a rank holding the most of it */
		/* what it holds and what comes cover each piece exactly once */
		for (k = 0; k < l->npieces[c]; k++) {
			const rckpt_piece_t *pc = &l->pieces[c][k];
			uint64_t got = overlap(h->r[o], h->n[o], pc->tensor, pc->first, pc->n);
			for (x = 0; x < g->nxfer; x++)
				if (g->xfer[x].chunk == c && g->xfer[x].tensor == pc->tensor) {
					/* a tensor has one piece in a chunk: within it */
					assert_true(g->xfer[x].first >= pc->first &&
						    g->xfer[x].first + g->xfer[x].n <= pc->first + pc->n);
					got += g->xfer[x].n;
				}
			assert_true(got == pc->n);
		}
	}
	for (r = 0; r < p; r++) {
		assert_true(g->load[r] == load[r]);
		assert_true(g->sent[r] == sent[r]);
	}
	return moved;
}

static void test_replicated(void **state)
{
	model_t m;
	rckpt_layout_t l;
	unsigned p, r;
	(void)state;
	model_init(&m);
	assert_int_equal(rckpt_layout_build(&l, &m.ts, CHUNK), 0);
	assert_true(l.nchunks >= 4);
	for (p = 1; p <= PMAX; p++) {
		holdings_t h = replicated(&m, p);
		rckpt_group_plan_t g;
		uint64_t lo = UINT64_MAX, hi = 0;
		assert_int_equal(rckpt_group_plan(&g, &l, &m.ts, p, (const rckpt_piece_t *const *)h.r, h.n), 0);
		assert_int_equal(check_plan(&g, &l, &m, &h, p), 0);
		assert_int_equal(g.nxfer, 0);
		for (r = 0; r < p; r++) {
			lo = g.load[r] < lo ? g.load[r] : lo;
			hi = g.load[r] > hi ? g.load[r] : hi;
		}
		print_message("replicated over %u: %u chunks, loads %llu..%llu\n", p, l.nchunks,
			      (unsigned long long)lo, (unsigned long long)hi);
		if (p <= l.nchunks)
			assert_true(lo > 0);
		assert_true(hi - lo <= CHUNK);
		rckpt_group_plan_free(&g);
		holdings_free(&h);
	}
	rckpt_layout_free(&l);
	rckpt_tset_free(&m.ts);
}

static void test_sharded(void **state)
{
	model_t m;
	rckpt_layout_t l;
	uint64_t total = 0;
	unsigned p, i;
	(void)state;
	model_init(&m);
	for (i = 0; i < NT; i++)
		total += m.ts.t[i].n;
	assert_int_equal(rckpt_layout_build(&l, &m.ts, CHUNK), 0);
	for (p = 1; p <= PMAX; p++) {
		holdings_t h = sharded(&m, p), h2;
		rckpt_group_plan_t g, g2;
		uint64_t moved;
		unsigned r;
		assert_int_equal(rckpt_group_plan(&g, &l, &m.ts, p, (const rckpt_piece_t *const *)h.r, h.n), 0);
		moved = check_plan(&g, &l, &m, &h, p);
		print_message("sharded over %u: %llu of %llu elements move (%.0f%%)\n", p,
			      (unsigned long long)moved, (unsigned long long)total, 100.0 * moved / total);
		if (p == 1)
			assert_int_equal(moved, 0);
		else
			assert_true(moved > 0 && moved < total * (p - 1) / p);
		/* the same holdings listed in another order: the same plan */
		memset(&h2, 0, sizeof(h2));
		for (r = 0; r < p; r++) {
			size_t k;
			assert_non_null(h2.r[r] = calloc(h.n[r] ? h.n[r] : 1, sizeof(rckpt_piece_t)));
			for (k = 0; k < h.n[r]; k++)
				h2.r[r][k] = h.r[r][(k * 7 + 3) % h.n[r]];
			h2.n[r] = h.n[r];
		}
		if (p > 1)
			for (r = 0; r < p; r++) /* 7 and the counts are coprime here */
				assert_true(h.n[r] % 7 != 0);
		assert_int_equal(rckpt_group_plan(&g2, &l, &m.ts, p, (const rckpt_piece_t *const *)h2.r, h2.n), 0);
		assert_int_equal(g2.nxfer, g.nxfer);
		assert_memory_equal(g2.owner, g.owner, l.nchunks * sizeof(*g.owner));
		if (g.nxfer)
			assert_memory_equal(g2.xfer, g.xfer, g.nxfer * sizeof(*g.xfer));
		rckpt_group_plan_free(&g2);
		holdings_free(&h2);
		rckpt_group_plan_free(&g);
		holdings_free(&h);
	}
	rckpt_layout_free(&l);
	rckpt_tset_free(&m.ts);
}

/* Tensors much larger than a chunk (a real model's): slices of a ZeRO-3
 * split hold whole chunks but at their edges, and little moves. */
static void test_sharded_large(void **state)
{
	static const float dummy = 0;
	rckpt_tensor_t t[3] = { { "a.weight", RCKPT_F32, 2, { 1000, 1003 }, &dummy },
				{ "b.weight", RCKPT_F32, 2, { 999, 1001 }, &dummy },
				{ "c.weight", RCKPT_BF16, 2, { 1200, 801 }, &dummy } };
	model_t m;
	rckpt_layout_t l;
	rckpt_group_plan_t g;
	holdings_t h;
	uint64_t moved, total = 0;
	unsigned i;
	(void)state;
	memset(&m, 0, sizeof(m));
	assert_int_equal(rckpt_tset_view(&m.ts, t, 3), 0);
	for (i = 0; i < 3; i++)
		total += m.ts.t[i].n;
	assert_int_equal(rckpt_layout_build(&l, &m.ts, CHUNK), 0);
	memset(&h, 0, sizeof(h));
	for (i = 0; i < 4; i++) { /* sharded() over these three */
		unsigned k;
		assert_non_null(h.r[i] = calloc(3, sizeof(rckpt_piece_t)));
		for (k = 0; k < 3; k++) {
			const uint64_t n = m.ts.t[k].n, s = (n + 3) / 4;
			const uint64_t a = i * s, b = (i + 1) * s < n ? (i + 1) * s : n;
			h.r[i][h.n[i]++] = (rckpt_piece_t){ k, a, b - a, k, a };
		}
	}
	assert_int_equal(rckpt_group_plan(&g, &l, &m.ts, 4, (const rckpt_piece_t *const *)h.r, h.n), 0);
	moved = check_plan(&g, &l, &m, &h, 4);
	print_message("3 large tensors sharded over 4: %llu of %llu elements move (%.1f%%)\n",
		      (unsigned long long)moved, (unsigned long long)total, 100.0 * moved / total);
	assert_true(moved * 20 < total);
	rckpt_group_plan_free(&g);
	holdings_free(&h);
	rckpt_layout_free(&l);
	rckpt_tset_free(&m.ts);
}

static void test_refusals(void **state)
{
	model_t m;
	rckpt_layout_t l;
	rckpt_group_plan_t g;
	holdings_t h;
	(void)state;
	model_init(&m);
	assert_int_equal(rckpt_layout_build(&l, &m.ts, CHUNK), 0);
	h = sharded(&m, 3);
	assert_int_equal(rckpt_group_plan(&g, &l, &m.ts, 0, (const rckpt_piece_t *const *)h.r, h.n), -EINVAL);
	/* rank 2's share of the first tensor is lost: nobody holds it */
	h.n[2]--;
	assert_int_equal(rckpt_group_plan(&g, &l, &m.ts, 3, (const rckpt_piece_t *const *)h.r, h.n), -ENOENT);
	h.n[2]++;
	h.r[1][0].n = m.ts.t[h.r[1][0].tensor].n; /* past its tensor */
	assert_int_equal(rckpt_group_plan(&g, &l, &m.ts, 3, (const rckpt_piece_t *const *)h.r, h.n), -ERANGE);
	h.r[1][0] = (rckpt_piece_t){ NT, 0, 1, NT, 0 };
	assert_int_equal(rckpt_group_plan(&g, &l, &m.ts, 3, (const rckpt_piece_t *const *)h.r, h.n), -EINVAL);
	assert_null(g.owner);
	holdings_free(&h);
	rckpt_layout_free(&l);
	rckpt_tset_free(&m.ts);
}

/* ---- the exchange ---- */

/* Element i of tensor t of the model: its bytes, a function of (t, i). */
static void value_at(uint8_t *out, const rckpt_tset_t *ts, uint32_t t, uint64_t i)
{
	uint32_t x = (uint32_t)(i * 2654435761u) ^ (t * 40503u) ^ 0x9e3779b9u;
	size_t k, es = rckpt_dtype_size(ts->t[t].dtype);
	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	for (k = 0; k < es; k++)
		out[k] = (uint8_t)(x >> (8 * k));
}

typedef struct xrank {
	hub_t *hub;
	const rckpt_group_plan_t *g;
	const rckpt_layout_t *l;
	const model_t *m;
	rckpt_hold_t held[NT];
	size_t nheld;
	unsigned rank, p;
	rckpt_group_data_t out;
	int rc;
} xrank_t;

static void *xchg_rank(void *arg)
{
	xrank_t *x = arg;
	port_t port = { x->hub, x->rank };
	rckpt_loc_transport_t tr = { &port, x->rank, x->p, hub_send, hub_recv };
	x->rc = rckpt_group_exchange(&x->out, x->g, x->l, &x->m->ts, x->held, x->nheld, &tr);
	if (x->rc) /* its peers must not wait for it */
		hub_close(x->hub);
	return NULL;
}

/* Runs the exchange of holdings h over p ranks (their values filled in
 * from value_at); corrupt: the first header sent is damaged. Checks every
 * owned piece when all succeed; returns the bytes copied into buffers. */
static uint64_t run_exchange(const model_t *m, const rckpt_layout_t *l, const holdings_t *h, unsigned p,
			     int corrupt, int *failed, int *badmsg)
{
	rckpt_group_plan_t g;
	xrank_t X[PMAX];
	pthread_t th[PMAX];
	hub_t hub;
	uint64_t copied = 0;
	unsigned r, c, k;

	assert_int_equal(rckpt_group_plan(&g, l, &m->ts, p, (const rckpt_piece_t *const *)h->r, h->n), 0);
	hub_init(&hub);
	hub.corrupt = corrupt;
	memset(X, 0, sizeof(X));
	for (r = 0; r < p; r++) {
		X[r] = (xrank_t){ &hub, &g, l, m, { { 0 } }, 0, r, p, { 0 }, 0 };
		for (k = 0; k < h->n[r]; k++) {
			const rckpt_piece_t *pc = &h->r[r][k];
			size_t es = rckpt_dtype_size(m->ts.t[pc->tensor].dtype);
			uint8_t *v = malloc(pc->n * es);
			uint64_t i;
			assert_non_null(v);
			for (i = 0; i < pc->n; i++)
				value_at(v + i * es, &m->ts, pc->tensor, pc->first + i);
			X[r].held[X[r].nheld++] = (rckpt_hold_t){ pc->tensor, pc->first, pc->n, v };
		}
		assert_int_equal(pthread_create(&th[r], NULL, xchg_rank, &X[r]), 0);
	}
	for (r = 0; r < p; r++)
		pthread_join(th[r], NULL);
	*failed = *badmsg = 0;
	for (r = 0; r < p; r++) {
		*failed += X[r].rc != 0;
		*badmsg += X[r].rc == -EBADMSG;
		if (X[r].rc && X[r].rc != -EBADMSG)
			assert_int_equal(X[r].rc, -EPIPE); /* a peer of the one that failed */
	}
	for (r = 0; r < p && !*failed; r++) {
		uint32_t owned = 0;
		for (c = 0; c < l->nchunks; c++)
			owned += g.owner[c] == r;
		assert_int_equal(X[r].out.nowned, owned);
		for (c = 0; c < X[r].out.nowned; c++) {
			const rckpt_owned_t *o = &X[r].out.owned[c];
			assert_int_equal(g.owner[o->chunk], r);
			for (k = 0; k < l->npieces[o->chunk]; k++) {
				const rckpt_piece_t *pc = &l->pieces[o->chunk][k];
				size_t es = rckpt_dtype_size(m->ts.t[pc->tensor].dtype);
				uint8_t want[8];
				uint64_t i;
				for (i = 0; i < pc->n; i++) {
					value_at(want, &m->ts, pc->tensor, pc->first + i);
					if (memcmp((const uint8_t *)o->data[k] + i * es, want, es) != 0)
						fail_msg("rank %u, chunk %u, piece %u: element %llu differs", r,
							 o->chunk, k, (unsigned long long)i);
				}
			}
		}
		assert_true(X[r].out.received == 0 || X[r].out.nbufs > 0);
		for (k = 0; k < X[r].out.nbufs; k++)
			copied++;
	}
	for (r = 0; r < p; r++) {
		for (k = 0; k < X[r].nheld; k++)
			free((void *)X[r].held[k].data);
		rckpt_group_data_free(&X[r].out);
	}
	rckpt_group_plan_free(&g);
	hub_destroy(&hub);
	return copied;
}

static void test_exchange(void **state)
{
	model_t m;
	rckpt_layout_t l;
	unsigned p;
	int failed, bad;
	(void)state;
	model_init(&m);
	assert_int_equal(rckpt_layout_build(&l, &m.ts, CHUNK), 0);
	for (p = 1; p <= PMAX; p++) {
		holdings_t h = sharded(&m, p);
		uint64_t bufs = run_exchange(&m, &l, &h, p, 0, &failed, &bad);
		assert_int_equal(failed, 0);
		print_message("sharded over %u: %llu buffers\n", p, (unsigned long long)bufs);
		holdings_free(&h);
		h = replicated(&m, p);
		assert_int_equal(run_exchange(&m, &l, &h, p, 0, &failed, &bad), 0); /* nothing copied */
		assert_int_equal(failed, 0);
		holdings_free(&h);
	}
	{ /* a damaged header: its receiver fails, naming it */
		holdings_t h = sharded(&m, 3);
		run_exchange(&m, &l, &h, 3, 1, &failed, &bad);
		assert_int_equal(bad, 1);
		assert_true(failed >= 1);
		holdings_free(&h);
	}
	rckpt_layout_free(&l);
	rckpt_tset_free(&m.ts);
}

/* ---- the allgather ---- */

typedef struct grank {
	hub_t *hub;
	unsigned rank, p;
	uint8_t **all;
	size_t *lens;
	int rc;
} grank_t;

static void *gather_rank(void *arg)
{
	grank_t *x = arg;
	port_t port = { x->hub, x->rank };
	rckpt_loc_transport_t tr = { &port, x->rank, x->p, hub_send, hub_recv };
	uint8_t mine[64];
	size_t n = 3 + 11 * x->rank, i; /* rank 0: 3 bytes, ... */
	for (i = 0; i < n; i++)
		mine[i] = (uint8_t)(x->rank * 31 + i);
	x->rc = rckpt_group_allgather(&tr, mine, n, 64, &x->all, &x->lens);
	return NULL;
}

static void test_allgather(void **state)
{
	unsigned p, r, q;
	(void)state;
	for (p = 1; p <= PMAX; p++) {
		grank_t X[PMAX];
		pthread_t th[PMAX];
		hub_t hub;
		hub_init(&hub);
		for (r = 0; r < p; r++) {
			X[r] = (grank_t){ &hub, r, p, NULL, NULL, 0 };
			assert_int_equal(pthread_create(&th[r], NULL, gather_rank, &X[r]), 0);
		}
		for (r = 0; r < p; r++)
			pthread_join(th[r], NULL);
		for (r = 0; r < p; r++) {
			assert_int_equal(X[r].rc, 0);
			for (q = 0; q < p; q++) {
				size_t i;
				assert_int_equal(X[r].lens[q], 3 + 11 * q);
				for (i = 0; i < X[r].lens[q]; i++)
					assert_int_equal(X[r].all[q][i], (uint8_t)(q * 31 + i));
			}
			rckpt_group_gathered_free(X[r].all, X[r].lens, p);
		}
		hub_destroy(&hub);
	}
}

/* ---- encoding a part ---- */

#define GN 4
static float gw0[300 * 200], gw1[160 * 128], gnorm[128];
static uint16_t gb[256 * 96];

static void gmodel(rckpt_tensor_t *t, rckpt_tset_t *ts)
{
	unsigned i;
	for (i = 0; i < 300 * 200; i++)
		gw0[i] = (float)(0.05 * sin(0.01 * i) + 0.002 * ((int)(i * 2654435761u >> 20) % 100 - 50) / 50.0);
	for (i = 0; i < 160 * 128; i++)
		gw1[i] = (float)(0.03 * cos(0.02 * i) + 0.001 * ((int)(i * 40503u >> 7) % 100 - 50) / 50.0);
	for (i = 0; i < 128; i++)
		gnorm[i] = 1.0f + 0.001f * (float)i;
	for (i = 0; i < 256 * 96; i++) {
		float x = (float)(0.02 * sin(0.003 * i + 1.0));
		uint32_t u;
		memcpy(&u, &x, 4);
		gb[i] = (uint16_t)(u >> 16);
	}
	t[0] = (rckpt_tensor_t){ "enc.0.weight", RCKPT_F32, 2, { 300, 200 }, gw0 };
	t[1] = (rckpt_tensor_t){ "enc.1.weight", RCKPT_F32, 2, { 160, 128 }, gw1 };
	t[2] = (rckpt_tensor_t){ "mlp.weight", RCKPT_BF16, 2, { 256, 96 }, gb };
	t[3] = (rckpt_tensor_t){ "norm.weight", RCKPT_F32, 1, { 128 }, gnorm };
	assert_int_equal(rckpt_tset_view(ts, t, GN), 0);
}

/* Rank r's part (rckpt_group_part_make), encoded: its records go to
 * recs[global chunk], their manifest entries to ent[]. */
static void encode_part(const rckpt_tset_t *ts, const rckpt_layout_t *l, const rckpt_group_data_t *d,
			uint64_t step, rckpt_buf_t *recs, rckpt_mf_chunk_t *ent)
{
	rckpt_group_part_t part;
	rckpt_ckenc_opts_t o;
	rckpt_ckenc_t *e = NULL;
	rckpt_ckenc_out_t out;
	rckpt_ckenc_stats_t st;
	rckpt_manifest_t mf;
	char msg[256];
	uint32_t c, k;

	assert_int_equal(rckpt_group_part_make(&part, ts, l, d), 0);
	assert_int_equal(part.layout.nchunks, d->nowned);
	rckpt_ckenc_opts_default(&o);
	o.chunk_params = CHUNK;
	o.layout = &part.layout;
	assert_int_equal(rckpt_ckenc_create(&e, &o), 0);
	memset(&out, 0, sizeof(out));
	if (rckpt_ckenc_step(e, &out, &st, &part.ts, NULL, step, msg, sizeof(msg)))
		fail_msg("encode: %s", msg);
	assert_int_equal(out.nchunks, d->nowned);
	assert_int_equal(rckpt_manifest_decode(&mf, out.manifest.p, out.manifest.len), 0);
	for (c = 0; c < d->nowned; c++) {
		const uint32_t g = part.chunk[c];
		rckpt_record_t rec;
		assert_int_equal(g, d->owned[c].chunk);
		recs[g] = out.records[c];
		memset(&out.records[c], 0, sizeof(out.records[c]));
		ent[g] = mf.chunk[c];
		/* the record names the global tensors */
		assert_int_equal(rckpt_record_decode(&rec, recs[g].p, recs[g].len, NULL, NULL), 0);
		assert_int_equal(rec.nseg, l->npieces[g]);
		for (k = 0; k < rec.nseg; k++) {
			assert_int_equal(rec.seg[k].tensor, l->pieces[g][k].tensor);
			assert_true(rec.seg[k].first == l->pieces[g][k].first && rec.seg[k].n == l->pieces[g][k].n);
		}
		rckpt_record_free(&rec);
	}
	rckpt_manifest_free(&mf);
	rckpt_ckenc_out_free(&out);
	rckpt_ckenc_destroy(e);
	rckpt_group_part_free(&part);
}

static void test_encode_parts(void **state)
{
	rckpt_tensor_t t[GN];
	rckpt_tset_t ts;
	rckpt_layout_t l;
	rckpt_group_plan_t g;
	holdings_t h;
	hub_t hub;
	xrank_t X[3];
	pthread_t th[3];
	model_t m;
	rckpt_buf_t recs[64];
	rckpt_mf_chunk_t ent[64];
	rckpt_manifest_t mf;
	rckpt_buf_t man = RCKPT_BUF_INIT;
	rckpt_ckdec_t dec;
	const uint8_t *rp[64];
	size_t rl[64];
	unsigned r, i, k;
	rckpt_ckenc_opts_t dflt;

	(void)state;
	gmodel(t, &ts);
	assert_int_equal(rckpt_layout_build(&l, &ts, CHUNK), 0);
	assert_true(l.nchunks >= 6 && l.nchunks <= 64);
	memset(&m, 0, sizeof(m));
	m.ts = ts;
	h = sharded(&m, 3); /* NT-agnostic: it reads m.ts */
	assert_int_equal(rckpt_group_plan(&g, &l, &ts, 3, (const rckpt_piece_t *const *)h.r, h.n), 0);
	hub_init(&hub);
	memset(recs, 0, sizeof(recs));
	for (r = 0; r < 3; r++) {
		X[r] = (xrank_t){ &hub, &g, &l, &m, { { 0 } }, 0, r, 3, { 0 }, 0 };
		for (k = 0; k < h.n[r]; k++) {
			const rckpt_piece_t *pc = &h.r[r][k];
			const size_t es = rckpt_dtype_size(ts.t[pc->tensor].dtype);
			X[r].held[X[r].nheld++] =
				(rckpt_hold_t){ pc->tensor, pc->first, pc->n, ts.t[pc->tensor].data + pc->first * es };
		}
		assert_int_equal(pthread_create(&th[r], NULL, xchg_rank, &X[r]), 0);
	}
	for (r = 0; r < 3; r++) {
		pthread_join(th[r], NULL);
		assert_int_equal(X[r].rc, 0);
	}
	for (r = 0; r < 3; r++) {
		encode_part(&ts, &l, &X[r].out, 7, recs, ent);
		rckpt_group_data_free(&X[r].out);
	}
	/* the step's manifest, from the layout and the parts' entries */
	memset(&mf, 0, sizeof(mf));
	mf.step = 7;
	mf.parent = RCKPT_NO_PARENT;
	mf.chunk_params = CHUNK;
	rckpt_ckenc_opts_default(&dflt);
	assert_int_equal(rckpt_group_manifest(&man, &l, &ts, dflt.fixed.lossless_kinds, ent, &mf), 0);
	for (i = 0; i < l.nchunks; i++) {
		rp[i] = recs[i].p;
		rl[i] = recs[i].len;
		assert_true(rl[i] > 0);
	}
	memset(&dec, 0, sizeof(dec));
	assert_int_equal(rckpt_ckdec_step(&dec, man.p, man.len, rp, rl), 0);
	for (i = 0; i < GN; i++) {
		const rckpt_ctensor_t *ct = &ts.t[i];
		float *got = malloc(ct->n * sizeof(float)), *want = malloc(ct->n * sizeof(float));
		double num = 0, den = 0;
		uint64_t e;
		assert_true(got && want);
		assert_int_equal(rckpt_ckdec_tensor_f32(&dec, i, got), 0);
		rckpt_widen_to_f32(want, ct->data, ct->dtype, ct->n);
		for (e = 0; e < ct->n; e++) {
			num += (got[e] - want[e]) * (double)(got[e] - want[e]);
			den += want[e] * (double)want[e];
		}
		print_message("%s: relative error %.2g\n", ct->name, num / den);
		if (strcmp(ct->name, "norm.weight") == 0) { /* its bf16 */
			bf16_round(want, ct->n);
			assert_memory_equal(got, want, ct->n * sizeof(float));
		} else
			assert_true(num / den < 0.01);
		free(got);
		free(want);
	}
	rckpt_ckdec_free(&dec);
	rckpt_buf_free(&man);
	for (i = 0; i < l.nchunks; i++)
		rckpt_buf_free(&recs[i]);
	holdings_free(&h);
	rckpt_group_plan_free(&g);
	rckpt_layout_free(&l);
	rckpt_tset_free(&ts);
	hub_destroy(&hub);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replicated),
		cmocka_unit_test(test_sharded),
		cmocka_unit_test(test_sharded_large),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_exchange),
		cmocka_unit_test(test_allgather),
		cmocka_unit_test(test_encode_parts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
