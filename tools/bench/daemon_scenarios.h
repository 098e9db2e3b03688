// Scenarios of the daemon (daemon issue): client-to-client copies through
// the pools against UCX and both MPIs, small-copy latency on the ring and
// over gRPC, and the first copy into a fresh allocation against a repeated
// copy into the same one. Each starts a private isometryd.
#pragma once

#include <cstdint>
#include <string>

#include "tools/bench/bench_report.h"

namespace isometry::bench {

struct DaemonOptions {
  std::string isometryd;   // the daemon binary
  std::string source_dir;  // tools/bench, for the MPI peer's source
  uint64_t client_bytes = 64ull << 20;
  int client_iterations = 40;
  int latency_iterations = 20000;
  int grpc_iterations = 5000;
  bool peers = true;          // also run UCX / MPICH / Open MPI
  int first_copy_rounds = 5;  // paired rounds of first_copy (at least 5)
};

void RunClientToClient(const DaemonOptions& o, Report& report);
void RunLatency(const DaemonOptions& o, Report& report);
// fresh_aos_soa_128MiB and fresh_contig_256MiB: each round
// allocates a fresh destination, copies into it, copies again into the same
// allocation; rows are medians of the paired rounds (first / repeated), and
// of (allocate + first copy) / repeated.
void RunFirstCopy(const DaemonOptions& o, Report& report);

}  // namespace isometry::bench
