/* ScaLAPACK's pdgemr2d on a 2-D block-cyclic array: the reference the
 * Isometry redistribution is checked against (tests/integration/
 * scalapack_redistribute_test.cc) and measured against
 * (tools/bench/scalapack_bench.cc). Run as P ranks under mpiexec:
 *
 *   scalapack_redistribute check M N P0 Q0 MB0 NB0 P1 Q1 MB1 NB1 OUTDIR
 *   scalapack_redistribute bench M N P0 Q0 MB0 NB0 P1 Q1 MB1 NB1 REPS
 *
 * The producer is an M x N array of doubles on a P0 x Q0 grid in MB0 x NB0
 * blocks, the consumer the same array on P1 x Q1 in MB1 x NB1 blocks; both
 * grids are row-major (BLACS "R": grid rank = row * Q + col), first block on
 * process (0, 0), local arrays column-major with LLD = local rows, as
 * ScaLAPACK keeps them. With P >= P0*Q0 + P1*Q1 ranks the grids are
 * disjoint (two jobs: producer on ranks 0.., consumer after it); with fewer
 * both start at rank 0 (P >= max of the two is needed).
 *
 * Element (i, j) (0-based, global) holds i * N + j, exact in a double for
 * any array that fits in memory. check: every consumer rank verifies its
 * part (mismatches printed, exit 1) and writes it, raw doubles in local
 * column-major order, to OUTDIR/consumer_<grid rank>.bin. bench: one
 * untimed pdgemr2d, then REPS timed ones (barrier to barrier, so the
 * slowest rank counts); rank 0 prints one line per repetition:
 *   pdgemr2d rep=R seconds=S gb_per_s=G
 * (GB = 1e9 bytes of the M*N*8 moved). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* BLACS (C interface) and ScaLAPACK (Fortran symbols: Debian's
 * libscalapack-mpich exports both pdgemr2d_ and Cpdgemr2d; the Fortran one
 * is ScaLAPACK's documented interface). Contexts are the same integers in
 * both interfaces with the MPI BLACS. */
void Cblacs_pinfo(int* me, int* procs);
void Cblacs_get(int ctxt, int what, int* value);
void Cblacs_gridmap(int* ctxt, int* usermap, int ldumap, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int ctxt);
void Cblacs_exit(int keep_mpi);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb,
               const int* irsrc, const int* icsrc, const int* ictxt, const int* lld, int* info);
void pdgemr2d_(const int* m, const int* n, double* a, const int* ia, const int* ja,
               const int* desca, double* b, const int* ib, const int* jb, const int* descb,
               const int* ictxt);

typedef struct {
  int p, q, mb, nb;
  int ctxt; /* -1 on ranks outside the grid */
  int row, col;
  int lrows, lcols;
  int desc[9];
  double* a;
} Grid;

static int ParseInt(const char* s, const char* what) {
  char* end = NULL;
  const long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > 1000000000L) {
    fprintf(stderr, "scalapack_redistribute: %s must be a positive integer, got '%s'\n", what, s);
    exit(2);
  }
  return (int)v;
}

/* The grid on ranks first .. first + p*q - 1, its descriptor and local
 * array (zeroed, so every page is touched before anything is timed). */
static void MakeGrid(Grid* g, int first, int m, int n) {
  int system_ctxt = 0;
  int* map = malloc(sizeof(int) * (size_t)(g->p * g->q));
  for (int r = 0; r < g->p; ++r) {
    for (int c = 0; c < g->q; ++c) map[r + c * g->p] = first + r * g->q + c;
  }
  Cblacs_get(0, 0, &system_ctxt);
  g->ctxt = system_ctxt;
  Cblacs_gridmap(&g->ctxt, map, g->p, g->p, g->q);
  free(map);
  g->a = NULL;
  g->lrows = g->lcols = 0;
  g->desc[1] = -1; /* CTXT_: "not in this grid" for pdgemr2d */
  if (g->ctxt < 0) return;
  int nprow = 0, npcol = 0, zero = 0, info = 0;
  Cblacs_gridinfo(g->ctxt, &nprow, &npcol, &g->row, &g->col);
  g->lrows = numroc_(&m, &g->mb, &g->row, &zero, &g->p);
  g->lcols = numroc_(&n, &g->nb, &g->col, &zero, &g->q);
  const int lld = g->lrows > 1 ? g->lrows : 1;
  descinit_(g->desc, &m, &n, &g->mb, &g->nb, &zero, &zero, &g->ctxt, &lld, &info);
  if (info != 0) {
    fprintf(stderr, "scalapack_redistribute: descinit argument %d is invalid\n", -info);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const size_t count = (size_t)g->lrows * (size_t)g->lcols;
  g->a = calloc(count ? count : 1, sizeof(double));
  if (!g->a) {
    fprintf(stderr, "scalapack_redistribute: out of memory for %zu doubles\n", count);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

/* Global index of local index `l` on process `coord` of `procs` in
 * blocks of `b` (first block on process 0). */
static long Global(int l, int b, int coord, int procs) {
  return ((long)(l / b) * procs + coord) * b + l % b;
}

static void Fill(const Grid* g, int n) {
  for (int j = 0; j < g->lcols; ++j) {
    const long gj = Global(j, g->nb, g->col, g->q);
    for (int i = 0; i < g->lrows; ++i) {
      g->a[(size_t)i + (size_t)j * (size_t)g->lrows] =
          (double)(Global(i, g->mb, g->row, g->p) * n + gj);
    }
  }
}

/* Mismatches on this consumer rank (the first few printed). */
static long Verify(const Grid* g, int n) {
  long bad = 0;
  for (int j = 0; j < g->lcols; ++j) {
    const long gj = Global(j, g->nb, g->col, g->q);
    for (int i = 0; i < g->lrows; ++i) {
      const long gi = Global(i, g->mb, g->row, g->p);
      const double v = g->a[(size_t)i + (size_t)j * (size_t)g->lrows];
      if (v != (double)(gi * n + gj) && bad++ < 5) {
        fprintf(stderr, "consumer (%d, %d): local (%d, %d) = global (%ld, %ld) holds %.17g\n",
                g->row, g->col, i, j, gi, gj, v);
      }
    }
  }
  return bad;
}

static int WriteLocal(const Grid* g, const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/consumer_%d.bin", dir, g->row * g->q + g->col);
  FILE* f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 1;
  }
  const size_t count = (size_t)g->lrows * (size_t)g->lcols;
  const int ok = fwrite(g->a, sizeof(double), count, f) == count;
  return (fclose(f) != 0 || !ok) ? (perror(path), 1) : 0;
}

static void Redistribute(int m, int n, Grid* from, Grid* to, int all_ctxt) {
  const int one = 1;
  pdgemr2d_(&m, &n, from->a, &one, &one, from->desc, to->a, &one, &one, to->desc, &all_ctxt);
}

int main(int argc, char** argv) {
  if (argc != 13 || (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "bench") != 0)) {
    fprintf(stderr,
            "usage: %s check|bench M N P0 Q0 MB0 NB0 P1 Q1 MB1 NB1 OUTDIR|REPS\n",
            argc > 0 ? argv[0] : "scalapack_redistribute");
    return 2;
  }
  MPI_Init(&argc, &argv);
  const int check = strcmp(argv[1], "check") == 0;
  const int m = ParseInt(argv[2], "M"), n = ParseInt(argv[3], "N");
  Grid src = {ParseInt(argv[4], "P0"), ParseInt(argv[5], "Q0"), ParseInt(argv[6], "MB0"),
              ParseInt(argv[7], "NB0"), -1, 0, 0, 0, 0, {0}, NULL};
  Grid dst = {ParseInt(argv[8], "P1"), ParseInt(argv[9], "Q1"), ParseInt(argv[10], "MB1"),
              ParseInt(argv[11], "NB1"), -1, 0, 0, 0, 0, {0}, NULL};
  const int reps = check ? 0 : ParseInt(argv[12], "REPS");
  int me = 0, procs = 0;
  Cblacs_pinfo(&me, &procs);
  const int ps = src.p * src.q, pd = dst.p * dst.q;
  if (procs < ps || procs < pd) {
    if (me == 0) fprintf(stderr, "scalapack_redistribute: %d ranks, grids need %d and %d\n", procs, ps, pd);
    MPI_Finalize();
    return 2;
  }
  MakeGrid(&src, 0, m, n);
  MakeGrid(&dst, procs >= ps + pd ? ps : 0, m, n);
  /* pdgemr2d's context must hold every process of both grids. */
  Grid all = {1, procs, 1, 1, -1, 0, 0, 0, 0, {0}, NULL};
  MakeGrid(&all, 0, 1, 1);
  if (src.ctxt >= 0) Fill(&src, n);
  int failed = 0;
  if (check) {
    Redistribute(m, n, &src, &dst, all.ctxt);
    if (dst.ctxt >= 0) {
      const long bad = Verify(&dst, n);
      if (bad) fprintf(stderr, "consumer (%d, %d): %ld mismatches\n", dst.row, dst.col, bad);
      failed = bad != 0 || WriteLocal(&dst, argv[12]) != 0;
    }
  } else {
    const double bytes = (double)m * (double)n * 8.0;
    for (int r = 0; r <= reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      Redistribute(m, n, &src, &dst, all.ctxt);
      MPI_Barrier(MPI_COMM_WORLD);
      const double s = MPI_Wtime() - t0;
      if (me == 0 && r > 0) {
        printf("pdgemr2d rep=%d seconds=%.6f gb_per_s=%.3f\n", r, s, bytes / s / 1e9);
        fflush(stdout);
      }
    }
    if (dst.ctxt >= 0 && Verify(&dst, n) != 0) failed = 1;
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  free(src.a);
  free(dst.a);
  free(all.a);
  Cblacs_exit(1);
  MPI_Finalize();
  return any ? 1 : 0;
}
