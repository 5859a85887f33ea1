/*
 * rv_hub.h — a rendezvous transport for tests: ranks as threads of one
 * process, a message waiting in its slot until its receiver takes it and
 * the sender waiting for that (as MPI's synchronous sends do). The send
 * and recv of rckpt_loc_transport_t, ctx a port_t. hub_close ends every
 * wait with -EPIPE (a rank gave up).
 */
#ifndef RV_HUB_H
#define RV_HUB_H

#include <pthread.h>
#include <stddef.h>

#define RV_HUB_MAX 8

typedef struct hub {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const void *msg[RV_HUB_MAX][RV_HUB_MAX]; /* [from][to], at most one in flight */
	size_t len[RV_HUB_MAX][RV_HUB_MAX];
	int taken[RV_HUB_MAX][RV_HUB_MAX];
	int corrupt;                 /* damage the next 16-byte message (a header) */
	int closed;                  /* a rank gave up: waits end with -EPIPE */
} hub_t;

typedef struct port {
	hub_t *hub;
	unsigned rank;
} port_t;

void hub_init(hub_t *h);
void hub_destroy(hub_t *h);
void hub_close(hub_t *h);
int hub_send(void *ctx, unsigned peer, const void *buf, size_t len);
int hub_recv(void *ctx, unsigned peer, void *buf, size_t len);

#endif
