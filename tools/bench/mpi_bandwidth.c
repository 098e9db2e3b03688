/* Peer baseline for isometry_bench: one-way MPI_Send/MPI_Recv bandwidth
 * between two ranks on this node.
 *
 * Usage: mpi_bandwidth BYTES ITERATIONS WARMUP
 *
 * Rank 0 sends BYTES to rank 1, 1 + WARMUP + ITERATIONS times back to back.
 * Rank 1 starts its clock when the message after the warm-up arrives and
 * stops it when the last one arrives, so the clock covers exactly ITERATIONS
 * transfers and no launch or start-up skew between the ranks. Rank 1 prints
 * one line, which peers.cc parses:
 *   bytes=B iterations=N seconds=S bytes_per_s=R
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kTag = 7 };

static long long ParsePositive(const char* s) {
  char* end = NULL;
  const long long v = strtoll(s, &end, 10);
  return (end != s && *end == '\0' && v > 0) ? v : -1;
}

static void Sender(char* buf, long long bytes, long long count) {
  for (long long i = 0; i < count; ++i)
    MPI_Send(buf, (int)bytes, MPI_BYTE, 1, kTag, MPI_COMM_WORLD);
}

/* Returns 0 on success; the last byte is checked so a transport that moves
 * nothing cannot report a bandwidth. */
static int Receiver(char* buf, long long bytes, long long iterations, long long warmup) {
  for (long long i = 0; i < warmup + 1; ++i)
    MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const double t0 = MPI_Wtime();
  for (long long i = 0; i < iterations; ++i)
    MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const double seconds = MPI_Wtime() - t0;
  if (buf[bytes - 1] != 'x') {
    fprintf(stderr, "mpi_bandwidth: received data is wrong\n");
    return 1;
  }
  printf("bytes=%lld iterations=%lld seconds=%.6f bytes_per_s=%.6e\n", bytes, iterations, seconds,
         (double)bytes * (double)iterations / seconds);
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long long bytes = argc == 4 ? ParsePositive(argv[1]) : -1;
  const long long iterations = argc == 4 ? ParsePositive(argv[2]) : -1;
  const long long warmup = argc == 4 ? ParsePositive(argv[3]) : -1;
  /* MPI counts are int; larger messages would need derived datatypes. */
  if (size != 2 || bytes < 0 || bytes > 0x7fffffff || iterations < 0 || warmup < 0) {
    if (rank == 0) fprintf(stderr, "usage: mpiexec -n 2 mpi_bandwidth BYTES ITERATIONS WARMUP\n");
    MPI_Finalize();
    return 2;
  }
  char* buf = malloc((size_t)bytes);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
  /* Touch every page before timing so page faults are not measured. */
  memset(buf, rank == 0 ? 'x' : 0, (size_t)bytes);
  int rc = 0;
  if (rank == 0)
    Sender(buf, bytes, 1 + warmup + iterations);
  else
    rc = Receiver(buf, bytes, iterations, warmup);
  free(buf);
  MPI_Finalize();
  return rc;
}
