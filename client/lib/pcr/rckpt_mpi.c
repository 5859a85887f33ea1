/*
 * rckpt_mpi.c — librckpt_mpi: the locality-aware loader's transport over
 * MPI, for C trainers that already run under mpirun. Blocking sends and
 * receives of MPI_BYTE on the caller's communicator, in pieces of at most
 * 1 GiB (MPI counts are ints). A communicator of its own (MPI_Comm_dup)
 * keeps the loader's messages apart from the trainer's.
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>

#include "rckpt.h"

#define TAG 0x7263 /* "rc" */
#define PIECE ((size_t)1 << 30)

static int mpi_send(void *ctx, unsigned peer, const void *buf, size_t len)
{
	const char *p = buf;
	do {
		const int n = (int)(len > PIECE ? PIECE : len);
		if (MPI_Send(p, n, MPI_BYTE, (int)peer, TAG, *(MPI_Comm *)ctx) != MPI_SUCCESS)
			return -EIO;
		p += n;
		len -= (size_t)n;
	} while (len);
	return 0;
}

static int mpi_recv(void *ctx, unsigned peer, void *buf, size_t len)
{
	char *p = buf;
	do {
		const int n = (int)(len > PIECE ? PIECE : len);
		MPI_Status st;
		int got = 0;
		if (MPI_Recv(p, n, MPI_BYTE, (int)peer, TAG, *(MPI_Comm *)ctx, &st) != MPI_SUCCESS ||
		    MPI_Get_count(&st, MPI_BYTE, &got) != MPI_SUCCESS || got != n)
			return -EIO;
		p += n;
		len -= (size_t)n;
	} while (len);
	return 0;
}

int rckpt_loc_transport_mpi(void *comm, rckpt_loc_transport_t *out)
{
	int rank, size, inited = 0;
	if (comm == NULL || out == NULL)
		return -EINVAL;
	if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited)
		return -EINVAL;
	if (MPI_Comm_rank(*(MPI_Comm *)comm, &rank) != MPI_SUCCESS ||
	    MPI_Comm_size(*(MPI_Comm *)comm, &size) != MPI_SUCCESS)
		return -EINVAL;
	out->ctx = comm;
	out->rank = (unsigned)rank;
	out->size = (unsigned)size;
	out->send = mpi_send;
	out->recv = mpi_recv;
	return 0;
}
