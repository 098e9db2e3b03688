// Peer baselines: the bandwidth that UCX and two MPIs reach between two
// processes on this node (client-to-client and datatype scenarios) and
// UCX's small-message latency (latency scenario).
// Each runs the peer's own tools in subprocesses (killed after 60 s, so a
// hung peer cannot hang the benchmark) and never throws: a missing or failing
// tool gives ok=false with the reason in `detail`, which the benchmark prints
// as "unavailable: ...".
#pragma once

#include <cstdint>
#include <string>

namespace isometry::bench {

struct PeerResult {
  bool ok = false;
  double bytes_per_s = 0;
  std::string detail;  // the command run and its transport, or why it could not run
};

// ucx_perftest -t tag_bw between a server and a client process on this node,
// UCX restricted to shared-memory transports (UCX_TLS=shm), message size
// `bytes`, iterations chosen for about a second at nominal speed.
PeerResult UcxTagBwShm(uint64_t bytes);

struct PeerLatency {
  bool ok = false;
  double median_us = 0;
  std::string detail;  // the command run and its transport, or why it could not run
};

// ucx_perftest -t tag_lat (a ping-pong) between a server and a client
// process on this node over shared memory (UCX_TLS=shm), `bytes` messages,
// `iterations` timed after a tenth as many untimed: the median one-way
// latency as UCX prints it (half a round trip).
PeerLatency UcxTagLatShm(uint64_t bytes, uint64_t iterations);

enum class MpiFlavor { kMpich, kOpenMpi };

// Untimed messages before `iterations` timed ones: what every peer run
// here is given, and what the datatype rows give Isometry's copies and
// their process_vm_readv baseline, so that no side's timing includes a
// cold start (a sleeping thread's wake-up, caches another process left).
uint64_t WarmupFor(uint64_t iterations);

// Builds `source_dir`/mpi_bandwidth.c with the flavour's mpicc (once per
// process and flavour) and runs it as 2 ranks on this node over shared
// memory: rank 0 sends `bytes` to rank 1 with MPI_Send/MPI_Recv, and rank 1
// measures the bandwidth after a warm-up.
PeerResult MpiSendBandwidth(MpiFlavor flavor, uint64_t bytes, const std::string& source_dir);

// Builds `source_dir`/mpi_datatype.c the same way and runs it as 2 ranks:
// `iterations` timed MPI_Send/MPI_Recv of `kernel` (its KERNEL argument;
// `block` for "vector"), both ranks describing their buffer with the
// kernel's derived datatype; bytes_per_s counts packed bytes. The receiver
// checks the data, so a wrong transfer is ok=false.
PeerResult MpiDatatypeBandwidth(MpiFlavor flavor, const std::string& kernel, int64_t block,
                                uint64_t iterations, const std::string& source_dir);

}  // namespace isometry::bench
