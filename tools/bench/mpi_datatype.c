/* Peer baseline for isometry_bench's datatype rows: one-way MPI_Send /
 * MPI_Recv of non-contiguous data between two ranks on this node, both
 * ranks describing their buffer with the same derived datatype (what an
 * MPI program does instead of packing by hand).
 *
 * Usage: mpi_datatype KERNEL ITERATIONS WARMUP [BLOCK]
 *
 * KERNEL is one of (tools/bench/datatype_kernels.h describes the same
 * types for Isometry; keep the two in step):
 *   vector        2 MiB of bytes as a vector with blocks of BLOCK bytes and
 *                 a stride of 2 x BLOCK (BLOCK from 8 B to 2 MiB)
 *   wrf_y_vec     in the style of DDTBench's WRF y-vector exchange: a struct
 *                 of four 3-D float arrays [32][64][64], each a subarray of
 *                 3 y-rows (768 B blocks)
 *   milc_su3_zd   in the style of MILC su3_zdown: a 4-D lattice [8][8][8][8]
 *                 of su3 vectors (6 floats), the z = 0 face (8 blocks of
 *                 8 x 8 sites, 1.5 KiB each)
 *   nas_mg_z      in the style of NAS_MG's face exchanges: a [66][66][66]
 *                 double grid, the face x = 1 (one 8 B element per row)
 *   specfem3d_oc  in the style of SPECFEM3D's outer-core exchange: an
 *                 indexed_block of single floats at 12,000 irregular points
 *                 of a 262,144-float array
 *   lammps_atomic in the style of LAMMPS atomic: 4,000 irregular atoms of
 *                 a 65,536-atom system, each sending x (3 doubles), v (3
 *                 doubles) and its type (1 int) from three arrays: a struct
 *                 of three indexed_blocks
 *   fft2d         a 2-D FFT's transpose: the sender's 256 x 256 complex
 *                 doubles read column by column (vector of 1 element
 *                 resized to one element, 256 of them); the receiver's
 *                 buffer is contiguous
 *
 * Rank 0 sends 1 + WARMUP + ITERATIONS messages; rank 1 times the last
 * ITERATIONS and prints one line, which the benchmark parses:
 *   kernel=K bytes=B iterations=N seconds=S bytes_per_s=R
 * where B is the packed size (MPI_Type_size x count). The receiver checks
 * every received element against the pattern the sender wrote, so a
 * transport that moves the wrong bytes cannot report a bandwidth.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kTag = 9 };

typedef struct {
  MPI_Datatype send_type, recv_type;
  int send_count, recv_count;
  MPI_Aint send_span, recv_span; /* buffer bytes from the origin */
} Kernel;

static long long ParsePositive(const char* s) {
  char* end = NULL;
  const long long v = strtoll(s, &end, 10);
  return (end != s && *end == '\0' && v > 0) ? v : -1;
}

/* Sorted distinct pseudo-random indices in [0, n): the same list on both
 * ranks (a fixed seed). */
static int* IrregularIndices(int count, int n, unsigned seed) {
  int* idx = malloc(sizeof(int) * (size_t)count);
  unsigned char* taken = calloc((size_t)n, 1);
  for (int i = 0; i < count;) {
    seed = seed * 1103515245u + 12345u;
    const int v = (int)((seed >> 8) % (unsigned)n);
    if (!taken[v]) {
      taken[v] = 1;
      ++i;
    }
  }
  for (int v = 0, i = 0; v < n; ++v) {
    if (taken[v]) idx[i++] = v;
  }
  free(taken);
  return idx;
}

static void Same(Kernel* k, MPI_Datatype t, int count, MPI_Aint span) {
  MPI_Type_commit(&t);
  k->send_type = k->recv_type = t;
  k->send_count = k->recv_count = count;
  k->send_span = k->recv_span = span;
}

static int MakeKernel(const char* name, long long block, Kernel* k) {
  if (strcmp(name, "vector") == 0) {
    const int count = (int)((2 << 20) / block);
    MPI_Datatype t;
    MPI_Type_vector(count, (int)block, (int)(2 * block), MPI_BYTE, &t);
    Same(k, t, 1, (MPI_Aint)(4 << 20));
  } else if (strcmp(name, "wrf_y_vec") == 0) {
    int sizes[3] = {32, 64, 64}, sub[3] = {32, 3, 64}, starts[3] = {0, 3, 0};
    MPI_Datatype one, t;
    MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_FLOAT, &one);
    const MPI_Aint array = 32 * 64 * 64 * 4;
    int lens[4] = {1, 1, 1, 1};
    MPI_Aint disps[4] = {0, array, 2 * array, 3 * array};
    MPI_Datatype types[4] = {one, one, one, one};
    MPI_Type_create_struct(4, lens, disps, types, &t);
    MPI_Type_free(&one);
    Same(k, t, 1, 4 * array);
  } else if (strcmp(name, "milc_su3_zd") == 0) {
    MPI_Datatype su3, t;
    MPI_Type_contiguous(6, MPI_FLOAT, &su3);
    /* [t][z][y][x]: z = 0 is one block of y*x sites per t. */
    MPI_Type_vector(8, 8 * 8, 8 * 8 * 8, su3, &t);
    MPI_Type_free(&su3);
    Same(k, t, 1, (MPI_Aint)8 * 8 * 8 * 8 * 24);
  } else if (strcmp(name, "nas_mg_z") == 0) {
    MPI_Datatype t;
    const int n = 66;
    MPI_Type_vector(n * n, 1, n, MPI_DOUBLE, &t);
    Same(k, t, 1, (MPI_Aint)n * n * n * 8);
  } else if (strcmp(name, "specfem3d_oc") == 0) {
    int* idx = IrregularIndices(12000, 262144, 7u);
    MPI_Datatype t;
    MPI_Type_create_indexed_block(12000, 1, idx, MPI_FLOAT, &t);
    free(idx);
    Same(k, t, 1, (MPI_Aint)262144 * 4);
  } else if (strcmp(name, "lammps_atomic") == 0) {
    const int atoms = 65536, sent = 4000;
    int* idx = IrregularIndices(sent, atoms, 11u);
    int* idx3 = malloc(sizeof(int) * (size_t)sent);
    for (int i = 0; i < sent; ++i) idx3[i] = 3 * idx[i];
    MPI_Datatype xv, type, t;
    MPI_Type_create_indexed_block(sent, 3, idx3, MPI_DOUBLE, &xv);
    MPI_Type_create_indexed_block(sent, 1, idx, MPI_INT, &type);
    const MPI_Aint x_bytes = (MPI_Aint)atoms * 24;
    int lens[3] = {1, 1, 1};
    MPI_Aint disps[3] = {0, x_bytes, 2 * x_bytes};
    MPI_Datatype types[3] = {xv, xv, type};
    MPI_Type_create_struct(3, lens, disps, types, &t);
    MPI_Type_free(&xv);
    MPI_Type_free(&type);
    free(idx);
    free(idx3);
    Same(k, t, 1, 2 * x_bytes + (MPI_Aint)atoms * 4);
  } else if (strcmp(name, "fft2d") == 0) {
    const int n = 256;
    MPI_Datatype column, t;
    MPI_Type_vector(n, 1, n, MPI_C_DOUBLE_COMPLEX, &column);
    MPI_Type_create_resized(column, 0, 16, &t);
    MPI_Type_free(&column);
    MPI_Type_commit(&t);
    k->send_type = t;
    k->send_count = n;
    k->send_span = (MPI_Aint)n * n * 16;
    k->recv_type = MPI_C_DOUBLE_COMPLEX;
    k->recv_count = n * n;
    k->recv_span = k->send_span;
  } else {
    return -1;
  }
  return 0;
}

/* The byte at offset i of the sender's buffer. */
static unsigned char Pattern(MPI_Aint i) { return (unsigned char)(i * 131 + (i >> 9)); }

/* Packs the sender's pattern locally and compares it with what arrived in
 * the receiver's layout, packed the same way. */
static int Check(const Kernel* k, const unsigned char* received) {
  int size = 0;
  MPI_Type_size(k->send_type, &size);
  const long long packed = (long long)size * k->send_count;
  unsigned char* sent = malloc((size_t)k->send_span);
  for (MPI_Aint i = 0; i < k->send_span; ++i) sent[i] = Pattern(i);
  unsigned char* a = malloc((size_t)packed);
  unsigned char* b = malloc((size_t)packed);
  int pa = 0, pb = 0;
  MPI_Pack(sent, k->send_count, k->send_type, a, (int)packed, &pa, MPI_COMM_SELF);
  MPI_Pack(received, k->recv_count, k->recv_type, b, (int)packed, &pb, MPI_COMM_SELF);
  const int ok = pa == pb && pa == packed && memcmp(a, b, (size_t)packed) == 0;
  free(sent);
  free(a);
  free(b);
  return ok;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long long iterations = argc >= 4 ? ParsePositive(argv[2]) : -1;
  const long long warmup = argc >= 4 ? ParsePositive(argv[3]) : -1;
  const long long block = argc >= 5 ? ParsePositive(argv[4]) : 64;
  Kernel k;
  const int known = argc >= 4 ? MakeKernel(argv[1], block, &k) : -1;
  if (size != 2 || iterations < 0 || warmup < 0 || known != 0 || block <= 0 || block > (1 << 21) ||
      (2 << 20) % block != 0) {
    if (rank == 0) {
      fprintf(stderr,
              "usage: mpiexec -n 2 mpi_datatype KERNEL ITERATIONS WARMUP [BLOCK]\n"
              "  KERNEL: vector wrf_y_vec milc_su3_zd nas_mg_z specfem3d_oc lammps_atomic fft2d\n"
              "  BLOCK: vector block bytes, a power of two from 1 to 2097152\n");
    }
    MPI_Finalize();
    return 2;
  }
  int type_size = 0;
  MPI_Type_size(k.send_type, &type_size);
  const long long packed = (long long)type_size * k.send_count;
  int rc = 0;
  if (rank == 0) {
    unsigned char* buf = malloc((size_t)k.send_span);
    for (MPI_Aint i = 0; i < k.send_span; ++i) buf[i] = Pattern(i);
    for (long long i = 0; i < 1 + warmup + iterations; ++i)
      MPI_Send(buf, k.send_count, k.send_type, 1, kTag, MPI_COMM_WORLD);
    free(buf);
  } else {
    unsigned char* buf = calloc((size_t)k.recv_span, 1);
    for (long long i = 0; i < warmup + 1; ++i)
      MPI_Recv(buf, k.recv_count, k.recv_type, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t0 = MPI_Wtime();
    for (long long i = 0; i < iterations; ++i)
      MPI_Recv(buf, k.recv_count, k.recv_type, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double seconds = MPI_Wtime() - t0;
    if (!Check(&k, buf)) {
      fprintf(stderr, "mpi_datatype: %s: received data is wrong\n", argv[1]);
      rc = 1;
    } else {
      printf("kernel=%s bytes=%lld iterations=%lld seconds=%.6f bytes_per_s=%.6e\n", argv[1],
             packed, iterations, seconds, (double)packed * (double)iterations / seconds);
      fflush(stdout);
    }
    free(buf);
  }
  /* fft2d's receive type is predefined (not freed). */
  MPI_Type_free(&k.send_type);
  MPI_Finalize();
  return rc;
}
