/*
 * rv_hub.c — a rendezvous transport for tests (rv_hub.h).
 */
#include "rv_hub.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void hub_init(hub_t *h)
{
	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
}

void hub_destroy(hub_t *h)
{
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
}

void hub_close(hub_t *h)
{
	pthread_mutex_lock(&h->mu);
	h->closed = 1;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

int hub_send(void *ctx, unsigned peer, const void *buf, size_t len)
{
	port_t *p = ctx;
	hub_t *h = p->hub;
	uint8_t *copy = NULL;
	int ok;
	pthread_mutex_lock(&h->mu);
	if (h->corrupt && len == 16) {
		copy = malloc(len);
		memcpy(copy, buf, len);
		copy[0] ^= 1;
		buf = copy;
		h->corrupt = 0;
	}
	h->msg[p->rank][peer] = buf;
	h->len[p->rank][peer] = len;
	h->taken[p->rank][peer] = 0;
	pthread_cond_broadcast(&h->cv);
	while (!h->taken[p->rank][peer] && !h->closed)
		pthread_cond_wait(&h->cv, &h->mu);
	ok = h->taken[p->rank][peer];
	h->msg[p->rank][peer] = NULL;
	pthread_mutex_unlock(&h->mu);
	free(copy);
	return ok ? 0 : -EPIPE;
}

int hub_recv(void *ctx, unsigned peer, void *buf, size_t len)
{
	port_t *p = ctx;
	hub_t *h = p->hub;
	int rc = 0;
	pthread_mutex_lock(&h->mu);
	while ((h->msg[peer][p->rank] == NULL || h->taken[peer][p->rank]) && !h->closed)
		pthread_cond_wait(&h->cv, &h->mu);
	if (h->msg[peer][p->rank] == NULL || h->taken[peer][p->rank])
		rc = -EPIPE;
	else if (h->len[peer][p->rank] != len)
		rc = -EIO;
	else
		memcpy(buf, h->msg[peer][p->rank], len);
	if (rc != -EPIPE)
		h->taken[peer][p->rank] = 1;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	return rc;
}

