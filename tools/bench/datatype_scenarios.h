// Datatype rows (issue #14): copies between two processes' private memory
// described by MPI-style datatypes, through a private isometryd and its
// CMA channel, against MPI_Send/MPI_Recv of the same types with MPICH and
// Open MPI (tools/bench/mpi_datatype.c); what memoized translation saves;
// and a contiguous 64 MiB copy against one process_vm_readv.
//
// The second process is this binary run as a peer (DatatypePeerMain): it
// fills 64 MiB of its own memory with mpi_datatype.c's pattern, registers
// and publishes it; the benchmark process copies from it into its own
// registered memory, and checks the bytes once per row before timing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/bench/bench_report.h"

namespace isometry::bench {

struct DatatypeOptions {
  std::string isometryd;   // the daemon binary
  std::string source_dir;  // tools/bench, for mpi_datatype.c
  int rounds = 5;          // paired rounds per row
  double seconds = 0.2;    // timed copies per side and round
  bool peers = true;       // also run MPICH / Open MPI
  // The benchmark's client runs the hops into its own memory itself
  // (ClientOptions::run_own_hops); false: the daemon writes it by CMA.
  bool own_hops = true;
  // Copies read the peer's memory by a direct read lease
  // (ClientOptions::direct_reads); false: through the daemon.
  bool direct_reads = true;
  uint32_t direct_read_threads = 2;  // ClientOptions::direct_read_threads
  // Direct reads go through the peer's serve window (the peer packs,
  // ClientOptions::served_reads); false: through the kernel.
  bool served_reads = true;
  // Only these rows' kernels ("vector" for every vector row, "contig",
  // "mixed" for datatype -> mixed-field layout rows, DatatypeKernelNames());
  // empty: all.
  std::vector<std::string> only;
};

void RunDatatype(const DatatypeOptions& o, Report& report);

// The first argument that makes isometry_bench the peer process:
//   isometry_bench --datatype-peer SOCKET BYTES
constexpr char kDatatypePeerFlag[] = "--datatype-peer";
// The peer: prints "<range id> <address>\n" once its range is published,
// then lives until its stdin closes. The exit status.
int DatatypePeerMain(const std::string& socket, uint64_t bytes);

}  // namespace isometry::bench
