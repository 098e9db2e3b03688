// What the daemon is doing, from a C++ program: its channels with their
// queues, the copies it runs, and the plan it would choose for a copy
// (`isoctl channels`, `isoctl transfers` and `isoctl explain` as calls).
//
//   auto in = isometry::client::Inspector::Connect({});  // /run/isometry/grpc.sock
//   auto channels = (*in)->ListChannels();
//   auto plan = (*in)->Explain({.src_memory = "sys0", .dst_memory = "ssd0",
//                               .src = shape, .dst = shape});
//
// These calls speak gRPC to the daemon's gRPC socket (config key
// `grpc_socket`), not the local socket a Client uses: they need no session
// and hold nothing in the daemon, so an Inspector may come and go freely
// beside any number of Clients. Every call fails with UNAVAILABLE, naming
// the socket, when the daemon does not answer within the timeout.
//
// Thread-safety: one Inspector may be used from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "core/status.h"

namespace isometry::client {

struct InspectorOptions {
  std::string grpc_socket = "/run/isometry/grpc.sock";
  std::chrono::milliseconds timeout{5000};  // per call
};

struct ChannelSummary {
  std::string name;
  std::string kind;                // memcpy, cma, disk, tcp, rdma, cuda
  std::vector<std::string> edges;  // "sys0->reg0"
  int32_t threads = 0;
  int32_t max_in_flight = 0;  // 0 on network channels (credits bound them)
  int32_t requests_in_flight = 0;
  uint64_t queued = 0;  // XDs waiting, all priorities
  uint64_t requests_done = 0;
  uint64_t bytes_done = 0;
  double current_bytes_per_s = 0;       // over the last second
  double peak_bytes_per_s = 0;          // best one-second window since start
  uint64_t rate_limit_bytes_per_s = 0;  // 0: none
  std::string limits;                   // a network channel's own bounds, in words
};

struct TransferSummary {
  uint64_t id = 0;
  std::string state;                              // waiting, running, done, failed, cancelled
  absl::StatusCode code = absl::StatusCode::kOk;  // of the final status
  std::string message;
  int32_t priority = 0;
  uint64_t bytes = 0;
  double elapsed_s = 0;
  std::string path;  // "sys0 -memcpy-> ssd0"
  double predicted_bytes_per_s = 0;
  double measured_bytes_per_s = 0;  // 0 until it ended "done"
  std::string remote_half;          // set on a half another node started
};

// A copy to explain: the two ends as Copy() would get them. Two layout
// ends must describe the same bounds and fields (their layouts may
// differ); either end may be elements of a datatype instead.
struct ExplainQuery {
  std::string src_memory;
  std::string dst_memory;
  Description src;
  Description dst;
};

struct PlanStep {
  std::string src_memory;
  std::string dst_memory;
  std::string channel;
  uint64_t request_bytes = 0;  // bytes per request (one chunk of this hop)
  uint64_t buffer_bytes = 0;   // intermediate buffer after this hop (0: none)
  double predicted_bytes_per_s = 0;
};

struct PlanExplanation {
  std::string algorithm;  // simple, full or explicit
  std::vector<PlanStep> hops;
  double predicted_bytes_per_s = 0;  // the slowest hop's
  uint64_t chunks = 0;
  uint64_t chunk_bytes = 0;
  std::string why;   // datatypes: the forms and the zero-copy choice
  std::string text;  // what `isoctl explain` prints
};

class Inspector {
 public:
  // Fails with UNAVAILABLE when the socket does not answer within the
  // timeout.
  static Result<std::unique_ptr<Inspector>> Connect(const InspectorOptions& options);
  ~Inspector();
  Inspector(const Inspector&) = delete;
  Inspector& operator=(const Inspector&) = delete;

  Result<std::vector<ChannelSummary>> ListChannels();
  // Every copy queued or running now, all sessions' (a copy that ended is
  // no longer listed: its owner heard how it ended from Wait or Copy).
  Result<std::vector<TransferSummary>> ListTransfers();
  // The plan the daemon would choose now; nothing is copied. INVALID_ARGUMENT
  // (from the daemon, naming the problem) for ends no copy could join.
  Result<PlanExplanation> Explain(const ExplainQuery& query);

 private:
  struct Impl;
  explicit Inspector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace isometry::client
