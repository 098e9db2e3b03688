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
  int latency_iterations = 20000;  // per round
  int grpc_iterations = 2000;      // per round
  bool peers = true;               // also run UCX / MPICH / Open MPI
  int rounds = 5;                  // paired rounds of first_copy and latency
  // latency: daemon.ring_poll_us of the daemon, ClientOptions::spin_us of
  // the ring client (docs/benchmarks/history/2026-11.md, "Small copies: polling and spinning").
  uint32_t ring_poll_us = 50;
  uint32_t client_spin_us = 50;
};

void RunClientToClient(const DaemonOptions& o, Report& report);
// 4 KiB copies on the ring and over gRPC against the in-process 4 KiB
// memcpy floor: each round takes every sample set once; a row is the
// median over rounds of the round's median (or p99) paired with the
// floor's, and carries the percentiles of all samples for a CDF. Ring
// copies run back to back, then 200 us apart on this daemon (its poll
// window run out) and on a second one in busy-poll mode (windows of
// 100 ms); with peers, the back-to-back median is paired with UCX's
// tag_lat round trip too.
void RunLatency(const DaemonOptions& o, Report& report);
// fresh_aos_soa_128MiB and fresh_contig_256MiB: each round
// allocates a fresh destination, copies into it, copies again into the same
// allocation; rows are medians of the paired rounds (first / repeated), and
// of (allocate + first copy) / repeated.
void RunFirstCopy(const DaemonOptions& o, Report& report);

}  // namespace isometry::bench
