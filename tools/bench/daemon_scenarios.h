// Scenarios of the daemon (daemon issue): client-to-client copies through
// the pools against UCX and both MPIs, and small-copy latency on the ring
// and over gRPC. Each starts a private isometryd.
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
  bool peers = true;  // also run UCX / MPICH / Open MPI
};

void RunClientToClient(const DaemonOptions& o, Report& report);
void RunLatency(const DaemonOptions& o, Report& report);

}  // namespace isometry::bench
