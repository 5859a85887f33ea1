/*
 * mpi_test.h — what the tests run under mpirun share: CHECK (a failed
 * check names the rank and aborts every rank) and the skip rule of
 * test_skip.h for a program that cannot run here (rank 0 says why; the
 * exit is 77, skipped, unless RCKPT_REQUIRE_CLUSTER=1 or
 * RCKPT_REQUIRE_ALL=1 requires it: then 1). Define `rank` before including.
 */
#ifndef RCKPT_MPI_TEST_H
#define RCKPT_MPI_TEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c, ...)                                                              \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, \
				__FILE__, __LINE__, #c);                           \
			fprintf(stderr, __VA_ARGS__);                              \
			fputc('\n', stderr);                                       \
			MPI_Abort(MPI_COMM_WORLD, 1);                              \
		}                                                                  \
	} while (0)

/* Ends the program when it cannot run here: MPI_Finalize, and the status
 * rank `me` exits with. */
static inline int mpi_test_skip(int me, const char *why)
{
	const char *rc = getenv("RCKPT_REQUIRE_CLUSTER"), *ra = getenv("RCKPT_REQUIRE_ALL");
	const int required = (rc && strcmp(rc, "1") == 0) || (ra && strcmp(ra, "1") == 0);
	if (me == 0)
		printf("%s: %s%s\n", required ? "failed" : "skipped", why,
		       required ? " (RCKPT_REQUIRE_CLUSTER=1 or RCKPT_REQUIRE_ALL=1 requires it to run)" : "");
	MPI_Finalize();
	return me == 0 ? (required ? 1 : 77) : 0;
}

#endif
