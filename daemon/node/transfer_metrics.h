// What the metrics endpoint counts of client copies as they end (GET
// /metrics, docs/reference/metrics.md): how long the ones that succeeded
// took, by size class; the ones that failed, by status code; and the bytes
// each client uid moved.
//
// Memory is bounded: the histograms are fixed, the codes are absl's 17,
// and at most kMaxUids uids are told apart (later ones count under
// kOtherUids), since a node's users, not its clients, set that number.
//
// Thread-safety: none; Node::Impl holds it under its mu (it is updated
// where a transfer's end is recorded, which holds that lock anyway).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "core/histogram.h"
#include "core/status.h"

namespace isometry {

// A plain copy of TransferMetrics' numbers (NodeStatus::ended).
struct EndedTransfers {
  // Duration of the transfers that ended done, per kSizeClasses entry.
  std::vector<HistogramCounts> duration;
  // Failed transfers per absl::StatusCode, every code but OK and CANCELLED.
  std::vector<std::pair<absl::StatusCode, uint64_t>> failed;
  std::map<int64_t, uint64_t> bytes_by_uid;  // done transfers' bytes
};

class TransferMetrics {
 public:
  // Size classes by the transfer's bytes: below 64 KiB, 1 MiB, 64 MiB, and
  // the rest; the labels as served.
  static constexpr std::array<uint64_t, 3> kSizeLimits = {64ull << 10, 1ull << 20, 64ull << 20};
  static constexpr std::array<std::string_view, 4> kSizeClasses = {"<64KiB", "<1MiB", "<64MiB",
                                                                   ">=64MiB"};
  static constexpr size_t kMaxUids = 256;
  static constexpr int64_t kOtherUids = -2;  // -1: not known (a gRPC client)

  TransferMetrics();

  // One ended client copy: `uid` its owner's (-1: not known).
  void Record(const Status& status, uint64_t bytes, double elapsed_s, int64_t uid);
  EndedTransfers Snapshot() const;

  // The kSizeClasses index of a transfer of `bytes`.
  static size_t SizeClass(uint64_t bytes);

 private:
  std::array<std::unique_ptr<Histogram>, kSizeClasses.size()> duration_;
  std::array<uint64_t, 17> failed_{};  // by absl::StatusCode (0..16)
  std::map<int64_t, uint64_t> bytes_by_uid_;
};

}  // namespace isometry
